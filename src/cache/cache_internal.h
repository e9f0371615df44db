/*
 * cache_internal.h: what the files of src/cache say to each other.  Only
 * they include it; the rest of the library reaches the cache through the
 * tj__cache_* calls in cache_api.h, and callers through tj_cache_*.  No
 * SQLite handle, statement or lock leaves this module.
 *
 *   location.c  where the cache lives, whether it is safe, its lock file
 *   sql.c       the one way a statement is prepared, run and retried
 *   schema.c    what a file is (application_id, version); a new file's schema
 *   handle.c    a handle's state; giving a file up, moving it aside
 *   open.c      the handle: opening and closing it
 *   rows.c      the load and store path: get, put, usage, the blob check
 *   resources.c each entry's resources, read from the code, stored beside
 *   tuning.c    tuning decisions: read, store, list, check
 *   evict.c     eviction by age and by size
 *   scan.c      the narrow reads and writes behind tj_cache_*
 *   admin.c     the public tj_cache_* API
 *   layers.c    the lookup chain: per-user, system caches, remote (layers.h)
 *   merge.c     copying the rows of one file into another (tj_cache_merge)
 *   record.c    a row as a self-describing byte string (record.h)
 *   codestore.c the code directory a warm start reads (codestore.h)
 */
#ifndef TJ_CACHE_INTERNAL_H
#define TJ_CACHE_INTERNAL_H

#include "cache_api.h"

#include <pthread.h>
#include <sqlite3.h>
#include <string.h>

#define CACHE_SCHEMA_VERSION 4
/* The installed system cache (layers.c); Makefile.am sets it from
 * $(pkgdatadir). */
#ifndef TJ__SYSTEM_CACHE_DEFAULT
#define TJ__SYSTEM_CACHE_DEFAULT "/usr/local/share/tokitai-jit/system.db"
#endif
struct tj__cache {
  sqlite3 *db;
  char *path;
  unsigned flags;
  int readonly; /* opened read-only, or found read-only */
  int found_readonly;
  int nowrite; /* a write failed (disk full, I/O): store nothing more */
  int ours;    /* shown to be a tokitai-jit cache: may be moved aside */
  int opened;  /* ours, and opened: a close may checkpoint into it */
  int wal_frames; /* the WAL's length after this connection's last commit */
  int wrote;   /* committed more than hit counts (open.c, wal_hook) */
  int recording_usage; /* the commit under way is only hit counts */
  int inputs_table; /* this connection made sure key_inputs exists */
  char readonly_why[128];
  int broken; /* the file failed under us: read nothing more */
  int held;   /* registered with tj__location_hold */
  dev_t dev;  /* the file this connection has open, to move aside */
  ino_t ino;  /* only that one and never its replacement */
  char nowrite_msg[512], broken_msg[512]; /* each written once */
  char error[256]; /* SQLite's message at the last failure, kept past the
                      rollback that follows it */
  /* Recursive: statements are shared by the runtime's threads, and a
   * tj_cache visit callback may call back into the handle mid-scan. */
  pthread_mutex_t lock;
  sqlite3_stmt *get, *put, *drop, *use, *miss, *idle, *resources;
  /* The code directory beside a per-user file opened for writing: every
   * row stored gets its file there, every row deleted loses it
   * (codestore.h).  NULL for a read-only handle or a system cache. */
  struct tj__codestore *store;
  /* How long each step of the open took (TJ__CACHE_PHASE_*), for
   * TOKITAI_JIT_TRACE: a clock read a step, so always kept. */
  double phase_ms[TJ__CACHE_PHASES];
};

/* ------------------------------------------------------------ location.c */

/* What the first 100 bytes of the database file say. */
enum {
  TJ__HEADER_EMPTY,      /* 0 bytes: a new file */
  TJ__HEADER_OURS,       /* SQLite, with our application_id */
  TJ__HEADER_UNMARKED,   /* SQLite, application_id 0: ask SQLite what it is */
  TJ__HEADER_FOREIGN,    /* SQLite, another application's id */
  TJ__HEADER_NOT_SQLITE, /* not an SQLite database at all */
  TJ__HEADER_UNREADABLE
};

/* A cache location judged safe (location.c says why that is enough). */
typedef struct tj__location {
  char *path;  /* absolute, directory resolved: the name SQLite is given */
  char *dir;   /* the resolved directory */
  char *name;  /* the file's name in it */
  int dirfd;   /* the resolved directory as walked and judged (O_PATH), or -1 */
  dev_t dev;   /* the database file as judged */
  ino_t ino;
  off_t size;
  int header;  /* TJ__HEADER_* */
  uint32_t appid;
  int wal;     /* the header says WAL journal (file format 2) */
  char readonly_why[128]; /* "" when we may write the file */
} tj__location;

