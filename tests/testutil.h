/* testutil.h: what the Check suites share. */
#ifndef TJ_TESTUTIL_H
#define TJ_TESTUTIL_H

#include "config.h" /* first: feature macros and the platform */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tokitai-jit.h"

/* The arch compile-only tests target: one every supported compiler knows. */
#if defined(TJ_PLATFORM_NVIDIA)
#define TEST_ARCH "sm_90"
#else
#define TEST_ARCH "gfx90a"
#endif

/* A fresh directory under $TJ_TEST_TMPDIR (or /tmp), private to one test. */
static inline char *test_tmpdir(void)
{
  const char *base = getenv("TJ_TEST_TMPDIR");
  char *dir = NULL;
  if (asprintf(&dir, "%s/tj-XXXXXX", base && *base ? base : "/tmp") < 0 ||
      !mkdtemp(dir)) {
    perror("mkdtemp");
    abort();
  }
  return dir;
}

static inline char *test_path(const char *dir, const char *name)
{
  char *p = NULL;
  if (asprintf(&p, "%s/%s", dir, name) < 0)
    abort();
  return p;
}

/* tj_runtime_open, compile-only for arch, on the cache at path (NULL:
 * the default location) with more flags.  *rt is set even when the open
 * fails, for its message. */
static inline int test_open_arch(tj_runtime **rt, const char *arch,
                                 const char *cache_path, unsigned flags)
{
  tj_options o = {0};
  o.arch = arch;
  o.cache_path = cache_path;
  o.flags = TJ_NO_DEVICE | flags;
  *rt = NULL;
  return tj_runtime_open(rt, &o);
}

/* The same for TEST_ARCH. */
static inline int test_open(tj_runtime **rt, const char *cache_path,
                            unsigned flags)
{
  return test_open_arch(rt, TEST_ARCH, cache_path, flags);
}

/* A compile-only runtime for arch on the cache at path (NULL: no cache),
 * failing the test on error. */
static inline tj_runtime *open_for_arch(const char *arch,
                                        const char *cache_path)
{
  tj_runtime *rt = NULL;
  int rc = test_open_arch(&rt, arch, cache_path,
                          cache_path ? 0 : TJ_CACHE_DISABLE);
  ck_assert_msg(rc == TJ_OK, "%s: tj_runtime_open: %s: %s", arch,
                tj_strerror(rc), tj_errmsg(rt));
  return rt;
}

/* Open a compile-only runtime for TEST_ARCH on the cache at path (NULL:
 * no cache), failing the test on error. */
static inline tj_runtime *open_compile_only(const char *cache_path, unsigned flags)
{
  tj_runtime *rt = NULL;
  unsigned no_cache = cache_path ? 0 : TJ_CACHE_DISABLE;
  int rc = test_open(&rt, cache_path, flags | no_cache);
  ck_assert_msg(rc == TJ_OK, "tj_runtime_open: %s: %s", tj_strerror(rc),
                tj_errmsg(rt));
  return rt;
}

/* fresh in place of rt, for what a runtime reads at open: rt =
 * test_reopen(rt, open_gpu()) after a setenv.  The argument is opened before rt is closed, which a GPU test
 * needs: closing the last runtime of a device releases its context, and
 * with it the test's device memory and streams. */
static inline tj_runtime *test_reopen(tj_runtime *rt, tj_runtime *fresh)
{
  tj_runtime_close(rt);
  return fresh;
}

/* Is there a GPU a runtime can open?  Asked in a child, so that the
 * calling process never initialises the driver: a CUDA context does not
 * survive the fork() with which Check runs each test. */
static inline int test_gpu_present(void)
{
  pid_t pid = fork();
  if (pid == 0) {
    tj_options o = {0};
    o.flags = TJ_CACHE_DISABLE;
    tj_runtime *rt = NULL;
    int rc = tj_runtime_open(&rt, &o);
    tj_runtime_close(rt);
    _exit(rc == TJ_OK ? 0 : 1);
  }
  int status = 1;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Write a file of n bytes (mode 0600, replacing what was there). */
static inline void test_write_file(const char *path, const void *data, size_t n)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
  ck_assert_int_eq(write(fd, data, n), (ssize_t)n);
  ck_assert_int_eq(close(fd), 0);
}

static inline void test_write_text(const char *path, const char *text)
{
  test_write_file(path, text, strlen(text));
}

/* The whole file, malloc'd, its size in *n. */
static inline unsigned char *test_read_file(const char *path, size_t *n)
{
  struct stat st;
  int fd = open(path, O_RDONLY);
  ck_assert_msg(fd >= 0 && fstat(fd, &st) == 0, "%s: %s", path,
                strerror(errno));
  unsigned char *b = malloc((size_t)st.st_size + 1);
  ck_assert_ptr_nonnull(b);
  ck_assert_int_eq(read(fd, b, (size_t)st.st_size), st.st_size);
  close(fd);
  *n = (size_t)st.st_size;
  return b;
}

/* How many paths match a glob pattern (a file moved aside, files left
 * beside a cache). */
static inline int test_count_matches(const char *pattern)
{
  glob_t g;
  int n = glob(pattern, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
  globfree(&g);
  return n;
}

/* A new case of suite s.  Its timeout guards against a hang and measures
 * nothing; CK_TIMEOUT_MULTIPLIER stretches it (make check-valgrind). */
static inline TCase *test_case(Suite *s, const char *name, int seconds)
{
  TCase *tc = tcase_create(name);
  tcase_set_timeout(tc, seconds);
  suite_add_tcase(s, tc);
  return tc;
}

/* For a GPU suite's main: true, having said so, when no GPU is here; the
 * suite then exits 77, which automake counts as skipped. */
static inline int test_no_gpu(const char *suite)
{
  if (test_gpu_present())
    return 0;
  printf("no GPU: skipping %s\n", suite);
  return 1;
}

/* Run one suite, each test in its own process (Check's fork mode; CK_FORK=no
 * for a debugger) and its files under $TJ_TEST_TMPDIR, made here when a
 * suite runs by hand.  The exit status as automake's harness reads it. */
static inline int run_suite(Suite *s)
{
  const char *tmp = getenv("TJ_TEST_TMPDIR");
  if (tmp && *tmp && mkdir(tmp, 0700) != 0 && errno != EEXIST) {
    perror(tmp);
    return EXIT_FAILURE;
  }
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
