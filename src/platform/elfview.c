/*
 * elfview.c: the bounds-checked ELF reader (elfview.h).
 */
#include "elfview.h"

#include <string.h>

/* The work a view may do: enough for every real code object to be read
 * whole many times over, and still linear in the blob's size. */
#define TJ__ELF_WORK_PER_BYTE 16
#define TJ__ELF_WORK_MIN ((size_t)1 << 20)

static int in_blob(const tj__elf *e, uint64_t off, uint64_t n)
{
  return off <= e->len && n <= e->len - off;
}

/* Takes n bytes of work; 0 when there are not that many left. */
static int spend(const tj__elf *e, size_t n)
{
  if (*e->work < n) {
    *e->work = 0;
    return 0;
  }
  *e->work -= n;
  return 1;
}

int tj__elf_open(tj__elf *e, const void *code, size_t len)
{
  memset(e, 0, sizeof *e);
  if (!code || len < sizeof(Elf64_Ehdr) ||
      (uintptr_t)code % _Alignof(Elf64_Shdr) != 0)
    return -1;
  e->base = code;
  e->len = len;
  e->work_left = TJ__ELF_WORK_PER_BYTE * len + TJ__ELF_WORK_MIN;
  e->work = &e->work_left;
  e->eh = code;
  const unsigned char *id = e->eh->e_ident;
  if (memcmp(id, ELFMAG, SELFMAG) != 0 || id[EI_CLASS] != ELFCLASS64 ||
      id[EI_DATA] != ELFDATA2LSB || e->eh->e_shentsize != sizeof(Elf64_Shdr) ||
      !in_blob(e, e->eh->e_shoff,
               (uint64_t)e->eh->e_shnum * sizeof(Elf64_Shdr)) ||
      e->eh->e_shoff % _Alignof(Elf64_Shdr) != 0)
    return -1;
  e->sh = (const Elf64_Shdr *)(e->base + e->eh->e_shoff);
  return 0;
}

const uint8_t *tj__elf_section(const tj__elf *e, unsigned i, size_t *n)
{
  if (i >= e->eh->e_shnum || e->sh[i].sh_type == SHT_NOBITS ||
      !in_blob(e, e->sh[i].sh_offset, e->sh[i].sh_size))
    return NULL;
  *n = e->sh[i].sh_size;
  return e->base + e->sh[i].sh_offset;
}

const char *tj__elf_string(const tj__elf *e, unsigned i, uint64_t off)
{
  size_t n;
  const uint8_t *s = tj__elf_section(e, i, &n);
  if (!s || off >= n)
    return NULL;
  size_t look = n - off < *e->work ? n - off : *e->work;
  const uint8_t *nul = memchr(s + off, '\0', look);
  spend(e, nul ? (size_t)(nul - (s + off)) + 1 : look);
  return nul ? (const char *)s + off : NULL;
}

int tj__elf_section_named(const tj__elf *e, const char *prefix,
                          const char *rest)
{
  size_t pn = strlen(prefix);
  for (unsigned i = 0; i < e->eh->e_shnum && *e->work; i++) {
    const char *name = tj__elf_string(e, e->eh->e_shstrndx, e->sh[i].sh_name);
    if (name && strncmp(name, prefix, pn) == 0 && strcmp(name + pn, rest) == 0)
      return (int)i;
  }
  return -1;
}

/* ------------------------------------------------------------ symbols */

int tj__elf_symbols_open(const tj__elf *e, tj__elf_symbols *t)
{
  for (int pass = 0; pass < 2; pass++)
    for (unsigned i = 0; i < e->eh->e_shnum; i++) {
      size_t n;
      const uint8_t *p;
      if (e->sh[i].sh_type != (pass ? SHT_DYNSYM : SHT_SYMTAB))
        continue;
      if (!(p = tj__elf_section(e, i, &n)))
        return -1;
      t->e = e;
      t->table = p;
      t->count = n / sizeof(Elf64_Sym);
      t->strtab = e->sh[i].sh_link;
      return 0;
    }
  return -1;
}

const char *tj__elf_symbol(const tj__elf_symbols *t, size_t i, Elf64_Sym *sym)
{
  if (i >= t->count || !spend(t->e, sizeof *sym))
    return NULL;
  memcpy(sym, t->table + i * sizeof *sym, sizeof *sym);
  return tj__elf_string(t->e, t->strtab, sym->st_name);
}

int64_t tj__elf_symbol_find(const tj__elf_symbols *t, const char *name,
                            int type, Elf64_Sym *sym)
{
  Elf64_Sym s;
  for (size_t i = 0; i < t->count && *t->e->work; i++) {
    const char *n = tj__elf_symbol(t, i, &s);
    if (n && ELF64_ST_TYPE(s.st_info) == type && s.st_shndx != SHN_UNDEF &&
        strcmp(n, name) == 0) {
      if (sym)
        *sym = s;
      return (int64_t)i;
    }
  }
  return -1;
}

/* ------------------------------------------------------------ notes */

int tj__elf_note_next(const uint8_t **p, const uint8_t *end, tj__elf_note *n)
{
  Elf64_Nhdr h;
  size_t left = *p && end > *p ? (size_t)(end - *p) : 0;
  if (left < sizeof h)
    return 0;
  memcpy(&h, *p, sizeof h);
  size_t name = ((size_t)h.n_namesz + 3) & ~(size_t)3;
  size_t desc = ((size_t)h.n_descsz + 3) & ~(size_t)3;
  /* The last note's padding may be cut off; its bytes may not. */
  if (h.n_namesz > left || h.n_descsz > left || name > left - sizeof h ||
      h.n_descsz > left - sizeof h - name)
    return 0;
  n->type = h.n_type;
  n->name = (const char *)*p + sizeof h;
  n->namesz = h.n_namesz;
  n->desc = *p + sizeof h + name;
  n->descsz = h.n_descsz;
  *p = desc >= left - sizeof h - name ? end : n->desc + desc;
  return 1;
}
