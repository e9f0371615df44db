/*
 * gemm_f16_sm90a_skinny.hip: the Hopper GEMM's skinny entries (M <= 16),
 * B streamed once through TMA in strips of 128 or 256 columns, K split
 * across a cluster of up to 8 blocks; tj_gemm_f16's rule and the tuning
 * table's skinny configurations launch them.  In a file of their own so
 * that a first call with M <= 16 compiles only these, and one with M > 16
 * only the tiles (gemm_f16_sm90a.hip).  Their code is gemm_f16_sm90a.h
 * (tj_s_gemm), which the library's copy of this file starts with.
 *
 * embed: arch sm_90a
 * embed: prepend gemm_epilogue.h gemm_f16_sm90a.h
 * embed: configuration
 */

/* contract
 *   block      160 1 1
 *   grid       (ceil(N / 128), 1, 1)
 *   shared     101456
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned
 *   notes      M <= 16 (rows past 16 are not computed); tma_a's box is {64,
 *              16} (A's 16 rows), tma_b's {64, 64} as for the others; block
 *              x computes columns [128 * x, 128 * x + 128) of C, streaming
 *              B once; alpha == 0 reads neither A nor B; evict_first 1
 *              loads B marked first to go from L2 (the host's default;
 *              TJ_GEMM_EVICT_FIRST=0 passes 0).  Two blocks fit an SM.
 *              sm_90a only (traps elsewhere).
 */
extern "C" __global__ void __launch_bounds__(160, 2) gemm_f16_sm90a_skinny(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int evict_first) {
  TJ_S_BODY(128, 1);
}

/* contract
 *   block      160 1 1
 *   grid       (2 * ceil(N / 128), 1, 1)
 *   shared     106576
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned
 *   notes      K split across a cluster of 2 blocks (compiled in): blocks
 *              2s to 2s + 1 take the 2 K-ranges of strip s and add
 *              their sums through distributed shared memory.  Otherwise as
 *              gemm_f16_sm90a_skinny.  sm_90a only (traps elsewhere).
 */
extern "C" __global__ void TJ_H_CLUSTER2 __launch_bounds__(160, 2) gemm_f16_sm90a_skinny_k2(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int evict_first) {
  TJ_S_BODY(128, 2);
}

/* contract
 *   block      160 1 1
 *   grid       (3 * ceil(N / 128), 1, 1)
 *   shared     111696
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned
 *   notes      K split across a cluster of 3 blocks (compiled in): blocks
 *              3s to 3s + 2 take the 3 K-ranges of strip s and add
 *              their sums through distributed shared memory.  Otherwise as
 *              gemm_f16_sm90a_skinny.  sm_90a only (traps elsewhere).
 */
extern "C" __global__ void TJ_H_CLUSTER3 __launch_bounds__(160, 2) gemm_f16_sm90a_skinny_k3(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int evict_first) {
  TJ_S_BODY(128, 3);
}

/* contract
 *   block      160 1 1
 *   grid       (4 * ceil(N / 128), 1, 1)
 *   shared     109136
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned
 *   notes      K split across a cluster of 4 blocks (compiled in): blocks
 *              4s to 4s + 3 take the 4 K-ranges of strip s and add
 *              their sums through distributed shared memory.  Otherwise as
 *              gemm_f16_sm90a_skinny.  sm_90a only (traps elsewhere).
 */
extern "C" __global__ void TJ_H_CLUSTER4 __launch_bounds__(160, 2) gemm_f16_sm90a_skinny_k4(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int evict_first) {
  TJ_S_BODY(128, 4);
}

/* contract
 *   block      160 1 1
 *   grid       (8 * ceil(N / 128), 1, 1)
 *   shared     119376
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned
 *   notes      K split across a cluster of 8 blocks (compiled in): blocks
 *              8s to 8s + 7 take the 8 K-ranges of strip s and add
 *              their sums through distributed shared memory.  One block
 *              an SM (its shared memory).  Otherwise as
 *              gemm_f16_sm90a_skinny.  sm_90a only (traps elsewhere).
 */
extern "C" __global__ void TJ_H_CLUSTER8 __launch_bounds__(160, 2) gemm_f16_sm90a_skinny_k8(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int evict_first) {
  TJ_S_BODY(128, 8);
}

/* contract
 *   block      160 1 1
 *   grid       (ceil(N / 256), 1, 1)
 *   shared     191568
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned
 *   notes      as gemm_f16_sm90a_skinny with 256 columns of C a block
 *              (one block an SM).  sm_90a only (traps elsewhere).
 */
extern "C" __global__ void __launch_bounds__(160, 1) gemm_f16_sm90a_skinny256(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int evict_first) {
  TJ_S_BODY(256, 1);
}

/* contract
 *   block      160 1 1
 *   grid       (2 * ceil(N / 256), 1, 1)
 *   shared     201808
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned
 *   notes      K split across a cluster of 2 blocks as for
 *              gemm_f16_sm90a_skinny_k2, with 256 columns of C a block
 *              (one block an SM).  sm_90a only (traps elsewhere).
 */
extern "C" __global__ void TJ_H_CLUSTER2 __launch_bounds__(160, 1) gemm_f16_sm90a_skinny256_k2(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int evict_first) {
  TJ_S_BODY(256, 2);
}

/* contract
 *   block      160 1 1
 *   grid       (3 * ceil(N / 256), 1, 1)
 *   shared     206928
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned
 *   notes      K split across a cluster of 3 blocks as for
 *              gemm_f16_sm90a_skinny_k3, with 256 columns of C a block
 *              (one block an SM).  sm_90a only (traps elsewhere).
 */
extern "C" __global__ void TJ_H_CLUSTER3 __launch_bounds__(160, 1) gemm_f16_sm90a_skinny256_k3(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int evict_first) {
  TJ_S_BODY(256, 3);
}

/* contract
 *   block      160 1 1
 *   grid       (4 * ceil(N / 256), 1, 1)
 *   shared     206928
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned
 *   notes      K split across a cluster of 4 blocks as for
 *              gemm_f16_sm90a_skinny_k4, with 256 columns of C a block
 *              (one block an SM).  sm_90a only (traps elsewhere).
 */
extern "C" __global__ void TJ_H_CLUSTER4 __launch_bounds__(160, 1) gemm_f16_sm90a_skinny256_k4(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int evict_first) {
  TJ_S_BODY(256, 4);
}
