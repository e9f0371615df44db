/* check_compiler_input.c: what reaches the compiler is checked first, and
 * everything that reaches it is in the key.  Options: all of them reach
 * the compiler, the ones it could exit() on are refused, the documented
 * ones compile.  Archs: malformed feature lists are refused, one target has
 * one spelling.  Environment and working directory: refused or keyed,
 * never silently changing the code.  The compiler fingerprint names the
 * loaded libraries.  tj_errmsg is per thread. */
#include "testutil.h"
#include "internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/stat.h>

static const char probe_source[] =
    "extern \"C\" __global__ void probe(int *p) { *p = 1; }\n";

static tj_kernel_info compile_ok(tj_runtime *rt, const char *src,
                                 const char *entry, const char *options)
{
  tj_kernel *k = NULL;
  int rc = tj_kernel_compile(rt, src, entry, options, &k);
  ck_assert_msg(rc == TJ_OK, "options '%.200s': %s: %s", options ? options : "",
                tj_strerror(rc), tj_errmsg(rt));
  tj_kernel_info info;
  ck_assert_int_eq(tj_kernel_get_info(k, &info), TJ_OK);
  return info;
}

/* ------------------------------------------------------------ options */

/* The old split kept 64 options and dropped the rest, while the key
 * covered all of them: the source saw LAST undefined. */
START_TEST(options_past_the_64th_reach_the_compiler)
{
  static const char src[] =
      "#if LAST != 7\n#error LAST is not 7: an option was dropped\n#endif\n"
      "extern \"C\" __global__ void last(int *p) { *p = LAST + D63; }\n";
  char opts[4096] = "";
  for (int i = 0; i < 64; i++)
    snprintf(opts + strlen(opts), sizeof opts - strlen(opts), "-DD%d=%d ", i, i);
  strcat(opts, "-DLAST=7");
  tj_runtime *rt = open_compile_only(NULL, 0);
  compile_ok(rt, src, "last", opts);
  tj_runtime_close(rt);
}
END_TEST

START_TEST(options_split_into_one_block)
{
  char **argv = NULL;
  int argc = -1;
  ck_assert_int_eq(tj__options_split(NULL, &argv, &argc), TJ_OK);
  ck_assert_int_eq(argc, 0);
  ck_assert_ptr_null(argv[0]);
  free(argv);
  ck_assert_int_eq(tj__options_split(" \t\n\v\f\r ", &argv, &argc), TJ_OK);
  ck_assert_int_eq(argc, 0);
  free(argv);
  ck_assert_int_eq(tj__options_split("\n-DA=1\t\t-D  B\r\n-O2 ", &argv, &argc), TJ_OK);
  ck_assert_int_eq(argc, 4);
  ck_assert_str_eq(argv[0], "-DA=1");
  ck_assert_str_eq(argv[1], "-D");
  ck_assert_str_eq(argv[2], "B");
  ck_assert_str_eq(argv[3], "-O2");
  ck_assert_ptr_null(argv[4]);
  free(argv);
  /* Far more than any fixed array: every token comes back. */
  size_t n = 5000;
  char *many = malloc(n * 3 + 1), *p = many;
  for (size_t i = 0; i < n; i++)
    p += sprintf(p, "-w ");
  ck_assert_int_eq(tj__options_split(many, &argv, &argc), TJ_OK);
  ck_assert_int_eq(argc, (int)n);
  ck_assert_str_eq(argv[n - 1], "-w");
  ck_assert_ptr_null(argv[n]);
  free(argv);
  free(many);
}
END_TEST

/* Each would make the compiler exit() (-mllvm, -help: the host program
 * ends), write or read files the key cannot see, or retarget the code.
 * Refused with TJ_EINVAL before the key or the compiler: no compile. */
