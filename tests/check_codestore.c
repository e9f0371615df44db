/* check_codestore.c: the per-user cache's code directory (codestore.h) on
 * real files and the real compiler (compile-only, TEST_ARCH): a warm
 * start reads its kernel there without opening SQLite; a file that is
 * damaged, at another key, a link, or writable by others is never loaded
 * and the SQLite row serves instead; evictions take the files with their
 * rows; hits served from files are counted by the next process that opens
 * the SQLite file; a cache made before there were code files gains them. */
#include "testutil.h"
#include "internal.h"

#include <dirent.h>
#include <sys/stat.h>
#include <tokitai-jit/cache.h>

#define KERNEL "add_i32"
static const char user_src[] =
  "extern \"C\" __global__ void twice(float *x) { x[threadIdx.x] *= 2; }\n";

/* A cache in a new directory that holds KERNEL (and its file's other
 * entries); its path, and KERNEL's key in key. */
static char *filled_cache(char key[TJ__KEY_HEX])
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(path, 0);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, KERNEL, &k), TJ_OK);
  memcpy(key, k->key, TJ__KEY_HEX);
  tj_runtime_close(rt);
  free(dir);
  return path;
}

static char *code_file(const char *cache, const char *key)
{
  char *p = NULL;
  ck_assert_int_ge(asprintf(&p, "%s.code/%s", cache, key), 0);
  return p;
}

/* The files of 32 hex digits in the cache's code directory. */
static int code_files(const char *cache)
{
  char *pattern = NULL;
  ck_assert_int_ge(asprintf(&pattern, "%s.code/[0-9a-f]*", cache), 0);
  int n = test_count_matches(pattern);
  free(pattern);
  return n;
}

static uint64_t rows(const char *cache)
{
  tj_cache *c = NULL;
  tj_cache_stats st;
  ck_assert_int_eq(tj_cache_open(&c, cache, TJ_CACHE_READONLY), TJ_OK);
  ck_assert_int_eq(tj_cache_get_stats(c, &st), TJ_OK);
  tj_cache_close(c);
  return st.entries;
}

/* A new runtime's get of KERNEL: its stats, the code it loaded (malloc'd,
 * *n bytes), whether it opened the SQLite file, and its message. */
typedef struct warm {
  tj_stats st;
  unsigned char *code;
  size_t n;
  int opened_sqlite;
  char msg[2048];
} warm;

static warm get_warm(const char *cache)
{
  warm w;
  memset(&w, 0, sizeof w);
  tj_runtime *rt = open_compile_only(cache, 0);
  tj_kernel *k;
  int rc = tj_kernel_get(rt, KERNEL, &k);
  ck_assert_msg(rc == TJ_OK, "get: %s", tj_errmsg(rt));
  snprintf(w.msg, sizeof w.msg, "%s", tj_errmsg(rt));
  w.code = malloc(k->code_size);
  memcpy(w.code, k->code, k->code_size);
  w.n = k->code_size;
  w.opened_sqlite = rt->cache != NULL;
  ck_assert_int_eq(tj_runtime_get_stats(rt, &w.st), TJ_OK);
  tj_runtime_close(rt);
  return w;
}

/* KERNEL's code as the SQLite row holds it. */
static unsigned char *row_code(const char *cache, const char *key, size_t *n)
{
  tj_runtime *rt = open_compile_only(cache, 0);
  tj__cache *c = tj__runtime_cache(rt);
  tj__cache_row want = {key, KERNEL, rt->arch, TJ__PLATFORM, rt->compiler,
                        "", NULL, 0, 0, NULL};
  void *code = NULL;
  int dropped = 0;
  ck_assert_ptr_nonnull(c);
  ck_assert_int_eq(tj__cache_get(c, &want, &code, n, &dropped), TJ_OK);
  tj_runtime_close(rt);
  return code;
}

static void assert_has(const char *msg, const char *word)
{
  ck_assert_msg(strstr(msg, word), "message '%s' lacks '%s'", msg, word);
}

