/*
 * cli_tune.c: the tuning decisions: --tune (times configurations ahead of
 * time; needs a GPU) and --list-tuning (reads the cache; needs neither a
 * GPU nor the compiler).  Both print a decision the same way: what was
 * chosen for which shapes, on what, and every time that was measured, so
 * that the choice explains itself.
 */
#include "config.h"
#include "cli_commands.h"
#include "cli_format.h"
#include "tokitai-jit.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ printing */

static void print_tuning_json(const tj_tuning *t)
{
  printf("{\"op\": ");
  cli_json_string(stdout, t->op);
  cli_json_member(stdout, "arch", t->arch);
  cli_json_member(stdout, "platform", t->platform);
  cli_json_member(stdout, "compiler", t->compiler);
  cli_json_member(stdout, "shape_class", t->shape_class);
  cli_json_member(stdout, "config", t->config);
  printf(", \"used\": %s, \"m\": %d, \"n\": %d, \"k\": %d",
         t->known ? "true" : "false", t->m, t->n, t->k);
  cli_json_member(stdout, "device", t->device);
  cli_json_member(stdout, "origin", t->origin);
  printf(", \"created\": %" PRId64 ", \"times\": [", t->created);
  for (int i = 0; i < t->num_times; i++) {
    printf(i ? ", {\"config\": " : "{\"config\": ");
    cli_json_string(stdout, t->times[i].config);
    printf(", \"ms\": %.6f, \"runs\": %d}", t->times[i].ms, t->times[i].runs);
  }
  printf("], \"rule\": ");
  cli_json_string_or_null(stdout, t->rule);
  printf("}");
}

/* The time of config among t's, in ms; 0 where it was not timed. */
static double time_of(const tj_tuning *t, const char *config)
{
  for (int i = 0; config && i < t->num_times; i++)
    if (strcmp(t->times[i].config, config) == 0 && t->times[i].runs > 0)
      return t->times[i].ms;
  return 0;
}

/* The decision, what it gains over the rule, then each candidate's median
 * against the fastest. */
static void print_tuning_lines(const cli_options *o, const tj_tuning *t)
{
  char when[32];
  cli_format_time(t->created, when, sizeof when);
  printf("%s%s %s%s on %s (%s): %s%s%s\n", cli_style(o, STYLE_BOLD), t->op,
         t->shape_class, cli_style(o, STYLE_RESET), t->arch, t->platform,
         cli_style(o, t->known ? STYLE_GREEN : STYLE_RED), t->config,
         cli_style(o, STYLE_RESET));
  printf("  timed %dx%dx%d on %s, %s (%s)\n", t->m, t->n, t->k,
         t->device[0] ? t->device : "an unknown device", when, t->origin);
  printf("  compiler %s\n", t->compiler);
  if (!t->known)
    printf("  ignored: this library has no configuration '%s' for %s (a "
           "newer or older release wrote it, or the row is damaged); the "
           "heuristic runs\n", t->config, t->op);
  if (t->num_times == 0) {
    printf("  (no times recorded)\n");
    return;
  }
  double chosen = time_of(t, t->config), rule = time_of(t, t->rule);
  if (t->rule && strcmp(t->rule, t->config) == 0)
    printf("  the rule's choice: the decision changes nothing\n");
  else if (chosen > 0 && rule > 0)
    printf("  without it the rule runs %s: %.2fx the chosen's time\n",
           t->rule, rule / chosen);
  double best = t->times[0].ms;
  for (int i = 0; i < t->num_times; i++) {
    const tj_tuning_time *x = &t->times[i];
    if (x->runs == 0) {
      printf("  %-26s set aside, not timed: its output differed from the "
             "rule's choice on the same inputs\n", x->config);
      continue;
    }
    int is_chosen = strcmp(x->config, t->config) == 0;
    int is_rule = t->rule && strcmp(x->config, t->rule) == 0;
    printf("  %-26s %10.4f ms  %3d runs  %5.2fx%s%s\n", x->config, x->ms,
           x->runs, best > 0 ? x->ms / best : 1.0, is_chosen ? "  chosen" : "",
           is_rule ? "  rule" : "");
  }
}

/* print_tuning_lines with every stored string escaped for a terminal
 * (cli_text): the device, say, is whatever the row says. */
static void print_tuning_text(const cli_options *o, const tj_tuning *raw)
{
  tj_tuning t = *raw;
  const char **field[] = {&t.op, &t.arch, &t.platform, &t.compiler,
                          &t.shape_class, &t.config, &t.device, &t.origin,
                          &t.rule};
  enum { NFIELD = sizeof field / sizeof field[0] };
  char *text[NFIELD] = {NULL};
  int n = raw->num_times > 0 ? raw->num_times : 0, ok = 1;
  tj_tuning_time *times = calloc((size_t)n + 1, sizeof *times);
  ok = times != NULL;
  for (int i = 0; ok && i < NFIELD; i++)
    if (*field[i])
      ok = (text[i] = cli_text(*field[i])) != NULL, *field[i] = text[i];
  for (int i = 0; ok && i < n; i++) {
    times[i] = raw->times[i];
    ok = (times[i].config = cli_text(raw->times[i].config)) != NULL;
  }
  t.times = times;
  if (ok)
    print_tuning_lines(o, &t);
  else
    cli_error("out of memory");
  for (int i = 0; times && i < n; i++)
    free((char *)times[i].config);
  free(times);
  for (int i = 0; i < NFIELD; i++)
    free(text[i]);
}

