/* check_explain.c: a cache that says why it missed.  Each input of the key
 * is changed once (source, in-memory header, option, arch, compiler
 * fingerprint) and the explanation must name it: through tj_explain_miss,
 * the warning a lookup leaves in tj_errmsg, and the trace.  Compile-only
 * for TEST_ARCH, on a real SQLite file, with the real compiler. */
#include "testutil.h"
#include "testsql.h"

#if defined(TJ_PLATFORM_NVIDIA)
#define OTHER_ARCH "sm_80"
#else
#define OTHER_ARCH "gfx1030"
#endif

static const char source_a[] =
  "extern \"C\" __global__ void fill(float *x) { x[0] = 1.0f; }\n";
static const char source_b[] =
  "extern \"C\" __global__ void fill(float *x) { x[0] = 2.0f; }\n";
static const char with_header[] =
  "#include \"knob.h\"\n"
  "extern \"C\" __global__ void fill(float *x) { x[0] = KNOB; }\n";
static const char *const fill_entry[] = {"fill"};

static tj_module_source module(const char *source, const char *const *opts,
                               int nopts, const tj_header *h, int nh)
{
  tj_module_source s = {sizeof s, source, "fill.hip", opts, nopts, h, nh,
                        fill_entry, 1};
  return s;
}

static int explain(tj_runtime *rt, const char *name,
                   const tj_module_source *src, char *buf, size_t len)
{
  return tj_explain_miss(rt, name, src, buf, len);
}

static void compile_ok(tj_runtime *rt, const tj_module_source *src)
{
  tj_module *m = NULL;
  ck_assert_msg(tj_module_compile(rt, src, &m) == TJ_OK, "%s", tj_errmsg(rt));
}

/* The explanation of src on rt must be a miss that names what. */
static void miss_names(tj_runtime *rt, const char *name,
                       const tj_module_source *src, const char *what)
{
  char buf[2048];
  int rc = explain(rt, name, src, buf, sizeof buf);
  ck_assert_msg(rc == TJ_ENOENT, "%s: %s", tj_strerror(rc), buf);
  ck_assert_msg(strstr(buf, what), "'%s' not in: %s", what, buf);
}

START_TEST(a_new_entry_has_no_row)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db"), buf[1024];
  tj_runtime *rt = open_compile_only(db, 0);
  tj_module_source a = module(source_a, NULL, 0, NULL, 0);
  miss_names(rt, "add_i32", NULL, "add_i32: not cached for " TEST_ARCH
             ": no row for this entry");
  miss_names(rt, NULL, &a, "fill.hip: not cached for " TEST_ARCH
             ": no row for this entry");
  compile_ok(rt, &a);
  ck_assert_int_eq(explain(rt, NULL, &a, buf, sizeof buf), TJ_OK);
  ck_assert_msg(strstr(buf, "fill.hip: cached for " TEST_ARCH), "%s", buf);
  tj_runtime_close(rt);
  free(db);
  free(dir);
}
END_TEST

START_TEST(the_source_is_named)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(db, 0);
  tj_module_source a = module(source_a, NULL, 0, NULL, 0);
  tj_module_source b = module(source_b, NULL, 0, NULL, 0);
  compile_ok(rt, &a);
  miss_names(rt, NULL, &b, "its one row (key ");
  miss_names(rt, NULL, &b, "differs in the source");
  /* The lookup that misses leaves the same sentence as a warning. */
  compile_ok(rt, &b);
  ck_assert_msg(strstr(tj_errmsg(rt), "differs in the source"), "%s",
                tj_errmsg(rt));
  tj_runtime_close(rt);
  free(db);
  free(dir);
}
END_TEST

START_TEST(an_in_memory_header_is_named)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(db, 0);
  tj_header one = {"knob.h", "#define KNOB 1.0f\n"};
  tj_header two = {"knob.h", "#define KNOB 2.0f\n"};
  tj_header extra[] = {{"knob.h", "#define KNOB 1.0f\n"}, {"more.h", "\n"}};
  tj_module_source a = module(with_header, NULL, 0, &one, 1);
  tj_module_source b = module(with_header, NULL, 0, &two, 1);
  tj_module_source c = module(with_header, NULL, 0, extra, 2);
  compile_ok(rt, &a);
  miss_names(rt, NULL, &b, "differs in header 'knob.h'");
  char buf[2048]; /* once, and nothing else: the files' digest says no more */
  ck_assert_int_eq(explain(rt, NULL, &b, buf, sizeof buf), TJ_ENOENT);
  ck_assert_msg(!strstr(buf, ";"), "%s", buf);
  miss_names(rt, NULL, &c, "header 'more.h' (not in that row)");
  tj_runtime_close(rt);
  free(db);
  free(dir);
}
END_TEST

