/*
 * tokitai-jit/ops.h: the embedded kernels as C calls, their verifier
 * and reports, and fp16 conversion on the host.
 * Part of the public interface; <tokitai-jit.h> includes it, and it may
 * also be included on its own.  Conventions as in <tokitai-jit.h>.
 */
#ifndef TOKITAI_JIT_OPS_H
#define TOKITAI_JIT_OPS_H

#include <tokitai-jit.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * IEEE 754 binary16 on the host, as the fp16 kernels store it: round to
 * nearest even, subnormals, signed zeros, infinities; NaN stays NaN (quiet,
 * with as much of its payload as fits).  Pure functions, thread-safe.
 */
TJ_EXPORT uint16_t tj_f32_to_f16(float f);
TJ_EXPORT float tj_f16_to_f32(uint16_t h);
/* bfloat16 (the top 16 bits of a binary32) likewise: to nearest, ties to
 * even, NaN stays NaN (quiet), infinities and signed zeros kept. */
TJ_EXPORT uint16_t tj_f32_to_bf16(float f);
TJ_EXPORT float tj_bf16_to_f32(uint16_t h);

/* ================================================================ kernels
 * The embedded kernels as C calls.  Device-pointer calls queue the launch
 * on stream (NULL: the default stream) and return; fp16 data is IEEE
 * binary16 bits in uint16_t.  Host-buffer calls (_host) allocate device
 * memory, copy in, launch, copy out, free, and return when the result is in
 * the caller's buffer; each input's length is passed so that a mismatch is
 * caught ("grad_out length 3 does not match n=4").  n = 0, NULL
 * pointers, and sizes whose byte count overflows are TJ_EINVAL with a
 * message naming the argument.  Thread-safe as tj_launch is.
 * To launch one yourself (tj_kernel_get, then tj_launch), follow its raw
 * signature and launch contract in <tokitai-jit/kernels.h>, generated from
 * the kernel sources: the kernels take n as unsigned long long.
 */
TJ_EXPORT int tj_add_i32(tj_runtime *rt, void *stream, const int32_t *a,
                         const int32_t *b, int32_t *c, size_t n);
TJ_EXPORT int tj_gelu_fwd_f16(tj_runtime *rt, void *stream, const uint16_t *x,
                              uint16_t *y, size_t n);
TJ_EXPORT int tj_gelu_bwd_f16(tj_runtime *rt, void *stream,
                              const uint16_t *grad_out, const uint16_t *x,
                              uint16_t *grad_in, size_t n);
TJ_EXPORT int tj_gelu_fwd_bwd_f16(tj_runtime *rt, void *stream,
                                  const uint16_t *x, const uint16_t *grad_out,
                                  uint16_t *y, uint16_t *grad_in, size_t n);
/* ============================================================ the GEMM family
 * One call for every GEMM a training step runs: element types, layouts
 * and an epilogue chosen per call, each combination compiled the first
 * time it is used into a code object of its own (cached like the rest).
 */

/* Element types. */
#define TJ_DTYPE_F16 1  /* IEEE binary16 */
#define TJ_DTYPE_BF16 2 /* bfloat16: the top half of a binary32 */
#define TJ_DTYPE_F32 3  /* binary32 (C, bias and aux only) */

/* Epilogues, with s = alpha * op(A) op(B) + beta * C (C not read when
 * beta == 0), row m and column n of C:
 *   TJ_EPILOGUE_NONE       C = s
 *   TJ_EPILOGUE_BIAS       C = s + bias[n]
 *   TJ_EPILOGUE_BIAS_GELU  p = s + bias[n]; aux[m][n] = p when aux is not
 *                          NULL (the pre-activation, for the backward);
 *                          C = gelu(p), the tanh GELU of tj_gelu_fwd_f16:
 *                          gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x +
 *                          0.044715 x^3))); on NVIDIA with C f16 or
 *                          bf16, tanh is the GPU's approximation
 *                          (relative error below 2^-10, under C's
 *                          rounding)
 *   TJ_EPILOGUE_DGELU      C = s * gelu'(aux[m][n]), the backward of the
 *                          above; when bias_grad is not NULL,
 *                          bias_grad[n] = the sum over m of C[m][n] as
 *                          stored, in fp32 (the bias's gradient), the
 *                          same bits on every run. */
#define TJ_EPILOGUE_NONE 0
#define TJ_EPILOGUE_BIAS 1
#define TJ_EPILOGUE_BIAS_GELU 2
#define TJ_EPILOGUE_DGELU 3

