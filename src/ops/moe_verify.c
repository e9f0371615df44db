/*
 * moe_verify.c: tj_verify of the MoE permutation's entries
 * (kernels/moe_permute.hip), which verify.c hands over here.
 *
 * A run routes T = max(n / H, 1) tokens of H = min(n, 1024) f16
 * activations to k = 4 of E = 8 experts (distinct per token, seeded),
 * then launches the call the entry belongs to: tj_moe_route for the
 * three routing entries, tj_moe_permute, tj_moe_unpermute (f32 weights)
 * or tj_moe_unpermute_bwd.  Outputs are poisoned before each launch, the
 * launches are timed with events, and the last one's outputs are
 * compared, every element, with oracle.c's MoE references: the routing
 * and the permuted rows exactly, sums to fp16 rounding.
 */
#include "internal.h"
#include "embedded.h"
#include "moe.h"
#include "oracle.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOE_K 4
#define MOE_E 8
#define MOE_H 1024
#define MOE_TIMED 5
#define F16_REL_FLOOR 0x1p-14

enum moe_call { CALL_ROUTE, CALL_PERMUTE, CALL_UNPERMUTE, CALL_UNPERMUTE_BWD };

static const struct {
  const char *name;
  enum moe_call call;
} moe_entries[] = {
    {"moe_route_count", CALL_ROUTE},     {"moe_route_scan", CALL_ROUTE},
    {"moe_route_rank", CALL_ROUTE},      {"moe_permute", CALL_PERMUTE},
    {"moe_unpermute", CALL_UNPERMUTE},   {"moe_unpermute_bwd", CALL_UNPERMUTE_BWD},
};

int tj__moe_verify_knows(const char *name)
{
  for (size_t i = 0; i < sizeof moe_entries / sizeof moe_entries[0]; i++)
    if (strcmp(moe_entries[i].name, name) == 0)
      return 1;
  return 0;
}

static enum moe_call call_of(const char *name)
{
  for (size_t i = 0; i < sizeof moe_entries / sizeof moe_entries[0]; i++)
    if (strcmp(moe_entries[i].name, name) == 0)
      return moe_entries[i].call;
  return CALL_ROUTE;
}

/* The arrays of a run, host (h) and device (d), in one order. */
enum { A_TOPK, A_WS, A_COUNTS, A_OFFSETS, A_ROW, A_SLOT, A_DROPPED, A_X,
       A_XP, A_W, A_Y, A_DYP, A_DW, A_COUNT };

typedef struct moe_run {
  tj_runtime *rt;
  const char *name;
  enum moe_call call;
  uint64_t seed;
  size_t tokens, hidden, slots;
  size_t bytes[A_COUNT];
  void *h[A_COUNT], *d[A_COUNT];
  double ms;
  tj__error_acc err;
  tj__error_stats stats;
  double max_abs_tol, rel_l2_tol;
} moe_run;

static uint64_t next_random(uint64_t *state)
{
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi), never 0 once rounded to fp16. */
static void fill_f16(uint16_t *p, size_t n, double lo, double hi, uint64_t s)
{
  for (size_t i = 0; i < n; i++) {
    uint16_t h;
    do
      h = tj_f32_to_f16((float)(lo + (hi - lo) * (double)(next_random(&s) >> 11) *
                                         0x1p-53));
    while ((h & 0x7fffu) == 0);
    p[i] = h;
  }
}

/* k distinct experts a token, and weights in (0, 1]. */
static void fill_routing(moe_run *v, uint64_t s)
{
  int32_t *topk = v->h[A_TOPK];
  float *w = v->h[A_W];
  for (size_t t = 0; t < v->tokens; t++) {
    int perm[MOE_E];
    for (int e = 0; e < MOE_E; e++)
      perm[e] = e;
    for (int j = 0; j < MOE_K; j++) {
      int r = j + (int)(next_random(&s) % (uint64_t)(MOE_E - j));
      int tmp = perm[j];
      perm[j] = perm[r];
      perm[r] = tmp;
      topk[t * MOE_K + (size_t)j] = perm[j];
      w[t * MOE_K + (size_t)j] =
          (float)((double)((next_random(&s) >> 40) + 1) * 0x1p-24);
    }
  }
}

