/* check_cache.c: the SQLite store on real files: modes, round trips,
 * tamper detection, unsafe locations, corrupt and newer files. */
#include "testutil.h"
#include "internal.h"
#include "testsql.h"

#include <sys/stat.h>
#include <fcntl.h>

static const unsigned char blob[] = "\x7f" "ELF pretend code object";

static tj__cache_row row_for(const char *key)
{
  tj__cache_row r = {key, "k", "gfx90a", "amd", "hiprtc", "", blob,
                     sizeof blob, 12.5, NULL};
  return r;
}

static tj__cache *open_ok(const char *path, unsigned flags)
{
  tj__cache *c = NULL;
  char msg[1024];
  int rc = tj__cache_open(path, flags, &c, msg, sizeof msg);
  ck_assert_msg(rc == TJ_OK && c, "open %s: %d %s", path, rc, msg);
  return c;
}

START_TEST(creates_private_directory_and_file)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "a/b/cache.db");
  tj__cache_close(open_ok(path, 0));
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0600);
  char *sub = test_path(dir, "a/b");
  ck_assert_int_eq(stat(sub, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0700);
  ck_assert_int_eq(tsql_int(path, "PRAGMA user_version"), 4);
  ck_assert_int_eq(tsql_int(path, "PRAGMA application_id"), TJ__CACHE_APP_ID);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM code_objects"), 0);
  free(sub); free(path); free(dir);
}
END_TEST

START_TEST(round_trip_and_insert_or_ignore)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj__cache *c = open_ok(path, 0);
  const char *key = "0123456789abcdef0123456789abcdef";
  tj__cache_row r = row_for(key);
  ck_assert_int_eq(tj__cache_put(c, &r), TJ_OK);
  ck_assert_int_eq(tj__cache_put(c, &r), TJ_OK); /* a racing twin */
  void *code = NULL;
  size_t size = 0;
  int dropped = 1;
  tj__cache_row want = row_for(key);
  want.code = NULL;
  ck_assert_int_eq(tj__cache_get(c, &want, &code, &size, &dropped), TJ_OK);
  ck_assert_int_eq(dropped, 0);
  ck_assert_uint_eq(size, sizeof blob);
  ck_assert(memcmp(code, blob, size) == 0);
  free(code);
  want.key = "ffffffffffffffffffffffffffffffff";
  ck_assert_int_eq(tj__cache_get(c, &want, &code, &size, &dropped), TJ_ENOENT);
  const char *keys[] = {key};
  uint64_t hits[] = {3};
  ck_assert_int_eq(tj__cache_record_usage(c, keys, hits, 1, 2), TJ_OK);
  tj__cache_close(c);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM code_objects"), 1);
  ck_assert_int_eq(tsql_int(path, "SELECT hits FROM code_objects"), 3);
  ck_assert_int_eq(tsql_int(path, "SELECT code_size FROM code_objects"), sizeof blob);
  ck_assert_int_eq(tsql_int(path, "SELECT value FROM counters WHERE name='misses'"), 2);
  free(path); free(dir);
}
END_TEST

static long file_size(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* A close that recorded only hits leaves them in the WAL (no checkpoint
 * and its fsyncs), and the WAL is folded in again once it grows: it never
 * holds more than a few processes' hit counts, and none are lost.  A
 * close that stored a row folds it in at once. */
START_TEST(hit_counts_stay_in_a_short_wal)
{
  enum { PROCESSES = 40, MAX_FRAMES = 12 };
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  char *wal = test_path(dir, "cache.db-wal");
  const char *key = "0123456789abcdef0123456789abcdef";
  tj__cache *c = open_ok(path, 0);
  tj__cache_row r = row_for(key);
  ck_assert_int_eq(tj__cache_put(c, &r), TJ_OK);
  tj__cache_close(c);
  ck_assert_int_eq(file_size(wal), 0);
  int folded = 0;
  for (int i = 0; i < PROCESSES; i++) {
    c = open_ok(path, 0);
    const char *keys[] = {key};
    uint64_t hits[] = {1};
    ck_assert_int_eq(tj__cache_record_usage(c, keys, hits, 1, 0), TJ_OK);
    tj__cache_close(c);
    long size = file_size(wal);
    if (i == 0)
      ck_assert_int_gt(size, 0); /* not folded in by a hit-only close */
    ck_assert_int_le(size, 32 + MAX_FRAMES * (24 + 4096));
    folded += size == 0;
  }
  ck_assert_int_gt(folded, 0);
  ck_assert_int_eq(tsql_int(path, "SELECT hits FROM code_objects"), PROCESSES);
  free(wal); free(path); free(dir);
}
END_TEST

START_TEST(uses_wal_journal)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj__cache_close(open_ok(path, 0));
  char mode[16];
  ck_assert_int_eq(tsql_text(path, "PRAGMA journal_mode", mode, sizeof mode), 0);
  ck_assert_str_eq(mode, "wal");
  free(path); free(dir);
}
END_TEST

