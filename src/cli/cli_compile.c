/*
 * cli_compile.c: tokitai-jit --compile FILE --entry NAME...: precompile a
 * program's own kernels (one module) into the cache, for each --arch,
 * through the public API only, so that the key is the one the program's
 * tj_module_compile or tj_kernel_compile computes for the same source,
 * entries and options.  --explain asks the same way why one is not
 * cached (tj_explain_miss).
 */
#include "config.h"
#include "cli_commands.h"
#include "cli_format.h"
#include "cli_jobs.h"
#include "tokitai-jit.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILE_BYTES (64u << 20)

static char *read_source(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f) {
    cli_error("cannot open %s: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (len < cap)
      break;
    char *grown = cap < MAX_FILE_BYTES ? realloc(buf, 2 * cap + 1) : NULL;
    if (!grown) {
      free(buf);
      buf = NULL;
      cli_error("%s: over %u bytes, or out of memory", path, MAX_FILE_BYTES);
      break;
    }
    buf = grown;
    cap *= 2;
  }
  int bad = ferror(f);
  fclose(f);
  if (buf && bad) {
    cli_error("cannot read %s", path);
    free(buf);
    return NULL;
  }
  if (buf && memchr(buf, '\0', len)) {
    cli_error("%s holds a NUL byte: not a source file", path);
    free(buf);
    return NULL;
  }
  if (buf)
    buf[len] = '\0';
  return buf;
}

static void print_text(FILE *f, const tj_module_info *i, const char *file,
                       const char *arch)
{
  char size[32], ms[32];
  cli_format_size(i->code_size, size, sizeof size);
  cli_format_ms(i->compile_ms, ms, sizeof ms);
  if (i->origin == TJ_FROM_COMPILER)
    fprintf(f, "%s for %s: compiled in %s, key %s, %s\n", file, arch, ms,
            i->key, size);
  else
    fprintf(f, "%s for %s: already cached, key %s, %s\n", file, arch, i->key,
            size);
  for (int e = 0; e < i->num_entries; e++)
    fprintf(f, "  %s -> %s\n", i->entries[e], i->lowered[e]);
}

/* One object, without the separator before it (the command adds that in
 * arch order). */
static void print_json(FILE *f, const tj_module_info *i, const char *file,
                       const char *arch)
{
  fputs("{\"file\": ", f);
  cli_json_string(f, file);
  cli_json_member(f, "arch", arch);
  fprintf(f, ", \"key\": \"%s\", \"origin\": \"%s\", \"code_size\": %zu, "
          "\"compile_ms\": %.3f, \"entries\": [", i->key,
          i->origin == TJ_FROM_COMPILER ? "compiler" : "cache", i->code_size,
          i->compile_ms);
  for (int e = 0; e < i->num_entries; e++) {
    fputs(e ? ", {\"entry\": " : "{\"entry\": ", f);
    cli_json_string(f, i->entries[e]);
    cli_json_member(f, "lowered", i->lowered[e]);
    fputc('}', f);
  }
  fputs("]}", f);
}

typedef struct compile_plan {
  const cli_options *o;
  const tj_module_source *src;
} compile_plan;

static const char *compile_arch(void *ctx, size_t job)
{
  const compile_plan *p = ctx;
  return p->o->narchs ? p->o->archs[job] : "";
}

static void compile_label(void *ctx, size_t job, char *buf, size_t len)
{
  const compile_plan *p = ctx;
  snprintf(buf, len, "%s for %s", p->src->name,
           p->o->narchs ? p->o->archs[job] : "this GPU");
}

