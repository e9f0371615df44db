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
 * tests/check_kernels.c pins against the embedded sources.
 */
#include "internal.h"

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

/* gemm_f16.hip: one block of 128 threads per 128 x 128 tile of C, with
 * N tiles along x and M tiles along y; gridDim.y is capped at 65535. */
#define GEMM_THREADS 128u
#define GEMM_TILE 128
#define GEMM_GRID_Y_CAP 65535
/* The kernel's tile loops index in int and run up to a tile (plus a
 * k-step) past each dimension, so dimensions stay clear of INT_MAX. */
#define GEMM_DIM_MAX (INT_MAX - 256)
/* gemm_skinny_f16.hip: for M <= 8, one block per 32-column strip of C,
 * entries built for 1, 2, 4 and 8 rows with 1024, 1024, 512 and 256
 * threads. */
#define SKINNY_MAX_M 8
#define SKINNY_COLS 32
/* gemm_skinny_f16.hip's tensor-core entries (NVIDIA sm_80 and later): for
 * M <= 16, 128 threads and 60 KiB of dynamic shared memory a block, one
 * block per strip of C (table skinny_tc below) and K-range; K is split
 * only while the strips are fewer than half the device's SMs (rt->sms), into
 * parts of SKINNY_TC_MIN_KROWS rows or more (8 pipeline stages), added by
 * ..._tc_reduce (256 threads) in a fixed order. */
#define SKINNY_TC_MAX_M 16
#define SKINNY_TC_THREADS 128u
#define SKINNY_TC_SHARED 61440u
#define SKINNY_TC_BK 64
#define SKINNY_TC_MIN_KROWS 512
#define SKINNY_TC_SPLIT_MAX 16
#define SKINNY_TC_REDUCE_THREADS 256u
/* gemm_f16_sm90a.hip (sm_90 devices): 384 threads per 128 x BN tile, BN
 * 64, 128 or 256, with the dynamic shared memory of the entry's stages
 * (SM90A_TILES; plan_sm90a says which). */
#define SM90A_THREADS 384u
#define SM90A_BM 128
#define SM90A_SHARED(bn, stages) \
  ((stages) * (SM90A_BM + (bn)) * 64 * 2 + 1024 + 16 * (stages))
/* gemm_f16_sm90a_128x64_cluster_k2: the 8 stages of 128 x 64, a barrier,
 * and the other block's fp32 sums of the tile. */
#define SM90A_SHARED_K2 (SM90A_SHARED(64, 8) + 16 + SM90A_BM * 64 * 4)
/* Split-K (gemm_f16_sm90a_128x128_splitk, then ..._splitk_reduce with
 * 256 threads a block): only while the 128 x 128 tiles leave SMs idle (of
 * rt->sms: the device's count, an H200's 132 without one), and
 * with SM90A_SPLIT_MIN_KTILES k-tiles of 64 or more per split, so that
 * each block runs its 5-stage pipeline a few times over and the fp32
 * partials stay small beside the work they save. */
#define SM90A_SPLIT_MIN_KTILES 16
#define SM90A_SPLIT_MAX 16
#define SM90A_FORCED_SPLIT_MAX 64
#define SM90A_REDUCE_THREADS 256u
/* gemm_f16_sm90a_skinny (M <= 16): 160 threads, 128 columns of C a
 * block, K split across a cluster of 1, 2, 3, 4 or 8 blocks (an entry
 * each); A's TMA box is its 16 rows. */
#define SM90A_SKINNY_ROWS 16
#define SM90A_SKINNY_THREADS 160u
#define SM90A_SKINNY_BN 128
#define SM90A_SKINNY_SHARED 101456u
#define SM90A_SKINNY256_SHARED 191568u
/* plan_sm90a: an unforced split stands only for M <= SM90A_SPLIT_ROWS,
 * where each part keeps SM90A_SPLIT_KEEP_KTILES k-tiles, or where 128 x 64
 * tiles would fill less than a quarter of the SMs. */
#define SM90A_SPLIT_ROWS 64
#define SM90A_SPLIT_KEEP_KTILES 32

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

/* A few rows of A make the product a stream over B, which the tiled
 * kernel (one 128-row tile for M = 1) cannot keep up with: the skinny
 * kernel built for the smallest row count >= M takes it.  From 9 rows on,
 * its fp32 FMAs cost more than the tiled kernel's wasted tile rows (see
 * the kernel's header). */
