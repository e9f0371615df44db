/*
 * schema.c: what a cache file is, and making a new one.
 *
 * A file is ours when it carries our application_id; only then is it
 * changed.  An empty database (a new file, or one a process killed before
 * its first commit left) gets the schema of cache/schema.sql.  Anything
 * else is another program's and is never changed, moved or deleted.
 * cache/README.md says what the version is and why each step is safe for
 * the other processes that have the file open.
 */
#include "cache_internal.h"

#include <stdio.h>
#include <string.h>

static void describe_tables(sqlite3 *db, int version, char *what, size_t len)
{
  char tables[256] = "";
  static const char sql[] = "SELECT group_concat(name, ', ') FROM "
                            "sqlite_master WHERE type = 'table'";
  if (tj__sql_text(db, sql, tables, sizeof tables) != SQLITE_OK || !tables[0])
    snprintf(tables, sizeof tables, "none");
  snprintf(what, len, "an SQLite database of another program (user_version "
           "%d, tables: %.200s)", version, tables);
}

static int pragma_int(sqlite3 *db, const char *sql, int *out)
{
  int64_t v = 0;
  int rc = tj__sql_int64(db, sql, &v);
  *out = (int)v;
  return rc;
}

/* Ours: the file carries TJ__CACHE_APP_ID.  Empty: no mark, no version
 * and no schema object at all (nothing in it to lose).  Anything else is
 * another program's, and what says what it is. */
static int identify(sqlite3 *db, enum tj__identity *id, int *version,
                    char *what, size_t len)
{
  int appid = 0, objects = 0;
  int rc = pragma_int(db, "PRAGMA application_id", &appid);
  if (rc == SQLITE_OK)
    rc = pragma_int(db, "PRAGMA user_version", version);
  if (rc == SQLITE_OK && (uint32_t)appid == TJ__CACHE_APP_ID) {
    *id = TJ__ID_OURS;
    return SQLITE_OK;
  }
  if (rc == SQLITE_OK)
    rc = pragma_int(db, "SELECT count(*) FROM sqlite_master", &objects);
  if (rc != SQLITE_OK)
    return rc;
  *id = TJ__ID_FOREIGN;
  if (appid == 0 && *version == 0 && objects == 0)
    *id = TJ__ID_EMPTY;
  else if (appid != 0)
    snprintf(what, len, "an SQLite database of another application "
             "(application_id 0x%08x)", (unsigned)appid);
  else
    describe_tables(db, *version, what, len);
  return SQLITE_OK;
}

/* identify() in one read transaction.  Its pragmas and its schema query
 * are separate statements: read one by one, a process creating the cache
 * meanwhile could commit between them, and the file would look half made
 * (tables but no version or mark) and be taken for another program's. */
int tj__schema_identify(sqlite3 *db, enum tj__identity *id, int *version,
                        char *what, size_t len)
{
  int rc = tj__sql_begin(db, 0);
  if (rc != SQLITE_OK)
    return rc;
  rc = identify(db, id, version, what, len);
  int end = rc == SQLITE_OK ? tj__sql_commit(db) : SQLITE_OK;
  tj__sql_rollback(db);
  return rc != SQLITE_OK ? rc : end;
}

/* The schema, its version and our mark, in the caller's transaction. */
static int create_schema(sqlite3 *db)
{
  char sql[96];
  int rc = tj__sql_exec(db, tj__schema_sql);
  snprintf(sql, sizeof sql, "PRAGMA user_version = %d; PRAGMA application_id "
           "= %d", CACHE_SCHEMA_VERSION, (int)TJ__CACHE_APP_ID);
  return rc == SQLITE_OK ? tj__sql_exec(db, sql) : rc;
}

/* In one write transaction, which asks again what the file is, so that
 * of racing processes one makes the schema and nothing but an empty file
 * is changed.  *version is the file's version after it. */
int tj__schema_create(sqlite3 *db, int *version, char *what, size_t len)
{
  enum tj__identity id;
  int rc = tj__sql_begin(db, 1);
  if (rc != SQLITE_OK)
    return rc;
  rc = identify(db, &id, version, what, len);
  if (rc == SQLITE_OK && id == TJ__ID_FOREIGN)
    rc = TJ__SCHEMA_FOREIGN;
  if (rc == SQLITE_OK && id == TJ__ID_EMPTY &&
      (rc = create_schema(db)) == SQLITE_OK)
    *version = CACHE_SCHEMA_VERSION;
  if (rc == SQLITE_OK)
    rc = tj__sql_commit(db);
  if (rc != SQLITE_OK)
    tj__sql_rollback(db);
  return rc;
}
