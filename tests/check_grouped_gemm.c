/*
 * check_grouped_gemm.c: tj_grouped_gemm without a GPU: the descriptor's
 * checks (each refusal names what is wrong, and nothing is compiled for a
 * descriptor refused), the host call's checks of its offsets, every
 * configuration of the portable grouped kernel compiled for the test
 * archs under a name that says it, and the oracle on cases worked by
 * hand (an empty group, rows past the last group, each direction).
 */
#include "testutil.h"
#include "gemm/gemm.h"
#include "oracle.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Addresses that are never dereferenced (nothing launches here), far
 * apart so that no two operands overlap. */
#define FAKE(i) ((void *)((uintptr_t)(i) << 40))

/* A valid M-grouped descriptor: bf16 x bf16 -> f32, NN, E groups over m
 * rows, dense. */
static tj_grouped_gemm_desc valid_m(int64_t E, int64_t m, int64_t n,
                                    int64_t k)
{
  tj_grouped_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.size = sizeof d;
  d.a_type = d.b_type = TJ_DTYPE_BF16;
  d.c_type = TJ_DTYPE_F32;
  d.grouped = TJ_GROUPED_M;
  d.groups = E, d.offs = FAKE(7);
  d.m = m, d.n = n, d.k = k;
  d.alpha = 1.0f;
  d.a = FAKE(1), d.lda = k;
  d.b = FAKE(2), d.ldb = n, d.stride_b = k * n;
  d.c = FAKE(3), d.ldc = n;
  return d;
}

/* A valid K-grouped one: C is E x m x n, the reduction k cut in E. */
static tj_grouped_gemm_desc valid_k(int64_t E, int64_t m, int64_t n,
                                    int64_t k)
{
  tj_grouped_gemm_desc d = valid_m(E, m, n, k);
  d.grouped = TJ_GROUPED_K;
  d.trans_a = 1, d.lda = m; /* the weight gradient: X stored k x m */
  d.stride_b = 0, d.stride_c = m * n;
  return d;
}

/* tj_grouped_gemm_kernel refuses d with rc and a message containing
 * want, and so does tj_grouped_gemm. */
static void refused(tj_runtime *rt, const tj_grouped_gemm_desc *d, int rc,
                    const char *want)
{
  ck_assert_ptr_null(tj_grouped_gemm_kernel(rt, d));
  ck_assert_msg(strstr(tj_errmsg(rt), want) != NULL, "message \"%s\" lacks "
                "\"%s\"", tj_errmsg(rt), want);
  ck_assert_int_eq(tj_grouped_gemm(rt, NULL, d), rc);
  ck_assert_msg(strstr(tj_errmsg(rt), want) != NULL, "message \"%s\" lacks "
                "\"%s\"", tj_errmsg(rt), want);
}

