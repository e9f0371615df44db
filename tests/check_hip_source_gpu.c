/* check_hip_source_gpu.c: the HIP kernels of tests/hip compiled from their
 * files with tj_kernel_compile, launched with tj_launch on device buffers,
 * and every element of every output compared with a CPU oracle.  Inputs
 * are chosen so that the exact result is representable (integer-valued
 * floats, fp16 products that round once), so every comparison is exact.
 * Outputs are allocated one element long and poisoned, so a write past
 * the end or a missed element shows.  Exits 77 (skip) without a GPU; like
 * check_kernels_gpu.c, the parent never touches the GPU, because a CUDA
 * context does not survive the fork() that runs each test.  Timeouts are
 * hang guards, not timing assertions. */
#include "testgpu.h"
#include "hip_sources.h"
#include "tokitai-jit/ops.h"

#include <stdint.h>

static tj_kernel *compile_file(tj_runtime *rt, const char *file,
                               const char *entry)
{
  char *src = hip_source_read(file);
  tj_kernel *k = NULL;
  int rc = tj_kernel_compile(rt, src, entry, NULL, &k);
  /* The log cut short: Check exits on a message over its limit. */
  ck_assert_msg(rc == TJ_OK, "%s (%s): %s: %.2000s", file, entry,
                tj_strerror(rc), tj_errmsg(rt));
  ck_assert_ptr_nonnull(tj_kernel_function(k));
  free(src);
  return k;
}

static void launch(const tj_kernel *k, tj_dim3 grid, tj_dim3 block,
                   unsigned shared, void **args)
{
  int rc = tj_launch(k, grid, block, shared, NULL, args);
  ck_assert_msg(rc == TJ_OK, "tj_launch: %s", tj_strerror(rc));
  CHECK_HIP(hipDeviceSynchronize());
}

/* ------------------------------------------------------- data */

/* An integer in [lo, hi]. */
static int random_int(uint64_t *s, int lo, int hi)
{
  return lo + (int)(next_random(s) % (uint64_t)(hi - lo + 1));
}

static void *dev_copy(const void *host, size_t bytes)
{
  void *d = NULL;
  CHECK_HIP(hipMalloc(&d, bytes ? bytes : 1));
  if (bytes)
    CHECK_HIP(hipMemcpyHtoD(d, (void *)host, bytes));
  return d;
}

/* Copy back bytes + spare; the spare bytes must still be poison. */
static void *dev_fetch(const void *dev, size_t bytes, size_t spare)
{
  unsigned char *h = xmalloc(bytes + spare);
  CHECK_HIP(hipMemcpyDtoH(h, (void *)dev, bytes + spare));
  for (size_t i = 0; i < spare; i++)
    ck_assert_msg(h[bytes + i] == 0xff, "a write past the end, byte %zu", i);
  return h;
}

/* ------------------------------------------------------- saxpy */

static const unsigned long long axpy_sizes[] = {1, 255, 257, (1u << 20) + 3};
#define N_AXPY_SIZES (int)(sizeof axpy_sizes / sizeof axpy_sizes[0])

/* Integers in [-1000, 1000] and a = 1.75: a * x + y is exact in float,
 * with or without a fused multiply-add. */
START_TEST(saxpy_f32_every_element)
{
  unsigned long long n = axpy_sizes[_i];
  uint64_t seed = 11 + (uint64_t)_i;
  float a = 1.75f, *x = xmalloc(n * 4), *y = xmalloc(n * 4);
  for (size_t i = 0; i < n; i++) {
    x[i] = (float)random_int(&seed, -1000, 1000);
    y[i] = (float)random_int(&seed, -1000, 1000);
  }
  tj_runtime *rt = open_gpu();
  tj_kernel *k = compile_file(rt, "saxpy.hip", "saxpy_f32");
  void *dx = dev_copy(x, n * 4), *dy = dev_poisoned(n * 4 + 4);
  CHECK_HIP(hipMemcpyHtoD(dy, y, n * 4));
  void *args[] = {&a, &dx, &dy, &n};
  launch(k, (tj_dim3){120, 1, 1}, (tj_dim3){256, 1, 1}, 0, args);
  float *got = dev_fetch(dy, n * 4, 4);
  for (size_t i = 0; i < n; i++) {
    double want = (double)a * x[i] + y[i];
    if (got[i] != want)
      ck_abort_msg("n=%llu y[%zu] = %.9g, want %.9g", n, i, (double)got[i], want);
  }
  CHECK_HIP(hipFree(dx));
  CHECK_HIP(hipFree(dy));
  tj_runtime_close(rt);
  free(x); free(y); free(got);
}
END_TEST

