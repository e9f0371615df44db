/*
 * check_security.c: the cache against a second user and against files
 * that are not its own (issue 12): relative paths, planted side files,
 * hard links, ancestors of other owners, rows that are not what they say,
 * an application's own database, FIFOs and directories, size limits at
 * their extremes, oversized blobs, and maintenance racing compiles.
 *
 * Tests that need a second user create tj-test-other when run as root
 * (useradd -M) and skip their part otherwise; they say so in the log.
 */
#include "testutil.h"
#include "testsql.h"
#include "internal.h"
#include "embedded.h"
#include "cache_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/fs.h>
#include <pwd.h>
#include <signal.h>
#include <sqlite3.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#define APP_ID 1953130868 /* TJ__CACHE_APP_ID as a signed PRAGMA value */

static int open_rc(const char *path, unsigned flags, char *msg, size_t len)
{
  tj__cache *c = NULL;
  int rc = tj__cache_open(path, flags, &c, msg, len);
  if (rc == TJ_OK && !c)
    rc = 1; /* opened without a cache */
  tj__cache_close(c);
  return rc;
}

static void expect_open(const char *path, unsigned flags, int want,
                        const char *word, int line)
{
  char m[2048];
  int r = open_rc(path, flags, m, sizeof m);
  ck_assert_msg(r == want, "line %d: %s: %d, not %d: %s", line, path, r, want, m);
  ck_assert_msg(!word || strstr(m, word), "line %d: %s: '%s' lacks '%s'", line,
                path, m, word ? word : "");
}
#define EXPECT_OPEN(path, flags, want, word)                                \
  expect_open((path), (flags), (want), (word), __LINE__)

/* A file's bytes, hashed: equal before and after means untouched. */
static void file_hash(const char *path, char out[TJ__KEY_HEX])
{
  size_t n;
  unsigned char *b = test_read_file(path, &n);
  tj__hash_hex(b, n, out);
  free(b);
}

static tj_runtime *runtime_on(const char *path, unsigned flags, int *rc)
{
  tj_runtime *rt = NULL;
  *rc = test_open(&rt, path, flags);
  return rt;
}

/* The second user, made when we are root; 0 when there can be none. */
static int other_user(uid_t *uid, gid_t *gid)
{
  if (geteuid() != 0)
    return 0;
  struct passwd *pw = getpwnam("tj-test-other");
  if (!pw && system("useradd -M -N -s /bin/false tj-test-other "
                    ">/dev/null 2>&1") == 0)
    pw = getpwnam("tj-test-other");
  if (!pw)
    return 0;
  *uid = pw->pw_uid;
  *gid = pw->pw_gid;
  return 1;
}

/* ================================================================ paths */

/* Issue 12: "cache.db" has no '/', and the old check of its directory was
 * skipped.  A relative path is judged as the absolute one it names. */
START_TEST(relative_paths_are_checked)
{
  char *dir = test_tmpdir(), *open_dir = test_path(dir, "open");
  ck_assert_int_eq(mkdir(open_dir, 0700), 0);
  ck_assert_int_eq(chmod(open_dir, 0777), 0);
  ck_assert_int_eq(chdir(open_dir), 0);
  EXPECT_OPEN("cache.db", 0, TJ_EPERM, "other users create files");
  EXPECT_OPEN("./cache.db", 0, TJ_EPERM, NULL);
  ck_assert_int_ne(access("cache.db", F_OK), 0); /* nothing made */
  char *sub = test_path(dir, "safe");
  ck_assert_int_eq(mkdir(sub, 0700), 0);
  ck_assert_int_eq(chdir(sub), 0);
  EXPECT_OPEN("../open/cache.db", 0, TJ_EPERM, NULL);
  EXPECT_OPEN("cache.db", 0, TJ_OK, NULL);
  /* And the path SQLite was given is the resolved, absolute one. */
  tj__cache *c = NULL;
  char msg[1024];
  ck_assert_int_eq(tj__cache_open("../safe/./cache.db", 0, &c, msg, sizeof msg), TJ_OK);
  ck_assert_ptr_nonnull(c);
  const char *file = tj__cache_file(c);
  char *want = test_path(sub, "cache.db"), *real = realpath(want, NULL);
  ck_assert_str_eq(file, real);
  tj__cache_close(c);
  free(real); free(want); free(sub); free(open_dir); free(dir);
}
END_TEST

/* Symbolic links in the ancestors are followed and the target judged; a
 * link as the cache file itself, or as a side file, is refused. */
