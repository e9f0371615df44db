/*
 * configs.c: the Hopper GEMM's configurations that a tuning decision may
 * name, the shape class a decision applies to, and each runtime's GEMM
 * state: its knobs, the decisions it met so far and the names it made.
 *
 * Configurations.  Each is a plan's choices (plan.h): its kind, its
 * tile's columns, its split and whether C is stored through TMA; the
 * kinds and the tiles, splits and stores each runs are listed once
 * (tj__gemm_configs), and the names follow from the choices.  One code
 * object serves every split of split-K and both stores of a tile (they
 * are launch arguments); the skinny kernel's split is the cluster its
 * code is compiled for.  A decision naming a configuration that is not
 * one of these (another library wrote it, or it is malformed) is
 * ignored: the rule runs, and the row is left for the library that
 * knows it.
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
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLASS_EXACT 64

/* ------------------------------------------------------------ configurations */

/* The skinny kernel's clusters (gemm_sm90a.hip's TJ_H_SPLIT), and the
 * widest strip each fits in shared memory beside its sums. */
static const int skinny_splits[] = {1, 2, 3, 4, 8};

static int skinny_widest(int split)
{
  return split == 8 ? 128 : 256;
}

static size_t add(tj__gemm_config *out, size_t n, int kind, int bn,
                  int split, int store)
{
  out[n] = (tj__gemm_config){kind, bn, split, store};
  return n + 1;
}

/* The tiles, each storing C directly and through TMA; split-K's splits
 * (its partials never go through TMA); the skinny kernel's clusters by
 * split, the narrower strip first (the order plan.c's skinny rule weighs
 * them in). */
size_t tj__gemm_configs(tj__gemm_config out[TJ__GEMM_CONFIGS_MAX])
{
  size_t n = 0;
  for (int store = 0; store <= 1; store++) {
    for (int bn = 256; bn >= 64; bn /= 2) {
      n = add(out, n, GEMM_KIND_TILE, bn, 1, store);
      if (bn > 64)
        n = add(out, n, GEMM_KIND_PERSISTENT, bn, 1, store);
    }
    n = add(out, n, GEMM_KIND_CLUSTER_K2, 64, 1, store);
    n = add(out, n, GEMM_KIND_MC2, 256, 1, store);
  }
  for (int split = 2; split <= SM90A_SPLIT_MAX; split++)
    n = add(out, n, GEMM_KIND_SPLIT, 128, split, 0);
  for (size_t i = 0; i < sizeof skinny_splits / sizeof skinny_splits[0]; i++)
    for (int bn = SM90A_SKINNY_BN; bn <= skinny_widest(skinny_splits[i]);
         bn *= 2)
      n = add(out, n, GEMM_KIND_SKINNY, bn, skinny_splits[i], 0);
  return n;
}

void tj__gemm_config_code(int kind, int bn, int split,
                          char out[TJ__GEMM_CONFIG_NAME_MAX])
{
  static const char *const tails[] = {"", "_persistent", "_mc2",
                                      "_cluster_k2", "_splitk"};
  if (kind == GEMM_KIND_SKINNY) {
    char k[16] = "";
    if (split > 1)
      snprintf(k, sizeof k, "_k%d", split);
    snprintf(out, TJ__GEMM_CONFIG_NAME_MAX, "sm90a_skinny%s%s",
             bn == SM90A_SKINNY_BN ? "" : "256", k);
    return;
  }
  snprintf(out, TJ__GEMM_CONFIG_NAME_MAX, "sm90a_%dx%d%s", SM90A_BM, bn,
           kind >= 0 && kind < GEMM_KIND_SKINNY ? tails[kind] : "_unknown");
}

void tj__gemm_config_name(const tj__gemm_config *c,
                          char out[TJ__GEMM_CONFIG_NAME_MAX])
{
  if (c->kind == GEMM_KIND_SKINNY)
    snprintf(out, TJ__GEMM_CONFIG_NAME_MAX, "sm90a_skinny_n%d_k%d", c->bn,
             c->split);
  else if (c->kind == GEMM_KIND_SPLIT)
    snprintf(out, TJ__GEMM_CONFIG_NAME_MAX, "sm90a_%dx%d_split%d", SM90A_BM,
             c->bn, c->split);
  else {
    tj__gemm_config_code(c->kind, c->bn, c->split, out);
    if (c->tma_store)
      strncat(out, "_tmastore", TJ__GEMM_CONFIG_NAME_MAX - strlen(out) - 1);
  }
}

