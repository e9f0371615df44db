/*
 * add_i32.hip: c[i] = a[i] + b[i] on 32-bit ints, wrapping as two's
 * complement (INT_MAX + 1 == INT_MIN).
 *
 * Entry
 *   add_i32(const int *a, const int *b, int *c, unsigned long long n)
 *
 * Launch
 *   block   (256, 1, 1)
 *   grid    (min(max(ceil(n / 1024), 1), 65535), 1, 1); any grid of at
 *           least one block is correct (grid-stride loop), this one gives
 *           each thread about one 16-byte vector per array
 *   shared  0 bytes of dynamic shared memory
 *   n == 0 is allowed (the kernel does nothing).
 *
 * Alignment
 *   a, b, c 4-byte aligned (natural for int).  When all three have the
 *   same address modulo 16, the body moves 16 bytes per thread per load
 *   and store, with a scalar head up to the first 16-byte boundary and a
 *   scalar tail; otherwise a scalar loop does everything (correct, slower).
 *   c may be a or b (in place); other overlaps are not supported.
 *
 * With the grid above the kernel moves bytes at about the device-to-device
 * copy rate (tj-bench's memory section).
 *
 * Compiles unchanged with hipRTC (AMD) and NVRTC (NVIDIA).
 */

/* The add happens in unsigned, where wrapping is defined; converting back
 * is two's complement on every GPU compiler. */
__device__ __forceinline__ int tj_add_wrap(int x, int y) {
  return (int)((unsigned int)x + (unsigned int)y);
}

__device__ __forceinline__ int4 tj_add_wrap4(int4 x, int4 y) {
  int4 r;
  r.x = tj_add_wrap(x.x, y.x);
  r.y = tj_add_wrap(x.y, y.y);
  r.z = tj_add_wrap(x.z, y.z);
  r.w = tj_add_wrap(x.w, y.w);
  return r;
}

__device__ __forceinline__ unsigned long long tj_phase16(const void *p) {
  return reinterpret_cast<unsigned long long>(p) & 15ull;
}

/* Pointers that disagree modulo 16 can never all be vector-aligned at the
 * same index, so they take this path. */
__device__ __forceinline__ void tj_add_scalar(const int *a, const int *b,
                                              int *c, unsigned long long n,
                                              unsigned long long tid,
                                              unsigned long long stride) {
  for (unsigned long long i = tid; i < n; i += stride)
    c[i] = tj_add_wrap(a[i], b[i]);
}

/* contract (build-aux/kernel-contracts.sh copies it into <tokitai-jit/kernels.h>)
 *   block      256 1 1
 *   grid       min(max(ceil(n / 1024), 1), 65535) x 1 x 1; any grid of at
 *              least one block is correct (a grid-stride loop)
 *   shared     0
 *   alignment  a, b, c 4-byte aligned; 16-byte loads and stores when all
 *              three have the same address modulo 16, else a scalar loop
 *   notes      n == 0 does nothing; c may be a or b (in place), no other
 *              overlap
 */
extern "C" __global__ void __launch_bounds__(256) add_i32(const int *a, const int *b, int *c, unsigned long long n) {
  unsigned long long tid =
      (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long phase = tj_phase16(a);
  if (tj_phase16(b) != phase || tj_phase16(c) != phase || (phase & 3ull)) {
    tj_add_scalar(a, b, c, n, tid, stride);
    return;
  }

  /* Elements before the first 16-byte boundary (at most 3). */
  unsigned long long head = ((16ull - phase) & 15ull) / 4ull;
  if (head > n)
    head = n;
  if (tid < head)
    c[tid] = tj_add_wrap(a[tid], b[tid]);

  const int4 *a4 = reinterpret_cast<const int4 *>(a + head);
  const int4 *b4 = reinterpret_cast<const int4 *>(b + head);
  int4 *c4 = reinterpret_cast<int4 *>(c + head);
  unsigned long long nvec = (n - head) / 4ull;
  for (unsigned long long i = tid; i < nvec; i += stride)
    c4[i] = tj_add_wrap4(a4[i], b4[i]);

  /* Elements after the last whole vector (at most 3). */
  unsigned long long done = head + nvec * 4ull;
  if (tid < n - done)
    c[done + tid] = tj_add_wrap(a[done + tid], b[done + tid]);
}
