/*
 * elfview.h: the one ELF reader of the library.  GPU code objects (AMD
 * GPU code objects and NVIDIA cubins, both little-endian ELF64) are read
 * through it for the kernels they define (symbols.c) and what each asks
 * of the GPU (codeobj.c); the compiler libraries' notes for their build
 * ids (hip_platform.c).
 *
 * A code object is input (a cache row, a file another process wrote), so
 * nothing in it is trusted: every offset, length, index and string is
 * checked against the blob before it is read, and a malformed ELF reads as
 * absent, never as a crash.  Headers are read in place (the blob must be
 * aligned as malloc aligns; an unaligned one is refused); symbols and
 * notes are copied out, since their tables may sit anywhere.
 */
#ifndef TJ_ELFVIEW_H
#define TJ_ELFVIEW_H

#include <elf.h>
#include <stddef.h>
#include <stdint.h>

/* The ELF machines of GPU code objects, for C libraries that predate them. */
#ifndef EM_AMDGPU
#define EM_AMDGPU 224
#endif
#ifndef EM_CUDA
#define EM_CUDA 190
#endif

typedef struct tj__elf {
  const uint8_t *base;
  size_t len;
  const Elf64_Ehdr *eh;
  const Elf64_Shdr *sh; /* eh->e_shnum headers, inside the blob */
  /* The bytes the reads below may still look at, a multiple of the blob's
   * size: a crafted table (many symbols, names without their NUL) must not
   * make a lookup's work grow as the square of the blob.  *work points at
   * work_left, so that readers given a const view can spend it; a view is
   * never copied. */
  size_t *work;
  size_t work_left;
} tj__elf;

/* A view of code[0 .. len): 0 when it is a little-endian ELF64 whose
 * section headers lie inside it, else -1.  Strings and symbols read after
 * the view's work is spent read as absent. */
int tj__elf_open(tj__elf *e, const void *code, size_t len);
/* The bytes of section i and their count in *n, or NULL (no such section,
 * one outside the blob, or SHT_NOBITS, which has none). */
const uint8_t *tj__elf_section(const tj__elf *e, unsigned i, size_t *n);
/* The NUL-terminated string at off in string-table section i, or NULL. */
const char *tj__elf_string(const tj__elf *e, unsigned i, uint64_t off);
/* The index of the first section named prefix followed by rest, or -1. */
int tj__elf_section_named(const tj__elf *e, const char *prefix,
                          const char *rest);

/* The symbol table: the first SHT_SYMTAB section, else SHT_DYNSYM. */
typedef struct tj__elf_symbols {
  const tj__elf *e;
  const uint8_t *table;
  size_t count;
  unsigned strtab; /* the section of the names */
} tj__elf_symbols;

/* 0 with t set, or -1 when e has no symbol table inside the blob. */
int tj__elf_symbols_open(const tj__elf *e, tj__elf_symbols *t);
/* Symbol i copied into *sym, and its name; NULL when i is past the end or
 * the name is not a string of the table. */
const char *tj__elf_symbol(const tj__elf_symbols *t, size_t i, Elf64_Sym *sym);
/* The index of the first defined symbol named name of type type (STT_*),
 * copied into *sym (may be NULL); -1 when there is none. */
int64_t tj__elf_symbol_find(const tj__elf_symbols *t, const char *name,
                            int type, Elf64_Sym *sym);

/* One note of a SHT_NOTE section or a PT_NOTE segment. */
typedef struct tj__elf_note {
  uint32_t type;
  const char *name; /* namesz bytes, the NUL included */
  size_t namesz;
  const uint8_t *desc;
  size_t descsz;
} tj__elf_note;

/* The note at *p in [*p, end), and *p moved to the next one; 0 at the end
 * or at a note that does not fit (the walk stops there). */
int tj__elf_note_next(const uint8_t **p, const uint8_t *end, tj__elf_note *n);

#endif
