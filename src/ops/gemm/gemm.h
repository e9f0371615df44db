/*
 * gemm.h: the GEMM family's own declarations, shared by its files and
 * nothing else in the library (its tests and the benchmark reach them
 * too).  Dependencies run one way: the call (gemm.c) asks the plan
 * (plan.c) what to run and launches it; the plan asks the decisions
 * (configs.c) through tj__gemm_decision_for; the tuner (tune.c) times
 * the configurations through tj__gemm_hopper_run.  The kernels know nothing
 * of either.
 *
 * What the family keeps per runtime (its settings and the decisions met
 * so far) sits in the runtime's one family slot (tj__runtime_slot).
 */
#ifndef TJ_OPS_GEMM_H
#define TJ_OPS_GEMM_H

#include "internal.h"

/* ------------------------------------------------------------ knobs.c
 * Settings that force a path or a configuration, for the benchmark and
 * the tests that compare one against another.  A runtime starts with the
 * rule's (tj__gemm_knobs_rule); only tj__gemm_knobs_set changes them: the
 * library never reads them from the environment. */
typedef struct tj__gemm_knobs {
  int sm90a_off;    /* 1: no Hopper kernel */
  int forced_split; /* 1 to 64: K in that many parts; 0: the rule's */
  int tile;         /* 64, 128, 256: the Hopper tile of unsplit calls (for
                       M <= 16 the skinny kernel's strip: 128, 256);
                       0: the rule's */
  int persistent;   /* 1, 0; -1: the rule's */
  int skinny_tc;    /* 0 never, 1 wherever it runs; -1: the rule's */
  int tile_k2;      /* 1: the 128 x 64 tile split across a cluster of two;
                       0: another tile; -1: the rule's */
  int multicast;    /* 1, 0; -1: the rule's (the persistent 128 x 256 tile
                       in clusters of two sharing B) */
  int skinny_sm90a; /* 0: not the Hopper skinny kernel for M <= 16; -1:
                       the rule's (on) */
  int tma_store;    /* 1: C through TMA where the call allows it, 0: never;
                       -1: the plan's */
  int evict_first;  /* 1, 0: the skinny kernel's loads of B evict-first in
                       L2; -1: the rule's (on) */
  int early;        /* 0: the skinny kernel launched plainly; 1 or -1: with
                       programmatic dependent launch (the rule's) */
  int tc_only;      /* 1: tj_gemm's tensor-core path (tensorcore.c) for
                       every call it serves, before tj_gemm_f16's and the
                       Hopper one; 0: the rule's */
  int grouped_sm90a; /* 0: the portable grouped kernel for every call;
                        1 or -1: tj_grouped_gemm's Hopper kernels
                        (grouped_hopper.c) for the calls they serve (the
                        rule's) */
} tj__gemm_knobs;

/* The rule's settings: what every runtime starts with. */
extern const tj__gemm_knobs tj__gemm_knobs_rule;
/* The settings rt plans with (the rule's until tj__gemm_knobs_set).
 * Thread-safe. */
const tj__gemm_knobs *tj__gemm_knobs_of(const tj_runtime *rt);
/* Plan rt's GEMMs with k from now on; TJ_ENOMEM when the family's state
 * cannot be made.  Not safe against GEMM calls running on rt meanwhile. */
int tj__gemm_knobs_set(tj_runtime *rt, const tj__gemm_knobs *k);
/* The settings the TJ_GEMM_* variables of the environment ask for
 * (knobs.c lists them), on top of the rule's: the benchmark's and the
 * GPU tests' way to force a path, never the library's. */
void tj__gemm_knobs_from_env(tj__gemm_knobs *k);

/* ------------------------------------------------------------ configs.c
 * The Hopper configurations a tuning decision may name, derived from the
 * plan's choices, the shape class a decision applies to, and rt's memo of
 * the decisions met so far. */

/* One configuration of the Hopper GEMM: a plan's choices.  kind is a
 * tj__gemm_kind (plan.h: 0 one tile a block, 1 persistent, 2 persistent
 * in multicast pairs, 3 K split across a cluster of two, 4 split-K, 5 the
 * skinny kernel). */
