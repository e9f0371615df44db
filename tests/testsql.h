/*
 * testsql.h: raw SQLite looks at, and changes to, a cache file: what is on
 * disk, read beside the library rather than through it.  Each call opens
 * the file, does one thing and closes it.  Only tsql_exec asserts; the
 * others report failure in their result (and on stderr), so that a child
 * forked by a test may call them too.
 */
#ifndef TJ_TESTSQL_H
#define TJ_TESTSQL_H

#include <stddef.h>

/* The first column of the first row of sql, on path opened read-only; -1
 * when the file, the statement or the row is not there. */
long long tsql_int(const char *path, const char *sql);

/* The same, as text into out; 0, or -1 (out empty) when there is none. */
int tsql_text(const char *path, const char *sql, char *out, size_t len);

/* Run sql (any number of statements) on path, creating the file if need
 * be; the test fails with SQLite's message if any statement does. */
void tsql_exec(const char *path, const char *sql);

/* Rows of code_objects whose blob fails its stored hash or size, or -1
 * when the table cannot be read. */
long long tsql_bad_rows(const char *path);

/* PRAGMA integrity_check's first line into out ("ok" when whole); 1 when
 * the file is whole. */
int tsql_integrity(const char *path, char *out, size_t len);

#endif
