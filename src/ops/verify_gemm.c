/*
 * verify_gemm.c: tj_verify_gemm and tj_verify_grouped_gemm (the "verify"
 * section of tokitai-jit/ops.h): one configuration of the GEMM family,
 * or of the grouped GEMM with the caller's routing, run through its
 * public call on seeded random inputs and checked against the family's
 * double-precision oracle (tj__oracle_gemm_desc, every epilogue).
 *
 * Both calls are described here by a tj_grouped_gemm_desc: tj_gemm's is
 * one group of every row.  A row of a grouped result is a row of one
 * plain GEMM (group e's B and bias for TJ_GROUPED_M; for TJ_GROUPED_K,
 * the reduction cut to group e, an empty group adding alpha * 0), so
 * every row is checked by the plain oracle on that slice.
 *
 * The first call is timed on the host clock to its completion, so that
 * it includes the configuration's compile or cache load; the warm calls
 * after it are timed with events, as tj_verify times its launches.
 * Outputs are poisoned (0xff bytes: NaN in every element type) before
 * each call, so an element a call did not write fails.  Every row of C
 * is compared while the oracle's work stays within GEMM_ORACLE_BUDGET
 * multiply-adds; beyond it, a spread sample of whole rows.  The bias
 * gradient is held to its definition: the column sums of C as the call
 * stored it.
 */
#include "internal.h"
#include "oracle.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TIMING_BUDGET_MS 500.0
#define MIN_TIMED 3
#define MAX_TIMED 25
#define GEMM_ORACLE_BUDGET ((uint64_t)1 << 27)
#define GEMM_MIN_ROWS 2
/* See F16_REL_FLOOR in verify.c: fp16's smallest normal. */
#define F16_REL_FLOOR 0x1p-14
/* The bias gradient is summed in fp32 from C's stored values. */
#define BIAS_GRAD_REL_L2 1e-4
#define MAX_GROUPS 65535

/* The arrays of a call, in tj_grouped_gemm_desc's order. */
enum { A_, B_, C_, BIAS_, AUX_, BGRAD_, OFFS_, NARRAYS };
static const char *const array_names[NARRAYS] = {
    "A", "B", "C", "bias", "aux", "bias_grad", "offs"};

typedef struct gemm_run {
  tj_runtime *rt;
  const char *fn;
  int grouped;                 /* 0 (tj_gemm), TJ_GROUPED_M or _K */
  tj_grouped_gemm_desc g;      /* the call, on device memory */
  tj_grouped_gemm_desc h;      /* the same call on the host copies */
  const int32_t *routing;      /* the caller's offsets (grouped) */
  uint64_t seed;
  size_t bytes[NARRAYS];       /* 0: the call has no such array */
  void *host[NARRAYS], *dev[NARRAYS];
  void *c_in;                  /* C before the call, where beta reads it */
  char config[128];            /* the configuration's name */
  double first_ms, ms;
  int timed;
  uint64_t rows;               /* rows of C compared (of each group's C) */
  tj__error_acc err[3];        /* C, aux, bias_grad */
  tj__error_stats stats[3];
  int nout;                    /* outputs checked: C, then aux, bias_grad */
  int out_of[3];               /* the array of each */
} gemm_run;

/* ------------------------------------------------------- the shape */

static size_t dtype_bytes(int type)
{
  return type == TJ_DTYPE_F32 ? 4 : 2;
}

static int bias_epilogue(int e)
{
  return e == TJ_EPILOGUE_BIAS || e == TJ_EPILOGUE_BIAS_GELU;
}

static int check_kinds(gemm_run *v)
{
  const tj_grouped_gemm_desc *d = &v->g;
  const char *fn = v->fn;
  if (d->a_type < TJ_DTYPE_F16 || d->a_type > TJ_DTYPE_BF16 ||
      d->b_type < TJ_DTYPE_F16 || d->b_type > TJ_DTYPE_BF16 ||
      d->c_type < TJ_DTYPE_F16 || d->c_type > TJ_DTYPE_F32)
    return tj__fail(v->rt, TJ_EINVAL, "%s: a_type=%d, b_type=%d, c_type=%d: "
                    "A and B take TJ_DTYPE_F16 or TJ_DTYPE_BF16, C also "
                    "TJ_DTYPE_F32", fn, d->a_type, d->b_type, d->c_type);
  if (d->epilogue < TJ_EPILOGUE_NONE || d->epilogue > TJ_EPILOGUE_DGELU)
    return tj__fail(v->rt, TJ_EINVAL, "%s: epilogue=%d is not a "
                    "TJ_EPILOGUE_*", fn, d->epilogue);
  if (d->m < 1 || d->n < 1 || d->k < 1)
    return tj__fail(v->rt, TJ_EINVAL, "%s: m=%lld, n=%lld, k=%lld: each must "
                    "be at least 1", fn, (long long)d->m, (long long)d->n,
                    (long long)d->k);
  if (d->a || d->b || d->c || d->bias)
    return tj__fail(v->rt, TJ_EINVAL, "%s: the shape's a, b, c and bias "
                    "must be NULL (the run makes its own inputs)", fn);
  if (d->aux && d->epilogue != TJ_EPILOGUE_BIAS_GELU &&
      d->epilogue != TJ_EPILOGUE_DGELU)
    return tj__fail(v->rt, TJ_EINVAL, "%s: aux is set, and the epilogue "
                    "does not take it", fn);
  if (d->bias_grad && d->epilogue != TJ_EPILOGUE_DGELU)
    return tj__fail(v->rt, TJ_EINVAL, "%s: bias_grad is set, and only "
                    "TJ_EPILOGUE_DGELU takes it", fn);
  return TJ_OK;
}

