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
 *   - Output parameters are marked OUT and are written only on success
 *     (and tj_verify's report on TJ_EVERIFY, which is its verdict).
 *   - Getters fill a struct the caller owns and are named
 *     tj_<object>_get_<what>: tj_kernel_get_info, tj_module_get_info,
 *     tj_runtime_get_stats, tj_device_get_info, tj_cache_get_stats.
 *
 * Structs that grow
 *   A struct the caller fills and the library reads (tj_options,
 *   tj_module_source) begins with `size_t size`: set it to sizeof the
 *   struct, or leave it 0 (`tj_options o = {0}` does), which means the first
 *   version: the fields this header gives it (libtokitai-jit.so.1), so
 *   that every field a program of this header sets is read.
 *   Fields are only ever added at the end, and the library reads nothing
 *   past the size given, so a program built against an older header keeps
 *   working with a newer library; a newer program's larger struct is read
 *   by an older library only when the bytes past the fields it knows are
 *   zero (TJ_EINVAL otherwise, so that an option it cannot honour is never
 *   dropped in silence).  A size below the first version's is TJ_EINVAL.
 *   A struct the library fills (tj_stats, tj_kernel_info, tj_device_info,
 *   tj_cache_stats, tj_cache_kernel, tj_report) ends in reserved space
 *   instead, which the library zeroes and later fields are cut from, so
 *   that its size never changes and a getter never depends on what the
 *   caller left in it (an uninitialised struct is fine).  tj_module_info, which had a size from
 *   the start, keeps it.  The structs the library hands to a callback
 *   (tj_cache_entry) grow only at the end; tj_dim3 and tj_header are
 *   frozen.
 *
 * What is stable
 *   Function names and signatures, status codes and their numbers, flags,
 *   the fields of the structs above and what they mean.  Not stable: the wording of messages (tj_errmsg,
 *   tj_strerror, tj_cache_errmsg), of tj_report's prose fields (evidence,
 *   non_claims) and of the compiler fingerprint, and the text of
 *   tj_report_markdown.  Compare codes and read numbers; do not parse prose.
 *
 * Thread safety
 *   One runtime may be shared by any number of threads: tj_kernel_get,
 *   tj_kernel_compile, tj_launch and the query functions are thread-safe, and
 *   threads asking at once for the same kernel compile it once.  The
 *   exception is said where it occurs: tj_runtime_close must not race any
 *   other call on the same runtime.  tj_errmsg is per thread: each thread
 *   reads the message of its own last failure on the runtime.  The calls
 *   that take no handle (tj_compiler, tj_device_count, ...) are
 *   thread-safe.
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
 * tj_err_name.  The codes run from 0 down without a gap, so TJ__ERR_LAST,
 * one below the last, is counted from the list.
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

#define TJ__ERR_ONE(name, value, msg) +1
typedef enum {
#define TJ__ERR_ENUM(name, value, msg) TJ_##name = (value),
  TJ_ERRNO_MAP(TJ__ERR_ENUM)
#undef TJ__ERR_ENUM
  TJ__ERR_LAST = -(0 TJ_ERRNO_MAP(TJ__ERR_ONE))
} tj_status;
#undef TJ__ERR_ONE

/* The message for a status code ("invalid argument").  Never NULL; an unknown
 * code gives "unknown error".  Static storage, thread-safe. */
TJ_EXPORT const char *tj_strerror(int code);

/* The code's name ("TJ_EINVAL").  Never NULL.  Static storage, thread-safe. */
TJ_EXPORT const char *tj_err_name(int code);

/* Library version ("0.1.0") and the platform it was built for ("amd" or
 * "nvidia").  Static storage, thread-safe. */
TJ_EXPORT const char *tj_version(void);
TJ_EXPORT const char *tj_platform(void);

