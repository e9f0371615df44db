/*
 * oracle.c: double-precision references for the embedded kernels, and the
 * error measures that tests and `tokitai-jit --run` report.
 *
 * The references are written for obviousness, not speed: the formula as
 * the kernel's comment states it, with no algebraic rewriting, so that a
 * rewriting mistake in a kernel shows up as a difference here.
 */
#include "oracle.h"

#include "tokitai-jit.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* sqrt(2/pi) and the cubic coefficient of the tanh approximation. */
#define GELU_C 0.79788456080286535588
#define GELU_A 0.044715

double tj__gelu(double x)
{
  double t = tanh(GELU_C * (x + GELU_A * x * x * x));
  return 0.5 * x * (1.0 + t);
}

double tj__gelu_grad(double x)
{
  double t = tanh(GELU_C * (x + GELU_A * x * x * x));
  double du = GELU_C * (1.0 + 3.0 * GELU_A * x * x);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du;
}

/* Signed overflow is undefined in C; unsigned arithmetic wraps, and the
 * conversion back is two's complement on every compiler we build with. */
void tj__oracle_add_i32(const int32_t *a, const int32_t *b, int32_t *c,
                        size_t n)
{
  for (size_t i = 0; i < n; i++) {
    uint32_t sum = (uint32_t)a[i] + (uint32_t)b[i];
    c[i] = (int32_t)sum;
  }
}

void tj__oracle_gelu_fwd(const uint16_t *x, double *y, size_t n)
{
  for (size_t i = 0; i < n; i++)
    y[i] = tj__gelu((double)tj_f16_to_f32(x[i]));
}

void tj__oracle_gelu_bwd(const uint16_t *grad_out, const uint16_t *x,
                         double *grad_in, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    double g = (double)tj_f16_to_f32(grad_out[i]);
    grad_in[i] = g * tj__gelu_grad((double)tj_f16_to_f32(x[i]));
  }
}

/* Every half as a double (tj_f16_to_f32 of each of the 65536), filled
 * once per process. */
static double half_value[65536];
static pthread_once_t half_value_once = PTHREAD_ONCE_INIT;

static void fill_half_value(void)
{
  for (uint32_t h = 0; h < 65536; h++)
    half_value[h] = (double)tj_f16_to_f32((uint16_t)h);
}

/*
 * out = alpha * A * B + beta * C, each element's sum over k taken in order
 * k = 0, 1, ..., K - 1 from 0.0, as the formula reads.  The loops run k
 * outside n so that a row of out gathers its K products together: every
 * element's sum still sees the same products in the same order (so the
 * same bits as a dot product per element), but B is read along its rows
 * and each half is converted through the table, where a dot product per
 * element converted two halves per product and read B down its columns
 * (about 5.5 ns a product on the 2-core machine against 0.83).
 */
void tj__oracle_gemm(int M, int N, int K, double alpha, const uint16_t *A,
                     int lda, const uint16_t *B, int ldb, double beta,
                     const uint16_t *C, int ldc, double *out)
{
  pthread_once(&half_value_once, fill_half_value);
  const double *half = half_value;
  for (int m = 0; m < M; m++) {
    double *row = out + (size_t)m * (size_t)N;
    for (int n = 0; n < N; n++)
      row[n] = 0.0;
    for (int k = 0; k < K; k++) {
      double a = half[A[(size_t)m * (size_t)lda + (size_t)k]];
      const uint16_t *b = B + (size_t)k * (size_t)ldb;
      for (int n = 0; n < N; n++)
        row[n] += a * half[b[n]];
    }
    for (int n = 0; n < N; n++) {
      double v = alpha * row[n];
      if (beta != 0.0)
        v += beta * half[C[(size_t)m * (size_t)ldc + (size_t)n]];
      row[n] = v;
    }
  }
}

static void same_kind(tj__error_acc *acc, double got, double want)
{
  int same = isnan(want) ? isnan(got) : (got == want);
  if (!same)
    acc->s.special_mismatch++;
}

static void accumulate(tj__error_acc *acc, size_t i, double got, double want)
{
  acc->s.count++;
  if (!isfinite(want)) {
    same_kind(acc, got, want);
    return;
  }
  if (!isfinite(got)) {
    acc->s.nonfinite++;
    return;
  }
  double d = fabs(got - want);
  if (d > acc->s.max_abs) {
    acc->s.max_abs = d;
    acc->s.max_abs_index = i;
  }
  acc->err_sq += d * d;
  acc->want_sq += want * want;
  acc->finite++;
}

