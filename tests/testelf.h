/* testelf.h: what a test reads in a code object: its ELF machine, and
 * whether its symbol table defines a name.  Bounds-checked throughout: the
 * image came from a compiler, but a test must not crash on a bad one.  A
 * reader of its own, not the library's (src/platform/elfview.h), so that
 * the tests do not check the library with itself. */
#ifndef TJ_TESTELF_H
#define TJ_TESTELF_H

#include "elfview.h" /* <elf.h>, and the GPU machines old C libraries lack */

#include <string.h>

/* The e_machine of this platform's code objects. */
#if defined(TJ_PLATFORM_NVIDIA)
#define TEST_ELF_MACHINE EM_CUDA
#else
#define TEST_ELF_MACHINE EM_AMDGPU
#endif

/* Does the ELF image define a symbol called name (or, with prefix set,
 * one whose name starts with name)? */
static inline int test_elf_defines(const void *image, size_t size,
                                   const char *name, int prefix)
{
  const unsigned char *b = image;
  if (size < sizeof(Elf64_Ehdr) || memcmp(b, ELFMAG, SELFMAG) != 0)
    return 0;
  const Elf64_Ehdr *eh = image;
  if (eh->e_shoff == 0 || eh->e_shoff > size ||
      (size - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum)
    return 0;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(b + eh->e_shoff);
  size_t want = strlen(name);
  for (int i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum)
      continue;
    const Elf64_Shdr *strs = &sh[sh[i].sh_link];
    if (sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset ||
        strs->sh_offset > size || strs->sh_size > size - strs->sh_offset)
      return 0;
    const char *names = (const char *)b + strs->sh_offset;
    const Elf64_Sym *sym = (const Elf64_Sym *)(b + sh[i].sh_offset);
    for (size_t j = 0; j < sh[i].sh_size / sizeof *sym; j++) {
      if (sym[j].st_name >= strs->sh_size || sym[j].st_shndx == SHN_UNDEF)
        continue;
      const char *s = names + sym[j].st_name;
      size_t len = strnlen(s, strs->sh_size - sym[j].st_name);
      if ((prefix ? len >= want : len == want) && memcmp(s, name, want) == 0)
        return 1;
    }
  }
  return 0;
}

#endif
