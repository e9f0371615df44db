/*
 * amd.c: the platform services of hip_platform.h on AMD: HIP's runtime,
 * hipRTC and comgr.  The build compiles this file or nvidia.c, never
 * both; hip_platform.c holds what the two share.
 */
#include "hip_platform.h"
#include "platform_internal.h"
#include "tokitai-jit.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* comgr 2.6 (ROCm 6.0, Debian 13) has its header in amd_comgr/ and a
 * wrapper at the old place that warns; comgr 2.4 has only the old place. */
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
  dev->pool = NULL;
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

int tj__device_query(int ordinal, tj__device_props *props, int what)
{
  hipDeviceProp_t p;
  if (hipGetDeviceProperties(&p, ordinal) != hipSuccess)
    return TJ_EDEVICE;
  snprintf(props->name, sizeof props->name, "%s", p.name);
  snprintf(props->arch, sizeof props->arch, "%s", p.gcnArchName);
  props->total_mem = p.totalGlobalMem;
  props->compute_units = p.multiProcessorCount;
  int clocks = (what & TJ__QUERY_CLOCK) != 0;
  props->clock_khz = clocks ? p.clockRate : 0;
  props->memory_clock_khz = clocks ? p.memoryClockRate : 0;
  props->memory_bus_bits = clocks ? p.memoryBusWidth : 0;
  return TJ_OK;
}

/* No TMA and no Hopper GEMM on AMD: tj_gemm_f16 never asks. */
int tj__tensor_map_16(void *map, const void *base, uint64_t rows,
                      uint64_t cols, uint64_t ld, uint32_t box_rows,
                      uint32_t box_cols, int bf16)
{
  (void)map, (void)base, (void)rows, (void)cols, (void)ld, (void)box_rows,
      (void)box_cols, (void)bf16;
  return TJ_EDEVICE;
}

int tj__tensor_map_16_3d(void *map, const void *base, uint64_t rows,
                         uint64_t cols, uint64_t ld, uint64_t count,
                         uint64_t stride, uint32_t box_rows,
                         uint32_t box_cols, int bf16)
{
  (void)map, (void)base, (void)rows, (void)cols, (void)ld, (void)count,
      (void)stride, (void)box_rows, (void)box_cols, (void)bf16;
  return TJ_EDEVICE;
}

int tj__function_shared_limit(void *function, unsigned bytes)
{
  (void)function, (void)bytes;
  return TJ_EDEVICE;
}

int tj__hopper_driver(void)
{
  return 0;
}

int tj__alloc_async(tj__device *dev, void **p, size_t bytes,
                    void *stream)
{
  (void)dev, (void)bytes, (void)stream;
  *p = NULL;
  return TJ_EDEVICE;
}

int tj__free_async(void *p, void *stream)
{
  (void)p, (void)stream;
  return TJ_EDEVICE;
}

int tj__memset_async(void *p, int value, size_t bytes, void *stream)
{
  return hipMemsetAsync(p, value, bytes, (hipStream_t)stream) == hipSuccess
             ? TJ_OK : TJ_EDEVICE;
}

int tj__stream_capturing(void *stream)
{
  hipStreamCaptureStatus st = hipStreamCaptureStatusNone;
  if (hipStreamIsCapturing((hipStream_t)stream, &st) != hipSuccess)
    return -1;
  return st != hipStreamCaptureStatusNone;
}

int tj__function_resources(void *function, tj_kernel_resources *out)
{
  int v;
  hipFunction_t f = function;
  if (hipFuncGetAttribute(&v, HIP_FUNC_ATTRIBUTE_NUM_REGS, f) != hipSuccess)
    return TJ_EDEVICE;
  out->regs = v;
  if (hipFuncGetAttribute(&v, HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f) == hipSuccess)
    out->shared_bytes = v;
  if (hipFuncGetAttribute(&v, HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f) == hipSuccess)
    out->local_bytes = v;
  if (hipFuncGetAttribute(&v, HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f) == hipSuccess)
    out->max_threads = v;
  return TJ_OK;
}

/* The HIP version of the loaded libamdhip64, from its file name as
 * packaged (libamdhip64.so.5.2.21153 is HIP 50221153), or 0.  Asking the
 * runtime (hipRuntimeGetVersion) initialises HIP, which a runtime that
 * only compiles never needs: more instructions than the rest of a warm
 * start's identity together.  The name is only a label: the library
 * itself is named by its build id in the digest. */