START_TEST(types_flags_and_counts_are_checked)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_grouped_gemm_desc d = valid_m(4, 64, 8, 8);
  refused(rt, NULL, TJ_EINVAL, "NULL");
  d.a_type = 3;
  refused(rt, &d, TJ_EINVAL, "a_type=3");
  d = valid_m(4, 64, 8, 8), d.b_type = 0;
  refused(rt, &d, TJ_EINVAL, "b_type=0");
  d = valid_m(4, 64, 8, 8), d.c_type = 4;
  refused(rt, &d, TJ_EINVAL, "c_type=4");
  d = valid_m(4, 64, 8, 8), d.trans_a = -1;
  refused(rt, &d, TJ_EINVAL, "trans_a=-1");
  d = valid_m(4, 64, 8, 8), d.grouped = 0;
  refused(rt, &d, TJ_EINVAL, "grouped=0");
  d = valid_m(4, 64, 8, 8), d.grouped = 3;
  refused(rt, &d, TJ_EINVAL, "grouped=3");
  d = valid_m(4, 64, 8, 8), d.epilogue = 4;
  refused(rt, &d, TJ_EINVAL, "epilogue=4");
  d = valid_k(4, 8, 8, 64), d.epilogue = TJ_EPILOGUE_BIAS, d.bias = FAKE(4);
  refused(rt, &d, TJ_EINVAL, "TJ_EPILOGUE_NONE only");
  d = valid_m(0, 64, 8, 8);
  refused(rt, &d, TJ_EINVAL, "groups=0");
  d = valid_m(-3, 64, 8, 8);
  refused(rt, &d, TJ_EINVAL, "groups=-3");
  d = valid_m(65536, 64, 8, 8);
  refused(rt, &d, TJ_EINVAL, "groups=65536");
  d = valid_m(4, 0, 8, 8);
  refused(rt, &d, TJ_EINVAL, "m=0");
  d = valid_m(4, 64, -1, 8);
  refused(rt, &d, TJ_EINVAL, "n=-1");
  d = valid_k(4, 8, 8, 0);
  refused(rt, &d, TJ_EINVAL, "k=0");
  /* The grouped total is what int32 offsets reach; the grid's rows. */
  d = valid_k(4, 8, 8, (int64_t)INT32_MAX + 1), d.lda = 8;
  refused(rt, &d, TJ_ERANGE, "int32");
  d = valid_m(4, (int64_t)INT32_MAX + 1, 8, 8);
  refused(rt, &d, TJ_ERANGE, "int32");
  d = valid_m(4, (int64_t)65536 * 64, 8, 8);
  refused(rt, &d, TJ_ERANGE, "tiles");
  d = valid_k(4, (int64_t)65536 * 64, 8, 8), d.lda = d.m,
  d.stride_c = d.m * 8;
  refused(rt, &d, TJ_ERANGE, "tiles");
  tj_stats st;
  ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
  ck_assert_uint_eq(st.compiles, 0);
  tj_runtime_close(rt);
}
END_TEST

START_TEST(layouts_and_strides_are_checked)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_grouped_gemm_desc d = valid_m(4, 64, 8, 8);
  d.lda = 7;
  refused(rt, &d, TJ_EINVAL, "lda=7");
  /* With trans_a A is stored k x m: its row is m long. */
  d = valid_m(4, 64, 8, 8), d.trans_a = 1, d.lda = 8;
  refused(rt, &d, TJ_EINVAL, "lda=8");
  d = valid_m(4, 64, 8, 16), d.trans_b = 1, d.ldb = 8;
  refused(rt, &d, TJ_EINVAL, "ldb=8");
  d = valid_m(4, 64, 8, 8), d.ldc = 4;
  refused(rt, &d, TJ_EINVAL, "ldc=4");
  /* B's matrices one after another: a stride below one of them. */
  d = valid_m(4, 64, 8, 8), d.stride_b = 63;
  refused(rt, &d, TJ_EINVAL, "stride_b=63");
  d = valid_m(4, 64, 8, 8), d.ldb = 10, d.stride_b = 79;
  refused(rt, &d, TJ_EINVAL, "stride_b=79");
  d = valid_m(4, 64, 8, 8), d.stride_c = 64;
  refused(rt, &d, TJ_EINVAL, "stride_c=64");
  d = valid_k(4, 8, 8, 64), d.stride_c = 63;
  refused(rt, &d, TJ_EINVAL, "stride_c=63");
  d = valid_k(4, 8, 8, 64), d.stride_b = 64;
  refused(rt, &d, TJ_EINVAL, "stride_b=64");
  /* Spans past memory. */
  d = valid_m(4, 64, 8, 8), d.lda = INT64_MAX / 2;
  refused(rt, &d, TJ_ERANGE, "a spans");
  d = valid_m(4, 64, 8, 8), d.stride_b = INT64_MAX / 2;
  refused(rt, &d, TJ_ERANGE, "b spans");
  d = valid_m(4, 64, 8, 8), d.ldb = INT64_MAX / 4;
  refused(rt, &d, TJ_ERANGE, "spans more elements");
  tj_stats st;
  ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
  ck_assert_uint_eq(st.compiles, 0);
  tj_runtime_close(rt);
}
END_TEST

