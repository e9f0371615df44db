/*
 * layers.h: the cache layers under a runtime's in-memory table, looked up
 * in order: the per-user SQLite file (read-write, local), the read-only
 * system caches a package or a cluster image ships, then the remote tier.
 * A hit below the per-user file is copied into it.  Every blob from every
 * layer is checked against its hash before it is handed back; one that
 * fails is a miss with one warning, never an error, never loaded.
 *
 * runtime.c and user.c look up through tj__layers_get; nothing else of
 * the library knows the layers exist.  Thread-safe: a runtime's threads
 * share one tj__layers.
 */
#ifndef TJ_LAYERS_H
#define TJ_LAYERS_H

#include "cache_api.h"

typedef struct tj__layers tj__layers;

/* Where a hit came from. */
typedef enum tj__layer {
  TJ__LAYER_NONE = 0,
  TJ__LAYER_USER,   /* the per-user file */
  TJ__LAYER_SYSTEM, /* a read-only system cache */
  TJ__LAYER_REMOTE  /* the remote tier */
} tj__layer;

/*
 * The remote tier's slot, empty until the remote tier fills it
 * (tj__layers_set_remote).  get is asked after every local layer missed:
 * TJ_OK with *out filled (malloc'd; the layers check its hash and
 * columns before using it), anything else a miss.  put is told of each
 * row compiled here.  close ends it with the layers.  Each is called from
 * any of the runtime's threads.
 */
typedef struct tj__remote_tier {
  int (*get)(void *ctx, const tj__cache_row *want, tj__found *out);
  void (*put)(void *ctx, const tj__cache_row *row);
  void (*close)(void *ctx);
  void *ctx;
} tj__remote_tier;

/*
 * The layers over the runtime's per-user cache: code, its code directory
 * (borrowed; NULL for none), read first, and the SQLite file, which
 * user(ctx) gives (borrowed; NULL when there is none), opening it on the
 * first call that needs it, so that a hit in code opens no SQLite.  system: the system caches, colon-separated
 * (tj_options.system_caches); NULL for $TOKITAI_JIT_SYSTEM_CACHE and then
 * the installed default, "" for none.  Nothing is opened here: the system
 * caches are opened on the first lookup that misses the per-user file, so
 * a warm start never touches them.  max_bytes: the per-user cache's size
 * limit, applied after a copy.  TJ_OK or TJ_ENOMEM.
 */
int tj__layers_open(tj__cache *(*user)(void *ctx), void *ctx,
                    struct tj__codestore *code, const char *system,
                    uint64_t max_bytes, tj__layers **out);
/* Close the system caches and the remote tier (not the per-user cache). */
void tj__layers_close(tj__layers *l);
/* Fill the remote slot (the layers own it from now on). */
void tj__layers_set_remote(tj__layers *l, const tj__remote_tier *remote);

/* What tj__layers_get found, and what the caller should say about it. */
typedef struct tj__lookup {
  tj__found found;       /* on TJ_OK: the code and the row's columns */
  tj__layer layer;       /* on TJ_OK: where it came from */
  int user_dropped;      /* a per-user row failed a check and was deleted
                            (a TJ__DROP_* reason; 0 otherwise) */
  char warning[1024];    /* one thing to warn about ("" for none) */
} tj__lookup;

/*
 * Look want up in each layer in turn.  want's key, arch, platform,
 * compiler and options must match the row (and its kernel unless NULL).
 * TJ_OK: out->found holds the code (free with tj__found_free), checked
 * against its hash, and a hit below the per-user file has been copied
 * into it.  TJ_ENOENT: a miss in every layer.  TJ_ENOMEM.  what names
 * the request in warnings.
 */
int tj__layers_get(tj__layers *l, const tj__cache_row *want,
                   const char *what, tj__lookup *out);

/* A row compiled here, stored in the per-user file already: hand it to
 * the remote tier, if there is one. */
void tj__layers_publish(tj__layers *l, const tj__cache_row *row);

/* Counters for tests and --stats: how many system caches were found
 * usable, and how many configured (0 and 0 before the first miss). */
void tj__layers_system_count(tj__layers *l, int *usable, int *configured);

#endif /* TJ_LAYERS_H */
