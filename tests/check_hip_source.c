/* check_hip_source.c: HIP source as people write it compiles on this
 * build's platform, no GPU needed: the kernels of tests/hip for TEST_ARCH
 * (gfx90a on amd, sm_90 on nvidia) to a GPU ELF that defines each entry;
 * every spelling of the HIP includes and the device API the platform
 * headers promise; and the headers' digest is part of the key. */
#include "testutil.h"
#include "internal.h"
#include "hip_sources.h"

#if defined(TJ_PLATFORM_NVIDIA)
#define EXPECT_OPTION "-DTJ_EXPECT_NVIDIA=1"
#else
#define EXPECT_OPTION "-DTJ_EXPECT_AMD=1"
#endif

/* Compile source's entry on rt, failing the test with the compiler's log. */
static tj_kernel *compile_ok(tj_runtime *rt, const char *what,
                             const char *source, const char *entry,
                             const char *options, tj_kernel_info *info)
{
  tj_kernel *k = NULL;
  int rc = tj_kernel_compile(rt, source, entry, options, &k);
  /* The log cut short: Check exits on a message over its limit. */
  ck_assert_msg(rc == TJ_OK, "%s (%s) for %s: %s: %.2000s", what, entry,
                TEST_ARCH, tj_strerror(rc), tj_errmsg(rt));
  ck_assert_int_eq(tj_kernel_get_info(k, info), TJ_OK);
  return k;
}

static void assert_gpu_elf(const tj_kernel_info *info, const char *what)
{
  const Elf64_Ehdr *eh = info->code;
  ck_assert_uint_ge(info->code_size, sizeof *eh);
  ck_assert_msg(memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0, "%s: not an ELF", what);
  ck_assert_msg(eh->e_machine == TEST_ELF_MACHINE, "%s: ELF machine %d, want %d",
                what, eh->e_machine, TEST_ELF_MACHINE);
}

START_TEST(each_hip_kernel_compiles_to_gpu_elf)
{
  const hip_entry *e = &hip_entries[_i];
  char *src = hip_source_read(e->file);
  ck_assert_msg(strncmp(src, "#include \"hip/hip_runtime.h\"\n", 29) == 0,
                "%s does not start as HIP code does", e->file);
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_kernel_info info;
  tj_kernel *k = compile_ok(rt, e->file, src, e->entry, NULL, &info);
  ck_assert_int_eq(info.origin, TJ_FROM_COMPILER);
  assert_gpu_elf(&info, e->file);
  ck_assert_msg(test_elf_defines(info.code, info.code_size, e->entry, 0),
                "%s: %s is not defined in its code object", e->file, e->entry);
  ck_assert_ptr_null(tj_kernel_function(k)); /* compile only */
  tj_runtime_close(rt);
  free(src);
}
END_TEST

/* The templated __global__ axpy<T> is instantiated in the code under its
 * mangled name.  TODO(merge): when name expressions land, compile
 * "axpy<float>" and "axpy<double>" as entries here and check the lowered
 * names against these. */
START_TEST(template_kernels_are_instantiated)
{
  char *src = hip_source_read("saxpy.hip");
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_kernel_info info;
  compile_ok(rt, "saxpy.hip", src, "saxpy_f32", NULL, &info);
  ck_assert(test_elf_defines(info.code, info.code_size, "_Z4axpyIfEv", 1));
  ck_assert(test_elf_defines(info.code, info.code_size, "_Z4axpyIdEv", 1));
  ck_assert(!test_elf_defines(info.code, info.code_size, "_Z4axpyIiEv", 1));
  tj_runtime_close(rt);
  free(src);
}
END_TEST

/* Every include spelling, and each macro and function the platform
 * headers promise; an #error names what is missing. */
