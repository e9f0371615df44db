/*
 * plan.c: which kernel a tj_gemm_f16 call runs and its launch shape
 * (plan.h), for every path: the Hopper skinny kernel and the Hopper tiles
 * on sm_90 (with the tuning decisions, configs.c), the tensor-core skinny
 * kernel on sm_80 and later, the FMA skinny kernel and the portable tiled
 * kernel elsewhere.  Host work only: no launch, no allocation; gemm.c
 * launches what this file plans.  The rules below were chosen on the
 * shapes of tj-bench's gemm section; where the reason is a measurement,
 * that section shows it.
 */
#include "plan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A few rows of A make the product a stream over B, which the tiled
 * kernel (one 128-row tile for M = 1) cannot keep up with: the skinny
 * kernel built for the smallest row count >= M takes it.  From 9 rows on,
 * its fp32 FMAs cost more than the tiled kernel's wasted tile rows (see
 * the kernel's header). */
static const char *skinny_entry(int M, unsigned *threads)
{
  *threads = M <= 2 ? 1024u : M <= 4 ? 512u : 256u;
  return M <= 1 ? "gemm_skinny_f16_m1" : M <= 2 ? "gemm_skinny_f16_m2"
       : M <= 4 ? "gemm_skinny_f16_m4" : "gemm_skinny_f16_m8";
}

/*
 * The skinny tensor-core entries, tried in order: the first whose strips
 * of tile_n columns number at least the SMs (where fill says so) takes
 * the call.  64-column strips read A half as often per byte of B, but
 * only once they alone fill the SMs; else 32-column strips, with split-K
 * where even those are too few.  Each row is one compiled code
 * object, so the tuning table can pick among them by name.
 */
typedef struct skinny_tc_config {
  const char *entry;
  int tile_n;
  int fill; /* 1: only where its strips number rt->sms or more */
} skinny_tc_config;

static const skinny_tc_config skinny_tc[] = {
    {"gemm_skinny_f16_tc_n64", 64, 1},
    {"gemm_skinny_f16_tc_n32", 32, 0},
};

/* Whether c's strips of N columns are enough for it on rt's SMs. */
static int skinny_tc_takes(const skinny_tc_config *c, const tj_runtime *rt,
                           int N)
{
  return !c->fill || (long long)((N - 1) / c->tile_n + 1) >= rt->sms;
}

static int sm90a_fits(const tj_runtime *rt, int M, const void *A, int lda,
                      const void *B, int ldb);

/*
 * The tensor-core skinny kernel wants an NVIDIA runtime for sm_80 or
 * later (mma.sync, cp.async, ldmatrix) and M <= 16; any alignment and
 * leading dimensions.  Where it runs, 64-column strips that fill the SMs
 * beat every other path from 1 to 16 rows; 32-column strips beat the FMA
 * kernels only from 2 to 8 rows, and lose to the 1-row FMA kernel and,
 * from 9 rows, to the Hopper kernel's split-K, which take those.  The
 * knob skinny_tc = 0 turns it off (the FMA kernel for M <= 8, the tiled
 * kernels above), = 1 takes it wherever it can run.
 */
static int skinny_tc_fits(const tj_runtime *rt, int M, int N, const void *A,
                          int lda, const void *B, int ldb)
{
  if (tj__gemm_knobs_of(rt)->skinny_tc == 0)
    return 0;
  if (M > SKINNY_TC_MAX_M || strncmp(rt->arch, "sm_", 3) != 0 ||
      strtol(rt->arch + 3, NULL, 10) < 80)
    return 0;
  if (tj__gemm_knobs_of(rt)->skinny_tc == 1 || skinny_tc_takes(&skinny_tc[0], rt, N))
    return 1;
  if (M == 1)
    return 0;
  return M <= SKINNY_MAX_M || !sm90a_fits(rt, M, A, lda, B, ldb);
}

int tj__gemm_skinny_split(long long tiles, int K, int sms)
{
  if (tiles <= 0 || 2 * tiles >= sms)
    return 1;
  long long split = (sms + tiles - 1) / tiles;
  if (split > K / SKINNY_TC_MIN_KROWS)
    split = K / SKINNY_TC_MIN_KROWS;
  if (split > SKINNY_TC_SPLIT_MAX)
    split = SKINNY_TC_SPLIT_MAX;
  return split < 2 ? 1 : (int)split;
}

