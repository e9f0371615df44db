/*
 * testremote.h: what the remote tier's suites share (check_remote,
 * check_remote_cluster): redis-server processes of the test's own on free
 * loopback ports, which die with the test however it ends, and herds of
 * processes, each standing for a machine with its own per-user cache,
 * that report their tj_stats back.  Include it after testutil.h, where
 * hiredis is built in.
 */
#ifndef TJ_TESTREMOTE_H
#define TJ_TESTREMOTE_H

#include "internal.h"
#include "remote.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <xxhash.h>

#include <hiredis/hiredis.h>

#ifndef PROCS /* bench/remote_herd.c asks for more */
#define PROCS 32
#endif
#define MAX_SERVERS 3

/* A user kernel beside the embedded add_i32: the module path too. */
static const char user_source[] =
    "extern \"C\" __global__ void remote_k(int *p) { p[threadIdx.x] = 7; }";
/* The user kernel that the children compile (a case may pick another
 * before herd_start, to choose its key). */
static const char *herd_user_source = user_source;

/* ------------------------------------------------------- servers */

typedef struct redis_server {
  pid_t pid;
  int port;
} redis_server;

static inline int free_port(void)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  socklen_t n = sizeof a;
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &n), 0);
  close(fd);
  return ntohs(a.sin_port);
}

static inline redisContext *admin(int port)
{
  struct timeval tv = {2, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (c && c->err) {
    redisFree(c);
    return NULL;
  }
  return c;
}

/* For a child of the test's process, which must not outlive it however
 * the test ends: a failed assertion _exits that process and a case's
 * timeout kills it, before any cleanup of its own could run.  SIGKILL
 * needs no SIGCONT, so a stopped server goes too. */
static inline void die_with(pid_t parent)
{
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent)
    _exit(127);
}

