/* bench_util.c: timing, the run's header, and the JSON file. */
#include "bench.h"
#include "gemm/gemm.h"

double bench_time_gpu_between(void (*fn)(void *), void *ctx, int reps,
                              void (*between)(void *, int), void *between_ctx)
{
  hipEvent_t a, b;
  CHECK(hipEventCreate(&a));
  CHECK(hipEventCreate(&b));
  fn(ctx); /* warm-up: first-touch and clocks */
  CHECK(hipDeviceSynchronize());
  double *ms = calloc((size_t)reps, sizeof *ms);
  if (!ms)
    die("out of host memory");
  for (int i = 0; i < reps; i++) {
    float t = 0;
    if (between)
      between(between_ctx, i);
    CHECK(hipEventRecord(a, NULL));
    fn(ctx);
    CHECK(hipEventRecord(b, NULL));
    CHECK(hipEventSynchronize(b));
    CHECK(hipEventElapsedTime(&t, a, b));
    ms[i] = t;
  }
  double m = bench_median(ms, reps);
  free(ms);
  hipEventDestroy(a);
  hipEventDestroy(b);
  return m;
}

double bench_time_gpu(void (*fn)(void *), void *ctx, int reps)
{
  return bench_time_gpu_between(fn, ctx, reps, NULL, NULL);
}

#define FLUSH_BYTES ((size_t)256 << 20)

static void memset_scratch(void *scratch, int rep)
{
  CHECK(hipMemset(scratch, rep & 0xff, FLUSH_BYTES));
}

/* A 256 MiB memset before each rep leaves nothing of the last rep's data
 * in L2 (several times the L2 of the GPUs it runs on), so that a kernel whose data would fit there
 * is timed against memory, as it runs in a real program. */
double bench_time_gpu_flushed(void (*fn)(void *), void *ctx, int reps)
{
  void *scratch = NULL;
  CHECK(hipMalloc(&scratch, FLUSH_BYTES));
  double m = bench_time_gpu_between(fn, ctx, reps, memset_scratch, scratch);
  hipFree(scratch);
  return m;
}

void bench_header(bench_results *r, int need_gpu)
{
  tj__device_props p;
  memset(&p, 0, sizeof p);
  int n = 0;
  tj__device_count(&n);
  int have = n >= 1 && tj__device_query(0, &p, 0) == TJ_OK;
  if (!have && need_gpu)
    die("no GPU: the benchmark measures a real device");
  snprintf(r->device, sizeof r->device, "%s", have ? p.name : "none");
  snprintf(r->arch, sizeof r->arch, "%s", p.arch);
  tj__compiler_fingerprint(r->compiler, sizeof r->compiler);
  snprintf(r->platform, sizeof r->platform, "%s", tj_platform());
  time_t now = time(NULL);
  strftime(r->date, sizeof r->date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  if (have)
    printf("tokitai-jit %s bench: %s (%s, %d SMs/CUs, %.1f GiB), %s, %s\n",
           tj_version(), p.name, p.arch, p.compute_units,
           p.total_mem / 1073741824.0, r->compiler, r->date);
  else
    printf("tokitai-jit %s bench: no GPU (compiles only), %s, %s\n",
           tj_version(), r->compiler, r->date);
}

static void json_string(FILE *f, const char *s)
{
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

void bench_write_json(const bench_results *r, const char *path)
{
  FILE *f = fopen(path, "w");
  if (!f)
    die("cannot write %s", path);
  fprintf(f, "{\n  \"tokitai_jit\": ");
  json_string(f, tj_version());
  fprintf(f, ",\n  \"device\": ");
  json_string(f, r->device);
  fprintf(f, ",\n  \"arch\": ");
  json_string(f, r->arch);
  fprintf(f, ",\n  \"compiler\": ");
  json_string(f, r->compiler);
  fprintf(f, ",\n  \"platform\": ");
  json_string(f, r->platform);
  fprintf(f, ",\n  \"date\": ");
  json_string(f, r->date);
  const char *commit = getenv("TJ_BENCH_COMMIT");
  fprintf(f, ",\n  \"commit\": ");
  json_string(f, commit ? commit : "unknown");
  fprintf(f, ",\n  \"results\": [\n");
  for (int i = 0; i < r->count; i++) {
    fprintf(f, "    {\"section\": ");
    json_string(f, r->r[i].section);
    fprintf(f, ", \"name\": ");
    json_string(f, r->r[i].name);
    fprintf(f, ", \"value\": %.6g, \"unit\": ", r->r[i].value);
    json_string(f, r->r[i].unit);
    fprintf(f, "}%s\n", i + 1 < r->count ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  fclose(f);
}

int bench_open(tj_runtime **rt, const tj_options *o)
{
  int rc = tj_runtime_open(rt, o);
  if (rc != TJ_OK)
    return rc;
  tj__gemm_knobs knobs;
  tj__gemm_knobs_from_env(&knobs);
  return tj__gemm_knobs_set(*rt, &knobs);
}
