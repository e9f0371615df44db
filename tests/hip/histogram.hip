#include "hip/hip_runtime.h"

/*
 * histogram.hip: counts of each byte value, with atomics in shared memory
 * per block and then one global atomic per bin and block.
 *
 * Entry
 *   histogram_u8(const unsigned char *data, unsigned long long n,
 *                unsigned int *bins)
 *     bins[v] += the number of i < n with data[i] == v, for v in 0..255;
 *     the caller zeroes bins first (counts add up across launches).
 * Launch: any grid (grid-stride loop); block (256, 1, 1) at most; no
 * dynamic shared memory.
 */

#define BINS 256

extern "C" __global__ void __launch_bounds__(256)
    histogram_u8(const unsigned char *data, unsigned long long n,
                 unsigned int *bins)
{
  __shared__ unsigned int local[BINS];
  for (unsigned int b = hipThreadIdx_x; b < BINS; b += hipBlockDim_x)
    local[b] = 0;
  __syncthreads();
  unsigned long long stride = (unsigned long long)hipGridDim_x * hipBlockDim_x;
  for (unsigned long long i = (unsigned long long)hipBlockIdx_x * hipBlockDim_x +
                              hipThreadIdx_x;
       i < n; i += stride)
    atomicAdd(&local[data[i]], 1u);
  __syncthreads();
  for (unsigned int b = hipThreadIdx_x; b < BINS; b += hipBlockDim_x)
    if (local[b])
      atomicAdd(&bins[b], local[b]);
}
