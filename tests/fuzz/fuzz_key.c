/*
 * fuzz_key.c: libFuzzer harness for the cache key (src/core/key.c).
 *
 * The input is split at NUL bytes into source, entry, options, arch,
 * platform and compiler (a missing field is NULL).  Checked on every input: the encoding's length does not depend on
 * the buffer, a short buffer is never overrun, the encoding decodes back
 * to exactly the fields, the key is XXH3-128 of the encoding as 32
 * lowercase hex digits, one changed byte changes the key, and option
 * normalising is idempotent and leaves single spaces between the same
 * words.
 */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#define FIELDS 6

static uint64_t le64(const unsigned char *p)
{
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* Walk the encoding: the version tag, then each field, nothing after. */
static void check_decodes(const unsigned char *buf, size_t len,
                          const char *const *field, const size_t *flen)
{
  static const char tag[] = "tokitai-jit key v3";
  size_t at = 0;
  if (len < 8 || le64(buf) != sizeof tag - 1 || memcmp(buf + 8, tag, sizeof tag - 1))
    abort();
  at = 8 + sizeof tag - 1;
  for (int f = 0; f < FIELDS; f++) {
    if (len - at < 8)
      abort();
    uint64_t n = le64(buf + at);
    at += 8;
    if (n != flen[f] || len - at < n || (n && memcmp(buf + at, field[f], n)))
      abort();
    at += n;
  }
  if (at != len)
    abort();
}

static void check_hex_key(const char *key)
{
  if (strlen(key) != 32)
    abort();
  for (int i = 0; i < 32; i++)
    if (!strchr("0123456789abcdef", key[i]))
      abort();
}

static void check_options(const char *raw)
{
  char *once = tj__options_normalise(raw);
  char *twice = once ? tj__options_normalise(once) : NULL;
  if (!once || !twice || strcmp(once, twice) != 0)
    abort();
  size_t n = strlen(once);
  if (n && (once[0] == ' ' || once[n - 1] == ' ' || strstr(once, "  ")))
    abort();
  for (size_t i = 0; i < n; i++)
    if (once[i] != ' ' && strchr(" \t\n\v\f\r", once[i]))
      abort();
  free(once);
  free(twice);
}

static void split(char *s, size_t size, const char **field, size_t *flen)
{
  size_t at = 0;
  for (int f = 0; f < FIELDS; f++) {
    if (at > size) {
      field[f] = NULL;
      flen[f] = 0;
      continue;
    }
    field[f] = s + at;
    flen[f] = strlen(s + at);
    at += flen[f] + 1;
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
  const char *field[FIELDS];
  size_t flen[FIELDS];
  split(s, size, field, flen);
  tj__key_input in = {field[0], flen[0], field[1], field[2], field[3],
                      field[4], field[5]};

  size_t len = tj__key_encode(&in, NULL, 0);
  unsigned char *buf = malloc(len + 16);
  if (!buf || tj__key_encode(&in, buf, len) != len)
    abort();
  check_decodes(buf, len, field, flen);

  /* A buffer cut short anywhere: same length back, nothing past cap. */
  size_t cap = size ? data[0] * len / 255 : 0;
  memset(buf, 0xa5, len + 16);
  if (tj__key_encode(&in, buf, cap) != len)
    abort();
  for (size_t i = cap; i < len + 16; i++)
    if (buf[i] != 0xa5)
      abort();

  char key[TJ__KEY_HEX], want[TJ__KEY_HEX], other[TJ__KEY_HEX];
  tj__key_encode(&in, buf, len);
  tj__key_compute(&in, key);
  tj__hash_hex(buf, len, want);
  check_hex_key(key);
  if (strcmp(key, want) != 0)
    abort();
  if (flen[0]) { /* one byte of the source changed: another key */
    s[size ? data[size - 1] % flen[0] : 0] ^= 1;
    tj__key_compute(&in, other);
    if (strcmp(key, other) == 0)
      abort();
  }
  check_options(field[2]);
  free(buf);
  free(s);
  return 0;
}
