/*
 * cli.c: the tokitai-jit command: parse the command line (cli_options.c),
 * fit the output to the terminal, dispatch.
 * Exit 0 on success, 1 on failure, 2 on a usage error; messages on stderr
 * start with "tokitai-jit:".
 */
#include "config.h"
#include "cli_commands.h"
#include "cli_format.h"
#include "cli_options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* Colour, progress and table width follow the terminal: none of them
 * when the output goes to a file or a pipe. */
static void setup_output(cli_options *o)
{
  const char *no_color = getenv("NO_COLOR"), *term = getenv("TERM");
  int tty = isatty(STDOUT_FILENO);
  if (!o->color_when || strcmp(o->color_when, "auto") == 0)
    o->color = tty && !(no_color && *no_color) && !(term && !strcmp(term, "dumb"));
  else
    o->color = strcmp(o->color_when, "always") == 0;
  o->progress = isatty(STDERR_FILENO) && !o->quiet;
  struct winsize ws;
  if (tty)
    o->width = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col
                   ? ws.ws_col : 80;
}

static int dispatch(const cli_options *o)
{
  switch (o->command) {
  case CMD_LIST: return cli_list_cache(o);
  case CMD_STATS: return cli_stats(o);
  case CMD_INFO: return cli_info(o);
  case CMD_LIST_KERNELS: return cli_list_kernels(o);
  case CMD_WARM: return cli_warm(o);
  case CMD_RUN: return cli_run(o);
  case CMD_VERIFY: return cli_verify_cache(o);
  case CMD_EVICT: return cli_evict(o);
  case CMD_CLEAR: return cli_clear_cache(o);
  case CMD_COMPILE: return cli_compile(o);
  case CMD_EXPLAIN: return cli_explain(o);
  case CMD_MERGE: return cli_merge(o);
  case CMD_TUNE: return cli_tune(o);
  case CMD_LIST_TUNING: return cli_list_tuning(o);
  case CMD_VERSION: return cli_version(o);
  case CMD_NONE: break;
  }
  return EXIT_USAGE;
}

int main(int argc, char **argv)
{
  cli_options o;
  int rc = cli_parse_options(argc, argv, &o);
  if (rc == 0) {
    setup_output(&o);
    rc = dispatch(&o);
  } else if (rc == CLI_DONE) {
    rc = EXIT_OK;
  }
  cli_free_options(&o);
  /* A full disk or a closed pipe must not pass for success. */
  if (fflush(stdout) != 0 || ferror(stdout)) {
    cli_error("write error on standard output: %s", strerror(errno));
    rc = EXIT_FAIL;
  }
  return rc;
}
