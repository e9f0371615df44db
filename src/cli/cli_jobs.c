/*
 * cli_jobs.c: run the compiles of --warm and --compile on several cores.
 *
 * Why processes and not threads: the library compiles one program at a
 * time per process (comgr keeps its options in LLVM's process-wide
 * registry, so hipRTC may not run twice at once in one process; see
 * src/core/compile.c), so threads sharing one process would take turns.
 * Separate processes compile in parallel and share the cache file, which
 * is made for that.  The workers are forked before the command opens any
 * runtime: nothing that must not cross a fork (a GPU context, an open
 * SQLite connection, a thread) exists yet.  A worker opens its own
 * compile-only runtime for the arch each job names, so that a machine's
 * GPU is initialised only in the command itself.
 *
 * The library never spawns anything; this is the command's choice, as a
 * build tool's -j is.
 */
#include "config.h"
#include "cli_jobs.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 256

/* What the command sends a worker: a job, and the arch it compiles for. */
typedef struct job_msg {
  uint32_t job;
  char arch[256];
} job_msg;

/* A worker's answer, followed by out_len and err_len bytes of text. */
typedef struct reply_msg {
  uint32_t job;
  int32_t status, origin;
  double compile_ms;
  char key[33];
  uint32_t out_len, err_len;
} reply_msg;

typedef struct worker {
  pid_t pid;
  int to, from;    /* job pipe (write end), reply pipe (read end) */
  long job;        /* the job it is running, -1: idle */
} worker;