typedef struct tj__gemm_config {
  int kind;
  int bn;        /* tile columns: 64, 128 or 256 (skinny: its strip's) */
  int split;     /* K parts (1: none; skinny: its cluster's blocks) */
  int tma_store; /* C stored through TMA where the call allows it */
} tj__gemm_config;
/* The rows the Hopper skinny kernel takes (kind 5). */
#define TJ__GEMM_SKINNY_ROWS 16
/* The name tuning decisions of tj_gemm_f16 (and of tj_gemm's f16 NN
 * calls without an epilogue) are stored under. */
#define TJ__GEMM_OP "gemm_f16"
/* Every configuration, into out (at most TJ__GEMM_CONFIGS_MAX): each
 * kind with the tiles, splits and stores it runs, the skinny kernel's by
 * split, the narrower strip first.  Returns the count. */
#define TJ__GEMM_CONFIGS_MAX 48
size_t tj__gemm_configs(tj__gemm_config out[TJ__GEMM_CONFIGS_MAX]);
/* A configuration's name as decisions store it ("sm90a_128x128_split4",
 * "sm90a_128x256_mc2_tmastore", "sm90a_skinny_n128_k2"), and the
 * configuration a name stands for: 1, or 0 where it is none of
 * tj__gemm_configs's (unknown or malformed). */
#define TJ__GEMM_CONFIG_NAME_MAX 40
void tj__gemm_config_name(const tj__gemm_config *c,
                          char out[TJ__GEMM_CONFIG_NAME_MAX]);
int tj__gemm_config_parse(const char *name, tj__gemm_config *out);
/* The code object part of a configuration's entries: its kind and tile
 * ("sm90a_128x256_mc2", "sm90a_128x128_splitk", "sm90a_skinny256_k3");
 * the split of split-K and the store are launch arguments, not part of
 * the code. */
void tj__gemm_config_code(int kind, int bn, int split,
                          char out[TJ__GEMM_CONFIG_NAME_MAX]);
/* Whether config is one this library has for op (TJ__GEMM_OP or a
 * family op). */
int tj__tuning_config_known(const char *op, const char *config);
/* The shape class of a call on a device of sms SMs, as stored. */
#define TJ__SHAPE_CLASS_MAX 48
void tj__gemm_shape_class(int sms, int M, int N, int K, const void *C,
                          int ldc, char out[TJ__SHAPE_CLASS_MAX]);
/* The configuration to run for a Hopper GEMM of op: TJ__GEMM_OP, or a
 * family op (tj__gemm_desc_op: one type, layout and epilogue of tj_gemm),
 * whose decisions are its own: the cache's decision for its shape class,
 * memoised per runtime (one query of the cache per class).  1 with *out
 * set; 0: none, the heuristic's. */
int tj__gemm_decision_for(tj_runtime *rt, const char *op, int M, int N,
                          int K, const void *C, int ldc,
                          tj__gemm_config *out);
/* Make config rt's decision for op and the class of M x N x K (C from
 * the pool: dense, aligned), as a --tune that just recorded it does. */
void tj__gemm_decision_take(tj_runtime *rt, const char *op, int M, int N,
                            int K, const tj__gemm_config *config);
/* A name interned in rt's GEMM state: the same pointer for the same
 * name until rt closes; NULL when out of memory. */
const char *tj__gemm_intern(tj_runtime *rt, const char *name);

/* ------------------------------------------------------------ tune.c */

/* How many timed passes over the candidates a --tune makes in left ms, a
 * pass taking round_ms (0: unknown); exposed for its tests. */
int tj__gemm_tune_rounds(double left, double round_ms);
/* Whether n fp16 values got agree with ref as two correct GEMMs' outputs
 * do (sums in another order, rounded again): each within 2^-9 of the
 * larger magnitude plus 2^-8 of ref's root mean square, NaN where the
 * other is NaN, an infinity where the other is the same one; else 0 with
 * *bad the first that does not. */
int tj__gemm_outputs_agree(const uint16_t *ref, const uint16_t *got, size_t n,
                           size_t *bad);
