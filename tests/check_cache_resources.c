/* check_cache_resources.c: each entry's resources stored with its cache
 * row: the figures tj_kernel_get_info gives, one set per entry of a
 * module, gone with their row; a file of an earlier schema is refused.
 * Compile-only for TEST_ARCH with the real compiler, on real SQLite files. */
#include "testkernels.h"
#include "testsql.h"
#include "hash.h"

#include <sqlite3.h>
#include <sys/stat.h>

#define MAX_SETS 4

/* What tj_cache_list gave for one row, copied out of the callback. */
typedef struct stored {
  const char *key; /* the row to find */
  int rows, found, n;
  char entry[MAX_SETS][128], lowered[MAX_SETS][128];
  tj_kernel_resources res[MAX_SETS];
} stored;

static int keep(const tj_cache_entry *e, void *ctx)
{
  stored *s = ctx;
  s->rows++;
  if (strcmp(e->key, s->key) != 0)
    return 0;
  s->found++;
  s->n = e->num_kernels;
  ck_assert_int_le(e->num_kernels, MAX_SETS);
  ck_assert(e->num_kernels == 0 || e->kernels);
  for (int i = 0; i < e->num_kernels; i++) {
    snprintf(s->entry[i], sizeof s->entry[i], "%s", e->kernels[i].entry);
    snprintf(s->lowered[i], sizeof s->lowered[i], "%s", e->kernels[i].lowered);
    s->res[i] = e->kernels[i].resources;
  }
  return 0;
}

/* The row at key as tj_cache_list shows it, through a handle opened with
 * flags; the row must be there. */
static stored stored_row(const char *path, const char *key, unsigned flags)
{
  tj_cache *c = NULL;
  stored s = {.key = key};
  int rc = tj_cache_open(&c, path, flags);
  ck_assert_msg(rc == TJ_OK, "tj_cache_open: %s", tj_cache_errmsg(c));
  ck_assert_int_eq(tj_cache_list(c, keep, &s), TJ_OK);
  tj_cache_close(c);
  ck_assert_msg(s.found == 1, "row %s listed %d times", key, s.found);
  return s;
}

static void same_resources(const tj_kernel_resources *got,
                           const tj_kernel_resources *want)
{
  ck_assert_int_gt(want->regs, 0); /* known: the comparison means something */
  ck_assert_int_eq(got->regs, want->regs);
  ck_assert_int_eq(got->sgprs, want->sgprs);
  ck_assert_int_eq(got->agprs, want->agprs);
  ck_assert_int_eq(got->spills, want->spills);
  ck_assert_int_eq(got->shared_bytes, want->shared_bytes);
  ck_assert_int_eq(got->local_bytes, want->local_bytes);
  ck_assert_int_eq(got->max_threads, want->max_threads);
  ck_assert_int_eq(got->wave_size, want->wave_size);
}

static tj_kernel_info info_of(const tj_kernel *k)
{
  tj_kernel_info i;
  ck_assert_int_eq(tj_kernel_get_info(k, &i), TJ_OK);
  return i;
}

/* The module's entries as stored: one set each, named as the caller wrote
 * them and as the code has them, each with its kernel's own figures. */
static void check_module_row(const char *path, tj_module *m, unsigned flags)
{
  tj_module_info mi = {.size = sizeof mi};
  ck_assert_int_eq(tj_module_get_info(m, &mi), TJ_OK);
  stored s = stored_row(path, mi.key, flags);
  ck_assert_int_eq(s.n, 2);
  for (int i = 0; i < 2; i++) {
    tj_kernel *k = NULL;
    ck_assert_int_eq(tj_module_kernel(m, test_module_entries[i], &k), TJ_OK);
    tj_kernel_info ki = info_of(k);
    ck_assert_str_eq(s.entry[i], test_module_entries[i]);
    ck_assert_str_eq(s.lowered[i], mi.lowered[i]);
    same_resources(&s.res[i], &ki.resources);
  }
  ck_assert_int_eq(s.res[0].shared_bytes, 0);
  ck_assert_int_eq(s.res[1].shared_bytes, TEST_STAGED_SHARED_BYTES);
}

START_TEST(a_stored_rows_resources_are_its_kernels_info)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(path, 0);
  static const char *const names[] = {"add_i32", "gemm_f16", "scratchy"};
  for (int i = 0; i < 3; i++) {
    tj_kernel *k = NULL;
    int rc = i < 2 ? tj_kernel_get(rt, names[i], &k)
                   : tj_kernel_compile(rt, test_scratch_source, names[i], NULL, &k);
    ck_assert_msg(rc == TJ_OK, "%s: %s", names[i], tj_errmsg(rt));
    tj_kernel_info ki = info_of(k);
    stored s = stored_row(path, ki.key, TJ_CACHE_READONLY);
    ck_assert_int_eq(s.n, 1);
    ck_assert_str_eq(s.entry[0], names[i]);
    ck_assert_str_eq(s.lowered[0], names[i]);
    same_resources(&s.res[0], &ki.resources);
  }
  tj_runtime_close(rt);
  /* The figures say what they should, not only the same thing twice. */
  ck_assert_int_eq(tsql_int(path, "SELECT local_bytes FROM kernel_resources "
                                   "WHERE entry = 'add_i32'"),
                   0);
  ck_assert_int_ge(tsql_int(path, "SELECT local_bytes FROM kernel_resources "
                                   "WHERE entry = 'scratchy'"),
                   TEST_SCRATCH_BYTES);
  ck_assert_int_gt(tsql_int(path, "SELECT shared_bytes FROM kernel_resources "
                                   "WHERE entry = 'gemm_f16'"),
                   0);
  free(path);
  free(dir);
}
END_TEST

