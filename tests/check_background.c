/*
 * check_background.c: background builds (tj_options.background_builds)
 * without a GPU.  The lookup that never compiles (an embedded kernel, a
 * module, one another thread is building), the option and its variable,
 * the worker compiling into the cache and joined at close (a close
 * during a compile waits for it and drops what has not begun), threads
 * asking at once queueing one build, a failed build told once, and, with
 * NVRTC, tj_gemm's Hopper configuration compiled behind a call.  What a
 * GPU runs (the fallback's result, the switch) is check_kernels_gpu's.
 * Also run under ThreadSanitizer:
 *   ../configure --enable-sanitizers=thread
 *   make check TESTS=tests/check_background
 */
#include "testutil.h"
#include "internal.h"
#include "gemm/gemm.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#define THREADS 4

static tj_runtime *open_background(const char *cache_path, int wanted)
{
  tj_options o = {0};
  o.size = sizeof o;
  o.arch = TEST_ARCH;
  o.cache_path = cache_path;
  o.flags = TJ_NO_DEVICE | (cache_path ? 0 : TJ_CACHE_DISABLE);
  o.background_builds = wanted;
  tj_runtime *rt = NULL;
  int rc = tj_runtime_open(&rt, &o);
  ck_assert_msg(rc == TJ_OK, "tj_runtime_open: %s", tj_errmsg(rt));
  return rt;
}

static uint64_t compiles_of(tj_runtime *rt)
{
  tj_stats s;
  ck_assert_int_eq(tj_runtime_get_stats(rt, &s), TJ_OK);
  return s.compiles;
}

typedef struct lookup {
  tj_runtime *rt;
  const char *name;
} lookup;

static int get_kernel(void *p)
{
  const lookup *l = p;
  tj_kernel *k = NULL;
  return tj_kernel_get(l->rt, l->name, &k);
}

static int built(tj_runtime *rt, const char *name)
{
  lookup l = {rt, name};
  return tj__built_only(get_kernel, &l);
}

/* An embedded entry whose compile the worker can be given, and a small
 * square f16 call for the fallback to take: tj_gemm_f16's own kernel
 * (its entry off Hopper, embedded on every platform). */
static const char *f16_entry(tj_runtime *rt, tj_gemm_desc *d)
{
  static uint16_t a[64 * 64], b[64 * 64], c[64 * 64];
  (void)rt;
  *d = tj__gemm_f16_desc(64, 64, 64, 1.0f, a, 64, b, 64, 0.0f, c, 64);
  return "gemm_f16";
}

/* ------------------------------------------------------- the lookup */

START_TEST(built_lookup_never_compiles)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(db, 0);
  ck_assert_int_eq(built(rt, "add_i32"), TJ_ENOENT);
  ck_assert_uint_eq(compiles_of(rt), 0);
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  ck_assert_uint_eq(compiles_of(rt), 1);
  ck_assert_int_eq(built(rt, "add_i32"), TJ_OK); /* in memory */
  rt = test_reopen(rt, open_compile_only(db, 0));
  ck_assert_int_eq(built(rt, "add_i32"), TJ_OK); /* in the cache */
  ck_assert_int_eq(built(rt, "gelu_fwd_f16"), TJ_ENOENT);
  ck_assert_uint_eq(compiles_of(rt), 0);
  /* Outside the scope the same call compiles. */
  ck_assert_int_eq(tj_kernel_get(rt, "gelu_fwd_f16", &k), TJ_OK);
  ck_assert_uint_eq(compiles_of(rt), 1);
  tj_runtime_close(rt);
  free(db);
  free(dir);
}
END_TEST

static const char module_text[] =
    "extern \"C\" __global__ void twice(int *p) { *p *= 2; }\n";

static int get_module(void *p)
{
  const lookup *l = p;
  const char *entry = "twice";
  tj_module_source src = {sizeof src, module_text, "twice.hip", NULL, 0,
                          NULL, 0, &entry, 1};
  tj_module *m = NULL;
  return tj_module_compile(l->rt, &src, &m);
}

START_TEST(built_lookup_of_a_module)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(db, 0);
  lookup l = {rt, NULL};
  ck_assert_int_eq(tj__built_only(get_module, &l), TJ_ENOENT);
  ck_assert_uint_eq(compiles_of(rt), 0);
  ck_assert_int_eq(get_module(&l), TJ_OK);
  ck_assert_uint_eq(compiles_of(rt), 1);
  ck_assert_int_eq(tj__built_only(get_module, &l), TJ_OK);
  rt = test_reopen(rt, open_compile_only(db, 0));
  l.rt = rt;
  ck_assert_int_eq(tj__built_only(get_module, &l), TJ_OK);
  ck_assert_uint_eq(compiles_of(rt), 0);
  tj_runtime_close(rt);
  free(db);
  free(dir);
}
END_TEST

