/*
 * fuzz_cli.c: libFuzzer harness for the tokitai-jit command line: the
 * option parser (cli_parse_options, src/cli/cli_options.c) and its value
 * parsers (sizes, durations, whole numbers), linked as the program links
 * them.
 *
 * The input is split at NUL bytes into up to 32 arguments after the program
 * name.  Checked on every input: the parser ends with 0 (go on), done
 * (--help) or a usage error and nothing else; when it goes on to a
 * command other than --version (which prints whatever else is given),
 * the options are consistent (one command, at most CLI_MAX_ARCHS archs and
 * only where a command takes them, the operands inside argv and only for
 * --warm, --json not with a command that prints no report, --explain with
 * a name).  The value parsers return 0, -1 or -2 and stay within
 * their bounds.  Commands are never run.
 */
#include "cli_options.h"

#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ARGS 33

static void check_parsed(const cli_options *o, int argc, char **argv)
{
  if (o->command == CMD_VERSION)
    return;
  if (o->command == CMD_NONE || o->narchs < 0 || o->narchs > CLI_MAX_ARCHS)
    abort();
  for (int i = 0; i < o->narchs; i++)
    if (!o->archs[i])
      abort();
  if (o->nkernels < 0 || o->kernels < argv || o->kernels + o->nkernels > argv + argc)
    abort();
  /* The words after --warm are kernels; after --merge, cache files. */
  if (o->nkernels && o->command != CMD_WARM && o->command != CMD_MERGE)
    abort();
  if (o->command == CMD_MERGE && (o->nkernels == 0 || o->json))
    abort();
  if (o->narchs && o->command != CMD_WARM && o->command != CMD_COMPILE &&
      o->command != CMD_EXPLAIN)
    abort();
  if (o->command == CMD_EXPLAIN && (!o->explain || !*o->explain))
    abort();
  if (o->json && (o->command == CMD_WARM || o->command == CMD_CLEAR ||
                  o->command == CMD_EVICT))
    abort();
  if (o->all && o->command != CMD_INFO && o->command != CMD_LIST_KERNELS)
    abort();
  if (o->command == CMD_RUN && !o->run_kernel)
    abort();
  if (o->command == CMD_EVICT && o->max_age < 0 && o->max_size == 0)
    abort();
  if (o->cache_path && !*o->cache_path)
    abort();
}

static void check_value_parsers(const char *s)
{
  uint64_t u = 0, max = (uint64_t)strlen(s) * 1000;
  int64_t secs = 0;
  int rc = cli_parse_uint(s, max, &u);
  if (rc < -2 || rc > 0 || (rc == 0 && u > max))
    abort();
  rc = cli_parse_duration(s, &secs);
  if (rc < -2 || rc > 0 || (rc == 0 && secs < 0))
    abort();
  rc = cli_parse_size(s, &u);
  if (rc < -2 || rc > 0)
    abort();
}

/* Run the parser with stdout and stderr sent nowhere: --help and usage
 * errors print, and the fuzzer's own output must stay readable. */
static int parse_quietly(int argc, char **argv, cli_options *o)
{
  static int null_fd = -1, saved_out = -1, saved_err = -1;
  if (null_fd < 0) {
    null_fd = open("/dev/null", O_WRONLY);
    saved_out = dup(STDOUT_FILENO);
    saved_err = dup(STDERR_FILENO);
  }
  fflush(stdout);
  dup2(null_fd, STDOUT_FILENO);
  dup2(null_fd, STDERR_FILENO);
  optind = 0; /* GNU getopt: start over, state and all */
  int rc = cli_parse_options(argc, argv, o);
  fflush(stdout);
  fflush(stderr);
  dup2(saved_out, STDOUT_FILENO);
  dup2(saved_err, STDERR_FILENO);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *buf = malloc(size + 1);
  char *argv[MAX_ARGS + 1];
  int argc = 0;
  if (!buf)
    return 0;
  memcpy(buf, data, size);
  buf[size] = '\0';
  argv[argc++] = (char *)PROGRAM;
  for (size_t at = 0; at <= size && argc < MAX_ARGS; at += strlen(buf + at) + 1)
    argv[argc++] = buf + at;
  argv[argc] = NULL;
  check_value_parsers(buf);

  cli_options o;
  int rc = parse_quietly(argc, argv, &o);
  if (rc != 0 && rc != CLI_DONE && rc != EXIT_USAGE)
    abort();
  if (rc == 0)
    check_parsed(&o, argc, argv);
  cli_free_options(&o); /* as main() does */
  free(buf);
  return 0;
}
