/* check_layers.c: the cache layers on real files and the real compiler
 * (compile-only, TEST_ARCH): read-only system caches under the per-user
 * cache, what is refused or skipped and said, the origin of each row, and
 * tj_cache_merge.  One system cache is compiled once per run (the
 * fixture); each test works on its own copy. */
#include "testutil.h"
#include "internal.h"
#include "layers.h"
#include "testsql.h"

#include <sqlite3.h>
#include <sys/stat.h>

#define KERNEL "add_i32"
static const char caller_src[] =
  "extern \"C\" __global__ void twice(float *x) { x[threadIdx.x] *= 2; }\n";

static char *master_dir, *master; /* the system cache the fixture made */

static void make_master(void)
{
  master_dir = test_tmpdir();
  master = test_path(master_dir, "master.db");
  tj_runtime *rt = open_compile_only(master, 0);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, KERNEL, &k), TJ_OK);
  ck_assert_int_eq(tj_kernel_compile(rt, caller_src, "twice", NULL, &k), TJ_OK);
  tj_runtime_close(rt); /* the last close folds the WAL into the file */
  ck_assert_int_eq(chmod(master, 0644), 0);
}

static void remove_master(void)
{
  static const char *const sides[] = {"", "-wal", "-shm", ".lock"};
  for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++) {
    char *p = NULL;
    if (asprintf(&p, "%s%s", master, sides[i]) >= 0)
      unlink(p);
    free(p);
  }
  rmdir(master_dir);
  free(master);
  free(master_dir);
}

/* A copy of the master system cache in dir, with mode. */
static char *copy_master(const char *dir, const char *name, mode_t mode)
{
  size_t n;
  unsigned char *b = test_read_file(master, &n);
  char *path = test_path(dir, name);
  test_write_file(path, b, n);
  ck_assert_int_eq(chmod(path, mode), 0);
  free(b);
  return path;
}

/* A compile-only runtime on user with the system caches given. */
static tj_runtime *open_layered(const char *user, const char *system)
{
  tj_options o = {0};
  o.size = sizeof o;
  o.arch = TEST_ARCH;
  o.cache_path = user;
  o.flags = TJ_NO_DEVICE;
  o.system_caches = system;
  tj_runtime *rt = NULL;
  int rc = tj_runtime_open(&rt, &o);
  ck_assert_msg(rc == TJ_OK, "open: %s", tj_errmsg(rt));
  return rt;
}

static tj_stats get_kernel(tj_runtime *rt)
{
  tj_kernel *k;
  tj_stats st;
  int rc = tj_kernel_get(rt, KERNEL, &k);
  ck_assert_msg(rc == TJ_OK, "tj_kernel_get: %s", tj_errmsg(rt));
  ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
  return st;
}

static void assert_msg_has(const char *msg, const char *word)
{
  ck_assert_msg(strstr(msg, word), "message '%s' lacks '%s'", msg, word);
}

/* ------------------------------------------------------- the runtime */

START_TEST(a_system_cache_satisfies_a_fresh_user)
{
  char *dir = test_tmpdir(), *sys = copy_master(dir, "sys.db", 0444);
  char *user = test_path(dir, "user/cache.db");
  tj_runtime *rt = open_layered(user, sys);
  tj_stats st = get_kernel(rt);
  ck_assert_uint_eq(st.compiles, 0);
  ck_assert_uint_eq(st.system_hits, 1);
  ck_assert_uint_eq(st.cache_hits, 1);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_compile(rt, caller_src, "twice", NULL, &k), TJ_OK);
  ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
  ck_assert_uint_eq(st.compiles, 0);
  ck_assert_uint_eq(st.system_hits, 2);
  ck_assert_str_eq(tj_errmsg(rt), "");
  tj_runtime_close(rt);
  /* Both rows were copied into the per-user cache, saying where from. */
  ck_assert_int_eq(tsql_int(user, "SELECT count(*) FROM code_objects WHERE "
                            "origin = 'system'"), 2);
  ck_assert_int_eq(tsql_bad_rows(user), 0);
  /* The next process finds them there, without the system cache. */
  rt = open_layered(user, "");
  st = get_kernel(rt);
  ck_assert_uint_eq(st.compiles, 0);
  ck_assert_uint_eq(st.system_hits, 0);
  ck_assert_uint_eq(st.cache_hits, 1);
  tj_runtime_close(rt);
  /* The system cache was only read: no -wal, -shm or .lock beside it. */
  char *wal = test_path(dir, "sys.db-wal"), *lock = test_path(dir, "sys.db.lock");
  ck_assert_int_ne(access(wal, F_OK), 0);
  ck_assert_int_ne(access(lock, F_OK), 0);
  free(wal); free(lock); free(user); free(sys); free(dir);
}
END_TEST

