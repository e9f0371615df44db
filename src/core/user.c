/*
 * user.c: a caller's own kernels, as modules (tj_module_compile): one
 * source with its options and headers, compiled once into one code object
 * and one cache row, any number of entries taken from it.  The flow is
 * the embedded kernels' (runtime.c): in-memory table -> key (with the
 * headers, headers.c) -> SQLite -> compiler -> module load.
 */
#include "internal.h"
#include "codeobj.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SOURCE_BYTES (64u << 20)
#define MAX_ARG_BYTES 4096
#define MAX_ARGS 256
#define MAX_HEADERS 1024
#define MAX_ENTRIES 1024
#define MAX_ENTRY_BYTES 256
#define COMPILER_NAME "caller.hip" /* the compiler sees every source so */
/* from_cache: the row is this key's code and it lacks a C name; C names do
 * not change the code, so compiling again would not find it either. */
#define MISSING_ENTRY 1

/* A request, checked and normalised: entries sorted and distinct, and the
 * name expressions among them (in the same order) for the compiler. */
typedef struct request {
  tj_runtime *rt;
  const tj_module_source *src;
  const char *arch; /* what it compiles for: rt->arch, or its
                       arch-specific target (tj__module_get_for) */
  size_t source_len;
  const char *name;
  const char **entries;
  int nentries;
  const char **exprs;
  int nexprs;
  char id[TJ__KEY_HEX];
  char key[TJ__KEY_HEX];
  char digest[TJ__KEY_HEX];
  char *inputs; /* tj__inputs_record, made on a miss; malloc'd */
} request;

/* ------------------------------------------------------- checking */

static int is_identifier(const char *s)
{
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
    return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9') || *s == '_'))
      return 0;
  return 1;
}

/* Printable ASCII with no blank at either end: what a C++ name expression
 * is made of, and nothing that could end the line the compiler puts it on. */
static int valid_entry(const char *e)
{
  size_t n = strnlen(e, MAX_ENTRY_BYTES + 1);
  if (n == 0 || n > MAX_ENTRY_BYTES || e[0] == ' ' || e[n - 1] == ' ' ||
      (e[0] >= '0' && e[0] <= '9'))
    return 0;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)e[i] < 0x20 || (unsigned char)e[i] > 0x7e)
      return 0;
  return 1;
}

static int check_strings(tj_runtime *rt, const char *what,
                         const char *const *v, int n, int max)
{
  if (n < 0 || n > max || (n > 0 && !v))
    return tj__fail(rt, n > max ? TJ_ERANGE : TJ_EINVAL, "tj_module_compile: "
                    "%d %s (at most %d, and not NULL when any)", n, what, max);
  for (int i = 0; i < n; i++) {
    if (!v[i])
      return tj__fail(rt, TJ_EINVAL, "tj_module_compile: %s[%d] is NULL", what, i);
    if (strnlen(v[i], MAX_ARG_BYTES + 1) > MAX_ARG_BYTES)
      return tj__fail(rt, TJ_ERANGE, "tj_module_compile: %s[%d] is over %d "
                      "bytes", what, i, MAX_ARG_BYTES);
  }
  return TJ_OK;
}

static int check_headers(tj_runtime *rt, const tj_module_source *s)
{
  if (s->num_headers < 0 || s->num_headers > MAX_HEADERS ||
      (s->num_headers > 0 && !s->headers))
    return tj__fail(rt, s->num_headers > MAX_HEADERS ? TJ_ERANGE : TJ_EINVAL,
                    "tj_module_compile: %d headers (at most %d)",
                    s->num_headers, MAX_HEADERS);
  for (int i = 0; i < s->num_headers; i++) {
    const tj_header *h = &s->headers[i];
    if (!h->name || !h->contents || !h->name[0])
      return tj__fail(rt, TJ_EINVAL, "tj_module_compile: header %d has a "
                      "NULL or empty name or NULL contents", i);
    if (strnlen(h->name, MAX_ARG_BYTES + 1) > MAX_ARG_BYTES ||
        strnlen(h->contents, MAX_SOURCE_BYTES + 1) > MAX_SOURCE_BYTES)
      return tj__fail(rt, TJ_ERANGE, "tj_module_compile: header '%.64s' is "
                      "over its limit", h->name);
  }
  return TJ_OK;
}

