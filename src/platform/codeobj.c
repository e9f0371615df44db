/*
 * codeobj.c: a kernel's resources read from its code object (codeobj.h).
 *
 * Every offset and length comes from a blob that was checked against its
 * hash, but the reader still trusts none of them: the ELF is read through
 * elfview.h, the notes and records inside it are bounded here, so a
 * malformed code object is "unknown", never a crash.
 */
#include "codeobj.h"
#include "elfview.h"

#include <string.h>

#define NT_AMDGPU_METADATA 32

/* ------------------------------------------------------------ MessagePack */

/* Just enough MessagePack to walk AMD's metadata map: every type can be
 * skipped, strings and integers can be read. */
typedef struct mp_reader {
  const uint8_t *p, *end;
  int depth;
} mp_reader;

#define MP_MAX_DEPTH 16

static int mp_take(mp_reader *r, size_t n, const uint8_t **out)
{
  if ((size_t)(r->end - r->p) < n)
    return -1;
  *out = r->p;
  r->p += n;
  return 0;
}

static int mp_be(mp_reader *r, unsigned bytes, uint64_t *v)
{
  const uint8_t *b;
  if (mp_take(r, bytes, &b))
    return -1;
  *v = 0;
  for (unsigned i = 0; i < bytes; i++)
    *v = *v << 8 | b[i];
  return 0;
}

/* Reads one header: its kind ('i' int, 's' str, 'm' map, 'a' array, 'b'
 * bytes to skip, 'o' other scalar) and its value or length. */
static int mp_head(mp_reader *r, char *kind, int64_t *v)
{
  const uint8_t *b;
  uint64_t u;
  if (mp_take(r, 1, &b))
    return -1;
  uint8_t t = *b;
  static const unsigned width[4] = {1, 2, 4, 8};
  if (t <= 0x7f || t >= 0xe0) {
    *kind = 'i', *v = (int8_t)t;
    return 0;
  }
  if (t <= 0x8f || (t >= 0x90 && t <= 0x9f) || (t >= 0xa0 && t <= 0xbf)) {
    *kind = t <= 0x8f ? 'm' : t <= 0x9f ? 'a' : 's';
    *v = t & (t <= 0x9f ? 0x0f : 0x1f);
    return 0;
  }
  switch (t) {
  case 0xc0: case 0xc2: case 0xc3:
    *kind = 'o', *v = 0;
    return 0;
  case 0xc4: case 0xc5: case 0xc6: /* bin */
  case 0xd9: case 0xda: case 0xdb: /* str */
    if (mp_be(r, width[t >= 0xd9 ? t - 0xd9 : t - 0xc4], &u) || u > (uint64_t)(r->end - r->p))
      return -1;
    *kind = t >= 0xd9 ? 's' : 'b', *v = (int64_t)u;
    return 0;
  case 0xc7: case 0xc8: case 0xc9: /* ext: length, then a type byte */
    if (mp_be(r, width[t - 0xc7], &u) || u + 1 > (uint64_t)(r->end - r->p))
      return -1;
    *kind = 'b', *v = (int64_t)u + 1;
    return 0;
  case 0xca: case 0xcb:
    *kind = 'b', *v = t == 0xca ? 4 : 8;
    return 0;
  case 0xcc: case 0xcd: case 0xce: case 0xcf:
    if (mp_be(r, width[t - 0xcc], &u) || u > INT64_MAX)
      return -1;
    *kind = 'i', *v = (int64_t)u;
    return 0;
  case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
    unsigned w = width[t - 0xd0];
    if (mp_be(r, w, &u))
      return -1;
    if (w < 8 && (u >> (8 * w - 1)) & 1) /* sign-extend */
      u |= ~(uint64_t)0 << (8 * w);
    *kind = 'i', *v = (int64_t)u;
    return 0;
  }
  case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: /* fixext */
    *kind = 'b', *v = 1 + (1 << (t - 0xd4));
    return 0;
  case 0xdc: case 0xdd: case 0xde: case 0xdf:
    if (mp_be(r, t & 1 ? 4 : 2, &u))
      return -1;
    *kind = t <= 0xdd ? 'a' : 'm', *v = (int64_t)u;
    return 0;
  default: /* 0xc1 is never used */
    return -1;
  }
}