START_TEST(daxpy_f64_every_element)
{
  unsigned long long n = axpy_sizes[_i];
  uint64_t seed = 23 + (uint64_t)_i;
  double a = -2.5, *x = xmalloc(n * 8), *y = xmalloc(n * 8);
  for (size_t i = 0; i < n; i++) {
    x[i] = random_int(&seed, -100000, 100000);
    y[i] = random_int(&seed, -100000, 100000);
  }
  tj_runtime *rt = open_gpu();
  tj_kernel *k = compile_file(rt, "saxpy.hip", "daxpy_f64");
  void *dx = dev_copy(x, n * 8), *dy = dev_poisoned(n * 8 + 8);
  CHECK_HIP(hipMemcpyHtoD(dy, y, n * 8));
  void *args[] = {&a, &dx, &dy, &n};
  launch(k, (tj_dim3){7, 1, 1}, (tj_dim3){96, 1, 1}, 0, args);
  double *got = dev_fetch(dy, n * 8, 8);
  for (size_t i = 0; i < n; i++)
    if (got[i] != a * x[i] + y[i])
      ck_abort_msg("n=%llu y[%zu] = %.17g, want %.17g", n, i, got[i],
                   a * x[i] + y[i]);
  CHECK_HIP(hipFree(dx));
  CHECK_HIP(hipFree(dy));
  tj_runtime_close(rt);
  free(x); free(y); free(got);
}
END_TEST

/* ------------------------------------------------------- block sum */

static const int sum_widths[] = {2, 4, 8, 16, 32};
#define N_SUM_WIDTHS (int)(sizeof sum_widths / sizeof sum_widths[0])

/* Integers in [-8, 8]: every partial sum stays below 2^24 and is exact in
 * float whatever the order.  A width the shuffles ignored would add lanes
 * of other groups in and miss the oracle. */
START_TEST(block_sum_every_block_each_width)
{
  int width = sum_widths[_i];
  const unsigned grid = 120, block = 256;
  unsigned long long n = (1u << 20) + 77;
  uint64_t seed = 37 + (uint64_t)_i;
  float *x = xmalloc(n * 4);
  double want[120] = {0};
  for (size_t i = 0; i < n; i++) {
    x[i] = (float)random_int(&seed, -8, 8);
    want[(i % ((size_t)grid * block)) / block] += x[i];
  }
  tj_runtime *rt = open_gpu();
  tj_kernel *k = compile_file(rt, "block_sum.hip", "block_sum_f32");
  void *dx = dev_copy(x, n * 4), *dout = dev_poisoned(grid * 4 + 4);
  void *args[] = {&dx, &n, &width, &dout};
  launch(k, (tj_dim3){grid, 1, 1}, (tj_dim3){block, 1, 1},
         block / (unsigned)width * 4, args);
  float *got = dev_fetch(dout, grid * 4, 4);
  for (unsigned b = 0; b < grid; b++)
    if (got[b] != want[b])
      ck_abort_msg("width %d: block %u sums to %.9g, want %.9g", width, b,
                   (double)got[b], want[b]);
  CHECK_HIP(hipFree(dx));
  CHECK_HIP(hipFree(dout));
  tj_runtime_close(rt);
  free(x); free(got);
}
END_TEST

/* ------------------------------------------------------- transpose */

static const int transpose_shapes[][2] = {{1, 1}, {33, 65}, {333, 517}, {1024, 1024}};
#define N_TRANSPOSE (int)(sizeof transpose_shapes / sizeof transpose_shapes[0])

START_TEST(transpose_every_element)
{
  int rows = transpose_shapes[_i][0], cols = transpose_shapes[_i][1];
  size_t n = (size_t)rows * cols;
  float *in = xmalloc(n * 4);
  for (size_t i = 0; i < n; i++)
    in[i] = (float)i; /* exact below 2^24: each element names its place */
  tj_runtime *rt = open_gpu();
  tj_kernel *k = compile_file(rt, "transpose.hip", "transpose_f32");
  void *din = dev_copy(in, n * 4), *dout = dev_poisoned(n * 4 + 4);
  void *args[] = {&dout, &din, &rows, &cols};
  launch(k, (tj_dim3){(unsigned)(cols + 31) / 32, (unsigned)(rows + 31) / 32, 1},
         (tj_dim3){32, 8, 1}, 0, args);
  float *got = dev_fetch(dout, n * 4, 4);
  for (int c = 0; c < cols; c++)
    for (int r = 0; r < rows; r++)
      if (got[(size_t)c * rows + r] != in[(size_t)r * cols + c])
        ck_abort_msg("%dx%d: out[%d][%d] = %.9g, want %.9g", rows, cols, c, r,
                     (double)got[(size_t)c * rows + r],
                     (double)in[(size_t)r * cols + c]);
  CHECK_HIP(hipFree(din));
  CHECK_HIP(hipFree(dout));
  tj_runtime_close(rt);
  free(in); free(got);
}
END_TEST

/* ------------------------------------------------------- histogram */

/* Half the bytes are 7, so thousands of threads contend for one bin; the
 * second launch must add to the first. */
