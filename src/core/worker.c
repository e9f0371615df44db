/*
 * worker.c: builds on a thread of the runtime's own, for a call that goes
 * on with something already built meanwhile (tj_options.background_builds).
 * A build is queued under a name and run by the one thread, in the order
 * queued, one at a time; the worker keeps each name's outcome, so that a
 * name is built once however many threads ask, and its failure is told
 * to one caller.  The worker knows no kernel: what a build does is the
 * caller's function.  Closing the runtime stops it first: builds not yet
 * begun are dropped, and the close waits for the one running, which uses
 * the runtime's table and cache.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most names a worker keeps; past it a caller builds on its own. */
#define WORKER_MAX_JOBS 256

enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE, JOB_FAILED };

typedef struct job {
  struct job *next; /* every name, newest first */
  char *name;
  tj__work_fn fn;
  void *arg;        /* the caller's bytes, copied */
  int state;
  int told;         /* JOB_FAILED: a caller has been warned */
  char *why;        /* JOB_FAILED: the build's message */
} job;

struct tj__worker {
  pthread_mutex_t lock;
  pthread_cond_t wake;   /* a job was queued, or the worker stops */
  pthread_cond_t idle;   /* a job finished */
  pthread_t thread;
  int started, stopping;
  job *jobs;
  size_t njobs;
};

tj__worker *tj__worker_new(void)
{
  tj__worker *w = calloc(1, sizeof *w);
  if (!w)
    return NULL;
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->wake, NULL);
  pthread_cond_init(&w->idle, NULL);
  return w;
}

/* The oldest queued job, or NULL.  Under w->lock. */
static job *next_queued(tj__worker *w)
{
  job *oldest = NULL;
  for (job *j = w->jobs; j; j = j->next)
    if (j->state == JOB_QUEUED)
      oldest = j;
  return oldest;
}

/* The build's failure as a sentence: its own message (this thread's on
 * rt, when it said one since the clock read said), else the code's. */
static char *failure_of(tj_runtime *rt, const job *j, int rc, uint64_t said)
{
  const char *msg = tj__messages_clock() != said ? tj_errmsg(rt) : "";
  size_t n = strlen(j->name) + strlen(msg) + 128;
  char *why = malloc(n);
  if (why)
    snprintf(why, n, "a background build of %s failed (%s): %s; its calls "
             "keep the fallback", j->name, tj_err_name(rc),
             *msg ? msg : tj_strerror(rc));
  return why;
}

static void *worker_main(void *p)
{
  tj_runtime *rt = p;
  tj__worker *w = rt->worker;
  pthread_mutex_lock(&w->lock);
  for (;;) {
    job *j = NULL;
    while (!w->stopping && !(j = next_queued(w)))
      pthread_cond_wait(&w->wake, &w->lock);
    if (w->stopping)
      break;
    j->state = JOB_RUNNING;
    pthread_mutex_unlock(&w->lock);
    uint64_t said = tj__messages_clock();
    int rc = j->fn(rt, j->arg);
    char *why = rc == TJ_OK ? NULL : failure_of(rt, j, rc, said);
    pthread_mutex_lock(&w->lock);
    j->state = rc == TJ_OK ? JOB_DONE : JOB_FAILED;
    j->why = why;
    pthread_cond_broadcast(&w->idle);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

static job *find_job(tj__worker *w, const char *name)
{
  for (job *j = w->jobs; j; j = j->next)
    if (strcmp(j->name, name) == 0)
      return j;
  return NULL;
}

/* A new queued job for name, the worker started if it was not; NULL
 * when it cannot be had.  Under w->lock. */
static job *add_job(tj_runtime *rt, const char *name, tj__work_fn fn,
                    const void *arg, size_t size)
{
  tj__worker *w = rt->worker;
  if (w->stopping || w->njobs >= WORKER_MAX_JOBS)
    return NULL;
  if (!w->started) {
    if (pthread_create(&w->thread, NULL, worker_main, rt) != 0)
      return NULL;
    w->started = 1;
  }
  job *j = calloc(1, sizeof *j);
  if (!j || !(j->name = strdup(name)) || !(j->arg = malloc(size ? size : 1))) {
    if (j)
      free(j->name);
    free(j);
    return NULL;
  }
  memcpy(j->arg, arg, size);
  j->fn = fn;
  j->state = JOB_QUEUED;
  j->next = w->jobs;
  w->jobs = j;
  w->njobs++;
  pthread_cond_signal(&w->wake);
  return j;
}

int tj__worker_submit(tj_runtime *rt, const char *name, tj__work_fn fn,
                      const void *arg, size_t size)
{
  tj__worker *w = rt->worker;
  if (!w)
    return TJ_EINVAL;
  char *tell = NULL;
  pthread_mutex_lock(&w->lock);
  job *j = find_job(w, name);
  int state = j ? j->state : fn ? JOB_QUEUED : -2;
  if (!j && fn && !add_job(rt, name, fn, arg, size))
    state = -1;
  if (state == JOB_FAILED && !j->told) {
    j->told = 1;
    tell = j->why ? strdup(j->why) : NULL;
  }
  pthread_mutex_unlock(&w->lock);
  if (tell)
    tj__warn(rt, "%s", tell);
  free(tell);
  switch (state) {
  case JOB_DONE: return TJ__WORK_DONE;
  case JOB_FAILED: return TJ__WORK_FAILED;
  case -1: return TJ_ENOMEM;
  case -2: return TJ_ENOENT;
  default: return TJ__WORK_PENDING;
  }
}

void tj__worker_drain(tj_runtime *rt)
{
  tj__worker *w = rt ? rt->worker : NULL;
  if (!w)
    return;
  pthread_mutex_lock(&w->lock);
  for (;;) {
    int busy = 0;
    for (job *j = w->jobs; j; j = j->next)
      busy |= j->state == JOB_QUEUED || j->state == JOB_RUNNING;
    if (!busy || w->stopping)
      break;
    pthread_cond_wait(&w->idle, &w->lock);
  }
  pthread_mutex_unlock(&w->lock);
}

void tj__worker_stop(tj__worker *w)
{
  if (!w)
    return;
  pthread_mutex_lock(&w->lock);
  w->stopping = 1;
  pthread_cond_broadcast(&w->wake);
  pthread_cond_broadcast(&w->idle);
  pthread_mutex_unlock(&w->lock);
  if (w->started)
    pthread_join(w->thread, NULL);
  w->started = 0;
}

void tj__worker_free(tj__worker *w)
{
  if (!w)
    return;
  tj__worker_stop(w);
  for (job *j = w->jobs, *next; j; j = next) {
    next = j->next;
    free(j->name);
    free(j->arg);
    free(j->why);
    free(j);
  }
  pthread_cond_destroy(&w->wake);
  pthread_cond_destroy(&w->idle);
  pthread_mutex_destroy(&w->lock);
  free(w);
}
