/*
 * hip_platform.c: the platform services of hip_platform.h, one section per
 * platform.  Nothing outside this pair knows which platform it is.
 */
#include "hip_platform.h"
#include "tokitai-jit.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An arch name is short and made of [A-Za-z0-9_:+-]; anything else is a
 * malformed name, rejected before it reaches a compiler. */
static int arch_name_wellformed(const char *arch, char *why, size_t whylen)
{
  size_t n = arch ? strlen(arch) : 0;
  if (n == 0 || n > 64) {
    snprintf(why, whylen, "arch name must be 1 to 64 characters, got %zu", n);
    return TJ_EINVAL;
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)arch[i];
    if (!isalnum(c) && !strchr("_:+-", c)) {
      snprintf(why, whylen, "arch name '%s' has a character that no arch has",
               arch);
      return TJ_EINVAL;
    }
  }
  return TJ_OK;
}

#if defined(TJ_PLATFORM_AMD)
/* comgr 2.6 (ROCm 6.0, Debian 13) moved its header into amd_comgr/ and
 * left a wrapper at the old place that warns; comgr 2.4 has only that. */
#if defined(HAVE_AMD_COMGR_AMD_COMGR_H)
#include <amd_comgr/amd_comgr.h>
#else
#include <amd_comgr.h>
#endif

int tj__device_count(int *count)
{
  *count = 0;
  if (hipInit(0) != hipSuccess)
    return TJ_OK;
  if (hipGetDeviceCount(count) != hipSuccess)
    *count = 0;
  return TJ_OK;
}

int tj__device_open(int ordinal, tj__device *dev, char *err, size_t errlen)
{
  int count = 0;
  tj__device_count(&count);
  if (ordinal < 0 || ordinal >= count) {
    snprintf(err, errlen, "device %d requested, %d visible", ordinal, count);
    return TJ_ENODEVICE;
  }
  hipError_t e = hipSetDevice(ordinal);
  if (e != hipSuccess) {
    snprintf(err, errlen, "hipSetDevice(%d): %s", ordinal, hipGetErrorString(e));
    return TJ_EDEVICE;
  }
  dev->ordinal = ordinal;
  dev->ctx = NULL;
  return TJ_OK;
}

int tj__device_make_current(const tj__device *dev)
{
  return hipSetDevice(dev->ordinal) == hipSuccess ? TJ_OK : TJ_EDEVICE;
}

void tj__device_close(tj__device *dev)
{
  (void)dev;
}

int tj__device_query(int ordinal, tj__device_props *props)
{
  hipDeviceProp_t p;
  if (hipGetDeviceProperties(&p, ordinal) != hipSuccess)
    return TJ_EDEVICE;
  snprintf(props->name, sizeof props->name, "%s", p.name);
  snprintf(props->arch, sizeof props->arch, "%s", p.gcnArchName);
  props->total_mem = p.totalGlobalMem;
  props->compute_units = p.multiProcessorCount;
  return TJ_OK;
}

void tj__compiler_fingerprint(char *buf, size_t len)
{
  int rmaj = 0, rmin = 0;
  size_t cmaj = 0, cmin = 0;
  hiprtcVersion(&rmaj, &rmin);
  amd_comgr_get_version(&cmaj, &cmin);
  snprintf(buf, len, "hiprtc %d.%d, comgr %zu.%zu (HIP %d)", rmaj, rmin, cmaj,
           cmin, HIP_VERSION);
}

/* comgr names ISAs "amdgcn-amd-amdhsa--gfx90a"; the arch may carry feature
 * flags after ':' (gfx90a:sramecc+:xnack-).  hipRTC aborts the process on an
 * ISA comgr does not know, so this check must come first. */
int tj__arch_check(const char *arch, char *why, size_t whylen)
{
  int rc = arch_name_wellformed(arch, why, whylen);
  if (rc != TJ_OK)
    return rc;
  size_t base = strcspn(arch, ":"), count = 0;
  if (amd_comgr_get_isa_count(&count) != AMD_COMGR_STATUS_SUCCESS)
    count = 0;
  for (size_t i = 0; i < count; i++) {
    const char *isa = NULL;
    if (amd_comgr_get_isa_name(i, &isa) != AMD_COMGR_STATUS_SUCCESS || !isa)
      continue;
    const char *name = strrchr(isa, '-');
    name = name ? name + 1 : isa;
    if (strlen(name) == base && strncmp(name, arch, base) == 0)
      return TJ_OK;
  }
  size_t cmaj = 0, cmin = 0;
  amd_comgr_get_version(&cmaj, &cmin);
  snprintf(why, whylen,
           "arch '%.*s' is not supported by the installed compiler "
           "(comgr %zu.%zu knows %zu ISAs; see tokitai-jit --info)",
           (int)base, arch, cmaj, cmin, count);
  return TJ_EARCH;
}

int tj__base_options(const char *arch, char *store, size_t storelen,
                     const char **opts)
{
  snprintf(store, storelen, "--offload-arch=%s", arch);
  opts[0] = store;
  opts[1] = "-O3";
  return 2;
}

#elif defined(TJ_PLATFORM_NVIDIA)
#include <dlfcn.h>
#include <pthread.h>

/* The driver table is written once under pthread_once and read-only after:
 * process-wide, like the driver itself. */
static tj__cuda_api cuda_api;
static const tj__cuda_api *cuda_loaded;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;

#define TJ__STR2(x) #x
#define TJ__STR(x) TJ__STR2(x)