/*
 * A GEMM: C = epilogue(alpha * op(A) op(B) + beta * C), every matrix
 * row-major.  op(A) is M x K: A stored M x K (A[m*lda + k]), or with
 * trans_a its transpose, stored K x M (A[k*lda + m]); op(B) is K x N: B
 * stored K x N (B[k*ldb + n]), or with trans_b stored N x K
 * (B[n*ldb + k]).  So the forward pass Y = X W is trans 0, 0; the input
 * gradient dX = dY W^T is trans_b; the weight gradient dW = X^T dY is
 * trans_a.  Zero-initialise, set size to sizeof(tj_gemm_desc) (or leave it
 * 0), then the fields:
 *   a_type, b_type  TJ_DTYPE_F16 or TJ_DTYPE_BF16
 *   c_type          TJ_DTYPE_F16, TJ_DTYPE_BF16 or TJ_DTYPE_F32; bias and
 *                   aux have C's type
 *   m, n, k         from 1; lda at least op(A)'s stored row length (k, or
 *                   m with trans_a), ldb likewise (n, or k with trans_b),
 *                   ldc and ldaux at least n
 *   alpha, beta     fp32; the products are summed in fp32; alpha == 0
 *                   reads neither A nor B
 *   epilogue        a TJ_EPILOGUE_*; bias (n elements) for BIAS and
 *                   BIAS_GELU; aux (m x n, ldaux) optional for BIAS_GELU,
 *                   required for DGELU; bias_grad (n floats) only for
 *                   DGELU, optional
 * Pointers are device memory, each naturally aligned for its type.  C
 * must not overlap A, B, bias or aux; aux and bias_grad overlap nothing.
 */
typedef struct tj_gemm_desc {
  size_t size;
  int a_type, b_type, c_type;
  int trans_a, trans_b;
  int64_t m, n, k;
  float alpha, beta;
  const void *a;
  int64_t lda;
  const void *b;
  int64_t ldb;
  void *c;
  int64_t ldc;
  int epilogue;
  const void *bias;
  void *aux;
  int64_t ldaux;
  float *bias_grad;
} tj_gemm_desc;

/*
 * Queue the GEMM d describes on stream (NULL: the default stream) and
 * return.  On an sm_90 device, A and B of one type (and
 * alpha != 0) run the Hopper kernel (kernels/gemm_sm90a.hip: wgmma and
 * TMA, the epilogue fused), in the configuration its rule picks for the
 * shape; an A or B whose rows are not a multiple of 8 elements apart (or
 * not 16-byte aligned) is first copied, on stream, into memory from the
 * runtime's pool where they are (tj_gemm_f16 runs the same
 * configurations).  Elsewhere f16 A, B and C without transposes or
 * epilogue run tj_gemm_f16's kernels, and every other call with A and B
 * of one type and alpha != 0 the tensor-core path (kernels/gemm_f16.hip,
 * tj_gemm_f16's kernel: mma.sync on NVIDIA sm_80 and later, MFMA or WMMA
 * on AMD, fp32 tiles elsewhere); the rest (mixed A and B types, alpha ==
 * 0) runs the portable kernel (kernels/gemm_portable.hip, fp32 FMAs).
 * An operand of one line whose elements lie one after another runs as
 * the layout along K: A with m == 1 stored k x 1 (trans_a, lda 1) as A
 * stored 1 x k, B with n == 1 stored k x 1 (no trans_b, ldb 1) as B
 * stored 1 x k (the same bytes), and its configuration is named so.
 * Each configuration is compiled the first time it is used.  On the
 * Hopper path a tuning decision in the cache for the call's op (its
 * name up to the path: "gemm_bf16_bf16_bf16_nt_none") and shape class
 * takes the rule's place, as for tj_gemm_f16.  The same call gives the
 * same bits on every run, except with background builds
 * (tj_options.background_builds, off by default), where the calls made
 * while a Hopper configuration compiles run the portable kernel, whose
 * bits may differ from the later calls' (as for tj_gemm_f16).
 * Errors: TJ_EINVAL (a NULL or malformed field, with the field named in
 * tj_errmsg: a type, a transpose flag or an epilogue it does not know, a
 * size below 1, a leading dimension below its row, a pointer missing,
 * misaligned or overlapping another, an optional pointer the epilogue
 * does not take), TJ_ERANGE (sizes past
 * what the kernels index), TJ_ENODEVICE (a compile-only runtime),
 * TJ_ECOMPILE, TJ_EDEVICE, TJ_ENOMEM.  Thread-safe as tj_launch is.
 */
TJ_EXPORT int tj_gemm(tj_runtime *rt, void *stream, const tj_gemm_desc *d);
/*
 * The entry tj_gemm would launch for d (the product's, not the bias
 * gradient's): a name that says its configuration, such as
 * "gemm_bf16_bf16_f32_nt_biasgelu_tc" or
 * "gemm_bf16_bf16_bf16_nt_none_sm90a_128x256_mc2", owned by rt.  For the
 * Hopper, tensor-core and portable kernels it compiles (or loads) that
 * configuration,
 * launching
 * nothing, so it answers on a compile-only runtime too and warms the
 * cache for it.  NULL, with tj_errmsg, for a descriptor tj_gemm would
 * refuse or a compile that failed.  Pointers are checked as tj_gemm
 * checks them but never read.  Thread-safe.
 */
TJ_EXPORT const char *tj_gemm_kernel(tj_runtime *rt, const tj_gemm_desc *d);
/*
 * tj_gemm on host memory: d's pointers are host buffers, each holding its
 * matrix as its leading dimension lays it out.  The call allocates device
 * memory, copies in what is read, runs tj_gemm on the default stream,
 * waits, copies out what is written (C, aux with BIAS_GELU, bias_grad) and
 * frees; the caller's buffers are written only when everything succeeded,
 * and the padding past a row (a leading dimension past n) comes back as
 * it was.  Errors as tj_gemm.  Thread-safe as tj_launch is.
 */
TJ_EXPORT int tj_gemm_host(tj_runtime *rt, const tj_gemm_desc *d);

