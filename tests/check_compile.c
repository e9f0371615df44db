/* check_compile.c: the real compiler, no GPU: every embedded kernel
 * compiles to a GPU ELF holding its entry symbol; errors come back with the
 * compiler's log and cache nothing; unsupported archs are refused before
 * the compiler sees them. */
#include "testutil.h"
#include "testsql.h"
#include "internal.h"

#include "testelf.h"

#if defined(TJ_PLATFORM_NVIDIA)
#define UNKNOWN_ARCH "sm_12345"
#else
/* No compiler knows it.  gfx1101 was the example until HIP 5.7 learnt it;
 * the real archs each HIP lacks are in check_archs.c. */
#define UNKNOWN_ARCH "gfx9999"
#endif

START_TEST(every_embedded_kernel_compiles_to_gpu_elf)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  ck_assert_uint_ge(tj_embedded_count(), 5);
  for (size_t i = 0; i < tj_embedded_count(); i++) {
    const char *name = tj_embedded_name(i);
    tj_kernel *k = NULL;
    int rc = tj_kernel_get(rt, name, &k);
    ck_assert_msg(rc == TJ_OK, "%s: %s: %s", name, tj_strerror(rc), tj_errmsg(rt));
    tj_kernel_info info;
    ck_assert_int_eq(tj_kernel_get_info(k, &info), TJ_OK);
    ck_assert_str_eq(info.entry, name);
    ck_assert_int_eq(info.origin, TJ_FROM_COMPILER);
    const Elf64_Ehdr *eh = info.code;
    ck_assert_uint_ge(info.code_size, sizeof *eh);
    ck_assert(memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0);
    ck_assert_int_eq(eh->e_machine, TEST_ELF_MACHINE);
    ck_assert_msg(test_elf_defines(info.code, info.code_size, name, 0),
                  "%s is not defined in its code object", name);
    ck_assert_ptr_null(tj_kernel_function(k)); /* compile only */
    ck_assert_int_eq(tj_launch(k, (tj_dim3){1, 1, 1}, (tj_dim3){1, 1, 1}, 0,
                               NULL, NULL), TJ_ENODEVICE);
  }
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, tj_embedded_count());
  tj_runtime_close(rt);
}
END_TEST

static const char broken_source[] =
    "extern \"C\" __global__ void broken(int *p) { *p = undeclared_name; }\n";

START_TEST(compile_error_returns_log_and_caches_nothing)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(path, 0);
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_kernel_compile(rt, broken_source, "broken", NULL, &k), TJ_ECOMPILE);
  ck_assert_ptr_null(k);
  const char *msg = tj_errmsg(rt);
  ck_assert_msg(strstr(msg, "undeclared_name"), "log lacks the culprit: %s", msg);
  ck_assert_msg(strstr(msg, "error"), "log lacks 'error': %s", msg);
  ck_assert_msg(strstr(msg, TEST_ARCH), "message lacks the arch: %s", msg);
  /* Failing twice compiles twice: a failure is not remembered as a kernel. */
  ck_assert_int_eq(tj_kernel_compile(rt, broken_source, "broken", NULL, &k), TJ_ECOMPILE);
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, 0);
  tj_runtime_close(rt);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM code_objects"), 0);
  free(path); free(dir);
}
END_TEST

START_TEST(caller_kernel_goes_through_the_same_path)
{
  static const char src[] =
      "extern \"C\" __global__ void scale(float *x, float a, int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) x[i] *= a;\n}\n";
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_kernel *k1 = NULL, *k2 = NULL, *k3 = NULL;
  ck_assert_int_eq(tj_kernel_compile(rt, src, "scale", "", &k1), TJ_OK);
  ck_assert_int_eq(tj_kernel_compile(rt, src, "scale", "  ", &k2), TJ_OK);
  ck_assert_ptr_eq(k1, k2); /* same source, entry and (normalised) options */
  ck_assert_int_eq(tj_kernel_compile(rt, src, "scale", "-DUNUSED=1", &k3), TJ_OK);
  ck_assert_ptr_ne(k1, k3);
  tj_kernel_info a, b;
  tj_kernel_get_info(k1, &a);
  tj_kernel_get_info(k3, &b);
  ck_assert_str_ne(a.key, b.key);
  ck_assert(test_elf_defines(a.code, a.code_size, "scale", 0));
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, 2);
  ck_assert_uint_eq(st.memory_hits, 1);
  tj_runtime_close(rt);
}
END_TEST

