/* check_moe.c: the MoE permutation on a CPU machine: every argument check
 * of every tj_moe_* call, with its exact message, on a compile-only
 * runtime; that a valid call there is TJ_ENODEVICE (a host call's outputs
 * left as they were); the workspace size;
 * the oracles on hand-worked routings; the block sizes the calls launch
 * against the embedded source; and the kernels compiled by the real
 * compiler for each arch of the platform, every entry in the code. */
#include "testutil.h"
#include "testelf.h"
#include "internal.h"
#include "embedded.h"
#include "oracle.h"

#include <math.h>

/* Device pointers are never dereferenced on a compile-only runtime:
 * distinct, aligned, far-apart fake addresses exercise the checks. */
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

static tj_moe_routing fake_routing(void)
{
  return (tj_moe_routing){FAKE(3), FAKE(4), FAKE(5), FAKE(6), FAKE(7)};
}

/* ------------------------------------------------------- routing */

START_TEST(workspace_size)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  size_t b = 0;
  ck_assert_int_eq(tj_moe_route_workspace(rt, 1, 1, 1, &b), TJ_OK);
  ck_assert_uint_eq(b, 1 * 2 * 4);
  ck_assert_int_eq(tj_moe_route_workspace(rt, 256, 4, 8, &b), TJ_OK);
  ck_assert_uint_eq(b, 1 * 9 * 4);
  ck_assert_int_eq(tj_moe_route_workspace(rt, 257, 4, 8, &b), TJ_OK);
  ck_assert_uint_eq(b, 2 * 9 * 4);
  ck_assert_int_eq(tj_moe_route_workspace(rt, 16384, 6, 64, &b), TJ_OK);
  ck_assert_uint_eq(b, 96 * 65 * 4);
  b = 99;
  expect_fail(rt, tj_moe_route_workspace(rt, 0, 1, 1, &b), TJ_EINVAL,
              "tj_moe_route_workspace: tokens is 0, below 1");
  expect_fail(rt, tj_moe_route_workspace(rt, 4, 17, 1, &b), TJ_EINVAL,
              "tj_moe_route_workspace: k is 17, outside [1, 16]");
  expect_fail(rt, tj_moe_route_workspace(rt, 4, 2, 1025, &b), TJ_EINVAL,
              "tj_moe_route_workspace: experts is 1025, outside [1, 1024]");
  expect_fail(rt, tj_moe_route_workspace(rt, 4, 2, 8, NULL), TJ_EINVAL,
              "tj_moe_route_workspace: bytes is NULL");
  expect_fail(rt, tj_moe_route_workspace(rt, INT32_MAX / 2 + 1, 2, 8, &b),
              TJ_ERANGE, "tj_moe_route_workspace: tokens * k = 1073741824 * 2 "
              "slots is over 2147483647, the most an int32 row index holds");
  ck_assert_uint_eq(b, 99);
  ck_assert_int_eq(tj_moe_route_workspace(NULL, 1, 1, 1, &b), TJ_EINVAL);
  tj_runtime_close(rt);
}
END_TEST

