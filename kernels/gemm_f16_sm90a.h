/*
 * gemm_f16_sm90a.h: C = alpha * A * B + beta * C on fp16 matrices, fp32
 * accumulation, all row-major, with Hopper's wgmma and TMA (sm_90a only):
 * the code of gemm_sm90a.hip's configurations (the tiles, M > 16, and
 * the skinny kernel, M <= 16), one compile each, its choices as -D
 * constants.  gemm_sm90a.hip names this file in a line "embed: prepend",
 * so the library's copy of its source is this file and then its own
 * (build-aux/embed.sh).
 * Same meaning as gemm_f16 (see its header): any M, N, K >= 1, lda >= K,
 * ldb >= N, ldc >= N; beta == 0 writes C without reading it; alpha == 0
 * still computes A * B.  tj_gemm_f16 and tj_gemm pick the configurations
 * themselves; this code runs only on sm_90a, so the library compiles it
 * for sm_90a on an sm_90 device.
 *
 * Status: every configuration compiles for sm_90a with no spills and no wgmma
 * serialization (tests/gemm_ptxas_sm90a.sh, on any machine with nvcc).
 * Every entry is checked against the oracle by the GPU suite
 * (check_kernels_gpu) and timed against cuBLAS by tj-bench's GEMM
 * section.  The epilogue through TMA and the skinny kernel's evict-first
 * loads are the defaults, since tj-bench times them faster
 * (the benchmark's knobs TJ_GEMM_TMA_STORE=0 and TJ_GEMM_EVICT_FIRST=0
 * turn them off).
 *
 * The plan
 *   block tile  128 x BN x 64, BN = 128 or 256 (the two entries)
 *   threads     384: three warpgroups.  Warpgroup 0 is the producer: it
 *               gives up registers (setmaxnreg 40) and one thread issues
 *               the TMA loads.  Warpgroups 1 and 2 are consumers
 *               (setmaxnreg 232), each owning 64 rows of the tile and
 *               issuing wgmma.mma_async m64nBNk16 (f16 in, f32
 *               accumulate) from shared memory, 4 per 64-wide k-tile.
 *   stages      STAGES k-tiles in flight (4 for BN 256, 5 for BN 128),
 *               each with a "full" mbarrier (TMA bytes arrived) and an
 *               "empty" one (each of the 8 consumer warps done reading).
 *   layout      A tile: 128 rows x 64 halves (128 bytes), K-major, one
 *               TMA box, 128-byte swizzle.  B tile: BN / 64 boxes of 64 k
 *               rows x 64 columns, N-major (B is row-major), 128-byte
 *               swizzle; the wgmma B descriptor is transposed (imm-trans-b
 *               1) with the boxes LBO apart and 8-row groups SBO apart.
 *   edges       TMA fills what lies outside A or B with zeros, so M, N and
 *               K need no padding; the epilogue guards its stores.
 *   epilogue    where the call allows it (TJ_GEMM_TMA_STORE=0 turns it
 *               off), with beta == 0 and C a
 *               TMA tensor (C 16-byte aligned, ldc a multiple of 8; the
 *               host passes store 1 and tma_c): through
 *               shared memory, each consumer warpgroup writing 64 x 64
 *               boxes of alpha * acc into two buffers of its own and one
 *               thread storing each with TMA, which runs on while the
 *               warpgroup goes on (tj_h_epilogue_tma).  Otherwise
 *               straight from the accumulators: alpha * acc + beta * C,
 *               C read only when beta != 0, pairs of halves when C is
 *               4-byte aligned and ldc even.
 *   order       blocks take tiles in bands of 8 tile rows, column by
 *               column in a band (L2 reuse of A and B between blocks).
 *
 * Split-K (the 128 x 128 tile's kind 4 and its reduce)
 *   why         a grid with fewer tiles than SMs (128 x 4096 is 32 tiles
 *               of 128 x 128 on 132 SMs; 16 x N uses one tile row) leaves
 *               most of the GPU idle.  Block z of a grid (x, y, split)
 *               takes k-tiles [z * kper, z * kper + kper) of its tile: the
 *               TMA coordinates move along K, the pipeline is unchanged.
 *   partials    each block writes its fp32 accumulators for the rows below
 *               M to its own slice of a workspace (split x M x ldw floats,
 *               ldw the grid's width in columns, so every float2 store is
 *               aligned and needs no column guard).  An empty K-range
 *               (K < split * 64) writes zeros.
 *   reduce      a second kernel adds the slices in order z = 0, 1, ... and
 *               applies alpha and beta as the epilogue does (C read only
 *               when beta != 0): no atomics, so the bits are the same on
 *               every run; accumulation stays fp32 throughout.
 *   workspace   allocated and freed on the caller's stream from the
 *               runtime's own memory pool, so concurrent calls on other
 *               streams never share one; without pools the call runs
 *               unsplit.
 *   choice      src/ops/gemm/plan.c (tj__gemm_sm90a_split): only when the 128 x
 *               128 tiles are fewer than the SMs, split = min(SMs / tiles,
 *               k-tiles / 16, 16), 1 (none) below 2; every other call runs
 *               the entries above unsplit.  TJ_GEMM_SPLITK=n forces n; a
 *               tuning decision for the shape class overrides the rule.
 *
 * Preconditions (tj_gemm_f16 checks them and takes gemm_f16 otherwise)
 *   A and B 16-byte aligned, lda and ldb multiples of 8 (TMA's rules for
 *   a global tensor); M above 16 for the tiles, M <= 16 for the skinny
 *   configurations (kind 5, below the tiles' code).
 *
 * Beside the one-tile-per-block entries: the persistent grid, 2-CTA
 *   clusters with TMA multicast of B (the 128 x 256 tile's kind 2), and
 *   the epilogue through shared memory with TMA stores.
 *
 * Launch
 *   block   (384, 1, 1)
 *   grid    (ceil(N / BN), ceil(M / 128), 1)
 *   shared  the entry's TJ_H_SMEM_BYTES of dynamic shared memory (over
 *           48 KiB: the caller raises the function's limit first)
 *   tma_a   a CUtensorMap over A: fp16, 2-D {K, M}, row stride lda * 2
 *           bytes, box {64, 128}, 128-byte swizzle, zero fill
 *   tma_b   a CUtensorMap over B: fp16, 2-D {N, K}, row stride ldb * 2
 *           bytes, box {64, 64}, 128-byte swizzle, zero fill
 *   tma_c   (the tile entries, read only with store 1) a CUtensorMap over
 *           C: fp16, 2-D {N, M}, row stride ldc * 2 bytes, box {64, 64},
 *           128-byte swizzle
 */

#define TJ_H_BM 128
#define TJ_H_BK 64
#define TJ_H_THREADS 384
/* Bytes of dynamic shared memory: the stages, 1 KiB to align them to the
 * 128-byte swizzle's 1024-byte period, and the barriers. */
#define TJ_H_STAGE_BYTES(bn) ((TJ_H_BM + (bn)) * TJ_H_BK * 2)
#define TJ_H_EPI_BYTES (2 * 2 * 64 * 64 * 2)
#define TJ_H_SMEM_BYTES(bn, stages) \
  ((stages) * TJ_H_STAGE_BYTES(bn) + TJ_H_EPI_BYTES + 1024 + 2 * 8 * (stages))

/* The driver's CUtensorMap: 128 opaque bytes, 64-byte aligned, passed by
 * value as a __grid_constant__ parameter so TMA can read it in place. */
struct alignas(64) tj_tmap {
  unsigned long long opaque[16];
};

#ifndef __grid_constant__
#define __grid_constant__
#endif

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TJ_H_HOPPER 1
#endif

/* The GEMM family's choices (gemm_epilogue.h's meanings), which
 * gemm_sm90a.hip's configurations set with -D; tj_gemm_f16's entries take
 * the defaults: f16 in and out, A and B as stored (NN), no epilogue.
 *   TJ_TA       A's and B's element type: 1 f16, 2 bf16 (wgmma takes one
 *               type for both)
 *   TJ_TC       C's (and bias's and aux's): 1 f16, 2 bf16, 3 f32 (stored
 *               straight from the accumulators, never through TMA)
 *   TJ_TRANS_A  1: A is stored K x M (M-major), its tiles loaded as 64 x
 *               64 boxes and read by wgmma transposed
 *   TJ_TRANS_B  1: B is stored N x K (K-major), read by wgmma as stored
 *   TJ_EPI      the epilogue: 0 none, 1 bias, 2 bias and GELU, 3 dGELU */
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
#if TJ_TA == 2
#define TJ_H_AB "bf16"
#else
#define TJ_H_AB "f16"
#endif
/* wgmma's transpose flags for A and B: 0 reads the operand K-major. */
#if TJ_TRANS_A && TJ_TRANS_B
#define TJ_H_TNSP "1, 0"
#elif TJ_TRANS_A
#define TJ_H_TNSP "1, 1"
#elif TJ_TRANS_B
#define TJ_H_TNSP "0, 0"
#else
#define TJ_H_TNSP "0, 1"
#endif
/* The skinny kernel's (C^T = B^T A^T: B's tile is wgmma's A operand,
 * MN-major unless B is stored N x K; A's rows its B operand, K-major). */
#if TJ_TRANS_B
#define TJ_S_TNSP "0, 0"
#else
#define TJ_S_TNSP "1, 0"
#endif

#if TJ_H_HOPPER

__device__ __forceinline__ unsigned tj_h_smem_addr(const void *p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void tj_h_bar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar),
               "r"(count)
               : "memory");
}

/* Wait until the barrier's phase of the given parity has completed. */
__device__ __forceinline__ void tj_h_bar_wait(unsigned bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}

__device__ __forceinline__ void tj_h_bar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar)
               : "memory");
}

__device__ __forceinline__ void tj_h_bar_expect(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                   bar),
               "r"(bytes)
               : "memory");
}

/* One TMA box of the 2-D tensor map at (x = column, y = row) into shared
 * memory at dst; its bytes count toward bar's transaction. */
__device__ __forceinline__ void tj_h_tma_load(unsigned dst, const tj_tmap *map,
                                              int x, int y, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
               "complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
               "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y),
               "r"(bar)
               : "memory");
}

/* tj_h_tma_load with an L2 eviction policy (a createpolicy value) for
 * the box's lines. */
__device__ __forceinline__ void tj_h_tma_load_hint(unsigned dst,
                                                   const tj_tmap *map, int x,
                                                   int y, unsigned bar,
                                                   unsigned long long policy) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
               "complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3}], [%4], "
               "%5;" ::"r"(dst),
               "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y),
               "r"(bar), "l"(policy)
               : "memory");
}

/* The box of the 2-D tensor map at (x = column, y = row) from shared
 * memory at src (what lies outside the tensor is not written), in this
 * thread's bulk async-group of its own, committed. */
__device__ __forceinline__ void tj_h_tma_store(const tj_tmap *map, unsigned src,
                                               int x, int y) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group "
               "[%0, {%2, %3}], [%1];\n"
               "cp.async.bulk.commit_group;" ::"l"(
                   reinterpret_cast<unsigned long long>(map)),
               "r"(src), "r"(x), "r"(y)
               : "memory");
}

