/* check_user_kernels.c: a caller's own kernels: modules, C++ entry names,
 * missing entries, and headers that never go stale.  Compile-only for
 * TEST_ARCH, on a real SQLite file, with the real compiler. */
#include "testutil.h"
#include "testsql.h"
#include "internal.h" /* tj__headers_digest */

#include <sqlite3.h>
#include <stdint.h>
#include <sys/stat.h>

static const char module_source[] =
  "extern \"C\" __global__ void saxpy(float *x) { x[0] = 1.0f; }\n"
  "template <typename T> __global__ void scale(T *x) { x[0] *= (T)2; }\n"
  "namespace ops { __global__ void gelu(float *x) { x[0] = 3.0f; } }\n"
  "__global__ void plain(float *x) { x[0] = 4.0f; }\n"
  "__global__ void twice(float *x) { x[0] = 5.0f; }\n"
  "__global__ void twice(int *x) { x[0] = 6; }\n";

static long rows_in(const char *path, const char *where)
{
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM code_objects%s%s",
           where ? " WHERE " : "", where ? where : "");
  return (long)tsql_int(path, sql);
}

static tj_stats stats_of(tj_runtime *rt)
{
  tj_stats s;
  ck_assert_int_eq(tj_runtime_get_stats(rt, &s), TJ_OK);
  return s;
}

static int compile(tj_runtime *rt, const char *source, const char *const *opts,
                   int nopts, const tj_header *h, int nh,
                   const char *const *entries, int ne, tj_module **m)
{
  tj_module_source src = {sizeof src, source, "test.hip", opts, nopts, h, nh,
                          entries, ne};
  return tj_module_compile(rt, &src, m);
}

static tj_module_info info_of(const tj_module *m)
{
  tj_module_info info = {.size = sizeof info};
  ck_assert_int_eq(tj_module_get_info(m, &info), TJ_OK);
  return info;
}

/* Whether the code holds the 32-bit constant v (an immediate operand). */
static int code_has_u32(const tj_module *m, uint32_t v)
{
  tj_module_info i = info_of(m);
  unsigned char b[4] = {v & 255, (v >> 8) & 255, (v >> 16) & 255, v >> 24};
  return memmem(i.code, i.code_size, b, 4) != NULL;
}

START_TEST(module_compiles_once_and_stores_one_row)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  const char *entries[] = {"scale<float>", "ops::gelu", "saxpy", "plain"};
  tj_runtime *rt = open_compile_only(db, 0);
  tj_module *m = NULL, *again = NULL;
  ck_assert_msg(compile(rt, module_source, NULL, 0, NULL, 0, entries, 4, &m) == TJ_OK,
                "%s", tj_errmsg(rt));
  ck_assert_int_eq(compile(rt, module_source, NULL, 0, NULL, 0, entries, 4, &again), TJ_OK);
  ck_assert_ptr_eq(m, again);
  tj_stats s = stats_of(rt);
  ck_assert_uint_eq(s.compiles, 1);
  ck_assert_uint_eq(s.memory_hits, 1);
  ck_assert_int_eq(rows_in(db, NULL), 1);

  tj_module_info i = info_of(m);
  ck_assert_int_eq(i.num_entries, 4); /* sorted */
  ck_assert_str_eq(i.entries[0], "ops::gelu");
  ck_assert_str_eq(i.lowered[0], "_ZN3ops4geluEPf");
  ck_assert_str_eq(i.entries[1], "plain");
  ck_assert_str_eq(i.lowered[1], "_Z5plainPf");
  ck_assert_str_eq(i.entries[2], "saxpy");
  ck_assert_str_eq(i.lowered[2], "saxpy");
  ck_assert_str_eq(i.lowered[3], "_Z5scaleIfEvPT_");
  tj_kernel *k1, *k2;
  ck_assert_int_eq(tj_module_kernel(m, "scale<float>", &k1), TJ_OK);
  ck_assert_int_eq(tj_module_kernel(m, "saxpy", &k2), TJ_OK);
  ck_assert_ptr_ne(k1, k2);
  tj_kernel_info ki;
  ck_assert_int_eq(tj_kernel_get_info(k1, &ki), TJ_OK);
  ck_assert_str_eq(ki.key, i.key);
  ck_assert_int_eq(tj_module_kernel(m, "scale<int>", &k1), TJ_ENOENT);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "scale<int>"));
  ck_assert_int_eq(rows_in(db, "entries LIKE '%scale<float>\t_Z5scaleIfEvPT_%'"), 1);
  char key[33];
  snprintf(key, sizeof key, "%s", i.key);
  tj_runtime_close(rt);

  /* Another runtime finds the row, lowered names and all. */
  rt = open_compile_only(db, 0);
  ck_assert_int_eq(compile(rt, module_source, NULL, 0, NULL, 0, entries, 4, &m), TJ_OK);
  s = stats_of(rt);
  ck_assert_uint_eq(s.compiles, 0);
  ck_assert_uint_eq(s.cache_hits, 1);
  i = info_of(m);
  ck_assert_str_eq(i.key, key);
  ck_assert_int_eq(i.origin, TJ_FROM_CACHE);
  ck_assert_str_eq(i.lowered[3], "_Z5scaleIfEvPT_");
  tj_runtime_close(rt);
  free(db);
  free(dir);
}
END_TEST

