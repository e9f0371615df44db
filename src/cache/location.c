/*
 * location.c: where the cache lives, and whether it is safe to trust.
 *
 * Whoever can write the cache chooses the code that runs on our GPU, and
 * SQLite opens four files by name: the database, its -wal and -shm (or a
 * -journal), and our own .lock.  The argument that none of them can be
 * another user's:
 *
 *  1. The path is made absolute and its directory resolved (realpath), so
 *     that "cache.db", "../x/cache.db" and symbolic links in the ancestors
 *     are checked as what they are.  SQLite is given the resolved path.
 *  2. The resolved directory is walked from "/" one component at a time,
 *     each opened with O_PATH|O_DIRECTORY|O_NOFOLLOW and judged by fstat on
 *     that descriptor: what is judged is what is on the path.  Every
 *     ancestor belongs to root or to us and can be renamed by no one else
 *     (not writable by others unless sticky); the cache directory itself
 *     belongs to us and nobody else may create, rename or delete entries
 *     in it (group members only with TJ_CACHE_GROUP).
 *  3. So between this check and SQLite's own open nobody else can replace
 *     a component of the path or an entry of the directory: each file can
 *     be judged by fstatat on the directory descriptor (regular, one link,
 *     ours, not writable by others) and SQLite then opens that same file.
 *
 * Existing SQLite files are looked at with fstatat, never opened here:
 * closing any descriptor of a file drops every POSIX lock this process
 * holds on it, and another connection in this process (a second runtime)
 * may hold SQLite's locks on the database or its -shm.  The header is read
 * through SQLite's own VFS, which defers such closes.  Missing -wal and -shm
 * files are left for SQLite to create: it makes them in the checked
 * directory with the database file's owner and mode.
 *
 * Also here, as facts about the place rather than the file: the default
 * path, the .lock file, and whether the file system is a network one.
 */
#include "cache_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#define ADVICE_PRIVATE                                                       \
  "keep the cache in a directory only you can write (the default, "         \
  "~/.cache/tokitai-jit, or a new one made with mkdir -m 700)"
#define ADVICE_GROUP                                                         \
  "to share it with a group, use a directory of that group with mode 2770 " \
  "and tokitai-jit --group (TJ_CACHE_GROUP in C)"

static int in_my_groups(gid_t gid)
{
  if (gid == getegid())
    return 1;
  int n = getgroups(0, NULL);
  gid_t *groups = n > 0 ? malloc((size_t)n * sizeof *groups) : NULL;
  int found = 0;
  if (groups && (n = getgroups(n, groups)) > 0)
    for (int i = 0; i < n && !found; i++)
      found = groups[i] == gid;
  free(groups);
  return found;
}

/* A user-private group (named as the user, its primary group, no other
 * listed member): its write bit lets only the user write.  Many systems
 * give home directories and ~/.cache mode 0775 with such a group. */
static int group_is_private(gid_t gid)
{
  char pbuf[4096], gbuf[8192];
  struct passwd pw, *pwp = NULL;
  struct group gr, *grp = NULL;
  if (getpwuid_r(geteuid(), &pw, pbuf, sizeof pbuf, &pwp) != 0 || !pwp ||
      getgrgid_r(gid, &gr, gbuf, sizeof gbuf, &grp) != 0 || !grp)
    return 0;
  if (pw.pw_gid != gid || strcmp(gr.gr_name, pw.pw_name) != 0)
    return 0;
  for (char **m = gr.gr_mem; *m; m++)
    if (strcmp(*m, pw.pw_name) != 0)
      return 0;
  return 1;
}

/* The effective uid, asked once per walk (a system call a directory
 * otherwise): tj__location_open sets it for its thread while it runs. */
static __thread int walk_uid_set;
static __thread uid_t walk_uid;

static uid_t my_euid(void)
{
  return walk_uid_set ? walk_uid : geteuid();
}

/* With TJ_CACHE_GROUP, the one group trusted: the cache's own (the group
 * of its directory), when it is one of ours.  Not every group we are in: a
 * member of a broader group must not be able to swap a project's cache. */
static int trusted_group(gid_t gid, unsigned flags, gid_t group)
{
  return (flags & TJ_CACHE_GROUP) && gid == group && in_my_groups(group);
}

/* An owner we trust: ourselves, root, or (TJ_CACHE_GROUP) the cache's
 * group, since the caller said that it trusts its members. */
static int trusted_owner(const struct stat *st, unsigned flags, gid_t group,
                         int root_ok)
{
  return st->st_uid == my_euid() || (root_ok && st->st_uid == 0) ||
         trusted_group(st->st_gid, flags, group);
}

/* A directory above the cache directory: nobody but root, us (or the
 * group, when shared) may rename what is in it. */
