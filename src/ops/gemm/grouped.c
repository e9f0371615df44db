/*
 * grouped.c: tj_grouped_gemm, one GEMM per group in one launch, the
 * groups cut by end offsets that stay in device memory: the descriptor's
 * checks, the portable grouped kernel's configurations
 * (kernels/gemm_grouped_portable.hip compiled with the call's choices as
 * -D constants, one cached module each, its entries named from those
 * choices) and the launch, which reads no offset on the host and
 * allocates nothing.  The M-grouped calls the Hopper path serves run
 * there instead (grouped_hopper.c).  The host call reads and checks its
 * offsets, which are host memory there.
 */
#include "call.h"
#include "gemm.h"
#include "span.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The kernel's source (generated from kernels/gemm_grouped_portable.hip
 * by build-aux/embed.sh). */
extern const char tj__gemm_grouped_portable_source[];

/* The kernel's launch: 256 threads, 64 x 64 tiles of C (N tiles along x,
 * M tiles along y, at most 65535; K-grouped: groups along z, at most
 * 65535); the column sums 256 columns a block, groups along y. */
#define GROUPED_THREADS 256u
#define GROUPED_TILE 64
#define GROUPED_GRID_CAP 65535
#define COLSUM_COLUMNS 256
/* "gemm_grouped_m_bf16_bf16_bf16_tt_biasgelu_portable" and "_colsum". */
#define CONFIG_NAME_MAX 64
/* Operands, in operands_of's order. */
#define N_OPERANDS 7


/* ------------------------------------------------------- checks */

/* The family's checks of types, transposes and epilogue, then the
 * direction, and an epilogue only where rows are grouped. */
static int check_kinds(tj_runtime *rt, const char *fn,
                       const tj_grouped_gemm_desc *d)
{
  const int types[3] = {d->a_type, d->b_type, d->c_type};
  int rc = tj__gemm_check_kinds(rt, fn, types, d->trans_a, d->trans_b,
                                d->epilogue);
  if (rc != TJ_OK)
    return rc;
  if (d->grouped != TJ_GROUPED_M && d->grouped != TJ_GROUPED_K)
    return tj__fail(rt, TJ_EINVAL, "%s: grouped=%d: set TJ_GROUPED_M "
                    "(rows) or TJ_GROUPED_K (the reduction)", fn, d->grouped);
  if (d->grouped == TJ_GROUPED_K && d->epilogue != TJ_EPILOGUE_NONE)
    return tj__fail(rt, TJ_EINVAL, "%s: epilogue=%d: a TJ_GROUPED_K call "
                    "takes TJ_EPILOGUE_NONE only", fn, d->epilogue);
  return TJ_OK;
}

/* groups, m, n, k and the grouped total in range, and the grids they
 * make within their limits. */
static int check_counts(tj_runtime *rt, const char *fn,
                        const tj_grouped_gemm_desc *d)
{
  const char *names[] = {"m", "n", "k"};
  int64_t dims[] = {d->m, d->n, d->k};
  if (d->groups < 1 || d->groups > GROUPED_GRID_CAP)
    return tj__fail(rt, TJ_EINVAL, "%s: groups=%lld must be 1 to %d", fn,
                    (long long)d->groups, GROUPED_GRID_CAP);
  for (int i = 0; i < 3; i++)
    if (dims[i] < 1)
      return tj__fail(rt, TJ_EINVAL, "%s: %s=%lld must be at least 1", fn,
                      names[i], (long long)dims[i]);
  int m_grouped = d->grouped == TJ_GROUPED_M;
  if ((m_grouped ? d->m : d->k) > INT32_MAX)
    return tj__fail(rt, TJ_ERANGE, "%s: %s=%lld: the int32 offsets reach "
                    "%d at most", fn, m_grouped ? "m" : "k",
                    (long long)(m_grouped ? d->m : d->k), INT32_MAX);
  if ((d->m - 1) / GROUPED_TILE + 1 > GROUPED_GRID_CAP ||
      (d->n - 1) / GROUPED_TILE + 1 > INT_MAX)
    return tj__fail(rt, TJ_ERANGE, "%s: %lld x %lld needs more tiles of %d "
                    "than a grid holds", fn, (long long)d->m,
                    (long long)d->n, GROUPED_TILE);
  return TJ_OK;
}

/* Leading dimensions at least their stored rows; each batch stride at
 * least one matrix, and 0 where there is no batch. */
