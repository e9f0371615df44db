/*
 * cache.c: the SQLite store of code objects.
 *
 * One file shared by any number of processes: WAL journal (a rollback
 * journal on network file systems), a busy timeout plus a retry loop for
 * the cases SQLite does not wait on, prepared statements only, one
 * transaction per insert, INSERT OR IGNORE so that racing compilers all
 * succeed and leave one row.  Every blob is checked against its stored
 * XXH3-128 and size on load.  A location other users can write is refused:
 * whoever writes the cache chooses the code that runs on our GPU.
 *
 * A cache must never stop a program: a file that is not a usable database
 * is moved aside and replaced, one that fails under us (damaged, disk full,
 * I/O errors) is given up for the rest of the connection, and each of those
 * is reported once.  cache/README.md says why each choice is safe for the
 * other processes that have the file open.
 */
#include "internal.h"
#include "embedded.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#define CACHE_SCHEMA_VERSION 2
#define BUSY_TIMEOUT_MS 5000
#define BUSY_RETRY_LIMIT_MS 60000
#define OPEN_ATTEMPTS 4      /* a file may vanish or be replaced under us */
#define ASIDE_KEEP 3         /* moved-aside files kept for a post-mortem */
#define WAL_LIMIT_BYTES 4194304 /* the WAL is cut back to this after a reset */

struct tj__cache {
  sqlite3 *db;
  char *path;
  unsigned flags;
  int readonly;     /* opened read-only, or found read-only */
  int found_readonly;
  int nowrite;      /* a write failed (disk full, I/O): store nothing more */
  int broken;       /* the file failed under us: read nothing more */
  dev_t dev;        /* the file this connection has open, to move aside */
  ino_t ino;        /* only that one and never its replacement */
  char nowrite_msg[512], broken_msg[512]; /* each written once */
  pthread_mutex_t lock; /* statements are shared by the runtime's threads */
  sqlite3_stmt *get, *put, *drop, *use, *miss, *foreign;
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

static int in_my_groups(gid_t gid)
{
  gid_t groups[256];
  if (gid == getegid())
    return 1;
  int n = getgroups(256, groups);
  for (int i = 0; i < n; i++)
    if (groups[i] == gid)
      return 1;
  return 0;
}

/* Owned by us and writable by nobody else.  With TJ_CACHE_GROUP, the group
 * may write, and the owner may be another member of one of our groups: the
 * caller has said that it trusts them. */
static int check_owner_and_mode(const char *path, const char *what,
                                unsigned flags, char *msg, size_t len)
{
  struct stat st;
  if (stat(path, &st) != 0)
    return TJ_OK; /* absent: we create it with safe modes */
  int group = (flags & TJ_CACHE_GROUP) != 0;
  mode_t unsafe = S_IWOTH | (group ? 0 : S_IWGRP);
  if (st.st_uid != geteuid() && !(group && in_my_groups(st.st_gid))) {
    snprintf(msg, len,
             "refusing cache %s %s: owned by uid %u, not by you (uid %u)%s; "
             "its owner could choose the code that runs on your GPU",
             what, path, (unsigned)st.st_uid, (unsigned)geteuid(),
             group ? " nor by one of your groups" : "");
    return TJ_EPERM;
  }
  if (st.st_mode & unsafe) {
    snprintf(msg, len,
             "refusing cache %s %s: mode %04o lets other users write it, and "
             "so choose the code that runs on your GPU (chmod go-w '%s'%s)",
             what, path, (unsigned)(st.st_mode & 07777), path,
             group ? "" : ", or share with TJ_CACHE_GROUP");
    return TJ_EPERM;
  }
  return TJ_OK;
}

/* A directory above the cache that everyone may write, and that lacks the
 * sticky bit, lets anyone rename the cache directory away and put their
 * own in its place. */
static int check_ancestors(const char *dir, char *msg, size_t len)
{
  char *p = strdup(dir), *slash;
  int rc = TJ_OK;
  if (!p)
    return TJ_ENOMEM;
  while (rc == TJ_OK && (slash = strrchr(p, '/'))) {
    slash[slash == p] = '\0'; /* "/x" leaves "/" */
    struct stat st;
    if (stat(p, &st) == 0 && (st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
      snprintf(msg, len, "refusing cache directory %s: %s above it is "
               "writable by everyone and not sticky, so anyone could put "
               "their own cache in its place", dir, p);
      rc = TJ_EPERM;
    }
    if (slash == p)
      break;
  }
  free(p);
  return rc;
}

/* mkdir -p; each new directory gets exactly mode, whatever the umask, so
 * that a group-shared cache is writable by the group. */
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
  if (mkdir(dir, mode) != 0)
    return errno == EEXIST ? 0 : errno;
  return chmod(dir, mode) == 0 ? 0 : errno;
}

/* An empty file with the right mode, before SQLite opens it: SQLite would
 * create it 0644 under the umask. */
static int create_file(const char *path, mode_t mode, char *msg, size_t len)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                mode);
  if (fd >= 0) {
    if (fchmod(fd, mode) != 0) { /* the umask; SQLite copies this mode */
      snprintf(msg, len, "cannot set the mode of cache file %s: %s", path,
               strerror(errno));
      close(fd);
      return TJ_EIO;
    }
    close(fd);
  } else if (errno != EEXIST) {
    snprintf(msg, len, "cannot create cache file %s: %s", path, strerror(errno));
    return TJ_EIO;
  }
  return TJ_OK;
}