START_TEST(route_checks)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_moe_routing o = fake_routing();
  void *ws = FAKE(8);
  size_t wb = 2 * 9 * 4; /* 300 tokens x 4 slots, 8 experts */
  const int32_t *topk = FAKE(2);
  ck_assert_int_eq(tj_moe_route(NULL, NULL, topk, 300, 4, 8, &o, ws, wb),
                   TJ_EINVAL);
  expect_fail(rt, tj_moe_route(rt, NULL, topk, 300, 4, 8, NULL, ws, wb),
              TJ_EINVAL, "tj_moe_route: out is NULL");
  expect_fail(rt, tj_moe_route(rt, NULL, topk, -1, 4, 8, &o, ws, wb),
              TJ_EINVAL, "tj_moe_route: tokens is -1, below 1");
  expect_fail(rt, tj_moe_route(rt, NULL, topk, 300, 0, 8, &o, ws, wb),
              TJ_EINVAL, "tj_moe_route: k is 0, outside [1, 16]");
  expect_fail(rt, tj_moe_route(rt, NULL, topk, 300, 4, 0, &o, ws, wb),
              TJ_EINVAL, "tj_moe_route: experts is 0, outside [1, 1024]");
  expect_fail(rt, tj_moe_route(rt, NULL, NULL, 300, 4, 8, &o, ws, wb),
              TJ_EINVAL, "tj_moe_route: topk is NULL");
  expect_fail(rt, tj_moe_route(rt, NULL, topk, 300, 4, 8, &o, NULL, wb),
              TJ_EINVAL, "tj_moe_route: workspace is NULL");
  const char *names[] = {"counts", "offsets", "row_of_slot", "slot_of_row",
                         "dropped"};
  for (int i = 0; i < 5; i++) {
    tj_moe_routing b = o;
    int32_t **p[] = {&b.counts, &b.offsets, &b.row_of_slot, &b.slot_of_row,
                     &b.dropped};
    char want[128];
    *p[i] = NULL;
    snprintf(want, sizeof want, "tj_moe_route: %s is NULL", names[i]);
    expect_fail(rt, tj_moe_route(rt, NULL, topk, 300, 4, 8, &b, ws, wb),
                TJ_EINVAL, want);
    *p[i] = (int32_t *)((char *)FAKE(3 + i) + 2);
    snprintf(want, sizeof want, "tj_moe_route: %s is not 4-byte aligned",
             names[i]);
    expect_fail(rt, tj_moe_route(rt, NULL, topk, 300, 4, 8, &b, ws, wb),
                TJ_EINVAL, want);
  }
  expect_fail(rt, tj_moe_route(rt, NULL, topk, 300, 4, 8, &o, ws, wb - 1),
              TJ_EINVAL, "tj_moe_route: workspace_bytes is 71, below the 72 "
              "that tj_moe_route_workspace gives");
  tj_moe_routing b = o;
  b.slot_of_row = b.row_of_slot + 1199; /* shares the last int */
  expect_fail(rt, tj_moe_route(rt, NULL, topk, 300, 4, 8, &b, ws, wb),
              TJ_EINVAL, "tj_moe_route: row_of_slot and slot_of_row overlap");
  b = o;
  b.counts = (int32_t *)topk + 4;
  expect_fail(rt, tj_moe_route(rt, NULL, topk, 300, 4, 8, &b, ws, wb),
              TJ_EINVAL, "tj_moe_route: topk and counts overlap");
  b.counts = (int32_t *)ws + 17;
  expect_fail(rt, tj_moe_route(rt, NULL, topk, 300, 4, 8, &b, ws, wb),
              TJ_EINVAL, "tj_moe_route: workspace and counts overlap");
  b = o;
  b.row_of_slot = b.slot_of_row + 1200; /* right after it: fine */
  expect_no_gpu(rt, tj_moe_route(rt, NULL, topk, 300, 4, 8, &b, ws, wb),
                "tj_moe_route");
  expect_no_gpu(rt, tj_moe_route(rt, NULL, topk, 300, 4, 8, &o, ws, wb + 100),
                "tj_moe_route");
  tj_runtime_close(rt);
}
END_TEST

/* ------------------------------------------------------- rows */

