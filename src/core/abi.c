/*
 * abi.c: what lets the public interface grow without breaking programs:
 * the size the structs a caller fills begin with (tokitai-jit.h, "Structs
 * that grow").
 */
#include "internal.h"

#include <string.h>

/* The size a caller gave, with 0 read as the first version's; 0 when it
 * is below the first version (the caller's struct is not one of ours). */
static size_t given_size(const void *sized, size_t first)
{
  size_t size;
  memcpy(&size, sized, sizeof size);
  if (size == 0)
    size = first;
  return size < first ? 0 : size;
}

int tj__struct_in(void *dst, const void *src, size_t known, size_t first)
{
  size_t size = given_size(src, first);
  if (size == 0)
    return TJ_EINVAL;
  memset(dst, 0, known);
  memcpy(dst, src, size < known ? size : known);
  /* A newer program's field that this library cannot honour must not be
   * dropped in silence. */
  for (size_t i = known; i < size; i++)
    if (((const unsigned char *)src)[i])
      return TJ_EINVAL;
  return TJ_OK;
}

int tj__struct_out(void *dst, const void *src, size_t known, size_t first)
{
  size_t size = given_size(dst, first);
  if (size == 0)
    return TJ_EINVAL;
  size_t n = size < known ? size : known;
  /* The caller's size stays as the caller set it. */
  memcpy((char *)dst + sizeof size, (const char *)src + sizeof size,
         n - sizeof size);
  return TJ_OK;
}
