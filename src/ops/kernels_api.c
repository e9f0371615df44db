/*
 * kernels_api.c: the embedded kernels as C calls (the "kernels" section of
 * tokitai-jit.h).
 *
 * A device-pointer call checks its arguments, gets its kernel (a hit in the
 * runtime's in-memory table after the first call) and queues one launch on
 * the caller's stream; it allocates nothing.  A host call checks its
 * arguments, then allocates, copies in, runs the device-pointer call,
 * copies out through a staging buffer and frees, so that the caller's
 * output is written only when everything succeeded.
 *
 * Launch shapes are the ones the header comments of kernels/<name>.hip give;
 * the block sizes are the kernels' __launch_bounds__, which
 * tests/check_kernels.c pins against the embedded sources.  Which GEMM
 * kernel a call runs, and its grid, is gemm_plan.c's to say; this file
 * builds its tensor maps and workspace and launches it.
 */
#include "gemm_plan.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* add_i32.hip and gelu_f16.hip: 256 threads; grid-stride loops, with a
 * block covering 1024 ints or 2048 halves (one 16-byte vector per thread
 * per array); at most 65535 blocks. */
#define ELEMENTWISE_THREADS 256u
#define ADD_I32_PER_BLOCK 1024u
#define GELU_PER_BLOCK 2048u
#define GRID_X_CAP 65535u

#define MAX_HOST_BUFFERS 4

/* ------------------------------------------------------- argument checks */

/* One array argument of a call. */
typedef struct array_arg {
  const char *name;
  const void *p;
  int is_output;
} array_arg;

static int no_gpu(tj_runtime *rt, const char *fn)
{
  return tj__fail(rt, TJ_ENODEVICE,
                  "no GPU: %s launches a kernel, and this runtime is "
                  "compile-only (arch %s)", fn, rt->arch);
}

/* Does [a, a + alen) meet [b, b + blen)?  Written without a + alen, which
 * could wrap for addresses near the top. */
static int ranges_overlap(const void *a, size_t alen, const void *b,
                          size_t blen)
{
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x <= y ? y - x < alen : x - y < blen;
}

/*
 * The kernels allow an output to be exactly an input (in place) and no
 * other overlap: a partial overlap would let one thread's store land on
 * another thread's unread input, and two outputs on one array race.
 */
static int check_overlaps(tj_runtime *rt, const char *fn, const array_arg *a,
                          int na, size_t bytes)
{
  for (int i = 0; i < na; i++)
    for (int j = i + 1; j < na; j++) {
      if (!a[i].is_output && !a[j].is_output)
        continue; /* inputs are only read: any sharing is fine */
      if (a[i].p == a[j].p && a[i].is_output != a[j].is_output)
        continue; /* in place */
      if (ranges_overlap(a[i].p, bytes, a[j].p, bytes))
        return tj__fail(rt, TJ_EINVAL, "%s: %s and %s overlap (an output may "
                        "be exactly an input, nothing else)", fn, a[i].name,
                        a[j].name);
    }
  return TJ_OK;
}

/* NULLs, n, the byte count, alignment and overlaps, in that order. */
static int check_elementwise(tj_runtime *rt, const char *fn,
                             const array_arg *a, int na, size_t n, size_t elem)
{
  for (int i = 0; i < na; i++)
    if (!a[i].p)
      return tj__fail(rt, TJ_EINVAL, "%s: %s is NULL", fn, a[i].name);
  if (n == 0)
    return tj__fail(rt, TJ_EINVAL, "%s: n is 0", fn);
  if (n > SIZE_MAX / elem)
    return tj__fail(rt, TJ_EINVAL, "%s: n=%zu elements of %zu bytes overflow "
                    "size_t", fn, n, elem);
  /* A misaligned access faults on the GPU, and on CUDA that kills the
   * context; say so here instead. */
  for (int i = 0; i < na; i++)
    if ((uintptr_t)a[i].p % elem != 0)
      return tj__fail(rt, TJ_EINVAL, "%s: %s is not %zu-byte aligned", fn,
                      a[i].name, elem);
  return check_overlaps(rt, fn, a, na, n * elem);
}