START_TEST(an_option_is_named)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(db, 0);
  const char *const one[] = {"-DKNOB=1"}, *const two[] = {"-DKNOB=2"};
  tj_module_source a = module(source_a, one, 1, NULL, 0);
  tj_module_source b = module(source_a, two, 1, NULL, 0);
  compile_ok(rt, &a);
  miss_names(rt, NULL, &b, "differs in the options ('-DKNOB=2' here, "
             "'-DKNOB=1' there)");
  tj_runtime_close(rt);
  free(db);
  free(dir);
}
END_TEST

START_TEST(the_arch_is_named)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(db, 0);
  tj_kernel *k = NULL;
  ck_assert_msg(tj_kernel_get(rt, "add_i32", &k) == TJ_OK, "%s", tj_errmsg(rt));
  char hit[1024];
  ck_assert_int_eq(explain(rt, "add_i32", NULL, hit, sizeof hit), TJ_OK);
  ck_assert_msg(strstr(hit, "add_i32: cached for " TEST_ARCH), "%s", hit);
  tj_runtime_close(rt);
  rt = open_for_arch(OTHER_ARCH, db);
  /* Only the arch: the fingerprint's digest of the arch's base options
   * differs with it, and is not named beside it. */
  miss_names(rt, "add_i32", NULL, "differs in the arch ('" OTHER_ARCH
             "' here, '" TEST_ARCH "' there)");
  char buf[2048];
  ck_assert_int_eq(explain(rt, "add_i32", NULL, buf, sizeof buf), TJ_ENOENT);
  ck_assert_msg(!strstr(buf, "compiler"), "%s", buf);
  ck_assert_msg(tj_kernel_get(rt, "add_i32", &k) == TJ_OK, "%s", tj_errmsg(rt));
  ck_assert_msg(strstr(tj_errmsg(rt), "differs in the arch"), "%s",
                tj_errmsg(rt));
  tj_runtime_close(rt);
  free(db);
  free(dir);
}
END_TEST

/* A row of another compiler: the row compiled here, copied to another key
 * under another fingerprint (with its inputs record), and removed. */
START_TEST(the_compiler_fingerprint_is_named)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(db, 0);
  tj_kernel *k = NULL;
  ck_assert_msg(tj_kernel_get(rt, "add_i32", &k) == TJ_OK, "%s", tj_errmsg(rt));
  tj_runtime_close(rt);
  tsql_exec(db, "INSERT INTO key_inputs SELECT 'ffffffffffffffffffffffffffffff"
            "ff', inputs FROM key_inputs WHERE key = (SELECT key FROM "
            "code_objects WHERE kernel = 'add_i32');"
            "INSERT INTO code_objects SELECT 'ffffffffffffffffffffffffffffffff',"
            " kernel, arch, platform, 'othercc 9.9', options, code, code_hash,"
            " code_size, compile_ms, created, last_used, hits, entries, origin "
            "FROM code_objects WHERE kernel = 'add_i32';"
            "DELETE FROM code_objects WHERE kernel = 'add_i32' AND "
            "compiler <> 'othercc 9.9'");
  ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM key_inputs WHERE key = "
                   "'ffffffffffffffffffffffffffffffff'"), 1);
  rt = open_compile_only(db, 0);
  miss_names(rt, "add_i32", NULL, "differs in the compiler fingerprint ('");
  miss_names(rt, "add_i32", NULL, "here, 'othercc 9.9' there)");
  tj_runtime_close(rt);
  free(db);
  free(dir);
}
END_TEST

