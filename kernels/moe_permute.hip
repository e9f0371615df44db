/*
 * moe_permute.hip: the token permutation around a mixture-of-experts
 * layer's grouped GEMM: routing, gather into expert order, the weighted
 * scatter-sum back, and their backward passes.
 *
 * Each of T tokens is routed to k experts of E; slot (t, s), flat index
 * i = t * k + s, holds expert idx[i].  The permuted matrix holds one row
 * per slot, the experts' rows contiguous, expert 0 first; within an
 * expert, rows follow the slots' flat index (token, then slot).  So the
 * row of slot i is start(e) + the number of slots j < i with idx[j] == e,
 * where e = idx[i] and start(e) is the sum of the counts of the experts
 * before e.  A slot whose expert is outside [0, E) gets no row: it is
 * counted as dropped, its row is -1, and the rows after the last valid
 * one are left unwritten.
 *
 * Entries
 *   moe_route_count   per chunk of MOE_CHUNK slots, each expert's count
 *                     and the chunk's out-of-range count
 *   moe_route_scan    one block: counts, end offsets (the cumulative sum
 *                     torch._grouped_mm takes), each chunk's first row
 *                     per expert, the dropped count, -1 for rows that no
 *                     slot fills
 *   moe_route_rank    per chunk: each slot's row, and the slot of each row
 *   moe_permute       xp[row(t, s)] = x[t], or w[t, s] * x[t]
 *   moe_unpermute     y[t] = sum over s of w[t, s] * yp[row(t, s)] (w 1
 *                     when absent)
 *   moe_unpermute_bwd dyp[row(t, s)] = w[t, s] * dy[t] and
 *                     dw[t, s] = <dy[t], yp[row(t, s)]>
 * Everything runs on the stream: no count is read by the host, and every
 * launch shape depends only on T, k, E and H.
 *
 * Element types: activations are f16 or bf16 (dtype 1 or 2, the
 * TJ_DTYPE_* numbers); routing weights f32 (3) or the activations' type.
 * Sums and products are fp32, in a fixed order: the k terms of a token
 * in slot order, a dot product's partial sums in a fixed tree; no float
 * atomics, so the same call gives the same bits on every run.
 *
 * Compiles unchanged with hipRTC (AMD) and NVRTC (NVIDIA).  bf16 is
 * converted by bit operations, so no bf16 header is needed.
 */

#define MOE_CHUNK 1024   /* slots per block of the routing kernels */
#define MOE_TILE 256     /* slots a rank block handles at once */
#define MOE_MAX_EXPERTS 1024
#define MOE_MAX_K 16
#define MOE_ROW_THREADS 128
#define MOE_SCAN_THREADS 1024
/* moe_permute and moe_unpermute issue up to this many 16-byte loads a
 * thread before they use any, so that enough bytes are in flight to hide
 * the memory's latency. */
#define MOE_BATCH 4
#define MOE_DTYPE_F16 1
#define MOE_DTYPE_BF16 2
#define MOE_DTYPE_F32 3

/* ------------------------------------------------------------ elements */

__device__ __forceinline__ float moe_f16_to_f32(unsigned short b) {
  __half h;
  memcpy(&h, &b, sizeof b);
  return __half2float(h);
}

__device__ __forceinline__ unsigned short moe_f32_to_f16(float f) {
  __half h = __float2half_rn(f);
  unsigned short b;
  memcpy(&b, &h, sizeof b);
  return b;
}

__device__ __forceinline__ float moe_bf16_to_f32(unsigned short b) {
  unsigned int u = (unsigned int)b << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Round to nearest, ties to even; a NaN stays a (quiet) NaN. */
__device__ __forceinline__ unsigned short moe_f32_to_bf16(float f) {
  unsigned int u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}

__device__ __forceinline__ float moe_load(unsigned short b, int bf16) {
  return bf16 ? moe_bf16_to_f32(b) : moe_f16_to_f32(b);
}

__device__ __forceinline__ unsigned short moe_store(float f, int bf16) {
  return bf16 ? moe_f32_to_bf16(f) : moe_f32_to_f16(f);
}

/* Element i of a weight array of type wt (f32, f16 or bf16). */
__device__ __forceinline__ float moe_weight(const void *w, int wt,
                                            unsigned long long i) {
  if (wt == MOE_DTYPE_F32)
    return ((const float *)w)[i];
  return moe_load(((const unsigned short *)w)[i], wt == MOE_DTYPE_BF16);
}

__device__ __forceinline__ void moe_unpack8(uint4 v, int bf16, float f[8]) {
  unsigned int w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; j++) {
    f[2 * j] = moe_load((unsigned short)(w[j] & 0xffffu), bf16);
    f[2 * j + 1] = moe_load((unsigned short)(w[j] >> 16), bf16);
  }
}

