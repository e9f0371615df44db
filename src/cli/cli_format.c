/*
 * cli_format.c: the text the tokitai-jit command writes: messages, sizes,
 * times, aligned tables and JSON strings.
 */
#include "config.h"
#include "cli_format.h"
#include "json_escape.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ messages */

void cli_error(const char *fmt, ...)
{
  va_list ap;
  fflush(stdout); /* keep the order of both streams on one terminal */
  fputs(PROGRAM ": ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
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

void cli_json_member(FILE *f, const char *name, const char *value)
{
  fprintf(f, ", \"%s\": ", name);
  cli_json_string(f, value);
}

void cli_json_string_or_null(FILE *f, const char *value)
{
  if (value)
    cli_json_string(f, value);
  else
    fputs("null", f);
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
