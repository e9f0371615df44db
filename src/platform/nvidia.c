/*
 * nvidia.c: the platform services of hip_platform.h on NVIDIA: NVRTC
 * through hipRTC's names, and the CUDA driver, loaded with dlopen at
 * first use.  The build compiles this file or amd.c, never both;
 * hip_platform.c holds what the two share.
 */
#include "hip_platform.h"
#include "platform_internal.h"
#include "tokitai-jit.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The driver table is written once under pthread_once and read-only after:
 * process-wide, like the driver itself. */
static tj__cuda_api cuda_api;
static const tj__cuda_api *cuda_loaded;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;

#define TJ__STR2(x) #x
#define TJ__STR(x) TJ__STR2(x)

int tj__cuda_fill(tj__cuda_api *api, void *(*sym)(void *, const char *),
                  void *handle)
{
#define TJ__CUDA_LOAD(name, args)                                       \
  if (!(*(void **)&api->name = sym(handle, TJ__STR(name))))             \
    return 0;
  TJ__CUDA_FUNCS(TJ__CUDA_LOAD)
#undef TJ__CUDA_LOAD
#define TJ__CUDA_LOAD_OPTIONAL(name, args) \
  *(void **)&api->name = sym(handle, TJ__STR(name));
  TJ__CUDA_OPTIONAL_FUNCS(TJ__CUDA_LOAD_OPTIONAL)
#undef TJ__CUDA_LOAD_OPTIONAL
  return 1;
}

static void cuda_load(void)
{
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return;
  if (!tj__cuda_fill(&cuda_api, dlsym, h)) {
    dlclose(h);
    return;
  }
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

/* The runtime's own pool rather than the device's default one, whose
 * settings (how much it keeps) belong to the whole process.  NULL where
 * the driver lacks pools: split-K then runs unsplit. */
static void *device_pool(int ordinal)
{
  const tj__cuda_api *cu = tj__cuda();
  if (!cu->cuMemPoolCreate || !cu->cuMemPoolDestroy ||
      !cu->cuMemPoolSetAttribute || !cu->cuMemAllocFromPoolAsync ||
      !cu->cuMemFreeAsync)
    return NULL;
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = ordinal;
  CUmemoryPool pool = NULL;
  if (cu->cuMemPoolCreate(&pool, &props) != CUDA_SUCCESS)
    return NULL;
  cuuint64_t keep = TJ__POOL_KEEP;
  if (cu->cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                &keep) != CUDA_SUCCESS) {
    cu->cuMemPoolDestroy(pool);
    return NULL;
  }
  return pool;
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
  dev->pool = NULL; /* made when first needed: a pool costs every open */
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
  /* Memory still queued for freeing goes back when its work is done. */
  if (dev->pool)
    tj__cuda()->cuMemPoolDestroy((CUmemoryPool)dev->pool);
  dev->pool = NULL;
  if (dev->ctx && tj__cuda()->cuDeviceGet(&d, dev->ordinal) == CUDA_SUCCESS)
    tj__cuda()->cuDevicePrimaryCtxRelease(d);
  dev->ctx = NULL;
}

int tj__device_query(int ordinal, tj__device_props *props, int what)
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
  /* Deprecated in CUDA 13 but still answered; 0 where a driver stops. */
  static const CUdevice_attribute asked[3] = {
      CU_DEVICE_ATTRIBUTE_CLOCK_RATE, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE,
      CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH};
  int *into[3] = {&props->clock_khz, &props->memory_clock_khz,
                  &props->memory_bus_bits};
  for (int i = 0; i < 3; i++) {
    *into[i] = 0;
    if ((what & TJ__QUERY_CLOCK) &&
        cu->cuDeviceGetAttribute(into[i], asked[i], d))
      *into[i] = 0;
  }
  return TJ_OK;
}

