/*
 * hip/hip_common.h for NVRTC: HIP's platform macros on an NVIDIA GPU.
 *
 * Part of the HIP device headers that tokitai-jit hands to NVRTC in memory
 * (src/platform/hip_nvidia/, written for this project).  Every compile on
 * the nvidia platform already has cuda_fp16.h included and the CUDA
 * include directory on its path; these headers add only HIP's spelling.
 * Device code only: NVRTC compiles no host code.
 */
#ifndef TJ_HIP_NVIDIA_HIP_COMMON_H
#define TJ_HIP_NVIDIA_HIP_COMMON_H

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIP_PLATFORM_HCC__)
#error "__HIP_PLATFORM_AMD__ is defined, but this is NVRTC compiling for an NVIDIA GPU"
#endif

/* Defined to 1 rather than empty so that both #ifdef and #if work. */
#ifndef __HIP_PLATFORM_NVIDIA__
#define __HIP_PLATFORM_NVIDIA__ 1
#endif
#ifndef __HIP_PLATFORM_NVCC__ /* the old name, still tested by older code */
#define __HIP_PLATFORM_NVCC__ 1
#endif
#ifndef __HIPCC__
#define __HIPCC__ 1
#endif
/* A runtime compile, as under hipRTC on AMD: no host headers, no host code. */
#ifndef __HIPCC_RTC__
#define __HIPCC_RTC__ 1
#endif
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#define __HIP_DEVICE_COMPILE__ 1
#endif

/* What the target can do.  NVRTC 13 targets sm_75 and later, which have
 * every one of these; the thresholds are kept for older NVRTCs. */
#if defined(__CUDA_ARCH__)
#define TJ__HIP_SM(n) (__CUDA_ARCH__ >= (n))
#else
#define TJ__HIP_SM(n) 0
#endif
#define __HIP_ARCH_HAS_GLOBAL_INT32_ATOMICS__ TJ__HIP_SM(110)
#define __HIP_ARCH_HAS_GLOBAL_FLOAT_ATOMIC_EXCH__ TJ__HIP_SM(110)
#define __HIP_ARCH_HAS_SHARED_INT32_ATOMICS__ TJ__HIP_SM(120)
#define __HIP_ARCH_HAS_SHARED_FLOAT_ATOMIC_EXCH__ TJ__HIP_SM(120)
#define __HIP_ARCH_HAS_FLOAT_ATOMIC_ADD__ TJ__HIP_SM(200)
#define __HIP_ARCH_HAS_GLOBAL_INT64_ATOMICS__ TJ__HIP_SM(200)
#define __HIP_ARCH_HAS_SHARED_INT64_ATOMICS__ TJ__HIP_SM(120)
#define __HIP_ARCH_HAS_DOUBLES__ TJ__HIP_SM(130)
#define __HIP_ARCH_HAS_WARP_VOTE__ TJ__HIP_SM(120)
#define __HIP_ARCH_HAS_WARP_BALLOT__ TJ__HIP_SM(200)
#define __HIP_ARCH_HAS_WARP_SHUFFLE__ TJ__HIP_SM(300)
#define __HIP_ARCH_HAS_WARP_FUNNEL_SHIFT__ TJ__HIP_SM(320)
#define __HIP_ARCH_HAS_THREAD_FENCE_SYSTEM__ TJ__HIP_SM(200)
#define __HIP_ARCH_HAS_SYNC_THREAD_EXT__ TJ__HIP_SM(200)
#define __HIP_ARCH_HAS_SURFACE_FUNCS__ TJ__HIP_SM(200)
#define __HIP_ARCH_HAS_3DGRID__ TJ__HIP_SM(200)
#define __HIP_ARCH_HAS_DYNAMIC_PARALLEL__ TJ__HIP_SM(350)

#endif /* TJ_HIP_NVIDIA_HIP_COMMON_H */