/*
 * The compiler this library compiles with, asked without a runtime: its
 * versions, then a digest of the compiler libraries loaded in the process
 * ("nvrtc 13.0 b:1a2b3c4d5e6f7a8b", "hiprtc 9.0, comgr 2.4 (HIP 50221153)
 * b:..."), so that a point update of one shows.  tj_runtime_compiler
 * starts with the same text and adds digests of what that runtime hands
 * every compile.  The first call loads nothing new; it reads the libraries
 * already loaded.  Static storage, computed once; thread-safe.
 */
TJ_EXPORT const char *tj_compiler(void);

/*
 * The processors the installed compiler can target, as tj_options.arch
 * takes them: the count, and the i-th name (NULL when i is out of range),
 * in the compiler's order.  AMD: what comgr lists ("gfx90a", "gfx1100");
 * a processor that has the xnack or sramecc feature may also be given
 * with it ("gfx90a:xnack-").  NVIDIA: "sm_NN" for each arch NVRTC lists;
 * the "a" and "f" forms of one ("sm_90a") are accepted but not listed.
 * Needs no GPU.  Static storage, listed once; thread-safe.
 */
TJ_EXPORT size_t tj_compiler_arch_count(void);
TJ_EXPORT const char *tj_compiler_arch(size_t i);

/*
 * The GPUs the platform's driver shows (the HIP runtime on AMD, the CUDA
 * driver API on NVIDIA), without a runtime.  tj_device_count returns how
 * many; 0, not an error, when there is no driver or no device (a
 * compile-only runtime still compiles).  The first call initialises the
 * driver.  Thread-safe.
 */
TJ_EXPORT int tj_device_count(void);

/* Facts about one GPU.  Owns nothing: the strings are arrays in the
 * struct. */
typedef struct tj_device_info {
  char name[256];        /* the device's name, as its driver gives it */
  char arch[256];        /* as tj_options.arch takes it: "sm_90",
                            "gfx90a:sramecc+:xnack-" */
  uint64_t memory_bytes; /* global memory */
  int compute_units;     /* CUs on AMD, SMs on NVIDIA */
  int clock_khz;         /* peak clock; 0 when the driver does not say */
  uint64_t reserved[8];  /* zero; room for fields to come */
} tj_device_info;

/*
 * Fill *info for GPU `ordinal` (0 to tj_device_count() - 1).
 * Errors: TJ_EINVAL (NULL info), TJ_ENODEVICE (no such GPU), TJ_EDEVICE
 * (the driver did not answer).  Thread-safe.
 */
TJ_EXPORT int tj_device_get_info(int ordinal, tj_device_info *info /* OUT */);

typedef struct tj_runtime tj_runtime;
typedef struct tj_kernel tj_kernel;

/* Flags for tj_options.flags. */
#define TJ_CACHE_DISABLE 0x1u   /* no SQLite cache: compile on every miss */
#define TJ_CACHE_READONLY 0x2u  /* read the cache, never write it */
#define TJ_NO_DEVICE 0x4u       /* do not touch the GPU: compile only */
#define TJ_CACHE_GROUP 0x8u     /* allow a cache writable by its group */

