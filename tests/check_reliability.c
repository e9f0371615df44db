/*
 * check_reliability.c: the cache under the conditions users meet: many
 * processes and threads at once, writers killed mid-insert, corrupt and
 * truncated files, tampered rows, hostile and shared locations, nowhere to
 * write, old schemas and old compilers, and bad input everywhere.
 *
 * `make check` runs it small (about a minute on two cores); TJ_STRESS=1
 * (`make check-stress`) runs the long version: 16 processes x 2 archs, 100
 * SIGKILLs, 50 random files.  Each test prints its figures to the log.
 * Scenarios that need a private tmpfs (a read-only home, a full disk) run
 * in a child with its own mount namespace, and say "skipped" when the
 * system does not allow one.
 */
#include "testutil.h"
#include "reliability.h"
#include "embedded.h"

#include <errno.h>
#include <glob.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>

#if defined(TJ_PLATFORM_NVIDIA)
#define TEST_ARCH2 "sm_80"
#else
#define TEST_ARCH2 "gfx1030"
#endif

static struct scale {
  int stress;
  int procs;        /* processes racing on one fresh cache */
  int kernels;      /* embedded kernels each compiles per arch (0: all) */
  int threads;      /* threads sharing one runtime */
  int kills;        /* SIGKILLs of a writer */
  int kill_max_ms;  /* a kill comes 0 to this many ms after the start */
  int random_files; /* files of random bytes tried */
  int compile_rounds; /* rounds of 8 threads compiling at once */
  int light;        /* under valgrind, where a compile takes 30 s */
} S = {0, 4, 2, 8, 12, 40, 6, 3, 0};

/* In a forked child: say what failed and exit 1, for the parent to see. */
#define CHILD_CHECK(cond, ...)                                              \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                       \
      fprintf(stderr, __VA_ARGS__);                                         \
      fputc('\n', stderr);                                                  \
      return 1;                                                             \
    }                                                                       \
  } while (0)

static const char sentinel[] = "no_such_kernel_sentinel";

/* Make the runtime's message a known failure, so that a later check can
 * tell that no new warning was written since. */
static void set_sentinel(tj_runtime *rt)
{
  tj_kernel *k;
  tj_kernel_get(rt, sentinel, &k);
}

static int no_new_warning(tj_runtime *rt)
{
  return strstr(tj_errmsg(rt), sentinel) != NULL;
}

static tj_runtime *open_rt(const char *path, const char *arch, unsigned flags)
{
  tj_options o = {0};
  o.arch = arch;
  o.cache_path = path;
  o.flags = TJ_NO_DEVICE | flags;
  tj_runtime *rt = NULL;
  if (tj_runtime_open(&rt, &o) != TJ_OK) {
    fprintf(stderr, "tj_runtime_open(%s, %s): %s\n", path ? path : "default",
            arch, tj_errmsg(rt));
    tj_runtime_close(rt);
    return NULL;
  }
  return rt;
}

/* add_i32 for TEST_ARCH as a cache-less runtime compiles it: what every
 * runtime must hand out, whatever its cache held. */
static unsigned char *reference_code(size_t *size)
{
  tj_runtime *rt = open_rt(NULL, TEST_ARCH, TJ_CACHE_DISABLE);
  tj_kernel *k = NULL;
  tj_kernel_info info;
  if (!rt || tj_kernel_get(rt, "add_i32", &k) != TJ_OK) {
    tj_runtime_close(rt);
    return NULL;
  }
  tj_kernel_info_get(k, &info);
  unsigned char *code = malloc(info.code_size);
  memcpy(code, info.code, info.code_size);
  *size = info.code_size;
  tj_runtime_close(rt);
  return code;
}

/* add_i32 from rt: OK, and byte for byte the reference.  Its origin, or -1. */
static int get_reference(tj_runtime *rt, const unsigned char *ref, size_t n)
{
  tj_kernel *k = NULL;
  tj_kernel_info info;
  if (tj_kernel_get(rt, "add_i32", &k) != TJ_OK) {
    fprintf(stderr, "add_i32: %s\n", tj_errmsg(rt));
    return -1;
  }
  tj_kernel_info_get(k, &info);
  if (info.code_size != n || memcmp(info.code, ref, n) != 0) {
    fprintf(stderr, "add_i32: code differs from the reference\n");
    return -1;
  }
  return (int)info.origin;
}

static long long query_int(const char *path, const char *sql)
{
  sqlite3 *db;
  sqlite3_stmt *st;
  long long v = -1;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW)
      v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return v;
}

static void exec_sql(const char *path, const char *sql)
{
  sqlite3 *db;
  ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
  ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK, "%s: %s",
                sql, sqlite3_errmsg(db));
  sqlite3_close(db);
  chmod(path, 0600);
}

/* Rows whose blob fails its stored hash or size. */
static long long bad_rows(const char *path)
{
  sqlite3 *db;
  sqlite3_stmt *st;
  long long bad = 0;
  ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT code, code_hash, code_size "
                                      "FROM code_objects", -1, &st, NULL), SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW) {
    char h[TJ__KEY_HEX];
    int n = sqlite3_column_bytes(st, 0);
    tj__hash_hex(sqlite3_column_blob(st, 0), (size_t)n, h);
    const char *stored = (const char *)sqlite3_column_text(st, 1);
    bad += !stored || strcmp(h, stored) != 0 || sqlite3_column_int64(st, 2) != n;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return bad;
}