static int hip_version_from_file(void)
{
  Dl_info info;
  int maj, min, patch, end = 0;
  if (!dladdr((void *)hipRuntimeGetVersion, &info) || !info.dli_fname)
    return 0;
  char *real = realpath(info.dli_fname, NULL);
  const char *name = real ? tj__base_name(real) : "";
  int ok = sscanf(name, "libamdhip64.so.%d.%d.%d%n", &maj, &min, &patch,
                  &end) == 3 && name[end] == '\0' && maj > 0 && maj < 100 &&
           min >= 0 && min < 100 && patch >= 0 && patch < 100000;
  free(real);
  return ok ? maj * 10000000 + min * 100000 + patch : 0;
}

void tj__platform_fingerprint(char *buf, size_t len)
{
  int rmaj = 0, rmin = 0, hip = 0;
  size_t cmaj = 0, cmin = 0;
  hiprtcVersion(&rmaj, &rmin);
  amd_comgr_get_version(&cmaj, &cmin);
  /* The loaded library's version, not HIP_VERSION (the headers this is
   * built with): 5.2 and 5.7 share the soname, and hipRTC says 9.0 in
   * both.  Needs no GPU. */
  if (!(hip = hip_version_from_file()) && hipRuntimeGetVersion(&hip) != hipSuccess)
    hip = HIP_VERSION;
  snprintf(buf, len, "hiprtc %d.%d, comgr %zu.%zu (HIP %d) %s", rmaj, rmin,
           cmaj, cmin, hip, tj__compiler_libraries_digest());
}

/* comgr names its ISAs "amdgcn-amd-amdhsa--gfx90a". */
void tj__platform_list_archs(void)
{
  size_t count = 0;
  if (amd_comgr_get_isa_count(&count) != AMD_COMGR_STATUS_SUCCESS)
    return;
  for (size_t i = 0; i < count; i++) {
    const char *isa = NULL;
    if (amd_comgr_get_isa_name(i, &isa) != AMD_COMGR_STATUS_SUCCESS || !isa)
      continue;
    const char *name = strrchr(isa, '-');
    name = name ? name + 1 : isa;
    tj__add_arch(name, strcspn(name, ":"));
  }
}

/* hipRTC is inside libamdhip64 on ROCm 5.2 (libhiprtc on later ROCm);
 * comgr links libLLVM (and, in some packagings, libclang-cpp). */
const char *const *tj__platform_library_prefixes(void)
{
  static const char *const prefixes[] = {"libamdhip64.so", "libhiprtc",
                                         "libamd_comgr.so", "libLLVM",
                                         "libclang-cpp.so", NULL};
  return prefixes;
}

/* hipRTC dlopens comgr by the soname this library links, so every
 * compiler library is loaded by the time a runtime opens. */
void tj__platform_lazy_identities(tj__lib_scan *scan) { (void)scan; }

int tj__compiler_libraries_hold(char *why, size_t whylen)
{
  (void)why, (void)whylen;
  return 1;
}

/* comgr names ISAs "amdgcn-amd-amdhsa--gfx90a"; the arch may carry feature
 * flags after ':' (gfx90a:sramecc+:xnack-).  hipRTC aborts the process on an
 * ISA comgr does not know, so this check must come first. */
/* The target features each processor has, from LLVM's AMDGPU processor
 * table (AMDGPUUsage, "Processors"); comgr 2.4 aborts on a feature its
 * processor lacks (gfx1030:xnack+), checked one by one against it. */
enum { FEAT_XNACK = 1, FEAT_SRAMECC = 2 };

static unsigned processor_features(const char *name, size_t len)
{
  static const struct { const char *name; unsigned features; } table[] = {
    {"gfx801", FEAT_XNACK}, {"gfx810", FEAT_XNACK}, {"gfx900", FEAT_XNACK},
    {"gfx902", FEAT_XNACK}, {"gfx904", FEAT_XNACK},
    {"gfx906", FEAT_XNACK | FEAT_SRAMECC}, {"gfx908", FEAT_XNACK | FEAT_SRAMECC},
    {"gfx909", FEAT_XNACK}, {"gfx90a", FEAT_XNACK | FEAT_SRAMECC},
    {"gfx90c", FEAT_XNACK}, {"gfx940", FEAT_XNACK | FEAT_SRAMECC},
    {"gfx941", FEAT_XNACK | FEAT_SRAMECC}, {"gfx942", FEAT_XNACK | FEAT_SRAMECC},
    {"gfx950", FEAT_XNACK | FEAT_SRAMECC}, {"gfx1010", FEAT_XNACK},
    {"gfx1011", FEAT_XNACK}, {"gfx1012", FEAT_XNACK}, {"gfx1013", FEAT_XNACK},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strlen(table[i].name) == len && strncmp(table[i].name, name, len) == 0)
      return table[i].features;
  return 0;
}

