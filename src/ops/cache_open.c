/*
 * cache_open.c: tj_cache_open, the store's handle (src/cache/admin.c)
 * given what only the library knows of its kernels: the key an embedded
 * kernel's row must sit at (tj_cache_verify, tj_cache_merge) and the
 * tuning configurations it runs (tj_cache_list_tuning's known).
 */
#include "internal.h"
#include "embedded.h"
#include "gemm/gemm.h"

#include <string.h>

/* A row naming an embedded kernel (no options: the library compiles
 * those with none) must sit at the key its own arch, platform and
 * compiler give that kernel's source; any other row passes. */
static int embedded_key_consistent(const char *key, const char *kernel,
                                   const char *options, const char *arch,
                                   const char *platform, const char *compiler)
{
  const tj__embedded_kernel *k = tj__embedded_find(kernel);
  if (!k || options[0])
    return 1;
  char want[TJ__KEY_HEX];
  tj__key_of_kernel(k->source, k->source_len, k->entry, "", arch, platform,
                    compiler, want);
  return strcmp(want, key) == 0;
}

int tj_cache_open(tj_cache **out, const char *path, unsigned flags)
{
  static const tj__cache_knowledge know = {embedded_key_consistent,
                                           tj__tuning_config_known};
  return tj__cache_handle_open(out, path, flags, &know);
}