static void size_arrays(moe_run *v)
{
  size_t s4 = v->slots * 4, act = v->tokens * v->hidden * 2;
  size_t perm = v->slots * v->hidden * 2;
  size_t ws = 0;
  tj_moe_route_workspace(v->rt, (int64_t)v->tokens, MOE_K, MOE_E, &ws);
  const size_t b[A_COUNT] = {s4, ws, MOE_E * 4, MOE_E * 4, s4, s4, 4, act,
                             perm, s4, act, perm, s4};
  memcpy(v->bytes, b, sizeof b);
}

static int alloc_arrays(moe_run *v)
{
  for (int i = 0; i < A_COUNT; i++) {
    if (!(v->h[i] = malloc(v->bytes[i])))
      return tj__fail(v->rt, TJ_ENOMEM, "tj_verify: out of host memory for "
                      "%zu bytes", v->bytes[i]);
    hipError_t e = hipMalloc(&v->d[i], v->bytes[i]);
    if (e != hipSuccess) {
      v->d[i] = NULL;
      return tj__fail(v->rt, TJ_ENOMEM, "tj_verify: hipMalloc of %zu bytes "
                      "failed: %s", v->bytes[i], hipGetErrorString(e));
    }
  }
  return TJ_OK;
}

static void release(moe_run *v)
{
  for (int i = 0; i < A_COUNT; i++) {
    free(v->h[i]);
    hipFree(v->d[i]);
  }
}

static int device_failed(tj_runtime *rt, const char *what, hipError_t e)
{
  return tj__fail(rt, TJ_EDEVICE, "tj_verify: %s failed: %s", what,
                  hipGetErrorString(e));
}

/* Inputs: the routing, x (as x, and as yp and dy for the later calls),
 * the permuted rows for unpermute and its backward. */
static int make_inputs(moe_run *v)
{
  fill_routing(v, v->seed ^ 0x6d6f65ull);
  fill_f16(v->h[A_X], v->tokens * v->hidden, -1.0, 1.0, v->seed + 1);
  fill_f16(v->h[A_XP], v->slots * v->hidden, -1.0, 1.0, v->seed + 2);
  static const int in[] = {A_TOPK, A_X, A_XP, A_W};
  for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
    hipError_t e = hipMemcpyHtoD(v->d[in[i]], v->h[in[i]], v->bytes[in[i]]);
    if (e != hipSuccess)
      return device_failed(v->rt, "copying inputs to the device", e);
  }
  return TJ_OK;
}

static tj_moe_routing routing_of(const moe_run *v)
{
  return (tj_moe_routing){v->d[A_COUNTS], v->d[A_OFFSETS], v->d[A_ROW],
                          v->d[A_SLOT], v->d[A_DROPPED]};
}

static int route(const moe_run *v)
{
  tj_moe_routing r = routing_of(v);
  return tj_moe_route(v->rt, NULL, v->d[A_TOPK], (int64_t)v->tokens, MOE_K,
                      MOE_E, &r, v->d[A_WS], v->bytes[A_WS]);
}

/* The outputs of the run's call, poisoned (0xff: -1 and fp16 NaN). */
static int poison(const moe_run *v)
{
  static const int route_out[] = {A_COUNTS, A_OFFSETS, A_ROW, A_SLOT, A_DROPPED};
  static const int perm_out[] = {A_XP}, un_out[] = {A_Y};
  static const int bwd_out[] = {A_DYP, A_DW};
  const int *o = v->call == CALL_ROUTE ? route_out
                 : v->call == CALL_PERMUTE ? perm_out
                 : v->call == CALL_UNPERMUTE ? un_out : bwd_out;
  int n = v->call == CALL_ROUTE ? 5 : v->call == CALL_UNPERMUTE_BWD ? 2 : 1;
  for (int i = 0; i < n; i++) {
    hipError_t e = hipMemset(v->d[o[i]], 0xff, v->bytes[o[i]]);
    if (e != hipSuccess)
      return device_failed(v->rt, "poisoning the outputs", e);
  }
  return TJ_OK;
}

static int launch_call(const moe_run *v)
{
  int64_t T = (int64_t)v->tokens, H = (int64_t)v->hidden;
  void *const *d = v->d;
  switch (v->call) {
  case CALL_ROUTE:
    return route(v);
  case CALL_PERMUTE:
    return tj_moe_permute(v->rt, NULL, TJ_DTYPE_F16, d[A_X], H, d[A_ROW], T,
                          MOE_K, H, d[A_XP], H);
  case CALL_UNPERMUTE:
    return tj_moe_unpermute(v->rt, NULL, TJ_DTYPE_F16, d[A_XP], H, d[A_ROW], T,
                            MOE_K, H, TJ_DTYPE_F32, d[A_W], d[A_Y], H);
  case CALL_UNPERMUTE_BWD:
    return tj_moe_unpermute_bwd(v->rt, NULL, TJ_DTYPE_F16, d[A_X], H, d[A_XP],
                                H, d[A_ROW], T, MOE_K, H, TJ_DTYPE_F32, d[A_W],
                                d[A_DYP], H, d[A_DW]);
  }
  return TJ_EINVAL;
}

