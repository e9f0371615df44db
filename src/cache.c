/*
 * cache.c: the SQLite store of code objects.
 *
 * One file shared by any number of processes: WAL journal, a busy timeout
 * plus a retry loop for the cases SQLite does not wait on, prepared
 * statements only, one transaction per insert, INSERT OR IGNORE so that
 * racing compilers all succeed and leave one row.  Every blob is checked
 * against its stored XXH3-128 on load.  A location other users can write is
 * refused: whoever writes the cache chooses the code that runs on our GPU.
 */
#include "internal.h"
#include "embedded.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CACHE_SCHEMA_VERSION 1
#define BUSY_TIMEOUT_MS 5000
#define BUSY_RETRY_LIMIT_MS 60000

struct tj__cache {
  sqlite3 *db;
  int readonly;
  pthread_mutex_t lock; /* statements are shared by the runtime's threads */
  sqlite3_stmt *get, *put, *drop, *use, *miss;
};

char *tj__cache_default_path(void)
{
  const char *env = getenv("TOKITAI_JIT_CACHE");
  char *path = NULL;
  if (env && *env)
    return strdup(env);
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  if (xdg && *xdg == '/') {
    if (asprintf(&path, "%s/tokitai-jit/cache.db", xdg) < 0)
      path = NULL;
  } else if (home && *home) {
    if (asprintf(&path, "%s/.cache/tokitai-jit/cache.db", home) < 0)
      path = NULL;
  }
  return path;
}

/* ------------------------------------------------------- the location */

/* Owned by us and writable by nobody else (the group too, when shared). */
static int check_owner_and_mode(const char *path, const char *what,
                                unsigned flags, char *msg, size_t len)
{
  struct stat st;
  if (stat(path, &st) != 0)
    return TJ_OK; /* absent: we create it with safe modes */
  mode_t unsafe = S_IWOTH | ((flags & TJ_CACHE_GROUP) ? 0 : S_IWGRP);
  if (st.st_uid != geteuid()) {
    snprintf(msg, len,
             "refusing cache %s %s: owned by uid %u, not by you (uid %u); "
             "its owner could choose the code that runs on your GPU",
             what, path, (unsigned)st.st_uid, (unsigned)geteuid());
    return TJ_EPERM;
  }
  if (st.st_mode & unsafe) {
    snprintf(msg, len,
             "refusing cache %s %s: mode %04o lets other users write it, and "
             "so choose the code that runs on your GPU (chmod go-w '%s'%s)",
             what, path, (unsigned)(st.st_mode & 07777), path,
             (flags & TJ_CACHE_GROUP) ? "" : ", or share with TJ_CACHE_GROUP");
    return TJ_EPERM;
  }
  return TJ_OK;
}

/* mkdir -p, each new directory private (or group-shared when asked). */
static int make_dirs(char *dir, mode_t mode)
{
  struct stat st;
  if (stat(dir, &st) == 0)
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
  char *slash = strrchr(dir, '/');
  if (slash && slash != dir) {
    *slash = '\0';
    int e = make_dirs(dir, mode);
    *slash = '/';
    if (e)
      return e;
  }
  if (mkdir(dir, mode) != 0 && errno != EEXIST)
    return errno;
  return 0;
}

/* Create the directory and an empty file with safe modes before SQLite
 * opens it, since SQLite would create it 0644 under the umask. */
static int prepare_location(const char *path, unsigned flags, char *msg,
                            size_t len)
{
  char *dir = strdup(path);
  if (!dir)
    return TJ_ENOMEM;
  char *slash = strrchr(dir, '/');
  int rc = TJ_OK;
  if (slash && slash != dir) {
    *slash = '\0';
    int e = (flags & TJ_CACHE_READONLY)
                ? 0 : make_dirs(dir, (flags & TJ_CACHE_GROUP) ? 0770 : 0700);
    if (e) {
      snprintf(msg, len, "cannot create cache directory %s: %s", dir, strerror(e));
      rc = TJ_EIO;
    } else {
      rc = check_owner_and_mode(dir, "directory", flags, msg, len);
    }
  }
  free(dir);
  if (rc == TJ_OK)
    rc = check_owner_and_mode(path, "file", flags, msg, len);
  if (rc == TJ_OK && !(flags & TJ_CACHE_READONLY)) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  (flags & TJ_CACHE_GROUP) ? 0660 : 0600);
    if (fd >= 0)
      close(fd);
    else if (errno != EEXIST) {
      snprintf(msg, len, "cannot create cache file %s: %s", path, strerror(errno));
      rc = TJ_EIO;
    }
  }
  return rc;
}

