/*
 * fallback.c: a GEMM's first call with background builds on
 * (tj_options.background_builds).  Where the call's specialised
 * configuration (a Hopper one: tj_gemm_f16's embedded entry, or the
 * family's configuration module) is built neither in the runtime nor in
 * any cache layer, its compile is queued on the runtime's worker under
 * the configuration's name, and the call runs on the fallback, which
 * compiles in a fraction of the time; a later call finds the
 * specialised one built and takes it.  A compile that failed keeps its
 * calls on the fallback.
 */
#include "gemm.h"

#include <stdint.h>
#include <stdio.h>

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

static int build_hopper(tj_runtime *rt, const void *arg)
{
  return tj__gemm_hopper_prepare(rt, arg, NULL);
}

typedef struct built_hopper {
  tj_runtime *rt;
  const tj_gemm_desc *d;
} built_hopper;

static int hopper_built(void *ctx)
{
  const built_hopper *b = ctx;
  return tj__gemm_hopper_prepare(b->rt, b->d, NULL);
}

/* The worker's name for d's configuration: what picks it (the op, the
 * shape, C's alignment and ldc, which choose the shape class). */
static void hopper_name(const tj_gemm_desc *d, char *out, size_t len)
{
  char op[TJ__GEMM_OP_MAX];
  tj__gemm_desc_op(d, op);
  snprintf(out, len, "%s %lldx%lldx%lld c%u ldc%lld", op, (long long)d->m,
           (long long)d->n, (long long)d->k,
           (unsigned)((uintptr_t)d->c % 16), (long long)d->ldc);
}

int tj__gemm_defer_hopper(tj_runtime *rt, const tj_gemm_desc *d)
{
  if (!rt->worker || !tj__gemm_fallback_serves(d))
    return 0;
  char name[TJ__GEMM_OP_MAX + 96];
  built_hopper b = {rt, d};
  hopper_name(d, name, sizeof name);
  /* The worker's copy names no array of the caller's: the compile reads
   * only the kinds, the sizes and C's alignment. */
  tj_gemm_desc copy = *d;
  copy.a = copy.b = copy.bias = NULL;
  copy.aux = NULL;
  copy.bias_grad = NULL;
  copy.c = (void *)((uintptr_t)d->c % 16);
  return defer(rt, name, hopper_built, &b, build_hopper, &copy,
               sizeof copy);
}

void tj__gemm_f16_desc(tj_gemm_desc *d, int M, int N, int K, float alpha,
                       const uint16_t *A, int lda, const uint16_t *B,
                       int ldb, float beta, uint16_t *C, int ldc)
{
  memset(d, 0, sizeof *d);
  d->size = sizeof *d;
  d->a_type = d->b_type = d->c_type = TJ_DTYPE_F16;
  d->m = M, d->n = N, d->k = K;
  d->alpha = alpha, d->beta = beta;
  d->a = A, d->lda = lda;
  d->b = B, d->ldb = ldb;
  d->c = C, d->ldc = ldc;
}