/* A directory the user cannot write (a package's share directory): read
 * immutable, nothing made beside the file. */
START_TEST(a_system_cache_in_a_read_only_directory)
{
  char *dir = test_tmpdir(), *sysdir = test_path(dir, "share");
  ck_assert_int_eq(mkdir(sysdir, 0755), 0);
  char *sys = copy_master(sysdir, "system.db", 0444);
  ck_assert_int_eq(chmod(sysdir, 0555), 0);
  char *user = test_path(dir, "cache.db");
  setenv("TOKITAI_JIT_SYSTEM_CACHE", sys, 1);
  tj_runtime *rt = open_layered(user, NULL); /* from the environment */
  tj_stats st = get_kernel(rt);
  ck_assert_uint_eq(st.compiles, 0);
  ck_assert_uint_eq(st.system_hits, 1);
  tj_runtime_close(rt);
  ck_assert_int_eq(chmod(sysdir, 0755), 0);
  free(user); free(sys); free(sysdir); free(dir);
}
END_TEST

START_TEST(a_system_cache_others_may_write_is_refused)
{
  char *dir = test_tmpdir(), *sys = copy_master(dir, "sys.db", 0666);
  char *user = test_path(dir, "cache.db");
  tj_runtime *rt = open_layered(user, sys); /* the runtime still opens */
  tj_stats st = get_kernel(rt);
  ck_assert_uint_eq(st.compiles, 1);
  ck_assert_uint_eq(st.system_hits, 0);
  assert_msg_has(tj_errmsg(rt), "refusing system cache");
  assert_msg_has(tj_errmsg(rt), "lets other users write it");
  tj_runtime_close(rt);
  ck_assert_int_eq(tsql_int(user, "SELECT count(*) FROM code_objects WHERE "
                            "origin = 'compiled'"), 1);
  free(user); free(sys); free(dir);
}
END_TEST

START_TEST(a_damaged_system_cache_is_skipped)
{
  char *dir = test_tmpdir(), *sys = test_path(dir, "sys.db");
  char *user = test_path(dir, "cache.db");
  test_write_text(sys, "this is not a database, but it is long enough to "
                       "have a header of one hundred bytes, which it lacks.");
  ck_assert_int_eq(chmod(sys, 0644), 0);
  tj_runtime *rt = open_layered(user, sys);
  tj_stats st = get_kernel(rt);
  ck_assert_uint_eq(st.compiles, 1);
  assert_msg_has(tj_errmsg(rt), "is not a tokitai-jit cache");
  tj_runtime_close(rt);
  free(user); free(sys); free(dir);
}
END_TEST

/* A blob changed in a system cache fails its hash: a miss, a warning,
 * a compile; the bad code is neither loaded nor copied. */
START_TEST(a_tampered_blob_in_a_system_cache_is_never_loaded)
{
  char *dir = test_tmpdir(), *sys = copy_master(dir, "sys.db", 0644);
  char *user = test_path(dir, "cache.db");
  tsql_exec(sys, "UPDATE code_objects SET code = zeroblob(length(code)) "
                 "WHERE kernel = '" KERNEL "'; PRAGMA journal_mode = DELETE");
  ck_assert_int_eq(tsql_bad_rows(sys), 1);
  tj_runtime *rt = open_layered(user, sys);
  tj_stats st = get_kernel(rt);
  ck_assert_uint_eq(st.compiles, 1);
  ck_assert_uint_eq(st.system_hits, 0);
  ck_assert_uint_eq(st.cache_drops, 0); /* nothing was dropped: read-only */
  assert_msg_has(tj_errmsg(rt), "failed its hash check; not loaded");
  tj_kernel *k;
  tj_kernel_info info;
  ck_assert_int_eq(tj_kernel_get(rt, KERNEL, &k), TJ_OK);
  ck_assert_int_eq(tj_kernel_get_info(k, &info), TJ_OK);
  ck_assert_int_eq(info.origin, TJ_FROM_COMPILER);
  ck_assert_int_ne(((const unsigned char *)info.code)[1], 0);
  tj_runtime_close(rt);
  ck_assert_int_eq(tsql_bad_rows(user), 0);
  ck_assert_int_eq(tsql_bad_rows(sys), 1); /* left as it was */
  free(user); free(sys); free(dir);
}
END_TEST

