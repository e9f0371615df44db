/*
 * cli_options.c: the tokitai-jit command line, parsed GNU style with
 * getopt_long into a cli_options, and checked: one command, and only the
 * options that command reads; and the values options take (sizes,
 * durations, whole numbers).  Prints --help itself; runs nothing else
 * (--version is a command, cli_gpu.c's).  tests/fuzz/fuzz_cli.c links
 * this file.
 */
#include "config.h"
#include "cli_options.h"

#include <ctype.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
  OPT_LIST = 256, OPT_STATS, OPT_INFO, OPT_LIST_KERNELS, OPT_WARM, OPT_RUN,
  OPT_VERIFY, OPT_REPAIR, OPT_EVICT_AGE, OPT_MAX_SIZE, OPT_CLEAR, OPT_CACHE,
  OPT_GROUP, OPT_ARCH, OPT_N, OPT_SEED, OPT_DEVICE, OPT_JSON, OPT_COLOR,
  OPT_COMPILE, OPT_ENTRY, OPT_OPTION, OPT_MERGE, OPT_SYSTEM, OPT_JOBS,
  OPT_QUIET, OPT_TUNE, OPT_SHAPE, OPT_LIST_TUNING, OPT_ALL, OPT_EXPLAIN,
  OPT_DTYPE, OPT_C_DTYPE, OPT_LAYOUT, OPT_EPILOGUE, OPT_AUX, OPT_BIAS_GRAD,
  OPT_GROUPED, OPT_GROUPS, OPT_ROUTING
};

static const struct option long_options[] = {
  {"list-cache", no_argument, NULL, OPT_LIST},
  {"stats", no_argument, NULL, OPT_STATS},
  {"info", no_argument, NULL, OPT_INFO},
  {"list-kernels", no_argument, NULL, OPT_LIST_KERNELS},
  {"warm", no_argument, NULL, OPT_WARM},
  {"run", required_argument, NULL, OPT_RUN},
  {"verify-cache", no_argument, NULL, OPT_VERIFY},
  {"repair", no_argument, NULL, OPT_REPAIR},
  {"evict-older-than", required_argument, NULL, OPT_EVICT_AGE},
  {"max-size", required_argument, NULL, OPT_MAX_SIZE},
  {"clear-cache", no_argument, NULL, OPT_CLEAR},
  {"cache", required_argument, NULL, OPT_CACHE},
  {"group", no_argument, NULL, OPT_GROUP},
  {"arch", required_argument, NULL, OPT_ARCH},
  {"n", required_argument, NULL, OPT_N},
  {"seed", required_argument, NULL, OPT_SEED},
  {"device", required_argument, NULL, OPT_DEVICE},
  {"json", no_argument, NULL, OPT_JSON},
  {"color", optional_argument, NULL, OPT_COLOR},
  {"compile", required_argument, NULL, OPT_COMPILE},
  {"entry", required_argument, NULL, OPT_ENTRY},
  {"option", required_argument, NULL, OPT_OPTION},
  {"merge", no_argument, NULL, OPT_MERGE},
  {"system", no_argument, NULL, OPT_SYSTEM},
  {"jobs", required_argument, NULL, OPT_JOBS},
  {"quiet", no_argument, NULL, OPT_QUIET},
  {"tune", required_argument, NULL, OPT_TUNE},
  {"shape", required_argument, NULL, OPT_SHAPE},
  {"list-tuning", no_argument, NULL, OPT_LIST_TUNING},
  {"all", no_argument, NULL, OPT_ALL},
  {"explain", required_argument, NULL, OPT_EXPLAIN},
  {"dtype", required_argument, NULL, OPT_DTYPE},
  {"c-dtype", required_argument, NULL, OPT_C_DTYPE},
  {"layout", required_argument, NULL, OPT_LAYOUT},
  {"epilogue", required_argument, NULL, OPT_EPILOGUE},
  {"aux", no_argument, NULL, OPT_AUX},
  {"bias-grad", no_argument, NULL, OPT_BIAS_GRAD},
  {"grouped", required_argument, NULL, OPT_GROUPED},
  {"groups", required_argument, NULL, OPT_GROUPS},
  {"routing", required_argument, NULL, OPT_ROUTING},
  {"help", no_argument, NULL, 'h'},
  {"version", no_argument, NULL, 'V'},
  {NULL, 0, NULL, 0},
};

