/*
 * symbols.c: what a code object defines, read from its ELF symbol table,
 * so that a missing entry fails at compile time instead of at load (and
 * is never stored).  AMD GPU code objects and NVIDIA cubins are both
 * little-endian ELF64; everything is bounds-checked, since a cache row is
 * input.
 */
#include "internal.h"
#include "codeobj.h"

#include <elf.h>
#include <stdio.h>
#include <string.h>

#define STO_CUDA_ENTRY 0x10 /* a __global__ function in a cubin */

typedef struct symtab {
  const unsigned char *base;
  size_t size;
  const Elf64_Sym *syms;
  size_t nsyms;
  const char *strs;
  size_t strsize;
  int machine;
} symtab;

static int in_bounds(size_t size, uint64_t off, uint64_t len)
{
  return off <= size && len <= size - off;
}

/* The first SHT_SYMTAB (else SHT_DYNSYM) section and its string table. */
static int open_symtab(const void *code, size_t size, symtab *t)
{
  const Elf64_Ehdr *eh = code;
  if (!code || size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
      !in_bounds(size, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)))
    return 0;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)((const char *)code + eh->e_shoff);
  const Elf64_Shdr *found = NULL;
  for (int pass = 0; pass < 2 && !found; pass++)
    for (unsigned i = 0; i < eh->e_shnum && !found; i++)
      if (sh[i].sh_type == (pass ? SHT_DYNSYM : SHT_SYMTAB))
        found = &sh[i];
  if (!found || found->sh_link >= eh->e_shnum ||
      !in_bounds(size, found->sh_offset, found->sh_size) ||
      !in_bounds(size, sh[found->sh_link].sh_offset, sh[found->sh_link].sh_size))
    return 0;
  t->base = code;
  t->size = size;
  t->syms = (const Elf64_Sym *)((const char *)code + found->sh_offset);
  t->nsyms = found->sh_size / sizeof(Elf64_Sym);
  t->strs = (const char *)code + sh[found->sh_link].sh_offset;
  t->strsize = sh[found->sh_link].sh_size;
  t->machine = eh->e_machine;
  return 1;
}

static const char *sym_name(const symtab *t, const Elf64_Sym *s)
{
  if (s->st_name >= t->strsize || !memchr(t->strs + s->st_name, '\0',
                                          t->strsize - s->st_name))
    return NULL;
  return t->strs + s->st_name;
}

static const Elf64_Sym *lookup(const symtab *t, const char *name, int type)
{
  for (size_t i = 0; i < t->nsyms; i++) {
    const Elf64_Sym *s = &t->syms[i];
    const char *n = sym_name(t, s);
    if (n && ELF64_ST_TYPE(s->st_info) == type && s->st_shndx != SHN_UNDEF &&
        strcmp(n, name) == 0)
      return s;
  }
  return NULL;
}

/* A kernel, not a device function that happens to be a symbol: on AMD it
 * has a kernel descriptor "<name>.kd", in a cubin the entry flag. */
static int is_kernel(const symtab *t, const Elf64_Sym *s, const char *name)
{
  if (t->machine == EM_CUDA)
    return (s->st_other & STO_CUDA_ENTRY) != 0;
  if (t->machine == EM_AMDGPU) {
    char kd[512];
    if (snprintf(kd, sizeof kd, "%s.kd", name) >= (int)sizeof kd)
      return 0;
    return lookup(t, kd, STT_OBJECT) != NULL;
  }
  return 1;
}

int tj__elf_has_kernel(const void *code, size_t size, const char *symbol)
{
  symtab t;
  if (!open_symtab(code, size, &t))
    return 0;
  const Elf64_Sym *s = lookup(&t, symbol, STT_FUNC);
  return s && is_kernel(&t, s, symbol);
}

int tj__elf_find_cxx_kernel(const void *code, size_t size, const char *ident,
                            char *out, size_t outlen)
{
  symtab t;
  char prefix[300];
  int n = snprintf(prefix, sizeof prefix, "_Z%zu%s", strlen(ident), ident);
  if (!open_symtab(code, size, &t) || n >= (int)sizeof prefix)
    return 0;
  int found = 0;
  for (size_t i = 0; i < t.nsyms; i++) {
    const Elf64_Sym *s = &t.syms[i];
    const char *name = sym_name(&t, s);
    /* After the name come the parameter types; 'I' would open template
     * arguments, which only a name expression can choose. */
    if (!name || ELF64_ST_TYPE(s->st_info) != STT_FUNC ||
        s->st_shndx == SHN_UNDEF || strncmp(name, prefix, (size_t)n) != 0 ||
        name[n] == '\0' || name[n] == 'I' || !is_kernel(&t, s, name))
      continue;
    if (found++)
      return -1;
    snprintf(out, outlen, "%s", name);
  }
  return found;
}