/* Parse the ":feature+" list after the processor into *sign (one of '+',
 * '-' or 0 per feature).  The target-ID grammar is LLVM's: each feature at
 * most once, each with its sign; an empty list, an empty feature, an
 * unsigned one or one the processor lacks would reach comgr and abort. */
static int parse_features(const char *arch, size_t base, char sign[2],
                          char *why, size_t whylen)
{
  static const char *const names[2] = {"xnack", "sramecc"};
  sign[0] = sign[1] = 0;
  const char *p = arch + base;
  unsigned have = processor_features(arch, base);
  while (*p == ':') {
    const char *f = ++p;
    size_t n = strcspn(f, ":");
    int k = -1;
    for (int i = 0; i < 2; i++)
      if (n == strlen(names[i]) + 1 && strncmp(f, names[i], n - 1) == 0 &&
          (f[n - 1] == '+' || f[n - 1] == '-'))
        k = i;
    if (k < 0 || sign[k] || !(have & (1u << k))) {
      snprintf(why, whylen, "arch '%s': feature '%.*s' is %s", arch, (int)n, f,
               k < 0 ? "not one of xnack+, xnack-, sramecc+, sramecc-"
               : sign[k] ? "given twice" : "not one this processor has");
      return TJ_EARCH;
    }
    sign[k] = f[n - 1];
    p = f + n;
  }
  return TJ_OK;
}

int tj__arch_canonical(const char *arch, char *out, size_t outlen)
{
  char sign[2], why[256];
  size_t base = strcspn(arch, ":");
  if (parse_features(arch, base, sign, why, sizeof why) != TJ_OK)
    return TJ_EARCH;
  int n = snprintf(out, outlen, "%.*s%s%s%s%s", (int)base, arch,
                   sign[1] ? ":sramecc" : "", sign[1] ? (sign[1] == '+' ? "+" : "-") : "",
                   sign[0] ? ":xnack" : "", sign[0] ? (sign[0] == '+' ? "+" : "-") : "");
  return n < 0 || (size_t)n >= outlen ? TJ_ERANGE : TJ_OK;
}

