/*
 * check_tuning.c: the GEMM tuning database without a GPU: the tuning
 * table, the shape class, decisions read by a
 * compile-only sm_90 runtime (tj_gemm_f16_kernel and tj_gemm_f16_split
 * report them), decisions ignored (unknown or damaged configs) or keyed
 * out (another compiler, arch or platform), the environment read once,
 * tj_cache_list_tuning, and the table of configurations, every entry of
 * which is compiled here for sm_90a.  check_tuning_gpu times for real.
 */
#include "testknobs.h"
#include "testsql.h"
#include "internal.h"
#include "codeobj.h"
#include "gemm/plan.h"

#include "tokitai-jit/kernels.h"

#include <stdint.h>

#define FAKE(i) ((void *)((uintptr_t)(i) << 32))
#if defined(TJ_PLATFORM_NVIDIA)
#define TJ_PLATFORM_IS_NVIDIA 1
#else
#define TJ_PLATFORM_IS_NVIDIA 0
#endif

static char *dir, *path;

static void setup(void)
{
  dir = test_tmpdir();
  path = test_path(dir, "cache.db");
  unsetenv("TJ_GEMM_SPLITK");
  unsetenv("TJ_GEMM_SM90A");
}

static void teardown(void)
{
  free(path);
  free(dir);
}

/* A compile-only runtime for arch on the test's cache. */
static tj_runtime *open_arch(const char *arch, unsigned flags)
{
  tj_options o = {0};
  o.arch = arch;
  o.cache_path = path;
  o.flags = TJ_NO_DEVICE | flags;
  tj_runtime *rt = NULL;
  int rc = tj_runtime_open(&rt, &o);
  ck_assert_msg(rc == TJ_OK, "open %s: %s", arch, tj_errmsg(rt));
  return rt;
}

/* Store a decision as a library would, with SQL: config and the key
 * columns as given. */
static void insert_decision(const char *arch, const char *platform,
                            const char *compiler, const char *cls,
                            const char *config_sql)
{
  char *sql = NULL;
  ck_assert_int_ge(asprintf(&sql, "INSERT OR REPLACE INTO tuning VALUES ("
                            "'gemm_f16', '%s', '%s', '%s', '%s', %s, 128, "
                            "4096, 4096, 'NVIDIA H200', 10, "
                            "'sm90a_128x128_split2\t0.050000\t10\n"
                            "sm90a_128x128\t0.090000\t10\n', 'tune', 1)",
                            arch, platform, compiler, cls, config_sql), 0);
  tsql_exec(path, sql);
  free(sql);
}

/* The same for op (a family op such as "gemm_bf16_bf16_bf16_nt_none"). */
static void insert_op_decision(const char *op, const char *compiler,
                               const char *cls, const char *config)
{
  char *sql = NULL;
  ck_assert_int_ge(asprintf(&sql, "INSERT OR REPLACE INTO tuning VALUES ("
                            "'%s', 'sm_90', 'nvidia', '%s', '%s', '%s', 128, "
                            "4096, 4096, 'NVIDIA H200', 10, '%s\t0.05\t10\n', "
                            "'tune', 1)", op, compiler, cls, config, config),
                   0);
  tsql_exec(path, sql);
  free(sql);
}

/* The configuration tj_gemm runs for bf16 in and out, layout trans_a,
 * trans_b, M x N x K (dense, aligned). */
static const char *family_for(tj_runtime *rt, int trans_a, int trans_b,
                              int M, int N, int K)
{
  tj_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.size = sizeof d;
  d.a_type = d.b_type = d.c_type = TJ_DTYPE_BF16;
  d.trans_a = trans_a, d.trans_b = trans_b;
  d.m = M, d.n = N, d.k = K, d.alpha = 1.0f;
  d.a = FAKE(1), d.lda = trans_a ? M : K;
  d.b = FAKE(2), d.ldb = trans_b ? K : N;
  d.c = FAKE(3), d.ldc = N;
  const char *name = tj_gemm_kernel(rt, &d);
  ck_assert_msg(name != NULL, "%s", tj_errmsg(rt));
  return name;
}

static const char *entry_for(tj_runtime *rt, int M, int N, int K)
{
  return tj_gemm_f16_kernel(rt, M, N, K, FAKE(1), K, FAKE(2), N, FAKE(3), N);
}

static int split_for(tj_runtime *rt, int M, int N, int K)
{
  return tj_gemm_f16_split(rt, M, N, K, FAKE(1), K, FAKE(2), N, FAKE(3), N);
}

/* ------------------------------------------------------------ the table */

START_TEST(table_is_made)
{
  tj_runtime *rt = test_knobs_from_env(open_arch(TEST_ARCH, 0));
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_runtime_close(rt);
  ck_assert_int_eq(tsql_int(path, "PRAGMA user_version"), 4);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM sqlite_master WHERE "
                                  "type = 'table' AND name = 'tuning'"), 1);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM tuning"), 0);
  tj_cache *c = NULL;
  ck_assert_int_eq(tj_cache_open(&c, path, TJ_CACHE_READONLY), TJ_OK);
  ck_assert_int_eq(tj_cache_list_tuning(c, NULL, NULL), TJ_EINVAL);
  tj_cache_close(c);
}
END_TEST

static int count_visit(const tj_tuning *t, void *ctx)
{
  (void)t;
  ++*(int *)ctx;
  return 0;
}

static int count_known(const tj_tuning *t, void *ctx)
{
  *(int *)ctx += t->known;
  return 0;
}

/* A file without decisions, read-only: none listed, and a runtime plans
 * by the rule. */
START_TEST(readonly_file_without_decisions)
{
  tj_runtime *rt = test_knobs_from_env(open_arch(TEST_ARCH, 0));
  tj_runtime_close(rt);
  tj_cache *c = NULL;
  int n = 0;
  ck_assert_int_eq(tj_cache_open(&c, path, TJ_CACHE_READONLY), TJ_OK);
  ck_assert_int_eq(tj_cache_list_tuning(c, count_visit, &n), TJ_OK);
  ck_assert_int_eq(n, 0);
  tj_cache_close(c);
  rt = test_knobs_from_env(open_arch(TEST_ARCH, TJ_CACHE_READONLY)); /* sm_90 on NVIDIA */
  ck_assert_ptr_nonnull(tj_runtime_cache_path(rt));
  if (TJ_PLATFORM_IS_NVIDIA)
    ck_assert_int_eq(split_for(rt, 64, 4096, 4096), 4);
  tj_runtime_close(rt);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM tuning"), 0);
}
END_TEST

/* ------------------------------------------------------------ shape class */

/* The class on an H200's 132 SMs (sms_of: on another count). */
static int sms_of = 132;
static const char *cls(int M, int N, int K, const void *C, int ldc)
{
  static char out[TJ__SHAPE_CLASS_MAX];
  tj__gemm_shape_class(sms_of, M, N, K, C, ldc, out);
  return out;
}