START_TEST(pointers_are_checked)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_grouped_gemm_desc d = valid_m(4, 64, 8, 8);
  d.offs = NULL;
  refused(rt, &d, TJ_EINVAL, "offs is NULL");
  d = valid_m(4, 64, 8, 8), d.offs = (const int32_t *)((char *)FAKE(7) + 2);
  refused(rt, &d, TJ_EINVAL, "offs is not 4-byte aligned");
  d = valid_m(4, 64, 8, 8), d.a = NULL;
  refused(rt, &d, TJ_EINVAL, "a is NULL");
  d = valid_k(4, 8, 8, 64), d.c = NULL;
  refused(rt, &d, TJ_EINVAL, "c is NULL");
  d = valid_m(4, 64, 8, 8), d.c = (char *)FAKE(3) + 2;
  refused(rt, &d, TJ_EINVAL, "c is not 4-byte aligned");
  d = valid_m(4, 64, 8, 8), d.b = (char *)FAKE(2) + 1;
  refused(rt, &d, TJ_EINVAL, "b is not 2-byte aligned");
  /* C overlaps no input, the offsets included; B's last matrix counts. */
  d = valid_m(4, 64, 8, 8), d.c = (char *)FAKE(1) + 64;
  refused(rt, &d, TJ_EINVAL, "a overlaps c");
  d = valid_m(4, 64, 8, 8), d.offs = (const int32_t *)((char *)FAKE(3) + 8);
  refused(rt, &d, TJ_EINVAL, "overlaps offs");
  d = valid_m(4, 64, 8, 8), d.c = (char *)FAKE(2) + 3 * 64 * 2;
  refused(rt, &d, TJ_EINVAL, "b overlaps c");
  d = valid_k(4, 8, 8, 64), d.offs = (const int32_t *)((char *)FAKE(3) + 4 * 3 * 64);
  refused(rt, &d, TJ_EINVAL, "overlaps offs");
  /* Each epilogue's pointers: needed, optional or refused. */
  d = valid_m(4, 64, 8, 8), d.epilogue = TJ_EPILOGUE_BIAS;
  refused(rt, &d, TJ_EINVAL, "bias is NULL");
  d = valid_m(4, 64, 8, 8), d.epilogue = TJ_EPILOGUE_DGELU;
  refused(rt, &d, TJ_EINVAL, "aux is NULL");
  d = valid_m(4, 64, 8, 8), d.bias = FAKE(4);
  refused(rt, &d, TJ_EINVAL, "bias is set");
  d = valid_m(4, 64, 8, 8), d.aux = FAKE(5), d.ldaux = 8;
  refused(rt, &d, TJ_EINVAL, "aux is set");
  d = valid_m(4, 64, 8, 8), d.epilogue = TJ_EPILOGUE_BIAS, d.bias = FAKE(4),
  d.bias_grad = FAKE(6);
  refused(rt, &d, TJ_EINVAL, "bias_grad is set");
  d = valid_m(4, 64, 8, 8), d.epilogue = TJ_EPILOGUE_BIAS_GELU,
  d.bias = FAKE(4), d.aux = FAKE(5), d.ldaux = 7;
  refused(rt, &d, TJ_EINVAL, "ldaux=7");
  /* bias is E x n: its last group's row counts. */
  d = valid_m(4, 64, 8, 8), d.epilogue = TJ_EPILOGUE_BIAS_GELU,
  d.bias = FAKE(4), d.aux = (char *)FAKE(4) + 3 * 8 * 4, d.ldaux = 8;
  refused(rt, &d, TJ_EINVAL, "bias overlaps aux");
  d = valid_m(4, 64, 8, 8), d.epilogue = TJ_EPILOGUE_DGELU, d.aux = FAKE(5),
  d.ldaux = 8, d.bias_grad = (float *)((char *)FAKE(5) + 16);
  refused(rt, &d, TJ_EINVAL, "aux overlaps bias_grad");
  /* A size this library does not know, and a field past its own. */
  d = valid_m(4, 64, 8, 8), d.size = 8;
  refused(rt, &d, TJ_EINVAL, "size is 8");
  unsigned char big[sizeof d + 8];
  memset(big, 0, sizeof big);
  d = valid_m(4, 64, 8, 8), d.size = sizeof big;
  memcpy(big, &d, sizeof d);
  big[sizeof d] = 1;
  ck_assert_ptr_null(
      tj_grouped_gemm_kernel(rt, (const tj_grouped_gemm_desc *)big));
  tj_stats st;
  ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
  ck_assert_uint_eq(st.compiles, 0);
  /* Valid ones on a compile-only runtime: no GPU to launch on. */
  d = valid_m(4, 64, 8, 8);
  ck_assert_int_eq(tj_grouped_gemm(rt, NULL, &d), TJ_ENODEVICE);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "tj_grouped_gemm"));
  d = valid_k(1, 1, 1, 1);
  ck_assert_int_eq(tj_grouped_gemm(rt, NULL, &d), TJ_ENODEVICE);
  tj_runtime_close(rt);
}
END_TEST

