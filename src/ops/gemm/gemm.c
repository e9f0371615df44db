/*
 * gemm.c: tj_gemm_f16 and the calls around it (the "kernels" section of
 * ops.h): the argument checks, then the launch of what the plan (plan.c)
 * says to run, with the tensor maps and workspace it needs.
 */
#include "call.h"
#include "plan.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- argument checks */

static int check_gemm_dims(tj_runtime *rt, const char *fn, int M, int N,
                           int K, int lda, int ldb, int ldc)
{
  const char *names[] = {"M", "N", "K"};
  int dims[] = {M, N, K};
  for (int i = 0; i < 3; i++) {
    if (dims[i] < 1)
      return tj__fail(rt, TJ_EINVAL, "%s: %s=%d must be at least 1", fn,
                      names[i], dims[i]);
    if (dims[i] > GEMM_DIM_MAX)
      return tj__fail(rt, TJ_ERANGE, "%s: %s=%d is over %d, the most the "
                      "kernel's int tile arithmetic allows", fn, names[i],
                      dims[i], GEMM_DIM_MAX);
  }
  /* Row-major: a row of A holds K elements, rows of B and C hold N. */
  if (lda < K)
    return tj__fail(rt, TJ_EINVAL, "%s: lda=%d is less than K=%d (A is "
                    "row-major M x K)", fn, lda, K);
  if (ldb < N)
    return tj__fail(rt, TJ_EINVAL, "%s: ldb=%d is less than N=%d (B is "
                    "row-major K x N)", fn, ldb, N);
  if (ldc < N)
    return tj__fail(rt, TJ_EINVAL, "%s: ldc=%d is less than N=%d (C is "
                    "row-major M x N)", fn, ldc, N);
  if ((M - 1) / GEMM_TILE + 1 > GEMM_GRID_Y_CAP)
    return tj__fail(rt, TJ_ERANGE, "%s: M=%d needs more than %d blocks of "
                    "%d rows, the grid's y limit", fn, M, GEMM_GRID_Y_CAP,
                    GEMM_TILE);
  return TJ_OK;
}

/* Bytes from the first element of a rows x cols matrix with leading
 * dimension ld to just past its last; 0 when that overflows size_t. */
static size_t matrix_span(int rows, int ld, int cols)
{
  size_t elems;
  if (__builtin_mul_overflow((size_t)(rows - 1), (size_t)ld, &elems) ||
      __builtin_add_overflow(elems, (size_t)cols, &elems) ||
      __builtin_mul_overflow(elems, (size_t)2, &elems))
    return 0;
  return elems;
}

static int check_gemm_arrays(tj_runtime *rt, const char *fn, int M, int N,
                             int K, const void *A, int lda, const void *B,
                             int ldb, const void *C, int ldc)
{
  const tj__op_array a[] = {{"A", A, 0}, {"B", B, 0}, {"C", C, 1}};
  size_t span[] = {matrix_span(M, lda, K), matrix_span(K, ldb, N),
                   matrix_span(M, ldc, N)};
  for (int i = 0; i < 3; i++) {
    if (span[i] == 0)
      return tj__fail(rt, TJ_EINVAL, "%s: %s spans more bytes than size_t "
                      "holds", fn, a[i].name);
    if ((uintptr_t)a[i].p % 2 != 0)
      return tj__fail(rt, TJ_EINVAL, "%s: %s is not 2-byte aligned", fn,
                      a[i].name);
  }
  for (int i = 0; i < 2; i++)
    if (tj__op_ranges_overlap(a[i].p, span[i], C, span[2]))
      return tj__fail(rt, TJ_EINVAL, "%s: C overlaps %s", fn, a[i].name);
  return TJ_OK;
}

static int check_gemm(tj_runtime *rt, const char *fn, int M, int N, int K,
                      const void *A, int lda, const void *B, int ldb,
                      const void *C, int ldc)
{
  if (!A || !B || !C)
    return tj__fail(rt, TJ_EINVAL, "%s: %s is NULL", fn,
                    !A ? "A" : !B ? "B" : "C");
  int rc = check_gemm_dims(rt, fn, M, N, K, lda, ldb, ldc);
  if (rc != TJ_OK)
    return rc;
  return check_gemm_arrays(rt, fn, M, N, K, A, lda, B, ldb, C, ldc);
}

/* ------------------------------------------------------- launching */

