/*
 * remote.c: the remote tier on Redis (remote.h says what it promises).
 *
 * A value is immutable and says what it is (record.h: magic "TJREMOTE",
 * the key echoed, every column, the code and its hash, a check over it
 * all), so that a reader trusts nothing but its own checks.  A reader
 * asks for at most the largest value
 * that could pass (GETRANGE), so a huge value costs it no more memory than
 * a good one.  Whoever can write to the servers chooses the code that
 * matches a key: the servers must be writable by trusted users only, as a
 * system cache must be (README, "The remote tier").
 *
 * One mutex guards the connections: hiredis contexts are not thread-safe,
 * and a command takes at most the operation timeout.  hiredis writes
 * with write(2), which raises SIGPIPE on a connection the server closed;
 * each command blocks it on the calling thread and takes back a SIGPIPE of
 * its own making, so that the host program never sees one.
 */
#include "config.h"
#include "record.h"
#include "remote.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#ifdef TJ_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

#define MAGIC "TJREMOTE"
/* The most a value that can pass may hold. */
#define MAX_VALUE TJ__RECORD_MAX_BYTES

typedef struct server {
  char host[256];
  int port;
  char name[300]; /* "HOST:PORT", hashed for placement */
  uint64_t seed;
  void *ctx;      /* redisContext, connected when first needed */
} server;

struct tj__remote {
  tj__remote_settings set;
  int nservers;
  server servers[TJ__REMOTE_MAX_SERVERS];
  pthread_mutex_t lock;
  int off;
  int warned;
  char why[512];
  tj__remote_counters n;
  /* Keys whose value failed its check here: the next put replaces it. */
  char rejected[8][TJ__KEY_HEX];
  unsigned nrejected;
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
  s->lease_ms = env_long("TOKITAI_JIT_REMOTE_LEASE_MS", 10000, 1, 3600000,
                         why, len);
  const char *ro = getenv("TOKITAI_JIT_REMOTE_READONLY");
  s->readonly = ro && *ro && strcmp(ro, "0") != 0;
}

/* ------------------------------------------------------- the spec */

/* "redis://HOST:PORT", HOST a name or an IPv4 address, or [IPv6]. */
static int parse_url(const char *u, size_t n, server *sv, char *msg,
                     size_t len)
{
  static const char scheme[] = "redis://";
  if (n < sizeof scheme || strncmp(u, scheme, sizeof scheme - 1) != 0)
    return snprintf(msg, len, "remote '%.*s' is not redis://HOST:PORT",
                    (int)(n > 200 ? 200 : n), u), TJ_EINVAL;
  const char *h = u + sizeof scheme - 1, *end = u + n, *colon;
  if (*h == '[') {
    const char *close = memchr(h, ']', (size_t)(end - h));
    colon = close && close + 1 < end && close[1] == ':' ? close + 1 : NULL;
    h++;
    if (colon && (size_t)(colon - 1 - h) < sizeof sv->host)
      snprintf(sv->host, sizeof sv->host, "%.*s", (int)(colon - 1 - h), h);
  } else {
    colon = NULL;
    for (const char *p = h; p < end; p++)
      if (*p == ':')
        colon = p;
    if (colon && (size_t)(colon - h) < sizeof sv->host)
      snprintf(sv->host, sizeof sv->host, "%.*s", (int)(colon - h), h);
  }
  char digits[8] = "";
  size_t dl = colon ? (size_t)(end - colon - 1) : 0;
  if (dl > 0 && dl < sizeof digits)
    memcpy(digits, colon + 1, dl), digits[dl] = '\0';
  char *stop;
  long port = dl ? strtol(digits, &stop, 10) : 0;
  if (!colon || !sv->host[0] || !dl || dl >= sizeof digits || *stop ||
      port < 1 || port > 65535 || strspn(digits, "0123456789") != dl)
    return snprintf(msg, len, "remote '%.*s' is not redis://HOST:PORT (a "
                    "host, and a port from 1 to 65535)",
                    (int)(n > 200 ? 200 : n), u), TJ_EINVAL;
  for (const char *p = sv->host; *p; p++)
    if ((unsigned char)*p <= ' ' || *p == '/' || *p == '@' || *p == '?')
      return snprintf(msg, len, "remote '%.*s': the host has a character "
                      "a host name cannot have", (int)(n > 200 ? 200 : n),
                      u), TJ_EINVAL;
  sv->port = (int)port;
  size_t hl = strlen(sv->host);
  memcpy(sv->name, sv->host, hl);
  snprintf(sv->name + hl, sizeof sv->name - hl, ":%d", sv->port);
  sv->seed = XXH3_64bits(sv->name, strlen(sv->name));
  return TJ_OK;
}