START_TEST(symlinks_are_judged_by_their_target)
{
  char *dir = test_tmpdir(), *real = test_path(dir, "real");
  char *link = test_path(dir, "link"), *open_dir = test_path(dir, "open");
  char *via_link = test_path(link, "cache.db"), *via_open = test_path(dir, "to-open");
  ck_assert_int_eq(mkdir(real, 0700), 0);
  ck_assert_int_eq(mkdir(open_dir, 0700), 0);
  ck_assert_int_eq(chmod(open_dir, 0777), 0);
  ck_assert_int_eq(symlink(real, link), 0);
  ck_assert_int_eq(symlink(open_dir, via_open), 0);
  EXPECT_OPEN(via_link, 0, TJ_OK, NULL);
  char *p = test_path(via_open, "cache.db");
  EXPECT_OPEN(p, 0, TJ_EPERM, "open"); /* the 0777 target is what counts */
  free(p);
  char *file = test_path(real, "cache.db"), *alias = test_path(real, "alias.db");
  ck_assert_int_eq(symlink(file, alias), 0);
  EXPECT_OPEN(alias, 0, TJ_EPERM, "symbolic link");
  char *wal = test_path(real, "cache.db-wal"), *elsewhere = test_path(dir, "w");
  unlink(wal);
  ck_assert_int_eq(symlink(elsewhere, wal), 0);
  EXPECT_OPEN(file, 0, TJ_EPERM, "cache.db-wal: it is a symbolic link");
  ck_assert_int_ne(access(elsewhere, F_OK), 0); /* not created through it */
  free(wal); free(elsewhere); free(alias); free(file);
  free(via_open); free(via_link); free(open_dir); free(link); free(real); free(dir);
}
END_TEST

/* Side files another user could have written are refused: the planted
 * -wal of the exploit, and -shm, -journal and .lock alike. */
START_TEST(side_files_are_judged)
{
  static const char *const sides[] = {"-wal", "-shm", "-journal", ".lock"};
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  EXPECT_OPEN(path, 0, TJ_OK, NULL);
  for (size_t i = 0; i < 4; i++) {
    char side[4096], word[64];
    snprintf(side, sizeof side, "%s%s", path, sides[i]);
    int fd = open(side, O_WRONLY | O_CREAT, 0600);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(chmod(side, 0666), 0);
    snprintf(word, sizeof word, "cache.db%s: mode 0666", sides[i]);
    EXPECT_OPEN(path, 0, TJ_EPERM, word);
    ck_assert_int_eq(chmod(side, 0600), 0);
    EXPECT_OPEN(path, 0, TJ_OK, NULL);
  }
  free(path); free(dir);
}
END_TEST

/* A second name for the cache file, or for a side file: refused. */
START_TEST(hard_links_are_refused)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  char *other = test_path(dir, "second-name");
  EXPECT_OPEN(path, 0, TJ_OK, NULL);
  ck_assert_int_eq(link(path, other), 0);
  EXPECT_OPEN(path, 0, TJ_EPERM, "2 names");
  ck_assert_int_eq(unlink(other), 0);
  EXPECT_OPEN(path, 0, TJ_OK, NULL);
  char *wal = test_path(dir, "cache.db-wal");
  unlink(wal);
  int fd = open(other, O_WRONLY | O_CREAT, 0600);
  close(fd);
  ck_assert_int_eq(link(other, wal), 0);
  EXPECT_OPEN(path, 0, TJ_EPERM, "cache.db-wal: it has 2 names");
  /* No name at all: a side file removed between another opener's lookup
   * and its stat (the process moving a corrupt file aside removes them)
   * is not a second name, and refusing it refused a good cache. */
  char msg[1024] = "";
  struct stat st;
  ck_assert_int_eq(unlink(wal), 0);
  fd = open(other, O_RDONLY);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(unlink(other), 0);
  ck_assert_int_eq(fstat(fd, &st), 0);
  ck_assert_uint_eq(st.st_nlink, 0);
  ck_assert_int_eq(tj__location_check_file(&st, wal, 0, st.st_gid, msg,
                                           sizeof msg), TJ_OK);
  close(fd);
  free(wal); free(other); free(path); free(dir);
}
END_TEST

/* Another user's files and directories, with a real second user. */
START_TEST(another_users_files_are_refused)
{
  uid_t ou;
  gid_t og;
  if (!other_user(&ou, &og)) {
    printf("security: another user's files: skipped (needs root to make "
           "tj-test-other)\n");
    return;
  }
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  EXPECT_OPEN(path, 0, TJ_OK, NULL);
  /* Their -wal in our directory (left from before it was private). */
  char *wal = test_path(dir, "cache.db-wal");
  int fd = open(wal, O_WRONLY | O_CREAT, 0600);
  close(fd);
  ck_assert_int_eq(chown(wal, ou, og), 0);
  EXPECT_OPEN(path, 0, TJ_EPERM, "cache.db-wal: owned by uid");
  unlink(wal);
  /* Their file hard-linked in as our -wal. */
  char *theirs = test_path(dir, "theirs");
  fd = open(theirs, O_WRONLY | O_CREAT, 0600);
  close(fd);
  ck_assert_int_eq(chown(theirs, ou, og), 0);
  ck_assert_int_eq(link(theirs, wal), 0);
  EXPECT_OPEN(path, 0, TJ_EPERM, "cache.db-wal");
  unlink(wal);
  unlink(theirs);
  EXPECT_OPEN(path, 0, TJ_OK, NULL);
  /* An ancestor they own: they could swap our directory for theirs. */
  char *their_dir = test_path(dir, "their-dir"), *mine = test_path(their_dir, "mine");
  char *inner = test_path(mine, "cache.db");
  ck_assert_int_eq(mkdir(their_dir, 0755), 0);
  ck_assert_int_eq(mkdir(mine, 0700), 0);
  ck_assert_int_eq(chown(their_dir, ou, og), 0);
  EXPECT_OPEN(inner, 0, TJ_EPERM, "belongs to uid");
  ck_assert_int_ne(access(inner, F_OK), 0);
  free(inner); free(mine); free(their_dir); free(theirs); free(wal);
  free(path); free(dir);
}
END_TEST

