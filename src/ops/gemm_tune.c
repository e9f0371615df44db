/*
 * gemm_tune.c: the tuning database's side of tj_gemm_f16 on Hopper: the
 * configurations a decision may name, the shape class a decision applies
 * to, the per-runtime memo of decisions, and the tuner that times the
 * candidates (on first use, and ahead of time for tokitai-jit --tune).
 *
 * Configurations.  Each is an entry of gemm_f16_sm90a.hip (a skinny
 * one's, of gemm_f16_sm90a_skinny.hip; a trial's and those of tiles the
 * rule never runs, of gemm_f16_sm90a_extra.hip), a tile and a split
 * factor (or stream-K),
 * and whether C is stored through TMA (the _tmastore ones, the rule's
 * store; stream-K, slower where the H200 ran it, is a trial, which only
 * a --tune with TJ_GEMM_TUNE_TRIAL=1 times); for the tiles the split and
 * the store are launch arguments, not compile-time constants, and for the
 * skinny kernel (M <= 16) the split is the cluster size its entry was
 * compiled with, so every configuration runs one of the entries that
 * tests/check_kernels.c (and check_tuning.c, over this table) compile for
 * sm_90a on the CPU machine: no configuration
 * reaches the compiler that a test did not compile.  A decision naming a
 * configuration that is not in the table (a newer or older library wrote
 * it) is ignored: the heuristic runs, and the row is left for the library
 * that knows it.
 *
 * Shape class.  The Hopper kernel's work is set by how many tiles it runs:
 * ceil(M / 128) rows of tiles, ceil(N / 128) columns of them (the 256-wide
 * tile's count follows from it) and ceil(K / 64) k-tiles; within one such
 * triple the grids and the pipeline depth are the same, and only the
 * masked edges differ.  So the class is that triple, exact up to 64 of
 * each (M and N to 8192, K to 4096: every shape where a split or the tile
 * choice flips), and above that rounded up to eight steps per power of two
 * (where the GPU is full and the choice is stable), so that a model's
 * varying M does not make a tune per token count.  The alignment class
 * says whether C is 4-byte aligned with ldc even (the epilogue stores
 * pairs of halves) or not ("c4" or "c2"); A and B must already suit TMA
 * for the Hopper path to be taken at all.  M <= 16 (the skinny kernel's
 * rows, whose configurations are its own) counts as 0 rows of tiles.
 * Last, the device's SM count (rt->sms; 132 without a device): the plans
 * fill the SMs, so an H100 PCIe's 114 and an H200's 132 get decisions of
 * their own from one library, arch and compiler.  Written
 * "t1x32x64/c4/s132".
 *
 * The check.  Before anything is timed, every candidate runs once on
 * the tune's inputs, into C filled with NaN, and eight rows of its C must
 * agree with the heuristic's choice's within rounding (check_all); one
 * that does not is set aside untimed, with a warning, and listed with no
 * runs.  So a decision can change how fast a shape class runs, never what
 * it computes, even where a configuration has a bug at a shape the tests
 * did not try.
 *
 * First use (off by default: TOKITAI_JIT_TUNE=1 turns it on).  The first
 * tj_gemm_f16 of a shape class with no decision times a small set (the
 * unsplit tiles marked first_use and a few splits, the heuristic's choice
 * first) within TUNE_BUDGET_MS of wall time (overrunning it by at most
 * the warm-up and one timed round: tj__gemm_tune_rounds), and records
 * the winner.  It compiles nothing the call would not: a configuration
 * whose kernels are
 * not built yet (in the runtime or the cache) is not timed, since one
 * compile of this file costs 1.4-1.9 s on an H200, more than the whole
 * budget, and a decision is recorded only when the whole set was timed;
 * else the heuristic runs and a later call (up to TUNE_ATTEMPTS per
 * runtime), or the next process, tries again.  Off by default since the
 * H200 run of 2026-12-02 (bench/RESULTS.md): at 128 x 11008 x 4096 it
 * recorded split 2, which then ran at 0.68x cuBLAS in the benchmark where
 * the heuristic's 128 x 128 tile runs at 0.91x, though `tokitai-jit
 * --tune` of the same shape timed split 2 1.6x slower than 128 x 128.
 * The likely cause: candidates were timed one after another, the first
 * (the heuristic's) right after a compile had left the GPU idle at low
 * clocks.  They are now timed in rounds, each candidate once a round
 * (time_all), and each launch after TUNE_FLUSH_BYTES written, so that it
 * reads A and B from memory as the benchmark's runs do: timed back to
 * back, the H200 (9f2cb3c) chose 128 x 128 for 1024^3 and 128 x 64 for
 * 128 x 4096 x 4096 at first use, which the benchmark then ran at 0.68x
 * and 0.83x cuBLAS against 0.87x and 0.93x for the heuristic's choices.
 * When on, it is not done, and the heuristic runs, when the caller opts
 * out (TJ_NO_TUNING), when the
 * runtime has no device, when the cache is disabled or read-only (the
 * decision would be lost: ship decisions made by --tune instead), and
 * while the stream is being captured into a graph.  The tune reads A and
 * B, writes only a scratch output from the runtime's pool, queues its
 * launches on the caller's stream (behind whatever made A and B) and
 * waits for them: that one call blocks.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TUNE_BUDGET_MS 1000.0 /* a first-use tune's wall time (see
                                 tj__gemm_tune_rounds for what it may
                                 overrun by) */
