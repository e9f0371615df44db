/*
 * open.c: the cache handle: opening a file (moving a damaged one aside
 * through handle.c, which also gives a file up when it fails under us) and
 * closing it.
 *
 * One file shared by any number of processes: WAL journal (a rollback
 * journal on network file systems), a busy timeout plus the retry path of
 * sql.c for the cases SQLite does not wait on.  A location other users can
 * write is refused (location.c): whoever writes the cache chooses the code
 * that runs on our GPU.
 *
 * A file is changed only once it is shown to be ours (schema.c); anything
 * else is refused with TJ_ECACHE and left as it was.  Otherwise a cache
 * must never stop a program: a damaged file of ours is moved aside and
 * replaced, one that fails under us (damaged, disk full, I/O errors) is
 * given up for the rest of the connection, and each of those is reported
 * once.  cache/README.md says why each choice is safe for the other
 * processes that have the file open.
 */
#include "cache_internal.h"
#include "codestore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BUSY_TIMEOUT_MS 5000
#define OPEN_ATTEMPTS 4      /* a file may vanish or be replaced under us */
#define PROBE_ATTEMPTS 12    /* about 1 s of a busy read-only probe */
#define WAL_LIMIT_BYTES 4194304 /* the WAL is cut back to this after a reset */
#define WAL_AUTOCHECKPOINT 1000 /* frames: SQLite's own default */
/* The last close folds the WAL into the file when this connection wrote
 * anything but hit counts, and otherwise only once the WAL holds this
 * many frames.  A process that only hit adds two (its hit counts), so one
 * in four folds it in.  A close that checkpoints pays an fsync of the WAL
 * and of the file, and the next write an fsync of a new WAL header:
 * milliseconds, where the rest of a warm start is a fraction of one.  But
 * the next process to open the file reads every frame back and checksums
 * it (SQLite rebuilds the WAL index from the WAL): about 5,000
 * instructions and a read a frame, so the WAL is kept short. */
#define CLOSE_CHECKPOINT_FRAMES 8

/* ------------------------------------------------------- the handle */

const char *const tj__cache_phase_names[TJ__CACHE_PHASES] = {
  "location", "sqlite-open", "identify", "journal", "create", "prepare"
};

static double ms_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Add the time since *t to phase p, and restart *t. */
static void phase_done(tj__cache *c, int p, double *t)
{
  double now = ms_now();
  c->phase_ms[p] += now - *t;
  *t = now;
}

void tj__cache_open_phases(const tj__cache *c, double ms[TJ__CACHE_PHASES])
{
  for (int i = 0; i < TJ__CACHE_PHASES; i++)
    ms[i] = c ? c->phase_ms[i] : 0;
}

static tj__cache *cache_new(const char *path, unsigned flags)
{
  tj__cache *c = calloc(1, sizeof *c);
  if (c && !(c->path = strdup(path))) {
    free(c);
    return NULL;
  }
  if (c) {
    pthread_mutexattr_t recursive;
    pthread_mutexattr_init(&recursive);
    pthread_mutexattr_settype(&recursive, PTHREAD_MUTEX_RECURSIVE);
    c->flags = flags;
    c->readonly = (flags & TJ_CACHE_READONLY) != 0;
    pthread_mutex_init(&c->lock, &recursive);
    pthread_mutexattr_destroy(&recursive);
  }
  return c;
}

static void cache_free(tj__cache *c)
{
  if (!c)
    return;
  tj__rows_finalize(c);
  /* Ours and opened: the last connection to close folds the WAL in,
   * unless it holds no more than a few processes' hit counts.  SQLite
   * checkpoints at close only when no other connection has the file open
   * (another process, or another runtime of this one), and the one that
   * closes last may have written nothing: so a connection that wrote
   * copies the WAL into the file itself first.  Passive: it waits for
   * nobody.  An immutable reader (a system cache, a merge's source) sees
   * only the file. */
  if (c->opened && (c->wrote || c->wal_frames >= CLOSE_CHECKPOINT_FRAMES)) {
    sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL,
                              NULL);
    sqlite3_db_config(c->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, NULL);
  }
  sqlite3_close_v2(c->db);
  if (c->held)
    tj__location_hold(c->dev, c->ino, -1);
  tj__codestore_close(c->store);
  pthread_mutex_destroy(&c->lock);
  free(c->path);
  free(c);
}

void tj__cache_close(tj__cache *c)
{
  cache_free(c);
}

/* ------------------------------------------------------- opening */

