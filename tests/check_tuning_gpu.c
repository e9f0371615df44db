/*
 * check_tuning_gpu.c: GEMM tuning on a GPU.  A tj_gemm_f16 call never
 * tunes or records anything, and agrees with the CPU oracle; on sm_90
 * tj_gemm_f16_tune times every candidate, reports them fastest first and
 * stores its decision, which this runtime and a later one use, and
 * every candidate passes the tuner's check against the rule's choice
 * (none set aside); tj_gemm_tune does the same for one op of the
 * family, whose calls then plan with its decision and compute what the
 * oracle does.  On other GPUs nothing is tuned.  Exits 77 (skip)
 * without a GPU.  The times themselves are never asserted.
 */
#include "testgpu.h"
#include "testsql.h"
#include "testknobs.h"
#include "gemm/plan.h"
#include "oracle.h"

#include <math.h>

static char *dir, *path;

static void setup(void)
{
  dir = test_tmpdir();
  path = test_path(dir, "cache.db");
}

static void teardown(void)
{
  free(path);
  free(dir);
}

/* A runtime on the GPU with the test's cache, planning with the knob
 * var=value (var NULL: the rule's knobs). */
static tj_runtime *open_tuning(const char *var, const char *value)
{
  if (var)
    setenv(var, value, 1);
  tj_runtime *rt = open_gpu_on(path);
  if (var)
    unsetenv(var);
  return rt;
}

static int hopper(tj_runtime *rt)
{
  return strcmp(tj_runtime_arch(rt), "sm_90") == 0;
}

static void random_f16(uint16_t *p, size_t n, uint64_t seed)
{
  for (size_t i = 0; i < n; i++) {
    double u = (double)(next_random(&seed) >> 11) * 0x1p-53;
    p[i] = tj_f32_to_f16((float)(2 * u - 1));
  }
}

static void *to_device(const void *host, size_t bytes)
{
  void *d = NULL;
  CHECK_HIP(hipMalloc(&d, bytes));
  CHECK_HIP(hipMemcpyHtoD(d, (void *)host, bytes));
  return d;
}

/* C = A * B + beta * C0 on the GPU (on a stream of its own), checked
 * element by element against the oracle. */
static void gemm_matches_oracle(tj_runtime *rt, int M, int N, int K,
                                float beta, uint64_t seed)
{
  size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
  uint16_t *A = xmalloc(na * 2), *B = xmalloc(nb * 2), *C0 = xmalloc(nc * 2);
  uint16_t *C = xmalloc(nc * 2);
  double *want = xmalloc(nc * sizeof *want);
  random_f16(A, na, seed);
  random_f16(B, nb, seed + 1);
  random_f16(C0, nc, seed + 2);
  void *dA = to_device(A, na * 2), *dB = to_device(B, nb * 2);
  void *dC = to_device(C0, nc * 2);
  hipStream_t stream;
  CHECK_HIP(hipStreamCreate(&stream));
  CHECK_TJ(rt, tj_gemm_f16(rt, stream, M, N, K, 1.0f, dA, K, dB, N, beta, dC,
                           N));
  CHECK_HIP(hipStreamSynchronize(stream));
  CHECK_HIP(hipMemcpyDtoH(C, dC, nc * 2));
  tj__oracle_gemm(M, N, K, 1.0, A, K, B, N, beta, C0, N, want);
  for (size_t i = 0; i < nc; i++) {
    double got = tj_f16_to_f32(C[i]);
    if (!(fabs(got - want[i]) <= 0x1p-10 * fabs(want[i]) + 1e-3))
      ck_abort_msg("%dx%dx%d: C[%zu] = %g, want %g", M, N, K, i, got,
                   want[i]);
  }
  CHECK_HIP(hipStreamDestroy(stream));
  hipFree(dA);
  hipFree(dB);
  hipFree(dC);
  free(A); free(B); free(C0); free(C); free(want);
}

/* Calls run the heuristic's choice where no decision was made: they
 * never time anything nor record a decision, whatever the shape class. */