START_TEST(c_names_share_one_row_and_expressions_are_keyed)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(db, 0);
  tj_kernel *a, *b, *c;
  ck_assert_int_eq(tj_kernel_compile(rt, module_source, "saxpy", NULL, &a), TJ_OK);
  ck_assert_int_eq(tj_kernel_compile(rt, module_source, "plain", NULL, &b), TJ_OK);
  tj_kernel_info ia, ib, ic;
  tj_kernel_get_info(a, &ia);
  tj_kernel_get_info(b, &ib);
  ck_assert_str_eq(ia.key, ib.key); /* C names do not change the code */
  ck_assert_int_eq(rows_in(db, NULL), 1);
  ck_assert_uint_eq(stats_of(rt).compiles, 1); /* the second finds the row */
  ck_assert_int_eq(tj_kernel_compile(rt, module_source, "scale<float>", NULL, &c), TJ_OK);
  tj_kernel_get_info(c, &ic);
  ck_assert_str_ne(ia.key, ic.key);
  ck_assert_int_eq(rows_in(db, NULL), 2);
  tj_runtime_close(rt);
  free(db);
  free(dir);
}
END_TEST

START_TEST(missing_entry_fails_at_compile_and_stores_nothing)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(db, 0);
  tj_module *m = NULL;
  const char *c_name[] = {"saxpy", "nosuch"};
  ck_assert_int_eq(compile(rt, module_source, NULL, 0, NULL, 0, c_name, 2, &m), TJ_ENOENT);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "'nosuch'"));
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "test.hip"));
  const char *expr[] = {"saxpy", "ops::nosuch"};
  ck_assert_int_eq(compile(rt, module_source, NULL, 0, NULL, 0, expr, 2, &m), TJ_ENOENT);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "ops::nosuch"));
  const char *overloaded[] = {"twice"};
  ck_assert_int_eq(compile(rt, module_source, NULL, 0, NULL, 0, overloaded, 1, &m), TJ_ENOENT);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "overloaded"));
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_compile(rt, module_source, "nosuch", NULL, &k), TJ_ENOENT);
  ck_assert_int_eq(rows_in(db, NULL), 0);
  /* A C name the cached code lacks is missing too, without a compile. */
  ck_assert_int_eq(tj_kernel_compile(rt, module_source, "saxpy", NULL, &k), TJ_OK);
  tj_runtime_close(rt);
  rt = open_compile_only(db, 0);
  ck_assert_int_eq(tj_kernel_compile(rt, module_source, "nosuch", NULL, &k), TJ_ENOENT);
  ck_assert_uint_eq(stats_of(rt).compiles, 0);
  ck_assert_int_eq(rows_in(db, NULL), 1);
  tj_runtime_close(rt);
  free(db);
  free(dir);
}
END_TEST