static int mp_skip(mp_reader *r)
{
  char kind;
  int64_t v;
  const uint8_t *b;
  if (mp_head(r, &kind, &v))
    return -1;
  switch (kind) {
  case 's': case 'b':
    return mp_take(r, (size_t)v, &b);
  case 'a': case 'm': {
    if (++r->depth > MP_MAX_DEPTH)
      return -1;
    /* Each element is at least one byte: a count beyond the bytes left is
     * a lie, refused before it is walked. */
    int64_t items = kind == 'm' ? 2 * v : v;
    if (items > r->end - r->p)
      return -1;
    for (int64_t i = 0; i < items; i++)
      if (mp_skip(r))
        return -1;
    r->depth--;
    return 0;
  }
  default:
    return 0;
  }
}

/* A string into (s, n), or -1 with the reader where it was. */
static int mp_str(mp_reader *r, const char **s, size_t *n)
{
  mp_reader save = *r;
  char kind;
  int64_t v;
  const uint8_t *b;
  if (mp_head(r, &kind, &v) || kind != 's' || mp_take(r, (size_t)v, &b)) {
    *r = save;
    return -1;
  }
  *s = (const char *)b, *n = (size_t)v;
  return 0;
}

static int mp_container(mp_reader *r, char want, int64_t *n)
{
  char kind;
  return mp_head(r, &kind, n) || kind != want || *n > r->end - r->p ? -1 : 0;
}

static int str_is(const char *s, size_t n, const char *want)
{
  return strlen(want) == n && memcmp(s, want, n) == 0;
}

/* ------------------------------------------------------------ AMD */

typedef struct amd_kernel {
  const char *symbol; /* wanted: "<symbol>.kd" or the .name */
  int match;
  tj__resources r;
} amd_kernel;

static void amd_field(amd_kernel *k, const char *key, size_t kn, int64_t v)
{
  static const struct { const char *name; size_t off; int wide; } fields[] = {
    {".vgpr_count", offsetof(tj__resources, regs), 0},
    {".sgpr_count", offsetof(tj__resources, sgprs), 0},
    {".agpr_count", offsetof(tj__resources, agprs), 0},
    {".group_segment_fixed_size", offsetof(tj__resources, shared_bytes), 1},
    {".private_segment_fixed_size", offsetof(tj__resources, local_bytes), 1},
    {".max_flat_workgroup_size", offsetof(tj__resources, max_threads), 0},
    {".wavefront_size", offsetof(tj__resources, wave_size), 0},
  };
  if (v < 0 || v > INT32_MAX)
    return;
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (str_is(key, kn, fields[i].name)) {
      char *at = (char *)&k->r + fields[i].off;
      if (fields[i].wide)
        *(int64_t *)at = v;
      else
        *(int32_t *)at = (int32_t)v;
      return;
    }
  if (str_is(key, kn, ".vgpr_spill_count") || str_is(key, kn, ".sgpr_spill_count")) {
    int64_t sum = (k->r.spills < 0 ? 0 : (int64_t)k->r.spills) + v;
    k->r.spills = sum > INT32_MAX ? INT32_MAX : (int32_t)sum;
  }
}

/* One kernel's map: its numbers, and whether it is the one asked for. */
static int amd_kernel_map(mp_reader *r, amd_kernel *k)
{
  int64_t n;
  if (mp_container(r, 'm', &n))
    return -1;
  size_t want = strlen(k->symbol);
  for (int64_t i = 0; i < n; i++) {
    const char *key, *s;
    size_t kn, sn;
    if (mp_str(r, &key, &kn))
      return -1;
    if ((str_is(key, kn, ".symbol") || str_is(key, kn, ".name")) && !mp_str(r, &s, &sn)) {
      int kd = str_is(key, kn, ".symbol");
      if (sn == want + (kd ? 3 : 0) && memcmp(s, k->symbol, want) == 0 &&
          (!kd || memcmp(s + want, ".kd", 3) == 0))
        k->match = 1;
      continue;
    }
    mp_reader at = *r;
    char kind;
    int64_t v;
    if (!mp_head(&at, &kind, &v) && kind == 'i') {
      amd_field(k, key, kn, v);
      *r = at;
    } else if (mp_skip(r)) {
      return -1;
    }
  }
  return 0;
}

