/*
 * nvidia.h: the NVIDIA half of hip_platform.h, which includes it when the
 * build is for NVIDIA: <hip/hiprtc.h> maps hipRTC onto NVRTC, and the HIP
 * runtime calls the project uses are mapped here onto the CUDA driver API,
 * whose entry points nvidia.c loads.  Include hip_platform.h, not this.
 */
#ifndef TJ_PLATFORM_NVIDIA_H
#define TJ_PLATFORM_NVIDIA_H

#include <cuda.h>
#include <hip/hiprtc.h>

#define TJ__PLATFORM "nvidia"

/* NVRTC's functions may be called from several threads at once on
 * different programs (its guide's thread-safety section), and it leaves
 * the working directory alone: compiles in one process run side by side,
 * so a background build does not hold up the compile a call waits for. */
#define TJ__RTC_TAKES_TURNS 0

/* hiprtcGetCode is PTX on NVIDIA; the cache keeps the cubin instead, so a
 * load is cuModuleLoadData of machine code, with no driver JIT. */
static inline hiprtcResult tj__rtc_code_size(hiprtcProgram p, size_t *n)
{
  return nvrtcGetCUBINSize(p, n) == NVRTC_SUCCESS ? HIPRTC_SUCCESS
                                                  : HIPRTC_ERROR_INVALID_PROGRAM;
}
static inline hiprtcResult tj__rtc_code(hiprtcProgram p, char *code)
{
  return nvrtcGetCUBIN(p, code) == NVRTC_SUCCESS ? HIPRTC_SUCCESS
                                                 : HIPRTC_ERROR_INVALID_PROGRAM;
}

typedef CUresult hipError_t;
typedef CUmodule hipModule_t;
typedef CUfunction hipFunction_t;
typedef CUstream hipStream_t;
typedef CUevent hipEvent_t;
typedef CUdeviceptr hipDeviceptr_t;
typedef CUgraph hipGraph_t;
typedef CUgraphExec hipGraphExec_t;
typedef CUstreamCaptureMode hipStreamCaptureMode;
#define hipStreamCaptureModeGlobal CU_STREAM_CAPTURE_MODE_GLOBAL
#define hipSuccess CUDA_SUCCESS
#define hipErrorNoDevice CUDA_ERROR_NO_DEVICE
#define hipErrorNotInitialized CUDA_ERROR_NOT_INITIALIZED

/* The driver entry points, resolved once by dlopen("libcuda.so.1"). */
typedef struct tj__cuda_api {
#define TJ__CUDA_FUNCS(X)                                                      \
  X(cuInit, (unsigned))                                                        \
  X(cuGetErrorString, (CUresult, const char **))                               \
  X(cuDriverGetVersion, (int *))                                               \
  X(cuDeviceGetCount, (int *))                                                 \
  X(cuDeviceGet, (CUdevice *, int))                                            \
  X(cuDeviceGetName, (char *, int, CUdevice))                                  \
  X(cuDeviceGetAttribute, (int *, CUdevice_attribute, CUdevice))               \
  X(cuDeviceTotalMem, (size_t *, CUdevice))                                    \
  X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                         \
  X(cuDevicePrimaryCtxRelease, (CUdevice))                                     \
  X(cuCtxSetCurrent, (CUcontext))                                              \
  X(cuCtxSynchronize, (void))                                                  \
  X(cuModuleLoadData, (CUmodule *, const void *))                              \
  X(cuModuleGetFunction, (CUfunction *, CUmodule, const char *))               \
  X(cuModuleUnload, (CUmodule))                                                \
  X(cuFuncGetAttribute, (int *, CUfunction_attribute, CUfunction))             \
  X(cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned,       \
                     unsigned, unsigned, unsigned, CUstream, void **, void **)) \
  X(cuMemAlloc, (CUdeviceptr *, size_t))                                       \
  X(cuMemFree, (CUdeviceptr))                                                  \
  X(cuMemcpyHtoD, (CUdeviceptr, const void *, size_t))                         \
  X(cuMemcpyDtoH, (void *, CUdeviceptr, size_t))                               \
  X(cuMemcpyDtoDAsync, (CUdeviceptr, CUdeviceptr, size_t, CUstream))          \
  X(cuMemsetD8, (CUdeviceptr, unsigned char, size_t))                          \
  X(cuStreamCreate, (CUstream *, unsigned))                                    \
  X(cuStreamDestroy, (CUstream))                                               \
  X(cuStreamSynchronize, (CUstream))                                           \
  X(cuEventCreate, (CUevent *, unsigned))                                      \
  X(cuEventRecord, (CUevent, CUstream))                                        \
  X(cuEventSynchronize, (CUevent))                                             \
  X(cuEventElapsedTime, (float *, CUevent, CUevent))                           \
  X(cuEventDestroy, (CUevent))                                                 \
  X(cuFuncSetAttribute, (CUfunction, CUfunction_attribute, int))