/* The host call checks as the device call does, then its offsets (host
 * memory there); refused or without a GPU, it leaves the caller's output
 * as it was. */
START_TEST(host_calls_check_offsets_and_leave_outputs)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  uint16_t a[6 * 3], b[3 * 3 * 5];
  float c[6 * 5];
  int32_t offs[3] = {2, 2, 6};
  for (int i = 0; i < 30; i++)
    c[i] = (float)i;
  tj_grouped_gemm_desc d = valid_m(3, 6, 5, 3);
  d.a = a, d.b = b, d.c = c, d.offs = offs;
  ck_assert_int_eq(tj_grouped_gemm_host(rt, &d), TJ_ENODEVICE);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "tj_grouped_gemm_host"));
  struct {
    int32_t offs[3];
    const char *want;
  } bad[] = {
      {{-1, 2, 6}, "offs[0]=-1 is below 0"},
      {{3, 2, 6}, "offs[1]=2 is less than offs[0]=3"},
      {{2, 2, 7}, "offs[2]=7 is past m=6"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memcpy(offs, bad[i].offs, sizeof offs);
    ck_assert_int_eq(tj_grouped_gemm_host(rt, &d), TJ_EINVAL);
    ck_assert_msg(strstr(tj_errmsg(rt), bad[i].want) != NULL,
                  "message \"%s\" lacks \"%s\"", tj_errmsg(rt), bad[i].want);
  }
  /* K-grouped: the offsets cut k. */
  tj_grouped_gemm_desc k = valid_k(3, 2, 5, 3);
  int32_t koffs[3] = {1, 4, 4};
  k.a = a, k.b = b, k.c = c, k.offs = koffs;
  ck_assert_int_eq(tj_grouped_gemm_host(rt, &k), TJ_EINVAL);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "offs[1]=4 is past k=3"));
  d.offs = offs, d.ldc = 4;
  ck_assert_int_eq(tj_grouped_gemm_host(rt, &d), TJ_EINVAL);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "ldc=4"));
  ck_assert_int_eq(tj_grouped_gemm_host(rt, NULL), TJ_EINVAL);
  for (int i = 0; i < 30; i++)
    ck_assert(c[i] == (float)i);
  tj_runtime_close(rt);
}
END_TEST

static const int ab_types[] = {TJ_DTYPE_F16, TJ_DTYPE_BF16};
static const char *const type_names[] = {NULL, "f16", "bf16", "f32"};
static const char *const epi_names[] = {"none", "bias", "biasgelu", "dgelu"};

