/* check_cache_admin.c: the public tj_cache_* functions on real SQLite
 * files: list order, stats sums, verify and repair, eviction by age and by
 * size, clear, and the ways opening can fail. */
#include "testutil.h"
#include "internal.h"
#include "testsql.h"

#include <sys/stat.h>
#include <time.h>

#define KEY_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define KEY_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define KEY_C "cccccccccccccccccccccccccccccccc"

/* A row whose code is `size` bytes of `fill`. */
static void put_row(const char *path, const char *key, const char *kernel,
                    size_t size, unsigned char fill, double compile_ms)
{
  tj__cache *c = NULL;
  char msg[1024];
  ck_assert_int_eq(tj__cache_open(path, 0, &c, msg, sizeof msg), TJ_OK);
  ck_assert_msg(c != NULL, "open %s: %s", path, msg);
  unsigned char *code = malloc(size);
  ck_assert_ptr_nonnull(code);
  memset(code, fill, size);
  tj__cache_row r = {key, kernel, "gfx90a", "amd", "hiprtc test", "", code,
                     size, compile_ms, NULL};
  ck_assert_int_eq(tj__cache_put(c, &r), TJ_OK);
  free(code);
  tj__cache_close(c);
}

static void set_last_used(const char *path, const char *key, int64_t ago)
{
  char sql[256];
  snprintf(sql, sizeof sql, "UPDATE code_objects SET last_used = %lld "
           "WHERE key = '%s'", (long long)(time(NULL) - ago), key);
  tsql_exec(path, sql);
}

/* Three rows, A used 300 s ago, B 200 s ago, C 100 s ago; sizes 100, 200
 * and 300 bytes; hits 1, 2, 3; compile times 10, 20, 30 ms. */
static char *three_rows(char **dir_out)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  put_row(path, KEY_A, "ka", 100, 0xa, 10);
  put_row(path, KEY_B, "kb", 200, 0xb, 20);
  put_row(path, KEY_C, "kc", 300, 0xc, 30);
  set_last_used(path, KEY_A, 300);
  set_last_used(path, KEY_B, 200);
  set_last_used(path, KEY_C, 100);
  tsql_exec(path, "UPDATE code_objects SET hits = CASE key WHEN '" KEY_A
           "' THEN 1 WHEN '" KEY_B "' THEN 2 ELSE 3 END");
  *dir_out = dir;
  return path;
}

static tj_cache *open_ok(const char *path, unsigned flags)
{
  tj_cache *c = NULL;
  int rc = tj_cache_open(&c, path, flags);
  ck_assert_msg(rc == TJ_OK, "tj_cache_open %s: %s: %s", path, tj_strerror(rc),
                tj_cache_errmsg(c));
  return c;
}

/* A visitor that records the keys it sees; stops after `stop_after`. */
typedef struct seen {
  char keys[8][TJ__KEY_HEX];
  int n, stop_after;
} seen;

static int record(const tj_cache_entry *e, void *ctx)
{
  seen *s = ctx;
  if (s->n < 8)
    snprintf(s->keys[s->n], TJ__KEY_HEX, "%s", e->key);
  s->n++;
  return s->stop_after && s->n >= s->stop_after;
}

static int64_t count_rows(const char *path)
{
  tj_cache *c = open_ok(path, TJ_CACHE_READONLY);
  tj_cache_stats st;
  ck_assert_int_eq(tj_cache_get_stats(c, &st), TJ_OK);
  tj_cache_close(c);
  return (int64_t)st.entries;
}