/* A build that holds its slot until released. */
typedef struct held {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int building, released;
  tj__modtable *table;
} held;

static int held_build(void *ctx, tj_kernel **out)
{
  held *h = ctx;
  static tj_kernel k;
  pthread_mutex_lock(&h->lock);
  h->building = 1;
  pthread_cond_broadcast(&h->cond);
  while (!h->released)
    pthread_cond_wait(&h->cond, &h->lock);
  pthread_mutex_unlock(&h->lock);
  *out = &k;
  return TJ_OK;
}

static void *build_held(void *p)
{
  held *h = p;
  tj_kernel *k = NULL;
  int hit = 0;
  tj__modtable_get(h->table, 0, "slow", held_build, h, &k, &hit);
  return NULL;
}

static int never_built(void *ctx, tj_kernel **out)
{
  (void)ctx, (void)out;
  return TJ_EINVAL; /* the lookup below must not come here */
}

static int get_held(void *p)
{
  held *h = p;
  tj_kernel *k = NULL;
  int hit = 0;
  return tj__modtable_get(h->table, 0, "slow", never_built, NULL, &k, &hit);
}

/* Being built by another thread is not built, and the lookup does not
 * wait for it (it would wait forever here: the build is released only
 * after). */
START_TEST(built_lookup_does_not_wait_for_a_build)
{
  held h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0,
            tj__modtable_new()};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, build_held, &h), 0);
  pthread_mutex_lock(&h.lock);
  while (!h.building)
    pthread_cond_wait(&h.cond, &h.lock);
  pthread_mutex_unlock(&h.lock);
  ck_assert_int_eq(tj__built_only(get_held, &h), TJ_ENOENT);
  ck_assert_int_eq(tj__built_only_now(), 0);
  pthread_mutex_lock(&h.lock);
  h.released = 1;
  pthread_cond_broadcast(&h.cond);
  pthread_mutex_unlock(&h.lock);
  pthread_join(t, NULL);
  ck_assert_int_eq(tj__built_only(get_held, &h), TJ_OK); /* ready now */
  tj__modtable_free(h.table, NULL, NULL);
}
END_TEST

/* ------------------------------------------------------- the option */

START_TEST(off_by_default_on_by_option_or_variable)
{
  tj_gemm_desc d;
  unsetenv("TOKITAI_JIT_BACKGROUND_BUILDS");
  tj_runtime *rt = open_compile_only(NULL, 0);
  ck_assert_ptr_null(rt->worker);
  ck_assert_int_eq(tj__gemm_defer_kernel(rt, f16_entry(rt, &d), &d), 0);
  ck_assert_int_eq(tj__worker_submit(rt, "x", NULL, NULL, 0), TJ_EINVAL);
  tj_runtime_close(rt);
  rt = open_background(NULL, 1);
  ck_assert_ptr_nonnull(rt->worker);
  tj_runtime_close(rt);
  setenv("TOKITAI_JIT_BACKGROUND_BUILDS", "1", 1);
  rt = open_compile_only(NULL, 0); /* size 0: the first version */
  ck_assert_ptr_nonnull(rt->worker);
  tj_runtime_close(rt);
  rt = open_background(NULL, -1);
  ck_assert_ptr_null(rt->worker);
  tj_runtime_close(rt);
  setenv("TOKITAI_JIT_BACKGROUND_BUILDS", "yes", 1);
  rt = open_background(NULL, 0);
  ck_assert_ptr_null(rt->worker);
  tj_runtime_close(rt);
  unsetenv("TOKITAI_JIT_BACKGROUND_BUILDS");
  tj_options o = {0};
  o.size = sizeof o;
  o.arch = TEST_ARCH;
  o.flags = TJ_NO_DEVICE | TJ_CACHE_DISABLE;
  o.background_builds = 2;
  ck_assert_int_eq(tj_runtime_open(&rt, &o), TJ_EINVAL);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "background_builds is 2"));
  tj_runtime_close(rt);
}
END_TEST

/* ------------------------------------------------------- the worker */