static int check_source(tj_runtime *rt, const tj_module_source *s,
                        size_t *len)
{
  if (!s->source)
    return tj__fail(rt, TJ_EINVAL, "tj_module_compile: source is NULL");
  *len = strnlen(s->source, MAX_SOURCE_BYTES + 1);
  if (*len == 0)
    return tj__fail(rt, TJ_EINVAL, "tj_module_compile: source is empty");
  if (*len > MAX_SOURCE_BYTES)
    return tj__fail(rt, TJ_ERANGE, "tj_module_compile: source is over the "
                    "limit of %u bytes", MAX_SOURCE_BYTES);
  if (s->num_entries < 1)
    return tj__fail(rt, TJ_EINVAL, "tj_module_compile: no entries given");
  int rc = check_strings(rt, "entries", s->entries, s->num_entries, MAX_ENTRIES);
  for (int i = 0; rc == TJ_OK && i < s->num_entries; i++)
    if (!valid_entry(s->entries[i]))
      return tj__fail(rt, TJ_EINVAL, "tj_module_compile: entry '%.64s' is "
                      "not a C name or C++ name expression (printable ASCII, "
                      "not starting with a digit, 1 to %d characters)", s->entries[i], MAX_ENTRY_BYTES);
  if (rc == TJ_OK)
    rc = check_strings(rt, "options", s->options, s->num_options, MAX_ARGS);
  /* Before the key and the compiler: an option the compiler could exit()
   * or abort on must never reach it. */
  char why[512];
  if (rc == TJ_OK &&
      (rc = tj__options_check(s->options, s->num_options, why, sizeof why)) != TJ_OK)
    return tj__fail(rt, rc, "tj_module_compile: %s", why);
  return rc == TJ_OK ? check_headers(rt, s) : rc;
}

