/*
 * gemm_portable.hip: the GEMM family's portable path, one source for every
 * element type, layout and epilogue, specialised at compile time.  It
 * runs on any GPU either compiler targets (fp32 FMAs, no matrix
 * instructions), so that every valid tj_gemm call has a kernel; the
 * faster paths take the combinations they serve.
 *
 *   C = epilogue(alpha * op(A) * op(B) + beta * C)
 *   op(A) is M x K: A row-major M x K (A[m*lda + k]), or with TJ_TRANS_A
 *   its transpose, A row-major K x M (A[k*lda + m]); op(B) is K x N: B
 *   row-major K x N (B[k*ldb + n]), or with TJ_TRANS_B B row-major N x K
 *   (B[n*ldb + k]).  C is row-major M x N (C[m*ldc + n]).
 *
 * Compile-time constants (-D, all required; tj_gemm sets them from the
 * call, so that each combination is its own code object):
 *   TJ_TA, TJ_TB  element type of A and B: 1 f16, 2 bf16
 *   TJ_TC         element type of C (and of bias and aux): 1 f16, 2 bf16,
 *                 3 f32
 *   TJ_TRANS_A, TJ_TRANS_B   0 or 1
 *   TJ_EPI        the epilogue, as gemm_epilogue.h (which the library's
 *                 copy of this file starts with) says: 0 none, 1 bias,
 *                 2 bias and GELU, 3 dGELU
 *   TJ_GEMM_ENTRY, TJ_COLSUM_ENTRY   the entries' names
 *
 * Entries
 *   TJ_GEMM_ENTRY(long long M, long long N, long long K, float alpha,
 *                 const void *A, long long lda, const void *B,
 *                 long long ldb, float beta, void *C, long long ldc,
 *                 const void *bias, void *aux, long long ldaux)
 *   TJ_COLSUM_ENTRY(long long M, long long N, const void *C,
 *                   long long ldc, float *sums)
 *       sums[n] = the sum over m of C[m*ldc + n] as stored, in fp32
 *       (tj_e_colsum's order): the bias gradient after a dGELU, the same
 *       bits on every run (no atomics).
 *
 * Launch
 *   gemm    block (256, 1, 1); grid (ceil(N / 64), ceil(M / 64), 1): one
 *           block per 64 x 64 tile of C; no dynamic shared memory
 *   colsum  block (256, 1, 1); grid (ceil(N / 32), 1, 1)
 *
 * Alignment: elements naturally aligned (2 bytes, 4 for f32 C); any
 * leading dimensions.  beta == 0: C is not read.  alpha == 0: neither A
 * nor B is read (the product is taken as 0).  The sums of products are
 * fp32 and added in the same order on every run.
 *
 * Compiles unchanged with hipRTC (AMD) and NVRTC (NVIDIA).
 *
 * embed: prepend gemm_epilogue.h
 */

#define TJ_P_THREADS 256
#define TJ_P_BM 64
#define TJ_P_BN 64
#define TJ_P_BK 16

/* The tile of op(A) (TJ_P_BM x TJ_P_BK) and op(B) (TJ_P_BK x TJ_P_BN)
 * at (m0, k0) and (k0, n0) into shared memory, k-major, zero past the
 * edges. */
__device__ __forceinline__ void tj_p_load_tiles(
    float (*as)[TJ_P_BM + 1], float (*bs)[TJ_P_BN + 1], long long M,
    long long N, long long K, const void *A, long long lda, const void *B,
    long long ldb, long long m0, long long n0, long long k0) {
  for (int i = threadIdx.x; i < TJ_P_BM * TJ_P_BK; i += TJ_P_THREADS) {
    /* Consecutive threads walk the operand's contiguous dimension. */
    int r = TJ_TRANS_A ? i % TJ_P_BM : i / TJ_P_BK;
    int k = TJ_TRANS_A ? i / TJ_P_BM : i % TJ_P_BK;
    long long gm = m0 + r, gk = k0 + k;
    float v = 0.0f;
    if (gm < M && gk < K)
      v = tj_e_load<TJ_TA>(A, TJ_TRANS_A ? gk * lda + gm : gm * lda + gk);
    as[k][r] = v;
  }
  for (int i = threadIdx.x; i < TJ_P_BK * TJ_P_BN; i += TJ_P_THREADS) {
    int c = TJ_TRANS_B ? i / TJ_P_BK : i % TJ_P_BN;
    int k = TJ_TRANS_B ? i % TJ_P_BK : i / TJ_P_BN;
    long long gn = n0 + c, gk = k0 + k;
    float v = 0.0f;
    if (gn < N && gk < K)
      v = tj_e_load<TJ_TB>(B, TJ_TRANS_B ? gn * ldb + gk : gk * ldb + gn);
    bs[k][c] = v;
  }
}

/* C[m][n] from its sum of products s, as the epilogue says. */
__device__ __forceinline__ void tj_p_finish(long long m, long long n,
                                            float s, float alpha, float beta,
                                            void *C, long long ldc,
                                            const void *bias, void *aux,
                                            long long ldaux) {
  long long ci = m * ldc + n;
  float v = alpha * s;
  if (beta != 0.0f)
    v += beta * tj_e_load<TJ_TC>(C, ci);
  tj_e_store<TJ_TC>(C, ci, tj_e_apply<TJ_TC, TJ_EPI>(v, m, n, bias, aux,
                                                     ldaux));
}

extern "C" __global__ void __launch_bounds__(256)
TJ_GEMM_ENTRY(long long M, long long N, long long K, float alpha,
              const void *A, long long lda, const void *B, long long ldb,
              float beta, void *C, long long ldc, const void *bias, void *aux,
              long long ldaux) {
  __shared__ float as[TJ_P_BK][TJ_P_BM + 1];
  __shared__ float bs[TJ_P_BK][TJ_P_BN + 1];
  long long m0 = (long long)blockIdx.y * TJ_P_BM;
  long long n0 = (long long)blockIdx.x * TJ_P_BN;
  /* Each thread owns 4 x 4 of the tile: rows ty + 16 i, columns
   * tx + 16 j, so that a warp's stores of a row are contiguous. */
  int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[4][4];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++)
      acc[i][j] = 0.0f;
  for (long long k0 = 0; alpha != 0.0f && k0 < K; k0 += TJ_P_BK) {
    tj_p_load_tiles(as, bs, M, N, K, A, lda, B, ldb, m0, n0, k0);
    __syncthreads();
    for (int k = 0; k < TJ_P_BK; k++) {
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
  for (int i = 0; i < 4; i++) {
    long long m = m0 + ty + 16 * i;
    for (int j = 0; j < 4; j++) {
      long long n = n0 + tx + 16 * j;
      if (m < M && n < N)
        tj_p_finish(m, n, acc[i][j], alpha, beta, C, ldc, bias, aux, ldaux);
    }
  }
}

extern "C" __global__ void __launch_bounds__(256)
TJ_COLSUM_ENTRY(long long M, long long N, const void *C, long long ldc,
                float *sums) {
  tj_e_colsum<TJ_TC>(M, N, C, ldc, sums);
}
