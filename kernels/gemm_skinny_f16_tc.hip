/*
 * gemm_skinny_f16_tc.hip: the tensor-core skinny GEMM (NVIDIA sm_80 and
 * later): C = alpha * A * B + beta * C for M <= 16 rows of A, fp16 in
 * and out, fp32 accumulation, row-major as gemm_f16, with mma.sync; the
 * arguments and their meaning are gemm_skinny_f16.hip's.  What the
 * entries do and why is below.
 *
 * Compiles with hipRTC (AMD) and NVRTC (NVIDIA); on AMD and on NVIDIA
 * before sm_80 its entries are stubs that trap.
 *
 * embed: configuration
 * embed: prepend gemm_skinny_f16.h
 */

/* ------------------------------------------------ the entries
 *
 * gemm_skinny_f16_tc_n32, gemm_skinny_f16_tc_n64 (int M, int N, int K,
 *     float alpha, const __half *A, int lda, const __half *B, int ldb,
 *     float beta, __half *C, int ldc, int kper, float *work)
 *   The same product for any M from 1 to 16 on NVIDIA sm_80 and later,
 *   with mma.sync m16n8k16 (f16 in, f32 accumulate) instead of fp32
 *   FMAs.  Block (x, y) owns columns [x * BN, x * BN + BN) of C and the
 *   K-range [y * kper, y * kper + kper) (cut at K); kper = K and
 *   gridDim.y = 1 when K is not split.  work == NULL: the block writes C
 *   (alpha * acc + beta * C, C read only when beta != 0).  work != NULL
 *   (split-K): it writes its fp32 partial sums, rows below M, to slice y
 *   of work (gridDim.y x M x ldw floats, ldw = gridDim.x * BN), and
 *   gemm_skinny_f16_tc_reduce adds the slices into C in order.
 *
 * Why it is faster than gemm_skinny_f16.hip's FMA entries: at 16 rows
 * those spend 16 FMAs and a load of A per half of B; here one mma covers
 * a 16 x 8 x 16 block, so the work per byte of B is a few instructions,
 * and what is left to get right is the memory: each block keeps STAGES -
 * 1 stages of B (BK x BN halves) and A (16 x BK) in flight with cp.async
 * (16-byte copies that bypass L1 and the registers), 36 to 40 KiB of B
 * per block, and the grid is sized so that every block is resident at
 * once (three blocks fit an SM), which makes the SMs share the memory's
 * bandwidth evenly instead of leaving a tail wave.
 *
 * Inside a block: 4 warps, each one k16 slice of the 64-row stage (split
 * K inside the block, so a warp loads one A fragment and BN / 16 B
 * fragment pairs per stage and does BN / 8 mma); the 4 warps' 16 x BN
 * accumulators are added in shared memory in warp order at the end, so
 * the result does not depend on timing.  A's rows M..15 are zero in
 * shared memory and never loaded; rows of B past K (or past the block's
 * K-range) and columns past N are zero-filled by the copies.  Shared
 * memory rows are XOR-swizzled in 16-byte chunks so that the 8 rows one
 * ldmatrix reads fall in 8 different bank groups.
 *
 * alpha == 0: neither A nor B is read (acc stays 0).  A and B are copied
 * 16 bytes at a time when 16-byte aligned with lda (ldb) a multiple of 8;
 * otherwise with 2-byte loads (correct for any 2-byte aligned pointer,
 * much slower).  On AMD and on NVIDIA before sm_80 these entries are
 * stubs that trap: tj_gemm_f16 does not launch them there.
 *
 * Status: compiles for sm_80, sm_89 and sm_90 with no spills, with 4
 * and 8 HMMA per stage (tests/gemm_isa_skinny.sh).  Why it is
 * memory-bound: at 1..16 x 4096 x 4096, 128 blocks of 32 columns, one
 * per SM, each keep 9 stages (36 KiB of B) in flight, more across the
 * GPU than the memory's bandwidth times its latency, and a block's loop
 * (a barrier, three copies, three ldmatrix and four mma) is short next
 * to the time one stage takes to arrive.  11008 columns: 172 blocks of
 * 64, all resident.  What keeps a small read below the copy rate of a
 * large copy is the fixed cost of a launch (ramp-up, the last blocks'
 * tail).
 */

#define TJ_SKT_THREADS 128
#define TJ_SKT_BK 64                         /* k rows per stage */
#define TJ_SKT_A_BYTES (16 * TJ_SKT_BK * 2)  /* 16 rows of 128 bytes */
#define TJ_SKT_B_BYTES(bn) (TJ_SKT_BK * (bn) * 2)
#define TJ_SKT_STAGE_BYTES(bn) (TJ_SKT_A_BYTES + TJ_SKT_B_BYTES(bn))

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define TJ_SKT_MMA 1
#endif