/* Another user's file bind-mounted over our cache file or side file, and
 * their directory over our cache directory: judged as what is mounted. */
static int bind_child(const char *dir, uid_t ou, gid_t og)
{
  char path[4096], theirs[4096], their_dir[4096], msg[2048];
  snprintf(path, sizeof path, "%s/c/cache.db", dir);
  snprintf(theirs, sizeof theirs, "%s/theirs.db", dir);
  snprintf(their_dir, sizeof their_dir, "%s/their-dir", dir);
  if (open_rc(path, 0, msg, sizeof msg) != TJ_OK)
    return 2;
  tj__cache *c = NULL;
  if (tj__cache_open(theirs, 0, &c, msg, sizeof msg) != TJ_OK || !c)
    return 3;
  tj__cache_close(c);
  if (chown(theirs, ou, og) != 0 || mkdir(their_dir, 0700) != 0 ||
      chown(their_dir, ou, og) != 0)
    return 4;
  if (unshare(CLONE_NEWNS) != 0 ||
      mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
      mount(theirs, path, NULL, MS_BIND, NULL) != 0)
    return 77;
  if (open_rc(path, 0, msg, sizeof msg) != TJ_EPERM || !strstr(msg, "owned by uid"))
    return 5;
  umount(path);
  char wal[4200];
  snprintf(wal, sizeof wal, "%s-wal", path);
  if (mount(theirs, wal, NULL, MS_BIND, NULL) != 0)
    return 6;
  if (open_rc(path, 0, msg, sizeof msg) != TJ_EPERM || !strstr(msg, "cache.db-wal"))
    return 7;
  umount(wal);
  snprintf(wal, sizeof wal, "%s/c", dir);
  if (mount(their_dir, wal, NULL, MS_BIND, NULL) != 0)
    return 8;
  if (open_rc(path, 0, msg, sizeof msg) != TJ_EPERM || !strstr(msg, "owned by uid"))
    return 9;
  return 0;
}

START_TEST(bind_mounts_are_judged_as_mounted)
{
  uid_t ou;
  gid_t og;
  if (!other_user(&ou, &og)) {
    printf("security: bind mounts: skipped (needs root to make tj-test-other)\n");
    return;
  }
  char *dir = test_tmpdir();
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0)
    _exit(bind_child(dir, ou, og));
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    printf("security: bind mounts: skipped (no mount namespace here)\n");
  } else {
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "step %d",
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    printf("security: another user's file and directory bind-mounted over "
           "the cache, its -wal and its directory: each refused\n");
  }
  free(dir);
}
END_TEST

/*
 * The exploit: a cache in a directory everyone may write, named by
 * a relative path; the other user plants a -wal (here, any file) before
 * the victim opens it.  The victim refuses the directory.
 */
START_TEST(planted_files_in_a_shared_directory)
{
  uid_t ou;
  gid_t og;
  if (!other_user(&ou, &og)) {
    printf("security: planted -wal: skipped (needs root to make tj-test-other)\n");
    return;
  }
  char *dir = test_tmpdir(), *shared = test_path(dir, "shared");
  ck_assert_int_eq(chmod(dir, 0755), 0);
  ck_assert_int_eq(mkdir(shared, 0700), 0);
  ck_assert_int_eq(chmod(shared, 01777), 0); /* like /tmp */
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) { /* the other user */
    if (setgroups(0, NULL) != 0 || setgid(og) != 0 || setuid(ou) != 0)
      _exit(77);
    char wal[4096];
    snprintf(wal, sizeof wal, "%s/cache.db-wal", shared);
    int fd = open(wal, O_WRONLY | O_CREAT | O_EXCL, 0644);
    _exit(fd >= 0 && write(fd, "planted", 7) == 7 ? 0 : 1);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "plant: 0x%x", status);
  ck_assert_int_eq(chdir(shared), 0);
  EXPECT_OPEN("cache.db", 0, TJ_EPERM, "mkdir -m 700");
  EXPECT_OPEN("cache.db", TJ_CACHE_GROUP, TJ_EPERM, NULL);
  char *path = test_path(shared, "cache.db");
  ck_assert_int_ne(access(path, F_OK), 0);
  free(path); free(shared); free(dir);
}
END_TEST

/* A socket bound at dir/name, or -1.  Its address is name alone, bound
 * from inside dir: a path under a deep build directory does not fit
 * sun_path. */
