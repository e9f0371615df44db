/*
 * cache_admin.c: the maintenance half of the SQLite store: trimming to a
 * size limit and age, and (for tokitai-jit and callers) listing, stats,
 * verification and clearing through the public tj_cache handle.  It shares
 * cache.c's connection and lock.
 */
#include "internal.h"
#include "embedded.h"

#include <sqlite3.h>
#include <string.h>
#include <time.h>

/* The oldest row by last_used, with its size; 0 when there is none. */
static int oldest_row(sqlite3 *db, int64_t before, char key[TJ__KEY_HEX])
{
  sqlite3_stmt *st;
  int found = 0;
  const char *sql = "SELECT key FROM code_objects WHERE last_used < ?1 "
                    "ORDER BY last_used, created LIMIT 1";
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    return 0;
  sqlite3_bind_int64(st, 1, before);
  if (tj__cache_step(st) == SQLITE_ROW) {
    const unsigned char *k = sqlite3_column_text(st, 0);
    if (k && strlen((const char *)k) < TJ__KEY_HEX) {
      strcpy(key, (const char *)k);
      found = 1;
    }
  }
  sqlite3_finalize(st);
  return found;
}

static int64_t total_code_bytes(sqlite3 *db)
{
  sqlite3_stmt *st;
  int64_t total = -1;
  if (sqlite3_prepare_v2(db, "SELECT total(code_size) FROM code_objects", -1,
                         &st, NULL) != SQLITE_OK)
    return -1;
  if (tj__cache_step(st) == SQLITE_ROW)
    total = (int64_t)sqlite3_column_double(st, 0);
  sqlite3_finalize(st);
  return total;
}

static int delete_row(sqlite3 *db, const char *key)
{
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "DELETE FROM code_objects WHERE key = ?1", -1,
                         &st, NULL) != SQLITE_OK)
    return 0;
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  int ok = tj__cache_step(st) == SQLITE_DONE && sqlite3_changes(db) > 0;
  sqlite3_finalize(st);
  return ok;
}

int tj__cache_trim(tj__cache *c, int64_t max_age_seconds, uint64_t max_bytes,
                   uint64_t *evicted)
{
  uint64_t n = 0;
  if (evicted)
    *evicted = 0;
  if (!c || tj__cache_readonly(c))
    return TJ_OK;
  sqlite3 *db = tj__cache_db(c);
  char key[TJ__KEY_HEX];
  int rc = TJ_OK;
  tj__cache_lock(c);
  if (max_age_seconds >= 0) {
    int64_t cutoff = (int64_t)time(NULL) - max_age_seconds;
    while (oldest_row(db, cutoff, key) && delete_row(db, key))
      n++;
  }
  if (!TJ__CACHE_NO_LIMIT(max_bytes)) {
    int64_t total = total_code_bytes(db);
    while (total > (int64_t)max_bytes && oldest_row(db, INT64_MAX, key)) {
      if (!delete_row(db, key)) {
        rc = TJ_ECACHE;
        break;
      }
      n++;
      total = total_code_bytes(db);
    }
  }
  tj__cache_unlock(c);
  if (evicted)
    *evicted = n;
  return rc;
}

/* ================================================================ tj_cache
 * The public handle: its own connection to one file, for one thread at a
 * time.  Since no other thread can reach it, its statements need not take
 * the connection lock, and a visit callback may call back into the handle.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

struct tj_cache {
  tj__cache *cache;
  char *path;
  char *msg;
  int readonly_flag; /* opened with TJ_CACHE_READONLY */
};

/* The columns every visit reads, in the order row_entry expects. */
#define ENTRY_COLUMNS                                                        \
  "key, kernel, arch, platform, compiler, options, code_hash, code_size, "   \
  "compile_ms, created, last_used, hits, entries"
#define ENTRY_COLUMN_COUNT 13

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

static const char *text_or_empty(sqlite3_stmt *st, int col)
{
  const unsigned char *s = sqlite3_column_text(st, col);
  return s ? (const char *)s : "";
}