START_TEST(list_is_most_recently_used_first)
{
  char *dir, *path = three_rows(&dir);
  tj_cache *c = open_ok(path, TJ_CACHE_READONLY);
  seen s = {0};
  ck_assert_int_eq(tj_cache_list(c, record, &s), TJ_OK);
  ck_assert_int_eq(s.n, 3);
  ck_assert_str_eq(s.keys[0], KEY_C);
  ck_assert_str_eq(s.keys[1], KEY_B);
  ck_assert_str_eq(s.keys[2], KEY_A);
  seen early = {.stop_after = 1};
  ck_assert_int_eq(tj_cache_list(c, record, &early), TJ_OK);
  ck_assert_int_eq(early.n, 1);
  ck_assert_int_eq(tj_cache_list(c, NULL, NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_cache_list(NULL, record, &s), TJ_EINVAL);
  tj_cache_close(c);
  free(path); free(dir);
}
END_TEST

static int check_fields(const tj_cache_entry *e, void *ctx)
{
  (void)ctx;
  ck_assert_str_eq(e->kernel, "kc");
  ck_assert_str_eq(e->arch, "gfx90a");
  ck_assert_str_eq(e->platform, "amd");
  ck_assert_str_eq(e->compiler, "hiprtc test");
  ck_assert_str_eq(e->options, "");
  ck_assert_uint_eq(strlen(e->key), 32);
  ck_assert_uint_eq(strlen(e->code_hash), 32);
  ck_assert_uint_eq(e->code_size, 300);
  ck_assert_double_eq_tol(e->compile_ms, 30, 1e-9);
  ck_assert_uint_eq(e->hits, 3);
  ck_assert(e->created > 0 && e->last_used > 0);
  return 1; /* the first (most recent) row only */
}

START_TEST(list_gives_every_field)
{
  char *dir, *path = three_rows(&dir);
  tj_cache *c = open_ok(path, TJ_CACHE_READONLY);
  ck_assert_int_eq(tj_cache_list(c, check_fields, NULL), TJ_OK);
  tj_cache_close(c);
  free(path); free(dir);
}
END_TEST

START_TEST(stats_sum_the_rows)
{
  char *dir, *path = three_rows(&dir);
  tj__cache *raw = NULL;
  char msg[256];
  ck_assert_int_eq(tj__cache_open(path, 0, &raw, msg, sizeof msg), TJ_OK);
  ck_assert_int_eq(tj__cache_record_usage(raw, NULL, NULL, 0, 4), TJ_OK);
  tj__cache_close(raw);
  tj_cache *c = open_ok(path, TJ_CACHE_READONLY);
  tj_cache_stats st;
  ck_assert_int_eq(tj_cache_get_stats(c, &st), TJ_OK);
  ck_assert_uint_eq(st.entries, 3);
  ck_assert_uint_eq(st.bytes, 600);
  ck_assert_uint_eq(st.hits, 6);
  ck_assert_uint_eq(st.misses, 4);
  ck_assert_double_eq_tol(st.compile_ms_saved, 1 * 10 + 2 * 20 + 3 * 30, 1e-9);
  ck_assert_int_eq(st.schema_version, 4);
  ck_assert_uint_eq(st.size_limit, TJ__CACHE_DEFAULT_LIMIT);
  ck_assert_uint_gt(st.file_bytes, 0);
  ck_assert_str_eq(tj_cache_path(c), path);
  ck_assert_int_eq(tj_cache_get_stats(c, NULL), TJ_EINVAL);
  tj_cache_close(c);
  free(path); free(dir);
}
END_TEST

START_TEST(verify_finds_a_tampered_blob_and_repair_drops_it)
{
  char *dir, *path = three_rows(&dir);
  tsql_exec(path, "UPDATE code_objects SET code = zeroblob(200) WHERE key = '"
           KEY_B "'");
  tj_cache *c = open_ok(path, TJ_CACHE_READONLY);
  seen s = {0};
  uint64_t bad = 99;
  ck_assert_int_eq(tj_cache_verify(c, 0, record, &s, &bad), TJ_OK);
  ck_assert_uint_eq(bad, 1);
  ck_assert_int_eq(s.n, 1);
  ck_assert_str_eq(s.keys[0], KEY_B);
  ck_assert_int_eq(tj_cache_verify(c, 1, NULL, NULL, NULL), TJ_EINVAL);
  ck_assert_ptr_nonnull(strstr(tj_cache_errmsg(c), "READONLY"));
  tj_cache_close(c);
  ck_assert_int_eq(count_rows(path), 3); /* looking changed nothing */

  c = open_ok(path, 0);
  ck_assert_int_eq(tj_cache_verify(c, 1, NULL, NULL, &bad), TJ_OK);
  ck_assert_uint_eq(bad, 1);
  ck_assert_int_eq(tj_cache_verify(c, 0, NULL, NULL, &bad), TJ_OK);
  ck_assert_uint_eq(bad, 0);
  seen left = {0};
  ck_assert_int_eq(tj_cache_list(c, record, &left), TJ_OK);
  ck_assert_int_eq(left.n, 2);
  ck_assert_str_eq(left.keys[0], KEY_C);
  ck_assert_str_eq(left.keys[1], KEY_A);
  tj_cache_close(c);
  free(path); free(dir);
}
END_TEST

START_TEST(verify_catches_a_size_that_lies)
{
  char *dir, *path = three_rows(&dir);
  tsql_exec(path, "UPDATE code_objects SET code_size = 1 WHERE key = '" KEY_A "'");
  tj_cache *c = open_ok(path, TJ_CACHE_READONLY);
  uint64_t bad = 0;
  ck_assert_int_eq(tj_cache_verify(c, 0, NULL, NULL, &bad), TJ_OK);
  ck_assert_uint_eq(bad, 1);
  tj_cache_close(c);
  free(path); free(dir);
}
END_TEST

/* Damage a b-tree page behind SQLite's back: the index over last_used,
 * which row deletion cannot mend. */
START_TEST(verify_reports_a_damaged_database)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  char key[TJ__KEY_HEX], msg[256];
  unsigned char code[64] = {0};
  tj__cache *raw = NULL;
  ck_assert_int_eq(tj__cache_open(path, 0, &raw, msg, sizeof msg), TJ_OK);
  for (int i = 0; i < 200; i++) { /* enough rows for a multi-page index */
    snprintf(key, sizeof key, "%032x", i);
    code[0] = (unsigned char)i;
    tj__cache_row r = {key, "k", "gfx90a", "amd", "hiprtc test", "", code,
                       sizeof code, 1, NULL};
    ck_assert_int_eq(tj__cache_put(raw, &r), TJ_OK);
  }
  tj__cache_close(raw);
  tsql_exec(path, "PRAGMA wal_checkpoint(TRUNCATE)");
  int64_t root = tsql_int(path, "SELECT rootpage FROM sqlite_master WHERE "
                          "name = 'code_objects_last_used'");
  int64_t page = tsql_int(path, "PRAGMA page_size");
  ck_assert_int_gt(root, 0);
  ck_assert_int_gt(page, 0);
  FILE *f = fopen(path, "r+b");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fseek(f, (long)((root - 1) * page + 8), SEEK_SET), 0);
  static const unsigned char junk[64] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  ck_assert_uint_eq(fwrite(junk, 1, sizeof junk, f), sizeof junk);
  fclose(f);

  tj_cache *c = open_ok(path, TJ_CACHE_READONLY);
  ck_assert_int_eq(tj_cache_verify(c, 0, NULL, NULL, NULL), TJ_ECACHE);
  ck_assert_ptr_nonnull(strstr(tj_cache_errmsg(c), path));
  tj_cache_close(c);
  free(path); free(dir);
}
END_TEST

