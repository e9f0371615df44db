/*
 * record.c: a cache row as a self-describing byte string (record.h says
 * the format).  A reader trusts nothing in it but what its own checks
 * show, and a record that fails one is never half-read: the caller gets
 * all of it or nothing.
 */
#include "record.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define FORMAT_VERSION 1u
#define NFIELDS 8

static unsigned char *put_u32(unsigned char *p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    *p++ = (unsigned char)(v >> (8 * i));
  return p;
}

static unsigned char *put_u64(unsigned char *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    *p++ = (unsigned char)(v >> (8 * i));
  return p;
}

static uint64_t get_le(const unsigned char *p, int n)
{
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

unsigned char *tj__record_encode(const char magic[8], const tj__cache_row *row,
                                 size_t *len)
{
  char hash[TJ__KEY_HEX];
  tj__hash_hex(row->code, row->code_size, hash);
  const char *f[NFIELDS] = {row->key, row->kernel, row->arch, row->platform,
                            row->compiler, row->options,
                            row->entries ? row->entries : "", hash};
  size_t n = 8 + 4 + 24 + row->code_size;
  for (int i = 0; i < NFIELDS; i++)
    n += 4 + strlen(f[i]);
  unsigned char *b = malloc(n), *p = b;
  if (!b)
    return NULL;
  memcpy(p, magic, 8);
  p = put_u32(p + 8, FORMAT_VERSION);
  for (int i = 0; i < NFIELDS; i++) {
    size_t l = strlen(f[i]);
    p = put_u32(p, (uint32_t)l);
    memcpy(p, f[i], l);
    p += l;
  }
  uint64_t ms;
  double d = row->compile_ms;
  memcpy(&ms, &d, sizeof ms);
  p = put_u64(p, ms);
  p = put_u64(p, row->code_size);
  memcpy(p, row->code, row->code_size);
  p += row->code_size;
  put_u64(p, XXH3_64bits(b, (size_t)(p - b)));
  *len = n;
  return b;
}

void tj__found_free(tj__found *f)
{
  free(f->code);
  free(f->kernel);
  free(f->entries);
  memset(f, 0, sizeof *f);
}

/* A field of b equal to want (NULL: anything).  0 when it is not, or
 * overruns, or is longer than max. */
static int take_field(const unsigned char **p, const unsigned char *end,
                      const char *want, size_t max, const unsigned char **s,
                      size_t *n)
{
  if (end - *p < 4)
    return 0;
  uint64_t l = get_le(*p, 4);
  if (l > max || (uint64_t)(end - *p - 4) < l)
    return 0;
  *s = *p + 4;
  *n = (size_t)l;
  *p += 4 + l;
  /* No control characters (they would reach a terminal that lists the
   * row), but the TAB and newline that separate a module's entries. */
  for (size_t i = 0; i < *n; i++)
    if (((*s)[i] < 0x20 && (*s)[i] != '\t' && (*s)[i] != '\n') ||
        (*s)[i] == 0x7f)
      return 0;
  return !want || (strlen(want) == *n && memcmp(want, *s, *n) == 0);
}

int tj__record_decode(const char magic[8], const unsigned char *b, size_t len,
                      const tj__cache_row *want, tj__found *f)
{
  const unsigned char *p = b, *end = b + len, *s[NFIELDS];
  size_t n[NFIELDS];
  memset(f, 0, sizeof *f);
  if (len < 20 || memcmp(b, magic, 8) != 0 ||
      get_le(b + 8, 4) != FORMAT_VERSION ||
      get_le(end - 8, 8) != XXH3_64bits(b, len - 8))
    return -1;
  end -= 8;
  p += 12;
  const char *expect[NFIELDS] = {want->key, want->kernel, want->arch,
                                 want->platform, want->compiler, want->options,
                                 NULL, NULL};
  for (int i = 0; i < NFIELDS; i++)
    if (!take_field(&p, end, expect[i],
                    i == 6 ? TJ__RECORD_MAX_ENTRIES : TJ__RECORD_MAX_FIELD,
                    &s[i], &n[i]))
      return -1;
  if (end - p < 16 || n[7] != TJ__KEY_HEX - 1)
    return -1;
  uint64_t bits = get_le(p, 8), size = get_le(p + 8, 8);
  double ms;
  memcpy(&ms, &bits, sizeof ms);
  p += 16;
  if (!isfinite(ms) || ms < 0 || size == 0 || size > TJ_CACHE_MAX_CODE_BYTES ||
      size != (uint64_t)(end - p))
    return -1;
  char hash[TJ__KEY_HEX];
  tj__hash_hex(p, (size_t)size, hash);
  if (memcmp(hash, s[7], TJ__KEY_HEX - 1) != 0)
    return -1;
  f->code = malloc((size_t)size);
  f->kernel = strndup((const char *)s[1], n[1]);
  f->entries = strndup((const char *)s[6], n[6]);
  if (!f->code || !f->kernel || !f->entries) {
    tj__found_free(f);
    return -2;
  }
  memcpy(f->code, p, (size_t)size);
  f->size = (size_t)size;
  f->compile_ms = ms;
  memcpy(f->code_hash, hash, sizeof f->code_hash);
  return 0;
}