int tj__gemm_sm90a_maps(tj_runtime *rt, const char *fn,
                        const tj__gemm_ab *ab, int a_rows, void *ta, void *tb)
{
  /* Stored A is M x K, or K x M (boxes of 64 x 64) transposed; stored B
   * K x N, or N x K transposed. */
  uint64_t ar = (uint64_t)(ab->trans_a ? ab->K : ab->M);
  uint64_t ac = (uint64_t)(ab->trans_a ? ab->M : ab->K);
  uint64_t br = (uint64_t)(ab->trans_b ? ab->N : ab->K);
  uint64_t bc = (uint64_t)(ab->trans_b ? ab->K : ab->N);
  uint32_t box_a = ab->trans_a ? 64u : (uint32_t)a_rows;
  if (tj__tensor_map_16(ta, ab->A, ar, ac, (uint64_t)ab->lda, box_a, 64,
                        ab->bf16) != TJ_OK ||
      tj__tensor_map_16(tb, ab->B, br, bc, (uint64_t)ab->ldb, 64, 64,
                        ab->bf16) != TJ_OK)
    return tj__fail(rt, TJ_EDEVICE, "%s: the driver refused a TMA descriptor "
                    "for A (%llu x %llu, lda %lld) or B (%llu x %llu, ldb "
                    "%lld)", fn, (unsigned long long)ar,
                    (unsigned long long)ac, ab->lda, (unsigned long long)br,
                    (unsigned long long)bc, ab->ldb);
  return TJ_OK;
}

int tj__gemm_kernel_shared(tj_runtime *rt, const char *fn, tj_kernel *k,
                           const char *entry, unsigned bytes)
{
  if (__atomic_load_n(&k->shared_limit, __ATOMIC_ACQUIRE) >= bytes)
    return TJ_OK;
  if (tj__function_shared_limit(tj_kernel_function(k), bytes) != TJ_OK)
    return tj__fail(rt, TJ_EDEVICE, "%s: %s cannot have %u bytes of shared "
                    "memory on this device", fn, entry, bytes);
  __atomic_store_n(&k->shared_limit, bytes, __ATOMIC_RELEASE);
  return TJ_OK;
}

/* The embedded kernel of plan p, allowed its shared memory. */
static int shared_kernel(tj_runtime *rt, const char *fn, const tj__gemm_plan *p,
                         tj_kernel **k)
{
  int rc = tj__op_kernel(rt, fn, p->entry, k);
  return rc == TJ_OK ? tj__gemm_kernel_shared(rt, fn, *k, p->entry, p->shared)
                     : rc;
}

static int launch_failed(tj_runtime *rt, int rc, const char *fn,
                         const char *entry, tj_dim3 grid, tj_dim3 block)
{
  return tj__fail(rt, rc, "%s: launching %s (grid %u x %u x %u, block %u) "
                  "failed", fn, entry, grid.x, grid.y, grid.z, block.x);
}

/* Whether p runs a Hopper configuration (gemm_sm90a.hip's). */
static int hopper_plan(const tj__gemm_plan *p)
{
  return p->path == GEMM_PATH_SM90A || p->path == GEMM_PATH_SM90A_SKINNY;
}

/* The skinny tensor-core path: the partials (split > 1) into a
 * workspace of the call's own from the runtime's pool, ordered on stream,
 * then the reduce into C; without the workspace, unsplit. */
static int launch_skinny_tc(tj_runtime *rt, const char *fn, tj__gemm_plan p,
                            void *stream, int M, int N, int K, float alpha,
                            const void *A, int lda, const void *B, int ldb,
                            float beta, void *C, int ldc)
{
  if (rt->compile_only)
    return tj__op_no_gpu(rt, fn);
  tj_kernel *k = NULL, *r = NULL;
  int rc = shared_kernel(rt, fn, &p, &k);
  if (rc == TJ_OK && p.split > 1)
    rc = tj__op_kernel(rt, fn, "gemm_skinny_f16_tc_reduce", &r);
  if (rc != TJ_OK)
    return rc;
  float *work = NULL;
  int ldw = (int)p.grid.x * p.tile_n;
  size_t work_bytes = (size_t)p.split * (size_t)M * (size_t)ldw *
                      sizeof(float);
  if (p.split > 1 &&
      tj__alloc_async(&rt->device, (void **)&work, work_bytes, stream) !=
          TJ_OK) {
    work = NULL;
    p.split = 1;
    p.grid.y = 1;
    p.kper = K;
  }
  int kper = p.kper, split = p.split;
  void *args[] = {&M, &N, &K, &alpha, &A, &lda, &B, &ldb, &beta, &C, &ldc,
                  &kper, &work};
  rc = tj_launch(k, p.grid, p.block, p.shared, stream, args);
  if (rc != TJ_OK)
    rc = launch_failed(rt, rc, fn, p.entry, p.grid, p.block);
  if (rc == TJ_OK && work) {
    tj_dim3 grid = {(unsigned)((N - 1) / SKINNY_TC_REDUCE_THREADS + 1),
                    (unsigned)M, 1};
    tj_dim3 block = {SKINNY_TC_REDUCE_THREADS, 1, 1};
    void *rargs[] = {&work, &split, &M, &N, &ldw, &alpha, &beta, &C, &ldc};
    rc = tj_launch(r, grid, block, 0, stream, rargs);
    if (rc != TJ_OK)
      rc = launch_failed(rt, rc, fn, "gemm_skinny_f16_tc_reduce", grid, block);
  }
  if (work && tj__free_async(work, stream) != TJ_OK && rc == TJ_OK)
    rc = tj__fail(rt, TJ_EDEVICE, "%s: freeing the split-K workspace failed",
                  fn);
  return rc;
}