#define TUNE_MAX_RUNS 10
#define AHEAD_RUN_MS 200.0    /* --tune: time spent on each candidate */
#define AHEAD_MIN_RUNS 5
#define AHEAD_MAX_RUNS 50
#define TUNE_ATTEMPTS 3       /* first-use tunes of one class per runtime */
/* Written before each timed launch, so that every candidate reads A and B
 * from memory, as the benchmark times them (bench/bench_util.c): more
 * than twice the L2 of any Hopper GPU (50 MiB on an H100 and an H200). */
#define TUNE_FLUSH_BYTES ((size_t)128 << 20)
#define MAX_CANDIDATES 40
#define CLASS_EXACT 64

/* ------------------------------------------------------------ the table */

#define SPLIT(n)                                                            \
  {.name = "sm90a_128x128_split" #n,                                       \
   .entry = "gemm_f16_sm90a_128x128_splitk", .bn = 128, .split = n,         \
   .first_use = (n) == 2 || (n) == 4 || (n) == 8}
/* The Hopper skinny kernel (M <= 16) in bn-column strips, K split across a
 * cluster of s blocks: gemm_f16_sm90a_skinny<suffix>, every one in the
 * small set (they share the file's one compile and take microseconds).
 * In the order the rule weighs them (gemm_plan.c, skinny_rule): by split,
 * the narrower strip first. */
#define SKINNY(bn_, s, suffix)                                              \
  {.name = "sm90a_skinny_n" #bn_ "_k" #s,                                   \
   .entry = "gemm_f16_sm90a_skinny" suffix, .bn = bn_, .split = s,          \
   .first_use = 1, .skinny = 1}
/* A tile storing C directly (the base), and the same with its epilogue
 * through TMA stores (where a call's C or beta does not allow them, the
 * same tiles store directly): the rule's store since the H200 measured it
 * faster at every shape it takes (2026-12-05), so the _tmastore ones, not
 * their bases, are in the small set (first_use). */
#define TILE(name_, bn_, ...)                                               \
  {.name = "sm90a_" name_, .entry = "gemm_f16_sm90a_" name_, .bn = bn_,     \
   .split = 1, __VA_ARGS__}
#define TMA_STORE(name_, bn_, ...)                                          \
  {.name = "sm90a_" name_ "_tmastore", .entry = "gemm_f16_sm90a_" name_,    \
   .bn = bn_, .split = 1, .tma_store = 1, __VA_ARGS__}
static const tj__gemm_config configs[] = {
  /* The tiles storing C directly from the accumulators. */
  TILE("128x256", 256, .first_use = 0),
  TILE("128x256_persistent", 256, .persistent = 1),
  TILE("128x128", 128, .first_use = 0),
  TILE("128x128_persistent", 128, .persistent = 1),
  TILE("128x64", 64, .first_use = 0),
  TILE("128x64_cluster_k2", 64, .cluster_k = 1),
  TILE("128x256_mc2", 256, .persistent = 1, .mc2 = 1),
  /* The same through TMA stores. */
  TMA_STORE("128x256", 256, .first_use = 0),
  TMA_STORE("128x256_persistent", 256, .first_use = 1, .persistent = 1),
  TMA_STORE("128x256_mc2", 256, .persistent = 1, .mc2 = 1),
  TMA_STORE("128x128", 128, .first_use = 1),
  TMA_STORE("128x128_persistent", 128, .persistent = 1),
  TMA_STORE("128x64", 64, .first_use = 1),
  TMA_STORE("128x64_cluster_k2", 64, .first_use = 1, .cluster_k = 1),
  SPLIT(2), SPLIT(3), SPLIT(4), SPLIT(5), SPLIT(6), SPLIT(7), SPLIT(8),
  SPLIT(9), SPLIT(10), SPLIT(11), SPLIT(12), SPLIT(13), SPLIT(14),
  SPLIT(15), SPLIT(16),
  SKINNY(128, 1, ""), SKINNY(256, 1, "256"),
  SKINNY(128, 2, "_k2"), SKINNY(256, 2, "256_k2"),
  SKINNY(128, 3, "_k3"), SKINNY(256, 3, "256_k3"),
  SKINNY(128, 4, "_k4"), SKINNY(256, 4, "256_k4"),
  SKINNY(128, 8, "_k8"),
  /* The 128 x 256 and 128 x 128 tiles with K split across a cluster of
   * three and four blocks (the partial sums added through distributed
   * shared memory): trials, slower than the rule on an H100 at all nine
   * shapes timed (1.13 to 2.94 times its time, 2026-12-05). */
  TILE("128x256_cluster_k3", 256, .cluster_k = 1, .trial = 1),
  TILE("128x128_cluster_k4", 128, .cluster_k = 1, .trial = 1),
  /* Trials, timed only by a --tune with TJ_GEMM_TUNE_TRIAL=1, never on
   * first use: stream-K over the 128 x 128 and 128 x 256 tiles, with
   * either store.  On the H200 (2026-12-05) it took 1.14 to 2.45 times
   * the rule's time at the nine shapes with M >= 128: still a trial. */
  TILE("128x128_streamk", 128, .streamk = 1, .trial = 1),
  TILE("128x256_streamk", 256, .streamk = 1, .trial = 1),
  TMA_STORE("128x128_streamk", 128, .streamk = 1, .trial = 1),
  TMA_STORE("128x256_streamk", 256, .streamk = 1, .trial = 1),
};
#undef SPLIT
#undef SKINNY
#undef TILE
#undef TMA_STORE

const tj__gemm_config *tj__gemm_configs(size_t *n)
{
  *n = sizeof configs / sizeof configs[0];
  return configs;
}

