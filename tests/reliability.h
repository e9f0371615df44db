/*
 * reliability.h: what the check_reliability_* programs share: their scale
 * (small for make check, long for make check-stress), runtimes and the
 * reference kernel they are held to, fake code objects whose bytes their
 * key names, and files to write.  Only rel_main and rel_valid_cache_bytes
 * assert, so that forked children can use the rest.
 */
#ifndef TJ_RELIABILITY_H
#define TJ_RELIABILITY_H

#include "testutil.h"
#include "testsql.h"
#include "internal.h"

#include <stdint.h>
#include <stdio.h>

#if defined(TJ_PLATFORM_NVIDIA)
#define TEST_ARCH2 "sm_80"
#else
#define TEST_ARCH2 "gfx1030"
#endif

/* How hard each program pushes; set by rel_main from the environment. */
struct rel_scale {
  int stress;
  int procs;          /* processes racing on one fresh cache */
  int kernels;        /* embedded kernels each compiles per arch (0: all) */
  int threads;        /* threads sharing one runtime */
  int kills;          /* SIGKILLs of a writer */
  int kill_max_ms;    /* a kill comes 0 to this many ms after the start */
  int random_files;   /* files of random bytes tried */
  int compile_rounds; /* rounds of 8 threads compiling at once */
  int light;          /* under valgrind, where a compile takes 30 s */
};
extern struct rel_scale S;

/* One case of a program: a kind of trouble and its tests.  CK_RUN_CASE=NAME
 * runs one of them. */
typedef struct rel_case {
  const char *name;
  const TTest *tests[8];
} rel_case;

/* A program's main: the scale from TJ_STRESS / TJ_VALGRIND, then the cases
 * as one suite through the common runner. */
int rel_main(const char *suite, const rel_case *cases, size_t n);

/* In a forked child: say what failed and exit 1, for the parent to see. */
#define CHILD_CHECK(cond, ...)                                              \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                       \
      fprintf(stderr, __VA_ARGS__);                                         \
      fputc('\n', stderr);                                                  \
      return 1;                                                             \
    }                                                                       \
  } while (0)

/* Make the runtime's message a known failure, so that a later check can
 * tell that no new warning was written since (rel_no_new_warning). */
void rel_set_sentinel(tj_runtime *rt);
int rel_no_new_warning(tj_runtime *rt);

/* A compile-only runtime for arch on the cache at path, or NULL (said on
 * stderr). */
tj_runtime *rel_open(const char *path, const char *arch, unsigned flags);

/* add_i32 for TEST_ARCH as a cache-less runtime compiles it: what every
 * runtime must hand out, whatever its cache held.  malloc'd. */
unsigned char *rel_reference_code(size_t *size);

/* add_i32 from rt: OK, and byte for byte the reference.  Its origin, or -1. */
int rel_get_reference(tj_runtime *rt, const unsigned char *ref, size_t n);

/* tsql_exec, and the file made private as the cache makes its own. */
void rel_exec(const char *path, const char *sql);

/* One runtime for one arch: the first `kernels` embedded kernels, no error
 * and no warning (rc and msg say how it went). */
struct arch_job {
  const char *path, *arch;
  int kernels;
  int rc;
  char msg[512];
};
void *rel_compile_all(void *arg);

/* A cache holding add_i32, its WAL folded in; returns the file's bytes. */
unsigned char *rel_valid_cache_bytes(const char *path, size_t *n);

/* A small fast PRNG (xorshift64*): seeded, so that a failure can be
 * replayed from the seed the test prints. */
uint64_t rel_rand(uint64_t *s);

/* The key of fake row number id. */
void rel_fake_key(uint64_t id, char key[TJ__KEY_HEX]);

/* The fake code object that key names: 1 to 24000 bytes, all drawn from
 * the key, so that a reader can tell a whole row from a torn one.
 * malloc'd. */
unsigned char *rel_fake_blob(const char *key, size_t *n);

/* Every row of a cache the fake writer filled is whole: its blob is the
 * one its key names, its stored hash and size match.  The number of rows,
 * or -1 with the first bad key in why. */
long rel_check_fake_rows(const char *path, char *why, size_t len);

/* Replace path's bytes, and drop its WAL and shared memory so that SQLite
 * reads the file alone. */
int rel_write_file(const char *path, const void *data, size_t n);

/* S.procs forked processes, let go at one moment (each waits on a pipe
 * until the parent closes its end), each exiting with what race(p, ctx)
 * returns (3 when the wait fails).  How many exited 0. */
int rel_race(int (*race)(int p, void *ctx), void *ctx);

#endif