static const char *const refused_options[] = {
  "-mllvm -bogus-flag", "-mllvm -help", "-mllvm=-help", "-help", "--help",
  "-h", "--version", "-###", "-v", "@/etc/passwd", "@opts.rsp",
  "-Xclang -load -Xclang /tmp/plugin.so", "-fplugin=/tmp/plugin.so",
  "-fpass-plugin=/tmp/p.so", "-o /tmp/out.o", "-o/tmp/out.o", "-save-temps",
  "-save-temps=obj", "-MD", "-MF /tmp/deps", "-ftime-trace", "--time=/tmp/t",
  "-Wl,--version", "-Wp,-MD,/tmp/deps", "-Wa,-o,/tmp/x", "-include /etc/passwd",
  "-include/etc/passwd", "-isystem relative", "-iquote", 
  "--pre-include=/etc/passwd", "--offload-arch=gfx900", "--cuda-gpu-arch=gfx900",
  "-march=gfx900", "-mcpu=gfx900", "-target x86_64-linux-gnu", "-mxnack",
  "-msramecc", "--gpu-architecture=sm_80", "-arch=sm_80", "-arch sm_80",
  "-x c", "-E", "-S", "-c", "-emit-llvm", "-fgpu-rdc", "-rdc=true", "-dlto",
  "-nogpulib", "--rocm-path=/tmp", "--hip-device-lib-path=/tmp",
  "-working-directory=/tmp", "-B/tmp", "--config /tmp/cfg", "-Xptxas -v",
  "--ptxas-options=-v", "--create-pch=/tmp/p", "--use-pch=/tmp/p",
  "foo.cpp", "-", "--", "-I relative/dir", "-Irelative", "-I", "-D",
  "-D -mllvm", "-D -DX", "-D @opts.rsp", "-U @x", "-U", "-std=bogus", "-std", "-O4", "-Ofast2",
  "-Wfoo,bar", "-W", "-DX=\x1b[2J", "-DX=\x7f", "--maxrregcount=-1",
  "--maxrregcount=1e3", "-ftz=maybe", "-ffp-contract=", "-fno-such-flag",
};

START_TEST(options_the_compiler_could_exit_on_are_refused)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  size_t n = sizeof refused_options / sizeof refused_options[0];
  for (size_t i = 0; i < n; i++) {
    tj_kernel *k = NULL;
    int rc = tj_kernel_compile(rt, probe_source, "probe", refused_options[i], &k);
    ck_assert_msg(rc == TJ_EINVAL, "'%s' was not refused: %s: %s",
                  refused_options[i], tj_strerror(rc), tj_errmsg(rt));
    /* tj_kernel_compile is tj_module_compile's shortcut: its checks */
    ck_assert_msg(strstr(tj_errmsg(rt), "tj_module_compile:"), "%s", tj_errmsg(rt));
    ck_assert_ptr_null(k);
  }
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, 0);
  /* The message names the option. */
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_kernel_compile(rt, probe_source, "probe",
                                     "-w -mllvm -help", &k), TJ_EINVAL);
  ck_assert_msg(strstr(tj_errmsg(rt), "-mllvm"), "%s", tj_errmsg(rt));
  tj_runtime_close(rt);
}
END_TEST

/* Every compile gets the platform's base options; on NVIDIA, from NVRTC
 * 12.9 (which would answer a compile from the driver's compute cache,
 * outside the cache's checks), -no-cache among them. */
START_TEST(nvrtc_leaves_the_drivers_cache_alone)
{
  char store[2048];
  const char *opts[TJ__MAX_BASE_OPTIONS];
  int n = tj__base_options(TEST_ARCH, store, sizeof store, opts);
  ck_assert_int_gt(n, 0);
  ck_assert_int_le(n, TJ__MAX_BASE_OPTIONS);
  int found = 0;
  for (int i = 0; i < n; i++)
    found += strcmp(opts[i], "-no-cache") == 0;
#if defined(TJ_PLATFORM_NVIDIA)
  int maj = 0, min = 0;
  ck_assert_int_eq(nvrtcVersion(&maj, &min), NVRTC_SUCCESS);
  ck_assert_int_eq(found, (maj > 12 || (maj == 12 && min >= 9)));
#else
  ck_assert_int_eq(found, 0);
#endif
}
END_TEST

/* The documented options, each checked alone, and a set of them compiled
 * together (and in the separate-argument forms) by the real compiler. */
