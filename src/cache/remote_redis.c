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
 * A Redis Cluster is "redis+cluster://[[USER]:PASSWORD@]HOST:PORT" entries
 * instead, each a seed node of one cluster (the same user, password and
 * prefix on each; database 0 only, as a cluster has no other).  The slot
 * map comes from CLUSTER SLOTS, asked of the seeds and then of the nodes
 * met, when a command first needs it and after any fault.  A key's value
 * and lease carry its hash tag ("...:code:{KEY}"), so both live in the
 * slot of KEY (CRC16 mod 16384, tj__remote_redis_slot) on one node, as
 * they live on one standalone server.  A MOVED answer updates the map and
 * the command goes to the node it names; an ASK answer sends ASKING and
 * the command to the node it names once, the map unchanged.  A command
 * follows at most REDIRECTS_MAX redirections, all within its one
 * deadline; more is a fault.
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

/* The longest line of an answer read before it must end: a header
 * ("$123\r\n"), a status, or an error such as "-MOVED SLOT HOST:PORT". */
#define HEADER_MAX 512

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

#define SLOTS 16384
#define NO_NODE 0xff
#define REDIRECTS_MAX 5
/* The most a CLUSTER SLOTS answer may hold: bytes, elements of one
 * array, bytes of one string. */
#define SLOTS_ANSWER_BYTES (1 << 20)
#define SLOTS_ANSWER_ELEMENTS SLOTS
#define SLOTS_ANSWER_STRING 256

typedef struct redis_backend {
  tj__remote_settings set;
  int nservers;
  server servers[TJ__REMOTE_MAX_SERVERS]; /* standalone, or a cluster's
                                             seeds */
  int cluster;
  int nnodes, mapped;        /* the cluster's nodes met; slot is current */
  server nodes[TJ__REMOTE_MAX_SERVERS];
  unsigned char slot[SLOTS]; /* each slot's node, NO_NODE: none */
} redis_backend;

/* What one command may answer: its types ("+:$" ...), the longest bulk
 * string (-1: only a nil one); for an array, the most elements of any
 * array in it and the most bytes of the whole answer. */
