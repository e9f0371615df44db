/*
 * family.c: tj_gemm, the GEMM family's one call: the descriptor's checks,
 * the route (the Hopper kernel on sm_90 for what it serves, else
 * tj_gemm_f16's kernels for the combination they serve, the tensor-core
 * path for those it serves, the portable kernel for every other), and
 * the portable kernel's configurations.  A configuration is kernels/gemm_portable.hip compiled
 * with the call's choices as -D constants, a module of its own (one
 * cached code object), whose entry is named from those choices: nothing
 * lists the configurations.
 */
#include "call.h"
#include "plan.h"
#include "span.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The portable kernel's source (generated from kernels/gemm_portable.hip
 * by build-aux/embed.sh). */
extern const char tj__gemm_portable_source[];

/* gemm_portable.hip's launch: 256 threads, 64 x 64 tiles of C, N tiles
 * along x and M tiles along y (at most 65535); the column sums 32
 * columns a block. */
#define PORTABLE_THREADS 256u
#define PORTABLE_TILE 64
#define PORTABLE_GRID_Y_CAP 65535
#define COLSUM_COLUMNS 32
#define COLSUM_THREADS 256u

static const char *const dtype_names[] = {NULL, "f16", "bf16", "f32"};
static const char *const epilogue_names[] = {"none", "bias", "biasgelu",
                                             "dgelu"};

/* ------------------------------------------------------- checks */

int tj__gemm_check_kinds(tj_runtime *rt, const char *fn, const int types[3],
                         int trans_a, int trans_b, int epilogue)
{
  const char *names[] = {"a_type", "b_type", "c_type"};
  for (int i = 0; i < 3; i++) {
    int max = i == 2 ? TJ_DTYPE_F32 : TJ_DTYPE_BF16;
    if (types[i] < TJ_DTYPE_F16 || types[i] > max)
      return tj__fail(rt, TJ_EINVAL, "%s: %s=%d is not a type this operand "
                      "takes (TJ_DTYPE_F16, TJ_DTYPE_BF16%s)", fn, names[i],
                      types[i], i == 2 ? ", TJ_DTYPE_F32" : "");
  }
  if ((trans_a != 0 && trans_a != 1) || (trans_b != 0 && trans_b != 1))
    return tj__fail(rt, TJ_EINVAL, "%s: trans_a=%d, trans_b=%d: each must "
                    "be 0 or 1", fn, trans_a, trans_b);
  if (epilogue < TJ_EPILOGUE_NONE || epilogue > TJ_EPILOGUE_DGELU)
    return tj__fail(rt, TJ_EINVAL, "%s: epilogue=%d is not a "
                    "TJ_EPILOGUE_*", fn, epilogue);
  return TJ_OK;
}

const char *tj__gemm_dtype_name(int type)
{
  return dtype_names[type];
}

const char *tj__gemm_epilogue_name(int epilogue)
{
  return epilogue_names[epilogue];
}

static int check_kinds(tj_runtime *rt, const char *fn, const tj_gemm_desc *d)
{
  const int types[3] = {d->a_type, d->b_type, d->c_type};
  return tj__gemm_check_kinds(rt, fn, types, d->trans_a, d->trans_b,
                              d->epilogue);
}

/* m, n, k from 1; M's tiles within the grid's y limit; each leading
 * dimension at least its stored row. */