__device__ __forceinline__ uint4 moe_pack8(const float f[8], int bf16) {
  unsigned int w[4];
#pragma unroll
  for (int j = 0; j < 4; j++)
    w[j] = (unsigned int)moe_store(f[2 * j], bf16) |
           ((unsigned int)moe_store(f[2 * j + 1], bf16) << 16);
  uint4 v;
  v.x = w[0]; v.y = w[1]; v.z = w[2]; v.w = w[3];
  return v;
}

/* Eight elements times w, rounded back to the element type. */
__device__ __forceinline__ uint4 moe_scale8(uint4 v, float w, int bf16) {
  float f[8];
  moe_unpack8(v, bf16, f);
#pragma unroll
  for (int q = 0; q < 8; q++)
    f[q] *= w;
  return moe_pack8(f, bf16);
}

/* Rows move 16 bytes at a time when every base address and row stride
 * is a multiple of 16 bytes and H a multiple of 8; else element by
 * element. */
__device__ __forceinline__ bool moe_vec_ok(const void *a, unsigned long long lda,
                                           const void *b, unsigned long long ldb,
                                           unsigned long long hidden) {
  unsigned long long bits = (unsigned long long)a | (unsigned long long)b;
  return (bits & 15ull) == 0 && (lda & 7ull) == 0 && (ldb & 7ull) == 0 &&
         (hidden & 7ull) == 0;
}

/* ------------------------------------------------------------ routing */

/* contract (build-aux/kernel-contracts.sh copies it into <tokitai-jit/kernels.h>)
 *   block      256 1 1
 *   grid       ceil(pairs / 1024) x 1 x 1: one block a chunk of 1024 slots
 *   shared     0
 *   alignment  4-byte aligned
 *   notes      pairs = T * k slots of expert indices idx; 1 <= experts <=
 *              1024; hist holds experts + 1 ints a chunk: chunk c's count
 *              of expert e at hist[c * (experts + 1) + e], its count of
 *              indices outside [0, experts) at hist[c * (experts + 1) +
 *              experts]; tj_moe_route is the call
 */
extern "C" __global__ void __launch_bounds__(256) moe_route_count(const int *idx, unsigned long long pairs, int experts, int *hist) {
  __shared__ int count[MOE_MAX_EXPERTS + 1];
  for (int e = threadIdx.x; e <= experts; e += blockDim.x)
    count[e] = 0;
  __syncthreads();
  unsigned long long first = (unsigned long long)blockIdx.x * MOE_CHUNK;
  for (unsigned j = threadIdx.x; j < MOE_CHUNK; j += blockDim.x) {
    unsigned long long i = first + j;
    if (i >= pairs)
      break;
    int e = idx[i];
    atomicAdd(&count[e >= 0 && e < experts ? e : experts], 1);
  }
  __syncthreads();
  int *row = hist + (unsigned long long)blockIdx.x * (experts + 1);
  for (int e = threadIdx.x; e <= experts; e += blockDim.x)
    row[e] = count[e];
}

/* A block-wide exclusive scan of one int a thread, in place in s. */
__device__ __forceinline__ int moe_block_scan(int *s, int v) {
  int t = threadIdx.x;
  s[t] = v;
  __syncthreads();
  for (int d = 1; d < (int)blockDim.x; d *= 2) {
    int add = t >= d ? s[t - d] : 0;
    __syncthreads();
    s[t] += add;
    __syncthreads();
  }
  int inclusive = s[t];
  __syncthreads();
  return inclusive - v;
}

/* Column col of hist over chunks [c0, c1): the sum, or with base >= 0,
 * each entry replaced by base plus the sum of those above it. */