/*
 * Options for tj_runtime_open.  Zero-initialise, then set what you need
 * (size may stay 0; see "Structs that grow"); a NULL options pointer means
 * all defaults.
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
 *               recently used rows are evicted until it fits (0: 1 GiB;
 *               2^63 or more, UINT64_MAX say: no limit).
 *   system_caches  Read-only system caches, looked up
 *               in order after the per-user cache (cache_path) misses: a
 *               colon-separated list of cache files, as a package or a
 *               cluster image ships them (tokitai-jit --merge makes them).
 *               NULL: the files in $TOKITAI_JIT_SYSTEM_CACHE, then the
 *               installed default, <datadir>/tokitai-jit/system.db
 *               (/usr/local/share/... with the default prefix); "": none.  A file that does
 *               not exist is skipped in silence (one stat).  The others
 *               are opened read-only and without locks (SQLite's
 *               immutable open) when a lookup first gets past the per-user
 *               cache, and only when the file belongs to root or to you
 *               and nobody else may write it or rename it (a directory
 *               above it); one that is refused, damaged, not a tokitai-jit
 *               cache or of a newer schema is skipped with one warning
 *               (tj_errmsg).  A hit there is checked against its hash and
 *               copied into the per-user cache; tj_stats.system_hits
 *               counts it.  With TJ_CACHE_DISABLE none is read.
 *   remote      The remote tier, Redis servers shared by many machines:
 *               "redis://[[USER]:PASSWORD@]HOST:PORT[/DB]" or
 *               "unix:///PATH" entries, commas between them, options
 *               after '?' joined by '&' ("readonly" for a process that
 *               never writes to them, "db=N", "prefix=P"); or the seed
 *               nodes of one Redis Cluster,
 *               "redis+cluster://[[USER]:PASSWORD@]HOST:PORT" entries
 *               (the same options but db).  NULL:
 *               $TOKITAI_JIT_REMOTE (unset: none).  Looked up after the
 *               per-user cache, a hit copied into it; advisory: a deadline
 *               on each command, off for a while after a fault, never the
 *               reason a call fails (README, "The remote tier").  Off
 *               with TJ_CACHE_DISABLE; read-only with TJ_CACHE_READONLY.
 *               A list that does not parse is TJ_EINVAL here, a warning
 *               from the environment.
 *   background_builds  Whether a GEMM's first call waits for its
 *               configuration to compile.  On (1), a tj_gemm or
 *               tj_gemm_f16 call whose specialised (Hopper) configuration
 *               is not built yet, neither in this runtime nor in any
 *               cache layer, queues its compile on a thread of the
 *               runtime's own and runs on a configuration that compiles
 *               in a fraction of the time (the portable kernel); the calls
 *               after the compile take the specialised one.  The two sum
 *               in different orders, so a result's bits may change when
 *               the switch happens: this is off by default.  One compile
 *               a configuration however many threads call; a failed one
 *               is told once, as a warning in tj_errmsg, and its calls
 *               keep the fallback.  tj_runtime_close waits for a compile
 *               that has begun and drops those that have not.  0 (the
 *               default): on when $TOKITAI_JIT_BACKGROUND_BUILDS is 1,
 *               else off; -1: off whatever the environment says.  Not in
 *               the first version of the struct: set size.
 */
typedef struct tj_options {
  size_t size;        /* 0 (this header's struct) or sizeof(tj_options) */
  int device;
  const char *arch;
  const char *cache_path;
  unsigned flags;
  uint64_t cache_max_bytes; /* size limit of the cache; 0: 1 GiB */
  const char *system_caches; /* read-only system caches; NULL: the defaults */
  const char *remote;       /* the remote tier; NULL: $TOKITAI_JIT_REMOTE */
  int background_builds;    /* 1 on, -1 off; 0: the environment's */
} tj_options;

/*
 * Open a runtime.  On success *rt is a new runtime that the caller closes
 * with tj_runtime_close.  On failure *rt is still set when a runtime could
 * be allocated, so that tj_errmsg(*rt) can say why; close it too (closing
 * NULL is fine).  Such a runtime is good for nothing else: every other call
 * on it returns TJ_EINVAL (NULL for the string queries) and leaves
 * tj_errmsg saying why the open failed.  Opening initialises the GPU driver unless TJ_NO_DEVICE is
 * given, and makes the device current on the calling thread.
 * Errors: TJ_EINVAL (bad options, a size the library cannot read), TJ_ENODEVICE (no device and no arch),
 * TJ_EARCH (arch the compiler cannot target), TJ_EPERM (unsafe cache:
 * another user could have written it or a directory above it), TJ_ECACHE
 * (the cache path names something that is not a tokitai-jit cache: a
 * directory, a FIFO, another program's file; it is left exactly as it
 * was), TJ_EDEVICE, TJ_ENOMEM.
 * Thread-safe: yes (each call makes its own runtime).
 */
TJ_EXPORT int tj_runtime_open(tj_runtime **rt /* OUT */, const tj_options *opts);

