/*
 * hip/hip_common.h for hipRTC on AMD: the platform macros.
 *
 * Part of the headers that tokitai-jit hands to hipRTC in memory
 * (src/platform/hip_amd/, written for this project).  hipRTC puts a copy of
 * HIP's device headers in front of every source, made by running the
 * preprocessor over them when ROCm was built; in ROCm 5.2 that copy kept
 * the declarations but lost nearly every #define, so the macros HIP code
 * tests and uses are missing and the headers' include guards are not set.
 * These files put the macros back, each only where hipRTC has not defined
 * it, and stand in for the installed headers, which would otherwise be
 * found on the system include path and declare everything a second time.
 */
#ifndef TJ_HIP_AMD_HIP_COMMON_H
#define TJ_HIP_AMD_HIP_COMMON_H

#if defined(__HIP_PLATFORM_NVIDIA__) || defined(__HIP_PLATFORM_NVCC__)
#error "__HIP_PLATFORM_NVIDIA__ is defined, but this is hipRTC compiling for an AMD GPU"
#endif

/* Defined to 1 rather than empty so that both #ifdef and #if work. */
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#ifndef __HIP_PLATFORM_HCC__ /* the old name, still tested by older code */
#define __HIP_PLATFORM_HCC__ 1
#endif
#ifndef __HIPCC__
#define __HIPCC__ 1
#endif
#ifndef __HIPCC_RTC__
#define __HIPCC_RTC__ 1
#endif
#if !defined(HIP_VERSION) && defined(HIP_VERSION_MAJOR) && \
    defined(HIP_VERSION_MINOR) && defined(HIP_VERSION_PATCH)
#define HIP_VERSION \
  (HIP_VERSION_MAJOR * 10000000 + HIP_VERSION_MINOR * 100000 + HIP_VERSION_PATCH)
#endif

/* What an AMD GPU can do, as HIP reports it for every AMD target. */
#ifndef __HIP_ARCH_HAS_WARP_SHUFFLE__
#define __HIP_ARCH_HAS_GLOBAL_INT32_ATOMICS__ 1
#define __HIP_ARCH_HAS_GLOBAL_FLOAT_ATOMIC_EXCH__ 1
#define __HIP_ARCH_HAS_SHARED_INT32_ATOMICS__ 1
#define __HIP_ARCH_HAS_SHARED_FLOAT_ATOMIC_EXCH__ 1
#define __HIP_ARCH_HAS_FLOAT_ATOMIC_ADD__ 1
#define __HIP_ARCH_HAS_GLOBAL_INT64_ATOMICS__ 1
#define __HIP_ARCH_HAS_SHARED_INT64_ATOMICS__ 1
#define __HIP_ARCH_HAS_DOUBLES__ 1
#define __HIP_ARCH_HAS_WARP_VOTE__ 1
#define __HIP_ARCH_HAS_WARP_BALLOT__ 1
#define __HIP_ARCH_HAS_WARP_SHUFFLE__ 1
#define __HIP_ARCH_HAS_WARP_FUNNEL_SHIFT__ 0
#define __HIP_ARCH_HAS_THREAD_FENCE_SYSTEM__ 1
#define __HIP_ARCH_HAS_SYNC_THREAD_EXT__ 0
#define __HIP_ARCH_HAS_SURFACE_FUNCS__ 0
#define __HIP_ARCH_HAS_3DGRID__ 1
#define __HIP_ARCH_HAS_DYNAMIC_PARALLEL__ 0
#endif

#endif /* TJ_HIP_AMD_HIP_COMMON_H */
