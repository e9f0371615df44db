/*
 * cli_cache.c: the tokitai-jit commands that read or trim a cache file:
 * --list-cache, --stats, --verify-cache, --evict-older-than / --max-size,
 * --clear-cache.  None needs a GPU or the compiler.  A missing cache is
 * not an error (nothing has been compiled yet), and looking at one never
 * creates it.
 */
#include "config.h"
#include "cli_commands.h"
#include "cli_format.h"
#include "entries.h"
#include "tokitai-jit.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum { CACHE_OPEN, CACHE_MISSING, CACHE_ERROR };

/* Open the cache read-only first, so that a missing file stays missing;
 * then, for a command that writes, read-write, which also moves a file
 * that is not a database aside (the library says so in its message). */
static int open_cache(const cli_options *o, int writable, tj_cache **out)
{
  tj_cache *c = NULL;
  int rc = tj_cache_open(&c, o->cache_path,
                         o->system ? TJ_CACHE_SYSTEM
                                   : TJ_CACHE_READONLY | o->cache_flags);
  if (rc == TJ_ENOENT && c) {
    *out = c;
    return CACHE_MISSING;
  }
  if (writable && (rc == TJ_OK || rc == TJ_ECACHE)) {
    tj_cache_close(c);
    c = NULL;
    rc = tj_cache_open(&c, o->cache_path, o->cache_flags);
    if (rc == TJ_OK && *tj_cache_errmsg(c))
      cli_error("%s", tj_cache_errmsg(c));
  }
  *out = NULL;
  if (rc != TJ_OK) {
    cli_error("%s", c ? tj_cache_errmsg(c) : tj_strerror(rc));
    tj_cache_close(c);
    return CACHE_ERROR;
  }
  *out = c;
  return CACHE_OPEN;
}

/* The line for a cache that does not exist; JSON callers print their own. */
static int say_missing(const cli_options *o, tj_cache *c)
{
  if (!o->json)
    printf("%s (nothing has been cached yet)\n", tj_cache_errmsg(c));
  tj_cache_close(c);
  return EXIT_OK;
}

static int get_stats(tj_cache *c, tj_cache_stats *st)
{
  int rc = tj_cache_get_stats(c, st);
  if (rc != TJ_OK)
    cli_error("%s", tj_cache_errmsg(c));
  return rc;
}

/* A figure for JSON: null where the code object does not say. */
static void print_figure_json(const char *name, int64_t v)
{
  if (v < 0)
    printf(", \"%s\": null", name);
  else
    printf(", \"%s\": %" PRId64, name, v);
}

/* An entry's object, {"entry": ..., "lowered": ..., left open for more. */
static void open_entry_json(int first, const char *entry, const char *lowered)
{
  fputs(first ? "{\"entry\": " : ", {\"entry\": ", stdout);
  cli_json_string(stdout, entry);
  cli_json_member(stdout, "lowered", lowered);
}

/* A module row's entries as a JSON array. */
static void print_entries_json(const char *lines)
{
  const char *x, *l;
  size_t xn, ln;
  int n = 0;
  fputs(", \"entries\": [", stdout);
  for (const char *p = lines; tj_entries_next(&p, &x, &xn, &l, &ln);) {
    char *expr = strndup(x, xn), *low = strndup(l, ln);
    open_entry_json(n++ == 0, expr ? expr : "", low ? low : "");
    putchar('}');
    free(expr);
    free(low);
  }
  putchar(']');
}

/* The KERNEL cell: a module's entries, each with its lowered name where
 * that differs ("scale<float> [_Z5scaleIfEvPT_]"); else the kernel name. */
static char *kernel_cell(const tj_cache_entry *e)
{
  if (!e->entries || !*e->entries)
    return strdup(e->kernel);
  const char *x, *l;
  size_t xn, ln;
  char *out = calloc(1, 2 * strlen(e->entries) + 8);
  const char *p = e->entries;
  while (out && tj_entries_next(&p, &x, &xn, &l, &ln)) {
    size_t o = strlen(out);
    int same = xn == ln && strncmp(x, l, xn) == 0;
    sprintf(out + o, same ? "%s%.*s" : "%s%.*s [%.*s]", o ? ", " : "",
            (int)xn, x, (int)ln, l);
  }
  return out;
}