int tj__tensor_map_16(void *map, const void *base, uint64_t rows,
                      uint64_t cols, uint64_t ld, uint32_t box_rows,
                      uint32_t box_cols, int bf16)
{
  _Static_assert(sizeof(CUtensorMap) == TJ__TENSOR_MAP_BYTES,
                 "CUtensorMap is 128 bytes");
  if (!tj__hopper_driver())
    return TJ_EDEVICE;
  const cuuint64_t dims[2] = {cols, rows}, strides[1] = {ld * 2};
  const cuuint32_t box[2] = {box_cols, box_rows}, step[2] = {1, 1};
  return TJ__CU(cuTensorMapEncodeTiled(
             (CUtensorMap *)map,
             bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                  : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
             2,
             (void *)base, dims, strides, box, step,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)) == CUDA_SUCCESS
             ? TJ_OK : TJ_EDEVICE;
}

int tj__tensor_map_16_3d(void *map, const void *base, uint64_t rows,
                         uint64_t cols, uint64_t ld, uint64_t count,
                         uint64_t stride, uint32_t box_rows,
                         uint32_t box_cols, int bf16)
{
  if (!tj__hopper_driver())
    return TJ_EDEVICE;
  const cuuint64_t dims[3] = {cols, rows, count},
                   strides[2] = {ld * 2, stride * 2};
  const cuuint32_t box[3] = {box_cols, box_rows, 1}, step[3] = {1, 1, 1};
  return TJ__CU(cuTensorMapEncodeTiled(
             (CUtensorMap *)map,
             bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                  : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
             3, (void *)base, dims, strides, box, step,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)) == CUDA_SUCCESS
             ? TJ_OK : TJ_EDEVICE;
}

/* function launched with programmatic dependent launch (tj__launch's
 * early): 1 when the driver took it, 0 where it has no cuLaunchKernelEx or
 * refused the launch. */
static int launch_early(void *function, const unsigned grid[3],
                        const unsigned block[3], unsigned shared,
                        void *stream, void **args)
{
  const tj__cuda_api *cu = tj__cuda();
  if (!cu->cuLaunchKernelEx)
    return 0;
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig c = {grid[0], grid[1], grid[2], block[0], block[1],
                      block[2], shared, (CUstream)stream, &attr, 1};
  return cu->cuLaunchKernelEx(&c, (CUfunction)function, args, NULL) ==
         CUDA_SUCCESS;
}

int tj__hopper_driver(void)
{
  return tj__cuda() && tj__cuda()->cuTensorMapEncodeTiled;
}

int tj__alloc_async(tj__device *dev, void **p, size_t bytes,
                    void *stream)
{
  const tj__cuda_api *cu = tj__cuda();
  CUdeviceptr d = 0;
  *p = NULL;
  /* Threads of one runtime may get here at once: one pool wins. */
  void *pool = __atomic_load_n(&dev->pool, __ATOMIC_ACQUIRE), *none = NULL;
  if (!pool && cu && (pool = device_pool(dev->ordinal)) &&
      !__atomic_compare_exchange_n(&dev->pool, &none, pool, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    cu->cuMemPoolDestroy((CUmemoryPool)pool);
    pool = none;
  }
  if (!cu || !pool || !cu->cuMemFreeAsync ||
      cu->cuMemAllocFromPoolAsync(&d, bytes, (CUmemoryPool)pool,
                                  (CUstream)stream) != CUDA_SUCCESS)
    return TJ_EDEVICE;
  *p = (void *)(uintptr_t)d;
  return TJ_OK;
}

int tj__free_async(void *p, void *stream)
{
  const tj__cuda_api *cu = tj__cuda();
  if (!cu || !cu->cuMemFreeAsync)
    return TJ_EDEVICE;
  return cu->cuMemFreeAsync((CUdeviceptr)(uintptr_t)p, (CUstream)stream) ==
                 CUDA_SUCCESS
             ? TJ_OK : TJ_EDEVICE;
}

int tj__memset_async(void *p, int value, size_t bytes, void *stream)
{
  const tj__cuda_api *cu = tj__cuda();
  if (!cu || !cu->cuMemsetD8Async)
    return TJ_EDEVICE;
  return cu->cuMemsetD8Async((CUdeviceptr)(uintptr_t)p, (unsigned char)value,
                             bytes, (CUstream)stream) == CUDA_SUCCESS
             ? TJ_OK : TJ_EDEVICE;
}

int tj__stream_capturing(void *stream)
{
  const tj__cuda_api *cu = tj__cuda();
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!cu || !cu->cuStreamIsCapturing ||
      cu->cuStreamIsCapturing((CUstream)stream, &st) != CUDA_SUCCESS)
    return -1;
  return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

int tj__function_shared_limit(void *function, unsigned bytes)
{
  return TJ__CU(cuFuncSetAttribute(
             (CUfunction)function,
             CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes)) ==
                 CUDA_SUCCESS
             ? TJ_OK : TJ_EDEVICE;
}

int tj__function_resources(void *function, tj_kernel_resources *out)
{
  const tj__cuda_api *cu = tj__cuda();
  CUfunction f = function;
  int v;
  if (!cu || cu->cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f) != CUDA_SUCCESS)
    return TJ_EDEVICE;
  out->regs = v;
  if (cu->cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f) == CUDA_SUCCESS)
    out->shared_bytes = v;
  if (cu->cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f) == CUDA_SUCCESS)
    out->local_bytes = v;
  if (cu->cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f) == CUDA_SUCCESS)
    out->max_threads = v;
  return TJ_OK;
}