static int check_ancestor(const struct stat *st, const char *p, const char *dir,
                          unsigned flags, gid_t group, char *msg, size_t len)
{
  int sticky = (st->st_mode & S_ISVTX) != 0;
  if (!trusted_owner(st, flags, group, 1)) {
    snprintf(msg, len, "refusing cache directory %s: %s above it belongs to "
             "uid %u, who could put a directory of their own in its place; "
             ADVICE_PRIVATE, dir, p, (unsigned)st->st_uid);
    return TJ_EPERM;
  }
  if ((st->st_mode & S_IWOTH) && !sticky) {
    snprintf(msg, len, "refusing cache directory %s: %s above it is writable "
             "by everyone and not sticky, so anyone could put their own cache "
             "in its place; " ADVICE_PRIVATE, dir, p);
    return TJ_EPERM;
  }
  if ((st->st_mode & S_IWGRP) && !sticky &&
      !trusted_group(st->st_gid, flags, group) &&
      !group_is_private(st->st_gid)) {
    snprintf(msg, len, "refusing cache directory %s: %s above it is writable "
             "by group %u%s, whose members could put their own cache in its "
             "place; " ADVICE_PRIVATE ", or, " ADVICE_GROUP, dir, p,
             (unsigned)st->st_gid, (flags & TJ_CACHE_GROUP)
                 ? ", not the cache's own group" : "");
    return TJ_EPERM;
  }
  return TJ_OK;
}

/* The cache directory: ours, and nobody else may add or replace entries
 * (a -wal of their own, say), not even in a sticky directory. */
static int check_cache_dir(const struct stat *st, const char *dir,
                           unsigned flags, gid_t cache_group, char *msg,
                           size_t len)
{
  int group = (flags & TJ_CACHE_GROUP) != 0;
  if (group && st->st_gid != cache_group) {
    snprintf(msg, len, "refusing cache directory %s: its group %u is not the "
             "cache's (%u), the one group a shared cache trusts (it changed "
             "while it was checked, or was made without mode 2770)", dir,
             (unsigned)st->st_gid, (unsigned)cache_group);
    return TJ_EPERM;
  }
  if (!trusted_owner(st, flags, cache_group, 0)) {
    snprintf(msg, len, "refusing cache directory %s: owned by uid %u, not by "
             "you (uid %u)%s; its owner could choose the code that runs on "
             "your GPU; " ADVICE_PRIVATE, dir, (unsigned)st->st_uid,
             (unsigned)geteuid(), group ? " nor by one of your groups" : "");
    return TJ_EPERM;
  }
  if (st->st_mode & (S_IWOTH | (group ? 0 : S_IWGRP))) {
    snprintf(msg, len, "refusing cache directory %s: its mode %04o lets other "
             "users create files in it, and so choose the code that runs on "
             "your GPU; " ADVICE_PRIVATE "%s", dir,
             (unsigned)(st->st_mode & 07777),
             group || (st->st_mode & S_IWOTH) ? "" : ", or, " ADVICE_GROUP);
    return TJ_EPERM;
  }
  return TJ_OK;
}

/* With TJ_CACHE_GROUP and TOKITAI_JIT_CACHE_GROUP set (a group's name or
 * number), the cache's group must be that one.  Without it the trusted
 * group is whatever group the cache directory has, so a member of a
 * broader group who may write the directory above could put a cache of
 * that group in its place; the pin says which group is meant. */
static int check_pinned_group(gid_t group, unsigned flags, const char *dir,
                              char *msg, size_t len)
{
  const char *pin = getenv("TOKITAI_JIT_CACHE_GROUP");
  if (!(flags & TJ_CACHE_GROUP) || !pin || !*pin)
    return TJ_OK;
  char buf[4096], *end;
  struct group gr, *g = NULL;
  unsigned long n = strtoul(pin, &end, 10);
  gid_t want = (gid_t)-1;
  if (*end == '\0' && end != pin && n < (unsigned long)(gid_t)-1)
    want = (gid_t)n;
  else if (getgrnam_r(pin, &gr, buf, sizeof buf, &g) == 0 && g)
    want = g->gr_gid;
  if (want == (gid_t)-1) {
    snprintf(msg, len, "TOKITAI_JIT_CACHE_GROUP=%s names no group; give a "
             "group's name or number", pin);
    return TJ_EPERM;
  }
  if (group != want) {
    snprintf(msg, len, "refusing cache directory %s: its group %u is not "
             "%s (%u), the group TOKITAI_JIT_CACHE_GROUP says the cache "
             "belongs to; someone who may write the directory above could "
             "have put their own in its place", dir, (unsigned)group, pin,
             (unsigned)want);
    return TJ_EPERM;
  }
  return TJ_OK;
}

int tj__location_check_dir(const struct stat *st, const char *dir,
                           unsigned flags, gid_t group, char *msg, size_t len)
{
  return check_cache_dir(st, dir, flags, group, msg, len);
}

static const char *kind_of(mode_t m)
{
  return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO"
       : S_ISSOCK(m) ? "a socket" : S_ISCHR(m) ? "a character device"
       : S_ISBLK(m) ? "a block device" : S_ISLNK(m) ? "a symbolic link"
       : "not a regular file";
}

