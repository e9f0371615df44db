/*
 * tune.c: tj_gemm_f16_tune, which times the Hopper configurations that
 * apply to a shape (configs.c) and records the fastest as the decision
 * for its shape class, for tj_gemm_f16 and every process sharing the
 * cache.  It never runs on a call's own path: a tune blocks for a second
 * or more, and decisions made that way are ahead of time (tokitai-jit
 * --tune) or shipped in a cache.
 *
 * The check.  Before anything is timed, every candidate runs once on the
 * tune's inputs, into C filled with NaN, and eight rows of its C must
 * agree with the heuristic's choice's within rounding (check_all); one
 * that does not is set aside untimed, with a warning, and listed with no
 * runs.  So a decision can change how fast a shape class runs, never what
 * it computes, even where a configuration has a bug at a shape the tests
 * did not try.
 */
#include "plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define AHEAD_RUN_MS 200.0 /* time spent on each candidate */
#define AHEAD_MIN_RUNS 5
#define AHEAD_MAX_RUNS 50
/* Written before each timed launch, so that every candidate reads A and B
 * from memory, as the benchmark times them (bench/bench_util.c): more
 * than twice the L2 of any sm_90 part. */
#define TUNE_FLUSH_BYTES ((size_t)128 << 20)
#define MAX_CANDIDATES 40

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
  int sms;
  timed t[MAX_CANDIDATES];
  int n;
  const tj__gemm_config *rule; /* the heuristic's choice, as timed */
  /* Every configuration (what the pointers above point into) and its
   * name. */
  tj__gemm_config all[TJ__GEMM_CONFIGS_MAX];
  char names[TJ__GEMM_CONFIGS_MAX][TJ__GEMM_CONFIG_NAME_MAX];
  size_t nall;
} tune_job;

/* The configurations and their names into j. */
static void list_configs(tune_job *j)
{
  j->nall = tj__gemm_configs(j->all);
  for (size_t i = 0; i < j->nall; i++)
    tj__gemm_config_name(&j->all[i], j->names[i]);
}

/* c's name (c one of j->all). */
static const char *name_of(const tune_job *j, const tj__gemm_config *c)
{
  return j->names[c - j->all];
}

/* Whether a _tmastore candidate's launches store C through TMA, as
 * tj_gemm_f16's would (its scratch C: beta 0, ldc = N); else they would
 * time their direct-store twin again. */
static int stores_through_tma(const tune_job *j)
{
  return tj__gemm_tma_store_applies(tj__gemm_knobs_of(j->rt), 1, j->N, 0.0f,
                                    j->C, j->N);
}

/* Whether config c is worth timing: an unsplit one always; a split-K one
 * where the 128 x 128 tiles leave SMs idle, each part keeps at least four
 * k-tiles, and the parts make no more than two waves. */
static int applies(const tune_job *j, const tj__gemm_config *c)
{
  const tj__gemm_knobs *knobs = tj__gemm_knobs_of(j->rt);
  /* The skinny kernel's configurations for M <= 16, and only those. */
  int skinny = c->kind == GEMM_KIND_SKINNY;
  if (skinny != (j->M <= TJ__GEMM_SKINNY_ROWS))
    return 0;
  if (skinny)
    return 1;
  /* Not the multicast pairs where the knobs turn them off, nor TMA
   * stores where they do or the scratch C (ldc = N) cannot take them:
   * they would time their base again. */
  if (c->kind == GEMM_KIND_MC2 && knobs->multicast == 0)
    return 0;
  if (c->tma_store && !stores_through_tma(j))
    return 0;
  if (c->split == 1)
    return 1;
  long long tiles = (long long)((j->M - 1) / 128 + 1) * ((j->N - 1) / 128 + 1);
  int ktiles = (j->K - 1) / 64 + 1;
  return tiles < j->sms && c->split <= ktiles / 4 &&
         tiles * c->split <= 2LL * j->sms;
}

/* The heuristic's choice as this tune would run it: where the TMA store
 * does not apply, the same tiles storing directly (which applies()
 * keeps), so that one launch is not timed under two names. */
static const tj__gemm_config *heuristic(const tune_job *j)
{
  tj__gemm_config h;
  tj__gemm_heuristic(j->sms, j->M, j->N, j->K, &h);
  if (h.tma_store && !stores_through_tma(j))
    h.tma_store = 0;
  for (size_t i = 0; i < j->nall; i++)
    if (memcmp(&j->all[i], &h, sizeof h) == 0)
      return &j->all[i];
  return NULL;
}

/* The candidates, the heuristic's choice h (NULL for none) first: its
 * kernel is loaded for the call anyway. */
