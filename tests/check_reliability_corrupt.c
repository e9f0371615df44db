/*
 * check_reliability_corrupt.c: corrupt, truncated, foreign and tampered
 * files: each either refused and left exactly as it was, or moved aside
 * and replaced, and a tampered row never loaded.
 */
#include "reliability.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

/*
 * Write bytes as the cache and use it three times.  Each runtime opens,
 * hands out exactly the reference add_i32 and never crashes; the first
 * warns when `warns`; by the third the cache is healthy again: add_i32
 * comes from it and nothing is said.  Returns the first warning.
 */
static void survive(const char *label, const char *path, const void *bytes,
                    size_t n, int warns, const char *must_say)
{
  static unsigned char *ref;
  static size_t ref_n;
  if (!ref)
    ck_assert_ptr_nonnull(ref = rel_reference_code(&ref_n));
  ck_assert_int_eq(rel_write_file(path, bytes, n), 0);
  for (int round = 0; round < 3; round++) {
    tj_runtime *rt = rel_open(path, TEST_ARCH, 0);
    ck_assert_msg(rt != NULL, "%s: round %d: the runtime did not open", label, round);
    char first[1024];
    snprintf(first, sizeof first, "%s", tj_errmsg(rt));
    int origin = rel_get_reference(rt, ref, ref_n);
    ck_assert_msg(origin >= 0, "%s: round %d: no good add_i32", label, round);
    if (getenv("TJ_TEST_VERBOSE"))
      fprintf(stderr, "  %s: round %d: origin %d, '%s' then '%s'\n", label, round, origin,
             first, tj_errmsg(rt));
    if (round == 0 && (warns || must_say)) {
      const char *said = first[0] ? first : tj_errmsg(rt);
      ck_assert_msg(said[0], "%s: no warning", label);
      ck_assert_msg(!must_say || strstr(said, must_say), "%s: warning '%s' "
                    "lacks '%s'", label, said, must_say);
    }
    if (round == 2) {
      ck_assert_msg(origin == TJ_FROM_CACHE, "%s: the cache is not used again", label);
      ck_assert_msg(!tj_errmsg(rt)[0], "%s: still warns: %s", label, tj_errmsg(rt));
    }
    tj_runtime_close(rt);
  }
}

/* A file that cannot be shown to be a cache: the runtime refuses it with
 * TJ_ECACHE and leaves it byte for byte as it was, nothing beside it. */
static void refused(const char *label, const char *path, const void *bytes,
                    size_t n)
{
  char beside[4096];
  snprintf(beside, sizeof beside, "%s.lock", path);
  unlink(beside);
  ck_assert_int_eq(rel_write_file(path, bytes, n), 0);
  tj_runtime *rt = NULL;
  int rc = test_open(&rt, path, 0);
  ck_assert_msg(rc == TJ_ECACHE, "%s: %s", label, tj_err_name(rc));
  ck_assert_msg(strstr(tj_errmsg(rt), "tokitai-jit cache"), "%s: %s", label,
                tj_errmsg(rt));
  tj_runtime_close(rt);
  size_t got = 0;
  unsigned char *after = test_read_file(path, &got);
  ck_assert_msg(after && got == n && memcmp(after, bytes, n) == 0,
                "%s: the file was changed", label);
  free(after);
  snprintf(beside, sizeof beside, "%s?*", path);
  ck_assert_msg(test_count_matches(beside) == 0, "%s: files beside it", label);
}

/* A cache holding add_i32 (left at path, whole) and its bytes with every
 * byte from `from` on drawn from seed: from 100, ours by its header and
 * the rest garbage; from 4096, page 1 (header and schema) intact. */
static unsigned char *garbled_cache_bytes(const char *path, size_t *n,
                                          size_t from, uint64_t seed)
{
  unsigned char *b = rel_valid_cache_bytes(path, n);
  ck_assert_uint_gt(*n, from);
  for (size_t i = from; i < *n; i++)
    b[i] = (unsigned char)rel_rand(&seed);
  return b;
}