/* Close a runtime: unload its modules, flush its cache hit counters, close
 * the cache.  Every tj_kernel of it becomes invalid.  NULL is a no-op.
 * Not thread-safe with respect to other calls on the same runtime. */
TJ_EXPORT void tj_runtime_close(tj_runtime *rt);

/* The detail of the calling thread's last failure on rt (the compiler log
 * for TJ_ECOMPILE), or its last warning (a cache that could not be used),
 * including a failed tj_runtime_open.  Under threads each thread has its
 * own: another thread's failure on rt neither replaces nor frees it.  The
 * string is owned by the library and valid until the calling thread's next
 * call on rt, or its next failure on any runtime, or the runtime's close;
 * a thread keeps the messages of its 8 most recent runtimes and "" for
 * older ones.  Never NULL; "" when there is nothing to say.
 * tj_errmsg(NULL) says that no runtime was given.  Thread-safe. */
TJ_EXPORT const char *tj_errmsg(const tj_runtime *rt);

/* Make the runtime's device current on the calling thread, for threads
 * other than the one that opened it.  TJ_ENODEVICE on a compile-only
 * runtime.  Thread-safe. */
TJ_EXPORT int tj_runtime_bind(tj_runtime *rt);

/* The arch this runtime compiles for, in its canonical spelling ("sm_90",
 * "gfx90a:sramecc+:xnack-": sramecc before xnack, whatever order it was
 * given in), the compiler fingerprint ("nvrtc 13.0 b:1a2b3c4d5e6f7a8b": the
 * versions, then a digest of the compiler libraries loaded in the process,
 * so that a point update of one changes every key), and the cache file in
 * use (NULL when the cache is disabled or could not be opened).  Owned by
 * rt. */
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
 * Compile a caller's kernel: the one-entry shortcut for tj_module_compile
 * (below), whose rules it follows.  entry is a C name or a C++ name
 * expression ("saxpy", "scale<float>", "ops::gelu").  options are extra
 * compiler options in one string, split on runs of white space (space,
 * tab, newline) with no quoting or escapes: "-I inc  -DN=4" is the three
 * arguments "-I", "inc", "-DN=4".  An argument that contains a space (an
 * include directory with a space) needs tj_module_compile's array.  NULL
 * or "" for none.  Two C-name entries of one source taken this way share
 * one cache row (the second request finds the first one's row; name
 * expressions are part of the key, so each has a row of its own); a
 * module takes several entries of either kind with one compile.
 * The same (source, entry, options) returns the same handle.  The library
 * copies what it needs; source need not outlive the call.
 *
 * Options are checked against the ones the platform's compiler documents
 * and that cannot end the host program, write or read files the cache key
 * cannot see, or retarget the code; anything else is TJ_EINVAL, named in
 * tj_errmsg, before the compiler runs.  Accepted, AMD (clang in comgr):
 * -D and -U (-DX=1 or -D X=1), -I, -isystem, -iquote and -idirafter
 * with an absolute directory (every header they reach is hashed into the
 * key), -O0..-O3,
 * -Os, -Oz, -std=c++NN, -w, -W<warning> (-Wall, -Wno-..., -Werror=...),
 * -pedantic, -g, -g0, -gline-tables-only, the floating-point, unrolling and
 * vectorising -f flags and their -fno- forms (-ffast-math, -ffp-contract=,
 * -fdenormal-fp-math=, ...), -mcumode, -mwavefrontsize64,
 * -munsafe-fp-atomics, -mtgsplit (and -mno- forms), -mcode-object-version=,
 * --gpu-max-threads-per-block=.  NVIDIA (NVRTC): -D, -U, -I and their long
 * forms, -std=, -G, -lineinfo, -dopt=, --Ofast-compile=, --maxrregcount=,
 * -ftz=, -prec-div=, -prec-sqrt=, -fmad=, --use_fast_math,
 * --extra-device-vectorization, -default-device, --restrict, -w, -err-no,
 * --diag-error/suppress/warn=, -opt-info=inline, --split-compile=, and the
 * other documented true/false switches.  Refused, for example: -mllvm,
 * -Xclang, -v, -###, --help, --version, @file, -o, -save-temps, --time,
 * -include, -isystem (NVIDIA), --offload-arch, -march, --gpu-architecture, -arch,
 * -x, -fgpu-rdc, -rdc, -dlto, and input file names.
 *
 * The environment: a build (compile or cache lookup) is refused, TJ_EINVAL,
 * while a variable is set that would reach the compiler unseen by the key:
 * on AMD CPATH and CPLUS_INCLUDE_PATH (pass -I instead),
 * CCC_OVERRIDE_OPTIONS, AMD_OCL_BUILD_OPTIONS(_APPEND) and
 * HIPRTC_COMPILE_OPTIONS_APPEND; on NVIDIA NVRTC_APPEND_FLAGS.  AMD's
 * RC_DEBUG_OPTIONS, HIP_PATH, ROCM_PATH, HIP_DEVICE_LIB_PATH and LLVM_PATH,
 * and NVIDIA's EDG_MODULES_PATH and CPPCX_INCLUDE_PATH, are part of the key,
 * read at tj_runtime_open (a compile after one of them changed is refused).
 * The working directory never reaches the compiler.
 *
 * Errors: as tj_module_compile.
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
 * What a kernel asks of the GPU, read from its code object (the AMD code
 * object's metadata note; the NVIDIA cubin's own records), so it is known
 * on a machine without the GPU too.  -1 in a field: the code object does
 * not say (or the field has no meaning on that platform).  A kernel with
 * local_bytes > 0 or spills > 0 keeps values in memory that the compiler
 * could not fit in registers: worth knowing before it runs.
 */
