/*
 * cli_gpu.c: the tokitai-jit commands that need the compiler or a GPU:
 * --info, --list-kernels, --warm, --run; and --version, which names the
 * compiler.  Like the rest of the command,
 * a client of the public API only.
 */
#include "config.h"
#include "cli_commands.h"
#include "cli_format.h"
#include "cli_jobs.h"
#include "tokitai-jit.h"
#include "tokitai-jit/kernels.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RUN_DEFAULT_N (1u << 20)   /* elements of an elementwise kernel */
#define RUN_DEFAULT_GEMM_N 512     /* M = N = K of gemm_f16 */

static int kernel_known(const char *name)
{
  for (size_t i = 0; i < tj_embedded_count(); i++)
    if (strcmp(tj_embedded_name(i), name) == 0)
      return 1;
  return 0;
}

static int unknown_kernel(const char *name)
{
  cli_error("no embedded kernel is named '%s' (" PROGRAM " --list-kernels "
            "--all lists them)", name);
  return EXIT_FAIL;
}

static int is_configuration(size_t i)
{
  return (tj_embedded_flags(i) & TJ_EMBEDDED_CONFIGURATION) != 0;
}

/* --info and --list-kernels show the kernels a program calls; with --all,
 * also the configurations that a call chooses among. */
static int listed(const cli_options *o, size_t i)
{
  return o->all || !is_configuration(i);
}

/* ------------------------------------------------------------ --list-kernels */

/* The launch contracts of <tokitai-jit/kernels.h>, generated from the
 * kernel sources. */
typedef struct contract {
  const char *name, *file, *signature;
  unsigned block[3], shared_bytes;
  const char *grid, *alignment, *notes;
} contract;