static int check_sizes(tj_runtime *rt, const char *fn, const tj_gemm_desc *d)
{
  const char *names[] = {"m", "n", "k"};
  int64_t dims[] = {d->m, d->n, d->k};
  for (int i = 0; i < 3; i++)
    if (dims[i] < 1)
      return tj__fail(rt, TJ_EINVAL, "%s: %s=%lld must be at least 1", fn,
                      names[i], (long long)dims[i]);
  if ((d->m - 1) / PORTABLE_TILE + 1 > PORTABLE_GRID_Y_CAP ||
      (d->n - 1) / PORTABLE_TILE + 1 > INT_MAX)
    return tj__fail(rt, TJ_ERANGE, "%s: %lld x %lld needs more tiles of %d "
                    "than a grid holds", fn, (long long)d->m,
                    (long long)d->n, PORTABLE_TILE);
  int64_t row_a = d->trans_a ? d->m : d->k, row_b = d->trans_b ? d->k : d->n;
  if (d->lda < row_a || d->ldb < row_b || d->ldc < d->n)
    return tj__fail(rt, TJ_EINVAL, "%s: lda=%lld, ldb=%lld, ldc=%lld: each "
                    "must be at least its stored row (%lld, %lld, %lld)", fn,
                    (long long)d->lda, (long long)d->ldb, (long long)d->ldc,
                    (long long)row_a, (long long)row_b, (long long)d->n);
  if (d->aux && d->ldaux < d->n)
    return tj__fail(rt, TJ_EINVAL, "%s: ldaux=%lld is less than n=%lld", fn,
                    (long long)d->ldaux, (long long)d->n);
  return TJ_OK;
}

/* Bytes from the first element of a rows x cols matrix (leading
 * dimension ld, elem bytes each) to just past its last; 0 past
 * PTRDIFF_MAX. */
static size_t span_of(int64_t rows, int64_t ld, int64_t cols, size_t elem)
{
  return tj__gemm_span(1, 0, rows, ld, cols, elem);
}

typedef struct operand {
  const char *name;
  const void *p;
  size_t span;   /* 0 with p: too large */
  size_t align;
  int written;
} operand;

/* The descriptor's arrays, in a fixed order: a, b, c, bias, aux,
 * bias_grad (absent ones NULL). */
static void operands_of(const tj_gemm_desc *d, operand o[6])
{
  size_t ea = tj__gemm_dtype_bytes(d->a_type), eb = tj__gemm_dtype_bytes(d->b_type);
  size_t ec = tj__gemm_dtype_bytes(d->c_type);
  o[0] = (operand){"a", d->a, d->trans_a ? span_of(d->k, d->lda, d->m, ea)
                                         : span_of(d->m, d->lda, d->k, ea),
                   ea, 0};
  o[1] = (operand){"b", d->b, d->trans_b ? span_of(d->n, d->ldb, d->k, eb)
                                         : span_of(d->k, d->ldb, d->n, eb),
                   eb, 0};
  o[2] = (operand){"c", d->c, span_of(d->m, d->ldc, d->n, ec), ec, 1};
  o[3] = (operand){"bias", d->bias, span_of(1, 1, d->n, ec), ec, 0};
  o[4] = (operand){"aux", d->aux, span_of(d->m, d->ldaux, d->n, ec), ec,
                   d->epilogue == TJ_EPILOGUE_BIAS_GELU};
  o[5] = (operand){"bias_grad", d->bias_grad, span_of(1, 1, d->n, 4), 4, 1};
}

/* Which pointers the epilogue needs (1), takes (2: optional) or refuses
 * (0), in operands_of's order. */
static int wanted(const tj_gemm_desc *d, int i)
{
  int e = d->epilogue;
  switch (i) {
  case 3: return e == TJ_EPILOGUE_BIAS || e == TJ_EPILOGUE_BIAS_GELU;
  case 4: return e == TJ_EPILOGUE_DGELU ? 1 : e == TJ_EPILOGUE_BIAS_GELU ? 2 : 0;
  case 5: return e == TJ_EPILOGUE_DGELU ? 2 : 0;
  default: return 1;
  }
}

static int check_pointers(tj_runtime *rt, const char *fn,
                          const tj_gemm_desc *d)
{
  operand o[6];
  operands_of(d, o);
  for (int i = 0; i < 6; i++) {
    int w = wanted(d, i);
    if (w == 1 && !o[i].p)
      return tj__fail(rt, TJ_EINVAL, "%s: %s is NULL, and epilogue %s "
                      "needs it", fn, o[i].name, epilogue_names[d->epilogue]);
    if (w == 0 && o[i].p)
      return tj__fail(rt, TJ_EINVAL, "%s: %s is set, and epilogue %s does "
                      "not take it", fn, o[i].name,
                      epilogue_names[d->epilogue]);
    if (o[i].p && o[i].span == 0)
      return tj__fail(rt, TJ_ERANGE, "%s: %s spans more bytes than memory "
                      "holds", fn, o[i].name);
    if (o[i].p && (uintptr_t)o[i].p % o[i].align != 0)
      return tj__fail(rt, TJ_EINVAL, "%s: %s is not %zu-byte aligned", fn,
                      o[i].name, o[i].align);
  }
  /* What is written overlaps nothing else (inputs may share). */
  for (int i = 0; i < 6; i++)
    for (int j = i + 1; j < 6; j++)
      if (o[i].p && o[j].p && (o[i].written || o[j].written) &&
          tj__op_ranges_overlap(o[i].p, o[i].span, o[j].p, o[j].span))
        return tj__fail(rt, TJ_EINVAL, "%s: %s overlaps %s", fn, o[i].name,
                        o[j].name);
  return TJ_OK;
}