START_TEST(evict_by_age)
{
  char *dir, *path = three_rows(&dir);
  tj_cache *c = open_ok(path, 0);
  uint64_t n = 99;
  ck_assert_int_eq(tj_cache_evict(c, 250, 0, &n), TJ_OK);
  ck_assert_uint_eq(n, 1); /* A, 300 s */
  ck_assert_int_eq(tj_cache_evict(c, 1000, 0, &n), TJ_OK);
  ck_assert_uint_eq(n, 0);
  ck_assert_int_eq(tj_cache_evict(c, 0, 0, &n), TJ_OK);
  ck_assert_uint_eq(n, 2); /* "older than 0 s" is everything */
  tj_cache_close(c);
  ck_assert_int_eq(count_rows(path), 0);
  free(path); free(dir);
}
END_TEST

START_TEST(evict_by_size_drops_least_recently_used_first)
{
  char *dir, *path = three_rows(&dir);
  tj_cache *c = open_ok(path, 0);
  uint64_t n = 0;
  ck_assert_int_eq(tj_cache_evict(c, -1, 600, &n), TJ_OK);
  ck_assert_uint_eq(n, 0); /* already fits */
  ck_assert_int_eq(tj_cache_evict(c, -1, 500, &n), TJ_OK);
  ck_assert_uint_eq(n, 1);
  seen s = {0};
  ck_assert_int_eq(tj_cache_list(c, record, &s), TJ_OK);
  ck_assert_int_eq(s.n, 2);
  ck_assert_str_eq(s.keys[1], KEY_B); /* A, the oldest, went first */
  ck_assert_int_eq(tj_cache_evict(c, -1, 1, &n), TJ_OK);
  ck_assert_uint_eq(n, 2);
  ck_assert_int_eq(tj_cache_evict(c, -1, 0, &n), TJ_OK); /* no limit at all */
  ck_assert_uint_eq(n, 0);
  tj_cache_close(c);
  free(path); free(dir);
}
END_TEST