void tj__platform_fingerprint(char *buf, size_t len)
{
  int maj = 0, min = 0;
  nvrtcVersion(&maj, &min);
  snprintf(buf, len, "nvrtc %d.%d %s", maj, min, tj__compiler_libraries_digest());
}

const char *const *tj__platform_library_prefixes(void)
{
  static const char *const prefixes[] = {"libnvrtc.so", NULL};
  return prefixes;
}

/* len bytes at off of the file, from head (the file's first got bytes)
 * when they lie there, else read: a warm start reads the library's first
 * 4 KiB once, where its headers and notes usually are. */
static int read_at(int fd, const unsigned char *head, size_t got, void *buf,
                   size_t len, uint64_t off)
{
  if (off <= got && len <= got - off) {
    memcpy(buf, head + off, len);
    return 1;
  }
  return pread(fd, buf, len, (off_t)off) == (ssize_t)len;
}

/* The GNU build id of a library that is not loaded yet, read from its
 * file: its ELF header, program headers and notes, a few KiB at most. */
static int file_build_id(const char *path, char *out, size_t outlen)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC), found = 0;
  ElfW(Ehdr) eh;
  unsigned char head[4096];
  if (fd < 0)
    return 0;
  ssize_t r = pread(fd, head, sizeof head, 0);
  size_t got = r > 0 ? (size_t)r : 0;
  if (read_at(fd, head, got, &eh, sizeof eh, 0) &&
      memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_phentsize == sizeof(ElfW(Phdr)) && eh.e_phnum < 64) {
    ElfW(Phdr) ph[64];
    size_t n = (size_t)eh.e_phnum * sizeof ph[0];
    if (read_at(fd, head, got, ph, n, eh.e_phoff))
      for (int i = 0; i < eh.e_phnum && !found; i++) {
        unsigned char notes[4096];
        size_t len = ph[i].p_filesz < sizeof notes ? ph[i].p_filesz : sizeof notes;
        if (ph[i].p_type == PT_NOTE &&
            read_at(fd, head, got, notes, len, ph[i].p_offset))
          found = tj__note_build_id(notes, notes + len, out, outlen);
      }
  }
  close(fd);
  return found;
}

/*
 * NVRTC dlopens libnvrtc-builtins.so.MAJOR.MINOR at its first compile,
 * from beside itself.  Loading it at open to name it would cost a warm
 * start more than all the rest together (tj-bench's warm start), so the
 * digest names the file NVRTC will find there, read from disk, and
 * tj__compiler_libraries_hold checks after each compile that it is the
 * one NVRTC loaded.
 */
static int builtins_file(char *path, size_t len, char *name, size_t namelen)
{
  Dl_info info;
  int maj = 0, min = 0;
  if (nvrtcVersion(&maj, &min) != NVRTC_SUCCESS ||
      !dladdr((void *)nvrtcVersion, &info) || !info.dli_fname)
    return 0;
  const char *slash = strrchr(info.dli_fname, '/');
  snprintf(name, namelen, "libnvrtc-builtins.so.%d.%d", maj, min);
  snprintf(path, len, "%.*s%s", slash ? (int)(slash - info.dli_fname + 1) : 0,
           info.dli_fname, name);
  return 1;
}