/* Until at most n of this thread's bulk stores still read shared memory. */
template <int N>
__device__ __forceinline__ void tj_h_tma_store_wait() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

/* The descriptor fetched ahead of its first use (the first load would
 * otherwise wait for it too). */
__device__ __forceinline__ void tj_h_prefetch_map(const tj_tmap *map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(
                   reinterpret_cast<unsigned long long>(map))
               : "memory");
}

/* Named barrier id, waited at by the given number of threads (whole
 * warps): 1 and 2 for one consumer warpgroup each, 3 for both (0 is
 * __syncthreads'). */
__device__ __forceinline__ void tj_h_named_sync(unsigned id,
                                                unsigned threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

/* The same box multicast: written at dst, and its bytes counted toward
 * bar, in every block of the cluster that mask names (the same shared
 * offsets in each). */
__device__ __forceinline__ void tj_h_tma_load_mc(unsigned dst,
                                                 const tj_tmap *map, int x,
                                                 int y, unsigned bar,
                                                 unsigned short mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
               "complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], "
               "[%4], %5;" ::"r"(dst),
               "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y),
               "r"(bar), "h"(mask)
               : "memory");
}

/* An arrival on the barrier at a cluster address (another block's), with
 * the default semantics (release at CTA scope), as the local arrive: what
 * it orders is this warp's wgmma reads of the stage, done by then.  (With
 * .release.cluster the pairs run markedly slower in tj-bench's GEMM
 * section; the likely cause, not shown, is that a cluster-scope release
 * waits for the wgmma group still in flight.) */
__device__ __forceinline__ void tj_h_bar_arrive_remote(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(bar)
               : "memory");
}

/* The clusters of two (the 128 x 64 tile's kind 3 and the multicast
 * pairs): this block's rank, a barrier across both, another block's
 * shared address. */
__device__ __forceinline__ unsigned tj_h_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

/* Every thread of both blocks; the barriers initialised before it are
 * then visible across the cluster. */
__device__ __forceinline__ void tj_h_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n"
               "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/* The same where a warp's threads may arrive from different paths (not
 * .aligned). */
__device__ __forceinline__ void tj_h_cluster_sync_any() {
  asm volatile("barrier.cluster.arrive.release;\n"
               "barrier.cluster.wait.acquire;" ::: "memory");
}

/* The address of this block's shared address in block rank's. */
__device__ __forceinline__ unsigned tj_h_map_rank(unsigned addr,
                                                  unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(r)
               : "r"(addr), "r"(rank));
  return r;
}

/* A consumer warp giving a stage back: to its own block's producer, and
 * with a multicast pair (peer: the stage's empty barrier in the other
 * block, as a cluster address) to the other's, whose loads write here. */
template <int MC>
__device__ __forceinline__ void tj_h_release(unsigned bar, unsigned peer) {
  tj_h_bar_arrive(bar);
  if (MC)
    tj_h_bar_arrive_remote(peer);
}

/* A wgmma shared-memory descriptor: start address, leading and stride
 * byte offsets (all in 16-byte units), 128-byte swizzle (mode 1). */
__device__ __forceinline__ unsigned long long tj_h_desc(unsigned addr,
                                                        unsigned lbo,
                                                        unsigned sbo) {
  return (unsigned long long)((addr & 0x3ffff) >> 4) |
         ((unsigned long long)((lbo & 0x3ffff) >> 4) << 16) |
         ((unsigned long long)((sbo & 0x3ffff) >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void tj_h_wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void tj_h_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void tj_h_wgmma_wait_one() {
  asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
}
__device__ __forceinline__ void tj_h_wgmma_wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}

/* wgmma m64nNk16, f32 += TJ_TA * TJ_TA, scale-d set through a predicate
 * (an immediate there crashes NVRTC): the tiles' tj_h_wgmma, A and B
 * K-major or MN-major as TJ_H_TNSP says (tj_gemm_f16's: A K-major, B
 * N-major), for N = 64, 128 and 256 (d: N / 2 floats a thread); the skinny kernel's tj_s_wgmma, m64n16 with A transposed
 * (MN-major: B's tile) and B K-major (A's box).  PTX wants every register
 * named: TJ_H_WGMMA_REGS(n) names %0 .. %(n - 1), each range written
 * once, and TJ_H_WGMMA_D(n) binds them to d[0] .. d[n - 1]; the
 * descriptors follow as %n and %(n + 1), the scale-d flag as %(n + 2). */
#define TJ_H_WGMMA_REGS8 "%0,%1,%2,%3,%4,%5,%6,%7"
#define TJ_H_WGMMA_REGS32 \
  TJ_H_WGMMA_REGS8 ",%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19," \
  "%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define TJ_H_WGMMA_REGS64 \
  TJ_H_WGMMA_REGS32 "," \
  "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48," \
  "%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define TJ_H_WGMMA_REGS128 \
  TJ_H_WGMMA_REGS64 "," \
  "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80," \
  "%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97," \
  "%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111," \
  "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125," \
  "%126,%127"
#define TJ_H_WGMMA_REGS(n) TJ_H_WGMMA_REGS##n
#define TJ_H_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define TJ_H_D16(i) TJ_H_D4(i), TJ_H_D4(i + 4), TJ_H_D4(i + 8), TJ_H_D4(i + 12)
#define TJ_H_D32(i) TJ_H_D16(i), TJ_H_D16(i + 16)
#define TJ_H_WGMMA_D8 TJ_H_D4(0), TJ_H_D4(4)
#define TJ_H_WGMMA_D32 TJ_H_D32(0)
#define TJ_H_WGMMA_D64 TJ_H_D32(0), TJ_H_D32(32)
#define TJ_H_WGMMA_D128 TJ_H_WGMMA_D64, TJ_H_D32(64), TJ_H_D32(96)
#define TJ_H_WGMMA_D(n) TJ_H_WGMMA_D##n
/* fn for d of n floats: the instruction's shape, the operand numbers of
 * the two descriptors and the scale-d flag (n, n + 1, n + 2: written out,
 * as PTX operand numbers must be), and A's and B's transpose flags. */
#define TJ_H_WGMMA(fn, n, shape, da_op, db_op, scale_op, tnsp)              \
  __device__ __forceinline__ void fn(float(&d)[n], unsigned long long da,    \
                                     unsigned long long db) {                \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #scale_op ", 0;\n"     \
                 "wgmma.mma_async.sync.aligned." shape ".f32." TJ_H_AB "." TJ_H_AB " {" \
                 TJ_H_WGMMA_REGS(n) "}, %" #da_op ", %" #db_op               \
                 ", p, 1, 1, " tnsp ";\n}\n"                                 \
                 : TJ_H_WGMMA_D(n)                                           \
                 : "l"(da), "l"(db), "r"(1)                                  \
                 : "memory");                                                \
  }
TJ_H_WGMMA(tj_h_wgmma, 32, "m64n64k16", 32, 33, 34, TJ_H_TNSP)
TJ_H_WGMMA(tj_h_wgmma, 64, "m64n128k16", 64, 65, 66, TJ_H_TNSP)
TJ_H_WGMMA(tj_h_wgmma, 128, "m64n256k16", 128, 129, 130, TJ_H_TNSP)
TJ_H_WGMMA(tj_s_wgmma, 8, "m64n16k16", 8, 9, 10, TJ_S_TNSP)
#undef TJ_H_WGMMA
#undef TJ_H_WGMMA_D
#undef TJ_H_WGMMA_D128
#undef TJ_H_WGMMA_D64
#undef TJ_H_WGMMA_D32
#undef TJ_H_WGMMA_D8
#undef TJ_H_D32
#undef TJ_H_D16
#undef TJ_H_D4
#undef TJ_H_WGMMA_REGS
#undef TJ_H_WGMMA_REGS128
#undef TJ_H_WGMMA_REGS64
#undef TJ_H_WGMMA_REGS32
#undef TJ_H_WGMMA_REGS8

/* Two values rounded to C's 16-bit type, lo in the low half. */
__device__ __forceinline__ unsigned tj_h_pack(float lo, float hi) {
  unsigned w;
#if TJ_TC == 2
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
#else
  __half2 h = __floats2half2_rn(lo, hi);
  memcpy(&w, &h, sizeof w);
#endif
  return w;
}

/* Where a tile entry's results go: C (ldc, M x N, type TJ_TC) with alpha,
 * beta and the epilogue's bias, aux and ldaux (gemm_epilogue.h), and map,
 * a tensor map over C that the epilogue stores through when store is 1
 * (the host's choice: beta == 0, C 16-bit and a TMA tensor). */
struct tj_h_out {
  void *C;
  int ldc, M, N;
  float alpha, beta;
  const tj_tmap *map;
  int store;
  const void *bias;
  void *aux;
  long long ldaux;
  int K;  /* the skinny kernel's */
  int M0; /* the grouped kind's first row to store (rows below it are
             another group's); 0 elsewhere */
};

/* The epilogue on v (alpha and beta applied) at (row, col), which lies
 * inside C. */
__device__ __forceinline__ float tj_h_apply(const tj_h_out &o, int row,
                                            int col, float v) {
  return tj_e_apply<TJ_TC, TJ_EPI>(v, row, col, o.bias, o.aux, o.ldaux);
}

/* alpha * v + beta * C, then the epilogue, at (row, col) and (row, col +
 * 1); C read only when beta != 0, so NaN there does not reach the result.
 * pairs: both stored at once where C's alignment and ldc allow. */
__device__ __forceinline__ void tj_h_store2(const tj_h_out &o, int row,
                                            int col, float v0, float v1,
                                            bool pairs) {
  if (row >= o.M || col >= o.N)
    return;
#if defined(TJ_GROUPED)
  if (row < o.M0)
    return;
#endif
  long long i = (long long)row * o.ldc + col;
  bool two = col + 1 < o.N;
  float r0 = o.alpha * v0, r1 = o.alpha * v1;
  if (o.beta != 0.0f) {
    r0 += o.beta * tj_e_load<TJ_TC>(o.C, i);
    if (two)
      r1 += o.beta * tj_e_load<TJ_TC>(o.C, i + 1);
  }
  r0 = tj_h_apply(o, row, col, r0);
  if (two)
    r1 = tj_h_apply(o, row, col + 1, r1);
  if (pairs && two) {
    if (TJ_TC == 3)
      *reinterpret_cast<float2 *>((float *)o.C + i) = make_float2(r0, r1);
    else
      *reinterpret_cast<unsigned *>((unsigned short *)o.C + i) =
          tj_h_pack(r0, r1);
    return;
  }
  tj_e_store<TJ_TC>(o.C, i, r0);
  if (two)
    tj_e_store<TJ_TC>(o.C, i + 1, r1);
}

/* MC: one block of a multicast pair (rank 0 or 1 of a cluster of two
 * whose tiles share their B columns): it loads its own A box and the B
 * boxes j with j % 2 == rank, each into both blocks; the full barrier
 * still counts the whole stage, half of B arriving from the other block.
 * a_live 0: the tile lies below M (the second of a pair on an odd tile
 * row count), so no A is loaded and the stage counts only B. */
template <int BN, int STAGES, int MC = 0>
__device__ __forceinline__ void tj_h_produce(const tj_tmap *ta,
                                             const tj_tmap *tb, unsigned sa,
                                             unsigned sb, unsigned full,
                                             unsigned empty, int ktiles,
                                             int m0, int n0, int kt0,
                                             int it0, unsigned rank = 0,
                                             int a_live = 1) {
  for (int kt = 0; kt < ktiles; kt++) {
    /* it: the block's k-tile count so far, which a persistent block runs
     * on across its tiles, so stages and phases carry over. */
    int it = it0 + kt, s = it % STAGES;
    /* A fresh barrier counts as having completed the phase before its
     * first, so the first pass over the stages does not wait. */
    tj_h_bar_wait(empty + 8 * s, ((it / STAGES) & 1) ^ 1);
    unsigned bar = full + 8 * s;
    tj_h_bar_expect(bar, a_live ? TJ_H_STAGE_BYTES(BN) : TJ_H_BK * BN * 2);
    int k = (kt0 + kt) * TJ_H_BK;
    unsigned a = sa + s * (TJ_H_BM * TJ_H_BK * 2);
    /* A K-major: one box of 128 rows; M-major: two of 64 k rows x 64
     * columns, the rows of each consumer warpgroup 8 KiB apart either
     * way. */
    if (a_live && !TJ_TRANS_A)
      tj_h_tma_load(a, ta, k, m0, bar);
    if (a_live && TJ_TRANS_A) {
      tj_h_tma_load(a, ta, m0, k, bar);
      tj_h_tma_load(a + 64 * 128, ta, m0 + 64, k, bar);
    }
    /* B N-major: box j is 64 k rows x 64 columns; K-major: 64 columns
     * (rows of B) x 64 k, so that the boxes together are BN rows of 128
     * bytes. */
    for (int j = 0; j < BN / 64; j++) {
      unsigned dst = sb + s * (TJ_H_BK * BN * 2) + j * (TJ_H_BK * 128);
      int x = TJ_TRANS_B ? k : n0 + 64 * j, y = TJ_TRANS_B ? n0 + 64 * j : k;
      if (!MC)
        tj_h_tma_load(dst, tb, x, y, bar);
      else if ((unsigned)(j & 1) == rank)
        tj_h_tma_load_mc(dst, tb, x, y, bar, 3);
    }
  }
}

/* One consumer warpgroup: rows [64 * cw, 64 * cw + 64) of the tile. */
template <int BN, int STAGES, int MC = 0>
__device__ __forceinline__ void tj_h_consume(float (&d)[BN / 2], int cw,
                                             unsigned sa, unsigned sb,
                                             unsigned full, unsigned empty,
                                             int ktiles, int it0,
                                             unsigned peer_empty = 0) {
  for (int kt = 0; kt < ktiles; kt++) {
    int it = it0 + kt, s = it % STAGES;
    tj_h_bar_wait(full + 8 * s, (it / STAGES) & 1);
    unsigned a = sa + s * (TJ_H_BM * TJ_H_BK * 2) + cw * (64 * 128);
    unsigned b = sb + s * (TJ_H_BK * BN * 2);
    tj_h_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < TJ_H_BK / 16; kk++) {
      /* K-major: 16 elements (32 bytes) along the 128-byte rows per k16
       * step, 8-row core groups 1024 bytes apart.  MN-major: 16 k rows
       * (2048 bytes) per step, 64-column boxes TJ_H_BK * 128 bytes apart,
       * 8-row groups 1024 apart. */
      unsigned long long da = TJ_TRANS_A
                                  ? tj_h_desc(a + 2048 * kk, TJ_H_BK * 128, 1024)
                                  : tj_h_desc(a + 32 * kk, 16, 1024);
      unsigned long long db = TJ_TRANS_B
                                  ? tj_h_desc(b + 32 * kk, 16, 1024)
                                  : tj_h_desc(b + 2048 * kk, TJ_H_BK * 128, 1024);
      tj_h_wgmma(d, da, db);
    }
    tj_h_wgmma_commit();
    /* Keep this k-tile's wgmma group running while the previous one's
     * stage goes back to the producer; each warp says so for itself. */
    tj_h_wgmma_wait_one();
    if (kt > 0 && threadIdx.x % 32 == 0) {
      unsigned off = 8 * ((it - 1) % STAGES);
      tj_h_release<MC>(empty + off, peer_empty + off);
    }
  }
  tj_h_wgmma_wait_all();
}