static inline void sleep_ms(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* A redis-server on a free loopback port (or on port, when not 0),
 * answering PING. */
static inline void start_server_with(redis_server *s, const char *dir,
                                     int at, const char *const *extra)
{
  pid_t test = getpid();
  for (int attempt = 0; attempt < 5; attempt++) {
    char port[16];
    s->port = at ? at : free_port();
    snprintf(port, sizeof port, "%d", s->port);
    s->pid = fork();
    ck_assert_int_ge(s->pid, 0);
    if (s->pid == 0) {
      die_with(test);
      int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      const char *argv[32] = {"redis-server", "--port", port, "--bind",
                              "127.0.0.1", "--save", "", "--appendonly",
                              "no", "--dir", dir, "--daemonize", "no"};
      for (int i = 0; extra && extra[i] && i < 16; i++)
        argv[13 + i] = extra[i];
      execvp("redis-server", (char *const *)argv);
      _exit(127);
    }
    for (int i = 0; i < 500; i++) {
      int status;
      if (waitpid(s->pid, &status, WNOHANG) == s->pid)
        break; /* the port was taken meanwhile: another */
      redisContext *c = admin(s->port);
      redisReply *r = c ? redisCommand(c, "PING") : NULL;
      int up = r && (r->type == REDIS_REPLY_STATUS ||
                     r->type == REDIS_REPLY_ERROR); /* NOAUTH: up too */
      if (r)
        freeReplyObject(r);
      if (c)
        redisFree(c);
      if (up)
        return;
      sleep_ms(10);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
  }
  ck_abort_msg("redis-server did not start");
}

static inline void start_server_at(redis_server *s, const char *dir, int at)
{
  start_server_with(s, dir, at, NULL);
}

static inline void start_server(redis_server *s, const char *dir)
{
  start_server_at(s, dir, 0);
}

static inline void stop_server(redis_server *s)
{
  if (s->pid > 0) {
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
  }
}

/* kill -STOP, returning once it is stopped: from here on the kernel
 * still completes connections into its backlog and takes in what
 * clients send, and nothing answers. */
static inline void pause_server(const redis_server *s)
{
  int status = 0;
  ck_assert_int_eq(kill(s->pid, SIGSTOP), 0);
  ck_assert_int_eq(waitpid(s->pid, &status, WUNTRACED), s->pid);
  ck_assert(WIFSTOPPED(status));
}

static inline void resume_server(const redis_server *s)
{
  ck_assert_int_eq(kill(s->pid, SIGCONT), 0);
}

/* A shutdown as an operator's: SIGTERM, and the server exits 0. */
static inline void shut_down_server(redis_server *s)
{
  int status = -1;
  ck_assert_int_eq(kill(s->pid, SIGTERM), 0);
  ck_assert_int_eq(waitpid(s->pid, &status, 0), s->pid);
  s->pid = 0;
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "redis-server ended with status 0x%x", status);
}

static inline char *spec_of(const redis_server *s, int n, const char *suffix)
{
  char *spec = calloc(1, 64 * (size_t)n + 32);
  for (int i = 0; i < n; i++)
    sprintf(spec + strlen(spec), "%sredis://127.0.0.1:%d", i ? "," : "",
            s[i].port);
  strcat(spec, suffix);
  return spec;
}

/* The reply to one admin command on s; the caller frees it. */
static inline redisReply *ask(const redis_server *s, const char *fmt, ...)
{
  redisContext *c = admin(s->port);
  ck_assert_ptr_nonnull(c);
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(c, fmt, ap);
  va_end(ap);
  redisFree(c);
  ck_assert_ptr_nonnull(r);
  return r;
}

static inline long long keys_matching(const redis_server *s, int n,
                                      const char *pat)
{
  long long total = 0;
  for (int i = 0; i < n; i++) {
    redisReply *r = ask(&s[i], "KEYS %s", pat);
    total += (long long)r->elements;
    freeReplyObject(r);
  }
  return total;
}

/* ------------------------------------------------------- processes */

static inline tj_runtime *open_remote(const char *cache, const char *spec)
{
  tj_options o = {0};
  o.size = sizeof o;
  o.arch = TEST_ARCH;
  o.cache_path = cache;
  o.flags = TJ_NO_DEVICE;
  o.remote = spec;
  tj_runtime *rt = NULL;
  if (tj_runtime_open(&rt, &o) != TJ_OK) {
    fprintf(stderr, "tj_runtime_open: %s\n", tj_errmsg(rt));
    tj_runtime_close(rt);
    return NULL;
  }
  return rt;
}

/* What a child sends back: one write, under PIPE_BUF, so never torn. */
typedef struct report {
  int index; /* which child: reports arrive in the order they finish */
  int ok;
  tj_stats st;
  char msg[200];
} report;

/* What the children get: add_i32, with the user kernel, or one of the
 * entries of kernels/gelu_f16.hip, child by child; or add_i32 and
 * gelu_fwd_f16, two files, each child. */
enum { ADD, ADD_AND_USER, GELU_FILE, ADD_AND_GELU };
static const char *const gelu_entries[] = {"gelu_fwd_f16", "gelu_bwd_f16",
                                           "gelu_fwd_bwd_f16"};

/* A child: wait for the start, get its kernels, report. */
static inline void child(int index, const char *cache, const char *spec,
                         int go, int out, int what)
{
  char c;
  report rep = {0};
  rep.index = index;
  if (read(go, &c, 1) < 0)
    _exit(3);
  tj_runtime *rt = open_remote(cache, spec);
  tj_kernel *k;
  const char *name = what == GELU_FILE ? gelu_entries[index % 3]
                                              : "add_i32";
  rep.ok = rt && tj_kernel_get(rt, name, &k) == TJ_OK &&
           (what != ADD_AND_USER ||
            tj_kernel_compile(rt, herd_user_source, "remote_k", NULL,
                              &k) == TJ_OK) &&
           (what != ADD_AND_GELU ||
            tj_kernel_get(rt, "gelu_fwd_f16", &k) == TJ_OK);
  if (rt) {
    snprintf(rep.msg, sizeof rep.msg, "%s", tj_errmsg(rt));
    tj_runtime_get_stats(rt, &rep.st);
  }
  tj_runtime_close(rt);
  if (write(out, &rep, sizeof rep) != (ssize_t)sizeof rep)
    _exit(4);
  _exit(rep.ok ? 0 : 1);
}

typedef struct herd {
  int n;
  pid_t pids[PROCS];
  int go[2], out[2];
  report got[PROCS];
  int ok;
  uint64_t compiles, remote_hits, errors, timeouts, drops, renewals,
      takeovers;
  double compile_ms; /* the children's compile time, summed */
} herd;

/* n children getting what (ADD, ...), each with its own cache under dir
 * (or all on one cache when shared is set), blocked until herd_go. */
static inline void herd_start(herd *h, int n, const char *dir,
                              const char *spec, int shared, int what)
{
  memset(h, 0, sizeof *h);
  h->n = n;
  ck_assert_int_eq(pipe(h->go), 0);
  ck_assert_int_eq(pipe(h->out), 0);
  pid_t test = getpid();
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "c%d.db", shared ? 0 : i);
    char *cache = test_path(dir, name);
    h->pids[i] = fork();
    ck_assert_int_ge(h->pids[i], 0);
    if (h->pids[i] == 0) {
      die_with(test);
      close(h->go[1]);
      close(h->out[0]);
      child(i, cache, spec, h->go[0], h->out[1], what);
    }
    free(cache);
  }
  close(h->go[0]);
  close(h->out[1]);
}

static inline void herd_go(herd *h) { close(h->go[1]); }

static inline void herd_wait(herd *h)
{
  for (int i = 0; i < h->n; i++) {
    report got;
    ck_assert_int_eq(read(h->out[0], &got, sizeof got), (ssize_t)sizeof got);
    ck_assert(got.index >= 0 && got.index < h->n);
    h->got[got.index] = got;
    const report *r = &h->got[got.index];
    h->ok += r->ok;
    h->compiles += r->st.compiles;
    h->remote_hits += r->st.remote_hits;
    h->errors += r->st.remote_errors;
    h->timeouts += r->st.remote_timeouts;
    h->drops += r->st.cache_drops;
    h->renewals += r->st.remote_lease_renewals;
    h->takeovers += r->st.remote_lease_takeovers;
    h->compile_ms += r->st.compile_ms;
    if (!r->ok)
      fprintf(stderr, "child failed: %s\n", r->msg);
  }
  for (int i = 0; i < h->n; i++)
    waitpid(h->pids[i], NULL, 0);
  close(h->out[0]);
}

/* redis-server on $PATH. */
static inline int have_redis_server(void)
{
  const char *path = getenv("PATH");
  char *copy = strdup(path ? path : "/usr/bin:/bin"), *save = NULL;
  int found = 0;
  for (char *d = strtok_r(copy, ":", &save); d && !found;
       d = strtok_r(NULL, ":", &save)) {
    char *p = test_path(d, "redis-server");
    found = access(p, X_OK) == 0;
    free(p);
  }
  free(copy);
  return found;
}

#endif /* TJ_TESTREMOTE_H */