typedef struct tj_kernel_resources {
  int32_t regs;         /* AMD: VGPRs per work-item; NVIDIA: registers per thread */
  int32_t sgprs;        /* AMD: SGPRs per wave; NVIDIA: -1 */
  int32_t agprs;        /* AMD: AccVGPRs (gfx908, gfx90a, gfx94x), else -1 */
  int32_t spills;       /* AMD: VGPRs + SGPRs spilled; NVIDIA: -1 (see local_bytes) */
  int64_t shared_bytes; /* static LDS / shared memory per block */
  int64_t local_bytes;  /* AMD: scratch (private segment); NVIDIA: local
                           memory (stack frame); per thread */
  int32_t max_threads;  /* the most threads per block the code allows */
  int32_t wave_size;    /* 64 or 32 on AMD; 32 on NVIDIA */
} tj_kernel_resources;

/*
 * Facts about a kernel: its entry name, the cache key (32 lowercase hex
 * digits of XXH3-128), the code object (an AMD GPU ELF or an NVIDIA cubin)
 * and its size, where it came from, how long its compile took when it was
 * compiled here, and its resources.  Pointers are owned by the kernel's
 * runtime.
 * Errors: TJ_EINVAL (NULL arguments).  Thread-safe: yes.
 */
typedef struct tj_kernel_info {
  const char *entry;
  const char *key;
  const void *code;
  size_t code_size;
  tj_origin origin;
  double compile_ms;
  tj_kernel_resources resources;
  uint64_t reserved[8]; /* zero; room for fields to come */
} tj_kernel_info;

TJ_EXPORT int tj_kernel_get_info(const tj_kernel *k, tj_kernel_info *info /* OUT */);

/* The raw function handle (a hipFunction_t / CUfunction), for callers that
 * launch it themselves; NULL on a compile-only runtime. */
TJ_EXPORT void *tj_kernel_function(const tj_kernel *k);