/* The accumulator layout of m64nNk16: thread t of the warpgroup holds
 * rows 16 * (t / 32) + (t % 32) / 4 and that + 8, columns 8 * j +
 * 2 * (t % 4) and + 1, as d[4j], d[4j + 1] (first row), d[4j + 2],
 * d[4j + 3] (second). */
template <int BN>
__device__ __forceinline__ void tj_h_epilogue_direct(const float (&d)[BN / 2],
                                                     const tj_h_out &o,
                                                     int row0, int n0) {
  int t = threadIdx.x % 128;
  int row = row0 + 16 * (t / 32) + (t % 32) / 4;
  int col = n0 + 2 * (t % 4);
  bool pairs = (reinterpret_cast<unsigned long long>(o.C) &
                (TJ_TC == 3 ? 7ull : 3ull)) == 0 &&
               (o.ldc & 1) == 0;
#pragma unroll
  for (int j = 0; j < BN / 8; j++) {
    tj_h_store2(o, row, col + 8 * j, d[4 * j], d[4 * j + 1], pairs);
    tj_h_store2(o, row + 8, col + 8 * j, d[4 * j + 2], d[4 * j + 3], pairs);
  }
}

/* Two values of a box bound for TMA: alpha applied, then the epilogue
 * where (row, col) lies inside C (TMA drops what lies outside, so those
 * need no epilogue and must not read bias or aux). */
__device__ __forceinline__ unsigned tj_h_box_pair(const tj_h_out &o, int row,
                                                  int col, float v0,
                                                  float v1) {
  float r0 = o.alpha * v0, r1 = o.alpha * v1;
  if (TJ_EPI != 0 && row < o.M) {
    if (col < o.N)
      r0 = tj_h_apply(o, row, col, r0);
    if (col + 1 < o.N)
      r1 = tj_h_apply(o, row, col + 1, r1);
  }
  return tj_h_pack(r0, r1);
}

/* The two values of a 16-bit pair (C's type), lo first. */
__device__ __forceinline__ float2 tj_h_unpack(unsigned w) {
#if TJ_TC == 2
  return make_float2(__uint_as_float(w << 16),
                     __uint_as_float(w & 0xffff0000u));
#else
  __half2 h;
  memcpy(&h, &w, sizeof w);
  return __half22float2(h);
#endif
}

/* A thread's 16 pairs of box c (columns col + 8 jj and + 1, jj < 8, at
 * rows row and row + 8: pair 2 jj + h), alpha and the epilogue applied,
 * packed into w.  Where all of them lie inside C and bias and aux allow
 * 4-byte accesses, the epilogue's loads (bias pairs, aux pairs) are all
 * issued before any arithmetic and its aux stores come after, so their
 * latencies overlap instead of adding up; elsewhere each pair goes
 * through tj_h_box_pair. */
template <int BN>
__device__ __forceinline__ void tj_h_box_words(const float (&d)[BN / 2],
                                               const tj_h_out &o, int c,
                                               int row, int col,
                                               unsigned (&w)[16]) {
  bool fast = TJ_EPI != 0 && row + 8 < o.M && col + 57 < o.N &&
              ((reinterpret_cast<unsigned long long>(o.bias) |
                reinterpret_cast<unsigned long long>(o.aux)) & 3ull) == 0 &&
              (o.ldaux & 1) == 0;
  if (!fast) {
#pragma unroll
    for (int jj = 0; jj < 8; jj++) {
      int j = 8 * c + jj;
      w[2 * jj] = tj_h_box_pair(o, row, col + 8 * jj, d[4 * j], d[4 * j + 1]);
      w[2 * jj + 1] = tj_h_box_pair(o, row + 8, col + 8 * jj, d[4 * j + 2],
                                    d[4 * j + 3]);
    }
    return;
  }
  const unsigned short *bias = (const unsigned short *)o.bias;
  unsigned short *aux = (unsigned short *)o.aux;
  long long a0 = (long long)row * o.ldaux + col, a1 = a0 + 8 * o.ldaux;
  unsigned in[16];
#pragma unroll
  for (int jj = 0; jj < 8; jj++) {
    if (TJ_EPI == 1 || TJ_EPI == 2)
      in[jj] = *reinterpret_cast<const unsigned *>(bias + col + 8 * jj);
    if (TJ_EPI == 3) {
      in[2 * jj] = *reinterpret_cast<const unsigned *>(aux + a0 + 8 * jj);
      in[2 * jj + 1] = *reinterpret_cast<const unsigned *>(aux + a1 + 8 * jj);
    }
  }
  unsigned pre[16];
#pragma unroll
  for (int p = 0; p < 16; p++) {
    int j = 8 * c + p / 2, h = p % 2;
    float v0 = o.alpha * d[4 * j + 2 * h], v1 = o.alpha * d[4 * j + 2 * h + 1];
    if (TJ_EPI == 1 || TJ_EPI == 2) {
      float2 b = tj_h_unpack(in[p / 2]);
      v0 += b.x;
      v1 += b.y;
    }
    if (TJ_EPI == 2) {
      pre[p] = tj_h_pack(v0, v1);
      v0 = tj_e_gelu(v0);
      v1 = tj_e_gelu(v1);
    }
    if (TJ_EPI == 3) {
      float2 u = tj_h_unpack(in[p]);
      v0 *= tj_e_gelu_grad(u.x);
      v1 *= tj_e_gelu_grad(u.y);
    }
    w[p] = tj_h_pack(v0, v1);
  }
  if (TJ_EPI == 2 && aux) {
#pragma unroll
    for (int jj = 0; jj < 8; jj++) {
      *reinterpret_cast<unsigned *>(aux + a0 + 8 * jj) = pre[2 * jj];
      *reinterpret_cast<unsigned *>(aux + a1 + 8 * jj) = pre[2 * jj + 1];
    }
  }
}

/* The epilogue through shared memory, where beta == 0 and C is a 16-bit
 * TMA tensor (the host passes tma_c and says so): the warpgroup's 64 rows
 * go out in 64 x 64 boxes.  Each box is written (alpha and the epilogue
 * applied, rounded to C's type) into one of the warpgroup's two 8 KiB
 * buffers at buf, in the
 * 128-byte swizzle the tensor map reads (16-byte chunk j of row r at
 * chunk j ^ (r % 8): the 8 rows a warp writes at once fall in 8
 * different chunks, every bank once), then one thread stores it with a
 * bulk tensor copy that runs on while the warpgroup goes on (to its next
 * tile's k-loop in the persistent entries).  A buffer is rewritten only
 * after the copy two boxes back has read it; boxes counts the
 * warpgroup's boxes so far (the same in each of its threads).  TMA
 * clips what lies past M and N.  The thread that stores waits for its
 * last copies to read shared memory before the block ends
 * (tj_h_epilogue_done). */