void tj__error_add_f16(tj__error_acc *acc, const uint16_t *got,
                       const double *want, size_t n, size_t base)
{
  for (size_t i = 0; i < n; i++)
    accumulate(acc, base + i, (double)tj_f16_to_f32(got[i]), want[i]);
}

void tj__error_add_double(tj__error_acc *acc, double got, double want,
                          size_t i)
{
  accumulate(acc, i, got, want);
}

void tj__error_add_i32(tj__error_acc *acc, const int32_t *got,
                       const int32_t *want, size_t n, size_t base)
{
  for (size_t i = 0; i < n; i++)
    accumulate(acc, base + i, (double)got[i], (double)want[i]);
}

void tj__error_finish(const tj__error_acc *acc, double rel_floor,
                      tj__error_stats *out)
{
  double den = fmax(acc->want_sq, (double)acc->finite * rel_floor * rel_floor);
  *out = acc->s;
  if (acc->err_sq == 0.0)
    out->rel_l2 = 0.0;
  else if (den == 0.0)
    out->rel_l2 = INFINITY;
  else
    out->rel_l2 = sqrt(acc->err_sq) / sqrt(den);
}

void tj__compare_f16(const uint16_t *got, const double *want, size_t n,
                     tj__error_stats *out)
{
  tj__error_acc acc = {0};
  tj__error_add_f16(&acc, got, want, n, 0);
  tj__error_finish(&acc, 0.0, out);
}

void tj__compare_i32(const int32_t *got, const int32_t *want, size_t n,
                     tj__error_stats *out)
{
  tj__error_acc acc = {0};
  tj__error_add_i32(&acc, got, want, n, 0);
  tj__error_finish(&acc, 0.0, out);
}

int tj__error_within(const tj__error_stats *s, double max_abs_tol,
                     double rel_l2_tol)
{
  return s->nonfinite == 0 && s->special_mismatch == 0 &&
         s->max_abs <= max_abs_tol && s->rel_l2 <= rel_l2_tol;
}

double tj__dtype_load(const void *p, int type, size_t i)
{
  if (type == TJ_DTYPE_F32)
    return ((const float *)p)[i];
  uint16_t h = ((const uint16_t *)p)[i];
  return type == TJ_DTYPE_F16 ? tj_f16_to_f32(h) : tj_bf16_to_f32(h);
}

double tj__dtype_round(double v, int type)
{
  float f = (float)v;
  if (type == TJ_DTYPE_F16)
    return tj_f16_to_f32(tj_f32_to_f16(f));
  if (type == TJ_DTYPE_BF16)
    return tj_bf16_to_f32(tj_f32_to_bf16(f));
  return f;
}

/* Row m, column n of op(A) op(B), summed in double. */
static double product_at(const tj_gemm_desc *d, int64_t m, int64_t n)
{
  double s = 0;
  for (int64_t k = 0; k < d->k; k++) {
    size_t ia = (size_t)(d->trans_a ? k * d->lda + m : m * d->lda + k);
    size_t ib = (size_t)(d->trans_b ? n * d->ldb + k : k * d->ldb + n);
    s += tj__dtype_load(d->a, d->a_type, ia) *
         tj__dtype_load(d->b, d->b_type, ib);
  }
  return s;
}

void tj__oracle_gemm_desc(const tj_gemm_desc *d, double *c, double *aux,
                          double *sums)
{
  int e = d->epilogue;
  for (int64_t m = 0; m < d->m; m++)
    for (int64_t n = 0; n < d->n; n++) {
      size_t o = (size_t)(m * d->n + n);
      double v = d->alpha == 0.0f ? 0.0 : (double)d->alpha * product_at(d, m, n);
      if (d->beta != 0.0f)
        v += (double)d->beta *
             tj__dtype_load(d->c, d->c_type, (size_t)(m * d->ldc + n));
      if (e == TJ_EPILOGUE_BIAS || e == TJ_EPILOGUE_BIAS_GELU)
        v += tj__dtype_load(d->bias, d->c_type, (size_t)n);
      if (e == TJ_EPILOGUE_BIAS_GELU) {
        if (aux)
          aux[o] = v;
        v = tj__gelu(v);
      }
      if (e == TJ_EPILOGUE_DGELU)
        v *= tj__gelu_grad(
            tj__dtype_load(d->aux, d->c_type, (size_t)(m * d->ldaux + n)));
      c[o] = v;
    }
  for (int64_t n = 0; sums && e == TJ_EPILOGUE_DGELU && n < d->n; n++) {
    double s = 0;
    for (int64_t m = 0; m < d->m; m++)
      s += tj__dtype_round(c[m * d->n + n], d->c_type);
    sums[n] = s;
  }
}

