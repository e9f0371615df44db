/*
 * gemm_f16_sm90a_extra.hip: Hopper GEMM entries that no default choice
 * takes, in a file of their own so that the rule's entries
 * (gemm_f16_sm90a.hip) compile without them:
 * the 128 x 256 tile one block a tile, and the persistent 128 x 128
 * tile, run where a --tune chose them or the benchmark's knobs ask
 * (TJ_GEMM_PERSISTENT, TJ_GEMM_SM90A_TILE), never by the rule.
 * Their code is gemm_f16_sm90a.h, which the library's copy of this file
 * starts with.
 *
 * embed: arch sm_90a
 * embed: prepend gemm_epilogue.h gemm_f16_sm90a.h
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