/* A blob changed behind the cache's back fails its hash: the row is
 * dropped and reported, never returned. */
START_TEST(tampered_blob_is_dropped)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj__cache *c = open_ok(path, 0);
  const char *key = "00000000000000000000000000000001";
  tj__cache_row r = row_for(key);
  ck_assert_int_eq(tj__cache_put(c, &r), TJ_OK);
  tsql_exec(path, "UPDATE code_objects SET code = x'7f454c46deadbeef'");
  void *code = NULL;
  size_t size = 0;
  int dropped = 0;
  ck_assert_int_eq(tj__cache_get(c, &r, &code, &size, &dropped), TJ_ENOENT);
  ck_assert_int_eq(dropped, TJ__DROP_HASH);
  ck_assert_ptr_null(code);
  tj__cache_close(c);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM code_objects"), 0);
  free(path); free(dir);
}
END_TEST

static void expect_refused(const char *path, unsigned flags, const char *word)
{
  tj__cache *c = NULL;
  char msg[1024];
  ck_assert_int_eq(tj__cache_open(path, flags, &c, msg, sizeof msg), TJ_EPERM);
  ck_assert_ptr_null(c);
  ck_assert_msg(strstr(msg, word), "message '%s' lacks '%s'", msg, word);
}

START_TEST(refuses_locations_others_can_write)
{
  char *dir = test_tmpdir(), *sub = test_path(dir, "shared");
  char *path = test_path(sub, "cache.db");
  ck_assert_int_eq(mkdir(sub, 0700), 0);
  ck_assert_int_eq(chmod(sub, 0777), 0);
  expect_refused(path, 0, "other users");
  ck_assert_int_eq(chmod(sub, 0770), 0);
  expect_refused(path, 0, "TJ_CACHE_GROUP");
  tj__cache_close(open_ok(path, TJ_CACHE_GROUP)); /* asked for explicitly */
  ck_assert_int_eq(chmod(sub, 0700), 0);
  char *wal = test_path(sub, "cache.db-wal");
  ck_assert_int_eq(chmod(path, 0600), 0);
  expect_refused(path, 0, "cache.db-wal: mode 0660"); /* the group's -wal */
  ck_assert_int_eq(chmod(wal, 0600), 0);
  free(wal);
  wal = test_path(sub, "cache.db-shm");
  chmod(wal, 0600);
  free(wal);
  wal = test_path(sub, "cache.db.lock");
  chmod(wal, 0600);
  free(wal);
  ck_assert_int_eq(chmod(path, 0666), 0);
  expect_refused(path, 0, "mode 0666");
  ck_assert_int_eq(chmod(path, 0600), 0);
  tj__cache_close(open_ok(path, 0));
  if (geteuid() == 0) { /* only root can give a file away */
    ck_assert_int_eq(chown(path, 65534, 65534), 0);
    expect_refused(path, 0, "owned by uid 65534");
  }
  free(path); free(sub); free(dir);
}
END_TEST

/* A file that cannot be shown to be ours is refused and left exactly as it
 * was: nothing moved, nothing beside it. */
START_TEST(foreign_files_are_left_alone)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  char *pattern = test_path(dir, "cache.db?*");
  unsigned char junk[8192];
  srand(7);
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = (unsigned char)rand();
  test_write_file(path, junk, sizeof junk);
  tj__cache *c = NULL;
  char msg[1024];
  ck_assert_int_eq(tj__cache_open(path, 0, &c, msg, sizeof msg), TJ_ECACHE);
  ck_assert_ptr_null(c);
  ck_assert_msg(strstr(msg, "not a tokitai-jit cache"), "message: %s", msg);
  size_t n;
  unsigned char *after = test_read_file(path, &n);
  ck_assert_uint_eq(n, sizeof junk);
  ck_assert(memcmp(after, junk, n) == 0);
  ck_assert_int_eq(test_count_matches(pattern), 0);
  free(after); free(pattern); free(path); free(dir);
}
END_TEST