/* One age rule for every eviction: a row last used exactly max_age
 * seconds ago is old enough, whichever path evicts it (tj_cache_evict,
 * a runtime's eviction of another compiler's rows).  The row is stamped
 * before the eviction reads the clock, so a second that passes between
 * them only makes it older. */
START_TEST(evictions_share_one_age_boundary)
{
  char *dir, *path = three_rows(&dir);
  char msg[256];
  uint64_t n = 99;
  tj__cache *raw = NULL;
  set_last_used(path, KEY_B, 250);
  ck_assert_int_eq(tj__cache_open(path, 0, &raw, msg, sizeof msg), TJ_OK);
  ck_assert_int_eq(tj__cache_evict_foreign(raw, "hiprtc test", 250, &n), TJ_OK);
  ck_assert_uint_eq(n, 0); /* the compiler in use is never foreign */
  ck_assert_int_eq(tj__cache_evict_foreign(raw, "another compiler", 250, &n),
                   TJ_OK);
  ck_assert_uint_eq(n, 2); /* A at 300 s and B at exactly 250 s */
  tj__cache_close(raw);
  ck_assert_int_eq(count_rows(path), 1);
  free(path); free(dir);

  path = three_rows(&dir);
  set_last_used(path, KEY_B, 250);
  tj_cache *c = open_ok(path, 0);
  ck_assert_int_eq(tj_cache_evict(c, 250, 0, &n), TJ_OK);
  ck_assert_uint_eq(n, 2);
  seen s = {0};
  ck_assert_int_eq(tj_cache_list(c, record, &s), TJ_OK);
  ck_assert_int_eq(s.n, 1);
  ck_assert_str_eq(s.keys[0], KEY_C); /* 100 s: younger, kept */
  tj_cache_close(c);
  free(path); free(dir);
}
END_TEST

enum { TRIM_ROWS = 300, TRIM_KEEP = 40 };

/* Counts the rows among the TRIM_KEEP newest (named by their number). */
static int count_newest(const tj_cache_entry *e, void *ctx)
{
  *(int *)ctx += atoi(e->kernel) >= TRIM_ROWS - TRIM_KEEP;
  return 0;
}

/* Trimming many rows to a size keeps exactly the newest that fit: the
 * running total must stay in step with each row it lets go. */
START_TEST(trim_of_many_rows_keeps_the_newest)
{
  enum { ROWS = TRIM_ROWS, KEEP = TRIM_KEEP, SIZE = 100 };
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  char key[TJ__KEY_HEX], kernel[16], msg[256];
  unsigned char code[SIZE] = {0};
  tj__cache *raw = NULL;
  ck_assert_int_eq(tj__cache_open(path, 0, &raw, msg, sizeof msg), TJ_OK);
  for (int i = 0; i < ROWS; i++) {
    snprintf(key, sizeof key, "%032x", i);
    snprintf(kernel, sizeof kernel, "%d", i);
    code[0] = (unsigned char)i;
    code[1] = (unsigned char)(i >> 8);
    tj__cache_row r = {key, kernel, "gfx90a", "amd", "hiprtc test", "", code,
                       sizeof code, 1, NULL};
    ck_assert_int_eq(tj__cache_put(raw, &r), TJ_OK);
  }
  tj__cache_close(raw);
  /* Row i last used ROWS - i seconds ago: the highest numbers are newest. */
  char sql[160];
  snprintf(sql, sizeof sql, "UPDATE code_objects SET last_used = %lld + "
           "CAST(kernel AS INTEGER)", (long long)time(NULL) - ROWS);
  tsql_exec(path, sql);
  tj_cache *c = open_ok(path, 0);
  uint64_t n = 0;
  ck_assert_int_eq(tj_cache_evict(c, -1, KEEP * SIZE + SIZE / 2, &n), TJ_OK);
  ck_assert_uint_eq(n, ROWS - KEEP);
  tj_cache_stats st;
  ck_assert_int_eq(tj_cache_get_stats(c, &st), TJ_OK);
  ck_assert_uint_eq(st.entries, KEEP);
  ck_assert_uint_eq(st.bytes, KEEP * SIZE);
  int newest = 0;
  ck_assert_int_eq(tj_cache_list(c, count_newest, &newest), TJ_OK);
  ck_assert_int_eq(newest, KEEP);
  tj_cache_close(c);
  free(path); free(dir);
}
END_TEST

