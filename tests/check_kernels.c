/* check_kernels.c: the kernel calls and tj_verify on a CPU machine: every
 * argument check of every call, with its exact message, on a compile-only
 * runtime; that a valid call there is TJ_ENODEVICE without compiling or
 * touching the caller's output; the launch shapes the calls assume against
 * the embedded sources; and the JSON and markdown reports. */
#include "testknobs.h"
#include "gemm/plan.h"
#include "internal.h"
#include "embedded.h"
#include "jsoncheck.h"
#include "tokitai-jit/kernels.h"
#include "tokitai-jit/cache.h"

#include <limits.h>
#include <locale.h>
#include <math.h>

#if defined(TJ_PLATFORM_NVIDIA)
#define TJ_PLATFORM_IS_NVIDIA 1
#else
#define TJ_PLATFORM_IS_NVIDIA 0
#endif

/* Device pointers are never dereferenced before a launch, and a
 * compile-only runtime never launches: distinct, aligned, far-apart fake
 * addresses exercise the checks. */
#define FAKE(i) ((void *)((uintptr_t)(i) << 32))

static void expect_fail(tj_runtime *rt, int rc, int code, const char *msg)
{
  ck_assert_msg(rc == code, "got %s, want %s (%s)", tj_err_name(rc),
                tj_err_name(code), tj_errmsg(rt));
  ck_assert_str_eq(tj_errmsg(rt), msg);
}

static void expect_no_gpu(tj_runtime *rt, int rc, const char *fn)
{
  char want[256];
  snprintf(want, sizeof want, "no GPU: %s launches a kernel, and this "
           "runtime is compile-only (arch %s)", fn, TEST_ARCH);
  expect_fail(rt, rc, TJ_ENODEVICE, want);
}

static uint64_t compiles(tj_runtime *rt)
{
  tj_stats st;
  ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
  return st.compiles + st.cache_hits;
}

/* ------------------------------------------------------- no runtime */

START_TEST(null_runtime_is_einval)
{
  uint16_t h[4] = {0};
  int32_t i[4] = {0};
  tj_report r;
  ck_assert_int_eq(tj_add_i32(NULL, NULL, i, i, i, 4), TJ_EINVAL);
  ck_assert_int_eq(tj_gelu_fwd_f16(NULL, NULL, h, h, 4), TJ_EINVAL);
  ck_assert_int_eq(tj_gelu_bwd_f16(NULL, NULL, h, h, h, 4), TJ_EINVAL);
  ck_assert_int_eq(tj_gelu_fwd_bwd_f16(NULL, NULL, h, h, h, h + 2, 2), TJ_EINVAL);
  ck_assert_int_eq(tj_gemm_f16(NULL, NULL, 1, 1, 1, 1, h, 1, h, 1, 0, h + 1, 1), TJ_EINVAL);
  ck_assert_int_eq(tj_add_i32_host(NULL, i, 4, i, 4, i, 4), TJ_EINVAL);
  ck_assert_int_eq(tj_gelu_fwd_f16_host(NULL, h, 4, h, 4), TJ_EINVAL);
  ck_assert_int_eq(tj_gelu_bwd_f16_host(NULL, h, 4, h, 4, h, 4), TJ_EINVAL);
  ck_assert_int_eq(tj_gelu_fwd_bwd_f16_host(NULL, h, 2, h, 2, h, h + 2, 2), TJ_EINVAL);
  ck_assert_int_eq(tj_gemm_f16_host(NULL, 1, 1, 1, 1, h, h, 0, h + 1), TJ_EINVAL);
  ck_assert_int_eq(tj_verify(NULL, "add_i32", 4, 1, &r), TJ_EINVAL);
  ck_assert_ptr_null(tj_report_json(NULL));
  ck_assert_ptr_null(tj_report_markdown(NULL));
}
END_TEST

/* ------------------------------------------------------- elementwise */

START_TEST(device_calls_name_null_arguments)
{
  tj_runtime *rt = test_knobs_from_env(open_compile_only(NULL, 0));
  int32_t *a = FAKE(1), *b = FAKE(2), *c = FAKE(3);
  uint16_t *x = FAKE(4), *y = FAKE(5), *g = FAKE(6), *d = FAKE(7);
  expect_fail(rt, tj_add_i32(rt, NULL, NULL, b, c, 4), TJ_EINVAL, "tj_add_i32: a is NULL");
  expect_fail(rt, tj_add_i32(rt, NULL, a, NULL, c, 4), TJ_EINVAL, "tj_add_i32: b is NULL");
  expect_fail(rt, tj_add_i32(rt, NULL, a, b, NULL, 4), TJ_EINVAL, "tj_add_i32: c is NULL");
  expect_fail(rt, tj_gelu_fwd_f16(rt, NULL, NULL, y, 4), TJ_EINVAL, "tj_gelu_fwd_f16: x is NULL");
  expect_fail(rt, tj_gelu_fwd_f16(rt, NULL, x, NULL, 4), TJ_EINVAL, "tj_gelu_fwd_f16: y is NULL");
  expect_fail(rt, tj_gelu_bwd_f16(rt, NULL, NULL, x, d, 4), TJ_EINVAL, "tj_gelu_bwd_f16: grad_out is NULL");
  expect_fail(rt, tj_gelu_bwd_f16(rt, NULL, g, NULL, d, 4), TJ_EINVAL, "tj_gelu_bwd_f16: x is NULL");
  expect_fail(rt, tj_gelu_bwd_f16(rt, NULL, g, x, NULL, 4), TJ_EINVAL, "tj_gelu_bwd_f16: grad_in is NULL");
  expect_fail(rt, tj_gelu_fwd_bwd_f16(rt, NULL, NULL, g, y, d, 4), TJ_EINVAL, "tj_gelu_fwd_bwd_f16: x is NULL");
  expect_fail(rt, tj_gelu_fwd_bwd_f16(rt, NULL, x, NULL, y, d, 4), TJ_EINVAL, "tj_gelu_fwd_bwd_f16: grad_out is NULL");
  expect_fail(rt, tj_gelu_fwd_bwd_f16(rt, NULL, x, g, NULL, d, 4), TJ_EINVAL, "tj_gelu_fwd_bwd_f16: y is NULL");
  expect_fail(rt, tj_gelu_fwd_bwd_f16(rt, NULL, x, g, y, NULL, 4), TJ_EINVAL, "tj_gelu_fwd_bwd_f16: grad_in is NULL");
  ck_assert_uint_eq(compiles(rt), 0);
  tj_runtime_close(rt);
}
END_TEST

START_TEST(device_calls_reject_n_zero_and_overflow)
{
  tj_runtime *rt = test_knobs_from_env(open_compile_only(NULL, 0));
  int32_t *a = FAKE(1), *b = FAKE(2), *c = FAKE(3);
  uint16_t *x = FAKE(4), *y = FAKE(5), *g = FAKE(6), *d = FAKE(7);
  expect_fail(rt, tj_add_i32(rt, NULL, a, b, c, 0), TJ_EINVAL, "tj_add_i32: n is 0");
  expect_fail(rt, tj_gelu_fwd_f16(rt, NULL, x, y, 0), TJ_EINVAL, "tj_gelu_fwd_f16: n is 0");
  expect_fail(rt, tj_gelu_bwd_f16(rt, NULL, g, x, d, 0), TJ_EINVAL, "tj_gelu_bwd_f16: n is 0");
  expect_fail(rt, tj_gelu_fwd_bwd_f16(rt, NULL, x, g, y, d, 0), TJ_EINVAL, "tj_gelu_fwd_bwd_f16: n is 0");
  char want[256];
  size_t n4 = SIZE_MAX / 4 + 1, n2 = SIZE_MAX / 2 + 1;
  snprintf(want, sizeof want, "tj_add_i32: n=%zu elements of 4 bytes overflow size_t", n4);
  expect_fail(rt, tj_add_i32(rt, NULL, a, b, c, n4), TJ_EINVAL, want);
  snprintf(want, sizeof want, "tj_gelu_fwd_f16: n=%zu elements of 2 bytes overflow size_t", n2);
  expect_fail(rt, tj_gelu_fwd_f16(rt, NULL, x, y, n2), TJ_EINVAL, want);
  snprintf(want, sizeof want, "tj_gelu_bwd_f16: n=%zu elements of 2 bytes overflow size_t", SIZE_MAX);
  expect_fail(rt, tj_gelu_bwd_f16(rt, NULL, g, x, d, SIZE_MAX), TJ_EINVAL, want);
  snprintf(want, sizeof want, "tj_gelu_fwd_bwd_f16: n=%zu elements of 2 bytes overflow size_t", n2);
  expect_fail(rt, tj_gelu_fwd_bwd_f16(rt, NULL, x, g, y, d, n2), TJ_EINVAL, want);
  ck_assert_uint_eq(compiles(rt), 0);
  tj_runtime_close(rt);
}
END_TEST

START_TEST(device_calls_reject_misaligned_pointers)
{
  tj_runtime *rt = test_knobs_from_env(open_compile_only(NULL, 0));
  int32_t *a = FAKE(1), *b = FAKE(2), *c = FAKE(3);
  uint16_t *x = FAKE(4), *y = FAKE(5);
  int32_t *a2 = (int32_t *)((char *)a + 2);
  uint16_t *y1 = (uint16_t *)((char *)y + 1);
  expect_fail(rt, tj_add_i32(rt, NULL, a2, b, c, 4), TJ_EINVAL, "tj_add_i32: a is not 4-byte aligned");
  expect_fail(rt, tj_gelu_fwd_f16(rt, NULL, x, y1, 4), TJ_EINVAL, "tj_gelu_fwd_f16: y is not 2-byte aligned");
  /* One element off is still naturally aligned: allowed. */
  expect_no_gpu(rt, tj_add_i32(rt, NULL, a + 1, b + 3, c + 1, 4), "tj_add_i32");
  expect_no_gpu(rt, tj_gelu_fwd_f16(rt, NULL, x + 1, y + 1, 4), "tj_gelu_fwd_f16");
  tj_runtime_close(rt);
}
END_TEST

START_TEST(device_calls_reject_partial_overlaps)
{
  tj_runtime *rt = test_knobs_from_env(open_compile_only(NULL, 0));
  int32_t *a = FAKE(1), *b = FAKE(2);
  uint16_t *x = FAKE(4), *g = FAKE(6), *y = FAKE(5);
  const char *msg = "tj_gelu_fwd_f16: x and y overlap (an output may be exactly an input, nothing else)";
  expect_fail(rt, tj_gelu_fwd_f16(rt, NULL, x, x + 3, 4), TJ_EINVAL, msg);
  expect_fail(rt, tj_gelu_fwd_f16(rt, NULL, x + 3, x, 4), TJ_EINVAL, msg);
  expect_fail(rt, tj_add_i32(rt, NULL, a, b, b + 1, 2), TJ_EINVAL,
              "tj_add_i32: b and c overlap (an output may be exactly an input, nothing else)");
  expect_fail(rt, tj_gelu_fwd_bwd_f16(rt, NULL, x, g, y, y, 4), TJ_EINVAL,
              "tj_gelu_fwd_bwd_f16: y and grad_in overlap (an output may be exactly an input, nothing else)");
  /* In place, shared inputs, and arrays that just touch are all fine. */
  expect_no_gpu(rt, tj_gelu_fwd_f16(rt, NULL, x, x, 4), "tj_gelu_fwd_f16");
  expect_no_gpu(rt, tj_gelu_fwd_f16(rt, NULL, x, x + 4, 4), "tj_gelu_fwd_f16");
  expect_no_gpu(rt, tj_add_i32(rt, NULL, a, a, a, 4), "tj_add_i32");
  expect_no_gpu(rt, tj_gelu_bwd_f16(rt, NULL, g, x, g, 4), "tj_gelu_bwd_f16");
  expect_no_gpu(rt, tj_gelu_fwd_bwd_f16(rt, NULL, x, g, x, g, 4), "tj_gelu_fwd_bwd_f16");
  ck_assert_uint_eq(compiles(rt), 0);
  tj_runtime_close(rt);
}
END_TEST