int tj__location_check_file(const struct stat *st, const char *path,
                            unsigned flags, gid_t group_id, char *msg,
                            size_t len)
{
  int group = (flags & TJ_CACHE_GROUP) != 0;
  if (S_ISDIR(st->st_mode)) {
    snprintf(msg, len, "cache %s is a directory; give a file path (for "
             "example %s/cache.db)", path, path);
    return TJ_ECACHE;
  }
  if (S_ISLNK(st->st_mode)) {
    snprintf(msg, len, "refusing cache file %s: it is a symbolic link; give "
             "the path of the file itself", path);
    return TJ_EPERM;
  }
  if (!S_ISREG(st->st_mode)) {
    snprintf(msg, len, "cache %s is %s, not a regular file; give the path of "
             "a cache file", path, kind_of(st->st_mode));
    return TJ_ECACHE;
  }
  /* No name at all is a file removed or replaced (the mover's side files,
   * a code file written again) after it was looked up: nobody can reach it
   * by name any more, and what it holds is what it held.  Refusing it
   * refused a good cache: a -wal removed by the process moving a corrupt
   * file aside, between another's lookup and its stat (once in CI, once in
   * about 30,000 opens of 16 processes racing here under load). */
  if (st->st_nlink > 1) {
    snprintf(msg, len, "refusing cache file %s: it has %lu names (hard "
             "links), and the library makes files with one; another name may "
             "let someone else replace what it holds; remove it (rm '%s')",
             path, (unsigned long)st->st_nlink, path);
    return TJ_EPERM;
  }
  if (!trusted_owner(st, flags, group_id, 0)) {
    snprintf(msg, len, "refusing cache file %s: owned by uid %u, not by you "
             "(uid %u)%s; its owner could choose the code that runs on your "
             "GPU", path, (unsigned)st->st_uid, (unsigned)geteuid(),
             group ? " nor by one of your groups, the cache directory's" : "");
    return TJ_EPERM;
  }
  if (group && st->st_gid != group_id) {
    snprintf(msg, len, "refusing cache file %s: its group %u is not the cache "
             "directory's (%u), the one group a shared cache trusts; give "
             "the directory mode 2770 so that files take its group, and "
             "remove this one (rm '%s')", path, (unsigned)st->st_gid,
             (unsigned)group_id, path);
    return TJ_EPERM;
  }
  if (st->st_mode & (S_IWOTH | (group ? 0 : S_IWGRP))) {
    snprintf(msg, len, "refusing cache file %s: mode %04o lets other users "
             "write it, so what it holds may be theirs; remove it (rm '%s') "
             "and a new one is made%s", path, (unsigned)(st->st_mode & 07777),
             path, group || (st->st_mode & S_IWOTH) ? "" : "; " ADVICE_GROUP);
    return TJ_EPERM;
  }
  return TJ_OK;
}

gid_t tj__location_dir_group(int dirfd)
{
  struct stat st;
  return dirfd >= 0 && fstat(dirfd, &st) == 0 ? st.st_gid : (gid_t)-1;
}

/* ------------------------------------------------------- FUSE */

/* The uid that mounted the FUSE file system of device dev, from its
 * user_id= option in /proc/self/mountinfo; -1 when it does not say. */
static long fuse_mounter(dev_t dev)
{
  FILE *f = fopen("/proc/self/mountinfo", "re");
  char line[4096], want[32];
  long uid = -1;
  snprintf(want, sizeof want, " %u:%u ", major(dev), minor(dev));
  while (f && uid < 0 && fgets(line, sizeof line, f)) {
    const char *at = strstr(line, want), *sep = strstr(line, " - fuse");
    const char *opt = sep ? strstr(sep, "user_id=") : NULL;
    if (at && sep && at < sep && opt)
      uid = strtol(opt + 8, NULL, 10);
  }
  if (f)
    fclose(f);
  return uid;
}

int tj__location_fuse_verdict(unsigned long fs_type, long mounter, uid_t me,
                              int trusted)
{
  if (fs_type != TJ__FUSE_MAGIC)
    return TJ_OK;
  if (mounter != (long)me && mounter != 0)
    return TJ_EPERM; /* another user's (or nobody says whose) */
  return trusted ? TJ_OK : TJ_EPERM;
}

/* The directory at fd, last of the walk: on FUSE the owners and modes are
 * whatever the file system's process says, so its code is another user's
 * unless we or root mounted it and TOKITAI_JIT_TRUST_FUSE=1 says to
 * believe it. */
static int check_fuse(int fd, const char *dir, char *msg, size_t len)
{
  struct statfs fs;
  struct stat st;
  if (fstatfs(fd, &fs) != 0 ||
      (unsigned long)(unsigned)fs.f_type != TJ__FUSE_MAGIC)
    return TJ_OK;
  const char *env = getenv("TOKITAI_JIT_TRUST_FUSE");
  long mounter = fstat(fd, &st) == 0 ? fuse_mounter(st.st_dev) : -1;
  int rc = tj__location_fuse_verdict((unsigned long)(unsigned)fs.f_type,
                                     mounter, my_euid(),
                                     env && strcmp(env, "1") == 0);
  if (rc != TJ_OK && mounter != (long)my_euid() && mounter != 0)
    snprintf(msg, len, "refusing cache directory %s: it is on a FUSE file "
             "system mounted by uid %ld, which says who owns each file; its "
             "code could be theirs", dir, mounter);
  else if (rc != TJ_OK)
    snprintf(msg, len, "refusing cache directory %s: it is on a FUSE file "
             "system, whose process says who owns each file; if you trust "
             "it, set TOKITAI_JIT_TRUST_FUSE=1", dir);
  return rc;
}

