/*
 * verify.c: tj_verify (the "verify" section of tokitai-jit/ops.h).
 *
 * A run generates seeded random inputs, launches the kernel through its
 * public C call (so the launch shape checked is the one callers get),
 * poisons the outputs before every launch so that an element the kernel
 * did not write fails, times the launches with events, and compares the
 * last launch's outputs with the double-precision oracle of oracle.h:
 * every element, except for GEMM beyond n = 512, where a seeded sample of
 * whole rows keeps the CPU's share to about 2^27 multiply-adds.  A GEMM
 * run is tj_gemm_f16's choice for its shape and device (on sm_90, one of
 * gemm_sm90a.hip's configurations, named from its plan), and the
 * report's ran field names what ran.  The MoE permutation's entries run a
 * routing and a call of their own (moe_verify.c).  The report's JSON and
 * markdown forms are report.c's.
 */
#include "internal.h"
#include "embedded.h"
#include "gemm/plan.h"
#include "moe.h"
#include "oracle.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Time spent on timed launches is about this, within the bounds below. */
#define TIMING_BUDGET_MS 500.0
#define MIN_TIMED 3
#define MAX_TIMED 25
/* Oracle values are made and compared this many at a time, so host
 * memory stays at the inputs and outputs themselves. */
#define COMPARE_CHUNK ((size_t)1 << 20)
/* GEMM: every row up to n = 512, i.e. up to 2^27 multiply-adds; above,
 * as many rows as that budget buys, and never fewer than two. */
#define GEMM_ORACLE_BUDGET ((uint64_t)1 << 27)
#define GEMM_MIN_ROWS 2
/* M = N = K = n; the grid allows 65535 blocks of 128 rows. */
#define GEMM_N_MAX ((uint64_t)65535 * 128)
/* fp16 has no relative precision below its smallest normal, 2^-14: there
 * a correctly rounded result is only good to 2^-25 absolute.  So rel L2's
 * denominator never drops below that of values of magnitude 2^-14;
 * without this floor one correctly rounded output of 1e-6 alone gives a
 * rel L2 near 1e-2.  Larger outputs never feel it. */
#define F16_REL_FLOOR 0x1p-14

enum verify_op { OP_ADD_I32, OP_GELU_FWD, OP_GELU_BWD, OP_GELU_FWD_BWD, OP_GEMM };

/* What tj_verify knows about a kernel: its arrays, limits and inputs. */
typedef struct verify_kind {
  const char *name;
  enum verify_op op;
  int nin, nout;
  size_t elem;
  double max_abs_tol, rel_l2_tol; /* INFINITY: not limited */
  double rel_floor;               /* see F16_REL_FLOOR; 0: none */
  double lo, hi;                  /* input range of the fp16 kernels */
  int gemm_rows;                  /* M of a skinny GEMM entry; 0: M = n */
} verify_kind;