/* A with one row stored K x 1 with lda 1 is the same K contiguous
 * elements as A stored 1 x K, and B with one column stored K x 1 with
 * ldb 1 the same as B stored 1 x K: such a call runs as the layout whose
 * rows run along K, the one the kernels read whole (the skinny kernel
 * reads A only so; a row of one element is no row a TMA load takes). */
static void one_line_layouts(tj_gemm_desc *d)
{
  if (d->m == 1 && d->trans_a && d->lda == 1)
    d->trans_a = 0, d->lda = d->k;
  if (d->n == 1 && !d->trans_b && d->ldb == 1)
    d->trans_b = 1, d->ldb = d->k;
}

/* The descriptor the caller gave, of the size it says, checked. */
static int desc_in(tj_runtime *rt, const char *fn, const tj_gemm_desc *user,
                   tj_gemm_desc *d)
{
  if (!user)
    return tj__fail(rt, TJ_EINVAL, "%s: the descriptor is NULL", fn);
  if (tj__struct_in(d, user, sizeof *d,
                    TJ__FIRST_SIZE(tj_gemm_desc, bias_grad)) != TJ_OK)
    return tj__fail(rt, TJ_EINVAL, "%s: tj_gemm_desc.size is %zu: set it to "
                    "0 or sizeof(tj_gemm_desc) (%zu in this library), and "
                    "leave the fields this library does not know zero", fn,
                    user->size, sizeof *d);
  int rc = check_kinds(rt, fn, d);
  if (rc == TJ_OK)
    rc = check_sizes(rt, fn, d);
  if (rc == TJ_OK)
    rc = check_pointers(rt, fn, d);
  if (rc == TJ_OK)
    one_line_layouts(d);
  return rc;
}

/* ------------------------------------------------------- the route */

/* Whether tj_gemm_f16's kernels serve d: f16 throughout, no transpose,
 * no epilogue, sizes in their int arithmetic. */
static int f16_path_serves(const tj_gemm_desc *d)
{
  int64_t lim = INT_MAX - 256;
  return d->a_type == TJ_DTYPE_F16 && d->b_type == TJ_DTYPE_F16 &&
         d->c_type == TJ_DTYPE_F16 && !d->trans_a && !d->trans_b &&
         d->epilogue == TJ_EPILOGUE_NONE && d->m <= lim && d->n <= lim &&
         d->k <= lim && d->lda <= INT_MAX && d->ldb <= INT_MAX &&
         d->ldc <= INT_MAX;
}

/* The path that runs d: the Hopper kernel, tj_gemm_f16's kernels, the
 * tensor-core path (tensorcore.c) or the portable kernel, the first that
 * serves it; the knobs' tc_only puts the tensor-core path first. */
typedef enum route { ROUTE_F16, ROUTE_HOPPER, ROUTE_TC, ROUTE_PORTABLE } route;

static route route_of(const tj_runtime *rt, const tj_gemm_desc *d)
{
  int tc = tj__gemm_tc_serves(rt, d);
  if (tc && tj__gemm_tc_forced(rt))
    return ROUTE_TC;
  if (tj__gemm_hopper_serves(rt, d))
    return ROUTE_HOPPER;
  if (f16_path_serves(d))
    return ROUTE_F16;
  return tc ? ROUTE_TC : ROUTE_PORTABLE;
}