/* A name is known when it is exactly one configuration's name. */
int tj__gemm_config_parse(const char *name, tj__gemm_config *out)
{
  tj__gemm_config all[TJ__GEMM_CONFIGS_MAX];
  char have[TJ__GEMM_CONFIG_NAME_MAX];
  size_t n = tj__gemm_configs(all);
  for (size_t i = 0; name && i < n; i++) {
    tj__gemm_config_name(&all[i], have);
    if (strcmp(have, name) == 0) {
      *out = all[i];
      return 1;
    }
  }
  return 0;
}

int tj__tuning_config_known(const char *op, const char *config)
{
  tj__gemm_config c;
  return op && (strcmp(op, TJ__GEMM_OP) == 0 || tj__gemm_family_op(op)) &&
         tj__gemm_config_parse(config, &c);
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
  int has;                   /* 0: the heuristic's */
  tj__gemm_config config;
} memo;

/* A name handed out by tj__gemm_intern. */
typedef struct interned {
  struct interned *next;
  char name[];
} interned;

/* What the family keeps in a runtime's slot. */
typedef struct gemm_state {
  tj__gemm_knobs knobs;
  pthread_mutex_t lock; /* guards the memo and the names */
  memo *v;
  size_t n, cap;
  interned *names;
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
  for (interned *i = g->names, *next; i; i = next) {
    next = i->next;
    free(i);
  }
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

const char *tj__gemm_intern(tj_runtime *rt, const char *name)
{
  gemm_state *g = state_of(rt);
  const char *out = NULL;
  if (!g)
    return NULL;
  pthread_mutex_lock(&g->lock);
  for (interned *i = g->names; i && !out; i = i->next)
    if (strcmp(i->name, name) == 0)
      out = i->name;
  size_t len = strlen(name) + 1;
  interned *i = out ? NULL : malloc(sizeof *i + len);
  if (i) {
    memcpy(i->name, name, len);
    i->next = g->names;
    g->names = i;
    out = i->name;
  }
  pthread_mutex_unlock(&g->lock);
  return out;
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

/* op's memo for k set to c (NULL: none), added when absent (not when out
 * of memory: the class is asked again next time).  Under g->lock. */
static void memo_put(gemm_state *g, const char *op, const class_key *k,
                     const tj__gemm_config *c)
{
  memo m = {*k, "", c != NULL, {0, 0, 0, 0}};
  if (c)
    m.config = *c;
  snprintf(m.op, sizeof m.op, "%s", op);
  long i = memo_find(g, op, k);
  if (i >= 0) {
    g->v[i] = m;
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
  g->v[g->n++] = m;
}

/* ------------------------------------------------------------ decisions */

/* The cache's decision for op and the class into *out: 1, or 0 for
 * none, or one this library does not know (ignored). */
static int stored_decision(tj_runtime *rt, const char *op, const char *cls,
                           tj__gemm_config *out)
{
  char *config = NULL;
  int bad = 0;
  tj__cache *cache = tj__runtime_cache(rt);
  if (!cache)
    return 0;
  tj__tuning_row want = {op, rt->arch, TJ__PLATFORM, rt->compiler,
                         cls, NULL, 0, 0, 0, NULL, 0, NULL, NULL, 0};
  int rc = tj__cache_tuning_get(cache, &want, &config, &bad);
  if (rc == TJ_ECACHE)
    tj__warn(rt, "%s", tj__cache_errmsg(cache));
  int has = rc == TJ_OK && tj__gemm_config_parse(config, out);
  free(config);
  return has;
}

int tj__gemm_decision_for(tj_runtime *rt, const char *op, int M, int N,
                          int K, const void *C, int ldc, tj__gemm_config *out)
{
  gemm_state *g = state_of(rt);
  class_key key = key_of(rt->sms, M, N, K, C, ldc);
  if (!g)
    return 0;
  pthread_mutex_lock(&g->lock);
  long i = memo_find(g, op, &key);
  int has = i >= 0 && g->v[i].has;
  if (has)
    *out = g->v[i].config;
  pthread_mutex_unlock(&g->lock);
  if (i >= 0)
    return has;
  /* First sight of the class: one query, outside the lock (two threads
   * may both ask; they get the same answer). */
  char cls[TJ__SHAPE_CLASS_MAX];
  class_name(&key, cls);
  has = stored_decision(rt, op, cls, out);
  pthread_mutex_lock(&g->lock);
  memo_put(g, op, &key, has ? out : NULL);
  pthread_mutex_unlock(&g->lock);
  return has;
}

void tj__gemm_decision_take(tj_runtime *rt, const char *op, int M, int N,
                            int K, const tj__gemm_config *config)
{
  gemm_state *g = state_of(rt);
  class_key key = key_of(rt->sms, M, N, K, NULL, N);
  if (!g)
    return;
  pthread_mutex_lock(&g->lock);
  memo_put(g, op, &key, config);
  pthread_mutex_unlock(&g->lock);
}