int tj__arch_check(const char *arch, char *why, size_t whylen)
{
  int rc = tj__arch_name_wellformed(arch, why, whylen);
  if (rc != TJ_OK)
    return rc;
  size_t base = strcspn(arch, ":"), count = 0;
  char sign[2];
  if (amd_comgr_get_isa_count(&count) != AMD_COMGR_STATUS_SUCCESS)
    count = 0;
  for (size_t i = 0; i < count; i++) {
    const char *isa = NULL;
    if (amd_comgr_get_isa_name(i, &isa) != AMD_COMGR_STATUS_SUCCESS || !isa)
      continue;
    const char *name = strrchr(isa, '-');
    name = name ? name + 1 : isa;
    if (strlen(name) == base && strncmp(name, arch, base) == 0)
      return parse_features(arch, base, sign, why, whylen);
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
  /* hipRTC adds `-include hiprtc_runtime.h`, which clang looks for in the
   * working directory first: a file of that name in the host program's
   * directory would replace the runtime header of every kernel, under the
   * same key.  Only root can write "/". */
  opts[2] = "-working-directory=/";
  return 3;
}

/* clang 15 (comgr 2.4) and later; what each does is in clang's
 * command-line reference.  Not here, so refused: -mllvm, -Xclang, -v,
 * -###, --help, --version, @file, -o, -save-temps, -M*, -ftime-trace,
 * -fplugin, -Wl,/-Wp,/-Wa, (their comma), -include and the header options
 * headers.c does not follow (files outside the key), -march, -mcpu, -target,
 * --offload-arch, -mxnack, -msramecc (the arch is the runtime's), -x, -E,
 * -S, -c, -fgpu-rdc, -nogpulib, --rocm-path and the other path options,
 * -working-directory (the library sets it), and input files. */
static const tj__option_rule amd_option_rules[] = {
  {"-D", TJ__OPT_JOINED_OR_SEP, TJ__VAL_MACRO, NULL},
  {"-U", TJ__OPT_JOINED_OR_SEP, TJ__VAL_MACRO, NULL},
  {"-I", TJ__OPT_JOINED_OR_SEP, TJ__VAL_ABSDIR, NULL},
  /* Every header these can reach is hashed into the key (headers.c). */
  {"-isystem", TJ__OPT_JOINED_OR_SEP, TJ__VAL_ABSDIR, NULL},
  {"-iquote", TJ__OPT_JOINED_OR_SEP, TJ__VAL_ABSDIR, NULL},
  {"-idirafter", TJ__OPT_JOINED_OR_SEP, TJ__VAL_ABSDIR, NULL},
  {"-O0", TJ__OPT_FLAG, 0, NULL}, {"-O1", TJ__OPT_FLAG, 0, NULL},
  {"-O2", TJ__OPT_FLAG, 0, NULL}, {"-O3", TJ__OPT_FLAG, 0, NULL},
  {"-Os", TJ__OPT_FLAG, 0, NULL}, {"-Oz", TJ__OPT_FLAG, 0, NULL},
  {"-std", TJ__OPT_EQ, TJ__VAL_LIST,
   "c++11|c++14|c++17|c++20|c++2a|c++2b|gnu++11|gnu++14|gnu++17|gnu++20"},
  {"-w", TJ__OPT_FLAG, 0, NULL}, {"-pedantic", TJ__OPT_FLAG, 0, NULL},
  {"-W", TJ__OPT_PREFIX, TJ__VAL_WARNING, NULL},
  {"-g", TJ__OPT_FLAG, 0, NULL}, {"-g0", TJ__OPT_FLAG, 0, NULL},
  {"-gline-tables-only", TJ__OPT_FLAG, 0, NULL},
#define TJ__F(name) {"-f" name, TJ__OPT_FLAG, 0, NULL}, {"-fno-" name, TJ__OPT_FLAG, 0, NULL}
  TJ__F("fast-math"), TJ__F("finite-math-only"), TJ__F("unsafe-math-optimizations"),
  TJ__F("associative-math"), TJ__F("reciprocal-math"), TJ__F("signed-zeros"),
  TJ__F("trapping-math"), TJ__F("math-errno"), TJ__F("honor-nans"),
  TJ__F("honor-infinities"), TJ__F("approx-func"),
  TJ__F("gpu-flush-denormals-to-zero"), TJ__F("cuda-flush-denormals-to-zero"),
  TJ__F("hip-fp32-correctly-rounded-divide-sqrt"), TJ__F("unroll-loops"),
  TJ__F("vectorize"), TJ__F("slp-vectorize"), TJ__F("strict-aliasing"),
  TJ__F("wrapv"), TJ__F("builtin"), TJ__F("color-diagnostics"),
#undef TJ__F
  {"-fno-gpu-rdc", TJ__OPT_FLAG, 0, NULL},
  {"-ffp-contract", TJ__OPT_EQ, TJ__VAL_LIST, "fast|on|off|fast-honor-pragmas"},
  {"-ffp-model", TJ__OPT_EQ, TJ__VAL_LIST, "fast|precise|strict"},
  {"-fdenormal-fp-math", TJ__OPT_EQ, TJ__VAL_LIST, "ieee|preserve-sign|positive-zero"},
  {"-fconstexpr-depth", TJ__OPT_EQ, TJ__VAL_NUMBER, NULL},
  {"-fconstexpr-steps", TJ__OPT_EQ, TJ__VAL_NUMBER, NULL},
  {"-ftemplate-depth", TJ__OPT_EQ, TJ__VAL_NUMBER, NULL},
  {"-fbracket-depth", TJ__OPT_EQ, TJ__VAL_NUMBER, NULL},
  {"-ferror-limit", TJ__OPT_EQ, TJ__VAL_NUMBER, NULL},
  {"--gpu-max-threads-per-block", TJ__OPT_EQ, TJ__VAL_NUMBER, NULL},
  {"-mcode-object-version", TJ__OPT_EQ, TJ__VAL_LIST, "4|5"},
  {"-mcumode", TJ__OPT_FLAG, 0, NULL}, {"-mno-cumode", TJ__OPT_FLAG, 0, NULL},
  {"-mwavefrontsize64", TJ__OPT_FLAG, 0, NULL},
  {"-mno-wavefrontsize64", TJ__OPT_FLAG, 0, NULL},
  {"-munsafe-fp-atomics", TJ__OPT_FLAG, 0, NULL},
  {"-mno-unsafe-fp-atomics", TJ__OPT_FLAG, 0, NULL},
  {"-mtgsplit", TJ__OPT_FLAG, 0, NULL}, {"-mno-tgsplit", TJ__OPT_FLAG, 0, NULL},
};

const tj__option_rule *tj__option_rules(size_t *n)
{
  *n = sizeof amd_option_rules / sizeof amd_option_rules[0];
  return amd_option_rules;
}

/*
 * What comgr 2.4 (its clang and libLLVM) and hipRTC 5.2 read from the
 * environment (strings on the libraries, then each tried with a header
 * directory, a bogus directory and a value, compiling the same kernel):
 *   CPATH, CPLUS_INCLUDE_PATH  change which header is found: refused, since
 *       the headers they reach are not in the key (pass -I instead).
 *   CCC_OVERRIDE_OPTIONS, AMD_OCL_BUILD_OPTIONS(_APPEND),
 *   HIPRTC_COMPILE_OPTIONS_APPEND  add options behind the allowlist (read
 *       by the clang driver program, ROCclr, later hipRTC): refused.
 *   RC_DEBUG_OPTIONS  records the command line in -g debug info: keyed.
 *   HIP_PATH, ROCM_PATH, HIP_DEVICE_LIB_PATH, LLVM_PATH  not read by comgr
 *       2.4 (a bogus directory changes nothing), keyed in case a later comgr
 *       does.
 *   C_INCLUDE_PATH, OBJC_INCLUDE_PATH, OBJCPLUS_INCLUDE_PATH  apply to C
 *       and Objective-C only, not HIP (shown: no change).
 *   COMPILER_PATH, LIBRARY_PATH, CLANG_MODULE_CACHE_PATH, SDKROOT,
 *   LLVM_OVERRIDE_PRODUCER, RC_DEBUG_PREFIX_MAP, TMPDIR, TMP, TEMP,
 *   AMD_COMGR_SAVE_TEMPS, AMD_COMGR_REDIRECT_LOGS, AMD_COMGR_EMIT_VERBOSE_LOGS,
 *   AMD_COMGR_TIME_STATISTICS, GPU_ENABLE_WAVE32_MODE, GPU_ENABLE_WGP_MODE,
 *   AMD_LOG_LEVEL  logs, temporaries, tools the in-process compile does not
 *       run: the code object is the same (shown).
 */
static const tj__env_rule amd_env_rules[] = {
  {"CPATH", 1, "headers found through it are not in the cache key (pass the "
               "directories with -I)"},
  {"CPLUS_INCLUDE_PATH", 1, "headers found through it are not in the cache "
                            "key (pass the directories with -I)"},
  {"CCC_OVERRIDE_OPTIONS", 1, "it edits the compiler's options"},
  {"AMD_OCL_BUILD_OPTIONS", 1, "it adds compiler options"},
  {"AMD_OCL_BUILD_OPTIONS_APPEND", 1, "it adds compiler options"},
  {"HIPRTC_COMPILE_OPTIONS_APPEND", 1, "it adds compiler options"},
  {"RC_DEBUG_OPTIONS", 0, NULL},
  {"HIP_PATH", 0, NULL},
  {"ROCM_PATH", 0, NULL},
  {"HIP_DEVICE_LIB_PATH", 0, NULL},
  {"LLVM_PATH", 0, NULL},
};

const tj__env_rule *tj__platform_env_rules(size_t *n)
{
  *n = sizeof amd_env_rules / sizeof amd_env_rules[0];
  return amd_env_rules;
}

int tj__launch(void *function, const unsigned grid[3], const unsigned block[3],
               unsigned shared, void *stream, void **args, int early)
{
  (void)early; /* no programmatic dependent launch on AMD */
  return hipModuleLaunchKernel((hipFunction_t)function, grid[0], grid[1],
                               grid[2], block[0], block[1], block[2], shared,
                               (hipStream_t)stream, args, NULL) == hipSuccess
             ? TJ_OK : TJ_EDEVICE;
}