const tj__gemm_config *tj__gemm_config_find(const char *name)
{
  for (size_t i = 0; name && i < sizeof configs / sizeof configs[0]; i++)
    if (strcmp(configs[i].name, name) == 0)
      return &configs[i];
  return NULL;
}

const tj__gemm_config *tj__gemm_config_of_entry(const char *entry, int split,
                                                int store)
{
  const tj__gemm_config *other = NULL;
  for (size_t i = 0; entry && i < sizeof configs / sizeof configs[0]; i++)
    if (strcmp(configs[i].entry, entry) == 0 &&
        (split == 0 || configs[i].split == split)) {
      if (configs[i].tma_store == store)
        return &configs[i];
      if (!other)
        other = &configs[i];
    }
  return other;
}

int tj__tuning_config_known(const char *op, const char *config)
{
  return op && strcmp(op, "gemm_f16") == 0 && tj__gemm_config_find(config);
}

/* ------------------------------------------------------------ shape class */

typedef struct class_key {
  int mt, nt, kt, c4, sms;
} class_key;

/* Exact up to CLASS_EXACT; above, rounded up to a multiple of an eighth
 * of the power of two below (65..72 -> 72, 129..144 -> 144). */
static int bucket(int tiles)
{
  if (tiles <= CLASS_EXACT)
    return tiles;
  int step = 1;
  while (tiles / step >= 16)
    step *= 2;
  return (tiles + step - 1) / step * step;
}

static class_key key_of(int sms, int M, int N, int K, const void *C,
                        int ldc)
{
  class_key k = {M <= TJ__GEMM_SKINNY_ROWS ? 0 : bucket((M - 1) / 128 + 1),
                 bucket((N - 1) / 128 + 1), bucket((K - 1) / 64 + 1),
                 (uintptr_t)C % 4 == 0 && ldc % 2 == 0, sms};
  return k;
}

static void class_name(const class_key *k, char out[TJ__SHAPE_CLASS_MAX])
{
  snprintf(out, TJ__SHAPE_CLASS_MAX, "t%dx%dx%d/%s/s%d", k->mt, k->nt, k->kt,
           k->c4 ? "c4" : "c2", k->sms);
}

void tj__gemm_shape_class(int sms, int M, int N, int K, const void *C,
                          int ldc, char out[TJ__SHAPE_CLASS_MAX])
{
  class_key k = key_of(sms, M, N, K, C, ldc);
  class_name(&k, out);
}

/* ------------------------------------------------------------ the memo */

enum { MEMO_UNTUNED, MEMO_TUNING, MEMO_DECIDED };

typedef struct memo {
  class_key key;
  int state, attempts;
  const tj__gemm_config *config; /* MEMO_DECIDED: NULL for the heuristic */
} memo;

struct tj__gemm_tuning {
  pthread_mutex_t lock;
  memo *v;
  size_t n, cap;
};

tj__gemm_tuning *tj__gemm_tuning_new(void)
{
  tj__gemm_tuning *g = calloc(1, sizeof *g);
  if (g)
    pthread_mutex_init(&g->lock, NULL);
  return g;
}

void tj__gemm_tuning_free(tj__gemm_tuning *g)
{
  if (!g)
    return;
  pthread_mutex_destroy(&g->lock);
  free(g->v);
  free(g);
}

/* The memo of k, added (not yet looked up: -1) when absent; its index, or
 * -1 when out of memory.  Under g->lock. */
static long memo_find(tj__gemm_tuning *g, const class_key *k, int add)
{
  for (size_t i = 0; i < g->n; i++)
    if (memcmp(&g->v[i].key, k, sizeof *k) == 0)
      return (long)i;
  if (!add)
    return -1;
  if (g->n == g->cap) {
    size_t cap = g->cap ? 2 * g->cap : 16;
    memo *v = realloc(g->v, cap * sizeof *v);
    if (!v)
      return -1;
    g->v = v;
    g->cap = cap;
  }
  g->v[g->n] = (memo){*k, -1, 0, NULL};
  return (long)g->n++;
}

/* ------------------------------------------------------------ the tuner */

typedef struct timed {
  const tj__gemm_config *config;
  double ms;
  int runs;
} timed;

typedef struct tune_job {
  tj_runtime *rt;
  const char *fn;
  void *stream;
  int M, N, K;
  const void *A, *B;
  int lda, ldb;
  void *C; /* scratch, ldc = N */
  void *flush; /* TUNE_FLUSH_BYTES to write before each launch; NULL: none */
  int ahead;
  int sms;
  timed t[MAX_CANDIDATES];
  int n;
  int complete; /* every candidate was timed */
  const tj__gemm_config *rule; /* the heuristic's choice, as timed */
} tune_job;

static double now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Whether a _tmastore candidate's launches store C through TMA, as
 * tj_gemm_f16's would (its scratch C: beta 0, ldc = N); else they would
 * time their direct-store twin again. */
static int stores_through_tma(const tune_job *j)
{
  return tj__gemm_tma_store_applies(&j->rt->gemm_env, 1, j->N, 0.0f, j->C,
                                    j->N);
}

/* Whether config c is worth timing: an unsplit one ahead of time, or on
 * first use when it is in the small set (a trial only ahead of time, with
 * TJ_GEMM_TUNE_TRIAL=1); a split-K one where the 128 x 128
 * tiles leave SMs idle, each part keeps at least four k-tiles (a first
 * use: eight), and the parts make no more than two waves. */