/* Each entry's resources, one object per entry, every key every time. */
static void print_kernels_json(const tj_cache_entry *e)
{
  fputs(", \"kernels\": [", stdout);
  for (int i = 0; i < e->num_kernels; i++) {
    const tj_cache_kernel *k = &e->kernels[i];
    const tj_kernel_resources *r = &k->resources;
    open_entry_json(i == 0, k->entry, k->lowered);
    print_figure_json("regs", r->regs);
    print_figure_json("sgprs", r->sgprs);
    print_figure_json("agprs", r->agprs);
    print_figure_json("spills", r->spills);
    print_figure_json("shared_bytes", r->shared_bytes);
    print_figure_json("local_bytes", r->local_bytes);
    print_figure_json("max_threads", r->max_threads);
    print_figure_json("wave_size", r->wave_size);
    putchar('}');
  }
  putchar(']');
}

static void print_entry_json(const tj_cache_entry *e)
{
  printf("{\"key\": ");
  cli_json_string(stdout, e->key);
  cli_json_member(stdout, "kernel", e->kernel);
  cli_json_member(stdout, "arch", e->arch);
  cli_json_member(stdout, "platform", e->platform);
  cli_json_member(stdout, "compiler", e->compiler);
  cli_json_member(stdout, "options", e->options);
  cli_json_member(stdout, "code_hash", e->code_hash);
  cli_json_member(stdout, "origin", e->origin ? e->origin : "compiled");
  print_entries_json(e->entries);
  print_kernels_json(e);
  printf(", \"code_size\": %" PRIu64 ", \"compile_ms\": %.3f, "
         "\"created\": %" PRId64 ", \"last_used\": %" PRId64
         ", \"hits\": %" PRIu64 "}", e->code_size, e->compile_ms, e->created,
         e->last_used, e->hits);
}

/* ------------------------------------------------------------ --list-cache */

/* The REGS and SCRATCH cells: each entry's registers, and its scratch
 * (local memory on NVIDIA) per thread in bytes with the registers it
 * spilled, in the order of the KERNEL cell; "-" where the code object
 * does not say.  malloc'd; NULL when out of memory. */
static char *resource_cell(const tj_cache_entry *e, int scratch)
{
  size_t len = 2 + (size_t)e->num_kernels * 48;
  char *out = malloc(len), *o = out;
  if (!out)
    return NULL;
  strcpy(out, "-");
  for (int i = 0; i < e->num_kernels; i++) {
    const tj_kernel_resources *r = &e->kernels[i].resources;
    int64_t v = scratch ? r->local_bytes : r->regs;
    o += i ? sprintf(o, ",") : 0;
    o += v < 0 ? sprintf(o, "-") : sprintf(o, "%" PRId64, v);
    if (scratch && r->spills > 0)
      o += sprintf(o, " (%d spilled)", (int)r->spills);
  }
  return out;
}

typedef struct list_ctx {
  const cli_options *o;
  cli_table *table;
  uint64_t count, bytes;
  int failed;
} list_ctx;

static int add_row(const tj_cache_entry *e, void *arg)
{
  list_ctx *l = arg;
  char key[13], size[32], ms[32], hits[24], used[32], opts[48];
  snprintf(key, sizeof key, "%s", e->key);
  /* One kernel built with several option sets makes several rows: the
   * options tell them apart (in full with --json). */
  if (!e->options || !*e->options)
    snprintf(opts, sizeof opts, "-");
  else if (strlen(e->options) < 40)
    snprintf(opts, sizeof opts, "%s", e->options);
  else
    snprintf(opts, sizeof opts, "%.36s...", e->options);
  cli_format_size(e->code_size, size, sizeof size);
  cli_format_ms(e->compile_ms, ms, sizeof ms);
  snprintf(hits, sizeof hits, "%" PRIu64, e->hits);
  cli_format_time(e->last_used, used, sizeof used);
  l->count++;
  l->bytes += e->code_size;
  if (l->o->json) {
    fputs(l->count > 1 ? ",\n  " : "\n  ", stdout);
    print_entry_json(e);
    return 0;
  }
  char *kernel = kernel_cell(e), *regs = resource_cell(e, 0);
  char *scratch = resource_cell(e, 1);
  const char *cells[] = {key,  kernel ? kernel : e->kernel, e->arch,
                         e->platform, e->compiler, size, regs, scratch, ms,
                         hits, used, e->origin ? e->origin : "compiled",
                         opts};
  int added = regs && scratch ? cli_table_add(l->table, cells) : -1;
  free(kernel);
  free(regs);
  free(scratch);
  if (added != 0) {
    l->failed = 1;
    return 1;
  }
  return 0;
}

