/*
 * configs.c: the Hopper GEMM's configurations that a tuning decision may
 * name, the shape class a decision applies to, and each runtime's GEMM
 * state: its knobs and the decisions it met so far.
 *
 * Configurations.  Each is an entry of gemm_f16_sm90a.hip (a skinny
 * one's, of gemm_f16_sm90a_skinny.hip; those of tiles the rule never
 * runs, of gemm_f16_sm90a_extra.hip), a tile and a split factor, and
 * whether C is stored through TMA (the _tmastore ones).  For the tiles the split and the store are launch
 * arguments, not compile-time constants, and for the skinny kernel
 * (M <= 16) the split is the cluster size its entry was compiled with, so
 * every configuration runs one of the entries that tests/check_kernels.c
 * (and check_tuning.c, over this table) compile for sm_90a on a machine
 * without a GPU.  A decision naming a configuration that is not in the
 * table (another library wrote it) is ignored: the heuristic runs, and
 * the row is left for the library that knows it.
 *
 * Shape class.  The Hopper kernel's work is set by how many tiles it runs:
 * ceil(M / 128) rows of tiles, ceil(N / 128) columns of them and
 * ceil(K / 64) k-tiles; within one such triple the grids and the pipeline
 * depth are the same, and only the masked edges differ.  So the class is
 * that triple, exact up to 64 of each, and above that rounded up to eight
 * steps per power of two (where the GPU is full and the choice is
 * stable), so that a model's varying M does not make a tune per token
 * count.  The alignment class says whether C is 4-byte aligned with ldc
 * even (the epilogue stores pairs of halves) or not ("c4" or "c2").
 * M <= 16 (the skinny kernel's rows, whose configurations are its own)
 * counts as 0 rows of tiles.  Last, the device's SM count (rt->sms): the
 * plans fill the SMs, so parts with other counts get decisions of their
 * own from one library, arch and compiler.  Written "t1x32x64/c4/s132".
 */
#include "gemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLASS_EXACT 64

/* ------------------------------------------------------------ the table */

#define SPLIT(n)                                                            \
  {.name = "sm90a_128x128_split" #n,                                       \
   .entry = "gemm_f16_sm90a_128x128_splitk", .bn = 128, .split = n}
/* The Hopper skinny kernel (M <= 16) in bn-column strips, K split across a
 * cluster of s blocks: gemm_f16_sm90a_skinny<suffix>.  In the order the
 * rule weighs them (plan.c, skinny_rule): by split, the narrower strip
 * first. */
#define SKINNY(bn_, s, suffix)                                              \
  {.name = "sm90a_skinny_n" #bn_ "_k" #s,                                   \
   .entry = "gemm_f16_sm90a_skinny" suffix, .bn = bn_, .split = s,          \
   .skinny = 1}
/* A tile storing C directly (the base), and the same with its epilogue
 * through TMA stores (where a call's C or beta does not allow them, the
 * same tiles store directly; the rule's store is the TMA one). */
#define TILE(name_, bn_, ...)                                               \
  {.name = "sm90a_" name_, .entry = "gemm_f16_sm90a_" name_, .bn = bn_,     \
   .split = 1, __VA_ARGS__}
#define TMA_STORE(name_, bn_, ...)                                          \
  {.name = "sm90a_" name_ "_tmastore", .entry = "gemm_f16_sm90a_" name_,    \
   .bn = bn_, .split = 1, .tma_store = 1, __VA_ARGS__}
static const tj__gemm_config configs[] = {
  /* The tiles storing C directly from the accumulators. */
  TILE("128x256", 256, .persistent = 0),
  TILE("128x256_persistent", 256, .persistent = 1),
  TILE("128x128", 128, .persistent = 0),
  TILE("128x128_persistent", 128, .persistent = 1),
  TILE("128x64", 64, .persistent = 0),
  TILE("128x64_cluster_k2", 64, .cluster_k = 1),
  TILE("128x256_mc2", 256, .persistent = 1, .mc2 = 1),
  /* The same through TMA stores. */
  TMA_STORE("128x256", 256, .persistent = 0),
  TMA_STORE("128x256_persistent", 256, .persistent = 1),
  TMA_STORE("128x256_mc2", 256, .persistent = 1, .mc2 = 1),
  TMA_STORE("128x128", 128, .persistent = 0),
  TMA_STORE("128x128_persistent", 128, .persistent = 1),
  TMA_STORE("128x64", 64, .persistent = 0),
  TMA_STORE("128x64_cluster_k2", 64, .cluster_k = 1),
  SPLIT(2), SPLIT(3), SPLIT(4), SPLIT(5), SPLIT(6), SPLIT(7), SPLIT(8),
  SPLIT(9), SPLIT(10), SPLIT(11), SPLIT(12), SPLIT(13), SPLIT(14),
  SPLIT(15), SPLIT(16),
  SKINNY(128, 1, ""), SKINNY(256, 1, "256"),
  SKINNY(128, 2, "_k2"), SKINNY(256, 2, "256_k2"),
  SKINNY(128, 3, "_k3"), SKINNY(256, 3, "256_k3"),
  SKINNY(128, 4, "_k4"), SKINNY(256, 4, "256_k4"),
  SKINNY(128, 8, "_k8"),
};
#undef SPLIT
#undef SKINNY
#undef TILE
#undef TMA_STORE

