/*
 * once.c: the remote tier and one compile per key, as a runtime uses them.
 * The tier itself (its logic, the value format, the breaker, the leases
 * and their renewal) sits behind the interface of src/cache/remote.h; the
 * same-machine lease is src/cache/lease.c.  Here: which remote a runtime
 * has, the remote lookup under the per-user cache (a hit is copied into
 * it), publishing a compile, the leases around one, and the warnings.
 *
 * Before compiling a key that no layer has, a runtime takes the lease of
 * its per-user cache for the key (other processes of this machine on the
 * same cache wait), then the remote lease (processes of other machines
 * wait); whoever waited looks in every layer again, and so does the
 * holder, since the last holder may have finished between its miss and its
 * lease.  Every wait is bounded: TOKITAI_JIT_LEASE_WAIT_MS (30 s) for each
 * of the two, after which one waiter takes over; a holder that dies frees
 * the local lease at once (the kernel drops it) and the remote one when
 * its renewals stop and it expires (TOKITAI_JIT_REMOTE_LEASE_MS, 10 s),
 * and the waiters' grace for a holder that lost it to a restart has
 * passed (half that at most).
 */
#include "internal.h"
#include "layers.h"
#include "remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_WAIT_MS 30000L

/* A change of the tier's state: one warning for the runtime. */
static void say_state(tj_runtime *rt)
{
  char why[900];
  if (rt->remote && tj__remote_take_warning(rt->remote, why, sizeof why))
    tj__warn(rt, "%s", why);
}

static int tier_get(void *ctx, const tj__cache_row *want, tj__found *out);
static void tier_put(void *ctx, const tj__cache_row *row);

int tj__remote_setup(tj_runtime *rt, const char *spec)
{
  char why[256];
  const char *wait = getenv("TOKITAI_JIT_LEASE_WAIT_MS");
  char *end = NULL;
  long w = wait && *wait ? strtol(wait, &end, 10) : DEFAULT_WAIT_MS;
  if (end && (*end || w < 0 || w > 3600000L)) {
    tj__warn(rt, "TOKITAI_JIT_LEASE_WAIT_MS='%.64s' is not a whole number "
             "from 0 to 3600000; using %ld", wait, DEFAULT_WAIT_MS);
    w = DEFAULT_WAIT_MS;
  }
  rt->lease_wait_ms = w;
  int from_env = !spec;
  if (from_env)
    spec = getenv("TOKITAI_JIT_REMOTE");
  /* The tier sits under the per-user cache, where its hits land: without
   * one (TJ_CACHE_DISABLE, or a cache that could not be opened, which
   * has said so) it is off too.  Nothing is opened or connected here: a
   * warm start from the code directory touches neither SQLite nor the
   * network. */
  if (!spec || !*spec || !rt->layers)
    return TJ_OK;
  tj__remote_settings set;
  tj__remote_settings_env(&set, why, sizeof why);
  if (why[0])
    tj__warn(rt, "%s", why);
  /* A cache this process may not write: write nothing anywhere (a file
   * found read-only when it is opened says so later, in tier_put). */
  if ((rt->flags & TJ_CACHE_READONLY) ||
      (rt->cache && tj__cache_readonly(rt->cache)))
    set.readonly = 1;
  char msg[512];
  int rc = tj__remote_open(spec, &set, &rt->remote, msg, sizeof msg);
  if (rc == TJ_OK) {
    tj__remote_tier tier = {tier_get, tier_put, NULL, rt};
    tj__layers_set_remote(rt->layers, &tier);
    return TJ_OK;
  }
  if (rc == TJ_ENOMEM)
    return tj__fail(rt, rc, "out of memory");
  if (rc == TJ_EINVAL && !from_env)
    return tj__fail(rt, rc, "tj_options.remote: %s", msg);
  const char *what = from_env ? "TOKITAI_JIT_REMOTE" : "tj_options.remote";
  tj__warn(rt, "%s%s%s; running without the remote tier", what,
           rc == TJ_EINVAL ? ": " : " is set, but ", msg);
  return TJ_OK;
}