/* The names of the configurations a tune of d's op (its types, layouts,
 * epilogue, m, n, k; kinds checked, sizes from 1 to 2^30) times on rt,
 * the rule's choice first, into names (at most max); their count.  Asks
 * no GPU: for the tests of which candidates apply. */
size_t tj__gemm_tune_candidates(tj_runtime *rt, const tj_gemm_desc *d,
                                char names[][TJ__GEMM_CONFIG_NAME_MAX],
                                size_t max);

/* ------------------------------------------------------------ plan.c */

/* The configuration the heuristic picks for an sm_90 GEMM on a device of
 * sms SMs. */
void tj__gemm_heuristic(int sms, int M, int N, int K, tj__gemm_config *out);
/* Whether a Hopper tile launch stores C through TMA: asked for (by the
 * knobs, else by planned, the plan's or configuration's store), beta == 0
 * (C not read), N and ldc multiples of 8 (rows of whole 16-byte pieces,
 * so that no box crosses the end of a row) and C 16-byte aligned.  The
 * call's launches and the tuner's candidates both ask it. */
int tj__gemm_tma_store_applies(const tj__gemm_knobs *knobs, int planned,
                               int N, float beta, const void *C, int ldc);
/* Whether rt runs an M-row GEMM with suitable A and B on the Hopper
 * kernel (the one with configurations to tune). */
int tj__gemm_tunable(const tj_runtime *rt, int M);
/* The split-K heuristic of the Hopper GEMM: how many K-ranges make tiles
 * (128 x 128 tiles of C) blocks fill sms SMs, given ktiles k-tiles of 64;
 * 1 for none. */
int tj__gemm_sm90a_split(long long tiles, int ktiles, int sms);
/* The skinny tensor-core path's split of K for tiles strips of C on a GPU
 * of sms SMs (1: none); exposed for its tests. */
int tj__gemm_skinny_split(long long tiles, int K, int sms);
/* The Hopper skinny kernel's split (a cluster of that many blocks a
 * strip) and strip width (*bn: 128 or 256 columns) for N columns, ktiles
 * k-tiles of 64, sms SMs. */
int tj__gemm_sm90a_skinny_split(int N, int ktiles, int sms, int *bn);

/* ------------------------------------------------------------ gemm.c */

/* A Hopper call's A and B as TMA reads them: sizes, stored layouts
 * (trans_a: A stored K x M; trans_b: B stored N x K), bf16 or fp16. */
typedef struct tj__gemm_ab {
  int M, N, K;
  const void *A, *B;
  long long lda, ldb;
  int bf16, trans_a, trans_b;
} tj__gemm_ab;
/* The tensor maps of ab's A (boxes of a_rows x 64 K-major, or 64 x 64
 * M-major) and B (64 x 64) into ta and tb; TJ_EDEVICE, with tj_errmsg,
 * where the driver refuses one. */
int tj__gemm_sm90a_maps(tj_runtime *rt, const char *fn,
                        const tj__gemm_ab *ab, int a_rows, void *ta, void *tb);
/* Let kernel k (entry, for messages) take bytes of dynamic shared memory:
 * once a kernel, not at every call. */
int tj__gemm_kernel_shared(tj_runtime *rt, const char *fn, tj_kernel *k,
                           const char *entry, unsigned bytes);

/* The grid of the first launch tj_gemm_f16 would make for these arguments,
 * planned as tj_gemm_f16_kernel plans (for tests of the plans' grids:
 * persistent ones are one block per SM); {0, 0, 0}, with tj_errmsg, for
 * arguments it would refuse. */
tj_dim3 tj__gemm_f16_grid(tj_runtime *rt, int M, int N, int K,
                          const uint16_t *A, int lda, const uint16_t *B,
                          int ldb, const uint16_t *C, int ldc);

/* ------------------------------------------------------------ family.c */

/* The name of d's configuration on path (a suffix such as
 * "portable" or "sm90a_128x256_persistent"):
 * "gemm_bf16_bf16_f32_nt_biasgelu_" then path; tj__gemm_desc_op, the
 * part before it ("gemm_bf16_bf16_f32_nt_biasgelu"), is the op its tuning
 * decisions are stored under.  tj__gemm_family_op: whether op is one
 * tj__gemm_desc_op makes. */