const char *tj_gemm_f16_kernel(tj_runtime *rt, int M, int N, int K,
                               const uint16_t *A, int lda, const uint16_t *B,
                               int ldb, const uint16_t *C, int ldc)
{
  if (!tj__runtime_usable(rt) ||
      check_gemm(rt, "tj_gemm_f16_kernel", M, N, K, A, lda, B, ldb, C, ldc) !=
          TJ_OK)
    return NULL;
  tj__gemm_plan p = tj__gemm_plan_call(rt, M, N, K, A, lda, B, ldb, C, ldc);
  if (!hopper_plan(&p))
    return p.entry;
  tj_gemm_desc d = tj__gemm_f16_desc(M, N, K, 1.0f, A, lda, B, ldb, 0.0f,
                                     (void *)C, ldc);
  const char *entry = tj__gemm_hopper_entry(rt, &d, &p);
  if (!entry)
    tj__fail(rt, TJ_ENOMEM, "out of memory");
  return entry;
}

/* The i-th of the configurations with a code object of their own (the
 * first of each kind and tile: the splits of split-K and the stores share
 * one) into *c: 1, or 0 past the last. */
static int nth_code_object(size_t i, tj__gemm_config *c)
{
  tj__gemm_config all[TJ__GEMM_CONFIGS_MAX];
  size_t n = tj__gemm_configs(all), found = 0;
  for (size_t j = 0; j < n; j++) {
    int first = 1;
    for (size_t k = 0; k < j && first; k++)
      first = all[k].kind != all[j].kind || all[k].bn != all[j].bn ||
              (all[j].kind == GEMM_KIND_SKINNY && all[k].split != all[j].split);
    if (first && found++ == i) {
      *c = all[j];
      return 1;
    }
  }
  return 0;
}

/* The descriptor tj_gemm_f16_configuration builds its configurations
 * for: any shape they run, since their code is the same for all. */
static tj_gemm_desc any_shape(void)
{
  const int M = SM90A_BM, N = SM90A_BM, K = 64;
  return tj__gemm_f16_desc(M, N, K, 1.0f, NULL, K, NULL, N, 0.0f, NULL, N);
}

size_t tj_gemm_f16_configurations(tj_runtime *rt)
{
  tj__gemm_config c;
  size_t n = 0;
  tj_gemm_desc d = any_shape();
  if (!tj__runtime_usable(rt) || !tj__gemm_hopper_serves(rt, &d))
    return 0;
  while (nth_code_object(n, &c))
    n++;
  return n;
}

int tj_gemm_f16_configuration(tj_runtime *rt, size_t i, tj_kernel **out)
{
  static const char fn[] = "tj_gemm_f16_configuration";
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  if (!out)
    return tj__fail(rt, TJ_EINVAL, "%s: the kernel output pointer is NULL",
                    fn);
  tj_gemm_desc d = any_shape();
  tj__gemm_config c;
  if (!tj__gemm_hopper_serves(rt, &d))
    return tj__fail(rt, TJ_ENOENT, "%s: tj_gemm_f16 runs no generated "
                    "configuration on arch %s", fn, rt->arch);
  if (!nth_code_object(i, &c))
    return tj__fail(rt, TJ_ENOENT, "%s: %zu is past the last configuration",
                    fn, i);
  tj__gemm_plan p = tj__gemm_plan_config(&c, rt->sms, (int)d.m, (int)d.n,
                                         (int)d.k);
  return tj__gemm_hopper_prepare(rt, &d, &p, out);
}

int tj_gemm_f16_split(tj_runtime *rt, int M, int N, int K, const uint16_t *A,
                      int lda, const uint16_t *B, int ldb, const uint16_t *C,
                      int ldc)
{
  if (!tj__runtime_usable(rt) ||
      check_gemm(rt, "tj_gemm_f16_split", M, N, K, A, lda, B, ldb, C, ldc) !=
          TJ_OK)
    return 0;
  return tj__gemm_plan_call(rt, M, N, K, A, lda, B, ldb, C, ldc).split;
}

