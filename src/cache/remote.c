/*
 * remote.c: the remote tier's logic, whatever the backend (remote.h says
 * what it promises; remote_redis.c is the Redis backend).
 *
 * A value is immutable and says what it is (record.h: magic "TJREMOTE",
 * the key echoed, every column, the code and its hash, a check over it
 * all), so that a reader trusts nothing but its own checks.  A reader
 * asks for at most the largest value that could pass, so a huge value
 * costs it no more memory than a good one.  Whoever can write to the
 * servers chooses the code that matches a key: the servers must be
 * writable by trusted users only, as a system cache must be (README,
 * "The remote tier").
 *
 * One mutex orders the commands: a backend's connections are not shared
 * between threads, and a command ends within the operation timeout.  A
 * breaker per server (shard, cluster node): a fault turns that server's
 * keys off until a jittered backoff passes (doubling at each fault in a
 * row, up to 64 times the first), while the keys of the other servers
 * stay shared; the first call on it after the backoff is sent, and its
 * success turns it on again and publishes the values that waited.  One
 * thread of the tier, started with the first lease or the first value
 * that waits, renews the leases held here and publishes what waits once
 * its server's backoff has passed.
 */
#include "config.h"
#include "record.h"
#include "remote.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAGIC "TJREMOTE"
/* The most a value that can pass may hold. */
#define MAX_VALUE TJ__RECORD_MAX_BYTES
#define BACKOFF_GROWTH 64
/* Values compiled while the tier is off that wait for it: at most these
 * many, and these many bytes. */
#define PENDING_MAX 16
#define PENDING_BYTES (64u << 20)
#define HELD_MAX 16
#define REJECTED_MAX 8
#define POLL_FIRST_MS 20
#define POLL_MAX_MS 250
/* How many lease waits a waiter gives a holder that took the lease over
 * (from a holder that stopped or expired): it is alive, renewing and
 * compiling, and a compile may outlast one wait on a loaded machine; as
 * lease.c gives the local one. */
#define TAKEOVER_WAITS 4
/* Faults in a row that a compile waits through, when the server is
 * away (nothing of an answer came: no connection, a closed one, a
 * silence): a stall or a restart is over within two backoffs, and a
 * process that waits for it shares the lease and the value instead of
 * compiling on its own.  A server that stays away costs a process this
 * many faults, or the lease time, once; from then on it compiles at
 * once until the server answers again.  A slow server (an answer that
 * began and did not end in time) or an error answer is not waited
 * for. */
#define RIDE_FAULTS 3

static const tj__remote_backend *const backends[] = {&tj__remote_redis};

typedef struct pending {
  char key[TJ__KEY_HEX];
  unsigned char *val;
  size_t len;
  int replace;
} pending;

/* One server's breaker. */
typedef struct breaker {
  int off;               /* open: the server's keys are not asked */
  long long retry_at;    /* when it may be tried again (ms) */
  long backoff;          /* the last time off, 0 while on */
  int streak;            /* faults in a row */
  long long streak_at;   /* when the first of them came (ms) */
  int away;              /* the last fault got nothing of an answer */
} breaker;

struct tj__remote {
  const tj__remote_backend *be;
  void *b;
  tj__remote_settings set;
  pthread_mutex_t lock;
  pthread_cond_t wake;   /* the renewer's sleep */
  breaker brk[TJ__REMOTE_MAX_SERVERS]; /* one per server */
  int noff;              /* atomic: the servers whose breaker is open */
  uint64_t seed;
  int changed;           /* a change of state not yet said */
  char why[800];
  tj__remote_counters n;
  char rejected[REJECTED_MAX][TJ__KEY_HEX];
  unsigned nrejected;
  pending pend[PENDING_MAX];
  int npend;
  size_t pend_bytes;
  tj__remote_lease *held[HELD_MAX]; /* leases to renew */
  int renewer_on, stopping;
  pthread_t renewer;
  pid_t renewer_pid;     /* a child of a fork has no renewer to join */
};

/* ------------------------------------------------------- settings */