START_TEST(worker_compiles_into_the_cache)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  tj_runtime *rt = open_background(db, 1);
  tj_gemm_desc d;
  const char *entry = f16_entry(rt, &d);
  ck_assert_int_eq(tj__gemm_defer_kernel(rt, entry, &d), 1);
  tj__worker_drain(rt);
  ck_assert_uint_eq(compiles_of(rt), 1);
  ck_assert_int_eq(tj__gemm_defer_kernel(rt, entry, &d), 0); /* built */
  ck_assert_uint_eq(compiles_of(rt), 1);
  /* A descriptor the fallback does not take is never deferred. */
  tj_gemm_desc tall = d;
  tall.m = 64LL * 65535 + 1;
  ck_assert_int_eq(tj__gemm_defer_kernel(rt, "gelu_fwd_f16", &tall), 0);
  ck_assert_uint_eq(compiles_of(rt), 1);
  rt = test_reopen(rt, open_compile_only(db, 0));
  ck_assert_int_eq(built(rt, entry), TJ_OK);
  ck_assert_uint_eq(compiles_of(rt), 0);
  tj_runtime_close(rt);
  free(db);
  free(dir);
}
END_TEST

typedef struct counted {
  int runs;
  pthread_barrier_t *start;
  tj_runtime *rt;
  int said[THREADS];
} counted;

static int count_run(tj_runtime *rt, const void *arg)
{
  counted *c = *(counted *const *)arg;
  (void)rt;
  __atomic_fetch_add(&c->runs, 1, __ATOMIC_SEQ_CST);
  return TJ_OK;
}

typedef struct asker {
  counted *c;
  int i;
} asker;

static void *ask(void *p)
{
  asker *a = p;
  counted *c = a->c;
  pthread_barrier_wait(c->start);
  c->said[a->i] = tj__worker_submit(c->rt, "one", count_run, &c, sizeof c);
  return NULL;
}

START_TEST(threads_queue_one_build)
{
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  counted c = {0, &start, open_background(NULL, 1), {0}};
  ck_assert_int_eq(tj__worker_submit(c.rt, "one", NULL, NULL, 0), TJ_ENOENT);
  pthread_t t[THREADS];
  asker a[THREADS];
  for (int i = 0; i < THREADS; i++) {
    a[i] = (asker){&c, i};
    ck_assert_int_eq(pthread_create(&t[i], NULL, ask, &a[i]), 0);
  }
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  tj__worker_drain(c.rt);
  ck_assert_int_eq(c.runs, 1);
  for (int i = 0; i < THREADS; i++)
    ck_assert(c.said[i] == TJ__WORK_PENDING || c.said[i] == TJ__WORK_DONE);
  counted *cp = &c;
  ck_assert_int_eq(tj__worker_submit(c.rt, "one", count_run, &cp, sizeof cp),
                   TJ__WORK_DONE);
  ck_assert_int_eq(c.runs, 1);
  tj_runtime_close(c.rt);
  pthread_barrier_destroy(&start);
}
END_TEST

static int nothing(tj_runtime *rt, const void *arg)
{
  (void)rt, (void)arg;
  return TJ_OK;
}

/* Past its bound of names the worker takes no more (TJ_ENOMEM: the
 * caller builds on its own), and the names it has keep their answers. */
START_TEST(the_worker_has_a_bound)
{
  tj_runtime *rt = open_background(NULL, 1);
  char name[32];
  int i = 0, rc;
  do {
    snprintf(name, sizeof name, "name %d", i++);
    rc = tj__worker_submit(rt, name, nothing, "", 1);
  } while (rc == TJ__WORK_PENDING && i < 100000);
  ck_assert_int_eq(rc, TJ_ENOMEM);
  ck_assert_int_gt(i, 16);
  tj__worker_drain(rt);
  ck_assert_int_eq(tj__worker_submit(rt, "name 0", nothing, "", 1),
                   TJ__WORK_DONE);
  ck_assert_int_eq(tj__worker_submit(rt, "one more", nothing, "", 1),
                   TJ_ENOMEM);
  tj_gemm_desc d;
  ck_assert_int_eq(tj__gemm_defer_kernel(rt, f16_entry(rt, &d), &d), 0);
  tj_runtime_close(rt);
}
END_TEST

/* The same through tj_gemm_f16's hook: the real compile, once. */
typedef struct deferrer {
  tj_runtime *rt;
  const char *entry;
  tj_gemm_desc d;
  pthread_barrier_t *start;
  int said;
} deferrer;

static void *defer_one(void *p)
{
  deferrer *f = p;
  pthread_barrier_wait(f->start);
  f->said = tj__gemm_defer_kernel(f->rt, f->entry, &f->d);
  return NULL;
}

