/*
 * gemm_env.c: what the environment says about tj_gemm_f16, read once at
 * tj_runtime_open into rt->gemm_env, never per call (a program that sets
 * a variable later opens another runtime to see it).  Each is for
 * measuring a path against another, or stepping around one; a value this
 * file does not know is ignored, and the rule runs.
 *
 *   TJ_GEMM_SM90A=0        no Hopper kernel (kernels_api.c, sm90a_fits)
 *   TJ_GEMM_SPLITK=n       force n K parts, 1 to 64 (plan_sm90a,
 *                          plan_skinny_tc and plan_sm90a_skinny, which
 *                          takes the largest split it has up to n; 1:
 *                          never split)
 *   TJ_GEMM_SM90A_TILE=64, 64k2, 128, 128k4, 256 or 256k3
 *                          the Hopper tile of unsplit calls, 64k2 the
 *                          128 x 64 one split across a cluster of two,
 *                          128k4 and 256k3 those split across a cluster
 *                          of four and three (plan_sm90a); for M <= 16,
 *                          128 or 256 (and 128k4, 256k3) the
 *                          Hopper skinny kernel's strip width
 *                          (plan_sm90a_skinny)
 *   TJ_GEMM_PERSISTENT=1 or 0
 *                          that tile's persistent entry, or never
 *                          (plan_sm90a)
 *   TJ_GEMM_SKINNY_TC=0 or 1
 *                          the skinny tensor-core kernel never, or
 *                          wherever it can run (skinny_tc_fits)
 *   TJ_GEMM_MULTICAST=1 or 0
 *                          the persistent 128 x 256 tile in clusters of
 *                          two sharing B (gemm_f16_sm90a_128x256_mc2), or
 *                          never (plan_sm90a)
 *   TJ_GEMM_SKINNY_SM90A=0
 *                          not the Hopper skinny kernel for M <= 16
 *                          (sm90a_skinny_fits); 1 is the default
 *   TJ_GEMM_TMA_STORE=1 or 0
 *                          the Hopper tiles' epilogue through shared
 *                          memory and TMA stores where beta == 0, N and
 *                          ldc are multiples of 8 and C is 16-byte
 *                          aligned (the rule's, and a _tmastore tuning
 *                          configuration's), or never (not even for a
 *                          decision naming a _tmastore configuration):
 *                          straight from the accumulators, the rule's
 *                          store (and a plain configuration's) until
 *                          the H200 timed the TMA one faster
 *                          (kernels_api.c, tma_store_fits)
 *   TJ_GEMM_EVICT_FIRST=1 or 0
 *                          the Hopper skinny kernel loads B marked
 *                          evict-first in L2 (the default since the
 *                          H200 timed it: kernels_api.c, launch_tiles),
 *                          or not
 *   TJ_GEMM_STREAMK=1      stream-K over the 128 x 128 tiles (128 x 256
 *                          with TJ_GEMM_SM90A_TILE=256) for every
 *                          Hopper call with more than 16 rows, ahead of
 *                          the rule and the tuning table (plan_sm90a,
 *                          tj__gemm_plan_call); the rule nowhere: the
 *                          H200 timed it slower at every shape
 *   TJ_GEMM_PDL=0 or 1     the Hopper skinny kernel launched plainly,
 *                          or (the default since an H100 timed it:
 *                          bench/RESULTS.md, eleventh and twelfth
 *                          rounds) with programmatic dependent launch:
 *                          its blocks may start (barriers, tensor maps)
 *                          while the kernel ahead of it on the stream
 *                          ends, and touch nothing of A, B or C before it
 *                          has (kernels_api.c, launch_tiles)
 *   TJ_GEMM_TUNE_TRIAL=1   tokitai-jit --tune also times the
 *                          configurations marked trial (gemm_tune.c:
 *                          stream-K, slower where measured)
 *   TOKITAI_JIT_TUNE=1     first-use tuning (gemm_tune.c), unless the
 *                          runtime was opened with TJ_NO_TUNING
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* 0 or 1 when v is exactly that, else -1 (unset or unknown: the rule's). */
static int zero_or_one(const char *v)
{
  return v && strcmp(v, "0") == 0 ? 0 : v && strcmp(v, "1") == 0 ? 1 : -1;
}

void tj__gemm_env_read(tj__gemm_env *env, unsigned flags)
{
  const char *split = getenv("TJ_GEMM_SPLITK");
  const char *tile = getenv("TJ_GEMM_SM90A_TILE");
  memset(env, 0, sizeof *env);
  env->sm90a_off = zero_or_one(getenv("TJ_GEMM_SM90A")) == 0;
  if (split && *split) {
    char *end;
    long n = strtol(split, &end, 10);
    if (*end == '\0' && n >= 1 && n <= 64)
      env->forced_split = (int)n;
  }
  env->tune = !(flags & TJ_NO_TUNING) &&
              zero_or_one(getenv("TOKITAI_JIT_TUNE")) == 1;
  env->tile_k2 = -1;
  if (tile && (strcmp(tile, "64") == 0 || strcmp(tile, "128") == 0 ||
               strcmp(tile, "256") == 0 || strcmp(tile, "64k2") == 0 ||
               strcmp(tile, "256k3") == 0 || strcmp(tile, "128k4") == 0)) {
    env->tile = atoi(tile);
    env->tile_k2 = strcmp(tile, "64k2") == 0;
    env->tile_ks =
        strcmp(tile, "256k3") == 0 || strcmp(tile, "128k4") == 0;
  }
  env->persistent = zero_or_one(getenv("TJ_GEMM_PERSISTENT"));
  env->skinny_tc = zero_or_one(getenv("TJ_GEMM_SKINNY_TC"));
  env->multicast = zero_or_one(getenv("TJ_GEMM_MULTICAST"));
  env->skinny_sm90a = zero_or_one(getenv("TJ_GEMM_SKINNY_SM90A"));
  env->tma_store = zero_or_one(getenv("TJ_GEMM_TMA_STORE"));
  env->evict_first = zero_or_one(getenv("TJ_GEMM_EVICT_FIRST"));
  env->streamk = zero_or_one(getenv("TJ_GEMM_STREAMK"));
  env->tune_trial = zero_or_one(getenv("TJ_GEMM_TUNE_TRIAL")) == 1;
  env->early = zero_or_one(getenv("TJ_GEMM_PDL"));
}