static const char usage_text[] =
  "Usage: " PROGRAM " COMMAND [OPTION]...\n"
  "Compile GPU kernels at run time and manage their cache.\n"
  "\n"
  "Commands:\n"
  "      --list-cache           list the cached code objects\n"
  "      --stats                summarise the cache: entries, size, hits\n"
  "      --info                 show the platform, compiler, GPUs and the\n"
  "                             embedded kernels\n"
  "      --list-kernels         list the embedded kernels with their\n"
  "                             signatures and launch contracts\n"
  "      --warm [KERNEL]...     compile the embedded kernels (all, or those\n"
  "                             named) into the cache\n"
  "      --warm gemm            compile the GEMM family's configuration\n"
  "                             that the options below choose, for each\n"
  "                             --shape and --arch\n"
  "      --warm grouped_gemm    the same for the grouped GEMM\n"
  "      --run KERNEL           run KERNEL on random inputs and check it\n"
  "                             against the CPU oracle (needs a GPU)\n"
  "      --run gemm             run one tj_gemm call of the configuration\n"
  "                             the options below choose and check it\n"
  "                             against the CPU oracle (needs a GPU)\n"
  "      --run grouped_gemm     the same for the grouped GEMM\n"
  "      --verify-cache         check the database and every code object\n"
  "                             against its stored hash\n"
  "      --evict-older-than DURATION\n"
  "                             drop entries not used for DURATION\n"
  "      --max-size SIZE        drop the least recently used entries until\n"
  "                             the code fits in SIZE\n"
  "      --clear-cache          drop every entry and reset the counters\n"
  "      --compile FILE         compile FILE's --entry kernels (one module)\n"
  "                             into the cache, for each --arch\n"
  "      --explain KERNEL       say whether KERNEL is cached and, if not,\n"
  "                             what differs from the nearest row for it\n"
  "                             (with --entry: KERNEL is a source FILE, a\n"
  "                             module as --compile takes it)\n"
  "      --merge FILE...        copy the entries of other cache files into\n"
  "                             the cache, each checked against its hash\n"
  "      --tune OP              OP gemm (with --dtype, --c-dtype, --layout,\n"
  "                             --epilogue) or gemm_f16: time its Hopper\n"
  "                             configurations for each --shape and record\n"
  "                             the fastest in the cache (needs a GPU)\n"
  "      --list-tuning          show the tuning decisions in the cache and\n"
  "                             the times behind them\n"
  "  -h, --help                 show this help and exit\n"
  "  -V, --version              show the version, platform and compiler\n"
  "\n"
  "Options:\n"
  "      --cache PATH           the cache file (default: $TOKITAI_JIT_CACHE,\n"
  "                             else $XDG_CACHE_HOME/tokitai-jit/cache.db,\n"
  "                             else ~/.cache/tokitai-jit/cache.db)\n"
  "      --group                accept a cache its group may write (pin\n"
  "                             the group: $TOKITAI_JIT_CACHE_GROUP)\n"
  "      --system               with --list-cache, --stats, --verify-cache:\n"
  "                             read --cache PATH (default: the installed\n"
  "                             system cache) as a read-only system cache\n"
  "      --arch ARCH            with --warm, --compile, --explain: for ARCH\n"
  "                             (gfx90a, sm_90)\n"
  "                             instead of the GPU's own; may be repeated\n"
  "      --device N             the GPU to use (default 0)\n"
  "      --n N                  with --run: elements (gemm_f16: M = N = K)\n"
  "      --seed S               with --run: the random seed (default 1)\n"
  "      --all                  with --info, --list-kernels: also the\n"
  "                             configurations that a call chooses among\n"
  "                             (gemm_f16's tiles), not only the kernels\n"
  "                             a program calls\n"
  "      --repair               with --verify-cache: drop the bad entries\n"
  "      --entry NAME           with --compile, --explain: a kernel to take,\n"
  "                             a C name or\n"
  "                             a C++ name expression (scale<float>); repeat\n"
  "  -I DIR                     with --compile: the options \"-I\" \"DIR\"\n"
  "  -D NAME[=VALUE]            with --compile: the option \"-DNAME[=VALUE]\"\n"
  "      --option OPT           with --compile: OPT as one compiler option\n"
  "  -j, --jobs N               with --warm, --compile: run up to N compiles\n"
  "                             at once, each in its own process (default:\n"
  "                             the processors online; 1: one at a time)\n"
  "  -q, --quiet                with --warm, --compile: no progress line;\n"
  "                             --warm prints only errors\n"
  "      --shape MxNxK          with --tune, --warm gemm, --warm\n"
  "                             grouped_gemm: a GEMM shape\n"
  "                             (128x4096x4096); repeat for more; with\n"
  "                             --run gemm or grouped_gemm: the one shape\n"
  "                             (default 512x512x512)\n"
  "      --dtype TYPE           with --run, --warm and --tune of gemm (and\n"
  "                             grouped_gemm's): A's and B's type: f16\n"
  "                             (default), bf16\n"
  "      --c-dtype TYPE         C's type (and bias's and aux's): f16, bf16,\n"
  "                             f32 (default: --dtype's)\n"
  "      --layout OP            nn (default), nt, tn, tt: whether A and B\n"
  "                             are used transposed (Y = X W is nn,\n"
  "                             dX = dY W^T nt, dW = X^T dY tn)\n"
  "      --epilogue E           none (default), bias, biasgelu, dgelu\n"
  "      --aux                  with --epilogue biasgelu: also write the\n"
  "                             pre-activation to aux\n"
  "      --bias-grad            with --epilogue dgelu: also write the\n"
  "                             column sums of C (the bias gradient)\n"
  "      --grouped m|k          with grouped_gemm: the dimension the groups\n"
  "                             cut: m (rows; default) or k (the\n"
  "                             reduction, the weight gradient)\n"
  "      --groups E             with grouped_gemm: the groups, 1 to 65535\n"
  "                             (default 8)\n"
  "      --routing R            with --run grouped_gemm: uniform (default:\n"
  "                             equal groups) or skewed (each group half\n"
  "                             of what is left; the last the rest)\n"
  "      --json                 print JSON (--list-cache, --stats, --info,\n"
  "                             --list-kernels, --run, --verify-cache,\n"
  "                             --version, --compile, --tune,\n"
  "                             --list-tuning); the keys: tokitai-jit(1)\n"
  "      --color[=WHEN]         colour the output: auto (default), always,\n"
  "                             never\n"
  "\n"
  "DURATION is a number with s, m, h, d or w (30d, 12h); SIZE a number with\n"
  "K, M, G or T (powers of 1024; KB, MB... for powers of 1000): 500M, 2G.\n"
  "\n"
  "Exit status: 0 on success, 1 on failure (including a kernel that\n"
  "disagrees with its oracle, or a bad cache entry), 2 on a usage error.\n"
  "See tokitai-jit(1) for more.\n";

