/*
 * hip_platform.h: the one place that knows which GPU platform this build is
 * for.  Everything else in the tree uses the hip* names and the tj__
 * services declared at the bottom.  One file a platform, chosen by the
 * build: amd.h and amd.c, or nvidia.h and nvidia.c; hip_platform.c holds
 * the services both share.
 *
 * amd:    the real ROCm headers; hipRTC emits an AMD GPU ELF.
 * nvidia: <hip/hiprtc.h> maps hipRTC onto NVRTC, which compiles against
 *         CUDA 13; the HIP runtime calls the project uses are mapped onto
 *         the CUDA driver API (nvidia.h), loaded with dlopen at first use,
 *         because Debian's HIP 5.2 nvidia_detail runtime header does not
 *         compile against CUDA 13, and because a machine with the toolkit
 *         but no driver must still be able to compile kernels and read the
 *         cache.
 */
#ifndef TJ_HIP_PLATFORM_H
#define TJ_HIP_PLATFORM_H

#include "config.h"
#include <stddef.h>
#include <stdint.h>

#if defined(TJ_PLATFORM_AMD)
#include "amd.h"
#elif defined(TJ_PLATFORM_NVIDIA)
#include "nvidia.h"
#else
#error "config.h defines neither TJ_PLATFORM_AMD nor TJ_PLATFORM_NVIDIA"
#endif

/* ------------------------------------------------- platform services */

/* The device a runtime uses; ctx is the primary context on NVIDIA, pool
 * the runtime's own stream-ordered memory pool there, made at the first
 * tj__alloc_async (NULL until then, and where the driver has none). */
typedef struct tj__device {
  int ordinal;
  void *ctx;
  void *pool;
} tj__device;

typedef struct tj__device_props {
  char name[256];
  char arch[256];    /* as the compiler wants it: gfx90a:sramecc+:xnack-, sm_90 */
  size_t total_mem;
  int compute_units; /* CUs on AMD, SMs on NVIDIA */
  int clock_khz;     /* peak clock; 0 when the driver does not say, and
                        unless asked for (TJ__QUERY_CLOCK) */
  int memory_clock_khz, memory_bus_bits; /* the memory's peak clock and bus
                        width, under the same terms (the benchmark's
                        peak rate: 2 x clock x width) */
} tj__device_props;

/* Number of visible devices; 0 (and TJ_OK) when there is no driver. */
int tj__device_count(int *count);
/* Initialise the driver and make device `ordinal` current on this thread.
 * On failure writes why into err. */
int tj__device_open(int ordinal, tj__device *dev, char *err, size_t errlen);
int tj__device_make_current(const tj__device *dev);
void tj__device_close(tj__device *dev);
/* what: 0, or TJ__QUERY_CLOCK for the clocks (and bus width) too.  The
 * clocks are asked for only by tj_device_get_info and the benchmark: on
 * NVIDIA, asking at every open makes a runtime's warm start markedly slower
 * (tj-bench's warm start). */
#define TJ__QUERY_CLOCK 1
int tj__device_query(int ordinal, tj__device_props *props, int what);
/* The driver's view of a loaded function (registers, static shared and
 * local memory, most threads per block): what the code object says, as
 * the driver read it.  Fields the driver does not give stay as they were. */
struct tj_kernel_resources;
int tj__function_resources(void *function, struct tj_kernel_resources *out);

/* For the Hopper GEMM (NVIDIA; TJ_EDEVICE on AMD).  tj__tensor_map_16
 * writes into map (TJ__TENSOR_MAP_BYTES, 64-byte aligned) a TMA
 * descriptor of the row-major 16-bit matrix (fp16, or bf16 where bf16 is
 * 1) at base (rows x cols, ld
 * elements from one row to the next) that loads box_rows x box_cols boxes
 * with 128-byte swizzle and zeros outside the matrix; base 16-byte
 * aligned, ld a multiple of 8.  tj__function_shared_limit lets function
 * (a loaded kernel) take up to bytes of dynamic shared memory. */