static int socket_in(const char *dir, const char *name)
{
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int s = socket(AF_UNIX, SOCK_STREAM, 0), bound = 0;
  if (strlen(name) < sizeof sa.sun_path && here >= 0 && s >= 0 &&
      chdir(dir) == 0) {
    memcpy(sa.sun_path, name, strlen(name) + 1);
    bound = bind(s, (struct sockaddr *)&sa, sizeof sa) == 0;
    bound = fchdir(here) == 0 && bound;
  }
  if (here >= 0)
    close(here);
  if (!bound && s >= 0)
    close(s);
  return bound ? s : -1;
}

/* A FIFO, a socket, a directory: an error at once, never a hang, and
 * nothing left behind.  Run in a child with an alarm: a hang fails. */
static int kinds_child(const char *dir)
{
  char path[4200], side[4200];
  snprintf(path, sizeof path, "%s/fifo.db", dir);
  if (mkfifo(path, 0600) != 0)
    return 2;
  tj_cache *c = NULL;
  if (tj_cache_open(&c, path, 0) != TJ_ECACHE || !strstr(tj_cache_errmsg(c), "FIFO"))
    return 3;
  tj_cache_close(c);
  if (tj_cache_open(&c, path, TJ_CACHE_READONLY) != TJ_ECACHE)
    return 4;
  tj_cache_close(c);
  snprintf(path, sizeof path, "%s/sock.db", dir);
  int s = socket_in(dir, "sock.db");
  if (s < 0)
    return 12;
  if (tj_cache_open(&c, path, 0) != TJ_ECACHE ||
      !strstr(tj_cache_errmsg(c), "socket"))
    return 5;
  tj_cache_close(c);
  close(s);
  snprintf(path, sizeof path, "%s/real.db", dir);
  if (tj_cache_open(&c, path, 0) != TJ_OK)
    return 6;
  tj_cache_close(c);
  snprintf(side, sizeof side, "%s/real.db.lock", dir); /* a FIFO as the lock */
  unlink(side);
  if (mkfifo(side, 0600) != 0 || tj_cache_open(&c, path, 0) != TJ_ECACHE)
    return 7;
  tj_cache_close(c);
  unlink(side);
  snprintf(side, sizeof side, "%s/real.db-wal", dir);
  unlink(side);
  if (mkfifo(side, 0600) != 0 || tj_cache_open(&c, path, 0) != TJ_ECACHE)
    return 8;
  tj_cache_close(c);
  snprintf(path, sizeof path, "%s/adir", dir);
  mkdir(path, 0700);
  if (tj_cache_open(&c, path, 0) != TJ_ECACHE ||
      !strstr(tj_cache_errmsg(c), "is a directory; give a file path"))
    return 9;
  tj_cache_close(c);
  snprintf(side, sizeof side, "%s/adir.lock", dir);
  if (access(side, F_OK) == 0)
    return 10;
  snprintf(path, sizeof path, "%s/adir/", dir);
  if (tj_cache_open(&c, path, 0) != TJ_ECACHE)
    return 11;
  tj_cache_close(c);
  return 0;
}

START_TEST(only_regular_files_and_never_a_hang)
{
  char *dir = test_tmpdir();
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    _exit(kinds_child(dir));
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "status 0x%x (a signal is a hang)", status);
  free(dir);
}
END_TEST

/* ================================================================ not ours */

/* An application's own database at the cache path: refused with
 * TJ_ECACHE, byte for byte as it was, nothing made beside it. */
START_TEST(an_applications_database_is_left_alone)
{
  static const char *const apps[] = {
    "CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT);"
    "INSERT INTO accounts VALUES (1, 'alice'), (2, 'bob');",
    /* our table names, but not our tables */
    "CREATE TABLE code_objects (key TEXT); CREATE TABLE counters (x);"
    "INSERT INTO code_objects VALUES ('precious'); PRAGMA user_version = 1",
    "CREATE TABLE t (x); PRAGMA application_id = 42",
    "CREATE TABLE t (x); PRAGMA user_version = 99",
  };
  char *dir = test_tmpdir(), *path = test_path(dir, "app.db");
  char *beside = test_path(dir, "app.db?*");
  for (size_t i = 0; i < sizeof apps / sizeof apps[0]; i++) {
    unlink(path);
    tsql_exec(path, apps[i]);
    char before[TJ__KEY_HEX], after[TJ__KEY_HEX];
    file_hash(path, before);
    int rc;
    tj_runtime *rt = runtime_on(path, 0, &rc);
    ck_assert_msg(rc == TJ_ECACHE, "app %zu: %s: %s", i, tj_err_name(rc), tj_errmsg(rt));
    ck_assert_msg(strstr(tj_errmsg(rt), "is not a tokitai-jit cache") &&
                  strstr(tj_errmsg(rt), "left as it is"), "%s", tj_errmsg(rt));
    tj_runtime_close(rt);
    tj_cache *c = NULL;
    ck_assert_int_eq(tj_cache_open(&c, path, 0), TJ_ECACHE);
    tj_cache_close(c);
    file_hash(path, after);
    ck_assert_msg(strcmp(before, after) == 0, "app %zu: the file changed", i);
    ck_assert_msg(test_count_matches(beside) == 0, "app %zu: files beside it", i);
  }
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM t"), 0);
  free(beside); free(path); free(dir);
}
END_TEST