/* The grouped call's own fields, and the caller's routing: offsets
 * non-decreasing within the grouped total, and for TJ_GROUPED_M every
 * row in a group (the last offset is m). */
static int check_groups(gemm_run *v)
{
  const tj_grouped_gemm_desc *d = &v->g;
  if (d->grouped != TJ_GROUPED_M && d->grouped != TJ_GROUPED_K)
    return tj__fail(v->rt, TJ_EINVAL, "%s: grouped=%d: set TJ_GROUPED_M or "
                    "TJ_GROUPED_K", v->fn, d->grouped);
  if (d->groups < 1 || d->groups > MAX_GROUPS)
    return tj__fail(v->rt, TJ_EINVAL, "%s: groups=%lld must be 1 to %d",
                    v->fn, (long long)d->groups, MAX_GROUPS);
  if (d->grouped == TJ_GROUPED_K && d->epilogue != TJ_EPILOGUE_NONE)
    return tj__fail(v->rt, TJ_EINVAL, "%s: a TJ_GROUPED_K call takes "
                    "TJ_EPILOGUE_NONE only", v->fn);
  if (!v->routing)
    return tj__fail(v->rt, TJ_EINVAL, "%s: offs is NULL (here: the host "
                    "offsets to run)", v->fn);
  int64_t total = d->grouped == TJ_GROUPED_M ? d->m : d->k, prev = 0;
  for (int64_t e = 0; e < d->groups; e++) {
    if (v->routing[e] < prev || v->routing[e] > total)
      return tj__fail(v->rt, TJ_EINVAL, "%s: offs[%lld]=%d is below the "
                      "offset before it or past %lld", v->fn, (long long)e,
                      v->routing[e], (long long)total);
    prev = v->routing[e];
  }
  if (d->grouped == TJ_GROUPED_M && prev != d->m)
    return tj__fail(v->rt, TJ_EINVAL, "%s: the last offset is %lld, not "
                    "m=%lld: every row must be in a group", v->fn,
                    (long long)prev, (long long)d->m);
  return TJ_OK;
}

/* a * b * c, saturated at SIZE_MAX (which no device holds). */
static size_t mul3(uint64_t a, uint64_t b, uint64_t c)
{
  uint64_t n;
  if (__builtin_mul_overflow(a, b, &n) || __builtin_mul_overflow(n, c, &n) ||
      n > SIZE_MAX)
    return SIZE_MAX;
  return (size_t)n;
}

/* Bytes of groups matrices stride elements apart, each rows x ld. */
static size_t batch_bytes(int64_t groups, int64_t stride, int64_t rows,
                          int64_t ld, size_t elem)
{
  size_t last = mul3((uint64_t)rows, (uint64_t)ld, elem);
  size_t before = mul3((uint64_t)(groups - 1), (uint64_t)stride, elem);
  return last > SIZE_MAX - before ? SIZE_MAX : last + before;
}

/* Leading dimensions and batch strides (0: dense). */
static int plan_layout(gemm_run *v, int aux)
{
  tj_grouped_gemm_desc *d = &v->g;
  int64_t rows_b = d->trans_b ? d->n : d->k;
  d->lda = d->lda ? d->lda : d->trans_a ? d->m : d->k;
  d->ldb = d->ldb ? d->ldb : d->trans_b ? d->k : d->n;
  d->ldc = d->ldc ? d->ldc : d->n;
  d->ldaux = aux ? (d->ldaux ? d->ldaux : d->n) : 0;
  if (d->lda < (d->trans_a ? d->m : d->k) || d->ldb < (d->trans_b ? d->k : d->n) ||
      d->ldc < d->n || (aux && d->ldaux < d->n))
    return tj__fail(v->rt, TJ_EINVAL, "%s: lda=%lld, ldb=%lld, ldc=%lld, "
                    "ldaux=%lld: each must be 0 (dense) or at least its "
                    "stored row", v->fn, (long long)d->lda, (long long)d->ldb,
                    (long long)d->ldc, (long long)d->ldaux);
  if (v->grouped == TJ_GROUPED_M && !d->stride_b)
    d->stride_b = rows_b * d->ldb;
  if (v->grouped == TJ_GROUPED_K && !d->stride_c)
    d->stride_c = d->m * d->ldc;
  if (d->stride_b < 0 || d->stride_c < 0)
    return tj__fail(v->rt, TJ_EINVAL, "%s: stride_b=%lld, stride_c=%lld: "
                    "each must be 0 (dense) or positive", v->fn,
                    (long long)d->stride_b, (long long)d->stride_c);
  return TJ_OK;
}

