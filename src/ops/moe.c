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

static int check_route(tj_runtime *rt, const char *fn, const int32_t *topk,
                       int64_t tokens, int k, int experts,
                       const tj_moe_routing *out,
                       const void *workspace,
                       size_t workspace_bytes)
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
      {"workspace", workspace, need, 4, 1, 0},
      {"counts", out->counts, ebytes, 4, 1, 0},
      {"offsets", out->offsets, ebytes, 4, 1, 0},
      {"row_of_slot", out->row_of_slot, slots, 4, 1, 0},
      {"slot_of_row", out->slot_of_row, slots, 4, 1, 0},
      {"dropped", out->dropped, 4, 4, 1, 0}};
  rc = check_bufs(rt, fn, b, (int)(sizeof b / sizeof b[0]));
  if (rc == TJ_OK && workspace_bytes < need)
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
                       workspace_bytes);
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

/* What the row calls share: the type, the slots and the map. */
static int check_rows(tj_runtime *rt, const char *fn, int dtype,
                      int64_t tokens, int k, int64_t hidden)
{
  int rc = check_dtype(rt, fn, dtype);
  if (rc == TJ_OK)
    rc = check_slots(rt, fn, tokens, k);
  if (rc == TJ_OK)
    rc = check_hidden(rt, fn, hidden);
  return rc;
}

/* An activation matrix of rows x hidden, stride ld. */
static moe_buf act(const char *name, const void *p, int64_t rows, int64_t ld,
                   int64_t hidden, int is_output)
{
  return (moe_buf){name, p, span_of(rows, ld, hidden, 2), 2, is_output, 0};
}

static moe_buf map_buf(const int32_t *row_of_slot, int64_t tokens, int k)
{
  return (moe_buf){"row_of_slot", row_of_slot, (size_t)tokens * (size_t)k * 4,
                   4, 0, 0};
}

static unsigned row_grid(int64_t tokens)
{
  return blocks_for((uint64_t)tokens, 1, MOE_GRID_CAP);
}

int tj_moe_permute(tj_runtime *rt, void *stream, int dtype, const void *x,
                   int64_t ldx, const int32_t *row_of_slot, int64_t tokens,
                   int k, int64_t hidden, void *xp, int64_t ldxp)
{
  static const char fn[] = "tj_moe_permute";
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  int rc = check_rows(rt, fn, dtype, tokens, k, hidden);
  if (rc == TJ_OK)
    rc = check_ld(rt, fn, "ldx", ldx, hidden);
  if (rc == TJ_OK)
    rc = check_ld(rt, fn, "ldxp", ldxp, hidden);
  if (rc != TJ_OK)
    return rc;
  const moe_buf b[] = {act("x", x, tokens, ldx, hidden, 0),
                       map_buf(row_of_slot, tokens, k),
                       act("xp", xp, tokens * k, ldxp, hidden, 1)};
  if ((rc = check_bufs(rt, fn, b, 3)) != TJ_OK)
    return rc;
  unsigned long long ux = ldx, ut = tokens, uh = hidden, uxp = ldxp;
  const void *w = NULL;
  int w_type = TJ_DTYPE_F32;
  void *args[] = {&x, &ux, &row_of_slot, &ut, &k, &uh, &w, &w_type, &dtype,
                  &xp, &uxp};
  return launch(rt, fn, "moe_permute", row_grid(tokens), MOE_ROW_THREADS,
                stream, args);
}

/* unpermute and the backward of permute: one kernel, w NULL for the
 * latter. */
static int combine(tj_runtime *rt, const char *fn, void *stream, int dtype,
                   const void *yp, int64_t ldyp, const int32_t *row_of_slot,
                   int64_t tokens, int k, int64_t hidden, int w_type,
                   const void *w, void *y, int64_t ldy,
                   const char *const *names)
{
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  int rc = check_rows(rt, fn, dtype, tokens, k, hidden);
  if (rc == TJ_OK && names[1])
    rc = check_w_type(rt, fn, w_type, dtype);
  if (rc == TJ_OK)
    rc = check_ld(rt, fn, names[3], ldyp, hidden);
  if (rc == TJ_OK)
    rc = check_ld(rt, fn, names[4], ldy, hidden);
  if (rc != TJ_OK)
    return rc;
  size_t wbytes = (size_t)tokens * (size_t)k * dtype_size(w_type);
  const moe_buf b[] = {act(names[0], yp, tokens * k, ldyp, hidden, 0),
                       map_buf(row_of_slot, tokens, k),
                       {"w", w, wbytes, dtype_size(w_type), 0, !names[1]},
                       act(names[2], y, tokens, ldy, hidden, 1)};
  if ((rc = check_bufs(rt, fn, b, 4)) != TJ_OK)
    return rc;
  unsigned long long uyp = ldyp, ut = tokens, uh = hidden, uy = ldy;
  void *args[] = {&yp, &uyp, &row_of_slot, &ut, &k, &uh, &w, &w_type, &dtype,
                  &y, &uy};
  return launch(rt, fn, "moe_unpermute", row_grid(tokens), MOE_ROW_THREADS,
                stream, args);
}

