/* embedded.h: the tables that build-aux/embed.sh generates. */
#ifndef TJ_EMBEDDED_H
#define TJ_EMBEDDED_H
#include <stddef.h>

typedef struct tj__embedded_kernel {
  const char *entry;  /* extern "C" function name, the lookup name */
  const char *file;   /* kernels/<file> it came from */
  const char *source;
  size_t source_len;
  /* NULL, or the arch-specific target ("sm_90a") the source is written
   * for: a runtime for its base arch ("sm_90") compiles it for this one. */
  const char *arch;
  /* 1: one configuration of a call, from a file marked "embed:
   * configuration" (tj_embedded_flags's TJ_EMBEDDED_CONFIGURATION). */
  int configuration;
} tj__embedded_kernel;

extern const tj__embedded_kernel tj__embedded_kernels[];
extern const size_t tj__embedded_kernel_count;

/* The embedded kernel whose entry is name, or NULL. */
const tj__embedded_kernel *tj__embedded_find(const char *name);

#endif