START_TEST(shape_classes)
{
  const void *c = FAKE(3), *c2 = (const char *)FAKE(3) + 2;
  ck_assert_str_eq(cls(128, 4096, 4096, c, 4096), "t1x32x64/c4/s132");
  /* Shapes with the same tiles share a class; one more row does not. */
  ck_assert_str_eq(cls(100, 4000, 4040, c, 4000), "t1x32x64/c4/s132");
  ck_assert_str_eq(cls(129, 4096, 4096, c, 4096), "t2x32x64/c4/s132");
  /* M <= 16, the skinny kernel's rows: 0 rows of tiles, classes (and
   * configurations) of their own. */
  ck_assert_str_eq(cls(9, 8, 8, c, 8), "t0x1x1/c4/s132");
  ck_assert_str_eq(cls(16, 4096, 4096, c, 4096), "t0x32x64/c4/s132");
  ck_assert_str_eq(cls(17, 8, 8, c, 8), "t1x1x1/c4/s132");
  /* C as the epilogue stores it: pairs, or single halves. */
  ck_assert_str_eq(cls(128, 4096, 4096, c, 4097), "t1x32x64/c2/s132");
  ck_assert_str_eq(cls(128, 4096, 4096, c2, 4096), "t1x32x64/c2/s132");
  /* Exact to 64 tiles, then eight steps per power of two. */
  ck_assert_str_eq(cls(8192, 8192, 4096, c, 8192), "t64x64x64/c4/s132");
  ck_assert_str_eq(cls(8193, 8192, 8192, c, 8192), "t72x64x128/c4/s132");
  ck_assert_str_eq(cls(4096, 11008, 11008, c, 11008), "t32x88x176/c4/s132");
  ck_assert_str_eq(cls(16384 + 1, 129 * 128, 1025 * 64, c, 8), "t144x144x1152/c4/s132");
  ck_assert_str_eq(cls(INT32_MAX - 256, 1, 1, c, 2),
                   "t16777216x1x1/c4/s132");
  /* Another SM count, another class (its plans fill other SMs). */
  sms_of = 114;
  ck_assert_str_eq(cls(128, 4096, 4096, c, 4096), "t1x32x64/c4/s114");
  sms_of = 132;
}
END_TEST

/* A --tune runs the timed rounds that fit its time, from 5 to 50. */
START_TEST(tune_rounds_keep_to_the_budget)
{
  ck_assert_int_eq(tj__gemm_tune_rounds(800.0, 0.0), 50);
  ck_assert_int_eq(tj__gemm_tune_rounds(800.0, 100.0), 8);
  ck_assert_int_eq(tj__gemm_tune_rounds(800.0, 400.0), 5);
  ck_assert_int_eq(tj__gemm_tune_rounds(800.0, 10.0), 50);
  ck_assert_int_eq(tj__gemm_tune_rounds(-300.0, 100.0), 5);
}
END_TEST

/* ------------------------------------------------------------ decisions */

/* A decision in the cache is what a later runtime runs: here the split
 * where the heuristic splits 4 ways, and the 128-column tile where it
 * takes the 256-column one. */
START_TEST(stored_decisions_are_used)
{
  if (!TJ_PLATFORM_IS_NVIDIA)
    return; /* no Hopper path: nothing to decide (below, on AMD) */
  tj_runtime *rt = test_knobs_from_env(open_arch("sm_90", 0));
  const char *compiler = tj_runtime_compiler(rt);
  ck_assert_int_eq(split_for(rt, 64, 4096, 4096), 4); /* the heuristic */
  ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096),
                   "gemm_f16_f16_f16_nn_none_sm90a_128x256_mc2");
  insert_decision("sm_90", "nvidia", compiler, "t1x32x64/c4/s132",
                  "'sm90a_128x128_split2'");
  insert_decision("sm_90", "nvidia", compiler, "t32x32x64/c4/s132",
                  "'sm90a_128x128'");
  /* The skinny kernel's classes (M <= 16) take its configurations; a
   * row pairing a class with the other kind's configuration (no tuner of
   * this library writes one) is not followed: a skinny entry computes 16
   * rows, a tile's plan assumes its own. */
  char *rule256 = strdup(entry_for(rt, 256, 4096, 4096)); /* rt's */
  insert_decision("sm_90", "nvidia", compiler, "t0x32x64/c4/s132",
                  "'sm90a_skinny_n128_k2'");
  insert_decision("sm_90", "nvidia", compiler, "t2x32x64/c4/s132",
                  "'sm90a_skinny_n128_k1'");
  insert_decision("sm_90", "nvidia", compiler, "t0x86x64/c4/s132",
                  "'sm90a_128x128'");
  /* Tiles the rule never runs, and a TMA store (what --tune may
   * record). */
  insert_decision("sm_90", "nvidia", compiler, "t1x88x64/c4/s132",
                  "'sm90a_128x128_persistent'");
  insert_decision("sm_90", "nvidia", compiler, "t16x16x32/c4/s132",
                  "'sm90a_128x256_persistent_tmastore'");
  /* This runtime has met both classes: its memo answers. */
  ck_assert_int_eq(split_for(rt, 64, 4096, 4096), 4);
  rt = test_reopen_knobs(rt, open_arch("sm_90", 0));
  ck_assert_int_eq(split_for(rt, 64, 4096, 4096), 2);
  /* A device with another SM count (an H100 PCIe's 114) has classes of
   * its own: these decisions are not its; the heuristic splits 3 ways. */
  rt->sms = 114;
  ck_assert_int_eq(split_for(rt, 64, 4096, 4096), 3);
  ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096),
                   "gemm_f16_f16_f16_nn_none_sm90a_128x256_mc2");
  rt->sms = 132;
  ck_assert_str_eq(entry_for(rt, 64, 4096, 4096),
                   "gemm_f16_f16_f16_nn_none_sm90a_128x128_splitk");
  ck_assert_int_eq(split_for(rt, 100, 4000, 4040), 2); /* same class */
  ck_assert_int_eq(split_for(rt, 128, 2048, 4096), 4); /* another */
  ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096), "gemm_f16_f16_f16_nn_none_sm90a_128x128");
  ck_assert_int_eq(split_for(rt, 4096, 4096, 4096), 1);
  ck_assert_str_eq(entry_for(rt, 4, 4096, 4096), "gemm_f16_f16_f16_nn_none_sm90a_skinny_k2");
  ck_assert_int_eq(split_for(rt, 16, 4096, 4096), 2);
  ck_assert_str_eq(entry_for(rt, 256, 4096, 4096), rule256);
  free(rule256);
  ck_assert_str_eq(entry_for(rt, 1, 11008, 4096), "gemm_f16_f16_f16_nn_none_sm90a_skinny");
  ck_assert_str_eq(entry_for(rt, 128, 11008, 4096),
                   "gemm_f16_f16_f16_nn_none_sm90a_128x128_persistent");
  ck_assert_str_eq(entry_for(rt, 2048, 2048, 2048),
                   "gemm_f16_f16_f16_nn_none_sm90a_128x256_persistent");
  /* C unaligned for pairs: another class, no decision. */
  ck_assert_int_eq(tj_gemm_f16_split(rt, 64, 4096, 4096, FAKE(1), 4096,
                                     FAKE(2), 4096, FAKE(3), 4097), 4);
  /* TJ_GEMM_SPLITK still forces; TJ_GEMM_SM90A=0 still turns it off. */
  setenv("TJ_GEMM_SPLITK", "3", 1);
  rt = test_reopen_knobs(rt, open_arch("sm_90", 0));
  ck_assert_int_eq(split_for(rt, 64, 4096, 4096), 3);
  ck_assert_str_eq(entry_for(rt, 4, 4096, 4096), "gemm_f16_f16_f16_nn_none_sm90a_skinny_k3");
  unsetenv("TJ_GEMM_SPLITK");
  setenv("TJ_GEMM_SM90A", "0", 1);
  rt = test_reopen_knobs(rt, open_arch("sm_90", 0));
  ck_assert_str_eq(entry_for(rt, 64, 4096, 4096), "gemm_f16");
  tj_runtime_close(rt);
  unsetenv("TJ_GEMM_SM90A");
}
END_TEST