/* kper: rows of K a block takes, whole 64-row stages, so that no K-range
 * is empty; split then follows from it (a forced split past what K
 * allows becomes the most it allows). */
static tj__gemm_plan plan_skinny_tc(const tj_runtime *rt, int N, int K)
{
  const skinny_tc_config *c = &skinny_tc[0];
  while (!skinny_tc_takes(c, rt, N))
    c++;
  unsigned tiles = (unsigned)((N - 1) / c->tile_n + 1);
  int split = tj__gemm_knobs_of(rt)->forced_split;
  if (split == 0)
    split = tj__gemm_skinny_split(tiles, K, rt->sms);
  int kper = K, ktiles = (K - 1) / SKINNY_TC_BK + 1;
  if (split > 1) {
    kper = ((ktiles - 1) / split + 1) * SKINNY_TC_BK;
    split = (K - 1) / kper + 1;
    if (split == 1)
      kper = K;
  }
  return (tj__gemm_plan){c->entry, {tiles, (unsigned)split, 1},
                         {SKINNY_TC_THREADS, 1, 1}, SKINNY_TC_SHARED, split,
                         kper, GEMM_PATH_SKINNY_TC, c->tile_n, 0,
                         GEMM_KIND_TILE};
}

/*
 * The Hopper tiles (gemm_sm90a.hip) want an sm_90 runtime, enough
 * rows to fill its 128-row tiles more than the skinny kernel would, and
 * A and B as TMA reads them: 16-byte aligned, rows a multiple of 16 bytes
 * apart; and, with a device, a driver that builds tensor maps.
 * The knob sm90a_off turns it off (to compare).
 */
static int sm90a_operands(const tj_runtime *rt, const void *A, int lda,
                          const void *B, int ldb)
{
  if (tj__gemm_knobs_of(rt)->sm90a_off)
    return 0;
  if (strcmp(rt->arch, "sm_90") != 0 && strcmp(rt->arch, "sm_90a") != 0)
    return 0;
  if (!rt->compile_only && !tj__hopper_driver())
    return 0;
  return (uintptr_t)A % 16 == 0 && (uintptr_t)B % 16 == 0 && lda % 8 == 0 &&
         ldb % 8 == 0;
}

static int sm90a_fits(const tj_runtime *rt, int M, const void *A, int lda,
                      const void *B, int ldb)
{
  return M > SKINNY_MAX_M && sm90a_operands(rt, A, lda, B, ldb);
}

/*
 * The Hopper skinny kernel (gemm_sm90a.hip's kind 5) for M <= 16, on the
 * same terms as the Hopper kernel; the knobs skinny_sm90a = 0 and
 * sm90a_off turn it off (the skinny kernels of gemm_skinny_f16_tc.hip and
 * the split-K tiles then take those calls).
 */
static int sm90a_skinny_fits(const tj_runtime *rt, int M, const void *A,
                             int lda, const void *B, int ldb)
{
  return M <= SM90A_SKINNY_ROWS && tj__gemm_knobs_of(rt)->skinny_sm90a != 0 &&
         sm90a_operands(rt, A, lda, B, ldb);
}

/* The skinny configuration with bn-column strips and a cluster of split
 * blocks into *out: 1, or 0 where there is none. */
static int skinny_config(int bn, int split, tj__gemm_config *out)
{
  tj__gemm_config c[TJ__GEMM_CONFIGS_MAX];
  size_t n = tj__gemm_configs(c);
  for (size_t i = 0; i < n; i++)
    if (c[i].kind == GEMM_KIND_SKINNY && c[i].bn == bn &&
        c[i].split == split) {
      *out = c[i];
      return 1;
    }
  return 0;
}

/* Each block of a split keeps this many k-tiles of 64 or more. */
#define SM90A_SKINNY_MIN_KTILES 4
/* The bytes a block keeps in flight (its 5 stages of B and A), and what
 * covers the memory's latency at its rate, for each SM: about a
 * microsecond and a half of an sm_90 part's bandwidth, shared by its
 * SMs. */
#define SM90A_SKINNY_INFLIGHT(bn) \
  ((long long)SM90A_SKINNY_STAGES * SM90A_SKINNY_STAGE_BYTES(bn))