static void row_entry(sqlite3_stmt *st, tj_cache_entry *e)
{
  e->key = text_or_empty(st, 0);
  e->kernel = text_or_empty(st, 1);
  e->arch = text_or_empty(st, 2);
  e->platform = text_or_empty(st, 3);
  e->compiler = text_or_empty(st, 4);
  e->options = text_or_empty(st, 5);
  e->code_hash = text_or_empty(st, 6);
  e->code_size = (uint64_t)sqlite3_column_int64(st, 7);
  e->compile_ms = sqlite3_column_double(st, 8);
  e->created = sqlite3_column_int64(st, 9);
  e->last_used = sqlite3_column_int64(st, 10);
  e->hits = (uint64_t)sqlite3_column_int64(st, 11);
  e->entries = text_or_empty(st, 12);
}

/* A failed SQLite call on c, named by what we were doing. */
static int sql_fail(tj_cache *c, const char *doing)
{
  return cache_fail(c, TJ_ECACHE, "cache %s: %s: %s", c->path, doing,
                    sqlite3_errmsg(tj__cache_db(c->cache)));
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

int tj_cache_open(tj_cache **out, const char *path, unsigned flags)
{
  if (!out)
    return TJ_EINVAL;
  tj_cache *c = calloc(1, sizeof *c);
  if (!(*out = c))
    return TJ_ENOMEM;
  if (flags & ~(unsigned)(TJ_CACHE_READONLY | TJ_CACHE_GROUP))
    return cache_fail(c, TJ_EINVAL, "tj_cache_open: unknown flags 0x%x",
                      flags & ~(unsigned)(TJ_CACHE_READONLY | TJ_CACHE_GROUP));
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

int tj_cache_list(tj_cache *c, tj_cache_visit fn, void *ctx)
{
  if (!c || !c->cache || !fn)
    return TJ_EINVAL;
  sqlite3_stmt *st;
  const char *sql = "SELECT " ENTRY_COLUMNS " FROM code_objects "
                    "ORDER BY last_used DESC, created DESC, key";
  if (sqlite3_prepare_v2(tj__cache_db(c->cache), sql, -1, &st, NULL) != SQLITE_OK)
    return sql_fail(c, "listing entries");
  int rc;
  tj_cache_entry e;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    row_entry(st, &e);
    if (fn(&e, ctx))
      break;
  }
  rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? TJ_OK
                                             : sql_fail(c, "listing entries");
  sqlite3_finalize(st);
  return rc;
}

/* One row of numbers from sql into v[0..n-1]; TJ_OK or TJ_ECACHE. */
static int query_numbers(tj_cache *c, const char *sql, double *v, int n)
{
  sqlite3_stmt *st;
  sqlite3 *db = tj__cache_db(c->cache);
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    return sql_fail(c, "reading statistics");
  int rc = tj__cache_step(st);
  for (int i = 0; i < n; i++)
    v[i] = rc == SQLITE_ROW ? sqlite3_column_double(st, i) : 0;
  rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? TJ_OK
                                             : sql_fail(c, "reading statistics");
  sqlite3_finalize(st);
  return rc;
}

int tj_cache_get_stats(tj_cache *c, tj_cache_stats *out)
{
  if (!c || !c->cache || !out)
    return TJ_EINVAL;
  double rows[4], misses = 0, version = 0;
  int rc = query_numbers(c, "SELECT count(*), total(code_size), total(hits), "
                         "total(hits * compile_ms) FROM code_objects", rows, 4);
  if (rc == TJ_OK)
    rc = query_numbers(c, "SELECT total(value) FROM counters "
                       "WHERE name = 'misses'", &misses, 1);
  if (rc == TJ_OK)
    rc = query_numbers(c, "PRAGMA user_version", &version, 1);
  if (rc != TJ_OK)
    return rc;
  struct stat st;
  tj_cache_stats s = {0};
  s.entries = (uint64_t)rows[0];
  s.bytes = (uint64_t)rows[1];
  s.hits = (uint64_t)rows[2];
  s.compile_ms_saved = rows[3];
  s.misses = (uint64_t)misses;
  s.schema_version = (int)version;
  /* The limit lives in each runtime's options, not in the file; report
   * the one a runtime applies when its caller sets none. */
  s.size_limit = TJ__CACHE_DEFAULT_LIMIT;
  s.file_bytes = stat(c->path, &st) == 0 ? (uint64_t)st.st_size : 0;
  *out = s;
  return TJ_OK;
}

/* ------------------------------------------------------------ verify */

/* A row that failed its check, remembered until the scan is over, since
 * deleting under a live SELECT would disturb it. */
typedef struct bad_row {
  char key[TJ__KEY_HEX];
  char hash[TJ__KEY_HEX];
} bad_row;

/* SQLite's own check: "ok", or the first problem in the message. */
static int integrity_check(tj_cache *c)
{
  sqlite3_stmt *st;
  sqlite3 *db = tj__cache_db(c->cache);
  if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) != SQLITE_OK)
    return cache_fail(c, TJ_ECACHE, "cache %s is damaged: %s", c->path,
                      sqlite3_errmsg(db));
  int rc = tj__cache_step(st), result = TJ_OK;
  const char *first = rc == SQLITE_ROW ? text_or_empty(st, 0) : NULL;
  if (!first)
    result = cache_fail(c, TJ_ECACHE, "cache %s is damaged: %s", c->path,
                        sqlite3_errmsg(db));
  else if (strcmp(first, "ok") != 0)
    result = cache_fail(c, TJ_ECACHE, "cache %s failed SQLite's integrity "
                        "check: %s", c->path, first);
  sqlite3_finalize(st);
  return result;
}

