/*
 * cache_api.h: the calls the rest of the library makes into the store
 * (src/cache), and the types they pass.  Names are tj__ and never
 * exported; cache_internal.h says which file of src/cache does what.
 *
 * The store knows no kernels: where it needs an answer only the library
 * above it has (is this row one of the embedded kernels, at the key its
 * columns give? is this tuning configuration one the library runs?), the
 * caller passes it down (tj__cache_knowledge).
 */
#ifndef TJ_CACHE_API_H
#define TJ_CACHE_API_H

#include "config.h" /* first: _GNU_SOURCE */
#include "hash.h"
#include "tokitai-jit.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>


typedef struct tj__cache tj__cache;

/* One row as the runtime writes it; strings are borrowed. */
typedef struct tj__cache_row {
  const char *key, *kernel, *arch, *platform, *compiler, *options;
  const void *code;
  size_t code_size;
  double compile_ms;
  const char *entries;  /* "expression<TAB>lowered" lines; NULL: "" */
  /* What the key was made of, as the library above records it (the
   * fingerprints of the source and headers); stored beside a new row in
   * the key_inputs table so that a later miss can say which input
   * differs.  NULL: none is stored. */
  const char *inputs;
} tj__cache_row;

/* The default cache path (see tokitai-jit.h), malloc'd; NULL when none can
 * be formed (no HOME). */
char *tj__cache_default_path(void);
struct tj__codestore; /* codestore.h */
/*
 * Open (creating as needed) the cache at path.  TJ_OK with *out set, or
 * TJ_OK with *out NULL and a warning in msg when the cache cannot be used
 * and the runtime should go on without it; TJ_EPERM when the location is
 * unsafe; TJ_ECACHE when the path names something that is not a
 * tokitai-jit cache (left as it was).  msg is always NUL-terminated.
 */
int tj__cache_open(const char *path, unsigned flags, tj__cache **out,
                   char *msg, size_t msglen);
/*
 * A warm start's open: judge the location at path as tj__cache_open does
 * and, when the file carries our mark and has a code directory
 * (codestore.h), open only that directory.  TJ_OK with *store (the path
 * SQLite would be given in resolved): the caller may leave the SQLite
 * file closed until it needs more than a hit.  Anything else (TJ_ENOENT):
 * open it with tj__cache_open, which judges it again and says why.
 */
int tj__cache_open_code(const char *path, unsigned flags,
                        struct tj__codestore **store, char *resolved,
                        size_t rlen);
void tj__cache_close(tj__cache *c);
/* The steps of a cache open, as TOKITAI_JIT_TRACE names them: judging the
 * location (paths, owners, modes, the header, the lock), SQLite's open,
 * reading the schema's identity, the journal pragmas, a new file's schema,
 * preparing the statements. */
enum {
  TJ__CACHE_PHASE_LOCATION, TJ__CACHE_PHASE_CONNECT, TJ__CACHE_PHASE_IDENTIFY,
  TJ__CACHE_PHASE_JOURNAL, TJ__CACHE_PHASE_CREATE, TJ__CACHE_PHASE_PREPARE,
  TJ__CACHE_PHASES
};
extern const char *const tj__cache_phase_names[TJ__CACHE_PHASES];
/* c's open, step by step, in milliseconds (zeros for c NULL). */
void tj__cache_open_phases(const tj__cache *c, double ms[TJ__CACHE_PHASES]);
/* Look up want->key.  The row must match want's kernel, arch, platform,
 * compiler and options, its code its stored hash and size, and its size be
 * at most TJ_CACHE_MAX_CODE_BYTES (checked before the blob is read).  TJ_OK: *code
 * is a malloc'd copy.  TJ_ENOENT: no usable row; *dropped is a TJ__DROP_*
 * reason when a row failed a check and was deleted (0 otherwise).
 * TJ_ECACHE: the cache was given up (below), *dropped as before. */
enum { TJ__DROP_HASH = 1, TJ__DROP_IDENTITY, TJ__DROP_SIZE };
int tj__cache_get(tj__cache *c, const tj__cache_row *want, void **code,
                  size_t *size, int *dropped);
/* What a TJ__DROP_* reason means, for messages ("failed its hash check"). */
const char *tj__cache_drop_reason(int dropped);
/* tj__cache_get that also returns the row's entries column, malloc'd,
 * in *entries (set only on TJ_OK). */
int tj__cache_get_entries(tj__cache *c, const tj__cache_row *want,
                          void **code, size_t *size, int *dropped,
                          char **entries);
/* INSERT OR IGNORE one row, in its own transaction. */
int tj__cache_put(tj__cache *c, const tj__cache_row *row);
/* The same, saying whether the row is new: *inserted is 0 when a row was
 * at its key already, or nothing was written (read-only, failed). */
