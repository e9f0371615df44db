/*
 * elementwise.c: the elementwise kernels as C calls (add_i32, the GELU
 * forward and backward), device-pointer and host.
 *
 * A device-pointer call checks its arguments, gets its kernel (a hit in the
 * runtime's in-memory table after the first call) and queues one launch on
 * the caller's stream; it allocates nothing.  A host call checks its
 * arguments, then allocates, copies in, runs the device-pointer call,
 * copies out through a staging buffer and frees, so that the caller's
 * output is written only when everything succeeded.
 *
 * Launch shapes are the ones the header comments of kernels/<name>.hip give;
 * the block sizes are the kernels' __launch_bounds__, which
 * tests/check_kernels.c pins against the embedded sources.
 */
#include "call.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* add_i32.hip and gelu_f16.hip: 256 threads; grid-stride loops, with a
 * block covering 1024 ints or 2048 halves (one 16-byte vector per thread
 * per array); at most 65535 blocks. */
#define ELEMENTWISE_THREADS 256u
#define ADD_I32_PER_BLOCK 1024u
#define GELU_PER_BLOCK 2048u
#define GRID_X_CAP 65535u


/* ------------------------------------------------------- argument checks */

/*
 * The kernels allow an output to be exactly an input (in place) and no
 * other overlap: a partial overlap would let one thread's store land on
 * another thread's unread input, and two outputs on one array race.
 */
static int check_overlaps(tj_runtime *rt, const char *fn, const tj__op_array *a,
                          int na, size_t bytes)
{
  for (int i = 0; i < na; i++)
    for (int j = i + 1; j < na; j++) {
      if (!a[i].is_output && !a[j].is_output)
        continue; /* inputs are only read: any sharing is fine */
      if (a[i].p == a[j].p && a[i].is_output != a[j].is_output)
        continue; /* in place */
      if (tj__op_ranges_overlap(a[i].p, bytes, a[j].p, bytes))
        return tj__fail(rt, TJ_EINVAL, "%s: %s and %s overlap (an output may "
                        "be exactly an input, nothing else)", fn, a[i].name,
                        a[j].name);
    }
  return TJ_OK;
}

/* NULLs, n, the byte count, alignment and overlaps, in that order. */
static int check_elementwise(tj_runtime *rt, const char *fn,
                             const tj__op_array *a, int na, size_t n, size_t elem)
{
  for (int i = 0; i < na; i++)
    if (!a[i].p)
      return tj__fail(rt, TJ_EINVAL, "%s: %s is NULL", fn, a[i].name);
  if (n == 0)
    return tj__fail(rt, TJ_EINVAL, "%s: n is 0", fn);
  if (n > SIZE_MAX / elem)
    return tj__fail(rt, TJ_EINVAL, "%s: n=%zu elements of %zu bytes overflow "
                    "size_t", fn, n, elem);
  /* A misaligned access faults on the GPU, and on CUDA that kills the
   * context; say so here instead. */
  for (int i = 0; i < na; i++)
    if ((uintptr_t)a[i].p % elem != 0)
      return tj__fail(rt, TJ_EINVAL, "%s: %s is not %zu-byte aligned", fn,
                      a[i].name, elem);
  return check_overlaps(rt, fn, a, na, n * elem);
}

static int check_length(tj_runtime *rt, const char *fn, const char *name,
                        size_t len, size_t n)
{
  if (len != n)
    return tj__fail(rt, TJ_EINVAL, "%s: %s length %zu does not match n=%zu",
                    fn, name, len, n);
  return TJ_OK;
}

/* ------------------------------------------------------- launching */

/* min(max(ceil(n / per_block), 1), 65535), as the kernel comments say. */
static tj_dim3 elementwise_grid(size_t n, unsigned per_block)
{
  size_t blocks = n / per_block + (n % per_block != 0);
  if (blocks < 1)
    blocks = 1;
  if (blocks > GRID_X_CAP)
    blocks = GRID_X_CAP;
  return (tj_dim3){(unsigned)blocks, 1, 1};
}

static int launch_elementwise(tj_runtime *rt, const char *fn,
                              const char *kernel, size_t n,
                              unsigned per_block, void *stream, void **args)
{
  return tj__op_launch(rt, fn, kernel, elementwise_grid(n, per_block),
                       (tj_dim3){ELEMENTWISE_THREADS, 1, 1}, stream, args);
}

/* ------------------------------------------------------- device calls */

/*
 * The elementwise kernels differ only in their arrays: the table says
 * which, in the order the kernel takes them (inputs, then outputs), and
 * one call checks, fills the argument list and launches for all four.
 */
typedef struct elementwise_op {
  const char *fn, *host_fn, *kernel;
  int nin, nout;
  size_t elem;
  unsigned per_block;
  const char *names[TJ__OP_MAX_BUFFERS];
} elementwise_op;

enum { OP_ADD_I32, OP_GELU_FWD, OP_GELU_BWD, OP_GELU_FWD_BWD };

static const elementwise_op elementwise_ops[] = {
    [OP_ADD_I32] = {"tj_add_i32", "tj_add_i32_host", "add_i32", 2, 1, 4,
                    ADD_I32_PER_BLOCK, {"a", "b", "c"}},
    [OP_GELU_FWD] = {"tj_gelu_fwd_f16", "tj_gelu_fwd_f16_host", "gelu_fwd_f16",
                     1, 1, 2, GELU_PER_BLOCK, {"x", "y"}},
    [OP_GELU_BWD] = {"tj_gelu_bwd_f16", "tj_gelu_bwd_f16_host", "gelu_bwd_f16",
                     2, 1, 2, GELU_PER_BLOCK, {"grad_out", "x", "grad_in"}},
    [OP_GELU_FWD_BWD] = {"tj_gelu_fwd_bwd_f16", "tj_gelu_fwd_bwd_f16_host",
                         "gelu_fwd_bwd_f16", 2, 2, 2, GELU_PER_BLOCK,
                         {"x", "grad_out", "y", "grad_in"}}};