static const verify_kind kinds[] = {
    {"add_i32", OP_ADD_I32, 2, 1, 4, 0.0, 0.0, 0.0, 0.0, 0.0, 0},
    {"gelu_fwd_f16", OP_GELU_FWD, 1, 1, 2, 1e-2, 1e-3, F16_REL_FLOOR, -6.0, 6.0, 0},
    {"gelu_bwd_f16", OP_GELU_BWD, 2, 1, 2, 1e-2, 1e-3, F16_REL_FLOOR, -6.0, 6.0, 0},
    {"gelu_fwd_bwd_f16", OP_GELU_FWD_BWD, 2, 2, 2, 1e-2, 1e-3, F16_REL_FLOOR,
     -6.0, 6.0, 0},
    {"gemm_f16", OP_GEMM, 2, 1, 2, INFINITY, 1e-3, F16_REL_FLOOR, -1.0, 1.0, 0},
    /* The GEMM entries run through tj_gemm_f16, and the report names
     * what ran.  The skinny entries: their own M, N = K = n, which is the
     * shape that makes tj_gemm_f16 pick them. */
    {"gemm_skinny_f16_m1", OP_GEMM, 2, 1, 2, INFINITY, 1e-3, F16_REL_FLOOR, -1.0, 1.0, 1},
    {"gemm_skinny_f16_m2", OP_GEMM, 2, 1, 2, INFINITY, 1e-3, F16_REL_FLOOR, -1.0, 1.0, 2},
    {"gemm_skinny_f16_m4", OP_GEMM, 2, 1, 2, INFINITY, 1e-3, F16_REL_FLOOR, -1.0, 1.0, 4},
    {"gemm_skinny_f16_m8", OP_GEMM, 2, 1, 2, INFINITY, 1e-3, F16_REL_FLOOR, -1.0, 1.0, 8},
    /* The tensor-core skinny entries (NVIDIA sm_80 and later, where
     * tj_gemm_f16 takes them for every M <= 16, the _m entries' rows
     * included): M rows, N = K = n; _n64 once n > 8384, _n32 below, and
     * the reduce where n leaves the strips too few (split-K).  Elsewhere
     * the same calls run the FMA or the tiled kernels. */
    {"gemm_skinny_f16_tc_n32", OP_GEMM, 2, 1, 2, INFINITY, 1e-3, F16_REL_FLOOR, -1.0, 1.0, 16},
    {"gemm_skinny_f16_tc_n64", OP_GEMM, 2, 1, 2, INFINITY, 1e-3, F16_REL_FLOOR, -1.0, 1.0, 9},
    {"gemm_skinny_f16_tc_reduce", OP_GEMM, 2, 1, 2, INFINITY, 1e-3, F16_REL_FLOOR, -1.0, 1.0, 3},
};

static const verify_kind *find_kind(const char *name)
{
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcmp(kinds[i].name, name) == 0)
      return &kinds[i];
  return NULL;
}

/* ------------------------------------------------------- inputs */

/* splitmix64: tiny, seedable with any value, good enough to spread test
 * inputs; each array gets its own stream of the seed. */
static uint64_t splitmix64(uint64_t *state)
{
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t stream_of(uint64_t seed, int which)
{
  uint64_t s = seed ^ (0xd1b54a32d192ed03ull * (uint64_t)(which + 1));
  return splitmix64(&s);
}

/* Uniform in [lo, hi], rounded to fp16.  Zeros are drawn again, so that
 * no input is ever all zeros (which would hide a kernel that writes 0). */
static void fill_f16(uint16_t *p, size_t n, double lo, double hi,
                     uint64_t state)
{
  for (size_t i = 0; i < n; i++) {
    uint16_t h;
    do {
      double u = (double)(splitmix64(&state) >> 11) * 0x1p-53;
      h = tj_f32_to_f16((float)(lo + (hi - lo) * u));
    } while ((h & 0x7fffu) == 0);
    p[i] = h;
  }
}

/* Uniform over the non-zero 32-bit values: half of all sums wrap. */
static void fill_i32(int32_t *p, size_t n, uint64_t state)
{
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    do
      u = (uint32_t)(splitmix64(&state) >> 32);
    while (u == 0);
    p[i] = (int32_t)u;
  }
}

/* ------------------------------------------------------- one run */

typedef struct verify_run {
  tj_runtime *rt;
  const verify_kind *kind;
  uint64_t n;            /* elements, or the GEMM size */
  uint64_t seed;
  size_t in_bytes, out_bytes; /* of each input, each output */
  void *in[2], *out[2];  /* host copies */
  void *dev[4];          /* inputs, then outputs */
  int timed;             /* launches in the median */
  double ms;             /* their median */
  uint64_t rows;         /* GEMM rows compared */
  tj__error_acc err[2];  /* one per output */
  tj__error_stats stats[2]; /* their results */
  char ran[64];          /* what ran (tj_report's ran) */
} verify_run;

/* The GEMM's M: the skinny entry's row count, else n (square). */
static int gemm_m(const verify_run *v)
{
  return v->kind->gemm_rows ? v->kind->gemm_rows : (int)v->n;
}

static int device_failed(tj_runtime *rt, const char *what, hipError_t e)
{
  return tj__fail(rt, TJ_EDEVICE, "tj_verify: %s failed: %s", what,
                  hipGetErrorString(e));
}

