/*
** rmq_err.h: the engine's error discipline.
**
** Every engine call that can fail takes an `rmq_err *` and returns an
** RMQ_* code. On failure the code is also stored in err->code and
** err->msg holds a sentence with context: the path, the offset, what was
** expected, what was found, and which setting to change.
**
** rmq_err_set keeps the first error recorded: a later failure (a cleanup
** that fails after the root cause) never overwrites its message. That is
** all that is sticky. Unlike fts5's pRc, a callee does not look at err on
** entry and does not return early because it already holds an error: each
** caller stops its own chain at the first failing return code. A caller
** that goes on after a failure it handled clears err (rmq_err_clear) first,
** or the next error's message is lost.
*/
#ifndef RMQ_ERR_H
#define RMQ_ERR_H

#include <stddef.h>

enum {
  RMQ_OK = 0,
  RMQ_EINVAL,     /* bad argument or message: nothing was written */
  RMQ_ENOMEM,     /* out of memory */
  RMQ_EIO,        /* an I/O call failed; the store may now refuse writes */
  RMQ_ECORRUPT,   /* a file's bytes do not follow the format */
  RMQ_ELOCKED,    /* another process holds the store's lock */
  RMQ_ETIMEOUT,   /* a flush or an allocation did not finish in time */
  RMQ_EPOISONED,  /* an earlier fsync or write failed: reopen the store */
  RMQ_ENOTFOUND,  /* no such message, queue or file */
  RMQ_ECLOSED,    /* the store is shutting down */
  RMQ_EFULL       /* a segment or an index file has no room, or the disk is full */
};

typedef struct rmq_err {
  int code;
  char msg[512];
} rmq_err;

/*
** Record an error unless one is already recorded. Returns err->code: the
** first error's code, which may differ from code (code itself when err is NULL).
*/
int rmq_err_set(rmq_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Forget any recorded error. */
void rmq_err_clear(rmq_err *err);

/* A fixed English name for a code ("I/O error", "store is locked", ...). */
const char *rmq_strerror(int code);

#endif
