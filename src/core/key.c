/* key.c: the cache key, XXH3-128 over a canonical encoding of every input
 * that can change the generated code. */
#include "internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

/* Bumped when the encoding changes, so that old keys can never collide
 * with new ones.  v3: the compiler field is the runtime's whole build
 * identity (tj__runtime_identity), so the columns of a row give its key. */
static const char key_version[] = "tokitai-jit key v3";

const char *tj__key_encoding(void)
{
  return key_version;
}

typedef void (*emit_fn)(void *ctx, const void *data, size_t len);

/* Each field as an 8-byte little-endian length and its bytes: no field can
 * run into the next, so ("ab", "c") and ("a", "bc") differ. */
static void emit_field(emit_fn emit, void *ctx, const void *data, size_t len)
{
  unsigned char prefix[8];
  for (int i = 0; i < 8; i++)
    prefix[i] = (unsigned char)((uint64_t)len >> (8 * i));
  emit(ctx, prefix, sizeof prefix);
  if (len)
    emit(ctx, data, len);
}

static void emit_string(emit_fn emit, void *ctx, const char *s)
{
  emit_field(emit, ctx, s ? s : "", s ? strlen(s) : 0);
}

static void emit_count(emit_fn emit, void *ctx, int n)
{
  unsigned char v[8];
  for (int i = 0; i < 8; i++)
    v[i] = (unsigned char)((uint64_t)(n < 0 ? 0 : n) >> (8 * i));
  emit(ctx, v, sizeof v);
}

/* A module's fields follow a tag of their own, so that no module key can
 * equal a key made without them. */
static void module_fields(const tj__key_input *in, emit_fn emit, void *ctx)
{
  emit_string(emit, ctx, "module v1");
  emit_count(emit, ctx, in->argc);
  for (int i = 0; i < in->argc; i++)
    emit_string(emit, ctx, in->argv[i]);
  emit_count(emit, ctx, in->nexprs);
  for (int i = 0; i < in->nexprs; i++)
    emit_string(emit, ctx, in->exprs[i]);
  emit_string(emit, ctx, in->headers);
}

static void key_fields(const tj__key_input *in, emit_fn emit, void *ctx)
{
  emit_string(emit, ctx, key_version);
  emit_field(emit, ctx, in->source, in->source_len);
  emit_string(emit, ctx, in->entry);
  emit_string(emit, ctx, in->options);
  emit_string(emit, ctx, in->arch);
  emit_string(emit, ctx, in->platform);
  emit_string(emit, ctx, in->compiler);
  if (in->headers)
    module_fields(in, emit, ctx);
}

static void emit_hash(void *ctx, const void *data, size_t len)
{
  XXH3_128bits_update((XXH3_state_t *)ctx, data, len);
}

static void hex128(XXH128_hash_t h, char out[TJ__KEY_HEX])
{
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  tj__hex_digest(c.digest, out);
}

void tj__key_of_kernel(const char *source, size_t source_len,
                       const char *entry, const char *options, const char *arch,
                       const char *platform, const char *compiler,
                       char out[TJ__KEY_HEX])
{
  tj__key_input in = {.source = source, .source_len = source_len,
                      .entry = entry, .options = options, .arch = arch,
                      .platform = platform, .compiler = compiler};
  tj__key_compute(&in, out);
}

void tj__key_compute(const tj__key_input *in, char out[TJ__KEY_HEX])
{
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_128bits_reset(&state);
  key_fields(in, emit_hash, &state);
  hex128(XXH3_128bits_digest(&state), out);
}

void tj__key_request(const tj__key_input *in, const tj_header *mem, int nmem,
                     char out[TJ__KEY_HEX])
{
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_128bits_reset(&state);
  key_fields(in, emit_hash, &state);
  emit_string(emit_hash, &state, "request: in-memory headers");
  emit_count(emit_hash, &state, nmem);
  for (int i = 0; i < nmem; i++) {
    emit_string(emit_hash, &state, mem[i].name);
    emit_string(emit_hash, &state, mem[i].contents);
  }
  hex128(XXH3_128bits_digest(&state), out);
}

struct encode_buf {
  unsigned char *buf;
  size_t cap, len;
};

static void emit_copy(void *ctx, const void *data, size_t len)
{
  struct encode_buf *b = ctx;
  if (b->len < b->cap)
    memcpy(b->buf + b->len, data, len < b->cap - b->len ? len : b->cap - b->len);
  b->len += len;
}

size_t tj__key_encode(const tj__key_input *in, unsigned char *buf, size_t cap)
{
  struct encode_buf b = {buf, buf ? cap : 0, 0};
  key_fields(in, emit_copy, &b);
  return b.len;
}

char *tj__options_normalise(const char *options)
{
  const char *s = options ? options : "";
  char *out = malloc(strlen(s) + 1), *o = out;
  if (!out)
    return NULL;
  while (*s) {
    while (isspace((unsigned char)*s))
      s++;
    if (!*s)
      break;
    if (o != out)
      *o++ = ' ';
    while (*s && !isspace((unsigned char)*s))
      *o++ = *s++;
  }
  *o = '\0';
  return out;
}