START_TEST(documented_options_pass_and_compile)
{
#if defined(TJ_PLATFORM_NVIDIA)
  static const char *const each[] = {
    "-DX", "-DX=1", "-D X=1", "--define-macro=X", "--define-macro X", "-UX",
    "-U X", "--undefine-macro=X", "-I/usr/include", "-I /usr/include",
    "--include-path=/usr/include", "--include-path /usr/include", "-std=c++17",
    "--std=c++20", "-G", "--device-debug", "-lineinfo", "--generate-line-info",
    "-dopt=on", "--Ofast-compile=min", "--maxrregcount=64", "-maxrregcount=32",
    "-ftz=true", "--prec-div=false", "-prec-sqrt=true", "-fmad=false",
    "--use_fast_math", "-use_fast_math", "--extra-device-vectorization",
    "-default-device", "--restrict", "-w", "--disable-warnings", "-err-no",
    "--diag-suppress=177,550", "-diag-error=20", "-opt-info=inline",
    "--split-compile=2", "--device-int128", "--brief-diagnostics=true",
  };
  static const char together[] =
      "-DX=1 -D Y=2 -UZ -I /usr/include --use_fast_math -ftz=true "
      "-prec-div=false -lineinfo --maxrregcount=64 -default-device";
#else
  static const char *const each[] = {
    "-DX", "-DX=1", "-D X=1", "-DF(a)=a", "-D\xc3\xa9=1", "-UX", "-U X",
    "-I/usr/include", "-I /usr/include", "-I/tmp/\xc3\xa9", "-O0", "-O1",
    "-O2", "-O3", "-Os", "-Oz", "-std=c++17", "-std=c++20", "-ffast-math",
    "-fno-fast-math", "-ffinite-math-only", "-fno-unroll-loops",
    "-fgpu-flush-denormals-to-zero", "-ffp-contract=fast", "-ffp-model=precise",
    "-fdenormal-fp-math=preserve-sign", "-ftemplate-depth=512", "-Wall",
    "-Wextra", "-Werror", "-Wno-unused-variable", "-Werror=format",
    "-Wframe-larger-than=4096", "-w", "-pedantic", "-g", "-g0", "-mcumode",
    "-mno-cumode", "-mwavefrontsize64", "-munsafe-fp-atomics",
    "--gpu-max-threads-per-block=256", "-mcode-object-version=4",
  };
  static const char together[] =
      "-DX=1 -D Y=2 -UZ -I /usr/include -O2 -std=c++17 -ffast-math -Wall "
      "-Wno-unused -mcumode -ffp-contract=fast";
#endif
  char why[512];
  for (size_t i = 0; i < sizeof each / sizeof each[0]; i++) {
    char **argv = NULL;
    int argc = 0;
    ck_assert_int_eq(tj__options_split(each[i], &argv, &argc), TJ_OK);
    int rc = tj__options_check((const char *const *)argv, argc, why, sizeof why);
    ck_assert_msg(rc == TJ_OK, "'%s' refused: %s", each[i], why);
    free(argv);
  }
  static const char src[] =
      "#if X != 1 || Y != 2\n#error the macros did not arrive\n#endif\n"
      "extern \"C\" __global__ void probe(float *p) { *p = *p * 2.0f + 1.0f; }\n";
  tj_runtime *rt = open_compile_only(NULL, 0);
  compile_ok(rt, src, "probe", together);
  tj_runtime_close(rt);
}
END_TEST

/* ------------------------------------------------------------ archs */

START_TEST(malformed_arch_features_are_refused)
{
#if defined(TJ_PLATFORM_AMD)
  /* Each of these reached comgr, which aborted the process. */
  static const char *const bad[] = {
    "gfx90a:foo+", "gfx90a:", "gfx90a:xnack", "gfx90a:sramecc",
    "gfx90a:xnack+:xnack-", "gfx90a:xnack+:xnack+", "gfx90a::xnack+",
    "gfx90a:xnack+:", "gfx90a:+", "gfx90a:xnack+-", "gfx90a:XNACK+",
    "gfx1030:xnack+", "gfx900:sramecc+", "gfx90a:xnack+:sramecc-:xnack+",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tj_options o = {0};
    o.flags = TJ_NO_DEVICE | TJ_CACHE_DISABLE;
    o.arch = bad[i];
    tj_runtime *rt = NULL;
    int rc = tj_runtime_open(&rt, &o);
    ck_assert_msg(rc == TJ_EARCH, "%s: %s: %s", bad[i], tj_strerror(rc), tj_errmsg(rt));
    ck_assert_msg(strstr(tj_errmsg(rt), "feature"), "%s", tj_errmsg(rt));
    tj_runtime_close(rt);
  }
#else
  static const char *const bad[] = {"sm_90:xnack+", "sm_90b", "sm_", "sm_90aa",
                                    "sm_+90", "sm_090", "sm_-90",
                                    "sm_99999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tj_options o = {0};
    o.flags = TJ_NO_DEVICE | TJ_CACHE_DISABLE;
    o.arch = bad[i];
    tj_runtime *rt = NULL;
    ck_assert_int_eq(tj_runtime_open(&rt, &o), TJ_EARCH);
    tj_runtime_close(rt);
  }
#endif
}
END_TEST

