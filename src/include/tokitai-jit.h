/*
 * tokitai-jit.h: the public interface of libtokitai-jit.
 *
 * tokitai-jit compiles GPU kernels at run time, in-process, with hipRTC
 * (NVRTC underneath on NVIDIA), keeps the code objects in an SQLite cache
 * keyed by XXH3-128 over everything that can change the code, and launches
 * them with hipModuleLaunchKernel.  Kernel sources shipped with the library
 * are embedded in it; a caller's own source goes through the same path.
 *
 * Conventions
 *   - Every function that can fail returns an int: TJ_OK (0) or a negative
 *     TJ_E* code.  tj_strerror(code) names the code; tj_errmsg(rt) gives the
 *     detail of the last failure on that runtime (the compiler log, the path,
 *     the argument that was wrong).
 *   - Handles are opaque.  Whoever opens closes: tj_runtime_open and
 *     tj_runtime_close.  Kernels belong to their runtime and stay valid until
 *     it is closed; there is nothing to free for them.
 *   - Output parameters are marked OUT and are written only on success.
 *
 * Thread safety
 *   One runtime may be shared by any number of threads: tj_kernel_get,
 *   tj_kernel_compile, tj_launch and the query functions are thread-safe, and
 *   threads asking at once for the same kernel compile it once.  The
 *   exceptions are said where they occur: tj_runtime_close must not race any
 *   other call on the same runtime, and tj_errmsg's string belongs to the
 *   thread-shared runtime, so read it right after the failing call.
 *   Separate runtimes share nothing but the cache file, which any number of
 *   processes may use at once.
 */
#ifndef TOKITAI_JIT_H
#define TOKITAI_JIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TJ_BUILDING_LIBRARY)
#define TJ_EXPORT __attribute__((visibility("default")))
#else
#define TJ_EXPORT
#endif

#define TJ_VERSION_MAJOR 0
#define TJ_VERSION_MINOR 1
#define TJ_VERSION_PATCH 0
#define TJ_VERSION_STRING "0.1.0"

/*
 * Status codes.  The numbers never change; a retired code keeps its number.
 * X(NAME, value, message): the list generates the enum, tj_strerror and
 * tj_err_name.
 */
#define TJ_ERRNO_MAP(X)                                                     \
  X(OK, 0, "success")                                                       \
  X(EINVAL, -1, "invalid argument")                                         \
  X(ENOMEM, -2, "out of memory")                                            \
  X(ENOENT, -3, "not found (no such kernel or cache)")                      \
  X(ECOMPILE, -4, "kernel compilation failed")                              \
  X(ENODEVICE, -5, "no GPU device available")                               \
  X(EDEVICE, -6, "GPU runtime call failed")                                 \
  X(ECACHE, -7, "kernel cache error")                                       \
  X(EPERM, -8, "cache location is not safe to use")                         \
  X(EARCH, -9, "target architecture not supported by the compiler")         \
  X(ERANGE, -10, "size out of range")                                       \
  X(EVERIFY, -11, "result did not match the CPU oracle")                    \
  X(EIO, -12, "input/output error")

typedef enum {
#define TJ__ERR_ENUM(name, value, msg) TJ_##name = (value),
  TJ_ERRNO_MAP(TJ__ERR_ENUM)
#undef TJ__ERR_ENUM
  TJ__ERR_LAST = -13
} tj_status;

/* The message for a status code ("invalid argument").  Never NULL; an unknown
 * code gives "unknown error".  Static storage, thread-safe. */
TJ_EXPORT const char *tj_strerror(int code);

/* The code's name ("TJ_EINVAL").  Never NULL.  Static storage, thread-safe. */
TJ_EXPORT const char *tj_err_name(int code);

/* Library version ("0.1.0") and the platform it was built for ("amd" or
 * "nvidia").  Static storage, thread-safe. */
TJ_EXPORT const char *tj_version(void);
TJ_EXPORT const char *tj_platform(void);

typedef struct tj_runtime tj_runtime;
typedef struct tj_kernel tj_kernel;

