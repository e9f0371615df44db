/* check_codeobj.c: each kernel's resources, read from its code object on a
 * machine without a GPU (tj_kernel_info.resources): the embedded kernels
 * for the arch of each $TJ_TEST_ARCHS entry (default TEST_ARCH), a kernel
 * that needs scratch, a module's lowered entry, the same figures as LLVM's
 * own reader of the AMD metadata note, malformed code objects (for the
 * symbol reader too), and threads asking for the figures at once. */
#include "testkernels.h"

#include "codeobj.h"
#include "tokitai-jit/kernels.h"
#include "tokitai-jit/ops.h"

#include <elf.h>
#include <pthread.h>

/* Each embedded kernel with its contract's block and dynamic shared
 * memory, from <tokitai-jit/kernels.h>. */
#define TJ_CONTRACT_ROW(name, file, sig, bx, by, bz, shared, grid, align, notes) \
  {#name, (bx) * (by) * (bz), (shared)},
static const struct {
  const char *name;
  int block;          /* the contract's threads per block */
  long dynamic_bytes; /* the contract's dynamic shared memory */
} embedded[] = {TJ_KERNEL_CONTRACTS(TJ_CONTRACT_ROW)};
#define N_EMBEDDED (sizeof embedded / sizeof embedded[0])

/* The elementwise kernels use no shared memory, no scratch, no spills. */
static int elementwise(const char *name)
{
  return strncmp(name, "gemm", 4) != 0 && strncmp(name, "moe_", 4) != 0;
}

/* The MoE permutation's kernels share their block's routing through
 * static shared memory, and use no scratch and no spills. */
static int moe(const char *name)
{
  return strncmp(name, "moe_", 4) == 0;
}

static char *archs[16];
static int n_archs;

static int is_amd(const tj_kernel_info *info)
{
  return ((const Elf64_Ehdr *)info->code)->e_machine == 224; /* EM_AMDGPU */
}

START_TEST(embedded_kernels_resources_are_read)
{
  const char *arch = archs[_i];
  tj_runtime *rt = open_for_arch(arch, NULL);
  ck_assert_uint_eq(tj_embedded_count(), N_EMBEDDED);
  for (size_t i = 0; i < N_EMBEDDED; i++) {
    tj_kernel *k = NULL;
    tj_kernel_info info;
    ck_assert_int_eq(tj_kernel_get(rt, embedded[i].name, &k), TJ_OK);
    ck_assert_int_eq(tj_kernel_get_info(k, &info), TJ_OK);
    const tj_kernel_resources *r = &info.resources;
    printf("check_codeobj: %s %s: regs %d sgprs %d agprs %d shared %lld local %lld "
           "spills %d max_threads %d wave %d\n",
           arch, embedded[i].name, r->regs, r->sgprs, r->agprs,
           (long long)r->shared_bytes, (long long)r->local_bytes, r->spills,
           r->max_threads, r->wave_size);
    /* The Hopper and the skinny tensor-core entries are stubs that trap
     * on AMD: no registers. */
    int stub = (strstr(embedded[i].name, "_sm90a_") ||
                strstr(embedded[i].name, "_tc_n")) && is_amd(&info);
    ck_assert_msg(r->regs > (stub ? -1 : 0) && r->regs <= 512, "%s: regs %d",
                  embedded[i].name, r->regs);
    ck_assert_msg(r->max_threads >= embedded[i].block,
                  "%s for %s allows %d threads per block, its contract launches %d",
                  embedded[i].name, arch, r->max_threads, embedded[i].block);
    ck_assert_int_ge(r->shared_bytes, 0);
    ck_assert_int_ge(r->local_bytes, 0);
    if (is_amd(&info)) {
      ck_assert_int_gt(r->sgprs, stub ? -1 : 0);
      ck_assert_int_ge(r->spills, 0);
      ck_assert(r->wave_size == 32 || r->wave_size == 64);
    } else {
      ck_assert_int_eq(r->wave_size, 32);
    }
    if (elementwise(embedded[i].name)) {
      ck_assert_msg(r->local_bytes == 0 && r->spills <= 0,
                    "%s for %s uses scratch: %lld bytes, %d spills", embedded[i].name,
                    arch, (long long)r->local_bytes, r->spills);
      ck_assert_int_eq(r->shared_bytes, 0);
    } else if (moe(embedded[i].name)) {
      ck_assert_msg(r->local_bytes == 0 && r->spills <= 0,
                    "%s for %s uses scratch: %lld bytes, %d spills", embedded[i].name,
                    arch, (long long)r->local_bytes, r->spills);
      ck_assert_int_gt(r->shared_bytes, 0);
    } else if (embedded[i].dynamic_bytes == 0 && !strstr(embedded[i].name, "_sm90a_") &&
               !strstr(embedded[i].name, "_reduce")) {
      /* (a reduce kernel adds partial sums: no tile, no shared memory) */
      ck_assert_msg(r->shared_bytes > 0, "%s: a tiled GEMM with no shared memory",
                    embedded[i].name);
    }
  }
  tj_runtime_close(rt);
}
END_TEST

/* A per-thread array indexed at run time cannot live in registers: the
 * figures must say so. */
START_TEST(a_kernel_with_a_local_array_shows_its_scratch)
{
  tj_runtime *rt = open_for_arch(archs[_i], NULL);
  tj_kernel *k = NULL;
  tj_kernel_info info;
  ck_assert_int_eq(tj_kernel_compile(rt, test_scratch_source, "scratchy", NULL, &k),
                   TJ_OK);
  ck_assert_int_eq(tj_kernel_get_info(k, &info), TJ_OK);
  ck_assert_msg(info.resources.local_bytes >= TEST_SCRATCH_BYTES, "%s: scratch %lld bytes",
                archs[_i], (long long)info.resources.local_bytes);
  ck_assert_int_eq(info.resources.shared_bytes, 0);
  tj_runtime_close(rt);
}
END_TEST

/* A module's entry that is a name expression is found under its lowered
 * name, with its own figures: shared memory only in the one that has it. */
START_TEST(a_modules_entries_have_their_own_figures)
{
  tj_runtime *rt = open_for_arch(archs[_i], NULL);
  tj_module *m = test_compile_module(rt);
  tj_kernel *fill = NULL, *staged = NULL;
  tj_kernel_info a, b;
  ck_assert_int_eq(tj_module_kernel(m, "fill<float>", &fill), TJ_OK);
  ck_assert_int_eq(tj_module_kernel(m, "staged", &staged), TJ_OK);
  tj_kernel_get_info(fill, &a);
  tj_kernel_get_info(staged, &b);
  ck_assert_int_gt(a.resources.regs, 0);
  ck_assert_int_eq(a.resources.shared_bytes, 0);
  ck_assert_int_eq(b.resources.shared_bytes, TEST_STAGED_SHARED_BYTES);
  tj_runtime_close(rt);
}
END_TEST

/* What llvm-readelf --notes prints for one kernel of the metadata note:
 * its map begins with "  - " and holds ".name: <entry>". */
#define FIGURES 8
static const char *const figure_keys[FIGURES] = {
    ".vgpr_count", ".sgpr_count", ".group_segment_fixed_size",
    ".private_segment_fixed_size", ".max_flat_workgroup_size", ".wavefront_size",
    ".vgpr_spill_count", ".sgpr_spill_count"};

static int readelf_figures(const char *file, const char *entry, long long *out)
{
  char cmd[512], line[512];
  snprintf(cmd, sizeof cmd, "llvm-readelf --notes '%s' 2>/dev/null", file);
  FILE *p = popen(cmd, "r");
  long long cur[FIGURES];
  int mine = 0, found = 0;
  while (p && fgets(line, sizeof line, p)) {
    if (strncmp(line, "  - ", 4) == 0 || strncmp(line, "amdhsa.target", 13) == 0) {
      if (mine)
        memcpy(out, cur, sizeof cur), found = 1;
      mine = 0;
      for (int i = 0; i < FIGURES; i++)
        cur[i] = -1;
    }
    char name[256];
    if (sscanf(line + 4, ".name: %255s", name) == 1 && strcmp(name, entry) == 0)
      mine = 1;
    for (int i = 0; i < FIGURES; i++) {
      char *at = strstr(line, figure_keys[i]);
      size_t kn = strlen(figure_keys[i]);
      if (at && at[kn] == ':')
        cur[i] = strtoll(at + kn + 1, NULL, 10);
    }
  }
  if (p)
    pclose(p);
  return found;
}

/* On AMD, the figures are LLVM's own reading of the note. */
START_TEST(amd_figures_match_llvm_readelf)
{
  const char *arch = archs[_i];
  if (system("llvm-readelf --version >/dev/null 2>&1") != 0) {
    printf("check_codeobj: no llvm-readelf on PATH: comparison not made\n");
    return;
  }
  static const char *one_kernel[] = {"add_i32", "gelu_fwd_f16", "gelu_bwd_f16", "gemm_f16"};
  tj_runtime *rt = open_for_arch(arch, NULL);
  char *dir = test_tmpdir();
  for (size_t i = 0; i < 4; i++) {
    tj_kernel *k = NULL;
    tj_kernel_info info;
    ck_assert_int_eq(tj_kernel_get(rt, one_kernel[i], &k), TJ_OK);
    tj_kernel_get_info(k, &info);
    if (!is_amd(&info)) {
      printf("check_codeobj: %s is not an AMD code object: nothing to compare\n", arch);
      break;
    }
    char *file = test_path(dir, one_kernel[i]);
    FILE *f = fopen(file, "wb");
    ck_assert(f && fwrite(info.code, 1, info.code_size, f) == info.code_size);
    fclose(f);
    const tj_kernel_resources *r = &info.resources;
    long long fig[FIGURES];
    ck_assert_msg(readelf_figures(file, one_kernel[i], fig), "%s: llvm-readelf shows no %s",
                  arch, one_kernel[i]);
    const long long ours[FIGURES - 1] = {r->regs, r->sgprs, r->shared_bytes,
                                         r->local_bytes, r->max_threads, r->wave_size,
                                         r->spills};
    for (int j = 0; j < FIGURES - 2; j++)
      ck_assert_msg(fig[j] == ours[j], "%s %s: %s is %lld, llvm-readelf says %lld", arch,
                    one_kernel[i], figure_keys[j], ours[j], fig[j]);
    ck_assert_int_eq(fig[6] + fig[7], r->spills);
    unlink(file);
    free(file);
  }
  rmdir(dir);
  free(dir);
  tj_runtime_close(rt);
}
END_TEST

/* Malformed code objects are "unknown", never a crash (the sanitizer build
 * runs this too): every truncation, and bytes flipped all through. */
START_TEST(malformed_code_objects_are_unknown)
{
  tj_runtime *rt = open_for_arch(archs[0], NULL);
  tj_kernel *k = NULL;
  tj_kernel_info info;
  ck_assert_int_eq(tj_kernel_get(rt, "gelu_bwd_f16", &k), TJ_OK);
  tj_kernel_get_info(k, &info);
  tj_kernel_resources r;
  ck_assert_int_eq(tj__code_resources(info.code, info.code_size, "gelu_bwd_f16", &r), 0);
  ck_assert_int_eq(tj__code_resources(info.code, info.code_size, "no_such_kernel", &r), -1);
  ck_assert_int_eq(r.regs, -1);
  ck_assert_int_eq(tj__code_resources("not an ELF", 10, "x", &r), -1);
  ck_assert_int_eq(tj__code_resources(NULL, 0, "x", &r), -1);
  /* The symbol reader, through the same ELF view. */
  char sym[64];
  ck_assert(tj__elf_has_kernel(info.code, info.code_size, "gelu_bwd_f16"));
  ck_assert(!tj__elf_has_kernel(info.code, info.code_size, "no_such_kernel"));
  ck_assert(!tj__elf_has_kernel("not an ELF", 10, "x"));
  ck_assert_int_eq(tj__elf_find_cxx_kernel(NULL, 0, "x", sym, sizeof sym), 0);
  /* Not aligned as malloc aligns: refused, not read in place. */
  unsigned char *shifted = malloc(info.code_size + 1);
  memcpy(shifted + 1, info.code, info.code_size);
  ck_assert(!tj__elf_has_kernel(shifted + 1, info.code_size, "gelu_bwd_f16"));
  ck_assert_int_eq(tj__code_resources(shifted + 1, info.code_size, "gelu_bwd_f16", &r), -1);
  free(shifted);
  unsigned char *copy = malloc(info.code_size);
  for (size_t n = 0; n < info.code_size; n += n < 4096 ? 1 : 61) {
    memcpy(copy, info.code, n);
    tj__code_resources(copy, n, "gelu_bwd_f16", &r);
    tj__elf_has_kernel(copy, n, "gelu_bwd_f16");
    tj__elf_find_cxx_kernel(copy, n, "gelu_bwd_f16", sym, sizeof sym);
  }
  srand(7);
  for (int round = 0; round < 2000; round++) {
    memcpy(copy, info.code, info.code_size);
    for (int f = 0; f < 4; f++)
      copy[(size_t)rand() % info.code_size] ^= (unsigned char)(1 + rand() % 255);
    tj__code_resources(copy, info.code_size, "gelu_bwd_f16", &r);
    tj__elf_has_kernel(copy, info.code_size, "gelu_bwd_f16");
    tj__elf_find_cxx_kernel(copy, info.code_size, "gelu_bwd_f16", sym, sizeof sym);
  }
  free(copy);
  tj_runtime_close(rt);
}
END_TEST

/* The figures are read from the code at the first ask and kept with the
 * kernel: threads asking at once get what the reader itself gives (the
 * sanitizer builds watch the sharing). */
typedef struct asker {
  const tj_kernel *k;
  pthread_barrier_t *start;
  tj_kernel_resources got;
} asker;

static void *ask_often(void *p)
{
  asker *a = p;
  tj_kernel_info info;
  pthread_barrier_wait(a->start);
  for (int round = 0; round < 200; round++)
    ck_assert_int_eq(tj_kernel_get_info(a->k, &info), TJ_OK);
  a->got = info.resources;
  return NULL;
}

START_TEST(threads_asking_at_once_get_the_same_figures)
{
  tj_runtime *rt = open_for_arch(archs[0], NULL);
  tj_module *m = test_compile_module(rt);
  tj_module_info mi = {.size = sizeof mi};
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_module_get_info(m, &mi), TJ_OK);
  ck_assert_int_eq(tj_module_kernel(m, "staged", &k), TJ_OK);
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, 2);
  asker a[2] = {{k, &start, {0}}, {k, &start, {0}}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    ck_assert_int_eq(pthread_create(&t[i], NULL, ask_often, &a[i]), 0);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  pthread_barrier_destroy(&start);
  tj_kernel_resources direct;
  ck_assert_int_eq(tj__code_resources(mi.code, mi.code_size, mi.lowered[1], &direct), 0);
  for (int i = 0; i < 2; i++)
    ck_assert(memcmp(&a[i].got, &direct, sizeof direct) == 0);
  ck_assert_int_eq(direct.shared_bytes, TEST_STAGED_SHARED_BYTES);
  tj_runtime_close(rt);
}
END_TEST

int main(void)
{
  const char *v = getenv("TJ_TEST_ARCHS");
  char *list = strdup(v && *v ? v : TEST_ARCH), *save = NULL;
  for (char *t = strtok_r(list, ", \t", &save); t && n_archs < 16;
       t = strtok_r(NULL, ", \t", &save))
    archs[n_archs++] = strdup(t);
  free(list);
  Suite *s = suite_create("codeobj");
  TCase *tc = tcase_create("resources");
  tcase_set_timeout(tc, 600);
  tcase_add_loop_test(tc, embedded_kernels_resources_are_read, 0, n_archs);
  tcase_add_loop_test(tc, a_kernel_with_a_local_array_shows_its_scratch, 0, n_archs);
  tcase_add_loop_test(tc, a_modules_entries_have_their_own_figures, 0, n_archs);
  tcase_add_loop_test(tc, amd_figures_match_llvm_readelf, 0, n_archs);
  tcase_add_test(tc, malformed_code_objects_are_unknown);
  tcase_add_test(tc, threads_asking_at_once_get_the_same_figures);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
