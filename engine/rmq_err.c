/*
** rmq_err.c: recording and naming engine errors (see rmq.h).
*/
#include "rmq.h"

#include <stdarg.h>
#include <stdio.h>

int rmq_err_set(rmq_err *err, int code, const char *fmt, ...) {
  if (err == NULL || err->code != RMQ_OK) return err ? err->code : code;
  va_list ap;
  err->code = code;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  return code;
}

void rmq_err_clear(rmq_err *err) {
  err->code = RMQ_OK;
  err->msg[0] = '\0';
}

const char *rmq_strerror(int code) {
  switch (code) {
    case RMQ_OK: return "not an error";
    case RMQ_EINVAL: return "invalid argument";
    case RMQ_ENOMEM: return "out of memory";
    case RMQ_EIO: return "I/O error";
    case RMQ_ECORRUPT: return "store file is damaged";
    case RMQ_ELOCKED: return "store is locked";
    case RMQ_ETIMEOUT: return "timed out";
    case RMQ_EPOISONED: return "store refuses writes after an I/O failure";
    case RMQ_ENOTFOUND: return "not found";
    case RMQ_ECLOSED: return "store is closed";
    case RMQ_EFULL: return "file is full";
    case RMQ_ENOSLAVE: return "no slave available";
    case RMQ_EAGAIN: return "try again through the owner";
    default: return "unknown error";
  }
}