int tj__remote_open(const char *spec, const tj__remote_settings *s,
                    tj__remote **out, char *msg, size_t len)
{
  *out = NULL;
  msg[0] = '\0';
#ifndef TJ_HAVE_HIREDIS
  (void)spec;
  (void)s;
  snprintf(msg, len, "this libtokitai-jit was built without hiredis "
           "(./configure --with-hiredis)");
  return TJ_EIO;
#else
  tj__remote *r = calloc(1, sizeof *r);
  if (!r)
    return snprintf(msg, len, "out of memory"), TJ_ENOMEM;
  pthread_mutex_init(&r->lock, NULL);
  r->set = *s;
  for (const char *p = spec; *p;) {
    size_t n = strcspn(p, ",");
    if (n == 0 || (p[n] == ',' && !p[n + 1])) {
      snprintf(msg, len, "the remote list '%.200s' has an empty entry", spec);
      tj__remote_close(r);
      return TJ_EINVAL;
    }
    const char *q = memchr(p, '?', n);
    size_t un = q ? (size_t)(q - p) : n;
    if (q) {
      if (n - un != strlen("?readonly") || strncmp(q, "?readonly", n - un)) {
        snprintf(msg, len, "remote '%.*s': the only option is ?readonly",
                 (int)(n > 200 ? 200 : n), p);
        tj__remote_close(r);
        return TJ_EINVAL;
      }
      r->set.readonly = 1;
    }
    if (r->nservers == TJ__REMOTE_MAX_SERVERS) {
      snprintf(msg, len, "more than %d remote servers", TJ__REMOTE_MAX_SERVERS);
      tj__remote_close(r);
      return TJ_EINVAL;
    }
    server *sv = &r->servers[r->nservers];
    if (parse_url(p, un, sv, msg, len) != TJ_OK) {
      tj__remote_close(r);
      return TJ_EINVAL;
    }
    for (int i = 0; i < r->nservers; i++)
      if (strcmp(r->servers[i].name, sv->name) == 0) {
        snprintf(msg, len, "remote '%.*s' is listed twice",
                 (int)(un > 200 ? 200 : un), p);
        tj__remote_close(r);
        return TJ_EINVAL;
      }
    r->nservers++;
    p += n + (p[n] == ',');
  }
  if (r->nservers == 0) {
    snprintf(msg, len, "the remote list is empty");
    tj__remote_close(r);
    return TJ_EINVAL;
  }
  *out = r;
  return TJ_OK;
#endif
}

void tj__remote_close(tj__remote *r)
{
  if (!r)
    return;
#ifdef TJ_HAVE_HIREDIS
  for (int i = 0; i < r->nservers; i++)
    if (r->servers[i].ctx)
      redisFree(r->servers[i].ctx);
  pthread_mutex_destroy(&r->lock);
#endif
  free(r);
}

int tj__remote_readonly(const tj__remote *r) { return r->set.readonly; }
int tj__remote_server_count(const tj__remote *r) { return r->nservers; }

int tj__remote_server_of(const tj__remote *r, const char *key)
{
  int best = 0;
  uint64_t top = 0;
  size_t n = strlen(key);
  for (int i = 0; i < r->nservers; i++) {
    uint64_t w = XXH3_64bits_withSeed(key, n, r->servers[i].seed);
    if (i == 0 || w > top)
      top = w, best = i;
  }
  return best;
}

int tj__remote_off(const tj__remote *r)
{
  return __atomic_load_n(&r->off, __ATOMIC_ACQUIRE);
}

