/*
 * hip_platform.c: the platform services of hip_platform.h that both
 * platforms share: the compiler fingerprint's library digest, the
 * compilers' environment, the supplied headers and the arch list.  The
 * rest is in amd.c or nvidia.c, the one the build chose; what they and
 * this file share is in platform_internal.h.
 */
#include "hip_platform.h"
#include "platform_internal.h"
#include "elfview.h"
#include "tokitai-jit.h"

#include <ctype.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

/* An arch name is short and made of [A-Za-z0-9_:+-]; anything else is a
 * malformed name, rejected before it reaches a compiler. */
int tj__arch_name_wellformed(const char *arch, char *why, size_t whylen)
{
  size_t n = arch ? strlen(arch) : 0;
  if (n == 0 || n > 64) {
    snprintf(why, whylen, "arch name must be 1 to 64 characters, got %zu", n);
    return TJ_EINVAL;
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)arch[i];
    if (!isalnum(c) && !strchr("_:+-", c)) {
      snprintf(why, whylen, "arch name '%s' has a character that no arch has",
               arch);
      return TJ_EINVAL;
    }
  }
  return TJ_OK;
}


/* ------------------------------------------- compiler library identity */

/*
 * The version numbers the compilers report do not change with a point
 * release (Debian rebuilds, a new libLLVM under the same comgr), so the
 * fingerprint also names the libraries themselves: for each loaded object
 * whose file name starts with one of the platform's prefixes, its GNU
 * build id, else the size and mtime of its file.  Sorted by name, hashed,
 * computed once per process: the libraries cannot change under a running
 * process.
 */

const char *tj__base_name(const char *path)
{
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* The GNU build id among the notes in [p, end), as hex. */
int tj__note_build_id(const unsigned char *p, const unsigned char *end,
                      char *out, size_t outlen)
{
  tj__elf_note n;
  while (tj__elf_note_next(&p, end, &n))
    if (n.type == NT_GNU_BUILD_ID && n.namesz == 4 &&
        memcmp(n.name, "GNU", 4) == 0 && n.descsz > 0 && 2 * n.descsz < outlen) {
      for (size_t j = 0; j < n.descsz; j++)
        snprintf(out + 2 * j, 3, "%02x", n.desc[j]);
      return 1;
    }
  return 0;
}

/* The GNU build id of a loaded object, as hex, from its PT_NOTE segments. */
int tj__build_id(const struct dl_phdr_info *info, char *out, size_t outlen)
{
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
    if (ph->p_type == PT_NOTE && tj__note_build_id(p, p + ph->p_memsz, out, outlen))
      return 1;
  }
  return 0;
}

