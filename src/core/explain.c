/*
 * explain.c: why a request missed the per-user cache.  On a miss (and only
 * then: a hit never comes here) the rows the file holds for the same entry
 * (an embedded kernel's name, a module's entries) are compared with the
 * request, input by input, and the nearest one is named with what differs:
 * the source, a header by name, the options, the compiler fingerprint, the
 * arch; or there is no row for the entry at all.  The sentence goes to the
 * trace (TOKITAI_JIT_TRACE) and, when there were rows, to tj_errmsg as a
 * warning; tj_explain_miss gives it to callers and to tokitai-jit
 * --explain.
 *
 * A row's columns give its arch, platform, compiler and options; what they
 * cannot give (the source's and the headers' fingerprints) is the inputs
 * record stored beside each row compiled here (tj__inputs_record).
 */
#include "internal.h"
#include "embedded.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- the inputs record */

/* A name on one line of the record: no TAB or line break in it. */
static void put_name(FILE *f, const char *s)
{
  for (; *s; s++)
    fputc(*s == '\t' || *s == '\n' || *s == '\r' ? '?' : *s, f);
}

char *tj__inputs_record(const char *source, size_t source_len,
                        const tj_header *mem, int nmem, const char *files)
{
  char hex[TJ__KEY_HEX], *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  if (!f)
    return NULL;
  tj__hash_hex(source, source_len, hex);
  fprintf(f, "encoding\t%s\nsource\t%s\n", tj__key_encoding(), hex);
  for (int i = 0; i < nmem; i++) {
    tj__hash_hex(mem[i].contents, strlen(mem[i].contents), hex);
    fputs("header\t", f);
    put_name(f, mem[i].name);
    fprintf(f, "\t%s\n", hex);
  }
  if (files)
    fprintf(f, "files\t%s\n", files);
  if (fclose(f) != 0) {
    free(out);
    return NULL;
  }
  return out;
}

/* The value of the line "tag<TAB>name<TAB>value" (name NULL: "tag<TAB>
 * value") in record, as a pointer and length; NULL when absent. */
static const char *record_value(const char *record, const char *tag,
                                const char *name, size_t *vlen)
{
  size_t tl = strlen(tag), nl = name ? strlen(name) : 0;
  for (const char *p = record; p && *p;) {
    size_t n = strcspn(p, "\n");
    const char *v = p + tl + 1 + (name ? nl + 1 : 0);
    if (n > tl && strncmp(p, tag, tl) == 0 && p[tl] == '\t' &&
        (!name || (strncmp(p + tl + 1, name, nl) == 0 && p[tl + 1 + nl] == '\t'))
        && v <= p + n) {
      *vlen = (size_t)(p + n - v);
      return v;
    }
    p += n + (p[n] == '\n');
  }
  return NULL;
}

static int same_value(const char *a, const char *b, const char *tag,
                      const char *name)
{
  size_t al = 0, bl = 0;
  const char *x = record_value(a, tag, name, &al);
  const char *y = record_value(b, tag, name, &bl);
  return (!x && !y) || (x && y && al == bl && memcmp(x, y, al) == 0);
}

/* ------------------------------------------------------- one row */

typedef struct diff {
  FILE *f;
  int n;
} diff;

