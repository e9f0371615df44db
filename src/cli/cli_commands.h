/*
 * cli_commands.h: the commands of tokitai-jit, one function each, that
 * main (cli.c) dispatches to; each returns the exit status.
 *   cli_cache.c   the commands that read, trim or merge cache files
 *   cli_gpu.c     the commands that need the compiler or a GPU: --info,
 *                 --list-kernels, --warm, --run; and --version
 *   cli_compile.c --compile: a program's own kernels into the cache;
 *                 --explain: why a kernel or module is not cached
 *   cli_tune.c    --tune and --list-tuning: the tuning decisions
 *   cli_gemm.c    --warm gemm and grouped_gemm, and the calls that
 *                 --run gemm and grouped_gemm check
 * They share cli_format.h (output) and cli_jobs.h (compiles on several
 * cores), and read the command line as cli_options.h parses it.
 */
#ifndef TJ_CLI_COMMANDS_H
#define TJ_CLI_COMMANDS_H

#include "cli_options.h"

int cli_list_cache(const cli_options *o);
int cli_stats(const cli_options *o);
int cli_verify_cache(const cli_options *o);
int cli_evict(const cli_options *o);
int cli_clear_cache(const cli_options *o);
int cli_merge(const cli_options *o);

int cli_version(const cli_options *o);
int cli_info(const cli_options *o);
int cli_list_kernels(const cli_options *o);
int cli_warm(const cli_options *o);
int cli_run(const cli_options *o);

int cli_compile(const cli_options *o);
int cli_explain(const cli_options *o);

/* cli_gemm.c: the GEMM family's call.  cli_gemm_desc: the tj_gemm_desc
 * of the options and shape number shape, for tj_verify_gemm (pointers
 * NULL, aux and bias_grad set where the options ask for them). */
void cli_gemm_desc(const cli_options *o, int shape, tj_gemm_desc *d);
/* The same for the grouped call (offs NULL), and the offsets --routing
 * asks for over the shape's grouped total (malloc'd; NULL when out of
 * memory). */
void cli_grouped_desc(const cli_options *o, int shape,
                      tj_grouped_gemm_desc *g);
int32_t *cli_grouped_routing(const cli_options *o, int shape);
int cli_warm_gemm(const cli_options *o);

int cli_tune(const cli_options *o);
int cli_list_tuning(const cli_options *o);

#endif
