/*
 * grouped_hopper.c: the grouped GEMM's Hopper path.  A tj_grouped_gemm
 * call that it serves runs a configuration of
 * kernels/gemm_grouped_sm90a.hip (the tiles' wgmma mainloop as one
 * persistent kernel over the groups' tiles), its direction, types,
 * layouts, epilogue and tile width as -D constants, compiled for sm_90a
 * the first time it is used; then its launch with a 2-D tensor map over
 * A and (M-grouped) a 3-D one over the E matrices of B or (K-grouped) a
 * 2-D one over B, and the per-group column sums of a dGELU's bias
 * gradient.  The grid comes from M, N and the groups alone:
 * no offset is read on the host, nothing is allocated, so the call
 * captures into a graph.  Operands that TMA cannot read as they lie stay
 * on the portable kernel (grouped.c).
 */
#include "call.h"
#include "plan.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* kernels/gemm_grouped_sm90a.hip after the headers it names (generated
 * by build-aux/embed.sh). */
extern const char tj__gemm_grouped_sm90a_source[];

/* The column sums: 256 threads a block, 32 columns, groups along y. */
#define COLSUM_THREADS 256u
#define COLSUM_COLUMNS 32
/* A TMA stride (bytes from one row or matrix to the next) stays below
 * 2^40 and is a multiple of 16. */
#define TMA_STRIDE_MAX (1ll << 40)

typedef struct gconfig {
  int bn;
  char product[TJ__GEMM_NAME_MAX], colsum[TJ__GEMM_NAME_MAX + 8];
} gconfig;

/* Whether TMA reads a 16-bit operand at p with rows ld elements apart. */
static int tma_readable(const void *p, int64_t ld)
{
  return (uintptr_t)p % 16 == 0 && ld % 8 == 0 && ld < TMA_STRIDE_MAX / 2;
}

/* The most tile rows the groups can make: M-grouped, every row in a
 * tile and one part-filled tile a group, two where A is stored K x M (a
 * group's tiles then start up to 7 rows before its first row, as the
 * kernel says); K-grouped, M's in each group. */
static int64_t tile_rows_max(const tj_grouped_gemm_desc *d)
{
  int64_t rows = (d->m + SM90A_BM - 1) / SM90A_BM;
  if (d->grouped == TJ_GROUPED_K)
    return rows * d->groups;
  return rows + (d->trans_a ? 2 : 1) * d->groups;
}

/* The directions and layouts the kernel has: M-grouped, any layout;
 * K-grouped (the weight gradient), A stored K x M and B K x N, whose
 * tiles are whole 128-byte k rows that the kernel can zero past a
 * group's end. */
static int kind_served(const tj_grouped_gemm_desc *d)
{
  return d->grouped == TJ_GROUPED_M ||
         (d->grouped == TJ_GROUPED_K && d->trans_a && !d->trans_b);
}

int tj__grouped_hopper_serves(const tj_runtime *rt,
                              const tj_grouped_gemm_desc *d)
{
  /* alpha == 0 reads neither A nor B: the portable kernel's. */
  const tj__gemm_knobs *knobs = tj__gemm_knobs_of(rt);
  if (knobs->grouped_sm90a == 0 || !kind_served(d) || knobs->sm90a_off ||
      d->a_type != d->b_type || d->alpha == 0.0f)
    return 0;
  if (strcmp(rt->arch, "sm_90") != 0 && strcmp(rt->arch, "sm_90a") != 0)
    return 0;
  if (!rt->compile_only && !tj__hopper_driver())
    return 0;
  if (d->m > GEMM_DIM_MAX || d->n > GEMM_DIM_MAX || d->k > GEMM_DIM_MAX ||
      d->ldc > INT_MAX || tile_rows_max(d) * ((d->n + 63) / 64) > INT_MAX)
    return 0;
  return tma_readable(d->a, d->lda) && tma_readable(d->b, d->ldb) &&
         (d->grouped == TJ_GROUPED_K ||
          (d->stride_b % 8 == 0 && d->stride_b < TMA_STRIDE_MAX / 2));
}

/* The tile width: the knobs' where they force one; else 256 where N is
 * a multiple of it and the 128 x 256 tiles (of M's rows; K-grouped, of
 * each group's C) make two waves of the SMs, 128 elsewhere (more tiles
 * for the groups' short row runs). */