/* Valid calls fail only for want of a GPU, and compile nothing. */
START_TEST(valid_calls_on_compile_only_runtime_are_enodevice)
{
  tj_runtime *rt = test_knobs_from_env(open_compile_only(NULL, 0));
  int32_t *a = FAKE(1), *b = FAKE(2), *c = FAKE(3);
  uint16_t *x = FAKE(4), *y = FAKE(5), *g = FAKE(6), *d = FAKE(7);
  expect_no_gpu(rt, tj_add_i32(rt, NULL, a, b, c, 1000), "tj_add_i32");
  expect_no_gpu(rt, tj_gelu_fwd_f16(rt, NULL, x, y, 1), "tj_gelu_fwd_f16");
  expect_no_gpu(rt, tj_gelu_bwd_f16(rt, NULL, g, x, d, 7), "tj_gelu_bwd_f16");
  expect_no_gpu(rt, tj_gelu_fwd_bwd_f16(rt, NULL, x, g, y, d, 9), "tj_gelu_fwd_bwd_f16");
  expect_no_gpu(rt, tj_gemm_f16(rt, NULL, 3, 5, 7, 1, x, 7, g, 5, 0, d, 5), "tj_gemm_f16");
  ck_assert_uint_eq(compiles(rt), 0);
  tj_runtime_close(rt);
}
END_TEST

/* ------------------------------------------------------- host calls */

START_TEST(host_calls_check_lengths)
{
  tj_runtime *rt = test_knobs_from_env(open_compile_only(NULL, 0));
  int32_t a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {9, 9, 9, 9};
  uint16_t x[4] = {1, 2, 3, 4}, g[4] = {1, 2, 3, 4}, y[4] = {7, 7, 7, 7}, d[4] = {7, 7, 7, 7};
  expect_fail(rt, tj_gelu_bwd_f16_host(rt, g, 3, x, 4, d, 4), TJ_EINVAL,
              "tj_gelu_bwd_f16_host: grad_out length 3 does not match n=4");
  expect_fail(rt, tj_gelu_bwd_f16_host(rt, g, 4, x, 5, d, 4), TJ_EINVAL,
              "tj_gelu_bwd_f16_host: x length 5 does not match n=4");
  expect_fail(rt, tj_add_i32_host(rt, a, 3, b, 4, c, 4), TJ_EINVAL,
              "tj_add_i32_host: a length 3 does not match n=4");
  expect_fail(rt, tj_add_i32_host(rt, a, 4, b, 0, c, 4), TJ_EINVAL,
              "tj_add_i32_host: b length 0 does not match n=4");
  expect_fail(rt, tj_gelu_fwd_f16_host(rt, x, 2, y, 4), TJ_EINVAL,
              "tj_gelu_fwd_f16_host: x length 2 does not match n=4");
  expect_fail(rt, tj_gelu_fwd_bwd_f16_host(rt, x, 1, g, 4, y, d, 4), TJ_EINVAL,
              "tj_gelu_fwd_bwd_f16_host: x length 1 does not match n=4");
  expect_fail(rt, tj_gelu_fwd_bwd_f16_host(rt, x, 4, g, 3, y, d, 4), TJ_EINVAL,
              "tj_gelu_fwd_bwd_f16_host: grad_out length 3 does not match n=4");
  /* Outputs are written only on success. */
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(c[i], 9);
    ck_assert_uint_eq(y[i], 7);
    ck_assert_uint_eq(d[i], 7);
  }
  tj_runtime_close(rt);
}
END_TEST

START_TEST(host_calls_check_pointers_and_n)
{
  tj_runtime *rt = test_knobs_from_env(open_compile_only(NULL, 0));
  int32_t a[4] = {0}, c[4] = {0};
  uint16_t x[4] = {0}, g[4] = {0}, y[4] = {0}, d[4] = {0};
  expect_fail(rt, tj_add_i32_host(rt, a, 4, NULL, 4, c, 4), TJ_EINVAL, "tj_add_i32_host: b is NULL");
  expect_fail(rt, tj_gelu_fwd_f16_host(rt, x, 4, NULL, 4), TJ_EINVAL, "tj_gelu_fwd_f16_host: y is NULL");
  expect_fail(rt, tj_gelu_bwd_f16_host(rt, NULL, 4, x, 4, d, 4), TJ_EINVAL, "tj_gelu_bwd_f16_host: grad_out is NULL");
  expect_fail(rt, tj_gelu_fwd_bwd_f16_host(rt, x, 4, g, 4, y, NULL, 4), TJ_EINVAL,
              "tj_gelu_fwd_bwd_f16_host: grad_in is NULL");
  expect_fail(rt, tj_add_i32_host(rt, a, 0, a, 0, c, 0), TJ_EINVAL, "tj_add_i32_host: n is 0");
  expect_fail(rt, tj_gelu_fwd_f16_host(rt, x, 0, y, 0), TJ_EINVAL, "tj_gelu_fwd_f16_host: n is 0");
  expect_fail(rt, tj_gelu_bwd_f16_host(rt, g, 0, x, 0, d, 0), TJ_EINVAL, "tj_gelu_bwd_f16_host: n is 0");
  expect_fail(rt, tj_gelu_fwd_bwd_f16_host(rt, x, 0, g, 0, y, d, 0), TJ_EINVAL, "tj_gelu_fwd_bwd_f16_host: n is 0");
  char want[256];
  snprintf(want, sizeof want, "tj_gelu_fwd_f16_host: n=%zu elements of 2 bytes overflow size_t", SIZE_MAX);
  expect_fail(rt, tj_gelu_fwd_f16_host(rt, x, SIZE_MAX, y, SIZE_MAX), TJ_EINVAL, want);
  expect_fail(rt, tj_gelu_fwd_bwd_f16_host(rt, x, 4, g, 4, y, y, 4), TJ_EINVAL,
              "tj_gelu_fwd_bwd_f16_host: y and grad_in overlap (an output may be exactly an input, nothing else)");
  tj_runtime_close(rt);
}
END_TEST

START_TEST(valid_host_calls_are_enodevice_and_leave_outputs)
{
  tj_runtime *rt = test_knobs_from_env(open_compile_only(NULL, 0));
  int32_t a[3] = {1, 2, 3}, c[3] = {5, 5, 5};
  uint16_t x[3] = {1, 2, 3}, y[3] = {5, 5, 5}, d[3] = {5, 5, 5};
  uint16_t A[6] = {1, 2, 3, 4, 5, 6}, C[4] = {5, 5, 5, 5};
  expect_no_gpu(rt, tj_add_i32_host(rt, a, 3, a, 3, c, 3), "tj_add_i32_host");
  expect_no_gpu(rt, tj_gelu_fwd_f16_host(rt, x, 3, y, 3), "tj_gelu_fwd_f16_host");
  expect_no_gpu(rt, tj_gelu_bwd_f16_host(rt, x, 3, x, 3, d, 3), "tj_gelu_bwd_f16_host");
  expect_no_gpu(rt, tj_gelu_fwd_bwd_f16_host(rt, x, 3, x, 3, y, d, 3), "tj_gelu_fwd_bwd_f16_host");
  expect_no_gpu(rt, tj_gemm_f16_host(rt, 2, 2, 3, 1, A, A, 0.5f, C), "tj_gemm_f16_host");
  for (int i = 0; i < 3; i++)
    ck_assert(c[i] == 5 && y[i] == 5 && d[i] == 5 && C[i] == 5);
  ck_assert_uint_eq(compiles(rt), 0); /* checked before compiling */
  tj_runtime_close(rt);
}
END_TEST

/* ------------------------------------------------------- gemm */

START_TEST(gemm_checks_dimensions)
{
  tj_runtime *rt = test_knobs_from_env(open_compile_only(NULL, 0));
  uint16_t *A = FAKE(1), *B = FAKE(2), *C = FAKE(3);
  expect_fail(rt, tj_gemm_f16(rt, NULL, 0, 4, 4, 1, A, 4, B, 4, 0, C, 4), TJ_EINVAL, "tj_gemm_f16: M=0 must be at least 1");
  expect_fail(rt, tj_gemm_f16(rt, NULL, 4, -2, 4, 1, A, 4, B, 4, 0, C, 4), TJ_EINVAL, "tj_gemm_f16: N=-2 must be at least 1");
  expect_fail(rt, tj_gemm_f16(rt, NULL, 4, 4, 0, 1, A, 4, B, 4, 0, C, 4), TJ_EINVAL, "tj_gemm_f16: K=0 must be at least 1");
  expect_fail(rt, tj_gemm_f16(rt, NULL, 4, 8, 6, 1, A, 5, B, 8, 0, C, 8), TJ_EINVAL,
              "tj_gemm_f16: lda=5 is less than K=6 (A is row-major M x K)");
  expect_fail(rt, tj_gemm_f16(rt, NULL, 4, 8, 6, 1, A, 6, B, 6, 0, C, 8), TJ_EINVAL,
              "tj_gemm_f16: ldb=6 is less than N=8 (B is row-major K x N)");
  /* Row-major: ldc is at least N, whatever M is. */
  expect_fail(rt, tj_gemm_f16(rt, NULL, 4, 8, 6, 1, A, 6, B, 8, 0, C, 4), TJ_EINVAL,
              "tj_gemm_f16: ldc=4 is less than N=8 (C is row-major M x N)");
  expect_no_gpu(rt, tj_gemm_f16(rt, NULL, 8, 4, 6, 1, A, 6, B, 4, 0, C, 4), "tj_gemm_f16");
  expect_no_gpu(rt, tj_gemm_f16(rt, NULL, 8, 4, 6, 1, A, 9, B, 5, 0, C, 7), "tj_gemm_f16");
  expect_fail(rt, tj_gemm_f16(rt, NULL, 4, 4, 4, 1, NULL, 4, B, 4, 0, C, 4), TJ_EINVAL, "tj_gemm_f16: A is NULL");
  expect_fail(rt, tj_gemm_f16(rt, NULL, 4, 4, 4, 1, A, 4, NULL, 4, 0, C, 4), TJ_EINVAL, "tj_gemm_f16: B is NULL");
  expect_fail(rt, tj_gemm_f16(rt, NULL, 4, 4, 4, 1, A, 4, B, 4, 0, NULL, 4), TJ_EINVAL, "tj_gemm_f16: C is NULL");
  ck_assert_uint_eq(compiles(rt), 0);
  tj_runtime_close(rt);
}
END_TEST