#define TJ__GEMM_NAME_MAX 96

/* ------------------------------------------------------------ build.c
 * A configuration's code object: text (the embedded copy of file)
 * compiled with -Dkey=value for each define and -Dmacro=name for each
 * entry, the listed entries looked up in the module; for arch (NULL:
 * the runtime's), compiled the first time, then loaded. */
typedef struct tj__gemm_define {
  const char *key;
  int value;
} tj__gemm_define;
typedef struct tj__gemm_entry {
  const char *macro, *name;
  int listed;
} tj__gemm_entry;
typedef struct tj__gemm_source {
  const char *text, *file, *arch;
  const tj__gemm_define *defines;
  int n_defines;
  const tj__gemm_entry *entries;
  int n_entries;
} tj__gemm_source;
int tj__gemm_build(tj_runtime *rt, const tj__gemm_source *s, tj_module **m);
#define TJ__GEMM_OP_MAX 40
void tj__gemm_desc_name(const tj_gemm_desc *d, const char *path,
                        char out[TJ__GEMM_NAME_MAX]);
void tj__gemm_desc_op(const tj_gemm_desc *d, char out[TJ__GEMM_OP_MAX]);
int tj__gemm_family_op(const char *op);
/* The family's checks of the kinds a call names, shared with the
 * grouped call: types (A, B, C) each one A and B take (C also f32),
 * each transpose 0 or 1, a TJ_EPILOGUE_*; TJ_EINVAL with the field
 * named. */
int tj__gemm_check_kinds(tj_runtime *rt, const char *fn, const int types[3],
                         int trans_a, int trans_b, int epilogue);
/* The names configurations are made of: "f16", "bf16", "f32"; "none",
 * "bias", "biasgelu", "dgelu" (arguments already checked). */
const char *tj__gemm_dtype_name(int type);
const char *tj__gemm_epilogue_name(int epilogue);

/* The portable kernel's configuration for d: whether it takes d's M (its
 * grid's rows of tiles), and a launch of it on stream (d checked). */
int tj__gemm_portable_serves(const tj_gemm_desc *d);
int tj__gemm_portable_run(tj_runtime *rt, const char *fn, void *stream,
                          const tj_gemm_desc *d);

/* ------------------------------------------------------------ fallback.c
 * A first call with background builds on (tj_options.background_builds):
 * the specialised configuration queued on the runtime's worker, the call
 * on the fallback meanwhile. */

/* The fallback: whether it takes d, and a launch of d on it (d checked).
 * The one place that chooses it. */
int tj__gemm_fallback_serves(const tj_gemm_desc *d);
int tj__gemm_fallback_run(tj_runtime *rt, const char *fn, void *stream,
                          const tj_gemm_desc *d);
struct tj__gemm_plan; /* plan.h */
/* 1: run d on the fallback, since its specialised configuration (the
 * embedded entry of tj_gemm_f16's plan off Hopper; d's Hopper
 * configuration with plan, or NULL: the one tj_gemm plans) is not built
 * and its compile is queued, or failed; 0: run the specialised one
 * (built, or background builds off, or the fallback does not take d).
 * Thread-safe. */
int tj__gemm_defer_kernel(tj_runtime *rt, const char *entry,
                          const tj_gemm_desc *d);
int tj__gemm_defer_hopper(tj_runtime *rt, const tj_gemm_desc *d,
                          const struct tj__gemm_plan *plan);

/* ------------------------------------------------------------ hopper.c
 * The family's Hopper path: gemm_sm90a.hip's configurations. */

/* Whether the Hopper path takes d on rt: an sm_90 runtime (with a driver
 * that builds tensor maps, unless compile-only), A and B of one type,
 * alpha != 0, sizes and ldc in int. */
int tj__gemm_hopper_serves(const tj_runtime *rt, const tj_gemm_desc *d);
/* Run d (checked, served) on stream: cfg's plan (the tuner's and
 * tj_verify's), else plan's (tj_gemm_f16's, planned by
 * tj__gemm_plan_call), else the decision's or the rule's. */
