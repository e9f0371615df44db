/*
 * cli_format.c: the text the tokitai-jit command reads and writes: sizes
 * and durations on the command line; sizes, times, aligned tables and JSON
 * strings on the way out.
 */
#include "config.h"
#include "cli.h"
#include "json_escape.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ parsing */

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

/* ------------------------------------------------------------ formatting */

void cli_format_size(uint64_t bytes, char *buf, size_t len)
{
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) {
    snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    return;
  }
  double v = (double)bytes / 1024;
  size_t i = 0;
  for (; v >= 1024 && i + 1 < sizeof units / sizeof units[0]; i++)
    v /= 1024;
  snprintf(buf, len, "%.1f %s", v, units[i]);
}

void cli_format_ms(double ms, char *buf, size_t len)
{
  if (ms < 10)
    snprintf(buf, len, "%.1f ms", ms);
  else if (ms < 1000)
    snprintf(buf, len, "%.0f ms", ms);
  else if (ms < 60e3)
    snprintf(buf, len, "%.1f s", ms / 1e3);
  else if (ms < 3600e3)
    snprintf(buf, len, "%.1f min", ms / 60e3);
  else
    snprintf(buf, len, "%.1f h", ms / 3600e3);
}

void cli_format_time(int64_t unix_seconds, char *buf, size_t len)
{
  time_t t = (time_t)unix_seconds;
  struct tm tm;
  if (unix_seconds <= 0 || !localtime_r(&t, &tm) ||
      strftime(buf, len, "%Y-%m-%d %H:%M", &tm) == 0)
    snprintf(buf, len, "-");
}

static void file_put(void *ctx, const char *p, size_t n)
{
  fwrite(p, 1, n, (FILE *)ctx);
}

void cli_json_string(FILE *f, const char *str)
{
  const char *s = str ? str : "";
  tj_json_escape(s, strlen(s), file_put, f);
}

/* A stored string as text a terminal shows as it is: control characters
 * (C0, DEL, C1 in UTF-8 or as a raw byte) and bytes that are not UTF-8
 * become \xNN, so that a cache row cannot move the cursor or retitle the
 * window.  out holds 4 * strlen(s) + 1 bytes. */
static void escape_text(const char *str, char *out)
{
  const unsigned char *s = (const unsigned char *)str;
  for (size_t i = 0; s[i];) {
    size_t n = s[i] >= 0x80 ? tj_json_utf8_len(s + i, strlen(str + i)) : 1;
    int c1 = n == 2 && s[i] == 0xc2 && s[i + 1] < 0xa0;
    if (n == 0 || c1 || s[i] < 0x20 || s[i] == 0x7f) {
      for (size_t j = 0; j < (n ? n : 1); j++)
        out += sprintf(out, "\\x%02x", s[i + j]);
      i += n ? n : 1;
      continue;
    }
    memcpy(out, s + i, n);
    out += n;
    i += n;
  }
  *out = '\0';
}

char *cli_text(const char *s)
{
  const char *str = s ? s : "";
  char *out = malloc(4 * strlen(str) + 1);
  if (out)
    escape_text(str, out);
  return out;
}

const char *cli_text_in(char *buf, size_t len, const char *s)
{
  char *t = cli_text(s);
  snprintf(buf, len, "%s", t ? t : "?");
  free(t);
  return buf;
}

const char *cli_style(const cli_options *o, const char *sgr)
{
  return o->color ? sgr : "";
}

void cli_field(const char *label, const char *fmt, ...)
{
  va_list ap;
  printf("%-20s", label);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  putchar('\n');
}

/* ------------------------------------------------------------ tables */

struct cli_table {
  int ncols;
  const char *align;
  char **cells; /* row-major; the first row is the header */
  size_t nrows, cap;
};

/* Columns a string takes on a terminal: its code points (the cells are
 * names, archs and numbers: no wide or combining characters). */
static size_t columns(const char *s)
{
  size_t n = 0;
  for (; *s; s++)
    n += ((unsigned char)*s & 0xc0) != 0x80;
  return n;
}

/* Bytes of the first `cols` columns of s. */
static size_t prefix_bytes(const char *s, size_t cols)
{
  size_t i = 0, seen = 0;
  for (; s[i]; i++) {
    if (((unsigned char)s[i] & 0xc0) != 0x80 && seen++ == cols)
      break;
  }
  return i;
}

cli_table *cli_table_new(int ncols, const char *const *headers,
                         const char *align)
{
  cli_table *t = calloc(1, sizeof *t);
  if (!t)
    return NULL;
  t->ncols = ncols;
  t->align = align;
  if (cli_table_add(t, headers) != 0) {
    free(t);
    return NULL;
  }
  return t;
}

int cli_table_add(cli_table *t, const char *const *cells)
{
  if (t->nrows == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 16;
    char **grown = realloc(t->cells, cap * (size_t)t->ncols * sizeof *grown);
    if (!grown)
      return -1;
    t->cells = grown;
    t->cap = cap;
  }
  char **row = t->cells + t->nrows * (size_t)t->ncols;
  for (int i = 0; i < t->ncols; i++) {
    if (!(row[i] = cli_text(cells[i]))) {
      while (i-- > 0)
        free(row[i]);
      return -1;
    }
  }
  t->nrows++;
  return 0;
}

/* Widths of each column; on a terminal too narrow, column shrink gives
 * up what it can (down to 8 columns). */
static void column_widths(const cli_table *t, const cli_options *o,
                          int shrink, size_t *w)
{
  size_t total = 0;
  for (int c = 0; c < t->ncols; c++) {
    w[c] = 0;
    for (size_t r = 0; r < t->nrows; r++) {
      size_t n = columns(t->cells[r * (size_t)t->ncols + c]);
      w[c] = n > w[c] ? n : w[c];
    }
    total += w[c] + (c ? 2 : 0);
  }
  if (o->width > 0 && total > (size_t)o->width && shrink >= 0 && w[shrink] > 8) {
    size_t over = total - (size_t)o->width;
    w[shrink] = over < w[shrink] - 8 ? w[shrink] - over : 8;
  }
}

static void print_cell(const char *s, size_t width, char align, int last)
{
  size_t n = columns(s);
  if (n > width) { /* cut, marking the cut with "..." */
    printf("%.*s...", (int)prefix_bytes(s, width - 3), s);
    n = width;
  } else if (align == 'r') {
    printf("%*s%s", (int)(width - n), "", s);
  } else {
    printf("%s", s);
  }
  if (!last && align != 'r' && n < width)
    printf("%*s", (int)(width - n), "");
}

void cli_table_print(const cli_table *t, const cli_options *o, int shrink)
{
  size_t w[32];
  if (t->ncols > 32)
    return;
  column_widths(t, o, shrink, w);
  for (size_t r = 0; r < t->nrows; r++) {
    if (r == 0)
      fputs(cli_style(o, STYLE_BOLD), stdout);
    for (int c = 0; c < t->ncols; c++) {
      if (c)
        fputs("  ", stdout);
      print_cell(t->cells[r * (size_t)t->ncols + c], w[c], t->align[c],
                 c == t->ncols - 1);
    }
    if (r == 0)
      fputs(cli_style(o, STYLE_RESET), stdout);
    putchar('\n');
  }
}

void cli_table_free(cli_table *t)
{
  if (!t)
    return;
  for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
    free(t->cells[i]);
  free(t->cells);
  free(t);
}
