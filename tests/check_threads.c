/* check_threads.c: two threads failing at once on one runtime, each with
 * a different bad argument to a different call, many times over, each
 * reading back its own message while the other is failing.  Small and
 * free of compiles so that it runs under ThreadSanitizer as well as
 * AddressSanitizer (see README.md, "Sanitizers"):
 *   ../configure --enable-sanitizers=thread
 *   make check TESTS=tests/check_threads
 * check_compiler_input's errmsg_is_per_thread has more threads, one call. */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>

#define ROUNDS 2000

typedef struct failer {
  tj_runtime *rt;
  int which;      /* 0: tj_kernel_get, 1: tj_verify */
  int wrong;      /* rounds whose code or message was not its own */
  char last[320]; /* the first wrong message, for the report */
  tj_report *report; /* never written: every call fails */
  pthread_barrier_t *start;
} failer;

/* One failing call with an argument no other round or thread uses; the
 * quoted name must come back in this thread's message. */
static int fail_once(failer *f, int round, char *name, size_t len)
{
  char bare[48];
  snprintf(bare, sizeof bare, "%s_%d", f->which ? "no_oracle" : "no_kernel",
           round);
  snprintf(name, len, "'%s'", bare);
  if (f->which == 0) {
    tj_kernel *k = NULL;
    return tj_kernel_get(f->rt, bare, &k) == TJ_ENOENT;
  }
  return tj_verify(f->rt, bare, 4, 1, f->report) == TJ_ENOENT;
}

static void *fail_and_read(void *p)
{
  failer *f = p;
  char name[64];
  pthread_barrier_wait(f->start);
  for (int r = 0; r < ROUNDS; r++) {
    int code_ok = fail_once(f, r, name, sizeof name);
    const char *msg = tj_errmsg(f->rt);
    char copy[256];
    snprintf(copy, sizeof copy, "%s", msg);
    sched_yield(); /* let the other thread fail in between */
    if (code_ok && strstr(copy, name) && strcmp(tj_errmsg(f->rt), copy) == 0)
      continue;
    if (f->wrong++ == 0)
      snprintf(f->last, sizeof f->last, "round %d: '%.200s' (wanted %s)", r, copy,
               name);
  }
  return NULL;
}

START_TEST(two_threads_fail_at_once)
{
  tj_runtime *rt = open_compile_only(NULL, 0);
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, 2);
  failer f[2];
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    memset(&f[i], 0, sizeof f[i]);
    f[i].rt = rt;
    f[i].which = i;
    f[i].start = &start;
    f[i].report = calloc(1, sizeof *f[i].report);
    ck_assert_ptr_nonnull(f[i].report);
    ck_assert_int_eq(pthread_create(&t[i], NULL, fail_and_read, &f[i]), 0);
  }
  for (int i = 0; i < 2; i++) {
    pthread_join(t[i], NULL);
    ck_assert_msg(f[i].wrong == 0, "thread %d read %d wrong messages; first %s",
                  i, f[i].wrong, f[i].last);
    free(f[i].report);
  }
  pthread_barrier_destroy(&start);
  ck_assert_str_eq(tj_errmsg(rt), ""); /* this thread never failed */
  tj_runtime_close(rt);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("threads");
  TCase *tc = tcase_create("threads");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, two_threads_fail_at_once);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
