/*
 * gemm_grouped_portable.hip: the grouped GEMM's portable path, one GEMM
 * per group in one launch, the groups cut by end offsets in device
 * memory (tj_grouped_gemm_desc in <tokitai-jit/ops.h> defines the call).
 * It runs on any GPU either compiler targets (fp32 FMAs, no matrix
 * instructions), so that every valid tj_grouped_gemm call has a kernel.
 *
 * Group e spans [offs[e-1], offs[e]) (offs[-1] = 0), each offset clamped
 * to [0, total]: offsets out of order give unspecified results but never
 * an access outside the operands.
 *   TJ_GROUPED == 1 (M-grouped): for a row r of group e,
 *     C[r][:] = epilogue_e(alpha * op(A)[r][:] op(B_e) + beta * C[r][:]),
 *     B_e = B + e * stride_b; op(A) is M x K, C is M x N.  Rows past the
 *     last group are neither read nor written.
 *   TJ_GROUPED == 2 (K-grouped): C_e = C + e * stride_c,
 *     C_e = alpha * op(A)[:, group e] op(B)[group e, :] + beta * C_e;
 *     op(A) is M x K, op(B) K x N.  No epilogue.
 *   op(A): A[m*lda + k], or with TJ_TRANS_A A[k*lda + m]; op(B):
 *   B[k*ldb + n], or with TJ_TRANS_B B[n*ldb + k]; C[m*ldc + n].
 *
 * Compile-time constants (-D, all required; tj_grouped_gemm sets them):
 *   TJ_GROUPED    1 or 2, as above
 *   TJ_TA, TJ_TB  element type of A and B: 1 f16, 2 bf16
 *   TJ_TC         element type of C, bias and aux: 1 f16, 2 bf16, 3 f32
 *   TJ_TRANS_A, TJ_TRANS_B   0 or 1
 *   TJ_EPI        0 none; 1 + bias[e*N + n]; 2 bias and GELU: aux (when not
 *                 NULL) = the pre-activation, C = gelu(it); 3 dGELU:
 *                 C = (alpha * op(A) op(B_e) + beta * C) * gelu'(aux);
 *                 1 to 3 with TJ_GROUPED == 1 only
 *   TJ_GGEMM_ENTRY, TJ_GCOLSUM_ENTRY   the entries' names
 *   gelu(x) = 0.5 x (1 + tanh(c (x + a x^3))), c = sqrt(2/pi),
 *             a = 0.044715 (gelu_f16.hip's), and gelu' its derivative.
 *
 * Entries
 *   TJ_GGEMM_ENTRY(long long E, const int *offs, long long M, long long N,
 *                  long long K, float alpha, const void *A, long long lda,
 *                  const void *B, long long ldb, long long stride_b,
 *                  float beta, void *C, long long ldc, long long stride_c,
 *                  const void *bias, void *aux, long long ldaux)
 *   TJ_GCOLSUM_ENTRY(long long E, const int *offs, long long M,
 *                    long long N, const void *C, long long ldc, float *sums)
 *       sums[e*N + n] = the sum over the rows r of group e of C[r*ldc + n]
 *       as stored, in fp32, in order of r (0 for an empty group): the
 *       per-group bias gradient after a dGELU, no atomics.
 *
 * Launch
 *   ggemm   block (256, 1, 1), no dynamic shared memory; grid
 *           (ceil(N / 64), ceil(M / 64), TJ_GROUPED == 2 ? E : 1).
 *           M-grouped: a block owns rows [64 y, 64 y + 64) of C and runs
 *           the tile once for each group that meets them, found by a
 *           binary search over offs; each element of C is written by one
 *           thread, so the bits are the same on every run.
 *           K-grouped: block z is group z's tile (x, y) of C_z.
 *   colsum  block (256, 1, 1); grid (ceil(N / 256), E, 1)
 *
 * Alignment: elements naturally aligned (2 bytes, 4 for f32); any leading
 * dimensions and strides.  beta == 0: C is not read.  alpha == 0:
 * neither A nor B is read.  Sums of products are fp32, in a fixed order.
 *
 * The element types and the epilogue are gemm_epilogue.h's, which the
 * library's copy of this file starts with.
 * Compiles unchanged with hipRTC (AMD) and NVRTC (NVIDIA).
 *
 * embed: prepend gemm_epilogue.h
 */