/* The bytes of every array the call takes. */
static int plan_arrays(gemm_run *v)
{
  tj_grouped_gemm_desc *d = &v->g;
  int e = d->epilogue;
  int aux = e == TJ_EPILOGUE_DGELU || (e == TJ_EPILOGUE_BIAS_GELU && d->aux);
  size_t ec = dtype_bytes(d->c_type);
  int rc = plan_layout(v, aux);
  if (rc != TJ_OK)
    return rc;
  int64_t groups = d->groups, by_m = v->grouped == TJ_GROUPED_M;
  v->bytes[A_] = batch_bytes(1, 0, d->trans_a ? d->k : d->m, d->lda,
                             dtype_bytes(d->a_type));
  v->bytes[B_] = batch_bytes(by_m ? groups : 1, d->stride_b,
                             d->trans_b ? d->n : d->k, d->ldb,
                             dtype_bytes(d->b_type));
  v->bytes[C_] = batch_bytes(v->grouped == TJ_GROUPED_K ? groups : 1,
                             d->stride_c, d->m, d->ldc, ec);
  v->bytes[BIAS_] = bias_epilogue(e) ? mul3((uint64_t)groups, (uint64_t)d->n, ec) : 0;
  v->bytes[AUX_] = aux ? batch_bytes(1, 0, d->m, d->ldaux, ec) : 0;
  v->bytes[BGRAD_] = d->bias_grad ? mul3((uint64_t)groups, (uint64_t)d->n, 4) : 0;
  v->bytes[OFFS_] = v->grouped ? (size_t)groups * 4 : 0;
  for (int i = 0; i < NARRAYS; i++)
    if (v->bytes[i] == SIZE_MAX)
      return tj__fail(v->rt, TJ_ERANGE, "%s: %s needs more bytes than "
                      "size_t holds", v->fn, array_names[i]);
  return TJ_OK;
}

static int check_device(gemm_run *v, tj__device_props *props)
{
  tj_runtime *rt = v->rt;
  size_t all = 0;
  if (rt->compile_only)
    return tj__fail(rt, TJ_ENODEVICE, "no GPU: %s runs %s, and this runtime "
                    "is compile-only (arch %s)", v->fn,
                    v->grouped ? "tj_grouped_gemm" : "tj_gemm", rt->arch);
  if (tj__device_query(rt->device.ordinal, props, 0) != TJ_OK)
    return tj__fail(rt, TJ_EDEVICE, "%s: could not query device %d", v->fn,
                    rt->device.ordinal);
  for (int i = 0; i < NARRAYS; i++)
    all = all > SIZE_MAX - v->bytes[i] ? SIZE_MAX : all + v->bytes[i];
  if (all > props->total_mem / 2)
    return tj__fail(rt, TJ_ERANGE, "%s: %lld x %lld x %lld needs %zu bytes "
                    "of device memory, over half of the %zu that %s has",
                    v->fn, (long long)v->g.m, (long long)v->g.n,
                    (long long)v->g.k, all, props->total_mem, props->name);
  if (tj_runtime_bind(rt) != TJ_OK)
    return tj__fail(rt, TJ_EDEVICE, "%s: could not make device %d current",
                    v->fn, rt->device.ordinal);
  return TJ_OK;
}

/* ------------------------------------------------------- inputs */

