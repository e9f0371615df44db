/* bench_moe.c: the MoE permutation (tj_moe_*) at the MoE shapes
 * and H = 4096, bf16 with f32 weights, against a device-to-device copy of
 * the permuted matrix's bytes in the same run, in GB/s (bytes read +
 * written, the routing's maps included) and as a fraction of the copy. */
#include "bench.h"

typedef struct moe_shape {
  int64_t T;
  int k, E;
  int64_t H;
  int skewed; /* most slots to one expert */
} moe_shape;

static const moe_shape shapes[] = {
    {8192, 2, 8, 1024, 0},   {16384, 6, 64, 2048, 0}, {8192, 8, 128, 2048, 0},
    {4096, 4, 32, 1024, 0},  {8192, 2, 8, 4096, 0},   {16384, 6, 64, 2048, 1},
};

typedef struct moe_ctx {
  tj_runtime *rt;
  const moe_shape *s;
  int which;
  void *topk, *x, *xp, *y, *w, *dw, *ws, *route;
  size_t ws_bytes, xp_bytes;
  tj_moe_routing r;
} moe_ctx;

enum { RUN_COPY, RUN_ROUTE, RUN_PERMUTE, RUN_UNPERMUTE, RUN_UNPERMUTE_BWD,
       RUN_PERMUTE_BWD, RUN_COUNT };
static const char *const run_names[RUN_COUNT] = {
    "copy", "route", "permute", "unpermute", "unpermute_bwd", "permute_bwd"};

static void run_one(void *p)
{
  moe_ctx *c = p;
  const moe_shape *s = c->s;
  const int bf = TJ_DTYPE_BF16, f32 = TJ_DTYPE_F32;
  const int32_t *map = c->r.row_of_slot;
  int rc = TJ_OK;
  switch (c->which) {
  case RUN_COPY:
    CHECK(hipMemcpyDtoDAsync(c->y, c->xp, c->xp_bytes, NULL));
    return;
  case RUN_ROUTE:
    rc = tj_moe_route(c->rt, NULL, c->topk, s->T, s->k, s->E, &c->r, c->ws,
                      c->ws_bytes);
    break;
  case RUN_PERMUTE:
    rc = tj_moe_permute(c->rt, NULL, bf, c->x, s->H, map, s->T, s->k, s->H,
                        c->xp, s->H);
    break;
  case RUN_UNPERMUTE:
    rc = tj_moe_unpermute(c->rt, NULL, bf, c->xp, s->H, map, s->T, s->k, s->H,
                          f32, c->w, c->x, s->H);
    break;
  case RUN_UNPERMUTE_BWD:
    rc = tj_moe_unpermute_bwd(c->rt, NULL, bf, c->x, s->H, c->xp, s->H, map,
                              s->T, s->k, s->H, f32, c->w, c->y, s->H, c->dw);
    break;
  case RUN_PERMUTE_BWD:
    rc = tj_moe_permute_bwd(c->rt, NULL, bf, c->xp, s->H, map, s->T, s->k,
                            s->H, c->x, s->H);
    break;
  }
  if (rc != TJ_OK)
    die("moe %s: %s", run_names[c->which], tj_errmsg(c->rt));
}

/* Bytes each run must move: rows read and written, and the maps. */
static double bytes_of(const moe_shape *s, int which)
{
  double act = (double)s->T * (double)s->H * 2, perm = act * s->k;
  double map = (double)s->T * s->k * 4;
  switch (which) {
  case RUN_COPY:
    return 2 * perm;
  case RUN_ROUTE:
    return 4 * map;
  case RUN_PERMUTE:
  case RUN_UNPERMUTE:
  case RUN_PERMUTE_BWD:
    return act + perm + map;
  default: /* dy, yp read; dyp written; map, w, dw */
    return act + 2 * perm + 3 * map;
  }
}