static int compare_float(const void *a, const void *b)
{
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static int timed_launch(const moe_run *v, hipEvent_t ev[2], float *ms)
{
  int rc = poison(v);
  hipError_t e = hipSuccess;
  if (rc == TJ_OK && (e = hipEventRecord(ev[0], NULL)) == hipSuccess)
    rc = launch_call(v);
  if (rc == TJ_OK && e == hipSuccess && (e = hipEventRecord(ev[1], NULL)) == hipSuccess &&
      (e = hipEventSynchronize(ev[1])) == hipSuccess)
    e = hipEventElapsedTime(ms, ev[0], ev[1]);
  if (rc == TJ_OK && e != hipSuccess)
    rc = device_failed(v->rt, v->name, e);
  return rc;
}

/* One warm-up launch, then MOE_TIMED; the median is kept. */
static int time_launches(moe_run *v)
{
  hipEvent_t ev[2];
  hipError_t e = hipEventCreate(&ev[0]);
  if (e != hipSuccess)
    return device_failed(v->rt, "hipEventCreate", e);
  if ((e = hipEventCreate(&ev[1])) != hipSuccess) {
    hipEventDestroy(ev[0]);
    return device_failed(v->rt, "hipEventCreate", e);
  }
  float ms[MOE_TIMED + 1];
  int rc = TJ_OK;
  for (int i = 0; rc == TJ_OK && i <= MOE_TIMED; i++)
    rc = timed_launch(v, ev, &ms[i]);
  hipEventDestroy(ev[0]);
  hipEventDestroy(ev[1]);
  if (rc == TJ_OK) {
    qsort(ms + 1, MOE_TIMED, sizeof ms[0], compare_float);
    v->ms = ms[1 + MOE_TIMED / 2];
  }
  return rc;
}

static int copy_back(moe_run *v)
{
  for (int i = A_COUNTS; i < A_COUNT; i++) {
    if (i == A_X || i == A_W)
      continue;
    hipError_t e = hipMemcpyDtoH(v->h[i], v->d[i], v->bytes[i]);
    if (e != hipSuccess)
      return device_failed(v->rt, "copying results to the host", e);
  }
  return TJ_OK;
}

/* ------------------------------------------------------- comparing */

/* The integer arrays of the routing against the oracle's, all exact. */
static void compare_route(moe_run *v, const int32_t *want)
{
  const int32_t *w = want;
  static const int arrays[] = {A_COUNTS, A_OFFSETS, A_ROW, A_SLOT, A_DROPPED};
  size_t base = 0;
  for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
    size_t n = v->bytes[arrays[i]] / 4;
    tj__error_add_i32(&v->err, v->h[arrays[i]], w, n, base);
    w += n;
    base += n;
  }
}

static int oracle_route(moe_run *v, int32_t *want)
{
  int32_t *counts = want, *offsets = counts + MOE_E, *row = offsets + MOE_E;
  int32_t *slot = row + v->slots, *dropped = slot + v->slots;
  tj__oracle_moe_route(v->h[A_TOPK], v->tokens, MOE_K, MOE_E, counts, offsets,
                       row, slot, dropped);
  if (v->call == CALL_ROUTE)
    compare_route(v, want);
  return offsets[MOE_E - 1];
}

/* The rows of the permuted outputs that a slot maps to, and the rest. */
static void compare_rows(moe_run *v, int out, const double *want, size_t rows)
{
  tj__error_add_f16(&v->err, v->h[out], want, rows * v->hidden, 0);
}