enum open_outcome {
  OPENED, UNUSABLE, CORRUPT, OTHER_VERSION, VANISHED, TRANSIENT, FOREIGN
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

/* SQLite's autocheckpoint, which this hook replaces, and a note of the
 * WAL's length for the close (CLOSE_CHECKPOINT_FRAMES). */
static int wal_hook(void *ctx, sqlite3 *db, const char *name, int frames)
{
  tj__cache *c = ctx;
  __atomic_store_n(&c->wal_frames, frames, __ATOMIC_RELAXED);
  if (!c->recording_usage)
    __atomic_store_n(&c->wrote, 1, __ATOMIC_RELAXED);
  if (frames >= WAL_AUTOCHECKPOINT)
    sqlite3_wal_checkpoint(db, name);
  return SQLITE_OK;
}

/* Open the connection on the file location.c judged, and note whether
 * SQLite could only open it read-only (a read-only file system or file).
 * Until the file is known to be ours, closing must not checkpoint into it.
 * SQLITE_CANTOPEN when the name no longer leads to the judged file. */
static int connect_db(tj__cache *c, const tj__location *loc)
{
  tj__location_hold(loc->dev, loc->ino, 1);
  c->held = 1;
  c->dev = loc->dev;
  c->ino = loc->ino;
  int rc = sqlite3_open_v2(c->path, &c->db, open_flags(c->readonly), NULL);
  if (rc != SQLITE_OK)
    return rc;
  sqlite3_busy_timeout(c->db, BUSY_TIMEOUT_MS);
  sqlite3_extended_result_codes(c->db, 1);
  sqlite3_db_config(c->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
  sqlite3_wal_hook(c->db, wal_hook, c);
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

/* WAL, or a rollback journal on a network file system.  The mode is kept
 * in the file, so a file whose header already says it (the warm start) is
 * not asked again: setting it has this connection read the schema twice. */
static int set_journal_mode(tj__cache *c, const tj__location *loc, int always)
{
  int network = tj__location_is_network(c->path);
  if (!always && loc->wal == !network)
    return SQLITE_OK;
  return tj__sql_exec(c->db, network ? "PRAGMA journal_mode = DELETE"
                                     : "PRAGMA journal_mode = WAL");
}

/* The connection's own settings, which the file does not keep; run once
 * the statements have read the schema (synchronous needs it). */
static int set_sync(tj__cache *c)
{
  char sql[96];
  snprintf(sql, sizeof sql, "PRAGMA synchronous = NORMAL; "
           "PRAGMA journal_size_limit = %d", WAL_LIMIT_BYTES);
  return tj__sql_exec(c->db, sql);
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
static enum open_outcome open_failed(tj__cache *c, int rc, char *msg,
                                     size_t len)
{
  if (rc == TJ__SCHEMA_FOREIGN)
    return FOREIGN; /* try_open said what it is */
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

/* A file of ours at another schema version: left as it is.  One from an
 * earlier build is never read; removing it starts a new cache. */
static enum open_outcome other_version(const tj__cache *c, int version,
                                       char *msg, size_t len)
{
  if (version > CACHE_SCHEMA_VERSION)
    snprintf(msg, len, "cache %s has schema version %d, newer than this "
             "library's (%d); it was left as it is; running without a cache",
             c->path, version, CACHE_SCHEMA_VERSION);
  else
    snprintf(msg, len, "cache %s has schema version %d, which this library "
             "(schema %d) does not read; it was left as it is: remove it "
             "(rm '%s') to start a new cache; running without a cache",
             c->path, version, CACHE_SCHEMA_VERSION, c->path);
  return OTHER_VERSION;
}

/* One attempt at opening c->path.  Nothing is written (not even the
 * journal mode) before the file is known to be ours, and a file of ours
 * at another schema version is left untouched too. */
static enum open_outcome try_open(tj__cache *c, const tj__location *loc,
                                  char *msg, size_t len)
{
  int version = 0;
  enum tj__identity id = TJ__ID_FOREIGN;
  char what[512] = "";
  double t = ms_now();
  int rc = connect_db(c, loc);
  phase_done(c, TJ__CACHE_PHASE_CONNECT, &t);
  if (rc == SQLITE_OK)
    rc = tj__schema_identify(c->db, &id, &version, what, sizeof what);
  phase_done(c, TJ__CACHE_PHASE_IDENTIFY, &t);
  if (rc == SQLITE_OK) {
    if (id == TJ__ID_FOREIGN) {
      say_foreign(c->path, what, msg, len);
      return FOREIGN;
    }
    c->ours = 1;
  }
  if (rc == SQLITE_OK && id == TJ__ID_OURS && version != CACHE_SCHEMA_VERSION)
    return other_version(c, version, msg, len);
  /* A file of ours (the warm start) has no schema to make: the write
   * transaction that would check is skipped. */
  int current = id == TJ__ID_OURS;
  if (rc == SQLITE_OK && !c->readonly && !current) {
    rc = set_journal_mode(c, loc, 1);
    phase_done(c, TJ__CACHE_PHASE_JOURNAL, &t);
    if (rc == SQLITE_OK)
      rc = tj__schema_create(c->db, &version, what, sizeof what);
    phase_done(c, TJ__CACHE_PHASE_CREATE, &t);
    if (rc == TJ__SCHEMA_FOREIGN)
      say_foreign(c->path, what, msg, len);
    else if (rc == SQLITE_OK && version != CACHE_SCHEMA_VERSION)
      return other_version(c, version, msg, len);
  }
  if (rc == SQLITE_OK && !current && c->readonly) {
    snprintf(msg, len, "cache %s is empty and read-only here; running "
             "without a cache", c->path);
    return UNUSABLE;
  }
  if (rc == SQLITE_OK)
    rc = tj__rows_prepare(c);
  phase_done(c, TJ__CACHE_PHASE_PREPARE, &t);
  if (rc == SQLITE_OK && !c->readonly && current)
    rc = set_journal_mode(c, loc, 0);
  if (rc == SQLITE_OK && !c->readonly)
    rc = set_sync(c);
  phase_done(c, TJ__CACHE_PHASE_JOURNAL, &t);
  if (rc != SQLITE_OK)
    return open_failed(c, rc, msg, len);
  c->opened = 1; /* ours: the last close may fold the WAL in again */
  return OPENED;
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
  enum tj__identity id = TJ__ID_FOREIGN;
  int version = 0;
  char what[512] = "";
  tj__location_hold(loc->dev, loc->ino, 1);
  int rc = sqlite3_open_v2(loc->path, &db, open_flags(1), NULL);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
    sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    rc = tj__schema_identify(db, &id, &version, what, sizeof what);
  }
  int prim = rc & 0xff, out = TJ_OK;
  if (prim == SQLITE_CORRUPT || prim == SQLITE_NOTADB) {
    say_unreadable(loc->path, sqlite3_errmsg(db), msg, len);
    out = TJ_ECACHE;
  } else if (rc != SQLITE_OK) {
    snprintf(msg, len, "cache %s: %s; running without a cache", loc->path,
             db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    out = PROBE_BUSY;
  } else if (id == TJ__ID_FOREIGN) {
    say_foreign(loc->path, what, msg, len);
    out = TJ_ECACHE;
  }
  sqlite3_close(db);
  tj__location_hold(loc->dev, loc->ino, -1);
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

/* The code directory of a file opened for writing, made when absent.  A
 * refused one is said and not used: warm starts then read SQLite. */
static void open_store(tj__cache *c, const tj__location *loc, char *msg,
                       size_t len)
{
  char why[512] = "";
  int rc = tj__codestore_open(loc->dirfd, loc->dir, loc->name, c->flags, 1,
                              &c->store, why, sizeof why);
  size_t used = strlen(msg);
  if (rc != TJ_OK && rc != TJ_ENOENT && why[0])
    snprintf(msg + used, len - used, "%s%s; code is read from the SQLite file "
             "alone", used ? "; " : "", why);
}

/* One attempt: TJ_OK with *out or with *o saying what went wrong. */
static int open_once(const char *path, unsigned flags, tj__cache **out,
                     enum open_outcome *o, tj__cache *failed, char *msg,
                     size_t len)
{
  tj__location loc;
  int ours = 0;
  double t0 = ms_now();
  int rc = tj__location_open(path, flags, &loc, msg, len);
  if (rc != TJ_OK)
    return rc;
  rc = tj__location_check_side_files(&loc, flags, msg, len);
  /* A new (empty) file is set up by one process at a time: two that turn
   * on WAL and create the tables at once can meet an I/O error (SQLite's
   * IOERR_DELETE_NOENT, seen with 4 processes x 2 threads under ASan), and
   * one that judges a file while another sets it up can see it half made.
   * The others wait for the maker, shared, before they judge. */
  int fresh = loc.header == TJ__HEADER_EMPTY;
  int lock = rc == TJ_OK ? tj__location_lock(loc.path, flags, fresh ? LOCK_EX : LOCK_SH,
                                             fresh || loc.header == TJ__HEADER_OURS)
                         : -1;
  /* The header was read before the lock: a file that was being made then
   * is whole now. */
  int replaced = rc == TJ_OK && !fresh && loc.header != TJ__HEADER_OURS &&
                 tj__location_reread_header(&loc) != 0;
  /* Replaced since it was judged: moved aside by another process, whose
   * new file the header may even have been read from (the read goes by
   * name, after the stat).  Judge the new one: a stale verdict of "not an
   * SQLite database" here refused a good cache as foreign (4 processes
   * racing on one corrupt file, 1 in 40 of them). */
  if (replaced) {
    *o = VANISHED;
    tj__location_unlock(lock);
    tj__location_free(&loc);
    return TJ_OK;
  }
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
    c->phase_ms[TJ__CACHE_PHASE_LOCATION] = ms_now() - t0;
    *o = try_open(c, &loc, msg, len);
    if (*o == OPENED && !c->readonly)
      open_store(c, &loc, msg, len);
    else if (*o == OPENED) { /* only to read the hits noted there */
      char quiet[512];
      tj__codestore_open(loc.dirfd, loc.dir, loc.name,
                         c->flags | TJ_CACHE_READONLY, 0, &c->store, quiet,
                         sizeof quiet);
    }
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
  tj__location_unlock(lock);
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
      tj__sql_sleep_ms(probes < 4 ? 25L * probes : 100L);
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
      tj__rows_fold_hits(*out);
      return TJ_OK;
    }
    int moved = 0;
    if (o == CORRUPT && failed.ours && !failed.readonly)
      moved = tj__cache_move_aside(failed.path, flags, failed.dev, failed.ino,
                                   msg, msglen);
    free(failed.path);
    if (o == FOREIGN)
      return TJ_ECACHE;
    if (o == VANISHED || moved)
      continue;
    if (o == TRANSIENT && attempt + 1 < OPEN_ATTEMPTS) {
      tj__sql_sleep_ms(25L * (attempt + 1));
      continue;
    }
    return TJ_OK;
  }
  return TJ_OK;
}

/* ------------------------------------------------------- warm starts */

int tj__cache_open_code(const char *path, unsigned flags, tj__codestore **store,
                        char *resolved, size_t rlen)
{
  tj__location loc;
  char msg[1024];
  *store = NULL;
  if (tj__location_open(path, flags | TJ__LOCATION_QUICK, &loc, msg,
                        sizeof msg) != TJ_OK)
    return TJ_ENOENT;
  int rc = TJ_ENOENT;
  /* Our mark on the file: anything else is the whole open's to judge. */
  if (loc.header == TJ__HEADER_OURS &&
      tj__codestore_open(loc.dirfd, loc.dir, loc.name, flags, 0, store, msg,
                         sizeof msg) == TJ_OK) {
    snprintf(resolved, rlen, "%s", loc.path);
    rc = TJ_OK;
  }
  tj__location_free(&loc);
  return rc;
}

/* ------------------------------------------------------- system caches */

/* path as an SQLite URI that opens it immutable: read-only, without locks
 * and without looking for a -wal or -shm (a system cache sits in a
 * directory we may not write, and nothing writes it while it is read).
 * malloc'd; NULL when out of memory. */
static char *immutable_uri(const char *path)
{
  static const char hex[] = "0123456789ABCDEF";
  size_t n = strlen(path);
  char *uri = malloc(3 * n + sizeof "file:?immutable=1"), *o = uri;
  if (!uri)
    return NULL;
  o += sprintf(o, "file:");
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
        (*p >= '0' && *p <= '9') || strchr("/-._~", *p)) {
      *o++ = (char)*p;
    } else {
      *o++ = '%';
      *o++ = hex[*p >> 4];
      *o++ = hex[*p & 15];
    }
  }
  strcpy(o, "?immutable=1");
  return uri;
}

static const char *header_problem(int header)
{
  switch (header) {
  case TJ__HEADER_EMPTY: return "it is empty";
  case TJ__HEADER_UNMARKED: return "it carries no tokitai-jit mark "
                                   "(application_id)";
  case TJ__HEADER_FOREIGN: return "it is an SQLite database of another "
                                  "application";
  case TJ__HEADER_NOT_SQLITE: return "it is not an SQLite database";
  default: return "its header cannot be read";
  }
}

/* A file the library did not make is read with a bound on each
 * statement's work: past SYSTEM_MAX_PROGRESS calls of the progress
 * handler (each SYSTEM_PROGRESS_OPS virtual-machine steps) the statement
 * is interrupted, so that no schema trick the checks below miss can make a
 * read endless.  A thread steps one statement of such a file at a time
 * (a merge writes another file meanwhile, which has no handler). */
#define SYSTEM_PROGRESS_OPS 1000
#define SYSTEM_MAX_PROGRESS 2000000UL
static __thread unsigned long system_progress;

static int system_trace(unsigned type, void *ctx, void *p, void *x)
{
  (void)type, (void)ctx, (void)p, (void)x;
  system_progress = 0; /* a statement begins */
  return 0;
}

static int system_progress_handler(void *ctx)
{
  (void)ctx;
  return ++system_progress > SYSTEM_MAX_PROGRESS;
}

/* Only real tables: a view named as one of ours is a query of the file's
 * choosing (an endless recursive one, say), and so is a virtual table. */
static int only_tables(sqlite3 *db, char *what, size_t len)
{
  int64_t n = 0;
  int rc = tj__sql_int64(db, "SELECT count(*) FROM sqlite_master WHERE "
                         "type = 'view' OR (type = 'table' AND "
                         "sql LIKE 'CREATE VIRTUAL%')", &n);
  if (rc == SQLITE_OK && n > 0)
    snprintf(what, len, "it has views or virtual tables, which the library "
             "never makes");
  return rc != SQLITE_OK ? rc : n > 0 ? SQLITE_CORRUPT : SQLITE_OK;
}

/* What a file the library did not make passes before it is read: the
 * bound on each statement's work, ours, only tables, at a schema this
 * library reads.  TJ_OK, or TJ_ECACHE with msg set. */
static int judge_system_db(tj__cache *c, char *msg, size_t len)
{
  enum tj__identity id = TJ__ID_FOREIGN;
  int version = 0;
  char what[512] = "";
  sqlite3_trace_v2(c->db, SQLITE_TRACE_STMT, system_trace, NULL);
  sqlite3_progress_handler(c->db, SYSTEM_PROGRESS_OPS,
                           system_progress_handler, NULL);
  int rc = tj__schema_identify(c->db, &id, &version, what, sizeof what);
  if (rc == SQLITE_OK && id != TJ__ID_OURS) {
    snprintf(msg, len, "system cache %s is not a tokitai-jit cache%s%s; "
             "skipped", c->path, what[0] ? ": it is " : "", what);
    return TJ_ECACHE;
  }
  if (rc == SQLITE_OK && only_tables(c->db, what, sizeof what) != SQLITE_OK) {
    snprintf(msg, len, "system cache %s is not a tokitai-jit cache%s%s; "
             "skipped", c->path, what[0] ? ": " : "", what);
    return TJ_ECACHE;
  }
  if (rc == SQLITE_OK && version != CACHE_SCHEMA_VERSION) {
    snprintf(msg, len, "system cache %s has schema version %d, which this "
             "library (schema %d) cannot read; skipped", c->path, version,
             CACHE_SCHEMA_VERSION);
    return TJ_ECACHE;
  }
  if (rc != SQLITE_OK) {
    snprintf(msg, len, "system cache %s cannot be read (%s); skipped",
             c->path, sqlite3_errmsg(c->db));
    return TJ_ECACHE;
  }
  return TJ_OK;
}

/* Connect c to the judged file, immutable, and ask what it is
 * (judge_system_db).  TJ_OK, or TJ_ECACHE with msg set. */
static int connect_system(tj__cache *c, const tj__location *loc, char *msg,
                          size_t len)
{
  char *uri = immutable_uri(c->path);
  int rc = uri ? sqlite3_open_v2(uri, &c->db, open_flags(1) | SQLITE_OPEN_URI,
                                 NULL)
               : SQLITE_NOMEM;
  free(uri);
  struct stat st;
  if (rc == SQLITE_OK) {
    sqlite3_extended_result_codes(c->db, 1);
    c->dev = loc->dev;
    c->ino = loc->ino;
    if (stat(c->path, &st) != 0 || st.st_dev != loc->dev ||
        st.st_ino != loc->ino)
      rc = SQLITE_CANTOPEN; /* replaced since it was judged */
  }
  if (rc == SQLITE_OK) {
    int judged = judge_system_db(c, msg, len);
    if (judged != TJ_OK)
      return judged;
    rc = tj__rows_prepare(c);
  }
  if (rc != SQLITE_OK) {
    snprintf(msg, len, "system cache %s cannot be read (%s); skipped",
             c->path, c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
    return TJ_ECACHE;
  }
  return TJ_OK;
}

int tj__cache_open_system(const char *path, tj__cache **out, dev_t *dev,
                          ino_t *ino, char *msg, size_t msglen)
{
  tj__location loc;
  *out = NULL;
  int rc = tj__location_open_system(path, &loc, msg, msglen);
  if (rc != TJ_OK)
    return rc == TJ_EIO ? TJ_ECACHE : rc;
  if (loc.header != TJ__HEADER_OURS) {
    snprintf(msg, msglen, "system cache %s is not a tokitai-jit cache: %s; "
             "skipped", loc.path, header_problem(loc.header));
    tj__location_free(&loc);
    return TJ_ECACHE;
  }
  tj__cache *c = cache_new(loc.path, TJ_CACHE_READONLY);
  if (!c) {
    tj__location_free(&loc);
    return TJ_ENOMEM;
  }
  c->ours = 1;
  c->found_readonly = 1;
  snprintf(c->readonly_why, sizeof c->readonly_why, "%s", loc.readonly_why);
  rc = connect_system(c, &loc, msg, msglen);
  if (rc == TJ_OK) {
    if (dev)
      *dev = loc.dev;
    if (ino)
      *ino = loc.ino;
    *out = c;
  } else {
    cache_free(c);
  }
  tj__location_free(&loc);
  return rc;
}

/* Whether the -wal beside path is there and not empty: it may hold rows
 * the file itself lacks (a writer's, not yet copied in), which an
 * immutable open never reads.  Anything but "absent" or "an empty file"
 * counts. */
static int wal_in_use(const char *path)
{
  size_t n = strlen(path) + sizeof "-wal";
  char *wal = malloc(n);
  struct stat st;
  if (!wal)
    return 1;
  snprintf(wal, n, "%s-wal", path);
  int used = lstat(wal, &st) == 0 ? !S_ISREG(st.st_mode) || st.st_size > 0
                                  : errno != ENOENT;
  free(wal);
  return used;
}

/* sys's file again, through its -wal: opened as a per-user cache is read
 * (its side files judged, SQLite's locks taken), then judged as a system
 * cache is.  TJ_OK with *out, else TJ_ECACHE or TJ_ENOMEM, msg says. */
static int open_through_wal(const tj__cache *sys, tj__cache **out, char *msg,
                            size_t len)
{
  char why[1024] = "";
  dev_t dev;
  ino_t ino;
  tj__cache *live = NULL;
  int rc = tj__cache_open(sys->path, TJ_CACHE_READONLY, &live, why,
                          sizeof why);
  if (rc == TJ_OK && live) {
    tj__cache_identity(live, &dev, &ino);
    if (dev != sys->dev || ino != sys->ino)
      snprintf(why, sizeof why, "it was replaced while it was opened");
    else if ((rc = judge_system_db(live, msg, len)) == TJ_OK) {
      *out = live;
      return TJ_OK;
    }
  }
  cache_free(live);
  if (rc == TJ_ENOMEM || (rc != TJ_OK && msg[0]))
    return rc == TJ_ENOMEM ? TJ_ENOMEM : TJ_ECACHE;
  snprintf(msg, len, "cache %s has a -wal beside it, which may hold rows "
           "the file itself lacks, and it cannot be read through it (%s); "
           "fold the -wal into the file first, as the file's owner: "
           "sqlite3 %s 'PRAGMA wal_checkpoint(TRUNCATE)'", sys->path,
           why[0] ? why : "it could not be opened",
           sys->path);
  return TJ_ECACHE;
}

int tj__cache_open_source(const char *path, tj__cache **out, char *msg,
                          size_t msglen)
{
  int rc = tj__cache_open_system(path, out, NULL, NULL, msg, msglen);
  if (rc != TJ_OK || !wal_in_use((*out)->path))
    return rc;
  tj__cache *sys = *out;
  *out = NULL;
  msg[0] = '\0';
  rc = open_through_wal(sys, out, msg, msglen);
  cache_free(sys);
  return rc;
}

void tj__cache_identity(const tj__cache *c, dev_t *dev, ino_t *ino)
{
  *dev = c->dev;
  *ino = c->ino;
}
