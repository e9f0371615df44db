/* check_api.c: the public API's rules for growing (tokitai-jit.h,
 * "Structs that grow"), its getters under their names old and new, the
 * queries that need no runtime (compiler, archs, devices, the embedded
 * kernels' flags), the error map's end, and tj_verify's verdict. */
#include "testutil.h"

#include "internal.h" /* tj__verify_verdict */
#include "embedded.h" /* tj__embedded_find */

static const char source[] =
    "extern \"C\" __global__ void twice(int *p) { p[threadIdx.x] *= 2; }\n";

static int all_zero(const void *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (((const unsigned char *)p)[i])
      return 0;
  return 1;
}

static int open_with(const tj_options *o, tj_runtime **rt)
{
  *rt = NULL;
  return tj_runtime_open(rt, o);
}

START_TEST(options_size_is_read_as_documented)
{
  struct {
    tj_options o;
    uint64_t newer; /* a field from a later header */
  } big;
  memset(&big, 0, sizeof big);
  big.o.arch = TEST_ARCH;
  big.o.flags = TJ_NO_DEVICE | TJ_CACHE_DISABLE;
  tj_runtime *rt;
  size_t sizes[] = {0, sizeof big.o, sizeof big};
  for (int i = 0; i < 3; i++) {
    big.o.size = sizes[i];
    ck_assert_msg(open_with(&big.o, &rt) == TJ_OK, "size %zu: %s", sizes[i],
                  tj_errmsg(rt));
    ck_assert_str_eq(tj_runtime_arch(rt), TEST_ARCH);
    tj_runtime_close(rt);
  }
  /* A newer program's option this library cannot honour, and a size
   * that is not a tj_options at all. */
  big.newer = 1;
  ck_assert_int_eq(open_with(&big.o, &rt), TJ_EINVAL);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "tj_options.size"));
  tj_runtime_close(rt);
  big.newer = 0;
  big.o.size = sizeof(int);
  ck_assert_int_eq(open_with(&big.o, &rt), TJ_EINVAL);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "tj_options.size is 4"));
  tj_runtime_close(rt);
}
END_TEST

/* A module from a size-0 source; the getters, new names and old, agree,
 * and zero the reserved space whatever the caller left in it. */
START_TEST(getters_fill_their_structs)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  const char *entry = "twice";
  tj_module_source src;
  memset(&src, 0, sizeof src);
  src.source = source;
  src.entries = &entry;
  src.num_entries = 1; /* size stays 0: the first version */
  tj_module *m = NULL;
  tj_kernel *k = NULL;
  ck_assert_msg(tj_module_compile(rt, &src, &m) == TJ_OK, "%s", tj_errmsg(rt));
  ck_assert_int_eq(tj_module_kernel(m, entry, &k), TJ_OK);

  tj_kernel_info ki;
  memset(&ki, 0xa5, sizeof ki);
  ck_assert_int_eq(tj_kernel_get_info(k, &ki), TJ_OK);
  ck_assert(ki.code && ki.code_size > 0 && ki.origin == TJ_FROM_COMPILER);
  ck_assert(all_zero(ki.reserved, sizeof ki.reserved));
  ck_assert_str_eq(ki.entry, "twice");

  tj_stats st;
  memset(&st, 0xa5, sizeof st);
  ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
  ck_assert_uint_eq(st.compiles, 1);
  ck_assert_uint_eq(st.remote_redirects, 0); /* no remote: zeroed */

  tj_module_info mi;
  memset(&mi, 0, sizeof mi); /* size 0: the first version */
  ck_assert_int_eq(tj_module_get_info(m, &mi), TJ_OK);
  ck_assert_uint_eq(mi.size, 0); /* left as the caller set it */
  ck_assert_str_eq(mi.key, ki.key);
  ck_assert_int_eq(mi.num_entries, 1);
  mi.size = sizeof(size_t) + 1; /* inside the first version */
  ck_assert_int_eq(tj_module_get_info(m, &mi), TJ_EINVAL);
  tj_runtime_close(rt);
}
END_TEST

