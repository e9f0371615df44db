/* jsoncheck.h: a strict JSON validator for the report tests (RFC 8259
 * grammar: objects, arrays, strings with their escapes and no raw control
 * characters, numbers, true/false/null), so that a report is checked as a
 * parser would read it, not by counting braces.  Test-only. */
#ifndef TJ_JSONCHECK_H
#define TJ_JSONCHECK_H

#include <ctype.h>
#include <string.h>

typedef struct json_cursor {
  const char *p;
  int depth;
} json_cursor;

static int json_value(json_cursor *c);

static void json_ws(json_cursor *c)
{
  while (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')
    c->p++;
}

static int json_literal(json_cursor *c, const char *word)
{
  size_t n = strlen(word);
  if (strncmp(c->p, word, n) != 0)
    return 0;
  c->p += n;
  return 1;
}

static int json_string_token(json_cursor *c)
{
  if (*c->p++ != '"')
    return 0;
  for (;;) {
    unsigned char ch = (unsigned char)*c->p++;
    if (ch == '"')
      return 1;
    if (ch < 0x20) /* raw control characters (and the NUL) are invalid */
      return 0;
    if (ch != '\\')
      continue;
    ch = (unsigned char)*c->p++;
    if (ch == 'u') {
      for (int i = 0; i < 4; i++)
        if (!isxdigit((unsigned char)*c->p++))
          return 0;
    } else if (!strchr("\"\\/bfnrt", ch) || ch == 0) {
      return 0;
    }
  }
}

static int json_digits(json_cursor *c)
{
  if (!isdigit((unsigned char)*c->p))
    return 0;
  while (isdigit((unsigned char)*c->p))
    c->p++;
  return 1;
}

static int json_number_token(json_cursor *c)
{
  if (*c->p == '-')
    c->p++;
  if (*c->p == '0')
    c->p++;
  else if (!json_digits(c))
    return 0;
  if (*c->p == '.') {
    c->p++;
    if (!json_digits(c))
      return 0;
  }
  if (*c->p == 'e' || *c->p == 'E') {
    c->p++;
    if (*c->p == '+' || *c->p == '-')
      c->p++;
    if (!json_digits(c))
      return 0;
  }
  return 1;
}

/* Members or elements, separated by commas, up to the closing bracket. */
static int json_container(json_cursor *c, char close, int is_object)
{
  if (++c->depth > 64)
    return 0;
  c->p++;
  json_ws(c);
  if (*c->p == close) {
    c->p++;
    c->depth--;
    return 1;
  }
  for (;;) {
    json_ws(c);
    if (is_object) {
      if (!json_string_token(c))
        return 0;
      json_ws(c);
      if (*c->p++ != ':')
        return 0;
    }
    if (!json_value(c))
      return 0;
    json_ws(c);
    if (*c->p == ',') {
      c->p++;
      continue;
    }
    if (*c->p++ != close)
      return 0;
    c->depth--;
    return 1;
  }
}

static int json_value(json_cursor *c)
{
  json_ws(c);
  switch (*c->p) {
  case '{': return json_container(c, '}', 1);
  case '[': return json_container(c, ']', 0);
  case '"': return json_string_token(c);
  case 't': return json_literal(c, "true");
  case 'f': return json_literal(c, "false");
  case 'n': return json_literal(c, "null");
  default: return json_number_token(c);
  }
}

/* 1 when text is exactly one valid JSON object (white space around). */
static inline int json_valid_object(const char *text)
{
  json_cursor c = {text, 0};
  json_ws(&c);
  if (*c.p != '{' || !json_value(&c))
    return 0;
  json_ws(&c);
  return *c.p == '\0';
}

/* The text right after "key": and its white space, or NULL.  Enough for
 * reports, whose keys never appear inside string values quoted this way. */
static inline const char *json_after_key(const char *text, const char *key)
{
  char pat[128];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(text, pat);
  if (!p)
    return NULL;
  p += strlen(pat);
  while (*p == ' ')
    p++;
  return p;
}

#endif
