/*
 * cli.h: what the parts of the tokitai-jit command share.
 *   cli.c         main: output set-up and dispatch
 *   cli_options.c the command line: parsing and checking, help and version
 *   cli_format.c  parsing sizes and durations; sizes, times, tables and
 *                 JSON strings for output
 *   cli_cache.c   the commands that read, trim or merge cache files
 *   cli_gpu.c     the commands that need the compiler or a GPU: --info,
 *                 --list-kernels, --warm, --run
 *   cli_compile.c --compile: a program's own kernels into the cache
 *   cli_jobs.c    the compiles of --warm and --compile on several cores
 *   cli_tune.c    --tune and --list-tuning: the tuning decisions
 */
#ifndef TJ_CLI_H
#define TJ_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "tokitai-jit.h"

#define PROGRAM "tokitai-jit"

/* Exit statuses, as GNU programs use them. */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

#define CLI_MAX_ARCHS 32
#define CLI_MAX_ENTRIES 256       /* --entry */
#define CLI_MAX_COMPILE_ARGS 256  /* -I DIR (two), -D, --option */
#define CLI_MAX_SHAPES 64         /* --shape */

typedef enum cli_command {
  CMD_NONE,
  CMD_LIST,
  CMD_STATS,
  CMD_INFO,
  CMD_LIST_KERNELS,
  CMD_WARM,
  CMD_RUN,
  CMD_VERIFY,
  CMD_EVICT,
  CMD_CLEAR,
  CMD_COMPILE,
  CMD_MERGE,
  CMD_TUNE,
  CMD_LIST_TUNING
} cli_command;

/* The parsed command line; built once in main, read-only after. */
typedef struct cli_options {
  cli_command command;
  const char *cache_path;          /* --cache; NULL: the library's default */
  unsigned cache_flags;            /* TJ_CACHE_GROUP with --group */
  int system;                      /* --system: read --cache as a system
                                      cache (TJ_CACHE_SYSTEM) */
  const char *archs[CLI_MAX_ARCHS];
  int narchs;
  char **kernels;                  /* --warm operands; --merge's files */
  int nkernels;
  const char *run_kernel;
  uint64_t n;                      /* --n; 0: the kernel's default */
  uint64_t seed;
  int device;
  int json;
  int repair;
  int64_t max_age;                 /* --evict-older-than; -1: none */
  uint64_t max_size;               /* --max-size; 0: none */
  const char *color_when;          /* --color's WHEN; NULL: auto */
  int color;                       /* ANSI styles on stdout */
  int progress;                    /* stderr is a terminal, and no --quiet */
  int quiet;                       /* --quiet */
  unsigned jobs;                   /* -j, --jobs; default: online cores */
  int width;                       /* terminal columns; 0: not a terminal */
  const char *compile_file;        /* --compile FILE */
  const char *entries[CLI_MAX_ENTRIES];
  int nentries;
  const char *compile_args[CLI_MAX_COMPILE_ARGS]; /* in command-line order */
  int ncompile_args;
  char *defines[CLI_MAX_COMPILE_ARGS]; /* "-DNAME" strings and absolute -I
                                       * directories, malloc'd */
  int ndefines;
  const char *tune_op;             /* --tune OP */
  int shapes[CLI_MAX_SHAPES][3];   /* --shape MxNxK */
  int nshapes;
} cli_options;

/* ------------------------------------------------------------ cli.c */

/* "tokitai-jit: " and the message on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------ cli_options.c */

/* What cli_parse_options returns for --help and --version, which it has
 * printed: stop, and exit 0. */
#define CLI_DONE 256

/* Parse and check argv into o.  0: run o->command; CLI_DONE; or EXIT_USAGE,
 * with the message on stderr.  Whatever it returns, free o with
 * cli_free_options. */
int cli_parse_options(int argc, char **argv, cli_options *o);
/* Free what parsing allocated (o->defines). */
void cli_free_options(cli_options *o);
/* The runtime options the command's flags ask for: the device, the cache
 * and its flags; an arch (not NULL) is a compile-only runtime for it. */
tj_options cli_runtime_options(const cli_options *o, const char *arch);
/* The processors online (at most 256): --jobs's default. */
unsigned cli_default_jobs(void);

/* ------------------------------------------------------------ cli_format.c */

/* "30d", "12h", "90" (seconds).  0 on success, -1 when malformed, -2
 * when too large. */
int cli_parse_duration(const char *s, int64_t *seconds);
/* "500M", "2G", "1.5GiB", "10MB", "4096".  K, M, G, T and KiB... are
 * powers of 1024; KB, MB... powers of 1000.  0, -1 or -2 as above. */
