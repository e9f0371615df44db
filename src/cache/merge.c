/*
 * merge.c: copying the rows of one cache file into another
 * (tj_cache_merge, tokitai-jit --merge), which is how a package or a
 * cluster image builds its system cache from several files.
 *
 * The source is opened as a system cache is (open.c): immutable, and only
 * when nobody but root or the caller could have written it; through its
 * -wal when one beside it holds anything, since a writer's last rows may
 * be there and not yet in the file.  Each row is
 * judged before it is copied: the key and hashes as 32 hex digits, the
 * columns as text, the code against its stored XXH3-128 and size (and
 * TJ_CACHE_MAX_CODE_BYTES), an embedded kernel's row against the key its
 * own columns give.  A row that fails is counted bad and never copied.
 * The target takes the rows in batches, one write transaction each, with
 * INSERT OR IGNORE: a row it has already is skipped, so a merge run twice
 * copies nothing the second time, and processes using the target
 * meanwhile wait at most one batch.
 */
#include "cache_internal.h"
#include "codestore.h"

#include <stdlib.h>
#include <string.h>

#define BATCH_ROWS 64
#define BATCH_BYTES (64u << 20)

#define MERGE_COLUMNS                                                        \
  "SELECT key, kernel, arch, platform, compiler, options, code_hash, "      \
  "code_size, compile_ms, entries, CASE typeof(code) WHEN 'blob' THEN "     \
  "length(code) ELSE -1 END, CASE WHEN typeof(code) = 'blob' AND "          \
  "length(code) <= 268435456 THEN code END FROM code_objects ORDER BY key"

_Static_assert(TJ_CACHE_MAX_CODE_BYTES == 268435456ull,
               "MERGE_COLUMNS reads no blob larger than TJ_CACHE_MAX_CODE_BYTES");

int tj__cache_key_consistent(const tj__cache_knowledge *know,
                             const char *key, const char *kernel,
                             const char *options, const char *arch,
                             const char *platform, const char *compiler)
{
  return !know || !know->key_consistent ||
         know->key_consistent(key, kernel, options, arch, platform, compiler);
}

/* One row read from the source, owned. */
typedef struct merge_row {
  char *text[8]; /* key, kernel, arch, platform, compiler, options,
                    code_hash, entries */
  void *code;
  size_t size;
  double compile_ms;
} merge_row;

static void row_free(merge_row *r)
{
  for (int i = 0; i < 8; i++)
    free(r->text[i]);
  free(r->code);
  memset(r, 0, sizeof *r);
}

static int is_hex32(const char *s)
{
  if (!s || strlen(s) != 32)
    return 0;
  for (; *s; s++)
    if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
      return 0;
  return 1;
}

/* Whether text holds a control character: a listing would send it to a
 * terminal.  The entries column may hold its TABs and newlines. */
static int has_controls(const unsigned char *s, int n, int entries)
{
  for (int i = 0; i < n; i++)
    if ((s[i] < 0x20 && !(entries && (s[i] == '\t' || s[i] == '\n'))) ||
        s[i] == 0x7f)
      return 1;
  return 0;
}

/* Whether the row st is at may be copied: every column of the right type,
 * the code whole.  The bounds are the source's (SQLite checked none). */
static int row_is_sound(sqlite3_stmt *st, const tj__cache_knowledge *know)
{
  static const int text_cols[] = {0, 1, 2, 3, 4, 5, 6, 9};
  for (size_t i = 0; i < sizeof text_cols / sizeof text_cols[0]; i++)
    if (sqlite3_column_type(st, text_cols[i]) != SQLITE_TEXT ||
        has_controls(sqlite3_column_text(st, text_cols[i]),
                     sqlite3_column_bytes(st, text_cols[i]),
                     text_cols[i] == 9))
      return 0;
  const char *key = (const char *)sqlite3_column_text(st, 0);
  const char *hash = (const char *)sqlite3_column_text(st, 6);
  for (int col = 1; col <= 4; col++)
    if (!sqlite3_column_bytes(st, col))
      return 0;
  if (!is_hex32(key) || !is_hex32(hash) ||
      sqlite3_column_double(st, 8) < 0)
    return 0;
  int64_t declared = sqlite3_column_int64(st, 7);
  int64_t n = sqlite3_column_int64(st, 10);
  if (tj__rows_judge_code(NULL, n, declared, hash, 0) ||
      tj__rows_judge_code(sqlite3_column_blob(st, 11),
                          sqlite3_column_bytes(st, 11), declared, hash, 1))
    return 0;
  return tj__cache_key_consistent(know, key,
                                  (const char *)sqlite3_column_text(st, 1),
                                  (const char *)sqlite3_column_text(st, 5),
                                  (const char *)sqlite3_column_text(st, 2),
                                  (const char *)sqlite3_column_text(st, 3),
                                  (const char *)sqlite3_column_text(st, 4));
}

