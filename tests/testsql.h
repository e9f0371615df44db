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
 * be; the test fails with SQLite's message if any statement does.  Then
 * the cache's code directory goes (tsql_remove_code): a change made beside
 * the library stands for damage or another program's hand, and the next
 * runtime is to read what the file now holds, not the copies of its rows
 * the library made before. */
void tsql_exec(const char *path, const char *sql);

/* Remove path's code directory, path.code (src/cache/codestore.h), and
 * what is in it: the next runtime reads the SQLite file. */
void tsql_remove_code(const char *path);

/* What the next process to open path for writing does first: fold the
 * hits that runtimes which read only code files noted at close into the
 * rows' hit counts. */
void tsql_fold_hits(const char *path);

/* Rows of code_objects whose blob fails its stored hash or size, or -1
 * when the table cannot be read. */
long long tsql_bad_rows(const char *path);

/* PRAGMA integrity_check's first line into out ("ok" when whole); 1 when
 * the file is whole. */
int tsql_integrity(const char *path, char *out, size_t len);

#endif