/* ------------------------------------------------------------ values */

/* Leading decimal digits of s into *v; the first other character in
 * *end.  -1 when there is no digit or the number does not fit. */
static int parse_digits(const char *s, uint64_t *v, const char **end)
{
  uint64_t n = 0;
  const char *p = s;
  for (; isdigit((unsigned char)*p); p++) {
    unsigned d = (unsigned)(*p - '0');
    if (n > (UINT64_MAX - d) / 10)
      return -1;
    n = n * 10 + d;
  }
  *v = n;
  *end = p;
  return p == s ? -1 : 0;
}

int cli_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
  uint64_t v;
  const char *end;
  if (parse_digits(s, &v, &end) != 0 || *end || v > max)
    return -1;
  *out = v;
  return 0;
}

int cli_parse_duration(const char *s, int64_t *seconds)
{
  static const struct {
    char unit;
    int64_t seconds;
  } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 604800}};
  uint64_t v;
  const char *end;
  if (parse_digits(s, &v, &end) != 0)
    return isdigit((unsigned char)*s) ? -2 : -1;
  int64_t mult = 0;
  if (*end == '\0')
    mult = 1; /* plain seconds */
  for (size_t i = 0; !mult && i < sizeof units / sizeof units[0]; i++)
    if (end[0] == units[i].unit && end[1] == '\0')
      mult = units[i].seconds;
  if (!mult)
    return -1;
  if (v > (uint64_t)(INT64_MAX / mult))
    return -2;
  *seconds = (int64_t)v * mult;
  return 0;
}

/* The multiplier a size suffix names, or 0 when it names none. */
static double size_suffix(const char *u)
{
  static const char prefixes[] = "KMGT";
  if (*u == '\0' || strcmp(u, "B") == 0)
    return 1;
  const char *at = strchr(prefixes, toupper((unsigned char)u[0]));
  if (!at)
    return 0;
  double binary = 1, decimal = 1;
  for (const char *p = prefixes; p <= at; p++) {
    binary *= 1024;
    decimal *= 1000;
  }
  const char *rest = u + 1;
  if (*rest == '\0' || strcmp(rest, "iB") == 0 || strcmp(rest, "i") == 0)
    return binary;
  if (strcmp(rest, "B") == 0)
    return decimal;
  return 0;
}

int cli_parse_size(const char *s, uint64_t *bytes)
{
  uint64_t whole, frac = 0;
  const char *end;
  double scale = 1;
  if (parse_digits(s, &whole, &end) != 0)
    return isdigit((unsigned char)*s) ? -2 : -1;
  if (*end == '.') {
    const char *f = end + 1;
    if (parse_digits(f, &frac, &end) != 0 || end - f > 9)
      return -1;
    for (const char *p = f; p < end; p++)
      scale *= 10;
  }
  double mult = size_suffix(end);
  double v = ((double)whole + (double)frac / scale) * mult;
  if (mult == 0)
    return -1;
  if (v >= 18446744073709551615.0)
    return -2;
  *bytes = (uint64_t)v;
  return 0;
}

