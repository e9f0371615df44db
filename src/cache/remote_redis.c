/*
 * remote_redis.c: the remote tier's backend on standalone Redis servers
 * (remote.h says what a backend promises).
 *
 * A spec is entries, commas between them, each
 * "redis://[[USER]:PASSWORD@]HOST:PORT[/DB]" or "unix:///PATH", with
 * options after '?' joined by '&': readonly, db=N, prefix=P (before every
 * key name).  Each key lives on one server, chosen by rendezvous (highest
 * random weight) hashing over the key and the server's "HOST:PORT" (or
 * "unix:PATH"), so that adding a server moves only the keys it wins.  A
 * new connection sends AUTH and SELECT when its entry asks for them; a
 * password is never put in a message.
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
  char host[256];  /* or the socket's path, for unix:// */
  int port;        /* 0 for a unix socket */
  char user[128], pass[256]; /* AUTH after connecting, when pass is set */
  int db;          /* SELECT after connecting, when not 0 */
  char prefix[64]; /* before every key name */
  char name[300];  /* "HOST:PORT" or "unix:PATH": placement, messages */
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

/* The longest key name: a prefix, the namespace, a kind and a key. */
#define NAME_MAX_LEN 192
/* The largest database number a server may have. */
#define DB_MAX 1000000

/* ------------------------------------------------------- the spec */

/* Refuse entry u (n bytes) for why, quoting it without what comes before
 * an '@': a password is never printed. */
static int bad_url(const char *u, size_t n, const char *why, char *msg,
                   size_t len)
{
  const char *at = NULL, *scheme = strstr(u, "://");
  for (const char *p = u; p < u + n; p++)
    if (*p == '@')
      at = p;
  int cut = n > 200 ? 200 : (int)n;
  if (at && scheme && scheme < at)
    snprintf(msg, len, "remote '%.*s://***%.*s' %s", (int)(scheme - u), u,
             (int)(u + cut - at > 0 ? u + cut - at : 0), at, why);
  else
    snprintf(msg, len, "remote '%.*s' %s", cut, u, why);
  return TJ_EINVAL;
}

/* HOST and PORT from "HOST:PORT" or "[IPv6]:PORT" in h..end. */
static void split_host(const char *h, const char *end, server *sv,
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
}

/* A whole number from lo to hi in p..end: it, or -1. */
static long number_in(const char *p, const char *end, long lo, long hi)
{
  size_t n = (size_t)(end - p);
  if (n == 0 || n > 9 || strspn(p, "0123456789") < n)
    return -1;
  long v = 0;
  for (; p < end; p++)
    v = v * 10 + (*p - '0');
  return v < lo || v > hi ? -1 : v;
}

/* "[USER]:PASSWORD@" in u..at (at the '@'). */
static int parse_userinfo(const char *u, const char *at, server *sv)
{
  const char *colon = memchr(u, ':', (size_t)(at - u));
  if (!colon || (size_t)(colon - u) >= sizeof sv->user ||
      (size_t)(at - colon - 1) >= sizeof sv->pass || at == colon + 1)
    return -1;
  snprintf(sv->user, sizeof sv->user, "%.*s", (int)(colon - u), u);
  snprintf(sv->pass, sizeof sv->pass, "%.*s", (int)(at - colon - 1),
           colon + 1);
  return 0;
}

/* "HOST:PORT[/DB]" in h..end, after any user information. */
static int parse_hostport(const char *h, const char *end, server *sv)
{
  const char *slash = memchr(h, '/', (size_t)(end - h)), *colon;
  if (slash) {
    if ((sv->db = (int)number_in(slash + 1, end, 0, DB_MAX)) < 0)
      return -1;
    end = slash;
  }
  split_host(h, end, sv, &colon);
  long port = colon ? number_in(colon + 1, end, 1, 65535) : -1;
  if (port < 0 || !sv->host[0])
    return -1;
  for (const char *p = sv->host; *p; p++)
    if ((unsigned char)*p <= ' ' || *p == '/' || *p == '@' || *p == '?')
      return -1;
  sv->port = (int)port;
  size_t hl = strlen(sv->host);
  memcpy(sv->name, sv->host, hl);
  snprintf(sv->name + hl, sizeof sv->name - hl, ":%d", sv->port);
  return 0;
}

