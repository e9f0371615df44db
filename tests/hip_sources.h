/* hip_sources.h: the HIP kernels of tests/hip, written as HIP code is
 * written (#include "hip/hip_runtime.h", the hip* index macros, maskless
 * shuffles), shared by check_hip_source (compiled for TEST_ARCH, no GPU)
 * and check_hip_source_gpu (run, every element against a CPU oracle). */
#ifndef TJ_HIP_SOURCES_H
#define TJ_HIP_SOURCES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testelf.h"

#ifndef TJ_HIP_TEST_DIR /* Makefile.am passes $(abs_top_srcdir)/tests/hip */
#error "TJ_HIP_TEST_DIR is not defined"
#endif

typedef struct hip_entry {
  const char *file, *entry;
} hip_entry;

/* Every extern "C" entry of the five files. */
static const hip_entry hip_entries[] = {
    {"saxpy.hip", "saxpy_f32"},
    {"saxpy.hip", "daxpy_f64"},
    {"block_sum.hip", "block_sum_f32"},
    {"transpose.hip", "transpose_f32"},
    {"histogram.hip", "histogram_u8"},
    {"scale_relu_f16.hip", "scale_relu_f16"},
};
#define N_HIP_ENTRIES (int)(sizeof hip_entries / sizeof hip_entries[0])

/* The whole file as a NUL-terminated string; aborts when it cannot be
 * read, since every test that calls this needs it. */
static inline char *hip_source_read(const char *file)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", TJ_HIP_TEST_DIR, file);
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    abort();
  }
  char *buf = NULL;
  size_t len = 0, cap = 0, n;
  do {
    if (len + 4096 + 1 > cap && !(buf = realloc(buf, cap = 2 * cap + 4096 + 1)))
      abort();
    n = fread(buf + len, 1, cap - len - 1, f);
    len += n;
  } while (n > 0);
  fclose(f);
  buf[len] = '\0';
  return buf;
}

#endif