/* ===================================================== the grouped GEMM
 * One GEMM per group (an expert of a mixture-of-experts layer) in one
 * launch, the group boundaries given as offsets in device memory, as
 * torch._grouped_mm takes them: offs[e] is the END of group e (int32,
 * non-decreasing), group e spans [offs[e-1], offs[e]) with offs[-1] = 0.
 * The offsets are never read on the host: the call neither waits nor
 * allocates, so it can be captured into a graph and replayed with other
 * routing.  Empty groups and one group holding nearly every row are
 * normal.
 */

/* Which dimension the offsets cut (tj_grouped_gemm_desc.grouped). */
#define TJ_GROUPED_M 1 /* rows of A and C: forward, input gradient */
#define TJ_GROUPED_K 2 /* the reduction: weight gradient */

/*
 * A grouped GEMM, every matrix row-major, op() as in tj_gemm_desc (A
 * stored M x K, or with trans_a K x M; B stored K x N, or with trans_b
 * N x K).  E = groups, and for each group e with rows r in
 * [offs[e-1], offs[e]):
 *
 * TJ_GROUPED_M (torch._grouped_mm of a 2-D A and a 3-D B): m is the total
 *   of rows, op(A) is m x k, C is m x n, B holds E matrices, B[e] at
 *   b + e * stride_b (elements), op(B[e]) k x n.  For r in group e:
 *     C[r][:] = epilogue_e(alpha * op(A)[r][:] op(B[e]) + beta * C[r][:])
 *   with the epilogues of tj_gemm, bias being E x n (bias[e*n + j] for
 *   group e), aux m x n (ldaux), and bias_grad E x n floats: bias_grad[e][j]
 *   = the sum over r in group e of C[r][j] as stored (0 for an empty
 *   group).  Rows at or past offs[E-1] are neither read nor written.
 *   The forward Y = X W[e] is trans 0, 0; the input gradient
 *   dX = dY W[e]^T is trans_b.
 * TJ_GROUPED_K (torch._grouped_mm of two 2-D operands): k is the total of
 *   the reduction, op(A) is m x k, op(B) k x n, C holds E matrices,
 *   C[e] at c + e * stride_c (elements), each m x n (ldc):
 *     C[e] = alpha * op(A)[:, group e] op(B)[group e, :] + beta * C[e]
 *   (alpha * 0 for an empty group).  The weight gradient
 *   dW[e] = X[rows of e]^T dY[rows of e] is trans_a (X stored k x m).
 *   Epilogue TJ_EPILOGUE_NONE only.
 *
 * Zero-initialise, set size to sizeof(tj_grouped_gemm_desc) (or leave it
 * 0), then the fields:
 *   a_type, b_type, c_type, trans_a, trans_b, alpha, beta, epilogue
 *                   as in tj_gemm_desc
 *   grouped         TJ_GROUPED_M or TJ_GROUPED_K
 *   groups          E, 1 to 65535
 *   offs            E int32 end offsets, device memory, 4-byte aligned;
 *                   non-decreasing, the last at most m (TJ_GROUPED_M) or
 *                   k (TJ_GROUPED_K).  Offsets that break this are clamped
 *                   to [0, that total]; the kernel then reads and writes
 *                   only inside the operands, with results unspecified.
 *   m, n, k         from 1; the grouped total (m or k) at most INT32_MAX
 *   lda, ldb, ldc, ldaux   at least their stored rows, as in tj_gemm_desc
 *   stride_b        TJ_GROUPED_M: at least B[e]'s rows times ldb (k * ldb,
 *                   or n * ldb with trans_b); TJ_GROUPED_K: 0
 *   stride_c        TJ_GROUPED_K: at least m * ldc; TJ_GROUPED_M: 0
 * Pointers are device memory, each naturally aligned.  C must not overlap
 * A, B, offs, bias or aux; aux and bias_grad overlap nothing.
 */
typedef struct tj_grouped_gemm_desc {
  size_t size;
  int a_type, b_type, c_type;
  int trans_a, trans_b;
  int grouped;
  int64_t groups;
  const int32_t *offs;
  int64_t m, n, k;
  float alpha, beta;
  const void *a;
  int64_t lda;
  const void *b;
  int64_t ldb, stride_b;
  void *c;
  int64_t ldc, stride_c;
  int epilogue;
  const void *bias;
  void *aux;
  int64_t ldaux;
  float *bias_grad;
} tj_grouped_gemm_desc;

/*
 * Queue the grouped GEMM d describes on stream (NULL: the default stream)
 * and return, without reading offs on the host and without allocating.
 * On sm_90 the Hopper grouped kernel (kernels/gemm_grouped_sm90a.hip:
 * wgmma and TMA, a persistent grid over the groups' tiles) runs the
 * M-grouped calls and the weight gradient's K-grouped layout (A stored
 * K x M, B K x N) where A and B are 16-byte aligned with rows (and B's
 * matrices) a multiple of 8 elements apart, A and B of one type and
 * alpha is not 0; every other combination, and every other GPU, runs the
 * portable grouped kernel (kernels/gemm_grouped_portable.hip, fp32 FMAs).
 * Each is compiled the first time it is used; the same call gives the
 * same bits on every run.
 * Errors: TJ_EINVAL (a NULL or malformed field, named in tj_errmsg),
 * TJ_ERANGE (sizes past what the kernel indexes or int32 offsets reach),
 * TJ_ENODEVICE (a compile-only runtime), TJ_ECOMPILE, TJ_EDEVICE.
 * Thread-safe as tj_launch is.
 */