/* A damaged file that nothing shows to be ours is refused, not moved. */
START_TEST(damaged_unmarked_files_are_not_moved)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  char *aside = test_path(dir, "cache.db.corrupt-*");
  tsql_exec(path, "CREATE TABLE t (x); INSERT INTO t VALUES (1)");
  int fd = open(path, O_WRONLY);
  char junk[3996];
  memset(junk, 0x5a, sizeof junk);
  ck_assert_int_eq(pwrite(fd, junk, sizeof junk, 100), (ssize_t)sizeof junk);
  close(fd);
  char before[TJ__KEY_HEX], after[TJ__KEY_HEX];
  file_hash(path, before);
  EXPECT_OPEN(path, 0, TJ_ECACHE, "nothing shows that it is a tokitai-jit cache");
  file_hash(path, after);
  ck_assert_str_eq(before, after);
  ck_assert_int_eq(test_count_matches(aside), 0);
  free(aside); free(path); free(dir);
}
END_TEST

/* A cache of a build before files carried the mark (application_id 0,
 * user_version 1, WAL), with a good row: nothing shows it to be ours, so
 * it is refused as another program's file, byte for byte as it was. */
static const char v1_schema[] =
  "CREATE TABLE code_objects (key TEXT PRIMARY KEY, kernel TEXT NOT NULL, "
  "arch TEXT NOT NULL, platform TEXT NOT NULL, compiler TEXT NOT NULL, "
  "options TEXT NOT NULL, code BLOB NOT NULL, code_hash TEXT NOT NULL, "
  "code_size INTEGER NOT NULL, compile_ms REAL NOT NULL, created INTEGER NOT "
  "NULL, last_used INTEGER NOT NULL, hits INTEGER NOT NULL DEFAULT 0);"
  "CREATE INDEX code_objects_last_used ON code_objects(last_used);"
  "CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);"
  "INSERT INTO counters VALUES ('misses', 0); PRAGMA user_version = 1;"
  "PRAGMA journal_mode = WAL;";

START_TEST(an_unmarked_old_cache_is_refused)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  int rc;
  tj_runtime *rt = runtime_on(NULL, TJ_CACHE_DISABLE, &rc);
  tj_kernel *k;
  tj_kernel_info info;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_kernel_get_info(k, &info);
  tsql_exec(path, v1_schema);
  sqlite3 *db;
  sqlite3_stmt *st;
  char hash[TJ__KEY_HEX];
  tj__hash_hex(info.code, info.code_size, hash);
  ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
  ck_assert_int_eq(sqlite3_prepare_v2(db, "INSERT INTO code_objects VALUES (?1, "
                   "'add_i32', ?2, ?3, ?4, '', ?5, ?6, ?7, 1, 0, 0, 0)", -1, &st,
                   NULL), SQLITE_OK);
  sqlite3_bind_text(st, 1, info.key, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, TEST_ARCH, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, tj_platform(), -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, tj_runtime_compiler(rt), -1, SQLITE_STATIC);
  sqlite3_bind_blob(st, 5, info.code, (int)info.code_size, SQLITE_STATIC);
  sqlite3_bind_text(st, 6, hash, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 7, (sqlite3_int64)info.code_size);
  ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  sqlite3_close(db);
  tj_runtime_close(rt);
  char before[TJ__KEY_HEX], after[TJ__KEY_HEX];
  file_hash(path, before);
  rt = runtime_on(path, 0, &rc);
  ck_assert_msg(rc == TJ_ECACHE, "%s: %s", tj_err_name(rc), tj_errmsg(rt));
  ck_assert_msg(strstr(tj_errmsg(rt), "is not a tokitai-jit cache"), "%s",
                tj_errmsg(rt));
  tj_runtime_close(rt);
  file_hash(path, after);
  ck_assert_str_eq(before, after);
  ck_assert_int_eq(tsql_int(path, "PRAGMA user_version"), 1);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM code_objects"), 1);
  free(path); free(dir);
}
END_TEST

/* ================================================================ rows */

static void put_kernel(const char *path, const char *name)
{
  int rc;
  tj_runtime *rt = runtime_on(path, 0, &rc);
  tj_kernel *k;
  ck_assert_int_eq(rc, TJ_OK);
  ck_assert_int_eq(tj_kernel_get(rt, name, &k), TJ_OK);
  tj_runtime_close(rt);
}

/* gelu's whole row, hash and all, moved to add_i32's key: the old store
 * served gelu's code for add_i32.  The row says what it is; believe it. */