static int tile_of(const tj_runtime *rt, const tj_grouped_gemm_desc *d)
{
  int forced = tj__gemm_knobs_of(rt)->tile;
  if (forced == 64 || forced == 128 || forced == 256)
    return forced;
  int64_t mats = d->grouped == TJ_GROUPED_K ? d->groups : 1;
  int64_t tiles256 = mats * (d->m / SM90A_BM) * (d->n / 256);
  return d->n % 256 == 0 && tiles256 >= 2 * (int64_t)rt->sms ? 256 : 128;
}

static void config_of(const tj_runtime *rt, const tj_grouped_gemm_desc *d,
                      gconfig *c)
{
  char path[32];
  c->bn = tile_of(rt, d);
  snprintf(path, sizeof path, "sm90a_128x%d", c->bn);
  tj__grouped_name(d, path, c->product, sizeof c->product);
  snprintf(c->colsum, sizeof c->colsum, "%s_colsum", c->product);
}

/* c's module: compiled for sm_90a (or loaded) the first time. */
static int module_of(tj_runtime *rt, const tj_grouped_gemm_desc *d,
                     const gconfig *c, tj_module **m)
{
  const tj__gemm_define defs[] = {
      {"TJ_GROUPED", d->grouped},   {"TJ_TA", d->a_type},
      {"TJ_TC", d->c_type},         {"TJ_TRANS_A", d->trans_a},
      {"TJ_TRANS_B", d->trans_b},   {"TJ_EPI", d->epilogue},
      {"TJ_H_BN", c->bn},           {"TJ_H_STAGES", SM90A_STAGES(c->bn)}};
  const tj__gemm_entry entries[] = {
      {"TJ_GGEMM_ENTRY", c->product, 1},
      {"TJ_GCOLSUM_ENTRY", c->colsum, d->epilogue == TJ_EPILOGUE_DGELU}};
  const tj__gemm_source src = {tj__gemm_grouped_sm90a_source,
                               "kernels/gemm_grouped_sm90a.hip", "sm_90a",
                               defs, 8, entries, 2};
  return tj__gemm_build(rt, &src, m);
}

int tj__grouped_hopper_prepare(tj_runtime *rt, const tj_grouped_gemm_desc *d,
                               const char **entry)
{
  gconfig c;
  tj_module *m = NULL;
  tj_kernel *k = NULL;
  config_of(rt, d, &c);
  int rc = module_of(rt, d, &c, &m);
  if (rc == TJ_OK)
    rc = tj_module_kernel(m, c.product, &k);
  if (rc == TJ_OK && entry)
    *entry = m->entries[k->index];
  return rc;
}

/* ------------------------------------------------------- launching */

/* The tensor maps: A 2-D as the tiles' (boxes of 128 x 64 K-major, 64 x
 * 64 M-major), B (M-grouped) 3-D over its E matrices or (K-grouped) 2-D,
 * in 64 x 64 boxes. */
static int maps_of(tj_runtime *rt, const char *fn,
                   const tj_grouped_gemm_desc *d, void *ta, void *tb)
{
  int bf16 = d->a_type == TJ_DTYPE_BF16;
  uint64_t ar = (uint64_t)(d->trans_a ? d->k : d->m);
  uint64_t ac = (uint64_t)(d->trans_a ? d->m : d->k);
  uint64_t br = (uint64_t)(d->trans_b ? d->n : d->k);
  uint64_t bc = (uint64_t)(d->trans_b ? d->k : d->n);
  int rc = tj__tensor_map_16(ta, d->a, ar, ac, (uint64_t)d->lda,
                             d->trans_a ? 64u : SM90A_BM, 64, bf16);
  if (rc == TJ_OK && d->grouped == TJ_GROUPED_K)
    rc = tj__tensor_map_16(tb, d->b, br, bc, (uint64_t)d->ldb, 64, 64, bf16);
  else if (rc == TJ_OK)
    rc = tj__tensor_map_16_3d(tb, d->b, br, bc, (uint64_t)d->ldb,
                              (uint64_t)d->groups, (uint64_t)d->stride_b, 64,
                              64, bf16);
  if (rc != TJ_OK)
    return tj__fail(rt, TJ_EDEVICE, "%s: the driver refused a TMA "
                    "descriptor for A (%llu x %llu, lda %lld) or B (%lld x "
                    "%llu x %llu, ldb %lld, stride_b %lld)", fn,
                    (unsigned long long)ar, (unsigned long long)ac,
                    (long long)d->lda, (long long)d->groups,
                    (unsigned long long)br, (unsigned long long)bc,
                    (long long)d->ldb, (long long)d->stride_b);
  return TJ_OK;
}

