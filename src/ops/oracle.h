/*
 * oracle.h: CPU reference results for the embedded kernels, in double
 * precision, and the measures used to compare a GPU result with them.
 *
 * Internal (tj__ names, never exported).  Every function is pure: no
 * allocation, no global state, thread-safe.  Half arrays are raw IEEE
 * binary16 bits (uint16_t), as the kernels read and write them.
 */
#ifndef TJ_ORACLE_H
#define TJ_ORACLE_H

#include "tokitai-jit.h"

#include <stddef.h>
#include <stdint.h>

/* The tanh approximation of GELU that the kernels implement, and its
 * derivative with respect to x. */
double tj__gelu(double x);
double tj__gelu_grad(double x);

/* c[i] = a[i] + b[i], wrapping as two's complement (what add_i32 does). */
void tj__oracle_add_i32(const int32_t *a, const int32_t *b, int32_t *c,
                        size_t n);

/* y[i] = gelu(x[i]), from half inputs to double results. */
void tj__oracle_gelu_fwd(const uint16_t *x, double *y, size_t n);

/* grad_in[i] = grad_out[i] * gelu'(x[i]). */
void tj__oracle_gelu_bwd(const uint16_t *grad_out, const uint16_t *x,
                         double *grad_in, size_t n);

/*
 * out = alpha * A * B + beta * C, all row-major: A is M x K with leading
 * dimension lda, B is K x N (ldb), C is M x N (ldc); out is M x N with
 * leading dimension N.  Products and sums in double.  When beta == 0, C is
 * not read (it may be NULL), as the kernel does not read it either.
 */
void tj__oracle_gemm(int M, int N, int K, double alpha, const uint16_t *A,
                     int lda, const uint16_t *B, int ldb, double beta,
                     const uint16_t *C, int ldc, double *out);

/* Element i of a host array of a TJ_DTYPE_* type, as a double. */
double tj__dtype_load(const void *p, int type, size_t i);
/* v rounded to a TJ_DTYPE_* type (through binary32), as a double. */
double tj__dtype_round(double v, int type);
/*
 * tj_gemm's definition (tokitai-jit/ops.h), in double, on host copies:
 * d's pointers are host memory.  c gets the m x n result (dense, before
 * rounding to C's type); aux (when the epilogue writes it) the
 * pre-activation likewise; sums (for the dGELU epilogue) the column sums
 * of c rounded to C's type.  aux and sums may be NULL.
 */
void tj__oracle_gemm_desc(const tj_gemm_desc *d, double *c, double *aux,
                          double *sums);
/*
 * tj_grouped_gemm's definition (tokitai-jit/ops.h), in double, on host
 * copies: d's pointers, offs included, are host memory, and the offsets
 * are valid (non-decreasing, within the grouped total).  c gets what C
 * holds after the call, dense and before rounding to C's type:
 * TJ_GROUPED_M m x n, its rows past the last group as C held them;
 * TJ_GROUPED_K E x m x n.  aux (BIAS_GELU with d->aux) the pre-activation
 * likewise (m x n, rows past the last group as aux held them); sums
 * (DGELU) the E x n per-group column sums of c rounded to C's type.  aux
 * and sums may be NULL.
 */
void tj__oracle_grouped_gemm(const tj_grouped_gemm_desc *d, double *c,
                             double *aux, double *sums);

/*
 * How far a result is from its reference.  Elements whose reference is
 * finite make up max_abs and rel_l2 (sqrt(sum (got-want)^2) /
 * sqrt(sum want^2)); among them, a result that is not finite is counted in
 * nonfinite and left out of both sums, so check nonfinite too (or use
 * tj__error_within).  Elements whose reference is inf or NaN must match it
 * in kind (NaN for NaN, the same infinity); special_mismatch counts those
 * that do not.
 */
typedef struct tj__error_stats {
  size_t count;            /* elements compared */
  double max_abs;          /* largest |got - want| */
  size_t max_abs_index;    /* where it is */
  double rel_l2;           /* 0 when both norms are 0; inf when want is 0 */
  size_t nonfinite;        /* got is inf/NaN where want is finite */
  size_t special_mismatch; /* want is inf/NaN and got is not the same */
} tj__error_stats;

/* Running sums of a comparison made in chunks: zero it, add each chunk
 * (base: the index of its first element, for max_abs_index), finish. */
typedef struct tj__error_acc {
  tj__error_stats s;
  double err_sq, want_sq;
  size_t finite; /* elements in the sums */
} tj__error_acc;

void tj__error_add_f16(tj__error_acc *acc, const uint16_t *got,
                       const double *want, size_t n, size_t base);
/* One element got (any type, as a double) against want, index i. */
void tj__error_add_double(tj__error_acc *acc, double got, double want,
                          size_t i);
void tj__error_add_i32(tj__error_acc *acc, const int32_t *got,
                       const int32_t *want, size_t n, size_t base);
/* The stats, rel_l2's denominator held at least at rel_floor per element
 * in the sums (0: as defined above). */
void tj__error_finish(const tj__error_acc *acc, double rel_floor,
                      tj__error_stats *out);

/* One whole array: zero, add, finish with no floor. */
void tj__compare_f16(const uint16_t *got, const double *want, size_t n,
                     tj__error_stats *out);
void tj__compare_i32(const int32_t *got, const int32_t *want, size_t n,
                     tj__error_stats *out);

/* 1 when nothing is non-finite or mismatched and both errors are within
 * their tolerances, else 0. */
int tj__error_within(const tj__error_stats *s, double max_abs_tol,
                     double rel_l2_tol);

/* ------------------------------------------------- MoE permutation
 * The definitions of <tokitai-jit/ops.h>'s tj_moe_* calls, on host
 * arrays; activations of type dtype with row strides, weights of w_type.
 * The map (row_of_slot) is the oracle's own or the kernel's. */

/* tj_moe_route: counts and offsets (E), row_of_slot and slot_of_row
 * (T * k), *dropped; indices outside [0, E) are dropped. */
void tj__oracle_moe_route(const int32_t *topk, size_t tokens, int k,
                          int experts, int32_t *counts, int32_t *offsets,
                          int32_t *row_of_slot, int32_t *slot_of_row,
                          int32_t *dropped);
/* tj_moe_permute: xp (T * k x hidden, dense) = the x rows each row gets,
 * NAN in the rows no slot maps to; w scales when not NULL. */
void tj__oracle_moe_permute(int dtype, const void *x, size_t ldx,
                            const int32_t *row_of_slot, size_t tokens, int k,
                            size_t hidden, int w_type, const void *w,
                            double *xp);
/* tj_moe_unpermute (w NULL: tj_moe_permute_bwd): y (T x hidden, dense). */
void tj__oracle_moe_unpermute(int dtype, const void *yp, size_t ldyp,
                              const int32_t *row_of_slot, size_t tokens,
                              int k, size_t hidden, int w_type, const void *w,
                              double *y);
/* tj_moe_unpermute_bwd's dw (T x k); dyp is tj__oracle_moe_permute of dy
 * with w. */
void tj__oracle_moe_dw(int dtype, const void *dy, size_t lddy, const void *yp,
                       size_t ldyp, const int32_t *row_of_slot, size_t tokens,
                       int k, size_t hidden, double *dw);
/* tj__error_add_f16 for arrays of any TJ_DTYPE_*. */
void tj__error_add_dtype(tj__error_acc *acc, const void *got, int type,
                         const double *want, size_t n, size_t base);

#endif /* TJ_ORACLE_H */