START_TEST(bad_module_arguments_are_refused)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_module *m;
  const char *e[] = {"k"};
  tj_module_source src = {sizeof src, "x", NULL, NULL, 0, NULL, 0, e, 1};
  src.size = 8;
  ck_assert_int_eq(tj_module_compile(rt, &src, &m), TJ_EINVAL);
  src.size = sizeof src;
  src.num_entries = 0;
  ck_assert_int_eq(tj_module_compile(rt, &src, &m), TJ_EINVAL);
  const char *bad[] = {"a\nb"};
  src.entries = bad;
  src.num_entries = 1;
  ck_assert_int_eq(tj_module_compile(rt, &src, &m), TJ_EINVAL);
  src.entries = e;
  src.num_options = 1; /* options NULL */
  ck_assert_int_eq(tj_module_compile(rt, &src, &m), TJ_EINVAL);
  src.num_options = 0;
  tj_header h = {"x.h", NULL};
  src.headers = &h;
  src.num_headers = 1;
  ck_assert_int_eq(tj_module_compile(rt, &src, &m), TJ_EINVAL);
  ck_assert_int_eq(tj_module_compile(NULL, &src, &m), TJ_EINVAL);
  ck_assert_int_eq(tj_module_kernel(NULL, "k", NULL), TJ_EINVAL);
  tj_runtime_close(rt);
}
END_TEST

/* ------------------------------------------------------------ headers */

static const char const_kernel[] =
  "#include \"defs.h\"\n"
  "extern \"C\" __global__ void k(unsigned *x) { x[0] = MYVAL; }\n";

/* Compile src with opts in a new runtime on db; the key and whether the
 * code holds `want`. */
static void compile_fresh(const char *db, const char *src, const char *const *opts,
                          int n, const tj_header *h, int nh, char key[33],
                          uint32_t want, int compiled)
{
  tj_runtime *rt = open_compile_only(db, 0);
  tj_module *m;
  const char *e[] = {"k"};
  ck_assert_msg(compile(rt, src, opts, n, h, nh, e, 1, &m) == TJ_OK, "%s",
                tj_errmsg(rt));
  snprintf(key, 33, "%s", info_of(m).key);
  ck_assert_uint_eq(stats_of(rt).compiles, (unsigned)compiled);
  ck_assert_msg(code_has_u32(m, want), "code lacks 0x%x", want);
  tj_runtime_close(rt);
}

START_TEST(file_header_change_gives_new_key_and_code)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  char *inc = test_path(dir, "inc dir"), *defs = test_path(inc, "defs.h");
  ck_assert_int_eq(mkdir(inc, 0700), 0);
  test_write_text(defs, "#define MYVAL 0x12345678u\n");
  const char *opts[] = {"-I", inc};
  char k1[33], k2[33], k3[33];
  compile_fresh(db, const_kernel, opts, 2, NULL, 0, k1, 0x12345678u, 1);
  compile_fresh(db, const_kernel, opts, 2, NULL, 0, k3, 0x12345678u, 0);
  ck_assert_str_eq(k1, k3); /* unchanged: a hit */
  test_write_text(defs, "#define MYVAL 0x0badf00du\n");
  compile_fresh(db, const_kernel, opts, 2, NULL, 0, k2, 0x0badf00du, 1);
  ck_assert_str_ne(k1, k2);
  free(defs);
  free(inc);
  free(db);
  free(dir);
}
END_TEST

START_TEST(in_memory_header_change_gives_new_key_and_code)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  tj_header h = {"defs.h", "#define MYVAL 0x12345678u\n"};
  char k1[33], k2[33];
  compile_fresh(db, const_kernel, NULL, 0, &h, 1, k1, 0x12345678u, 1);
  h.contents = "#define MYVAL 0x0badf00du\n";
  compile_fresh(db, const_kernel, NULL, 0, &h, 1, k2, 0x0badf00du, 1);
  ck_assert_str_ne(k1, k2);
  free(db);
  free(dir);
}
END_TEST

/* Through a nested include and <...> in a user -I directory, and through
 * every spelling of the include option. */
