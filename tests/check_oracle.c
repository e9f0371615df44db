/*
 * check_oracle.c: the CPU references and the error measures.
 *
 * The GPU suites trust these to judge kernels, so they are pinned here to
 * values worked out independently (by hand, or from the closed form in
 * another language), not to their own output.
 */
#include "testutil.h"
#include "oracle.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define H(f) tj_f32_to_f16(f)

START_TEST(test_gelu_known_points)
{
  ck_assert_double_eq(tj__gelu(0.0), 0.0);
  ck_assert_double_eq_tol(tj__gelu(1.0), 0.8411919906082768, 1e-15);
  ck_assert_double_eq_tol(tj__gelu(-1.0), -0.15880800939172324, 1e-15);
  ck_assert_double_eq_tol(tj__gelu(2.0), 1.954597694087775, 1e-15);
  ck_assert_double_eq_tol(tj__gelu(10.0), 10.0, 1e-12);
  ck_assert_double_eq_tol(tj__gelu(-10.0), 0.0, 1e-12);
}
END_TEST

START_TEST(test_gelu_grad_known_points)
{
  ck_assert_double_eq(tj__gelu_grad(0.0), 0.5);
  ck_assert_double_eq_tol(tj__gelu_grad(1.0), 1.0829640838457826, 1e-15);
  ck_assert_double_eq_tol(tj__gelu_grad(2.0), 1.0860992566236183, 1e-15);
  ck_assert_double_eq_tol(tj__gelu_grad(12.0), 1.0, 1e-12);
  ck_assert_double_eq_tol(tj__gelu_grad(-12.0), 0.0, 1e-12);
}
END_TEST

/* gelu(x) - gelu(-x) = x, so gelu'(x) + gelu'(-x) = 1; and the derivative
 * matches a central difference of the function. */
START_TEST(test_gelu_grad_consistent)
{
  for (double x = -6.0; x <= 6.0; x += 0.125) {
    ck_assert_double_eq_tol(tj__gelu(x) - tj__gelu(-x), x, 1e-14);
    ck_assert_double_eq_tol(tj__gelu_grad(x) + tj__gelu_grad(-x), 1.0, 1e-14);
    double h = 1e-5;
    double fd = (tj__gelu(x + h) - tj__gelu(x - h)) / (2 * h);
    ck_assert_double_eq_tol(tj__gelu_grad(x), fd, 1e-8);
  }
}
END_TEST

START_TEST(test_gelu_arrays)
{
  uint16_t x[3] = {H(0.0f), H(1.0f), H(-2.0f)};
  uint16_t g[3] = {H(4.0f), H(2.0f), H(-0.5f)};
  double y[3], gi[3];
  tj__oracle_gelu_fwd(x, y, 3);
  tj__oracle_gelu_bwd(g, x, gi, 3);
  for (int i = 0; i < 3; i++) {
    double xd = tj_f16_to_f32(x[i]);
    ck_assert_double_eq(y[i], tj__gelu(xd));
    ck_assert_double_eq(gi[i], tj_f16_to_f32(g[i]) * tj__gelu_grad(xd));
  }
  ck_assert_double_eq(gi[0], 2.0);
}
END_TEST

START_TEST(test_add_wraps)
{
  int32_t a[4] = {INT32_MAX, INT32_MIN, -1, 123456};
  int32_t b[4] = {1, -1, -1, -654321};
  int32_t c[4];
  tj__oracle_add_i32(a, b, c, 4);
  ck_assert_int_eq(c[0], INT32_MIN);
  ck_assert_int_eq(c[1], INT32_MAX);
  ck_assert_int_eq(c[2], -2);
  ck_assert_int_eq(c[3], -530865);
}
END_TEST

/* A (2x4), B (4x3) and C (2x3) with padded rows, to show that the leading
 * dimensions are honoured.  By hand, A*B = [12 5 1; 28 13 9]. */
static const float gemm_a[2][5] = {{1, 2, 3, 4, 99}, {5, 6, 7, 8, 99}};
static const float gemm_b[4][4] = {
    {1, 0, 2, 99}, {0, 1, 0, 99}, {1, 1, 1, 99}, {2, 0, -1, 99}};
static const float gemm_c[2][4] = {{2, 4, 6, 99}, {8, 10, 12, 99}};

static void load_half(const float *src, uint16_t *dst, size_t n)
{
  for (size_t i = 0; i < n; i++)
    dst[i] = H(src[i]);
}

START_TEST(test_gemm_by_hand)
{
  uint16_t a[10], b[16], c[8];
  double out[6];
  load_half(&gemm_a[0][0], a, 10);
  load_half(&gemm_b[0][0], b, 16);
  load_half(&gemm_c[0][0], c, 8);
  tj__oracle_gemm(2, 3, 4, 2.0, a, 5, b, 4, 0.5, c, 4, out);
  const double want[6] = {25, 12, 5, 60, 31, 24};
  for (int i = 0; i < 6; i++)
    ck_assert_double_eq(out[i], want[i]);
}
END_TEST

/* beta == 0 must not read C: NULL is accepted and NaN does not leak. */
START_TEST(test_gemm_beta_zero)
{
  uint16_t a[10], b[16], c[8];
  double out[6];
  load_half(&gemm_a[0][0], a, 10);
  load_half(&gemm_b[0][0], b, 16);
  for (int i = 0; i < 8; i++)
    c[i] = 0x7e00u;
  tj__oracle_gemm(2, 3, 4, 1.0, a, 5, b, 4, 0.0, c, 4, out);
  ck_assert_double_eq(out[0], 12);
  ck_assert_double_eq(out[5], 9);
  tj__oracle_gemm(2, 3, 4, 1.0, a, 5, b, 4, 0.0, NULL, 4, out);
  ck_assert_double_eq(out[4], 13);
  tj__oracle_gemm(2, 3, 0, 1.0, a, 5, b, 4, 0.0, NULL, 4, out);
  ck_assert_double_eq(out[3], 0);
}
END_TEST

