/*
 * moe.c: the token permutation of a mixture-of-experts layer as C calls
 * (kernels/moe_permute.hip): routing, permute, unpermute and their
 * backward passes, on device pointers.
 *
 * Every call checks all of its arguments before it launches anything,
 * allocates nothing and reads nothing back from the device, so a call is
 * one to three launches on the caller's stream and may be captured into
 * a graph.  Launch shapes are the ones the kernels' contracts give; the
 * block sizes are their __launch_bounds__, which tests/check_moe.c pins
 * against the embedded source.
 */
#include "call.h"

#include <stdint.h>
#include <string.h>

/* kernels/moe_permute.hip's constants. */
#define MOE_CHUNK 1024u
#define MOE_ROUTE_THREADS 256u
#define MOE_SCAN_THREADS 1024u
#define MOE_ROW_THREADS 128u
#define MOE_GRID_CAP 65535u

/* One array argument: where, how many bytes from there it covers, the
 * alignment it needs, whether the call writes it, whether NULL is
 * allowed. */
typedef struct moe_buf {
  const char *name;
  const void *p;
  size_t bytes;
  size_t align;
  int is_output, optional;
} moe_buf;

/* ------------------------------------------------------- checks */

static size_t dtype_size(int t)
{
  return t == TJ_DTYPE_F32 ? 4 : 2;
}

static int check_dtype(tj_runtime *rt, const char *fn, int dtype)
{
  if (dtype != TJ_DTYPE_F16 && dtype != TJ_DTYPE_BF16)
    return tj__fail(rt, TJ_EINVAL, "%s: dtype %d is not one the call takes "
                    "(TJ_DTYPE_F16, TJ_DTYPE_BF16)", fn, dtype);
  return TJ_OK;
}

/* Routing weights: f32 or the activations' own type. */
static int check_w_type(tj_runtime *rt, const char *fn, int w_type, int dtype)
{
  if (w_type != TJ_DTYPE_F32 && w_type != dtype)
    return tj__fail(rt, TJ_EINVAL, "%s: w_type %d is neither TJ_DTYPE_F32 nor "
                    "dtype (%d)", fn, w_type, dtype);
  return TJ_OK;
}

/* T and k; T * k slots must fit the int32 rows of the map. */
static int check_slots(tj_runtime *rt, const char *fn, int64_t tokens, int k)
{
  if (tokens < 1)
    return tj__fail(rt, TJ_EINVAL, "%s: tokens is %lld, below 1", fn,
                    (long long)tokens);
  if (k < 1 || k > TJ_MOE_MAX_K)
    return tj__fail(rt, TJ_EINVAL, "%s: k is %d, outside [1, %d]", fn, k,
                    TJ_MOE_MAX_K);
  if (tokens > INT32_MAX / k)
    return tj__fail(rt, TJ_ERANGE, "%s: tokens * k = %lld * %d slots is over "
                    "%d, the most an int32 row index holds", fn,
                    (long long)tokens, k, INT32_MAX);
  return TJ_OK;
}

static int check_hidden(tj_runtime *rt, const char *fn, int64_t hidden)
{
  if (hidden < 1)
    return tj__fail(rt, TJ_EINVAL, "%s: hidden is %lld, below 1", fn,
                    (long long)hidden);
  return TJ_OK;
}

static int check_ld(tj_runtime *rt, const char *fn, const char *name,
                    int64_t ld, int64_t hidden)
{
  if (ld < hidden)
    return tj__fail(rt, TJ_EINVAL, "%s: %s is %lld, below hidden (%lld)", fn,
                    name, (long long)ld, (long long)hidden);
  return TJ_OK;
}

/* Bytes from the first element of rows x hidden with stride ld to the end
 * of the last row; 0 when that overflows. */
static size_t span_of(int64_t rows, int64_t ld, int64_t hidden, size_t elem)
{
  uint64_t e;
  if (__builtin_mul_overflow((uint64_t)(rows - 1), (uint64_t)ld, &e) ||
      __builtin_add_overflow(e, (uint64_t)hidden, &e) ||
      __builtin_mul_overflow(e, (uint64_t)elem, &e) || e > SIZE_MAX)
    return 0;
  return (size_t)e;
}

/* NULLs, sizes, alignment, then overlaps: an output may share no byte
 * with any other array. */
