/* testkernels.h: the small kernels that show what a code object says of
 * its resources, shared by check_codeobj (read from the code) and
 * check_cache_resources (stored with the row): one that needs scratch, and
 * a module of two entries, a name expression with no shared memory and a
 * C name with 4 KiB of it. */
#ifndef TJ_TESTKERNELS_H
#define TJ_TESTKERNELS_H

#include "testutil.h"

/* A per-thread array indexed at run time cannot live in registers. */
static const char test_scratch_source[] =
    "extern \"C\" __global__ void scratchy(int *out, int i) {\n"
    "  volatile int a[512];\n"
    "  for (int j = 0; j < 512; j++) a[j] = j * out[j];\n"
    "  out[threadIdx.x] = a[(i + threadIdx.x) & 511];\n}\n";
#define TEST_SCRATCH_BYTES (512 * 4)

static const char test_module_source[] =
    "template <typename T> __global__ void fill(T *p, T v) { p[threadIdx.x] = "
    "v; }\n"
    "template __global__ void fill<float>(float *, float);\n"
    "extern \"C\" __global__ void staged(float *p) {\n"
    "  __shared__ float s[1024];\n"
    "  s[threadIdx.x] = p[threadIdx.x];\n"
    "  __syncthreads();\n"
    "  p[threadIdx.x] = s[1023 - threadIdx.x];\n}\n";
/* Sorted, as a module keeps them: index i is the module's entry i. */
static const char *const test_module_entries[] = {"fill<float>", "staged"};
#define TEST_STAGED_SHARED_BYTES (1024 * 4)

/* The module of test_module_source on rt, failing the test on error. */
static inline tj_module *test_compile_module(tj_runtime *rt)
{
  tj_module_source ms = {0};
  ms.size = sizeof ms;
  ms.source = test_module_source;
  ms.entries = test_module_entries;
  ms.num_entries = 2;
  tj_module *m = NULL;
  ck_assert_msg(tj_module_compile(rt, &ms, &m) == TJ_OK, "%s", tj_errmsg(rt));
  return m;
}

#endif