static const char *skinny_entry(int M, unsigned *threads)
{
  *threads = M <= 2 ? 1024u : M <= 4 ? 512u : 256u;
  return M <= 1 ? "gemm_skinny_f16_m1" : M <= 2 ? "gemm_skinny_f16_m2"
       : M <= 4 ? "gemm_skinny_f16_m4" : "gemm_skinny_f16_m8";
}

/* Which entry a GEMM runs, and its launch shape; split > 1 for split-K,
 * with kper k-tiles per split (grid.z = split) on the sm90a path and kper
 * rows of K per split (grid.y = split) on the skinny tensor-core path. */
typedef enum gemm_path {
  PATH_PLAIN,
  PATH_SM90A,
  PATH_SKINNY_TC,
  PATH_SM90A_SKINNY /* split: the cluster's blocks, no workspace */
} gemm_path;
typedef struct gemm_plan {
  const char *entry;
  tj_dim3 grid, block;
  unsigned shared; /* dynamic: the sm90a and skinny tensor-core entries */
  int split, kper;
  gemm_path path;
  int tile_n; /* columns of C a block owns (the skinny tensor-core path) */
} gemm_plan;

/*
 * The skinny tensor-core entries, tried in order: the first whose strips
 * of tile_n columns number at least the SMs (where fill says so) takes
 * the call.  64-column strips read A half as often per byte of B, but
 * only once they alone fill the SMs (N > 8384 on an H200's 132, N > 7232
 * on an H100 PCIe's 114); else 32-column strips, with
 * split-K where even those are too few.  Each row is one compiled code
 * object, so the tuning table can pick among them by name.
 */
typedef struct skinny_tc_config {
  const char *entry;
  int tile_n;
  int fill; /* 1: only where its strips number rt->sms or more */
} skinny_tc_config;

static const skinny_tc_config skinny_tc[] = {
    {"gemm_skinny_f16_tc_n64", 64, 1},
    {"gemm_skinny_f16_tc_n32", 32, 0},
};

/* Whether c's strips of N columns are enough for it on rt's SMs. */
static int skinny_tc_takes(const skinny_tc_config *c, const tj_runtime *rt,
                           int N)
{
  return !c->fill || (long long)((N - 1) / c->tile_n + 1) >= rt->sms;
}

static int sm90a_fits(const tj_runtime *rt, int M, const void *A, int lda,
                      const void *B, int ldb);

/*
 * The tensor-core skinny kernel wants an NVIDIA runtime for sm_80 or
 * later (mma.sync, cp.async, ldmatrix) and M <= 16; any alignment and
 * leading dimensions.  Where it runs, measured on the H200
 * (bench/RESULTS.md, 2026-12-02, third round): 64-column strips that fill
 * the SMs beat every other path from 1 to 16 rows; 32-column strips beat
 * the FMA kernels only from 2 to 8 rows, and lose to the 1-row FMA kernel
 * and, from 9 rows, to the Hopper kernel's split-K, which take those.
 * TJ_GEMM_SKINNY_TC (read at open) =0 turns it off (the FMA kernel for
 * M <= 8, the tiled kernels above), =1 takes it wherever it can run.
 */
static int skinny_tc_fits(const tj_runtime *rt, int M, int N, const void *A,
                          int lda, const void *B, int ldb)
{
  if (rt->gemm_env.skinny_tc == 0)
    return 0;
  if (M > SKINNY_TC_MAX_M || strncmp(rt->arch, "sm_", 3) != 0 ||
      strtol(rt->arch + 3, NULL, 10) < 80)
    return 0;
  if (rt->gemm_env.skinny_tc == 1 || skinny_tc_takes(&skinny_tc[0], rt, N))
    return 1;
  if (M == 1)
    return 0;
  return M <= SKINNY_MAX_M || !sm90a_fits(rt, M, A, lda, B, ldb);
}

int tj__gemm_skinny_split(long long tiles, int K, int sms)
{
  if (tiles <= 0 || 2 * tiles >= sms)
    return 1;
  long long split = (sms + tiles - 1) / tiles;
  if (split > K / SKINNY_TC_MIN_KROWS)
    split = K / SKINNY_TC_MIN_KROWS;
  if (split > SKINNY_TC_SPLIT_MAX)
    split = SKINNY_TC_SPLIT_MAX;
  return split < 2 ? 1 : (int)split;
}

/* kper: rows of K a block takes, whole 64-row stages, so that no K-range
 * is empty; split then follows from it (a forced split past what K
 * allows becomes the most it allows). */