static int check_bufs(tj_runtime *rt, const char *fn, const moe_buf *b, int n)
{
  for (int i = 0; i < n; i++)
    if (!b[i].p && !b[i].optional)
      return tj__fail(rt, TJ_EINVAL, "%s: %s is NULL", fn, b[i].name);
  for (int i = 0; i < n; i++)
    if (b[i].p && b[i].bytes == 0)
      return tj__fail(rt, TJ_ERANGE, "%s: %s spans more bytes than size_t "
                      "holds", fn, b[i].name);
  for (int i = 0; i < n; i++)
    if (b[i].p && (uintptr_t)b[i].p % b[i].align != 0)
      return tj__fail(rt, TJ_EINVAL, "%s: %s is not %zu-byte aligned", fn,
                      b[i].name, b[i].align);
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      if (!b[i].p || !b[j].p || (!b[i].is_output && !b[j].is_output))
        continue;
      if (tj__op_ranges_overlap(b[i].p, b[i].bytes, b[j].p, b[j].bytes))
        return tj__fail(rt, TJ_EINVAL, "%s: %s and %s overlap", fn, b[i].name,
                        b[j].name);
    }
  return TJ_OK;
}

/* ------------------------------------------------------- launching */

static unsigned blocks_for(uint64_t items, uint64_t per_block, unsigned cap)
{
  uint64_t b = items / per_block + (items % per_block != 0);
  if (b < 1)
    b = 1;
  return b > cap ? cap : (unsigned)b;
}

static int launch(tj_runtime *rt, const char *fn, const char *kernel,
                  unsigned grid, unsigned block, void *stream, void **args)
{
  return tj__op_launch(rt, fn, kernel, (tj_dim3){grid, 1, 1},
                       (tj_dim3){block, 1, 1}, stream, args);
}

/* ------------------------------------------------------- routing */

static uint64_t route_chunks(int64_t tokens, int k)
{
  uint64_t pairs = (uint64_t)tokens * (uint64_t)k;
  return pairs / MOE_CHUNK + (pairs % MOE_CHUNK != 0);
}

static int check_experts(tj_runtime *rt, const char *fn, int experts)
{
  if (experts < 1 || experts > TJ_MOE_MAX_EXPERTS)
    return tj__fail(rt, TJ_EINVAL, "%s: experts is %d, outside [1, %d]", fn,
                    experts, TJ_MOE_MAX_EXPERTS);
  return TJ_OK;
}

/* The workspace bytes of a routing, once T, k and E are known good. */
static size_t route_workspace(int64_t tokens, int k, int experts)
{
  return (size_t)route_chunks(tokens, k) * ((size_t)experts + 1) * 4;
}

int tj_moe_route_workspace(tj_runtime *rt, int64_t tokens, int k, int experts,
                           size_t *bytes)
{
  static const char fn[] = "tj_moe_route_workspace";
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  if (!bytes)
    return tj__fail(rt, TJ_EINVAL, "%s: bytes is NULL", fn);
  int rc = check_slots(rt, fn, tokens, k);
  if (rc == TJ_OK)
    rc = check_experts(rt, fn, experts);
  if (rc != TJ_OK)
    return rc;
  *bytes = route_workspace(tokens, k, experts);
  return TJ_OK;
}

/* host: the host call's checks, which take no workspace of the
 * caller's. */
static int check_route(tj_runtime *rt, const char *fn, const int32_t *topk,
                       int64_t tokens, int k, int experts,
                       const tj_moe_routing *out, const void *workspace,
                       size_t workspace_bytes, int host)
{
  if (!out)
    return tj__fail(rt, TJ_EINVAL, "%s: out is NULL", fn);
  int rc = check_slots(rt, fn, tokens, k);
  if (rc == TJ_OK)
    rc = check_experts(rt, fn, experts);
  if (rc != TJ_OK)
    return rc;
  size_t slots = (size_t)tokens * (size_t)k * 4, ebytes = (size_t)experts * 4;
  size_t need = route_workspace(tokens, k, experts);
  const moe_buf b[] = {
      {"topk", topk, slots, 4, 0, 0},
      {"workspace", workspace, need, 4, 1, host},
      {"counts", out->counts, ebytes, 4, 1, 0},
      {"offsets", out->offsets, ebytes, 4, 1, 0},
      {"row_of_slot", out->row_of_slot, slots, 4, 1, 0},
      {"slot_of_row", out->slot_of_row, slots, 4, 1, 0},
      {"dropped", out->dropped, 4, 4, 1, 0}};
  rc = check_bufs(rt, fn, b, (int)(sizeof b / sizeof b[0]));
  if (rc == TJ_OK && !host && workspace_bytes < need)
    rc = tj__fail(rt, TJ_EINVAL, "%s: workspace_bytes is %zu, below the %zu "
                  "that tj_moe_route_workspace gives", fn, workspace_bytes,
                  need);
  return rc;
}