START_TEST(permute_checks)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  const void *x = FAKE(1);
  const int32_t *map = FAKE(2);
  void *xp = FAKE(3);
  const int F16 = TJ_DTYPE_F16, BF16 = TJ_DTYPE_BF16;
  ck_assert_int_eq(tj_moe_permute(NULL, NULL, F16, x, 8, map, 4, 2, 8, xp, 8),
                   TJ_EINVAL);
  expect_fail(rt, tj_moe_permute(rt, NULL, 3, x, 8, map, 4, 2, 8, xp, 8),
              TJ_EINVAL, "tj_moe_permute: dtype 3 is not one the call takes "
              "(TJ_DTYPE_F16, TJ_DTYPE_BF16)");
  expect_fail(rt, tj_moe_permute(rt, NULL, F16, x, 8, map, 0, 2, 8, xp, 8),
              TJ_EINVAL, "tj_moe_permute: tokens is 0, below 1");
  expect_fail(rt, tj_moe_permute(rt, NULL, F16, x, 8, map, 4, -3, 8, xp, 8),
              TJ_EINVAL, "tj_moe_permute: k is -3, outside [1, 16]");
  expect_fail(rt, tj_moe_permute(rt, NULL, F16, x, 8, map, 4, 2, 0, xp, 8),
              TJ_EINVAL, "tj_moe_permute: hidden is 0, below 1");
  expect_fail(rt, tj_moe_permute(rt, NULL, F16, x, 7, map, 4, 2, 8, xp, 8),
              TJ_EINVAL, "tj_moe_permute: ldx is 7, below hidden (8)");
  expect_fail(rt, tj_moe_permute(rt, NULL, F16, x, 8, map, 4, 2, 8, xp, 3),
              TJ_EINVAL, "tj_moe_permute: ldxp is 3, below hidden (8)");
  expect_fail(rt, tj_moe_permute(rt, NULL, F16, NULL, 8, map, 4, 2, 8, xp, 8),
              TJ_EINVAL, "tj_moe_permute: x is NULL");
  expect_fail(rt, tj_moe_permute(rt, NULL, F16, x, 8, NULL, 4, 2, 8, xp, 8),
              TJ_EINVAL, "tj_moe_permute: row_of_slot is NULL");
  expect_fail(rt, tj_moe_permute(rt, NULL, F16, x, 8, map, 4, 2, 8, NULL, 8),
              TJ_EINVAL, "tj_moe_permute: xp is NULL");
  expect_fail(rt, tj_moe_permute(rt, NULL, F16, (char *)x + 1, 8, map, 4, 2, 8,
                                 xp, 8),
              TJ_EINVAL, "tj_moe_permute: x is not 2-byte aligned");
  expect_fail(rt, tj_moe_permute(rt, NULL, F16, x, 8, (const int32_t *)((const char *)map + 2),
                                 4, 2, 8, xp, 8),
              TJ_EINVAL, "tj_moe_permute: row_of_slot is not 4-byte aligned");
  /* x is 4 rows of 8 halves: 64 bytes; xp 8 rows. */
  expect_fail(rt, tj_moe_permute(rt, NULL, F16, x, 8, map, 4, 2, 8,
                                 (char *)x + 62, 8),
              TJ_EINVAL, "tj_moe_permute: x and xp overlap");
  expect_fail(rt, tj_moe_permute(rt, NULL, F16, x, 8, map, 4, 2, 8,
                                 (char *)map + 30, 8),
              TJ_EINVAL, "tj_moe_permute: row_of_slot and xp overlap");
  expect_fail(rt, tj_moe_permute(rt, NULL, F16, x, INT64_MAX, map, 4, 2, 8, xp,
                                 8),
              TJ_ERANGE, "tj_moe_permute: x spans more bytes than size_t holds");
  expect_fail(rt, tj_moe_permute(rt, NULL, F16, x, 8, map, INT32_MAX, 2, 8, xp,
                                 8),
              TJ_ERANGE, "tj_moe_permute: tokens * k = 2147483647 * 2 slots is "
              "over 2147483647, the most an int32 row index holds");
  expect_no_gpu(rt, tj_moe_permute(rt, NULL, F16, x, 8, map, 4, 2, 8,
                                   (char *)x + 64, 8), "tj_moe_permute");
  expect_no_gpu(rt, tj_moe_permute(rt, NULL, BF16, (char *)x + 2, 9, map, 4, 2,
                                   7, xp, 7), "tj_moe_permute");
  tj_runtime_close(rt);
}
END_TEST

