/* check_kernels_gpu.c: the kernel calls and tj_verify on a real GPU, every
 * output compared with the CPU oracle.  Exits 77 (skip) when there is no
 * GPU.  Every test runs in its own forked process (Check's default) and
 * the parent never touches the GPU, because a CUDA context does not
 * survive fork().  Timeouts are hang guards, not timing assertions. */
#include "testgpu.h"
#include "embedded.h"
#include "oracle.h"
#include "jsoncheck.h"
#include "gemm/gemm.h"

#include <math.h>
#include <sys/wait.h>

/* ------------------------------------------------------- data */

static void random_f16(uint16_t *p, size_t n, double lo, double hi, uint64_t seed)
{
  for (size_t i = 0; i < n; i++) {
    double u = (double)(next_random(&seed) >> 11) * 0x1p-53;
    p[i] = tj_f32_to_f16((float)(lo + (hi - lo) * u));
  }
}

static void random_i32(int32_t *p, size_t n, uint64_t seed)
{
  for (size_t i = 0; i < n; i++)
    p[i] = (int32_t)(uint32_t)(next_random(&seed) >> 32);
}

static void put(void *dev, const void *host, size_t bytes)
{
  CHECK_HIP(hipMemcpyHtoD(dev, (void *)host, bytes));
}

static void get(void *host, const void *dev, size_t bytes)
{
  CHECK_HIP(hipMemcpyDtoH(host, (void *)dev, bytes));
}

/* ------------------------------------------------------- elementwise */

typedef struct ew_case {
  const char *kernel;
  int nin, nout;
  size_t elem;
} ew_case;

/* Inputs in parameter order: add (a, b), fwd (x), bwd (grad_out, x),
 * fwd_bwd (x, grad_out); outputs likewise. */
static const ew_case ew_cases[] = {
    {"add_i32", 2, 1, 4},
    {"gelu_fwd_f16", 1, 1, 2},
    {"gelu_bwd_f16", 2, 1, 2},
    {"gelu_fwd_bwd_f16", 2, 2, 2},
};
#define N_EW (int)(sizeof ew_cases / sizeof ew_cases[0])

static void make_inputs(const ew_case *c, size_t n, uint64_t seed, void *in[2])
{
  for (int i = 0; i < c->nin; i++) {
    in[i] = xmalloc(n * c->elem);
    if (c->elem == 4)
      random_i32(in[i], n, seed + (uint64_t)i);
    else
      random_f16(in[i], n, -6.0, 6.0, seed + (uint64_t)i);
  }
}

static int call_device(tj_runtime *rt, const ew_case *c, void *stream,
                       void *const *in, void *const *out, size_t n)
{
  if (strcmp(c->kernel, "add_i32") == 0)
    return tj_add_i32(rt, stream, in[0], in[1], out[0], n);
  if (strcmp(c->kernel, "gelu_fwd_f16") == 0)
    return tj_gelu_fwd_f16(rt, stream, in[0], out[0], n);
  if (strcmp(c->kernel, "gelu_bwd_f16") == 0)
    return tj_gelu_bwd_f16(rt, stream, in[0], in[1], out[0], n);
  return tj_gelu_fwd_bwd_f16(rt, stream, in[0], in[1], out[0], out[1], n);
}

static int call_host(tj_runtime *rt, const ew_case *c, void *const *in,
                     void *const *out, size_t n)
{
  if (strcmp(c->kernel, "add_i32") == 0)
    return tj_add_i32_host(rt, in[0], n, in[1], n, out[0], n);
  if (strcmp(c->kernel, "gelu_fwd_f16") == 0)
    return tj_gelu_fwd_f16_host(rt, in[0], n, out[0], n);
  if (strcmp(c->kernel, "gelu_bwd_f16") == 0)
    return tj_gelu_bwd_f16_host(rt, in[0], n, in[1], n, out[0], n);
  return tj_gelu_fwd_bwd_f16_host(rt, in[0], n, in[1], n, out[0], out[1], n);
}

static void check_exact_i32(const int32_t *a, const int32_t *b,
                            const int32_t *got, size_t n, const char *what)
{
  int32_t *want = xmalloc(n * 4);
  tj__oracle_add_i32(a, b, want, n);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(got[i] == want[i], "%s: c[%zu] = %d, want %d", what, i,
                  got[i], want[i]);
  free(want);
}

/* rel L2 with tj_verify's floor: fp16 has no relative precision below
 * 2^-14, so the denominator is at least sqrt(count) * 2^-14 and a lone
 * correctly rounded subnormal output does not fail. */
static double rel_l2_floored(const uint16_t *got, const double *want, size_t n)
{
  double err = 0, ref = 0;
  size_t count = 0;
  for (size_t i = 0; i < n; i++) {
    double g = tj_f16_to_f32(got[i]);
    if (isfinite(g) && isfinite(want[i])) {
      err += (g - want[i]) * (g - want[i]);
      ref += want[i] * want[i];
      count++;
    }
  }
  ref = fmax(ref, (double)count * 0x1p-28);
  return err == 0 ? 0 : sqrt(err / ref);
}

static void check_close_f16(const uint16_t *got, const double *want, size_t n,
                            const char *what)
{
  tj__error_stats s;
  tj__compare_f16(got, want, n, &s);
  double rel = rel_l2_floored(got, want, n);
  ck_assert_msg(s.nonfinite == 0 && s.special_mismatch == 0 &&
                s.max_abs <= 1e-2 && rel <= 1e-3,
                "%s: max abs %g at %zu (got %g, want %g), rel L2 %g, "
                "%zu non-finite, %zu special mismatches", what, s.max_abs,
                s.max_abs_index, (double)tj_f16_to_f32(got[s.max_abs_index]),
                want[s.max_abs_index], rel, s.nonfinite, s.special_mismatch);
}

/* Every output of case c against the oracle on the original inputs. */
static void check_outputs(const ew_case *c, void *const *in, void *const *out,
                          size_t n, const char *what)
{
  if (c->elem == 4) {
    check_exact_i32(in[0], in[1], out[0], n, what);
    return;
  }
  double *want = xmalloc(n * sizeof *want);
  if (strcmp(c->kernel, "gelu_bwd_f16") == 0) {
    tj__oracle_gelu_bwd(in[0], in[1], want, n);
    check_close_f16(out[0], want, n, what);
  } else {
    tj__oracle_gelu_fwd(in[0], want, n);
    check_close_f16(out[0], want, n, what);
  }
  if (c->nout == 2) {
    tj__oracle_gelu_bwd(in[1], in[0], want, n);
    check_close_f16(out[1], want, n, what);
  }
  free(want);
}

static void free_all(void **p, int n)
{
  for (int i = 0; i < n; i++)
    free(p[i]);
}

/* ------------------------------------------------------- tj_verify */

static double bytes_per_element(const ew_case *c)
{
  return (double)((size_t)(c->nin + c->nout) * c->elem);
}

static void check_report_identity(tj_runtime *rt, const tj_report *r)
{
  const tj__embedded_kernel *e = tj__embedded_find(r->kernel);
  ck_assert_ptr_nonnull(e);
  char fp[TJ__KEY_HEX];
  tj__hash_hex(e->source, e->source_len, fp);
  ck_assert_str_eq(r->source_fingerprint, fp);
  tj_kernel *k = NULL;
  tj_kernel_info info;
  CHECK_TJ(rt, tj_kernel_get(rt, r->kernel, &k));
  CHECK_TJ(rt, tj_kernel_get_info(k, &info));
  ck_assert_str_eq(r->code_key, info.key);
  ck_assert_str_eq(r->arch, tj_runtime_arch(rt));
  ck_assert_str_eq(r->compiler, tj_runtime_compiler(rt));
  ck_assert(r->device[0] && r->evidence[0] && r->non_claims[0]);
  if (r->m == 0)
    ck_assert_str_eq(r->ran, r->kernel);
  else
    ck_assert(r->ran[0] != '\0');
  char *j = tj_report_json(r), *m = tj_report_markdown(r);
  ck_assert_msg(j && json_valid_object(j), "bad JSON:\n%s", j ? j : "(null)");
  ck_assert_ptr_nonnull(m);
  free(j);
  free(m);
}

/* The rows tj_verify compares of an m-row GEMM with N = K = n: every
 * row of a skinny one (m < n); of a square one, every row up to n = 512,
 * above it a sample of 2^27 / n^2 rows, at least 2. */
static uint64_t verify_rows_compared(uint64_t m, uint64_t n)
{
  if (m < n)
    return m;
  uint64_t rows = ((uint64_t)1 << 27) / (n * n);
  rows = rows < 2 ? 2 : rows;
  return rows < n ? rows : n;
}

static void check_report(tj_runtime *rt, const tj_report *r, uint64_t n,
                         uint64_t compared)
{
  printf("%s n=%llu: %s\n", r->kernel, (unsigned long long)n, r->evidence);
  ck_assert_msg(r->within_tolerance, "%s n=%llu: %s", r->kernel,
                (unsigned long long)n, r->evidence);
  ck_assert_uint_eq(r->compared, compared);
  ck_assert(r->max_abs_error <= r->max_abs_tolerance);
  ck_assert(r->rel_l2_error <= r->rel_l2_tolerance);
  ck_assert_msg(r->kernel_ms > 0 && isfinite(r->kernel_ms), "kernel_ms %g",
                r->kernel_ms);
  ck_assert(r->gb_per_s > 0 && isfinite(r->gb_per_s));
  check_report_identity(rt, r);
}

static void verify_elementwise(const ew_case *c, const uint64_t *sizes, int count)
{
  tj_runtime *rt = open_gpu();
  for (int i = 0; i < count; i++) {
    tj_report r;
    CHECK_TJ(rt, tj_verify(rt, c->kernel, sizes[i], 1000 + (uint64_t)i, &r));
    ck_assert_str_eq(r.kernel, c->kernel);
    ck_assert_uint_eq(r.n, sizes[i]);
    ck_assert_int_eq(r.m, 0);
    ck_assert(r.bytes_moved == (double)sizes[i] * bytes_per_element(c));
    if (c->elem == 4)
      ck_assert(r.max_abs_error == 0 && r.rel_l2_error == 0);
    check_report(rt, &r, sizes[i], sizes[i] * (uint64_t)c->nout);
  }
  tj_runtime_close(rt);
}

START_TEST(verify_elementwise_small_and_odd_sizes)
{
  static const uint64_t sizes[] = {1, 7, 8, 9, (1u << 20) + 3};
  verify_elementwise(&ew_cases[_i], sizes, 5);
}
END_TEST

START_TEST(verify_elementwise_2_27)
{
  static const uint64_t sizes[] = {(uint64_t)1 << 27};
  verify_elementwise(&ew_cases[_i], sizes, 1);
}
END_TEST

static void verify_gemm(tj_runtime *rt, uint64_t n, uint64_t compared)
{
  tj_report r;
  CHECK_TJ(rt, tj_verify(rt, "gemm_f16", n, 77, &r));
  ck_assert_uint_eq(r.n, n * n);
  ck_assert(r.m == (int)n && r.n_cols == (int)n && r.k == (int)n);
  ck_assert(r.bytes_moved == 6.0 * (double)n * (double)n);
  ck_assert(r.tflop_per_s > 0 && isfinite(r.tflop_per_s));
  check_report(rt, &r, n, compared);
  ck_assert_uint_eq(verify_rows_compared(n, n) * n, compared);
  if (compared < n * n)
    ck_assert_msg(strstr(r.non_claims, "rows were compared"), "%s", r.non_claims);
}

START_TEST(verify_gemm_every_element)
{
  tj_runtime *rt = open_gpu();
  static const uint64_t sizes[] = {1, 7, 64, 129, 512};
  for (int i = 0; i < 5; i++)
    verify_gemm(rt, sizes[i], sizes[i] * sizes[i]);
  tj_runtime_close(rt);
}
END_TEST

/* Above n = 512 a seeded sample of rows: 2^27 / n^2 of them, at least 2. */
START_TEST(verify_gemm_sampled_rows)
{
  tj_runtime *rt = open_gpu();
  verify_gemm(rt, 1024, 128 * 1024);
  verify_gemm(rt, 2000, 33 * 2000);
  tj_runtime_close(rt);
}
END_TEST

/* The skinny entries, each through tj_gemm_f16 at its own row count with
 * N = K = 1000: every output compared. */
START_TEST(verify_gemm_skinny_entries)
{
  tj_runtime *rt = open_gpu();
  static const int rows[] = {1, 2, 4, 8};
  for (int i = 0; i < 4; i++) {
    char name[64];
    snprintf(name, sizeof name, "gemm_skinny_f16_m%d", rows[i]);
    tj_report r;
    CHECK_TJ(rt, tj_verify(rt, name, 1000, 91, &r));
    ck_assert(r.m == rows[i] && r.n_cols == 1000 && r.k == 1000);
    ck_assert_uint_eq(r.n, (uint64_t)rows[i] * 1000);
    check_report(rt, &r, 1000, (uint64_t)rows[i] * 1000);
  }
  tj_runtime_close(rt);
}
END_TEST

/* A report names what ran: what tj_gemm_f16 takes for the shape (on an
 * sm_90 device a configuration of gemm_sm90a.hip, named from its plan:
 * the multicast pairs or split-K at n = 512, the skinny kernel at n =
 * 12's rows...), and the report says the named entry did not run where
 * another did. */
static void check_ran(tj_runtime *rt, const char *kernel, uint64_t n,
                      const char *hopper_ran)
{
  tj_report r;
  CHECK_TJ(rt, tj_verify(rt, kernel, n, 5, &r));
  printf("%s n=%llu ran %s: %s\n", kernel, (unsigned long long)n, r.ran,
         r.evidence);
  check_report(rt, &r, n, verify_rows_compared(r.m, n) * n);
  int g = (int)n;
  const uint16_t *a = (const uint16_t *)((uintptr_t)1 << 40);
  const uint16_t *b = (const uint16_t *)((uintptr_t)2 << 40);
  const uint16_t *c = (const uint16_t *)((uintptr_t)3 << 40);
  const char *natural = tj_gemm_f16_kernel(rt, r.m, g, g, a, g, b, g, c, g);
  ck_assert_ptr_nonnull(natural);
  int hopper = strcmp(tj_runtime_arch(rt), "sm_90") == 0;
  if (hopper && hopper_ran)
    ck_assert_str_eq(r.ran, hopper_ran);
  /* The natural entry, with its reduce where it splits K. */
  ck_assert_msg(strncmp(r.ran, natural, strlen(natural)) == 0,
                "ran %s, tj_gemm_f16 takes %s", r.ran, natural);
  /* Whether kernel is one of ran's entries ("+" between them). */
  char entries[80], want[80];
  snprintf(entries, sizeof entries, "+%s+", r.ran);
  snprintf(want, sizeof want, "+%s+", kernel);
  int named_ran = strstr(entries, want) != NULL;
  ck_assert_msg((strstr(r.non_claims, "itself did not run") != NULL) ==
                    !named_ran,
                "ran %s for %s: %s", r.ran, kernel, r.non_claims);
}

START_TEST(verify_names_what_ran)
{
  tj_runtime *rt = open_gpu();
  check_ran(rt, "gemm_f16", 4096,
            "gemm_f16_f16_f16_nn_none_sm90a_128x256_mc2");
  check_ran(rt, "gemm_f16", 512, NULL);
  check_ran(rt, "gemm_skinny_f16_m4", 1024, NULL);
  check_ran(rt, "gemm_f16", 7, NULL);
  /* The Hopper configurations are no embedded kernels: nothing to
   * verify by those names. */
  tj_report r;
  ck_assert_int_eq(tj_verify(rt, "gemm_f16_sm90a_128x256_mc2", 512, 5, &r),
                   TJ_ENOENT);
  tj_runtime_close(rt);
}
END_TEST

/* tj_gemm_f16 with alpha == 0 on M x N x K, NaN everywhere in A and B
 * and C random: C must come back as exactly 0.5 * C (neither A nor B
 * read, as BLAS has it).  entry: the kernel it must take on an sm_90
 * device (NULL: not asserted). */
static void check_alpha_zero_reads_no_operand(int M, int N, int K,
                                              const char *entry)
{
  tj_runtime *rt = open_gpu();
  size_t nc = (size_t)M * N;
  uint16_t *C0 = xmalloc(nc * 2), *C = xmalloc(nc * 2);
  random_f16(C0, nc, -1, 1, 17);
  void *dA = dev_poisoned((size_t)M * K * 2), *dB = dev_poisoned((size_t)K * N * 2);
  void *dC = dev_poisoned(nc * 2);
  put(dC, C0, nc * 2);
  if (entry && strcmp(tj_runtime_arch(rt), "sm_90") == 0)
    ck_assert_str_eq(tj_gemm_f16_kernel(rt, M, N, K, dA, K, dB, N, dC, N),
                     entry);
  CHECK_TJ(rt, tj_gemm_f16(rt, NULL, M, N, K, 0.0f, dA, K, dB, N, 0.5f, dC, N));
  CHECK_HIP(hipDeviceSynchronize());
  get(C, dC, nc * 2);
  for (size_t i = 0; i < nc; i++)
    ck_assert_msg(C[i] == tj_f32_to_f16(0.5f * tj_f16_to_f32(C0[i])),
                  "C[%zu] = 0x%04x, want 0.5 * C", i, C[i]);
  hipFree(dA);
  hipFree(dB);
  hipFree(dC);
  free(C0);
  free(C);
  tj_runtime_close(rt);
}

/* The skinny kernels (K = 300: no TMA, so not the Hopper one). */
START_TEST(gemm_skinny_alpha_zero_reads_no_operand)
{
  check_alpha_zero_reads_no_operand(5, 70, 300, NULL);
}
END_TEST

START_TEST(verify_is_reproducible_from_its_seed)
{
  tj_runtime *rt = open_gpu();
  tj_report a, b, c;
  CHECK_TJ(rt, tj_verify(rt, "gelu_bwd_f16", 4099, 5, &a));
  CHECK_TJ(rt, tj_verify(rt, "gelu_bwd_f16", 4099, 5, &b));
  CHECK_TJ(rt, tj_verify(rt, "gelu_bwd_f16", 4099, 6, &c));
  ck_assert(a.max_abs_error == b.max_abs_error && a.rel_l2_error == b.rel_l2_error);
  ck_assert(a.rel_l2_error != c.rel_l2_error); /* other inputs */
  ck_assert_uint_eq(c.seed, 6);
  tj_runtime_close(rt);
}
END_TEST

/* ------------------------------------------------------- misaligned */

enum layout { SAME_OFFSET, MIXED_OFFSETS, IN_PLACE };
#define GUARD 8 /* elements around each array */

/* Elements outside [off, off + n) of a buffer of total elements must
 * still hold the poison. */
static void check_guards(const unsigned char *buf, size_t elem, size_t total,
                         size_t off, size_t n, const char *what)
{
  for (size_t i = 0; i < total * elem; i++)
    if (i < off * elem || i >= (off + n) * elem)
      ck_assert_msg(buf[i] == 0xff, "%s: byte %zu outside the array was "
                    "written", what, i);
}

/*
 * Arrays one element past a 256-byte boundary: 4-byte (int) or 2-byte
 * (fp16) aligned only.  SAME_OFFSET: all at +1 (head, vector body, tail);
 * MIXED_OFFSETS: outputs at +GUARD, so phases differ (scalar path);
 * IN_PLACE: each output is the input of the same index.
 */