void tj__gemm_desc_op(const tj_gemm_desc *d, char out[TJ__GEMM_OP_MAX])
{
  snprintf(out, TJ__GEMM_OP_MAX, "gemm_%s_%s_%s_%c%c_%s",
           dtype_names[d->a_type], dtype_names[d->b_type],
           dtype_names[d->c_type], d->trans_a ? 't' : 'n',
           d->trans_b ? 't' : 'n', epilogue_names[d->epilogue]);
}

void tj__gemm_desc_name(const tj_gemm_desc *d, const char *path,
                        char out[TJ__GEMM_NAME_MAX])
{
  char op[TJ__GEMM_OP_MAX];
  tj__gemm_desc_op(d, op);
  snprintf(out, TJ__GEMM_NAME_MAX, "%s_%s", op, path);
}

/* Every op the family makes, compared in turn (192 of them; asked when
 * a cache lists or merges its decisions, not on a call's path). */
int tj__gemm_family_op(const char *op)
{
  char name[TJ__GEMM_OP_MAX];
  tj_gemm_desc d;
  memset(&d, 0, sizeof d);
  for (d.a_type = TJ_DTYPE_F16; d.a_type <= TJ_DTYPE_BF16; d.a_type++)
    for (d.b_type = TJ_DTYPE_F16; d.b_type <= TJ_DTYPE_BF16; d.b_type++)
      for (d.c_type = TJ_DTYPE_F16; d.c_type <= TJ_DTYPE_F32; d.c_type++)
        for (int t = 0; t < 4; t++)
          for (d.epilogue = 0; d.epilogue <= TJ_EPILOGUE_DGELU; d.epilogue++) {
            d.trans_a = t & 1, d.trans_b = t >> 1;
            tj__gemm_desc_op(&d, name);
            if (op && strcmp(op, name) == 0)
              return 1;
          }
  return 0;
}

/* The names of d's portable configuration's entries: the product's and
 * the column sums'. */
typedef struct config_names {
  char product[TJ__GEMM_NAME_MAX], colsum[TJ__GEMM_NAME_MAX];
} config_names;

static void names_of(const tj_gemm_desc *d, config_names *n)
{
  tj__gemm_desc_name(d, "portable", n->product);
  tj__gemm_desc_name(d, "portable_colsum", n->colsum);
}

/* The portable configuration for d: its module (the product's entry and
 * the column sums'), compiled or loaded the first time. */
static int portable_module(tj_runtime *rt, const tj_gemm_desc *d,
                           const config_names *n, tj_module **m)
{
  const tj__gemm_define defs[] = {
      {"TJ_TA", d->a_type},         {"TJ_TB", d->b_type},
      {"TJ_TC", d->c_type},         {"TJ_TRANS_A", d->trans_a},
      {"TJ_TRANS_B", d->trans_b},   {"TJ_EPI", d->epilogue}};
  const tj__gemm_entry entries[] = {{"TJ_GEMM_ENTRY", n->product, 1},
                                    {"TJ_COLSUM_ENTRY", n->colsum, 1}};
  const tj__gemm_source src = {tj__gemm_portable_source,
                               "kernels/gemm_portable.hip", NULL, defs, 6,
                               entries, 2};
  return tj__gemm_build(rt, &src, m);
}

/* ------------------------------------------------------- launching */

