/*
 * hip_platform.c: the platform services of hip_platform.h, one section per
 * platform.  Nothing outside this pair knows which platform it is.
 */
#include "hip_platform.h"
#include "elfview.h"
#include "tokitai-jit.h"

#include <ctype.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

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


/* ------------------------------------------- compiler library identity */

/*
 * The version numbers the compilers report do not change with a point
 * release (Debian rebuilds, a new libLLVM under the same comgr), so the
 * fingerprint also names the libraries themselves: for each loaded object
 * whose file name starts with one of the platform's prefixes, its GNU
 * build id, else the size and mtime of its file.  Sorted by name, hashed,
 * computed once per process: the libraries cannot change under a running
 * process.
 */
#define TJ__LIBS_MAX 16

typedef struct lib_identity {
  char name[64];
  char id[96];
} lib_identity;

typedef struct lib_scan {
  const char *const *prefixes;
  lib_identity libs[TJ__LIBS_MAX];
  int n;
} lib_scan;

static const char *base_name(const char *path)
{
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* The GNU build id among the notes in [p, end), as hex. */
static int note_build_id(const unsigned char *p, const unsigned char *end,
                         char *out, size_t outlen)
{
  tj__elf_note n;
  while (tj__elf_note_next(&p, end, &n))
    if (n.type == NT_GNU_BUILD_ID && n.namesz == 4 &&
        memcmp(n.name, "GNU", 4) == 0 && n.descsz > 0 && 2 * n.descsz < outlen) {
      for (size_t j = 0; j < n.descsz; j++)
        snprintf(out + 2 * j, 3, "%02x", n.desc[j]);
      return 1;
    }
  return 0;
}

/* The GNU build id of a loaded object, as hex, from its PT_NOTE segments. */
static int build_id(const struct dl_phdr_info *info, char *out, size_t outlen)
{
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
    if (ph->p_type == PT_NOTE && note_build_id(p, p + ph->p_memsz, out, outlen))
      return 1;
  }
  return 0;
}

