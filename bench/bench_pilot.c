/* bench_pilot.c: the pilots' way (a process per call, decimal fp16 bit
 * patterns over pipes) against tokitai-jit's host-buffer call, end to end,
 * for the same GELU backward at n = 2^20.  The child process is the
 * baseline being measured; it exists only here, in bench/. */
#include "bench.h"

#include <errno.h>
#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

static void write_all(int fd, const char *buf, size_t len)
{
  while (len) {
    ssize_t w = write(fd, buf, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      die("pilot: write to child failed");
    buf += w;
    len -= (size_t)w;
  }
}

static char *format_input(const uint16_t *g, const uint16_t *x, size_t n, size_t *len)
{
  char *text = malloc(16 + n * 2 * 7), *p = text;
  p += sprintf(p, "%zu\n", n);
  for (size_t i = 0; i < n; i++)
    p += sprintf(p, "%u\n", g[i]);
  for (size_t i = 0; i < n; i++)
    p += sprintf(p, "%u\n", x[i]);
  *len = (size_t)(p - text);
  return text;
}

/* One call the pilots' way: spawn, write the text, read and parse the
 * answer, wait.  Returns 0 when n values came back. */
static int pilot_call(const char *pilot, const uint16_t *g, const uint16_t *x,
                      uint16_t *out, size_t n)
{
  int in[2], res[2];
  if (pipe(in) || pipe(res))
    die("pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, res[1], 1);
  posix_spawn_file_actions_addclose(&fa, in[1]);
  posix_spawn_file_actions_addclose(&fa, res[0]);
  char *argv[] = {(char *)pilot, NULL};
  pid_t pid;
  if (posix_spawn(&pid, pilot, &fa, NULL, argv, environ) != 0)
    die("cannot run %s", pilot);
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(res[1]);
  size_t len;
  char *text = format_input(g, x, n, &len);
  write_all(in[1], text, len); /* the child reads all before it writes */
  close(in[1]);
  free(text);
  FILE *f = fdopen(res[0], "r");
  size_t got = 0;
  unsigned v;
  while (got < n && fscanf(f, "%u", &v) == 1)
    out[got++] = (uint16_t)v;
  fclose(f);
  int status = 0;
  waitpid(pid, &status, 0);
  return got == n && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

void bench_pilot(tj_runtime *rt, const char *pilot, bench_record_fn record)
{
  if (!pilot) {
    printf("pilots' way: skipped (no --pilot PATH given)\n");
    return;
  }
  size_t n = 1u << 20;
  printf("pilots' way vs host-buffer call, gelu_bwd_f16, n = %zu, end to end\n", n);
  uint16_t *g = malloc(n * 2), *x = malloc(n * 2), *ours = malloc(n * 2), *theirs = malloc(n * 2);
  uint64_t s = 12345;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    g[i] = tj_f32_to_f16((float)((s >> 11) * 0x1.0p-53 * 2.0 - 1.0));
    x[i] = tj_f32_to_f16((float)((s & 0xffff) / 65535.0 * 12.0 - 6.0));
  }
  enum { RUNS = 5 };
  double tj_ms[RUNS], pilot_ms[RUNS];
  for (int r = 0; r < RUNS; r++) {
    double t0 = bench_now_ms();
    if (tj_gelu_bwd_f16_host(rt, g, n, x, n, ours, n) != TJ_OK)
      die("tj_gelu_bwd_f16_host: %s", tj_errmsg(rt));
    tj_ms[r] = bench_now_ms() - t0;
    t0 = bench_now_ms();
    if (pilot_call(pilot, g, x, theirs, n) != 0)
      die("the pilot executable failed");
    pilot_ms[r] = bench_now_ms() - t0;
  }
  size_t differ = 0;
  for (size_t i = 0; i < n; i++) {
    int d = (int)ours[i] - (int)theirs[i];
    differ += d > 1 || d < -1; /* more than one ulp apart */
  }
  double t = bench_median(tj_ms, RUNS), p = bench_median(pilot_ms, RUNS);
  record("pilot", "tokitai-jit host call (median)", t, "ms");
  record("pilot", "pilot process per call (median)", p, "ms");
  record("pilot", "pilot / tokitai-jit", p / t, "x");
  record("pilot", "outputs more than 1 ulp apart", (double)differ, "");
  free(g); free(x); free(ours); free(theirs);
}
