/*
 * gemm_skinny_f16.hip: C = alpha * A * B + beta * C for a few rows of A,
 * fp16 in and out, fp32 accumulation, row-major as gemm_f16, with fp32
 * FMAs (M <= 8; any arch: the AMD path and older NVIDIA's).  On NVIDIA
 * sm_80 and later tj_gemm_f16 takes the tensor-core skinny kernel of
 * kernels/gemm_skinny_f16_tc.hip instead (M <= 16), a file of its own so
 * that neither path's compile waits for the other's code.
 *
 * Entries (one per row count it is built for; the caller takes the
 * smallest that is >= M and the kernel guards the rows past M)
 *   gemm_skinny_f16_m1, _m2, _m4, _m8 (int M, int N, int K,
 *       float alpha, const __half *A, int lda, const __half *B, int ldb,
 *       float beta, __half *C, int ldc)
 *   Same arguments and meaning as gemm_f16: A is M x K (A[m*lda + k]),
 *   B is K x N (B[k*ldb + n]), C is M x N (C[m*ldc + n]); M <= the entry's
 *   row count, N, K >= 1, lda >= K, ldb >= N, ldc >= N.  beta == 0: C is
 *   written, never read.  alpha == 0: A and B are not read at all (BLAS
 *   semantics; gemm_f16 differs here).
 *
 * Why a kernel of its own: with few rows, C = A * B is a stream over B
 * (K x N halves) with almost no reuse, so its speed is the memory's.  The
 * tiled kernel spends a 128-row tile on M = 1 and has N / 128 blocks; this
 * one gives each block a 32-column strip of B and all of K, so that every
 * byte of B is read once, 16 bytes per thread per load, by enough blocks
 * to fill the GPU (N = 4096: 128 blocks), each with as many threads as
 * its partial sums leave registers for, to keep bytes in flight.
 *
 * At 16 rows fp32 FMAs and the per-row loads of A bound it well below
 * the copy rate (tj-bench's skinny section): 16 rows and more stay on
 * gemm_f16's tensor cores on AMD; on NVIDIA sm_80+ the tensor-core
 * skinny path (gemm_skinny_f16_tc.hip) takes every M <= 16.
 *
 * Launch
 *   block   (T, 1, 1), T = 1024 for _m1 and _m2, 512 for _m4, 256 for _m8
 *           (each entry's __launch_bounds__)
 *   grid    (ceil(N / 32), 1, 1)
 *   shared  0 bytes of dynamic shared memory (the cross-warp sum uses
 *           static shared memory: T / 32 warps x 4 x rows x 8 floats,
 *           8 KiB at most)
 *
 * Inside a block, thread t owns columns n0 + 8 * (t % 4) .. + 7 and the
 * rows k = t / 4, t / 4 + T / 4, ... of B; its partial sums (rows x 8
 * fp32) are added across the 8 row slots of its warp with shuffles and
 * across the warps in shared memory, and warp 0 writes C.  A "warp" here is 32
 * threads; on a 64-wide AMD wavefront the xor shuffles (distances 4 to 16)
 * stay inside each half, so the same code holds there.  Summation order is
 * fixed, so a result does not depend on timing.
 *
 * Alignment
 *   Any 2-byte aligned A, B, C and any leading dimensions are correct.
 *   B is read 16 bytes at a time when B is 16-byte aligned and ldb is a
 *   multiple of 8, and the strip is whole; otherwise with 2-byte loads.
 *
 * Compiles unchanged with hipRTC (AMD) and NVRTC (NVIDIA).
 *
 * embed: configuration
 * embed: prepend gemm_skinny_f16.h
 */

#define TJ_SK_VEC 8                                 /* halves per load */
#define TJ_SK_GROUPS 4                              /* loads per strip row */
#define TJ_SK_COLS (TJ_SK_VEC * TJ_SK_GROUPS)       /* 32 columns per block */
#define TJ_SK_UNROLL 4 /* rows in flight per thread: bytes in flight */

/* HIP's shuffles take no mask; CUDA 9 and later want the _sync form. */
#if defined(__CUDA_ARCH__)
#define TJ_SK_SHFL_XOR(v, d) __shfl_xor_sync(0xffffffffu, (v), (d))
#else
#define TJ_SK_SHFL_XOR(v, d) __shfl_xor((v), (d))
#endif

/* Eight columns of row k of B, starting at n0, packed as halves (kept
 * packed until used: 4 registers a row instead of 8). */
