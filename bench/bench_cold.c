/*
 * bench_cold.c: tj-bench's cold section: a GEMM's first call on a new
 * node.  Each figure comes from a new process with every cache empty: a
 * per-user cache file of its own that holds nothing, no system cache, no
 * remote tier, and CUDA_CACHE_DISABLE=1 for the driver's compute cache.
 * Per shape (bf16, B transposed: the layout of a model's weights), the
 * first tj_gemm call's wall time (the call and a stream synchronize,
 * after the runtime is open and the operands are on the device) without
 * background builds and with them (tj_options.background_builds, where
 * the call runs on the fallback while its configuration compiles; then
 * also when the configuration was ready, counted from the call); beside
 * them torch's first torch.mm on the same layout in a new process, where
 * python3 imports torch with CUDA.
 */
#include "bench.h"

#include <stdint.h>
#include <sys/stat.h>

static const int cold_shapes[][3] = {
    {4096, 4096, 4096}, {1, 4096, 4096}, {512, 2816, 1024}};
#define COLD_SHAPES (sizeof cold_shapes / sizeof cold_shapes[0])

/* Torch's side: the same call, timed the same way; "skip" when torch or
 * its GPU cannot be had. */
static const char torch_script[] =
    "import sys, time\n"
    "try:\n"
    "    import torch\n"
    "    assert torch.cuda.is_available()\n"
    "except Exception:\n"
    "    print('skip'); sys.exit(0)\n"
    "m, n, k = (int(v) for v in sys.argv[1:4])\n"
    "a = torch.randn(m, k, device='cuda', dtype=torch.bfloat16)\n"
    "b = torch.randn(n, k, device='cuda', dtype=torch.bfloat16)\n"
    "torch.cuda.synchronize()\n"
    "t0 = time.perf_counter()\n"
    "c = torch.mm(a, b.t())\n"
    "torch.cuda.synchronize()\n"
    "print('%.6f' % ((time.perf_counter() - t0) * 1e3))\n";

/* The child side: argv m n k background cache.  Prints the call's ms and,
 * with background builds, the ms from the call until the configuration
 * was built (0 without). */
int bench_cold_child(char **argv)
{
  int m = atoi(argv[0]), n = atoi(argv[1]), k = atoi(argv[2]);
  tj_options o = {0};
  o.size = sizeof o;
  o.cache_path = argv[4];
  o.system_caches = "";
  o.remote = "";
  o.background_builds = atoi(argv[3]) ? 1 : -1;
  tj_runtime *rt = NULL;
  if (bench_open(&rt, &o) != TJ_OK)
    die("cold child: open: %s", tj_errmsg(rt));
  void *a, *b, *c;
  CHECK(hipMalloc(&a, (size_t)m * k * 2));
  CHECK(hipMalloc(&b, (size_t)n * k * 2));
  CHECK(hipMalloc(&c, (size_t)m * n * 2));
  CHECK(hipMemset(a, 0, (size_t)m * k * 2));
  CHECK(hipMemset(b, 0, (size_t)n * k * 2));
  CHECK(hipStreamSynchronize(NULL));
  tj_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.size = sizeof d;
  d.a_type = d.b_type = d.c_type = TJ_DTYPE_BF16;
  d.trans_b = 1;
  d.m = m, d.n = n, d.k = k, d.alpha = 1.0f;
  d.a = a, d.lda = k, d.b = b, d.ldb = k, d.c = c, d.ldc = n;
  double t0 = bench_now_ms();
  int rc = tj_gemm(rt, NULL, &d);
  CHECK(hipStreamSynchronize(NULL));
  double call = bench_now_ms() - t0;
  if (rc != TJ_OK)
    die("cold child: tj_gemm: %s", tj_errmsg(rt));
  tj__worker_drain(rt);
  double ready = o.background_builds == 1 ? bench_now_ms() - t0 : 0;
  printf("%.6f %.6f\n", call, ready);
  hipFree(a), hipFree(b), hipFree(c);
  tj_runtime_close(rt);
  return 0;
}

/* One child for shape s with background builds on or off, its cache
 * file new under dir: *call and *ready. */
static void cold_call(const char *dir, const int s[3], int background,
                      int run, double *call, double *ready)
{
  char mm[3][16], bg[4], cache[512], line[256];
  for (int i = 0; i < 3; i++)
    snprintf(mm[i], sizeof mm[i], "%d", s[i]);
  snprintf(bg, sizeof bg, "%d", background);
  snprintf(cache, sizeof cache, "%s/cold-%dx%dx%d-%d-%d.db", dir, s[0], s[1],
           s[2], background, run);
  char *argv[] = {"tj-bench", "--child-first-call", mm[0], mm[1], mm[2], bg,
                  cache, NULL};
  const char *extra[] = {"CUDA_CACHE_DISABLE=1", NULL};
  if (bench_run_child(argv, extra, line, sizeof line) != 0 ||
      sscanf(line, "%lf %lf", call, ready) != 2)
    die("first-call child for %dx%dx%d failed: '%s'", s[0], s[1], s[2], line);
}

/* Torch's first call at shape s in a new process: its ms, or -1 (no
 * torch, or no GPU for it). */
static double torch_call(const int s[3])
{
  char mm[3][16], line[256];
  for (int i = 0; i < 3; i++)
    snprintf(mm[i], sizeof mm[i], "%d", s[i]);
  char *argv[] = {"env", "python3", "-c", (char *)torch_script, mm[0], mm[1],
                  mm[2], NULL};
  const char *extra[] = {"CUDA_CACHE_DISABLE=1", NULL};
  double ms;
  if (bench_run_path("/usr/bin/env", argv, extra, line, sizeof line) != 0 ||
      sscanf(line, "%lf", &ms) != 1)
    return -1;
  return ms;
}

void bench_cold(const char *dir, int quick, bench_record_fn record)
{
  int runs = quick ? 1 : 2;
  printf("first call on a new node (new process, every cache empty, "
         "CUDA_CACHE_DISABLE=1; bf16 NT; the call and a synchronize)\n");
  for (size_t i = 0; i < COLD_SHAPES; i++) {
    const int *s = cold_shapes[i];
    char label[128];
    for (int r = 0; r < runs; r++) {
      double plain, with, ready, none;
      cold_call(dir, s, 0, r, &plain, &none);
      cold_call(dir, s, 1, r, &with, &ready);
      snprintf(label, sizeof label, "%dx%dx%d first call", s[0], s[1], s[2]);
      record("cold", label, plain, "ms");
      snprintf(label, sizeof label, "%dx%dx%d first call, background",
               s[0], s[1], s[2]);
      record("cold", label, with, "ms");
      snprintf(label, sizeof label, "%dx%dx%d specialised ready after",
               s[0], s[1], s[2]);
      record("cold", label, ready, "ms");
      double torch = torch_call(s);
      snprintf(label, sizeof label, "%dx%dx%d torch first call", s[0], s[1],
               s[2]);
      if (torch >= 0)
        record("cold", label, torch, "ms");
      else
        printf("  %-34s %14s\n", label, "skipped (no torch with CUDA)");
    }
  }
}