template <int BN>
__device__ __forceinline__ void tj_h_epilogue_tma(const float (&d)[BN / 2],
                                                  const tj_h_out &o,
                                                  unsigned buf, int cw,
                                                  int row0, int n0,
                                                  unsigned &boxes) {
  int t = threadIdx.x % 128;
  int r = 16 * (t / 32) + (t % 32) / 4;
  /* This thread's first pair in a buffer: row r, column 2 * (t % 4). */
  unsigned mine = r * 128 + 4 * (t % 4);
#pragma unroll
  for (int c = 0; c < BN / 64; c++) {
    unsigned box = buf + (boxes & 1u) * 8192, b = box + mine;
    unsigned w[16];
    tj_h_box_words<BN>(d, o, c, row0 + r, n0 + 64 * c + 2 * (t % 4), w);
    if (t == 0)
      tj_h_tma_store_wait<1>();
    tj_h_named_sync(1 + cw, 128);
#pragma unroll
    for (int jj = 0; jj < 8; jj++) {
      unsigned at = b + ((jj ^ (r & 7)) << 4);
      /* Row r + 8: 1024 bytes on, the same chunk order. */
      asm volatile("st.shared.b32 [%0], %1;\n"
                   "st.shared.b32 [%2], %3;" ::"r"(at),
                   "r"(w[2 * jj]), "r"(at + 1024), "r"(w[2 * jj + 1])
                   : "memory");
    }
    /* The writes, made visible to the copy (the async proxy). */
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    tj_h_named_sync(1 + cw, 128);
    if (t == 0)
      tj_h_tma_store(o.map, box, n0 + 64 * c, row0);
    boxes++;
  }
}

/* A consumer warpgroup's rows [row0, row0 + 64) x [n0, n0 + BN), one way
 * or the other; epi: the block's epilogue buffers.  An f32 C is always
 * stored directly. */
template <int BN>
__device__ __forceinline__ void tj_h_epilogue(const float (&d)[BN / 2],
                                              const tj_h_out &o, unsigned epi,
                                              int cw, int row0, int n0,
                                              unsigned &boxes) {
  if (TJ_TC != 3 && o.store)
    tj_h_epilogue_tma<BN>(d, o, epi + cw * (TJ_H_EPI_BYTES / 2), cw, row0,
                          n0, boxes);
  else
    tj_h_epilogue_direct<BN>(d, o, row0, n0);
}

/* The end of a consumer warpgroup's stores: its copies have read their
 * buffers (the block's shared memory must outlive them). */
__device__ __forceinline__ void tj_h_epilogue_done(const tj_h_out &o) {
  if (o.store && threadIdx.x % 128 == 0)
    tj_h_tma_store_wait<0>();
}

/* Split-K: the block's fp32 sums for its K-range, rows below M only, into
 * its slice of the workspace (ldw a multiple of the tile width, so every
 * pair of columns is an aligned float2 and the tile needs no column
 * guard); the reduce (TJ_H_REDUCE_BODY) adds the slices. */
template <int BN>
__device__ __forceinline__ void tj_h_partial(const float (&d)[BN / 2],
                                             float *w, int ldw, int M,
                                             int row0, int n0) {
  int t = threadIdx.x % 128;
  int row = row0 + 16 * (t / 32) + (t % 32) / 4;
  int col = n0 + 2 * (t % 4);
  float *w0 = w + (long long)row * ldw + col;
  float *w1 = w0 + 8LL * ldw;
#pragma unroll
  for (int j = 0; j < BN / 8; j++) {
    if (row < M)
      *reinterpret_cast<float2 *>(w0 + 8 * j) =
          make_float2(d[4 * j], d[4 * j + 1]);
    if (row + 8 < M)
      *reinterpret_cast<float2 *>(w1 + 8 * j) =
          make_float2(d[4 * j + 2], d[4 * j + 3]);
  }
}

/* Which tile this block computes.  Blocks start in launch order (x
 * fastest); walking a band of TJ_H_GROUP tile rows column by column keeps
 * the A rows and B columns that blocks in flight share in L2, where plain
 * row order would stream all of B once per tile row. */
#define TJ_H_GROUP 8
/* Tile t of a tiles_m x tiles_n grid of tiles in that order (the
 * persistent entries walk t themselves). */
__device__ __forceinline__ void tj_h_tile_at(int t, int tiles_m, int tiles_n,
                                             int &mt, int &nt) {
  int band = t / (TJ_H_GROUP * tiles_n);
  int first = band * TJ_H_GROUP;
  int rows = tiles_m - first < TJ_H_GROUP ? tiles_m - first : TJ_H_GROUP;
  int in_band = t - band * (TJ_H_GROUP * tiles_n);
  mt = first + in_band % rows;
  nt = in_band / rows;
}

__device__ __forceinline__ void tj_h_tile_order(int &mt, int &nt) {
  tj_h_tile_at(blockIdx.y * gridDim.x + blockIdx.x, gridDim.y, gridDim.x, mt,
               nt);
}

/* Where the stages and their barriers sit in dynamic shared memory: A
 * tiles, B tiles, the epilogue's buffers (TJ_H_EPI_BYTES: two 64 x 64
 * fp16 boxes for each consumer warpgroup), then a "full" and an "empty"
 * mbarrier per stage. */
struct tj_h_stages {
  unsigned sa, sb, epi, full, empty;
};

/* Lay out the stages and initialise the barriers; every thread calls it
 * (it ends in __syncthreads).  The tensor maps' descriptors are fetched
 * meanwhile (tc: only where the epilogue stores through it). */
template <int BN, int STAGES>
__device__ __forceinline__ tj_h_stages tj_h_setup(const tj_tmap *ta,
                                                  const tj_tmap *tb,
                                                  const tj_tmap *tc,
                                                  unsigned releases = 8) {
  extern __shared__ unsigned char tj_h_smem[];
  tj_h_stages st;
  /* The swizzle repeats every 1024 bytes and TMA and wgmma both assume a
   * tile (and an epilogue box) starts on that period. */
  st.sa = (tj_h_smem_addr(tj_h_smem) + 1023u) & ~1023u;
  st.sb = st.sa + STAGES * (TJ_H_BM * TJ_H_BK * 2);
  st.epi = st.sb + STAGES * (TJ_H_BK * BN * 2);
  st.full = st.epi + TJ_H_EPI_BYTES;
  st.empty = st.full + 8 * STAGES;
  if (threadIdx.x == 0) {
    tj_h_prefetch_map(ta);
    tj_h_prefetch_map(tb);
    if (tc)
      tj_h_prefetch_map(tc);
    for (int s = 0; s < STAGES; s++) {
      tj_h_bar_init(st.full + 8 * s, 1);
      /* a warp of each consumer (of both blocks of a multicast pair) */
      tj_h_bar_init(st.empty + 8 * s, releases);
    }
    /* Make the initialised barriers visible to the async proxy (TMA). */
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  return st;
}

/* The run of whole k-tiles that part `part` of a K split in runs of kper
 * takes: [kt0, kt0 + kn) of the ktiles.  A run past the end (K short of
 * the split) is empty, kn == 0: its block sums to zeros, which the total
 * needs. */
__device__ __forceinline__ void tj_h_krun(int ktiles, int kper, int part,
                                          int &kt0, int &kn) {
  kt0 = part * kper;
  kn = max(0, min(ktiles - kt0, kper));
}

/* The warp roles of a block that runs one tile's k-tiles [kt0, kt0 + kn)
 * through the stages st: warpgroup 0 gives up registers and its thread 0
 * issues the loads; the two consumer warpgroups take the registers and
 * multiply into d (zeroed here), 64 rows each.  false in the producer
 * warpgroup (d untouched), true in the consumers once d holds the sums. */
template <int BN, int STAGES>
__device__ __forceinline__ bool tj_h_tile_mma(float (&d)[BN / 2],
                                              const tj_tmap *ta,
                                              const tj_tmap *tb,
                                              const tj_h_stages &st, int m0,
                                              int n0, int kt0, int kn) {
  int wg = threadIdx.x / 128;
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0)
      tj_h_produce<BN, STAGES>(ta, tb, st.sa, st.sb, st.full, st.empty, kn,
                               m0, n0, kt0, 0);
    return false;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
#pragma unroll
  for (int i = 0; i < BN / 2; i++)
    d[i] = 0.0f;
  tj_h_consume<BN, STAGES>(d, wg - 1, st.sa, st.sb, st.full, st.empty, kn, 0);
  return true;
}

/* kper > 0: split-K, block z of the grid takes k-tiles [z * kper, z * kper
 * + kper) and writes fp32 partials to work; kper == 0: the whole K and
 * the epilogue into C. */
template <int BN, int STAGES>
__device__ __forceinline__ void tj_h_gemm(const tj_tmap *ta, const tj_tmap *tb,
                                          int M, int N, int K,
                                          const tj_h_out &o, int kper,
                                          float *work) {
  tj_h_stages st = tj_h_setup<BN, STAGES>(ta, tb, o.store ? o.map : nullptr);
  int wg = threadIdx.x / 128;
  int ktiles = (K + TJ_H_BK - 1) / TJ_H_BK;
  int kt0 = 0, kn = ktiles;
  if (kper > 0)
    tj_h_krun(ktiles, kper, blockIdx.z, kt0, kn);
  int mt, nt;
  tj_h_tile_order(mt, nt);
  int m0 = mt * TJ_H_BM, n0 = nt * BN;
  float d[BN / 2];
  if (!tj_h_tile_mma<BN, STAGES>(d, ta, tb, st, m0, n0, kt0, kn))
    return;
  if (kper > 0) {
    int ldw = gridDim.x * BN;
    tj_h_partial<BN>(d, work + (long long)blockIdx.z * M * ldw, ldw, M,
                     m0 + 64 * (wg - 1), n0);
    return;
  }
  unsigned boxes = 0;
  tj_h_epilogue<BN>(d, o, st.epi, wg - 1, m0 + 64 * (wg - 1), n0, boxes);
  tj_h_epilogue_done(o);
}

/* Persistent: a grid of at most one block per SM, each block taking tiles
 * blockIdx.x, + gridDim.x, ... in the banded order.  The k-tile count it
 * runs on across tiles, so stages and barrier phases carry over: the
 * producer loads the next tile's first stages while the consumers are
 * still in this tile's epilogue, which the one-tile-per-block entries
 * leave to a new block's start.
 *
 * MC: the same in clusters of two that share B (TMA multicast): cluster c
 * of the grid walks pairs of tiles c, c + gridDim.x / 2, ... in the
 * banded order over pair rows; block rank r of the cluster computes tile
 * row 2 * pair row + r of the pair's tile column.  Each block fetches its
 * own A and half of the B tile, multicast into both, so the two fetch
 * B's boxes once between them (cuBLAS's kernels for these shapes run in
 * clusters of two as well).  A
 * stage goes back to a producer when the consumers of both blocks are
 * done with it (16 arrivals), since each producer writes into both; and
 * neither block leaves before the other, whose consumers still arrive on
 * its barriers. */