static void key_for_arch(const char *arch, char *canon, char key[TJ__KEY_HEX])
{
  tj_options o = {0};
  o.flags = TJ_NO_DEVICE | TJ_CACHE_DISABLE;
  o.arch = arch;
  tj_runtime *rt = NULL;
  int rc = tj_runtime_open(&rt, &o);
  ck_assert_msg(rc == TJ_OK, "%s: %s", arch, tj_errmsg(rt));
  strcpy(canon, tj_runtime_arch(rt));
  tj_kernel_info info = compile_ok(rt, probe_source, "probe", "");
  strcpy(key, info.key);
  tj_runtime_close(rt);
}

START_TEST(one_target_has_one_spelling_and_one_key)
{
#if defined(TJ_PLATFORM_AMD)
  char canon[64];
  ck_assert_int_eq(tj__arch_canonical("gfx90a:xnack-:sramecc+", canon, sizeof canon), TJ_OK);
  ck_assert_str_eq(canon, "gfx90a:sramecc+:xnack-");
  ck_assert_int_eq(tj__arch_canonical("gfx90a:xnack+", canon, sizeof canon), TJ_OK);
  ck_assert_str_eq(canon, "gfx90a:xnack+");
  ck_assert_int_eq(tj__arch_canonical("gfx90a", canon, sizeof canon), TJ_OK);
  ck_assert_str_eq(canon, "gfx90a");
  ck_assert_int_eq(tj__arch_canonical("gfx90a:xnack-:sramecc+", canon, 8), TJ_ERANGE);
  char a[64], b[64], ka[TJ__KEY_HEX], kb[TJ__KEY_HEX], kc[TJ__KEY_HEX];
  key_for_arch("gfx90a:xnack-:sramecc+", a, ka);
  key_for_arch("gfx90a:sramecc+:xnack-", b, kb);
  ck_assert_str_eq(a, "gfx90a:sramecc+:xnack-");
  ck_assert_str_eq(a, b);
  ck_assert_str_eq(ka, kb);
  key_for_arch("gfx90a:sramecc-:xnack-", b, kc);
  ck_assert_str_ne(ka, kc);
#else
  char canon[64], a[64], ka[TJ__KEY_HEX];
  ck_assert_int_eq(tj__arch_canonical("sm_90a", canon, sizeof canon), TJ_OK);
  ck_assert_str_eq(canon, "sm_90a");
  key_for_arch("sm_90", a, ka);
  ck_assert_str_eq(a, "sm_90");
#endif
}
END_TEST

/* ------------------------------------------------------------ environment */

/* CPATH made clang find a header with no option at all: the code changed,
 * the key did not.  Now a build is refused while it is set, cache or no. */