/* The family's decisions are keyed by its op (types, layout, epilogue)
 * as well as the class: a bf16 NT decision steers bf16 NT calls only,
 * tj_gemm_f16's steer none of them, and a decision of the wrong kind (a
 * tile's for a skinny call) is not followed. */
START_TEST(family_decisions_are_keyed_by_op)
{
  if (!TJ_PLATFORM_IS_NVIDIA)
    return;
  tj_runtime *rt = test_knobs_from_env(open_arch("sm_90", 0));
  char *compiler = strdup(tj_runtime_compiler(rt));
  ck_assert_str_eq(family_for(rt, 0, 1, 4096, 4096, 4096),
                   "gemm_bf16_bf16_bf16_nt_none_sm90a_128x256_mc2");
  tj_runtime_close(rt);
  insert_op_decision("gemm_bf16_bf16_bf16_nt_none", compiler,
                     "t32x32x64/c4/s132", "sm90a_128x128_persistent");
  insert_op_decision("gemm_f16", compiler, "t32x32x64/c4/s132",
                     "sm90a_128x64");
  insert_op_decision("gemm_bf16_bf16_bf16_nn_none", compiler,
                     "t0x32x64/c4/s132", "sm90a_skinny_n256_k4");
  insert_op_decision("gemm_bf16_bf16_bf16_nt_none", compiler,
                     "t0x32x64/c4/s132", "sm90a_128x128");
  rt = test_knobs_from_env(open_arch("sm_90", 0));
  ck_assert_str_eq(family_for(rt, 0, 1, 4096, 4096, 4096),
                   "gemm_bf16_bf16_bf16_nt_none_sm90a_128x128_persistent");
  ck_assert_str_eq(family_for(rt, 0, 0, 4096, 4096, 4096),
                   "gemm_bf16_bf16_bf16_nn_none_sm90a_128x256_mc2");
  ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096), "gemm_f16_f16_f16_nn_none_sm90a_128x64");
  ck_assert_str_eq(family_for(rt, 0, 0, 4, 4096, 4096),
                   "gemm_bf16_bf16_bf16_nn_none_sm90a_skinny256_k4");
  ck_assert_str_eq(family_for(rt, 0, 1, 4, 4096, 4096),
                   "gemm_bf16_bf16_bf16_nt_none_sm90a_skinny_k3");
  /* What a tune of a family op takes (tj__gemm_decision_take, after it
   * stores the decision) is what that op's calls plan with at once, for
   * the class it was tuned at; other ops keep theirs. */
  tj__gemm_config taken;
  ck_assert(tj__gemm_config_parse("sm90a_128x64", &taken));
  const char *tn = family_for(rt, 1, 0, 8, 4096, 4096);
  ck_assert_str_ne(tn, "gemm_bf16_bf16_bf16_tn_none_sm90a_128x64");
  tj__gemm_decision_take(rt, "gemm_bf16_bf16_bf16_tn_none", 8, 4096, 4096,
                         &taken);
  ck_assert_str_eq(family_for(rt, 1, 0, 8, 4096, 4096),
                   "gemm_bf16_bf16_bf16_tn_none_sm90a_128x64");
  ck_assert_str_ne(family_for(rt, 1, 1, 8, 4096, 4096),
                   "gemm_bf16_bf16_bf16_tt_none_sm90a_128x64");
  ck_assert_str_eq(family_for(rt, 0, 1, 4096, 4096, 4096),
                   "gemm_bf16_bf16_bf16_nt_none_sm90a_128x128_persistent");
  tj__gemm_decision_take(rt, "gemm_bf16_bf16_bf16_nt_none", 4096, 4096, 4096,
                         &taken);
  ck_assert_str_eq(family_for(rt, 0, 1, 4096, 4096, 4096),
                   "gemm_bf16_bf16_bf16_nt_none_sm90a_128x64");
  ck_assert_str_eq(entry_for(rt, 4096, 4096, 4096),
                   "gemm_f16_f16_f16_nn_none_sm90a_128x64");
  tj_runtime_close(rt);
  /* The family's ops are this library's: --list-tuning calls them
   * known. */
  tj_cache *c = NULL;
  int known = 0;
  ck_assert_int_eq(tj_cache_open(&c, path, TJ_CACHE_READONLY), TJ_OK);
  ck_assert_int_eq(tj_cache_list_tuning(c, count_known, &known), TJ_OK);
  ck_assert_int_eq(known, 4);
  tj_cache_close(c);
  free(compiler);
}
END_TEST

/* On AMD the tuned kernel does not exist: a decision changes nothing;
 * nor for 8 rows on NVIDIA, which the Hopper skinny kernel takes. */
START_TEST(decisions_change_nothing_without_the_hopper_path)
{
  tj_runtime *rt = test_knobs_from_env(open_arch(TEST_ARCH, 0));
  insert_decision(TEST_ARCH, tj_platform(), tj_runtime_compiler(rt),
                  "t1x32x64/c4/s132", "'sm90a_128x128_split2'");
  tj_runtime_close(rt);
  rt = test_knobs_from_env(open_arch(TEST_ARCH, 0));
  if (!TJ_PLATFORM_IS_NVIDIA)
    ck_assert_str_eq(entry_for(rt, 64, 4096, 4096), "gemm_f16");
  ck_assert_int_eq(split_for(rt, 8, 4096, 4096),
                   TJ_PLATFORM_IS_NVIDIA ? 3 : 1);
  if (TJ_PLATFORM_IS_NVIDIA)
    ck_assert_str_eq(entry_for(rt, 8, 4096, 4096),
                     "gemm_f16_f16_f16_nn_none_sm90a_skinny_k3");
  tj_runtime_close(rt);
}
END_TEST

/* A config this library lacks (a newer release's) is ignored and kept;
 * damaged rows (a config that is not a name, columns of the wrong type)
 * are ignored; the heuristic runs for each. */
START_TEST(unknown_and_damaged_decisions_are_ignored)
{
  if (!TJ_PLATFORM_IS_NVIDIA)
    return;
  tj_runtime *rt = test_knobs_from_env(open_arch("sm_90", 0));
  char *compiler = strdup(tj_runtime_compiler(rt));
  tj_runtime_close(rt);
  const char *classes[] = {"t1x32x64/c4/s132", "t2x32x64/c4/s132", "t3x32x64/c4/s132",
                           "t4x32x64/c4/s132", "t5x32x64/c4/s132",
                           "t7x32x64/c4/s132", "t8x32x64/c4/s132"};
  /* Near misses of this library's names (a split past its most, a
   * skinny cluster it does not build) are as unknown as a stranger's. */
  const char *configs[] = {"'sm90a_64x512_stream_k'", "'Bad Config!'", "42",
                           "x'73'", "''", "'sm90a_128x128_split17'",
                           "'sm90a_skinny_n256_k8'"};
  for (int i = 0; i < 7; i++)
    insert_decision("sm_90", "nvidia", compiler, classes[i], configs[i]);
  tsql_exec(path, "UPDATE tuning SET m = 'abc' WHERE shape_class = "
                  "'t5x32x64/c4/s132'; INSERT INTO tuning SELECT op, arch, "
                  "platform, compiler, 't6x32x64/c4/s132', 'sm90a_128x128_split3', "
                  "'x', n, k, device, runs, measured, origin, created FROM "
                  "tuning WHERE shape_class = 't1x32x64/c4/s132'");
  rt = test_knobs_from_env(open_arch("sm_90", 0));
  int heuristic[] = {1, 2, 1, 1, 1, 1, 1, 1}; /* M = 128 .. 1024 */
  for (int i = 0; i < 8; i++)
    ck_assert_msg(split_for(rt, 128 * (i + 1), 4096, 4096) == heuristic[i],
                  "class %d: split %d", i + 1,
                  split_for(rt, 128 * (i + 1), 4096, 4096));
  tj_runtime_close(rt);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM tuning"), 8);
  tj_cache *c = NULL;
  int rows = 0, known = 0;
  ck_assert_int_eq(tj_cache_open(&c, path, TJ_CACHE_READONLY), TJ_OK);
  ck_assert_int_eq(tj_cache_list_tuning(c, count_visit, &rows), TJ_OK);
  ck_assert_int_eq(tj_cache_list_tuning(c, count_known, &known), TJ_OK);
  ck_assert_int_eq(rows, 8);
  ck_assert_int_eq(known, 0);
  tj_cache_close(c);
  free(compiler);
}
END_TEST

