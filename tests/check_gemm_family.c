/*
 * check_gemm_family.c: tj_gemm without a GPU: the descriptor's checks
 * (each refusal names what is wrong, and nothing is compiled for a
 * descriptor refused), the route (f16 without transposes or epilogue to
 * tj_gemm_f16's kernels, A and B of one type on sm_90 to the Hopper
 * kernel and elsewhere to the tensor-core path, everything else to the
 * portable kernel, under a name that says its configuration), every
 * configuration compiled for the test arch with its entries in the code
 * (the Hopper ones for sm_90a), every combination of the tensor-core
 * path for gfx90a, or for sm_80 and sm_90 (its knob), the bf16
 * conversions, and the oracle's epilogues on a case worked by hand.
 */
#include "testknobs.h"
#include "oracle.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Addresses that are never dereferenced (nothing launches here), far
 * apart so that no two operands overlap. */
#define FAKE(i) ((void *)((uintptr_t)(i) << 40))

/* A valid descriptor: bf16 x bf16 -> f32, NN, m x n x k, dense. */
static tj_gemm_desc valid(int64_t m, int64_t n, int64_t k)
{
  tj_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.size = sizeof d;
  d.a_type = d.b_type = TJ_DTYPE_BF16;
  d.c_type = TJ_DTYPE_F32;
  d.m = m, d.n = n, d.k = k;
  d.alpha = 1.0f;
  d.a = FAKE(1), d.lda = k;
  d.b = FAKE(2), d.ldb = n;
  d.c = FAKE(3), d.ldc = n;
  return d;
}

/* tj_gemm_kernel refuses d with rc and a message containing want. */
static void refused(tj_runtime *rt, const tj_gemm_desc *d, int rc,
                    const char *want)
{
  ck_assert_ptr_null(tj_gemm_kernel(rt, d));
  ck_assert_msg(strstr(tj_errmsg(rt), want) != NULL, "message \"%s\" lacks "
                "\"%s\"", tj_errmsg(rt), want);
  ck_assert_int_eq(tj_gemm(rt, NULL, d), rc);
}

START_TEST(descriptors_are_checked)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_gemm_desc d = valid(8, 8, 8);
  refused(rt, NULL, TJ_EINVAL, "NULL");
  d.a_type = 3;
  refused(rt, &d, TJ_EINVAL, "a_type=3");
  d = valid(8, 8, 8), d.c_type = 4;
  refused(rt, &d, TJ_EINVAL, "c_type=4");
  d = valid(8, 8, 8), d.trans_b = 2;
  refused(rt, &d, TJ_EINVAL, "trans_b=2");
  d = valid(8, 8, 8), d.epilogue = 4;
  refused(rt, &d, TJ_EINVAL, "epilogue=4");
  d = valid(8, 0, 8);
  refused(rt, &d, TJ_EINVAL, "n=0");
  d = valid(8, 8, -1);
  refused(rt, &d, TJ_EINVAL, "k=-1");
  d = valid(8, 8, 8), d.lda = 7;
  refused(rt, &d, TJ_EINVAL, "lda=7");
  /* With trans_a A is stored k x m: its row is m long. */
  d = valid(16, 8, 8), d.trans_a = 1, d.lda = 8;
  refused(rt, &d, TJ_EINVAL, "lda=8");
  d = valid(8, 8, 8), d.ldc = 4;
  refused(rt, &d, TJ_EINVAL, "ldc=4");
  d = valid(8, 8, 8), d.b = NULL;
  refused(rt, &d, TJ_EINVAL, "b is NULL");
  d = valid(8, 8, 8), d.c = (char *)FAKE(3) + 2;
  refused(rt, &d, TJ_EINVAL, "c is not 4-byte aligned");
  d = valid(8, 8, 8), d.a = (char *)FAKE(1) + 1;
  refused(rt, &d, TJ_EINVAL, "a is not 2-byte aligned");
  /* Spans past memory, and grids past their limits. */
  d = valid(8, 8, 8), d.lda = INT64_MAX / 2;
  refused(rt, &d, TJ_ERANGE, "a spans");
  d = valid((int64_t)65536 * 64, 8, 8);
  refused(rt, &d, TJ_ERANGE, "tiles");
  /* C must not overlap what is read or the other outputs. */
  d = valid(8, 8, 8), d.c = (char *)FAKE(1) + 64;
  refused(rt, &d, TJ_EINVAL, "overlaps");
  /* Each epilogue's pointers: needed, optional or refused. */
  d = valid(8, 8, 8), d.epilogue = TJ_EPILOGUE_BIAS;
  refused(rt, &d, TJ_EINVAL, "bias is NULL");
  d = valid(8, 8, 8), d.epilogue = TJ_EPILOGUE_DGELU;
  refused(rt, &d, TJ_EINVAL, "aux is NULL");
  d = valid(8, 8, 8), d.bias = FAKE(4);
  refused(rt, &d, TJ_EINVAL, "bias is set");
  d = valid(8, 8, 8), d.epilogue = TJ_EPILOGUE_BIAS, d.bias = FAKE(4),
  d.bias_grad = FAKE(5);
  refused(rt, &d, TJ_EINVAL, "bias_grad is set");
  d = valid(8, 8, 8), d.epilogue = TJ_EPILOGUE_BIAS_GELU, d.bias = FAKE(4),
  d.aux = FAKE(5), d.ldaux = 7;
  refused(rt, &d, TJ_EINVAL, "ldaux=7");
  d = valid(8, 8, 8), d.epilogue = TJ_EPILOGUE_DGELU, d.aux = FAKE(5),
  d.ldaux = 8, d.bias_grad = (float *)((char *)FAKE(5) + 16);
  refused(rt, &d, TJ_EINVAL, "overlaps");
  /* A size this library does not know, and a field past its own. */
  d = valid(8, 8, 8), d.size = 8;
  refused(rt, &d, TJ_EINVAL, "size is 8");
  unsigned char big[sizeof d + 8];
  memset(big, 0, sizeof big);
  d = valid(8, 8, 8), d.size = sizeof big;
  memcpy(big, &d, sizeof d);
  big[sizeof d] = 1;
  ck_assert_ptr_null(tj_gemm_kernel(rt, (const tj_gemm_desc *)big));
  /* Nothing was compiled for any of them. */
  tj_stats st;
  ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
  ck_assert_uint_eq(st.compiles, 0);
  /* A valid one on a compile-only runtime: no GPU to launch on. */
  d = valid(8, 8, 8);
  ck_assert_int_eq(tj_gemm(rt, NULL, &d), TJ_ENODEVICE);
  tj_runtime_close(rt);
}
END_TEST