#define SM90A_SKINNY_COVER_PER_SM (56LL << 10)

/*
 * The skinny configuration (strip width and split) for N columns, ktiles
 * k-tiles of 64 and sms SMs: of the plans with at most one block an SM,
 * the fewest K-ranges whose blocks keep enough bytes in flight to cover
 * the memory's latency, the narrower strips first (the tuning table's
 * order of them); where none does, the plan with the most in flight;
 * where even one block a strip is more than the SMs, 128-column strips
 * unsplit (two blocks share an SM).  Too few bytes in flight (wide
 * strips, few blocks) leave the bandwidth idle; more K-ranges at once
 * read B in more places, so fewer is better once the bytes in flight
 * suffice.  At one split the narrower strips (twice the blocks, two of
 * which fit an SM) are never slower, and let the next layer's blocks
 * share the SMs with this one's.
 */
static tj__gemm_config skinny_rule(int N, int ktiles, int sms)
{
  tj__gemm_config c[TJ__GEMM_CONFIGS_MAX], most;
  size_t n = tj__gemm_configs(c);
  long long most_bytes = -1, cover = SM90A_SKINNY_COVER_PER_SM * sms;
  for (size_t i = 0; i < n; i++) { /* by split, the narrower strip first */
    if (c[i].kind != GEMM_KIND_SKINNY ||
        (c[i].split > 1 && c[i].split * SM90A_SKINNY_MIN_KTILES > ktiles))
      continue;
    long long blocks = (long long)((N - 1) / c[i].bn + 1) * c[i].split;
    if (blocks > sms)
      continue;
    long long bytes = blocks * SM90A_SKINNY_INFLIGHT(c[i].bn);
    if (bytes >= cover)
      return c[i];
    if (bytes > most_bytes) {
      most = c[i];
      most_bytes = bytes;
    }
  }
  if (most_bytes < 0)
    skinny_config(SM90A_SKINNY_BN, 1, &most);
  return most;
}

int tj__gemm_sm90a_skinny_split(int N, int ktiles, int sms, int *bn)
{
  tj__gemm_config c = skinny_rule(N, ktiles, sms);
  *bn = c.bn;
  return c.split;
}

/* The plan of skinny configuration c for N columns. */
static tj__gemm_plan plan_skinny_config(const tj__gemm_config *c, int N)
{
  long long strips = (N - 1) / c->bn + 1;
  return (tj__gemm_plan){NULL, {(unsigned)(strips * c->split), 1, 1},
                         {SM90A_SKINNY_THREADS, 1, 1},
                         SM90A_SKINNY_SHARED((unsigned)c->bn,
                                             (unsigned)c->split),
                         c->split, 0, GEMM_PATH_SM90A_SKINNY, c->bn,
                         0, GEMM_KIND_SKINNY};
}

/* A forced split of n takes the largest compiled split up to n, a forced
 * tile of 128 or 256 that strip width. */
static tj__gemm_plan plan_sm90a_skinny(const tj_runtime *rt, int N, int K)
{
  tj__gemm_config rule = skinny_rule(N, (K - 1) / 64 + 1, rt->sms), c;
  const tj__gemm_knobs *knobs = tj__gemm_knobs_of(rt);
  int bn = rule.bn, split = rule.split;
  if (knobs->tile == 128 || knobs->tile == 256)
    bn = knobs->tile;
  if (knobs->forced_split)
    split = knobs->forced_split;
  for (int s = split; !skinny_config(bn, s, &c); s--)
    ;
  return plan_skinny_config(&c, N);
}

int tj__gemm_sm90a_split(long long tiles, int ktiles, int sms)
{
  if (tiles <= 0 || tiles >= sms)
    return 1;
  long long split = sms / tiles;
  if (split > ktiles / SM90A_SPLIT_MIN_KTILES)
    split = ktiles / SM90A_SPLIT_MIN_KTILES;
  if (split > SM90A_SPLIT_MAX)
    split = SM90A_SPLIT_MAX;
  return split < 2 ? 1 : (int)split;
}

/* The unsplit Hopper tiles: 128 rows by bn columns, with the stages that
 * fit. */
static unsigned sm90a_shared_of(int bn)
{
  return SM90A_SHARED(bn, SM90A_STAGES(bn));
}