/* A decision made under another compiler, arch or platform is never
 * used: each is keyed out. */
START_TEST(other_compilers_and_archs_are_keyed_out)
{
  if (!TJ_PLATFORM_IS_NVIDIA)
    return;
  tj_runtime *rt = test_knobs_from_env(open_arch("sm_90", 0));
  char *compiler = strdup(tj_runtime_compiler(rt)), *older = NULL;
  tj_runtime_close(rt);
  ck_assert_int_ge(asprintf(&older, "%s (older)", compiler), 0);
  insert_decision("sm_90", "nvidia", older, "t1x32x64/c4/s132",
                  "'sm90a_128x128_split2'");
  insert_decision("sm_90a", "nvidia", compiler, "t1x32x64/c4/s132",
                  "'sm90a_128x128_split2'");
  insert_decision("sm_90", "amd", compiler, "t1x32x64/c4/s132",
                  "'sm90a_128x128_split2'");
  insert_decision("sm_90", "nvidia", compiler, "t1x32x64/c2/s132",
                  "'sm90a_128x128_split2'");
  rt = test_knobs_from_env(open_arch("sm_90", 0));
  ck_assert_int_eq(split_for(rt, 64, 4096, 4096), 4);
  tj_runtime_close(rt);
  /* The same decision under this compiler is used. */
  insert_decision("sm_90", "nvidia", compiler, "t1x32x64/c4/s132",
                  "'sm90a_128x128_split2'");
  rt = test_knobs_from_env(open_arch("sm_90", 0));
  ck_assert_int_eq(split_for(rt, 64, 4096, 4096), 2);
  tj_runtime_close(rt);
  free(older);
  free(compiler);
}
END_TEST

/* The library plans with the rule's knobs whatever the environment says:
 * the TJ_GEMM_* variables reach a runtime only through the benchmark's
 * hook (tj__gemm_knobs_from_env, then tj__gemm_knobs_set), which reads a
 * value it does not know as the rule's. */
START_TEST(tuning_knobs_and_environment)
{
  setenv("TJ_GEMM_SPLITK", "64", 1);
  setenv("TJ_GEMM_SM90A", "0", 1);
  setenv("TJ_GEMM_PDL", "0", 1);
  tj_runtime *rt = open_arch(TEST_ARCH, 0); /* no knobs asked for */
  const tj__gemm_knobs *k = tj__gemm_knobs_of(rt);
  ck_assert_int_eq(k->forced_split, 0);
  ck_assert_int_eq(k->sm90a_off, 0);
  ck_assert_int_eq(k->early, -1);
  ck_assert_int_eq(memcmp(k, &tj__gemm_knobs_rule, sizeof *k), 0);
  tj__gemm_knobs e;
  tj__gemm_knobs_from_env(&e);
  ck_assert_int_eq(e.forced_split, 64);
  ck_assert_int_eq(e.sm90a_off, 1);
  ck_assert_int_eq(e.early, 0);
  ck_assert_int_eq(tj__gemm_knobs_set(rt, &e), TJ_OK);
  ck_assert_int_eq(tj__gemm_knobs_of(rt)->forced_split, 64);
  setenv("TJ_GEMM_SPLITK", "65", 1);
  unsetenv("TJ_GEMM_SM90A");
  tj__gemm_knobs_from_env(&e);
  ck_assert_int_eq(e.forced_split, 0);
  ck_assert_int_eq(e.sm90a_off, 0);
  unsetenv("TJ_GEMM_SPLITK");
  /* TJ_GEMM_PDL: 1 starts the skinny kernel early, 0 never; anything else
   * (and unset) is the rule's, -1. */
  static const char *const pdl[][2] = {{"1", "1"}, {"0", "0"}, {"2", "-1"},
                                       {"yes", "-1"}};
  for (size_t i = 0; i < sizeof pdl / sizeof pdl[0]; i++) {
    setenv("TJ_GEMM_PDL", pdl[i][0], 1);
    tj__gemm_knobs_from_env(&e);
    ck_assert_int_eq(e.early, atoi(pdl[i][1]));
  }
  unsetenv("TJ_GEMM_PDL");
  /* A compile-only runtime never tunes: tj_gemm_f16_tune says why. */
  rt = test_reopen_knobs(rt, open_arch(TEST_ARCH, 0));
  ck_assert_int_eq(tj_gemm_f16_tune(rt, 128, 4096, 4096, NULL, NULL),
                   TJ_ENODEVICE);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "no GPU"));
  ck_assert_int_eq(tj_gemm_f16_tune(rt, 0, 4096, 4096, NULL, NULL), TJ_EINVAL);
  ck_assert_int_eq(tj_gemm_f16_tune(NULL, 1, 1, 1, NULL, NULL), TJ_EINVAL);
  tj_runtime_close(rt);
}
END_TEST

/* tj_gemm_tune checks its descriptor before it asks for a GPU, and
 * says what is wrong. */
START_TEST(family_tunes_check_their_call)
{
  tj_runtime *rt = open_arch(TEST_ARCH, 0);
  tj_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.size = sizeof d;
  d.a_type = d.b_type = TJ_DTYPE_BF16, d.c_type = TJ_DTYPE_F32;
  d.trans_b = 1, d.epilogue = TJ_EPILOGUE_BIAS_GELU;
  d.m = d.n = d.k = 4096;
  ck_assert_int_eq(tj_gemm_tune(rt, &d, NULL, NULL), TJ_ENODEVICE);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "no GPU"));
  ck_assert_int_eq(tj_gemm_tune(rt, NULL, NULL, NULL), TJ_EINVAL);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "d is NULL"));
  ck_assert_int_eq(tj_gemm_tune(NULL, &d, NULL, NULL), TJ_EINVAL);
  tj_gemm_desc bad = d;
  bad.size = 8;
  ck_assert_int_eq(tj_gemm_tune(rt, &bad, NULL, NULL), TJ_EINVAL);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "size"));
  bad = d, bad.b_type = TJ_DTYPE_F16;
  ck_assert_int_eq(tj_gemm_tune(rt, &bad, NULL, NULL), TJ_EINVAL);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "portable"));
  bad = d, bad.epilogue = 9;
  ck_assert_int_eq(tj_gemm_tune(rt, &bad, NULL, NULL), TJ_EINVAL);
  bad = d, bad.a_type = bad.b_type = TJ_DTYPE_F32;
  ck_assert_int_eq(tj_gemm_tune(rt, &bad, NULL, NULL), TJ_EINVAL);
  bad = d, bad.k = ((int64_t)1 << 30) + 1;
  ck_assert_int_eq(tj_gemm_tune(rt, &bad, NULL, NULL), TJ_EINVAL);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "2^30"));
  bad = d, bad.m = 0;
  ck_assert_int_eq(tj_gemm_tune(rt, &bad, NULL, NULL), TJ_EINVAL);
  tj_runtime_close(rt);
}
END_TEST