START_TEST(random_bytes_and_foreign_files)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  uint64_t rng = 0x5eed;
  static const size_t sizes[] = {2, 99, 100, 512, 4096, 8192, 65536, 200000};
  for (int i = 0; i < S.random_files; i++) {
    size_t n = sizes[i % 8] + (size_t)(i / 8);
    unsigned char *junk = malloc(n);
    for (size_t b = 0; b < n; b++)
      junk[b] = (unsigned char)rel_rand(&rng);
    refused("random bytes", path, junk, n);
    free(junk);
  }
  static const char text[] = "this is not a database\n";
  refused("text file", path, text, sizeof text - 1);
  static const unsigned char elf[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  refused("ELF file", path, elf, sizeof elf);
  static const unsigned char gz[32] = {0x1f, 0x8b, 8, 0};
  refused("gzip file", path, gz, sizeof gz);
  unsigned char *zeros = calloc(1, 16384);
  refused("zero-filled file", path, zeros, 16384);
  free(zeros);
  printf("reliability: %d random-byte files and 4 foreign files: each "
         "refused with TJ_ECACHE and left exactly as it was\n", S.random_files);
  free(path); free(dir);
}
END_TEST

START_TEST(truncated_files)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  size_t n;
  unsigned char *whole = rel_valid_cache_bytes(path, &n);
  size_t cuts[] = {1, 16, 99, 100, 101, 1024, 4095, 4096, 4097, n / 2, n - 4096,
                   n - 1};
  int tried = 0;
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i += S.light ? 3 : 1) {
    if (cuts[i] >= n)
      continue;
    char label[64];
    snprintf(label, sizeof label, "truncated to %zu of %zu bytes", cuts[i], n);
    if (cuts[i] < 100) /* the header, and with it our mark, is cut */
      refused(label, path, whole, cuts[i]);
    else
      survive(label, path, whole, cuts[i], 0, NULL);
    tried++;
  }
  printf("reliability: %d truncations of a %zu-byte cache: the kernel correct "
         "and the cache reused each time\n", tried, n);
  free(whole); free(path); free(dir);
}
END_TEST

/* A header SQLite accepts and pages it only meets at the first lookup. */
START_TEST(garbage_pages_behind_a_valid_header)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  size_t n;
  unsigned char *b = garbled_cache_bytes(path, &n, 4096, 99);
  ck_assert_uint_gt(n, 8192);
  survive("garbage after page 1", path, b, n, 1, "moved it to");
  /* Flipped bytes in the middle only: the table pages, not the schema. */
  free(b);
  b = rel_valid_cache_bytes(path, &n);
  for (size_t i = 4096 + 64; i < n; i += 97)
    b[i] ^= 0x5a;
  survive("flipped bytes after page 1", path, b, n, 0, NULL);
  printf("reliability: 2 caches with valid headers and damaged pages: "
         "given up at the first lookup, moved aside, reused after\n");
  free(b); free(path); free(dir);
}
END_TEST

/* A file whose later pages fail while the runtime has it open: the get
 * that meets it warns once, later ones say nothing, the next runtime gets
 * a fresh file. */
START_TEST(damage_found_after_open_warns_once)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  size_t n;
  unsigned char *b = garbled_cache_bytes(path, &n, 4096, 7);
  tsql_remove_code(path); /* so that the runtime opens the SQLite file */
  tj_runtime *rt = rel_open(path, TEST_ARCH, 0); /* opens the good file */
  ck_assert_ptr_nonnull(rt);
  int fd = open(path, O_WRONLY);
  ck_assert_int_eq(pwrite(fd, b + 4096, n - 4096, 4096), (ssize_t)(n - 4096));
  close(fd);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  ck_assert_msg(strstr(tj_errmsg(rt), "malformed") || strstr(tj_errmsg(rt), "not a database"),
                "warning: %s", tj_errmsg(rt));
  ck_assert_msg(strstr(tj_errmsg(rt), "moved it to"), "warning: %s", tj_errmsg(rt));
  rel_set_sentinel(rt);
  ck_assert_int_eq(tj_kernel_get(rt, "gelu_fwd_f16", &k), TJ_OK);
  ck_assert_msg(rel_no_new_warning(rt), "second warning: %s", tj_errmsg(rt));
  tj_runtime_close(rt);
  rt = rel_open(path, TEST_ARCH, 0);
  ck_assert_str_eq(tj_errmsg(rt), "");
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_runtime_close(rt);
  char integrity[256];
  ck_assert_msg(tsql_integrity(path, integrity, sizeof integrity), "%s", integrity);
  free(b); free(path); free(dir);
}
END_TEST