static int make_inputs(verify_run *v)
{
  const verify_kind *kd = v->kind;
  size_t count = v->in_bytes / kd->elem;
  for (int i = 0; i < kd->nin; i++) {
    if (!(v->in[i] = malloc(v->in_bytes)))
      return tj__fail(v->rt, TJ_ENOMEM, "tj_verify: out of host memory for "
                      "%zu bytes of input", v->in_bytes);
    if (kd->op == OP_ADD_I32)
      fill_i32(v->in[i], count, stream_of(v->seed, i));
    else
      fill_f16(v->in[i], count, kd->lo, kd->hi, stream_of(v->seed, i));
  }
  for (int i = 0; i < kd->nout; i++)
    if (!(v->out[i] = malloc(v->out_bytes)))
      return tj__fail(v->rt, TJ_ENOMEM, "tj_verify: out of host memory for "
                      "%zu bytes of output", v->out_bytes);
  return TJ_OK;
}

static int make_device_buffers(verify_run *v)
{
  const verify_kind *kd = v->kind;
  for (int i = 0; i < kd->nin + kd->nout; i++) {
    size_t bytes = i < kd->nin ? v->in_bytes : v->out_bytes;
    hipError_t e = hipMalloc(&v->dev[i], bytes);
    if (e != hipSuccess) {
      v->dev[i] = NULL;
      return tj__fail(v->rt, TJ_ENOMEM, "tj_verify: hipMalloc of %zu bytes "
                      "failed: %s", bytes, hipGetErrorString(e));
    }
    if (i < kd->nin && (e = hipMemcpyHtoD(v->dev[i], v->in[i], bytes)) != hipSuccess)
      return device_failed(v->rt, "copying inputs to the device", e);
  }
  return TJ_OK;
}

static void release(verify_run *v)
{
  for (int i = 0; i < 2; i++) {
    free(v->in[i]);
    free(v->out[i]);
  }
  for (int i = 0; i < 4; i++)
    hipFree(v->dev[i]);
}

/* GEMM runs with alpha = 1 and beta = 0, so that C is only written and
 * its poison cannot leak into the result. */
static int launch_once(const verify_run *v)
{
  const int M = gemm_m(v);
  void *const *d = v->dev;
  size_t n = (size_t)v->n;
  int g = (int)v->n;
  switch (v->kind->op) {
  case OP_ADD_I32:
    return tj_add_i32(v->rt, NULL, d[0], d[1], d[2], n);
  case OP_GELU_FWD:
    return tj_gelu_fwd_f16(v->rt, NULL, d[0], d[1], n);
  case OP_GELU_BWD:
    return tj_gelu_bwd_f16(v->rt, NULL, d[0], d[1], d[2], n);
  case OP_GELU_FWD_BWD:
    return tj_gelu_fwd_bwd_f16(v->rt, NULL, d[0], d[1], d[2], d[3], n);
  case OP_GEMM:
    return tj_gemm_f16(v->rt, NULL, M, g, g, 1.0f, d[0], g, d[1], g, 0.0f,
                       d[2], g);
  }
  return TJ_EINVAL;
}

/* ------------------------------------------------------- which GEMM runs */

/* The plan tj_gemm_f16 has for the run's shape and buffers (after the
 * first launch). */
static tj__gemm_plan natural_plan(const verify_run *v)
{
  int g = (int)v->n;
  return tj__gemm_plan_call(v->rt, gemm_m(v), g, g, v->dev[0], g,
                            v->dev[1], g, v->dev[2], g);
}

/* The split-K reduce that follows a plan's entry, or NULL. */
static const char *reduce_of(const tj__gemm_plan *p)
{
  if (p->split <= 1)
    return NULL;
  return p->path == GEMM_PATH_SKINNY_TC ? "gemm_skinny_f16_tc_reduce"
                                        : NULL;
}

/* v->ran: the entries the launches ran, "+" between them (a Hopper
 * configuration: its product entry, which names the rest). */
static void name_what_ran(verify_run *v)
{
  if (v->kind->op != OP_GEMM) {
    snprintf(v->ran, sizeof v->ran, "%s", v->kind->name);
    return;
  }
  int g = (int)v->n;
  tj__gemm_plan p = natural_plan(v);
  const char *entry = p.entry, *reduce = reduce_of(&p);
  if (!entry)
    entry = tj_gemm_f16_kernel(v->rt, gemm_m(v), g, g, v->dev[0], g,
                               v->dev[1], g, v->dev[2], g);
  snprintf(v->ran, sizeof v->ran, "%s%s%s", entry ? entry : "?",
           reduce ? "+" : "", reduce ? reduce : "");
}