START_TEST(include_path_variables_refuse_the_build)
{
  char *dir = test_tmpdir(), *hdr = test_path(dir, "tj_probe.h");
  test_write_text(hdr, "#define TJ_PROBE 2\n");
  static const char src[] =
      "#if __has_include(\"tj_probe.h\")\n#include \"tj_probe.h\"\n#endif\n"
      "#ifndef TJ_PROBE\n#define TJ_PROBE 1\n#endif\n"
      "extern \"C\" __global__ void probe(int *p) { *p = TJ_PROBE; }\n";
#if defined(TJ_PLATFORM_AMD)
  static const char *const vars[] = {"CPATH", "CPLUS_INCLUDE_PATH",
                                     "CCC_OVERRIDE_OPTIONS"};
#else
  static const char *const vars[] = {"NVRTC_APPEND_FLAGS"};
#endif
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    setenv(vars[i], dir, 1);
    tj_runtime *rt = open_compile_only(NULL, 0); /* opening still works */
    tj_kernel *k = NULL;
    int rc = tj_kernel_compile(rt, src, "probe", "", &k);
    ck_assert_msg(rc == TJ_EINVAL, "%s: %s", vars[i], tj_strerror(rc));
    ck_assert_msg(strstr(tj_errmsg(rt), vars[i]), "%s", tj_errmsg(rt));
    ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_EINVAL);
    tj_runtime_close(rt);
    setenv(vars[i], "", 1); /* empty is as good as unset */
    rt = open_compile_only(NULL, 0);
    compile_ok(rt, src, "probe", "");
    tj_runtime_close(rt);
    unsetenv(vars[i]);
  }
  unlink(hdr);
  rmdir(dir);
  free(hdr);
  free(dir);
}
END_TEST

START_TEST(keyed_variables_change_the_key)
{
#if defined(TJ_PLATFORM_AMD)
  const char *var = "ROCM_PATH";
#else
  const char *var = "EDG_MODULES_PATH";
#endif
  unsetenv(var);
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_kernel_info plain = compile_ok(rt, probe_source, "probe", "");
  char want[TJ__KEY_HEX];
  strcpy(want, plain.key);
  tj_runtime_close(rt);
  setenv(var, "/nonexistent/tokitai-jit-test", 1);
  rt = open_compile_only(NULL, 0);
  tj_kernel_info with = compile_ok(rt, probe_source, "probe", "");
  ck_assert_str_ne(want, with.key);
  tj_runtime_close(rt);
  unsetenv(var);
#if defined(TJ_PLATFORM_AMD)
  /* A value with a newline cannot pass for a second variable. */
  char one[512], two[512], why[256];
  setenv("ROCM_PATH", "x\nHIP_DEVICE_LIB_PATH=z", 1);
  ck_assert_int_eq(tj__compiler_environment(one, sizeof one, why, sizeof why), TJ_OK);
  setenv("ROCM_PATH", "x", 1);
  setenv("HIP_DEVICE_LIB_PATH", "z", 1);
  ck_assert_int_eq(tj__compiler_environment(two, sizeof two, why, sizeof why), TJ_OK);
  ck_assert_str_ne(one, two);
  unsetenv("ROCM_PATH");
  unsetenv("HIP_DEVICE_LIB_PATH");
#endif
}
END_TEST

/* The key is made at open; a variable set afterwards must not reach a
 * compile made under that key. */
START_TEST(environment_changed_after_open_is_refused)
{
#if defined(TJ_PLATFORM_AMD)
  const char *var = "RC_DEBUG_OPTIONS";
#else
  const char *var = "CPPCX_INCLUDE_PATH";
#endif
  unsetenv(var);
  tj_runtime *rt = open_compile_only(NULL, 0);
  setenv(var, "1", 1);
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_kernel_compile(rt, probe_source, "probe", "", &k), TJ_EINVAL);
  ck_assert_msg(strstr(tj_errmsg(rt), "changed since"), "%s", tj_errmsg(rt));
  unsetenv(var);
  compile_ok(rt, probe_source, "probe", "");
  tj_runtime_close(rt);
}
END_TEST

/* hipRTC's `-include hiprtc_runtime.h` and NVRTC's `-include cuda_fp16.h`
 * and quoted includes were looked up in the working directory first: a
 * file there replaced them, under the same key. */
