/*
 * check_security_audit3.c: the third security audit's findings, each as
 * the input that showed it: code objects whose figures overflow or whose
 * tables make the reader's work grow past the object's size.
 *
 * A test that could hang has a case of its own, whose timeout (which
 * measures nothing) turns the hang into a failure.
 */
#include "testutil.h"
#include "internal.h"
#include "codeobj.h"
#include "elfview.h"

/* ================================================================ ELF */

/* One section of a built ELF: its name, type, bytes and link. */
typedef struct sec {
  const char *name;
  uint32_t type;
  const void *data;
  size_t size;
  uint32_t link;
} sec;

/* An ELF64 of machine with sections [1 .. n] from s (0 is the null one),
 * a .shstrtab last: malloc'd (so aligned as the reader wants), *len set. */
static unsigned char *build_elf(uint16_t machine, const sec *s, unsigned n,
                                size_t *len)
{
  size_t names = 1 + strlen(".shstrtab") + 1, data = 0;
  for (unsigned i = 0; i < n; i++) {
    names += strlen(s[i].name) + 1;
    data += (s[i].size + 7) & ~(size_t)7;
  }
  size_t shoff = sizeof(Elf64_Ehdr) + data + ((names + 7) & ~(size_t)7);
  *len = shoff + (n + 2) * sizeof(Elf64_Shdr);
  unsigned char *b = calloc(1, *len);
  ck_assert_ptr_nonnull(b);
  Elf64_Ehdr *eh = (Elf64_Ehdr *)b;
  memcpy(eh->e_ident, ELFMAG, SELFMAG);
  eh->e_ident[EI_CLASS] = ELFCLASS64;
  eh->e_ident[EI_DATA] = ELFDATA2LSB;
  eh->e_ident[EI_VERSION] = EV_CURRENT;
  eh->e_machine = machine;
  eh->e_shoff = shoff;
  eh->e_shentsize = sizeof(Elf64_Shdr);
  eh->e_shnum = (uint16_t)(n + 2);
  eh->e_shstrndx = (uint16_t)(n + 1);
  Elf64_Shdr *sh = (Elf64_Shdr *)(b + shoff);
  size_t at = sizeof(Elf64_Ehdr), name_at = 1;
  char *strs = (char *)b + sizeof(Elf64_Ehdr) + data;
  for (unsigned i = 0; i < n; i++) {
    sh[i + 1].sh_name = (uint32_t)name_at;
    strcpy(strs + name_at, s[i].name);
    name_at += strlen(s[i].name) + 1;
    sh[i + 1].sh_type = s[i].type;
    sh[i + 1].sh_offset = at;
    sh[i + 1].sh_size = s[i].size;
    sh[i + 1].sh_link = s[i].link;
    if (s[i].data)
      memcpy(b + at, s[i].data, s[i].size);
    at += (s[i].size + 7) & ~(size_t)7;
  }
  sh[n + 1].sh_name = (uint32_t)name_at;
  strcpy(strs + name_at, ".shstrtab");
  sh[n + 1].sh_type = SHT_STRTAB;
  sh[n + 1].sh_offset = (uint64_t)(strs - (char *)b);
  sh[n + 1].sh_size = names;
  return b;
}