template <int BN, int STAGES, int MC = 0>
__device__ __forceinline__ void tj_h_gemm_persistent(const tj_tmap *ta,
                                                     const tj_tmap *tb, int M,
                                                     int N, int K,
                                                     const tj_h_out &o) {
  const int G = MC ? 2 : 1; /* blocks a group of tiles, tile rows apart */
  tj_h_stages st =
      tj_h_setup<BN, STAGES>(ta, tb, o.store ? o.map : nullptr, 8 * G);
  unsigned sa = st.sa, sb = st.sb, full = st.full, empty = st.empty;
  unsigned rank = 0;
  if (MC) {
    /* The other block's barriers are initialised before anything of ours
     * reaches them. */
    tj_h_cluster_sync();
    rank = tj_h_cluster_rank();
  }
  int wg = threadIdx.x / 128;
  int ktiles = (K + TJ_H_BK - 1) / TJ_H_BK;
  int tiles_m = (M + TJ_H_BM - 1) / TJ_H_BM, tiles_n = (N + BN - 1) / BN;
  int groups_m = (tiles_m + G - 1) / G, groups = groups_m * tiles_n;
  int first = blockIdx.x / G, step = gridDim.x / G;
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) {
      int it = 0;
      for (int t = first; t < groups; t += step, it += ktiles) {
        int gm, nt;
        tj_h_tile_at(t, groups_m, tiles_n, gm, nt);
        int m0 = (G * gm + (int)rank) * TJ_H_BM;
        /* A pair's second tile wholly below M (an odd tile row count)
         * loads no A. */
        tj_h_produce<BN, STAGES, MC>(ta, tb, sa, sb, full, empty, ktiles, m0,
                                     nt * BN, 0, it, rank, !MC || m0 < M);
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    unsigned peer_empty = MC ? tj_h_map_rank(empty, rank ^ 1u) : 0;
    int it = 0;
    unsigned boxes = 0;
    float d[BN / 2];
    for (int t = first; t < groups; t += step, it += ktiles) {
      int gm, nt;
      tj_h_tile_at(t, groups_m, tiles_n, gm, nt);
#pragma unroll
      for (int i = 0; i < BN / 2; i++)
        d[i] = 0.0f;
      tj_h_consume<BN, STAGES, MC>(d, wg - 1, sa, sb, full, empty, ktiles, it,
                                   peer_empty);
      /* The tile's last stage goes back too: the next tile reuses it.  (In
       * tj_h_consume itself this arrive made ptxas serialize the wgmmas of
       * the one-tile entries.) */
      if (threadIdx.x % 32 == 0) {
        unsigned off = 8 * ((it + ktiles - 1) % STAGES);
        tj_h_release<MC>(empty + off, peer_empty + off);
      }
      /* Rows past M (the second tile of an odd pair row) store nothing. */
      tj_h_epilogue<BN>(d, o, st.epi, wg - 1,
                        (G * gm + (int)rank) * TJ_H_BM + 64 * (wg - 1),
                        nt * BN, boxes);
    }
    tj_h_epilogue_done(o);
  }
  /* Every thread of both blocks, the producer's idle ones included (not
   * .aligned: warp 0's thread 0 comes from its loop, the rest at once). */
  if (MC)
    tj_h_cluster_sync_any();
}

/* Split-K across a cluster of two blocks: block rank 1 of the pair sends
 * its fp32 sums for the second half of K into rank 0's shared memory
 * (st.async, counted by an mbarrier there), and rank 0 adds them to its
 * own in that fixed order and writes C: the same bits on every run, no
 * workspace, no second launch.  For shapes whose 128 x 64 tiles fill at
 * most half the SMs (128 x 4096 x 4096: 64 tiles), where one block per
 * tile is held back by what a single SM can load. */

/* Four floats into another block's shared memory, their 16 bytes counted
 * toward its barrier bar (both cluster addresses). */
__device__ __forceinline__ void tj_h_send4(unsigned addr, float a, float b,
                                           float c, float d, unsigned bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 "
               "[%0], {%1, %2, %3, %4}, [%5];" ::"r"(addr),
               "f"(a), "f"(b), "f"(c), "f"(d), "r"(bar)
               : "memory");
}

template <int BN, int STAGES>
__device__ __forceinline__ void tj_h_gemm_cluster_k2(const tj_tmap *ta,
                                                     const tj_tmap *tb, int M,
                                                     int N, int K,
                                                     const tj_h_out &o) {
  tj_h_stages st =
      tj_h_setup<BN, STAGES>(ta, tb, o.store ? o.map : nullptr);
  /* Rank 1's bytes land in rank 0's epilogue buffers (TJ_H_EPI_BYTES: 128
   * x BN floats), which rank 0 empties before its epilogue writes there;
   * after the stages' barriers, one more that counts them. */
  unsigned got = st.empty + 8 * STAGES, part = st.epi;
  unsigned rank = tj_h_cluster_rank();
  if (threadIdx.x == 0 && rank == 0) {
    tj_h_bar_init(got, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    static_assert(TJ_H_BM * BN * 4 <= TJ_H_EPI_BYTES, "rank 1's sums fit");
    tj_h_bar_expect(got, 128 * BN * 4); /* its one arrival, and the bytes */
  }
  tj_h_cluster_sync();
  int wg = threadIdx.x / 128;
  int ktiles = (K + TJ_H_BK - 1) / TJ_H_BK, half = (ktiles + 1) / 2;
  int kt0 = rank ? half : 0, kn = rank ? ktiles - half : half;
  int mt, nt;
  tj_h_tile_at(blockIdx.y * (gridDim.x / 2) + blockIdx.x / 2, gridDim.y,
               gridDim.x / 2, mt, nt);
  int m0 = mt * TJ_H_BM, n0 = nt * BN;
  float d[BN / 2];
  if (!tj_h_tile_mma<BN, STAGES>(d, ta, tb, st, m0, n0, kt0, kn))
    return;
  /* Consumer thread t holds the same accumulator elements in both blocks:
   * its four floats i..i+3 go to slot (i / 4) * 256 + t. */
  unsigned t = threadIdx.x - 128;
  if (rank == 1) {
    unsigned rpart = tj_h_map_rank(part, 0), rgot = tj_h_map_rank(got, 0);
#pragma unroll
    for (int i = 0; i < BN / 2; i += 4)
      tj_h_send4(rpart + ((i / 4) * 256 + t) * 16, d[i], d[i + 1], d[i + 2],
                 d[i + 3], rgot);
    return;
  }
  tj_h_bar_wait(got, 0);
#pragma unroll
  for (int i = 0; i < BN / 2; i += 4) {
    float a, b, c, e;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(a), "=f"(b), "=f"(c), "=f"(e)
                 : "r"(part + ((i / 4) * 256 + t) * 16)
                 : "memory");
    d[i] += a;
    d[i + 1] += b;
    d[i + 2] += c;
    d[i + 3] += e;
  }
  /* Both warpgroups have read their sums before either writes a box. */
  if (o.store)
    tj_h_named_sync(3, 256);
  unsigned boxes = 0;
  tj_h_epilogue<BN>(d, o, st.epi, wg - 1, m0 + 64 * (wg - 1), n0, boxes);
  tj_h_epilogue_done(o);
}

/* Four floats (16-byte aligned) of a block's shared memory, at a
 * cluster address (this block's own addresses are cluster addresses
 * too). */
__device__ __forceinline__ float4 tj_h_ld4_cluster(unsigned addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

/* Four floats into a block's shared memory at a cluster address. */
__device__ __forceinline__ void tj_h_st4_cluster(unsigned addr, float4 v) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr),
               "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
               : "memory");
}

/* The slices in order z = 0, 1, ..., so the sum (and so C) is the same bits
 * on every run; then alpha, beta and the epilogue as tj_h_store2 applies
 * them (o's map and store unused). */
__device__ __forceinline__ void tj_h_reduce(const float *work, int split,
                                            int ldw, const tj_h_out &o) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= o.N)
    return;
  long long slice = (long long)o.M * ldw;
  for (int row = blockIdx.y; row < o.M; row += gridDim.y) {
    const float *w = work + (long long)row * ldw + col;
    float v = 0.0f;
    for (int z = 0; z < split; z++)
      v += w[z * slice];
    long long i = (long long)row * o.ldc + col;
    float r = o.alpha * v;
    if (o.beta != 0.0f)
      r += o.beta * tj_e_load<TJ_TC>(o.C, i);
    tj_e_store<TJ_TC>(o.C, i, tj_h_apply(o, row, col, r));
  }
}

/* The skinny kernel reads A K-major only (its rows are wgmma's narrow
 * operand): the family's configurations with A transposed skip it. */
#if !TJ_TRANS_A
/* ------------------------------------------------------- skinny (M <= 16)
 *
 * C = alpha * A * B + beta * C for M <= 16 rows, where the work is
 * reading B once at the memory's rate (tj-bench's skinny shapes).  The
 * product runs transposed, C^T = B^T * A^T, so that wgmma's 64-row side
 * lies along N and its narrow side (n16) along M: a tile of B, as TMA
 * loads it for the tiles above (64 k rows x 64 columns, 128-byte
 * swizzle), is wgmma's A operand read transposed (imm-trans-a 1), and
 * A's 16 x 64 box (rows past M filled with zeros by TMA) is its B
 * operand, K-major.  No 128-row tile is wasted on 16 rows.
 *
 *   block     one consumer warpgroup (warps 0-3) and a producer warp
 *             (warp 4, one thread issuing TMA); BN = 128 or 256 columns
 *             of C (BN / 64 m64 wgmmas per k16 step) and a K-range.
 *   stages    TJ_S_STAGES of 64 k rows: BN / 4 KiB of B and 2 KiB of A
 *             each; two 128-column blocks fit an SM (but in a cluster
 *             of 8), one 256-column block.
 *   split-K   in a cluster of S blocks along x (S compiled in, one entry
 *             each): block rank r takes the r-th of S K-ranges of the
 *             strip and writes its fp32 sums to its own shared memory;
 *             each block sends the sums of the elements another block
 *             finishes into that block's shared memory, and after one
 *             cluster barrier adds all S sums of its own share in rank
 *             order (the same bits on every run): no workspace, one
 *             launch.
 *   alpha 0   A and B are not read (no stage is loaded); C = beta * C.
 */
#define TJ_S_ROWS 16
#define TJ_S_STAGES 5
#define TJ_S_THREADS 160
#define TJ_S_B_BYTES(bn) (TJ_H_BK * (bn) * 2)
#define TJ_S_STAGE_BYTES(bn) (TJ_S_B_BYTES(bn) + TJ_S_ROWS * TJ_H_BK * 2)
/* A block of a cluster of s finishes groups (four columns of a row) in
 * runs of a block's threads, every s-th run (tj_s_gemm): this many at
 * most, and it receives each one's sums from the s - 1 others. */
#define TJ_S_SLOTS(bn, s)                                                  \
  (((4 * (bn) + (s) * TJ_S_THREADS - 1) / ((s) * TJ_S_THREADS)) *          \
   TJ_S_THREADS)
/* The stages, 1 KiB for their alignment, the barriers, the fp32 sums,
 * the sums received (src/ops/gemm/plan.h's SM90A_SKINNY_SHARED says the same). */
#define TJ_S_SMEM_BYTES(bn, s)                                         \
  (TJ_S_STAGES * TJ_S_STAGE_BYTES(bn) + 1024 + 2 * 8 * TJ_S_STAGES +    \
   TJ_S_ROWS * (bn) * 4 + ((s) - 1) * TJ_S_SLOTS(bn, s) * 16)

/* The finished sums v of four columns from (row, col) of C: alpha, beta
 * and the epilogue, stored (at once where the four are whole and their
 * bytes aligned: 8 of them, 16 for f32, as callers usually have C). */