static int compare(moe_run *v)
{
  size_t route_ints = 2 * MOE_E + 2 * v->slots + 1;
  size_t big = v->slots * v->hidden;
  int32_t *want_route = malloc(route_ints * 4);
  double *want = malloc((big > v->slots ? big : v->slots) * sizeof *want);
  if (!want_route || !want) {
    free(want_route);
    free(want);
    return tj__fail(v->rt, TJ_ENOMEM, "tj_verify: out of host memory");
  }
  size_t rows = (size_t)oracle_route(v, want_route);
  const int32_t *map = want_route + 2 * MOE_E;
  size_t T = v->tokens, H = v->hidden;
  if (v->call == CALL_PERMUTE) {
    tj__oracle_moe_permute(TJ_DTYPE_F16, v->h[A_X], H, map, T, MOE_K, H,
                           TJ_DTYPE_F32, NULL, want);
    compare_rows(v, A_XP, want, rows);
  } else if (v->call == CALL_UNPERMUTE) {
    tj__oracle_moe_unpermute(TJ_DTYPE_F16, v->h[A_XP], H, map, T, MOE_K, H,
                             TJ_DTYPE_F32, v->h[A_W], want);
    tj__error_add_f16(&v->err, v->h[A_Y], want, T * H, 0);
  } else if (v->call == CALL_UNPERMUTE_BWD) {
    tj__oracle_moe_permute(TJ_DTYPE_F16, v->h[A_X], H, map, T, MOE_K, H,
                           TJ_DTYPE_F32, v->h[A_W], want);
    compare_rows(v, A_DYP, want, rows);
    tj__oracle_moe_dw(TJ_DTYPE_F16, v->h[A_X], H, v->h[A_XP], H, map, T,
                      MOE_K, H, want);
    tj__error_add_dtype(&v->err, v->h[A_DW], TJ_DTYPE_F32, want, v->slots,
                        big);
  }
  free(want_route);
  free(want);
  return TJ_OK;
}

/* ------------------------------------------------------- the report */

static double bytes_moved(const moe_run *v)
{
  double act = (double)v->tokens * (double)v->hidden * 2;
  double perm = (double)v->slots * (double)v->hidden * 2;
  double map = (double)v->slots * 4;
  switch (v->call) {
  case CALL_ROUTE:
    return 4 * map; /* topk read twice, both maps written */
  case CALL_PERMUTE:
    return act + perm + map;
  case CALL_UNPERMUTE:
    return perm + act + 2 * map;
  case CALL_UNPERMUTE_BWD:
    return act + 2 * perm + 3 * map;
  }
  return 0;
}

static void fill_identity(tj_report *r, const moe_run *v,
                          const tj__embedded_kernel *e, const tj_kernel *k,
                          const char *device)
{
  snprintf(r->kernel, sizeof r->kernel, "%s", v->name);
  snprintf(r->ran, sizeof r->ran, "%s", v->call == CALL_ROUTE
           ? "moe_route_count+moe_route_scan+moe_route_rank" : v->name);
  r->seed = v->seed;
  tj__hash_hex(e->source, e->source_len, r->source_fingerprint);
  tj_kernel_info info;
  if (tj_kernel_get_info(k, &info) == TJ_OK)
    snprintf(r->code_key, sizeof r->code_key, "%s", info.key);
  snprintf(r->compiler, sizeof r->compiler, "%s", tj_runtime_compiler(v->rt));
  snprintf(r->device, sizeof r->device, "%s", device);
  snprintf(r->arch, sizeof r->arch, "%s", tj_runtime_arch(v->rt));
}

static void fill_figures(tj_report *r, const moe_run *v, uint64_t n)
{
  r->n = n;
  r->compared = v->stats.count;
  r->max_abs_error = v->stats.max_abs;
  r->rel_l2_error = v->stats.rel_l2;
  r->max_abs_tolerance = v->max_abs_tol;
  r->rel_l2_tolerance = v->rel_l2_tol;
  r->within_tolerance = tj__error_within(&v->stats, v->max_abs_tol,
                                         v->rel_l2_tol);
  r->kernel_ms = v->ms;
  r->bytes_moved = bytes_moved(v);
  if (v->ms > 0)
    r->gb_per_s = r->bytes_moved / (v->ms * 1e6);
}