static const contract contracts[] = {
#define CLI_CONTRACT(name, file, sig, bx, by, bz, shared, grid, align, notes) \
  {#name, file, sig, {bx, by, bz}, shared, grid, align, notes},
  TJ_KERNEL_CONTRACTS(CLI_CONTRACT)
#undef CLI_CONTRACT
};

static const contract *find_contract(const char *name)
{
  for (size_t i = 0; i < sizeof contracts / sizeof contracts[0]; i++)
    if (strcmp(contracts[i].name, name) == 0)
      return &contracts[i];
  return NULL;
}

static void print_contract_json(const char *name, int configuration,
                                const contract *c)
{
  printf("{\"name\": ");
  cli_json_string(stdout, name);
  printf(", \"configuration\": %s", configuration ? "true" : "false");
  cli_json_member(stdout, "file", c ? c->file : NULL);
  cli_json_member(stdout, "signature", c ? c->signature : NULL);
  if (c)
    printf(", \"block\": [%u, %u, %u], \"shared_bytes\": %u", c->block[0],
           c->block[1], c->block[2], c->shared_bytes);
  else
    printf(", \"block\": null, \"shared_bytes\": null");
  cli_json_member(stdout, "grid", c ? c->grid : NULL);
  cli_json_member(stdout, "alignment", c ? c->alignment : NULL);
  cli_json_member(stdout, "notes", c ? c->notes : NULL);
  putchar('}');
}

/* The name alone on its line, so that scripts can take the names with
 * grep -v '^ '; the contract indented under it. */
static void print_contract(const char *name, const contract *c)
{
  puts(name);
  if (!c) {
    puts("  (no contract)");
    return;
  }
  printf("  %-10s %s\n", "signature", c->signature);
  printf("  %-10s %u x %u x %u threads\n", "block", c->block[0], c->block[1],
         c->block[2]);
  printf("  %-10s %s\n", "grid", c->grid);
  printf("  %-10s %u bytes of dynamic shared memory\n", "shared",
         c->shared_bytes);
  printf("  %-10s %s\n", "alignment", c->alignment);
  printf("  %-10s %s\n", "notes", c->notes);
}

int cli_list_kernels(const cli_options *o)
{
  size_t shown = 0;
  if (o->json)
    putchar('[');
  for (size_t i = 0; i < tj_embedded_count(); i++) {
    const char *name = tj_embedded_name(i);
    if (!listed(o, i))
      continue;
    if (o->json) {
      fputs(shown ? ",\n  " : "\n  ", stdout);
      print_contract_json(name, is_configuration(i), find_contract(name));
    } else {
      if (shown)
        putchar('\n');
      print_contract(name, find_contract(name));
      if (is_configuration(i))
        printf("  %-10s %s\n", "kind", "configuration (a call chooses it; not "
               "called by name)");
    }
    shown++;
  }
  if (o->json)
    puts("\n]");
  return EXIT_OK;
}

/* ------------------------------------------------------------ --version */

/* "version", "platform" and "compiler" for --version and --info. */
static void print_build_json(void)
{
  printf("\"version\": ");
  cli_json_string(stdout, tj_version());
  cli_json_member(stdout, "platform", tj_platform());
  cli_json_member(stdout, "compiler", tj_compiler());
}

int cli_version(const cli_options *o)
{
  if (!o->json) {
    printf(PROGRAM " %s\nplatform: %s\ncompiler: %s\n", tj_version(),
           tj_platform(), tj_compiler());
    return EXIT_OK;
  }
  putchar('{');
  print_build_json();
  printf("}\n");
  return EXIT_OK;
}

/* ------------------------------------------------------------ --info */

/* The cache path and whether it exists, without creating it. */
static void cache_facts(const cli_options *o, char *path, size_t len,
                        int *exists, uint64_t *entries)
{
  tj_cache *c = NULL;
  tj_cache_stats s;
  int rc = tj_cache_open(&c, o->cache_path, TJ_CACHE_READONLY | o->cache_flags);
  snprintf(path, len, "%s", tj_cache_path(c) ? tj_cache_path(c) : "(none)");
  *exists = rc != TJ_ENOENT;
  *entries = rc == TJ_OK && tj_cache_get_stats(c, &s) == TJ_OK ? s.entries : 0;
  tj_cache_close(c);
}

static void print_device_json(int i, const tj_device_info *p)
{
  printf("%s{\"ordinal\": %d, \"name\": ", i ? ", " : "", i);
  cli_json_string(stdout, p->name);
  cli_json_member(stdout, "arch", p->arch);
  printf(", \"memory_bytes\": %" PRIu64 ", \"compute_units\": %d, "
         "\"clock_khz\": %d}", p->memory_bytes, p->compute_units, p->clock_khz);
}

static void print_device(int i, const tj_device_info *p)
{
  char label[32], mem[32], clock[32] = "";
  snprintf(label, sizeof label, "device %d", i);
  cli_format_size(p->memory_bytes, mem, sizeof mem);
  if (p->clock_khz > 0)
    snprintf(clock, sizeof clock, ", %d MHz", p->clock_khz / 1000);
  cli_field(label, "%s: %s, %s, %d compute units%s", p->name, p->arch, mem,
            p->compute_units, clock);
}

static void print_devices(const cli_options *o, int count)
{
  tj_device_info p;
  if (o->json)
    printf(", \"devices\": [");
  else if (count == 0)
    cli_field("devices", "none visible (compile-only: " PROGRAM " --warm "
              "--arch ARCH still compiles)");
  for (int i = 0; i < count; i++) {
    memset(&p, 0, sizeof p);
    if (tj_device_get_info(i, &p) != TJ_OK)
      snprintf(p.name, sizeof p.name, "(its properties could not be read)");
    if (o->json)
      print_device_json(i, &p);
    else
      print_device(i, &p);
  }
  if (o->json)
    putchar(']');
}

/* The archs --warm --arch and --compile --arch take on this machine. */
static void print_archs(const cli_options *o)
{
  size_t n = tj_compiler_arch_count();
  if (o->json) {
    printf(", \"archs\": [");
    for (size_t i = 0; i < n; i++) {
      fputs(i ? ", " : "", stdout);
      cli_json_string(stdout, tj_compiler_arch(i));
    }
    putchar(']');
    return;
  }
  printf("%-20s", "compiler archs");
  for (size_t i = 0; i < n; i++)
    printf("%s%s", i ? ", " : "", tj_compiler_arch(i));
  puts(n ? "" : "(the compiler listed none)");
}

/* The names of the embedded kernels that are (configurations 1) or are
 * not configurations, ", " between them. */
static void print_names(int configurations)
{
  size_t n = 0;
  for (size_t i = 0; i < tj_embedded_count(); i++)
    if (is_configuration(i) == configurations)
      printf("%s%s", n++ ? ", " : "", tj_embedded_name(i));
}

static void print_kernel_names(const cli_options *o)
{
  size_t n = 0;
  if (o->json) {
    printf(", \"kernels\": [");
    for (size_t i = 0; i < tj_embedded_count(); i++) {
      if (!listed(o, i))
        continue;
      fputs(n++ ? ", " : "", stdout);
      cli_json_string(stdout, tj_embedded_name(i));
    }
    putchar(']');
    return;
  }
  printf("%-20s", "embedded kernels");
  print_names(0);
  putchar('\n');
  for (size_t i = 0; i < tj_embedded_count(); i++)
    n += is_configuration(i);
  if (n && o->all) {
    printf("%-20s", "configurations");
    print_names(1);
    putchar('\n');
  } else if (n) {
    cli_field("configurations", "%zu (--all lists them)", n);
  }
}

int cli_info(const cli_options *o)
{
  char path[4096];
  const char *compiler = tj_compiler();
  int exists, count = tj_device_count();
  uint64_t entries;
  cache_facts(o, path, sizeof path, &exists, &entries);
  if (o->json) {
    putchar('{');
    print_build_json();
    cli_json_member(stdout, "cache_path", path);
    printf(", \"cache_exists\": %s", exists ? "true" : "false");
  } else {
    cli_field("version", "%s", tj_version());
    cli_field("platform", "%s", tj_platform());
    cli_field("compiler", "%s", compiler);
    if (exists)
      cli_field("cache", "%s (%" PRIu64 " %s)", path, entries,
                entries == 1 ? "entry" : "entries");
    else
      cli_field("cache", "%s (not created yet)", path);
  }
  print_archs(o);
  print_devices(o, count);
  print_kernel_names(o);
  if (o->json)
    puts("}");
  return EXIT_OK;
}

/* ------------------------------------------------------------ --warm */

/* Kernel number i is kernel i % nkernels for arch i / nkernels: the order
 * of the output whatever the order the compiles end in.
 *
 * The library compiles a whole kernels/ file at once and stores its code
 * under every entry of the file, so the jobs run in two passes: first
 * one entry of each file for each arch (in parallel), then the rest,
 * which the first pass has put in the cache.  Job j runs kernel number
 * order[j]; the first pass is jobs 0 to nfirst - 1. */
typedef struct warm_plan {
  const cli_options *o;
  const char *const *kernels;
  size_t nkernels;
  size_t *order;        /* job -> kernel number */
  size_t *lead;         /* kernel number -> its file's first-pass number */
  size_t nfirst;
  tj_runtime *rts[CLI_MAX_ARCHS]; /* the command's, one per arch */
  int nrts;
  /* In a worker process: its own compile-only runtimes, by arch. */
  tj_runtime *own[CLI_MAX_ARCHS];
  int nown;
  size_t compiled, with_file, cached, failed;
  double compile_ms;
  /* The GEMM configurations (tj_gemm_f16_configuration), in the first
   * pass beside the files' first entries, as jobs of the same workers:
   * job total + a * CONFIG_SLOTS + i is configuration i for arch a, of
   * nconfigs[a].  How many, compiled and found. */
  size_t total;
  size_t nconfigs[CLI_MAX_ARCHS];
  size_t configs, configs_compiled, configs_cached;
  double configs_ms;
  char (*keys)[33];     /* of the kernels compiled: each must be stored */
  char why[1024];       /* the runtime's warning after the last compile */
} warm_plan;

/* The kernels/ file an embedded kernel comes from ("" when unknown: then
 * it is its own file). */
static const char *kernel_file(const char *name)
{
  const contract *c = find_contract(name);
  return c && c->file ? c->file : "";
}

/* w->lead and w->order for total kernel numbers; before the workers are
 * forked, since they read them.  -1 when out of memory. */
static int plan_rounds(warm_plan *w, size_t total)
{
  w->order = calloc(total + 1, sizeof *w->order);
  w->lead = calloc(total + 1, sizeof *w->lead);
  if (!w->order || !w->lead)
    return -1;
  for (size_t i = 0; i < total; i++) {
    size_t base = i - i % w->nkernels, j = base;
    const char *file = kernel_file(w->kernels[i % w->nkernels]);
    while (j < i && (!*file || strcmp(kernel_file(w->kernels[j - base]), file)))
      j++;
    w->lead[i] = j;
    if (j == i)
      w->order[w->nfirst++] = i;
  }
  for (size_t i = 0, n = w->nfirst; i < total; i++)
    if (w->lead[i] != i)
      w->order[n++] = i;
  return 0;
}

/* One runtime per arch, all opened before anything compiles, so that a
 * bad arch stops the command before it has done half its work. */
static int open_warm_runtimes(const cli_options *o, warm_plan *w)
{
  int n = o->narchs ? o->narchs : 1;
  for (int i = 0; i < n; i++) {
    const char *arch = o->narchs ? o->archs[i] : NULL;
    tj_options opts = cli_runtime_options(o, arch);
    tj_runtime *rt = NULL;
    int rc = tj_runtime_open(&rt, &opts);
    int cache_error = rc == TJ_EPERM || rc == TJ_ECACHE || rc == TJ_EIO;
    if (rc == TJ_OK && !tj_runtime_cache_path(rt)) {
      cli_error("cannot warm the cache: %s", tj_errmsg(rt));
      rc = TJ_ECACHE;
    } else if (cache_error) { /* the cache's, not the arch's: no --arch */
      cli_error("cannot warm the cache: %s", tj_errmsg(rt));
    } else if (rc != TJ_OK && arch) {
      cli_error("--arch %s: %s", arch, tj_errmsg(rt));
    } else if (rc != TJ_OK) {
      cli_error("cannot warm for this machine's GPU: %s (give --arch to "
                "compile without one)", tj_errmsg(rt));
    }
    if (rc != TJ_OK) {
      tj_runtime_close(rt);
      return EXIT_FAIL;
    }
    w->rts[w->nrts++] = rt;
  }
  return EXIT_OK;
}

/* The arch of kernel number i. */
static const char *warm_arch_of(const warm_plan *w, size_t i)
{
  return tj_runtime_arch(w->rts[i / w->nkernels]);
}

/* Room for each arch's configurations among the job numbers: more than
 * tj_gemm_f16_configurations gives on any arch. */
#define CONFIG_SLOTS 256

static const char *warm_arch(void *ctx, size_t job)
{
  warm_plan *w = ctx;
  if (job >= w->total)
    return tj_runtime_arch(w->rts[(job - w->total) / CONFIG_SLOTS]);
  return warm_arch_of(w, w->order[job]);
}

static void warm_label(void *ctx, size_t job, char *buf, size_t len)
{
  warm_plan *w = ctx;
  if (job >= w->total) {
    snprintf(buf, len, "GEMM configuration %zu for %s",
             (job - w->total) % CONFIG_SLOTS, warm_arch(ctx, job));
    return;
  }
  size_t i = w->order[job];
  snprintf(buf, len, "%s for %s", w->kernels[i % w->nkernels],
           warm_arch_of(w, i));
}

/* A worker's compile-only runtime for arch: the key is the one the
 * command's runtime for the same arch computes, device or not. */
static tj_runtime *worker_runtime(warm_plan *w, const char *arch,
                                  cli_job_result *res)
{
  for (int i = 0; i < w->nown; i++)
    if (strcmp(tj_runtime_arch(w->own[i]), arch) == 0)
      return w->own[i];
  tj_options opts = cli_runtime_options(w->o, arch);
  tj_runtime *rt = NULL;
  int rc = tj_runtime_open(&rt, &opts);
  if (rc == TJ_OK && w->nown < CLI_MAX_ARCHS)
    return w->own[w->nown++] = rt;
  res->status = rc == TJ_OK ? TJ_ENOMEM : rc;
  if (asprintf(&res->err, "--arch %s: %s", arch, tj_errmsg(rt)) < 0)
    res->err = NULL;
  tj_runtime_close(rt);
  return NULL;
}

static void warm_worker_exit(void *ctx)
{
  warm_plan *w = ctx;
  for (int i = 0; i < w->nown; i++)
    tj_runtime_close(w->own[i]);
  w->nown = 0;
}

/* res for what rt's get of what returned (rc, k).  res->out: after a
 * compile, the runtime's warning (a store that failed), which
 * check_stored gives as the reason a row is missing. */
static void warm_result(tj_runtime *rt, int rc, tj_kernel *k,
                        const char *what, cli_job_result *res)
{
  tj_kernel_info info;
  if (rc == TJ_OK)
    rc = tj_kernel_get_info(k, &info);
  res->status = rc;
  if (rc != TJ_OK) {
    if (asprintf(&res->err, "%s for %s: %s: %s", what, tj_runtime_arch(rt),
                 tj_strerror(rc), tj_errmsg(rt)) < 0)
      res->err = NULL;
    return;
  }
  res->origin = info.origin;
  res->compile_ms = info.compile_ms;
  snprintf(res->key, sizeof res->key, "%s", info.key);
  if (info.origin != TJ_FROM_CACHE && *tj_errmsg(rt))
    res->out = strdup(tj_errmsg(rt));
}

/* Kernel number i. */
static void warm_one(warm_plan *w, size_t i, const char *arch, int in_worker,
                     cli_job_result *res)
{
  const char *name = w->kernels[i % w->nkernels];
  tj_runtime *rt = in_worker ? worker_runtime(w, arch, res)
                             : w->rts[i / w->nkernels];
  tj_kernel *k = NULL;
  if (!rt)
    return;
  int rc = tj_kernel_get(rt, name, &k);
  warm_result(rt, rc, k, name, res);
}

/* Configuration i of tj_gemm_f16 for arch, as warm_one does a kernel. */
static void warm_config(warm_plan *w, size_t i, const char *arch,
                        int in_worker, cli_job_result *res)
{
  tj_runtime *rt = NULL;
  if (in_worker)
    rt = worker_runtime(w, arch, res);
  for (int a = 0; !in_worker && a < w->nrts; a++)
    if (strcmp(tj_runtime_arch(w->rts[a]), arch) == 0)
      rt = w->rts[a];
  tj_kernel *k = NULL;
  char what[64];
  snprintf(what, sizeof what, "tj_gemm_f16's configuration %zu", i);
  if (!rt)
    return;
  int rc = tj_gemm_f16_configuration(rt, i, &k);
  warm_result(rt, rc, k, what, res);
}

static void warm_job(void *ctx, size_t job, const char *arch, int in_worker,
                     cli_job_result *res)
{
  warm_plan *w = ctx;
  if (job >= w->total)
    warm_config(w, (job - w->total) % CONFIG_SLOTS, arch, in_worker, res);
  else
    warm_one(w, w->order[job], arch, in_worker, res);
}

/* The workers compiled for the GPU's arch without a GPU; the kernels of
 * --warm without --arch are also loaded on it here, from the cache (a
 * compile here would mean the worker's row did not serve, and counts). */
static void warm_load_here(warm_plan *w, cli_job_result *res, size_t total)
{
  for (size_t i = 0; i < total; i++) {
    cli_job_result here;
    if (res[i].status != TJ_OK)
      continue;
    memset(&here, 0, sizeof here);
    warm_one(w, i, warm_arch_of(w, i), 0, &here);
    if (here.status == TJ_OK && here.origin == TJ_FROM_CACHE) {
      cli_job_result_free(&here);
      continue;
    }
    cli_job_result_free(&res[i]);
    res[i] = here;
  }
}

static void warm_tally(warm_plan *w, cli_job_result *res, size_t total)
{
  for (size_t i = 0; i < total; i++) {
    const cli_job_result *r = &res[i];
    if (r->status != TJ_OK) {
      cli_error("%s", r->err ? r->err : tj_strerror(r->status));
      w->failed++;
    } else if (r->origin == TJ_FROM_CACHE && w->lead[i] != i &&
               res[w->lead[i]].status == TJ_OK &&
               res[w->lead[i]].origin != TJ_FROM_CACHE) {
      w->with_file++; /* stored by the compile of its file's first entry */
    } else if (r->origin == TJ_FROM_CACHE) {
      w->cached++;
    } else {
      snprintf(w->keys[w->compiled], sizeof w->keys[0], "%s", r->key);
      w->compiled++;
      w->compile_ms += r->compile_ms;
      snprintf(w->why, sizeof w->why, "%s", r->out ? r->out : "");
    }
  }
}

typedef struct stored_ctx {
  const warm_plan *w;
  size_t found;
} stored_ctx;

static int count_stored(const tj_cache_entry *e, void *arg)
{
  stored_ctx *s = arg;
  for (size_t i = 0; s->w->keys && i < s->w->compiled; i++)
    if (strcmp(s->w->keys[i], e->key) == 0)
      s->found++;
  return 0;
}

/* Filling the cache is the whole job of --warm: every kernel it compiled
 * must now be in the file.  A read-only mount, an immutable file or a full
 * disk lets the compiles succeed and the stores fail, and the runtime says
 * so; a row missing without a word was evicted by another process. */
static int check_stored(const cli_options *o, const warm_plan *w,
                        const char *path)
{
  tj_cache *c = NULL;
  stored_ctx s = {w, 0};
  if (w->compiled == 0)
    return EXIT_OK;
  int rc = tj_cache_open(&c, path, TJ_CACHE_READONLY | o->cache_flags);
  if (rc == TJ_OK)
    rc = tj_cache_list(c, count_stored, &s);
  if (rc != TJ_OK || (s.found < w->compiled && w->why[0])) {
    cli_error("stored %zu of the %zu kernels compiled in %s: %s", s.found,
              w->compiled, path, rc != TJ_OK ? tj_cache_errmsg(c) : w->why);
    tj_cache_close(c);
    return EXIT_FAIL;
  }
  tj_cache_close(c);
  return EXIT_OK;
}

static void warm_summary(const warm_plan *w, const char *path)
{
  char ms[32];
  cli_format_ms(w->compile_ms, ms, sizeof ms);
  printf("warmed %zu %s for ", w->nkernels, w->nkernels == 1 ? "kernel" : "kernels");
  for (int i = 0; i < w->nrts; i++)
    printf("%s%s", i ? ", " : "", tj_runtime_arch(w->rts[i]));
  printf(" in %s: %zu compiled (%s), %zu stored with their file, %zu "
         "already cached", path, w->compiled - w->configs_compiled, ms,
         w->with_file, w->cached);
  if (w->failed)
    printf(", %zu failed", w->failed);
  putchar('\n');
  if (!w->configs)
    return;
  cli_format_ms(w->configs_ms, ms, sizeof ms);
  printf("warmed %zu GEMM configurations in %s: %zu compiled (%s), %zu "
         "already cached\n", w->configs, path, w->configs_compiled, ms,
         w->configs_cached);
}

/* w->keys with room for one more compiled kernel's key; 0, said, when out
 * of memory. */
static int room_for_key(warm_plan *w)
{
  char (*keys)[33] = realloc(w->keys, (w->compiled + 2) * sizeof *keys);
  if (!keys)
    cli_error("out of memory");
  else
    w->keys = keys;
  return keys != NULL;
}

/* The first pass's jobs: one entry of each file (jobs 0 to nfirst - 1)
 * and, unless kernels were named, the configurations of tj_gemm_f16 that
 * the library compiles per configuration rather than embeds (on sm_90
 * its Hopper ones) for each arch that has them, as the library lists
 * them (tj_gemm_f16_configuration), so that a warm cache compiles nothing
 * for tj_gemm_f16's common shapes.  One pass: no compile waits for
 * another pass to end.  Malloc'd, *n of them; NULL when out of memory. */
static size_t *first_pass(warm_plan *w, size_t *n)
{
  size_t *ids = calloc(w->nfirst + (size_t)w->nrts * CONFIG_SLOTS + 1,
                       sizeof *ids);
  if (!ids)
    return NULL;
  *n = 0;
  for (size_t j = 0; j < w->nfirst; j++)
    ids[(*n)++] = j;
  for (int a = 0; !w->o->nkernels && a < w->nrts; a++) {
    size_t c = tj_gemm_f16_configurations(w->rts[a]);
    w->nconfigs[a] = c < CONFIG_SLOTS ? c : CONFIG_SLOTS;
    for (size_t i = 0; i < w->nconfigs[a]; i++)
      ids[(*n)++] = w->total + (size_t)a * CONFIG_SLOTS + i;
  }
  return ids;
}

/* The configurations' results (res at their job numbers, freed here):
 * those compiled in the workers for this machine's GPU are loaded here
 * too, from the cache, as warm_load_here does the kernels. */
static void warm_config_results(warm_plan *w, cli_pool *pool,
                                cli_job_result *res)
{
  for (int a = 0; a < w->nrts; a++) {
    size_t first = w->total + (size_t)a * CONFIG_SLOTS;
    for (size_t j = first; j < first + w->nconfigs[a]; j++) {
      cli_job_result *r = &res[j];
      if (r->status == TJ_OK && cli_pool_workers(pool) &&
          w->o->narchs == 0) {
        cli_job_result here;
        memset(&here, 0, sizeof here);
        warm_config(w, j - first, tj_runtime_arch(w->rts[a]), 0, &here);
        if (here.status != TJ_OK || here.origin != TJ_FROM_CACHE) {
          cli_job_result_free(r);
          *r = here;
        } else {
          cli_job_result_free(&here);
        }
      }
      w->configs++;
      if (r->status != TJ_OK) {
        cli_error("%s", r->err ? r->err : tj_strerror(r->status));
        w->failed++;
      } else if (r->origin == TJ_FROM_CACHE) {
        w->configs_cached++;
      } else if (room_for_key(w)) {
        snprintf(w->keys[w->compiled++], sizeof w->keys[0], "%s", r->key);
        w->configs_compiled++;
        w->configs_ms += r->compile_ms;
        snprintf(w->why, sizeof w->why, "%s", r->out ? r->out : "");
      } else {
        w->failed++;
      }
      cli_job_result_free(r);
    }
  }
}

/* Compile every job, in worker processes when -j allows: the first pass
 * (first_pass), then the files' other entries, which the first has put in
 * the cache (see warm_plan); load them here when they are for this
 * machine's GPU.  by_job has room for every job number; res ends with the
 * kernels in kernel-number order. */
static void warm_all(warm_plan *w, cli_pool *pool, cli_job_result *res,
                     cli_job_result *by_job)
{
  size_t total = w->total, n = 0;
  size_t *ids = first_pass(w, &n);
  if (!ids) {
    cli_error("out of memory");
    w->failed++;
    return;
  }
  cli_jobs jobs = {n, warm_job, warm_arch, warm_label, w, 0, ids};
  cli_pool_run(pool, &jobs, by_job);
  free(ids);
  cli_jobs rest = {total, warm_job, warm_arch, warm_label, w, w->nfirst,
                   NULL};
  cli_pool_run(pool, &rest, by_job);
  for (size_t j = 0; j < total; j++)
    res[w->order[j]] = by_job[j];
  if (cli_pool_workers(pool) && w->o->narchs == 0)
    warm_load_here(w, res, total);
  warm_tally(w, res, total);
  warm_config_results(w, pool, by_job);
}

/* The kernels --warm compiles: those named, or every embedded one;
 * malloc'd.  NULL, said, for a name that is not an embedded kernel or
 * when out of memory. */
static const char **warm_names(const cli_options *o, size_t *n)
{
  for (int i = 0; i < o->nkernels; i++)
    if (!kernel_known(o->kernels[i])) {
      unknown_kernel(o->kernels[i]);
      return NULL;
    }
  *n = o->nkernels ? (size_t)o->nkernels : tj_embedded_count();
  const char **names = calloc(*n + 1, sizeof *names);
  if (!names)
    cli_error("out of memory");
  for (size_t i = 0; names && i < *n; i++)
    names[i] = o->nkernels ? o->kernels[i] : tj_embedded_name(i);
  return names;
}

int cli_warm(const cli_options *o)
{
  if (cli_gemm_command(o))
    return cli_warm_gemm(o);
  warm_plan w = {0};
  const char **names = warm_names(o, &w.nkernels);
  if (!names)
    return EXIT_FAIL;
  w.o = o;
  w.kernels = names;
  size_t total = w.nkernels * (size_t)(o->narchs ? o->narchs : 1);
  w.total = total;
  int planned = plan_rounds(&w, total) == 0;
  /* The workers first: before this process opens a runtime or a GPU. */
  cli_pool *pool = cli_pool_start(o, total, warm_job, warm_worker_exit, &w);
  cli_job_result *res = calloc(total + 1, sizeof *res);
  cli_job_result *by_job =
      calloc(total + (size_t)(o->narchs ? o->narchs : 1) * CONFIG_SLOTS + 1,
             sizeof *by_job);
  w.keys = calloc(total + 1, sizeof *w.keys);
  int ok = planned && pool && res && by_job && w.keys;
  int rc = ok ? open_warm_runtimes(o, &w) : EXIT_FAIL;
  if (!ok)
    cli_error("out of memory");
  if (rc == EXIT_OK)
    warm_all(&w, pool, res, by_job);
  cli_pool_finish(pool);
  if (rc == EXIT_OK)
    rc = check_stored(o, &w, tj_runtime_cache_path(w.rts[0]));
  if (rc == EXIT_OK && !o->quiet)
    warm_summary(&w, tj_runtime_cache_path(w.rts[0]));
  for (size_t i = 0; res && i < total; i++)
    cli_job_result_free(&res[i]);
  free(res);
  free(by_job); /* its results moved to res */
  free(w.keys);
  free(w.order);
  free(w.lead);
  free(names);
  for (int a = 0; a < w.nrts; a++)
    tj_runtime_close(w.rts[a]); /* records the hits and misses */
  return rc == EXIT_OK && !w.failed ? EXIT_OK : EXIT_FAIL;
}

/* ------------------------------------------------------------ --run */

/* --run --json prints the report's keys every time, and "error": null, or
 * what stopped the run (no GPU, say), with the figures it could not
 * measure null.  text is tj_report_json's object, reopened before its
 * closing brace. */
static void print_run_json(const char *text, const char *error)
{
  const char *end = strrchr(text, '}');
  size_t len = end ? (size_t)(end - text) : 0;
  while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
    len--;
  fwrite(text, 1, len, stdout);
  printf(",\n  \"error\": ");
  cli_json_string_or_null(stdout, error);
  printf("\n}\n");
}

/* The report of a run that could not happen: the request, and nothing
 * measured. */
static void print_unrun_json(const cli_options *o, uint64_t n,
                             const char *error)
{
  tj_report *r = calloc(1, sizeof *r);
  char *text = NULL;
  if (r) {
    snprintf(r->kernel, sizeof r->kernel, "%s", o->run_kernel);
    r->n = n;
    r->seed = o->seed;
    r->first_call_ms = NAN;
    if (cli_gemm_command(o)) {
      r->m = o->shapes[0][0];
      r->n_cols = o->shapes[0][1];
      r->k = o->shapes[0][2];
    }
    r->max_abs_error = r->rel_l2_error = NAN;
    r->max_abs_tolerance = r->rel_l2_tolerance = NAN;
    r->kernel_ms = r->bytes_moved = r->gb_per_s = r->tflop_per_s = NAN;
    snprintf(r->compiler, sizeof r->compiler, "%s", tj_compiler());
    snprintf(r->non_claims, sizeof r->non_claims,
             "nothing ran, so nothing was shown (see error)");
    text = tj_report_json(r);
  }
  if (text)
    print_run_json(text, error);
  else
    cli_error("out of memory formatting the report");
  free(text);
  free(r);
}

static int print_report(const cli_options *o, const tj_report *r)
{
  char *text = o->json ? tj_report_json(r) : tj_report_markdown(r);
  if (!text) {
    cli_error("out of memory formatting the report");
    return EXIT_FAIL;
  }
  if (o->json) {
    print_run_json(text, r->within_tolerance ? NULL
                                             : "disagrees with the CPU oracle");
  } else {
    fputs(text, stdout);
    if (*text && text[strlen(text) - 1] != '\n')
      putchar('\n');
  }
  free(text);
  if (!r->within_tolerance)
    cli_error("%s disagrees with the CPU oracle: max abs error %g (limit %g), "
              "rel L2 error %g (limit %g)", r->kernel, r->max_abs_error,
              r->max_abs_tolerance, r->rel_l2_error, r->rel_l2_tolerance);
  return r->within_tolerance ? EXIT_OK : EXIT_FAIL;
}

/* tj_verify of the kernel, or for --run gemm (grouped_gemm)
 * tj_verify_gemm (tj_verify_grouped_gemm) of the configuration the
 * options choose. */
static int verify(const cli_options *o, tj_runtime *rt, uint64_t n,
                  tj_report *r)
{
  tj_gemm_desc d;
  tj_grouped_gemm_desc g;
  int family = cli_gemm_command(o);
  if (!family)
    return tj_verify(rt, o->run_kernel, n, o->seed, r);
  if (family == CLI_GEMM_PLAIN) {
    cli_gemm_desc(o, 0, &d);
    return tj_verify_gemm(rt, &d, o->seed, r);
  }
  int32_t *offs = cli_grouped_routing(o, 0);
  if (!offs)
    return TJ_ENOMEM;
  cli_grouped_desc(o, 0, &g);
  g.offs = offs;
  int rc = tj_verify_grouped_gemm(rt, &g, o->seed, r);
  free(offs);
  return rc;
}

int cli_run(const cli_options *o)
{
  const char *name = o->run_kernel;
  int gemm = cli_gemm_command(o);
  if (!gemm && !kernel_known(name))
    return unknown_kernel(name);
  tj_options opts = cli_runtime_options(o, NULL);
  tj_runtime *rt = NULL;
  uint64_t n = gemm ? (uint64_t)o->shapes[0][0] * (uint64_t)o->shapes[0][1]
               : o->n ? o->n : strcmp(name, "gemm_f16") == 0
                                 ? RUN_DEFAULT_GEMM_N : RUN_DEFAULT_N;
  int rc = tj_runtime_open(&rt, &opts);
  if (rc == TJ_OK) {
    tj_report *r = calloc(1, sizeof *r); /* 3 KiB: not for the stack */
    rc = r ? verify(o, rt, n, r) : TJ_ENOMEM;
    if (rc == TJ_OK || rc == TJ_EVERIFY) /* the report is written either way */
      rc = print_report(o, r) == EXIT_OK ? TJ_OK : TJ_EVERIFY;
    else
      cli_error("running %s: %s: %s", name, tj_strerror(rc), tj_errmsg(rt));
    free(r);
  } else if (rc == TJ_ENODEVICE) {
    cli_error("cannot run %s: no GPU (%s)", name, tj_errmsg(rt));
  } else {
    cli_error("cannot run %s: %s: %s", name, tj_strerror(rc), tj_errmsg(rt));
  }
  if (rc != TJ_OK && rc != TJ_EVERIFY && o->json) {
    char why[1024];
    snprintf(why, sizeof why, "%s: %s", tj_strerror(rc), tj_errmsg(rt));
    print_unrun_json(o, n, why);
  }
  tj_runtime_close(rt);
  return rc == TJ_OK ? EXIT_OK : EXIT_FAIL;
}