static const char api_source[] =
    "#include \"hip/hip_runtime.h\"\n"
    "#include <hip/hip_runtime.h>\n"
    "#include <hip/hip_fp16.h>\n"
    "#include <hip/hip_runtime_api.h>\n"
    "#include \"hip/hip_fp16.h\"\n"
    "#if defined(TJ_EXPECT_NVIDIA)\n"
    "#if !defined(__HIP_PLATFORM_NVIDIA__) || !defined(__HIP_PLATFORM_NVCC__)\n"
    "#error __HIP_PLATFORM_NVIDIA__ or __HIP_PLATFORM_NVCC__ is not defined\n"
    "#endif\n"
    "#if defined(__HIP_PLATFORM_AMD__) || defined(__HIP_PLATFORM_HCC__)\n"
    "#error __HIP_PLATFORM_AMD__ is defined on nvidia\n"
    "#endif\n"
    "#elif defined(TJ_EXPECT_AMD)\n"
    "#if !defined(__HIP_PLATFORM_AMD__) || !defined(__HIP_PLATFORM_HCC__)\n"
    "#error __HIP_PLATFORM_AMD__ or __HIP_PLATFORM_HCC__ is not defined\n"
    "#endif\n"
    "#if defined(__HIP_PLATFORM_NVIDIA__) || defined(__HIP_PLATFORM_NVCC__)\n"
    "#error __HIP_PLATFORM_NVIDIA__ is defined on amd\n"
    "#endif\n"
    "#else\n"
    "#error the test passes no platform\n"
    "#endif\n"
    "#if !defined(__HIPCC_RTC__) || !defined(__HIPCC__)\n"
    "#error __HIPCC_RTC__ or __HIPCC__ is not defined\n"
    "#endif\n"
    "#if !defined(__HIP_DEVICE_COMPILE__) || !__HIP_ARCH_HAS_WARP_SHUFFLE__\n"
    "#error __HIP_DEVICE_COMPILE__ or __HIP_ARCH_HAS_WARP_SHUFFLE__ is not set\n"
    "#endif\n"
    "#if !defined(HIP_DYNAMIC_SHARED) || !defined(HIP_KERNEL_NAME)\n"
    "#error HIP_DYNAMIC_SHARED or HIP_KERNEL_NAME is not defined\n"
    "#endif\n"
    "template <typename T> __device__ T twice(T v) { return v + v; }\n"
    "extern \"C\" __global__ void __launch_bounds__(128, 2)\n"
    "    api(float *f, double *d, int *i, unsigned *u, long long *ll,\n"
    "        unsigned long long *ull, __half *h)\n"
    "{\n"
    "  HIP_DYNAMIC_SHARED(float, dyn)\n"
    "  __shared__ int fixed[128];\n"
    "  unsigned t = hipThreadIdx_x + hipThreadIdx_y + hipThreadIdx_z;\n"
    "  unsigned b = hipBlockIdx_x + hipBlockIdx_y + hipBlockIdx_z;\n"
    "  unsigned dim = hipBlockDim_x * hipBlockDim_y * hipBlockDim_z;\n"
    "  unsigned grid = hipGridDim_x * hipGridDim_y * hipGridDim_z;\n"
    "  dyn[t] = f[t];\n"
    "  fixed[t % 128] = i[t];\n"
    "  __syncthreads();\n"
    "  f[t] = __shfl_down(dyn[t], 1) + __shfl_down(f[t], 2, 16) +\n"
    "         __shfl_up(f[t], 1, 8) + __shfl_xor(f[t], 4) + __shfl(f[t], 0, 32);\n"
    "  d[t] = __shfl_down(d[t], 1, 16) + __shfl_xor(d[t], 2);\n"
    "  i[t] = __shfl(fixed[t % 128], 3) + __shfl_up(i[t], 2) + warpSize;\n"
    "  u[t] = __shfl_xor(u[t], 1u, 4) + b + dim + grid;\n"
    "  ll[t] = __shfl_down(ll[t], 1);\n"
    "  ull[t] = __shfl(ull[t], 0) + __ballot(t & 1) + __any(t == 3) + __all(t < 1024);\n"
    "  atomicAdd(u, 1u); atomicAdd(f, 1.0f); atomicMax(i, 7); atomicMin(i + 1, -7);\n"
    "  atomicCAS(u + 1, 0u, 1u); atomicExch(u + 2, 5u); atomicAnd(u + 3, 6u);\n"
    "  atomicOr(u + 4, 1u); atomicXor(u + 5, 3u); atomicAdd(ull, 2ull);\n"
    "  __half x = __float2half(f[t]), y = __hmul(x, __hadd(x, h[t]));\n"
    "  h[t] = __hsub(__hfma(x, y, h[t]), __hneg(x));\n"
    "  if (__hlt(h[t], x) || __heq(x, y)) f[t] = __half2float(h[t]);\n"
    "  f[t] = twice(f[t]) + (float)twice(d[t]);\n"
    "  __threadfence();\n"
    "}\n";