static int amd_metadata(const uint8_t *desc, size_t n, const char *symbol,
                        tj__resources *out)
{
  mp_reader r = {desc, desc + n, 0};
  int64_t keys, kernels;
  if (mp_container(&r, 'm', &keys))
    return -1;
  for (int64_t i = 0; i < keys; i++) {
    const char *key;
    size_t kn;
    if (mp_str(&r, &key, &kn))
      return -1;
    if (!str_is(key, kn, "amdhsa.kernels")) {
      if (mp_skip(&r))
        return -1;
      continue;
    }
    if (mp_container(&r, 'a', &kernels))
      return -1;
    for (int64_t j = 0; j < kernels; j++) {
      amd_kernel k = {symbol, 0, *out};
      if (amd_kernel_map(&r, &k))
        return -1;
      if (k.match) {
        *out = k.r;
        return 0;
      }
    }
    return -1;
  }
  return -1;
}

/* Note sections may overlap, so walking each of them could read the same
 * bytes once a section: the walk reads at most the object's size in all. */
static int amd_resources(const tj__elf *e, const char *symbol, tj__resources *out)
{
  size_t budget = e->len;
  for (unsigned i = 0; i < e->eh->e_shnum; i++) {
    size_t n = 0;
    const uint8_t *p = e->sh[i].sh_type == SHT_NOTE ? tj__elf_section(e, i, &n) : NULL;
    if (p && n > budget)
      return -1;
    budget -= p ? n : 0;
    const uint8_t *end = p ? p + n : NULL;
    tj__elf_note note;
    while (tj__elf_note_next(&p, end, &note))
      if (note.type == NT_AMDGPU_METADATA && note.namesz == 7 &&
          memcmp(note.name, "AMDGPU", 7) == 0)
        return amd_metadata(note.desc, note.descsz, symbol, out);
  }
  return -1;
}

/* ------------------------------------------------------------ NVIDIA */

/* .nv.info attribute records: a format byte, an attribute byte, then a
 * 16-bit value (formats 1 to 3) or a 16-bit length and that many bytes
 * (format 4).  The attribute numbers are the cubin's own (EIATTR_*). */
enum {
  NV_FMT_SVAL = 4,
  NV_MAX_THREADS = 0x05,
  NV_REQNTID = 0x10,
  NV_FRAME_SIZE = 0x11,
  NV_REGCOUNT = 0x2f,
  NV_RESERVED_SHARED = 1024,
  NV_MAX_REGS = 255,        /* a thread's registers, sm_50 and later */
  NV_MAX_BLOCK = 1024,      /* threads in a block, and in each dimension */
};

typedef struct nv_record {
  int attr;
  const uint8_t *data;
  size_t size;
} nv_record;

/* The next record at *p, or -1 at the end or on a malformed one. */
static int nv_next(const uint8_t **p, const uint8_t *end, nv_record *rec)
{
  if (end - *p < 4)
    return -1;
  const uint8_t *b = *p;
  rec->attr = b[1];
  uint16_t v = (uint16_t)(b[2] | b[3] << 8);
  if (b[0] == NV_FMT_SVAL) {
    if ((size_t)(end - b) < 4u + v)
      return -1;
    rec->data = b + 4, rec->size = v;
    *p = b + 4 + v;
  } else {
    rec->data = b + 2, rec->size = 2;
    *p = b + 4;
  }
  return 0;
}

static uint32_t le32(const uint8_t *b)
{
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
         (uint32_t)b[3] << 24;
}

/* The records of section prefix+rest, from the start to *end; NULL when
 * there is no such section. */
static const uint8_t *nv_info(const tj__elf *e, const char *prefix,
                              const char *rest, const uint8_t **end)
{
  int i = tj__elf_section_named(e, prefix, rest);
  size_t n = 0;
  const uint8_t *p = i < 0 ? NULL : tj__elf_section(e, (unsigned)i, &n);
  *end = p ? p + n : NULL;
  return p;
}

/* Registers and frame size: records of the whole cubin, each naming its
 * function by symbol index. */
static int nv_global_info(const tj__elf *e, int64_t sym, tj__resources *out)
{
  int found = 0;
  const uint8_t *end, *p = nv_info(e, ".nv.info", "", &end);
  nv_record rec;
  while (p && nv_next(&p, end, &rec) == 0) {
    if (rec.size != 8 || le32(rec.data) != (uint64_t)sym)
      continue;
    uint32_t v = le32(rec.data + 4);
    if (rec.attr == NV_REGCOUNT && v <= NV_MAX_REGS)
      out->regs = (int32_t)v, found = 1;
    else if (rec.attr == NV_FRAME_SIZE)
      out->local_bytes = v;
  }
  return found ? 0 : -1;
}