/* tj_cache_verify judges code as a load does: code stored as text is not
 * a code object, even when its bytes hash right. */
START_TEST(verify_judges_code_as_a_load_does)
{
  char *dir, *path = three_rows(&dir);
  tsql_exec(path, "UPDATE code_objects SET code = CAST(code AS TEXT) "
           "WHERE key = '" KEY_A "'");
  char msg[256];
  void *code = NULL;
  size_t size = 0;
  int dropped = 0;
  tj__cache *raw = NULL;
  ck_assert_int_eq(tj__cache_open(path, TJ_CACHE_READONLY, &raw, msg,
                                  sizeof msg), TJ_OK);
  tj__cache_row want = {KEY_A, "ka", "gfx90a", "amd", "hiprtc test", "",
                        NULL, 0, 0, NULL};
  ck_assert_int_eq(tj__cache_get(raw, &want, &code, &size, &dropped),
                   TJ_ENOENT);
  ck_assert_int_eq(dropped, TJ__DROP_HASH);
  tj__cache_close(raw);
  tj_cache *c = open_ok(path, TJ_CACHE_READONLY);
  seen s = {0};
  uint64_t bad = 0;
  ck_assert_int_eq(tj_cache_verify(c, 0, record, &s, &bad), TJ_OK);
  ck_assert_uint_eq(bad, 1);
  ck_assert_str_eq(s.keys[0], KEY_A);
  tj_cache_close(c);
  free(path); free(dir);
}
END_TEST

/* A file whose schema lost code_hash's NOT NULL (damage, or an older
 * tool): a row without a hash is bad, and both a load and a repair drop
 * it by the same statement. */
static void drop_hash_of(const char *path, const char *key)
{
  char sql[160];
  tsql_exec(path, "PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql "
           "= replace(sql, 'code_hash  TEXT NOT NULL', 'code_hash  TEXT') "
           "WHERE name = 'code_objects'");
  snprintf(sql, sizeof sql, "UPDATE code_objects SET code_hash = NULL WHERE "
           "key = '%s'", key);
  tsql_exec(path, sql);
}

START_TEST(a_row_without_a_hash_is_dropped_by_load_and_repair)
{
  char *dir, *path = three_rows(&dir);
  drop_hash_of(path, KEY_A);
  tj_cache *c = open_ok(path, 0);
  seen s = {0};
  ck_assert_int_eq(tj_cache_verify(c, 0, record, &s, NULL), TJ_OK);
  ck_assert_int_eq(s.n, 1);
  ck_assert_str_eq(s.keys[0], KEY_A);
  uint64_t bad = 0;
  ck_assert_int_eq(tj_cache_verify(c, 1, NULL, NULL, &bad), TJ_OK);
  ck_assert_uint_eq(bad, 1);
  tj_cache_close(c);
  ck_assert_int_eq(count_rows(path), 2);

  drop_hash_of(path, KEY_B);
  char msg[256];
  void *code = NULL;
  size_t size = 0;
  int dropped = 0;
  tj__cache *raw = NULL;
  ck_assert_int_eq(tj__cache_open(path, 0, &raw, msg, sizeof msg), TJ_OK);
  tj__cache_row want = {KEY_B, "kb", "gfx90a", "amd", "hiprtc test", "",
                        NULL, 0, 0, NULL};
  ck_assert_int_eq(tj__cache_get(raw, &want, &code, &size, &dropped),
                   TJ_ENOENT);
  ck_assert_int_eq(dropped, TJ__DROP_HASH);
  tj__cache_close(raw);
  ck_assert_int_eq(count_rows(path), 1);
  free(path); free(dir);
}
END_TEST