__device__ __forceinline__ void tj_s_store4(const tj_h_out &o, int row,
                                            int col, const float (&v)[4]) {
  long long i = (long long)row * o.ldc + col;
  const int eb = TJ_TC == 3 ? 4 : 2;
  bool whole = col + 4 <= o.N &&
               (((unsigned long long)o.C + i * eb) & (4 * eb - 1)) == 0;
  float r[4];
#pragma unroll
  for (int j = 0; j < 4; j++) {
    if (col + j >= o.N)
      break;
    r[j] = o.alpha * v[j];
    if (o.beta != 0.0f)
      r[j] += o.beta * tj_e_load<TJ_TC>(o.C, i + j);
    r[j] = tj_h_apply(o, row, col + j, r[j]);
    if (!whole)
      tj_e_store<TJ_TC>(o.C, i + j, r[j]);
  }
  if (!whole)
    return;
  if (TJ_TC == 3)
    *(float4 *)((float *)o.C + i) = make_float4(r[0], r[1], r[2], r[3]);
  else
    *(uint2 *)((unsigned short *)o.C + i) =
        make_uint2(tj_h_pack(r[0], r[1]), tj_h_pack(r[2], r[3]));
}

template <int BN, int S>
__device__ __forceinline__ void tj_s_gemm(const tj_tmap *ta, const tj_tmap *tb,
                                          const tj_h_out &o,
                                          int evict_first) {
  const int M = o.M, K = o.K;
  const float alpha = o.alpha;
  extern __shared__ unsigned char tj_h_smem[];
  unsigned stages = (tj_h_smem_addr(tj_h_smem) + 1023u) & ~1023u;
  unsigned full = stages + TJ_S_STAGES * TJ_S_STAGE_BYTES(BN);
  unsigned empty = full + 8 * TJ_S_STAGES;
  unsigned sums = empty + 8 * TJ_S_STAGES;
  if (threadIdx.x == 0) {
    tj_h_prefetch_map(ta);
    tj_h_prefetch_map(tb);
    for (int s = 0; s < TJ_S_STAGES; s++) {
      tj_h_bar_init(full + 8 * s, 1);
      tj_h_bar_init(empty + 8 * s, 4); /* each consumer warp */
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  /* Every block of the cluster has started before another writes into
   * its shared memory: arrived here, waited for before the sums are
   * sent (long after, so the wait costs nothing). */
  if (S > 1)
    asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
  /* Launched to start early (programmatic dependent launch, the default;
   * TJ_GEMM_PDL=0 launches plainly), the block may have got here while
   * the kernel ahead of it on the stream still runs: nothing of A, B or C
   * is touched before that kernel is done and its writes show.  The
   * kernel after this one may start its own setup from here.  Launched
   * plainly, both return at once. */
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  unsigned rank = S > 1 ? tj_h_cluster_rank() : 0;
  int n0 = (int)(blockIdx.x / S) * BN;
  /* This block's K-range: the r-th of S runs of whole k-tiles (an empty
   * one where K is short sums to zeros). */
  int ktiles = alpha == 0.0f ? 0 : (K + TJ_H_BK - 1) / TJ_H_BK;
  int kt0, kn;
  tj_h_krun(ktiles, (ktiles + S - 1) / S, rank, kt0, kn);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 4) {
    /* evict_first: B, read once, goes through L2 marked first to go, so
     * that its lines replace each other rather than lines others left
     * there (dirty ones would cost a write back each). */
    unsigned long long policy = 0;
    if (lane == 0 && evict_first)
      asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;"
                   : "=l"(policy));
    if (lane == 0)
      for (int kt = 0; kt < kn; kt++) {
        int s = kt % TJ_S_STAGES;
        tj_h_bar_wait(empty + 8 * s, ((kt / TJ_S_STAGES) & 1) ^ 1);
        unsigned bar = full + 8 * s, dst = stages + s * TJ_S_STAGE_BYTES(BN);
        tj_h_bar_expect(bar, TJ_S_STAGE_BYTES(BN));
        int k = (kt0 + kt) * TJ_H_BK;
        /* B's box j: 64 k rows x 64 columns, or 64 columns (rows of B)
         * x 64 k where B is stored N x K. */
        for (int j = 0; j < BN / 64; j++) {
          unsigned at = dst + j * (TJ_H_BK * 128);
          int x = TJ_TRANS_B ? k : n0 + 64 * j;
          int y = TJ_TRANS_B ? n0 + 64 * j : k;
          if (evict_first)
            tj_h_tma_load_hint(at, tb, x, y, bar, policy);
          else
            tj_h_tma_load(at, tb, x, y, bar);
        }
        tj_h_tma_load(dst + TJ_S_B_BYTES(BN), ta, k, 0, bar);
      }
    __syncwarp();
  } else {
    float d[BN / 64][8];
#pragma unroll
    for (int c = 0; c < BN / 64; c++)
#pragma unroll
      for (int i = 0; i < 8; i++)
        d[c][i] = 0.0f;
    for (int kt = 0; kt < kn; kt++) {
      int s = kt % TJ_S_STAGES;
      tj_h_bar_wait(full + 8 * s, (kt / TJ_S_STAGES) & 1);
      unsigned b = stages + s * TJ_S_STAGE_BYTES(BN), a = b + TJ_S_B_BYTES(BN);
      tj_h_wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < TJ_H_BK / 16; kk++) {
        /* B's box c: 16 k rows (2048 bytes) per step, 8-row groups 1024
         * apart (K-major: 16 elements along its 128-byte rows); A's box:
         * 16 elements (32 bytes) along its 128-byte rows. */
        unsigned long long db = tj_h_desc(a + 32 * kk, 16, 1024);
#pragma unroll
        for (int c = 0; c < BN / 64; c++) {
          unsigned box = b + c * (TJ_H_BK * 128);
          tj_s_wgmma(d[c],
                     TJ_TRANS_B ? tj_h_desc(box + 32 * kk, 16, 1024)
                                : tj_h_desc(box + 2048 * kk, TJ_H_BK * 128,
                                            1024),
                     db);
        }
      }
      tj_h_wgmma_commit();
      tj_h_wgmma_wait_one();
      if (kt > 0 && lane == 0)
        tj_h_bar_arrive(empty + 8 * ((kt - 1) % TJ_S_STAGES));
    }
    tj_h_wgmma_wait_all();
    /* m64n16's layout, transposed: thread t holds columns n = 16 * warp +
     * lane / 4 (and n + 8) of box c, rows m = 8 * i + 2 * (lane % 4) (and
     * m + 1); sums[m][n] over the block's BN columns. */
    int n = 16 * warp + lane / 4, m = 2 * (lane % 4);
#pragma unroll
    for (int c = 0; c < BN / 64; c++)
#pragma unroll
      for (int i = 0; i < 2; i++) {
        unsigned at = sums + 4 * ((m + 8 * i) * BN + 64 * c + n);
        asm volatile("st.shared.f32 [%0], %1;\n"
                     "st.shared.f32 [%2], %3;\n"
                     "st.shared.f32 [%4], %5;\n"
                     "st.shared.f32 [%6], %7;" ::"r"(at),
                     "f"(d[c][4 * i]), "r"(at + 4 * BN),
                     "f"(d[c][4 * i + 1]), "r"(at + 32), "f"(d[c][4 * i + 2]),
                     "r"(at + 4 * BN + 32), "f"(d[c][4 * i + 3])
                     : "memory");
      }
  }
  /* Block rank r finishes groups of four elements (of one row) in runs
   * of a block's threads, every S-th run starting at run r, so that
   * neighbouring threads store neighbouring columns.  Each block first
   * sends the sums it holds for the others' groups into their shared
   * memory (slot li of the sender's place among the other S - 1), one
   * cluster barrier makes them whole, and each block then adds its
   * groups' S sums from its own shared memory in rank order (the same
   * bits on every run).  Nothing of another block is touched after that
   * barrier, so no block waits for the others to leave. */
  int groups = (M < TJ_S_ROWS ? M : TJ_S_ROWS) * BN / 4;
  constexpr int RUN = S * TJ_S_THREADS, SLOTS = TJ_S_SLOTS(BN, S);
  unsigned recv = sums + TJ_S_ROWS * BN * 4;
  /* This block's sums are written (all threads, both warp roles). */
  __syncthreads();
  if (S > 1) {
    asm volatile("barrier.cluster.wait;" ::: "memory");
    for (int g = (int)threadIdx.x; g < groups; g += TJ_S_THREADS) {
      unsigned q = (unsigned)(g / TJ_S_THREADS) % S;
      if (q == rank)
        continue;
      int li = g / RUN * TJ_S_THREADS + g % TJ_S_THREADS;
      unsigned from = rank < q ? rank : rank - 1;
      tj_h_st4_cluster(tj_h_map_rank(recv + 16 * (from * SLOTS + li), q),
                       tj_h_ld4_cluster(sums + 16 * g));
    }
    /* Not .aligned: the producer warp's lanes come from different
     * paths. */
    tj_h_cluster_sync_any();
  }
  for (int g = (int)rank * TJ_S_THREADS + (int)threadIdx.x; g < groups;
       g += RUN) {
    int li = g / RUN * TJ_S_THREADS + g % TJ_S_THREADS;
    float4 part[S];
#pragma unroll
    for (int q = 0; q < S; q++)
      part[q] = tj_h_ld4_cluster(
          q == (int)rank ? sums + 16 * g
                         : recv + 16 * ((q < (int)rank ? q : q - 1) * SLOTS +
                                        li));
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int q = 0; q < S; q++) {
      v[0] += part[q].x;
      v[1] += part[q].y;
      v[2] += part[q].z;
      v[3] += part[q].w;
    }
    tj_s_store4(o, 4 * g / BN, n0 + 4 * g % BN, v);
  }
}

#endif

/* The tile entries' results, as their parameters give them. */
#define TJ_H_OUT \
  tj_h_out { C, ldc, M, N, alpha, beta, &tma_c, store, nullptr, nullptr, 0 }
#define TJ_H_BODY(bn, stages) \
  tj_h_gemm<bn, stages>(&tma_a, &tma_b, M, N, K, TJ_H_OUT, 0, nullptr)
#define TJ_H_SPLIT_BODY(bn, stages)                                       \
  tj_h_gemm<bn, stages>(&tma_a, &tma_b, M, N, K,                          \
                        tj_h_out{nullptr, 0, M, N, 1.0f, 0.0f, nullptr, 0,  \
                                 nullptr, nullptr, 0},                      \
                        kper, work)
#define TJ_H_REDUCE_BODY()                                               \
  tj_h_reduce(work, split, ldw,                                          \
              tj_h_out{C, ldc, M, N, alpha, beta, nullptr, 0, nullptr,   \
                       nullptr, 0})
#define TJ_H_PERSISTENT_BODY(bn, stages) \
  tj_h_gemm_persistent<bn, stages>(&tma_a, &tma_b, M, N, K, TJ_H_OUT)
#define TJ_H_CLUSTER_K2_BODY(bn, stages) \
  tj_h_gemm_cluster_k2<bn, stages>(&tma_a, &tma_b, M, N, K, TJ_H_OUT)