tj_dim3 tj__gemm_f16_grid(tj_runtime *rt, int M, int N, int K,
                          const uint16_t *A, int lda, const uint16_t *B,
                          int ldb, const uint16_t *C, int ldc)
{
  if (!tj__runtime_usable(rt) ||
      check_gemm(rt, "tj__gemm_f16_grid", M, N, K, A, lda, B, ldb, C, ldc) !=
          TJ_OK)
    return (tj_dim3){0, 0, 0};
  return tj__gemm_plan_call(rt, M, N, K, A, lda, B, ldb, C, ldc).grid;
}

int tj_gemm_f16(tj_runtime *rt, void *stream, int M, int N, int K,
                float alpha, const uint16_t *A, int lda, const uint16_t *B,
                int ldb, float beta, uint16_t *C, int ldc)
{
  static const char fn[] = "tj_gemm_f16";
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  int rc = check_gemm(rt, fn, M, N, K, A, lda, B, ldb, C, ldc);
  if (rc != TJ_OK)
    return rc;
  tj__gemm_plan p =
      tj__gemm_plan_call(rt, M, N, K, A, lda, B, ldb, C, ldc);
  if (p.path == GEMM_PATH_SKINNY_TC)
    return launch_skinny_tc(rt, fn, p, stream, M, N, K, alpha, A, lda, B,
                            ldb, beta, C, ldc);
  /* Background builds: the fallback while p's configuration or entry
   * compiles. */
  tj_gemm_desc d = tj__gemm_f16_desc(M, N, K, alpha, A, lda, B, ldb, beta, C,
                                     ldc);
  if (hopper_plan(&p)) {
    if (tj__gemm_defer_hopper(rt, &d, &p))
      return tj__gemm_fallback_run(rt, fn, stream, &d);
    return tj__gemm_hopper_run(rt, fn, stream, &d, NULL, &p);
  }
  if (tj__gemm_defer_kernel(rt, p.entry, &d))
    return tj__gemm_fallback_run(rt, fn, stream, &d);
  void *args[] = {&M, &N, &K, &alpha, &A, &lda, &B, &ldb, &beta, &C, &ldc};
  return tj__op_launch(rt, fn, p.entry, p.grid, p.block, stream, args);
}

/* ------------------------------------------------------- host call */

typedef struct gemm_shape {
  int M, N, K;
  float alpha, beta;
} gemm_shape;

static int call_gemm(tj_runtime *rt, const void *ctx, void *const *d)
{
  const gemm_shape *s = ctx;
  return tj_gemm_f16(rt, NULL, s->M, s->N, s->K, s->alpha, d[0], s->K, d[1],
                     s->N, s->beta, d[2], s->N);
}

int tj_gemm_f16_host(tj_runtime *rt, int M, int N, int K, float alpha,
                     const uint16_t *A, const uint16_t *B, float beta,
                     uint16_t *C)
{
  static const char fn[] = "tj_gemm_f16_host";
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  /* Dense: each span is exactly its matrix, checked for overflow here. */
  int rc = check_gemm(rt, fn, M, N, K, A, K, B, N, C, N);
  if (rc != TJ_OK)
    return rc;
  const gemm_shape shape = {M, N, K, alpha, beta};
  /* beta == 0: the kernel never reads C, so it is not copied in. */
  const tj__op_buffer buf[] = {
      {A, NULL, matrix_span(M, K, K)},
      {B, NULL, matrix_span(K, N, N)},
      {beta != 0.0f ? C : NULL, C, matrix_span(M, N, N)}};
  /* The device copies are hipMalloc's, aligned as NULL is (256 bytes).
   * What runs is built before any device memory is held: an embedded
   * entry by name (host_run gets it), or the Hopper configuration. */
  tj__gemm_plan p = tj__gemm_plan_call(rt, M, N, K, NULL, K, NULL, N, NULL,
                                       N);
  if (hopper_plan(&p) && !rt->compile_only) {
    tj_gemm_desc d = tj__gemm_f16_desc(M, N, K, alpha, NULL, K, NULL, N,
                                       beta, NULL, N);
    if ((rc = tj__gemm_hopper_prepare(rt, &d, &p, NULL)) != TJ_OK)
      return rc;
  }
  return tj__op_host_run(rt, fn, hopper_plan(&p) ? NULL : p.entry, buf, 3,
                         call_gemm, &shape);
}
