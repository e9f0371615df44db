/*
 * evict.c: deleting rows by age and by size.
 *
 * Both evictions by age, the runtime's of another compiler's rows and
 * tj_cache_evict's, run one statement (c->idle, rows.c): a row is older
 * than N seconds when it was last used at or before now - N.  Ages are
 * whole seconds, so a row used at any moment of the current second is
 * older than 0 s, and "older than 0 s" empties the cache.  The code
 * files of the rows deleted go with them (tj__rows_sweep_code).
 */
#include "cache_internal.h"

#include <stdlib.h>
#include <time.h>

/* Delete rows idle for max_age seconds or more, all of them (compiler
 * NULL) or those of other compilers.  Called with c->lock held. */
static int evict_idle(tj__cache *c, int64_t max_age, const char *compiler,
                      uint64_t *n)
{
  if (tj__rows_need(c, &c->idle) != SQLITE_OK) {
    tj__cache_note_error(c, 0);
    return TJ_ECACHE;
  }
  sqlite3_bind_int64(c->idle, 1, (sqlite3_int64)time(NULL) - max_age);
  if (compiler)
    sqlite3_bind_text(c->idle, 2, compiler, -1, SQLITE_STATIC);
  int rc = tj__sql_step(c->idle);
  int gone = rc == SQLITE_DONE ? sqlite3_changes(c->db) : 0;
  if (rc == SQLITE_DONE)
    *n += (uint64_t)gone;
  else
    tj__cache_note_error(c, 0);
  tj__sql_reset(c->idle);
  if (gone > 0)
    tj__rows_sweep_code(c);
  return rc == SQLITE_DONE ? TJ_OK : TJ_ECACHE;
}

int tj__cache_evict_foreign(tj__cache *c, const char *compiler,
                            int64_t idle_seconds, uint64_t *evicted)
{
  uint64_t n = 0;
  if (evicted)
    *evicted = 0;
  if (!c || !compiler || idle_seconds < 0)
    return TJ_EINVAL;
  int rc = TJ_OK;
  pthread_mutex_lock(&c->lock);
  if (!tj__cache_readonly(c))
    rc = evict_idle(c, idle_seconds, compiler, &n);
  pthread_mutex_unlock(&c->lock);
  if (evicted)
    *evicted = n;
  return rc;
}

/* The rowids of the least recently used rows whose going brings total
 * down to max_bytes, and how many: a running total, read once, so that a
 * large trim is one pass.  Inside the caller's write transaction. */
static int pick_victims(tj__cache *c, int64_t total, int64_t max_bytes,
                        int64_t **ids, size_t *n)
{
  static const char sql[] = "SELECT rowid, code_size FROM code_objects "
                            "ORDER BY last_used, created, key";
  sqlite3_stmt *st;
  size_t cap = 0;
  int rc = tj__sql_prepare(c->db, sql, 0, &st);
  while (rc == SQLITE_OK && total > max_bytes &&
         (rc = tj__sql_step(st)) == SQLITE_ROW) {
    if (*n == cap) {
      int64_t *grown = realloc(*ids, (cap = cap ? 2 * cap : 16) * sizeof **ids);
      if (!grown) {
        rc = SQLITE_NOMEM;
        break;
      }
      *ids = grown;
    }
    (*ids)[(*n)++] = sqlite3_column_int64(st, 0);
    total -= sqlite3_column_int64(st, 1);
    rc = SQLITE_OK;
  }
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int delete_rowids(tj__cache *c, const int64_t *ids, size_t n)
{
  sqlite3_stmt *st;
  int rc = tj__sql_prepare(c->db, "DELETE FROM code_objects WHERE rowid = ?1",
                           0, &st);
  for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
    sqlite3_bind_int64(st, 1, ids[i]);
    rc = tj__sql_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    tj__sql_reset(st);
  }
  sqlite3_finalize(st);
  return rc;
}

/* Least recently used first until the code fits.  The common case, a file
 * within its limit, is one read; only a trim takes the write lock, and
 * reads the total again under it, so that racing trims cannot both delete
 * for the same excess. */
static int trim_to(tj__cache *c, int64_t max_bytes, uint64_t *n)
{
  static const char total_sql[] = "SELECT total(code_size) FROM code_objects";
  int64_t total = 0, *ids = NULL;
  size_t victims = 0;
  int rc = tj__sql_int64(c->db, total_sql, &total);
  if (rc != SQLITE_OK || total <= max_bytes)
    return rc == SQLITE_OK ? TJ_OK : tj__cache_note_error(c, TJ_ECACHE);
  rc = tj__sql_begin(c->db, 1);
  if (rc == SQLITE_OK)
    rc = tj__sql_int64(c->db, total_sql, &total);
  if (rc == SQLITE_OK)
    rc = pick_victims(c, total, max_bytes, &ids, &victims);
  if (rc == SQLITE_OK)
    rc = delete_rowids(c, ids, victims);
  if (rc == SQLITE_OK)
    rc = tj__sql_commit(c->db);
  if (rc != SQLITE_OK)
    tj__cache_note_error(c, 0);
  tj__sql_rollback(c->db);
  free(ids);
  if (rc == SQLITE_OK && victims > 0)
    tj__rows_sweep_code(c);
  if (rc == SQLITE_OK)
    *n += victims;
  return rc == SQLITE_OK ? TJ_OK : TJ_ECACHE;
}

int tj__cache_trim(tj__cache *c, int64_t max_age_seconds, uint64_t max_bytes,
                   uint64_t *evicted)
{
  uint64_t n = 0;
  if (evicted)
    *evicted = 0;
  if (!c || tj__cache_readonly(c))
    return TJ_OK;
  int rc = TJ_OK;
  pthread_mutex_lock(&c->lock);
  if (max_age_seconds >= 0)
    rc = evict_idle(c, max_age_seconds, NULL, &n);
  if (rc == TJ_OK && !TJ__CACHE_NO_LIMIT(max_bytes))
    rc = trim_to(c, (int64_t)max_bytes, &n);
  pthread_mutex_unlock(&c->lock);
  if (evicted)
    *evicted = n;
  return rc;
}
