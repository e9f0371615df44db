/* bench_grouped.c: tj_grouped_gemm (bf16 in, bf16 out) in TFLOP/s, with
 * the configuration that ran (the Hopper kernel's on an sm_90 device),
 * at the
 * mixture-of-experts shapes of one expert MLP's first GEMM (T tokens,
 * hidden H, expert FFN F, E experts, top-k: T k rows routed to the
 * experts), each direction (forward Y = X W[e], input gradient
 * dX = dY W[e]^T, weight gradient dW[e] = X_e^T dY_e), with uniform and
 * skewed routing; on NVIDIA beside a loop of one cuBLAS GEMM per expert
 * on the same buffers (the time ratio: above 1, tj_grouped_gemm is the
 * faster).  The routing is made on the host, so the loop knows each
 * expert's rows; tj_grouped_gemm reads them only on the device. */
#include "bench.h"

#include <dlfcn.h>

#if defined(TJ_PLATFORM_NVIDIA)
/* cuBLAS values, from cublas_api.h and library_types.h. */
enum { GRP_OP_N = 0, GRP_OP_T = 1, GRP_R_16BF = 14, GRP_COMPUTE_32F = 68,
       GRP_GEMM_DEFAULT = -1 };
typedef int (*grp_create_fn)(void **);
typedef int (*grp_gemm_ex_fn)(void *, int, int, int, int, int, const void *,
                              const void *, int, int, const void *, int, int,
                              const void *, void *, int, int, int, int);

typedef struct grp_blas {
  void *lib, *handle;
  grp_gemm_ex_fn gemm_ex;
} grp_blas;

static int grp_open(grp_blas *v)
{
  static const char *names[] = {"libcublas.so.13", "libcublas.so.12",
                                "libcublas.so"};
  for (size_t i = 0; i < 3 && !v->lib; i++)
    v->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  grp_create_fn create =
      v->lib ? (grp_create_fn)dlsym(v->lib, "cublasCreate_v2") : NULL;
  v->gemm_ex = v->lib ? (grp_gemm_ex_fn)dlsym(v->lib, "cublasGemmEx") : NULL;
  return create && v->gemm_ex && create(&v->handle) == 0;
}
#endif

/* One MoE shape: T tokens, hidden H, expert FFN F, E experts, top-k. */
typedef struct grp_shape {
  int T, H, F, E, k;
} grp_shape;

typedef struct grp_ctx {
  tj_runtime *rt;
  tj_grouped_gemm_desc d;
  const int32_t *offs; /* the same routing on the host */
#if defined(TJ_PLATFORM_NVIDIA)
  grp_blas *blas;
#endif
} grp_ctx;

static void run_grouped(void *p)
{
  grp_ctx *g = p;
  if (tj_grouped_gemm(g->rt, NULL, &g->d) != TJ_OK)
    die("tj_grouped_gemm: %s", tj_errmsg(g->rt));
}

#if defined(TJ_PLATFORM_NVIDIA)
/* Group e's GEMM alone, in column-major terms as bench_family.c does:
 * C^T = op(B)^T op(A)^T. */
static void cublas_group(grp_ctx *g, long long e, long long lo, long long hi)
{
  const tj_grouped_gemm_desc *d = &g->d;
  static const float one = 1.0f, zero = 0.0f;
  int m_grouped = d->grouped == TJ_GROUPED_M;
  long long m = m_grouped ? hi - lo : d->m, k = m_grouped ? d->k : hi - lo;
  const char *a = (const char *)d->a + 2 * lo * d->lda;
  const char *b = (const char *)d->b +
                  2 * (m_grouped ? e * d->stride_b : lo * d->ldb);
  char *c = (char *)d->c + 2 * (m_grouped ? lo * d->ldc : e * d->stride_c);
  if (g->blas->gemm_ex(g->blas->handle, d->trans_b ? GRP_OP_T : GRP_OP_N,
                       d->trans_a ? GRP_OP_T : GRP_OP_N, (int)d->n, (int)m,
                       (int)k, &one, b, GRP_R_16BF, (int)d->ldb, a,
                       GRP_R_16BF, (int)d->lda, &zero, c, GRP_R_16BF,
                       (int)d->ldc, GRP_COMPUTE_32F, GRP_GEMM_DEFAULT) != 0)
    die("cublasGemmEx (bf16, expert %lld) failed", e);
}

/* The loop: one cuBLAS GEMM per expert that has rows (the routings here
 * leave none empty). */
static void run_cublas_loop(void *p)
{
  grp_ctx *g = p;
  long long lo = 0;
  for (long long e = 0; e < g->d.groups; e++) {
    long long hi = g->offs[e];
    if (hi > lo)
      cublas_group(g, e, lo, hi);
    lo = hi;
  }
}
#endif

/* End offsets of rows routed to E experts: equal shares, or skewed, the
 * share of expert e proportional to 1 / (e + 1). */
static void grp_route(int32_t *offs, int E, long long rows, int skewed)
{
  double h = 0, acc = 0;
  for (int e = 0; e < E; e++)
    h += 1.0 / (e + 1);
  for (int e = 0; e < E; e++) {
    acc += skewed ? 1.0 / (e + 1) / h : 1.0 / E;
    offs[e] = e == E - 1 ? (int32_t)rows : (int32_t)(acc * (double)rows);
  }
}

static void *grp_zeros(size_t bytes)
{
  void *p = NULL;
  CHECK(hipMalloc(&p, bytes));
  CHECK(hipMemset(p, 0, bytes));
  return p;
}

