/*
 * check_security_audit3.c: the third security audit's findings, each as
 * the input that showed it: code objects whose figures overflow or whose
 * tables make the reader's work grow past the object's size, FIFOs in
 * the code directory, control characters in stored strings, views in
 * files the library did not make, tj_options with size 0, advice on a
 * read-only cache, FUSE, and the group a shared cache trusts.
 *
 * A test that could hang has a case of its own, whose timeout (which
 * measures nothing) turns the hang into a failure.
 */
#include "testutil.h"
#include "internal.h"
#include "cache_internal.h"
#include "codeobj.h"
#include "elfview.h"
#include "record.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/fs.h>
#include <pwd.h>
#include <sqlite3.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <tokitai-jit/cache.h>

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

/* ================================================================ FIFOs */

#define KERNEL "add_i32"

/* A cache in a new directory that holds KERNEL: its path, the key. */
static char *filled_cache(char key[TJ__KEY_HEX])
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_runtime *rt = open_compile_only(path, 0);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, KERNEL, &k), TJ_OK);
  memcpy(key, k->key, TJ__KEY_HEX);
  tj_runtime_close(rt);
  free(dir);
  return path;
}

static char *code_file(const char *cache, const char *name)
{
  char *p = NULL;
  ck_assert_int_ge(asprintf(&p, "%s.code/%s", cache, name), 0);
  return p;
}

/* A FIFO named by the key: opened without O_NONBLOCK, the open waited for
 * a writer forever.  Now it is refused and the SQLite row serves. */
START_TEST(a_fifo_for_a_code_file_never_hangs)
{
  char key[TJ__KEY_HEX];
  char *cache = filled_cache(key), *file = code_file(cache, key);
  ck_assert_int_eq(unlink(file), 0);
  ck_assert_int_eq(mkfifo(file, 0600), 0);
  tj_runtime *rt = open_compile_only(cache, 0);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, KERNEL, &k), TJ_OK);
  tj_stats st;
  ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
  ck_assert_uint_eq(st.compiles, 0);
  tj_runtime_close(rt);
  free(file);
  free(cache);
}
END_TEST

/* A FIFO named hits: the runtime that notes its hits opened it to write
 * and waited for a reader; --stats and the next SQLite open, to read. */
START_TEST(a_fifo_for_the_hits_file_never_hangs)
{
  char key[TJ__KEY_HEX];
  char *cache = filled_cache(key), *hits = code_file(cache, "hits");
  unlink(hits);
  ck_assert_int_eq(mkfifo(hits, 0600), 0);
  for (int i = 0; i < 2; i++) { /* served from the file, hits noted */
    tj_runtime *rt = open_compile_only(cache, 0);
    tj_kernel *k;
    ck_assert_int_eq(tj_kernel_get(rt, KERNEL, &k), TJ_OK);
    tj_runtime_close(rt);
  }
  tj_cache *c = NULL;
  tj_cache_stats cs;
  ck_assert_int_eq(tj_cache_open(&c, cache, 0), TJ_OK);
  ck_assert_int_eq(tj_cache_get_stats(c, &cs), TJ_OK);
  ck_assert_uint_ge(cs.entries, 1);
  tj_cache_close(c);
  free(hits);
  free(cache);
}
END_TEST

/* ================================================================ options */

/* A runtime on a new cache with size left 0 and the given opt-outs, the
 * environment naming a system cache that holds KERNEL and a remote tier:
 * its stats after a get of KERNEL, and whether it set up a remote tier. */
static tj_stats get_with(const char *system_caches, const char *remote,
                         int *has_remote)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj_options o = {0};
  o.arch = TEST_ARCH;
  o.cache_path = path;
  o.flags = TJ_NO_DEVICE;
  o.system_caches = system_caches;
  o.remote = remote;
  tj_runtime *rt = NULL;
  ck_assert_int_eq(tj_runtime_open(&rt, &o), TJ_OK);
  *has_remote = rt->remote != NULL;
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, KERNEL, &k), TJ_OK);
  tj_stats st;
  ck_assert_int_eq(tj_runtime_get_stats(rt, &st), TJ_OK);
  tj_runtime_close(rt);
  free(path);
  free(dir);
  return st;
}

/* Whether this build has a remote tier to set up (hiredis). */
#ifdef TJ_HAVE_HIREDIS
#define REMOTE_BUILT 1
#else
#define REMOTE_BUILT 0
#endif