/*
 * Modules: a caller's source compiled once, with its options and headers,
 * into one code object (one cache row), from which any number of entries
 * are taken.  This is the route for a program's own kernels.
 *
 * Entries.  An entry is either a C name (an identifier: "saxpy") or a C++
 * name expression (anything else: "scale<float>", "ops::gelu", "::k").
 *   - A C name is looked up in the code object's symbol table as written,
 *     which finds an extern "C" kernel; failing that, a kernel of that name
 *     at namespace scope that is not extern "C" and not overloaded.  C
 *     names do not change the code, so they are not part of the key.
 *   - A name expression is registered with the compiler before it compiles
 *     (hiprtcAddNameExpression; nvrtcAddNameExpression on NVIDIA), which
 *     instantiates templates and adds code, so the sorted set of a
 *     module's name expressions is part of its key.  The lowered (mangled)
 *     names are stored with the cache row; tokitai-jit --list-cache shows
 *     them.
 *   An entry the source does not define fails the compile with TJ_ENOENT
 *   and a message naming the entry and the source, and nothing is stored;
 *   on GPU and compile-only runtimes alike.
 *
 * Headers, never stale.  Every byte that decides the code decides the key:
 *   - In-memory headers (tj_module_source.headers) are handed to the
 *     compiler's own header arguments, contents in the key.  This is the
 *     recommended route: nothing is read from disk, and the bytes the key
 *     covers are the bytes compiled.
 *   - File headers reached through -I DIR, -IDIR, --include-path=DIR,
 *     --include-path DIR, -isystem, -iquote, -idirafter, -include FILE,
 *     the directories in $CPATH and $CPLUS_INCLUDE_PATH (which the AMD
 *     compiler reads), and for "..." the working directory (NVRTC looks
 *     next to the program's name, which it sees as "caller.hip" there) and
 *     the directory part of an in-memory header's name: the library scans the source, the in-memory headers
 *     and every file it finds, recursively, for #include, #include_next,
 *     #import and __has_include of "..." and <...>, ignoring #if (so
 *     conditional includes count: over-counting costs a miss, never stale
 *     code), and hashes into the key, for each name, every file of that
 *     name in every directory that could supply it (path and bytes), which
 *     two paths are the same file (for #pragma once), and the values of
 *     the two environment variables.  A header that appears earlier in the
 *     search path changes the key too.  An include the scanner cannot read
 *     statically (#include MACRO, __has_include(MACRO)) makes the key
 *     depend on every file below every include directory given; more than
 *     4096 files or 256 MiB there is refused with TJ_ERANGE.  Directories
 *     are taken relative to the working directory, as the compiler does.
 *   - Headers the compiler brings itself (hip/hip_runtime.h from hipRTC's
 *     own tree, CUDA's headers on NVIDIA) are covered by the compiler
 *     fingerprint in the key; a file of the same name in a user include
 *     directory is a user header and is hashed.
 *   - When a header changes while a process runs: the key is computed when
 *     a runtime first sees a (source, options, headers, entries) request;
 *     later requests of that runtime are answered from its in-memory table
 *     without touching the disk (tj_kernel_compile on a warm runtime costs
 *     a hash of the source and a lookup), so a running runtime keeps the
 *     code it has.  A runtime opened after the change computes a new key
 *     and compiles.  A header that changes during the compile itself is
 *     caught (the headers are hashed again after the compile) and that
 *     code is used but not stored.
 *   - Other inputs: the source's bytes are keyed as they are (CRLF line
 *     endings are other bytes, so another key); options are keyed as the
 *     argument array, in order, as spelled (-I a and -Ia are two keys for
 *     one code: a miss, never stale code); the name is not given to the
 *     compiler (it sees every source as "caller.hip"), so it cannot change
 *     the code and is not keyed.
 *
 * What a compiler can do to the process.  Compiling in-process means that
 * a compiler crash takes the host program with it: NVRTC can crash
 * inside nvrtcCompileProgram on ill-formed inline PTX rather than
 * return an error, and comgr's LLVM aborts on some internal errors.  The
 * library guards what it can: on AMD, compiles of one process take turns
 * (that compiler is not thread-safe; NVRTC's run side by side), arch
 * names are checked before they reach the compiler (an unknown ISA aborts
 * comgr), and input sizes are bounded.
 * It cannot make a compiler that crashes on a source safe to call; a
 * program that compiles untrusted sources should do so in a child process
 * of its own, or precompile with tokitai-jit --compile.
 */
