/*
 * verify_gemm.c: tj_verify_gemm (the "verify" section of
 * tokitai-jit/ops.h): one configuration of the GEMM family, run through
 * tj_gemm on seeded random inputs and checked against the family's
 * double-precision oracle (tj__oracle_gemm_desc, every epilogue).
 *
 * The first call is timed on the host clock to its completion, so that it
 * includes the configuration's compile or cache load; the warm calls
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

static const char fn[] = "tj_verify_gemm";

/* The arrays of a call, in tj_gemm_desc's order. */
enum { A_, B_, C_, BIAS_, AUX_, BGRAD_, NARRAYS };
static const char *const array_names[NARRAYS] = {"A", "B", "C", "bias", "aux",
                                                 "bias_grad"};

typedef struct gemm_run {
  tj_runtime *rt;
  tj_gemm_desc d;              /* the call, on device memory */
  tj_gemm_desc h;              /* the same call on the host copies */
  uint64_t seed;
  size_t bytes[NARRAYS];       /* 0: the call has no such array */
  void *host[NARRAYS], *dev[NARRAYS];
  void *c_in;                  /* C before the call, where beta reads it */
  char config[128];            /* tj_gemm_kernel's name */
  double first_ms, ms;
  int timed;
  uint64_t rows;               /* rows of C compared */
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

static int check_kinds(tj_runtime *rt, const tj_gemm_desc *d)
{
  if (d->a_type < TJ_DTYPE_F16 || d->a_type > TJ_DTYPE_BF16 ||
      d->b_type < TJ_DTYPE_F16 || d->b_type > TJ_DTYPE_BF16 ||
      d->c_type < TJ_DTYPE_F16 || d->c_type > TJ_DTYPE_F32)
    return tj__fail(rt, TJ_EINVAL, "%s: a_type=%d, b_type=%d, c_type=%d: A "
                    "and B take TJ_DTYPE_F16 or TJ_DTYPE_BF16, C also "
                    "TJ_DTYPE_F32", fn, d->a_type, d->b_type, d->c_type);
  if (d->epilogue < TJ_EPILOGUE_NONE || d->epilogue > TJ_EPILOGUE_DGELU)
    return tj__fail(rt, TJ_EINVAL, "%s: epilogue=%d is not a TJ_EPILOGUE_*",
                    fn, d->epilogue);
  if (d->m < 1 || d->n < 1 || d->k < 1)
    return tj__fail(rt, TJ_EINVAL, "%s: m=%lld, n=%lld, k=%lld: each must "
                    "be at least 1", fn, (long long)d->m, (long long)d->n,
                    (long long)d->k);
  if (d->a || d->b || d->c || d->bias)
    return tj__fail(rt, TJ_EINVAL, "%s: the shape's a, b, c and bias must "
                    "be NULL (the run makes its own inputs)", fn);
  if (d->aux && d->epilogue != TJ_EPILOGUE_BIAS_GELU &&
      d->epilogue != TJ_EPILOGUE_DGELU)
    return tj__fail(rt, TJ_EINVAL, "%s: aux is set, and the epilogue does "
                    "not take it", fn);
  if (d->bias_grad && d->epilogue != TJ_EPILOGUE_DGELU)
    return tj__fail(rt, TJ_EINVAL, "%s: bias_grad is set, and only "
                    "TJ_EPILOGUE_DGELU takes it", fn);
  return TJ_OK;
}

/* Bytes of rows x ld elements, 0 when that overflows. */
static size_t matrix_bytes(int64_t rows, int64_t ld, size_t elem)
{
  size_t n;
  if (ld < 1 || __builtin_mul_overflow((size_t)rows, (size_t)ld, &n) ||
      __builtin_mul_overflow(n, elem, &n))
    return 0;
  return n;
}

/* Leading dimensions (0: dense) and the bytes of every array the call
 * takes. */
static int plan_arrays(gemm_run *v)
{
  tj_gemm_desc *d = &v->d;
  int e = d->epilogue;
  size_t ea = dtype_bytes(d->a_type), eb = dtype_bytes(d->b_type);
  size_t ec = dtype_bytes(d->c_type);
  int aux = e == TJ_EPILOGUE_DGELU || (e == TJ_EPILOGUE_BIAS_GELU && d->aux);
  d->lda = d->lda ? d->lda : d->trans_a ? d->m : d->k;
  d->ldb = d->ldb ? d->ldb : d->trans_b ? d->k : d->n;
  d->ldc = d->ldc ? d->ldc : d->n;
  d->ldaux = aux ? (d->ldaux ? d->ldaux : d->n) : 0;
  if (d->lda < (d->trans_a ? d->m : d->k) || d->ldb < (d->trans_b ? d->k : d->n) ||
      d->ldc < d->n || (aux && d->ldaux < d->n))
    return tj__fail(v->rt, TJ_EINVAL, "%s: lda=%lld, ldb=%lld, ldc=%lld, "
                    "ldaux=%lld: each must be 0 (dense) or at least its "
                    "stored row", fn, (long long)d->lda, (long long)d->ldb,
                    (long long)d->ldc, (long long)d->ldaux);
  v->bytes[A_] = matrix_bytes(d->trans_a ? d->k : d->m, d->lda, ea);
  v->bytes[B_] = matrix_bytes(d->trans_b ? d->n : d->k, d->ldb, eb);
  v->bytes[C_] = matrix_bytes(d->m, d->ldc, ec);
  v->bytes[BIAS_] = e == TJ_EPILOGUE_BIAS || e == TJ_EPILOGUE_BIAS_GELU
                        ? matrix_bytes(1, d->n, ec) : 0;
  v->bytes[AUX_] = aux ? matrix_bytes(d->m, d->ldaux, ec) : 0;
  v->bytes[BGRAD_] = d->bias_grad ? matrix_bytes(1, d->n, 4) : 0;
  int needed[NARRAYS] = {1, 1, 1, e == TJ_EPILOGUE_BIAS ||
                         e == TJ_EPILOGUE_BIAS_GELU, aux, d->bias_grad != NULL};
  for (int i = 0; i < NARRAYS; i++)
    if (needed[i] && v->bytes[i] == 0)
      return tj__fail(v->rt, TJ_ERANGE, "%s: %s needs more bytes than "
                      "size_t holds", fn, array_names[i]);
  return TJ_OK;
}

static int check_device(gemm_run *v, tj__device_props *props)
{
  tj_runtime *rt = v->rt;
  size_t all = 0;
  if (rt->compile_only)
    return tj__fail(rt, TJ_ENODEVICE, "no GPU: %s runs tj_gemm, and this "
                    "runtime is compile-only (arch %s)", fn, rt->arch);
  if (tj__device_query(rt->device.ordinal, props, 0) != TJ_OK)
    return tj__fail(rt, TJ_EDEVICE, "%s: could not query device %d", fn,
                    rt->device.ordinal);
  for (int i = 0; i < NARRAYS; i++)
    all += v->bytes[i];
  if (all > props->total_mem / 2)
    return tj__fail(rt, TJ_ERANGE, "%s: %lld x %lld x %lld needs %zu bytes "
                    "of device memory, over half of the %zu that %s has", fn,
                    (long long)v->d.m, (long long)v->d.n, (long long)v->d.k,
                    all, props->total_mem, props->name);
  if (tj_runtime_bind(rt) != TJ_OK)
    return tj__fail(rt, TJ_EDEVICE, "%s: could not make device %d current",
                    fn, rt->device.ordinal);
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

static int device_failed(tj_runtime *rt, const char *what, hipError_t e)
{
  return tj__fail(rt, TJ_EDEVICE, "%s: %s failed: %s", fn, what,
                  hipGetErrorString(e));
}

/* Host and device copies of every array; the inputs filled and copied
 * in.  aux is an input of DGELU (gelu' of values in [-3, 3]) and an
 * output of BIAS_GELU. */
static int make_arrays(gemm_run *v)
{
  const tj_gemm_desc *d = &v->d;
  const int types[NARRAYS] = {d->a_type, d->b_type, d->c_type, d->c_type,
                              d->c_type, TJ_DTYPE_F32};
  int aux_in = d->epilogue == TJ_EPILOGUE_DGELU;
  for (int i = 0; i < NARRAYS; i++) {
    if (!v->bytes[i])
      continue;
    if (!(v->host[i] = malloc(v->bytes[i])))
      return tj__fail(v->rt, TJ_ENOMEM, "%s: out of host memory for %zu "
                      "bytes of %s", fn, v->bytes[i], array_names[i]);
    hipError_t e = hipMalloc(&v->dev[i], v->bytes[i]);
    if (e != hipSuccess) {
      v->dev[i] = NULL;
      return tj__fail(v->rt, TJ_ENOMEM, "%s: hipMalloc of %zu bytes for %s "
                      "failed: %s", fn, v->bytes[i], array_names[i],
                      hipGetErrorString(e));
    }
    int input = i == A_ || i == B_ || i == BIAS_ || (i == AUX_ && aux_in);
    if (input || (i == C_ && d->beta != 0.0f)) {
      fill(v->host[i], v->bytes[i] / dtype_bytes(types[i]), types[i],
           i == AUX_ ? 3.0 : 1.0, v->seed, i);
      if ((e = hipMemcpyHtoD(v->dev[i], v->host[i], v->bytes[i])) != hipSuccess)
        return device_failed(v->rt, "copying inputs to the device", e);
    }
  }
  if (d->beta != 0.0f) { /* C's values before the call, for the oracle */
    if (!(v->c_in = malloc(v->bytes[C_])))
      return tj__fail(v->rt, TJ_ENOMEM, "%s: out of host memory", fn);
    memcpy(v->c_in, v->host[C_], v->bytes[C_]);
  }
  return TJ_OK;
}

/* The call on device memory, and the same on the host copies. */
static void point_descs(gemm_run *v)
{
  void **slot[2][NARRAYS] = {
      {(void **)&v->d.a, (void **)&v->d.b, &v->d.c, (void **)&v->d.bias,
       &v->d.aux, (void **)&v->d.bias_grad},
      {(void **)&v->h.a, (void **)&v->h.b, &v->h.c, (void **)&v->h.bias,
       &v->h.aux, (void **)&v->h.bias_grad}};
  v->h = v->d;
  for (int i = 0; i < NARRAYS; i++) {
    *slot[0][i] = v->dev[i];
    *slot[1][i] = i == C_ && v->c_in ? v->c_in : v->host[i];
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

/* C back to its first values (beta reads them) or poisoned, and every
 * other output poisoned. */
static int reset_outputs(gemm_run *v)
{
  hipError_t e = hipSuccess;
  if (v->c_in)
    e = hipMemcpyHtoD(v->dev[C_], v->c_in, v->bytes[C_]);
  else
    e = hipMemset(v->dev[C_], 0xff, v->bytes[C_]);
  if (e == hipSuccess && v->d.epilogue == TJ_EPILOGUE_BIAS_GELU && v->dev[AUX_])
    e = hipMemset(v->dev[AUX_], 0xff, v->bytes[AUX_]);
  if (e == hipSuccess && v->dev[BGRAD_])
    e = hipMemset(v->dev[BGRAD_], 0xff, v->bytes[BGRAD_]);
  return e == hipSuccess ? TJ_OK
                         : device_failed(v->rt, "resetting the outputs", e);
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
    return device_failed(v->rt, "hipDeviceSynchronize", e);
  double t0 = now_ms();
  if ((rc = tj_gemm(v->rt, NULL, &v->d)) != TJ_OK)
    return rc;
  if ((e = hipStreamSynchronize(NULL)) != hipSuccess)
    return device_failed(v->rt, "the first call", e);
  v->first_ms = now_ms() - t0;
  const char *name = tj_gemm_kernel(v->rt, &v->d);
  snprintf(v->config, sizeof v->config, "%s", name ? name : "(unnamed)");
  return TJ_OK;
}

static int timed_call(gemm_run *v, hipEvent_t ev[2], float *ms)
{
  int rc = reset_outputs(v);
  hipError_t e = hipSuccess;
  if (rc != TJ_OK)
    return rc;
  if ((e = hipEventRecord(ev[0], NULL)) != hipSuccess)
    return device_failed(v->rt, "hipEventRecord", e);
  if ((rc = tj_gemm(v->rt, NULL, &v->d)) != TJ_OK)
    return rc;
  if ((e = hipEventRecord(ev[1], NULL)) != hipSuccess ||
      (e = hipEventSynchronize(ev[1])) != hipSuccess)
    return device_failed(v->rt, "tj_gemm", e);
  if ((e = hipEventElapsedTime(ms, ev[0], ev[1])) != hipSuccess)
    return device_failed(v->rt, "hipEventElapsedTime", e);
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
    return tj__fail(v->rt, TJ_EDEVICE, "%s: hipEventCreate failed", fn);
  if (hipEventCreate(&ev[1]) != hipSuccess) {
    hipEventDestroy(ev[0]);
    return tj__fail(v->rt, TJ_EDEVICE, "%s: hipEventCreate failed", fn);
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
    if (!v->dev[a] || (a == AUX_ && v->d.epilogue != TJ_EPILOGUE_BIAS_GELU))
      continue;
    hipError_t e = hipMemcpyDtoH(v->host[a], v->dev[a], v->bytes[a]);
    if (e != hipSuccess)
      return device_failed(v->rt, "copying results to the host", e);
    v->out_of[v->nout++] = a;
  }
  return TJ_OK;
}

/* ------------------------------------------------------- comparing */

static uint64_t rows_to_compare(const tj_gemm_desc *d)
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

static void add_errors(tj__error_acc *acc, const void *got, int type,
                       const double *want, size_t n, size_t base)
{
  for (size_t i = 0; i < n; i++)
    tj__error_add_double(acc, tj__dtype_load(got, type, i), want[i],
                         base + i);
}

/* Row r of the host call: its A slice, C and aux rows, one row of m. */
static tj_gemm_desc row_desc(const gemm_run *v, int64_t r)
{
  tj_gemm_desc d = v->h;
  size_t ea = dtype_bytes(d.a_type), ec = dtype_bytes(d.c_type);
  d.a = (const char *)d.a + (size_t)(d.trans_a ? r : r * d.lda) * ea;
  d.c = (char *)d.c + (size_t)(r * d.ldc) * ec;
  if (d.aux)
    d.aux = (char *)d.aux + (size_t)(r * d.ldaux) * ec;
  d.m = 1;
  return d;
}

static int compare_rows(gemm_run *v)
{
  const tj_gemm_desc *d = &v->d;
  double *want = malloc(2 * (size_t)d->n * sizeof *want);
  if (!want)
    return tj__fail(v->rt, TJ_ENOMEM, "%s: out of host memory", fn);
  double *aux = want + d->n;
  size_t ec = dtype_bytes(d->c_type);
  int aux_out = v->nout > 1 && v->out_of[1] == AUX_;
  v->rows = rows_to_compare(d);
  for (uint64_t i = 0; i < v->rows; i++) {
    int64_t r = row_of(i, v->rows, d->m);
    tj_gemm_desc one = row_desc(v, r);
    tj__oracle_gemm_desc(&one, want, aux, NULL);
    add_errors(&v->err[0], (char *)v->host[C_] + (size_t)(r * d->ldc) * ec,
               d->c_type, want, (size_t)d->n, (size_t)(r * d->n));
    if (aux_out)
      add_errors(&v->err[1], (char *)v->host[AUX_] + (size_t)(r * d->ldaux) * ec,
                 d->c_type, aux, (size_t)d->n, (size_t)(r * d->n));
  }
  free(want);
  return TJ_OK;
}

/* bias_grad against the column sums of C as the call stored it. */
static int compare_bias_grad(gemm_run *v)
{
  const tj_gemm_desc *d = &v->d;
  if (!v->dev[BGRAD_])
    return TJ_OK;
  double *sums = calloc((size_t)d->n, sizeof *sums);
  if (!sums)
    return tj__fail(v->rt, TJ_ENOMEM, "%s: out of host memory", fn);
  for (int64_t m = 0; m < d->m; m++)
    for (int64_t n = 0; n < d->n; n++)
      sums[n] += tj__dtype_load(v->host[C_], d->c_type, (size_t)(m * d->ldc + n));
  add_errors(&v->err[v->nout - 1], v->host[BGRAD_], TJ_DTYPE_F32, sums,
             (size_t)d->n, 0);
  free(sums);
  return TJ_OK;
}

/* ------------------------------------------------------- the report */

/* rel L2 limits: two units of C's rounding (fp16's as tj_verify's
 * gemm_f16), and for fp32 C the fp32 sums' own. */
static double rel_l2_limit(const gemm_run *v, int out)
{
  if (v->out_of[out] == BGRAD_)
    return BIAS_GRAD_REL_L2;
  return v->d.c_type == TJ_DTYPE_F16 ? 1e-3
         : v->d.c_type == TJ_DTYPE_BF16 ? 4e-3 : 1e-4;
}

static void finish_errors(gemm_run *v, tj_report *r)
{
  double floor = v->d.c_type == TJ_DTYPE_F16 ? F16_REL_FLOOR : 0;
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

static void fill_rates(gemm_run *v, tj_report *r)
{
  double m = (double)v->d.m, n = (double)v->d.n, k = (double)v->d.k;
  double ec = (double)dtype_bytes(v->d.c_type);
  r->first_call_ms = v->first_ms;
  r->kernel_ms = v->ms;
  r->bytes_moved = m * k * (double)dtype_bytes(v->d.a_type) +
                   k * n * (double)dtype_bytes(v->d.b_type) +
                   m * n * ec * (v->c_in ? 2 : 1) +
                   (v->dev[AUX_] ? m * n * ec : 0) + (v->dev[BIAS_] ? n * ec : 0);
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

static void fill_prose(const gemm_run *v, tj_report *r)
{
  const tj_gemm_desc *d = &v->d;
  append(r->evidence, sizeof r->evidence, "tj_gemm %lld x %lld x %lld ran "
         "%s on %s (%s): first call %.4g ms (its compile or cache load "
         "included), median of %d warm calls %.4g ms, %.4g TFLOP/s. %llu "
         "outputs compared with the double-precision oracle %s (",
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
  snprintf(r->kernel, sizeof r->kernel, "gemm");
  snprintf(r->ran, sizeof r->ran, "%.63s", v->config);
  r->m = (int)(v->d.m < INT32_MAX ? v->d.m : INT32_MAX);
  r->n_cols = (int)(v->d.n < INT32_MAX ? v->d.n : INT32_MAX);
  r->k = (int)(v->d.k < INT32_MAX ? v->d.k : INT32_MAX);
  r->n = (uint64_t)v->d.m * (uint64_t)v->d.n;
  r->seed = v->seed;
  snprintf(r->compiler, sizeof r->compiler, "%s", tj_runtime_compiler(v->rt));
  snprintf(r->device, sizeof r->device, "%s", props->name);
  snprintf(r->arch, sizeof r->arch, "%s", tj_runtime_arch(v->rt));
  finish_errors(v, r);
  fill_rates(v, r);
  fill_prose(v, r);
}

/* ------------------------------------------------------- tj_verify_gemm */

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

int tj_verify_gemm(tj_runtime *rt, const tj_gemm_desc *shape, uint64_t seed,
                   tj_report *report)
{
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  if (!shape || !report)
    return tj__fail(rt, TJ_EINVAL, "%s: %s is NULL", fn,
                    !shape ? "shape" : "report");
  if (shape->size != 0 && shape->size != sizeof *shape)
    return tj__fail(rt, TJ_EINVAL, "%s: tj_gemm_desc.size is %zu: set it to "
                    "0 or sizeof(tj_gemm_desc) (%zu)", fn, shape->size,
                    sizeof *shape);
  gemm_run v = {.rt = rt, .d = *shape, .seed = seed};
  tj__device_props props;
  int rc = check_kinds(rt, &v.d);
  if (rc == TJ_OK)
    rc = plan_arrays(&v);
  if (rc == TJ_OK)
    rc = check_device(&v, &props);
  if (rc != TJ_OK)
    return rc;
  rc = run_and_compare(&v);
  release(&v);
  if (rc != TJ_OK)
    return rc;
  tj_report *r = calloc(1, sizeof *r);
  if (!r)
    return tj__fail(rt, TJ_ENOMEM, "%s: out of host memory", fn);
  fill_report(&v, &props, r);
  *report = *r;
  free(r);
  return tj__verify_verdict(rt, report);
}