/* No system cache: one stat of the configured path, nothing created,
 * nothing said; and a warm start never looks at the system caches (a
 * refused one would warn if it were opened). */
START_TEST(an_absent_system_cache_costs_nothing)
{
  char *dir = test_tmpdir(), *none = test_path(dir, "none/sys.db");
  char *user = copy_master(dir, "cache.db", 0600);
  char *bad = copy_master(dir, "writable.db", 0666);
  char *both = NULL;
  ck_assert_int_ge(asprintf(&both, "%s:%s", none, bad), 0);
  tj_runtime *rt = open_layered(user, both);
  tj_stats st = get_kernel(rt);
  ck_assert_uint_eq(st.compiles, 0);
  ck_assert_uint_eq(st.cache_hits, 1);
  ck_assert_str_eq(tj_errmsg(rt), "");
  int usable = -1, configured = -1;
  tj__layers_system_count(rt->layers, &usable, &configured);
  ck_assert_int_eq(configured, 2);
  ck_assert_int_eq(usable, 0);
  tj_runtime_close(rt);
  char *nonedir = test_path(dir, "none");
  ck_assert_int_ne(access(nonedir, F_OK), 0);
  free(nonedir); free(both); free(bad); free(user); free(none); free(dir);
}
END_TEST

/* ------------------------------------------------------- the layers, directly */

/* The want row of the master's add_i32 row, read from the file. */
typedef struct want_row {
  char key[64], kernel[64], arch[64], platform[16], compiler[256];
} want_row;

static tj__cache_row want_of(const char *path, want_row *w)
{
  ck_assert_int_eq(tsql_text(path, "SELECT key FROM code_objects WHERE kernel "
                             "= '" KERNEL "'", w->key, sizeof w->key), 0);
  tsql_text(path, "SELECT arch FROM code_objects WHERE kernel = '" KERNEL "'",
            w->arch, sizeof w->arch);
  tsql_text(path, "SELECT platform FROM code_objects WHERE kernel = '" KERNEL
            "'", w->platform, sizeof w->platform);
  tsql_text(path, "SELECT compiler FROM code_objects WHERE kernel = '" KERNEL
            "'", w->compiler, sizeof w->compiler);
  tj__cache_row r = {w->key, KERNEL, w->arch, w->platform, w->compiler, "",
                     NULL, 0, 0, NULL, NULL};
  return r;
}

/* Look the master's row up through layers over no per-user cache with
 * system path sys: the return code, the warning in msg. */
static int lookup(const char *sys, const tj__cache_row *want, char *msg,
                  size_t len)
{
  tj__layers *l = NULL;
  tj__lookup got;
  ck_assert_int_eq(tj__layers_open(NULL, NULL, NULL, sys, 0, &l), TJ_OK);
  int rc = tj__layers_get(l, want, KERNEL, &got);
  snprintf(msg, len, "%s", got.warning);
  ck_assert_int_eq(got.layer, rc == TJ_OK ? TJ__LAYER_SYSTEM : TJ__LAYER_NONE);
  tj__found_free(&got.found);
  if (rc != TJ_OK) { /* the problem is said once: then nothing */
    ck_assert_int_eq(tj__layers_get(l, want, KERNEL, &got), TJ_ENOENT);
    ck_assert_str_eq(got.warning, "");
  }
  tj__layers_close(l);
  return rc;
}