static void file_identity(const char *path, char *out, size_t outlen)
{
  struct stat st;
  if (stat(path, &st) == 0)
    snprintf(out, outlen, "size %lld mtime %lld.%09ld", (long long)st.st_size,
             (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
  else
    snprintf(out, outlen, "unknown");
}

static int scan_library(struct dl_phdr_info *info, size_t size, void *ctx)
{
  (void)size;
  lib_scan *scan = ctx;
  const char *name = info->dlpi_name ? base_name(info->dlpi_name) : "";
  int match = 0;
  for (const char *const *p = scan->prefixes; *p && !match; p++)
    match = strncmp(name, *p, strlen(*p)) == 0;
  if (!match || scan->n >= TJ__LIBS_MAX)
    return 0;
  lib_identity *lib = &scan->libs[scan->n++];
  snprintf(lib->name, sizeof lib->name, "%s", name);
  if (!build_id(info, lib->id, sizeof lib->id))
    file_identity(info->dlpi_name, lib->id, sizeof lib->id);
  return 0;
}

static int by_name(const void *a, const void *b)
{
  return strcmp(((const lib_identity *)a)->name, ((const lib_identity *)b)->name);
}

static void platform_lazy_identities(lib_scan *scan);
static const char *const *platform_library_prefixes(void);

static char libs_digest[24];
static pthread_once_t libs_once = PTHREAD_ONCE_INIT;

static void compute_libs_digest(void)
{
  lib_scan scan = {platform_library_prefixes(), {{{0}, {0}}}, 0};
  dl_iterate_phdr(scan_library, &scan);
  platform_lazy_identities(&scan);
  qsort(scan.libs, (size_t)scan.n, sizeof scan.libs[0], by_name);
  XXH64_hash_t h = XXH3_64bits(scan.libs, (size_t)scan.n * sizeof scan.libs[0]);
  snprintf(libs_digest, sizeof libs_digest, "b:%016llx", (unsigned long long)h);
}

/* "b:" and 16 hex digits; process-wide, computed once. */
static const char *compiler_libraries_digest(void)
{
  pthread_once(&libs_once, compute_libs_digest);
  return libs_digest;
}

/* ------------------------------------------- the compilers' environment */

/* A variable the compiler reads, and what the library does about it. */
typedef struct env_rule {
  const char *name;
  int refuse;         /* 1: refuse to compile while it is set and not empty */
  const char *why;    /* for the message */
} env_rule;

static const env_rule *platform_env_rules(size_t *n);

int tj__compiler_environment(char *buf, size_t len, char *why, size_t whylen)
{
  size_t n = 0, used = 0;
  const env_rule *rules = platform_env_rules(&n);
  buf[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    const char *v = getenv(rules[i].name);
    if (!v || !*v)
      continue;
    if (rules[i].refuse) {
      snprintf(why, whylen, "%s is set: %s; unset it to compile", rules[i].name,
               rules[i].why);
      return TJ_EINVAL;
    }
    /* The value's length first: a value holding "\nNAME=" cannot pass
     * for a second variable. */
    int w = snprintf(buf + used, len - used, "%s=%zu:%s\n", rules[i].name,
                     strlen(v), v);
    if (w < 0 || (size_t)w >= len - used) {
      snprintf(why, whylen, "%s is too long (over %zu bytes in all)",
               rules[i].name, len);
      return TJ_EINVAL;
    }
    used += (size_t)w;
  }
  return TJ_OK;
}

/* ------------------------------------------------ supplied headers */

void tj__platform_headers(int *count, const char *const **names,
                          const char *const **contents)
{
  *count = tj__platform_header_count;
  *names = tj__platform_header_names;
  *contents = tj__platform_header_contents;
}

/* Once per process, like the tables it is computed from. */
static char headers_digest[33];
static pthread_once_t headers_digest_once = PTHREAD_ONCE_INIT;

/* A length-prefixed field, so that no name can run into its contents. */
static void digest_field(XXH3_state_t *state, const char *s)
{
  uint64_t len = strlen(s);
  unsigned char prefix[8];
  for (int i = 0; i < 8; i++)
    prefix[i] = (unsigned char)(len >> (8 * i));
  XXH3_128bits_update(state, prefix, sizeof prefix);
  XXH3_128bits_update(state, s, (size_t)len);
}

static void compute_headers_digest(void)
{
  static const char digits[] = "0123456789abcdef";
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_128bits_reset(&state);
  digest_field(&state, "tokitai-jit platform headers v1");
  for (int i = 0; i < tj__platform_header_count; i++) {
    digest_field(&state, tj__platform_header_names[i]);
    digest_field(&state, tj__platform_header_contents[i]);
  }
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&state));
  for (size_t i = 0; i < sizeof c.digest; i++) {
    headers_digest[2 * i] = digits[c.digest[i] >> 4];
    headers_digest[2 * i + 1] = digits[c.digest[i] & 15];
  }
  headers_digest[32] = '\0';
}

const char *tj__platform_headers_digest(void)
{
  pthread_once(&headers_digest_once, compute_headers_digest);
  return headers_digest;
}

/* ------------------------------------------- the archs the compiler knows */

/* Filled once by the platform's list_archs through add_arch: the processor
 * names without feature flags, each once. */
#define TJ__ARCHS_MAX 256
static char arch_store[TJ__ARCHS_MAX][32];
static const char *arch_names[TJ__ARCHS_MAX];
static size_t arch_count;
static pthread_once_t archs_once = PTHREAD_ONCE_INIT;

static void add_arch(const char *name, size_t len)
{
  if (len == 0 || len >= sizeof arch_store[0] || arch_count == TJ__ARCHS_MAX)
    return;
  for (size_t i = 0; i < arch_count; i++)
    if (strlen(arch_names[i]) == len && strncmp(arch_names[i], name, len) == 0)
      return;
  memcpy(arch_store[arch_count], name, len);
  arch_store[arch_count][len] = '\0';
  arch_names[arch_count] = arch_store[arch_count];
  arch_count++;
}

static void list_archs(void);

size_t tj__compiler_archs(const char *const **names)
{
  pthread_once(&archs_once, list_archs);
  *names = arch_names;
  return arch_count;
}