/* Whether the blob in column ENTRY_COLUMN_COUNT (NULL when over
 * TJ_CACHE_MAX_CODE_BYTES: never read) matches the stored hash and size. */
static int blob_ok(sqlite3_stmt *st, const tj_cache_entry *e)
{
  const void *blob = sqlite3_column_blob(st, ENTRY_COLUMN_COUNT);
  size_t n = (size_t)sqlite3_column_bytes(st, ENTRY_COLUMN_COUNT);
  char hash[TJ__KEY_HEX];
  if (!blob || n == 0 || n != e->code_size)
    return 0;
  tj__hash_hex(blob, n, hash);
  return strcmp(hash, e->code_hash) == 0;
}

/* A row that names an embedded kernel (no options: the library compiles
 * those with none) must sit at the key its own arch, platform and
 * compiler give that kernel's source; any other row can only be checked
 * against its hash.  A caller's own kernel of the same name fails this
 * too, and costs one compile once dropped. */
static int key_ok(const tj_cache_entry *e)
{
  const tj__embedded_kernel *k = tj__embedded_find(e->kernel);
  if (!k || e->options[0])
    return 1;
  char key[TJ__KEY_HEX];
  tj__key_of_kernel(k->source, k->source_len, k->entry, "", e->arch,
                    e->platform, e->compiler, key);
  return strcmp(key, e->key) == 0;
}

/* Scan every row; report the bad ones to fn and, when list is given,
 * append them to it.  *nbad counts them. */
static int scan_blobs(tj_cache *c, tj_cache_visit fn, void *ctx,
                      bad_row **list, uint64_t *nbad)
{
  sqlite3_stmt *st;
  sqlite3 *db = tj__cache_db(c->cache);
  char sql[512];
  snprintf(sql, sizeof sql, "SELECT " ENTRY_COLUMNS ", CASE WHEN "
           "length(code) <= %llu THEN code END FROM code_objects ORDER BY "
           "last_used DESC, created DESC, key",
           (unsigned long long)TJ_CACHE_MAX_CODE_BYTES);
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    return sql_fail(c, "reading entries");
  int rc, result = TJ_OK, stop = 0;
  tj_cache_entry e;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    row_entry(st, &e);
    if (blob_ok(st, &e) && key_ok(&e))
      continue;
    if (list) {
      bad_row *grown = realloc(*list, (*nbad + 1) * sizeof **list);
      if (!grown) {
        result = cache_fail(c, TJ_ENOMEM, "out of memory");
        break;
      }
      *list = grown;
      snprintf(grown[*nbad].key, TJ__KEY_HEX, "%s", e.key);
      snprintf(grown[*nbad].hash, TJ__KEY_HEX, "%s", e.code_hash);
    }
    (*nbad)++;
    if (!stop && fn)
      stop = fn(&e, ctx); /* stop the reports, not the count */
  }
  if (result == TJ_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
    result = sql_fail(c, "reading entries");
  sqlite3_finalize(st);
  return result;
}

/* Delete the rows judged bad, each only if it is still the row we judged
 * (a racing writer may have replaced it with a good one). */