static int check_length(tj_runtime *rt, const char *fn, const char *name,
                        size_t len, size_t n)
{
  if (len != n)
    return tj__fail(rt, TJ_EINVAL, "%s: %s length %zu does not match n=%zu",
                    fn, name, len, n);
  return TJ_OK;
}

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
  const array_arg a[] = {{"A", A, 0}, {"B", B, 0}, {"C", C, 1}};
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
    if (ranges_overlap(a[i].p, span[i], C, span[2]))
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

/* The kernel a call launches: compiled or loaded the first time, a hit
 * in the in-memory table after; a compile-only runtime has none. */
static int kernel_for(tj_runtime *rt, const char *fn, const char *kernel,
                      tj_kernel **k)
{
  if (rt->compile_only)
    return no_gpu(rt, fn);
  return tj_kernel_get(rt, kernel, k);
}

static int launch(tj_runtime *rt, const char *fn, const char *kernel,
                  tj_dim3 grid, tj_dim3 block, void *stream, void **args)
{
  tj_kernel *k = NULL;
  int rc = kernel_for(rt, fn, kernel, &k);
  if (rc != TJ_OK)
    return rc;
  rc = tj_launch(k, grid, block, 0, stream, args);
  if (rc != TJ_OK)
    return tj__fail(rt, rc, "%s: launching %s (grid %u x %u, block %u) "
                    "failed", fn, kernel, grid.x, grid.y, block.x);
  return TJ_OK;
}

/* min(max(ceil(n / per_block), 1), 65535), as the kernel comments say. */
static tj_dim3 elementwise_grid(size_t n, unsigned per_block)
{
  size_t blocks = n / per_block + (n % per_block != 0);
  if (blocks < 1)
    blocks = 1;
  if (blocks > GRID_X_CAP)
    blocks = GRID_X_CAP;
  return (tj_dim3){(unsigned)blocks, 1, 1};
}

static int launch_elementwise(tj_runtime *rt, const char *fn,
                              const char *kernel, size_t n,
                              unsigned per_block, void *stream, void **args)
{
  return launch(rt, fn, kernel, elementwise_grid(n, per_block),
                (tj_dim3){ELEMENTWISE_THREADS, 1, 1}, stream, args);
}

/* ------------------------------------------------------- device calls */

/*
 * The elementwise kernels differ only in their arrays: the table says
 * which, in the order the kernel takes them (inputs, then outputs), and
 * one call checks, fills the argument list and launches for all four.
 */
typedef struct elementwise_op {
  const char *fn, *host_fn, *kernel;
  int nin, nout;
  size_t elem;
  unsigned per_block;
  const char *names[MAX_HOST_BUFFERS];
} elementwise_op;

enum { OP_ADD_I32, OP_GELU_FWD, OP_GELU_BWD, OP_GELU_FWD_BWD };

static const elementwise_op elementwise_ops[] = {
    [OP_ADD_I32] = {"tj_add_i32", "tj_add_i32_host", "add_i32", 2, 1, 4,
                    ADD_I32_PER_BLOCK, {"a", "b", "c"}},
    [OP_GELU_FWD] = {"tj_gelu_fwd_f16", "tj_gelu_fwd_f16_host", "gelu_fwd_f16",
                     1, 1, 2, GELU_PER_BLOCK, {"x", "y"}},
    [OP_GELU_BWD] = {"tj_gelu_bwd_f16", "tj_gelu_bwd_f16_host", "gelu_bwd_f16",
                     2, 1, 2, GELU_PER_BLOCK, {"grad_out", "x", "grad_in"}},
    [OP_GELU_FWD_BWD] = {"tj_gelu_fwd_bwd_f16", "tj_gelu_fwd_bwd_f16_host",
                         "gelu_fwd_bwd_f16", 2, 2, 2, GELU_PER_BLOCK,
                         {"x", "grad_out", "y", "grad_in"}}};