#if defined(TJ_PLATFORM_AMD)
#include <dlfcn.h>
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
int tj__tensor_map_f16(void *map, const void *base, uint64_t rows,
                       uint64_t cols, uint64_t ld, uint32_t box_rows,
                       uint32_t box_cols)
{
  (void)map, (void)base, (void)rows, (void)cols, (void)ld, (void)box_rows,
      (void)box_cols;
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
  const char *name = real ? base_name(real) : "";
  int ok = sscanf(name, "libamdhip64.so.%d.%d.%d%n", &maj, &min, &patch,
                  &end) == 3 && name[end] == '\0' && maj > 0 && maj < 100 &&
           min >= 0 && min < 100 && patch >= 0 && patch < 100000;
  free(real);
  return ok ? maj * 10000000 + min * 100000 + patch : 0;
}

static void compute_fingerprint(char *buf, size_t len)
{
  int rmaj = 0, rmin = 0, hip = 0;
  size_t cmaj = 0, cmin = 0;
  hiprtcVersion(&rmaj, &rmin);
  amd_comgr_get_version(&cmaj, &cmin);
  /* The loaded library's version, not HIP_VERSION (the headers this was
   * built with): 5.2 and 5.7 share the soname, and hipRTC says 9.0 in
   * both.  Needs no GPU. */
  if (!(hip = hip_version_from_file()) && hipRuntimeGetVersion(&hip) != hipSuccess)
    hip = HIP_VERSION;
  snprintf(buf, len, "hiprtc %d.%d, comgr %zu.%zu (HIP %d) %s", rmaj, rmin,
           cmaj, cmin, hip, compiler_libraries_digest());
}

/* comgr names its ISAs "amdgcn-amd-amdhsa--gfx90a". */
static void list_archs(void)
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
    add_arch(name, strcspn(name, ":"));
  }
}

/* hipRTC is inside libamdhip64 on ROCm 5.2 (libhiprtc on later ROCm);
 * comgr links libLLVM (and, in some packagings, libclang-cpp). */
static const char *const *platform_library_prefixes(void)
{
  static const char *const prefixes[] = {"libamdhip64.so", "libhiprtc",
                                         "libamd_comgr.so", "libLLVM",
                                         "libclang-cpp.so", NULL};
  return prefixes;
}

/* hipRTC dlopens comgr by the soname this library links, so every
 * compiler library is loaded by the time a runtime opens. */
