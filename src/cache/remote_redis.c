/*
 * remote_redis.c: the remote tier's backend on standalone Redis servers
 * (remote.h says what a backend promises).
 *
 * A spec is "redis://HOST:PORT" entries, commas between them; each key
 * lives on one server, chosen by rendezvous (highest random weight)
 * hashing over the key and the server's "HOST:PORT", so that adding a
 * server moves only the keys it wins.
 *
 * hiredis connects and formats commands and parses answers; the socket
 * I/O is here, so that a command is bounded as a whole: the connection is
 * non-blocking, every wait is a poll(2) for what is left of one deadline,
 * and the answer's header is judged before its body is read: a type the
 * command does not return, an array (no command here returns one) or a
 * string longer than the command's bound is a fault, read no further.
 * Writes use MSG_NOSIGNAL: a server that closed the connection raises no
 * SIGPIPE in the host program.
 */
#include "config.h"
#include "remote.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#ifdef TJ_HAVE_HIREDIS
#include <hiredis/hiredis.h>

/* The longest answer header ("$123\r\n") read before it must end. */
#define HEADER_MAX 32

typedef struct server {
  char host[256];
  int port;
  char name[300]; /* "HOST:PORT", hashed for placement */
  uint64_t seed;
  redisContext *ctx; /* connected when first needed */
} server;

typedef struct redis_backend {
  tj__remote_settings set;
  int nservers;
  server servers[TJ__REMOTE_MAX_SERVERS];
} redis_backend;

/* What one command may answer: its types ("+:$" ...), the longest bulk
 * string (-1: only a nil one). */
typedef struct expect {
  const char *types;
  long long max_bulk;
} expect;

/* ------------------------------------------------------- the spec */

static int bad_url(const char *u, size_t n, const char *why, char *msg,
                   size_t len)
{
  snprintf(msg, len, "remote '%.*s' %s", (int)(n > 200 ? 200 : n), u, why);
  return TJ_EINVAL;
}

/* HOST and PORT from "HOST:PORT" or "[IPv6]:PORT" in h..end. */
static int split_host(const char *h, const char *end, server *sv,
                      const char **colon)
{
  *colon = NULL;
  if (*h == '[') {
    const char *close = memchr(h, ']', (size_t)(end - h));
    *colon = close && close + 1 < end && close[1] == ':' ? close + 1 : NULL;
    h++;
    if (*colon && (size_t)(*colon - 1 - h) < sizeof sv->host)
      snprintf(sv->host, sizeof sv->host, "%.*s", (int)(*colon - 1 - h), h);
  } else {
    for (const char *p = h; p < end; p++)
      if (*p == ':')
        *colon = p;
    if (*colon && (size_t)(*colon - h) < sizeof sv->host)
      snprintf(sv->host, sizeof sv->host, "%.*s", (int)(*colon - h), h);
  }
  return 0;
}

/* "redis://HOST:PORT", HOST a name or an IPv4 address, or [IPv6]. */
static int parse_url(const char *u, size_t n, server *sv, char *msg,
                     size_t len)
{
  static const char scheme[] = "redis://";
  if (n < sizeof scheme || strncmp(u, scheme, sizeof scheme - 1) != 0)
    return bad_url(u, n, "is not redis://HOST:PORT", msg, len);
  const char *end = u + n, *colon;
  split_host(u + sizeof scheme - 1, end, sv, &colon);
  char digits[8] = "";
  size_t dl = colon ? (size_t)(end - colon - 1) : 0;
  if (dl > 0 && dl < sizeof digits)
    memcpy(digits, colon + 1, dl), digits[dl] = '\0';
  char *stop;
  long port = dl ? strtol(digits, &stop, 10) : 0;
  if (!colon || !sv->host[0] || !dl || dl >= sizeof digits || *stop ||
      port < 1 || port > 65535 || strspn(digits, "0123456789") != dl)
    return bad_url(u, n, "is not redis://HOST:PORT (a host, and a port "
                   "from 1 to 65535)", msg, len);
  for (const char *p = sv->host; *p; p++)
    if ((unsigned char)*p <= ' ' || *p == '/' || *p == '@' || *p == '?')
      return bad_url(u, n, ": the host has a character a host name cannot "
                     "have", msg, len);
  sv->port = (int)port;
  size_t hl = strlen(sv->host);
  memcpy(sv->name, sv->host, hl);
  snprintf(sv->name + hl, sizeof sv->name - hl, ":%d", sv->port);
  sv->seed = XXH3_64bits(sv->name, strlen(sv->name));
  return TJ_OK;
}

