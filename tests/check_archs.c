/* check_archs.c: the archs people run, compile-only.  For each arch of
 * $TJ_TEST_ARCHS (commas or spaces between them) every embedded kernel and
 * a caller's kernel compile to a code object for that arch: the ELF is for
 * the GPU, its arch field names the arch asked for (AMD), and the entry is
 * defined with its kernel descriptor.  The archs the installed compiler
 * cannot target ($TJ_TEST_REFUSED_ARCHS, by default the ones known to abort
 * this HIP's hipRTC) are refused with TJ_EARCH, and the process lives on.
 *
 * Defaults: gfx90a and gfx1030 on AMD (every HIP from 5.2 on knows them),
 * sm_80 and sm_90 on NVIDIA.  The HIP 5.7 lane of CI (.ci/trixie-lane) sets
 * gfx1101, gfx1100, gfx942 and gfx90a. */
#include "testutil.h"

#include "testelf.h"

#if defined(TJ_PLATFORM_AMD)
#include <hip/hip_version.h>
#endif

#if defined(TJ_PLATFORM_NVIDIA)
#define DEFAULT_ARCHS "sm_80,sm_90"
#define DEFAULT_REFUSED "sm_12345"
#else
#define DEFAULT_ARCHS "gfx90a,gfx1030"
/* What each HIP's hipRTC aborts the process on (its comgr does not know
 * the ISA), besides a name that is no arch at all.  A compiler newer than
 * these lists refuses only the made-up name. */
#if HIP_VERSION < 50300000 /* ROCm 5.2, comgr 2.4: no gfx11, no gfx942 */
#define DEFAULT_REFUSED "gfx1100,gfx1101,gfx942,gfx9999"
#elif HIP_VERSION < 60000000 /* ROCm 5.3 to 5.7: no gfx12 */
#define DEFAULT_REFUSED "gfx1200,gfx1201,gfx9999"
#else
#define DEFAULT_REFUSED "gfx9999"
#endif
#endif

#define MAX_ARCHS 32
typedef struct {
  char *name[MAX_ARCHS];
  int count;
} arch_list;
static arch_list archs, refused;

/* Split $var (or def) on commas and spaces. */
static void arch_list_read(arch_list *l, const char *var, const char *def)
{
  const char *v = getenv(var);
  char *copy = strdup(v && *v ? v : def), *save = NULL;
  for (char *t = strtok_r(copy, ", \t", &save); t && l->count < MAX_ARCHS;
       t = strtok_r(NULL, ", \t", &save))
    l->name[l->count++] = strdup(t);
  free(copy);
}

#if defined(TJ_PLATFORM_AMD)
/* EF_AMDGPU_MACH, the low byte of e_flags, for the archs people run (LLVM's
 * include/llvm/BinaryFormat/ELF.h); -1 for an arch not listed here. */
static int amdgpu_mach(const char *arch)
{
  static const struct { const char *arch; int mach; } table[] = {
      {"gfx900", 0x2c},  {"gfx906", 0x2f},  {"gfx908", 0x30},  {"gfx90a", 0x3f},
      {"gfx940", 0x40},  {"gfx941", 0x4b},  {"gfx942", 0x4c},  {"gfx1010", 0x33},
      {"gfx1030", 0x36}, {"gfx1031", 0x37}, {"gfx1100", 0x41}, {"gfx1101", 0x46},
      {"gfx1102", 0x47}, {"gfx1103", 0x44},
  };
  size_t base = strcspn(arch, ":");
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strlen(table[i].arch) == base && strncmp(table[i].arch, arch, base) == 0)
      return table[i].mach;
  return -1;
}
#endif

/* The code object of k is a GPU ELF for arch, defining entry (and, on AMD,
 * its kernel descriptor entry.kd). */
static void assert_code_object_for(const tj_kernel *k, const char *arch,
                                   const char *entry)
{
  tj_kernel_info info;
  ck_assert_int_eq(tj_kernel_get_info(k, &info), TJ_OK);
  const Elf64_Ehdr *eh = info.code;
  ck_assert_uint_ge(info.code_size, sizeof *eh);
  ck_assert(memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0);
  ck_assert_int_eq(eh->e_ident[EI_CLASS], ELFCLASS64);
  ck_assert_int_eq(eh->e_machine, TEST_ELF_MACHINE);
  ck_assert_msg(test_elf_defines(info.code, info.code_size, entry, 0),
                "%s: %s is not defined in its code object", arch, entry);
#if defined(TJ_PLATFORM_AMD)
  char kd[256];
  snprintf(kd, sizeof kd, "%s.kd", entry);
  ck_assert_msg(test_elf_defines(info.code, info.code_size, kd, 0),
                "%s: %s has no kernel descriptor %s", arch, entry, kd);
  int want = amdgpu_mach(arch);
  if (want >= 0)
    ck_assert_msg((int)(eh->e_flags & 0xff) == want,
                  "%s: %s's ELF is for mach 0x%x, not 0x%x", arch, entry,
                  (unsigned)(eh->e_flags & 0xff), (unsigned)want);
  else
    printf("check_archs: %s: no EF_AMDGPU_MACH known here; arch field not checked\n", arch);
#endif
}

