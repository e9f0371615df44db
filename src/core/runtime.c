/*
 * runtime.c: the public entry points.  A request flows down from here:
 * in-memory table (modtable.c) -> key (key.c) -> SQLite (src/cache) ->
 * hipRTC (compile.c) -> module load (module.c), and back.
 */
#include "internal.h"
#include "embedded.h"
#include "codeobj.h"
#include "codestore.h"
#include "layers.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_OPTIONS_BYTES 4096

enum { KIND_EMBEDDED, KIND_CALLER }; /* and TJ__KIND_MODULE (user.c) */

const char *tj_version(void) { return TJ_VERSION_STRING; }
const char *tj_platform(void) { return TJ__PLATFORM; }

/* ------------------------------------------------------- tracing */

static double ms_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double tj__trace_start(const tj_runtime *rt)
{
  return rt->trace ? ms_now() : 0;
}

void tj__trace_add(tj_runtime *rt, int phase, double t0)
{
  if (!rt->trace)
    return;
  double ms = ms_now() - t0;
  pthread_mutex_lock(&rt->lock);
  rt->trace_ms[phase] += ms;
  pthread_mutex_unlock(&rt->lock);
}

void tj__trace_count(tj_runtime *rt, uint64_t *n)
{
  if (!rt->trace)
    return;
  pthread_mutex_lock(&rt->lock);
  (*n)++;
  pthread_mutex_unlock(&rt->lock);
}

/* One line on stderr: the open step by step, then the kernels' steps
 * summed, then the close. */
static void trace_print(const tj_runtime *rt)
{
  const double *t = rt->trace_ms;
  double cache[TJ__CACHE_PHASES], open = t[TJ__TRACE_IDENTITY] +
      t[TJ__TRACE_DEVICE] + t[TJ__TRACE_CACHE];
  char parts[512] = "";
  size_t used = 0;
  tj__cache_open_phases(rt->code ? NULL : rt->cache, cache);
  if (rt->code) /* the SQLite file was not opened at open */
    cache[TJ__CACHE_PHASE_LOCATION] = rt->code_open_ms;
  for (int i = 0; i < TJ__CACHE_PHASES && used < sizeof parts; i++)
    used += (size_t)snprintf(parts + used, sizeof parts - used, "%s%s %.3f",
                             i ? ", " : "", tj__cache_phase_names[i], cache[i]);
  fprintf(stderr, "tokitai-jit trace: %s open %.3f ms = identity %.3f + "
          "device %.3f + cache %.3f (%s); %llu kernels and %llu modules "
          "built: key %.3f, "
          "lookup %.3f, compile %.3f, load %.3f ms; memory hits %llu; "
          "close %.3f ms\n", rt->arch, open, t[TJ__TRACE_IDENTITY],
          t[TJ__TRACE_DEVICE], t[TJ__TRACE_CACHE], parts,
          (unsigned long long)rt->trace_kernels,
          (unsigned long long)rt->trace_modules, t[TJ__TRACE_KEY],
          t[TJ__TRACE_LOOKUP], t[TJ__TRACE_COMPILE], t[TJ__TRACE_LOAD],
          (unsigned long long)rt->stats.memory_hits, t[TJ__TRACE_CLOSE]);
}

static int trace_wanted(void)
{
  const char *v = getenv("TOKITAI_JIT_TRACE");
  return v && *v && strcmp(v, "0") != 0;
}

/* tj_options.background_builds: 1 on, -1 off, 0 the environment's
 * (TOKITAI_JIT_BACKGROUND_BUILDS=1 on; anything else off). */
static int open_worker(tj_runtime *rt, int wanted)
{
  const char *v = getenv("TOKITAI_JIT_BACKGROUND_BUILDS");
  if (wanted == 1 || (wanted == 0 && v && strcmp(v, "1") == 0))
    if (!(rt->worker = tj__worker_new()))
      return tj__fail(rt, TJ_ENOMEM, "out of memory");
  return TJ_OK;
}

/* ------------------------------------------------------- open and close */

static int open_device(tj_runtime *rt, const tj_options *o)
{
  char err[256] = "";
  tj__device_props props;
  rt->compile_only = 1;
  int rc = (rt->flags & TJ_NO_DEVICE)
               ? TJ_ENODEVICE : tj__device_open(o->device, &rt->device, err, sizeof err);
  if (rc == TJ_OK && (rc = tj__device_query(o->device, &props, 0)) != TJ_OK)
    tj__device_close(&rt->device);
  if (rc != TJ_OK) {
    if (o->arch) { /* no usable device, but an arch: compile only */
      rt->compile_only = 1;
      return TJ_OK;
    }
    return tj__fail(rt, rc, "no GPU to compile for and no arch given: %s",
                    (rt->flags & TJ_NO_DEVICE) ? "TJ_NO_DEVICE was set" : err);
  }
  size_t base = o->arch ? strcspn(o->arch, ":") : 0;
  if (o->arch && (strncmp(o->arch, props.arch, base) != 0 ||
                  (props.arch[base] != '\0' && props.arch[base] != ':'))) {
    tj__device_close(&rt->device); /* another arch than the device's */
    return TJ_OK;
  }
  rt->compile_only = 0;
  rt->sms = props.compute_units > 0 ? props.compute_units : TJ__FALLBACK_SMS;
  if (!o->arch)
    snprintf(rt->arch, sizeof rt->arch, "%s", props.arch);
  return TJ_OK;
}