static void print_listing(const list_ctx *l, const char *path)
{
  char total[32];
  if (l->o->json) {
    fputs(l->count ? "\n]\n" : "]\n", stdout);
    return;
  }
  if (l->count == 0) {
    printf("cache %s is empty\n", path);
    return;
  }
  cli_table_print(l->table, l->o, 4);
  cli_format_size(l->bytes, total, sizeof total);
  printf("%" PRIu64 " %s, %s of code, in %s\n", l->count,
         l->count == 1 ? "entry" : "entries", total, path);
}

int cli_list_cache(const cli_options *o)
{
  static const char *const headers[] = {
    "KEY",  "KERNEL",  "ARCH",    "PLATFORM", "COMPILER",  "SIZE",
    "REGS", "SCRATCH", "COMPILE", "HITS",     "LAST USED", "FROM",
    "OPTIONS"};
  tj_cache *c;
  int state = open_cache(o, 0, &c);
  if (state == CACHE_MISSING && o->json) {
    puts("[]");
    tj_cache_close(c);
    return EXIT_OK;
  }
  if (state != CACHE_OPEN)
    return state == CACHE_MISSING ? say_missing(o, c) : EXIT_FAIL;
  list_ctx l = {o, cli_table_new(13, headers, "lllllrrrrrlll"), 0, 0, 0};
  if (!l.table) {
    cli_error("out of memory");
    tj_cache_close(c);
    return EXIT_FAIL;
  }
  if (o->json)
    fputs("[", stdout);
  int rc = tj_cache_list(c, add_row, &l);
  if (rc != TJ_OK || l.failed)
    cli_error("listing %s: %s", tj_cache_path(c),
              l.failed ? "out of memory" : tj_cache_errmsg(c));
  else
    print_listing(&l, tj_cache_path(c));
  cli_table_free(l.table);
  tj_cache_close(c);
  return rc == TJ_OK && !l.failed ? EXIT_OK : EXIT_FAIL;
}

/* ------------------------------------------------------------ --stats */

/* spec as it may be printed: each entry's user and password ("USER:
 * PASSWORD@") shown as "***@". */
static void remote_shown(const char *spec, char *out, size_t len)
{
  size_t o = 0;
  for (const char *p = spec; *p && o + 1 < len;) {
    size_t n = strcspn(p, ",");
    const char *scheme = strstr(p, "://"), *at = NULL;
    for (const char *q = p; q < p + n; q++)
      if (*q == '@')
        at = q;
    if (at && scheme && scheme < at) {
      o += (size_t)snprintf(out + o, len - o, "%.*s://***", (int)(scheme - p),
                            p);
      n -= (size_t)(at - p), p = at;
    }
    if (o + 1 < len)
      o += (size_t)snprintf(out + o, len - o, "%.*s", (int)n, p);
    p += n;
    if (*p == ',' && o + 1 < len)
      out[o++] = ',', out[o] = '\0', p++;
  }
  if (o >= len)
    o = len - 1;
  out[o] = '\0';
}

/* The same keys whether or not the cache exists (s == NULL: it does not;
 * the counts are then 0, and the schema and limit null). */
