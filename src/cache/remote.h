/*
 * remote.h: the remote tier, values shared by many machines, behind one
 * interface, and the same-machine lease (lease.c).  Nothing here knows a
 * tj_runtime: src/core/once.c fits the tier into a runtime's lookups and
 * compiles, through the calls below only.
 *
 * remote.c is the tier's logic whatever holds the values: the value
 * format and its checks, the circuit breaker, the counters, publishing
 * what was compiled while the tier was off, and the lease (taken, renewed
 * while its holder compiles, taken over by one waiter when the renewals
 * stop).  A backend is a table of commands (tj__remote_backend): Redis is
 * remote_redis.c; another backend is one file and its line in remote.c.
 *
 * The remote is advisory.  Every command is bounded as a whole by the
 * operation timeout; a fault (no connection, the deadline passed, an
 * error reply, a reply of a type or size the command does not return)
 * turns the tier off for a while for the keys of the server that had it
 * (each server, shard or cluster node has a breaker of its own; the keys
 * of the others stay shared): calls on them answer at once as a miss
 * until the backoff (doubling from TOKITAI_JIT_REMOTE_BACKOFF_MS, with
 * jitter) has passed, and the next call tries again (the tier's thread
 * does, when values wait to be published).  Each change of state is said
 * once (tj__remote_take_warning).
 */
#ifndef TJ_REMOTE_H
#define TJ_REMOTE_H

#include "cache_api.h"

#include <pthread.h>
#include <stdint.h>

typedef struct tj__remote tj__remote;

/* What one remote has done; each only grows. */
typedef struct tj__remote_counters {
  uint64_t hits, misses, rejects, errors, timeouts, bytes_in, bytes_out;
  uint64_t openings;  /* a server's breaker turned its keys off */
  uint64_t renewals;  /* lease renewals sent while compiling, and leases
                         taken again after a restart lost them */
  uint64_t takeovers; /* leases taken from a holder that stopped */
  uint64_t published; /* values compiled while off, published later */
  uint64_t redirects; /* cluster redirections (MOVED, ASK) followed */
} tj__remote_counters;

/* The settings that the environment gives (tj__remote_settings_env). */
typedef struct tj__remote_settings {
  long connect_timeout_ms; /* TOKITAI_JIT_REMOTE_CONNECT_TIMEOUT_MS, 100 */
  long timeout_ms;         /* TOKITAI_JIT_REMOTE_TIMEOUT_MS, 1000: each
                              command as a whole */
  long ttl_s;              /* TOKITAI_JIT_REMOTE_TTL, 0: values never expire */
  long lease_ms;           /* TOKITAI_JIT_REMOTE_LEASE_MS, 10000 */
  long backoff_ms;         /* TOKITAI_JIT_REMOTE_BACKOFF_MS, 1000: the first
                              time off; doubles to 64 times that */
  int readonly;            /* TOKITAI_JIT_REMOTE_READONLY=1 */
} tj__remote_settings;

#define TJ__REMOTE_MAX_SERVERS 64
/* The values of a key: "tokitai-jit:v1:code:<key>"; its lease:
 * "tokitai-jit:v1:lease:<key>". */
#define TJ__REMOTE_NAMESPACE "tokitai-jit:v1:"
/* The longest lease token. */
#define TJ__REMOTE_TOKEN 48

/* Read the settings from the environment; a value that is not a number
 * in range keeps its default and is named in why (else why is ""). */
void tj__remote_settings_env(tj__remote_settings *s, char *why, size_t len);

/* ------------------------------------------------------ the backend */

/* One command's account: the bytes it moved and, when it failed, why. */
typedef struct tj__remote_call {
  uint64_t bytes_in, bytes_out;
  uint64_t redirects; /* cluster redirections (MOVED, ASK) followed */
  int timeout;     /* the deadline passed */
  int away;        /* nothing of an answer came: no connection, a closed
                      one, or silence until the deadline */
  char what[640];  /* the fault, naming the server */
} tj__remote_call;

/*
 * A backend's commands.  Each returns what it says, or -1 with call->what
 * (and call->timeout) set: the tier then goes off for a while.  The tier
 * calls one command at a time (its lock held), so a backend needs no lock
 * of its own; each command ends within the operation timeout.
 */
