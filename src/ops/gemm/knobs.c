/*
 * knobs.c: the settings that force one GEMM path or configuration over
 * another, for measuring them against each other (the benchmark) and for
 * the GPU tests that compare their outputs.  The library plans with the
 * rule's settings; tj__gemm_knobs_from_env reads these variables for a
 * program that asks, and tj__gemm_knobs_set hands them to a runtime.  A
 * value this file does not know leaves the rule's.
 *
 *   TJ_GEMM_SM90A=0        no Hopper kernel (plan.c, sm90a_fits)
 *   TJ_GEMM_SPLITK=n       force n K parts, 1 to 64 (plan_sm90a,
 *                          plan_skinny_tc and plan_sm90a_skinny, which
 *                          takes the largest split it has up to n; 1:
 *                          never split)
 *   TJ_GEMM_SM90A_TILE=64, 64k2, 128 or 256
 *                          the Hopper tile of unsplit calls, 64k2 the
 *                          128 x 64 one split across a cluster of two
 *                          (plan_sm90a); for M <= 16,
 *                          128 or 256 the skinny kernel's strip width
 *                          (plan_sm90a_skinny)
 *   TJ_GEMM_PERSISTENT=1 or 0
 *                          that tile's persistent entry, or never
 *   TJ_GEMM_SKINNY_TC=0 or 1
 *                          the skinny tensor-core kernel never, or
 *                          wherever it can run (skinny_tc_fits)
 *   TJ_GEMM_MULTICAST=1 or 0
 *                          the persistent 128 x 256 tile in clusters of
 *                          two sharing B, or never (plan_sm90a)
 *   TJ_GEMM_SKINNY_SM90A=0 not the Hopper skinny kernel for M <= 16
 *   TJ_GEMM_TMA_STORE=1 or 0
 *                          the Hopper tiles' epilogue through shared
 *                          memory and TMA stores where the call allows
 *                          it (the rule's), or never, not even for a
 *                          decision naming a _tmastore configuration
 *   TJ_GEMM_EVICT_FIRST=1 or 0
 *                          the Hopper skinny kernel's loads of B marked
 *                          evict-first in L2 (the rule's), or not
 *   TJ_GEMM_PDL=0 or 1     the Hopper skinny kernel launched plainly, or
 *                          with programmatic dependent launch (the rule's)
 *   TJ_GEMM_TC_ONLY=1      tj_gemm's tensor-core path (tensorcore.c) for
 *                          every call it serves, the Hopper one's and
 *                          tj_gemm_f16's included
 *   TJ_GEMM_GROUPED_SM90A=0
 *                          not tj_grouped_gemm's Hopper kernels
 *                          (grouped_hopper.c): the portable grouped
 *                          kernel for every call
 */
#include "gemm.h"

#include <stdlib.h>
#include <string.h>

const tj__gemm_knobs tj__gemm_knobs_rule = {
    .persistent = -1, .skinny_tc = -1, .tile_k2 = -1, .multicast = -1,
    .skinny_sm90a = -1, .tma_store = -1, .evict_first = -1, .early = -1,
    .grouped_sm90a = -1};

/* 0 or 1 when v is exactly that, else -1 (unset or unknown: the rule's). */
static int zero_or_one(const char *v)
{
  return v && strcmp(v, "0") == 0 ? 0 : v && strcmp(v, "1") == 0 ? 1 : -1;
}

void tj__gemm_knobs_from_env(tj__gemm_knobs *k)
{
  const char *split = getenv("TJ_GEMM_SPLITK");
  const char *tile = getenv("TJ_GEMM_SM90A_TILE");
  memset(k, 0, sizeof *k);
  k->sm90a_off = zero_or_one(getenv("TJ_GEMM_SM90A")) == 0;
  if (split && *split) {
    char *end;
    long n = strtol(split, &end, 10);
    if (*end == '\0' && n >= 1 && n <= 64)
      k->forced_split = (int)n;
  }
  k->tile_k2 = -1;
  if (tile && (strcmp(tile, "64") == 0 || strcmp(tile, "128") == 0 ||
               strcmp(tile, "256") == 0 || strcmp(tile, "64k2") == 0)) {
    k->tile = atoi(tile);
    k->tile_k2 = strcmp(tile, "64k2") == 0;
  }
  k->persistent = zero_or_one(getenv("TJ_GEMM_PERSISTENT"));
  k->skinny_tc = zero_or_one(getenv("TJ_GEMM_SKINNY_TC"));
  k->multicast = zero_or_one(getenv("TJ_GEMM_MULTICAST"));
  k->skinny_sm90a = zero_or_one(getenv("TJ_GEMM_SKINNY_SM90A"));
  k->tma_store = zero_or_one(getenv("TJ_GEMM_TMA_STORE"));
  k->evict_first = zero_or_one(getenv("TJ_GEMM_EVICT_FIRST"));
  k->early = zero_or_one(getenv("TJ_GEMM_PDL"));
  k->tc_only = zero_or_one(getenv("TJ_GEMM_TC_ONLY")) == 1;
  k->grouped_sm90a = zero_or_one(getenv("TJ_GEMM_GROUPED_SM90A"));
}