/* ------------------------------------------------------------ options */

/* The parser's own state, beyond what the commands read. */
typedef struct parse_state {
  const char *command_flag; /* the option that chose the command */
  int given_n, given_seed, given_device;
  int version;              /* --version was given */
  int given_compile;        /* the last of --entry, -I, -D, --option */
  int given_jobs, given_quiet;
  int given_gemm;           /* the last of the GEMM family's options */
  int given_grouped;        /* --grouped or --groups */
  int given_routing;        /* --routing */
} parse_state;



static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
  va_list ap;
  fputs(PROGRAM ": ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs("\nTry '" PROGRAM " --help' for more information.\n", stderr);
  return EXIT_USAGE;
}

static const char *option_name(int val)
{
  for (const struct option *opt = long_options; opt->name; opt++)
    if (opt->val == val)
      return opt->name;
  return "?";
}

/* Every command excludes the others, except that the two eviction limits
 * combine into one eviction. */
static int set_command(cli_options *o, parse_state *ps, cli_command cmd,
                       int val)
{
  const char *flag = option_name(val);
  if (o->command != CMD_NONE && !(o->command == cmd && cmd == CMD_EVICT))
    return usage_error("--%s cannot be combined with --%s", flag,
                       ps->command_flag);
  if (o->command == CMD_NONE)
    ps->command_flag = flag;
  o->command = cmd;
  return 0;
}

static int parse_number(const char *flag, const char *arg, uint64_t max,
                        uint64_t min, uint64_t *out)
{
  if (cli_parse_uint(arg, max, out) == 0 && *out >= min)
    return 0;
  if (max != UINT64_MAX)
    return usage_error("--%s '%s' is not a whole number from %llu to %llu",
                       flag, arg, (unsigned long long)min,
                       (unsigned long long)max);
  return usage_error("--%s '%s' is not a %swhole number", flag, arg,
                     min ? "positive " : "");
}

/* "MxNxK": three whole numbers from 1 to 2^30. */
static int parse_shape(cli_options *o, const char *arg)
{
  uint64_t v[3];
  char part[24];
  const char *p = arg;
  if (o->nshapes == CLI_MAX_SHAPES)
    return usage_error("--shape given more than %d times", CLI_MAX_SHAPES);
  for (int i = 0; i < 3; i++) {
    size_t len = strcspn(p, "x");
    if (len == 0 || len >= sizeof part || (i < 2) != (p[len] == 'x'))
      return usage_error("--shape '%s' is not MxNxK (128x4096x4096)", arg);
    memcpy(part, p, len);
    part[len] = '\0';
    if (cli_parse_uint(part, 1u << 30, &v[i]) != 0 || v[i] == 0)
      return usage_error("--shape '%s': '%s' is not a whole number from 1 to "
                         "%u", arg, part, 1u << 30);
    p += len + (i < 2);
  }
  for (int i = 0; i < 3; i++)
    o->shapes[o->nshapes][i] = (int)v[i];
  o->nshapes++;
  return 0;
}

static int parse_size_option(const char *arg, uint64_t *out)
{
  int rc = cli_parse_size(arg, out);
  if (rc == -2)
    return usage_error("--max-size '%s' is too large", arg);
  if (rc != 0)
    return usage_error("--max-size '%s' is not a size (a number with K, M, "
                       "G or T: 500M, 2G)", arg);
  if (*out == 0)
    return usage_error("--max-size must be more than 0 bytes (--clear-cache "
                       "empties the cache)");
  return 0;
}

/* The index of arg in names (count of them), or -1. */
static int word_index(const char *const *names, int count, const char *arg)
{
  for (int i = 0; i < count; i++)
    if (strcmp(names[i], arg) == 0)
      return i;
  return -1;
}

/* --dtype, --c-dtype, --layout, --epilogue: the GEMM family's words. */
static int parse_gemm_value(cli_options *o, int val, const char *arg)
{
  static const char *const types[] = {"f16", "bf16", "f32"};
  static const char *const layouts[] = {"nn", "nt", "tn", "tt"};
  static const char *const epilogues[] = {"none", "bias", "biasgelu",
                                          "dgelu"};
  int i;
  switch (val) {
  case OPT_DTYPE:
    if ((i = word_index(types, 2, arg)) < 0)
      return usage_error("--dtype '%s' is not f16 or bf16 (A's and B's "
                         "type)", arg);
    o->gemm_ab_type = TJ_DTYPE_F16 + i;
    return 0;
  case OPT_C_DTYPE:
    if ((i = word_index(types, 3, arg)) < 0)
      return usage_error("--c-dtype '%s' is not f16, bf16 or f32", arg);
    o->gemm_c_type = TJ_DTYPE_F16 + i;
    return 0;
  case OPT_LAYOUT:
    if ((i = word_index(layouts, 4, arg)) < 0)
      return usage_error("--layout '%s' is not nn, nt, tn or tt", arg);
    o->gemm_trans_a = i >> 1;
    o->gemm_trans_b = i & 1;
    return 0;
  }
  if ((i = word_index(epilogues, 4, arg)) < 0)
    return usage_error("--epilogue '%s' is not none, bias, biasgelu or "
                       "dgelu", arg);
  o->gemm_epilogue = TJ_EPILOGUE_NONE + i;
  return 0;
}