#define TJ__TENSOR_MAP_BYTES 128
int tj__tensor_map_16(void *map, const void *base, uint64_t rows,
                      uint64_t cols, uint64_t ld, uint32_t box_rows,
                      uint32_t box_cols, int bf16);
/* The same over count such matrices, stride elements from one to the
 * next (a multiple of 8): a 3-D map whose boxes (box_rows x box_cols x
 * 1) never reach from one matrix into the next. */
int tj__tensor_map_16_3d(void *map, const void *base, uint64_t rows,
                         uint64_t cols, uint64_t ld, uint64_t count,
                         uint64_t stride, uint32_t box_rows,
                         uint32_t box_cols, int bf16);
int tj__function_shared_limit(void *function, unsigned bytes);
/* 1 when the driver can build tensor maps (the Hopper GEMM's condition);
 * 0 on AMD and without a driver. */
int tj__hopper_driver(void);
/* Device memory from dev's pool, ordered on stream (NULL: the default
 * stream): usable by work queued on it after the call, back in the pool
 * once the work queued before tj__free_async is done.  The pool keeps up
 * to TJ__POOL_KEEP bytes between calls (a fresh mapping at each call
 * would cost more than a small GEMM) and is destroyed with the device.
 * TJ_EDEVICE on AMD and where the driver lacks stream-ordered
 * allocation; callers then take another way. */
#define TJ__POOL_KEEP ((uint64_t)256 << 20)
int tj__alloc_async(tj__device *dev, void **p, size_t bytes,
                    void *stream);
int tj__free_async(void *p, void *stream);
/* bytes of device memory at p set to value, ordered on stream (NULL: the
 * default stream).  TJ_EDEVICE where the driver cannot. */
int tj__memset_async(void *p, int value, size_t bytes, void *stream);
/* Launch function as hipModuleLaunchKernel does, and where early is 1 so
 * that it may start before the kernel ahead of it on the stream has ended
 * (programmatic dependent launch): the kernel must then touch no memory
 * that kernel writes before its griddepcontrol.wait, which holds it until
 * that kernel is done and its writes show.  A plain launch where the
 * driver cannot (AMD; a driver without cuLaunchKernelEx). */
int tj__launch(void *function, const unsigned grid[3], const unsigned block[3],
               unsigned shared, void *stream, void **args, int early);
/* Whether work queued on stream (NULL: the default stream) is being
 * captured into a graph, where it would be recorded and not run (so it
 * cannot be timed): 1 captured, 0 not, -1 when the driver cannot say. */
int tj__stream_capturing(void *stream);

/* "hiprtc 9.0, comgr 2.4 (HIP 50221153) b:1a2b3c4d5e6f7a8b" or
 * "nvrtc 13.0 b:...": the versions, then a digest of the compiler
 * libraries actually loaded (their GNU build ids, else size and mtime of
 * the file), so that a point update of any of them changes every key.
 * The digest is computed once per process. */
void tj__compiler_fingerprint(char *buf, size_t len);
/* 1 when the compiler libraries loaded now are the ones the fingerprint
 * names (a library the compiler loads late, named from its file at open,
 * may come from elsewhere); else 0 and a sentence in why.  Called after
 * each compile, before its code is used or stored. */
int tj__compiler_libraries_hold(char *why, size_t whylen);

/* The processors the installed compiler can target, without feature
 * flags ("gfx90a", "sm_90"), each once, in the compiler's order.  Listed
 * once per process; static storage.  Returns the count. */
size_t tj__compiler_archs(const char *const **names);

/* TJ_OK when the installed compiler can target arch; otherwise TJ_EARCH
 * (or TJ_EINVAL for a malformed name) and a sentence in why.  On AMD the
 * feature list after the processor is checked too: sramecc and xnack,
 * each at most once, each with + or - (comgr aborts on anything else). */
