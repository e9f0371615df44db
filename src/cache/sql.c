/*
 * sql.c: the one way the library prepares, runs and retries a statement.
 *
 * Any number of processes share one cache file, and SQLite's busy handler
 * is not called in every case where another of them holds a lock (a WAL
 * switch, a read transaction upgrading to write, recovery of the WAL
 * index).  A racing process must never see "database is locked", so every
 * statement is stepped here and waited on for up to BUSY_RETRY_LIMIT_MS.
 * tests/one_sql_path.sh keeps sqlite3_prepare, sqlite3_step and
 * sqlite3_exec in this file alone.
 */
#include "cache_internal.h"

#include <stdio.h>
#include <time.h>

#define BUSY_RETRY_LIMIT_MS 60000
#define RETRY_STEP_MS 10

int tj__sql_is_busy(int rc)
{
  rc &= 0xff;
  return rc == SQLITE_BUSY || rc == SQLITE_LOCKED || rc == SQLITE_PROTOCOL;
}

void tj__sql_sleep_ms(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int tj__sql_prepare(sqlite3 *db, const char *sql, int persistent,
                    sqlite3_stmt **st)
{
  *st = NULL;
  return sqlite3_prepare_v3(db, sql, -1,
                            persistent ? SQLITE_PREPARE_PERSISTENT : 0, st,
                            NULL);
}

int tj__sql_step(sqlite3_stmt *st)
{
  /* A statement that has returned rows is mid-scan: a reset would start
   * it again from its first row, so its busy is the caller's failure. */
  int started = sqlite3_stmt_busy(st);
  int rc;
  for (long waited = 0;; waited += RETRY_STEP_MS) {
    rc = sqlite3_step(st);
    if (started || !tj__sql_is_busy(rc) || waited >= BUSY_RETRY_LIMIT_MS)
      return rc;
    sqlite3_reset(st);
    tj__sql_sleep_ms(RETRY_STEP_MS);
  }
}

void tj__sql_reset(sqlite3_stmt *st)
{
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
}

int tj__sql_exec(sqlite3 *db, const char *sql)
{
  int rc;
  for (long waited = 0;; waited += RETRY_STEP_MS) {
    rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    if (!tj__sql_is_busy(rc) || waited >= BUSY_RETRY_LIMIT_MS)
      return rc;
    tj__sql_sleep_ms(RETRY_STEP_MS);
  }
}

int tj__sql_try(sqlite3 *db, const char *sql)
{
  return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

int tj__sql_begin(sqlite3 *db, int write)
{
  return tj__sql_exec(db, write ? "BEGIN IMMEDIATE" : "BEGIN");
}

int tj__sql_commit(sqlite3 *db)
{
  return tj__sql_exec(db, "COMMIT");
}

/* Nothing to wait for: a rollback takes no lock it does not hold.  Safe
 * after a failed COMMIT or with no transaction open. */
void tj__sql_rollback(sqlite3 *db)
{
  if (!sqlite3_get_autocommit(db))
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
}

/* Prepare sql and step it to its first row; SQLITE_ROW with *st set, or
 * the failure with *st finalized. */
static int first_row(sqlite3 *db, const char *sql, sqlite3_stmt **st)
{
  int rc = tj__sql_prepare(db, sql, 0, st);
  if (rc == SQLITE_OK)
    rc = tj__sql_step(*st);
  if (rc != SQLITE_ROW) {
    sqlite3_finalize(*st);
    *st = NULL;
  }
  return rc;
}

int tj__sql_int64(sqlite3 *db, const char *sql, int64_t *out)
{
  sqlite3_stmt *st;
  int rc = first_row(db, sql, &st);
  if (rc != SQLITE_ROW)
    return rc;
  *out = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return SQLITE_OK;
}

int tj__sql_text(sqlite3 *db, const char *sql, char *out, size_t len)
{
  sqlite3_stmt *st;
  int rc = first_row(db, sql, &st);
  if (rc != SQLITE_ROW)
    return rc;
  const unsigned char *t = sqlite3_column_text(st, 0);
  snprintf(out, len, "%s", t ? (const char *)t : "");
  sqlite3_finalize(st);
  return SQLITE_OK;
}
