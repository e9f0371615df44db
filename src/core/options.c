/* options.c: a caller's compiler options, split into an argv and checked
 * against the platform's allowlist (tj__option_rules) before the key is
 * computed or the compiler sees them.  A compile runs inside the host
 * program: an option the compiler aborts or exit()s on (-mllvm -help), one
 * that writes or reads files the key cannot see (-save-temps, -include,
 * @file), or one that retargets the code (--offload-arch) is refused. */
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tj__options_split(const char *options, char ***argv, int *argc)
{
  const char *s = options ? options : "";
  size_t len = strlen(s), count = 0;
  for (const char *p = s; *p;) {
    while (isspace((unsigned char)*p))
      p++;
    if (*p)
      count++;
    while (*p && !isspace((unsigned char)*p))
      p++;
  }
  if (count > (size_t)(1 << 20))
    return TJ_ERANGE;
  /* The pointers, then a copy of the string that they point into. */
  char **v = malloc((count + 1) * sizeof *v + len + 1);
  if (!v)
    return TJ_ENOMEM;
  char *copy = (char *)(v + count + 1);
  memcpy(copy, s, len + 1);
  int n = 0;
  for (char *p = copy; *p;) {
    while (isspace((unsigned char)*p))
      *p++ = '\0';
    if (!*p)
      break;
    v[n++] = p;
    while (*p && !isspace((unsigned char)*p))
      p++;
  }
  v[n] = NULL;
  *argv = v;
  *argc = n;
  return TJ_OK;
}

static int in_list(const char *value, const char *list)
{
  size_t n = strlen(value);
  for (const char *p = list; *p;) {
    size_t m = strcspn(p, "|");
    if (m == n && strncmp(p, value, n) == 0)
      return 1;
    p += m;
    if (*p == '|')
      p++;
  }
  return 0;
}

static int all_digits(const char *s, size_t n)
{
  if (n == 0 || n > 9)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!isdigit((unsigned char)s[i]))
      return 0;
  return 1;
}

/* Does value fit the rule?  NULL when it does, else what it should be. */
static const char *value_problem(const tj__option_rule *r, const char *value)
{
  switch (r->value) {
  case TJ__VAL_MACRO: /* '@': a response file, wherever it stands */
    return *value && *value != '-' && *value != '@' ? NULL
           : "a macro (NAME or NAME=value)";
  case TJ__VAL_ABSDIR:
    return *value == '/' ? NULL
           : "an absolute directory (a relative one would depend on the "
             "working directory, which is not in the cache key)";
  case TJ__VAL_NUMBER:
    return all_digits(value, strlen(value)) ? NULL : "a decimal number";
  case TJ__VAL_NUMLIST:
    for (const char *p = value;; p++) {
      size_t n = strcspn(p, ",");
      if (!all_digits(p, n))
        return "decimal numbers separated by commas";
      p += n;
      if (!*p)
        return NULL;
    }
  case TJ__VAL_LIST:
    return in_list(value, r->values) ? NULL : r->values;
  case TJ__VAL_WARNING:
    if (!*value)
      return "a warning name";
    for (const char *p = value; *p; p++)
      if (!isalnum((unsigned char)*p) && !strchr("_+=.-", *p))
        return "a warning name (-Wl, -Wp, and -Wa, pass options on)";
    return NULL;
  }
  return NULL;
}

/* Which rule does argv[*i] match?  Sets *value (NULL for a flag) and
 * advances *i past a separate value.  Exact names first, then the longest
 * prefix, as the compilers' own option parsers do. */
static const tj__option_rule *match(const char *const *argv, int argc, int *i,
                                    const char **value)
{
  size_t n = 0, best = 0;
  const tj__option_rule *rules = tj__option_rules(&n), *found = NULL;
  const char *tok = argv[*i];
  *value = NULL;
  for (size_t k = 0; k < n; k++)
    if (rules[k].form == TJ__OPT_FLAG && strcmp(tok, rules[k].name) == 0)
      return &rules[k];
  for (size_t k = 0; k < n; k++) {
    const tj__option_rule *r = &rules[k];
    size_t len = strlen(r->name);
    if (r->form == TJ__OPT_FLAG || strncmp(tok, r->name, len) != 0 || len <= best)
      continue;
    const char *rest = tok + len;
    int separate = *rest == '\0' && (r->form == TJ__OPT_JOINED_OR_SEP ||
                                     r->form == TJ__OPT_EQ_OR_SEP);
    int eq = (r->form == TJ__OPT_EQ || r->form == TJ__OPT_EQ_OR_SEP) && *rest == '=';
    int joined = (r->form == TJ__OPT_JOINED_OR_SEP || r->form == TJ__OPT_PREFIX) &&
                 *rest != '\0';
    if (!separate && !eq && !joined)
      continue;
    found = r;
    best = len;
    *value = separate ? NULL : eq ? rest + 1 : rest;
  }
  if (found && !*value) { /* the value is the next argument */
    if (*i + 1 >= argc)
      *value = "";
    else
      *value = argv[++*i];
  }
  return found;
}

/* Bytes an option may hold: printable ASCII and UTF-8 (a directory name,
 * which may hold a space: the array form of options keeps it one
 * argument, and the key encodes each argument length-prefixed); no
 * control character (ESC, DEL, ...), which no documented option has. */
static int printable(const char *s)
{
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if (*p < 0x20 || *p == 0x7f)
      return 0;
  return 1;
}

int tj__options_check(const char *const *argv, int argc, char *why,
                      size_t whylen)
{
  for (int i = 0; i < argc; i++) {
    const char *tok = argv[i], *value = NULL;
    if (!printable(tok)) {
      snprintf(why, whylen, "option %d has a control character", i + 1);
      return TJ_EINVAL;
    }
    if (tok[0] != '-' || tok[1] == '\0') {
      snprintf(why, whylen, "'%.64s' is not an option (an input file, a "
               "response file or stdin would reach the compiler)", tok);
      return TJ_EINVAL;
    }
    const tj__option_rule *r = match(argv, argc, &i, &value);
    if (!r) {
      snprintf(why, whylen, "option '%.64s' is not one the library passes to "
               "the %s compiler (see tj_kernel_compile in tokitai-jit.h)", tok,
               TJ__PLATFORM);
      return TJ_EINVAL;
    }
    const char *problem = value ? value_problem(r, value) : NULL;
    if (problem || (value && !printable(value))) {
      snprintf(why, whylen, "option '%.64s' needs %s, got '%.64s'", r->name,
               problem ? problem : "printable characters", value);
      return TJ_EINVAL;
    }
  }
  return TJ_OK;
}