__device__ __forceinline__ uint4 tj_sk_load_b(const tj_sk_params &p, int k,
                                              int n0, bool vec) {
  const __half *row = p.B + (long long)k * p.ldb + n0;
  if (vec)
    return *reinterpret_cast<const uint4 *>(row);
  unsigned short h[8];
  for (int j = 0; j < 8; j++)
    h[j] = n0 + j < p.N ? reinterpret_cast<const unsigned short *>(row)[j] : 0;
  uint4 w;
  w.x = h[0] | (unsigned int)h[1] << 16;
  w.y = h[2] | (unsigned int)h[3] << 16;
  w.z = h[4] | (unsigned int)h[5] << 16;
  w.w = h[6] | (unsigned int)h[7] << 16;
  return w;
}

/* acc[m][j] += A[m][k] * b[j] for the rows that exist. */
template <int MT>
__device__ __forceinline__ void tj_sk_fma(const tj_sk_params &p, int k,
                                          uint4 w, float acc[MT][8]) {
  unsigned int u[4] = {w.x, w.y, w.z, w.w};
  float b[8];
#pragma unroll
  for (int j = 0; j < 4; j++) {
    __half2 h;
    memcpy(&h, &u[j], sizeof h);
    float2 f = __half22float2(h);
    b[2 * j] = f.x;
    b[2 * j + 1] = f.y;
  }
#pragma unroll
  for (int m = 0; m < MT; m++) {
    float a = m < p.M ? __half2float(p.A[(long long)m * p.lda + k]) : 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++)
      acc[m][j] += a * b[j];
  }
}

/* This thread's rows of B, TJ_SK_UNROLL loads issued before their use so
 * that enough bytes are in flight to keep the memory busy. */
template <int MT, int THREADS>
__device__ __forceinline__ void tj_sk_stream(const tj_sk_params &p, int slot,
                                             int n0, bool vec,
                                             float acc[MT][8]) {
  const int slots = THREADS / TJ_SK_GROUPS;
  const int step = slots * TJ_SK_UNROLL;
  int k = slot;
  for (; k + (TJ_SK_UNROLL - 1) * slots < p.K; k += step) {
    uint4 b[TJ_SK_UNROLL];
#pragma unroll
    for (int u = 0; u < TJ_SK_UNROLL; u++)
      b[u] = tj_sk_load_b(p, k + u * slots, n0, vec);
#pragma unroll
    for (int u = 0; u < TJ_SK_UNROLL; u++)
      tj_sk_fma<MT>(p, k + u * slots, b[u], acc);
  }
  for (; k < p.K; k += slots) {
    tj_sk_fma<MT>(p, k, tj_sk_load_b(p, k, n0, vec), acc);
  }
}

/* Sum the partials of the 8 row slots in a warp (lanes that share
 * lane % 4), then of the 8 warps, and write C from warp 0. */
template <int MT, int THREADS>
__device__ __forceinline__ void tj_sk_finish(const tj_sk_params &p,
                                             float acc[MT][8]) {
  const int warps = THREADS / 32;
  __shared__ float part[warps][TJ_SK_GROUPS][MT][8];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int j = 0; j < 8; j++) {
      float v = acc[m][j];
      for (int d = 4; d < 32; d *= 2)
        v += TJ_SK_SHFL_XOR(v, d);
      acc[m][j] = v;
    }
  if (lane < TJ_SK_GROUPS)
    for (int m = 0; m < MT; m++)
      for (int j = 0; j < 8; j++)
        part[warp][lane][m][j] = acc[m][j];
  __syncthreads();
  if (warp != 0)
    return;
  /* 32 lanes, each one column of the strip, every row. */
  const int g = lane / 8, j = lane % 8;
  const int col = blockIdx.x * TJ_SK_COLS + lane;
  if (col >= p.N)
    return;
  for (int m = 0; m < MT && m < p.M; m++) {
    float s = 0.0f;
    for (int w = 0; w < warps; w++)
      s += part[w][g][m][j];
    __half *c = p.C + (long long)m * p.ldc + col;
    float r = p.alpha * s;
    if (p.beta != 0.0f)
      r += p.beta * __half2float(*c);
    *c = __float2half_rn(r);
  }
}

template <int MT, int THREADS>
__device__ __forceinline__ void tj_sk_run(const tj_sk_params &p) {
  const int group = threadIdx.x % TJ_SK_GROUPS;
  const int slot = threadIdx.x / TJ_SK_GROUPS;
  const int n0 = blockIdx.x * TJ_SK_COLS + group * TJ_SK_VEC;
  float acc[MT][8];
#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int j = 0; j < 8; j++)
      acc[m][j] = 0.0f;
  const bool vec = n0 + TJ_SK_VEC <= p.N && (p.ldb % 8) == 0 &&
                   (reinterpret_cast<unsigned long long>(p.B) & 15ull) == 0;
  if (p.alpha != 0.0f && n0 < p.N)
    tj_sk_stream<MT, THREADS>(p, slot, n0, vec, acc);
  tj_sk_finish<MT, THREADS>(p, acc);
}