/* A visit callback may call back into its handle. */
static int stats_inside(const tj_cache_entry *e, void *ctx)
{
  tj_cache_stats st;
  (void)e;
  ck_assert_int_eq(tj_cache_get_stats(ctx, &st), TJ_OK);
  ck_assert_uint_eq(st.entries, 3);
  return 0;
}

START_TEST(a_visit_may_call_back_into_the_handle)
{
  char *dir, *path = three_rows(&dir);
  tj_cache *c = open_ok(path, 0);
  ck_assert_int_eq(tj_cache_list(c, stats_inside, c), TJ_OK);
  ck_assert_int_eq(tj_cache_verify(c, 0, stats_inside, c, NULL), TJ_OK);
  tj_cache_close(c);
  free(path); free(dir);
}
END_TEST

START_TEST(clear_empties_and_resets_counters)
{
  char *dir, *path = three_rows(&dir);
  tsql_exec(path, "UPDATE counters SET value = 7 WHERE name = 'misses'");
  tj_cache *c = open_ok(path, 0);
  ck_assert_int_eq(tj_cache_clear(c), TJ_OK);
  tj_cache_stats st;
  ck_assert_int_eq(tj_cache_get_stats(c, &st), TJ_OK);
  ck_assert_uint_eq(st.entries, 0);
  ck_assert_uint_eq(st.bytes, 0);
  ck_assert_uint_eq(st.hits, 0);
  ck_assert_uint_eq(st.misses, 0);
  tj_cache_close(c);
  free(path); free(dir);
}
END_TEST

START_TEST(readonly_handle_refuses_to_write)
{
  char *dir, *path = three_rows(&dir);
  tj_cache *c = open_ok(path, TJ_CACHE_READONLY);
  uint64_t n = 99;
  ck_assert_int_eq(tj_cache_evict(c, 0, 0, &n), TJ_EINVAL);
  ck_assert_int_eq(tj_cache_clear(c), TJ_EINVAL);
  ck_assert_ptr_nonnull(strstr(tj_cache_errmsg(c), path));
  tj_cache_close(c);
  ck_assert_int_eq(count_rows(path), 3);
  free(path); free(dir);
}
END_TEST

START_TEST(missing_file_readonly_is_enoent_and_creates_nothing)
{
  char *dir = test_tmpdir(), *sub = test_path(dir, "sub"),
       *path = test_path(dir, "sub/cache.db");
  tj_cache *c = NULL;
  ck_assert_int_eq(tj_cache_open(&c, path, TJ_CACHE_READONLY), TJ_ENOENT);
  ck_assert_ptr_nonnull(c);
  ck_assert_ptr_nonnull(strstr(tj_cache_errmsg(c), path));
  ck_assert_str_eq(tj_cache_path(c), path);
  tj_cache_close(c);
  struct stat st;
  ck_assert_int_ne(stat(sub, &st), 0); /* not even the directory */
  free(path); free(sub); free(dir);
}
END_TEST

START_TEST(missing_file_readwrite_creates_a_private_cache)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "new/cache.db");
  tj_cache *c = open_ok(path, 0);
  tj_cache_stats st;
  ck_assert_int_eq(tj_cache_get_stats(c, &st), TJ_OK);
  ck_assert_uint_eq(st.entries, 0);
  tj_cache_close(c);
  struct stat sb;
  ck_assert_int_eq(stat(path, &sb), 0);
  ck_assert_uint_eq(sb.st_mode & 0777, 0600);
  free(path); free(dir);
}
END_TEST

