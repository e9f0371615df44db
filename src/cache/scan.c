/*
 * scan.c: the narrow reads and writes behind tj_cache_* (admin.c): a scan
 * of every row, the sums, SQLite's integrity check, dropping rows judged
 * bad, and clearing.  Each takes the connection's lock, which is
 * recursive: a scan's callback may call back into the handle.
 */
#include "cache_internal.h"
#include "codestore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The columns every scan reads, in the order row_entry expects (each row's
 * resources come from kernel_resources, resources.c); a judging
 * scan adds the code's length (-1 for what is not a blob) and the code
 * itself, never read past TJ_CACHE_MAX_CODE_BYTES. */
#define ENTRY_COLUMNS                                                        \
  "key, kernel, arch, platform, compiler, options, code_hash, code_size, "   \
  "compile_ms, created, last_used, hits, entries, origin"
#define ENTRY_COLUMN_COUNT 14
#define MRU_ORDER                                                            \
  " FROM code_objects ORDER BY last_used DESC, created DESC, key"

static const char *text_or_empty(sqlite3_stmt *st, int col)
{
  const unsigned char *s = sqlite3_column_text(st, col);
  return s ? (const char *)s : "";
}

/* Hits that runtimes reading only code files noted and no writer has
 * folded into the rows yet (codestore.h): counted as the rows' own. */
typedef struct pending {
  char (*keys)[TJ__KEY_HEX];
  uint64_t *hits;
  int64_t *when;
  size_t n;
} pending;

static void pending_read(tj__cache *c, pending *p)
{
  if (tj__codestore_peek_hits(c->store, &p->keys, &p->hits, &p->when,
                              &p->n) != TJ_OK)
    p->n = 0;
}

static void pending_free(pending *p)
{
  free(p->keys);
  free(p->hits);
  free(p->when);
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
  e->origin = text_or_empty(st, 13);
}

/* The judging scan's verdict on the row st is at. */
static int judge_entry(sqlite3_stmt *st)
{
  int64_t size = sqlite3_column_int64(st, ENTRY_COLUMN_COUNT);
  int64_t declared = sqlite3_column_int64(st, 7);
  const char *hash = (const char *)sqlite3_column_text(st, 6);
  int verdict = tj__rows_judge_code(NULL, size, declared, hash, 0);
  if (verdict)
    return verdict;
  int col = ENTRY_COLUMN_COUNT + 1;
  return tj__rows_judge_code(sqlite3_column_blob(st, col),
                             sqlite3_column_bytes(st, col), declared, hash, 1);
}

int tj__cache_scan(tj__cache *c, int judge, tj__cache_scan_fn fn, void *ctx)
{
  char sql[640];
  if (judge)
    snprintf(sql, sizeof sql, "SELECT " ENTRY_COLUMNS ", CASE typeof(code) "
             "WHEN 'blob' THEN length(code) ELSE -1 END, CASE WHEN "
             "typeof(code) = 'blob' AND length(code) <= %llu THEN code END"
             MRU_ORDER, (unsigned long long)TJ_CACHE_MAX_CODE_BYTES);
  else
    snprintf(sql, sizeof sql, "SELECT " ENTRY_COLUMNS MRU_ORDER);
  sqlite3_stmt *st, *res = NULL;
  pthread_mutex_lock(&c->lock);
  int rc = tj__sql_prepare(c->db, sql, 0, &st);
  if (rc == SQLITE_OK)
    rc = tj__sql_prepare(c->db, tj__resources_select_sql, 0, &res);
  tj_cache_entry e;
  pending p;
  pending_read(c, &p);
  while (rc == SQLITE_OK && (rc = tj__sql_step(st)) == SQLITE_ROW) {
    row_entry(st, &e);
    for (size_t i = 0; i < p.n; i++)
      e.hits += strcmp(p.keys[i], e.key) == 0 ? p.hits[i] : 0;
    tj_cache_kernel *ks = NULL;
    int n = 0;
    if (res && (rc = tj__resources_get(res, e.key, &ks, &n)) != SQLITE_OK)
      break;
    e.num_kernels = n;
    e.kernels = ks;
    rc = fn(&e, judge ? judge_entry(st) : 0, ctx) ? SQLITE_DONE : SQLITE_OK;
    tj__resources_free(ks, n);
  }
  int out = rc == SQLITE_DONE ? TJ_OK : tj__cache_note_error(c, TJ_ECACHE);
  pending_free(&p);
  sqlite3_finalize(res);
  sqlite3_finalize(st);
  pthread_mutex_unlock(&c->lock);
  return out;
}

static int remote_sums(tj__cache *c, uint64_t *out);

