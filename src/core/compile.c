/* compile.c: in-process compilation with hipRTC (NVRTC underneath on
 * NVIDIA).  No child process: the compiler is a library call. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * hipRTC is not safe to call from two threads at once: comgr parses its
 * options into LLVM's process-wide command-line registry, so two compiles
 * at the same moment abort the process ("LLVM ERROR: inconsistency in
 * registered CommandLine options") or fail ("No available targets are
 * compatible with triple amdgcn-amd-amdhsa").  tests/check_reliability.c
 * (case "many") caught both with 8 threads of one runtime.  So compiles in
 * one process take turns; separate processes still compile in parallel.
 * Process-wide because the hazard is: the compiler is one per process.
 */
static pthread_mutex_t compiler_lock = PTHREAD_MUTEX_INITIALIZER;

static double now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static char *program_log(hiprtcProgram prog)
{
  size_t n = 0;
  if (hiprtcGetProgramLogSize(prog, &n) != HIPRTC_SUCCESS || n <= 1)
    return NULL;
  char *log = malloc(n + 1);
  if (log && hiprtcGetProgramLog(prog, log) != HIPRTC_SUCCESS) {
    free(log);
    return NULL;
  }
  if (log)
    log[n] = '\0';
  return log;
}

static int take_code(hiprtcProgram prog, tj__compile_result *res)
{
  size_t n = 0;
  if (tj__rtc_code_size(prog, &n) != HIPRTC_SUCCESS || n == 0)
    return TJ_ECOMPILE;
  res->code = malloc(n);
  if (!res->code)
    return TJ_ENOMEM;
  if (tj__rtc_code(prog, res->code) != HIPRTC_SUCCESS) {
    free(res->code);
    res->code = NULL;
    return TJ_ECOMPILE;
  }
  res->size = n;
  return TJ_OK;
}

int tj__compile(const char *source, const char *name, const char *arch,
                const char *extra_options, tj__compile_result *res)
{
  memset(res, 0, sizeof *res);
  char base[2048];
  char **extra = NULL;
  int nextra = 0;
  /* Every option the key covers reaches the compiler: the array is sized
   * by the split, not a fixed maximum that would drop the rest. */
  if (tj__options_split(extra_options, &extra, &nextra) != TJ_OK)
    return TJ_ENOMEM;
  const char **opts = malloc((TJ__MAX_BASE_OPTIONS + (size_t)nextra) * sizeof *opts);
  if (!opts) {
    free(extra);
    return TJ_ENOMEM;
  }
  int nopts = tj__base_options(arch, base, sizeof base, opts);
  for (int i = 0; i < nextra; i++)
    opts[nopts++] = extra[i];

  pthread_mutex_lock(&compiler_lock);
  double t0 = now_ms();
  hiprtcProgram prog;
  int nheaders = 0;
  const char *const *header_names, *const *header_contents;
  tj__platform_headers(&nheaders, &header_names, &header_contents);
  /* hipRTC reads the header arrays and never writes them. */
  hiprtcResult r = hiprtcCreateProgram(&prog, source, name, nheaders,
                                       (const char **)header_contents,
                                       (const char **)header_names);
  if (r != HIPRTC_SUCCESS) {
    pthread_mutex_unlock(&compiler_lock);
    free(opts);
    free(extra);
    if (asprintf(&res->log, "hiprtcCreateProgram: %s", hiprtcGetErrorString(r)) < 0)
      res->log = NULL;
    return TJ_ECOMPILE;
  }
  r = hiprtcCompileProgram(prog, nopts, opts);
  res->log = program_log(prog);
  int rc = TJ_ECOMPILE;
  if (r == HIPRTC_SUCCESS)
    rc = take_code(prog, res);
  else if (!res->log && asprintf(&res->log, "%s", hiprtcGetErrorString(r)) < 0)
    res->log = NULL;
  res->ms = now_ms() - t0;
  hiprtcDestroyProgram(&prog);
  pthread_mutex_unlock(&compiler_lock);
  free(opts);
  free(extra);
  return rc;
}
