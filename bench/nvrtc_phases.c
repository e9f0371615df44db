/*
 * nvrtc_phases.c: where an NVRTC compile of an embedded kernel file spends
 * its time.  A measurement, not a test: it prints a table and asserts
 * nothing.  It calls NVRTC directly, with the source and options the
 * library gives it on the NVIDIA platform (src/platform/nvidia.c's
 * tj__base_options, build-aux/embed.sh's "embed: prepend", the HIP headers
 * of src/platform/hip_nvidia in memory), and times for each file:
 *
 *   parse   -fdevice-syntax-only: the front end alone
 *   ptx     --gpu-architecture=compute_NN: front end and NVVM, to PTX
 *   cubin   --gpu-architecture=sm_NN: the whole compile (ptxas = cubin - ptx)
 *   pch     the cubin compile with NVRTC's automatic precompiled headers
 *           (-pch, in a fresh --pch-dir): its first compile, which makes
 *           the PCH, and the median of the next ones, which use it; and
 *           whether the cubin is byte-identical to the one without
 *
 * and first, before all of these, the file's first cubin compile in the
 * process (CPU and wall time): NVRTC 12.9 and later keep their output in
 * the driver's compute cache (CUDA_CACHE_PATH) where a driver is
 * installed, so on a GPU machine the medians after it are cache hits and
 * only this column is a cold compile; --option -no-cache (an option
 * added to every compile, repeatable) turns that cache off.
 *
 * NVRTC's own --fdevice-time-trace=FILE splits a compile finer (front
 * end, NVVM optimizer and codegen, ptxas) for one compile at a time.
 *
 * Each figure is the median of --reps compiles (3), each a new program,
 * after one unmeasured compile that loads NVRTC's builtins: the process's
 * CPU time, since NVRTC compiles in the calling process and a shared
 * machine's wall time says as much about its neighbours; the whole
 * compile's wall time beside it.  No GPU is needed.  Build and run from the source tree (NVIDIA's CUDA 12.8 or
 * later for -pch):
 *
 *   cc -O2 -I/usr/local/cuda/include bench/nvrtc_phases.c \
 *      -L/usr/local/cuda/lib64 -lnvrtc -o /tmp/nvrtc_phases
 *   /tmp/nvrtc_phases --arch sm_90a kernels/add_i32.hip kernels/gelu_f16.hip \
 *      kernels/gemm_f16.hip kernels/gemm_skinny_f16.hip \
 *      kernels/gemm_skinny_f16_tc.hip \
 *      kernels/moe_permute.hip
 *
 * A configuration of a file compiled per configuration takes its -D
 * constants as --define NAME=VALUE (each before the files), e.g. the
 * GEMM family's bf16 NT 128 x 256 multicast pair: --define TJ_TA=2
 * --define TJ_TC=2 --define TJ_TRANS_A=0 --define TJ_TRANS_B=1 --define
 * TJ_EPI=0 --define TJ_H_KIND=2 --define TJ_H_BN=256 --define
 * TJ_H_STAGES=4 --define TJ_H_SPLIT=1 --define TJ_GEMM_ENTRY=g --define
 * TJ_REDUCE_ENTRY=r --define TJ_COLSUM_ENTRY=c --define TJ_PAD_ENTRY=p
 * kernels/gemm_sm90a.hip.
 */
#define _GNU_SOURCE
#include <nvrtc.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_REPS 15
#define CUDA_INCLUDE "/usr/local/cuda/include"
#define HIP_HEADERS "src/platform/hip_nvidia/hip"

static const char *const header_files[] = {"hip_common.h", "hip_fp16.h",
                                           "hip_runtime.h",
                                           "hip_runtime_api.h"};
#define NHEADERS (sizeof header_files / sizeof header_files[0])

static char *header_text[NHEADERS];
static const char *header_names[NHEADERS];