/* --entry, -I, -D, --option: the module --compile builds, its compiler
 * options kept in command-line order. */
static int parse_compile_value(cli_options *o, parse_state *ps, int val,
                               const char *arg)
{
  ps->given_compile = val;
  if (val == OPT_ENTRY) {
    if (o->nentries == CLI_MAX_ENTRIES)
      return usage_error("--entry given more than %d times", CLI_MAX_ENTRIES);
    if (!*arg)
      return usage_error("--entry needs a name, not ''");
    o->entries[o->nentries++] = arg;
    return 0;
  }
  if (o->ncompile_args + 2 > CLI_MAX_COMPILE_ARGS)
    return usage_error("more than %d compiler options", CLI_MAX_COMPILE_ARGS);
  if (val == 'I') {
    /* The library takes only absolute directories (the working directory
     * is not in the key); at a terminal a relative one means this one. */
    char *abs = *arg && *arg != '/' ? realpath(arg, NULL) : NULL;
    o->compile_args[o->ncompile_args++] = "-I";
    o->compile_args[o->ncompile_args++] = abs ? abs : arg;
    if (abs)
      o->defines[o->ndefines++] = abs;
  } else if (val == 'D') {
    char *d = NULL;
    if (!*arg || *arg == '=')
      return usage_error("-D needs NAME or NAME=VALUE, not '%s'", arg);
    if (asprintf(&d, "-D%s", arg) < 0)
      return usage_error("out of memory");
    o->defines[o->ndefines++] = d;
    o->compile_args[o->ncompile_args++] = d;
  } else {
    o->compile_args[o->ncompile_args++] = arg;
  }
  return 0;
}

/* The options that take an argument or set a value; 0 or EXIT_USAGE. */
static int parse_value(cli_options *o, parse_state *ps, int val,
                       const char *arg)
{
  uint64_t v = 0;
  int rc = 0;
  switch (val) {
  case OPT_RUN:
    o->run_kernel = arg;
    return set_command(o, ps, CMD_RUN, val);
  case OPT_EVICT_AGE:
    if ((rc = cli_parse_duration(arg, &o->max_age)) == -2)
      return usage_error("--evict-older-than '%s' is too long", arg);
    if (rc != 0)
      return usage_error("--evict-older-than '%s' is not a duration (a number "
                         "with s, m, h, d or w: 30d, 12h)", arg);
    return set_command(o, ps, CMD_EVICT, val);
  case OPT_MAX_SIZE:
    if ((rc = parse_size_option(arg, &o->max_size)) != 0)
      return rc;
    return set_command(o, ps, CMD_EVICT, val);
  case OPT_CACHE:
    if (!*arg)
      return usage_error("--cache needs a file name, not ''");
    o->cache_path = arg;
    return 0;
  case OPT_COMPILE:
    if (!*arg)
      return usage_error("--compile needs a file name, not ''");
    o->compile_file = arg;
    return set_command(o, ps, CMD_COMPILE, val);
  case 'j':
    return parse_value(o, ps, OPT_JOBS, arg);
  case OPT_ENTRY:
  case OPT_OPTION:
  case 'I':
  case 'D':
    return parse_compile_value(o, ps, val, arg);
  case OPT_EXPLAIN:
    if (!*arg)
      return usage_error("--explain needs a kernel name or a file, not ''");
    o->explain = arg;
    return set_command(o, ps, CMD_EXPLAIN, val);
  case OPT_TUNE:
    o->tune_op = arg;
    return set_command(o, ps, CMD_TUNE, val);
  case OPT_SHAPE:
    return parse_shape(o, arg);
  case OPT_DTYPE:
  case OPT_C_DTYPE:
  case OPT_LAYOUT:
  case OPT_EPILOGUE:
    ps->given_gemm = val;
    return parse_gemm_value(o, val, arg);
  case OPT_GROUPED:
    ps->given_grouped = val;
    if (strcmp(arg, "m") && strcmp(arg, "k"))
      return usage_error("--grouped '%s' is not m or k (the dimension the "
                         "groups cut)", arg);
    o->gemm_grouped = *arg == 'm' ? TJ_GROUPED_M : TJ_GROUPED_K;
    return 0;
  case OPT_ROUTING:
    ps->given_routing = 1;
    if (strcmp(arg, "uniform") && strcmp(arg, "skewed"))
      return usage_error("--routing '%s' is not uniform or skewed", arg);
    o->gemm_skewed = *arg == 's';
    return 0;
  case OPT_GROUPS:
    ps->given_grouped = val;
    rc = parse_number("groups", arg, 65535, 1, &v);
    o->gemm_groups = (int64_t)v;
    return rc;
  case OPT_ARCH:
    if (o->narchs == CLI_MAX_ARCHS)
      return usage_error("--arch given more than %d times", CLI_MAX_ARCHS);
    o->archs[o->narchs++] = arg;
    return 0;
  case OPT_N:
    ps->given_n = 1;
    return parse_number("n", arg, UINT64_MAX, 1, &o->n);
  case OPT_SEED:
    ps->given_seed = 1;
    return parse_number("seed", arg, UINT64_MAX, 0, &o->seed);
  case OPT_DEVICE:
    ps->given_device = 1;
    rc = parse_number("device", arg, INT_MAX, 0, &v);
    o->device = (int)v;
    return rc;
  case OPT_JOBS:
    ps->given_jobs = 1;
    rc = parse_number("jobs", arg, 256, 1, &v);
    o->jobs = (unsigned)v;
    return rc;
  case OPT_COLOR:
    o->color_when = arg ? arg : "always";
    if (strcmp(o->color_when, "auto") && strcmp(o->color_when, "always") &&
        strcmp(o->color_when, "never"))
      return usage_error("--color '%s' is not auto, always or never", arg);
    return 0;
  }
  return usage_error("internal error: option %d not handled", val);
}