static int count_matches(const char *pattern)
{
  glob_t g;
  int n = glob(pattern, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
  globfree(&g);
  return n;
}

/* ================================================================ 1. many */

struct arch_job {
  const char *path, *arch;
  int kernels;
  int rc;
  char msg[512];
};

/* One runtime for one arch: every kernel, no error and no warning. */
static void *compile_all(void *arg)
{
  struct arch_job *j = arg;
  tj_runtime *rt = open_rt(j->path, j->arch, 0);
  j->rc = rt ? TJ_OK : TJ_ECACHE;
  for (int i = 0; rt && j->rc == TJ_OK && i < j->kernels; i++) {
    tj_kernel *k;
    j->rc = tj_kernel_get(rt, tj_embedded_name((size_t)i), &k);
  }
  snprintf(j->msg, sizeof j->msg, "%s", rt ? tj_errmsg(rt) : "open failed");
  tj_runtime_close(rt);
  return NULL;
}

/* A child: waits for the start signal, then both archs at once. */
static int racer(const char *path, int go_fd, int kernels)
{
  char c;
  if (read(go_fd, &c, 1) < 0)
    return 3;
  struct arch_job jobs[2] = {{path, TEST_ARCH, kernels, -100, ""},
                             {path, TEST_ARCH2, kernels, -100, ""}};
  pthread_t th[2];
  for (int a = 0; a < 2; a++)
    pthread_create(&th[a], NULL, compile_all, &jobs[a]);
  for (int a = 0; a < 2; a++)
    pthread_join(th[a], NULL);
  for (int a = 0; a < 2; a++)
    CHILD_CHECK(jobs[a].rc == TJ_OK && !jobs[a].msg[0], "%s: %s: '%s'",
                jobs[a].arch, tj_strerror(jobs[a].rc), jobs[a].msg);
  return 0;
}

static int kernels_per_arch(void)
{
  int all = (int)tj_embedded_count();
  return S.kernels && S.kernels < all ? S.kernels : all;
}

START_TEST(processes_race_on_a_fresh_cache_for_two_archs)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  int kernels = kernels_per_arch(), go[2], ok = 0;
  ck_assert_int_eq(pipe(go), 0);
  pid_t *pids = calloc((size_t)S.procs, sizeof *pids);
  for (int p = 0; p < S.procs; p++) {
    ck_assert_int_ge(pids[p] = fork(), 0);
    if (pids[p] == 0) {
      close(go[1]);
      int rc = racer(path, go[0], kernels);
      free(pids); free(path); free(dir); /* for valgrind in the child */
      _exit(rc);
    }
  }
  close(go[1]); /* every child's read returns now: they start together */
  for (int p = 0; p < S.procs; p++) {
    int status = 0;
    ck_assert_int_eq(waitpid(pids[p], &status, 0), pids[p]);
    ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  close(go[0]);
  char integrity[256];
  long long rows = query_int(path, "SELECT count(*) FROM code_objects");
  long long keys = query_int(path, "SELECT count(DISTINCT key) FROM code_objects");
  printf("reliability: %d processes x 2 archs (%s, %s) x %d kernels on one "
         "fresh cache: %d succeeded with no message; %lld rows, %lld keys\n",
         S.procs, TEST_ARCH, TEST_ARCH2, kernels, ok, rows, keys);
  ck_assert_int_eq(ok, S.procs);
  ck_assert_int_eq(rows, 2 * kernels);
  ck_assert_int_eq(keys, 2 * kernels);
  ck_assert_int_eq(bad_rows(path), 0);
  ck_assert_msg(rel_integrity(path, integrity, sizeof integrity), "%s", integrity);
  /* And the cache is used: a new runtime per arch compiles nothing. */
  for (int a = 0; a < 2; a++) {
    tj_runtime *rt = open_rt(path, a ? TEST_ARCH2 : TEST_ARCH, 0);
    tj_stats st;
    ck_assert_ptr_nonnull(rt);
    for (int i = 0; i < kernels; i++) {
      tj_kernel *k;
      ck_assert_int_eq(tj_kernel_get(rt, tj_embedded_name((size_t)i), &k), TJ_OK);
    }
    tj_runtime_stats(rt, &st);
    ck_assert_uint_eq(st.compiles, 0);
    ck_assert_uint_eq(st.cache_hits, (uint64_t)kernels);
    tj_runtime_close(rt);
  }
  free(pids); free(path); free(dir);
}
END_TEST

#define CALLER_SOURCES 2
static const char *const caller_source[CALLER_SOURCES] = {
  "extern \"C\" __global__ void one(int *p) { *p = 1; }",
  "extern \"C\" __global__ void two(int *p) { p[threadIdx.x] = 2; }",
};
static const char *const caller_entry[CALLER_SOURCES] = {"one", "two"};

struct thread_job {
  tj_runtime *rt;
  pthread_barrier_t *start;
  int first;
  tj_kernel *got[16];
  int rc;
  char msg[512]; /* the runtime's message right after a failure */
};

/* Every embedded kernel, starting from a different one in each thread,
 * then the caller kernels. */
static size_t thread_kernels(void)
{
  return S.light ? 1 : tj_embedded_count();
}

static void *thread_all(void *arg)
{
  struct thread_job *j = arg;
  size_t n = thread_kernels();
  pthread_barrier_wait(j->start);
  j->rc = TJ_OK;
  for (size_t i = 0; i < n && j->rc == TJ_OK; i++) {
    size_t at = (i + (size_t)j->first) % n;
    j->rc = tj_kernel_get(j->rt, tj_embedded_name(at), &j->got[at]);
  }
  for (int s = 0; s < CALLER_SOURCES && j->rc == TJ_OK; s++)
    j->rc = tj_kernel_compile(j->rt, caller_source[s], caller_entry[s], NULL,
                              &j->got[n + (size_t)s]);
  if (j->rc != TJ_OK) {
    snprintf(j->msg, sizeof j->msg, "%s", tj_errmsg(j->rt));
    fprintf(stderr, "thread %d: %s\n", j->first, tj_errmsg(j->rt));
  }
  return NULL;
}

START_TEST(threads_share_one_runtime_and_its_cache)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_runtime *rt = open_rt(path, TEST_ARCH, 0);
  ck_assert_ptr_nonnull(rt);
  size_t n = thread_kernels(), total = n + CALLER_SOURCES;
  ck_assert_uint_le(total, 16);
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)S.threads);
  pthread_t *th = calloc((size_t)S.threads, sizeof *th);
  struct thread_job *jobs = calloc((size_t)S.threads, sizeof *jobs);
  for (int t = 0; t < S.threads; t++) {
    jobs[t] = (struct thread_job){rt, &start, t, {0}, -100, ""};
    ck_assert_int_eq(pthread_create(&th[t], NULL, thread_all, &jobs[t]), 0);
  }
  for (int t = 0; t < S.threads; t++)
    pthread_join(th[t], NULL);
  tj_stats st;
  tj_runtime_stats(rt, &st);
  printf("reliability: %d threads sharing one runtime, %zu kernels each: "
         "%llu compiles, %llu memory hits\n", S.threads, total,
         (unsigned long long)st.compiles, (unsigned long long)st.memory_hits);
  for (int t = 0; t < S.threads; t++) {
    ck_assert_msg(jobs[t].rc == TJ_OK, "thread %d: %s: %s", t,
                  tj_strerror(jobs[t].rc), jobs[t].msg);
    for (size_t i = 0; i < total; i++)
      ck_assert_ptr_eq(jobs[t].got[i], jobs[0].got[i]);
  }
  ck_assert_uint_eq(st.compiles, total);
  ck_assert_uint_eq(st.memory_hits, (uint64_t)(S.threads - 1) * total);
  ck_assert_str_eq(tj_errmsg(rt), "");
  tj_runtime_close(rt);
  ck_assert_int_eq(query_int(path, "SELECT count(*) FROM code_objects"), (long long)total);
  pthread_barrier_destroy(&start);
  free(jobs); free(th); free(path); free(dir);
}
END_TEST

struct distinct_job {
  tj_runtime *rt;
  pthread_barrier_t *start;
  int id, failed;
};

/* Each round, every thread compiles a kernel no other thread asks for, all
 * released at once: hipRTC itself must never run twice at a time (it
 * aborted the process, or failed with "No available targets", before
 * compile.c made compiles take turns). */
