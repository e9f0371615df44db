/* check_runtime.c: the public API end to end on a CPU machine: the cache
 * round trip between runtimes and processes, tamper detection, threads
 * sharing one runtime, and every bad argument. */
#include "testutil.h"
#include "testsql.h"

#include <pthread.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>

static tj_kernel *get_ok(tj_runtime *rt, const char *name)
{
  tj_kernel *k = NULL;
  int rc = tj_kernel_get(rt, name, &k);
  ck_assert_msg(rc == TJ_OK, "%s: %s: %s", name, tj_strerror(rc), tj_errmsg(rt));
  return k;
}

/* The embedded entries whose names start with prefix: the entries of one
 * kernels/ file, for the files below. */
static long long entries_named(const char *prefix)
{
  long long n = 0;
  for (size_t i = 0; i < tj_embedded_count(); i++)
    n += strncmp(tj_embedded_name(i), prefix, strlen(prefix)) == 0;
  return n;
}

START_TEST(second_runtime_reads_the_cache)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(path, 0);
  ck_assert_str_eq(tj_runtime_cache_path(rt), path);
  tj_kernel_info first, again;
  tj_kernel_get_info(get_ok(rt, "gelu_bwd_f16"), &first);
  ck_assert_int_eq(first.origin, TJ_FROM_COMPILER);
  ck_assert(first.compile_ms > 0);
  char first_key[33];
  snprintf(first_key, sizeof first_key, "%s", first.key);
  size_t first_size = first.code_size;
  tj_runtime_close(rt); /* info's pointers belong to the runtime */
  /* Its row, and one for each other entry of its file (the same code). */
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM code_objects"),
                   entries_named("gelu_"));
  ck_assert_int_eq(tsql_int(path, "SELECT value FROM counters WHERE name='misses'"), 1);
  ck_assert_int_eq(tsql_int(path, "SELECT sum(hits) FROM code_objects"), 0);

  rt = open_compile_only(path, 0);
  tj_kernel *k = get_ok(rt, "gelu_bwd_f16");
  tj_kernel_get_info(k, &again);
  ck_assert_int_eq(again.origin, TJ_FROM_CACHE);
  ck_assert_str_eq(again.key, first_key);
  ck_assert_uint_eq(again.code_size, first_size);
  ck_assert_ptr_eq(get_ok(rt, "gelu_bwd_f16"), k); /* the in-memory table */
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, 0);
  ck_assert_uint_eq(st.cache_hits, 1);
  ck_assert_uint_eq(st.memory_hits, 1);
  tj_runtime_close(rt);
  /* It read the code file alone and noted its hit there, for the next
   * process that opens the file for writing. */
  ck_assert_int_eq(tsql_int(path, "SELECT sum(hits) FROM code_objects"), 0);
  tsql_fold_hits(path);
  ck_assert_int_eq(tsql_int(path, "SELECT hits FROM code_objects WHERE "
                                  "kernel = 'gelu_bwd_f16'"), 1);
  ck_assert_int_eq(tsql_int(path, "SELECT sum(hits) FROM code_objects"), 1);
  free(path); free(dir);
}
END_TEST

/* Several processes, each with its own runtime, compile every embedded
 * kernel into one fresh cache at the same moment: all succeed and the
 * cache holds one row per key. */
START_TEST(processes_racing_on_a_fresh_cache)
{
  enum { PROCS = 6 };
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  pid_t pids[PROCS];
  for (int p = 0; p < PROCS; p++) {
    pids[p] = fork();
    ck_assert_int_ge(pids[p], 0);
    if (pids[p] == 0) {
      tj_runtime *rt = NULL;
      int rc = test_open(&rt, path, 0);
      for (size_t i = 0; rc == TJ_OK && i < tj_embedded_count(); i++) {
        tj_kernel *k;
        rc = tj_kernel_get(rt, tj_embedded_name(i), &k);
      }
      if (rc != TJ_OK || tj_errmsg(rt)[0])
        fprintf(stderr, "child %d: %s: %s\n", p, tj_strerror(rc), tj_errmsg(rt));
      tj_runtime_close(rt);
      _exit(rc == TJ_OK ? 0 : 1);
    }
  }
  for (int p = 0; p < PROCS; p++) {
    int status = 0;
    ck_assert_int_eq(waitpid(pids[p], &status, 0), pids[p]);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d failed", p);
  }
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM code_objects"),
                   (long long)tj_embedded_count());
  ck_assert_int_eq(tsql_int(path, "SELECT count(DISTINCT key) FROM code_objects"),
                   (long long)tj_embedded_count());
  free(path); free(dir);
}
END_TEST

