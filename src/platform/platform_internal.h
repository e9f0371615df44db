/*
 * platform_internal.h: what hip_platform.c (the part both platforms share)
 * and the platform file the build chose (amd.c or nvidia.c) say to each
 * other.  Nothing outside src/platform includes it.
 */
#ifndef TJ_PLATFORM_INTERNAL_H
#define TJ_PLATFORM_INTERNAL_H

#include <link.h>
#include <stddef.h>

/* ------------------------------------------- in hip_platform.c */

/* TJ_OK when arch is 1 to 64 characters of [A-Za-z0-9_:+-], else
 * TJ_EINVAL and a sentence in why. */
int tj__arch_name_wellformed(const char *arch, char *why, size_t whylen);
/* The part of path after its last '/'. */
const char *tj__base_name(const char *path);
/* The GNU build id among the ELF notes in [p, end), as hex into out: 1 when
 * found, else 0. */
int tj__note_build_id(const unsigned char *p, const unsigned char *end,
                      char *out, size_t outlen);
/* The GNU build id of a loaded object, as hex, from its PT_NOTE segments:
 * 1 when found, else 0. */
int tj__build_id(const struct dl_phdr_info *info, char *out, size_t outlen);
/* "size N mtime S.NS" of the file at path, or "unknown". */
void tj__file_identity(const char *path, char *out, size_t outlen);
/* "b:" and 16 hex digits naming the compiler libraries: those loaded whose
 * names start with one of tj__platform_library_prefixes, and those that
 * tj__platform_lazy_identities adds.  Computed once per process. */
const char *tj__compiler_libraries_digest(void);
/* Adds the first len bytes of name to tj__compiler_archs' list, once. */
void tj__add_arch(const char *name, size_t len);

/* One compiler library in the digest: its file name and its build id (or
 * size and mtime). */
#define TJ__LIBS_MAX 16
typedef struct tj__lib_identity {
  char name[64];
  char id[96];
} tj__lib_identity;

typedef struct tj__lib_scan {
  const char *const *prefixes;
  tj__lib_identity libs[TJ__LIBS_MAX];
  int n;
} tj__lib_scan;

/* A variable the compiler reads, and what the library does about it. */
typedef struct tj__env_rule {
  const char *name;
  int refuse;         /* 1: refuse to compile while it is set and not empty */
  const char *why;    /* for the message */
} tj__env_rule;

/* ------------------------------------------- in amd.c or nvidia.c */

/* The compiler fingerprint tj__compiler_fingerprint hands out: the
 * compilers' versions, then tj__compiler_libraries_digest. */
void tj__platform_fingerprint(char *buf, size_t len);
/* The file name prefixes of the compiler libraries; NULL-terminated,
 * static storage. */
const char *const *tj__platform_library_prefixes(void);
/* Adds to scan the compiler libraries that are not loaded yet. */
void tj__platform_lazy_identities(tj__lib_scan *scan);
/* Calls tj__add_arch for each processor the compiler can target. */
void tj__platform_list_archs(void);
/* The variables tj__compiler_environment reads; *n gets their count. */
const tj__env_rule *tj__platform_env_rules(size_t *n);

#endif /* TJ_PLATFORM_INTERNAL_H */