static int check_layout(tj_runtime *rt, const char *fn,
                        const tj_grouped_gemm_desc *d)
{
  int64_t row_a = d->trans_a ? d->m : d->k, row_b = d->trans_b ? d->k : d->n;
  if (d->lda < row_a || d->ldb < row_b || d->ldc < d->n)
    return tj__fail(rt, TJ_EINVAL, "%s: lda=%lld, ldb=%lld, ldc=%lld: each "
                    "must be at least its stored row (%lld, %lld, %lld)", fn,
                    (long long)d->lda, (long long)d->ldb, (long long)d->ldc,
                    (long long)row_a, (long long)row_b, (long long)d->n);
  if (d->aux && d->ldaux < d->n)
    return tj__fail(rt, TJ_EINVAL, "%s: ldaux=%lld is less than n=%lld", fn,
                    (long long)d->ldaux, (long long)d->n);
  int64_t rows_b = d->trans_b ? d->n : d->k, one_b, one_c;
  if (__builtin_mul_overflow(rows_b, d->ldb, &one_b) ||
      __builtin_mul_overflow(d->m, d->ldc, &one_c))
    return tj__fail(rt, TJ_ERANGE, "%s: a matrix of B or C spans more "
                    "elements than memory holds", fn);
  if (d->grouped == TJ_GROUPED_M && d->stride_b < one_b)
    return tj__fail(rt, TJ_EINVAL, "%s: stride_b=%lld is less than one "
                    "matrix of B (%lld x ldb %lld)", fn,
                    (long long)d->stride_b, (long long)rows_b,
                    (long long)d->ldb);
  if (d->grouped == TJ_GROUPED_K && d->stride_c < one_c)
    return tj__fail(rt, TJ_EINVAL, "%s: stride_c=%lld is less than one "
                    "matrix of C (m %lld x ldc %lld)", fn,
                    (long long)d->stride_c, (long long)d->m,
                    (long long)d->ldc);
  if (d->grouped == TJ_GROUPED_M ? d->stride_c != 0 : d->stride_b != 0)
    return tj__fail(rt, TJ_EINVAL, "%s: %s=%lld: a %s call has one %s; set "
                    "it to 0", fn,
                    d->grouped == TJ_GROUPED_M ? "stride_c" : "stride_b",
                    (long long)(d->grouped == TJ_GROUPED_M ? d->stride_c
                                                           : d->stride_b),
                    d->grouped == TJ_GROUPED_M ? "TJ_GROUPED_M"
                                               : "TJ_GROUPED_K",
                    d->grouped == TJ_GROUPED_M ? "C" : "B");
  return TJ_OK;
}

typedef struct operand {
  const char *name;
  const void *p;
  size_t span;   /* 0 with p: too large */
  size_t align;
  int written;
} operand;

/* The descriptor's arrays, in a fixed order: a, b, c, offs, bias, aux,
 * bias_grad (absent ones NULL). */
static void operands_of(const tj_grouped_gemm_desc *d, operand o[N_OPERANDS])
{
  size_t ea = tj__gemm_dtype_bytes(d->a_type);
  size_t eb = tj__gemm_dtype_bytes(d->b_type);
  size_t ec = tj__gemm_dtype_bytes(d->c_type);
  int64_t E = d->groups, bk = d->grouped == TJ_GROUPED_M ? E : 1;
  int64_t ck = d->grouped == TJ_GROUPED_K ? E : 1;
  o[0] = (operand){"a", d->a, d->trans_a
                                  ? tj__gemm_span(1, 0, d->k, d->lda, d->m, ea)
                                  : tj__gemm_span(1, 0, d->m, d->lda, d->k, ea),
                   ea, 0};
  o[1] = (operand){"b", d->b,
                   d->trans_b
                       ? tj__gemm_span(bk, d->stride_b, d->n, d->ldb, d->k, eb)
                       : tj__gemm_span(bk, d->stride_b, d->k, d->ldb, d->n, eb),
                   eb, 0};
  o[2] = (operand){"c", d->c,
                   tj__gemm_span(ck, d->stride_c, d->m, d->ldc, d->n, ec), ec,
                   1};
  o[3] = (operand){"offs", d->offs, tj__gemm_span(1, 0, 1, 0, E, 4), 4, 0};
  o[4] = (operand){"bias", d->bias, tj__gemm_span(1, 0, E, d->n, d->n, ec),
                   ec, 0};
  o[5] = (operand){"aux", d->aux, tj__gemm_span(1, 0, d->m, d->ldaux, d->n, ec),
                   ec, d->epilogue == TJ_EPILOGUE_BIAS_GELU};
  o[6] = (operand){"bias_grad", d->bias_grad,
                   tj__gemm_span(1, 0, E, d->n, d->n, 4), 4, 1};
}

