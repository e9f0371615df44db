/*
 * gemm_f16_sm90a.hip: the Hopper GEMM's tile entries (M > 16) that
 * tj_gemm_f16's rule launches; the skinny entries (M <= 16) are
 * gemm_f16_sm90a_skinny.hip, and the tiles only a tuning decision or the
 * benchmark asks for gemm_f16_sm90a_extra.hip, so that a first call
 * compiles only what the rule may run for its kind.  Their code, and what
 * it does, is gemm_f16_sm90a.h, which the library's copy of this file
 * starts with.
 *
 * embed: arch sm_90a
 * embed: prepend gemm_epilogue.h gemm_f16_sm90a.h
 * embed: configuration
 */

/* contract
 *   block      384 1 1
 *   grid       (ceil(N / 128), ceil(M / 128), 1)
 *   shared     197712
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned
 *   notes      sm_90a only (traps elsewhere); tma_a and tma_b are
 *              CUtensorMaps built as the header of gemm_f16_sm90a.h says;
 *              the function's dynamic shared memory limit must be raised to
 *              the shared size first.  tj_gemm_f16 does all of this.
 */
extern "C" __global__ void __launch_bounds__(384, 1) gemm_f16_sm90a_128x128(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, const __grid_constant__ tj_tmap tma_c, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int store) {
  TJ_H_BODY(128, 5);
}

/* contract
 *   block      384 1 1
 *   grid       (ceil(N / 128), ceil(M / 128), split), kper * split >=
 *              ceil(K / 64)
 *   shared     197712
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); work 8-byte aligned
 *   notes      split-K: block z computes k-tiles [z * kper, z * kper + kper)
 *              of its tile and writes the fp32 sums of rows below M to work
 *              at z * M * ldw + row * ldw + col, ldw = 128 * gridDim.x
 *              (split * M * ldw floats); gemm_f16_sm90a_splitk_reduce then
 *              writes C.  sm_90a only (traps elsewhere); tensor maps and
 *              shared memory as for gemm_f16_sm90a_128x128.  tj_gemm_f16
 *              does all of this.
 */
extern "C" __global__ void __launch_bounds__(384, 1) gemm_f16_sm90a_128x128_splitk(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, int M, int N, int K, int kper, float *work) {
  TJ_H_SPLIT_BODY(128, 5);
}

/* contract
 *   block      256 1 1
 *   grid       (ceil(N / 256), min(M, 65535), 1)
 *   shared     0
 *   alignment  work 4-byte aligned, C 2-byte aligned
 *   notes      C = alpha * (the sum of split slices of work, in order) +
 *              beta * C, C read only when beta != 0; work as
 *              gemm_f16_sm90a_128x128_splitk writes it, ldw floats from one
 *              row to the next.  sm_90a only (traps elsewhere).
 */
extern "C" __global__ void __launch_bounds__(256) gemm_f16_sm90a_splitk_reduce(const float *work, int split, int M, int N, int ldw, float alpha, float beta, __half *C, int ldc) {
  TJ_H_REDUCE_BODY();
}

/* contract
 *   block      384 1 1
 *   grid       (min(ceil(N / 256) * ceil(M / 128), SMs), 1, 1)
 *   shared     230464
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned
 *   notes      persistent: each block walks the 128 x 256 tiles blockIdx.x,
 *              + gridDim.x, ... (any grid width from 1 is correct; one
 *              block per SM is the point).  Otherwise as
 *              gemm_f16_sm90a_128x256.  sm_90a only (traps elsewhere).
 */
extern "C" __global__ void __launch_bounds__(384, 1) gemm_f16_sm90a_128x256_persistent(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, const __grid_constant__ tj_tmap tma_c, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int store) {
  TJ_H_PERSISTENT_BODY(256, 4);
}

/* contract
 *   block      384 1 1
 *   grid       (ceil(N / 64), ceil(M / 128), 1)
 *   shared     230528
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned
 *   notes      the narrow tile, for shapes whose 128 x 128 tiles are too
 *              few to fill the GPU; tma_b's box is {64, 64} as for the
 *              others.  Otherwise as gemm_f16_sm90a_128x128.  sm_90a only
 *              (traps elsewhere).
 */
extern "C" __global__ void __launch_bounds__(384, 1) gemm_f16_sm90a_128x64(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, const __grid_constant__ tj_tmap tma_c, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int store) {
  TJ_H_BODY(64, 8);
}

/* contract
 *   block      384 1 1
 *   grid       (2 * ceil(N / 64), ceil(M / 128), 1)
 *   shared     230544
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned
 *   notes      split-K in a cluster of two blocks (compiled in): blocks 2n
 *              and 2n + 1 take the first and second half of K for tile n
 *              of the grid's rows; the second sends its fp32 sums to the
 *              first's shared memory (its epilogue's buffers, 128 x 64
 *              floats), which adds them and writes C.  Otherwise as gemm_f16_sm90a_128x64.  sm_90a only
 *              (traps elsewhere).
 */
extern "C" __global__ void TJ_H_CLUSTER2 __launch_bounds__(384, 1) gemm_f16_sm90a_128x64_cluster_k2(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, const __grid_constant__ tj_tmap tma_c, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int store) {
  TJ_H_CLUSTER_K2_BODY(64, 8);
}

/* contract
 *   block      384 1 1
 *   grid       (2 * min(ceil(ceil(M / 128) / 2) * ceil(N / 256), SMs / 2),
 *              1, 1)
 *   shared     230464
 *   alignment  A and B 16-byte aligned with lda and ldb multiples of 8 (the
 *              tensor maps' rules); C 2-byte aligned
 *   notes      persistent in clusters of two (compiled in) that share each
 *              B tile by TMA multicast: cluster c walks the pairs of 128 x
 *              256 tiles (tile rows 2p and 2p + 1 of one tile column) c, +
 *              gridDim.x / 2, ...; gridDim.x must be even (any even width
 *              from 2 is correct).  Otherwise as gemm_f16_sm90a_128x256.
 *              sm_90a only (traps elsewhere).
 */
extern "C" __global__ void TJ_H_CLUSTER2 __launch_bounds__(384, 1) gemm_f16_sm90a_128x256_mc2(const __grid_constant__ tj_tmap tma_a, const __grid_constant__ tj_tmap tma_b, const __grid_constant__ tj_tmap tma_c, int M, int N, int K, float alpha, float beta, __half *C, int ldc, int store) {
  TJ_H_PERSISTENT_MC2_BODY(256, 4);
}