START_TEST(unusable_files_are_reported)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("this is not an SQLite database, and it is long enough to tell\n", f);
  fclose(f);
  chmod(path, 0600);
  tj_cache *c = NULL;
  ck_assert_int_eq(tj_cache_open(&c, path, TJ_CACHE_READONLY), TJ_ECACHE);
  ck_assert_ptr_nonnull(strstr(tj_cache_errmsg(c), path));
  tj_cache_close(c);
  /* Not shown to be ours: read-write refuses it too, and moves nothing. */
  ck_assert_int_eq(tj_cache_open(&c, path, 0), TJ_ECACHE);
  ck_assert_ptr_nonnull(strstr(tj_cache_errmsg(c), "not a tokitai-jit cache"));
  tj_cache_close(c);
  unlink(path);
  tj_cache_close(open_ok(path, 0));

  chmod(path, 0666);
  ck_assert_int_eq(tj_cache_open(&c, path, TJ_CACHE_READONLY), TJ_EPERM);
  ck_assert_ptr_nonnull(strstr(tj_cache_errmsg(c), "refusing"));
  tj_cache_close(c);
  free(path); free(dir);
}
END_TEST

START_TEST(bad_arguments)
{
  tj_cache *c = NULL;
  ck_assert_int_eq(tj_cache_open(NULL, "/x", 0), TJ_EINVAL);
  ck_assert_int_eq(tj_cache_open(&c, "/x", TJ_NO_DEVICE), TJ_EINVAL);
  ck_assert_ptr_nonnull(strstr(tj_cache_errmsg(c), "flags"));
  ck_assert_int_eq(tj_cache_get_stats(c, NULL), TJ_EINVAL);
  tj_cache_close(c);
  tj_cache_close(NULL);
  ck_assert_ptr_nonnull(tj_cache_errmsg(NULL));
  ck_assert_ptr_null(tj_cache_path(NULL));
  ck_assert_int_eq(tj_cache_verify(NULL, 0, NULL, NULL, NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_cache_evict(NULL, 0, 0, NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_cache_clear(NULL), TJ_EINVAL);
}
END_TEST

START_TEST(default_path_comes_from_the_environment)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "env.db");
  setenv("TOKITAI_JIT_CACHE", path, 1);
  tj_cache *c = NULL;
  ck_assert_int_eq(tj_cache_open(&c, NULL, TJ_CACHE_READONLY), TJ_ENOENT);
  ck_assert_str_eq(tj_cache_path(c), path);
  tj_cache_close(c);
  unsetenv("TOKITAI_JIT_CACHE");
  unsetenv("XDG_CACHE_HOME");
  unsetenv("HOME");
  ck_assert_int_eq(tj_cache_open(&c, NULL, TJ_CACHE_READONLY), TJ_ENOENT);
  ck_assert_ptr_nonnull(strstr(tj_cache_errmsg(c), "HOME"));
  tj_cache_close(c);
  free(path); free(dir);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("cache_admin");
  TCase *tc = test_case(s, "cache_admin", 120);
  tcase_add_test(tc, list_is_most_recently_used_first);
  tcase_add_test(tc, list_gives_every_field);
  tcase_add_test(tc, stats_sum_the_rows);
  tcase_add_test(tc, verify_finds_a_tampered_blob_and_repair_drops_it);
  tcase_add_test(tc, verify_catches_a_size_that_lies);
  tcase_add_test(tc, verify_reports_a_damaged_database);
  tcase_add_test(tc, evict_by_age);
  tcase_add_test(tc, evict_by_size_drops_least_recently_used_first);
  tcase_add_test(tc, evictions_share_one_age_boundary);
  tcase_add_test(tc, trim_of_many_rows_keeps_the_newest);
  tcase_add_test(tc, verify_judges_code_as_a_load_does);
  tcase_add_test(tc, a_row_without_a_hash_is_dropped_by_load_and_repair);
  tcase_add_test(tc, a_visit_may_call_back_into_the_handle);
  tcase_add_test(tc, clear_empties_and_resets_counters);
  tcase_add_test(tc, readonly_handle_refuses_to_write);
  tcase_add_test(tc, missing_file_readonly_is_enoent_and_creates_nothing);
  tcase_add_test(tc, missing_file_readwrite_creates_a_private_cache);
  tcase_add_test(tc, unusable_files_are_reported);
  tcase_add_test(tc, bad_arguments);
  tcase_add_test(tc, default_path_comes_from_the_environment);
  return run_suite(s);
}