void tj__file_identity(const char *path, char *out, size_t outlen)
{
  struct stat st;
  if (stat(path, &st) == 0)
    snprintf(out, outlen, "size %lld mtime %lld.%09ld", (long long)st.st_size,
             (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
  else
    snprintf(out, outlen, "unknown");
}

static int scan_library(struct dl_phdr_info *info, size_t size, void *ctx)
{
  (void)size;
  tj__lib_scan *scan = ctx;
  const char *name = info->dlpi_name ? tj__base_name(info->dlpi_name) : "";
  int match = 0;
  for (const char *const *p = scan->prefixes; *p && !match; p++)
    match = strncmp(name, *p, strlen(*p)) == 0;
  if (!match || scan->n >= TJ__LIBS_MAX)
    return 0;
  tj__lib_identity *lib = &scan->libs[scan->n++];
  snprintf(lib->name, sizeof lib->name, "%s", name);
  if (!tj__build_id(info, lib->id, sizeof lib->id))
    tj__file_identity(info->dlpi_name, lib->id, sizeof lib->id);
  return 0;
}

static int by_name(const void *a, const void *b)
{
  return strcmp(((const tj__lib_identity *)a)->name,
                ((const tj__lib_identity *)b)->name);
}

static char libs_digest[24];
static pthread_once_t libs_once = PTHREAD_ONCE_INIT;

static void compute_libs_digest(void)
{
  tj__lib_scan scan = {tj__platform_library_prefixes(), {{{0}, {0}}}, 0};
  dl_iterate_phdr(scan_library, &scan);
  tj__platform_lazy_identities(&scan);
  qsort(scan.libs, (size_t)scan.n, sizeof scan.libs[0], by_name);
  XXH64_hash_t h = XXH3_64bits(scan.libs, (size_t)scan.n * sizeof scan.libs[0]);
  snprintf(libs_digest, sizeof libs_digest, "b:%016llx", (unsigned long long)h);
}

/* "b:" and 16 hex digits; process-wide, computed once. */
const char *tj__compiler_libraries_digest(void)
{
  pthread_once(&libs_once, compute_libs_digest);
  return libs_digest;
}

/* ------------------------------------------- the compilers' environment */

int tj__compiler_environment(char *buf, size_t len, char *why, size_t whylen)
{
  size_t n = 0, used = 0;
  const tj__env_rule *rules = tj__platform_env_rules(&n);
  buf[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    const char *v = getenv(rules[i].name);
    if (!v || !*v)
      continue;
    if (rules[i].refuse) {
      snprintf(why, whylen, "%s is set: %s; unset it to compile", rules[i].name,
               rules[i].why);
      return TJ_EINVAL;
    }
    /* The value's length first: a value holding "\nNAME=" cannot pass
     * for a second variable. */
    int w = snprintf(buf + used, len - used, "%s=%zu:%s\n", rules[i].name,
                     strlen(v), v);
    if (w < 0 || (size_t)w >= len - used) {
      snprintf(why, whylen, "%s is too long (over %zu bytes in all)",
               rules[i].name, len);
      return TJ_EINVAL;
    }
    used += (size_t)w;
  }
  return TJ_OK;
}

/* ------------------------------------------------ supplied headers */

void tj__platform_headers(int *count, const char *const **names,
                          const char *const **contents)
{
  *count = tj__platform_header_count;
  *names = tj__platform_header_names;
  *contents = tj__platform_header_contents;
}

/* Once per process, like the tables it is computed from. */
static char headers_digest[33];
static pthread_once_t headers_digest_once = PTHREAD_ONCE_INIT;

/* A length-prefixed field, so that no name can run into its contents. */
static void digest_field(XXH3_state_t *state, const char *s)
{
  uint64_t len = strlen(s);
  unsigned char prefix[8];
  for (int i = 0; i < 8; i++)
    prefix[i] = (unsigned char)(len >> (8 * i));
  XXH3_128bits_update(state, prefix, sizeof prefix);
  XXH3_128bits_update(state, s, (size_t)len);
}

static void compute_headers_digest(void)
{
  static const char digits[] = "0123456789abcdef";
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_128bits_reset(&state);
  digest_field(&state, "tokitai-jit platform headers v1");
  for (int i = 0; i < tj__platform_header_count; i++) {
    digest_field(&state, tj__platform_header_names[i]);
    digest_field(&state, tj__platform_header_contents[i]);
  }
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&state));
  for (size_t i = 0; i < sizeof c.digest; i++) {
    headers_digest[2 * i] = digits[c.digest[i] >> 4];
    headers_digest[2 * i + 1] = digits[c.digest[i] & 15];
  }
  headers_digest[32] = '\0';
}

const char *tj__platform_headers_digest(void)
{
  pthread_once(&headers_digest_once, compute_headers_digest);
  return headers_digest;
}

/* ------------------------------------------- the archs the compiler knows */

/* Filled once by the platform's tj__platform_list_archs through
 * tj__add_arch: the processor names without feature flags, each once. */
#define TJ__ARCHS_MAX 256
static char arch_store[TJ__ARCHS_MAX][32];
static const char *arch_names[TJ__ARCHS_MAX];
static size_t arch_count;
static pthread_once_t archs_once = PTHREAD_ONCE_INIT;

void tj__add_arch(const char *name, size_t len)
{
  if (len == 0 || len >= sizeof arch_store[0] || arch_count == TJ__ARCHS_MAX)
    return;
  for (size_t i = 0; i < arch_count; i++)
    if (strlen(arch_names[i]) == len && strncmp(arch_names[i], name, len) == 0)
      return;
  memcpy(arch_store[arch_count], name, len);
  arch_store[arch_count][len] = '\0';
  arch_names[arch_count] = arch_store[arch_count];
  arch_count++;
}

size_t tj__compiler_archs(const char *const **names)
{
  pthread_once(&archs_once, tj__platform_list_archs);
  *names = arch_names;
  return arch_count;
}

/* The loaded libraries cannot change under a process, so their
 * fingerprint is read once, not at every runtime open, where asking the
 * compiler libraries their versions would be most of the open's work
 * (tj-bench's warm start under callgrind shows it). */
static pthread_once_t fingerprint_once = PTHREAD_ONCE_INIT;
static char fingerprint[160];

static void read_fingerprint(void)
{
  tj__platform_fingerprint(fingerprint, sizeof fingerprint);
}

void tj__compiler_fingerprint(char *buf, size_t len)
{
  pthread_once(&fingerprint_once, read_fingerprint);
  snprintf(buf, len, "%s", fingerprint);
}