int tj_moe_unpermute(tj_runtime *rt, void *stream, int dtype, const void *yp,
                     int64_t ldyp, const int32_t *row_of_slot, int64_t tokens,
                     int k, int64_t hidden, int w_type, const void *w, void *y,
                     int64_t ldy)
{
  const char *names[] = {"yp", "w", "y", "ldyp", "ldy"};
  return combine(rt, "tj_moe_unpermute", stream, dtype, yp, ldyp, row_of_slot,
                 tokens, k, hidden, w_type, w, y, ldy, names);
}

int tj_moe_permute_bwd(tj_runtime *rt, void *stream, int dtype,
                       const void *dxp, int64_t lddxp,
                       const int32_t *row_of_slot, int64_t tokens, int k,
                       int64_t hidden, void *dx, int64_t lddx)
{
  const char *names[] = {"dxp", NULL, "dx", "lddxp", "lddx"};
  return combine(rt, "tj_moe_permute_bwd", stream, dtype, dxp, lddxp,
                 row_of_slot, tokens, k, hidden, TJ_DTYPE_F32, NULL, dx, lddx,
                 names);
}

/* tj_moe_unpermute_bwd's arguments, as it passes them on. */
typedef struct unpermute_bwd_args {
  int dtype;
  const void *dy;
  int64_t lddy;
  const void *yp;
  int64_t ldyp;
  const int32_t *row_of_slot;
  int64_t tokens;
  int k;
  int64_t hidden;
  int w_type;
  const void *w;
  void *dyp;
  int64_t lddyp;
  void *dw;
} unpermute_bwd_args;

static int check_unpermute_bwd(tj_runtime *rt, const char *fn,
                               const unpermute_bwd_args *a)
{
  int rc = check_rows(rt, fn, a->dtype, a->tokens, a->k, a->hidden);
  if (rc == TJ_OK)
    rc = check_w_type(rt, fn, a->w_type, a->dtype);
  if (rc == TJ_OK)
    rc = check_ld(rt, fn, "lddy", a->lddy, a->hidden);
  if (rc == TJ_OK)
    rc = check_ld(rt, fn, "ldyp", a->ldyp, a->hidden);
  if (rc == TJ_OK)
    rc = check_ld(rt, fn, "lddyp", a->lddyp, a->hidden);
  if (rc != TJ_OK)
    return rc;
  int64_t slots = a->tokens * a->k;
  size_t welem = dtype_size(a->w_type), wbytes = (size_t)slots * welem;
  const moe_buf b[] = {
      act("dy", a->dy, a->tokens, a->lddy, a->hidden, 0),
      act("yp", a->yp, slots, a->ldyp, a->hidden, 0),
      map_buf(a->row_of_slot, a->tokens, a->k),
      {"w", a->w, wbytes, welem, 0, 0},
      act("dyp", a->dyp, slots, a->lddyp, a->hidden, 1),
      {"dw", a->dw, wbytes, welem, 1, 0}};
  return check_bufs(rt, fn, b, 6);
}

int tj_moe_unpermute_bwd(tj_runtime *rt, void *stream, int dtype,
                         const void *dy, int64_t lddy, const void *yp,
                         int64_t ldyp, const int32_t *row_of_slot,
                         int64_t tokens, int k, int64_t hidden, int w_type,
                         const void *w, void *dyp, int64_t lddyp, void *dw)
{
  static const char fn[] = "tj_moe_unpermute_bwd";
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  const unpermute_bwd_args a = {dtype, dy, lddy, yp, ldyp, row_of_slot, tokens,
                                k, hidden, w_type, w, dyp, lddyp, dw};
  int rc = check_unpermute_bwd(rt, fn, &a);
  if (rc != TJ_OK)
    return rc;
  unsigned long long udy = lddy, uyp = ldyp, ut = tokens, uh = hidden;
  unsigned long long udyp = lddyp;
  void *args[] = {&dy, &udy, &yp, &uyp, &row_of_slot, &ut, &k, &uh, &w,
                  &w_type, &dtype, &dyp, &udyp, &dw};
  return launch(rt, fn, "moe_unpermute_bwd", row_grid(tokens),
                MOE_ROW_THREADS, stream, args);
}