typedef struct tj__remote_backend {
  const char *scheme; /* the spec's entries start with it: "redis://" */
  /* The servers of spec; nothing connected yet.  TJ_OK, TJ_EINVAL (msg),
   * TJ_ENOMEM, TJ_EIO (msg: the backend is not built in).  *readonly is
   * set when the spec asks for it. */
  int (*open)(const char *spec, const tj__remote_settings *s, void **out,
              int *readonly, char *msg, size_t len);
  void (*close)(void *b);
  int (*server_count)(void *b);
  /* The server of key, from 0 to TJ__REMOTE_MAX_SERVERS - 1: its breaker.
   * After a fault it names the server that had it. */
  int (*server_of)(void *b, const char *key);
  /* key's value, at most max bytes: 1 with *val (malloc'd), *len; 0: none. */
  int (*get)(void *b, const char *key, size_t max, unsigned char **val,
             size_t *len, tj__remote_call *c);
  /* Store val under key, only where none is unless replace; expires after
   * ttl_s when > 0.  1: stored; 0: one was there. */
  int (*put)(void *b, const char *key, const unsigned char *val, size_t len,
             int replace, long ttl_s, tj__remote_call *c);
  /* 1: a value for key is there; 0: none. */
  int (*exists)(void *b, const char *key, tj__remote_call *c);
  /* key's lease for ms under token: taken where none is (expect NULL), or
   * where its holder is still expect (a takeover).  1: taken; 0: not. */
  int (*lease_take)(void *b, const char *key, const char *token,
                    const char *expect, long ms, tj__remote_call *c);
  /* Extend it to ms from now while it is token's: 1; 0: it is not. */
  int (*lease_renew)(void *b, const char *key, const char *token, long ms,
                     tj__remote_call *c);
  /* Delete it while it is token's.  0. */
  int (*lease_release)(void *b, const char *key, const char *token,
                       tj__remote_call *c);
  /* Its holder's token: 1 (token filled); 0: nobody holds it. */
  int (*lease_holder)(void *b, const char *key, char *token, size_t len,
                      tj__remote_call *c);
} tj__remote_backend;

extern const tj__remote_backend tj__remote_redis; /* remote_redis.c */
/* The Redis Cluster hash slot of a key name (n bytes): CRC16-XMODEM of
 * its hash tag (what is between its first '{' and the next '}', when not
 * empty), else of the whole name, mod 16384. */
unsigned tj__remote_redis_slot(const char *name, size_t n);

/* ------------------------------------------------------ the tier */

/*
 * A remote for spec: entries separated by commas, each for a backend by
 * its scheme ("redis://HOST:PORT", remote_redis.c says what else), with
 * "?readonly" for a tier this process never writes.  Nothing is
 * connected yet.  TJ_OK with *out; TJ_EINVAL with the reason in msg;
 * TJ_EIO (msg says so) when the backend was not built in.
 */
int tj__remote_open(const char *spec, const tj__remote_settings *s,
                    tj__remote **out, char *msg, size_t len);
/* End the lease renewals and publish what waits for the tier, if the
 * tier may be tried now; the counters stay readable.  NULL is fine. */
void tj__remote_stop(tj__remote *r);
/* Stop (if not yet) and free.  NULL is fine. */
void tj__remote_close(tj__remote *r);
int tj__remote_readonly(const tj__remote *r);
/* Write nothing from now on (the per-user cache is read-only). */
void tj__remote_set_readonly(tj__remote *r);
int tj__remote_server_count(const tj__remote *r);
/* The server that holds key's value and lease. */
int tj__remote_server_of(const tj__remote *r, const char *key);

/* Non-zero while the tier is off for any server (its breaker open). */
int tj__remote_off(const tj__remote *r);
/* The last change of state, to be said once: copied out the first time
 * (1), else 0. */
int tj__remote_take_warning(tj__remote *r, char *out, size_t len);
void tj__remote_get_counters(const tj__remote *r, tj__remote_counters *c);