static void say(diff *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void say(diff *d, const char *fmt, ...)
{
  va_list ap;
  fputs(d->n++ ? "; " : "", d->f);
  va_start(ap, fmt);
  vfprintf(d->f, fmt, ap);
  va_end(ap);
}

static void column(diff *d, const char *what, const char *here,
                   const char *there)
{
  if (strcmp(here, there) != 0)
    say(d, "%s ('%.200s' here, '%.200s' there)", what, here, there);
}

/* Each header line of a naming, by name, that b lacks or has otherwise. */
static int headers_against(diff *d, const char *a, const char *b,
                           const char *missing, int compare)
{
  int found = 0;
  for (const char *p = a; p && *p;) {
    size_t n = strcspn(p, "\n");
    if (n > 7 && strncmp(p, "header\t", 7) == 0) {
      const char *name = p + 7, *tab = memchr(name, '\t', n - 7);
      char *nm = tab ? strndup(name, (size_t)(tab - name)) : NULL;
      size_t vl;
      if (nm && !record_value(b, "header", nm, &vl)) {
        say(d, "header '%.200s' (%s)", nm, missing);
        found = 1;
      } else if (nm && compare && !same_value(a, b, "header", nm)) {
        say(d, "header '%.200s'", nm);
        found = 1;
      }
      free(nm);
    }
    p += n + (p[n] == '\n');
  }
  return found;
}

/* What the records say differs: the key's encoding, the source, each
 * in-memory header by name, else the header files as a whole. */
static void inputs_against(diff *d, const char *here, const char *there)
{
  if (!there) {
    if (!d->n)
      say(d, "an input the row does not record (it was stored without the "
          "fingerprints of its source and headers)");
    return;
  }
  if (!same_value(here, there, "encoding", NULL))
    say(d, "the key's encoding (another release of the library)");
  if (!same_value(here, there, "source", NULL))
    say(d, "the source");
  int named = headers_against(d, here, there, "not in that row", 1);
  named |= headers_against(d, there, here, "not given here", 0);
  if (!named && !same_value(here, there, "files", NULL))
    say(d, "a header file reached through the include paths");
}

/* A row's name expressions as the request writes them: the entries of its
 * entries column that are no C name, sorted, space-separated. */
static int is_c_name(const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') ||
          (s[i] >= 'A' && s[i] <= 'Z') || (i && s[i] >= '0' && s[i] <= '9')))
      return 0;
  return n > 0;
}

static void row_exprs(const char *entries, FILE *f)
{
  const char *e, *l;
  size_t el, ll;
  int n = 0;
  for (const char *p = entries; tj_entries_next(&p, &e, &el, &l, &ll);)
    if (!is_c_name(e, el))
      fprintf(f, "%s%.*s", n++ ? " " : "", (int)el, e);
}

static int module_shares_entry(const tj__explain_request *q, const char *entries)
{
  const char *e, *l;
  size_t el, ll;
  for (const char *p = entries; tj_entries_next(&p, &e, &el, &l, &ll);)
    for (int i = 0; i < q->nentries; i++)
      if (strlen(q->entries[i]) == el && strncmp(q->entries[i], e, el) == 0)
        return 1;
  return 0;
}

static void exprs_against(diff *d, const tj__explain_request *q,
                          const char *entries)
{
  char *here = NULL, *there = NULL;
  size_t hl = 0, tl = 0;
  FILE *h = open_memstream(&here, &hl), *t = open_memstream(&there, &tl);
  for (int i = 0; h && i < q->nexprs; i++)
    fprintf(h, "%s%s", i ? " " : "", q->exprs[i]);
  if (t)
    row_exprs(entries, t);
  if (h && t && fclose(h) == 0 && fclose(t) == 0)
    column(d, "the name expressions", here, there);
  else
    say(d, "(out of memory)");
  free(here);
  free(there);
}

/* Whether fingerprints a and b differ only in their " e:" digest, which
 * covers the base options the platform gives each arch: so it differs
 * wherever the arch does, and says nothing more then. */
static int differ_only_in_env(const char *a, const char *b)
{
  const char *ea = strstr(a, " e:"), *eb = strstr(b, " e:");
  if (!ea || !eb || ea - a != eb - b || strncmp(a, b, (size_t)(ea - a)) != 0)
    return 0;
  ea += 3 + strspn(ea + 3, "0123456789abcdef");
  eb += 3 + strspn(eb + 3, "0123456789abcdef");
  return strcmp(ea, eb) == 0;
}

static void compiler_against(diff *d, const tj__explain_request *q,
                             const tj__similar_row *r)
{
  if (strcmp(q->arch, r->arch) != 0 &&
      differ_only_in_env(q->compiler, r->compiler))
    return;
  column(d, "the compiler fingerprint", q->compiler, r->compiler);
}

/* ------------------------------------------------------- every row */

typedef struct nearest {
  const tj__explain_request *q;
  int rows, hit;
  int best_n;          /* differences of the nearest so far; -1: none */
  char best_key[TJ__KEY_HEX];
  char *best;          /* what differs, malloc'd */
} nearest;

