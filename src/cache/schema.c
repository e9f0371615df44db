/*
 * schema.c: what a cache file is, and bringing one of ours to the current
 * schema.
 *
 * A file is changed only once it is shown to be ours: it carries our
 * application_id, or it is exactly a layout an earlier release made.
 * Anything else is another program's and is never migrated, moved or
 * deleted.  cache/README.md lists the versions and why each step is safe
 * for the other processes that have the file open.
 */
#include "cache_internal.h"

#include <stdio.h>
#include <string.h>

/* The schema objects and columns of the layouts we made before files
 * carried our application_id: "type name" lines, then "table.column"
 * lines, in the order the query below gives them. */
static const char v1_layout[] =
  "index code_objects_last_used;index sqlite_autoindex_code_objects_1;"
  "index sqlite_autoindex_counters_1;table code_objects;table counters;"
  "code_objects.key;code_objects.kernel;code_objects.arch;"
  "code_objects.platform;code_objects.compiler;code_objects.options;"
  "code_objects.code;code_objects.code_hash;code_objects.code_size;"
  "code_objects.compile_ms;code_objects.created;code_objects.last_used;"
  "code_objects.hits;counters.name;counters.value;";
#define PRERELEASE_TABLE                                                     \
  "table code_objects;code_objects.key;code_objects.kernel;"                 \
  "code_objects.arch;code_objects.code;code_objects.created;"
static const char *const prerelease_layouts[] = {
  "index code_objects_created;index sqlite_autoindex_code_objects_1;"
  PRERELEASE_TABLE,
  "index sqlite_autoindex_code_objects_1;" PRERELEASE_TABLE,
};