START_TEST(nested_and_angle_includes_are_hashed)
{
  static const char src[] =
    "#include \"top.h\"\n"
    "extern \"C\" __global__ void k(unsigned *x) { x[0] = MYVAL; }\n";
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  char *a = test_path(dir, "a"), *b = test_path(dir, "b"), *sub = test_path(b, "sub");
  char *top = test_path(a, "top.h"), *mid = test_path(a, "mid.h"),
       *leaf = test_path(sub, "leaf.h");
  ck_assert_int_eq(mkdir(a, 0700) | mkdir(b, 0700) | mkdir(sub, 0700), 0);
  test_write_text(top, "#pragma once\n#if 1\n#  include \"mid.h\"\n#endif\n");
  test_write_text(mid, "#include <sub/leaf.h>\n");
  test_write_text(leaf, "#define MYVAL 0x11223344u\n");
  char ia[512], ib[512], ic[512];
  snprintf(ia, sizeof ia, "-I%s", a);
#if defined(TJ_PLATFORM_NVIDIA)
  snprintf(ib, sizeof ib, "--include-path=%s", b);
#else /* clang reads --include-path= as --include; -isystem there */
  snprintf(ib, sizeof ib, "-isystem%s", b);
#endif
  const char *opts[] = {ia, ib};
  char k1[33], k2[33], k3[33], k4[33];
  compile_fresh(db, src, opts, 2, NULL, 0, k1, 0x11223344u, 1);
  test_write_text(leaf, "#define MYVAL 0x55667788u\n");
  compile_fresh(db, src, opts, 2, NULL, 0, k2, 0x55667788u, 1);
  ck_assert_str_ne(k1, k2);
  /* --include-path DIR (-isystem DIR on AMD), separate */
  snprintf(ic, sizeof ic, "%s", b);
#if defined(TJ_PLATFORM_NVIDIA)
  const char *opts2[] = {ia, "--include-path", ic};
#else
  const char *opts2[] = {ia, "-isystem", ic};
#endif
  compile_fresh(db, src, opts2, 3, NULL, 0, k3, 0x55667788u, 1);
  test_write_text(leaf, "#define MYVAL 0x99aabbccu\n");
  compile_fresh(db, src, opts2, 3, NULL, 0, k4, 0x99aabbccu, 1);
  ck_assert_str_ne(k3, k4);
  free(top), free(mid), free(leaf), free(sub), free(a), free(b);
  free(db);
  free(dir);
}
END_TEST

/* tj_kernel_compile's string: "-I DIR" split on the space, attached -IDIR. */
START_TEST(option_string_include_dirs_are_hashed)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  char *inc = test_path(dir, "inc"), *defs = test_path(inc, "defs.h");
  ck_assert_int_eq(mkdir(inc, 0700), 0);
  char sep[600], att[600];
  snprintf(sep, sizeof sep, " -I  %s ", inc);
  snprintf(att, sizeof att, "-I%s", inc);
  const char *forms[] = {sep, att};
  for (int f = 0; f < 2; f++) {
    char keys[2][33];
    for (int v = 0; v < 2; v++) {
      test_write_text(defs, v ? "#define MYVAL 2u\n" : "#define MYVAL 1u\n");
      tj_runtime *rt = open_compile_only(db, 0);
      tj_kernel *k;
      ck_assert_msg(tj_kernel_compile(rt, const_kernel, "k", forms[f], &k) == TJ_OK,
                    "%s", tj_errmsg(rt));
      tj_kernel_info i;
      tj_kernel_get_info(k, &i);
      snprintf(keys[v], 33, "%s", i.key);
      ck_assert_int_eq(i.origin, TJ_FROM_COMPILER);
      tj_runtime_close(rt);
    }
    ck_assert_str_ne(keys[0], keys[1]);
  }
  free(defs);
  free(inc);
  free(db);
  free(dir);
}
END_TEST

/* #include MACRO: every file below the include directories counts. */
START_TEST(computed_include_hashes_every_file)
{
  static const char src[] =
    "#define HEADER \"defs.h\"\n#include HEADER\n"
    "extern \"C\" __global__ void k(unsigned *x) { x[0] = MYVAL; }\n";
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  char *inc = test_path(dir, "inc"), *defs = test_path(inc, "defs.h"),
       *other = test_path(inc, "unrelated.txt");
  ck_assert_int_eq(mkdir(inc, 0700), 0);
  test_write_text(defs, "#define MYVAL 0x12345678u\n");
  test_write_text(other, "one\n");
  const char *opts[] = {"-I", inc};
  char k1[33], k2[33];
  compile_fresh(db, src, opts, 2, NULL, 0, k1, 0x12345678u, 1);
  test_write_text(other, "two\n");
  compile_fresh(db, src, opts, 2, NULL, 0, k2, 0x12345678u, 1);
  ck_assert_str_ne(k1, k2);
  free(defs), free(other), free(inc);
  free(db);
  free(dir);
}
END_TEST

