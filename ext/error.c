/*
** error.c: the extension's error messages (see rmq_ext.h): formatted with
** sqlite3_mprintf and set on a table (its zErrMsg, which a cursor's errors
** also go to), on a function's context, or in an errmsg out-parameter.
*/
#include <stdarg.h>

#include "rmq_ext.h"

int rmqx_vtab_error(sqlite3_vtab *vt, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = sqlite3_vmprintf(fmt, ap);
  va_end(ap);
  sqlite3_free(vt->zErrMsg);
  vt->zErrMsg = msg;
  return msg ? SQLITE_ERROR : SQLITE_NOMEM;
}

void rmqx_result_error(sqlite3_context *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = sqlite3_vmprintf(fmt, ap);
  va_end(ap);
  if (msg == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  sqlite3_result_error(ctx, msg, -1);
  sqlite3_free(msg);
}

int rmqx_errmsg(char **errmsg, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  *errmsg = sqlite3_vmprintf(fmt, ap);
  va_end(ap);
  return *errmsg ? rc : SQLITE_NOMEM;
}