/* Flags for tj_options.flags. */
#define TJ_CACHE_DISABLE 0x1u   /* no SQLite cache: compile on every miss */
#define TJ_CACHE_READONLY 0x2u  /* read the cache, never write it */
#define TJ_NO_DEVICE 0x4u       /* do not touch the GPU: compile only */
#define TJ_CACHE_GROUP 0x8u     /* allow a cache writable by its group */

/*
 * Options for tj_runtime_open.  Zero-initialise, then set what you need;
 * a NULL options pointer means all defaults.
 *   device      GPU ordinal (default 0).
 *   arch        Target arch, e.g. "gfx90a", "gfx90a:xnack-", "sm_90".  NULL:
 *               the device's own.  An arch with no usable device (or with
 *               TJ_NO_DEVICE) gives a compile-only runtime: kernels are
 *               compiled and cached, and tj_launch returns TJ_ENODEVICE.
 *   cache_path  SQLite file.  NULL: $TOKITAI_JIT_CACHE, else
 *               $XDG_CACHE_HOME/tokitai-jit/cache.db, else
 *               ~/.cache/tokitai-jit/cache.db.
 *   flags       TJ_CACHE_DISABLE, TJ_CACHE_READONLY, TJ_NO_DEVICE,
 *               TJ_CACHE_GROUP.
 *   cache_max_bytes  When a store takes the cache over this size, the least
 *               recently used rows are evicted until it fits (0: 1 GiB).
 */
typedef struct tj_options {
  int device;
  const char *arch;
  const char *cache_path;
  unsigned flags;
  uint64_t cache_max_bytes; /* size limit of the cache; 0: 1 GiB */
} tj_options;

/*
 * Open a runtime.  On success *rt is a new runtime that the caller closes
 * with tj_runtime_close.  On failure *rt is still set when a runtime could
 * be allocated, so that tj_errmsg(*rt) can say why; close it too (closing
 * NULL is fine).  Opening initialises the GPU driver unless TJ_NO_DEVICE is
 * given, and makes the device current on the calling thread.
 * Errors: TJ_EINVAL (bad options), TJ_ENODEVICE (no device and no arch),
 * TJ_EARCH (arch the compiler cannot target), TJ_EPERM (unsafe cache),
 * TJ_ECACHE, TJ_EDEVICE, TJ_ENOMEM.
 * Thread-safe: yes (each call makes its own runtime).
 */
TJ_EXPORT int tj_runtime_open(tj_runtime **rt /* OUT */, const tj_options *opts);

/* Close a runtime: unload its modules, flush its cache hit counters, close
 * the cache.  Every tj_kernel of it becomes invalid.  NULL is a no-op.
 * Not thread-safe with respect to other calls on the same runtime. */
TJ_EXPORT void tj_runtime_close(tj_runtime *rt);

/* The detail of the last failure on rt (the compiler log for TJ_ECOMPILE),
 * or the last warning (a cache that could not be used).  Owned by rt; valid
 * until the next call on rt.  Never NULL; "" when there is nothing to say.
 * tj_errmsg(NULL) says that no runtime was given. */
TJ_EXPORT const char *tj_errmsg(const tj_runtime *rt);

/* Make the runtime's device current on the calling thread, for threads
 * other than the one that opened it.  TJ_ENODEVICE on a compile-only
 * runtime.  Thread-safe. */
TJ_EXPORT int tj_runtime_bind(tj_runtime *rt);

/* The arch this runtime compiles for ("sm_90", "gfx90a:sramecc+:xnack-"),
 * the compiler fingerprint ("nvrtc 13.0"), and the cache file in use (NULL
 * when the cache is disabled or could not be opened).  Owned by rt. */
TJ_EXPORT const char *tj_runtime_arch(const tj_runtime *rt);
TJ_EXPORT const char *tj_runtime_compiler(const tj_runtime *rt);
TJ_EXPORT const char *tj_runtime_cache_path(const tj_runtime *rt);

/*
 * Get an embedded kernel by its entry name ("gelu_bwd_f16").  The first
 * call compiles it (or loads it from the cache); later calls return the
 * same handle from the runtime's in-memory table without touching SQLite or
 * the compiler.  *k belongs to rt.
 * Errors: TJ_EINVAL, TJ_ENOENT (no embedded kernel has that entry),
 * TJ_ECOMPILE, TJ_ECACHE, TJ_EDEVICE.
 * Thread-safe: yes.
 */