START_TEST(calls_never_tune)
{
  tj_runtime *rt = open_tuning(NULL, NULL);
  gemm_matches_oracle(rt, 128, 1024, 2048, 0.5f, 10);
  gemm_matches_oracle(rt, 256, 512, 1024, 0.0f, 21);
  gemm_matches_oracle(rt, 8, 4096, 1024, 1.0f, 22);
  tj_runtime_close(rt);
  rt = open_tuning(NULL, NULL);
  gemm_matches_oracle(rt, 128, 1024, 2048, 0.0f, 11);
  tj_runtime_close(rt);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM tuning"), 0);
}
END_TEST

typedef struct got_tuning {
  int calls, num_times, sorted, chosen_first, known;
  int set_aside, tma_store; /* untimed; timed with a TMA store */
  int rule_timed; /* the rule's choice is named, and among the timed */
  char config[64], cls[64], rule[64];
} got_tuning;

static int keep(const tj_tuning *t, void *ctx)
{
  got_tuning *g = ctx;
  g->calls++;
  g->num_times = t->num_times;
  g->known = t->known;
  g->sorted = 1;
  g->set_aside = g->tma_store = g->rule_timed = 0;
  for (int i = 1; i < t->num_times; i++)
    g->sorted &= t->times[i - 1].ms <= t->times[i].ms;
  for (int i = 0; i < t->num_times; i++) {
    tj__gemm_config c;
    int has = tj__gemm_config_parse(t->times[i].config, &c);
    g->set_aside += t->times[i].runs == 0;
    g->tma_store += has && c.tma_store && t->times[i].runs > 0;
    g->rule_timed |= t->rule && strcmp(t->rule, t->times[i].config) == 0 &&
                     t->times[i].runs > 0;
  }
  snprintf(g->rule, sizeof g->rule, "%s", t->rule ? t->rule : "(null)");
  g->chosen_first = t->num_times > 0 &&
                    strcmp(t->times[0].config, t->config) == 0;
  snprintf(g->config, sizeof g->config, "%s", t->config);
  snprintf(g->cls, sizeof g->cls, "%s", t->shape_class);
  return 0;
}

