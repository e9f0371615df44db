/* embedded.c: lookups in the embedded-kernel table that
 * build-aux/embed.sh generates from the kernels directory. */
#include "internal.h"
#include "embedded.h"

#include <string.h>

const tj__embedded_kernel *tj__embedded_find(const char *name)
{
  for (size_t i = 0; i < tj__embedded_kernel_count; i++)
    if (strcmp(tj__embedded_kernels[i].entry, name) == 0)
      return &tj__embedded_kernels[i];
  return NULL;
}

size_t tj_embedded_count(void)
{
  return tj__embedded_kernel_count;
}

const char *tj_embedded_name(size_t i)
{
  return i < tj__embedded_kernel_count ? tj__embedded_kernels[i].entry : NULL;
}

unsigned tj_embedded_flags(size_t i)
{
  if (i >= tj__embedded_kernel_count)
    return 0;
  return tj__embedded_kernels[i].configuration ? TJ_EMBEDDED_CONFIGURATION : 0;
}