typedef struct tj_module tj_module;

/* An in-memory header: the name the source includes ("mydefs.h",
 * "lib/vec.h") and its contents (NUL-terminated). */
typedef struct tj_header {
  const char *name;
  const char *contents;
} tj_header;

/*
 * What tj_module_compile compiles.  Zero-initialise, set size to
 * sizeof(tj_module_source) (or leave it 0: the first version; see
 * "Structs that grow"), then the fields you need.
 *   source       HIP C++ source text (required).
 *   name         A name for messages ("kernels/saxpy.hip"); NULL: "caller.hip".
 *   options      Compiler options as an argument array, one option or value
 *                an element ("-I", "dir with space", "-DN=4"); NULL when
 *                num_options is 0.
 *   headers      In-memory headers, num_headers of them.
 *   entries      The entries to take (C names and C++ name expressions),
 *                num_entries of them, at least one; duplicates are one.
 * Everything is copied; nothing need outlive the call.
 */
typedef struct tj_module_source {
  size_t size;
  const char *source;
  const char *name;
  const char *const *options;
  int num_options;
  const tj_header *headers;
  int num_headers;
  const char *const *entries;
  int num_entries;
} tj_module_source;

/*
 * Compile src (or load it from the cache) into a module of rt.  The first
 * call with a given source, options, headers and entries compiles once
 * and stores one row; a later call on rt returns the same handle from the
 * in-memory table, and another runtime finds the row.  *module belongs to
 * rt and stays valid until tj_runtime_close; there is nothing to free.
 * Errors: TJ_EINVAL (a NULL or malformed field, no entries), TJ_ERANGE (a
 * source, option or header over its limit; too many files to hash below an
 * include directory), TJ_ENOENT (an entry the source does not define),
 * TJ_ECOMPILE (the full compiler log is in tj_errmsg), TJ_EIO (a header
 * file that exists but cannot be read), TJ_ECACHE, TJ_EDEVICE, TJ_ENOMEM.
 * Thread-safe: yes; threads compiling the same module at once compile once.
 */
TJ_EXPORT int tj_module_compile(tj_runtime *rt, const tj_module_source *src,
                                tj_module **module /* OUT */);

/*
 * The kernel of module for entry, spelled as it was given to
 * tj_module_compile.  No compile and no I/O: a binary search of the
 * module's entries.  *k belongs to the module's runtime.
 * Errors: TJ_EINVAL (NULL arguments), TJ_ENOENT (not one of the module's
 * entries; the message is on the module's runtime).
 * Thread-safe: yes.
 */
TJ_EXPORT int tj_module_kernel(tj_module *module, const char *entry,
                               tj_kernel **k /* OUT */);

/*
 * Facts about a module.  Set info->size = sizeof *info first, or 0 for
 * the first version (the fields below); nothing past the size given is
 * written, and size itself is left as it was.  key is the cache key (32
 * hex digits); entries[i] is the i-th entry (sorted, duplicates dropped)
 * and lowered[i] the symbol it resolved to in the code object.  Pointers
 * are owned by the module's runtime.
 */
typedef struct tj_module_info {
  size_t size;
  const char *key;
  const void *code;
  size_t code_size;
  tj_origin origin;
  double compile_ms;
  int num_entries;
  const char *const *entries;
  const char *const *lowered;
} tj_module_info;

/* Errors: TJ_EINVAL (NULL arguments, a size below the first version's).
 * Thread-safe: yes. */
TJ_EXPORT int tj_module_get_info(const tj_module *module,
                                 tj_module_info *info /* IN: size, OUT */);