START_TEST(a_row_for_another_request_is_never_served)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  put_kernel(path, "add_i32");
  put_kernel(path, "gelu_fwd_f16");
  /* Two rows to swap: gelu_fwd_f16 came with the rest of its file. */
  tsql_exec(path, "DELETE FROM code_objects WHERE kernel NOT IN "
           "('add_i32', 'gelu_fwd_f16');"
           "CREATE TEMP TABLE k AS SELECT kernel, key FROM code_objects;"
           "UPDATE code_objects SET key = key || '-' ;"
           "UPDATE code_objects SET key = (SELECT key FROM k WHERE k.kernel <> "
           "code_objects.kernel)");
  int rc;
  tj_runtime *rt = runtime_on(path, 0, &rc);
  tj_kernel *k;
  tj_kernel_info info;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_kernel_get_info(k, &info);
  ck_assert_int_eq(info.origin, TJ_FROM_COMPILER);
  ck_assert_msg(strstr(tj_errmsg(rt), "another kernel"), "%s", tj_errmsg(rt));
  tj_stats s;
  tj_runtime_get_stats(rt, &s);
  ck_assert_uint_eq(s.cache_drops, 1);
  tj_runtime_close(rt);
  /* Each column on its own: a row for another arch, compiler, options. */
  static const char *const edits[] = {
    "UPDATE code_objects SET arch = 'gfx000'", "UPDATE code_objects SET "
    "compiler = 'another'", "UPDATE code_objects SET options = '-O0'",
    "UPDATE code_objects SET platform = 'other'"};
  for (size_t i = 0; i < 4; i++) {
    unlink(path);
    put_kernel(path, "add_i32");
    tsql_exec(path, edits[i]);
    rt = runtime_on(path, 0, &rc);
    ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
    tj_kernel_get_info(k, &info);
    ck_assert_msg(info.origin == TJ_FROM_COMPILER, "%s: served", edits[i]);
    tj_runtime_close(rt);
  }
  free(path); free(dir);
}
END_TEST

static int count_bad(const tj_cache_entry *e, void *ctx)
{
  (void)e;
  ++*(int *)ctx;
  return 0;
}

/* --verify-cache recomputes the keys of the embedded kernels' rows. */
START_TEST(verify_recomputes_embedded_keys)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  put_kernel(path, "add_i32");
  put_kernel(path, "gelu_fwd_f16");
  tj_cache *c = NULL;
  uint64_t bad = 9;
  ck_assert_int_eq(tj_cache_open(&c, path, TJ_CACHE_READONLY), TJ_OK);
  ck_assert_int_eq(tj_cache_verify(c, 0, NULL, NULL, &bad), TJ_OK);
  ck_assert_uint_eq(bad, 0);
  tj_cache_close(c);
  /* Two rows to swap: gelu_fwd_f16 came with the rest of its file. */
  tsql_exec(path, "DELETE FROM code_objects WHERE kernel NOT IN "
           "('add_i32', 'gelu_fwd_f16');"
           "CREATE TEMP TABLE k AS SELECT kernel, key FROM code_objects;"
           "UPDATE code_objects SET key = key || '-';"
           "UPDATE code_objects SET key = (SELECT key FROM k WHERE k.kernel <> "
           "code_objects.kernel)");
  int seen = 0;
  ck_assert_int_eq(tj_cache_open(&c, path, 0), TJ_OK);
  ck_assert_int_eq(tj_cache_verify(c, 0, count_bad, &seen, &bad), TJ_OK);
  ck_assert_uint_eq(bad, 2);
  ck_assert_int_eq(seen, 2);
  ck_assert_int_eq(tj_cache_verify(c, 1, NULL, NULL, &bad), TJ_OK);
  ck_assert_int_eq(tj_cache_verify(c, 0, NULL, NULL, &bad), TJ_OK);
  ck_assert_uint_eq(bad, 0);
  tj_cache_close(c);
  free(path); free(dir);
}
END_TEST

/* A blob over TJ_CACHE_MAX_CODE_BYTES with a matching hash and size: the
 * old store read and loaded it; now it is dropped unread. */
START_TEST(oversized_code_is_never_loaded)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  tj__cache *c = NULL;
  char msg[1024];
  ck_assert_int_eq(tj__cache_open(path, 0, &c, msg, sizeof msg), TJ_OK);
  size_t n = (size_t)TJ_CACHE_MAX_CODE_BYTES + 1;
  unsigned char *big = calloc(1, n);
  ck_assert_ptr_nonnull(big);
  char hash[TJ__KEY_HEX], sql[512];
  tj__hash_hex(big, n, hash);
  free(big);
  const char *key = "0000000000000000000000000000000b";
  tj__cache_row want = {key, "k", TEST_ARCH, "amd", "c", "", NULL, 0, 0, NULL, NULL};
  snprintf(sql, sizeof sql, "PRAGMA journal_mode = DELETE; INSERT INTO "
           "code_objects (key, kernel, arch, platform, compiler, options, code, "
           "code_hash, code_size, compile_ms, created, last_used) VALUES ('%s', "
           "'k', '%s', 'amd', 'c', '', zeroblob(%zu), '%s', %zu, 1, 0, 0)",
           key, TEST_ARCH, n, hash, n);
  tj__cache_close(c);
  tsql_exec(path, sql);
  ck_assert_int_eq(tj__cache_open(path, 0, &c, msg, sizeof msg), TJ_OK);
  void *code = NULL;
  size_t size = 0;
  int dropped = 0;
  ck_assert_int_eq(tj__cache_get(c, &want, &code, &size, &dropped), TJ_ENOENT);
  ck_assert_int_eq(dropped, TJ__DROP_SIZE);
  ck_assert_ptr_null(code);
  tj__cache_close(c);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM code_objects"), 0);
  unlink(path);
  free(path); free(dir);
}
END_TEST

