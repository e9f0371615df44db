/* bench_gemm.c: gemm_f16 in TFLOP/s next to the vendor BLAS of the same
 * run (cuBLAS on NVIDIA, rocBLAS on AMD, each loaded at run time so that
 * the benchmark builds without them). */
#include "bench.h"

#include <dlfcn.h>
#include <math.h>

/* The vendor call for row-major C = A*B, fp16 in and out, fp32 compute. */
typedef struct vendor_blas {
  const char *name;
  void *lib, *handle;
  void *gemm_ex; /* the library's GEMM entry, looked up once at open */
  int (*gemm)(struct vendor_blas *v, int m, int n, int k, const void *A,
              const void *B, void *C);
} vendor_blas;

#if defined(TJ_PLATFORM_NVIDIA)
/* cuBLAS values, from cublas_api.h and library_types.h. */
enum { CUBLAS_OP_N = 0, CUDA_R_16F = 2, CUBLAS_COMPUTE_32F = 68,
       CUBLAS_GEMM_DEFAULT = -1 };
typedef int (*cublas_create_fn)(void **);
typedef int (*cublas_gemm_ex_fn)(void *, int, int, int, int, int, const void *,
                                 const void *, int, int, const void *, int, int,
                                 const void *, void *, int, int, int, int);

/* Row-major C = A*B is column-major C^T = B^T * A^T: swap the operands. */
static int cublas_gemm(vendor_blas *v, int m, int n, int k, const void *A,
                       const void *B, void *C)
{
  static const float one = 1.0f, zero = 0.0f;
  cublas_gemm_ex_fn gemm_ex = (cublas_gemm_ex_fn)v->gemm_ex;
  return gemm_ex(v->handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B,
                 CUDA_R_16F, n, A, CUDA_R_16F, k, &zero, C, CUDA_R_16F, n,
                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

static int vendor_open(vendor_blas *v)
{
  static const char *names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  for (size_t i = 0; i < 3 && !v->lib; i++)
    v->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  cublas_create_fn create = v->lib ? (cublas_create_fn)dlsym(v->lib, "cublasCreate_v2") : NULL;
  v->gemm_ex = v->lib ? dlsym(v->lib, "cublasGemmEx") : NULL;
  if (!create || !v->gemm_ex || create(&v->handle) != 0)
    return 0;
  v->name = "cuBLAS";
  v->gemm = cublas_gemm;
  return 1;
}
#else
static int vendor_open(vendor_blas *v)
{
  (void)v; /* no rocBLAS comparison: the AMD build times ours alone */
  return 0;
}
#endif

typedef struct gemm_ctx {
  tj_runtime *rt;
  vendor_blas *vendor;
  int m, n, k;
  void *A, *B, *C;
  void *stream; /* NULL, but for a capture into a graph */
} gemm_ctx;

static void run_ours(void *p)
{
  gemm_ctx *g = p;
  if (tj_gemm_f16(g->rt, g->stream, g->m, g->n, g->k, 1.0f, g->A, g->k, g->B,
                  g->n, 0.0f, g->C, g->n) != TJ_OK)
    die("gemm_f16: %s", tj_errmsg(g->rt));
}

static void run_vendor(void *p)
{
  gemm_ctx *g = p;
  if (g->vendor->gemm(g->vendor, g->m, g->n, g->k, g->A, g->B, g->C) != 0)
    die("%s gemm failed", g->vendor->name);
}

static void *random_halves(size_t count, unsigned seed)
{
  uint16_t *h = malloc(count * 2);
  if (!h)
    die("out of host memory");
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 7;
  for (size_t i = 0; i < count; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    h[i] = tj_f32_to_f16((float)((s >> 11) * 0x1.0p-53 * 2.0 - 1.0));
  }
  void *d;
  CHECK(hipMalloc(&d, count * 2));
  CHECK(hipMemcpyHtoD(d, h, count * 2));
  free(h);
  return d;
}

/* Relative L2 difference between our C and the vendor's, as a sanity
 * check that both computed the same product. */
static double agreement(gemm_ctx *g)
{
  size_t count = (size_t)g->m * g->n;
  uint16_t *ours = malloc(count * 2), *theirs = malloc(count * 2);
  if (!ours || !theirs)
    die("out of host memory");
  run_ours(g);
  CHECK(hipDeviceSynchronize());
  CHECK(hipMemcpyDtoH(ours, g->C, count * 2));
  run_vendor(g);
  CHECK(hipDeviceSynchronize());
  CHECK(hipMemcpyDtoH(theirs, g->C, count * 2));
  double num = 0, den = 0;
  for (size_t i = 0; i < count; i++) {
    double a = tj_f16_to_f32(ours[i]), b = tj_f16_to_f32(theirs[i]);
    num += (a - b) * (a - b);
    den += b * b;
  }
  free(ours);
  free(theirs);
  return den > 0 ? sqrt(num / den) : NAN;
}

typedef struct copy_ctx {
  void *src, *dst;
  size_t bytes;
  void *stream; /* NULL, but for a capture into a graph */
} copy_ctx;

static void run_copy(void *p)
{
  copy_ctx *c = p;
  CHECK(hipMemcpyDtoDAsync(c->dst, c->src, c->bytes, c->stream));
}

/*
 * A second yardstick for the skinny shapes.  bench_time_gpu_flushed's
 * memset leaves L2 full of dirty lines, which the timed kernel writes back
 * to memory as its reads evict them: up to L2's 50 MiB of writes beside
 * the 32 MiB that 1 x 4096 x 4096 reads, against the vendor and us alike.
 * This flush reads the scratch after the memset (tj_gemm_f16 with one row
 * over it, 256 MiB of B), so that L2 holds only clean lines when the
 * events start: what the kernel itself moves is what is timed.
 */
typedef struct clean_flush {
  tj_runtime *rt;
  void *scratch, *a, *c; /* 8192 x 16384 halves; 16384; 8192 */
} clean_flush;

static void clean_flush_run(void *ctx, int rep)
{
  const clean_flush *f = ctx;
  (void)rep;
  CHECK(hipMemset(f->scratch, 0, (size_t)256 << 20));
  if (tj_gemm_f16(f->rt, NULL, 1, 8192, 16384, 1.0f, f->a, 16384,
                  f->scratch, 8192, 0.0f, f->c, 8192) != TJ_OK)
    die("clean flush: %s", tj_errmsg(f->rt));
}

static double time_clean_flushed(clean_flush *f, void (*fn)(void *),
                                 void *ctx, int reps)
{
  return bench_time_gpu_between(fn, ctx, reps, clean_flush_run, f);
}

/* A device-to-device copy of bytes, in GB/s read plus written, the median
 * of reps launches: each after clean's flush, or back to back where clean
 * is NULL. */
static double copy_gbs_of(size_t bytes, clean_flush *clean, int reps)
{
  copy_ctx c = {NULL, NULL, bytes, NULL};
  CHECK(hipMalloc(&c.src, c.bytes));
  CHECK(hipMalloc(&c.dst, c.bytes));
  CHECK(hipMemset(c.src, 0, c.bytes));
  double ms = clean ? time_clean_flushed(clean, run_copy, &c, reps)
                    : bench_time_gpu(run_copy, &c, reps);
  hipFree(c.src);
  hipFree(c.dst);
  return 2.0 * (double)c.bytes / (ms * 1e6);
}

/*
 * The third yardstick for the skinny shapes: a kernel that only reads
 * bytes (16 at a time, TJ_U loads in flight a thread: 4, or what -DTJ_U=
 * says), the most a read of them reaches in one launch at that size.
 * Compiled through tj_kernel_compile, as a user's kernel is.
 */
static const char read_src[] =
    "#ifndef TJ_U\n"
    "#define TJ_U 4\n"
    "#endif\n"
    "extern \"C\" __global__ void __launch_bounds__(512)\n"
    "tj_bench_read(const uint4 *p, unsigned long long n, unsigned *out) {\n"
    "  unsigned long long s = (unsigned long long)gridDim.x * blockDim.x;\n"
    "  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x +\n"
    "                         threadIdx.x;\n"
    "  unsigned x = 0;\n"
    "  for (; i + (TJ_U - 1) * s < n; i += TJ_U * s) {\n"
    "    uint4 v[TJ_U];\n"
    "#pragma unroll\n"
    "    for (int u = 0; u < TJ_U; u++)\n"
    "      v[u] = p[i + u * s];\n"
    "#pragma unroll\n"
    "    for (int u = 0; u < TJ_U; u++)\n"
    "      x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;\n"
    "  }\n"
    "  for (; i < n; i += s) {\n"
    "    uint4 a = p[i];\n"
    "    x ^= a.x ^ a.y ^ a.z ^ a.w;\n"
    "  }\n"
    "  if (x == 0x9e3779b9u) /* keeps the loads; true of no data here */\n"
    "    out[0] = x;\n"
    "}\n";

/*
 * The same read the way the Hopper GEMM reads B: bulk copies (TMA, no
 * tensor map) of 8 KiB chunks into shared memory, five in flight a
 * block, one thread issuing them; block b takes chunks b, b + gridDim.x,
 * ...  sm_90 and later only (cp.async.bulk).
 */
static const char read_bulk_src[] =
    "#define TJ_CH 8192\n"
    "#define TJ_ST 5\n"
    "__device__ __forceinline__ void tj_issue(unsigned bar, unsigned dst,\n"
    "                                         const unsigned char *src) {\n"
    "  asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\"\n"
    "               :: \"r\"(bar), \"r\"(TJ_CH) : \"memory\");\n"
    "  asm volatile(\"cp.async.bulk.shared::cluster.global.mbarrier::\"\n"
    "               \"complete_tx::bytes [%0], [%1], %2, [%3];\"\n"
    "               :: \"r\"(dst), \"l\"(src), \"r\"(TJ_CH), \"r\"(bar)\n"
    "               : \"memory\");\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(32)\n"
    "tj_bench_read_bulk(const unsigned char *p, unsigned long long chunks,\n"
    "                   unsigned *out) {\n"
    "  __shared__ __align__(128) unsigned char buf[TJ_ST][TJ_CH];\n"
    "  __shared__ __align__(8) unsigned long long bar[TJ_ST];\n"
    "  if (threadIdx.x != 0)\n"
    "    return;\n"
    "  unsigned b0 = (unsigned)__cvta_generic_to_shared(&bar[0]);\n"
    "  unsigned d0 = (unsigned)__cvta_generic_to_shared(&buf[0][0]);\n"
    "  for (int s = 0; s < TJ_ST; s++)\n"
    "    asm volatile(\"mbarrier.init.shared::cta.b64 [%0], 1;\"\n"
    "                 :: \"r\"(b0 + 8 * s) : \"memory\");\n"
    "  asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n"
    "  unsigned long long step = gridDim.x;\n"
    "  for (int s = 0; s < TJ_ST; s++) {\n"
    "    unsigned long long c = blockIdx.x + s * step;\n"
    "    if (c < chunks)\n"
    "      tj_issue(b0 + 8 * s, d0 + s * TJ_CH, p + c * TJ_CH);\n"
    "  }\n"
    "  unsigned long long k = 0;\n"
    "  for (unsigned long long c = blockIdx.x; c < chunks; c += step, k++) {\n"
    "    unsigned s = (unsigned)(k % TJ_ST), done = 0;\n"
    "    unsigned parity = (unsigned)(k / TJ_ST) & 1u;\n"
    "    while (!done)\n"
    "      asm volatile(\"{\\n.reg .pred q;\\n\"\n"
    "                   \"mbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2;\\n\"\n"
    "                   \"selp.u32 %0, 1, 0, q;\\n}\"\n"
    "                   : \"=r\"(done) : \"r\"(b0 + 8 * s), \"r\"(parity)\n"
    "                   : \"memory\");\n"
    "    unsigned long long next = c + TJ_ST * step;\n"
    "    if (next < chunks)\n"
    "      tj_issue(b0 + 8 * s, d0 + s * TJ_CH, p + next * TJ_CH);\n"
    "  }\n"
    "  if (k == 0xffffffffffffull) /* never: keeps out a parameter */\n"
    "    out[0] = 0;\n"
    "}\n";

typedef struct read_ctx {
  tj_kernel *k;
  void *p;
  unsigned long long n; /* 16-byte units; the bulk read's: 8 KiB chunks */
  unsigned *out;
  unsigned grid, block;
  void *stream; /* as gemm_ctx's */
} read_ctx;

static void run_read(void *p)
{
  read_ctx *r = p;
  void *args[] = {&r->p, &r->n, &r->out};
  if (tj_launch(r->k, (tj_dim3){r->grid, 1, 1}, (tj_dim3){r->block, 1, 1}, 0,
                r->stream, args) != TJ_OK)
    die("tj_bench_read: launch failed");
}

/* The word a read kernel writes where its data says to (never here). */
static unsigned *read_out(void)
{
  static unsigned *out;
  if (!out)
    CHECK(hipMalloc((void **)&out, sizeof *out));
  return out;
}

/* The SMs of device 0 (132 where it cannot say). */
static unsigned device_sms(void)
{
  tj_device_info info;
  return tj_device_get_info(0, &info) == TJ_OK && info.compute_units > 0
             ? (unsigned)info.compute_units
             : 132u;
}

/* The read kernel with unroll loads in flight a thread (4 or 8); the
 * runtime's, which outlives every call here. */
static tj_kernel *read_kernel(tj_runtime *rt, int unroll)
{
  static tj_kernel *k[2];
  int i = unroll == 8;
  if (!k[i] && tj_kernel_compile(rt, read_src, "tj_bench_read",
                                 i ? "-DTJ_U=8" : NULL, &k[i]) != TJ_OK)
    die("tj_bench_read: %s", tj_errmsg(rt));
  return k[i];
}

/* units at p read by k (a read kernel: 16-byte units with 512-thread
 * blocks, the bulk read's 8 KiB chunks with 32) in blocks_per_sm blocks
 * an SM. */
static read_ctx read_ctx_of(tj_kernel *k, const void *p,
                            unsigned long long units, unsigned block,
                            unsigned blocks_per_sm)
{
  return (read_ctx){k, (void *)p, units, read_out(),
                    blocks_per_sm * device_sms(), block, NULL};
}

/* That read timed: the median of reps launches each after clean's flush,
 * in ms. */
static double read_ms_of(tj_kernel *k, const void *p, unsigned long long units,
                         unsigned block, unsigned blocks_per_sm,
                         clean_flush *clean, int reps)
{
  read_ctx r = read_ctx_of(k, p, units, block, blocks_per_sm);
  return time_clean_flushed(clean, run_read, &r, reps);
}

/* The bulk read's kernel, or NULL where the GPU has no cp.async.bulk
 * (before sm_90, and AMD): the runtime's, which outlives every call. */
static tj_kernel *read_bulk_kernel(tj_runtime *rt)
{
  static tj_kernel *k;
  static int tried;
  const char *arch = tj_runtime_arch(rt);
  if (!tried && arch && strncmp(arch, "sm_", 3) == 0 && atoi(arch + 3) >= 90) {
    tried = 1;
    if (tj_kernel_compile(rt, read_bulk_src, "tj_bench_read_bulk", NULL,
                          &k) != TJ_OK)
      die("tj_bench_read_bulk: %s", tj_errmsg(rt));
  }
  return k;
}

/* The read of B beside each skinny shape: the first bytes (a multiple of
 * 16) at p with four loads in flight a thread and four 512-thread blocks
 * an SM. */
static read_ctx read_of_b(tj_runtime *rt, const void *p, size_t bytes)
{
  return read_ctx_of(read_kernel(rt, 4), p, bytes / 16, 512, 4);
}

/* That read's rate in GB/s, the median of reps launches each after
 * clean's flush. */
static double read_gbs_of(tj_runtime *rt, const void *p, size_t bytes,
                          clean_flush *clean, int reps)
{
  read_ctx r = read_of_b(rt, p, bytes);
  double ms = time_clean_flushed(clean, run_read, &r, reps);
  return (double)(r.n * 16) / (ms * 1e6);
}

/*
 * Layers back to back, as a model's decode step runs them: LAYERS calls
 * of one shape in a row on one stream, each on its own B (B's values at
 * its own address: at the smallest 8 x 32 MiB, several times an L2,
 * so every B comes from memory), timed between one pair of events after
 * the clean flush.  A layer's time is the chain's over LAYERS: each launch
 * queued behind the one before, as in a program, not after an idle GPU.
 */
#define LAYERS 8

typedef struct chain_ctx {
  void (*one)(void *); /* run_ours, run_vendor, run_read or run_copy */
  void *arg;           /* its context, in which */
  void **b;            /* each layer's B goes here in turn, */
  void **stream;       /* and a capture's stream here */
  void *B[LAYERS];
} chain_ctx;

static void run_chain(void *p)
{
  chain_ctx *c = p;
  for (int i = 0; i < LAYERS; i++) {
    *c->b = c->B[i];
    c->one(c->arg);
  }
}

static tj_runtime *open_with_env(tj_runtime *like, const char *name,
                                 const char *value);

typedef struct graph_ctx {
  hipGraphExec_t exec;
  hipStream_t stream;
} graph_ctx;

static void run_graph(void *p)
{
  graph_ctx *x = p;
  CHECK(hipGraphLaunch(x->exec, x->stream));
}

/* The chain captured into a graph on a stream of its own and the graph
 * timed as the chain is (the stream waits for the null stream's flush
 * and events, and they for it), over LAYERS: how a program that replays
 * its decode step as a graph runs the layers.  0 where the capture or
 * the graph is refused. */
static double chain_graph_ms(chain_ctx *c, clean_flush *clean, int reps)
{
  hipStream_t s;
  hipGraph_t graph;
  graph_ctx x = {0};
  double ms = 0;
  if (hipStreamCreate(&s) != hipSuccess)
    return 0;
  *c->stream = s;
  if (hipStreamBeginCapture(s, hipStreamCaptureModeGlobal) == hipSuccess) {
    run_chain(c);
    if (hipStreamEndCapture(s, &graph) == hipSuccess) {
      if (hipGraphInstantiateWithFlags(&x.exec, graph, 0) == hipSuccess) {
        x.stream = s;
        ms = time_clean_flushed(clean, run_graph, &x, reps) / LAYERS;
        hipGraphExecDestroy(x.exec);
      }
      hipGraphDestroy(graph);
    }
  }
  *c->stream = NULL;
  hipStreamDestroy(s);
  return ms;
}

/* Ours, the read of B and the vendor's as layers back to back: ours as a
 * fraction of the copy rate, the read's beside it, and the vendor's time
 * over ours; where the Hopper skinny kernel runs (entry), ours launched
 * plainly too (TJ_GEMM_PDL=0: not to start early).  No copy of the same
 * bytes as layers: its writes, each layer's into L2, need not reach
 * memory while the layers are timed, so such a chain runs faster than a
 * read of the same B's whole bytes and is no yardstick. */
static void bench_layers(gemm_ctx *g, const char *entry, int have_vendor,
                         double bytes, double copy_gbs, clean_flush *clean,
                         const char *shape, bench_record_fn record)
{
  enum { REPS = 10 };
  char label[128];
  size_t b_bytes = (size_t)g->k * g->n * 2;
  void *b0 = g->B;
  chain_ctx c = {run_ours, g, &g->B, &g->stream, {b0}};
  for (int i = 1; i < LAYERS; i++) {
    CHECK(hipMalloc(&c.B[i], b_bytes));
    CHECK(hipMemcpyDtoDAsync(c.B[i], b0, b_bytes, NULL));
  }
  double ms = time_clean_flushed(clean, run_chain, &c, REPS) / LAYERS;
  snprintf(label, sizeof label, "gemm_f16 %s, %d layers in a row, "
           "bandwidth / copy", shape, LAYERS);
  record("gemm", label, bytes / (ms * 1e6) / copy_gbs, "x");
  snprintf(label, sizeof label, "gemm_f16 %s, %d layers in a row, time a "
           "layer", shape, LAYERS);
  record("gemm", label, ms * 1e3, "us");
  double gms = chain_graph_ms(&c, clean, REPS);
  if (gms > 0) {
    snprintf(label, sizeof label, "gemm_f16 %s, %d layers in a graph, "
             "bandwidth / copy", shape, LAYERS);
    record("gemm", label, bytes / (gms * 1e6) / copy_gbs, "x");
  }
  double plain_ms = 0;
  if (entry && strstr(entry, "_sm90a_skinny") != NULL) {
    tj_runtime *keep = g->rt;
    g->rt = open_with_env(keep, "TJ_GEMM_PDL", "0");
    plain_ms = time_clean_flushed(clean, run_chain, &c, REPS) / LAYERS;
    double plain_gms = chain_graph_ms(&c, clean, REPS);
    tj_runtime_close(g->rt);
    g->rt = keep;
    snprintf(label, sizeof label, "gemm_f16 %s, %d layers in a row, plain "
             "launch (TJ_GEMM_PDL=0) / copy", shape, LAYERS);
    record("gemm", label, bytes / (plain_ms * 1e6) / copy_gbs, "x");
    if (plain_gms > 0) {
      snprintf(label, sizeof label, "gemm_f16 %s, %d layers in a graph, "
               "plain launch (TJ_GEMM_PDL=0) / copy", shape, LAYERS);
      record("gemm", label, bytes / (plain_gms * 1e6) / copy_gbs, "x");
    }
  }
  read_ctx r = read_of_b(g->rt, NULL, b_bytes);
  chain_ctx rc = c;
  rc.one = run_read, rc.arg = &r, rc.b = &r.p, rc.stream = &r.stream;
  double rms = time_clean_flushed(clean, run_chain, &rc, REPS) / LAYERS;
  snprintf(label, sizeof label, "read of B %s, %d layers in a row / copy",
           shape, LAYERS);
  record("gemm", label, (double)(r.n * 16) / (rms * 1e6) / copy_gbs, "x");
  double rgms = chain_graph_ms(&rc, clean, REPS);
  if (rgms > 0) {
    snprintf(label, sizeof label, "read of B %s, %d layers in a graph / copy",
             shape, LAYERS);
    record("gemm", label, (double)(r.n * 16) / (rgms * 1e6) / copy_gbs, "x");
  }
  if (have_vendor) {
    c.one = run_vendor;
    double vms = time_clean_flushed(clean, run_chain, &c, REPS) / LAYERS;
    snprintf(label, sizeof label, "gemm_f16 / %s %s, %d layers in a row (time "
             "ratio)", g->vendor->name, shape, LAYERS);
    record("gemm", label, vms / ms, "x");
    if (plain_ms > 0) {
      snprintf(label, sizeof label, "gemm_f16 plain launch / %s %s, %d "
               "layers in a row (time ratio)", g->vendor->name, shape,
               LAYERS);
      record("gemm", label, vms / plain_ms, "x");
    }
  }
  g->B = b0;
  for (int i = 1; i < LAYERS; i++)
    hipFree(c.B[i]);
}

/* The memory's peak rate in GB/s as the driver gives it (twice its clock
 * times its bus width), or 0 where it gives neither. */
static double memory_peak_gbs(void)
{
  tj__device_props p;
  memset(&p, 0, sizeof p);
  if (tj__device_query(0, &p, TJ__QUERY_CLOCK) != TJ_OK)
    return 0;
  return 2.0 * p.memory_clock_khz * 1e3 * (p.memory_bus_bits / 8.0) / 1e9;
}

/*
 * The most a kernel that must read each size can reach, as a fraction of
 * the copy rate, when every launch costs the empty launch's time
 * (empty_ms) and its bytes then stream from the first moment: at the rate
 * the largest read streamed once its empty launch is taken off (sizes'
 * last, best_ms its best time), and at the memory's peak rate.  Below the
 * target of 0.8 at the peak rate, no kernel reaches 0.8 at that size timed
 * this way; below it at the streaming rate, none does without streaming
 * faster than the largest read did.
 */
static void read_ceilings(const size_t *sizes, const double *best_ms,
                          size_t count, double empty_ms, double copy_gbs,
                          bench_record_fn record)
{
  char label[128];
  double peak = memory_peak_gbs();
  double stream_ms = best_ms[count - 1] - empty_ms;
  double stream_gbs =
      stream_ms > 0 ? (double)sizes[count - 1] / (stream_ms * 1e6) : 0;
  if (peak > 0)
    record("gemm", "memory's peak rate (2 x clock x bus width)", peak, "GB/s");
  record("gemm", "largest read's rate after the empty launch", stream_gbs,
         "GB/s");
  for (size_t i = 0; i < count; i++) {
    double rates[2] = {stream_gbs, peak};
    const char *at[2] = {"the largest read's rate", "the peak rate"};
    for (int r = 0; r < 2; r++) {
      if (rates[r] <= 0)
        continue;
      double ms = empty_ms + (double)sizes[i] / (rates[r] * 1e6);
      snprintf(label, sizeof label, "read of %zu bytes, ceiling at %s / copy",
               sizes[i], at[r]);
      record("gemm", label, (double)sizes[i] / (ms * 1e6) / copy_gbs, "x");
    }
  }
}

/*
 * What any kernel can reach on the skinny shapes' bytes in one launch,
 * timed as they are (each launch after the clean flush, between events):
 * the time of a launch that reads nothing (the read kernel with n = 0,
 * a full grid), and reads of 1 MiB to 256 MiB with each read kernel
 * (4 or 8 loads in flight; 2, 4 or 8 blocks an SM) and, on sm_90 and
 * later, the bulk read (1, 2 or 4 blocks an SM), as a fraction of the
 * 256 MiB copy's rate and in microseconds.  A GEMM must read at
 * least B: where the best read of B's bytes is short of 80% of the copy
 * rate, so is any GEMM of that shape.
 */
static void bench_read_floor(tj_runtime *rt, double copy_gbs,
                             clean_flush *clean, bench_record_fn record)
{
  static const size_t sizes[] = {
      (size_t)1 << 20, (size_t)4 << 20, (size_t)8 << 20, (size_t)16 << 20,
      (size_t)4096 * 4096 * 2,  /* B of M x 4096 x 4096 */
      (size_t)64 << 20,
      (size_t)11008 * 4096 * 2, /* B of M x 11008 x 4096 */
      (size_t)256 << 20};
  /* Each way to read: its kernel, the bytes of its unit, its block, its
   * blocks an SM, and how the label names it. */
  typedef struct read_way {
    tj_kernel *k;
    unsigned unit, block, per_sm;
    const char *name;
  } read_way;
  read_way ways[9];
  size_t n = 0;
  for (unsigned per_sm = 2; per_sm <= 8; per_sm *= 2)
    ways[n++] = (read_way){read_kernel(rt, 4), 16, 512, per_sm, "4 in flight"};
  for (unsigned per_sm = 2; per_sm <= 8; per_sm *= 2)
    ways[n++] = (read_way){read_kernel(rt, 8), 16, 512, per_sm, "8 in flight"};
  tj_kernel *bulk = read_bulk_kernel(rt);
  for (unsigned per_sm = 1; bulk && per_sm <= 4; per_sm *= 2)
    ways[n++] = (read_way){bulk, 8192, 32, per_sm, "bulk copies"};
  char label[128];
  void *p = NULL;
  CHECK(hipMalloc(&p, (size_t)256 << 20));
  CHECK(hipMemset(p, 1, (size_t)256 << 20));
  printf("  what a read reaches in one launch (clean L2)\n");
  double empty_ms = read_ms_of(read_kernel(rt, 4), p, 0, 512, 4, clean, 20);
  record("gemm", "launch that reads nothing, clean L2 time", empty_ms * 1e3,
         "us");
  size_t count = sizeof sizes / sizeof sizes[0];
  double best_ms[sizeof sizes / sizeof sizes[0]];
  for (size_t i = 0; i < count; i++) {
    best_ms[i] = 0;
    for (size_t w = 0; w < n; w++) {
      double ms = read_ms_of(ways[w].k, p, sizes[i] / ways[w].unit,
                             ways[w].block, ways[w].per_sm, clean, 20);
      snprintf(label, sizeof label, "read of %zu bytes, %s, %u blocks an SM, "
               "clean L2 time", sizes[i], ways[w].name, ways[w].per_sm);
      record("gemm", label, ms * 1e3, "us");
      if (best_ms[i] == 0 || ms < best_ms[i])
        best_ms[i] = ms;
    }
    snprintf(label, sizeof label, "read of %zu bytes, the best / copy, clean "
             "L2", sizes[i]);
    record("gemm", label, (double)sizes[i] / (best_ms[i] * 1e6) / copy_gbs,
           "x");
  }
  hipFree(p);
  read_ceilings(sizes, best_ms, count, empty_ms, copy_gbs, record);
}

/* Every shape is timed with L2 emptied first: B of 1 x 4096 x 4096 is
 * 32 MiB and would otherwise be served from L2 after the first rep.
 * The default shapes: square, and M in {1, 4, 16, 128, 4096} with
 * (N, K) in {(4096, 4096), (11008, 4096), (4096, 11008)}. */
static const int shapes[][3] = {
    {1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096},
    {8192, 8192, 8192},
    {1, 4096, 4096}, {1, 11008, 4096}, {1, 4096, 11008},
    {4, 4096, 4096}, {4, 11008, 4096}, {4, 4096, 11008},
    {16, 4096, 4096}, {16, 11008, 4096}, {16, 4096, 11008},
    {128, 4096, 4096}, {128, 11008, 4096}, {128, 4096, 11008},
    {4096, 11008, 4096}, {4096, 4096, 11008}};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* name=value in the environment; env_restore(name, saved) puts back what
 * the caller had there (saved: the value returned, or NULL for none). */
static char *env_set(const char *name, const char *value)
{
  const char *had = getenv(name);
  char *saved = had ? strdup(had) : NULL;
  if (had && !saved)
    die("out of memory");
  setenv(name, value, 1);
  return saved;
}

static void env_restore(const char *name, char *saved)
{
  if (saved)
    setenv(name, saved, 1);
  else
    unsetenv(name);
  free(saved);
}

/* Our GEMM on a runtime opened with name=value in the environment, whose
 * knobs bench_open reads (TJ_GEMM_SPLITK, TJ_GEMM_SM90A, ...), on the
 * same cache. */
static tj_runtime *open_with_env(tj_runtime *like, const char *name,
                                 const char *value)
{
  tj_options o = {0};
  o.cache_path = tj_runtime_cache_path(like);
  o.flags = o.cache_path ? 0 : TJ_CACHE_DISABLE;
  tj_runtime *rt = NULL;
  char *saved = env_set(name, value);
  int rc = bench_open(&rt, &o); /* reads the knobs */
  env_restore(name, saved);
  if (rc != TJ_OK)
    die("tj_runtime_open: %s", tj_errmsg(rt));
  return rt;
}

/* The entry's name as the runtime with name=value gives it (copied: a
 * Hopper configuration's name is that runtime's). */
#define ENTRY_MAX 128
static double time_with_env_entry(gemm_ctx *g, const char *name,
                                  const char *value, int reps,
                                  char entry[ENTRY_MAX], clean_flush *clean)
{
  tj_runtime *rt = open_with_env(g->rt, name, value), *keep = g->rt;
  g->rt = rt;
  double ms = clean ? time_clean_flushed(clean, run_ours, g, reps)
                    : bench_time_gpu_flushed(run_ours, g, reps);
  if (entry) {
    const char *e = tj_gemm_f16_kernel(rt, g->m, g->n, g->k, g->A, g->k,
                                       g->B, g->n, g->C, g->n);
    snprintf(entry, ENTRY_MAX, "%s", e ? e : "(refused)");
  }
  g->rt = keep;
  tj_runtime_close(rt);
  return ms;
}

static double time_with_env(gemm_ctx *g, const char *name, const char *value,
                            int reps)
{
  return time_with_env_entry(g, name, value, reps, NULL, NULL);
}

/* A variant (name=value): its time, and the default's (ms) over it. */
static double time_variant(gemm_ctx *g, const char *name, const char *value,
                           const char *what, const char *shape, double ms,
                           int reps, bench_record_fn record)
{
  char label[128];
  double variant_ms = time_with_env(g, name, value, reps);
  snprintf(label, sizeof label, "gemm_f16 %s default / %s (%s=%s) (time "
           "ratio)", shape, what, name, value);
  record("gemm", label, ms / variant_ms, "x");
  return variant_ms;
}

/* The vendor's time over ours ("gemm_f16[ what] / vendor shape (time
 * ratio[, clean L2])"); nothing where ours was not timed (ms 0). */
static void record_vs_vendor(const gemm_ctx *g, const char *what,
                             const char *shape, int clean_l2, double vms,
                             double ms, bench_record_fn record)
{
  if (ms <= 0)
    return;
  char label[128];
  snprintf(label, sizeof label, "gemm_f16%s%s / %s %s (time ratio%s)",
           what ? " " : "", what ? what : "", g->vendor->name, shape,
           clean_l2 ? ", clean L2" : "");
  record("gemm", label, vms / ms, "x");
}

static void bench_shape(gemm_ctx *g, int have_vendor, double copy_gbs,
                        clean_flush *clean, bench_record_fn record)
{
  double flop = 2.0 * g->m * (double)g->n * g->k;
  double bytes = 2.0 * ((double)g->m * g->k + (double)g->k * g->n +
                        (double)g->m * g->n);
  int reps = flop > 5e11 ? 5 : 20;
  char shape[48], label[256];
  snprintf(shape, sizeof shape, "%dx%dx%d", g->m, g->n, g->k);
  double ms = bench_time_gpu_flushed(run_ours, g, reps);
  const char *entry = tj_gemm_f16_kernel(g->rt, g->m, g->n, g->k, g->A, g->k,
                                         g->B, g->n, g->C, g->n);
  int split = tj_gemm_f16_split(g->rt, g->m, g->n, g->k, g->A, g->k, g->B,
                                g->n, g->C, g->n);
  printf("  %s runs %s, split %d\n", shape, entry ? entry : "(refused)",
         split);
  snprintf(label, sizeof label, "gemm_f16 %s", shape);
  record("gemm", label, flop / (ms * 1e9), "TFLOP/s");
  if (split > 1) {
    /* The same kernel unsplit, for what split-K gains. */
    double whole = time_with_env(g, "TJ_GEMM_SPLITK", "1", reps);
    snprintf(label, sizeof label, "gemm_f16 %s unsplit (TJ_GEMM_SPLITK=1)",
             shape);
    record("gemm", label, flop / (whole * 1e9), "TFLOP/s");
  }
  if (entry && strstr(entry, "_sm90a_") != NULL) {
    /* The mma.sync kernel on the same shape, for the step the Hopper
     * path makes. */
    double old = time_with_env(g, "TJ_GEMM_SM90A", "0", reps);
    snprintf(label, sizeof label, "gemm_f16 %s mma.sync (TJ_GEMM_SM90A=0)",
             shape);
    record("gemm", label, flop / (old * 1e9), "TFLOP/s");
  }
  /* TJ_BENCH_VARIANTS=0: none of the opt-in variants below (a run that
   * must not depend on them). */
  const char *v = getenv("TJ_BENCH_VARIANTS");
  int variants = !(v && strcmp(v, "0") == 0);
  double direct_ms = 0;
  if (variants && entry && strstr(entry, "_sm90a_") != NULL &&
      strstr(entry, "_sm90a_skinny") == NULL) {
    /* The tiles' epilogue straight from the accumulators (the rule's
     * stores through TMA, which this comparison times faster): the
     * default's time over its, and its against cuBLAS below. */
    if (split == 1) /* split-K's partials never go through TMA */
      direct_ms = time_variant(g, "TJ_GEMM_TMA_STORE", "0", "direct store",
                               shape, ms, reps, record);
  }
  if (entry && strncmp(entry, "gemm_skinny_f16_tc_", 19) == 0) {
    /* The path it replaces (the FMA kernel to 8 rows, then the tiled
     * ones). */
    char was[ENTRY_MAX];
    double old = time_with_env_entry(g, "TJ_GEMM_SKINNY_TC", "0", reps, was,
                                     NULL);
    snprintf(label, sizeof label, "gemm_f16 %s %s (TJ_GEMM_SKINNY_TC=0) "
             "bandwidth / copy", shape, was);
    record("gemm", label, bytes / (old * 1e6) / copy_gbs, "x");
  }
  if (entry && strstr(entry, "_sm90a_skinny") != NULL) {
    /* The paths it replaces (the skinny kernels of gemm_skinny_f16_tc.hip,
     * the split-K tiles), with L2 cleaned as below. */
    char was[ENTRY_MAX];
    double old = time_with_env_entry(g, "TJ_GEMM_SKINNY_SM90A", "0", reps,
                                     was, clean);
    snprintf(label, sizeof label, "gemm_f16 %s %s (TJ_GEMM_SKINNY_SM90A=0) "
             "bandwidth / copy, clean L2", shape, was);
    record("gemm", label, bytes / (old * 1e6) / copy_gbs, "x");
  }
  double kept_ms = 0, kept_clean_ms = 0;
  if (variants && entry && strstr(entry, "_sm90a_skinny") != NULL) {
    /* B read without marking it evict-first in L2 (the default marks it
     * since this comparison times that faster): with and without L2 cleaned
     * first, against cuBLAS below. */
    kept_ms = time_with_env(g, "TJ_GEMM_EVICT_FIRST", "0", reps);
    kept_clean_ms = time_with_env_entry(g, "TJ_GEMM_EVICT_FIRST", "0", reps,
                                        NULL, clean);
    snprintf(label, sizeof label, "gemm_f16 %s B not evict-first "
             "(TJ_GEMM_EVICT_FIRST=0) bandwidth / copy, clean L2", shape);
    record("gemm", label, bytes / (kept_clean_ms * 1e6) / copy_gbs, "x");
  }
  double clean_ms = 0, clean_vms = 0;
  if (g->m <= 16) {
    snprintf(label, sizeof label, "gemm_f16 %s bandwidth / copy (%s)", shape,
             entry ? entry : "refused");
    record("gemm", label, bytes / (ms * 1e6) / copy_gbs, "x");
    clean_ms = time_clean_flushed(clean, run_ours, g, reps);
    snprintf(label, sizeof label, "gemm_f16 %s bandwidth / copy, clean L2 "
             "(%s)", shape, entry ? entry : "refused");
    record("gemm", label, bytes / (clean_ms * 1e6) / copy_gbs, "x");
    /* What a copy moving the same bytes (half read, half written) reaches
     * in one launch, timed the same way: the ceiling at this size, where
     * the 256 MiB copy's rate is the one at scale. */
    snprintf(label, sizeof label, "copy of the same bytes %s / copy, clean L2",
             shape);
    record("gemm", label,
           copy_gbs_of((size_t)(bytes / 2), clean, reps) / copy_gbs, "x");
    /* And a kernel that reads B's bytes, no more: what streaming them
     * costs at this size without a product to compute. */
    snprintf(label, sizeof label, "read of B %s / copy, clean L2", shape);
    record("gemm", label,
           read_gbs_of(g->rt, g->B, (size_t)g->k * g->n * 2, clean, reps) /
               copy_gbs, "x");
    snprintf(label, sizeof label, "gemm_f16 %s clean L2 time", shape);
    record("gemm", label, clean_ms * 1e3, "us");
    bench_layers(g, entry, have_vendor, bytes, copy_gbs, clean, shape,
                 record);
  }
  if (!have_vendor)
    return;
  if (g->m <= 16) {
    clean_vms = time_clean_flushed(clean, run_vendor, g, reps);
    record_vs_vendor(g, NULL, shape, 1, clean_vms, clean_ms, record);
    record_vs_vendor(g, "B not evict-first", shape, 1, clean_vms,
                     kept_clean_ms, record);
  }
  double vms = bench_time_gpu_flushed(run_vendor, g, reps);
  snprintf(label, sizeof label, "%s %s", g->vendor->name, shape);
  record("gemm", label, flop / (vms * 1e9), "TFLOP/s");
  record_vs_vendor(g, NULL, shape, 0, vms, ms, record);
  record_vs_vendor(g, "B not evict-first", shape, 0, vms, kept_ms, record);
  record_vs_vendor(g, "direct store", shape, 0, vms, direct_ms, record);
  if ((double)g->m * g->n <= 64.0 * 1024 * 1024) {
    snprintf(label, sizeof label, "rel L2 vs %s %s", g->vendor->name, shape);
    record("gemm", label, agreement(g), "");
  }
}

/* TJ_BENCH_SHAPES="MxNxK,...": those shapes instead of the table (at most
 * 32; a malformed list is refused). */
static size_t shapes_from_env(int (*out)[3], size_t cap)
{
  const char *s = getenv("TJ_BENCH_SHAPES");
  size_t n = 0;
  while (s && *s && n < cap) {
    int m, nn, k, used = 0;
    if (sscanf(s, "%dx%dx%d%n", &m, &nn, &k, &used) != 3 || m < 1 ||
        nn < 1 || k < 1)
      die("TJ_BENCH_SHAPES: '%s' is not MxNxK[,MxNxK...]", s);
    out[n][0] = m;
    out[n][1] = nn;
    out[n++][2] = k;
    s += used;
    if (*s == ',')
      s++;
    else if (*s)
      die("TJ_BENCH_SHAPES: unexpected '%s'", s);
  }
  return n;
}

/* The host's time to enqueue one call, in microseconds: the median over
 * rounds of CALLS calls back to back on the default stream, none waited
 * for (the GPU's work is drained between rounds, so the launch queue
 * never fills and blocks a call). */
static double enqueue_us(void (*fn)(void *), void *ctx)
{
  enum { ROUNDS = 21, CALLS = 32 };
  double us[ROUNDS];
  fn(ctx); /* loads what the first call loads */
  for (int r = 0; r < ROUNDS; r++) {
    CHECK(hipDeviceSynchronize());
    double t0 = bench_now_ms();
    for (int i = 0; i < CALLS; i++)
      fn(ctx);
    us[r] = (bench_now_ms() - t0) * 1e3 / CALLS;
  }
  CHECK(hipDeviceSynchronize());
  return bench_median(us, ROUNDS);
}

/* What a call costs the host (planning, the tuning table's memo, tensor
 * maps, workspaces, the launch), ours and the vendor's, at a skinny shape
 * and a tiled one: for a model's many small GEMMs this is time the CPU
 * spends per call whatever the GPU does. */
static void bench_enqueue(tj_runtime *rt, vendor_blas *vendor,
                          int have_vendor, bench_record_fn record)
{
  static const int sizes[][3] = {{1, 4096, 4096}, {2048, 2048, 2048}};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    gemm_ctx g = {rt, vendor, sizes[i][0], sizes[i][1], sizes[i][2],
                  NULL, NULL, NULL, NULL};
    char shape[64], label[128];
    snprintf(shape, sizeof shape, "%dx%dx%d", g.m, g.n, g.k);
    g.A = random_halves((size_t)g.m * g.k, 1);
    g.B = random_halves((size_t)g.k * g.n, 2);
    CHECK(hipMalloc(&g.C, (size_t)g.m * g.n * 2));
    double ours = enqueue_us(run_ours, &g);
    snprintf(label, sizeof label, "gemm_f16 %s host enqueue per call", shape);
    record("gemm", label, ours, "us");
    if (have_vendor) {
      double theirs = enqueue_us(run_vendor, &g);
      snprintf(label, sizeof label, "gemm_f16 %s %s host enqueue per call",
               shape, vendor->name);
      record("gemm", label, theirs, "us");
      snprintf(label, sizeof label, "gemm_f16 %s host enqueue, %s / ours "
               "(time ratio)", shape, vendor->name);
      record("gemm", label, theirs / ours, "x");
    }
    hipFree(g.A);
    hipFree(g.B);
    hipFree(g.C);
  }
}

void bench_gemm(tj_runtime *rt, int quick, bench_record_fn record)
{
  int chosen[32][3];
  size_t n_chosen = shapes_from_env(chosen, 32);
  const int(*list)[3] = n_chosen ? (const int(*)[3])chosen : shapes;
  size_t n_list = n_chosen ? n_chosen : quick ? 1 : N_SHAPES;
  vendor_blas vendor = {0};
  int have_vendor = vendor_open(&vendor);
  printf("gemm_f16 (row-major, alpha=1, beta=0) vs %s\n",
         have_vendor ? vendor.name : "no vendor BLAS");
  /* The yardstick for the skinny shapes, measured in this run: a 256 MiB
   * device-to-device copy. */
  double copy_gbs = copy_gbs_of((size_t)256 << 20, NULL, 20);
  record("gemm", "device-to-device copy, 256 MiB", copy_gbs, "GB/s");
  clean_flush clean = {rt, NULL, NULL, NULL};
  CHECK(hipMalloc(&clean.scratch, (size_t)256 << 20));
  CHECK(hipMalloc(&clean.a, 16384 * 2));
  CHECK(hipMalloc(&clean.c, 8192 * 2));
  CHECK(hipMemset(clean.a, 0, 16384 * 2));
  /* TJ_BENCH_READ_FLOOR=1: what a read reaches in one launch, before the
   * shapes (not by default: 80 lines more, and seconds longer). */
  const char *rf = getenv("TJ_BENCH_READ_FLOOR");
  if (rf && strcmp(rf, "1") == 0)
    bench_read_floor(rt, copy_gbs, &clean, record);
  for (size_t i = 0; i < n_list; i++) {
    gemm_ctx g = {rt, &vendor, list[i][0], list[i][1], list[i][2],
                  NULL, NULL, NULL, NULL};
    g.A = random_halves((size_t)g.m * g.k, 1);
    g.B = random_halves((size_t)g.k * g.n, 2);
    CHECK(hipMalloc(&g.C, (size_t)g.m * g.n * 2));
    bench_shape(&g, have_vendor, copy_gbs, &clean, record);
    hipFree(g.A);
    hipFree(g.B);
    hipFree(g.C);
  }
  if (!quick)
    bench_enqueue(rt, &vendor, have_vendor, record);
  hipFree(clean.scratch);
  hipFree(clean.a);
  hipFree(clean.c);
}