int tj_moe_route(tj_runtime *rt, void *stream, const int32_t *topk,
                 int64_t tokens, int k, int experts,
                 const tj_moe_routing *out,
                 void *workspace, size_t workspace_bytes)
{
  static const char fn[] = "tj_moe_route";
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  int rc = check_route(rt, fn, topk, tokens, k, experts, out, workspace,
                       workspace_bytes, 0);
  if (rc != TJ_OK)
    return rc;
  unsigned long long pairs = (unsigned long long)tokens * (unsigned long long)k;
  unsigned chunks = (unsigned)route_chunks(tokens, k);
  void *hist = workspace;
  void *count_args[] = {&topk, &pairs, &experts, &hist};
  rc = launch(rt, fn, "moe_route_count", chunks, MOE_ROUTE_THREADS, stream,
              count_args);
  void *scan_args[] = {&hist, &chunks, &experts, &pairs, (void *)&out->counts,
                       (void *)&out->offsets, (void *)&out->dropped,
                       (void *)&out->slot_of_row};
  if (rc == TJ_OK)
    rc = launch(rt, fn, "moe_route_scan", 1, MOE_SCAN_THREADS, stream,
                scan_args);
  void *rank_args[] = {(void *)&topk, &pairs, &experts, &hist,
                       (void *)&out->row_of_slot,
                       (void *)&out->slot_of_row};
  if (rc == TJ_OK)
    rc = launch(rt, fn, "moe_route_rank", chunks, MOE_ROUTE_THREADS, stream,
                rank_args);
  return rc;
}

/* ------------------------------------------------------- rows */

/* The four row calls, their names and arrays. */
enum moe_op { OP_PERMUTE, OP_UNPERMUTE, OP_PERMUTE_BWD, OP_UNPERMUTE_BWD };

typedef struct moe_op_names {
  const char *fn, *host_fn, *kernel;
  const char *in0, *in1, *out0; /* arrays; in1 NULL: none */
  const char *ld0, *ld1, *ldo0; /* their strides */
  int weighted;                 /* takes w (and w_type) */
} moe_op_names;

static const moe_op_names moe_ops[] = {
    [OP_PERMUTE] = {"tj_moe_permute", "tj_moe_permute_host", "moe_permute",
                    "x", NULL, "xp", "ldx", NULL, "ldxp", 0},
    [OP_UNPERMUTE] = {"tj_moe_unpermute", "tj_moe_unpermute_host",
                      "moe_unpermute", "yp", NULL, "y", "ldyp", NULL, "ldy",
                      1},
    [OP_PERMUTE_BWD] = {"tj_moe_permute_bwd", "tj_moe_permute_bwd_host",
                        "moe_unpermute", "dxp", NULL, "dx", "lddxp", NULL,
                        "lddx", 0},
    [OP_UNPERMUTE_BWD] = {"tj_moe_unpermute_bwd", "tj_moe_unpermute_bwd_host",
                          "moe_unpermute_bwd", "dy", "yp", "dyp", "lddy",
                          "ldyp", "lddyp", 1}};

/* A row call's arguments, as the public calls take them. */
typedef struct moe_args {
  int dtype;
  const void *in0, *in1;
  int64_t ld0, ld1;
  const int32_t *map;
  int64_t tokens;
  int k;
  int64_t hidden;
  int w_type;
  const void *w;
  void *out0, *out1; /* out1: dw */
  int64_t ldo0;
} moe_args;

/* An activation matrix of rows x hidden, stride ld. */
static moe_buf act(const char *name, const void *p, int64_t rows, int64_t ld,
                   int64_t hidden, int is_output)
{
  return (moe_buf){name, p, span_of(rows, ld, hidden, 2), 2, is_output, 0};
}

/* Rows of in0 and out0: the tokens' (T) or the permuted matrix's (T * k). */
static int64_t in0_rows(enum moe_op op, const moe_args *a)
{
  return op == OP_PERMUTE || op == OP_UNPERMUTE_BWD ? a->tokens
                                                    : a->tokens * a->k;
}

