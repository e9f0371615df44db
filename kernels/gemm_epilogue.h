/*
 * gemm_epilogue.h: what every path of the GEMM family does to a sum of
 * products once it is made, and the element types it reads and writes.
 * The family's kernel sources name this file in their "embed: prepend"
 * line, so each compiles with the same formulas (and the oracles in
 * src/ops/oracle.c follow the same ones).
 *
 * Element types (a path's TJ_TA, TJ_TB, TJ_TC): 1 f16, 2 bf16, 3 f32.
 * bf16 is handled as its bits, so no bf16 header is needed.
 *
 * Epilogues (TJ_EPI), on v = alpha * sum + beta * C (C read only when
 * beta != 0) at row m, column n:
 *   0 none       C = v
 *   1 bias       C = v + bias[n]
 *   2 bias+GELU  u = v + bias[n]; aux[m * ldaux + n] = u when aux is not
 *                NULL; C = gelu(u)
 *   3 dGELU      C = v * gelu'(aux[m * ldaux + n])
 *   gelu(x) = 0.5 x (1 + tanh(c (x + a x^3))), c = sqrt(2/pi), a = 0.044715
 *   (gelu_f16.hip's), and gelu' its derivative.
 * bias and aux have C's type.
 */

__device__ __forceinline__ float tj_e_f16(unsigned short b) {
  __half h;
  memcpy(&h, &b, sizeof b);
  return __half2float(h);
}

__device__ __forceinline__ float tj_e_bf16(unsigned short b) {
  return __uint_as_float((unsigned int)b << 16);
}

/* Round to nearest even; NaN stays a (quiet) NaN. */
__device__ __forceinline__ unsigned short tj_e_to_bf16(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}

__device__ __forceinline__ unsigned short tj_e_to_f16(float f) {
  __half h = __float2half_rn(f);
  unsigned short b;
  memcpy(&b, &h, sizeof b);
  return b;
}

/* Element i of an array of type T, as fp32. */
template <int T>
__device__ __forceinline__ float tj_e_load(const void *p, long long i) {
  if (T == 3)
    return ((const float *)p)[i];
  unsigned short b = ((const unsigned short *)p)[i];
  return T == 1 ? tj_e_f16(b) : tj_e_bf16(b);
}

/* v rounded to type T (1 or 2), as its bits. */
template <int T>
__device__ __forceinline__ unsigned short tj_e_bits(float v) {
  return T == 1 ? tj_e_to_f16(v) : tj_e_to_bf16(v);
}

template <int T>
__device__ __forceinline__ void tj_e_store(void *p, long long i, float v) {
  if (T == 3)
    ((float *)p)[i] = v;
  else
    ((unsigned short *)p)[i] = tj_e_bits<T>(v);
}

/* tanh for the GELU: on NVIDIA (sm_75 and later) the hardware's
 * approximation (relative error below 2^-10) where C is 16-bit, whose
 * rounding is coarser than that; tanhf's full precision for f32 C and
 * elsewhere.  The epilogue's cost is its tanh (tj-bench's family and
 * bench/family_torch.py's epilogue section show it). */
__device__ __forceinline__ float tj_e_tanh(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750 && \
    (!defined(TJ_TC) || TJ_TC != 3)
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return tanhf(x);
#endif
}

__device__ __forceinline__ float tj_e_gelu(float x) {
  const float c = 0.7978845608028654f, a = 0.044715f;
  return 0.5f * x * (1.0f + tj_e_tanh(c * (x + a * x * x * x)));
}

__device__ __forceinline__ float tj_e_gelu_grad(float x) {
  const float c = 0.7978845608028654f, a = 0.044715f;
  float t = tj_e_tanh(c * (x + a * x * x * x));
  return 0.5f * (1.0f + t) +
         0.5f * x * (1.0f - t * t) * c * (1.0f + 3.0f * a * x * x);
}

/* The epilogue EPI on v (alpha and beta applied) at (m, n), for C of
 * type TC: what C gets; writes aux where EPI says so. */
template <int TC, int EPI>
__device__ __forceinline__ float tj_e_apply(float v, long long m, long long n,
                                            const void *bias, void *aux,
                                            long long ldaux) {
  if (EPI == 1 || EPI == 2)
    v += tj_e_load<TC>(bias, n);
  if (EPI == 2) {
    if (aux)
      tj_e_store<TC>(aux, m * ldaux + n, v);
    v = tj_e_gelu(v);
  }
  if (EPI == 3)
    v *= tj_e_gelu_grad(tj_e_load<TC>(aux, m * ldaux + n));
  return v;
}

/* The column sums of C (M x N, type TC, leading dimension ldc) into sums
 * (fp32), the bias gradient after a dGELU: block (256, 1, 1), grid
 * (ceil(N / 32), 1, 1); 8 threads a column, each adding every 8th row in
 * order, then their 8 sums in order: the same bits on every run (no
 * atomics). */
template <int TC>
__device__ __forceinline__ void tj_e_colsum(long long M, long long N,
                                            const void *C, long long ldc,
                                            float *sums) {
  __shared__ float part[8][32];
  int lane = threadIdx.x % 32, row = threadIdx.x / 32;
  long long n = (long long)blockIdx.x * 32 + lane;
  float s = 0.0f;
  if (n < N)
    for (long long m = row; m < M; m += 8)
      s += tj_e_load<TC>(C, m * ldc + n);
  part[row][lane] = s;
  __syncthreads();
  if (row == 0 && n < N) {
    float t = 0.0f;
    for (int r = 0; r < 8; r++)
      t += part[r][lane];
    sums[n] = t;
  }
}
