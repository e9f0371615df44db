/*
 * hip/hip_runtime_api.h for NVRTC, as far as device code needs it.
 *
 * Part of the HIP device headers that tokitai-jit hands to NVRTC in memory
 * (src/platform/hip_nvidia/, written for this project).  The host API
 * (hipMalloc, hipMemcpy, streams, ...) cannot be called from a kernel and
 * is not declared; a source shared with host code keeps those parts under
 * #if !defined(__HIPCC_RTC__), as it must under hipRTC on AMD too.
 */
#ifndef TJ_HIP_NVIDIA_HIP_RUNTIME_API_H
#define TJ_HIP_NVIDIA_HIP_RUNTIME_API_H

#include <hip/hip_common.h>

/* dim3, uint3, float4 and the other vector types are NVRTC built-ins. */

#endif /* TJ_HIP_NVIDIA_HIP_RUNTIME_API_H */
