/*
 * handle.c: the state of an open cache handle, and giving a file up when
 * it fails under us: whether it may still be written, why the last call
 * failed, ending a write transaction, and moving a damaged file of ours
 * aside (also for open.c, which moves a file it finds damaged at open).
 * Every file of src/cache that runs statements reports its failures here.
 * cache/README.md says why moving aside is safe for the other processes
 * that have the file open.
 */
#include "cache_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ASIDE_KEEP 3         /* moved-aside files kept for a post-mortem */

/* ------------------------------------------------------- the handle */

const char *tj__cache_file(const tj__cache *c)
{
  return c && c->db ? sqlite3_db_filename(c->db, "main") : NULL;
}

/* Read-only also once a write or a read has failed: tj_cache_evict and
 * the others then leave the file alone too. */
int tj__cache_readonly(const tj__cache *c)
{
  return c->readonly || __atomic_load_n(&c->nowrite, __ATOMIC_ACQUIRE) ||
         __atomic_load_n(&c->broken, __ATOMIC_ACQUIRE);
}

const char *tj__cache_readonly_why(const tj__cache *c)
{
  if (__atomic_load_n(&c->broken, __ATOMIC_ACQUIRE))
    return c->broken_msg;
  if (__atomic_load_n(&c->nowrite, __ATOMIC_ACQUIRE))
    return c->nowrite_msg;
  if (c->found_readonly)
    return c->readonly_why;
  return c->readonly ? "it was opened with TJ_CACHE_READONLY" : "";
}

const char *tj__cache_errmsg(tj__cache *c)
{
  if (!c || !c->db)
    return "no cache";
  if (__atomic_load_n(&c->broken, __ATOMIC_ACQUIRE))
    return c->broken_msg;
  if (__atomic_load_n(&c->nowrite, __ATOMIC_ACQUIRE))
    return c->nowrite_msg;
  return c->error[0] ? c->error : sqlite3_errmsg(c->db);
}

int tj__cache_note_error(tj__cache *c, int code)
{
  snprintf(c->error, sizeof c->error, "%s", sqlite3_errmsg(c->db));
  return code;
}

/* ------------------------------------------------------- moving aside */

/* Keep the newest ASIDE_KEEP moved-aside files, so that a cache that keeps
 * failing cannot fill the disk with them. */
static void prune_aside(const char *path)
{
  char *dir = strdup(path), *prefix = NULL;
  char *slash = dir ? strrchr(dir, '/') : NULL;
  if (!dir || asprintf(&prefix, "%s.corrupt-", slash ? slash + 1 : dir) < 0) {
    free(dir);
    return;
  }
  if (slash)
    slash[slash == dir] = '\0';
  size_t plen = strlen(prefix);
  for (int round = 0; round < 64; round++) {
    DIR *d = opendir(slash ? dir : ".");
    if (!d)
      break;
    char oldest[512] = "";
    long oldest_t = 0, count = 0;
    for (struct dirent *e; (e = readdir(d));) {
      if (strncmp(e->d_name, prefix, plen) != 0 || strlen(e->d_name) >= sizeof oldest)
        continue;
      long t = strtol(e->d_name + plen, NULL, 10);
      if (count++ == 0 || t < oldest_t) {
        oldest_t = t;
        snprintf(oldest, sizeof oldest, "%s", e->d_name);
      }
    }
    closedir(d);
    if (count <= ASIDE_KEEP)
      break;
    char *victim = NULL;
    if (asprintf(&victim, "%s/%s", slash ? dir : ".", oldest) >= 0)
      unlink(victim);
    free(victim);
  }
  free(prefix);
  free(dir);
}

/* The WAL, shared memory and rollback journal of the old file: left in
 * place, SQLite would replay the old file's pages into the new one. */
static void remove_side_files(const char *path)
{
  static const char *const sides[] = {"-wal", "-shm", "-journal"};
  for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++) {
    char *side = NULL;
    if (asprintf(&side, "%s%s", path, sides[i]) >= 0)
      unlink(side);
    free(side);
  }
}

/*
 * Move the file we judged unusable (dev, ino) to <path>.corrupt-<time>,
 * under the exclusive lock, and only if path still names it: a racing
 * process may have replaced it already, and its replacement is good.
 * Appends what happened to msg.  1 when path no longer names the bad file.
 */
int tj__cache_move_aside(const char *path, unsigned flags, dev_t dev,
                         ino_t ino, char *msg, size_t len)
{
  size_t used = strlen(msg);
  int fd = tj__location_lock(path, flags, LOCK_EX, 1);
  if (fd < 0) {
    snprintf(msg + used, len - used, "; could not lock it to move it aside");
    return 0;
  }
  struct stat st;
  char *aside = NULL;
  int moved = 1;
  if (stat(path, &st) != 0 || st.st_dev != dev || st.st_ino != ino) {
    snprintf(msg + used, len - used, "; another process replaced it already");
  } else if (asprintf(&aside, "%s.corrupt-%ld", path, (long)time(NULL)) < 0) {
    aside = NULL;
    moved = 0;
  } else if (rename(path, aside) == 0) {
    remove_side_files(path);
    prune_aside(path);
    snprintf(msg + used, len - used, "; moved it to %s and started a new one",
             aside);
  } else {
    snprintf(msg + used, len - used, "; could not move it aside: %s",
             strerror(errno));
    moved = 0;
  }
  free(aside);
  tj__location_unlock(fd);
  return moved;
}

/* ------------------------------------------------------- failing */

/*
 * A statement failed for a reason other than a busy database.  Reading: the
 * connection reads nothing more (and a damaged file is moved aside for the
 * processes that come after).  Writing: a damaged file likewise; anything
 * else (disk full, I/O error, a file turned read-only) stops writes only.
 * Called with c->lock held, and only on a state not reached before, so the
 * caller sees TJ_ECACHE once and its runtime warns once.
 */
int tj__cache_failed(tj__cache *c, int rc, int reading)
{
  int prim = rc & 0xff;
  int damaged = prim == SQLITE_CORRUPT || prim == SQLITE_NOTADB;
  char *msg = (reading || damaged) ? c->broken_msg : c->nowrite_msg;
  size_t len = sizeof c->broken_msg;
  snprintf(msg, len, "cache %s: %s while %s", c->path, sqlite3_errstr(rc),
           reading ? "reading" : "storing");
  if (damaged && !c->readonly)
    tj__cache_move_aside(c->path, c->flags, c->dev, c->ino, msg, len);
  size_t used = strlen(msg);
  snprintf(msg + used, len - used, "; %s",
           reading || damaged ? "running without the cache from now on"
                              : "storing nothing more in it");
  __atomic_store_n(reading || damaged ? &c->broken : &c->nowrite, 1,
                   __ATOMIC_RELEASE);
  return TJ_ECACHE;
}

int tj__cache_end_write(tj__cache *c, int rc)
{
  if (rc == SQLITE_OK)
    rc = tj__sql_commit(c->db);
  int out = TJ_OK;
  /* SQLite's message is kept before the rollback; a failed file is moved
   * aside only after it, with no transaction left open on it. */
  if (rc != SQLITE_OK && tj__sql_is_busy(rc))
    out = tj__cache_note_error(c, TJ_ECACHE);
  tj__sql_rollback(c->db);
  if (rc != SQLITE_OK && !tj__sql_is_busy(rc))
    out = tj__cache_failed(c, rc, 0);
  return out;
}
