/*
 * remote_herd.c: the remote tier's figures under faults.  N processes
 * (8, 32 and 64 unless the arguments name others, at most 64), each
 * standing for a machine with its own empty per-user cache, get add_i32
 * and gelu_fwd_f16 (two kernel files: two keys) on a compile-only runtime
 * through one redis-server on loopback, or through a three-node Redis
 * Cluster, in each scenario below.  One line a run: compiles per key
 * (the herd's compiles over the two keys), the herd's wall time (from its
 * start signal to its last process's end, runtime opens included) and the
 * calls that failed.  The tier's own settings are the defaults unless a
 * scenario names one.
 *
 * A program that prints figures, not a test: it asserts only what its
 * machinery needs (servers up, reports whole).  It is built like the
 * suites, on tests/testremote.h's servers and herds (`make
 * bench/remote_herd`), each run a Check case in a process of its own:
 *   nice bench/remote_herd [--only SCENARIO] [N...]
 * (--only: the scenarios whose names start with SCENARIO).
 */
#define PROCS 64
#include "testutil.h"

#ifdef TJ_HAVE_HIREDIS
#include "testremote.h"

#include <poll.h>

enum { KEYS = 2 }; /* add_i32's file and gelu_f16.hip */
enum { NODES = MAX_SERVERS };

enum scenario {
  HEALTHY,
  TRICKLE,
  STALL,
  RESTART,
  SHORT_LEASE,
  DAMAGED,
  KILLED_HOLDER,
  CLUSTER,
  CLUSTER_NODE_KILLED,
  SCENARIOS
};

static const char *const scenario_name[SCENARIOS] = {
    "healthy",          "trickled answers",  "stall 1.5 s",
    "restart",          "lease 200 ms",      "damaged value",
    "killed holder",    "cluster healthy",   "cluster node killed"};

static int sizes[16] = {8, 32, 64};
static int nsizes = 3;
static const char *only; /* --only NAME: the scenarios whose names start so */

/* ------------------------------------------------------- the herd */

typedef struct tally {
  int reported, ok;
  uint64_t compiles, hits, errors, timeouts, drops, renewals, takeovers;
} tally;

/* Every report the herd sends until its last process ends (a killed one
 * sends none), and every process reaped. */
static void collect(herd *h, tally *t)
{
  report got;
  memset(t, 0, sizeof *t);
  while (read(h->out[0], &got, sizeof got) == (ssize_t)sizeof got) {
    ck_assert(got.index >= 0 && got.index < h->n);
    t->reported++;
    t->ok += got.ok;
    t->compiles += got.st.compiles;
    t->hits += got.st.remote_hits;
    t->errors += got.st.remote_errors;
    t->timeouts += got.st.remote_timeouts;
    t->drops += got.st.cache_drops;
    t->renewals += got.st.remote_lease_renewals;
    t->takeovers += got.st.remote_lease_takeovers;
  }
  for (int i = 0; i < h->n; i++)
    waitpid(h->pids[i], NULL, 0);
  close(h->out[0]);
}

static double now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Polls until one of the n servers holds a lease (a compile is under
 * way); 0 when none showed in 20 s. */
static int lease_seen(const redis_server *s, int n)
{
  for (int i = 0; i < 10000; i++) {
    for (int j = 0; j < n; j++)
      if (s[j].pid > 0 &&
          keys_matching(&s[j], 1, TJ__REMOTE_NAMESPACE "lease:*") > 0)
        return j + 1;
    sleep_ms(2);
  }
  return 0;
}

/* The herd process holding a lease on s (its token is "PID-NONCE"), or 0. */
static pid_t holder_of(const redis_server *s, const herd *h)
{
  redisReply *keys = ask(s, "KEYS " TJ__REMOTE_NAMESPACE "lease:*");
  pid_t pid = 0;
  for (size_t i = 0; i < keys->elements && !pid; i++) {
    redisReply *v = ask(s, "GET %s", keys->element[i]->str);
    if (v->type == REDIS_REPLY_STRING)
      pid = (pid_t)strtol(v->str, NULL, 10);
    freeReplyObject(v);
  }
  freeReplyObject(keys);
  for (int i = 0; i < h->n; i++)
    if (pid > 0 && h->pids[i] == pid)
      return pid;
  return 0;
}

/* ------------------------------------------------------- faults */

/* A proxy in front of s: each command passes at once, each answer comes
 * back a byte a millisecond (a value takes seconds, a status a few
 * milliseconds).  One process a connection; returns the port. */