static void print_stats_json(const char *path, const tj_cache_stats *s)
{
  static const tj_cache_stats none;
  printf("{\"cache_path\": ");
  cli_json_string(stdout, path);
  printf(", \"cache_exists\": %s, \"schema_version\": ", s ? "true" : "false");
  if (s)
    printf("%d", s->schema_version);
  else
    printf("null");
  if (!s)
    s = &none;
  printf(", \"entries\": %" PRIu64 ", \"bytes\": %" PRIu64
         ", \"file_bytes\": %" PRIu64 ", \"size_limit\": ", s->entries,
         s->bytes, s->file_bytes);
  if (s != &none)
    printf("%" PRIu64, s->size_limit);
  else
    printf("null");
  printf(", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64
         ", \"compile_ms_saved\": %.3f", s->hits, s->misses,
         s->compile_ms_saved);
  printf(", \"system_entries\": %" PRIu64 ", \"system_hits\": %" PRIu64,
         s->system_entries, s->system_hits);
  const char *remote = getenv("TOKITAI_JIT_REMOTE");
  char shown[1024] = "";
  if (remote)
    remote_shown(remote, shown, sizeof shown);
  printf(", \"remote\": {\"configured\": ");
  cli_json_string_or_null(stdout, remote && *remote ? shown : NULL);
  printf(", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64 ", \"errors\": %"
         PRIu64 ", \"bytes_in\": %" PRIu64 ", \"bytes_out\": %" PRIu64,
         s->remote_hits, s->remote_misses, s->remote_errors,
         s->remote_bytes_in, s->remote_bytes_out);
  printf(", \"timeouts\": %" PRIu64 ", \"breaker_openings\": %" PRIu64
         ", \"lease_renewals\": %" PRIu64 ", \"lease_takeovers\": %" PRIu64
         ", \"off_at_close\": %" PRIu64 ", \"redirects\": %" PRIu64 "}}\n",
         s->remote_timeouts, s->remote_breaker_openings,
         s->remote_lease_renewals, s->remote_lease_takeovers,
         s->remote_off_at_close, s->remote_redirects);
}

static void print_stats(const char *path, const tj_cache_stats *s)
{
  char bytes[32], file[32], limit[32], saved[32], rate[32] = "-";
  cli_format_size(s->bytes, bytes, sizeof bytes);
  cli_format_size(s->file_bytes, file, sizeof file);
  cli_format_size(s->size_limit, limit, sizeof limit);
  cli_format_ms(s->compile_ms_saved, saved, sizeof saved);
  if (s->hits + s->misses > 0)
    snprintf(rate, sizeof rate, "%.1f%%",
             100.0 * (double)s->hits / (double)(s->hits + s->misses));
  cli_field("cache", "%s", path);
  cli_field("schema version", "%d", s->schema_version);
  cli_field("entries", "%" PRIu64, s->entries);
  cli_field("code size", "%s (%" PRIu64 " bytes)", bytes, s->bytes);
  cli_field("file size", "%s", file);
  cli_field("size limit", "%s (the library's default)", limit);
  cli_field("hits", "%" PRIu64, s->hits);
  cli_field("misses", "%" PRIu64, s->misses);
  cli_field("hit rate", "%s", rate);
  cli_field("compile time saved", "%s", saved);
  /* The rows copied from a system cache (tj_cache_entry.origin) */
  cli_field("from system", "%" PRIu64 " entries, %" PRIu64 " hits",
            s->system_entries, s->system_hits);
  /* The remote tier: this environment's, and what runtimes that used one
   * with this cache counted. */
  const char *remote = getenv("TOKITAI_JIT_REMOTE");
  char in[32], out[32];
  cli_format_size(s->remote_bytes_in, in, sizeof in);
  cli_format_size(s->remote_bytes_out, out, sizeof out);
  char shown[1024] = "";
  if (remote)
    remote_shown(remote, shown, sizeof shown);
  cli_field("remote tier", "%s", remote && *remote ? shown : "none (TOKITAI_JIT_REMOTE is unset)");
  /* Loads of rows copied from the tier: among the hits above, as
   * tj_stats counts them among cache_hits. */
  cli_field("remote hits", "%" PRIu64 " (among the hits above)",
            s->remote_hits);
  cli_field("remote misses", "%" PRIu64, s->remote_misses);
  cli_field("remote errors", "%" PRIu64 " (%" PRIu64 " of them timeouts)",
            s->remote_errors, s->remote_timeouts);
  cli_field("remote state", "off for a while %" PRIu64 " times; %" PRIu64
            " runtimes closed with it off", s->remote_breaker_openings,
            s->remote_off_at_close);
  cli_field("remote leases", "%" PRIu64 " renewals, %" PRIu64 " takeovers",
            s->remote_lease_renewals, s->remote_lease_takeovers);
  cli_field("remote traffic", "%s in, %s out", in, out);
  cli_field("remote redirects", "%" PRIu64 " (Redis Cluster MOVED and ASK "
            "followed)", s->remote_redirects);
}