START_TEST(hip_includes_and_device_api)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_kernel_info info;
  compile_ok(rt, "the HIP device API", api_source, "api", EXPECT_OPTION, &info);
  assert_gpu_elf(&info, "api");
  ck_assert(test_elf_defines(info.code, info.code_size, "api", 0));
  /* Told it is the other platform, the same source must fail: the
   * platform checks above can fail. */
  tj_kernel *k = NULL;
#if defined(TJ_PLATFORM_NVIDIA)
  const char *wrong = "-DTJ_EXPECT_AMD=1";
#else
  const char *wrong = "-DTJ_EXPECT_NVIDIA=1";
#endif
  ck_assert_int_eq(tj_kernel_compile(rt, api_source, "api", wrong, &k),
                   TJ_ECOMPILE);
  ck_assert_msg(strstr(tj_errmsg(rt), "is not defined") != NULL, "%s",
                tj_errmsg(rt));
  tj_runtime_close(rt);
}
END_TEST

/* hip_fp16.h on its own: under hipRTC 5.2 the installed header redefines
 * what hipRTC's built-in copy already holds ("redefinition of
 * '__half_raw'"); on nvidia there was no such header at all. */
START_TEST(hip_fp16_header_alone)
{
  static const char src[] =
      "#include <hip/hip_fp16.h>\n"
      "extern \"C\" __global__ void half_twice(__half *p)\n"
      "{\n"
      "  p[threadIdx.x] = __float2half(2.0f * __half2float(p[threadIdx.x]));\n"
      "}\n";
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_kernel_info info;
  compile_ok(rt, "hip_fp16.h alone", src, "half_twice", NULL, &info);
  ck_assert(test_elf_defines(info.code, info.code_size, "half_twice", 0));
  tj_runtime_close(rt);
}
END_TEST

START_TEST(platform_headers_are_supplied_and_keyed)
{
  int n = 0;
  const char *const *names, *const *contents;
  tj__platform_headers(&n, &names, &contents);
  static const char *const wanted[] = {"hip/hip_runtime.h", "hip/hip_fp16.h",
                                       "hip/hip_runtime_api.h"};
  for (size_t w = 0; w < sizeof wanted / sizeof wanted[0]; w++) {
    int found = 0;
    for (int i = 0; i < n; i++)
      found |= strcmp(names[i], wanted[w]) == 0 && strlen(contents[i]) > 0;
    ck_assert_msg(found, "%s is not among the platform's headers", wanted[w]);
  }
  const char *digest = tj__platform_headers_digest();
  ck_assert_uint_eq(strlen(digest), 32);
  ck_assert_uint_eq(strspn(digest, "0123456789abcdef"), 32);
  ck_assert_ptr_eq(digest, tj__platform_headers_digest());

  /* The digest is part of the runtime's identity (the compiler field of
   * every key), so that changed headers change every key. */
  static const char src[] = "extern \"C\" __global__ void k(int *p) { *p = 1; }";
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_kernel_info info;
  compile_ok(rt, "a plain kernel", src, "k", NULL, &info);
  char h[20];
  snprintf(h, sizeof h, " h:%.16s", digest);
  ck_assert_msg(strstr(tj_runtime_compiler(rt), h), "'%s' lacks '%s'",
                tj_runtime_compiler(rt), h);
  tj_runtime_close(rt);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("hip_source");
  TCase *tc = test_case(s, "hip_source", 600);
  tcase_add_loop_test(tc, each_hip_kernel_compiles_to_gpu_elf, 0, N_HIP_ENTRIES);
  tcase_add_test(tc, template_kernels_are_instantiated);
  tcase_add_test(tc, hip_includes_and_device_api);
  tcase_add_test(tc, hip_fp16_header_alone);
  tcase_add_test(tc, platform_headers_are_supplied_and_keyed);
  return run_suite(s);
}