/* A split-K plan of split parts (grid x narrow tiles, y mt tiles). */
static tj__gemm_plan plan_split(unsigned narrow, unsigned mt, int ktiles,
                                int split)
{
  /* Every z gets kper k-tiles but the last; a forced split past the
   * k-tiles keeps its empty ranges, which write zeros. */
  int kper = (ktiles - 1) / split + 1;
  if (split <= ktiles)
    split = (ktiles - 1) / kper + 1;
  return (tj__gemm_plan){NULL,
                         {narrow, mt, (unsigned)split}, {SM90A_THREADS, 1, 1},
                         SM90A_SHARED(128, SM90A_STAGES(128)), split, kper,
                         GEMM_PATH_SM90A, 128, 0, GEMM_KIND_SPLIT};
}

/* The 128 x 64 tile with K split across a cluster of two blocks. */
static tj__gemm_plan plan_cluster_k2(int M, int N)
{
  unsigned mt = (unsigned)((M - 1) / SM90A_BM + 1);
  unsigned tn = (unsigned)((N - 1) / 64 + 1);
  return (tj__gemm_plan){NULL, {2 * tn, mt, 1},
                         {SM90A_THREADS, 1, 1}, SM90A_SHARED_K2, 1, 0,
                         GEMM_PATH_SM90A, 64, 0, GEMM_KIND_CLUSTER_K2};
}

/* The 128 x 256 tile, persistent in clusters of two that share B: one
 * cluster per pair of tile rows (of one tile column), at most one block
 * an SM, an even grid. */
static tj__gemm_plan plan_mc2(int sms, int M, int N)
{
  unsigned long long pairs = (unsigned long long)((M - 1) / SM90A_BM / 2 + 1) *
                             (unsigned long long)((N - 1) / 256 + 1);
  unsigned clusters = sms / 2 < 1 ? 1 : (unsigned)sms / 2;
  if (pairs < clusters)
    clusters = (unsigned)pairs;
  return (tj__gemm_plan){NULL, {2 * clusters, 1, 1},
                         {SM90A_THREADS, 1, 1}, sm90a_shared_of(256), 1, 0,
                         GEMM_PATH_SM90A, 256, 0, GEMM_KIND_MC2};
}

/* An unsplit plan of bn-column tiles; persistent: one block per SM (at
 * most, of sms) walking the tiles. */
static tj__gemm_plan plan_tile(int bn, int persistent, int sms, int M, int N)
{
  unsigned mt = (unsigned)((M - 1) / SM90A_BM + 1);
  unsigned tn = (unsigned)((N - 1) / bn + 1);
  if (persistent) {
    unsigned long long tiles = (unsigned long long)tn * mt;
    unsigned grid = tiles < (unsigned)sms ? (unsigned)tiles : (unsigned)sms;
    return (tj__gemm_plan){NULL, {grid, 1, 1}, {SM90A_THREADS, 1, 1},
                           sm90a_shared_of(bn), 1, 0, GEMM_PATH_SM90A, bn,
                           0, GEMM_KIND_PERSISTENT};
  }
  return (tj__gemm_plan){NULL, {tn, mt, 1}, {SM90A_THREADS, 1, 1},
                         sm90a_shared_of(bn), 1, 0, GEMM_PATH_SM90A, bn, 0,
                         GEMM_KIND_TILE};
}

/* The plan of one configuration of the tuning table, on sms SMs. */
tj__gemm_plan tj__gemm_plan_config(const tj__gemm_config *c, int sms, int M,
                                   int N, int K)
{
  tj__gemm_plan p;
  if (c->kind == GEMM_KIND_SKINNY)
    return plan_skinny_config(c, N);
  if (c->kind == GEMM_KIND_CLUSTER_K2)
    p = plan_cluster_k2(M, N);
  else if (c->kind == GEMM_KIND_MC2)
    p = plan_mc2(sms, M, N);
  else if (c->kind == GEMM_KIND_SPLIT)
    p = plan_split((unsigned)((N - 1) / 128 + 1),
                   (unsigned)((M - 1) / SM90A_BM + 1), (K - 1) / 64 + 1,
                   c->split);
  else
    p = plan_tile(c->bn, c->kind == GEMM_KIND_PERSISTENT, sms, M, N);
  p.tma_store = c->tma_store;
  return p;
}