/* d with epilogue e and the pointers it needs. */
static void with_epilogue(tj_grouped_gemm_desc *d, int e)
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

/* The path d's configuration runs on arch: on sm_90 an M-grouped call,
 * or a K-grouped one with A stored K x M and B K x N, with A and B of
 * one type that TMA reads (the descriptors here: aligned, rows and
 * matrices a multiple of 8 elements apart), alpha != 0, the Hopper
 * kernel in 128 x 128 tiles (these small shapes); else the portable
 * kernel. */
static const char *path_of(const char *arch, const tj_grouped_gemm_desc *d)
{
  int tma = d->lda % 8 == 0 && d->ldb % 8 == 0 && d->stride_b % 8 == 0;
  int kind = d->grouped == TJ_GROUPED_M || (d->trans_a && !d->trans_b);
  if (strcmp(arch, "sm_90") != 0 || !kind || d->a_type != d->b_type ||
      d->alpha == 0.0f || !tma)
    return "portable";
  return "sm90a_128x128";
}

/* d's configuration compiled on rt under the name that says it, for the
 * path it runs on (path NULL: path_of's). */
static void compiles_on(tj_runtime *rt, const char *arch,
                        const tj_grouped_gemm_desc *d, const char *path)
{
  const char *got = tj_grouped_gemm_kernel(rt, d);
  ck_assert_msg(got != NULL, "%s: %s", arch, tj_errmsg(rt));
  char want[96];
  snprintf(want, sizeof want, "gemm_grouped_%c_%s_%s_%s_%c%c_%s_%s",
           d->grouped == TJ_GROUPED_M ? 'm' : 'k', type_names[d->a_type],
           type_names[d->b_type], type_names[d->c_type],
           d->trans_a ? 't' : 'n', d->trans_b ? 't' : 'n',
           epi_names[d->epilogue], path ? path : path_of(arch, d));
  ck_assert_str_eq(got, want);
}

static void compiles_as_named(tj_runtime *rt, const char *arch,
                              const tj_grouped_gemm_desc *d)
{
  compiles_on(rt, arch, d, NULL);
}

/* The archs whose compilers each configuration must pass: those of
 * $TJ_TEST_ARCHS (commas or spaces between them; the HIP 5.7 lane of CI
 * sets gfx90a, gfx942, gfx1100 and gfx1101), else gfx90a and gfx1030 on
 * AMD (every HIP from 5.2 on knows them), sm_90 on NVIDIA. */
#if defined(TJ_PLATFORM_NVIDIA)
#define DEFAULT_ARCHS "sm_90"
#else
#define DEFAULT_ARCHS "gfx90a,gfx1030"
#endif
#define MAX_ARCHS 16
static char *archs[MAX_ARCHS];
static int n_archs;

static void read_archs(void)
{
  const char *v = getenv("TJ_TEST_ARCHS");
  char *list = strdup(v && *v ? v : DEFAULT_ARCHS), *save = NULL;
  for (char *t = strtok_r(list, ", \t", &save); t && n_archs < MAX_ARCHS;
       t = strtok_r(NULL, ", \t", &save))
    archs[n_archs++] = strdup(t);
  free(list);
}

/* rt with the grouped Hopper kernels on (1) or off (0, the benchmark's
 * knob; on by the rule). */
static tj_runtime *grouped_sm90a(tj_runtime *rt, int on)
{
  tj__gemm_knobs k = tj__gemm_knobs_rule;
  k.grouped_sm90a = on;
  ck_assert_int_eq(tj__gemm_knobs_set(rt, &k), TJ_OK);
  return rt;
}

/* Every layout and epilogue of the M-grouped call (bf16 to bf16), every
 * layout of the K-grouped one (bf16 to f32), and every pair of types in
 * each direction: each a module of its own, compiled for the arch, the
 * entry named from its configuration. */