/* The host call checks as tj_gemm does and, refused or without a GPU,
 * leaves the caller's output as it was. */
START_TEST(host_calls_check_and_leave_outputs)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  uint16_t a[4 * 3], b[3 * 5];
  float c[4 * 6];
  for (int i = 0; i < 24; i++)
    c[i] = (float)i;
  tj_gemm_desc d = valid(4, 5, 3);
  d.a = a, d.b = b, d.c = c, d.ldc = 6;
  ck_assert_int_eq(tj_gemm_host(rt, &d), TJ_ENODEVICE);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "tj_gemm_host"));
  d.ldc = 4;
  ck_assert_int_eq(tj_gemm_host(rt, &d), TJ_EINVAL);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "ldc=4"));
  ck_assert_int_eq(tj_gemm_host(rt, NULL), TJ_EINVAL);
  for (int i = 0; i < 24; i++)
    ck_assert(c[i] == (float)i);
  tj_runtime_close(rt);
}
END_TEST

static const int ab_types[] = {TJ_DTYPE_F16, TJ_DTYPE_BF16};
static const int c_types[] = {TJ_DTYPE_F16, TJ_DTYPE_BF16, TJ_DTYPE_F32};
static const char *const type_names[] = {NULL, "f16", "bf16", "f32"};
static const char *const epi_names[] = {"none", "bias", "biasgelu", "dgelu"};

/* d with epilogue e and the pointers it needs. */
static void with_epilogue(tj_gemm_desc *d, int e)
{
  d->epilogue = e;
  if (e == TJ_EPILOGUE_BIAS || e == TJ_EPILOGUE_BIAS_GELU)
    d->bias = FAKE(4);
  if (e == TJ_EPILOGUE_BIAS_GELU || e == TJ_EPILOGUE_DGELU) {
    d->aux = FAKE(5);
    d->ldaux = d->n;
  }
  if (e == TJ_EPILOGUE_DGELU)
    d->bias_grad = FAKE(6);
}