__device__ __forceinline__ int moe_column(int *hist, int stride, int col,
                                          unsigned c0, unsigned c1, int base) {
  int run = 0;
  for (unsigned c = c0; c < c1; c++) {
    int *p = hist + (unsigned long long)c * stride + col;
    int v = *p;
    if (base >= 0)
      *p = base + run;
    run += v;
  }
  return run;
}

/* contract (build-aux/kernel-contracts.sh copies it into <tokitai-jit/kernels.h>)
 *   block      1024 1 1
 *   grid       1 x 1 x 1
 *   shared     0
 *   alignment  4-byte aligned
 *   notes      after moe_route_count on the same hist (chunks blocks of
 *              it): counts[e], offsets[e] = counts[0] + ... + counts[e];
 *              each hist entry of an expert becomes the first row of its
 *              chunk's slots of that expert; dropped[0] = the
 *              out-of-range count; slot_of_row[r] = -1 for r from
 *              offsets[experts - 1] to pairs - 1; tj_moe_route is the
 *              call
 */
extern "C" __global__ void __launch_bounds__(1024) moe_route_scan(int *hist, unsigned chunks, int experts, unsigned long long pairs, int *counts, int *offsets, int *dropped, int *slot_of_row) {
  __shared__ int part[MOE_MAX_EXPERTS + 1];
  __shared__ int total[MOE_MAX_EXPERTS + 1];
  __shared__ int scan[MOE_SCAN_THREADS];
  /* at most max(MOE_SCAN_THREADS, experts + 1) (band, column) pairs */
  __shared__ int band_sum[MOE_SCAN_THREADS + 1];
  const int cols = experts + 1;
  /* groups bands of chunks, one thread per (band, column) */
  int groups = (int)blockDim.x / cols;
  if (groups < 1)
    groups = 1;
  if ((unsigned)groups > chunks)
    groups = (int)chunks;
  for (int u = threadIdx.x; u < groups * cols; u += blockDim.x) {
    int g = u / cols, col = u % cols;
    unsigned c0 = (unsigned)((unsigned long long)chunks * g / groups);
    unsigned c1 = (unsigned)((unsigned long long)chunks * (g + 1) / groups);
    band_sum[u] = moe_column(hist, cols, col, c0, c1, -1);
  }
  __syncthreads();
  /* each column's total, and each band's start within its column */
  for (int col = threadIdx.x; col < cols; col += blockDim.x) {
    int run = 0;
    for (int g = 0; g < groups; g++) {
      int v = band_sum[g * cols + col];
      band_sum[g * cols + col] = run;
      run += v;
    }
    total[col] = run;
  }
  __syncthreads();
  int mine = (int)threadIdx.x < experts ? total[threadIdx.x] : 0;
  int start = moe_block_scan(scan, mine);
  if ((int)threadIdx.x < experts) {
    part[threadIdx.x] = start;
    counts[threadIdx.x] = mine;
    offsets[threadIdx.x] = start + mine;
  }
  if ((int)threadIdx.x == experts - 1)
    part[experts] = start + mine;
  __syncthreads();
  for (int u = threadIdx.x; u < groups * cols; u += blockDim.x) {
    int g = u / cols, col = u % cols;
    if (col == experts)
      continue;
    unsigned c0 = (unsigned)((unsigned long long)chunks * g / groups);
    unsigned c1 = (unsigned)((unsigned long long)chunks * (g + 1) / groups);
    moe_column(hist, cols, col, c0, c1, part[col] + band_sum[u]);
  }
  if (threadIdx.x == 0)
    dropped[0] = total[experts];
  for (unsigned long long r = (unsigned long long)part[experts] + threadIdx.x;
       r < pairs; r += blockDim.x)
    slot_of_row[r] = -1;
}

/* contract (build-aux/kernel-contracts.sh copies it into <tokitai-jit/kernels.h>)
 *   block      256 1 1
 *   grid       ceil(pairs / 1024) x 1 x 1, as moe_route_count
 *   shared     0
 *   alignment  4-byte aligned
 *   notes      after moe_route_scan on the same hist: row_of_slot[i] = the
 *              row of slot i (-1 for an index outside [0, experts)),
 *              slot_of_row[row] = i; tj_moe_route is the call
 */
