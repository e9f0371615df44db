/*
 * span.h: the byte extents of the GEMM calls' operands, for their checks
 * of size and overlap.  Internal; pure, thread-safe.
 */
#ifndef TJ_GEMM_SPAN_H
#define TJ_GEMM_SPAN_H

#include <stddef.h>
#include <stdint.h>

#include <tokitai-jit/ops.h>

/* Bytes of one element of a TJ_DTYPE_*. */
static inline size_t tj__gemm_dtype_bytes(int type)
{
  return type == TJ_DTYPE_F32 ? 4 : 2;
}

/*
 * Bytes from the first element of count matrices, stride elements apart,
 * each rows x cols with leading dimension ld, to just past the last
 * element of the last; elem bytes an element.  0 past PTRDIFF_MAX, which
 * no allocation reaches.  rows, cols and count from 1; ld and stride at
 * least 0.
 */
static inline size_t tj__gemm_span(int64_t count, int64_t stride,
                                   int64_t rows, int64_t ld, int64_t cols,
                                   size_t elem)
{
  uint64_t e, b;
  if (__builtin_mul_overflow((uint64_t)(rows - 1), (uint64_t)ld, &e) ||
      __builtin_add_overflow(e, (uint64_t)cols, &e) ||
      __builtin_mul_overflow((uint64_t)(count - 1), (uint64_t)stride, &b) ||
      __builtin_add_overflow(e, b, &e) ||
      __builtin_mul_overflow(e, (uint64_t)elem, &e) || e > PTRDIFF_MAX)
    return 0;
  return (size_t)e;
}

#endif