static int check_op(tj_runtime *rt, const char *fn, const elementwise_op *op,
                    const void *const *ptr, size_t n)
{
  array_arg arr[MAX_HOST_BUFFERS];
  int na = op->nin + op->nout;
  for (int i = 0; i < na; i++)
    arr[i] = (array_arg){op->names[i], ptr[i], i >= op->nin};
  return check_elementwise(rt, fn, arr, na, n, op->elem);
}

/* The device-pointer call: ptr holds the arrays in the kernel's order. */
static int elementwise_call(tj_runtime *rt, int which, void *stream,
                            const void *const *ptr, size_t n)
{
  const elementwise_op *op = &elementwise_ops[which];
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  int rc = check_op(rt, op->fn, op, ptr, n);
  if (rc != TJ_OK)
    return rc;
  const void *p[MAX_HOST_BUFFERS];
  unsigned long long nn = n;
  void *args[MAX_HOST_BUFFERS + 1];
  int na = op->nin + op->nout;
  for (int i = 0; i < na; i++) {
    p[i] = ptr[i];
    args[i] = &p[i];
  }
  args[na] = &nn;
  return launch_elementwise(rt, op->fn, op->kernel, n, op->per_block, stream,
                            args);
}

int tj_add_i32(tj_runtime *rt, void *stream, const int32_t *a,
               const int32_t *b, int32_t *c, size_t n)
{
  const void *ptr[] = {a, b, c};
  return elementwise_call(rt, OP_ADD_I32, stream, ptr, n);
}

int tj_gelu_fwd_f16(tj_runtime *rt, void *stream, const uint16_t *x,
                    uint16_t *y, size_t n)
{
  const void *ptr[] = {x, y};
  return elementwise_call(rt, OP_GELU_FWD, stream, ptr, n);
}

int tj_gelu_bwd_f16(tj_runtime *rt, void *stream, const uint16_t *grad_out,
                    const uint16_t *x, uint16_t *grad_in, size_t n)
{
  const void *ptr[] = {grad_out, x, grad_in};
  return elementwise_call(rt, OP_GELU_BWD, stream, ptr, n);
}

int tj_gelu_fwd_bwd_f16(tj_runtime *rt, void *stream, const uint16_t *x,
                        const uint16_t *grad_out, uint16_t *y,
                        uint16_t *grad_in, size_t n)
{
  const void *ptr[] = {x, grad_out, y, grad_in};
  return elementwise_call(rt, OP_GELU_FWD_BWD, stream, ptr, n);
}

/* The sm90a entries take A and B as TMA descriptors, built here for each
 * call (host work only: they hold the pointers). */
static int sm90a_maps(tj_runtime *rt, const char *fn, void *ta, void *tb,
                      int a_rows, int M, int N, int K, const void *A, int lda,
                      const void *B, int ldb)
{
  if (tj__tensor_map_f16(ta, A, (uint64_t)M, (uint64_t)K, (uint64_t)lda,
                         (uint32_t)a_rows, 64) != TJ_OK ||
      tj__tensor_map_f16(tb, B, (uint64_t)K, (uint64_t)N, (uint64_t)ldb, 64,
                         64) != TJ_OK)
    return tj__fail(rt, TJ_EDEVICE, "%s: the driver refused a TMA descriptor "
                    "for A (%d x %d, lda %d) or B (%d x %d, ldb %d)", fn, M,
                    K, lda, K, N, ldb);
  return TJ_OK;
}

/* Whether a Hopper tile's epilogue stores C through TMA (plan p's
 * store, the rule's or a tuning configuration's, where the call allows
 * it: tj__gemm_tma_store_applies; on the H200 a box across the end of a
 * 2817-column row wrote C[r][2817], in ldc's padding, hence N a multiple
 * of 8) and the driver takes C as a tensor; map then holds a descriptor
 * over C in 64 x 64 boxes. */