extern "C" __global__ void __launch_bounds__(256) moe_route_rank(const int *idx, unsigned long long pairs, int experts, const int *hist, int *row_of_slot, int *slot_of_row) {
  __shared__ int next[MOE_MAX_EXPERTS];
  __shared__ int tile[MOE_TILE];
  const int *mine = hist + (unsigned long long)blockIdx.x * (experts + 1);
  for (int e = threadIdx.x; e < experts; e += blockDim.x)
    next[e] = mine[e];
  unsigned long long first = (unsigned long long)blockIdx.x * MOE_CHUNK;
  for (unsigned t0 = 0; t0 < MOE_CHUNK; t0 += MOE_TILE) {
    unsigned long long i = first + t0 + threadIdx.x;
    int e = i < pairs ? idx[i] : -1;
    bool valid = e >= 0 && e < experts;
    tile[threadIdx.x] = valid ? e : -1;
    __syncthreads();
    int before = 0;
    bool last = true;
    for (int j = 0; j < MOE_TILE; j++) {
      bool same = valid && tile[j] == e;
      before += same && j < (int)threadIdx.x;
      last = last && !(same && j > (int)threadIdx.x);
    }
    int row = valid ? next[e] + before : -1;
    if (i < pairs) {
      row_of_slot[i] = row;
      if (valid)
        slot_of_row[row] = (int)i;
    }
    __syncthreads();
    if (valid && last)
      next[e] += before + 1;
    __syncthreads();
  }
}

/* ------------------------------------------------------------ rows */

/* One token's slots: their rows and weights, shared by the block. */
struct moe_slots {
  int row[MOE_MAX_K];
  float w[MOE_MAX_K];
};

__device__ __forceinline__ void moe_load_slots(moe_slots &s,
                                               const int *row_of_slot,
                                               const void *w, int wt,
                                               unsigned long long t, int k) {
  __syncthreads(); /* the previous token's slots are read by all */
  if ((int)threadIdx.x < k) {
    unsigned long long i = t * (unsigned long long)k + threadIdx.x;
    s.row[threadIdx.x] = row_of_slot[i];
    s.w[threadIdx.x] = w ? moe_weight(w, wt, i) : 1.0f;
  }
  __syncthreads();
}

/* contract (build-aux/kernel-contracts.sh copies it into <tokitai-jit/kernels.h>)
 *   block      128 1 1
 *   grid       min(T, 65535) x 1 x 1; any grid of at least one block is
 *              correct (a block loops over tokens)
 *   shared     0
 *   alignment  x, xp 2-byte aligned, row_of_slot 4-byte, w its type's
 *              size; 16-byte moves when x, xp are 16-byte aligned and
 *              ldx, ldxp and hidden are multiples of 8, else element by
 *              element
 *   notes      xp[row_of_slot[t * k + s]] = x[t] (hidden elements a row,
 *              row strides ldx and ldxp), times w[t * k + s] when w is not
 *              NULL (then rounded to dtype); slots with row -1 are
 *              skipped; 1 <= k <= 16; dtype and w_type as the file's
 *              header says; tj_moe_permute is the call
 */
extern "C" __global__ void __launch_bounds__(128) moe_permute(const void *x, unsigned long long ldx, const int *row_of_slot, unsigned long long tokens, int k, unsigned long long hidden, const void *w, int w_type, int dtype, void *xp, unsigned long long ldxp) {
  __shared__ moe_slots s;
  const int bf16 = dtype == MOE_DTYPE_BF16;
  const bool vec = moe_vec_ok(x, ldx, xp, ldxp, hidden);
  for (unsigned long long t = blockIdx.x; t < tokens; t += gridDim.x) {
    moe_load_slots(s, row_of_slot, w, w_type, t, k);
    if (vec) {
      const uint4 *src = (const uint4 *)((const unsigned short *)x + t * ldx);
      const unsigned long long nv = hidden / 8, step = blockDim.x;
      for (unsigned long long v0 = threadIdx.x; v0 < nv; v0 += MOE_BATCH * step) {
        uint4 a[MOE_BATCH];
#pragma unroll
        for (int u = 0; u < MOE_BATCH; u++)
          if (v0 + u * step < nv)
            a[u] = src[v0 + u * step];
        for (int j = 0; j < k; j++) {
          if (s.row[j] < 0)
            continue;
          uint4 *dst = (uint4 *)((unsigned short *)xp + s.row[j] * ldxp);
#pragma unroll
          for (int u = 0; u < MOE_BATCH; u++)
            if (v0 + u * step < nv)
              dst[v0 + u * step] = w ? moe_scale8(a[u], s.w[j], bf16) : a[u];
        }
      }
      continue;
    }
    const unsigned short *src = (const unsigned short *)x + t * ldx;
    for (unsigned long long h = threadIdx.x; h < hidden; h += blockDim.x) {
      unsigned short a = src[h];
      for (int j = 0; j < k; j++) {
        if (s.row[j] < 0)
          continue;
        unsigned short o = w ? moe_store(moe_load(a, bf16) * s.w[j], bf16) : a;
        ((unsigned short *)xp)[s.row[j] * ldxp + h] = o;
      }
    }
  }
}