/* ------------------------------------------------------- SQLite helpers */

static int is_busy(int rc)
{
  rc &= 0xff;
  return rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
}

static void sleep_ms(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* sqlite3_exec, retried while another process holds the lock: the busy
 * handler is not called in every case (a WAL switch, a read transaction
 * upgrading), and a racing process must never see "database is locked". */
static int exec_retry(sqlite3 *db, const char *sql)
{
  int rc;
  for (long waited = 0;; waited += 10) {
    rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    if (!is_busy(rc) || waited >= BUSY_RETRY_LIMIT_MS)
      return rc;
    sleep_ms(10);
  }
}

/* Step a prepared statement to completion with the same retry rule. */
static int step_retry(sqlite3_stmt *st)
{
  int rc;
  for (long waited = 0;; waited += 10) {
    rc = sqlite3_step(st);
    if (!is_busy(rc) || waited >= BUSY_RETRY_LIMIT_MS)
      return rc;
    sqlite3_reset(st);
    sleep_ms(10);
  }
}

static int user_version(sqlite3 *db, int *version)
{
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
  if (rc != SQLITE_OK)
    return rc;
  rc = step_retry(st);
  if (rc == SQLITE_ROW) {
    *version = sqlite3_column_int(st, 0);
    rc = SQLITE_OK;
  }
  sqlite3_finalize(st);
  return rc;
}

/* Create the schema in a new file; leave a newer one alone. */
static int apply_schema(sqlite3 *db, int *newer)
{
  int version = 0, rc = exec_retry(db, "BEGIN IMMEDIATE");
  if (rc != SQLITE_OK)
    return rc;
  rc = user_version(db, &version);
  if (rc == SQLITE_OK && version == 0) {
    rc = sqlite3_exec(db, tj__schema_sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
      rc = sqlite3_exec(db, "PRAGMA user_version = 1", NULL, NULL, NULL);
  }
  *newer = rc == SQLITE_OK && version > CACHE_SCHEMA_VERSION;
  if (rc == SQLITE_OK)
    rc = exec_retry(db, "COMMIT");
  if (rc != SQLITE_OK)
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

static int prepare_statements(tj__cache *c)
{
  static const struct {
    size_t offset;
    const char *sql;
  } stmts[] = {
    {offsetof(tj__cache, get),
     "SELECT code, code_hash FROM code_objects WHERE key = ?1"},
    {offsetof(tj__cache, put),
     "INSERT OR IGNORE INTO code_objects (key, kernel, arch, platform, "
     "compiler, options, code, code_hash, code_size, compile_ms, created, "
     "last_used, hits) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
     "?11, 0)"},
    {offsetof(tj__cache, drop),
     "DELETE FROM code_objects WHERE key = ?1 AND code_hash = ?2"},
    {offsetof(tj__cache, use),
     "UPDATE code_objects SET hits = hits + ?2, last_used = ?3 WHERE key = ?1"},
    {offsetof(tj__cache, miss),
     "UPDATE counters SET value = value + ?1 WHERE name = 'misses'"},
  };
  for (size_t i = 0; i < sizeof stmts / sizeof stmts[0]; i++) {
    sqlite3_stmt **st = (sqlite3_stmt **)((char *)c + stmts[i].offset);
    int rc = sqlite3_prepare_v3(c->db, stmts[i].sql, -1,
                                SQLITE_PREPARE_PERSISTENT, st, NULL);
    if (rc != SQLITE_OK)
      return rc;
  }
  return SQLITE_OK;
}

static void cache_free(tj__cache *c)
{
  if (!c)
    return;
  sqlite3_finalize(c->get);
  sqlite3_finalize(c->put);
  sqlite3_finalize(c->drop);
  sqlite3_finalize(c->use);
  sqlite3_finalize(c->miss);
  sqlite3_close_v2(c->db);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

void tj__cache_close(tj__cache *c)
{
  cache_free(c);
}

struct sqlite3 *tj__cache_db(tj__cache *c) { return c->db; }
void tj__cache_lock(tj__cache *c) { pthread_mutex_lock(&c->lock); }
void tj__cache_unlock(tj__cache *c) { pthread_mutex_unlock(&c->lock); }
int tj__cache_readonly(const tj__cache *c) { return c->readonly; }

const char *tj__cache_errmsg(tj__cache *c)
{
  return c && c->db ? sqlite3_errmsg(c->db) : "no cache";
}

/* ------------------------------------------------------- opening */

enum open_outcome { OPENED, UNUSABLE, CORRUPT, NEWER };

/* One attempt at opening path; says whether a failure means the file is
 * not a usable database (to be moved aside) or the location is unusable. */
static enum open_outcome try_open(const char *path, unsigned flags,
                                  tj__cache *c, char *msg, size_t len)
{
  int oflags = SQLITE_OPEN_FULLMUTEX |
               ((flags & TJ_CACHE_READONLY) ? SQLITE_OPEN_READONLY
                                            : SQLITE_OPEN_READWRITE);
  int rc = sqlite3_open_v2(path, &c->db, oflags, NULL);
  int newer = 0;
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(c->db, BUSY_TIMEOUT_MS);
    sqlite3_extended_result_codes(c->db, 1);
    if (!c->readonly)
      rc = exec_retry(c->db, "PRAGMA journal_mode = WAL; "
                             "PRAGMA synchronous = NORMAL");
  }
  if (rc == SQLITE_OK && !c->readonly)
    rc = apply_schema(c->db, &newer);
  if (rc == SQLITE_OK && c->readonly) {
    int version = 0;
    rc = user_version(c->db, &version);
    newer = version > CACHE_SCHEMA_VERSION;
  }
  if (rc == SQLITE_OK && newer) {
    snprintf(msg, len, "cache %s has a schema newer than this library's "
             "(version %d); running without a cache", path, CACHE_SCHEMA_VERSION);
    return NEWER;
  }
  if (rc == SQLITE_OK)
    rc = prepare_statements(c);
  if (rc == SQLITE_OK)
    return OPENED;
  snprintf(msg, len, "cache %s: %s", path,
           c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
  rc &= 0xff;
  /* SQLITE_ERROR here is a table without the columns we prepare against. */
  if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB || rc == SQLITE_ERROR)
    return CORRUPT;
  return UNUSABLE;
}

static void move_aside(const char *path, char *msg, size_t len)
{
  char aside[4096], side[4096];
  snprintf(aside, sizeof aside, "%s.corrupt-%ld", path, (long)time(NULL));
  size_t used = strlen(msg);
  if (rename(path, aside) == 0)
    snprintf(msg + used, len - used, "; moved it to %s and started a new one",
             aside);
  else
    unlink(path);
  snprintf(side, sizeof side, "%s-wal", path);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", path);
  unlink(side);
}

static tj__cache *cache_new(unsigned flags)
{
  tj__cache *c = calloc(1, sizeof *c);
  if (c) {
    c->readonly = (flags & TJ_CACHE_READONLY) != 0;
    pthread_mutex_init(&c->lock, NULL);
  }
  return c;
}

int tj__cache_open(const char *path, unsigned flags, tj__cache **out,
                   char *msg, size_t msglen)
{
  *out = NULL;
  msg[0] = '\0';
  int rc = prepare_location(path, flags, msg, msglen);
  if (rc == TJ_EPERM || rc == TJ_ENOMEM)
    return rc;
  if (rc != TJ_OK)
    return TJ_OK; /* nowhere to write: go on without a cache, msg says why */
  if ((flags & TJ_CACHE_READONLY) && access(path, R_OK) != 0) {
    snprintf(msg, msglen, "cache %s cannot be read (%s); running without a cache",
             path, strerror(errno));
    return TJ_OK;
  }
  for (int attempt = 0; attempt < 2; attempt++) {
    tj__cache *c = cache_new(flags);
    if (!c)
      return TJ_ENOMEM;
    enum open_outcome o = try_open(path, flags, c, msg, msglen);
    if (o == OPENED) {
      *out = c;
      return TJ_OK;
    }
    cache_free(c);
    if (o != CORRUPT || (flags & TJ_CACHE_READONLY) || attempt == 1)
      return TJ_OK;
    move_aside(path, msg, msglen);
    char ignored[256];
    if (prepare_location(path, flags, ignored, sizeof ignored) != TJ_OK)
      return TJ_OK;
  }
  return TJ_OK;
}

/* ------------------------------------------------------- rows */

int tj__cache_get(tj__cache *c, const char *key, void **code, size_t *size,
                  int *dropped)
{
  int rc = TJ_ENOENT;
  char hash[TJ__KEY_HEX], stored[TJ__KEY_HEX] = "";
  *dropped = 0;
  pthread_mutex_lock(&c->lock);
  sqlite3_bind_text(c->get, 1, key, -1, SQLITE_STATIC);
  if (step_retry(c->get) == SQLITE_ROW) {
    const void *blob = sqlite3_column_blob(c->get, 0);
    size_t n = (size_t)sqlite3_column_bytes(c->get, 0);
    const unsigned char *h = sqlite3_column_text(c->get, 1);
    snprintf(stored, sizeof stored, "%s", h ? (const char *)h : "");
    tj__hash_hex(blob, n, hash);
    if (blob && n && strcmp(hash, stored) == 0) {
      *code = malloc(n);
      if (*code) {
        memcpy(*code, blob, n);
        *size = n;
        rc = TJ_OK;
      } else {
        rc = TJ_ENOMEM;
      }
    } else {
      *dropped = 1;
    }
  }
  sqlite3_reset(c->get);
  if (*dropped && !c->readonly) {
    /* Only the row we judged: a racing writer may have replaced it. */
    sqlite3_bind_text(c->drop, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(c->drop, 2, stored, -1, SQLITE_STATIC);
    step_retry(c->drop);
    sqlite3_reset(c->drop);
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

int tj__cache_put(tj__cache *c, const tj__cache_row *r)
{
  if (c->readonly)
    return TJ_OK;
  char hash[TJ__KEY_HEX];
  tj__hash_hex(r->code, r->code_size, hash);
  pthread_mutex_lock(&c->lock);
  sqlite3_stmt *st = c->put;
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
  int rc = step_retry(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  pthread_mutex_unlock(&c->lock);
  return rc == SQLITE_DONE ? TJ_OK : TJ_ECACHE;
}

int tj__cache_record_usage(tj__cache *c, const char *const *keys,
                           const uint64_t *hits, size_t n, uint64_t misses)
{
  if (c->readonly || (n == 0 && misses == 0))
    return TJ_OK;
  int ok = 1;
  pthread_mutex_lock(&c->lock);
  if (exec_retry(c->db, "BEGIN IMMEDIATE") != SQLITE_OK) {
    pthread_mutex_unlock(&c->lock);
    return TJ_ECACHE;
  }
  for (size_t i = 0; i < n && ok; i++) {
    sqlite3_bind_text(c->use, 1, keys[i], -1, SQLITE_STATIC);
    sqlite3_bind_int64(c->use, 2, (sqlite3_int64)hits[i]);
    sqlite3_bind_int64(c->use, 3, (sqlite3_int64)time(NULL));
    ok = sqlite3_step(c->use) == SQLITE_DONE;
    sqlite3_reset(c->use);
  }
  if (ok && misses) {
    sqlite3_bind_int64(c->miss, 1, (sqlite3_int64)misses);
    ok = sqlite3_step(c->miss) == SQLITE_DONE;
    sqlite3_reset(c->miss);
  }
  ok = ok && exec_retry(c->db, "COMMIT") == SQLITE_OK;
  if (!ok)
    sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
  pthread_mutex_unlock(&c->lock);
  return ok ? TJ_OK : TJ_ECACHE;
}