static double clock_ms(clockid_t id)
{
  struct timespec ts;
  clock_gettime(id, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static char *read_text(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *buf = NULL;
  size_t cap = 0, n = 0, got;
  do {
    if (n + 4096 + 1 > cap && !(buf = realloc(buf, cap = 2 * cap + 8192)))
      break;
    got = fread(buf + n, 1, 4096, f);
    n += got;
  } while (got > 0);
  fclose(f);
  if (buf)
    buf[n] = '\0';
  return buf;
}

/* The file as the library embeds it: the files its "embed: prepend
 * NAME..." line names, in that order, in front. */
static char *embedded_source(const char *path)
{
  char *text = read_text(path);
  const char *mark = text ? strstr(text, " * embed: prepend ") : NULL;
  if (!mark)
    return text;
  char *dir = strdup(path), *slash = strrchr(dir, '/');
  if (slash)
    *slash = '\0';
  char *all = strdup(""), name[256];
  const char *p = mark + strlen(" * embed: prepend ");
  int used;
  while (all && *p != '\n' && sscanf(p, "%255s%n", name, &used) == 1) {
    char *full = NULL, *front = NULL, *more = NULL;
    p += used;
    if (asprintf(&full, "%s/%s", slash ? dir : ".", name) >= 0)
      front = read_text(full);
    if (!front || asprintf(&more, "%s%s", all, front) < 0)
      more = NULL;
    free(full);
    free(front);
    free(all);
    all = more;
    while (*p == ' ')
      p++;
  }
  char *both = NULL;
  if (all && asprintf(&both, "%s%s", all, text) < 0)
    both = NULL;
  free(all);
  free(dir);
  free(text);
  return both;
}

static int load_headers(void)
{
  for (size_t i = 0; i < NHEADERS; i++) {
    char path[512], *name;
    snprintf(path, sizeof path, "%s/%s", HIP_HEADERS, header_files[i]);
    if (!(header_text[i] = read_text(path)))
      return -1;
    if (asprintf(&name, "hip/%s", header_files[i]) < 0)
      return -1;
    header_names[i] = name;
  }
  return 0;
}

/* -D options from the command line (--define NAME=VALUE): a
 * configuration of a file compiled per configuration (gemm_sm90a.hip,
 * gemm_portable.hip), as the library's call gives them. */
#define MAX_DEFINES 16
static char *defines[MAX_DEFINES];
static int ndefines;
/* Options from the command line (--option OPT), given to every compile. */
#define MAX_ADDED 16
static const char *added[MAX_ADDED];
static int nadded;

typedef struct compile_out {
  double ms, wall_ms; /* CPU time, wall time */
  char *cubin;
  size_t cubin_size;
  nvrtcResult pch_status;
} compile_out;

/* One compile of src with the library's options for target (an sm_NN[a]
 * or compute_NN[a]) and extra options. */
static int compile(const char *src, const char *name, const char *target,
                   const char *const *extra, int nextra, compile_out *out)
{
  char arch[64];
  const char *opts[16 + MAX_DEFINES + MAX_ADDED];
  int n = 0;
  for (int i = 0; i < nextra; i++) /* PCH options must come first */
    opts[n++] = extra[i];
  for (int i = 0; i < ndefines; i++)
    opts[n++] = defines[i];
  for (int i = 0; i < nadded; i++)
    opts[n++] = added[i];
  snprintf(arch, sizeof arch, "--gpu-architecture=%s", target);
  opts[n++] = arch;
  opts[n++] = "-I" CUDA_INCLUDE;
  opts[n++] = "-include";
  opts[n++] = CUDA_INCLUDE "/cuda_fp16.h";
  opts[n++] = "-std=c++17";
  opts[n++] = "-no-source-include";
  memset(out, 0, sizeof *out);
  nvrtcProgram prog;
  double t0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID), w0 = clock_ms(CLOCK_MONOTONIC);
  if (nvrtcCreateProgram(&prog, src, name, (int)NHEADERS,
                         (const char *const *)header_text, header_names) !=
      NVRTC_SUCCESS)
    return -1;
  nvrtcResult r = nvrtcCompileProgram(prog, n, opts);
  out->ms = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - t0;
  out->wall_ms = clock_ms(CLOCK_MONOTONIC) - w0;
  out->pch_status = nvrtcGetPCHCreateStatus(prog);
  if (r != NVRTC_SUCCESS) {
    size_t len = 0;
    nvrtcGetProgramLogSize(prog, &len);
    char *log = malloc(len + 1);
    if (log && nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS)
      fprintf(stderr, "%s (%s): %s\n%s\n", name, target,
              nvrtcGetErrorString(r), log);
    free(log);
  } else if (strncmp(target, "sm_", 3) == 0 &&
             nvrtcGetCUBINSize(prog, &out->cubin_size) == NVRTC_SUCCESS &&
             (out->cubin = malloc(out->cubin_size))) {
    nvrtcGetCUBIN(prog, out->cubin);
  }
  nvrtcDestroyProgram(&prog);
  return r == NVRTC_SUCCESS ? 0 : -1;
}

static int by_value(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n)
{
  qsort(v, (size_t)n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The median of reps compiles' CPU time (*wall: of their wall time);
 * last: the last one, its code owned by the caller. */
static double timed(const char *src, const char *name, const char *target,
                    const char *const *extra, int nextra, int reps,
                    compile_out *last, double *wall)
{
  double ms[MAX_REPS], wms[MAX_REPS];
  memset(last, 0, sizeof *last);
  for (int i = 0; i < reps; i++) {
    free(last->cubin);
    if (compile(src, name, target, extra, nextra, last) != 0)
      return -1;
    ms[i] = last->ms;
    wms[i] = last->wall_ms;
  }
  if (wall)
    *wall = median(wms, reps);
  return median(ms, reps);
}

static void remove_dir(const char *dir)
{
  DIR *d = opendir(dir);
  struct dirent *e;
  char path[1024];
  while (d && (e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
  if (d)
    closedir(d);
  rmdir(dir);
}

static const char *pch_word(nvrtcResult r)
{
  switch (r) {
  case NVRTC_SUCCESS: return "made";
  case NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED: return "none";
  case NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED: return "heap";
  default: return "failed";
  }
}

/* One file's row.  arch: sm_NN[a]; its compute_ twin gives the PTX. */
static int measure(const char *path, const char *arch, int reps)
{
  char *src = embedded_source(path), compute[64], pchdir[] = "/tmp/nvrtc-pch-XXXXXX";
  const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  compile_out o, plain, pch;
  if (!src || !mkdtemp(pchdir)) {
    fprintf(stderr, "%s: cannot read it or make a PCH directory\n", path);
    free(src);
    return -1;
  }
  snprintf(compute, sizeof compute, "compute_%s", arch + 3);
  char dirop[600];
  snprintf(dirop, sizeof dirop, "--pch-dir=%s", pchdir);
  const char *syntax[] = {"-fdevice-syntax-only"};
  const char *pchopts[] = {"-pch", dirop};
  double cold = -1, cold_wall = 0;
  if (compile(src, name, arch, NULL, 0, &o) == 0)
    cold = o.ms, cold_wall = o.wall_ms;
  free(o.cubin);
  double parse = timed(src, name, arch, syntax, 1, reps, &o, NULL);
  free(o.cubin);
  double ptx = timed(src, name, compute, NULL, 0, reps, &o, NULL);
  free(o.cubin);
  double wall = 0;
  double cubin = timed(src, name, arch, NULL, 0, reps, &plain, &wall);
  if (cold < 0 || parse < 0 || ptx < 0 || cubin < 0) {
    fprintf(stderr, "%s: a compile failed (the log is above)\n", path);
    free(plain.cubin);
    free(src);
    remove_dir(pchdir);
    return -1;
  }
  double first = -1, used = -1;
  nvrtcResult made = NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED;
  int same = 0;
  if (compile(src, name, arch, pchopts, 2, &o) == 0) {
    first = o.ms;
    made = o.pch_status;
    free(o.cubin);
    used = timed(src, name, arch, pchopts, 2, reps, &pch, NULL);
    same = pch.cubin && plain.cubin && pch.cubin_size == plain.cubin_size &&
           memcmp(pch.cubin, plain.cubin, plain.cubin_size) == 0;
    free(pch.cubin);
  }
  printf("%-28s %7zu %6.0f %6.0f %8.0f %8.0f %8.0f %8.0f %8.0f %10.0f %8.0f "
         "%-6s %s\n",
         name, strlen(src), cold, cold_wall, parse, ptx - parse, cubin - ptx,
         cubin, wall, first, used, pch_word(made), same ? "same" : "DIFFERS");
  free(plain.cubin);
  free(src);
  remove_dir(pchdir);
  return 0;
}

int main(int argc, char **argv)
{
  const char *arch = "sm_90a";
  int reps = 3, first = 1, maj = 0, min = 0;
  while (first + 1 < argc && argv[first][0] == '-') {
    if (strcmp(argv[first], "--arch") == 0)
      arch = argv[first + 1];
    else if (strcmp(argv[first], "--reps") == 0)
      reps = atoi(argv[first + 1]);
    else if (strcmp(argv[first], "--define") == 0 && ndefines < MAX_DEFINES &&
             asprintf(&defines[ndefines], "-D%s", argv[first + 1]) >= 0)
      ndefines++;
    else if (strcmp(argv[first], "--option") == 0 && nadded < MAX_ADDED)
      added[nadded++] = argv[first + 1];
    else
      break;
    first += 2;
  }
  if (first >= argc || reps < 1 || reps > MAX_REPS ||
      strncmp(arch, "sm_", 3) != 0) {
    fprintf(stderr, "usage: %s [--arch sm_NN[a]] [--reps 1-%d] "
            "[--define NAME=VALUE]... [--option OPT]... KERNEL.hip...\n"
            "(run from the source tree: it reads %s)\n", argv[0], MAX_REPS,
            HIP_HEADERS);
    return 2;
  }
  if (load_headers() != 0) {
    fprintf(stderr, "cannot read %s/*.h: run from the source tree\n",
            HIP_HEADERS);
    return 1;
  }
  nvrtcVersion(&maj, &min);
  compile_out warm;
  const char *warm_src = "extern \"C\" __global__ void k(int *x) { *x = 1; }\n";
  compile(warm_src, "warm.cu", arch, NULL, 0, &warm);
  free(warm.cubin);
  printf("NVRTC %d.%d, %s, median of %d, milliseconds of CPU time (wall: "
         "the cubin's wall time)\n", maj, min, arch, reps);
  printf("%-28s %7s %6s %6s %8s %8s %8s %8s %8s %10s %8s %-6s %s\n", "file",
         "bytes", "first", "f-wall", "parse", "nvvm", "ptxas", "cubin", "wall",
         "pch-first", "pch-use", "pch", "cubin with pch");
  int rc = 0;
  for (int i = first; i < argc; i++)
    rc |= measure(argv[i], arch, reps);
  return rc ? 1 : 0;
}
