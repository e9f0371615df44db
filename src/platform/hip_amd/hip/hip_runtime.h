/*
 * hip/hip_runtime.h for hipRTC on AMD: the macros of HIP's device API that
 * hipRTC 5.2's built-in copy of the headers lost (see hip/hip_common.h).
 * Everything else (threadIdx, __shfl_down, atomics, __half, warpSize,
 * __launch_bounds__) is in hipRTC's copy already.
 */
#ifndef TJ_HIP_AMD_HIP_RUNTIME_H
#define TJ_HIP_AMD_HIP_RUNTIME_H

#include <hip/hip_common.h>

#ifndef hipThreadIdx_x
#define hipThreadIdx_x threadIdx.x
#define hipThreadIdx_y threadIdx.y
#define hipThreadIdx_z threadIdx.z
#define hipBlockIdx_x blockIdx.x
#define hipBlockIdx_y blockIdx.y
#define hipBlockIdx_z blockIdx.z
#define hipBlockDim_x blockDim.x
#define hipBlockDim_y blockDim.y
#define hipBlockDim_z blockDim.z
#define hipGridDim_x gridDim.x
#define hipGridDim_y gridDim.y
#define hipGridDim_z gridDim.z
#endif

#ifndef HIP_KERNEL_NAME
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#endif
#ifndef HIP_SYMBOL
#define HIP_SYMBOL(symbol) symbol
#endif
/* Dynamic shared memory: the size is the launch's shared_bytes. */
#ifndef HIP_DYNAMIC_SHARED
#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];
#define HIP_DYNAMIC_SHARED_ATTRIBUTE
#endif

#endif /* TJ_HIP_AMD_HIP_RUNTIME_H */