static void put32(unsigned char *p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

/* A cubin defining kernel "k" whose .nv.info says it uses regs registers. */
static unsigned char *cubin_with_regs(uint32_t regs, size_t *len)
{
  static const char strtab[] = "\0k";
  Elf64_Sym syms[2];
  memset(syms, 0, sizeof syms);
  syms[1].st_name = 1;
  syms[1].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
  syms[1].st_other = 0x10;
  syms[1].st_shndx = 1;
  unsigned char info[12] = {0x04, 0x2f, 8, 0};
  put32(info + 4, 1);
  put32(info + 8, regs);
  sec s[] = {
    {".strtab", SHT_STRTAB, strtab, sizeof strtab, 0},
    {".symtab", SHT_SYMTAB, syms, sizeof syms, 1},
    {".nv.info", SHT_LOPROC, info, sizeof info, 0},
  };
  return build_elf(EM_CUDA, s, 3, len);
}

/* Issue: registers x 32 wrapped to 0 and divided by: SIGFPE. */
START_TEST(a_cubin_claiming_huge_registers_is_unknown)
{
  static const uint32_t claims[] = {1u << 27, 0x7fffffffu, 0xffffffffu,
                                    1u << 26, 256};
  for (size_t i = 0; i < sizeof claims / sizeof claims[0]; i++) {
    size_t len;
    unsigned char *b = cubin_with_regs(claims[i], &len);
    tj__resources r;
    tj__code_resources(b, len, "k", &r);
    ck_assert_msg(r.regs == -1, "%u registers read as %d", claims[i], r.regs);
    ck_assert_int_le(r.max_threads, 1024);
    free(b);
  }
  size_t len;
  unsigned char *b = cubin_with_regs(64, &len);
  tj__resources r;
  ck_assert_int_eq(tj__code_resources(b, len, "k", &r), 0);
  ck_assert_int_eq(r.regs, 64);
  ck_assert_int_eq(r.max_threads, 1024);
  free(b);
}
END_TEST

/* An AMD metadata note: {"amdhsa.kernels": [{".symbol": "k.kd",
 * ".vgpr_count": vgprs, ".wavefront_size": wave}]}. */
static size_t amd_note(unsigned char *out, uint32_t vgprs, uint8_t wave)
{
  unsigned char d[128];
  size_t n = 0;
  d[n++] = 0x81;
  d[n++] = 0xa0 | 14;
  memcpy(d + n, "amdhsa.kernels", 14), n += 14;
  d[n++] = 0x91;
  d[n++] = 0x83;
  d[n++] = 0xa0 | 7;
  memcpy(d + n, ".symbol", 7), n += 7;
  d[n++] = 0xa0 | 4;
  memcpy(d + n, "k.kd", 4), n += 4;
  d[n++] = 0xa0 | 11;
  memcpy(d + n, ".vgpr_count", 11), n += 11;
  d[n++] = 0xce;
  for (int i = 3; i >= 0; i--)
    d[n++] = (unsigned char)(vgprs >> (8 * i));
  d[n++] = 0xa0 | 15;
  memcpy(d + n, ".wavefront_size", 15), n += 15;
  d[n++] = wave;
  put32(out, 7);
  put32(out + 4, (uint32_t)n);
  put32(out + 8, 32);
  memcpy(out + 12, "AMDGPU\0", 8);
  memcpy(out + 20, d, n);
  return 20 + ((n + 3) & ~(size_t)3);
}

START_TEST(amd_figures_past_any_gpu_are_unknown)
{
  unsigned char note[256];
  sec s = {".note", SHT_NOTE, note, amd_note(note, 0x7fffffffu, 7), 0};
  size_t len;
  unsigned char *b = build_elf(EM_AMDGPU, &s, 1, &len);
  tj__resources r;
  ck_assert_int_eq(tj__code_resources(b, len, "k", &r), 0);
  ck_assert_int_eq(r.regs, -1);
  ck_assert_int_eq(r.wave_size, -1);
  free(b);
  s.size = amd_note(note, 128, 64);
  b = build_elf(EM_AMDGPU, &s, 1, &len);
  ck_assert_int_eq(tj__code_resources(b, len, "k", &r), 0);
  ck_assert_int_eq(r.regs, 128);
  ck_assert_int_eq(r.wave_size, 64);
  free(b);
}
END_TEST

/* Overlapping note sections: thousands of headers over the same megabytes
 * of empty notes.  The walk reads at most the object's size; before, each
 * section walked them all (hours for a large object). */
START_TEST(overlapping_note_sections_cost_one_pass)
{
  const size_t notes = (size_t)4 << 20, count = 32768;
  size_t len = sizeof(Elf64_Ehdr) + notes + (count + 1) * sizeof(Elf64_Shdr);
  unsigned char *b = calloc(1, len);
  ck_assert_ptr_nonnull(b);
  Elf64_Ehdr *eh = (Elf64_Ehdr *)b;
  memcpy(eh->e_ident, ELFMAG, SELFMAG);
  eh->e_ident[EI_CLASS] = ELFCLASS64;
  eh->e_ident[EI_DATA] = ELFDATA2LSB;
  eh->e_machine = EM_AMDGPU;
  eh->e_shoff = sizeof(Elf64_Ehdr) + notes;
  eh->e_shentsize = sizeof(Elf64_Shdr);
  eh->e_shnum = (uint16_t)(count + 1 > 0xffff ? 0xffff : count + 1);
  Elf64_Shdr *sh = (Elf64_Shdr *)(b + eh->e_shoff);
  for (size_t i = 1; i < eh->e_shnum; i++) {
    sh[i].sh_type = SHT_NOTE;
    sh[i].sh_offset = sizeof(Elf64_Ehdr);
    sh[i].sh_size = notes;
  }
  tj__resources r;
  ck_assert_int_eq(tj__code_resources(b, len, "k", &r), -1);
  free(b);
}
END_TEST

/* A symbol table of many symbols whose names all point into a string
 * table without a NUL: each lookup looked through the whole table once a
 * symbol, the square of the object's size. */
START_TEST(nameless_symbol_tables_cost_linear_work)
{
  const size_t count = ((size_t)4 << 20) / sizeof(Elf64_Sym);
  const size_t strsz = (size_t)4 << 20;
  char *strs = malloc(strsz);
  Elf64_Sym *syms = calloc(count, sizeof *syms);
  ck_assert_ptr_nonnull(strs);
  ck_assert_ptr_nonnull(syms);
  memset(strs, 'k', strsz);
  for (size_t i = 1; i < count; i++) {
    syms[i].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    syms[i].st_shndx = 1;
  }
  sec s[] = {
    {".strtab", SHT_STRTAB, strs, strsz, 0},
    {".symtab", SHT_SYMTAB, syms, count * sizeof *syms, 1},
  };
  size_t len;
  unsigned char *b = build_elf(EM_AMDGPU, s, 2, &len);
  char out[64];
  ck_assert_int_eq(tj__elf_has_kernel(b, len, "k"), 0);
  ck_assert_int_eq(tj__elf_find_cxx_kernel(b, len, "k", out, sizeof out), 0);
  tj__resources r;
  ck_assert_int_eq(tj__code_resources(b, len, "k", &r), -1);
  free(b);
  free(strs);
  free(syms);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("security_audit3");
  TCase *tc = test_case(s, "code objects", 60);
  tcase_add_test(tc, a_cubin_claiming_huge_registers_is_unknown);
  tcase_add_test(tc, amd_figures_past_any_gpu_are_unknown);
  tc = test_case(s, "reader work", 20);
  tcase_add_test(tc, overlapping_note_sections_cost_one_pass);
  tcase_add_test(tc, nameless_symbol_tables_cost_linear_work);
  return run_suite(s);
}