/* The path a configuration of d runs on the test arch: where A and B
 * have one type, on sm_90 the Hopper kernel (for these small shapes the
 * rule's skinny kernel in one 256-column strip, or with A transposed the
 * 128 x 128 tile), elsewhere the tensor-core path; else the portable
 * kernel. */
static const char *path_of(const tj_gemm_desc *d)
{
  if (d->a_type != d->b_type)
    return "portable";
  if (strcmp(TEST_ARCH, "sm_90") != 0)
    return "tc";
  return d->m <= 16 && !d->trans_a ? "sm90a_skinny256" : "sm90a_128x128";
}

/* Every pair of types (without transposes or epilogue), and every layout
 * and epilogue (bf16 throughout): the name says the configuration, the
 * f16 NN one without epilogue is tj_gemm_f16's embedded kernel off sm_90
 * (on sm_90 a Hopper configuration like the others), and each other one
 * is a module of its own, compiled here. */
START_TEST(every_configuration_compiles)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  int compiled = 0;
  for (int ta = 0; ta < 2; ta++)
    for (int tc = 0; tc < 3; tc++)
      for (int t = 0; t < 4; t++)
        for (int e = 0; e < 4; e++) {
          int types_only = t == 0 && e == 0;
          int bf16 = ab_types[ta] == TJ_DTYPE_BF16 && c_types[tc] == TJ_DTYPE_BF16;
          if (!types_only && !bf16)
            continue;
          tj_gemm_desc d = valid(8, 8, 8);
          d.a_type = d.b_type = ab_types[ta];
          d.c_type = c_types[tc];
          d.trans_a = t & 1, d.trans_b = t >> 1;
          with_epilogue(&d, e);
          const char *got = tj_gemm_kernel(rt, &d);
          ck_assert_msg(got != NULL, "%s", tj_errmsg(rt));
          char want[96];
          snprintf(want, sizeof want, "gemm_%s_%s_%s_%c%c_%s_%s",
                   type_names[d.a_type], type_names[d.b_type],
                   type_names[d.c_type], d.trans_a ? 't' : 'n',
                   d.trans_b ? 't' : 'n', epi_names[e], path_of(&d));
          if (d.a_type == TJ_DTYPE_F16 && d.c_type == TJ_DTYPE_F16 && t == 0 &&
              e == 0 && strcmp(TEST_ARCH, "sm_90") != 0) {
            ck_assert_ptr_eq(got, tj_gemm_f16_kernel(rt, 8, 8, 8, FAKE(1), 8,
                                                     FAKE(2), 8, FAKE(3), 8));
            continue;
          }
          ck_assert_str_eq(got, want);
          compiled++;
        }
  /* Mixed element types are served too. */
  tj_gemm_desc d = valid(3, 5, 7);
  d.a_type = TJ_DTYPE_F16;
  ck_assert_str_eq(tj_gemm_kernel(rt, &d), "gemm_f16_bf16_f32_nn_none_portable");
  tj_stats st;
  ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
  ck_assert_uint_eq(st.compiles, (uint64_t)compiled + 1);
  /* Asked again: the runtime's own modules, nothing compiled. */
  ck_assert_str_eq(tj_gemm_kernel(rt, &d), "gemm_f16_bf16_f32_nn_none_portable");
  ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
  ck_assert_uint_eq(st.compiles, (uint64_t)compiled + 1);
  tj_runtime_close(rt);
}
END_TEST

/* On sm_90 each kind of Hopper plan compiles for sm_90a with the entries
 * it launches (a missing one fails the compile): the persistent tiles,
 * the multicast pairs, the cluster's split of K, split-K with its reduce
 * and a dGELU's column sums, the skinny kernel alone and in a cluster;
 * the name says the plan the rule made. */
