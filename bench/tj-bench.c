/*
 * tj-bench: what tokitai-jit costs and how fast its kernels run, measured
 * side by side in one run on one GPU.  Prints a table and writes JSON.
 * Absolute figures hold for the machine they came from; the comparisons are
 * ratios taken in the same run.  Nothing here is asserted: this is a
 * program that prints figures, not a test.
 *
 *   tj-bench [--json FILE] [--quick] [--pilot PATH] [--only SECTION]
 *
 * Sections: cold compile, warm start in a new process, hot in-memory hit,
 * launch cost against a raw hipModuleLaunchKernel, memory-bound kernels
 * against a device-to-device copy, GEMM against the vendor BLAS, and the
 * pilots' process-per-call way against the host-buffer call.
 */
#include "config.h"
#include "bench.h"

#include <spawn.h>
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

/* ------------------------------------------------------------ sections */

static void cold_compile(int quick)
{
  printf("cold compile (cache disabled; compile + module load)\n");
  for (size_t i = 0; i < tj_embedded_count(); i++) {
    const char *name = tj_embedded_name(i);
    tj_options o = {0};
    o.flags = TJ_CACHE_DISABLE;
    tj_runtime *rt = NULL;
    if (tj_runtime_open(&rt, &o) != TJ_OK)
      die("runtime: %s", tj_errmsg(rt));
    tj_kernel *k;
    double t0 = now_ms();
    if (tj_kernel_get(rt, name, &k) != TJ_OK)
      die("%s: %s", name, tj_errmsg(rt));
    double total = now_ms() - t0;
    tj_kernel_info info;
    tj_kernel_get_info(k, &info);
    char label[128];
    snprintf(label, sizeof label, "%s compile", name);
    record("cold_compile", label, info.compile_ms, "ms");
    snprintf(label, sizeof label, "%s compile+load", name);
    record("cold_compile", label, total, "ms");
    tj_runtime_close(rt);
    if (quick)
      break;
  }
}

/* The child side of the warm-start measurement: a fresh process, a cache
 * that holds the kernel.  Device initialisation is timed on its own. */
static int child_warm(const char *cache, const char *kernel)
{
  double t0 = now_ms();
  int n = 0;
  tj__device dev;
  char err[256];
  tj__device_count(&n);
  if (n < 1 || tj__device_open(0, &dev, err, sizeof err) != TJ_OK)
    return 1;
  double t1 = now_ms();
  tj_options o = {0};
  o.cache_path = cache;
  tj_runtime *rt = NULL;
  tj_kernel *k = NULL;
  int rc = tj_runtime_open(&rt, &o);
  if (rc == TJ_OK)
    rc = tj_kernel_get(rt, kernel, &k);
  double t2 = now_ms();
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  printf("%.6f %.6f %llu %llu\n", t1 - t0, t2 - t1,
         (unsigned long long)st.cache_hits, (unsigned long long)st.compiles);
  tj_runtime_close(rt);
  tj__device_close(&dev);
  return rc == TJ_OK ? 0 : 1;
}

/* Run this program again as a child and read its one line of output. */
static int run_child(char *const argv[], char *line, size_t len)
{
  int fds[2];
  if (pipe(fds) != 0)
    return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid;
  int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return -1;
  }
  ssize_t got = read(fds[0], line, len - 1);
  line[got > 0 ? got : 0] = '\0';
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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
    if (tj_runtime_open(&rt, &o) != TJ_OK || tj_kernel_get(rt, kernel, &k) != TJ_OK)
      die("warm fill: %s", tj_errmsg(rt));
    tj_runtime_close(rt);
  }
  enum { RUNS = 9 };
  double init[RUNS], warm[RUNS];
  int runs = quick ? 3 : RUNS;
  for (int i = 0; i < runs; i++) {
    char line[256];
    char *argv[] = {"tj-bench", "--child-warm", (char *)cache, (char *)kernel, NULL};
    unsigned long long hits = 0, compiles = 1;
    if (run_child(argv, line, sizeof line) != 0 ||
        sscanf(line, "%lf %lf %llu %llu", &init[i], &warm[i], &hits, &compiles) != 4 ||
        hits != 1 || compiles != 0)
      die("warm-start child failed: '%s'", line);
  }
  record("warm_start", "device init (median)", median(init, runs), "ms");
  record("warm_start", "open + get from cache (median)", median(warm, runs), "ms");
  record("warm_start", "open + get from cache (min)", minimum(warm, runs), "ms");
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
    double t0 = now_ms();
    for (int i = 0; i < PER; i++)
      if (tj_kernel_get(rt, "gelu_bwd_f16", &k) != TJ_OK)
        die("hit failed");
    ns[b] = (now_ms() - t0) * 1e6 / PER;
  }
  record("hot_hit", "tj_kernel_get hit (median)", median(ns, BATCHES), "ns");
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
    double t0 = now_ms();
    for (int i = 0; i < PER; i++)
      if (tj_launch(k, (tj_dim3){1, 1, 1}, (tj_dim3){32, 1, 1}, 0, NULL, args) != TJ_OK)
        die("tj_launch failed");
    tj[b] = (now_ms() - t0) * 1e3 / PER;
    CHECK(hipDeviceSynchronize());
    t0 = now_ms();
    for (int i = 0; i < PER; i++)
      CHECK(hipModuleLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
    raw[b] = (now_ms() - t0) * 1e3 / PER;
  }
  CHECK(hipDeviceSynchronize());
  double t = median(tj, BATCHES), r = median(raw, BATCHES);
  record("launch", "tj_launch (median)", t, "us");
  record("launch", "raw hipModuleLaunchKernel (median)", r, "us");
  record("launch", "tj_launch / raw", t / r, "x");
}

int main(int argc, char **argv)
{
  if (argc == 4 && strcmp(argv[1], "--child-warm") == 0)
    return child_warm(argv[2], argv[3]);
  const char *json = NULL, *pilot = NULL, *only = NULL;
  int quick = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
      json = argv[++i];
    else if (strcmp(argv[i], "--pilot") == 0 && i + 1 < argc)
      pilot = argv[++i];
    else if (strcmp(argv[i], "--quick") == 0)
      quick = 1;
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = argv[++i];
    else {
      fprintf(stderr, "usage: tj-bench [--json FILE] [--quick] [--pilot PATH] "
              "[--only start|launch|memory|gemm|pilot]\n");
      return 2;
    }
  }
  char dir[] = "/tmp/tj-bench-XXXXXX";
  if (!mkdtemp(dir))
    die("mkdtemp");
  char cache[64];
  snprintf(cache, sizeof cache, "%s/cache.db", dir);

#define WANT(section) (!only || strcmp(only, section) == 0)
  bench_header(&R);
  if (WANT("start")) {
    warm_start(cache, quick);
    cold_compile(quick);
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
  if (tj_runtime_open(&rt, &o) != TJ_OK)
    die("runtime: %s", tj_errmsg(rt));
  if (WANT("launch")) {
    hot_hit(rt);
    launch_cost(rt);
  }
  if (WANT("memory"))
    bench_memory_bound(rt, quick, record);
  if (WANT("gemm"))
    bench_gemm(rt, quick, record);
  if (WANT("pilot"))
    bench_pilot(rt, pilot, record);
  tj_runtime_close(rt);
  if (json)
    bench_write_json(&R, json);
  return 0;
}