static long env_long(const char *name, long def, long lo, long hi,
                     char *why, size_t len)
{
  const char *v = getenv(name);
  if (!v || !*v)
    return def;
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || *end || x < lo || x > hi) {
    if (!why[0])
      snprintf(why, len, "%s='%.64s' is not a whole number from %ld to %ld; "
               "using %ld", name, v, lo, hi, def);
    return def;
  }
  return x;
}

void tj__remote_settings_env(tj__remote_settings *s, char *why, size_t len)
{
  why[0] = '\0';
  s->connect_timeout_ms = env_long("TOKITAI_JIT_REMOTE_CONNECT_TIMEOUT_MS",
                                   100, 1, 60000, why, len);
  s->timeout_ms = env_long("TOKITAI_JIT_REMOTE_TIMEOUT_MS", 1000, 1, 60000,
                           why, len);
  s->ttl_s = env_long("TOKITAI_JIT_REMOTE_TTL", 0, 0, 100L * 365 * 86400, why,
                      len);
  s->lease_ms = env_long("TOKITAI_JIT_REMOTE_LEASE_MS", 10000, 3, 3600000,
                         why, len);
  s->backoff_ms = env_long("TOKITAI_JIT_REMOTE_BACKOFF_MS", 1000, 1,
                           3600000, why, len);
  const char *ro = getenv("TOKITAI_JIT_REMOTE_READONLY");
  s->readonly = ro && *ro && strcmp(ro, "0") != 0;
}

/* ------------------------------------------------------- open, close */

static long long now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The backend whose scheme starts spec. */
static const tj__remote_backend *backend_of(const char *spec)
{
  for (size_t i = 0; i < sizeof backends / sizeof *backends; i++)
    if (strncmp(spec, backends[i]->scheme, strlen(backends[i]->scheme)) == 0)
      return backends[i];
  return backends[0]; /* Redis: it takes unix:// too, and its parser
                          names what an entry must be */
}

int tj__remote_open(const char *spec, const tj__remote_settings *s,
                    tj__remote **out, char *msg, size_t len)
{
  *out = NULL;
  msg[0] = '\0';
  tj__remote *r = calloc(1, sizeof *r);
  if (!r)
    return snprintf(msg, len, "out of memory"), TJ_ENOMEM;
  r->set = *s;
  r->be = backend_of(spec);
  int rc = r->be->open(spec, s, &r->b, &r->set.readonly, msg, len);
  if (rc != TJ_OK) {
    free(r);
    return rc;
  }
  pthread_mutex_init(&r->lock, NULL);
  pthread_cond_init(&r->wake, NULL);
  r->seed = tj__lease_seed();
  *out = r;
  return TJ_OK;
}

static int flush_pending(tj__remote *r);
static int may_call(tj__remote *r, const char *key);
static void start_renewer(tj__remote *r);

void tj__remote_stop(tj__remote *r)
{
  if (!r)
    return;
  pthread_mutex_lock(&r->lock);
  r->stopping = 1;
  pthread_cond_broadcast(&r->wake);
  int joined = r->renewer_on && r->renewer_pid == getpid();
  r->renewer_on = 0;
  pthread_mutex_unlock(&r->lock);
  if (joined)
    pthread_join(r->renewer, NULL);
  pthread_mutex_lock(&r->lock);
  if (r->npend)
    flush_pending(r);
  pthread_mutex_unlock(&r->lock);
}

void tj__remote_close(tj__remote *r)
{
  if (!r)
    return;
  tj__remote_stop(r);
  for (int i = 0; i < r->npend; i++)
    free(r->pend[i].val);
  r->be->close(r->b);
  pthread_cond_destroy(&r->wake);
  pthread_mutex_destroy(&r->lock);
  free(r);
}

int tj__remote_readonly(const tj__remote *r) { return r->set.readonly; }
void tj__remote_set_readonly(tj__remote *r) { r->set.readonly = 1; }
int tj__remote_server_count(const tj__remote *r)
{
  return r->be->server_count(r->b);
}
int tj__remote_server_of(const tj__remote *r, const char *key)
{
  return r->be->server_of(r->b, key);
}