/* Whether name is one of ran's entries. */
static int ran_includes(const char *ran, const char *name)
{
  size_t len = strlen(name);
  for (const char *at = ran; *at;) {
    const char *end = strchr(at, '+');
    size_t n = end ? (size_t)(end - at) : strlen(at);
    if (n == len && strncmp(at, name, len) == 0)
      return 1;
    if (!end)
      break;
    at = end + 1;
  }
  return 0;
}

/* Poison (0xff bytes: NaN in fp16, -1 in int32), launch between two
 * events, wait, and read the time. */
static int timed_launch(const verify_run *v, hipEvent_t ev[2], float *ms)
{
  const verify_kind *kd = v->kind;
  hipError_t e = hipSuccess;
  for (int i = 0; i < kd->nout && e == hipSuccess; i++)
    e = hipMemset(v->dev[kd->nin + i], 0xff, v->out_bytes);
  if (e != hipSuccess)
    return device_failed(v->rt, "poisoning the outputs", e);
  if ((e = hipEventRecord(ev[0], NULL)) != hipSuccess)
    return device_failed(v->rt, "hipEventRecord", e);
  int rc = launch_once(v);
  if (rc != TJ_OK)
    return rc;
  if ((e = hipEventRecord(ev[1], NULL)) != hipSuccess ||
      (e = hipEventSynchronize(ev[1])) != hipSuccess)
    return device_failed(v->rt, v->kind->name, e);
  if ((e = hipEventElapsedTime(ms, ev[0], ev[1])) != hipSuccess)
    return device_failed(v->rt, "hipEventElapsedTime", e);
  return TJ_OK;
}