static void *compile_distinct(void *arg)
{
  struct distinct_job *j = arg;
  for (int round = 0; round < S.compile_rounds; round++) {
    char src[160];
    tj_kernel *k;
    snprintf(src, sizeof src, "extern \"C\" __global__ void k(int *p) "
             "{ *p = %d; }", j->id * 100 + round);
    pthread_barrier_wait(j->start);
    if (tj_kernel_compile(j->rt, src, "k", NULL, &k) != TJ_OK) {
      fprintf(stderr, "thread %d round %d: %s\n", j->id, round, tj_errmsg(j->rt));
      j->failed++;
    }
  }
  return NULL;
}

START_TEST(threads_compile_different_kernels_at_once)
{
  enum { THREADS = 8 };
  tj_runtime *rt = open_rt(NULL, TEST_ARCH, TJ_CACHE_DISABLE);
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  pthread_t th[THREADS];
  struct distinct_job jobs[THREADS];
  for (int t = 0; t < THREADS; t++) {
    jobs[t] = (struct distinct_job){rt, &start, t, 0};
    ck_assert_int_eq(pthread_create(&th[t], NULL, compile_distinct, &jobs[t]), 0);
  }
  for (int t = 0; t < THREADS; t++)
    pthread_join(th[t], NULL);
  for (int t = 0; t < THREADS; t++)
    ck_assert_msg(jobs[t].failed == 0, "thread %d failed", t);
  tj_stats st;
  tj_runtime_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, (uint64_t)S.compile_rounds * THREADS);
  tj_runtime_close(rt);
  pthread_barrier_destroy(&start);
}
END_TEST

/* ================================================================ 2. kills */

/* The writer: fake rows through tj__cache_put as fast as it can, with a
 * trim and a usage record now and then, until it is killed. */
static void writer(const char *path, uint64_t seed)
{
  tj__cache *c = NULL;
  char msg[1024];
  if (tj__cache_open(path, 0, &c, msg, sizeof msg) != TJ_OK || !c) {
    fprintf(stderr, "writer: %s\n", msg);
    _exit(3);
  }
  for (uint64_t i = 0;; i++) {
    char key[TJ__KEY_HEX];
    size_t n;
    rel_fake_key(seed << 32 | i, key);
    unsigned char *blob = rel_fake_blob(key, &n);
    tj__cache_row r = {key, "fake", TEST_ARCH, "amd", "writer", "", blob, n, 1};
    if (tj__cache_put(c, &r) != TJ_OK)
      _exit(4);
    free(blob);
    if (i % 16 == 15) {
      const char *keys[] = {key};
      uint64_t hits[] = {1};
      tj__cache_record_usage(c, keys, hits, 1, 1);
      tj__cache_trim(c, -1, 768 * 1024, NULL);
    }
  }
}

/* After each kill: the file opens without a warning, integrity_check says
 * ok, and every row is whole. */
static long check_after_kill(const char *path, int kill_no)
{
  char why[256], integrity[256], msg[1024];
  if (access(path, F_OK) != 0)
    return 0; /* killed before it made the file */
  ck_assert_msg(rel_integrity(path, integrity, sizeof integrity),
                "kill %d: integrity_check: %s", kill_no, integrity);
  /* Killed before its schema was committed: an empty file, still fine. */
  long rows = query_int(path, "PRAGMA user_version") == 0
                  ? 0 : rel_check_fake_rows(path, why, sizeof why);
  ck_assert_msg(rows >= 0, "kill %d: %s", kill_no, why);
  tj__cache *c = NULL;
  ck_assert_int_eq(tj__cache_open(path, 0, &c, msg, sizeof msg), TJ_OK);
  ck_assert_msg(c && !msg[0], "kill %d: reopening: %s", kill_no, msg);
  tj__cache_close(c);
  return rows;
}

START_TEST(writer_killed_at_random_moments)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
  uint64_t rng = seed | 1;
  long rows = 0, survived = 0;
  printf("reliability: kill seed %llu\n", (unsigned long long)seed);
  for (int kill_no = 0; kill_no < S.kills; kill_no++) {
    long delay_us = (long)(rel_rand(&rng) % ((uint64_t)S.kill_max_ms * 1000 + 1));
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
      writer(path, (uint64_t)kill_no + 1);
    struct timespec ts = {delay_us / 1000000, (delay_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status), "writer exited by itself: %d", status);
    rows = check_after_kill(path, kill_no);
    survived++;
  }
  printf("reliability: writer killed with SIGKILL %d times (0 to %d ms "
         "after start): %ld survived, integrity ok each time, %ld whole rows "
         "at the end\n", S.kills, S.kill_max_ms, survived, rows);
  free(path); free(dir);
}
END_TEST

/* ================================================================ 3. corrupt */

/* A cache holding add_i32, its WAL folded in; returns the file's bytes. */
static unsigned char *valid_cache_bytes(const char *path, size_t *n)
{
  tj_runtime *rt = open_rt(path, TEST_ARCH, 0);
  tj_kernel *k;
  ck_assert_ptr_nonnull(rt);
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_runtime_close(rt);
  unsigned char *b = rel_read_file(path, n);
  ck_assert_ptr_nonnull(b);
  return b;
}

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
    ck_assert_ptr_nonnull(ref = reference_code(&ref_n));
  ck_assert_int_eq(rel_write_file(path, bytes, n), 0);
  for (int round = 0; round < 3; round++) {
    tj_runtime *rt = open_rt(path, TEST_ARCH, 0);
    ck_assert_msg(rt != NULL, "%s: round %d: the runtime did not open", label, round);
    char first[1024];
    snprintf(first, sizeof first, "%s", tj_errmsg(rt));
    int origin = get_reference(rt, ref, ref_n);
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
  tj_options o = {0};
  o.arch = TEST_ARCH;
  o.cache_path = path;
  o.flags = TJ_NO_DEVICE;
  tj_runtime *rt = NULL;
  int rc = tj_runtime_open(&rt, &o);
  ck_assert_msg(rc == TJ_ECACHE, "%s: %s", label, tj_err_name(rc));
  ck_assert_msg(strstr(tj_errmsg(rt), "tokitai-jit cache"), "%s: %s", label,
                tj_errmsg(rt));
  tj_runtime_close(rt);
  size_t got = 0;
  unsigned char *after = rel_read_file(path, &got);
  ck_assert_msg(after && got == n && memcmp(after, bytes, n) == 0,
                "%s: the file was changed", label);
  free(after);
  snprintf(beside, sizeof beside, "%s?*", path);
  ck_assert_msg(count_matches(beside) == 0, "%s: files beside it", label);
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
  unsigned char *whole = valid_cache_bytes(path, &n);
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
  unsigned char *b = valid_cache_bytes(path, &n);
  ck_assert_uint_gt(n, 8192);
  uint64_t rng = 99;
  for (size_t i = 4096; i < n; i++)
    b[i] = (unsigned char)rel_rand(&rng);
  survive("garbage after page 1", path, b, n, 1, "moved it to");
  /* Flipped bytes in the middle only: the table pages, not the schema. */
  free(b);
  b = valid_cache_bytes(path, &n);
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
  unsigned char *b = valid_cache_bytes(path, &n);
  tj_runtime *rt = open_rt(path, TEST_ARCH, 0); /* opens the good file */
  ck_assert_ptr_nonnull(rt);
  uint64_t rng = 7;
  for (size_t i = 4096; i < n; i++)
    b[i] = (unsigned char)rel_rand(&rng);
  int fd = open(path, O_WRONLY);
  ck_assert_int_eq(pwrite(fd, b + 4096, n - 4096, 4096), (ssize_t)(n - 4096));
  close(fd);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  ck_assert_msg(strstr(tj_errmsg(rt), "malformed") || strstr(tj_errmsg(rt), "not a database"),
                "warning: %s", tj_errmsg(rt));
  ck_assert_msg(strstr(tj_errmsg(rt), "moved it to"), "warning: %s", tj_errmsg(rt));
  set_sentinel(rt);
  ck_assert_int_eq(tj_kernel_get(rt, "gelu_fwd_f16", &k), TJ_OK);
  ck_assert_msg(no_new_warning(rt), "second warning: %s", tj_errmsg(rt));
  tj_runtime_close(rt);
  rt = open_rt(path, TEST_ARCH, 0);
  ck_assert_str_eq(tj_errmsg(rt), "");
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_runtime_close(rt);
  char integrity[256];
  ck_assert_msg(rel_integrity(path, integrity, sizeof integrity), "%s", integrity);
  free(b); free(path); free(dir);
}
END_TEST