int tj__gemm_launch_tiles(tj_runtime *rt, const char *fn, void *stream,
                          const tj_gemm_desc *d, tj_module *m,
                          const char *product, const char *colsum, int tile,
                          unsigned threads)
{
  tj_kernel *k = NULL, *sum = NULL;
  int rc = tj_module_kernel(m, product, &k);
  if (rc == TJ_OK && d->bias_grad)
    rc = tj_module_kernel(m, colsum, &sum);
  if (rc != TJ_OK)
    return rc;
  long long M = d->m, N = d->n, K = d->k, lda = d->lda, ldb = d->ldb,
            ldc = d->ldc, ldaux = d->ldaux;
  float alpha = d->alpha, beta = d->beta;
  const void *A = d->a, *B = d->b, *bias = d->bias;
  void *C = d->c, *aux = d->aux;
  float *sums = d->bias_grad;
  tj_dim3 grid = {(unsigned)((N - 1) / tile + 1),
                  (unsigned)((M - 1) / tile + 1), 1};
  tj_dim3 block = {threads, 1, 1};
  void *args[] = {&M, &N, &K, &alpha, &A, &lda, &B, &ldb,
                  &beta, &C, &ldc, &bias, &aux, &ldaux};
  if ((rc = tj_launch(k, grid, block, 0, stream, args)) != TJ_OK)
    return tj__fail(rt, rc, "%s: launching %s (grid %u x %u) failed", fn,
                    product, grid.x, grid.y);
  if (!sum)
    return TJ_OK;
  tj_dim3 sgrid = {(unsigned)((N - 1) / COLSUM_COLUMNS + 1), 1, 1};
  tj_dim3 sblock = {COLSUM_THREADS, 1, 1};
  void *sargs[] = {&M, &N, &C, &ldc, &sums};
  if ((rc = tj_launch(sum, sgrid, sblock, 0, stream, sargs)) != TJ_OK)
    return tj__fail(rt, rc, "%s: launching %s failed", fn, colsum);
  return TJ_OK;
}

static int launch_portable(tj_runtime *rt, const char *fn, void *stream,
                           const tj_gemm_desc *d)
{
  tj_module *m = NULL;
  config_names n;
  names_of(d, &n);
  if (rt->compile_only)
    return tj__op_no_gpu(rt, fn);
  int rc = portable_module(rt, d, &n, &m);
  if (rc != TJ_OK)
    return rc;
  return tj__gemm_launch_tiles(rt, fn, stream, d, m, n.product, n.colsum,
                               PORTABLE_TILE, PORTABLE_THREADS);
}

int tj__gemm_portable_serves(const tj_gemm_desc *d)
{
  return (d->m - 1) / PORTABLE_TILE + 1 <= PORTABLE_GRID_Y_CAP;
}

int tj__gemm_portable_run(tj_runtime *rt, const char *fn, void *stream,
                          const tj_gemm_desc *d)
{
  return launch_portable(rt, fn, stream, d);
}

int tj_gemm(tj_runtime *rt, void *stream, const tj_gemm_desc *desc)
{
  static const char fn[] = "tj_gemm";
  tj_gemm_desc d;
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  int rc = desc_in(rt, fn, desc, &d);
  if (rc != TJ_OK)
    return rc;
  route r = route_of(rt, &d);
  if (r == ROUTE_HOPPER) {
    /* Background builds: the fallback while its configuration compiles. */
    if (tj__gemm_defer_hopper(rt, &d, NULL))
      return tj__gemm_fallback_run(rt, fn, stream, &d);
    return tj__gemm_hopper_run(rt, fn, stream, &d, NULL, NULL);
  }
  if (r == ROUTE_F16)
    return tj_gemm_f16(rt, stream, (int)d.m, (int)d.n, (int)d.k, d.alpha,
                       d.a, (int)d.lda, d.b, (int)d.ldb, d.beta, d.c,
                       (int)d.ldc);
  if (r == ROUTE_TC)
    return tj__gemm_tc_run(rt, fn, stream, &d);
  return launch_portable(rt, fn, stream, &d);
}

const char *tj_gemm_kernel(tj_runtime *rt, const tj_gemm_desc *desc)
{
  static const char fn[] = "tj_gemm_kernel";
  tj_gemm_desc d;
  tj_module *m = NULL;
  if (!tj__runtime_usable(rt) || desc_in(rt, fn, desc, &d) != TJ_OK)
    return NULL;
  route r = route_of(rt, &d);
  tj_kernel *product = NULL;
  if (r == ROUTE_HOPPER)
    return tj__gemm_hopper_prepare(rt, &d, NULL, &product) == TJ_OK
               ? product->entry
               : NULL;
  if (r == ROUTE_F16)
    return tj_gemm_f16_kernel(rt, (int)d.m, (int)d.n, (int)d.k, d.a,
                              (int)d.lda, d.b, (int)d.ldb, d.c, (int)d.ldc);
  const char *entry = NULL;
  if (r == ROUTE_TC)
    return tj__gemm_tc_prepare(rt, &d, &entry) == TJ_OK ? entry : NULL;
  config_names n;
  names_of(&d, &n);
  tj_kernel *k = NULL;
  if (portable_module(rt, &d, &n, &m) != TJ_OK ||
      tj_module_kernel(m, n.product, &k) != TJ_OK)
    return NULL;
  return m->entries[k->index]; /* the module's own copy of the name */
}

