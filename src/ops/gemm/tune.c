/*
 * tune.c: tj_gemm_tune and tj_gemm_f16_tune, which time the Hopper
 * configurations that apply to a shape of one op of the family (configs.c;
 * the op: tj__gemm_hopper_op, "gemm_f16" for tj_gemm_f16's combination)
 * and record the fastest as the decision for the op and its shape class,
 * for tj_gemm and every process sharing the cache.  It never runs on a call's own path: a tune blocks for a second
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
  /* The call each candidate runs: d's types, layouts and epilogue, its
   * A, B, bias and aux the tune's inputs, C the scratch (ldc = N). */
  tj_gemm_desc d;
  char op[TJ__GEMM_OP_MAX]; /* whose decision it is */
  int skinny; /* the skinny kernel's configurations, not the tiles' */
  size_t c_bytes; /* of one element of C */
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
  return j->d.c_type != TJ_DTYPE_F32 &&
         tj__gemm_tma_store_applies(tj__gemm_knobs_of(j->rt), 1, j->N, 0.0f,
                                    j->C, j->N);
}

/* Whether config c is worth timing: an unsplit one always; a split-K one
 * where the 128 x 128 tiles leave SMs idle, each part keeps at least four
 * k-tiles, and the parts make no more than two waves. */
static int applies(const tune_job *j, const tj__gemm_config *c)
{
  const tj__gemm_knobs *knobs = tj__gemm_knobs_of(j->rt);
  /* The skinny kernel's configurations where it runs (M <= 16, A not
   * transposed), and only those. */
  int skinny = c->kind == GEMM_KIND_SKINNY;
  if (skinny != j->skinny)
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
  if (j->skinny || j->M > TJ__GEMM_SKINNY_ROWS) {
    tj__gemm_heuristic(j->sms, j->M, j->N, j->K, &h);
  } else { /* few rows the skinny kernel does not take: the tiles' */
    tj__gemm_plan p = tj__gemm_plan_tiles(j->rt, j->M, j->N, j->K);
    h = (tj__gemm_config){(int)p.kind, p.tile_n, p.split, p.tma_store};
  }
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
  tj_gemm_desc d = j->d;
  d.c = j->C;
  return tj__gemm_hopper_run(j->rt, j->fn, j->stream, &d, c, NULL);
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

/* Element i of the values of type at p. */
static double value_at(const void *p, int type, size_t i)
{
  if (type == TJ_DTYPE_F32)
    return ((const float *)p)[i];
  uint16_t h = ((const uint16_t *)p)[i];
  return type == TJ_DTYPE_BF16 ? tj_bf16_to_f32(h) : tj_f16_to_f32(h);
}

/* tj__gemm_outputs_agree for n values of type: each within rel of the
 * larger magnitude plus 2 rel of ref's root mean square, rel 2^-9 (f16,
 * f32) or 2^-7 (bf16, whose significand has two bits fewer than a
 * rounding of f16's). */
static int outputs_agree(const void *ref, const void *got, int type, size_t n,
                         size_t *bad)
{
  double rel = type == TJ_DTYPE_BF16 ? 0x1p-7 : 0x1p-9, sum = 0;
  size_t finite = 0;
  for (size_t i = 0; i < n; i++) {
    double r = value_at(ref, type, i);
    if (isfinite(r)) {
      sum += r * r;
      finite++;
    }
  }
  double rms = finite ? sqrt(sum / (double)finite) : 0;
  for (size_t i = 0; i < n; i++) {
    double r = value_at(ref, type, i), g = value_at(got, type, i);
    int same = isnan(r) || isnan(g)   ? isnan(r) && isnan(g)
               : isinf(r) || isinf(g) ? r == g
                                      : fabs(r - g) <= rel * fmax(fabs(r),
                                                                  fabs(g)) +
                                                           2 * rel * rms;
    if (!same) {
      *bad = i;
      return 0;
    }
  }
  return 1;
}

int tj__gemm_outputs_agree(const uint16_t *ref, const uint16_t *got, size_t n,
                           size_t *bad)
{
  return outputs_agree(ref, got, TJ_DTYPE_F16, n, bad);
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
static int sample_output(tune_job *j, const tj__gemm_config *c, char *out)
{
  hipStream_t s = (hipStream_t)j->stream;
  size_t w = check_width(j), half = w / 2, e = j->c_bytes;
  const char *C = j->C;
  int rc = tj__memset_async(j->C, 0xff, (size_t)j->M * (size_t)j->N * e, s);
  if (rc == TJ_OK && (rc = run_once(j, c)) != TJ_OK)
    return rc;
  if (rc == TJ_OK && hipStreamSynchronize(s) != hipSuccess)
    rc = TJ_EDEVICE;
  for (int i = 0; i < CHECK_ROWS && rc == TJ_OK; i++) {
    const char *row = C + (size_t)check_row(j, i) * (size_t)j->N * e;
    char *to = out + (size_t)i * w * e;
    /* The whole row, or its two ends. */
    size_t first = w == (size_t)j->N ? w : half;
    if (hipMemcpyDtoH(to, (void *)row, first * e) != hipSuccess ||
        (first < w &&
         hipMemcpyDtoH(to + half * e, (void *)(row + (j->N - half) * e),
                       half * e) != hipSuccess))
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
  char *ref = malloc(cells * j->c_bytes), *got = malloc(cells * j->c_bytes);
  int type = j->d.c_type;
  int rc = ref && got ? TJ_OK : tj__fail(j->rt, TJ_ENOMEM, "out of memory");
  int kept = 0;
  for (int i = 0; i < *n && rc == TJ_OK; i++) {
    size_t bad = 0;
    rc = sample_output(j, use[i], i == 0 ? ref : got);
    if (rc != TJ_OK)
      break;
    if (i == 0 || outputs_agree(ref, got, type, cells, &bad)) {
      use[kept++] = use[i];
      continue;
    }
    size_t w = check_width(j);
    tj__warn(j->rt, "%s: %dx%dx%d: the tuner set %s aside: C[%d][%d] is %g "
             "where %s gives %g", j->fn, j->M, j->N, j->K, name_of(j, use[i]),
             check_row(j, (int)(bad / w)), check_col(j, bad % w),
             value_at(got, type, bad), name_of(j, use[0]),
             value_at(ref, type, bad));
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
  tj__tuning_row row = {j->op, rt->arch, TJ__PLATFORM, rt->compiler,
                        cls, name_of(j, j->t[0].config), j->M, j->N, j->K,
                        device, j->t[0].runs, lines, "tune", 0};
  if (tj__cache_tuning_put(c, &row) != TJ_OK)
    tj__warn(rt, "could not store the tuning decision for %s %s: %s",
             j->op, cls, tj__cache_errmsg(c));
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
  size_t bytes = (size_t)j->M * (size_t)j->N * j->c_bytes;
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

/* elems random values of type in [-1, 1) (a fixed seed) at dev. */
static int fill_random(void *dev, int type, size_t elems)
{
  enum { CHUNK = 1 << 16 };
  size_t e = type == TJ_DTYPE_F32 ? 4 : 2;
  char *h = malloc(CHUNK * e);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  int rc = h ? TJ_OK : TJ_ENOMEM;
  for (size_t i = 0; h && i < CHUNK; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    float f = (float)((double)(x >> 11) / 9007199254740992.0 * 2 - 1);
    uint16_t v = type == TJ_DTYPE_BF16 ? tj_f32_to_bf16(f) : tj_f32_to_f16(f);
    if (type == TJ_DTYPE_F32)
      memcpy(h + i * 4, &f, 4);
    else
      memcpy(h + i * 2, &v, 2);
  }
  for (size_t done = 0; rc == TJ_OK && done < elems; done += CHUNK) {
    size_t n = elems - done < CHUNK ? elems - done : CHUNK;
    if (hipMemcpyHtoD((char *)dev + done * e, h, n * e) != hipSuccess)
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
  tj_tuning t = {j->op, j->rt->arch, TJ__PLATFORM, j->rt->compiler, cls,
                 name_of(j, j->t[0].config), j->M, j->N, j->K, device, "tune",
                 (int64_t)time(NULL), 1, j->n, times,
                 j->rule ? name_of(j, j->rule) : NULL};
  fn(&t, ctx);
}

/* The tune's inputs: A and B as the job's descriptor stores them, and
 * the bias (bias, biasgelu) or aux (dgelu) its epilogue reads, each
 * allocated into in[] and filled with random values. */
enum { IN_A, IN_B, IN_BIAS, IN_AUX, N_INPUTS };

static int tune_inputs(tune_job *j, void *in[N_INPUTS])
{
  tj_gemm_desc *d = &j->d;
  int epi = d->epilogue, ct = d->c_type;
  size_t ea = (size_t)(d->trans_a ? d->k : d->m) * (size_t)d->lda,
         eb = (size_t)(d->trans_b ? d->n : d->k) * (size_t)d->ldb;
  size_t elems[N_INPUTS] = {
      ea, eb,
      epi == TJ_EPILOGUE_BIAS || epi == TJ_EPILOGUE_BIAS_GELU ? (size_t)j->N
                                                             : 0,
      epi == TJ_EPILOGUE_DGELU ? (size_t)j->M * (size_t)j->N : 0};
  int types[N_INPUTS] = {d->a_type, d->b_type, ct, ct};
  for (int i = 0; i < N_INPUTS; i++) {
    size_t bytes = elems[i] * (types[i] == TJ_DTYPE_F32 ? 4 : 2);
    if (elems[i] == 0)
      continue;
    if (hipMalloc(&in[i], bytes) != hipSuccess)
      return tj__fail(j->rt, TJ_ENOMEM, "%s: no device memory (%zu bytes) "
                      "for the tune's inputs", j->fn, bytes);
    if (fill_random(in[i], types[i], elems[i]) != TJ_OK)
      return tj__fail(j->rt, TJ_EDEVICE, "%s: could not fill the tune's "
                      "inputs", j->fn);
  }
  d->a = in[IN_A], d->b = in[IN_B], d->bias = in[IN_BIAS], d->aux = in[IN_AUX];
  d->ldaux = in[IN_AUX] ? j->N : 0;
  return TJ_OK;
}

/* j for the call d describes (kinds checked), its sizes already in
 * range: its op, candidates' kind and leading dimensions (the ones TMA
 * takes: rows 16 bytes apart; the class does not depend on them). */
static void job_of(tj_runtime *rt, const char *fn, const tj_gemm_desc *d,
                   tune_job *j)
{
  int M = (int)d->m, N = (int)d->n, K = (int)d->k;
  *j = (tune_job){.rt = rt, .fn = fn, .M = M, .N = N, .K = K, .sms = rt->sms};
  memset(&j->d, 0, sizeof j->d);
  j->d.size = sizeof j->d;
  j->d.a_type = d->a_type, j->d.b_type = d->b_type, j->d.c_type = d->c_type;
  j->d.trans_a = d->trans_a, j->d.trans_b = d->trans_b;
  j->d.epilogue = d->epilogue;
  j->d.m = M, j->d.n = N, j->d.k = K;
  j->d.alpha = 1.0f, j->d.beta = 0.0f;
  j->d.lda = ((d->trans_a ? M : K) + 7) / 8 * 8;
  j->d.ldb = ((d->trans_b ? K : N) + 7) / 8 * 8;
  j->d.ldc = N;
  j->c_bytes = d->c_type == TJ_DTYPE_F32 ? 4 : 2;
  j->skinny = M <= TJ__GEMM_SKINNY_ROWS && !d->trans_a &&
              tj__gemm_skinny_on(rt);
  tj__gemm_hopper_op(&j->d, j->op);
  list_configs(j);
}

size_t tj__gemm_tune_candidates(tj_runtime *rt, const tj_gemm_desc *d,
                                char names[][TJ__GEMM_CONFIG_NAME_MAX],
                                size_t max)
{
  tune_job *j = calloc(1, sizeof *j);
  const tj__gemm_config *use[MAX_CANDIDATES];
  if (!j)
    return 0;
  job_of(rt, "tj__gemm_tune_candidates", d, j);
  int n = candidates(j, heuristic(j), use);
  size_t got = 0;
  for (; got < (size_t)n && got < max; got++)
    snprintf(names[got], TJ__GEMM_CONFIG_NAME_MAX, "%s", name_of(j, use[got]));
  free(j);
  return got;
}

/* Whether rt runs d (kinds and sizes checked) on the Hopper kernels,
 * the ones with configurations to tune: tj_gemm_f16's rule for its
 * combination, the family's Hopper path for the rest. */
static int tunable(tj_runtime *rt, const tune_job *j)
{
  if (strcmp(j->op, TJ__GEMM_OP) == 0)
    return tj__gemm_tunable(rt, j->M);
  return tj__gemm_hopper_serves(rt, &j->d);
}

/* The checks of tj_gemm_tune: d's kinds, one type for A and B, sizes
 * from 1 to 2^30, a runtime with a GPU. */
static int check_tune(tj_runtime *rt, const char *fn, const tj_gemm_desc *d)
{
  if (!d || d->size < sizeof *d)
    return tj__fail(rt, TJ_EINVAL, "%s: %s", fn,
                    d ? "d->size is less than sizeof (tj_gemm_desc)"
                      : "d is NULL");
  int types[3] = {d->a_type, d->b_type, d->c_type};
  int rc = tj__gemm_check_kinds(rt, fn, types, d->trans_a, d->trans_b,
                                d->epilogue);
  if (rc != TJ_OK)
    return rc;
  if (d->a_type != d->b_type)
    return tj__fail(rt, TJ_EINVAL, "%s: A and B of different types run the "
                    "portable kernel, which has nothing to tune", fn);
  int64_t lim = (int64_t)1 << 30;
  if (d->m < 1 || d->n < 1 || d->k < 1 || d->m > lim || d->n > lim ||
      d->k > lim)
    return tj__fail(rt, TJ_EINVAL, "%s: M=%lld, N=%lld, K=%lld: each must be "
                    "from 1 to 2^30", fn, (long long)d->m, (long long)d->n,
                    (long long)d->k);
  if (rt->compile_only)
    return tj__fail(rt, TJ_ENODEVICE, "%s: no GPU: tuning times kernels, and "
                    "this runtime is compile-only (arch %s)", fn, rt->arch);
  return TJ_OK;
}

/* Time j's candidates on inputs of its own and record the fastest. */
static int tune_job_run(tune_job *j, tj_tuning_visit fn, void *ctx)
{
  tj_runtime *rt = j->rt;
  void *in[N_INPUTS] = {NULL};
  tj__device_props props;
  char cls[TJ__SHAPE_CLASS_MAX];
  tj__gemm_shape_class(rt->sms, j->M, j->N, j->K, NULL, j->N, cls); /* C:
                                                           the pool's */
  int rc = tj_runtime_bind(rt);
  if (rc == TJ_OK)
    rc = tune_inputs(j, in);
  if (rc == TJ_OK)
    rc = tune(j, &props);
  if (rc == TJ_OK && j->n == 0)
    rc = tj__fail(rt, TJ_EINVAL, "%s: no candidate applies to %dx%dx%d",
                  j->fn, j->M, j->N, j->K);
  hipStreamSynchronize(NULL);
  for (int i = 0; i < N_INPUTS; i++)
    hipFree(in[i]);
  if (rc == TJ_OK) {
    record(j, cls, props.name);
    tj__gemm_decision_take(rt, j->op, j->M, j->N, j->K,
                           j->t[0].config); /* at once */
    if (fn)
      report(j, cls, props.name, fn, ctx);
  }
  return rc;
}

static int tune_desc(tj_runtime *rt, const char *fn_name,
                     const tj_gemm_desc *d, tj_tuning_visit fn, void *ctx)
{
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  int rc = check_tune(rt, fn_name, d);
  if (rc != TJ_OK)
    return rc;
  tune_job *j = calloc(1, sizeof *j);
  if (!j)
    return tj__fail(rt, TJ_ENOMEM, "out of memory");
  job_of(rt, fn_name, d, j);
  if (!tunable(rt, j))
    rc = tj__fail(rt, TJ_EINVAL, "%s: %s: nothing to tune for %dx%dx%d on "
                  "arch %s: the tuned kernels are the Hopper ones (sm_90 "
                  "with a driver that builds tensor maps, TJ_GEMM_SM90A "
                  "not 0, and for M <= 16 with A not transposed "
                  "TJ_GEMM_SKINNY_SM90A not 0)", fn_name, j->op, j->M, j->N,
                  j->K, rt->arch);
  else
    rc = tune_job_run(j, fn, ctx);
  free(j);
  return rc;
}

int tj_gemm_tune(tj_runtime *rt, const tj_gemm_desc *d, tj_tuning_visit fn,
                 void *ctx)
{
  return tune_desc(rt, "tj_gemm_tune", d, fn, ctx);
}

int tj_gemm_f16_tune(tj_runtime *rt, int M, int N, int K, tj_tuning_visit fn,
                     void *ctx)
{
  tj_gemm_desc d = tj__gemm_f16_desc(M, N, K, 1.0f, NULL, K, NULL, N, 0.0f,
                                     NULL, N);
  return tune_desc(rt, "tj_gemm_f16_tune", &d, fn, ctx);
}