/* Change one byte inside the stored blob, leaving its size and hash. */
static void flip_one_code_byte(const char *path, size_t at)
{
  sqlite3 *db;
  sqlite3_blob *b;
  unsigned char byte;
  ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
  ck_assert_int_eq(sqlite3_blob_open(db, "main", "code_objects", "code",
                                     (sqlite3_int64)tsql_int(path,
                                       "SELECT rowid FROM code_objects"),
                                     1, &b), SQLITE_OK);
  ck_assert_int_eq(sqlite3_blob_read(b, &byte, 1, (int)at), SQLITE_OK);
  byte ^= 0xff;
  ck_assert_int_eq(sqlite3_blob_write(b, &byte, 1, (int)at), SQLITE_OK);
  sqlite3_blob_close(b);
  tsql_remove_code(path); /* the row is what the next runtime reads */
  sqlite3_close(db);
}

START_TEST(tampered_code_is_recompiled)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(path, 0);
  tj_kernel_info good;
  tj_kernel_get_info(get_ok(rt, "add_i32"), &good);
  void *good_code = malloc(good.code_size);
  memcpy(good_code, good.code, good.code_size);
  size_t good_size = good.code_size;
  tj_runtime_close(rt); /* info's pointers belong to the runtime */
  flip_one_code_byte(path, good_size / 2);

  rt = open_compile_only(path, 0);
  tj_kernel_info info;
  tj_kernel_get_info(get_ok(rt, "add_i32"), &info);
  ck_assert_int_eq(info.origin, TJ_FROM_COMPILER);
  ck_assert_msg(strstr(tj_errmsg(rt), "hash"), "warning: %s", tj_errmsg(rt));
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.cache_drops, 1);
  ck_assert_uint_eq(st.compiles, 1);
  tj_runtime_close(rt);
  /* The recompiled row is whole again: the next runtime loads it. */
  rt = open_compile_only(path, 0);
  tj_kernel_get_info(get_ok(rt, "add_i32"), &info);
  ck_assert_int_eq(info.origin, TJ_FROM_CACHE);
  ck_assert_uint_eq(info.code_size, good_size);
  ck_assert(memcmp(info.code, good_code, good_size) == 0);
  tj_runtime_close(rt);
  free(good_code); free(path); free(dir);
}
END_TEST

/* hipRTC and NVRTC compile a whole kernels/ file: one compile of an entry
 * stores the code object under every entry of its file, each with its own
 * key and row, and another entry of the file is a hit.  An entry of
 * another file still compiles. */