/* A flag for tj__location_open beside the TJ_CACHE_* ones: a look for a
 * warm start that opens no SQLite connection, which leaves readonly_why
 * unasked. */
#define TJ__LOCATION_QUICK 0x80000000u

/* Resolve path, make its directories (unless TJ_CACHE_READONLY), judge the
 * directories and the database file, creating an empty one (mode 0600, or
 * 0660 with TJ_CACHE_GROUP) when absent and allowed, and read its header.
 * TJ_OK fills loc (free it with tj__location_free).  TJ_EPERM: someone else
 * could write it.  TJ_ECACHE: not a regular file (a directory, a FIFO...).
 * TJ_ENOENT: no file, and none may be made.  TJ_EIO: nowhere to write.
 * msg says why in every case but TJ_OK. */
int tj__location_open(const char *path, unsigned flags, tj__location *loc,
                      char *msg, size_t len);
/* Judge the -wal, -shm, -journal and .lock files that exist. */
int tj__location_check_side_files(const tj__location *loc, unsigned flags,
                                  char *msg, size_t len);
/* Judge one file as the cache's: regular, never a second name, ours, not
 * writable by others (by the group only with TJ_CACHE_GROUP).  No name at
 * all (removed since it was looked up) is no second name. */
struct stat;
/* group: the cache's group, that of the directory holding the file
 * (tj__location_dir_group); with TJ_CACHE_GROUP the one group trusted, and
 * the group every file must have. */
int tj__location_check_file(const struct stat *st, const char *path,
                            unsigned flags, gid_t group, char *msg,
                            size_t len);
/* Judge a directory of the cache's own (its code directory) as the cache
 * directory is judged: ours, and nobody else may add or replace entries;
 * group as above, that of the directory holding it. */
int tj__location_check_dir(const struct stat *st, const char *dir,
                           unsigned flags, gid_t group, char *msg, size_t len);
/* The group of the directory open at dirfd; (gid_t)-1 when unknown. */
gid_t tj__location_dir_group(int dirfd);
/* Whether code on a file system of type fs_type (statfs f_type) mounted by
 * uid mounter (-1: unknown) may be trusted by uid me: anything but FUSE,
 * and FUSE only when we or root mounted it and trusted is set (the user
 * said so: TOKITAI_JIT_TRUST_FUSE=1).  TJ_OK or TJ_EPERM. */
#define TJ__FUSE_MAGIC 0x65735546UL
int tj__location_fuse_verdict(unsigned long fs_type, long mounter, uid_t me,
                              int trusted);
/* A connection of this process on the file (dev, ino) opens (delta 1) or
 * closes (-1): while one is open, the file's header is read through
 * SQLite's VFS, whose closes keep the connection's POSIX locks. */
void tj__location_hold(dev_t dev, ino_t ino, int delta);
/* Read the header of loc's file again (another process may have been
 * making it when it was first read).  -1 when the name no longer leads to
 * the judged file; loc is then as it was. */
int tj__location_reread_header(tj__location *loc);
void tj__location_free(tj__location *loc);
/* A read-only system cache's location: the path resolved (symbolic links
 * included), every directory above the file judged as an ancestor, the
 * file root's or ours and writable by nobody else, its header read.
 * TJ_ENOENT after one failed stat when there is no file (msg "").
 * TJ_EPERM refused, TJ_ECACHE not a regular file, TJ_EIO; msg says why. */
int tj__location_open_system(const char *path, tj__location *loc, char *msg,
                             size_t len);

/* Take <path>.lock shared (LOCK_SH) or exclusive (LOCK_EX), creating it
 * when create is set and the cache is writable.  A descriptor, or -1 when
 * it cannot be had (a read-only location): the caller then moves nothing
 * aside.  location.c says what the lock orders. */
int tj__location_lock(const char *path, unsigned flags, int how, int create);
void tj__location_unlock(int fd);
/* Whether path is on a network file system (tj__cache_fs_is_network). */
int tj__location_is_network(const char *path);

/* ------------------------------------------------------------ sql.c */

/* Busy, locked or a WAL protocol race: wait and try again. */
int tj__sql_is_busy(int rc);
void tj__sql_sleep_ms(long ms);
/* Prepare one statement; persistent for those kept for the connection's
 * life.  SQLite result codes throughout. */