START_TEST(what_is_skipped_and_said)
{
  char *dir = test_tmpdir(), msg[1024];
  want_row w;
  tj__cache_row want = want_of(master, &w);
  char *ok = copy_master(dir, "ok.db", 0644);
  ck_assert_int_eq(lookup(ok, &want, msg, sizeof msg), TJ_OK);
  ck_assert_str_eq(msg, "");
  /* Another program's database. */
  char *foreign = test_path(dir, "foreign.db");
  tsql_exec(foreign, "CREATE TABLE t (x); PRAGMA application_id = 42");
  ck_assert_int_eq(lookup(foreign, &want, msg, sizeof msg), TJ_ENOENT);
  assert_msg_has(msg, "is not a tokitai-jit cache");
  /* Ours, of a schema newer than this library's. */
  char *newer = copy_master(dir, "newer.db", 0644);
  tsql_exec(newer, "PRAGMA user_version = 99; PRAGMA journal_mode = DELETE");
  ck_assert_int_eq(lookup(newer, &want, msg, sizeof msg), TJ_ENOENT);
  assert_msg_has(msg, "schema version 99");
  /* Ours, of an earlier schema. */
  char *older = copy_master(dir, "older.db", 0644);
  tsql_exec(older, "PRAGMA user_version = 3; PRAGMA journal_mode = DELETE");
  ck_assert_int_eq(lookup(older, &want, msg, sizeof msg), TJ_ENOENT);
  assert_msg_has(msg, "schema version 3");
  ck_assert_int_eq(tsql_int(older, "PRAGMA user_version"), 3);
  /* Ours, its pages after the first destroyed: an SQLite error. */
  size_t n;
  unsigned char *b = test_read_file(ok, &n);
  memset(b + 4096, 0xa5, n - 4096);
  char *torn = test_path(dir, "torn.db");
  test_write_file(torn, b, n);
  free(b);
  ck_assert_int_eq(lookup(torn, &want, msg, sizeof msg), TJ_ENOENT);
  ck_assert_msg(msg[0], "no warning for a damaged system cache");
  /* Owned by someone else: only root can make one to test. */
  if (geteuid() == 0) {
    char *theirs = copy_master(dir, "theirs.db", 0644);
    ck_assert_int_eq(chown(theirs, 12345, 12345), 0);
    ck_assert_int_eq(lookup(theirs, &want, msg, sizeof msg), TJ_ENOENT);
    assert_msg_has(msg, "owned by uid 12345");
    free(theirs);
  }
  /* A directory above it that others may write. */
  char *open_dir = test_path(dir, "open");
  ck_assert_int_eq(mkdir(open_dir, 0777), 0);
  ck_assert_int_eq(chmod(open_dir, 0777), 0);
  char *in_open = copy_master(open_dir, "sys.db", 0644);
  ck_assert_int_eq(lookup(in_open, &want, msg, sizeof msg), TJ_ENOENT);
  assert_msg_has(msg, "writable by everyone");
  /* The same file twice in the list is looked at once; absent ones
   * are silent. */
  char *list = NULL;
  ck_assert_int_ge(asprintf(&list, "%s/nowhere.db::%s:%s", dir, ok, ok), 0);
  ck_assert_int_eq(lookup(list, &want, msg, sizeof msg), TJ_OK);
  ck_assert_str_eq(msg, "");
  free(list); free(in_open); free(open_dir); free(torn); free(newer); free(older);
  free(foreign); free(ok); free(dir);
}
END_TEST

/* ------------------------------------------------------- merge */

static int count_origin(const tj_cache_entry *e, void *ctx)
{
  if (strcmp(e->origin, "merged") == 0)
    ++*(int *)ctx;
  return 0;
}