START_TEST(a_row_without_its_inputs_says_so)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(db, 0);
  tj_module_source a = module(source_a, NULL, 0, NULL, 0);
  tj_module_source b = module(source_b, NULL, 0, NULL, 0);
  compile_ok(rt, &a);
  tj_runtime_close(rt);
  /* As a row stored by a release that kept no record looks. */
  tsql_exec(db, "DELETE FROM key_inputs");
  rt = open_compile_only(db, 0);
  miss_names(rt, NULL, &b, "differs in an input the row does not record");
  tj_runtime_close(rt);
  /* Deleting a row deletes its record, whichever statement does it. */
  rt = open_compile_only(db, 0);
  compile_ok(rt, &b);
  tj_runtime_close(rt);
  ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM key_inputs"), 1);
  tsql_exec(db, "DELETE FROM code_objects");
  ck_assert_int_eq(tsql_int(db, "SELECT count(*) FROM key_inputs"), 0);
  free(db);
  free(dir);
}
END_TEST

/* TOKITAI_JIT_TRACE=1: each miss's sentence on stderr, as it happens. */
START_TEST(the_trace_says_why)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  char *log = test_path(dir, "stderr");
  setenv("TOKITAI_JIT_TRACE", "1", 1);
  fflush(stderr);
  int saved = dup(2), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ck_assert_int_ge(fd, 0);
  dup2(fd, 2);
  tj_runtime *rt = open_compile_only(db, 0);
  tj_module_source a = module(source_a, NULL, 0, NULL, 0);
  tj_module_source b = module(source_b, NULL, 0, NULL, 0);
  compile_ok(rt, &a);
  compile_ok(rt, &b);
  tj_runtime_close(rt);
  fflush(stderr);
  dup2(saved, 2);
  close(fd);
  close(saved);
  unsetenv("TOKITAI_JIT_TRACE");
  size_t n = 0;
  char *text = (char *)test_read_file(log, &n);
  ck_assert_msg(strstr(text, "tokitai-jit trace: fill.hip: not cached for "
                TEST_ARCH ": no row for this entry"), "%s", text);
  ck_assert_msg(strstr(text, "differs in the source"), "%s", text);
  free(text);
  free(log);
  free(db);
  free(dir);
}
END_TEST

START_TEST(bad_arguments_are_refused)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db"), buf[256];
  tj_runtime *rt = open_compile_only(db, 0);
  tj_module_source a = module(source_a, NULL, 0, NULL, 0);
  ck_assert_int_eq(explain(NULL, "add_i32", NULL, buf, sizeof buf), TJ_EINVAL);
  ck_assert_int_eq(explain(rt, NULL, NULL, buf, sizeof buf), TJ_EINVAL);
  ck_assert_int_eq(explain(rt, "add_i32", &a, buf, sizeof buf), TJ_EINVAL);
  ck_assert_int_eq(explain(rt, "add_i32", NULL, NULL, 16), TJ_EINVAL);
  ck_assert_int_eq(explain(rt, "add_i32", NULL, buf, 0), TJ_EINVAL);
  ck_assert_int_eq(explain(rt, "no_such_kernel", NULL, buf, sizeof buf),
                   TJ_EINVAL);
  ck_assert_msg(strstr(tj_errmsg(rt), "no_such_kernel"), "%s", tj_errmsg(rt));
  tj_module_source empty = a;
  empty.num_entries = 0;
  ck_assert_int_eq(explain(rt, NULL, &empty, buf, sizeof buf), TJ_EINVAL);
  /* A short buffer gets a whole, shorter sentence. */
  char tiny[8];
  ck_assert_int_eq(explain(rt, "add_i32", NULL, tiny, sizeof tiny), TJ_ENOENT);
  ck_assert_str_eq(tiny, "add_i32");
  tj_runtime_close(rt);
  rt = open_compile_only(NULL, 0); /* no cache */
  ck_assert_int_eq(explain(rt, "add_i32", NULL, buf, sizeof buf), TJ_ECACHE);
  ck_assert_msg(strstr(buf, "no cache"), "%s", buf);
  tj_runtime_close(rt);
  free(db);
  free(dir);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("explain");
  TCase *tc = test_case(s, "explain", 300);
  tcase_add_test(tc, a_new_entry_has_no_row);
  tcase_add_test(tc, the_source_is_named);
  tcase_add_test(tc, an_in_memory_header_is_named);
  tcase_add_test(tc, an_option_is_named);
  tcase_add_test(tc, the_arch_is_named);
  tcase_add_test(tc, the_compiler_fingerprint_is_named);
  tcase_add_test(tc, a_row_without_its_inputs_says_so);
  tcase_add_test(tc, the_trace_says_why);
  tcase_add_test(tc, bad_arguments_are_refused);
  return run_suite(s);
}