START_TEST(gemm_checks_ranges_alignment_and_overlap)
{
  tj_runtime *rt = test_knobs_from_env(open_compile_only(NULL, 0));
  uint16_t *A = FAKE(1), *B = FAKE(2), *C = FAKE(3);
  int mmax = 65535 * 128;
  expect_no_gpu(rt, tj_gemm_f16(rt, NULL, mmax, 1, 1, 1, A, 1, B, 1, 0, C, 1), "tj_gemm_f16");
  expect_fail(rt, tj_gemm_f16(rt, NULL, mmax + 1, 1, 1, 1, A, 1, B, 1, 0, C, 1), TJ_ERANGE,
              "tj_gemm_f16: M=8388481 needs more than 65535 blocks of 128 rows, the grid's y limit");
  expect_fail(rt, tj_gemm_f16(rt, NULL, 1, 1, INT_MAX, 1, A, INT_MAX, B, 1, 0, C, 1), TJ_ERANGE,
              "tj_gemm_f16: K=2147483647 is over 2147483391, the most the kernel's int tile arithmetic allows");
  expect_fail(rt, tj_gemm_f16(rt, NULL, 2, 2, 2, 1, A, 2, B, 2, 0, (uint16_t *)((char *)C + 1), 2),
              TJ_EINVAL, "tj_gemm_f16: C is not 2-byte aligned");
  /* C's span ((M-1) ldc + N elements) reaching into A's. */
  expect_fail(rt, tj_gemm_f16(rt, NULL, 2, 2, 2, 1, A, 2, B, 2, 0, A + 3, 2), TJ_EINVAL,
              "tj_gemm_f16: C overlaps A");
  expect_fail(rt, tj_gemm_f16(rt, NULL, 2, 2, 2, 1, A, 2, B, 2, 0, B - 3, 2), TJ_EINVAL,
              "tj_gemm_f16: C overlaps B");
  expect_no_gpu(rt, tj_gemm_f16(rt, NULL, 2, 2, 2, 1, A, 2, B, 2, 0, A + 4, 2), "tj_gemm_f16");
  ck_assert_uint_eq(compiles(rt), 0);
  tj_runtime_close(rt);
}
END_TEST

START_TEST(gemm_host_checks)
{
  tj_runtime *rt = test_knobs_from_env(open_compile_only(NULL, 0));
  uint16_t A[6] = {0}, B[6] = {0}, C[4] = {0};
  expect_fail(rt, tj_gemm_f16_host(rt, 2, 2, 3, 1, NULL, B, 0, C), TJ_EINVAL, "tj_gemm_f16_host: A is NULL");
  expect_fail(rt, tj_gemm_f16_host(rt, 2, 2, 3, 1, A, B, 0, NULL), TJ_EINVAL, "tj_gemm_f16_host: C is NULL");
  expect_fail(rt, tj_gemm_f16_host(rt, 2, 0, 3, 1, A, B, 0, C), TJ_EINVAL, "tj_gemm_f16_host: N=0 must be at least 1");
  expect_fail(rt, tj_gemm_f16_host(rt, 8388481, 1, 1, 1, A, B, 0, C), TJ_ERANGE,
              "tj_gemm_f16_host: M=8388481 needs more than 65535 blocks of 128 rows, the grid's y limit");
  tj_runtime_close(rt);
}
END_TEST

/* ------------------------------------------------------- launch shapes */

/* The block size in front of entry's name, from its __launch_bounds__. */
static int launch_bounds_of(const char *src, const char *entry)
{
  static const char tag[] = "__launch_bounds__(";
  for (const char *p = strstr(src, tag); p; p = strstr(p + 1, tag)) {
    char *end;
    long threads = strtol(p + strlen(tag), &end, 10);
    /* Past an optional second argument (minimum blocks per SM). */
    end = strchr(end, ')');
    if (!end)
      return -1;
    for (end++; *end == ' ' || *end == '\n'; end++)
      ;
    size_t n = strlen(entry);
    if (strncmp(end, entry, n) == 0 && end[n] == '(')
      return (int)threads;
  }
  return -1;
}

/* the calls (elementwise.c, gemm/gemm.c) launch these block sizes; a kernel whose bounds change
 * must change there too, or its launches fail. */
START_TEST(block_sizes_match_the_kernel_sources)
{
  static const struct { const char *entry; int threads; } want[] = {
      {"add_i32", 256}, {"gelu_fwd_f16", 256}, {"gelu_bwd_f16", 256},
      {"gelu_fwd_bwd_f16", 256}, {"gemm_f16", 128},
      {"gemm_skinny_f16_m1", 1024}, {"gemm_skinny_f16_m2", 1024},
      {"gemm_skinny_f16_m4", 512}, {"gemm_skinny_f16_m8", 256},
      {"gemm_skinny_f16_tc_n32", 128}, {"gemm_skinny_f16_tc_n64", 128},
      {"gemm_skinny_f16_tc_reduce", 256}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const tj__embedded_kernel *e = tj__embedded_find(want[i].entry);
    ck_assert_msg(e != NULL, "%s is not embedded", want[i].entry);
    ck_assert_msg(launch_bounds_of(e->source, want[i].entry) == want[i].threads,
                  "%s: __launch_bounds__ is %d, the call launches %d",
                  want[i].entry, launch_bounds_of(e->source, want[i].entry),
                  want[i].threads);
  }
}
END_TEST

/* <tokitai-jit/kernels.h> holds one contract per embedded kernel, in the
 * library's order, whose signature is the entry's own and whose block is
 * its __launch_bounds__ and what the call launches. */