int tj__cache_sums_get(tj__cache *c, tj__cache_sums *out)
{
  static const char sql[] =
    "SELECT count(*), total(code_size), total(hits), total(hits * "
    "compile_ms), (SELECT total(value) FROM counters WHERE name = 'misses'), "
    "(SELECT user_version FROM pragma_user_version), "
    "total(origin = 'system'), total(CASE WHEN origin = 'system' THEN hits "
    "END) FROM code_objects";
  sqlite3_stmt *st;
  pthread_mutex_lock(&c->lock);
  int rc = tj__sql_prepare(c->db, sql, 0, &st);
  if (rc == SQLITE_OK)
    rc = tj__sql_step(st);
  if (rc == SQLITE_ROW) {
    out->entries = (uint64_t)sqlite3_column_double(st, 0);
    out->bytes = (uint64_t)sqlite3_column_double(st, 1);
    out->hits = (uint64_t)sqlite3_column_double(st, 2);
    out->compile_ms_saved = sqlite3_column_double(st, 3);
    out->misses = (uint64_t)sqlite3_column_double(st, 4);
    out->schema_version = sqlite3_column_int(st, 5);
    out->system_entries = (uint64_t)sqlite3_column_double(st, 6);
    out->system_hits = (uint64_t)sqlite3_column_double(st, 7);
  }
  sqlite3_finalize(st);
  pending p;
  pending_read(c, &p);
  for (size_t i = 0; i < p.n; i++)
    out->hits += p.hits[i];
  pending_free(&p);
  memset(out->remote, 0, sizeof out->remote);
  if (rc == SQLITE_ROW && remote_sums(c, out->remote) != SQLITE_OK)
    rc = SQLITE_ERROR;
  int result = rc == SQLITE_ROW ? TJ_OK : tj__cache_note_error(c, TJ_ECACHE);
  pthread_mutex_unlock(&c->lock);
  return result;
}

const char *const tj__remote_counter_names[TJ__REMOTE_COUNTERS] = {
    "remote_hits", "remote_misses", "remote_errors", "remote_timeouts",
    "remote_bytes_in", "remote_bytes_out", "remote_openings",
    "remote_renewals", "remote_takeovers", "remote_off_at_close",
    "remote_redirects"};