static int consider_row(const tj__similar_row *r, void *ctx)
{
  nearest *s = ctx;
  const tj__explain_request *q = s->q;
  if (strcmp(r->key, q->key) == 0) {
    s->hit = 1;
    return 1;
  }
  if (!q->kernel && !module_shares_entry(q, r->entries))
    return 0;
  s->rows++;
  char *text = NULL;
  size_t len = 0;
  diff d = {open_memstream(&text, &len), 0};
  if (!d.f)
    return 0;
  column(&d, "the platform", TJ__PLATFORM, r->platform);
  column(&d, "the arch", q->arch, r->arch);
  compiler_against(&d, q, r);
  column(&d, "the options", q->options, r->options);
  if (!q->kernel)
    exprs_against(&d, q, r->entries);
  inputs_against(&d, q->inputs, r->inputs);
  if (fclose(d.f) != 0 || (s->best_n >= 0 && d.n >= s->best_n)) {
    free(text);
    return 0;
  }
  free(s->best);
  s->best = text;
  s->best_n = d.n;
  snprintf(s->best_key, sizeof s->best_key, "%s", r->key);
  return 0;
}

int tj__explain(tj_runtime *rt, const tj__explain_request *q, char *buf,
                size_t len, int *rows)
{
  nearest s = {q, 0, 0, -1, "", NULL};
  tj__cache *c = tj__runtime_cache(rt);
  *rows = 0;
  if (!c) {
    snprintf(buf, len, "%s: there is no cache to look in", q->what);
    return TJ_ECACHE;
  }
  if (tj__cache_similar(c, q->kernel, consider_row, &s) != TJ_OK) {
    free(s.best);
    snprintf(buf, len, "%s: the cache cannot be read: %s", q->what,
             tj__cache_errmsg(c));
    return TJ_ECACHE;
  }
  *rows = s.rows;
  if (s.hit)
    snprintf(buf, len, "%s: cached for %s (key %s)", q->what, q->arch, q->key);
  else if (!s.best)
    snprintf(buf, len, "%s: not cached for %s: no row for this entry",
             q->what, q->arch);
  else
    snprintf(buf, len, "%s: not cached for %s: %s (key %.16s) differs in %s",
             q->what, q->arch, s.rows > 1 ? "the nearest of its rows"
             : "its one row", s.best_key, s.best);
  free(s.best);
  return s.hit ? TJ_OK : TJ_ENOENT;
}

void tj__explain_miss(tj_runtime *rt, const tj__explain_request *q,
                      uint64_t since)
{
  char why[2048];
  int rows = 0;
  if (!rt->layers || tj__explain(rt, q, why, sizeof why, &rows) != TJ_ENOENT)
    return;
  if (rt->trace)
    fprintf(stderr, "tokitai-jit trace: %s\n", why);
  if (rows && tj__messages_clock() == since)
    tj__warn(rt, "%s", why);
}

/* ------------------------------------------------------- public */

static int explain_embedded(tj_runtime *rt, const char *name, char *buf,
                            size_t len)
{
  char key[TJ__KEY_HEX];
  int rows;
  const tj__embedded_kernel *e = tj__embedded_find(name);
  if (!e)
    return tj__fail(rt, TJ_EINVAL, "no embedded kernel is named '%.128s' "
                    "(tokitai-jit --list-kernels --all names them)", name);
  const char *arch = tj__embedded_arch(rt, e);
  tj__key_of_kernel(e->source, e->source_len, e->entry, "", arch,
                    TJ__PLATFORM, rt->compiler, key);
  char *inputs = tj__inputs_record(e->source, e->source_len, NULL, 0, NULL);
  if (!inputs)
    return tj__fail(rt, TJ_ENOMEM, "out of memory");
  tj__explain_request q = {e->entry, key, e->entry, NULL, 0, NULL, 0, arch,
                           rt->compiler, "", inputs};
  int rc = tj__explain(rt, &q, buf, len, &rows);
  free(inputs);
  return rc;
}

int tj_explain_miss(tj_runtime *rt, const char *name,
                    const tj_module_source *src, char *buf, size_t len)
{
  if (!tj__runtime_usable(rt))
    return TJ_EINVAL;
  if ((!name) == (!src) || !buf || len == 0)
    return tj__fail(rt, TJ_EINVAL, "tj_explain_miss: give a kernel name or a "
                    "module source (one of them), and a buffer");
  buf[0] = '\0';
  int rc = TJ_OK;
  if (name)
    rc = explain_embedded(rt, name, buf, len);
  else
    rc = tj__module_explain(rt, src, buf, len);
  if (rc == TJ_ECACHE)
    tj__fail(rt, rc, "%s", buf);
  return rc;
}
