/*
 * hip/hip_fp16.h for hipRTC on AMD.  hipRTC's built-in copy of the device
 * headers already holds all of hip_fp16.h (__half, __half2, __float2half,
 * __hadd, ...), with its include guards lost (see hip/hip_common.h); the
 * installed /usr/include/hip/hip_fp16.h, found on the system include path,
 * would define every one of them again ("redefinition of '__half_raw'"
 * under hipRTC 5.2).  So this header adds nothing but the platform macros.
 */
#ifndef TJ_HIP_AMD_HIP_FP16_H
#define TJ_HIP_AMD_HIP_FP16_H

#include <hip/hip_common.h>

#endif /* TJ_HIP_AMD_HIP_FP16_H */