/* The remote counters, when a runtime has written any; c->lock held. */
static int remote_sums(tj__cache *c, uint64_t *out)
{
  sqlite3_stmt *st;
  int rc = tj__sql_prepare(c->db, "SELECT name, value FROM counters WHERE "
                           "name GLOB 'remote_*'", 0, &st);
  while (rc == SQLITE_OK && (rc = tj__sql_step(st)) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(st, 0);
    for (int i = 0; name && i < TJ__REMOTE_COUNTERS; i++)
      if (strcmp(name, tj__remote_counter_names[i]) == 0)
        out[i] = (uint64_t)sqlite3_column_int64(st, 1);
    rc = SQLITE_OK;
  }
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int tj__cache_add_counters(tj__cache *c, const uint64_t *values)
{
  int any = 0;
  for (int i = 0; i < TJ__REMOTE_COUNTERS; i++)
    any |= values[i] != 0;
  if (!any || tj__cache_readonly(c))
    return TJ_OK; /* a process that used no remote writes nothing */
  sqlite3_stmt *make = NULL, *add = NULL;
  pthread_mutex_lock(&c->lock);
  int rc = tj__sql_prepare(c->db, "INSERT OR IGNORE INTO counters(name, value) "
                           "VALUES (?1, 0)", 0, &make);
  if (rc == SQLITE_OK)
    rc = tj__sql_prepare(c->db, "UPDATE counters SET value = value + ?2 "
                         "WHERE name = ?1", 0, &add);
  if (rc == SQLITE_OK)
    rc = tj__sql_begin(c->db, 1);
  for (int i = 0; rc == SQLITE_OK && i < TJ__REMOTE_COUNTERS; i++) {
    if (!values[i])
      continue;
    sqlite3_stmt *steps[2] = {make, add};
    for (int j = 0; rc == SQLITE_OK && j < 2; j++) {
      sqlite3_bind_text(steps[j], 1, tj__remote_counter_names[i], -1,
                        SQLITE_STATIC);
      if (j)
        sqlite3_bind_int64(steps[j], 2, (sqlite3_int64)values[i]);
      rc = tj__sql_step(steps[j]) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
      tj__sql_reset(steps[j]);
    }
  }
  if (rc == SQLITE_OK)
    rc = tj__sql_commit(c->db);
  if (rc != SQLITE_OK)
    tj__cache_note_error(c, 0);
  tj__sql_rollback(c->db);
  sqlite3_finalize(make);
  sqlite3_finalize(add);
  pthread_mutex_unlock(&c->lock);
  return rc == SQLITE_OK ? TJ_OK : TJ_ECACHE;
}

int tj__cache_integrity(tj__cache *c, char *problem, size_t len)
{
  problem[0] = '\0';
  pthread_mutex_lock(&c->lock);
  int rc = tj__sql_text(c->db, "PRAGMA integrity_check", problem, len);
  int out = rc == SQLITE_OK && strcmp(problem, "ok") == 0 ? TJ_OK : TJ_ECACHE;
  if (rc != SQLITE_OK) {
    problem[0] = '\0';
    tj__cache_note_error(c, 0);
  }
  pthread_mutex_unlock(&c->lock);
  return out;
}

int tj__cache_drop_rows(tj__cache *c, const tj__cache_row_id *rows, uint64_t n)
{
  pthread_mutex_lock(&c->lock);
  int rc = tj__sql_begin(c->db, 1);
  for (uint64_t i = 0; rc == SQLITE_OK && i < n; i++)
    rc = tj__rows_drop(c, rows[i].key, rows[i].hash);
  if (rc == SQLITE_OK)
    rc = tj__sql_commit(c->db);
  if (rc != SQLITE_OK)
    tj__cache_note_error(c, 0);
  tj__sql_rollback(c->db);
  pthread_mutex_unlock(&c->lock);
  return rc == SQLITE_OK ? TJ_OK : TJ_ECACHE;
}

int tj__cache_clear(tj__cache *c)
{
  pthread_mutex_lock(&c->lock);
  int rc = tj__sql_begin(c->db, 1);
  if (rc == SQLITE_OK)
    rc = tj__sql_exec(c->db, "DELETE FROM code_objects; DELETE FROM tuning; "
                      "UPDATE counters SET value = 0");
  if (rc == SQLITE_OK)
    rc = tj__sql_commit(c->db);
  if (rc != SQLITE_OK)
    tj__cache_note_error(c, 0);
  tj__sql_rollback(c->db);
  /* Give the space back to the file system.  Best effort: a process
   * reading the file meanwhile only delays it to a later clear. */
  if (rc == SQLITE_OK) {
    tj__rows_sweep_code(c);
    tj__sql_try(c->db, "VACUUM; PRAGMA wal_checkpoint(TRUNCATE)");
  }
  pthread_mutex_unlock(&c->lock);
  return rc == SQLITE_OK ? TJ_OK : TJ_ECACHE;
}

/* ---------------------------------------------------- a miss's explanation */

static int has_inputs_table(tj__cache *c)
{
  int64_t n = 0;
  return tj__sql_int64(c->db, "SELECT count(*) FROM sqlite_master WHERE "
                       "type = 'table' AND name = 'key_inputs'", &n) ==
             SQLITE_OK && n > 0;
}

static int similar_rows(tj__cache *c, sqlite3_stmt *st, tj__similar_fn fn,
                        void *ctx)
{
  int rc;
  while ((rc = tj__sql_step(st)) == SQLITE_ROW) {
    const unsigned char *in = sqlite3_column_text(st, 7);
    tj__similar_row r = {text_or_empty(st, 0), text_or_empty(st, 1),
                         text_or_empty(st, 2), text_or_empty(st, 3),
                         text_or_empty(st, 4), text_or_empty(st, 5),
                         text_or_empty(st, 6), (const char *)in,
                         sqlite3_column_int64(st, 8)};
    if (fn(&r, ctx))
      return SQLITE_DONE;
  }
  if (rc != SQLITE_DONE)
    tj__cache_note_error(c, 0);
  return rc;
}

int tj__cache_similar(tj__cache *c, const char *kernel, tj__similar_fn fn,
                      void *ctx)
{
  char sql[512];
  sqlite3_stmt *st = NULL;
  pthread_mutex_lock(&c->lock);
  int joined = !c->broken && has_inputs_table(c);
  snprintf(sql, sizeof sql, "SELECT c.key, c.kernel, c.arch, c.platform, "
           "c.compiler, c.options, c.entries, %s, c.created FROM "
           "code_objects c %s WHERE %s ORDER BY c.created DESC, c.key",
           joined ? "i.inputs" : "NULL",
           joined ? "LEFT JOIN key_inputs i ON i.key = c.key" : "",
           kernel ? "c.kernel = ?1 AND c.entries = ''" : "c.entries <> ''");
  int rc = c->broken ? SQLITE_ERROR : tj__sql_prepare(c->db, sql, 0, &st);
  if (rc == SQLITE_OK) {
    if (kernel)
      sqlite3_bind_text(st, 1, kernel, -1, SQLITE_STATIC);
    rc = similar_rows(c, st, fn, ctx);
  }
  sqlite3_finalize(st);
  pthread_mutex_unlock(&c->lock);
  return rc == SQLITE_DONE ? TJ_OK : TJ_ECACHE;
}