START_TEST(schemas_that_cannot_be_used)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  exec_sql(path, "CREATE TABLE code_objects (key TEXT); PRAGMA user_version = 1");
  size_t n = 0;
  unsigned char *b = rel_read_file(path, &n);
  refused("unmarked table with missing columns", path, b, n);
  free(b);
  unlink(path);
  exec_sql(path, "CREATE TABLE code_objects (key TEXT); PRAGMA user_version = 2; "
           "PRAGMA application_id = 1953130868");
  b = rel_read_file(path, &n);
  survive("table with missing columns", path, b, n, 1, "moved it to");
  free(b);
  unlink(path);
  exec_sql(path, "CREATE TABLE code_objects (key TEXT PRIMARY KEY, code BLOB); "
           "PRAGMA user_version = -3; PRAGMA application_id = 1953130868");
  b = rel_read_file(path, &n);
  survive("schema version with no migration", path, b, n, 1, "cannot migrate");
  free(b);
  /* A newer library's file: left alone, no cache, one warning each time. */
  unlink(path);
  exec_sql(path, "CREATE TABLE future (x); PRAGMA user_version = 99; "
           "PRAGMA application_id = 1953130868");
  tj_runtime *rt = open_rt(path, TEST_ARCH, 0);
  ck_assert_ptr_nonnull(rt);
  ck_assert_msg(strstr(tj_errmsg(rt), "newer"), "%s", tj_errmsg(rt));
  ck_assert_ptr_null(tj_runtime_cache_path(rt));
  set_sentinel(rt);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  ck_assert(no_new_warning(rt));
  tj_runtime_close(rt);
  ck_assert_int_eq(query_int(path, "PRAGMA user_version"), 99);
  ck_assert_int_eq(query_int(path, "SELECT count(*) FROM future"), 0);
  free(path); free(dir);
}
END_TEST

START_TEST(a_directory_where_the_file_should_be)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  ck_assert_int_eq(mkdir(path, 0700), 0);
  tj_options o = {0};
  o.arch = TEST_ARCH;
  o.cache_path = path;
  o.flags = TJ_NO_DEVICE;
  tj_runtime *rt = NULL;
  ck_assert_int_eq(tj_runtime_open(&rt, &o), TJ_ECACHE);
  ck_assert_msg(strstr(tj_errmsg(rt), "is a directory; give a file path"), "%s",
                tj_errmsg(rt));
  tj_runtime_close(rt);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert(S_ISDIR(st.st_mode)); /* not ours to move */
  char beside[4096];
  snprintf(beside, sizeof beside, "%s?*", path);
  ck_assert_int_eq(count_matches(beside), 0); /* no cache.db.lock */
  free(path); free(dir);
}
END_TEST

/* Processes that all find the same corrupt file at once: it is moved aside
 * exactly once, and all of them end up on the one new file. */
START_TEST(processes_race_on_a_corrupt_file)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  size_t n;
  unsigned char *junk = valid_cache_bytes(path, &n);
  uint64_t rng = 3;
  for (size_t i = 100; i < n; i++) /* ours by its header, the rest garbage */
    junk[i] = (unsigned char)rel_rand(&rng);
  ck_assert_int_eq(rel_write_file(path, junk, n), 0);
  free(junk);
  int go[2];
  ck_assert_int_eq(pipe(go), 0);
  pid_t *pids = calloc((size_t)S.procs, sizeof *pids);
  for (int p = 0; p < S.procs; p++) {
    ck_assert_int_ge(pids[p] = fork(), 0);
    if (pids[p] == 0) {
      char c;
      close(go[1]);
      if (read(go[0], &c, 1) < 0)
        _exit(3);
      struct arch_job j = {path, TEST_ARCH, 1, -100, ""};
      compile_all(&j);
      if (j.rc != TJ_OK)
        fprintf(stderr, "corrupt race child: %s: %s\n", tj_strerror(j.rc), j.msg);
      free(pids); free(path); free(dir);
      _exit(j.rc == TJ_OK ? 0 : 1);
    }
  }
  close(go[1]);
  for (int p = 0; p < S.procs; p++) {
    int status = 0;
    ck_assert_int_eq(waitpid(pids[p], &status, 0), pids[p]);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d", p);
  }
  close(go[0]);
  char aside[4096], integrity[256];
  snprintf(aside, sizeof aside, "%s.corrupt-*", path);
  ck_assert_int_eq(count_matches(aside), 1);
  ck_assert_int_eq(query_int(path, "SELECT count(*) FROM code_objects"), 1);
  ck_assert_msg(rel_integrity(path, integrity, sizeof integrity), "%s", integrity);
  printf("reliability: %d processes opening one corrupt file at once: moved "
         "aside once, all on the one new file\n", S.procs);
  free(pids); free(path); free(dir);
}
END_TEST

/* ================================================================ 4. tamper */