static int64_t out0_rows(enum moe_op op, const moe_args *a)
{
  return op == OP_PERMUTE || op == OP_UNPERMUTE_BWD ? a->tokens * a->k
                                                    : a->tokens;
}

/* The arrays of a call, in the order its checks name them. */
static int bufs_of(enum moe_op op, const moe_args *a, moe_buf *b)
{
  const moe_op_names *n = &moe_ops[op];
  int64_t slots = a->tokens * a->k, H = a->hidden;
  size_t welem = dtype_size(a->w_type), wbytes = (size_t)slots * welem;
  int nb = 0;
  b[nb++] = act(n->in0, a->in0, in0_rows(op, a), a->ld0, H, 0);
  if (n->in1)
    b[nb++] = act(n->in1, a->in1, slots, a->ld1, H, 0);
  b[nb++] = (moe_buf){"row_of_slot", a->map, (size_t)slots * 4, 4, 0, 0};
  if (op != OP_PERMUTE)
    b[nb++] = (moe_buf){"w", a->w, wbytes, welem, 0, !n->weighted};
  b[nb++] = act(n->out0, a->out0, out0_rows(op, a), a->ldo0, H, 1);
  if (op == OP_UNPERMUTE_BWD)
    b[nb++] = (moe_buf){"dw", a->out1, wbytes, welem, 1, 0};
  return nb;
}

static int check_op(tj_runtime *rt, const char *fn, enum moe_op op,
                    const moe_args *a)
{
  const moe_op_names *n = &moe_ops[op];
  int rc = check_dtype(rt, fn, a->dtype);
  if (rc == TJ_OK)
    rc = check_slots(rt, fn, a->tokens, a->k);
  if (rc == TJ_OK)
    rc = check_hidden(rt, fn, a->hidden);
  if (rc == TJ_OK && n->weighted)
    rc = check_w_type(rt, fn, a->w_type, a->dtype);
  if (rc == TJ_OK)
    rc = check_ld(rt, fn, n->ld0, a->ld0, a->hidden);
  if (rc == TJ_OK && n->ld1)
    rc = check_ld(rt, fn, n->ld1, a->ld1, a->hidden);
  if (rc == TJ_OK)
    rc = check_ld(rt, fn, n->ldo0, a->ldo0, a->hidden);
  if (rc != TJ_OK)
    return rc;
  moe_buf b[6];
  return check_bufs(rt, fn, b, bufs_of(op, a, b));
}

static unsigned row_grid(int64_t tokens)
{
  return blocks_for((uint64_t)tokens, 1, MOE_GRID_CAP);
}

/* The kernel's arguments: (in0, ld0, [in1, ld1,] map, T, k, H, w, w_type,
 * dtype, out0, ldo0 [, dw]), as kernels/moe_permute.hip takes them. */
static int launch_op(tj_runtime *rt, const char *fn, enum moe_op op,
                     void *stream, const moe_args *a)
{
  moe_args c = *a;
  unsigned long long ld0 = a->ld0, ld1 = a->ld1, ldo0 = a->ldo0;
  unsigned long long T = a->tokens, H = a->hidden;
  void *args[16];
  int n = 0;
  args[n++] = &c.in0, args[n++] = &ld0;
  if (op == OP_UNPERMUTE_BWD)
    args[n++] = &c.in1, args[n++] = &ld1;
  args[n++] = &c.map, args[n++] = &T, args[n++] = &c.k, args[n++] = &H;
  args[n++] = &c.w, args[n++] = &c.w_type, args[n++] = &c.dtype;
  args[n++] = &c.out0, args[n++] = &ldo0;
  if (op == OP_UNPERMUTE_BWD)
    args[n++] = &c.out1;
  return launch(rt, fn, moe_ops[op].kernel, row_grid(a->tokens),
                MOE_ROW_THREADS, stream, args);
}

static int call_op(tj_runtime *rt, enum moe_op op, void *stream,
                   const moe_args *a)
{
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  int rc = check_op(rt, moe_ops[op].fn, op, a);
  return rc == TJ_OK ? launch_op(rt, moe_ops[op].fn, op, stream, a) : rc;
}