START_TEST(hopper_kinds_compile)
{
  if (strcmp(TEST_ARCH, "sm_90") != 0)
    return;
  const struct {
    int64_t m, n, k;
    int trans, epilogue, c_type;
    const char *name;
  } cases[] = {
      {2048, 2048, 2048, 1, TJ_EPILOGUE_BIAS_GELU, TJ_DTYPE_BF16,
       "gemm_bf16_bf16_bf16_tn_biasgelu_sm90a_128x256_persistent"},
      {4096, 4096, 4096, 2, TJ_EPILOGUE_NONE, TJ_DTYPE_F32,
       "gemm_bf16_bf16_f32_nt_none_sm90a_128x256_mc2"},
      {128, 4096, 4096, 3, TJ_EPILOGUE_BIAS, TJ_DTYPE_BF16,
       "gemm_bf16_bf16_bf16_tt_bias_sm90a_128x64_cluster_k2"},
      {64, 1024, 8192, 1, TJ_EPILOGUE_DGELU, TJ_DTYPE_BF16,
       "gemm_bf16_bf16_bf16_tn_dgelu_sm90a_128x128_splitk"},
      {1, 4096, 4096, 2, TJ_EPILOGUE_BIAS_GELU, TJ_DTYPE_BF16,
       "gemm_bf16_bf16_bf16_nt_biasgelu_sm90a_skinny_k3"},
      {16, 11008, 4096, 0, TJ_EPILOGUE_NONE, TJ_DTYPE_F32,
       "gemm_bf16_bf16_f32_nn_none_sm90a_skinny"},
  };
  tj_runtime *rt = open_compile_only(NULL, 0);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tj_gemm_desc d = valid(cases[i].m, cases[i].n, cases[i].k);
    d.c_type = cases[i].c_type;
    d.trans_a = cases[i].trans & 1, d.trans_b = cases[i].trans >> 1;
    d.lda = d.trans_a ? d.m : d.k;
    d.ldb = d.trans_b ? d.k : d.n;
    with_epilogue(&d, cases[i].epilogue);
    const char *got = tj_gemm_kernel(rt, &d);
    ck_assert_msg(got != NULL, "%s", tj_errmsg(rt));
    ck_assert_str_eq(got, cases[i].name);
  }
  tj_stats st;
  ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
  ck_assert_uint_eq(st.compiles, sizeof cases / sizeof cases[0]);
  tj_runtime_close(rt);
}
END_TEST

/* A one-row A stored K x 1 (lda 1) is A stored 1 x K, and a one-column
 * B stored K x 1 (ldb 1) is B stored 1 x K: the call runs the layout
 * along K.  With a leading dimension past 1 the elements are strided and
 * the layout stays as given. */
START_TEST(one_line_operands_run_along_k)
{
  const struct {
    int64_t m, n;
    int trans_a, trans_b;
    int64_t lda, ldb;
    const char *layout;
  } cases[] = {
      {1, 8, 1, 0, 1, 8, "_nn_"}, {1, 8, 1, 0, 2, 8, "_tn_"},
      {1, 8, 1, 1, 1, 24, "_nt_"}, {8, 1, 0, 0, 24, 1, "_nt_"},
      {8, 1, 0, 0, 24, 3, "_nn_"}, {1, 1, 1, 0, 1, 1, "_nt_"},
      {2, 8, 1, 0, 2, 8, "_tn_"},
  };
  tj_runtime *rt = open_compile_only(NULL, 0);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tj_gemm_desc d = valid(cases[i].m, cases[i].n, 24);
    d.trans_a = cases[i].trans_a, d.trans_b = cases[i].trans_b;
    d.lda = cases[i].lda, d.ldb = cases[i].ldb;
    const char *got = tj_gemm_kernel(rt, &d);
    ck_assert_msg(got != NULL, "%s", tj_errmsg(rt));
    ck_assert_msg(strstr(got, cases[i].layout), "case %zu: %s, not %s", i,
                  got, cases[i].layout);
  }
  tj_runtime_close(rt);
}
END_TEST

/* The configuration's code, cached: a new runtime on the same cache
 * compiles nothing for it. */
START_TEST(configurations_are_cached)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_gemm_desc d = valid(9, 10, 11);
  d.trans_b = 1, d.ldb = 11;
  with_epilogue(&d, TJ_EPILOGUE_BIAS_GELU);
  for (int i = 0; i < 2; i++) {
    tj_runtime *rt = open_compile_only(path, 0);
    char want[96];
    snprintf(want, sizeof want, "gemm_bf16_bf16_f32_nt_biasgelu_%s",
             path_of(&d));
    ck_assert_str_eq(tj_gemm_kernel(rt, &d), want);
    tj_stats st;
    ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
    ck_assert_uint_eq(st.compiles, i == 0 ? 1 : 0);
    tj_runtime_close(rt);
  }
  free(path);
  free(dir);
}
END_TEST