START_TEST(installed_contracts_match_the_kernels)
{
  static const struct {
    const char *name, *sig;
    unsigned bx, by, bz;
  } c[] = {
#define ROW(name, file, sig, bx, by, bz, shared, grid, align, notes) \
  {#name, sig, bx, by, bz},
      TJ_KERNEL_CONTRACTS(ROW)
#undef ROW
  };
  size_t n = sizeof c / sizeof c[0];
  ck_assert_uint_eq(n, tj_embedded_count());
  ck_assert_uint_eq(n, TJ_KERNEL_CONTRACT_COUNT);
  for (size_t i = 0; i < n; i++) {
    ck_assert_str_eq(c[i].name, tj_embedded_name(i));
    const tj__embedded_kernel *e = tj__embedded_find(c[i].name);
    /* "void add_i32(const int *a, ...)": the parameter list, after the
     * name, is in the source verbatim. */
    const char *params = strchr(c[i].sig, '(');
    ck_assert_ptr_nonnull(params);
    char *named = NULL;
    ck_assert_int_ge(asprintf(&named, "%s%s", c[i].name, params), 0);
    ck_assert_msg(strstr(e->source, named), "%s: '%s' is not in %s", c[i].name,
                  named, e->file);
    free(named);
    ck_assert_int_eq((int)(c[i].bx * c[i].by * c[i].bz),
                     launch_bounds_of(e->source, c[i].name));
  }
  /* The raw n of the elementwise kernels, which an int would get wrong. */
  ck_assert(strstr(TJ_KERNEL_ADD_I32_SIGNATURE, "unsigned long long n)"));
  ck_assert(strstr(TJ_KERNEL_GELU_BWD_F16_SIGNATURE, "unsigned long long n)"));
  ck_assert_int_eq(TJ_KERNEL_GEMM_F16_BLOCK_X, 128);
}
END_TEST

/* ------------------------------------------------------- the Hopper path */

/* tj_gemm_f16_kernel on (M, N, K) with dense leading dimensions, the
 * operands at 16-byte aligned fake addresses. */
static const char *entry_for(tj_runtime *rt, int M, int N, int K)
{
  return tj_gemm_f16_kernel(rt, M, N, K, FAKE(1), K, FAKE(2), N, FAKE(3), N);
}

/* tj__gemm_f16_grid on (M, N, K), dense, as entry_for. */
static tj_dim3 grid_for(tj_runtime *rt, int M, int N, int K)
{
  return tj__gemm_f16_grid(rt, M, N, K, FAKE(1), K, FAKE(2), N, FAKE(3), N);
}

/* What tj_gemm_f16 runs where: the Hopper kernel on sm_90 (and sm_90a)
 * when TMA can read A and B, its 128 x 256 tile once those tiles fill an
 * H200; gemm_f16 for operands or leading dimensions TMA refuses, on other
 * archs, and when TJ_GEMM_SM90A=0; the skinny kernels for M <= 8, and
 * to 16 where their 64-column strips fill the SMs (see
 * gemm_dispatch_takes_the_skinny_tc_path). */
START_TEST(gemm_dispatch_takes_the_hopper_path_where_it_fits)
{
  const char *archs[] = {"sm_90", "sm_90a"};
  const uint16_t *a8 = (const uint16_t *)((uintptr_t)FAKE(1) + 8);
  const uint16_t *b8 = (const uint16_t *)((uintptr_t)FAKE(2) + 8);
  /* Only NVIDIA has sm_90 (written so that the bound is no constant 0,
   * which -Wtype-limits on AMD calls always false). */
  for (size_t i = 0; TJ_PLATFORM_IS_NVIDIA && i < 2; i++) {
    tj_runtime *rt = test_knobs_from_env(open_for_arch(archs[i], NULL));
    /* The rule in plan_sm90a, as measured on the H200: 128 x 256 tiles
     * in multicast pairs past one wave of them (4096^3: 512 tiles), alone
     * within one (2048^3: 128). */
    ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x256_mc2");
    ck_assert_str_eq(entry_for(rt, 2048, 2048, 2048),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x256_persistent");
    ck_assert_str_eq(entry_for(rt, 4096, 11008, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x256_mc2");
    ck_assert_str_eq(entry_for(rt, 2048, 2304, 2048),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x256_mc2"); /* 144 tiles */
    ck_assert_str_eq(entry_for(rt, 128, 11008, 4096), "gemm_f16_f16_f16_nn_none_sm90a_128x128");
    ck_assert_str_eq(entry_for(rt, 1024, 1024, 1024), "gemm_f16_f16_f16_nn_none_sm90a_128x64");
    ck_assert_str_eq(entry_for(rt, 128, 4096, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x64_cluster_k2");
    ck_assert_str_eq(entry_for(rt, 128, 4096, 1984), "gemm_f16_f16_f16_nn_none_sm90a_128x64");
    ck_assert_str_eq(entry_for(rt, 128, 4096, 2048),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x64_cluster_k2");
    ck_assert_str_eq(entry_for(rt, 256, 4096, 2048), "gemm_f16_f16_f16_nn_none_sm90a_128x64");
    ck_assert_str_eq(entry_for(rt, 128, 4096, 11008),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x64_cluster_k2");
    ck_assert_str_eq(entry_for(rt, 192, 2048, 11008),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x64_cluster_k2");
    ck_assert_str_eq(entry_for(rt, 128, 2048, 11008),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x128_splitk");
    ck_assert_str_eq(entry_for(rt, 64, 4096, 11008),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x128_splitk");
    ck_assert_str_eq(entry_for(rt, 17, 4096, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x128_splitk");
    ck_assert_str_eq(entry_for(rt, 17, 8, 8), "gemm_f16_f16_f16_nn_none_sm90a_128x128");
    /* To 16 rows the Hopper skinny kernel (its splits: see
     * gemm_dispatch_takes_the_hopper_skinny_path). */
    ck_assert_str_eq(entry_for(rt, 16, 4096, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_skinny_k3");
    ck_assert_str_eq(entry_for(rt, 16, 11008, 4096), "gemm_f16_f16_f16_nn_none_sm90a_skinny");
    ck_assert_str_eq(entry_for(rt, 8, 4096, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_skinny_k3");
    /* Forced tile and persistence (read at open). */
    setenv("TJ_GEMM_PERSISTENT", "0", 1);
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096), "gemm_f16_f16_f16_nn_none_sm90a_128x256");
    setenv("TJ_GEMM_PERSISTENT", "1", 1);
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_str_eq(entry_for(rt, 128, 11008, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x128_persistent");
    setenv("TJ_GEMM_SM90A_TILE", "64", 1);
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096), "gemm_f16_f16_f16_nn_none_sm90a_128x64");
    ck_assert_str_eq(entry_for(rt, 128, 4096, 4096), "gemm_f16_f16_f16_nn_none_sm90a_128x64");
    setenv("TJ_GEMM_SM90A_TILE", "64k2", 1);
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x64_cluster_k2");
    /* A forced split still splits through the workspace. */
    setenv("TJ_GEMM_SPLITK", "4", 1);
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_str_eq(entry_for(rt, 128, 4096, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x128_splitk");
    unsetenv("TJ_GEMM_SPLITK");
    setenv("TJ_GEMM_SM90A_TILE", "96", 1);
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_str_eq(entry_for(rt, 128, 11008, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x128_persistent");
    unsetenv("TJ_GEMM_SM90A_TILE");
    unsetenv("TJ_GEMM_PERSISTENT");
    /* Multicast pairs take the persistent 128 x 256 tile's calls, and
     * only those. */
    setenv("TJ_GEMM_MULTICAST", "1", 1);
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x256_mc2");
    ck_assert_str_eq(entry_for(rt, 128, 11008, 4096), "gemm_f16_f16_f16_nn_none_sm90a_128x128");
    ck_assert_str_eq(entry_for(rt, 1024, 1024, 1024), "gemm_f16_f16_f16_nn_none_sm90a_128x64");
    ck_assert_str_eq(entry_for(rt, 2048, 2048, 2048),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x256_mc2");
    setenv("TJ_GEMM_MULTICAST", "0", 1);
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x256_persistent");
    /* A forced tile is that tile's own entry, unpaired. */
    unsetenv("TJ_GEMM_MULTICAST");
    setenv("TJ_GEMM_SM90A_TILE", "256", 1);
    setenv("TJ_GEMM_PERSISTENT", "1", 1);
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x256_persistent");
    unsetenv("TJ_GEMM_PERSISTENT");
    unsetenv("TJ_GEMM_SM90A_TILE");
    unsetenv("TJ_GEMM_MULTICAST");
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    /* K and N odd: rows of A and B are not 16 bytes apart. */
    ck_assert_str_eq(entry_for(rt, 4096, 4095, 4096), "gemm_f16");
    ck_assert_str_eq(entry_for(rt, 4096, 4096, 4097), "gemm_f16");
    ck_assert_str_eq(tj_gemm_f16_kernel(rt, 256, 256, 256, FAKE(1), 260,
                                        FAKE(2), 256, FAKE(3), 256), "gemm_f16");
    ck_assert_str_eq(tj_gemm_f16_kernel(rt, 256, 256, 256, a8, 256, FAKE(2),
                                        256, FAKE(3), 256), "gemm_f16");
    ck_assert_str_eq(tj_gemm_f16_kernel(rt, 256, 256, 256, FAKE(1), 256, b8,
                                        256, FAKE(3), 256), "gemm_f16");
    /* The environment is read at open, never per call. */
    setenv("TJ_GEMM_SM90A", "0", 1);
    ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x256_mc2");
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096), "gemm_f16");
    ck_assert_str_eq(entry_for(rt, 16, 4096, 4096), "gemm_skinny_f16_tc_n32");
    setenv("TJ_GEMM_SM90A", "1", 1);
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x256_mc2");
    unsetenv("TJ_GEMM_SM90A");
    tj_runtime_close(rt);
  }
  tj_runtime *rt = test_knobs_from_env(open_compile_only(NULL, 0)); /* sm_90 on NVIDIA */
  if (!TJ_PLATFORM_IS_NVIDIA) {
    ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096), "gemm_f16");
    ck_assert_str_eq(entry_for(rt, 8, 4096, 4096), "gemm_skinny_f16_m8");
  }
  ck_assert_ptr_null(entry_for(rt, 0, 4096, 4096));
  ck_assert_str_eq(tj_errmsg(rt), "tj_gemm_f16_kernel: M=0 must be at least 1");
  tj_runtime_close(rt);
  if (TJ_PLATFORM_IS_NVIDIA) {
    rt = test_knobs_from_env(open_for_arch("sm_80", NULL));
    ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096), "gemm_f16");
    tj_runtime_close(rt);
  }
}
END_TEST

/* tj_gemm_f16_split on (M, N, K), dense, as entry_for. */
static int split_for(tj_runtime *rt, int M, int N, int K)
{
  return tj_gemm_f16_split(rt, M, N, K, FAKE(1), K, FAKE(2), N, FAKE(3), N);
}

/* Split-K only where the 128 x 128 tiles leave SMs of an H200 idle and K
 * gives each part 16 k-tiles or more, and then only for few rows (M <= 64)
 * or where each part keeps 32 k-tiles. */
START_TEST(gemm_split_k_only_where_tiles_are_too_few)
{
  ck_assert_int_eq(tj__gemm_sm90a_split(32, 64, 132), 4);
  ck_assert_int_eq(tj__gemm_sm90a_split(32, 172, 132), 4);
  ck_assert_int_eq(tj__gemm_sm90a_split(86, 64, 132), 1);
  ck_assert_int_eq(tj__gemm_sm90a_split(64, 16, 132), 1);
  ck_assert_int_eq(tj__gemm_sm90a_split(64, 32, 132), 2);
  ck_assert_int_eq(tj__gemm_sm90a_split(132, 4096, 132), 1);
  ck_assert_int_eq(tj__gemm_sm90a_split(1, 100000, 132), 16);
  ck_assert_int_eq(tj__gemm_sm90a_split(1, 31, 132), 1);
  if (!TJ_PLATFORM_IS_NVIDIA)
    return;
  tj_runtime *rt = test_knobs_from_env(open_for_arch("sm_90", NULL));
  ck_assert_int_eq(split_for(rt, 128, 4096, 4096), 1);
  ck_assert_int_eq(split_for(rt, 64, 4096, 4096), 4);
  ck_assert_int_eq(split_for(rt, 128, 4096, 11008), 1); /* cluster_k2 */
  ck_assert_int_eq(split_for(rt, 64, 4096, 11008), 4);
  ck_assert_int_eq(split_for(rt, 128, 512, 11008), 10);
  ck_assert_int_eq(split_for(rt, 130, 1000, 2048), 2);
  ck_assert_int_eq(split_for(rt, 17, 4096, 4096), 4);
  ck_assert_int_eq(split_for(rt, 128, 11008, 4096), 1);
  ck_assert_int_eq(split_for(rt, 1024, 1024, 1024), 1);
  ck_assert_int_eq(split_for(rt, 4096, 4096, 4096), 1);
  /* (the Hopper skinny kernel's split: its cluster's blocks) */
  ck_assert_int_eq(split_for(rt, 4, 4096, 4096), 3);
  ck_assert_int_eq(split_for(rt, 128, 4095, 4096), 1); /* gemm_f16 */
  ck_assert_int_eq(split_for(rt, 0, 4096, 4096), 0);
  ck_assert_str_eq(tj_errmsg(rt), "tj_gemm_f16_split: M=0 must be at least 1");
  /* Forced: empty K-ranges stay (K < split * 64), a split that leaves
   * one empties none, 1 turns it off, nonsense is ignored. */
  setenv("TJ_GEMM_SPLITK", "3", 1); /* read at open: not yet */
  ck_assert_int_eq(split_for(rt, 17, 8, 8), 1);
  rt = test_reopen_knobs(rt, open_for_arch("sm_90", NULL));
  ck_assert_int_eq(split_for(rt, 17, 8, 8), 3);
  ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096),
                   "gemm_f16_f16_f16_nn_none_sm90a_128x128_splitk");
  setenv("TJ_GEMM_SPLITK", "16", 1);
  rt = test_reopen_knobs(rt, open_for_arch("sm_90", NULL));
  ck_assert_int_eq(split_for(rt, 200, 200, 17 * 64), 9);
  setenv("TJ_GEMM_SPLITK", "1", 1);
  rt = test_reopen_knobs(rt, open_for_arch("sm_90", NULL));
  ck_assert_int_eq(split_for(rt, 17, 4096, 4096), 1);
  ck_assert_str_eq(entry_for(rt, 17, 4096, 4096), "gemm_f16_f16_f16_nn_none_sm90a_128x128");
  setenv("TJ_GEMM_SPLITK", "65", 1);
  rt = test_reopen_knobs(rt, open_for_arch("sm_90", NULL));
  ck_assert_int_eq(split_for(rt, 17, 4096, 4096), 4);
  setenv("TJ_GEMM_SPLITK", "2x", 1);
  rt = test_reopen_knobs(rt, open_for_arch("sm_90", NULL));
  ck_assert_int_eq(split_for(rt, 17, 4096, 4096), 4);
  unsetenv("TJ_GEMM_SPLITK");
  tj_runtime_close(rt);
}
END_TEST

/* The skinny tensor-core path on NVIDIA sm_80 and later, whatever the
 * alignment: 64-column strips from 1 to 16 rows once they fill an H200's
 * 132 SMs; else 32-column strips from 2 to 8 rows, and from 9 where the
 * Hopper kernel cannot run; split-K only where the strips are fewer than
 * half the SMs and K has 512 rows a part; TJ_GEMM_SKINNY_TC=0 (at open)
 * gives the old paths back (the FMA kernel to M = 8, then the tiled
 * ones), =1 takes the tensor-core path for every M to 16, and
 * TJ_GEMM_SPLITK forces a split within what K allows.  AMD and older
 * NVIDIA keep the FMA kernel.  On sm_90 all of this is with the Hopper
 * skinny kernel turned off (TJ_GEMM_SKINNY_SM90A=0, read at open), as
 * where TMA cannot read A or B. */
START_TEST(gemm_dispatch_takes_the_skinny_tc_path)
{
  setenv("TJ_GEMM_SKINNY_SM90A", "0", 1);
  ck_assert_int_eq(tj__gemm_skinny_split(128, 4096, 132), 1);
  ck_assert_int_eq(tj__gemm_skinny_split(66, 4096, 132), 1);
  ck_assert_int_eq(tj__gemm_skinny_split(65, 4096, 132), 3);
  ck_assert_int_eq(tj__gemm_skinny_split(32, 4096, 132), 5);
  ck_assert_int_eq(tj__gemm_skinny_split(32, 1023, 132), 1);
  ck_assert_int_eq(tj__gemm_skinny_split(1, 1024, 132), 2);
  ck_assert_int_eq(tj__gemm_skinny_split(1, 1 << 20, 132), 16);
  ck_assert_int_eq(tj__gemm_skinny_split(0, 4096, 132), 1);
  const uint16_t *odd = (const uint16_t *)((uintptr_t)FAKE(1) + 2);
  if (!TJ_PLATFORM_IS_NVIDIA) {
    tj_runtime *rt = test_knobs_from_env(open_compile_only(NULL, 0));
    ck_assert_str_eq(entry_for(rt, 1, 4096, 4096), "gemm_skinny_f16_m1");
    ck_assert_str_eq(entry_for(rt, 4, 4096, 4096), "gemm_skinny_f16_m4");
    ck_assert_str_eq(entry_for(rt, 16, 4096, 4096), "gemm_f16");
    ck_assert_int_eq(split_for(rt, 4, 1024, 4096), 1);
    tj_runtime_close(rt);
    return;
  }
  const char *archs[] = {"sm_80", "sm_89", "sm_90", "sm_90a"};
  for (size_t i = 0; i < 4; i++) {
    tj_runtime *rt = test_knobs_from_env(open_for_arch(archs[i], NULL));
    int hopper = strncmp(archs[i], "sm_90", 5) == 0;
    /* 32-column strips from 2 to 8 rows (and from 9 where the Hopper
     * kernel cannot run); 1 row: the FMA kernel; 64-column strips that
     * fill the SMs at every row count. */
    for (int M = 1; M <= 16; M++) {
      const char *narrow = M == 1 ? "gemm_skinny_f16_m1"
                           : M > 8 && hopper ? "gemm_f16_f16_f16_nn_none_sm90a_128x128_splitk"
                                             : "gemm_skinny_f16_tc_n32";
      ck_assert_str_eq(entry_for(rt, M, 4096, 4096), narrow);
      ck_assert_str_eq(entry_for(rt, M, 4096, 11008), narrow);
      if (M > 1 && M <= 8)
        ck_assert_int_eq(split_for(rt, M, 4096, 4096), 1);
      ck_assert_str_eq(entry_for(rt, M, 11008, 4096), "gemm_skinny_f16_tc_n64");
    }
    ck_assert_str_eq(entry_for(rt, 1, 8384, 64), "gemm_skinny_f16_m1");
    ck_assert_str_eq(entry_for(rt, 2, 8384, 64), "gemm_skinny_f16_tc_n32");
    ck_assert_str_eq(entry_for(rt, 1, 8385, 64), "gemm_skinny_f16_tc_n64");
    /* Not 16-byte aligned: no Hopper kernel, so 9 rows stay here. */
    ck_assert_str_eq(tj_gemm_f16_kernel(rt, 9, 4096, 4096, odd, 4096,
                                        odd + 4096, 4096, FAKE(3), 4096),
                     "gemm_skinny_f16_tc_n32");
    /* 2-byte aligned operands, odd leading dimensions: still this path. */
    ck_assert_str_eq(tj_gemm_f16_kernel(rt, 5, 33, 7, odd, 9, odd + 4096, 35,
                                        FAKE(3), 37), "gemm_skinny_f16_tc_n32");
    /* 32 strips of 32 columns: 5 parts of 832 rows (13 stages). */
    ck_assert_int_eq(split_for(rt, 4, 1024, 4096), 5);
    ck_assert_int_eq(split_for(rt, 8, 2048, 11008), 3);
    ck_assert_int_eq(split_for(rt, 2, 1, 1), 1);
    ck_assert_int_eq(split_for(rt, 2, 64, 1023), 1);
    ck_assert_int_eq(split_for(rt, 2, 64, 1024), 2);
    ck_assert_str_eq(entry_for(rt, 17, 4096, 4096),
                     hopper ? "gemm_f16_f16_f16_nn_none_sm90a_128x128_splitk" : "gemm_f16");
    /* Forced: within what K allows (whole 64-row stages, none empty);
     * the environment is read at open. */
    setenv("TJ_GEMM_SPLITK", "4", 1);
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_int_eq(split_for(rt, 4, 4096, 4096), 4);
    ck_assert_int_eq(split_for(rt, 4, 4096, 200), 4);
    ck_assert_int_eq(split_for(rt, 4, 4096, 100), 2);
    ck_assert_int_eq(split_for(rt, 4, 4096, 64), 1);
    setenv("TJ_GEMM_SPLITK", "1", 1);
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_int_eq(split_for(rt, 4, 1024, 4096), 1);
    unsetenv("TJ_GEMM_SPLITK");
    setenv("TJ_GEMM_SKINNY_TC", "0", 1);
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_str_eq(entry_for(rt, 1, 4096, 4096), "gemm_skinny_f16_m1");
    ck_assert_str_eq(entry_for(rt, 3, 4096, 4096), "gemm_skinny_f16_m4");
    ck_assert_str_eq(entry_for(rt, 8, 4096, 4096), "gemm_skinny_f16_m8");
    ck_assert_str_eq(entry_for(rt, 16, 4096, 4096),
                     hopper ? "gemm_f16_f16_f16_nn_none_sm90a_128x128_splitk" : "gemm_f16");
    ck_assert_int_eq(split_for(rt, 4, 1024, 4096), 1);
    setenv("TJ_GEMM_SKINNY_TC", "1", 1);
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_str_eq(entry_for(rt, 8, 4096, 4096), "gemm_skinny_f16_tc_n32");
    ck_assert_str_eq(entry_for(rt, 1, 4096, 4096), "gemm_skinny_f16_tc_n32");
    ck_assert_str_eq(entry_for(rt, 16, 4096, 4096), "gemm_skinny_f16_tc_n32");
    unsetenv("TJ_GEMM_SKINNY_TC");
    tj_runtime_close(rt);
  }
  tj_runtime *rt = test_knobs_from_env(open_for_arch("sm_75", NULL));
  ck_assert_str_eq(entry_for(rt, 4, 4096, 4096), "gemm_skinny_f16_m4");
  ck_assert_str_eq(entry_for(rt, 16, 4096, 4096), "gemm_f16");
  tj_runtime_close(rt);
  unsetenv("TJ_GEMM_SKINNY_SM90A");
}
END_TEST

/* The Hopper skinny kernel (gemm_sm90a.hip kind 5) takes every M <= 16
 * on sm_90 where TMA can read A and B, in strips of 128 or 256 columns
 * with K split across a cluster (tj__gemm_sm90a_skinny_split: at most a
 * block an SM, the fewest K-ranges that keep 56 KiB an SM in flight, the
 * narrower strips first; each block keeps 4 k-tiles); TJ_GEMM_SPLITK forces
 * the largest compiled split up to it, TJ_GEMM_SM90A_TILE the width;
 * TJ_GEMM_SKINNY_SM90A=0 and TJ_GEMM_SM90A=0 turn it off.  Not on other
 * archs, nor for operands TMA refuses. */
static void expect_skinny_split(int N, int ktiles, int sms, int split, int bn)
{
  int got_bn = 0;
  ck_assert_int_eq(tj__gemm_sm90a_skinny_split(N, ktiles, sms, &got_bn), split);
  ck_assert_int_eq(got_bn, bn);
}

START_TEST(gemm_dispatch_takes_the_hopper_skinny_path)
{
  /* 4096 columns: 96 blocks of 128 keep 8.8 MB in flight (132 * 56 KiB
   * = 7.6 MB), 64 of 128 5.9 MB, 32 of 256 5.6 MB; 11008: 86 of 128
   * unsplit 7.9 MB; 8192: 128 of 128 in 2 K-ranges 11.8 MB; 14336: 112
   * of 128 unsplit 10.3 MB (56 of 256 would do too: the narrower
   * first).  On 114 SMs (6.5 MB) the same. */
  expect_skinny_split(4096, 64, 132, 3, 128);
  expect_skinny_split(4096, 172, 132, 3, 128);
  expect_skinny_split(11008, 64, 132, 1, 128);
  expect_skinny_split(8192, 64, 132, 2, 128);
  expect_skinny_split(14336, 64, 132, 1, 128);
  expect_skinny_split(4096, 64, 114, 3, 128);
  expect_skinny_split(11008, 64, 114, 1, 128);
  /* Nothing covers the latency: the most in flight; K too short for
   * more K-ranges (4 k-tiles a block); more strips than SMs. */
  expect_skinny_split(128, 64, 132, 8, 128);
  expect_skinny_split(128, 31, 132, 4, 256);
  expect_skinny_split(8, 7, 132, 1, 256);
  expect_skinny_split(40000, 64, 132, 1, 128);
  if (!TJ_PLATFORM_IS_NVIDIA)
    return;
  const uint16_t *odd = (const uint16_t *)((uintptr_t)FAKE(1) + 2);
  const char *archs[] = {"sm_90", "sm_90a"};
  for (size_t i = 0; i < 2; i++) {
    tj_runtime *rt = test_knobs_from_env(open_for_arch(archs[i], NULL));
    for (int M = 1; M <= 16; M++) {
      ck_assert_str_eq(entry_for(rt, M, 4096, 4096),
                       "gemm_f16_f16_f16_nn_none_sm90a_skinny_k3");
      ck_assert_str_eq(entry_for(rt, M, 4096, 11008),
                       "gemm_f16_f16_f16_nn_none_sm90a_skinny_k3");
      ck_assert_str_eq(entry_for(rt, M, 11008, 4096), "gemm_f16_f16_f16_nn_none_sm90a_skinny");
    }
    ck_assert_int_eq(split_for(rt, 1, 4096, 4096), 3);
    ck_assert_uint_eq(grid_for(rt, 1, 4096, 4096).x, 96);
    ck_assert_uint_eq(grid_for(rt, 16, 11008, 4096).x, 86);
    ck_assert_str_eq(entry_for(rt, 16, 64, 64), "gemm_f16_f16_f16_nn_none_sm90a_skinny256");
    ck_assert_str_eq(entry_for(rt, 1, 128, 4096), "gemm_f16_f16_f16_nn_none_sm90a_skinny_k8");
    ck_assert_str_eq(entry_for(rt, 3, 8, 8), "gemm_f16_f16_f16_nn_none_sm90a_skinny256");
    ck_assert_str_eq(entry_for(rt, 17, 4096, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x128_splitk");
    /* Operands TMA cannot read: the other skinny kernels. */
    ck_assert_str_eq(tj_gemm_f16_kernel(rt, 1, 4096, 4096, odd, 4096,
                                        odd + 4096, 4096, FAKE(3), 4096),
                     "gemm_skinny_f16_m1");
    ck_assert_str_eq(entry_for(rt, 4, 4096, 4095), "gemm_skinny_f16_tc_n32");
    /* Forced splits (read at open). */
    const char *forced[][3] = {{"1", NULL, "gemm_f16_f16_f16_nn_none_sm90a_skinny"},
                               {"2", NULL, "gemm_f16_f16_f16_nn_none_sm90a_skinny_k2"},
                               {"5", NULL, "gemm_f16_f16_f16_nn_none_sm90a_skinny_k4"},
                               {"64", NULL, "gemm_f16_f16_f16_nn_none_sm90a_skinny_k8"},
                               {"5", "256", "gemm_f16_f16_f16_nn_none_sm90a_skinny256_k4"},
                               {"64", "256", "gemm_f16_f16_f16_nn_none_sm90a_skinny256_k4"},
                               {NULL, "256", "gemm_f16_f16_f16_nn_none_sm90a_skinny256_k3"},
                               {"2", "128", "gemm_f16_f16_f16_nn_none_sm90a_skinny_k2"},
                               {"1", "64", "gemm_f16_f16_f16_nn_none_sm90a_skinny"}};
    for (size_t f = 0; f < sizeof forced / sizeof forced[0]; f++) {
      if (forced[f][0])
        setenv("TJ_GEMM_SPLITK", forced[f][0], 1);
      if (forced[f][1])
        setenv("TJ_GEMM_SM90A_TILE", forced[f][1], 1);
      rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
      ck_assert_str_eq(entry_for(rt, 2, 4096, 4096), forced[f][2]);
      unsetenv("TJ_GEMM_SPLITK");
      unsetenv("TJ_GEMM_SM90A_TILE");
    }
    setenv("TJ_GEMM_SKINNY_SM90A", "0", 1);
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_str_eq(entry_for(rt, 1, 4096, 4096), "gemm_skinny_f16_m1");
    setenv("TJ_GEMM_SKINNY_SM90A", "1", 1);
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_str_eq(entry_for(rt, 1, 4096, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_skinny_k3");
    unsetenv("TJ_GEMM_SKINNY_SM90A");
    setenv("TJ_GEMM_SM90A", "0", 1);
    rt = test_reopen_knobs(rt, open_for_arch(archs[i], NULL));
    ck_assert_str_eq(entry_for(rt, 1, 4096, 4096), "gemm_skinny_f16_m1");
    unsetenv("TJ_GEMM_SM90A");
    tj_runtime_close(rt);
  }
  tj_runtime *rt = test_knobs_from_env(open_for_arch("sm_80", NULL));
  ck_assert_str_eq(entry_for(rt, 1, 4096, 4096), "gemm_skinny_f16_m1");
  tj_runtime_close(rt);
}
END_TEST

/* The plans fill the device's SMs, not an H200's: a compile-only runtime
 * plans for the H200's 132 (the answers above), and one that says its
 * device has 114 (an H100 PCIe; a runtime on a device takes the count
 * from it) reaches every threshold with fewer tiles. */
START_TEST(gemm_plans_fill_the_devices_sms)
{
  if (!TJ_PLATFORM_IS_NVIDIA)
    return;
  /* The skinny calls below are the tensor-core path's (read at open). */
  setenv("TJ_GEMM_SKINNY_SM90A", "0", 1);
  tj_runtime *rt = test_knobs_from_env(open_for_arch("sm_90", NULL));
  unsetenv("TJ_GEMM_SKINNY_SM90A");
  ck_assert_int_eq(rt->sms, 132);
  for (int sms = 132; sms >= 114; sms -= 18) {
    int h200 = sms == 132;
    rt->sms = sms;
    /* Persistent: one block per SM (in pairs). */
    ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x256_mc2");
    ck_assert_uint_eq(grid_for(rt, 4096, 4096, 4096).x, (unsigned)sms);
    /* 132 tiles of 128 x 256: paired on 114 SMs, not on 132. */
    ck_assert_str_eq(entry_for(rt, 1536, 2816, 64),
                     h200 ? "gemm_f16_f16_f16_nn_none_sm90a_128x256_persistent"
                          : "gemm_f16_f16_f16_nn_none_sm90a_128x256_mc2");
    /* 121 tiles of 128 x 128: a wave on 114 SMs, not on 132. */
    ck_assert_str_eq(entry_for(rt, 1408, 1408, 4096),
                     h200 ? "gemm_f16_f16_f16_nn_none_sm90a_128x128"
                          : "gemm_f16_f16_f16_nn_none_sm90a_128x256_persistent");
    /* Split-K: 32 tiles make 132 / 32 = 4 parts, 114 / 32 = 3. */
    ck_assert_int_eq(split_for(rt, 64, 4096, 4096), h200 ? 4 : 3);
    ck_assert_uint_eq(grid_for(rt, 64, 4096, 4096).z, h200 ? 4u : 3u);
    /* The cluster of two: 128 x 64 tiles filling a quarter to a half of
     * the SMs (64 tiles: 132's, not 114's; 30 tiles: 114's, not 132's). */
    ck_assert_str_eq(entry_for(rt, 128, 4096, 4096),
                     h200 ? "gemm_f16_f16_f16_nn_none_sm90a_128x64_cluster_k2"
                          : "gemm_f16_f16_f16_nn_none_sm90a_128x64");
    ck_assert_str_eq(entry_for(rt, 128, 1920, 4096),
                     h200 ? "gemm_f16_f16_f16_nn_none_sm90a_128x128_splitk"
                          : "gemm_f16_f16_f16_nn_none_sm90a_128x64_cluster_k2");
    ck_assert_int_eq(split_for(rt, 128, 1920, 4096), h200 ? 4 : 1);
    /* The skinny tensor-core path: 125 strips of 64 columns fill 114 SMs,
     * not 132; 32 strips of 32 split K 5 ways on 132, 4 on 114; 57 strips
     * are half of 114 (no split), and split 3 ways on 132. */
    ck_assert_str_eq(entry_for(rt, 4, 8000, 4096),
                     h200 ? "gemm_skinny_f16_tc_n32"
                          : "gemm_skinny_f16_tc_n64");
    ck_assert_str_eq(entry_for(rt, 1, 8000, 4096),
                     h200 ? "gemm_skinny_f16_m1" : "gemm_skinny_f16_tc_n64");
    ck_assert_int_eq(split_for(rt, 4, 1024, 4096), h200 ? 5 : 4);
    ck_assert_uint_eq(grid_for(rt, 4, 1024, 4096).y, h200 ? 5u : 4u);
    ck_assert_int_eq(split_for(rt, 4, 57 * 32, 4096), h200 ? 3 : 1);
  }
  tj_dim3 refused = grid_for(rt, 0, 4096, 4096);
  ck_assert_uint_eq(refused.x, 0);
  ck_assert_str_eq(tj_errmsg(rt), "tj__gemm_f16_grid: M=0 must be at least 1");
  tj_runtime_close(rt);
  /* The heuristic the tuner times first follows the same count. */
  ck_assert_str_eq(heuristic_name(132, 128, 4096, 4096),
                   "sm90a_128x64_cluster_k2_tmastore");
  ck_assert_str_eq(heuristic_name(114, 128, 4096, 4096),
                   "sm90a_128x64_tmastore");
  ck_assert_str_eq(heuristic_name(114, 64, 4096, 4096),
                   "sm90a_128x128_split3");
}
END_TEST

#if defined(TJ_PLATFORM_NVIDIA)
/* A driver as dlsym would see it, lacking the names in ctx (a
 * NULL-terminated list); the others resolve to a placeholder never
 * called. */
static void *driver_lacking(void *ctx, const char *name)
{
  static char placeholder;
  for (const char *const *n = ctx; *n; n++)
    if (strcmp(*n, name) == 0)
      return NULL;
  return &placeholder;
}
#endif

/* A driver without the Hopper-only entries (and cuLaunchKernelEx) still
 * loads (the GPU is not lost), with them NULL; one without a required
 * entry does not. */
START_TEST(driver_table_takes_hopper_entries_as_optional)
{
#if defined(TJ_PLATFORM_NVIDIA)
  tj__cuda_api api;
  const char *none[] = {NULL};
  memset(&api, 0, sizeof api);
  ck_assert_int_eq(tj__cuda_fill(&api, driver_lacking, none), 1);
  ck_assert_ptr_nonnull(api.cuTensorMapEncodeTiled);
  ck_assert_ptr_nonnull(api.cuMemAllocFromPoolAsync);
  const char *old[] = {"cuTensorMapEncodeTiled", "cuMemPoolCreate",
                       "cuMemAllocFromPoolAsync", "cuMemFreeAsync",
                       "cuLaunchKernelEx", NULL};
  ck_assert_int_eq(tj__cuda_fill(&api, driver_lacking, old), 1);
  ck_assert_ptr_null(api.cuTensorMapEncodeTiled);
  ck_assert_ptr_null(api.cuMemPoolCreate);
  ck_assert_ptr_null(api.cuMemAllocFromPoolAsync);
  ck_assert_ptr_null(api.cuMemFreeAsync);
  ck_assert_ptr_null(api.cuLaunchKernelEx); /* an early launch goes plain */
  ck_assert_ptr_nonnull(api.cuMemPoolDestroy);
  ck_assert_ptr_nonnull(api.cuLaunchKernel);
  const char *broken[] = {"cuLaunchKernel", NULL};
  ck_assert_int_eq(tj__cuda_fill(&api, driver_lacking, broken), 0);
#endif
  /* Without a driver: no tensor maps and no stream-ordered memory, so the
   * Hopper path would not be taken with a device and a split call would
   * run unsplit.  (A GPU machine has the driver; its suites cover that.) */
  if (test_gpu_present())
    return;
  void *p = &p;
  tj__device dev = {0, NULL, NULL};
  ck_assert_int_eq(tj__hopper_driver(), 0);
  ck_assert_int_eq(tj__alloc_async(&dev, &p, 64, NULL), TJ_EDEVICE);
  ck_assert_ptr_null(p);
}
END_TEST

typedef struct arch_rows {
  int sm90a, other;
} arch_rows;

static int count_sm90a_rows(const tj_cache_entry *e, void *ctx)
{
  arch_rows *n = ctx;
  if (strstr(e->kernel, "_sm90a_"))
    (*(strcmp(e->arch, "sm_90a") == 0 ? &n->sm90a : &n->other))++;
  return 0;
}

/* Every configuration tj_gemm_f16 can pick on Hopper (one code object
 * of gemm_sm90a.hip for each kind and tile, each skinny strip and
 * cluster) compiles with NVRTC for sm_90a, its entry named from its
 * choices, on a runtime for sm_90a and on one for sm_90, a device's own
 * arch, where it is still compiled, keyed and stored as sm_90a code. */
START_TEST(sm90a_entries_compile_for_sm90a)
{
  if (!TJ_PLATFORM_IS_NVIDIA)
    return;
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  const char *archs[] = {"sm_90a", "sm_90"};
  tj__gemm_config c[TJ__GEMM_CONFIGS_MAX];
  size_t n = tj__gemm_configs(c);
  int entries = 0;
  for (size_t a = 0; a < 2; a++) {
    tj_runtime *rt = test_knobs_from_env(open_for_arch(archs[a], db));
    char done[TJ__GEMM_CONFIGS_MAX][TJ__GEMM_CONFIG_NAME_MAX];
    entries = 0;
    for (size_t i = 0; i < n; i++) {
      char code[TJ__GEMM_CONFIG_NAME_MAX], want[TJ__GEMM_NAME_MAX];
      int seen = 0;
      tj__gemm_config_code(c[i].kind, c[i].bn, c[i].split, code);
      for (int j = 0; j < entries; j++)
        seen |= strcmp(done[j], code) == 0;
      if (seen)
        continue;
      snprintf(done[entries++], sizeof done[0], "%s", code);
      int M = c[i].kind == GEMM_KIND_SKINNY ? 16 : 2048;
      tj__gemm_plan p = tj__gemm_plan_config(&c[i], 132, M, 2048, 2048);
      tj_gemm_desc d = tj__gemm_f16_desc(M, 2048, 2048, 1.0f, FAKE(1), 2048,
                                         FAKE(2), 2048, 0.0f, FAKE(3), 2048);
      tj_kernel *k = NULL;
      int rc = tj__gemm_hopper_prepare(rt, &d, &p, &k);
      ck_assert_msg(rc == TJ_OK, "%s for %s: %s", code, archs[a],
                    tj_errmsg(rt));
      snprintf(want, sizeof want, "gemm_f16_f16_f16_nn_none_%s", code);
      ck_assert_str_eq(k->entry, want);
    }
    tj_runtime_close(rt);
  }
  ck_assert_int_eq(entries, 17);
  tj_cache *cache = NULL;
  ck_assert_int_eq(tj_cache_open(&cache, db, 0), TJ_OK);
  arch_rows rows = {0, 0};
  ck_assert_int_eq(tj_cache_list(cache, count_sm90a_rows, &rows), TJ_OK);
  tj_cache_close(cache);
  ck_assert_int_ge(rows.sm90a, entries);
  ck_assert_int_eq(rows.other, 0);
  free(db);
  free(dir);
}
END_TEST

/* ------------------------------------------------------- tj_verify */

START_TEST(verify_checks_arguments)
{
  tj_runtime *rt = test_knobs_from_env(open_compile_only(NULL, 0));
  tj_report r;
  memset(&r, 0x5a, sizeof r);
  expect_fail(rt, tj_verify(rt, NULL, 4, 1, &r), TJ_EINVAL, "tj_verify: kernel is NULL");
  expect_fail(rt, tj_verify(rt, "add_i32", 4, 1, NULL), TJ_EINVAL, "tj_verify: report is NULL");
  expect_fail(rt, tj_verify(rt, "no_such_kernel", 4, 1, &r), TJ_ENOENT,
              "tj_verify: no embedded kernel with an oracle is named 'no_such_kernel'");
  expect_fail(rt, tj_verify(rt, "gelu_fwd_f16", 0, 1, &r), TJ_EINVAL, "tj_verify: n is 0");
  expect_fail(rt, tj_verify(rt, "gemm_f16", 8388481, 1, &r), TJ_ERANGE,
              "tj_verify: gemm_f16 n=8388481 is over 8388480 (M = N = K = n, and the grid allows 65535 blocks of 128 rows)");
  expect_fail(rt, tj_verify(rt, "add_i32", UINT64_MAX, 1, &r), TJ_ERANGE,
              "tj_verify: add_i32 with n=18446744073709551615 needs more bytes than size_t holds");
  expect_fail(rt, tj_verify(rt, "gelu_fwd_bwd_f16", UINT64_MAX / 4, 1, &r), TJ_ERANGE,
              "tj_verify: gelu_fwd_bwd_f16 with n=4611686018427387903 needs more bytes than size_t holds");
  /* The report is an OUT parameter: untouched on failure. */
  unsigned char *p = (unsigned char *)&r;
  for (size_t i = 0; i < sizeof r; i++)
    ck_assert_uint_eq(p[i], 0x5a);
  tj_runtime_close(rt);
}
END_TEST

/* Every embedded kernel has an oracle: verify gets as far as the GPU. */
START_TEST(verify_knows_every_embedded_kernel)
{
  tj_runtime *rt = test_knobs_from_env(open_compile_only(NULL, 0));
  ck_assert_uint_ge(tj_embedded_count(), 5);
  for (size_t i = 0; i < tj_embedded_count(); i++) {
    const char *name = tj_embedded_name(i);
    tj_report r;
    char want[256];
    snprintf(want, sizeof want, "no GPU: tj_verify runs %s, and this runtime "
             "is compile-only (arch %s)", name, TEST_ARCH);
    expect_fail(rt, tj_verify(rt, name, 1000, 7, &r), TJ_ENODEVICE, want);
  }
  ck_assert_uint_eq(compiles(rt), 0);
  tj_runtime_close(rt);
}
END_TEST

/* tj_verify_gemm refuses what it cannot run, with the field named,
 * before it compiles or allocates anything, and leaves the report as it
 * was. */
START_TEST(verify_gemm_checks_arguments)
{
  tj_runtime *rt = test_knobs_from_env(open_compile_only(NULL, 0));
  tj_report r;
  memset(&r, 0x5a, sizeof r);
  tj_gemm_desc ok = {0}, d;
  ok.a_type = ok.b_type = ok.c_type = TJ_DTYPE_BF16;
  ok.m = 8, ok.n = 16, ok.k = 24;
  ok.alpha = 1.0f;
  ck_assert_int_eq(tj_verify_gemm(NULL, &ok, 1, &r), TJ_EINVAL);
  expect_fail(rt, tj_verify_gemm(rt, NULL, 1, &r), TJ_EINVAL,
              "tj_verify_gemm: shape is NULL");
  expect_fail(rt, tj_verify_gemm(rt, &ok, 1, NULL), TJ_EINVAL,
              "tj_verify_gemm: report is NULL");
  d = ok, d.size = 3;
  char want[256];
  snprintf(want, sizeof want, "tj_verify_gemm: the shape's size is 3: set "
           "it to 0 or sizeof its struct (%zu)", sizeof(tj_gemm_desc));
  expect_fail(rt, tj_verify_gemm(rt, &d, 1, &r), TJ_EINVAL, want);
  d = ok, d.a_type = TJ_DTYPE_F32;
  expect_fail(rt, tj_verify_gemm(rt, &d, 1, &r), TJ_EINVAL,
              "tj_verify_gemm: a_type=3, b_type=2, c_type=2: A and B take "
              "TJ_DTYPE_F16 or TJ_DTYPE_BF16, C also TJ_DTYPE_F32");
  d = ok, d.c_type = 0;
  ck_assert_int_eq(tj_verify_gemm(rt, &d, 1, &r), TJ_EINVAL);
  d = ok, d.epilogue = 4;
  expect_fail(rt, tj_verify_gemm(rt, &d, 1, &r), TJ_EINVAL,
              "tj_verify_gemm: epilogue=4 is not a TJ_EPILOGUE_*");
  d = ok, d.k = 0;
  expect_fail(rt, tj_verify_gemm(rt, &d, 1, &r), TJ_EINVAL,
              "tj_verify_gemm: m=8, n=16, k=0: each must be at least 1");
  d = ok, d.b = FAKE(1);
  expect_fail(rt, tj_verify_gemm(rt, &d, 1, &r), TJ_EINVAL,
              "tj_verify_gemm: the shape's a, b, c and bias must be NULL "
              "(the run makes its own inputs)");
  d = ok, d.aux = FAKE(1);
  expect_fail(rt, tj_verify_gemm(rt, &d, 1, &r), TJ_EINVAL,
              "tj_verify_gemm: aux is set, and the epilogue does not take it");
  d = ok, d.epilogue = TJ_EPILOGUE_BIAS_GELU, d.bias_grad = FAKE(1);
  expect_fail(rt, tj_verify_gemm(rt, &d, 1, &r), TJ_EINVAL,
              "tj_verify_gemm: bias_grad is set, and only TJ_EPILOGUE_DGELU "
              "takes it");
  d = ok, d.trans_a = 1, d.lda = 7; /* A stored k x m: rows of 8 */
  expect_fail(rt, tj_verify_gemm(rt, &d, 1, &r), TJ_EINVAL,
              "tj_verify_gemm: lda=7, ldb=16, ldc=16, ldaux=0: each must be 0 "
              "(dense) or at least its stored row");
  d = ok, d.m = d.k = INT64_MAX / 2;
  expect_fail(rt, tj_verify_gemm(rt, &d, 1, &r), TJ_ERANGE,
              "tj_verify_gemm: A needs more bytes than size_t holds");
  d = ok, d.epilogue = TJ_EPILOGUE_DGELU, d.bias_grad = FAKE(1);
  snprintf(want, sizeof want, "no GPU: tj_verify_gemm runs tj_gemm, and this "
           "runtime is compile-only (arch %s)", TEST_ARCH);
  expect_fail(rt, tj_verify_gemm(rt, &d, 1, &r), TJ_ENODEVICE, want);
  unsigned char *p = (unsigned char *)&r;
  for (size_t i = 0; i < sizeof r; i++)
    ck_assert_uint_eq(p[i], 0x5a);
  ck_assert_uint_eq(compiles(rt), 0);
  tj_runtime_close(rt);
}
END_TEST

/* tj_verify_grouped_gemm checks its own fields and the routing (host
 * offsets) before anything else, as tj_verify_gemm does. */
START_TEST(verify_grouped_gemm_checks_arguments)
{
  tj_runtime *rt = test_knobs_from_env(open_compile_only(NULL, 0));
  tj_report r;
  memset(&r, 0x5a, sizeof r);
  int32_t offs[4] = {3, 3, 7, 10}, back[4] = {3, 2, 7, 10}, short_[4] = {1, 2, 3, 9};
  tj_grouped_gemm_desc ok = {0}, d;
  ok.a_type = ok.b_type = ok.c_type = TJ_DTYPE_F16;
  ok.grouped = TJ_GROUPED_M, ok.groups = 4, ok.offs = offs;
  ok.m = 10, ok.n = 16, ok.k = 24;
  ok.alpha = 1.0f;
  ck_assert_int_eq(tj_verify_grouped_gemm(NULL, &ok, 1, &r), TJ_EINVAL);
  expect_fail(rt, tj_verify_grouped_gemm(rt, NULL, 1, &r), TJ_EINVAL,
              "tj_verify_grouped_gemm: shape is NULL");
  d = ok, d.grouped = 3;
  expect_fail(rt, tj_verify_grouped_gemm(rt, &d, 1, &r), TJ_EINVAL,
              "tj_verify_grouped_gemm: grouped=3: set TJ_GROUPED_M or "
              "TJ_GROUPED_K");
  d = ok, d.groups = 0;
  expect_fail(rt, tj_verify_grouped_gemm(rt, &d, 1, &r), TJ_EINVAL,
              "tj_verify_grouped_gemm: groups=0 must be 1 to 65535");
  d = ok, d.offs = NULL;
  expect_fail(rt, tj_verify_grouped_gemm(rt, &d, 1, &r), TJ_EINVAL,
              "tj_verify_grouped_gemm: offs is NULL (here: the host offsets "
              "to run)");
  d = ok, d.offs = back;
  expect_fail(rt, tj_verify_grouped_gemm(rt, &d, 1, &r), TJ_EINVAL,
              "tj_verify_grouped_gemm: offs[1]=2 is below the offset before "
              "it or past 10");
  d = ok, d.offs = short_;
  expect_fail(rt, tj_verify_grouped_gemm(rt, &d, 1, &r), TJ_EINVAL,
              "tj_verify_grouped_gemm: the last offset is 9, not m=10: every "
              "row must be in a group");
  d = ok, d.grouped = TJ_GROUPED_K, d.epilogue = TJ_EPILOGUE_BIAS;
  expect_fail(rt, tj_verify_grouped_gemm(rt, &d, 1, &r), TJ_EINVAL,
              "tj_verify_grouped_gemm: a TJ_GROUPED_K call takes "
              "TJ_EPILOGUE_NONE only");
  /* K-grouped: offsets within k, the last may stop short of it. */
  d = ok, d.grouped = TJ_GROUPED_K, d.offs = short_;
  char want[256];
  snprintf(want, sizeof want, "no GPU: tj_verify_grouped_gemm runs "
           "tj_grouped_gemm, and this runtime is compile-only (arch %s)",
           TEST_ARCH);
  expect_fail(rt, tj_verify_grouped_gemm(rt, &d, 1, &r), TJ_ENODEVICE, want);
  d = ok, d.epilogue = TJ_EPILOGUE_DGELU, d.bias_grad = FAKE(1);
  expect_fail(rt, tj_verify_grouped_gemm(rt, &d, 1, &r), TJ_ENODEVICE, want);
  unsigned char *p = (unsigned char *)&r;
  for (size_t i = 0; i < sizeof r; i++)
    ck_assert_uint_eq(p[i], 0x5a);
  ck_assert_uint_eq(compiles(rt), 0);
  tj_runtime_close(rt);
}
END_TEST

/* ------------------------------------------------------- reports */

static void fill_report(tj_report *r, int gemm)
{
  memset(r, 0, sizeof *r);
  snprintf(r->kernel, sizeof r->kernel, "%s", gemm ? "gemm_f16" : "gelu_bwd_f16");
  snprintf(r->ran, sizeof r->ran, "%s",
           gemm ? "gemm_skinny_f16_tc_n32+gemm_skinny_f16_tc_reduce"
                : "gelu_bwd_f16");
  r->n = gemm ? 1024 * 1024 : 1048579;
  if (gemm)
    r->m = r->n_cols = r->k = 1024;
  r->seed = 42;
  r->compared = r->n;
  r->max_abs_error = NAN;
  r->rel_l2_error = INFINITY;
  r->max_abs_tolerance = gemm ? INFINITY : 1e-2;
  r->rel_l2_tolerance = 1e-3;
  r->within_tolerance = 0;
  r->kernel_ms = 0.0125;
  r->bytes_moved = 6291474;
  r->gb_per_s = 503.3;
  r->tflop_per_s = gemm ? 312.5 : 0;
  snprintf(r->source_fingerprint, sizeof r->source_fingerprint, "%032d", 7);
  snprintf(r->code_key, sizeof r->code_key, "%032d", 9);
  snprintf(r->compiler, sizeof r->compiler, "nvrtc 13.0");
  snprintf(r->device, sizeof r->device, "Say \"H200\" \\ | tab\there\x01");
  snprintf(r->arch, sizeof r->arch, "sm_90");
  snprintf(r->evidence, sizeof r->evidence, "line one\nline two");
  snprintf(r->non_claims, sizeof r->non_claims, "not a vendor comparison");
}

static const char *const report_keys[] = {
    "kernel", "ran", "n", "m", "n_cols", "k", "seed", "compared", "max_abs_error",
    "rel_l2_error", "max_abs_tolerance", "rel_l2_tolerance",
    "within_tolerance", "first_call_ms", "kernel_ms", "bytes_moved", "gb_per_s", "tflop_per_s",
    "source_fingerprint", "code_key", "compiler", "device", "arch",
    "evidence", "non_claims"};

static void assert_value(const char *json, const char *key, const char *want)
{
  const char *v = json_after_key(json, key);
  ck_assert_msg(v != NULL, "key %s missing:\n%s", key, json);
  ck_assert_msg(strncmp(v, want, strlen(want)) == 0, "%s: got %.40s, want %s",
                key, v, want);
}

START_TEST(report_json_is_valid_and_escaped)
{
  tj_report r;
  fill_report(&r, 0);
  char *j = tj_report_json(&r);
  ck_assert_ptr_nonnull(j);
  ck_assert_msg(json_valid_object(j), "not valid JSON:\n%s", j);
  for (size_t i = 0; i < sizeof report_keys / sizeof report_keys[0]; i++)
    ck_assert_msg(json_after_key(j, report_keys[i]), "no key %s", report_keys[i]);
  assert_value(j, "max_abs_error", "null");  /* NaN */
  assert_value(j, "rel_l2_error", "null");   /* inf */
  assert_value(j, "tflop_per_s", "null");    /* not a GEMM */
  assert_value(j, "within_tolerance", "false");
  assert_value(j, "kernel_ms", "0.0125");
  assert_value(j, "n", "1048579");
  assert_value(j, "device", "\"Say \\\"H200\\\" \\\\ | tab\\there\\u0001\"");
  assert_value(j, "evidence", "\"line one\\nline two\"");
  free(j);
  fill_report(&r, 1);
  r.max_abs_error = 0.25;
  j = tj_report_json(&r);
  ck_assert_msg(json_valid_object(j), "not valid JSON:\n%s", j);
  assert_value(j, "tflop_per_s", "312.5");
  assert_value(j, "max_abs_tolerance", "null"); /* not limited */
  assert_value(j, "max_abs_error", "0.25");
  assert_value(j, "m", "1024");
  assert_value(j, "ran", "\"gemm_skinny_f16_tc_n32+gemm_skinny_f16_tc_"
               "reduce\"");
  free(j);
}
END_TEST

/* A caller's report may hold strings without a terminator. */
/* Prose fields are bytes: invalid UTF-8 becomes U+FFFD, valid passes. */
START_TEST(report_json_replaces_invalid_utf8)
{
  tj_report r;
  fill_report(&r, 0);
  snprintf(r.evidence, sizeof r.evidence, "bad \xff\xc3( ok \xc3\xa9 "
           "surrogate \xed\xa0\x80 cut \xe2\x82");
  char *j = tj_report_json(&r);
  ck_assert_ptr_nonnull(j);
  ck_assert_msg(json_valid_object(j), "not valid JSON:\n%s", j);
  ck_assert_ptr_null(strchr(j, '\xff'));
  ck_assert_ptr_null(strstr(j, "\xed\xa0"));
  ck_assert_ptr_nonnull(strstr(j, "bad \\ufffd\\ufffd( ok \xc3\xa9 surrogate "
                               "\\ufffd\\ufffd\\ufffd cut \\ufffd\\ufffd\""));
  free(j);
}
END_TEST

START_TEST(report_fields_without_terminator_stay_bounded)
{
  tj_report r;
  fill_report(&r, 0);
  memset(r.device, 'D', sizeof r.device);
  memset(r.non_claims, '"', sizeof r.non_claims);
  char *j = tj_report_json(&r);
  ck_assert_msg(json_valid_object(j), "not valid JSON");
  const char *v = json_after_key(j, "device");
  ck_assert_uint_eq(strspn(v + 1, "D"), sizeof r.device);
  free(j);
  char *m = tj_report_markdown(&r);
  ck_assert_ptr_nonnull(m);
  free(m);
}
END_TEST

/* Numbers are written with '.', whatever the program's locale. */
START_TEST(report_numbers_ignore_the_locale)
{
  static const char *const comma_locales[] = {"de_DE.UTF-8", "de_DE.utf8",
                                              "fr_FR.UTF-8", "fr_FR.utf8"};
  const char *set = NULL;
  for (size_t i = 0; !set && i < sizeof comma_locales / sizeof comma_locales[0]; i++)
    set = setlocale(LC_NUMERIC, comma_locales[i]);
  if (!set) {
    printf("report_numbers_ignore_the_locale: no comma-decimal locale installed; "
           "checked in the C locale only\n");
  }
  tj_report r;
  fill_report(&r, 1);
  char *j = tj_report_json(&r), *m = tj_report_markdown(&r);
  setlocale(LC_NUMERIC, "C");
  ck_assert_msg(json_valid_object(j), "not valid JSON under %s:\n%s", set, j);
  assert_value(j, "kernel_ms", "0.0125");
  ck_assert_ptr_nonnull(strstr(m, "| kernel_ms | 0.0125 |"));
  free(j);
  free(m);
}
END_TEST

START_TEST(report_markdown_has_every_field)
{
  tj_report r;
  fill_report(&r, 0);
  char *m = tj_report_markdown(&r);
  ck_assert_ptr_nonnull(m);
  for (size_t i = 0; i < sizeof report_keys / sizeof report_keys[0]; i++) {
    char cell[64];
    snprintf(cell, sizeof cell, "%s", report_keys[i]);
    ck_assert_msg(strstr(m, cell), "markdown lacks %s:\n%s", cell, m);
  }
  ck_assert_ptr_nonnull(strstr(m, "## tj_verify: gelu_bwd_f16, n = 1048579"));
  ck_assert_ptr_nonnull(strstr(m, "| kernel | gelu_bwd_f16 |"));
  ck_assert_ptr_nonnull(strstr(m, "| max_abs_error | NaN |"));
  ck_assert_ptr_nonnull(strstr(m, "| rel_l2_error | inf |"));
  ck_assert_ptr_nonnull(strstr(m, "| within_tolerance | no |"));
  ck_assert_ptr_nonnull(strstr(m, "| tflop_per_s | n/a |"));
  /* A '|' in a value is escaped, a newline flattened. */
  ck_assert_ptr_nonnull(strstr(m, "\\\\ \\| tab"));
  ck_assert_ptr_nonnull(strstr(m, "line one line two"));
  free(m);
  fill_report(&r, 1);
  m = tj_report_markdown(&r);
  ck_assert_ptr_nonnull(strstr(m, "| max_abs_tolerance | none (not limited) |"));
  ck_assert_ptr_nonnull(strstr(m, "| tflop_per_s | 312.5 |"));
  free(m);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("kernels");
  TCase *args = test_case(s, "arguments", 60);
  tcase_add_test(args, null_runtime_is_einval);
  tcase_add_test(args, device_calls_name_null_arguments);
  tcase_add_test(args, device_calls_reject_n_zero_and_overflow);
  tcase_add_test(args, device_calls_reject_misaligned_pointers);
  tcase_add_test(args, device_calls_reject_partial_overlaps);
  tcase_add_test(args, valid_calls_on_compile_only_runtime_are_enodevice);
  tcase_add_test(args, host_calls_check_lengths);
  tcase_add_test(args, host_calls_check_pointers_and_n);
  tcase_add_test(args, valid_host_calls_are_enodevice_and_leave_outputs);
  tcase_add_test(args, gemm_checks_dimensions);
  tcase_add_test(args, gemm_checks_ranges_alignment_and_overlap);
  tcase_add_test(args, gemm_host_checks);
  tcase_add_test(args, block_sizes_match_the_kernel_sources);
  tcase_add_test(args, installed_contracts_match_the_kernels);
  tcase_add_test(args, gemm_dispatch_takes_the_skinny_tc_path);
  tcase_add_test(args, gemm_dispatch_takes_the_hopper_skinny_path);
  tcase_add_test(args, verify_checks_arguments);
  tcase_add_test(args, verify_knows_every_embedded_kernel);
  tcase_add_test(args, verify_gemm_checks_arguments);
  tcase_add_test(args, verify_grouped_gemm_checks_arguments);
  tcase_add_test(args, gemm_dispatch_takes_the_hopper_path_where_it_fits);
  tcase_add_test(args, gemm_split_k_only_where_tiles_are_too_few);
  tcase_add_test(args, gemm_plans_fill_the_devices_sms);
  tcase_add_test(args, driver_table_takes_hopper_entries_as_optional);
  /* Real NVRTC compiles of the Hopper kernel: 14, each of the whole file
   * (7 entries), 5 to 7 s each on two busy cores. */
  TCase *hopper = test_case(s, "hopper", 600);
  tcase_add_test(hopper, sm90a_entries_compile_for_sm90a);
  TCase *reports = test_case(s, "reports", 60);
  tcase_add_test(reports, report_json_is_valid_and_escaped);
  tcase_add_test(reports, report_fields_without_terminator_stay_bounded);
  tcase_add_test(reports, report_json_replaces_invalid_utf8);
  tcase_add_test(reports, report_numbers_ignore_the_locale);
  tcase_add_test(reports, report_markdown_has_every_field);
  return run_suite(s);
}