/* tj_options o = {0} with system_caches = "" and remote = "": the header
 * invites size 0, and the opt-outs were dropped (the environment chose). */
START_TEST(size_zero_options_keep_their_opt_outs)
{
  char key[TJ__KEY_HEX];
  char *system = filled_cache(key);
  setenv("TOKITAI_JIT_SYSTEM_CACHE", system, 1);
  setenv("TOKITAI_JIT_REMOTE", "redis://127.0.0.1:1", 1);
  int has_remote;
  tj_stats st = get_with(NULL, NULL, &has_remote);
  ck_assert_uint_eq(st.system_hits, 1); /* the environment, as asked */
  ck_assert_int_eq(has_remote, REMOTE_BUILT);
  st = get_with("", "", &has_remote);
  ck_assert_uint_eq(st.system_hits, 0);
  ck_assert_uint_eq(st.compiles, 1);
  ck_assert_int_eq(has_remote, 0);
  unsetenv("TOKITAI_JIT_SYSTEM_CACHE");
  unsetenv("TOKITAI_JIT_REMOTE");
  free(system);
}
END_TEST

/* ================================================================ repair */

/* --verify-cache --repair on a healthy cache the user cannot write said
 * "the database itself is damaged: remove it" (TJ_ECACHE).  Nothing is bad,
 * so nothing needs writing: TJ_OK, 0 bad. */
START_TEST(repairing_a_healthy_readonly_cache_is_ok)
{
  char key[TJ__KEY_HEX];
  char *path = filled_cache(key);
  int fd = open(path, O_RDONLY), flags = 0;
  int ok = fd >= 0 && ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  int old = flags;
  flags |= FS_IMMUTABLE_FL;
  ok = ok && ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
  if (fd >= 0)
    close(fd);
  if (!ok) {
    printf("audit3: immutable file: skipped (cannot set FS_IMMUTABLE_FL)\n");
    free(path);
    return;
  }
  tj_cache *c = NULL;
  uint64_t bad = 7;
  int rc = tj_cache_open(&c, path, 0);
  int vrc = rc == TJ_OK ? tj_cache_verify(c, 1, NULL, NULL, &bad) : rc;
  char said[1024];
  snprintf(said, sizeof said, "%s", c ? tj_cache_errmsg(c) : "");
  tj_cache_close(c);
  fd = open(path, O_RDONLY);
  ioctl(fd, FS_IOC_SETFLAGS, &old);
  close(fd);
  ck_assert_int_eq(rc, TJ_OK);
  ck_assert_msg(vrc == TJ_OK, "verify --repair: %d: %s", vrc, said);
  ck_assert_uint_eq(bad, 0);
  free(path);
}
END_TEST

/* ================================================================ text */

/* A record (a code file, a remote value) whose entries carry escape
 * sequences: refused on the way in, as a NUL was. */
START_TEST(records_with_control_characters_are_refused)
{
  static const unsigned char code[64] = {0x7f, 'E', 'L', 'F'};
  static const char *const entries[] = {"k\tk\n", "k\033[2J\tk\n",
                                        "k\tk\007\n", "k\tk\r\n", "k\x7f\tk\n"};
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
    tj__cache_row row = {"0123456789abcdef0123456789abcdef", "k", TEST_ARCH,
                         TJ__PLATFORM, "c", "", code, sizeof code, 1,
                         entries[i], NULL};
    size_t n;
    unsigned char *b = tj__record_encode("TJTEST01", &row, &n);
    ck_assert_ptr_nonnull(b);
    tj__found f;
    int rc = tj__record_decode("TJTEST01", b, n, &row, &f);
    if (rc == 0)
      tj__found_free(&f);
    ck_assert_msg(rc == (i == 0 ? 0 : -1), "entries %zu: %d", i, rc);
    free(b);
  }
}
END_TEST

/* --list-cache printed a row's kernel and entries as they were stored:
 * escape sequences reached the terminal.  Each control character is
 * shown as \xNN. */