void tj__remote_teardown(tj_runtime *rt)
{
  tj__remote_stop(rt->remote); /* publishes what waited, if it may */
  if (rt->remote && rt->cache) {
    tj__remote_counters n;
    tj__remote_get_counters(rt->remote, &n);
    uint64_t v[TJ__REMOTE_COUNTERS] = {
        n.hits,     n.misses,   n.errors,    n.timeouts,
        n.bytes_in, n.bytes_out, n.openings, n.renewals,
        n.takeovers, (uint64_t)tj__remote_off(rt->remote), n.redirects};
    tj__cache_add_counters(rt->cache, v);
  }
  tj__remote_close(rt->remote);
  rt->remote = NULL;
}

void tj__remote_stats(const tj_runtime *rt, tj_stats *s)
{
  if (!rt->remote)
    return;
  tj__remote_counters n;
  tj__remote_get_counters(rt->remote, &n);
  s->remote_hits = n.hits;
  s->remote_misses = n.misses;
  s->remote_errors = n.errors;
  s->remote_timeouts = n.timeouts;
  s->remote_bytes_in = n.bytes_in;
  s->remote_bytes_out = n.bytes_out;
  s->remote_breaker_openings = n.openings;
  s->remote_lease_renewals = n.renewals;
  s->remote_lease_takeovers = n.takeovers;
  s->remote_published_late = n.published;
  s->remote_state = tj__remote_off(rt->remote) ? TJ_REMOTE_OFF : TJ_REMOTE_ON;
  s->remote_redirects = n.redirects;
  s->cache_drops += n.rejects;
}

/* ------------------------------------------------------- lookup, publish */

/* The remote tier in the layers' slot (src/cache/layers.h), asked after
 * every local layer missed: the value, checked whole by tj__remote_get;
 * the layers check its code against its hash again and copy it into the
 * per-user cache, where the next process of this machine finds it. */
static int tier_get(void *ctx, const tj__cache_row *want, tj__found *out)
{
  tj_runtime *rt = ctx;
  if (!rt->remote)
    return TJ_ENOENT;
  int rejected = 0;
  int rc = tj__remote_get(rt->remote, want, out, &rejected);
  say_state(rt);
  if (rejected)
    tj__warn(rt, "the remote value for %s (key %s) failed its checks: not "
             "loaded; compiling", want->kernel ? want->kernel : "a module",
             want->key);
  if (rc != TJ_OK)
    return TJ_ENOENT;
  tj__hash_hex(out->code, out->size, out->code_hash);
  return TJ_OK;
}

/* A row compiled here, for the other machines: published now, or when
 * the tier is back. */
static void tier_put(void *ctx, const tj__cache_row *row)
{
  tj_runtime *rt = ctx;
  if (!rt->remote)
    return;
  if (rt->cache && tj__cache_readonly(rt->cache))
    tj__remote_set_readonly(rt->remote);
  tj__remote_put(rt->remote, row);
  say_state(rt);
}

/* ------------------------------------------------------- leases */

int tj__once_begin(tj_runtime *rt, const char *key, tj__once *o)
{
  memset(o, 0, sizeof *o);
  o->fd = -1;
  int waited = 0, again = 0;
  tj__cache *c = tj__runtime_cache(rt);
  if (c && !tj__cache_readonly(c)) {
    o->fd = tj__lease_take(tj__cache_file(c), rt->flags, key,
                           rt->lease_wait_ms, &waited);
    again = o->fd >= 0 || waited;
  } else if (c && rt->remote) {
    tj__remote_set_readonly(rt->remote);
  }
  if (rt->remote && (o->lease = malloc(sizeof *o->lease))) {
    again |= tj__remote_lease_begin(rt->remote, key, rt->lease_wait_ms,
                                    o->lease);
    say_state(rt);
  }
  return again;
}

void tj__once_end(tj_runtime *rt, tj__once *o)
{
  if (o->lease) {
    tj__remote_lease_end(rt->remote, o->lease);
    say_state(rt);
    free(o->lease);
    o->lease = NULL;
  }
  tj__lease_release(o->fd);
  o->fd = -1;
}
