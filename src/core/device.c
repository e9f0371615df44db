/*
 * device.c: the GPUs and the compiler, asked without a runtime (what
 * `tokitai-jit --info` shows): the public face of the platform layer's
 * device and compiler queries.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* Write-once, like the digest it holds: the compiler libraries of a
 * process do not change once loaded. */
static char compiler_text[160];
static pthread_once_t compiler_once = PTHREAD_ONCE_INIT;

static void read_compiler(void)
{
  tj__compiler_fingerprint(compiler_text, sizeof compiler_text);
}

const char *tj_compiler(void)
{
  pthread_once(&compiler_once, read_compiler);
  return compiler_text;
}

size_t tj_compiler_arch_count(void)
{
  const char *const *names;
  return tj__compiler_archs(&names);
}

const char *tj_compiler_arch(size_t i)
{
  const char *const *names;
  return i < tj__compiler_archs(&names) ? names[i] : NULL;
}

int tj_device_count(void)
{
  int count = 0;
  tj__device_count(&count);
  return count;
}

int tj_device_get_info(int ordinal, tj_device_info *info)
{
  if (!info)
    return TJ_EINVAL;
  if (ordinal < 0 || ordinal >= tj_device_count())
    return TJ_ENODEVICE;
  tj__device_props p;
  memset(&p, 0, sizeof p);
  if (tj__device_query(ordinal, &p, TJ__QUERY_CLOCK) != TJ_OK)
    return TJ_EDEVICE;
  tj_device_info d;
  memset(&d, 0, sizeof d);
  snprintf(d.name, sizeof d.name, "%s", p.name);
  snprintf(d.arch, sizeof d.arch, "%s", p.arch);
  d.memory_bytes = p.total_mem;
  d.compute_units = p.compute_units;
  d.clock_khz = p.clock_khz;
  *info = d;
  return TJ_OK;
}
