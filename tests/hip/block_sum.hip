#include "hip/hip_runtime.h"

/*
 * block_sum.hip: each block's share of a sum, reduced with warp shuffles
 * in groups of `width` lanes, then across the groups in dynamic shared
 * memory.
 *
 * Entry
 *   block_sum_f32(const float *x, unsigned long long n, int width,
 *                 float *block_sums)
 *     block_sums[b] = the sum of x[i] over every i that block b's threads
 *     visit in a grid-stride loop (i = b * blockDim + t, then + gridDim *
 *     blockDim, ...).
 * Launch
 *   block   (256, 1, 1) at most (__launch_bounds__), a multiple of width
 *   width   a power of two from 2 to the warp size (32 covers both)
 *   shared  (blockDim.x / width) * sizeof(float) bytes of dynamic shared
 * Every thread reaches the shuffles: HIP's maskless shuffles assume it.
 */

extern "C" __global__ void __launch_bounds__(256)
    block_sum_f32(const float *x, unsigned long long n, int width,
                  float *block_sums)
{
  HIP_DYNAMIC_SHARED(float, group_sums)
  unsigned long long stride = (unsigned long long)hipGridDim_x * hipBlockDim_x;
  float v = 0.0f;
  for (unsigned long long i = (unsigned long long)hipBlockIdx_x * hipBlockDim_x +
                              hipThreadIdx_x;
       i < n; i += stride)
    v += x[i];
  for (int d = width / 2; d > 0; d /= 2)
    v += __shfl_down(v, d, width);
  if (hipThreadIdx_x % width == 0)
    group_sums[hipThreadIdx_x / width] = v;
  __syncthreads();
  if (hipThreadIdx_x == 0) {
    float s = 0.0f;
    for (unsigned int g = 0; g < hipBlockDim_x / width; g++)
      s += group_sums[g];
    block_sums[hipBlockIdx_x] = s;
  }
}