TJ_EXPORT int tj_kernel_get(tj_runtime *rt, const char *name,
                            tj_kernel **k /* OUT */);

/*
 * Compile a caller's kernel: source is HIP C++ whose entry function is
 * declared extern "C" __global__; options are extra compiler options
 * separated by spaces (NULL or "" for none).  Cached like an embedded
 * kernel; the same (source, entry, options) returns the same handle.
 * The library copies what it needs; source need not outlive the call.
 * Errors: as tj_kernel_get; TJ_ECOMPILE puts the full log in tj_errmsg.
 * Thread-safe: yes.
 */
TJ_EXPORT int tj_kernel_compile(tj_runtime *rt, const char *source,
                                const char *entry, const char *options,
                                tj_kernel **k /* OUT */);

typedef struct tj_dim3 {
  unsigned x, y, z;
} tj_dim3;

/*
 * Launch k with the given grid and block, bytes of dynamic shared memory,
 * stream (a hipStream_t / CUstream; NULL for the default stream) and
 * kernel arguments (an array of pointers to each argument, as
 * hipModuleLaunchKernel takes them).  Asynchronous: it returns once the
 * launch is queued.  Nothing is allocated or hashed.  The calling thread
 * must have the runtime's device current: tj_runtime_open makes it current
 * on the thread that opens the runtime; other threads call tj_runtime_bind
 * first (or make it current themselves through HIP/CUDA).
 * Errors: TJ_EINVAL (NULL kernel, a zero dimension), TJ_ENODEVICE
 * (compile-only runtime), TJ_EDEVICE (the launch failed; no message is
 * stored, since the kernel may be shared by threads).
 * Thread-safe: yes.
 */
TJ_EXPORT int tj_launch(const tj_kernel *k, tj_dim3 grid, tj_dim3 block,
                        unsigned shared_bytes, void *stream, void **args);

/* Where a kernel's code came from the first time this runtime asked. */
typedef enum {
  TJ_FROM_COMPILER = 0, /* compiled in this process */
  TJ_FROM_CACHE = 1     /* read from the SQLite cache */
} tj_origin;

/*
 * Facts about a kernel: its entry name, the cache key (32 lowercase hex
 * digits of XXH3-128), the code object (an AMD GPU ELF or an NVIDIA cubin)
 * and its size, where it came from, and how long its compile took when it
 * was compiled here.  Pointers are owned by the kernel's runtime.
 */
typedef struct tj_kernel_info {
  const char *entry;
  const char *key;
  const void *code;
  size_t code_size;
  tj_origin origin;
  double compile_ms;
} tj_kernel_info;

TJ_EXPORT int tj_kernel_info_get(const tj_kernel *k, tj_kernel_info *info /* OUT */);

/* The raw function handle (a hipFunction_t / CUfunction), for callers that
 * launch it themselves; NULL on a compile-only runtime. */
TJ_EXPORT void *tj_kernel_function(const tj_kernel *k);

/* Counters of one runtime since it was opened. */
typedef struct tj_stats {
  uint64_t memory_hits;  /* answered from the in-memory table */
  uint64_t cache_hits;   /* loaded from SQLite */
  uint64_t compiles;     /* compiled in this process */
  uint64_t cache_drops;  /* rows dropped because their code failed its hash */
  double compile_ms;     /* total compile time */
} tj_stats;

TJ_EXPORT int tj_runtime_stats(const tj_runtime *rt, tj_stats *stats /* OUT */);

/*
 * IEEE 754 binary16 on the host, as the fp16 kernels store it: round to
 * nearest even, subnormals, signed zeros, infinities; NaN stays NaN (quiet,
 * with as much of its payload as fits).  Pure functions, thread-safe.
 */
TJ_EXPORT uint16_t tj_f32_to_f16(float f);
TJ_EXPORT float tj_f16_to_f32(uint16_t h);

/* ================================================================ cache
 * Inspecting and trimming a cache file, with or without a GPU or a runtime
 * (what `tokitai-jit --list-cache` and friends use).  A tj_cache is one
 * connection to one file; use it from one thread at a time.  Any number of
 * processes and runtimes may use the same file meanwhile.
 */