typedef struct print_ctx {
  const cli_options *o;
  uint64_t count;
} print_ctx;

static int print_tuning(const tj_tuning *t, void *arg)
{
  print_ctx *p = arg;
  if (p->o->json) {
    fputs(p->count ? ",\n  " : "\n  ", stdout);
    print_tuning_json(t);
  } else {
    if (p->count)
      putchar('\n');
    print_tuning_text(p->o, t);
  }
  p->count++;
  return 0;
}

/* ------------------------------------------------------------ --list-tuning */

int cli_list_tuning(const cli_options *o)
{
  tj_cache *c = NULL;
  int rc = tj_cache_open(&c, o->cache_path, TJ_CACHE_READONLY | o->cache_flags);
  if (rc == TJ_ENOENT && c) {
    if (o->json)
      puts("[]");
    else
      printf("%s (nothing has been cached yet)\n", tj_cache_errmsg(c));
    tj_cache_close(c);
    return EXIT_OK;
  }
  if (rc != TJ_OK) {
    cli_error("%s", c ? tj_cache_errmsg(c) : tj_strerror(rc));
    tj_cache_close(c);
    return EXIT_FAIL;
  }
  print_ctx p = {o, 0};
  if (o->json)
    fputs("[", stdout);
  rc = tj_cache_list_tuning(c, print_tuning, &p);
  if (rc != TJ_OK) {
    cli_error("listing the tuning decisions of %s: %s", tj_cache_path(c),
              tj_cache_errmsg(c));
  } else if (o->json) {
    fputs(p.count ? "\n]\n" : "]\n", stdout);
  } else if (p.count == 0) {
    printf("cache %s holds no tuning decisions\n", tj_cache_path(c));
  } else {
    printf("\n%" PRIu64 " tuning %s in %s\n", p.count,
           p.count == 1 ? "decision" : "decisions", tj_cache_path(c));
  }
  tj_cache_close(c);
  return rc == TJ_OK ? EXIT_OK : EXIT_FAIL;
}

/* ------------------------------------------------------------ --tune */

/* The call --tune gemm tunes at shape s: the options' types, layout and
 * epilogue; gemm_f16's combination for --tune gemm_f16. */
static tj_gemm_desc tune_desc(const cli_options *o, const int *s)
{
  tj_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.size = sizeof d;
  d.a_type = d.b_type = d.c_type = TJ_DTYPE_F16;
  if (cli_gemm_command(o)) {
    d.a_type = d.b_type = o->gemm_ab_type;
    d.c_type = o->gemm_c_type;
    d.trans_a = o->gemm_trans_a;
    d.trans_b = o->gemm_trans_b;
    d.epilogue = o->gemm_epilogue;
  }
  d.m = s[0], d.n = s[1], d.k = s[2];
  return d;
}

int cli_tune(const cli_options *o)
{
  if (strcmp(o->tune_op, "gemm_f16") != 0 && !cli_gemm_command(o)) {
    cli_error("--tune: '%s' has no configurations to tune (gemm and "
              "gemm_f16 have)", o->tune_op);
    return EXIT_FAIL;
  }
  tj_options opts = cli_runtime_options(o, NULL);
  tj_runtime *rt = NULL;
  int rc = tj_runtime_open(&rt, &opts);
  if (rc != TJ_OK) {
    cli_error("--tune needs a GPU to time kernels on: %s: %s",
              tj_strerror(rc), tj_errmsg(rt));
    tj_runtime_close(rt);
    return EXIT_FAIL;
  }
  print_ctx p = {o, 0};
  int failed = 0;
  if (o->json)
    fputs("[", stdout);
  for (int i = 0; i < o->nshapes; i++) {
    const int *s = o->shapes[i];
    if (o->progress && !o->json)
      fprintf(stderr, PROGRAM ": tuning %s %dx%dx%d...\n", o->tune_op, s[0],
              s[1], s[2]);
    tj_gemm_desc d = tune_desc(o, s);
    rc = tj_gemm_tune(rt, &d, print_tuning, &p);
    if (rc != TJ_OK) {
      cli_error("tuning %s %dx%dx%d: %s: %s", o->tune_op, s[0], s[1], s[2],
                tj_strerror(rc), tj_errmsg(rt));
      failed = 1;
    }
  }
  if (o->json)
    fputs(p.count ? "\n]\n" : "]\n", stdout);
  else if (p.count && tj_runtime_cache_path(rt))
    printf("\nrecorded in %s\n", tj_runtime_cache_path(rt));
  tj_runtime_close(rt);
  return failed ? EXIT_FAIL : EXIT_OK;
}