int tj__remote_off(const tj__remote *r)
{
  return __atomic_load_n(&r->noff, __ATOMIC_ACQUIRE) > 0;
}

int tj__remote_take_warning(tj__remote *r, char *out, size_t len)
{
  int say = 0;
  pthread_mutex_lock(&r->lock);
  if (r->changed) {
    r->changed = 0, say = 1;
    snprintf(out, len, "%s", r->why);
  }
  pthread_mutex_unlock(&r->lock);
  return say;
}

void tj__remote_get_counters(const tj__remote *r, tj__remote_counters *c)
{
  pthread_mutex_lock((pthread_mutex_t *)&r->lock);
  *c = r->n;
  pthread_mutex_unlock((pthread_mutex_t *)&r->lock);
}

/* ------------------------------------------------------- the breaker */

/* The breaker of key's server.  r->lock held. */
static breaker *brk_of(tj__remote *r, const char *key)
{
  int i = r->be->server_of(r->b, key);
  return &r->brk[i >= 0 && i < TJ__REMOTE_MAX_SERVERS ? i : 0];
}

/* May a command on key be sent now?  r->lock held. */
static int may_call(tj__remote *r, const char *key)
{
  const breaker *k = brk_of(r, key);
  return !k->off || now_ms() >= k->retry_at;
}

/* A number from 0 to n - 1, for jitter.  r->lock held. */
static long below(tj__remote *r, long n)
{
  r->seed ^= r->seed >> 12, r->seed ^= r->seed << 25, r->seed ^= r->seed >> 27;
  return (long)((r->seed * 0x2545F4914F6CDD1Dull) % (uint64_t)(n > 0 ? n : 1));
}

/* A command answered on a server that was off: on again.  r->lock
 * held. */
static void turn_on(tj__remote *r, breaker *k)
{
  k->off = 0;
  k->backoff = 0;
  int left = __atomic_sub_fetch(&r->noff, 1, __ATOMIC_ACQ_REL);
  r->changed = 1;
  snprintf(r->why, sizeof r->why, left ? "a remote server answers again; "
           "%d still off" : "remote tier on again: it answers", left);
}

/* A fault on k: off for the next backoff.  r->lock held. */
static void turn_off(tj__remote *r, breaker *k, const tj__remote_call *c)
{
  if (k->streak++ == 0)
    k->streak_at = now_ms();
  k->away = c->away;
  long first = r->set.backoff_ms;
  k->backoff = !k->backoff ? first
               : k->backoff < first * BACKOFF_GROWTH / 2 ? k->backoff * 2
                                                        : first * BACKOFF_GROWTH;
  k->retry_at = now_ms() + k->backoff / 2 + below(r, k->backoff + 1);
  if (k->off)
    return;
  k->off = 1;
  r->n.openings++;
  r->changed = 1;
  if (r->be->server_count(r->b) > 1)
    snprintf(r->why, sizeof r->why, "remote tier off for a while for one "
             "server's keys: %s; compiling them here instead, trying it "
             "again later", c->what);
  else
    snprintf(r->why, sizeof r->why, "remote tier off for a while: %s; "
             "compiling here instead, trying it again later", c->what);
  __atomic_add_fetch(&r->noff, 1, __ATOMIC_ACQ_REL);
}

/* A command on key ended: rc < 0 is a fault (c says why), which turns
 * key's server off for the next backoff; success turns it on again and,
 * unless flushing, publishes what waited.  The server is judged after
 * the command: a cluster's first command learns its map.  r->lock held. */
static void settle(tj__remote *r, const char *key, const tj__remote_call *c,
                   int rc, int flushing)
{
  breaker *k = brk_of(r, key);
  r->n.bytes_in += c->bytes_in;
  r->n.bytes_out += c->bytes_out;
  r->n.redirects += c->redirects;
  if (rc >= 0) {
    k->streak = 0;
    if (k->off) {
      turn_on(r, k);
      if (!flushing)
        flush_pending(r);
    }
    return;
  }
  if (c->timeout)
    r->n.timeouts++;
  else
    r->n.errors++;
  turn_off(r, k, c);
}