START_TEST(a_modules_two_entries_store_two_sets)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(path, 0);
  check_module_row(path, test_compile_module(rt), TJ_CACHE_READONLY);
  tj_runtime_close(rt);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM kernel_resources"), 2);
  free(path);
  free(dir);
}
END_TEST

/* Every way a row goes takes its resources along: eviction, clearing, and
 * a load that drops a damaged row (whose replacement must get figures
 * read from its own code, not the ones left behind). */
START_TEST(resources_go_with_their_row)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(path, 0);
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_kernel_info ki = info_of(k);
  char key[TJ__KEY_HEX]; /* ki's pointers go with the runtime */
  snprintf(key, sizeof key, "%s", ki.key);
  test_compile_module(rt);
  tj_runtime_close(rt);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM kernel_resources"), 3);

  tsql_exec(path,
           "UPDATE kernel_resources SET regs = 9999 WHERE entry = "
           "'add_i32'; UPDATE code_objects SET code = zeroblob(length(code)) "
           "WHERE kernel = 'add_i32'");
  rt = open_compile_only(path, 0);
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  ck_assert_int_eq(info_of(k).origin, TJ_FROM_COMPILER);
  tj_runtime_close(rt);
  stored s = stored_row(path, key, TJ_CACHE_READONLY);
  ck_assert_int_eq(s.n, 1);
  same_resources(&s.res[0], &ki.resources);

  tj_cache *c = NULL;
  uint64_t evicted = 0;
  ck_assert_int_eq(tj_cache_open(&c, path, 0), TJ_OK);
  ck_assert_int_eq(tj_cache_evict(c, 0, 0, &evicted), TJ_OK);
  ck_assert_uint_eq(evicted, 2);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM kernel_resources"), 0);
  tj_cache_close(c);

  rt = open_compile_only(path, 0);
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_runtime_close(rt);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM kernel_resources"), 1);
  ck_assert_int_eq(tj_cache_open(&c, path, 0), TJ_OK);
  ck_assert_int_eq(tj_cache_clear(c), TJ_OK);
  tj_cache_close(c);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM kernel_resources"), 0);
  free(path);
  free(dir);
}
END_TEST

/* ======================================================= another version */

/* The schema-2 layout, of a build before kernel_resources. */
static const char v2_schema[] =
    "CREATE TABLE code_objects (key TEXT PRIMARY KEY, kernel TEXT NOT NULL, "
    "arch TEXT NOT NULL, platform TEXT NOT NULL, compiler TEXT NOT NULL, "
    "options TEXT NOT NULL, code BLOB NOT NULL, code_hash TEXT NOT NULL, "
    "code_size INTEGER NOT NULL, compile_ms REAL NOT NULL, created INTEGER NOT "
    "NULL, last_used INTEGER NOT NULL, hits INTEGER NOT NULL DEFAULT 0, "
    "entries TEXT NOT NULL DEFAULT '');"
    "CREATE INDEX code_objects_last_used ON code_objects(last_used);"
    "CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);"
    "INSERT INTO counters VALUES ('misses', 0); PRAGMA user_version = 2;"
    "PRAGMA application_id = 1953130868; PRAGMA journal_mode = WAL;";

/* A file of ours at schema 2 is read by no handle, read-only or not: each
 * open says so and leaves it at 2, without kernel_resources. */
START_TEST(a_schema_2_file_is_refused_and_left)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tsql_exec(path, v2_schema);
  chmod(path, 0600);
  static const unsigned flags[] = {TJ_CACHE_READONLY, 0};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    tj_cache *c = NULL;
    ck_assert_int_eq(tj_cache_open(&c, path, flags[i]), TJ_ECACHE);
    ck_assert_msg(strstr(tj_cache_errmsg(c), "schema version 2"), "%s",
                  tj_cache_errmsg(c));
    tj_cache_close(c);
  }
  ck_assert_int_eq(tsql_int(path, "PRAGMA user_version"), 2);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM sqlite_master "
                                  "WHERE name = 'kernel_resources'"), 0);
  free(path);
  free(dir);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("cache_resources");
  TCase *tc = tcase_create("resources");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, a_stored_rows_resources_are_its_kernels_info);
  tcase_add_test(tc, a_modules_two_entries_store_two_sets);
  tcase_add_test(tc, resources_go_with_their_row);
  tcase_add_test(tc, a_schema_2_file_is_refused_and_left);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
