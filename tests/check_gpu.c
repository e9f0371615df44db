/* check_gpu.c: launches on a real GPU.  Exits 77 (skip) when there is none.
 * Every test runs in its own forked process (Check's default), and the
 * parent never touches the GPU, because a CUDA context does not survive
 * fork(). */
#include "testgpu.h"
#include "testsql.h"
#include "oracle.h"
#include "tokitai-jit/ops.h"

#include <pthread.h>
#include <sys/wait.h>

static void *to_device(const void *host, size_t bytes)
{
  void *d = NULL;
  CHECK_HIP(hipMalloc(&d, bytes));
  if (host)
    CHECK_HIP(hipMemcpyHtoD(d, (void *)host, bytes)); /* HIP 5.2 takes void * */
  else
    CHECK_HIP(hipMemset(d, 0xff, bytes)); /* poison: unwritten shows */
  return d;
}

/* add_i32 on n ints, checked element by element against the oracle. */
static void run_add(tj_runtime *rt, size_t n)
{
  int32_t *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4), *want = malloc(n * 4);
  for (size_t i = 0; i < n; i++) {
    a[i] = (int32_t)((uint32_t)rand() * 2654435761u);
    b[i] = (i % 7 == 0) ? INT32_MAX : (int32_t)((uint32_t)rand() << 1);
  }
  tj__oracle_add_i32(a, b, want, n);
  void *da = to_device(a, n * 4), *db = to_device(b, n * 4), *dc = to_device(NULL, n * 4);
  unsigned long long nn = n;
  void *args[] = {&da, &db, &dc, &nn};
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  unsigned blocks = (unsigned)((n + 1023) / 1024);
  blocks = blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks;
  ck_assert_int_eq(tj_launch(k, (tj_dim3){blocks, 1, 1}, (tj_dim3){256, 1, 1},
                             0, NULL, args), TJ_OK);
  CHECK_HIP(hipDeviceSynchronize());
  CHECK_HIP(hipMemcpyDtoH(c, dc, n * 4));
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(c[i] == want[i], "n=%zu: c[%zu] = %d, want %d", n, i, c[i], want[i]);
  hipFree(da); hipFree(db); hipFree(dc);
  free(a); free(b); free(c); free(want);
}

START_TEST(embedded_kernel_launches_and_matches_oracle)
{
  tj_runtime *rt = open_gpu_on(NULL);
  ck_assert(strlen(tj_runtime_arch(rt)) > 0);
  size_t sizes[] = {1, 7, 8, 9, 1000003};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    run_add(rt, sizes[i]);
  tj_runtime_close(rt);
}
END_TEST

START_TEST(caller_kernel_launches)
{
  static const char src[] =
      "extern \"C\" __global__ void axpy(float a, const float *x, float *y, int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) y[i] = a * x[i] + y[i];\n}\n";
  tj_runtime *rt = open_gpu_on(NULL);
  tj_kernel *k = NULL;
  ck_assert_msg(tj_kernel_compile(rt, src, "axpy", "", &k) == TJ_OK, "%s", tj_errmsg(rt));
  enum { N = 4099 };
  float x[N], y[N], out[N];
  for (int i = 0; i < N; i++) {
    x[i] = (float)i;
    y[i] = 1.0f;
  }
  void *dx = to_device(x, sizeof x), *dy = to_device(y, sizeof y);
  float a = 2.0f;
  int n = N;
  void *args[] = {&a, &dx, &dy, &n};
  ck_assert_int_eq(tj_launch(k, (tj_dim3){(N + 127) / 128, 1, 1},
                             (tj_dim3){128, 1, 1}, 0, NULL, args), TJ_OK);
  CHECK_HIP(hipDeviceSynchronize());
  CHECK_HIP(hipMemcpyDtoH(out, dy, sizeof out));
  for (int i = 0; i < N; i++)
    ck_assert_float_eq(out[i], 2.0f * i + 1.0f);
  hipFree(dx); hipFree(dy);
  tj_runtime_close(rt);
}
END_TEST

/* A module's three kinds of entry launch from one code object: a template
 * (name expression), a namespaced kernel, an extern "C" one; then the same
 * from the cache in a second runtime. */