typedef struct tj_cache tj_cache;

/* Open the cache at path (NULL: the default location, as in tj_options).
 * flags: TJ_CACHE_READONLY, TJ_CACHE_GROUP.  A missing file is TJ_ENOENT
 * (nothing is created) unless flags lacks TJ_CACHE_READONLY, in which case
 * an empty cache is created.  On failure *c is still set when possible, for
 * tj_cache_errmsg; close it (NULL is fine). */
TJ_EXPORT int tj_cache_open(tj_cache **c /* OUT */, const char *path,
                            unsigned flags);
TJ_EXPORT void tj_cache_close(tj_cache *c);
/* Detail of the last failure on c; owned by c, never NULL. */
TJ_EXPORT const char *tj_cache_errmsg(const tj_cache *c);
/* The file c reads.  Owned by c. */
TJ_EXPORT const char *tj_cache_path(const tj_cache *c);

/* One cached code object.  Strings are owned by the cache and valid only
 * during the callback. */
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
} tj_cache_entry;

/* Called once per entry; return non-zero to stop early. */
typedef int (*tj_cache_visit)(const tj_cache_entry *e, void *ctx);

/* Visit every entry, most recently used first. */
TJ_EXPORT int tj_cache_list(tj_cache *c, tj_cache_visit fn, void *ctx);

typedef struct tj_cache_stats {
  uint64_t entries;
  uint64_t bytes;          /* sum of code sizes */
  uint64_t hits;           /* loads from the cache, all processes */
  uint64_t misses;         /* compiles that had to run, all processes */
  double compile_ms_saved; /* sum over entries of hits x compile time */
  int schema_version;
  uint64_t size_limit;     /* bytes; the library default unless set */
  uint64_t file_bytes;     /* the database file itself */
} tj_cache_stats;

TJ_EXPORT int tj_cache_get_stats(tj_cache *c, tj_cache_stats *st /* OUT */);

/* SQLite's integrity check, then every blob against its stored hash.  Each
 * bad entry is passed to fn (may be NULL); with repair non-zero the bad
 * rows are deleted.  *bad (may be NULL) gets the count.  TJ_OK when the
 * check ran, whatever it found; TJ_ECACHE when the file itself is damaged
 * beyond what row deletion can fix (message in tj_cache_errmsg). */
TJ_EXPORT int tj_cache_verify(tj_cache *c, int repair, tj_cache_visit fn,
                              void *ctx, uint64_t *bad /* OUT */);

/* Delete entries last used more than max_age_seconds ago (< 0: no age
 * limit), then the least recently used until the code fits in max_bytes
 * (0: no size limit).  *evicted (may be NULL) gets the number deleted. */
TJ_EXPORT int tj_cache_evict(tj_cache *c, int64_t max_age_seconds,
                             uint64_t max_bytes, uint64_t *evicted /* OUT */);

/* Delete every entry and reset the counters. */
TJ_EXPORT int tj_cache_clear(tj_cache *c);

/* ================================================================ kernels
 * The embedded kernels as C calls.  Device-pointer calls queue the launch
 * on stream (NULL: the default stream) and return; fp16 data is IEEE
 * binary16 bits in uint16_t.  Host-buffer calls (_host) allocate device
 * memory, copy in, launch, copy out, free, and return when the result is in
 * the caller's buffer; each input's length is passed so that a mismatch is
 * caught ("grad_out length 3 does not match n=4").  n = 0, NULL
 * pointers, and sizes whose byte count overflows are TJ_EINVAL with a
 * message naming the argument.  Thread-safe as tj_launch is.
 */
TJ_EXPORT int tj_add_i32(tj_runtime *rt, void *stream, const int32_t *a,
                         const int32_t *b, int32_t *c, size_t n);
TJ_EXPORT int tj_gelu_fwd_f16(tj_runtime *rt, void *stream, const uint16_t *x,
                              uint16_t *y, size_t n);
TJ_EXPORT int tj_gelu_bwd_f16(tj_runtime *rt, void *stream,
                              const uint16_t *grad_out, const uint16_t *x,
                              uint16_t *grad_in, size_t n);
