/*
 * build.c: a GEMM configuration's code object.  Every path of the family
 * compiles one kernel source per configuration, its choices as -D
 * constants and its entries' names as -D macros; this is the one place
 * that spells those options out and hands them to the module layer.
 */
#include "gemm.h"

#include <stdio.h>

#define BUILD_OPTIONS_MAX 16

int tj__gemm_build(tj_runtime *rt, const tj__gemm_source *s, tj_module **m)
{
  char opt[BUILD_OPTIONS_MAX][TJ__GEMM_NAME_MAX + 32];
  const char *options[BUILD_OPTIONS_MAX], *listed[BUILD_OPTIONS_MAX];
  int n = 0, nl = 0;
  if (s->n_defines + s->n_entries > BUILD_OPTIONS_MAX)
    return tj__fail(rt, TJ_EINVAL, "%s: too many options", s->file);
  for (int i = 0; i < s->n_defines; i++, n++)
    snprintf(opt[n], sizeof opt[n], "-D%s=%d", s->defines[i].key,
             s->defines[i].value);
  for (int i = 0; i < s->n_entries; i++, n++) {
    snprintf(opt[n], sizeof opt[n], "-D%s=%s", s->entries[i].macro,
             s->entries[i].name);
    if (s->entries[i].listed)
      listed[nl++] = s->entries[i].name;
  }
  for (int i = 0; i < n; i++)
    options[i] = opt[i];
  tj_module_source src = {sizeof src, s->text, s->file, options, n, NULL, 0,
                          listed, nl};
  return s->arch ? tj__module_get_for(rt, &src, s->arch, m)
                 : tj_module_compile(rt, &src, m);
}
