/*
 * json_escape.h: the one JSON string escaper, shared by the library's
 * reports (src/ops/report.c) and the command (src/cli/cli_format.c).  It
 * is a header of static functions, compiled into each, because the command
 * links only the library's public API.
 *
 * Quotes, backslashes and control characters are escaped; well-formed
 * UTF-8 passes through; any byte that does not start a well-formed
 * sequence (overlong forms, surrogates and code points past U+10FFFF
 * included) becomes \ufffd, so the output is valid JSON whatever the input.
 * Never reads past len bytes.
 */
#ifndef TJ_JSON_ESCAPE_H
#define TJ_JSON_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

typedef void (*tj_json_put)(void *ctx, const char *p, size_t n);

/* Length of the well-formed UTF-8 sequence at s (left bytes remain), or 0. */
static inline size_t tj_json_utf8_len(const unsigned char *s, size_t left)
{
  unsigned c = s[0];
  size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c < 0xf0 ? 3
           : c >= 0xc2 && c < 0xe0 ? 2 : 0;
  if (n == 0 || n > left)
    return 0;
  for (size_t i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80)
      return 0;
  if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0) ||
      (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))
    return 0;
  return n;
}

/* str[0 .. len) as a quoted JSON string, written through put. */
static inline void tj_json_escape(const char *str, size_t len, tj_json_put put,
                                  void *ctx)
{
  const unsigned char *s = (const unsigned char *)str;
  put(ctx, "\"", 1);
  for (size_t i = 0; i < len;) {
    unsigned c = s[i];
    size_t n;
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      put(ctx, esc, 2);
    } else if (c == '\n') {
      put(ctx, "\\n", 2);
    } else if (c == '\t') {
      put(ctx, "\\t", 2);
    } else if (c == '\r') {
      put(ctx, "\\r", 2);
    } else if (c < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", c);
      put(ctx, esc, 6);
    } else if (c < 0x80) {
      put(ctx, (const char *)s + i, 1);
    } else if ((n = tj_json_utf8_len(s + i, len - i)) != 0) {
      put(ctx, (const char *)s + i, n);
      i += n;
      continue;
    } else {
      put(ctx, "\\ufffd", 6);
    }
    i++;
  }
  put(ctx, "\"", 1);
}

#endif /* TJ_JSON_ESCAPE_H */
