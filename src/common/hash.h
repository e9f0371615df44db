/*
 * hash.h: XXH3-128 as 32 lowercase hex digits, the form of every key and
 * code hash the library stores (hash.c).  The bottom of the library: the
 * key (src/core/key.c) and the store (src/cache) both build on it.
 */
#ifndef TJ_HASH_H
#define TJ_HASH_H

#include <stddef.h>

#define TJ__KEY_HEX 33 /* 32 hex digits and a NUL */

/* The 16 bytes of a digest, in XXH128's canonical order, as hex. */
void tj__hex_digest(const unsigned char digest[16], char out[TJ__KEY_HEX]);
/* XXH3-128 of any bytes, as hex (the code blob's hash). */
void tj__hash_hex(const void *data, size_t len, char out[TJ__KEY_HEX]);

#endif /* TJ_HASH_H */