static void tamper_and_expect_recompile(const char *path, const char *sql)
{
  static unsigned char *ref;
  static size_t ref_n;
  if (!ref)
    ck_assert_ptr_nonnull(ref = reference_code(&ref_n));
  tj_runtime *rt = open_rt(path, TEST_ARCH, 0);
  ck_assert_int_ge(get_reference(rt, ref, ref_n), 0); /* stored, or there */
  tj_runtime_close(rt);
  exec_sql(path, sql);
  rt = open_rt(path, TEST_ARCH, 0);
  ck_assert_msg(get_reference(rt, ref, ref_n) == TJ_FROM_COMPILER, "%s: loaded", sql);
  ck_assert_msg(strstr(tj_errmsg(rt), "hash"), "%s: warning: %s", sql, tj_errmsg(rt));
  tj_stats st;
  tj_runtime_stats(rt, &st);
  ck_assert_uint_eq(st.cache_drops, 1);
  tj_runtime_close(rt);
  ck_assert_int_eq(bad_rows(path), 0);
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
  tj_runtime *rt = open_rt(path, TEST_ARCH, 0);
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

/* ================================================================ 5. hostile */

static int open_status(const char *path, unsigned flags, char *msg, size_t len)
{
  tj_runtime *rt = NULL;
  tj_options o = {0};
  o.arch = TEST_ARCH;
  o.cache_path = path;
  o.flags = TJ_NO_DEVICE | flags;
  int rc = tj_runtime_open(&rt, &o);
  snprintf(msg, len, "%s", tj_errmsg(rt));
  tj_runtime_close(rt);
  return rc;
}

START_TEST(writable_ancestors_are_refused)
{
  char *dir = test_tmpdir(), *open_dir = test_path(dir, "open");
  char *path = test_path(open_dir, "sub/cache.db"), msg[1024];
  ck_assert_int_eq(mkdir(open_dir, 0700), 0);
  ck_assert_int_eq(chmod(open_dir, 0777), 0);
  ck_assert_int_eq(open_status(path, 0, msg, sizeof msg), TJ_EPERM);
  ck_assert_msg(strstr(msg, "writable by everyone"), "%s", msg);
  ck_assert_int_eq(chmod(open_dir, 01777), 0); /* sticky, as /tmp is */
  ck_assert_int_eq(open_status(path, 0, msg, sizeof msg), TJ_OK);
  free(path); free(open_dir); free(dir);
}
END_TEST

START_TEST(other_owners_are_refused_unless_group_sharing)
{
  char *dir = test_tmpdir(), *sub = test_path(dir, "theirs");
  char *path = test_path(sub, "cache.db"), msg[1024];
  ck_assert_int_eq(mkdir(sub, 0700), 0);
  if (geteuid() != 0 || chown(sub, 65534, 65534) != 0) {
    printf("reliability: ownership by another user: skipped, needs root to chown\n");
    free(path); free(sub); free(dir);
    return;
  }
  ck_assert_int_eq(open_status(path, 0, msg, sizeof msg), TJ_EPERM);
  ck_assert_msg(strstr(msg, "directory") && strstr(msg, "owned by uid 65534"), "%s", msg);
  /* A group cache: another member's directory and file, in our group. */
  ck_assert_int_eq(chown(sub, 65534, getegid()), 0);
  ck_assert_int_eq(chmod(sub, 0770), 0);
  ck_assert_int_eq(open_status(path, 0, msg, sizeof msg), TJ_EPERM);
  ck_assert_int_eq(open_status(path, TJ_CACHE_GROUP, msg, sizeof msg), TJ_OK);
  ck_assert_int_eq(chown(path, 65534, getegid()), 0);
  ck_assert_int_eq(open_status(path, TJ_CACHE_GROUP, msg, sizeof msg), TJ_OK);
  ck_assert_int_eq(open_status(path, 0, msg, sizeof msg), TJ_EPERM);
  ck_assert_msg(strstr(msg, "owned by uid 65534"), "%s", msg);
  /* Not in our group: refused even when sharing. */
  ck_assert_int_eq(chown(path, 65534, 65534), 0);
  ck_assert_int_eq(open_status(path, TJ_CACHE_GROUP, msg, sizeof msg), TJ_EPERM);
  ck_assert_msg(strstr(msg, "nor by one of your groups"), "%s", msg);
  free(path); free(sub); free(dir);
}
END_TEST

/* A group cache is writable by the group whatever the umask. */
START_TEST(group_cache_modes_ignore_the_umask)
{
  char *dir = test_tmpdir(), *sub = test_path(dir, "shared");
  char *path = test_path(sub, "cache.db");
  mode_t old = umask(077);
  tj_runtime *rt = open_rt(path, TEST_ARCH, TJ_CACHE_GROUP);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  umask(old);
  struct stat st;
  char side[4096];
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0660);
  snprintf(side, sizeof side, "%s-wal", path);
  ck_assert_int_eq(stat(side, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0660);
  snprintf(side, sizeof side, "%s.lock", path);
  ck_assert_int_eq(stat(side, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0660);
  ck_assert_int_eq(stat(sub, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0770);
  tj_runtime_close(rt);
  free(path); free(sub); free(dir);
}
END_TEST

/* ================================================================ 6. nowhere */

typedef int (*scenario)(const char *mnt);

/* Run fn in a child with its own mount namespace and a tmpfs of the given
 * options at a fresh directory: nothing leaks to the host.  Says so and
 * returns when the system allows no mounts. */
static void in_private_tmpfs(const char *label, const char *options, scenario fn)
{
  fflush(stdout);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    char *dir = test_tmpdir();
    if (unshare(CLONE_NEWNS) != 0 ||
        mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", dir, "tmpfs", 0, options) != 0)
      _exit(77);
    int rc = fn(dir);
    free(dir);
    _exit(rc);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    printf("reliability: %s: skipped, no tmpfs can be mounted here (needs "
           "CAP_SYS_ADMIN in a mount namespace)\n", label);
    return;
  }
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "%s failed (status 0x%x); the log says why", label, status);
  printf("reliability: %s: kernels compiled, one warning\n", label);
}

static int remount_readonly(const char *mnt)
{
  return mount("tmpfs", mnt, "tmpfs", MS_REMOUNT | MS_RDONLY, NULL);
}

/* Compile add_i32 and gelu_fwd_f16 with no new warning after the first. */
static int compiles_quietly_after_warning(tj_runtime *rt, const char *must_say)
{
  tj_kernel *k;
  CHILD_CHECK(tj_errmsg(rt)[0], "no warning");
  CHILD_CHECK(!must_say || strstr(tj_errmsg(rt), must_say), "warning '%s' lacks '%s'",
              tj_errmsg(rt), must_say);
  set_sentinel(rt);
  CHILD_CHECK(tj_kernel_get(rt, "add_i32", &k) == TJ_OK, "add_i32: %s", tj_errmsg(rt));
  CHILD_CHECK(tj_kernel_get(rt, "gelu_fwd_f16", &k) == TJ_OK, "gelu: %s", tj_errmsg(rt));
  CHILD_CHECK(no_new_warning(rt), "a second warning: %s", tj_errmsg(rt));
  return 0;
}

static int readonly_home(const char *mnt)
{
  char home[4096];
  snprintf(home, sizeof home, "%s/home", mnt);
  CHILD_CHECK(mkdir(home, 0700) == 0, "mkdir %s", home);
  CHILD_CHECK(remount_readonly(mnt) == 0, "remount: %s", strerror(errno));
  setenv("HOME", home, 1);
  unsetenv("XDG_CACHE_HOME");
  unsetenv("TOKITAI_JIT_CACHE");
  tj_runtime *rt = open_rt(NULL, TEST_ARCH, 0);
  CHILD_CHECK(rt, "no runtime");
  CHILD_CHECK(!tj_runtime_cache_path(rt), "a cache in a read-only home?");
  int rc = compiles_quietly_after_warning(rt, "Read-only file system");
  tj_runtime_close(rt);
  return rc;
}

/* A cache filled while writable, then its file system remounted read-only:
 * what it holds is used, new kernels compile, one warning. */
static int readonly_cache(const char *mnt)
{
  char path[4096];
  tj_kernel *k;
  tj_kernel_info info;
  snprintf(path, sizeof path, "%s/c/cache.db", mnt);
  tj_runtime *rt = open_rt(path, TEST_ARCH, 0);
  CHILD_CHECK(rt && tj_kernel_get(rt, "add_i32", &k) == TJ_OK, "filling");
  tj_runtime_close(rt);
  CHILD_CHECK(remount_readonly(mnt) == 0, "remount: %s", strerror(errno));
  rt = open_rt(path, TEST_ARCH, 0);
  CHILD_CHECK(rt, "no runtime");
  CHILD_CHECK(tj_kernel_get(rt, "add_i32", &k) == TJ_OK, "add_i32");
  tj_kernel_info_get(k, &info);
  CHILD_CHECK(info.origin == TJ_FROM_CACHE, "add_i32 not read from the cache");
  int rc = compiles_quietly_after_warning(rt, "cannot be written");
  tj_runtime_close(rt);
  return rc;
}

/* Fill the file system up: 4 KiB writes until ENOSPC. */
static int fill_up(const char *mnt)
{
  char path[4096], block[4096] = {0};
  snprintf(path, sizeof path, "%s/filler", mnt);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0)
    return -1;
  while (write(fd, block, sizeof block) == (ssize_t)sizeof block)
    ;
  int e = errno;
  close(fd);
  return e == ENOSPC ? 0 : -1;
}

/* The disk fills while the runtime has its cache open: the store fails,
 * the kernel is still good, and once there is room the cache works. */
static int disk_full_while_storing(const char *mnt)
{
  char path[4096], filler[4096];
  snprintf(path, sizeof path, "%s/c/cache.db", mnt);
  snprintf(filler, sizeof filler, "%s/filler", mnt);
  size_t ref_n;
  unsigned char *ref = reference_code(&ref_n);
  tj_runtime *rt = open_rt(path, TEST_ARCH, 0);
  CHILD_CHECK(ref && rt && !tj_errmsg(rt)[0], "open: %s", rt ? tj_errmsg(rt) : "");
  CHILD_CHECK(fill_up(mnt) == 0, "could not fill the tmpfs");
  CHILD_CHECK(get_reference(rt, ref, ref_n) == TJ_FROM_COMPILER, "add_i32");
  CHILD_CHECK(strstr(tj_errmsg(rt), "full"), "warning: '%s'", tj_errmsg(rt));
  set_sentinel(rt);
  tj_kernel *k;
  CHILD_CHECK(tj_kernel_get(rt, "gelu_fwd_f16", &k) == TJ_OK, "gelu");
  CHILD_CHECK(no_new_warning(rt), "a second warning: %s", tj_errmsg(rt));
  tj_runtime_close(rt);
  unlink(filler);
  char integrity[256];
  CHILD_CHECK(rel_integrity(path, integrity, sizeof integrity), "%s", integrity);
  for (int round = 0; round < 2; round++) { /* stored now, then read */
    rt = open_rt(path, TEST_ARCH, 0);
    CHILD_CHECK(rt && !tj_errmsg(rt)[0], "reopen: %s", rt ? tj_errmsg(rt) : "");
    int origin = get_reference(rt, ref, ref_n);
    CHILD_CHECK(origin == (round ? TJ_FROM_CACHE : TJ_FROM_COMPILER), "round %d", round);
    tj_runtime_close(rt);
  }
  free(ref);
  return 0;
}

static int disk_full_before_open(const char *mnt)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/sub/cache.db", mnt);
  CHILD_CHECK(fill_up(mnt) == 0, "could not fill the tmpfs");
  tj_runtime *rt = open_rt(path, TEST_ARCH, 0);
  CHILD_CHECK(rt, "no runtime");
  int rc = compiles_quietly_after_warning(rt, NULL);
  tj_runtime_close(rt);
  return rc;
}