static int prepare_location(const char *path, unsigned flags, char *msg,
                            size_t len)
{
  int group = (flags & TJ_CACHE_GROUP) != 0;
  char *dir = strdup(path);
  if (!dir)
    return TJ_ENOMEM;
  char *slash = strrchr(dir, '/');
  int rc = TJ_OK;
  if (slash && slash != dir) {
    *slash = '\0';
    rc = check_ancestors(dir, msg, len);
    int e = (rc != TJ_OK || (flags & TJ_CACHE_READONLY))
                ? 0 : make_dirs(dir, group ? 0770 : 0700);
    if (e) {
      snprintf(msg, len, "cannot create cache directory %s: %s", dir, strerror(e));
      rc = TJ_EIO;
    } else if (rc == TJ_OK) {
      rc = check_owner_and_mode(dir, "directory", flags, msg, len);
    }
  }
  free(dir);
  if (rc == TJ_OK)
    rc = check_owner_and_mode(path, "file", flags, msg, len);
  if (rc == TJ_OK && !(flags & TJ_CACHE_READONLY))
    rc = create_file(path, group ? 0660 : 0600, msg, len);
  return rc;
}

/*
 * <path>.lock orders opening against moving a damaged file aside: an opener
 * holds it shared until SQLite has the database, its WAL and its shared
 * memory open; whoever moves the file aside holds it exclusive.  Without it
 * a process could pair the old database with the new one's WAL, or the new
 * database with the old WAL, and corrupt the new one.  -1 when it cannot
 * be had (a read-only location); the caller then moves nothing aside.
 */
