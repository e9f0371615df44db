/*
 * check_reliability_upgrade.c: old files and old compilers: a cache of an
 * earlier layout is refused and left as it was, another compiler's rows
 * are never used and are evicted once idle.
 */
#include "reliability.h"
#include "embedded.h"

#include <string.h>

/* The bytes of path, to hold against what a refusal left. */
static unsigned char *snapshot(const char *path, size_t *n)
{
  unsigned char *b = test_read_file(path, n);
  ck_assert_ptr_nonnull(b);
  return b;
}

static void assert_unchanged(const char *path, const unsigned char *b,
                             size_t n)
{
  size_t now_n;
  unsigned char *now = test_read_file(path, &now_n);
  ck_assert_ptr_nonnull(now);
  ck_assert_uint_eq(now_n, n);
  ck_assert_msg(memcmp(now, b, n) == 0, "%s was changed", path);
  free(now);
  char aside[4096];
  snprintf(aside, sizeof aside, "%s.corrupt-*", path);
  ck_assert_int_eq(test_count_matches(aside), 0);
}

/* A layout made before files carried the mark (user_version 0, no hash,
 * size or compiler): nothing shows it to be ours, so the runtime refuses
 * it as another program's and leaves it byte for byte. */
START_TEST(unmarked_old_layout_is_refused_and_left)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  rel_exec(path, "PRAGMA journal_mode = DELETE; CREATE TABLE code_objects "
           "(key TEXT PRIMARY KEY, kernel TEXT NOT NULL, arch TEXT NOT NULL, "
           "code BLOB NOT NULL, created INTEGER NOT NULL); "
           "INSERT INTO code_objects VALUES ('0123456789abcdef0123456789abcdef', "
           "'add_i32', 'gfx90a', x'7f454c46', 0)");
  size_t n;
  unsigned char *b = snapshot(path, &n);
  tj_runtime *rt = NULL;
  ck_assert_int_eq(test_open(&rt, path, 0), TJ_ECACHE);
  ck_assert_msg(strstr(tj_errmsg(rt), "not a tokitai-jit cache"), "%s",
                tj_errmsg(rt));
  tj_runtime_close(rt);
  assert_unchanged(path, b, n);
  free(b); free(path); free(dir);
}
END_TEST

/* A cache of ours at an earlier schema version: the runtime goes on
 * without it, says to remove it, and stores nothing in it. */
START_TEST(older_schema_is_refused_and_left)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_runtime *rt = rel_open(path, TEST_ARCH, 0);
  ck_assert_ptr_nonnull(rt);
  tj_runtime_close(rt);
  rel_exec(path, "PRAGMA journal_mode = DELETE; PRAGMA user_version = 3");
  size_t n;
  unsigned char *b = snapshot(path, &n);
  rt = rel_open(path, TEST_ARCH, 0);
  ck_assert_ptr_nonnull(rt);
  const char *msg = tj_errmsg(rt);
  ck_assert_msg(strstr(msg, "schema version 3") && strstr(msg, "remove it"),
                "%s", msg);
  tj_kernel *k;
  tj_kernel_info info = {0};
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  ck_assert_int_eq(tj_kernel_get_info(k, &info), TJ_OK);
  ck_assert_int_eq(info.origin, TJ_FROM_COMPILER);
  tj_runtime_close(rt);
  ck_assert_int_eq(tsql_int(path, "PRAGMA user_version"), 3);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM code_objects"), 0);
  assert_unchanged(path, b, n);
  free(b); free(path); free(dir);
}
END_TEST

/* Rows of another compiler: never used (the compiler is in the key), and
 * deleted once idle for TJ__CACHE_FOREIGN_IDLE, at the next compile. */
static void put_old_row(tj__cache *c, const char *kernel, const char *old,
                        char key[TJ__KEY_HEX])
{
  static const unsigned char fake[] = "\x7f" "ELF the old compiler's code";
  const tj__embedded_kernel *e = tj__embedded_find(kernel);
  ck_assert_ptr_nonnull(e);
  tj__key_input in = {.source = e->source, .source_len = e->source_len,
                      .entry = e->entry, .options = "", .arch = TEST_ARCH,
                      .platform = tj_platform(), .compiler = old};
  tj__key_compute(&in, key);
  tj__cache_row r = {key, kernel, TEST_ARCH, tj_platform(), old, "", fake,
                     sizeof fake, 1, NULL, NULL};
  ck_assert_int_eq(tj__cache_put(c, &r), TJ_OK);
}

START_TEST(old_compiler_rows_are_never_used_and_evicted)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db"), msg[1024];
  char idle[TJ__KEY_HEX], recent[TJ__KEY_HEX], sql[256];
  const char *old = "hiprtc 0.9, comgr 1.0 (HIP 0)";
  tj__cache *c = NULL;
  ck_assert_int_eq(tj__cache_open(path, 0, &c, msg, sizeof msg), TJ_OK);
  put_old_row(c, "add_i32", old, idle);
  put_old_row(c, "gelu_fwd_f16", old, recent);
  tj__cache_close(c);
  snprintf(sql, sizeof sql, "UPDATE code_objects SET last_used = last_used - "
           "%d - 86400 WHERE key = '%s'", TJ__CACHE_FOREIGN_IDLE, idle);
  rel_exec(path, sql);
  size_t ref_n;
  unsigned char *ref = rel_reference_code(&ref_n);
  tj_runtime *rt = rel_open(path, TEST_ARCH, 0);
  ck_assert_int_eq(rel_get_reference(rt, ref, ref_n), TJ_FROM_COMPILER);
  /* The miss says why: the old row's compiler (check_explain.c). */
  ck_assert_msg(strstr(tj_errmsg(rt), "differs in the compiler fingerprint"),
                "%s", tj_errmsg(rt));
  tj_runtime_close(rt);
  snprintf(sql, sizeof sql, "SELECT count(*) FROM code_objects WHERE key = '%s'", idle);
  ck_assert_int_eq(tsql_int(path, sql), 0);   /* idle: evicted */
  snprintf(sql, sizeof sql, "SELECT count(*) FROM code_objects WHERE key = '%s'", recent);
  ck_assert_int_eq(tsql_int(path, sql), 1);   /* still in use elsewhere */
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM code_objects"), 2);
  free(ref); free(path); free(dir);
}
END_TEST

int main(void)
{
  const rel_case cases[] = {
    {"upgrade", {unmarked_old_layout_is_refused_and_left,
                 older_schema_is_refused_and_left,
                 old_compiler_rows_are_never_used_and_evicted}},
  };
  return rel_main("reliability_upgrade", cases, sizeof cases / sizeof *cases);
}