int tj_moe_permute(tj_runtime *rt, void *stream, int dtype, const void *x,
                   int64_t ldx, const int32_t *row_of_slot, int64_t tokens,
                   int k, int64_t hidden, void *xp, int64_t ldxp)
{
  const moe_args a = {.dtype = dtype, .in0 = x, .ld0 = ldx,
                      .map = row_of_slot, .tokens = tokens, .k = k,
                      .hidden = hidden, .w_type = TJ_DTYPE_F32, .out0 = xp,
                      .ldo0 = ldxp};
  return call_op(rt, OP_PERMUTE, stream, &a);
}

int tj_moe_unpermute(tj_runtime *rt, void *stream, int dtype, const void *yp,
                     int64_t ldyp, const int32_t *row_of_slot, int64_t tokens,
                     int k, int64_t hidden, int w_type, const void *w, void *y,
                     int64_t ldy)
{
  const moe_args a = {.dtype = dtype, .in0 = yp, .ld0 = ldyp,
                      .map = row_of_slot, .tokens = tokens, .k = k,
                      .hidden = hidden, .w_type = w_type, .w = w, .out0 = y,
                      .ldo0 = ldy};
  return call_op(rt, OP_UNPERMUTE, stream, &a);
}

int tj_moe_permute_bwd(tj_runtime *rt, void *stream, int dtype,
                       const void *dxp, int64_t lddxp,
                       const int32_t *row_of_slot, int64_t tokens, int k,
                       int64_t hidden, void *dx, int64_t lddx)
{
  const moe_args a = {.dtype = dtype, .in0 = dxp, .ld0 = lddxp,
                      .map = row_of_slot, .tokens = tokens, .k = k,
                      .hidden = hidden, .w_type = TJ_DTYPE_F32, .out0 = dx,
                      .ldo0 = lddx};
  return call_op(rt, OP_PERMUTE_BWD, stream, &a);
}

int tj_moe_unpermute_bwd(tj_runtime *rt, void *stream, int dtype,
                         const void *dy, int64_t lddy, const void *yp,
                         int64_t ldyp, const int32_t *row_of_slot,
                         int64_t tokens, int k, int64_t hidden, int w_type,
                         const void *w, void *dyp, int64_t lddyp, void *dw)
{
  const moe_args a = {.dtype = dtype, .in0 = dy, .ld0 = lddy, .in1 = yp,
                      .ld1 = ldyp, .map = row_of_slot, .tokens = tokens,
                      .k = k, .hidden = hidden, .w_type = w_type, .w = w,
                      .out0 = dyp, .out1 = dw, .ldo0 = lddyp};
  return call_op(rt, OP_UNPERMUTE_BWD, stream, &a);
}

/* ------------------------------------------------------- host calls */

/* A host call's device-pointer call: the arguments with the device
 * copies in place of the caller's arrays, in bufs_of's order. */
typedef struct moe_host_job {
  enum moe_op op;
  moe_args a;
} moe_host_job;

static int call_op_on(tj_runtime *rt, const void *ctx, void *const *dev)
{
  const moe_host_job *j = ctx;
  moe_args a = j->a;
  int i = 0;
  a.in0 = dev[i++];
  if (moe_ops[j->op].in1)
    a.in1 = dev[i++];
  a.map = dev[i++];
  if (j->op != OP_PERMUTE) {
    a.w = a.w ? dev[i] : NULL;
    i++;
  }
  a.out0 = dev[i++];
  if (j->op == OP_UNPERMUTE_BWD)
    a.out1 = dev[i++];
  return call_op(rt, j->op, NULL, &a);
}

/* Inputs are copied in; outputs in and out, so that what the call does
 * not write (rows no slot maps to, the padding of a row) comes back as it
 * was.  An absent w still takes a (small) device buffer. */
static int host_op(tj_runtime *rt, enum moe_op op, const moe_args *a)
{
  const char *fn = moe_ops[op].host_fn;
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  int rc = check_op(rt, fn, op, a);
  if (rc != TJ_OK)
    return rc;
  moe_buf b[6];
  int nb = bufs_of(op, a, b);
  tj__op_buffer ob[6];
  for (int i = 0; i < nb; i++)
    ob[i] = (tj__op_buffer){b[i].p, b[i].is_output ? (void *)b[i].p : NULL,
                            b[i].p ? b[i].bytes : 4};
  const moe_host_job job = {op, *a};
  return tj__op_host_run(rt, fn, moe_ops[op].kernel, ob, nb, call_op_on, &job);
}

