/*
 * gemm_sm90a.hip: the GEMM family's Hopper path (sm_90a: wgmma and TMA),
 * one configuration a compile.  tj_gemm (and tj_gemm_f16 on sm_90)
 * compiles this file with the call's choices as -D constants, so each
 * configuration is a code object of its own, named from its choices; the
 * code is gemm_f16_sm90a.h's (which, after gemm_epilogue.h, the library's
 * copy of this file starts with).
 *
 *   C = epilogue(alpha * op(A) * op(B) + beta * C), as gemm_portable.hip
 *   says (layouts, types, epilogues), fp32 accumulation.
 *
 * Compile-time constants (-D, all required):
 *   TJ_TA, TJ_TC, TJ_TRANS_A, TJ_TRANS_B, TJ_EPI
 *                 as gemm_f16_sm90a.h says (A and B of one type)
 *   TJ_H_KIND     0: one 128 x TJ_H_BN tile a block; 1: persistent, one
 *                 block an SM walking the tiles; 2: persistent in
 *                 clusters of two sharing B by multicast (TJ_H_BN 256);
 *                 3: each tile's K split across a cluster of two blocks
 *                 (TJ_H_BN 64); 4: split-K, partials into a workspace,
 *                 then TJ_REDUCE_ENTRY (TJ_H_BN 128); 5: the skinny
 *                 kernel (M <= 16, A not transposed), strips of TJ_H_BN
 *                 (128 or 256) columns, K split across a cluster of
 *                 TJ_H_SPLIT blocks (1, 2, 3, 4 or 8)
 *   TJ_H_BN, TJ_H_STAGES   the tile's columns and its pipeline's stages
 *                 (64 and 8, 128 and 5, 256 and 4; the skinny kernel's
 *                 are its own)
 *   TJ_GEMM_ENTRY, TJ_REDUCE_ENTRY, TJ_COLSUM_ENTRY, TJ_PAD_ENTRY
 *                 the entries' names (the reduce with kind 4 only, the
 *                 column sums with dGELU only)
 *
 * Entries
 *   TJ_GEMM_ENTRY(tj_tmap tma_a, tj_tmap tma_b, tj_tmap tma_c, int M,
 *                 int N, int K, float alpha, float beta, void *C, int ldc,
 *                 int store, const void *bias, void *aux, long long ldaux,
 *                 int kper, float *work)
 *       block 384 (kind 5: 160); grid and dynamic shared memory as
 *       gemm_f16_sm90a.h lays out the kind and tile (TJ_H_SMEM_BYTES,
 *       TJ_S_SMEM_BYTES; src/ops/gemm/plan.h computes the same).
 *       tma_a over A as stored: 2-D {K, M} with
 *       box {64, 128} (K-major), or with TJ_TRANS_A {M, K} with box {64,
 *       64}; tma_b {N, K} box {64, 64}, or with TJ_TRANS_B {K, N} box
 *       {64, 64}; tma_c {N, M} box {64, 64}, read only with store 1
 *       (beta == 0, C 16-bit, 16-byte aligned, ldc a multiple of 8).
 *       kper and work: kind 4's: block z computes k-tiles [z * kper,
 *       z * kper + kper) and writes fp32 sums to work (split * M * ldw
 *       floats, ldw = TJ_H_BN * gridDim.x).
 *       Kind 5: tma_a's box is {64, 16}, tma_c is not read, store 1
 *       loads B evict-first in L2, and the
 *       kernel may be launched to start early.
 *   TJ_REDUCE_ENTRY(const float *work, int split, int M, int N, int ldw,
 *                   float alpha, float beta, void *C, int ldc,
 *                   const void *bias, void *aux, long long ldaux)
 *       block 256, grid (ceil(N / 256), min(M, 65535), 1): C = alpha *
 *       (the sum of the split slices of work, in order) + beta * C, then
 *       the epilogue.
 *   TJ_COLSUM_ENTRY(long long M, long long N, const void *C,
 *                   long long ldc, float *sums)
 *       block 256, grid (ceil(N / 32), 1, 1): gemm_epilogue.h's
 *       tj_e_colsum, the bias gradient after a dGELU.
 *   TJ_PAD_ENTRY(const unsigned short *src, long long ld,
 *                unsigned short *dst, long long ldd, long long rows,
 *                long long cols)
 *       block 256, grid (ceil(cols / 256), min(rows, 65535), 1): rows x
 *       cols 16-bit elements from src (rows ld apart) to dst (ldd apart):
 *       an operand that TMA cannot read (not 16-byte aligned, or rows not
 *       a multiple of 16 bytes apart) copied to where it can.
 *
 * embed: prepend gemm_epilogue.h gemm_f16_sm90a.h
 */