START_TEST(schemas_that_cannot_be_used)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  rel_exec(path, "CREATE TABLE code_objects (key TEXT); PRAGMA user_version = 1");
  size_t n = 0;
  unsigned char *b = test_read_file(path, &n);
  refused("unmarked table with missing columns", path, b, n);
  free(b);
  unlink(path);
  rel_exec(path, "CREATE TABLE code_objects (key TEXT); PRAGMA user_version = 4; "
           "PRAGMA application_id = 1953130868");
  b = test_read_file(path, &n);
  survive("table with missing columns", path, b, n, 1, "moved it to");
  free(b);
  /* Ours at another version, newer or not: left alone, no cache, one
   * warning each time. */
  static const struct {
    int version;
    const char *says;
  } others[] = {{99, "newer"}, {-3, "remove it"}, {3, "remove it"}};
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
    char sql[256], want[64];
    unlink(path);
    snprintf(sql, sizeof sql, "CREATE TABLE other (x); PRAGMA user_version "
             "= %d; PRAGMA application_id = 1953130868", others[i].version);
    rel_exec(path, sql);
    tj_runtime *rt = rel_open(path, TEST_ARCH, 0);
    ck_assert_ptr_nonnull(rt);
    snprintf(want, sizeof want, "schema version %d", others[i].version);
    ck_assert_msg(strstr(tj_errmsg(rt), want) &&
                  strstr(tj_errmsg(rt), others[i].says), "%s", tj_errmsg(rt));
    ck_assert_ptr_null(tj_runtime_cache_path(rt));
    rel_set_sentinel(rt);
    tj_kernel *k;
    ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
    ck_assert(rel_no_new_warning(rt));
    tj_runtime_close(rt);
    ck_assert_int_eq(tsql_int(path, "PRAGMA user_version"), others[i].version);
    ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM other"), 0);
  }
  free(path); free(dir);
}
END_TEST

START_TEST(a_directory_where_the_file_should_be)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  ck_assert_int_eq(mkdir(path, 0700), 0);
  tj_runtime *rt = NULL;
  ck_assert_int_eq(test_open(&rt, path, 0), TJ_ECACHE);
  ck_assert_msg(strstr(tj_errmsg(rt), "is a directory; give a file path"), "%s",
                tj_errmsg(rt));
  tj_runtime_close(rt);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert(S_ISDIR(st.st_mode)); /* not ours to move */
  char beside[4096];
  snprintf(beside, sizeof beside, "%s?*", path);
  ck_assert_int_eq(test_count_matches(beside), 0); /* no cache.db.lock */
  free(path); free(dir);
}
END_TEST

/* A child of the race below: opens the cache at path, nothing more. */
static int open_only(int p, void *path)
{
  (void)p;
  tj_runtime *rt = rel_open(path, TEST_ARCH, 0);
  tj_runtime_close(rt);
  return rt ? 0 : 1;
}

/* Round after round of processes opening one corrupt file at once.  A
 * process whose stat saw the corrupt file but whose header read (by name)
 * came after another had moved it aside judged "not an SQLite database"
 * and refused the cache as foreign: 1 open in 30 to 40 here, found by
 * distcheck's run of the race below.  And one whose stat of the -wal came
 * after the mover had removed it refused it as a file of 0 names (once in
 * CI, 4 processes; once in 30,000 opens with TJ_STRESS=1 under load).
 * Opening only, so the rounds are many and cheap. */
START_TEST(opening_never_judges_a_file_moved_aside_meanwhile)
{
  char *dir0 = test_tmpdir(), *seed = test_path(dir0, "cache.db");
  size_t n;
  unsigned char *junk = garbled_cache_bytes(seed, &n, 100, 5);
  const int ROUNDS = S.stress ? 200 : 20; /* TJ_STRESS=1: 16 processes */
  for (int r = 0; r < ROUNDS; r++) {
    char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
    ck_assert_int_eq(rel_write_file(path, junk, n), 0);
    ck_assert_int_eq(rel_race(open_only, path), S.procs);
    char aside[4096];
    snprintf(aside, sizeof aside, "%s.corrupt-*", path);
    ck_assert_int_eq(test_count_matches(aside), 1);
    free(path); free(dir);
  }
  printf("reliability: %d rounds of %d processes opening one corrupt file: "
         "all opened, one move aside a round\n", ROUNDS, S.procs);
  free(junk); free(seed); free(dir0);
}
END_TEST