/* Only the Hopper GEMM needs these (CUDA 12 drivers and later): NULL in the
 * table when the driver lacks them, and that path is then not taken, so an
 * older driver still runs everything else. */
#define TJ__CUDA_OPTIONAL_FUNCS(X)                                             \
  X(cuTensorMapEncodeTiled,                                                    \
    (CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,                   \
     const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,               \
     const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,            \
     CUtensorMapL2promotion, CUtensorMapFloatOOBfill))                         \
  X(cuMemPoolCreate, (CUmemoryPool *, const CUmemPoolProps *))                \
  X(cuMemPoolDestroy, (CUmemoryPool))                                          \
  X(cuMemPoolSetAttribute, (CUmemoryPool, CUmemPool_attribute, void *))        \
  X(cuMemAllocFromPoolAsync, (CUdeviceptr *, size_t, CUmemoryPool, CUstream))  \
  X(cuMemFreeAsync, (CUdeviceptr, CUstream))                                  \
  X(cuStreamIsCapturing, (CUstream, CUstreamCaptureStatus *))                 \
  X(cuMemsetD8Async, (CUdeviceptr, unsigned char, size_t, CUstream))        \
  X(cuLaunchKernelEx, (const CUlaunchConfig *, CUfunction, void **, void **)) \
  /* graphs: the GPU suites capture the library's calls into one */           \
  X(cuStreamBeginCapture, (CUstream, CUstreamCaptureMode))                    \
  X(cuStreamEndCapture, (CUstream, CUgraph *))                                \
  X(cuGraphInstantiateWithFlags, (CUgraphExec *, CUgraph, unsigned long long)) \
  X(cuGraphLaunch, (CUgraphExec, CUstream))                                   \
  X(cuGraphExecDestroy, (CUgraphExec))                                        \
  X(cuGraphDestroy, (CUgraph))
#define TJ__CUDA_FIELD(name, args) CUresult (*name) args;
  TJ__CUDA_FUNCS(TJ__CUDA_FIELD)
  TJ__CUDA_OPTIONAL_FUNCS(TJ__CUDA_FIELD)
#undef TJ__CUDA_FIELD
} tj__cuda_api;

/* The loaded driver, or NULL when libcuda cannot be loaded (no driver). */
const tj__cuda_api *tj__cuda(void);
/* Fill api from sym(handle, name): 0 when a required entry is missing,
 * else 1 with the optional ones NULL where absent.  cuda_load's step,
 * apart so that a test can hand it a driver that lacks some. */
int tj__cuda_fill(tj__cuda_api *api, void *(*sym)(void *, const char *),
                  void *handle);

#define TJ__CU(call) (tj__cuda() ? tj__cuda()->call : CUDA_ERROR_NO_DEVICE)

