/*
 * check_reliability_input.c: bad input everywhere: each bad call gets its
 * code and a message naming what was wrong, and nothing is compiled or
 * cached.
 */
#include "reliability.h"

/* Each bad call: its code, a message naming what was wrong, and nothing
 * compiled or cached. */
#define EXPECT(call, code, word)                                            \
  do {                                                                      \
    int rc_ = (call);                                                       \
    ck_assert_msg(rc_ == (code), "%s: %s, not %s", #call, tj_err_name(rc_), \
                  tj_err_name(code));                                       \
    ck_assert_msg(strstr(tj_errmsg(rt), (word)), "%s: message '%s' lacks "  \
                  "'%s'", #call, tj_errmsg(rt), (word));                    \
    tried++;                                                                \
  } while (0)

static const char good_source[] = "extern \"C\" __global__ void k(int *p) { *p = 1; }";

static int bad_compiles(tj_runtime *rt)
{
  int tried = 0;
  tj_kernel *k = NULL;
  /* Options outside the allowlist never reach the compiler. */
  EXPECT(tj_kernel_compile(rt, good_source, "k", "--no-such-option", &k),
         TJ_EINVAL, "no-such-option");
  EXPECT(tj_kernel_compile(rt, good_source, "k", "-DX=1 -fbogus-flag", &k),
         TJ_EINVAL, "bogus-flag");
  EXPECT(tj_kernel_compile(rt, "extern \"C\" __global__ void k(int *p) { *p = ; }",
                           "k", NULL, &k), TJ_ECOMPILE, "error");
  EXPECT(tj_kernel_compile(rt, "#error stop here\n", "k", NULL, &k), TJ_ECOMPILE,
         "stop here");
  EXPECT(tj_kernel_compile(rt, "", "k", NULL, &k), TJ_EINVAL, "empty");
  EXPECT(tj_kernel_compile(rt, NULL, "k", NULL, &k), TJ_EINVAL, "source");
  EXPECT(tj_kernel_compile(rt, good_source, NULL, NULL, &k), TJ_EINVAL, "entry");
  EXPECT(tj_kernel_compile(rt, good_source, "k", NULL, NULL), TJ_EINVAL, "output");
  /* "k k" is a C++ name expression that names nothing; a tab is never one. */
  EXPECT(tj_kernel_compile(rt, good_source, "k k", NULL, &k), TJ_ENOENT, "'k k'");
  EXPECT(tj_kernel_compile(rt, good_source, "k\tk", NULL, &k), TJ_EINVAL,
         "name expression");
  size_t huge_n = (64u << 20) + 2;
  char *huge = malloc(huge_n);
  memset(huge, ' ', huge_n - 1);
  huge[huge_n - 1] = '\0';
  EXPECT(tj_kernel_compile(rt, huge, "k", NULL, &k), TJ_ERANGE, "limit");
  free(huge);
  ck_assert_ptr_null(k);
  return tried;
}

static int bad_kernel_calls(tj_runtime *rt)
{
  int tried = 0;
  static int32_t a[4], b[4], c[4];
  static uint16_t h[4];
  tj_kernel *k = NULL;
  EXPECT(tj_kernel_get(rt, "no_such_kernel", &k), TJ_ENOENT, "no_such_kernel");
  EXPECT(tj_kernel_get(rt, "", &k), TJ_ENOENT, "no embedded kernel");
  EXPECT(tj_kernel_get(rt, NULL, &k), TJ_EINVAL, "name");
  EXPECT(tj_add_i32(rt, NULL, NULL, b, c, 4), TJ_EINVAL, "a");
  EXPECT(tj_add_i32(rt, NULL, a, b, c, 0), TJ_EINVAL, "n");
  EXPECT(tj_add_i32(rt, NULL, a, b, c, SIZE_MAX / 2), TJ_EINVAL, "overflow");
  EXPECT(tj_gelu_fwd_f16(rt, NULL, h, h + 1, 2), TJ_EINVAL, "overlap");
  EXPECT(tj_gemm_f16(rt, NULL, -1, 4, 4, 1, h, 4, h, 4, 0, h, 4), TJ_EINVAL, "M");
  EXPECT(tj_gemm_f16(rt, NULL, 4, 4, 0, 1, h, 4, h, 4, 0, h, 4), TJ_EINVAL, "K");
  tj_report report;
  EXPECT(tj_verify(rt, NULL, 16, 1, &report), TJ_EINVAL, "kernel");
  EXPECT(tj_verify(rt, "no_such_kernel", 16, 1, &report), TJ_ENOENT, "no_such");
  ck_assert_ptr_null(k);
  return tried;
}

/* Calls without a runtime, or with nothing to write to. */
static int null_handles(void)
{
  int tried = 0;
  tj_kernel *k;
  tj_stats st;
  ck_assert_int_eq(tj_runtime_open(NULL, NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_kernel_get(NULL, "add_i32", &k), TJ_EINVAL);
  ck_assert_int_eq(tj_kernel_compile(NULL, good_source, "k", NULL, &k), TJ_EINVAL);
  ck_assert_int_eq(tj_runtime_get_stats(NULL, &st), TJ_EINVAL);
  ck_assert_int_eq(tj_runtime_bind(NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_launch(NULL, (tj_dim3){1, 1, 1}, (tj_dim3){1, 1, 1}, 0,
                             NULL, NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_kernel_get_info(NULL, NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_add_i32(NULL, NULL, NULL, NULL, NULL, 0), TJ_EINVAL);
  ck_assert_int_eq(tj_verify(NULL, "add_i32", 1, 1, NULL), TJ_EINVAL);
  ck_assert_ptr_null(tj_runtime_arch(NULL));
  ck_assert_ptr_null(tj_runtime_compiler(NULL));
  ck_assert_ptr_null(tj_runtime_cache_path(NULL));
  ck_assert_ptr_null(tj_kernel_function(NULL));
  ck_assert_ptr_null(tj_report_json(NULL));
  ck_assert_ptr_null(tj_report_markdown(NULL));
  ck_assert(tj_errmsg(NULL)[0]);
  tj_runtime_close(NULL);
  tried += 16;
  return tried;
}

/* Options that no runtime can open with. */
static int bad_options(void)
{
  int tried = 0;
  char *arch = malloc(4097);
  memset(arch, 'a', 4096);
  arch[4096] = '\0';
  const char *archs[] = {arch, "", "gfx90a; rm -rf /", "gfx9999", "sm_", "\xff\xfe"};
  const int codes[] = {TJ_EINVAL, TJ_EINVAL, TJ_EINVAL, TJ_EARCH, TJ_EINVAL, TJ_EINVAL};
  for (int i = 0; i < 6; i++) {
    tj_options o = {0};
    o.arch = archs[i];
    o.flags = TJ_NO_DEVICE | TJ_CACHE_DISABLE;
    tj_runtime *rt = NULL;
    int rc = tj_runtime_open(&rt, &o);
    if (i == 3 || i == 4) /* gfx9999, sm_: unknown to this platform's compiler */
      ck_assert_msg(rc == TJ_EARCH || rc == TJ_EINVAL, "%s: %s", archs[i], tj_err_name(rc));
    else
      ck_assert_msg(rc == codes[i], "arch %d: %s", i, tj_err_name(rc));
    ck_assert_msg(tj_errmsg(rt)[0], "arch %d: no message", i);
    tj_runtime_close(rt);
    tried++;
  }
  free(arch);
  tj_options o = {0};
  o.arch = TEST_ARCH;
  o.flags = 0x80000000u | TJ_NO_DEVICE;
  tj_runtime *rt = NULL;
  EXPECT(tj_runtime_open(&rt, &o), TJ_EINVAL, "flags");
  tj_runtime_close(rt);
  return tried;
}

START_TEST(bad_input_everywhere)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_runtime *rt = rel_open(path, TEST_ARCH, 0);
  ck_assert_ptr_nonnull(rt);
  int tried = bad_compiles(rt) + bad_kernel_calls(rt) + null_handles() + bad_options();
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, 0);
  tj_runtime_close(rt);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM code_objects"), 0);
  printf("reliability: %d bad calls: each its code and a message, nothing "
         "compiled or cached\n", tried);
  free(path); free(dir);
}
END_TEST

START_TEST(network_file_systems_are_recognised)
{
  ck_assert(tj__cache_fs_is_network(0x6969));     /* NFS */
  ck_assert(tj__cache_fs_is_network(0xFF534D42)); /* CIFS */
  ck_assert(tj__cache_fs_is_network(0x65735546)); /* FUSE */
  ck_assert(!tj__cache_fs_is_network(0xEF53));    /* ext4 */
  ck_assert(!tj__cache_fs_is_network(0x01021994)); /* tmpfs */
  ck_assert(!tj__cache_fs_is_network(0x58465342)); /* XFS */
}
END_TEST

int main(void)
{
  const rel_case cases[] = {
    {"input", {bad_input_everywhere, network_file_systems_are_recognised}},
  };
  return rel_main("reliability_input", cases, sizeof cases / sizeof *cases);
}