/* The per-user file's code directory, when the file carries our mark and
 * has one: then a warm start reads its kernels there, and the SQLite file
 * is opened only when something needs more than a hit (a compile, a
 * tuning decision, a drop).  1 when it stands in for the file. */
static int open_code(tj_runtime *rt)
{
  char resolved[4096];
  double t0 = ms_now();
  if (tj__cache_open_code(rt->cache_path, rt->flags, &rt->code, resolved,
                          sizeof resolved) != TJ_OK)
    return 0;
  rt->code_open_ms = ms_now() - t0;
  __atomic_store_n(&rt->cache_deferred, 1, __ATOMIC_RELEASE);
  return 1;
}

tj__cache *tj__runtime_cache(tj_runtime *rt)
{
  if (!__atomic_load_n(&rt->cache_deferred, __ATOMIC_ACQUIRE))
    return rt->cache;
  pthread_mutex_lock(&rt->cache_lock);
  if (rt->cache_deferred) {
    char msg[1024];
    tj__cache *c = NULL;
    int rc = tj__cache_open(rt->cache_path, rt->flags, &c, msg, sizeof msg);
    if (rc != TJ_OK)
      tj__warn(rt, "%s; running without the cache file",
               msg[0] ? msg : tj_strerror(rc));
    else if (msg[0])
      tj__warn(rt, "%s", msg);
    rt->cache = c;
    __atomic_store_n(&rt->cache_deferred, 0, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&rt->cache_lock);
  return rt->cache;
}

static tj__cache *user_cache(void *ctx)
{
  return tj__runtime_cache(ctx);
}

static int open_user_cache(tj_runtime *rt, const tj_options *o)
{
  rt->cache_path = o->cache_path ? strdup(o->cache_path) : tj__cache_default_path();
  if (!rt->cache_path) {
    tj__warn(rt, "no cache location ($TOKITAI_JIT_CACHE, $XDG_CACHE_HOME and "
                 "$HOME are unset); running without a cache");
    return TJ_OK;
  }
  if (open_code(rt))
    return TJ_OK;
  char msg[1024];
  int rc = tj__cache_open(rt->cache_path, rt->flags, &rt->cache, msg, sizeof msg);
  if (rc != TJ_OK)
    return tj__fail(rt, rc, "%s", msg[0] ? msg : tj_strerror(rc));
  if (msg[0])
    tj__warn(rt, "%s", msg);
  return TJ_OK;
}

/* The per-user cache, and the layers under it (src/cache/layers.h), which
 * open the system caches only when a lookup first reaches them. */
static int open_cache(tj_runtime *rt, const tj_options *o)
{
  if (rt->flags & TJ_CACHE_DISABLE)
    return TJ_OK;
  int rc = open_user_cache(rt, o);
  if (rc == TJ_OK && tj__layers_open(user_cache, rt, rt->code, o->system_caches,
                                     rt->cache_max_bytes, &rt->layers) != TJ_OK)
    rc = tj__fail(rt, TJ_ENOMEM, "out of memory");
  return rc;
}

/* What reaches the compiler besides the source and the caller's options:
 * the platform's base options for the arch, and the part of the
 * environment the compiler reads (tj__compiler_environment).  Computed at
 * open for the key, and again before each compile, so that a variable set
 * since (setenv) cannot change the code under the key.  *out is malloc'd. */
static int compiler_inputs(const char *arch, char **out, char *why, size_t whylen)
{
  char base[2048], env[8192];
  const char *opts[TJ__MAX_BASE_OPTIONS];
  *out = NULL;
  int n = tj__base_options(arch, base, sizeof base, opts);
  int rc = tj__compiler_environment(env, sizeof env, why, whylen);
  if (rc != TJ_OK)
    return rc;
  size_t len = strlen(env) + 2;
  for (int i = 0; i < n; i++)
    len += strlen(opts[i]) + 1;
  char *s = malloc(len), *p = s;
  if (!s) {
    snprintf(why, whylen, "out of memory");
    return TJ_ENOMEM;
  }
  for (int i = 0; i < n; i++)
    p += sprintf(p, "%s%s", i ? " " : "", opts[i]);
  sprintf(p, "\n%s", env);
  *out = s;
  return TJ_OK;
}

/* The arch in its canonical spelling, and what the compiler will be given
 * for it.  A refused environment does not fail the open (the cache can
 * still be inspected); it fails every build, with its reason. */
/*
 * The compiler field of every key and row: the fingerprint of the loaded
 * compiler libraries, then digests of everything else this runtime hands
 * every compile (the base options and the environment the compilers read,
 * and the headers the platform supplies).  Putting them here rather than
 * in fields of their own means a row's own columns give its key, which is
 * how --verify-cache checks that a row is what it says.
 */
static void set_identity(tj_runtime *rt)
{
  char lib[sizeof rt->compiler - 40], env[TJ__KEY_HEX]; /* 40: the digests */
  const char *inputs = rt->compiler_env ? rt->compiler_env : "";
  tj__compiler_fingerprint(lib, sizeof lib);
  tj__hash_hex(inputs, strlen(inputs), env);
  snprintf(rt->compiler, sizeof rt->compiler, "%s e:%.16s h:%.16s", lib, env,
           tj__platform_headers_digest());
}

static int settle_arch(tj_runtime *rt, const char *arch)
{
  char why[512], canon[sizeof rt->arch];
  int rc = tj__arch_check(arch, why, sizeof why);
  if (rc != TJ_OK)
    return tj__fail(rt, rc, "%s", why);
  if (tj__arch_canonical(arch, canon, sizeof canon) != TJ_OK)
    return tj__fail(rt, TJ_EARCH, "arch '%s' has no canonical form", arch);
  snprintf(rt->arch, sizeof rt->arch, "%s", canon);
  free(rt->compiler_env);
  rc = compiler_inputs(rt->arch, &rt->compiler_env, why, sizeof why);
  if (rc == TJ_ENOMEM)
    return tj__fail(rt, rc, "out of memory");
  if (rc != TJ_OK && !(rt->env_refusal = strdup(why)))
    return tj__fail(rt, TJ_ENOMEM, "out of memory");
  set_identity(rt);
  return TJ_OK;
}

int tj_runtime_open(tj_runtime **out, const tj_options *opts)
{
  if (!out)
    return TJ_EINVAL;
  *out = NULL;
  tj_options o = {0};
  tj_runtime *rt = calloc(1, sizeof *rt);
  if (!rt)
    return TJ_ENOMEM;
  pthread_mutex_init(&rt->lock, NULL);
  pthread_mutex_init(&rt->cache_lock, NULL);
  rt->msg_serial = tj__runtime_serial();
  rt->compile_only = 1; /* until a device is open */
  rt->sms = TJ__FALLBACK_SMS;
  *out = rt;
  /* The first version is the whole struct through remote, so that a size
   * of 0 keeps every opt-out (system_caches = "", remote = ""). */
  if (opts && tj__struct_in(&o, opts, sizeof o,
                            TJ__FIRST_SIZE(tj_options, remote)) != TJ_OK)
    return tj__fail(rt, TJ_EINVAL, "tj_options.size is %zu: set it to 0 or "
                    "sizeof(tj_options) (%zu in this library), and leave the "
                    "fields this library does not know zero", opts->size,
                    sizeof o);
  rt->trace = trace_wanted();
  double t0 = tj__trace_start(rt);
  rt->flags = o.flags;
  rt->cache_max_bytes = o.cache_max_bytes ? o.cache_max_bytes : TJ__CACHE_DEFAULT_LIMIT;
  unsigned known = TJ_CACHE_DISABLE | TJ_CACHE_READONLY | TJ_NO_DEVICE |
                   TJ_CACHE_GROUP;
  if (o.flags & ~known)
    return tj__fail(rt, TJ_EINVAL, "unknown flags 0x%x", o.flags & ~known);
  if (o.device < 0)
    return tj__fail(rt, TJ_EINVAL, "device %d is negative", o.device);
  if (o.background_builds < -1 || o.background_builds > 1)
    return tj__fail(rt, TJ_EINVAL, "tj_options.background_builds is %d: "
                    "1 (on), -1 (off) or 0 (TOKITAI_JIT_BACKGROUND_BUILDS)",
                    o.background_builds);
  tj__compiler_fingerprint(rt->compiler, sizeof rt->compiler);
  int rc;
  if (o.arch && (rc = settle_arch(rt, o.arch)) != TJ_OK)
    return rc;
  tj__trace_add(rt, TJ__TRACE_IDENTITY, t0);
  t0 = tj__trace_start(rt);
  if ((rc = open_device(rt, &o)) != TJ_OK)
    return rc;
  tj__trace_add(rt, TJ__TRACE_DEVICE, t0);
  t0 = tj__trace_start(rt);
  /* the device's own arch must be one the compiler knows */
  if (!o.arch && (rc = settle_arch(rt, rt->arch)) != TJ_OK)
    return rc;
  if (!(rt->table = tj__modtable_new()))
    return tj__fail(rt, TJ_ENOMEM, "out of memory");
  tj__trace_add(rt, TJ__TRACE_IDENTITY, t0);
  t0 = tj__trace_start(rt);
  if ((rc = open_cache(rt, &o)) == TJ_OK &&
      (rc = tj__remote_setup(rt, o.remote)) == TJ_OK &&
      (rc = open_worker(rt, o.background_builds)) == TJ_OK)
    rt->opened = 1; /* every early return above leaves it unusable */
  tj__trace_add(rt, TJ__TRACE_CACHE, t0);
  return rc;
}

struct usage {
  const char **keys;
  uint64_t *hits;
  size_t n, cap;
};

static void free_kernel(tj_kernel *k, void *ctx)
{
  struct usage *u = ctx;
  if (k->origin == TJ_FROM_CACHE && u->keys && u->n < u->cap) {
    u->keys[u->n] = strdup(k->key);
    u->hits[u->n] = 1;
    if (u->keys[u->n])
      u->n++;
  }
  if (k->owner) { /* a module's slot */
    tj__module_free(k->owner);
    free(k);
    return;
  }
  tj__module_unload(k->module);
  free(k->entry);
  free(k->code);
  free(k);
}

void tj_runtime_close(tj_runtime *rt)
{
  if (!rt)
    return;
  /* First: a background build uses the table and the cache below. */
  tj__worker_stop(rt->worker);
  size_t cap = (size_t)(rt->stats.cache_hits + 1);
  struct usage u = {calloc(cap, sizeof *u.keys), calloc(cap, sizeof *u.hits), 0,
                    cap};
  if (!u.keys || !u.hits) {
    free(u.keys);
    u.keys = NULL;
  }
  if (!rt->compile_only)
    tj__device_make_current(&rt->device);
  tj__modtable_free(rt->table, free_kernel, &u);
  double t0 = tj__trace_start(rt);
  /* Hits are counted in the SQLite file; a process that never opened it
   * notes them in the code directory for the next one that does. */
  if (rt->cache)
    tj__cache_record_usage(rt->cache, u.keys, u.hits, u.n, rt->stats.compiles);
  else if (rt->code)
    tj__codestore_note_hits(rt->code, u.keys, u.hits, u.n);
  for (size_t i = 0; i < u.n; i++)
    free((char *)u.keys[i]);
  free(u.keys);
  free(u.hits);
  tj__layers_close(rt->layers);
  tj__remote_teardown(rt);
  if (rt->trace && rt->opened) {
    tj__trace_add(rt, TJ__TRACE_CLOSE, t0);
    trace_print(rt); /* the cache's open steps are read from it */
  }
  tj__cache_close(rt->cache);
  tj__codestore_close(rt->code);
  if (!rt->compile_only)
    tj__device_close(&rt->device);
  if (rt->family_slot_free)
    rt->family_slot_free(rt->family_slot);
  tj__worker_free(rt->worker);
  free(rt->cache_path);
  free(rt->compiler_env);
  free(rt->env_refusal);
  tj__messages_release(rt);
  pthread_mutex_destroy(&rt->lock);
  pthread_mutex_destroy(&rt->cache_lock);
  free(rt);
}

int tj_runtime_bind(tj_runtime *rt)
{
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  if (rt->compile_only)
    return TJ_ENODEVICE;
  return tj__device_make_current(&rt->device);
}

const char *tj_runtime_arch(const tj_runtime *rt)
{
  return tj__runtime_usable(rt) ? rt->arch : NULL;
}
const char *tj_runtime_compiler(const tj_runtime *rt)
{
  return tj__runtime_usable(rt) ? rt->compiler : NULL;
}
const char *tj_runtime_cache_path(const tj_runtime *rt)
{
  return tj__runtime_usable(rt) && (rt->cache || rt->code) ? rt->cache_path
                                                            : NULL;
}

int tj_runtime_get_stats(const tj_runtime *rt, tj_stats *stats)
{
  if (!tj__runtime_usable(rt) || !stats)
    return TJ_EINVAL;
  pthread_mutex_lock((pthread_mutex_t *)&rt->lock);
  tj_stats s = rt->stats;
  pthread_mutex_unlock((pthread_mutex_t *)&rt->lock);
  s.memory_hits = __atomic_load_n(&rt->stats.memory_hits, __ATOMIC_RELAXED);
  tj__remote_stats(rt, &s);
  *stats = s;
  return TJ_OK;
}

void *tj__runtime_slot(tj_runtime *rt, void *(*make)(void),
                       void (*drop)(void *))
{
  void *slot = tj__runtime_slot_peek(rt);
  if (slot)
    return slot;
  pthread_mutex_lock(&rt->lock);
  if (!(slot = rt->family_slot) && (slot = make())) {
    rt->family_slot_free = drop;
    __atomic_store_n(&rt->family_slot, slot, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&rt->lock);
  return slot;
}

void *tj__runtime_slot_peek(const tj_runtime *rt)
{
  return __atomic_load_n(&rt->family_slot, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------- building
 * The embedded kernels (below) and the modules (user.c) take the same
 * steps around their own request: look the row up, compile on a miss,
 * store what was compiled. */

void tj__runtime_count(tj_runtime *rt, uint64_t *counter, double ms)
{
  pthread_mutex_lock(&rt->lock);
  (*counter)++;
  rt->stats.compile_ms += ms;
  pthread_mutex_unlock(&rt->lock);
}

void tj__runtime_count_hit(tj_runtime *rt, int layer)
{
  pthread_mutex_lock(&rt->lock);
  rt->stats.cache_hits++;
  rt->stats.system_hits += layer == TJ__LAYER_SYSTEM;
  pthread_mutex_unlock(&rt->lock);
}

int tj__runtime_lookup(tj_runtime *rt, const tj__cache_row *want,
                       const char *what, void **code, size_t *size,
                       char **entries, int *layer)
{
  tj__lookup got;
  if (!rt->layers)
    return TJ_ENOENT;
  int rc = tj__layers_get(rt->layers, want, what, &got);
  if (got.user_dropped)
    tj__runtime_count(rt, &rt->stats.cache_drops, 0);
  if (got.warning[0])
    tj__warn(rt, "%s", got.warning);
  if (rc == TJ_OK) {
    *code = got.found.code;
    *size = got.found.size;
    got.found.code = NULL;
    if (entries) {
      *entries = got.found.entries;
      got.found.entries = NULL;
    }
    *layer = got.layer;
  }
  tj__found_free(&got.found);
  return rc;
}

int tj__runtime_compiled(tj_runtime *rt, int rc, tj__compile_result *res,
                         const char *what, const char *arch)
{
  if (rc == TJ_OK) {
    free(res->log);
    res->log = NULL;
    tj__runtime_count(rt, &rt->stats.compiles, res->ms);
    return TJ_OK;
  }
  char *msg = NULL;
  if (asprintf(&msg, "compiling %s for %s failed:\n%s", what, arch,
               res->log ? res->log : "(no compiler log)") < 0)
    msg = NULL;
  free(res->log);
  res->log = NULL;
  return tj__fail_owned(rt, rc, msg);
}

int tj__runtime_may_build(tj_runtime *rt, const char *what)
{
  /* A cached compile stands for a compile: refused alike. */
  if (rt->env_refusal)
    return tj__fail(rt, TJ_EINVAL, "not building %s: %s", what,
                    rt->env_refusal);
  return TJ_OK;
}

int tj__runtime_may_compile(tj_runtime *rt, const char *what)
{
  char *now = NULL, why[512];
  int rc = compiler_inputs(rt->arch, &now, why, sizeof why);
  int same = rc == TJ_OK && rt->compiler_env && strcmp(now, rt->compiler_env) == 0;
  free(now);
  if (!same)
    return tj__fail(rt, rc == TJ_ENOMEM ? rc : TJ_EINVAL, "not compiling %s: %s",
                    what, rc != TJ_OK ? why : "the compiler's environment "
                    "changed since tj_runtime_open, and the key was made for it");
  return TJ_OK;
}

/* A failed store costs only the next process a compile: the code in
 * hand is good, so warn (the cache says so once) and go on. */
static int store_failed(tj_runtime *rt, const char *what)
{
  tj__warn(rt, "could not store %s in the cache: %s", what,
           tj__cache_errmsg(tj__runtime_cache(rt)));
  return TJ_ECACHE;
}

/* After a compile's stores.  A compile is when an upgrade shows: rows of
 * the old compiler can never be hit again and go once they have idled
 * long enough. */
static void tidy_after_store(tj_runtime *rt)
{
  tj__cache *c = tj__runtime_cache(rt);
  tj__cache_evict_foreign(c, rt->compiler, TJ__CACHE_FOREIGN_IDLE, NULL);
  tj__cache_trim(c, -1, rt->cache_max_bytes, NULL);
}

/* A row compiled here: to the remote tier (when there is one), and into
 * the per-user cache.  TJ_OK when it was stored. */
static int store_compiled(tj_runtime *rt, const tj__cache_row *row,
                          const char *what)
{
  tj__layers_publish(rt->layers, row);
  return tj__cache_put(tj__runtime_cache(rt), row) == TJ_OK
             ? TJ_OK : store_failed(rt, what);
}

void tj__runtime_store(tj_runtime *rt, const tj__cache_row *row,
                       const char *what)
{
  if (store_compiled(rt, row, what) == TJ_OK)
    tidy_after_store(rt);
}

/* ------------------------------------------------------- an embedded kernel */

typedef struct build_request {
  tj_runtime *rt;
  const char *source;
  size_t source_len;
  const char *file;     /* name hipRTC shows in its log */
  const char *entry;
  const char *options;  /* normalised */
  char key[TJ__KEY_HEX];
  const char *arch;     /* what it is compiled for: rt->arch, or an
                         * embedded kernel's arch-specific target */
  int cache_only;       /* a miss in the cache is TJ_ENOENT, not a compile */
  /* The first entry of the file (below), and its key: what a compile of
   * the file is leased under.  Set before a compile. */
  const char *file_entry;
  char file_key[TJ__KEY_HEX];
  char *inputs;         /* tj__inputs_record, made on a miss; malloc'd */
} build_request;

static void compute_key(tj_runtime *rt, build_request *req)
{
  tj__key_of_kernel(req->source, req->source_len, req->entry, req->options,
                    req->arch, TJ__PLATFORM, rt->compiler, req->key);
}

static int from_cache(build_request *req, tj_kernel *k)
{
  tj_runtime *rt = req->rt;
  /* The row must say it is what was asked for, not only sit at its key. */
  tj__cache_row want = {req->key, req->entry, req->arch, TJ__PLATFORM,
                        rt->compiler, req->options, NULL, 0, 0, NULL, NULL};
  int layer = 0;
  int rc = tj__runtime_lookup(rt, &want, req->entry, &k->code, &k->code_size,
                              NULL, &layer);
  if (rc == TJ_OK) {
    k->origin = TJ_FROM_CACHE;
    tj__runtime_count_hit(rt, layer);
  }
  return rc;
}

/*
 * An embedded kernel written for an arch-specific target (sm_90a: wgmma,
 * setmaxnreg) is compiled for it on a runtime for its base arch (sm_90),
 * and the key and the cache row say sm_90a, since that code runs on no
 * other arch.  Elsewhere it is compiled for the runtime's arch, where its
 * entries are stubs that the library never launches.
 */
const char *tj__embedded_arch(const tj_runtime *rt,
                              const tj__embedded_kernel *e)
{
  size_t n = e->arch ? strlen(e->arch) : 0;
  if (n > 1 && strlen(rt->arch) == n - 1 &&
      strncmp(rt->arch, e->arch, n - 1) == 0)
    return e->arch;
  return rt->arch;
}

/* ------------------------------------------------------- the entries of one file
 * hipRTC and NVRTC compile a whole kernels/ file, so the code object of
 * one entry holds every entry of its file.  Each entry keeps its own key
 * and row (--list-cache, verify and the hit path see no difference), but
 * a compile stores its code object under the key of every sibling too,
 * and is leased under the key of the file's first entry: a process, a
 * machine or a cluster compiles each file once, not once per entry. */

/* Whether the code object compiled for req also holds e: an entry of the
 * same file (the table shares one source among a file's entries) for the
 * same target.  Every embedded entry is compiled with the same options,
 * req->options. */
static int same_code_object(const build_request *req,
                            const tj__embedded_kernel *e)
{
  return e->source == req->source && e->source_len == req->source_len &&
         strcmp(tj__embedded_arch(req->rt, e), req->arch) == 0;
}

static void key_of_entry(const build_request *req, const char *entry,
                         char key[TJ__KEY_HEX])
{
  tj__key_of_kernel(req->source, req->source_len, entry, req->options,
                    req->arch, TJ__PLATFORM, req->rt->compiler, key);
}

/* req->file_entry and req->file_key: the file's first entry (req's own
 * when its source is no embedded file's). */
static void find_file_key(build_request *req)
{
  req->file_entry = req->entry;
  memcpy(req->file_key, req->key, sizeof req->file_key);
  for (size_t i = 0; i < tj__embedded_kernel_count; i++) {
    const tj__embedded_kernel *e = &tj__embedded_kernels[i];
    if (!same_code_object(req, e))
      continue;
    if (strcmp(e->entry, req->entry) != 0) {
      req->file_entry = e->entry;
      key_of_entry(req, e->entry, req->file_key);
    }
    return;
  }
}

/* A sibling's row: stored as a compile's is, but where the per-user
 * cache had it already (INSERT OR IGNORE kept the old row) it is not
 * published again: whoever stored it did.  The row at the file's key is
 * published in any case, since other machines waiting on the file's
 * lease watch the remote tier for it. */
static void store_sibling(build_request *req, const tj__embedded_kernel *e,
                          const tj_kernel *k, double ms, int watched)
{
  tj_runtime *rt = req->rt;
  char key[TJ__KEY_HEX];
  int inserted = 0;
  key_of_entry(req, e->entry, key);
  tj__cache_row row = {key, e->entry, req->arch, TJ__PLATFORM, rt->compiler,
                       req->options, k->code, k->code_size, ms, NULL,
                       req->inputs};
  if (tj__cache_put_new(tj__runtime_cache(rt), &row, &inserted) != TJ_OK)
    store_failed(rt, e->entry);
  if (inserted || watched)
    tj__layers_publish(rt->layers, &row);
}

/* Store the compiled row and its siblings', the row at the file's key
 * last: a machine waiting on the file's lease looks for its own entry
 * once that one is in the remote tier, and finds it there.  Sibling
 * stores are not compiles: tj_stats.compiles counted the one compile. */
static void store_file(build_request *req, const tj_kernel *k, double ms)
{
  tj_runtime *rt = req->rt;
  const tj__embedded_kernel *watched = NULL; /* NULL: req's own row */
  for (size_t i = 0; i < tj__embedded_kernel_count; i++) {
    const tj__embedded_kernel *e = &tj__embedded_kernels[i];
    if (!same_code_object(req, e) || strcmp(e->entry, req->entry) == 0)
      continue;
    if (strcmp(e->entry, req->file_entry) == 0)
      watched = e;
    else
      store_sibling(req, e, k, ms, 0);
  }
  tj__cache_row row = {req->key, req->entry, req->arch, TJ__PLATFORM,
                       rt->compiler, req->options, k->code, k->code_size, ms,
                       NULL, req->inputs};
  int rc = store_compiled(rt, &row, req->entry);
  if (watched)
    store_sibling(req, watched, k, ms, 1);
  if (rc == TJ_OK)
    tidy_after_store(rt);
}

static int from_compiler(build_request *req, tj_kernel *k)
{
  tj_runtime *rt = req->rt;
  tj__compile_result res;
  char what[512];
  int rc = tj__runtime_may_compile(rt, req->entry);
  if (rc != TJ_OK)
    return rc;
  rc = tj__compile(req->source, req->file, req->arch, req->options, &res);
  snprintf(what, sizeof what, "%s (%s)", req->entry, req->file);
  if ((rc = tj__runtime_compiled(rt, rc, &res, what, req->arch)) != TJ_OK)
    return rc;
  k->code = res.code;
  k->code_size = res.size;
  k->origin = TJ_FROM_COMPILER;
  k->compile_ms = res.ms;
  if (tj__runtime_cache(rt))
    store_file(req, k, res.ms);
  return TJ_OK;
}

/* A miss in every layer: say why (explain.c), and keep the record of the
 * key's inputs for the rows the compile stores. */
static void explain_miss(build_request *req, uint64_t since)
{
  req->inputs = tj__inputs_record(req->source, req->source_len, NULL, 0,
                                  NULL);
  tj__explain_request q = {req->entry, req->key, req->entry, NULL, 0, NULL,
                           0, req->arch, req->rt->compiler, req->options,
                           req->inputs};
  if (req->inputs)
    tj__explain_miss(req->rt, &q, since);
}

static int build_kernel(void *ctx, tj_kernel **out)
{
  build_request *req = ctx;
  tj_runtime *rt = req->rt;
  int rc = tj__runtime_may_build(rt, req->entry);
  if (rc != TJ_OK)
    return rc;
  double t0 = tj__trace_start(rt);
  if (!req->key[0])
    compute_key(rt, req);
  tj__trace_add(rt, TJ__TRACE_KEY, t0);
  tj_kernel *k = calloc(1, sizeof *k);
  if (!k || !(k->entry = strdup(req->entry))) {
    free(k);
    return tj__fail(rt, TJ_ENOMEM, "out of memory");
  }
  k->rt = rt;
  memcpy(k->key, req->key, sizeof k->key);
  t0 = tj__trace_start(rt);
  uint64_t said = tj__messages_clock();
  rc = from_cache(req, k);
  tj__trace_add(rt, TJ__TRACE_LOOKUP, t0);
  t0 = tj__trace_start(rt);
  if (rc == TJ_ENOENT && !req->cache_only) { /* one compile per file */
    tj__once once;
    explain_miss(req, said);
    find_file_key(req);
    if (tj__once_begin(rt, req->file_key, &once))
      rc = from_cache(req, k); /* its own key: the holder stored them all */
    if (rc == TJ_ENOENT)
      rc = from_compiler(req, k);
    tj__once_end(rt, &once);
  }
  tj__trace_add(rt, TJ__TRACE_COMPILE, t0);
  t0 = tj__trace_start(rt);
  if (rc == TJ_OK && !rt->compile_only) {
    char err[512];
    tj__device_make_current(&rt->device);
    rc = tj__module_load(k->code, k->entry, &k->module, &k->function, err,
                         sizeof err);
    if (rc != TJ_OK)
      tj__fail(rt, rc, "%s", err);
  }
  tj__trace_add(rt, TJ__TRACE_LOAD, t0);
  free(req->inputs);
  req->inputs = NULL;
  tj__trace_count(rt, &rt->trace_kernels);
  if (rc != TJ_OK) {
    free(k->code);
    free(k->entry);
    free(k);
    return rc;
  }
  *out = k;
  return TJ_OK;
}

static int get_or_build(build_request *req, int kind, const char *name,
                        tj_kernel **out)
{
  int memory_hit = 0;
  int rc = tj__modtable_get(req->rt->table, kind, name, build_kernel, req, out,
                            &memory_hit);
  if (memory_hit)
    __atomic_fetch_add(&req->rt->stats.memory_hits, 1, __ATOMIC_RELAXED);
  return rc;
}

/* ------------------------------------------------------- public getters */

/* tj_kernel_get, or fail with the name unknown or the kernel neither in
 * memory nor in the cache: cache_only never compiles. */
static int embedded_get(tj_runtime *rt, const char *name, int cache_only,
                        tj_kernel **out)
{
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  if (!name || !out)
    return tj__fail(rt, TJ_EINVAL, "tj_kernel_get: %s is NULL",
                    !name ? "name" : "the kernel output pointer");
  const tj__embedded_kernel *e = tj__embedded_find(name);
  if (!e)
    return tj__fail(rt, TJ_ENOENT, "no embedded kernel is named '%.128s' "
                    "(tokitai-jit --list-kernels --all names them)", name);
  /* The key is computed only on a miss: a hit is a lookup by name. */
  build_request req = {rt, e->source, e->source_len, e->file, e->entry, "", "",
                       tj__embedded_arch(rt, e),
                       cache_only || tj__built_only_now(), NULL, "", NULL};
  return get_or_build(&req, KIND_EMBEDDED, name, out);
}

int tj_kernel_get(tj_runtime *rt, const char *name, tj_kernel **out)
{
  return embedded_get(rt, name, 0, out);
}

int tj__kernel_get_built(tj_runtime *rt, const char *name, tj_kernel **out)
{
  return embedded_get(rt, name, 1, out);
}

int tj_kernel_compile(tj_runtime *rt, const char *source, const char *entry,
                      const char *options, tj_kernel **out)
{
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  if (!source || !entry || !out)
    return tj__fail(rt, TJ_EINVAL, "tj_kernel_compile: %s is NULL",
                    !source ? "source" : !entry ? "entry" : "the kernel output pointer");
  if (options && strnlen(options, MAX_OPTIONS_BYTES + 1) > MAX_OPTIONS_BYTES)
    return tj__fail(rt, TJ_ERANGE, "tj_kernel_compile: options are over the "
                    "limit of %d bytes", MAX_OPTIONS_BYTES);
  char **argv = NULL;
  int argc = 0;
  if (tj__options_split(options, &argv, &argc) != TJ_OK)
    return tj__fail(rt, TJ_ENOMEM, "out of memory");
  tj_module_source src = {sizeof src, source, NULL, (const char *const *)argv,
                          argc, NULL, 0, &entry, 1};
  tj_module *m = NULL;
  int rc = tj__module_get_for(rt, &src, NULL, &m);
  free(argv);
  return rc == TJ_OK ? tj_module_kernel(m, entry, out) : rc;
}

int tj_launch(const tj_kernel *k, tj_dim3 grid, tj_dim3 block,
              unsigned shared_bytes, void *stream, void **args)
{
  if (!k || !grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z)
    return TJ_EINVAL;
  return tj__launch_kernel(k, grid, block, shared_bytes, stream, args, 0);
}

int tj__launch_kernel(const tj_kernel *k, tj_dim3 grid, tj_dim3 block,
                      unsigned shared_bytes, void *stream, void **args,
                      int early)
{
  if (!k->function)
    return TJ_ENODEVICE;
  const unsigned g[3] = {grid.x, grid.y, grid.z};
  const unsigned b[3] = {block.x, block.y, block.z};
  return tj__launch(k->function, g, b, shared_bytes, stream, args, early);
}

/* The name the entry has in the code object: a module's entries may be
 * name expressions, lowered by the compiler. */
static const char *kernel_symbol(const tj_kernel *k)
{
  return k->owner && k->entry ? k->owner->lowered[k->index] : k->entry;
}

/* What the kernel asks of the GPU, read from its code once, at the first
 * ask, and kept with the kernel: the kernel is shared, so under the lock. */
static void kernel_resources(const tj_kernel *k, tj_kernel_resources *out)
{
  tj_kernel *w = (tj_kernel *)k; /* only its resources, under the lock */
  pthread_mutex_lock(&k->rt->lock);
  if (!w->resources_read) {
    tj__code_resources(k->code, k->code_size, kernel_symbol(k), &w->resources);
    w->resources_read = 1;
  }
  *out = w->resources;
  pthread_mutex_unlock(&k->rt->lock);
}

int tj_kernel_get_info(const tj_kernel *k, tj_kernel_info *info)
{
  if (!k || !info)
    return TJ_EINVAL;
  tj_kernel_info i = {k->entry, k->key, k->code, k->code_size, k->origin,
                      k->compile_ms, {0}, {0}};
  kernel_resources(k, &i.resources);
  *info = i;
  return TJ_OK;
}

void *tj_kernel_function(const tj_kernel *k)
{
  return k ? k->function : NULL;
}