static int row_copy(sqlite3_stmt *st, merge_row *r)
{
  static const int cols[8] = {0, 1, 2, 3, 4, 5, 6, 9};
  int ok = 1;
  memset(r, 0, sizeof *r);
  for (int i = 0; i < 8; i++)
    ok &= (r->text[i] = strdup((const char *)sqlite3_column_text(st, cols[i])))
          != NULL;
  r->size = (size_t)sqlite3_column_bytes(st, 11);
  r->compile_ms = sqlite3_column_double(st, 8);
  if (ok && (r->code = malloc(r->size)))
    memcpy(r->code, sqlite3_column_blob(st, 11), r->size);
  if (!ok || !r->code) {
    row_free(r);
    return TJ_ENOMEM;
  }
  return TJ_OK;
}

static tj__cache_row batch_row(const merge_row *m)
{
  tj__cache_row r = {m->text[0], m->text[1], m->text[2], m->text[3],
                     m->text[4], m->text[5], m->code, m->size,
                     m->compile_ms, m->text[7], NULL};
  return r;
}

/* Insert the batch in one write transaction, through sql.c's retry path. */
static int write_batch(tj__cache *t, merge_row *rows, int nrows,
                       tj__merge_counts *n)
{
  uint64_t copied = 0;
  unsigned char inserted[BATCH_ROWS] = {0};
  pthread_mutex_lock(&t->lock);
  int rc = tj__sql_begin(t->db, 1);
  for (int i = 0; rc == SQLITE_OK && i < nrows; i++) {
    tj__cache_row r = batch_row(&rows[i]);
    int ins = 0;
    rc = tj__rows_insert(t, &r, TJ__ORIGIN_MERGED, &ins);
    inserted[i] = ins != 0;
    copied += inserted[i];
  }
  if (rc == SQLITE_OK)
    rc = tj__sql_commit(t->db);
  if (rc != SQLITE_OK)
    tj__cache_note_error(t, 0);
  tj__sql_rollback(t->db);
  /* After the commit, as every write does: the rows' code files, so that
   * the first warm start after a merge reads them as it reads the rest
   * (a file never stands for a row that is not there). */
  for (int i = 0; rc == SQLITE_OK && i < nrows; i++)
    if (inserted[i]) {
      tj__cache_row r = batch_row(&rows[i]);
      tj__codestore_put(t->store, &r);
    }
  pthread_mutex_unlock(&t->lock);
  if (rc != SQLITE_OK)
    return TJ_ECACHE;
  n->copied += copied;
  n->skipped += (uint64_t)nrows - copied;
  return TJ_OK;
}

static void free_batch(merge_row *rows, int *nrows, size_t *bytes)
{
  for (int i = 0; i < *nrows; i++)
    row_free(&rows[i]);
  *nrows = 0;
  *bytes = 0;
}

int tj__cache_merge_rows(tj__cache *target, tj__cache *source,
                         const tj__cache_knowledge *know,
                         tj__merge_counts *n, int *failed_source)
{
  merge_row rows[BATCH_ROWS];
  int nrows = 0, out = TJ_OK;
  size_t bytes = 0;
  sqlite3_stmt *st;
  memset(n, 0, sizeof *n);
  *failed_source = 0;
  pthread_mutex_lock(&source->lock);
  int rc = tj__sql_prepare(source->db, MERGE_COLUMNS, 0, &st);
  while (out == TJ_OK && rc == SQLITE_OK &&
         (rc = tj__sql_step(st)) == SQLITE_ROW) {
    rc = SQLITE_OK;
    if (!row_is_sound(st, know)) {
      n->bad++;
      continue;
    }
    if ((out = row_copy(st, &rows[nrows])) != TJ_OK)
      break;
    bytes += rows[nrows++].size;
    if (nrows == BATCH_ROWS || bytes >= BATCH_BYTES) {
      out = write_batch(target, rows, nrows, n);
      free_batch(rows, &nrows, &bytes);
    }
  }
  if (out == TJ_OK && rc != SQLITE_DONE) {
    out = tj__cache_note_error(source, TJ_ECACHE);
    *failed_source = 1;
  }
  sqlite3_finalize(st);
  pthread_mutex_unlock(&source->lock);
  if (out == TJ_OK && nrows)
    out = write_batch(target, rows, nrows, n);
  free_batch(rows, &nrows, &bytes);
  /* The rows in the main file, so that an immutable reader (a system
   * cache made from this target) sees them all.  Best effort. */
  if (out == TJ_OK) {
    pthread_mutex_lock(&target->lock);
    tj__sql_try(target->db, "PRAGMA wal_checkpoint(TRUNCATE)");
    pthread_mutex_unlock(&target->lock);
  }
  return out;
}