/* ------------------------------------------------------- the path */

/* path made absolute, split into its directory and its last name. */
static int split(const char *path, char **dir, char **name, char *msg,
                 size_t len)
{
  char *abs = NULL, cwd[PATH_MAX];
  if (path[0] == '/')
    abs = strdup(path);
  else if (getcwd(cwd, sizeof cwd) && asprintf(&abs, "%s/%s", cwd, path) < 0)
    abs = NULL;
  if (!abs) {
    snprintf(msg, len, "cache %s: cannot make the path absolute: %s", path,
             strerror(errno));
    return errno == ENOMEM ? TJ_ENOMEM : TJ_EIO;
  }
  char *slash = strrchr(abs, '/');
  const char *last = slash + 1;
  if (!*last || strcmp(last, ".") == 0 || strcmp(last, "..") == 0) {
    snprintf(msg, len, "cache %s is a directory; give a file path (for "
             "example %s%scache.db)", path, path, *last ? "/" : "");
    free(abs);
    return TJ_ECACHE;
  }
  *name = strdup(last);
  *slash = '\0';
  *dir = abs[0] ? abs : (free(abs), strdup("/"));
  if (!*name || !*dir) {
    free(*name);
    free(*dir);
    return TJ_ENOMEM;
  }
  return TJ_OK;
}

/* Walk the resolved directory dir from "/", checking each ancestor and,
 * unless all_ancestors, the last one as the cache directory.  Returns the
 * open O_PATH descriptor of dir in *out (or -1). */
static int walk(const char *dir, const char *cache_dir, int all_ancestors,
                unsigned flags, gid_t group, int *out, char *msg, size_t len)
{
  *out = -1;
  char *here = malloc(strlen(dir) + 2), comp[NAME_MAX + 1];
  if (!here)
    return TJ_ENOMEM;
  strcpy(here, "/");
  const char *rest = dir + 1;
  int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  int rc = fd >= 0 ? TJ_OK : TJ_EIO;
  while (rc == TJ_OK) {
    struct stat st;
    int last = *rest == '\0';
    if (fstat(fd, &st) != 0) {
      rc = TJ_EIO;
      break;
    }
    rc = last && !all_ancestors
             ? check_cache_dir(&st, here, flags, group, msg, len)
             : check_ancestor(&st, here, cache_dir, flags, group, msg, len);
    if (rc == TJ_OK && last)
      rc = check_fuse(fd, cache_dir, msg, len);
    size_t n = strcspn(rest, "/");
    if (rc != TJ_OK || last)
      break;
    if (n > NAME_MAX) {
      errno = ENAMETOOLONG;
      rc = TJ_EIO;
      break;
    }
    memcpy(comp, rest, n);
    comp[n] = '\0';
    int child = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(fd);
    if ((fd = child) < 0) {
      snprintf(msg, len, "refusing cache directory %s: it changed while it "
               "was being checked (%s)", cache_dir, strerror(errno));
      rc = TJ_EPERM;
      break;
    }
    size_t h = strlen(here);
    if (h > 1)
      here[h++] = '/';
    memcpy(here + h, comp, n + 1);
    rest += n + (rest[n] == '/');
  }
  free(here);
  if (rc == TJ_OK && fd >= 0) {
    *out = fd;
    return TJ_OK;
  }
  if (fd >= 0)
    close(fd);
  if (rc == TJ_EIO)
    snprintf(msg, len, "cannot check cache directory %s: %s", cache_dir,
             strerror(errno));
  return rc;
}

/* mkdir -p below the deepest existing ancestor, which is checked first so
 * that nothing is made in a place we would refuse.  Each new directory
 * gets exactly mode, whatever the umask. */
static int make_dirs(const char *dir, unsigned flags, char *msg, size_t len)
{
  /* setgid for a shared cache: what is made in it takes its group */
  mode_t mode = (flags & TJ_CACHE_GROUP) ? 02770 : 0700;
  char *p = strdup(dir), *slash;
  struct stat st;
  int rc = TJ_OK;
  if (!p)
    return TJ_ENOMEM;
  while (stat(p, &st) != 0 && errno == ENOENT && (slash = strrchr(p, '/')))
    slash[slash == p] = '\0';
  char *real = realpath(p, NULL);
  int fd = -1;
  if (!real) {
    snprintf(msg, len, "cannot create cache directory %s: %s", dir,
             strerror(errno));
    rc = TJ_EIO;
  } else if (strcmp(p, dir) != 0) {
    /* What is made below takes this directory's group (mode 2770) */
    rc = walk(real, dir, 1, flags, st.st_gid, &fd, msg, len);
  }
  if (fd >= 0)
    close(fd);
  size_t n = strcmp(p, "/") == 0 ? 0 : strlen(p);
  while (rc == TJ_OK && n < strlen(dir)) {
    n += strcspn(dir + n + 1, "/") + 1;
    memcpy(p, dir, n);
    p[n] = '\0';
    int made = mkdir(p, mode) == 0;
    if ((!made && errno != EEXIST) || (made && chmod(p, mode) != 0)) {
      snprintf(msg, len, "cannot create cache directory %s: %s", p,
               strerror(errno));
      rc = TJ_EIO;
    }
  }
  free(real);
  free(p);
  return rc;
}

