/*
 * tokitai-jit/cache.h: inspecting and trimming a cache file (tj_cache_*).
 * Part of the public interface; <tokitai-jit.h> includes it, and it may
 * also be included on its own.  Conventions as in <tokitai-jit.h>.
 */
#ifndef TOKITAI_JIT_CACHE_H
#define TOKITAI_JIT_CACHE_H

#include <tokitai-jit.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ cache
 * Inspecting and trimming a cache file, with or without a GPU or a runtime
 * (what `tokitai-jit --list-cache` and friends use).  A tj_cache is one
 * connection to one file; use it from one thread at a time.  Any number of
 * processes and runtimes may use the same file meanwhile.
 */
typedef struct tj_cache tj_cache;

/* The largest code object a cache stores or loads (256 MiB; real ones are
 * kilobytes to a few megabytes).  A row claiming more is treated like one
 * that fails its hash: dropped and recompiled, its blob never read. */
#define TJ_CACHE_MAX_CODE_BYTES (256ull << 20)

/* Open the cache at path (NULL: the default location, as in tj_options).
 * flags: TJ_CACHE_READONLY, TJ_CACHE_GROUP.  A missing file is TJ_ENOENT
 * (nothing is created) unless flags lacks TJ_CACHE_READONLY, in which case
 * an empty cache is created.  TJ_EPERM: another user could have written
 * the file, a side file or a directory above it.  TJ_ECACHE: the path names
 * something that is not a tokitai-jit cache (a directory, a FIFO, another
 * program's file), which is left exactly as it was.  On failure *c is still
 * set when possible, for tj_cache_errmsg; close it (NULL is fine). */
TJ_EXPORT int tj_cache_open(tj_cache **c /* OUT */, const char *path,
                            unsigned flags);
/* A flag for tj_cache_open: open path as a runtime opens
 * a read-only system cache (tj_options.system_caches): read-only and
 * immutable (no locks, no -wal or -shm made beside it, so it works in a
 * directory you cannot write), and only when the file belongs to root or
 * to you and nobody else may write it or a directory above it (TJ_EPERM
 * otherwise).  Nothing is ever created; TJ_ENOENT when it is absent.
 * Listing, stats and verification (without repair) work on such a
 * handle. */
#define TJ_CACHE_SYSTEM 0x10u
TJ_EXPORT void tj_cache_close(tj_cache *c);
/* Detail of the last failure on c; owned by c, never NULL. */
TJ_EXPORT const char *tj_cache_errmsg(const tj_cache *c);
/* The file c reads.  Owned by c. */
TJ_EXPORT const char *tj_cache_path(const tj_cache *c);

/* One entry of a cached code object and what it asks of the GPU, read
 * from the code when the row was stored.  The figures
 * are tj_kernel_get_info's for the same kernel.  The library fills it;
 * later fields are cut from reserved, so its size never changes. */
typedef struct tj_cache_kernel {
  const char *entry;   /* as the caller wrote it ("scale<float>"); an
                          embedded kernel's name */
  const char *lowered; /* its name in the code object */
  tj_kernel_resources resources; /* -1 where the code object does not say */
  uint64_t reserved[4];          /* zero; room for fields to come */
} tj_cache_kernel;

/* One cached code object.  Strings are owned by the cache and valid only
 * during the callback.  The library allocates it, so it carries no size:
 * fields are only added at the end. */
typedef struct tj_cache_entry {
  const char *key;       /* 32 hex digits */
  const char *kernel;
  const char *arch;
  const char *platform;
  const char *compiler;
  const char *options;
  const char *code_hash; /* stored XXH3-128 of the code */
  uint64_t code_size;
  double compile_ms;
  int64_t created;       /* unix seconds */
  int64_t last_used;     /* unix seconds */
  uint64_t hits;
  const char *entries;   /* a module's entries: "expression<TAB>lowered"
                            lines, one per entry; "" for embedded kernels */
  /* The resources of each entry, in the order of entries (one for an
   * embedded kernel); valid only during the callback.  0 and NULL for a
   * row that has none. */
  int num_kernels;
  const tj_cache_kernel *kernels;
  /* Where the row came from: "compiled" (on the machine that stored
   * it), "system" (copied from a read-only system cache on a hit there),
   * "remote" (from the remote tier), or "merged" (copied in by
   * tj_cache_merge). */
  const char *origin;
} tj_cache_entry;

