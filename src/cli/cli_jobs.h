/*
 * cli_jobs.h: the compiles of --warm and --compile on several cores: a
 * pool of worker processes forked before the command opens a runtime
 * (cli_jobs.c).
 */
#ifndef TJ_CLI_JOBS_H
#define TJ_CLI_JOBS_H

#include <stddef.h>

#include "cli_options.h"

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
  /* NULL, or the job numbers to run: position p (first to njobs - 1)
   * runs job ids[p], whose result goes to res[ids[p]]. */
  const size_t *ids;
} cli_jobs;

typedef struct cli_pool cli_pool;
/* Fork min(o->jobs, njobs) workers (none when that is under 2), before
 * the command opens a runtime: a worker runs run on ctx as it was at the
 * fork, and worker_exit (may be NULL) when it has no more work.  NULL
 * only when out of memory. */
cli_pool *cli_pool_start(const cli_options *o, size_t njobs, cli_job_fn run,
                         void (*worker_exit)(void *ctx), void *ctx);
/* Every job from jobs->first, in the workers or (without any) here, each
 * result in res[i] (res[ids[i]]) whatever the order they finish in; a
 * progress line on a terminal. */
void cli_pool_run(cli_pool *p, const struct cli_jobs *jobs, cli_job_result *res);
/* How many workers p has: 0 when the jobs run in the command itself. */
int cli_pool_workers(const cli_pool *p);
/* Stop and reap the workers; free p.  NULL is a no-op. */
void cli_pool_finish(cli_pool *p);

#endif
