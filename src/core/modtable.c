/*
 * modtable.c: the runtime's in-memory table of kernels.  A hit is one hash
 * of a short name and one mutex; a miss builds the kernel exactly once,
 * however many threads ask for it at the same moment: the first inserts a
 * placeholder and builds outside the lock, the others wait on it.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

enum { SLOT_BUILDING, SLOT_READY };

/* Set while this thread asks only for what is built (tj__built_only). */
static __thread int built_only;

int tj__built_only(int (*fn)(void *), void *ctx)
{
  int outer = built_only;
  built_only = 1;
  int rc = fn(ctx);
  built_only = outer;
  return rc;
}

int tj__built_only_now(void)
{
  return built_only;
}

typedef struct slot {
  struct slot *next;
  uint64_t hash;
  int kind;
  int state;
  char *name;
  tj_kernel *kernel;
} slot;

struct tj__modtable {
  pthread_mutex_t lock;
  pthread_cond_t built;  /* a BUILDING slot became READY or went away */
  slot **buckets;
  size_t nbuckets, count;
};

/* FNV-1a: names are short, and a hit must not cost more than the lock. */
static uint64_t name_hash(int kind, const char *name)
{
  uint64_t h = 1469598103934665603ull ^ (uint64_t)kind;
  for (const unsigned char *p = (const unsigned char *)name; *p; p++)
    h = (h ^ *p) * 1099511628211ull;
  return h;
}

tj__modtable *tj__modtable_new(void)
{
  tj__modtable *t = calloc(1, sizeof *t);
  if (!t)
    return NULL;
  t->nbuckets = 64;
  t->buckets = calloc(t->nbuckets, sizeof *t->buckets);
  if (!t->buckets) {
    free(t);
    return NULL;
  }
  pthread_mutex_init(&t->lock, NULL);
  pthread_cond_init(&t->built, NULL);
  return t;
}

static slot *find(tj__modtable *t, uint64_t h, int kind, const char *name)
{
  for (slot *s = t->buckets[h & (t->nbuckets - 1)]; s; s = s->next)
    if (s->hash == h && s->kind == kind && strcmp(s->name, name) == 0)
      return s;
  return NULL;
}

/* Double the buckets when the table is full; a failed resize just leaves
 * the chains longer. */
static void grow(tj__modtable *t)
{
  size_t n = t->nbuckets * 2;
  slot **b = calloc(n, sizeof *b);
  if (!b)
    return;
  for (size_t i = 0; i < t->nbuckets; i++)
    for (slot *s = t->buckets[i], *next; s; s = next) {
      next = s->next;
      s->next = b[s->hash & (n - 1)];
      b[s->hash & (n - 1)] = s;
    }
  free(t->buckets);
  t->buckets = b;
  t->nbuckets = n;
}

static slot *insert_placeholder(tj__modtable *t, uint64_t h, int kind,
                                const char *name)
{
  slot *s = calloc(1, sizeof *s);
  if (!s || !(s->name = strdup(name))) {
    free(s);
    return NULL;
  }
  if (t->count >= t->nbuckets)
    grow(t);
  s->hash = h;
  s->kind = kind;
  s->state = SLOT_BUILDING;
  s->next = t->buckets[h & (t->nbuckets - 1)];
  t->buckets[h & (t->nbuckets - 1)] = s;
  t->count++;
  return s;
}

static void remove_slot(tj__modtable *t, slot *gone)
{
  for (slot **p = &t->buckets[gone->hash & (t->nbuckets - 1)]; *p; p = &(*p)->next)
    if (*p == gone) {
      *p = gone->next;
      t->count--;
      free(gone->name);
      free(gone);
      return;
    }
}

int tj__modtable_get(tj__modtable *t, int kind, const char *name,
                     tj__build_fn build, void *ctx, tj_kernel **out,
                     int *memory_hit)
{
  uint64_t h = name_hash(kind, name);
  pthread_mutex_lock(&t->lock);
  slot *s;
  while ((s = find(t, h, kind, name)) && s->state == SLOT_BUILDING) {
    if (built_only) { /* being built is not built: no wait */
      pthread_mutex_unlock(&t->lock);
      *memory_hit = 0;
      return TJ_ENOENT;
    }
    pthread_cond_wait(&t->built, &t->lock);
  }
  if (s) {
    *out = s->kernel;
    *memory_hit = 1;
    pthread_mutex_unlock(&t->lock);
    return TJ_OK;
  }
  *memory_hit = 0;
  s = insert_placeholder(t, h, kind, name);
  pthread_mutex_unlock(&t->lock);
  if (!s)
    return TJ_ENOMEM;

  tj_kernel *k = NULL;
  int rc = build(ctx, &k);

  pthread_mutex_lock(&t->lock);
  if (rc == TJ_OK) {
    s->kernel = k;
    s->state = SLOT_READY;
    *out = k;
  } else {
    remove_slot(t, s); /* a waiter will try the build itself */
  }
  pthread_cond_broadcast(&t->built);
  pthread_mutex_unlock(&t->lock);
  return rc;
}

void tj__modtable_free(tj__modtable *t, void (*fn)(tj_kernel *, void *),
                       void *ctx)
{
  if (!t)
    return;
  for (size_t i = 0; i < t->nbuckets; i++)
    for (slot *s = t->buckets[i], *next; s; s = next) {
      next = s->next;
      if (s->kernel && fn)
        fn(s->kernel, ctx);
      free(s->name);
      free(s);
    }
  free(t->buckets);
  pthread_cond_destroy(&t->built);
  pthread_mutex_destroy(&t->lock);
  free(t);
}