START_TEST(cache_stats_zero_the_reserved_space)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_cache *c = NULL;
  ck_assert_int_eq(tj_cache_open(&c, path, 0), TJ_OK);
  tj_cache_stats st;
  memset(&st, 0xa5, sizeof st);
  ck_assert_int_eq(tj_cache_get_stats(c, &st), TJ_OK);
  ck_assert_uint_eq(st.entries, 0);
  ck_assert_uint_eq(st.remote_redirects, 0); /* zeroed, whatever was there */
  tj_cache_close(c);
  free(path);
  free(dir);
}
END_TEST

/* What --info shows, without a runtime. */
START_TEST(compiler_and_archs_without_a_runtime)
{
  const char *compiler = tj_compiler();
  ck_assert(compiler[0] != '\0');
  ck_assert_ptr_eq(tj_compiler(), compiler); /* static, computed once */
  tj_runtime *rt = open_compile_only(NULL, 0);
  ck_assert_msg(strncmp(tj_runtime_compiler(rt), compiler, strlen(compiler)) == 0,
                "runtime's '%s' does not start with '%s'",
                tj_runtime_compiler(rt), compiler);
  tj_runtime_close(rt);

  size_t n = tj_compiler_arch_count();
  int has_test_arch = 0;
  ck_assert_uint_gt(n, 0);
  ck_assert_ptr_null(tj_compiler_arch(n));
  /* Every arch listed is one a runtime opens for. */
  for (size_t i = 0; i < n; i++) {
    const char *arch = tj_compiler_arch(i);
    tj_options o = {.arch = arch, .flags = TJ_NO_DEVICE | TJ_CACHE_DISABLE};
    ck_assert_msg(open_with(&o, &rt) == TJ_OK, "listed arch %s: %s", arch,
                  tj_errmsg(rt));
    ck_assert_str_eq(tj_runtime_arch(rt), arch);
    tj_runtime_close(rt);
    for (size_t j = 0; j < i; j++)
      ck_assert_str_ne(tj_compiler_arch(j), arch);
    has_test_arch |= strcmp(arch, TEST_ARCH) == 0;
  }
  ck_assert_msg(has_test_arch, TEST_ARCH " is not in the list");
}
END_TEST

/* What --info and --list-kernels show: the kernels behind the public C
 * calls are never configurations, and a kernel is one exactly when its
 * kernels/ file says "embed: configuration" (build-aux/embed.sh). */
START_TEST(embedded_flags_tell_calls_from_configurations)
{
  static const char *const called[] = {"add_i32", "gelu_fwd_f16",
                                       "gelu_bwd_f16", "gelu_fwd_bwd_f16",
                                       "gemm_f16"};
  size_t n = tj_embedded_count(), found = 0;
  ck_assert_uint_eq(tj_embedded_flags(n), 0);
  ck_assert_uint_eq(tj_embedded_flags((size_t)-1), 0);
  for (size_t i = 0; i < n; i++) {
    const char *name = tj_embedded_name(i);
    unsigned flags = tj_embedded_flags(i);
    const tj__embedded_kernel *e = tj__embedded_find(name);
    int marked = strstr(e->source, "\n * embed: configuration\n") != NULL;
    ck_assert_uint_eq(flags & ~TJ_EMBEDDED_CONFIGURATION, 0);
    ck_assert_msg(!!(flags & TJ_EMBEDDED_CONFIGURATION) == marked,
                  "%s: flags %#x, its file %s marked: %d", name, flags,
                  e->file, marked);
    for (size_t c = 0; c < sizeof called / sizeof called[0]; c++) {
      if (strcmp(name, called[c]) != 0)
        continue;
      ck_assert_msg(flags == 0, "%s has a C call, yet flags %#x", name, flags);
      found++;
    }
  }
  ck_assert_uint_eq(found, sizeof called / sizeof called[0]);
}
END_TEST