/* A damaged file whose header carries our mark is ours: moved aside. */
START_TEST(damaged_file_of_ours_is_moved_aside)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  char *pattern = test_path(dir, "cache.db.corrupt-*");
  tj__cache_close(open_ok(path, 0));
  size_t n;
  unsigned char *b = test_read_file(path, &n);
  ck_assert_uint_ge(n, 4096);
  for (size_t i = 100; i < 4096; i++) /* the schema, after the header */
    b[i] = (unsigned char)(i * 13);
  test_write_file(path, b, n);
  tj__cache *c = NULL;
  char msg[1024];
  ck_assert_int_eq(tj__cache_open(path, 0, &c, msg, sizeof msg), TJ_OK);
  ck_assert_ptr_nonnull(c);
  ck_assert_msg(strstr(msg, "moved it to"), "message: %s", msg);
  ck_assert_int_eq(test_count_matches(pattern), 1);
  tj__cache_row r = row_for("00000000000000000000000000000002");
  ck_assert_int_eq(tj__cache_put(c, &r), TJ_OK);
  tj__cache_close(c);
  free(b); free(pattern); free(path); free(dir);
}
END_TEST

START_TEST(table_missing_columns_is_replaced)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tsql_exec(path, "CREATE TABLE code_objects (key TEXT); PRAGMA user_version = 4; "
           "PRAGMA application_id = 1953130868");
  chmod(path, 0600);
  tj__cache *c = NULL;
  char msg[1024];
  ck_assert_int_eq(tj__cache_open(path, 0, &c, msg, sizeof msg), TJ_OK);
  ck_assert_ptr_nonnull(c);
  ck_assert_msg(strstr(msg, "moved it to"), "message: %s", msg);
  tj__cache_close(c);
  free(path); free(dir);
}
END_TEST

/* A newer library's cache is left alone; we go on without one. */
START_TEST(newer_schema_is_left_alone)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tsql_exec(path, "CREATE TABLE future (x); PRAGMA user_version = 99; "
           "PRAGMA application_id = 1953130868");
  chmod(path, 0600);
  tj__cache *c = NULL;
  char msg[1024];
  ck_assert_int_eq(tj__cache_open(path, 0, &c, msg, sizeof msg), TJ_OK);
  ck_assert_ptr_null(c);
  ck_assert_msg(strstr(msg, "newer"), "message: %s", msg);
  ck_assert_int_eq(tsql_int(path, "PRAGMA user_version"), 99);
  free(path); free(dir);
}
END_TEST

START_TEST(readonly_never_writes)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj__cache *c = NULL;
  char msg[1024];
  /* Missing file: no cache, a message, and nothing created. */
  ck_assert_int_eq(tj__cache_open(path, TJ_CACHE_READONLY, &c, msg, sizeof msg), TJ_OK);
  ck_assert_ptr_null(c);
  ck_assert(msg[0] != '\0');
  ck_assert_int_ne(access(path, F_OK), 0);
  tj__cache_close(open_ok(path, 0));
  c = open_ok(path, TJ_CACHE_READONLY);
  tj__cache_row r = row_for("00000000000000000000000000000003");
  ck_assert_int_eq(tj__cache_put(c, &r), TJ_OK);
  tj__cache_close(c);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM code_objects"), 0);
  free(path); free(dir);
}
END_TEST

START_TEST(default_path_follows_environment)
{
  char *p;
  setenv("TOKITAI_JIT_CACHE", "/x/explicit.db", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("HOME", "/home/u", 1);
  p = tj__cache_default_path();
  ck_assert_str_eq(p, "/x/explicit.db");
  free(p);
  unsetenv("TOKITAI_JIT_CACHE");
  p = tj__cache_default_path();
  ck_assert_str_eq(p, "/xdg/tokitai-jit/cache.db");
  free(p);
  setenv("XDG_CACHE_HOME", "relative", 1); /* the XDG spec ignores these */
  p = tj__cache_default_path();
  ck_assert_str_eq(p, "/home/u/.cache/tokitai-jit/cache.db");
  free(p);
  unsetenv("XDG_CACHE_HOME");
  unsetenv("HOME");
  ck_assert_ptr_null(tj__cache_default_path());
}
END_TEST

int main(void)
{
  Suite *s = suite_create("cache");
  TCase *tc = test_case(s, "cache", 60);
  tcase_add_test(tc, creates_private_directory_and_file);
  tcase_add_test(tc, round_trip_and_insert_or_ignore);
  tcase_add_test(tc, uses_wal_journal);
  tcase_add_test(tc, hit_counts_stay_in_a_short_wal);
  tcase_add_test(tc, tampered_blob_is_dropped);
  tcase_add_test(tc, refuses_locations_others_can_write);
  tcase_add_test(tc, foreign_files_are_left_alone);
  tcase_add_test(tc, damaged_file_of_ours_is_moved_aside);
  tcase_add_test(tc, table_missing_columns_is_replaced);
  tcase_add_test(tc, newer_schema_is_left_alone);
  tcase_add_test(tc, readonly_never_writes);
  tcase_add_test(tc, default_path_follows_environment);
  return run_suite(s);
}