static int lock_take(const char *path, unsigned flags, int how)
{
  char *name = NULL;
  mode_t mode = (flags & TJ_CACHE_GROUP) ? 0660 : 0600;
  if (asprintf(&name, "%s.lock", path) < 0)
    return -1;
  int fd = -1;
  if (!(flags & TJ_CACHE_READONLY))
    fd = open(name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0)
    fd = open(name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  free(name);
  if (fd < 0)
    return -1;
  struct stat st;
  if ((flags & TJ_CACHE_GROUP) && fstat(fd, &st) == 0 && st.st_uid == geteuid())
    (void)fchmod(fd, mode); /* the umask; a shared lock must be shared */
  while (flock(fd, how) != 0)
    if (errno != EINTR) {
      close(fd);
      return -1;
    }
  return fd;
}

static void lock_release(int fd)
{
  if (fd >= 0)
    close(fd); /* drops the flock */
}

/* WAL keeps its index in shared memory, which is coherent only between
 * processes of one host: on a network file system the cache takes a
 * rollback journal, which needs nothing but file locks. */
int tj__cache_fs_is_network(unsigned long magic)
{
  static const unsigned long network[] = {
    0x6969,     /* NFS */           0x517B,     /* SMB */
    0xFF534D42, /* CIFS */          0xFE534D42, /* SMB2 */
    0x00C36400, /* Ceph */          0x5346414F, /* AFS */
    0x6B414653, /* kAFS */          0x73757245, /* Coda */
    0x01021997, /* 9P */            0x65735546, /* FUSE (sshfs, s3fs...) */
    0x0BD00BD0, /* Lustre */        0x47504653, /* GPFS */
    0x7461636F, /* OCFS2 */         0x01161970, /* GFS2 */
    0x19830326, /* BeeGFS */        0xAAD7AAEA, /* PanFS */
  };
  for (size_t i = 0; i < sizeof network / sizeof network[0]; i++)
    if (magic == network[i])
      return 1;
  return 0;
}

static int on_network_fs(const char *path)
{
  struct statfs fs;
  return statfs(path, &fs) == 0 &&
         tj__cache_fs_is_network((unsigned long)(unsigned)fs.f_type);
}

/* ------------------------------------------------------- SQLite helpers */

static int is_busy(int rc)
{
  rc &= 0xff;
  return rc == SQLITE_BUSY || rc == SQLITE_LOCKED || rc == SQLITE_PROTOCOL;
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

/* Step a prepared statement with the same retry rule. */
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

/* ------------------------------------------------------- schema versions */

/*
 * Each step takes a file from one user_version to a later one.  A step
 * with create set then runs cache/schema.sql, which makes the current
 * schema.  Version 0 is an empty file or a pre-release (0.0.x) cache,
 * whose code_objects had no code_hash, code_size or compiler column: its
 * rows cannot be verified and were keyed by another encoding, so they are
 * dropped.  A version with no step from it (a gap, a negative number) is a
 * file we cannot read: it is moved aside and rebuilt.
 */
static const struct migration {
  int from, to;
  int create;
  const char *sql;
} migrations[] = {
  {0, CACHE_SCHEMA_VERSION, 1,
   "DROP TABLE IF EXISTS code_objects; DROP TABLE IF EXISTS counters;"},
  /* 2: the lowered names of a module's entries. */
  {1, 2, 0, "ALTER TABLE code_objects ADD COLUMN entries TEXT NOT NULL DEFAULT ''"},
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
  char sql[64];
  int rc = sqlite3_exec(db, m->sql, NULL, NULL, NULL);
  if (rc == SQLITE_OK && m->create)
    rc = sqlite3_exec(db, tj__schema_sql, NULL, NULL, NULL);
  snprintf(sql, sizeof sql, "PRAGMA user_version = %d", m->to);
  return rc == SQLITE_OK ? sqlite3_exec(db, sql, NULL, NULL, NULL) : rc;
}

/* Bring the file to CACHE_SCHEMA_VERSION in one write transaction, which
 * reads the version again, so that racing processes migrate it once.
 * *version is where it ended; *gap says that no step led on. */
static int migrate(sqlite3 *db, int *version, int *gap)
{
  int rc = exec_retry(db, "BEGIN IMMEDIATE");
  if (rc != SQLITE_OK)
    return rc;
  rc = user_version(db, version);
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
     "SELECT code, code_hash, code_size, entries FROM code_objects WHERE key = ?1"},
    {offsetof(tj__cache, put),
     "INSERT OR IGNORE INTO code_objects (key, kernel, arch, platform, "
     "compiler, options, code, code_hash, code_size, compile_ms, created, "
     "last_used, hits, entries) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
     "?10, ?11, ?11, 0, ?12)"},
    {offsetof(tj__cache, drop),
     "DELETE FROM code_objects WHERE key = ?1 AND code_hash IS ?2"},
    {offsetof(tj__cache, use),
     "UPDATE code_objects SET hits = hits + ?2, last_used = ?3 WHERE key = ?1"},
    {offsetof(tj__cache, miss),
     "UPDATE counters SET value = value + ?1 WHERE name = 'misses'"},
    {offsetof(tj__cache, foreign),
     "DELETE FROM code_objects WHERE compiler <> ?1 AND last_used < ?2"},
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

/* ------------------------------------------------------- the handle */

static tj__cache *cache_new(const char *path, unsigned flags)
{
  tj__cache *c = calloc(1, sizeof *c);
  if (c && !(c->path = strdup(path))) {
    free(c);
    return NULL;
  }
  if (c) {
    c->flags = flags;
    c->readonly = (flags & TJ_CACHE_READONLY) != 0;
    pthread_mutex_init(&c->lock, NULL);
  }
  return c;
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
  sqlite3_finalize(c->foreign);
  sqlite3_close_v2(c->db);
  pthread_mutex_destroy(&c->lock);
  free(c->path);
  free(c);
}

void tj__cache_close(tj__cache *c)
{
  cache_free(c);
}

struct sqlite3 *tj__cache_db(tj__cache *c) { return c->db; }
void tj__cache_lock(tj__cache *c) { pthread_mutex_lock(&c->lock); }
void tj__cache_unlock(tj__cache *c) { pthread_mutex_unlock(&c->lock); }

/* Read-only also once a write or a read has failed: the maintenance half
 * (cache_admin.c) then leaves the file alone too. */
int tj__cache_readonly(const tj__cache *c)
{
  return c->readonly || __atomic_load_n(&c->nowrite, __ATOMIC_ACQUIRE) ||
         __atomic_load_n(&c->broken, __ATOMIC_ACQUIRE);
}

const char *tj__cache_errmsg(tj__cache *c)
{
  if (!c || !c->db)
    return "no cache";
  if (__atomic_load_n(&c->broken, __ATOMIC_ACQUIRE))
    return c->broken_msg;
  if (__atomic_load_n(&c->nowrite, __ATOMIC_ACQUIRE))
    return c->nowrite_msg;
  return sqlite3_errmsg(c->db);
}

/* ------------------------------------------------------- moving aside */

/* Keep the newest ASIDE_KEEP moved-aside files, so that a cache that keeps
 * failing cannot fill the disk with them. */
static void prune_aside(const char *path)
{
  char *dir = strdup(path), *prefix = NULL;
  char *slash = dir ? strrchr(dir, '/') : NULL;
  if (!dir || asprintf(&prefix, "%s.corrupt-", slash ? slash + 1 : dir) < 0) {
    free(dir);
    return;
  }
  if (slash)
    slash[slash == dir] = '\0';
  size_t plen = strlen(prefix);
  for (int round = 0; round < 64; round++) {
    DIR *d = opendir(slash ? dir : ".");
    if (!d)
      break;
    char oldest[512] = "";
    long oldest_t = 0, count = 0;
    for (struct dirent *e; (e = readdir(d));) {
      if (strncmp(e->d_name, prefix, plen) != 0 || strlen(e->d_name) >= sizeof oldest)
        continue;
      long t = strtol(e->d_name + plen, NULL, 10);
      if (count++ == 0 || t < oldest_t) {
        oldest_t = t;
        snprintf(oldest, sizeof oldest, "%s", e->d_name);
      }
    }
    closedir(d);
    if (count <= ASIDE_KEEP)
      break;
    char *victim = NULL;
    if (asprintf(&victim, "%s/%s", slash ? dir : ".", oldest) >= 0)
      unlink(victim);
    free(victim);
  }
  free(prefix);
  free(dir);
}

/* The WAL, shared memory and rollback journal of the old file: left in
 * place, SQLite would replay the old file's pages into the new one. */
static void remove_side_files(const char *path)
{
  static const char *const sides[] = {"-wal", "-shm", "-journal"};
  for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++) {
    char *side = NULL;
    if (asprintf(&side, "%s%s", path, sides[i]) >= 0)
      unlink(side);
    free(side);
  }
}

/*
 * Move the file we judged unusable (dev, ino) to <path>.corrupt-<time>,
 * under the exclusive lock, and only if path still names it: a racing
 * process may have replaced it already, and its replacement is good.
 * Appends what happened to msg.  1 when path no longer names the bad file.
 */
static int move_aside(const char *path, unsigned flags, dev_t dev, ino_t ino,
                      char *msg, size_t len)
{
  size_t used = strlen(msg);
  int fd = lock_take(path, flags, LOCK_EX);
  if (fd < 0) {
    snprintf(msg + used, len - used, "; could not lock it to move it aside");
    return 0;
  }
  struct stat st;
  char *aside = NULL;
  int moved = 1;
  if (stat(path, &st) != 0 || st.st_dev != dev || st.st_ino != ino) {
    snprintf(msg + used, len - used, "; another process replaced it already");
  } else if (asprintf(&aside, "%s.corrupt-%ld", path, (long)time(NULL)) < 0) {
    aside = NULL;
    moved = 0;
  } else if (rename(path, aside) == 0) {
    remove_side_files(path);
    prune_aside(path);
    snprintf(msg + used, len - used, "; moved it to %s and started a new one",
             aside);
  } else {
    snprintf(msg + used, len - used, "; could not move it aside: %s",
             strerror(errno));
    moved = 0;
  }
  free(aside);
  lock_release(fd);
  return moved;
}

/* ------------------------------------------------------- opening */

enum open_outcome { OPENED, UNUSABLE, CORRUPT, NEWER, VANISHED, TRANSIENT };

/* Open the connection and note the file it has and whether SQLite could
 * only open it read-only (a read-only file system or file). */
static int connect_db(tj__cache *c)
{
  int oflags = SQLITE_OPEN_FULLMUTEX |
               (c->readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE);
  int rc = sqlite3_open_v2(c->path, &c->db, oflags, NULL);
  if (rc != SQLITE_OK)
    return rc;
  sqlite3_busy_timeout(c->db, BUSY_TIMEOUT_MS);
  sqlite3_extended_result_codes(c->db, 1);
  /* Never delete the WAL or shared memory by name at close: once the file
   * has been moved aside, that name belongs to its replacement. */
  int persist = 1;
  sqlite3_file_control(c->db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
  struct stat st;
  if (stat(c->path, &st) == 0) {
    c->dev = st.st_dev;
    c->ino = st.st_ino;
  }
  if (!c->readonly && sqlite3_db_readonly(c->db, "main") == 1)
    c->readonly = c->found_readonly = 1;
  return SQLITE_OK;
}

static int set_journal(tj__cache *c)
{
  char sql[160];
  snprintf(sql, sizeof sql, "PRAGMA journal_mode = %s; "
           "PRAGMA synchronous = NORMAL; PRAGMA journal_size_limit = %d",
           on_network_fs(c->path) ? "DELETE" : "WAL", WAL_LIMIT_BYTES);
  return exec_retry(c->db, sql);
}

/* Say why an open failed, and whether the file is to be moved aside. */
static enum open_outcome open_failed(tj__cache *c, int rc, int version,
                                     int gap, char *msg, size_t len)
{
  if (gap) {
    snprintf(msg, len, "cache %s has schema version %d, which this library "
             "cannot migrate", c->path, version);
    return CORRUPT;
  }
  snprintf(msg, len, "cache %s: %s", c->path,
           c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
  rc &= 0xff;
  if (rc == SQLITE_CANTOPEN && access(c->path, F_OK) != 0 && errno == ENOENT)
    return VANISHED; /* moved aside by another process since we made it */
  /* SQLITE_ERROR here is a table without the columns we prepare against. */
  if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB || rc == SQLITE_ERROR)
    return CORRUPT;
  /* Seen with 16 processes opening one new file at once: an I/O error from
   * the first WAL set-up that a second attempt does not meet. */
  if (rc == SQLITE_IOERR || rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
    return TRANSIENT;
  return UNUSABLE;
}

/* One attempt at opening c->path.  A newer schema is left untouched: the
 * version is read before anything (even the journal mode) is written. */
static enum open_outcome try_open(tj__cache *c, char *msg, size_t len)
{
  int version = 0, gap = 0;
  int rc = connect_db(c);
  if (rc == SQLITE_OK)
    rc = user_version(c->db, &version);
  if (rc == SQLITE_OK && version <= CACHE_SCHEMA_VERSION && !c->readonly) {
    rc = set_journal(c);
    if (rc == SQLITE_OK)
      rc = migrate(c->db, &version, &gap);
  }
  if (rc == SQLITE_OK && version > CACHE_SCHEMA_VERSION) {
    snprintf(msg, len, "cache %s has schema version %d, newer than this "
             "library's (%d); running without a cache", c->path, version,
             CACHE_SCHEMA_VERSION);
    return NEWER;
  }
  if (rc == SQLITE_OK && version != CACHE_SCHEMA_VERSION) {
    snprintf(msg, len, "cache %s has schema version %d and is read-only "
             "here, so it cannot be migrated; running without a cache",
             c->path, version);
    return UNUSABLE;
  }
  if (rc == SQLITE_OK)
    rc = prepare_statements(c);
  return rc == SQLITE_OK ? OPENED : open_failed(c, rc, version, gap, msg, len);
}

static void note_found_readonly(const tj__cache *c, char *msg, size_t len)
{
  size_t used = strlen(msg);
  snprintf(msg + used, len - used, "%scache %s cannot be written here; "
           "using the code it holds and storing none", used ? "; " : "",
           c->path);
}

int tj__cache_open(const char *path, unsigned flags, tj__cache **out,
                   char *msg, size_t msglen)
{
  *out = NULL;
  msg[0] = '\0';
  for (int attempt = 0; attempt < OPEN_ATTEMPTS; attempt++) {
    int rc = prepare_location(path, flags, msg, msglen);
    if (rc == TJ_EPERM || rc == TJ_ENOMEM)
      return rc;
    if (rc != TJ_OK)
      return TJ_OK; /* nowhere to write: go on without a cache, msg says why */
    if ((flags & TJ_CACHE_READONLY) && access(path, R_OK) != 0) {
      snprintf(msg, msglen, "cache %s cannot be read (%s); running without "
               "a cache", path, strerror(errno));
      return TJ_OK;
    }
    tj__cache *c = cache_new(path, flags);
    if (!c)
      return TJ_ENOMEM;
    int lock = lock_take(path, flags, LOCK_SH);
    enum open_outcome o = try_open(c, msg, msglen);
    lock_release(lock);
    if (o == OPENED) {
      if (c->found_readonly)
        note_found_readonly(c, msg, msglen);
      *out = c;
      return TJ_OK;
    }
    dev_t dev = c->dev;
    ino_t ino = c->ino;
    int readonly = c->readonly;
    cache_free(c);
    if (o == VANISHED)
      continue;
    if (o == TRANSIENT && attempt + 1 < OPEN_ATTEMPTS) {
      sleep_ms(25L * (attempt + 1));
      continue;
    }
    if (o != CORRUPT || readonly || !move_aside(path, flags, dev, ino, msg, msglen))
      return TJ_OK;
  }
  return TJ_OK;
}

/* ------------------------------------------------------- failing */

/*
 * A statement failed for a reason other than a busy database.  Reading: the
 * connection reads nothing more (and a damaged file is moved aside for the
 * processes that come after).  Writing: a damaged file likewise; anything
 * else (disk full, I/O error, a file turned read-only) stops writes only.
 * Called with c->lock held, and only on a state not reached before, so the
 * caller sees TJ_ECACHE once and its runtime warns once.
 */
static int cache_failed(tj__cache *c, int rc, int reading)
{
  int prim = rc & 0xff;
  int damaged = prim == SQLITE_CORRUPT || prim == SQLITE_NOTADB;
  char *msg = (reading || damaged) ? c->broken_msg : c->nowrite_msg;
  size_t len = sizeof c->broken_msg;
  snprintf(msg, len, "cache %s: %s while %s", c->path, sqlite3_errstr(rc),
           reading ? "reading" : "storing");
  if (damaged && !c->readonly)
    move_aside(c->path, c->flags, c->dev, c->ino, msg, len);
  size_t used = strlen(msg);
  snprintf(msg + used, len - used, "; %s",
           reading || damaged ? "running without the cache from now on"
                              : "storing nothing more in it");
  __atomic_store_n(reading || damaged ? &c->broken : &c->nowrite, 1,
                   __ATOMIC_RELEASE);
  return TJ_ECACHE;
}

/* ------------------------------------------------------- rows */

/* The row's code, if it is whole: the stored hash and size must both
 * match the blob.  *stored gets a copy of the stored hash, for the drop. */
static int take_verified(sqlite3_stmt *st, void **code, size_t *size,
                         char **stored, int *dropped)
{
  const void *blob = sqlite3_column_blob(st, 0);
  int n = sqlite3_column_bytes(st, 0);
  const unsigned char *h = sqlite3_column_text(st, 1);
  sqlite3_int64 declared = sqlite3_column_int64(st, 2);
  char hash[TJ__KEY_HEX];
  *stored = h ? strdup((const char *)h) : NULL;
  if (blob && n > 0)
    tj__hash_hex(blob, (size_t)n, hash);
  if (!blob || n <= 0 || declared != n || !h ||
      strcmp(hash, (const char *)h) != 0) {
    *dropped = 1;
    return TJ_ENOENT;
  }
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
  sqlite3_stmt *st;
  int whole = 1;
  if (sqlite3_prepare_v2(c->db, "PRAGMA quick_check(1)", -1, &st, NULL) != SQLITE_OK)
    return 1;
  int rc = step_retry(st);
  if (rc == SQLITE_ROW) {
    const unsigned char *t = sqlite3_column_text(st, 0);
    whole = t && strcmp((const char *)t, "ok") == 0;
  } else if (!is_busy(rc)) {
    whole = 0;
  }
  sqlite3_finalize(st);
  return whole;
}

/* Delete only the row we judged: a racing writer may have replaced it.  A
 * row that cannot be deleted would be judged and recompiled forever (its
 * key blocks the good row's INSERT OR IGNORE), so a failure here gives the
 * file up like a failed store: TJ_ECACHE, else TJ_ENOENT. */
static int drop_row(tj__cache *c, const char *key, const char *stored)
{
  if (tj__cache_readonly(c))
    return TJ_ENOENT;
  sqlite3_bind_text(c->drop, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_text(c->drop, 2, stored, -1, SQLITE_STATIC);
  int rc = step_retry(c->drop);
  sqlite3_reset(c->drop);
  sqlite3_clear_bindings(c->drop);
  if (rc == SQLITE_DONE || is_busy(rc))
    return TJ_ENOENT;
  return cache_failed(c, rc, 0);
}

int tj__cache_get(tj__cache *c, const char *key, void **code, size_t *size,
                  int *dropped)
{
  return tj__cache_get_entries(c, key, code, size, dropped, NULL);
}

int tj__cache_get_entries(tj__cache *c, const char *key, void **code,
                          size_t *size, int *dropped, char **entries)
{
  int rc = TJ_ENOENT;
  char *stored = NULL;
  *dropped = 0;
  pthread_mutex_lock(&c->lock);
  if (c->broken) {
    pthread_mutex_unlock(&c->lock);
    return TJ_ENOENT;
  }
  sqlite3_bind_text(c->get, 1, key, -1, SQLITE_STATIC);
  int step = step_retry(c->get);
  if (step == SQLITE_ROW)
    rc = take_verified(c->get, code, size, &stored, dropped);
  if (rc == TJ_OK && entries) {
    const unsigned char *e = sqlite3_column_text(c->get, 3);
    if (!(*entries = strdup(e ? (const char *)e : ""))) {
      free(*code);
      *code = NULL;
      rc = TJ_ENOMEM;
    }
  }
  sqlite3_reset(c->get);
  sqlite3_clear_bindings(c->get);
  if (step != SQLITE_ROW && step != SQLITE_DONE && !is_busy(step))
    rc = cache_failed(c, step, 1);
  if (*dropped)
    rc = file_is_whole(c) ? drop_row(c, key, stored)
                          : cache_failed(c, SQLITE_CORRUPT, 1);
  pthread_mutex_unlock(&c->lock);
  free(stored);
  return rc;
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

int tj__cache_put(tj__cache *c, const tj__cache_row *r)
{
  if (c->readonly)
    return TJ_OK;
  char hash[TJ__KEY_HEX];
  tj__hash_hex(r->code, r->code_size, hash);
  pthread_mutex_lock(&c->lock);
  if (c->nowrite || c->broken) { /* said once already */
    pthread_mutex_unlock(&c->lock);
    return TJ_OK;
  }
  bind_row(c->put, r, hash);
  int rc = step_retry(c->put);
  sqlite3_reset(c->put);
  sqlite3_clear_bindings(c->put);
  int out = TJ_OK;
  if (rc != SQLITE_DONE)
    out = is_busy(rc) ? TJ_ECACHE : cache_failed(c, rc, 0);
  pthread_mutex_unlock(&c->lock);
  return out;
}

static int record_rows(tj__cache *c, const char *const *keys,
                       const uint64_t *hits, size_t n, uint64_t misses)
{
  int ok = 1;
  for (size_t i = 0; i < n && ok; i++) {
    sqlite3_bind_text(c->use, 1, keys[i], -1, SQLITE_STATIC);
    sqlite3_bind_int64(c->use, 2, (sqlite3_int64)hits[i]);
    sqlite3_bind_int64(c->use, 3, (sqlite3_int64)time(NULL));
    ok = sqlite3_step(c->use) == SQLITE_DONE;
    sqlite3_reset(c->use);
  }
  sqlite3_clear_bindings(c->use);
  if (ok && misses) {
    sqlite3_bind_int64(c->miss, 1, (sqlite3_int64)misses);
    ok = sqlite3_step(c->miss) == SQLITE_DONE;
    sqlite3_reset(c->miss);
  }
  return ok;
}

int tj__cache_record_usage(tj__cache *c, const char *const *keys,
                           const uint64_t *hits, size_t n, uint64_t misses)
{
  if (tj__cache_readonly(c) || (n == 0 && misses == 0))
    return TJ_OK;
  pthread_mutex_lock(&c->lock);
  if (exec_retry(c->db, "BEGIN IMMEDIATE") != SQLITE_OK) {
    pthread_mutex_unlock(&c->lock);
    return TJ_ECACHE;
  }
  int ok = record_rows(c, keys, hits, n, misses);
  ok = ok && exec_retry(c->db, "COMMIT") == SQLITE_OK;
  if (!ok)
    sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
  pthread_mutex_unlock(&c->lock);
  return ok ? TJ_OK : TJ_ECACHE;
}

int tj__cache_evict_foreign(tj__cache *c, const char *compiler,
                            int64_t idle_seconds, uint64_t *evicted)
{
  if (evicted)
    *evicted = 0;
  if (!c || !compiler || idle_seconds < 0)
    return TJ_EINVAL;
  pthread_mutex_lock(&c->lock);
  int rc = SQLITE_DONE;
  if (!tj__cache_readonly(c)) {
    sqlite3_bind_text(c->foreign, 1, compiler, -1, SQLITE_STATIC);
    sqlite3_bind_int64(c->foreign, 2, (sqlite3_int64)time(NULL) - idle_seconds);
    rc = step_retry(c->foreign);
    if (rc == SQLITE_DONE && evicted)
      *evicted = (uint64_t)sqlite3_changes(c->db);
    sqlite3_reset(c->foreign);
    sqlite3_clear_bindings(c->foreign);
  }
  pthread_mutex_unlock(&c->lock);
  return rc == SQLITE_DONE ? TJ_OK : TJ_ECACHE;
}