static int applies(const tune_job *j, const tj__gemm_config *c)
{
  /* The skinny kernel's configurations for M <= 16, and only those. */
  if (c->skinny != (j->M <= TJ__GEMM_SKINNY_ROWS))
    return 0;
  if (c->skinny)
    return 1;
  /* Not the multicast pairs where TJ_GEMM_MULTICAST=0 turns them off, nor
   * TMA stores where TJ_GEMM_TMA_STORE=0 does or the scratch C (ldc = N)
   * cannot take them: they would time their base again. */
  if (c->mc2 && j->rt->gemm_env.multicast == 0)
    return 0;
  if (c->tma_store && !stores_through_tma(j))
    return 0;
  if (c->trial && !(j->ahead && j->rt->gemm_env.tune_trial))
    return 0;
  /* A tile storing directly stands in for its _tmastore twin of the
   * small set where the TMA store does not apply. */
  if (c->split == 1)
    return j->ahead || c->first_use ||
           (!c->tma_store && !stores_through_tma(j) &&
            tj__gemm_config_of_entry(c->entry, 1, 1)->first_use);
  long long tiles = (long long)((j->M - 1) / 128 + 1) * ((j->N - 1) / 128 + 1);
  int ktiles = (j->K - 1) / 64 + 1;
  return tiles < j->sms && c->split <= ktiles / (j->ahead ? 4 : 8) &&
         tiles * c->split <= 2LL * j->sms && (j->ahead || c->first_use);
}

/* The heuristic's choice as this tune would run it: where the TMA store
 * does not apply, the same tiles storing directly (which applies()
 * keeps), so that one launch is not timed under two names. */
static const tj__gemm_config *heuristic(const tune_job *j)
{
  const tj__gemm_config *h = tj__gemm_heuristic(j->sms, j->M, j->N, j->K);
  if (h && h->tma_store && !stores_through_tma(j))
    return tj__gemm_config_of_entry(h->entry, h->split, 0);
  return h;
}

/* The candidates, the heuristic's choice h (NULL for none) first: its
 * kernel is loaded for the call anyway. */