/* Which pointers the epilogue needs (1), takes (2: optional) or refuses
 * (0), in operands_of's order. */
static int wanted(const tj_grouped_gemm_desc *d, int i)
{
  int e = d->epilogue;
  switch (i) {
  case 4: return e == TJ_EPILOGUE_BIAS || e == TJ_EPILOGUE_BIAS_GELU;
  case 5: return e == TJ_EPILOGUE_DGELU ? 1 : e == TJ_EPILOGUE_BIAS_GELU ? 2 : 0;
  case 6: return e == TJ_EPILOGUE_DGELU ? 2 : 0;
  default: return 1;
  }
}

static int check_pointers(tj_runtime *rt, const char *fn,
                          const tj_grouped_gemm_desc *d)
{
  operand o[N_OPERANDS];
  operands_of(d, o);
  for (int i = 0; i < N_OPERANDS; i++) {
    int w = wanted(d, i);
    if (w == 1 && !o[i].p)
      return tj__fail(rt, TJ_EINVAL, "%s: %s is NULL, and %s needs it", fn,
                      o[i].name, i < 4 ? "every call"
                                       : tj__gemm_epilogue_name(d->epilogue));
    if (w == 0 && o[i].p)
      return tj__fail(rt, TJ_EINVAL, "%s: %s is set, and epilogue %s does "
                      "not take it", fn, o[i].name,
                      tj__gemm_epilogue_name(d->epilogue));
    if (o[i].p && o[i].span == 0)
      return tj__fail(rt, TJ_ERANGE, "%s: %s spans more bytes than memory "
                      "holds", fn, o[i].name);
    if (o[i].p && (uintptr_t)o[i].p % o[i].align != 0)
      return tj__fail(rt, TJ_EINVAL, "%s: %s is not %zu-byte aligned", fn,
                      o[i].name, o[i].align);
  }
  /* What is written overlaps nothing else (inputs may share). */
  for (int i = 0; i < N_OPERANDS; i++)
    for (int j = i + 1; j < N_OPERANDS; j++)
      if (o[i].p && o[j].p && (o[i].written || o[j].written) &&
          tj__op_ranges_overlap(o[i].p, o[i].span, o[j].p, o[j].span))
        return tj__fail(rt, TJ_EINVAL, "%s: %s overlaps %s", fn, o[i].name,
                        o[j].name);
  return TJ_OK;
}

/* The descriptor the caller gave, of the size it says, checked. */
static int desc_in(tj_runtime *rt, const char *fn,
                   const tj_grouped_gemm_desc *user, tj_grouped_gemm_desc *d)
{
  if (!user)
    return tj__fail(rt, TJ_EINVAL, "%s: the descriptor is NULL", fn);
  if (tj__struct_in(d, user, sizeof *d,
                    TJ__FIRST_SIZE(tj_grouped_gemm_desc, bias_grad)) != TJ_OK)
    return tj__fail(rt, TJ_EINVAL, "%s: tj_grouped_gemm_desc.size is %zu: "
                    "set it to 0 or sizeof(tj_grouped_gemm_desc) (%zu in "
                    "this library), and leave the fields this library does "
                    "not know zero", fn, user->size, sizeof *d);
  int rc = check_kinds(rt, fn, d);
  if (rc == TJ_OK)
    rc = check_counts(rt, fn, d);
  if (rc == TJ_OK)
    rc = check_layout(rt, fn, d);
  if (rc == TJ_OK)
    rc = check_pointers(rt, fn, d);
  return rc;
}

/* ------------------------------------------------------- configurations */

/* The names of d's configuration's entries: the product's and the
 * per-group column sums'. */
typedef struct config_names {
  char product[CONFIG_NAME_MAX], colsum[CONFIG_NAME_MAX + 8];
} config_names;

void tj__grouped_name(const tj_grouped_gemm_desc *d, const char *path,
                      char *out, size_t n)
{
  snprintf(out, n, "gemm_grouped_%c_%s_%s_%s_%c%c_%s_%s",
           d->grouped == TJ_GROUPED_M ? 'm' : 'k', tj__gemm_dtype_name(d->a_type),
           tj__gemm_dtype_name(d->b_type), tj__gemm_dtype_name(d->c_type),
           d->trans_a ? 't' : 'n', d->trans_b ? 't' : 'n',
           tj__gemm_epilogue_name(d->epilogue), path);
}