START_TEST(listings_escape_control_characters)
{
  if (access("./tokitai-jit", X_OK) != 0) {
    printf("audit3: ./tokitai-jit not built here: listing skipped\n");
    return;
  }
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db"), msg[1024];
  static const unsigned char code[64] = {0x7f, 'E', 'L', 'F'};
  tj__cache *c = NULL;
  ck_assert_int_eq(tj__cache_open(path, 0, &c, msg, sizeof msg), TJ_OK);
  tj__cache_row row = {"0123456789abcdef0123456789abcdef",
                       "k\033]0;owned\007", TEST_ARCH, TJ__PLATFORM, "c", "",
                       code, sizeof code, 1, "e\033[2J\tl\033[1A\n", NULL};
  ck_assert_int_eq(tj__cache_put(c, &row), TJ_OK);
  tj__cache_close(c);
  char cmd[4200], out[65536];
  snprintf(cmd, sizeof cmd, "./tokitai-jit --list-cache --cache '%s' 2>&1", path);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(p);
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  pclose(p);
  ck_assert_msg(n > 0 && !memchr(out, '\033', n) && !memchr(out, '\007', n),
                "raw control characters in: %s", out);
  ck_assert_msg(strstr(out, "\\x1b"), "no escaped ESC in: %s", out);
  free(path);
  free(dir);
}
END_TEST

/* A merge source's row whose kernel carries an escape sequence: it was
 * copied into the per-user cache as it was.  Now it is a bad row. */
START_TEST(merged_rows_with_control_characters_are_bad)
{
  char *dir = test_tmpdir(), *src = test_path(dir, "src.db");
  char *dst = test_path(dir, "dst.db"), msg[1024];
  static const unsigned char code[64] = {0x7f, 'E', 'L', 'F'};
  tj__cache *c = NULL;
  ck_assert_int_eq(tj__cache_open(src, 0, &c, msg, sizeof msg), TJ_OK);
  tj__cache_row row = {"0123456789abcdef0123456789abcdef", "k\033[2J",
                       TEST_ARCH, TJ__PLATFORM, "c", "", code, sizeof code,
                       1, NULL, NULL};
  ck_assert_int_eq(tj__cache_put(c, &row), TJ_OK);
  tj__cache_close(c);
  tj_cache *t = NULL;
  tj_cache_merge_stats st;
  ck_assert_int_eq(tj_cache_open(&t, dst, 0), TJ_OK);
  ck_assert_int_eq(tj_cache_merge(t, src, &st), TJ_OK);
  tj_cache_close(t);
  ck_assert_uint_eq(st.copied, 0);
  ck_assert_uint_eq(st.bad, 1);
  free(dst);
  free(src);
  free(dir);
}
END_TEST

/* ================================================================ views */

static int visit_none(const tj_cache_entry *e, void *ctx)
{
  (void)e, (void)ctx;
  return 0;
}

/* A file with our mark whose code_objects is a view over an endless
 * recursive query: --merge, a system-cache lookup and --list-cache
 * --system never ended.  Files the library did not make must hold real
 * tables. */
START_TEST(a_cache_of_views_is_refused)
{
  char key[TJ__KEY_HEX];
  char *path = filled_cache(key);
  sqlite3 *db = NULL;
  ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
  ck_assert_int_eq(sqlite3_exec(db,
      "PRAGMA journal_mode=DELETE;"
      "ALTER TABLE code_objects RENAME TO real_rows;"
      "CREATE VIEW code_objects AS WITH RECURSIVE r(n) AS (SELECT 1 UNION "
      "ALL SELECT n + 1 FROM r) SELECT real_rows.* FROM r, real_rows;",
      NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
  tj_cache *c = NULL;
  int rc = tj_cache_open(&c, path, TJ_CACHE_SYSTEM);
  if (rc == TJ_OK)
    rc = tj_cache_list(c, visit_none, NULL);
  ck_assert_int_eq(rc, TJ_ECACHE);
  ck_assert_msg(strstr(tj_cache_errmsg(c), "view"), "%s", tj_cache_errmsg(c));
  tj_cache_close(c);
  char *dir = test_tmpdir(), *target = test_path(dir, "cache.db");
  ck_assert_int_eq(tj_cache_open(&c, target, 0), TJ_OK);
  ck_assert_int_eq(tj_cache_merge(c, path, NULL), TJ_ECACHE);
  tj_cache_close(c);
  free(target);
  free(dir);
  free(path);
}
END_TEST

/* ================================================================ FUSE */

/* A FUSE file system says who owns each file: mounted by another user
 * (user_allow_other) it called its files root's, mode 0644, and a system
 * cache there was loaded.  Mounting FUSE needs what a test here lacks, so
 * the decision is checked as the function the walk asks. */
START_TEST(fuse_is_trusted_only_when_ours_and_asked_for)
{
  const unsigned long fuse = TJ__FUSE_MAGIC, ext4 = 0xEF53;
  const uid_t me = 1000;
  ck_assert_int_eq(tj__location_fuse_verdict(ext4, -1, me, 0), TJ_OK);
  ck_assert_int_eq(tj__location_fuse_verdict(fuse, 1001, me, 0), TJ_EPERM);
  ck_assert_int_eq(tj__location_fuse_verdict(fuse, 1001, me, 1), TJ_EPERM);
  ck_assert_int_eq(tj__location_fuse_verdict(fuse, -1, me, 1), TJ_EPERM);
  ck_assert_int_eq(tj__location_fuse_verdict(fuse, 1000, me, 0), TJ_EPERM);
  ck_assert_int_eq(tj__location_fuse_verdict(fuse, 1000, me, 1), TJ_OK);
  ck_assert_int_eq(tj__location_fuse_verdict(fuse, 0, me, 1), TJ_OK);
  ck_assert_int_eq(tj__location_fuse_verdict(fuse, 0, me, 0), TJ_EPERM);
}
END_TEST

/* ================================================================ groups */

static gid_t group_made(const char *name)
{
  struct group *g = getgrnam(name);
  if (!g) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "groupadd %s >/dev/null 2>&1", name);
    if (system(cmd) != 0)
      return (gid_t)-1;
    g = getgrnam(name);
  }
  return g ? g->gr_gid : (gid_t)-1;
}