START_TEST(tune_ahead_times_every_candidate)
{
  tj_runtime *rt = open_tuning(NULL, NULL);
  got_tuning g = {0};
  int rc = tj_gemm_f16_tune(rt, 128, 4096, 4096, keep, &g);
  if (!hopper(rt)) {
    ck_assert_int_eq(rc, TJ_EINVAL);
    tj_runtime_close(rt);
    return;
  }
  ck_assert_msg(rc == TJ_OK, "%s", tj_errmsg(rt));
  ck_assert_int_eq(g.calls, 1);
  ck_assert_int_ge(g.num_times, 4); /* two tiles and splits */
  ck_assert(g.sorted && g.chosen_first && g.known);
  /* Every candidate computed what the rule's choice does (the tuner's
   * check) and was timed, the seven TMA-store epilogues too. */
  ck_assert_int_eq(g.set_aside, 0);
  ck_assert_int_eq(g.tma_store, 7);
  /* The decision names the rule's choice, which was timed with the rest. */
  ck_assert(g.rule_timed);
  ck_assert_str_eq(g.rule, heuristic_name(rt->sms, 128, 4096, 4096));
  char want_cls[TJ__SHAPE_CLASS_MAX];
  snprintf(want_cls, sizeof want_cls, "t1x32x64/c4/s%d", rt->sms);
  ck_assert_str_eq(g.cls, want_cls);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM tuning WHERE origin "
                                  "= 'tune' AND shape_class LIKE "
                                  "'t1x32x64/c4/s%'"),
                   1);
  /* The stored row names it too, on a line of its own. */
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM tuning WHERE instr("
                                  "measured, char(10) || 'rule' || char(9)) "
                                  "> 0"),
                   1);
  gemm_matches_oracle(rt, 128, 4096, 4096, 0.0f, 31);
  tj_runtime_close(rt);
  rt = open_tuning(NULL, NULL);
  /* Another shape: the seven unsplit tiles storing through TMA. */
  got_tuning plain = {0};
  ck_assert_int_eq(tj_gemm_f16_tune(rt, 256, 512, 1024, keep, &plain), TJ_OK);
  ck_assert(plain.num_times >= 2 && plain.set_aside == 0);
  ck_assert(plain.tma_store == 7);
  tj__gemm_config c;
  ck_assert(tj__gemm_config_parse(g.config, &c));
  uint16_t *fake = (uint16_t *)((uintptr_t)1 << 40);
  ck_assert_int_eq(tj_gemm_f16_split(rt, 128, 4096, 4096, fake, 4096,
                                     fake + ((size_t)1 << 30), 4096,
                                     fake + ((size_t)2 << 30), 4096),
                   c.split);
  /* M <= 16: the skinny kernel's nine configurations, each timed; the
   * winner is what the next call runs, and it matches the oracle. */
  got_tuning s = {0};
  ck_assert_int_eq(tj_gemm_f16_tune(rt, 8, 4096, 4096, keep, &s), TJ_OK);
  ck_assert_int_eq(s.num_times, 9);
  ck_assert(s.sorted && s.chosen_first && s.known);
  snprintf(want_cls, sizeof want_cls, "t0x32x64/c4/s%d", rt->sms);
  ck_assert_str_eq(s.cls, want_cls);
  tj__gemm_config sc;
  ck_assert(tj__gemm_config_parse(s.config, &sc));
  ck_assert_int_eq(sc.kind, GEMM_KIND_SKINNY);
  char code[TJ__GEMM_CONFIG_NAME_MAX], want[TJ__GEMM_NAME_MAX];
  tj__gemm_config_code(sc.kind, sc.bn, sc.split, code);
  snprintf(want, sizeof want, "gemm_f16_f16_f16_nn_none_%s", code);
  ck_assert_str_eq(tj_gemm_f16_kernel(rt, 8, 4096, 4096, fake, 4096,
                                      fake + ((size_t)1 << 30), 4096,
                                      fake + ((size_t)2 << 30), 4096),
                   want);
  gemm_matches_oracle(rt, 8, 4096, 4096, 0.5f, 37);
  tj_runtime_close(rt);
  /* TJ_GEMM_TMA_STORE=0: no TMA store is timed, not even the
   * heuristic's, whose tiles are timed once, storing directly: the plain
   * tune's candidates less the seven _tmastore ones. */
  rt = open_tuning("TJ_GEMM_TMA_STORE", "0");
  got_tuning direct = {0};
  ck_assert_int_eq(tj_gemm_f16_tune(rt, 256, 512, 1024, keep, &direct),
                   TJ_OK);
  ck_assert(direct.set_aside == 0 && direct.tma_store == 0);
  ck_assert_int_eq(direct.num_times, plain.num_times - 7);
  tj_runtime_close(rt);
  /* Nothing to tune where the Hopper kernels do not run. */
  rt = open_tuning("TJ_GEMM_SM90A", "0");
  ck_assert_int_eq(tj_gemm_f16_tune(rt, 8, 4096, 4096, keep, &g), TJ_EINVAL);
  ck_assert_int_eq(tj_gemm_f16_tune(rt, 128, 4096, 4096, keep, &g), TJ_EINVAL);
  tj_runtime_close(rt);
}
END_TEST

/* A bf16 NT descriptor of M x N x K on A, B, C (dense). */
static tj_gemm_desc bf16_nt(int M, int N, int K, const void *A,
                            const void *B, void *C)
{
  tj_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.size = sizeof d;
  d.a_type = d.b_type = d.c_type = TJ_DTYPE_BF16;
  d.trans_b = 1;
  d.m = M, d.n = N, d.k = K, d.alpha = 1.0f;
  d.a = A, d.lda = K, d.b = B, d.ldb = K, d.c = C, d.ldc = N;
  return d;
}

/* d (bf16 NT) on random inputs on the GPU, element by element against
 * the oracle. */
