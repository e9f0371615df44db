/*
 * layers.c: the chain of caches under the in-memory table (layers.h):
 * the per-user file, then the read-only system caches, then the remote
 * tier.  What each layer may be trusted with:
 *
 *  - the per-user code directory is read first (codestore.h): a file
 *    there passes record.c's checks against the request or is a miss;
 *  - the per-user file and each system cache are judged where they lie
 *    (location.c) and every row they give is checked by rows.c: its
 *    columns against the request, its blob against its stored XXH3-128
 *    and size, before the blob is handed on;
 *  - the remote tier's answers are checked here, the same way;
 *  - a hit below the per-user file is copied into it (tj__cache_put
 *    hashes the code again as it stores it), so the next process finds
 *    it in the first layer.
 *
 * A layer that fails (a damaged system file, a refused one, an I/O error)
 * is a miss with one warning, never the reason a request fails.
 */
#include "cache_internal.h"
#include "codestore.h"
#include "layers.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYSTEM_ENV "TOKITAI_JIT_SYSTEM_CACHE"
#define MAX_SYSTEM_CACHES 16

struct tj__layers {
  tj__cache *(*user)(void *ctx);    /* the per-user file, opened on demand */
  void *user_ctx;
  tj__codestore *code;              /* borrowed; NULL for none */
  uint64_t max_bytes;
  char *paths[MAX_SYSTEM_CACHES];   /* as configured */
  int npaths;
  /* Opened on the first lookup that reaches them, under lock. */
  pthread_mutex_t lock;
  int system_ready;                 /* atomic: system[] may be read */
  tj__cache *system[MAX_SYSTEM_CACHES];
  int nsystem;
  char *open_warning;               /* what opening them found, said once */
  /* The remote tier: empty until tj__layers_set_remote. */
  tj__remote_tier remote;
};

/* ------------------------------------------------------- configuration */

static tj__cache *user_of(const tj__layers *l)
{
  return l->user ? l->user(l->user_ctx) : NULL;
}

/* Add each non-empty element of the colon-separated list; a path given
 * twice is looked at once. */
static int add_paths(tj__layers *l, const char *list)
{
  for (const char *p = list; p && *p;) {
    size_t n = strcspn(p, ":");
    int seen = n == 0;
    for (int i = 0; i < l->npaths && !seen; i++)
      seen = strlen(l->paths[i]) == n && strncmp(l->paths[i], p, n) == 0;
    if (!seen && l->npaths < MAX_SYSTEM_CACHES &&
        !(l->paths[l->npaths++] = strndup(p, n)))
      return TJ_ENOMEM;
    p += n + (p[n] == ':');
  }
  return TJ_OK;
}

int tj__layers_open(tj__cache *(*user)(void *ctx), void *ctx,
                    tj__codestore *code, const char *system,
                    uint64_t max_bytes, tj__layers **out)
{
  tj__layers *l = calloc(1, sizeof *l);
  *out = NULL;
  if (!l)
    return TJ_ENOMEM;
  l->user = user;
  l->user_ctx = ctx;
  l->code = code;
  l->max_bytes = max_bytes;
  pthread_mutex_init(&l->lock, NULL);
  int rc = system ? add_paths(l, system) : add_paths(l, getenv(SYSTEM_ENV));
  if (rc == TJ_OK && !system)
    rc = add_paths(l, TJ__SYSTEM_CACHE_DEFAULT);
  if (rc != TJ_OK) {
    tj__layers_close(l);
    return rc;
  }
  *out = l;
  return TJ_OK;
}

void tj__layers_close(tj__layers *l)
{
  if (!l)
    return;
  if (l->remote.close)
    l->remote.close(l->remote.ctx);
  for (int i = 0; i < l->nsystem; i++)
    tj__cache_close(l->system[i]);
  for (int i = 0; i < l->npaths; i++)
    free(l->paths[i]);
  free(l->open_warning);
  pthread_mutex_destroy(&l->lock);
  free(l);
}