START_TEST(every_configuration_compiles)
{
  const char *arch = archs[_i];
  tj_runtime *rt = open_for_arch(arch, NULL);
  int built = 0;
  for (int t = 0; t < 4; t++) {
    for (int e = 0; e < 4; e++) {
      tj_grouped_gemm_desc d = valid_m(3, 8, 8, 8);
      d.c_type = TJ_DTYPE_BF16;
      d.trans_a = t & 1, d.trans_b = t >> 1;
      with_epilogue(&d, e);
      compiles_as_named(rt, arch, &d), built++;
    }
    tj_grouped_gemm_desc d = valid_k(3, 8, 8, 8);
    d.trans_a = t & 1, d.trans_b = t >> 1;
    compiles_as_named(rt, arch, &d), built++;
  }
  for (int ta = 0; ta < 2; ta++)
    for (int tc = TJ_DTYPE_F16; tc <= TJ_DTYPE_F32; tc++) {
      tj_grouped_gemm_desc m = valid_m(3, 8, 8, 8), k = valid_k(3, 8, 8, 8);
      /* f16 throughout, and bf16 with f16 (bf16 throughout above). */
      m.a_type = k.a_type = ab_types[ta];
      m.b_type = k.b_type = TJ_DTYPE_F16;
      m.c_type = k.c_type = tc;
      compiles_as_named(rt, arch, &m), built++;
      compiles_as_named(rt, arch, &k), built++;
    }
  tj_stats st;
  ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
  ck_assert_uint_eq(st.compiles, (uint64_t)built);
  /* Asked again: the runtime's own module, nothing compiled. */
  tj_grouped_gemm_desc d = valid_k(3, 8, 8, 8);
  compiles_as_named(rt, arch, &d);
  ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
  ck_assert_uint_eq(st.compiles, (uint64_t)built);
  tj_runtime_close(rt);
}
END_TEST

/* On sm_90 the M-grouped calls that TMA can read run the Hopper kernel
 * (each layout and epilogue above), and so do the K-grouped ones with A
 * stored K x M and B K x N; those it cannot read, alpha == 0, A and B of
 * two types and the other K-grouped layouts stay portable, and a large
 * call takes the 128 x 256 tile. */
START_TEST(hopper_routing)
{
  if (strcmp(TEST_ARCH, "sm_90") != 0)
    return;
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_grouped_gemm_desc d = valid_m(3, 40, 24, 20);
  d.c_type = TJ_DTYPE_BF16;
  with_epilogue(&d, TJ_EPILOGUE_BIAS);
  d.k = 24, d.lda = 24, d.stride_b = 24 * 24;
  compiles_on(rt, "sm_90", &d, "sm90a_128x128"); /* the rule */
  rt = grouped_sm90a(rt, 0);
  compiles_on(rt, "sm_90", &d, "portable"); /* the knob off */
  rt = grouped_sm90a(rt, 1);
  compiles_on(rt, "sm_90", &d, "sm90a_128x128");
  d.k = 20, d.lda = 20, d.stride_b = 24 * 20;
  compiles_on(rt, "sm_90", &d, "portable"); /* lda 20 */
  d.k = 24, d.lda = 24, d.stride_b = 24 * 24;
  compiles_on(rt, "sm_90", &d, "sm90a_128x128");
  d.a = (const char *)d.a + 8; /* A not 16-byte aligned */
  compiles_on(rt, "sm_90", &d, "portable");
  d.a = FAKE(1), d.stride_b = 24 * 24 + 4; /* B_1 not 16-byte aligned */
  compiles_on(rt, "sm_90", &d, "portable");
  d.stride_b = 24 * 24, d.alpha = 0.0f;
  compiles_on(rt, "sm_90", &d, "portable");
  d.alpha = 1.0f, d.ldc = 25; /* C need not be aligned */
  compiles_on(rt, "sm_90", &d, "sm90a_128x128");
  tj_grouped_gemm_desc big = valid_m(64, 98304, 2048, 2048);
  big.c_type = TJ_DTYPE_BF16;
  compiles_on(rt, "sm_90", &big, "sm90a_128x256");
  big.n = big.ldb = big.ldc = 1408, big.stride_b = 2048 * 1408;
  compiles_on(rt, "sm_90", &big, "sm90a_128x128");
  /* The weight gradient: E x 1024 x 1408 from 8192 rows. */
  tj_grouped_gemm_desc w = valid_k(8, 1024, 1408, 8192);
  w.c_type = TJ_DTYPE_BF16;
  compiles_on(rt, "sm_90", &w, "sm90a_128x128");
  w.n = w.ldb = w.ldc = 1536, w.stride_c = 1024 * 1536;
  compiles_on(rt, "sm_90", &w, "sm90a_128x256");
  w.lda = 1028; /* rows of A not 16 bytes apart */
  compiles_on(rt, "sm_90", &w, "portable");
  w.lda = 1024, w.trans_b = 1, w.ldb = 8192;
  compiles_on(rt, "sm_90", &w, "portable");
  w.trans_b = 0, w.trans_a = 0, w.lda = 8192, w.ldb = 1536;
  compiles_on(rt, "sm_90", &w, "portable");
  tj_runtime_close(rt);
}
END_TEST