START_TEST(working_directory_cannot_change_the_code)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_kernel_info outside = compile_ok(rt, probe_source, "probe", "");
  size_t size = outside.code_size;
  tj_runtime_close(rt);

  char *dir = test_tmpdir(), cwd[4096];
  static const char *const names[] = {"hiprtc_runtime.h", "cuda_fp16.h",
                                      "tj_cwd_probe.h"};
  for (size_t i = 0; i < 3; i++) {
    char *p = test_path(dir, names[i]);
    test_write_text(p, "#error found in the working directory\n");
    free(p);
  }
  ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
  ck_assert_int_eq(chdir(dir), 0);
  static const char src[] =
      "#if __has_include(\"tj_cwd_probe.h\")\n#include \"tj_cwd_probe.h\"\n#endif\n"
      "extern \"C\" __global__ void probe(int *p) { *p = 1; }\n";
  rt = open_compile_only(NULL, 0);
  tj_kernel_info inside = compile_ok(rt, src, "probe", "");
  ck_assert_uint_gt(inside.code_size, 0);
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_runtime_close(rt);
  ck_assert_int_eq(chdir(cwd), 0);
  ck_assert_uint_gt(size, 0);
  for (size_t i = 0; i < 3; i++) {
    char *p = test_path(dir, names[i]);
    unlink(p);
    free(p);
  }
  rmdir(dir);
  free(dir);
}
END_TEST

/* ------------------------------------------------------------ fingerprint */

START_TEST(fingerprint_names_the_loaded_libraries)
{
  tj_runtime *a = open_compile_only(NULL, 0), *b = open_compile_only(NULL, 0);
  const char *fp = tj_runtime_compiler(a);
  const char *digest = strstr(fp, " b:");
  ck_assert_msg(digest, "no library digest in '%s'", fp);
  /* then " e:" and " h:" with 16 digits each (runtime.c, set_identity) */
  ck_assert_uint_eq(strlen(digest), 3 * (3 + 16));
  ck_assert_msg(digest[19] == ' ' && strncmp(digest + 19, " e:", 3) == 0 &&
                strncmp(digest + 38, " h:", 3) == 0, "%s", fp);
  for (int i = 3; i < 19; i++)
    ck_assert_msg(strchr("0123456789abcdef", digest[i]), "%s", fp);
  ck_assert_int_ne(strncmp(digest + 3, "0000000000000000", 16), 0);
  ck_assert_str_eq(fp, tj_runtime_compiler(b));
  ck_assert_uint_lt(strlen(fp), sizeof ((tj_runtime *)0)->compiler);
#if defined(TJ_PLATFORM_AMD)
  ck_assert_msg(strncmp(fp, "hiprtc ", 7) == 0, "%s", fp);
#else
  ck_assert_msg(strncmp(fp, "nvrtc ", 6) == 0, "%s", fp);
  /* NVRTC loads its builtins at the first compile; the digest names them
   * from their file beside libnvrtc without loading them (a warm start
   * would pay for it), and after a compile they are the ones it named. */
  int maj = 0, min = 0;
  char name[64], why[512];
  ck_assert_int_eq(nvrtcVersion(&maj, &min), NVRTC_SUCCESS);
  snprintf(name, sizeof name, "libnvrtc-builtins.so.%d.%d", maj, min);
  compile_ok(a, probe_source, "probe", "");
  void *h = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
  ck_assert_msg(h, "%s is not loaded after a compile", name);
  dlclose(h);
  ck_assert_msg(tj__compiler_libraries_hold(why, sizeof why), "%s", why);
#endif
  /* Stable after a compile has loaded whatever the compiler loads late. */
  compile_ok(a, probe_source, "probe", "");
  tj_runtime *c = open_compile_only(NULL, 0);
  ck_assert_str_eq(fp, tj_runtime_compiler(c));
  tj_runtime_close(c);
  tj_runtime_close(b);
  tj_runtime_close(a);
}
END_TEST

/* ------------------------------------------------------------ tj_errmsg */

#define THREADS 8
#define ROUNDS 300

typedef struct errmsg_job {
  tj_runtime *rt;
  int id;
  int wrong;
  pthread_barrier_t *start;
} errmsg_job;

static void *fail_and_read(void *p)
{
  errmsg_job *job = p;
  char name[64];
  snprintf(name, sizeof name, "no_such_kernel_%d", job->id);
  pthread_barrier_wait(job->start);
  for (int r = 0; r < ROUNDS; r++) {
    tj_kernel *k = NULL;
    if (tj_kernel_get(job->rt, name, &k) != TJ_ENOENT)
      job->wrong++;
    /* Another thread's failure must neither free nor replace this one. */
    const char *msg = tj_errmsg(job->rt);
    char copy[256];
    snprintf(copy, sizeof copy, "%s", msg);
    if (!strstr(copy, name))
      job->wrong++;
  }
  return NULL;
}