int cli_stats(const cli_options *o)
{
  tj_cache *c;
  tj_cache_stats s;
  int state = open_cache(o, 0, &c);
  if (state == CACHE_MISSING && o->json) {
    print_stats_json(tj_cache_path(c), NULL);
    tj_cache_close(c);
    return EXIT_OK;
  }
  if (state != CACHE_OPEN)
    return state == CACHE_MISSING ? say_missing(o, c) : EXIT_FAIL;
  int rc = get_stats(c, &s);
  if (rc == TJ_OK && o->json)
    print_stats_json(tj_cache_path(c), &s);
  else if (rc == TJ_OK)
    print_stats(tj_cache_path(c), &s);
  tj_cache_close(c);
  return rc == TJ_OK ? EXIT_OK : EXIT_FAIL;
}

/* ------------------------------------------------------------ --verify-cache */

typedef struct verify_ctx {
  const cli_options *o;
  uint64_t reported;
} verify_ctx;

static int report_bad(const tj_cache_entry *e, void *arg)
{
  verify_ctx *v = arg;
  const cli_options *o = v->o;
  if (o->json) {
    fputs(v->reported ? ",\n    " : "\n    ", stdout);
    print_entry_json(e);
  } else {
    char key[160], kernel[1024], arch[160];
    printf("%sbad%s  %s  %s  %s: code does not match its stored hash, size or key\n",
           cli_style(o, STYLE_RED), cli_style(o, STYLE_RESET),
           cli_text_in(key, sizeof key, e->key),
           cli_text_in(kernel, sizeof kernel, e->kernel),
           cli_text_in(arch, sizeof arch, e->arch));
  }
  v->reported++;
  return 0;
}

/* --verify-cache --json has the same keys every time: cache_path,
 * cache_exists, checked, bad (the bad entries), repaired, and error
 * (null unless the check itself failed). */
static void verify_json_head(const char *path, int exists, uint64_t checked)
{
  printf("{\"cache_path\": ");
  cli_json_string(stdout, path);
  printf(", \"cache_exists\": %s, \"checked\": %" PRIu64 ", \"bad\": [",
         exists ? "true" : "false", checked);
}

static void verify_json_tail(uint64_t reported, int repaired,
                             const char *error)
{
  printf("%s], \"repaired\": %s, \"error\": ", reported ? "\n  " : "",
         repaired ? "true" : "false");
  cli_json_string_or_null(stdout, error);
  printf("}\n");
}

static void verify_summary(const cli_options *o, const char *path,
                           uint64_t checked, uint64_t bad)
{
  const char *entries = bad == 1 ? "entry" : "entries";
  if (o->json)
    verify_json_tail(bad, o->repair && bad, NULL);
  else
    printf("checked %" PRIu64 " %s in %s: SQLite integrity check %sok%s, %"
           PRIu64 " bad\n", checked, checked == 1 ? "entry" : "entries", path,
           cli_style(o, STYLE_GREEN), cli_style(o, STYLE_RESET), bad);
  if (bad && o->repair && !o->json)
    printf("dropped %" PRIu64 " bad %s\n", bad, entries);
  else if (bad && !o->repair)
    cli_error("found %" PRIu64 " bad %s in %s; " PROGRAM " --verify-cache "
              "--repair drops %s", bad, entries, path, bad == 1 ? "it" : "them");
}

static int verify_open_cache(const cli_options *o, tj_cache *c)
{
  tj_cache_stats s;
  verify_ctx v = {o, 0};
  uint64_t bad = 0;
  if (get_stats(c, &s) != TJ_OK) {
    if (o->json) {
      verify_json_head(tj_cache_path(c), 1, 0);
      verify_json_tail(0, 0, tj_cache_errmsg(c));
    }
    return EXIT_FAIL;
  }
  if (o->json)
    verify_json_head(tj_cache_path(c), 1, s.entries);
  int rc = tj_cache_verify(c, o->repair, report_bad, &v, &bad);
  if (rc != TJ_OK) {
    if (o->json)
      verify_json_tail(v.reported, 0, tj_cache_errmsg(c));
    cli_error("%s", tj_cache_errmsg(c));
    if (rc == TJ_ECACHE)
      cli_error("the database itself is damaged: remove %s, or empty it "
                "with --clear-cache", tj_cache_path(c));
    return EXIT_FAIL;
  }
  verify_summary(o, tj_cache_path(c), s.entries, bad);
  return bad && !o->repair ? EXIT_FAIL : EXIT_OK;
}