START_TEST(a_warm_start_reads_the_code_file_alone)
{
  char key[TJ__KEY_HEX];
  char *cache = filled_cache(key);
  /* One compile stored every entry of the file: a row and a file each. */
  ck_assert_int_eq((uint64_t)code_files(cache), rows(cache));
  struct stat st;
  char *file = code_file(cache, key);
  ck_assert_int_eq(stat(file, &st), 0);
  ck_assert_int_eq(st.st_mode & 0777, 0600);
  warm w = get_warm(cache);
  ck_assert_uint_eq(w.st.cache_hits, 1);
  ck_assert_uint_eq(w.st.compiles, 0);
  ck_assert_msg(!w.opened_sqlite, "a warm start opened the SQLite file");
  size_t n;
  unsigned char *row = row_code(cache, key, &n);
  ck_assert_uint_eq(n, w.n);
  ck_assert_int_eq(memcmp(row, w.code, n), 0);
  free(row);
  free(w.code);
  free(file);
  free(cache);
}
END_TEST

/* Rows a merge copies get their files with them: the first warm start
 * after `tokitai-jit --merge` into a per-user cache reads no SQLite. */
START_TEST(merged_rows_get_their_code_files)
{
  char key[TJ__KEY_HEX];
  char *src = filled_cache(key), *dir = test_tmpdir();
  char *target = test_path(dir, "cache.db");
  tj_cache *c = NULL;
  tj_cache_merge_stats st;
  ck_assert_int_eq(tj_cache_open(&c, target, 0), TJ_OK);
  ck_assert_int_eq(tj_cache_merge(c, src, &st), TJ_OK);
  ck_assert_uint_eq(st.copied, rows(src));
  tj_cache_close(c);
  ck_assert_uint_eq((uint64_t)code_files(target), rows(target));
  warm w = get_warm(target);
  ck_assert_uint_eq(w.st.cache_hits, 1);
  ck_assert_uint_eq(w.st.compiles, 0);
  ck_assert_msg(!w.opened_sqlite, "the first start after a merge opened SQLite");
  free(w.code);
  free(target);
  free(dir);
  free(src);
}
END_TEST

/* Every byte position class of a record: magic, version, the key echoed,
 * a column, the code, the check at the end. */
START_TEST(a_damaged_code_file_is_never_loaded)
{
  char key[TJ__KEY_HEX];
  char *cache = filled_cache(key), *file = code_file(cache, key);
  size_t n, rn;
  unsigned char *good = test_read_file(file, &n);
  unsigned char *row = row_code(cache, key, &rn);
  size_t at[] = {0, 9, 13, 50, n / 2, n - 100, n - 1};
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    unsigned char *bad = malloc(n);
    memcpy(bad, good, n);
    bad[at[i]] ^= 0x40;
    test_write_file(file, bad, n);
    warm w = get_warm(cache);
    ck_assert_msg(w.st.cache_hits == 1 && w.st.compiles == 0,
                  "byte %zu: hits %llu compiles %llu", at[i],
                  (unsigned long long)w.st.cache_hits,
                  (unsigned long long)w.st.compiles);
    ck_assert_msg(w.opened_sqlite, "byte %zu: the damaged file served", at[i]);
    assert_has(w.msg, "failed its checks");
    ck_assert_uint_eq(w.n, rn);
    ck_assert_int_eq(memcmp(w.code, row, rn), 0);
    /* The SQLite hit wrote the file again, whole. */
    size_t m;
    unsigned char *again = test_read_file(file, &m);
    ck_assert_uint_eq(m, n);
    ck_assert_int_eq(memcmp(again, good, n), 0);
    free(again);
    free(w.code);
    free(bad);
  }
  /* Cut short, and empty. */
  size_t cuts[] = {n - 1, 19, 0};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    test_write_file(file, good, cuts[i]);
    warm w = get_warm(cache);
    ck_assert_msg(w.opened_sqlite && w.st.compiles == 0, "cut at %zu", cuts[i]);
    free(w.code);
  }
  free(row);
  free(good);
  free(file);
  free(cache);
}
END_TEST