/* ------------------------------------------------------------ listing */

typedef struct seen {
  int n;
  char config[64], cls[64], device[64], origin[16], first[64], rule[64];
  int m, known, num_times, runs;
  double ms;
} seen;

static int keep_visit(const tj_tuning *t, void *ctx)
{
  seen *s = ctx;
  s->n++;
  snprintf(s->config, sizeof s->config, "%s", t->config);
  snprintf(s->cls, sizeof s->cls, "%s", t->shape_class);
  snprintf(s->device, sizeof s->device, "%s", t->device);
  snprintf(s->origin, sizeof s->origin, "%s", t->origin);
  s->m = t->m;
  s->known = t->known;
  s->num_times = t->num_times;
  snprintf(s->rule, sizeof s->rule, "%s", t->rule ? t->rule : "(null)");
  if (t->num_times) {
    snprintf(s->first, sizeof s->first, "%s", t->times[0].config);
    s->ms = t->times[0].ms;
    s->runs = t->times[0].runs;
  }
  return 0;
}

/* The decisions in the file at path, listed through a read-only handle. */
static seen listed(void)
{
  tj_cache *c = NULL;
  seen s = {0};
  ck_assert_int_eq(tj_cache_open(&c, path, TJ_CACHE_READONLY), TJ_OK);
  ck_assert_int_eq(tj_cache_list_tuning(c, keep_visit, &s), TJ_OK);
  tj_cache_close(c);
  return s;
}

START_TEST(list_tuning_explains_and_clear_forgets)
{
  tj_runtime *rt = test_knobs_from_env(open_arch(TEST_ARCH, 0));
  insert_decision(TEST_ARCH, tj_platform(), tj_runtime_compiler(rt),
                  "t1x32x64/c4/s132", "'sm90a_128x128_split2'");
  tj_runtime_close(rt);
  /* A line that does not parse is left out of the times. */
  tsql_exec(path, "UPDATE tuning SET measured = measured || 'junk\n"
                  "sm90a_128x256\tfast\t3\n'");
  seen s = listed();
  ck_assert_int_eq(s.n, 1);
  ck_assert_str_eq(s.config, "sm90a_128x128_split2");
  ck_assert_str_eq(s.cls, "t1x32x64/c4/s132");
  ck_assert_str_eq(s.device, "NVIDIA H200");
  ck_assert_str_eq(s.origin, "tune");
  ck_assert_int_eq(s.m, 128);
  ck_assert_int_eq(s.known, 1);
  ck_assert_int_eq(s.num_times, 2);
  ck_assert_str_eq(s.first, "sm90a_128x128_split2");
  ck_assert(s.ms > 0.0499 && s.ms < 0.0501);
  ck_assert_int_eq(s.runs, 10);
  /* A decision made before the rule's line: no rule. */
  ck_assert_str_eq(s.rule, "(null)");
  /* The rule's line names the heuristic's choice; it is no time (the
   * times stay two), and one that is no configuration name is left out. */
  tsql_exec(path, "UPDATE tuning SET measured = measured || "
                  "'rule\tsm90a_128x128\n'");
  s = listed();
  ck_assert_int_eq(s.num_times, 2);
  ck_assert_str_eq(s.rule, "sm90a_128x128");
  tsql_exec(path, "UPDATE tuning SET measured = 'sm90a_128x128\t0.09\t10\n"
                  "rule\tno such; name\n'");
  s = listed();
  ck_assert_int_eq(s.num_times, 1);
  ck_assert_str_eq(s.rule, "(null)");
  tj_cache *c = NULL;
  ck_assert_int_eq(tj_cache_open(&c, path, 0), TJ_OK);
  ck_assert_int_eq(tj_cache_clear(c), TJ_OK);
  memset(&s, 0, sizeof s);
  ck_assert_int_eq(tj_cache_list_tuning(c, keep_visit, &s), TJ_OK);
  ck_assert_int_eq(s.n, 0);
  tj_cache_close(c);
}
END_TEST

/* ------------------------------------------------------------ configs */

static uint16_t h(double v)
{
  return tj_f32_to_f16((float)v);
}

/* The tuner's check: two correct outputs (sums in another order, rounded
 * again) agree; anything a broken kernel leaves does not, and the first
 * such element is named. */
START_TEST(outputs_agree_within_rounding)
{
  enum { N = 256 };
  uint16_t ref[N], got[N];
  size_t bad = 99;
  for (int i = 0; i < N; i++)
    ref[i] = got[i] = h(((i * 37) % 101 - 50) * 0.37);
  ck_assert(tj__gemm_outputs_agree(ref, got, N, &bad));
  ck_assert_uint_eq(bad, 99);
  /* A unit in the last place either way, everywhere. */
  for (int i = 0; i < N; i++)
    got[i] = (uint16_t)(ref[i] + (i % 2 ? 1 : -1) * (ref[i] & 0x7fff ? 1 : 0));
  ck_assert(tj__gemm_outputs_agree(ref, got, N, &bad));
  /* Near zero, a difference small beside the row's size. */
  memcpy(got, ref, sizeof got);
  ref[7] = h(0.0);
  got[7] = h(0.01);
  ck_assert(tj__gemm_outputs_agree(ref, got, N, &bad));
  /* One element off by a few percent. */
  memcpy(got, ref, sizeof got);
  got[100] = h(tj_f16_to_f32(ref[100]) * 1.03);
  ck_assert(!tj__gemm_outputs_agree(ref, got, N, &bad));
  ck_assert_uint_eq(bad, 100);
  /* An element left unwritten (the NaN the tuner fills C with), a zero
   * where the value is not, a sign flipped. */
  memcpy(got, ref, sizeof got);
  got[3] = 0xffff;
  ck_assert(!tj__gemm_outputs_agree(ref, got, N, &bad));
  ck_assert_uint_eq(bad, 3);
  memcpy(got, ref, sizeof got);
  got[N - 1] = h(0.0);
  ck_assert(tj_f16_to_f32(ref[N - 1]) != 0);
  ck_assert(!tj__gemm_outputs_agree(ref, got, N, &bad));
  ck_assert_uint_eq(bad, N - 1);
  memcpy(got, ref, sizeof got);
  got[5] ^= 0x8000;
  ck_assert(!tj__gemm_outputs_agree(ref, got, N, &bad));
  ck_assert_uint_eq(bad, 5);
  /* NaN and infinities (inputs that hold them) agree only with the
   * same. */
  memcpy(got, ref, sizeof got);
  ref[9] = got[9] = 0x7e00;      /* NaN */
  ref[10] = got[10] = 0x7c00;    /* +inf */
  ref[11] = got[11] = 0xfc00;    /* -inf */
  ck_assert(tj__gemm_outputs_agree(ref, got, N, &bad));
  got[11] = 0x7c00;
  ck_assert(!tj__gemm_outputs_agree(ref, got, N, &bad));
  ck_assert_uint_eq(bad, 11);
  got[11] = h(-65504.0);
  ck_assert(!tj__gemm_outputs_agree(ref, got, N, &bad));
  got[11] = 0xfc00;
  ref[12] = h(1.0);
  got[12] = 0x7e00;
  ck_assert(!tj__gemm_outputs_agree(ref, got, N, &bad));
  ck_assert_uint_eq(bad, 12);
  /* Nothing to compare: agreement. */
  ck_assert(tj__gemm_outputs_agree(ref, got, 0, &bad));
}
END_TEST

