/*
 * check_reliability_kill.c: a writer killed with SIGKILL at random moments
 * leaves a cache that opens without a warning, passes integrity_check and
 * holds only whole rows, code and tuning decisions alike.  TJ_STRESS=1 (make check-stress) kills it 100
 * times.
 */
#include "reliability.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

/* A decision as the writer stores it: its measured line names its config,
 * so that a torn row shows. */
static int put_decision(tj__cache *c, uint64_t i)
{
  char cls[32], config[32], measured[64];
  snprintf(cls, sizeof cls, "t%llux1x1/c4", (unsigned long long)(i % 500));
  snprintf(config, sizeof config, "sm90a_128x128_split%d", (int)(i % 15) + 2);
  snprintf(measured, sizeof measured, "%s\t1.000000\t3\n", config);
  tj__tuning_row t = {"gemm_f16", TEST_ARCH, "amd", "writer", cls, config, 128,
                      4096, 4096, "none", 3, measured, "tune", 0};
  return tj__cache_tuning_put(c, &t);
}

/* The writer: fake rows through tj__cache_put as fast as it can, with a
 * tuning decision, a trim and a usage record now and then, until it is
 * killed. */
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
    tj__cache_row r = {key, "fake", TEST_ARCH, "amd", "writer", "", blob, n,
                       1, NULL, NULL};
    if (tj__cache_put(c, &r) != TJ_OK)
      _exit(4);
    free(blob);
    if (i % 4 == 3 && put_decision(c, i) != TJ_OK)
      _exit(5);
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
  ck_assert_msg(tsql_integrity(path, integrity, sizeof integrity),
                "kill %d: integrity_check: %s", kill_no, integrity);
  /* Killed before its schema was committed: an empty file, still fine. */
  long rows = tsql_int(path, "PRAGMA user_version") == 0
                  ? 0 : rel_check_fake_rows(path, why, sizeof why);
  ck_assert_msg(rows >= 0, "kill %d: %s", kill_no, why);
  /* Every decision whole: its measured line is its own config's. */
  if (tsql_int(path, "PRAGMA user_version") != 0)
    ck_assert_msg(tsql_int(path, "SELECT count(*) FROM tuning WHERE measured "
                                 "<> config || char(9) || '1.000000' || "
                                 "char(9) || '3' || char(10) OR typeof(m) <> "
                                 "'integer' OR created < 1") == 0,
                  "kill %d: a torn tuning decision", kill_no);
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
         "and %lld whole tuning decisions at the end\n", S.kills,
         S.kill_max_ms, survived, rows,
         access(path, F_OK) == 0 ? tsql_int(path, "SELECT count(*) FROM tuning")
                                 : 0);
  free(path); free(dir);
}
END_TEST

int main(void)
{
  const rel_case cases[] = {
    {"kills", {writer_killed_at_random_moments}},
  };
  return rel_main("reliability_kill", cases, sizeof cases / sizeof *cases);
}