/* One entry of the spec (p, n bytes) into the next server. */
static int add_server(redis_backend *rb, const char *p, size_t n,
                      int *readonly, char *msg, size_t len)
{
  const char *q = memchr(p, '?', n);
  size_t un = q ? (size_t)(q - p) : n;
  if (q) {
    if (n - un != strlen("?readonly") || strncmp(q, "?readonly", n - un))
      return bad_url(p, n, ": the only option is ?readonly", msg, len);
    *readonly = 1;
  }
  if (rb->nservers == TJ__REMOTE_MAX_SERVERS)
    return snprintf(msg, len, "more than %d remote servers",
                    TJ__REMOTE_MAX_SERVERS), TJ_EINVAL;
  server *sv = &rb->servers[rb->nservers];
  if (parse_url(p, un, sv, msg, len) != TJ_OK)
    return TJ_EINVAL;
  for (int i = 0; i < rb->nservers; i++)
    if (strcmp(rb->servers[i].name, sv->name) == 0)
      return bad_url(p, un, "is listed twice", msg, len);
  rb->nservers++;
  return TJ_OK;
}

static void redis_close(void *b)
{
  redis_backend *rb = b;
  if (!rb)
    return;
  for (int i = 0; i < rb->nservers; i++)
    if (rb->servers[i].ctx)
      redisFree(rb->servers[i].ctx);
  free(rb);
}

static int redis_open(const char *spec, const tj__remote_settings *s,
                      void **out, int *readonly, char *msg, size_t len)
{
  redis_backend *rb = calloc(1, sizeof *rb);
  if (!rb)
    return snprintf(msg, len, "out of memory"), TJ_ENOMEM;
  rb->set = *s;
  for (const char *p = spec; *p;) {
    size_t n = strcspn(p, ",");
    int rc = n == 0 || (p[n] == ',' && !p[n + 1])
                 ? (snprintf(msg, len, "the remote list '%.200s' has an "
                             "empty entry", spec), TJ_EINVAL)
                 : add_server(rb, p, n, readonly, msg, len);
    if (rc != TJ_OK) {
      redis_close(rb);
      return rc;
    }
    p += n + (p[n] == ',');
  }
  if (rb->nservers == 0) {
    redis_close(rb);
    return snprintf(msg, len, "the remote list is empty"), TJ_EINVAL;
  }
  *out = rb;
  return TJ_OK;
}

static int redis_server_count(void *b) { return ((redis_backend *)b)->nservers; }

static int redis_server_of(void *b, const char *key)
{
  const redis_backend *rb = b;
  int best = 0;
  uint64_t top = 0;
  size_t n = strlen(key);
  for (int i = 0; i < rb->nservers; i++) {
    uint64_t w = XXH3_64bits_withSeed(key, n, rb->servers[i].seed);
    if (i == 0 || w > top)
      top = w, best = i;
  }
  return best;
}

/* ------------------------------------------------------- one command */

static long long now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int fault(tj__remote_call *c, const server *sv, int timeout,
                 const char *what)
{
  c->timeout = timeout;
  snprintf(c->what, sizeof c->what, "%s %s %s", sv->name,
           timeout ? "did not answer in time:" : "failed:", what);
  return -1;
}

/* The connection to sv, made now if need be (within the connect
 * timeout), non-blocking; NULL with c->what set. */