/* contract (build-aux/kernel-contracts.sh copies it into <tokitai-jit/kernels.h>)
 *   block      1024 1 1
 *   grid       ceil(N / 32) x 1 x 1: one block per 32-column strip of C
 *   shared     0
 *   alignment  A, B, C 2-byte aligned, any leading dimensions; B is read
 *              16 bytes at a time when 16-byte aligned with ldb % 8 == 0
 *   notes      C = alpha A B + beta C, row-major, for M <= 1 rows (rows
 *              past M are not touched); N, K >= 1; lda >= K, ldb >= N,
 *              ldc >= N; beta == 0: C is not read; alpha == 0: A and B are
 *              not read; C must not overlap A or B; tj_gemm_f16 picks it
 */
extern "C" __global__ void __launch_bounds__(1024) gemm_skinny_f16_m1(int M, int N, int K, float alpha, const __half *A, int lda, const __half *B, int ldb, float beta, __half *C, int ldc) {
  tj_sk_params p = TJ_SK_PARAMS;
  tj_sk_run<1, 1024>(p);
}
/* contract (build-aux/kernel-contracts.sh copies it into <tokitai-jit/kernels.h>)
 *   block      1024 1 1
 *   grid       ceil(N / 32) x 1 x 1: one block per 32-column strip of C
 *   shared     0
 *   alignment  A, B, C 2-byte aligned, any leading dimensions; B is read
 *              16 bytes at a time when 16-byte aligned with ldb % 8 == 0
 *   notes      C = alpha A B + beta C, row-major, for M <= 2 rows (rows
 *              past M are not touched); N, K >= 1; lda >= K, ldb >= N,
 *              ldc >= N; beta == 0: C is not read; alpha == 0: A and B are
 *              not read; C must not overlap A or B; tj_gemm_f16 picks it
 */
extern "C" __global__ void __launch_bounds__(1024) gemm_skinny_f16_m2(int M, int N, int K, float alpha, const __half *A, int lda, const __half *B, int ldb, float beta, __half *C, int ldc) {
  tj_sk_params p = TJ_SK_PARAMS;
  tj_sk_run<2, 1024>(p);
}
/* contract (build-aux/kernel-contracts.sh copies it into <tokitai-jit/kernels.h>)
 *   block      512 1 1
 *   grid       ceil(N / 32) x 1 x 1: one block per 32-column strip of C
 *   shared     0
 *   alignment  A, B, C 2-byte aligned, any leading dimensions; B is read
 *              16 bytes at a time when 16-byte aligned with ldb % 8 == 0
 *   notes      C = alpha A B + beta C, row-major, for M <= 4 rows (rows
 *              past M are not touched); N, K >= 1; lda >= K, ldb >= N,
 *              ldc >= N; beta == 0: C is not read; alpha == 0: A and B are
 *              not read; C must not overlap A or B; tj_gemm_f16 picks it
 */
extern "C" __global__ void __launch_bounds__(512) gemm_skinny_f16_m4(int M, int N, int K, float alpha, const __half *A, int lda, const __half *B, int ldb, float beta, __half *C, int ldc) {
  tj_sk_params p = TJ_SK_PARAMS;
  tj_sk_run<4, 512>(p);
}
/* contract (build-aux/kernel-contracts.sh copies it into <tokitai-jit/kernels.h>)
 *   block      256 1 1
 *   grid       ceil(N / 32) x 1 x 1: one block per 32-column strip of C
 *   shared     0
 *   alignment  A, B, C 2-byte aligned, any leading dimensions; B is read
 *              16 bytes at a time when 16-byte aligned with ldb % 8 == 0
 *   notes      C = alpha A B + beta C, row-major, for M <= 8 rows (rows
 *              past M are not touched); N, K >= 1; lda >= K, ldb >= N,
 *              ldc >= N; beta == 0: C is not read; alpha == 0: A and B are
 *              not read; C must not overlap A or B; tj_gemm_f16 picks it
 */
extern "C" __global__ void __launch_bounds__(256) gemm_skinny_f16_m8(int M, int N, int K, float alpha, const __half *A, int lda, const __half *B, int ldb, float beta, __half *C, int ldc) {
  tj_sk_params p = TJ_SK_PARAMS;
  tj_sk_run<8, 256>(p);
}