TJ_EXPORT int tj_grouped_gemm(tj_runtime *rt, void *stream,
                              const tj_grouped_gemm_desc *d);
/*
 * The entry tj_grouped_gemm would launch for d, a name that says its
 * configuration ("gemm_grouped_m_bf16_bf16_bf16_nn_biasgelu_portable",
 * "gemm_grouped_m_bf16_bf16_bf16_nn_none_sm90a_128x128"),
 * owned by rt; it compiles (or loads) the configuration and launches
 * nothing, so it answers on a compile-only runtime too.  NULL, with
 * tj_errmsg, for a descriptor tj_grouped_gemm refuses or a failed
 * compile.  Thread-safe.
 */
TJ_EXPORT const char *tj_grouped_gemm_kernel(tj_runtime *rt,
                                             const tj_grouped_gemm_desc *d);
/*
 * tj_grouped_gemm on host memory: d's pointers, offs included, are host
 * buffers.  Here the offsets are read on the host and checked first
 * (non-decreasing, from 0, the last at most the grouped total: TJ_EINVAL
 * naming the first one out of order).  The call copies everything in,
 * runs tj_grouped_gemm on the default stream, waits, copies out C, aux
 * (BIAS_GELU) and bias_grad, and frees; the caller's buffers change only
 * when everything succeeded, and what the call does not write (padding,
 * rows past the last group) comes back as it was.  Errors as
 * tj_grouped_gemm.  Thread-safe as tj_launch is.
 */
TJ_EXPORT int tj_grouped_gemm_host(tj_runtime *rt,
                                   const tj_grouped_gemm_desc *d);

/* C = alpha * A * B + beta * C; row-major M x K, K x N, M x N with leading
 * dimensions; fp32 accumulation.  beta == 0: C is not read.
 *
 * Paths.  The call picks a kernel for the shape, the operands' alignment
 * and the device (tj_gemm_f16_kernel says which):
 *   - on sm_90 devices, M <= 16 with A and B 16-byte aligned and lda and
 *     ldb multiples of 8: the Hopper skinny kernel (kernels/gemm_sm90a.hip,
 *     as tj_gemm runs it: B through TMA, K split across a thread-block
 *     cluster whose blocks add their sums in a fixed order);
 *   - elsewhere on NVIDIA sm_80 and later, M <= 16: a tensor-core kernel
 *     that streams B (kernels/gemm_skinny_f16_tc.hip), for any alignment;
 *     where its strips of C are too few to fill the GPU it splits K, with
 *     fp32 partials from the runtime's pool, ordered on stream;
 *   - elsewhere, M <= 8: a kernel that streams B with fp32 FMAs;
 *   - larger M on sm_90 devices, A and B aligned as above: the Hopper
 *     tiles (kernels/gemm_sm90a.hip, wgmma and TMA), which may split K
 *     where their tiles are too few to fill the GPU (tj_gemm_f16_split),
 *     with partials from the pool; else kernels/gemm_f16.hip.
 * Every path gives the same bits on every run of the same call; with
 * background builds (tj_options.background_builds, off by default) the
 * Hopper paths' calls run the portable kernel while their entry
 * compiles, and those bits may differ from the later calls'.  The
 * skinny kernels read neither A nor B when alpha == 0; the tiled ones
 * compute A * B even then, so inf or NaN in them gives NaN.
 *
 * Early start.  On an sm_90 device the M <= 16 Hopper kernel is launched
 * with programmatic dependent launch: its blocks may start while the
 * kernel ahead of it on stream ends, and it touches A, B and C only once
 * that kernel is done, so the result is what a plain launch gives.  It
 * lets the kernel after it start early too: one of yours launched after
 * it with the same attribute must wait (griddepcontrol.wait,
 * cudaGridDependencySynchronize) before it reads C, as after any kernel
 * that allows it.
 *
 * Graphs.  The calls may be captured into a CUDA graph on a stream of
 * yours (the strict global mode included), before or as the runtime's
 * first calls; the early start is recorded as a programmatic edge.  The
 * GPU suite checks that each replay gives the bits the same calls give
 * on a stream.
 *
 * Tuning.  The Hopper kernels have several configurations (tile width,
 * split factor; for M <= 16 strip width and cluster size); which one runs
 * is the tuning decision for the call's shape class in the cache (see
 * tj_tuning in <tokitai-jit/cache.h>, and tj_gemm_f16_tune below), else a
 * heuristic.  A call never times anything itself. */
TJ_EXPORT int tj_gemm_f16(tj_runtime *rt, void *stream, int M, int N, int K,
                          float alpha, const uint16_t *A, int lda,
                          const uint16_t *B, int ldb, float beta, uint16_t *C,
                          int ldc);
/* The entry tj_gemm_f16 would launch for these arguments, chosen as it
 * chooses, with the tuning decision in the cache (it never times
 * anything): an embedded kernel's (a static string, e.g. "gemm_f16"), or
 * on sm_90 the Hopper configuration's, named from its choices as
 * tj_gemm_kernel names them ("gemm_f16_f16_f16_nn_none_sm90a_128x256_mc2",
 * owned by rt); NULL, with tj_errmsg, for arguments it would refuse.
 * Compiles and launches nothing, so it answers on a compile-only runtime
 * too. */