/* A compile leaves the host program's working directory as it was (comgr
 * sets it to "/" and leaves it there). */
START_TEST(a_compile_keeps_the_working_directory)
{
  static const char src[] =
      "extern \"C\" __global__ void keep(float *x) { x[0] = 1.0f; }\n";
  char *dir = test_tmpdir(), before[4096], after[4096];
  char *real = realpath(dir, NULL);
  ck_assert_ptr_nonnull(getcwd(before, sizeof before));
  ck_assert_int_eq(chdir(real), 0);
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_kernel_compile(rt, src, "keep", "", &k), TJ_OK);
  ck_assert_ptr_nonnull(getcwd(after, sizeof after));
  ck_assert_str_eq(after, real);
  tj_runtime_close(rt);
  ck_assert_int_eq(chdir(before), 0);
  free(real);
  free(dir);
}
END_TEST

/* The arch is checked against the compiler's own list first: hipRTC of
 * ROCm 5.2 aborts the whole process on an ISA its comgr does not know. */
START_TEST(unsupported_arch_is_a_clear_error)
{
  tj_options o = {0};
  o.flags = TJ_NO_DEVICE | TJ_CACHE_DISABLE;
  o.arch = UNKNOWN_ARCH;
  tj_runtime *rt = NULL;
  ck_assert_int_eq(tj_runtime_open(&rt, &o), TJ_EARCH);
  ck_assert_msg(strstr(tj_errmsg(rt), "not supported"), "%s", tj_errmsg(rt));
  tj_runtime_close(rt);

  char huge[4097];
  memset(huge, 'a', sizeof huge - 1);
  huge[sizeof huge - 1] = '\0';
  const char *bad[] = {huge, "", "gfx90a; rm -rf /", "gfx90a\n"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    o.arch = bad[i];
    rt = NULL;
    ck_assert_int_eq(tj_runtime_open(&rt, &o), TJ_EINVAL);
    ck_assert(strlen(tj_errmsg(rt)) > 0);
    tj_runtime_close(rt);
  }
}
END_TEST

START_TEST(arch_feature_flags_are_accepted_and_keyed)
{
#if defined(TJ_PLATFORM_AMD)
  tj_options o = {0};
  o.flags = TJ_NO_DEVICE | TJ_CACHE_DISABLE;
  o.arch = "gfx90a:xnack-";
  tj_runtime *rt = NULL;
  ck_assert_int_eq(tj_runtime_open(&rt, &o), TJ_OK);
  ck_assert_str_eq(tj_runtime_arch(rt), "gfx90a:xnack-");
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_kernel_info with;
  tj_kernel_get_info(k, &with);
  tj_runtime *plain = open_compile_only(NULL, 0);
  tj_kernel *k2;
  ck_assert_int_eq(tj_kernel_get(plain, "add_i32", &k2), TJ_OK);
  tj_kernel_info without;
  tj_kernel_get_info(k2, &without);
  ck_assert_str_ne(with.key, without.key);
  tj_runtime_close(plain);
  tj_runtime_close(rt);
#endif
}
END_TEST

int main(void)
{
  Suite *s = suite_create("compile");
  TCase *tc = test_case(s, "compile", 600);
  tcase_add_test(tc, every_embedded_kernel_compiles_to_gpu_elf);
  tcase_add_test(tc, compile_error_returns_log_and_caches_nothing);
  tcase_add_test(tc, caller_kernel_goes_through_the_same_path);
  tcase_add_test(tc, a_compile_keeps_the_working_directory);
  tcase_add_test(tc, unsupported_arch_is_a_clear_error);
  tcase_add_test(tc, arch_feature_flags_are_accepted_and_keyed);
  return run_suite(s);
}