const tj__gemm_config *tj__gemm_configs(size_t *n)
{
  *n = sizeof configs / sizeof configs[0];
  return configs;
}

const tj__gemm_config *tj__gemm_config_find(const char *name)
{
  for (size_t i = 0; name && i < sizeof configs / sizeof configs[0]; i++)
    if (strcmp(configs[i].name, name) == 0)
      return &configs[i];
  return NULL;
}

const tj__gemm_config *tj__gemm_config_of_entry(const char *entry, int split,
                                                int store)
{
  const tj__gemm_config *other = NULL;
  for (size_t i = 0; entry && i < sizeof configs / sizeof configs[0]; i++)
    if (strcmp(configs[i].entry, entry) == 0 &&
        (split == 0 || configs[i].split == split)) {
      if (configs[i].tma_store == store)
        return &configs[i];
      if (!other)
        other = &configs[i];
    }
  return other;
}

int tj__tuning_config_known(const char *op, const char *config)
{
  return op && (strcmp(op, TJ__GEMM_OP) == 0 || tj__gemm_family_op(op)) &&
         tj__gemm_config_find(config);
}

/* ------------------------------------------------------------ shape class */

typedef struct class_key {
  int mt, nt, kt, c4, sms;
} class_key;

/* Exact up to CLASS_EXACT; above, rounded up to a multiple of an eighth
 * of the power of two below (65..72 -> 72, 129..144 -> 144). */
static int bucket(int tiles)
{
  if (tiles <= CLASS_EXACT)
    return tiles;
  int step = 1;
  while (tiles / step >= 16)
    step *= 2;
  return (tiles + step - 1) / step * step;
}

static class_key key_of(int sms, int M, int N, int K, const void *C,
                        int ldc)
{
  class_key k = {M <= TJ__GEMM_SKINNY_ROWS ? 0 : bucket((M - 1) / 128 + 1),
                 bucket((N - 1) / 128 + 1), bucket((K - 1) / 64 + 1),
                 (uintptr_t)C % 4 == 0 && ldc % 2 == 0, sms};
  return k;
}

static void class_name(const class_key *k, char out[TJ__SHAPE_CLASS_MAX])
{
  snprintf(out, TJ__SHAPE_CLASS_MAX, "t%dx%dx%d/%s/s%d", k->mt, k->nt, k->kt,
           k->c4 ? "c4" : "c2", k->sms);
}

void tj__gemm_shape_class(int sms, int M, int N, int K, const void *C,
                          int ldc, char out[TJ__SHAPE_CLASS_MAX])
{
  class_key k = key_of(sms, M, N, K, C, ldc);
  class_name(&k, out);
}

/* ------------------------------------------------------------ the state */

typedef struct memo {
  class_key key;
  char op[TJ__GEMM_OP_MAX]; /* whose decisions: TJ__GEMM_OP, or a
                                 family op (tj__gemm_desc_op) */
  const tj__gemm_config *config; /* NULL: the heuristic's */
} memo;

/* What the family keeps in a runtime's slot. */
typedef struct gemm_state {
  tj__gemm_knobs knobs;
  pthread_mutex_t lock; /* guards the memo */
  memo *v;
  size_t n, cap;
} gemm_state;

static void *state_new(void)
{
  gemm_state *g = calloc(1, sizeof *g);
  if (g) {
    g->knobs = tj__gemm_knobs_rule;
    pthread_mutex_init(&g->lock, NULL);
  }
  return g;
}

