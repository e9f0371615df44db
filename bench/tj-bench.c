/*
 * tj-bench: what tokitai-jit costs and how fast its kernels run, measured
 * side by side in one run on one GPU.  Prints a table and writes JSON.
 * Absolute figures hold for the machine they came from; the comparisons are
 * ratios taken in the same run.  Nothing here is asserted: this is a
 * program that prints figures, not a test.
 *
 *   tj-bench [--json FILE] [--quick] [--pilot PATH] [--arch ARCH]
 *            [--only SECTION] [--cluster N]
 *
 * Sections: cold compile (each in a new process with an empty driver
 * cache, and again with it warm), warm start in a new process with its
 * breakdown (TOKITAI_JIT_TRACE), N processes cold-starting at once (the
 * cluster: 8, 32, 64, or N alone, the pilots' five kernels each; with the remote
 * tier when TOKITAI_JIT_REMOTE is set, and then a remote hit's latency
 * against a per-user hit's), `tokitai-jit --warm -j N` for N = 1, 2, 4,
 * ... up to the processors online (jobs: wall time, speed-up against
 * N = 1, compiles; the command is $TJ_BENCH_CLI or the one beside
 * tj-bench or in its build tree; the device's arch, or --arch ARCH, which
 * with --only jobs needs no GPU), hot in-memory hit,
 * launch cost against a raw hipModuleLaunchKernel, memory-bound kernels
 * against a device-to-device copy, GEMM against the vendor BLAS, the GEMM
 * family's bf16 configurations against it (family), the grouped GEMM at
 * mixture-of-experts shapes against a loop of per-expert cuBLAS GEMMs
 * (grouped), the pilots' process-per-call way against the host-buffer
 * call, and the MoE permutation against a device-to-device copy (moe).
 * Only with --only cold: a GEMM's first call on a new node, with and
 * without background builds, beside torch's, then each embedded kernel's
 * cold compile (bench_cold.c).
 */
#include "config.h"
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>

extern char **environ;

/* ------------------------------------------------------------ results */

static bench_results R;

static void record(const char *section, const char *name, double value,
                   const char *unit)
{
  if (R.count < BENCH_MAX_RESULTS) {
    bench_result *r = &R.r[R.count++];
    snprintf(r->section, sizeof r->section, "%s", section);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->value = value;
    snprintf(r->unit, sizeof r->unit, "%s", unit);
  }
  printf("  %-34s %14.4f %s\n", name, value, unit);
  fflush(stdout);
}

/* ------------------------------------------------------------ children */

/* argv run as the program at path, its environment with extra (NULL
 * ended; "NAME=value" replaces NAME).  *pid; the read end of its stdout
 * (with its stderr when want_err) in *fd. */
static int spawn_program(const char *path, char *const argv[],
                         const char *const *extra, int want_err, pid_t *pid,
                         int *fd)
{
  int fds[2];
  if (pipe(fds) != 0)
    return -1;
  size_t n = 0, k = 0;
  while (environ[n])
    n++;
  while (extra && extra[k])
    k++;
  char **env = calloc(n + k + 1, sizeof *env), **e = env;
  if (!env)
    return -1;
  for (size_t i = 0; i < n; i++) {
    int replaced = 0;
    for (size_t j = 0; j < k; j++) {
      size_t len = strcspn(extra[j], "=") + 1;
      replaced |= strncmp(environ[i], extra[j], len) == 0;
    }
    if (!replaced)
      *e++ = environ[i];
  }
  for (size_t j = 0; j < k; j++)
    *e++ = (char *)extra[j];
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  if (want_err)
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  int rc = posix_spawn(pid, path, &fa, NULL, argv, env);
  posix_spawn_file_actions_destroy(&fa);
  free(env);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return -1;
  }
  *fd = fds[0];
  return 0;
}

/* The same with this program again (a --child-* side). */
static int spawn_child(char *const argv[], const char *const *extra,
                       int want_err, pid_t *pid, int *fd)
{
  return spawn_program("/proc/self/exe", argv, extra, want_err, pid, fd);
}

