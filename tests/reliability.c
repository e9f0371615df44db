/* reliability.c: see reliability.h. */
#include "reliability.h"
#include "testsql.h"
#include "embedded.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>

struct rel_scale S = {0, 4, 2, 8, 12, 40, 6, 3, 0};

int rel_main(const char *suite, const rel_case *cases, size_t n)
{
  const char *stress = getenv("TJ_STRESS");
  if (stress && *stress && strcmp(stress, "0") != 0)
    S = (struct rel_scale){1, 16, 0, 8, 100, 250, 50, 10, 0};
  else if (getenv("TJ_VALGRIND")) /* make check-valgrind: fewer compiles */
    S = (struct rel_scale){0, 2, 1, 2, 12, 40, 2, 1, 1};
  Suite *s = suite_create(suite);
  for (size_t i = 0; i < n; i++) {
    TCase *tc = test_case(s, cases[i].name, S.stress ? 1800 : 600);
    for (int t = 0; t < 8 && cases[i].tests[t]; t++)
      tcase_add_test(tc, cases[i].tests[t]);
  }
  return run_suite(s);
}

static const char sentinel[] = "no_such_kernel_sentinel";

void rel_set_sentinel(tj_runtime *rt)
{
  tj_kernel *k;
  tj_kernel_get(rt, sentinel, &k);
}

int rel_no_new_warning(tj_runtime *rt)
{
  return strstr(tj_errmsg(rt), sentinel) != NULL;
}

tj_runtime *rel_open(const char *path, const char *arch, unsigned flags)
{
  tj_options o = {0};
  o.arch = arch;
  o.cache_path = path;
  o.flags = TJ_NO_DEVICE | flags;
  tj_runtime *rt = NULL;
  if (tj_runtime_open(&rt, &o) != TJ_OK) {
    fprintf(stderr, "tj_runtime_open(%s, %s): %s\n", path ? path : "default",
            arch, tj_errmsg(rt));
    tj_runtime_close(rt);
    return NULL;
  }
  return rt;
}

unsigned char *rel_reference_code(size_t *size)
{
  tj_runtime *rt = rel_open(NULL, TEST_ARCH, TJ_CACHE_DISABLE);
  tj_kernel *k = NULL;
  tj_kernel_info info;
  if (!rt || tj_kernel_get(rt, "add_i32", &k) != TJ_OK) {
    tj_runtime_close(rt);
    return NULL;
  }
  tj_kernel_get_info(k, &info);
  unsigned char *code = malloc(info.code_size);
  memcpy(code, info.code, info.code_size);
  *size = info.code_size;
  tj_runtime_close(rt);
  return code;
}

int rel_get_reference(tj_runtime *rt, const unsigned char *ref, size_t n)
{
  tj_kernel *k = NULL;
  tj_kernel_info info;
  if (tj_kernel_get(rt, "add_i32", &k) != TJ_OK) {
    fprintf(stderr, "add_i32: %s\n", tj_errmsg(rt));
    return -1;
  }
  tj_kernel_get_info(k, &info);
  if (info.code_size != n || memcmp(info.code, ref, n) != 0) {
    fprintf(stderr, "add_i32: code differs from the reference\n");
    return -1;
  }
  return (int)info.origin;
}

void rel_exec(const char *path, const char *sql)
{
  tsql_exec(path, sql);
  chmod(path, 0600);
}

void *rel_compile_all(void *arg)
{
  struct arch_job *j = arg;
  tj_runtime *rt = rel_open(j->path, j->arch, 0);
  j->rc = rt ? TJ_OK : TJ_ECACHE;
  for (int i = 0; rt && j->rc == TJ_OK && i < j->kernels; i++) {
    tj_kernel *k;
    j->rc = tj_kernel_get(rt, tj_embedded_name((size_t)i), &k);
  }
  snprintf(j->msg, sizeof j->msg, "%s", rt ? tj_errmsg(rt) : "open failed");
  tj_runtime_close(rt);
  return NULL;
}