typedef struct expect {
  const char *types;
  long long max_bulk;
  long long max_elements;
  long long max_bytes;
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

#define CLUSTER_SCHEME "redis+cluster://"

/* One entry: "redis://[[USER]:PASSWORD@]HOST:PORT[/DB][?OPTIONS]",
 * "redis+cluster://[[USER]:PASSWORD@]HOST:PORT[?OPTIONS]" (*cluster set)
 * or "unix:///PATH[?OPTIONS]". */
static int parse_url(const char *u, size_t n, server *sv, int *readonly,
                     int *cluster, char *msg, size_t len)
{
  static const char usage[] =
      "is not redis://[[USER]:PASSWORD@]HOST:PORT[/DB][?OPTIONS], "
      "redis+cluster://[[USER]:PASSWORD@]HOST:PORT[?OPTIONS] or "
      "unix:///PATH[?OPTIONS] (a port from 1 to 65535; options readonly, "
      "db=N, prefix=P, joined by &)";
  const char *end = u + n, *q = memchr(u, '?', n);
  size_t cl = strlen(CLUSTER_SCHEME);
  *cluster = n > cl && strncmp(u, CLUSTER_SCHEME, cl) == 0;
  if (q && parse_options(q + 1, end, sv, readonly) != 0)
    return bad_url(u, n, usage, msg, len);
  if (q)
    end = q;
  if (n > 7 && strncmp(u, "unix://", 7) == 0) {
    if (parse_unix(u + 7, end, sv) != 0)
      return bad_url(u, n, usage, msg, len);
  } else if ((n > 8 && strncmp(u, "redis://", 8) == 0) || *cluster) {
    const char *h = u + (*cluster ? cl : 8), *at = NULL;
    for (const char *p = h; p < end; p++)
      if (*p == '@')
        at = p;
    if ((at && parse_userinfo(h, at, sv) != 0) ||
        parse_hostport(at ? at + 1 : h, end, sv) != 0)
      return bad_url(u, n, usage, msg, len);
  } else {
    return bad_url(u, n, usage, msg, len);
  }
  if (*cluster && sv->db != 0)
    return bad_url(u, n, "names a database: a cluster has only database 0",
                   msg, len);
  sv->seed = XXH3_64bits(sv->name, strlen(sv->name));
  return TJ_OK;
}

/* A cluster's seeds all reach one cluster under one name for each key. */
static int same_cluster(const server *a, const server *b)
{
  return strcmp(a->user, b->user) == 0 && strcmp(a->pass, b->pass) == 0 &&
         strcmp(a->prefix, b->prefix) == 0;
}

/* One entry of the spec (p, n bytes) into the next server. */
static int add_server(redis_backend *rb, const char *p, size_t n,
                      int *readonly, char *msg, size_t len)
{
  if (rb->nservers == TJ__REMOTE_MAX_SERVERS)
    return snprintf(msg, len, "more than %d remote servers",
                    TJ__REMOTE_MAX_SERVERS), TJ_EINVAL;
  server *sv = &rb->servers[rb->nservers];
  int cluster;
  if (parse_url(p, n, sv, readonly, &cluster, msg, len) != TJ_OK)
    return TJ_EINVAL;
  for (int i = 0; i < rb->nservers; i++)
    if (strcmp(rb->servers[i].name, sv->name) == 0)
      return bad_url(p, n, "is listed twice", msg, len);
  if (rb->nservers == 0)
    rb->cluster = cluster;
  else if (cluster != rb->cluster)
    return bad_url(p, n, "mixes a cluster's seeds (redis+cluster://) with "
                   "standalone servers", msg, len);
  else if (cluster && !same_cluster(sv, &rb->servers[0]))
    return bad_url(p, n, "differs from the first seed in its user, password "
                   "or prefix", msg, len);
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
  for (int i = 0; i < rb->nnodes; i++)
    if (rb->nodes[i].ctx)
      redisFree(rb->nodes[i].ctx);
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
  memset(rb->slot, NO_NODE, sizeof rb->slot);
  *out = rb;
  return TJ_OK;
}

unsigned tj__remote_redis_slot(const char *name, size_t n)
{
  const char *open = memchr(name, '{', n);
  if (open) { /* a hash tag: what is between the first '{' and the
                 next '}', when not empty */
    const char *close = memchr(open + 1, '}', (size_t)(name + n - open - 1));
    if (close && close > open + 1)
      name = open + 1, n = (size_t)(close - open - 1);
  }
  unsigned crc = 0; /* CRC16-XMODEM: polynomial 0x1021, from 0 */
  for (size_t i = 0; i < n; i++) {
    crc ^= (unsigned)(unsigned char)name[i] << 8;
    for (int b = 0; b < 8; b++)
      crc = (crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1) & 0xffff;
  }
  return crc % SLOTS;
}

/* The slot of key's value and lease, whose tag is key. */
static unsigned slot_of(const char *key)
{
  return tj__remote_redis_slot(key, strlen(key));
}

static int redis_server_count(void *b)
{
  const redis_backend *rb = b;
  return rb->cluster && rb->nnodes ? rb->nnodes : rb->nservers;
}

static int redis_server_of(void *b, const char *key)
{
  const redis_backend *rb = b;
  if (rb->cluster) { /* the node the map names; after a fault, the one
                       it named last (its breaker is that node's) */
    int i = rb->slot[slot_of(key)];
    return i != NO_NODE ? i : 0;
  }
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
  c->away = 0;
  snprintf(c->what, sizeof c->what, "%s %s %s", sv->name,
           timeout ? "did not answer in time:" : "failed:", what);
  return -1;
}

/* A fault that got nothing of an answer from sv: -1, c->away set. */
static int away(tj__remote_call *c, const server *sv, int timeout,
                const char *what)
{
  fault(c, sv, timeout, what);
  c->away = 1;
  return -1;
}

/* The connection to sv, made now if need be (within the connect timeout
 * and the deadline), non-blocking; NULL with c->what set. */
static redisContext *connect_to(redis_backend *rb, server *sv, int *fresh,
                                long long deadline, tj__remote_call *c)
{
  *fresh = 0;
  if (sv->ctx)
    return sv->ctx;
  long long left = deadline - now_ms();
  long ms = rb->set.connect_timeout_ms;
  if (left < ms)
    ms = left > 1 ? (long)left : 1;
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  errno = 0;
  redisContext *x = sv->port
                        ? redisConnectWithTimeout(sv->host, sv->port, tv)
                        : redisConnectUnixWithTimeout(sv->host, tv);
  int e = errno;
  if (!x || x->err) {
    int timeout = x && (e == ETIMEDOUT || e == EINPROGRESS || e == EAGAIN ||
                        strstr(x->errstr, "timed out"));
    if (x)
      away(c, sv, timeout, x->errstr);
    else
      fault(c, sv, 0, "out of memory");
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

static void drop(server *sv)
{
  if (sv->ctx)
    redisFree(sv->ctx);
  sv->ctx = NULL;
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
      return away(c, sv, w == 0, w == 0 ? "sending" : strerror(errno));
    ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
    if (k < 0 && errno != EAGAIN && errno != EINTR)
      return away(c, sv, 0, strerror(errno));
    if (k > 0)
      b += k, n -= (size_t)k, c->bytes_out += (uint64_t)k;
  }
  return 0;
}

/* The headers of one answer, judged as they arrive, before hiredis reads
 * what they announce. */
typedef struct scan {
  char hd[HEADER_MAX];
  size_t hl;
  long long skip; /* bytes of a string (and its CRLF) still to pass */
  long long bytes;
  int first;      /* the next header is the answer's own */
  int ended;      /* it is no array: its line and string end the answer */
} scan;

/* Judge one header line (hd, without its CRLF): 0 fine, -1 with c->what
 * set.  The answer's own header must be of a type the command returns;
 * every string and array in it within ex's bounds. */
static int judge_header(scan *s, const char *hd, const expect *ex,
                        const server *sv, tj__remote_call *c)
{
  char what[200];
  int first = s->first;
  s->first = 0;
  s->ended = first && hd[0] != '*';
  if (hd[0] == '-' || (!first && (hd[0] == '+' || hd[0] == ':')))
    return 0; /* an error reply: the reader gives its text */
  if (!hd[0] || (first && !strchr(ex->types, hd[0])) ||
      (!first && hd[0] != '$' && hd[0] != '*')) {
    snprintf(what, sizeof what, "a reply of the wrong type ('%c')",
             hd[0] >= ' ' && hd[0] < 127 ? hd[0] : '?');
    return fault(c, sv, 0, what);
  }
  if (hd[0] != '$' && hd[0] != '*')
    return 0;
  char *end;
  errno = 0;
  long long n = strtoll(hd + 1, &end, 10);
  if (hd[0] == '$' && first && ex->max_bulk < 0 && n != -1)
    return fault(c, sv, 0, "a reply of the wrong type (a string)");
  long long most = hd[0] == '$' ? ex->max_bulk : ex->max_elements;
  if (errno || *end || n < -1 || n > most) {
    snprintf(what, sizeof what, "a reply of %.24s %s, more than the "
             "command returns", hd + 1, hd[0] == '$' ? "bytes" : "elements");
    return fault(c, sv, 0, what);
  }
  if (hd[0] == '$' && n >= 0)
    s->skip = n + 2;
  return 0;
}

/* Pass k bytes of an answer through s: 0, or -1 with c->what set. */
static int scan_bytes(scan *s, const char *b, size_t k, const expect *ex,
                      const server *sv, tj__remote_call *c)
{
  s->bytes += (long long)k;
  if (ex->max_bytes > 0 && s->bytes > ex->max_bytes)
    return fault(c, sv, 0, "an answer longer than the command returns");
  for (size_t i = 0; i < k; i++) {
    if (s->skip > 0) {
      size_t pass = (size_t)s->skip < k - i ? (size_t)s->skip : k - i;
      s->skip -= (long long)pass;
      i += pass - 1;
    } else if (s->ended) {
      return fault(c, sv, 0, "more than one answer");
    } else if (b[i] == '\n' && s->hl > 0 && s->hd[s->hl - 1] == '\r') {
      s->hd[s->hl - 1] = '\0';
      s->hl = 0;
      if (judge_header(s, s->hd, ex, sv, c) < 0)
        return -1;
    } else if (s->hl == sizeof s->hd - 1) {
      return fault(c, sv, 0, "a reply header that does not end");
    } else {
      s->hd[s->hl++] = b[i];
    }
  }
  return 0;
}

/* Read one answer into x's reader within the deadline. */
static redisReply *read_answer(redisContext *x, const expect *ex,
                               long long deadline, const server *sv,
                               tj__remote_call *c)
{
  char buf[16384];
  scan s = {.first = 1};
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
    if (w <= 0 && s.bytes == 0) /* silent: away; else slow */
      return away(c, sv, w == 0, w == 0 ? "the answer" : strerror(errno)),
             NULL;
    if (w <= 0)
      return fault(c, sv, w == 0, w == 0 ? "the answer" : strerror(errno)),
             NULL;
    ssize_t k = recv(x->fd, buf, sizeof buf, 0);
    if (k == 0)
      return away(c, sv, 0, "the connection closed"), NULL;
    if (k < 0) {
      if (errno == EAGAIN || errno == EINTR)
        continue;
      return away(c, sv, 0, strerror(errno)), NULL;
    }
    c->bytes_in += (uint64_t)k;
    if (scan_bytes(&s, buf, (size_t)k, ex, sv, c) < 0)
      return NULL;
    if (redisReaderFeed(x->reader, buf, (size_t)k) != REDIS_OK)
      return fault(c, sv, 0, "out of memory"), NULL;
  }
}

/* One command on x, argv style, its answer one of ex's or an error
 * reply, by deadline: the reply, or NULL with c->what set. */
static redisReply *exchange_any(redisContext *x, const server *sv, int argc,
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
  return rep;
}

/* An error reply as a fault: NULL, with c->what set. */
static redisReply *refused(redisReply *rep, const server *sv,
                           tj__remote_call *c)
{
  char what[160];
  snprintf(what, sizeof what, "it answered '%.120s'", rep->str);
  fault(c, sv, 0, what);
  freeReplyObject(rep);
  return NULL;
}

/* As exchange_any, an error reply a fault. */
static redisReply *exchange(redisContext *x, const server *sv, int argc,
                            const char **argv, const size_t *argl,
                            const expect *ex, long long deadline,
                            tj__remote_call *c)
{
  redisReply *rep = exchange_any(x, sv, argc, argv, argl, ex, deadline, c);
  return rep && rep->type == REDIS_REPLY_ERROR ? refused(rep, sv, c) : rep;
}

/* A new connection's AUTH and SELECT, when sv asks for them: 0, or -1
 * with c->what set (which never holds the password). */
static int greet(const server *sv, redisContext *x, long long deadline,
                 tj__remote_call *c)
{
  expect ok = {"+", 0, 0, 0};
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

/* on_server's one try: the connection (made now if need be), its
 * greeting when new, then the command; a fault drops the connection. */
static redisReply *on_connection(redis_backend *rb, server *sv, int asking,
                                 int argc, const char **argv,
                                 const size_t *argl, const expect *ex,
                                 long long deadline, tj__remote_call *c)
{
  int fresh;
  redisContext *x = connect_to(rb, sv, &fresh, deadline, c);
  if (!x)
    return NULL;
  redisReply *rep = NULL;
  if (!fresh || greet(sv, x, deadline, c) == 0) {
    static const char *const ask[] = {"ASKING"};
    static const size_t askl[] = {6};
    expect ok = {"+", 0, 0, 0};
    redisReply *a = asking ? exchange(x, sv, 1, (const char **)ask, askl,
                                      &ok, deadline, c)
                           : NULL;
    if (!asking || a)
      rep = exchange_any(x, sv, argc, argv, argl, ex, deadline, c);
    if (a)
      freeReplyObject(a);
  }
  if (!rep)
    drop(sv);
  return rep;
}

/* One command on sv by deadline, after ASKING when asking is set: the
 * reply (an error reply too), or NULL with c->what set.  A fault drops
 * the connection: what is left of its answer means nothing.  A
 * connection kept from an earlier command that the server closed
 * meanwhile (its idle timeout, a restart) answers nothing at all: the
 * command goes again, once, on a new one, so that neither costs the
 * tier a fault. */
static redisReply *on_server(redis_backend *rb, server *sv, int asking,
                             int argc, const char **argv, const size_t *argl,
                             const expect *ex, long long deadline,
                             tj__remote_call *c)
{
  int kept = sv->ctx != NULL;
  redisReply *rep = on_connection(rb, sv, asking, argc, argv, argl, ex,
                                  deadline, c);
  if (!rep && kept && c->away && !c->timeout && now_ms() < deadline) {
    c->away = 0;
    c->what[0] = '\0';
    rep = on_connection(rb, sv, asking, argc, argv, argl, ex, deadline, c);
  }
  return rep;
}

/* ------------------------------------------------------- the cluster */

/* The node named host:port, met now if need be (it takes the first
 * seed's user, password and prefix): its index, or -1 when there are
 * too many. */
static int node_named(redis_backend *rb, const char *host, size_t hl,
                      long port)
{
  char name[300];
  snprintf(name, sizeof name, "%.*s:%ld", (int)hl, host, port);
  for (int i = 0; i < rb->nnodes; i++)
    if (strcmp(rb->nodes[i].name, name) == 0)
      return i;
  if (rb->nnodes == TJ__REMOTE_MAX_SERVERS || hl == 0 ||
      hl >= sizeof rb->nodes[0].host)
    return -1;
  server *n = &rb->nodes[rb->nnodes];
  *n = rb->servers[0];
  n->ctx = NULL;
  snprintf(n->host, sizeof n->host, "%.*s", (int)hl, host);
  n->port = (int)port;
  snprintf(n->name, sizeof n->name, "%s", name);
  return rb->nnodes++;
}

/* One range of a CLUSTER SLOTS answer ([start, end, [host, port, ...],
 * replicas...]) into the map; asked is the node that answered, whose
 * host stands for an empty or unknown one.  0, or -1. */
static int map_range(redis_backend *rb, const redisReply *r,
                     const server *asked)
{
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 3)
    return -1;
  const redisReply *lo = r->element[0], *hi = r->element[1],
                   *m = r->element[2];
  if (lo->type != REDIS_REPLY_INTEGER || hi->type != REDIS_REPLY_INTEGER ||
      lo->integer < 0 || hi->integer >= SLOTS || lo->integer > hi->integer ||
      m->type != REDIS_REPLY_ARRAY || m->elements < 2 ||
      m->element[0]->type != REDIS_REPLY_STRING ||
      m->element[1]->type != REDIS_REPLY_INTEGER ||
      m->element[1]->integer < 1 || m->element[1]->integer > 65535)
    return -1;
  const char *host = m->element[0]->str;
  size_t hl = m->element[0]->len;
  if (hl == 0 || (hl == 1 && host[0] == '?'))
    host = asked->host, hl = strlen(asked->host);
  int i = node_named(rb, host, hl, (long)m->element[1]->integer);
  if (i < 0)
    return -1;
  memset(rb->slot + lo->integer, i, (size_t)(hi->integer - lo->integer + 1));
  return 0;
}

/* Ask sv for the slot map: 0 with the map current, -1 with c->what. */
static int map_from(redis_backend *rb, server *sv, long long deadline,
                    tj__remote_call *c)
{
  static const char *const argv[] = {"CLUSTER", "SLOTS"};
  static const size_t argl[] = {7, 5};
  expect ex = {"*", SLOTS_ANSWER_STRING, SLOTS_ANSWER_ELEMENTS,
               SLOTS_ANSWER_BYTES};
  redisReply *rep = on_server(rb, sv, 0, 2, (const char **)argv, argl, &ex,
                              deadline, c);
  if (rep && rep->type == REDIS_REPLY_ERROR)
    rep = refused(rep, sv, c);
  if (!rep)
    return -1;
  memset(rb->slot, NO_NODE, sizeof rb->slot);
  int bad = rep->elements == 0;
  for (size_t i = 0; i < rep->elements && !bad; i++)
    bad = map_range(rb, rep->element[i], sv) != 0;
  freeReplyObject(rep);
  if (bad)
    return fault(c, sv, 0, "a slot map (CLUSTER SLOTS) that is empty, does "
                 "not parse or names too many nodes");
  rb->mapped = 1;
  return 0;
}

/* The slot map from the first of the seeds, then of the nodes met, that
 * gives one by deadline: 0, or -1 with c->what (the last fault).  A seed's
 * connection is closed after: the commands go to the nodes. */
static int map_cluster(redis_backend *rb, long long deadline,
                       tj__remote_call *c)
{
  if (rb->nnodes == TJ__REMOTE_MAX_SERVERS) { /* forget the nodes met */
    for (int i = 0; i < rb->nnodes; i++)
      drop(&rb->nodes[i]);
    rb->nnodes = 0;
  }
  for (int i = 0; i < rb->nservers + rb->nnodes; i++) {
    server *sv = i < rb->nservers ? &rb->servers[i]
                                  : &rb->nodes[i - rb->nservers];
    int rc = map_from(rb, sv, deadline, c);
    if (i < rb->nservers) /* the commands go to the nodes' connections */
      drop(sv);
    if (rc == 0)
      return 0;
    if (now_ms() >= deadline)
      return -1;
  }
  return -1;
}

/* A MOVED or ASK answer ("MOVED SLOT HOST:PORT"): the node it names, or
 * -1 when it is neither or does not parse; *slot its slot. */
static int redirected_to(redis_backend *rb, const redisReply *rep,
                         int *moved, long *slot)
{
  const char *s = rep->str, *end = rep->str + rep->len;
  *moved = rep->len > 6 && strncmp(s, "MOVED ", 6) == 0;
  if (!*moved && !(rep->len > 4 && strncmp(s, "ASK ", 4) == 0))
    return -1;
  s += *moved ? 6 : 4;
  const char *sp = memchr(s, ' ', (size_t)(end - s)), *colon = NULL;
  if (!sp || (*slot = number_in(s, sp, 0, SLOTS - 1)) < 0)
    return -1;
  for (const char *p = sp + 1; p < end; p++)
    if (*p == ':')
      colon = p;
  long port = colon ? number_in(colon + 1, end, 1, 65535) : -1;
  if (port < 0 || memchr(sp + 1, ' ', (size_t)(end - sp - 1)))
    return -1;
  return node_named(rb, sp + 1, (size_t)(colon - sp - 1), port);
}

/* One command on the node that serves key, following MOVED and ASK, all
 * by one deadline: as command says.  A fault drops the map too: the next
 * command asks for it again. */
static redisReply *cluster_command(redis_backend *rb, const char *key,
                                   int argc, const char **argv,
                                   const size_t *argl, const expect *ex,
                                   tj__remote_call *c)
{
  long long deadline = now_ms() + rb->set.timeout_ms;
  unsigned slot = slot_of(key);
  server *sv = NULL;
  int asking = 0, hop = 0;
  for (; hop <= REDIRECTS_MAX; hop++) {
    if (!sv && !rb->mapped && map_cluster(rb, deadline, c) != 0)
      break;
    if (!sv && rb->slot[slot] == NO_NODE) {
      fault(c, &rb->servers[0], 0, "no node of the cluster serves the "
            "key's slot");
      break;
    }
    if (!sv)
      sv = &rb->nodes[rb->slot[slot]];
    redisReply *rep = on_server(rb, sv, asking, argc, argv, argl, ex,
                                deadline, c);
    if (!rep)
      break;
    if (rep->type != REDIS_REPLY_ERROR)
      return rep;
    int moved;
    long at;
    int to = redirected_to(rb, rep, &moved, &at);
    if (to < 0) {
      refused(rep, sv, c);
      break;
    }
    freeReplyObject(rep);
    c->redirects++;
    if (moved)
      rb->slot[at] = (unsigned char)to;
    sv = &rb->nodes[to], asking = !moved;
  }
  if (hop > REDIRECTS_MAX) {
    char what[64];
    snprintf(what, sizeof what, "redirected more than %d times",
             REDIRECTS_MAX);
    fault(c, sv, 0, what);
  }
  rb->mapped = 0;
  return NULL;
}

/* One command to the server of key, as exchange says, within the
 * operation timeout. */
static redisReply *command(redis_backend *rb, const char *key, int argc,
                           const char **argv, const size_t *argl,
                           const expect *ex, tj__remote_call *c)
{
  if (rb->cluster)
    return cluster_command(rb, key, argc, argv, argl, ex, c);
  server *sv = &rb->servers[redis_server_of(rb, key)];
  redisReply *rep = on_server(rb, sv, 0, argc, argv, argl, ex,
                              now_ms() + rb->set.timeout_ms, c);
  if (rep && rep->type == REDIS_REPLY_ERROR) {
    rep = refused(rep, sv, c);
    drop(sv);
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
  const server *sv = &rb->servers[rb->cluster ? 0 : redis_server_of(rb, key)];
  snprintf(out, len, rb->cluster ? "%s" TJ__REMOTE_NAMESPACE "%s:{%s}"
                                 : "%s" TJ__REMOTE_NAMESPACE "%s:%s",
           sv->prefix, kind, key);
}

static int redis_get(void *b, const char *key, size_t max, unsigned char **val,
                     size_t *len, tj__remote_call *c)
{
  char name[NAME_MAX_LEN], last[32];
  name_of(b, name, sizeof name, "code", key);
  snprintf(last, sizeof last, "%llu", (unsigned long long)max - 1);
  const char *argv[] = {"GETRANGE", name, "0", last};
  size_t argl[] = {8, strlen(name), 1, strlen(last)};
  expect ex = {"$", (long long)max, 0, 0};
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
  expect ex = {"+$", -1, 0, 0};
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
  expect ex = {":", 0, 0, 0};
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
  expect ex = {"+$", -1, 0, 0};
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
  expect ex = {"$", TJ__REMOTE_TOKEN - 1, 0, 0};
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