void tj__platform_lazy_identities(tj__lib_scan *scan)
{
  char path[4096], name[64];
  if (scan->n >= TJ__LIBS_MAX || !builtins_file(path, sizeof path, name, sizeof name))
    return;
  tj__lib_identity *lib = &scan->libs[scan->n++];
  snprintf(lib->name, sizeof lib->name, "%s", name);
  if (!file_build_id(path, lib->id, sizeof lib->id))
    tj__file_identity(path, lib->id, sizeof lib->id);
}

typedef struct loaded_builtins {
  char id[96];
  int found;
} loaded_builtins;

static int find_builtins(struct dl_phdr_info *info, size_t size, void *ctx)
{
  (void)size;
  loaded_builtins *b = ctx;
  const char *name = info->dlpi_name ? tj__base_name(info->dlpi_name) : "";
  if (strncmp(name, "libnvrtc-builtins", 17) != 0)
    return 0;
  if (!tj__build_id(info, b->id, sizeof b->id))
    tj__file_identity(info->dlpi_name, b->id, sizeof b->id);
  b->found = 1;
  return 1;
}

int tj__compiler_libraries_hold(char *why, size_t whylen)
{
  char path[4096], name[64], want[96];
  loaded_builtins b = {{0}, 0};
  dl_iterate_phdr(find_builtins, &b);
  if (!b.found || !builtins_file(path, sizeof path, name, sizeof name))
    return 1; /* not loaded yet: nothing compiled with another one */
  if (!file_build_id(path, want, sizeof want))
    tj__file_identity(path, want, sizeof want);
  if (strcmp(want, b.id) == 0)
    return 1;
  snprintf(why, whylen, "NVRTC compiled with a %s other than %s, which the "
           "compiler fingerprint names (LD_LIBRARY_PATH?); the code is not "
           "used", name, path);
  return 0;
}

/* NVRTC lists the numbers (90 for sm_90); the a and f forms it also
 * takes (sm_90a) are not listed separately. */
void tj__platform_list_archs(void)
{
  int count = 0, archs[64];
  if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0 ||
      count > 64 || nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS)
    return;
  for (int i = 0; i < count; i++) {
    char name[16];
    int n = snprintf(name, sizeof name, "sm_%d", archs[i]);
    if (n > 0 && (size_t)n < sizeof name)
      tj__add_arch(name, (size_t)n);
  }
}

/* NVIDIA arch names have no feature list: the name is its own canonical
 * form. */
int tj__arch_canonical(const char *arch, char *out, size_t outlen)
{
  int n = snprintf(out, outlen, "%s", arch);
  return n < 0 || (size_t)n >= outlen ? TJ_ERANGE : TJ_OK;
}

/* sm_NN or sm_NNa / sm_NNf, checked against the archs NVRTC lists. */
int tj__arch_check(const char *arch, char *why, size_t whylen)
{
  int rc = tj__arch_name_wellformed(arch, why, whylen);
  if (rc != TJ_OK)
    return rc;
  char *end = NULL;
  /* Digits only, no sign or leading zero: strtol alone would let sm_+90
   * and sm_090 through as second spellings that NVRTC then refuses. */
  long num = strncmp(arch, "sm_", 3) == 0 && arch[3] >= '1' && arch[3] <= '9'
                 ? strtol(arch + 3, &end, 10) : -1;
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
  int m = snprintf(store + n + 1, storelen - (size_t)n - 1, "-I%s",
                   TJ_CUDA_INCLUDE_DIR);
  /* NVRTC looks for an -include file, and for a quoted #include of the
   * source, in the working directory first: a cuda_fp16.h or a header in
   * the host program's directory would change the code under the same key.
   * So the pre-include is an absolute path, and -no-source-include drops
   * the source's (the working) directory from the search. */
  opts[2] = "-include";
  opts[3] = store + n + 1 + m + 1;
  snprintf(store + n + 1 + m + 1, storelen - (size_t)(n + 1 + m + 1),
           "%s/cuda_fp16.h", TJ_CUDA_INCLUDE_DIR);
  opts[4] = "-std=c++17";
  opts[5] = "-no-source-include";
  /* NVRTC from 12.9 also keeps each compile's output in the driver's
   * compute cache (CUDA_CACHE_PATH, ~/.nv) where a driver is installed,
   * and answers a later compile of the same input from there.  That
   * directory is outside the library's location checks and its code is
   * not verified: the library's code comes from the compiler or from a
   * verified row of its own cache, which already keeps every compile.
   * (A cold compile takes as long without it: bench/nvrtc_phases.c.) */
  int maj = 0, min = 0;
  if (nvrtcVersion(&maj, &min) == NVRTC_SUCCESS &&
      (maj > 12 || (maj == 12 && min >= 9))) {
    opts[6] = "-no-cache";
    return 7;
  }
  return 6;
}

