/* hash.c: XXH3-128 as hex (hash.h). */
#include "hash.h"

#include <xxhash.h>

void tj__hex_digest(const unsigned char digest[16], char out[TJ__KEY_HEX])
{
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < 16; i++) {
    out[2 * i] = digits[digest[i] >> 4];
    out[2 * i + 1] = digits[digest[i] & 15];
  }
  out[32] = '\0';
}

void tj__hash_hex(const void *data, size_t len, char out[TJ__KEY_HEX])
{
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(data, len));
  tj__hex_digest(c.digest, out);
}
