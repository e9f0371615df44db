/*
 * gemm_f16_sm90a_extra.hip: Hopper GEMM entries that no default choice
 * takes, in a file of their own so that the rule's entries
 * (gemm_f16_sm90a.hip) compile without them:
 *   - the 128 x 256 tile one block a tile, and the persistent 128 x 128
 *     tile: run where asked (TJ_GEMM_PERSISTENT, TJ_GEMM_SM90A_TILE) or
 *     where a --tune chose them, never by the rule or a first use;
 *   - trials: stream-K over 128 x 128 and 128 x 256 tiles, correct on
 *     the H200 but slower there than the rule's entries (bench/RESULTS.md,
 *     eighth round), and the 128 x 256 and 128 x 128 tiles with K split
 *     across a cluster of three and four blocks; run only where asked
 *     (TJ_GEMM_STREAMK=1, with TJ_GEMM_SM90A_TILE=256 for the second;
 *     TJ_GEMM_SM90A_TILE=256k3 or 128k4; or a tuning decision made by a
 *     --tune with TJ_GEMM_TUNE_TRIAL=1).
 * Their code is gemm_f16_sm90a.h, which the library's copy of this file
 * starts with.
 *
 * embed: arch sm_90a
 * embed: prepend gemm_f16_sm90a.h
 * embed: configuration
 */

/* contract
 *   block      384 1 1
 *   grid       (ceil(N / 256), ceil(M / 128), 1)
 *   shared     230464
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned, and with store 1 C
 *              16-byte aligned and ldc a multiple of 8
 *   notes      sm_90a only (traps elsewhere); tma_a and tma_b are
 *              CUtensorMaps built as the header of gemm_f16_sm90a.h says.
 *              store 1 (only with beta == 0): the epilogue stores through
 *              tma_c, a CUtensorMap over C as the header says; store 0:
 *              tma_c is not read and C is written directly.  The
 *              function's dynamic shared memory limit must be raised to the
 *              shared size first.  tj_gemm_f16 does all of this.
 */
extern "C" __global__ void __launch_bounds__(384, 1) gemm_f16_sm90a_128x256(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, const __grid_constant__ tj_tmap tma_c, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int store) {
  TJ_H_BODY(256, 4);
}

/* contract
 *   block      384 1 1
 *   grid       (min(ceil(N / 128) * ceil(M / 128), SMs), 1, 1)
 *   shared     197712
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned
 *   notes      persistent: each block walks the 128 x 128 tiles blockIdx.x,
 *              + gridDim.x, ... (any grid width from 1 is correct; one
 *              block per SM is the point).  Otherwise as
 *              gemm_f16_sm90a_128x128.  sm_90a only (traps elsewhere).
 */
extern "C" __global__ void __launch_bounds__(384, 1) gemm_f16_sm90a_128x128_persistent(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, const __grid_constant__ tj_tmap tma_c, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int store) {
  TJ_H_PERSISTENT_BODY(128, 5);
}

/* contract
 *   block      384 1 1
 *   grid       (min(ceil(N / 128) * ceil(M / 128) * ceil(K / 64), SMs),
 *              1, 1)
 *   shared     197712
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned, and with store 1 C
 *              16-byte aligned and ldc a multiple of 8; work 16-byte
 *              aligned
 *   notes      stream-K: the grid's blocks share out the k-tiles of all the
 *              128 x 128 tiles (see the header of gemm_f16_sm90a.h);
 *              every block must be resident at once (at most one an SM).
 *              work: gridDim.x * 128 * 128 floats, then gridDim.x unsigned
 *              flags, none of which may hold seq at the launch (a seq never
 *              used before with that memory).  Otherwise as
 *              gemm_f16_sm90a_128x128.  sm_90a only (traps elsewhere).
 */
extern "C" __global__ void __launch_bounds__(384, 1) gemm_f16_sm90a_128x128_streamk(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, const __grid_constant__ tj_tmap tma_c, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int store, float *work, unsigned seq) {
  TJ_H_STREAMK_BODY(128, 5);
}

/* contract
 *   block      384 1 1
 *   grid       (min(ceil(N / 256) * ceil(M / 128) * ceil(K / 64), SMs),
 *              1, 1)
 *   shared     230464
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned, and with store 1 C
 *              16-byte aligned and ldc a multiple of 8; work 16-byte
 *              aligned
 *   notes      stream-K over the 128 x 256 tiles, as
 *              gemm_f16_sm90a_128x128_streamk over the 128 x 128 ones.
 *              work: gridDim.x * 128 * 256 floats, then gridDim.x unsigned
 *              flags, none of which may hold seq at the launch.  Otherwise
 *              as gemm_f16_sm90a_128x256.  sm_90a only (traps elsewhere).
 */
extern "C" __global__ void __launch_bounds__(384, 1) gemm_f16_sm90a_128x256_streamk(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, const __grid_constant__ tj_tmap tma_c, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int store, float *work, unsigned seq) {
  TJ_H_STREAMK_BODY(256, 4);
}

/* contract
 *   block      384 1 1
 *   grid       (3 * ceil(N / 256), ceil(M / 128), 1)
 *   shared     230464
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned
 *   notes      split-K in a cluster of three blocks (compiled in): blocks
 *              3n, 3n + 1 and 3n + 2 take the first, second and third run
 *              of k-tiles of 128 x 256 tile n of the grid's rows, each
 *              writes its fp32 sums into its own shared memory, and each
 *              finishes a third of the tile's elements from all three
 *              (distributed shared memory, added in rank order), storing
 *              C directly (store is ignored).  Otherwise as
 *              gemm_f16_sm90a_128x256.  sm_90a only (traps elsewhere).
 */
extern "C" __global__ void TJ_H_CLUSTER3 __launch_bounds__(384, 1) gemm_f16_sm90a_128x256_cluster_k3(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, const __grid_constant__ tj_tmap tma_c, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int store) {
  TJ_H_CLUSTER_KS_BODY(256, 4, 3);
}

/* contract
 *   block      384 1 1
 *   grid       (4 * ceil(N / 128), ceil(M / 128), 1)
 *   shared     197712
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned
 *   notes      as gemm_f16_sm90a_128x256_cluster_k3 with 128 x 128 tiles
 *              and K split across a cluster of four blocks.  Otherwise as
 *              gemm_f16_sm90a_128x128.  sm_90a only (traps elsewhere).
 */
extern "C" __global__ void TJ_H_CLUSTER4 __launch_bounds__(384, 1) gemm_f16_sm90a_128x128_cluster_k4(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, const __grid_constant__ tj_tmap tma_c, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int store) {
  TJ_H_CLUSTER_KS_BODY(128, 5, 4);
}