int tj__sql_prepare(sqlite3 *db, const char *sql, int persistent,
                    sqlite3_stmt **st);
/* Step, waiting out a busy database (up to 60 s) unless st has already
 * returned rows: restarting it would visit them again. */
int tj__sql_step(sqlite3_stmt *st);
/* Reset st and clear its bindings, ready for the next use. */
void tj__sql_reset(sqlite3_stmt *st);
/* Run sql (any number of statements), retried as tj__sql_step. */
int tj__sql_exec(sqlite3 *db, const char *sql);
/* Run sql once, for what may be skipped (VACUUM, a checkpoint). */
int tj__sql_try(sqlite3 *db, const char *sql);
/* Transactions: write takes the write lock at once (BEGIN IMMEDIATE). */
int tj__sql_begin(sqlite3 *db, int write);
int tj__sql_commit(sqlite3 *db);
void tj__sql_rollback(sqlite3 *db);
/* The first column of the first row of sql as an int64 / a copy of its
 * text into out ("" for NULL).  SQLITE_OK; SQLITE_DONE for no row. */
int tj__sql_int64(sqlite3 *db, const char *sql, int64_t *out);
int tj__sql_text(sqlite3 *db, const char *sql, char *out, size_t len);

/* ------------------------------------------------------------ schema.c */

/* What a file is: ours (it carries TJ__CACHE_APP_ID), an empty database
 * (a new file), or another program's. */
enum tj__identity { TJ__ID_OURS, TJ__ID_EMPTY, TJ__ID_FOREIGN };
/* Identify the file in one read transaction.  *version its user_version;
 * what says what a foreign file is.  SQLite result codes. */
int tj__schema_identify(sqlite3 *db, enum tj__identity *id, int *version,
                        char *what, size_t len);
/* Not an SQLite code: the file is not ours, and was left as it was. */
#define TJ__SCHEMA_FOREIGN (-1)
/* cache/schema.sql, embedded at build time (schema_embedded.c). */
extern const char tj__schema_sql[];
/* Give an empty file the schema at CACHE_SCHEMA_VERSION and our mark;
 * a file of ours is left as it is (*version its version), another
 * program's is TJ__SCHEMA_FOREIGN with what saying what it is. */
int tj__schema_create(sqlite3 *db, int *version, char *what, size_t len);

/* ------------------------------------------------------------ handle.c */

/* A statement failed for a reason other than a busy database: give the
 * file up for reading (reading, or damaged) or for writing; TJ_ECACHE.
 * Called with c->lock held. */
int tj__cache_failed(tj__cache *c, int rc, int reading);
/* Keep SQLite's message for tj__cache_errmsg; returns code. */
int tj__cache_note_error(tj__cache *c, int code);
/* Move the file judged unusable (dev, ino) at path aside, under the
 * cache's exclusive lock, only if path still names it; appends what
 * happened to msg.  1 when path no longer names the bad file. */
int tj__cache_move_aside(const char *path, unsigned flags, dev_t dev,
                         ino_t ino, char *msg, size_t len);
/* End the write transaction begun on c (under its lock) whose statements
 * came to rc: commit when rc is SQLITE_OK, else roll back; a busy file is
 * an error noted once (TJ_ECACHE), any other failure gives the file up
 * (tj__cache_failed).  TJ_OK when it committed. */
int tj__cache_end_write(tj__cache *c, int rc);

/* ------------------------------------------------------------ rows.c */

/* The statements of the load and store path, prepared at open. */
int tj__rows_prepare(tj__cache *c);
/* Prepare *st (one of c's statements) if it is not yet: the store, drop
 * and eviction statements wait for their first use.  An SQLite code. */
int tj__rows_need(tj__cache *c, sqlite3_stmt **st);
void tj__rows_finalize(tj__cache *c);
/* The one check of a row's code, on load and in tj_cache_verify: size
 * bytes stored against the declared size and TJ_CACHE_MAX_CODE_BYTES, and
 * (when read is set) code against the stored hash; unread, the sizes are
 * judged alone, before a blob is read.  0, or a TJ__DROP_* reason. */
int tj__rows_judge_code(const void *code, int64_t size, int64_t declared,
                        const char *hash, int read);
/* INSERT OR IGNORE r (and, when new, its resources) with origin, in the
 * caller's write transaction; *inserted says whether it was new.  SQLite
 * result codes. */
int tj__rows_insert(tj__cache *c, const tj__cache_row *r, const char *origin,
                    int *inserted);