/* contract (build-aux/kernel-contracts.sh copies it into <tokitai-jit/kernels.h>)
 *   block      128 1 1
 *   grid       min(T, 65535) x 1 x 1; any grid of at least one block is
 *              correct (a block loops over tokens)
 *   shared     0
 *   alignment  yp, y 2-byte aligned, row_of_slot 4-byte, w its type's
 *              size; 16-byte moves when yp, y are 16-byte aligned and
 *              ldyp, ldy and hidden are multiples of 8, else element by
 *              element
 *   notes      y[t] = sum over s = 0 .. k-1, in that order, of w[t * k + s]
 *              * yp[row_of_slot[t * k + s]] in fp32, rounded once to dtype
 *              (w 1 when NULL: the backward of moe_permute); slots with row
 *              -1 add nothing; 1 <= k <= 16; tj_moe_unpermute is the call
 */
extern "C" __global__ void __launch_bounds__(128) moe_unpermute(const void *yp, unsigned long long ldyp, const int *row_of_slot, unsigned long long tokens, int k, unsigned long long hidden, const void *w, int w_type, int dtype, void *y, unsigned long long ldy) {
  __shared__ moe_slots s;
  const int bf16 = dtype == MOE_DTYPE_BF16;
  const bool vec = moe_vec_ok(yp, ldyp, y, ldy, hidden);
  const unsigned short *in = (const unsigned short *)yp;
  for (unsigned long long t = blockIdx.x; t < tokens; t += gridDim.x) {
    moe_load_slots(s, row_of_slot, w, w_type, t, k);
    unsigned short *out = (unsigned short *)y + t * ldy;
    if (vec) {
      for (unsigned long long v = threadIdx.x; v < hidden / 8; v += blockDim.x) {
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, f[8];
        for (int j0 = 0; j0 < k; j0 += MOE_BATCH) {
          uint4 b[MOE_BATCH];
#pragma unroll
          for (int u = 0; u < MOE_BATCH; u++)
            if (j0 + u < k && s.row[j0 + u] >= 0)
              b[u] = ((const uint4 *)(in + s.row[j0 + u] * ldyp))[v];
#pragma unroll
          for (int u = 0; u < MOE_BATCH; u++) {
            if (j0 + u >= k || s.row[j0 + u] < 0)
              continue;
            moe_unpack8(b[u], bf16, f);
#pragma unroll
            for (int q = 0; q < 8; q++)
              acc[q] = fmaf(s.w[j0 + u], f[q], acc[q]);
          }
        }
        ((uint4 *)out)[v] = moe_pack8(acc, bf16);
      }
      continue;
    }
    for (unsigned long long h = threadIdx.x; h < hidden; h += blockDim.x) {
      float acc = 0.0f;
      for (int j = 0; j < k; j++)
        if (s.row[j] >= 0)
          acc = fmaf(s.w[j], moe_load(in[s.row[j] * ldyp + h], bf16), acc);
      out[h] = moe_store(acc, bf16);
    }
  }
}

/* Each thread's partial dot products (red[j][thread]), summed over the
 * block in a fixed tree; thread j < k stores slot j's. */