/* ------------------------------------------------------- the files */

/* The first 100 bytes of the database, read through SQLite's VFS (see the
 * top of this file).  Returns the number of bytes read, -1 on failure. */
static int read_header(const char *path, unsigned char *h, int n)
{
  sqlite3_vfs *vfs = sqlite3_vfs_find(NULL);
  size_t plen = strlen(path);
  char *name = calloc(1, plen + 3); /* the VFS reads past the NUL for URIs */
  sqlite3_file *f = vfs ? calloc(1, (size_t)vfs->szOsFile) : NULL;
  int got = -1, out = 0;
  if (name && f) {
    memcpy(name, path, plen);
    if (vfs->xOpen(vfs, name, f, SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_READONLY,
                   &out) == SQLITE_OK) {
      sqlite3_int64 size = 0;
      if (f->pMethods->xFileSize(f, &size) == SQLITE_OK) {
        got = size < n ? (int)size : n;
        if (got > 0 && f->pMethods->xRead(f, h, got, 0) != SQLITE_OK)
          got = -1;
      }
      f->pMethods->xClose(f);
    }
  }
  free(f);
  free(name);
  return got;
}

/*
 * The files this process has SQLite connections on, which may hold POSIX
 * locks on them (connect_db and the probe, open.c, say so here).  A
 * header read through SQLite's VFS costs ten system calls, the biggest
 * share of a warm start's location check; a plain open, read and close
 * costs four, but its close would drop every POSIX lock this process
 * holds on the file.  So the plain read is taken only under this lock,
 * for a file no connection of this process has open; the connections
 * register under it before they open.  A descriptor that turns out to be
 * of a held file (replaced under us by one this process has open) is
 * parked until that file is let go, as SQLite parks its own.
 */
#define HELD_MAX 32
#define PARKED_MAX 4
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static struct held_file {
  dev_t dev;
  ino_t ino;
  int n;                  /* connections open on it */
  int parked[PARKED_MAX]; /* descriptors to close once n is 0 */
  int nparked;
} held[HELD_MAX];
static int held_full; /* more files than slots: always read through SQLite */

static struct held_file *held_find(dev_t dev, ino_t ino)
{
  for (int i = 0; i < HELD_MAX; i++)
    if ((held[i].n > 0 || held[i].nparked > 0) && held[i].dev == dev &&
        held[i].ino == ino)
      return &held[i];
  return NULL;
}

void tj__location_hold(dev_t dev, ino_t ino, int delta)
{
  pthread_mutex_lock(&held_lock);
  struct held_file *h = held_find(dev, ino);
  for (int i = 0; !h && delta > 0 && i < HELD_MAX; i++)
    if (held[i].n == 0 && held[i].nparked == 0) {
      h = &held[i];
      h->dev = dev;
      h->ino = ino;
    }
  if (!h && delta > 0)
    held_full = 1;
  if (h) {
    h->n += delta;
    if (h->n <= 0) {
      h->n = 0;
      while (h->nparked > 0)
        close(h->parked[--h->nparked]);
    }
  }
  pthread_mutex_unlock(&held_lock);
}

