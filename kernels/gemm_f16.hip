/*
 * gemm_f16.hip: C = alpha * A * B + beta * C on fp16 matrices, fp32
 * accumulation, all row-major: tj_gemm_f16's "gemm_f16" entry, and, with
 * the family's choices as -D constants, tj_gemm's tensor-core path.
 *
 * Compile-time constants (-D; each default gives the gemm_f16 entry)
 *   TJ_TA         element type of A and B (one type): 1 f16, 2 bf16
 *   TJ_TC         element type of C, bias and aux: 1 f16, 2 bf16, 3 f32
 *   TJ_TRANS_A, TJ_TRANS_B, TJ_EPI
 *                 as gemm_portable.hip says: op(A) is A or, with
 *                 TJ_TRANS_A, A stored K x M (A[k*lda + m]); op(B) is B or
 *                 B stored N x K (B[n*ldb + k]); the epilogue of
 *                 gemm_epilogue.h (which the library's copy of this file
 *                 starts with)
 *   TJ_GEMM_ENTRY, TJ_COLSUM_ENTRY
 *                 when given, the file holds these two entries instead
 *                 of gemm_f16: the family's configuration, named from its
 *                 choices
 *
 * Family entries (with TJ_GEMM_ENTRY)
 *   TJ_GEMM_ENTRY(long long M, long long N, long long K, float alpha,
 *                 const void *A, long long lda, const void *B,
 *                 long long ldb, float beta, void *C, long long ldc,
 *                 const void *bias, void *aux, long long ldaux)
 *       C = epilogue(alpha * op(A) * op(B) + beta * C), launched as
 *       gemm_f16 is (below); M, N, K, lda, ldb and ldc must fit in an
 *       int.  alpha == 0 still reads A and B (tj_gemm sends such calls
 *       to the portable kernel).
 *   TJ_COLSUM_ENTRY(long long M, long long N, const void *C,
 *                   long long ldc, float *sums)
 *       block (256, 1, 1), grid (ceil(N / 32), 1, 1): gemm_epilogue.h's
 *       tj_e_colsum, the bias gradient after a dGELU.
 *   Transposed operands lie in shared memory as they lie in memory and
 *   are read with ldmatrix.trans where the other layout reads without it
 *   (NVIDIA); on AMD the global -> LDS copy transposes them.
 *
 * Entry
 *   gemm_f16(int M, int N, int K, float alpha, const __half *A, int lda,
 *            const __half *B, int ldb, float beta, __half *C, int ldc)
 *   A is M x K (element (m,k) at A[m*lda + k]), B is K x N (B[k*ldb + n]),
 *   C is M x N (C[m*ldc + n]).  Any M, N >= 1 and K >= 0 (tj_gemm_f16
 *   itself asks for K >= 1, as BLAS callers mean a product); lda >= K,
 *   ldb >= N, ldc >= N.  When beta == 0, C is only written, never read, so
 *   whatever it held (NaN included) does not reach the result.  C must not
 *   overlap A or B.
 *
 * Launch (the same on AMD and NVIDIA)
 *   block   (128, 1, 1)
 *   grid    (ceil(N / 128), ceil(M / 128), 1): one block per 128 x 128 tile
 *           of C; M <= 65535 * 128 because of the grid's y limit
 *   shared  0 bytes of dynamic shared memory (all of it is static: 48 KiB
 *           on NVIDIA sm_80 and later, 16.5 KiB elsewhere)
 *   M == 0 or N == 0 means there is nothing to do: do not launch (a grid
 *   dimension would be 0).  K == 0 gives C = beta * C (0 when beta == 0).
 *
 * Alignment
 *   Any 2-byte aligned A, B, C and any leading dimensions are correct.
 *   On NVIDIA sm_80+, A is fetched 16 bytes at a time with cp.async when
 *   A is 16-byte aligned and lda is a multiple of 8, and likewise B with
 *   ldb; otherwise that operand is fetched with guarded 2-byte loads,
 *   which is much slower (tj-bench's GEMM section times both).  C is
 *   written in pairs when C is
 *   4-byte aligned and ldc is even.
 *
 * Paths
 *   On an sm_90 device tj_gemm_f16 runs gemm_sm90a.hip's configurations (wgmma, TMA)
 *   instead wherever its preconditions hold; this kernel takes the rest.
 *   NVIDIA sm_80+ (__CUDA_ARCH__ >= 800): tensor cores through inline PTX
 *   mma.sync m16n8k16 (f16 or bf16 in, f32 accumulate).  A 128 x 128 x
 *   32 block tile, 4 warps of 64 x 64 each, a three-stage cp.async pipeline, and
 *   ldmatrix from XOR-swizzled shared memory (no padding, no bank
 *   conflicts).  Edge tiles in M, N and K are zero-filled on load and
 *   guarded on store.  tj-bench's GEMM section compares it with cuBLAS
 *   (cublasGemmEx, fp32 compute), whose results it matches bit for bit.
 *   AMD CDNA (gfx908, gfx90a, gfx94x) and RDNA3 (gfx1100 to gfx1103),
 *   where the compiler has the builtins: the matrix cores, through
 *   __builtin_amdgcn_mfma_f32_16x16x16f16 (bf16: ..._16x16x16bf16_1k,
 *   gfx90a and gfx94x only; 2 waves of 64, each 64 x 128) or
 *   __builtin_amdgcn_wmma_f32_16x16x16_f16_w32 (bf16: ..._bf16_w32; 4
 *   waves of 32, each 64 x 64), from 128 x 128 x 32 tiles in LDS with B transposed, loaded
 *   with guarded 2-byte reads (any alignment).  Shown only in the code
 *   object: v_mfma / v_wmma in its disassembly (tests/gemm_isa.sh); the
 *   GPU suite has not run these paths on an AMD GPU.
 *   Everything else (other AMD archs, older NVIDIA): a portable fp32
 *   tile in shared memory, 128 x 128 x 16, each thread a 16 x 8 block of C.
 *
 *   alpha == 0 still computes A * B (so inf or NaN in A or B gives NaN),
 *   unlike BLAS, which skips the product then.
 *
 * Compiles unchanged with hipRTC (AMD) and NVRTC (NVIDIA); no fp16 header
 * is included, since both compilers provide __half and its conversions.
 *
 * embed: prepend gemm_epilogue.h
 */