static void platform_lazy_identities(lib_scan *scan) { (void)scan; }

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
  int rc = arch_name_wellformed(arch, why, whylen);
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
static const env_rule amd_env_rules[] = {
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

static const env_rule *platform_env_rules(size_t *n)
{
  *n = sizeof amd_env_rules / sizeof amd_env_rules[0];
  return amd_env_rules;
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

int tj__tensor_map_f16(void *map, const void *base, uint64_t rows,
                       uint64_t cols, uint64_t ld, uint32_t box_rows,
                       uint32_t box_cols)
{
  _Static_assert(sizeof(CUtensorMap) == TJ__TENSOR_MAP_BYTES,
                 "CUtensorMap is 128 bytes");
  if (!tj__hopper_driver())
    return TJ_EDEVICE;
  const cuuint64_t dims[2] = {cols, rows}, strides[1] = {ld * 2};
  const cuuint32_t box[2] = {box_cols, box_rows}, step[2] = {1, 1};
  return TJ__CU(cuTensorMapEncodeTiled(
             (CUtensorMap *)map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
             (void *)base, dims, strides, box, step,
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

static void compute_fingerprint(char *buf, size_t len)
{
  int maj = 0, min = 0;
  nvrtcVersion(&maj, &min);
  snprintf(buf, len, "nvrtc %d.%d %s", maj, min, compiler_libraries_digest());
}

static const char *const *platform_library_prefixes(void)
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
          found = note_build_id(notes, notes + len, out, outlen);
      }
  }
  close(fd);
  return found;
}

/*
 * NVRTC dlopens libnvrtc-builtins.so.MAJOR.MINOR at its first compile,
 * from beside itself.  Loading it at open to name it cost a warm start
 * more than all the rest (2.6 ms against 0.9 on an H200, tj-bench), so
 * the digest names the file NVRTC will find there, read from disk, and
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

static void platform_lazy_identities(lib_scan *scan)
{
  char path[4096], name[64];
  if (scan->n >= TJ__LIBS_MAX || !builtins_file(path, sizeof path, name, sizeof name))
    return;
  lib_identity *lib = &scan->libs[scan->n++];
  snprintf(lib->name, sizeof lib->name, "%s", name);
  if (!file_build_id(path, lib->id, sizeof lib->id))
    file_identity(path, lib->id, sizeof lib->id);
}

typedef struct loaded_builtins {
  char id[96];
  int found;
} loaded_builtins;

static int find_builtins(struct dl_phdr_info *info, size_t size, void *ctx)
{
  (void)size;
  loaded_builtins *b = ctx;
  const char *name = info->dlpi_name ? base_name(info->dlpi_name) : "";
  if (strncmp(name, "libnvrtc-builtins", 17) != 0)
    return 0;
  if (!build_id(info, b->id, sizeof b->id))
    file_identity(info->dlpi_name, b->id, sizeof b->id);
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
    file_identity(path, want, sizeof want);
  if (strcmp(want, b.id) == 0)
    return 1;
  snprintf(why, whylen, "NVRTC compiled with a %s other than %s, which the "
           "compiler fingerprint names (LD_LIBRARY_PATH?); the code is not "
           "used", name, path);
  return 0;
}

/* NVRTC lists the numbers (90 for sm_90); the a and f forms it also
 * takes (sm_90a) are not listed separately. */
static void list_archs(void)
{
  int count = 0, archs[64];
  if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0 ||
      count > 64 || nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS)
    return;
  for (int i = 0; i < count; i++) {
    char name[16];
    int n = snprintf(name, sizeof name, "sm_%d", archs[i]);
    if (n > 0 && (size_t)n < sizeof name)
      add_arch(name, (size_t)n);
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
  int rc = arch_name_wellformed(arch, why, whylen);
  if (rc != TJ_OK)
    return rc;
  char *end = NULL;
  /* Digits only, no sign or leading zero: strtol alone let sm_+90 and
   * sm_090 through as second spellings that NVRTC then refuses. */
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
static const env_rule nvidia_env_rules[] = {
  {"NVRTC_APPEND_FLAGS", 1, "it adds compiler options"},
  {"EDG_MODULES_PATH", 0, NULL},
  {"CPPCX_INCLUDE_PATH", 0, NULL},
};

static const env_rule *platform_env_rules(size_t *n)
{
  *n = sizeof nvidia_env_rules / sizeof nvidia_env_rules[0];
  return nvidia_env_rules;
}

#endif

/* The loaded libraries cannot change under a process, so their
 * fingerprint is read once: asking HIP its version cost each runtime open
 * about 0.2 M instructions, twice (callgrind, bench/RESULTS.md). */
static pthread_once_t fingerprint_once = PTHREAD_ONCE_INIT;
static char fingerprint[160];

static void read_fingerprint(void)
{
  compute_fingerprint(fingerprint, sizeof fingerprint);
}

int tj__launch(void *function, const unsigned grid[3], const unsigned block[3],
               unsigned shared, void *stream, void **args, int early)
{
#if defined(TJ_PLATFORM_NVIDIA)
  /* Refused (a driver that takes no such launch where this one is going):
   * plainly, as the kernel runs the same either way. */
  if (early && launch_early(function, grid, block, shared, stream, args))
    return TJ_OK;
#else
  (void)early; /* no programmatic dependent launch on AMD */
#endif
  return hipModuleLaunchKernel((hipFunction_t)function, grid[0], grid[1],
                               grid[2], block[0], block[1], block[2], shared,
                               (hipStream_t)stream, args, NULL) == hipSuccess
             ? TJ_OK : TJ_EDEVICE;
}

void tj__compiler_fingerprint(char *buf, size_t len)
{
  pthread_once(&fingerprint_once, read_fingerprint);
  snprintf(buf, len, "%s", fingerprint);
}