START_TEST(an_entry_brings_the_rest_of_its_file)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  /* gemm_skinny_f16.hip's entries (the FMA ones; the tensor-core ones
   * are a file of their own). */
  long long skinny = entries_named("gemm_skinny_f16_m");
  ck_assert_int_ge(skinny, 2);
  tj_runtime *rt = open_compile_only(path, 0);
  tj_kernel_info m1, m4, add;
  tj_kernel_get_info(get_ok(rt, "gemm_skinny_f16_m1"), &m1);
  ck_assert_int_eq(m1.origin, TJ_FROM_COMPILER);
  tj_kernel_get_info(get_ok(rt, "gemm_skinny_f16_m4"), &m4);
  ck_assert_int_eq(m4.origin, TJ_FROM_CACHE);
  ck_assert_str_ne(m4.key, m1.key);
  ck_assert_uint_eq(m4.code_size, m1.code_size);
  ck_assert(memcmp(m4.code, m1.code, m1.code_size) == 0);
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, 1);
  ck_assert_uint_eq(st.cache_hits, 1);
  char m4_key[33], row[64];
  snprintf(m4_key, sizeof m4_key, "%s", m4.key);
  tj_kernel_get_info(get_ok(rt, "add_i32"), &add);
  ck_assert_int_eq(add.origin, TJ_FROM_COMPILER);
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, 2);
  tj_runtime_close(rt);
  /* One row per entry: its own key and kernel, the one code object. */
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM code_objects"),
                   skinny + 1);
  ck_assert_int_eq(tsql_int(path, "SELECT count(DISTINCT key) FROM code_objects "
                                  "WHERE kernel GLOB 'gemm_skinny_f16_m*'"),
                   skinny);
  ck_assert_int_eq(tsql_int(path, "SELECT count(DISTINCT code_hash) FROM "
                                  "code_objects WHERE kernel GLOB "
                                  "'gemm_skinny_f16_m*'"), 1);
  ck_assert_int_eq(tsql_text(path, "SELECT key FROM code_objects WHERE "
                      "kernel = 'gemm_skinny_f16_m4'", row, sizeof row), 0);
  ck_assert_str_eq(row, m4_key);
  /* Every row is what its own columns say: --verify-cache finds none bad. */
  tj_cache *c = NULL;
  uint64_t bad = 1;
  ck_assert_int_eq(tj_cache_open(&c, path, TJ_CACHE_READONLY), TJ_OK);
  ck_assert_int_eq(tj_cache_verify(c, 0, NULL, NULL, &bad), TJ_OK);
  ck_assert_uint_eq(bad, 0);
  tj_cache_close(c);
  /* A new runtime finds a sibling it never compiled. */
  rt = open_compile_only(path, 0);
  tj_kernel_get_info(get_ok(rt, "gemm_skinny_f16_m2"), &m4);
  ck_assert_int_eq(m4.origin, TJ_FROM_CACHE);
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, 0);
  tj_runtime_close(rt);
  free(path); free(dir);
}
END_TEST

/* A sibling row the cache has already is left as it was: the compile of
 * an entry whose own row went (evicted, say) stores only that row. */
START_TEST(a_sibling_row_already_there_is_kept)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(path, 0);
  get_ok(rt, "gelu_fwd_f16");
  get_ok(rt, "gelu_bwd_f16"); /* a hit: counted at close */
  tj_runtime_close(rt);
  long long rows = tsql_int(path, "SELECT count(*) FROM code_objects");
  ck_assert_int_eq(rows, entries_named("gelu_"));
  ck_assert_int_eq(tsql_int(path, "SELECT hits FROM code_objects WHERE "
                                  "kernel = 'gelu_bwd_f16'"), 1);
  long long bwd = tsql_int(path, "SELECT rowid FROM code_objects WHERE "
                                 "kernel = 'gelu_bwd_f16'");
  tsql_exec(path, "DELETE FROM code_objects WHERE kernel = 'gelu_fwd_f16'");
  rt = open_compile_only(path, 0);
  tj_kernel_info info;
  tj_kernel_get_info(get_ok(rt, "gelu_fwd_f16"), &info);
  ck_assert_int_eq(info.origin, TJ_FROM_COMPILER);
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, 1);
  tj_runtime_close(rt);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM code_objects"), rows);
  ck_assert_int_eq(tsql_int(path, "SELECT rowid FROM code_objects WHERE "
                                  "kernel = 'gelu_bwd_f16'"), bwd);
  ck_assert_int_eq(tsql_int(path, "SELECT hits FROM code_objects WHERE "
                                  "kernel = 'gelu_bwd_f16'"), 1);
  free(path); free(dir);
}
END_TEST

struct race {
  tj_runtime *rt;
  pthread_barrier_t *start;
  tj_kernel *got;
  int rc;
  const char *name; /* NULL: gelu_fwd_f16 */
};

static void *race_get(void *arg)
{
  struct race *r = arg;
  pthread_barrier_wait(r->start);
  r->rc = tj_kernel_get(r->rt, r->name ? r->name : "gelu_fwd_f16", &r->got);
  return NULL;
}