START_TEST(errmsg_is_per_thread)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  pthread_t t[THREADS];
  errmsg_job jobs[THREADS];
  for (int i = 0; i < THREADS; i++) {
    jobs[i] = (errmsg_job){rt, i, 0, &start};
    ck_assert_int_eq(pthread_create(&t[i], NULL, fail_and_read, &jobs[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    ck_assert_msg(jobs[i].wrong == 0, "thread %d read %d wrong messages", i,
                  jobs[i].wrong);
  }
  pthread_barrier_destroy(&start);
  /* This thread's message is its own: the others' did not touch it. */
  ck_assert_str_eq(tj_errmsg(rt), "");
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_kernel_get(rt, "mine", &k), TJ_ENOENT);
  ck_assert_msg(strstr(tj_errmsg(rt), "'mine'"), "%s", tj_errmsg(rt));
  tj_runtime_close(rt);
}
END_TEST

/* One thread: as before.  Right after a failure, after a failed open, and
 * a message per runtime, also past the per-thread table's size. */
START_TEST(errmsg_single_thread_semantics)
{
  tj_options o = {0};
  o.flags = TJ_NO_DEVICE | TJ_CACHE_DISABLE;
  o.arch = "gfx0bogus";
  tj_runtime *bad = NULL;
  ck_assert_int_ne(tj_runtime_open(&bad, &o), TJ_OK);
  ck_assert_ptr_nonnull(bad);
  ck_assert(strlen(tj_errmsg(bad)) > 0);
  tj_runtime_close(bad);
  ck_assert_str_eq(tj_errmsg(NULL), "no runtime (NULL handle)");

  tj_runtime *rts[12];
  for (int i = 0; i < 12; i++) {
    rts[i] = open_compile_only(NULL, 0);
    ck_assert_str_eq(tj_errmsg(rts[i]), "");
    char name[32];
    snprintf(name, sizeof name, "missing_%d", i);
    tj_kernel *k = NULL;
    ck_assert_int_eq(tj_kernel_get(rts[i], name, &k), TJ_ENOENT);
    ck_assert_msg(strstr(tj_errmsg(rts[i]), name), "%s", tj_errmsg(rts[i]));
  }
  /* The newest runtimes keep theirs; a message is never another's. */
  for (int i = 4; i < 12; i++) {
    char name[32];
    snprintf(name, sizeof name, "missing_%d'", i);
    ck_assert_msg(strstr(tj_errmsg(rts[i]), name), "%d: %s", i, tj_errmsg(rts[i]));
  }
  for (int i = 0; i < 4; i++) {
    const char *m = tj_errmsg(rts[i]);
    char name[32];
    snprintf(name, sizeof name, "missing_%d'", i);
    ck_assert_msg(m[0] == '\0' || strstr(m, name), "%d: %s", i, m);
  }
  for (int i = 0; i < 12; i++)
    tj_runtime_close(rts[i]);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("compiler_input");
  TCase *tc = test_case(s, "compiler_input", 600);
  tcase_add_test(tc, options_past_the_64th_reach_the_compiler);
  tcase_add_test(tc, options_split_into_one_block);
  tcase_add_test(tc, options_the_compiler_could_exit_on_are_refused);
  tcase_add_test(tc, documented_options_pass_and_compile);
  tcase_add_test(tc, nvrtc_leaves_the_drivers_cache_alone);
  tcase_add_test(tc, malformed_arch_features_are_refused);
  tcase_add_test(tc, one_target_has_one_spelling_and_one_key);
  tcase_add_test(tc, include_path_variables_refuse_the_build);
  tcase_add_test(tc, keyed_variables_change_the_key);
  tcase_add_test(tc, environment_changed_after_open_is_refused);
  tcase_add_test(tc, working_directory_cannot_change_the_code);
  tcase_add_test(tc, fingerprint_names_the_loaded_libraries);
  tcase_add_test(tc, errmsg_is_per_thread);
  tcase_add_test(tc, errmsg_single_thread_semantics);
  return run_suite(s);
}