/* In a child that is the victim (uid, in groups proj and broad, primary
 * proj): the status of opening path as a shared cache, and its message. */
static int open_as(uid_t uid, gid_t proj, gid_t broad, const char *path,
                   char *msg, size_t len)
{
  int fd[2];
  ck_assert_int_eq(pipe(fd), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    gid_t groups[2] = {proj, broad};
    char m[1024] = "";
    tj__cache *c = NULL;
    if (setgroups(2, groups) != 0 || setgid(proj) != 0 || setuid(uid) != 0)
      _exit(99);
    int rc = tj__cache_open(path, TJ_CACHE_GROUP, &c, m, sizeof m);
    if (rc == TJ_OK && !c)
      rc = TJ_ECACHE; /* went on without it: m says why */
    tj__cache_close(c);
    if (write(fd[1], m, strlen(m) + 1) < 0)
      _exit(98);
    _exit(rc == TJ_OK ? 0 : rc == TJ_EPERM ? 1 : 2);
  }
  close(fd[1]);
  ssize_t n = read(fd[0], msg, len - 1);
  msg[n > 0 ? n : 0] = '\0';
  close(fd[0]);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) < 3, "child: 0x%x",
                status);
  return WEXITSTATUS(status) == 0 ? TJ_OK : WEXITSTATUS(status) == 1 ? TJ_EPERM
                                                                     : TJ_ECACHE;
}

/* A project's cache under an area a broader group may write: any member
 * of the broader group could swap the project's directory for their own.
 * TJ_CACHE_GROUP trusts one group, the cache's own, for its files and
 * every directory above them. */