static int tma_store_fits(const tj_runtime *rt, const tj__gemm_plan *p,
                          int M, int N, float beta, void *C, int ldc,
                          void *map)
{
  return tj__gemm_tma_store_applies(&rt->gemm_env, p->tma_store, N, beta, C,
                                    ldc) &&
         tj__tensor_map_f16(map, C, (uint64_t)M, (uint64_t)N, (uint64_t)ldc,
                            64, 64) == TJ_OK;
}

/* The kernel of plan p, allowed more than the 48 KiB of shared memory a
 * launch gets unasked: once per kernel (threads racing here both set it,
 * which is harmless), not at every call. */
static int shared_kernel(tj_runtime *rt, const char *fn, const tj__gemm_plan *p,
                         tj_kernel **k)
{
  int rc = kernel_for(rt, fn, p->entry, k);
  if (rc != TJ_OK)
    return rc;
  if (__atomic_load_n(&(*k)->shared_limit, __ATOMIC_ACQUIRE) >= p->shared)
    return TJ_OK;
  if (tj__function_shared_limit(tj_kernel_function(*k), p->shared) != TJ_OK)
    return tj__fail(rt, TJ_EDEVICE, "%s: %s cannot have %u bytes of shared "
                    "memory on this device", fn, p->entry, p->shared);
  __atomic_store_n(&(*k)->shared_limit, p->shared, __ATOMIC_RELEASE);
  return TJ_OK;
}

static int launch_failed(tj_runtime *rt, int rc, const char *fn,
                         const char *entry, tj_dim3 grid, tj_dim3 block)
{
  return tj__fail(rt, rc, "%s: launching %s (grid %u x %u x %u, block %u) "
                  "failed", fn, entry, grid.x, grid.y, grid.z, block.x);
}

/* Split-K: the partials into work, then the reduce kernel into C, both
 * queued on stream behind whatever the caller queued there. */
static int launch_split(tj_runtime *rt, const char *fn, const tj__gemm_plan *p,
                        void *stream, void *ta, void *tb, int M, int N, int K,
                        float alpha, float beta, void *C, int ldc, float *work)
{
  tj_kernel *k = NULL, *r = NULL;
  int rc = shared_kernel(rt, fn, p, &k);
  if (rc == TJ_OK)
    rc = kernel_for(rt, fn, "gemm_f16_sm90a_splitk_reduce", &r);
  if (rc != TJ_OK)
    return rc;
  int kper = p->kper, split = p->split, ldw = (int)p->grid.x * 128;
  void *args[] = {ta, tb, &M, &N, &K, &kper, &work};
  rc = tj_launch(k, p->grid, p->block, p->shared, stream, args);
  if (rc != TJ_OK)
    return launch_failed(rt, rc, fn, p->entry, p->grid, p->block);
  tj_dim3 grid = {(unsigned)((N - 1) / SM90A_REDUCE_THREADS + 1),
                  (unsigned)(M < GEMM_GRID_Y_CAP ? M : GEMM_GRID_Y_CAP), 1};
  tj_dim3 block = {SM90A_REDUCE_THREADS, 1, 1};
  void *rargs[] = {&work, &split, &M, &N, &ldw, &alpha, &beta, &C, &ldc};
  rc = tj_launch(r, grid, block, 0, stream, rargs);
  if (rc != TJ_OK)
    return launch_failed(rt, rc, fn, "gemm_f16_sm90a_splitk_reduce", grid,
                         block);
  return TJ_OK;
}

/* The launch of a Hopper tile or skinny plan p on tensor maps ta and tb
 * (work: stream-K's workspace). */
