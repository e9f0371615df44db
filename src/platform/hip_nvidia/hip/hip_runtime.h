/*
 * hip/hip_runtime.h for NVRTC: HIP's device API mapped onto CUDA's.
 *
 * Part of the HIP device headers that tokitai-jit hands to NVRTC in memory
 * (src/platform/hip_nvidia/, written for this project), so that a kernel
 * written for HIP (#include "hip/hip_runtime.h", hipThreadIdx_x, __shfl_down
 * without a mask) compiles unchanged on an NVIDIA GPU.  What CUDA already
 * spells as HIP does (__syncthreads, __launch_bounds__, atomicAdd and the
 * other atomics, warpSize, __half, __threadfence, __popc, ...) needs
 * nothing here.  Host-side HIP (hipLaunchKernelGGL, hipMalloc) is not
 * provided: NVRTC compiles device code only.
 */
#ifndef TJ_HIP_NVIDIA_HIP_RUNTIME_H
#define TJ_HIP_NVIDIA_HIP_RUNTIME_H

#include <hip/hip_common.h>
#include <hip/hip_runtime_api.h>

/* ---------------------------------------------------------- indexing */

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

/* ---------------------------------------------------------- kernels */

#define HIP_KERNEL_NAME(...) __VA_ARGS__
#define HIP_SYMBOL(symbol) symbol
/* Dynamic shared memory: the size is the launch's shared_bytes. */
#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];
#define HIP_DYNAMIC_SHARED_ATTRIBUTE

/* ---------------------------------------------------------- warp */

/*
 * HIP's shuffles and votes take no mask: on AMD every active lane of the
 * wavefront takes part.  sm_70 and later have only the _sync forms, which
 * name the lanes that take part; HIP code is written for the whole warp
 * converging on the call, so the mask is all 32 lanes, as HIP's own NVIDIA
 * mapping does.  A kernel that shuffles with some lanes of the warp gone
 * (an early return, a divergent branch) must use the _sync forms with its
 * own mask, on NVIDIA as in CUDA.  The templates forward to CUDA's
 * overloads, so every type CUDA shuffles (int, unsigned, float, double,
 * long long, unsigned long long, __half, __half2) works, and width keeps
 * HIP's default of the warp size.
 */
#define TJ__HIP_ALL_LANES 0xffffffffu

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 700 /* older: CUDA declares them */
template <typename T>
__device__ __forceinline__ T __shfl(T var, int src_lane, int width = warpSize)
{
  return __shfl_sync(TJ__HIP_ALL_LANES, var, src_lane, width);
}
template <typename T>
__device__ __forceinline__ T __shfl_up(T var, unsigned int delta,
                                       int width = warpSize)
{
  return __shfl_up_sync(TJ__HIP_ALL_LANES, var, delta, width);
}
template <typename T>
__device__ __forceinline__ T __shfl_down(T var, unsigned int delta,
                                         int width = warpSize)
{
  return __shfl_down_sync(TJ__HIP_ALL_LANES, var, delta, width);
}
template <typename T>
__device__ __forceinline__ T __shfl_xor(T var, int lane_mask,
                                        int width = warpSize)
{
  return __shfl_xor_sync(TJ__HIP_ALL_LANES, var, lane_mask, width);
}
__device__ __forceinline__ int __any(int predicate)
{
  return __any_sync(TJ__HIP_ALL_LANES, predicate);
}
__device__ __forceinline__ int __all(int predicate)
{
  return __all_sync(TJ__HIP_ALL_LANES, predicate);
}
#endif

/* HIP's ballot is 64 bits wide (a wavefront has up to 64 lanes); a warp
 * fills the low 32.  A macro, because CUDA still declares a deprecated
 * unsigned int __ballot(int) that a function could not overload. */
#define __ballot(predicate) \
  ((unsigned long long)__ballot_sync(TJ__HIP_ALL_LANES, (predicate)))

__device__ __forceinline__ unsigned int __lane_id(void)
{
  unsigned int lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

/* ---------------------------------------------------------- atomics */

/* HIP's names for an atomic add that may (unsafe) or must not (safe) use
 * a hardware floating-point atomic; CUDA's atomicAdd is both. */
template <typename T>
__device__ __forceinline__ T unsafeAtomicAdd(T *address, T value)
{
  return atomicAdd(address, value);
}
template <typename T>
__device__ __forceinline__ T safeAtomicAdd(T *address, T value)
{
  return atomicAdd(address, value);
}

#endif /* TJ_HIP_NVIDIA_HIP_RUNTIME_H */