static void bf16_nt_matches_oracle(tj_runtime *rt, int M, int N, int K)
{
  size_t na = (size_t)M * K, nb = (size_t)N * K, nc = (size_t)M * N;
  uint16_t *A = xmalloc(na * 2), *B = xmalloc(nb * 2), *C = xmalloc(nc * 2);
  double *want = xmalloc(nc * sizeof *want);
  uint64_t seed = 41;
  for (size_t i = 0; i < na + nb; i++) {
    double u = (double)(next_random(&seed) >> 11) * 0x1p-53;
    (i < na ? A : B)[i < na ? i : i - na] = tj_f32_to_bf16((float)(2 * u - 1));
  }
  void *dA = to_device(A, na * 2), *dB = to_device(B, nb * 2), *dC = NULL;
  CHECK_HIP(hipMalloc(&dC, nc * 2));
  tj_gemm_desc d = bf16_nt(M, N, K, dA, dB, dC);
  CHECK_TJ(rt, tj_gemm(rt, NULL, &d));
  CHECK_HIP(hipDeviceSynchronize());
  CHECK_HIP(hipMemcpyDtoH(C, dC, nc * 2));
  tj_gemm_desc h = bf16_nt(M, N, K, A, B, C);
  tj__oracle_gemm_desc(&h, want, NULL, NULL);
  for (size_t i = 0; i < nc; i++) {
    double got = tj_bf16_to_f32(C[i]);
    if (!(fabs(got - want[i]) <= 0x1p-7 * fabs(want[i]) + 1e-2))
      ck_abort_msg("bf16 nt %dx%dx%d: C[%zu] = %g, want %g", M, N, K, i, got,
                   want[i]);
  }
  hipFree(dA);
  hipFree(dB);
  hipFree(dC);
  free(A); free(B); free(C); free(want);
}

/* tj_gemm_tune of bf16 NT: every candidate passes the check and is
 * timed, the decision is stored under the op, and the op's calls (in
 * this runtime and the next) plan with it and match the oracle. */
START_TEST(family_tune_decides_for_its_op)
{
  const int M = 256, N = 512, K = 1024;
  tj_runtime *rt = open_tuning(NULL, NULL);
  got_tuning g = {0};
  tj_gemm_desc d = bf16_nt(M, N, K, NULL, NULL, NULL);
  int rc = tj_gemm_tune(rt, &d, keep, &g);
  if (!hopper(rt)) {
    ck_assert_int_eq(rc, TJ_EINVAL);
    tj_runtime_close(rt);
    return;
  }
  ck_assert_msg(rc == TJ_OK, "%s", tj_errmsg(rt));
  ck_assert_int_eq(g.calls, 1);
  ck_assert_int_ge(g.num_times, 2);
  ck_assert(g.sorted && g.chosen_first && g.known && g.rule_timed);
  ck_assert_int_eq(g.set_aside, 0);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM tuning WHERE op = "
                                  "'gemm_bf16_bf16_bf16_nt_none' AND origin "
                                  "= 'tune'"),
                   1);
  tj__gemm_config c;
  ck_assert(tj__gemm_config_parse(g.config, &c));
  char code[TJ__GEMM_CONFIG_NAME_MAX], want[TJ__GEMM_NAME_MAX];
  tj__gemm_config_code(c.kind, c.bn, c.split, code);
  snprintf(want, sizeof want, "gemm_bf16_bf16_bf16_nt_none_%s", code);
  uint16_t *fake = (uint16_t *)((uintptr_t)1 << 40);
  tj_gemm_desc f = bf16_nt(M, N, K, fake, fake + ((size_t)1 << 30),
                           fake + ((size_t)2 << 30));
  for (int run = 0; run < 2; run++) {
    ck_assert_str_eq(tj_gemm_kernel(rt, &f), want);
    bf16_nt_matches_oracle(rt, M, N, K);
    tj_runtime_close(rt);
    rt = open_tuning(NULL, NULL);
  }
  tj_runtime_close(rt);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("tuning_gpu");
  TCase *tc = test_case(s, "tuning", 900);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, calls_never_tune);
  tcase_add_test(tc, tune_ahead_times_every_candidate);
  tcase_add_test(tc, family_tune_decides_for_its_op);
  return run_gpu_suite(s, "the tuning GPU suite");
}
