/*
 * admin.c: the public tj_cache_* API: listing, stats, verification,
 * eviction and clearing, for tokitai-jit and callers.  A tj_cache is its
 * own connection to one file (open.c), for one thread at a time; every
 * statement runs in the module's narrow calls (scan.c, evict.c), and no
 * SQLite handle reaches this file.
 */
#include "cache_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct tj_cache {
  tj__cache *cache;
  char *path;
  char *msg;
  int readonly_flag; /* opened with TJ_CACHE_READONLY */
  tj__cache_knowledge know; /* the library's answers (cache_api.h) */
};

static int cache_fail(tj_cache *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int cache_fail(tj_cache *c, int code, const char *fmt, ...)
{
  va_list ap;
  char *s = NULL;
  va_start(ap, fmt);
  if (vasprintf(&s, fmt, ap) < 0)
    s = NULL;
  va_end(ap);
  free(c->msg);
  c->msg = s;
  return code;
}

/* A failed call on c, named by what we were doing. */
static int sql_fail(tj_cache *c, const char *doing)
{
  return cache_fail(c, TJ_ECACHE, "cache %s: %s: %s", c->path, doing,
                    tj__cache_errmsg(c->cache));
}

static int check_writable(tj_cache *c, const char *what)
{
  if (!tj__cache_readonly(c->cache))
    return TJ_OK;
  return cache_fail(c, c->readonly_flag ? TJ_EINVAL : TJ_ECACHE,
                    "cannot %s cache %s: %s", what, c->path,
                    tj__cache_readonly_why(c->cache));
}

/* A read-only open of a missing file must create nothing, not even the
 * directory, so that looking at a cache never makes one. */
static int check_exists(tj_cache *c)
{
  struct stat st;
  if (stat(c->path, &st) == 0)
    return TJ_OK;
  if (errno == ENOENT || errno == ENOTDIR)
    return cache_fail(c, TJ_ENOENT, "no cache at %s", c->path);
  return cache_fail(c, TJ_EIO, "cannot read cache %s: %s", c->path,
                    strerror(errno));
}

/* A read-only system cache (TJ_CACHE_SYSTEM): judged and opened as the
 * runtime's layers open one. */
static int open_system(tj_cache *c, const char *path)
{
  char msg[1024] = "";
  c->readonly_flag = 1;
  c->path = strdup(path ? path : TJ__SYSTEM_CACHE_DEFAULT);
  if (!c->path)
    return cache_fail(c, TJ_ENOMEM, "out of memory");
  int rc = tj__cache_open_system(c->path, &c->cache, NULL, NULL, msg,
                                 sizeof msg);
  if (rc == TJ_ENOENT && !msg[0])
    snprintf(msg, sizeof msg, "no system cache at %s", c->path);
  return rc == TJ_OK ? TJ_OK : cache_fail(c, rc, "%s", msg);
}

int tj__cache_handle_open(tj_cache **out, const char *path, unsigned flags,
                          const tj__cache_knowledge *know)
{
  if (!out)
    return TJ_EINVAL;
  tj_cache *c = calloc(1, sizeof *c);
  if (!(*out = c))
    return TJ_ENOMEM;
  if (know)
    c->know = *know;
  unsigned known = TJ_CACHE_READONLY | TJ_CACHE_GROUP | TJ_CACHE_SYSTEM;
  if (flags & ~known)
    return cache_fail(c, TJ_EINVAL, "tj_cache_open: unknown flags 0x%x",
                      flags & ~known);
  if (flags & TJ_CACHE_SYSTEM)
    return open_system(c, path);
  c->readonly_flag = (flags & TJ_CACHE_READONLY) != 0;
  c->path = path ? strdup(path) : tj__cache_default_path();
  if (!c->path)
    return path ? cache_fail(c, TJ_ENOMEM, "out of memory")
                : cache_fail(c, TJ_ENOENT, "no cache location: "
                             "$TOKITAI_JIT_CACHE, $XDG_CACHE_HOME and $HOME "
                             "are unset");
  int rc = (flags & TJ_CACHE_READONLY) ? check_exists(c) : TJ_OK;
  if (rc != TJ_OK)
    return rc;
  char msg[1024];
  rc = tj__cache_open(c->path, flags, &c->cache, msg, sizeof msg);
  if (rc != TJ_OK)
    return cache_fail(c, rc, "%s", msg[0] ? msg : tj_strerror(rc));
  if (!c->cache) /* the runtime would go on without it; we cannot */
    return cache_fail(c, TJ_ECACHE, "%s", msg[0] ? msg : "cache unusable");
  if (msg[0]) /* opened, with a warning (a corrupt file moved aside) */
    cache_fail(c, TJ_OK, "%s", msg);
  return TJ_OK;
}

void tj_cache_close(tj_cache *c)
{
  if (!c)
    return;
  tj__cache_close(c->cache);
  free(c->path);
  free(c->msg);
  free(c);
}

const char *tj_cache_errmsg(const tj_cache *c)
{
  if (!c)
    return "no cache handle (NULL)";
  return c->msg ? c->msg : "";
}

const char *tj_cache_path(const tj_cache *c)
{
  return c ? c->path : NULL;
}

typedef struct visit {
  tj_cache_visit fn;
  void *ctx;
} visit;

static int visit_each(const tj_cache_entry *e, int verdict, void *ctx)
{
  const visit *v = ctx;
  (void)verdict;
  return v->fn(e, v->ctx);
}

int tj_cache_list(tj_cache *c, tj_cache_visit fn, void *ctx)
{
  if (!c || !c->cache || !fn)
    return TJ_EINVAL;
  visit v = {fn, ctx};
  if (tj__cache_scan(c->cache, 0, visit_each, &v) != TJ_OK)
    return sql_fail(c, "listing entries");
  return TJ_OK;
}

int tj_cache_get_stats(tj_cache *c, tj_cache_stats *out)
{
  if (!c || !c->cache || !out)
    return TJ_EINVAL;
  tj__cache_sums sums;
  if (tj__cache_sums_get(c->cache, &sums) != TJ_OK)
    return sql_fail(c, "reading statistics");
  struct stat st;
  tj_cache_stats s = {0};
  s.entries = sums.entries;
  s.bytes = sums.bytes;
  s.hits = sums.hits;
  s.compile_ms_saved = sums.compile_ms_saved;
  s.misses = sums.misses;
  s.schema_version = sums.schema_version;
  s.remote_hits = sums.remote[0];
  s.remote_misses = sums.remote[1];
  s.remote_errors = sums.remote[2] + sums.remote[3]; /* timeouts too */
  s.remote_bytes_in = sums.remote[4];
  s.remote_bytes_out = sums.remote[5];
  s.remote_timeouts = sums.remote[3];
  s.remote_breaker_openings = sums.remote[6];
  s.remote_lease_renewals = sums.remote[7];
  s.remote_lease_takeovers = sums.remote[8];
  s.remote_off_at_close = sums.remote[9];
  s.remote_redirects = sums.remote[10];
  /* The limit lives in each runtime's options, not in the file; report
   * the one a runtime applies when its caller sets none. */
  s.size_limit = TJ__CACHE_DEFAULT_LIMIT;
  s.file_bytes = stat(c->path, &st) == 0 ? (uint64_t)st.st_size : 0;
  s.system_entries = sums.system_entries;
  s.system_hits = sums.system_hits;
  *out = s;
  return TJ_OK;
}

/* ------------------------------------------------------------ verify */

/* A row that names an embedded kernel (no options: the library compiles
 * those with none) must sit at the key its own arch, platform and
 * compiler give that kernel's source; any other row can only be checked
 * against its hash.  A caller's own kernel of the same name fails this
 * too, and costs one compile once dropped. */
static int key_ok(const tj__cache_knowledge *know, const tj_cache_entry *e)
{
  return tj__cache_key_consistent(know, e->key, e->kernel, e->options,
                                  e->arch, e->platform, e->compiler);
}

/* The rows a verify found bad, kept until the scan is over (deleting under
 * a live SELECT would disturb it), and the caller's visitor. */
typedef struct verify_scan {
  const tj__cache_knowledge *know;
  tj_cache_visit fn;
  void *ctx;
  int repair, stop, nomem;
  tj__cache_row_id *rows;
  uint64_t n;
} verify_scan;

static int keep_bad_row(verify_scan *v, const tj_cache_entry *e)
{
  tj__cache_row_id *grown = realloc(v->rows, (v->n + 1) * sizeof *v->rows);
  if (!grown)
    return 0;
  v->rows = grown;
  grown[v->n].key = strdup(e->key);
  grown[v->n].hash = strdup(e->code_hash);
  if (grown[v->n].key && grown[v->n].hash)
    return 1;
  free(grown[v->n].key);
  free(grown[v->n].hash);
  return 0;
}

static int verify_row(const tj_cache_entry *e, int verdict, void *ctx)
{
  verify_scan *v = ctx;
  if (!verdict && key_ok(v->know, e))
    return 0;
  if (v->repair && !keep_bad_row(v, e)) {
    v->nomem = 1;
    return 1;
  }
  v->n++;
  if (!v->stop && v->fn)
    v->stop = v->fn(e, v->ctx); /* stop the reports, not the count */
  return 0;
}

static void free_rows(verify_scan *v)
{
  for (uint64_t i = 0; v->repair && i < v->n; i++) {
    free(v->rows[i].key);
    free(v->rows[i].hash);
  }
  free(v->rows);
}

/* SQLite's own check: "ok", or the first problem in the message. */
static int integrity_check(tj_cache *c)
{
  char problem[512];
  if (tj__cache_integrity(c->cache, problem, sizeof problem) == TJ_OK)
    return TJ_OK;
  if (!problem[0])
    return cache_fail(c, TJ_ECACHE, "cache %s is damaged: %s", c->path,
                      tj__cache_errmsg(c->cache));
  return cache_fail(c, TJ_ECACHE, "cache %s failed SQLite's integrity "
                    "check: %s", c->path, problem);
}

int tj_cache_verify(tj_cache *c, int repair, tj_cache_visit fn, void *ctx,
                    uint64_t *bad)
{
  if (!c || !c->cache)
    return TJ_EINVAL;
  /* Repair asked of a handle opened read-only is the caller's mistake. */
  int rc = repair && c->readonly_flag ? check_writable(c, "repair") : TJ_OK;
  if (rc == TJ_OK)
    rc = integrity_check(c);
  if (rc != TJ_OK)
    return rc;
  verify_scan v = {&c->know, fn, ctx, repair != 0, 0, 0, NULL, 0};
  rc = tj__cache_scan(c->cache, 1, verify_row, &v);
  if (v.nomem)
    rc = cache_fail(c, TJ_ENOMEM, "out of memory");
  else if (rc != TJ_OK)
    rc = sql_fail(c, "reading entries");
  /* A file we may not write needs no repair when nothing is bad; when
   * something is, saying so must not read as "the file is damaged". */
  else if (repair && v.n > 0 && check_writable(c, "repair") != TJ_OK)
    rc = TJ_EIO;
  else if (repair && v.n > 0 &&
           tj__cache_drop_rows(c->cache, v.rows, v.n) != TJ_OK)
    rc = sql_fail(c, "repairing");
  free_rows(&v);
  if (rc == TJ_OK && bad)
    *bad = v.n;
  return rc;
}

/* ------------------------------------------------------------ evict, clear */

int tj_cache_evict(tj_cache *c, int64_t max_age_seconds, uint64_t max_bytes,
                   uint64_t *evicted)
{
  if (!c || !c->cache)
    return TJ_EINVAL;
  uint64_t n = 0;
  int rc = check_writable(c, "evict from");
  if (rc == TJ_OK &&
      tj__cache_trim(c->cache, max_age_seconds, max_bytes, &n) != TJ_OK)
    rc = sql_fail(c, "evicting");
  if (evicted)
    *evicted = n;
  return rc;
}

int tj_cache_clear(tj_cache *c)
{
  if (!c || !c->cache)
    return TJ_EINVAL;
  int rc = check_writable(c, "clear");
  if (rc == TJ_OK && tj__cache_clear(c->cache) != TJ_OK)
    rc = sql_fail(c, "clearing");
  return rc;
}

/* ------------------------------------------------------------ merge */

static int same_file(const tj__cache *a, const tj__cache *b)
{
  dev_t ad, bd;
  ino_t ai, bi;
  tj__cache_identity(a, &ad, &ai);
  tj__cache_identity(b, &bd, &bi);
  return ad == bd && ai == bi;
}

int tj_cache_merge(tj_cache *c, const char *source, tj_cache_merge_stats *st)
{
  if (st)
    memset(st, 0, sizeof *st);
  if (!c || !c->cache || !source)
    return c ? cache_fail(c, TJ_EINVAL, "tj_cache_merge: the source is NULL")
             : TJ_EINVAL;
  int rc = check_writable(c, "merge into");
  if (rc != TJ_OK)
    return rc;
  char msg[1024] = "";
  tj__cache *src = NULL;
  rc = tj__cache_open_source(source, &src, msg, sizeof msg);
  if (rc == TJ_ENOENT)
    return cache_fail(c, rc, "no cache at %s", source);
  if (rc != TJ_OK)
    return cache_fail(c, rc, "%s", msg[0] ? msg : tj_strerror(rc));
  if (same_file(src, c->cache)) {
    tj__cache_close(src);
    return cache_fail(c, TJ_EINVAL, "%s is the cache being merged into",
                      source);
  }
  tj__merge_counts n;
  int failed_source = 0;
  rc = tj__cache_merge_rows(c->cache, src, &c->know, &n, &failed_source);
  if (rc == TJ_ECACHE)
    cache_fail(c, rc, "merging %s into %s: %s", source, c->path,
               tj__cache_errmsg(failed_source ? src : c->cache));
  else if (rc == TJ_ENOMEM)
    cache_fail(c, rc, "out of memory");
  tj__cache_close(src);
  if (st) {
    st->copied = n.copied;
    st->skipped = n.skipped;
    st->bad = n.bad;
  }
  return rc;
}

/* ------------------------------------------------------------ tuning */

typedef struct tuning_visit {
  const tj__cache_knowledge *know;
  tj_tuning_visit fn;
  void *ctx;
  int nomem;
} tuning_visit;

/* The "config<TAB>ms<TAB>runs" lines of a row as times pointing into
 * copy (malloc'd, like *times), and its "rule<TAB>config" line as *rule
 * (NULL where there is none); lines that do not parse are skipped. */
static int parse_measured(const char *measured, char **copy,
                          tj_tuning_time **times, const char **rule)
{
  *rule = NULL;
  size_t lines = 1;
  for (const char *p = measured; *p; p++)
    lines += *p == '\n';
  *copy = strdup(measured);
  *times = calloc(lines, sizeof **times);
  if (!*copy || !*times)
    return -1;
  int n = 0;
  char *save = NULL;
  for (char *line = strtok_r(*copy, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    char *tab = strchr(line, '\t'), *end = NULL;
    if (!tab)
      continue;
    *tab = '\0';
    if (strcmp(line, "rule") == 0) {
      if (tj__tuning_name_ok(tab + 1))
        *rule = tab + 1;
      continue;
    }
    double ms = strtod(tab + 1, &end);
    if (end == tab + 1 || *end != '\t' || !tj__tuning_name_ok(line))
      continue;
    long runs = strtol(end + 1, &end, 10);
    if (*end != '\0' || runs < 0 || runs > INT32_MAX)
      continue;
    (*times)[n++] = (tj_tuning_time){line, ms, (int)runs};
  }
  return n;
}

static int visit_tuning(const tj__tuning_row *r, int bad, void *arg)
{
  tuning_visit *v = arg;
  char *copy = NULL;
  tj_tuning_time *times = NULL;
  const char *rule = NULL;
  int n = parse_measured(r->measured, &copy, &times, &rule);
  if (n < 0) {
    free(copy);
    free(times);
    v->nomem = 1;
    return 1;
  }
  int known = !bad && v->know->config_known &&
              v->know->config_known(r->op, r->config);
  tj_tuning t = {r->op, r->arch, r->platform, r->compiler, r->shape_class,
                 r->config, r->m, r->n, r->k, r->device, r->origin,
                 r->created, known, n, times, rule};
  int stop = v->fn(&t, v->ctx);
  free(copy);
  free(times);
  return stop;
}

int tj_cache_list_tuning(tj_cache *c, tj_tuning_visit fn, void *ctx)
{
  if (!c || !c->cache || !fn)
    return TJ_EINVAL;
  tuning_visit v = {&c->know, fn, ctx, 0};
  int rc = tj__cache_tuning_scan(c->cache, visit_tuning, &v);
  if (v.nomem)
    return cache_fail(c, TJ_ENOMEM, "out of memory");
  if (rc != TJ_OK)
    return sql_fail(c, "listing tuning decisions");
  return TJ_OK;
}