/* A whole, valid record of one kernel under another's key: the key it
 * echoes and its columns are not the request's. */
START_TEST(a_code_file_under_another_key_is_refused)
{
  char key[TJ__KEY_HEX];
  char *cache = filled_cache(key), *file = code_file(cache, key);
  tj_runtime *rt = open_compile_only(cache, 0);
  tj_kernel *other;
  ck_assert_int_eq(tj_kernel_get(rt, "gelu_fwd_f16", &other), TJ_OK);
  char *other_file = code_file(cache, other->key);
  tj_runtime_close(rt);
  size_t n;
  unsigned char *b = test_read_file(other_file, &n);
  test_write_file(file, b, n);
  warm w = get_warm(cache);
  ck_assert(w.opened_sqlite);
  ck_assert_uint_eq(w.st.compiles, 0);
  assert_has(w.msg, "failed its checks");
  free(w.code);
  free(b);
  free(other_file);
  free(file);
  free(cache);
}
END_TEST

START_TEST(a_code_file_others_could_write_is_refused)
{
  char key[TJ__KEY_HEX];
  char *cache = filled_cache(key), *file = code_file(cache, key);
  /* Writable by others. */
  ck_assert_int_eq(chmod(file, 0666), 0);
  warm w = get_warm(cache);
  ck_assert(w.opened_sqlite);
  assert_has(w.msg, "lets other users write it");
  free(w.code);
  /* A second name (hard link): someone else's name could rewrite it. */
  char *link_name = NULL;
  ck_assert_int_ge(asprintf(&link_name, "%s.code/elsewhere", cache), 0);
  ck_assert_int_eq(link(file, link_name), 0);
  w = get_warm(cache);
  ck_assert(w.opened_sqlite);
  assert_has(w.msg, "names (hard links)");
  free(w.code);
  unlink(link_name);
  /* A symbolic link to a good record. */
  char *aside = NULL;
  ck_assert_int_ge(asprintf(&aside, "%s.code/aside", cache), 0);
  ck_assert_int_eq(rename(file, aside), 0);
  ck_assert_int_eq(symlink(aside, file), 0);
  w = get_warm(cache);
  ck_assert(w.opened_sqlite);
  assert_has(w.msg, "symbolic link");
  free(w.code);
  free(aside);
  free(link_name);
  free(file);
  free(cache);
}
END_TEST

START_TEST(a_code_directory_others_could_write_is_not_used)
{
  char key[TJ__KEY_HEX];
  char *cache = filled_cache(key), *dir = NULL;
  ck_assert_int_ge(asprintf(&dir, "%s.code", cache), 0);
  ck_assert_int_eq(chmod(dir, 0777), 0);
  warm w = get_warm(cache);
  ck_assert(w.opened_sqlite);
  ck_assert_uint_eq(w.st.cache_hits, 1);
  ck_assert_uint_eq(w.st.compiles, 0);
  assert_has(w.msg, "lets other users create files in it");
  free(w.code);
  /* A symbolic link in its place is not followed either. */
  char *moved = NULL;
  ck_assert_int_ge(asprintf(&moved, "%s.moved", cache), 0);
  ck_assert_int_eq(chmod(dir, 0700), 0);
  ck_assert_int_eq(rename(dir, moved), 0);
  ck_assert_int_eq(symlink(moved, dir), 0);
  w = get_warm(cache);
  ck_assert(w.opened_sqlite);
  ck_assert_uint_eq(w.st.compiles, 0);
  assert_has(w.msg, "symbolic link");
  free(w.code);
  free(moved);
  free(dir);
  free(cache);
}
END_TEST