static void names_of(const tj_grouped_gemm_desc *d, config_names *n)
{
  tj__grouped_name(d, "portable", n->product, sizeof n->product);
  snprintf(n->colsum, sizeof n->colsum, "%s_colsum", n->product);
}

/* d's configuration: its module (both entries), compiled or loaded the
 * first time. */
static int grouped_module(tj_runtime *rt, const tj_grouped_gemm_desc *d,
                          const config_names *n, tj_module **m)
{
  const tj__gemm_define defs[] = {
      {"TJ_GROUPED", d->grouped},   {"TJ_TA", d->a_type},
      {"TJ_TB", d->b_type},         {"TJ_TC", d->c_type},
      {"TJ_TRANS_A", d->trans_a},   {"TJ_TRANS_B", d->trans_b},
      {"TJ_EPI", d->epilogue}};
  const tj__gemm_entry entries[] = {{"TJ_GGEMM_ENTRY", n->product, 1},
                                    {"TJ_GCOLSUM_ENTRY", n->colsum, 1}};
  const tj__gemm_source src = {tj__gemm_grouped_portable_source,
                               "kernels/gemm_grouped_portable.hip", NULL,
                               defs, 7, entries, 2};
  return tj__gemm_build(rt, &src, m);
}

/* ------------------------------------------------------- launching */

/* The product, then (bias_grad set) the per-group column sums, queued on
 * stream: grids from m, n and groups alone, nothing read back. */
static int launch_grouped(tj_runtime *rt, const char *fn, void *stream,
                          tj_grouped_gemm_desc *d)
{
  tj_module *m = NULL;
  tj_kernel *k = NULL, *sum = NULL;
  config_names n;
  names_of(d, &n);
  if (rt->compile_only)
    return tj__op_no_gpu(rt, fn);
  int rc = grouped_module(rt, d, &n, &m);
  if (rc == TJ_OK)
    rc = tj_module_kernel(m, n.product, &k);
  if (rc == TJ_OK && d->bias_grad)
    rc = tj_module_kernel(m, n.colsum, &sum);
  if (rc != TJ_OK)
    return rc;
  long long E = d->groups, M = d->m, N = d->n, K = d->k;
  tj_dim3 grid = {(unsigned)((N - 1) / GROUPED_TILE + 1),
                  (unsigned)((M - 1) / GROUPED_TILE + 1),
                  d->grouped == TJ_GROUPED_K ? (unsigned)E : 1u};
  tj_dim3 block = {GROUPED_THREADS, 1, 1};
  void *args[] = {&E, &d->offs, &M, &N, &K, &d->alpha, &d->a, &d->lda,
                  &d->b, &d->ldb, &d->stride_b, &d->beta, &d->c, &d->ldc,
                  &d->stride_c, &d->bias, &d->aux, &d->ldaux};
  if ((rc = tj_launch(k, grid, block, 0, stream, args)) != TJ_OK)
    return tj__fail(rt, rc, "%s: launching %s (grid %u x %u x %u) failed",
                    fn, n.product, grid.x, grid.y, grid.z);
  if (!sum)
    return TJ_OK;
  tj_dim3 sgrid = {(unsigned)((N - 1) / COLSUM_COLUMNS + 1), (unsigned)E, 1};
  void *sargs[] = {&E, &d->offs, &M, &N, &d->c, &d->ldc, &d->bias_grad};
  if ((rc = tj_launch(sum, sgrid, block, 0, stream, sargs)) != TJ_OK)
    return tj__fail(rt, rc, "%s: launching %s failed", fn, n.colsum);
  return TJ_OK;
}

int tj_grouped_gemm(tj_runtime *rt, void *stream,
                    const tj_grouped_gemm_desc *desc)
{
  static const char fn[] = "tj_grouped_gemm";
  tj_grouped_gemm_desc d;
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  int rc = desc_in(rt, fn, desc, &d);
  if (rc != TJ_OK)
    return rc;
  if (tj__grouped_hopper_serves(rt, &d))
    return tj__grouped_hopper_run(rt, fn, stream, &d);
  return launch_grouped(rt, fn, stream, &d);
}

