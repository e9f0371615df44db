/*
 * codestore.c: the per-user cache's code directory (codestore.h says
 * what it is for and why a file in it can be trusted).
 *
 * Every file is reached through the directory's descriptor, opened once
 * with O_NOFOLLOW and judged by fstat, and opened itself with O_NOFOLLOW
 * and judged by fstat on that descriptor: what is judged is what is read.
 * Files are opened O_NONBLOCK, so that a FIFO or a device in their place
 * is judged (and refused) instead of waited on.
 */
#include "cache_internal.h"
#include "codestore.h"
#include "record.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAGIC "TJCODE01"
#define SUFFIX ".code"
#define HITS "hits"
#define HITS_MAX_BYTES (1 << 20) /* past this, hits wait for a fold */
#define STALE_TEMP_S 3600

struct tj__codestore {
  int fd;        /* the directory, O_RDONLY|O_DIRECTORY, judged */
  char *path;    /* for messages */
  unsigned flags;
  int readonly;  /* TJ_CACHE_READONLY: remove nothing, write nothing */
  gid_t group;   /* the cache's (its directory's): TJ_CACHE_GROUP trusts it */
  unsigned long serial; /* temporary names */
};

static mode_t file_mode(unsigned flags)
{
  return (flags & TJ_CACHE_GROUP) ? 0660 : 0600;
}

