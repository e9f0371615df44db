/* bench_memory.c: the elementwise kernels at n = 2^27 against a
 * device-to-device copy of the same run, in GB/s (bytes read + written). */
#include "bench.h"

typedef struct mem_ctx {
  tj_runtime *rt;
  const char *kernel;
  void *in0, *in1, *out0, *out1;
  size_t n;
} mem_ctx;

static void run_copy(void *p)
{
  mem_ctx *c = p;
  CHECK(hipMemcpyDtoDAsync(c->out0, c->in0, c->n * 4, NULL));
}

static void run_kernel(void *p)
{
  mem_ctx *c = p;
  int rc;
  if (strcmp(c->kernel, "add_i32") == 0)
    rc = tj_add_i32(c->rt, NULL, c->in0, c->in1, c->out0, c->n);
  else if (strcmp(c->kernel, "gelu_fwd_f16") == 0)
    rc = tj_gelu_fwd_f16(c->rt, NULL, c->in0, c->out0, c->n);
  else if (strcmp(c->kernel, "gelu_bwd_f16") == 0)
    rc = tj_gelu_bwd_f16(c->rt, NULL, c->in1, c->in0, c->out0, c->n);
  else
    rc = tj_gelu_fwd_bwd_f16(c->rt, NULL, c->in0, c->in1, c->out0, c->out1, c->n);
  if (rc != TJ_OK)
    die("%s: %s", c->kernel, tj_errmsg(c->rt));
}

/* Inputs that look like activations: halves in [-6, 6] (the int kernel
 * reads the same bytes as random ints). */
static void *filled_device_buffer(size_t bytes, unsigned seed)
{
  uint16_t *h = malloc(bytes);
  if (!h)
    die("out of host memory");
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < bytes / 2; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    h[i] = tj_f32_to_f16((float)((s >> 11) * 0x1.0p-53 * 12.0 - 6.0));
  }
  void *d;
  CHECK(hipMalloc(&d, bytes));
  CHECK(hipMemcpyHtoD(d, h, bytes));
  free(h);
  return d;
}

void bench_memory_bound(tj_runtime *rt, int quick, bench_record_fn record)
{
  size_t n = quick ? (1u << 24) : (1u << 27);
  printf("memory-bound kernels at n = %zu (GB/s = bytes read + written / time)\n", n);
  mem_ctx c = {rt, NULL, NULL, NULL, NULL, NULL, n};
  c.in0 = filled_device_buffer(n * 4, 1);
  c.in1 = filled_device_buffer(n * 4, 2);
  CHECK(hipMalloc(&c.out0, n * 4));
  CHECK(hipMalloc(&c.out1, n * 4));
  int reps = quick ? 5 : 20;
  double copy_ms = bench_time_gpu(run_copy, &c, reps);
  double copy_gbs = 2.0 * n * 4 / (copy_ms * 1e6);
  record("memory", "device-to-device copy", copy_gbs, "GB/s");
  static const struct { const char *name; int bytes_per_elem; } ks[] = {
    {"add_i32", 12}, {"gelu_fwd_f16", 4}, {"gelu_bwd_f16", 6}, {"gelu_fwd_bwd_f16", 8},
  };
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
    c.kernel = ks[i].name;
    double ms = bench_time_gpu(run_kernel, &c, reps);
    double gbs = (double)ks[i].bytes_per_elem * n / (ms * 1e6);
    char label[96];
    snprintf(label, sizeof label, "%s", ks[i].name);
    record("memory", label, gbs, "GB/s");
    snprintf(label, sizeof label, "%s / copy", ks[i].name);
    record("memory", label, gbs / copy_gbs, "x");
  }
  hipFree(c.in0);
  hipFree(c.in1);
  hipFree(c.out0);
  hipFree(c.out1);
}