/* Launch bounds, from the function's own .nv.info.<symbol>. */
static void nv_function_info(const tj__elf *e, const char *symbol, tj__resources *out)
{
  const uint8_t *end, *p = nv_info(e, ".nv.info.", symbol, &end);
  nv_record rec;
  while (p && nv_next(&p, end, &rec) == 0) {
    if ((rec.attr == NV_MAX_THREADS || rec.attr == NV_REQNTID) && rec.size == 12) {
      uint32_t x = le32(rec.data), y = le32(rec.data + 4), z = le32(rec.data + 8);
      if (x > NV_MAX_BLOCK || y > NV_MAX_BLOCK || z > NV_MAX_BLOCK)
        continue; /* no block is that large; the product could wrap */
      uint64_t t = (uint64_t)x * y * z;
      if (t > 0 && t <= NV_MAX_BLOCK &&
          (out->max_threads < 0 || (int32_t)t < out->max_threads))
        out->max_threads = (int32_t)t;
    }
  }
}

/* Without launch bounds the registers decide: a warp's registers are given
 * in units of 256, 64 Ki registers per block at most (sm_50 and later). */
static int32_t nv_threads_for_regs(int32_t regs)
{
  if (regs <= 0 || regs > NV_MAX_REGS)
    return NV_MAX_BLOCK;
  int32_t per_warp = (regs * 32 + 255) / 256 * 256;
  int32_t warps = 65536 / per_warp;
  return warps >= 32 ? 1024 : warps * 32;
}

static int nv_resources(const tj__elf *e, const char *symbol, tj__resources *out)
{
  tj__elf_symbols t;
  int64_t sym = tj__elf_symbols_open(e, &t) == 0
                    ? tj__elf_symbol_find(&t, symbol, STT_FUNC, NULL) : -1;
  if (sym < 0 || nv_global_info(e, sym, out))
    return -1;
  if (out->local_bytes < 0)
    out->local_bytes = 0;
  /* On sm_80 and later a kernel's shared section begins with the 1 KiB
   * per block the system reserves (the cubin then has .nv.shared.reserved.0
   * too).  The driver does not count it as the kernel's (a section of
   * 50176 bytes is 49152 to the driver), and neither do we. */
  int s = tj__elf_section_named(e, ".nv.shared.", symbol);
  if (s >= 0 && e->sh[s].sh_size > TJ__MAX_SHARED_BYTES)
    return -1; /* a section of no bytes in the blob may claim any size */
  out->shared_bytes = s < 0 ? 0 : (int64_t)e->sh[s].sh_size;
  if (out->shared_bytes >= NV_RESERVED_SHARED &&
      tj__elf_section_named(e, ".nv.shared.reserved.", "0") >= 0)
    out->shared_bytes -= NV_RESERVED_SHARED;
  nv_function_info(e, symbol, out);
  int32_t by_regs = nv_threads_for_regs(out->regs);
  if (out->max_threads < 0 || by_regs < out->max_threads)
    out->max_threads = by_regs;
  out->wave_size = 32;
  return 0;
}

/* A figure past what any GPU has is not believed: it reads as unknown, so
 * that nothing computed from the figures can overflow. */
static void bound_figures(tj__resources *r)
{
  if (r->regs > TJ__MAX_REGS)
    r->regs = -1;
  if (r->sgprs > TJ__MAX_REGS)
    r->sgprs = -1;
  if (r->agprs > TJ__MAX_REGS)
    r->agprs = -1;
  if (r->shared_bytes > TJ__MAX_SHARED_BYTES)
    r->shared_bytes = -1;
  if (r->local_bytes > TJ__MAX_LOCAL_BYTES)
    r->local_bytes = -1;
  if (r->max_threads == 0 || r->max_threads > TJ__MAX_THREADS)
    r->max_threads = -1;
  if (r->wave_size != -1 && r->wave_size != 32 && r->wave_size != 64)
    r->wave_size = -1;
}

int tj__code_resources(const void *code, size_t len, const char *symbol,
                       tj__resources *out)
{
  static const tj__resources unknown = {-1, -1, -1, -1, -1, -1, -1, -1};
  *out = unknown;
  tj__elf e;
  if (!symbol || !*symbol || tj__elf_open(&e, code, len))
    return -1;
  tj__resources r = unknown;
  int rc = e.eh->e_machine == EM_AMDGPU ? amd_resources(&e, symbol, &r)
         : e.eh->e_machine == EM_CUDA   ? nv_resources(&e, symbol, &r)
                                        : -1;
  if (rc == 0) {
    bound_figures(&r);
    *out = r;
  }
  return rc;
}