const char *tj_grouped_gemm_kernel(tj_runtime *rt,
                                   const tj_grouped_gemm_desc *desc)
{
  static const char fn[] = "tj_grouped_gemm_kernel";
  tj_grouped_gemm_desc d;
  tj_module *m = NULL;
  if (!tj__runtime_usable(rt) || desc_in(rt, fn, desc, &d) != TJ_OK)
    return NULL;
  if (tj__grouped_hopper_serves(rt, &d)) {
    const char *entry = NULL;
    return tj__grouped_hopper_prepare(rt, &d, &entry) == TJ_OK ? entry
                                                               : NULL;
  }
  config_names n;
  names_of(&d, &n);
  tj_kernel *k = NULL;
  if (grouped_module(rt, &d, &n, &m) != TJ_OK ||
      tj_module_kernel(m, n.product, &k) != TJ_OK)
    return NULL;
  return m->entries[k->index]; /* the module's own copy of the name */
}

/* ------------------------------------------------------- host call */

/* The host call's buffers, in operands_of's order, and where each went. */
typedef struct host_job {
  tj_grouped_gemm_desc d;
  int slot[N_OPERANDS]; /* operand i's buffer, or -1 */
} host_job;

static int call_grouped(tj_runtime *rt, const void *ctx, void *const *dev)
{
  const host_job *j = ctx;
  tj_grouped_gemm_desc d = j->d;
  const void **in[] = {&d.a, &d.b, NULL, (const void **)&d.offs, &d.bias,
                       NULL, NULL};
  void **out[] = {NULL, NULL, &d.c, NULL, NULL, &d.aux,
                  (void **)&d.bias_grad};
  for (int i = 0; i < N_OPERANDS; i++) {
    if (j->slot[i] < 0)
      continue;
    if (in[i])
      *in[i] = dev[j->slot[i]];
    else
      *out[i] = dev[j->slot[i]];
  }
  return tj_grouped_gemm(rt, NULL, &d);
}

/* The host offsets: non-decreasing from 0, the last within the grouped
 * total. */
static int check_host_offsets(tj_runtime *rt, const char *fn,
                              const tj_grouped_gemm_desc *d)
{
  int64_t total = d->grouped == TJ_GROUPED_M ? d->m : d->k, prev = 0;
  for (int64_t e = 0; e < d->groups; e++) {
    int64_t v = d->offs[e];
    if (v < 0)
      return tj__fail(rt, TJ_EINVAL, "%s: offs[%lld]=%lld is below 0: "
                      "offsets are the groups' ends", fn, (long long)e,
                      (long long)v);
    if (v < prev)
      return tj__fail(rt, TJ_EINVAL, "%s: offs[%lld]=%lld is less than "
                      "offs[%lld]=%lld: offsets are non-decreasing", fn,
                      (long long)e, (long long)v, (long long)e - 1,
                      (long long)prev);
    if (v > total)
      return tj__fail(rt, TJ_EINVAL, "%s: offs[%lld]=%lld is past %s=%lld",
                      fn, (long long)e, (long long)v,
                      d->grouped == TJ_GROUPED_M ? "m" : "k",
                      (long long)total);
    prev = v;
  }
  return TJ_OK;
}

int tj_grouped_gemm_host(tj_runtime *rt, const tj_grouped_gemm_desc *desc)
{
  static const char fn[] = "tj_grouped_gemm_host";
  host_job j;
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  int rc = desc_in(rt, fn, desc, &j.d);
  if (rc == TJ_OK)
    rc = check_host_offsets(rt, fn, &j.d);
  if (rc != TJ_OK)
    return rc;
  /* The configuration is built before any device memory is held. */
  tj_module *m = NULL;
  if (!rt->compile_only && tj__grouped_hopper_serves(rt, &j.d)) {
    if ((rc = tj__grouped_hopper_prepare(rt, &j.d, NULL)) != TJ_OK)
      return rc;
  } else if (!rt->compile_only) {
    config_names n;
    names_of(&j.d, &n);
    if ((rc = grouped_module(rt, &j.d, &n, &m)) != TJ_OK)
      return rc;
  }
  /* Everything is copied in, outputs too, so that what the call does not
   * write (padding, rows past the last group) comes back as it was;
   * bias_grad alone is written whole. */
  operand o[N_OPERANDS];
  operands_of(&j.d, o);
  tj__op_buffer buf[TJ__OP_MAX_BUFFERS];
  int nb = 0;
  for (int i = 0; i < N_OPERANDS; i++) {
    j.slot[i] = o[i].p ? nb : -1;
    if (!o[i].p)
      continue;
    int whole = i == 6, out = o[i].written;
    buf[nb++] = (tj__op_buffer){whole ? NULL : o[i].p,
                                out ? (void *)o[i].p : NULL, o[i].span};
  }
  return tj__op_host_run(rt, fn, NULL, buf, nb, call_grouped, &j);
}