/* A value fetched and checked, every field equal to what was asked: the
 * row's code and columns as a cache lookup gives them.  Free it with
 * tj__found_free. */
typedef tj__found tj__remote_value;

/*
 * Fetch want->key's value.  It must carry the magic and format version,
 * echo the key, have every field of want equal (want->kernel NULL: any
 * kernel), its code within TJ_CACHE_MAX_CODE_BYTES and matching its
 * XXH3-128, and nothing after it.  TJ_OK fills *v; TJ_ENOENT: no usable
 * value (*rejected set when there was one and it failed a check: it is
 * never loaded, and the next put replaces it); TJ_EIO: the tier is off.
 */
int tj__remote_get(tj__remote *r, const tj__cache_row *want,
                   tj__remote_value *v, int *rejected);
/* Store the row's value where none is (values are immutable, the first
 * stays), or over one that failed its check here.  While the tier is
 * off the value waits (bounded) and is published when it is back.  TJ_OK
 * (also when read-only: nothing written) or TJ_EIO. */
int tj__remote_put(tj__remote *r, const tj__cache_row *row);
/* The encoding of a value: malloc'd, its length in *len. */
unsigned char *tj__remote_encode(const tj__cache_row *row, size_t *len);
/* The whole check of a fetched value (as tj__remote_get says).  0: it is
 * want's, and v is filled; -1: it fails a check; -2: out of memory. */
int tj__remote_decode(const unsigned char *b, size_t len,
                      const tj__cache_row *want, tj__remote_value *v);

/* One compile's hold on a key across machines. */
struct tj__remote_lease {
  char key[TJ__KEY_HEX];
  char token[TJ__REMOTE_TOKEN];
  int held; /* ours: renewed until tj__remote_lease_end */
};
typedef struct tj__remote_lease tj__remote_lease;

/*
 * Before compiling key, which no layer had: take its lease, or wait for
 * its holder.  The holder's lease is renewed (every third of the lease
 * time) until tj__remote_lease_end, so a waiter takes it over only when
 * the renewals stop (the holder died or stalled) and the lease expires;
 * when wait_ms passes with one holder still renewing, one waiter takes it
 * from that holder, not every waiter (a holder that took the lease over
 * gets four times wait_ms).  The holder takes its lease again when it
 * finds it gone (the server restarted empty); a waiter that finds the
 * holder it saw gone, and no value, gives it a renewal and a little
 * more to do so before it takes the lease itself, so that a restart
 * costs no compile.  A value that failed its check here is not taken as
 * done: the waiter waits for the lease.  A fault where the
 * server is away (tj__remote_call.away) is waited through, a few faults
 * in a row at most (remote.c, RIDE_FAULTS), so that a stall or a restart
 * does not make every waiter compile.  1: look in every layer again
 * before compiling (the value may be there); 0: compile.  Either way end
 * with tj__remote_lease_end.
 */
int tj__remote_lease_begin(tj__remote *r, const char *key, long wait_ms,
                           tj__remote_lease *l);
void tj__remote_lease_end(tj__remote *r, tj__remote_lease *l);

/* ------------------------------------------------------------ lease.c */

/*
 * One compile per key on one machine: an open file description lock
 * (F_OFD_SETLK) on one byte, chosen by key, of the cache's own lock file
 * (<cache>.lock, judged as location.c judges it).  The kernel drops it
 * when its holder dies.  Polls with a jittered sleep for at most bound_ms;
 * then waiters contend for a second byte of the key for four times as
 * long, so that one of them takes over from a holder that stopped, not
 * all.  A
 * descriptor holding a lease, or -1 when none can be had (a read-only
 * cache, no lock file, both bounds passed); *waited says whether it had
 * to wait for another holder.
 */
int tj__lease_take(const char *cache_path, unsigned flags, const char *key,
                   long bound_ms, int *waited);
void tj__lease_release(int fd);
/* Sleep between 1/2 and 3/2 of ms, drawn from *seed. */
void tj__lease_sleep_jittered(long ms, uint64_t *seed);
/* A seed that differs between processes and threads. */
uint64_t tj__lease_seed(void);

#endif /* TJ_REMOTE_H */