static int trickle_proxy(const redis_server *s, pid_t *pid)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  socklen_t n = sizeof a;
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(listen(fd, 128), 0);
  ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &n), 0);
  pid_t test = getpid();
  *pid = fork();
  ck_assert_int_ge(*pid, 0);
  if (*pid) {
    close(fd);
    return ntohs(a.sin_port);
  }
  die_with(test);
  signal(SIGCHLD, SIG_IGN); /* connections reap themselves */
  pid_t proxy = getpid();
  for (;;) {
    int c = accept(fd, NULL, NULL);
    if (c < 0 || fork() != 0) {
      if (c >= 0)
        close(c);
      continue;
    }
    die_with(proxy);
    redisContext *up = admin(s->port);
    if (!up)
      _exit(1);
    struct pollfd p[2] = {{c, POLLIN, 0}, {up->fd, POLLIN, 0}};
    char buf[4096];
    while (poll(p, 2, -1) > 0) {
      ssize_t got;
      if (p[0].revents) {
        if ((got = recv(c, buf, sizeof buf, 0)) <= 0 ||
            send(up->fd, buf, (size_t)got, MSG_NOSIGNAL) != got)
          _exit(0);
      }
      if (p[1].revents) {
        if ((got = recv(up->fd, buf, sizeof buf, 0)) <= 0)
          _exit(0);
        for (ssize_t i = 0; i < got; i++) {
          if (send(c, buf + i, 1, MSG_NOSIGNAL) != 1)
            _exit(0);
          sleep_ms(1);
        }
      }
    }
    _exit(0);
  }
}

/* add_i32's value put on s by one process, then a byte of it changed. */
static void damaged_value(const redis_server *s, const char *dir)
{
  char *first = test_path(dir, "first.db");
  char spec[64];
  snprintf(spec, sizeof spec, "redis://127.0.0.1:%d", s->port);
  tj_runtime *rt = open_remote(first, spec);
  tj_kernel *k;
  ck_assert_ptr_nonnull(rt);
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_runtime_close(rt);
  free(first);
  redisReply *keys = ask(s, "KEYS " TJ__REMOTE_NAMESPACE "code:*");
  ck_assert_uint_eq(keys->elements, 1);
  redisReply *v = ask(s, "GET %s", keys->element[0]->str);
  ck_assert_int_eq(v->type, REDIS_REPLY_STRING);
  v->str[v->len / 2] ^= 0x20;
  freeReplyObject(ask(s, "SET %s %b", keys->element[0]->str, v->str, v->len));
  freeReplyObject(v);
  freeReplyObject(keys);
}

/* ------------------------------------------------------- the cluster */

/* A free loopback port whose cluster bus port (10000 above) is free too. */
static int node_port(void)
{
  for (int i = 0; i < 1000; i++) {
    int p = free_port();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)(p + 10000));
    int bus = p <= 65535 - 10000 &&
              bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    if (bus)
      return p;
  }
  return 0;
}

static int cluster_ok(const redis_server *node)
{
  for (int i = 0; i < NODES; i++) {
    redisReply *r = ask(&node[i], "CLUSTER INFO");
    int ok = r->type == REDIS_REPLY_STRING &&
             strstr(r->str, "cluster_state:ok") &&
             strstr(r->str, "cluster_known_nodes:3");
    freeReplyObject(r);
    if (!ok)
      return 0;
  }
  return 1;
}

/* Three nodes of a third of the slots each, met and whole; the spec
 * names each as a seed (malloc'd). */