static gemm_plan plan_skinny_tc(const tj_runtime *rt, int N, int K)
{
  const skinny_tc_config *c = &skinny_tc[0];
  while (!skinny_tc_takes(c, rt, N))
    c++;
  unsigned tiles = (unsigned)((N - 1) / c->tile_n + 1);
  int split = rt->gemm_env.forced_split;
  if (split == 0)
    split = tj__gemm_skinny_split(tiles, K, rt->sms);
  int kper = K, ktiles = (K - 1) / SKINNY_TC_BK + 1;
  if (split > 1) {
    kper = ((ktiles - 1) / split + 1) * SKINNY_TC_BK;
    split = (K - 1) / kper + 1;
    if (split == 1)
      kper = K;
  }
  return (gemm_plan){c->entry, {tiles, (unsigned)split, 1},
                     {SKINNY_TC_THREADS, 1, 1}, SKINNY_TC_SHARED, split,
                     kper, PATH_SKINNY_TC, c->tile_n};
}

/*
 * The Hopper kernel (gemm_f16_sm90a.hip) wants an sm_90 runtime, enough
 * rows to fill its 128-row tiles more than the skinny kernel would, and
 * A and B as TMA reads them: 16-byte aligned, rows a multiple of 16 bytes
 * apart; and, with a device, a driver that builds tensor maps.
 * TJ_GEMM_SM90A=0 in the environment at tj_runtime_open turns it off (to
 * compare, or to step around it).
 */
static int sm90a_operands(const tj_runtime *rt, const void *A, int lda,
                          const void *B, int ldb)
{
  if (rt->gemm_env.sm90a_off)
    return 0;
  if (strcmp(rt->arch, "sm_90") != 0 && strcmp(rt->arch, "sm_90a") != 0)
    return 0;
  if (!rt->compile_only && !tj__hopper_driver())
    return 0;
  return (uintptr_t)A % 16 == 0 && (uintptr_t)B % 16 == 0 && lda % 8 == 0 &&
         ldb % 8 == 0;
}

static int sm90a_fits(const tj_runtime *rt, int M, const void *A, int lda,
                      const void *B, int ldb)
{
  return M > SKINNY_MAX_M && sm90a_operands(rt, A, lda, B, ldb);
}

/*
 * The Hopper skinny kernel (gemm_f16_sm90a_skinny*) for M <= 16, on the
 * same terms as the Hopper kernel; TJ_GEMM_SKINNY_SM90A=0 turns it off
 * (the skinny kernels of gemm_skinny_f16.hip and the split-K tiles take
 * those calls, as before it), TJ_GEMM_SM90A=0 too.
 */
static int sm90a_skinny_fits(const tj_runtime *rt, int M, const void *A,
                             int lda, const void *B, int ldb)
{
  return M <= SM90A_SKINNY_ROWS && rt->gemm_env.skinny_sm90a != 0 &&
         sm90a_operands(rt, A, lda, B, ldb);
}

/* The strip widths and cluster sizes gemm_f16_sm90a_skinny is compiled
 * for, each one's entry and shared memory; by width, then split. */
typedef struct sm90a_skinny_config {
  int bn, split;
  const char *entry;
  unsigned shared;
} sm90a_skinny_config;
static const sm90a_skinny_config sm90a_skinny[] = {
    {128, 1, "gemm_f16_sm90a_skinny", SM90A_SKINNY_SHARED},
    {128, 2, "gemm_f16_sm90a_skinny_k2", SM90A_SKINNY_SHARED},
    {128, 3, "gemm_f16_sm90a_skinny_k3", SM90A_SKINNY_SHARED},
    {128, 4, "gemm_f16_sm90a_skinny_k4", SM90A_SKINNY_SHARED},
    {128, 8, "gemm_f16_sm90a_skinny_k8", SM90A_SKINNY_SHARED},
    {256, 1, "gemm_f16_sm90a_skinny256", SM90A_SKINNY256_SHARED},
    {256, 2, "gemm_f16_sm90a_skinny256_k2", SM90A_SKINNY256_SHARED},
    {256, 3, "gemm_f16_sm90a_skinny256_k3", SM90A_SKINNY256_SHARED},
    {256, 4, "gemm_f16_sm90a_skinny256_k4", SM90A_SKINNY256_SHARED}};
