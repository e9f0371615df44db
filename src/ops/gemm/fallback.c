/*
 * fallback.c: a GEMM's first call with background builds on
 * (tj_options.background_builds).  Where the call's specialised
 * configuration (a Hopper configuration module, or tj_gemm_f16's
 * embedded entry elsewhere) is built neither in the runtime nor in any
 * cache layer, its compile is queued on the runtime's worker under the
 * configuration's name (its product entry's), and the call runs on the fallback, which
 * compiles in a fraction of the time; a later call finds the
 * specialised one built and takes it.  A compile that failed keeps its
 * calls on the fallback.
 */
#include "plan.h"

#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------- the fallback */

/* The one place that chooses what a deferred call runs. */
int tj__gemm_fallback_serves(const tj_gemm_desc *d)
{
  return tj__gemm_portable_serves(d);
}

int tj__gemm_fallback_run(tj_runtime *rt, const char *fn, void *stream,
                          const tj_gemm_desc *d)
{
  return tj__gemm_portable_run(rt, fn, stream, d);
}

/* ------------------------------------------------------- deferring */

/* Whether to run on the fallback for the configuration the worker knows
 * as name: while its compile is queued, running or failed (asked of the
 * worker first: a lookup in the cache layers at every call while it
 * compiles would cost more); else, when the lookup that never compiles
 * (built(ctx)) says it is not built, after queueing build(arg).  A
 * lookup that fails otherwise is the specialised call's to report. */
static int defer(tj_runtime *rt, const char *name, int (*built)(void *),
                 void *ctx, tj__work_fn build, const void *arg, size_t size)
{
  int w = tj__worker_submit(rt, name, NULL, NULL, 0);
  if (w == TJ_ENOENT) {
    if (tj__built_only(built, ctx) != TJ_ENOENT)
      return 0;
    w = tj__worker_submit(rt, name, build, arg, size);
  }
  return w == TJ__WORK_PENDING || w == TJ__WORK_FAILED;
}

/* tj_gemm_f16's embedded entry (off Hopper), by name. */
static int build_kernel(tj_runtime *rt, const void *arg)
{
  tj_kernel *k = NULL;
  return tj_kernel_get(rt, arg, &k);
}

typedef struct built_kernel {
  tj_runtime *rt;
  const char *entry;
} built_kernel;

static int kernel_built(void *ctx)
{
  const built_kernel *b = ctx;
  tj_kernel *k = NULL;
  return tj_kernel_get(b->rt, b->entry, &k);
}

int tj__gemm_defer_kernel(tj_runtime *rt, const char *entry,
                          const tj_gemm_desc *d)
{
  if (!rt->worker || !tj__gemm_fallback_serves(d))
    return 0;
  built_kernel b = {rt, entry};
  return defer(rt, entry, kernel_built, &b, build_kernel, entry,
               strlen(entry) + 1);
}

/* A Hopper configuration: d's kinds and sizes with the plan it runs (or
 * none: the one tj_gemm plans for d).  The worker's copy names no array
 * of the caller's: the compile reads only the kinds, the sizes and C's
 * alignment (which picks the shape class). */
typedef struct hopper_job {
  tj_gemm_desc d;
  tj__gemm_plan plan;
  int planned;
} hopper_job;

static int build_hopper(tj_runtime *rt, const void *arg)
{
  const hopper_job *j = arg;
  return tj__gemm_hopper_prepare(rt, &j->d, j->planned ? &j->plan : NULL,
                                 NULL);
}

typedef struct built_hopper {
  tj_runtime *rt;
  const hopper_job *j;
} built_hopper;

static int hopper_built(void *ctx)
{
  const built_hopper *b = ctx;
  return build_hopper(b->rt, b->j);
}

int tj__gemm_defer_hopper(tj_runtime *rt, const tj_gemm_desc *d,
                          const tj__gemm_plan *plan)
{
  if (!rt->worker || !tj__gemm_fallback_serves(d))
    return 0;
  const char *name = tj__gemm_hopper_entry(rt, d, plan);
  if (!name)
    return 0;
  hopper_job j;
  memset(&j, 0, sizeof j);
  j.d = *d;
  j.d.a = j.d.b = j.d.bias = NULL;
  j.d.aux = NULL;
  j.d.bias_grad = NULL;
  j.d.c = (void *)((uintptr_t)d->c % 16);
  if (plan)
    j.plan = *plan, j.planned = 1;
  built_hopper b = {rt, &j};
  return defer(rt, name, hopper_built, &b, build_hopper, &j, sizeof j);
}