START_TEST(unpermute_checks)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  const void *yp = FAKE(1), *w = FAKE(4);
  const int32_t *map = FAKE(2);
  void *y = FAKE(3);
  const int F16 = TJ_DTYPE_F16, BF16 = TJ_DTYPE_BF16, F32 = TJ_DTYPE_F32;
  ck_assert_int_eq(tj_moe_unpermute(NULL, NULL, F16, yp, 8, map, 4, 2, 8, F32,
                                    w, y, 8), TJ_EINVAL);
  expect_fail(rt, tj_moe_unpermute(rt, NULL, 0, yp, 8, map, 4, 2, 8, F32, w, y,
                                   8),
              TJ_EINVAL, "tj_moe_unpermute: dtype 0 is not one the call takes "
              "(TJ_DTYPE_F16, TJ_DTYPE_BF16)");
  expect_fail(rt, tj_moe_unpermute(rt, NULL, F16, yp, 8, map, 4, 2, 8, BF16, w,
                                   y, 8),
              TJ_EINVAL, "tj_moe_unpermute: w_type 2 is neither TJ_DTYPE_F32 "
              "nor dtype (1)");
  expect_fail(rt, tj_moe_unpermute(rt, NULL, F16, yp, 4, map, 4, 2, 8, F32, w,
                                   y, 8),
              TJ_EINVAL, "tj_moe_unpermute: ldyp is 4, below hidden (8)");
  expect_fail(rt, tj_moe_unpermute(rt, NULL, F16, yp, 8, map, 4, 2, 8, F32, w,
                                   y, 5),
              TJ_EINVAL, "tj_moe_unpermute: ldy is 5, below hidden (8)");
  expect_fail(rt, tj_moe_unpermute(rt, NULL, F16, yp, 8, map, 4, 2, 8, F32,
                                   NULL, y, 8),
              TJ_EINVAL, "tj_moe_unpermute: w is NULL");
  expect_fail(rt, tj_moe_unpermute(rt, NULL, F16, yp, 8, map, 4, 2, 8, F32,
                                   (const char *)w + 2, y, 8),
              TJ_EINVAL, "tj_moe_unpermute: w is not 4-byte aligned");
  expect_fail(rt, tj_moe_unpermute(rt, NULL, F16, yp, 8, map, 4, 2, 8, F32, w,
                                   (char *)w + 28, 8),
              TJ_EINVAL, "tj_moe_unpermute: w and y overlap");
  expect_fail(rt, tj_moe_unpermute(rt, NULL, F16, yp, 8, map, 4, 2, 8, F32, w,
                                   (char *)yp + 100, 8),
              TJ_EINVAL, "tj_moe_unpermute: yp and y overlap");
  expect_no_gpu(rt, tj_moe_unpermute(rt, NULL, F16, yp, 8, map, 4, 2, 8, F32,
                                     w, y, 8), "tj_moe_unpermute");
  expect_no_gpu(rt, tj_moe_unpermute(rt, NULL, BF16, yp, 8, map, 4, 2, 8, BF16,
                                     (const char *)w + 2, y, 8),
                "tj_moe_unpermute");
  /* the backward of permute: no weights */
  expect_fail(rt, tj_moe_permute_bwd(rt, NULL, F16, yp, 8, map, 4, 2, 8, NULL,
                                     8),
              TJ_EINVAL, "tj_moe_permute_bwd: dx is NULL");
  expect_fail(rt, tj_moe_permute_bwd(rt, NULL, F16, yp, 7, map, 4, 2, 8, y, 8),
              TJ_EINVAL, "tj_moe_permute_bwd: lddxp is 7, below hidden (8)");
  expect_fail(rt, tj_moe_permute_bwd(rt, NULL, F16, yp, 8, map, 4, 2, 8,
                                     (char *)map + 4, 8),
              TJ_EINVAL, "tj_moe_permute_bwd: row_of_slot and dx overlap");
  expect_no_gpu(rt, tj_moe_permute_bwd(rt, NULL, F16, yp, 8, map, 4, 2, 8, y,
                                       8), "tj_moe_permute_bwd");
  tj_runtime_close(rt);
}
END_TEST

START_TEST(unpermute_bwd_checks)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  const void *dy = FAKE(1), *yp = FAKE(2), *w = FAKE(4);
  const int32_t *map = FAKE(3);
  void *dyp = FAKE(5), *dw = FAKE(6);
  const int F16 = TJ_DTYPE_F16, BF16 = TJ_DTYPE_BF16, F32 = TJ_DTYPE_F32;