static void account(tj__remote *r, const char *key, const tj__remote_call *c,
                    int rc)
{
  settle(r, key, c, rc, 0);
}

/* ------------------------------------------------------- values */

/* The value format is record.c's, under this tier's magic. */
unsigned char *tj__remote_encode(const tj__cache_row *row, size_t *len)
{
  return tj__record_encode(MAGIC, row, len);
}

int tj__remote_decode(const unsigned char *b, size_t len,
                      const tj__cache_row *want, tj__remote_value *v)
{
  return tj__record_decode(MAGIC, b, len, want, v);
}

static int was_rejected(const tj__remote *r, const char *key)
{
  for (unsigned i = 0; i < REJECTED_MAX && i < r->nrejected; i++)
    if (strcmp(r->rejected[i], key) == 0)
      return 1;
  return 0;
}

int tj__remote_get(tj__remote *r, const tj__cache_row *want,
                   tj__remote_value *v, int *rejected)
{
  *rejected = 0;
  memset(v, 0, sizeof *v);
  tj__remote_call c = {0};
  unsigned char *val = NULL;
  size_t len = 0;
  pthread_mutex_lock(&r->lock);
  if (!may_call(r, want->key)) {
    pthread_mutex_unlock(&r->lock);
    return TJ_EIO;
  }
  int got = r->be->get(r->b, want->key, MAX_VALUE, &val, &len, &c);
  account(r, want->key, &c, got);
  int verdict = got > 0 ? tj__remote_decode(val, len, want, v) : 1;
  if (verdict == 0)
    r->n.hits++;
  else if (got >= 0)
    r->n.misses++;
  if (verdict == -1) {
    *rejected = 1;
    r->n.rejects++;
    if (!was_rejected(r, want->key))
      snprintf(r->rejected[r->nrejected++ % REJECTED_MAX], TJ__KEY_HEX, "%s",
               want->key);
  }
  pthread_mutex_unlock(&r->lock);
  free(val);
  return got < 0 ? TJ_EIO : verdict == 0 ? TJ_OK : TJ_ENOENT;
}

/* Keep a value for when the tier is back.  r->lock held. */
static void keep_pending(tj__remote *r, const char *key, unsigned char *val,
                         size_t len, int replace)
{
  if (r->npend == PENDING_MAX || r->pend_bytes + len > PENDING_BYTES) {
    free(val); /* only a help to others: the oldest ones stay */
    return;
  }
  pending *p = &r->pend[r->npend++];
  snprintf(p->key, sizeof p->key, "%s", key);
  p->val = val, p->len = len, p->replace = replace;
  r->pend_bytes += len;
  start_renewer(r); /* it publishes once the backoff has passed */
  pthread_cond_broadcast(&r->wake);
}

/* Publish what waited whose server may be asked now; a value whose
 * server is off, or faults, waits on.  0, or -1 when a fault came.
 * r->lock held. */
static int flush_pending(tj__remote *r)
{
  int kept = 0, rc = 0;
  for (int i = 0; i < r->npend; i++) {
    pending *p = &r->pend[i];
    tj__remote_call c = {0};
    int put = may_call(r, p->key)
                  ? r->be->put(r->b, p->key, p->val, p->len, p->replace,
                               r->set.ttl_s, &c)
                  : -2;
    if (put != -2)
      settle(r, p->key, &c, put, 1);
    if (put < 0) {
      rc |= put == -1 ? -1 : 0;
      r->pend[kept++] = *p;
      continue;
    }
    r->n.published++;
    r->pend_bytes -= p->len;
    free(p->val);
  }
  r->npend = kept;
  return rc;
}