/*
 * Why a request would miss the per-user cache: the embedded kernel name
 * (src NULL), or the module src as tj_module_compile takes it (name NULL),
 * looked up for rt's arch and compiler.  Writes one sentence into buf (at
 * most len bytes, NUL-terminated) and returns TJ_OK when the cache has
 * the row ("NAME: cached for ARCH (key ...)"), TJ_ENOENT when it has not:
 * then the sentence names what differs between the request and the
 * nearest row the cache holds for the same entry (an embedded kernel's
 * name; for a module, a row sharing one of its entries): the source, an
 * in-memory header by name, a header file, the options, the name
 * expressions, the compiler fingerprint, the arch, the platform; or "no
 * row for this entry".  A row stored by a release that kept no
 * fingerprints of its inputs is said to differ in "an input the row does
 * not record".  Compiles nothing and writes nothing; reads the header
 * files a module includes, as tj_module_compile does.  The same sentence
 * is what a lookup that misses prints with TOKITAI_JIT_TRACE=1 and leaves
 * in tj_errmsg as a warning when the cache had rows for the entry.
 * Errors: TJ_EINVAL (both or neither of name and src, an unknown kernel
 * name, no buffer, a malformed src), TJ_ECACHE (no cache file, or it
 * cannot be read; also in buf), TJ_ERANGE, TJ_EIO, TJ_ENOMEM as
 * tj_module_compile.
 * Thread-safe: yes.
 */
TJ_EXPORT int tj_explain_miss(tj_runtime *rt, const char *name,
                              const tj_module_source *src, char *buf,
                              size_t len);

/* Counters of one runtime since it was opened. */
typedef struct tj_stats {
  uint64_t memory_hits;  /* answered from the in-memory table */
  uint64_t cache_hits;   /* loaded from a cache: any layer below the
                            in-memory table (per-user, system, remote);
                            system_hits and remote_hits are among them */
  uint64_t compiles;     /* compiled in this process */
  uint64_t cache_drops;  /* rows dropped because their code failed its
                            hash, and remote values that failed a check */
  double compile_ms;     /* total compile time */
  /* The hits of each layer below the per-user cache, system_hits and
   * remote_hits, each also counted in cache_hits (so per-user hits are
   * cache_hits - system_hits - remote_hits). */
  uint64_t system_hits;      /* found in a read-only system cache */
  /* The remote tier (tj_options.remote), all 0 without one. */
  uint64_t remote_hits;      /* values fetched, checked, used; also in
                                cache_hits */
  uint64_t remote_misses;    /* lookups that found no usable value */
  uint64_t remote_errors;    /* faults but timeouts: each turned the tier
                                off for a while */
  uint64_t remote_timeouts;  /* commands that outlived their deadline */
  uint64_t remote_bytes_in;  /* payload bytes received */
  uint64_t remote_bytes_out; /* payload bytes sent */
  uint64_t remote_breaker_openings; /* the tier turned off for a while */
  uint64_t remote_lease_renewals;   /* sent while compiling under a lease */
  uint64_t remote_lease_takeovers;  /* leases taken from stopped holders */
  uint64_t remote_published_late;   /* compiled while the tier was off,
                                       published once it was back */
  int remote_state;      /* TJ_REMOTE_NONE, TJ_REMOTE_ON, TJ_REMOTE_OFF */
  uint64_t remote_redirects; /* Redis Cluster redirections (MOVED, ASK)
                                followed; the last of the reserved space,
                                so the struct's size is unchanged */
} tj_stats;

/* tj_stats.remote_state. */
#define TJ_REMOTE_NONE 0 /* no remote tier */
#define TJ_REMOTE_ON 1   /* in use */
#define TJ_REMOTE_OFF 2  /* off for a while after a fault */

/* Errors: TJ_EINVAL (a runtime whose open failed, NULL stats).
 * Thread-safe: yes. */
TJ_EXPORT int tj_runtime_get_stats(const tj_runtime *rt, tj_stats *stats /* OUT */);

#ifdef __cplusplus
}
#endif

/* The cache API and the embedded-kernel calls have headers of their own;
 * this one includes both, so that <tokitai-jit.h> is all a program needs. */
#include <tokitai-jit/cache.h>
#include <tokitai-jit/ops.h>

#endif /* TOKITAI_JIT_H */
