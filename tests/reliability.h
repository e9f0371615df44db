/* reliability.h: what check_reliability.c needs besides Check: raw SQLite
 * looks at a cache file, fake code objects whose bytes their key names, and
 * files to write.  Assertion-free, so that forked children can use it. */
#ifndef TJ_RELIABILITY_H
#define TJ_RELIABILITY_H

#include "internal.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A small fast PRNG (xorshift64*): seeded, so that a failure can be
 * replayed from the seed the test prints. */
static inline uint64_t rel_rand(uint64_t *s)
{
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

/* The key of fake row number id. */
static inline void rel_fake_key(uint64_t id, char key[TJ__KEY_HEX])
{
  tj__hash_hex(&id, sizeof id, key);
}

/* The fake code object that key names: 1 to 24000 bytes, all drawn from
 * the key, so that a reader can tell a whole row from a torn one.
 * malloc'd. */
static inline unsigned char *rel_fake_blob(const char *key, size_t *n)
{
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (const char *p = key; *p; p++)
    s = (s ^ (unsigned char)*p) * 1099511628211ull;
  s |= 1;
  *n = 1 + (size_t)(rel_rand(&s) % 24000);
  unsigned char *b = malloc(*n);
  for (size_t i = 0; b && i < *n; i++)
    b[i] = (unsigned char)rel_rand(&s);
  return b;
}

/* PRAGMA integrity_check's first line into out ("ok" when whole). */
static inline int rel_integrity(const char *path, char *out, size_t len)
{
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  snprintf(out, len, "(no answer)");
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

/*
 * Every row of a cache the fake writer filled is whole: its blob is the
 * one its key names, its stored hash and size match.  The number of rows,
 * or -1 with the first bad key in why.
 */
static inline long rel_check_fake_rows(const char *path, char *why, size_t len)
{
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  long rows = 0;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db, "SELECT key, code, code_hash, code_size FROM "
                         "code_objects", -1, &st, NULL) != SQLITE_OK) {
    snprintf(why, len, "cannot read: %s", sqlite3_errmsg(db));
    sqlite3_close(db);
    return -1;
  }
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW && rows >= 0) {
    const char *key = (const char *)sqlite3_column_text(st, 0);
    const void *code = sqlite3_column_blob(st, 1);
    size_t n = (size_t)sqlite3_column_bytes(st, 1), want_n = 0;
    const char *hash = (const char *)sqlite3_column_text(st, 2);
    char got[TJ__KEY_HEX];
    tj__hash_hex(code, n, got);
    unsigned char *want = rel_fake_blob(key ? key : "", &want_n);
    if (!key || !hash || strcmp(got, hash) != 0 || want_n != n ||
        (sqlite3_int64)n != sqlite3_column_int64(st, 3) ||
        memcmp(want, code, n) != 0) {
      snprintf(why, len, "row %s is not whole", key ? key : "(null)");
      rows = -1;
    } else {
      rows++;
    }
    free(want);
  }
  if (rc != SQLITE_DONE && rows >= 0) {
    snprintf(why, len, "reading rows: %s", sqlite3_errmsg(db));
    rows = -1;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rows;
}

/* Replace path's bytes, and drop its WAL and shared memory so that SQLite
 * reads the file alone. */
static inline int rel_write_file(const char *path, const void *data, size_t n)
{
  char side[4096];
  snprintf(side, sizeof side, "%s-wal", path);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", path);
  unlink(side);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0)
    return -1;
  ssize_t w = n ? write(fd, data, n) : 0;
  close(fd);
  return w == (ssize_t)n ? 0 : -1;
}

/* The whole file, malloc'd. */
static inline unsigned char *rel_read_file(const char *path, size_t *n)
{
  struct stat st;
  int fd = open(path, O_RDONLY);
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0)
      close(fd);
    return NULL;
  }
  unsigned char *b = malloc((size_t)st.st_size + 1);
  ssize_t r = b ? read(fd, b, (size_t)st.st_size) : -1;
  close(fd);
  if (r != st.st_size) {
    free(b);
    return NULL;
  }
  *n = (size_t)st.st_size;
  return b;
}

#endif