/* ------------------------------------------------------- host call */

/* The host call's buffers, in operands_of's order, and where each went. */
typedef struct host_job {
  tj_gemm_desc d;
  int slot[6]; /* operand i's buffer, or -1 */
} host_job;

static int call_family(tj_runtime *rt, const void *ctx, void *const *dev)
{
  const host_job *j = ctx;
  tj_gemm_desc d = j->d;
  const void **in[] = {&d.a, &d.b, NULL, &d.bias, NULL, NULL};
  void **out[] = {NULL, NULL, &d.c, NULL, &d.aux, (void **)&d.bias_grad};
  for (int i = 0; i < 6; i++) {
    if (j->slot[i] < 0)
      continue;
    if (in[i])
      *in[i] = dev[j->slot[i]];
    else
      *out[i] = dev[j->slot[i]];
  }
  return tj_gemm(rt, NULL, &d);
}

/* Operand i of d as a host buffer: what is read is copied in; what is
 * written is copied out, and copied in as well where it has padding
 * (a leading dimension past its row) that the copy out must give back as
 * it was, or where beta reads it. */
static tj__op_buffer host_buffer(const tj_gemm_desc *d, const operand *o,
                                 int i)
{
  int read = !o->written || (i == 2 && d->beta != 0.0f) ||
             (i == 2 && d->ldc > d->n) ||
             (i == 4 && d->ldaux > d->n);
  if (i == 4 && d->epilogue == TJ_EPILOGUE_DGELU)
    return (tj__op_buffer){o->p, NULL, o->span}; /* aux is read there */
  return (tj__op_buffer){read ? o->p : NULL, o->written ? (void *)o->p : NULL,
                         o->span};
}

int tj_gemm_host(tj_runtime *rt, const tj_gemm_desc *desc)
{
  static const char fn[] = "tj_gemm_host";
  host_job j;
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  int rc = desc_in(rt, fn, desc, &j.d);
  if (rc != TJ_OK)
    return rc;
  /* What it launches is built before any device memory is held: an
   * embedded entry by name (host_run gets it), or the configuration. */
  const char *entry = NULL;
  tj_module *m = NULL;
  /* Device copies are hipMalloc's, aligned as NULL is: the
   * configuration is planned as the launch will plan it, C's alignment
   * (its shape class) included. */
  tj_gemm_desc dev = j.d;
  dev.a = dev.b = NULL;
  dev.c = NULL;
  route r = route_of(rt, &dev);
  if (r == ROUTE_HOPPER) {
    if ((rc = tj__gemm_hopper_prepare(rt, &dev, NULL, NULL)) != TJ_OK)
      return rc;
  } else if (r == ROUTE_F16) {
    entry = tj__gemm_plan_call(rt, (int)j.d.m, (int)j.d.n, (int)j.d.k, NULL,
                               (int)j.d.lda, NULL, (int)j.d.ldb, NULL,
                               (int)j.d.ldc).entry;
  } else if (r == ROUTE_TC) {
    if ((rc = tj__gemm_tc_prepare(rt, &dev, NULL)) != TJ_OK)
      return rc;
  } else if (!rt->compile_only) {
    config_names n;
    names_of(&j.d, &n);
    if ((rc = portable_module(rt, &j.d, &n, &m)) != TJ_OK)
      return rc;
  }
  operand o[6];
  operands_of(&j.d, o);
  tj__op_buffer buf[6];
  int nb = 0;
  for (int i = 0; i < 6; i++) {
    j.slot[i] = o[i].p ? nb : -1;
    if (o[i].p)
      buf[nb++] = host_buffer(&j.d, &o[i], i);
  }
  return tj__op_host_run(rt, fn, entry, buf, nb, call_family, &j);
}