int tj__remote_put(tj__remote *r, const tj__cache_row *row)
{
  if (r->set.readonly)
    return TJ_OK;
  size_t len;
  unsigned char *b = tj__remote_encode(row, &len);
  if (!b)
    return TJ_OK; /* out of memory: the value is only a help to others */
  pthread_mutex_lock(&r->lock);
  int replace = was_rejected(r, row->key), rc = 0;
  if (!may_call(r, row->key)) {
    keep_pending(r, row->key, b, len, replace);
    b = NULL;
  } else {
    tj__remote_call c = {0};
    rc = r->be->put(r->b, row->key, b, len, replace, r->set.ttl_s, &c);
    account(r, row->key, &c, rc);
    if (rc < 0)
      keep_pending(r, row->key, b, len, replace), b = NULL;
  }
  pthread_mutex_unlock(&r->lock);
  free(b);
  return rc < 0 ? TJ_EIO : TJ_OK;
}

/* ------------------------------------------------------- leases */

/* Account for one command sent (call it only when may_call said so) and
 * get the call ready for the next.  r->lock held. */
static int done(tj__remote *r, const char *key, tj__remote_call *c, int rc)
{
  account(r, key, c, rc);
  memset(c, 0, sizeof *c);
  return rc;
}

/* When the renewer wakes next: a third of the lease time from now, or
 * sooner, when values wait for the tier, at the end of its backoff.
 * r->lock held. */
static void next_wake(const tj__remote *r, struct timespec *at)
{
  long ms = r->set.lease_ms / 3;
  long long left = ms;
  for (int i = 0; i < TJ__REMOTE_MAX_SERVERS && r->npend && r->noff; i++)
    if (r->brk[i].off && r->brk[i].retry_at - now_ms() < left)
      left = r->brk[i].retry_at - now_ms();
  if (left < ms)
    ms = left > 1 ? (long)left : 1;
  clock_gettime(CLOCK_REALTIME, at);
  at->tv_sec += ms / 1000;
  at->tv_nsec += (ms % 1000) * 1000000L;
  if (at->tv_nsec >= 1000000000L)
    at->tv_sec++, at->tv_nsec -= 1000000000L;
}

/* Renew l: 1, 0 when it is no longer ours, -1 on a fault (a connection
 * the server closed meanwhile is none: the backend sends the renewal
 * again on a new one, so that a restart costs the holder no renewal).
 * A lease that is gone
 * (the server restarted empty, or it expired while this process
 * stalled and nobody took it over) is taken again under its token, as
 * the waiters expect (they give a holder that vanished more than one
 * renewal before they take the lease themselves); one that another
 * holds was taken over.  r->lock held. */
static int renew(tj__remote *r, tj__remote_lease *l)
{
  long ms = r->set.lease_ms;
  tj__remote_call c = {0};
  int rc = done(r, l->key, &c, r->be->lease_renew(r->b, l->key, l->token,
                                                  ms, &c));
  if (rc == 0 && may_call(r, l->key))
    rc = done(r, l->key, &c, r->be->lease_take(r->b, l->key, l->token, NULL,
                                               ms, &c));
  return rc;
}

/* Renew the leases held here.  r->lock held. */
static void renew_held(tj__remote *r)
{
  for (int i = 0; i < HELD_MAX && !r->stopping; i++) {
    tj__remote_lease *l = r->held[i];
    if (!l || !may_call(r, l->key))
      continue;
    int rc = renew(r, l);
    r->n.renewals += rc == 1;
    if (rc == 0) /* taken over: no longer ours to renew */
      r->held[i] = NULL;
  }
}

/* The tier's thread: renews the leases held here and, once a backoff
 * has passed, publishes the values that wait for the tier, so that the
 * processes waiting on a lease held here find the value without this
 * process sending another command. */
static void *renewer(void *arg)
{
  tj__remote *r = arg;
  pthread_mutex_lock(&r->lock);
  while (!r->stopping) {
    struct timespec at;
    next_wake(r, &at);
    pthread_cond_timedwait(&r->wake, &r->lock, &at);
    if (r->npend && r->noff && !r->stopping)
      flush_pending(r);
    renew_held(r);
  }
  pthread_mutex_unlock(&r->lock);
  return NULL;
}

/* The tier's thread, started the first time it has work.  r->lock
 * held. */
static void start_renewer(tj__remote *r)
{
  if (!r->renewer_on && !r->stopping) {
    r->renewer_on = pthread_create(&r->renewer, NULL, renewer, r) == 0;
    r->renewer_pid = getpid();
  }
}