/* Direction dir (0 forward, 1 input gradient, 2 weight gradient) of
 * shape s, bf16, on x (T k x H), w (E x H x F), y (T k x F) and
 * dw (E x H x F), routed by offs. */
static tj_grouped_gemm_desc grp_desc(const grp_shape *s, int dir, void *x,
                                     void *w, void *y, void *dx, void *dw,
                                     const int32_t *offs)
{
  long long rows = (long long)s->T * s->k, H = s->H, F = s->F;
  tj_grouped_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.size = sizeof d;
  d.a_type = d.b_type = d.c_type = TJ_DTYPE_BF16;
  d.groups = s->E, d.offs = offs, d.alpha = 1.0f;
  d.grouped = dir == 2 ? TJ_GROUPED_K : TJ_GROUPED_M;
  if (dir == 0) /* Y = X W[e]: W[e] H x F */
    d.m = rows, d.n = F, d.k = H, d.a = x, d.lda = H, d.b = w, d.ldb = F,
    d.stride_b = H * F, d.c = y, d.ldc = F;
  else if (dir == 1) /* dX = dY W[e]^T: W[e] stored H x F is N x K */
    d.m = rows, d.n = H, d.k = F, d.a = y, d.lda = F, d.b = w, d.ldb = F,
    d.stride_b = H * F, d.trans_b = 1, d.c = dx, d.ldc = H;
  else /* dW[e] = X_e^T dY_e: X stored rows x H is K x M */
    d.m = H, d.n = F, d.k = rows, d.a = x, d.lda = H, d.trans_a = 1,
    d.b = y, d.ldb = F, d.c = dw, d.ldc = F, d.stride_c = H * F;
  return d;
}

static const char *const grp_dirs[] = {"fwd", "dgrad", "wgrad"};

/* One shape: its buffers, each direction under each routing. */
static void grp_shape_run(tj_runtime *rt, const grp_shape *s,
                          bench_record_fn record
#if defined(TJ_PLATFORM_NVIDIA)
                          , grp_blas *blas, int have_blas
#endif
                          )
{
  size_t rows = (size_t)s->T * s->k, H = (size_t)s->H, F = (size_t)s->F;
  void *x = grp_zeros(rows * H * 2), *dx = grp_zeros(rows * H * 2);
  void *y = grp_zeros(rows * F * 2), *w = grp_zeros((size_t)s->E * H * F * 2);
  void *dw = grp_zeros((size_t)s->E * H * F * 2);
  int32_t *host = malloc((size_t)s->E * 4), *offs = grp_zeros((size_t)s->E * 4);
  if (!host)
    die("out of memory");
  double flop = 2.0 * (double)rows * (double)H * (double)F;
  for (int skewed = 0; skewed < 2; skewed++) {
    grp_route(host, s->E, (long long)rows, skewed);
    CHECK(hipMemcpyHtoD(offs, host, (size_t)s->E * 4));
    for (int dir = 0; dir < 3; dir++) {
      grp_ctx g = {rt, grp_desc(s, dir, x, w, y, dx, dw, offs), host
#if defined(TJ_PLATFORM_NVIDIA)
                   , blas
#endif
      };
      char label[128];
      snprintf(label, sizeof label, "%s T=%d H=%d F=%d E=%d k=%d %s",
               grp_dirs[dir], s->T, s->H, s->F, s->E, s->k,
               skewed ? "skewed" : "uniform");
      double t0 = bench_now_ms();
      const char *config = tj_grouped_gemm_kernel(rt, &g.d);
      if (!config)
        die("tj_grouped_gemm_kernel: %s", tj_errmsg(rt));
      double first = bench_now_ms() - t0;
      double ms = bench_time_gpu(run_grouped, &g, 5);
      printf("  %-48s %8.1f TFLOP/s (first build %.0f ms) %s\n", label,
             flop / (ms * 1e9), first, config);
      record("grouped", label, flop / (ms * 1e9), "TFLOP/s");
#if defined(TJ_PLATFORM_NVIDIA)
      if (have_blas) {
        double vms = bench_time_gpu(run_cublas_loop, &g, 5);
        char rl[160];
        snprintf(rl, sizeof rl, "%s / cuBLAS loop", label);
        printf("  %-48s %8.1f TFLOP/s cuBLAS loop, ratio %.2fx\n", label,
               flop / (vms * 1e9), vms / ms);
        record("grouped", rl, vms / ms, "x");
      }
#endif
    }
  }
  void *bufs[] = {x, dx, y, w, dw, offs};
  for (int i = 0; i < 6; i++)
    hipFree(bufs[i]);
  free(host);
}

void bench_grouped(tj_runtime *rt, bench_record_fn record)
{
  static const grp_shape shapes[] = {{8192, 1024, 1408, 8, 2},
                                     {16384, 2048, 1408, 64, 6},
                                     {8192, 2048, 768, 128, 8},
                                     {4096, 1024, 512, 32, 4}};
  printf("tj_grouped_gemm (bf16) at MoE shapes, each direction, uniform and "
         "skewed routing\n");
#if defined(TJ_PLATFORM_NVIDIA)
  grp_blas blas = {0};
  int have_blas = grp_open(&blas);
  if (!have_blas)
    printf("  (no cuBLAS: tj_grouped_gemm alone)\n");
#endif
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    grp_shape_run(rt, &shapes[i], record
#if defined(TJ_PLATFORM_NVIDIA)
                  , &blas, have_blas
#endif
                  );
}