/* ------------------------------------------------------- grouped GEMM */

/* Row m, column n of op(A) op(B) over the reduction [k_lo, k_hi), B
 * starting at b. */
static double grouped_product_at(const tj_grouped_gemm_desc *d,
                                 const void *b, int64_t m, int64_t n,
                                 int64_t k_lo, int64_t k_hi)
{
  double s = 0;
  for (int64_t k = k_lo; k < k_hi; k++) {
    size_t ia = (size_t)(d->trans_a ? k * d->lda + m : m * d->lda + k);
    size_t ib = (size_t)(d->trans_b ? n * d->ldb + k : k * d->ldb + n);
    s += tj__dtype_load(d->a, d->a_type, ia) * tj__dtype_load(b, d->b_type, ib);
  }
  return s;
}

/* Group e's M-grouped rows [lo, hi) into c (and aux), as tj_gemm's
 * epilogues say, with bias row e and B[e]. */
static void grouped_m_rows(const tj_grouped_gemm_desc *d, int64_t e,
                           int64_t lo, int64_t hi, double *c, double *aux)
{
  const void *b = (const char *)d->b +
                  (size_t)(e * d->stride_b) * (d->b_type == TJ_DTYPE_F32 ? 4 : 2);
  int ep = d->epilogue;
  for (int64_t m = lo; m < hi; m++)
    for (int64_t n = 0; n < d->n; n++) {
      size_t o = (size_t)(m * d->n + n);
      double v = d->alpha == 0.0f
                     ? 0.0
                     : (double)d->alpha * grouped_product_at(d, b, m, n, 0, d->k);
      if (d->beta != 0.0f)
        v += (double)d->beta *
             tj__dtype_load(d->c, d->c_type, (size_t)(m * d->ldc + n));
      if (ep == TJ_EPILOGUE_BIAS || ep == TJ_EPILOGUE_BIAS_GELU)
        v += tj__dtype_load(d->bias, d->c_type, (size_t)(e * d->n + n));
      if (ep == TJ_EPILOGUE_BIAS_GELU) {
        if (aux && d->aux)
          aux[o] = v;
        v = tj__gelu(v);
      }
      if (ep == TJ_EPILOGUE_DGELU)
        v *= tj__gelu_grad(
            tj__dtype_load(d->aux, d->c_type, (size_t)(m * d->ldaux + n)));
      c[o] = v;
    }
}

static void oracle_grouped_m(const tj_grouped_gemm_desc *d, double *c,
                             double *aux, double *sums)
{
  int64_t lo = 0;
  for (int64_t e = 0; e < d->groups; e++) {
    int64_t hi = d->offs[e];
    grouped_m_rows(d, e, lo, hi, c, aux);
    for (int64_t n = 0; sums && d->epilogue == TJ_EPILOGUE_DGELU && n < d->n;
         n++) {
      double s = 0;
      for (int64_t m = lo; m < hi; m++)
        s += tj__dtype_round(c[m * d->n + n], d->c_type);
      sums[e * d->n + n] = s;
    }
    lo = hi;
  }
  /* Rows past the last group are left as they were. */
  for (int64_t m = lo; m < d->m; m++)
    for (int64_t n = 0; n < d->n; n++) {
      c[m * d->n + n] = tj__dtype_load(d->c, d->c_type, (size_t)(m * d->ldc + n));
      if (aux && d->aux && d->epilogue == TJ_EPILOGUE_BIAS_GELU)
        aux[m * d->n + n] =
            tj__dtype_load(d->aux, d->c_type, (size_t)(m * d->ldaux + n));
    }
}