#define N_SM90A_SKINNY (sizeof sm90a_skinny / sizeof sm90a_skinny[0])
/* Each block of a split keeps this many k-tiles of 64 or more. */
#define SM90A_SKINNY_MIN_KTILES 4
/* The bytes a block keeps in flight (its 5 stages of B and A), and what
 * covers the memory's latency at its rate, for each SM: 56 KiB, 7.6 MB on
 * an H200's 132 (4.8 TB/s for about 1.5 us). */
#define SM90A_SKINNY_STAGES 5
#define SM90A_SKINNY_INFLIGHT(bn) \
  ((long long)SM90A_SKINNY_STAGES * ((bn) * 64 * 2 + SM90A_SKINNY_ROWS * 64 * 2))
#define SM90A_SKINNY_COVER_PER_SM (56LL << 10)

/*
 * The strip width and split for N columns, ktiles k-tiles of 64 and sms
 * SMs: of the plans with at most one block an SM, the fewest K-ranges
 * whose blocks keep enough bytes in flight to cover the memory's latency,
 * the wider strips first; where none does, the plan with the most in
 * flight; where even one block a strip is more than the SMs, 128-column
 * strips unsplit (two blocks share an SM).  Measured on the H200
 * (bench/RESULTS.md, seventh round), clean L2, fraction of the copy rate:
 * 1 x 11008 x 4096 0.845 unsplit in 128 columns (86 blocks) against
 * 0.805 in 256 (43: too few bytes in flight) and 0.72 to 0.81 split 2 to
 * 8; 1 x 4096 x 11008 0.845 split 3 in 256 columns (48 blocks) against
 * 0.50 to 0.75 split 1 or 2 (too few in flight) and 0.72 split 8 (256
 * blocks, two an SM).  More K-ranges at once read B in more places:
 * fewer is better once the bytes in flight suffice.
 */
int tj__gemm_sm90a_skinny_split(int N, int ktiles, int sms, int *bn)
{
  static const int widths[] = {256, 128};
  const sm90a_skinny_config *most = NULL;
  long long most_bytes = -1, cover = SM90A_SKINNY_COVER_PER_SM * sms;
  for (size_t i = 0; i < N_SM90A_SKINNY; i++) {
    int split = sm90a_skinny[i].split;
    if (sm90a_skinny[i].bn != 128 ||
        (split > 1 && split * SM90A_SKINNY_MIN_KTILES > ktiles))
      continue; /* each split once, from the 128-column list */
    for (size_t w = 0; w < 2; w++) {
      const sm90a_skinny_config *c = NULL;
      for (size_t j = 0; j < N_SM90A_SKINNY; j++)
        if (sm90a_skinny[j].bn == widths[w] && sm90a_skinny[j].split == split)
          c = &sm90a_skinny[j];
      if (!c)
        continue;
      long long blocks = (long long)((N - 1) / c->bn + 1) * split;
      if (blocks > sms)
        continue;
      long long bytes = blocks * SM90A_SKINNY_INFLIGHT(c->bn);
      if (bytes >= cover) {
        *bn = c->bn;
        return split;
      }
      if (bytes > most_bytes) {
        most = c;
        most_bytes = bytes;
      }
    }
  }
  *bn = most ? most->bn : SM90A_SKINNY_BN;
  return most ? most->split : 1;
}

/* TJ_GEMM_SPLITK=n (forced) takes the largest compiled split up to n,
 * TJ_GEMM_SM90A_TILE=128 or 256 that strip width. */
static gemm_plan plan_sm90a_skinny(const tj_runtime *rt, int N, int K)
{
  int bn, split = tj__gemm_sm90a_skinny_split(N, (K - 1) / 64 + 1, rt->sms,
                                              &bn);
  if (rt->gemm_env.tile == 128 || rt->gemm_env.tile == 256)
    bn = rt->gemm_env.tile;
  if (rt->gemm_env.forced_split)
    split = rt->gemm_env.forced_split;
  const sm90a_skinny_config *c = NULL;
  for (size_t i = 0; i < N_SM90A_SKINNY; i++)
    if (sm90a_skinny[i].bn == bn && sm90a_skinny[i].split <= split)
      c = &sm90a_skinny[i];
  long long strips = (N - 1) / c->bn + 1;
  return (gemm_plan){c->entry, {(unsigned)(strips * c->split), 1, 1},
                     {SM90A_SKINNY_THREADS, 1, 1}, c->shared, c->split, 0,
                     PATH_SM90A_SKINNY, c->bn};
}

