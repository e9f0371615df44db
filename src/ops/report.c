/*
 * report.c: a tj_report as JSON or markdown (tj_report_json,
 * tj_report_markdown).  Numbers are written in the C locale whatever the
 * calling program chose, since a report is data.
 */
#include "internal.h"
#include "json_escape.h"

#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- text output */

/* A growing string; a failed allocation sticks and ends as NULL. */
typedef struct strbuf {
  char *s;
  size_t len, cap;
  int failed;
} strbuf;

static int sb_reserve(strbuf *b, size_t more)
{
  if (b->failed)
    return 0;
  if (b->len + more + 1 <= b->cap)
    return 1;
  size_t cap = b->cap ? b->cap : 1024;
  while (cap < b->len + more + 1)
    cap *= 2;
  char *s = realloc(b->s, cap);
  if (!s) {
    b->failed = 1;
    return 0;
  }
  b->s = s;
  b->cap = cap;
  return 1;
}

static void sb_printf(strbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || !sb_reserve(b, (size_t)n)) {
    b->failed = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

static char *sb_finish(strbuf *b)
{
  if (b->failed || !b->s) {
    free(b->s);
    return NULL;
  }
  return b->s;
}

/* Reports are data: numbers always with '.', whatever LC_NUMERIC the
 * calling program chose.  uselocale() switches this thread only. */
typedef struct c_numbers {
  locale_t c, old;
} c_numbers;

static void c_numbers_begin(c_numbers *cn)
{
  cn->c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  cn->old = cn->c ? uselocale(cn->c) : (locale_t)0;
}

static void c_numbers_end(c_numbers *cn)
{
  if (cn->c) {
    uselocale(cn->old);
    freelocale(cn->c);
  }
}

/* A report's strings are fixed arrays that a caller may have filled
 * without a terminator: never read past the field. */
static void sb_put(void *ctx, const char *p, size_t n)
{
  strbuf *b = ctx;
  if (!sb_reserve(b, n))
    return;
  memcpy(b->s + b->len, p, n);
  b->len += n;
  b->s[b->len] = '\0';
}

/* A report's fixed-size text field, which need not end in a NUL. */
static void json_string(strbuf *b, const char *s, size_t cap)
{
  tj_json_escape(s, strnlen(s, cap), sb_put, b);
}

/* JSON has no NaN or infinity: they are written as null. */
static void json_number(strbuf *b, double v)
{
  if (isfinite(v))
    sb_printf(b, "%.10g", v);
  else
    sb_printf(b, "null");
}

#define JSON_STR(b, r, field, last)                                         \
  do {                                                                      \
    sb_printf(b, "  \"" #field "\": ");                                     \
    json_string(b, (r)->field, sizeof (r)->field);                          \
    sb_printf(b, "%s\n", (last) ? "" : ",");                                \
  } while (0)
#define JSON_NUM(b, r, field)                                               \
  do {                                                                      \
    sb_printf(b, "  \"" #field "\": ");                                     \
    json_number(b, (r)->field);                                             \
    sb_printf(b, ",\n");                                                    \
  } while (0)

static void json_body(strbuf *b, const tj_report *r)
{
  JSON_STR(b, r, kernel, 0);
  JSON_STR(b, r, ran, 0);
  sb_printf(b, "  \"n\": %llu,\n  \"m\": %d,\n  \"n_cols\": %d,\n  \"k\": %d,\n"
            "  \"seed\": %llu,\n  \"compared\": %llu,\n",
            (unsigned long long)r->n, r->m, r->n_cols, r->k,
            (unsigned long long)r->seed, (unsigned long long)r->compared);
  JSON_NUM(b, r, max_abs_error);
  JSON_NUM(b, r, rel_l2_error);
  JSON_NUM(b, r, max_abs_tolerance);
  JSON_NUM(b, r, rel_l2_tolerance);
  sb_printf(b, "  \"within_tolerance\": %s,\n",
            r->within_tolerance ? "true" : "false");
  JSON_NUM(b, r, first_call_ms);
  JSON_NUM(b, r, kernel_ms);
  JSON_NUM(b, r, bytes_moved);
  JSON_NUM(b, r, gb_per_s);
  /* Not a GEMM (m == 0): there is no FLOP rate, rather than a rate of 0. */
  sb_printf(b, "  \"tflop_per_s\": ");
  json_number(b, r->m ? r->tflop_per_s : NAN);
  sb_printf(b, ",\n");
  JSON_STR(b, r, source_fingerprint, 0);
  JSON_STR(b, r, code_key, 0);
  JSON_STR(b, r, compiler, 0);
  JSON_STR(b, r, device, 0);
  JSON_STR(b, r, arch, 0);
  JSON_STR(b, r, evidence, 0);
  JSON_STR(b, r, non_claims, 1);
}

char *tj_report_json(const tj_report *r)
{
  if (!r)
    return NULL;
  strbuf b = {0};
  c_numbers cn;
  c_numbers_begin(&cn);
  sb_printf(&b, "{\n");
  json_body(&b, r);
  sb_printf(&b, "}\n");
  c_numbers_end(&cn);
  return sb_finish(&b);
}

/* A table cell or paragraph: '|' would end the cell (and a backslash
 * before it would undo its escape) and a newline the row, so they are
 * escaped and flattened. */
static void md_text(strbuf *b, const char *s, size_t cap)
{
  size_t n = strnlen(s, cap);
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '|' || c == '\\')
      sb_printf(b, "\\%c", c);
    else if (c == '\n' || c == '\r' || c == '\t')
      sb_printf(b, " ");
    else
      sb_printf(b, "%c", c);
  }
}

static void md_number(strbuf *b, const char *name, double v, const char *none)
{
  sb_printf(b, "| %s | ", name);
  if (isfinite(v))
    sb_printf(b, "%.6g", v);
  else
    sb_printf(b, "%s", none ? none : isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf");
  sb_printf(b, " |\n");
}

#define MD_STR(b, r, field)                                                 \
  do {                                                                      \
    sb_printf(b, "| " #field " | ");                                        \
    md_text(b, (r)->field, sizeof (r)->field);                              \
    sb_printf(b, " |\n");                                                   \
  } while (0)

static void md_table(strbuf *b, const tj_report *r)
{
  sb_printf(b, "| field | value |\n|---|---|\n");
  MD_STR(b, r, kernel);
  MD_STR(b, r, ran);
  sb_printf(b, "| n | %llu |\n| m | %d |\n| n_cols | %d |\n| k | %d |\n"
            "| seed | %llu |\n| compared | %llu |\n",
            (unsigned long long)r->n, r->m, r->n_cols, r->k,
            (unsigned long long)r->seed, (unsigned long long)r->compared);
  md_number(b, "max_abs_error", r->max_abs_error, NULL);
  md_number(b, "rel_l2_error", r->rel_l2_error, NULL);
  md_number(b, "max_abs_tolerance", r->max_abs_tolerance,
            isfinite(r->max_abs_tolerance) ? NULL : "none (not limited)");
  md_number(b, "rel_l2_tolerance", r->rel_l2_tolerance,
            isfinite(r->rel_l2_tolerance) ? NULL : "none (not limited)");
  sb_printf(b, "| within_tolerance | %s |\n", r->within_tolerance ? "yes" : "no");
  md_number(b, "first_call_ms", r->first_call_ms, "not measured");
  md_number(b, "kernel_ms", r->kernel_ms, NULL);
  md_number(b, "bytes_moved", r->bytes_moved, NULL);
  md_number(b, "gb_per_s", r->gb_per_s, NULL);
  if (r->m)
    md_number(b, "tflop_per_s", r->tflop_per_s, NULL);
  else /* not a GEMM: no FLOP rate, rather than a rate of 0 */
    sb_printf(b, "| tflop_per_s | n/a |\n");
  MD_STR(b, r, source_fingerprint);
  MD_STR(b, r, code_key);
  MD_STR(b, r, compiler);
  MD_STR(b, r, device);
  MD_STR(b, r, arch);
}

char *tj_report_markdown(const tj_report *r)
{
  if (!r)
    return NULL;
  strbuf b = {0};
  c_numbers cn;
  c_numbers_begin(&cn);
  sb_printf(&b, "## tj_verify: ");
  md_text(&b, r->kernel, sizeof r->kernel);
  sb_printf(&b, ", n = %llu\n\n", (unsigned long long)r->n);
  md_table(&b, r);
  sb_printf(&b, "\n**Evidence** (evidence). ");
  md_text(&b, r->evidence, sizeof r->evidence);
  sb_printf(&b, "\n\n**Non-claims** (non_claims). ");
  md_text(&b, r->non_claims, sizeof r->non_claims);
  sb_printf(&b, "\n");
  c_numbers_end(&cn);
  return sb_finish(&b);
}