/* Threads asking at once for a kernel not yet built compile it once. */
START_TEST(threads_share_one_build)
{
  enum { THREADS = 8 };
  tj_runtime *rt = open_compile_only(NULL, 0);
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  pthread_t th[THREADS];
  struct race r[THREADS];
  for (int i = 0; i < THREADS; i++) {
    r[i] = (struct race){rt, &start, NULL, -100, NULL};
    ck_assert_int_eq(pthread_create(&th[i], NULL, race_get, &r[i]), 0);
  }
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < THREADS; i++) {
    ck_assert_int_eq(r[i].rc, TJ_OK);
    ck_assert_ptr_eq(r[i].got, r[0].got);
  }
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, 1);
  ck_assert_uint_eq(st.memory_hits, THREADS - 1);
  pthread_barrier_destroy(&start);
  tj_runtime_close(rt);
}
END_TEST

/* Threads asking at once for different entries of one file compile the
 * file once: the compile is leased under the file's key, and whoever
 * waited finds its own entry's row. */
START_TEST(threads_asking_for_one_file_compile_it_once)
{
  static const char *const names[] = {"gelu_fwd_f16", "gelu_bwd_f16",
                                      "gelu_fwd_bwd_f16"};
  enum { THREADS = 3 };
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(path, 0);
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  pthread_t th[THREADS];
  struct race r[THREADS];
  for (int i = 0; i < THREADS; i++) {
    r[i] = (struct race){rt, &start, NULL, -100, names[i]};
    ck_assert_int_eq(pthread_create(&th[i], NULL, race_get, &r[i]), 0);
  }
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  int compiled = 0;
  for (int i = 0; i < THREADS; i++) {
    tj_kernel_info info;
    ck_assert_int_eq(r[i].rc, TJ_OK);
    tj_kernel_get_info(r[i].got, &info);
    ck_assert_str_eq(info.entry, names[i]);
    compiled += info.origin == TJ_FROM_COMPILER;
  }
  ck_assert_int_eq(compiled, 1);
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, 1);
  ck_assert_uint_eq(st.cache_hits, THREADS - 1);
  pthread_barrier_destroy(&start);
  tj_runtime_close(rt);
  free(path); free(dir);
}
END_TEST

