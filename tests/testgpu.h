/*
 * testgpu.h: what the GPU suites share.  Every test runs in its own forked
 * process and the parent never touches the GPU, because a CUDA context
 * does not survive fork(): run_gpu_suite asks for a GPU in a child and
 * exits 77 (skip) without one.  Per-element checks call ck_abort_msg only
 * on a mismatch: ck_assert reports its position to the parent on every
 * call, a write per element.
 */
#ifndef TJ_TESTGPU_H
#define TJ_TESTGPU_H

#include "testutil.h"
#include "internal.h" /* the HIP calls, through the platform layer */
#include "gemm/gemm.h" /* the benchmark's knobs */

#include <stdint.h>

#define CHECK_HIP(call)                                                      \
  do {                                                                       \
    hipError_t e_ = (call);                                                  \
    ck_assert_msg(e_ == hipSuccess, "%s: %s", #call, hipGetErrorString(e_)); \
  } while (0)

/* Whether rt's device has an H200's 132 SMs.  The exact splits and
 * tiles these suites expect of the plan rules are an H200's; on another
 * count the rules pick others (check_kernels tests them at 114), and
 * only the results are checked. */
static inline int gpu_has_h200_sms(const tj_runtime *rt)
{
  return rt->sms == 132;
}

/* A tj_ call on rt that must succeed; its message says why it did not. */
#define CHECK_TJ(rt, call)                                                   \
  do {                                                                       \
    int rc_ = (call);                                                        \
    ck_assert_msg(rc_ == TJ_OK, "%s: %s: %s", #call, tj_err_name(rc_),       \
                  tj_errmsg(rt));                                            \
  } while (0)

/* Set once by run_gpu_suite, before any test is forked; read-only after.
 * One cache for the suite, so each forked test does not recompile. */
static char *gpu_cache_path;

/* A runtime on the GPU, with the cache at cache_path (NULL: none), whose
 * GEMMs are planned with the TJ_GEMM_* variables of the environment (the
 * benchmark's knobs, gemm/knobs.c): the suites force one path or
 * configuration with them to compare it with another. */
static inline tj_runtime *open_gpu_on(const char *cache_path)
{
  tj_options o = {0};
  o.cache_path = cache_path;
  o.flags = cache_path ? 0 : TJ_CACHE_DISABLE;
  tj_runtime *rt = NULL;
  int rc = tj_runtime_open(&rt, &o);
  ck_assert_msg(rc == TJ_OK, "open: %s: %s", tj_strerror(rc), tj_errmsg(rt));
  tj__gemm_knobs knobs;
  tj__gemm_knobs_from_env(&knobs);
  ck_assert_int_eq(tj__gemm_knobs_set(rt, &knobs), TJ_OK);
  return rt;
}

/* A runtime on the GPU with the suite's cache. */
static inline tj_runtime *open_gpu(void)
{
  return open_gpu_on(gpu_cache_path);
}

/* splitmix64: seeded, so that a failure can be replayed. */
static inline uint64_t next_random(uint64_t *s)
{
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static inline void *xmalloc(size_t bytes)
{
  void *p = malloc(bytes ? bytes : 1);
  ck_assert_msg(p != NULL, "out of host memory for %zu bytes", bytes);
  return p;
}

/* Device memory filled with 0xff bytes (NaN in float and fp16, -1 in
 * int32), so that anything a kernel fails to write, or writes where it
 * should not, shows. */
static inline void *dev_poisoned(size_t bytes)
{
  void *d = NULL;
  CHECK_HIP(hipMalloc(&d, bytes));
  CHECK_HIP(hipMemset(d, 0xff, bytes));
  return d;
}

/* A GPU suite's main: 77 when there is no GPU, else the suite run with its
 * cache in a fresh directory. */
static inline int run_gpu_suite(Suite *s, const char *what)
{
  if (test_no_gpu(what)) {
    srunner_free(srunner_create(s)); /* frees s, for LeakSanitizer */
    return 77;
  }
  char *dir = test_tmpdir();
  gpu_cache_path = test_path(dir, "cache.db");
  int rc = run_suite(s);
  free(gpu_cache_path);
  free(dir);
  return rc;
}

#endif