#ifndef TJ_TA
#define TJ_TA 1
#endif
#ifndef TJ_TC
#define TJ_TC 1
#endif
#ifndef TJ_TRANS_A
#define TJ_TRANS_A 0
#endif
#ifndef TJ_TRANS_B
#define TJ_TRANS_B 0
#endif
#ifndef TJ_EPI
#define TJ_EPI 0
#endif

#define TJ_GEMM_THREADS 128
#define TJ_GEMM_BM 128
#define TJ_GEMM_BN 128

/* The parameters, gathered so that helpers take one argument.  A and B
 * are the bits of TJ_TA elements; C, bias and aux hold TJ_TC. */
struct tj_gemm_params {
  int M, N, K;
  float alpha, beta;
  const unsigned short *A, *B;
  void *C;
  int lda, ldb, ldc;
  const void *bias;
  void *aux;
  long long ldaux;
};

__device__ __forceinline__ int tj_clamp_count(int remaining, int max) {
  return remaining < 0 ? 0 : (remaining > max ? max : remaining);
}

/* The epilogue of alpha*acc + beta*C at (row, col).  Reading C only when
 * beta != 0 keeps NaN poison out. */
__device__ __forceinline__ void tj_store_one(const tj_gemm_params &g,
                                             int row, int col, float v) {
  if (row >= g.M || col >= g.N)
    return;
  long long i = (long long)row * g.ldc + col;
  float r = g.alpha * v;
  if (g.beta != 0.0f)
    r += g.beta * tj_e_load<TJ_TC>(g.C, i);
  tj_e_store<TJ_TC>(g.C, i,
                    tj_e_apply<TJ_TC, TJ_EPI>(r, row, col, g.bias, g.aux,
                                              g.ldaux));
}

/* lo and hi rounded to 16-bit C, as one word (lo in the low half). */
__device__ __forceinline__ unsigned int tj_pack2(float lo, float hi) {
#if TJ_TC == 1
  __half2 h = __floats2half2_rn(lo, hi);
  unsigned int w;
  memcpy(&w, &h, sizeof w);
  return w;
#else
  return (unsigned int)tj_e_bits<TJ_TC>(lo) |
         ((unsigned int)tj_e_bits<TJ_TC>(hi) << 16);
#endif
}

/* (row, col) and (row, col+1), as one 4-byte access when C is 16-bit and
 * allows it. */
__device__ __forceinline__ void tj_store_pair(const tj_gemm_params &g,
                                              int row, int col, float v0,
                                              float v1, bool pairs_ok) {
  if (TJ_TC == 3 || !pairs_ok || row >= g.M || col + 1 >= g.N) {
    tj_store_one(g, row, col, v0);
    tj_store_one(g, row, col + 1, v1);
    return;
  }
  unsigned int *cw = reinterpret_cast<unsigned int *>(
      static_cast<unsigned short *>(g.C) + (long long)row * g.ldc + col);
  unsigned int old = 0;
  if (g.beta != 0.0f)
    old = *cw;
  float o0 = tj_e_load<TJ_TC>(&old, 0), o1 = tj_e_load<TJ_TC>(&old, 1);
  float r0 = tj_e_apply<TJ_TC, TJ_EPI>(g.alpha * v0 + g.beta * o0, row, col,
                                       g.bias, g.aux, g.ldaux);
  float r1 = tj_e_apply<TJ_TC, TJ_EPI>(g.alpha * v1 + g.beta * o1, row,
                                       col + 1, g.bias, g.aux, g.ldaux);
  *cw = tj_pack2(r0, r1);
}

__device__ __forceinline__ bool tj_pairs_ok(const tj_gemm_params &g) {
  return (reinterpret_cast<unsigned long long>(g.C) & 3ull) == 0 &&
         (g.ldc & 1) == 0;
}

/* Which AMD matrix instructions this compile may use: MFMA on CDNA
 * (wave64; f16 on gfx908, gfx90a, gfx94x, bf16 with the "_1k" builtins of
 * gfx90a and gfx94x), WMMA on RDNA3 (gfx11; wave32), each only where the
 * compiler has the builtin.  Anything else, the portable path below. */
#if defined(__HIP_DEVICE_COMPILE__) && defined(__AMDGCN__) && defined(__has_builtin)
#if TJ_TA == 2
#if (defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) ||  \
     defined(__gfx942__)) &&                                               \
    __has_builtin(__builtin_amdgcn_mfma_f32_16x16x16bf16_1k)
#define TJ_GEMM_MFMA 1
#endif
#elif (defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) || \
       defined(__gfx941__) || defined(__gfx942__)) &&                      \
    __has_builtin(__builtin_amdgcn_mfma_f32_16x16x16f16)
#define TJ_GEMM_MFMA 1
#endif
#if !defined(TJ_GEMM_MFMA) &&                                              \
    (defined(__gfx1100__) || defined(__gfx1101__) ||                       \
     defined(__gfx1102__) || defined(__gfx1103__)) &&                      \
    defined(__AMDGCN_WAVEFRONT_SIZE) && __AMDGCN_WAVEFRONT_SIZE == 32
#if (TJ_TA == 2 && __has_builtin(__builtin_amdgcn_wmma_f32_16x16x16_bf16_w32)) || \
    (TJ_TA != 2 && __has_builtin(__builtin_amdgcn_wmma_f32_16x16x16_f16_w32))
#define TJ_GEMM_WMMA 1
#endif
#endif
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
/* ------------------------------------------------ NVIDIA tensor cores */