static void run_misaligned(tj_runtime *rt, const ew_case *c, size_t n,
                           enum layout lay, hipStream_t stream)
{
  size_t total = n + 2 * GUARD, bytes = total * c->elem;
  size_t in_off = 1, out_off = lay == MIXED_OFFSETS ? GUARD : 1;
  void *in[2] = {0}, *out[2] = {0}, *dev_in[2] = {0}, *dev_out[2] = {0};
  void *din[2], *dout[2];
  make_inputs(c, n, 31 * n + (uint64_t)lay, in);
  for (int i = 0; i < c->nin; i++) {
    dev_in[i] = dev_poisoned(bytes);
    din[i] = (char *)dev_in[i] + in_off * c->elem;
    put(din[i], in[i], n * c->elem);
  }
  for (int i = 0; i < c->nout; i++) {
    int shared = lay == IN_PLACE && i < c->nin;
    dev_out[i] = shared ? NULL : dev_poisoned(bytes);
    dout[i] = shared ? din[i] : (char *)dev_out[i] + out_off * c->elem;
  }
  CHECK_TJ(rt, call_device(rt, c, stream, din, dout, n));
  CHECK_HIP(hipStreamSynchronize(stream));
  char what[128];
  snprintf(what, sizeof what, "%s n=%zu layout %d", c->kernel, n, (int)lay);
  for (int i = 0; i < c->nout; i++) {
    unsigned char *whole = xmalloc(bytes);
    get(whole, dev_out[i] ? dev_out[i] : dev_in[i], bytes);
    size_t off = dev_out[i] ? out_off : in_off;
    check_guards(whole, c->elem, total, off, n, what);
    out[i] = xmalloc(n * c->elem);
    memcpy(out[i], whole + off * c->elem, n * c->elem);
    free(whole);
  }
  check_outputs(c, in, out, n, what);
  for (int i = 0; i < 2; i++) {
    hipFree(dev_in[i]);
    hipFree(dev_out[i]);
  }
  free_all(in, 2);
  free_all(out, 2);
}

/* On a stream of the caller's own, as a library user would. */
START_TEST(elementwise_misaligned_and_in_place)
{
  tj_runtime *rt = open_gpu();
  hipStream_t stream;
  CHECK_HIP(hipStreamCreate(&stream));
  static const size_t sizes[] = {1, 7, 1000003};
  for (int s = 0; s < 3; s++)
    for (int lay = SAME_OFFSET; lay <= IN_PLACE; lay++)
      run_misaligned(rt, &ew_cases[_i], sizes[s], (enum layout)lay, stream);
  CHECK_HIP(hipStreamDestroy(stream));
  tj_runtime_close(rt);
}
END_TEST

/* ------------------------------------------------------- host calls */

START_TEST(host_calls_match_the_oracle)
{
  tj_runtime *rt = open_gpu();
  const ew_case *c = &ew_cases[_i];
  static const size_t sizes[] = {1, 9, 65537, (1u << 20) + 5};
  for (int s = 0; s < 4; s++) {
    size_t n = sizes[s];
    void *in[2] = {0}, *out[2] = {0};
    make_inputs(c, n, 500 + n, in);
    for (int i = 0; i < c->nout; i++)
      out[i] = xmalloc(n * c->elem);
    CHECK_TJ(rt, call_host(rt, c, in, out, n));
    char what[96];
    snprintf(what, sizeof what, "%s_host n=%zu", c->kernel, n);
    check_outputs(c, in, out, n, what);
    free_all(in, 2);
    free_all(out, 2);
  }
  tj_runtime_close(rt);
}
END_TEST

START_TEST(host_add_wraps_as_twos_complement)
{
  tj_runtime *rt = open_gpu();
  int32_t a[] = {INT32_MAX, INT32_MIN, -1, 0, INT32_MAX, 12345};
  int32_t b[] = {1, -1, 1, 0, INT32_MAX, -12345};
  int32_t want[] = {INT32_MIN, INT32_MAX, 0, 0, -2, 0};
  int32_t c[6];
  CHECK_TJ(rt, tj_add_i32_host(rt, a, 6, b, 6, c, 6));
  for (int i = 0; i < 6; i++)
    ck_assert_int_eq(c[i], want[i]);
  tj_runtime_close(rt);
}
END_TEST

/* Zeros, subnormals, and magnitudes where exp over- or underflows. */
START_TEST(gelu_extreme_inputs)
{
  static const float xs[] = {0.0f, -0.0f, 6e-8f, -6e-8f, 1e-4f, -1e-4f,
                             9.0f, -9.0f, 20.0f, -20.0f, 100.0f, -100.0f,
                             65504.0f, -65504.0f, 0.5f, -3.0f};
  enum { N = sizeof xs / sizeof xs[0] };
  tj_runtime *rt = open_gpu();
  uint16_t x[N], g[N], y[N], gi[N], y2[N], gi2[N];
  double want[N];
  for (int i = 0; i < N; i++) {
    x[i] = tj_f32_to_f16(xs[i]);
    g[i] = tj_f32_to_f16(i % 2 ? -1.5f : 0.75f);
  }
  CHECK_TJ(rt, tj_gelu_fwd_f16_host(rt, x, N, y, N));
  CHECK_TJ(rt, tj_gelu_bwd_f16_host(rt, g, N, x, N, gi, N));
  CHECK_TJ(rt, tj_gelu_fwd_bwd_f16_host(rt, x, N, g, N, y2, gi2, N));
  tj__oracle_gelu_fwd(x, want, N);
  check_close_f16(y, want, N, "gelu_fwd extremes");
  check_close_f16(y2, want, N, "gelu_fwd_bwd y extremes");
  tj__oracle_gelu_bwd(g, x, want, N);
  check_close_f16(gi, want, N, "gelu_bwd extremes");
  check_close_f16(gi2, want, N, "gelu_fwd_bwd grad_in extremes");
  tj_runtime_close(rt);
}
END_TEST

/* A call that fails its checks on a real device leaves the output. */
START_TEST(host_failure_leaves_the_output)
{
  tj_runtime *rt = open_gpu();
  uint16_t x[4] = {1, 2, 3, 4}, gi[4] = {9, 9, 9, 9};
  ck_assert_int_eq(tj_gelu_bwd_f16_host(rt, x, 3, x, 4, gi, 4), TJ_EINVAL);
  ck_assert_str_eq(tj_errmsg(rt), "tj_gelu_bwd_f16_host: grad_out length 3 does not match n=4");
  for (int i = 0; i < 4; i++)
    ck_assert_uint_eq(gi[i], 9);
  tj_runtime_close(rt);
}
END_TEST

/* After the first call, a call is a memory-table hit: no compile, no
 * cache read. */
START_TEST(repeated_calls_hit_the_memory_table)
{
  tj_runtime *rt = open_gpu();
  int32_t *d = dev_poisoned(1024 * 4);
  CHECK_TJ(rt, tj_add_i32(rt, NULL, d, d, d, 1024));
  tj_stats before, after;
  tj_runtime_get_stats(rt, &before);
  for (int i = 0; i < 50; i++)
    CHECK_TJ(rt, tj_add_i32(rt, NULL, d, d, d, 1024));
  CHECK_HIP(hipDeviceSynchronize());
  tj_runtime_get_stats(rt, &after);
  ck_assert_uint_eq(after.compiles, before.compiles);
  ck_assert_uint_eq(after.cache_hits, before.cache_hits);
  ck_assert_uint_eq(after.memory_hits, before.memory_hits + 50);
  hipFree(d);
  tj_runtime_close(rt);
}
END_TEST

/* ------------------------------------------------------- gemm */

typedef struct gemm_case {
  int M, N, K, lda, ldb, ldc;
  float alpha, beta;
  int offset; /* elements past the allocation's start: 1 misaligns */
} gemm_case;

/* fp16 output rounding (half an ulp, 2^-11 relative) with room to spare,
 * and an absolute term for fp32 accumulation near zero. */
static void check_gemm_result(const gemm_case *g, const uint16_t *C,
                              const double *want, const char *what)
{
  uint16_t *dense = xmalloc((size_t)g->M * (size_t)g->N * 2);
  for (int m = 0; m < g->M; m++)
    for (int n = 0; n < g->N; n++) {
      size_t at = (size_t)m * (size_t)g->N + (size_t)n;
      uint16_t h = C[(size_t)m * (size_t)g->ldc + (size_t)n];
      double got = tj_f16_to_f32(h), w = want[at];
      ck_assert_msg(fabs(got - w) <= 0x1p-10 * fabs(w) + 1e-3,
                    "%s: C[%d][%d] = %g, want %g", what, m, n, got, w);
      dense[at] = h;
    }
  tj__error_stats s;
  size_t count = (size_t)g->M * (size_t)g->N;
  tj__compare_f16(dense, want, count, &s);
  double rel = rel_l2_floored(dense, want, count);
  ck_assert_msg(s.nonfinite == 0 && s.special_mismatch == 0 && rel <= 1e-3,
                "%s: rel L2 %g, %zu non-finite", what, rel, s.nonfinite);
  free(dense);
}

/* Rows of guard after C in run_gemm_case's allocation: a tile's or a
 * TMA box's rows past M (up to 127 of a tile, twice that for a multicast
 * pair's second tile) would land there if they were not cut at M. */
#define GEMM_GUARD_ROWS 256

/* C's padding columns (ldc > N) and the guard rows after its last are
 * never written. */
static void check_gemm_padding(const gemm_case *g, const uint16_t *C,
                               const uint16_t *before, const char *what)
{
  for (int m = 0; m < g->M + GEMM_GUARD_ROWS; m++)
    for (int n = m < g->M ? g->N : 0; n < g->ldc; n++) {
      size_t at = (size_t)m * (size_t)g->ldc + (size_t)n;
      ck_assert_msg(C[at] == before[at], "%s: %s C[%d][%d] was written",
                    what, m < g->M ? "padding" : "past the last row", m, n);
    }
}

static void *gemm_to_device(const uint16_t *host, size_t elems, int offset)
{
  void *d = dev_poisoned((elems + (size_t)offset) * 2);
  put((uint16_t *)d + offset, host, elems * 2);
  return d;
}

/* A, B and (beta != 0) C random in [-1, 1], padding included, so a read
 * of padding would show; C all NaN when beta == 0, so a read of C would.
 * C's allocation runs GEMM_GUARD_ROWS rows past its last, filled alike. */
static void run_gemm_case(tj_runtime *rt, const gemm_case *g, hipStream_t stream)
{
  size_t na = (size_t)g->M * (size_t)g->lda, nb = (size_t)g->K * (size_t)g->ldb;
  size_t nc = ((size_t)g->M + GEMM_GUARD_ROWS) * (size_t)g->ldc;
  uint16_t *A = xmalloc(na * 2), *B = xmalloc(nb * 2), *C0 = xmalloc(nc * 2);
  uint16_t *C = xmalloc(nc * 2);
  double *want = xmalloc((size_t)g->M * (size_t)g->N * sizeof *want);
  random_f16(A, na, -1, 1, (uint64_t)g->M * 3 + 1);
  random_f16(B, nb, -1, 1, (uint64_t)g->N * 5 + 2);
  if (g->beta != 0)
    random_f16(C0, nc, -1, 1, (uint64_t)g->K * 7 + 3);
  else
    memset(C0, 0xff, nc * 2);
  void *dA = gemm_to_device(A, na, g->offset), *dB = gemm_to_device(B, nb, g->offset);
  void *dC = gemm_to_device(C0, nc, g->offset);
  uint16_t *pA = (uint16_t *)dA + g->offset, *pB = (uint16_t *)dB + g->offset;
  uint16_t *pC = (uint16_t *)dC + g->offset;
  CHECK_TJ(rt, tj_gemm_f16(rt, stream, g->M, g->N, g->K, g->alpha, pA, g->lda,
                           pB, g->ldb, g->beta, pC, g->ldc));
  CHECK_HIP(hipStreamSynchronize(stream));
  get(C, pC, nc * 2);
  tj__oracle_gemm(g->M, g->N, g->K, g->alpha, A, g->lda, B, g->ldb, g->beta,
                  g->beta != 0 ? C0 : NULL, g->ldc, want);
  char what[160];
  snprintf(what, sizeof what, "gemm %dx%dx%d ld %d,%d,%d alpha %g beta %g "
           "offset %d", g->M, g->N, g->K, g->lda, g->ldb, g->ldc, g->alpha,
           g->beta, g->offset);
  check_gemm_result(g, C, want, what);
  check_gemm_padding(g, C, C0, what);
  hipFree(dA);
  hipFree(dB);
  hipFree(dC);
  free(A); free(B); free(C0); free(C); free(want);
}

/* M <= 8 takes a skinny kernel everywhere (the FMA one, or on NVIDIA
 * sm_80+ the tensor-core one, which also takes 9 and 16): every row count
 * the FMA entries are built for, the ones between, strips cut by N, K
 * tails of their steps; 9 and 16 the tiled kernel elsewhere. */
static const int gemm_shapes[][3] = {{1, 1, 1}, {17, 33, 65}, {128, 128, 128},
                                     {1000, 1000, 1000}, {1, 4096, 300},
                                     {2, 31, 257}, {3, 1000, 517},
                                     {4, 8, 7}, {5, 33, 1}, {8, 100, 1025},
                                     {9, 64, 2048}, {16, 4104, 263},
                                     {16, 1, 5000}};

/* Dense, with beta = 0 (C only written) and beta != 0 (C read). */
START_TEST(gemm_device_call_shapes)
{
  tj_runtime *rt = open_gpu();
  int M = gemm_shapes[_i][0], N = gemm_shapes[_i][1], K = gemm_shapes[_i][2];
  gemm_case plain = {M, N, K, K, N, N, 1.0f, 0.0f, 0};
  gemm_case scaled = {M, N, K, K, N, N, 0.5f, -0.75f, 0};
  run_gemm_case(rt, &plain, NULL);
  run_gemm_case(rt, &scaled, NULL);
  tj_runtime_close(rt);
}
END_TEST