static void oracle_grouped_k(const tj_grouped_gemm_desc *d, double *c)
{
  int64_t lo = 0;
  for (int64_t e = 0; e < d->groups; e++) {
    int64_t hi = d->offs[e];
    for (int64_t m = 0; m < d->m; m++)
      for (int64_t n = 0; n < d->n; n++) {
        size_t ci = (size_t)(e * d->stride_c + m * d->ldc + n);
        double v = d->alpha == 0.0f ? 0.0
                                    : (double)d->alpha *
                                          grouped_product_at(d, d->b, m, n, lo, hi);
        if (d->beta != 0.0f)
          v += (double)d->beta * tj__dtype_load(d->c, d->c_type, ci);
        c[(e * d->m + m) * d->n + n] = v;
      }
    lo = hi;
  }
}

void tj__oracle_grouped_gemm(const tj_grouped_gemm_desc *d, double *c,
                             double *aux, double *sums)
{
  if (d->grouped == TJ_GROUPED_K)
    oracle_grouped_k(d, c);
  else
    oracle_grouped_m(d, c, aux, sums);
}

/* ------------------------------------------------- MoE permutation */

void tj__oracle_moe_route(const int32_t *topk, size_t tokens, int k,
                          int experts, int32_t *counts, int32_t *offsets,
                          int32_t *row_of_slot, int32_t *slot_of_row,
                          int32_t *dropped)
{
  size_t slots = tokens * (size_t)k;
  int32_t start = 0;
  *dropped = 0;
  for (int e = 0; e < experts; e++) {
    counts[e] = 0;
    for (size_t i = 0; i < slots; i++)
      if (topk[i] == e)
        row_of_slot[i] = start + counts[e]++;
    start += counts[e];
    offsets[e] = start;
  }
  for (size_t i = 0; i < slots; i++)
    if (topk[i] < 0 || topk[i] >= experts) {
      row_of_slot[i] = -1;
      ++*dropped;
    }
  for (size_t r = 0; r < slots; r++)
    slot_of_row[r] = -1;
  for (size_t i = 0; i < slots; i++)
    if (row_of_slot[i] >= 0)
      slot_of_row[row_of_slot[i]] = (int32_t)i;
}

static double weight_of(int w_type, const void *w, size_t i)
{
  return w ? tj__dtype_load(w, w_type, i) : 1.0;
}

void tj__oracle_moe_permute(int dtype, const void *x, size_t ldx,
                            const int32_t *row_of_slot, size_t tokens, int k,
                            size_t hidden, int w_type, const void *w,
                            double *xp)
{
  size_t slots = tokens * (size_t)k;
  for (size_t i = 0; i < slots * hidden; i++)
    xp[i] = NAN;
  for (size_t i = 0; i < slots; i++) {
    if (row_of_slot[i] < 0)
      continue;
    size_t t = i / (size_t)k, r = (size_t)row_of_slot[i];
    for (size_t h = 0; h < hidden; h++)
      xp[r * hidden + h] =
          weight_of(w_type, w, i) * tj__dtype_load(x, dtype, t * ldx + h);
  }
}

void tj__oracle_moe_unpermute(int dtype, const void *yp, size_t ldyp,
                              const int32_t *row_of_slot, size_t tokens,
                              int k, size_t hidden, int w_type, const void *w,
                              double *y)
{
  for (size_t t = 0; t < tokens; t++)
    for (size_t h = 0; h < hidden; h++) {
      double sum = 0;
      for (int s = 0; s < k; s++) {
        size_t i = t * (size_t)k + (size_t)s;
        if (row_of_slot[i] >= 0)
          sum += weight_of(w_type, w, i) *
                 tj__dtype_load(yp, dtype, (size_t)row_of_slot[i] * ldyp + h);
      }
      y[t * hidden + h] = sum;
    }
}

void tj__oracle_moe_dw(int dtype, const void *dy, size_t lddy, const void *yp,
                       size_t ldyp, const int32_t *row_of_slot, size_t tokens,
                       int k, size_t hidden, double *dw)
{
  for (size_t i = 0; i < tokens * (size_t)k; i++) {
    size_t t = i / (size_t)k;
    double sum = 0;
    if (row_of_slot[i] >= 0)
      for (size_t h = 0; h < hidden; h++)
        sum += tj__dtype_load(dy, dtype, t * lddy + h) *
               tj__dtype_load(yp, dtype, (size_t)row_of_slot[i] * ldyp + h);
    dw[i] = sum;
  }
}

void tj__error_add_dtype(tj__error_acc *acc, const void *got, int type,
                         const double *want, size_t n, size_t base)
{
  for (size_t i = 0; i < n; i++)
    accumulate(acc, base + i, tj__dtype_load(got, type, i), want[i]);
}
