/* check_failed_open.c: a runtime whose tj_runtime_open failed is handed
 * back only so that tj_errmsg can say why.  Every public function that
 * takes a runtime must refuse it with TJ_EINVAL (NULL for the string
 * queries), leave the message alone and never crash; tj_runtime_close
 * still frees it.  Each way an open can fail, from the first check to the
 * last step (the cache), is tried. */
#include "testutil.h"

#include <sys/stat.h>

#if defined(TJ_PLATFORM_NVIDIA)
#define BAD_ARCH "sm_12345"
#else
#define BAD_ARCH "gfx9999" /* no HIP knows it; gfx1101 is known from HIP 5.7 on */
#endif

static const char source[] =
    "extern \"C\" __global__ void twice(int *p) { p[threadIdx.x] *= 2; }\n";

/* Asserts that a call returned TJ_EINVAL and left the message as the
 * open set it. */
#define REFUSED(call)                                                       \
  do {                                                                      \
    int rc_ = (call);                                                       \
    ck_assert_msg(rc_ == TJ_EINVAL, "%s on a failed open: %s, not TJ_EINVAL", \
                  #call, tj_err_name(rc_));                                 \
    ck_assert_msg(strcmp(tj_errmsg(rt), why) == 0,                          \
                  "%s changed the message to '%s'", #call, tj_errmsg(rt));  \
  } while (0)

/* Every public function that takes a runtime, on rt. */
static void every_call_refuses(tj_runtime *rt)
{
  char why[2048];
  snprintf(why, sizeof why, "%s", tj_errmsg(rt));
  ck_assert_msg(why[0] != '\0', "a failed open left no message");

  enum { N = 8 };
  int32_t a[N] = {0}, b[N] = {0}, c[N] = {0};
  uint16_t x[N] = {0}, g[N] = {0}, y[N] = {0}, gi[N] = {0};
  uint16_t A[N] = {0}, B[N] = {0}, C[N] = {0};
  tj_kernel *k = NULL;
  tj_stats st;
  tj_report *report = calloc(1, sizeof *report);
  ck_assert_ptr_nonnull(report);

  REFUSED(tj_kernel_get(rt, "add_i32", &k));
  REFUSED(tj_kernel_compile(rt, source, "twice", "", &k));
  ck_assert_ptr_null(k);
  const char *entry = "twice";
  tj_module_source src = {sizeof src, source, NULL, NULL, 0, NULL, 0, &entry, 1};
  tj_module *m = NULL;
  REFUSED(tj_module_compile(rt, &src, &m));
  ck_assert_ptr_null(m);
  REFUSED(tj_runtime_bind(rt));
  REFUSED(tj_runtime_get_stats(rt, &st));
  ck_assert_ptr_null(tj_runtime_arch(rt));
  ck_assert_ptr_null(tj_runtime_compiler(rt));
  ck_assert_ptr_null(tj_runtime_cache_path(rt));

  REFUSED(tj_add_i32(rt, NULL, a, b, c, N));
  REFUSED(tj_gelu_fwd_f16(rt, NULL, x, y, N));
  REFUSED(tj_gelu_bwd_f16(rt, NULL, g, x, gi, N));
  REFUSED(tj_gelu_fwd_bwd_f16(rt, NULL, x, g, y, gi, N));
  REFUSED(tj_gemm_f16(rt, NULL, 2, 2, 2, 1.0f, A, 2, B, 2, 0.0f, C, 2));
  REFUSED(tj_add_i32_host(rt, a, N, b, N, c, N));
  REFUSED(tj_gelu_fwd_f16_host(rt, x, N, y, N));
  REFUSED(tj_gelu_bwd_f16_host(rt, g, N, x, N, gi, N));
  REFUSED(tj_gelu_fwd_bwd_f16_host(rt, x, N, g, N, y, gi, N));
  REFUSED(tj_gemm_f16_host(rt, 2, 2, 2, 1.0f, A, B, 0.0f, C));
  REFUSED(tj_verify(rt, "add_i32", N, 1, report));
  /* Asking twice changes nothing: the handle does not half-recover. */
  REFUSED(tj_kernel_get(rt, "add_i32", &k));
  ck_assert_str_eq(tj_errmsg(rt), why);
  free(report);
}

/* Open with o, which must fail with want (or, when want is TJ_OK, with
 * anything), then check the handle it left. */
static void failed_open(const tj_options *o, int want)
{
  tj_runtime *rt = NULL;
  int rc = tj_runtime_open(&rt, o);
  ck_assert_msg(rc != TJ_OK, "the open was meant to fail");
  if (want != TJ_OK)
    ck_assert_msg(rc == want, "open: %s, expected %s (%s)", tj_err_name(rc),
                  tj_err_name(want), tj_errmsg(rt));
  ck_assert_ptr_nonnull(rt);
  every_call_refuses(rt);
  tj_runtime_close(rt);
}

START_TEST(unknown_flags)
{
  tj_options o = {0};
  o.flags = 0x100;
  failed_open(&o, TJ_EINVAL);
}
END_TEST

START_TEST(no_device_and_no_arch)
{
  /* What the README's example meets on a machine without a GPU. */
  tj_options o = {0};
  o.flags = TJ_NO_DEVICE | TJ_CACHE_DISABLE;
  failed_open(&o, TJ_ENODEVICE);
}
END_TEST

START_TEST(arch_the_compiler_lacks)
{
  tj_options o = {0};
  o.arch = BAD_ARCH;
  o.flags = TJ_NO_DEVICE | TJ_CACHE_DISABLE;
  failed_open(&o, TJ_EARCH);
}
END_TEST

/* The cache is the last step: the table exists, and on a GPU machine
 * (no TJ_NO_DEVICE, no arch) the device is open, when this open fails. */
static void unsafe_cache(unsigned flags, const char *arch, int want)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  ck_assert_int_eq(chmod(dir, 0777), 0);
  tj_options o = {0};
  o.arch = arch;
  o.cache_path = path;
  o.flags = flags;
  failed_open(&o, want);
  ck_assert_int_ne(access(path, F_OK), 0);
  rmdir(dir);
  free(path);
  free(dir);
}

START_TEST(unsafe_cache_compile_only)
{
  unsafe_cache(TJ_NO_DEVICE, TEST_ARCH, TJ_EPERM);
}
END_TEST

START_TEST(unsafe_cache_on_the_device)
{
  unsafe_cache(0, NULL, TJ_OK); /* TJ_EPERM with a GPU, else TJ_ENODEVICE */
}
END_TEST

START_TEST(default_options)
{
  /* tj_runtime_open(&rt, NULL), as the README calls it.  With a GPU (and
   * the tests' unusable default cache, which only warns) it may succeed;
   * then there is nothing to check here. */
  tj_runtime *rt = NULL;
  int rc = tj_runtime_open(&rt, NULL);
  if (rc != TJ_OK)
    every_call_refuses(rt);
  tj_runtime_close(rt);
}
END_TEST

START_TEST(close_and_errmsg_take_null)
{
  tj_runtime_close(NULL);
  ck_assert(strlen(tj_errmsg(NULL)) > 0);
  ck_assert_int_eq(tj_kernel_get(NULL, "add_i32", NULL), TJ_EINVAL);
  ck_assert_ptr_null(tj_runtime_arch(NULL));
}
END_TEST

int main(void)
{
  Suite *s = suite_create("failed_open");
  TCase *tc = test_case(s, "failed_open", 120);
  tcase_add_test(tc, unknown_flags);
  tcase_add_test(tc, no_device_and_no_arch);
  tcase_add_test(tc, arch_the_compiler_lacks);
  tcase_add_test(tc, unsafe_cache_compile_only);
  tcase_add_test(tc, unsafe_cache_on_the_device);
  tcase_add_test(tc, default_options);
  tcase_add_test(tc, close_and_errmsg_take_null);
  return run_suite(s);
}
