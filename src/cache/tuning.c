/*
 * tuning.c: the tuning table: which configuration of an embedded kernel
 * family was fastest for a shape class, keyed like code (op, arch,
 * platform, compiler fingerprint, shape class), with what was measured.
 *
 * A row is only advice: the library checks the configuration it names
 * against its own table before using it (src/ops/gemm/configs.c), so a
 * damaged row can at worst cost the speed of the heuristic.  A row whose
 * columns have the wrong types, or whose config is not a name, is
 * reported as bad and left for a tune to replace (INSERT OR REPLACE).
 */
#include "cache_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TUNING_COLUMNS                                                      \
  "op, arch, platform, compiler, shape_class, config, m, n, k, device, "    \
  "runs, measured, origin, created"

int tj__tuning_name_ok(const char *s)
{
  size_t n = 0;
  if (!s)
    return 0;
  for (; s[n]; n++)
    if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') ||
          s[n] == '_') || n >= TJ__TUNING_NAME_MAX)
      return 0;
  return n > 0;
}

static const char *text_or_empty(sqlite3_stmt *st, int col)
{
  const unsigned char *s = sqlite3_column_text(st, col);
  return s ? (const char *)s : "";
}

/* Every column of the row st is at has the type schema.sql gives it, and
 * its config is a name. */
static int row_is_whole(sqlite3_stmt *st)
{
  static const int types[] = {
    SQLITE_TEXT, SQLITE_TEXT, SQLITE_TEXT, SQLITE_TEXT, SQLITE_TEXT,
    SQLITE_TEXT, SQLITE_INTEGER, SQLITE_INTEGER, SQLITE_INTEGER, SQLITE_TEXT,
    SQLITE_INTEGER, SQLITE_TEXT, SQLITE_TEXT, SQLITE_INTEGER};
  for (int i = 0; i < (int)(sizeof types / sizeof types[0]); i++)
    if (sqlite3_column_type(st, i) != types[i])
      return 0;
  return tj__tuning_name_ok((const char *)sqlite3_column_text(st, 5));
}

static void row_from(sqlite3_stmt *st, tj__tuning_row *r)
{
  r->op = text_or_empty(st, 0);
  r->arch = text_or_empty(st, 1);
  r->platform = text_or_empty(st, 2);
  r->compiler = text_or_empty(st, 3);
  r->shape_class = text_or_empty(st, 4);
  r->config = text_or_empty(st, 5);
  r->m = sqlite3_column_int(st, 6);
  r->n = sqlite3_column_int(st, 7);
  r->k = sqlite3_column_int(st, 8);
  r->device = text_or_empty(st, 9);
  r->runs = sqlite3_column_int(st, 10);
  r->measured = text_or_empty(st, 11);
  r->origin = text_or_empty(st, 12);
  r->created = sqlite3_column_int64(st, 13);
}

int tj__cache_tuning_get(tj__cache *c, const tj__tuning_row *want,
                         char **config, int *bad)
{
  static const char sql[] =
    "SELECT " TUNING_COLUMNS " FROM tuning WHERE op = ?1 AND arch = ?2 AND "
    "platform = ?3 AND compiler = ?4 AND shape_class = ?5";
  sqlite3_stmt *st = NULL;
  *config = NULL;
  *bad = 0;
  pthread_mutex_lock(&c->lock);
  if (c->broken) {
    pthread_mutex_unlock(&c->lock);
    return TJ_ENOENT;
  }
  int rc = TJ_ENOENT, step = tj__sql_prepare(c->db, sql, 0, &st);
  if (step == SQLITE_OK) {
    const char *key[] = {want->op, want->arch, want->platform, want->compiler,
                         want->shape_class};
    for (int i = 0; i < 5; i++)
      sqlite3_bind_text(st, i + 1, key[i], -1, SQLITE_STATIC);
    step = tj__sql_step(st);
  }
  if (step == SQLITE_ROW && !(*bad = !row_is_whole(st)))
    rc = (*config = strdup((const char *)sqlite3_column_text(st, 5)))
             ? TJ_OK : TJ_ENOMEM;
  sqlite3_finalize(st);
  if (step != SQLITE_ROW && step != SQLITE_DONE && !tj__sql_is_busy(step))
    rc = tj__cache_failed(c, step, 1);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

static int insert_decision(sqlite3 *db, const tj__tuning_row *r)
{
  static const char sql[] =
    "INSERT OR REPLACE INTO tuning (" TUNING_COLUMNS ") VALUES (?1, ?2, ?3, "
    "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)";
  sqlite3_stmt *st;
  int rc = tj__sql_prepare(db, sql, 0, &st);
  if (rc != SQLITE_OK)
    return rc;
  const char *text[] = {r->op, r->arch, r->platform, r->compiler,
                        r->shape_class, r->config};
  for (int i = 0; i < 6; i++)
    sqlite3_bind_text(st, i + 1, text[i], -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 7, r->m);
  sqlite3_bind_int(st, 8, r->n);
  sqlite3_bind_int(st, 9, r->k);
  sqlite3_bind_text(st, 10, r->device, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 11, r->runs);
  sqlite3_bind_text(st, 12, r->measured, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 13, r->origin, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 14, r->created ? r->created : (int64_t)time(NULL));
  rc = tj__sql_step(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int tj__cache_tuning_put(tj__cache *c, const tj__tuning_row *r)
{
  if (!tj__tuning_name_ok(r->config))
    return TJ_EINVAL;
  pthread_mutex_lock(&c->lock);
  if (c->readonly || c->nowrite || c->broken) {
    pthread_mutex_unlock(&c->lock);
    return TJ_OK; /* a read-only cache keeps no decisions; said elsewhere */
  }
  int rc = tj__sql_begin(c->db, 1);
  if (rc == SQLITE_OK)
    rc = insert_decision(c->db, r);
  int out = tj__cache_end_write(c, rc);
  pthread_mutex_unlock(&c->lock);
  return out;
}

int tj__cache_tuning_scan(tj__cache *c, tj__tuning_scan_fn fn, void *ctx)
{
  static const char sql[] =
    "SELECT " TUNING_COLUMNS " FROM tuning ORDER BY op, arch, platform, "
    "compiler, shape_class";
  sqlite3_stmt *st = NULL;
  pthread_mutex_lock(&c->lock);
  int rc = tj__sql_prepare(c->db, sql, 0, &st);
  tj__tuning_row r;
  while (rc == SQLITE_OK && (rc = tj__sql_step(st)) == SQLITE_ROW) {
    /* Types first: reading a column as text converts it. */
    int bad = !row_is_whole(st);
    row_from(st, &r);
    rc = fn(&r, bad, ctx) ? SQLITE_DONE : SQLITE_OK;
  }
  int out = rc == SQLITE_DONE ? TJ_OK : tj__cache_note_error(c, TJ_ECACHE);
  sqlite3_finalize(st);
  pthread_mutex_unlock(&c->lock);
  return out;
}