/* NVRTC's documented options (the NVRTC guide, "Supported Compile
 * Options"), less those that retarget (--gpu-architecture, -arch), write
 * files (--time, --fdevice-time-trace, --create-pch, -pch*), read files
 * outside the key (--pre-include, -include, --use-pch), produce no cubin
 * (-dlto, --gen-opt-lto, --optix-ir, -rdc, --fdevice-syntax-only) or pass
 * options on unchecked (-Xptxas, --ptxas-options).  NVRTC itself refuses
 * what it does not know with an error; it has no exit() path on options
 * (checked: --help, --version, @file each come back as
 * NVRTC_ERROR_INVALID_OPTION), so the list is about the key. */
static const tj__option_rule nvidia_option_rules[] = {
  {"-D", TJ__OPT_JOINED_OR_SEP, TJ__VAL_MACRO, NULL},
  {"--define-macro", TJ__OPT_EQ_OR_SEP, TJ__VAL_MACRO, NULL},
  {"-U", TJ__OPT_JOINED_OR_SEP, TJ__VAL_MACRO, NULL},
  {"--undefine-macro", TJ__OPT_EQ_OR_SEP, TJ__VAL_MACRO, NULL},
  {"-I", TJ__OPT_JOINED_OR_SEP, TJ__VAL_ABSDIR, NULL},
  {"--include-path", TJ__OPT_EQ_OR_SEP, TJ__VAL_ABSDIR, NULL},
  {"-std", TJ__OPT_EQ, TJ__VAL_LIST, "c++03|c++11|c++14|c++17|c++20"},
  {"--std", TJ__OPT_EQ, TJ__VAL_LIST, "c++03|c++11|c++14|c++17|c++20"},
  {"-G", TJ__OPT_FLAG, 0, NULL}, {"--device-debug", TJ__OPT_FLAG, 0, NULL},
  {"-lineinfo", TJ__OPT_FLAG, 0, NULL},
  {"--generate-line-info", TJ__OPT_FLAG, 0, NULL},
  {"-dopt", TJ__OPT_EQ, TJ__VAL_LIST, "on"},
  {"--dopt", TJ__OPT_EQ, TJ__VAL_LIST, "on"},
  {"-Ofc", TJ__OPT_EQ, TJ__VAL_LIST, "0|min|mid|max"},
  {"--Ofast-compile", TJ__OPT_EQ, TJ__VAL_LIST, "0|min|mid|max"},
  {"-maxrregcount", TJ__OPT_EQ, TJ__VAL_NUMBER, NULL},
  {"--maxrregcount", TJ__OPT_EQ, TJ__VAL_NUMBER, NULL},
#define TJ__B(name) {"-" name, TJ__OPT_EQ, TJ__VAL_LIST, "true|false"}, \
                    {"--" name, TJ__OPT_EQ, TJ__VAL_LIST, "true|false"}
  TJ__B("ftz"), TJ__B("prec-sqrt"), TJ__B("prec-div"), TJ__B("fmad"),
  TJ__B("modify-stack-limit"), TJ__B("device-stack-protector"),
  TJ__B("builtin-move-forward"), TJ__B("builtin-initializer-list"),
  TJ__B("brief-diagnostics"),
#undef TJ__B
  {"-use_fast_math", TJ__OPT_FLAG, 0, NULL},
  {"--use_fast_math", TJ__OPT_FLAG, 0, NULL},
  {"-extra-device-vectorization", TJ__OPT_FLAG, 0, NULL},
  {"--extra-device-vectorization", TJ__OPT_FLAG, 0, NULL},
  {"-jump-table-density", TJ__OPT_EQ, TJ__VAL_NUMBER, NULL},
  {"--jump-table-density", TJ__OPT_EQ, TJ__VAL_NUMBER, NULL},
  {"-split-compile", TJ__OPT_EQ, TJ__VAL_NUMBER, NULL},
  {"--split-compile", TJ__OPT_EQ, TJ__VAL_NUMBER, NULL},
  {"-default-device", TJ__OPT_FLAG, 0, NULL},
  {"--device-as-default-execution-space", TJ__OPT_FLAG, 0, NULL},
  {"-restrict", TJ__OPT_FLAG, 0, NULL}, {"--restrict", TJ__OPT_FLAG, 0, NULL},
  {"-device-int128", TJ__OPT_FLAG, 0, NULL},
  {"--device-int128", TJ__OPT_FLAG, 0, NULL},
  {"-w", TJ__OPT_FLAG, 0, NULL}, {"--disable-warnings", TJ__OPT_FLAG, 0, NULL},
  {"-err-no", TJ__OPT_FLAG, 0, NULL},
  {"--display-error-number", TJ__OPT_FLAG, 0, NULL},
  {"-no-err-no", TJ__OPT_FLAG, 0, NULL},
  {"--no-display-error-number", TJ__OPT_FLAG, 0, NULL},
  {"-diag-error", TJ__OPT_EQ, TJ__VAL_NUMLIST, NULL},
  {"--diag-error", TJ__OPT_EQ, TJ__VAL_NUMLIST, NULL},
  {"-diag-suppress", TJ__OPT_EQ, TJ__VAL_NUMLIST, NULL},
  {"--diag-suppress", TJ__OPT_EQ, TJ__VAL_NUMLIST, NULL},
  {"-diag-warn", TJ__OPT_EQ, TJ__VAL_NUMLIST, NULL},
  {"--diag-warn", TJ__OPT_EQ, TJ__VAL_NUMLIST, NULL},
  {"-opt-info", TJ__OPT_EQ, TJ__VAL_LIST, "inline"},
  {"--optimization-info", TJ__OPT_EQ, TJ__VAL_LIST, "inline"},
};