static void set_err(cli_job_result *res, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(cli_job_result *res, int rc, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  res->status = rc;
  if (vasprintf(&res->err, fmt, ap) < 0)
    res->err = NULL;
  va_end(ap);
}

/* One arch ("": this machine's GPU), here or in a worker: its own runtime
 * either way.  res->out: what to print for it. */
static void compile_job(void *ctx, size_t job, const char *arch_arg,
                        int in_worker, cli_job_result *res)
{
  (void)in_worker;
  const compile_plan *p = ctx;
  const char *arch = *arch_arg ? arch_arg : NULL;
  tj_options opts = cli_runtime_options(p->o, arch);
  tj_runtime *rt = NULL;
  tj_module *m = NULL;
  tj_module_info info;
  memset(&info, 0, sizeof info);
  info.size = sizeof info;
  (void)job;
  int rc = tj_runtime_open(&rt, &opts);
  if (rc != TJ_OK) {
    set_err(res, rc, "%s%s: %s", arch ? "--arch " : "cannot compile for this "
            "machine's GPU (give --arch to compile without one)",
            arch ? arch : "", tj_errmsg(rt));
  } else if (!tj_runtime_cache_path(rt)) {
    set_err(res, TJ_ECACHE, "no cache to compile into: %s", tj_errmsg(rt));
  } else if ((rc = tj_module_compile(rt, p->src, &m)) != TJ_OK) {
    /* The compiler's log, whole: it is what the user needs. */
    set_err(res, rc, "%s for %s: %s: %s", p->src->name, tj_runtime_arch(rt),
            tj_strerror(rc), tj_errmsg(rt));
  } else if ((rc = tj_module_get_info(m, &info)) != TJ_OK) {
    set_err(res, rc, "%s for %s: %s", p->src->name, tj_runtime_arch(rt),
            tj_errmsg(rt));
  } else {
    size_t len = 0;
    FILE *f = open_memstream(&res->out, &len);
    if (f && p->o->json)
      print_json(f, &info, p->src->name, tj_runtime_arch(rt));
    else if (f)
      print_text(f, &info, p->src->name, tj_runtime_arch(rt));
    if (!f || fclose(f) != 0)
      set_err(res, TJ_ENOMEM, "out of memory");
    res->origin = info.origin;
    res->compile_ms = info.compile_ms;
  }
  tj_runtime_close(rt);
}

int cli_compile(const cli_options *o)
{
  if (o->nentries == 0) {
    cli_error("--compile needs at least one --entry NAME");
    return EXIT_USAGE;
  }
  char *source = read_source(o->compile_file);
  if (!source)
    return EXIT_FAIL;
  tj_module_source src;
  memset(&src, 0, sizeof src);
  src.size = sizeof src;
  src.source = source;
  src.name = o->compile_file;
  src.options = o->compile_args;
  src.num_options = o->ncompile_args;
  src.entries = o->entries;
  src.num_entries = o->nentries;
  compile_plan plan = {o, &src};
  size_t n = o->narchs ? (size_t)o->narchs : 1;
  cli_jobs jobs = {n, compile_job, compile_arch, compile_label, &plan, 0, NULL};
  cli_job_result res[CLI_MAX_ARCHS];
  cli_pool *pool = cli_pool_start(o, n, compile_job, NULL, &plan);
  if (!pool) {
    cli_error("out of memory");
    free(source);
    return EXIT_FAIL;
  }
  cli_pool_run(pool, &jobs, res);
  cli_pool_finish(pool);
  int rc = EXIT_OK, printed = 0;
  for (size_t a = 0; a < n; a++) { /* in --arch order */
    if (res[a].status != TJ_OK) {
      cli_error("%s", res[a].err ? res[a].err : tj_strerror(res[a].status));
      rc = EXIT_FAIL;
    } else if (res[a].out) {
      if (o->json)
        fputs(printed ? ",\n  " : "[\n  ", stdout);
      fputs(res[a].out, stdout);
      printed++;
    }
    cli_job_result_free(&res[a]);
  }
  if (o->json)
    fputs(printed ? "\n]\n" : "[]\n", stdout);
  free(source);
  return rc;
}

/* ------------------------------------------------------- --explain */

/* One arch ("" for this machine's GPU): the sentence on stdout, cached or
 * not.  EXIT_FAIL only when it cannot be answered. */
static int explain_one(const cli_options *o, const char *arch,
                       const tj_module_source *src)
{
  tj_options opts = cli_runtime_options(o, *arch ? arch : NULL);
  tj_runtime *rt = NULL;
  char why[4096] = "";
  opts.flags |= TJ_CACHE_READONLY; /* it only looks */
  int rc = tj_runtime_open(&rt, &opts);
  if (rc != TJ_OK) {
    cli_error("%s%s: %s", *arch ? "--arch " : "cannot explain for this "
              "machine's GPU (give --arch)", arch, tj_errmsg(rt));
  } else {
    rc = tj_explain_miss(rt, src ? NULL : o->explain, src, why, sizeof why);
    if (rc == TJ_OK || rc == TJ_ENOENT)
      printf("%s\n", why);
    else
      cli_error("%s: %s", o->explain, tj_errmsg(rt));
  }
  tj_runtime_close(rt);
  return rc == TJ_OK || rc == TJ_ENOENT ? EXIT_OK : EXIT_FAIL;
}

int cli_explain(const cli_options *o)
{
  tj_module_source src;
  char *source = NULL;
  memset(&src, 0, sizeof src);
  if (o->nentries > 0) { /* a module, as --compile takes it */
    if (!(source = read_source(o->explain)))
      return EXIT_FAIL;
    src.size = sizeof src;
    src.source = source;
    src.name = o->explain;
    src.options = o->compile_args;
    src.num_options = o->ncompile_args;
    src.entries = o->entries;
    src.num_entries = o->nentries;
  }
  int rc = EXIT_OK;
  for (int a = 0; a < (o->narchs ? o->narchs : 1); a++)
    if (explain_one(o, o->narchs ? o->archs[a] : "", source ? &src : NULL) !=
        EXIT_OK)
      rc = EXIT_FAIL;
  free(source);
  return rc;
}
