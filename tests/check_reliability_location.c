/*
 * check_reliability_location.c: hostile and shared locations, and nowhere
 * to write (a read-only home, a full disk, a directory without write
 * permission, no location at all).  Scenarios that need a private tmpfs run
 * in a child with its own mount namespace, and say "skipped" when the
 * system does not allow one.
 */
#include "reliability.h"

#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

static int open_status(const char *path, unsigned flags, char *msg, size_t len)
{
  tj_runtime *rt = NULL;
  int rc = test_open(&rt, path, flags);
  snprintf(msg, len, "%s", tj_errmsg(rt));
  tj_runtime_close(rt);
  return rc;
}

START_TEST(writable_ancestors_are_refused)
{
  char *dir = test_tmpdir(), *open_dir = test_path(dir, "open");
  char *path = test_path(open_dir, "sub/cache.db"), msg[1024];
  ck_assert_int_eq(mkdir(open_dir, 0700), 0);
  ck_assert_int_eq(chmod(open_dir, 0777), 0);
  ck_assert_int_eq(open_status(path, 0, msg, sizeof msg), TJ_EPERM);
  ck_assert_msg(strstr(msg, "writable by everyone"), "%s", msg);
  ck_assert_int_eq(chmod(open_dir, 01777), 0); /* sticky, as /tmp is */
  ck_assert_int_eq(open_status(path, 0, msg, sizeof msg), TJ_OK);
  free(path); free(open_dir); free(dir);
}
END_TEST

START_TEST(other_owners_are_refused_unless_group_sharing)
{
  char *dir = test_tmpdir(), *sub = test_path(dir, "theirs");
  char *path = test_path(sub, "cache.db"), msg[1024];
  ck_assert_int_eq(mkdir(sub, 0700), 0);
  if (geteuid() != 0 || chown(sub, 65534, 65534) != 0) {
    printf("reliability: ownership by another user: skipped, needs root to chown\n");
    free(path); free(sub); free(dir);
    return;
  }
  ck_assert_int_eq(open_status(path, 0, msg, sizeof msg), TJ_EPERM);
  ck_assert_msg(strstr(msg, "directory") && strstr(msg, "owned by uid 65534"), "%s", msg);
  /* A group cache: another member's directory and file, in our group. */
  ck_assert_int_eq(chown(sub, 65534, getegid()), 0);
  ck_assert_int_eq(chmod(sub, 0770), 0);
  ck_assert_int_eq(open_status(path, 0, msg, sizeof msg), TJ_EPERM);
  ck_assert_int_eq(open_status(path, TJ_CACHE_GROUP, msg, sizeof msg), TJ_OK);
  ck_assert_int_eq(chown(path, 65534, getegid()), 0);
  ck_assert_int_eq(open_status(path, TJ_CACHE_GROUP, msg, sizeof msg), TJ_OK);
  ck_assert_int_eq(open_status(path, 0, msg, sizeof msg), TJ_EPERM);
  ck_assert_msg(strstr(msg, "owned by uid 65534"), "%s", msg);
  /* Not in our group: refused even when sharing. */
  ck_assert_int_eq(chown(path, 65534, 65534), 0);
  ck_assert_int_eq(open_status(path, TJ_CACHE_GROUP, msg, sizeof msg), TJ_EPERM);
  ck_assert_msg(strstr(msg, "nor by one of your groups"), "%s", msg);
  free(path); free(sub); free(dir);
}
END_TEST