#define BWD(...) tj_moe_unpermute_bwd(rt, NULL, __VA_ARGS__)
  ck_assert_int_eq(tj_moe_unpermute_bwd(NULL, NULL, F16, dy, 8, yp, 8, map, 4,
                                        2, 8, F32, w, dyp, 8, dw), TJ_EINVAL);
  expect_fail(rt, BWD(F16, dy, 8, yp, 8, map, 4, 2, 8, 9, w, dyp, 8, dw),
              TJ_EINVAL, "tj_moe_unpermute_bwd: w_type 9 is neither "
              "TJ_DTYPE_F32 nor dtype (1)");
  expect_fail(rt, BWD(F16, dy, 6, yp, 8, map, 4, 2, 8, F32, w, dyp, 8, dw),
              TJ_EINVAL, "tj_moe_unpermute_bwd: lddy is 6, below hidden (8)");
  expect_fail(rt, BWD(F16, dy, 8, yp, 6, map, 4, 2, 8, F32, w, dyp, 8, dw),
              TJ_EINVAL, "tj_moe_unpermute_bwd: ldyp is 6, below hidden (8)");
  expect_fail(rt, BWD(F16, dy, 8, yp, 8, map, 4, 2, 8, F32, w, dyp, 6, dw),
              TJ_EINVAL, "tj_moe_unpermute_bwd: lddyp is 6, below hidden (8)");
  expect_fail(rt, BWD(F16, NULL, 8, yp, 8, map, 4, 2, 8, F32, w, dyp, 8, dw),
              TJ_EINVAL, "tj_moe_unpermute_bwd: dy is NULL");
  expect_fail(rt, BWD(F16, dy, 8, NULL, 8, map, 4, 2, 8, F32, w, dyp, 8, dw),
              TJ_EINVAL, "tj_moe_unpermute_bwd: yp is NULL");
  expect_fail(rt, BWD(F16, dy, 8, yp, 8, map, 4, 2, 8, F32, NULL, dyp, 8, dw),
              TJ_EINVAL, "tj_moe_unpermute_bwd: w is NULL");
  expect_fail(rt, BWD(F16, dy, 8, yp, 8, map, 4, 2, 8, F32, w, NULL, 8, dw),
              TJ_EINVAL, "tj_moe_unpermute_bwd: dyp is NULL");
  expect_fail(rt, BWD(F16, dy, 8, yp, 8, map, 4, 2, 8, F32, w, dyp, 8, NULL),
              TJ_EINVAL, "tj_moe_unpermute_bwd: dw is NULL");
  expect_fail(rt, BWD(F16, dy, 8, yp, 8, map, 4, 2, 8, F32, w, dyp, 8,
                      (char *)dw + 2),
              TJ_EINVAL, "tj_moe_unpermute_bwd: dw is not 4-byte aligned");
  expect_fail(rt, BWD(F16, dy, 8, yp, 8, map, 4, 2, 8, F32, w, dyp, 8,
                      (char *)w + 4),
              TJ_EINVAL, "tj_moe_unpermute_bwd: w and dw overlap");
  expect_fail(rt, BWD(F16, dy, 8, yp, 8, map, 4, 2, 8, F32, w, (char *)yp + 2,
                      8, dw),
              TJ_EINVAL, "tj_moe_unpermute_bwd: yp and dyp overlap");
  expect_fail(rt, BWD(F16, dy, 8, yp, 8, map, 4, 2, 8, F32, w, dyp, 8, dyp),
              TJ_EINVAL, "tj_moe_unpermute_bwd: dyp and dw overlap");
  expect_no_gpu(rt, BWD(F16, dy, 8, yp, 8, map, 4, 2, 8, F32, w, dyp, 8, dw),
                "tj_moe_unpermute_bwd");
  expect_no_gpu(rt, BWD(BF16, dy, 8, yp, 8, map, 4, 2, 8, BF16, w, dyp, 8, dw),
                "tj_moe_unpermute_bwd");
#undef BWD
  tj_runtime_close(rt);
}
END_TEST

/* ------------------------------------------------------- oracles */