/* The key_inputs table beside code_objects (rows.c): what each row's key
 * was made of, for a miss's explanation.  Made by the first store that
 * has a record, so that a file of schema 4 gains it without a new version
 * (an older library ignores it); a trigger deletes a record with its
 * row, whichever library deletes it. */
extern const char tj__inputs_table_sql[];
/* Delete the row at key only if it still has hash ("" for none): a racing
 * writer may have replaced it.  Its code file goes too.  SQLite result
 * codes. */
int tj__rows_drop(tj__cache *c, const char *key, const char *hash);
/* After rows were deleted: remove the code files whose rows are gone
 * (codestore.h).  Called with c->lock held, outside a transaction. */
void tj__rows_sweep_code(tj__cache *c);
/* Fold the hits noted in the code directory into the rows (a writable
 * handle, at open).  Quiet: usage only orders evictions. */
void tj__rows_fold_hits(tj__cache *c);

/* ------------------------------------------------------------ resources.c */

/* The INSERT that tj__resources_put steps, and the SELECT that
 * tj__resources_get does (bound to a key). */
extern const char tj__resources_insert_sql[];
extern const char tj__resources_select_sql[];
/* Read the resources of each entry of the row (key, kernel, entries) from
 * its code and insert them with ins, in the caller's transaction: one row
 * per entry line of entries, or one for kernel when entries is "".  SQLite
 * result codes. */
int tj__resources_put(sqlite3_stmt *ins, const char *key, const char *kernel,
                      const char *entries, const void *code, size_t size);
/* The resources stored for key, in entry order, with sel (prepared from
 * tj__resources_select_sql): *out malloc'd (free with tj__resources_free),
 * *n of them; SQLite result codes. */
int tj__resources_get(sqlite3_stmt *sel, const char *key,
                      tj_cache_kernel **out, int *n);
void tj__resources_free(tj_cache_kernel *ks, int n);

/* ------------------------------------------------------------ merge.c */

/* What a merge did (tj_cache_merge_stats's counts). */
typedef struct tj__merge_counts {
  uint64_t copied, skipped, bad;
} tj__merge_counts;
/* Copy every row of source that passes its checks into target, one write
 * transaction per batch; a row target has (by key) is skipped.  know
 * judges an embedded kernel's key (may be NULL).  TJ_OK, TJ_ENOMEM, or
 * TJ_ECACHE (which handle failed: *failed_source). */
int tj__cache_merge_rows(tj__cache *target, tj__cache *source,
                         const tj__cache_knowledge *know,
                         tj__merge_counts *n, int *failed_source);
/* know's key_consistent for a row, or 1 where know has none. */
int tj__cache_key_consistent(const tj__cache_knowledge *know,
                             const char *key, const char *kernel,
                             const char *options, const char *arch,
                             const char *platform, const char *compiler);

/* ------------------------------------------------------------ scan.c */

/* Each row, most recently used first.  With judge set the code is read and
 * verdict is tj__rows_judge_code's; otherwise 0.  fn returns non-zero to
 * stop.  TJ_OK or TJ_ECACHE. */
typedef int (*tj__cache_scan_fn)(const tj_cache_entry *e, int verdict,
                                 void *ctx);
int tj__cache_scan(tj__cache *c, int judge, tj__cache_scan_fn fn, void *ctx);

/* The sums behind tj_cache_get_stats. */
typedef struct tj__cache_sums {
  uint64_t entries, bytes, hits, misses;
  uint64_t system_entries, system_hits;
  double compile_ms_saved;
  int schema_version;
  uint64_t remote[TJ__REMOTE_COUNTERS]; /* tj__remote_counter_names order */
} tj__cache_sums;
int tj__cache_sums_get(tj__cache *c, tj__cache_sums *out);
/* SQLite's integrity check.  TJ_OK when whole; TJ_ECACHE with the first
 * problem in problem, or with nothing there when the check could not run
 * (tj__cache_errmsg says why). */
int tj__cache_integrity(tj__cache *c, char *problem, size_t len);
/* A row to drop: its key and the hash it had when judged, malloc'd (a
 * damaged row's may be of any length). */
typedef struct tj__cache_row_id {
  char *key, *hash;
} tj__cache_row_id;
/* Drop the rows in one transaction, each only if still as judged. */
int tj__cache_drop_rows(tj__cache *c, const tj__cache_row_id *rows,
                        uint64_t n);
/* Delete every row and reset the counters, then give the space back. */
int tj__cache_clear(tj__cache *c);

#endif /* TJ_CACHE_INTERNAL_H */
