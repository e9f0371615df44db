/*
 * cache.c: the SQLite store of code objects.
 *
 * One file shared by any number of processes: WAL journal (a rollback
 * journal on network file systems), a busy timeout plus a retry loop for
 * the cases SQLite does not wait on, prepared statements only, one
 * transaction per insert, INSERT OR IGNORE so that racing compilers all
 * succeed and leave one row.  Every blob is checked against its stored
 * XXH3-128 and size on load, and its columns against the request.  A
 * location other users can write is refused (location.c): whoever writes
 * the cache chooses the code that runs on our GPU.
 *
 * A file is changed only once it is shown to be ours (application_id, or
 * exactly a layout an earlier release made); anything else is refused with
 * TJ_ECACHE and left as it was.  Otherwise a cache must never stop a
 * program: a damaged file of ours is moved aside and replaced, one that
 * fails under us (damaged, disk full, I/O errors) is given up for the rest
 * of the connection, and each of those is reported once.  cache/README.md
 * says why each choice is safe for the other processes that have the file
 * open.
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
#define PROBE_ATTEMPTS 12    /* about 1 s of a busy read-only probe */
#define ASIDE_KEEP 3         /* moved-aside files kept for a post-mortem */
#define WAL_LIMIT_BYTES 4194304 /* the WAL is cut back to this after a reset */

