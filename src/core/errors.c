/* errors.c: status codes, their names and messages, and the per-runtime
 * message that carries the detail of the last failure. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void set_message(tj_runtime *rt, char *msg)
{
  pthread_mutex_lock(&rt->lock);
  free(rt->msg);
  rt->msg = msg;
  pthread_mutex_unlock(&rt->lock);
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
  return rt->msg ? rt->msg : "";
}