static void *device_of(const void *host, size_t bytes)
{
  void *d;
  CHECK(hipMalloc(&d, bytes));
  if (host)
    CHECK(hipMemcpyHtoD(d, (void *)host, bytes));
  else
    CHECK(hipMemset(d, 0, bytes));
  return d;
}

/* Distinct experts a token (uniform), or 9 in 10 slots to expert 3;
 * weights 1/k; activations random bf16 in [-1, 1]. */
static void make_inputs(moe_ctx *c)
{
  const moe_shape *s = c->s;
  size_t slots = (size_t)(s->T * s->k), act = (size_t)(s->T * s->H);
  int32_t *topk = malloc(slots * 4);
  float *w = malloc(slots * 4);
  uint16_t *x = malloc(act * 2);
  if (!topk || !w || !x)
    die("out of host memory");
  uint64_t r = 88172645463325252ull;
  for (size_t i = 0; i < slots; i++) {
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    int e = (int)((i / (size_t)s->k * 7 + i % (size_t)s->k) % (size_t)s->E);
    topk[i] = s->skewed && r % 10 ? 3 : e;
    w[i] = 1.0f / (float)s->k;
  }
  for (size_t i = 0; i < act; i++) {
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    x[i] = tj_f32_to_bf16((float)((r >> 11) * 0x1.0p-53 * 2.0 - 1.0));
  }
  c->topk = device_of(topk, slots * 4);
  c->w = device_of(w, slots * 4);
  c->x = device_of(x, act * 2);
  free(topk), free(w), free(x);
}

static void bench_shape(tj_runtime *rt, const moe_shape *s, int reps,
                        bench_record_fn record)
{
  moe_ctx c = {.rt = rt, .s = s};
  size_t slots = (size_t)(s->T * s->k);
  c.xp_bytes = slots * (size_t)s->H * 2;
  make_inputs(&c);
  c.xp = device_of(NULL, c.xp_bytes), c.y = device_of(NULL, c.xp_bytes);
  c.dw = device_of(NULL, slots * 4);
  if (tj_moe_route_workspace(rt, s->T, s->k, s->E, &c.ws_bytes) != TJ_OK)
    die("moe workspace: %s", tj_errmsg(rt));
  c.ws = device_of(NULL, c.ws_bytes);
  int32_t *p = c.route = device_of(NULL, (2 * (size_t)s->E + 2 * slots + 1) * 4);
  c.r = (tj_moe_routing){p, p + s->E, p + 2 * s->E, p + 2 * s->E + slots,
                         p + 2 * s->E + 2 * slots};
  c.which = RUN_ROUTE;
  run_one(&c); /* the map every other run reads */
  double copy_gbs = 0;
  for (int i = 0; i < RUN_COUNT; i++) {
    c.which = i;
    double ms = bench_time_gpu(run_one, &c, reps);
    double gbs = bytes_of(s, i) / (ms * 1e6);
    char label[128];
    snprintf(label, sizeof label, "T=%lld k=%d E=%d H=%lld%s %s",
             (long long)s->T, s->k, s->E, (long long)s->H,
             s->skewed ? " skewed" : "", run_names[i]);
    record("moe", label, gbs, "GB/s");
    if (i == RUN_COPY) {
      copy_gbs = gbs;
      continue;
    }
    snprintf(label + strlen(label), sizeof label - strlen(label), " / copy");
    record("moe", label, gbs / copy_gbs, "x");
  }
  void *all[] = {c.topk, c.w, c.x, c.xp, c.y, c.dw, c.ws, c.route};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    hipFree(all[i]);
}

void bench_moe(tj_runtime *rt, int quick, bench_record_fn record)
{
  printf("MoE permutation, bf16, f32 weights (GB/s = bytes read + written / "
         "time; copy: the permuted matrix's bytes, device to device)\n");
  size_t n = quick ? 2 : sizeof shapes / sizeof shapes[0];
  for (size_t i = 0; i < n; i++)
    bench_shape(rt, &shapes[i], quick ? 5 : 20, record);
}