struct tj__cache {
  sqlite3 *db;
  char *path;
  unsigned flags;
  int readonly;     /* opened read-only, or found read-only */
  int found_readonly;
  int nowrite;      /* a write failed (disk full, I/O): store nothing more */
  int ours;         /* shown to be a tokitai-jit cache: may be moved aside */
  char readonly_why[128];
  int broken;       /* the file failed under us: read nothing more */
  dev_t dev;        /* the file this connection has open, to move aside */
  ino_t ino;        /* only that one and never its replacement */
  char nowrite_msg[512], broken_msg[512]; /* each written once */
  pthread_mutex_t lock; /* statements are shared by the runtime's threads */
  sqlite3_stmt *get, *blob, *put, *drop, *use, *miss, *foreign;
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

/*
 * <path>.lock orders opening against moving a damaged file aside: an opener
 * holds it shared until SQLite has the database, its WAL and its shared
 * memory open; whoever moves the file aside holds it exclusive.  Without it
 * a process could pair the old database with the new one's WAL, or the new
 * database with the old WAL, and corrupt the new one.  -1 when it cannot
 * be had (a read-only location); the caller then moves nothing aside.
 */
static int lock_take(const char *path, unsigned flags, int how, int create)
{
  char *name = NULL;
  mode_t mode = (flags & TJ_CACHE_GROUP) ? 0660 : 0600;
  if (asprintf(&name, "%s.lock", path) < 0)
    return -1;
  int fd = -1;
  if (create && !(flags & TJ_CACHE_READONLY))
    fd = open(name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
  if (fd < 0)
    fd = open(name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  char why[512];
  /* Our own file, never SQLite's: closing it drops no SQLite lock. */
  if (fd >= 0 && (fstat(fd, &st) != 0 ||
                  tj__location_check_file(&st, name, flags, why, sizeof why))) {
    close(fd);
    fd = -1;
  }
  free(name);
  if (fd < 0)
    return -1;
  if ((flags & TJ_CACHE_GROUP) && st.st_uid == geteuid())
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


/* ------------------------------------------------------- schema versions */

static int pragma_int(sqlite3 *db, const char *sql, int *out)
{
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
  if (rc != SQLITE_OK)
    return rc;
  rc = step_retry(st);
  if (rc == SQLITE_ROW) {
    *out = sqlite3_column_int(st, 0);
    rc = SQLITE_OK;
  }
  sqlite3_finalize(st);
  return rc;
}

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
  int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
  while (rc == SQLITE_OK && (rc = step_retry(st)) == SQLITE_ROW) {
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
  sqlite3_stmt *st;
  const unsigned char *t = NULL;
  if (sqlite3_prepare_v2(db, "SELECT group_concat(name, ', ') FROM "
                         "sqlite_master WHERE type = 'table'", -1, &st,
                         NULL) != SQLITE_OK)
    st = NULL;
  if (st && step_retry(st) == SQLITE_ROW)
    t = sqlite3_column_text(st, 0);
  snprintf(what, len, "an SQLite database of another program (user_version "
           "%d, tables: %.200s)", version, t ? (const char *)t : "none");
  sqlite3_finalize(st);
}

/*
 * What the file is.  Ours: it carries TJ__CACHE_APP_ID.  Or it carries
 * none and is one of the files the library made before it set one: an
 * empty database (nothing to lose: a new file a killed process left), the
 * 0.1.0 layout at user_version 1, or the 0.0.x layout at version 0, each
 * exactly, object for object and column for column.  Anything else is
 * another program's: it is never migrated, moved or deleted.
 */
enum identity { ID_OURS, ID_EMPTY, ID_V1, ID_PRERELEASE, ID_FOREIGN };

static int identify(sqlite3 *db, enum identity *id, int *version, char *what,
                    size_t len)
{
  int appid = 0;
  char layout[1024];
  int rc = pragma_int(db, "PRAGMA application_id", &appid);
  if (rc == SQLITE_OK)
    rc = pragma_int(db, "PRAGMA user_version", version);
  if (rc == SQLITE_OK && (uint32_t)appid == TJ__CACHE_APP_ID) {
    *id = ID_OURS;
    return SQLITE_OK;
  }
  if (rc == SQLITE_OK)
    rc = schema_layout(db, layout, sizeof layout);
  if (rc != SQLITE_OK)
    return rc;
  *id = ID_FOREIGN;
  if (appid == 0 && *version == 0 && !layout[0])
    *id = ID_EMPTY;
  else if (appid == 0 && *version == 1 && strcmp(layout, v1_layout) == 0)
    *id = ID_V1;
  else if (appid == 0 && *version == 0 &&
           (strcmp(layout, prerelease_layouts[0]) == 0 ||
            strcmp(layout, prerelease_layouts[1]) == 0))
    *id = ID_PRERELEASE;
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
static int identify_at_once(sqlite3 *db, enum identity *id, int *version,
                            char *what, size_t len)
{
  int rc = exec_retry(db, "BEGIN");
  if (rc != SQLITE_OK)
    return rc;
  rc = identify(db, id, version, what, len);
  int end = exec_retry(db, rc == SQLITE_OK ? "COMMIT" : "ROLLBACK");
  return rc != SQLITE_OK ? rc : end;
}

/*
 * Each step takes a file of ours from one user_version to a later one; a
 * step with create set then runs cache/schema.sql, which makes the current
 * schema.  Every step marks the file with our application_id.  Version 0
 * is an empty database or the pre-release (0.0.x) layout, whose rows
 * cannot be verified and were keyed by another encoding: dropped.  A
 * version with no step from it (a gap, a negative number) in a file that
 * is ours is a damaged one: it is moved aside and rebuilt.
 */
static const struct migration {
  int from, to;
  int create;
  const char *sql;
} migrations[] = {
  {0, CACHE_SCHEMA_VERSION, 1,
   "DROP TABLE IF EXISTS code_objects; DROP TABLE IF EXISTS counters;"},
  /* 0.1.0 -> 2: the lowered names of a module's entries. */
  {1, 2, 0, "ALTER TABLE code_objects ADD COLUMN entries TEXT NOT NULL "
            "DEFAULT ''"},
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
  int rc = sqlite3_exec(db, m->sql, NULL, NULL, NULL);
  if (rc == SQLITE_OK && m->create)
    rc = sqlite3_exec(db, tj__schema_sql, NULL, NULL, NULL);
  snprintf(sql, sizeof sql, "PRAGMA user_version = %d; PRAGMA application_id "
           "= %d", m->to, (int)TJ__CACHE_APP_ID);
  return rc == SQLITE_OK ? sqlite3_exec(db, sql, NULL, NULL, NULL) : rc;
}

#define MIGRATE_FOREIGN (-1) /* not an SQLite code: the file is not ours */

/* Bring the file to CACHE_SCHEMA_VERSION in one write transaction, which
 * asks again what the file is and reads the version again, so that racing
 * processes migrate it once and nothing but our own file is changed.
 * *version is where it ended; *gap says that no step led on. */
static int migrate(sqlite3 *db, int *version, int *gap, char *what, size_t len)
{
  enum identity id;
  int rc = exec_retry(db, "BEGIN IMMEDIATE");
  if (rc != SQLITE_OK)
    return rc;
  rc = identify(db, &id, version, what, len);
  if (rc == SQLITE_OK && id == ID_FOREIGN)
    rc = MIGRATE_FOREIGN;
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
     "SELECT code_size, CASE typeof(code) WHEN 'blob' THEN length(code) "
     "ELSE -1 END, code_hash, kernel, arch, platform, compiler, options, "
     "entries FROM code_objects WHERE key = ?1"},
    {offsetof(tj__cache, blob),
     "SELECT code FROM code_objects WHERE key = ?1 AND code_hash = ?2 AND "
     "length(code) = ?3"},
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
  sqlite3_finalize(c->blob);
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

const char *tj__cache_readonly_why(const tj__cache *c)
{
  if (__atomic_load_n(&c->broken, __ATOMIC_ACQUIRE))
    return c->broken_msg;
  if (__atomic_load_n(&c->nowrite, __ATOMIC_ACQUIRE))
    return c->nowrite_msg;
  if (c->found_readonly)
    return c->readonly_why;
  return c->readonly ? "it was opened with TJ_CACHE_READONLY" : "";
}

int tj__cache_exec(tj__cache *c, const char *sql)
{
  return exec_retry(c->db, sql);
}

int tj__cache_step(sqlite3_stmt *st)
{
  return step_retry(st);
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
  int fd = lock_take(path, flags, LOCK_EX, 1);
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

enum open_outcome {
  OPENED, UNUSABLE, CORRUPT, NEWER, VANISHED, TRANSIENT, FOREIGN
};

#define LEFT_ALONE "it was left as it is; give the cache another path " \
  "($TOKITAI_JIT_CACHE, --cache or tj_options.cache_path)"

static int open_flags(int readonly)
{
  int flags = SQLITE_OPEN_FULLMUTEX |
              (readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE);
#ifdef SQLITE_OPEN_NOFOLLOW
  flags |= SQLITE_OPEN_NOFOLLOW;
#endif
  return flags; /* never SQLITE_OPEN_CREATE: location.c made the file */
}

/* Open the connection on the file location.c judged, and note whether
 * SQLite could only open it read-only (a read-only file system or file).
 * Until the file is known to be ours, closing must not checkpoint into it.
 * SQLITE_CANTOPEN when the name no longer leads to the judged file. */
static int connect_db(tj__cache *c, const tj__location *loc)
{
  int rc = sqlite3_open_v2(c->path, &c->db, open_flags(c->readonly), NULL);
  if (rc != SQLITE_OK)
    return rc;
  sqlite3_busy_timeout(c->db, BUSY_TIMEOUT_MS);
  sqlite3_extended_result_codes(c->db, 1);
  sqlite3_db_config(c->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
  /* Never delete the WAL or shared memory by name at close: once the file
   * has been moved aside, that name belongs to its replacement. */
  int persist = 1;
  sqlite3_file_control(c->db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
  struct stat st;
  c->dev = loc->dev;
  c->ino = loc->ino;
  if (stat(c->path, &st) != 0 || st.st_dev != loc->dev || st.st_ino != loc->ino)
    return SQLITE_CANTOPEN;
  if (!c->readonly && sqlite3_db_readonly(c->db, "main") == 1) {
    c->readonly = c->found_readonly = 1;
    snprintf(c->readonly_why, sizeof c->readonly_why,
             "SQLite could open it only for reading");
  }
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

/* A file SQLite cannot read and that nothing shows to be ours. */
static void say_unreadable(const char *path, const char *why, char *msg,
                           size_t len)
{
  snprintf(msg, len, "cache %s cannot be read (%s), and nothing shows that it "
           "is a tokitai-jit cache, so %s; if it is one, remove it (rm '%s')",
           path, why, LEFT_ALONE, path);
}

/* Say why an open failed, and whether the file is to be moved aside. */
static enum open_outcome open_failed(tj__cache *c, int rc, int version,
                                     int gap, char *msg, size_t len)
{
  if (rc == MIGRATE_FOREIGN)
    return FOREIGN; /* try_open said what it is */
  if (gap) {
    snprintf(msg, len, "cache %s has schema version %d, which this library "
             "cannot migrate", c->path, version);
    return CORRUPT;
  }
  const char *why = c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc);
  snprintf(msg, len, "cache %s: %s", c->path, why);
  rc &= 0xff;
  if (rc == SQLITE_CANTOPEN)
    return VANISHED; /* moved aside and replaced by another process */
  /* SQLITE_ERROR here is a table without the columns we prepare against. */
  if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB || rc == SQLITE_ERROR) {
    if (c->ours)
      return CORRUPT;
    say_unreadable(c->path, why, msg, len);
    return FOREIGN;
  }
  /* Seen with 16 processes opening one new file at once: an I/O error from
   * the first WAL set-up that a second attempt does not meet. */
  if (rc == SQLITE_IOERR || rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
    return TRANSIENT;
  return UNUSABLE;
}

static void say_foreign(const char *path, const char *what, char *msg,
                        size_t len)
{
  snprintf(msg, len, "cache %s is not a tokitai-jit cache: it is %s; %s",
           path, what, LEFT_ALONE);
}

/* One attempt at opening c->path.  Nothing is written (not even the
 * journal mode) before the file is known to be ours, and a newer schema
 * of ours is left untouched too. */
static enum open_outcome try_open(tj__cache *c, const tj__location *loc,
                                  char *msg, size_t len)
{
  int version = 0, gap = 0;
  enum identity id = ID_FOREIGN;
  char what[512] = "";
  int rc = connect_db(c, loc);
  if (rc == SQLITE_OK && (rc = identify_at_once(c->db, &id, &version, what,
                                                sizeof what)) == SQLITE_OK) {
    if (id == ID_FOREIGN) {
      say_foreign(c->path, what, msg, len);
      return FOREIGN;
    }
    c->ours = 1;
  }
  if (rc == SQLITE_OK && version > CACHE_SCHEMA_VERSION) {
    snprintf(msg, len, "cache %s has schema version %d, newer than this "
             "library's (%d); running without a cache", c->path, version,
             CACHE_SCHEMA_VERSION);
    return NEWER;
  }
  if (rc == SQLITE_OK && !c->readonly) {
    rc = set_journal(c);
    if (rc == SQLITE_OK)
      rc = migrate(c->db, &version, &gap, what, sizeof what);
    if (rc == MIGRATE_FOREIGN)
      say_foreign(c->path, what, msg, len);
  }
  if (rc == SQLITE_OK && version != CACHE_SCHEMA_VERSION) {
    snprintf(msg, len, "cache %s has schema version %d and is read-only "
             "here, so it cannot be migrated; running without a cache",
             c->path, version);
    return UNUSABLE;
  }
  if (rc == SQLITE_OK)
    rc = prepare_statements(c);
  if (rc == SQLITE_OK) /* ours: let the last close fold the WAL in again */
    sqlite3_db_config(c->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, NULL);
  return rc == SQLITE_OK ? OPENED : open_failed(c, rc, version, gap, msg, len);
}

/*
 * A file whose header carries no mark is asked what it is on a read-only
 * connection first, which can change nothing in it (a read-write one would
 * roll back another program's hot journal).  TJ_OK: one of ours.
 * TJ_ECACHE: another program's, or unreadable (msg says).  PROBE_BUSY: busy
 * or an I/O error; worth another attempt.
 */
#define PROBE_BUSY 1
static int probe(const tj__location *loc, char *msg, size_t len)
{
  sqlite3 *db = NULL;
  enum identity id = ID_FOREIGN;
  int version = 0;
  char what[512] = "";
  int rc = sqlite3_open_v2(loc->path, &db, open_flags(1), NULL);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
    sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    rc = identify_at_once(db, &id, &version, what, sizeof what);
  }
  int prim = rc & 0xff, out = TJ_OK;
  if (prim == SQLITE_CORRUPT || prim == SQLITE_NOTADB) {
    say_unreadable(loc->path, sqlite3_errmsg(db), msg, len);
    out = TJ_ECACHE;
  } else if (rc != SQLITE_OK) {
    snprintf(msg, len, "cache %s: %s; running without a cache", loc->path,
             db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    out = PROBE_BUSY;
  } else if (id == ID_FOREIGN) {
    say_foreign(loc->path, what, msg, len);
    out = TJ_ECACHE;
  }
  sqlite3_close(db);
  return out;
}

/* Judge the file by its header: TJ_OK with *ours set, TJ_ECACHE for a file
 * that is not ours, PROBE_BUSY to try again. */
static int judge_file(const tj__location *loc, int *ours, char *msg,
                      size_t len)
{
  char what[160];
  *ours = loc->header == TJ__HEADER_OURS || loc->header == TJ__HEADER_EMPTY;
  switch (loc->header) {
  case TJ__HEADER_EMPTY:
  case TJ__HEADER_OURS:
    return TJ_OK;
  case TJ__HEADER_UNMARKED: {
    int rc = probe(loc, msg, len);
    *ours = rc == TJ_OK;
    return rc;
  }
  case TJ__HEADER_FOREIGN:
    snprintf(what, sizeof what, "an SQLite database of another application "
             "(application_id 0x%08x)", (unsigned)loc->appid);
    break;
  case TJ__HEADER_NOT_SQLITE:
    snprintf(what, sizeof what, "not an SQLite database");
    break;
  default:
    snprintf(msg, len, "cache %s cannot be read; running without a cache",
             loc->path);
    return PROBE_BUSY;
  }
  say_foreign(loc->path, what, msg, len);
  return TJ_ECACHE;
}

static void note_found_readonly(const tj__cache *c, char *msg, size_t len)
{
  size_t used = strlen(msg);
  snprintf(msg + used, len - used, "%scache %s cannot be written here (%s); "
           "using the code it holds and storing none", used ? "; " : "",
           c->path, c->readonly_why);
}

/* A judged location as an unopened handle: read-only from the start when
 * the file cannot be written. */
static tj__cache *cache_for(const tj__location *loc, unsigned flags, int ours)
{
  tj__cache *c = cache_new(loc->path, flags);
  if (!c)
    return NULL;
  c->ours = ours;
  if (!c->readonly && loc->readonly_why[0]) {
    c->readonly = c->found_readonly = 1;
    snprintf(c->readonly_why, sizeof c->readonly_why, "%s", loc->readonly_why);
  }
  return c;
}

/* One attempt: TJ_OK with *out or with *o saying what went wrong. */
static int open_once(const char *path, unsigned flags, tj__cache **out,
                     enum open_outcome *o, tj__cache *failed, char *msg,
                     size_t len)
{
  tj__location loc;
  int ours = 0;
  int rc = tj__location_open(path, flags, &loc, msg, len);
  if (rc != TJ_OK)
    return rc;
  rc = tj__location_check_side_files(&loc, flags, msg, len);
  if (rc == TJ_OK)
    rc = judge_file(&loc, &ours, msg, len);
  if (rc == TJ_OK && (flags & TJ_CACHE_READONLY) && access(loc.path, R_OK) != 0) {
    snprintf(msg, len, "cache %s cannot be read (%s); running without a "
             "cache", loc.path, strerror(errno));
    rc = TJ_ENOENT;
  }
  tj__cache *c = rc == TJ_OK ? cache_for(&loc, flags, ours) : NULL;
  if (rc == TJ_OK && !c)
    rc = TJ_ENOMEM;
  if (c) {
    int lock = lock_take(c->path, flags, LOCK_SH, ours);
    *o = try_open(c, &loc, msg, len);
    lock_release(lock);
    if (*o == OPENED)
      *out = c;
    else {
      failed->dev = c->dev;
      failed->ino = c->ino;
      failed->readonly = c->readonly;
      failed->ours = c->ours;
      failed->path = c->path;
      c->path = NULL;
      cache_free(c);
    }
  }
  tj__location_free(&loc);
  return rc;
}

int tj__cache_open(const char *path, unsigned flags, tj__cache **out,
                   char *msg, size_t msglen)
{
  *out = NULL;
  msg[0] = '\0';
  int probes = 0;
  for (int attempt = 0; attempt < OPEN_ATTEMPTS; attempt++) {
    enum open_outcome o = UNUSABLE;
    tj__cache failed = {0};
    int rc = open_once(path, flags, out, &o, &failed, msg, msglen);
    /* A file another process is making is in WAL mode with its mark still
     * in the WAL, so it is probed read-only, and under load that probe can
     * fail ("disk I/O error", check_reliability's fresh-cache race in the
     * sanitizer build): try it for about 1 s before giving up. */
    if (rc == PROBE_BUSY && ++probes < PROBE_ATTEMPTS) {
      sleep_ms(probes < 4 ? 25L * probes : 100L);
      attempt--;
      continue;
    }
    if (rc == TJ_EPERM || rc == TJ_ECACHE || rc == TJ_ENOMEM)
      return rc;
    if (rc != TJ_OK)
      return TJ_OK; /* nowhere to write, or nothing to read: msg says why */
    if (*out) {
      if ((*out)->found_readonly)
        note_found_readonly(*out, msg, msglen);
      return TJ_OK;
    }
    int moved = 0;
    if (o == CORRUPT && failed.ours && !failed.readonly)
      moved = move_aside(failed.path, flags, failed.dev, failed.ino, msg, msglen);
    free(failed.path);
    if (o == FOREIGN)
      return TJ_ECACHE;
    if (o == VANISHED || moved)
      continue;
    if (o == TRANSIENT && attempt + 1 < OPEN_ATTEMPTS) {
      sleep_ms(25L * (attempt + 1));
      continue;
    }
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

const char *tj__cache_drop_reason(int dropped)
{
  switch (dropped) {
  case TJ__DROP_HASH: return "failed its hash check";
  case TJ__DROP_IDENTITY: return "was stored for another kernel, arch, "
                                 "platform, compiler or options";
  case TJ__DROP_SIZE: return "is larger than TJ_CACHE_MAX_CODE_BYTES";
  default: return "was not dropped";
  }
}

static int column_is(sqlite3_stmt *st, int col, const char *want)
{
  const unsigned char *t = sqlite3_column_text(st, col);
  return t && want && strcmp((const char *)t, want) == 0;
}

/* Judge the row c->get stepped to, before its blob is read: what the
 * request was, and a size within bounds.  0, or a TJ__DROP_* reason.
 * *stored gets a copy of the stored hash, *n the blob's length. */
static int judge_row(sqlite3_stmt *st, const tj__cache_row *want,
                     char **stored, sqlite3_int64 *n)
{
  sqlite3_int64 declared = sqlite3_column_int64(st, 0);
  const unsigned char *h = sqlite3_column_text(st, 2);
  *n = sqlite3_column_int64(st, 1);
  *stored = h ? strdup((const char *)h) : NULL;
  /* A module's row names the entries of whichever request stored it, and
   * C names are not part of its key (they change no code): its kernel
   * column is not compared (want->kernel NULL); its entries are checked
   * against the code's symbols instead (user.c). */
  if ((want->kernel && !column_is(st, 3, want->kernel)) ||
      !column_is(st, 4, want->arch) ||
      !column_is(st, 5, want->platform) || !column_is(st, 6, want->compiler) ||
      !column_is(st, 7, want->options))
    return TJ__DROP_IDENTITY;
  if (*n > (sqlite3_int64)TJ_CACHE_MAX_CODE_BYTES ||
      declared > (sqlite3_int64)TJ_CACHE_MAX_CODE_BYTES)
    return TJ__DROP_SIZE;
  if (!h || *n <= 0 || declared != *n)
    return TJ__DROP_HASH;
  return 0;
}

/* The blob of the judged row, if it is still that row and whole. */
static int take_blob(tj__cache *c, const char *key, const char *stored,
                     sqlite3_int64 n, void **code, size_t *size, int *dropped)
{
  char hash[TJ__KEY_HEX];
  int rc = TJ_ENOENT;
  sqlite3_bind_text(c->blob, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_text(c->blob, 2, stored, -1, SQLITE_STATIC);
  sqlite3_bind_int64(c->blob, 3, n);
  int step = step_retry(c->blob);
  if (step == SQLITE_ROW) {
    const void *blob = sqlite3_column_blob(c->blob, 0);
    if (!blob || sqlite3_column_bytes(c->blob, 0) != n) {
      *dropped = TJ__DROP_HASH;
    } else {
      tj__hash_hex(blob, (size_t)n, hash);
      if (strcmp(hash, stored) != 0)
        *dropped = TJ__DROP_HASH;
      else if (!(*code = malloc((size_t)n)))
        rc = TJ_ENOMEM;
      else {
        memcpy(*code, blob, (size_t)n);
        *size = (size_t)n;
        rc = TJ_OK;
      }
    }
  }
  sqlite3_reset(c->blob);
  sqlite3_clear_bindings(c->blob);
  if (step != SQLITE_ROW && step != SQLITE_DONE && !is_busy(step))
    rc = cache_failed(c, step, 1);
  return rc;
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

int tj__cache_get(tj__cache *c, const tj__cache_row *want, void **code,
                  size_t *size, int *dropped)
{
  return tj__cache_get_entries(c, want, code, size, dropped, NULL);
}

/* The row's entries column, malloc'd, when asked for; NULL otherwise. */
static int copy_entries(sqlite3_stmt *st, char **entries)
{
  const unsigned char *e = sqlite3_column_text(st, 8);
  if (!entries)
    return TJ_OK;
  *entries = strdup(e ? (const char *)e : "");
  return *entries ? TJ_OK : TJ_ENOMEM;
}

int tj__cache_get_entries(tj__cache *c, const tj__cache_row *want,
                          void **code, size_t *size, int *dropped,
                          char **entries)
{
  int rc = TJ_ENOENT;
  char *stored = NULL, *row_entries = NULL;
  sqlite3_int64 n = 0;
  *dropped = 0;
  pthread_mutex_lock(&c->lock);
  if (c->broken) {
    pthread_mutex_unlock(&c->lock);
    return TJ_ENOENT;
  }
  sqlite3_bind_text(c->get, 1, want->key, -1, SQLITE_STATIC);
  int step = step_retry(c->get);
  int copied = TJ_OK;
  if (step == SQLITE_ROW &&
      !(*dropped = judge_row(c->get, want, &stored, &n)))
    copied = copy_entries(c->get, entries ? &row_entries : NULL);
  sqlite3_reset(c->get);
  sqlite3_clear_bindings(c->get);
  if (step != SQLITE_ROW && step != SQLITE_DONE && !is_busy(step))
    rc = cache_failed(c, step, 1);
  if (step == SQLITE_ROW && !*dropped)
    rc = copied != TJ_OK ? copied
                         : take_blob(c, want->key, stored, n, code, size, dropped);
  if (*dropped && rc != TJ_ECACHE)
    rc = *dropped != TJ__DROP_HASH || file_is_whole(c)
             ? drop_row(c, want->key, stored)
             : cache_failed(c, SQLITE_CORRUPT, 1);
  pthread_mutex_unlock(&c->lock);
  free(stored);
  if (rc == TJ_OK && entries)
    *entries = row_entries;
  else
    free(row_entries);
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
  if (c->readonly || r->code_size > TJ_CACHE_MAX_CODE_BYTES)
    return TJ_OK; /* one that large would never be loaded */
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