static void fill_prose(tj_report *r, const moe_run *v)
{
  snprintf(r->evidence, sizeof r->evidence, "%s: %zu tokens of hidden %zu "
           "(f16), top-%d of %d experts, f32 weights, on %s (%s): %llu "
           "outputs compared with the double-precision oracle %s (max abs "
           "error %.3g, rel L2 %.3g; limits max abs %g, rel L2 %g). Median "
           "of %d timed calls %.4g ms: %.4g GB/s.", v->name, v->tokens,
           v->hidden, MOE_K, MOE_E, r->device, r->arch,
           (unsigned long long)r->compared, r->within_tolerance
           ? "were all within tolerance" : "were NOT all within tolerance",
           r->max_abs_error, r->rel_l2_error, r->max_abs_tolerance,
           r->rel_l2_tolerance, MOE_TIMED, r->kernel_ms, r->gb_per_s);
  snprintf(r->non_claims, sizeof r->non_claims, "Not a comparison with a "
           "vendor library or any other implementation. Timing covers the "
           "call's launches only (events around it, median of %d after one "
           "warm-up). One device, one run, one seed (%llu), one routing: "
           "uniform over distinct experts, no index out of range, no empty "
           "or skewed expert; f16 only; 16-byte aligned dense rows, so the "
           "element-by-element path was not run.%s", MOE_TIMED,
           (unsigned long long)v->seed, v->call == CALL_ROUTE ? "" :
           " The routing ran through tj_moe_route first and is not timed.");
}

/* ------------------------------------------------------- tj_verify */

static int check_run(moe_run *v, uint64_t n, tj__device_props *props)
{
  tj_runtime *rt = v->rt;
  if (n == 0)
    return tj__fail(rt, TJ_EINVAL, "tj_verify: n is 0");
  v->hidden = n < MOE_H ? (size_t)n : MOE_H;
  uint64_t tokens = n / v->hidden;
  if (tokens > INT32_MAX / MOE_K)
    return tj__fail(rt, TJ_ERANGE, "tj_verify: %s with n=%llu routes more "
                    "slots than an int32 row index holds", v->name,
                    (unsigned long long)n);
  v->tokens = (size_t)tokens;
  v->slots = v->tokens * MOE_K;
  if (rt->compile_only)
    return tj__fail(rt, TJ_ENODEVICE, "no GPU: tj_verify runs %s, and this "
                    "runtime is compile-only (arch %s)", v->name, rt->arch);
  if (tj__device_query(rt->device.ordinal, props, 0) != TJ_OK)
    return tj__fail(rt, TJ_EDEVICE, "tj_verify: could not query device %d",
                    rt->device.ordinal);
  size_arrays(v);
  size_t all = 0;
  for (int i = 0; i < A_COUNT; i++)
    all += v->bytes[i];
  if (all > props->total_mem / 2)
    return tj__fail(rt, TJ_ERANGE, "tj_verify: %s with n=%llu needs %zu bytes "
                    "of device memory, over half of the %zu that %s has",
                    v->name, (unsigned long long)n, all, props->total_mem,
                    props->name);
  if (tj_runtime_bind(rt) != TJ_OK)
    return tj__fail(rt, TJ_EDEVICE, "tj_verify: could not make device %d "
                    "current", rt->device.ordinal);
  return TJ_OK;
}

static int run(moe_run *v)
{
  int rc = alloc_arrays(v);
  if (rc == TJ_OK)
    rc = make_inputs(v);
  if (rc == TJ_OK && v->call != CALL_ROUTE)
    rc = route(v);
  if (rc == TJ_OK)
    rc = time_launches(v);
  if (rc == TJ_OK)
    rc = copy_back(v);
  if (rc == TJ_OK)
    rc = compare(v);
  tj__error_finish(&v->err, v->call == CALL_ROUTE || v->call == CALL_PERMUTE
                   ? 0.0 : F16_REL_FLOOR, &v->stats);
  return rc;
}

int tj__moe_verify(tj_runtime *rt, const char *kernel, uint64_t n,
                   uint64_t seed, tj_report *report)
{
  const tj__embedded_kernel *e = tj__embedded_find(kernel);
  moe_run v = {.rt = rt, .name = kernel, .call = call_of(kernel), .seed = seed};
  int exact = v.call == CALL_ROUTE || v.call == CALL_PERMUTE;
  v.max_abs_tol = exact ? 0.0 : 1e-2;
  v.rel_l2_tol = exact ? 0.0 : 1e-3;
  tj__device_props props;
  tj_kernel *k = NULL;
  int rc = e ? check_run(&v, n, &props) : TJ_ENOENT;
  if (rc == TJ_OK)
    rc = tj_kernel_get(rt, kernel, &k);
  if (rc == TJ_OK)
    rc = run(&v);
  release(&v);
  if (rc != TJ_OK)
    return rc;
  tj_report r;
  memset(&r, 0, sizeof r);
  fill_identity(&r, &v, e, k, props.name);
  fill_figures(&r, &v, n);
  fill_prose(&r, &v);
  *report = r;
  return tj__verify_verdict(rt, &r);
}
