/*
 * gemm_grouped_sm90a.hip: the grouped GEMM's Hopper path (sm_90a: wgmma
 * and TMA), one configuration a compile.
 * tj_grouped_gemm compiles this file with the call's choices as -D
 * constants, each configuration a code object of its own named from its
 * choices ("gemm_grouped_m_bf16_bf16_bf16_nn_biasgelu_sm90a_128x128");
 * the code is gemm_f16_sm90a.h's grouped kinds (which, after
 * gemm_epilogue.h, the library's copy of this file starts with).
 *
 *   TJ_GROUPED 1 (M-grouped): C[r][:] = epilogue_e(alpha * op(A)[r][:]
 *   op(B_e) + beta * C[r][:]) for each row r of group e;
 *   TJ_GROUPED 2 (K-grouped, A stored K x M and B K x N only, no
 *   epilogue): C_e = alpha * op(A)[:, group e] op(B)[group e, :] + beta
 *   * C_e; as gemm_grouped_portable.hip says (types, layouts, epilogues,
 *   offsets), fp32 accumulation.
 *
 * Compile-time constants (-D, all required):
 *   TJ_GROUPED    1 or 2, as above
 *   TJ_TA, TJ_TC, TJ_TRANS_A, TJ_TRANS_B, TJ_EPI
 *                 as gemm_f16_sm90a.h says (A and B of one type)
 *   TJ_H_BN, TJ_H_STAGES   the tile's columns and its pipeline's stages
 *                 (64 and 8, 128 and 5, 256 and 4)
 *   TJ_GGEMM_ENTRY, TJ_GCOLSUM_ENTRY   the entries' names (the column
 *                 sums with dGELU only)
 *
 * Entries
 *   TJ_GGEMM_ENTRY(tj_tmap tma_a, tj_tmap tma_b, const int *offs, int E,
 *                  int M, int N, int K, float alpha, float beta, void *C,
 *                  int ldc, const void *bias, void *aux, long long ldaux,
 *                  long long stride_c)
 *       block 384, grid (min(SMs, tiles), 1, 1), the dynamic shared
 *       memory of the tiles' entry of the same BN and stages.  tma_a over
 *       A as the tiles' (2-D {K, M} box {64, 128}; TJ_TRANS_A: {M, K} box
 *       {64, 64}).  M-grouped: tma_b 3-D over the E matrices of B,
 *       stride_b apart: {N, K, E} (TJ_TRANS_B: {K, N, E}), box {64, 64,
 *       1}; stride_c unused.  K-grouped: tma_b 2-D {N, K} box {64, 64};
 *       bias and aux NULL.  A's and B's rows a multiple of 8 elements
 *       apart, stride_b too, both 16-byte aligned; M, N, K and ldc in
 *       int, the tiles (at most) as well.
 *   TJ_GCOLSUM_ENTRY(long long E, const int *offs, long long M,
 *                    long long N, const void *C, long long ldc,
 *                    float *sums)
 *       block 256, grid (ceil(N / 32), E, 1): sums[e * N + n] = the sum
 *       of C[r][n] as stored over the rows r of group e (gemm_epilogue.h's
 *       tj_e_colsum on them: no atomics, the same bits every run; 0 for
 *       an empty group), the per-group bias gradient after a dGELU.
 *
 * embed: prepend gemm_epilogue.h gemm_f16_sm90a.h
 */

#if TJ_GROUPED == 2 && (!TJ_TRANS_A || TJ_TRANS_B || TJ_EPI != 0)
#error "the K-grouped kind takes A stored K x M, B stored K x N, no epilogue"
#endif

extern "C" __global__ void __launch_bounds__(384, 1)
TJ_GGEMM_ENTRY(const __grid_constant__ tj_tmap tma_a,
               const __grid_constant__ tj_tmap tma_b, const int *offs, int E,
               int M, int N, int K, float alpha, float beta, void *C,
               int ldc, const void *bias, void *aux, long long ldaux,
               long long stride_c) {
#if TJ_GROUPED == 2
  TJ_HK_BODY(TJ_H_BN, TJ_H_STAGES);
#else
  TJ_HG_BODY(TJ_H_BN, TJ_H_STAGES);
#endif
}

#if TJ_EPI == 3
extern "C" __global__ void __launch_bounds__(256)
TJ_GCOLSUM_ENTRY(long long E, const int *offs, long long M, long long N,
                 const void *C, long long ldc, float *sums) {
  long long e = blockIdx.y;
  long long lo = e > 0 ? offs[e - 1] : 0, hi = offs[e];
  lo = lo < 0 ? 0 : lo > M ? M : lo;
  hi = hi < lo ? lo : hi > M ? M : hi;
  const char *rows = (const char *)C + lo * ldc * (TJ_TC == 3 ? 4 : 2);
  tj_e_colsum<TJ_TC>(hi - lo, N, rows, ldc, sums + e * N);
}
#endif