static int compare_float(const void *a, const void *b)
{
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* An odd count, so the median is one launch's time. */
static int timed_count(float warm_ms)
{
  double want = warm_ms > 0 ? TIMING_BUDGET_MS / warm_ms : MAX_TIMED;
  int reps = want > MAX_TIMED ? MAX_TIMED : want < MIN_TIMED ? MIN_TIMED : (int)want;
  return reps | 1;
}

/* One warm-up (module first use, clocks), then the timed launches. */
static int time_launches(verify_run *v)
{
  hipEvent_t ev[2];
  hipError_t e = hipEventCreate(&ev[0]);
  if (e != hipSuccess)
    return device_failed(v->rt, "hipEventCreate", e);
  if ((e = hipEventCreate(&ev[1])) != hipSuccess) {
    hipEventDestroy(ev[0]);
    return device_failed(v->rt, "hipEventCreate", e);
  }
  float ms[MAX_TIMED], warm = 0;
  int rc = timed_launch(v, ev, &warm);
  v->timed = timed_count(warm);
  for (int i = 0; rc == TJ_OK && i < v->timed; i++)
    rc = timed_launch(v, ev, &ms[i]);
  hipEventDestroy(ev[0]);
  hipEventDestroy(ev[1]);
  if (rc != TJ_OK)
    return rc;
  qsort(ms, (size_t)v->timed, sizeof ms[0], compare_float);
  v->ms = ms[v->timed / 2];
  return TJ_OK;
}

static int copy_results(verify_run *v)
{
  for (int i = 0; i < v->kind->nout; i++) {
    hipError_t e = hipMemcpyDtoH(v->out[i], v->dev[v->kind->nin + i],
                                 v->out_bytes);
    if (e != hipSuccess)
      return device_failed(v->rt, "copying results to the host", e);
  }
  return TJ_OK;
}

/* ------------------------------------------------------- comparing */

static void compare_chunk(verify_run *v, size_t base, size_t m, void *want)
{
  const uint16_t *h0 = v->in[0], *h1 = v->in[1];
  double *w0 = want, *w1 = w0 + COMPARE_CHUNK;
  switch (v->kind->op) {
  case OP_ADD_I32:
    tj__oracle_add_i32((const int32_t *)v->in[0] + base,
                       (const int32_t *)v->in[1] + base, want, m);
    tj__error_add_i32(&v->err[0], (const int32_t *)v->out[0] + base, want, m,
                      base);
    return;
  case OP_GELU_FWD:
    tj__oracle_gelu_fwd(h0 + base, w0, m);
    break;
  case OP_GELU_BWD: /* grad_out, x */
    tj__oracle_gelu_bwd(h0 + base, h1 + base, w0, m);
    break;
  case OP_GELU_FWD_BWD: /* x, grad_out */
    tj__oracle_gelu_fwd(h0 + base, w0, m);
    tj__oracle_gelu_bwd(h1 + base, h0 + base, w1, m);
    tj__error_add_f16(&v->err[1], (const uint16_t *)v->out[1] + base, w1, m,
                      base);
    break;
  case OP_GEMM:
    return;
  }
  tj__error_add_f16(&v->err[0], (const uint16_t *)v->out[0] + base, w0, m,
                    base);
}

static int compare_elementwise(verify_run *v)
{
  /* Room for two outputs' worth of doubles (int32 uses less). */
  void *want = malloc(2 * COMPARE_CHUNK * sizeof(double));
  if (!want)
    return tj__fail(v->rt, TJ_ENOMEM, "tj_verify: out of host memory");
  size_t n = (size_t)v->n;
  for (size_t base = 0; base < n; base += COMPARE_CHUNK)
    compare_chunk(v, base, n - base < COMPARE_CHUNK ? n - base : COMPARE_CHUNK,
                  want);
  free(want);
  return TJ_OK;
}

static uint64_t gemm_rows_to_compare(uint64_t n)
{
  uint64_t rows = GEMM_ORACLE_BUDGET / (n * n);
  if (rows < GEMM_MIN_ROWS)
    rows = GEMM_MIN_ROWS;
  return rows > n ? n : rows;
}

/* Row i of the sample: all rows when they fit the budget; otherwise rows
 * 0 and n-1 (the first and the last, partial, tile) and one seeded row in
 * each of the equal bands between, so the rows are distinct and cover
 * every tile row of the grid evenly. */
static uint64_t gemm_row(uint64_t i, uint64_t rows, uint64_t n, uint64_t seed)
{
  if (rows == n || i == 0)
    return i;
  if (i == rows - 1)
    return n - 1;
  uint64_t lo = i * n / rows, hi = (i + 1) * n / rows;
  uint64_t s = seed ^ (0x2545f4914f6cdd1dull * (i + 1));
  return lo + splitmix64(&s) % (hi - lo);
}

static int compare_gemm(verify_run *v)
{
  int n = (int)v->n;
  double *want = malloc((size_t)n * sizeof *want);
  if (!want)
    return tj__fail(v->rt, TJ_ENOMEM, "tj_verify: out of host memory");
  const uint16_t *A = v->in[0], *B = v->in[1], *C = v->out[0];
  uint64_t M = (uint64_t)gemm_m(v);
  v->rows = M < v->n ? M : gemm_rows_to_compare(v->n);
  for (uint64_t i = 0; i < v->rows; i++) {
    size_t r = (size_t)gemm_row(i, v->rows, M, v->seed);
    /* One row of the product is the oracle on a 1 x K slice of A. */
    tj__oracle_gemm(1, n, n, 1.0, A + r * (size_t)n, n, B, n, 0.0, NULL, n,
                    want);
    tj__error_add_f16(&v->err[0], C + r * (size_t)n, want, (size_t)n,
                      r * (size_t)n);
  }
  free(want);
  return TJ_OK;
}

static int run_and_compare(verify_run *v)
{
  int rc = make_inputs(v);
  if (rc == TJ_OK)
    rc = make_device_buffers(v);
  if (rc == TJ_OK)
    rc = time_launches(v);
  if (rc == TJ_OK)
    name_what_ran(v);
  if (rc == TJ_OK)
    rc = copy_results(v);
  if (rc == TJ_OK)
    rc = v->kind->op == OP_GEMM ? compare_gemm(v) : compare_elementwise(v);
  for (int i = 0; i < v->kind->nout; i++)
    tj__error_finish(&v->err[i], v->kind->rel_floor, &v->stats[i]);
  return rc;
}

/* ------------------------------------------------------- the report */

static int within(const verify_run *v, int i)
{
  return tj__error_within(&v->stats[i], v->kind->max_abs_tol,
                          v->kind->rel_l2_tol);
}

static void fill_errors(tj_report *r, const verify_run *v)
{
  r->within_tolerance = 1;
  for (int i = 0; i < v->kind->nout; i++) {
    const tj__error_stats *s = &v->stats[i];
    r->compared += s->count;
    /* Two outputs: report the worse of each measure. */
    r->max_abs_error = fmax(r->max_abs_error, s->max_abs);
    r->rel_l2_error = fmax(r->rel_l2_error, s->rel_l2);
    r->within_tolerance &= within(v, i);
  }
  r->max_abs_tolerance = v->kind->max_abs_tol;
  r->rel_l2_tolerance = v->kind->rel_l2_tol;
}

static void fill_rates(tj_report *r, const verify_run *v)
{
  double n = (double)v->n;
  const verify_kind *kd = v->kind;
  r->kernel_ms = v->ms;
  /* Each input read once and each output written once; GEMM with
   * beta = 0 reads A and B and writes C. */
  double m = (double)gemm_m(v);
  r->bytes_moved = kd->op == OP_GEMM ? 2.0 * (2.0 * m * n + n * n)
                                     : (double)(kd->nin + kd->nout) * n * (double)kd->elem;
  if (v->ms > 0) {
    r->gb_per_s = r->bytes_moved / (v->ms * 1e6);
    if (kd->op == OP_GEMM)
      r->tflop_per_s = 2.0 * m * n * n / (v->ms * 1e9);
  }
}

static void fill_identity(tj_report *r, const verify_run *v,
                          const tj__embedded_kernel *e, const tj_kernel *k,
                          const tj__device_props *props)
{
  snprintf(r->kernel, sizeof r->kernel, "%s", v->kind->name);
  snprintf(r->ran, sizeof r->ran, "%s", v->ran);
  r->n = v->kind->op == OP_GEMM ? (uint64_t)gemm_m(v) * v->n : v->n;
  if (v->kind->op == OP_GEMM) {
    r->m = gemm_m(v);
    r->n_cols = r->k = (int)v->n;
  }
  r->seed = v->seed;
  tj__hash_hex(e->source, e->source_len, r->source_fingerprint);
  tj_kernel_info info;
  if (tj_kernel_get_info(k, &info) == TJ_OK)
    snprintf(r->code_key, sizeof r->code_key, "%s", info.key);
  snprintf(r->compiler, sizeof r->compiler, "%s", tj_runtime_compiler(v->rt));
  snprintf(r->device, sizeof r->device, "%s", props->name);
  snprintf(r->arch, sizeof r->arch, "%s", tj_runtime_arch(v->rt));
}

/* Append to a fixed report field; truncation is safe and silent. */
static void field_append(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void field_append(char *buf, size_t cap, const char *fmt, ...)
{
  size_t len = strnlen(buf, cap);
  if (len + 1 >= cap)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + len, cap - len, fmt, ap);
  va_end(ap);
}

static void evidence_errors(tj_report *r, const verify_run *v)
{
  static const char *const names[2][2] = {{"", ""}, {"y: ", "grad_in: "}};
  int two = v->kind->nout == 2;
  for (int i = 0; i < v->kind->nout; i++) {
    const tj__error_stats *s = &v->stats[i];
    field_append(r->evidence, sizeof r->evidence,
                 "%s%smax abs error %.3g, rel L2 %.3g", i ? "; " : "",
                 names[two][i], s->max_abs, s->rel_l2);
    if (s->nonfinite || s->special_mismatch)
      field_append(r->evidence, sizeof r->evidence,
                   ", %zu non-finite where the oracle is finite, %zu "
                   "inf/NaN mismatches", s->nonfinite, s->special_mismatch);
    if (!within(v, i))
      field_append(r->evidence, sizeof r->evidence, ", worst at index %zu",
                   s->max_abs_index);
  }
}

static void fill_evidence(tj_report *r, const verify_run *v)
{
  const verify_kind *kd = v->kind;
  if (kd->op == OP_GEMM)
    field_append(r->evidence, sizeof r->evidence, "%s M = %d, N = K = %llu "
                 "(ran %s: %s)", kd->name, gemm_m(v), (unsigned long long)v->n,
                 v->ran, "tj_gemm_f16's choice for this shape and device");
  else
    field_append(r->evidence, sizeof r->evidence, "%s on %llu elements",
                 kd->name, (unsigned long long)v->n);
  field_append(r->evidence, sizeof r->evidence, " on %s (%s): %llu outputs "
               "compared with the double-precision oracle %s (", r->device,
               r->arch, (unsigned long long)r->compared,
               r->within_tolerance ? "were all within tolerance"
                                   : "were NOT all within tolerance");
  evidence_errors(r, v);
  if (kd->op == OP_GEMM)
    field_append(r->evidence, sizeof r->evidence, "; limit rel L2 %g). ",
                 kd->rel_l2_tol);
  else
    field_append(r->evidence, sizeof r->evidence, "; limits max abs %g, rel "
                 "L2 %g). ", kd->max_abs_tol, kd->rel_l2_tol);
  field_append(r->evidence, sizeof r->evidence, "Median of %d timed launches "
               "%.4g ms: %.4g GB/s", v->timed, r->kernel_ms, r->gb_per_s);
  if (kd->op == OP_GEMM)
    field_append(r->evidence, sizeof r->evidence, ", %.4g TFLOP/s",
                 r->tflop_per_s);
  field_append(r->evidence, sizeof r->evidence, ".");
}

static void fill_non_claims(tj_report *r, const verify_run *v)
{
  const verify_kind *kd = v->kind;
  char *nc = r->non_claims;
  size_t cap = sizeof r->non_claims;
  field_append(nc, cap, "Not a comparison with a vendor library or any other "
               "implementation. Timing covers kernel execution only (events "
               "around each launch, median of %d after one warm-up), not "
               "transfers or compilation, and includes launch latency. One "
               "device, one run, one seed (%llu). ", v->timed,
               (unsigned long long)v->seed);
  if (kd->op == OP_ADD_I32)
    field_append(nc, cap, "Inputs uniform over the non-zero 32-bit values. ");
  else
    field_append(nc, cap, "Inputs uniform in [%g, %g] (zeros redrawn): no "
                 "inf, NaN or larger magnitudes. Rel L2's denominator is at "
                 "least sqrt(count) * 2^-14, the smallest normal fp16, so "
                 "outputs below that are held to absolute accuracy. ",
                 kd->lo, kd->hi);
  if (!ran_includes(v->ran, kd->name))
    field_append(nc, cap, "%s itself did not run (%s did, tj_gemm_f16's "
                 "choice for this shape and device): this report says nothing "
                 "about its code. ", kd->name, v->ran);
  if (kd->op != OP_GEMM) {
    field_append(nc, cap, "Buffers came from hipMalloc, so every pointer was "
                 "16-byte aligned: the misaligned and in-place paths were "
                 "not run.");
    return;
  }
  field_append(nc, cap, "%s, dense, alpha = 1, beta = 0 only: the path "
               "that reads C was not run. Max abs error is reported, not "
               "held to a limit.", kd->gemm_rows ? "One shape" : "Square");
  if (v->rows < (uint64_t)gemm_m(v))
    field_append(nc, cap, " Only %llu of %llu rows were compared (rows 0 and "
                 "n-1, and one seeded row in each band between); the other "
                 "outputs were not checked.", (unsigned long long)v->rows,
                 (unsigned long long)v->n);
}

/* ------------------------------------------------------- tj_verify */

int tj__verify_verdict(tj_runtime *rt, const tj_report *r)
{
  if (r->within_tolerance)
    return TJ_OK;
  return tj__fail(rt, TJ_EVERIFY, "%s disagrees with the CPU oracle: max abs "
                  "error %g (limit %g), rel L2 error %g (limit %g), over %llu "
                  "outputs compared (seed %llu)", r->kernel, r->max_abs_error,
                  r->max_abs_tolerance, r->rel_l2_error, r->rel_l2_tolerance,
                  (unsigned long long)r->compared, (unsigned long long)r->seed);
}

/* Sizes that no device can hold are refused before anything runs. */
static int check_n(tj_runtime *rt, const verify_kind *kd, uint64_t n,
                   size_t *in_bytes, size_t *out_bytes)
{
  if (n == 0)
    return tj__fail(rt, TJ_EINVAL, "tj_verify: n is 0");
  size_t elems = 0, all = 0;
  if (kd->op == OP_GEMM && n > GEMM_N_MAX)
    return tj__fail(rt, TJ_ERANGE, "tj_verify: gemm_f16 n=%llu is over %llu "
                    "(M = N = K = n, and the grid allows 65535 blocks of 128 "
                    "rows)", (unsigned long long)n,
                    (unsigned long long)GEMM_N_MAX);
  int arrays = kd->nin + kd->nout;
  if (n > SIZE_MAX ||
      __builtin_mul_overflow((size_t)n, kd->op == OP_GEMM ? (size_t)n : 1, &elems) ||
      __builtin_mul_overflow(elems, kd->elem * (size_t)arrays, &all))
    return tj__fail(rt, TJ_ERANGE, "tj_verify: %s with n=%llu needs more "
                    "bytes than size_t holds", kd->name, (unsigned long long)n);
  *in_bytes = *out_bytes = elems * kd->elem;
  return TJ_OK;
}

static int check_device(tj_runtime *rt, const verify_kind *kd, uint64_t n,
                        size_t bytes, tj__device_props *props)
{
  if (rt->compile_only)
    return tj__fail(rt, TJ_ENODEVICE, "no GPU: tj_verify runs %s, and this "
                    "runtime is compile-only (arch %s)", kd->name, rt->arch);
  if (tj__device_query(rt->device.ordinal, props, 0) != TJ_OK)
    return tj__fail(rt, TJ_EDEVICE, "tj_verify: could not query device %d",
                    rt->device.ordinal);
  if (bytes > props->total_mem / 2)
    return tj__fail(rt, TJ_ERANGE, "tj_verify: %s with n=%llu needs %zu "
                    "bytes of device memory, over half of the %zu that %s "
                    "has", kd->name, (unsigned long long)n, bytes,
                    props->total_mem, props->name);
  if (tj_runtime_bind(rt) != TJ_OK)
    return tj__fail(rt, TJ_EDEVICE, "tj_verify: could not make device %d "
                    "current", rt->device.ordinal);
  return TJ_OK;
}

int tj_verify(tj_runtime *rt, const char *kernel, uint64_t n, uint64_t seed,
              tj_report *report)
{
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  if (!kernel || !report)
    return tj__fail(rt, TJ_EINVAL, "tj_verify: %s is NULL",
                    !kernel ? "kernel" : "report");
  if (tj__moe_verify_knows(kernel))
    return tj__moe_verify(rt, kernel, n, seed, report);
  const verify_kind *kd = find_kind(kernel);
  const tj__embedded_kernel *e = tj__embedded_find(kernel);
  if (!kd || !e)
    return tj__fail(rt, TJ_ENOENT, "tj_verify: no embedded kernel with an "
                    "oracle is named '%.128s'", kernel);
  verify_run v = {.rt = rt, .kind = kd, .n = n, .seed = seed};
  tj__device_props props;
  tj_kernel *k = NULL;
  int rc = check_n(rt, kd, n, &v.in_bytes, &v.out_bytes);
  if (rc == TJ_OK)
    rc = check_device(rt, kd, n, (size_t)(kd->nin + kd->nout) * v.in_bytes,
                      &props);
  if (rc == TJ_OK)
    rc = tj_kernel_get(rt, kernel, &k);
  if (rc != TJ_OK)
    return rc;
  rc = run_and_compare(&v);
  release(&v);
  if (rc != TJ_OK)
    return rc;
  tj_report r;
  memset(&r, 0, sizeof r);
  fill_identity(&r, &v, e, k, &props);
  fill_errors(&r, &v);
  fill_rates(&r, &v);
  fill_evidence(&r, &v);
  fill_non_claims(&r, &v);
  r.first_call_ms = NAN;
  *report = r;
  return tj__verify_verdict(rt, &r);
}