int tj__arch_check(const char *arch, char *why, size_t whylen);
/* The canonical spelling of an arch that passed tj__arch_check: on AMD the
 * features in LLVM's order (sramecc before xnack), so that one target has
 * one key.  TJ_ERANGE when out is too small. */
int tj__arch_canonical(const char *arch, char *out, size_t outlen);

/* The options the platform's compiler documents and that cannot make it
 * abort, exit(), write or read files outside the key, or retarget the
 * code: an allowlist, read by tj__options_check (options.c). */
enum tj__option_form {
  TJ__OPT_FLAG,            /* exactly name */
  TJ__OPT_JOINED_OR_SEP,   /* name+value, or name then value: -DX, -D X */
  TJ__OPT_EQ,              /* name=value */
  TJ__OPT_EQ_OR_SEP,       /* name=value, or name then value */
  TJ__OPT_PREFIX           /* name+rest, rest checked as a value: -Wfoo */
};
enum tj__option_value {
  TJ__VAL_NONE,
  TJ__VAL_MACRO,   /* a macro definition: not empty, not starting with -
                    * or @ (an option or a response file to the compiler) */
  TJ__VAL_ABSDIR,  /* an absolute directory (a relative one would depend on
                    * the working directory, which is not in the key) */
  TJ__VAL_NUMBER,  /* decimal digits */
  TJ__VAL_NUMLIST, /* decimal numbers separated by commas */
  TJ__VAL_LIST,    /* one of the '|'-separated words in values */
  TJ__VAL_WARNING  /* a warning name: [A-Za-z0-9_+=.-], no ',' (-Wl,) */
};
typedef struct tj__option_rule {
  const char *name;
  unsigned char form;   /* enum tj__option_form */
  unsigned char value;  /* enum tj__option_value */
  const char *values;   /* TJ__VAL_LIST: "true|false" */
} tj__option_rule;
/* The platform's rules; *n gets their count.  Static storage. */
const tj__option_rule *tj__option_rules(size_t *n);

/*
 * The part of the environment that reaches the compiler, as a canonical
 * string "NAME=length:value\n..." of the variables that can change the code (in
 * a fixed order; only those set), for the key.  Returns TJ_OK, or TJ_EINVAL
 * with a sentence in why when a variable is set that the library refuses
 * to compile under (one that injects options or headers the key cannot
 * see).  The lists and the reasons are in amd.c and nvidia.c.
 */
int tj__compiler_environment(char *buf, size_t len, char *why, size_t whylen);

/* The options every compile gets for arch, written as pointers into store.
 * Returns how many (at most TJ__MAX_BASE_OPTIONS). */
#define TJ__MAX_BASE_OPTIONS 8
int tj__base_options(const char *arch, char *store, size_t storelen,
                     const char **opts);

/* The headers this platform supplies in memory to every compile.  On
 * NVIDIA: the HIP device headers (hip/hip_runtime.h, hip/hip_fp16.h,
 * hip/hip_runtime_api.h, hip/hip_common.h) mapped onto CUDA, from
 * src/platform/hip_nvidia.  On AMD, where hipRTC brings its own copy of
 * HIP's headers: the same four names, putting back the macros that copy
 * lost (hipThreadIdx_x, HIP_DYNAMIC_SHARED, __HIP_PLATFORM_AMD__, ...) and
 * standing in for the installed ones, which clash with it under hipRTC 5.2
 * (src/platform/hip_amd/hip/hip_common.h says how).  Static storage. */
void tj__platform_headers(int *count, const char *const **names,
                          const char *const **contents);
/* XXH3-128 hex of those headers' names and contents, for the key (32 hex
 * + NUL).  Computed once per process; static storage. */
const char *tj__platform_headers_digest(void);
/* The tables behind tj__platform_headers, written by
 * build-aux/embed-headers.sh into src/platform/platform_headers_embedded.c. */
extern const char *const tj__platform_header_names[];
extern const char *const tj__platform_header_contents[];
extern const int tj__platform_header_count;

#endif /* TJ_HIP_PLATFORM_H */