START_TEST(nowhere_to_write)
{
  in_private_tmpfs("read-only home", "size=1m", readonly_home);
  in_private_tmpfs("read-only file system under a filled cache", "size=4m",
                   readonly_cache);
  in_private_tmpfs("disk full while storing (256 KiB tmpfs)", "size=256k",
                   disk_full_while_storing);
  in_private_tmpfs("disk full before opening (256 KiB tmpfs)", "size=256k",
                   disk_full_before_open);
}
END_TEST

/* A directory we may not write, made to bite even for root by running as
 * nobody in a child. */
static int unwritable_dir(const char *dir)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/cache.db", dir);
  tj_runtime *rt = open_rt(path, TEST_ARCH, 0);
  CHILD_CHECK(rt, "no runtime");
  CHILD_CHECK(!tj_runtime_cache_path(rt), "a cache in a read-only directory?");
  int rc = compiles_quietly_after_warning(rt, "Permission denied");
  tj_runtime_close(rt);
  return rc;
}

START_TEST(directory_without_write_permission)
{
  char *dir = test_tmpdir(), *ro = test_path(dir, "ro");
  ck_assert_int_eq(mkdir(ro, 0700), 0);
  int as_nobody = geteuid() == 0;
  if (as_nobody) { /* root writes anywhere: be nobody, if this system has one */
    ck_assert_int_eq(chmod(dir, 0755), 0);
    as_nobody = chown(ro, 65534, 65534) == 0;
    if (!as_nobody) {
      printf("reliability: directory mode 0500: skipped, cannot give it to uid 65534\n");
      free(ro); free(dir);
      return;
    }
  }
  ck_assert_int_eq(chmod(ro, 0500), 0);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    if (as_nobody && (setgroups(0, NULL) != 0 || setgid(65534) != 0 ||
                      setuid(65534) != 0))
      _exit(77);
    int rc = unwritable_dir(ro);
    free(ro); free(dir);
    _exit(rc);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    printf("reliability: directory mode 0500: skipped, cannot become uid 65534\n");
    free(ro); free(dir);
    return;
  }
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
  printf("reliability: directory mode 0500%s: kernels compiled, one warning\n",
         as_nobody ? " (as uid 65534)" : "");
  free(ro); free(dir);
}
END_TEST

/* No location at all: the runtime says so once and works. */
START_TEST(no_cache_location_at_all)
{
  unsetenv("TOKITAI_JIT_CACHE");
  unsetenv("XDG_CACHE_HOME");
  unsetenv("HOME");
  tj_runtime *rt = open_rt(NULL, TEST_ARCH, 0);
  ck_assert_ptr_nonnull(rt);
  ck_assert_ptr_null(tj_runtime_cache_path(rt));
  ck_assert_msg(strstr(tj_errmsg(rt), "without a cache"), "%s", tj_errmsg(rt));
  set_sentinel(rt);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  ck_assert(no_new_warning(rt));
  tj_stats st;
  tj_runtime_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, 1);    /* the in-memory table serves it */
  ck_assert_uint_eq(st.memory_hits, 1);
  tj_runtime_close(rt);
}
END_TEST

