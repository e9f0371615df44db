/*
 * symbols.c: what a code object defines, read from its ELF symbol table,
 * so that a missing entry fails at compile time instead of at load (and
 * is never stored).  AMD GPU code objects and NVIDIA cubins are both
 * little-endian ELF64, read through elfview.h, which bounds every read,
 * since a cache row is input.
 */
#include "codeobj.h"
#include "elfview.h"

#include <stdio.h>
#include <string.h>

#define STO_CUDA_ENTRY 0x10 /* a __global__ function in a cubin */

/* A kernel, not a device function that happens to be a symbol: on AMD it
 * has a kernel descriptor "<name>.kd", in a cubin the entry flag. */
static int is_kernel(const tj__elf_symbols *t, const Elf64_Sym *s,
                     const char *name)
{
  if (t->e->eh->e_machine == EM_CUDA)
    return (s->st_other & STO_CUDA_ENTRY) != 0;
  if (t->e->eh->e_machine == EM_AMDGPU) {
    char kd[512];
    if (snprintf(kd, sizeof kd, "%s.kd", name) >= (int)sizeof kd)
      return 0;
    return tj__elf_symbol_find(t, kd, STT_OBJECT, NULL) >= 0;
  }
  return 1;
}

int tj__elf_has_kernel(const void *code, size_t size, const char *symbol)
{
  tj__elf e;
  tj__elf_symbols t;
  Elf64_Sym s;
  if (tj__elf_open(&e, code, size) != 0 || tj__elf_symbols_open(&e, &t) != 0)
    return 0;
  return tj__elf_symbol_find(&t, symbol, STT_FUNC, &s) >= 0 &&
         is_kernel(&t, &s, symbol);
}

int tj__elf_find_cxx_kernel(const void *code, size_t size, const char *ident,
                            char *out, size_t outlen)
{
  tj__elf e;
  tj__elf_symbols t;
  char prefix[300];
  int n = snprintf(prefix, sizeof prefix, "_Z%zu%s", strlen(ident), ident);
  if (n >= (int)sizeof prefix || tj__elf_open(&e, code, size) != 0 ||
      tj__elf_symbols_open(&e, &t) != 0)
    return 0;
  int found = 0;
  for (size_t i = 0; i < t.count && *e.work; i++) {
    Elf64_Sym s;
    const char *name = tj__elf_symbol(&t, i, &s);
    /* After the name come the parameter types; 'I' would open template
     * arguments, which only a name expression can choose. */
    if (!name || ELF64_ST_TYPE(s.st_info) != STT_FUNC ||
        s.st_shndx == SHN_UNDEF || strncmp(name, prefix, (size_t)n) != 0 ||
        name[n] == '\0' || name[n] == 'I' || !is_kernel(&t, &s, name))
      continue;
    if (found++)
      return -1;
    snprintf(out, outlen, "%s", name);
  }
  return found;
}
