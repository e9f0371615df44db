/*
 * hip/hip_runtime_api.h for hipRTC on AMD, as far as device code needs it.
 * The installed header declares the host API and includes C library
 * headers that hipRTC has no path to ("'stddef.h' file not found" under
 * hipRTC 5.2); a kernel cannot call the host API anyway.  A source shared
 * with host code keeps those parts under #if !defined(__HIPCC_RTC__).
 */
#ifndef TJ_HIP_AMD_HIP_RUNTIME_API_H
#define TJ_HIP_AMD_HIP_RUNTIME_API_H

#include <hip/hip_common.h>

#endif /* TJ_HIP_AMD_HIP_RUNTIME_API_H */