TJ_EXPORT const char *tj_gemm_f16_kernel(tj_runtime *rt, int M, int N, int K,
                                         const uint16_t *A, int lda,
                                         const uint16_t *B, int ldb,
                                         const uint16_t *C, int ldc);
/* Compile (or load from the caches) the i-th code object of those that
 * tj_gemm_f16 chooses among on rt's arch, from 0, so that a cache holds
 * them before the first call (tokitai-jit --warm): on sm_90, one of each
 * kind and tile of the Hopper configurations (f16, NN, no epilogue);
 * elsewhere none (tj_gemm_f16's other kernels are embedded ones,
 * tj_kernel_get's).  *out: its product's kernel, owned by rt.
 * TJ_ENOENT, with tj_errmsg, past the last; TJ_EINVAL for a NULL
 * argument; TJ_ECOMPILE.  Thread-safe as tj_kernel_get is. */
TJ_EXPORT int tj_gemm_f16_configuration(tj_runtime *rt, size_t i,
                                        tj_kernel **out /* OUT */);
/* How many code objects tj_gemm_f16_configuration lists on rt's arch (0
 * where it lists none, or for a NULL rt); compiles nothing, so that a
 * program can hand them to several processes or threads.  Thread-safe. */
TJ_EXPORT size_t tj_gemm_f16_configurations(tj_runtime *rt);
/* How many parts tj_gemm_f16 would cut K into for these arguments (split-K
 * on Hopper, and on the skinny tensor-core path, where the tiles of C are
 * too few to fill the GPU, or where the shape class's tuning decision says
 * so; on the Hopper skinny kernel, the blocks of its cluster, which need
 * no memory): 1 for no split; 0, with tj_errmsg, for arguments it would
 * refuse.
 * Launches
 * nothing.  A call may still run unsplit where the device cannot give it
 * the partials' memory. */
TJ_EXPORT int tj_gemm_f16_split(tj_runtime *rt, int M, int N, int K,
                                const uint16_t *A, int lda, const uint16_t *B,
                                int ldb, const uint16_t *C, int ldc);

TJ_EXPORT int tj_add_i32_host(tj_runtime *rt, const int32_t *a, size_t a_len,
                              const int32_t *b, size_t b_len, int32_t *c,
                              size_t n);
TJ_EXPORT int tj_gelu_fwd_f16_host(tj_runtime *rt, const uint16_t *x,
                                   size_t x_len, uint16_t *y, size_t n);
TJ_EXPORT int tj_gelu_bwd_f16_host(tj_runtime *rt, const uint16_t *grad_out,
                                   size_t grad_out_len, const uint16_t *x,
                                   size_t x_len, uint16_t *grad_in, size_t n);
TJ_EXPORT int tj_gelu_fwd_bwd_f16_host(tj_runtime *rt, const uint16_t *x,
                                       size_t x_len, const uint16_t *grad_out,
                                       size_t grad_out_len, uint16_t *y,
                                       uint16_t *grad_in, size_t n);
/* A, B, C dense (lda = K, ldb = N, ldc = N); C is read when beta != 0. */
/*
 * Tune tj_gemm_f16 ahead of time for the shape class of M x N x K (dense
 * rows, C 4-byte aligned): time every configuration that applies (about
 * 0.2 s each), on random inputs the call allocates, record the winner in
 * the runtime's cache (replacing any decision for the class) and use it
 * in this runtime.  A configuration whose output differs from the
 * heuristic's choice's by more than rounding is set aside untimed (a
 * warning in tj_errmsg), so a decision never changes what the class
 * computes.  fn (may be NULL) is called once with the decision and every
 * time measured, fastest first, then those set aside (runs 0).  Waits for
 * the device.  Errors: TJ_EINVAL (a size below 1 or over 2^30; a shape or
 * arch that does not run the Hopper kernel, which has nothing to tune),
 * TJ_ENODEVICE (a compile-only runtime), TJ_ENOMEM, TJ_EDEVICE,
 * TJ_ECOMPILE.  A decision that could not be stored is a warning in
 * tj_errmsg.  Thread-safe as tj_launch is.
 */
TJ_EXPORT int tj_gemm_f16_tune(tj_runtime *rt, int M, int N, int K,
                               tj_tuning_visit fn, void *ctx);
/*
 * tj_gemm_f16_tune for one op of the family: d's types, layouts and
 * epilogue (the op "gemm_bf16_bf16_bf16_nt_biasgelu"; f16 NN without an
 * epilogue is "gemm_f16") and its m, n, k; the rest of d is ignored (the
 * tune makes its own A, B, bias and aux, dense, and a C with ldc = n).
 * The decision is stored under the op and shape class, and tj_gemm's
 * Hopper path plans with it.  Errors as tj_gemm_f16_tune's, and
 * TJ_EINVAL for a NULL d, a kind it does not name, or A and B of two
 * types (the portable kernel's, with nothing to tune).
 */
TJ_EXPORT int tj_gemm_tune(tj_runtime *rt, const tj_gemm_desc *d,
                           tj_tuning_visit fn, void *ctx);