/* Everything a child wrote, up to len - 1 bytes, and its exit status. */
static int reap_child(pid_t pid, int fd, char *out, size_t len)
{
  size_t got = 0;
  ssize_t r;
  while (got + 1 < len && (r = read(fd, out + got, len - 1 - got)) > 0)
    got += (size_t)r;
  out[got] = '\0';
  close(fd);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Run the program at path to its end: its exit status (-1: it could not
 * be started, or did not exit), what it wrote in line. */
static int run_program_env(const char *path, char *const argv[],
                           const char *const *extra, int want_err, char *line,
                           size_t len)
{
  pid_t pid;
  int fd;
  line[0] = '\0';
  if (spawn_program(path, argv, extra, want_err, &pid, &fd) != 0)
    return -1;
  return reap_child(pid, fd, line, len);
}

static int run_child_env(char *const argv[], const char *const *extra,
                         int want_err, char *line, size_t len)
{
  return run_program_env("/proc/self/exe", argv, extra, want_err, line, len);
}

int bench_run_path(const char *path, char *const argv[],
                   const char *const *extra, char *line, size_t len)
{
  return run_program_env(path, argv, extra, 0, line, len);
}

int bench_run_child(char *const argv[], const char *const *extra, char *line,
                    size_t len)
{
  return run_child_env(argv, extra, 0, line, len);
}

/* A fresh empty directory under dir for the driver's compute cache
 * (CUDA_CACHE_PATH): a new node has none. */
static void fresh_dir(const char *dir, const char *what, int i, char *out,
                      size_t len)
{
  snprintf(out, len, "%s/%s-%d", dir, what, i);
  if (mkdir(out, 0700) != 0 && errno != EEXIST)
    die("mkdir %s: %s", out, strerror(errno));
}

/* ------------------------------------------------------------ sections */

/* The child side of a cold compile: a new process, no tokitai-jit cache,
 * the driver's compute cache as the parent set CUDA_CACHE_PATH. */
static int child_cold(const char *kernel)
{
  tj_options o = {0};
  o.flags = TJ_CACHE_DISABLE;
  tj_runtime *rt = NULL;
  tj_kernel *k;
  tj_kernel_info info;
  if (bench_open(&rt, &o) != TJ_OK)
    return 1;
  double t0 = bench_now_ms();
  int rc = tj_kernel_get(rt, kernel, &k);
  double total = bench_now_ms() - t0;
  if (rc == TJ_OK && tj_kernel_get_info(k, &info) == TJ_OK)
    printf("%.6f %.6f\n", info.compile_ms, total);
  tj_runtime_close(rt);
  return rc == TJ_OK ? 0 : 1;
}

/* Cold means cold: each kernel compiled in a new process whose
 * CUDA_CACHE_PATH is a new empty directory, as on a node that never ran
 * it; then once more with that directory as the first run left it (the
 * warm-driver-cache figure, what a second process on the same node sees
 * with no tokitai-jit cache: NVRTC from 12.9 answers a compile from that
 * directory, unless told -no-cache as the library tells it). */
static void cold_compile(const char *dir, int quick)
{
  printf("cold compile (new process, no cache, empty driver cache; "
         "compile + module load)\n");
  for (size_t i = 0; i < tj_embedded_count(); i++) {
    const char *name = tj_embedded_name(i);
    char drv[512], env[600], line[256], label[128];
    fresh_dir(dir, "driver-cold", (int)i, drv, sizeof drv);
    snprintf(env, sizeof env, "CUDA_CACHE_PATH=%s", drv);
    const char *extra[] = {env, NULL};
    char *argv[] = {"tj-bench", "--child-cold", (char *)name, NULL};
    double c1, t1, c2, t2;
    if (run_child_env(argv, extra, 0, line, sizeof line) != 0 ||
        sscanf(line, "%lf %lf", &c1, &t1) != 2)
      die("cold child for %s failed: '%s'", name, line);
    if (run_child_env(argv, extra, 0, line, sizeof line) != 0 ||
        sscanf(line, "%lf %lf", &c2, &t2) != 2)
      die("cold child for %s failed: '%s'", name, line);
    snprintf(label, sizeof label, "%s compile", name);
    record("cold_compile", label, c1, "ms");
    snprintf(label, sizeof label, "%s compile+load", name);
    record("cold_compile", label, t1, "ms");
    snprintf(label, sizeof label, "%s compile+load, warm driver cache", name);
    record("cold_compile", label, t2, "ms");
    if (quick)
      break;
  }
}

/* What each simulated node gets: the pilots' five kernels (the Hopper
 * GEMM's and the skinny entries would make each node compile for a
 * minute, which says nothing more about the herd). */
static const char *const node_kernels[] = {
    "add_i32", "gelu_fwd_f16", "gelu_bwd_f16", "gelu_fwd_bwd_f16", "gemm_f16"};
#define NODE_KERNELS (sizeof node_kernels / sizeof node_kernels[0])

/* One simulated node of the cluster: its own empty per-user cache (and,
 * from the parent, its own empty CUDA_CACHE_PATH); node_kernels.
 * TOKITAI_JIT_REMOTE, when the parent has it, reaches it unchanged. */
static int child_node(const char *cache)
{
  double t0 = bench_now_ms();
  tj_options o = {0};
  o.cache_path = cache;
  tj_runtime *rt = NULL;
  tj_kernel *k;
  int rc = bench_open(&rt, &o);
  double t1 = bench_now_ms();
  for (size_t i = 0; rc == TJ_OK && i < NODE_KERNELS; i++)
    rc = tj_kernel_get(rt, node_kernels[i], &k);
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  double t2 = bench_now_ms();
  printf("%llu %llu %.6f %.6f\n", (unsigned long long)st.compiles,
         (unsigned long long)st.cache_hits, t2 - t0, t2 - t1);
  tj_runtime_close(rt);
  return rc == TJ_OK ? 0 : 1;
}

/* One tj_kernel_get in a new process (device initialisation and the
 * runtime's open not timed): its time, and where the kernel came from. */
static int child_get(const char *cache, const char *kernel)
{
  tj_options o = {0};
  o.cache_path = cache;
  tj_runtime *rt = NULL;
  tj_kernel *k;
  if (bench_open(&rt, &o) != TJ_OK)
    return 1;
  double t0 = bench_now_ms();
  int rc = tj_kernel_get(rt, kernel, &k);
  double ms = bench_now_ms() - t0;
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  printf("%.6f %llu %llu %llu\n", ms, (unsigned long long)st.compiles,
         (unsigned long long)st.cache_hits,
         (unsigned long long)st.remote_hits);
  tj_runtime_close(rt);
  return rc == TJ_OK ? 0 : 1;
}

/* A remote hit (a new node's empty per-user cache, the value in Redis)
 * against the per-user hit the same node then has: the median over the
 * node kernels, each a get in a new process. */
static void remote_latency(const char *dir)
{
  double remote[NODE_KERNELS], local[NODE_KERNELS];
  int n = 0;
  for (size_t i = 0; i < NODE_KERNELS; i++) {
    char node[400], cache[512], line[256];
    fresh_dir(dir, "latency-node", (int)i, node, sizeof node);
    snprintf(cache, sizeof cache, "%s/cache.db", node);
    char *argv[] = {"tj-bench", "--child-get", cache,
                    (char *)node_kernels[i], NULL};
    double ms[2];
    unsigned long long c[2], h[2], r[2];
    int ok = 1;
    for (int j = 0; j < 2 && ok; j++)
      ok = run_child_env(argv, NULL, 0, line, sizeof line) == 0 &&
           sscanf(line, "%lf %llu %llu %llu", &ms[j], &c[j], &h[j], &r[j]) == 4;
    /* the first from Redis, the second from the copy it left behind */
    if (!ok || c[0] || r[0] != 1 || c[1] || h[1] != 1 || r[1])
      die("remote latency for %s: not a remote hit then a per-user hit: '%s'",
          node_kernels[i], line);
    remote[n] = ms[0];
    local[n++] = ms[1];
  }
  record("cluster", "remote hit, get (median)", bench_median(remote, n), "ms");
  record("cluster", "per-user hit, get (median)", bench_median(local, n), "ms");
}

/* N processes cold-starting at once, as N nodes of a job would: compiles
 * in all, and the time until the last has every kernel. */
static void cluster(const char *dir, int quick, int only_size)
{
  static const int all_sizes[] = {8, 32, 64};
  const int *sizes = only_size ? &only_size : all_sizes;
  size_t n_sizes = only_size ? 1 : sizeof all_sizes / sizeof all_sizes[0];
  const char *remote = getenv("TOKITAI_JIT_REMOTE");
  printf("cluster (N new processes at once, each its own empty cache and "
         "driver cache; %s)\n", remote && *remote
             ? "remote tier from TOKITAI_JIT_REMOTE" : "no remote tier");
  for (size_t s = 0; s < n_sizes; s++) {
    int n = sizes[s];
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    int *fds = calloc((size_t)n, sizeof *fds);
    if (!pids || !fds)
      die("out of memory");
    char caches[64][512];
    double t0 = bench_now_ms();
    for (int i = 0; i < n; i++) {
      char drv[512], env[600], node[400];
      fresh_dir(dir, "driver-node", (int)(s * 1000 + (size_t)i), drv, sizeof drv);
      fresh_dir(dir, "node", (int)(s * 1000 + (size_t)i), node, sizeof node);
      snprintf(caches[i], sizeof caches[i], "%s/cache.db", node);
      snprintf(env, sizeof env, "CUDA_CACHE_PATH=%s", drv);
      const char *extra[] = {env, NULL};
      char *argv[] = {"tj-bench", "--child-node", caches[i], NULL};
      if (spawn_child(argv, extra, 0, &pids[i], &fds[i]) != 0)
        die("spawn node %d", i);
    }
    unsigned long long compiles = 0, hits = 0;
    int failed = 0, got = 0;
    double gets[64];
    for (int i = 0; i < n; i++) {
      char line[256];
      unsigned long long c = 0, h = 0;
      double ms = 0, get_ms = 0;
      if (reap_child(pids[i], fds[i], line, sizeof line) != 0 ||
          sscanf(line, "%llu %llu %lf %lf", &c, &h, &ms, &get_ms) != 4)
        failed++;
      else
        gets[got++] = get_ms;
      compiles += c;
      hits += h;
    }
    double wall = bench_now_ms() - t0;
    char label[96];
    snprintf(label, sizeof label, "N=%d compiles in all", n);
    record("cluster", label, (double)compiles, "compiles");
    snprintf(label, sizeof label, "N=%d until all have their kernels", n);
    record("cluster", label, wall, "ms");
    /* A node's own wait, runtime open (device initialisation, which N
     * processes on one GPU queue for) left out. */
    if (got) {
      snprintf(label, sizeof label, "N=%d a node's gets (median)", n);
      record("cluster", label, bench_median(gets, got), "ms");
      snprintf(label, sizeof label, "N=%d a node's gets (max)", n);
      record("cluster", label, bench_maximum(gets, got), "ms");
    }
    if (failed) {
      snprintf(label, sizeof label, "N=%d processes that failed", n);
      record("cluster", label, failed, "processes");
    }
    free(pids);
    free(fds);
    if (quick)
      break;
  }
  if (remote && *remote)
    remote_latency(dir);
}

/* The tokitai-jit command this benchmark runs: $TJ_BENCH_CLI, else the
 * one next to tj-bench, else the build tree's (tj-bench is bench/tj-bench
 * there, the command ./tokitai-jit, a libtool wrapper that finds its
 * library).  0 with its path in out; -1 when there is none. */
static int find_cli(char *out, size_t len)
{
  const char *given = getenv("TJ_BENCH_CLI");
  if (given && *given) {
    if (access(given, X_OK) != 0)
      die("TJ_BENCH_CLI=%s: %s", given, strerror(errno));
    snprintf(out, len, "%s", given);
    return 0;
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return -1;
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  if (!slash)
    return -1;
  *slash = '\0';
  static const char *const where[] = {"", "/.."};
  for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
    int w = snprintf(out, len, "%s%s/tokitai-jit", self, where[i]);
    if (w > 0 && (size_t)w < len && access(out, X_OK) == 0)
      return 0;
  }
  return -1;
}

/* The rows a cache holds and the compiles that made them. */
static void cache_counts(const char *path, double *entries, double *compiles)
{
  tj_cache *c = NULL;
  tj_cache_stats st;
  if (tj_cache_open(&c, path, TJ_CACHE_READONLY) != TJ_OK ||
      tj_cache_get_stats(c, &st) != TJ_OK)
    die("cannot read %s", path);
  *entries = (double)st.entries;
  *compiles = (double)st.misses;
  tj_cache_close(c);
}

/* --warm on several cores, as a user runs it: `tokitai-jit --warm --arch
 * ARCH -j N --quiet` into a new empty cache with a new empty driver cache
 * (and no remote tier), for N = 1, 2, 4, ... and the processors online;
 * with --quick N = 1 and that count only.  The wall time of each, its
 * speed-up against N = 1, and the compiles it ran (every embedded kernel
 * the arch has, each once, whatever N). */
static void parallel_warm(const char *dir, const char *arch, int quick)
{
  char cli[PATH_MAX];
  if (find_cli(cli, sizeof cli) != 0) {
    printf("jobs: skipped: no tokitai-jit next to tj-bench or in the build "
           "tree (set TJ_BENCH_CLI)\n");
    return;
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  cpus = cpus < 1 ? 1 : cpus > 256 ? 256 : cpus; /* -j takes 1 to 256 */
  printf("jobs (%s --warm --arch %s -j N, each into a new empty cache)\n",
         cli, arch);
  record("jobs", "processors online", (double)cpus, "cpus");
  long ns[16];
  int count = 0;
  for (long n = 1; n < cpus && count < 15; n *= 2)
    if (!quick || n == 1)
      ns[count++] = n;
  ns[count++] = cpus;
  double base = 0;
  for (int i = 0; i < count; i++) {
    char drv[512], env[600], cache[600], jobs[24], out[4096], label[96];
    fresh_dir(dir, "driver-jobs", (int)ns[i], drv, sizeof drv);
    snprintf(env, sizeof env, "CUDA_CACHE_PATH=%s", drv);
    snprintf(cache, sizeof cache, "%s/jobs-%ld.db", dir, ns[i]);
    snprintf(jobs, sizeof jobs, "%ld", ns[i]);
    const char *extra[] = {env, "TOKITAI_JIT_REMOTE=", NULL};
    char *argv[] = {"tokitai-jit", "--warm", "--arch", (char *)arch, "-j",
                    jobs, "--quiet", "--cache", cache, NULL};
    double t0 = bench_now_ms();
    int rc = run_program_env(cli, argv, extra, 1, out, sizeof out);
    double ms = bench_now_ms() - t0, entries, compiles;
    if (rc != 0)
      die("%s --warm --arch %s -j %s --quiet --cache %s: exit %d: %s", cli,
          arch, jobs, cache, rc, out);
    cache_counts(cache, &entries, &compiles);
    if (i == 0)
      base = ms;
    snprintf(label, sizeof label, "-j %ld --warm", ns[i]);
    record("jobs", label, ms, "ms");
    snprintf(label, sizeof label, "-j %ld speed-up against -j 1", ns[i]);
    record("jobs", label, base / ms, "x");
    snprintf(label, sizeof label, "-j %ld compiles", ns[i]);
    record("jobs", label, compiles, "compiles");
    if (entries != compiles) {
      snprintf(label, sizeof label, "-j %ld cache entries", ns[i]);
      record("jobs", label, entries, "entries");
    }
  }
}

/* The child side of the warm-start measurement: a fresh process, a cache
 * that holds the kernel.  Device initialisation is timed on its own. */
static int child_warm(const char *cache, const char *kernel)
{
  double t0 = bench_now_ms();
  int n = 0;
  tj__device dev;
  char err[256];
  tj__device_count(&n);
  if (n < 1 || tj__device_open(0, &dev, err, sizeof err) != TJ_OK)
    return 1;
  double t1 = bench_now_ms();
  tj_options o = {0};
  o.cache_path = cache;
  tj_runtime *rt = NULL;
  tj_kernel *k = NULL;
  int rc = bench_open(&rt, &o);
  if (rc == TJ_OK)
    rc = tj_kernel_get(rt, kernel, &k);
  double t2 = bench_now_ms();
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  printf("%.6f %.6f %llu %llu\n", t1 - t0, t2 - t1,
         (unsigned long long)st.cache_hits, (unsigned long long)st.compiles);
  fflush(stdout); /* before the trace, which close writes to stderr */
  tj_runtime_close(rt);
  tj__device_close(&dev);
  return rc == TJ_OK ? 0 : 1;
}

/* The floor under a warm start's cache work: what SQLite itself does for
 * a hit in a new process (open the file, read its schema for the first
 * statement, the hit's query and its blob), with none of the library's
 * checks.  The statement is rows.c's hit statement.  After the same device
 * initialisation as child_warm, so that both start from the same heap. */
static int child_floor(const char *cache, const char *key)
{
  tj__device dev;
  char err[256];
  int n = 0, gpu;
  tj__device_count(&n);
  /* Without a GPU (to try it by hand), from a smaller heap. */
  if ((gpu = n > 0) && tj__device_open(0, &dev, err, sizeof err) != TJ_OK)
    return 1;
  double t0 = bench_now_ms();
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_open_v2(cache, &db, SQLITE_OPEN_READWRITE, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v3(db, "SELECT code_size, length(code), code_hash, "
                            "kernel, arch, platform, compiler, options, "
                            "entries, compile_ms, CASE WHEN typeof(code) = "
                            "'blob' AND length(code) <= ?2 THEN code END FROM "
                            "code_objects WHERE key = ?1", -1,
                            SQLITE_PREPARE_PERSISTENT, &st, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, TJ_CACHE_MAX_CODE_BYTES);
    rc = sqlite3_step(st);
  }
  int bytes = rc == SQLITE_ROW && sqlite3_column_blob(st, 10) ?
              sqlite3_column_bytes(st, 10) : 0;
  double t1 = bench_now_ms();
  printf("%.6f %d\n", t1 - t0, bytes);
  sqlite3_finalize(st);
  sqlite3_close(db);
  if (gpu)
    tj__device_close(&dev);
  return bytes > 0 ? 0 : 1;
}

/* The key of kernel's one row in a cache that holds nothing else. */
static void floor_key(const char *cache, const char *kernel, char *key,
                      size_t len)
{
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  key[0] = '\0';
  if (sqlite3_open_v2(cache, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(db, "SELECT key FROM code_objects WHERE kernel = ?1",
                         -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, kernel, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
      snprintf(key, len, "%s", (const char *)sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
}

/* A copy of cache (the file alone) beside it, whose code directory is a
 * plain file: a runtime cannot use it and reads the SQLite file.  The
 * copy's path, malloc'd. */
static char *sqlite_only_copy(const char *cache)
{
  char *copy = NULL, *code = NULL, buf[65536];
  if (asprintf(&copy, "%s.sqlite-only", cache) < 0 ||
      asprintf(&code, "%s.code", copy) < 0)
    die("out of memory");
  int in = open(cache, O_RDONLY);
  int out = open(copy, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int stub = open(code, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (in < 0 || out < 0 || stub < 0)
    die("copying %s: %s", cache, strerror(errno));
  for (ssize_t n; (n = read(in, buf, sizeof buf)) > 0;)
    if (write(out, buf, (size_t)n) != n)
      die("copying %s: %s", cache, strerror(errno));
  close(in);
  close(out);
  close(stub);
  free(code);
  return copy;
}

/* One --child-warm process on cache (traced: with TOKITAI_JIT_TRACE=1,
 * whose line then follows in line): its device initialisation and its
 * open + get, in ms; it must have been one cache hit and no compile. */
static void warm_child(const char *cache, const char *kernel, int traced,
                       double *init_ms, double *ms, char *line, size_t len)
{
  char *argv[] = {"tj-bench", "--child-warm", (char *)cache, (char *)kernel,
                  NULL};
  const char *extra[] = {"TOKITAI_JIT_TRACE=1", NULL};
  unsigned long long hits = 0, compiles = 1;
  if (run_child_env(argv, traced ? extra : NULL, traced, line, len) != 0 ||
      sscanf(line, "%lf %lf %llu %llu", init_ms, ms, &hits, &compiles) != 4 ||
      hits != 1 || compiles != 0)
    die("warm-start child (%s%s) failed: '%s'", cache,
        traced ? ", traced" : "", line);
}

static void warm_start(const char *cache, int quick)
{
  printf("warm start (new process, kernel in the cache)\n");
  const char *kernel = "gelu_bwd_f16";
  { /* fill the cache */
    tj_options o = {0};
    o.cache_path = cache;
    tj_runtime *rt = NULL;
    tj_kernel *k;
    if (bench_open(&rt, &o) != TJ_OK || tj_kernel_get(rt, kernel, &k) != TJ_OK)
      die("warm fill: %s", tj_errmsg(rt));
    tj_runtime_close(rt);
  }
  enum { RUNS = 21, PHASES = 14 };
  /* TOKITAI_JIT_TRACE's figures, in the order of its line. */
  static const char *const phase[PHASES] = {
    "open", "identity", "device", "cache open", "location", "sqlite-open",
    "identify", "journal", "create", "prepare", "key", "lookup", "compile",
    "load"};
  double init[RUNS], warm[RUNS], traced_ms[RUNS], t[PHASES][RUNS];
  int runs = quick ? 3 : RUNS, traced = 0;
  /* SQLite's own part of a hit, alone, in a new process run in turn with
   * each warm start (the floor under this library's cache open while it
   * keeps SQLite). */
  char key[TJ__KEY_HEX];
  double floor_ms[RUNS];
  int floors = 0;
  floor_key(cache, kernel, key, sizeof key);
  /* In turn: the floor, a start as a user's (no trace: the figure the
   * target is about) and a traced start (the breakdown, whose own clock
   * reads make it a little slower). */
  for (int i = 0; i < runs; i++) {
    if (key[0]) {
      char fl[256];
      char *fargv[] = {"tj-bench", "--child-floor", (char *)cache, key, NULL};
      int bytes = 0;
      if (run_child_env(fargv, NULL, 0, fl, sizeof fl) == 0 &&
          sscanf(fl, "%lf %d", &floor_ms[floors], &bytes) == 2 && bytes > 0)
        floors++;
    }
    char line[4096];
    unsigned long long built = 0;
    warm_child(cache, kernel, 0, &init[i], &warm[i], line, sizeof line);
    double dev;
    warm_child(cache, kernel, 1, &dev, &traced_ms[i], line, sizeof line);
    const char *tr = strstr(line, "tokitai-jit trace: ");
    tr = tr ? strstr(tr, " open ") : NULL;
    double *v[PHASES];
    for (int p = 0; p < PHASES; p++)
      v[p] = &t[p][traced];
    if (tr && sscanf(tr, " open %lf ms = identity %lf + device %lf + cache %lf "
                     "(location %lf, sqlite-open %lf, identify %lf, journal %lf, "
                     "create %lf, prepare %lf); %llu kernels built: key %lf, "
                     "lookup %lf, compile %lf, load %lf", v[0], v[1], v[2], v[3],
                     v[4], v[5], v[6], v[7], v[8], v[9], &built, v[10], v[11],
                     v[12], v[13]) == 15)
      traced++;
  }
  /* The same start without the code directory: a copy of the file whose
   * code directory is unusable (a plain file in its place), so every
   * start reads SQLite: what the code directory saves. */
  char *sql_only = sqlite_only_copy(cache);
  double via_sql[RUNS];
  for (int i = 0; i < runs; i++) {
    char line[4096];
    double dev;
    warm_child(sql_only, kernel, 0, &dev, &via_sql[i], line, sizeof line);
  }
  free(sql_only);
  record("warm_start", "device init (median)", bench_median(init, runs), "ms");
  record("warm_start", "open + get from cache (median)", bench_median(warm, runs), "ms");
  record("warm_start", "open + get, SQLite path (median)",
         bench_median(via_sql, runs), "ms");
  record("warm_start", "open + get from cache (min)", bench_minimum(warm, runs), "ms");
  record("warm_start", "open + get from cache (max)", bench_maximum(warm, runs), "ms");
  record("warm_start", "open + get, traced (median)", bench_median(traced_ms, runs), "ms");
  if (floors)
    record("warm_start", "SQLite alone: open, schema, hit query (median)",
           bench_median(floor_ms, floors), "ms");
  /* Where it went, from TOKITAI_JIT_TRACE (its clock reads included). */
  for (int p = 0; traced && p < PHASES; p++) {
    char label[96];
    snprintf(label, sizeof label, "breakdown: %s (median)", phase[p]);
    record("warm_start", label, bench_median(t[p], traced), "ms");
  }
}

static void hot_hit(tj_runtime *rt)
{
  printf("hot hit (tj_kernel_get of a loaded kernel)\n");
  enum { BATCHES = 11, PER = 200000 };
  double ns[BATCHES];
  tj_kernel *k;
  if (tj_kernel_get(rt, "gelu_bwd_f16", &k) != TJ_OK)
    die("%s", tj_errmsg(rt));
  for (int b = 0; b < BATCHES; b++) {
    double t0 = bench_now_ms();
    for (int i = 0; i < PER; i++)
      if (tj_kernel_get(rt, "gelu_bwd_f16", &k) != TJ_OK)
        die("hit failed");
    ns[b] = (bench_now_ms() - t0) * 1e6 / PER;
  }
  record("hot_hit", "tj_kernel_get hit (median)", bench_median(ns, BATCHES), "ns");
}

static void launch_cost(tj_runtime *rt)
{
  printf("launch cost (empty kernel; host enqueue time per launch)\n");
  static const char src[] = "extern \"C\" __global__ void tj_empty(int x) {}\n";
  tj_kernel *k;
  if (tj_kernel_compile(rt, src, "tj_empty", NULL, &k) != TJ_OK)
    die("empty kernel: %s", tj_errmsg(rt));
  hipFunction_t fn = (hipFunction_t)tj_kernel_function(k);
  int x = 0;
  void *args[] = {&x};
  enum { BATCHES = 21, PER = 1000 };
  double tj[BATCHES], raw[BATCHES];
  for (int b = 0; b < BATCHES; b++) {
    CHECK(hipDeviceSynchronize());
    double t0 = bench_now_ms();
    for (int i = 0; i < PER; i++)
      if (tj_launch(k, (tj_dim3){1, 1, 1}, (tj_dim3){32, 1, 1}, 0, NULL, args) != TJ_OK)
        die("tj_launch failed");
    tj[b] = (bench_now_ms() - t0) * 1e3 / PER;
    CHECK(hipDeviceSynchronize());
    t0 = bench_now_ms();
    for (int i = 0; i < PER; i++)
      CHECK(hipModuleLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
    raw[b] = (bench_now_ms() - t0) * 1e3 / PER;
  }
  CHECK(hipDeviceSynchronize());
  double t = bench_median(tj, BATCHES), r = bench_median(raw, BATCHES);
  record("launch", "tj_launch (median)", t, "us");
  record("launch", "raw hipModuleLaunchKernel (median)", r, "us");
  record("launch", "tj_launch / raw", t / r, "x");
}

int main(int argc, char **argv)
{
  if (argc == 4 && strcmp(argv[1], "--child-warm") == 0)
    return child_warm(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "--child-floor") == 0)
    return child_floor(argv[2], argv[3]);
  if (argc == 3 && strcmp(argv[1], "--child-cold") == 0)
    return child_cold(argv[2]);
  if (argc == 7 && strcmp(argv[1], "--child-first-call") == 0)
    return bench_cold_child(argv + 2);
  if (argc == 3 && strcmp(argv[1], "--child-node") == 0)
    return child_node(argv[2]);
  if (argc == 4 && strcmp(argv[1], "--child-get") == 0)
    return child_get(argv[2], argv[3]);
  const char *json = NULL, *pilot = NULL, *only = NULL, *arch = NULL;
  int quick = 0, cluster_size = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
      json = argv[++i];
    else if (strcmp(argv[i], "--arch") == 0 && i + 1 < argc)
      arch = argv[++i];
    else if (strcmp(argv[i], "--pilot") == 0 && i + 1 < argc)
      pilot = argv[++i];
    else if (strcmp(argv[i], "--quick") == 0)
      quick = 1;
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = argv[++i];
    else if (strcmp(argv[i], "--cluster") == 0 && i + 1 < argc &&
             (cluster_size = atoi(argv[i + 1])) >= 1 && cluster_size <= 64)
      i++;
    else {
      fprintf(stderr, "usage: tj-bench [--json FILE] [--quick] [--pilot PATH] "
              "[--arch ARCH] [--only start|cold|cluster|jobs|launch|memory|"
              "gemm|family|grouped|pilot|moe] [--cluster N (1 to 64)]\n");
      return 2;
    }
  }
  char dir[] = "/tmp/tj-bench-XXXXXX";
  if (!mkdtemp(dir))
    die("mkdtemp");
  char cache[64];
  snprintf(cache, sizeof cache, "%s/cache.db", dir);

#define WANT(section) (!only || strcmp(only, section) == 0)
  /* --only jobs --arch ARCH compiles only: it runs on a machine without
   * a GPU too. */
  int gpu = !(only && strcmp(only, "jobs") == 0 && arch);
  bench_header(&R, gpu);
  if (!gpu) /* the JSON's arch: the one compiled for */
    snprintf(R.arch, sizeof R.arch, "%s", arch);
  if (WANT("start")) {
    warm_start(cache, quick);
    cold_compile(dir, quick);
  }
  if (only && strcmp(only, "cold") == 0) { /* not in a run of all */
    bench_cold(dir, quick, record);
    cold_compile(dir, quick);
  }
  if (WANT("cluster"))
    cluster(dir, quick, cluster_size);
  if (WANT("jobs"))
    parallel_warm(dir, arch ? arch : R.arch, quick);
  if (!gpu) {
    if (json)
      bench_write_json(&R, json);
    return 0;
  }
  tj_options o = {0};
  o.cache_path = cache;
  /* TJ_BENCH_CACHE: a cache whose tuning decisions (tokitai-jit --tune)
   * the rest runs with; the start section always uses a fresh one. */
  const char *tuned = getenv("TJ_BENCH_CACHE");
  if (tuned && *tuned) {
    o.cache_path = tuned;
    printf("cache %s (its tuning decisions are used)\n", tuned);
  }
  tj_runtime *rt = NULL;
  if (bench_open(&rt, &o) != TJ_OK)
    die("runtime: %s", tj_errmsg(rt));
  if (WANT("launch")) {
    hot_hit(rt);
    launch_cost(rt);
  }
  if (WANT("memory"))
    bench_memory_bound(rt, quick, record);
  if (WANT("gemm"))
    bench_gemm(rt, quick, record);
  if (WANT("family"))
    bench_family(rt, record);
  if (WANT("grouped"))
    bench_grouped(rt, record);
  if (WANT("pilot"))
    bench_pilot(rt, pilot, record);
  if (WANT("moe"))
    bench_moe(rt, quick, record);
  tj_runtime_close(rt);
  if (json)
    bench_write_json(&R, json);
  return 0;
}