static void cuda_load(void)
{
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return;
#define TJ__CUDA_LOAD(name, args)                                       \
  if (!(*(void **)&cuda_api.name = dlsym(h, TJ__STR(name)))) {          \
    dlclose(h);                                                         \
    return;                                                             \
  }
  TJ__CUDA_FUNCS(TJ__CUDA_LOAD)
#undef TJ__CUDA_LOAD
  if (cuda_api.cuInit(0) != CUDA_SUCCESS) {
    dlclose(h);
    return;
  }
  cuda_loaded = &cuda_api;
}

const tj__cuda_api *tj__cuda(void)
{
  pthread_once(&cuda_once, cuda_load);
  return cuda_loaded;
}

int tj__device_count(int *count)
{
  *count = 0;
  if (!tj__cuda() || tj__cuda()->cuDeviceGetCount(count) != CUDA_SUCCESS)
    *count = 0;
  return TJ_OK;
}

int tj__device_open(int ordinal, tj__device *dev, char *err, size_t errlen)
{
  int count = 0;
  tj__device_count(&count);
  if (ordinal < 0 || ordinal >= count) {
    snprintf(err, errlen, "device %d requested, %d visible%s", ordinal, count,
             tj__cuda() ? "" : " (libcuda.so.1 could not be loaded)");
    return TJ_ENODEVICE;
  }
  CUdevice d;
  CUcontext ctx;
  CUresult e = tj__cuda()->cuDeviceGet(&d, ordinal);
  if (e == CUDA_SUCCESS)
    e = tj__cuda()->cuDevicePrimaryCtxRetain(&ctx, d);
  if (e == CUDA_SUCCESS && (e = tj__cuda()->cuCtxSetCurrent(ctx)) != CUDA_SUCCESS)
    tj__cuda()->cuDevicePrimaryCtxRelease(d);
  if (e != CUDA_SUCCESS) {
    snprintf(err, errlen, "device %d: %s", ordinal, hipGetErrorString(e));
    return TJ_EDEVICE;
  }
  dev->ordinal = ordinal;
  dev->ctx = ctx;
  return TJ_OK;
}

int tj__device_make_current(const tj__device *dev)
{
  return tj__cuda()->cuCtxSetCurrent((CUcontext)dev->ctx) == CUDA_SUCCESS
             ? TJ_OK : TJ_EDEVICE;
}

void tj__device_close(tj__device *dev)
{
  CUdevice d;
  if (dev->ctx && tj__cuda()->cuDeviceGet(&d, dev->ordinal) == CUDA_SUCCESS)
    tj__cuda()->cuDevicePrimaryCtxRelease(d);
  dev->ctx = NULL;
}

int tj__device_query(int ordinal, tj__device_props *props)
{
  const tj__cuda_api *cu = tj__cuda();
  CUdevice d;
  int major = 0, minor = 0;
  if (!cu || cu->cuDeviceGet(&d, ordinal) != CUDA_SUCCESS ||
      cu->cuDeviceGetName(props->name, (int)sizeof props->name, d) != CUDA_SUCCESS ||
      cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d) ||
      cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d) ||
      cu->cuDeviceGetAttribute(&props->compute_units,
                               CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d) ||
      cu->cuDeviceTotalMem(&props->total_mem, d))
    return TJ_EDEVICE;
  snprintf(props->arch, sizeof props->arch, "sm_%d%d", major, minor);
  return TJ_OK;
}

void tj__compiler_fingerprint(char *buf, size_t len)
{
  int maj = 0, min = 0;
  nvrtcVersion(&maj, &min);
  snprintf(buf, len, "nvrtc %d.%d", maj, min);
}

/* sm_NN or sm_NNa / sm_NNf, checked against the archs NVRTC lists. */
int tj__arch_check(const char *arch, char *why, size_t whylen)
{
  int rc = arch_name_wellformed(arch, why, whylen);
  if (rc != TJ_OK)
    return rc;
  char *end = NULL;
  long num = strncmp(arch, "sm_", 3) == 0 ? strtol(arch + 3, &end, 10) : -1;
  if (num <= 0 || !end || (*end && strcmp(end, "a") && strcmp(end, "f"))) {
    snprintf(why, whylen, "arch '%s' is not an NVIDIA arch name (sm_90, sm_90a)",
             arch);
    return TJ_EARCH;
  }
  int count = 0, archs[64];
  if (nvrtcGetNumSupportedArchs(&count) == NVRTC_SUCCESS && count > 0 &&
      count <= 64 && nvrtcGetSupportedArchs(archs) == NVRTC_SUCCESS)
    for (int i = 0; i < count; i++)
      if (archs[i] == num)
        return TJ_OK;
  int maj = 0, min = 0;
  nvrtcVersion(&maj, &min);
  snprintf(why, whylen, "arch '%s' is not supported by NVRTC %d.%d", arch, maj,
           min);
  return TJ_EARCH;
}

int tj__base_options(const char *arch, char *store, size_t storelen,
                     const char **opts)
{
  int n = snprintf(store, storelen, "--gpu-architecture=%s", arch);
  opts[0] = store;
  opts[1] = store + n + 1;
  snprintf(store + n + 1, storelen - (size_t)n - 1, "-I%s", TJ_CUDA_INCLUDE_DIR);
  opts[2] = "-include";
  opts[3] = "cuda_fp16.h";
  opts[4] = "-std=c++17";
  return 5;
}

#endif