/* The configuration a name stands for (the test fails where none). */
static tj__gemm_config config_named(const char *name)
{
  tj__gemm_config c;
  ck_assert_msg(tj__gemm_config_parse(name, &c), "%s", name);
  return c;
}

/* A configuration plans as it is named: a persistent one's grid a block
 * an SM (of sms) or a tile, the _tmastore ones their base's plan with the
 * store asked for, the others without it. */
START_TEST(configurations_plan_as_named)
{
  tj__gemm_config pc = config_named("sm90a_128x128_persistent");
  tj__gemm_plan p = tj__gemm_plan_config(&pc, 132, 128, 11008, 4096);
  ck_assert(p.kind == GEMM_KIND_PERSISTENT && p.tile_n == 128 && !p.entry);
  ck_assert_uint_eq(p.grid.x, 86); /* 86 tiles, fewer than the SMs */
  ck_assert_int_eq(p.tma_store, 0);
  p = tj__gemm_plan_config(&pc, 114, 4096, 4096, 64);
  ck_assert_uint_eq(p.grid.x, 114);
  tj__gemm_config pt = config_named("sm90a_128x128_persistent_tmastore");
  p = tj__gemm_plan_config(&pt, 132, 1024, 1024, 1024);
  ck_assert(p.tma_store && p.tile_n == 128 && p.kind == GEMM_KIND_PERSISTENT);
  /* The tiles split across a cluster: two blocks a tile along x (a whole
   * number of clusters), the shared memory gemm_sm90a.hip's layout
   * takes, unsplit to the launch and storing directly. */
  tj__gemm_config k2 = config_named("sm90a_128x64_cluster_k2");
  p = tj__gemm_plan_config(&k2, 132, 130, 11008, 4096);
  ck_assert_int_eq(p.kind, GEMM_KIND_CLUSTER_K2);
  ck_assert_uint_eq(p.grid.x, 2 * ((11008 - 1) / 64 + 1));
  ck_assert_uint_eq(p.grid.y, 2);
  ck_assert_uint_eq(p.grid.z, 1);
  ck_assert_uint_eq(p.shared, 230544);
  ck_assert(p.split == 1 && !p.tma_store);
  /* The tiles' and the skinny kernel's shared memory (which grows with
   * the cluster: the sums a block receives from the others), as the
   * kernel lays it out (kernels/gemm_f16_sm90a.h). */
  static const struct {
    const char *name;
    unsigned shared;
  } sh[] = {{"sm90a_128x128", 197712}, {"sm90a_128x256", 230464},
            {"sm90a_128x64", 230528}, {"sm90a_128x256_mc2", 230464},
            {"sm90a_128x128_split2", 197712},
            {"sm90a_skinny_n128_k1", 101456}, {"sm90a_skinny_n128_k2", 106576},
            {"sm90a_skinny_n128_k3", 111696}, {"sm90a_skinny_n128_k4", 109136},
            {"sm90a_skinny_n128_k8", 119376}, {"sm90a_skinny_n256_k1", 191568},
            {"sm90a_skinny_n256_k2", 201808}, {"sm90a_skinny_n256_k3", 206928},
            {"sm90a_skinny_n256_k4", 206928}};
  for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
    tj__gemm_config c = config_named(sh[i].name);
    p = tj__gemm_plan_config(&c, 132, 16, 4096, 4096);
    ck_assert_msg(p.shared == sh[i].shared, "%s: %u", sh[i].name, p.shared);
  }
  tj__gemm_config c[TJ__GEMM_CONFIGS_MAX];
  size_t n = tj__gemm_configs(c);
  int stores = 0;
  for (size_t i = 0; i < n; i++) {
    if (c[i].kind == GEMM_KIND_SKINNY)
      continue;
    char name[TJ__GEMM_CONFIG_NAME_MAX];
    tj__gemm_config_name(&c[i], name);
    p = tj__gemm_plan_config(&c[i], 132, 2048, 2048, 2048);
    ck_assert_int_eq(p.tma_store, c[i].tma_store);
    stores += c[i].tma_store;
    if (!c[i].tma_store)
      continue;
    char base[64];
    snprintf(base, sizeof base, "%.*s", (int)(strlen(name) - 9), name);
    tj__gemm_config b = config_named(base);
    tj__gemm_plan q = tj__gemm_plan_config(&b, 132, 2048, 2048, 2048);
    ck_assert(p.kind == q.kind && p.tile_n == q.tile_n &&
              p.grid.x == q.grid.x && p.grid.y == q.grid.y &&
              p.grid.z == q.grid.z && p.shared == q.shared &&
              p.split == q.split && !q.tma_store);
  }
  ck_assert_int_eq(stores, 7); /* every unsplit tile configuration */
  /* The heuristic names the rule's plans, which store through TMA: the
   * _tmastore configurations, but split-K's (which never does) and the
   * skinny kernel's. */
  ck_assert_str_eq(heuristic_name(132, 2048, 2048, 2048),
                   "sm90a_128x256_persistent_tmastore");
  ck_assert_str_eq(heuristic_name(132, 128, 11008, 4096),
                   "sm90a_128x128_tmastore");
  ck_assert_str_eq(heuristic_name(132, 64, 4096, 4096),
                   "sm90a_128x128_split4");
  ck_assert_str_eq(heuristic_name(132, 1, 4096, 4096),
                   "sm90a_skinny_n128_k3");
  ck_assert_str_eq(heuristic_name(132, 16, 11008, 4096),
                   "sm90a_skinny_n128_k1");
  ck_assert_str_eq(heuristic_name(132, 16, 128, 4096),
                   "sm90a_skinny_n128_k8");
  ck_assert_str_eq(heuristic_name(132, 128, 4096, 4096),
                   "sm90a_128x64_cluster_k2_tmastore");
  ck_assert_str_eq(heuristic_name(132, 1024, 1024, 1024),
                   "sm90a_128x64_tmastore");
  ck_assert_str_eq(heuristic_name(132, 4096, 4096, 4096),
                   "sm90a_128x256_mc2_tmastore");
}
END_TEST

/* The configurations: unique names the store accepts, each read back as
 * itself, a split of 1 to 16, the stores on the unsplit tiles only; and
 * one code object for each kind and tile (every split of split-K and
 * both stores share one), named from the choices. */