/* "unix:///PATH" (the socket's path, absolute). */
static int parse_unix(const char *p, const char *end, server *sv)
{
  size_t n = (size_t)(end - p);
  if (n < 2 || *p != '/' || n >= 108 || memchr(p, ',', n))
    return -1;
  snprintf(sv->host, sizeof sv->host, "%.*s", (int)n, p);
  snprintf(sv->name, sizeof sv->name, "unix:%.*s", (int)n, p);
  return 0;
}

/* The options after '?': "readonly", "db=N", "prefix=P", '&' between. */
static int parse_options(const char *q, const char *end, server *sv,
                         int *readonly)
{
  while (q < end) {
    const char *amp = memchr(q, '&', (size_t)(end - q));
    const char *stop = amp ? amp : end;
    size_t n = (size_t)(stop - q);
    if (amp && amp + 1 == end)
      return -1; /* an empty option */
    if (n == 8 && !strncmp(q, "readonly", 8)) {
      *readonly = 1;
    } else if (n > 3 && !strncmp(q, "db=", 3)) {
      if ((sv->db = (int)number_in(q + 3, stop, 0, DB_MAX)) < 0)
        return -1;
    } else if (n > 7 && !strncmp(q, "prefix=", 7) &&
               n - 7 < sizeof sv->prefix) {
      snprintf(sv->prefix, sizeof sv->prefix, "%.*s", (int)(n - 7), q + 7);
      for (const char *p = sv->prefix; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    "0123456789:_.-/", *p))
          return -1;
    } else {
      return -1;
    }
    q = amp ? amp + 1 : end;
  }
  return 0;
}

/* One entry: "redis://[[USER]:PASSWORD@]HOST:PORT[/DB][?OPTIONS]" or
 * "unix:///PATH[?OPTIONS]". */
static int parse_url(const char *u, size_t n, server *sv, int *readonly,
                     char *msg, size_t len)
{
  static const char usage[] =
      "is not redis://[[USER]:PASSWORD@]HOST:PORT[/DB][?OPTIONS] or "
      "unix:///PATH[?OPTIONS] (a port from 1 to 65535; options readonly, "
      "db=N, prefix=P, joined by &)";
  const char *end = u + n, *q = memchr(u, '?', n);
  if (q && parse_options(q + 1, end, sv, readonly) != 0)
    return bad_url(u, n, usage, msg, len);
  if (q)
    end = q;
  if (n > 7 && strncmp(u, "unix://", 7) == 0) {
    if (parse_unix(u + 7, end, sv) != 0)
      return bad_url(u, n, usage, msg, len);
  } else if (n > 8 && strncmp(u, "redis://", 8) == 0) {
    const char *h = u + 8, *at = NULL;
    for (const char *p = h; p < end; p++)
      if (*p == '@')
        at = p;
    if ((at && parse_userinfo(h, at, sv) != 0) ||
        parse_hostport(at ? at + 1 : h, end, sv) != 0)
      return bad_url(u, n, usage, msg, len);
  } else {
    return bad_url(u, n, usage, msg, len);
  }
  sv->seed = XXH3_64bits(sv->name, strlen(sv->name));
  return TJ_OK;
}