#if TJ_H_KIND == 2 || TJ_H_KIND == 3 || (TJ_H_KIND == 5 && TJ_H_SPLIT == 2)
#define TJ_H_ENTRY_CLUSTER TJ_H_CLUSTER2
#elif TJ_H_KIND == 5 && TJ_H_SPLIT == 3
#define TJ_H_ENTRY_CLUSTER TJ_H_CLUSTER3
#elif TJ_H_KIND == 5 && TJ_H_SPLIT == 4
#define TJ_H_ENTRY_CLUSTER TJ_H_CLUSTER4
#elif TJ_H_KIND == 5 && TJ_H_SPLIT == 8
#define TJ_H_ENTRY_CLUSTER TJ_H_CLUSTER8
#else
#define TJ_H_ENTRY_CLUSTER
#endif
/* The skinny kernel: 160 threads, two blocks an SM with 128-column
 * strips. */
#if TJ_H_KIND == 5
#define TJ_H_ENTRY_BOUNDS __launch_bounds__(160, TJ_H_BN == 128 ? 2 : 1)
#else
#define TJ_H_ENTRY_BOUNDS __launch_bounds__(384, 1)
#endif

/* The header's bodies, given the epilogue's arguments as well. */
#undef TJ_H_OUT
#define TJ_H_OUT TJ_H_OUT_EPI

extern "C" __global__ void TJ_H_ENTRY_CLUSTER TJ_H_ENTRY_BOUNDS
TJ_GEMM_ENTRY(const __grid_constant__ tj_tmap tma_a,
              const __grid_constant__ tj_tmap tma_b,
              const __grid_constant__ tj_tmap tma_c, int M, int N, int K,
              float alpha, float beta, void *C, int ldc, int store,
              const void *bias, void *aux, long long ldaux, int kper,
              float *work) {
#if TJ_H_KIND == 5
  TJ_S_BODY_EPI(TJ_H_BN, TJ_H_SPLIT);
#elif TJ_H_KIND == 4
  TJ_H_SPLIT_BODY(TJ_H_BN, TJ_H_STAGES);
#elif TJ_H_KIND == 3
  TJ_H_CLUSTER_K2_BODY(TJ_H_BN, TJ_H_STAGES);
#elif TJ_H_KIND == 2
  TJ_H_PERSISTENT_MC2_BODY(TJ_H_BN, TJ_H_STAGES);
#elif TJ_H_KIND == 1
  TJ_H_PERSISTENT_BODY(TJ_H_BN, TJ_H_STAGES);
#else
  TJ_H_BODY(TJ_H_BN, TJ_H_STAGES);
#endif
}

#if TJ_H_KIND == 4
extern "C" __global__ void __launch_bounds__(256)
TJ_REDUCE_ENTRY(const float *work, int split, int M, int N, int ldw,
                float alpha, float beta, void *C, int ldc, const void *bias,
                void *aux, long long ldaux) {
  TJ_H_REDUCE_EPI_BODY();
}
#endif

#if TJ_EPI == 3
extern "C" __global__ void __launch_bounds__(256)
TJ_COLSUM_ENTRY(long long M, long long N, const void *C, long long ldc,
                float *sums) {
  tj_e_colsum<TJ_TC>(M, N, C, ldc, sums);
}
#endif

extern "C" __global__ void __launch_bounds__(256)
TJ_PAD_ENTRY(const unsigned short *src, long long ld, unsigned short *dst,
             long long ldd, long long rows, long long cols) {
  long long c = (long long)blockIdx.x * 256 + threadIdx.x;
  if (c >= cols)
    return;
  for (long long r = blockIdx.y; r < rows; r += gridDim.y)
    dst[r * ldd + c] = src[r * ld + c];
}