int tj__cache_put_new(tj__cache *c, const tj__cache_row *row, int *inserted);

/* A row of the per-user file as a miss's explanation reads it: its
 * columns and, where one was stored with it, its inputs record (NULL
 * otherwise); borrowed for the callback. */
typedef struct tj__similar_row {
  const char *key, *kernel, *arch, *platform, *compiler, *options, *entries;
  const char *inputs;
  int64_t created;
} tj__similar_row;
typedef int (*tj__similar_fn)(const tj__similar_row *r, void *ctx);
/* Each row of an embedded kernel named kernel (entries ""), or with kernel
 * NULL each module row (entries not ""), newest first; fn returns non-zero
 * to stop.  Reads only: a miss's explanation (src/core/explain.c).  TJ_OK
 * or TJ_ECACHE. */
int tj__cache_similar(tj__cache *c, const char *kernel, tj__similar_fn fn,
                      void *ctx);

/* ---- the cache layers (src/cache/layers.h drives these) */

/* A row's origin column: where its code came from. */
#define TJ__ORIGIN_COMPILED "compiled" /* compiled on this machine */
#define TJ__ORIGIN_SYSTEM "system"     /* copied from a system cache */
#define TJ__ORIGIN_REMOTE "remote"     /* copied from the remote tier */
#define TJ__ORIGIN_MERGED "merged"     /* copied in by tj_cache_merge */
/* tj__cache_put, saying where the code came from (a TJ__ORIGIN_*). */
int tj__cache_put_origin(tj__cache *c, const tj__cache_row *row,
                         const char *origin);
/* What a lookup found: the code (checked against its hash) and the
 * columns a copy of the row into another cache needs; all malloc'd. */
typedef struct tj__found {
  void *code;
  size_t size;
  char *kernel;  /* the row's kernel column */
  char *entries; /* its entries column ("" for an embedded kernel) */
  double compile_ms;
  char code_hash[TJ__KEY_HEX]; /* the XXH3-128 the code was checked against */
} tj__found;
/* tj__cache_get, filling f (free it with tj__found_free) on TJ_OK. */
int tj__cache_find(tj__cache *c, const tj__cache_row *want, tj__found *f,
                   int *dropped);
void tj__found_free(tj__found *f);
/*
 * Open the read-only system cache at path: immutable (no locks, no -wal
 * or -shm), only when the file is root's or ours and nobody else may
 * write it or a directory above it (location.c).  TJ_OK with *out;
 * TJ_ENOENT when there is no file (msg ""); TJ_EPERM when it is refused,
 * TJ_ECACHE when it is not a usable tokitai-jit cache (damaged, foreign,
 * a newer schema), TJ_ENOMEM; msg says why.  dev and ino (may be NULL)
 * get the file's identity.
 */
int tj__cache_open_system(const char *path, tj__cache **out, dev_t *dev,
                          ino_t *ino, char *msg, size_t msglen);
/*
 * Open the cache at path to read all its rows (a merge's source): as a
 * system cache is, immutable, when no -wal beside it holds anything; else
 * through its -wal, where a writer's last rows may still be, read-only
 * and judged as a per-user cache is, then as a system cache is.  Returns
 * what tj__cache_open_system returns; TJ_ECACHE, msg saying so, for a
 * -wal that cannot be read with the file: never the file without it.
 */
int tj__cache_open_source(const char *path, tj__cache **out, char *msg,
                          size_t msglen);
/* The file c has open (its device and inode as judged at open). */
void tj__cache_identity(const tj__cache *c, dev_t *dev, ino_t *ino);
/* In one transaction: add hits[i] to row keys[i] and stamp its last_used,
 * and add misses to the miss counter.  Called once, at runtime close, so
 * that a warm start writes nothing. */
int tj__cache_record_usage(tj__cache *c, const char *const *keys,
                           const uint64_t *hits, size_t n, uint64_t misses);
/* Why the last call on c failed, for messages: the reason the cache was
 * given up (see below) once it has been, else SQLite's error. */
const char *tj__cache_errmsg(tj__cache *c);
/*
 * A get that fails for any reason but a busy database, or a put that finds
 * the file damaged, gives the file up for the rest of the connection (a
 * damaged one is moved aside as at open); any other failed put (disk full,
 * I/O error) stops writes only.  The call that meets the failure returns
 * TJ_ECACHE, once; after it, get misses and put stores nothing, quietly.
 */

/* The remote tier's counters that a runtime adds to its cache's counters
 * table at close (rows "remote_hits", ...; no schema change: the table
 * is name and value), read back by tj_cache_get_stats. */
#define TJ__REMOTE_COUNTERS 11
extern const char *const tj__remote_counter_names[TJ__REMOTE_COUNTERS];
int tj__cache_add_counters(tj__cache *c, const uint64_t *values);