START_TEST(configurations_are_derived_from_plan_choices)
{
  tj__gemm_config c[TJ__GEMM_CONFIGS_MAX];
  size_t n = tj__gemm_configs(c);
  char codes[TJ__GEMM_CONFIGS_MAX][TJ__GEMM_CONFIG_NAME_MAX];
  int ncodes = 0;
  ck_assert_uint_eq(n, 38);
  for (size_t i = 0; i < n; i++) {
    char name[TJ__GEMM_CONFIG_NAME_MAX], code[TJ__GEMM_CONFIG_NAME_MAX];
    tj__gemm_config back;
    tj__gemm_config_name(&c[i], name);
    ck_assert_msg(tj__tuning_name_ok(name), "%s", name);
    ck_assert(tj__gemm_config_parse(name, &back));
    ck_assert(memcmp(&back, &c[i], sizeof back) == 0);
    for (size_t j = 0; j < i; j++) {
      char other[TJ__GEMM_CONFIG_NAME_MAX];
      tj__gemm_config_name(&c[j], other);
      ck_assert_str_ne(other, name);
    }
    ck_assert(tj__tuning_config_known("gemm_f16", name));
    ck_assert(tj__tuning_config_known("gemm_bf16_bf16_f32_tn_dgelu", name));
    ck_assert(!tj__tuning_config_known("gelu_f16", name));
    ck_assert(c[i].split >= 1 && c[i].split <= 16);
    ck_assert(c[i].bn == 64 || c[i].bn == 128 || c[i].bn == 256);
    ck_assert(c[i].split == 1 || c[i].kind == GEMM_KIND_SPLIT ||
              c[i].kind == GEMM_KIND_SKINNY);
    ck_assert(!c[i].tma_store || (c[i].split == 1 &&
                                  c[i].kind != GEMM_KIND_SKINNY));
    tj__gemm_config_code(c[i].kind, c[i].bn, c[i].split, code);
    int known = 0;
    for (int j = 0; j < ncodes; j++)
      known |= strcmp(codes[j], code) == 0;
    if (!known)
      snprintf(codes[ncodes++], sizeof codes[0], "%s", code);
  }
  ck_assert_int_eq(ncodes, 17);
  char code[TJ__GEMM_CONFIG_NAME_MAX];
  tj__gemm_config_code(GEMM_KIND_SPLIT, 128, 7, code);
  ck_assert_str_eq(code, "sm90a_128x128_splitk");
  tj__gemm_config_code(GEMM_KIND_SKINNY, 256, 3, code);
  ck_assert_str_eq(code, "sm90a_skinny256_k3");
  tj__gemm_config_code(GEMM_KIND_SKINNY, 128, 1, code);
  ck_assert_str_eq(code, "sm90a_skinny");
  tj__gemm_config_code(GEMM_KIND_MC2, 256, 1, code);
  ck_assert_str_eq(code, "sm90a_128x256_mc2");
}
END_TEST

/* A decision's configuration is read by name, strictly: names another
 * library (or a damaged row) wrote, near misses of this library's
 * included, stand for no configuration, and a decision naming one is
 * ignored (the rule runs: table test unknown_and_damaged_...). */
START_TEST(unknown_and_malformed_names_are_no_configuration)
{
  static const char *const bad[] = {
      "sm90a_128x128_streamk", "sm90a_128x128_split17",
      "sm90a_128x128_split1", "sm90a_128x128_split02",
      "sm90a_128x128_splitk", "sm90a_128x128_split4_tmastore",
      "sm90a_skinny_n256_k8", "sm90a_skinny_n64_k1", "sm90a_skinny_n128_k5",
      "sm90a_skinny_n128_k1_tmastore", "sm90a_skinny", "sm90a_128x96",
      "sm90a_128x64_persistent", "sm90a_128x128_mc2", "SM90A_128x256",
      "sm90a_128x256 ", " sm90a_128x256", "sm90a_128x256_tmastore_tmastore",
      "gemm_f16_sm90a_128x256", "sm80_128x256", "", "Bad Config!"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tj__gemm_config c = {-1, -1, -1, -1};
    ck_assert_msg(!tj__gemm_config_parse(bad[i], &c), "%s", bad[i]);
    ck_assert_int_eq(c.kind, -1); /* left as it was */
    ck_assert(!tj__tuning_config_known("gemm_f16", bad[i]));
  }
  tj__gemm_config c;
  ck_assert(!tj__gemm_config_parse(NULL, &c));
  ck_assert(!tj__tuning_config_known("gemm_f16", NULL));
  ck_assert(!tj__tuning_config_known(NULL, "sm90a_128x256"));
  /* Names written by the releases that listed their entries read as the
   * same configurations. */
  c = config_named("sm90a_128x256_mc2");
  ck_assert(c.kind == GEMM_KIND_MC2 && c.bn == 256 && !c.tma_store);
  c = config_named("sm90a_128x64_cluster_k2_tmastore");
  ck_assert(c.kind == GEMM_KIND_CLUSTER_K2 && c.bn == 64 && c.tma_store);
  c = config_named("sm90a_128x128_split16");
  ck_assert(c.kind == GEMM_KIND_SPLIT && c.split == 16 && c.bn == 128);
  c = config_named("sm90a_skinny_n256_k4");
  ck_assert(c.kind == GEMM_KIND_SKINNY && c.bn == 256 && c.split == 4);
}
END_TEST

/* Every code object a configuration runs compiles for sm_90a here, its
 * product entry named from its choices: no configuration reaches a
 * device untested by the compiler. */
START_TEST(every_configuration_compiles)
{
  if (!TJ_PLATFORM_IS_NVIDIA)
    return;
  tj_runtime *rt = test_knobs_from_env(open_arch("sm_90", TJ_CACHE_DISABLE));
  tj__gemm_config c[TJ__GEMM_CONFIGS_MAX];
  size_t n = tj__gemm_configs(c);
  for (size_t i = 0; i < n; i++) {
    /* One of each code object: the direct stores, split-K's first. */
    if (c[i].tma_store || (c[i].kind == GEMM_KIND_SPLIT && c[i].split != 2))
      continue;
    int M = c[i].kind == GEMM_KIND_SKINNY ? 8 : 1024;
    tj__gemm_plan p = tj__gemm_plan_config(&c[i], 132, M, 1024, 1024);
    tj_gemm_desc d = tj__gemm_f16_desc(M, 1024, 1024, 1.0f, FAKE(1), 1024,
                                       FAKE(2), 1024, 0.0f, FAKE(3), 1024);
    tj_kernel *k = NULL;
    char code[TJ__GEMM_CONFIG_NAME_MAX], want[TJ__GEMM_NAME_MAX];
    tj__gemm_config_code(c[i].kind, c[i].bn, c[i].split, code);
    snprintf(want, sizeof want, "gemm_f16_f16_f16_nn_none_%s", code);
    int rc = tj__gemm_hopper_prepare(rt, &d, &p, &k);
    ck_assert_msg(rc == TJ_OK, "%s: %s", want, tj_errmsg(rt));
    ck_assert_str_eq(k->entry, want);
    ck_assert_str_eq(tj__gemm_hopper_entry(rt, &d, &p), want);
  }
  tj_runtime_close(rt);
}
END_TEST

/* The candidates a tune of one op of the family times on a device of 132
 * SMs (names[0]: the rule's choice), their count. */
static int tune_candidates(tj_runtime *rt, int ab, int c, int trans_a,
                           int trans_b, int epi, int M, int N, int K,
                           char names[][TJ__GEMM_CONFIG_NAME_MAX])
{
  tj_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.size = sizeof d;
  d.a_type = d.b_type = ab, d.c_type = c;
  d.trans_a = trans_a, d.trans_b = trans_b, d.epilogue = epi;
  d.m = M, d.n = N, d.k = K;
  return (int)tj__gemm_tune_candidates(rt, &d, names, TJ__GEMM_CONFIGS_MAX);
}