int tj__remote_take_warning(tj__remote *r, char *out, size_t len)
{
  int say = 0;
  pthread_mutex_lock(&r->lock);
  if (r->off && !r->warned) {
    r->warned = say = 1;
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

/* ------------------------------------------------------- commands */

#ifdef TJ_HAVE_HIREDIS

/* The tier goes off: said once (tj__remote_take_warning).  r->lock held. */
static void go_off(tj__remote *r, const server *sv, int timeout,
                   const char *what)
{
  if (timeout)
    r->n.timeouts++;
  else
    r->n.errors++;
  if (!r->off)
    snprintf(r->why, sizeof r->why, "remote tier off for this process: "
             "%s %s %s; compiling here instead", sv->name,
             timeout ? "did not answer in time:" : "failed:", what);
  __atomic_store_n(&r->off, 1, __ATOMIC_RELEASE);
}

static int is_timeout(int err, int saved_errno, const char *errstr)
{
  return (err == REDIS_ERR_IO &&
          (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK ||
           saved_errno == ETIMEDOUT || saved_errno == EINPROGRESS)) ||
         strstr(errstr, "timed out") ||
         strstr(errstr, "temporarily unavailable");
}

static struct timeval ms_tv(long ms)
{
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  return tv;
}

/* The connection to sv, made now if need be; NULL when the tier went off. */
static redisContext *connect_to(tj__remote *r, server *sv)
{
  if (sv->ctx)
    return sv->ctx;
  errno = 0;
  redisContext *c = redisConnectWithTimeout(sv->host, sv->port,
                                            ms_tv(r->set.connect_timeout_ms));
  int e = errno;
  if (!c || c->err) {
    go_off(r, sv, c ? is_timeout(c->err, e, c->errstr) : 0,
           c ? c->errstr : "out of memory");
    if (c)
      redisFree(c);
    return NULL;
  }
  if (redisSetTimeout(c, ms_tv(r->set.timeout_ms)) != REDIS_OK) {
    go_off(r, sv, 0, "could not set the operation timeout");
    redisFree(c);
    return NULL;
  }
  sv->ctx = c;
  return c;
}

/* One command to the server of key, argv style: its reply, or NULL when
 * the tier is off (now or before).  r->lock held.  A reply that is an
 * error turns the tier off too: a server that refuses our commands (a
 * replica, a server still loading, a script that is disabled) is not one
 * to rely on. */
static redisReply *command(tj__remote *r, const char *key, int argc,
                           const char **argv, const size_t *argl)
{
  if (r->off)
    return NULL;
  server *sv = &r->servers[tj__remote_server_of(r, key)];
  redisContext *c = connect_to(r, sv);
  if (!c)
    return NULL;
  sigset_t pipe_set, old, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  sigpending(&pending);
  int was_pending = sigismember(&pending, SIGPIPE);
  errno = 0;
  redisReply *rep = redisCommandArgv(c, argc, argv, argl);
  int e = errno;
  if (!was_pending) {
    struct timespec zero = {0, 0};
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE))
      (void)sigtimedwait(&pipe_set, NULL, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  for (int i = 0; i < argc; i++)
    r->n.bytes_out += argl[i];
  if (!rep) {
    go_off(r, sv, is_timeout(c->err, e, c->errstr), c->errstr);
    redisFree(c);
    sv->ctx = NULL;
    return NULL;
  }
  if (rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_STATUS)
    r->n.bytes_in += rep->len;
  if (rep->type == REDIS_REPLY_ERROR) {
    char what[160];
    snprintf(what, sizeof what, "it answered '%.120s'", rep->str);
    go_off(r, sv, 0, what);
    freeReplyObject(rep);
    return NULL;
  }
  return rep;
}

static void name_of(char *out, size_t len, const char *kind, const char *key)
{
  snprintf(out, len, TJ__REMOTE_NAMESPACE "%s:%s", kind, key);
}

int tj__remote_get(tj__remote *r, const tj__cache_row *want,
                   tj__remote_value *v, int *rejected)
{
  char name[128], last[32];
  *rejected = 0;
  memset(v, 0, sizeof *v);
  name_of(name, sizeof name, "code", want->key);
  snprintf(last, sizeof last, "%llu", (unsigned long long)MAX_VALUE - 1);
  const char *argv[] = {"GETRANGE", name, "0", last};
  size_t argl[] = {8, strlen(name), 1, strlen(last)};
  pthread_mutex_lock(&r->lock);
  redisReply *rep = command(r, want->key, 4, argv, argl);
  int rc = TJ_EIO;
  if (rep && rep->type == REDIS_REPLY_STRING && rep->len == 0) {
    r->n.misses++;
    rc = TJ_ENOENT;
  } else if (rep) {
    int verdict = rep->type == REDIS_REPLY_STRING
                      ? tj__remote_decode((const unsigned char *)rep->str,
                                    (size_t)rep->len, want, v)
                      : -1;
    if (verdict == 0) {
      r->n.hits++;
      rc = TJ_OK;
    } else {
      r->n.misses++;
      *rejected = verdict == -1;
      if (*rejected) {
        r->n.rejects++;
        snprintf(r->rejected[r->nrejected++ % 8], TJ__KEY_HEX, "%s",
                 want->key);
      }
      rc = TJ_ENOENT;
    }
  }
  pthread_mutex_unlock(&r->lock);
  if (rep)
    freeReplyObject(rep);
  return rc;
}

int tj__remote_put(tj__remote *r, const tj__cache_row *row, int replace)
{
  if (r->set.readonly)
    return TJ_OK;
  size_t len;
  unsigned char *b = tj__remote_encode(row, &len);
  if (!b)
    return TJ_OK; /* out of memory: the value is only a help to others */
  char name[128], ttl[24];
  name_of(name, sizeof name, "code", row->key);
  snprintf(ttl, sizeof ttl, "%ld", r->set.ttl_s);
  const char *argv[6] = {"SET", name, (const char *)b};
  size_t argl[6] = {3, strlen(name), len};
  int argc = 3;
  pthread_mutex_lock(&r->lock);
  for (unsigned i = 0; i < 8 && i < r->nrejected; i++)
    replace |= strcmp(r->rejected[i], row->key) == 0;
  if (!replace)
    argv[argc] = "NX", argl[argc++] = 2;
  if (r->set.ttl_s > 0) {
    argv[argc] = "EX", argl[argc++] = 2;
    argv[argc] = ttl, argl[argc++] = strlen(ttl);
  }
  redisReply *rep = command(r, row->key, argc, argv, argl);
  pthread_mutex_unlock(&r->lock);
  free(b);
  if (rep)
    freeReplyObject(rep);
  return rep ? TJ_OK : TJ_EIO;
}

int tj__remote_lease_take(tj__remote *r, const char *key, const char *token)
{
  char name[128], ms[24];
  name_of(name, sizeof name, "lease", key);
  snprintf(ms, sizeof ms, "%ld", r->set.lease_ms);
  const char *argv[] = {"SET", name, token, "NX", "PX", ms};
  size_t argl[] = {3, strlen(name), strlen(token), 2, 2, strlen(ms)};
  pthread_mutex_lock(&r->lock);
  redisReply *rep = command(r, key, 6, argv, argl);
  pthread_mutex_unlock(&r->lock);
  if (!rep)
    return -1;
  int taken = rep->type == REDIS_REPLY_STATUS;
  freeReplyObject(rep);
  return taken;
}

void tj__remote_lease_release(tj__remote *r, const char *key,
                              const char *token)
{
  static const char script[] =
      "if redis.call('get', KEYS[1]) == ARGV[1] then "
      "return redis.call('del', KEYS[1]) else return 0 end";
  char name[128];
  name_of(name, sizeof name, "lease", key);
  const char *argv[] = {"EVAL", script, "1", name, token};
  size_t argl[] = {4, sizeof script - 1, 1, strlen(name), strlen(token)};
  pthread_mutex_lock(&r->lock);
  redisReply *rep = command(r, key, 5, argv, argl);
  pthread_mutex_unlock(&r->lock);
  if (rep)
    freeReplyObject(rep);
}

int tj__remote_exists(tj__remote *r, const char *key, int which)
{
  char name[128];
  name_of(name, sizeof name, which ? "lease" : "code", key);
  const char *argv[] = {"EXISTS", name};
  size_t argl[] = {6, strlen(name)};
  pthread_mutex_lock(&r->lock);
  redisReply *rep = command(r, key, 2, argv, argl);
  pthread_mutex_unlock(&r->lock);
  if (!rep)
    return -1;
  int yes = rep->type == REDIS_REPLY_INTEGER && rep->integer > 0;
  freeReplyObject(rep);
  return yes;
}

#else /* !TJ_HAVE_HIREDIS: tj__remote_open never makes one */

int tj__remote_get(tj__remote *r, const tj__cache_row *want,
                   tj__remote_value *v, int *rejected)
{
  (void)r, (void)want, (void)v;
  *rejected = 0;
  return TJ_EIO;
}
int tj__remote_put(tj__remote *r, const tj__cache_row *row, int replace)
{
  (void)r, (void)row, (void)replace;
  return TJ_EIO;
}
int tj__remote_lease_take(tj__remote *r, const char *key, const char *token)
{
  (void)r, (void)key, (void)token;
  return -1;
}
void tj__remote_lease_release(tj__remote *r, const char *key,
                              const char *token)
{
  (void)r, (void)key, (void)token;
}
int tj__remote_exists(tj__remote *r, const char *key, int which)
{
  (void)r, (void)key, (void)which;
  return -1;
}
#endif