/* One option from getopt_long; 0, or the exit status to end with. */
static int parse_one(cli_options *o, parse_state *ps, int val,
                     const char *arg, char **argv)
{
  static const struct {
    int val;
    cli_command cmd;
  } commands[] = {
    {OPT_LIST, CMD_LIST},     {OPT_STATS, CMD_STATS},
    {OPT_INFO, CMD_INFO},     {OPT_LIST_KERNELS, CMD_LIST_KERNELS},
    {OPT_WARM, CMD_WARM},     {OPT_VERIFY, CMD_VERIFY},
    {OPT_CLEAR, CMD_CLEAR},   {OPT_MERGE, CMD_MERGE},
    {OPT_LIST_TUNING, CMD_LIST_TUNING},
  };
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (commands[i].val == val)
      return set_command(o, ps, commands[i].cmd, val);
  switch (val) {
  case 'h':
    fputs(usage_text, stdout);
    return CLI_DONE;
  case 'V': /* the command, whatever else is given: --version --json */
    ps->version = 1;
    return 0;
  case OPT_REPAIR: o->repair = 1; return 0;
  case OPT_GROUP: o->cache_flags |= TJ_CACHE_GROUP; return 0;
  case OPT_SYSTEM: o->system = 1; return 0;
  case OPT_JSON: o->json = 1; return 0;
  case OPT_ALL: o->all = 1; return 0;
  case OPT_AUX: ps->given_gemm = val; o->gemm_aux = 1; return 0;
  case OPT_BIAS_GRAD: ps->given_gemm = val; o->gemm_bias_grad = 1; return 0;
  case 'q': case OPT_QUIET: ps->given_quiet = o->quiet = 1; return 0;
  case ':':
    if (optopt < OPT_LIST)
      return usage_error("option '-%c' needs an argument", optopt);
    return usage_error("option '--%s' needs an argument", option_name(optopt));
  case '?':
    if (optopt >= OPT_LIST)
      return usage_error("option '--%s' takes no argument", option_name(optopt));
    if (optopt)
      return usage_error("unknown option '-%c'", optopt);
    return usage_error("unknown or ambiguous option '%s'", argv[optind - 1]);
  }
  return parse_value(o, ps, val, arg);
}

/* "stats" for --stats: a bare word that is the name of a long option
 * (what people type after git, apt or systemctl) gets the option named. */
static int bare_option_word(const cli_options *o)
{
  for (int i = 0; i < o->nkernels; i++)
    for (const struct option *opt = long_options; opt->name; opt++)
      if (strcmp(o->kernels[i], opt->name) == 0)
        return usage_error("'%s' is not a command; did you mean '--%s'?",
                           opt->name, opt->name);
  return 0;
}