/* Whether name is among n names. */
static int has_name(char names[][TJ__GEMM_CONFIG_NAME_MAX], int n,
                    const char *name)
{
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], name) == 0)
      return 1;
  return 0;
}

/* Which configurations a family op's tune times: the tiles (split-K
 * only where they leave SMs idle) for a large shape, the skinny kernel's
 * only for M <= 16 with A not transposed, the tiles for a transposed A
 * at M = 8; no TMA store for an f32 C, which the kernel stores directly. */
START_TEST(family_tune_candidates_follow_the_call)
{
  if (!TJ_PLATFORM_IS_NVIDIA)
    return;
  tj_runtime *rt = test_knobs_from_env(open_arch("sm_90", 0));
  char names[TJ__GEMM_CONFIGS_MAX][TJ__GEMM_CONFIG_NAME_MAX];
  char f16[TJ__GEMM_CONFIGS_MAX][TJ__GEMM_CONFIG_NAME_MAX];
  int n = tune_candidates(rt, TJ_DTYPE_BF16, TJ_DTYPE_BF16, 0, 1,
                          TJ_EPILOGUE_BIAS_GELU, 4096, 4096, 4096, names);
  int nf = tune_candidates(rt, TJ_DTYPE_F16, TJ_DTYPE_F16, 0, 0,
                           TJ_EPILOGUE_NONE, 4096, 4096, 4096, f16);
  tj__gemm_config rule;
  char rule_name[TJ__GEMM_CONFIG_NAME_MAX];
  tj__gemm_heuristic(132, 4096, 4096, 4096, &rule);
  tj__gemm_config_name(&rule, rule_name);
  ck_assert_int_gt(n, 4);
  ck_assert_int_eq(n, nf); /* the same configurations as gemm_f16's */
  ck_assert_str_eq(names[0], rule_name);
  ck_assert_str_eq(f16[0], rule_name);
  ck_assert(has_name(names, n, "sm90a_128x256_mc2_tmastore"));
  ck_assert(has_name(names, n, "sm90a_128x128_persistent"));
  for (int i = 0; i < n; i++) {
    ck_assert_ptr_null(strstr(names[i], "skinny"));
    ck_assert_ptr_null(strstr(names[i], "split")); /* 1024 tiles */
    ck_assert(has_name(f16, nf, names[i]));
  }
  /* An f32 C: the same tiles, none through TMA. */
  int n32 = tune_candidates(rt, TJ_DTYPE_BF16, TJ_DTYPE_F32, 0, 1,
                            TJ_EPILOGUE_BIAS_GELU, 4096, 4096, 4096, names);
  ck_assert_int_gt(n32, 4);
  ck_assert_int_lt(n32, n);
  for (int i = 0; i < n32; i++)
    ck_assert_ptr_null(strstr(names[i], "tmastore"));
  /* M = 8, A not transposed: the skinny kernel's, and only those. */
  n = tune_candidates(rt, TJ_DTYPE_BF16, TJ_DTYPE_BF16, 0, 1,
                      TJ_EPILOGUE_BIAS_GELU, 8, 4096, 4096, names);
  ck_assert_int_gt(n, 1);
  for (int i = 0; i < n; i++)
    ck_assert_ptr_nonnull(strstr(names[i], "sm90a_skinny_"));
  tj__gemm_heuristic(132, 8, 4096, 4096, &rule);
  tj__gemm_config_name(&rule, rule_name);
  ck_assert_str_eq(names[0], rule_name);
  /* M = 8, A transposed (TN): the tiles, split-K among them (32 tiles
   * leave SMs idle), the rule's tiles first. */
  n = tune_candidates(rt, TJ_DTYPE_BF16, TJ_DTYPE_BF16, 1, 0,
                      TJ_EPILOGUE_NONE, 8, 4096, 4096, names);
  ck_assert_int_gt(n, 1);
  int splits = 0;
  for (int i = 0; i < n; i++) {
    ck_assert_ptr_null(strstr(names[i], "skinny"));
    splits += strstr(names[i], "split") != NULL;
  }
  ck_assert_int_gt(splits, 0);
  tj__gemm_plan p = tj__gemm_plan_tiles(rt, 8, 4096, 4096);
  rule = (tj__gemm_config){(int)p.kind, p.tile_n, p.split, p.tma_store};
  tj__gemm_config_name(&rule, rule_name);
  ck_assert_str_eq(names[0], rule_name);
  tj_runtime_close(rt);
}
END_TEST

/* tj_gemm_f16_configuration lists tj_gemm_f16's generated code objects
 * on sm_90 (the last, 17th, the skinny kernel's cluster of eight) and
 * none elsewhere, as many as tj_gemm_f16_configurations counts; bad
 * arguments are refused. */
START_TEST(f16_configurations_are_listed_on_sm90_only)
{
  tj_runtime *rt = open_arch(TEST_ARCH, TJ_CACHE_DISABLE);
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_gemm_f16_configuration(rt, 0, NULL), TJ_EINVAL);
  ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "NULL"));
  ck_assert_int_eq(tj_gemm_f16_configuration(NULL, 0, &k), TJ_EINVAL);
  ck_assert_uint_eq(tj_gemm_f16_configurations(NULL), 0);
  ck_assert_uint_eq(tj_gemm_f16_configurations(rt),
                    strcmp(TEST_ARCH, "sm_90") == 0 ? 17 : 0);
  if (strcmp(TEST_ARCH, "sm_90") != 0) {
    ck_assert_int_eq(tj_gemm_f16_configuration(rt, 0, &k), TJ_ENOENT);
    ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "no generated configuration"));
    ck_assert_ptr_null(k); /* left as it was */
  } else {
    ck_assert_int_eq(tj_gemm_f16_configuration(rt, 17, &k), TJ_ENOENT);
    ck_assert_ptr_nonnull(strstr(tj_errmsg(rt), "past the last"));
    ck_assert_int_eq(tj_gemm_f16_configuration(rt, 16, &k), TJ_OK);
    ck_assert_str_eq(k->entry, "gemm_f16_f16_f16_nn_none_sm90a_skinny_k8");
  }
  tj_runtime_close(rt);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("tuning");
  TCase *tc = test_case(s, "table", 60);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, table_is_made);
  tcase_add_test(tc, readonly_file_without_decisions);
  tcase_add_test(tc, shape_classes);
  tcase_add_test(tc, tune_rounds_keep_to_the_budget);
  tcase_add_test(tc, list_tuning_explains_and_clear_forgets);
  tcase_add_test(tc, family_tunes_check_their_call);
  tc = test_case(s, "decisions", 60);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, stored_decisions_are_used);
  tcase_add_test(tc, family_decisions_are_keyed_by_op);
  tcase_add_test(tc, decisions_change_nothing_without_the_hopper_path);
  tcase_add_test(tc, unknown_and_damaged_decisions_are_ignored);
  tcase_add_test(tc, other_compilers_and_archs_are_keyed_out);
  tcase_add_test(tc, tuning_knobs_and_environment);
  tc = test_case(s, "configs", 600);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, outputs_agree_within_rounding);
  tcase_add_test(tc, configurations_plan_as_named);
  tcase_add_test(tc, configurations_are_derived_from_plan_choices);
  tcase_add_test(tc, unknown_and_malformed_names_are_no_configuration);
  tcase_add_test(tc, f16_configurations_are_listed_on_sm90_only);
  tcase_add_test(tc, family_tune_candidates_follow_the_call);
  tcase_add_test(tc, every_configuration_compiles);
  return run_suite(s);
}