/* The product: one block an SM, or one a tile where the groups can make
 * fewer tiles than that. */
static int launch_product(tj_runtime *rt, const char *fn, void *stream,
                          const tj_grouped_gemm_desc *d, tj_module *m,
                          const gconfig *c)
{
  tj_kernel *k = NULL;
  unsigned shared = SM90A_SHARED(c->bn, SM90A_STAGES(c->bn));
  int rc = tj_module_kernel(m, c->product, &k);
  if (rc == TJ_OK)
    rc = tj__gemm_kernel_shared(rt, fn, k, c->product, shared);
  if (rc != TJ_OK)
    return rc;
  _Alignas(64) unsigned char ta[TJ__TENSOR_MAP_BYTES],
      tb[TJ__TENSOR_MAP_BYTES];
  if ((rc = maps_of(rt, fn, d, ta, tb)) != TJ_OK)
    return rc;
  int64_t tiles = tile_rows_max(d) * ((d->n + c->bn - 1) / c->bn);
  int sms = rt->sms > 0 ? rt->sms : 1;
  tj_dim3 grid = {(unsigned)(tiles < sms ? tiles : sms), 1, 1};
  tj_dim3 block = {SM90A_THREADS, 1, 1};
  int E = (int)d->groups, M = (int)d->m, N = (int)d->n, K = (int)d->k;
  int ldc = (int)d->ldc;
  float alpha = d->alpha, beta = d->beta;
  const int *offs = d->offs;
  void *C = d->c, *aux = d->aux;
  const void *bias = d->bias;
  long long ldaux = d->ldaux, stride_c = d->stride_c;
  void *args[] = {ta,   tb,  &offs, &E,    &M,   &N,     &K,       &alpha,
                  &beta, &C, &ldc,  &bias, &aux, &ldaux, &stride_c};
  if ((rc = tj_launch(k, grid, block, shared, stream, args)) != TJ_OK)
    return tj__fail(rt, rc, "%s: launching %s (grid %u) failed", fn,
                    c->product, grid.x);
  return TJ_OK;
}

/* The bias gradient: each group's column sums of C, after the product. */
static int launch_colsum(tj_runtime *rt, const char *fn, void *stream,
                         const tj_grouped_gemm_desc *d, tj_module *m,
                         const gconfig *c)
{
  tj_kernel *s = NULL;
  int rc = tj_module_kernel(m, c->colsum, &s);
  if (rc != TJ_OK)
    return rc;
  long long E = d->groups, M = d->m, N = d->n, ldc = d->ldc;
  const int *offs = d->offs;
  const void *C = d->c;
  float *sums = d->bias_grad;
  tj_dim3 grid = {(unsigned)((N - 1) / COLSUM_COLUMNS + 1), (unsigned)E, 1};
  tj_dim3 block = {COLSUM_THREADS, 1, 1};
  void *args[] = {&E, &offs, &M, &N, &C, &ldc, &sums};
  if ((rc = tj_launch(s, grid, block, 0, stream, args)) != TJ_OK)
    return tj__fail(rt, rc, "%s: launching %s failed", fn, c->colsum);
  return TJ_OK;
}

int tj__grouped_hopper_run(tj_runtime *rt, const char *fn, void *stream,
                           const tj_grouped_gemm_desc *d)
{
  if (rt->compile_only)
    return tj__op_no_gpu(rt, fn);
  gconfig c;
  tj_module *m = NULL;
  config_of(rt, d, &c);
  int rc = module_of(rt, d, &c, &m);
  if (rc == TJ_OK)
    rc = launch_product(rt, fn, stream, d, m, &c);
  if (rc == TJ_OK && d->bias_grad)
    rc = launch_colsum(rt, fn, stream, d, m, &c);
  return rc;
}