#define TJ_H_PERSISTENT_MC2_BODY(bn, stages) \
  tj_h_gemm_persistent<bn, stages, 1>(&tma_a, &tma_b, M, N, K, TJ_H_OUT)
#define TJ_S_BODY(bn, split)                                             \
  tj_s_gemm<bn, split>(&tma_a, &tma_b,                                   \
                       tj_h_out{C, ldc, M, N, alpha, beta, nullptr, 0,   \
                                nullptr, nullptr, 0, K},                 \
                       evict_first)
/* The family's skinny configurations (kind 5): store says whether B's
 * loads go evict-first. */
#define TJ_S_BODY_EPI(bn, split)                                         \
  tj_s_gemm<bn, split>(&tma_a, &tma_b,                                   \
                       tj_h_out{C, ldc, M, N, alpha, beta, nullptr, 0,   \
                                bias, aux, ldaux, K},                    \
                       store)
/* The results with the epilogue's arguments (gemm_sm90a.hip's entries
 * take them). */
#define TJ_H_OUT_EPI                                                      \
  tj_h_out { C, ldc, M, N, alpha, beta, &tma_c, store, bias, aux, ldaux }
#define TJ_H_REDUCE_EPI_BODY()                                           \
  tj_h_reduce(work, split, ldw,                                          \
              tj_h_out{C, ldc, M, N, alpha, beta, nullptr, 0, bias, aux, \
                       ldaux})
#else
/* Not sm_90a: the entries exist (every arch compiles every embedded
 * kernel) but must never run; tj_gemm_f16 does not launch them there. */
#if defined(__CUDA_ARCH__)
#define TJ_H_BODY(bn, stages) asm volatile("trap;")
#else
#define TJ_H_BODY(bn, stages) __builtin_trap()
#endif
#define TJ_H_SPLIT_BODY(bn, stages) TJ_H_BODY(bn, stages)
#define TJ_H_REDUCE_BODY() TJ_H_BODY(0, 0)
#define TJ_H_PERSISTENT_BODY(bn, stages) TJ_H_BODY(bn, stages)
#define TJ_H_CLUSTER_K2_BODY(bn, stages) TJ_H_BODY(bn, stages)
#define TJ_H_PERSISTENT_MC2_BODY(bn, stages) TJ_H_BODY(bn, stages)
#define TJ_S_BODY(bn, split) TJ_H_BODY(0, 0)
#define TJ_S_BODY_EPI(bn, split) TJ_H_BODY(0, 0)
#define TJ_H_REDUCE_EPI_BODY() TJ_H_BODY(0, 0)
#endif

/* A cluster of two (3, 4, 8) blocks along x: NVRTC for sm_90 and later (it refuses
 * the attribute for older archs, which get the trapping stub, as does
 * every other compiler: launched never). */
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TJ_H_CLUSTER2 __cluster_dims__(2, 1, 1)
#define TJ_H_CLUSTER3 __cluster_dims__(3, 1, 1)
#define TJ_H_CLUSTER4 __cluster_dims__(4, 1, 1)
#define TJ_H_CLUSTER8 __cluster_dims__(8, 1, 1)
#else
#define TJ_H_CLUSTER2
#define TJ_H_CLUSTER3
#define TJ_H_CLUSTER4
#define TJ_H_CLUSTER8
#endif


/* ------------------------------------------------------- grouped (M)
 * The grouped GEMM's Hopper kind (kernels/gemm_grouped_sm90a.hip):
 * C[rows of e] = epilogue_e(alpha * op(A)[rows of e] op(B_e) + beta * C),
 * group e's rows [offs[e-1], offs[e]) (each offset clamped to [0, M]),
 * on the tiles' mainloop (tj_h_consume) as a persistent kernel.
 *   tiles     a group of r rows has ceil(r / 128) tile rows of 128 x BN
 *             tiles, starting at its first row; an empty group has none.
 *             The tile rows of all groups, in group order, make one
 *             virtual grid of tiles that the blocks walk as the
 *             persistent entries do (tile t, t + gridDim.x, ..., banded).
 *   table     each block first counts the tile rows of every group into
 *             shared memory (the epilogue's buffers, which this kind does
 *             not use: TJ_HG_TABLE running totals, each over TJ_HG_TABLE-th
 *             of the groups), then finds a tile row's group by a binary
 *             search there and a walk of at most that many groups; no
 *             offset is read on the host, nothing is allocated.
 *   A         tma_a as the tiles' (2-D over all M rows): rows of a tile
 *             past its group's end are loaded and computed, not stored.
 *             Stored K x M (TJ_TRANS_A), A's rows are the boxes' inner
 *             dimension, whose start TMA takes only on a 16-byte
 *             boundary: a group's tiles then start at its first row
 *             rounded down to TJ_HG_ROW_ALIGN, and the rows before its
 *             first (the previous group's) are computed, not stored.
 *   B         tma_b 3-D {N, K, E} (TJ_TRANS_B: {K, N, E}), the matrices
 *             stride_b apart, boxes {64, 64, 1}: TMA fills K and N past
 *             the end of B_e with zeros and never reads B_{e+1}.
 *   C         stored straight from the accumulators (tj_h_store2), rows
 *             masked to the group's end, bias + e * N as the group's bias
 *             and aux at the global row; the same bits on every run.
 */
/* Entries of the tile-row table, and its place: the epilogue buffers,
 * TJ_HG_TABLE ints then one a thread for the scan. */
#define TJ_HG_TABLE 4096
/* Where a group's tiles start with A stored K x M: 16 bytes of rows. */
#define TJ_HG_ROW_ALIGN (TJ_TRANS_A ? 8 : 1)
static_assert((TJ_HG_TABLE + TJ_H_THREADS) * 4 <= TJ_H_EPI_BYTES,
               "the grouped table fits the epilogue's buffers");

#if TJ_H_HOPPER

/* One box of the 3-D tensor map at (x = column, y = row, z = matrix). */
__device__ __forceinline__ void tj_hg_tma_load3(unsigned dst,
                                                const tj_tmap *map, int x,
                                                int y, int z, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::"
               "complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
               "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y),
               "r"(z), "r"(bar)
               : "memory");
}

/* The groups as the block sees them: offs (E ends, clamped to M), the
 * table of running tile-row totals (entry c covering groups [c * per,
 * c * per + per)), and the total of tile rows. */
struct tj_hg_groups {
  const int *offs;
  int E, M, per, entries, rows;
  const int *table;
};

/* End of group e, clamped to [0, M]; e == -1 is the start, 0. */
__device__ __forceinline__ int tj_hg_end(const tj_hg_groups &g, int e) {
  if (e < 0)
    return 0;
  int v = __ldg(g.offs + e);
  return v < 0 ? 0 : v > g.M ? g.M : v;
}

/* The first row of group e's tiles: its first row, rounded down to
 * TJ_HG_ROW_ALIGN. */
__device__ __forceinline__ int tj_hg_tiles_start(const tj_hg_groups &g,
                                                 int e) {
  return tj_hg_end(g, e - 1) / TJ_HG_ROW_ALIGN * TJ_HG_ROW_ALIGN;
}

/* Group e's tile rows (0 for an empty or out-of-order group). */
__device__ __forceinline__ int tj_hg_tile_rows(const tj_hg_groups &g,
                                               int e) {
  int end = tj_hg_end(g, e), r = end - tj_hg_end(g, e - 1);
  return r > 0 ? (end - tj_hg_tiles_start(g, e) + TJ_H_BM - 1) / TJ_H_BM : 0;
}

/* Every thread of the block: the table, built in shared memory at smem
 * (each thread counts a run of entries, warp 0 scans the runs' totals,
 * each thread adds the ones before its run); ends in __syncthreads. */
__device__ __forceinline__ tj_hg_groups tj_hg_count(const int *offs, int E,
                                                    int M, int *smem) {
  tj_hg_groups g;
  g.offs = offs, g.E = E, g.M = M;
  g.per = (E + TJ_HG_TABLE - 1) / TJ_HG_TABLE;
  g.entries = (E + g.per - 1) / g.per;
  g.table = smem;
  int *table = smem, *part = smem + TJ_HG_TABLE;
  int t = threadIdx.x, run = (g.entries + TJ_H_THREADS - 1) / TJ_H_THREADS;
  int c0 = t * run, c1 = min(g.entries, c0 + run), sum = 0;
  for (int c = c0; c < c1; c++) {
    for (int e = c * g.per; e < min(E, c * g.per + g.per); e++)
      sum += tj_hg_tile_rows(g, e);
    table[c] = sum;
  }
  part[t] = sum;
  __syncthreads();
  if (t < 32) {
    int carry = 0;
    for (int i = t; i < TJ_H_THREADS; i += 32) {
      int v = part[i], x = v;
      for (int o = 1; o < 32; o <<= 1) {
        int y = __shfl_up_sync(0xffffffffu, x, o);
        if (t >= o)
          x += y;
      }
      part[i] = carry + x - v; /* the runs before run i */
      carry += __shfl_sync(0xffffffffu, x, 31);
    }
  }
  __syncthreads();
  for (int c = c0; c < c1; c++)
    table[c] += part[t];
  __syncthreads();
  g.rows = table[g.entries - 1];
  return g;
}

/* Tile row R (below g.rows): its group *e, the tile's first row *m0, and
 * the group's rows [*first, *m1), the ones the tile stores. */
__device__ __forceinline__ void tj_hg_find(const tj_hg_groups &g, int R,
                                           int &e, int &m0, int &first,
                                           int &m1) {
  int lo = 0, hi = g.entries - 1;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (g.table[mid] > R)
      hi = mid;
    else
      lo = mid + 1;
  }
  int base = lo > 0 ? g.table[lo - 1] : 0;
  e = lo * g.per;
  for (int last = min(g.E, e + g.per) - 1; e < last; e++) {
    int r = tj_hg_tile_rows(g, e);
    if (R < base + r)
      break;
    base += r;
  }
  m0 = tj_hg_tiles_start(g, e) + (R - base) * TJ_H_BM;
  first = tj_hg_end(g, e - 1);
  m1 = tj_hg_end(g, e);
}

/* The producer's loads of one tile: tj_h_produce's, with B_e's boxes
 * from the 3-D map. */
template <int BN, int STAGES>
__device__ __forceinline__ void tj_hg_produce(const tj_tmap *ta,
                                              const tj_tmap *tb,
                                              const tj_h_stages &st,
                                              int ktiles, int m0, int n0,
                                              int e, int it0) {
  for (int kt = 0; kt < ktiles; kt++) {
    int it = it0 + kt, s = it % STAGES;
    tj_h_bar_wait(st.empty + 8 * s, ((it / STAGES) & 1) ^ 1);
    unsigned bar = st.full + 8 * s;
    tj_h_bar_expect(bar, TJ_H_STAGE_BYTES(BN));
    int k = kt * TJ_H_BK;
    unsigned a = st.sa + s * (TJ_H_BM * TJ_H_BK * 2);
    if (!TJ_TRANS_A) {
      tj_h_tma_load(a, ta, k, m0, bar);
    } else {
      tj_h_tma_load(a, ta, m0, k, bar);
      tj_h_tma_load(a + 64 * 128, ta, m0 + 64, k, bar);
    }
    for (int j = 0; j < BN / 64; j++) {
      unsigned dst = st.sb + s * (TJ_H_BK * BN * 2) + j * (TJ_H_BK * 128);
      int x = TJ_TRANS_B ? k : n0 + 64 * j, y = TJ_TRANS_B ? n0 + 64 * j : k;
      tj_hg_tma_load3(dst, tb, x, y, e, bar);
    }
  }
}

