/* hip_sources.h: the HIP kernels of tests/hip, written as HIP code is
 * written (#include "hip/hip_runtime.h", the hip* index macros, maskless
 * shuffles), shared by check_hip_source (compiled for TEST_ARCH, no GPU)
 * and check_hip_source_gpu (run, every element against a CPU oracle). */
#ifndef TJ_HIP_SOURCES_H
#define TJ_HIP_SOURCES_H

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Does the ELF image define a symbol called name (or, with prefix set,
 * one whose name starts with name)?  Bounds-checked: the image came from
 * a compiler, but a test must not crash on a bad one. */
static inline int hip_elf_defines(const void *image, size_t size,
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
