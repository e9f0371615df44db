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

static int launch(tj_runtime *rt, const char *fn, const char *kernel,
                  tj_dim3 grid, tj_dim3 block, void *stream, void **args)
{
  if (rt->compile_only)
    return no_gpu(rt, fn);
  tj_kernel *k = NULL;
  int rc = tj_kernel_get(rt, kernel, &k);
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

int tj_add_i32(tj_runtime *rt, void *stream, const int32_t *a,
               const int32_t *b, int32_t *c, size_t n)
{
  static const char fn[] = "tj_add_i32";
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  const array_arg arr[] = {{"a", a, 0}, {"b", b, 0}, {"c", c, 1}};
  int rc = check_elementwise(rt, fn, arr, 3, n, sizeof *a);
  if (rc != TJ_OK)
    return rc;
  unsigned long long nn = n;
  void *args[] = {&a, &b, &c, &nn};
  return launch_elementwise(rt, fn, "add_i32", n, ADD_I32_PER_BLOCK, stream,
                            args);
}

int tj_gelu_fwd_f16(tj_runtime *rt, void *stream, const uint16_t *x,
                    uint16_t *y, size_t n)
{
  static const char fn[] = "tj_gelu_fwd_f16";
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  const array_arg arr[] = {{"x", x, 0}, {"y", y, 1}};
  int rc = check_elementwise(rt, fn, arr, 2, n, sizeof *x);
  if (rc != TJ_OK)
    return rc;
  unsigned long long nn = n;
  void *args[] = {&x, &y, &nn};
  return launch_elementwise(rt, fn, "gelu_fwd_f16", n, GELU_PER_BLOCK, stream,
                            args);
}

int tj_gelu_bwd_f16(tj_runtime *rt, void *stream, const uint16_t *grad_out,
                    const uint16_t *x, uint16_t *grad_in, size_t n)
{
  static const char fn[] = "tj_gelu_bwd_f16";
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  const array_arg arr[] = {
      {"grad_out", grad_out, 0}, {"x", x, 0}, {"grad_in", grad_in, 1}};
  int rc = check_elementwise(rt, fn, arr, 3, n, sizeof *x);
  if (rc != TJ_OK)
    return rc;
  unsigned long long nn = n;
  void *args[] = {&grad_out, &x, &grad_in, &nn};
  return launch_elementwise(rt, fn, "gelu_bwd_f16", n, GELU_PER_BLOCK, stream,
                            args);
}

int tj_gelu_fwd_bwd_f16(tj_runtime *rt, void *stream, const uint16_t *x,
                        const uint16_t *grad_out, uint16_t *y,
                        uint16_t *grad_in, size_t n)
{
  static const char fn[] = "tj_gelu_fwd_bwd_f16";
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  const array_arg arr[] = {{"x", x, 0}, {"grad_out", grad_out, 0},
                           {"y", y, 1}, {"grad_in", grad_in, 1}};
  int rc = check_elementwise(rt, fn, arr, 4, n, sizeof *x);
  if (rc != TJ_OK)
    return rc;
  unsigned long long nn = n;
  void *args[] = {&x, &grad_out, &y, &grad_in, &nn};
  return launch_elementwise(rt, fn, "gelu_fwd_bwd_f16", n, GELU_PER_BLOCK,
                            stream, args);
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
  tj_dim3 grid = {(unsigned)((N - 1) / GEMM_TILE + 1),
                  (unsigned)((M - 1) / GEMM_TILE + 1), 1};
  void *args[] = {&M, &N, &K, &alpha, &A, &lda, &B, &ldb, &beta, &C, &ldc};
  return launch(rt, fn, "gemm_f16", grid, (tj_dim3){GEMM_THREADS, 1, 1},
                stream, args);
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
  if (rt->compile_only)
    return no_gpu(rt, fn);
  tj_kernel *k = NULL;
  int rc = tj_kernel_get(rt, kernel, &k);
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

static int call_add_i32(tj_runtime *rt, const void *ctx, void *const *d)
{
  return tj_add_i32(rt, NULL, d[0], d[1], d[2], *(const size_t *)ctx);
}

static int call_gelu_fwd(tj_runtime *rt, const void *ctx, void *const *d)
{
  return tj_gelu_fwd_f16(rt, NULL, d[0], d[1], *(const size_t *)ctx);
}

static int call_gelu_bwd(tj_runtime *rt, const void *ctx, void *const *d)
{
  return tj_gelu_bwd_f16(rt, NULL, d[0], d[1], d[2], *(const size_t *)ctx);
}

static int call_gelu_fwd_bwd(tj_runtime *rt, const void *ctx, void *const *d)
{
  return tj_gelu_fwd_bwd_f16(rt, NULL, d[0], d[1], d[2], d[3],
                             *(const size_t *)ctx);
}

int tj_add_i32_host(tj_runtime *rt, const int32_t *a, size_t a_len,
                    const int32_t *b, size_t b_len, int32_t *c, size_t n)
{
  static const char fn[] = "tj_add_i32_host";
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  const array_arg arr[] = {{"a", a, 0}, {"b", b, 0}, {"c", c, 1}};
  int rc = check_elementwise(rt, fn, arr, 3, n, sizeof *a);
  if (rc == TJ_OK)
    rc = check_length(rt, fn, "a", a_len, n);
  if (rc == TJ_OK)
    rc = check_length(rt, fn, "b", b_len, n);
  if (rc != TJ_OK)
    return rc;
  size_t bytes = n * sizeof *a;
  const host_buffer buf[] = {{a, NULL, bytes}, {b, NULL, bytes},
                             {NULL, c, bytes}};
  return host_run(rt, fn, "add_i32", buf, 3, call_add_i32, &n);
}

int tj_gelu_fwd_f16_host(tj_runtime *rt, const uint16_t *x, size_t x_len,
                         uint16_t *y, size_t n)
{
  static const char fn[] = "tj_gelu_fwd_f16_host";
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  const array_arg arr[] = {{"x", x, 0}, {"y", y, 1}};
  int rc = check_elementwise(rt, fn, arr, 2, n, sizeof *x);
  if (rc == TJ_OK)
    rc = check_length(rt, fn, "x", x_len, n);
  if (rc != TJ_OK)
    return rc;
  size_t bytes = n * sizeof *x;
  const host_buffer buf[] = {{x, NULL, bytes}, {NULL, y, bytes}};
  return host_run(rt, fn, "gelu_fwd_f16", buf, 2, call_gelu_fwd, &n);
}

int tj_gelu_bwd_f16_host(tj_runtime *rt, const uint16_t *grad_out,
                         size_t grad_out_len, const uint16_t *x, size_t x_len,
                         uint16_t *grad_in, size_t n)
{
  static const char fn[] = "tj_gelu_bwd_f16_host";
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  const array_arg arr[] = {
      {"grad_out", grad_out, 0}, {"x", x, 0}, {"grad_in", grad_in, 1}};
  int rc = check_elementwise(rt, fn, arr, 3, n, sizeof *x);
  if (rc == TJ_OK)
    rc = check_length(rt, fn, "grad_out", grad_out_len, n);
  if (rc == TJ_OK)
    rc = check_length(rt, fn, "x", x_len, n);
  if (rc != TJ_OK)
    return rc;
  size_t bytes = n * sizeof *x;
  const host_buffer buf[] = {{grad_out, NULL, bytes}, {x, NULL, bytes},
                             {NULL, grad_in, bytes}};
  return host_run(rt, fn, "gelu_bwd_f16", buf, 3, call_gelu_bwd, &n);
}

int tj_gelu_fwd_bwd_f16_host(tj_runtime *rt, const uint16_t *x, size_t x_len,
                             const uint16_t *grad_out, size_t grad_out_len,
                             uint16_t *y, uint16_t *grad_in, size_t n)
{
  static const char fn[] = "tj_gelu_fwd_bwd_f16_host";
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  const array_arg arr[] = {{"x", x, 0}, {"grad_out", grad_out, 0},
                           {"y", y, 1}, {"grad_in", grad_in, 1}};
  int rc = check_elementwise(rt, fn, arr, 4, n, sizeof *x);
  if (rc == TJ_OK)
    rc = check_length(rt, fn, "x", x_len, n);
  if (rc == TJ_OK)
    rc = check_length(rt, fn, "grad_out", grad_out_len, n);
  if (rc != TJ_OK)
    return rc;
  size_t bytes = n * sizeof *x;
  const host_buffer buf[] = {{x, NULL, bytes}, {grad_out, NULL, bytes},
                             {NULL, y, bytes}, {NULL, grad_in, bytes}};
  return host_run(rt, fn, "gelu_fwd_bwd_f16", buf, 4, call_gelu_fwd_bwd, &n);
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
  return host_run(rt, fn, "gemm_f16", buf, 3, call_gemm, &shape);
}