struct cli_pool {
  const cli_options *o;
  cli_job_fn run;
  void (*worker_exit)(void *ctx);
  void *ctx;
  worker w[MAX_WORKERS];
  int nworkers;
};

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int write_all(int fd, const void *buf, size_t len)
{
  const char *p = buf;
  while (len) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* 0: all read; 1: end of file before the first byte; -1: error or a
 * short read. */
static int read_all(int fd, void *buf, size_t len)
{
  char *p = buf;
  size_t got = 0;
  while (got < len) {
    ssize_t n = read(fd, p + got, len - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return n == 0 && got == 0 ? 1 : -1;
    got += (size_t)n;
  }
  return 0;
}

void cli_job_result_free(cli_job_result *r)
{
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}

/* ------------------------------------------------------------ worker */

static int send_reply(int fd, uint32_t job, const cli_job_result *r)
{
  reply_msg m;
  memset(&m, 0, sizeof m);
  m.job = job;
  m.status = r->status;
  m.origin = r->origin;
  m.compile_ms = r->compile_ms;
  memcpy(m.key, r->key, sizeof m.key);
  m.out_len = r->out ? (uint32_t)strlen(r->out) : 0;
  m.err_len = r->err ? (uint32_t)strlen(r->err) : 0;
  if (write_all(fd, &m, sizeof m) != 0 ||
      write_all(fd, r->out ? r->out : "", m.out_len) != 0 ||
      write_all(fd, r->err ? r->err : "", m.err_len) != 0)
    return -1;
  return 0;
}

static void worker_main(cli_pool *p, int from, int to)
{
  job_msg m;
  while (read_all(from, &m, sizeof m) == 0) {
    cli_job_result r;
    memset(&r, 0, sizeof r);
    m.arch[sizeof m.arch - 1] = '\0';
    p->run(p->ctx, m.job, m.arch, 1, &r);
    int bad = send_reply(to, m.job, &r);
    cli_job_result_free(&r);
    if (bad)
      break;
  }
  if (p->worker_exit)
    p->worker_exit(p->ctx); /* closes its runtimes: records their hits */
  /* _exit: the command's stdio buffers and atexit handlers are its own. */
  _exit(0);
}

static int start_worker(cli_pool *p, worker *w)
{
  int jobs[2], replies[2];
  if (pipe(jobs) != 0)
    return -1;
  if (pipe(replies) != 0) {
    close(jobs[0]);
    close(jobs[1]);
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(jobs[1]);
    close(replies[0]);
    for (int i = 0; i < p->nworkers; i++) { /* the earlier workers' pipes */
      close(p->w[i].to);
      close(p->w[i].from);
    }
    worker_main(p, jobs[0], replies[1]);
  }
  close(jobs[0]);
  close(replies[1]);
  if (pid < 0) {
    close(jobs[1]);
    close(replies[0]);
    return -1;
  }
  w->pid = pid;
  w->to = jobs[1];
  w->from = replies[0];
  w->job = -1;
  return 0;
}

cli_pool *cli_pool_start(const cli_options *o, size_t njobs, cli_job_fn run,
                         void (*worker_exit)(void *ctx), void *ctx)
{
  cli_pool *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->o = o;
  p->run = run;
  p->worker_exit = worker_exit;
  p->ctx = ctx;
  size_t want = o->jobs < njobs ? o->jobs : njobs;
  if (want > MAX_WORKERS)
    want = MAX_WORKERS;
  if (want < 2)
    return p; /* in this process */
  fflush(stdout);
  fflush(stderr);
  while ((size_t)p->nworkers < want && start_worker(p, &p->w[p->nworkers]) == 0)
    p->nworkers++;
  /* Fewer workers than asked (no processes left): the work still gets
   * done, by those there are, or here. */
  return p;
}

int cli_pool_workers(const cli_pool *p)
{
  return p ? p->nworkers : 0;
}

static void stop_worker(worker *w, int *status)
{
  if (w->to >= 0)
    close(w->to);
  if (w->from >= 0)
    close(w->from);
  w->to = w->from = -1;
  while (waitpid(w->pid, status, 0) < 0 && errno == EINTR)
    ;
}

void cli_pool_finish(cli_pool *p)
{
  if (!p)
    return;
  for (int i = 0; i < p->nworkers; i++)
    if (p->w[i].pid > 0) {
      int status;
      stop_worker(&p->w[i], &status);
      p->w[i].pid = 0;
    }
  free(p);
}

/* ------------------------------------------------------------ progress */

typedef struct progress {
  const cli_options *o;
  const cli_jobs *jobs;
  double t0;
  int shown;
} progress;

/* One line on stderr, rewritten in place: done/total, a job still
 * running (kernel and arch), the time so far. */
static void progress_show(progress *g, size_t done, long running)
{
  if (!g->o->progress)
    return;
  char label[300] = "";
  if (running >= 0)
    g->jobs->label(g->jobs->ctx, (size_t)running, label, sizeof label);
  fprintf(stderr, "\r\033[K[%zu/%zu] %s%s%.1f s", done, g->jobs->njobs, label,
          label[0] ? ", " : "", now_s() - g->t0);
  fflush(stderr);
  g->shown = 1;
}

static void progress_clear(progress *g)
{
  if (g->shown)
    fputs("\r\033[K", stderr);
  g->shown = 0;
}

/* ------------------------------------------------------------ the command's side */

/* The job number at position i of jobs. */
static size_t job_at(const cli_jobs *jobs, size_t i)
{
  return jobs->ids ? jobs->ids[i] : i;
}

static void run_one_here(const cli_jobs *jobs, size_t i, cli_job_result *res)
{
  size_t job = job_at(jobs, i);
  jobs->run(jobs->ctx, job, jobs->arch(jobs->ctx, job), 0, &res[job]);
}

static void run_here(cli_pool *p, const cli_jobs *jobs, cli_job_result *res)
{
  progress g = {p->o, jobs, now_s(), 0};
  for (size_t i = jobs->first; i < jobs->njobs; i++) {
    progress_show(&g, i, (long)job_at(jobs, i));
    run_one_here(jobs, i, res);
  }
  progress_clear(&g);
}

static int send_job(worker *w, const cli_jobs *jobs, size_t i)
{
  job_msg m;
  size_t job = job_at(jobs, i);
  memset(&m, 0, sizeof m);
  m.job = (uint32_t)job;
  snprintf(m.arch, sizeof m.arch, "%s", jobs->arch(jobs->ctx, job));
  if (write_all(w->to, &m, sizeof m) != 0)
    return -1;
  w->job = (long)job;
  return 0;
}

static char *read_text(int fd, uint32_t len)
{
  if (len == 0)
    return NULL;
  char *s = malloc((size_t)len + 1);
  if (s && read_all(fd, s, len) != 0) {
    free(s);
    return NULL;
  }
  if (s)
    s[len] = '\0';
  return s;
}

/* The worker's answer into res[job], for the job it was sent; -1 when it
 * died instead. */
static int take_reply(worker *w, cli_job_result *res)
{
  reply_msg m;
  if (read_all(w->from, &m, sizeof m) != 0 || w->job < 0 ||
      m.job != (uint32_t)w->job)
    return -1;
  cli_job_result *r = &res[m.job];
  r->status = m.status;
  r->origin = m.origin;
  r->compile_ms = m.compile_ms;
  memcpy(r->key, m.key, sizeof r->key);
  r->key[sizeof r->key - 1] = '\0';
  r->out = read_text(w->from, m.out_len);
  r->err = read_text(w->from, m.err_len);
  if ((m.out_len && !r->out) || (m.err_len && !r->err))
    return -1;
  w->job = -1;
  return 0;
}

/* A worker that died or broke its pipe: its job fails with why, and it
 * takes no more. */
static void lose_worker(worker *w, const cli_jobs *jobs, cli_job_result *res)
{
  int status = 0;
  long job = w->job;
  stop_worker(w, &status);
  w->pid = 0;
  w->job = -1;
  if (job < 0)
    return;
  char label[300];
  jobs->label(jobs->ctx, (size_t)job, label, sizeof label);
  cli_job_result *r = &res[job];
  cli_job_result_free(r);
  r->status = TJ_ECOMPILE;
  if (WIFSIGNALED(status)) {
    if (asprintf(&r->err, "%s: the worker process died of signal %d (%s)",
                 label, WTERMSIG(status), strsignal(WTERMSIG(status))) < 0)
      r->err = NULL;
  } else if (asprintf(&r->err, "%s: the worker process ended without an "
                      "answer (exit status %d)", label,
                      WIFEXITED(status) ? WEXITSTATUS(status) : -1) < 0) {
    r->err = NULL;
  }
}

static long oldest_running(const cli_pool *p)
{
  long j = -1;
  for (int i = 0; i < p->nworkers; i++)
    if (p->w[i].pid > 0 && p->w[i].job >= 0 && (j < 0 || p->w[i].job < j))
      j = p->w[i].job;
  return j;
}

/* Hand out jobs in order to idle workers; wait for any answer; again. */
static void run_in_workers(cli_pool *p, const cli_jobs *jobs,
                           cli_job_result *res)
{
  progress g = {p->o, jobs, now_s(), 0};
  size_t next = jobs->first, done = jobs->first;
  struct pollfd fds[MAX_WORKERS];
  int who[MAX_WORKERS];
  while (done < jobs->njobs) {
    int alive = 0, nfds = 0;
    for (int i = 0; i < p->nworkers; i++) {
      worker *w = &p->w[i];
      if (w->pid <= 0)
        continue;
      if (w->job < 0 && next < jobs->njobs && send_job(w, jobs, next) == 0)
        next++;
      else if (w->job < 0 && next < jobs->njobs)
        lose_worker(w, jobs, res);
      if (w->pid <= 0)
        continue;
      alive++;
      if (w->job >= 0) {
        fds[nfds] = (struct pollfd){w->from, POLLIN, 0};
        who[nfds++] = i;
      }
    }
    if (!alive) { /* every worker is gone: the rest is done here */
      progress_clear(&g);
      for (; next < jobs->njobs; next++, done++)
        run_one_here(jobs, next, res);
      break;
    }
    progress_show(&g, done, oldest_running(p));
    int n = poll(fds, (nfds_t)nfds, p->o->progress ? 100 : -1);
    for (int k = 0; n > 0 && k < nfds; k++) {
      if (!fds[k].revents)
        continue;
      worker *w = &p->w[who[k]];
      if (take_reply(w, res) != 0)
        lose_worker(w, jobs, res);
      done++;
    }
  }
  progress_clear(&g);
}

void cli_pool_run(cli_pool *p, const cli_jobs *jobs, cli_job_result *res)
{
  for (size_t i = jobs->first; i < jobs->njobs; i++)
    memset(&res[i], 0, sizeof res[i]);
  if (p->nworkers == 0) {
    run_here(p, jobs, res);
    return;
  }
  /* A worker that dies must not take the command with it through a
   * write to its pipe. */
  struct sigaction ign, old;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ign, &old);
  run_in_workers(p, jobs, res);
  sigaction(SIGPIPE, &old, NULL);
}