int tj__gemm_hopper_run(tj_runtime *rt, const char *fn, void *stream,
                        const tj_gemm_desc *d, const tj__gemm_config *cfg,
                        const struct tj__gemm_plan *plan);
/* Compile (or load) d's configuration (plan's where not NULL) without
 * launching; *product (when not NULL): its product's kernel, owned by
 * rt. */
int tj__gemm_hopper_prepare(tj_runtime *rt, const tj_gemm_desc *d,
                            const struct tj__gemm_plan *plan,
                            tj_kernel **product);
/* The product entry's name of plan's configuration for d, interned in
 * rt (nothing compiled); NULL when out of memory. */
const char *tj__gemm_hopper_entry(tj_runtime *rt, const tj_gemm_desc *d,
                                  const struct tj__gemm_plan *plan);
/* The op whose tuning decisions d takes: TJ__GEMM_OP for tj_gemm_f16's
 * combination (f16, NN, no epilogue), else tj__gemm_desc_op's. */
void tj__gemm_hopper_op(const tj_gemm_desc *d, char op[TJ__GEMM_OP_MAX]);
/* tj_gemm_f16's call as the family's descriptor: f16, NN, no epilogue. */
tj_gemm_desc tj__gemm_f16_desc(int M, int N, int K, float alpha,
                               const void *A, int lda, const void *B,
                               int ldb, float beta, void *C, int ldc);

/* The product and (with d's bias_grad) the column sums of a
 * configuration whose product entry takes gemm_portable.hip's arguments
 * (the portable kernel's and the tensor-core path's), from module m: tile
 * x tile blocks of threads over C, N along x; the column sums 256
 * threads, 32 columns a block.  d checked. */
int tj__gemm_launch_tiles(tj_runtime *rt, const char *fn, void *stream,
                          const tj_gemm_desc *d, tj_module *m,
                          const char *product, const char *colsum, int tile,
                          unsigned threads);

/* ------------------------------------------------------------ tensorcore.c
 * The family's tensor-core path: gemm_f16.hip's configurations. */

/* Whether the tensor-core path takes d: A and B of one type, alpha != 0,
 * sizes and leading dimensions in int. */
int tj__gemm_tc_serves(const tj_runtime *rt, const tj_gemm_desc *d);
/* Whether rt's knobs send every call it serves there first. */
int tj__gemm_tc_forced(const tj_runtime *rt);
/* Run d (checked, served) on stream. */
int tj__gemm_tc_run(tj_runtime *rt, const char *fn, void *stream,
                    const tj_gemm_desc *d);
/* Compile (or load) d's configuration without launching; *entry (when
 * not NULL): its product entry's name, owned by rt. */
int tj__gemm_tc_prepare(tj_runtime *rt, const tj_gemm_desc *d,
                        const char **entry);

/* ------------------------------------------------------------ grouped
 * tj_grouped_gemm (grouped.c) and its Hopper path (grouped_hopper.c). */

/* The name of d's configuration on path ("portable",
 * "sm90a_128x128"): "gemm_grouped_m_bf16_bf16_bf16_nn_biasgelu_" then
 * path, into out (n bytes). */
void tj__grouped_name(const tj_grouped_gemm_desc *d, const char *path,
                      char *out, size_t n);
/* Whether the Hopper path takes d (checked) on rt: M-grouped, or
 * K-grouped with A stored K x M and B K x N; an sm_90 runtime (with a
 * driver that builds tensor maps, unless compile-only), A and B of one
 * type, alpha != 0, A and B (and stride_b) as TMA reads them, sizes and
 * ldc in int. */
int tj__grouped_hopper_serves(const tj_runtime *rt,
                              const tj_grouped_gemm_desc *d);
/* Run d (checked, served) on stream. */
int tj__grouped_hopper_run(tj_runtime *rt, const char *fn, void *stream,
                           const tj_grouped_gemm_desc *d);
/* Compile (or load) d's configuration without launching; *entry (when
 * not NULL): its product entry's name, owned by rt. */
int tj__grouped_hopper_prepare(tj_runtime *rt, const tj_grouped_gemm_desc *d,
                               const char **entry);

#endif