TJ_EXPORT int tj_gemm_f16_host(tj_runtime *rt, int M, int N, int K,
                               float alpha, const uint16_t *A,
                               const uint16_t *B, float beta, uint16_t *C);

/* ================================================================ verify
 * Run an embedded kernel on seeded random inputs, compare every element
 * with the CPU oracle in double precision, and report, as the pilots did.
 *
 * tj_report grows like the other structs the library fills (into its
 * reserved space; see "Structs that grow" in <tokitai-jit.h>).  Its
 * numbers and identifiers are stable; the
 * prose in evidence and non_claims, and the wording of device and
 * compiler, are for people and change between releases: read the numbers,
 * or the keys of tj_report_json.  Strings that do not fit are truncated.
 */
typedef struct tj_report {
  char kernel[64];
  uint64_t n;               /* elements; for gemm_f16, M*N */
  int m, n_cols, k;         /* gemm_f16 shape; 0 otherwise */
  uint64_t seed;
  uint64_t compared;        /* outputs compared with the oracle */
  double max_abs_error;
  double rel_l2_error;
  double max_abs_tolerance; /* the limits this kernel is held to */
  double rel_l2_tolerance;
  int within_tolerance;     /* 1 when every limit held and nothing is NaN */
  double kernel_ms;         /* median of the timed launches, from events */
  double bytes_moved;       /* fewest bytes the kernel must move */
  double gb_per_s;
  double tflop_per_s;       /* gemm_f16 only */
  char source_fingerprint[33]; /* XXH3-128 of the kernel source */
  char code_key[33];           /* its cache key */
  char compiler[160];
  char device[256];
  char arch[256];
  char evidence[1024];      /* what this run showed */
  char non_claims[1024];    /* what it did not show */
  /* The entries that ran, "+" between them (a split-K pair): for the GEMM
   * entries, the one tj_gemm_f16 took for the shape, or on a device that
   * runs it the named Hopper entry itself; else kernel.  When kernel is
   * not among them, the report says nothing about kernel's own code. */
  char ran[64];
  /* tj_verify_gemm: the first call, on the host's clock from the call to
   * its completion, the configuration's compile or cache load included;
   * NaN where not measured (tj_verify). */
  double first_call_ms;
  uint64_t reserved[23];    /* zero; room for fields to come */
} tj_report;

/*
 * n: elements (for gemm_f16, the size of a square M = N = K problem).
 * TJ_OK when the run completed and every output agreed with the oracle;
 * TJ_EVERIFY when it completed and some did not (within_tolerance 0; which,
 * and by how much, in tj_errmsg).  The report is written in full either
 * way.  Other errors (TJ_EINVAL, TJ_ENOENT, TJ_ERANGE, TJ_ENODEVICE,
 * TJ_EDEVICE, TJ_ECOMPILE, TJ_ENOMEM) write nothing.
 * Thread-safe as tj_launch is.
 */
TJ_EXPORT int tj_verify(tj_runtime *rt, const char *kernel, uint64_t n,
                        uint64_t seed, tj_report *report /* OUT */);
/* The report as a markdown section or a JSON object; malloc'd, the caller
 * frees.  NULL when r is NULL or out of memory. */
TJ_EXPORT char *tj_report_markdown(const tj_report *r);
TJ_EXPORT char *tj_report_json(const tj_report *r);

/* The embedded kernels: count, and the entry name of the i-th (NULL when i
 * is out of range).  Static storage, thread-safe. */
TJ_EXPORT size_t tj_embedded_count(void);
TJ_EXPORT const char *tj_embedded_name(size_t i);

/* What tj_embedded_flags says of an embedded kernel; 0: a kernel to call
 * (through its C call above, or tj_kernel_get and tj_launch). */
#define TJ_EMBEDDED_CONFIGURATION 0x1u /* one configuration of a call that
                                        * chooses among several (the tile
                                        * shapes and split-K steps of
                                        * tj_gemm_f16): call the call;
                                        * tj_kernel_get still gets it, to
                                        * precompile it into a cache */
/* The TJ_EMBEDDED_ flags of the i-th embedded kernel (0 when i is out of
 * range).  Pure, thread-safe. */
TJ_EXPORT unsigned tj_embedded_flags(size_t i);