/* A group cache is writable by the group whatever the umask. */
START_TEST(group_cache_modes_ignore_the_umask)
{
  char *dir = test_tmpdir(), *sub = test_path(dir, "shared");
  char *path = test_path(sub, "cache.db");
  mode_t old = umask(077);
  tj_runtime *rt = rel_open(path, TEST_ARCH, TJ_CACHE_GROUP);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  umask(old);
  struct stat st;
  char side[4096];
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0660);
  snprintf(side, sizeof side, "%s-wal", path);
  ck_assert_int_eq(stat(side, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0660);
  snprintf(side, sizeof side, "%s.lock", path);
  ck_assert_int_eq(stat(side, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0660);
  ck_assert_int_eq(stat(sub, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0770);
  tj_runtime_close(rt);
  free(path); free(sub); free(dir);
}
END_TEST

/* ================================================================ 6. nowhere */

typedef int (*scenario)(const char *mnt);

/* Run fn in a child with its own mount namespace and a tmpfs of the given
 * options at a fresh directory: nothing leaks to the host.  Says so and
 * returns when the system allows no mounts. */
static void in_private_tmpfs(const char *label, const char *options, scenario fn)
{
  fflush(stdout);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    char *dir = test_tmpdir();
    if (unshare(CLONE_NEWNS) != 0 ||
        mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", dir, "tmpfs", 0, options) != 0)
      _exit(77);
    int rc = fn(dir);
    free(dir);
    _exit(rc);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    printf("reliability: %s: skipped, no tmpfs can be mounted here (needs "
           "CAP_SYS_ADMIN in a mount namespace)\n", label);
    return;
  }
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "%s failed (status 0x%x); the log says why", label, status);
  printf("reliability: %s: kernels compiled, one warning\n", label);
}

static int remount_readonly(const char *mnt)
{
  return mount("tmpfs", mnt, "tmpfs", MS_REMOUNT | MS_RDONLY, NULL);
}

/* Compile add_i32 and gelu_fwd_f16 with no new warning after the first. */
static int compiles_quietly_after_warning(tj_runtime *rt, const char *must_say)
{
  tj_kernel *k;
  CHILD_CHECK(tj_errmsg(rt)[0], "no warning");
  CHILD_CHECK(!must_say || strstr(tj_errmsg(rt), must_say), "warning '%s' lacks '%s'",
              tj_errmsg(rt), must_say);
  rel_set_sentinel(rt);
  CHILD_CHECK(tj_kernel_get(rt, "add_i32", &k) == TJ_OK, "add_i32: %s", tj_errmsg(rt));
  CHILD_CHECK(tj_kernel_get(rt, "gelu_fwd_f16", &k) == TJ_OK, "gelu: %s", tj_errmsg(rt));
  CHILD_CHECK(rel_no_new_warning(rt), "a second warning: %s", tj_errmsg(rt));
  return 0;
}

static int readonly_home(const char *mnt)
{
  char home[4096];
  snprintf(home, sizeof home, "%s/home", mnt);
  CHILD_CHECK(mkdir(home, 0700) == 0, "mkdir %s", home);
  CHILD_CHECK(remount_readonly(mnt) == 0, "remount: %s", strerror(errno));
  setenv("HOME", home, 1);
  unsetenv("XDG_CACHE_HOME");
  unsetenv("TOKITAI_JIT_CACHE");
  tj_runtime *rt = rel_open(NULL, TEST_ARCH, 0);
  CHILD_CHECK(rt, "no runtime");
  CHILD_CHECK(!tj_runtime_cache_path(rt), "a cache in a read-only home?");
  int rc = compiles_quietly_after_warning(rt, "Read-only file system");
  tj_runtime_close(rt);
  return rc;
}

/* A cache filled while writable, then its file system remounted read-only:
 * what it holds is used, new kernels compile, one warning.  What it holds
 * is read from its code files, which need nothing written, so the warning
 * comes with the first compile, when the SQLite file is opened to store
 * it. */
static int readonly_cache(const char *mnt)
{
  char path[4096];
  tj_kernel *k;
  tj_kernel_info info;
  snprintf(path, sizeof path, "%s/c/cache.db", mnt);
  tj_runtime *rt = rel_open(path, TEST_ARCH, 0);
  CHILD_CHECK(rt && tj_kernel_get(rt, "add_i32", &k) == TJ_OK, "filling");
  tj_runtime_close(rt);
  CHILD_CHECK(remount_readonly(mnt) == 0, "remount: %s", strerror(errno));
  rt = rel_open(path, TEST_ARCH, 0);
  CHILD_CHECK(rt, "no runtime");
  CHILD_CHECK(tj_kernel_get(rt, "add_i32", &k) == TJ_OK, "add_i32");
  tj_kernel_get_info(k, &info);
  CHILD_CHECK(info.origin == TJ_FROM_CACHE, "add_i32 not read from the cache");
  CHILD_CHECK(!tj_errmsg(rt)[0], "a warning before any write: %s",
              tj_errmsg(rt));
  CHILD_CHECK(tj_kernel_get(rt, "gelu_bwd_f16", &k) == TJ_OK, "gelu_bwd: %s",
              tj_errmsg(rt));
  int rc = compiles_quietly_after_warning(rt, "cannot be written");
  tj_runtime_close(rt);
  return rc;
}

/* Fill the file system up: 4 KiB writes until ENOSPC. */
static int fill_up(const char *mnt)
{
  char path[4096], block[4096] = {0};
  snprintf(path, sizeof path, "%s/filler", mnt);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0)
    return -1;
  while (write(fd, block, sizeof block) == (ssize_t)sizeof block)
    ;
  int e = errno;
  close(fd);
  return e == ENOSPC ? 0 : -1;
}

/* The disk fills while the runtime has its cache open: the store fails,
 * the kernel is still good, and once there is room the cache works. */