static void state_free(void *p)
{
  gemm_state *g = p;
  if (!g)
    return;
  pthread_mutex_destroy(&g->lock);
  free(g->v);
  free(g);
}

static gemm_state *state_of(tj_runtime *rt)
{
  return tj__runtime_slot(rt, state_new, state_free);
}

const tj__gemm_knobs *tj__gemm_knobs_of(const tj_runtime *rt)
{
  const gemm_state *g = tj__runtime_slot_peek(rt);
  return g ? &g->knobs : &tj__gemm_knobs_rule;
}

int tj__gemm_knobs_set(tj_runtime *rt, const tj__gemm_knobs *k)
{
  gemm_state *g = state_of(rt);
  if (!g)
    return TJ_ENOMEM;
  g->knobs = *k;
  return TJ_OK;
}

/* The index of op's memo for k, or -1 when it has none.  Under
 * g->lock. */
static long memo_find(gemm_state *g, const char *op, const class_key *k)
{
  for (size_t i = 0; i < g->n; i++)
    if (memcmp(&g->v[i].key, k, sizeof *k) == 0 &&
        strcmp(g->v[i].op, op) == 0)
      return (long)i;
  return -1;
}

/* op's memo for k set to c, added when absent (not when out of memory:
 * the class is asked again next time).  Under g->lock. */
static void memo_put(gemm_state *g, const char *op, const class_key *k,
                     const tj__gemm_config *c)
{
  long i = memo_find(g, op, k);
  if (i >= 0) {
    g->v[i].config = c;
    return;
  }
  if (g->n == g->cap) {
    size_t cap = g->cap ? 2 * g->cap : 16;
    memo *v = realloc(g->v, cap * sizeof *v);
    if (!v)
      return; /* asked again next time */
    g->v = v;
    g->cap = cap;
  }
  memo m = {*k, "", c};
  snprintf(m.op, sizeof m.op, "%s", op);
  g->v[g->n++] = m;
}

/* ------------------------------------------------------------ decisions */

/* The cache's decision for op and the class (NULL: none, or one this
 * library does not know, ignored). */
static const tj__gemm_config *stored_decision(tj_runtime *rt, const char *op,
                                              const char *cls)
{
  char *config = NULL;
  int bad = 0;
  tj__cache *cache = tj__runtime_cache(rt);
  if (!cache)
    return NULL;
  tj__tuning_row want = {op, rt->arch, TJ__PLATFORM, rt->compiler,
                         cls, NULL, 0, 0, 0, NULL, 0, NULL, NULL, 0};
  int rc = tj__cache_tuning_get(cache, &want, &config, &bad);
  if (rc == TJ_ECACHE)
    tj__warn(rt, "%s", tj__cache_errmsg(cache));
  const tj__gemm_config *c = rc == TJ_OK ? tj__gemm_config_find(config) : NULL;
  free(config);
  return c;
}

const tj__gemm_config *tj__gemm_decision(tj_runtime *rt, int M, int N, int K,
                                         const void *C, int ldc)
{
  return tj__gemm_decision_for(rt, TJ__GEMM_OP, M, N, K, C, ldc);
}

const tj__gemm_config *tj__gemm_decision_for(tj_runtime *rt, const char *op,
                                             int M, int N, int K,
                                             const void *C, int ldc)
{
  gemm_state *g = state_of(rt);
  class_key key = key_of(rt->sms, M, N, K, C, ldc);
  if (!g)
    return NULL;
  pthread_mutex_lock(&g->lock);
  long i = memo_find(g, op, &key);
  const tj__gemm_config *c = i >= 0 ? g->v[i].config : NULL;
  pthread_mutex_unlock(&g->lock);
  if (i >= 0)
    return c;
  /* First sight of the class: one query, outside the lock (two threads
   * may both ask; they get the same answer). */
  char cls[TJ__SHAPE_CLASS_MAX];
  class_name(&key, cls);
  c = stored_decision(rt, op, cls);
  pthread_mutex_lock(&g->lock);
  memo_put(g, op, &key, c);
  pthread_mutex_unlock(&g->lock);
  return c;
}

void tj__gemm_decision_take(tj_runtime *rt, int M, int N, int K,
                            const tj__gemm_config *config)
{
  gemm_state *g = state_of(rt);
  class_key key = key_of(rt->sms, M, N, K, NULL, N);
  if (!g)
    return;
  pthread_mutex_lock(&g->lock);
  memo_put(g, TJ__GEMM_OP, &key, config);
  pthread_mutex_unlock(&g->lock);
}