START_TEST(merge_copies_once_and_checks_every_row)
{
  char *dir = test_tmpdir(), *src = copy_master(dir, "src.db", 0644);
  char *target = test_path(dir, "t/cache.db");
  tj_cache *c = NULL;
  tj_cache_merge_stats st;
  ck_assert_int_eq(tj_cache_open(&c, target, 0), TJ_OK);
  ck_assert_int_eq(tj_cache_merge(c, src, &st), TJ_OK);
  ck_assert_uint_eq(st.copied, 2);
  ck_assert_uint_eq(st.skipped, 0);
  ck_assert_uint_eq(st.bad, 0);
  ck_assert_int_eq(tj_cache_merge(c, src, &st), TJ_OK); /* idempotent */
  ck_assert_uint_eq(st.copied, 0);
  ck_assert_uint_eq(st.skipped, 2);
  int merged = 0;
  ck_assert_int_eq(tj_cache_list(c, count_origin, &merged), TJ_OK);
  ck_assert_int_eq(merged, 2);
  /* Refused sources, with a message each. */
  ck_assert_int_eq(tj_cache_merge(c, target, &st), TJ_EINVAL);
  char *missing = test_path(dir, "missing.db");
  ck_assert_int_eq(tj_cache_merge(c, missing, &st), TJ_ENOENT);
  char *text = test_path(dir, "text.db");
  test_write_text(text, "not a cache");
  ck_assert_int_eq(tj_cache_merge(c, text, &st), TJ_ECACHE);
  assert_msg_has(tj_cache_errmsg(c), "not a tokitai-jit cache");
  char *open = copy_master(dir, "open.db", 0666);
  ck_assert_int_eq(tj_cache_merge(c, open, &st), TJ_EPERM);
  tj_cache_close(c);
  ck_assert_int_eq(tsql_bad_rows(target), 0);
  ck_assert_int_eq(tsql_int(target, "SELECT count(*) FROM kernel_resources"), 2);
  /* A read-only target is not merged into. */
  ck_assert_int_eq(tj_cache_open(&c, target, TJ_CACHE_READONLY), TJ_OK);
  ck_assert_int_eq(tj_cache_merge(c, src, &st), TJ_EINVAL);
  tj_cache_close(c);
  free(open); free(text); free(missing); free(target); free(src); free(dir);
}
END_TEST

START_TEST(merge_skips_a_tampered_row)
{
  char *dir = test_tmpdir(), *src = copy_master(dir, "src.db", 0644);
  char *target = test_path(dir, "cache.db");
  tsql_exec(src, "UPDATE code_objects SET code = zeroblob(length(code)) "
                 "WHERE kernel = '" KERNEL "'; PRAGMA journal_mode = DELETE");
  tj_cache *c = NULL;
  tj_cache_merge_stats st;
  ck_assert_int_eq(tj_cache_open(&c, target, 0), TJ_OK);
  ck_assert_int_eq(tj_cache_merge(c, src, &st), TJ_OK);
  ck_assert_uint_eq(st.copied, 1);
  ck_assert_uint_eq(st.bad, 1);
  /* A row at a key its columns do not give (an embedded kernel's). */
  char *moved = copy_master(dir, "moved.db", 0644);
  tsql_exec(moved, "UPDATE code_objects SET key = "
                   "'00000000000000000000000000000000' WHERE kernel = '"
                   KERNEL "'; PRAGMA journal_mode = DELETE");
  ck_assert_int_eq(tj_cache_merge(c, moved, &st), TJ_OK);
  ck_assert_uint_eq(st.bad, 1);
  ck_assert_uint_eq(st.copied, 0);
  ck_assert_uint_eq(st.skipped, 1);
  tj_cache_close(c);
  ck_assert_int_eq(tsql_int(target, "SELECT count(*) FROM code_objects"), 1);
  ck_assert_int_eq(tsql_int(target, "SELECT count(*) FROM code_objects WHERE "
                            "kernel = '" KERNEL "'"), 0);
  free(moved); free(target); free(src); free(dir);
}
END_TEST

/* ------------------------------------------------------- the -wal */

/* Rows of code_objects as an immutable reader (a system cache, a merge's
 * source before it looks at the -wal) sees them: the main file alone. */
static long long rows_in_the_file(const char *path)
{
  char *uri = NULL;
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  long long n = -1;
  ck_assert_int_ge(asprintf(&uri, "file:%s?immutable=1", path), 0);
  if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
                      NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(db, "SELECT count(*) FROM code_objects", -1, &st,
                         NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  free(uri);
  return n;
}

/* An empty cache at path, made and closed. */
static void make_empty_cache(const char *path)
{
  tj_cache *c = NULL;
  ck_assert_int_eq(tj_cache_open(&c, path, 0), TJ_OK);
  tj_cache_close(c);
}

/* A runtime writes while another connection has the file open, and closes
 * first: SQLite's checkpoint at close needs the last connection, and the
 * last one here writes nothing (--warm -j's workers, a runtime per arch). */
START_TEST(a_writer_leaves_its_rows_in_the_file)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  make_empty_cache(path);
  tj_cache *other = NULL;
  ck_assert_int_eq(tj_cache_open(&other, path, 0), TJ_OK);
  tj_runtime *rt = open_compile_only(path, 0);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, KERNEL, &k), TJ_OK);
  tj_runtime_close(rt);
  tj_cache_close(other);
  long long rows = tsql_int(path, "SELECT count(*) FROM code_objects");
  ck_assert_int_gt(rows, 0);
  ck_assert_int_eq(rows_in_the_file(path), rows);
  free(path); free(dir);
}
END_TEST