int tj__gemm_sm90a_split(long long tiles, int ktiles, int sms)
{
  if (tiles <= 0 || tiles >= sms)
    return 1;
  long long split = sms / tiles;
  if (split > ktiles / SM90A_SPLIT_MIN_KTILES)
    split = ktiles / SM90A_SPLIT_MIN_KTILES;
  if (split > SM90A_SPLIT_MAX)
    split = SM90A_SPLIT_MAX;
  return split < 2 ? 1 : (int)split;
}

/* The unsplit Hopper tiles: 128 rows by bn columns, with the stages that
 * fit. */
static unsigned sm90a_shared_of(int bn)
{
  return bn == 64 ? SM90A_SHARED(64, 8) : bn == 256 ? SM90A_SHARED(256, 4)
                                                     : SM90A_SHARED(128, 5);
}

/* A split-K plan of split parts (grid x narrow tiles, y mt tiles). */
static gemm_plan plan_split(unsigned narrow, unsigned mt, int ktiles,
                            int split)
{
  /* Every z gets kper k-tiles but the last; a forced split past the
   * k-tiles keeps its empty ranges, which write zeros. */
  int kper = (ktiles - 1) / split + 1;
  if (split <= ktiles)
    split = (ktiles - 1) / kper + 1;
  return (gemm_plan){"gemm_f16_sm90a_128x128_splitk",
                     {narrow, mt, (unsigned)split}, {SM90A_THREADS, 1, 1},
                     SM90A_SHARED(128, 5), split, kper, PATH_SM90A, 0};
}

/* The 128 x 64 tile with K split across a cluster of two blocks. */
static gemm_plan plan_cluster_k2(int M, int N)
{
  unsigned mt = (unsigned)((M - 1) / SM90A_BM + 1);
  unsigned tn = (unsigned)((N - 1) / 64 + 1);
  return (gemm_plan){"gemm_f16_sm90a_128x64_cluster_k2", {2 * tn, mt, 1},
                     {SM90A_THREADS, 1, 1}, SM90A_SHARED_K2, 1, 0, PATH_SM90A,
                     0};
}

/* The 128 x 256 tile, persistent in clusters of two that share B: one
 * cluster per pair of tile rows (of one tile column), at most one block
 * an SM, an even grid. */
static gemm_plan plan_mc2(int sms, int M, int N)
{
  unsigned long long pairs = (unsigned long long)((M - 1) / SM90A_BM / 2 + 1) *
                             (unsigned long long)((N - 1) / 256 + 1);
  unsigned clusters = sms / 2 < 1 ? 1 : (unsigned)sms / 2;
  if (pairs < clusters)
    clusters = (unsigned)pairs;
  return (gemm_plan){"gemm_f16_sm90a_128x256_mc2", {2 * clusters, 1, 1},
                     {SM90A_THREADS, 1, 1}, sm90a_shared_of(256), 1, 0,
                     PATH_SM90A, 0};
}

/* An unsplit plan of entry with bn-column tiles; persistent: one block
 * per SM (at most, of sms) walking the tiles. */
static gemm_plan plan_tile(const char *entry, int bn, int persistent, int sms,
                           int M, int N)
{
  unsigned mt = (unsigned)((M - 1) / SM90A_BM + 1);
  unsigned tn = (unsigned)((N - 1) / bn + 1);
  if (persistent) {
    unsigned long long tiles = (unsigned long long)tn * mt;
    unsigned grid = tiles < (unsigned)sms ? (unsigned)tiles : (unsigned)sms;
    return (gemm_plan){entry, {grid, 1, 1}, {SM90A_THREADS, 1, 1},
                       sm90a_shared_of(bn), 1, 0, PATH_SM90A, 0};
  }
  return (gemm_plan){entry, {tn, mt, 1}, {SM90A_THREADS, 1, 1},
                     sm90a_shared_of(bn), 1, 0, PATH_SM90A, 0};
}

/* The plan of one configuration of the tuning table, on sms SMs. */
static gemm_plan plan_config(const tj__gemm_config *c, int sms, int M, int N,
                             int K)
{
  if (c->cluster_k2)
    return plan_cluster_k2(M, N);
  if (c->mc2)
    return plan_mc2(sms, M, N);
  if (c->split > 1)
    return plan_split((unsigned)((N - 1) / 128 + 1),
                      (unsigned)((M - 1) / SM90A_BM + 1), (K - 1) / 64 + 1,
                      c->split);
  return plan_tile(c->entry, c->bn, c->persistent, sms, M, N);
}