__device__ __forceinline__ void moe_store_dots(float (*red)[MOE_ROW_THREADS],
                                               int k, const moe_slots &s,
                                               void *dw, int wt,
                                               unsigned long long t) {
  __syncthreads();
  for (int half = MOE_ROW_THREADS / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half)
      for (int j = 0; j < k; j++)
        red[j][threadIdx.x] += red[j][threadIdx.x + half];
    __syncthreads();
  }
  if ((int)threadIdx.x < k) {
    int j = threadIdx.x;
    float v = s.row[j] < 0 ? 0.0f : red[j][0];
    unsigned long long i = t * (unsigned long long)k + j;
    if (wt == MOE_DTYPE_F32)
      ((float *)dw)[i] = v;
    else
      ((unsigned short *)dw)[i] = moe_store(v, wt == MOE_DTYPE_BF16);
  }
}

/* One slot of unpermute's backward for this thread's columns of token t:
 * dyp's row r = w * dy[t], and the thread's part of <dy[t], yp[r]>.  dy's
 * row is read once a slot, from cache after the first. */
__device__ __forceinline__ float moe_slot_bwd(const unsigned short *g,
                                              const unsigned short *in,
                                              unsigned short *out, float w,
                                              unsigned long long hidden,
                                              bool vec, int bf16) {
  float dot = 0.0f;
  if (vec) {
    for (unsigned long long v = threadIdx.x; v < hidden / 8; v += blockDim.x) {
      uint4 ga = ((const uint4 *)g)[v], ya = ((const uint4 *)in)[v];
      float a[8], f[8];
      moe_unpack8(ga, bf16, a);
      moe_unpack8(ya, bf16, f);
#pragma unroll
      for (int q = 0; q < 8; q++)
        dot = fmaf(a[q], f[q], dot);
      ((uint4 *)out)[v] = moe_scale8(ga, w, bf16);
    }
    return dot;
  }
  for (unsigned long long h = threadIdx.x; h < hidden; h += blockDim.x) {
    float a = moe_load(g[h], bf16);
    dot = fmaf(a, moe_load(in[h], bf16), dot);
    out[h] = moe_store(w * a, bf16);
  }
  return dot;
}

/* contract (build-aux/kernel-contracts.sh copies it into <tokitai-jit/kernels.h>)
 *   block      128 1 1
 *   grid       min(T, 65535) x 1 x 1; any grid of at least one block is
 *              correct (a block loops over tokens)
 *   shared     0
 *   alignment  dy, yp, dyp 2-byte aligned, row_of_slot 4-byte, w and dw
 *              their type's size; 16-byte moves when dy, yp, dyp are
 *              16-byte aligned and their strides and hidden multiples of
 *              8, else element by element
 *   notes      for r = row_of_slot[t * k + s] >= 0: dyp[r] = w[t * k + s]
 *              * dy[t], rounded to dtype, and dw[t * k + s] = the fp32 sum
 *              over h of dy[t][h] * yp[r][h] (in a fixed order), rounded
 *              to w_type; dw is 0 for a slot with row -1; 1 <= k <= 16;
 *              tj_moe_unpermute_bwd is the call
 */
extern "C" __global__ void __launch_bounds__(128) moe_unpermute_bwd(const void *dy, unsigned long long lddy, const void *yp, unsigned long long ldyp, const int *row_of_slot, unsigned long long tokens, int k, unsigned long long hidden, const void *w, int w_type, int dtype, void *dyp, unsigned long long lddyp, void *dw) {
  __shared__ moe_slots s;
  __shared__ float red[MOE_MAX_K][MOE_ROW_THREADS];
  const int bf16 = dtype == MOE_DTYPE_BF16;
  const bool vec = moe_vec_ok(dy, lddy, yp, ldyp, hidden) &&
                   moe_vec_ok(dyp, lddyp, dyp, lddyp, hidden);
  const unsigned short *g = (const unsigned short *)dy;
  const unsigned short *in = (const unsigned short *)yp;
  unsigned short *out = (unsigned short *)dyp;
  for (unsigned long long t = blockIdx.x; t < tokens; t += gridDim.x) {
    moe_load_slots(s, row_of_slot, w, w_type, t, k);
    for (int j = 0; j < k; j++) {
      long long r = s.row[j];
      red[j][threadIdx.x] =
          r < 0 ? 0.0f
                : moe_slot_bwd(g + t * lddy, in + r * ldyp, out + r * lddyp,
                               s.w[j], hidden, vec, bf16);
    }
    moe_store_dots(red, k, s, dw, w_type, t);
  }
}