/* Called once per entry; return non-zero to stop early. */
typedef int (*tj_cache_visit)(const tj_cache_entry *e, void *ctx);

/* Visit every entry, most recently used first. */
TJ_EXPORT int tj_cache_list(tj_cache *c, tj_cache_visit fn, void *ctx);

/* What tj_cache_get_stats fills. */
typedef struct tj_cache_stats {
  uint64_t entries;
  uint64_t bytes;          /* sum of code sizes */
  uint64_t hits;           /* loads from the cache, all processes */
  uint64_t misses;         /* compiles that had to run, all processes */
  double compile_ms_saved; /* sum over entries of hits x compile time */
  int schema_version;
  uint64_t size_limit;     /* bytes: the limit a runtime applies when its
                              tj_options.cache_max_bytes is 0 (1 GiB;
                              not kept in the file) */
  uint64_t file_bytes;     /* the database file itself */
  /* The rows copied from a read-only system cache
   * (tj_cache_entry.origin "system") and their hits. */
  uint64_t system_entries, system_hits;
  /* The remote tier, summed over the runtimes that used this cache with
   * one (tj_stats's remote_* fields, added at tj_runtime_close);
   * remote_errors counts the timeouts too. */
  uint64_t remote_hits, remote_misses, remote_errors;
  uint64_t remote_bytes_in, remote_bytes_out;
  uint64_t remote_timeouts;         /* among remote_errors */
  uint64_t remote_breaker_openings; /* the tier turned off for a while */
  uint64_t remote_lease_renewals;   /* while a compile held a lease */
  uint64_t remote_lease_takeovers;  /* from holders that stopped */
  uint64_t remote_off_at_close;     /* runtimes that closed with it off */
  uint64_t remote_redirects;        /* Redis Cluster redirections (MOVED,
                                       ASK) followed; the last of the
                                       reserved space, the size unchanged */
} tj_cache_stats;

/* Errors: TJ_EINVAL (NULL arguments), TJ_ECACHE.  One thread at a time
 * on one c (see above). */
TJ_EXPORT int tj_cache_get_stats(tj_cache *c, tj_cache_stats *st /* OUT */);

/* SQLite's integrity check, then every blob against its stored hash and
 * size (and TJ_CACHE_MAX_CODE_BYTES), and every row of an embedded kernel
 * against the key its own arch, platform and compiler give (a caller's
 * kernel with an embedded kernel's name and no options is reported too).
 * Each bad entry is passed to fn (may be NULL); with repair non-zero the bad
 * rows are deleted.  *bad (may be NULL) gets the count.  TJ_OK when the
 * check ran, whatever it found; TJ_ECACHE when the file itself is damaged
 * beyond what row deletion can fix (message in tj_cache_errmsg); TJ_EIO
 * when repair is asked, rows are bad and the file cannot be written (a
 * cache with nothing bad needs no writing, so repair on a healthy
 * read-only one is TJ_OK). */
TJ_EXPORT int tj_cache_verify(tj_cache *c, int repair, tj_cache_visit fn,
                              void *ctx, uint64_t *bad /* OUT */);

/* Delete entries last used max_age_seconds or more ago (< 0: no age
 * limit), then the least recently used until the code fits in max_bytes
 * (0, or 2^63 and more: no size limit).  Ages are whole seconds: an entry
 * last used at or before now - max_age_seconds goes, so 0 deletes every
 * entry, and the runtime evicts another compiler's entries by the same
 * rule.  *evicted (may be NULL) gets the
 * number deleted.  TJ_ECACHE when the file cannot be written (the message
 * says why); TJ_EINVAL when c was opened with TJ_CACHE_READONLY. */
TJ_EXPORT int tj_cache_evict(tj_cache *c, int64_t max_age_seconds,
                             uint64_t max_bytes, uint64_t *evicted /* OUT */);

/* Delete every entry and every tuning decision, and reset the counters. */
TJ_EXPORT int tj_cache_clear(tj_cache *c);

/* What tj_cache_merge did.  The library fills it; later fields are cut
 * from reserved. */