int cli_verify_cache(const cli_options *o)
{
  tj_cache *c;
  int state = open_cache(o, o->repair, &c);
  if (state == CACHE_MISSING && o->json) {
    verify_json_head(tj_cache_path(c), 0, 0);
    verify_json_tail(0, 0, NULL);
    tj_cache_close(c);
    return EXIT_OK;
  }
  if (state != CACHE_OPEN)
    return state == CACHE_MISSING ? say_missing(o, c) : EXIT_FAIL;
  int rc = verify_open_cache(o, c);
  tj_cache_close(c);
  return rc;
}

/* ------------------------------------------------------------ trimming */

static const char *plural(uint64_t n)
{
  return n == 1 ? "entry" : "entries";
}

int cli_evict(const cli_options *o)
{
  tj_cache *c;
  tj_cache_stats after;
  uint64_t evicted = 0;
  int state = open_cache(o, 1, &c);
  if (state != CACHE_OPEN)
    return state == CACHE_MISSING ? say_missing(o, c) : EXIT_FAIL;
  int rc = tj_cache_evict(c, o->max_age, o->max_size, &evicted);
  if (rc != TJ_OK)
    cli_error("%s", tj_cache_errmsg(c));
  else if ((rc = get_stats(c, &after)) == TJ_OK) {
    char left[32];
    cli_format_size(after.bytes, left, sizeof left);
    printf("evicted %" PRIu64 " %s from %s; %" PRIu64 " %s (%s) remain\n",
           evicted, plural(evicted), tj_cache_path(c), after.entries,
           plural(after.entries), left);
  }
  tj_cache_close(c);
  return rc == TJ_OK ? EXIT_OK : EXIT_FAIL;
}

int cli_clear_cache(const cli_options *o)
{
  tj_cache *c;
  tj_cache_stats before;
  int state = open_cache(o, 1, &c);
  if (state != CACHE_OPEN)
    return state == CACHE_MISSING ? say_missing(o, c) : EXIT_FAIL;
  int rc = get_stats(c, &before);
  if (rc == TJ_OK && (rc = tj_cache_clear(c)) != TJ_OK)
    cli_error("%s", tj_cache_errmsg(c));
  if (rc == TJ_OK) {
    char bytes[32];
    cli_format_size(before.bytes, bytes, sizeof bytes);
    printf("cleared %s: removed %" PRIu64 " %s (%s of code)\n",
           tj_cache_path(c), before.entries, plural(before.entries), bytes);
  }
  tj_cache_close(c);
  return rc == TJ_OK ? EXIT_OK : EXIT_FAIL;
}

/* ------------------------------------------------------------ --merge */

/* Each FILE into the cache, in order; a file that cannot be merged is
 * said and the others are still merged. */
int cli_merge(const cli_options *o)
{
  tj_cache *c;
  int state = open_cache(o, 1, &c), failed = 0;
  if (state == CACHE_MISSING) { /* read-only open first: make it now */
    tj_cache_close(c);
    if (tj_cache_open(&c, o->cache_path, o->cache_flags) != TJ_OK) {
      cli_error("%s", c ? tj_cache_errmsg(c) : "out of memory");
      tj_cache_close(c);
      return EXIT_FAIL;
    }
  } else if (state != CACHE_OPEN) {
    return EXIT_FAIL;
  }
  for (int i = 0; i < o->nkernels; i++) {
    tj_cache_merge_stats st;
    int rc = tj_cache_merge(c, o->kernels[i], &st);
    if (rc != TJ_OK) {
      cli_error("%s", tj_cache_errmsg(c));
      failed = 1;
    }
    if (rc == TJ_OK || st.copied || st.skipped || st.bad)
      printf("merged %s into %s: %" PRIu64 " copied, %" PRIu64 " already "
             "there, %" PRIu64 " bad (not copied)\n", o->kernels[i],
             tj_cache_path(c), st.copied, st.skipped, st.bad);
    if (st.bad) {
      cli_error("%s: %" PRIu64 " %s failed %s checks and %s not copied",
                o->kernels[i], st.bad, plural(st.bad),
                st.bad == 1 ? "its" : "their", st.bad == 1 ? "was" : "were");
      failed = 1;
    }
  }
  tj_cache_close(c);
  return failed ? EXIT_FAIL : EXIT_OK;
}
