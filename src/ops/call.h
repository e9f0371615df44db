/*
 * call.h: what the C calls of src/ops share (call.c): the checks every
 * call makes of its arrays, getting and launching a kernel, and the host
 * calls' round trip through device memory.
 */
#ifndef TJ_OPS_CALL_H
#define TJ_OPS_CALL_H

#include "internal.h"

/* The most arrays a call takes. */
#define TJ__OP_MAX_BUFFERS 8

/* One array argument of a call. */
typedef struct tj__op_array {
  const char *name;
  const void *p;
  int is_output;
} tj__op_array;

/* TJ_ENODEVICE, with fn named, for a call on a compile-only runtime. */
int tj__op_no_gpu(tj_runtime *rt, const char *fn);
/* Does [a, a + alen) meet [b, b + blen)? */
int tj__op_ranges_overlap(const void *a, size_t alen, const void *b,
                          size_t blen);
/* The kernel a call launches: compiled or loaded the first time, a hit
 * in the in-memory table after; a compile-only runtime has none. */
int tj__op_kernel(tj_runtime *rt, const char *fn, const char *kernel,
                  tj_kernel **k);
/* Get kernel and launch it without dynamic shared memory; a failure names
 * fn, the kernel and the launch shape. */
int tj__op_launch(tj_runtime *rt, const char *fn, const char *kernel,
                  tj_dim3 grid, tj_dim3 block, void *stream, void **args);

/* One buffer of a host call: copied in from src (when not NULL) before
 * the launch, copied out to dst (when not NULL) after it. */
typedef struct tj__op_buffer {
  const void *src;
  void *dst;
  size_t bytes;
} tj__op_buffer;
/* Runs the device-pointer call on the device copies, in order. */
typedef int (*tj__op_device_call)(tj_runtime *rt, const void *ctx,
                                  void *const *dev);
/* A host call: get kernel (compiled the first time; NULL: the caller got
 * what it launches) before any device memory is held, make rt's device
 * current, allocate and copy in the nb buffers, run call, wait, copy out
 * (every output reaches the caller only when all of them arrived), free
 * on every path. */
int tj__op_host_run(tj_runtime *rt, const char *fn, const char *kernel,
                    const tj__op_buffer *b, int nb, tj__op_device_call call,
                    const void *ctx);

#endif
