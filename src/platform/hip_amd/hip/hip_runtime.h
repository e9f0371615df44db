/*
 * hip/hip_runtime.h for hipRTC on AMD: the macros of HIP's device API that
 * hipRTC 5.2's built-in copy of the headers lost (see hip/hip_common.h).
 * Everything else (threadIdx, __shfl_down, atomics, __half, warpSize,
 * __launch_bounds__) is in hipRTC's copy already.
 */
#ifndef TJ_HIP_AMD_HIP_RUNTIME_H
#define TJ_HIP_AMD_HIP_RUNTIME_H

#include <hip/hip_common.h>

/* As HIP's own headers define them: calls into the device library, of
 * type size_t (threadIdx.x and the others are 32-bit). */
#ifndef hipThreadIdx_x
#define hipThreadIdx_x (__ockl_get_local_id(0))
#define hipThreadIdx_y (__ockl_get_local_id(1))
#define hipThreadIdx_z (__ockl_get_local_id(2))
#define hipBlockIdx_x (__ockl_get_group_id(0))
#define hipBlockIdx_y (__ockl_get_group_id(1))
#define hipBlockIdx_z (__ockl_get_group_id(2))
#define hipBlockDim_x (__ockl_get_local_size(0))
#define hipBlockDim_y (__ockl_get_local_size(1))
#define hipBlockDim_z (__ockl_get_local_size(2))
#define hipGridDim_x (__ockl_get_num_groups(0))
#define hipGridDim_y (__ockl_get_num_groups(1))
#define hipGridDim_z (__ockl_get_num_groups(2))
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