/* ============================================================ MoE permutation
 * The token permutation around a mixture-of-experts layer's grouped GEMM
 * (kernels/moe_permute.hip).  Each of T tokens is routed to k of E
 * experts: slot (t, s), flat index i = t * k + s, holds expert topk[i].
 * The permuted matrix has one row per slot, the rows of each expert
 * contiguous, expert 0 first; within an expert, rows follow i (token,
 * then slot).  A training step's forward is tj_moe_route, then
 * tj_moe_permute (X to Xp), the grouped GEMMs on Xp with the offsets,
 * then tj_moe_unpermute (Yp to Y); its backward is tj_moe_unpermute_bwd
 * (dY to dYp and dw), the grouped GEMMs' backward, then
 * tj_moe_permute_bwd (dXp to dX).
 *
 * All calls take device pointers, queue their launches on stream (NULL:
 * the default stream) and return: nothing is allocated and nothing is
 * read back, so no call waits for the device, and a sequence of them can
 * be captured into a CUDA graph and replayed with other routings.
 * Activations are TJ_DTYPE_F16 or TJ_DTYPE_BF16 (dtype), row-major with
 * a row stride in elements (ld, at least hidden); routing weights are
 * TJ_DTYPE_F32 or dtype (w_type).  Sums are fp32, in a fixed order (a
 * token's k terms in slot order, a dot product in a fixed tree), with no
 * float atomics: the same call gives the same bits on every run.  Rows
 * move 16 bytes at a time when the row pointers are 16-byte aligned and
 * the strides and hidden multiples of 8; any other layout is correct,
 * moved element by element.
 *
 * Errors: TJ_EINVAL (a NULL, a size below 1, k or E out of range, a
 * stride below hidden, a type it does not take, a misaligned pointer, an
 * output that overlaps another array, a workspace too small, each named
 * in tj_errmsg), TJ_ERANGE (T * k over INT32_MAX, or an array's bytes
 * over size_t), TJ_ENODEVICE (a compile-only runtime), TJ_ECOMPILE,
 * TJ_EDEVICE.  Thread-safe as tj_launch is.
 */
#define TJ_MOE_MAX_EXPERTS 1024 /* E */
#define TJ_MOE_MAX_K 16         /* slots per token */

/* The routing's outputs, device arrays of int32 the caller owns:
 *   counts       E: the rows of each expert
 *   offsets      E: offsets[e] = counts[0] + ... + counts[e], the end of
 *                expert e's rows (torch._grouped_mm's offs)
 *   row_of_slot  T * k: the row of slot i, or -1 for a dropped slot
 *   slot_of_row  T * k: the slot of row r, t * k + s; -1 for the rows
 *                past offsets[E - 1] (as many as were dropped)
 *   dropped      1: how many slots were dropped
 * An expert index outside [0, E) cannot be reported by the call itself
 * (it never reads the device): its slot is dropped, so that it gets no
 * row, adds nothing to the unpermuted sum, gets no gradient and a dw of
 * 0, and dropped counts it.  Read dropped after the stream's work is done
 * to see whether a routing was malformed. */
typedef struct tj_moe_routing {
  int32_t *counts;
  int32_t *offsets;
  int32_t *row_of_slot;
  int32_t *slot_of_row;
  int32_t *dropped;
} tj_moe_routing;

/* The device workspace tj_moe_route needs for T tokens, k slots and E
 * experts: *bytes, (ceil(T * k / 1024)) * (E + 1) * 4.  Pure but for
 * tj_errmsg; answers on a compile-only runtime. */
TJ_EXPORT int tj_moe_route_workspace(tj_runtime *rt, int64_t tokens, int k,
                                     int experts, size_t *bytes /* OUT */);
/* Fill out (above) from topk, T x k int32 expert indices in device
 * memory, in three launches.  workspace: at least workspace_bytes >= what
 * tj_moe_route_workspace gives, 4-byte aligned, owned by the caller, free
 * to reuse once the stream has run the call; its contents on entry do not
 * matter.  No output may overlap another array. */
TJ_EXPORT int tj_moe_route(tj_runtime *rt, void *stream, const int32_t *topk,
                           int64_t tokens, int k, int experts,
                           const tj_moe_routing *out, void *workspace,
                           size_t workspace_bytes);
/* Xp[row_of_slot[t * k + s]] = X[t] for every slot with a row: X is
 * tokens x hidden (ldx), Xp has T * k rows (ldxp); rows no slot maps to
 * are not written.  The bits are copied unchanged. */
TJ_EXPORT int tj_moe_permute(tj_runtime *rt, void *stream, int dtype,
                             const void *x, int64_t ldx,
                             const int32_t *row_of_slot, int64_t tokens,
                             int k, int64_t hidden, void *xp, int64_t ldxp);
/* Y[t] = sum over s = 0 .. k-1 of w[t * k + s] * Yp[row_of_slot[t * k +
 * s]], dropped slots left out, in fp32, rounded once to dtype.  w (T x k
 * of w_type) is required. */
TJ_EXPORT int tj_moe_unpermute(tj_runtime *rt, void *stream, int dtype,
                               const void *yp, int64_t ldyp,
                               const int32_t *row_of_slot, int64_t tokens,
                               int k, int64_t hidden, int w_type,
                               const void *w, void *y, int64_t ldy);
/* The backward of tj_moe_permute: dX[t] = sum over s of dXp[row_of_slot[t
 * * k + s]], as tj_moe_unpermute with every weight 1. */
TJ_EXPORT int tj_moe_permute_bwd(tj_runtime *rt, void *stream, int dtype,
                                 const void *dxp, int64_t lddxp,
                                 const int32_t *row_of_slot, int64_t tokens,
                                 int k, int64_t hidden, void *dx,
                                 int64_t lddx);
/* The backward of tj_moe_unpermute, in one pass over dY: for each slot
 * with row r = row_of_slot[t * k + s],
 *   dYp[r] = w[t * k + s] * dY[t]               rounded to dtype
 *   dw[t * k + s] = sum over h of dY[t][h] * Yp[r][h]   fp32, rounded to
 *                                                w_type
 * and dw is 0 for a dropped slot.  dy: T rows (lddy); yp, dyp: T * k rows
 * (ldyp, lddyp); w and dw: T x k of w_type. */