/* 4 warps in a 2 x 2 grid, each owning 64 x 64 of the block's C tile:
 * MT x NT = 4 x 8 mma tiles of 16 x 8.  Each operand's tile lies in
 * shared memory as it lies in global memory.  K-major (A, or B with
 * TJ_TRANS_B): 128 rows of 32 elements (64 bytes, CA = 4 chunks of 16
 * bytes), read with ldmatrix.  M- or N-major (B, or A with TJ_TRANS_A):
 * 32 rows of 128 elements (256 bytes, CB = 16 chunks), read with
 * ldmatrix.trans.  Both are 8 KiB; three stages of both fill 48 KiB, the
 * most static shared memory a kernel may have.
 *
 * The tile shape and the code layout are the fastest of those timed with
 * tj-bench's GEMM section (8 warps of 64 x 32, 256 x 128 and 128 x 256
 * blocks, and BK = 16 with more stages are all slower).  ptxas is
 * sensitive to the shape of this code: equivalent rewrites that move the
 * per-thread copy addresses into a struct run slower. */
#define TJ_GEMM_BK 32
#define TJ_GEMM_STAGES 3
#define TJ_GEMM_WARPS_M 2
#define TJ_GEMM_WARPS_N 2
#define TJ_GEMM_WM (TJ_GEMM_BM / TJ_GEMM_WARPS_M)
#define TJ_GEMM_WN (TJ_GEMM_BN / TJ_GEMM_WARPS_N)
#define TJ_GEMM_MT (TJ_GEMM_WM / 16)
#define TJ_GEMM_NT (TJ_GEMM_WN / 8)
#define TJ_GEMM_CA (TJ_GEMM_BK / 8)
#define TJ_GEMM_LA (128 / (TJ_GEMM_BK * 2)) /* K-major rows per 128 bytes */
#define TJ_GEMM_CB (TJ_GEMM_BN / 8)
/* 16-byte chunks each thread copies of a tile, in either layout. */
#define TJ_GEMM_CHUNKS (TJ_GEMM_BM * TJ_GEMM_CA / TJ_GEMM_THREADS)
#define TJ_GEMM_A_BYTES (TJ_GEMM_BM * TJ_GEMM_BK * 2)
#define TJ_GEMM_B_BYTES (TJ_GEMM_BK * TJ_GEMM_BN * 2)
#define TJ_GEMM_STAGE_BYTES (TJ_GEMM_A_BYTES + TJ_GEMM_B_BYTES)
#define TJ_A_KMAJOR (!TJ_TRANS_A)
#define TJ_B_KMAJOR (TJ_TRANS_B)

__device__ __forceinline__ unsigned int tj_smem_addr(const void *p) {
  unsigned int r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }"
      : "=r"(r)
      : "l"(p));
  return r;
}

/* 16 bytes global -> shared, asynchronously; bytes past src_bytes are
 * zero-filled and not read, which is how edge tiles are padded. */
__device__ __forceinline__ void tj_cp_async16(unsigned int dst,
                                              const void *src,
                                              unsigned int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
               "l"(src), "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void tj_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int PENDING> __device__ __forceinline__ void tj_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

/* The slow way for an operand that cannot use 16-byte copies: 2-byte
 * loads, zeros past `valid`, one 16-byte shared store. */
__device__ __forceinline__ void tj_chunk_scalar(unsigned int dst,
                                                const unsigned short *s,
                                                int valid) {
  unsigned int w[4];
#pragma unroll
  for (int j = 0; j < 4; j++) {
    unsigned int lo = 2 * j < valid ? s[2 * j] : 0u;
    unsigned int hi = 2 * j + 1 < valid ? s[2 * j + 1] : 0u;
    w[j] = lo | (hi << 16);
  }
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst),
               "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
               : "memory");
}

/* 8 elements of one row into shared memory, the first `valid` from
 * base + offset and the rest zero.  base itself is what cp.async is
 * handed when nothing is to be read, so that no address past the
 * matrix is ever formed. */
__device__ __forceinline__ void tj_chunk_to_smem(unsigned int dst,
                                                 const unsigned short *base,
                                                 long long offset, int valid,
                                                 bool vec) {
  if (vec)
    tj_cp_async16(dst, valid > 0 ? base + offset : base,
                  (unsigned int)valid * 2u);
  else if (valid > 0)
    tj_chunk_scalar(dst, base + offset, valid);
  else
    tj_chunk_scalar(dst, base, 0);
}

/* Row r of a K-major tile keeps its chunk c at c ^ tj_swizzle_a(r): the 8
 * rows one ldmatrix reads then fall in 8 different 16-byte bank groups,
 * with no padding.  (The 256-byte rows of the other layout swizzle by
 * r & 7.) */
__device__ __forceinline__ int tj_swizzle_a(int row) {
  return (row / TJ_GEMM_LA) % TJ_GEMM_CA;
}

/* Where chunk c of row r of a tile lies in shared memory (bytes from the
 * tile's start). */
template <int KMAJ>
__device__ __forceinline__ unsigned int tj_tile_off(int r, int c) {
  return KMAJ ? r * (TJ_GEMM_BK * 2) + ((c ^ tj_swizzle_a(r)) << 4)
              : r * (TJ_GEMM_BN * 2) + ((c ^ (r & 7)) << 4);
}

/* Thread tid's i-th chunk of a tile: its row r and chunk c.  Consecutive
 * threads take consecutive chunks of a row. */
template <int KMAJ>
__device__ __forceinline__ void tj_chunk_rc(int tid, int i, int &r, int &c) {
  int idx = tid + i * TJ_GEMM_THREADS;
  r = KMAJ ? idx / TJ_GEMM_CA : idx / TJ_GEMM_CB;
  c = KMAJ ? idx % TJ_GEMM_CA : idx % TJ_GEMM_CB;
}

/* Elements from an operand's tile origin (row mn0 or k0 of its stored
 * rows) to chunk c of tile row r. */