void tj__layers_set_remote(tj__layers *l, const tj__remote_tier *remote)
{
  if (l && remote)
    l->remote = *remote;
}

/* ------------------------------------------------------- warnings */

static void warn(tj__lookup *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Append a sentence to out's warning; the caller says it once. */
static void warn(tj__lookup *out, const char *fmt, ...)
{
  size_t used = strlen(out->warning);
  if (used && used + 2 < sizeof out->warning) {
    strcpy(out->warning + used, "; ");
    used += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out->warning + used, sizeof out->warning - used, fmt, ap);
  va_end(ap);
}

static void note_open_problem(tj__layers *l, const char *msg)
{
  char *joined = NULL;
  if (asprintf(&joined, "%s%s%s", l->open_warning ? l->open_warning : "",
               l->open_warning ? "; " : "", msg) < 0)
    return;
  free(l->open_warning);
  l->open_warning = joined;
}

/* ------------------------------------------------------- system caches */

/* A system cache that is the per-user file itself is skipped: reading it
 * immutable while this process writes it would see torn pages. */
static int is_user_file(const tj__layers *l, dev_t dev, ino_t ino)
{
  dev_t udev;
  ino_t uino;
  tj__cache *user = user_of(l);
  if (!user)
    return 0;
  tj__cache_identity(user, &udev, &uino);
  return udev == dev && uino == ino;
}

/* Open every configured system cache, once.  An absent file costs one
 * stat and says nothing; any other failure is said once (the first
 * lookup that gets here hands it to its caller). */
static void open_system(tj__layers *l, tj__lookup *out)
{
  if (__atomic_load_n(&l->system_ready, __ATOMIC_ACQUIRE))
    return;
  pthread_mutex_lock(&l->lock);
  for (int i = 0; !l->system_ready && i < l->npaths; i++) {
    char msg[1024] = "";
    tj__cache *c = NULL;
    dev_t dev = 0;
    ino_t ino = 0;
    int rc = tj__cache_open_system(l->paths[i], &c, &dev, &ino, msg,
                                   sizeof msg);
    if (rc == TJ_OK && is_user_file(l, dev, ino)) {
      tj__cache_close(c);
      continue;
    }
    if (rc == TJ_OK)
      l->system[l->nsystem++] = c;
    else if (rc != TJ_ENOENT)
      note_open_problem(l, msg[0] ? msg : tj_strerror(rc));
  }
  if (!l->system_ready && l->open_warning)
    warn(out, "%s", l->open_warning);
  __atomic_store_n(&l->system_ready, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&l->lock);
}

/* ------------------------------------------------------- lookups */

/* Copy a hit from a lower layer into the per-user file; a copy that
 * fails costs the next process a lookup further down, and is said. */
static void copy_up(tj__layers *l, const tj__cache_row *want,
                    const tj__found *f, const char *origin, tj__lookup *out)
{
  tj__cache *user = user_of(l);
  if (!user || tj__cache_readonly(user))
    return;
  tj__cache_row row = {want->key, f->kernel, want->arch, want->platform,
                       want->compiler, want->options, f->code, f->size,
                       f->compile_ms, f->entries, want->inputs};
  if (tj__cache_put_origin(user, &row, origin) != TJ_OK) {
    warn(out, "could not copy %s into the cache: %s", want->key,
         tj__cache_errmsg(user));
    return;
  }
  tj__cache_trim(user, -1, l->max_bytes, NULL);
}

/* The code directory: a file that fails a check was removed, and is said;
 * the SQLite file is asked next. */
static int from_code(tj__layers *l, const tj__cache_row *want,
                     const char *what, tj__lookup *out)
{
  char msg[768];
  if (!l->code)
    return TJ_ENOENT;
  int rc = tj__codestore_get(l->code, want, &out->found, msg, sizeof msg);
  if (rc == TJ_ECACHE)
    warn(out, "%s (for %s); not loaded", msg, what);
  return rc == TJ_ECACHE ? TJ_ENOENT : rc;
}

static int from_user(tj__layers *l, const tj__cache_row *want,
                     const char *what, tj__lookup *out)
{
  int rc = from_code(l, want, what, out);
  if (rc != TJ_ENOENT)
    return rc;
  tj__cache *user = user_of(l);
  if (!user)
    return TJ_ENOENT;
  rc = tj__cache_find(user, want, &out->found, &out->user_dropped);
  if (out->user_dropped)
    warn(out, "cache row %s for %s %s; dropped and recompiling", want->key,
         what, tj__cache_drop_reason(out->user_dropped));
  if (rc == TJ_ECACHE) /* the file failed under us: said once, then a miss */
    warn(out, "%s", tj__cache_errmsg(user));
  return rc == TJ_ECACHE ? TJ_ENOENT : rc;
}

static int from_system(tj__layers *l, const tj__cache_row *want,
                       const char *what, tj__lookup *out)
{
  open_system(l, out);
  for (int i = 0; i < l->nsystem; i++) {
    int dropped = 0;
    tj__cache *c = l->system[i];
    int rc = tj__cache_find(c, want, &out->found, &dropped);
    /* Read-only: a bad row stays, and is met again by the next process,
     * which warns again; this one warns once per row it meets. */
    if (dropped)
      warn(out, "system cache %s: row %s for %s %s; not loaded",
           tj__cache_file(c), want->key, what, tj__cache_drop_reason(dropped));
    if (rc == TJ_ECACHE)
      warn(out, "system cache %s", tj__cache_errmsg(c));
    if (rc == TJ_OK || rc == TJ_ENOMEM)
      return rc;
  }
  return TJ_ENOENT;
}

/* The remote tier's answer, checked as a local row is: its code against
 * its hash and size. */
static int from_remote(tj__layers *l, const tj__cache_row *want,
                       const char *what, tj__lookup *out)
{
  if (!l->remote.get)
    return TJ_ENOENT;
  tj__found f;
  memset(&f, 0, sizeof f);
  if (l->remote.get(l->remote.ctx, want, &f) != TJ_OK) {
    tj__found_free(&f);
    return TJ_ENOENT;
  }
  int bad = !f.kernel || !f.entries ||
            tj__rows_judge_code(f.code, (int64_t)f.size, (int64_t)f.size,
                                f.code_hash, 1);
  if (bad) {
    warn(out, "remote entry %s for %s failed its hash check; not loaded",
         want->key, what);
    tj__found_free(&f);
    return TJ_ENOENT;
  }
  out->found = f;
  return TJ_OK;
}

int tj__layers_get(tj__layers *l, const tj__cache_row *want,
                   const char *what, tj__lookup *out)
{
  memset(out, 0, sizeof *out);
  int rc = from_user(l, want, what, out);
  if (rc == TJ_OK)
    out->layer = TJ__LAYER_USER;
  if (rc == TJ_ENOENT && (rc = from_system(l, want, what, out)) == TJ_OK) {
    out->layer = TJ__LAYER_SYSTEM;
    copy_up(l, want, &out->found, TJ__ORIGIN_SYSTEM, out);
  }
  if (rc == TJ_ENOENT && (rc = from_remote(l, want, what, out)) == TJ_OK) {
    out->layer = TJ__LAYER_REMOTE;
    copy_up(l, want, &out->found, TJ__ORIGIN_REMOTE, out);
  }
  return rc;
}

void tj__layers_publish(tj__layers *l, const tj__cache_row *row)
{
  if (l && l->remote.put) /* the remote tier's slot */
    l->remote.put(l->remote.ctx, row);
}

void tj__layers_system_count(tj__layers *l, int *usable, int *configured)
{
  *usable = __atomic_load_n(&l->system_ready, __ATOMIC_ACQUIRE) ? l->nsystem
                                                                 : 0;
  *configured = l->npaths;
}