#define TJ_G_THREADS 256
#define TJ_G_BM 64
#define TJ_G_BN 64
#define TJ_G_BK 16

/* End offset e, clamped to [0, total]; e == -1 is the start, 0. */
__device__ __forceinline__ long long tj_g_end(const int *offs, long long e,
                                              long long total) {
  if (e < 0)
    return 0;
  long long v = offs[e];
  return v < 0 ? 0 : v > total ? total : v;
}

/* The first group whose end passes row r (E when none does). */
__device__ __forceinline__ long long tj_g_group_of(const int *offs,
                                                   long long E, long long M,
                                                   long long r) {
  long long lo = 0, hi = E;
  while (lo < hi) {
    long long mid = lo + (hi - lo) / 2;
    if (tj_g_end(offs, mid, M) <= r)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* A window of the product: op(A) rows [m_lo, m_hi) from m0, op(B) columns
 * below N from n0, the reduction over [k_lo, k_hi). */
struct tj_g_window {
  long long m0, m_lo, m_hi, n0, N, k_lo, k_hi;
};

/* The tiles of op(A) (BM x BK) and op(B) (BK x BN) at k0 into shared
 * memory, k-major, zero outside the window. */
__device__ __forceinline__ void tj_g_load_tiles(
    float (*as)[TJ_G_BM + 1], float (*bs)[TJ_G_BN + 1], const tj_g_window &w,
    const void *A, long long lda, const void *B, long long ldb, long long k0) {
  for (int i = threadIdx.x; i < TJ_G_BM * TJ_G_BK; i += TJ_G_THREADS) {
    /* Consecutive threads walk the operand's contiguous dimension. */
    int r = TJ_TRANS_A ? i % TJ_G_BM : i / TJ_G_BK;
    int k = TJ_TRANS_A ? i / TJ_G_BM : i % TJ_G_BK;
    long long gm = w.m0 + r, gk = k0 + k;
    float v = 0.0f;
    if (gm >= w.m_lo && gm < w.m_hi && gk < w.k_hi)
      v = tj_e_load<TJ_TA>(A, TJ_TRANS_A ? gk * lda + gm : gm * lda + gk);
    as[k][r] = v;
  }
  for (int i = threadIdx.x; i < TJ_G_BK * TJ_G_BN; i += TJ_G_THREADS) {
    int c = TJ_TRANS_B ? i / TJ_G_BK : i % TJ_G_BN;
    int k = TJ_TRANS_B ? i % TJ_G_BK : i / TJ_G_BN;
    long long gn = w.n0 + c, gk = k0 + k;
    float v = 0.0f;
    if (gn < w.N && gk < w.k_hi)
      v = tj_e_load<TJ_TB>(B, TJ_TRANS_B ? gn * ldb + gk : gk * ldb + gn);
    bs[k][c] = v;
  }
}

/* acc (each thread's 4 x 4: rows ty + 16 i, columns tx + 16 j) = the
 * window's product, in fp32, in order of k.  Every thread of the block
 * calls it with the same window. */
__device__ __forceinline__ void tj_g_product(
    float (*as)[TJ_G_BM + 1], float (*bs)[TJ_G_BN + 1], const tj_g_window &w,
    float alpha, const void *A, long long lda, const void *B, long long ldb,
    float acc[4][4]) {
  int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++)
      acc[i][j] = 0.0f;
  for (long long k0 = w.k_lo; alpha != 0.0f && k0 < w.k_hi; k0 += TJ_G_BK) {
    tj_g_load_tiles(as, bs, w, A, lda, B, ldb, k0);
    __syncthreads();
    for (int k = 0; k < TJ_G_BK; k++) {
      float a[4], b[4];
      for (int i = 0; i < 4; i++)
        a[i] = as[k][ty + 16 * i];
      for (int j = 0; j < 4; j++)
        b[j] = bs[k][tx + 16 * j];
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
          acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
}

/* C[m][n] of group e from its sum of products s, as the epilogue says
 * (group e's bias: the e-th row of N). */
__device__ __forceinline__ void tj_g_finish(long long e, long long m,
                                            long long n, long long N, float s,
                                            float alpha, float beta, void *C,
                                            long long ldc, const void *bias,
                                            void *aux, long long ldaux) {
  long long ci = m * ldc + n;
  float v = alpha * s;
  if (beta != 0.0f)
    v += beta * tj_e_load<TJ_TC>(C, ci);
  const void *be = bias ? (const char *)bias + e * N * (TJ_TC == 3 ? 4 : 2)
                        : nullptr;
  tj_e_store<TJ_TC>(C, ci,
                    tj_e_apply<TJ_TC, TJ_EPI>(v, m, n, be, aux, ldaux));
}

/* The window's rows of acc, finished into C (C_e for K-grouped). */
__device__ __forceinline__ void tj_g_store_window(
    const tj_g_window &w, long long e, float acc[4][4], float alpha,
    float beta, void *C, long long ldc, const void *bias, void *aux,
    long long ldaux) {
  int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  for (int i = 0; i < 4; i++) {
    long long m = w.m0 + ty + 16 * i;
    for (int j = 0; j < 4; j++) {
      long long n = w.n0 + tx + 16 * j;
      if (m >= w.m_lo && m < w.m_hi && n < w.N)
        tj_g_finish(e, m, n, w.N, acc[i][j], alpha, beta, C, ldc, bias, aux,
                    ldaux);
    }
  }
}

extern "C" __global__ void __launch_bounds__(256)
TJ_GGEMM_ENTRY(long long E, const int *offs, long long M, long long N,
               long long K, float alpha, const void *A, long long lda,
               const void *B, long long ldb, long long stride_b, float beta,
               void *C, long long ldc, long long stride_c, const void *bias,
               void *aux, long long ldaux) {
  __shared__ float as[TJ_G_BK][TJ_G_BM + 1];
  __shared__ float bs[TJ_G_BK][TJ_G_BN + 1];
  float acc[4][4];
  tj_g_window w;
  w.m0 = (long long)blockIdx.y * TJ_G_BM;
  w.n0 = (long long)blockIdx.x * TJ_G_BN;
  w.N = N;
#if TJ_GROUPED == 2
  long long e = blockIdx.z;
  w.m_lo = 0, w.m_hi = M;
  w.k_lo = tj_g_end(offs, e - 1, K), w.k_hi = tj_g_end(offs, e, K);
  tj_g_product(as, bs, w, alpha, A, lda, B, ldb, acc);
  tj_g_store_window(w, e, acc, alpha, beta, (char *)C +
                    e * stride_c * (TJ_TC == 3 ? 4 : 2), ldc, bias, aux,
                    ldaux);
#else
  /* Every thread walks the same groups (offs is read-only here), so the
   * block stays together through the product's barriers. */
  long long row_end = w.m0 + TJ_G_BM < M ? w.m0 + TJ_G_BM : M;
  w.k_lo = 0, w.k_hi = K;
  for (long long e = tj_g_group_of(offs, E, M, w.m0); e < E; e++) {
    long long lo = tj_g_end(offs, e - 1, M), hi = tj_g_end(offs, e, M);
    if (lo >= row_end)
      break;
    w.m_lo = lo > w.m0 ? lo : w.m0;
    w.m_hi = hi < row_end ? hi : row_end;
    if (w.m_lo >= w.m_hi)
      continue;
    const void *Be = (const char *)B + e * stride_b * (TJ_TB == 3 ? 4 : 2);
    tj_g_product(as, bs, w, alpha, A, lda, Be, ldb, acc);
    tj_g_store_window(w, e, acc, alpha, beta, C, ldc, bias, aux, ldaux);
  }
#endif
}

extern "C" __global__ void __launch_bounds__(256)
TJ_GCOLSUM_ENTRY(long long E, const int *offs, long long M, long long N,
                 const void *C, long long ldc, float *sums) {
  long long n = (long long)blockIdx.x * 256 + threadIdx.x;
  long long e = blockIdx.y;
  if (n >= N || e >= E)
    return;
  float s = 0.0f;
  for (long long r = tj_g_end(offs, e - 1, M); r < tj_g_end(offs, e, M); r++)
    s += tj_e_load<TJ_TC>(C, r * ldc + n);
  sums[e * N + n] = s;
}