typedef struct tj_cache_merge_stats {
  uint64_t copied;      /* rows copied into c */
  uint64_t skipped;     /* rows c had already (the same key) */
  uint64_t bad;         /* rows not copied: code that fails its stored hash
                           or size, a malformed key or column, an embedded
                           kernel's row at a key its columns do not give */
  uint64_t reserved[5]; /* zero; room for fields to come */
} tj_cache_merge_stats;

/*
 * Copy the rows of the cache file source into c.  The
 * source is opened as with TJ_CACHE_SYSTEM (root's or yours, writable by
 * nobody else; immutable, so it should not be written meanwhile), and
 * must be a tokitai-jit cache of a schema this library reads.  Each row
 * is checked before it is copied (see tj_cache_merge_stats.bad) and never
 * copied when it fails; rows c has already are skipped, so merging twice
 * copies nothing the second time.  c takes the rows in batches of one
 * write transaction each, so other processes may use it meanwhile.
 * Copied rows say "merged" (tj_cache_entry.origin).  *st (may be NULL)
 * gets the counts, also on failure (what was done until then).
 * Errors: TJ_EINVAL (NULL arguments, c opened read-only, source is c's
 * own file), TJ_ENOENT (no source), TJ_EPERM (a source others could have
 * written), TJ_ECACHE (a source that is not a tokitai-jit cache or cannot
 * be read, or c cannot be written; the message in tj_cache_errmsg),
 * TJ_ENOMEM.  One thread at a time on one c.
 */
TJ_EXPORT int tj_cache_merge(tj_cache *c, const char *source,
                             tj_cache_merge_stats *st /* OUT */);
/* ================================================================ tuning
 * Tuning decisions: which configuration of an embedded kernel family
 * (gemm_f16 on sm_90) ran fastest for a class of shapes, on an arch, with a
 * compiler, and what was measured to decide it.  They live in the same
 * file as the code, keyed like it: a decision made under another compiler
 * fingerprint or arch is never used (a new compiler re-tunes).  tj_gemm_f16
 * makes them on first use and tj_gemm_f16_tune (`tokitai-jit --tune`) ahead
 * of time; see <tokitai-jit/ops.h>.
 */

/* One candidate that was timed, or set aside untimed (runs 0) because
 * its output on the tuning inputs differed from that of the rule's choice
 * (the first candidate). */
typedef struct tj_tuning_time {
  const char *config; /* "sm90a_128x128_split4" */
  double ms;          /* median of its timed runs, milliseconds; 0 when
                         runs is 0 */
  int runs;           /* how many timed runs; 0: set aside */
} tj_tuning_time;

/* One decision.  Strings and times are owned by the library and valid
 * only during the callback; fields are only added at the end. */
typedef struct tj_tuning {
  const char *op;          /* "gemm_f16" */
  const char *arch;        /* the runtime's arch: "sm_90" */
  const char *platform;
  const char *compiler;    /* as tj_runtime_compiler says it */
  const char *shape_class; /* the shapes it applies to
                              ("t1x32x64/c4/s132": 1, 32 and 64 tiles of
                              128 rows, 128 columns and 64 k; C 4-byte
                              aligned with ldc even; a device of 132
                              SMs) */
  const char *config;      /* the configuration chosen */
  int m, n, k;             /* the shape that was timed */
  const char *device;      /* the GPU it was timed on, by its name */
  const char *origin;      /* "first use" or "tune" */
  int64_t created;         /* unix seconds */
  int known;               /* 1: config is one this library has for op, and
                              a runtime with the same arch and compiler
                              uses it; 0: ignored (written by another
                              build, or damaged) */
  int num_times;           /* the candidates timed, fastest first, then
                              any set aside (runs 0) */
  const tj_tuning_time *times;
  const char *rule;        /* the configuration the library's rule runs
                              for the shape without a decision, one of
                              times (so the decision's gain is its time
                              over the chosen one's); NULL where the
                              decision does not say */
} tj_tuning;

typedef int (*tj_tuning_visit)(const tj_tuning *t, void *ctx);

/* Visit every decision in the file (ordered by op, arch, platform,
 * compiler, shape class); return non-zero from fn to stop early.  Errors:
 * TJ_EINVAL, TJ_ECACHE. */
TJ_EXPORT int tj_cache_list_tuning(tj_cache *c, tj_tuning_visit fn,
                                   void *ctx);

#ifdef __cplusplus
}
#endif
#endif /* TOKITAI_JIT_CACHE_H */