/* A header that appears earlier in the search path than the one used. */
START_TEST(shadowing_header_changes_the_key)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  char *a = test_path(dir, "a"), *b = test_path(dir, "b");
  char *in_a = test_path(a, "defs.h"), *in_b = test_path(b, "defs.h");
  ck_assert_int_eq(mkdir(a, 0700) | mkdir(b, 0700), 0);
  test_write_text(in_b, "#define MYVAL 0x12345678u\n");
  const char *opts[] = {"-I", a, "-I", b};
  char k1[33], k2[33];
  compile_fresh(db, const_kernel, opts, 4, NULL, 0, k1, 0x12345678u, 1);
  test_write_text(in_a, "#define MYVAL 0x0badf00du\n");
  compile_fresh(db, const_kernel, opts, 4, NULL, 0, k2, 0x0badf00du, 1);
  ck_assert_str_ne(k1, k2);
  free(in_a), free(in_b), free(a), free(b);
  free(db);
  free(dir);
}
END_TEST

/* NVRTC finds "..." in the working directory (next to the program's name):
 * a header there is keyed, on both platforms. */
START_TEST(working_directory_header_is_hashed)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db"),
       *defs = test_path(dir, "defs.h");
  tj_header h = {"defs.h", "#define MYVAL 0x12345678u\n"}; /* what compiles */
  ck_assert_int_eq(chdir(dir), 0); /* this test's own process (fork mode) */
  test_write_text(defs, "#define MYVAL 0x12345678u\n");
  char k1[33], k2[33];
  compile_fresh(db, const_kernel, NULL, 0, &h, 1, k1, 0x12345678u, 1);
  test_write_text(defs, "#define MYVAL 0x0badf00du\n");
  compile_fresh(db, const_kernel, NULL, 0, &h, 1, k2, 0x12345678u, 1);
  ck_assert_str_ne(k1, k2);
  free(defs);
  free(db);
  free(dir);
}
END_TEST

/* #pragma once goes by file identity: a symlink replaced by a copy of the
 * same bytes may include twice, so it is another key. */
START_TEST(same_file_through_two_names_is_keyed)
{
  static const char src[] =
    "#include \"x.h\"\n#include \"y.h\"\n"
    "extern \"C\" __global__ void k(unsigned *x) { x[0] = MYVAL; }\n";
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  char *inc = test_path(dir, "inc"), *x = test_path(inc, "x.h"), *y = test_path(inc, "y.h");
  ck_assert_int_eq(mkdir(inc, 0700), 0);
  test_write_text(x, "#pragma once\n#define MYVAL 0x12345678u\n");
  ck_assert_int_eq(symlink("x.h", y), 0);
  const char *opts[] = {"-I", inc};
  char k1[33], k2[33];
  compile_fresh(db, src, opts, 2, NULL, 0, k1, 0x12345678u, 1);
  unlink(y);
  test_write_text(y, "#pragma once\n#define MYVAL 0x12345678u\n");
  compile_fresh(db, src, opts, 2, NULL, 0, k2, 0x12345678u, 1);
  ck_assert_str_ne(k1, k2);
  free(x), free(y), free(inc);
  free(db);
  free(dir);
}
END_TEST

/* The AMD compiler reads $CPATH; its headers are keyed on both platforms. */
/* CPATH reaches the compiler: the library refuses to build while it is
 * set (check_compiler_input), and the header scan also follows it, so
 * that if the refusal is ever lifted its headers still decide the key. */