/* 3 tokens, k = 2, 4 experts: expert 2 empty, one index out of range. */
START_TEST(route_oracle_by_hand)
{
  const int32_t topk[] = {1, 0, 3, 1, 9, 1};
  int32_t counts[4], offsets[4], row[6], slot[6], dropped = -5;
  tj__oracle_moe_route(topk, 3, 2, 4, counts, offsets, row, slot, &dropped);
  const int32_t want_counts[] = {1, 3, 0, 1}, want_offsets[] = {1, 4, 4, 5};
  const int32_t want_row[] = {1, 0, 4, 2, -1, 3};
  const int32_t want_slot[] = {1, 0, 3, 5, 2, -1};
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(counts[i], want_counts[i]);
    ck_assert_int_eq(offsets[i], want_offsets[i]);
  }
  for (int i = 0; i < 6; i++) {
    ck_assert_int_eq(row[i], want_row[i]);
    ck_assert_int_eq(slot[i], want_slot[i]);
  }
  ck_assert_int_eq(dropped, 1);
}
END_TEST

START_TEST(row_oracles_by_hand)
{
  /* 2 tokens of hidden 2 (stride 3), k = 2; slot 3 dropped. */
  uint16_t x[6];
  const float xv[6] = {1, 2, 99, 3, -4, 99};
  for (int i = 0; i < 6; i++)
    x[i] = tj_f32_to_bf16(xv[i]);
  const int32_t row[] = {2, 0, 1, -1};
  const float w[] = {0.5f, 2.0f, -1.0f, 8.0f};
  double xp[8];
  tj__oracle_moe_permute(TJ_DTYPE_BF16, x, 3, row, 2, 2, 2, TJ_DTYPE_F32, w,
                         xp);
  const double want_xp[8] = {2, 4, -3, 4, 0.5, 1, NAN, NAN};
  for (int i = 0; i < 6; i++)
    ck_assert_double_eq(xp[i], want_xp[i]);
  ck_assert(isnan(xp[6]) && isnan(xp[7]));
  double y[4];
  uint16_t yp[8];
  for (int i = 0; i < 8; i++)
    yp[i] = tj_f32_to_f16((float)(i + 1));
  tj__oracle_moe_unpermute(TJ_DTYPE_F16, yp, 2, row, 2, 2, 2, TJ_DTYPE_F32, w,
                           y);
  /* y[0] = 0.5 * yp[2] + 2 * yp[0]; y[1] = -1 * yp[1] */
  const double want_y[4] = {0.5 * 5 + 2 * 1, 0.5 * 6 + 2 * 2, -3, -4};
  for (int i = 0; i < 4; i++)
    ck_assert_double_eq(y[i], want_y[i]);
  tj__oracle_moe_unpermute(TJ_DTYPE_F16, yp, 2, row, 2, 2, 2, TJ_DTYPE_F32,
                           NULL, y);
  ck_assert_double_eq(y[0], 6);
  ck_assert_double_eq(y[3], 4);
  double dw[4];
  uint16_t ypb[8];
  for (int i = 0; i < 8; i++)
    ypb[i] = tj_f32_to_bf16((float)(i + 1));
  tj__oracle_moe_dw(TJ_DTYPE_BF16, x, 3, ypb, 2, row, 2, 2, 2, dw);
  /* dw[0] = <(1,2), yp row 2 = (5,6)>; dw[3]: dropped */
  ck_assert_double_eq(dw[0], 17);
  ck_assert_double_eq(dw[1], 1 * 1 + 2 * 2);
  ck_assert_double_eq(dw[2], 3 * 3 - 4 * 4); /* x[1] with yp row 1 */
  ck_assert_double_eq(dw[3], 0);
}
END_TEST

/* ------------------------------------------------------- the kernels */

static int launch_bounds_of(const char *src, const char *entry)
{
  static const char tag[] = "__launch_bounds__(";
  for (const char *p = strstr(src, tag); p; p = strstr(p + 1, tag)) {
    char *end;
    long threads = strtol(p + strlen(tag), &end, 10);
    if (*end != ')')
      continue;
    size_t n = strlen(entry);
    if (strncmp(end + 2, entry, n) == 0 && end[2 + n] == '(')
      return (int)threads;
  }
  return -1;
}

static const struct {
  const char *entry;
  int threads;
} moe_kernels[] = {{"moe_route_count", 256}, {"moe_route_scan", 1024},
                   {"moe_route_rank", 256},  {"moe_permute", 128},
                   {"moe_unpermute", 128},   {"moe_unpermute_bwd", 128}};