/* read_header without SQLite when no connection of ours holds the file. */
static int read_header_quick(const tj__location *loc, unsigned char *h, int n)
{
  pthread_mutex_lock(&held_lock);
  if (held_full || (loc->dev == 0 && loc->ino == 0) ||
      held_find(loc->dev, loc->ino)) {
    pthread_mutex_unlock(&held_lock);
    return read_header(loc->path, h, n);
  }
  int fd = loc->dirfd >= 0
               ? openat(loc->dirfd, loc->name,
                        O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
               : open(loc->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  ssize_t got = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)
                    ? pread(fd, h, (size_t)n, 0) : -1;
  struct held_file *other = fd >= 0 && got >= 0 ? held_find(st.st_dev, st.st_ino)
                                                : NULL;
  if (other && other->nparked < PARKED_MAX)
    other->parked[other->nparked++] = fd;
  else if (fd >= 0 && !other)
    close(fd);
  /* else: a descriptor of a held file with no room to park it stays open
   * for the life of the process rather than drop that file's locks */
  pthread_mutex_unlock(&held_lock);
  return (int)got;
}

/* Fills loc's header, appid and wal from the file's first 100 bytes. */
static void classify_header(tj__location *loc)
{
  unsigned char h[100];
  loc->appid = 0;
  loc->wal = 0;
  loc->header = TJ__HEADER_EMPTY;
  if (loc->size == 0)
    return;
  loc->header = TJ__HEADER_NOT_SQLITE;
  if (loc->size < (off_t)sizeof h) /* SQLite itself takes 1 byte for empty */
    return;
  int n = read_header_quick(loc, h, sizeof h);
  if (n < (int)sizeof h || memcmp(h, "SQLite format 3", 16) != 0) {
    loc->header = n < 0 ? TJ__HEADER_UNREADABLE : TJ__HEADER_NOT_SQLITE;
    return;
  }
  loc->appid = (uint32_t)h[68] << 24 | (uint32_t)h[69] << 16 |
               (uint32_t)h[70] << 8 | h[71];
  /* The file format's read and write versions: 2 for WAL, 1 for legacy. */
  loc->wal = h[18] == 2 && h[19] == 2;
  loc->header = loc->appid == TJ__CACHE_APP_ID ? TJ__HEADER_OURS
              : loc->appid == 0 ? TJ__HEADER_UNMARKED : TJ__HEADER_FOREIGN;
}

/* Why a file we may not write is read-only, for messages. */
static void readonly_reason(int dirfd, const char *name, char *why, size_t len)
{
  struct statvfs vfs;
  why[0] = '\0';
  if (faccessat(dirfd, name, W_OK, AT_EACCESS) == 0)
    return;
  int e = errno;
  if (e == EROFS || (fstatvfs(dirfd, &vfs) == 0 && (vfs.f_flag & ST_RDONLY)))
    snprintf(why, len, "it is on a read-only file system");
  else if (e == EPERM)
    snprintf(why, len, "the file is immutable or append-only (chattr)");
  else
    snprintf(why, len, "you may not write it (%s)", strerror(e));
}

/* The database file: created (exactly mode) when absent and allowed, and
 * judged. */
static int check_database(int dirfd, tj__location *loc, unsigned flags,
                          char *msg, size_t len)
{
  mode_t mode = (flags & TJ_CACHE_GROUP) ? 0660 : 0600;
  struct stat st;
  for (int attempt = 0; attempt < 4; attempt++) {
    if (fstatat(dirfd, loc->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
      int rc = tj__location_check_file(&st, loc->path, flags,
                                       tj__location_dir_group(dirfd), msg, len);
      if (rc != TJ_OK)
        return rc;
      loc->dev = st.st_dev;
      loc->ino = st.st_ino;
      loc->size = st.st_size;
      if (!(flags & TJ__LOCATION_QUICK))
        readonly_reason(dirfd, loc->name, loc->readonly_why,
                        sizeof loc->readonly_why);
      return TJ_OK;
    }
    if (errno != ENOENT) {
      snprintf(msg, len, "cannot read cache %s: %s", loc->path, strerror(errno));
      return TJ_EIO;
    }
    if (flags & TJ_CACHE_READONLY) {
      snprintf(msg, len, "no cache at %s", loc->path);
      return TJ_ENOENT;
    }
    /* Closed at once: a brand-new file that no connection has open yet. */
    int fd = openat(dirfd, loc->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
                    O_CLOEXEC, mode);
    if (fd < 0 && errno == EEXIST)
      continue; /* another process made it: judge theirs */
    if (fd < 0 || fchmod(fd, mode) != 0 || /* the umask */
        ((flags & TJ_CACHE_GROUP) &&
         fchown(fd, (uid_t)-1, tj__location_dir_group(dirfd)) != 0)) {
      snprintf(msg, len, "cannot create cache file %s: %s", loc->path,
               strerror(errno));
      if (fd >= 0)
        close(fd);
      return TJ_EIO;
    }
    close(fd);
  }
  snprintf(msg, len, "cache %s keeps changing under us", loc->path);
  return TJ_EIO;
}

int tj__location_check_side_files(const tj__location *loc, unsigned flags,
                                  char *msg, size_t len)
{
  static const char *const sides[] = {"-wal", "-shm", "-journal", ".lock"};
  char name[NAME_MAX + 16], path[PATH_MAX + 16];
  /* The directory as walked and judged, when tj__location_open kept it. */
  int dirfd = loc->dirfd >= 0 ? loc->dirfd
            : open(loc->dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int rc = dirfd >= 0 ? TJ_OK : TJ_EIO;
  for (size_t i = 0; rc == TJ_OK && i < sizeof sides / sizeof sides[0]; i++) {
    struct stat st;
    snprintf(name, sizeof name, "%s%s", loc->name, sides[i]);
    snprintf(path, sizeof path, "%s%s", loc->path, sides[i]);
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
      rc = tj__location_check_file(&st, path, flags,
                                   tj__location_dir_group(dirfd), msg, len);
    else if (errno != ENOENT)
      rc = TJ_EIO;
  }
  if (rc == TJ_EIO)
    snprintf(msg, len, "cannot check the files of cache %s: %s", loc->path,
             strerror(errno));
  if (dirfd >= 0 && dirfd != loc->dirfd)
    close(dirfd);
  return rc;
}

static int location_open(const char *path, unsigned flags, tj__location *loc,
                         char *msg, size_t len);

int tj__location_open(const char *path, unsigned flags, tj__location *loc,
                      char *msg, size_t len)
{
  walk_uid = geteuid();
  walk_uid_set = 1;
  int rc = location_open(path, flags, loc, msg, len);
  walk_uid_set = 0;
  return rc;
}

static int location_open(const char *path, unsigned flags, tj__location *loc,
                         char *msg, size_t len)
{
  memset(loc, 0, sizeof *loc);
  loc->dirfd = -1;
  char *dir = NULL, *name = NULL;
  int rc = split(path, &dir, &name, msg, len);
  if (rc != TJ_OK)
    return rc;
  char *real = realpath(dir, NULL);
  if (!real && errno == ENOENT && !(flags & TJ_CACHE_READONLY) &&
      (rc = make_dirs(dir, flags, msg, len)) == TJ_OK)
    real = realpath(dir, NULL);
  if (rc == TJ_OK && !real) {
    int e = errno;
    snprintf(msg, len, e == ENOENT ? "no cache at %s" : "cannot use cache "
             "directory %s: %s", dir, strerror(e));
    rc = e == ENOENT ? TJ_ENOENT : e == ENOTDIR ? TJ_ECACHE : TJ_EIO;
  }
  int dirfd = -1;
  struct stat dst;
  gid_t group = real && stat(real, &dst) == 0 ? dst.st_gid : (gid_t)-1;
  if (rc == TJ_OK)
    rc = check_pinned_group(group, flags, real, msg, len);
  if (rc == TJ_OK)
    rc = walk(real, real, 0, flags, group, &dirfd, msg, len);
  if (rc == TJ_OK) {
    loc->dir = real;
    loc->name = name;
    if (asprintf(&loc->path, "%s%s%s", real, strcmp(real, "/") ? "/" : "",
                 name) < 0) {
      loc->path = NULL;
      rc = TJ_ENOMEM;
    }
    real = NULL;
    name = NULL;
  }
  if (rc == TJ_OK)
    rc = check_database(dirfd, loc, flags, msg, len);
  if (rc == TJ_OK)
    classify_header(loc);
  if (rc == TJ_OK) {
    loc->dirfd = dirfd; /* for tj__location_check_side_files */
    dirfd = -1;
  }
  if (dirfd >= 0)
    close(dirfd);
  free(dir);
  free(real);
  free(name);
  if (rc != TJ_OK)
    tj__location_free(loc);
  return rc;
}

/* ------------------------------------------------------- system caches */

/* A system cache is read, never written, by everyone: its file must be
 * root's or ours and writable by nobody else.  Another name (a hard link,
 * as ostree deployments make) changes nothing: who may write the file is
 * the inode's mode, judged here. */
static int check_system_file(const struct stat *st, const char *path,
                             char *msg, size_t len)
{
  if (!S_ISREG(st->st_mode)) {
    snprintf(msg, len, "system cache %s is %s, not a regular file; skipped",
             path, kind_of(st->st_mode));
    return TJ_ECACHE;
  }
  if (st->st_uid != 0 && st->st_uid != geteuid()) {
    snprintf(msg, len, "refusing system cache %s: owned by uid %u, neither "
             "root nor you (uid %u), who could choose the code that runs on "
             "your GPU; skipped", path, (unsigned)st->st_uid,
             (unsigned)geteuid());
    return TJ_EPERM;
  }
  if (st->st_mode & (S_IWGRP | S_IWOTH)) {
    snprintf(msg, len, "refusing system cache %s: mode %04o lets other "
             "users write it, so what it holds may be theirs; skipped (its "
             "owner should install it read-only for others, mode 0644, or "
             "take it out of TOKITAI_JIT_SYSTEM_CACHE)", path,
             (unsigned)(st->st_mode & 07777));
    return TJ_EPERM;
  }
  return TJ_OK;
}

int tj__location_open_system(const char *path, tj__location *loc, char *msg,
                             size_t len)
{
  memset(loc, 0, sizeof *loc);
  loc->dirfd = -1;
  msg[0] = '\0';
  struct stat st;
  /* Absent is the common case: one stat, and nothing else. */
  if (stat(path, &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return TJ_ENOENT;
    snprintf(msg, len, "cannot read system cache %s: %s; skipped", path,
             strerror(errno));
    return TJ_EIO;
  }
  char *real = realpath(path, NULL), *dir = NULL, *name = NULL;
  int rc = real ? split(real, &dir, &name, msg, len) : TJ_EIO;
  int dirfd = -1;
  /* Every directory from "/" down to the file's, as ancestors: root's or
   * ours, and nobody else may rename what is in them (location.c, top). */
  if (rc == TJ_OK)
    rc = walk(dir, dir, 1, 0, (gid_t)-1, &dirfd, msg, len);
  if (rc == TJ_OK && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
    rc = TJ_EIO;
  if (rc == TJ_OK)
    rc = check_system_file(&st, real, msg, len);
  if (rc == TJ_EIO && !msg[0])
    snprintf(msg, len, "cannot read system cache %s: %s; skipped", path,
             strerror(errno));
  if (rc == TJ_OK) {
    loc->path = real;
    loc->dir = dir;
    loc->name = name;
    loc->dev = st.st_dev;
    loc->ino = st.st_ino;
    loc->size = st.st_size;
    classify_header(loc);
    snprintf(loc->readonly_why, sizeof loc->readonly_why, "it is a system "
             "cache");
    real = dir = name = NULL;
  }
  if (dirfd >= 0)
    close(dirfd);
  free(real);
  free(dir);
  free(name);
  return rc;
}

int tj__location_reread_header(tj__location *loc)
{
  struct stat st;
  if (stat(loc->path, &st) != 0 || st.st_dev != loc->dev || st.st_ino != loc->ino)
    return -1;
  loc->size = st.st_size;
  classify_header(loc);
  return 0;
}

void tj__location_free(tj__location *loc)
{
  if (loc->dirfd >= 0)
    close(loc->dirfd);
  free(loc->path);
  free(loc->dir);
  free(loc->name);
  memset(loc, 0, sizeof *loc);
  loc->dirfd = -1;
}

/* ------------------------------------------------------- the defaults */

char *tj__cache_default_path(void)
{
  const char *env = getenv("TOKITAI_JIT_CACHE");
  char *path = NULL;
  if (env && *env)
    return strdup(env);
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  if (xdg && *xdg == '/') {
    if (asprintf(&path, "%s/tokitai-jit/cache.db", xdg) < 0)
      path = NULL;
  } else if (home && *home) {
    if (asprintf(&path, "%s/.cache/tokitai-jit/cache.db", home) < 0)
      path = NULL;
  }
  return path;
}

/* WAL keeps its index in shared memory, which is coherent only between
 * processes of one host: on a network file system the cache takes a
 * rollback journal, which needs nothing but file locks. */
int tj__cache_fs_is_network(unsigned long magic)
{
  static const unsigned long network[] = {
    0x6969,     /* NFS */           0x517B,     /* SMB */
    0xFF534D42, /* CIFS */          0xFE534D42, /* SMB2 */
    0x00C36400, /* Ceph */          0x5346414F, /* AFS */
    0x6B414653, /* kAFS */          0x73757245, /* Coda */
    0x01021997, /* 9P */            TJ__FUSE_MAGIC, /* sshfs, s3fs... */
    0x0BD00BD0, /* Lustre */        0x47504653, /* GPFS */
    0x7461636F, /* OCFS2 */         0x01161970, /* GFS2 */
    0x19830326, /* BeeGFS */        0xAAD7AAEA, /* PanFS */
  };
  for (size_t i = 0; i < sizeof network / sizeof network[0]; i++)
    if (magic == network[i])
      return 1;
  return 0;
}

int tj__location_is_network(const char *path)
{
  struct statfs fs;
  return statfs(path, &fs) == 0 &&
         tj__cache_fs_is_network((unsigned long)(unsigned)fs.f_type);
}

/* ------------------------------------------------------- the lock file */

/* The group of the directory that holds the file at path. */
static gid_t lock_group(const char *path)
{
  char *dir = strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
  struct stat st;
  gid_t g = (gid_t)-1;
  if (slash)
    slash[slash == dir] = '\0';
  if (dir && stat(slash ? dir : ".", &st) == 0)
    g = st.st_gid;
  free(dir);
  return g;
}

/*
 * <path>.lock orders opening against moving a damaged file aside: an opener
 * holds it shared until SQLite has the database, its WAL and its shared
 * memory open; whoever moves the file aside holds it exclusive.  Without it
 * a process could pair the old database with the new one's WAL, or the new
 * database with the old WAL, and corrupt the new one.  how 0: no flock,
 * only the judged descriptor (lease.c takes its record locks on it).
 */
int tj__location_lock(const char *path, unsigned flags, int how, int create)
{
  char *name = NULL;
  mode_t mode = (flags & TJ_CACHE_GROUP) ? 0660 : 0600;
  if (asprintf(&name, "%s.lock", path) < 0)
    return -1;
  int fd = -1;
  if (create && !(flags & TJ_CACHE_READONLY))
    fd = open(name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
  if (fd < 0)
    fd = open(name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  char why[512];
  gid_t group = lock_group(name);
  /* A shared cache's lock has its group, the one it trusts. */
  if (fd >= 0 && (flags & TJ_CACHE_GROUP) && fstat(fd, &st) == 0 &&
      st.st_uid == geteuid() && st.st_gid != group)
    (void)fchown(fd, (uid_t)-1, group);
  /* Our own file, never SQLite's: closing it drops no SQLite lock. */
  if (fd >= 0 && (fstat(fd, &st) != 0 ||
                  tj__location_check_file(&st, name, flags, group, why,
                                          sizeof why))) {
    close(fd);
    fd = -1;
  }
  free(name);
  if (fd < 0)
    return -1;
  if ((flags & TJ_CACHE_GROUP) && st.st_uid == geteuid())
    (void)fchmod(fd, mode); /* the umask; a shared lock must be shared */
  while (how && flock(fd, how) != 0)
    if (errno != EINTR) {
      close(fd);
      return -1;
    }
  return fd;
}

void tj__location_unlock(int fd)
{
  if (fd >= 0)
    close(fd); /* drops the flock */
}
