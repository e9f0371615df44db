/*
 * call.c: what the C calls of src/ops share (call.h).
 */
#include "call.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int tj__op_no_gpu(tj_runtime *rt, const char *fn)
{
  return tj__fail(rt, TJ_ENODEVICE,
                  "no GPU: %s launches a kernel, and this runtime is "
                  "compile-only (arch %s)", fn, rt->arch);
}

/* Does [a, a + alen) meet [b, b + blen)?  Written without a + alen, which
 * could wrap for addresses near the top. */
int tj__op_ranges_overlap(const void *a, size_t alen, const void *b,
                          size_t blen)
{
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x <= y ? y - x < alen : x - y < blen;
}

/* The kernel a call launches: compiled or loaded the first time, a hit
 * in the in-memory table after; a compile-only runtime has none. */
int tj__op_kernel(tj_runtime *rt, const char *fn, const char *kernel,
                  tj_kernel **k)
{
  if (rt->compile_only)
    return tj__op_no_gpu(rt, fn);
  return tj_kernel_get(rt, kernel, k);
}

int tj__op_launch(tj_runtime *rt, const char *fn, const char *kernel,
                  tj_dim3 grid, tj_dim3 block, void *stream, void **args)
{
  tj_kernel *k = NULL;
  int rc = tj__op_kernel(rt, fn, kernel, &k);
  if (rc != TJ_OK)
    return rc;
  rc = tj_launch(k, grid, block, 0, stream, args);
  if (rc != TJ_OK)
    return tj__fail(rt, rc, "%s: launching %s (grid %u x %u, block %u) "
                    "failed", fn, kernel, grid.x, grid.y, block.x);
  return TJ_OK;
}

static int alloc_and_copy_in(tj_runtime *rt, const char *fn,
                             const tj__op_buffer *b, int nb, void **dev)
{
  for (int i = 0; i < nb; i++) {
    hipError_t e = hipMalloc(&dev[i], b[i].bytes);
    if (e != hipSuccess) {
      dev[i] = NULL;
      return tj__fail(rt, TJ_ENOMEM, "%s: hipMalloc of %zu bytes failed: %s",
                      fn, b[i].bytes, hipGetErrorString(e));
    }
    if (b[i].src &&
        (e = hipMemcpyHtoD(dev[i], (void *)b[i].src, b[i].bytes)) != hipSuccess)
      return tj__fail(rt, TJ_EDEVICE, "%s: copying %zu bytes to the device "
                      "failed: %s", fn, b[i].bytes, hipGetErrorString(e));
  }
  return TJ_OK;
}

/* Every output lands in a staging buffer first, and reaches the caller
 * only when all of them arrived: a failure leaves the caller's memory as
 * it was. */
static int copy_out(tj_runtime *rt, const char *fn, const tj__op_buffer *b,
                    int nb, void *const *dev)
{
  void *stage[TJ__OP_MAX_BUFFERS] = {0};
  int rc = TJ_OK;
  for (int i = 0; i < nb && rc == TJ_OK; i++) {
    if (!b[i].dst)
      continue;
    if (!(stage[i] = malloc(b[i].bytes))) {
      rc = tj__fail(rt, TJ_ENOMEM, "%s: out of host memory for %zu bytes",
                    fn, b[i].bytes);
      break;
    }
    hipError_t e = hipMemcpyDtoH(stage[i], dev[i], b[i].bytes);
    if (e != hipSuccess)
      rc = tj__fail(rt, TJ_EDEVICE, "%s: copying %zu bytes from the device "
                    "failed: %s", fn, b[i].bytes, hipGetErrorString(e));
  }
  for (int i = 0; i < nb; i++) {
    if (rc == TJ_OK && b[i].dst)
      memcpy(b[i].dst, stage[i], b[i].bytes);
    free(stage[i]);
  }
  return rc;
}

/*
 * Allocate, copy in, run, wait, copy out; free on every path.  The kernel
 * is fetched (and compiled, the first time) before any device memory is
 * held.  The runtime's device is made current, since a host call is
 * complete in itself and may come from any thread.
 */
int tj__op_host_run(tj_runtime *rt, const char *fn, const char *kernel,
                    const tj__op_buffer *b, int nb, tj__op_device_call call,
                    const void *ctx)
{
  tj_kernel *k = NULL;
  int rc = kernel ? tj__op_kernel(rt, fn, kernel, &k)
                  : rt->compile_only ? tj__op_no_gpu(rt, fn) : TJ_OK;
  if (rc != TJ_OK)
    return rc;
  if (tj_runtime_bind(rt) != TJ_OK)
    return tj__fail(rt, TJ_EDEVICE, "%s: could not make device %d current",
                    fn, rt->device.ordinal);
  void *dev[TJ__OP_MAX_BUFFERS] = {0};
  rc = alloc_and_copy_in(rt, fn, b, nb, dev);
  if (rc == TJ_OK)
    rc = call(rt, ctx, dev);
  if (rc == TJ_OK) {
    hipError_t e = hipStreamSynchronize(NULL);
    if (e != hipSuccess)
      rc = tj__fail(rt, TJ_EDEVICE, "%s: %s failed on the device: %s", fn,
                    kernel ? kernel : "the launch", hipGetErrorString(e));
  }
  if (rc == TJ_OK)
    rc = copy_out(rt, fn, b, nb, dev);
  for (int i = 0; i < nb; i++)
    hipFree(dev[i]);
  return rc;
}