#if TJ_SKT_MMA
__device__ __forceinline__ unsigned int tj_skt_smem_addr(const void *p) {
  unsigned int r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }"
      : "=r"(r)
      : "l"(p));
  return r;
}

/* 16 bytes global -> shared; bytes past src_bytes are zero-filled and
 * not read. */
__device__ __forceinline__ void tj_skt_cp16(unsigned int dst, const void *src,
                                            unsigned int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
               "l"(src), "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void tj_skt_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int PENDING> __device__ __forceinline__ void tj_skt_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

__device__ __forceinline__ void tj_skt_st16(unsigned int dst, unsigned int a,
                                            unsigned int b, unsigned int c,
                                            unsigned int d) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst),
               "r"(a), "r"(b), "r"(c), "r"(d)
               : "memory");
}

/* 8 halves from src into shared memory: the first `valid` read, the rest
 * zero.  vec: one cp.async (src 16-byte aligned); else 2-byte loads and
 * a 16-byte store.  Nothing past `valid` is read, and with valid == 0
 * only `base` (the matrix's own first element) is handed to cp.async. */
__device__ __forceinline__ void tj_skt_chunk(unsigned int dst,
                                             const __half *base,
                                             long long offset, int valid,
                                             bool vec) {
  if (vec) {
    tj_skt_cp16(dst, valid > 0 ? base + offset : base,
                (unsigned int)valid * 2u);
    return;
  }
  const unsigned short *s = reinterpret_cast<const unsigned short *>(
      valid > 0 ? base + offset : base);
  unsigned int w[4];
#pragma unroll
  for (int j = 0; j < 4; j++) {
    unsigned int lo = 2 * j < valid ? s[2 * j] : 0u;
    unsigned int hi = 2 * j + 1 < valid ? s[2 * j + 1] : 0u;
    w[j] = lo | (hi << 16);
  }
  tj_skt_st16(dst, w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ int tj_skt_clamp8(int n) {
  return n < 0 ? 0 : (n > 8 ? 8 : n);
}

/* Chunk c of B row r lives at chunk c ^ tj_skt_swz_b(r): a row holds
 * BN / 8 chunks, 128 / (BN * 2) rows share 128 bytes, and 8 consecutive
 * rows at one chunk then cover all 8 16-byte bank groups. */
template <int BN> __device__ __forceinline__ int tj_skt_swz_b(int r) {
  return (r / (128 / (BN * 2))) % (BN / 8);
}

/* One stage: B rows k0 .. k0 + 63 (zero at and past kend), columns n0 ..
 * n0 + BN - 1 (zero past N); A rows 0 .. M-1 at the same k. */
template <int BN>
__device__ __forceinline__ void tj_skt_load(const tj_sk_params &p,
                                            unsigned int s_a, int n0, int k0,
                                            int kend, bool a_vec, bool b_vec) {
  const int tid = threadIdx.x;
  const unsigned int s_b = s_a + TJ_SKT_A_BYTES;
#pragma unroll
  for (int i = 0; i < TJ_SKT_BK * BN / 8 / TJ_SKT_THREADS; i++) {
    int idx = tid + i * TJ_SKT_THREADS;
    int r = idx / (BN / 8), c = idx % (BN / 8);
    int gk = k0 + r, gn = n0 + c * 8;
    int valid = gk < kend ? tj_skt_clamp8(p.N - gn) : 0;
    tj_skt_chunk(s_b + r * (BN * 2) + ((c ^ tj_skt_swz_b<BN>(r)) << 4), p.B,
                 (long long)gk * p.ldb + gn, valid, b_vec);
  }
  if (tid < p.M * 8) {
    int r = tid / 8, c = tid % 8, gk = k0 + c * 8;
    tj_skt_chunk(s_a + r * (TJ_SKT_BK * 2) + ((c ^ (r & 7)) << 4), p.A,
                 (long long)r * p.lda + gk, tj_skt_clamp8(kend - gk), a_vec);
  }
}

__device__ __forceinline__ void tj_skt_mma(float c[4], const unsigned int a[4],
                                           unsigned int b0, unsigned int b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* This warp's k16 slice of one stage.  ldmatrix.x4 lanes 0-15 address
 * A rows 0-15 at k 0-7 of the slice, lanes 16-31 the same rows at k 8-15:
 * a0..a3 as mma wants them.  ldmatrix.x4.trans lanes 0-7 / 8-15 address
 * k 0-7 / 8-15 of columns 16p .. 16p + 7, lanes 16-31 the same for the
 * next 8 columns: b0, b1 of two n8 tiles. */
template <int BN>
__device__ __forceinline__ void tj_skt_compute(unsigned int s_a, int warp,
                                               int lane,
                                               float acc[BN / 8][4]) {
  const unsigned int s_b = s_a + TJ_SKT_A_BYTES;
  unsigned int a[4];
  {
    int row = lane & 15, chunk = 2 * warp + (lane >> 4);
    unsigned int addr = s_a + row * (TJ_SKT_BK * 2) + ((chunk ^ (row & 7)) << 4);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, "
                 "[%4];\n"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                 : "r"(addr)
                 : "memory");
  }
  int krow = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
  for (int p = 0; p < BN / 16; p++) {
    int chunk = 2 * p + (lane >> 4);
    unsigned int addr =
        s_b + krow * (BN * 2) + ((chunk ^ tj_skt_swz_b<BN>(krow)) << 4);
    unsigned int r[4];
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, "
                 "%2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
    tj_skt_mma(acc[2 * p], a, r[0], r[1]);
    tj_skt_mma(acc[2 * p + 1], a, r[2], r[3]);
  }
}

template <int BN, int STAGES>
__device__ __forceinline__ void tj_skt_gemm(const tj_sk_params &p, int kper,
                                            float *work) {
  extern __shared__ __align__(128) unsigned char tj_skt_smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int n0 = blockIdx.x * BN;
  const int kbeg = blockIdx.y * kper;
  const int left = p.K - kbeg;
  const int kend = kbeg + (left < kper ? left : kper);
  const int ktiles = (kend - kbeg + TJ_SKT_BK - 1) / TJ_SKT_BK;
  const unsigned int s_base = tj_skt_smem_addr(tj_skt_smem);
  float acc[BN / 8][4];
#pragma unroll
  for (int i = 0; i < BN / 8; i++)
#pragma unroll
    for (int j = 0; j < 4; j++)
      acc[i][j] = 0.0f;

  if (p.alpha != 0.0f) {
    const bool a_vec =
        (reinterpret_cast<unsigned long long>(p.A) & 15ull) == 0 &&
        (p.lda & 7) == 0;
    const bool b_vec =
        (reinterpret_cast<unsigned long long>(p.B) & 15ull) == 0 &&
        (p.ldb & 7) == 0;
    /* A's rows M..15, in every stage: zero once, never loaded. */
    for (int i = tid; i < STAGES * 16 * 8; i += TJ_SKT_THREADS) {
      int s = i / 128, r = (i % 128) / 8, c = i % 8;
      if (r >= p.M)
        tj_skt_st16(s_base + s * TJ_SKT_STAGE_BYTES(BN) + r * (TJ_SKT_BK * 2) +
                        (c << 4),
                    0u, 0u, 0u, 0u);
    }
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
      if (s < ktiles)
        tj_skt_load<BN>(p, s_base + s * TJ_SKT_STAGE_BYTES(BN), n0,
                        kbeg + s * TJ_SKT_BK, kend, a_vec, b_vec);
      tj_skt_commit();
    }
    int use = 0, fill = STAGES - 1;
    for (int kt = 0; kt < ktiles; kt++) {
      /* Every group but the newest STAGES - 2 has landed: tile kt has. */
      tj_skt_wait<STAGES - 2>();
      __syncthreads();
      /* The stage refilled is the one every warp finished at kt - 1. */
      if (kt + STAGES - 1 < ktiles)
        tj_skt_load<BN>(p, s_base + fill * TJ_SKT_STAGE_BYTES(BN), n0,
                        kbeg + (kt + STAGES - 1) * TJ_SKT_BK, kend, a_vec,
                        b_vec);
      tj_skt_commit();
      tj_skt_compute<BN>(s_base + use * TJ_SKT_STAGE_BYTES(BN), warp, lane,
                         acc);
      use = use + 1 == STAGES ? 0 : use + 1;
      fill = fill + 1 == STAGES ? 0 : fill + 1;
    }
    tj_skt_wait<0>();
  }
  __syncthreads();

  /* The 4 warps' accumulators, added in warp order.  mma's C fragment:
   * c0, c1 at row lane / 4, columns 2 * (lane % 4) + 0, 1 of its n8
   * tile; c2, c3 eight rows down. */
  float *red = reinterpret_cast<float *>(tj_skt_smem);
  const int row = lane >> 2;
#pragma unroll
  for (int nt = 0; nt < BN / 8; nt++) {
    int col = nt * 8 + (lane & 3) * 2;
    float *w = red + (warp * 16 + row) * BN + col;
    w[0] = acc[nt][0];
    w[1] = acc[nt][1];
    w[8 * BN] = acc[nt][2];
    w[8 * BN + 1] = acc[nt][3];
  }
  __syncthreads();
  const int ldw = gridDim.x * BN;
  for (int e = tid; e < p.M * BN; e += TJ_SKT_THREADS) {
    int m = e / BN, j = e % BN, n = n0 + j;
    if (n >= p.N)
      continue;
    float s = red[m * BN + j];
#pragma unroll
    for (int w = 1; w < TJ_SKT_THREADS / 32; w++)
      s += red[(w * 16 + m) * BN + j];
    if (work) {
      work[((long long)blockIdx.y * p.M + m) * ldw + n] = s;
      continue;
    }
    __half *c = p.C + (long long)m * p.ldc + n;
    float r = p.alpha * s;
    if (p.beta != 0.0f)
      r += p.beta * __half2float(*c);
    *c = __float2half_rn(r);
  }
}

#define TJ_SKT_BODY(bn, stages) tj_skt_gemm<bn, stages>(p, kper, work)
#else
/* Not NVIDIA sm_80+: the entries exist (every arch compiles every
 * embedded kernel) but must never run; tj_gemm_f16 does not launch them
 * there. */
#if defined(__CUDA_ARCH__)
#define TJ_SKT_BODY(bn, stages) asm volatile("trap;")
#else
#define TJ_SKT_BODY(bn, stages) __builtin_trap()
#endif
#endif

/* contract (build-aux/kernel-contracts.sh copies it into <tokitai-jit/kernels.h>)
 *   block      128 1 1
 *   grid       (ceil(N / 32), split, 1): one block per 32-column strip of
 *              C and K-range of kper rows; split = ceil(K / kper)
 *   shared     61440
 *   alignment  A, B, C 2-byte aligned, any leading dimensions; A and B
 *              are copied 16 bytes at a time when 16-byte aligned with
 *              lda (ldb) % 8 == 0; work 4-byte aligned
 *   notes      C = alpha A B + beta C, row-major, for M <= 16 rows, with
 *              mma.sync; N, K >= 1; lda >= K, ldb >= N, ldc >= N; beta ==
 *              0: C is not read; alpha == 0: A and B are not read.  work
 *              NULL (then kper = K, split 1): C is written.  Else kper a
 *              multiple of 64 and the fp32 partials go to work (split x M
 *              x ceil(N / 32) * 32 floats) for gemm_skinny_f16_tc_reduce.
 *              NVIDIA sm_80 and later only (traps elsewhere); raise the
 *              function's shared memory limit first; tj_gemm_f16 picks it
 */
extern "C" __global__ void __launch_bounds__(128) gemm_skinny_f16_tc_n32(int M, int N, int K, float alpha, const __half *A, int lda, const __half *B, int ldb, float beta, __half *C, int ldc, int kper, float *work) {
  tj_sk_params p = TJ_SK_PARAMS;
  TJ_SKT_BODY(32, 10);
}
/* contract (build-aux/kernel-contracts.sh copies it into <tokitai-jit/kernels.h>)
 *   block      128 1 1
 *   grid       (ceil(N / 64), split, 1): one block per 64-column strip of
 *              C and K-range of kper rows; split = ceil(K / kper)
 *   shared     61440
 *   alignment  as gemm_skinny_f16_tc_n32
 *   notes      as gemm_skinny_f16_tc_n32, with 64-column strips (work:
 *              split x M x ceil(N / 64) * 64 floats)
 */
extern "C" __global__ void __launch_bounds__(128) gemm_skinny_f16_tc_n64(int M, int N, int K, float alpha, const __half *A, int lda, const __half *B, int ldb, float beta, __half *C, int ldc, int kper, float *work) {
  tj_sk_params p = TJ_SK_PARAMS;
  TJ_SKT_BODY(64, 6);
}
/* contract (build-aux/kernel-contracts.sh copies it into <tokitai-jit/kernels.h>)
 *   block      256 1 1
 *   grid       (ceil(N / 256), M, 1)
 *   shared     0
 *   alignment  work 4-byte aligned, C 2-byte aligned
 *   notes      C = alpha * (the sum of the split slices of work, in order
 *              z = 0, 1, ...) + beta * C, C read only when beta != 0; work
 *              as gemm_skinny_f16_tc_n32 / _n64 write it, ldw floats from
 *              one row to the next.  Portable code (runs on any arch)
 */
extern "C" __global__ void __launch_bounds__(256) gemm_skinny_f16_tc_reduce(const float *work, int split, int M, int N, int ldw, float alpha, float beta, __half *C, int ldc) {
  const int n = blockIdx.x * 256 + threadIdx.x, m = blockIdx.y;
  if (n >= N || m >= M)
    return;
  float s = 0.0f;
  for (int z = 0; z < split; z++)
    s += work[((long long)z * M + m) * ldw + n];
  __half *c = C + (long long)m * ldc + n;
  float r = alpha * s;
  if (beta != 0.0f)
    r += beta * __half2float(*c);
  *c = __float2half_rn(r);
}