START_TEST(threads_defer_to_one_compile)
{
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  tj_runtime *rt = open_background(NULL, 1);
  deferrer f[THREADS];
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    f[i] = (deferrer){rt, NULL, {0}, &start, -1};
    f[i].entry = f16_entry(rt, &f[i].d);
    ck_assert_int_eq(pthread_create(&t[i], NULL, defer_one, &f[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    ck_assert(f[i].said == 0 || f[i].said == 1);
  }
  tj__worker_drain(rt);
  ck_assert_uint_eq(compiles_of(rt), 1);
  tj_runtime_close(rt);
  pthread_barrier_destroy(&start);
}
END_TEST

/* A build that says when it begins, then compiles. */
typedef struct begun {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int started;
} begun;

static int start_then_compile(tj_runtime *rt, const void *arg)
{
  begun *b = *(begun *const *)arg;
  pthread_mutex_lock(&b->lock);
  b->started = 1;
  pthread_cond_broadcast(&b->cond);
  pthread_mutex_unlock(&b->lock);
  tj_kernel *k = NULL;
  return tj_kernel_get(rt, "add_i32", &k);
}

static int compile_kernel(tj_runtime *rt, const void *arg)
{
  tj_kernel *k = NULL;
  return tj_kernel_get(rt, arg, &k);
}

/* A close during a compile waits for it (its row is stored) and drops
 * the build queued behind it. */
START_TEST(close_during_a_compile_is_clean)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  tj_runtime *rt = open_background(db, 1);
  begun b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  begun *bp = &b;
  ck_assert_int_eq(tj__worker_submit(rt, "first", start_then_compile, &bp,
                                     sizeof bp), TJ__WORK_PENDING);
  pthread_mutex_lock(&b.lock);
  while (!b.started)
    pthread_cond_wait(&b.cond, &b.lock);
  pthread_mutex_unlock(&b.lock);
  ck_assert_int_eq(tj__worker_submit(rt, "second", compile_kernel,
                                     "gelu_fwd_f16", sizeof "gelu_fwd_f16"),
                   TJ__WORK_PENDING);
  tj_runtime_close(rt);
  rt = open_compile_only(db, 0);
  ck_assert_int_eq(built(rt, "add_i32"), TJ_OK);
  ck_assert_int_eq(built(rt, "gelu_fwd_f16"), TJ_ENOENT);
  tj_runtime_close(rt);
  /* A close with builds queued and none begun, or none at all. */
  rt = open_background(db, 1);
  tj__worker_submit(rt, "third", compile_kernel, "gelu_bwd_f16",
                    sizeof "gelu_bwd_f16");
  tj_runtime_close(rt);
  tj_runtime_close(open_background(db, 1));
  free(db);
  free(dir);
}
END_TEST

static int fail_build(tj_runtime *rt, const void *arg)
{
  (void)arg;
  return tj__fail(rt, TJ_ECOMPILE, "the test's own failure");
}

/* The first caller after a failure is warned with the build's message;
 * later callers are not; the call keeps the fallback throughout. */
START_TEST(a_failed_build_is_told_once)
{
  tj_runtime *rt = open_background(NULL, 1);
  ck_assert_int_eq(tj__worker_submit(rt, "failing", fail_build, "", 1),
                   TJ__WORK_PENDING);
  tj__worker_drain(rt);
  ck_assert_int_eq(tj__worker_submit(rt, "failing", fail_build, "", 1),
                   TJ__WORK_FAILED);
  const char *msg = tj_errmsg(rt);
  ck_assert_msg(strstr(msg, "background build of failing failed "
                       "(TJ_ECOMPILE): the test's own failure"),
                "message: %s", msg);
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_kernel_get(rt, "marker_after", &k), TJ_ENOENT);
  ck_assert_int_eq(tj__worker_submit(rt, "failing", fail_build, "", 1),
                   TJ__WORK_FAILED);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "marker_after"));
  /* Through the GEMM hook: a build that fails keeps the fallback. */
  tj_gemm_desc d;
  f16_entry(rt, &d);
  ck_assert_int_eq(tj__gemm_defer_kernel(rt, "no_such_entry", &d), 1);
  tj__worker_drain(rt);
  ck_assert_int_eq(tj__gemm_defer_kernel(rt, "no_such_entry", &d), 1);
  ck_assert_int_eq(tj__gemm_defer_kernel(rt, "no_such_entry", &d), 1);
  tj_runtime_close(rt);
}
END_TEST