static inline hipError_t hipModuleLoadData(hipModule_t *m, const void *image)
{
  return TJ__CU(cuModuleLoadData(m, image));
}
static inline hipError_t hipModuleGetFunction(hipFunction_t *f, hipModule_t m,
                                              const char *name)
{
  return TJ__CU(cuModuleGetFunction(f, m, name));
}
static inline hipError_t hipModuleUnload(hipModule_t m)
{
  return TJ__CU(cuModuleUnload(m));
}
/* No NULL check of the table here: a function exists only if it loaded. */
static inline hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx,
    unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
    unsigned shared, hipStream_t s, void **args, void **extra)
{
  return tj__cuda()->cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, args,
                                    extra);
}
static inline hipError_t hipMalloc(void **p, size_t n)
{
  CUdeviceptr d = 0;
  hipError_t e = TJ__CU(cuMemAlloc(&d, n));
  *p = (void *)(uintptr_t)d;
  return e;
}
static inline hipError_t hipFree(void *p)
{
  return p ? TJ__CU(cuMemFree((CUdeviceptr)(uintptr_t)p)) : CUDA_SUCCESS;
}
static inline hipError_t hipMemcpyHtoD(void *dst, const void *src, size_t n)
{
  return TJ__CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, n));
}
static inline hipError_t hipMemcpyDtoH(void *dst, const void *src, size_t n)
{
  return TJ__CU(cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, n));
}
static inline hipError_t hipMemcpyDtoDAsync(void *dst, const void *src,
                                            size_t n, hipStream_t s)
{
  return TJ__CU(cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst,
                                  (CUdeviceptr)(uintptr_t)src, n, s));
}
static inline hipError_t hipMemset(void *dst, int value, size_t n)
{
  return TJ__CU(cuMemsetD8((CUdeviceptr)(uintptr_t)dst, (unsigned char)value, n));
}
static inline hipError_t hipStreamCreate(hipStream_t *s)
{
  return TJ__CU(cuStreamCreate(s, 0));
}
static inline hipError_t hipStreamDestroy(hipStream_t s)
{
  return TJ__CU(cuStreamDestroy(s));
}
static inline hipError_t hipStreamSynchronize(hipStream_t s)
{
  return TJ__CU(cuStreamSynchronize(s));
}
static inline hipError_t hipDeviceSynchronize(void)
{
  return TJ__CU(cuCtxSynchronize());
}
static inline hipError_t hipEventCreate(hipEvent_t *e)
{
  return TJ__CU(cuEventCreate(e, 0));
}
static inline hipError_t hipEventRecord(hipEvent_t e, hipStream_t s)
{
  return TJ__CU(cuEventRecord(e, s));
}
static inline hipError_t hipEventSynchronize(hipEvent_t e)
{
  return TJ__CU(cuEventSynchronize(e));
}
static inline hipError_t hipEventElapsedTime(float *ms, hipEvent_t a, hipEvent_t b)
{
  return TJ__CU(cuEventElapsedTime(ms, a, b));
}
static inline hipError_t hipEventDestroy(hipEvent_t e)
{
  return TJ__CU(cuEventDestroy(e));
}
/* Graphs, for the GPU suites (the library captures nothing itself). */
#define TJ__CU_OPTIONAL(fn, args)                                   \
  (tj__cuda() && tj__cuda()->fn ? tj__cuda()->fn args              \
                                : CUDA_ERROR_NOT_SUPPORTED)
static inline hipError_t hipStreamBeginCapture(hipStream_t s,
                                               hipStreamCaptureMode mode)
{
  return TJ__CU_OPTIONAL(cuStreamBeginCapture, (s, mode));
}
static inline hipError_t hipStreamEndCapture(hipStream_t s, hipGraph_t *g)
{
  return TJ__CU_OPTIONAL(cuStreamEndCapture, (s, g));
}
static inline hipError_t hipGraphInstantiateWithFlags(hipGraphExec_t *e,
                                                      hipGraph_t g,
                                                      unsigned long long flags)
{
  return TJ__CU_OPTIONAL(cuGraphInstantiateWithFlags, (e, g, flags));
}
static inline hipError_t hipGraphLaunch(hipGraphExec_t e, hipStream_t s)
{
  return TJ__CU_OPTIONAL(cuGraphLaunch, (e, s));
}
static inline hipError_t hipGraphExecDestroy(hipGraphExec_t e)
{
  return TJ__CU_OPTIONAL(cuGraphExecDestroy, (e));
}
static inline hipError_t hipGraphDestroy(hipGraph_t g)
{
  return TJ__CU_OPTIONAL(cuGraphDestroy, (g));
}
static inline const char *hipGetErrorString(hipError_t e)
{
  const char *s = NULL;
  if (!tj__cuda() || tj__cuda()->cuGetErrorString(e, &s) != CUDA_SUCCESS || !s)
    return e == CUDA_ERROR_NO_DEVICE ? "no CUDA driver or device" : "CUDA error";
  return s;
}

#endif /* TJ_PLATFORM_NVIDIA_H */
