/*
 * lease.c: one compile per key among the processes of one machine that
 * share a per-user cache (remote.h says what tj__lease_take promises).
 *
 * The lease is an open file description lock on one byte of <cache>.lock,
 * the byte chosen by the key (2^20 of them, so two keys rarely share one,
 * and when they do they only take turns); the byte 2^20 further is the
 * key's takeover byte, which waiters contend for once the first has been
 * held past their bound, so that one of them compiles, not all, and the
 * others wait for it longer.  OFD locks belong to the open
 * file, not to the process: two threads or two runtimes of one process
 * exclude each other as two processes do, closing another descriptor of
 * the file drops nothing, and the kernel drops the lock when its holder
 * dies.  They live beside the flock(2) that orders opening (location.c)
 * without touching it.  F_OFD_SETLKW would wait without a bound, so the
 * waiter polls F_OFD_SETLK with a jittered sleep instead.
 */
#include "cache_internal.h"
#include "remote.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LEASE_BYTES (1L << 20)
#define POLL_FIRST_MS 5
#define POLL_MAX_MS 100
/* How many bounds a waiter gives the one that took over: it is alive (its
 * lock goes with it) and compiling. */
#define TAKEOVER_WAITS 4

uint64_t tj__lease_seed(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
               ((uint64_t)getpid() << 16) ^ (uint64_t)(uintptr_t)&ts;
  return s ? s : 0x9e3779b97f4a7c15ull;
}

void tj__lease_sleep_jittered(long ms, uint64_t *seed)
{
  *seed ^= *seed >> 12, *seed ^= *seed << 25, *seed ^= *seed >> 27;
  uint64_t r = *seed * 0x2545F4914F6CDD1Dull;
  long us = ms * 500 + (long)(r % (uint64_t)(ms * 1000 + 1));
  tj__sql_sleep_ms(us / 1000 > 0 ? us / 1000 : 1);
}

static long now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int lock_byte(int fd, off_t at)
{
  struct flock fl = {0};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = at;
  fl.l_len = 1;
  return fcntl(fd, F_OFD_SETLK, &fl);
}

/* Lock the byte at, polling for at most bound_ms: 0 locked; 1 the bound
 * passed; -1 no OFD locks here (an old kernel, a file system without). */
static int poll_byte(int fd, off_t at, long bound_ms, int *waited)
{
  long start = now_ms(), delay = POLL_FIRST_MS;
  uint64_t seed = tj__lease_seed();
  for (;;) {
    if (lock_byte(fd, at) == 0)
      return 0;
    if (errno != EAGAIN && errno != EACCES && errno != EINTR)
      return -1;
    if (now_ms() - start >= bound_ms)
      return 1;
    *waited = 1;
    tj__lease_sleep_jittered(delay, &seed);
    delay = delay * 3 / 2 < POLL_MAX_MS ? delay * 3 / 2 : POLL_MAX_MS;
  }
}

int tj__lease_take(const char *cache_path, unsigned flags, const char *key,
                   long bound_ms, int *waited)
{
  *waited = 0;
  if (flags & TJ_CACHE_READONLY)
    return -1;
  /* The lock file exists once the cache is open; it is judged again here
   * as the cache's own file, on this descriptor. */
  int fd = tj__location_lock(cache_path, flags, 0, 1);
  if (fd < 0)
    return -1;
  uint64_t h = 0; /* the key is hex digits, already well spread */
  for (int i = 0; i < 16 && key[i]; i++)
    h = h * 31 + (unsigned char)key[i];
  off_t at = (off_t)(h % LEASE_BYTES);
  /* The key's byte, then its takeover byte: one waiter gets the second
   * once the first has been held past the bound. */
  for (int stage = 0; stage < 2; stage++) {
    int rc = poll_byte(fd, at + stage * LEASE_BYTES,
                       stage ? TAKEOVER_WAITS * bound_ms : bound_ms, waited);
    if (rc == 0)
      return fd;
    if (rc < 0)
      break;
  }
  close(fd);
  return -1;
}

void tj__lease_release(int fd)
{
  if (fd >= 0)
    close(fd); /* drops the OFD lock with the last reference to it */
}