int cli_parse_size(const char *s, uint64_t *bytes);
/* A non-negative decimal integer that fits in max. */
int cli_parse_uint(const char *s, uint64_t max, uint64_t *out);

void cli_format_size(uint64_t bytes, char *buf, size_t len); /* "1.2 MiB" */
void cli_format_ms(double ms, char *buf, size_t len);        /* "850 ms" */
void cli_format_time(int64_t unix_seconds, char *buf, size_t len);
/* s as a JSON string literal, quotes included; bytes that are not UTF-8
 * become U+FFFD so that the output always parses. */
void cli_json_string(FILE *f, const char *s);
/* s (NULL: "") for a terminal: control characters and bytes that are not
 * UTF-8 as \xNN.  cli_text: malloc'd, NULL without memory; cli_text_in:
 * into buf (cut to len), which it returns.  Every stored string a text
 * listing prints goes through one of them (table cells do). */
char *cli_text(const char *s);
const char *cli_text_in(char *buf, size_t len, const char *s);

/* sgr (one of the STYLE_ sequences) when colour is on, else "". */
#define STYLE_BOLD "\033[1m"
#define STYLE_RED "\033[31m"
#define STYLE_GREEN "\033[32m"
#define STYLE_RESET "\033[0m"
const char *cli_style(const cli_options *o, const char *sgr);

/* "label            value" lines for --stats and --info. */
void cli_field(const char *label, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A table of strings printed with aligned columns. */
typedef struct cli_table cli_table;
/* align: one 'l' or 'r' per column. */
cli_table *cli_table_new(int ncols, const char *const *headers,
                         const char *align);
int cli_table_add(cli_table *t, const char *const *cells); /* copies */
/* On a terminal narrower than the table, column `shrink` is cut to fit. */
void cli_table_print(const cli_table *t, const cli_options *o, int shrink);
void cli_table_free(cli_table *t);

/* ------------------------------------------------------------ commands */

int cli_list_cache(const cli_options *o);
int cli_stats(const cli_options *o);
int cli_verify_cache(const cli_options *o);
int cli_evict(const cli_options *o);
int cli_clear_cache(const cli_options *o);
int cli_merge(const cli_options *o);

int cli_info(const cli_options *o);
int cli_list_kernels(const cli_options *o);
int cli_warm(const cli_options *o);
int cli_run(const cli_options *o);
int cli_compile(const cli_options *o);
int cli_tune(const cli_options *o);
int cli_list_tuning(const cli_options *o);

/* ------------------------------------------------------------ cli_jobs.c */

/* What one job (one compile) hands back; out and err are malloc'd text
 * (err: the message, without the program's name) or NULL. */
typedef struct cli_job_result {
  int status;                      /* TJ_OK or a TJ_ code */
  int origin;                      /* TJ_FROM_CACHE or TJ_FROM_COMPILER */
  double compile_ms;
  char key[33];
  char *out, *err;
} cli_job_result;
void cli_job_result_free(cli_job_result *r);

/* Run job i for arch into *res.  in_worker: in a worker process, which
 * must open its own compile-only runtime for arch; else in the command,
 * on the runtimes it opened. */
typedef void (*cli_job_fn)(void *ctx, size_t job, const char *arch,
                           int in_worker, cli_job_result *res);

typedef struct cli_jobs {
  size_t njobs;
  cli_job_fn run;
  const char *(*arch)(void *ctx, size_t job);   /* what the job compiles for */
  void (*label)(void *ctx, size_t job, char *buf, size_t len); /* "gelu_f16
                                                  * for gfx90a", for progress */
  void *ctx;
  /* The jobs run are first to njobs - 1: a later call takes up where an
   * earlier one stopped (--warm compiles each file before the entries
   * that come with it); progress counts from first. */
  size_t first;
} cli_jobs;

typedef struct cli_pool cli_pool;
/* Fork min(o->jobs, njobs) workers (none when that is under 2), before
 * the command opens a runtime: a worker runs run on ctx as it was at the
 * fork, and worker_exit (may be NULL) when it has no more work.  NULL
 * only when out of memory. */
cli_pool *cli_pool_start(const cli_options *o, size_t njobs, cli_job_fn run,
                         void (*worker_exit)(void *ctx), void *ctx);
/* Every job from jobs->first, in the workers or (without any) here, each
 * result in res[i] whatever the order they finish in; a progress line on
 * a terminal. */
void cli_pool_run(cli_pool *p, const struct cli_jobs *jobs, cli_job_result *res);
/* How many workers p has: 0 when the jobs run in the command itself. */
int cli_pool_workers(const cli_pool *p);
/* Stop and reap the workers; free p.  NULL is a no-op. */
void cli_pool_finish(cli_pool *p);

#endif