/* src with rows only in its -wal: a reader's open snapshot keeps the
 * runtime's close from copying them into the file, and the reader closes
 * without a checkpoint. */
static long long make_rows_in_the_wal(const char *src)
{
  make_empty_cache(src);
  sqlite3 *reader = NULL;
  ck_assert_int_eq(sqlite3_open_v2(src, &reader, SQLITE_OPEN_READWRITE,
                                   NULL), SQLITE_OK);
  sqlite3_db_config(reader, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
  ck_assert_int_eq(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM "
                                "code_objects", NULL, NULL, NULL), SQLITE_OK);
  tj_runtime *rt = open_compile_only(src, 0);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, KERNEL, &k), TJ_OK);
  tj_runtime_close(rt);
  ck_assert_int_eq(sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(reader);
  long long rows = tsql_int(src, "SELECT count(*) FROM code_objects");
  ck_assert_int_gt(rows, 0);
  ck_assert_int_eq(rows_in_the_file(src), 0);
  return rows;
}

START_TEST(merge_reads_the_rows_in_a_wal_or_refuses)
{
  char *dir = test_tmpdir(), *src = test_path(dir, "src.db");
  char *wal = test_path(dir, "src.db-wal");
  char *t1 = test_path(dir, "t1.db"), *t2 = test_path(dir, "t2.db");
  long long rows = make_rows_in_the_wal(src);
  tj_cache *c = NULL;
  tj_cache_merge_stats st;
  ck_assert_int_eq(tj_cache_open(&c, t1, 0), TJ_OK);
  ck_assert_int_eq(tj_cache_merge(c, src, &st), TJ_OK);
  ck_assert_uint_eq(st.copied, (uint64_t)rows);
  ck_assert_uint_eq(st.bad, 0);
  tj_cache_close(c);
  /* A -wal it may not read with the file (others may write it): refused,
   * said, nothing copied. */
  ck_assert_int_eq(chmod(wal, 0666), 0);
  ck_assert_int_eq(tj_cache_open(&c, t2, 0), TJ_OK);
  ck_assert_int_eq(tj_cache_merge(c, src, &st), TJ_ECACHE);
  assert_msg_has(tj_cache_errmsg(c), "-wal");
  assert_msg_has(tj_cache_errmsg(c), "wal_checkpoint(TRUNCATE)");
  ck_assert_uint_eq(st.copied, 0);
  /* What the message says to do, then the file alone has every row. */
  ck_assert_int_eq(chmod(wal, 0600), 0);
  tsql_exec(src, "PRAGMA wal_checkpoint(TRUNCATE)");
  ck_assert_int_eq(rows_in_the_file(src), rows);
  ck_assert_int_eq(tj_cache_merge(c, src, &st), TJ_OK);
  ck_assert_uint_eq(st.copied, (uint64_t)rows);
  tj_cache_close(c);
  free(t2); free(t1); free(wal); free(src); free(dir);
}
END_TEST

static Suite *suite(void)
{
  Suite *s = suite_create("layers");
  TCase *tc = tcase_create("layers");
  tcase_add_unchecked_fixture(tc, make_master, remove_master);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, a_system_cache_satisfies_a_fresh_user);
  tcase_add_test(tc, a_system_cache_in_a_read_only_directory);
  tcase_add_test(tc, a_system_cache_others_may_write_is_refused);
  tcase_add_test(tc, a_damaged_system_cache_is_skipped);
  tcase_add_test(tc, a_tampered_blob_in_a_system_cache_is_never_loaded);
  tcase_add_test(tc, an_absent_system_cache_costs_nothing);
  tcase_add_test(tc, what_is_skipped_and_said);
  tcase_add_test(tc, merge_copies_once_and_checks_every_row);
  tcase_add_test(tc, merge_skips_a_tampered_row);
  tcase_add_test(tc, a_writer_leaves_its_rows_in_the_file);
  tcase_add_test(tc, merge_reads_the_rows_in_a_wal_or_refuses);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_ENV);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