/* The file's objects and columns as one string like the layouts above. */
static int schema_layout(sqlite3 *db, char *out, size_t len)
{
  static const char sql[] =
    "SELECT type || ' ' || name FROM (SELECT type, name FROM sqlite_master "
    "ORDER BY type, name) UNION ALL SELECT * FROM (SELECT m.name || '.' || "
    "c.name FROM sqlite_master m, pragma_table_info(m.name) c WHERE m.type = "
    "'table' ORDER BY m.name, c.cid)";
  sqlite3_stmt *st;
  size_t used = 0;
  out[0] = '\0';
  int rc = tj__sql_prepare(db, sql, 0, &st);
  while (rc == SQLITE_OK && (rc = tj__sql_step(st)) == SQLITE_ROW) {
    const char *t = (const char *)sqlite3_column_text(st, 0);
    int n = snprintf(out + used, len - used, "%s;", t ? t : "");
    used += n > 0 && (size_t)n < len - used ? (size_t)n : 0;
    rc = SQLITE_OK;
  }
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

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

/*
 * Ours: the file carries TJ__CACHE_APP_ID.  Or it carries none and is one
 * of the files the library made before it set one: an empty database
 * (nothing to lose: a new file a killed process left), the 0.1.0 layout at
 * user_version 1, or the 0.0.x layout at version 0, each exactly, object
 * for object and column for column.
 */
static int identify(sqlite3 *db, enum tj__identity *id, int *version,
                    char *what, size_t len)
{
  int appid = 0;
  char layout[1024];
  int rc = pragma_int(db, "PRAGMA application_id", &appid);
  if (rc == SQLITE_OK)
    rc = pragma_int(db, "PRAGMA user_version", version);
  if (rc == SQLITE_OK && (uint32_t)appid == TJ__CACHE_APP_ID) {
    *id = TJ__ID_OURS;
    return SQLITE_OK;
  }
  if (rc == SQLITE_OK)
    rc = schema_layout(db, layout, sizeof layout);
  if (rc != SQLITE_OK)
    return rc;
  *id = TJ__ID_FOREIGN;
  if (appid == 0 && *version == 0 && !layout[0])
    *id = TJ__ID_EMPTY;
  else if (appid == 0 && *version == 1 && strcmp(layout, v1_layout) == 0)
    *id = TJ__ID_V1;
  else if (appid == 0 && *version == 0 &&
           (strcmp(layout, prerelease_layouts[0]) == 0 ||
            strcmp(layout, prerelease_layouts[1]) == 0))
    *id = TJ__ID_PRERELEASE;
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

/*
 * Each step takes a file of ours from one user_version to a later one; a
 * step with create set then runs cache/schema.sql, which makes the current
 * schema.  Every step marks the file with our application_id, and is safe
 * to run twice (IF EXISTS, IF NOT EXISTS, OR IGNORE), as a retried
 * statement may; then its fill, if any, computes what SQL cannot.  Version
 * 0 is an empty database or the pre-release (0.0.x) layout, whose rows
 * cannot be verified and were keyed by another encoding: dropped.  A
 * version with no step from it (a gap, a negative number) in a file that
 * is ours is a damaged one: it is moved aside and rebuilt.
 */
static const struct migration {
  int from, to;
  int create;
  const char *sql;
  int (*fill)(sqlite3 *db);
} migrations[] = {
  {0, CACHE_SCHEMA_VERSION, 1,
   "DROP TABLE IF EXISTS code_objects; DROP TABLE IF EXISTS counters;", NULL},
  /* 0.1.0 -> 2: the lowered names of a module's entries. */
  {1, 2, 0, "ALTER TABLE code_objects ADD COLUMN entries TEXT NOT NULL "
            "DEFAULT ''", NULL},
  /* 2 -> 3: kernel_resources (schema.sql creates it), filled from each
   * row's blob, which the resource reader understands whatever its age. */
  {2, 3, 1, "", tj__resources_fill},
  /* 3 -> 4: where each row came from (the cache layers), and the tuning
   * table (schema.sql creates it, IF NOT EXISTS: the other tables are there
   * already).  A column with a constant default: SQLite rewrites no row,
   * reads no blob.  Rows older than the column were compiled on this
   * machine (nothing else wrote a cache before 4). */
  {3, 4, 1, "ALTER TABLE code_objects ADD COLUMN origin TEXT NOT NULL "
            "DEFAULT 'compiled'", NULL},
};

static const struct migration *migration_from(int version)
{
  for (size_t i = 0; i < sizeof migrations / sizeof migrations[0]; i++)
    if (migrations[i].from == version)
      return &migrations[i];
  return NULL;
}

static int run_migration(sqlite3 *db, const struct migration *m)
{
  char sql[96];
  int rc = tj__sql_exec(db, m->sql);
  if (rc == SQLITE_OK && m->create)
    rc = tj__sql_exec(db, tj__schema_sql);
  if (rc == SQLITE_OK && m->fill)
    rc = m->fill(db);
  snprintf(sql, sizeof sql, "PRAGMA user_version = %d; PRAGMA application_id "
           "= %d", m->to, (int)TJ__CACHE_APP_ID);
  return rc == SQLITE_OK ? tj__sql_exec(db, sql) : rc;
}

/* In one write transaction, which asks again what the file is and reads
 * the version again, so that racing processes migrate it once and nothing
 * but our own file is changed.  *version is where it ended. */
int tj__schema_migrate(sqlite3 *db, int *version, int *gap, char *what,
                       size_t len)
{
  enum tj__identity id;
  int rc = tj__sql_begin(db, 1);
  if (rc != SQLITE_OK)
    return rc;
  rc = identify(db, &id, version, what, len);
  if (rc == SQLITE_OK && id == TJ__ID_FOREIGN)
    rc = TJ__MIGRATE_FOREIGN;
  while (rc == SQLITE_OK && *version < CACHE_SCHEMA_VERSION) {
    const struct migration *m = migration_from(*version);
    if (!m) {
      *gap = 1;
      rc = SQLITE_ERROR;
      break;
    }
    if ((rc = run_migration(db, m)) == SQLITE_OK)
      *version = m->to;
  }
  if (rc == SQLITE_OK)
    rc = tj__sql_commit(db);
  if (rc != SQLITE_OK)
    tj__sql_rollback(db);
  return rc;
}