START_TEST(bf16_conversions)
{
  ck_assert_uint_eq(tj_f32_to_bf16(1.0f), 0x3f80);
  ck_assert(tj_bf16_to_f32(0x3f80) == 1.0f);
  ck_assert_uint_eq(tj_f32_to_bf16(-2.0f), 0xc000);
  /* Ties to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7. */
  ck_assert_uint_eq(tj_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  ck_assert_uint_eq(tj_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-16f), 0x3f81);
  ck_assert_uint_eq(tj_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  ck_assert_uint_eq(tj_f32_to_bf16(INFINITY), 0x7f80);
  ck_assert_uint_eq(tj_f32_to_bf16(-0.0f), 0x8000);
  /* The largest finite rounds up to infinity only past its half ulp. */
  ck_assert_uint_eq(tj_f32_to_bf16(0x1.fep127f), 0x7f7f);
  ck_assert_uint_eq(tj_f32_to_bf16(0x1.ffp127f), 0x7f80);
  uint16_t nan = tj_f32_to_bf16(NAN);
  ck_assert(isnan(tj_bf16_to_f32(nan)));
  ck_assert(isnan(tj_bf16_to_f32(tj_f32_to_bf16(tj_bf16_to_f32(0x7f81)))));
  for (uint32_t h = 0; h < 0x10000; h++)
    if (!isnan(tj_bf16_to_f32((uint16_t)h)))
      ck_assert_uint_eq(tj_f32_to_bf16(tj_bf16_to_f32((uint16_t)h)), h);
}
END_TEST

/* The oracle's epilogues on a 1 x 2 x 2 case worked by hand: A = [1 2]
 * stored transposed (2 x 1), B = [[1 0] [0 1]] stored transposed too, C
 * = [3 -1] with beta 0.5, alpha 2, bias [1 1]. */
START_TEST(oracle_epilogues_by_hand)
{
  float a[] = {1, 2}, b[] = {1, 0, 0, 1}, c0[] = {3, -1}, bias[] = {1, 1};
  float aux_in[] = {0, 1};
  tj_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.a_type = d.b_type = d.c_type = TJ_DTYPE_F32; /* host only */
  d.trans_a = d.trans_b = 1;
  d.m = 1, d.n = 2, d.k = 2;
  d.alpha = 2.0f, d.beta = 0.5f;
  d.a = a, d.lda = 1, d.b = b, d.ldb = 2, d.c = c0, d.ldc = 2;
  double c[2], aux[2], sums[2];
  /* s = 2 [1 2] + 0.5 [3 -1] = [3.5 3.5] */
  tj__oracle_gemm_desc(&d, c, NULL, NULL);
  ck_assert(c[0] == 3.5 && c[1] == 3.5);
  d.epilogue = TJ_EPILOGUE_BIAS, d.bias = bias;
  tj__oracle_gemm_desc(&d, c, NULL, NULL);
  ck_assert(c[0] == 4.5 && c[1] == 4.5);
  d.epilogue = TJ_EPILOGUE_BIAS_GELU;
  tj__oracle_gemm_desc(&d, c, aux, NULL);
  ck_assert(aux[0] == 4.5 && aux[1] == 4.5);
  ck_assert(fabs(c[0] - tj__gelu(4.5)) == 0 && c[0] > 4.49 && c[0] < 4.5);
  d.epilogue = TJ_EPILOGUE_DGELU, d.bias = NULL, d.aux = aux_in, d.ldaux = 2;
  tj__oracle_gemm_desc(&d, c, NULL, sums);
  ck_assert(c[0] == 3.5 * 0.5); /* gelu'(0) = 1/2 */
  ck_assert(fabs(c[1] - 3.5 * tj__gelu_grad(1.0)) < 1e-15);
  ck_assert(sums[0] == c[0] && fabs(sums[1] - c[1]) < 1e-6);
  /* alpha 0: A and B are not read. */
  d.alpha = 0.0f, d.a = NULL, d.b = NULL, d.epilogue = TJ_EPILOGUE_NONE;
  tj__oracle_gemm_desc(&d, c, NULL, NULL);
  ck_assert(c[0] == 1.5 && c[1] == -0.5);
}
END_TEST

/* The archs the tensor-core path is compiled for here, and whether each
 * needs the knob (a Hopper runtime takes the Hopper kernel by rule). */
static const struct {
  const char *arch;
  int knob;
} tc_archs[] = {
#if defined(TJ_PLATFORM_NVIDIA)
    {"sm_80", 0},
    {"sm_90", 1},
#else
    {"gfx90a", 0},
#endif
};

/* Every combination of the tensor-core path (A and B of one type, f16 or
 * bf16; C f16, bf16 or f32; every layout and epilogue) compiles for each
 * arch under its name, each a module of its own; f16 NN without
 * epilogue is tj_gemm_f16's by rule and the path's with the knob, and
 * alpha == 0 goes to the portable kernel. */
START_TEST(tc_path_every_combination_compiles)
{
  for (size_t a = 0; a < sizeof tc_archs / sizeof tc_archs[0]; a++) {
    tj_runtime *rt = open_for_arch(tc_archs[a].arch, NULL);
    tj__gemm_knobs k = *tj__gemm_knobs_of(rt);
    k.tc_only = tc_archs[a].knob;
    ck_assert_int_eq(tj__gemm_knobs_set(rt, &k), TJ_OK);
    uint64_t compiled = 0;
    for (int ta = 0; ta < 2; ta++)
      for (int tc = 0; tc < 3; tc++)
        for (int t = 0; t < 4; t++)
          for (int e = 0; e < 4; e++) {
            tj_gemm_desc d = valid(67, 45, 129);
            d.a_type = d.b_type = ab_types[ta];
            d.c_type = c_types[tc];
            d.trans_a = t & 1, d.trans_b = t >> 1;
            d.lda = d.trans_a ? d.m : d.k, d.ldb = d.trans_b ? d.k : d.n;
            with_epilogue(&d, e);
            const char *got = tj_gemm_kernel(rt, &d);
            ck_assert_msg(got != NULL, "%s: %s", tc_archs[a].arch,
                          tj_errmsg(rt));
            int f16_nn = d.a_type == TJ_DTYPE_F16 &&
                         d.c_type == TJ_DTYPE_F16 && t == 0 && e == 0;
            if (f16_nn && !tc_archs[a].knob) {
              ck_assert_ptr_eq(got, tj_gemm_f16_kernel(rt, 67, 45, 129,
                                                       FAKE(1), 129, FAKE(2),
                                                       45, FAKE(3), 45));
              continue;
            }
            char want[96];
            snprintf(want, sizeof want, "gemm_%s_%s_%s_%c%c_%s_tc",
                     type_names[d.a_type], type_names[d.b_type],
                     type_names[d.c_type], d.trans_a ? 't' : 'n',
                     d.trans_b ? 't' : 'n', epi_names[e]);
            ck_assert_str_eq(got, want);
            compiled++;
          }
    tj_stats st;
    ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
    ck_assert_uint_eq(st.compiles, compiled);
    ck_assert_uint_eq(compiled, tc_archs[a].knob ? 96 : 95);
    /* alpha == 0 reads neither operand: the portable kernel's. */
    tj_gemm_desc d = valid(3, 5, 7);
    d.alpha = 0.0f;
    ck_assert_str_eq(tj_gemm_kernel(rt, &d),
                     "gemm_bf16_bf16_f32_nn_none_portable");
    tj_runtime_close(rt);
  }
}
END_TEST

/* TJ_GEMM_TC_ONLY=1 sets the knob; any other value leaves the rule's. */
START_TEST(tc_knob_from_the_environment)
{
  const char *values[] = {"1", "0", "2", ""};
  for (int i = 0; i < 4; i++) {
    tj__gemm_knobs k;
    setenv("TJ_GEMM_TC_ONLY", values[i], 1);
    tj__gemm_knobs_from_env(&k);
    ck_assert_int_eq(k.tc_only, i == 0);
  }
  unsetenv("TJ_GEMM_TC_ONLY");
  ck_assert_int_eq(tj__gemm_knobs_rule.tc_only, 0);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("gemm_family");
  TCase *tc = test_case(s, "family", 600);
  tcase_add_test(tc, descriptors_are_checked);
  tcase_add_test(tc, host_calls_check_and_leave_outputs);
  tcase_add_test(tc, every_configuration_compiles);
  tcase_add_test(tc, configurations_are_cached);
  tcase_add_test(tc, hopper_kinds_compile);
  tcase_add_test(tc, one_line_operands_run_along_k);
  tcase_add_test(tc, bf16_conversions);
  tcase_add_test(tc, oracle_epilogues_by_hand);
  tcase_add_test(tc, tc_knob_from_the_environment);
  TCase *tcp = test_case(s, "tensorcore", 1200);
  tcase_add_test(tcp, tc_path_every_combination_compiles);
  return run_suite(s);
}