/* What src/ops/moe.c launches with is what each entry is bounded to. */
START_TEST(block_sizes_match_the_source)
{
  for (size_t i = 0; i < sizeof moe_kernels / sizeof moe_kernels[0]; i++) {
    const tj__embedded_kernel *e = tj__embedded_find(moe_kernels[i].entry);
    ck_assert_msg(e != NULL, "%s is not embedded", moe_kernels[i].entry);
    ck_assert_str_eq(e->file, "moe_permute.hip");
    ck_assert_int_eq(launch_bounds_of(e->source, moe_kernels[i].entry),
                     moe_kernels[i].threads);
  }
}
END_TEST

/* The real compiler, for each arch this platform's suites test: one
 * code object of the platform's machine, defining every entry. */
START_TEST(kernels_compile_for_each_arch)
{
#if defined(TJ_PLATFORM_NVIDIA)
  const char *archs[] = {"sm_90", "sm_80"};
#else
  const char *archs[] = {"gfx90a", "gfx1030"};
#endif
  for (size_t a = 0; a < 2; a++) {
    tj_runtime *rt = open_for_arch(archs[a], NULL);
    for (size_t i = 0; i < sizeof moe_kernels / sizeof moe_kernels[0]; i++) {
      tj_kernel *k = NULL;
      int rc = tj_kernel_get(rt, moe_kernels[i].entry, &k);
      ck_assert_msg(rc == TJ_OK, "%s for %s: %s", moe_kernels[i].entry,
                    archs[a], tj_errmsg(rt));
      tj_kernel_info info;
      ck_assert_int_eq(tj_kernel_get_info(k, &info), TJ_OK);
      const unsigned char *code = info.code;
      ck_assert(info.code_size > 64 && memcmp(code, "\177ELF", 4) == 0);
      ck_assert_uint_eq(code[18] | code[19] << 8, TEST_ELF_MACHINE);
      ck_assert_msg(test_elf_defines(info.code, info.code_size,
                                     moe_kernels[i].entry, 0),
                    "%s for %s: no such symbol", moe_kernels[i].entry,
                    archs[a]);
    }
    tj_runtime_close(rt);
  }
}
END_TEST

/* tj_verify knows every entry, and stops at the missing GPU. */
START_TEST(verify_stops_at_the_missing_gpu)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_report r;
  for (size_t i = 0; i < sizeof moe_kernels / sizeof moe_kernels[0]; i++) {
    char want[256];
    snprintf(want, sizeof want, "no GPU: tj_verify runs %s, and this runtime "
             "is compile-only (arch %s)", moe_kernels[i].entry, TEST_ARCH);
    expect_fail(rt, tj_verify(rt, moe_kernels[i].entry, 1 << 20, 1, &r),
                TJ_ENODEVICE, want);
    expect_fail(rt, tj_verify(rt, moe_kernels[i].entry, 0, 1, &r), TJ_EINVAL,
                "tj_verify: n is 0");
  }
  tj_runtime_close(rt);
}
END_TEST

/* ------------------------------------------------------- host calls */