/* ------------------------------------------------------- tj_gemm */

#if defined(TJ_PLATFORM_NVIDIA)
typedef struct hopper_lookup {
  tj_runtime *rt;
  const tj_gemm_desc *d;
} hopper_lookup;

static int get_hopper(void *p)
{
  const hopper_lookup *h = p;
  return tj__gemm_hopper_prepare(h->rt, h->d, NULL, NULL);
}

/* tj_gemm on the Hopper path (compile-only: the fallback then says no
 * device) queues its configuration, which the worker compiles. */
START_TEST(gemm_queues_its_hopper_configuration)
{
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  tj_runtime *rt = open_background(db, 1);
  tj_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.size = sizeof d;
  d.a_type = d.b_type = d.c_type = TJ_DTYPE_BF16;
  d.trans_b = 1;
  d.m = 512, d.n = 2816, d.k = 1024;
  d.alpha = 1.0f;
  d.a = (void *)((uintptr_t)1 << 40), d.lda = d.k;
  d.b = (void *)((uintptr_t)2 << 40), d.ldb = d.k;
  d.c = (void *)((uintptr_t)3 << 40), d.ldc = d.n;
  hopper_lookup h = {rt, &d};
  ck_assert_int_eq(tj__built_only(get_hopper, &h), TJ_ENOENT);
  ck_assert_int_eq(tj_gemm(rt, NULL, &d), TJ_ENODEVICE);
  tj__worker_drain(rt);
  ck_assert_int_eq(tj__built_only(get_hopper, &h), TJ_OK);
  uint64_t before = compiles_of(rt);
  const char *entry = tj_gemm_kernel(rt, &d);
  ck_assert_ptr_nonnull(entry);
  ck_assert_ptr_nonnull(strstr(entry, "_sm90a_"));
  ck_assert_uint_eq(compiles_of(rt), before);
  ck_assert_int_eq(tj__gemm_defer_hopper(rt, &d, NULL), 0);
  tj_runtime_close(rt);
  free(db);
  free(dir);
}
END_TEST

/* tj_gemm_f16 on its Hopper tiles queues the plan's entry (the close
 * then waits for its compile). */
START_TEST(gemm_f16_queues_its_hopper_entry)
{
  enum { M = 512, N = 512, K = 512 };
  uint16_t *a = (void *)((uintptr_t)1 << 40), *b = (void *)((uintptr_t)2 << 40);
  uint16_t *c = (void *)((uintptr_t)3 << 40);
  tj_runtime *rt = open_background(NULL, 1);
  const char *entry = tj_gemm_f16_kernel(rt, M, N, K, a, K, b, N, c, N);
  ck_assert_ptr_nonnull(entry);
  ck_assert_ptr_nonnull(strstr(entry, "_sm90a_"));
  ck_assert_int_eq(tj__worker_submit(rt, entry, NULL, NULL, 0), TJ_ENOENT);
  ck_assert_int_eq(tj_gemm_f16(rt, NULL, M, N, K, 1.0f, a, K, b, N, 0.0f, c,
                               N), TJ_ENODEVICE);
  int w = tj__worker_submit(rt, entry, NULL, NULL, 0);
  ck_assert(w == TJ__WORK_PENDING || w == TJ__WORK_DONE);
  tj_runtime_close(rt);
}
END_TEST
#endif

int main(void)
{
  Suite *s = suite_create("background");
  TCase *tc = test_case(s, "lookup", 120);
  tcase_add_test(tc, built_lookup_never_compiles);
  tcase_add_test(tc, built_lookup_of_a_module);
  tcase_add_test(tc, built_lookup_does_not_wait_for_a_build);
  tc = test_case(s, "option", 60);
  tcase_add_test(tc, off_by_default_on_by_option_or_variable);
  tc = test_case(s, "worker", 300);
  tcase_add_test(tc, worker_compiles_into_the_cache);
  tcase_add_test(tc, threads_queue_one_build);
  tcase_add_test(tc, the_worker_has_a_bound);
  tcase_add_test(tc, threads_defer_to_one_compile);
  tcase_add_test(tc, close_during_a_compile_is_clean);
  tcase_add_test(tc, a_failed_build_is_told_once);
#if defined(TJ_PLATFORM_NVIDIA)
  tc = test_case(s, "gemm", 600);
  tcase_add_test(tc, gemm_queues_its_hopper_configuration);
  tcase_add_test(tc, gemm_f16_queues_its_hopper_entry);
#endif
  return run_suite(s);
}
