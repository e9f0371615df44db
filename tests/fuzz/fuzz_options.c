/*
 * fuzz_options.c: libFuzzer harness for a caller's compiler options
 * (src/core/options.c and the platform's allowlist).
 *
 * The input, up to its first NUL, is an option string.  Checked on every
 * input: the split gives exactly the words tj__options_normalise keeps, in
 * order, NULL-terminated; and an accepted string holds no word that a
 * compiler could exit() on, that would write or read a file the key cannot
 * see, or retarget the code, whether as an option or hidden as the value
 * of the option before it (values never start with '-' or '@').
 * -isystem, -iquote and -idirafter with an absolute directory are
 * accepted on AMD: every header they reach is hashed into the key
 * (src/core/headers.c), as with -I.
 */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const never_exact[] = {
  "-mllvm", "-Xclang", "-o", "-v", "-###", "-help", "--help", "--version",
  "-save-temps", "-include", "-E", "-S", "-c", "-x", "-",
  "--", "-arch", "-Xptxas", "-working-directory", NULL,
};
static const char *const never_prefix[] = {
  "@", "-Wl,", "-Wp,", "-Wa,", "--offload-arch", "-march", "-mcpu",
  "--gpu-architecture", "-fplugin", "-fpass-plugin", "--time", "-save-temps",
  "-mllvm", "-o/", "--pre-include", "--create-pch", "-arch=", "-M", NULL,
};

static void check_accepted(char *const *argv, int argc)
{
  for (int i = 0; i < argc; i++) {
    const char *w = argv[i];
    for (const char *const *p = never_exact; *p; p++)
      if (strcmp(w, *p) == 0)
        abort();
    for (const char *const *p = never_prefix; *p; p++)
      if (strncmp(w, *p, strlen(*p)) == 0)
        abort();
    for (const unsigned char *c = (const unsigned char *)w; *c; c++)
      if (*c < 0x21 || *c == 0x7f)
        abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *s = malloc(size + 1);
  if (!s)
    return 0;
  memcpy(s, data, size);
  s[size] = '\0';
  char **argv = NULL, *norm = tj__options_normalise(s);
  int argc = -1;
  if (!norm || tj__options_split(s, &argv, &argc) != TJ_OK)
    abort();
  size_t at = 0;
  for (int i = 0; i < argc; i++) {
    size_t n = strlen(argv[i]);
    if (n == 0 || strncmp(norm + at, argv[i], n) != 0)
      abort();
    at += n;
    if (norm[at] == ' ')
      at++;
  }
  if (norm[at] != '\0' || argv[argc] != NULL)
    abort();
  char why[512];
  if (tj__options_check((const char *const *)argv, argc, why, sizeof why) == TJ_OK)
    check_accepted(argv, argc);
  else if (!why[0])
    abort();
  free(argv);
  free(norm);
  free(s);
  return 0;
}
