/*
 * internal.h: what the subsystems of libtokitai-jit say to each other.
 * Names here are tj__ and never exported.  One section per file, what
 * the others lean on first (errors, options, key), then the steps of a
 * request from the bottom up (compile, module load, the module table, a
 * caller's modules), and last the runtime that drives them.  The store's
 * calls are src/cache/cache_api.h's, the key's hash src/common/hash.h's.
 */
#ifndef TJ_INTERNAL_H
#define TJ_INTERNAL_H

#include "hip_platform.h" /* first: it includes config.h */
#include "cache_api.h"
#include "entries.h"
#include "hash.h"
#include "tokitai-jit.h"

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

/* ------------------------------------------------------------ errors.c */

/* Replace rt's message; printf-style.  Returns code, so that a failure
 * path reads `return tj__fail(rt, TJ_EINVAL, "...", ...)`. */
int tj__fail(tj_runtime *rt, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Take ownership of a malloc'd message (a compiler log, say). */
int tj__fail_owned(tj_runtime *rt, int code, char *msg);
/* A warning: sets the message without failing anything. */
void tj__warn(tj_runtime *rt, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Messages are kept per thread and per runtime (see errors.c): a runtime
 * takes a serial at open, and its closing thread's message goes at close. */
uint64_t tj__runtime_serial(void);
void tj__messages_release(tj_runtime *rt);
/* How many messages the calling thread has been given, on any runtime:
 * unchanged across a step, nothing was said during it. */
uint64_t tj__messages_clock(void);

/* ------------------------------------------------------------ abi.c */

/* The first version of a public struct ends with its field `last`: the
 * size that a size of 0 stands for (tokitai-jit.h, "Structs that grow"). */
#define TJ__FIRST_SIZE(type, last) \
  (offsetof(type, last) + sizeof(((type *)0)->last))
/* Copy the caller's struct src, of the size it says, into dst (known
 * bytes, zeroed first).  TJ_EINVAL when the size is below first, or when
 * bytes past known are set (fields this library does not know). */
int tj__struct_in(void *dst, const void *src, size_t known, size_t first);
/* Copy src (known bytes) into the caller's dst, no further than the size
 * dst says, leaving that size as it is.  TJ_EINVAL when it is below first. */
int tj__struct_out(void *dst, const void *src, size_t known, size_t first);

/* ------------------------------------------------------------ options.c */

/* Split a whitespace-separated option string into a NULL-terminated argv
 * in one malloc'd block (free() it); *argc gets the count. TJ_ENOMEM. */
int tj__options_split(const char *options, char ***argv, int *argc);
/* TJ_OK when every option is one the platform's compiler documents and
 * cannot make it abort or exit(); else TJ_EINVAL, naming the option in why. */
int tj__options_check(const char *const *argv, int argc, char *why, size_t whylen);

/* ------------------------------------------------------------ key.c */

/* Every input that can change the generated code. */
typedef struct tj__key_input {
  const char *source;
  size_t source_len;
  const char *entry;
  const char *options;  /* normalised (tj__options_normalise) */
  const char *arch;
  const char *platform;
  const char *compiler; /* the runtime's build identity (runtime.c) */
  /* Modules (tj_module_compile) only; with headers NULL the encoding ends
   * here, as for the embedded kernels.  argv: the options as given, in
   * order; exprs: the sorted, distinct name expressions; headers: the
   * digest of every header (tj__headers_digest). */
  const char *const *argv;
  int argc;
  const char *const *exprs;
  int nexprs;
  const char *headers;
} tj__key_input;

/* XXH3-128 of the canonical encoding, as 32 lowercase hex digits. */
void tj__key_compute(const tj__key_input *in, char out[TJ__KEY_HEX]);
/* The key of a one-kernel request (an embedded kernel): the one place the
 * runtime and --verify-cache both compute it. */
void tj__key_of_kernel(const char *source, size_t source_len,
                       const char *entry, const char *options, const char *arch,
                       const char *platform, const char *compiler,
                       char out[TJ__KEY_HEX]);
/* A runtime's in-memory name for a module request: the key's fields
 * (headers: "" as the files are not read) and the in-memory headers. */
void tj__key_request(const tj__key_input *in, const tj_header *mem, int nmem,
                     char out[TJ__KEY_HEX]);
/* The canonical encoding itself: a version tag, then each field as an
 * 8-byte little-endian length and its bytes.  Writes at most cap bytes and
 * returns the full length. */
size_t tj__key_encode(const tj__key_input *in, unsigned char *buf, size_t cap);
/* Collapse runs of white space to one space, trim both ends.  Returns a
 * malloc'd string ("" for NULL), or NULL when out of memory. */
char *tj__options_normalise(const char *options);

/* The tag that starts every key's encoding: which encoding it is. */
const char *tj__key_encoding(void);

/* ------------------------------------------------------------ explain.c */

/* A request that missed, as explain.c compares it with the rows. */
typedef struct tj__explain_request {
  const char *what;      /* names it in the sentence */
  const char *key;
  const char *kernel;    /* an embedded kernel's entry; NULL: a module */
  const char *const *exprs; /* a module's name expressions, sorted */
  int nexprs;
  const char *const *entries; /* a module's entries, sorted */
  int nentries;
  const char *arch, *compiler;
  const char *options;   /* as the row's options column says them */
  const char *inputs;    /* tj__inputs_record */
} tj__explain_request;
/* What a row's key was made of that its columns do not say: the key's
 * encoding, the source's XXH3-128, each in-memory header's name and
 * XXH3-128, and files (may be NULL) the digest of every header
 * (tj__headers_digest).  Tagged lines; malloc'd, NULL when out of memory. */
char *tj__inputs_record(const char *source, size_t source_len,
                        const tj_header *mem, int nmem, const char *files);
/* The sentence for q into buf: TJ_OK when the per-user file has the row
 * at q->key (a hit), TJ_ENOENT when not (what differs from the nearest row
 * for the same entry, or that there is none), TJ_ECACHE when there is no
 * file or it cannot be read.  *rows: the rows for the entry. */
int tj__explain(tj_runtime *rt, const tj__explain_request *q, char *buf,
                size_t len, int *rows);
/* After a lookup of q missed every layer: the sentence to the trace, and
 * to tj_errmsg as a warning when the file had rows for the entry and
 * nothing was said since the message clock read since (a warning of the
 * lookup itself, a dropped row or the remote tier, says more). */
void tj__explain_miss(tj_runtime *rt, const tj__explain_request *q,
                      uint64_t since);
/* tj_explain_miss for a module (user.c). */
int tj__module_explain(tj_runtime *rt, const tj_module_source *src,
                       char *buf, size_t len);

/* ------------------------------------------------------------ compile.c */

typedef struct tj__compile_result {
  void *code;      /* malloc'd code object */
  size_t size;
  char *log;       /* malloc'd compiler log, may be NULL */
  double ms;
} tj__compile_result;

/* Compile source for arch with hipRTC.  extra_options is the normalised
 * option string.  TJ_OK fills res->code; TJ_ECOMPILE fills res->log. */
int tj__compile(const char *source, const char *name, const char *arch,
                const char *extra_options, tj__compile_result *res);

/* The compile of a module: the user's options as an array, in-memory
 * headers and name expressions to register, on top of the platform's base
 * options.  res->lowered gets one malloc'd lowered name per expression
 * (NULL where lowering failed) in a malloc'd array. */
typedef struct tj__compile_input {
  const char *source;
  const char *name;                 /* the name the compiler sees */
  const char *arch;
  const char *const *options;
  int noptions;
  const tj_header *headers;
  int nheaders;
  const char *const *exprs;
  int nexprs;
} tj__compile_input;

int tj__compile_module(const tj__compile_input *in, tj__compile_result *res,
                       char ***lowered);

/* ------------------------------------------------------------ headers.c */

/*
 * The digest (32 hex digits) of every header src can include: the
 * in-memory headers (name and contents) and the files found through the
 * include directories of argv and $CPATH / $CPLUS_INCLUDE_PATH (see
 * tokitai-jit.h, "Headers, never stale").  TJ_OK, or TJ_ERANGE / TJ_EIO /
 * TJ_ENOMEM with a sentence in why.
 */
int tj__headers_digest(const char *source, size_t source_len,
                       const tj_header *mem, int nmem,
                       const char *const *argv, int argc,
                       char digest[TJ__KEY_HEX], char *why, size_t whylen);

/* ------------------------------------------------------------ module.c */

/* Load code and find entry; *module and *function are hip handles. */
int tj__module_load(const void *code, const char *entry, void **module,
                    void **function, char *err, size_t errlen);
void tj__module_unload(void *module);
/* The two halves of tj__module_load, for a module with several entries. */
int tj__module_load_code(const void *code, void **module, char *err,
                         size_t errlen);
int tj__module_function(void *module, const char *entry, void **function,
                        char *err, size_t errlen);

/* ------------------------------------------------------------ modtable.c */

/* A kernel of a runtime.  Created once, immutable once ready but for its
 * resources, read from the code at the first tj_kernel_get_info. */
struct tj_kernel {
  tj_runtime *rt;
  char *entry;
  char key[TJ__KEY_HEX];
  void *code;
  size_t code_size;
  void *module;    /* hipModule_t, NULL on a compile-only runtime */
  void *function;  /* hipFunction_t, NULL on a compile-only runtime */
  tj_origin origin;
  double compile_ms;
  struct tj_module *owner; /* a module's kernel: code and module are the
                              owner's; a module's own slot: entry NULL */
  unsigned shared_limit;   /* dynamic shared memory the function has been
                              allowed (gemm/gemm.c); atomic */
  int index;               /* a module's kernel: its entry's index in owner */
  int resources_read;      /* under rt->lock: resources is filled */
  tj_kernel_resources resources;
};

/* A module of a runtime (tj_module_compile).  Immutable once built. */
struct tj_module {
  tj_runtime *rt;
  char key[TJ__KEY_HEX];
  void *code;
  size_t code_size;
  void *module;       /* hipModule_t, NULL on a compile-only runtime */
  tj_origin origin;
  double compile_ms;
  int nentries;       /* sorted, distinct */
  char **entries;
  char **lowered;
  tj_kernel *kernels; /* one per entry */
};

typedef struct tj__modtable tj__modtable;

typedef int (*tj__build_fn)(void *ctx, tj_kernel **out);

/*
 * Find the kernel named (kind, name); if absent, call build once, however
 * many threads ask at once, and insert what it returns.  *memory_hit says
 * whether the answer came from the table.
 */
int tj__modtable_get(tj__modtable *t, int kind, const char *name,
                     tj__build_fn build, void *ctx, tj_kernel **out,
                     int *memory_hit);
tj__modtable *tj__modtable_new(void);
/* Run fn(ctx) with this thread's builds on every runtime limited to what
 * is built: a kernel or module in the in-memory table (not one another
 * thread is building: that is TJ_ENOENT at once, without waiting for it)
 * or in a cache layer; where a build would compile, TJ_ENOENT.  Returns
 * fn's code.  tj__built_only_now: whether the calling thread is inside. */
int tj__built_only(int (*fn)(void *), void *ctx);
int tj__built_only_now(void);
/* Call fn on every kernel, then free the table (not the kernels). */
void tj__modtable_free(tj__modtable *t, void (*fn)(tj_kernel *, void *),
                       void *ctx);

/* ------------------------------------------------------------ user.c */

/* The modtable kind of modules (runtime.c has the others); a module sits
 * in the table as a kernel with entry NULL and owner the module. */
#define TJ__KIND_MODULE 2
/* tj_module_compile of a checked src, compiled for arch (NULL: rt->arch;
 * else the arch-specific target of rt's, "sm_90a" on an sm_90 runtime, as
 * the embedded kernels of that target are: keyed and stored under it). */
int tj__module_get_for(tj_runtime *rt, const tj_module_source *src,
                       const char *arch, tj_module **out);
void tj__module_free(tj_module *m);
/* A module row's entries column: src/common/entries.h reads it. */

/* ------------------------------------------------------------ once.c */

/* The remote tier of a runtime (TOKITAI_JIT_REMOTE, or spec when not
 * NULL) and the bound of its waits; after the cache is open.  A bad
 * spec from tj_options is TJ_EINVAL; anything else only warns. */
int tj__remote_setup(tj_runtime *rt, const char *spec);
void tj__remote_teardown(tj_runtime *rt);
/* Add the remote's counters to s. */
void tj__remote_stats(const tj_runtime *rt, tj_stats *s);

/* The leases around one compile (once.c says how long each wait lasts). */
typedef struct tj__once {
  int fd;              /* the same-machine lease, or -1 */
  struct tj__remote_lease *lease; /* the remote one (remote.h), or NULL */
} tj__once;
/* Before compiling key, which no layer had: take the leases, waiting
 * (bounded) for another holder.  1: look in every layer again before
 * compiling; 0: compile.  Always end with tj__once_end. */
int tj__once_begin(tj_runtime *rt, const char *key, tj__once *o);
void tj__once_end(tj_runtime *rt, tj__once *o);

/* ------------------------------------------------------------ worker.c */

/* A build a caller queues on its runtime's worker: TJ_OK or a code, with
 * tj_errmsg (on the worker's thread) saying why. */
typedef int (*tj__work_fn)(tj_runtime *rt, const void *arg);
/* What tj__worker_submit says of a name. */
enum {
  TJ__WORK_DONE,    /* built: take what it built */
  TJ__WORK_PENDING, /* queued (now or before) or building */
  TJ__WORK_FAILED   /* failed; the first caller told gets its message as a
                       warning in tj_errmsg */
};
typedef struct tj__worker tj__worker;
/* A worker, its thread started at the first submit; NULL without memory. */
tj__worker *tj__worker_new(void);
/* Queue fn(rt, copy of arg's size bytes) under name on rt's worker,
 * unless name was queued before; a TJ__WORK_* for name.  fn NULL only
 * asks: TJ_ENOENT for a name never queued.  TJ_EINVAL when rt has no
 * worker, TJ_ENOMEM when it takes no more (memory, a thread, its bound
 * of names): the caller builds on its own.  Thread-safe. */
int tj__worker_submit(tj_runtime *rt, const char *name, tj__work_fn fn,
                      const void *arg, size_t size);
/* Wait until rt's worker has nothing queued or building (for tests).
 * Thread-safe. */
void tj__worker_drain(tj_runtime *rt);
/* Stop the thread: drop what has not begun, wait for the build running;
 * tj__worker_free stops and frees (NULL: a no-op).  At close. */
void tj__worker_stop(tj__worker *w);
void tj__worker_free(tj__worker *w);

/* ------------------------------------------------------------ runtime.c */

/* The trace's clock: the start of a step (0 when tracing is off: no clock
 * read), and its time added to phase (TJ__TRACE_*). */
double tj__trace_start(const tj_runtime *rt);
void tj__trace_add(tj_runtime *rt, int phase, double t0);
/* One more of what *n counts (rt->trace_kernels, rt->trace_modules),
 * when tracing is on. */
void tj__trace_count(tj_runtime *rt, uint64_t *n);

enum {
  TJ__TRACE_IDENTITY, /* the compiler fingerprint, the arch */
  TJ__TRACE_DEVICE,   /* the driver and the device, when there is one */
  TJ__TRACE_CACHE,    /* the cache open (tj__cache_open_phases splits it) */
  TJ__TRACE_KEY,      /* hashing the inputs into a key, on a miss */
  TJ__TRACE_LOOKUP,   /* the row: query, blob, its hash checked */
  TJ__TRACE_COMPILE,
  TJ__TRACE_LOAD,     /* module load and function lookup on the GPU */
  TJ__TRACE_CLOSE,    /* recording the hits, closing the cache */
  TJ__TRACE_PHASES
};

/* The multiprocessors a compile-only runtime answers for, so that the
 * kernel families' plans (which fill the device's SMs) answer without a
 * GPU: the count of the largest sm_90 part the plans are tuned on. */
#define TJ__FALLBACK_SMS 132

struct tj_runtime {
  unsigned flags;
  int compile_only;      /* no device: compile and cache only */
  tj__device device;     /* open when !compile_only */
  int sms;               /* the device's multiprocessors (SMs on NVIDIA, CUs
                            on AMD), which the families' plans fill;
                            TJ__FALLBACK_SMS when compile-only */
  char arch[256];
  char compiler[160];
  char *cache_path;
  /* The per-user file; NULL without one.  Opened when first needed
   * (tj__runtime_cache) where the code directory stands in for it at
   * open: a warm start then never opens SQLite. */
  tj__cache *cache;
  struct tj__codestore *code; /* that directory (codestore.h), or NULL */
  int cache_deferred;    /* atomic: rt->cache is still to be opened */
  pthread_mutex_t cache_lock; /* orders that open */
  double code_open_ms;   /* the location judged for the directory */
  struct tj__layers *layers; /* it and the layers below (layers.h); NULL
                                with TJ_CACHE_DISABLE */
  uint64_t cache_max_bytes;
  tj__modtable *table;
  pthread_mutex_t lock;   /* guards stats and kernels' resources */
  uint64_t msg_serial;    /* names rt's messages (errors.c) */
  char *compiler_env;     /* base options and environment, for the key */
  char *env_refusal;      /* why compiling is refused, or NULL */
  tj_stats stats;
  int opened;            /* 1 once tj_runtime_open succeeded (below) */
  struct tj__remote *remote; /* the remote tier, or NULL (once.c) */
  long lease_wait_ms;    /* the bound of each wait for another's compile */
  /* TOKITAI_JIT_TRACE=1 at open: where the time went (TJ__TRACE_*),
   * printed on stderr at close.  Off, it costs one test a step. */
  int trace;
  double trace_ms[TJ__TRACE_PHASES];
  uint64_t trace_kernels, trace_modules; /* embedded and caller kernels;
                                            modules (user.c) */
  /* What the kernel families of src/ops keep per runtime (decisions
   * met so far, benchmark settings), made on first use by
   * tj__runtime_slot; the runtime only frees it. */
  void *family_slot;
  void (*family_slot_free)(void *);
  /* The builds a call queues while it runs on something built
   * (tj_options.background_builds, worker.c); NULL when off. */
  tj__worker *worker;
};

/* rt's family slot: made by make() the first time (under rt's lock; NULL
 * when make() fails, and tried again next time), freed by drop() at
 * close.  One family owns the slot: make and drop are the same functions
 * at every call.  Thread-safe. */
void *tj__runtime_slot(tj_runtime *rt, void *(*make)(void),
                       void (*drop)(void *));
/* The slot if it was made, else NULL; never makes it.  Thread-safe. */
void *tj__runtime_slot_peek(const tj_runtime *rt);

/* rt's per-user cache, opened now if its open was deferred (a warning if
 * it cannot be); NULL without one.  Thread-safe. */
tj__cache *tj__runtime_cache(tj_runtime *rt);

/* The arch an embedded kernel is compiled and keyed for on rt: its
 * arch-specific target on a runtime for the base arch, else rt's. */
struct tj__embedded_kernel;
const char *tj__embedded_arch(const tj_runtime *rt,
                              const struct tj__embedded_kernel *e);

/* tj_kernel_get without compiling: the embedded kernel from the runtime's
 * memory or its cache; TJ_ENOENT when it would have to be compiled (the
 * first-use tuner times only what is built). */
int tj__kernel_get_built(tj_runtime *rt, const char *name, tj_kernel **out);
/* tj_launch with early as tj__launch takes it (1: programmatic dependent
 * launch, for a kernel that waits with griddepcontrol.wait before it
 * touches memory); k, grid and block as tj_launch has checked them. */
int tj__launch_kernel(const tj_kernel *k, tj_dim3 grid, tj_dim3 block,
                      unsigned shared_bytes, void *stream, void **args,
                      int early);

/* The steps every build takes, an embedded kernel's (runtime.c) and a
 * module's (user.c).  what names the kernel or module in messages. */

/* Whether rt may build (compile or load from the cache) and compile now:
 * TJ_EINVAL with the reason in tj_errmsg while a variable the key cannot
 * see is set, or when the compiler's environment changed since open. */
int tj__runtime_may_build(tj_runtime *rt, const char *what);
int tj__runtime_may_compile(tj_runtime *rt, const char *what);
/* One more in *counter (a field of rt->stats), and ms more compile time,
 * under rt's lock. */
void tj__runtime_count(tj_runtime *rt, uint64_t *counter, double ms);
/* Look want up in rt's cache layers (layers.h: the per-user file, the
 * system caches, the remote tier; entries may be NULL).  TJ_OK: *code and
 * *size, *entries when asked for, and the layer it came from; the caller
 * counts the hit once it takes the row.  TJ_ENOENT: a miss, also when rt
 * has no cache, when a row failed a check (a per-user one counted in
 * cache_drops; warned) or when a file failed under us (warned). */
int tj__runtime_lookup(tj_runtime *rt, const tj__cache_row *want,
                       const char *what, void **code, size_t *size,
                       char **entries, int *layer);
/* When a looked-up row's code is used: count the hit, in its layer (a
 * tj__layer, *layer of tj__runtime_lookup). */
void tj__runtime_count_hit(tj_runtime *rt, int layer);
/* After a compile that returned rc: on TJ_OK count it (compiles and
 * compile_ms) and free res->log, leaving res->code to the caller; else
 * fail rt with rc and "compiling <what> for <arch> failed:" and the log,
 * which it frees. */
int tj__runtime_compiled(tj_runtime *rt, int rc, tj__compile_result *res,
                         const char *what, const char *arch);
/* Store a freshly compiled row in rt's cache, then evict idle rows of other
 * compilers and trim to the size limit; a failed store is a warning. */
void tj__runtime_store(tj_runtime *rt, const tj__cache_row *row,
                       const char *what);

/* Whether rt may be used.  A runtime whose open failed is handed back
 * only so that tj_errmsg can say why: every public entry but tj_errmsg
 * and tj_runtime_close refuses it (TJ_EINVAL), since its table, cache
 * and device may be missing.  The message is left as the open set it. */
static inline int tj__runtime_usable(const tj_runtime *rt)
{
  return rt && rt->opened;
}

/* ------------------------------------------------------------ verify.c */

/* What tj_verify returns for a report it has filled: TJ_OK when every
 * output agreed with the oracle, else TJ_EVERIFY with the figures in rt's
 * message. */
int tj__verify_verdict(tj_runtime *rt, const tj_report *r);

#endif /* TJ_INTERNAL_H */