/* ================================================================ limits */

static void fill(const char *path, int rows)
{
  tj__cache *c = NULL;
  char msg[1024], key[TJ__KEY_HEX];
  static const unsigned char code[64] = {0x7f, 'E', 'L', 'F'};
  ck_assert_int_eq(tj__cache_open(path, 0, &c, msg, sizeof msg), TJ_OK);
  for (int i = 0; i < rows; i++) {
    uint64_t id = (uint64_t)i + 1;
    tj__hash_hex(&id, sizeof id, key);
    tj__cache_row r = {key, "k", TEST_ARCH, "amd", "c", "", code, sizeof code, 1,
                       NULL, NULL};
    ck_assert_int_eq(tj__cache_put(c, &r), TJ_OK);
  }
  tj__cache_close(c);
}

/* 2^63 bytes and more was cast to a negative int64 and evicted all. */
START_TEST(size_limits_at_the_extremes)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  fill(path, 4);
  tj__cache *c = NULL;
  char msg[1024];
  uint64_t evicted = 9;
  ck_assert_int_eq(tj__cache_open(path, 0, &c, msg, sizeof msg), TJ_OK);
  const uint64_t limits[] = {UINT64_MAX, 1ull << 63, (1ull << 63) + 1,
                             (uint64_t)INT64_MAX};
  for (size_t i = 0; i < 4; i++) {
    ck_assert_int_eq(tj__cache_trim(c, -1, limits[i], &evicted), TJ_OK);
    ck_assert_msg(evicted == 0, "limit %llu evicted %llu",
                  (unsigned long long)limits[i], (unsigned long long)evicted);
  }
  ck_assert_int_eq(tj__cache_trim(c, INT64_MAX, 0, &evicted), TJ_OK);
  ck_assert_uint_eq(evicted, 0); /* nothing is that old */
  tj__cache_close(c);
  tj_cache *pc = NULL;
  ck_assert_int_eq(tj_cache_open(&pc, path, 0), TJ_OK);
  ck_assert_int_eq(tj_cache_evict(pc, INT64_MAX, UINT64_MAX, &evicted), TJ_OK);
  ck_assert_uint_eq(evicted, 0);
  ck_assert_int_eq(tj_cache_evict(pc, INT64_MIN, 1ull << 63, &evicted), TJ_OK);
  ck_assert_uint_eq(evicted, 0);
  tj_cache_close(pc);
  /* A runtime whose limit is UINT64_MAX ("no limit") keeps every row. */
  tj_options o = {0};
  o.arch = TEST_ARCH;
  o.cache_path = path;
  o.flags = TJ_NO_DEVICE;
  o.cache_max_bytes = UINT64_MAX;
  tj_runtime *rt = NULL;
  tj_kernel *k;
  ck_assert_int_eq(tj_runtime_open(&rt, &o), TJ_OK);
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_runtime_close(rt);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM code_objects"), 5);
  free(path); free(dir);
}
END_TEST

/* ================================================================ messages */

START_TEST(messages_give_safe_advice)
{
  char *dir = test_tmpdir(), *open_dir = test_path(dir, "open");
  char *path = test_path(open_dir, "cache.db"), msg[2048];
  ck_assert_int_eq(mkdir(open_dir, 0700), 0);
  ck_assert_int_eq(chmod(open_dir, 01777), 0); /* like /tmp */
  ck_assert_int_eq(open_rc(path, 0, msg, sizeof msg), TJ_EPERM);
  ck_assert_msg(!strstr(msg, "chmod"), "unsafe advice: %s", msg);
  ck_assert_msg(strstr(msg, "mkdir -m 700"), "%s", msg);
  ck_assert_int_eq(chmod(open_dir, 0770), 0);
  ck_assert_int_eq(open_rc(path, 0, msg, sizeof msg), TJ_EPERM);
  ck_assert_msg(strstr(msg, "--group"), "%s", msg);
  ck_assert_msg(!strstr(msg, "chmod"), "unsafe advice: %s", msg);
  free(path); free(open_dir); free(dir);
}
END_TEST

/* A file the system will not let us write: the message says why, not
 * "it was opened with TJ_CACHE_READONLY". */
