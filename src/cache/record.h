/*
 * record.h: one cache row as a self-describing byte string (record.c),
 * the form a row takes outside SQLite: a value in the remote tier and a
 * file in the per-user cache's code directory (codestore.c).
 *
 *   magic               8 bytes, the caller's ("TJREMOTE", "TJCODE01")
 *   version             u32, 1
 *   key, kernel, arch, platform, compiler, options, entries, code_hash
 *                       each a u32 length and its bytes
 *   compile_ms          the IEEE double's 8 bytes
 *   code_size           u64, then exactly that many bytes of code
 *   check               u64, XXH3-64 of every byte before it
 *
 * All integers little-endian.  The check catches a record damaged
 * anywhere (the code's own hash covers only the code); neither is a
 * signature: who may write the place a record comes from decides whether
 * it can be trusted, and the caller judges that.
 */
#ifndef TJ_RECORD_H
#define TJ_RECORD_H

#include "cache_api.h"

/* The largest record that can pass tj__record_decode. */
#define TJ__RECORD_MAX_FIELD (64u << 10)  /* a key, arch, compiler, options */
#define TJ__RECORD_MAX_ENTRIES (4u << 20) /* a module's entries lines */
#define TJ__RECORD_MAX_BYTES                                            \
  (8 + 4 + 4ull * 8 + 7ull * TJ__RECORD_MAX_FIELD +                     \
   TJ__RECORD_MAX_ENTRIES + 24 + TJ_CACHE_MAX_CODE_BYTES)

/* row as a record under magic (8 bytes): malloc'd, its length in *len;
 * NULL when out of memory. */
unsigned char *tj__record_encode(const char magic[8], const tj__cache_row *row,
                                 size_t *len);
/*
 * The whole check of a record: magic and format version, the key echoed,
 * every field equal to want's (want->kernel NULL: any kernel), the code
 * within TJ_CACHE_MAX_CODE_BYTES and matching its XXH3-128, the check
 * over every byte, nothing after it.  0: it is want's, and f is filled
 * (code_hash too; free it with tj__found_free); -1: it fails a check;
 * -2: out of memory.
 */
int tj__record_decode(const char magic[8], const unsigned char *b, size_t len,
                      const tj__cache_row *want, tj__found *f);

#endif /* TJ_RECORD_H */