/* The configuration's code, cached: a new runtime on the same cache
 * compiles nothing for it. */
START_TEST(configurations_are_cached)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_grouped_gemm_desc d = valid_m(5, 40, 10, 11);
  d.trans_b = 1, d.ldb = 11, d.stride_b = 10 * 11;
  with_epilogue(&d, TJ_EPILOGUE_DGELU);
  for (int i = 0; i < 2; i++) {
    tj_runtime *rt = open_compile_only(path, 0);
    ck_assert_str_eq(tj_grouped_gemm_kernel(rt, &d),
                     "gemm_grouped_m_bf16_bf16_f32_nt_dgelu_portable");
    tj_stats st;
    ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
    ck_assert_uint_eq(st.compiles, i == 0 ? 1 : 0);
    tj_runtime_close(rt);
  }
  free(path);
  free(dir);
}
END_TEST

/* The M-grouped oracle by hand: 3 groups over 4 rows, offs {1, 1, 3}
 * (group 1 empty, row 3 past the last group), k = 1, n = 2, A = [1 2 3
 * 4]^T, B[e] = [e+1, -(e+1)], bias[e] = [10 e, 1], beta 0.5 on C = 1. */
START_TEST(oracle_m_grouped_by_hand)
{
  float a[] = {1, 2, 3, 4}, b[] = {1, -1, 2, -2, 3, -3};
  float c0[8], bias[] = {0, 1, 10, 1, 20, 1}, x[8];
  int32_t offs[] = {1, 1, 3};
  for (int i = 0; i < 8; i++)
    c0[i] = 1, x[i] = 0;
  tj_grouped_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.a_type = d.b_type = d.c_type = TJ_DTYPE_F32; /* host only */
  d.grouped = TJ_GROUPED_M, d.groups = 3, d.offs = offs;
  d.m = 4, d.n = 2, d.k = 1, d.alpha = 1.0f, d.beta = 0.5f;
  d.a = a, d.lda = 1, d.b = b, d.ldb = 2, d.stride_b = 2;
  d.c = c0, d.ldc = 2;
  double c[8], aux[8], sums[6];
  tj__oracle_grouped_gemm(&d, c, NULL, NULL);
  /* Row 0: group 0 (B[0]); rows 1, 2: group 2 (B[2]); row 3 as it was. */
  double want[] = {1.5, -0.5, 6.5, -5.5, 9.5, -8.5, 1, 1};
  for (int i = 0; i < 8; i++)
    ck_assert_msg(c[i] == want[i], "c[%d] = %g, want %g", i, c[i], want[i]);
  d.epilogue = TJ_EPILOGUE_BIAS_GELU, d.bias = bias, d.aux = x, d.ldaux = 2;
  tj__oracle_grouped_gemm(&d, c, aux, NULL);
  ck_assert(aux[0] == 1.5 && aux[1] == 0.5); /* bias row 0 */
  ck_assert(aux[2] == 26.5 && aux[5] == -7.5); /* bias row 2 */
  ck_assert(aux[6] == 0 && aux[7] == 0 && c[6] == 1); /* row 3 untouched */
  ck_assert(c[0] == tj__gelu(1.5) && c[5] == tj__gelu(-7.5));
  d.epilogue = TJ_EPILOGUE_DGELU, d.bias = NULL;
  x[0] = 1, x[2] = 0;
  tj__oracle_grouped_gemm(&d, c, NULL, sums);
  ck_assert(c[0] == 1.5 * tj__gelu_grad(1.0) && c[2] == 6.5 * 0.5);
  ck_assert(fabs(sums[0] - c[0]) < 1e-6 && sums[1] == -0.25);
  ck_assert(sums[2] == 0 && sums[3] == 0); /* the empty group */
  ck_assert(sums[4] == c[2] + c[4] && sums[5] == c[3] + c[5]);
}
END_TEST

