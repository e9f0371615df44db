/* bench_family.c: tj_gemm (the GEMM family) in TFLOP/s next to cuBLAS's
 * bf16 GEMM at the same shapes, and each configuration's first call with
 * the library's caches empty (its compile). */
#include "bench.h"

#include <dlfcn.h>

#if defined(TJ_PLATFORM_NVIDIA)
/* cuBLAS values, from cublas_api.h and library_types.h. */
enum { FAM_OP_N = 0, FAM_OP_T = 1, FAM_R_16BF = 14, FAM_R_32F = 0,
       FAM_COMPUTE_32F = 68, FAM_GEMM_DEFAULT = -1 };
typedef int (*fam_create_fn)(void **);
typedef int (*fam_gemm_ex_fn)(void *, int, int, int, int, int, const void *,
                              const void *, int, int, const void *, int, int,
                              const void *, void *, int, int, int, int);

typedef struct fam_blas {
  void *lib, *handle;
  fam_gemm_ex_fn gemm_ex;
} fam_blas;

static int fam_open(fam_blas *v)
{
  static const char *names[] = {"libcublas.so.13", "libcublas.so.12",
                                "libcublas.so"};
  for (size_t i = 0; i < 3 && !v->lib; i++)
    v->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  fam_create_fn create =
      v->lib ? (fam_create_fn)dlsym(v->lib, "cublasCreate_v2") : NULL;
  v->gemm_ex = v->lib ? (fam_gemm_ex_fn)dlsym(v->lib, "cublasGemmEx") : NULL;
  return create && v->gemm_ex && create(&v->handle) == 0;
}
#endif

typedef struct fam_ctx {
  tj_runtime *rt;
  tj_gemm_desc d;
#if defined(TJ_PLATFORM_NVIDIA)
  fam_blas *blas;
#endif
} fam_ctx;

static void run_family(void *p)
{
  fam_ctx *f = p;
  if (tj_gemm(f->rt, NULL, &f->d) != TJ_OK)
    die("tj_gemm: %s", tj_errmsg(f->rt));
}

#if defined(TJ_PLATFORM_NVIDIA)
/* The same product in column-major terms: C^T = op(B)^T op(A)^T. */
static void run_cublas(void *p)
{
  fam_ctx *f = p;
  const tj_gemm_desc *d = &f->d;
  static const float one = 1.0f, zero = 0.0f;
  int ctype = d->c_type == TJ_DTYPE_F32 ? FAM_R_32F : FAM_R_16BF;
  if (f->blas->gemm_ex(f->blas->handle, d->trans_b ? FAM_OP_T : FAM_OP_N,
                       d->trans_a ? FAM_OP_T : FAM_OP_N, (int)d->n, (int)d->m,
                       (int)d->k, &one, d->b, FAM_R_16BF, (int)d->ldb, d->a,
                       FAM_R_16BF, (int)d->lda, &zero, d->c, ctype,
                       (int)d->ldc, FAM_COMPUTE_32F, FAM_GEMM_DEFAULT) != 0)
    die("cublasGemmEx (bf16) failed");
}
#endif

/* A bf16 descriptor of shape m x n x k, layout ta/tb, on fresh device
 * buffers of zeros. */
static tj_gemm_desc fam_desc(int m, int n, int k, int ta, int tb, int ctype)
{
  tj_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.size = sizeof d;
  d.a_type = d.b_type = TJ_DTYPE_BF16;
  d.c_type = ctype;
  d.trans_a = ta, d.trans_b = tb;
  d.m = m, d.n = n, d.k = k, d.alpha = 1.0f;
  d.lda = ta ? m : k, d.ldb = tb ? k : n, d.ldc = n;
  void *a, *b, *c;
  size_t ec = ctype == TJ_DTYPE_F32 ? 4 : 2;
  if (hipMalloc(&a, (size_t)m * k * 2) != hipSuccess ||
      hipMalloc(&b, (size_t)k * n * 2) != hipSuccess ||
      hipMalloc(&c, (size_t)m * n * ec) != hipSuccess)
    die("hipMalloc failed");
  hipMemset(a, 0, (size_t)m * k * 2);
  hipMemset(b, 0, (size_t)k * n * 2);
  d.a = a, d.b = b, d.c = c;
  return d;
}

void bench_family(tj_runtime *rt, bench_record_fn record)
{
  static const int shapes[][3] = {{4096, 4096, 4096}, {128, 4096, 4096},
                                  {1000, 3000, 997}};
  static const int layouts[][3] = {{0, 0, TJ_DTYPE_BF16}, {0, 1, TJ_DTYPE_BF16},
                                   {1, 0, TJ_DTYPE_F32}};
  printf("tj_gemm (bf16) vs cuBLAS\n");
#if defined(TJ_PLATFORM_NVIDIA)
  fam_blas blas = {0};
  int have_blas = fam_open(&blas);
#endif
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
      fam_ctx f = {rt, fam_desc(shapes[s][0], shapes[s][1], shapes[s][2],
                                layouts[l][0], layouts[l][1], layouts[l][2])
#if defined(TJ_PLATFORM_NVIDIA)
                   , &blas
#endif
      };
      double flop = 2.0 * shapes[s][0] * (double)shapes[s][1] * shapes[s][2];
      double t0 = bench_now_ms();
      const char *entry = tj_gemm_kernel(rt, &f.d);
      double first = bench_now_ms() - t0;
      if (!entry)
        die("tj_gemm_kernel: %s", tj_errmsg(rt));
      char label[160];
      snprintf(label, sizeof label, "%s %dx%dx%d first build", entry,
               shapes[s][0], shapes[s][1], shapes[s][2]);
      record("family", label, first, "ms");
      double ms = bench_time_gpu(run_family, &f, 5);
      snprintf(label, sizeof label, "%s %dx%dx%d", entry, shapes[s][0],
               shapes[s][1], shapes[s][2]);
      record("family", label, flop / (ms * 1e9), "TFLOP/s");
#if defined(TJ_PLATFORM_NVIDIA)
      if (have_blas) {
        double vms = bench_time_gpu(run_cublas, &f, 5);
        snprintf(label, sizeof label, "tj_gemm / cuBLAS %s %dx%dx%d (time "
                 "ratio)", entry, shapes[s][0], shapes[s][1], shapes[s][2]);
        record("family", label, vms / ms, "x");
      }
#endif
      hipFree((void *)f.d.a);
      hipFree((void *)f.d.b);
      hipFree(f.d.c);
    }
}