static char *cluster_start(redis_server *node, const char *dir)
{
  static const char *const args[] = {
      "--cluster-enabled", "yes", "--cluster-node-timeout", "5000",
      "--cluster-require-full-coverage", "no", NULL};
  static const int lo[NODES] = {0, 5461, 10923}, hi[NODES] = {5460, 10922,
                                                             16383};
  char *spec = calloc(1, 64 * NODES);
  for (int i = 0; i < NODES; i++) {
    char name[16];
    snprintf(name, sizeof name, "n%d", i);
    char *d = test_path(dir, name);
    mkdir(d, 0700);
    int at = node_port();
    ck_assert_int_ne(at, 0);
    start_server_with(&node[i], d, at, args);
    free(d);
    redisReply *r = ask(&node[i], "CLUSTER ADDSLOTSRANGE %d %d", lo[i], hi[i]);
    ck_assert_int_eq(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    sprintf(spec + strlen(spec), "%sredis+cluster://127.0.0.1:%d",
            i ? "," : "", node[i].port);
  }
  for (int i = 1; i < NODES; i++)
    freeReplyObject(ask(&node[0], "CLUSTER MEET 127.0.0.1 %d", node[i].port));
  int whole = 0;
  for (int t = 0; t < 1500 && !(whole = cluster_ok(node)); t++)
    sleep_ms(20);
  ck_assert_msg(whole, "the cluster did not come together");
  return spec;
}

/* ------------------------------------------------------- one run */

/* Sets the servers up for sc, returns the spec (malloc'd) and how many
 * servers *ns there are. */
static char *servers_for(int sc, redis_server *s, int *ns, const char *dir,
                         pid_t *proxy)
{
  *ns = 1;
  *proxy = 0;
  if (sc == CLUSTER || sc == CLUSTER_NODE_KILLED) {
    *ns = NODES;
    return cluster_start(s, dir);
  }
  start_server(&s[0], dir);
  if (sc == DAMAGED)
    damaged_value(&s[0], dir);
  if (sc != TRICKLE)
    return spec_of(s, 1, "");
  char *spec = calloc(1, 64);
  sprintf(spec, "redis://127.0.0.1:%d", trickle_proxy(&s[0], proxy));
  return spec;
}

/* The fault, once the herd runs; returns the process killed, if any. */
static pid_t fault(int sc, redis_server *s, int ns, const char *dir,
                   const herd *h)
{
  int at = sc == TRICKLE || sc == SHORT_LEASE || sc == DAMAGED ||
                   sc == HEALTHY || sc == CLUSTER
               ? 0
               : lease_seen(s, ns);
  if (!at) /* no fault to make, or the compiles ended before a look */
    return 0;
  redis_server *on = &s[at - 1];
  pid_t holder;
  switch (sc) {
  case STALL:
    pause_server(on);
    sleep_ms(1500);
    resume_server(on);
    return 0;
  case RESTART:
    stop_server(on);
    start_server_at(on, dir, on->port);
    return 0;
  case KILLED_HOLDER:
    holder = holder_of(on, h);
    if (holder > 0)
      kill(holder, SIGKILL);
    return holder;
  default: /* CLUSTER_NODE_KILLED */
    stop_server(on);
    return 0;
  }
}

START_TEST(herd_run)
{
  int sc = _i / nsizes, n = sizes[_i % nsizes];
  if (only && strncmp(scenario_name[sc], only, strlen(only)) != 0)
    return;
  char *dir = test_tmpdir();
  redis_server s[NODES];
  memset(s, 0, sizeof s);
  int ns;
  pid_t proxy;
  char *spec = servers_for(sc, s, &ns, dir, &proxy);
  if (sc == SHORT_LEASE)
    setenv("TOKITAI_JIT_REMOTE_LEASE_MS", "200", 1);
  herd h;
  herd_start(&h, n, dir, spec, 0, ADD_AND_GELU);
  unsetenv("TOKITAI_JIT_REMOTE_LEASE_MS");
  double t0 = now_ms();
  herd_go(&h);
  pid_t killed = fault(sc, s, ns, dir, &h);
  tally t;
  collect(&h, &t);
  double wall = now_ms() - t0;
  int expected = n - (killed > 0);
  printf("%-20s N=%2d  compiles/key %5.2f (%3llu/%d)  wall %6.2f s  "
         "failed %d  | reported %d/%d, remote hits %llu, errors %llu, "
         "timeouts %llu, drops %llu, renewals %llu, takeovers %llu%s\n",
         scenario_name[sc], n, (double)t.compiles / KEYS,
         (unsigned long long)t.compiles, KEYS, wall / 1e3,
         expected - t.ok, t.reported, n, (unsigned long long)t.hits,
         (unsigned long long)t.errors, (unsigned long long)t.timeouts,
         (unsigned long long)t.drops, (unsigned long long)t.renewals,
         (unsigned long long)t.takeovers,
         sc == KILLED_HOLDER && !killed ? " (no holder seen)" : "");
  fflush(stdout);
  if (proxy > 0) {
    kill(proxy, SIGKILL);
    waitpid(proxy, NULL, 0);
  }
  for (int i = 0; i < ns; i++)
    stop_server(&s[i]);
  free(spec);
  free(dir);
}
END_TEST

int main(int argc, char **argv)
{
  if (!have_redis_server()) {
    printf("redis-server is not installed\n");
    return 77;
  }
  int first = 1;
  if (argc > 2 && strcmp(argv[1], "--only") == 0)
    only = argv[2], first = 3;
  if (argc > first) {
    nsizes = 0;
    for (int i = first; i < argc && nsizes < 16; i++) {
      int n = atoi(argv[i]);
      if (n < 1 || n > PROCS) {
        fprintf(stderr, "usage: %s [--only SCENARIO] [N...] (each 1 to "
                "%d)\n", argv[0], PROCS);
        return 2;
      }
      sizes[nsizes++] = n;
    }
  }
  printf("remote_herd: add_i32 and gelu_fwd_f16 (%d keys) for %s, compile-"
         "only, each process its own cache; %ld CPUs online; a byte a "
         "millisecond for trickled answers\n", KEYS, TEST_ARCH,
         sysconf(_SC_NPROCESSORS_ONLN));
  fflush(stdout);
  Suite *s = suite_create("remote_herd");
  TCase *tc = test_case(s, "herds", 600);
  tcase_add_loop_test(tc, herd_run, 0, SCENARIOS * nsizes);
  return run_suite(s);
}

#else

int main(void)
{
  printf("built without hiredis\n");
  return 77;
}

#endif
