#include "hip/hip_runtime.h"
#include <hip/hip_fp16.h>

/*
 * scale_relu_f16.hip: y = max(x * scale, 0) in half precision, and the
 * same value widened to float.
 *
 * Entry
 *   scale_relu_f16(const __half *x, float scale, __half *y, float *y_f32,
 *                  unsigned long long n)
 *     p = __hmul(x[i], __float2half(scale)), one fp16 rounding (to
 *     nearest even); y[i] = p when p > 0, else +0; y_f32[i] = y[i] as a
 *     float (exact).
 * Launch: any grid (grid-stride loop); no shared memory.
 */

__device__ inline __half relu_f16(__half v)
{
  const __half zero = __float2half(0.0f);
  return __hgt(v, zero) ? v : zero;
}

extern "C" __global__ void scale_relu_f16(const __half *x, float scale,
                                          __half *y, float *y_f32,
                                          unsigned long long n)
{
  const __half s = __float2half(scale);
  unsigned long long stride = (unsigned long long)hipGridDim_x * hipBlockDim_x;
  for (unsigned long long i = (unsigned long long)hipBlockIdx_x * hipBlockDim_x +
                              hipThreadIdx_x;
       i < n; i += stride) {
    __half r = relu_f16(__hmul(x[i], s));
    y[i] = r;
    y_f32[i] = __half2float(r);
  }
}
