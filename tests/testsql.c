/* testsql.c: see testsql.h. */
#include "config.h"

#include "testsql.h"
#include "testutil.h"
#include "internal.h" /* tj__hash_hex: the hash the cache stores */

#include <dirent.h>
#include <sqlite3.h>
#include <tokitai-jit/cache.h>

/* sql prepared on path opened read-only, or NULL (said on stderr). */
static sqlite3_stmt *prepare_readonly(const char *path, const char *sql)
{
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK)
    return st;
  fprintf(stderr, "tsql: %s: %s: %s\n", path, sql,
          db ? sqlite3_errmsg(db) : "out of memory");
  sqlite3_close(db);
  return NULL;
}

/* Finalize st and close the connection it came from. */
static void done(sqlite3_stmt *st)
{
  sqlite3 *db = st ? sqlite3_db_handle(st) : NULL;
  sqlite3_finalize(st);
  sqlite3_close(db);
}

long long tsql_int(const char *path, const char *sql)
{
  sqlite3_stmt *st = prepare_readonly(path, sql);
  long long v = -1;
  if (st && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  done(st);
  return v;
}

int tsql_text(const char *path, const char *sql, char *out, size_t len)
{
  sqlite3_stmt *st = prepare_readonly(path, sql);
  int rc = -1;
  out[0] = '\0';
  if (st && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
    snprintf(out, len, "%s", (const char *)sqlite3_column_text(st, 0));
    rc = 0;
  }
  done(st);
  return rc;
}

void tsql_exec(const char *path, const char *sql)
{
  sqlite3 *db = NULL;
  ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
  ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK, "%s: %s",
                sql, sqlite3_errmsg(db));
  sqlite3_close(db);
  tsql_remove_code(path);
}

void tsql_remove_code(const char *path)
{
  char dir[4096], file[4400];
  snprintf(dir, sizeof dir, "%s.code", path);
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
      unlink(file);
  }
  if (d)
    closedir(d);
  rmdir(dir);
}

void tsql_fold_hits(const char *path)
{
  tj_cache *c = NULL;
  ck_assert_msg(tj_cache_open(&c, path, 0) == TJ_OK, "%s: %s", path,
                tj_cache_errmsg(c));
  tj_cache_close(c);
}

long long tsql_bad_rows(const char *path)
{
  sqlite3_stmt *st = prepare_readonly(path, "SELECT code, code_hash, "
                                      "code_size FROM code_objects");
  long long bad = st ? 0 : -1;
  while (st && sqlite3_step(st) == SQLITE_ROW) {
    char h[TJ__KEY_HEX];
    int n = sqlite3_column_bytes(st, 0);
    tj__hash_hex(sqlite3_column_blob(st, 0), (size_t)n, h);
    const char *stored = (const char *)sqlite3_column_text(st, 1);
    bad += !stored || strcmp(h, stored) != 0 ||
           sqlite3_column_int64(st, 2) != n;
  }
  done(st);
  return bad;
}

int tsql_integrity(const char *path, char *out, size_t len)
{
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL);
  if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    snprintf(out, len, "%s", (const char *)sqlite3_column_text(st, 0));
  else
    snprintf(out, len, "error: %s", db ? sqlite3_errmsg(db) : "open failed");
  sqlite3_finalize(st);
  sqlite3_close(db);
  return strcmp(out, "ok") == 0;
}