static int drop_rows(tj_cache *c, const bad_row *rows, uint64_t n)
{
  sqlite3_stmt *st;
  sqlite3 *db = tj__cache_db(c->cache);
  if (sqlite3_prepare_v2(db, "DELETE FROM code_objects WHERE key = ?1 AND "
                         "code_hash = ?2", -1, &st, NULL) != SQLITE_OK)
    return sql_fail(c, "repairing");
  int rc = tj__cache_exec(c->cache, "BEGIN IMMEDIATE");
  for (uint64_t i = 0; rc == SQLITE_OK && i < n; i++) {
    sqlite3_bind_text(st, 1, rows[i].key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, rows[i].hash, -1, SQLITE_STATIC);
    rc = tj__cache_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_reset(st);
  }
  if (rc == SQLITE_OK)
    rc = tj__cache_exec(c->cache, "COMMIT");
  int result = rc == SQLITE_OK ? TJ_OK : sql_fail(c, "repairing");
  if (rc != SQLITE_OK)
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  sqlite3_finalize(st);
  return result;
}

int tj_cache_verify(tj_cache *c, int repair, tj_cache_visit fn, void *ctx,
                    uint64_t *bad)
{
  if (!c || !c->cache)
    return TJ_EINVAL;
  int rc = repair ? check_writable(c, "repair") : TJ_OK;
  if (rc == TJ_OK)
    rc = integrity_check(c);
  if (rc != TJ_OK)
    return rc;
  bad_row *rows = NULL;
  uint64_t n = 0;
  rc = scan_blobs(c, fn, ctx, repair ? &rows : NULL, &n);
  if (rc == TJ_OK && repair && n > 0)
    rc = drop_rows(c, rows, n);
  free(rows);
  if (rc == TJ_OK && bad)
    *bad = n;
  return rc;
}

/* ------------------------------------------------------------ evict, clear */

/* Ages are whole seconds, so an entry used at any moment of the current
 * second counts as older than 0 s: "older than 0s" empties the cache. */
static int evict_by_age(tj_cache *c, int64_t max_age_seconds, uint64_t *n)
{
  sqlite3_stmt *st;
  sqlite3 *db = tj__cache_db(c->cache);
  if (sqlite3_prepare_v2(db, "DELETE FROM code_objects WHERE last_used <= ?1",
                         -1, &st, NULL) != SQLITE_OK)
    return sql_fail(c, "evicting");
  sqlite3_bind_int64(st, 1, (int64_t)time(NULL) - max_age_seconds);
  int rc = tj__cache_step(st) == SQLITE_DONE ? TJ_OK : sql_fail(c, "evicting");
  if (rc == TJ_OK)
    *n += (uint64_t)sqlite3_changes(db);
  sqlite3_finalize(st);
  return rc;
}

int tj_cache_evict(tj_cache *c, int64_t max_age_seconds, uint64_t max_bytes,
                   uint64_t *evicted)
{
  if (!c || !c->cache)
    return TJ_EINVAL;
  uint64_t n = 0, by_size = 0;
  int rc = check_writable(c, "evict from");
  if (rc == TJ_OK && max_age_seconds >= 0)
    rc = evict_by_age(c, max_age_seconds, &n);
  if (rc == TJ_OK && !TJ__CACHE_NO_LIMIT(max_bytes) &&
      tj__cache_trim(c->cache, -1, max_bytes, &by_size) != TJ_OK)
    rc = sql_fail(c, "evicting to the size limit");
  if (evicted)
    *evicted = n + by_size;
  return rc;
}

int tj_cache_clear(tj_cache *c)
{
  if (!c || !c->cache)
    return TJ_EINVAL;
  int rc = check_writable(c, "clear");
  if (rc != TJ_OK)
    return rc;
  sqlite3 *db = tj__cache_db(c->cache);
  if (tj__cache_exec(c->cache, "BEGIN IMMEDIATE; DELETE FROM code_objects; "
                     "UPDATE counters SET value = 0; COMMIT") != SQLITE_OK) {
    rc = sql_fail(c, "clearing");
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
  }
  /* Give the space back to the file system.  Best effort: a process
   * reading the file meanwhile only delays it to a later clear. */
  sqlite3_exec(db, "VACUUM; PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
  return TJ_OK;
}