int cli_gemm_command(const cli_options *o)
{
  if (o->command == CMD_RUN)
    return strcmp(o->run_kernel, CLI_GEMM) == 0           ? CLI_GEMM_PLAIN
           : strcmp(o->run_kernel, CLI_GROUPED_GEMM) == 0 ? CLI_GEMM_GROUPED
                                                          : 0;
  if (o->command == CMD_TUNE)
    return o->tune_op && strcmp(o->tune_op, CLI_GEMM) == 0 ? CLI_GEMM_PLAIN
                                                           : 0;
  for (int i = 0; o->command == CMD_WARM && i < o->nkernels; i++)
    if (strcmp(o->kernels[i], CLI_GEMM) == 0)
      return CLI_GEMM_PLAIN;
    else if (strcmp(o->kernels[i], CLI_GROUPED_GEMM) == 0)
      return CLI_GEMM_GROUPED;
  return 0;
}

/* The defaults of the options not given. */
static void gemm_defaults(cli_options *o)
{
  if (!o->gemm_ab_type)
    o->gemm_ab_type = TJ_DTYPE_F16;
  if (!o->gemm_c_type)
    o->gemm_c_type = o->gemm_ab_type;
  if (!o->gemm_grouped)
    o->gemm_grouped = TJ_GROUPED_M;
  if (!o->gemm_groups)
    o->gemm_groups = CLI_GROUPED_DEFAULT_GROUPS;
  if (o->nshapes == 0 && o->command != CMD_TUNE) {
    o->shapes[0][0] = o->shapes[0][1] = o->shapes[0][2] = CLI_GEMM_DEFAULT_SIZE;
    o->nshapes = 1;
  }
}

/* The GEMM family's options go with --run gemm, --warm gemm and --warm
 * grouped_gemm only (--grouped and --groups with the last only), and
 * with one another as the calls take them. */
static int check_gemm_family(cli_options *o, const parse_state *ps)
{
  int family = cli_gemm_command(o);
  const char *what = family == CLI_GEMM_GROUPED ? CLI_GROUPED_GEMM : CLI_GEMM;
  if (ps->given_gemm && !family)
    return usage_error("--%s applies only to --run and --warm of gemm and "
                       "grouped_gemm, and to --tune gemm%s",
                       option_name(ps->given_gemm),
                       o->command == CMD_TUNE ? " (gemm_f16 is f16, nn, no "
                                                "epilogue)" : "");
  if (o->command == CMD_TUNE && (o->gemm_aux || o->gemm_bias_grad))
    return usage_error("--%s does not apply to --tune: an op's decisions "
                       "hold with and without it", o->gemm_aux ? "aux"
                                                               : "bias-grad");
  if (ps->given_grouped && family != CLI_GEMM_GROUPED)
    return usage_error("--%s applies only to --run grouped_gemm and --warm "
                       "grouped_gemm", option_name(ps->given_grouped));
  if (ps->given_routing && (family != CLI_GEMM_GROUPED || o->command != CMD_RUN))
    return usage_error("--routing applies only to --run grouped_gemm");
  if (!family)
    return 0;
  if (o->command == CMD_WARM && ps->given_jobs)
    return usage_error("--jobs does not apply to --warm %s (it compiles "
                       "one configuration at a time)", what);
  if (o->command == CMD_WARM && o->nkernels > 1)
    return usage_error("--warm %s takes no other kernel names (warm them "
                       "with a --warm of their own)", what);
  if (o->command == CMD_RUN && o->nshapes > 1)
    return usage_error("--run %s takes one --shape, not %d", what, o->nshapes);
  if (ps->given_n && o->command == CMD_RUN)
    return usage_error("--run %s takes --shape MxNxK, not --n", what);
  if (o->gemm_aux && o->gemm_epilogue != TJ_EPILOGUE_BIAS_GELU)
    return usage_error("--aux applies only to --epilogue biasgelu");
  if (o->gemm_bias_grad && o->gemm_epilogue != TJ_EPILOGUE_DGELU)
    return usage_error("--bias-grad applies only to --epilogue dgelu");
  if (o->gemm_grouped == TJ_GROUPED_K && o->gemm_epilogue != TJ_EPILOGUE_NONE)
    return usage_error("--grouped k takes --epilogue none only (the weight "
                       "gradient has no epilogue)");
  gemm_defaults(o);
  return 0;
}

/* Options that only some commands read: given to another, they would be
 * silently ignored, so they are usage errors. */