/* ================================================================ 7. upgrades */

/* The pre-release layout (user_version 0, no hash, size or compiler): its
 * rows are dropped and the file becomes version 1, silently. */
START_TEST(prerelease_cache_is_rebuilt)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  exec_sql(path, "CREATE TABLE code_objects (key TEXT PRIMARY KEY, kernel TEXT "
           "NOT NULL, arch TEXT NOT NULL, code BLOB NOT NULL, created INTEGER "
           "NOT NULL); CREATE INDEX code_objects_created ON code_objects(created);"
           "INSERT INTO code_objects VALUES ('0123456789abcdef0123456789abcdef', "
           "'add_i32', 'gfx90a', x'7f454c46', 0)");
  tj_runtime *rt = open_rt(path, TEST_ARCH, 0);
  ck_assert_ptr_nonnull(rt);
  ck_assert_msg(!tj_errmsg(rt)[0], "%s", tj_errmsg(rt));
  tj_kernel *k;
  tj_kernel_info info;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_kernel_info_get(k, &info);
  ck_assert_int_eq(info.origin, TJ_FROM_COMPILER);
  tj_runtime_close(rt);
  ck_assert_int_eq(query_int(path, "PRAGMA user_version"), 3);
  ck_assert_int_eq(query_int(path, "SELECT count(*) FROM code_objects"), 1);
  ck_assert_int_eq(query_int(path, "SELECT count(*) FROM code_objects WHERE "
                             "key = '0123456789abcdef0123456789abcdef'"), 0);
  ck_assert_int_eq(query_int(path, "SELECT count(*) FROM pragma_table_info("
                             "'code_objects') WHERE name = 'code_hash'"), 1);
  char aside[4096];
  snprintf(aside, sizeof aside, "%s.corrupt-*", path);
  ck_assert_int_eq(count_matches(aside), 0);
  free(path); free(dir);
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
  tj__key_input in = {e->source, e->source_len, e->entry, "", TEST_ARCH,
                      tj_platform(), old};
  tj__key_compute(&in, key);
  tj__cache_row r = {key, kernel, TEST_ARCH, tj_platform(), old, "", fake,
                     sizeof fake, 1};
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
  exec_sql(path, sql);
  size_t ref_n;
  unsigned char *ref = reference_code(&ref_n);
  tj_runtime *rt = open_rt(path, TEST_ARCH, 0);
  ck_assert_int_eq(get_reference(rt, ref, ref_n), TJ_FROM_COMPILER);
  ck_assert_str_eq(tj_errmsg(rt), "");
  tj_runtime_close(rt);
  snprintf(sql, sizeof sql, "SELECT count(*) FROM code_objects WHERE key = '%s'", idle);
  ck_assert_int_eq(query_int(path, sql), 0);   /* idle: evicted */
  snprintf(sql, sizeof sql, "SELECT count(*) FROM code_objects WHERE key = '%s'", recent);
  ck_assert_int_eq(query_int(path, sql), 1);   /* still in use elsewhere */
  ck_assert_int_eq(query_int(path, "SELECT count(*) FROM code_objects"), 2);
  free(ref); free(path); free(dir);
}
END_TEST

/* ================================================================ 8. input */

/* Each bad call: its code, a message naming what was wrong, and nothing
 * compiled or cached. */