/* Each output is its dot product taken in k order from 0.0, then alpha
 * and beta, to the bit: the oracle's loop order and table change how it
 * gets there, not the sums (odd sizes, padded rows). */
START_TEST(test_gemm_sums_in_k_order)
{
  enum { M = 37, N = 29, K = 53, LDA = 60, LDB = 33, LDC = 31 };
  static uint16_t a[M * LDA], b[K * LDB], c[M * LDC];
  static double out[M * N];
  uint32_t x = 12345;
  uint16_t *all[3] = {a, b, c};
  size_t len[3] = {M * LDA, K * LDB, M * LDC};
  for (int m = 0; m < 3; m++)
    for (size_t i = 0; i < len[m]; i++) {
      x = x * 1664525u + 1013904223u;
      all[m][i] = H((float)((double)(x >> 8) / (1 << 24) * 4.0 - 2.0));
    }
  tj__oracle_gemm(M, N, K, 0.75, a, LDA, b, LDB, -1.25, c, LDC, out);
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double sum = 0.0;
      for (int k = 0; k < K; k++)
        sum += (double)tj_f16_to_f32(a[m * LDA + k]) *
               (double)tj_f16_to_f32(b[k * LDB + n]);
      double want = 0.75 * sum + -1.25 * (double)tj_f16_to_f32(c[m * LDC + n]);
      ck_assert_double_eq(out[m * N + n], want);
    }
}
END_TEST

START_TEST(test_compare_f16)
{
  uint16_t got[4] = {H(1.0f), H(2.0f), H(3.0f), H(INFINITY)};
  const double want[4] = {1.0, 2.5, 3.0, 4.0};
  tj__error_stats s;
  tj__compare_f16(got, want, 4, &s);
  ck_assert_uint_eq(s.count, 4);
  ck_assert_double_eq(s.max_abs, 0.5);
  ck_assert_uint_eq(s.max_abs_index, 1);
  ck_assert_double_eq_tol(s.rel_l2, 0.5 / sqrt(1.0 + 6.25 + 9.0), 1e-15);
  ck_assert_uint_eq(s.nonfinite, 1);
  ck_assert_uint_eq(s.special_mismatch, 0);
  ck_assert_int_eq(tj__error_within(&s, 1.0, 1.0), 0);
  tj__compare_f16(got, want, 3, &s);
  ck_assert_int_eq(tj__error_within(&s, 0.5, 0.2), 1);
  ck_assert_int_eq(tj__error_within(&s, 0.4, 0.2), 0);
  ck_assert_int_eq(tj__error_within(&s, 0.5, 0.1), 0);
}
END_TEST

/* A reference that is inf or NaN is matched in kind, not measured. */
START_TEST(test_compare_special)
{
  uint16_t got[4] = {0x7e00u, H(1.0f), H(-INFINITY), H(INFINITY)};
  const double want[4] = {NAN, NAN, -INFINITY, -INFINITY};
  tj__error_stats s;
  tj__compare_f16(got, want, 4, &s);
  ck_assert_uint_eq(s.special_mismatch, 2);
  ck_assert_uint_eq(s.nonfinite, 0);
  ck_assert_double_eq(s.max_abs, 0.0);
  ck_assert_double_eq(s.rel_l2, 0.0);
}
END_TEST

START_TEST(test_compare_zero_reference)
{
  uint16_t zeros[2] = {0, 0x8000u}, one[2] = {0, H(1.0f)};
  const double want[2] = {0.0, 0.0};
  tj__error_stats s;
  tj__compare_f16(zeros, want, 2, &s);
  ck_assert_double_eq(s.rel_l2, 0.0);
  tj__compare_f16(one, want, 2, &s);
  ck_assert(isinf(s.rel_l2));
  ck_assert_double_eq(s.max_abs, 1.0);
}
END_TEST

START_TEST(test_compare_i32)
{
  const int32_t want[3] = {INT32_MIN, 5, -7};
  const int32_t got[3] = {INT32_MIN, 5, -4};
  tj__error_stats s;
  tj__compare_i32(got, want, 3, &s);
  ck_assert_double_eq(s.max_abs, 3.0);
  ck_assert_uint_eq(s.max_abs_index, 2);
  ck_assert_uint_eq(s.nonfinite, 0);
  tj__compare_i32(want, want, 3, &s);
  ck_assert_double_eq(s.max_abs, 0.0);
  ck_assert_double_eq(s.rel_l2, 0.0);
  ck_assert_int_eq(tj__error_within(&s, 0.0, 0.0), 1);
}
END_TEST

static Suite *oracle_suite(void)
{
  Suite *s = suite_create("oracle");
  TCase *tc = test_case(s, "reference", 60);
  tcase_add_test(tc, test_gelu_known_points);
  tcase_add_test(tc, test_gelu_grad_known_points);
  tcase_add_test(tc, test_gelu_grad_consistent);
  tcase_add_test(tc, test_gelu_arrays);
  tcase_add_test(tc, test_add_wraps);
  tcase_add_test(tc, test_gemm_by_hand);
  tcase_add_test(tc, test_gemm_beta_zero);
  tcase_add_test(tc, test_gemm_sums_in_k_order);
  TCase *cmp = test_case(s, "compare", 60);
  tcase_add_test(cmp, test_compare_f16);
  tcase_add_test(cmp, test_compare_special);
  tcase_add_test(cmp, test_compare_zero_reference);
  tcase_add_test(cmp, test_compare_i32);
  return s;
}

int main(void)
{
  return run_suite(oracle_suite());
}
