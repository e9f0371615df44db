/* bench.h: what the parts of tj-bench share. */
#ifndef TJ_BENCH_H
#define TJ_BENCH_H

#include "config.h"
#include "internal.h" /* hip* calls and device queries, for the raw baselines */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BENCH_MAX_RESULTS 1024

/* tj_runtime_open, then the GEMM planned with the TJ_GEMM_* variables of
 * the environment (src/ops/gemm/knobs.c): the benchmark's way to force a
 * path or configuration, which the library itself never reads. */
int bench_open(tj_runtime **rt, const tj_options *o);

typedef struct bench_result {
  char section[32];
  char name[128];
  double value;
  char unit[16];
} bench_result;

typedef struct bench_results {
  char device[256], arch[256], compiler[160], platform[16], date[32];
  bench_result r[BENCH_MAX_RESULTS];
  int count;
} bench_results;

typedef void (*bench_record_fn)(const char *section, const char *name,
                                double value, const char *unit);

static inline double bench_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline void die(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "tj-bench: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

#define CHECK(call)                                                          \
  do {                                                                       \
    hipError_t e_ = (call);                                                  \
    if (e_ != hipSuccess)                                                    \
      die("%s:%d: %s: %s", __FILE__, __LINE__, #call, hipGetErrorString(e_)); \
  } while (0)

static int bench_cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of v (sorted in place). */
static inline double bench_median(double *v, int n)
{
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static inline double bench_minimum(const double *v, int n)
{
  double m = v[0];
  for (int i = 1; i < n; i++)
    m = v[i] < m ? v[i] : m;
  return m;
}

static inline double bench_maximum(const double *v, int n)
{
  double m = v[0];
  for (int i = 1; i < n; i++)
    m = v[i] > m ? v[i] : m;
  return m;
}

/* Milliseconds of one call of fn(ctx) on the GPU, median of reps, timed
 * with events after one warm-up call; between(between_ctx, rep), unless
 * NULL, runs before each rep, outside the events (a flush of L2). */
double bench_time_gpu_between(void (*fn)(void *), void *ctx, int reps,
                              void (*between)(void *, int), void *between_ctx);
/* The same with nothing between the reps. */
double bench_time_gpu(void (*fn)(void *), void *ctx, int reps);
/* The same with L2 emptied before each rep (see bench_util.c). */
double bench_time_gpu_flushed(void (*fn)(void *), void *ctx, int reps);

/* The run's header: the GPU, the compiler, the date.  Without a GPU it
 * dies when need_gpu is set, else says so (device "none", arch ""). */
void bench_header(bench_results *r, int need_gpu);
void bench_write_json(const bench_results *r, const char *path);
void bench_memory_bound(tj_runtime *rt, int quick, bench_record_fn record);
void bench_gemm(tj_runtime *rt, int quick, bench_record_fn record);
void bench_family(tj_runtime *rt, bench_record_fn record);
void bench_grouped(tj_runtime *rt, bench_record_fn record);
void bench_pilot(tj_runtime *rt, const char *pilot, bench_record_fn record);
void bench_moe(tj_runtime *rt, int quick, bench_record_fn record);
/* The cold section (bench_cold.c), the children it runs
 * (tj-bench --child-first-call M N K BACKGROUND CACHE: argv from M on),
 * and tj-bench's way to run one: the program at path, or tj-bench again,
 * its environment with extra ("NAME=value" entries, NULL ended); its exit
 * status (-1: not started) and what it wrote to stdout in line. */
void bench_cold(const char *dir, int quick, bench_record_fn record);
int bench_cold_child(char **argv);
int bench_run_path(const char *path, char *const argv[],
                   const char *const *extra, char *line, size_t len);
int bench_run_child(char *const argv[], const char *const *extra, char *line,
                    size_t len);

#endif
