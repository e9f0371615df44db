/*
 * remote.h: the remote tier, a set of standalone Redis servers shared by
 * many machines (remote.c), and the same-machine lease (lease.c).  Only
 * src/core/once.c, which fits them into a runtime's lookups and compiles,
 * and the tests include this.  Nothing here knows a tj_runtime.
 *
 * The remote is advisory.  Every call is bounded by the timeouts of the
 * spec, and the first connection error, timeout or error reply turns the
 * whole tier off for the rest of the handle's life (tj__remote_off says
 * why, once): calls then answer at once as a miss.
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
} tj__remote_counters;

/* The settings that the environment gives (tj__remote_settings_env). */
typedef struct tj__remote_settings {
  long connect_timeout_ms; /* TOKITAI_JIT_REMOTE_CONNECT_TIMEOUT_MS, 100 */
  long timeout_ms;         /* TOKITAI_JIT_REMOTE_TIMEOUT_MS, 1000 */
  long ttl_s;              /* TOKITAI_JIT_REMOTE_TTL, 0: values never expire */
  long lease_ms;           /* TOKITAI_JIT_REMOTE_LEASE_MS, 10000 */
  int readonly;            /* TOKITAI_JIT_REMOTE_READONLY=1 */
} tj__remote_settings;

#define TJ__REMOTE_MAX_SERVERS 64
/* The values of a key: "tokitai-jit:v1:code:<key>"; its lease:
 * "tokitai-jit:v1:lease:<key>". */
#define TJ__REMOTE_NAMESPACE "tokitai-jit:v1:"

/* Read the settings from the environment; a value that is not a number
 * in range keeps its default and is named in why (else why is ""). */
void tj__remote_settings_env(tj__remote_settings *s, char *why, size_t len);

/*
 * A remote for spec: "redis://HOST:PORT[,redis://HOST:PORT...]", with
 * "?readonly" after the last (or any) URL for a tier this process never
 * writes.  Nothing is connected yet: each server is connected when first
 * needed.  TJ_OK with *out; TJ_EINVAL with the reason in msg;
 * TJ_EIO (msg says so) when the library was built without hiredis.
 */
int tj__remote_open(const char *spec, const tj__remote_settings *s,
                    tj__remote **out, char *msg, size_t len);
void tj__remote_close(tj__remote *r);
int tj__remote_readonly(const tj__remote *r);
int tj__remote_server_count(const tj__remote *r);
/* The server that holds key's value and lease: rendezvous (highest random
 * weight) hashing over the key and each server's "HOST:PORT", so that
 * adding a server moves only the keys it wins. */
int tj__remote_server_of(const tj__remote *r, const char *key);

/* Non-zero once the tier is off.  Why, to be said once:
 * tj__remote_take_warning copies it out the first time only (1), else 0. */
int tj__remote_off(const tj__remote *r);
int tj__remote_take_warning(tj__remote *r, char *out, size_t len);
void tj__remote_get_counters(const tj__remote *r, tj__remote_counters *c);

/* A value fetched and checked, every field equal to what was asked: the
 * row's code and columns as a cache lookup gives them.  Free it with tj__found_free. */
typedef tj__found tj__remote_value;

/*
 * Fetch want->key's value.  It must carry the magic and format version,
 * echo the key, have every field of want equal (want->kernel NULL: any
 * kernel), its code within TJ_CACHE_MAX_CODE_BYTES and matching its
 * XXH3-128, and nothing after it.  TJ_OK fills *v; TJ_ENOENT: no usable
 * value (*rejected set when there was one and it failed a check: it is
 * never loaded); TJ_EIO: the tier is off (now or before).
 */
int tj__remote_get(tj__remote *r, const tj__cache_row *want,
                   tj__remote_value *v, int *rejected);
/* SET NX (with the TTL when one is set) the row's value: values are
 * immutable, the first one stays.  replace: SET without NX, to mend a value
 * that failed its check.  TJ_OK (also when read-only: nothing written) or
 * TJ_EIO. */
int tj__remote_put(tj__remote *r, const tj__cache_row *row, int replace);
/* The encoding of a value: malloc'd, its length in *len. */
unsigned char *tj__remote_encode(const tj__cache_row *row, size_t *len);
/* The whole check of a fetched value (as tj__remote_get says).  0: it is
 * want's, and v is filled; -1: it fails a check; -2: out of memory. */
int tj__remote_decode(const unsigned char *b, size_t len,
                      const tj__cache_row *want, tj__remote_value *v);

/* Leases: SET NX PX lease_ms with token (unique to this attempt).
 * 1: taken; 0: another holds it; -1: the tier is off. */
int tj__remote_lease_take(tj__remote *r, const char *key, const char *token);
/* Delete the lease only while it is still token's.  Quiet on failure. */
void tj__remote_lease_release(tj__remote *r, const char *key,
                              const char *token);
/* 1: the value (which = 0) or lease (which = 1) of key exists; 0: it does
 * not; -1: the tier is off. */
int tj__remote_exists(tj__remote *r, const char *key, int which);

/* ------------------------------------------------------------ lease.c */

/*
 * One compile per key on one machine: an open file description lock
 * (F_OFD_SETLK) on one byte, chosen by key, of the cache's own lock file
 * (<cache>.lock, judged as location.c judges it).  The kernel drops it
 * when its holder dies.  Polls with a jittered sleep for at most bound_ms.
 * A descriptor holding the lease, or -1 when none can be had (a read-only
 * cache, no lock file, the bound passed); *waited says whether it had to
 * wait for another holder.
 */
int tj__lease_take(const char *cache_path, unsigned flags, const char *key,
                   long bound_ms, int *waited);
void tj__lease_release(int fd);
/* Sleep between 1/2 and 3/2 of ms, drawn from *seed. */
void tj__lease_sleep_jittered(long ms, uint64_t *seed);
/* A seed that differs between processes and threads. */
uint64_t tj__lease_seed(void);

#endif /* TJ_REMOTE_H */
