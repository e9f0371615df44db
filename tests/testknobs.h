/*
 * testknobs.h: for the suites that force one GEMM path or configuration
 * to compare it with another (the benchmark's knobs, gemm/knobs.c).
 */
#ifndef TJ_TESTKNOBS_H
#define TJ_TESTKNOBS_H

#include "testutil.h"
#include "gemm/gemm.h"

/* rt, its GEMMs planned from now on with the TJ_GEMM_* variables of the
 * environment. */
static inline tj_runtime *test_knobs_from_env(tj_runtime *rt)
{
  tj__gemm_knobs k;
  tj__gemm_knobs_from_env(&k);
  ck_assert_int_eq(tj__gemm_knobs_set(rt, &k), TJ_OK);
  return rt;
}

/* test_reopen, the fresh runtime planning with the environment's knobs:
 * rt = test_reopen_knobs(rt, open_...()) after a setenv. */
static inline tj_runtime *test_reopen_knobs(tj_runtime *rt, tj_runtime *fresh)
{
  return test_reopen(rt, test_knobs_from_env(fresh));
}

/* The name of the configuration the heuristic picks for M x N x K on sms
 * SMs (a static buffer: the next call overwrites it). */
static inline const char *heuristic_name(int sms, int M, int N, int K)
{
  static char name[TJ__GEMM_CONFIG_NAME_MAX];
  tj__gemm_config c;
  tj__gemm_heuristic(sms, M, N, K, &c);
  tj__gemm_config_name(&c, name);
  return name;
}

#endif