TJ_EXPORT int tj_gelu_fwd_bwd_f16(tj_runtime *rt, void *stream,
                                  const uint16_t *x, const uint16_t *grad_out,
                                  uint16_t *y, uint16_t *grad_in, size_t n);
/* C = alpha * A * B + beta * C; row-major M x K, K x N, M x N with leading
 * dimensions; fp32 accumulation.  beta == 0: C is not read. */
TJ_EXPORT int tj_gemm_f16(tj_runtime *rt, void *stream, int M, int N, int K,
                          float alpha, const uint16_t *A, int lda,
                          const uint16_t *B, int ldb, float beta, uint16_t *C,
                          int ldc);

TJ_EXPORT int tj_add_i32_host(tj_runtime *rt, const int32_t *a, size_t a_len,
                              const int32_t *b, size_t b_len, int32_t *c,
                              size_t n);
TJ_EXPORT int tj_gelu_fwd_f16_host(tj_runtime *rt, const uint16_t *x,
                                   size_t x_len, uint16_t *y, size_t n);
TJ_EXPORT int tj_gelu_bwd_f16_host(tj_runtime *rt, const uint16_t *grad_out,
                                   size_t grad_out_len, const uint16_t *x,
                                   size_t x_len, uint16_t *grad_in, size_t n);
TJ_EXPORT int tj_gelu_fwd_bwd_f16_host(tj_runtime *rt, const uint16_t *x,
                                       size_t x_len, const uint16_t *grad_out,
                                       size_t grad_out_len, uint16_t *y,
                                       uint16_t *grad_in, size_t n);
/* A, B, C dense (lda = K, ldb = N, ldc = N); C is read when beta != 0. */
TJ_EXPORT int tj_gemm_f16_host(tj_runtime *rt, int M, int N, int K,
                               float alpha, const uint16_t *A,
                               const uint16_t *B, float beta, uint16_t *C);

/* ================================================================ verify
 * Run an embedded kernel on seeded random inputs, compare every element
 * with the CPU oracle in double precision, and report, as the pilots did.
 */
typedef struct tj_report {
  char kernel[64];
  uint64_t n;               /* elements; for gemm_f16, M*N */
  int m, n_cols, k;         /* gemm_f16 shape; 0 otherwise */
  uint64_t seed;
  uint64_t compared;        /* outputs compared with the oracle */
  double max_abs_error;
  double rel_l2_error;
  double max_abs_tolerance; /* the limits this kernel is held to */
  double rel_l2_tolerance;
  int within_tolerance;     /* 1 when every limit held and nothing is NaN */
  double kernel_ms;         /* median of the timed launches, from events */
  double bytes_moved;       /* fewest bytes the kernel must move */
  double gb_per_s;
  double tflop_per_s;       /* gemm_f16 only */
  char source_fingerprint[33]; /* XXH3-128 of the kernel source */
  char code_key[33];           /* its cache key */
  char compiler[160];
  char device[256];
  char arch[256];
  char evidence[1024];      /* what this run showed */
  char non_claims[1024];    /* what it did not show */
} tj_report;

/* n: elements (for gemm_f16, the size of a square M = N = K problem).
 * TJ_OK when the run completed, whether or not the oracle agreed (see
 * within_tolerance); TJ_EVERIFY is never returned here, so that the caller
 * gets the report either way. */
TJ_EXPORT int tj_verify(tj_runtime *rt, const char *kernel, uint64_t n,
                        uint64_t seed, tj_report *report /* OUT */);
/* The report as a markdown section or a JSON object; malloc'd, the caller
 * frees.  NULL when out of memory. */
TJ_EXPORT char *tj_report_markdown(const tj_report *r);
TJ_EXPORT char *tj_report_json(const tj_report *r);

/* The embedded kernels: count, and the entry name of the i-th (NULL when i
 * is out of range).  Static storage, thread-safe. */
TJ_EXPORT size_t tj_embedded_count(void);
TJ_EXPORT const char *tj_embedded_name(size_t i);

#ifdef __cplusplus
}
#endif
#endif /* TOKITAI_JIT_H */