static redisContext *connect_to(redis_backend *rb, server *sv,
                                tj__remote_call *c)
{
  if (sv->ctx)
    return sv->ctx;
  long ms = rb->set.connect_timeout_ms;
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  errno = 0;
  redisContext *x = redisConnectWithTimeout(sv->host, sv->port, tv);
  int e = errno;
  if (!x || x->err) {
    int timeout = x && (e == ETIMEDOUT || e == EINPROGRESS || e == EAGAIN ||
                        strstr(x->errstr, "timed out"));
    fault(c, sv, timeout, x ? x->errstr : "out of memory");
    if (x)
      redisFree(x);
    return NULL;
  }
  int fl = fcntl(x->fd, F_GETFL);
  if (fl < 0 || fcntl(x->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
    fault(c, sv, 0, "could not make the connection non-blocking");
    redisFree(x);
    return NULL;
  }
  sv->ctx = x;
  return x;
}

/* Wait until fd is ready for events or the deadline: 1 ready, 0 the
 * deadline passed, -1 an error. */
static int wait_fd(int fd, short events, long long deadline)
{
  for (;;) {
    long long left = deadline - now_ms();
    if (left <= 0)
      return 0;
    struct pollfd p = {fd, events, 0};
    int n = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
    if (n > 0)
      return 1;
    if (n < 0 && errno != EINTR)
      return -1;
  }
}

static int send_all(int fd, const char *b, size_t n, long long deadline,
                    const server *sv, tj__remote_call *c)
{
  while (n > 0) {
    int w = wait_fd(fd, POLLOUT, deadline);
    if (w <= 0)
      return fault(c, sv, w == 0, w == 0 ? "sending" : strerror(errno));
    ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
    if (k < 0 && errno != EAGAIN && errno != EINTR)
      return fault(c, sv, 0, strerror(errno));
    if (k > 0)
      b += k, n -= (size_t)k, c->bytes_out += (uint64_t)k;
  }
  return 0;
}

/* Judge an answer's header line (hd, without its CRLF) before its body is
 * read: 0 fine, -1 with c->what set. */
static int judge_header(const char *hd, const expect *ex, const server *sv,
                        tj__remote_call *c)
{
  char what[200];
  if (hd[0] == '-')
    return 0; /* an error reply: the reader gives its text */
  if (!hd[0] || !strchr(ex->types, hd[0])) {
    snprintf(what, sizeof what, "a reply of the wrong type ('%c')",
             hd[0] >= ' ' && hd[0] < 127 ? hd[0] : '?');
    return fault(c, sv, 0, what);
  }
  if (hd[0] != '$')
    return 0;
  char *end;
  errno = 0;
  long long n = strtoll(hd + 1, &end, 10);
  if (ex->max_bulk < 0 && n != -1)
    return fault(c, sv, 0, "a reply of the wrong type (a string)");
  if (errno || *end || n < -1 || n > ex->max_bulk) {
    snprintf(what, sizeof what, "a reply of %.24s bytes, more than the "
             "command returns", hd + 1);
    return fault(c, sv, 0, what);
  }
  return 0;
}

/* Read one answer into x's reader within the deadline. */
static redisReply *read_answer(redisContext *x, const expect *ex,
                               long long deadline, const server *sv,
                               tj__remote_call *c)
{
  char buf[16384], hd[HEADER_MAX];
  size_t hl = 0;
  int judged = 0;
  for (;;) {
    void *rep = NULL;
    if (redisReaderGetReply(x->reader, &rep) != REDIS_OK)
      return fault(c, sv, 0, "an answer that does not parse"), NULL;
    if (rep)
      return rep;
    int w = wait_fd(x->fd, POLLIN, deadline);
    if (w <= 0)
      return fault(c, sv, w == 0, w == 0 ? "the answer" : strerror(errno)),
             NULL;
    ssize_t k = recv(x->fd, buf, sizeof buf, 0);
    if (k == 0)
      return fault(c, sv, 0, "the connection closed"), NULL;
    if (k < 0) {
      if (errno == EAGAIN || errno == EINTR)
        continue;
      return fault(c, sv, 0, strerror(errno)), NULL;
    }
    c->bytes_in += (uint64_t)k;
    for (ssize_t i = 0; i < k && !judged; i++) {
      if (buf[i] == '\n' && hl > 0 && hd[hl - 1] == '\r') {
        hd[hl - 1] = '\0';
        if (judge_header(hd, ex, sv, c) < 0)
          return NULL;
        judged = 1;
      } else if (hl == sizeof hd - 1) {
        return fault(c, sv, 0, "a reply header that does not end"), NULL;
      } else {
        hd[hl++] = buf[i];
      }
    }
    if (redisReaderFeed(x->reader, buf, (size_t)k) != REDIS_OK)
      return fault(c, sv, 0, "out of memory"), NULL;
  }
}

/* One command to the server of key, argv style, its answer one of ex's:
 * the reply (an error reply is a fault), or NULL with c->what set.  A
 * fault drops the connection: what is left of its answer means nothing. */
static redisReply *command(redis_backend *rb, const char *key, int argc,
                           const char **argv, const size_t *argl,
                           const expect *ex, tj__remote_call *c)
{
  server *sv = &rb->servers[redis_server_of(rb, key)];
  redisContext *x = connect_to(rb, sv, c);
  if (!x)
    return NULL;
  long long deadline = now_ms() + rb->set.timeout_ms;
  char *cmd = NULL;
  int n = redisFormatCommandArgv(&cmd, argc, argv, argl);
  redisReply *rep = NULL;
  if (n < 0)
    fault(c, sv, 0, "out of memory");
  else if (send_all(x->fd, cmd, (size_t)n, deadline, sv, c) == 0)
    rep = read_answer(x, ex, deadline, sv, c);
  free(cmd);
  if (rep && rep->type == REDIS_REPLY_ERROR) {
    char what[160];
    snprintf(what, sizeof what, "it answered '%.120s'", rep->str);
    fault(c, sv, 0, what);
    freeReplyObject(rep);
    rep = NULL;
  }
  if (!rep) {
    redisFree(x);
    sv->ctx = NULL;
  }
  return rep;
}

/* ------------------------------------------------------- the commands */

static void name_of(char *out, size_t len, const char *kind, const char *key)
{
  snprintf(out, len, TJ__REMOTE_NAMESPACE "%s:%s", kind, key);
}

static int redis_get(void *b, const char *key, size_t max, unsigned char **val,
                     size_t *len, tj__remote_call *c)
{
  char name[128], last[32];
  name_of(name, sizeof name, "code", key);
  snprintf(last, sizeof last, "%llu", (unsigned long long)max - 1);
  const char *argv[] = {"GETRANGE", name, "0", last};
  size_t argl[] = {8, strlen(name), 1, strlen(last)};
  expect ex = {"$", (long long)max};
  redisReply *rep = command(b, key, 4, argv, argl, &ex, c);
  if (!rep)
    return -1;
  int have = rep->len > 0;
  *len = have ? (size_t)rep->len : 0;
  *val = have ? malloc(*len) : NULL;
  if (have && *val)
    memcpy(*val, rep->str, *len);
  freeReplyObject(rep);
  return have && !*val ? 0 : have; /* out of memory: a miss */
}

static int redis_put(void *b, const char *key, const unsigned char *val,
                     size_t len, int replace, long ttl_s, tj__remote_call *c)
{
  char name[128], ttl[24];
  name_of(name, sizeof name, "code", key);
  snprintf(ttl, sizeof ttl, "%ld", ttl_s);
  const char *argv[6] = {"SET", name, (const char *)val};
  size_t argl[6] = {3, strlen(name), len};
  int argc = 3;
  if (!replace)
    argv[argc] = "NX", argl[argc++] = 2;
  if (ttl_s > 0) {
    argv[argc] = "EX", argl[argc++] = 2;
    argv[argc] = ttl, argl[argc++] = strlen(ttl);
  }
  expect ex = {"+$", -1};
  redisReply *rep = command(b, key, argc, argv, argl, &ex, c);
  if (!rep)
    return -1;
  int stored = rep->type == REDIS_REPLY_STATUS;
  freeReplyObject(rep);
  return stored;
}

/* An answer that is an integer: its value, or -1. */
static long long integer_of(redis_backend *rb, const char *key, int argc,
                            const char **argv, const size_t *argl,
                            tj__remote_call *c)
{
  expect ex = {":", 0};
  redisReply *rep = command(rb, key, argc, argv, argl, &ex, c);
  if (!rep)
    return -1;
  long long v = rep->integer;
  freeReplyObject(rep);
  return v;
}

static int redis_exists(void *b, const char *key, tj__remote_call *c)
{
  char name[128];
  name_of(name, sizeof name, "code", key);
  const char *argv[] = {"EXISTS", name};
  size_t argl[] = {6, strlen(name)};
  long long v = integer_of(b, key, 2, argv, argl, c);
  return v < 0 ? -1 : v > 0;
}

/* A script on key's lease (KEYS[1]) with up to two arguments: its
 * integer answer, or -1. */
static long long lease_script(redis_backend *rb, const char *key,
                              const char *script, const char *a1,
                              const char *a2, const char *a3,
                              tj__remote_call *c)
{
  char name[128];
  name_of(name, sizeof name, "lease", key);
  const char *argv[] = {"EVAL", script, "1", name, a1, a2, a3};
  size_t argl[] = {4, strlen(script), 1, strlen(name), a1 ? strlen(a1) : 0,
                   a2 ? strlen(a2) : 0, a3 ? strlen(a3) : 0};
  int argc = 4 + !!a1 + !!a2 + !!a3;
  return integer_of(rb, key, argc, argv, argl, c);
}

static int redis_lease_take(void *b, const char *key, const char *token,
                            const char *expect_token, long ms,
                            tj__remote_call *c)
{
  char pms[24];
  snprintf(pms, sizeof pms, "%ld", ms);
  if (expect_token) { /* a takeover: only from the holder seen */
    static const char steal[] =
        "if redis.call('get', KEYS[1]) == ARGV[1] then "
        "redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 "
        "else return 0 end";
    long long v = lease_script(b, key, steal, expect_token, token, pms, c);
    return v < 0 ? -1 : v == 1;
  }
  char name[128];
  name_of(name, sizeof name, "lease", key);
  const char *argv[] = {"SET", name, token, "NX", "PX", pms};
  size_t argl[] = {3, strlen(name), strlen(token), 2, 2, strlen(pms)};
  expect ex = {"+$", -1};
  redisReply *rep = command(b, key, 6, argv, argl, &ex, c);
  if (!rep)
    return -1;
  int taken = rep->type == REDIS_REPLY_STATUS;
  freeReplyObject(rep);
  return taken;
}

static int redis_lease_renew(void *b, const char *key, const char *token,
                             long ms, tj__remote_call *c)
{
  static const char renew[] =
      "if redis.call('get', KEYS[1]) == ARGV[1] then "
      "return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
  char pms[24];
  snprintf(pms, sizeof pms, "%ld", ms);
  long long v = lease_script(b, key, renew, token, pms, NULL, c);
  return v < 0 ? -1 : v == 1;
}

static int redis_lease_release(void *b, const char *key, const char *token,
                               tj__remote_call *c)
{
  static const char release[] =
      "if redis.call('get', KEYS[1]) == ARGV[1] then "
      "return redis.call('del', KEYS[1]) else return 0 end";
  return lease_script(b, key, release, token, NULL, NULL, c) < 0 ? -1 : 0;
}

static int redis_lease_holder(void *b, const char *key, char *token,
                              size_t len, tj__remote_call *c)
{
  char name[128];
  name_of(name, sizeof name, "lease", key);
  const char *argv[] = {"GET", name};
  size_t argl[] = {3, strlen(name)};
  expect ex = {"$", TJ__REMOTE_TOKEN - 1};
  redisReply *rep = command(b, key, 2, argv, argl, &ex, c);
  if (!rep)
    return -1;
  int held = rep->type == REDIS_REPLY_STRING;
  if (held)
    snprintf(token, len, "%.*s", (int)rep->len, rep->str);
  freeReplyObject(rep);
  return held;
}

const tj__remote_backend tj__remote_redis = {
    "redis://",        redis_open,        redis_close,
    redis_server_count, redis_server_of,  redis_get,
    redis_put,         redis_exists,      redis_lease_take,
    redis_lease_renew, redis_lease_release, redis_lease_holder};

#else /* !TJ_HAVE_HIREDIS */

static int redis_open(const char *spec, const tj__remote_settings *s,
                      void **out, int *readonly, char *msg, size_t len)
{
  (void)spec, (void)s, (void)out, (void)readonly;
  snprintf(msg, len, "this libtokitai-jit was built without hiredis "
           "(./configure --with-hiredis)");
  return TJ_EIO;
}

/* Never called: no backend is ever opened. */
const tj__remote_backend tj__remote_redis = {"redis://", redis_open};

#endif