START_TEST(host_calls_check_and_leave_outputs)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  const int32_t topk[6] = {1, 0, 3, 1, 2, 1};
  int32_t counts[4], offsets[4], row[6], slot[6], dropped;
  memset(counts, 0x5a, sizeof counts), memset(row, 0x5a, sizeof row);
  tj_moe_routing o = {counts, offsets, row, slot, &dropped};
  ck_assert_int_eq(tj_moe_route_host(NULL, topk, 3, 2, 4, &o), TJ_EINVAL);
  expect_fail(rt, tj_moe_route_host(rt, topk, 3, 2, 4, NULL), TJ_EINVAL,
              "tj_moe_route_host: out is NULL");
  expect_fail(rt, tj_moe_route_host(rt, topk, 3, 2, 0, &o), TJ_EINVAL,
              "tj_moe_route_host: experts is 0, outside [1, 1024]");
  expect_fail(rt, tj_moe_route_host(rt, NULL, 3, 2, 4, &o), TJ_EINVAL,
              "tj_moe_route_host: topk is NULL");
  tj_moe_routing b = o;
  b.dropped = NULL;
  expect_fail(rt, tj_moe_route_host(rt, topk, 3, 2, 4, &b), TJ_EINVAL,
              "tj_moe_route_host: dropped is NULL");
  b = o;
  b.slot_of_row = row + 3;
  expect_fail(rt, tj_moe_route_host(rt, topk, 3, 2, 4, &b), TJ_EINVAL,
              "tj_moe_route_host: row_of_slot and slot_of_row overlap");
  expect_no_gpu(rt, tj_moe_route_host(rt, topk, 3, 2, 4, &o),
                "tj_moe_route_host");
  ck_assert_int_eq(counts[0], 0x5a5a5a5a);
  ck_assert_int_eq(row[5], 0x5a5a5a5a);
  uint16_t x[3 * 8], xp[6 * 8], dw16[6];
  float w[6], dw[6];
  memset(x, 0, sizeof x), memset(w, 0, sizeof w);
  memset(xp, 0x5a, sizeof xp);
  const int F16 = TJ_DTYPE_F16, F32 = TJ_DTYPE_F32;
  expect_fail(rt, tj_moe_permute_host(rt, F16, x, 8, row, 3, 2, 8, x + 8, 8),
              TJ_EINVAL, "tj_moe_permute_host: x and xp overlap");
  expect_fail(rt, tj_moe_permute_host(rt, F16, x, 8, row, 3, 2, 9, xp, 9),
              TJ_EINVAL, "tj_moe_permute_host: ldx is 8, below hidden (9)");
  expect_no_gpu(rt, tj_moe_permute_host(rt, F16, x, 8, row, 3, 2, 8, xp, 8),
                "tj_moe_permute_host");
  ck_assert_uint_eq(xp[47], 0x5a5a);
  expect_fail(rt, tj_moe_unpermute_host(rt, F16, xp, 8, row, 3, 2, 8, F32,
                                        NULL, x, 8),
              TJ_EINVAL, "tj_moe_unpermute_host: w is NULL");
  expect_no_gpu(rt, tj_moe_unpermute_host(rt, F16, xp, 8, row, 3, 2, 8, F32, w,
                                          x, 8), "tj_moe_unpermute_host");
  expect_fail(rt, tj_moe_permute_bwd_host(rt, 7, xp, 8, row, 3, 2, 8, x, 8),
              TJ_EINVAL, "tj_moe_permute_bwd_host: dtype 7 is not one the "
              "call takes (TJ_DTYPE_F16, TJ_DTYPE_BF16)");
  expect_no_gpu(rt, tj_moe_permute_bwd_host(rt, F16, xp, 8, row, 3, 2, 8, x,
                                            8), "tj_moe_permute_bwd_host");
  expect_fail(rt, tj_moe_unpermute_bwd_host(rt, F16, x, 8, xp, 8, row, 3, 2, 8,
                                            F32, w, xp, 8, dw),
              TJ_EINVAL, "tj_moe_unpermute_bwd_host: yp and dyp overlap");
  expect_fail(rt, tj_moe_unpermute_bwd_host(rt, F16, x, 8, xp, 8, row, 3, 2, 8,
                                            F16, w, x, 8, dw16),
              TJ_EINVAL, "tj_moe_unpermute_bwd_host: dy and dyp overlap");
  tj_runtime_close(rt);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("moe");
  TCase *args = test_case(s, "arguments", 60);
  tcase_add_test(args, workspace_size);
  tcase_add_test(args, route_checks);
  tcase_add_test(args, permute_checks);
  tcase_add_test(args, unpermute_checks);
  tcase_add_test(args, unpermute_bwd_checks);
  tcase_add_test(args, route_oracle_by_hand);
  tcase_add_test(args, row_oracles_by_hand);
  tcase_add_test(args, block_sizes_match_the_source);
  tcase_add_test(args, verify_stops_at_the_missing_gpu);
  tcase_add_test(args, host_calls_check_and_leave_outputs);
  TCase *compile = test_case(s, "compile", 300);
  tcase_add_test(compile, kernels_compile_for_each_arch);
  return run_suite(s);
}