/*
 * The rule, where the tuning table has no decision:
 *   - a grid of 128 x 128 tiles that fills the SMs runs 128 x 256 tiles,
 *     persistent;
 *   - fewer tiles than SMs: split K where the rows are few (M <= 64), or
 *     each part keeps 32 k-tiles, or even 128 x 64 tiles would leave 3/4
 *     of the SMs idle; else the 128 x 64 tile where its tiles still fit in
 *     one wave; else 128 x 128;
 *   - first, more than 64 rows in 128 x 64 tiles that fill between a
 *     quarter and a half of the SMs, with 32 k-tiles or more: K split
 *     across a cluster of two blocks (the partial sums go through shared
 *     memory, no workspace, no second launch).
 * The knobs (env; NULL: the rule alone) force a split, the tile width of
 * unsplit calls (64k2: the cluster-split 128 x 64), the tile's persistent
 * entry or never, the persistent 128 x 256 tile in multicast pairs or
 * never.  sms: the device's (rt->sms); a GPU with fewer SMs reaches each
 * threshold with fewer tiles.
 */
static tj__gemm_plan plan_sm90a_tiles(const tj__gemm_knobs *env, int sms,
                                      int M, int N, int K)
{
  if (!env)
    env = &tj__gemm_knobs_rule;
  unsigned mt = (unsigned)((M - 1) / SM90A_BM + 1);
  unsigned narrow = (unsigned)((N - 1) / 128 + 1);
  unsigned slim = (unsigned)((N - 1) / 64 + 1);
  unsigned long long tiles128 = (unsigned long long)narrow * mt;
  int ktiles = (K - 1) / 64 + 1;
  int forced = env->forced_split;
  /* More than 64 rows in 128 x 64 tiles that fill a quarter to a half of
   * the SMs, K long enough for two halves: each tile's K split across a
   * cluster of two blocks, ahead of split-K. */
  if (forced <= 1 &&
      (env->tile_k2 == 1 ||
       (env->tile_k2 < 0 && !env->tile && M > SM90A_SPLIT_ROWS &&
        (unsigned long long)slim * mt * 2 <= (unsigned long long)sms &&
        (unsigned long long)slim * mt * 4 >= (unsigned long long)sms &&
        ktiles >= 2 * SM90A_SPLIT_MIN_KTILES)))
    return plan_cluster_k2(M, N);
  int split = forced ? forced : tj__gemm_sm90a_split((long long)tiles128,
                                                     ktiles, sms);
  if (!forced && split > 1 && M > SM90A_SPLIT_ROWS &&
      ktiles / split < SM90A_SPLIT_KEEP_KTILES &&
      (unsigned long long)slim * mt * 4 >= (unsigned long long)sms)
    split = 1;
  if (split > 1)
    return plan_split(narrow, mt, ktiles, split);
  int bn = env->tile, persistent = 0;
  if (!bn && tiles128 >= (unsigned long long)sms) {
    bn = 256;
    persistent = 1;
  } else if (!bn) {
    bn = M > SM90A_SPLIT_ROWS && (unsigned long long)slim * mt <=
                                     (unsigned long long)sms
             ? 64 : 128;
  }
  if (env->persistent >= 0)
    persistent = env->persistent;
  /* In multicast pairs where the rule chose the persistent 128 x 256
   * tiles and they make more than one wave (paired, more than one wave
   * runs faster and one wave slower), or the knobs ask. */
  unsigned long long tiles256 = (unsigned long long)mt * ((N - 1) / 256 + 1);
  if (bn == 256 && persistent &&
      (env->multicast == 1 ||
       (env->multicast < 0 && !env->tile && tiles256 > (unsigned)sms)))
    return plan_mc2(sms, M, N);
  return plan_tile(bn, persistent && bn != 64, sms, M, N);
}

/* The rule's plan, its tiles storing C through TMA wherever the call
 * allows it (tj__gemm_tma_store_applies, asked by hopper.c; split-K's
 * partials never do), which is faster than storing straight from the
 * accumulators at every shape of the benchmark's gemm section. */
static tj__gemm_plan plan_sm90a(const tj__gemm_knobs *env, int sms, int M, int N,
                                int K)
{
  tj__gemm_plan p = plan_sm90a_tiles(env, sms, M, N, K);
  p.tma_store = p.split == 1;
  return p;
}