/* Entries from another compiler can never be hit (the compiler is in the
 * key); delete those not used for idle_seconds or more (the age rule of
 * tj__cache_trim).  *evicted may be NULL. */
#define TJ__CACHE_FOREIGN_IDLE (30 * 24 * 3600)
int tj__cache_evict_foreign(tj__cache *c, const char *compiler,
                            int64_t idle_seconds, uint64_t *evicted);
/* Whether a statfs f_type is a network file system (the cache then takes a
 * rollback journal instead of WAL). */
int tj__cache_fs_is_network(unsigned long magic);

/* The file SQLite has open: the resolved, absolute path. */
const char *tj__cache_file(const tj__cache *c);
/* True when c was opened read-only, SQLite could only open the file
 * read-only, or writes stopped after a failure: leave the file alone. */
int tj__cache_readonly(const tj__cache *c);
/* Why tj__cache_readonly(c) is true, for messages ("it is on a read-only
 * file system"); "" when it is not. */
const char *tj__cache_readonly_why(const tj__cache *c);

#define TJ__CACHE_DEFAULT_LIMIT (1ull << 30)

/* Delete rows last used max_age_seconds or more ago (< 0: none; the age
 * rule of tj_cache_evict), then the least recently used until the code
 * fits in max_bytes (see TJ__CACHE_NO_LIMIT).  Safe against racing
 * processes.  *evicted (may be NULL) gets the count. */
int tj__cache_trim(tj__cache *c, int64_t max_age_seconds, uint64_t max_bytes,
                   uint64_t *evicted);
/* A size limit of 0, or of 2^63 bytes or more, is no limit: SQLite counts
 * in int64. */
#define TJ__CACHE_NO_LIMIT(bytes) ((bytes) == 0 || (bytes) > (uint64_t)INT64_MAX)

/* One tuning decision (the tuning table, src/cache/tuning.c); strings
 * borrowed.  measured: "config<TAB>ms<TAB>runs" lines, fastest first,
 * then a "rule<TAB>config" line (the heuristic's choice among them). */
typedef struct tj__tuning_row {
  const char *op, *arch, *platform, *compiler, *shape_class, *config;
  int m, n, k;
  const char *device;
  int runs;
  const char *measured;
  const char *origin; /* "first use" or "tune" */
  int64_t created;    /* 0 on a put: now */
} tj__tuning_row;
/* A config name: 1 to 63 of [a-z0-9_]. */
#define TJ__TUNING_NAME_MAX 64
int tj__tuning_name_ok(const char *s);
/* The decision stored for want's op, arch, platform, compiler and
 * shape_class: TJ_OK with *config a malloc'd copy of its config.
 * TJ_ENOENT when there is none, or the row is damaged (*bad set: a column
 * of the wrong type, a config that is not a name).  TJ_ECACHE: the file
 * was given up, as tj__cache_get. */
int tj__cache_tuning_get(tj__cache *c, const tj__tuning_row *want,
                         char **config, int *bad);
/* INSERT OR REPLACE one decision in its own transaction; nothing on a
 * read-only cache.  TJ_EINVAL when its config is not a name. */
int tj__cache_tuning_put(tj__cache *c, const tj__tuning_row *row);
/* Every decision; bad as for tj__cache_tuning_get.  fn returns non-zero
 * to stop.  TJ_OK or TJ_ECACHE. */
typedef int (*tj__tuning_scan_fn)(const tj__tuning_row *r, int bad,
                                  void *ctx);
int tj__cache_tuning_scan(tj__cache *c, tj__tuning_scan_fn fn, void *ctx);

/* PRAGMA application_id of a tokitai-jit cache: "tjit" (cache/README.md). */
#define TJ__CACHE_APP_ID 0x746A6974u

/* ---- what the library above tells the store (admin.c asks it) */

/* The answers a tj_cache handle needs and cannot give itself. */
typedef struct tj__cache_knowledge {
  /* Whether a row naming kernel with options sits at the key its own
   * arch, platform and compiler give: 0 for an embedded kernel's row at
   * another key; any row the library cannot judge passes (1). */
  int (*key_consistent)(const char *key, const char *kernel,
                        const char *options, const char *arch,
                        const char *platform, const char *compiler);
  /* Whether config is one the library has for op ("gemm_f16"). */
  int (*config_known)(const char *op, const char *config);
} tj__cache_knowledge;

/* tj_cache_open with know (copied; either call may be NULL: every row
 * passes, no configuration is known).  What tj_cache_open says of its
 * arguments and results holds here. */
int tj__cache_handle_open(tj_cache **out, const char *path, unsigned flags,
                          const tj__cache_knowledge *know);

#endif /* TJ_CACHE_API_H */