/*
 * The rule, from the H200 (tj-bench, 2026-12-02, bench/RESULTS.md), where
 * the tuning table has no decision:
 *   - a grid of 128 x 128 tiles that fills the SMs (2048^3 and up) runs
 *     128 x 256 tiles, persistent: 2048^3 0.82x cuBLAS against 0.78x for
 *     one block per 128 x 128 tile, 4096^3 0.90 against 0.89;
 *   - fewer tiles than SMs: split K where the rows are few (M <= 64), or
 *     each part keeps 32 k-tiles (128 x 4096 x 11008: 0.91x), or even
 *     128 x 64 tiles would leave 3/4 of the SMs idle; else the
 *     128 x 64 tile where its tiles still fit in one wave (1024^3: 0.90x
 *     against 0.72x with 128 x 128; 128 x 4096 x 4096: 0.83x against 0.75x
 *     split 4); else 128 x 128 (128 x 11008 x 4096: 0.91x, 0.81x with 64);
 *   - first, more than 64 rows in 128 x 64 tiles that fill between a
 *     quarter and a half of the SMs, with 32 k-tiles or more: K split
 *     across a cluster of two
 *     blocks (the partial sums go through shared memory, no workspace, no
 *     second launch): 128 x 4096 x 4096 0.94x against 0.82x unsplit,
 *     128 x 4096 x 11008 0.98x against 0.92x split 4 (bench/RESULTS.md).
 * For measuring and for stepping around it, read at open (rt->gemm_env):
 * TJ_GEMM_SPLITK=n forces a split, TJ_GEMM_SM90A_TILE=64, 128 or 256 the
 * tile width of unsplit calls (64k2: the cluster-split 128 x 64), TJ_GEMM_PERSISTENT=1 (0) the tile's
 * persistent entry (never), TJ_GEMM_MULTICAST=1 (0) the persistent
 * 128 x 256 tile in multicast pairs (never).  env NULL: the rule alone.  sms: the device's
 * (rt->sms); the figures above are the H200's 132, and a GPU with fewer
 * SMs reaches each threshold with fewer tiles.
 */
static gemm_plan plan_sm90a(const tj__gemm_env *env, int sms, int M, int N,
                            int K)
{
  static const tj__gemm_env none = {.persistent = -1, .skinny_tc = -1,
                                    .tile_k2 = -1, .multicast = -1};
  if (!env)
    env = &none;
  unsigned mt = (unsigned)((M - 1) / SM90A_BM + 1);
  unsigned narrow = (unsigned)((N - 1) / 128 + 1);
  unsigned slim = (unsigned)((N - 1) / 64 + 1);
  unsigned long long tiles128 = (unsigned long long)narrow * mt;
  int ktiles = (K - 1) / 64 + 1;
  int forced = env->forced_split;
  /* More than 64 rows in 128 x 64 tiles that fill a quarter to a half of
   * the SMs, K long enough for two halves: each tile's K split across a cluster of
   * two blocks, ahead of split-K (128 x 4096 x 11008: 0.98x against 0.92x
   * split 4). */
  if (forced <= 1 &&
      (env->tile_k2 == 1 ||
       (env->tile_k2 < 0 && !env->tile && M > SM90A_SPLIT_ROWS &&
        (unsigned long long)slim * mt * 2 <= (unsigned long long)sms &&
        (unsigned long long)slim * mt * 4 >= (unsigned long long)sms &&
        ktiles >= 2 * SM90A_SPLIT_MIN_KTILES)))
    return plan_cluster_k2(M, N);
  int split = forced ? forced : tj__gemm_sm90a_split((long long)tiles128,
                                                     ktiles, sms);
  if (!forced && split > 1 && M > SM90A_SPLIT_ROWS &&
      ktiles / split < SM90A_SPLIT_KEEP_KTILES &&
      (unsigned long long)slim * mt * 4 >= (unsigned long long)sms)
    split = 1;
  if (split > 1)
    return plan_split(narrow, mt, ktiles, split);
  int bn = env->tile, persistent = 0;
  if (!bn && tiles128 >= (unsigned long long)sms) {
    bn = 256;
    persistent = 1;
  } else if (!bn) {
    bn = M > SM90A_SPLIT_ROWS && (unsigned long long)slim * mt <=
                                     (unsigned long long)sms
             ? 64 : 128;
  }
  if (env->persistent >= 0)
    persistent = env->persistent;
  /* In multicast pairs where the rule chose the persistent 128 x 256
   * tiles and they make more than one wave, or TJ_GEMM_MULTICAST=1 asks.
   * Measured on the H200 in three calls (bench/RESULTS.md, sixth and
   * seventh rounds), more than one wave of these tiles ran faster paired
   * (8192^3 0.966-0.971x cuBLAS against 0.941-0.961; 4096 x 4096 x 11008
   * 0.954-0.968 against 0.943-0.956; 4096 x 11008 x 4096 0.943-0.950
   * against 0.932-0.940; 4096^3 0.894-0.904 against 0.895-0.899) and one
   * wave slower (2048^3, 128 tiles: 0.793-0.801 against 0.818-0.829). */
  unsigned long long tiles256 = (unsigned long long)mt * ((N - 1) / 256 + 1);
  if (bn == 256 && persistent &&
      (env->multicast == 1 ||
       (env->multicast < 0 && !env->tile && tiles256 > (unsigned)sms)))
    return plan_mc2(sms, M, N);
  const char *entry = bn == 64    ? "gemm_f16_sm90a_128x64"
                      : bn == 128 ? (persistent
                                         ? "gemm_f16_sm90a_128x128_persistent"
                                         : "gemm_f16_sm90a_128x128")
                                  : (persistent
                                         ? "gemm_f16_sm90a_128x256_persistent"
                                         : "gemm_f16_sm90a_128x256");
  return plan_tile(entry, bn, persistent && bn != 64, sms, M, N);
}