template <int KMAJ>
__device__ __forceinline__ long long tj_chunk_src(int r, int c, int mn0,
                                                  int ld) {
  return KMAJ ? (long long)(mn0 + r) * ld + c * 8
              : (long long)r * ld + mn0 + c * 8;
}

/* Bounds-checked copy of one k tile of an operand (mn extent MN, stored
 * rows ld apart) into shared memory at s: edge blocks, the last partial
 * k tile, or an operand that cannot use 16-byte copies. */
template <int KMAJ>
__device__ __forceinline__ void tj_load_tile(const unsigned short *p, int ld,
                                             int MN, int K, unsigned int s,
                                             int mn0, int k0, int tid,
                                             bool vec) {
#pragma unroll
  for (int i = 0; i < TJ_GEMM_CHUNKS; i++) {
    int r, c;
    tj_chunk_rc<KMAJ>(tid, i, r, c);
    int gmn = mn0 + (KMAJ ? r : c * 8), gk = k0 + (KMAJ ? c * 8 : r);
    int valid = KMAJ ? (gmn < MN ? tj_clamp_count(K - gk, 8) : 0)
                     : (gk < K ? tj_clamp_count(MN - gmn, 8) : 0);
    long long off = KMAJ ? (long long)gmn * ld + gk : (long long)gk * ld + gmn;
    tj_chunk_to_smem(s + tj_tile_off<KMAJ>(r, c), p, off, valid, vec);
  }
}

