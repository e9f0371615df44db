/*
 * amd.h: the AMD half of hip_platform.h, which includes it when the build
 * is for AMD: the real ROCm headers, and the code hipRTC emits (an AMD GPU
 * ELF).  Include hip_platform.h, not this.
 */
#ifndef TJ_PLATFORM_AMD_H
#define TJ_PLATFORM_AMD_H

#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>

#define TJ__PLATFORM "amd"

/* hipRTC here (comgr, through LLVM) keeps process-wide state while it
 * compiles: compiles in one process take turns (src/core/compile.c). */
#define TJ__RTC_TAKES_TURNS 1

static inline hiprtcResult tj__rtc_code_size(hiprtcProgram p, size_t *n)
{
  return hiprtcGetCodeSize(p, n);
}
static inline hiprtcResult tj__rtc_code(hiprtcProgram p, char *code)
{
  return hiprtcGetCode(p, code);
}

#endif /* TJ_PLATFORM_AMD_H */