static int candidates(const tune_job *j, const tj__gemm_config *h,
                      const tj__gemm_config **out)
{
  int n = 0;
  if (h)
    out[n++] = h;
  for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
    if (&configs[i] != h && applies(j, &configs[i]) && n < MAX_CANDIDATES)
      out[n++] = &configs[i];
  return n;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int run_once(tune_job *j, const tj__gemm_config *c)
{
  return tj__gemm_run_config(j->rt, j->fn, c, j->stream, j->M, j->N, j->K,
                             1.0f, j->A, j->lda, j->B, j->ldb, 0.0f, j->C,
                             j->N);
}

static double median_of(double *ms, int n)
{
  qsort(ms, (size_t)n, sizeof ms[0], cmp_double);
  return n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
}

/* One round: each of the n configs c launched once on the job's stream,
 * after the flush (when there is one) and between its own pair of events
 * (ev[2i], ev[2i + 1]); their times into ms[i][round]. */
static int time_round(tune_job *j, const tj__gemm_config **c, int n,
                      hipEvent_t *ev, double (*ms)[AHEAD_MAX_RUNS], int round)
{
  hipStream_t s = (hipStream_t)j->stream;
  int rc = TJ_OK;
  for (int i = 0; i < n && rc == TJ_OK; i++) {
    if (j->flush &&
        tj__memset_async(j->flush, round & 0xff, TUNE_FLUSH_BYTES, s) != TJ_OK)
      rc = TJ_EDEVICE;
    if (rc == TJ_OK && hipEventRecord(ev[2 * i], s) != hipSuccess)
      rc = TJ_EDEVICE;
    if (rc == TJ_OK && (rc = run_once(j, c[i])) == TJ_OK &&
        hipEventRecord(ev[2 * i + 1], s) != hipSuccess)
      rc = TJ_EDEVICE;
  }
  if (rc == TJ_OK && n > 0 && hipEventSynchronize(ev[2 * n - 1]) != hipSuccess)
    rc = TJ_EDEVICE;
  for (int i = 0; i < n && rc == TJ_OK; i++) {
    float f = 0;
    if (hipEventElapsedTime(&f, ev[2 * i], ev[2 * i + 1]) != hipSuccess)
      rc = TJ_EDEVICE;
    ms[i][round] = f;
  }
  if (rc != TJ_OK)
    return tj__fail(j->rt, TJ_EDEVICE, "%s: timing the GEMM configurations "
                    "failed", j->fn);
  return TJ_OK;
}

/* Whether config c can run without a compile: its kernels are in the
 * runtime's memory or its cache. */
static int built(tj_runtime *rt, const tj__gemm_config *c)
{
  tj_kernel *k;
  return tj__kernel_get_built(rt, c->entry, &k) == TJ_OK &&
         (c->split == 1 ||
          tj__kernel_get_built(rt, "gemm_f16_sm90a_splitk_reduce", &k) ==
              TJ_OK);
}

/* The timed, fastest first, then those set aside (no runs). */
static int cmp_timed(const void *a, const void *b)
{
  const timed *x = a, *y = b;
  if ((x->runs == 0) != (y->runs == 0))
    return x->runs == 0 ? 1 : -1;
  return (x->ms > y->ms) - (x->ms < y->ms);
}

/*
 * How many timed rounds fit left ms, a round taking round_ms (the warm-up
 * round's GPU time; 0: unknown, the most).  Ahead of time (--tune, which
 * has no budget but AHEAD_RUN_MS a candidate) from AHEAD_MIN_RUNS to
 * AHEAD_MAX_RUNS.  A first use: as many as fit, to TUNE_MAX_RUNS, and
 * at least one, so that there is a winner to record; so a first use can
 * overrun TUNE_BUDGET_MS by the warm-up round and one timed round (two
 * launches of each candidate, plus loading the kernels the warm-up
 * loads), never by more, and a tune whose warm-up alone spent the budget
 * decides on one launch of each.
 */
int tj__gemm_tune_rounds(int ahead, double left, double round_ms)
{
  int lo = ahead ? AHEAD_MIN_RUNS : 1;
  int hi = ahead ? AHEAD_MAX_RUNS : TUNE_MAX_RUNS;
  double fit = round_ms > 0 ? left / round_ms : hi;
  return fit < lo ? lo : fit > hi ? hi : (int)fit;
}

/* ------------------------------------------------------------ the check */

int tj__gemm_outputs_agree(const uint16_t *ref, const uint16_t *got, size_t n,
                           size_t *bad)
{
  double sum = 0;
  size_t finite = 0;
  for (size_t i = 0; i < n; i++) {
    double r = tj_f16_to_f32(ref[i]);
    if (isfinite(r)) {
      sum += r * r;
      finite++;
    }
  }
  double rms = finite ? sqrt(sum / (double)finite) : 0;
  for (size_t i = 0; i < n; i++) {
    double r = tj_f16_to_f32(ref[i]), g = tj_f16_to_f32(got[i]);
    int same = isnan(r) || isnan(g)   ? isnan(r) && isnan(g)
               : isinf(r) || isinf(g) ? r == g
                                      : fabs(r - g) <= 0x1p-9 * fmax(fabs(r),
                                                                     fabs(g)) +
                                                           0x1p-8 * rms;
    if (!same) {
      *bad = i;
      return 0;
    }
  }
  return 1;
}

/* The sampled rows of C: CHECK_ROWS of them, from the first to the last,
 * each whole up to 2 x CHECK_COLS columns, else its first and last
 * CHECK_COLS (the edge tiles either way). */
#define CHECK_ROWS 8
#define CHECK_COLS 8192

static size_t check_width(const tune_job *j)
{
  return j->N <= 2 * CHECK_COLS ? (size_t)j->N : 2 * CHECK_COLS;
}

/* Row i of the sample, and the column of its element at x. */
static int check_row(const tune_job *j, int i)
{
  return (int)((long long)i * (j->M - 1) / (CHECK_ROWS - 1));
}

static int check_col(const tune_job *j, size_t x)
{
  return j->N <= 2 * CHECK_COLS || x < CHECK_COLS
             ? (int)x
             : j->N - 2 * CHECK_COLS + (int)x;
}

/* Run c once on the job's stream into C, filled with NaN first, and copy
 * the sampled rows to out (CHECK_ROWS x check_width). */
static int sample_output(tune_job *j, const tj__gemm_config *c, uint16_t *out)
{
  hipStream_t s = (hipStream_t)j->stream;
  size_t w = check_width(j), half = w / 2;
  const uint16_t *C = j->C;
  int rc = tj__memset_async(j->C, 0xff, (size_t)j->M * (size_t)j->N * 2, s);
  if (rc == TJ_OK && (rc = run_once(j, c)) != TJ_OK)
    return rc;
  if (rc == TJ_OK && hipStreamSynchronize(s) != hipSuccess)
    rc = TJ_EDEVICE;
  for (int i = 0; i < CHECK_ROWS && rc == TJ_OK; i++) {
    const uint16_t *row = C + (size_t)check_row(j, i) * (size_t)j->N;
    uint16_t *to = out + (size_t)i * w;
    /* The whole row, or its two ends. */
    size_t first = w == (size_t)j->N ? w : half;
    if (hipMemcpyDtoH(to, (void *)row, first * 2) != hipSuccess ||
        (first < w && hipMemcpyDtoH(to + half, (void *)(row + j->N - half),
                                    half * 2) != hipSuccess))
      rc = TJ_EDEVICE;
  }
  if (rc != TJ_OK)
    return tj__fail(j->rt, TJ_EDEVICE, "%s: checking what %s computes "
                    "failed", j->fn, c->name);
  return TJ_OK;
}

/*
 * Before any is timed, each candidate's C on the job's inputs must agree
 * with the first's (the heuristic's: what the call runs without a
 * decision) at the sampled rows, within rounding (tj__gemm_outputs_agree);
 * one that does not is set aside, with a warning, into j->t as a time of
 * no runs, so that a decision can never make a shape class compute
 * something else.  This also loads each candidate's kernels, so that the
 * warm-up round after it times launches only.  use[] keeps the rest, the
 * first still first; *n their count.
 */
static int check_all(tune_job *j, const tj__gemm_config **use, int *n)
{
  size_t cells = CHECK_ROWS * check_width(j);
  uint16_t *ref = malloc(cells * 2), *got = malloc(cells * 2);
  int rc = ref && got ? TJ_OK : tj__fail(j->rt, TJ_ENOMEM, "out of memory");
  int kept = 0;
  for (int i = 0; i < *n && rc == TJ_OK; i++) {
    size_t bad = 0;
    rc = sample_output(j, use[i], i == 0 ? ref : got);
    if (rc != TJ_OK)
      break;
    if (i == 0 || tj__gemm_outputs_agree(ref, got, cells, &bad)) {
      use[kept++] = use[i];
      continue;
    }
    size_t w = check_width(j);
    tj__warn(j->rt, "%s: %dx%dx%d: the tuner set %s aside: C[%d][%d] is %g "
             "where %s gives %g", j->fn, j->M, j->N, j->K, use[i]->name,
             check_row(j, (int)(bad / w)), check_col(j, bad % w),
             (double)tj_f16_to_f32(got[bad]), use[0]->name,
             (double)tj_f16_to_f32(ref[bad]));
    j->t[j->n++] = (timed){use[i], 0.0, 0};
  }
  free(ref);
  free(got);
  *n = kept;
  return rc;
}

/*
 * Time the candidates; j->t gets them, fastest first, then any set aside
 * by check_all.  A first use skips those not built (but the heuristic's,
 * which the call builds anyway).  First the check, which also loads each
 * candidate's kernels; then a warm-up round, which sizes the rest; then
 * rounds that launch every candidate once each, in turn, so that
 * whatever drifts while they run (a GPU's clocks rise from idle
 * under load, then heat) falls on all of them alike: timing one candidate
 * after another let the first, at idle clocks, lose to a slower one (a
 * first use recorded split 2 for 128 x 11008 x 4096 on the H200, which
 * then ran at 0.68x cuBLAS against 0.91x for 128 x 128).  The median of
 * each.  A first use runs the rounds that fit what is left of
 * TUNE_BUDGET_MS (tj__gemm_tune_rounds), at least one.
 */
static int time_all(tune_job *j)
{
  const tj__gemm_config *cand[MAX_CANDIDATES], *use[MAX_CANDIDATES];
  const tj__gemm_config *h = j->rule = heuristic(j);
  double (*t)[AHEAD_MAX_RUNS] = calloc(MAX_CANDIDATES, sizeof *t);
  hipEvent_t ev[2 * MAX_CANDIDATES];
  int nc = candidates(j, h, cand), n = 0, nev = 0, rc = TJ_OK;
  if (!t)
    return tj__fail(j->rt, TJ_ENOMEM, "out of memory");
  j->complete = 1;
  for (int i = 0; i < nc; i++) {
    if (!j->ahead && cand[i] != h && !built(j->rt, cand[i]))
      j->complete = 0;
    else
      use[n++] = cand[i];
  }
  double start = now_ms();
  rc = check_all(j, use, &n);
  while (rc == TJ_OK && nev < 2 * n && hipEventCreate(&ev[nev]) == hipSuccess)
    nev++;
  if (rc == TJ_OK && nev < 2 * n)
    rc = tj__fail(j->rt, TJ_EDEVICE, "%s: no events to time with", j->fn);
  if (rc == TJ_OK)
    rc = time_round(j, use, n, ev, t, 0);
  double round_ms = 0;
  for (int i = 0; i < n && rc == TJ_OK; i++)
    round_ms += t[i][0];
  double left = j->ahead ? AHEAD_RUN_MS * n
                         : TUNE_BUDGET_MS - (now_ms() - start);
  int rounds = tj__gemm_tune_rounds(j->ahead, left, round_ms);
  for (int r = 0; r < rounds && rc == TJ_OK; r++)
    rc = time_round(j, use, n, ev, t, r);
  for (int i = 0; i < n && rc == TJ_OK; i++)
    j->t[j->n++] = (timed){use[i], median_of(t[i], rounds), rounds};
  for (int i = 0; i < nev; i++)
    hipEventDestroy(ev[i]);
  free(t);
  qsort(j->t, (size_t)j->n, sizeof j->t[0], cmp_timed);
  return rc;
}

/* The "config<TAB>ms<TAB>runs" lines of the tuning table, then a
 * "rule<TAB>config" line naming the heuristic's choice; malloc'd. */
static char *measured_lines(const tune_job *j)
{
  size_t cap = (size_t)(j->n + 1) * 96 + 1, used = 0;
  char *s = malloc(cap);
  if (!s)
    return NULL;
  s[0] = '\0';
  for (int i = 0; i < j->n; i++)
    used += (size_t)snprintf(s + used, cap - used, "%s\t%.6f\t%d\n",
                             j->t[i].config->name, j->t[i].ms, j->t[i].runs);
  if (j->rule)
    snprintf(s + used, cap - used, "rule\t%s\n", j->rule->name);
  return s;
}

/* Store the winner of j for class cls; a failed store is a warning (the
 * decision still serves this runtime). */
static void record(tune_job *j, const char *cls, const char *device,
                   const char *origin)
{
  char *lines = measured_lines(j);
  tj_runtime *rt = j->rt;
  tj__cache *c = tj__runtime_cache(rt);
  if (!lines || !c)
    goto out;
  tj__tuning_row row = {"gemm_f16", rt->arch, TJ__PLATFORM, rt->compiler,
                        cls, j->t[0].config->name, j->M, j->N, j->K, device,
                        j->t[0].runs, lines, origin, 0};
  if (tj__cache_tuning_put(c, &row) != TJ_OK)
    tj__warn(rt, "could not store the tuning decision for gemm_f16 %s: %s",
             cls, tj__cache_errmsg(c));
out:
  free(lines);
}

/* Time the candidates for j's shape on its stream, with a scratch C
 * from the pool; TJ_OK with j->t filled. */
static int tune(tune_job *j, tj__device_props *props)
{
  tj_runtime *rt = j->rt;
  if (tj__device_query(rt->device.ordinal, props, 0) != TJ_OK)
    return tj__fail(rt, TJ_EDEVICE, "%s: could not ask the device about "
                    "itself", j->fn);
  j->sms = rt->sms;
  void *scratch = NULL;
  size_t bytes = (size_t)j->M * (size_t)j->N * 2;
  if (tj__alloc_async(&rt->device, &scratch, bytes, j->stream) != TJ_OK)
    return tj__fail(rt, TJ_ENOMEM, "%s: no device memory (%zu bytes) for the "
                    "tuner's scratch output", j->fn, bytes);
  j->C = scratch;
  /* Without memory for the flush the candidates are timed back to back,
   * A and B staying in L2 from one launch to the next (the measured
   * order can then differ from the benchmark's: bench/RESULTS.md). */
  if (tj__alloc_async(&rt->device, &j->flush, TUNE_FLUSH_BYTES, j->stream) !=
      TJ_OK)
    j->flush = NULL;
  int rc = time_all(j);
  if (j->flush && tj__free_async(j->flush, j->stream) != TJ_OK && rc == TJ_OK)
    rc = tj__fail(rt, TJ_EDEVICE, "%s: freeing the tuner's flush buffer "
                  "failed", j->fn);
  if (tj__free_async(scratch, j->stream) != TJ_OK && rc == TJ_OK)
    rc = tj__fail(rt, TJ_EDEVICE, "%s: freeing the tuner's scratch output "
                  "failed", j->fn);
  return rc;
}

/* A first-use tune: the winner, or NULL (heuristic) when not every
 * candidate could be timed (not built, or out of time) or something
 * failed; a failure is left as a warning, never the call's error. */
static const tj__gemm_config *first_use(tj_runtime *rt, void *stream, int M,
                                        int N, int K, const void *A, int lda,
                                        const void *B, int ldb,
                                        const char *cls)
{
  tune_job *j = calloc(1, sizeof *j);
  tj__device_props props;
  const tj__gemm_config *best = NULL;
  if (!j)
    return NULL;
  *j = (tune_job){.rt = rt, .fn = "tj_gemm_f16", .stream = stream, .M = M,
                  .N = N, .K = K, .A = A, .B = B, .lda = lda, .ldb = ldb};
  int rc = tune(j, &props);
  if (rc == TJ_OK && j->complete && j->n >= 2) {
    best = j->t[0].config;
    record(j, cls, props.name, "first use");
  } else if (rc != TJ_OK) {
    tj__warn(rt, "tj_gemm_f16: the first-use tune of %s failed (%s); the "
             "heuristic runs", cls, tj_strerror(rc));
  }
  free(j);
  return best;
}

/* ------------------------------------------------------------ decisions */

/* The cache's decision for the class: 1 with *c (NULL: one this library
 * does not know, ignored for good), 0 when there is none to use and a
 * tune may make one. */
static int stored_decision(tj_runtime *rt, const char *cls,
                           const tj__gemm_config **c)
{
  char *config = NULL;
  int bad = 0;
  *c = NULL;
  tj__cache *cache = tj__runtime_cache(rt);
  if (!cache)
    return 0;
  tj__tuning_row want = {"gemm_f16", rt->arch, TJ__PLATFORM, rt->compiler,
                         cls, NULL, 0, 0, 0, NULL, 0, NULL, NULL, 0};
  int rc = tj__cache_tuning_get(cache, &want, &config, &bad);
  if (rc == TJ_ECACHE)
    tj__warn(rt, "%s", tj__cache_errmsg(cache));
  if (rc != TJ_OK)
    return 0; /* none, or damaged: a tune replaces it */
  *c = tj__gemm_config_find(config);
  free(config);
  return 1;
}

/* Whether this runtime may ever time on first use. */
static int may_ever_tune(tj_runtime *rt)
{
  if (!rt->gemm_env.tune || rt->compile_only)
    return 0;
  tj__cache *c = tj__runtime_cache(rt);
  return c && !tj__cache_readonly(c);
}

const tj__gemm_config *tj__gemm_decision(tj_runtime *rt, void *stream,
                                         int may_tune, int M, int N, int K,
                                         const void *A, int lda,
                                         const void *B, int ldb,
                                         const void *C, int ldc)
{
  tj__gemm_tuning *g = rt->gemm;
  class_key key = key_of(rt->sms, M, N, K, C, ldc);
  char cls[TJ__SHAPE_CLASS_MAX];
  const tj__gemm_config *c = NULL;
  if (!g)
    return NULL;
  pthread_mutex_lock(&g->lock);
  long i = memo_find(g, &key, 1);
  if (i >= 0 && g->v[i].state == -1) { /* first sight: one query */
    class_name(&key, cls);
    g->v[i].state = stored_decision(rt, cls, &g->v[i].config) ||
                            !may_ever_tune(rt)
                        ? MEMO_DECIDED : MEMO_UNTUNED;
  }
  if (i < 0 || g->v[i].state == MEMO_DECIDED || !may_tune ||
      g->v[i].state == MEMO_TUNING || g->v[i].attempts >= TUNE_ATTEMPTS ||
      tj__stream_capturing(stream) != 0) {
    c = i >= 0 && g->v[i].state == MEMO_DECIDED ? g->v[i].config : NULL;
    pthread_mutex_unlock(&g->lock);
    return c;
  }
  g->v[i].state = MEMO_TUNING; /* other threads take the heuristic */
  g->v[i].attempts++;
  pthread_mutex_unlock(&g->lock);
  class_name(&key, cls);
  c = first_use(rt, stream, M, N, K, A, lda, B, ldb, cls);
  pthread_mutex_lock(&g->lock);
  i = memo_find(g, &key, 0);
  g->v[i].state = c ? MEMO_DECIDED : MEMO_UNTUNED;
  g->v[i].config = c;
  pthread_mutex_unlock(&g->lock);
  return c;
}

/* ------------------------------------------------------------ ahead */

/* Random fp16 in [-1, 1) (a fixed seed), rows of ld elements. */
static int fill_random(void *dev, size_t elems)
{
  enum { CHUNK = 1 << 16 };
  uint16_t *h = malloc(CHUNK * sizeof *h);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  int rc = h ? TJ_OK : TJ_ENOMEM;
  for (size_t i = 0; h && i < CHUNK; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    h[i] = tj_f32_to_f16((float)((double)(x >> 11) / 9007199254740992.0 * 2 - 1));
  }
  for (size_t done = 0; rc == TJ_OK && done < elems; done += CHUNK) {
    size_t n = elems - done < CHUNK ? elems - done : CHUNK;
    if (hipMemcpyHtoD((uint16_t *)dev + done, h, n * 2) != hipSuccess)
      rc = TJ_EDEVICE;
  }
  free(h);
  return rc;
}

static void report(const tune_job *j, const char *cls, const char *device,
                   tj_tuning_visit fn, void *ctx)
{
  tj_tuning_time times[MAX_CANDIDATES];
  for (int i = 0; i < j->n; i++)
    times[i] = (tj_tuning_time){j->t[i].config->name, j->t[i].ms,
                                j->t[i].runs};
  tj_tuning t = {"gemm_f16", j->rt->arch, TJ__PLATFORM, j->rt->compiler, cls,
                 j->t[0].config->name, j->M, j->N, j->K, device, "tune",
                 (int64_t)time(NULL), 1, j->n, times,
                 j->rule ? j->rule->name : NULL};
  fn(&t, ctx);
}

static int tune_inputs(tj_runtime *rt, tune_job *j, void **a, void **b)
{
  size_t ea = (size_t)j->M * (size_t)j->lda, eb = (size_t)j->K * (size_t)j->ldb;
  if (hipMalloc(a, ea * 2) != hipSuccess || hipMalloc(b, eb * 2) != hipSuccess)
    return tj__fail(rt, TJ_ENOMEM, "tj_gemm_f16_tune: no device memory for "
                    "A (%zu bytes) and B (%zu bytes)", ea * 2, eb * 2);
  if (fill_random(*a, ea) != TJ_OK || fill_random(*b, eb) != TJ_OK)
    return tj__fail(rt, TJ_EDEVICE, "tj_gemm_f16_tune: could not fill A and "
                    "B");
  j->A = *a;
  j->B = *b;
  return TJ_OK;
}

int tj_gemm_f16_tune(tj_runtime *rt, int M, int N, int K, tj_tuning_visit fn,
                     void *ctx)
{
  static const char name[] = "tj_gemm_f16_tune";
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  if (M < 1 || N < 1 || K < 1 || M > (1 << 30) || N > (1 << 30) ||
      K > (1 << 30))
    return tj__fail(rt, TJ_EINVAL, "%s: M=%d, N=%d, K=%d: each must be from "
                    "1 to 2^30", name, M, N, K);
  if (rt->compile_only)
    return tj__fail(rt, TJ_ENODEVICE, "%s: no GPU: tuning times kernels, and "
                    "this runtime is compile-only (arch %s)", name, rt->arch);
  /* The leading dimensions TMA takes (rows 16 bytes apart); the class
   * does not depend on them. */
  int lda = (K + 7) / 8 * 8, ldb = (N + 7) / 8 * 8;
  if (!tj__gemm_tunable(rt, M))
    return tj__fail(rt, TJ_EINVAL, "%s: nothing to tune for %dx%dx%d on "
                    "arch %s: the tuned kernels are the Hopper ones (sm_90 "
                    "with a driver that builds tensor maps, TJ_GEMM_SM90A "
                    "not 0, and for M <= 16 TJ_GEMM_SKINNY_SM90A not 0)",
                    name, M, N, K, rt->arch);
  tune_job *j = calloc(1, sizeof *j);
  if (!j)
    return tj__fail(rt, TJ_ENOMEM, "out of memory");
  *j = (tune_job){.rt = rt, .fn = name, .M = M, .N = N, .K = K, .lda = lda,
                  .ldb = ldb, .ahead = 1};
  void *a = NULL, *b = NULL;
  tj__device_props props;
  char cls[TJ__SHAPE_CLASS_MAX];
  tj__gemm_shape_class(rt->sms, M, N, K, NULL, N, cls); /* C: the pool's */
  int rc = tj_runtime_bind(rt);
  if (rc == TJ_OK)
    rc = tune_inputs(rt, j, &a, &b);
  if (rc == TJ_OK)
    rc = tune(j, &props);
  if (rc == TJ_OK && j->n == 0)
    rc = tj__fail(rt, TJ_EINVAL, "%s: no candidate applies to %dx%dx%d", name,
                  M, N, K);
  hipStreamSynchronize(NULL);
  hipFree(a);
  hipFree(b);
  if (rc == TJ_OK) {
    record(j, cls, props.name, "tune");
    if (rt->gemm) { /* this runtime takes it at once */
      class_key key = key_of(rt->sms, M, N, K, NULL, N);
      pthread_mutex_lock(&rt->gemm->lock);
      long i = memo_find(rt->gemm, &key, 1);
      if (i >= 0)
        rt->gemm->v[i] = (memo){key, MEMO_DECIDED, 0, j->t[0].config};
      pthread_mutex_unlock(&rt->gemm->lock);
    }
    if (fn)
      report(j, cls, props.name, fn, ctx);
  }
  free(j);
  return rc;
}