__device__ __forceinline__ void tj_ldmatrix_x4(unsigned int r[4],
                                               unsigned int addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, "
               "[%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

__device__ __forceinline__ void tj_ldmatrix_x4_trans(unsigned int r[4],
                                                     unsigned int addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, "
               "%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

#if TJ_TA == 2
#define TJ_MMA_TYPES "bf16.bf16"
#else
#define TJ_MMA_TYPES "f16.f16"
#endif

__device__ __forceinline__ void tj_mma_16816(float c[4],
                                             const unsigned int a[4],
                                             const unsigned int b[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32." TJ_MMA_TYPES ".f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* A fragment (16 x 16: a0..a3 as mma wants them) of rows m (in the
 * block's tile) at k step ks.  K-major: ldmatrix.x4 lanes 0-15 address
 * rows 0-15 at k 0-7, lanes 16-31 the same rows at k 8-15.  M-major
 * (.trans): lanes 0-7 / 8-15 address k 0-7 of m 0-7 / 8-15, lanes 16-31
 * the same at k 8-15. */
__device__ __forceinline__ void tj_frag_a(unsigned int a[4], unsigned int s_a,
                                          int m, int ks, int lane) {
#if TJ_A_KMAJOR
  int row = m + (lane & 15), chunk = ks * 2 + (lane >> 4);
  tj_ldmatrix_x4(a, s_a + tj_tile_off<1>(row, chunk));
#else
  int krow = ks * 16 + (lane & 7) + (lane >> 4) * 8;
  int chunk = m / 8 + ((lane >> 3) & 1);
  tj_ldmatrix_x4_trans(a, s_a + tj_tile_off<0>(krow, chunk));
#endif
}

/* Two B fragments (16 x 8: b0, b1 each) of columns n to n + 15 at k step
 * ks.  N-major (.trans): lanes 0-7 / 8-15 address k 0-7 / 8-15 of n 0-7,
 * lanes 16-31 the same for n 8-15.  K-major: lanes 0-7 / 8-15 address n
 * 0-7 at k 0-7 / 8-15, lanes 16-31 the same for n 8-15. */
__device__ __forceinline__ void tj_frag_b(unsigned int b0[2],
                                          unsigned int b1[2],
                                          unsigned int s_b, int n, int ks,
                                          int lane) {
  unsigned int r[4];
#if TJ_B_KMAJOR
  int row = n + (lane & 7) + (lane >> 4) * 8;
  int chunk = ks * 2 + ((lane >> 3) & 1);
  tj_ldmatrix_x4(r, s_b + tj_tile_off<1>(row, chunk));
#else
  int krow = ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
  int chunk = n / 8 + (lane >> 4);
  tj_ldmatrix_x4_trans(r, s_b + tj_tile_off<0>(krow, chunk));
#endif
  b0[0] = r[0];
  b0[1] = r[1];
  b1[0] = r[2];
  b1[1] = r[3];
}

/* One warp's 64 x 64 share of a 32-deep stage: two k16 steps, each 4 A
 * fragments (16 x 16) and 8 B fragments (16 x 8), 32 mma. */
__device__ __forceinline__ void
tj_warp_stage(float acc[TJ_GEMM_MT][TJ_GEMM_NT][4], unsigned int s_a,
              unsigned int s_b, int warp_m, int warp_n, int lane) {
#pragma unroll
  for (int ks = 0; ks < TJ_GEMM_BK / 16; ks++) {
    unsigned int a[TJ_GEMM_MT][4], b[TJ_GEMM_NT][2];
#pragma unroll
    for (int mt = 0; mt < TJ_GEMM_MT; mt++)
      tj_frag_a(a[mt], s_a, warp_m * TJ_GEMM_WM + mt * 16, ks, lane);
#pragma unroll
    for (int p = 0; p < TJ_GEMM_NT / 2; p++)
      tj_frag_b(b[2 * p], b[2 * p + 1], s_b, warp_n * TJ_GEMM_WN + p * 16,
                ks, lane);
#pragma unroll
    for (int mt = 0; mt < TJ_GEMM_MT; mt++)
#pragma unroll
      for (int nt = 0; nt < TJ_GEMM_NT; nt++)
        tj_mma_16816(acc[mt][nt], a[mt], b[nt]);
  }
}

/* mma's f32 C fragment: c0, c1 at row lane/4, columns 2*(lane%4) + 0, 1;
 * c2, c3 eight rows further down. */
__device__ __forceinline__ void
tj_epilogue_tc(const tj_gemm_params &g,
               float acc[TJ_GEMM_MT][TJ_GEMM_NT][4], int m0, int n0,
               int warp_m, int warp_n, int lane) {
  bool pairs_ok = tj_pairs_ok(g);
#pragma unroll
  for (int mt = 0; mt < TJ_GEMM_MT; mt++)
#pragma unroll
    for (int nt = 0; nt < TJ_GEMM_NT; nt++) {
      int row = m0 + warp_m * TJ_GEMM_WM + mt * 16 + (lane >> 2);
      int col = n0 + warp_n * TJ_GEMM_WN + nt * 8 + (lane & 3) * 2;
      const float *c = acc[mt][nt];
      tj_store_pair(g, row, col, c[0], c[1], pairs_ok);
      tj_store_pair(g, row + 8, col, c[2], c[3], pairs_ok);
    }
}

/* Stage st's copy of k tile kt: the fast one (no bounds checks, from the
 * per-thread addresses) where `whole`, else tj_load_tile's. */
__device__ __forceinline__ void
tj_stage_in(const tj_gemm_params &g, unsigned int st, int kt, bool whole,
            const unsigned short *const a_src[TJ_GEMM_CHUNKS],
            const unsigned int a_dst[TJ_GEMM_CHUNKS],
            const unsigned short *const b_src[TJ_GEMM_CHUNKS],
            const unsigned int b_dst[TJ_GEMM_CHUNKS], long long a_step,
            long long b_step, int m0, int n0, int tid, bool a_vec,
            bool b_vec) {
  if (whole) {
#pragma unroll
    for (int i = 0; i < TJ_GEMM_CHUNKS; i++)
      tj_cp_async16(st + a_dst[i], a_src[i] + kt * a_step, 16);
#pragma unroll
    for (int i = 0; i < TJ_GEMM_CHUNKS; i++)
      tj_cp_async16(st + b_dst[i], b_src[i] + kt * b_step, 16);
  } else {
    tj_load_tile<TJ_A_KMAJOR>(g.A, g.lda, g.M, g.K, st, m0, kt * TJ_GEMM_BK,
                              tid, a_vec);
    tj_load_tile<TJ_B_KMAJOR>(g.B, g.ldb, g.N, g.K, st + TJ_GEMM_A_BYTES, n0,
                              kt * TJ_GEMM_BK, tid, b_vec);
  }
}

/*
 * The main loop: a three-stage cp.async pipeline.  Empty groups are
 * committed too, so that "all but the newest STAGES-2 groups are done"
 * always means "tile kt has landed".
 *
 * A block wholly inside M x N whose operands allow 16-byte copies ("fast")
 * copies every whole k tile with no bounds checks, from per-thread
 * addresses computed once (faster than checking every chunk);
 * everything else, and the last partial k tile, goes through
 * tj_load_tile.
 */
__device__ __forceinline__ void tj_gemm_block(const tj_gemm_params &g) {
  __shared__ __align__(128) unsigned char smem[TJ_GEMM_STAGES *
                                               TJ_GEMM_STAGE_BYTES];
  int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int warp_m = warp / TJ_GEMM_WARPS_N, warp_n = warp % TJ_GEMM_WARPS_N;
  int m0 = blockIdx.y * TJ_GEMM_BM, n0 = blockIdx.x * TJ_GEMM_BN;
  bool a_vec = (reinterpret_cast<unsigned long long>(g.A) & 15ull) == 0 &&
               (g.lda & 7) == 0;
  bool b_vec = (reinterpret_cast<unsigned long long>(g.B) & 15ull) == 0 &&
               (g.ldb & 7) == 0;
  unsigned int s_base = tj_smem_addr(smem);
  float acc[TJ_GEMM_MT][TJ_GEMM_NT][4];
#pragma unroll
  for (int i = 0; i < TJ_GEMM_MT; i++)
#pragma unroll
    for (int j = 0; j < TJ_GEMM_NT; j++)
#pragma unroll
      for (int k = 0; k < 4; k++)
        acc[i][j][k] = 0.0f;
  int ktiles = (g.K + TJ_GEMM_BK - 1) / TJ_GEMM_BK;
  bool fast = a_vec && b_vec && m0 + TJ_GEMM_BM <= g.M &&
              n0 + TJ_GEMM_BN <= g.N;
  const unsigned short *a_src[TJ_GEMM_CHUNKS], *b_src[TJ_GEMM_CHUNKS];
  unsigned int a_dst[TJ_GEMM_CHUNKS], b_dst[TJ_GEMM_CHUNKS];
#pragma unroll
  for (int i = 0; i < TJ_GEMM_CHUNKS; i++) {
    int r, c;
    tj_chunk_rc<TJ_A_KMAJOR>(tid, i, r, c);
    a_src[i] = g.A + tj_chunk_src<TJ_A_KMAJOR>(r, c, m0, g.lda);
    a_dst[i] = tj_tile_off<TJ_A_KMAJOR>(r, c);
    tj_chunk_rc<TJ_B_KMAJOR>(tid, i, r, c);
    b_src[i] = g.B + tj_chunk_src<TJ_B_KMAJOR>(r, c, n0, g.ldb);
    b_dst[i] = TJ_GEMM_A_BYTES + tj_tile_off<TJ_B_KMAJOR>(r, c);
  }
  long long a_step = TJ_A_KMAJOR ? TJ_GEMM_BK : (long long)TJ_GEMM_BK * g.lda;
  long long b_step = TJ_B_KMAJOR ? TJ_GEMM_BK : (long long)TJ_GEMM_BK * g.ldb;
#pragma unroll
  for (int s = 0; s < TJ_GEMM_STAGES - 1; s++) {
    if (s < ktiles)
      tj_stage_in(g, s_base + s * TJ_GEMM_STAGE_BYTES, s,
                  fast && (s + 1) * TJ_GEMM_BK <= g.K, a_src, a_dst, b_src,
                  b_dst, a_step, b_step, m0, n0, tid, a_vec, b_vec);
    tj_cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; kt++) {
    tj_cp_async_wait<TJ_GEMM_STAGES - 2>();
    /* Tile kt is visible to all, and every warp has finished tile kt-1,
     * whose stage the prefetch below overwrites. */
    __syncthreads();
    int next = kt + TJ_GEMM_STAGES - 1;
    if (next < ktiles)
      tj_stage_in(g, s_base + (next % TJ_GEMM_STAGES) * TJ_GEMM_STAGE_BYTES,
                  next, fast && (next + 1) * TJ_GEMM_BK <= g.K, a_src, a_dst,
                  b_src, b_dst, a_step, b_step, m0, n0, tid, a_vec, b_vec);
    tj_cp_async_commit();
    unsigned int cur = s_base + (kt % TJ_GEMM_STAGES) * TJ_GEMM_STAGE_BYTES;
    tj_warp_stage(acc, cur, cur + TJ_GEMM_A_BYTES, warp_m, warp_n, lane);
  }
  tj_cp_async_wait<0>();
  tj_epilogue_tc(g, acc, m0, n0, warp_m, warp_n, lane);
}

#elif defined(TJ_GEMM_MFMA) || defined(TJ_GEMM_WMMA)
/* ------------------------------------------------ AMD matrix cores */

/* One 32-deep k tile of A (row-major, [m][k]) and of B transposed
 * ([n][k]) in LDS, so that every fragment either instruction takes is a
 * run of consecutive k in one row: 8 bytes (MFMA) or 32 bytes (WMMA), one
 * or two ds_read_b128.  8 halves of padding keep rows 16-byte aligned and
 * spread them over the banks.  2 x 10 KiB of LDS. */
#define TJ_GEMM_ABK 32
#define TJ_GEMM_APAD 8
#define TJ_GEMM_AROW (TJ_GEMM_ABK + TJ_GEMM_APAD)
#define TJ_GEMM_ALOADS (TJ_GEMM_BM * TJ_GEMM_ABK / TJ_GEMM_THREADS)

typedef float tj_f4 __attribute__((ext_vector_type(4)));
typedef float tj_f8 __attribute__((ext_vector_type(8)));

/* Guarded 2-byte loads, zero past the matrix: any alignment and any
 * leading dimension are correct.  Consecutive threads read consecutive
 * addresses of the operand's stored rows.  Unrolled only 4 ways: all 32
 * at once keep their addresses live and gfx90a spills 180 VGPRs. */
__device__ __forceinline__ void tj_load_tiles_amd(
    const tj_gemm_params &g, unsigned short (*as)[TJ_GEMM_AROW],
    unsigned short (*bt)[TJ_GEMM_AROW], int m0, int n0, int k0, int tid) {
  const unsigned short *A = g.A, *B = g.B;
#pragma unroll 4
  for (int i = 0; i < TJ_GEMM_ALOADS; i++) {
    int idx = tid + i * TJ_GEMM_THREADS;
    int r = TJ_TRANS_A ? idx % TJ_GEMM_BM : idx / TJ_GEMM_ABK;
    int k = TJ_TRANS_A ? idx / TJ_GEMM_BM : idx % TJ_GEMM_ABK;
    int gm = m0 + r, gk = k0 + k;
    long long at = TJ_TRANS_A ? (long long)gk * g.lda + gm
                              : (long long)gm * g.lda + gk;
    as[r][k] = gm < g.M && gk < g.K ? A[at] : 0;
  }
#pragma unroll 4
  for (int i = 0; i < TJ_GEMM_ALOADS; i++) {
    int idx = tid + i * TJ_GEMM_THREADS;
    int k = TJ_TRANS_B ? idx % TJ_GEMM_ABK : idx / TJ_GEMM_BN;
    int n = TJ_TRANS_B ? idx / TJ_GEMM_ABK : idx % TJ_GEMM_BN;
    int gk = k0 + k, gn = n0 + n;
    long long at = TJ_TRANS_B ? (long long)gn * g.ldb + gk
                              : (long long)gk * g.ldb + gn;
    bt[n][k] = gk < g.K && gn < g.N ? B[at] : 0;
  }
}

/* The matrix instructions' operand types and builtins for TJ_TA. */
#if TJ_TA == 2
typedef short tj_ab4 __attribute__((ext_vector_type(4)));
typedef short tj_ab16 __attribute__((ext_vector_type(16)));
#define TJ_MFMA_16X16X16 __builtin_amdgcn_mfma_f32_16x16x16bf16_1k
#define TJ_WMMA_16X16X16 __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32
#else
typedef _Float16 tj_ab4 __attribute__((ext_vector_type(4)));
typedef _Float16 tj_ab16 __attribute__((ext_vector_type(16)));
#define TJ_MFMA_16X16X16 __builtin_amdgcn_mfma_f32_16x16x16f16
#define TJ_WMMA_16X16X16 __builtin_amdgcn_wmma_f32_16x16x16_f16_w32
#endif

#if defined(TJ_GEMM_MFMA)
/* CDNA (wave64): 2 waves, each 64 rows x all 128 columns of the block's
 * tile, as 4 x 8 tiles of v_mfma_f32_16x16x16_f16.  Its operands, lane l
 * of 64: A[l % 16][4 (l / 16) + j] and B[4 (l / 16) + j][l % 16], j < 4;
 * its result, D[4 (l / 16) + j][l % 16] in register j. */
#define TJ_GEMM_MT 4
#define TJ_GEMM_NT 8

__device__ __forceinline__ void tj_gemm_block(const tj_gemm_params &g) {
  __shared__ __align__(16) unsigned short as[TJ_GEMM_BM][TJ_GEMM_AROW];
  __shared__ __align__(16) unsigned short bt[TJ_GEMM_BN][TJ_GEMM_AROW];
  int tid = threadIdx.x, lane = tid & 63, wave = tid >> 6;
  int m0 = blockIdx.y * TJ_GEMM_BM, n0 = blockIdx.x * TJ_GEMM_BN;
  int li = lane & 15, lk = (lane >> 4) * 4;
  tj_f4 acc[TJ_GEMM_MT][TJ_GEMM_NT];
#pragma unroll
  for (int i = 0; i < TJ_GEMM_MT; i++)
#pragma unroll
    for (int j = 0; j < TJ_GEMM_NT; j++)
      acc[i][j] = (tj_f4){0.0f, 0.0f, 0.0f, 0.0f};
  for (int k0 = 0; k0 < g.K; k0 += TJ_GEMM_ABK) {
    tj_load_tiles_amd(g, as, bt, m0, n0, k0, tid);
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < TJ_GEMM_ABK; ks += 16) {
      tj_ab4 a[TJ_GEMM_MT], b[TJ_GEMM_NT];
#pragma unroll
      for (int i = 0; i < TJ_GEMM_MT; i++)
        a[i] = *reinterpret_cast<const tj_ab4 *>(
            &as[wave * 64 + i * 16 + li][ks + lk]);
#pragma unroll
      for (int j = 0; j < TJ_GEMM_NT; j++)
        b[j] = *reinterpret_cast<const tj_ab4 *>(&bt[j * 16 + li][ks + lk]);
#pragma unroll
      for (int i = 0; i < TJ_GEMM_MT; i++)
#pragma unroll
        for (int j = 0; j < TJ_GEMM_NT; j++)
          acc[i][j] = TJ_MFMA_16X16X16(a[i], b[j], acc[i][j], 0, 0, 0);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TJ_GEMM_MT; i++)
#pragma unroll
    for (int j = 0; j < TJ_GEMM_NT; j++)
#pragma unroll
      for (int r = 0; r < 4; r++)
        tj_store_one(g, m0 + wave * 64 + i * 16 + lk + r, n0 + j * 16 + li,
                     acc[i][j][r]);
}

#else
/* RDNA3 (wave32): 4 waves in a 2 x 2 grid, each 64 x 64, as 4 x 4 tiles of
 * v_wmma_f32_16x16x16_f16.  Its operands, lane l of 32: A[l % 16][0..15]
 * and B[0..15][l % 16] (lanes 16-31 repeat lanes 0-15); its result,
 * D[2 v + l / 16][l % 16] in register v.  One B fragment at a time: all
 * four at once take gfx1100 past 256 VGPRs (80 spilled). */
#define TJ_GEMM_MT 4
#define TJ_GEMM_NT 4

__device__ __forceinline__ void tj_gemm_block(const tj_gemm_params &g) {
  __shared__ __align__(16) unsigned short as[TJ_GEMM_BM][TJ_GEMM_AROW];
  __shared__ __align__(16) unsigned short bt[TJ_GEMM_BN][TJ_GEMM_AROW];
  int tid = threadIdx.x, lane = tid & 31, wave = tid >> 5;
  int wm = (wave >> 1) * 64, wn = (wave & 1) * 64;
  int m0 = blockIdx.y * TJ_GEMM_BM, n0 = blockIdx.x * TJ_GEMM_BN;
  int li = lane & 15, lh = lane >> 4;
  tj_f8 acc[TJ_GEMM_MT][TJ_GEMM_NT];
#pragma unroll
  for (int i = 0; i < TJ_GEMM_MT; i++)
#pragma unroll
    for (int j = 0; j < TJ_GEMM_NT; j++)
      acc[i][j] = (tj_f8){0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (int k0 = 0; k0 < g.K; k0 += TJ_GEMM_ABK) {
    tj_load_tiles_amd(g, as, bt, m0, n0, k0, tid);
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < TJ_GEMM_ABK; ks += 16) {
      tj_ab16 a[TJ_GEMM_MT];
#pragma unroll
      for (int i = 0; i < TJ_GEMM_MT; i++)
        a[i] = *reinterpret_cast<const tj_ab16 *>(&as[wm + i * 16 + li][ks]);
#pragma unroll
      for (int j = 0; j < TJ_GEMM_NT; j++) {
        tj_ab16 b = *reinterpret_cast<const tj_ab16 *>(&bt[wn + j * 16 + li][ks]);
#pragma unroll
        for (int i = 0; i < TJ_GEMM_MT; i++)
          acc[i][j] = TJ_WMMA_16X16X16(a[i], b, acc[i][j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TJ_GEMM_MT; i++)
#pragma unroll
    for (int j = 0; j < TJ_GEMM_NT; j++)
#pragma unroll
      for (int v = 0; v < 8; v++)
        tj_store_one(g, m0 + wm + i * 16 + 2 * v + lh, n0 + wn + j * 16 + li,
                     acc[i][j][v]);
}
#endif
#else
/* ------------------------------------------------ portable fp32 tiles */

#define TJ_GEMM_PBK 16
/* +4 floats per row keeps the column writes of the A transpose from all
 * landing in one bank. */
#define TJ_GEMM_PAD 4

/* Tile elements each thread loads per operand per k step. */
#define TJ_GEMM_PLOADS (TJ_GEMM_BM * TJ_GEMM_PBK / TJ_GEMM_THREADS)
/* Each thread's share of C: PR rows by PC columns. */
#define TJ_GEMM_PR 16
#define TJ_GEMM_PC 8

/* A is stored transposed (k-major) so that the inner loop reads a row of
 * each tile. */
__device__ __forceinline__ void tj_load_tiles_portable(
    const tj_gemm_params &g, float (*as)[TJ_GEMM_BM + TJ_GEMM_PAD],
    float (*bs)[TJ_GEMM_BN + TJ_GEMM_PAD], int m0, int n0, int k0, int tid) {
#pragma unroll
  for (int i = 0; i < TJ_GEMM_PLOADS; i++) {
    int idx = tid + i * TJ_GEMM_THREADS;
    int r = TJ_TRANS_A ? idx & 127 : idx >> 4;
    int k = TJ_TRANS_A ? idx >> 7 : idx & 15;
    int gm = m0 + r, gk = k0 + k;
    long long at = TJ_TRANS_A ? (long long)gk * g.lda + gm
                              : (long long)gm * g.lda + gk;
    as[k][r] = (gm < g.M && gk < g.K) ? tj_e_load<TJ_TA>(g.A, at) : 0.0f;
  }
#pragma unroll
  for (int i = 0; i < TJ_GEMM_PLOADS; i++) {
    int idx = tid + i * TJ_GEMM_THREADS;
    int k = TJ_TRANS_B ? idx & 15 : idx >> 7;
    int c = TJ_TRANS_B ? idx >> 4 : idx & 127;
    int gk = k0 + k, gn = n0 + c;
    long long at = TJ_TRANS_B ? (long long)gn * g.ldb + gk
                              : (long long)gk * g.ldb + gn;
    bs[k][c] = (gk < g.K && gn < g.N) ? tj_e_load<TJ_TA>(g.B, at) : 0.0f;
  }
}

/* Each thread owns rows ty + 8 i (i < 16) and columns tx + 16 j (j < 8):
 * strided so that neighbouring threads read neighbouring shared words. */
__device__ __forceinline__ void tj_gemm_block(const tj_gemm_params &g) {
  __shared__ float as[TJ_GEMM_PBK][TJ_GEMM_BM + TJ_GEMM_PAD];
  __shared__ float bs[TJ_GEMM_PBK][TJ_GEMM_BN + TJ_GEMM_PAD];
  int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  int m0 = blockIdx.y * TJ_GEMM_BM, n0 = blockIdx.x * TJ_GEMM_BN;
  float acc[TJ_GEMM_PR][TJ_GEMM_PC];
#pragma unroll
  for (int i = 0; i < TJ_GEMM_PR; i++)
#pragma unroll
    for (int j = 0; j < TJ_GEMM_PC; j++)
      acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < g.K; k0 += TJ_GEMM_PBK) {
    tj_load_tiles_portable(g, as, bs, m0, n0, k0, tid);
    __syncthreads();
    /* Not unrolled: with 128 accumulators per thread, unrolling makes
     * gfx90a spill. */
#pragma unroll 1
    for (int k = 0; k < TJ_GEMM_PBK; k++) {
      float a[TJ_GEMM_PR], b[TJ_GEMM_PC];
#pragma unroll
      for (int i = 0; i < TJ_GEMM_PR; i++)
        a[i] = as[k][ty + 8 * i];
#pragma unroll
      for (int j = 0; j < TJ_GEMM_PC; j++)
        b[j] = bs[k][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < TJ_GEMM_PR; i++)
#pragma unroll
        for (int j = 0; j < TJ_GEMM_PC; j++)
          acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < TJ_GEMM_PR; i++)
#pragma unroll
    for (int j = 0; j < TJ_GEMM_PC; j++)
      tj_store_one(g, m0 + ty + 8 * i, n0 + tx + 16 * j, acc[i][j]);
}
#endif

#ifndef TJ_GEMM_ENTRY
/* contract (build-aux/kernel-contracts.sh copies it into <tokitai-jit/kernels.h>)
 *   block      128 1 1
 *   grid       ceil(N / 128) x ceil(M / 128) x 1: one block per 128 x 128
 *              tile of C, so M <= 65535 * 128
 *   shared     0
 *   alignment  A, B, C 2-byte aligned, any leading dimensions; on NVIDIA
 *              sm_80+ a 16-byte aligned A with lda % 8 == 0 (B with
 *              ldb % 8 == 0) is fetched 16 bytes at a time, much faster
 *   notes      C = alpha A B + beta C, row-major: A is M x K, B K x N, C
 *              M x N; M, N >= 1 (when either is 0, do not launch), K >= 0;
 *              lda >= K, ldb >= N, ldc >= N; beta == 0: C is not read; C
 *              must not overlap A or B; __half is IEEE binary16
 */
extern "C" __global__ void __launch_bounds__(128, 2) gemm_f16(int M, int N, int K, float alpha, const __half *A, int lda, const __half *B, int ldb, float beta, __half *C, int ldc) {
  tj_gemm_params g;
  g.M = M;
  g.N = N;
  g.K = K;
  g.alpha = alpha;
  g.beta = beta;
  g.A = reinterpret_cast<const unsigned short *>(A);
  g.B = reinterpret_cast<const unsigned short *>(B);
  g.C = C;
  g.lda = lda;
  g.ldb = ldb;
  g.ldc = ldc;
  g.bias = 0;
  g.aux = 0;
  g.ldaux = 0;
  tj_gemm_block(g);
}
#else
/* The family's configuration (tj_gemm's tensor-core path): compiled per
 * configuration, so its entries are no rows of the embedded table. */
#define TJ_TC_ENTRY extern "C" __global__ void __launch_bounds__(128, 2)
#define TJ_TC_COLSUM extern "C" __global__ void __launch_bounds__(256)

TJ_TC_ENTRY TJ_GEMM_ENTRY(long long M, long long N, long long K, float alpha,
                          const void *A, long long lda, const void *B,
                          long long ldb, float beta, void *C, long long ldc,
                          const void *bias, void *aux, long long ldaux) {
  tj_gemm_params g;
  g.M = (int)M;
  g.N = (int)N;
  g.K = (int)K;
  g.alpha = alpha;
  g.beta = beta;
  g.A = static_cast<const unsigned short *>(A);
  g.B = static_cast<const unsigned short *>(B);
  g.C = C;
  g.lda = (int)lda;
  g.ldb = (int)ldb;
  g.ldc = (int)ldc;
  g.bias = bias;
  g.aux = aux;
  g.ldaux = ldaux;
  tj_gemm_block(g);
}

TJ_TC_COLSUM TJ_COLSUM_ENTRY(long long M, long long N, const void *C,
                             long long ldc, float *sums) {
  tj_e_colsum<TJ_TC>(M, N, C, ldc, sums);
}
#endif