START_TEST(module_entries_launch)
{
  static const char src[] =
    "template <typename T> __global__ void scale(T *x, T a) { x[threadIdx.x] *= a; }\n"
    "namespace ops { __global__ void add1(float *x) { x[threadIdx.x] += 1.0f; } }\n"
    "extern \"C\" __global__ void neg(float *x) { x[threadIdx.x] = -x[threadIdx.x]; }\n";
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  const char *entries[] = {"scale<float>", "ops::add1", "neg"};
  tj_module_source ms = {sizeof ms, src, "module.hip", NULL, 0, NULL, 0, entries, 3};
  for (int pass = 0; pass < 2; pass++) {
    tj_runtime *rt = open_gpu_on(db);
    tj_module *m;
    tj_kernel *ks, *ka, *kn;
    ck_assert_msg(tj_module_compile(rt, &ms, &m) == TJ_OK, "%s", tj_errmsg(rt));
    ck_assert_int_eq(tj_module_kernel(m, "scale<float>", &ks), TJ_OK);
    ck_assert_int_eq(tj_module_kernel(m, "ops::add1", &ka), TJ_OK);
    ck_assert_int_eq(tj_module_kernel(m, "neg", &kn), TJ_OK);
    float host[64], a = 3.0f;
    for (int i = 0; i < 64; i++)
      host[i] = (float)i;
    void *d = to_device(host, sizeof host);
    void *args_s[] = {&d, &a}, *args_1[] = {&d};
    tj_dim3 g = {1, 1, 1}, b = {64, 1, 1};
    ck_assert_int_eq(tj_launch(ks, g, b, 0, NULL, args_s), TJ_OK);
    ck_assert_int_eq(tj_launch(ka, g, b, 0, NULL, args_1), TJ_OK);
    ck_assert_int_eq(tj_launch(kn, g, b, 0, NULL, args_1), TJ_OK);
    CHECK_HIP(hipDeviceSynchronize());
    CHECK_HIP(hipMemcpyDtoH(host, d, sizeof host));
    for (int i = 0; i < 64; i++)
      ck_assert_msg(host[i] == -((float)i * 3.0f + 1.0f), "x[%d] = %g", i, host[i]);
    hipFree(d);
    tj_stats st;
    tj_runtime_get_stats(rt, &st);
    ck_assert_uint_eq(st.compiles, pass ? 0 : 1);
    tj_runtime_close(rt);
  }
  free(db);
  free(dir);
}
END_TEST

START_TEST(bad_launch_is_reported)
{
  tj_runtime *rt = open_gpu_on(NULL);
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  unsigned long long n = 0;
  void *p = NULL;
  void *args[] = {&p, &p, &p, &n};
  /* No GPU runs 4096 threads in one block. */
  ck_assert_int_eq(tj_launch(k, (tj_dim3){1, 1, 1}, (tj_dim3){4096, 1, 1}, 0,
                             NULL, args), TJ_EDEVICE);
  tj_runtime_close(rt);
}
END_TEST

/* One process compiles; the next gets the code from the cache without
 * compiling, and the hit shows in the cache's counters. */
static int child_run(const char *path, int expect_compiles)
{
  pid_t pid = fork();
  if (pid == 0) {
    tj_options o = {0};
    o.cache_path = path;
    tj_runtime *rt = NULL;
    tj_kernel *k = NULL;
    int ok = tj_runtime_open(&rt, &o) == TJ_OK &&
             tj_kernel_get(rt, "add_i32", &k) == TJ_OK;
    tj_stats st;
    tj_runtime_get_stats(rt, &st);
    ok = ok && st.compiles == (uint64_t)expect_compiles &&
         st.cache_hits == (uint64_t)!expect_compiles;
    if (!ok)
      fprintf(stderr, "child: compiles %llu hits %llu: %s\n",
              (unsigned long long)st.compiles, (unsigned long long)st.cache_hits,
              tj_errmsg(rt));
    tj_runtime_close(rt);
    _exit(ok ? 0 : 1);
  }
  int status = 1;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

START_TEST(second_process_loads_from_cache)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  ck_assert_int_eq(child_run(path, 1), 0);
  ck_assert_int_eq(child_run(path, 0), 0);
  ck_assert_int_eq(child_run(path, 0), 0);
  tj_runtime *rt = open_gpu_on(path);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_kernel_info info;
  tj_kernel_get_info(k, &info);
  ck_assert_int_eq(info.origin, TJ_FROM_CACHE);
  tj_runtime_close(rt);
  /* Three loads from the cache, each counted once at its runtime's close:
   * read from the code file, noted beside it, folded in by the next
   * process that opens the file for writing. */
  tsql_fold_hits(path);
  ck_assert_int_eq(tsql_int(path, "SELECT hits FROM code_objects"), 3);
  free(path); free(dir);
}
END_TEST