static int check_applicable(cli_options *o, const parse_state *ps)
{
  cli_command c = o->command;
  const char *cmd = ps->command_flag;
  if (c != CMD_WARM && c != CMD_MERGE && bare_option_word(o))
    return EXIT_USAGE;
  if (c == CMD_NONE)
    return usage_error("no command given (--list-cache, --stats, --info, "
                       "--warm, --run, --verify-cache, ...)");
  if (o->narchs && c != CMD_WARM && c != CMD_COMPILE && c != CMD_EXPLAIN)
    return usage_error("--arch applies only to --warm, --compile and "
                       "--explain, not to --%s", cmd);
  if (ps->given_compile && c == CMD_EXPLAIN && o->nentries == 0)
    return usage_error("-I, -D and --option apply to --explain FILE with "
                       "--entry NAME (a module); an embedded kernel takes "
                       "none");
  if (ps->given_compile && c != CMD_COMPILE && c != CMD_EXPLAIN)
    return usage_error("%s applies only to --compile and --explain, not to "
                       "--%s",
                       ps->given_compile == 'I' ? "-I"
                       : ps->given_compile == 'D' ? "-D"
                       : ps->given_compile == OPT_ENTRY ? "--entry" : "--option",
                       cmd);
  if (c == CMD_COMPILE && o->nentries == 0)
    return usage_error("--compile needs at least one --entry NAME");
  if (check_gemm_family(o, ps) != 0)
    return EXIT_USAGE;
  if (o->nshapes && c != CMD_TUNE && !cli_gemm_command(o))
    return usage_error("--shape applies only to --tune, --run gemm, --warm "
                       "gemm and --warm grouped_gemm, not to --%s", cmd);
  if (c == CMD_TUNE && o->nshapes == 0)
    return usage_error("--tune needs at least one --shape MxNxK");
  if ((ps->given_n || ps->given_seed) && c != CMD_RUN)
    return usage_error("--%s applies only to --run, not to --%s",
                       ps->given_n ? "n" : "seed", cmd);
  if (ps->given_device && c != CMD_RUN && c != CMD_WARM &&
      c != CMD_COMPILE && c != CMD_TUNE && c != CMD_EXPLAIN)
    return usage_error("--device applies only to --run, --warm, --compile, "
                       "--tune and --explain, not to --%s", cmd);
  if ((ps->given_jobs || ps->given_quiet) && c != CMD_WARM && c != CMD_COMPILE)
    return usage_error("--%s applies only to --warm and --compile, not to --%s",
                       ps->given_jobs ? "jobs" : "quiet", cmd);
  if (o->all && c != CMD_INFO && c != CMD_LIST_KERNELS)
    return usage_error("--all applies only to --info and --list-kernels, not "
                       "to --%s", cmd);
  if (o->repair && c != CMD_VERIFY)
    return usage_error("--repair applies only to --verify-cache, not to --%s",
                       cmd);
  if (o->json && (c == CMD_WARM || c == CMD_EVICT || c == CMD_CLEAR ||
                  c == CMD_EXPLAIN))
    return usage_error("--json does not apply to --%s", cmd);
  if (c == CMD_MERGE && o->nkernels == 0)
    return usage_error("--merge needs at least one cache file to copy from");
  if (o->system && c != CMD_LIST && c != CMD_STATS && c != CMD_VERIFY)
    return usage_error("--system applies only to --list-cache, --stats and "
                       "--verify-cache, not to --%s", cmd);
  if (o->system && o->repair)
    return usage_error("--repair cannot change a --system cache (it is "
                       "read-only)");
  if (o->system && (o->cache_flags & TJ_CACHE_GROUP))
    return usage_error("--group does not apply to a --system cache");
  if (o->json && c == CMD_MERGE)
    return usage_error("--json does not apply to --%s", cmd);
  if (o->nkernels && c != CMD_WARM && c != CMD_MERGE)
    return usage_error("unexpected argument '%s' (only --warm takes kernel "
                       "names, and --merge files)", o->kernels[0]);
  return 0;
}

int cli_parse_options(int argc, char **argv, cli_options *o)
{
  parse_state state, *ps = &state;
  memset(o, 0, sizeof *o);
  memset(ps, 0, sizeof *ps);
  o->max_age = -1;
  o->seed = 1;
  opterr = 0; /* our messages name the program, not the libtool wrapper */
  int val, rc;
  while ((val = getopt_long(argc, argv, ":hVqj:I:D:", long_options, NULL)) != -1)
    if ((rc = parse_one(o, ps, val, optarg, argv)) != 0)
      return rc;
  o->kernels = argv + optind;
  o->nkernels = argc - optind;
  if (ps->version) {
    o->command = CMD_VERSION;
    return 0;
  }
  if (!o->jobs)
    o->jobs = cli_default_jobs();
  return check_applicable(o, ps);
}

void cli_free_options(cli_options *o)
{
  for (int i = 0; i < o->ndefines; i++)
    free(o->defines[i]);
  o->ndefines = 0;
}

unsigned cli_default_jobs(void)
{
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 256 ? 256 : (unsigned)n;
}

tj_options cli_runtime_options(const cli_options *o, const char *arch)
{
  tj_options opts = {0};
  opts.device = o->device;
  opts.arch = arch;
  opts.cache_path = o->cache_path;
  opts.flags = o->cache_flags | (arch ? TJ_NO_DEVICE : 0);
  return opts;
}