int tj__gemm_tunable(const tj_runtime *rt, int M)
{
  return sm90a_fits(rt, M, NULL, 8, NULL, 8);
}

const tj__gemm_config *tj__gemm_heuristic(int sms, int M, int N, int K)
{
  gemm_plan p = plan_sm90a(NULL, sms, M, N, K);
  size_t n;
  const tj__gemm_config *c = tj__gemm_configs(&n);
  for (size_t i = 0; i < n; i++)
    if (strcmp(c[i].entry, p.entry) == 0 && c[i].split == p.split)
      return &c[i];
  return NULL;
}

/*
 * What a call runs.  On the Hopper path the tuning decision for the
 * call's shape class takes the heuristic's place (gemm_tune.c; may_tune:
 * tj_gemm_f16 may time candidates the first time, the queries never do);
 * a forced split (TJ_GEMM_SPLITK) overrides both.
 */
static gemm_plan plan_gemm(tj_runtime *rt, void *stream, int may_tune, int M,
                           int N, int K, const void *A, int lda,
                           const void *B, int ldb, const void *C, int ldc)
{
  unsigned mt = (unsigned)((M - 1) / GEMM_TILE + 1);
  if (sm90a_skinny_fits(rt, M, A, lda, B, ldb))
    return plan_sm90a_skinny(rt, N, K);
  if (skinny_tc_fits(rt, M, N, A, lda, B, ldb))
    return plan_skinny_tc(rt, N, K);
  if (M <= SKINNY_MAX_M) {
    unsigned threads;
    const char *entry = skinny_entry(M, &threads);
    return (gemm_plan){entry, {(unsigned)((N - 1) / SKINNY_COLS + 1), 1, 1},
                       {threads, 1, 1}, 0, 1, 0, PATH_PLAIN, 0};
  }
  if (sm90a_fits(rt, M, A, lda, B, ldb)) {
    const tj__gemm_config *c =
        rt->gemm_env.forced_split ? NULL
        : tj__gemm_decision(rt, stream, may_tune, M, N, K, A, lda, B, ldb, C,
                            ldc);
    return c ? plan_config(c, rt->sms, M, N, K)
             : plan_sm90a(&rt->gemm_env, rt->sms, M, N, K);
  }
  return (gemm_plan){"gemm_f16", {(unsigned)((N - 1) / GEMM_TILE + 1), mt, 1},
                     {GEMM_THREADS, 1, 1}, 0, 1, 0, PATH_PLAIN, 0};
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

/* The kernel of plan p, allowed more than the 48 KiB of shared memory a
 * launch gets unasked: once per kernel (threads racing here both set it,
 * which is harmless), not at every call. */
static int shared_kernel(tj_runtime *rt, const char *fn, const gemm_plan *p,
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
static int launch_split(tj_runtime *rt, const char *fn, const gemm_plan *p,
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

/* The workspace is the call's own, allocated and freed in order on its
 * stream, so calls on other streams never share one.  Without
 * stream-ordered allocation (or memory for it) the call runs unsplit. */
static int launch_sm90a(tj_runtime *rt, const char *fn, gemm_plan p,
                        void *stream, int M, int N, int K, float alpha,
                        const void *A, int lda, const void *B, int ldb,
                        float beta, void *C, int ldc)
{
  if (rt->compile_only)
    return no_gpu(rt, fn);
  _Alignas(64) unsigned char ta[TJ__TENSOR_MAP_BYTES], tb[TJ__TENSOR_MAP_BYTES];
  /* A's box: the tile's 128 rows, or the skinny kernel's 16. */
  int a_rows = p.path == PATH_SM90A_SKINNY ? SM90A_SKINNY_ROWS : SM90A_BM;
  int rc = sm90a_maps(rt, fn, ta, tb, a_rows, M, N, K, A, lda, B, ldb);
  if (rc != TJ_OK)
    return rc;
  if (p.split > 1 && p.path == PATH_SM90A) {
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
    p = (gemm_plan){"gemm_f16_sm90a_128x128", {p.grid.x, p.grid.y, 1},
                    p.block, p.shared, 1, 0, PATH_SM90A, 0};
  }
  tj_kernel *k = NULL;
  rc = shared_kernel(rt, fn, &p, &k);
  if (rc != TJ_OK)
    return rc;
  void *args[] = {ta, tb, &M, &N, &K, &alpha, &beta, &C, &ldc};
  rc = tj_launch(k, p.grid, p.block, p.shared, stream, args);
  if (rc != TJ_OK)
    return launch_failed(rt, rc, fn, p.entry, p.grid, p.block);
  return TJ_OK;
}

int tj__gemm_run_config(tj_runtime *rt, const char *fn,
                        const tj__gemm_config *cfg, void *stream, int M,
                        int N, int K, float alpha, const void *A, int lda,
                        const void *B, int ldb, float beta, void *C, int ldc)
{
  return launch_sm90a(rt, fn, plan_config(cfg, rt->sms, M, N, K), stream, M,
                      N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* The skinny tensor-core path: the partials (split > 1) into a
 * workspace of the call's own from the runtime's pool, ordered on stream,
 * then the reduce into C; without the workspace, unsplit. */
static int launch_skinny_tc(tj_runtime *rt, const char *fn, gemm_plan p,
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
  if (p.split > 1 &&
      tj__alloc_async(&rt->device, (void **)&work, (size_t)p.split *
                      (size_t)M * (size_t)ldw * sizeof(float), stream) != TJ_OK) {
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
  return plan_gemm(rt, NULL, 0, M, N, K, A, lda, B, ldb, C, ldc).entry;
}

int tj_gemm_f16_split(tj_runtime *rt, int M, int N, int K, const uint16_t *A,
                      int lda, const uint16_t *B, int ldb, const uint16_t *C,
                      int ldc)
{
  if (!tj__runtime_usable(rt) ||
      check_gemm(rt, "tj_gemm_f16_split", M, N, K, A, lda, B, ldb, C, ldc) !=
          TJ_OK)
    return 0;
  return plan_gemm(rt, NULL, 0, M, N, K, A, lda, B, ldb, C, ldc).split;
}

tj_dim3 tj__gemm_f16_grid(tj_runtime *rt, int M, int N, int K,
                          const uint16_t *A, int lda, const uint16_t *B,
                          int ldb, const uint16_t *C, int ldc)
{
  if (!tj__runtime_usable(rt) ||
      check_gemm(rt, "tj__gemm_f16_grid", M, N, K, A, lda, B, ldb, C, ldc) !=
          TJ_OK)
    return (tj_dim3){0, 0, 0};
  return plan_gemm(rt, NULL, 0, M, N, K, A, lda, B, ldb, C, ldc).grid;
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
  gemm_plan p = plan_gemm(rt, stream, 1, M, N, K, A, lda, B, ldb, C, ldc);
  if (p.path == PATH_SKINNY_TC)
    return launch_skinny_tc(rt, fn, p, stream, M, N, K, alpha, A, lda, B,
                            ldb, beta, C, ldc);
  if (p.path == PATH_SM90A || p.path == PATH_SM90A_SKINNY)
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
  const char *kernel = plan_gemm(rt, NULL, 0, M, N, K, NULL, K, NULL, N, NULL,
                                 N).entry;
  return host_run(rt, fn, kernel, buf, 3, call_gemm, &shape);
}