TJ_EXPORT int tj_moe_unpermute_bwd(tj_runtime *rt, void *stream, int dtype,
                                   const void *dy, int64_t lddy,
                                   const void *yp, int64_t ldyp,
                                   const int32_t *row_of_slot, int64_t tokens,
                                   int k, int64_t hidden, int w_type,
                                   const void *w, void *dyp, int64_t lddyp,
                                   void *dw);

/*
 * The same calls on host memory: each array a host buffer laid out as
 * the device call's (strides included), no stream.  The call allocates
 * device memory (and tj_moe_route_host the workspace), copies in what is
 * read, runs the device call on the default stream, waits, copies out
 * and frees.  Outputs are copied in as well, so what the call does not
 * write (rows no slot maps to, the padding past hidden) comes back as it
 * was, and the caller's buffers are written only when everything
 * succeeded.  Errors as the device calls.  Thread-safe as tj_launch is.
 */
TJ_EXPORT int tj_moe_route_host(tj_runtime *rt, const int32_t *topk,
                                int64_t tokens, int k, int experts,
                                const tj_moe_routing *out);
TJ_EXPORT int tj_moe_permute_host(tj_runtime *rt, int dtype, const void *x,
                                  int64_t ldx, const int32_t *row_of_slot,
                                  int64_t tokens, int k, int64_t hidden,
                                  void *xp, int64_t ldxp);
TJ_EXPORT int tj_moe_unpermute_host(tj_runtime *rt, int dtype, const void *yp,
                                    int64_t ldyp, const int32_t *row_of_slot,
                                    int64_t tokens, int k, int64_t hidden,
                                    int w_type, const void *w, void *y,
                                    int64_t ldy);
TJ_EXPORT int tj_moe_permute_bwd_host(tj_runtime *rt, int dtype,
                                      const void *dxp, int64_t lddxp,
                                      const int32_t *row_of_slot,
                                      int64_t tokens, int k, int64_t hidden,
                                      void *dx, int64_t lddx);
TJ_EXPORT int tj_moe_unpermute_bwd_host(tj_runtime *rt, int dtype,
                                        const void *dy, int64_t lddy,
                                        const void *yp, int64_t ldyp,
                                        const int32_t *row_of_slot,
                                        int64_t tokens, int k, int64_t hidden,
                                        int w_type, const void *w, void *dyp,
                                        int64_t lddyp, void *dw);
/* ============================================== verifying the GEMM family
 * tj_verify for one configuration of tj_gemm: shape gives a_type, b_type,
 * c_type, trans_a, trans_b, m, n, k, alpha, beta and epilogue as for
 * tj_gemm, and optionally the leading dimensions (0: dense).  Its a, b, c
 * and bias are NULL: the run allocates every array itself and fills the
 * inputs with seeded random values (A, B, bias, C where beta reads it in
 * [-1, 1]; dGELU's aux in [-3, 3]).  A non-NULL aux (BIAS_GELU) or
 * bias_grad (DGELU) is never read: it asks the run to have the call
 * write that optional output too, and checks it.  The run times the
 * first call to its completion on the host's clock (first_call_ms: the
 * configuration's compile or cache load included) and then warm calls
 * with events (kernel_ms, their median), and compares C (and aux) with
 * the double-precision oracle at every row, or at a spread sample of
 * whole rows when M x N x K is large, and bias_grad with the column sums
 * of C as the call stored it.  The report's kernel is "gemm", ran names
 * the configuration (tj_gemm_kernel's name), and rel_l2_tolerance is
 * C's limit (fp16 1e-3, bf16 4e-3, fp32 1e-4).  Returns as tj_verify:
 * TJ_OK or TJ_EVERIFY with the report written, else TJ_EINVAL (a field
 * out of range, a pointer set that must be NULL), TJ_ERANGE,
 * TJ_ENODEVICE, TJ_EDEVICE, TJ_ECOMPILE, TJ_ENOMEM and nothing written.
 * Thread-safe as tj_launch is.
 */
TJ_EXPORT int tj_verify_gemm(tj_runtime *rt, const tj_gemm_desc *shape,
                             uint64_t seed, tj_report *report /* OUT */);
/*
 * tj_verify_gemm for tj_grouped_gemm, with a routing of the caller's:
 * shape as tj_grouped_gemm_desc takes it (stride_b or stride_c 0:
 * dense), its a, b, c and bias NULL, aux and bias_grad as above, and
 * offs HOST memory here: the groups' end offsets to run, non-decreasing
 * within the grouped total and, for TJ_GROUPED_M, ending at m (every row
 * in a group; empty groups are fine).  Each compared row of C (for
 * TJ_GROUPED_K, that row of every group's C) is checked as the plain
 * GEMM of its group, and bias_grad as each group's column sums of C as
 * stored.  The report's kernel is "grouped_gemm", ran the configuration
 * (tj_grouped_gemm_kernel's name).  Returns as tj_verify_gemm; an offset
 * out of order is TJ_EINVAL naming it.
 */
TJ_EXPORT int tj_verify_grouped_gemm(tj_runtime *rt,
                                     const tj_grouped_gemm_desc *shape,
                                     uint64_t seed,
                                     tj_report *report /* OUT */);

#ifdef __cplusplus
}
#endif
#endif /* TOKITAI_JIT_OPS_H */