tj__gemm_plan tj__gemm_plan_tiles(const tj_runtime *rt, int M, int N, int K)
{
  return plan_sm90a(tj__gemm_knobs_of(rt), rt->sms, M, N, K);
}

tj__gemm_plan tj__gemm_plan_skinny(const tj_runtime *rt, int N, int K)
{
  return plan_sm90a_skinny(rt, N, K);
}

int tj__gemm_skinny_on(const tj_runtime *rt)
{
  return tj__gemm_knobs_of(rt)->skinny_sm90a != 0;
}

int tj__gemm_tma_store_applies(const tj__gemm_knobs *env, int planned, int N,
                               float beta, const void *C, int ldc)
{
  int asked = env->tma_store >= 0 ? env->tma_store : planned;
  return asked == 1 && beta == 0.0f && N % 8 == 0 && ldc % 8 == 0 &&
         (uintptr_t)C % 16 == 0;
}

int tj__gemm_tunable(const tj_runtime *rt, int M)
{
  return M <= SM90A_SKINNY_ROWS ? sm90a_skinny_fits(rt, M, NULL, 8, NULL, 8)
                                : sm90a_fits(rt, M, NULL, 8, NULL, 8);
}

void tj__gemm_heuristic(int sms, int M, int N, int K, tj__gemm_config *out)
{
  if (M <= SM90A_SKINNY_ROWS) {
    *out = skinny_rule(N, (K - 1) / 64 + 1, sms);
    return;
  }
  tj__gemm_plan p = plan_sm90a(NULL, sms, M, N, K);
  *out = (tj__gemm_config){(int)p.kind, p.tile_n, p.split, p.tma_store};
}

/*
 * What a call runs.  On the Hopper path the tuning decision for the
 * call's shape class takes the heuristic's place (configs.c); a forced
 * split (the knobs) overrides both.
 */
tj__gemm_plan tj__gemm_plan_call(tj_runtime *rt, int M, int N, int K,
                                 const void *A, int lda, const void *B,
                                 int ldb, const void *C, int ldc)
{
  const tj__gemm_knobs *knobs = tj__gemm_knobs_of(rt);
  unsigned mt = (unsigned)((M - 1) / GEMM_TILE + 1);
  if (sm90a_skinny_fits(rt, M, A, lda, B, ldb)) {
    /* A forced split or strip width steps around the decisions too. */
    tj__gemm_config c;
    int has = !knobs->forced_split && !knobs->tile &&
              tj__gemm_decision_for(rt, TJ__GEMM_OP, M, N, K, C, ldc, &c);
    /* Only a skinny configuration: a tile's would be planned for rows
     * its kernel needs more of. */
    return has && c.kind == GEMM_KIND_SKINNY ? plan_skinny_config(&c, N)
                                             : plan_sm90a_skinny(rt, N, K);
  }
  if (skinny_tc_fits(rt, M, N, A, lda, B, ldb))
    return plan_skinny_tc(rt, N, K);
  if (M <= SKINNY_MAX_M) {
    unsigned threads;
    const char *entry = skinny_entry(M, &threads);
    return (tj__gemm_plan){entry, {(unsigned)((N - 1) / SKINNY_COLS + 1), 1, 1},
                           {threads, 1, 1}, 0, 1, 0, GEMM_PATH_PLAIN, 0,
                           0, GEMM_KIND_TILE};
  }
  if (sm90a_fits(rt, M, A, lda, B, ldb)) {
    tj__gemm_config c;
    int has = !knobs->forced_split &&
              tj__gemm_decision_for(rt, TJ__GEMM_OP, M, N, K, C, ldc, &c);
    /* A skinny configuration computes 16 rows: never one for more (a row
     * that says so was not written by this library's tuner). */
    return has && c.kind != GEMM_KIND_SKINNY
               ? tj__gemm_plan_config(&c, rt->sms, M, N, K)
               : plan_sm90a(knobs, rt->sms, M, N, K);
  }
  return (tj__gemm_plan){"gemm_f16",
                         {(unsigned)((N - 1) / GEMM_TILE + 1), mt, 1},
                         {GEMM_THREADS, 1, 1}, 0, 1, 0, GEMM_PATH_PLAIN, 0,
                         0, GEMM_KIND_TILE};
}