/* A child of the race below: add_i32 on the cache at path. */
static int open_the_corrupt_file(int p, void *path)
{
  struct arch_job j = {path, TEST_ARCH, 1, -100, ""};
  rel_compile_all(&j);
  if (j.rc != TJ_OK)
    fprintf(stderr, "corrupt race child %d: %s: %s\n", p, tj_strerror(j.rc),
            j.msg);
  return j.rc == TJ_OK ? 0 : 1;
}

/* Processes that all find the same corrupt file at once: it is moved aside
 * exactly once, and all of them end up on the one new file. */
START_TEST(processes_race_on_a_corrupt_file)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  size_t n;
  unsigned char *junk = garbled_cache_bytes(path, &n, 100, 3);
  ck_assert_int_eq(rel_write_file(path, junk, n), 0);
  free(junk);
  ck_assert_int_eq(rel_race(open_the_corrupt_file, path), S.procs);
  char aside[4096], integrity[256];
  snprintf(aside, sizeof aside, "%s.corrupt-*", path);
  ck_assert_int_eq(test_count_matches(aside), 1);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM code_objects"), 1);
  ck_assert_msg(tsql_integrity(path, integrity, sizeof integrity), "%s", integrity);
  printf("reliability: %d processes opening one corrupt file at once: moved "
         "aside once, all on the one new file\n", S.procs);
  free(path); free(dir);
}
END_TEST

/* ================================================================ 4. tamper */

static void tamper_and_expect_recompile(const char *path, const char *sql)
{
  static unsigned char *ref;
  static size_t ref_n;
  if (!ref)
    ck_assert_ptr_nonnull(ref = rel_reference_code(&ref_n));
  tj_runtime *rt = rel_open(path, TEST_ARCH, 0);
  ck_assert_int_ge(rel_get_reference(rt, ref, ref_n), 0); /* stored, or there */
  tj_runtime_close(rt);
  rel_exec(path, sql);
  rt = rel_open(path, TEST_ARCH, 0);
  ck_assert_msg(rel_get_reference(rt, ref, ref_n) == TJ_FROM_COMPILER, "%s: loaded", sql);
  ck_assert_msg(strstr(tj_errmsg(rt), "hash"), "%s: warning: %s", sql, tj_errmsg(rt));
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.cache_drops, 1);
  tj_runtime_close(rt);
  ck_assert_int_eq(tsql_bad_rows(path), 0);
}

START_TEST(tampered_rows_are_never_loaded)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tamper_and_expect_recompile(path, "UPDATE code_objects SET code_size = code_size + 1");
  tamper_and_expect_recompile(path, "UPDATE code_objects SET code_hash = "
                              "'00000000000000000000000000000000'");
  tamper_and_expect_recompile(path, "UPDATE code_objects SET code_hash = "
                              "code_hash || 'ff'");
  tamper_and_expect_recompile(path, "UPDATE code_objects SET code = "
                              "substr(code, 1, length(code) - 1) || CASE WHEN "
                              "substr(code, -1) = x'00' THEN x'01' ELSE x'00' END");
  tamper_and_expect_recompile(path, "UPDATE code_objects SET code = x''");
  tamper_and_expect_recompile(path, "UPDATE code_objects SET code = "
                              "CAST(code AS TEXT) || 'x'");
  /* Another kernel's whole, valid code object in add_i32's row. */
  tj_runtime *rt = rel_open(path, TEST_ARCH, 0);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, "gelu_fwd_f16", &k), TJ_OK);
  tj_runtime_close(rt);
  tamper_and_expect_recompile(path, "UPDATE code_objects SET code = (SELECT code "
                              "FROM code_objects WHERE kernel = 'gelu_fwd_f16') "
                              "WHERE kernel = 'add_i32'");
  printf("reliability: 7 kinds of tampered row: each caught by its hash or "
         "size, dropped and recompiled\n");
  free(path); free(dir);
}
END_TEST