static int check_op(tj_runtime *rt, const char *fn, const elementwise_op *op,
                    const void *const *ptr, size_t n)
{
  tj__op_array arr[TJ__OP_MAX_BUFFERS];
  int na = op->nin + op->nout;
  for (int i = 0; i < na; i++)
    arr[i] = (tj__op_array){op->names[i], ptr[i], i >= op->nin};
  return check_elementwise(rt, fn, arr, na, n, op->elem);
}

/* The device-pointer call: ptr holds the arrays in the kernel's order. */
static int elementwise_call(tj_runtime *rt, int which, void *stream,
                            const void *const *ptr, size_t n)
{
  const elementwise_op *op = &elementwise_ops[which];
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  int rc = check_op(rt, op->fn, op, ptr, n);
  if (rc != TJ_OK)
    return rc;
  const void *p[TJ__OP_MAX_BUFFERS];
  unsigned long long nn = n;
  void *args[TJ__OP_MAX_BUFFERS + 1];
  int na = op->nin + op->nout;
  for (int i = 0; i < na; i++) {
    p[i] = ptr[i];
    args[i] = &p[i];
  }
  args[na] = &nn;
  return launch_elementwise(rt, op->fn, op->kernel, n, op->per_block, stream,
                            args);
}

int tj_add_i32(tj_runtime *rt, void *stream, const int32_t *a,
               const int32_t *b, int32_t *c, size_t n)
{
  const void *ptr[] = {a, b, c};
  return elementwise_call(rt, OP_ADD_I32, stream, ptr, n);
}

int tj_gelu_fwd_f16(tj_runtime *rt, void *stream, const uint16_t *x,
                    uint16_t *y, size_t n)
{
  const void *ptr[] = {x, y};
  return elementwise_call(rt, OP_GELU_FWD, stream, ptr, n);
}

int tj_gelu_bwd_f16(tj_runtime *rt, void *stream, const uint16_t *grad_out,
                    const uint16_t *x, uint16_t *grad_in, size_t n)
{
  const void *ptr[] = {grad_out, x, grad_in};
  return elementwise_call(rt, OP_GELU_BWD, stream, ptr, n);
}

int tj_gelu_fwd_bwd_f16(tj_runtime *rt, void *stream, const uint16_t *x,
                        const uint16_t *grad_out, uint16_t *y,
                        uint16_t *grad_in, size_t n)
{
  const void *ptr[] = {x, grad_out, y, grad_in};
  return elementwise_call(rt, OP_GELU_FWD_BWD, stream, ptr, n);
}

/* ------------------------------------------------------- host calls */

typedef struct elementwise_job {
  int which;
  size_t n;
} elementwise_job;

static int call_elementwise(tj_runtime *rt, const void *ctx, void *const *d)
{
  const elementwise_job *j = ctx;
  return elementwise_call(rt, j->which, NULL, (const void *const *)d, j->n);
}

/* The host call: ptr as for elementwise_call, len[i] the length the
 * caller gave for input i. */
static int elementwise_host(tj_runtime *rt, int which, const void *const *ptr,
                            const size_t *len, size_t n)
{
  const elementwise_op *op = &elementwise_ops[which];
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  int rc = check_op(rt, op->host_fn, op, ptr, n);
  for (int i = 0; i < op->nin && rc == TJ_OK; i++)
    rc = check_length(rt, op->host_fn, op->names[i], len[i], n);
  if (rc != TJ_OK)
    return rc;
  tj__op_buffer buf[TJ__OP_MAX_BUFFERS];
  int na = op->nin + op->nout;
  for (int i = 0; i < na; i++)
    buf[i] = i < op->nin ? (tj__op_buffer){ptr[i], NULL, n * op->elem}
                         : (tj__op_buffer){NULL, (void *)ptr[i], n * op->elem};
  const elementwise_job job = {which, n};
  return tj__op_host_run(rt, op->host_fn, op->kernel, buf, na,
                         call_elementwise, &job);
}

int tj_add_i32_host(tj_runtime *rt, const int32_t *a, size_t a_len,
                    const int32_t *b, size_t b_len, int32_t *c, size_t n)
{
  const void *ptr[] = {a, b, c};
  const size_t len[] = {a_len, b_len};
  return elementwise_host(rt, OP_ADD_I32, ptr, len, n);
}

int tj_gelu_fwd_f16_host(tj_runtime *rt, const uint16_t *x, size_t x_len,
                         uint16_t *y, size_t n)
{
  const void *ptr[] = {x, y};
  const size_t len[] = {x_len};
  return elementwise_host(rt, OP_GELU_FWD, ptr, len, n);
}

int tj_gelu_bwd_f16_host(tj_runtime *rt, const uint16_t *grad_out,
                         size_t grad_out_len, const uint16_t *x, size_t x_len,
                         uint16_t *grad_in, size_t n)
{
  const void *ptr[] = {grad_out, x, grad_in};
  const size_t len[] = {grad_out_len, x_len};
  return elementwise_host(rt, OP_GELU_BWD, ptr, len, n);
}

int tj_gelu_fwd_bwd_f16_host(tj_runtime *rt, const uint16_t *x, size_t x_len,
                             const uint16_t *grad_out, size_t grad_out_len,
                             uint16_t *y, uint16_t *grad_in, size_t n)
{
  const void *ptr[] = {x, grad_out, y, grad_in};
  const size_t len[] = {x_len, grad_out_len};
  return elementwise_host(rt, OP_GELU_FWD_BWD, ptr, len, n);
}