START_TEST(evictions_take_the_code_files_with_their_rows)
{
  char key[TJ__KEY_HEX];
  char *cache = filled_cache(key), *file = code_file(cache, key);
  tj_cache *c = NULL;
  uint64_t evicted = 0, bad = 0;
  ck_assert_int_eq(tj_cache_open(&c, cache, 0), TJ_OK);
  /* Down to half the bytes: the least recently used go. */
  tj_cache_stats cs;
  ck_assert_int_eq(tj_cache_get_stats(c, &cs), TJ_OK);
  ck_assert_int_eq(tj_cache_evict(c, -1, cs.bytes / 2, &evicted), TJ_OK);
  ck_assert_uint_gt(evicted, 0);
  ck_assert_int_eq((uint64_t)code_files(cache), rows(cache));
  /* Repair deletes a bad row, and its file. */
  ck_assert_int_eq(tj_cache_verify(c, 1, NULL, NULL, &bad), TJ_OK);
  ck_assert_int_eq(tj_cache_clear(c), TJ_OK);
  ck_assert_int_eq(code_files(cache), 0);
  tj_cache_close(c);
  /* Nothing is left to serve: the next get compiles. */
  tj_runtime *rt = open_compile_only(cache, 0);
  tj_kernel *k;
  tj_stats st;
  ck_assert_int_eq(tj_kernel_get(rt, KERNEL, &k), TJ_OK);
  ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
  ck_assert_uint_eq(st.compiles, 1);
  tj_runtime_close(rt);
  ck_assert_int_eq(access(file, F_OK), 0);
  /* Evicted by age, every row and file. */
  ck_assert_int_eq(tj_cache_open(&c, cache, 0), TJ_OK);
  ck_assert_int_eq(tj_cache_evict(c, 0, 0, &evicted), TJ_OK);
  tj_cache_close(c);
  ck_assert_int_eq(code_files(cache), 0);
  free(file);
  free(cache);
}
END_TEST

static int hits_of(const tj_cache_entry *e, void *ctx)
{
  const char *key = ((void **)ctx)[0];
  if (strcmp(e->key, key) == 0)
    *(uint64_t *)((void **)ctx)[1] = e->hits;
  return 0;
}

static uint64_t row_hits(const char *cache, const char *key, unsigned flags)
{
  tj_cache *c = NULL;
  uint64_t hits = 0;
  void *ctx[2] = {(void *)key, &hits};
  ck_assert_int_eq(tj_cache_open(&c, cache, flags), TJ_OK);
  ck_assert_int_eq(tj_cache_list(c, hits_of, ctx), TJ_OK);
  tj_cache_close(c);
  return hits;
}

START_TEST(hits_from_code_files_are_counted_later)
{
  char key[TJ__KEY_HEX];
  char *cache = filled_cache(key), *hits = NULL;
  ck_assert_int_ge(asprintf(&hits, "%s.code/hits", cache), 0);
  uint64_t before = row_hits(cache, key, TJ_CACHE_READONLY);
  for (int i = 0; i < 3; i++) {
    warm w = get_warm(cache);
    ck_assert(!w.opened_sqlite);
    free(w.code);
  }
  /* Lines that are not "KEY HITS TIME" are skipped. */
  int fd = open(hits, O_WRONLY | O_APPEND);
  ck_assert_int_ge(fd, 0);
  const char junk[] = "nonsense\n0123 1 2\nffffffffffffffffffffffffffffffff x 1\n"
                      "no newline at the end";
  ck_assert_int_eq(write(fd, junk, sizeof junk - 1), (ssize_t)sizeof junk - 1);
  close(fd);
  /* A read-only look counts them and leaves them noted; the next writer
   * folds them into the row and removes the note. */
  ck_assert_uint_eq(row_hits(cache, key, TJ_CACHE_READONLY), before + 3);
  ck_assert_int_eq(access(hits, F_OK), 0);
  tj_cache *c = NULL;
  tj_cache_stats st;
  ck_assert_int_eq(tj_cache_open(&c, cache, TJ_CACHE_READONLY), TJ_OK);
  ck_assert_int_eq(tj_cache_get_stats(c, &st), TJ_OK);
  tj_cache_close(c);
  ck_assert_uint_ge(st.hits, before + 3);
  ck_assert_uint_eq(row_hits(cache, key, 0), before + 3);
  ck_assert_int_ne(access(hits, F_OK), 0);
  ck_assert_uint_eq(row_hits(cache, key, 0), before + 3);
  ck_assert_uint_eq(row_hits(cache, key, TJ_CACHE_READONLY), before + 3);
  free(hits);
  free(cache);
}
END_TEST