const tj__option_rule *tj__option_rules(size_t *n)
{
  *n = sizeof nvidia_option_rules / sizeof nvidia_option_rules[0];
  return nvidia_option_rules;
}

/*
 * What NVRTC 13 reads from the environment (strings on libnvrtc and
 * libnvrtc-builtins, then each tried with a header directory and a value):
 *   NVRTC_APPEND_FLAGS  named as adding options (no effect seen in 13.0):
 *       refused.
 *   EDG_MODULES_PATH, CPPCX_INCLUDE_PATH  front-end search paths (no effect
 *       seen on a CUDA compile): keyed.
 *   CPATH, CPLUS_INCLUDE_PATH, CUDA_PATH, CUDA_HOME  not read by NVRTC.
 *   NVRTC_DISABLE_PCH, NVRTC_PCH_HEAP_SIZE, NVRTC_DISABLE_CONCURRENT_NVVM,
 *   NVRTC_INTERNAL_GLOBAL_LOCK, CUDA_CACHE_DISABLE, TMPDIR  caching,
 *       locking and temporaries: the cubin is the same (shown).
 */
static const tj__env_rule nvidia_env_rules[] = {
  {"NVRTC_APPEND_FLAGS", 1, "it adds compiler options"},
  {"EDG_MODULES_PATH", 0, NULL},
  {"CPPCX_INCLUDE_PATH", 0, NULL},
};

const tj__env_rule *tj__platform_env_rules(size_t *n)
{
  *n = sizeof nvidia_env_rules / sizeof nvidia_env_rules[0];
  return nvidia_env_rules;
}

int tj__launch(void *function, const unsigned grid[3], const unsigned block[3],
               unsigned shared, void *stream, void **args, int early)
{
  /* Refused (a driver that takes no such launch where this one is going):
   * plainly, as the kernel runs the same either way. */
  if (early && launch_early(function, grid, block, shared, stream, args))
    return TJ_OK;
  return hipModuleLaunchKernel((hipFunction_t)function, grid[0], grid[1],
                               grid[2], block[0], block[1], block[2], shared,
                               (hipStream_t)stream, args, NULL) == hipSuccess
             ? TJ_OK : TJ_EDEVICE;
}