START_TEST(cpath_headers_are_hashed)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  char *inc = test_path(dir, "inc"), *defs = test_path(inc, "defs.h");
  ck_assert_int_eq(mkdir(inc, 0700), 0);
  test_write_text(defs, "#define MYVAL 1u\n");
  tj_header h = {"defs.h", "#define MYVAL 1u\n"}; /* so that it compiles everywhere */
  char k1[33], k2[33];
  const char *opts[] = {"-I", "/"};
  char d1[33], d2[33], why[256];
  setenv("CPATH", inc, 1);
  ck_assert_int_eq(tj__headers_digest(const_kernel, strlen(const_kernel), &h, 1,
                                      opts, 0, d1, why, sizeof why), TJ_OK);
  test_write_text(defs, "#define MYVAL 2u\n");
  ck_assert_int_eq(tj__headers_digest(const_kernel, strlen(const_kernel), &h, 1,
                                      opts, 0, d2, why, sizeof why), TJ_OK);
  unsetenv("CPATH");
  ck_assert_str_ne(d1, d2);
  (void)db, (void)k1, (void)k2;
  free(defs), free(inc);
  free(db);
  free(dir);
}
END_TEST

/* tokitai-jit --compile stores the key the API computes for the same
 * source, entries and options: -I DIR as "-I" "DIR", -D as "-DNAME". */
START_TEST(cli_compile_key_equals_the_api_key)
{
  if (access("./tokitai-jit", X_OK) != 0)
    return; /* the suite runs from the build directory, where it is built */
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  char *inc = test_path(dir, "my inc"), *defs = test_path(inc, "defs.h"),
       *file = test_path(dir, "k.hip");
  ck_assert_int_eq(mkdir(inc, 0700), 0);
  test_write_text(defs, "#define MYVAL 0x12345678u\n");
  test_write_text(file, module_source);
  char cmd[2048], line[4096];
  snprintf(cmd, sizeof cmd, "./tokitai-jit --compile '%s' --entry 'scale<float>' "
           "--entry saxpy --arch %s -I '%s' -D N=4 --option -DM=1 --cache '%s' --json",
           file, TEST_ARCH, inc, db);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(p);
  size_t n = fread(line, 1, sizeof line - 1, p);
  line[n] = '\0';
  ck_assert_int_eq(pclose(p), 0);
  char *at = strstr(line, "\"key\": \"");
  ck_assert_ptr_nonnull(at);
  char cli_key[33];
  snprintf(cli_key, sizeof cli_key, "%s", at + 8);
  ck_assert_ptr_nonnull(strstr(line, "\"origin\": \"compiler\""));

  tj_runtime *rt = open_compile_only(db, 0);
  const char *opts[] = {"-I", inc, "-DN=4", "-DM=1"};
  const char *e[] = {"saxpy", "scale<float>"};
  tj_module *m;
  ck_assert_int_eq(compile(rt, module_source, opts, 4, NULL, 0, e, 2, &m), TJ_OK);
  ck_assert_str_eq(info_of(m).key, cli_key);
  ck_assert_int_eq(info_of(m).origin, TJ_FROM_CACHE);
  tj_runtime_close(rt);
  free(defs), free(inc), free(file);
  free(db);
  free(dir);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("user_kernels");
  TCase *tc = test_case(s, "modules", 300);
  tcase_add_test(tc, module_compiles_once_and_stores_one_row);
  tcase_add_test(tc, c_names_share_one_row_and_expressions_are_keyed);
  tcase_add_test(tc, missing_entry_fails_at_compile_and_stores_nothing);
  tcase_add_test(tc, bad_module_arguments_are_refused);
  tcase_add_test(tc, cli_compile_key_equals_the_api_key);
  TCase *th = test_case(s, "headers", 300);
  tcase_add_test(th, file_header_change_gives_new_key_and_code);
  tcase_add_test(th, in_memory_header_change_gives_new_key_and_code);
  tcase_add_test(th, nested_and_angle_includes_are_hashed);
  tcase_add_test(th, option_string_include_dirs_are_hashed);
  tcase_add_test(th, computed_include_hashes_every_file);
  tcase_add_test(th, shadowing_header_changes_the_key);
  tcase_add_test(th, cpath_headers_are_hashed);
  tcase_add_test(th, same_file_through_two_names_is_keyed);
  tcase_add_test(th, working_directory_header_is_hashed);
  return run_suite(s);
}