START_TEST(gemm_padded_leading_dimensions)
{
  tj_runtime *rt = open_gpu();
  gemm_case cases[] = {{70, 50, 90, 97, 61, 53, 1.0f, 0.0f, 0},
                       {3, 50, 90, 97, 61, 53, 1.0f, 1.5f, 0},
                       {12, 260, 40, 48, 264, 272, -1.0f, 0.25f, 0},
                       {70, 50, 90, 97, 61, 53, 1.0f, 1.5f, 0},
                       {130, 260, 40, 48, 264, 272, 2.0f, 0.0f, 0},
                       {130, 260, 40, 48, 264, 272, -1.0f, 0.25f, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_gemm_case(rt, &cases[i], NULL);
  tj_runtime_close(rt);
}
END_TEST

/* A, B, C one element past an allocation: 2-byte aligned only, so the
 * kernel must take its guarded loads and single stores. */
START_TEST(gemm_misaligned_on_a_stream)
{
  tj_runtime *rt = open_gpu();
  hipStream_t stream;
  CHECK_HIP(hipStreamCreate(&stream));
  gemm_case cases[] = {{67, 67, 67, 67, 67, 67, 1.0f, 0.0f, 1},
                       {128, 128, 128, 128, 128, 128, 1.0f, 0.5f, 1},
                       {200, 100, 300, 300, 100, 100, 1.0f, 0.0f, 1},
                       {200, 100, 300, 300, 100, 100, 1.0f, 0.0f, 0},
                       {1, 70, 300, 300, 70, 70, 1.0f, 0.0f, 1},
                       {4, 64, 129, 129, 64, 64, 1.0f, 0.5f, 1},
                       {16, 96, 200, 201, 97, 99, 1.0f, 0.0f, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_gemm_case(rt, &cases[i], stream);
  CHECK_HIP(hipStreamDestroy(stream));
  tj_runtime_close(rt);
}
END_TEST

/* The entry tj_gemm_f16 picks for g, asked with far-apart fake pointers
 * aligned as run_gemm_case's are (hipMalloc's 256 bytes, plus offset). */
static const char *gemm_case_entry(tj_runtime *rt, const gemm_case *g)
{
  const uint16_t *a = (const uint16_t *)((uintptr_t)1 << 40) + g->offset;
  const uint16_t *b = (const uint16_t *)((uintptr_t)2 << 40) + g->offset;
  const uint16_t *c = (const uint16_t *)((uintptr_t)3 << 40) + g->offset;
  const char *e = tj_gemm_f16_kernel(rt, g->M, g->N, g->K, a, g->lda, b,
                                     g->ldb, c, g->ldc);
  ck_assert_msg(e != NULL, "tj_gemm_f16_kernel: %s", tj_errmsg(rt));
  return e;
}

/* On an sm_90 device every case here takes the Hopper kernel (asserted):
 * M from 9 up, K below one 64-wide k-tile and past whole ones, M and N
 * past a tile by one, leading dimensions wider than the matrix (C's odd,
 * so its stores go one half at a time), K = 1 with lda = 8, issue 14's
 * shapes cut to what the oracle affords, and enough tiles for the
 * 128 x 256 entry.  Then the same code with A, B, C misaligned or lda not
 * a multiple of 8 falls back to gemm_f16.  Elsewhere all of it runs
 * gemm_f16 and must match the oracle just the same. */
START_TEST(gemm_hopper_path_shapes)
{
  tj_runtime *rt = open_gpu();
  int hopper = strcmp(tj_runtime_arch(rt), "sm_90") == 0;
  /* The plans fill this device's SMs (an H200's 132 only without one). */
  tj_device_info dev;
  ck_assert_int_eq(tj_device_get_info(0, &dev), TJ_OK);
  ck_assert_int_eq(rt->sms, dev.compute_units);
  static const gemm_case cases[] = {
      {17, 8, 8, 8, 8, 8, 1.0f, 0.0f, 0},
      {17, 24, 40, 40, 24, 24, 1.0f, 0.5f, 0},
      {129, 136, 72, 72, 136, 137, 1.0f, 0.0f, 0},
      {130, 264, 200, 208, 272, 270, -1.0f, 0.25f, 0},
      {255, 129, 1, 8, 136, 129, 1.0f, 0.0f, 0},
      {256, 256, 256, 256, 256, 256, 1.0f, 0.0f, 0},
      {1024, 1024, 1024, 1024, 1024, 1024, 1.0f, 0.0f, 0},
      {128, 4096, 512, 512, 4096, 4096, 1.0f, 0.0f, 0},
      {128, 1376, 4096, 4096, 1376, 1376, 1.0f, -1.0f, 0},
      {1536, 2816, 64, 64, 2816, 2816, 0.5f, -0.75f, 0},
      {1537, 2817, 200, 200, 2824, 2817, 1.0f, 0.0f, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *e = gemm_case_entry(rt, &cases[i]);
    if (hopper)
      ck_assert_msg(strncmp(e, "gemm_f16_f16_f16_nn_none_sm90a_", 31) == 0,
                    "case %zu: %s, not the Hopper kernel", i, e);
    run_gemm_case(rt, &cases[i], NULL);
  }
  if (hopper) {
    ck_assert_str_eq(gemm_case_entry(rt, &cases[9]),
                     "gemm_f16_f16_f16_nn_none_sm90a_128x256_persistent");
    ck_assert_str_eq(gemm_case_entry(rt, &cases[5]), "gemm_f16_f16_f16_nn_none_sm90a_128x64");
    ck_assert_str_eq(gemm_case_entry(rt, &cases[1]), "gemm_f16_f16_f16_nn_none_sm90a_128x128");
  }
  static const gemm_case fallbacks[] = {
      {256, 256, 256, 256, 256, 256, 1.0f, 0.0f, 1},
      {130, 264, 200, 204, 272, 270, 1.0f, 0.5f, 0},
      {130, 264, 200, 208, 268, 270, 1.0f, 0.0f, 0},
  };
  for (size_t i = 0; i < sizeof fallbacks / sizeof fallbacks[0]; i++) {
    ck_assert_str_eq(gemm_case_entry(rt, &fallbacks[i]), "gemm_f16");
    run_gemm_case(rt, &fallbacks[i], NULL);
  }
  tj_runtime_close(rt);
}
END_TEST

/* Forced Hopper entries at awkward shapes against the oracle: the
 * persistent ones (each block walks tiles, stages and barrier phases
 * carried from one tile to the next; grids from 1 block to all SMs) and
 * the narrow tile.  The epilogue through TMA is asked for
 * (TJ_GEMM_TMA_STORE=1), which it takes where beta == 0, C is 16-byte
 * aligned and N and ldc are multiples of 8: M past a tile by one or two
 * (boxes cut by M, a warpgroup's whole box below M), N past a tile by
 * 8 (a box cut by N), ldc past N (the padding and the rows after C must
 * stay as they were); N or ldc not a multiple of 8, or beta != 0, store
 * directly. */
static void hopper_forced_shapes(const char *tile, const char *persistent,
                                 const char *want)
{
  setenv("TJ_GEMM_SM90A_TILE", tile, 1);
  setenv("TJ_GEMM_PERSISTENT", persistent, 1);
  setenv("TJ_GEMM_SPLITK", "1", 1);
  setenv("TJ_GEMM_TMA_STORE", "1", 1);
  tj_runtime *rt = open_gpu();
  int hopper = strcmp(tj_runtime_arch(rt), "sm_90") == 0;
  static const gemm_case cases[] = {
      {17, 8, 8, 8, 8, 8, 1.0f, 0.0f, 0},
      {130, 264, 200, 208, 272, 270, -1.0f, 0.25f, 0},
      {255, 129, 1, 8, 136, 129, 1.0f, 0.0f, 0},
      {1024, 1024, 1024, 1024, 1024, 1024, 1.0f, 0.0f, 0},
      {128, 1376, 4096, 4096, 1376, 1376, 1.0f, -1.0f, 0},
      {1536, 2816, 64, 64, 2816, 2816, 0.5f, -0.75f, 0},
      {1537, 2817, 200, 200, 2824, 2817, 1.0f, 0.0f, 0},
      {1537, 2817, 200, 200, 2824, 2832, -2.0f, 0.0f, 0},
      {130, 264, 200, 208, 272, 272, 1.0f, 0.0f, 0},
      {2304, 4352, 520, 520, 4352, 4352, 1.0f, 0.0f, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *e = gemm_case_entry(rt, &cases[i]);
    if (hopper)
      ck_assert_msg(strcmp(e, want) == 0, "case %zu: %s, not %s", i, e, want);
    run_gemm_case(rt, &cases[i], NULL);
  }
  tj_runtime_close(rt);
  unsetenv("TJ_GEMM_SM90A_TILE");
  unsetenv("TJ_GEMM_PERSISTENT");
  unsetenv("TJ_GEMM_SPLITK");
  unsetenv("TJ_GEMM_TMA_STORE");
}

START_TEST(gemm_hopper_persistent_shapes)
{
  hopper_forced_shapes("128", "1", "gemm_f16_f16_f16_nn_none_sm90a_128x128_persistent");
  hopper_forced_shapes("256", "1", "gemm_f16_f16_f16_nn_none_sm90a_128x256_persistent");
}
END_TEST

/* The persistent 128 x 256 tile in multicast pairs (clusters of two
 * sharing B): one tile row (the pair's second tile wholly below M, so it
 * loads no A and stores nothing), odd tile row counts (1537: 13), and
 * more pairs than clusters (2304 x 4352: 153 pairs on 66 clusters), each
 * against the oracle. */
START_TEST(gemm_hopper_multicast_shapes)
{
  setenv("TJ_GEMM_MULTICAST", "1", 1);
  hopper_forced_shapes("256", "1", "gemm_f16_f16_f16_nn_none_sm90a_128x256_mc2");
  unsetenv("TJ_GEMM_MULTICAST");
}
END_TEST

/* The Hopper skinny kernel (M <= 16) at awkward shapes against the
 * oracle, for each split it is compiled for (TJ_GEMM_SPLITK forcing it,
 * the entry asserted on an sm_90 device) and the rule's: K = 1 and K
 * shorter than the split's k-tiles (ranks with nothing to add), N past a
 * 128-column strip by one, leading dimensions wider than the matrix (C's
 * odd), beta != 0, negative alpha, M from 1 to 16; then alpha == 0 with
 * NaN in A and B (neither read: C = beta * C).  Elsewhere the same calls
 * run the other kernels and must match just the same. */
START_TEST(gemm_hopper_skinny_shapes)
{
  /* TJ_GEMM_SPLITK, TJ_GEMM_SM90A_TILE, the entry (its prefix) */
  static const char *splits[][3] = {
      {"1", "128", "gemm_f16_f16_f16_nn_none_sm90a_skinny"},
      {"2", "128", "gemm_f16_f16_f16_nn_none_sm90a_skinny_k2"},
      {"3", "128", "gemm_f16_f16_f16_nn_none_sm90a_skinny_k3"},
      {"4", "128", "gemm_f16_f16_f16_nn_none_sm90a_skinny_k4"},
      {"8", "128", "gemm_f16_f16_f16_nn_none_sm90a_skinny_k8"},
      {"1", "256", "gemm_f16_f16_f16_nn_none_sm90a_skinny256"},
      {"2", "256", "gemm_f16_f16_f16_nn_none_sm90a_skinny256_k2"},
      {"3", "256", "gemm_f16_f16_f16_nn_none_sm90a_skinny256_k3"},
      {"4", "256", "gemm_f16_f16_f16_nn_none_sm90a_skinny256_k4"},
      {NULL, NULL, "gemm_f16_f16_f16_nn_none_sm90a_skinny"}};
  static const gemm_case cases[] = {
      {1, 8, 8, 8, 8, 8, 1.0f, 0.0f, 0},
      {16, 129, 1, 8, 136, 129, 1.0f, 0.0f, 0},
      {3, 136, 72, 72, 136, 137, 1.0f, 0.5f, 0},
      {16, 264, 200, 208, 272, 270, -1.0f, 0.25f, 0},
      {9, 1000, 1000, 1000, 1000, 1000, 1.0f, 0.0f, 0},
      {5, 4096, 4096, 4096, 4096, 4096, 1.0f, 0.0f, 0},
      {16, 11008, 520, 520, 11008, 11008, 0.5f, -0.75f, 0},
  };
  for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
    if (splits[s][0])
      setenv("TJ_GEMM_SPLITK", splits[s][0], 1); /* read at open */
    if (splits[s][1])
      setenv("TJ_GEMM_SM90A_TILE", splits[s][1], 1);
    tj_runtime *rt = open_gpu();
    unsetenv("TJ_GEMM_SPLITK");
    unsetenv("TJ_GEMM_SM90A_TILE");
    int hopper = strcmp(tj_runtime_arch(rt), "sm_90") == 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      const char *e = gemm_case_entry(rt, &cases[i]);
      if (hopper)
        ck_assert_msg(splits[s][0] ? strcmp(e, splits[s][2]) == 0
                                   : strncmp(e, splits[s][2],
                                             strlen(splits[s][2])) == 0,
                      "split %s, case %zu: %s, not %s", splits[s][0], i, e,
                      splits[s][2]);
      run_gemm_case(rt, &cases[i], NULL);
    }
    tj_runtime_close(rt);
  }
  /* alpha == 0 (2 strips of 128 columns: split 8, the most in flight). */
  check_alpha_zero_reads_no_operand(5, 136, 4096, "gemm_f16_f16_f16_nn_none_sm90a_skinny_k8");
}
END_TEST

/* TJ_GEMM_SM90A_TILE=64: the narrow tile, at the same shapes; 64k2: the
 * same tile with K split across a cluster of two blocks (K = 1 leaves the
 * second block of each pair nothing: it sends zeros). */
/* C = A * B (alpha 1, beta 0) on random M x N x K inputs, once on a
 * runtime opened with name=values[i] in the environment for each i (NULL:
 * unset), each run's C the same bits as the first's.  The inputs and the
 * last C come back in host memory for the caller to free. */
static void gemm_same_bits_under(int M, int N, int K, const char *name,
                                 const char *const *values, int runs,
                                 uint16_t **hA, uint16_t **hB, uint16_t **hC)
{
  size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
  uint16_t *A = xmalloc(na * 2), *B = xmalloc(nb * 2);
  uint16_t *first = xmalloc(nc * 2), *C = xmalloc(nc * 2);
  random_f16(A, na, -1, 1, (uint64_t)M * 7 + 21);
  random_f16(B, nb, -1, 1, (uint64_t)N * 3 + 22);
  /* A runtime held open across the runs' own: it makes the device's
   * context current before the first allocation (on NVIDIA, hipMalloc
   * with none current fails: "invalid device context") and keeps the
   * context, and so the buffers, alive between the runs' closes. */
  tj_runtime *hold = open_gpu();
  void *dA = gemm_to_device(A, na, 0), *dB = gemm_to_device(B, nb, 0);
  void *dC = dev_poisoned(nc * 2);
  for (int i = 0; i < runs; i++) {
    if (values[i])
      setenv(name, values[i], 1); /* read at open */
    tj_runtime *rt = open_gpu();
    unsetenv(name);
    CHECK_HIP(hipMemset(dC, 0xff, nc * 2));
    CHECK_TJ(rt, tj_gemm_f16(rt, NULL, M, N, K, 1.0f, dA, K, dB, N, 0.0f,
                             dC, N));
    CHECK_HIP(hipStreamSynchronize(NULL));
    get(i ? C : first, dC, nc * 2);
    tj_runtime_close(rt);
    ck_assert_msg(i == 0 || memcmp(first, C, nc * 2) == 0,
                  "%d x %d x %d: run %d (%s=%s) differs from the first", M, N,
                  K, i + 1, name, values[i] ? values[i] : "(unset)");
  }
  hipFree(dA);
  hipFree(dB);
  hipFree(dC);
  tj_runtime_close(hold);
  free(runs > 1 ? first : C);
  *hA = A;
  *hB = B;
  *hC = runs > 1 ? C : first;
}

/* B marked evict-first in L2 (the default; TJ_GEMM_EVICT_FIRST=0 turns
 * it off) changes where its lines go, never the result: the same bits as
 * without, and the oracle's values, on the skinny kernel's widths and a
 * cluster split (on an sm_90 device; elsewhere the other kernels, which
 * ignore it). */
START_TEST(gemm_hopper_skinny_evict_first_same_bits)
{
  static const int shapes[][3] = {{1, 4096, 4096}, {16, 11008, 520},
                                  {5, 264, 1000}};
  static const char *const values[] = {NULL, "0"};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    int M = shapes[i][0], N = shapes[i][1], K = shapes[i][2];
    uint16_t *A, *B, *C;
    gemm_same_bits_under(M, N, K, "TJ_GEMM_EVICT_FIRST", values, 2, &A, &B,
                         &C);
    gemm_case g = {M, N, K, K, N, N, 1.0f, 0.0f, 0};
    double *want = xmalloc((size_t)M * N * sizeof *want);
    tj__oracle_gemm(M, N, K, 1.0f, A, K, B, N, 0.0f, NULL, N, want);
    check_gemm_result(&g, C, want, "evict-first");
    free(A); free(B); free(C); free(want);
  }
}
END_TEST

/* On an sm_90 device, that M x N x K takes the Hopper skinny kernel. */
static void assert_hopper_skinny(tj_runtime *rt, int M, int N, int K,
                                 const void *a, int lda, const void *b,
                                 int ldb, void *c, int ldc)
{
  if (strcmp(tj_runtime_arch(rt), "sm_90") != 0)
    return;
  const char *e = tj_gemm_f16_kernel(rt, M, N, K, a, lda, b, ldb, c, ldc);
  ck_assert_msg(e && strncmp(e, "gemm_f16_f16_f16_nn_none_sm90a_skinny", 37) == 0,
                "%d x %d x %d runs %s", M, N, K, e);
}

/* The early-start chain's first GEMM, X (16 x 4096) = A0 * B0 (B0 11008
 * x 4096, 90 MB), and the buffers of both. */
enum { EARLY_M = 16, EARLY_K1 = 11008, EARLY_K = 4096 };
typedef struct early_chain {
  tj_runtime *rt;
  void *A0, *B0, *X, *Y;
} early_chain;

/* NaN in X and Y, X = A0 * B0, then Y = a * b (16 x n x k, X one of
 * them) behind it on the same stream; X and Y back in host memory. */
static void early_chain_run(const early_chain *c, int n, int k, const void *a,
                            int lda, const void *b, int ldb, uint16_t *X,
                            uint16_t *Y)
{
  size_t nx = (size_t)EARLY_M * EARLY_K, ny = (size_t)EARLY_M * n;
  CHECK_HIP(hipMemset(c->X, 0xff, nx * 2));
  CHECK_HIP(hipMemset(c->Y, 0xff, ny * 2));
  CHECK_TJ(c->rt, tj_gemm_f16(c->rt, NULL, EARLY_M, EARLY_K, EARLY_K1, 1.0f,
                              c->A0, EARLY_K1, c->B0, EARLY_K, 0.0f, c->X,
                              EARLY_K));
  CHECK_TJ(c->rt, tj_gemm_f16(c->rt, NULL, EARLY_M, n, k, 1.0f, a, lda, b,
                              ldb, 0.0f, c->Y, n));
  CHECK_HIP(hipStreamSynchronize(NULL));
  get(X, c->X, nx * 2);
  get(Y, c->Y, ny * 2);
}

/* The Hopper skinny kernel launched to start early (programmatic
 * dependent launch, the default), both GEMMs of a chain where the
 * second's A is the first's C: 16 x 4096 out of a 90 MB B, long enough
 * that the second's blocks start while the first runs, and NaN until the
 * first writes it, so that a read too soon would show in the second's
 * result.  Three times, each against the oracle on what the first wrote
 * and the same bits as a plain launch (TJ_GEMM_PDL=0) of the second on
 * it; then the first GEMM writing the second's B instead.  Elsewhere (not
 * sm_90) the same calls run other kernels and must match just the same. */
START_TEST(gemm_hopper_skinny_early_launch_waits)
{
  enum { M = EARLY_M, K1 = EARLY_K1, K = EARLY_K, N = 4096 };
  size_t na = (size_t)M * K1, nb0 = (size_t)K1 * K, nx = (size_t)M * K;
  size_t nb1 = (size_t)K * N, ny = (size_t)M * N;
  uint16_t *A0 = xmalloc(na * 2), *B0 = xmalloc(nb0 * 2);
  uint16_t *B1 = xmalloc(nb1 * 2), *A1 = xmalloc(M * M * 2);
  uint16_t *X = xmalloc(nx * 2), *Y = xmalloc(ny * 2);
  uint16_t *plain_y = xmalloc(ny * 2);
  double *want = xmalloc(ny * sizeof *want);
  /* B0 in [-1/32, 1/32]: X of order 1, so that Y's sums (of order 20)
   * keep within the oracle's tolerance. */
  random_f16(A0, na, -1, 1, 31);
  random_f16(B0, nb0, -0.03125, 0.03125, 32);
  random_f16(B1, nb1, -1, 1, 33);
  random_f16(A1, (size_t)M * M, -1, 1, 34);
  tj_runtime *rt = open_gpu();
  setenv("TJ_GEMM_PDL", "0", 1); /* read at open */
  tj_runtime *plain = open_gpu();
  unsetenv("TJ_GEMM_PDL");
  early_chain c = {rt, gemm_to_device(A0, na, 0), gemm_to_device(B0, nb0, 0),
                   dev_poisoned(nx * 2), dev_poisoned(ny * 2)};
  void *dB1 = gemm_to_device(B1, nb1, 0), *dA1 = gemm_to_device(A1, M * M, 0);
  assert_hopper_skinny(rt, M, K, K1, c.A0, K1, c.B0, K, c.X, K);
  assert_hopper_skinny(rt, M, N, K, c.X, K, dB1, N, c.Y, N);
  assert_hopper_skinny(rt, M, K, M, dA1, M, c.X, K, c.Y, K);
  gemm_case g = {M, N, K, K, N, N, 1.0f, 0.0f, 0};
  gemm_case gb = {M, K, M, M, K, K, 1.0f, 0.0f, 0};
  for (int r = 0; r < 3; r++) {
    /* The second GEMM's A is the first's C. */
    early_chain_run(&c, N, K, c.X, K, dB1, N, X, Y);
    tj__oracle_gemm(M, N, K, 1.0, X, K, B1, N, 0.0, NULL, N, want);
    check_gemm_result(&g, Y, want, "launched early behind the GEMM that "
                      "writes its A");
    CHECK_TJ(plain, tj_gemm_f16(plain, NULL, M, N, K, 1.0f, c.X, K, dB1, N,
                                0.0f, c.Y, N));
    CHECK_HIP(hipStreamSynchronize(NULL));
    get(plain_y, c.Y, ny * 2);
    ck_assert_msg(memcmp(Y, plain_y, ny * 2) == 0,
                  "run %d: the early launch's C differs from the plain one's",
                  r + 1);
    /* The second GEMM's B is the first's C: 16 x 4096 x 16, started
     * while the first (which lets its dependents start at once) still
     * writes it. */
    early_chain_run(&c, K, M, dA1, M, c.X, K, X, Y);
    tj__oracle_gemm(M, K, M, 1.0, A1, M, X, K, 0.0, NULL, K, want);
    check_gemm_result(&gb, Y, want, "launched early behind the GEMM that "
                      "writes its B");
  }
  hipFree(c.A0);
  hipFree(c.B0);
  hipFree(c.X);
  hipFree(c.Y);
  hipFree(dB1);
  hipFree(dA1);
  tj_runtime_close(plain);
  tj_runtime_close(rt);
  free(A0); free(B0); free(B1); free(A1); free(X); free(Y); free(plain_y);
  free(want);
}
END_TEST

/* A graph's GEMMs: X = A0 * B0 and Y = X * B1 (the early-start chain's
 * first two, skinny, the second started early behind the first), and
 * Z = P * B1 (128 rows: the tiles), all on stream s. */
typedef struct graph_gemms {
  early_chain c;
  void *B1, *P, *Z;
} graph_gemms;
enum { GRAPH_M = 128 };

static void graph_gemms_on(tj_runtime *rt, const graph_gemms *g, hipStream_t s)
{
  enum { M = EARLY_M, K1 = EARLY_K1, K = EARLY_K };
  CHECK_TJ(rt, tj_gemm_f16(rt, s, M, K, K1, 1.0f, g->c.A0, K1, g->c.B0, K,
                           0.0f, g->c.X, K));
  CHECK_TJ(rt, tj_gemm_f16(rt, s, M, K, K, 1.0f, g->c.X, K, g->B1, K, 0.0f,
                           g->c.Y, K));
  CHECK_TJ(rt, tj_gemm_f16(rt, s, GRAPH_M, K, K, 1.0f, g->P, K, g->B1, K,
                           0.0f, g->Z, K));
}

/* X, Y and Z poisoned, then the graph run once on s; their bits back. */
static void graph_replay(const graph_gemms *g, hipGraphExec_t exec,
                         hipStream_t s, uint16_t *X, uint16_t *Y, uint16_t *Z)
{
  size_t nx = (size_t)EARLY_M * EARLY_K, nz = (size_t)GRAPH_M * EARLY_K;
  CHECK_HIP(hipMemset(g->c.X, 0xff, nx * 2));
  CHECK_HIP(hipMemset(g->c.Y, 0xff, nx * 2));
  CHECK_HIP(hipMemset(g->Z, 0xff, nz * 2));
  CHECK_HIP(hipGraphLaunch(exec, s));
  CHECK_HIP(hipStreamSynchronize(s));
  get(X, g->c.X, nx * 2);
  get(Y, g->c.Y, nx * 2);
  get(Z, g->Z, nz * 2);
}

/* The GEMMs captured into a graph, as inference programs run their
 * layers, and the graph replayed: every replay writes the bits the same
 * calls write on a stream, the skinny kernel's early start included (the
 * driver records it as a programmatic edge).  Captured twice, in the
 * strict (global) mode: by a runtime that has run these GEMMs before,
 * the usual warm-up, and by one whose first calls they are, on a cache
 * of its own, so that the compiles and loads happen during the capture. */
START_TEST(gemm_captured_into_a_graph)
{
  enum { M = EARLY_M, K1 = EARLY_K1, K = EARLY_K };
  size_t na = (size_t)M * K1, nb0 = (size_t)K1 * K, nx = (size_t)M * K;
  size_t nb1 = (size_t)K * K, np = (size_t)GRAPH_M * K;
  uint16_t *A0 = xmalloc(na * 2), *B0 = xmalloc(nb0 * 2);
  uint16_t *B1 = xmalloc(nb1 * 2), *P = xmalloc(np * 2);
  uint16_t *X = xmalloc(nx * 2), *Y = xmalloc(nx * 2), *Z = xmalloc(np * 2);
  uint16_t *X0 = xmalloc(nx * 2), *Y0 = xmalloc(nx * 2), *Z0 = xmalloc(np * 2);
  double *want = xmalloc(np * sizeof *want);
  random_f16(A0, na, -1, 1, 41);
  random_f16(B0, nb0, -0.03125, 0.03125, 42); /* X of order 1 */
  random_f16(B1, nb1, -1, 1, 43);
  random_f16(P, np, -1, 1, 44);
  tj_runtime *rt = open_gpu();
  graph_gemms g = {{rt, gemm_to_device(A0, na, 0), gemm_to_device(B0, nb0, 0),
                    dev_poisoned(nx * 2), dev_poisoned(nx * 2)},
                   gemm_to_device(B1, nb1, 0), gemm_to_device(P, np, 0),
                   dev_poisoned(np * 2)};
  hipStream_t s;
  CHECK_HIP(hipStreamCreate(&s));
  /* The calls on the stream: what every replay must write. */
  graph_gemms_on(rt, &g, s);
  CHECK_HIP(hipStreamSynchronize(s));
  get(X0, g.c.X, nx * 2);
  get(Y0, g.c.Y, nx * 2);
  get(Z0, g.Z, np * 2);
  gemm_case gy = {M, K, K, K, K, K, 1.0f, 0.0f, 0};
  gemm_case gz = {GRAPH_M, K, K, K, K, K, 1.0f, 0.0f, 0};
  tj__oracle_gemm(M, K, K, 1.0, X0, K, B1, K, 0.0, NULL, K, want);
  check_gemm_result(&gy, Y0, want, "on a stream, behind the GEMM that "
                    "writes its A");
  tj__oracle_gemm(GRAPH_M, K, K, 1.0, P, K, B1, K, 0.0, NULL, K, want);
  check_gemm_result(&gz, Z0, want, "on a stream");
  char *dir = test_tmpdir(), *cache = test_path(dir, "first-use.db");
  tj_options o = {0};
  o.cache_path = cache;
  tj_runtime *first = NULL;
  int rc = tj_runtime_open(&first, &o);
  ck_assert_msg(rc == TJ_OK, "open: %s", tj_errmsg(first));
  tj_runtime *by[2] = {rt, first};
  const char *who[2] = {"warmed up", "first use"};
  for (int i = 0; i < 2; i++) {
    hipGraph_t graph;
    hipGraphExec_t exec;
    CHECK_HIP(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
    graph_gemms_on(by[i], &g, s);
    CHECK_HIP(hipStreamEndCapture(s, &graph));
    CHECK_HIP(hipGraphInstantiateWithFlags(&exec, graph, 0));
    for (int r = 0; r < 3; r++) {
      graph_replay(&g, exec, s, X, Y, Z);
      ck_assert_msg(memcmp(X, X0, nx * 2) == 0 && memcmp(Y, Y0, nx * 2) == 0 &&
                        memcmp(Z, Z0, np * 2) == 0,
                    "%s, replay %d: the graph's C differs from the stream's "
                    "(X %d, Y %d, Z %d)", who[i], r + 1,
                    memcmp(X, X0, nx * 2) != 0, memcmp(Y, Y0, nx * 2) != 0,
                    memcmp(Z, Z0, np * 2) != 0);
    }
    CHECK_HIP(hipGraphExecDestroy(exec));
    CHECK_HIP(hipGraphDestroy(graph));
  }
  printf("gemm: %d x %d x %d, %d x %d x %d and %d x %d x %d captured into a "
         "graph, warmed up and on first use: 3 replays each, the stream's "
         "bits\n", M, K, K1, M, K, K, GRAPH_M, K, K);
  CHECK_HIP(hipStreamDestroy(s));
  hipFree(g.c.A0); hipFree(g.c.B0); hipFree(g.c.X); hipFree(g.c.Y);
  hipFree(g.B1); hipFree(g.P); hipFree(g.Z);
  tj_runtime_close(first);
  tj_runtime_close(rt);
  free(cache); free(dir);
  free(A0); free(B0); free(B1); free(P); free(X); free(Y); free(Z);
  free(X0); free(Y0); free(Z0); free(want);
}
END_TEST

START_TEST(gemm_hopper_narrow_tile_shapes)
{
  hopper_forced_shapes("64", "0", "gemm_f16_f16_f16_nn_none_sm90a_128x64");
  hopper_forced_shapes("64k2", "0", "gemm_f16_f16_f16_nn_none_sm90a_128x64_cluster_k2");
  /* Twice, the same bits: each element's sums are added in rank order. */
  static const char *const k2[] = {"64k2", "64k2"};
  uint16_t *A, *B, *C;
  gemm_same_bits_under(128, 4096, 4096, "TJ_GEMM_SM90A_TILE", k2, 2, &A, &B,
                       &C);
  free(A); free(B); free(C);
}
END_TEST

/* The same product twice gives the same bits (a race between the
 * producer and the consumers would show as noise between runs), the
 * epilogue through TMA (TJ_GEMM_TMA_STORE=1) and the one straight from
 * the accumulators (=0) the same bits again, and TJ_GEMM_SM90A=0 sends
 * the same call to gemm_f16. */
START_TEST(gemm_hopper_is_deterministic_and_switchable)
{
  static const char *const values[] = {NULL, NULL, "1", "0"};
  uint16_t *A, *B, *C;
  gemm_same_bits_under(512, 768, 1000, "TJ_GEMM_TMA_STORE", values, 4, &A, &B,
                       &C);
  free(A); free(B); free(C);
  gemm_case g = {512, 768, 1000, 1000, 768, 768, 1.0f, 0.0f, 0};
  setenv("TJ_GEMM_SM90A", "0", 1); /* read at open */
  tj_runtime *rt = open_gpu();
  unsetenv("TJ_GEMM_SM90A");
  ck_assert_str_eq(gemm_case_entry(rt, &g), "gemm_f16");
  tj_runtime_close(rt);
}
END_TEST

/* rt closed and a GPU runtime opened in its place, with TJ_GEMM_SPLITK
 * (read at open) set to force, or unset where force is NULL. */
static tj_runtime *reopen_with_split(tj_runtime *rt, const char *force)
{
  if (force)
    setenv("TJ_GEMM_SPLITK", force, 1);
  else
    unsetenv("TJ_GEMM_SPLITK");
  return test_reopen(rt, open_gpu());
}

/* tj_gemm_f16_split for g, asked as gemm_case_entry asks. */
static int gemm_case_split(tj_runtime *rt, const gemm_case *g)
{
  const uint16_t *a = (const uint16_t *)((uintptr_t)1 << 40) + g->offset;
  const uint16_t *b = (const uint16_t *)((uintptr_t)2 << 40) + g->offset;
  const uint16_t *c = (const uint16_t *)((uintptr_t)3 << 40) + g->offset;
  int split = tj_gemm_f16_split(rt, g->M, g->N, g->K, a, g->lda, b, g->ldb,
                                c, g->ldc);
  ck_assert_msg(split > 0, "tj_gemm_f16_split: %s", tj_errmsg(rt));
  return split;
}

/* ------------------------------------------------------- skinny, tensor cores */

/* Does tj_gemm_f16 take the tensor-core skinny path on this device
 * (NVIDIA sm_80 or later)? */
static int skinny_tc_device(tj_runtime *rt)
{
  const char *arch = tj_runtime_arch(rt);
  return strncmp(arch, "sm_", 3) == 0 && strtol(arch + 3, NULL, 10) >= 80;
}

/* The tensor-core skinny path at awkward shapes against the oracle, for
 * each M in {1, 2, 3, 5, 9, 15, 16}: K = 1; odd N with K not a multiple
 * of the 64-row stage and beta != 0; lda > K, ldb > N, ldc > N (C's
 * padding must stay as it was); A, B, C one element past an allocation
 * (2-byte aligned, the slow copies).  On an sm_80+ device the entry is
 * asserted (TJ_GEMM_SKINNY_TC=1: the rule gives 1 row and narrow 9 to 16
 * rows to other kernels); elsewhere the same calls run the other kernels. */
static const int skinny_rows[] = {1, 2, 3, 5, 9, 15, 16};
#define N_SKINNY_ROWS (sizeof skinny_rows / sizeof skinny_rows[0])

START_TEST(gemm_skinny_tc_shapes)
{
  /* the tensor-core path wherever it can run (read at open) */
  setenv("TJ_GEMM_SKINNY_TC", "1", 1);
  setenv("TJ_GEMM_SKINNY_SM90A", "0", 1); /* not the Hopper skinny kernel */
  tj_runtime *rt = open_gpu();
  int tc = skinny_tc_device(rt);
  int M = skinny_rows[_i];
  hipStream_t stream;
  CHECK_HIP(hipStreamCreate(&stream));
  const gemm_case cases[] = {
      {M, 33, 1, 1, 33, 33, 1.0f, 0.0f, 0},
      {M, 1001, 257, 257, 1001, 1001, 1.0f, 0.5f, 0},
      {M, 95, 130, 137, 101, 99, -1.0f, 0.0f, 0},
      {M, 67, 300, 300, 67, 67, 1.0f, 0.25f, 1},
      {M, 7, 1000, 1001, 9, 11, 0.5f, -1.0f, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (tc) {
      ck_assert_str_eq(gemm_case_entry(rt, &cases[i]), "gemm_skinny_f16_tc_n32");
      ck_assert_int_eq(gemm_case_split(rt, &cases[i]), 1);
    }
    run_gemm_case(rt, &cases[i], i % 2 ? stream : NULL);
  }
  CHECK_HIP(hipStreamDestroy(stream));
  tj_runtime_close(rt);
  unsetenv("TJ_GEMM_SKINNY_TC");
  unsetenv("TJ_GEMM_SKINNY_SM90A");
}
END_TEST

/* Its split-K and its 64-column entry against the oracle: the heuristic's
 * splits (32 strips of 32 columns: 5 parts; 16 strips, K = 3000 misaligned:
 * 5), forced ones (TJ_GEMM_SPLITK) with K not a multiple of the parts
 * (5 asked of 700 rows gives 4 parts of 192),
 * alpha == 0 and beta over the partials, and strips of 64 columns once
 * there are 132 of them, aligned and not (the plans checked on an H200's
 * 132 SMs). */
START_TEST(gemm_skinny_tc_split_and_wide_shapes)
{
  /* the tensor-core path wherever it can run (read at open) */
  setenv("TJ_GEMM_SKINNY_TC", "1", 1);
  setenv("TJ_GEMM_SKINNY_SM90A", "0", 1); /* not the Hopper skinny kernel */
  tj_runtime *rt = open_gpu();
  int tc = skinny_tc_device(rt) && gpu_has_h200_sms(rt);
  hipStream_t stream;
  CHECK_HIP(hipStreamCreate(&stream));
  static const struct {
    gemm_case g;
    const char *force, *entry;
    int split;
  } cases[] = {
      {{4, 1024, 4096, 4096, 1024, 1024, 1.0f, 0.0f, 0}, NULL, "gemm_skinny_f16_tc_n32", 5},
      {{16, 500, 3000, 3001, 503, 505, 1.0f, -0.5f, 1}, NULL, "gemm_skinny_f16_tc_n32", 5},
      {{3, 77, 1000, 1003, 80, 79, 0.5f, 0.5f, 0}, "4", "gemm_skinny_f16_tc_n32", 4},
      {{15, 40, 130, 136, 41, 40, 1.0f, 0.0f, 1}, "3", "gemm_skinny_f16_tc_n32", 3},
      {{9, 100, 700, 700, 100, 100, 0.0f, 0.75f, 0}, "5", "gemm_skinny_f16_tc_n32", 4},
      {{1, 8448, 200, 200, 8448, 8448, 1.0f, 0.0f, 0}, NULL, "gemm_skinny_f16_tc_n64", 1},
      {{16, 8500, 70, 72, 8504, 8501, 1.0f, 0.5f, 1}, NULL, "gemm_skinny_f16_tc_n64", 1},
      {{5, 8449, 300, 300, 8449, 8449, -1.0f, 0.0f, 0}, "2", "gemm_skinny_f16_tc_n64", 2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (cases[i].force)
      rt = reopen_with_split(rt, cases[i].force);
    if (tc) {
      ck_assert_str_eq(gemm_case_entry(rt, &cases[i].g), cases[i].entry);
      ck_assert_int_eq(gemm_case_split(rt, &cases[i].g), cases[i].split);
    }
    run_gemm_case(rt, &cases[i].g, i % 2 ? stream : NULL);
    if (cases[i].force)
      rt = reopen_with_split(rt, NULL);
  }
  CHECK_HIP(hipStreamDestroy(stream));
  tj_runtime_close(rt);
  unsetenv("TJ_GEMM_SKINNY_TC");
  unsetenv("TJ_GEMM_SKINNY_SM90A");
}
END_TEST

/* alpha == 0 reads neither A nor B, split or not: NaN in both (and in C
 * with beta == 0) must give beta * C, or +0.  (Where 9 and 16 rows take
 * the tiled kernel, which computes A * B even then, only M = 1 runs.) */
START_TEST(gemm_skinny_tc_alpha_zero_reads_no_operand)
{
  /* the tensor-core path wherever it can run (read at open) */
  setenv("TJ_GEMM_SKINNY_TC", "1", 1);
  setenv("TJ_GEMM_SKINNY_SM90A", "0", 1); /* not the Hopper skinny kernel */
  tj_runtime *rt = open_gpu();
  int tc = skinny_tc_device(rt);
  const int N = 70, K = 300;
  static const int rows[] = {1, 9, 16};
  static const char *forces[] = {NULL, "3"};
  uint16_t C0[16 * 70], C[16 * 70];
  for (int f = 0; f < 2; f++)
    for (int r = 0; r < 3; r++)
      for (int with_c = 0; with_c < 2; with_c++) {
        int M = rows[r];
        if (!tc && M > 8)
          continue;
        float beta = with_c ? 0.5f : 0.0f;
        if (forces[f])
          rt = reopen_with_split(rt, forces[f]);
        random_f16(C0, (size_t)M * N, -1, 1, 17);
        void *dA = dev_poisoned((size_t)M * K * 2), *dB = dev_poisoned((size_t)K * N * 2);
        void *dC = dev_poisoned((size_t)M * N * 2);
        if (with_c)
          put(dC, C0, (size_t)M * N * 2);
        CHECK_TJ(rt, tj_gemm_f16(rt, NULL, M, N, K, 0.0f, dA, K, dB, N, beta, dC, N));
        CHECK_HIP(hipDeviceSynchronize());
        get(C, dC, (size_t)M * N * 2);
        if (forces[f])
          rt = reopen_with_split(rt, NULL);
        for (int i = 0; i < M * N; i++) {
          uint16_t want = with_c ? tj_f32_to_f16(0.5f * tj_f16_to_f32(C0[i])) : 0;
          ck_assert_msg(C[i] == want, "M=%d split %s beta %g: C[%d] = 0x%04x, want 0x%04x",
                        M, forces[f] ? forces[f] : "heuristic", beta, i, C[i], want);
        }
        hipFree(dA);
        hipFree(dB);
        hipFree(dC);
      }
  tj_runtime_close(rt);
  unsetenv("TJ_GEMM_SKINNY_TC");
  unsetenv("TJ_GEMM_SKINNY_SM90A");
}
END_TEST

/* A * B (M x N x K, A and B random from seed and seed + 1) three times,
 * into C poisoned each time: twice as rt plans it, which must give the
 * same bits, then unsplit (TJ_GEMM_SPLITK=1, read at open), within the
 * oracle's bounds of the first (a different order of sums).  rt is
 * reopened for the third: the runtime to use and close after. */
static tj_runtime *split_is_deterministic_and_near_unsplit(tj_runtime *rt,
                                                           int M, int N, int K,
                                                           uint64_t seed)
{
  size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
  uint16_t *A = xmalloc(na * 2), *B = xmalloc(nb * 2);
  uint16_t *C[3] = {xmalloc(nc * 2), xmalloc(nc * 2), xmalloc(nc * 2)};
  random_f16(A, na, -1, 1, seed);
  random_f16(B, nb, -1, 1, seed + 1);
  void *dA = gemm_to_device(A, na, 0), *dB = gemm_to_device(B, nb, 0);
  void *dC = dev_poisoned(nc * 2);
  for (int rep = 0; rep < 3; rep++) {
    if (rep == 2)
      rt = reopen_with_split(rt, "1");
    CHECK_HIP(hipMemset(dC, 0xff, nc * 2));
    CHECK_TJ(rt, tj_gemm_f16(rt, NULL, M, N, K, 1.0f, dA, K, dB, N, 0.0f, dC, N));
    CHECK_HIP(hipStreamSynchronize(NULL));
    get(C[rep], dC, nc * 2);
  }
  rt = reopen_with_split(rt, NULL);
  ck_assert_msg(memcmp(C[0], C[1], nc * 2) == 0, "%dx%dx%d: two runs differ", M, N, K);
  for (size_t i = 0; i < nc; i++) {
    double a = tj_f16_to_f32(C[0][i]), b = tj_f16_to_f32(C[2][i]);
    ck_assert_msg(fabs(a - b) <= 0x1p-9 * fabs(b) + 2e-3,
                  "%dx%dx%d: C[%zu]: split %g, unsplit %g", M, N, K, i, a, b);
  }
  hipFree(dA);
  hipFree(dB);
  hipFree(dC);
  free(A); free(B); free(C[0]); free(C[1]); free(C[2]);
  return rt;
}

/* The same product twice gives the same bits, unsplit (16 x 4096 x 4096,
 * issue 14's shape) and split (16 x 1024 x 4096: 5 parts); and the split
 * result is within the oracle's bounds of the unsplit one
 * (TJ_GEMM_SPLITK=1), a different order of sums. */
START_TEST(gemm_skinny_tc_is_deterministic)
{
  /* the tensor-core path wherever it can run (read at open) */
  setenv("TJ_GEMM_SKINNY_TC", "1", 1);
  setenv("TJ_GEMM_SKINNY_SM90A", "0", 1); /* not the Hopper skinny kernel */
  tj_runtime *rt = open_gpu();
  static const int shapes[][3] = {{16, 4096, 4096}, {16, 1024, 4096}};
  for (int s = 0; s < 2; s++) {
    int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
    gemm_case g = {M, N, K, K, N, N, 1.0f, 0.0f, 0};
    if (skinny_tc_device(rt) && (s == 0 || gpu_has_h200_sms(rt)))
      ck_assert_int_eq(gemm_case_split(rt, &g), s == 0 ? 1 : 5);
    rt = split_is_deterministic_and_near_unsplit(rt, M, N, K, 41);
  }
  tj_runtime_close(rt);
  unsetenv("TJ_GEMM_SKINNY_TC");
  unsetenv("TJ_GEMM_SKINNY_SM90A");
}
END_TEST

/* Split-K against the oracle: the shapes the heuristic splits (issue 14's
 * 16 x 4096 x 4096 with one row more, since 16 rows take the skinny
 * tensor-core path, 128 x 4096 x 11008 cut to 512 columns, odd M, N and
 * leading dimensions), then forced splits (TJ_GEMM_SPLITK) where K is not
 * a multiple of split * 64, K < split * 64 (empty K-ranges), alpha == 0,
 * beta == 0 over NaN-poisoned C and beta != 0, on a stream of its own. */
START_TEST(gemm_split_k_shapes)
{
  tj_runtime *rt = open_gpu();
  int hopper = strcmp(tj_runtime_arch(rt), "sm_90") == 0;
  hipStream_t stream;
  CHECK_HIP(hipStreamCreate(&stream));
  static const struct {
    gemm_case g;
    const char *force;
    int split;
  } cases[] = {
      {{17, 4096, 4096, 4096, 4096, 4096, 1.0f, 0.0f, 0}, NULL, 4},
      {{128, 512, 11008, 11008, 512, 512, 1.0f, 0.5f, 0}, NULL, 10},
      {{130, 1000, 2048, 2056, 1008, 1001, -1.0f, 0.25f, 0}, NULL, 2},
      {{129, 136, 200, 208, 136, 137, 1.0f, 0.0f, 0}, "3", 2},
      {{17, 8, 8, 8, 8, 8, 1.0f, 0.0f, 0}, "7", 7},
      {{255, 129, 1000, 1000, 136, 129, 0.0f, 0.5f, 0}, "5", 4},
      {{17, 33, 700, 704, 40, 35, 1.0f, 0.0f, 0}, "4", 4},
      {{33, 100, 130, 136, 104, 100, 1.0f, -0.5f, 0}, "64", 64},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (cases[i].force)
      rt = reopen_with_split(rt, cases[i].force);
    if (hopper && (cases[i].force || gpu_has_h200_sms(rt))) {
      ck_assert_str_eq(gemm_case_entry(rt, &cases[i].g),
                       "gemm_f16_f16_f16_nn_none_sm90a_128x128_splitk");
      ck_assert_int_eq(gemm_case_split(rt, &cases[i].g), cases[i].split);
    }
    run_gemm_case(rt, &cases[i].g, i % 2 ? stream : NULL);
    if (cases[i].force)
      rt = reopen_with_split(rt, NULL);
  }
  CHECK_HIP(hipStreamDestroy(stream));
  tj_runtime_close(rt);
}
END_TEST

/* Split-K sums its partials in one fixed order: the same bits twice, and
 * (a different order of sums) within the oracle's bounds of the unsplit
 * result, which TJ_GEMM_SPLITK=1 asks for. */
START_TEST(gemm_split_k_is_deterministic)
{
  tj_runtime *rt = open_gpu();
  gemm_case g = {128, 1024, 4096, 4096, 1024, 1024, 1.0f, 0.0f, 0};
  if (strcmp(tj_runtime_arch(rt), "sm_90") == 0)
    ck_assert_int_eq(gemm_case_split(rt, &g), 4);
  rt = split_is_deterministic_and_near_unsplit(rt, g.M, g.N, g.K, 31);
  tj_runtime_close(rt);
}
END_TEST

START_TEST(gemm_host_call)
{
  tj_runtime *rt = open_gpu();
  static const int shapes[][3] = {{1, 1, 1}, {17, 33, 65}, {300, 200, 100}};
  for (int s = 0; s < 3; s++) {
    int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
    for (int with_c = 0; with_c < 2; with_c++) {
      gemm_case g = {M, N, K, K, N, N, 1.0f, with_c ? -1.25f : 0.0f, 0};
      size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
      uint16_t *A = xmalloc(na * 2), *B = xmalloc(nb * 2);
      uint16_t *C0 = xmalloc(nc * 2), *C = xmalloc(nc * 2);
      double *want = xmalloc(nc * sizeof *want);
      random_f16(A, na, -1, 1, 11);
      random_f16(B, nb, -1, 1, 12);
      random_f16(C0, nc, -1, 1, 13);
      memcpy(C, C0, nc * 2);
      CHECK_TJ(rt, tj_gemm_f16_host(rt, M, N, K, g.alpha, A, B, g.beta, C));
      tj__oracle_gemm(M, N, K, g.alpha, A, K, B, N, g.beta, C0, N, want);
      check_gemm_result(&g, C, want, with_c ? "gemm host beta" : "gemm host");
      free(A); free(B); free(C0); free(C); free(want);
    }
  }
  tj_runtime_close(rt);
}
END_TEST

/* ------------------------------------------------------- the family */

/* n values of type t, random in [-1, 1) (rounded to t), at host p. */
static void random_typed(void *p, int t, size_t n, uint64_t seed)
{
  for (size_t i = 0; i < n; i++) {
    float v = (float)((double)(next_random(&seed) >> 11) * 0x1p-52 - 1);
    if (t == TJ_DTYPE_F32)
      ((float *)p)[i] = v;
    else
      ((uint16_t *)p)[i] = t == TJ_DTYPE_F16 ? tj_f32_to_f16(v)
                                             : tj_f32_to_bf16(v);
  }
}

static size_t type_bytes(int t)
{
  return t == TJ_DTYPE_F32 ? 4 : 2;
}

/* got (rows x cols, leading dimension ld, type t) against want (dense):
 * each within rel of its magnitude plus rel of the largest, rel set by
 * the precision of type of (the bias gradient sums C as stored). */
static void check_typed(const char *what, const void *got, int t, long long ld,
                        const double *want, long long rows, long long cols,
                        int of, const char *config)
{
  double rel = of == TJ_DTYPE_F32 ? 0x1p-18 : of == TJ_DTYPE_F16 ? 0x1p-9 : 0x1p-7;
  double big = 0;
  for (long long i = 0; i < rows * cols; i++)
    big = fmax(big, fabs(want[i]));
  for (long long m = 0; m < rows; m++)
    for (long long n = 0; n < cols; n++) {
      double g = tj__dtype_load(got, t, (size_t)(m * ld + n));
      double w = want[m * cols + n];
      ck_assert_msg(fabs(g - w) <= rel * (fabs(w) + big),
                    "%s: %s[%lld][%lld] = %.9g, want %.9g", config, what, m, n,
                    g, w);
    }
}

typedef struct family_case {
  int ab, c, ta, tb, epi;
} family_case;

/* How a call's operands lie: odd paddings past each row and beta != 0
 * (the portable kernel takes those), or rows a multiple of 8 elements
 * apart, as the Hopper kernel's tensor maps want them, with beta 0 (C
 * then goes out through TMA where it is 16-bit) or not; or dense (each
 * leading dimension its stored row, beta != 0). */
typedef enum family_layout {
  FAMILY_ODD,
  FAMILY_TMA_BETA,
  FAMILY_TMA_STORE,
  FAMILY_DENSE
} family_layout;

/* One call of c's configuration at m x n x k, leading dimensions padded
 * as layout says, on a stream, against the oracle: C, aux where written,
 * and the bias gradient.  With the Hopper layouts on an sm_90 device, the
 * call must have run on the Hopper kernel. */
static void run_family_as(tj_runtime *rt, const family_case *fc, long long M,
                          long long N, long long K, uint64_t seed,
                          family_layout layout)
{
  tj_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.size = sizeof d;
  d.a_type = d.b_type = fc->ab, d.c_type = fc->c;
  d.trans_a = fc->ta, d.trans_b = fc->tb, d.epilogue = fc->epi;
  d.m = M, d.n = N, d.k = K, d.alpha = 1.5f;
  d.beta = layout == FAMILY_TMA_STORE ? 0.0f : 0.5f;
  if (layout == FAMILY_ODD) {
    d.lda = (fc->ta ? M : K) + 3, d.ldb = (fc->tb ? K : N) + 5;
    d.ldc = N + 2;
  } else if (layout == FAMILY_DENSE) {
    d.lda = fc->ta ? M : K, d.ldb = fc->tb ? K : N, d.ldc = N;
  } else {
    d.lda = ((fc->ta ? M : K) + 7) / 8 * 8 + 8;
    d.ldb = ((fc->tb ? K : N) + 7) / 8 * 8;
    d.ldc = (N + 7) / 8 * 8 + 8;
  }
  /* aux's rows: an odd number of elements apart (its pairs read and
   * written one element at a time), or with TMA stores an even number
   * (in pairs). */
  d.ldaux = layout == FAMILY_TMA_STORE ? (N + 1) / 2 * 2 + 2 : N + 1;
  size_t ea = type_bytes(fc->ab), ec = type_bytes(fc->c);
  size_t na = (size_t)(fc->ta ? K : M) * d.lda, nb = (size_t)(fc->tb ? N : K) * d.ldb;
  size_t nc = (size_t)M * d.ldc, nx = (size_t)M * d.ldaux;
  void *hA = xmalloc(na * ea), *hB = xmalloc(nb * ea), *hC = xmalloc(nc * ec);
  void *hbias = xmalloc((size_t)N * ec), *hx = xmalloc(nx * ec);
  void *got = xmalloc(nc * ec), *gotx = xmalloc(nx * ec);
  float *gots = xmalloc((size_t)N * 4);
  double *want = xmalloc((size_t)(M * N) * 8), *wantx = xmalloc((size_t)(M * N) * 8);
  double *wants = xmalloc((size_t)N * 8);
  random_typed(hA, fc->ab, na, seed);
  random_typed(hB, fc->ab, nb, seed + 1);
  random_typed(hC, fc->c, nc, seed + 2);
  random_typed(hbias, fc->c, (size_t)N, seed + 3);
  random_typed(hx, fc->c, nx, seed + 4);
  void *dA = dev_poisoned(na * ea), *dB = dev_poisoned(nb * ea);
  void *dC = dev_poisoned(nc * ec), *dbias = dev_poisoned((size_t)N * ec);
  void *dx = dev_poisoned(nx * ec), *ds = dev_poisoned((size_t)N * 4);
  put(dA, hA, na * ea), put(dB, hB, nb * ea), put(dC, hC, nc * ec);
  put(dbias, hbias, (size_t)N * ec);
  int e = fc->epi;
  if (e == TJ_EPILOGUE_DGELU)
    put(dx, hx, nx * ec);
  /* The oracle on the host copies, then the call on the device ones. */
  d.a = hA, d.b = hB, d.c = hC;
  d.bias = e == TJ_EPILOGUE_BIAS || e == TJ_EPILOGUE_BIAS_GELU ? hbias : NULL;
  d.aux = e >= TJ_EPILOGUE_BIAS_GELU ? hx : NULL;
  tj__oracle_gemm_desc(&d, want, wantx, wants);
  d.a = dA, d.b = dB, d.c = dC;
  d.bias = d.bias ? dbias : NULL, d.aux = d.aux ? dx : NULL;
  d.bias_grad = e == TJ_EPILOGUE_DGELU ? ds : NULL;
  char config[128];
  snprintf(config, sizeof config, "%s %lldx%lldx%lld",
           tj_gemm_kernel(rt, &d), M, N, K);
  int tc = tj__gemm_knobs_of(rt)->tc_only == 1;
  int hopper = !tj__gemm_knobs_of(rt)->sm90a_off && !tc &&
               strcmp(tj_runtime_arch(rt), "sm_90") == 0;
  if (tc)
    ck_assert_msg(strstr(config, "_tc ") != NULL, "%s", config);
  else if (fc->ab == fc->c && fc->c == TJ_DTYPE_F16 && !fc->ta && !fc->tb &&
      e == TJ_EPILOGUE_NONE)
    ; /* tj_gemm_f16's own kernels */
  else if (hopper)
    ck_assert_msg(strstr(config, "_sm90a_") != NULL, "%s", config);
  hipStream_t s;
  CHECK_HIP(hipStreamCreate(&s));
  CHECK_TJ(rt, tj_gemm(rt, s, &d));
  CHECK_HIP(hipStreamSynchronize(s));
  get(got, dC, nc * ec);
  check_typed("C", got, fc->c, d.ldc, want, M, N, fc->c, config);
  if (e == TJ_EPILOGUE_BIAS_GELU) {
    get(gotx, dx, nx * ec);
    check_typed("aux", gotx, fc->c, d.ldaux, wantx, M, N, fc->c, config);
  }
  if (e == TJ_EPILOGUE_DGELU) {
    get(gots, ds, (size_t)N * 4);
    check_typed("bias_grad", gots, TJ_DTYPE_F32, N, wants, 1, N, fc->c,
                config);
  }
  CHECK_HIP(hipStreamDestroy(s));
  void *dev[] = {dA, dB, dC, dbias, dx, ds};
  for (int i = 0; i < 6; i++)
    hipFree(dev[i]);
  void *host[] = {hA, hB, hC, hbias, hx, got, gotx, gots, want, wantx, wants};
  for (int i = 0; i < 11; i++)
    free(host[i]);
}

static void run_family(tj_runtime *rt, const family_case *fc, long long M,
                       long long N, long long K, uint64_t seed)
{
  run_family_as(rt, fc, M, N, K, seed, FAMILY_ODD);
}

/* The family's cases (FAMILY_CASES of them): every layout and epilogue
 * in bf16, and every pair of types NN without epilogue and TT with
 * dGELU. */
enum { FAMILY_CASES = 28 };

static void family_cases(family_case cases[FAMILY_CASES])
{
  int n = 0;
  for (int t = 0; t < 4; t++)
    for (int e = 0; e < 4; e++)
      cases[n++] = (family_case){TJ_DTYPE_BF16, TJ_DTYPE_BF16, t & 1, t >> 1, e};
  for (int ab = TJ_DTYPE_F16; ab <= TJ_DTYPE_BF16; ab++)
    for (int c = TJ_DTYPE_F16; c <= TJ_DTYPE_F32; c++) {
      cases[n++] = (family_case){ab, c, 0, 0, TJ_EPILOGUE_NONE};
      cases[n++] = (family_case){ab, c, 1, 1, TJ_EPILOGUE_DGELU};
    }
}

/* The path off Hopper (the Hopper kernel turned off, as the benchmark's
 * knobs do: the tensor-core path): every layout and epilogue in bf16,
 * and every pair of types with the dGELU epilogue transposed both ways,
 * at 1 x 1 x 1 and at sizes that are multiples of no tile. */
START_TEST(gemm_family_every_configuration)
{
  family_case cases[FAMILY_CASES];
  int n = FAMILY_CASES;
  family_cases(cases);
  tj_runtime *rt = open_gpu();
  tj__gemm_knobs off = *tj__gemm_knobs_of(rt);
  off.sm90a_off = 1;
  ck_assert_int_eq(tj__gemm_knobs_set(rt, &off), TJ_OK);
  for (int i = 0; i < n; i++) {
    run_family(rt, &cases[i], 1, 1, 1, 100 + (uint64_t)i);
    run_family(rt, &cases[i], 67, 45, 129, 200 + (uint64_t)i);
  }
  tj_runtime_close(rt);
}
END_TEST

/* The tensor-core path (kernels/gemm_f16.hip's configurations), forced
 * by its knob, so that on sm_90 it runs instead of the Hopper kernel:
 * every layout and epilogue in bf16 and every pair of types (NN without
 * epilogue, and TT with dGELU), at 1 x 1 x 1, at sizes that are
 * multiples of no tile with odd leading dimensions, K not a multiple of
 * the k tile, and with whole tiles and rows 16-byte aligned (its
 * unchecked 16-byte copies on NVIDIA), beta != 0 and beta == 0. */
START_TEST(gemm_family_tensor_core_path)
{
  family_case cases[FAMILY_CASES];
  int n = FAMILY_CASES;
  family_cases(cases);
  tj_runtime *rt = open_gpu();
  tj__gemm_knobs k = *tj__gemm_knobs_of(rt);
  k.tc_only = 1;
  ck_assert_int_eq(tj__gemm_knobs_set(rt, &k), TJ_OK);
  for (int i = 0; i < n; i++) {
    uint64_t seed = 700 + 8 * (uint64_t)i;
    run_family_as(rt, &cases[i], 1, 1, 1, seed, FAMILY_ODD);
    run_family_as(rt, &cases[i], 67, 45, 129, seed + 1, FAMILY_ODD);
    run_family_as(rt, &cases[i], 131, 77, 1001, seed + 2, FAMILY_ODD);
    run_family_as(rt, &cases[i], 256, 264, 200, seed + 3, FAMILY_TMA_BETA);
    run_family_as(rt, &cases[i], 256, 256, 96, seed + 4, FAMILY_TMA_STORE);
  }
  tj_runtime_close(rt);
}
END_TEST

/* The Hopper kernel's configurations (on sm_90; elsewhere the same calls
 * check the portable kernel): every layout and epilogue in bf16 through
 * the 128 x 128 tile and split-K, also with operands it first copies
 * where TMA can read them (odd leading dimensions); every pair of types
 * through the 128 x 64 tile; the cluster's split of K, the persistent
 * tiles and the multicast pairs; and the skinny kernel for M <= 16; each
 * at sizes that are multiples of no tile, C stored directly (beta != 0)
 * and through TMA (beta 0). */
START_TEST(gemm_family_hopper)
{
  tj_runtime *rt = open_gpu();
  uint64_t seed = 500;
  for (int t = 0; t < 4; t++)
    for (int e = 0; e < 4; e++) {
      family_case fc = {TJ_DTYPE_BF16, TJ_DTYPE_BF16, t & 1, t >> 1, e};
      run_family_as(rt, &fc, 67, 45, 129, seed++, FAMILY_TMA_BETA);
      run_family_as(rt, &fc, 100, 136, 2056, seed++, FAMILY_TMA_STORE);
      run_family_as(rt, &fc, 1, 1, 1, seed++, FAMILY_ODD);
      run_family_as(rt, &fc, 131, 77, 1001, seed++, FAMILY_ODD);
    }
  for (int ab = TJ_DTYPE_F16; ab <= TJ_DTYPE_BF16; ab++)
    for (int c = TJ_DTYPE_F16; c <= TJ_DTYPE_F32; c++) {
      family_case fc = {ab, c, 0, 1, TJ_EPILOGUE_BIAS_GELU};
      run_family_as(rt, &fc, 200, 264, 520, seed++, FAMILY_TMA_STORE);
    }
  const family_case k2 = {TJ_DTYPE_BF16, TJ_DTYPE_BF16, 1, 0,
                          TJ_EPILOGUE_DGELU};
  const family_case pers = {TJ_DTYPE_BF16, TJ_DTYPE_BF16, 0, 1,
                            TJ_EPILOGUE_BIAS_GELU};
  const family_case mc2 = {TJ_DTYPE_F16, TJ_DTYPE_F32, 1, 1,
                           TJ_EPILOGUE_BIAS};
  run_family_as(rt, &k2, 130, 1800, 2050, seed++, FAMILY_TMA_STORE);
  run_family_as(rt, &pers, 1100, 1928, 72, seed++, FAMILY_TMA_STORE);
  run_family_as(rt, &pers, 1100, 1928, 72, seed++, FAMILY_TMA_BETA);
  run_family_as(rt, &mc2, 2200, 2056, 40, seed++, FAMILY_TMA_STORE);
  /* M <= 16: the skinny kernel (A not transposed), alone and in a
   * cluster, with copies of odd operands; A transposed: the tiles. */
  const struct {
    family_case fc;
    long long m, n, k;
    family_layout layout;
  } few[] = {
      {{TJ_DTYPE_BF16, TJ_DTYPE_BF16, 0, 1, TJ_EPILOGUE_BIAS_GELU}, 1, 520,
       1000, FAMILY_TMA_STORE},
      {{TJ_DTYPE_F16, TJ_DTYPE_F32, 0, 0, TJ_EPILOGUE_DGELU}, 5, 300, 2050,
       FAMILY_TMA_BETA},
      {{TJ_DTYPE_BF16, TJ_DTYPE_BF16, 0, 1, TJ_EPILOGUE_BIAS}, 16, 4104,
       4096, FAMILY_TMA_STORE},
      {{TJ_DTYPE_BF16, TJ_DTYPE_F16, 0, 0, TJ_EPILOGUE_NONE}, 16, 777, 64,
       FAMILY_ODD},
      {{TJ_DTYPE_BF16, TJ_DTYPE_BF16, 1, 0, TJ_EPILOGUE_BIAS_GELU}, 3, 200,
       300, FAMILY_TMA_BETA},
      /* A one-row A stored K x 1 runs as A stored 1 x K (the skinny
       * kernel), a one-column B stored K x 1 as B stored 1 x K. */
      {{TJ_DTYPE_BF16, TJ_DTYPE_BF16, 1, 0, TJ_EPILOGUE_BIAS_GELU}, 1, 520,
       1000, FAMILY_DENSE},
      {{TJ_DTYPE_BF16, TJ_DTYPE_F32, 0, 0, TJ_EPILOGUE_DGELU}, 37, 1, 264,
       FAMILY_DENSE},
  };
  for (size_t i = 0; i < sizeof few / sizeof few[0]; i++)
    run_family_as(rt, &few[i].fc, few[i].m, few[i].n, few[i].k, seed++,
                  few[i].layout);
  tj_runtime_close(rt);
}
END_TEST

/* tj_gemm_host: bf16 NT with bias and GELU to f32, C and aux with padded
 * rows, against the oracle; the padding comes back as it was. */
START_TEST(gemm_family_host_call)
{
  enum { M = 37, N = 29, K = 70, LDC = N + 3, LDX = N + 2 };
  uint16_t *A = xmalloc((size_t)M * K * 2), *B = xmalloc((size_t)N * K * 2);
  float *bias = xmalloc(N * 4); /* C's type, as the header says */
  float *C = xmalloc((size_t)M * LDC * 4), *aux = xmalloc((size_t)M * LDX * 4);
  double *want = xmalloc((size_t)M * N * 8), *wantx = xmalloc((size_t)M * N * 8);
  random_typed(A, TJ_DTYPE_BF16, (size_t)M * K, 300);
  random_typed(B, TJ_DTYPE_BF16, (size_t)N * K, 301);
  random_typed(bias, TJ_DTYPE_F32, N, 302);
  for (size_t i = 0; i < (size_t)M * LDC; i++)
    C[i] = -7.0f;
  for (size_t i = 0; i < (size_t)M * LDX; i++)
    aux[i] = -9.0f;
  tj_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.size = sizeof d;
  d.a_type = d.b_type = TJ_DTYPE_BF16, d.c_type = TJ_DTYPE_F32;
  d.trans_b = 1, d.epilogue = TJ_EPILOGUE_BIAS_GELU;
  d.m = M, d.n = N, d.k = K, d.alpha = 1.0f;
  d.a = A, d.lda = K, d.b = B, d.ldb = K, d.c = C, d.ldc = LDC;
  d.bias = bias, d.aux = aux, d.ldaux = LDX;
  tj__oracle_gemm_desc(&d, want, wantx, NULL);
  tj_runtime *rt = open_gpu();
  CHECK_TJ(rt, tj_gemm_host(rt, &d));
  check_typed("C", C, TJ_DTYPE_F32, LDC, want, M, N, TJ_DTYPE_F32, "host");
  check_typed("aux", aux, TJ_DTYPE_F32, LDX, wantx, M, N, TJ_DTYPE_F32,
              "host");
  for (int m = 0; m < M; m++) {
    for (int n = N; n < LDC; n++)
      ck_assert(C[m * LDC + n] == -7.0f);
    for (int n = N; n < LDX; n++)
      ck_assert(aux[m * LDX + n] == -9.0f);
  }
  tj_runtime_close(rt);
  free(A); free(B); free(bias); free(C); free(aux); free(want); free(wantx);
}
END_TEST

typedef struct hopper_built {
  tj_runtime *rt;
  const tj_gemm_desc *d;
} hopper_built;

static int hopper_prepare(void *p)
{
  const hopper_built *h = p;
  return tj__gemm_hopper_prepare(h->rt, h->d, NULL, NULL);
}

/* Background builds (tj_options.background_builds) on a cache that holds
 * nothing: the first bf16 NT call is right by the oracle (on the
 * fallback, while its Hopper configuration compiles on the worker); once
 * the worker has finished, the configuration is built, tj_gemm_kernel
 * names it without compiling, and a call takes it, right as well. */
START_TEST(gemm_family_background_first_call)
{
  enum { M = 192, N = 520, K = 1032 };
  char *dir = test_tmpdir(), *db = test_path(dir, "cache.db");
  tj_options o = {0};
  o.size = sizeof o;
  o.cache_path = db;
  o.system_caches = "";
  o.remote = "";
  o.background_builds = 1;
  tj_runtime *rt = NULL;
  int rc = tj_runtime_open(&rt, &o);
  ck_assert_msg(rc == TJ_OK, "open: %s", tj_errmsg(rt));
  tj_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.size = sizeof d;
  d.a_type = d.b_type = d.c_type = TJ_DTYPE_BF16;
  d.trans_b = 1;
  d.m = M, d.n = N, d.k = K, d.alpha = 1.0f;
  d.lda = K, d.ldb = K, d.ldc = N;
  size_t na = (size_t)M * K, nb = (size_t)N * K, nc = (size_t)M * N;
  uint16_t *hA = xmalloc(na * 2), *hB = xmalloc(nb * 2), *got = xmalloc(nc * 2);
  double *want = xmalloc(nc * 8);
  random_typed(hA, TJ_DTYPE_BF16, na, 900);
  random_typed(hB, TJ_DTYPE_BF16, nb, 901);
  d.a = hA, d.b = hB, d.c = got;
  tj__oracle_gemm_desc(&d, want, NULL, NULL);
  void *dA = dev_poisoned(na * 2), *dB = dev_poisoned(nb * 2);
  void *dC = dev_poisoned(nc * 2);
  put(dA, hA, na * 2), put(dB, hB, nb * 2);
  d.a = dA, d.b = dB, d.c = dC;
  hopper_built h = {rt, &d};
  int hopper = tj__gemm_hopper_serves(rt, &d);
  if (hopper)
    ck_assert_int_eq(tj__built_only(hopper_prepare, &h), TJ_ENOENT);
  for (int call = 0; call < 2; call++) {
    CHECK_TJ(rt, tj_gemm(rt, NULL, &d));
    CHECK_HIP(hipStreamSynchronize(NULL));
    get(got, dC, nc * 2);
    check_typed("C", got, TJ_DTYPE_BF16, N, want, M, N, TJ_DTYPE_BF16,
                call ? "the specialised call" : "the first call");
    if (call || !hopper)
      continue;
    tj__worker_drain(rt);
    ck_assert_int_eq(tj__built_only(hopper_prepare, &h), TJ_OK);
    tj_stats before, after;
    tj_runtime_get_stats(rt, &before);
    const char *entry = tj_gemm_kernel(rt, &d);
    ck_assert_ptr_nonnull(entry);
    ck_assert_msg(strstr(entry, "_sm90a_") != NULL, "%s", entry);
    ck_assert_int_eq(tj__gemm_defer_hopper(rt, &d, NULL), 0);
    tj_runtime_get_stats(rt, &after);
    ck_assert_uint_eq(after.compiles, before.compiles);
    CHECK_HIP(hipMemset(dC, 0xff, nc * 2));
  }
  void *dev[] = {dA, dB, dC};
  for (int i = 0; i < 3; i++)
    hipFree(dev[i]);
  free(hA), free(hB), free(got), free(want);
  tj_runtime_close(rt);
  free(db);
  free(dir);
}
END_TEST

/* ------------------------------------------------------- the grouped GEMM */

/* How the rows (or the reduction) are routed to the groups. */
enum { ROUTE_UNIFORM, ROUTE_SKEWED, ROUTE_EMPTY_ENDS, ROUTE_ONE_GROUP,
       ROUTE_SHORT, N_ROUTES };
static const char *const route_names[] = {"uniform", "skewed", "empty ends",
                                          "one group", "rows past the last"};

/* E end offsets over total, as route says: equal shares; one group with
 * nine tenths and the rest spread at random (some empty); the first and
 * last groups empty; one group with everything; or equal shares of two
 * thirds, the rest past the last group (rows that are not written, or
 * a stretch of the reduction that no product takes). */
static void make_offs(int32_t *offs, int E, long long total, int route,
                      uint64_t seed)
{
  long long cut = route == ROUTE_SHORT ? total * 2 / 3 : total, end = 0;
  int big = (int)(next_random(&seed) % (uint64_t)E);
  long long rest = cut - cut * 9 / 10, inner = E - 2;
  for (int e = 0; e < E; e++) {
    long long n = 0;
    if (route == ROUTE_UNIFORM || route == ROUTE_SHORT)
      n = (e + 1) * cut / E - e * cut / E;
    else if (route == ROUTE_EMPTY_ENDS && E < 3)
      n = e == 0 ? cut : 0;
    else if (route == ROUTE_EMPTY_ENDS)
      n = e == 0 || e == E - 1 ? 0 : e * cut / inner - (e - 1) * cut / inner;
    else if (route == ROUTE_ONE_GROUP)
      n = e == big ? cut : 0;
    else if (e != big) {
      n = (long long)(next_random(&seed) % (uint64_t)(2 * rest / E + 1));
      n = n < rest ? n : rest;
      rest -= n;
    }
    end += n;
    offs[e] = (int32_t)end;
  }
  /* The skewed route's big group takes what is left. */
  for (int e = big; route == ROUTE_SKEWED && e < E; e++)
    offs[e] += (int32_t)(cut - end);
}

typedef struct grouped_case {
  int grouped, ab, c, ta, tb, epi;
  int tma; /* 1: A's and B's rows and B's matrices a multiple of 8
              elements apart (the Hopper path reads them) */
} grouped_case;

/* One grouped call's operands in the order a, b, c, offs, bias, aux,
 * bias_grad: element counts and sizes, host copies (random, offs made
 * by make_offs) and device copies (what is read copied in; C and aux
 * too, so that what the call must not write shows). */
typedef struct grouped_bufs {
  size_t n[7], elem[7];
  void *host[7], *dev[7];
} grouped_bufs;

static void grouped_bufs_make(grouped_bufs *g, const tj_grouped_gemm_desc *d,
                              int route, uint64_t seed)
{
  long long E = d->groups, M = d->m, N = d->n, K = d->k;
  long long one_b = (d->trans_b ? N : K) * d->ldb, one_c = M * d->ldc;
  int m_grouped = d->grouped == TJ_GROUPED_M;
  g->n[0] = (size_t)((d->trans_a ? K : M) * d->lda);
  g->n[1] = (size_t)(m_grouped ? (E - 1) * d->stride_b + one_b : one_b);
  g->n[2] = (size_t)(m_grouped ? one_c : (E - 1) * d->stride_c + one_c);
  g->n[3] = (size_t)E, g->n[4] = (size_t)(E * N);
  g->n[5] = (size_t)(M * d->ldaux), g->n[6] = (size_t)(E * N);
  int types[7] = {d->a_type, d->b_type, d->c_type, 0, d->c_type, d->c_type,
                  TJ_DTYPE_F32};
  for (int i = 0; i < 7; i++) {
    g->elem[i] = i == 3 ? 4 : type_bytes(types[i]);
    g->host[i] = xmalloc(g->n[i] * g->elem[i]);
    g->dev[i] = dev_poisoned(g->n[i] * g->elem[i]);
    if (i == 3)
      make_offs(g->host[3], (int)E, m_grouped ? M : K, route, seed);
    else
      random_typed(g->host[i], types[i], g->n[i], seed + (uint64_t)i);
    if (i != 6)
      put(g->dev[i], g->host[i], g->n[i] * g->elem[i]);
  }
}

static void grouped_bufs_free(grouped_bufs *g)
{
  for (int i = 0; i < 7; i++) {
    hipFree(g->dev[i]);
    free(g->host[i]);
  }
}

/* d's pointers: the host copies (side 0) or the device ones (1), those
 * its epilogue takes. */
static void grouped_point(tj_grouped_gemm_desc *d, const grouped_bufs *g,
                          int side)
{
  void *const *p = side ? g->dev : g->host;
  int e = d->epilogue;
  d->a = p[0], d->b = p[1], d->c = p[2], d->offs = p[3];
  d->bias = e == TJ_EPILOGUE_BIAS || e == TJ_EPILOGUE_BIAS_GELU ? p[4] : NULL;
  d->aux = e >= TJ_EPILOGUE_BIAS_GELU ? p[5] : NULL;
  d->bias_grad = side && e == TJ_EPILOGUE_DGELU ? p[6] : NULL;
}

/* A descriptor of gc at E x m x n x k, every leading dimension and stride
 * padded, alpha 1.5 and beta 0.5. */
static tj_grouped_gemm_desc grouped_desc(const grouped_case *gc, long long E,
                                         long long M, long long N,
                                         long long K)
{
  tj_grouped_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.size = sizeof d;
  d.grouped = gc->grouped, d.groups = E;
  d.a_type = d.b_type = gc->ab, d.c_type = gc->c;
  d.trans_a = gc->ta, d.trans_b = gc->tb, d.epilogue = gc->epi;
  d.m = M, d.n = N, d.k = K, d.alpha = 1.5f, d.beta = 0.5f;
  d.lda = (gc->ta ? M : K) + 3, d.ldb = (gc->tb ? K : N) + 5, d.ldc = N + 2;
  d.ldaux = N + 1;
  if (gc->tma) {
    d.lda = ((gc->ta ? M : K) + 7) / 8 * 8 + 8;
    d.ldb = ((gc->tb ? K : N) + 7) / 8 * 8 + 8;
  }
  if (gc->grouped == TJ_GROUPED_M)
    d.stride_b = (gc->tb ? N : K) * d.ldb + (gc->tma ? 64 : 7);
  else
    d.stride_c = M * d.ldc + 3;
  return d;
}

/* What the call wrote, read back, against the oracle: C (every matrix,
 * rows past the last group as they were), aux where written, and the
 * per-group bias gradient. */
static void grouped_compare(const tj_grouped_gemm_desc *d,
                            const grouped_bufs *g, const double *want,
                            const double *wantx, const double *wants,
                            const char *config)
{
  long long E = d->groups, M = d->m, N = d->n;
  int t = d->c_type, e = d->epilogue;
  void *got = xmalloc(g->n[2] * g->elem[2]);
  get(got, g->dev[2], g->n[2] * g->elem[2]);
  if (d->grouped == TJ_GROUPED_M)
    check_typed("C", got, t, d->ldc, want, M, N, t, config);
  for (long long i = 0; d->grouped == TJ_GROUPED_K && i < E; i++)
    check_typed("C[e]", (char *)got + (size_t)(i * d->stride_c) * g->elem[2],
                t, d->ldc, want + i * M * N, M, N, t, config);
  free(got);
  if (e == TJ_EPILOGUE_BIAS_GELU) {
    void *gotx = xmalloc(g->n[5] * g->elem[5]);
    get(gotx, g->dev[5], g->n[5] * g->elem[5]);
    check_typed("aux", gotx, t, d->ldaux, wantx, M, N, t, config);
    free(gotx);
  }
  if (e == TJ_EPILOGUE_DGELU) {
    float *gots = xmalloc(g->n[6] * 4);
    get(gots, g->dev[6], g->n[6] * 4);
    check_typed("bias_grad", gots, TJ_DTYPE_F32, N, wants, E, N, t, config);
    free(gots);
  }
}

/* One call of gc at E x m x n x k routed as route, on a stream, against
 * the oracle; with alpha_zero, alpha is 0 and A and B hold NaNs that
 * must not be read. */
static void run_grouped(tj_runtime *rt, const grouped_case *gc, long long E,
                        long long M, long long N, long long K, int route,
                        int alpha_zero, uint64_t seed)
{
  tj_grouped_gemm_desc d = grouped_desc(gc, E, M, N, K);
  grouped_bufs g;
  grouped_bufs_make(&g, &d, route, seed);
  if (alpha_zero) {
    d.alpha = 0.0f;
    CHECK_HIP(hipMemset(g.dev[0], 0xff, g.n[0] * g.elem[0]));
    CHECK_HIP(hipMemset(g.dev[1], 0xff, g.n[1] * g.elem[1]));
  }
  size_t nw = (size_t)(d.grouped == TJ_GROUPED_M ? M * N : E * M * N);
  double *want = xmalloc(nw * 8), *wantx = xmalloc((size_t)(M * N) * 8);
  double *wants = xmalloc((size_t)(E * N) * 8);
  grouped_point(&d, &g, 0);
  tj__oracle_grouped_gemm(&d, want, wantx, wants);
  grouped_point(&d, &g, 1);
  char config[160];
  snprintf(config, sizeof config, "%s E=%lld %lldx%lldx%lld %s%s",
           tj_grouped_gemm_kernel(rt, &d), E, M, N, K, route_names[route],
           alpha_zero ? " alpha 0" : "");
  hipStream_t s;
  CHECK_HIP(hipStreamCreate(&s));
  CHECK_TJ(rt, tj_grouped_gemm(rt, s, &d));
  CHECK_HIP(hipStreamSynchronize(s));
  CHECK_HIP(hipStreamDestroy(s));
  grouped_compare(&d, &g, want, wantx, wants, config);
  grouped_bufs_free(&g);
  free(want); free(wantx); free(wants);
}

/* A GPU runtime with the grouped Hopper kernels on (1, the rule's) or
 * off (0: the benchmark's knob), so that each kernel is tested on sm_90
 * whichever its operands would pick. */
static tj_runtime *open_gpu_grouped(int sm90a)
{
  tj_runtime *rt = open_gpu();
  tj__gemm_knobs k = *tj__gemm_knobs_of(rt);
  k.grouped_sm90a = sm90a;
  ck_assert_int_eq(tj__gemm_knobs_set(rt, &k), TJ_OK);
  return rt;
}

/* The M-grouped call (forward and input gradient): every layout and
 * epilogue in bf16, each epilogue in f16 and to f32, each routing, at
 * sizes that are multiples of no tile, one group, many small groups
 * sharing each tile of rows, and 1 x 1 x 1, on the portable kernel. */
START_TEST(grouped_gemm_m_grouped)
{
  tj_runtime *rt = open_gpu_grouped(0);
  int n = 0;
  for (int t = 0; t < 4; t++)
    for (int e = 0; e < 4; e++, n++) {
      grouped_case gc = {TJ_GROUPED_M, TJ_DTYPE_BF16, TJ_DTYPE_BF16, t & 1,
                         t >> 1, e, 0};
      run_grouped(rt, &gc, 5, 203, 45, 70, n % N_ROUTES, 0, 500 + n);
    }
  for (int e = 0; e < 4; e++)
    for (int c = TJ_DTYPE_F16; c <= TJ_DTYPE_F32; c += 2, n++) {
      grouped_case gc = {TJ_GROUPED_M, TJ_DTYPE_F16, c, 0, 1, e, 0};
      run_grouped(rt, &gc, 7, 131, 67, 33, n % N_ROUTES, 0, 500 + n);
    }
  for (int r = 0; r < N_ROUTES; r++, n++) {
    grouped_case gc = {TJ_GROUPED_M, TJ_DTYPE_BF16, TJ_DTYPE_F32, 0, 0,
                       TJ_EPILOGUE_DGELU, 0};
    run_grouped(rt, &gc, 40, 150, 70, 19, r, 0, 500 + n);
  }
  grouped_case one = {TJ_GROUPED_M, TJ_DTYPE_BF16, TJ_DTYPE_BF16, 0, 1,
                      TJ_EPILOGUE_BIAS_GELU, 0};
  run_grouped(rt, &one, 1, 97, 130, 65, ROUTE_UNIFORM, 0, 600);
  run_grouped(rt, &one, 1, 1, 1, 1, ROUTE_UNIFORM, 0, 601);
  run_grouped(rt, &one, 3, 1, 1, 1, ROUTE_SKEWED, 0, 602);
  run_grouped(rt, &one, 6, 300, 20, 40, ROUTE_SKEWED, 1, 603);
  tj_runtime_close(rt);
}
END_TEST

/* run_grouped with operands TMA reads (gc.tma), asserting on an sm_90
 * device that the Hopper kernel takes the call. */
static void run_grouped_tma(tj_runtime *rt, grouped_case gc, long long E,
                            long long M, long long N, long long K, int route,
                            uint64_t seed)
{
  gc.tma = 1;
  if (strcmp(tj_runtime_arch(rt), "sm_90") == 0) {
    tj_grouped_gemm_desc d = grouped_desc(&gc, E, M, N, K);
    grouped_bufs g;
    grouped_bufs_make(&g, &d, route, seed);
    grouped_point(&d, &g, 1);
    const char *name = tj_grouped_gemm_kernel(rt, &d);
    ck_assert_msg(name && strstr(name, "_sm90a_128x"), "%s",
                  name ? name : tj_errmsg(rt));
    grouped_bufs_free(&g);
  }
  run_grouped(rt, &gc, E, M, N, K, route, 0, seed);
}

/* The M-grouped call where TMA reads A and B (on an sm_90 device the
 * Hopper kernel, asserted; elsewhere the portable one): every layout and
 * epilogue in bf16, each epilogue in f16 and to f32, each routing, at
 * row counts that are multiples of no tile, K and N not multiples of 64,
 * groups of one row, a group of nearly every row, empty groups, more
 * groups than the table has entries, and each tile width. */
START_TEST(grouped_gemm_m_grouped_sm90a)
{
  tj_runtime *rt = open_gpu_grouped(1);
  int n = 0;
  for (int t = 0; t < 4; t++)
    for (int e = 0; e < 4; e++, n++) {
      grouped_case gc = {TJ_GROUPED_M, TJ_DTYPE_BF16, TJ_DTYPE_BF16, t & 1,
                         t >> 1, e, 1};
      run_grouped_tma(rt, gc, 5, 403, 45, 70, n % N_ROUTES, 1000 + n);
    }
  for (int e = 0; e < 4; e++)
    for (int c = TJ_DTYPE_F16; c <= TJ_DTYPE_F32; c += 2, n++) {
      grouped_case gc = {TJ_GROUPED_M, TJ_DTYPE_F16, c, 0, 1, e, 1};
      run_grouped_tma(rt, gc, 7, 331, 67, 33, n % N_ROUTES, 1000 + n);
    }
  grouped_case dg = {TJ_GROUPED_M, TJ_DTYPE_BF16, TJ_DTYPE_BF16, 0, 0,
                     TJ_EPILOGUE_DGELU, 1};
  for (int r = 0; r < N_ROUTES; r++, n++)
    run_grouped_tma(rt, dg, 16, 1000, 200, 130, r, 1000 + n);
  grouped_case bg = {TJ_GROUPED_M, TJ_DTYPE_BF16, TJ_DTYPE_BF16, 1, 0,
                     TJ_EPILOGUE_BIAS_GELU, 1};
  run_grouped_tma(rt, bg, 64, 64, 96, 72, ROUTE_UNIFORM, 1100); /* 1 row */
  run_grouped_tma(rt, bg, 3, 2000, 136, 200, ROUTE_SKEWED, 1101);
  run_grouped_tma(rt, bg, 1, 1, 1, 1, ROUTE_UNIFORM, 1102);
  /* More groups than the table's 4096 entries: two groups an entry. */
  run_grouped_tma(rt, bg, 5000, 6000, 24, 16, ROUTE_SKEWED, 1103);
  run_grouped_tma(rt, bg, 5000, 6000, 24, 16, ROUTE_UNIFORM, 1104);
  /* Each tile width, forced as the benchmark forces it. */
  int widths[] = {64, 256};
  for (int i = 0; i < 2; i++) {
    tj__gemm_knobs k = *tj__gemm_knobs_of(rt);
    k.tile = widths[i];
    ck_assert_int_eq(tj__gemm_knobs_set(rt, &k), TJ_OK);
    run_grouped_tma(rt, dg, 9, 700, 300, 100, ROUTE_SKEWED, 1200 + i);
    run_grouped_tma(rt, bg, 9, 700, 520, 100, ROUTE_EMPTY_ENDS, 1210 + i);
  }
  tj_runtime_close(rt);
}
END_TEST

/* The K-grouped call (weight gradient): every layout to f32 and to bf16,
 * f16, each routing, empty groups (C[e] = beta C[e]), one group, and
 * 1 x 1 x 1, on the portable kernel. */
START_TEST(grouped_gemm_k_grouped)
{
  tj_runtime *rt = open_gpu_grouped(0);
  int n = 0;
  for (int t = 0; t < 4; t++)
    for (int c = TJ_DTYPE_BF16; c <= TJ_DTYPE_F32; c++, n++) {
      grouped_case gc = {TJ_GROUPED_K, TJ_DTYPE_BF16, c, t & 1, t >> 1, 0, 0};
      run_grouped(rt, &gc, 6, 45, 70, 203, n % N_ROUTES, 0, 700 + n);
    }
  for (int r = 0; r < N_ROUTES; r++, n++) {
    grouped_case gc = {TJ_GROUPED_K, TJ_DTYPE_F16, TJ_DTYPE_F16, 1, 0, 0, 0};
    run_grouped(rt, &gc, 33, 67, 33, 150, r, 0, 700 + n);
  }
  grouped_case w = {TJ_GROUPED_K, TJ_DTYPE_BF16, TJ_DTYPE_F32, 1, 0, 0, 0};
  run_grouped(rt, &w, 1, 130, 65, 97, ROUTE_UNIFORM, 0, 800);
  run_grouped(rt, &w, 1, 1, 1, 1, ROUTE_UNIFORM, 0, 801);
  run_grouped(rt, &w, 4, 1, 1, 1, ROUTE_EMPTY_ENDS, 0, 802);
  run_grouped(rt, &w, 5, 20, 30, 77, ROUTE_SKEWED, 1, 803);
  tj_runtime_close(rt);
}
END_TEST

/* The K-grouped call where TMA reads A (stored K x M) and B (K x N): on
 * an sm_90 device the Hopper kernel (asserted), elsewhere the portable
 * one.  To f32, bf16 and f16, each routing (empty groups: C_e = beta
 * C_e), reductions of fewer rows than a k-tile and not multiples of it
 * (the last k-tile's rows past the group zeroed), one group, and each
 * tile width. */
START_TEST(grouped_gemm_k_grouped_sm90a)
{
  tj_runtime *rt = open_gpu_grouped(1);
  int n = 0;
  for (int c = TJ_DTYPE_BF16; c <= TJ_DTYPE_F32; c++)
    for (int r = 0; r < N_ROUTES; r++, n++) {
      grouped_case gc = {TJ_GROUPED_K, TJ_DTYPE_BF16, c, 1, 0, 0, 1};
      run_grouped_tma(rt, gc, 6, 150, 70, 403, r, 1300 + n);
    }
  grouped_case h = {TJ_GROUPED_K, TJ_DTYPE_F16, TJ_DTYPE_F16, 1, 0, 0, 1};
  run_grouped_tma(rt, h, 33, 67, 200, 1000, ROUTE_UNIFORM, 1400); /* ~30 */
  run_grouped_tma(rt, h, 5, 130, 65, 97, ROUTE_SKEWED, 1401);
  run_grouped_tma(rt, h, 1, 1, 1, 1, ROUTE_UNIFORM, 1402);
  run_grouped_tma(rt, h, 1, 257, 136, 640, ROUTE_UNIFORM, 1403);
  int widths[] = {64, 256};
  for (int i = 0; i < 2; i++) {
    tj__gemm_knobs k = *tj__gemm_knobs_of(rt);
    k.tile = widths[i];
    ck_assert_int_eq(tj__gemm_knobs_set(rt, &k), TJ_OK);
    run_grouped_tma(rt, h, 7, 200, 300, 500, ROUTE_EMPTY_ENDS, 1410 + i);
  }
  tj_runtime_close(rt);
}
END_TEST

/* The grouped GEMM captured into a graph and replayed with new routing
 * written into the same offsets between replays: each replay matches the
 * oracle of its routing, and the same call on a stream gives the same
 * bits; with operands that TMA cannot read (_i 0) and that it can (1:
 * on an sm_90 device the Hopper kernel). */
START_TEST(grouped_gemm_captured_and_rerouted)
{
  grouped_case gc = {TJ_GROUPED_M, TJ_DTYPE_BF16, TJ_DTYPE_BF16, 0, 0,
                     TJ_EPILOGUE_BIAS_GELU, _i};
  enum { E = 8, M = 257, N = 96, K = 80 };
  tj_grouped_gemm_desc d = grouped_desc(&gc, E, M, N, K);
  d.beta = 0.0f; /* replays overwrite C */
  /* The runtime first: it makes the device's context current, which
   * the buffers' allocation needs; its rule picks the kernel. */
  tj_runtime *rt = open_gpu();
  grouped_bufs g;
  grouped_bufs_make(&g, &d, ROUTE_UNIFORM, 900);
  double *want = xmalloc((size_t)M * N * 8), *wantx = xmalloc((size_t)M * N * 8);
  hipStream_t s;
  CHECK_HIP(hipStreamCreate(&s));
  grouped_point(&d, &g, 1);
  CHECK_TJ(rt, tj_grouped_gemm(rt, s, &d)); /* compiled before the capture */
  CHECK_HIP(hipStreamSynchronize(s));
  hipGraph_t graph;
  hipGraphExec_t exec;
  CHECK_HIP(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
  CHECK_TJ(rt, tj_grouped_gemm(rt, s, &d));
  CHECK_HIP(hipStreamEndCapture(s, &graph));
  CHECK_HIP(hipGraphInstantiateWithFlags(&exec, graph, 0));
  size_t cb = g.n[2] * g.elem[2];
  void *replayed = xmalloc(cb), *streamed = xmalloc(cb);
  for (int r = 0; r < N_ROUTES; r++) {
    make_offs(g.host[3], E, M, r, 901 + (uint64_t)r);
    put(g.dev[3], g.host[3], E * 4);
    /* Rows past the last group keep what C and aux held: the same for
     * the replay and the stream. */
    put(g.dev[2], g.host[2], cb);
    put(g.dev[5], g.host[5], g.n[5] * g.elem[5]);
    CHECK_HIP(hipGraphLaunch(exec, s));
    CHECK_HIP(hipStreamSynchronize(s));
    get(replayed, g.dev[2], cb);
    grouped_point(&d, &g, 0);
    tj__oracle_grouped_gemm(&d, want, wantx, NULL);
    grouped_compare(&d, &g, want, wantx, NULL, route_names[r]);
    grouped_point(&d, &g, 1);
    put(g.dev[2], g.host[2], cb);
    put(g.dev[5], g.host[5], g.n[5] * g.elem[5]);
    CHECK_TJ(rt, tj_grouped_gemm(rt, s, &d));
    CHECK_HIP(hipStreamSynchronize(s));
    get(streamed, g.dev[2], cb);
    ck_assert_msg(memcmp(replayed, streamed, cb) == 0, "%s: the replay's C "
                  "differs from the stream's", route_names[r]);
  }
  CHECK_HIP(hipGraphExecDestroy(exec));
  CHECK_HIP(hipGraphDestroy(graph));
  CHECK_HIP(hipStreamDestroy(s));
  tj_runtime_close(rt);
  grouped_bufs_free(&g);
  free(want); free(wantx); free(replayed); free(streamed);
}
END_TEST

/* tj_grouped_gemm_host: f16 NT with the dGELU and its per-group bias
 * gradient, skewed routing with rows past the last group, C with padded
 * rows: against the oracle, and what the call does not write (padding,
 * rows past the last group) comes back as it was. */
START_TEST(grouped_gemm_host_call)
{
  grouped_case gc = {TJ_GROUPED_M, TJ_DTYPE_F16, TJ_DTYPE_F16, 0, 1,
                     TJ_EPILOGUE_DGELU, 0};
  enum { E = 6, M = 90, N = 37, K = 50 };
  tj_grouped_gemm_desc d = grouped_desc(&gc, E, M, N, K);
  tj_runtime *rt = open_gpu(); /* first: the buffers' context */
  grouped_bufs g;
  grouped_bufs_make(&g, &d, ROUTE_SKEWED, 950);
  int32_t *offs = g.host[3];
  offs[E - 1] = M - 5; /* rows past the last group */
  for (int e = 0; e < E - 1; e++)
    offs[e] = offs[e] < M - 5 ? offs[e] : M - 5;
  double *want = xmalloc((size_t)M * N * 8), *wants = xmalloc(E * N * 8);
  grouped_point(&d, &g, 0);
  tj__oracle_grouped_gemm(&d, want, NULL, wants);
  size_t cb = g.n[2] * 2;
  uint16_t *before = xmalloc(cb);
  memcpy(before, g.host[2], cb);
  float *sums = xmalloc(E * N * 4);
  d.bias_grad = sums;
  CHECK_TJ(rt, tj_grouped_gemm_host(rt, &d));
  check_typed("C", g.host[2], TJ_DTYPE_F16, d.ldc, want, M, N, TJ_DTYPE_F16,
              "host");
  check_typed("bias_grad", sums, TJ_DTYPE_F32, N, wants, E, N, TJ_DTYPE_F16,
              "host");
  for (long long m = 0; m < M; m++)
    for (long long n = N; n < d.ldc; n++)
      ck_assert(((uint16_t *)g.host[2])[m * d.ldc + n] == before[m * d.ldc + n]);
  for (long long i = (M - 5) * d.ldc; i < M * d.ldc; i++)
    ck_assert(((uint16_t *)g.host[2])[i] == before[i]);
  tj_runtime_close(rt);
  grouped_bufs_free(&g);
  free(want); free(wants); free(before); free(sums);
}
END_TEST

/* ------------------------------------------------------- main */

/* ------------------------------------------------------- MoE permutation */

/* A routing case: T tokens, k slots, E experts, hidden H, the types,
 * row strides padded by pad elements and rows offset by off elements
 * (off 1 or odd strides take the element-by-element path), and how the
 * experts are drawn: 0 uniform and distinct per token, 1 skewed (most
 * slots to expert 3), 2 every other expert empty and some indices out of
 * range. */
typedef struct moe_case {
  int64_t T;
  int k, E;
  int64_t H;
  int dtype, w_type, pad, off, routing;
} moe_case;

static const moe_case moe_cases[] = {
    {1000, 4, 8, 1024, TJ_DTYPE_BF16, TJ_DTYPE_F32, 0, 0, 0},
    {777, 2, 64, 2049, TJ_DTYPE_F16, TJ_DTYPE_F16, 3, 1, 1},
    {300, 6, 128, 136, TJ_DTYPE_BF16, TJ_DTYPE_BF16, 8, 0, 2},
    {1, 16, 1024, 8, TJ_DTYPE_F16, TJ_DTYPE_F32, 0, 0, 0},
    {5000, 8, 32, 4096, TJ_DTYPE_BF16, TJ_DTYPE_F32, 0, 0, 1},
    {2500, 3, 5, 33, TJ_DTYPE_F16, TJ_DTYPE_F32, 1, 0, 2},
};
#define N_MOE (int)(sizeof moe_cases / sizeof moe_cases[0])

static int32_t moe_expert(const moe_case *c, int64_t t, int s, uint64_t *rs)
{
  uint64_t r = next_random(rs);
  if (c->routing == 1 && r % 10 != 0)
    return c->E > 3 ? 3 : 0;
  if (c->routing == 2 && r % 17 == 0)
    return r % 2 ? -1 : c->E; /* dropped */
  if (c->routing == 2)
    return (int32_t)((r >> 8) % (uint64_t)((c->E + 1) / 2)) * 2;
  return (int32_t)((t * c->k + s + (int64_t)(r >> 60)) % c->E);
}

/* The host side of a case: inputs, and what came back. */
typedef struct moe_host {
  int64_t slots, ldx, ldp;
  size_t act, perm, wb;
  int32_t *topk, *route, *want_route;
  void *x, *yp, *dy, *w;
  void *xp, *y, *dx, *dyp, *dw;
} moe_host;

/* The device side: inputs, outputs (poisoned), the routing, workspace. */
typedef struct moe_dev {
  void *topk, *x, *yp, *dy, *w, *xp, *y, *dx, *dyp, *dw, *ws, *route;
  size_t ws_bytes;
  tj_moe_routing r;
} moe_dev;

static void moe_make_host(const moe_case *c, moe_host *h, uint64_t seed)
{
  h->slots = c->T * c->k;
  h->ldx = c->H + c->pad, h->ldp = c->H + c->pad;
  h->act = (size_t)(c->T * h->ldx + c->off) * 2;
  h->perm = (size_t)(h->slots * h->ldp + c->off) * 2;
  h->wb = (size_t)h->slots * type_bytes(c->w_type);
  h->topk = xmalloc((size_t)h->slots * 4);
  for (int64_t t = 0; t < c->T; t++)
    for (int s = 0; s < c->k; s++)
      h->topk[t * c->k + s] = moe_expert(c, t, s, &seed);
  h->x = xmalloc(h->act), h->yp = xmalloc(h->perm), h->dy = xmalloc(h->act);
  h->w = xmalloc(h->wb);
  random_typed(h->x, c->dtype, h->act / 2, seed + 1);
  random_typed(h->yp, c->dtype, h->perm / 2, seed + 2);
  random_typed(h->dy, c->dtype, h->act / 2, seed + 3);
  random_typed(h->w, c->w_type, (size_t)h->slots, seed + 4);
  h->xp = xmalloc(h->perm), h->y = xmalloc(h->act), h->dx = xmalloc(h->act);
  h->dyp = xmalloc(h->perm), h->dw = xmalloc(h->wb);
  size_t ints = 2 * (size_t)c->E + 2 * (size_t)h->slots + 1;
  h->route = xmalloc(ints * 4), h->want_route = xmalloc(ints * 4);
}

static void *moe_put(const void *host, size_t bytes)
{
  void *d = NULL;
  CHECK_HIP(hipMalloc(&d, bytes));
  put(d, host, bytes);
  return d;
}

static void moe_make_dev(tj_runtime *rt, const moe_case *c, const moe_host *h,
                         moe_dev *d)
{
  d->topk = moe_put(h->topk, (size_t)h->slots * 4);
  d->x = moe_put(h->x, h->act), d->yp = moe_put(h->yp, h->perm);
  d->dy = moe_put(h->dy, h->act), d->w = moe_put(h->w, h->wb);
  d->xp = dev_poisoned(h->perm), d->y = dev_poisoned(h->act);
  d->dx = dev_poisoned(h->act), d->dyp = dev_poisoned(h->perm);
  d->dw = dev_poisoned(h->wb);
  CHECK_TJ(rt, tj_moe_route_workspace(rt, c->T, c->k, c->E, &d->ws_bytes));
  d->ws = dev_poisoned(d->ws_bytes);
  size_t ints = 2 * (size_t)c->E + 2 * (size_t)h->slots + 1;
  d->route = dev_poisoned(ints * 4);
  int32_t *p = d->route;
  d->r = (tj_moe_routing){p, p + c->E, p + 2 * c->E, p + 2 * c->E + h->slots,
                          p + 2 * c->E + 2 * h->slots};
}

static void moe_free(moe_host *h, moe_dev *d)
{
  void *hp[] = {h->topk, h->route, h->want_route, h->x, h->yp, h->dy, h->w,
                h->xp, h->y, h->dx, h->dyp, h->dw};
  void *dp[] = {d->topk, d->x, d->yp, d->dy, d->w, d->xp, d->y, d->dx,
                d->dyp, d->dw, d->ws, d->route};
  for (size_t i = 0; i < sizeof hp / sizeof hp[0]; i++)
    free(hp[i]);
  for (size_t i = 0; i < sizeof dp / sizeof dp[0]; i++)
    hipFree(dp[i]);
}

/* Every call of the permutation, forward and backward, on stream. */
static void moe_calls(tj_runtime *rt, const moe_case *c, const moe_host *h,
                      const moe_dev *d, hipStream_t s)
{
  int64_t T = c->T, H = c->H, lx = h->ldx, lp = h->ldp;
  int k = c->k, dt = c->dtype, wt = c->w_type;
  const int32_t *map = d->r.row_of_slot;
  char *x = (char *)d->x + 2 * c->off, *yp = (char *)d->yp + 2 * c->off;
  char *dy = (char *)d->dy + 2 * c->off, *xp = (char *)d->xp + 2 * c->off;
  char *y = (char *)d->y + 2 * c->off, *dx = (char *)d->dx + 2 * c->off;
  char *dyp = (char *)d->dyp + 2 * c->off;
  CHECK_TJ(rt, tj_moe_route(rt, s, d->topk, T, k, c->E, &d->r, d->ws,
                            d->ws_bytes));
  CHECK_TJ(rt, tj_moe_permute(rt, s, dt, x, lx, map, T, k, H, xp, lp));
  CHECK_TJ(rt, tj_moe_unpermute(rt, s, dt, yp, lp, map, T, k, H, wt, d->w, y,
                                lx));
  CHECK_TJ(rt, tj_moe_permute_bwd(rt, s, dt, yp, lp, map, T, k, H, dx, lx));
  CHECK_TJ(rt, tj_moe_unpermute_bwd(rt, s, dt, dy, lx, yp, lp, map, T, k, H,
                                    wt, d->w, dyp, lp, d->dw));
}

static void moe_get(const moe_case *c, moe_host *h, const moe_dev *d)
{
  size_t ints = 2 * (size_t)c->E + 2 * (size_t)h->slots + 1;
  get(h->route, d->route, ints * 4);
  get(h->xp, d->xp, h->perm), get(h->y, d->y, h->act);
  get(h->dx, d->dx, h->act), get(h->dyp, d->dyp, h->perm);
  get(h->dw, d->dw, h->wb);
}

static void moe_check_route(const moe_case *c, const moe_host *h)
{
  int32_t *w = h->want_route;
  tj__oracle_moe_route(h->topk, (size_t)c->T, c->k, c->E, w, w + c->E,
                       w + 2 * c->E, w + 2 * c->E + h->slots,
                       w + 2 * c->E + 2 * h->slots);
  size_t ints = 2 * (size_t)c->E + 2 * (size_t)h->slots + 1;
  for (size_t i = 0; i < ints; i++)
    if (h->route[i] != w[i])
      ck_abort_msg("T=%lld k=%d E=%d: routing int %zu (counts, offsets, "
                   "row_of_slot, slot_of_row, dropped) is %d, want %d",
                   (long long)c->T, c->k, c->E, i, h->route[i], w[i]);
}

/* got (rows x H at stride ld, past off) against want (dense): each within
 * rel of its magnitude plus abs; NAN in want: the row must be untouched
 * (poison), as must the padding. */
static void moe_check_rows(const char *what, const moe_case *c, const void *got,
                           int64_t rows, int64_t ld, const double *want,
                           double rel, double abs_tol)
{
  const uint16_t *g16 = (const uint16_t *)got + c->off;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < ld; j++) {
      uint16_t bits = g16[r * ld + j];
      double w = j < c->H ? want[r * c->H + j] : NAN;
      if (isnan(w)) {
        if (bits != 0xffff)
          ck_abort_msg("%s[%lld][%lld] = %#x was written; nothing maps "
                       "there", what, (long long)r, (long long)j, bits);
        continue;
      }
      double v = tj__dtype_load(g16, c->dtype, (size_t)(r * ld + j));
      if (!(fabs(v - w) <= rel * fabs(w) + abs_tol))
        ck_abort_msg("T=%lld k=%d E=%d H=%lld: %s[%lld][%lld] = %.9g, want "
                     "%.9g", (long long)c->T, c->k, c->E, (long long)c->H,
                     what, (long long)r, (long long)j, v, w);
    }
}

/* Twice the half-ulp of a type, relative: one rounding of an fp32 sum. */
static double moe_rel(int t)
{
  return t == TJ_DTYPE_F32 ? 0x1p-22 : t == TJ_DTYPE_F16 ? 0x1p-10 : 0x1p-7;
}

static void moe_check_outputs(const moe_case *c, const moe_host *h)
{
  moe_check_route(c, h);
  const int32_t *map = h->want_route + 2 * c->E;
  size_t T = (size_t)c->T, H = (size_t)c->H;
  int k = c->k;
  const uint16_t *x = (const uint16_t *)h->x + c->off;
  const uint16_t *yp = (const uint16_t *)h->yp + c->off;
  const uint16_t *dy = (const uint16_t *)h->dy + c->off;
  double *want = xmalloc((size_t)h->slots * H * sizeof *want);
  tj__oracle_moe_permute(c->dtype, x, (size_t)h->ldx, map, T, k, H,
                         c->w_type, NULL, want);
  moe_check_rows("xp", c, h->xp, h->slots, h->ldp, want, 0, 0);
  tj__oracle_moe_unpermute(c->dtype, yp, (size_t)h->ldp, map, T, k, H,
                           c->w_type, h->w, want);
  moe_check_rows("y", c, h->y, c->T, h->ldx, want, moe_rel(c->dtype), 1e-6);
  tj__oracle_moe_unpermute(c->dtype, yp, (size_t)h->ldp, map, T, k, H,
                           c->w_type, NULL, want);
  moe_check_rows("dx", c, h->dx, c->T, h->ldx, want, moe_rel(c->dtype), 1e-6);
  tj__oracle_moe_permute(c->dtype, dy, (size_t)h->ldx, map, T, k, H,
                         c->w_type, h->w, want);
  moe_check_rows("dyp", c, h->dyp, h->slots, h->ldp, want, moe_rel(c->dtype),
                 1e-6);
  tj__oracle_moe_dw(c->dtype, dy, (size_t)h->ldx, yp, (size_t)h->ldp, map, T,
                    k, H, want);
  for (int64_t i = 0; i < h->slots; i++) {
    double g = tj__dtype_load(h->dw, c->w_type, (size_t)i);
    /* fp32 sums of H products of magnitude at most 1 */
    double tol = moe_rel(c->w_type) * fabs(want[i]) + (double)H * 0x1p-22;
    if (!(fabs(g - want[i]) <= tol))
      ck_abort_msg("T=%lld k=%d E=%d H=%lld: dw[%lld] = %.9g, want %.9g",
                   (long long)c->T, c->k, c->E, (long long)c->H, (long long)i,
                   g, want[i]);
  }
  free(want);
}

/* Every output of every call against the oracle: uniform, skewed and
 * empty-expert routings, odd H and padded, misaligned rows; and a second
 * run gives the same bits. */
START_TEST(moe_every_element)
{
  const moe_case *c = &moe_cases[_i];
  tj_runtime *rt = open_gpu();
  moe_host h, h2;
  moe_dev d;
  moe_make_host(c, &h, 900 + (uint64_t)_i);
  moe_make_dev(rt, c, &h, &d);
  moe_calls(rt, c, &h, &d, NULL);
  CHECK_HIP(hipStreamSynchronize(NULL));
  moe_get(c, &h, &d);
  moe_check_outputs(c, &h);
  moe_make_host(c, &h2, 900 + (uint64_t)_i);
  moe_calls(rt, c, &h, &d, NULL);
  CHECK_HIP(hipStreamSynchronize(NULL));
  moe_get(c, &h2, &d);
  ck_assert(memcmp(h.y, h2.y, h.act) == 0 && memcmp(h.dx, h2.dx, h.act) == 0);
  ck_assert(memcmp(h.dw, h2.dw, h.wb) == 0);
  printf("moe: T=%lld k=%d E=%d H=%lld every output as the oracle, the same "
         "bits twice\n", (long long)c->T, c->k, c->E, (long long)c->H);
  moe_dev none = {0};
  moe_free(&h2, &none);
  moe_free(&h, &d);
  tj_runtime_close(rt);
}
END_TEST

/* The calls captured into a graph on a stream, replayed after the
 * routing in the same buffer changed: the bits the calls give on the
 * stream for that routing. */
START_TEST(moe_captured_into_a_graph)
{
  const moe_case *c = &moe_cases[0];
  tj_runtime *rt = open_gpu();
  moe_host h, h2;
  moe_dev d;
  moe_make_host(c, &h, 31);
  moe_make_host(c, &h2, 32); /* another routing, and other data */
  moe_make_dev(rt, c, &h, &d);
  hipStream_t s;
  CHECK_HIP(hipStreamCreate(&s));
  hipGraph_t graph;
  hipGraphExec_t exec;
  CHECK_HIP(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
  moe_calls(rt, c, &h, &d, s);
  CHECK_HIP(hipStreamEndCapture(s, &graph));
  CHECK_HIP(hipGraphInstantiateWithFlags(&exec, graph, 0));
  put(d.topk, h2.topk, (size_t)h2.slots * 4);
  CHECK_HIP(hipGraphLaunch(exec, s));
  CHECK_HIP(hipStreamSynchronize(s));
  memcpy(h2.x, h.x, h.act), memcpy(h2.yp, h.yp, h.perm);
  memcpy(h2.dy, h.dy, h.act), memcpy(h2.w, h.w, h.wb);
  moe_get(c, &h2, &d);
  moe_check_outputs(c, &h2);
  CHECK_HIP(hipGraphExecDestroy(exec));
  CHECK_HIP(hipGraphDestroy(graph));
  CHECK_HIP(hipStreamDestroy(s));
  moe_dev none = {0};
  moe_free(&h2, &none);
  moe_free(&h, &d);
  tj_runtime_close(rt);
}
END_TEST

/* The host calls on the host arrays of a case, outputs poisoned first:
 * every output as the oracle, the unwritten parts as they were. */
START_TEST(moe_host_calls_match_the_oracle)
{
  const moe_case *c = &moe_cases[_i];
  tj_runtime *rt = open_gpu();
  moe_host h;
  moe_make_host(c, &h, 700 + (uint64_t)_i);
  size_t ints = 2 * (size_t)c->E + 2 * (size_t)h.slots + 1;
  memset(h.route, 0xff, ints * 4);
  void *outs[] = {h.xp, h.y, h.dx, h.dyp, h.dw};
  size_t sizes[] = {h.perm, h.act, h.act, h.perm, h.wb};
  for (int i = 0; i < 5; i++)
    memset(outs[i], 0xff, sizes[i]);
  int32_t *p = h.route;
  tj_moe_routing r = {p, p + c->E, p + 2 * c->E, p + 2 * c->E + h.slots,
                      p + 2 * c->E + 2 * h.slots};
  int64_t T = c->T, H = c->H, lx = h.ldx, lp = h.ldp;
  int k = c->k, dt = c->dtype, wt = c->w_type, o = c->off;
  const uint16_t *x = (uint16_t *)h.x + o, *yp = (uint16_t *)h.yp + o;
  const uint16_t *dy = (uint16_t *)h.dy + o;
  CHECK_TJ(rt, tj_moe_route_host(rt, h.topk, T, k, c->E, &r));
  const int32_t *map = r.row_of_slot;
  CHECK_TJ(rt, tj_moe_permute_host(rt, dt, x, lx, map, T, k, H,
                                   (uint16_t *)h.xp + o, lp));
  CHECK_TJ(rt, tj_moe_unpermute_host(rt, dt, yp, lp, map, T, k, H, wt, h.w,
                                     (uint16_t *)h.y + o, lx));
  CHECK_TJ(rt, tj_moe_permute_bwd_host(rt, dt, yp, lp, map, T, k, H,
                                       (uint16_t *)h.dx + o, lx));
  CHECK_TJ(rt, tj_moe_unpermute_bwd_host(rt, dt, dy, lx, yp, lp, map, T, k, H,
                                         wt, h.w, (uint16_t *)h.dyp + o, lp,
                                         h.dw));
  moe_check_outputs(c, &h);
  moe_dev none = {0};
  moe_free(&h, &none);
  tj_runtime_close(rt);
}
END_TEST

/* tj_verify of each entry, as tokitai-jit --run calls it. */
START_TEST(moe_verify_every_entry)
{
  static const char *const entries[] = {"moe_route_count", "moe_route_scan",
                                        "moe_route_rank", "moe_permute",
                                        "moe_unpermute", "moe_unpermute_bwd"};
  tj_runtime *rt = open_gpu();
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
    const uint64_t sizes[] = {1000, 1 << 20};
    for (int j = 0; j < 2; j++) {
      tj_report r;
      int rc = tj_verify(rt, entries[i], sizes[j], 5, &r);
      ck_assert_msg(rc == TJ_OK, "%s n=%llu: %s: %s", entries[i],
                    (unsigned long long)sizes[j], tj_err_name(rc),
                    tj_errmsg(rt));
      ck_assert_str_eq(r.kernel, entries[i]);
      ck_assert_uint_gt(r.compared, 0);
      ck_assert_int_eq(r.within_tolerance, 1);
    }
  }
  tj_runtime_close(rt);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("kernels_gpu");
  TCase *verify = test_case(s, "verify", 900);
  tcase_add_loop_test(verify, verify_elementwise_small_and_odd_sizes, 0, N_EW);
  tcase_add_loop_test(verify, verify_elementwise_2_27, 0, N_EW);
  tcase_add_test(verify, verify_gemm_every_element);
  tcase_add_test(verify, verify_gemm_sampled_rows);
  tcase_add_test(verify, verify_gemm_skinny_entries);
  tcase_add_test(verify, verify_names_what_ran);
  tcase_add_test(verify, verify_is_reproducible_from_its_seed);
  TCase *calls = test_case(s, "calls", 900);
  tcase_add_loop_test(calls, elementwise_misaligned_and_in_place, 0, N_EW);
  tcase_add_loop_test(calls, host_calls_match_the_oracle, 0, N_EW);
  tcase_add_test(calls, host_add_wraps_as_twos_complement);
  tcase_add_test(calls, gelu_extreme_inputs);
  tcase_add_test(calls, host_failure_leaves_the_output);
  tcase_add_test(calls, repeated_calls_hit_the_memory_table);
  TCase *gemm = test_case(s, "gemm", 900);
  tcase_add_loop_test(gemm, gemm_device_call_shapes, 0,
                      sizeof gemm_shapes / sizeof gemm_shapes[0]);
  tcase_add_test(gemm, gemm_skinny_alpha_zero_reads_no_operand);
  tcase_add_test(gemm, gemm_padded_leading_dimensions);
  tcase_add_test(gemm, gemm_misaligned_on_a_stream);
  tcase_add_test(gemm, gemm_host_call);
  tcase_add_test(gemm, gemm_split_k_shapes);
  tcase_add_test(gemm, gemm_split_k_is_deterministic);
  tcase_add_loop_test(gemm, gemm_skinny_tc_shapes, 0, N_SKINNY_ROWS);
  tcase_add_test(gemm, gemm_skinny_tc_split_and_wide_shapes);
  tcase_add_test(gemm, gemm_skinny_tc_alpha_zero_reads_no_operand);
  tcase_add_test(gemm, gemm_skinny_tc_is_deterministic);
  /* The Hopper paths in a case of their own (CK_RUN_CASE=hopper runs
   * them alone). */
  TCase *hopper = test_case(s, "hopper", 900);
  tcase_add_test(hopper, gemm_hopper_path_shapes);
  tcase_add_test(hopper, gemm_hopper_persistent_shapes);
  tcase_add_test(hopper, gemm_hopper_multicast_shapes);
  tcase_add_test(hopper, gemm_hopper_narrow_tile_shapes);
  tcase_add_test(hopper, gemm_hopper_is_deterministic_and_switchable);
  /* The Hopper skinny kernel's in a case of their own (CK_RUN_CASE=
   * skinny), much shorter than the tiles'. */
  TCase *skinny = test_case(s, "skinny", 300);
  tcase_add_test(skinny, gemm_hopper_skinny_shapes);
  tcase_add_test(skinny, gemm_hopper_skinny_evict_first_same_bits);
  tcase_add_test(skinny, gemm_hopper_skinny_early_launch_waits);
  tcase_add_test(skinny, gemm_captured_into_a_graph);
  /* The GEMM family's configurations (CK_RUN_CASE=family). */
  TCase *family = test_case(s, "family", 600);
  tcase_add_test(family, gemm_family_every_configuration);
  tcase_add_test(family, gemm_family_tensor_core_path);
  tcase_add_test(family, gemm_family_hopper);
  tcase_add_test(family, gemm_family_host_call);
  tcase_add_test(family, gemm_family_background_first_call);
  /* The grouped GEMM (CK_RUN_CASE=grouped). */
  TCase *grouped = test_case(s, "grouped", 600);
  tcase_add_test(grouped, grouped_gemm_m_grouped);
  tcase_add_test(grouped, grouped_gemm_m_grouped_sm90a);
  tcase_add_test(grouped, grouped_gemm_k_grouped);
  tcase_add_test(grouped, grouped_gemm_k_grouped_sm90a);
  tcase_add_loop_test(grouped, grouped_gemm_captured_and_rerouted, 0, 2);
  tcase_add_test(grouped, grouped_gemm_host_call);
  /* The MoE permutation (CK_RUN_CASE=moe). */
  TCase *moe = test_case(s, "moe", 600);
  tcase_add_loop_test(moe, moe_every_element, 0, N_MOE);
  tcase_add_test(moe, moe_captured_into_a_graph);
  tcase_add_loop_test(moe, moe_host_calls_match_the_oracle, 0, 3);
  tcase_add_test(moe, moe_verify_every_entry);
  return run_gpu_suite(s, "the kernel GPU suite");
}
