/*
 * check_half.c: tj_f32_to_f16 and tj_f16_to_f32 against the definition.
 *
 * The reference conversion below is deliberately slow and different in
 * kind from src/ops/half.c: it rounds in double with frexp/ldexp/floor instead
 * of shifting bits, so that a shared mistake is unlikely.
 */
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static float bits_to_float(uint32_t u)
{
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint32_t float_to_bits(float f)
{
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static int half_is_nan(uint16_t h)
{
  return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
}

/* Encode a value that is already exactly representable as a finite half. */
static uint16_t ref_encode(double v, uint16_t sign)
{
  if (v < ldexp(1.0, -14))
    return (uint16_t)(sign | (uint16_t)ldexp(v, 24)); /* subnormal units */
  int e;
  double m = frexp(v, &e); /* v = m * 2^e, m in [0.5, 1) */
  uint16_t exp_field = (uint16_t)(e - 1 + 15);
  uint16_t man_field = (uint16_t)((m * 2.0 - 1.0) * 1024.0);
  return (uint16_t)(sign | (exp_field << 10) | man_field);
}

/* Round |f| to the half grid around it: 11 significant bits, but never a
 * step finer than 2^-24. */
static uint16_t ref_f32_to_f16(float f)
{
  uint16_t sign = signbit(f) ? 0x8000u : 0u;
  if (isnan(f))
    return (uint16_t)(sign | 0x7e00u);
  double a = fabs((double)f);
  if (isinf(f) || a >= 65536.0)
    return (uint16_t)(sign | 0x7c00u);
  if (a == 0.0)
    return sign;
  int e;
  frexp(a, &e);
  double step = ldexp(1.0, e - 11 > -24 ? e - 11 : -24);
  double n = floor(a / step);
  double rest = a / step - n;
  if (rest > 0.5 || (rest == 0.5 && fmod(n, 2.0) == 1.0))
    n += 1.0;
  double v = n * step;
  if (v > 65504.0)
    return (uint16_t)(sign | 0x7c00u);
  return ref_encode(v, sign);
}

/* Every half goes to float and back unchanged; a NaN comes back as a
 * quiet NaN with the same payload. */
START_TEST(test_roundtrip_all_halves)
{
  for (uint32_t h = 0; h <= 0xffffu; h++) {
    float f = tj_f16_to_f32((uint16_t)h);
    uint16_t back = tj_f32_to_f16(f);
    if (half_is_nan((uint16_t)h)) {
      ck_assert_msg(isnan(f), "half %#06x did not give a float NaN", h);
      ck_assert_msg(back == (h | 0x200u), "NaN %#06x came back as %#06x", h,
                    back);
    } else {
      ck_assert_msg(back == h, "half %#06x came back as %#06x", h, back);
    }
  }
}
END_TEST

/* Decoding agrees with the value the bits mean. */
START_TEST(test_decode_values)
{
  for (uint32_t h = 0; h < 0x7c00u; h++) {
    uint32_t exp = h >> 10, man = h & 0x3ffu;
    double want = exp ? ldexp(1024.0 + man, (int)exp - 25)
                      : ldexp((double)man, -24);
    ck_assert_msg((double)tj_f16_to_f32((uint16_t)h) == want, "half %#06x", h);
    ck_assert_msg((double)tj_f16_to_f32((uint16_t)(h | 0x8000u)) == -want,
                  "half %#06x", h | 0x8000u);
  }
  ck_assert(isinf(tj_f16_to_f32(0x7c00u)) && tj_f16_to_f32(0x7c00u) > 0);
  ck_assert(isinf(tj_f16_to_f32(0xfc00u)) && tj_f16_to_f32(0xfc00u) < 0);
  ck_assert(signbit(tj_f16_to_f32(0x8000u)));
}
END_TEST

static void expect_f16(float f, uint16_t want)
{
  uint16_t got = tj_f32_to_f16(f);
  uint16_t ref = ref_f32_to_f16(f);
  ck_assert_msg(ref == want, "reference gives %#06x for %a, test wants %#06x",
                ref, (double)f, want);
  ck_assert_msg(got == want, "tj_f32_to_f16(%a) = %#06x, want %#06x",
                (double)f, got, want);
  uint16_t neg = tj_f32_to_f16(-f);
  ck_assert_msg(neg == (want ^ 0x8000u), "tj_f32_to_f16(-%a) = %#06x",
                (double)f, neg);
}

/* Exactly halfway between two halves goes to the even one, both when
 * that means rounding down and when it means rounding up. */
START_TEST(test_ties_to_even)
{
  expect_f16(1.0f + 0x1p-11f, 0x3c00u);        /* down to 1.0 */
  expect_f16(1.0f + 3 * 0x1p-11f, 0x3c02u);    /* up to 1+2^-9 */
  expect_f16(1.0f + 0x1p-11f + 0x1p-23f, 0x3c01u); /* past the tie */
  expect_f16(2048.0f + 1.0f, 0x6800u);          /* 2049 -> 2048 */
  expect_f16(2048.0f + 3.0f, 0x6802u);          /* 2051 -> 2052 */
  expect_f16(3 * 0x1p-25f, 0x0002u);            /* 1.5 units -> 2 */
  expect_f16(5 * 0x1p-25f, 0x0002u);            /* 2.5 units -> 2 */
  expect_f16(0x1p-14f - 0x1p-25f, 0x0400u);     /* tie up into normals */
}
END_TEST

START_TEST(test_subnormal_boundary)
{
  expect_f16(0x1p-24f, 0x0001u);               /* smallest subnormal */
  expect_f16(0x1p-25f, 0x0000u);               /* half of it: tie to 0 */
  expect_f16(0x1p-25f + 0x1p-40f, 0x0001u);    /* a little more */
  expect_f16(0x1p-26f, 0x0000u);
  expect_f16(1023 * 0x1p-24f, 0x03ffu);        /* largest subnormal */
  expect_f16(0x1p-14f, 0x0400u);               /* smallest normal */
  expect_f16(bits_to_float(1u), 0x0000u);      /* float subnormal */
  expect_f16(0.0f, 0x0000u);
  ck_assert_uint_eq(tj_f32_to_f16(-0.0f), 0x8000u);
}
END_TEST

START_TEST(test_overflow)
{
  expect_f16(65504.0f, 0x7bffu);
  expect_f16(65519.99f, 0x7bffu);
  expect_f16(65520.0f, 0x7c00u);
  expect_f16(65536.0f, 0x7c00u);
  expect_f16(1e30f, 0x7c00u);
  expect_f16(INFINITY, 0x7c00u);
  expect_f16(-2.5f, 0xc100u);
}
END_TEST

START_TEST(test_nan)
{
  float qnan = bits_to_float(0x7fc00000u);
  float payload = bits_to_float(0xffd5a000u); /* negative, payload fits */
  float low_only = bits_to_float(0x7f800001u); /* sNaN, payload dropped */
  ck_assert_uint_eq(tj_f32_to_f16(qnan), 0x7e00u);
  ck_assert_uint_eq(tj_f32_to_f16(payload), 0xfead);
  ck_assert_uint_eq(tj_f32_to_f16(low_only), 0x7e00u);
  ck_assert_uint_eq(float_to_bits(tj_f16_to_f32(0x7d01u)), 0x7fe02000u);
}
END_TEST

/* A sweep over float bit patterns, every sign and exponent. */
START_TEST(test_sweep_against_reference)
{
  for (uint64_t u = 0; u <= 0xffffffffu; u += 4093u) {
    float f = bits_to_float((uint32_t)u);
    if (isnan(f))
      continue;
    ck_assert_msg(tj_f32_to_f16(f) == ref_f32_to_f16(f), "%a: %#06x vs %#06x",
                  (double)f, tj_f32_to_f16(f), ref_f32_to_f16(f));
  }
}
END_TEST

/* Exhaustively, the 8193 floats around each power of two that the half
 * range touches: where the step between halves changes, and where the
 * subnormal and overflow rules take over. */
START_TEST(test_binade_edges_exhaustive)
{
  for (int e = -26; e <= 16; e++) {
    uint32_t centre = float_to_bits(ldexpf(1.0f, e));
    for (uint32_t u = centre - 4096u; u <= centre + 4096u; u++) {
      float f = bits_to_float(u);
      ck_assert_msg(tj_f32_to_f16(f) == ref_f32_to_f16(f), "%a", (double)f);
    }
  }
}
END_TEST

static Suite *half_suite(void)
{
  Suite *s = suite_create("half");
  TCase *tc = test_case(s, "convert", 60);
  tcase_add_test(tc, test_roundtrip_all_halves);
  tcase_add_test(tc, test_decode_values);
  tcase_add_test(tc, test_ties_to_even);
  tcase_add_test(tc, test_subnormal_boundary);
  tcase_add_test(tc, test_overflow);
  tcase_add_test(tc, test_nan);
  tcase_add_test(tc, test_sweep_against_reference);
  tcase_add_test(tc, test_binade_edges_exhaustive);
  return s;
}

int main(void)
{
  return run_suite(half_suite());
}