START_TEST(bad_arguments_get_codes_and_messages)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_kernel_get(NULL, "add_i32", &k), TJ_EINVAL);
  ck_assert_int_eq(tj_kernel_get(rt, NULL, &k), TJ_EINVAL);
  ck_assert(strstr(tj_errmsg(rt), "name"));
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_kernel_get(rt, "no_such_kernel", &k), TJ_ENOENT);
  ck_assert(strstr(tj_errmsg(rt), "no_such_kernel"));
  ck_assert_ptr_null(k);
  ck_assert_int_eq(tj_kernel_compile(rt, NULL, "e", NULL, &k), TJ_EINVAL);
  ck_assert_int_eq(tj_kernel_compile(rt, "", "e", NULL, &k), TJ_EINVAL);
  ck_assert(strstr(tj_errmsg(rt), "empty"));
  ck_assert_int_eq(tj_kernel_compile(rt, "x", "1bad", NULL, &k), TJ_EINVAL);
  /* "a b" is a C++ name expression now (scale<unsigned int>); a line
   * break never is. */
  ck_assert_int_eq(tj_kernel_compile(rt, "x", "a\nb", NULL, &k), TJ_EINVAL);
  ck_assert_int_eq(tj_kernel_compile(rt, "x", "", NULL, &k), TJ_EINVAL);
  char *opts = malloc(8192);
  memset(opts, ' ', 8191);
  opts[8191] = '\0';
  ck_assert_int_eq(tj_kernel_compile(rt, "x", "e", opts, &k), TJ_ERANGE);
  free(opts);
  ck_assert_int_eq(tj_launch(NULL, (tj_dim3){1, 1, 1}, (tj_dim3){1, 1, 1}, 0,
                             NULL, NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  ck_assert_int_eq(tj_launch(k, (tj_dim3){0, 1, 1}, (tj_dim3){1, 1, 1}, 0,
                             NULL, NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_kernel_get_info(k, NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_kernel_get_info(NULL, NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_runtime_get_stats(NULL, NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_runtime_bind(rt), TJ_ENODEVICE);
  ck_assert_int_eq(tj_runtime_bind(NULL), TJ_EINVAL);
  ck_assert_ptr_null(tj_kernel_function(NULL));
  tj_runtime_close(rt);
  tj_runtime_close(NULL);
  ck_assert_str_eq(tj_errmsg(NULL), "no runtime (NULL handle)");
}
END_TEST

START_TEST(bad_options_are_refused)
{
  tj_runtime *rt = NULL;
  ck_assert_int_eq(tj_runtime_open(NULL, NULL), TJ_EINVAL);
  tj_options o = {0};
  o.flags = 0x100;
  ck_assert_int_eq(tj_runtime_open(&rt, &o), TJ_EINVAL);
  ck_assert(strstr(tj_errmsg(rt), "flags"));
  tj_runtime_close(rt);
  o.flags = TJ_CACHE_DISABLE;
  o.device = -1;
  ck_assert_int_eq(tj_runtime_open(&rt, &o), TJ_EINVAL);
  tj_runtime_close(rt);
  /* No device to use and no arch to compile for. */
  o.device = 0;
  o.flags = TJ_NO_DEVICE | TJ_CACHE_DISABLE;
  ck_assert_int_eq(tj_runtime_open(&rt, &o), TJ_ENODEVICE);
  ck_assert(strlen(tj_errmsg(rt)) > 0);
  tj_runtime_close(rt);
}
END_TEST

START_TEST(disabled_cache_writes_no_file)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_runtime *rt = NULL;
  ck_assert_int_eq(test_open(&rt, path, TJ_CACHE_DISABLE), TJ_OK);
  ck_assert_ptr_null(tj_runtime_cache_path(rt));
  get_ok(rt, "add_i32");
  tj_runtime_close(rt);
  ck_assert_int_ne(access(path, F_OK), 0);
  free(path); free(dir);
}
END_TEST

START_TEST(unsafe_cache_refuses_to_open)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  ck_assert_int_eq(chmod(dir, 0777), 0);
  tj_runtime *rt = NULL;
  ck_assert_int_eq(test_open(&rt, path, 0), TJ_EPERM);
  ck_assert(strstr(tj_errmsg(rt), "other users"));
  tj_runtime_close(rt);
  free(path); free(dir);
}
END_TEST

START_TEST(error_table_is_complete)
{
  for (int code = 0; code > TJ__ERR_LAST; code--) {
    ck_assert_str_ne(tj_strerror(code), "unknown error");
    ck_assert(strncmp(tj_err_name(code), "TJ_", 3) == 0);
  }
  ck_assert_str_eq(tj_strerror(1), "unknown error");
  ck_assert_str_eq(tj_err_name(TJ_ECOMPILE), "TJ_ECOMPILE");
  ck_assert_str_eq(tj_strerror(TJ_OK), "success");
  ck_assert_str_eq(tj_version(), TJ_VERSION_STRING);
  ck_assert_ptr_null(tj_embedded_name(tj_embedded_count()));
}
END_TEST

int main(void)
{
  Suite *s = suite_create("runtime");
  TCase *tc = test_case(s, "runtime", 600);
  tcase_add_test(tc, second_runtime_reads_the_cache);
  tcase_add_test(tc, processes_racing_on_a_fresh_cache);
  tcase_add_test(tc, tampered_code_is_recompiled);
  tcase_add_test(tc, threads_share_one_build);
  tcase_add_test(tc, an_entry_brings_the_rest_of_its_file);
  tcase_add_test(tc, a_sibling_row_already_there_is_kept);
  tcase_add_test(tc, threads_asking_for_one_file_compile_it_once);
  tcase_add_test(tc, bad_arguments_get_codes_and_messages);
  tcase_add_test(tc, bad_options_are_refused);
  tcase_add_test(tc, disabled_cache_writes_no_file);
  tcase_add_test(tc, unsafe_cache_refuses_to_open);
  tcase_add_test(tc, error_table_is_complete);
  return run_suite(s);
}