static int disk_full_while_storing(const char *mnt)
{
  char path[4096], filler[4096];
  snprintf(path, sizeof path, "%s/c/cache.db", mnt);
  snprintf(filler, sizeof filler, "%s/filler", mnt);
  size_t ref_n;
  unsigned char *ref = rel_reference_code(&ref_n);
  tj_runtime *rt = rel_open(path, TEST_ARCH, 0);
  CHILD_CHECK(ref && rt && !tj_errmsg(rt)[0], "open: %s", rt ? tj_errmsg(rt) : "");
  CHILD_CHECK(fill_up(mnt) == 0, "could not fill the tmpfs");
  CHILD_CHECK(rel_get_reference(rt, ref, ref_n) == TJ_FROM_COMPILER, "add_i32");
  CHILD_CHECK(strstr(tj_errmsg(rt), "full"), "warning: '%s'", tj_errmsg(rt));
  rel_set_sentinel(rt);
  tj_kernel *k;
  CHILD_CHECK(tj_kernel_get(rt, "gelu_fwd_f16", &k) == TJ_OK, "gelu");
  CHILD_CHECK(rel_no_new_warning(rt), "a second warning: %s", tj_errmsg(rt));
  tj_runtime_close(rt);
  unlink(filler);
  char integrity[256];
  CHILD_CHECK(tsql_integrity(path, integrity, sizeof integrity), "%s", integrity);
  for (int round = 0; round < 2; round++) { /* stored now, then read */
    rt = rel_open(path, TEST_ARCH, 0);
    CHILD_CHECK(rt && !tj_errmsg(rt)[0], "reopen: %s", rt ? tj_errmsg(rt) : "");
    int origin = rel_get_reference(rt, ref, ref_n);
    CHILD_CHECK(origin == (round ? TJ_FROM_CACHE : TJ_FROM_COMPILER), "round %d", round);
    tj_runtime_close(rt);
  }
  free(ref);
  return 0;
}

static int disk_full_before_open(const char *mnt)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/sub/cache.db", mnt);
  CHILD_CHECK(fill_up(mnt) == 0, "could not fill the tmpfs");
  tj_runtime *rt = rel_open(path, TEST_ARCH, 0);
  CHILD_CHECK(rt, "no runtime");
  int rc = compiles_quietly_after_warning(rt, NULL);
  tj_runtime_close(rt);
  return rc;
}

START_TEST(nowhere_to_write)
{
  in_private_tmpfs("read-only home", "size=1m", readonly_home);
  in_private_tmpfs("read-only file system under a filled cache", "size=4m",
                   readonly_cache);
  in_private_tmpfs("disk full while storing (256 KiB tmpfs)", "size=256k",
                   disk_full_while_storing);
  in_private_tmpfs("disk full before opening (256 KiB tmpfs)", "size=256k",
                   disk_full_before_open);
}
END_TEST

/* A directory we may not write, made to bite even for root by running as
 * nobody in a child. */
static int unwritable_dir(const char *dir)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/cache.db", dir);
  tj_runtime *rt = rel_open(path, TEST_ARCH, 0);
  CHILD_CHECK(rt, "no runtime");
  CHILD_CHECK(!tj_runtime_cache_path(rt), "a cache in a read-only directory?");
  int rc = compiles_quietly_after_warning(rt, "Permission denied");
  tj_runtime_close(rt);
  return rc;
}

START_TEST(directory_without_write_permission)
{
  char *dir = test_tmpdir(), *ro = test_path(dir, "ro");
  ck_assert_int_eq(mkdir(ro, 0700), 0);
  int as_nobody = geteuid() == 0;
  if (as_nobody) { /* root writes anywhere: be nobody, if this system has one */
    ck_assert_int_eq(chmod(dir, 0755), 0);
    as_nobody = chown(ro, 65534, 65534) == 0;
    if (!as_nobody) {
      printf("reliability: directory mode 0500: skipped, cannot give it to uid 65534\n");
      free(ro); free(dir);
      return;
    }
  }
  ck_assert_int_eq(chmod(ro, 0500), 0);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    if (as_nobody && (setgroups(0, NULL) != 0 || setgid(65534) != 0 ||
                      setuid(65534) != 0))
      _exit(77);
    int rc = unwritable_dir(ro);
    free(ro); free(dir);
    _exit(rc);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    printf("reliability: directory mode 0500: skipped, cannot become uid 65534\n");
    free(ro); free(dir);
    return;
  }
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
  printf("reliability: directory mode 0500%s: kernels compiled, one warning\n",
         as_nobody ? " (as uid 65534)" : "");
  free(ro); free(dir);
}
END_TEST

/* No location at all: the runtime says so once and works. */
START_TEST(no_cache_location_at_all)
{
  unsetenv("TOKITAI_JIT_CACHE");
  unsetenv("XDG_CACHE_HOME");
  unsetenv("HOME");
  tj_runtime *rt = rel_open(NULL, TEST_ARCH, 0);
  ck_assert_ptr_nonnull(rt);
  ck_assert_ptr_null(tj_runtime_cache_path(rt));
  ck_assert_msg(strstr(tj_errmsg(rt), "without a cache"), "%s", tj_errmsg(rt));
  rel_set_sentinel(rt);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  ck_assert(rel_no_new_warning(rt));
  tj_stats st;
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.compiles, 1);    /* the in-memory table serves it */
  ck_assert_uint_eq(st.memory_hits, 1);
  tj_runtime_close(rt);
}
END_TEST

int main(void)
{
  const rel_case cases[] = {
    {"hostile", {writable_ancestors_are_refused,
                 other_owners_are_refused_unless_group_sharing,
                 group_cache_modes_ignore_the_umask}},
    {"nowhere", {nowhere_to_write,
                 directory_without_write_permission,
                 no_cache_location_at_all}},
  };
  return rel_main("reliability_location", cases, sizeof cases / sizeof *cases);
}