static int launch_tiles(tj_runtime *rt, const char *fn,
                        const tj__gemm_plan *p, void *stream, void *ta,
                        void *tb, int M, int N, int K, float alpha,
                        float beta, void *C, int ldc, void *work)
{
  tj_kernel *k = NULL;
  int rc = shared_kernel(rt, fn, p, &k);
  if (rc != TJ_OK)
    return rc;
  /* The tiles take a third map, over C, and whether to store through it;
   * the skinny kernel whether B goes through L2 marked evict-first
   * (unless TJ_GEMM_EVICT_FIRST=0): on the H200 (tj-bench, 2026-12-05,
   * bench/RESULTS.md) B read once and marked so ran the nine skinny
   * shapes at 1.08 to 1.20x cuBLAS where the unmarked reads ran 0.95 to
   * 1.03x, with L2 left full of dirty lines as a model's last layer
   * leaves it; with L2 cleaned first the two were within 4% either way. */
  _Alignas(64) unsigned char tc[TJ__TENSOR_MAP_BYTES] = {0};
  int store = p->path == GEMM_PATH_SM90A &&
              tma_store_fits(rt, p, M, N, beta, C, ldc, tc);
  int evict_first = rt->gemm_env.evict_first != 0;
  /* Stream-K's flags hold the launch's number when set: never one that an
   * earlier stream-K launch of this process left in reused memory (0 is
   * skipped; 2^32 of them would wrap).  Other launches take no number. */
  static unsigned launches;
  unsigned seq = 0;
  while (p->streamk && seq == 0)
    seq = __atomic_add_fetch(&launches, 1u, __ATOMIC_RELAXED);
  void *targs[] = {ta, tb, tc, &M, &N, &K, &alpha, &beta, &C, &ldc, &store,
                   &work, &seq};
  void *sargs[] = {ta, tb, &M, &N, &K, &alpha, &beta, &C, &ldc, &evict_first};
  /* The skinny kernel waits (griddepcontrol.wait) before it touches A,
   * B or C, so it is launched to start early (unless TJ_GEMM_PDL=0): in
   * eight layers in a row on an H100 that ran the nine skinny shapes 2.3
   * to 5.7% faster, and at 1.00 to 1.11x cuBLAS where the plain launch
   * ran 0.95 to 1.08x (bench/RESULTS.md, eleventh round).  A launch with
   * anything else between (an event, a copy) waits as a plain one does. */
  int early = p->path == GEMM_PATH_SM90A_SKINNY && rt->gemm_env.early != 0;
  rc = tj__launch_kernel(k, p->grid, p->block, p->shared, stream,
                         p->path == GEMM_PATH_SM90A ? targs : sargs, early);
  if (rc != TJ_OK)
    return launch_failed(rt, rc, fn, p->entry, p->grid, p->block);
  return TJ_OK;
}

/* A workspace (split-K's partials, stream-K's sums and flags) is the
 * call's own, allocated and freed in order on its stream, so calls on
 * other streams never share one.  Without stream-ordered allocation (or
 * memory for it) the call runs unsplit, or as persistent tiles. */
