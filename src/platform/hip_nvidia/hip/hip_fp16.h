/*
 * hip/hip_fp16.h for NVRTC: HIP's half precision is CUDA's.
 *
 * Part of the HIP device headers that tokitai-jit hands to NVRTC in memory
 * (src/platform/hip_nvidia/, written for this project).  HIP spells the
 * fp16 API as CUDA does (__half, __half2, half, half2, __half_raw,
 * __float2half, __half2float, __hadd, __hmul, __hfma, __hlt, ...), so
 * cuda_fp16.h, which every nvidia compile already includes, provides it;
 * what is added here is HIP's names for its constants.
 */
#ifndef TJ_HIP_NVIDIA_HIP_FP16_H
#define TJ_HIP_NVIDIA_HIP_FP16_H

#include <hip/hip_common.h>
#include <cuda_fp16.h>

/* By bit pattern: NVRTC 12.3 and later no longer define CUDA's own
 * CUDART_*_FP16 constants for runtime compiles. */
#define HIPRT_INF_FP16 __ushort_as_half((unsigned short)0x7c00u)
#define HIPRT_NAN_FP16 __ushort_as_half((unsigned short)0x7fffu)
#define HIPRT_MIN_DENORM_FP16 __ushort_as_half((unsigned short)0x0001u)
#define HIPRT_MAX_NORMAL_FP16 __ushort_as_half((unsigned short)0x7bffu)
#define HIPRT_NEG_ZERO_FP16 __ushort_as_half((unsigned short)0x8000u)
#define HIPRT_ZERO_FP16 __ushort_as_half((unsigned short)0x0000u)
#define HIPRT_ONE_FP16 __ushort_as_half((unsigned short)0x3c00u)

#endif /* TJ_HIP_NVIDIA_HIP_FP16_H */