struct worker {
  tj_runtime *rt;
  int rc;
};

static void *launch_from_thread(void *arg)
{
  struct worker *w = arg;
  tj_kernel *k = NULL;
  w->rc = tj_runtime_bind(w->rt);
  if (w->rc == TJ_OK)
    w->rc = tj_kernel_get(w->rt, "add_i32", &k);
  void *d = NULL;
  unsigned long long n = 1024;
  if (w->rc == TJ_OK && hipMalloc(&d, n * 4) != hipSuccess)
    w->rc = TJ_EDEVICE;
  void *args[] = {&d, &d, &d, &n};
  for (int i = 0; w->rc == TJ_OK && i < 100; i++)
    w->rc = tj_launch(k, (tj_dim3){1, 1, 1}, (tj_dim3){256, 1, 1}, 0, NULL, args);
  if (w->rc == TJ_OK && hipDeviceSynchronize() != hipSuccess)
    w->rc = TJ_EDEVICE;
  hipFree(d);
  return NULL;
}

START_TEST(threads_launch_through_one_runtime)
{
  enum { THREADS = 8 };
  tj_runtime *rt = open_gpu_on(NULL);
  pthread_t th[THREADS];
  struct worker w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (struct worker){rt, -100};
    ck_assert_int_eq(pthread_create(&th[i], NULL, launch_from_thread, &w[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    ck_assert_int_eq(w[i].rc, TJ_OK);
  }
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, 1);
  tj_runtime_close(rt);
}
END_TEST

/* What the code object says a kernel needs is what the driver says once
 * it has loaded it: registers, static shared memory, local memory, and the
 * most threads per block. */
START_TEST(code_object_resources_match_the_driver)
{
  tj_runtime *rt = open_gpu_on(NULL);
  for (size_t i = 0; i < tj_embedded_count(); i++) {
    const char *name = tj_embedded_name(i);
    tj_kernel *k = NULL;
    tj_kernel_info info;
    ck_assert_int_eq(tj_kernel_get(rt, name, &k), TJ_OK);
    ck_assert_int_eq(tj_kernel_get_info(k, &info), TJ_OK);
    tj_kernel_resources drv = {-1, -1, -1, -1, -1, -1, -1, -1};
    ck_assert_int_eq(tj__function_resources(tj_kernel_function(k), &drv), TJ_OK);
    const tj_kernel_resources *r = &info.resources;
    printf("check_gpu: %s: code object regs %d shared %lld local %lld max_threads %d; "
           "driver %d %lld %lld %d\n",
           name, r->regs, (long long)r->shared_bytes, (long long)r->local_bytes,
           r->max_threads, drv.regs, (long long)drv.shared_bytes,
           (long long)drv.local_bytes, drv.max_threads);
    ck_assert_int_eq(r->regs, drv.regs);
    ck_assert_int_eq(r->local_bytes, drv.local_bytes);
    ck_assert_int_eq(r->max_threads, drv.max_threads);
    ck_assert_int_eq(r->shared_bytes, drv.shared_bytes);
  }
  tj_runtime_close(rt);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("gpu");
  TCase *tc = test_case(s, "gpu", 600);
  tcase_add_test(tc, embedded_kernel_launches_and_matches_oracle);
  tcase_add_test(tc, caller_kernel_launches);
  tcase_add_test(tc, module_entries_launch);
  tcase_add_test(tc, bad_launch_is_reported);
  tcase_add_test(tc, second_process_loads_from_cache);
  tcase_add_test(tc, threads_launch_through_one_runtime);
  tcase_add_test(tc, code_object_resources_match_the_driver);
  return run_gpu_suite(s, "the GPU suite");
}