START_TEST(histogram_every_bin)
{
  unsigned long long n = (1u << 22) + 13;
  uint64_t seed = 51;
  unsigned char *data = xmalloc(n);
  uint64_t want[256] = {0};
  for (size_t i = 0; i < n; i++) {
    uint64_t r = next_random(&seed);
    data[i] = (r >> 63) ? 7 : (unsigned char)r;
    want[data[i]] += 2;
  }
  tj_runtime *rt = open_gpu();
  tj_kernel *k = compile_file(rt, "histogram.hip", "histogram_u8");
  void *dd = dev_copy(data, n), *dbins = dev_poisoned(256 * 4 + 4);
  CHECK_HIP(hipMemset(dbins, 0, 256 * 4));
  void *args[] = {&dd, &n, &dbins};
  launch(k, (tj_dim3){64, 1, 1}, (tj_dim3){256, 1, 1}, 0, args);
  launch(k, (tj_dim3){3, 1, 1}, (tj_dim3){128, 1, 1}, 0, args);
  uint32_t *got = dev_fetch(dbins, 256 * 4, 4);
  uint64_t total = 0;
  for (int b = 0; b < 256; b++) {
    if (got[b] != want[b])
      ck_abort_msg("bin %d: %u, want %llu", b, got[b], (unsigned long long)want[b]);
    total += got[b];
  }
  ck_assert_uint_eq(total, 2 * n);
  CHECK_HIP(hipFree(dd));
  CHECK_HIP(hipFree(dbins));
  tj_runtime_close(rt);
  free(data); free(got);
}
END_TEST

/* ------------------------------------------------------- fp16 */

/* Every finite fp16 value (both signs, subnormals, the largest, whose
 * product overflows to inf), then random ones.  x * 1.5 is exact in float
 * (at most 13 significant bits), so tj_f32_to_f16 of it is the one
 * rounding to nearest even that __hmul makes; bit-for-bit equal. */
START_TEST(scale_relu_f16_every_element)
{
  unsigned long long n = 2 * 0x7c00 + 100003;
  uint64_t seed = 67;
  uint16_t *x = xmalloc(n * 2);
  for (size_t i = 0; i < n; i++) {
    uint16_t h = i < 2 * 0x7c00 ? (uint16_t)((i & 1) << 15 | i >> 1)
                                : (uint16_t)next_random(&seed);
    if ((h & 0x7c00) == 0x7c00) /* inf or NaN: make it finite */
      h ^= 0x4000;
    x[i] = h;
  }
  float scale = 1.5f;
  tj_runtime *rt = open_gpu();
  tj_kernel *k = compile_file(rt, "scale_relu_f16.hip", "scale_relu_f16");
  void *dx = dev_copy(x, n * 2), *dy = dev_poisoned(n * 2 + 2),
       *dy32 = dev_poisoned(n * 4 + 4);
  void *args[] = {&dx, &scale, &dy, &dy32, &n};
  launch(k, (tj_dim3){200, 1, 1}, (tj_dim3){256, 1, 1}, 0, args);
  uint16_t *y = dev_fetch(dy, n * 2, 2);
  float *y32 = dev_fetch(dy32, n * 4, 4);
  for (size_t i = 0; i < n; i++) {
    uint16_t p = tj_f32_to_f16(tj_f16_to_f32(x[i]) * scale);
    uint16_t want = (p & 0x8000) || p == 0 ? 0 : p; /* p > 0, else +0 */
    if (y[i] != want)
      ck_abort_msg("x=0x%04x: y = 0x%04x, want 0x%04x", x[i], y[i], want);
    float w32 = tj_f16_to_f32(want);
    if (memcmp(&y32[i], &w32, 4) != 0)
      ck_abort_msg("x=0x%04x: y_f32 = %.9g, want %.9g", x[i], (double)y32[i],
                   (double)w32);
  }
  CHECK_HIP(hipFree(dx));
  CHECK_HIP(hipFree(dy));
  CHECK_HIP(hipFree(dy32));
  tj_runtime_close(rt);
  free(x); free(y); free(y32);
}
END_TEST

/* ------------------------------------------------------- main */

int main(void)
{
  Suite *s = suite_create("hip_source_gpu");
  TCase *tc = test_case(s, "hip_source_gpu", 600);
  tcase_add_loop_test(tc, saxpy_f32_every_element, 0, N_AXPY_SIZES);
  tcase_add_loop_test(tc, daxpy_f64_every_element, 0, N_AXPY_SIZES);
  tcase_add_loop_test(tc, block_sum_every_block_each_width, 0, N_SUM_WIDTHS);
  tcase_add_loop_test(tc, transpose_every_element, 0, N_TRANSPOSE);
  tcase_add_test(tc, histogram_every_bin);
  tcase_add_test(tc, scale_relu_f16_every_element);
  return run_gpu_suite(s, "the HIP source GPU suite");
}