START_TEST(every_embedded_kernel_compiles_for_the_arch)
{
  const char *arch = archs.name[_i];
  tj_runtime *rt = open_for_arch(arch, NULL);
  ck_assert_str_eq(tj_runtime_arch(rt), arch);
  ck_assert_uint_ge(tj_embedded_count(), 5);
  for (size_t i = 0; i < tj_embedded_count(); i++) {
    const char *name = tj_embedded_name(i);
    tj_kernel *k = NULL;
    int rc = tj_kernel_get(rt, name, &k);
    ck_assert_msg(rc == TJ_OK, "%s for %s: %s: %s", name, arch, tj_strerror(rc),
                  tj_errmsg(rt));
    assert_code_object_for(k, arch, name);
  }
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, tj_embedded_count());
  printf("check_archs: %s: %zu embedded kernels compiled (%s)\n", arch,
         tj_embedded_count(), tj_runtime_compiler(rt));
  tj_runtime_close(rt);
}
END_TEST

START_TEST(a_callers_kernel_compiles_for_the_arch)
{
  static const char src[] =
      "extern \"C\" __global__ void axpy_arch(float a, const float *x, float *y,\n"
      "                                       int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) y[i] = a * x[i] + y[i];\n}\n";
  const char *arch = archs.name[_i];
  tj_runtime *rt = open_for_arch(arch, NULL);
  tj_kernel *k = NULL;
  int rc = tj_kernel_compile(rt, src, "axpy_arch", "-DTJ_CHECK_ARCHS=1", &k);
  ck_assert_msg(rc == TJ_OK, "axpy_arch for %s: %s: %s", arch, tj_strerror(rc),
                tj_errmsg(rt));
  assert_code_object_for(k, arch, "axpy_arch");
  tj_runtime_close(rt);
}
END_TEST

/* Keys differ by arch: two archs' code objects never share a row. */
START_TEST(each_arch_has_its_own_key)
{
  char keys[MAX_ARCHS][40];
  for (int a = 0; a < archs.count; a++) {
    tj_runtime *rt = open_for_arch(archs.name[a], NULL);
    tj_kernel *k = NULL;
    ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
    tj_kernel_info info;
    tj_kernel_get_info(k, &info);
    snprintf(keys[a], sizeof keys[a], "%s", info.key);
    for (int b = 0; b < a; b++)
      ck_assert_msg(strcmp(keys[a], keys[b]) != 0 || strcmp(archs.name[a], archs.name[b]) == 0,
                    "%s and %s share key %s", archs.name[a], archs.name[b], keys[a]);
    tj_runtime_close(rt);
  }
}
END_TEST

/* An arch the compiler cannot target is a code, not an abort: Check runs
 * each test in a child, so an abort would fail this test. */
START_TEST(an_arch_the_compiler_lacks_is_refused)
{
  const char *arch = refused.name[_i];
  tj_options o = {0};
  o.arch = arch;
  o.flags = TJ_NO_DEVICE | TJ_CACHE_DISABLE;
  tj_runtime *rt = NULL;
  int rc = tj_runtime_open(&rt, &o);
  ck_assert_msg(rc == TJ_EARCH, "%s: got %s, not TJ_EARCH (%s)", arch,
                tj_strerror(rc), tj_errmsg(rt));
  ck_assert_msg(strstr(tj_errmsg(rt), "not supported"), "%s: %s", arch, tj_errmsg(rt));
  tj_runtime_close(rt);
}
END_TEST

static void arch_list_print(const arch_list *l)
{
  for (int i = 0; i < l->count; i++)
    printf(i ? " %s" : "%s", l->name[i]);
  printf("\n");
}

/* check_archs --list prints the two lists, one a line, for tests/cli_archs.sh:
 * which archs this HIP lacks is known here, from its headers' version. */
int main(int argc, char **argv)
{
  arch_list_read(&archs, "TJ_TEST_ARCHS", DEFAULT_ARCHS);
  arch_list_read(&refused, "TJ_TEST_REFUSED_ARCHS", DEFAULT_REFUSED);
  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    arch_list_print(&archs);
    arch_list_print(&refused);
    return 0;
  }
  printf("check_archs: archs: ");
  arch_list_print(&archs);
  printf("check_archs: refused: ");
  arch_list_print(&refused);
  Suite *s = suite_create("archs");
  TCase *tc = test_case(s, "compile", 600);
  tcase_add_loop_test(tc, every_embedded_kernel_compiles_for_the_arch, 0, archs.count);
  tcase_add_loop_test(tc, a_callers_kernel_compiles_for_the_arch, 0, archs.count);
  tcase_add_test(tc, each_arch_has_its_own_key);
  tcase_add_loop_test(tc, an_arch_the_compiler_lacks_is_refused, 0, refused.count);
  return run_suite(s);
}