#define EXPECT(call, code, word)                                            \
  do {                                                                      \
    int rc_ = (call);                                                       \
    ck_assert_msg(rc_ == (code), "%s: %s, not %s", #call, tj_err_name(rc_), \
                  tj_err_name(code));                                       \
    ck_assert_msg(strstr(tj_errmsg(rt), (word)), "%s: message '%s' lacks "  \
                  "'%s'", #call, tj_errmsg(rt), (word));                    \
    tried++;                                                                \
  } while (0)

static const char good_source[] = "extern \"C\" __global__ void k(int *p) { *p = 1; }";

static int bad_compiles(tj_runtime *rt)
{
  int tried = 0;
  tj_kernel *k = NULL;
  /* Options outside the allowlist never reach the compiler. */
  EXPECT(tj_kernel_compile(rt, good_source, "k", "--no-such-option", &k),
         TJ_EINVAL, "no-such-option");
  EXPECT(tj_kernel_compile(rt, good_source, "k", "-DX=1 -fbogus-flag", &k),
         TJ_EINVAL, "bogus-flag");
  EXPECT(tj_kernel_compile(rt, "extern \"C\" __global__ void k(int *p) { *p = ; }",
                           "k", NULL, &k), TJ_ECOMPILE, "error");
  EXPECT(tj_kernel_compile(rt, "#error stop here\n", "k", NULL, &k), TJ_ECOMPILE,
         "stop here");
  EXPECT(tj_kernel_compile(rt, "", "k", NULL, &k), TJ_EINVAL, "empty");
  EXPECT(tj_kernel_compile(rt, NULL, "k", NULL, &k), TJ_EINVAL, "source");
  EXPECT(tj_kernel_compile(rt, good_source, NULL, NULL, &k), TJ_EINVAL, "entry");
  EXPECT(tj_kernel_compile(rt, good_source, "k", NULL, NULL), TJ_EINVAL, "output");
  /* "k k" is a C++ name expression that names nothing; a tab is never one. */
  EXPECT(tj_kernel_compile(rt, good_source, "k k", NULL, &k), TJ_ENOENT, "'k k'");
  EXPECT(tj_kernel_compile(rt, good_source, "k\tk", NULL, &k), TJ_EINVAL,
         "name expression");
  size_t huge_n = (64u << 20) + 2;
  char *huge = malloc(huge_n);
  memset(huge, ' ', huge_n - 1);
  huge[huge_n - 1] = '\0';
  EXPECT(tj_kernel_compile(rt, huge, "k", NULL, &k), TJ_ERANGE, "limit");
  free(huge);
  ck_assert_ptr_null(k);
  return tried;
}

static int bad_kernel_calls(tj_runtime *rt)
{
  int tried = 0;
  static int32_t a[4], b[4], c[4];
  static uint16_t h[4];
  tj_kernel *k = NULL;
  EXPECT(tj_kernel_get(rt, "no_such_kernel", &k), TJ_ENOENT, "no_such_kernel");
  EXPECT(tj_kernel_get(rt, "", &k), TJ_ENOENT, "no embedded kernel");
  EXPECT(tj_kernel_get(rt, NULL, &k), TJ_EINVAL, "name");
  EXPECT(tj_add_i32(rt, NULL, NULL, b, c, 4), TJ_EINVAL, "a");
  EXPECT(tj_add_i32(rt, NULL, a, b, c, 0), TJ_EINVAL, "n");
  EXPECT(tj_add_i32(rt, NULL, a, b, c, SIZE_MAX / 2), TJ_EINVAL, "overflow");
  EXPECT(tj_gelu_fwd_f16(rt, NULL, h, h + 1, 2), TJ_EINVAL, "overlap");
  EXPECT(tj_gemm_f16(rt, NULL, -1, 4, 4, 1, h, 4, h, 4, 0, h, 4), TJ_EINVAL, "M");
  EXPECT(tj_gemm_f16(rt, NULL, 4, 4, 0, 1, h, 4, h, 4, 0, h, 4), TJ_EINVAL, "K");
  tj_report report;
  EXPECT(tj_verify(rt, NULL, 16, 1, &report), TJ_EINVAL, "kernel");
  EXPECT(tj_verify(rt, "no_such_kernel", 16, 1, &report), TJ_ENOENT, "no_such");
  ck_assert_ptr_null(k);
  return tried;
}

/* Calls without a runtime, or with nothing to write to. */
static int null_handles(void)
{
  int tried = 0;
  tj_kernel *k;
  tj_stats st;
  ck_assert_int_eq(tj_runtime_open(NULL, NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_kernel_get(NULL, "add_i32", &k), TJ_EINVAL);
  ck_assert_int_eq(tj_kernel_compile(NULL, good_source, "k", NULL, &k), TJ_EINVAL);
  ck_assert_int_eq(tj_runtime_stats(NULL, &st), TJ_EINVAL);
  ck_assert_int_eq(tj_runtime_bind(NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_launch(NULL, (tj_dim3){1, 1, 1}, (tj_dim3){1, 1, 1}, 0,
                             NULL, NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_kernel_info_get(NULL, NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_add_i32(NULL, NULL, NULL, NULL, NULL, 0), TJ_EINVAL);
  ck_assert_int_eq(tj_verify(NULL, "add_i32", 1, 1, NULL), TJ_EINVAL);
  ck_assert_ptr_null(tj_runtime_arch(NULL));
  ck_assert_ptr_null(tj_runtime_compiler(NULL));
  ck_assert_ptr_null(tj_runtime_cache_path(NULL));
  ck_assert_ptr_null(tj_kernel_function(NULL));
  ck_assert_ptr_null(tj_report_json(NULL));
  ck_assert_ptr_null(tj_report_markdown(NULL));
  ck_assert(tj_errmsg(NULL)[0]);
  tj_runtime_close(NULL);
  tried += 16;
  return tried;
}

/* Options that no runtime can open with. */
static int bad_options(void)
{
  int tried = 0;
  char *arch = malloc(4097);
  memset(arch, 'a', 4096);
  arch[4096] = '\0';
  const char *archs[] = {arch, "", "gfx90a; rm -rf /", "gfx9999", "sm_", "\xff\xfe"};
  const int codes[] = {TJ_EINVAL, TJ_EINVAL, TJ_EINVAL, TJ_EARCH, TJ_EINVAL, TJ_EINVAL};
  for (int i = 0; i < 6; i++) {
    tj_options o = {0};
    o.arch = archs[i];
    o.flags = TJ_NO_DEVICE | TJ_CACHE_DISABLE;
    tj_runtime *rt = NULL;
    int rc = tj_runtime_open(&rt, &o);
    if (i == 3 || i == 4) /* gfx9999, sm_: unknown to this platform's compiler */
      ck_assert_msg(rc == TJ_EARCH || rc == TJ_EINVAL, "%s: %s", archs[i], tj_err_name(rc));
    else
      ck_assert_msg(rc == codes[i], "arch %d: %s", i, tj_err_name(rc));
    ck_assert_msg(tj_errmsg(rt)[0], "arch %d: no message", i);
    tj_runtime_close(rt);
    tried++;
  }
  free(arch);
  tj_options o = {0};
  o.arch = TEST_ARCH;
  o.flags = 0x80000000u | TJ_NO_DEVICE;
  tj_runtime *rt = NULL;
  EXPECT(tj_runtime_open(&rt, &o), TJ_EINVAL, "flags");
  tj_runtime_close(rt);
  return tried;
}

START_TEST(bad_input_everywhere)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_runtime *rt = open_rt(path, TEST_ARCH, 0);
  ck_assert_ptr_nonnull(rt);
  int tried = bad_compiles(rt) + bad_kernel_calls(rt) + null_handles() + bad_options();
  tj_stats st;
  tj_runtime_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, 0);
  tj_runtime_close(rt);
  ck_assert_int_eq(query_int(path, "SELECT count(*) FROM code_objects"), 0);
  printf("reliability: %d bad calls: each its code and a message, nothing "
         "compiled or cached\n", tried);
  free(path); free(dir);
}
END_TEST

START_TEST(network_file_systems_are_recognised)
{
  ck_assert(tj__cache_fs_is_network(0x6969));     /* NFS */
  ck_assert(tj__cache_fs_is_network(0xFF534D42)); /* CIFS */
  ck_assert(tj__cache_fs_is_network(0x65735546)); /* FUSE */
  ck_assert(!tj__cache_fs_is_network(0xEF53));    /* ext4 */
  ck_assert(!tj__cache_fs_is_network(0x01021994)); /* tmpfs */
  ck_assert(!tj__cache_fs_is_network(0x58465342)); /* XFS */
}
END_TEST

int main(void)
{
  const char *stress = getenv("TJ_STRESS");
  if (stress && *stress && strcmp(stress, "0") != 0)
    S = (struct scale){1, 16, 0, 8, 100, 250, 50, 10, 0};
  else if (getenv("TJ_VALGRIND")) /* make check-valgrind: fewer compiles */
    S = (struct scale){0, 2, 1, 2, 12, 40, 2, 1, 1};
  Suite *s = suite_create("reliability");
  /* One case per kind of trouble: CK_RUN_CASE=corrupt runs one of them. */
  const struct {
    const char *name;
    const TTest *tests[8];
  } cases[] = {
    {"many", {processes_race_on_a_fresh_cache_for_two_archs,
              threads_share_one_runtime_and_its_cache,
              threads_compile_different_kernels_at_once}},
    {"kills", {writer_killed_at_random_moments}},
    {"corrupt", {random_bytes_and_foreign_files, truncated_files,
                 garbage_pages_behind_a_valid_header,
                 damage_found_after_open_warns_once, schemas_that_cannot_be_used,
                 a_directory_where_the_file_should_be,
                 processes_race_on_a_corrupt_file}},
    {"tamper", {tampered_rows_are_never_loaded}},
    {"hostile", {writable_ancestors_are_refused,
                 other_owners_are_refused_unless_group_sharing,
                 group_cache_modes_ignore_the_umask}},
    {"nowhere", {nowhere_to_write, directory_without_write_permission,
                 no_cache_location_at_all}},
    {"upgrade", {prerelease_cache_is_rebuilt,
                 old_compiler_rows_are_never_used_and_evicted}},
    {"input", {bad_input_everywhere, network_file_systems_are_recognised}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    TCase *tc = tcase_create(cases[i].name);
    tcase_set_timeout(tc, S.stress ? 1800 : 600);
    for (int t = 0; t < 8 && cases[i].tests[t]; t++)
      tcase_add_test(tc, cases[i].tests[t]);
    suite_add_tcase(s, tc);
  }
  return run_suite(s);
}