START_TEST(readonly_reasons_are_true)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  fill(path, 1);
  int fd = open(path, O_RDONLY), flags = 0;
  int ok = fd >= 0 && ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  int old = flags;
  flags |= FS_IMMUTABLE_FL;
  ok = ok && ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
  if (fd >= 0)
    close(fd);
  if (!ok) {
    printf("security: immutable file: skipped (cannot set FS_IMMUTABLE_FL here)\n");
    free(path); free(dir);
    return;
  }
  tj_cache *c = NULL;
  int rc = tj_cache_open(&c, path, 0);
  if (rc == TJ_OK)
    rc = tj_cache_clear(c);
  char said[1024];
  snprintf(said, sizeof said, "%s", tj_cache_errmsg(c));
  tj_cache_close(c);
  fd = open(path, O_RDONLY);
  ioctl(fd, FS_IOC_SETFLAGS, &old);
  close(fd);
  ck_assert_int_eq(rc, TJ_ECACHE);
  ck_assert_msg(strstr(said, "immutable") && !strstr(said, "TJ_CACHE_READONLY"),
                "%s", said);
  ck_assert_int_eq(tsql_int(path, "SELECT count(*) FROM code_objects"), 1);
  free(path); free(dir);
}
END_TEST

/* ================================================================ races */

/* Writers store rows while this process clears, evicts, verifies and
 * repairs: every call succeeds (busy is waited on, never reported), no
 * writer fails, and the file is whole at the end. */
static void writer(const char *path, int id, int rows)
{
  tj__cache *c = NULL;
  char msg[1024], key[TJ__KEY_HEX];
  static const unsigned char code[256] = {0x7f, 'E', 'L', 'F', 1};
  if (tj__cache_open(path, 0, &c, msg, sizeof msg) != TJ_OK || !c)
    _exit(3);
  for (int i = 0; i < rows; i++) {
    uint64_t k = (uint64_t)id << 32 | (uint64_t)i;
    tj__hash_hex(&k, sizeof k, key);
    tj__cache_row r = {key, "k", TEST_ARCH, "amd", "c", "", code, sizeof code, 1,
                       NULL, NULL};
    if (tj__cache_put(c, &r) != TJ_OK || tj__cache_readonly(c))
      _exit(4);
    tj__cache_trim(c, -1, 64 * 1024, NULL);
  }
  tj__cache_close(c);
  _exit(0);
}

START_TEST(maintenance_while_others_store)
{
  char *dir = test_tmpdir(), *path = test_path(dir, "cache.db");
  fill(path, 1);
  enum { WRITERS = 3, ROWS = 300 };
  pid_t pids[WRITERS];
  for (int w = 0; w < WRITERS; w++)
    if ((pids[w] = fork()) == 0)
      writer(path, w + 1, ROWS);
  int calls = 0;
  for (int round = 0; round < 12; round++) {
    tj_cache *c = NULL;
    uint64_t n;
    ck_assert_int_eq(tj_cache_open(&c, path, 0), TJ_OK);
    int rc = round % 3 == 0 ? tj_cache_clear(c)
           : round % 3 == 1 ? tj_cache_evict(c, 0, 0, &n)
                            : tj_cache_verify(c, 1, NULL, NULL, &n);
    ck_assert_msg(rc == TJ_OK, "round %d: %s", round, tj_cache_errmsg(c));
    tj_cache_close(c);
    calls++;
  }
  for (int w = 0; w < WRITERS; w++) {
    int status = 0;
    ck_assert_int_eq(waitpid(pids[w], &status, 0), pids[w]);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d: 0x%x",
                  w, status);
  }
  tj_cache *c = NULL;
  uint64_t bad = 1;
  ck_assert_int_eq(tj_cache_open(&c, path, 0), TJ_OK);
  ck_assert_int_eq(tj_cache_verify(c, 0, NULL, NULL, &bad), TJ_OK);
  ck_assert_uint_eq(bad, 0);
  tj_cache_close(c);
  printf("security: %d maintenance calls while %d writers stored %d rows "
         "each: all succeeded, the file whole\n", calls, WRITERS, ROWS);
  free(path); free(dir);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("security");
  TCase *tc = test_case(s, "security", 300);
  tcase_add_test(tc, relative_paths_are_checked);
  tcase_add_test(tc, symlinks_are_judged_by_their_target);
  tcase_add_test(tc, side_files_are_judged);
  tcase_add_test(tc, hard_links_are_refused);
  tcase_add_test(tc, another_users_files_are_refused);
  tcase_add_test(tc, planted_files_in_a_shared_directory);
  tcase_add_test(tc, bind_mounts_are_judged_as_mounted);
  tcase_add_test(tc, only_regular_files_and_never_a_hang);
  tcase_add_test(tc, an_applications_database_is_left_alone);
  tcase_add_test(tc, damaged_unmarked_files_are_not_moved);
  tcase_add_test(tc, an_unmarked_old_cache_is_refused);
  tcase_add_test(tc, a_row_for_another_request_is_never_served);
  tcase_add_test(tc, verify_recomputes_embedded_keys);
  tcase_add_test(tc, oversized_code_is_never_loaded);
  tcase_add_test(tc, size_limits_at_the_extremes);
  tcase_add_test(tc, messages_give_safe_advice);
  tcase_add_test(tc, readonly_reasons_are_true);
  tcase_add_test(tc, maintenance_while_others_store);
  return run_suite(s);
}