START_TEST(devices_without_a_runtime)
{
  int n = tj_device_count();
  tj_device_info d;
  ck_assert_int_ge(n, 0);
  ck_assert_int_eq(tj_device_get_info(-1, &d), TJ_ENODEVICE);
  ck_assert_int_eq(tj_device_get_info(n, &d), TJ_ENODEVICE);
  ck_assert_int_eq(tj_device_get_info(0, NULL), TJ_EINVAL);
  for (int i = 0; i < n; i++) {
    memset(&d, 0xa5, sizeof d);
    ck_assert_int_eq(tj_device_get_info(i, &d), TJ_OK);
    ck_assert(d.name[0] != '\0' && d.arch[0] != '\0');
    ck_assert_uint_gt(d.memory_bytes, 0);
    ck_assert_int_gt(d.compute_units, 0);
    ck_assert_int_ge(d.clock_khz, 0);
    ck_assert(all_zero(d.reserved, sizeof d.reserved));
  }
}
END_TEST

START_TEST(error_map_ends_at_err_last)
{
  for (int code = 0; code > TJ__ERR_LAST; code--)
    ck_assert_str_ne(tj_err_name(code), "TJ_EUNKNOWN");
  ck_assert_str_eq(tj_err_name(TJ__ERR_LAST), "TJ_EUNKNOWN");
  ck_assert_str_eq(tj_strerror(TJ__ERR_LAST), "unknown error");
  int count = 0;
#define COUNT(name, value, msg) count++;
  TJ_ERRNO_MAP(COUNT)
#undef COUNT
  ck_assert_int_eq(TJ__ERR_LAST, -count);
}
END_TEST

/* tj_verify's verdict on a report it filled: TJ_EVERIFY, with the figures
 * in the message, when an output disagreed.  (That a real run agrees, and
 * returns TJ_OK, is check_kernels_gpu's.) */
START_TEST(verify_says_everify_when_the_oracle_disagrees)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_report *r = calloc(1, sizeof *r);
  ck_assert_ptr_nonnull(r);
  snprintf(r->kernel, sizeof r->kernel, "gelu_bwd_f16");
  r->max_abs_error = 0.25;
  r->max_abs_tolerance = 0.001;
  r->compared = 1024;
  r->within_tolerance = 0;
  ck_assert_int_eq(tj__verify_verdict(rt, r), TJ_EVERIFY);
  ck_assert_msg(strstr(tj_errmsg(rt), "gelu_bwd_f16 disagrees with the CPU oracle") &&
                    strstr(tj_errmsg(rt), "0.25"),
                "%s", tj_errmsg(rt));
  r->within_tolerance = 1;
  ck_assert_int_eq(tj__verify_verdict(rt, r), TJ_OK);
  ck_assert_str_eq(tj_err_name(TJ_EVERIFY), "TJ_EVERIFY");
  free(r);
  tj_runtime_close(rt);
}
END_TEST

/* The new names refuse a runtime whose open failed, as the old did. */
START_TEST(new_names_refuse_a_failed_open)
{
  tj_options o = {.arch = "no_such_arch", .flags = TJ_CACHE_DISABLE};
  tj_runtime *rt;
  tj_stats st;
  ck_assert_int_ne(open_with(&o, &rt), TJ_OK);
  ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_EINVAL);
  ck_assert_int_eq(tj_kernel_get_info(NULL, NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_module_get_info(NULL, NULL), TJ_EINVAL);
  tj_runtime_close(rt);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("api");
  TCase *tc = tcase_create("api");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, options_size_is_read_as_documented);
  tcase_add_test(tc, getters_fill_their_structs);
  tcase_add_test(tc, cache_stats_zero_the_reserved_space);
  tcase_add_test(tc, compiler_and_archs_without_a_runtime);
  tcase_add_test(tc, embedded_flags_tell_calls_from_configurations);
  tcase_add_test(tc, devices_without_a_runtime);
  tcase_add_test(tc, error_map_ends_at_err_last);
  tcase_add_test(tc, verify_says_everify_when_the_oracle_disagrees);
  tcase_add_test(tc, new_names_refuse_a_failed_open);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