static int cmp_str(const void *a, const void *b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int make_request(tj_runtime *rt, const tj_module_source *s,
                        const char *arch, request *r)
{
  memset(r, 0, sizeof *r);
  r->rt = rt;
  r->src = s;
  r->arch = arch;
  int rc = check_source(rt, s, &r->source_len);
  if (rc != TJ_OK)
    return rc;
  r->name = s->name && s->name[0] ? s->name : COMPILER_NAME;
  r->entries = malloc((size_t)s->num_entries * sizeof *r->entries);
  r->exprs = malloc((size_t)s->num_entries * sizeof *r->exprs);
  if (!r->entries || !r->exprs)
    return tj__fail(rt, TJ_ENOMEM, "out of memory");
  memcpy(r->entries, s->entries, (size_t)s->num_entries * sizeof *r->entries);
  qsort(r->entries, (size_t)s->num_entries, sizeof *r->entries, cmp_str);
  for (int i = 0; i < s->num_entries; i++) {
    if (r->nentries && strcmp(r->entries[r->nentries - 1], r->entries[i]) == 0)
      continue;
    r->entries[r->nentries++] = r->entries[i];
    if (!is_identifier(r->entries[i]))
      r->exprs[r->nexprs++] = r->entries[i];
  }
  return TJ_OK;
}

static void free_request(request *r)
{
  free(r->inputs);
  free(r->entries);
  free(r->exprs);
}

static tj__key_input key_input(const request *r, const char *headers,
                               const char *const *all, int nall)
{
  tj__key_input in = {r->src->source, r->source_len, "", "", r->arch,
                      TJ__PLATFORM, r->rt->compiler, r->src->options,
                      r->src->num_options, all, nall, headers};
  return in;
}

/* ------------------------------------------------------- the module */

void tj__module_free(tj_module *m)
{
  if (!m)
    return;
  tj__module_unload(m->module);
  for (int i = 0; i < m->nentries; i++) {
    free(m->entries ? m->entries[i] : NULL);
    free(m->lowered ? m->lowered[i] : NULL);
  }
  free(m->entries);
  free(m->lowered);
  free(m->kernels);
  free(m->code);
  free(m);
}

static tj_module *module_new(const request *r)
{
  tj_module *m = calloc(1, sizeof *m);
  if (!m)
    return NULL;
  m->rt = r->rt;
  m->nentries = r->nentries;
  m->entries = calloc((size_t)r->nentries, sizeof *m->entries);
  m->lowered = calloc((size_t)r->nentries, sizeof *m->lowered);
  m->kernels = calloc((size_t)r->nentries, sizeof *m->kernels);
  int ok = m->entries && m->lowered && m->kernels;
  for (int i = 0; ok && i < r->nentries; i++)
    ok = (m->entries[i] = strdup(r->entries[i])) != NULL;
  if (!ok) {
    tj__module_free(m);
    return NULL;
  }
  memcpy(m->key, r->key, sizeof m->key);
  return m;
}

/* ------------------------------------------------------- entries */

static int entry_index(const tj_module *m, const char *entry)
{
  int lo = 0, hi = m->nentries - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2, c = strcmp(m->entries[mid], entry);
    if (c == 0)
      return mid;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return -1;
}

/* The stored "expression<TAB>lowered" lines: the lowering of expr. */
static char *stored_lowering(const char *lines, const char *expr)
{
  size_t n = strlen(expr), elen, llen;
  const char *e, *l;
  for (const char *p = lines; tj_entries_next(&p, &e, &elen, &l, &llen);)
    if (elen == n && llen > 0 && strncmp(e, expr, n) == 0)
      return strndup(l, llen);
  return NULL;
}

static char *format_entries(const tj_module *m)
{
  size_t len = 1;
  for (int i = 0; i < m->nentries; i++)
    len += strlen(m->entries[i]) + strlen(m->lowered[i]) + 2;
  char *s = malloc(len), *o = s;
  for (int i = 0; s && i < m->nentries; i++)
    o += sprintf(o, "%s\t%s\n", m->entries[i], m->lowered[i]);
  if (s)
    *o = '\0';
  return s;
}

/* A C name: the symbol itself (extern "C"), else the one kernel of that
 * name at namespace scope. */
static int resolve_c_name(const request *r, tj_module *m, int i)
{
  const char *e = m->entries[i];
  char sym[512];
  int found = 1;
  if (tj__elf_has_kernel(m->code, m->code_size, e))
    snprintf(sym, sizeof sym, "%s", e);
  else
    found = tj__elf_find_cxx_kernel(m->code, m->code_size, e, sym, sizeof sym);
  if (found == 1)
    return (m->lowered[i] = strdup(sym)) ? TJ_OK : TJ_ENOMEM;
  if (found < 0)
    return tj__fail(r->rt, TJ_ENOENT, "entry '%s' of %s is overloaded: name "
                    "one with a name expression, e.g. "
                    "'static_cast<void (*)(float *)>(%s)'", e, r->name, e);
  return tj__fail(r->rt, TJ_ENOENT, "%s defines no kernel named '%s' (a C "
                  "name must be an extern \"C\" __global__ function or one at "
                  "namespace scope; other kernels are named by C++ name "
                  "expressions such as 'ns::%s' or '%s<float>')", r->name, e,
                  e, e);
}

/* Give every entry its symbol: the compiler's lowering (or the row's) for
 * name expressions, the symbol table for C names. */
static int resolve_entries(const request *r, tj_module *m, char **lowered,
                           const char *stored)
{
  for (int i = 0, x = 0; i < m->nentries; i++) {
    if (is_identifier(m->entries[i])) {
      int rc = resolve_c_name(r, m, i);
      if (rc != TJ_OK)
        return rc == TJ_ENOMEM ? tj__fail(r->rt, rc, "out of memory") : rc;
      continue;
    }
    char *l = lowered ? (lowered[x] ? strdup(lowered[x]) : NULL)
                      : stored_lowering(stored, m->entries[i]);
    x++;
    if (!l || !tj__elf_has_kernel(m->code, m->code_size, l)) {
      free(l);
      return tj__fail(r->rt, TJ_ENOENT, "%s has no kernel for the name "
                      "expression '%s'%s", r->name, m->entries[i],
                      lowered ? "" : " (its cache row does not lower it)");
    }
    m->lowered[i] = l;
  }
  return TJ_OK;
}

/* ------------------------------------------------------- cache and compiler */

/* A module's row names its entries (space-separated) in the kernel
 * column and its options (quoted where they hold a space) in the options
 * column, which a lookup expects back (tj__cache_get).  kernels may be
 * NULL: a lookup does not compare them. */
static int row_names(const request *r, char **kernels, char **options)
{
  const tj_module_source *s = r->src;
  size_t kl = 1, ol = 1;
  for (int i = 0; i < r->nentries; i++)
    kl += strlen(r->entries[i]) + 1;
  for (int i = 0; i < s->num_options; i++)
    ol += strlen(s->options[i]) + 3;
  char *k = kernels ? (*kernels = malloc(kl)) : NULL;
  char *o = *options = malloc(ol);
  if ((kernels && !k) || !o) {
    free(k);
    free(o);
    return TJ_ENOMEM;
  }
  for (int i = 0; k && i < r->nentries; i++)
    k += sprintf(k, "%s%s", i ? " " : "", r->entries[i]);
  if (k)
    *k = '\0';
  for (int i = 0; i < s->num_options; i++)
    o += sprintf(o, strchr(s->options[i], ' ') ? "%s'%s'" : "%s%s",
                 i ? " " : "", s->options[i]);
  *o = '\0';
  return TJ_OK;
}

static int from_cache(const request *r, tj_module *m)
{
  tj_runtime *rt = r->rt;
  char *stored = NULL, *options = NULL;
  int layer = 0;
  if (row_names(r, NULL, &options) != TJ_OK)
    return tj__fail(rt, TJ_ENOMEM, "out of memory");
  tj__cache_row want = {r->key, NULL, r->arch, TJ__PLATFORM, rt->compiler,
                        options, NULL, 0, 0, NULL, NULL};
  int rc = tj__runtime_lookup(rt, &want, r->name, &m->code, &m->code_size,
                              &stored, &layer);
  free(options);
  if (rc != TJ_OK)
    return rc;
  rc = resolve_entries(r, m, NULL, stored);
  free(stored);
  if (rc == TJ_ENOENT && r->nexprs > 0) {
    /* A row that cannot lower our expressions is another's: compile. */
    free(m->code);
    m->code = NULL;
    for (int i = 0; i < m->nentries; i++) {
      free(m->lowered[i]);
      m->lowered[i] = NULL;
    }
    return TJ_ENOENT;
  }
  if (rc != TJ_OK)
    return rc == TJ_ENOENT ? MISSING_ENTRY : rc;
  m->origin = TJ_FROM_CACHE;
  tj__runtime_count_hit(rt, layer);
  return TJ_OK;
}

/* The compile failed: if it compiles without the name expressions, one of
 * them names nothing, which is a missing entry, not a compile error. */
static int blame_expressions(const request *r, const tj__compile_input *in,
                             const char *log)
{
  tj__compile_input plain = *in;
  tj__compile_result res;
  plain.nexprs = 0;
  int rc = tj__compile_module(&plain, &res, NULL);
  free(res.code);
  free(res.log);
  if (rc != TJ_OK)
    return TJ_ECOMPILE;
  const char *which = NULL;
  for (int i = 0; i < r->nexprs && !which; i++)
    if (log && strstr(log, r->exprs[i]))
      which = r->exprs[i];
  if (which)
    return tj__fail(r->rt, TJ_ENOENT, "%s has no kernel for the name "
                    "expression '%s'", r->name, which);
  return tj__fail(r->rt, TJ_ENOENT, "%s has no kernel for one of its %d name "
                  "expressions ('%s'...)", r->name, r->nexprs, r->exprs[0]);
}

static void store(const request *r, tj_module *m)
{
  tj_runtime *rt = r->rt;
  char again[TJ__KEY_HEX], why[512];
  const tj_module_source *s = r->src;
  /* A header that changed while it compiled: this code matches neither
   * the old key nor, for sure, the new one.  Use it, store nothing. */
  if (tj__headers_digest(s->source, r->source_len, s->headers, s->num_headers,
                         s->options, s->num_options, again, why,
                         sizeof why) != TJ_OK ||
      strcmp(again, r->digest) != 0) {
    tj__warn(rt, "a header of %s changed while it compiled; not cached", r->name);
    return;
  }
  char *entries = format_entries(m), *kernels = NULL, *options = NULL;
  if (entries && row_names(r, &kernels, &options) == TJ_OK) {
    tj__cache_row row = {r->key, kernels, r->arch, TJ__PLATFORM, rt->compiler,
                         options, m->code, m->code_size, m->compile_ms, entries,
                         r->inputs};
    tj__runtime_store(rt, &row, r->name);
  }
  free(entries);
  free(kernels);
  free(options);
}

static int from_compiler(const request *r, tj_module *m)
{
  tj_runtime *rt = r->rt;
  const tj_module_source *s = r->src;
  tj__compile_input in = {s->source, COMPILER_NAME, r->arch, s->options,
                          s->num_options, s->headers, s->num_headers,
                          r->exprs, r->nexprs};
  tj__compile_result res;
  char **lowered = NULL;
  int rc = tj__runtime_may_compile(rt, r->name);
  if (rc != TJ_OK)
    return rc;
  rc = tj__compile_module(&in, &res, &lowered);
  if (rc == TJ_ECOMPILE && r->nexprs > 0 &&
      blame_expressions(r, &in, res.log) == TJ_ENOENT) {
    free(res.log);
    return TJ_ENOENT;
  }
  if ((rc = tj__runtime_compiled(rt, rc, &res, r->name, r->arch)) != TJ_OK)
    return rc;
  m->code = res.code;
  m->code_size = res.size;
  m->origin = TJ_FROM_COMPILER;
  m->compile_ms = res.ms;
  rc = resolve_entries(r, m, lowered, NULL);
  for (int i = 0; lowered && i < r->nexprs; i++)
    free(lowered[i]);
  free(lowered);
  if (rc == TJ_OK && tj__runtime_cache(rt))
    store(r, m);
  return rc;
}

/* ------------------------------------------------------- building */

static int load(const request *r, tj_module *m)
{
  tj_runtime *rt = r->rt;
  char err[512];
  for (int i = 0; i < m->nentries; i++) {
    m->kernels[i].rt = rt;
    m->kernels[i].index = i;
    m->kernels[i].entry = m->entries[i];
    memcpy(m->kernels[i].key, m->key, sizeof m->key);
    m->kernels[i].code = m->code;
    m->kernels[i].code_size = m->code_size;
    m->kernels[i].origin = m->origin;
    m->kernels[i].compile_ms = m->compile_ms;
    m->kernels[i].owner = m;
  }
  if (rt->compile_only)
    return TJ_OK;
  tj__device_make_current(&rt->device);
  int rc = tj__module_load_code(m->code, &m->module, err, sizeof err);
  for (int i = 0; rc == TJ_OK && i < m->nentries; i++)
    rc = tj__module_function(m->module, m->lowered[i], &m->kernels[i].function,
                             err, sizeof err);
  for (int i = 0; i < m->nentries; i++)
    m->kernels[i].module = m->module;
  return rc == TJ_OK ? TJ_OK : tj__fail(rt, rc, "%s", err);
}

/* The request as explain.c compares it; options: as the row says them
 * (row_names, malloc'd into *options). */
static int explain_request(request *r, tj__explain_request *q, char **options)
{
  const tj_module_source *s = r->src;
  if (row_names(r, NULL, options) != TJ_OK ||
      !(r->inputs = tj__inputs_record(s->source, r->source_len, s->headers,
                                      s->num_headers, r->digest)))
    return TJ_ENOMEM;
  *q = (tj__explain_request){r->name, r->key, NULL, r->exprs, r->nexprs,
                             r->entries, r->nentries, r->arch,
                             r->rt->compiler, *options, r->inputs};
  return TJ_OK;
}

/* A miss in every layer: say why, and keep the inputs record for the row
 * the compile stores. */
static void explain_miss(request *r, uint64_t since)
{
  tj__explain_request q;
  char *options = NULL;
  if (explain_request(r, &q, &options) == TJ_OK)
    tj__explain_miss(r->rt, &q, since);
  free(options);
}

/* The key of r as build_module makes it: the headers' digest first. */
static int module_key(request *r)
{
  char why[512];
  const tj_module_source *s = r->src;
  int rc = tj__headers_digest(s->source, r->source_len, s->headers,
                              s->num_headers, s->options, s->num_options,
                              r->digest, why, sizeof why);
  if (rc != TJ_OK)
    return tj__fail(r->rt, rc, "%s: %s", r->name, why);
  tj__key_input in = key_input(r, r->digest, r->exprs, r->nexprs);
  tj__key_compute(&in, r->key);
  return TJ_OK;
}

int tj__module_explain(tj_runtime *rt, const tj_module_source *src,
                       char *buf, size_t len)
{
  request r;
  tj_module_source s;
  tj__explain_request q;
  char *options = NULL;
  int rows = 0;
  if (tj__struct_in(&s, src, sizeof s,
                    TJ__FIRST_SIZE(tj_module_source, num_entries)) != TJ_OK)
    return tj__fail(rt, TJ_EINVAL, "tj_explain_miss: src->size is %zu: set "
                    "it to 0 or sizeof(tj_module_source)", src->size);
  int rc = make_request(rt, &s, rt->arch, &r);
  if (rc == TJ_OK)
    rc = module_key(&r);
  if (rc == TJ_OK && explain_request(&r, &q, &options) != TJ_OK)
    rc = tj__fail(rt, TJ_ENOMEM, "out of memory");
  if (rc == TJ_OK)
    rc = tj__explain(rt, &q, buf, len, &rows);
  free(options);
  free_request(&r);
  return rc;
}

static int build_module(void *ctx, tj_kernel **out)
{
  request *r = ctx;
  tj_runtime *rt = r->rt;
  int rc = tj__runtime_may_build(rt, r->name);
  if (rc != TJ_OK)
    return rc;
  double t0 = tj__trace_start(rt);
  rc = module_key(r);
  tj__trace_add(rt, TJ__TRACE_KEY, t0);
  if (rc != TJ_OK)
    return rc;
  tj_module *m = module_new(r);
  tj_kernel *holder = calloc(1, sizeof *holder);
  if (!m || !holder) {
    tj__module_free(m);
    free(holder);
    return tj__fail(rt, TJ_ENOMEM, "out of memory");
  }
  uint64_t said = tj__messages_clock();
  t0 = tj__trace_start(rt);
  rc = from_cache(r, m);
  tj__trace_add(rt, TJ__TRACE_LOOKUP, t0);
  /* A miss compiles, once a key (waiting for another's compile), unless
   * this thread asks only for what is built (tj__built_only). */
  t0 = tj__trace_start(rt);
  if (rc == TJ_ENOENT && !tj__built_only_now()) {
    tj__once once;
    explain_miss(r, said);
    if (tj__once_begin(rt, r->key, &once))
      rc = from_cache(r, m);
    if (rc == TJ_ENOENT)
      rc = from_compiler(r, m);
    tj__once_end(rt, &once);
  }
  tj__trace_add(rt, TJ__TRACE_COMPILE, t0);
  if (rc == MISSING_ENTRY)
    rc = TJ_ENOENT;
  t0 = tj__trace_start(rt);
  if (rc == TJ_OK)
    rc = load(r, m);
  tj__trace_add(rt, TJ__TRACE_LOAD, t0);
  tj__trace_count(rt, &rt->trace_modules);
  if (rc != TJ_OK) {
    tj__module_free(m);
    free(holder);
    return rc;
  }
  memcpy(holder->key, m->key, sizeof holder->key);
  holder->origin = m->origin;
  holder->owner = m;
  holder->rt = rt;
  *out = holder;
  return TJ_OK;
}

int tj__module_get_for(tj_runtime *rt, const tj_module_source *src,
                       const char *arch, tj_module **out)
{
  request r;
  int rc = make_request(rt, src, arch ? arch : rt->arch, &r);
  if (rc == TJ_OK) {
    tj__key_input in = key_input(&r, "", r.entries, r.nentries);
    tj__key_request(&in, src->headers, src->num_headers, r.id);
    int memory_hit = 0;
    tj_kernel *holder = NULL;
    rc = tj__modtable_get(rt->table, TJ__KIND_MODULE, r.id, build_module, &r,
                          &holder, &memory_hit);
    if (memory_hit)
      __atomic_fetch_add(&rt->stats.memory_hits, 1, __ATOMIC_RELAXED);
    if (rc == TJ_OK)
      *out = holder->owner;
  }
  free_request(&r);
  return rc;
}

/* ------------------------------------------------------- public */

int tj_module_compile(tj_runtime *rt, const tj_module_source *src,
                      tj_module **out)
{
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  if (!src || !out)
    return tj__fail(rt, TJ_EINVAL, "tj_module_compile: %s is NULL",
                    !src ? "the source description" : "the module output pointer");
  tj_module_source s;
  if (tj__struct_in(&s, src, sizeof s,
                    TJ__FIRST_SIZE(tj_module_source, num_entries)) != TJ_OK)
    return tj__fail(rt, TJ_EINVAL, "tj_module_compile: src->size is %zu: set "
                    "it to 0 or sizeof(tj_module_source) (%zu in this "
                    "library), and leave the fields this library does not "
                    "know zero", src->size, sizeof s);
  return tj__module_get_for(rt, &s, NULL, out);
}

int tj_module_kernel(tj_module *m, const char *entry, tj_kernel **out)
{
  if (!m || !entry || !out)
    return m ? tj__fail(m->rt, TJ_EINVAL, "tj_module_kernel: %s is NULL",
                        !entry ? "entry" : "the kernel output pointer")
             : TJ_EINVAL;
  int i = entry_index(m, entry);
  if (i < 0)
    return tj__fail(m->rt, TJ_ENOENT, "module %s has no entry '%.256s' (name "
                    "it in tj_module_source.entries when compiling)", m->key,
                    entry);
  *out = &m->kernels[i];
  return TJ_OK;
}

int tj_module_get_info(const tj_module *m, tj_module_info *info)
{
  if (!m || !info)
    return TJ_EINVAL;
  tj_module_info full = {sizeof full, m->key, m->code, m->code_size, m->origin,
                         m->compile_ms, m->nentries,
                         (const char *const *)m->entries,
                         (const char *const *)m->lowered};
  return tj__struct_out(info, &full, sizeof full,
                        TJ__FIRST_SIZE(tj_module_info, lowered));
}