START_TEST(a_shared_cache_trusts_its_own_group_only)
{
  struct passwd *pw = NULL;
  gid_t proj = geteuid() == 0 ? group_made("tj-a3-proj") : (gid_t)-1;
  gid_t broad = geteuid() == 0 ? group_made("tj-a3-broad") : (gid_t)-1;
  if (proj != (gid_t)-1 && !(pw = getpwnam("tj-a3-victim")) &&
      system("useradd -M -N -s /bin/false tj-a3-victim >/dev/null 2>&1") == 0)
    pw = getpwnam("tj-a3-victim");
  if (proj == (gid_t)-1 || broad == (gid_t)-1 || !pw) {
    printf("audit3: groups: skipped (needs root to add groups and a user)\n");
    return;
  }
  uid_t victim = pw->pw_uid;
  /* Under /tmp: the victim must reach it (the tests' folder is root's). */
  char *base = strdup("/tmp/tj-audit3-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(base));
  char *shared = test_path(base, "shared");
  char *cache_dir = test_path(shared, "proj");
  char *path = test_path(cache_dir, "cache.db"), msg[1024];
  ck_assert_int_eq(chmod(base, 0755), 0);
  ck_assert_int_eq(mkdir(shared, 0), 0);
  ck_assert_int_eq(chown(shared, 0, broad), 0);
  ck_assert_int_eq(chmod(shared, 02770), 0);
  ck_assert_int_eq(mkdir(cache_dir, 0), 0);
  ck_assert_int_eq(chown(cache_dir, victim, proj), 0);
  ck_assert_int_eq(chmod(cache_dir, 02770), 0);
  /* The area is writable by broad, not by the cache's group: refused. */
  ck_assert_int_eq(open_as(victim, proj, broad, path, msg, sizeof msg),
                   TJ_EPERM);
  ck_assert_msg(strstr(msg, "not the cache's own group"), "%s", msg);
  /* Only root may write the area: the project's cache opens. */
  ck_assert_int_eq(chmod(shared, 0755), 0);
  ck_assert_int_eq(open_as(victim, proj, broad, path, msg, sizeof msg), TJ_OK);
  /* A file of the broader group in the project's directory: refused. */
  ck_assert_int_eq(chown(path, victim, broad), 0);
  ck_assert_int_eq(open_as(victim, proj, broad, path, msg, sizeof msg),
                   TJ_EPERM);
  ck_assert_msg(strstr(msg, "not the cache directory's"), "%s", msg);
  ck_assert_int_eq(chown(path, victim, proj), 0);
  /* A member of broad who may write the area puts a cache of broad in
   * the project's place (root stands for them here).  The cache's group
   * is then broad, which the victim is in: without a pin it opens; with
   * TOKITAI_JIT_CACHE_GROUP naming the project's group it is refused. */
  char *swapped = test_path(shared, "swapped"), *spath;
  spath = test_path(swapped, "cache.db");
  ck_assert_int_eq(chown(shared, 0, broad), 0);
  ck_assert_int_eq(chmod(shared, 02770), 0);
  ck_assert_int_eq(mkdir(swapped, 0), 0);
  ck_assert_int_eq(chown(swapped, 0, broad), 0);
  ck_assert_int_eq(chmod(swapped, 02770), 0);
  ck_assert_int_eq(open_as(victim, proj, broad, spath, msg, sizeof msg),
                   TJ_OK);
  setenv("TOKITAI_JIT_CACHE_GROUP", "tj-a3-proj", 1);
  ck_assert_int_eq(open_as(victim, proj, broad, spath, msg, sizeof msg),
                   TJ_EPERM);
  ck_assert_msg(strstr(msg, "TOKITAI_JIT_CACHE_GROUP"), "%s", msg);
  /* The project's own cache still opens under the pin, by name or number,
   * once the area is root's again. */
  ck_assert_int_eq(chmod(shared, 0755), 0);
  ck_assert_int_eq(open_as(victim, proj, broad, path, msg, sizeof msg), TJ_OK);
  char num[32];
  snprintf(num, sizeof num, "%u", (unsigned)proj);
  setenv("TOKITAI_JIT_CACHE_GROUP", num, 1);
  ck_assert_int_eq(open_as(victim, proj, broad, path, msg, sizeof msg), TJ_OK);
  setenv("TOKITAI_JIT_CACHE_GROUP", "tj-a3-no-such-group", 1);
  ck_assert_int_eq(open_as(victim, proj, broad, path, msg, sizeof msg),
                   TJ_EPERM);
  ck_assert_msg(strstr(msg, "names no group"), "%s", msg);
  unsetenv("TOKITAI_JIT_CACHE_GROUP");
  free(spath);
  free(swapped);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  ck_assert_int_eq(system(cmd), 0);
  free(path);
  free(cache_dir);
  free(shared);
  free(base);
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
  tc = test_case(s, "fifos", 120);
  tcase_add_test(tc, a_fifo_for_a_code_file_never_hangs);
  tcase_add_test(tc, a_fifo_for_the_hits_file_never_hangs);
  tc = test_case(s, "options and advice", 120);
  tcase_add_test(tc, size_zero_options_keep_their_opt_outs);
  tcase_add_test(tc, repairing_a_healthy_readonly_cache_is_ok);
  tc = test_case(s, "text", 120);
  tcase_add_test(tc, records_with_control_characters_are_refused);
  tcase_add_test(tc, listings_escape_control_characters);
  tcase_add_test(tc, merged_rows_with_control_characters_are_bad);
  tc = test_case(s, "views", 60);
  tcase_add_test(tc, a_cache_of_views_is_refused);
  tc = test_case(s, "owners", 120);
  tcase_add_test(tc, fuse_is_trusted_only_when_ours_and_asked_for);
  tcase_add_test(tc, a_shared_cache_trusts_its_own_group_only);
  return run_suite(s);
}