unsigned char *rel_valid_cache_bytes(const char *path, size_t *n)
{
  tj_runtime *rt = rel_open(path, TEST_ARCH, 0);
  tj_kernel *k;
  ck_assert_ptr_nonnull(rt);
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_runtime_close(rt);
  unsigned char *b = test_read_file(path, n);
  ck_assert_ptr_nonnull(b);
  return b;
}

uint64_t rel_rand(uint64_t *s)
{
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

void rel_fake_key(uint64_t id, char key[TJ__KEY_HEX])
{
  tj__hash_hex(&id, sizeof id, key);
}

unsigned char *rel_fake_blob(const char *key, size_t *n)
{
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (const char *p = key; *p; p++)
    s = (s ^ (unsigned char)*p) * 1099511628211ull;
  s |= 1;
  *n = 1 + (size_t)(rel_rand(&s) % 24000);
  unsigned char *b = malloc(*n);
  for (size_t i = 0; b && i < *n; i++)
    b[i] = (unsigned char)rel_rand(&s);
  return b;
}

/* Whether the row st stands on is the whole fake row its key names. */
static int fake_row_whole(sqlite3_stmt *st)
{
  const char *key = (const char *)sqlite3_column_text(st, 0);
  const void *code = sqlite3_column_blob(st, 1);
  size_t n = (size_t)sqlite3_column_bytes(st, 1), want_n = 0;
  const char *hash = (const char *)sqlite3_column_text(st, 2);
  char got[TJ__KEY_HEX];
  tj__hash_hex(code, n, got);
  unsigned char *want = rel_fake_blob(key ? key : "", &want_n);
  int whole = key && hash && strcmp(got, hash) == 0 && want_n == n &&
              (sqlite3_int64)n == sqlite3_column_int64(st, 3) &&
              memcmp(want, code, n) == 0;
  free(want);
  return whole;
}

long rel_check_fake_rows(const char *path, char *why, size_t len)
{
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  long rows = 0;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db, "SELECT key, code, code_hash, code_size FROM "
                         "code_objects", -1, &st, NULL) != SQLITE_OK) {
    snprintf(why, len, "cannot read: %s", sqlite3_errmsg(db));
    sqlite3_close(db);
    return -1;
  }
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW && rows >= 0) {
    if (fake_row_whole(st)) {
      rows++;
    } else {
      const char *key = (const char *)sqlite3_column_text(st, 0);
      snprintf(why, len, "row %s is not whole", key ? key : "(null)");
      rows = -1;
    }
  }
  if (rc != SQLITE_DONE && rows >= 0) {
    snprintf(why, len, "reading rows: %s", sqlite3_errmsg(db));
    rows = -1;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rows;
}

int rel_write_file(const char *path, const void *data, size_t n)
{
  char side[4096];
  tsql_remove_code(path); /* new bytes: what they hold is what is read */
  snprintf(side, sizeof side, "%s-wal", path);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", path);
  unlink(side);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0)
    return -1;
  ssize_t w = n ? write(fd, data, n) : 0;
  close(fd);
  return w == (ssize_t)n ? 0 : -1;
}


int rel_race(int (*race)(int p, void *ctx), void *ctx)
{
  int go[2], ok = 0;
  pid_t *pids = calloc((size_t)S.procs, sizeof *pids);
  if (!pids || pipe(go) != 0) {
    free(pids);
    return 0;
  }
  for (int p = 0; p < S.procs; p++) {
    pids[p] = fork();
    if (pids[p] == 0) {
      char c;
      close(go[1]);
      int rc = read(go[0], &c, 1) < 0 ? 3 : race(p, ctx);
      free(pids); /* for valgrind in the child */
      _exit(rc);
    }
  }
  close(go[1]); /* every child's read returns now: they start together */
  for (int p = 0; p < S.procs; p++) {
    int status = 0;
    ok += pids[p] > 0 && waitpid(pids[p], &status, 0) == pids[p] &&
          WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  close(go[0]);
  free(pids);
  return ok;
}