/* The K-grouped oracle by hand: op(A) = A^T (A stored k x m, m = 1),
 * k = 3 cut {2, 2, 3}: C[0] = a0 b0 + a1 b1, C[1] = 0 (empty, beta 0),
 * C[2] = a2 b2; C's matrices 3 elements apart, n = 2. */
START_TEST(oracle_k_grouped_by_hand)
{
  float a[] = {1, 2, 3}, b[] = {1, 10, 100, 1000, -1, -2};
  float c0[9];
  int32_t offs[] = {2, 2, 3};
  tj_grouped_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.a_type = d.b_type = d.c_type = TJ_DTYPE_F32;
  d.grouped = TJ_GROUPED_K, d.groups = 3, d.offs = offs;
  d.m = 1, d.n = 2, d.k = 3, d.alpha = 2.0f, d.trans_a = 1;
  d.a = a, d.lda = 1, d.b = b, d.ldb = 2, d.c = c0, d.ldc = 2, d.stride_c = 3;
  double c[6];
  tj__oracle_grouped_gemm(&d, c, NULL, NULL);
  double want[] = {2 * 201, 2 * 2010, 0, 0, -6, -12};
  for (int i = 0; i < 6; i++)
    ck_assert_msg(c[i] == want[i], "c[%d] = %g, want %g", i, c[i], want[i]);
  for (int i = 0; i < 9; i++)
    c0[i] = (float)i;
  d.beta = 1.0f; /* C[e][0][j] at 3 e + j */
  tj__oracle_grouped_gemm(&d, c, NULL, NULL);
  ck_assert(c[0] == 402 && c[1] == 4021 && c[2] == 3 && c[3] == 4);
  ck_assert(c[4] == -6 + 6 && c[5] == -12 + 7);
}
END_TEST

int main(void)
{
  read_archs();
  Suite *s = suite_create("grouped_gemm");
  TCase *tc = test_case(s, "checks", 120);
  tcase_add_test(tc, types_flags_and_counts_are_checked);
  tcase_add_test(tc, layouts_and_strides_are_checked);
  tcase_add_test(tc, pointers_are_checked);
  tcase_add_test(tc, host_calls_check_offsets_and_leave_outputs);
  tcase_add_test(tc, oracle_m_grouped_by_hand);
  tcase_add_test(tc, oracle_k_grouped_by_hand);
  TCase *cc = test_case(s, "configurations", 1200);
  tcase_add_loop_test(cc, every_configuration_compiles, 0, n_archs);
  tcase_add_test(cc, configurations_are_cached);
  tcase_add_test(cc, hopper_routing);
  return run_suite(s);
}