/* Renew l from now on.  r->lock held. */
static void hold(tj__remote *r, tj__remote_lease *l)
{
  l->held = 1;
  for (int i = 0; i < HELD_MAX; i++)
    if (!r->held[i]) {
      r->held[i] = l;
      break;
    }
  start_renewer(r);
}

/* What one step of the wait decides.  OFF: a command failed or the
 * tier is off, nothing learnt. */
enum { STEP_OFF = -2, STEP_ALONE = -1, STEP_WAIT, STEP_LOOK, STEP_HOLD };

/* What a waiter has seen: the holder it waits for (its token, since
 * when, for how long at most), whether the server was away meanwhile,
 * and when the holder vanished with no value behind it, and how long it
 * is given to come back. */
typedef struct waiting {
  char seen[TJ__REMOTE_TOKEN];
  long long since;
  long bound;
  int unsure;        /* the server was away: a lease may have been lost */
  long long gone_at; /* 0 while a lease or nothing was seen */
  long grace;
} waiting;

/* Was key's server away lately (the last fault got nothing of an
 * answer, and nothing answered since)?  Then it may have restarted
 * empty, and no lease there does not mean that nobody holds one.
 * r->lock held. */
static int away_lately(tj__remote *r, const char *key)
{
  const breaker *k = brk_of(r, key);
  return k->off && k->away;
}

/* No lease, and no value: the holder seen (or one that a server away
 * meanwhile may have lost) stopped and its lease expired, or the server
 * restarted empty while it compiles on.  Such a holder finds its lease
 * gone at its next renewal, within a third of the lease time, and takes
 * it again, so a waiter gives it that and a quarter to a half more
 * (jittered, so that the waiters do not all ask at once) before it
 * takes the lease itself.  A key whose value failed its check here has a
 * value whatever the holder did: the lease is taken at once, and the
 * look again tells whether the holder replaced it.  r->lock held. */
static int vanished(tj__remote *r, tj__remote_lease *l, waiting *w)
{
  long ms = r->set.lease_ms;
  tj__remote_call c = {0};
  long long t = now_ms();
  if (!w->gone_at) {
    w->gone_at = t;
    w->grace = was_rejected(r, l->key)
                   ? 0 : ms / 3 + ms / 12 + below(r, ms / 12 + 1);
  }
  if (t - w->gone_at < w->grace)
    return STEP_WAIT;
  if (r->set.readonly)
    return STEP_ALONE;
  int k = may_call(r, l->key) ? done(r, l->key, &c, r->be->lease_take(
                                    r->b, l->key, l->token, NULL, ms, &c))
                      : -1;
  return k < 0 ? STEP_OFF : k > 0 ? STEP_HOLD : STEP_WAIT;
}

/* One step of the wait; w->bound is how long the holder seen may hold
 * the lease before one waiter takes it over.  r->lock held. */
static int lease_step(tj__remote *r, tj__remote_lease *l, waiting *w,
                      long wait_ms)
{
  int ro = r->set.readonly;
  long ms = r->set.lease_ms;
  tj__remote_call c = {0};
  /* A lease nobody was seen holding is taken at once; once a holder was
   * seen, or the server was away, who holds it is asked first (vanished
   * says why). */
  int wary = w->seen[0] || w->unsure;
  if (!ro && !wary) {
    int t = may_call(r, l->key) ? done(r, l->key, &c, r->be->lease_take(
                                      r->b, l->key, l->token, NULL, ms, &c))
                        : -1;
    if (t != 0)
      return t > 0 ? STEP_HOLD : STEP_OFF;
  }
  char holder[TJ__REMOTE_TOKEN] = "";
  int h = may_call(r, l->key) ? done(r, l->key, &c, r->be->lease_holder(
                                    r->b, l->key, holder, sizeof holder, &c))
                      : -1;
  if (h < 0)
    return STEP_OFF;
  if (h == 0 && !wary)
    return ro ? STEP_ALONE : STEP_WAIT; /* nobody is making it; or it was
                                           released meanwhile: take it */
  if (h > 0 && strcmp(holder, w->seen) != 0) { /* a new holder: wait for
                                      it afresh, longer when it took the
                                      lease over */
    w->bound = w->seen[0] ? TAKEOVER_WAITS * wait_ms : wait_ms;
    snprintf(w->seen, sizeof w->seen, "%s", holder);
    w->since = now_ms();
  }
  if (h > 0)
    w->gone_at = 0;
  if (!was_rejected(r, l->key)) {
    int have = may_call(r, l->key)
                   ? done(r, l->key, &c, r->be->exists(r->b, l->key, &c))
                           : -1;
    if (have != 0)
      return have > 0 ? STEP_LOOK : STEP_OFF;
  }
  if (h == 0)
    return vanished(r, l, w);
  if (now_ms() - w->since < w->bound)
    return STEP_WAIT;
  if (ro)
    return STEP_ALONE;
  /* The holder outlived the wait: one waiter takes it from that holder. */
  int t = may_call(r, l->key) ? done(r, l->key, &c, r->be->lease_take(
                                    r->b, l->key, l->token, w->seen, ms, &c))
                      : -1;
  return t < 0 ? STEP_OFF : t > 0 ? STEP_HOLD : STEP_WAIT;
}