/* One entry of the spec (p, n bytes) into the next server. */
static int add_server(redis_backend *rb, const char *p, size_t n,
                      int *readonly, char *msg, size_t len)
{
  if (rb->nservers == TJ__REMOTE_MAX_SERVERS)
    return snprintf(msg, len, "more than %d remote servers",
                    TJ__REMOTE_MAX_SERVERS), TJ_EINVAL;
  server *sv = &rb->servers[rb->nservers];
  if (parse_url(p, n, sv, readonly, msg, len) != TJ_OK)
    return TJ_EINVAL;
  for (int i = 0; i < rb->nservers; i++)
    if (strcmp(rb->servers[i].name, sv->name) == 0)
      return bad_url(p, n, "is listed twice", msg, len);
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
                 ? (snprintf(msg, len, "the remote list has an empty "
                             "entry"), TJ_EINVAL)
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
static redisContext *connect_to(redis_backend *rb, server *sv, int *fresh,
                                tj__remote_call *c)
{
  *fresh = 0;
  if (sv->ctx)
    return sv->ctx;
  long ms = rb->set.connect_timeout_ms;
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  errno = 0;
  redisContext *x = sv->port
                        ? redisConnectWithTimeout(sv->host, sv->port, tv)
                        : redisConnectUnixWithTimeout(sv->host, tv);
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
  *fresh = 1;
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
    if (rep && x->reader->pos < x->reader->len) { /* more than was asked */
      freeReplyObject(rep);
      return fault(c, sv, 0, "more than one answer"), NULL;
    }
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

/* One command on x, argv style, its answer one of ex's, by deadline: the
 * reply (an error reply is a fault), or NULL with c->what set. */
static redisReply *exchange(redisContext *x, const server *sv, int argc,
                            const char **argv, const size_t *argl,
                            const expect *ex, long long deadline,
                            tj__remote_call *c)
{
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
  return rep;
}

/* A new connection's AUTH and SELECT, when sv asks for them: 0, or -1
 * with c->what set (which never holds the password). */
static int greet(redis_backend *rb, const server *sv, redisContext *x,
                 tj__remote_call *c)
{
  expect ok = {"+", 0};
  long long deadline = now_ms() + rb->set.timeout_ms;
  if (sv->pass[0]) {
    const char *argv[] = {"AUTH", sv->user, sv->pass};
    size_t argl[] = {4, strlen(sv->user), strlen(sv->pass)};
    int u = sv->user[0] != '\0';
    if (!u) /* AUTH PASSWORD: the default user */
      argv[1] = sv->pass, argl[1] = argl[2];
    redisReply *r = exchange(x, sv, 2 + u, argv, argl, &ok, deadline, c);
    if (!r)
      return -1;
    freeReplyObject(r);
  }
  if (sv->db) {
    char db[16];
    snprintf(db, sizeof db, "%d", sv->db);
    const char *argv[] = {"SELECT", db};
    size_t argl[] = {6, strlen(db)};
    redisReply *r = exchange(x, sv, 2, argv, argl, &ok, deadline, c);
    if (!r)
      return -1;
    freeReplyObject(r);
  }
  return 0;
}

/* One command to the server of key, as exchange says, within the
 * operation timeout.  A fault drops the connection: what is left of its
 * answer means nothing. */
static redisReply *command(redis_backend *rb, const char *key, int argc,
                           const char **argv, const size_t *argl,
                           const expect *ex, tj__remote_call *c)
{
  server *sv = &rb->servers[redis_server_of(rb, key)];
  int fresh;
  redisContext *x = connect_to(rb, sv, &fresh, c);
  if (!x)
    return NULL;
  redisReply *rep = fresh && greet(rb, sv, x, c) != 0
                        ? NULL
                        : exchange(x, sv, argc, argv, argl, ex,
                                   now_ms() + rb->set.timeout_ms, c);
  if (!rep) {
    redisFree(x);
    sv->ctx = NULL;
  }
  return rep;
}

/* ------------------------------------------------------- the commands */

/* The name of key's value ("code") or lease ("lease") on its server,
 * under the server's prefix. */
static void name_of(void *b, char *out, size_t len, const char *kind,
                    const char *key)
{
  redis_backend *rb = b;
  const server *sv = &rb->servers[redis_server_of(rb, key)];
  snprintf(out, len, "%s" TJ__REMOTE_NAMESPACE "%s:%s", sv->prefix, kind,
           key);
}

static int redis_get(void *b, const char *key, size_t max, unsigned char **val,
                     size_t *len, tj__remote_call *c)
{
  char name[NAME_MAX_LEN], last[32];
  name_of(b, name, sizeof name, "code", key);
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
  char name[NAME_MAX_LEN], ttl[24];
  name_of(b, name, sizeof name, "code", key);
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
  char name[NAME_MAX_LEN];
  name_of(b, name, sizeof name, "code", key);
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
  char name[NAME_MAX_LEN];
  name_of(rb, name, sizeof name, "lease", key);
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
  char name[NAME_MAX_LEN];
  name_of(b, name, sizeof name, "lease", key);
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
  char name[NAME_MAX_LEN];
  name_of(b, name, sizeof name, "lease", key);
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
const tj__remote_backend tj__remote_redis = {.scheme = "redis://",
                                             .open = redis_open};

#endif