int tj_moe_permute_host(tj_runtime *rt, int dtype, const void *x, int64_t ldx,
                        const int32_t *row_of_slot, int64_t tokens, int k,
                        int64_t hidden, void *xp, int64_t ldxp)
{
  const moe_args a = {.dtype = dtype, .in0 = x, .ld0 = ldx,
                      .map = row_of_slot, .tokens = tokens, .k = k,
                      .hidden = hidden, .w_type = TJ_DTYPE_F32, .out0 = xp,
                      .ldo0 = ldxp};
  return host_op(rt, OP_PERMUTE, &a);
}

int tj_moe_unpermute_host(tj_runtime *rt, int dtype, const void *yp,
                          int64_t ldyp, const int32_t *row_of_slot,
                          int64_t tokens, int k, int64_t hidden, int w_type,
                          const void *w, void *y, int64_t ldy)
{
  const moe_args a = {.dtype = dtype, .in0 = yp, .ld0 = ldyp,
                      .map = row_of_slot, .tokens = tokens, .k = k,
                      .hidden = hidden, .w_type = w_type, .w = w, .out0 = y,
                      .ldo0 = ldy};
  return host_op(rt, OP_UNPERMUTE, &a);
}

int tj_moe_permute_bwd_host(tj_runtime *rt, int dtype, const void *dxp,
                            int64_t lddxp, const int32_t *row_of_slot,
                            int64_t tokens, int k, int64_t hidden, void *dx,
                            int64_t lddx)
{
  const moe_args a = {.dtype = dtype, .in0 = dxp, .ld0 = lddxp,
                      .map = row_of_slot, .tokens = tokens, .k = k,
                      .hidden = hidden, .w_type = TJ_DTYPE_F32, .out0 = dx,
                      .ldo0 = lddx};
  return host_op(rt, OP_PERMUTE_BWD, &a);
}

int tj_moe_unpermute_bwd_host(tj_runtime *rt, int dtype, const void *dy,
                              int64_t lddy, const void *yp, int64_t ldyp,
                              const int32_t *row_of_slot, int64_t tokens,
                              int k, int64_t hidden, int w_type, const void *w,
                              void *dyp, int64_t lddyp, void *dw)
{
  const moe_args a = {.dtype = dtype, .in0 = dy, .ld0 = lddy, .in1 = yp,
                      .ld1 = ldyp, .map = row_of_slot, .tokens = tokens,
                      .k = k, .hidden = hidden, .w_type = w_type, .w = w,
                      .out0 = dyp, .out1 = dw, .ldo0 = lddyp};
  return host_op(rt, OP_UNPERMUTE_BWD, &a);
}

/* The routing on host arrays: topk in, the workspace on the device only,
 * every output written in full by the kernels. */
typedef struct route_host_job {
  int64_t tokens;
  int k, experts;
  size_t ws_bytes;
} route_host_job;

static int route_on(tj_runtime *rt, const void *ctx, void *const *dev)
{
  const route_host_job *j = ctx;
  const tj_moe_routing r = {dev[2], dev[3], dev[4], dev[5], dev[6]};
  return tj_moe_route(rt, NULL, dev[0], j->tokens, j->k, j->experts, &r,
                      dev[1], j->ws_bytes);
}

int tj_moe_route_host(tj_runtime *rt, const int32_t *topk, int64_t tokens,
                      int k, int experts, const tj_moe_routing *out)
{
  static const char fn[] = "tj_moe_route_host";
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  if (!out)
    return tj__fail(rt, TJ_EINVAL, "%s: out is NULL", fn);
  int rc = check_slots(rt, fn, tokens, k);
  if (rc == TJ_OK)
    rc = check_experts(rt, fn, experts);
  if (rc != TJ_OK)
    return rc;
  size_t ws = route_workspace(tokens, k, experts);
  size_t slots = (size_t)tokens * (size_t)k * 4, eb = (size_t)experts * 4;
  if ((rc = check_route(rt, fn, topk, tokens, k, experts, out, NULL, 0, 1)) !=
      TJ_OK)
    return rc;
  const tj__op_buffer b[] = {{topk, NULL, slots},
                             {NULL, NULL, ws},
                             {NULL, out->counts, eb},
                             {NULL, out->offsets, eb},
                             {NULL, out->row_of_slot, slots},
                             {NULL, out->slot_of_row, slots},
                             {NULL, out->dropped, 4}};
  const route_host_job job = {tokens, k, experts, ws};
  return tj__op_host_run(rt, fn, NULL, b, 7, route_on, &job);
}