/* The lease was taken after another held it: from a holder that stopped
 * (no value of its own behind it), not one that finished?  r->lock held. */
static int taken_over(tj__remote *r, const tj__remote_lease *l)
{
  tj__remote_call c = {0};
  if (was_rejected(r, l->key) || !may_call(r, l->key))
    return 0;
  return done(r, l->key, &c, r->be->exists(r->b, l->key, &c)) == 0;
}

/* After a step that met the tier off: wait on (the fault is ridden
 * out, RIDE_FAULTS says when) for at most the lease time since the
 * first fault, as long as a dead holder may cost, and while the wait
 * has time left.  r->lock held. */
static int ride_out(tj__remote *r, const char *key, long long since,
                    long wait_ms)
{
  const breaker *k = brk_of(r, key);
  long long t = now_ms();
  return k->away && k->streak < RIDE_FAULTS &&
         t - k->streak_at < r->set.lease_ms && t - since < wait_ms;
}

int tj__remote_lease_begin(tj__remote *r, const char *key, long wait_ms,
                           tj__remote_lease *l)
{
  memset(l, 0, sizeof *l);
  snprintf(l->key, sizeof l->key, "%s", key);
  uint64_t seed = tj__lease_seed();
  snprintf(l->token, sizeof l->token, "%ld-%016llx", (long)getpid(),
           (unsigned long long)seed);
  waiting w = {.since = now_ms(), .bound = wait_ms};
  long delay = POLL_FIRST_MS;
  for (int waited = 0;; waited = 1) {
    pthread_mutex_lock(&r->lock);
    w.unsure |= away_lately(r, l->key);
    int step = lease_step(r, l, &w, wait_ms);
    w.unsure |= away_lately(r, l->key);
    if (step == STEP_HOLD) {
      hold(r, l);
      r->n.takeovers += w.seen[0] && taken_over(r, l);
    }
    if (step == STEP_OFF && ride_out(r, l->key, w.since, w.bound))
      step = STEP_WAIT;
    pthread_mutex_unlock(&r->lock);
    if (step != STEP_WAIT)
      return step == STEP_LOOK || (step == STEP_HOLD && waited);
    tj__lease_sleep_jittered(delay, &seed);
    delay = delay * 3 / 2 < POLL_MAX_MS ? delay * 3 / 2 : POLL_MAX_MS;
  }
}

void tj__remote_lease_end(tj__remote *r, tj__remote_lease *l)
{
  if (!l->held)
    return;
  pthread_mutex_lock(&r->lock);
  for (int i = 0; i < HELD_MAX; i++)
    if (r->held[i] == l)
      r->held[i] = NULL;
  tj__remote_call c = {0};
  if (may_call(r, l->key))
    done(r, l->key, &c, r->be->lease_release(r->b, l->key, l->token, &c));
  pthread_mutex_unlock(&r->lock);
  l->held = 0;
}