static int launch_sm90a(tj_runtime *rt, const char *fn, tj__gemm_plan p,
                        void *stream, int M, int N, int K, float alpha,
                        const void *A, int lda, const void *B, int ldb,
                        float beta, void *C, int ldc)
{
  if (rt->compile_only)
    return no_gpu(rt, fn);
  _Alignas(64) unsigned char ta[TJ__TENSOR_MAP_BYTES], tb[TJ__TENSOR_MAP_BYTES];
  /* A's box: the tile's 128 rows, or the skinny kernel's 16. */
  int a_rows = p.path == GEMM_PATH_SM90A_SKINNY ? SM90A_SKINNY_ROWS : SM90A_BM;
  int rc = sm90a_maps(rt, fn, ta, tb, a_rows, M, N, K, A, lda, B, ldb);
  if (rc != TJ_OK)
    return rc;
  if (p.split > 1 && p.path == GEMM_PATH_SM90A) {
    void *work = NULL;
    size_t bytes = (size_t)p.split * (size_t)M * p.grid.x * 128 * sizeof(float);
    if (tj__alloc_async(&rt->device, &work, bytes, stream) == TJ_OK) {
      rc = launch_split(rt, fn, &p, stream, ta, tb, M, N, K, alpha, beta, C,
                        ldc, work);
      if (tj__free_async(work, stream) != TJ_OK && rc == TJ_OK)
        rc = tj__fail(rt, TJ_EDEVICE, "%s: freeing the split-K workspace "
                      "failed", fn);
      return rc;
    }
    p = (tj__gemm_plan){"gemm_f16_sm90a_128x128", {p.grid.x, p.grid.y, 1},
                    p.block, p.shared, 1, 0, GEMM_PATH_SM90A, 0, 0,
                    p.tma_store};
  }
  void *work = NULL;
  if (p.streamk &&
      tj__alloc_async(&rt->device, &work,
                      SM90A_STREAMK_WORK(p.grid.x, p.tile_n),
                      stream) != TJ_OK) {
    /* Without the workspace, the persistent tiles of the same width. */
    work = NULL;
    p = tj__gemm_plan_unstreamed(p.tile_n, p.tma_store, rt->sms, M, N);
  }
  rc = launch_tiles(rt, fn, &p, stream, ta, tb, M, N, K, alpha, beta, C, ldc,
                    work);
  if (work && tj__free_async(work, stream) != TJ_OK && rc == TJ_OK)
    rc = tj__fail(rt, TJ_EDEVICE, "%s: freeing the stream-K workspace "
                  "failed", fn);
  return rc;
}