/* Damaged tuning decisions: each is ignored (the heuristic runs: split 4
 * for 128 x 4096 x 4096 on sm_90, where the whole decision says 2; a blob
 * spelling a good config is damage too), the runtime opens without a
 * warning, code is still served, and the listing shows the row as
 * ignored.  A tune would replace it. */
static int count_known(const tj_tuning *t, void *ctx)
{
  int *n = ctx;
  n[0]++;
  n[1] += t->known;
  return 0;
}

START_TEST(tampered_tuning_rows_are_ignored)
{
  static const char *const tamper[] = {
    "UPDATE tuning SET config = 42",
    "UPDATE tuning SET config = x'736d3930615f313238783132385f73706c697432'",
    "UPDATE tuning SET config = 'sm90a_128x128_split2; DROP TABLE tuning'",
    "UPDATE tuning SET config = 'sm90a_128x128_split2' || zeroblob(0) || "
    "printf('%.*c', 100000, 'x')",
    "UPDATE tuning SET m = 'many'",
    "UPDATE tuning SET created = 1.5",
    "UPDATE tuning SET measured = x'00ff'",
    "UPDATE tuning SET runs = 'three'",
  };
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  static unsigned char *ref;
  static size_t ref_n;
  ck_assert_ptr_nonnull(ref = rel_reference_code(&ref_n));
  for (size_t i = 0; i < sizeof tamper / sizeof tamper[0]; i++) {
    tj_runtime *rt = rel_open(path, TEST_ARCH, 0);
    ck_assert_ptr_nonnull(rt);
    char *sql = NULL;
    ck_assert_int_ge(asprintf(&sql, "DELETE FROM tuning; INSERT INTO tuning "
                              "VALUES ('gemm_f16', '%s', '%s', '%s', "
                              "'t1x32x64/c4/s132', 'sm90a_128x128_split2', 128, "
                              "4096, 4096, 'x', 3, '', 'tune', 1); %s",
                              tj_runtime_arch(rt), tj_platform(),
                              tj_runtime_compiler(rt), tamper[i]), 0);
    tj_runtime_close(rt);
    rel_exec(path, sql);
    free(sql);
    rt = rel_open(path, TEST_ARCH, 0);
    ck_assert_ptr_nonnull(rt);
    rel_set_sentinel(rt);
    int split = tj_gemm_f16_split(rt, 64, 4096, 4096,
                                  (void *)((uintptr_t)1 << 32), 4096,
                                  (void *)((uintptr_t)2 << 32), 4096,
                                  (void *)((uintptr_t)3 << 32), 4096);
#if defined(TJ_PLATFORM_NVIDIA) /* TEST_ARCH sm_90: the Hopper path */
    ck_assert_msg(split == 4, "%s: split %d", tamper[i], split);
#else
    ck_assert_int_eq(split, 1);
#endif
    ck_assert_msg(rel_no_new_warning(rt), "%s: %s", tamper[i], tj_errmsg(rt));
    ck_assert_int_ge(rel_get_reference(rt, ref, ref_n), 0);
    tj_runtime_close(rt);
    tj_cache *c = NULL;
    int n[2] = {0, 0};
    ck_assert_int_eq(tj_cache_open(&c, path, TJ_CACHE_READONLY), TJ_OK);
    ck_assert_int_eq(tj_cache_list_tuning(c, count_known, n), TJ_OK);
    tj_cache_close(c);
    ck_assert_msg(n[0] == 1 && n[1] == 0, "%s: %d rows, %d used", tamper[i],
                  n[0], n[1]);
  }
  printf("reliability: %zu kinds of damaged tuning decision: each ignored, "
         "code still served\n", sizeof tamper / sizeof tamper[0]);
  free(ref);
  ref = NULL;
  free(path); free(dir);
}
END_TEST

int main(void)
{
  const rel_case cases[] = {
    {"corrupt", {random_bytes_and_foreign_files,
                 truncated_files,
                 garbage_pages_behind_a_valid_header,
                 damage_found_after_open_warns_once,
                 schemas_that_cannot_be_used,
                 a_directory_where_the_file_should_be,
                 processes_race_on_a_corrupt_file,
                 opening_never_judges_a_file_moved_aside_meanwhile}},
    {"tamper", {tampered_rows_are_never_loaded,
                tampered_tuning_rows_are_ignored}},
  };
  return rel_main("reliability_corrupt", cases, sizeof cases / sizeof *cases);
}
