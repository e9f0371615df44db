/* errors.c: status codes, their names and messages, and the per-runtime
 * message that carries the detail of the last failure. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* TJ__ERR_LAST is counted from the map (tokitai-jit.h), which holds only
 * while the codes run from 0 down without a gap: a code added out of turn
 * stops the build here. */
#define TJ__ERR_DENSE(name, value, msg) \
  _Static_assert((value) <= 0 && (value) > TJ__ERR_LAST, \
                 "TJ_" #name " is outside 0..TJ__ERR_LAST+1: keep the codes dense");
TJ_ERRNO_MAP(TJ__ERR_DENSE)
#undef TJ__ERR_DENSE

const char *tj_strerror(int code)
{
  switch (code) {
#define TJ__ERR_MSG(name, value, msg) case TJ_##name: return msg;
    TJ_ERRNO_MAP(TJ__ERR_MSG)
#undef TJ__ERR_MSG
  }
  return "unknown error";
}

const char *tj_err_name(int code)
{
  switch (code) {
#define TJ__ERR_NAME(name, value, msg) case TJ_##name: return "TJ_" #name;
    TJ_ERRNO_MAP(TJ__ERR_NAME)
#undef TJ__ERR_NAME
  }
  return "TJ_EUNKNOWN";
}

/*
 * Messages are per thread: each thread that fails (or is warned) on a
 * runtime keeps its own copy, so that a failing call on one thread never
 * frees the string another thread is reading (a use-after-free when the
 * runtime held one message for all).  A thread's messages live in a small
 * table behind one process-wide key, one slot per runtime it failed on,
 * the least recently set reused when full; the key's destructor frees the
 * table when the thread exits, without touching any runtime (which may be
 * gone by then).  A runtime is named by a serial, never by its address,
 * which a later runtime could reuse.
 */
#define TJ__MSG_SLOTS 8

typedef struct msg_slot {
  uint64_t serial;   /* 0: free */
  uint64_t stamp;    /* when last set, for reuse */
  char *msg;
} msg_slot;

typedef struct msg_table {
  msg_slot slot[TJ__MSG_SLOTS];
  uint64_t clock;
} msg_table;

static pthread_key_t msg_key;
static pthread_once_t msg_once = PTHREAD_ONCE_INIT;
static int msg_key_ok;

static void free_table(void *p)
{
  msg_table *t = p;
  for (int i = 0; i < TJ__MSG_SLOTS; i++)
    free(t->slot[i].msg);
  free(t);
}

static void make_key(void)
{
  msg_key_ok = pthread_key_create(&msg_key, free_table) == 0;
}

static msg_table *thread_table(int create)
{
  pthread_once(&msg_once, make_key);
  if (!msg_key_ok)
    return NULL;
  msg_table *t = pthread_getspecific(msg_key);
  if (!t && create && (t = calloc(1, sizeof *t)) &&
      pthread_setspecific(msg_key, t) != 0) {
    free(t);
    t = NULL;
  }
  return t;
}

static msg_slot *find_slot(msg_table *t, uint64_t serial)
{
  for (int i = 0; t && i < TJ__MSG_SLOTS; i++)
    if (t->slot[i].serial == serial)
      return &t->slot[i];
  return NULL;
}

uint64_t tj__runtime_serial(void)
{
  /* An identity, not shared state: each runtime takes the next number. */
  static uint64_t next = 0;
  return __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);
}

static void set_message(tj_runtime *rt, char *msg)
{
  msg_table *t = thread_table(1);
  if (!t) {
    free(msg);
    return;
  }
  msg_slot *s = find_slot(t, rt->msg_serial);
  if (!s) {
    s = &t->slot[0];
    for (int i = 1; i < TJ__MSG_SLOTS; i++)
      if (t->slot[i].stamp < s->stamp)
        s = &t->slot[i];
    s->serial = rt->msg_serial;
  }
  free(s->msg);
  s->msg = msg;
  s->stamp = ++t->clock;
}

uint64_t tj__messages_clock(void)
{
  msg_table *t = thread_table(0);
  return t ? t->clock : 0;
}

void tj__messages_release(tj_runtime *rt)
{
  msg_slot *s = find_slot(thread_table(0), rt->msg_serial);
  if (s) {
    free(s->msg);
    memset(s, 0, sizeof *s);
  }
}

static char *format(const char *fmt, va_list ap)
{
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0)
    return NULL;
  return s;
}

int tj__fail(tj_runtime *rt, int code, const char *fmt, ...)
{
  if (!rt)
    return code;
  va_list ap;
  va_start(ap, fmt);
  set_message(rt, format(fmt, ap));
  va_end(ap);
  return code;
}

int tj__fail_owned(tj_runtime *rt, int code, char *msg)
{
  if (rt)
    set_message(rt, msg);
  else
    free(msg);
  return code;
}

void tj__warn(tj_runtime *rt, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  set_message(rt, format(fmt, ap));
  va_end(ap);
}

const char *tj_errmsg(const tj_runtime *rt)
{
  if (!rt)
    return "no runtime (NULL handle)";
  msg_slot *s = find_slot(thread_table(0), rt->msg_serial);
  return s && s->msg ? s->msg : "";
}