/* The persistent M-grouped GEMM; o's M is replaced by each group's end
 * and its bias by the group's. */
template <int BN, int STAGES>
__device__ __forceinline__ void tj_hg_gemm(const tj_tmap *ta,
                                           const tj_tmap *tb, const int *offs,
                                           int E, int M, int N, int K,
                                           tj_h_out o) {
  extern __shared__ unsigned char tj_h_smem[];
  tj_h_stages st = tj_h_setup<BN, STAGES>(ta, tb, nullptr);
  int *smem = reinterpret_cast<int *>(
      tj_h_smem + (st.epi - tj_h_smem_addr(tj_h_smem)));
  tj_hg_groups g = tj_hg_count(offs, E, M, smem);
  int wg = threadIdx.x / 128;
  int ktiles = (K + TJ_H_BK - 1) / TJ_H_BK, tiles_n = (N + BN - 1) / BN;
  int tiles = g.rows * tiles_n; /* the host keeps it in int */
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x != 0)
      return;
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x, it += ktiles) {
      int R, nt, e, m0, first, m1;
      tj_h_tile_at(t, g.rows, tiles_n, R, nt);
      tj_hg_find(g, R, e, m0, first, m1);
      tj_hg_produce<BN, STAGES>(ta, tb, st, ktiles, m0, nt * BN, e, it);
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const void *bias = o.bias;
  int it = 0;
  float d[BN / 2];
  for (int t = blockIdx.x; t < tiles; t += gridDim.x, it += ktiles) {
    int R, nt, e, m0, first, m1;
    tj_h_tile_at(t, g.rows, tiles_n, R, nt);
    tj_hg_find(g, R, e, m0, first, m1);
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
      d[i] = 0.0f;
    tj_h_consume<BN, STAGES>(d, wg - 1, st.sa, st.sb, st.full, st.empty,
                             ktiles, it);
    if (threadIdx.x % 32 == 0)
      tj_h_bar_arrive(st.empty + 8 * ((it + ktiles - 1) % STAGES));
    o.M0 = first, o.M = m1;
    o.bias = bias ? (const char *)bias +
                        (long long)e * N * (TJ_TC == 3 ? 4 : 2)
                  : nullptr;
    tj_h_epilogue_direct<BN>(d, o, m0 + 64 * (wg - 1), nt * BN);
  }
}

#define TJ_HG_BODY(bn, stages)                                             \
  tj_hg_gemm<bn, stages>(&tma_a, &tma_b, offs, E, M, N, K,                 \
                         tj_h_out{C, ldc, M, N, alpha, beta, nullptr, 0,   \
                                  bias, aux, ldaux})
#elif defined(__CUDA_ARCH__)
#define TJ_HG_BODY(bn, stages) asm volatile("trap;")
#else
#define TJ_HG_BODY(bn, stages) __builtin_trap()
#endif

/* ------------------------------------------------------- grouped (K)
 * The grouped GEMM's Hopper kind for the weight gradient
 * (TJ_GROUPED == 2): C_e = alpha * op(A)[:, group e] op(B)[group e, :]
 * + beta * C_e, C_e = C + e * stride_c, group e's reduction
 * [offs[e-1], offs[e]) (clamped to [0, K]), with A stored K x M
 * (TJ_TRANS_A) and B stored K x N (not TJ_TRANS_B): both operands'
 * tiles are k rows of 128 bytes, M- and N-major.
 *   tiles     each group has the same ceil(M / 128) x ceil(N / BN)
 *             tiles, group after group, walked as the persistent
 *             entries do; an empty group's tiles run no k-tile and
 *             store beta * C_e.
 *   k-tiles   a group's k-tiles start at its first row of the
 *             reduction (TMA takes any row); the rows of its last
 *             k-tile past the group's end are the next group's, so the
 *             consumers zero them in shared memory (whole 128-byte rows
 *             of A and of B, where the swizzle moves nothing between
 *             rows), make the zeros visible to wgmma (fence.proxy.async)
 *             and meet at named barrier 3 before they multiply.
 */
#if TJ_H_HOPPER

/* Rows [valid, 64) of every 64-row box of the stage (A's two, B's BN /
 * 64) zeroed by the 256 consumer threads, then made visible to wgmma. */
template <int BN>
__device__ __forceinline__ void tj_hk_zero_tail(unsigned a, unsigned b,
                                                int valid) {
  const int boxes = 2 + BN / 64, chunks = (64 - valid) * 8;
  for (int i = threadIdx.x - 128; i < boxes * chunks; i += 256) {
    int box = i / chunks, c = i % chunks;
    unsigned base = box < 2 ? a + box * 8192 : b + (box - 2) * 8192;
    unsigned at = base + valid * 128 + c * 16;
    asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};" ::"r"(at),
                 "r"(0)
                 : "memory");
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  tj_h_named_sync(3, 256);
}

/* One consumer warpgroup over a group's kn k-tiles (tj_h_consume's
 * loop, A and B MN-major), the last one's rows past last_rows zeroed
 * first where it is short. */
template <int BN, int STAGES>
__device__ __forceinline__ void tj_hk_consume(float (&d)[BN / 2], int cw,
                                              const tj_h_stages &st, int kn,
                                              int it0, int last_rows) {
  for (int kt = 0; kt < kn; kt++) {
    int it = it0 + kt, s = it % STAGES;
    tj_h_bar_wait(st.full + 8 * s, (it / STAGES) & 1);
    unsigned a0 = st.sa + s * (TJ_H_BM * TJ_H_BK * 2);
    unsigned b = st.sb + s * (TJ_H_BK * BN * 2);
    if (kt == kn - 1 && last_rows < TJ_H_BK)
      tj_hk_zero_tail<BN>(a0, b, last_rows);
    unsigned a = a0 + cw * (64 * 128);
    tj_h_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < TJ_H_BK / 16; kk++)
      tj_h_wgmma(d, tj_h_desc(a + 2048 * kk, TJ_H_BK * 128, 1024),
                 tj_h_desc(b + 2048 * kk, TJ_H_BK * 128, 1024));
    tj_h_wgmma_commit();
    tj_h_wgmma_wait_one();
    if (kt > 0 && threadIdx.x % 32 == 0)
      tj_h_bar_arrive(st.empty + 8 * ((it - 1) % STAGES));
  }
  tj_h_wgmma_wait_all();
  if (kn > 0 && threadIdx.x % 32 == 0)
    tj_h_bar_arrive(st.empty + 8 * ((it0 + kn - 1) % STAGES));
}

/* The producer's loads of a group's tile: A's two 64 x 64 boxes and B's
 * BN / 64, k rows from k0 on. */
template <int BN, int STAGES>
__device__ __forceinline__ void tj_hk_produce(const tj_tmap *ta,
                                              const tj_tmap *tb,
                                              const tj_h_stages &st, int kn,
                                              int m0, int n0, int k0,
                                              int it0) {
  for (int kt = 0; kt < kn; kt++) {
    int it = it0 + kt, s = it % STAGES, k = k0 + kt * TJ_H_BK;
    tj_h_bar_wait(st.empty + 8 * s, ((it / STAGES) & 1) ^ 1);
    unsigned bar = st.full + 8 * s;
    tj_h_bar_expect(bar, TJ_H_STAGE_BYTES(BN));
    unsigned a = st.sa + s * (TJ_H_BM * TJ_H_BK * 2);
    tj_h_tma_load(a, ta, m0, k, bar);
    tj_h_tma_load(a + 64 * 128, ta, m0 + 64, k, bar);
    for (int j = 0; j < BN / 64; j++)
      tj_h_tma_load(st.sb + s * (TJ_H_BK * BN * 2) + j * (TJ_H_BK * 128), tb,
                    n0 + 64 * j, k, bar);
  }
}

/* Tile t of the K-grouped grid: its group e, the group's reduction
 * [k0, k0 + rows) in kn k-tiles, and its tile (m0, n0). */
struct tj_hk_tile {
  int e, k0, rows, kn, m0, n0;
};

__device__ __forceinline__ tj_hk_tile tj_hk_tile_of(const int *offs, int K,
                                                    int t, int tiles_m,
                                                    int tiles_n, int bn) {
  tj_hk_tile w;
  int per = tiles_m * tiles_n, mt, nt;
  w.e = t / per;
  tj_h_tile_at(t - w.e * per, tiles_m, tiles_n, mt, nt);
  int lo = w.e > 0 ? __ldg(offs + w.e - 1) : 0, hi = __ldg(offs + w.e);
  lo = lo < 0 ? 0 : lo > K ? K : lo;
  hi = hi < lo ? lo : hi > K ? K : hi;
  w.k0 = lo, w.rows = hi - lo, w.kn = (w.rows + TJ_H_BK - 1) / TJ_H_BK;
  w.m0 = mt * TJ_H_BM, w.n0 = nt * bn;
  return w;
}

template <int BN, int STAGES>
__device__ __forceinline__ void tj_hk_gemm(const tj_tmap *ta,
                                           const tj_tmap *tb, const int *offs,
                                           int E, int M, int N, int K,
                                           long long stride_c, tj_h_out o) {
  tj_h_stages st = tj_h_setup<BN, STAGES>(ta, tb, nullptr);
  int wg = threadIdx.x / 128;
  int tiles_m = (M + TJ_H_BM - 1) / TJ_H_BM, tiles_n = (N + BN - 1) / BN;
  int tiles = E * tiles_m * tiles_n; /* the host keeps it in int */
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x != 0)
      return;
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      tj_hk_tile w = tj_hk_tile_of(offs, K, t, tiles_m, tiles_n, BN);
      tj_hk_produce<BN, STAGES>(ta, tb, st, w.kn, w.m0, w.n0, w.k0, it);
      it += w.kn;
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  void *C = o.C;
  int it = 0;
  float d[BN / 2];
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    tj_hk_tile w = tj_hk_tile_of(offs, K, t, tiles_m, tiles_n, BN);
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
      d[i] = 0.0f;
    tj_hk_consume<BN, STAGES>(d, wg - 1, st, w.kn, it,
                              w.rows - (w.kn - 1) * TJ_H_BK);
    it += w.kn;
    o.C = (char *)C + w.e * stride_c * (TJ_TC == 3 ? 4 : 2);
    tj_h_epilogue_direct<BN>(d, o, w.m0 + 64 * (wg - 1), w.n0);
  }
}

#define TJ_HK_BODY(bn, stages)                                             \
  tj_hk_gemm<bn, stages>(&tma_a, &tma_b, offs, E, M, N, K, stride_c,       \
                         tj_h_out{C, ldc, M, N, alpha, beta, nullptr, 0,   \
                                  nullptr, nullptr, 0})
#elif defined(__CUDA_ARCH__)
#define TJ_HK_BODY(bn, stages) asm volatile("trap;")
#else
#define TJ_HK_BODY(bn, stages) __builtin_trap()
#endif