static uint64_t splitmix64(uint64_t *state)
{
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [-range, range] in type, zeros drawn again; each array its
 * own stream of the seed. */
static void fill(void *p, size_t count, int type, double range,
                 uint64_t seed, int which)
{
  uint64_t s = seed ^ (0xd1b54a32d192ed03ull * (uint64_t)(which + 1));
  for (size_t i = 0; i < count; i++) {
    double x;
    do {
      double u = (double)(splitmix64(&s) >> 11) * 0x1p-53;
      x = tj__dtype_round(range * (2.0 * u - 1.0), type);
    } while (x == 0.0);
    if (type == TJ_DTYPE_F32)
      ((float *)p)[i] = (float)x;
    else if (type == TJ_DTYPE_F16)
      ((uint16_t *)p)[i] = tj_f32_to_f16((float)x);
    else
      ((uint16_t *)p)[i] = tj_f32_to_bf16((float)x);
  }
}

static int device_failed(const gemm_run *v, const char *what, hipError_t e)
{
  return tj__fail(v->rt, TJ_EDEVICE, "%s: %s failed: %s", v->fn, what,
                  hipGetErrorString(e));
}

/* Array i's host copy, filled where it is an input: A, B, bias, C where
 * beta reads it, aux for DGELU (gelu' of values in [-3, 3]), the
 * caller's offsets. */
static int fill_input(gemm_run *v, int i)
{
  const tj_grouped_gemm_desc *d = &v->g;
  const int types[NARRAYS] = {d->a_type, d->b_type, d->c_type, d->c_type,
                              d->c_type, TJ_DTYPE_F32, 0};
  int input = i == A_ || i == B_ || i == BIAS_ || i == OFFS_ ||
              (i == AUX_ && d->epilogue == TJ_EPILOGUE_DGELU) ||
              (i == C_ && d->beta != 0.0f);
  if (i == OFFS_)
    memcpy(v->host[i], v->routing, v->bytes[i]);
  else if (input)
    fill(v->host[i], v->bytes[i] / dtype_bytes(types[i]), types[i],
         i == AUX_ ? 3.0 : 1.0, v->seed, i);
  return input;
}

/* Host and device copies of every array; the inputs filled and copied
 * in. */
static int make_arrays(gemm_run *v)
{
  for (int i = 0; i < NARRAYS; i++) {
    if (!v->bytes[i])
      continue;
    if (!(v->host[i] = malloc(v->bytes[i])))
      return tj__fail(v->rt, TJ_ENOMEM, "%s: out of host memory for %zu "
                      "bytes of %s", v->fn, v->bytes[i], array_names[i]);
    hipError_t e = hipMalloc(&v->dev[i], v->bytes[i]);
    if (e != hipSuccess) {
      v->dev[i] = NULL;
      return tj__fail(v->rt, TJ_ENOMEM, "%s: hipMalloc of %zu bytes for %s "
                      "failed: %s", v->fn, v->bytes[i], array_names[i],
                      hipGetErrorString(e));
    }
    if (fill_input(v, i) &&
        (e = hipMemcpyHtoD(v->dev[i], v->host[i], v->bytes[i])) != hipSuccess)
      return device_failed(v, "copying inputs to the device", e);
  }
  if (v->g.beta != 0.0f) { /* C's values before the call, for the oracle */
    if (!(v->c_in = malloc(v->bytes[C_])))
      return tj__fail(v->rt, TJ_ENOMEM, "%s: out of host memory", v->fn);
    memcpy(v->c_in, v->host[C_], v->bytes[C_]);
  }
  return TJ_OK;
}

/* The call on device memory, and the same on the host copies. */
static void point_descs(gemm_run *v)
{
  tj_grouped_gemm_desc *d[2] = {&v->g, &v->h};
  v->h = v->g;
  for (int j = 0; j < 2; j++) {
    void *const *p = j ? v->host : v->dev;
    d[j]->a = p[A_];
    d[j]->b = p[B_];
    d[j]->c = j && v->c_in ? v->c_in : p[C_];
    d[j]->bias = p[BIAS_];
    d[j]->aux = p[AUX_];
    d[j]->bias_grad = p[BGRAD_];
    d[j]->offs = p[OFFS_];
  }
}

static void release(gemm_run *v)
{
  for (int i = 0; i < NARRAYS; i++) {
    free(v->host[i]);
    hipFree(v->dev[i]);
  }
  free(v->c_in);
}

/* ------------------------------------------------------- the calls */

/* tj_gemm's descriptor of d (one group, B and bias the first). */
static tj_gemm_desc plain_of(const tj_grouped_gemm_desc *d)
{
  tj_gemm_desc p;
  memset(&p, 0, sizeof p);
  p.size = sizeof p;
  p.a_type = d->a_type, p.b_type = d->b_type, p.c_type = d->c_type;
  p.trans_a = d->trans_a, p.trans_b = d->trans_b;
  p.m = d->m, p.n = d->n, p.k = d->k;
  p.alpha = d->alpha, p.beta = d->beta;
  p.a = d->a, p.lda = d->lda;
  p.b = d->b, p.ldb = d->ldb;
  p.c = d->c, p.ldc = d->ldc;
  p.epilogue = d->epilogue;
  p.bias = d->bias;
  p.aux = d->aux, p.ldaux = d->ldaux;
  p.bias_grad = d->bias_grad;
  return p;
}

static int call(gemm_run *v)
{
  if (v->grouped)
    return tj_grouped_gemm(v->rt, NULL, &v->g);
  tj_gemm_desc p = plain_of(&v->g);
  return tj_gemm(v->rt, NULL, &p);
}

static void name_configuration(gemm_run *v)
{
  tj_gemm_desc p = plain_of(&v->g);
  const char *name = v->grouped ? tj_grouped_gemm_kernel(v->rt, &v->g)
                                : tj_gemm_kernel(v->rt, &p);
  snprintf(v->config, sizeof v->config, "%s", name ? name : "(unnamed)");
}

/* C back to its first values (beta reads them) or poisoned, and every
 * other output poisoned. */
static int reset_outputs(gemm_run *v)
{
  hipError_t e = hipSuccess;
  if (v->c_in)
    e = hipMemcpyHtoD(v->dev[C_], v->c_in, v->bytes[C_]);
  else
    e = hipMemset(v->dev[C_], 0xff, v->bytes[C_]);
  if (e == hipSuccess && v->g.epilogue == TJ_EPILOGUE_BIAS_GELU && v->dev[AUX_])
    e = hipMemset(v->dev[AUX_], 0xff, v->bytes[AUX_]);
  if (e == hipSuccess && v->dev[BGRAD_])
    e = hipMemset(v->dev[BGRAD_], 0xff, v->bytes[BGRAD_]);
  return e == hipSuccess ? TJ_OK : device_failed(v, "resetting the outputs", e);
}

static double now_ms(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The first call: its compile or load, launch and completion. */
static int first_call(gemm_run *v)
{
  int rc = reset_outputs(v);
  if (rc != TJ_OK)
    return rc;
  hipError_t e = hipDeviceSynchronize();
  if (e != hipSuccess)
    return device_failed(v, "hipDeviceSynchronize", e);
  double t0 = now_ms();
  if ((rc = call(v)) != TJ_OK)
    return rc;
  if ((e = hipStreamSynchronize(NULL)) != hipSuccess)
    return device_failed(v, "the first call", e);
  v->first_ms = now_ms() - t0;
  name_configuration(v);
  return TJ_OK;
}

static int timed_call(gemm_run *v, hipEvent_t ev[2], float *ms)
{
  int rc = reset_outputs(v);
  hipError_t e = hipSuccess;
  if (rc != TJ_OK)
    return rc;
  if ((e = hipEventRecord(ev[0], NULL)) != hipSuccess)
    return device_failed(v, "hipEventRecord", e);
  if ((rc = call(v)) != TJ_OK)
    return rc;
  if ((e = hipEventRecord(ev[1], NULL)) != hipSuccess ||
      (e = hipEventSynchronize(ev[1])) != hipSuccess)
    return device_failed(v, "the call", e);
  if ((e = hipEventElapsedTime(ms, ev[0], ev[1])) != hipSuccess)
    return device_failed(v, "hipEventElapsedTime", e);
  return TJ_OK;
}

static int compare_float(const void *a, const void *b)
{
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* One untimed warm call (clocks), then an odd number of timed ones within
 * about TIMING_BUDGET_MS; their median. */
static int time_calls(gemm_run *v)
{
  hipEvent_t ev[2];
  float ms[MAX_TIMED], warm = 0;
  if (hipEventCreate(&ev[0]) != hipSuccess)
    return tj__fail(v->rt, TJ_EDEVICE, "%s: hipEventCreate failed", v->fn);
  if (hipEventCreate(&ev[1]) != hipSuccess) {
    hipEventDestroy(ev[0]);
    return tj__fail(v->rt, TJ_EDEVICE, "%s: hipEventCreate failed", v->fn);
  }
  int rc = timed_call(v, ev, &warm);
  double want = warm > 0 ? TIMING_BUDGET_MS / warm : MAX_TIMED;
  v->timed = (want > MAX_TIMED ? MAX_TIMED : want < MIN_TIMED ? MIN_TIMED
                                                               : (int)want) | 1;
  for (int i = 0; rc == TJ_OK && i < v->timed; i++)
    rc = timed_call(v, ev, &ms[i]);
  hipEventDestroy(ev[0]);
  hipEventDestroy(ev[1]);
  if (rc != TJ_OK)
    return rc;
  qsort(ms, (size_t)v->timed, sizeof ms[0], compare_float);
  v->ms = ms[v->timed / 2];
  return TJ_OK;
}

static int copy_outputs(gemm_run *v)
{
  const int outs[] = {C_, AUX_, BGRAD_};
  for (int i = 0; i < 3; i++) {
    int a = outs[i];
    if (!v->dev[a] || (a == AUX_ && v->g.epilogue != TJ_EPILOGUE_BIAS_GELU))
      continue;
    hipError_t e = hipMemcpyDtoH(v->host[a], v->dev[a], v->bytes[a]);
    if (e != hipSuccess)
      return device_failed(v, "copying results to the host", e);
    v->out_of[v->nout++] = a;
  }
  return TJ_OK;
}

/* ------------------------------------------------------- comparing */

static uint64_t rows_to_compare(const tj_grouped_gemm_desc *d)
{
  uint64_t per_row = (uint64_t)d->n * (uint64_t)d->k;
  uint64_t rows = per_row > GEMM_ORACLE_BUDGET ? GEMM_MIN_ROWS
                                               : GEMM_ORACLE_BUDGET / per_row;
  rows = rows < GEMM_MIN_ROWS ? GEMM_MIN_ROWS : rows;
  return rows > (uint64_t)d->m ? (uint64_t)d->m : rows;
}

/* Row i of rows: all of them, or the first, the last, and rows spread
 * evenly between. */
static int64_t row_of(uint64_t i, uint64_t rows, int64_t m)
{
  if (rows == (uint64_t)m || i == 0)
    return (int64_t)i;
  if (i == rows - 1)
    return m - 1;
  return (int64_t)(i * (uint64_t)m / rows);
}

/* Group e spans [lo, hi) of the grouped dimension; tj_gemm's one group
 * every row. */
static void group_span(const gemm_run *v, int64_t e, int64_t *lo, int64_t *hi)
{
  if (!v->grouped) {
    *lo = 0, *hi = v->g.m;
    return;
  }
  *lo = e ? v->routing[e - 1] : 0;
  *hi = v->routing[e];
}

/* The group of row r of a TJ_GROUPED_M call (every row has one). */
static int64_t group_of_row(const gemm_run *v, int64_t r)
{
  int64_t e = 0;
  while (v->grouped && e + 1 < v->g.groups && v->routing[e] <= r)
    e++;
  return e;
}

/* Row r of group e's GEMM on the host copies, as a plain GEMM of one
 * row: A's row r, and for TJ_GROUPED_M group e's B and bias; for
 * TJ_GROUPED_K the reduction cut to the group and C[e]'s row (an empty
 * group: alpha 0, so C = beta C). */
static tj_gemm_desc row_desc(const gemm_run *v, int64_t r, int64_t e)
{
  const tj_grouped_gemm_desc *h = &v->h;
  tj_gemm_desc d = plain_of(h);
  size_t ea = dtype_bytes(h->a_type), eb = dtype_bytes(h->b_type);
  size_t ec = dtype_bytes(h->c_type);
  int64_t lo, hi, a_at = h->trans_a ? r : r * h->lda, b_at = 0, c_at = r * h->ldc;
  if (v->grouped == TJ_GROUPED_K) {
    group_span(v, e, &lo, &hi);
    a_at += h->trans_a ? lo * h->lda : lo;
    b_at = h->trans_b ? lo : lo * h->ldb;
    c_at += e * h->stride_c;
    d.k = hi > lo ? hi - lo : 1;
    d.alpha = hi > lo ? h->alpha : 0.0f;
  } else {
    b_at = e * h->stride_b;
    if (d.bias)
      d.bias = (const char *)d.bias + (size_t)(e * h->n) * ec;
  }
  d.a = (const char *)d.a + (size_t)a_at * ea;
  d.b = (const char *)d.b + (size_t)b_at * eb;
  d.c = (char *)d.c + (size_t)c_at * ec;
  if (d.aux)
    d.aux = (char *)d.aux + (size_t)(r * h->ldaux) * ec;
  d.m = 1;
  return d;
}

static void add_errors(tj__error_acc *acc, const void *got, int type,
                       const double *want, size_t n, size_t base)
{
  for (size_t i = 0; i < n; i++)
    tj__error_add_double(acc, tj__dtype_load(got, type, i), want[i],
                         base + i);
}

/* Row r of C[e] (of C for tj_gemm and TJ_GROUPED_M) against the
 * oracle, and aux's row where the call wrote it. */
static void compare_row(gemm_run *v, int64_t r, int64_t e, double *want,
                        double *aux)
{
  const tj_grouped_gemm_desc *d = &v->g;
  size_t ec = dtype_bytes(d->c_type), n = (size_t)d->n;
  int64_t c_at = r * d->ldc + (v->grouped == TJ_GROUPED_K ? e * d->stride_c : 0);
  int64_t index = (v->grouped == TJ_GROUPED_K ? e * d->m + r : r) * d->n;
  tj_gemm_desc one = row_desc(v, r, e);
  tj__oracle_gemm_desc(&one, want, aux, NULL);
  add_errors(&v->err[0], (char *)v->host[C_] + (size_t)c_at * ec, d->c_type,
             want, n, (size_t)index);
  if (v->nout > 1 && v->out_of[1] == AUX_)
    add_errors(&v->err[1], (char *)v->host[AUX_] + (size_t)(r * d->ldaux) * ec,
               d->c_type, aux, n, (size_t)index);
}

static int compare_rows(gemm_run *v)
{
  const tj_grouped_gemm_desc *d = &v->g;
  double *want = malloc(2 * (size_t)d->n * sizeof *want);
  if (!want)
    return tj__fail(v->rt, TJ_ENOMEM, "%s: out of host memory", v->fn);
  v->rows = rows_to_compare(d);
  for (uint64_t i = 0; i < v->rows; i++) {
    int64_t r = row_of(i, v->rows, d->m);
    if (v->grouped == TJ_GROUPED_K)
      for (int64_t e = 0; e < d->groups; e++)
        compare_row(v, r, e, want, want + d->n);
    else
      compare_row(v, r, group_of_row(v, r), want, want + d->n);
  }
  free(want);
  return TJ_OK;
}

/* bias_grad against the column sums of each group's rows of C as the
 * call stored them (0 for an empty group). */
static int compare_bias_grad(gemm_run *v)
{
  const tj_grouped_gemm_desc *d = &v->g;
  if (!v->dev[BGRAD_])
    return TJ_OK;
  double *sums = malloc((size_t)d->n * sizeof *sums);
  if (!sums)
    return tj__fail(v->rt, TJ_ENOMEM, "%s: out of host memory", v->fn);
  for (int64_t e = 0; e < d->groups; e++) {
    int64_t lo, hi;
    group_span(v, e, &lo, &hi);
    memset(sums, 0, (size_t)d->n * sizeof *sums);
    for (int64_t m = lo; m < hi; m++)
      for (int64_t n = 0; n < d->n; n++)
        sums[n] += tj__dtype_load(v->host[C_], d->c_type,
                                  (size_t)(m * d->ldc + n));
    add_errors(&v->err[v->nout - 1], (float *)v->host[BGRAD_] + e * d->n,
               TJ_DTYPE_F32, sums, (size_t)d->n, (size_t)(e * d->n));
  }
  free(sums);
  return TJ_OK;
}

/* ------------------------------------------------------- the report */

/* rel L2 limits: about two units of C's rounding (fp16's as tj_verify's
 * gemm_f16), and for fp32 C the fp32 sums' own. */
static double rel_l2_limit(const gemm_run *v, int out)
{
  if (v->out_of[out] == BGRAD_)
    return BIAS_GRAD_REL_L2;
  return v->g.c_type == TJ_DTYPE_F16 ? 1e-3
         : v->g.c_type == TJ_DTYPE_BF16 ? 4e-3 : 1e-4;
}

static void finish_errors(gemm_run *v, tj_report *r)
{
  double floor = v->g.c_type == TJ_DTYPE_F16 ? F16_REL_FLOOR : 0;
  r->within_tolerance = 1;
  r->max_abs_tolerance = INFINITY;
  r->rel_l2_tolerance = rel_l2_limit(v, 0);
  for (int i = 0; i < v->nout; i++) {
    tj__error_stats *s = &v->stats[i];
    tj__error_finish(&v->err[i], v->out_of[i] == BGRAD_ ? 0 : floor, s);
    r->compared += s->count;
    r->max_abs_error = fmax(r->max_abs_error, s->max_abs);
    /* Each output against its own limit; the report's rel L2 is C's
     * measure scaled to C's limit where another output is worse. */
    double scaled = s->rel_l2 * rel_l2_limit(v, 0) / rel_l2_limit(v, i);
    r->rel_l2_error = fmax(r->rel_l2_error, scaled);
    r->within_tolerance &= tj__error_within(s, INFINITY, rel_l2_limit(v, i));
  }
}

/* The fewest bytes a call moves (A, B read once, C written, and read
 * where beta reads it, bias, aux) and its rate. */
static void fill_rates(gemm_run *v, tj_report *r)
{
  const tj_grouped_gemm_desc *d = &v->g;
  double m = (double)d->m, n = (double)d->n, k = (double)d->k;
  double ec = (double)dtype_bytes(d->c_type);
  double groups = (double)d->groups;
  r->first_call_ms = v->first_ms;
  r->kernel_ms = v->ms;
  r->bytes_moved = m * k * (double)dtype_bytes(d->a_type) +
                   k * n * (double)dtype_bytes(d->b_type) *
                       (v->grouped == TJ_GROUPED_M ? groups : 1) +
                   m * n * ec * (v->grouped == TJ_GROUPED_K ? groups : 1) *
                       (v->c_in ? 2 : 1) +
                   (v->dev[AUX_] ? m * n * ec : 0) +
                   (v->dev[BIAS_] ? groups * n * ec : 0);
  if (v->ms > 0) {
    r->gb_per_s = r->bytes_moved / (v->ms * 1e6);
    r->tflop_per_s = 2.0 * m * n * k / (v->ms * 1e9);
  }
}

static void append(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...)
{
  size_t len = strnlen(buf, cap);
  if (len + 1 >= cap)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + len, cap - len, fmt, ap);
  va_end(ap);
}

/* "tj_grouped_gemm (TJ_GROUPED_M, 8 groups: the largest 300, 2 empty)". */
static void say_groups(const gemm_run *v, tj_report *r)
{
  int64_t largest = 0, empty = 0, lo, hi;
  for (int64_t e = 0; e < v->g.groups; e++) {
    group_span(v, e, &lo, &hi);
    largest = hi - lo > largest ? hi - lo : largest;
    empty += hi == lo;
  }
  append(r->evidence, sizeof r->evidence, "tj_grouped_gemm (%s, %lld "
         "groups: the largest %lld, %lld empty) ",
         v->grouped == TJ_GROUPED_M ? "TJ_GROUPED_M" : "TJ_GROUPED_K",
         (long long)v->g.groups, (long long)largest, (long long)empty);
}

static void fill_prose(const gemm_run *v, tj_report *r)
{
  const tj_grouped_gemm_desc *d = &v->g;
  if (v->grouped)
    say_groups(v, r);
  else
    append(r->evidence, sizeof r->evidence, "tj_gemm ");
  append(r->evidence, sizeof r->evidence, "%lld x %lld x %lld ran %s on %s "
         "(%s): first call %.4g ms (its compile or cache load included), "
         "median of %d warm calls %.4g ms, %.4g TFLOP/s. %llu outputs "
         "compared with the double-precision oracle %s (",
         (long long)d->m, (long long)d->n, (long long)d->k, v->config,
         r->device, r->arch, v->first_ms, v->timed, v->ms, r->tflop_per_s,
         (unsigned long long)r->compared,
         r->within_tolerance ? "were all within tolerance"
                             : "were NOT all within tolerance");
  for (int i = 0; i < v->nout; i++)
    append(r->evidence, sizeof r->evidence, "%s%s: rel L2 %.3g (limit %g), "
           "max abs %.3g, %zu non-finite", i ? "; " : "",
           array_names[v->out_of[i]], v->stats[i].rel_l2, rel_l2_limit(v, i),
           v->stats[i].max_abs, v->stats[i].nonfinite + v->stats[i].special_mismatch);
  append(r->evidence, sizeof r->evidence, ").");
  append(r->non_claims, sizeof r->non_claims, "Not a comparison with a "
         "vendor library. One device, one run, one seed (%llu), alpha %g, "
         "beta %g. Inputs uniform in [-1, 1] (aux of dGELU in [-3, 3]), "
         "zeros redrawn: no inf, NaN or larger magnitudes. Buffers came "
         "from hipMalloc, aligned. Max abs error is reported, not held to a "
         "limit. The first call's time is the host's clock; the warm calls' "
         "are events around each call. ", (unsigned long long)v->seed,
         (double)d->alpha, (double)d->beta);
  if (v->rows < (uint64_t)d->m)
    append(r->non_claims, sizeof r->non_claims, "Only %llu of %lld rows of C "
           "were compared (the first, the last and rows spread between).",
           (unsigned long long)v->rows, (long long)d->m);
}

static void fill_report(gemm_run *v, const tj__device_props *props,
                        tj_report *r)
{
  memset(r, 0, sizeof *r);
  snprintf(r->kernel, sizeof r->kernel, v->grouped ? "grouped_gemm" : "gemm");
  snprintf(r->ran, sizeof r->ran, "%.63s", v->config);
  r->m = (int)(v->g.m < INT32_MAX ? v->g.m : INT32_MAX);
  r->n_cols = (int)(v->g.n < INT32_MAX ? v->g.n : INT32_MAX);
  r->k = (int)(v->g.k < INT32_MAX ? v->g.k : INT32_MAX);
  r->n = (uint64_t)v->g.m * (uint64_t)v->g.n;
  r->seed = v->seed;
  snprintf(r->compiler, sizeof r->compiler, "%s", tj_runtime_compiler(v->rt));
  snprintf(r->device, sizeof r->device, "%s", props->name);
  snprintf(r->arch, sizeof r->arch, "%s", tj_runtime_arch(v->rt));
  finish_errors(v, r);
  fill_rates(v, r);
  fill_prose(v, r);
}

/* ------------------------------------------------------- the two calls */

static int run_and_compare(gemm_run *v)
{
  int rc = make_arrays(v);
  if (rc == TJ_OK) {
    point_descs(v);
    rc = first_call(v);
  }
  if (rc == TJ_OK)
    rc = time_calls(v);
  if (rc == TJ_OK)
    rc = copy_outputs(v);
  if (rc == TJ_OK)
    rc = compare_rows(v);
  if (rc == TJ_OK)
    rc = compare_bias_grad(v);
  return rc;
}

/* Check, run, compare and report v, whose g, grouped and routing are
 * set. */
static int verify(gemm_run *v, tj_report *report)
{
  tj__device_props props;
  int rc = check_kinds(v);
  if (rc == TJ_OK && v->grouped)
    rc = check_groups(v);
  if (rc == TJ_OK)
    rc = plan_arrays(v);
  if (rc == TJ_OK)
    rc = check_device(v, &props);
  if (rc != TJ_OK)
    return rc;
  rc = run_and_compare(v);
  release(v);
  if (rc != TJ_OK)
    return rc;
  tj_report *r = calloc(1, sizeof *r);
  if (!r)
    return tj__fail(v->rt, TJ_ENOMEM, "%s: out of host memory", v->fn);
  fill_report(v, &props, r);
  *report = *r;
  free(r);
  return tj__verify_verdict(v->rt, report);
}

/* The arguments every call checks first; the shape's size. */
static int check_args(tj_runtime *rt, const char *fn, const void *shape,
                      size_t size, size_t want, const tj_report *report)
{
  if (!shape || !report)
    return tj__fail(rt, TJ_EINVAL, "%s: %s is NULL", fn,
                    !shape ? "shape" : "report");
  if (size != 0 && size != want)
    return tj__fail(rt, TJ_EINVAL, "%s: the shape's size is %zu: set it to "
                    "0 or sizeof its struct (%zu)", fn, size, want);
  return TJ_OK;
}

int tj_verify_gemm(tj_runtime *rt, const tj_gemm_desc *shape, uint64_t seed,
                   tj_report *report)
{
  gemm_run v = {.rt = rt, .fn = "tj_verify_gemm", .seed = seed};
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  int rc = check_args(rt, v.fn, shape, shape ? shape->size : 0,
                      sizeof *shape, report);
  if (rc != TJ_OK)
    return rc;
  const tj_gemm_desc *s = shape;
  tj_grouped_gemm_desc *g = &v.g;
  g->a_type = s->a_type, g->b_type = s->b_type, g->c_type = s->c_type;
  g->trans_a = s->trans_a, g->trans_b = s->trans_b;
  g->groups = 1;
  g->m = s->m, g->n = s->n, g->k = s->k;
  g->alpha = s->alpha, g->beta = s->beta;
  g->a = s->a, g->lda = s->lda, g->b = s->b, g->ldb = s->ldb;
  g->c = s->c, g->ldc = s->ldc;
  g->epilogue = s->epilogue, g->bias = s->bias;
  g->aux = s->aux, g->ldaux = s->ldaux, g->bias_grad = s->bias_grad;
  return verify(&v, report);
}

int tj_verify_grouped_gemm(tj_runtime *rt, const tj_grouped_gemm_desc *shape,
                           uint64_t seed, tj_report *report)
{
  gemm_run v = {.rt = rt, .fn = "tj_verify_grouped_gemm", .seed = seed};
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  int rc = check_args(rt, v.fn, shape, shape ? shape->size : 0,
                      sizeof *shape, report);
  if (rc != TJ_OK)
    return rc;
  v.g = *shape;
  v.g.size = sizeof v.g;
  v.routing = shape->offs;
  v.g.offs = NULL;
  v.grouped = shape->grouped;
  if (v.grouped != TJ_GROUPED_M && v.grouped != TJ_GROUPED_K)
    v.grouped = -1; /* refused by check_groups, which names it */
  return verify(&v, report);
}