static int candidates(const tune_job *j, const tj__gemm_config *h,
                      const tj__gemm_config **out)
{
  int n = 0;
  if (h)
    out[n++] = h;
  for (size_t i = 0; i < j->nall; i++)
    if (&j->all[i] != h && applies(j, &j->all[i]) && n < MAX_CANDIDATES)
      out[n++] = &j->all[i];
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

/* The timed, fastest first, then those set aside (no runs). */
static int cmp_timed(const void *a, const void *b)
{
  const timed *x = a, *y = b;
  if ((x->runs == 0) != (y->runs == 0))
    return x->runs == 0 ? 1 : -1;
  return (x->ms > y->ms) - (x->ms < y->ms);
}

/* How many timed rounds fit left ms, a round taking round_ms (the warm-up
 * round's GPU time; 0: unknown, the most): from AHEAD_MIN_RUNS to
 * AHEAD_MAX_RUNS. */
int tj__gemm_tune_rounds(double left, double round_ms)
{
  double fit = round_ms > 0 ? left / round_ms : AHEAD_MAX_RUNS;
  return fit < AHEAD_MIN_RUNS   ? AHEAD_MIN_RUNS
         : fit > AHEAD_MAX_RUNS ? AHEAD_MAX_RUNS
                                : (int)fit;
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
                    "failed", j->fn, name_of(j, c));
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
             "where %s gives %g", j->fn, j->M, j->N, j->K, name_of(j, use[i]),
             check_row(j, (int)(bad / w)), check_col(j, bad % w),
             (double)tj_f16_to_f32(got[bad]), name_of(j, use[0]),
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
 * by check_all.  First the check, which also loads each candidate's
 * kernels; then a warm-up round, which sizes the rest; then rounds that
 * launch every candidate once each, in turn, so that whatever drifts while
 * they run (a GPU's clocks rise from idle under load, then heat) falls on
 * all of them alike: timed one after another, the first, at idle clocks,
 * can lose to a slower one.  The median of each.
 */
static int time_all(tune_job *j)
{
  const tj__gemm_config *use[MAX_CANDIDATES];
  const tj__gemm_config *h = j->rule = heuristic(j);
  double (*t)[AHEAD_MAX_RUNS] = calloc(MAX_CANDIDATES, sizeof *t);
  hipEvent_t ev[2 * MAX_CANDIDATES];
  int n = candidates(j, h, use), nev = 0, rc = TJ_OK;
  if (!t)
    return tj__fail(j->rt, TJ_ENOMEM, "out of memory");
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
  int rounds = tj__gemm_tune_rounds(AHEAD_RUN_MS * n, round_ms);
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
                             name_of(j, j->t[i].config), j->t[i].ms,
                             j->t[i].runs);
  if (j->rule)
    snprintf(s + used, cap - used, "rule\t%s\n", name_of(j, j->rule));
  return s;
}

/* Store the winner of j for class cls; a failed store is a warning (the
 * decision still serves this runtime). */
static void record(tune_job *j, const char *cls, const char *device)
{
  char *lines = measured_lines(j);
  tj_runtime *rt = j->rt;
  tj__cache *c = tj__runtime_cache(rt);
  if (!lines || !c)
    goto out;
  tj__tuning_row row = {TJ__GEMM_OP, rt->arch, TJ__PLATFORM, rt->compiler,
                        cls, name_of(j, j->t[0].config), j->M, j->N, j->K,
                        device, j->t[0].runs, lines, "tune", 0};
  if (tj__cache_tuning_put(c, &row) != TJ_OK)
    tj__warn(rt, "could not store the tuning decision for %s %s: %s",
             TJ__GEMM_OP, cls, tj__cache_errmsg(c));
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
   * order can then differ from the benchmark's). */
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

/* ------------------------------------------------------------ the call */

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
    times[i] = (tj_tuning_time){name_of(j, j->t[i].config), j->t[i].ms,
                                j->t[i].runs};
  tj_tuning t = {TJ__GEMM_OP, j->rt->arch, TJ__PLATFORM, j->rt->compiler, cls,
                 name_of(j, j->t[0].config), j->M, j->N, j->K, device, "tune",
                 (int64_t)time(NULL), 1, j->n, times,
                 j->rule ? name_of(j, j->rule) : NULL};
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
                  .ldb = ldb};
  list_configs(j);
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
    record(j, cls, props.name);
    tj__gemm_decision_take(rt, M, N, K, j->t[0].config); /* at once */
    if (fn)
      report(j, cls, props.name, fn, ctx);
  }
  free(j);
  return rc;
}
