/* compile.c: in-process compilation with hipRTC (NVRTC underneath on
 * NVIDIA).  No child process: the compiler is a library call. */
#include "internal.h"

#include <fcntl.h>
#include <unistd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * hipRTC on AMD is not safe to call from two threads at once: comgr
 * parses its options into LLVM's process-wide command-line registry, so
 * two compiles at the same moment abort the process ("LLVM ERROR:
 * inconsistency in registered CommandLine options") or fail ("No
 * available targets are compatible with triple amdgcn-amd-amdhsa");
 * tests/check_reliability_many.c caught both with 8 threads of one
 * runtime.  Where the platform says so (TJ__RTC_TAKES_TURNS), compiles in
 * one process take turns; separate processes still compile in parallel.
 * Process-wide because the hazard is: the compiler is one per process.
 * NVRTC compiles run side by side.
 */
static pthread_mutex_t compiler_lock = PTHREAD_MUTEX_INITIALIZER;

/* comgr also sets the process's working directory to "/" while it
 * compiles and leaves it there: the host program's relative paths would
 * then name other files.  A compile that takes turns keeps the directory
 * it found (O_PATH: one we cannot list works too) and goes back to it;
 * no other compile runs meanwhile to see the change. */
static int turn_take(void)
{
  if (!TJ__RTC_TAKES_TURNS)
    return -1;
  pthread_mutex_lock(&compiler_lock);
  return open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static void turn_give(int here)
{
  if (!TJ__RTC_TAKES_TURNS)
    return;
  if (here >= 0) {
    (void)fchdir(here);
    close(here);
  }
  pthread_mutex_unlock(&compiler_lock);
}

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

/* The in-memory headers as hipRTC takes them, two parallel arrays: the
 * caller's, then the platform's (tj__platform_headers) but for any name
 * the caller gave itself, which wins since it was asked for. */
static int create_program(hiprtcProgram *prog, const tj__compile_input *in,
                          char **log)
{
  int np = 0, n = 0;
  const char *const *pnames, *const *pcontents;
  tj__platform_headers(&np, &pnames, &pcontents);
  size_t cap = (size_t)in->nheaders + (size_t)np + 1;
  const char **contents = calloc(cap, sizeof *contents);
  const char **names = calloc(cap, sizeof *names);
  hiprtcResult r = HIPRTC_ERROR_OUT_OF_MEMORY;
  if (contents && names) {
    for (int i = 0; i < in->nheaders; i++, n++) {
      contents[n] = in->headers[i].contents;
      names[n] = in->headers[i].name;
    }
    for (int i = 0; i < np; i++) {
      int shadowed = 0;
      for (int j = 0; j < in->nheaders && !shadowed; j++)
        shadowed = strcmp(in->headers[j].name, pnames[i]) == 0;
      if (!shadowed) {
        contents[n] = pcontents[i];
        names[n++] = pnames[i];
      }
    }
    r = hiprtcCreateProgram(prog, in->source, in->name, n, contents, names);
  }
  free(contents);
  free(names);
  if (r != HIPRTC_SUCCESS &&
      asprintf(log, "hiprtcCreateProgram: %s", hiprtcGetErrorString(r)) < 0)
    *log = NULL;
  return r == HIPRTC_SUCCESS ? TJ_OK : TJ_ECOMPILE;
}

/* Name expressions are registered in the order given (the caller sorts
 * them: the order decides the code hipRTC adds) and lowered after. */
static int add_names(hiprtcProgram prog, const tj__compile_input *in)
{
  for (int i = 0; i < in->nexprs; i++)
    if (hiprtcAddNameExpression(prog, in->exprs[i]) != HIPRTC_SUCCESS)
      return TJ_ECOMPILE;
  return TJ_OK;
}

static char **lower_names(hiprtcProgram prog, const tj__compile_input *in)
{
  char **out = calloc((size_t)in->nexprs + 1, sizeof *out);
  for (int i = 0; out && i < in->nexprs; i++) {
    const char *l = NULL;
    if (hiprtcGetLoweredName(prog, in->exprs[i], &l) == HIPRTC_SUCCESS && l)
      out[i] = strdup(l);
  }
  return out;
}

int tj__compile_module(const tj__compile_input *in, tj__compile_result *res,
                       char ***lowered)
{
  memset(res, 0, sizeof *res);
  if (lowered)
    *lowered = NULL;
  char base[2048];
  int nuser = in->noptions > 0 ? in->noptions : 0;
  const char **opts = calloc(TJ__MAX_BASE_OPTIONS + (size_t)nuser + 1, sizeof *opts);
  if (!opts)
    return TJ_ENOMEM;
  int nopts = tj__base_options(in->arch, base, sizeof base, opts);
  for (int i = 0; i < nuser; i++)
    opts[nopts++] = in->options[i];

  int here = turn_take();
  double t0 = now_ms();
  hiprtcProgram prog;
  int rc = create_program(&prog, in, &res->log);
  if (rc != TJ_OK) {
    turn_give(here);
    free(opts);
    return rc;
  }
  hiprtcResult r = add_names(prog, in) == TJ_OK
                       ? hiprtcCompileProgram(prog, nopts, opts)
                       : HIPRTC_ERROR_NAME_EXPRESSION_NOT_VALID;
  res->log = program_log(prog);
  rc = TJ_ECOMPILE;
  char why[512];
  if (r == HIPRTC_SUCCESS && !tj__compiler_libraries_hold(why, sizeof why)) {
    /* Code from another compiler than the key names is never used. */
    free(res->log);
    if (asprintf(&res->log, "%s", why) < 0)
      res->log = NULL;
  } else if (r == HIPRTC_SUCCESS) {
    rc = take_code(prog, res);
  } else if (!res->log && asprintf(&res->log, "%s", hiprtcGetErrorString(r)) < 0) {
    res->log = NULL;
  }
  if (rc == TJ_OK && lowered && in->nexprs > 0 &&
      !(*lowered = lower_names(prog, in))) {
    free(res->code);
    res->code = NULL;
    rc = TJ_ENOMEM;
  }
  res->ms = now_ms() - t0;
  hiprtcDestroyProgram(&prog);
  turn_give(here);
  free(opts);
  return rc;
}

int tj__compile(const char *source, const char *name, const char *arch,
                const char *extra_options, tj__compile_result *res)
{
  char **opts = NULL;
  int nopts = 0;
  /* Every option the key covers reaches the compiler: the array is sized
   * by the split, not a fixed maximum that would drop the rest. */
  if (tj__options_split(extra_options, &opts, &nopts) != TJ_OK) {
    memset(res, 0, sizeof *res);
    return TJ_ENOMEM;
  }
  tj__compile_input in = {source, name, arch, (const char *const *)opts,
                          nopts, NULL, 0, NULL, 0};
  int rc = tj__compile_module(&in, res, NULL);
  free(opts);
  return rc;
}