int tj__gemm_run_config(tj_runtime *rt, const char *fn,
                        const tj__gemm_config *cfg, void *stream, int M,
                        int N, int K, float alpha, const void *A, int lda,
                        const void *B, int ldb, float beta, void *C, int ldc)
{
  return launch_sm90a(rt, fn, tj__gemm_plan_config(cfg, rt->sms, M, N, K),
                      stream, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
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
    return no_gpu(rt, fn);
  tj_kernel *k = NULL, *r = NULL;
  int rc = shared_kernel(rt, fn, &p, &k);
  if (rc == TJ_OK && p.split > 1)
    rc = kernel_for(rt, fn, "gemm_skinny_f16_tc_reduce", &r);
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
  return tj__gemm_plan_call(rt, NULL, 0, M, N, K, A, lda, B, ldb, C, ldc).entry;
}

int tj_gemm_f16_split(tj_runtime *rt, int M, int N, int K, const uint16_t *A,
                      int lda, const uint16_t *B, int ldb, const uint16_t *C,
                      int ldc)
{
  if (!tj__runtime_usable(rt) ||
      check_gemm(rt, "tj_gemm_f16_split", M, N, K, A, lda, B, ldb, C, ldc) !=
          TJ_OK)
    return 0;
  return tj__gemm_plan_call(rt, NULL, 0, M, N, K, A, lda, B, ldb, C, ldc).split;
}

tj_dim3 tj__gemm_f16_grid(tj_runtime *rt, int M, int N, int K,
                          const uint16_t *A, int lda, const uint16_t *B,
                          int ldb, const uint16_t *C, int ldc)
{
  if (!tj__runtime_usable(rt) ||
      check_gemm(rt, "tj__gemm_f16_grid", M, N, K, A, lda, B, ldb, C, ldc) !=
          TJ_OK)
    return (tj_dim3){0, 0, 0};
  return tj__gemm_plan_call(rt, NULL, 0, M, N, K, A, lda, B, ldb, C, ldc).grid;
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
      tj__gemm_plan_call(rt, stream, 1, M, N, K, A, lda, B, ldb, C, ldc);
  if (p.path == GEMM_PATH_SKINNY_TC)
    return launch_skinny_tc(rt, fn, p, stream, M, N, K, alpha, A, lda, B,
                            ldb, beta, C, ldc);
  if (p.path == GEMM_PATH_SM90A || p.path == GEMM_PATH_SM90A_SKINNY)
    return launch_sm90a(rt, fn, p, stream, M, N, K, alpha, A, lda, B, ldb,
                        beta, C, ldc);
  void *args[] = {&M, &N, &K, &alpha, &A, &lda, &B, &ldb, &beta, &C, &ldc};
  return launch(rt, fn, p.entry, p.grid, p.block, stream, args);
}

/* ------------------------------------------------------- host calls */

/* One buffer of a host call: copied in from src (when not NULL) before
 * the launch, copied out to dst (when not NULL) after it. */
typedef struct host_buffer {
  const void *src;
  void *dst;
  size_t bytes;
} host_buffer;

/* Runs the device-pointer call on the device copies, in order. */
typedef int (*device_call)(tj_runtime *rt, const void *ctx, void *const *dev);

static int alloc_and_copy_in(tj_runtime *rt, const char *fn,
                             const host_buffer *b, int nb, void **dev)
{
  for (int i = 0; i < nb; i++) {
    hipError_t e = hipMalloc(&dev[i], b[i].bytes);
    if (e != hipSuccess) {
      dev[i] = NULL;
      return tj__fail(rt, TJ_ENOMEM, "%s: hipMalloc of %zu bytes failed: %s",
                      fn, b[i].bytes, hipGetErrorString(e));
    }
    if (b[i].src &&
        (e = hipMemcpyHtoD(dev[i], (void *)b[i].src, b[i].bytes)) != hipSuccess)
      return tj__fail(rt, TJ_EDEVICE, "%s: copying %zu bytes to the device "
                      "failed: %s", fn, b[i].bytes, hipGetErrorString(e));
  }
  return TJ_OK;
}

/* Every output lands in a staging buffer first, and reaches the caller
 * only when all of them arrived: a failure leaves the caller's memory as
 * it was. */
static int copy_out(tj_runtime *rt, const char *fn, const host_buffer *b,
                    int nb, void *const *dev)
{
  void *stage[MAX_HOST_BUFFERS] = {0};
  int rc = TJ_OK;
  for (int i = 0; i < nb && rc == TJ_OK; i++) {
    if (!b[i].dst)
      continue;
    if (!(stage[i] = malloc(b[i].bytes))) {
      rc = tj__fail(rt, TJ_ENOMEM, "%s: out of host memory for %zu bytes",
                    fn, b[i].bytes);
      break;
    }
    hipError_t e = hipMemcpyDtoH(stage[i], dev[i], b[i].bytes);
    if (e != hipSuccess)
      rc = tj__fail(rt, TJ_EDEVICE, "%s: copying %zu bytes from the device "
                    "failed: %s", fn, b[i].bytes, hipGetErrorString(e));
  }
  for (int i = 0; i < nb; i++) {
    if (rc == TJ_OK && b[i].dst)
      memcpy(b[i].dst, stage[i], b[i].bytes);
    free(stage[i]);
  }
  return rc;
}

/*
 * Allocate, copy in, run, wait, copy out; free on every path.  The kernel
 * is fetched (and compiled, the first time) before any device memory is
 * held.  The runtime's device is made current, since a host call is
 * complete in itself and may come from any thread.
 */
static int host_run(tj_runtime *rt, const char *fn, const char *kernel,
                    const host_buffer *b, int nb, device_call call,
                    const void *ctx)
{
  tj_kernel *k = NULL;
  int rc = kernel_for(rt, fn, kernel, &k);
  if (rc != TJ_OK)
    return rc;
  if (tj_runtime_bind(rt) != TJ_OK)
    return tj__fail(rt, TJ_EDEVICE, "%s: could not make device %d current",
                    fn, rt->device.ordinal);
  void *dev[MAX_HOST_BUFFERS] = {0};
  rc = alloc_and_copy_in(rt, fn, b, nb, dev);
  if (rc == TJ_OK)
    rc = call(rt, ctx, dev);
  if (rc == TJ_OK) {
    hipError_t e = hipStreamSynchronize(NULL);
    if (e != hipSuccess)
      rc = tj__fail(rt, TJ_EDEVICE, "%s: %s failed on the device: %s", fn,
                    kernel, hipGetErrorString(e));
  }
  if (rc == TJ_OK)
    rc = copy_out(rt, fn, b, nb, dev);
  for (int i = 0; i < nb; i++)
    hipFree(dev[i]);
  return rc;
}

typedef struct elementwise_job {
  int which;
  size_t n;
} elementwise_job;

static int call_elementwise(tj_runtime *rt, const void *ctx, void *const *d)
{
  const elementwise_job *j = ctx;
  return elementwise_call(rt, j->which, NULL, (const void *const *)d, j->n);
}

/* The host call: ptr as for elementwise_call, len[i] the length the
 * caller gave for input i. */
static int elementwise_host(tj_runtime *rt, int which, const void *const *ptr,
                            const size_t *len, size_t n)
{
  const elementwise_op *op = &elementwise_ops[which];
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  int rc = check_op(rt, op->host_fn, op, ptr, n);
  for (int i = 0; i < op->nin && rc == TJ_OK; i++)
    rc = check_length(rt, op->host_fn, op->names[i], len[i], n);
  if (rc != TJ_OK)
    return rc;
  host_buffer buf[MAX_HOST_BUFFERS];
  int na = op->nin + op->nout;
  for (int i = 0; i < na; i++)
    buf[i] = i < op->nin ? (host_buffer){ptr[i], NULL, n * op->elem}
                         : (host_buffer){NULL, (void *)ptr[i], n * op->elem};
  const elementwise_job job = {which, n};
  return host_run(rt, op->host_fn, op->kernel, buf, na, call_elementwise,
                  &job);
}

int tj_add_i32_host(tj_runtime *rt, const int32_t *a, size_t a_len,
                    const int32_t *b, size_t b_len, int32_t *c, size_t n)
{
  const void *ptr[] = {a, b, c};
  const size_t len[] = {a_len, b_len};
  return elementwise_host(rt, OP_ADD_I32, ptr, len, n);
}

int tj_gelu_fwd_f16_host(tj_runtime *rt, const uint16_t *x, size_t x_len,
                         uint16_t *y, size_t n)
{
  const void *ptr[] = {x, y};
  const size_t len[] = {x_len};
  return elementwise_host(rt, OP_GELU_FWD, ptr, len, n);
}

int tj_gelu_bwd_f16_host(tj_runtime *rt, const uint16_t *grad_out,
                         size_t grad_out_len, const uint16_t *x, size_t x_len,
                         uint16_t *grad_in, size_t n)
{
  const void *ptr[] = {grad_out, x, grad_in};
  const size_t len[] = {grad_out_len, x_len};
  return elementwise_host(rt, OP_GELU_BWD, ptr, len, n);
}

int tj_gelu_fwd_bwd_f16_host(tj_runtime *rt, const uint16_t *x, size_t x_len,
                             const uint16_t *grad_out, size_t grad_out_len,
                             uint16_t *y, uint16_t *grad_in, size_t n)
{
  const void *ptr[] = {x, grad_out, y, grad_in};
  const size_t len[] = {x_len, grad_out_len};
  return elementwise_host(rt, OP_GELU_FWD_BWD, ptr, len, n);
}

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
  const host_buffer buf[] = {
      {A, NULL, matrix_span(M, K, K)},
      {B, NULL, matrix_span(K, N, N)},
      {beta != 0.0f ? C : NULL, C, matrix_span(M, N, N)}};
  /* The device copies are hipMalloc's, aligned as NULL is (256 bytes). */
  const char *kernel =
      tj__gemm_plan_call(rt, NULL, 0, M, N, K, NULL, K, NULL, N, NULL, N).entry;
  return host_run(rt, fn, kernel, buf, 3, call_gemm, &shape);
}
