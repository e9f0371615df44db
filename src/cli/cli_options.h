/*
 * cli_options.h: the tokitai-jit command line as the command's parts read
 * it: the program's name, its exit statuses, the parsed options
 * (cli_options.c parses and checks them), and the parsers of the values
 * that options take.  The ground floor of the command: it includes only
 * the public header.
 */
#ifndef TJ_CLI_OPTIONS_H
#define TJ_CLI_OPTIONS_H

#include <stdint.h>

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
  CMD_LIST_TUNING,
  CMD_EXPLAIN,
  CMD_VERSION
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
  int all;                         /* --all: --info and --list-kernels
                                      show the configurations too */
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
  const char *explain;             /* --explain KERNEL (or FILE) */
  const char *tune_op;             /* --tune OP */
  int shapes[CLI_MAX_SHAPES][3];   /* --shape MxNxK */
  int nshapes;
  /* The GEMM family's configuration, for --run gemm and --warm gemm:
   * TJ_DTYPE_* of A and B (--dtype) and of C (--c-dtype; 0: A's),
   * --layout's transposes, TJ_EPILOGUE_* (--epilogue), and whether the
   * optional outputs are written (--aux, --bias-grad). */
  int gemm_ab_type, gemm_c_type;
  int gemm_trans_a, gemm_trans_b;
  int gemm_epilogue;
  int gemm_aux, gemm_bias_grad;
  /* grouped_gemm: TJ_GROUPED_M or _K (--grouped), the groups
   * (--groups), and for --run the routing (--routing). */
  int gemm_grouped;
  int64_t gemm_groups;
  int gemm_skewed;                 /* --routing skewed */
} cli_options;

/* What --run and --warm take for the GEMM family's one call, tj_gemm,
 * and for tj_grouped_gemm. */
#define CLI_GEMM "gemm"
#define CLI_GROUPED_GEMM "grouped_gemm"
/* cli_gemm_command's answers. */
#define CLI_GEMM_PLAIN 1
#define CLI_GEMM_GROUPED 2
/* --groups without the option. */
#define CLI_GROUPED_DEFAULT_GROUPS 8
/* The shape --run gemm and --warm gemm use without --shape. */
#define CLI_GEMM_DEFAULT_SIZE 512

/* What cli_parse_options returns for --help, which it has printed: stop,
 * and exit 0. */
#define CLI_DONE 256

/* Parse and check argv into o.  0: run o->command; CLI_DONE; or EXIT_USAGE,
 * with the message on stderr.  --version is the command CMD_VERSION,
 * whatever else the line asks for.  Whatever it returns, free o with
 * cli_free_options. */
int cli_parse_options(int argc, char **argv, cli_options *o);
/* Free what parsing allocated (o->defines). */
void cli_free_options(cli_options *o);
/* The runtime options the command's flags ask for: the device, the cache
 * and its flags; an arch (not NULL) is a compile-only runtime for it. */
tj_options cli_runtime_options(const cli_options *o, const char *arch);
/* Whether the command is the GEMM family's: CLI_GEMM_PLAIN for --run
 * gemm and --warm gemm, CLI_GEMM_GROUPED for --run grouped_gemm and
 * --warm grouped_gemm, else 0. */
int cli_gemm_command(const cli_options *o);
/* The processors online (at most 256): --jobs's default. */
unsigned cli_default_jobs(void);

/* "30d", "12h", "90" (seconds).  0 on success, -1 when malformed, -2
 * when too large. */
int cli_parse_duration(const char *s, int64_t *seconds);
/* "500M", "2G", "1.5GiB", "10MB", "4096".  K, M, G, T and KiB... are
 * powers of 1024; KB, MB... powers of 1000.  0, -1 or -2 as above. */
int cli_parse_size(const char *s, uint64_t *bytes);
/* A non-negative decimal integer that fits in max. */
int cli_parse_uint(const char *s, uint64_t max, uint64_t *out);

#endif