int tj__codestore_open(int dirfd, const char *dir, const char *name,
                       unsigned flags, int create, tj__codestore **out,
                       char *msg, size_t len)
{
  *out = NULL;
  char sub[NAME_MAX + 1];
  if (snprintf(sub, sizeof sub, "%s" SUFFIX, name) >= (int)sizeof sub)
    return TJ_ENOENT; /* a name this long has no code directory */
  mode_t mode = (flags & TJ_CACHE_GROUP) ? 0770 : 0700;
  int made = create && !(flags & TJ_CACHE_READONLY) &&
             mkdirat(dirfd, sub, mode) == 0;
  int fd = openat(dirfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  char *path = NULL;
  if (asprintf(&path, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", sub) < 0) {
    if (fd >= 0)
      close(fd);
    return TJ_ENOMEM;
  }
  int rc = TJ_OK;
  if (fd < 0) {
    rc = errno == ENOENT ? TJ_ENOENT : errno == ELOOP || errno == ENOTDIR
                                           ? TJ_EPERM : TJ_EIO;
    if (rc == TJ_EPERM)
      snprintf(msg, len, "refusing code directory %s: it is not a directory "
               "(a symbolic link?)", path);
    else if (rc == TJ_EIO)
      snprintf(msg, len, "cannot open code directory %s: %s", path,
               strerror(errno));
  } else if ((made && fchmod(fd, mode) != 0) ||
             (made && (flags & TJ_CACHE_GROUP) &&
              fchown(fd, (uid_t)-1, tj__location_dir_group(dirfd)) != 0) ||
             fstat(fd, &st) != 0) {
    snprintf(msg, len, "cannot set up code directory %s: %s", path,
             strerror(errno));
    rc = TJ_EIO;
  } else {
    rc = tj__location_check_dir(&st, path, flags,
                                tj__location_dir_group(dirfd), msg, len);
  }
  tj__codestore *s = rc == TJ_OK ? calloc(1, sizeof *s) : NULL;
  if (rc == TJ_OK && !s)
    rc = TJ_ENOMEM;
  if (rc != TJ_OK) {
    if (fd >= 0)
      close(fd);
    free(path);
    return rc;
  }
  s->fd = fd;
  s->path = path;
  s->flags = flags;
  s->group = st.st_gid;
  s->readonly = (flags & TJ_CACHE_READONLY) != 0;
  *out = s;
  return TJ_OK;
}

void tj__codestore_close(tj__codestore *s)
{
  if (!s)
    return;
  close(s->fd);
  free(s->path);
  free(s);
}

const char *tj__codestore_path(const tj__codestore *s)
{
  return s ? s->path : "";
}

static int is_key(const char *name)
{
  size_t n = strspn(name, "0123456789abcdef");
  return n == TJ__KEY_HEX - 1 && name[n] == '\0';
}

/* All of fd's st->st_size bytes: malloc'd, or NULL. */
static unsigned char *read_all(int fd, const struct stat *st)
{
  size_t n = (size_t)st->st_size, got = 0;
  unsigned char *b = malloc(n ? n : 1);
  while (b && got < n) {
    ssize_t r = pread(fd, b + got, n - got, (off_t)got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      free(b);
      return NULL;
    }
    got += (size_t)r;
  }
  return b;
}

/* The file of key, opened and judged: a descriptor, or -1 with *rc
 * TJ_ENOENT (none), TJ_ECACHE (refused: msg says), TJ_EIO. */
static int open_judged(tj__codestore *s, const char *name, struct stat *st,
                       int *rc, char *msg, size_t len)
{
  char path[PATH_MAX + 64];
  int fd = openat(s->fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  snprintf(path, sizeof path, "%s/%s", s->path, name);
  if (fd < 0) {
    *rc = errno == ENOENT ? TJ_ENOENT : TJ_ECACHE;
    if (errno == ELOOP)
      snprintf(msg, len, "refusing code file %s: it is a symbolic link", path);
    else if (*rc != TJ_ENOENT)
      snprintf(msg, len, "cannot read code file %s: %s", path,
               strerror(errno));
    return -1;
  }
  if (fstat(fd, st) != 0 ||
      tj__location_check_file(st, path, s->flags, s->group, msg, len) != TJ_OK) {
    close(fd);
    *rc = TJ_ECACHE;
    return -1;
  }
  *rc = TJ_OK;
  return fd;
}

int tj__codestore_get(tj__codestore *s, const tj__cache_row *want,
                      tj__found *f, char *msg, size_t len)
{
  struct stat st;
  int rc;
  memset(f, 0, sizeof *f);
  msg[0] = '\0';
  if (!is_key(want->key))
    return TJ_ENOENT;
  int fd = open_judged(s, want->key, &st, &rc, msg, len);
  if (fd >= 0) {
    unsigned char *b = NULL;
    int verdict = -1;
    if (st.st_size >= 20 && (uint64_t)st.st_size <= TJ__RECORD_MAX_BYTES &&
        (b = read_all(fd, &st)))
      verdict = tj__record_decode(MAGIC, b, (size_t)st.st_size, want, f);
    free(b);
    close(fd);
    if (verdict == -2)
      return TJ_ENOMEM;
    if (verdict == 0)
      return TJ_OK;
    snprintf(msg, len, "code file %s/%s failed its checks", s->path,
             want->key);
    rc = TJ_ECACHE;
  }
  if (rc == TJ_ECACHE && !s->readonly && unlinkat(s->fd, want->key, 0) == 0) {
    size_t used = strlen(msg);
    snprintf(msg + used, len - used, "; removed it");
  }
  return rc == TJ_ECACHE || rc == TJ_ENOENT ? rc : TJ_ENOENT;
}

/* Write all of b to a new file at tmp, then rename it to name. */
static int write_file(tj__codestore *s, const char *name, const void *b,
                      size_t n)
{
  char tmp[NAME_MAX + 1];
  snprintf(tmp, sizeof tmp, ".tmp.%s.%ld.%lu", name, (long)getpid(),
           __atomic_fetch_add(&s->serial, 1, __ATOMIC_RELAXED));
  mode_t mode = file_mode(s->flags);
  int fd = openat(s->fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
                  O_CLOEXEC, mode);
  if (fd < 0)
    return TJ_EIO;
  /* A shared cache's files have its group, the one it trusts. */
  int ok = fchmod(fd, mode) == 0 &&
           (!(s->flags & TJ_CACHE_GROUP) || fchown(fd, (uid_t)-1, s->group) == 0);
  for (size_t done = 0; ok && done < n;) {
    ssize_t w = write(fd, (const char *)b + done, n - done);
    if (w < 0 && errno == EINTR)
      continue;
    ok = w > 0;
    done += ok ? (size_t)w : 0;
  }
  ok = close(fd) == 0 && ok;
  if (ok && renameat(s->fd, tmp, s->fd, name) == 0)
    return TJ_OK;
  unlinkat(s->fd, tmp, 0);
  return TJ_EIO;
}

int tj__codestore_put(tj__codestore *s, const tj__cache_row *row)
{
  struct stat st;
  if (!s || s->readonly || !is_key(row->key) ||
      row->code_size > TJ_CACHE_MAX_CODE_BYTES)
    return TJ_OK;
  if (fstatat(s->fd, row->key, &st, AT_SYMLINK_NOFOLLOW) == 0)
    return TJ_OK; /* one there already: a bad one is removed when read */
  size_t n = 0;
  unsigned char *b = tj__record_encode(MAGIC, row, &n);
  int rc = b ? write_file(s, row->key, b, n) : TJ_EIO;
  free(b);
  return rc;
}

void tj__codestore_drop(tj__codestore *s, const char *key)
{
  if (s && !s->readonly && is_key(key))
    unlinkat(s->fd, key, 0);
}

long tj__codestore_sweep(tj__codestore *s, int (*keep)(void *ctx,
                                                       const char *key),
                         void *ctx)
{
  if (!s || s->readonly)
    return 0;
  int fd = openat(s->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0)
      close(fd);
    return 0;
  }
  long removed = 0;
  time_t now = time(NULL);
  for (struct dirent *e; (e = readdir(d));) {
    struct stat st;
    int gone = 0;
    if (is_key(e->d_name))
      gone = !keep(ctx, e->d_name);
    else if ((strncmp(e->d_name, ".tmp.", 5) == 0 ||
              strncmp(e->d_name, ".hits.", 6) == 0) &&
             fstatat(s->fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
      gone = st.st_mtime + STALE_TEMP_S < now;
    if (gone && unlinkat(s->fd, e->d_name, 0) == 0)
      removed++;
  }
  closedir(d);
  return removed;
}

/* ------------------------------------------------------- hits */

void tj__codestore_note_hits(tj__codestore *s, const char *const *keys,
                             const uint64_t *hits, size_t n)
{
  if (!s || s->readonly || n == 0)
    return;
  size_t cap = n * (TJ__KEY_HEX + 48), used = 0;
  char *lines = malloc(cap);
  long long now = (long long)time(NULL);
  for (size_t i = 0; lines && i < n; i++)
    if (is_key(keys[i]))
      used += (size_t)snprintf(lines + used, cap - used, "%s %" PRIu64
                               " %lld\n", keys[i], hits[i], now);
  mode_t mode = file_mode(s->flags);
  /* O_NONBLOCK: a FIFO here fails to open (no reader) or is refused. */
  int fd = lines && used ? openat(s->fd, HITS, O_WRONLY | O_APPEND | O_CREAT |
                                  O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode)
                         : -1;
  struct stat st;
  char msg[256];
  if (fd >= 0 && (s->flags & TJ_CACHE_GROUP) && fstat(fd, &st) == 0 &&
      S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_gid != s->group)
    (void)fchown(fd, (uid_t)-1, s->group); /* the cache's group */
  /* One write: O_APPEND puts it after every other process's whole. */
  if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size < HITS_MAX_BYTES &&
      tj__location_check_file(&st, s->path, s->flags, s->group, msg,
                              sizeof msg) == TJ_OK &&
      write(fd, lines, used) < 0) {
    /* usage only: a hit not counted orders an eviction a little worse */
  }
  if (fd >= 0)
    close(fd);
  free(lines);
}

/* One "KEY HITS TIME" line at *p (up to end): 1 and its fields, else 0;
 * *p moves past the line either way. */
static int take_line(const char **p, const char *end, char *key,
                     uint64_t *hits, int64_t *when)
{
  const char *nl = memchr(*p, '\n', (size_t)(end - *p));
  const char *line = *p;
  *p = nl ? nl + 1 : end;
  if (!nl || nl - line > 80)
    return 0;
  char buf[96], k[TJ__KEY_HEX + 1];
  unsigned long long h;
  long long t;
  int used = 0;
  memcpy(buf, line, (size_t)(nl - line));
  buf[nl - line] = '\0';
  if (sscanf(buf, "%33s %llu %lld%n", k, &h, &t, &used) != 3 ||
      buf[used] != '\0' || !is_key(k) || h == 0 || t <= 0)
    return 0;
  memcpy(key, k, TJ__KEY_HEX);
  *hits = h;
  *when = t;
  return 1;
}

/* The lines of the hits file name, parsed as tj__codestore_take_hits
 * says. */
static int read_hits(tj__codestore *s, const char *name,
                     char (**keys)[TJ__KEY_HEX], uint64_t **hits,
                     int64_t **when, size_t *n)
{
  struct stat st;
  int rc;
  char msg[256];
  int fd = open_judged(s, name, &st, &rc, msg, sizeof msg);
  char *b = fd >= 0 && st.st_size > 0 && st.st_size <= 2 * HITS_MAX_BYTES
                ? (char *)read_all(fd, &st) : NULL;
  if (fd >= 0)
    close(fd);
  if (!b)
    return TJ_OK;
  size_t cap = (size_t)st.st_size / 36 + 1;
  *keys = malloc(cap * sizeof **keys);
  *hits = malloc(cap * sizeof **hits);
  *when = malloc(cap * sizeof **when);
  if (!*keys || !*hits || !*when) {
    free(b);
    free(*keys);
    free(*hits);
    free(*when);
    *keys = NULL;
    *hits = NULL;
    *when = NULL;
    return TJ_ENOMEM;
  }
  for (const char *p = b, *end = b + st.st_size; p < end && *n < cap;)
    if (take_line(&p, end, (*keys)[*n], &(*hits)[*n], &(*when)[*n]))
      (*n)++;
  free(b);
  return TJ_OK;
}

int tj__codestore_take_hits(tj__codestore *s, char (**keys)[TJ__KEY_HEX],
                            uint64_t **hits, int64_t **when, size_t *n)
{
  *keys = NULL;
  *hits = NULL;
  *when = NULL;
  *n = 0;
  if (!s || s->readonly)
    return TJ_OK;
  char taken[NAME_MAX + 1];
  snprintf(taken, sizeof taken, ".hits.%ld.%lu", (long)getpid(),
           __atomic_fetch_add(&s->serial, 1, __ATOMIC_RELAXED));
  /* Taken by its new name: a process appending now appends to the old
   * file, or makes a new one for the next fold. */
  if (renameat(s->fd, HITS, s->fd, taken) != 0)
    return TJ_OK;
  int rc = read_hits(s, taken, keys, hits, when, n);
  unlinkat(s->fd, taken, 0);
  return rc;
}

int tj__codestore_peek_hits(tj__codestore *s, char (**keys)[TJ__KEY_HEX],
                            uint64_t **hits, int64_t **when, size_t *n)
{
  *keys = NULL;
  *hits = NULL;
  *when = NULL;
  *n = 0;
  return s ? read_hits(s, HITS, keys, hits, when, n) : TJ_OK;
}