START_TEST(a_cache_without_code_files_gains_them)
{
  char key[TJ__KEY_HEX];
  char *cache = filled_cache(key), *file = code_file(cache, key);
  char *cmd = NULL;
  ck_assert_int_ge(asprintf(&cmd, "rm -rf '%s.code'", cache), 0);
  ck_assert_int_eq(system(cmd), 0);
  warm w = get_warm(cache); /* an SQLite hit writes the file */
  ck_assert(w.opened_sqlite);
  ck_assert_uint_eq(w.st.compiles, 0);
  ck_assert_int_eq(access(file, F_OK), 0);
  free(w.code);
  w = get_warm(cache);
  ck_assert(!w.opened_sqlite);
  ck_assert_uint_eq(w.st.cache_hits, 1);
  free(w.code);
  free(cmd);
  free(file);
  free(cache);
}
END_TEST

/* The open still says what the file is: a code directory beside a file
 * that is not ours does not make it ours. */
START_TEST(a_foreign_file_beside_a_code_directory_is_refused)
{
  char key[TJ__KEY_HEX];
  char *cache = filled_cache(key);
  test_write_text(cache, "not a cache, but someone's notes\n");
  tj_runtime *rt = NULL;
  ck_assert_int_eq(test_open(&rt, cache, 0), TJ_ECACHE);
  tj_runtime_close(rt);
  free(cache);
}
END_TEST

/* A caller's module takes the same path. */
START_TEST(a_module_warm_start_reads_its_code_file)
{
  char *dir = test_tmpdir(), *cache = test_path(dir, "cache.db");
  for (int i = 0; i < 2; i++) {
    tj_runtime *rt = open_compile_only(cache, 0);
    tj_kernel *k;
    tj_stats st;
    ck_assert_int_eq(tj_kernel_compile(rt, user_src, "twice", NULL, &k), TJ_OK);
    ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
    ck_assert_uint_eq(st.compiles, i == 0);
    ck_assert_uint_eq(st.cache_hits, i == 1);
    ck_assert_msg(i == 0 || !rt->cache, "the second open read SQLite");
    tj_runtime_close(rt);
  }
  free(cache);
  free(dir);
}
END_TEST

static Suite *suite(void)
{
  Suite *s = suite_create("codestore");
  TCase *tc = test_case(s, "codestore", 300);
  tcase_add_test(tc, a_warm_start_reads_the_code_file_alone);
  tcase_add_test(tc, a_damaged_code_file_is_never_loaded);
  tcase_add_test(tc, a_code_file_under_another_key_is_refused);
  tcase_add_test(tc, a_code_file_others_could_write_is_refused);
  tcase_add_test(tc, a_code_directory_others_could_write_is_not_used);
  tcase_add_test(tc, evictions_take_the_code_files_with_their_rows);
  tcase_add_test(tc, hits_from_code_files_are_counted_later);
  tcase_add_test(tc, a_cache_without_code_files_gains_them);
  tcase_add_test(tc, a_foreign_file_beside_a_code_directory_is_refused);
  tcase_add_test(tc, a_module_warm_start_reads_its_code_file);
  tcase_add_test(tc, merged_rows_get_their_code_files);
  return s;
}

int main(void)
{
  return run_suite(suite());
}
