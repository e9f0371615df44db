/*
 * rows.c: the load and store path of the SQLite store.
 *
 * Prepared statements only, kept for the connection's life; one
 * transaction per insert (the row and its entries' resources,
 * resources.c), INSERT OR IGNORE so that racing compilers all succeed and
 * leave one row.  Every blob is checked against its stored
 * XXH3-128 and size on load (tj__rows_judge_code, which tj_cache_verify
 * uses too), and its columns against the request; a row that fails is
 * deleted and recompiled.
 */
#include "cache_internal.h"
#include "codestore.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The statements a hit needs are prepared at open; the others (a store,
 * a drop, an eviction, recording use at close) on their first use, since
 * a warm start makes none or makes them once (preparing them all costs
 * much of the cache open; tj-bench's warm_start section). */
static const struct {
  size_t offset;
  int lazy;
  const char *sql;
} stmts[] = {
    /* One statement for a hit: the code is read only when it is a blob
     * of at most TJ_CACHE_MAX_CODE_BYTES (?2); length() and typeof() read
     * none.  Each expression costs its preparation (a second CASE costs
     * much of this one's), so the sizes are judged in C. */
    {offsetof(tj__cache, get), 0,
     "SELECT code_size, length(code), code_hash, kernel, arch, platform, "
     "compiler, options, entries, compile_ms, CASE WHEN typeof(code) = "
     "'blob' AND length(code) <= ?2 THEN code END "
     "FROM code_objects WHERE key = ?1"},
    {offsetof(tj__cache, put), 1,
     "INSERT OR IGNORE INTO code_objects (key, kernel, arch, platform, "
     "compiler, options, code, code_hash, code_size, compile_ms, created, "
     "last_used, hits, entries, origin) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
     "?8, ?9, ?10, ?11, ?11, 0, ?12, ?13)"},
    /* A row without a hash is bad and must go too: "" stands for none. */
    {offsetof(tj__cache, drop), 1,
     "DELETE FROM code_objects WHERE key = ?1 AND "
     "coalesce(code_hash, '') = ?2"},
    {offsetof(tj__cache, use), 1,
     "UPDATE code_objects SET hits = hits + ?2, last_used = "
     "max(last_used, ?3) WHERE key = ?1"},
    {offsetof(tj__cache, miss), 1,
     "UPDATE counters SET value = value + ?1 WHERE name = 'misses'"},
    /* The one age rule of every eviction (evict.c). */
    {offsetof(tj__cache, idle), 1,
     "DELETE FROM code_objects WHERE last_used <= ?1 AND "
     "(?2 IS NULL OR compiler <> ?2)"},
    {offsetof(tj__cache, resources), 1, tj__resources_insert_sql},
};

const char tj__inputs_table_sql[] =
    "CREATE TABLE IF NOT EXISTS key_inputs (key TEXT PRIMARY KEY, "
    "inputs TEXT NOT NULL); "
    "CREATE TRIGGER IF NOT EXISTS code_objects_key_inputs AFTER DELETE ON "
    "code_objects BEGIN DELETE FROM key_inputs WHERE key = old.key; END";

static int prepare_one(tj__cache *c, size_t i)
{
  sqlite3_stmt **st = (sqlite3_stmt **)((char *)c + stmts[i].offset);
  if (*st)
    return SQLITE_OK;
  return tj__sql_prepare(c->db, stmts[i].sql, 1, st);
}

int tj__rows_prepare(tj__cache *c)
{
  for (size_t i = 0; i < sizeof stmts / sizeof stmts[0]; i++) {
    int rc = stmts[i].lazy ? SQLITE_OK : prepare_one(c, i);
    if (rc != SQLITE_OK)
      return rc;
  }
  return SQLITE_OK;
}

int tj__rows_need(tj__cache *c, sqlite3_stmt **st)
{
  int rc = SQLITE_OK;
  pthread_mutex_lock(&c->lock);
  for (size_t i = 0; i < sizeof stmts / sizeof stmts[0]; i++)
    if ((char *)st == (char *)c + stmts[i].offset)
      rc = prepare_one(c, i);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

void tj__rows_finalize(tj__cache *c)
{
  sqlite3_finalize(c->get);
  sqlite3_finalize(c->put);
  sqlite3_finalize(c->drop);
  sqlite3_finalize(c->use);
  sqlite3_finalize(c->miss);
  sqlite3_finalize(c->idle);
  sqlite3_finalize(c->resources);
}

const char *tj__cache_drop_reason(int dropped)
{
  switch (dropped) {
  case TJ__DROP_HASH: return "failed its hash check";
  case TJ__DROP_IDENTITY: return "was stored for another kernel, arch, "
                                 "platform, compiler or options";
  case TJ__DROP_SIZE: return "is larger than TJ_CACHE_MAX_CODE_BYTES";
  default: return "was not dropped";
  }
}

int tj__rows_judge_code(const void *code, int64_t size, int64_t declared,
                        const char *hash, int read)
{
  char got[TJ__KEY_HEX];
  if (size > (int64_t)TJ_CACHE_MAX_CODE_BYTES ||
      declared > (int64_t)TJ_CACHE_MAX_CODE_BYTES)
    return TJ__DROP_SIZE;
  if (!hash || !hash[0] || size <= 0 || declared != size)
    return TJ__DROP_HASH;
  if (!read)
    return 0;
  if (!code)
    return TJ__DROP_HASH;
  tj__hash_hex(code, (size_t)size, got);
  return strcmp(got, hash) == 0 ? 0 : TJ__DROP_HASH;
}

static int column_is(sqlite3_stmt *st, int col, const char *want)
{
  const unsigned char *t = sqlite3_column_text(st, col);
  return t && want && strcmp((const char *)t, want) == 0;
}

/* Judge the row c->get stepped to, before its blob is read: what the
 * request was, and its sizes.  0, or a TJ__DROP_* reason.  *stored gets a
 * copy of the stored hash ("" for none), *n the blob's length. */
static int judge_row(sqlite3_stmt *st, const tj__cache_row *want,
                     char **stored, sqlite3_int64 *n)
{
  sqlite3_int64 declared = sqlite3_column_int64(st, 0);
  const unsigned char *h = sqlite3_column_text(st, 2);
  /* A code that is no blob is read as none (take_code: failed hash). */
  *n = sqlite3_column_int64(st, 1);
  *stored = strdup(h ? (const char *)h : "");
  /* A module's row names the entries of whichever request stored it, and
   * C names are not part of its key (they change no code): its kernel
   * column is not compared (want->kernel NULL); its entries are checked
   * against the code's symbols instead (user.c). */
  if ((want->kernel && !column_is(st, 3, want->kernel)) ||
      !column_is(st, 4, want->arch) ||
      !column_is(st, 5, want->platform) || !column_is(st, 6, want->compiler) ||
      !column_is(st, 7, want->options))
    return TJ__DROP_IDENTITY;
  return tj__rows_judge_code(NULL, *n, declared, *stored, 0);
}

/* The code of the row c->get stepped to and judge_row passed, checked
 * against its hash and copied.  TJ_OK, TJ_ENOENT with *dropped set, or
 * TJ_ENOMEM. */
static int take_code(sqlite3_stmt *st, const char *stored, sqlite3_int64 n,
                     void **code, size_t *size, int *dropped)
{
  const void *blob = sqlite3_column_blob(st, 10);
  *dropped = tj__rows_judge_code(blob, sqlite3_column_bytes(st, 10), n,
                                 stored, 1);
  if (*dropped)
    return TJ_ENOENT;
  if (!(*code = malloc((size_t)n)))
    return TJ_ENOMEM;
  memcpy(*code, blob, (size_t)n);
  *size = (size_t)n;
  return TJ_OK;
}

/* Whether SQLite finds the file's structure whole.  A row that fails its
 * hash is most often damage in that row alone, but it can also be a page
 * two structures share, which SQLite does not notice on writing: the row
 * would be recompiled, stored over the same page and fail again, forever.
 * So a failed hash pays for one quick_check; rare, and O(file). */
static int file_is_whole(tj__cache *c)
{
  char first[64];
  int rc = tj__sql_text(c->db, "PRAGMA quick_check(1)", first, sizeof first);
  if (rc == SQLITE_OK)
    return strcmp(first, "ok") == 0;
  /* Unknown is whole: moving a good file aside costs every row. */
  return rc == SQLITE_DONE || rc == SQLITE_NOMEM || tj__sql_is_busy(rc);
}

int tj__rows_drop(tj__cache *c, const char *key, const char *hash)
{
  int need = tj__rows_need(c, &c->drop);
  if (need != SQLITE_OK)
    return need;
  sqlite3_bind_text(c->drop, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_text(c->drop, 2, hash ? hash : "", -1, SQLITE_STATIC);
  int rc = tj__sql_step(c->drop);
  tj__sql_reset(c->drop);
  if (rc == SQLITE_DONE)
    tj__codestore_drop(c->store, key);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int row_exists(void *ctx, const char *key)
{
  sqlite3_stmt *st = ctx;
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  int rc = tj__sql_step(st);
  tj__sql_reset(st);
  return rc != SQLITE_DONE; /* kept unless surely gone */
}

void tj__rows_sweep_code(tj__cache *c)
{
  sqlite3_stmt *st = NULL;
  if (!c->store || tj__sql_prepare(c->db, "SELECT 1 FROM code_objects WHERE "
                                   "key = ?1", 0, &st) != SQLITE_OK)
    return;
  tj__codestore_sweep(c->store, row_exists, st);
  sqlite3_finalize(st);
}

/* Delete only the row we judged.  A row that cannot be deleted would be
 * judged and recompiled forever (its key blocks the good row's INSERT OR
 * IGNORE), so a failure here gives the file up like a failed store:
 * TJ_ECACHE, else TJ_ENOENT. */
static int drop_judged(tj__cache *c, const char *key, const char *stored)
{
  if (tj__cache_readonly(c))
    return TJ_ENOENT;
  int rc = tj__rows_drop(c, key, stored);
  if (rc == SQLITE_OK || tj__sql_is_busy(rc))
    return TJ_ENOENT;
  return tj__cache_failed(c, rc, 0);
}

int tj__cache_get(tj__cache *c, const tj__cache_row *want, void **code,
                  size_t *size, int *dropped)
{
  return tj__cache_get_entries(c, want, code, size, dropped, NULL);
}

/* The row's kernel and entries columns, malloc'd, and its compile time. */
static int copy_columns(sqlite3_stmt *st, tj__found *f)
{
  const unsigned char *k = sqlite3_column_text(st, 3);
  const unsigned char *e = sqlite3_column_text(st, 8);
  f->kernel = strdup(k ? (const char *)k : "");
  f->entries = strdup(e ? (const char *)e : "");
  f->compile_ms = sqlite3_column_double(st, 9);
  return f->kernel && f->entries ? TJ_OK : TJ_ENOMEM;
}

/* Step c->get for want: TJ_OK with the row judged (*dropped) and, when it
 * passed, *stored and f's columns and code set; TJ_ENOENT, TJ_ENOMEM, or
 * TJ_ECACHE. */
static int find_row(tj__cache *c, const tj__cache_row *want, char **stored,
                    tj__found *f, int *dropped)
{
  int rc = TJ_ENOENT;
  sqlite3_int64 n = 0;
  sqlite3_bind_text(c->get, 1, want->key, -1, SQLITE_STATIC);
  sqlite3_bind_int64(c->get, 2, (sqlite3_int64)TJ_CACHE_MAX_CODE_BYTES);
  int step = tj__sql_step(c->get);
  if (step == SQLITE_ROW) {
    rc = TJ_OK;
    *dropped = judge_row(c->get, want, stored, &n);
    if (!*stored)
      rc = TJ_ENOMEM;
    else if (!*dropped)
      rc = copy_columns(c->get, f);
    if (rc == TJ_OK && !*dropped)
      rc = take_code(c->get, *stored, n, &f->code, &f->size, dropped);
    if (rc == TJ_ENOENT && *dropped)
      rc = TJ_OK; /* judged: the caller drops it */
  }
  tj__sql_reset(c->get);
  if (step != SQLITE_ROW && step != SQLITE_DONE && !tj__sql_is_busy(step))
    rc = tj__cache_failed(c, step, 1);
  return rc;
}

int tj__cache_find(tj__cache *c, const tj__cache_row *want, tj__found *f,
                   int *dropped)
{
  char *stored = NULL;
  memset(f, 0, sizeof *f);
  *dropped = 0;
  pthread_mutex_lock(&c->lock);
  if (c->broken) {
    pthread_mutex_unlock(&c->lock);
    return TJ_ENOENT;
  }
  int rc = find_row(c, want, &stored, f, dropped);
  if (*dropped && rc != TJ_ECACHE && rc != TJ_ENOMEM)
    rc = *dropped != TJ__DROP_HASH || file_is_whole(c)
             ? drop_judged(c, want->key, stored)
             : tj__cache_failed(c, SQLITE_CORRUPT, 1);
  pthread_mutex_unlock(&c->lock);
  if (rc == TJ_OK)
    snprintf(f->code_hash, sizeof f->code_hash, "%s", stored);
  /* A row without its code file (stored before there were any, or its
   * file removed): the next warm start reads the file. */
  if (rc == TJ_OK && c->store && !tj__cache_readonly(c)) {
    tj__cache_row row = {want->key, f->kernel, want->arch, want->platform,
                         want->compiler, want->options, f->code, f->size,
                         f->compile_ms, f->entries, want->inputs};
    tj__codestore_put(c->store, &row);
  }
  free(stored);
  if (rc != TJ_OK)
    tj__found_free(f);
  return rc;
}

int tj__cache_get_entries(tj__cache *c, const tj__cache_row *want,
                          void **code, size_t *size, int *dropped,
                          char **entries)
{
  tj__found f;
  int rc = tj__cache_find(c, want, &f, dropped);
  if (rc != TJ_OK)
    return rc;
  *code = f.code;
  *size = f.size;
  if (entries)
    *entries = f.entries;
  else
    free(f.entries);
  free(f.kernel);
  return TJ_OK;
}

static void bind_row(sqlite3_stmt *st, const tj__cache_row *r,
                     const char *hash)
{
  sqlite3_bind_text(st, 1, r->key, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, r->kernel, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, r->arch, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, r->platform, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 5, r->compiler, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 6, r->options, -1, SQLITE_STATIC);
  sqlite3_bind_blob64(st, 7, r->code, r->code_size, SQLITE_STATIC);
  sqlite3_bind_text(st, 8, hash, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 9, (sqlite3_int64)r->code_size);
  sqlite3_bind_double(st, 10, r->compile_ms);
  sqlite3_bind_int64(st, 11, (sqlite3_int64)time(NULL));
  sqlite3_bind_text(st, 12, r->entries ? r->entries : "", -1, SQLITE_STATIC);
}

/* A new row's inputs record, in the caller's write transaction; the
 * table is made on the connection's first record.  Not a statement kept
 * for the connection: a store is a compile's, and rare. */
static int insert_inputs(tj__cache *c, const char *key, const char *inputs)
{
  sqlite3_stmt *st = NULL;
  int rc = c->inputs_table ? SQLITE_OK
                           : tj__sql_exec(c->db, tj__inputs_table_sql);
  if (rc == SQLITE_OK)
    rc = tj__sql_prepare(c->db, "INSERT OR REPLACE INTO key_inputs (key, "
                         "inputs) VALUES (?1, ?2)", 0, &st);
  if (rc == SQLITE_OK) {
    c->inputs_table = 1;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, inputs, -1, SQLITE_STATIC);
    rc = tj__sql_step(st);
    rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
  }
  sqlite3_finalize(st);
  return rc;
}

/* The row and, when it is new, its entries' resources: a row another
 * process stored first keeps the resources stored with it. */
static int insert_row(tj__cache *c, const tj__cache_row *r, const char *hash,
                      const char *origin, int *inserted)
{
  *inserted = 0;
  int rc = tj__rows_need(c, &c->put);
  if (rc == SQLITE_OK)
    rc = tj__rows_need(c, &c->resources);
  if (rc != SQLITE_OK)
    return rc;
  if (!c->put) /* an older file, read as it is: nothing is stored */
    return SQLITE_READONLY;
  bind_row(c->put, r, hash);
  sqlite3_bind_text(c->put, 13, origin, -1, SQLITE_STATIC);
  rc = tj__sql_step(c->put);
  tj__sql_reset(c->put);
  *inserted = rc == SQLITE_DONE && sqlite3_changes(c->db) > 0;
  if (rc != SQLITE_DONE)
    return rc;
  if (!*inserted)
    return SQLITE_OK;
  rc = tj__resources_put(c->resources, r->key, r->kernel, r->entries,
                         r->code, r->code_size);
  if (rc == SQLITE_OK && r->inputs)
    rc = insert_inputs(c, r->key, r->inputs);
  return rc;
}

int tj__rows_insert(tj__cache *c, const tj__cache_row *r, const char *origin,
                    int *inserted)
{
  char hash[TJ__KEY_HEX];
  *inserted = 0;
  tj__hash_hex(r->code, r->code_size, hash);
  return insert_row(c, r, hash, origin, inserted);
}

int tj__cache_put(tj__cache *c, const tj__cache_row *r)
{
  return tj__cache_put_origin(c, r, TJ__ORIGIN_COMPILED);
}

static int put_row(tj__cache *c, const tj__cache_row *r, const char *origin,
                   int *inserted)
{
  *inserted = 0;
  if (c->readonly || r->code_size > TJ_CACHE_MAX_CODE_BYTES)
    return TJ_OK; /* one that large would never be loaded */
  char hash[TJ__KEY_HEX];
  tj__hash_hex(r->code, r->code_size, hash);
  pthread_mutex_lock(&c->lock);
  if (c->nowrite || c->broken) { /* said once already */
    pthread_mutex_unlock(&c->lock);
    return TJ_OK;
  }
  int rc = tj__sql_begin(c->db, 1);
  if (rc == SQLITE_OK)
    rc = insert_row(c, r, hash, origin, inserted);
  int out = tj__cache_end_write(c, rc);
  if (out != TJ_OK || rc != SQLITE_OK)
    *inserted = 0; /* rolled back */
  else /* after the commit: a file never stands for a row not there */
    tj__codestore_put(c->store, r);
  pthread_mutex_unlock(&c->lock);
  return out;
}

int tj__cache_put_origin(tj__cache *c, const tj__cache_row *r,
                         const char *origin)
{
  int inserted;
  return put_row(c, r, origin, &inserted);
}

int tj__cache_put_new(tj__cache *c, const tj__cache_row *r, int *inserted)
{
  return put_row(c, r, TJ__ORIGIN_COMPILED, inserted);
}

static int record_rows(tj__cache *c, const char *const *keys,
                       const uint64_t *hits, const int64_t *when, size_t n,
                       uint64_t misses)
{
  int ok = (n == 0 || tj__rows_need(c, &c->use) == SQLITE_OK) &&
           (misses == 0 || tj__rows_need(c, &c->miss) == SQLITE_OK);
  for (size_t i = 0; i < n && ok; i++) {
    sqlite3_bind_text(c->use, 1, keys[i], -1, SQLITE_STATIC);
    sqlite3_bind_int64(c->use, 2, (sqlite3_int64)hits[i]);
    sqlite3_bind_int64(c->use, 3, when ? when[i] : (sqlite3_int64)time(NULL));
    ok = tj__sql_step(c->use) == SQLITE_DONE;
    tj__sql_reset(c->use);
  }
  if (ok && misses) {
    sqlite3_bind_int64(c->miss, 1, (sqlite3_int64)misses);
    ok = tj__sql_step(c->miss) == SQLITE_DONE;
    tj__sql_reset(c->miss);
  }
  return ok;
}

int tj__cache_record_usage(tj__cache *c, const char *const *keys,
                           const uint64_t *hits, size_t n, uint64_t misses)
{
  if (tj__cache_readonly(c) || (n == 0 && misses == 0))
    return TJ_OK;
  pthread_mutex_lock(&c->lock);
  c->recording_usage = 1; /* a commit the close need not fold in (open.c) */
  int ok = tj__sql_begin(c->db, 1) == SQLITE_OK &&
           record_rows(c, keys, hits, NULL, n, misses) &&
           tj__sql_commit(c->db) == SQLITE_OK;
  c->recording_usage = 0;
  if (!ok)
    tj__cache_note_error(c, 0);
  tj__sql_rollback(c->db);
  pthread_mutex_unlock(&c->lock);
  return ok ? TJ_OK : TJ_ECACHE;
}

void tj__rows_fold_hits(tj__cache *c)
{
  char (*keys)[TJ__KEY_HEX] = NULL;
  uint64_t *hits = NULL;
  int64_t *when = NULL;
  size_t n = 0;
  if (!c->store || tj__cache_readonly(c) ||
      tj__codestore_take_hits(c->store, &keys, &hits, &when, &n) != TJ_OK ||
      n == 0)
    return;
  const char **names = malloc(n * sizeof *names);
  for (size_t i = 0; names && i < n; i++)
    names[i] = keys[i];
  pthread_mutex_lock(&c->lock);
  c->recording_usage = 1;
  if (names && tj__sql_begin(c->db, 1) == SQLITE_OK &&
      record_rows(c, names, hits, when, n, 0))
    tj__sql_commit(c->db);
  c->recording_usage = 0;
  tj__sql_rollback(c->db);
  pthread_mutex_unlock(&c->lock);
  free(names);
  free(keys);
  free(hits);
  free(when);
}
