/*
** error.c: the extension's error messages (see rmq_ext.h): formatted with
** sqlite3_mprintf and set on a table (its zErrMsg, which a cursor's errors
** also go to), on a function's context, or in an errmsg out-parameter.
*/
#include <stdarg.h>
#include <string.h>

#include "rmq_ext.h"

/*
** The message, with each byte that is not UTF-8 written as \xHH: it may
** quote what a user gave or a path, which can hold any bytes, and readers
** decode messages (Python's sqlite3 raises UnicodeDecodeError instead).
*/
static char *vformat(const char *fmt, va_list ap) {
  char *msg = sqlite3_vmprintf(fmt, ap);
  size_t n = msg ? strlen(msg) : 0;
  size_t bad = msg ? rmqx_utf8_invalid_at((const uint8_t *)msg, n) : n;
  if (bad == n) return msg;
  sqlite3_str *s = sqlite3_str_new(NULL);
  for (size_t at = 0; at < n;) {
    sqlite3_str_append(s, msg + at, (int)(bad - at));
    if (bad < n) sqlite3_str_appendf(s, "\\x%02X", (unsigned char)msg[bad]);
    at = bad + 1;
    if (at < n) bad = at + rmqx_utf8_invalid_at((const uint8_t *)msg + at, n - at);
  }
  sqlite3_free(msg);
  return sqlite3_str_finish(s);
}

int rmqx_vtab_error(sqlite3_vtab *vt, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = vformat(fmt, ap);
  va_end(ap);
  sqlite3_free(vt->zErrMsg);
  vt->zErrMsg = msg;
  return msg ? SQLITE_ERROR : SQLITE_NOMEM;
}

void rmqx_result_error(sqlite3_context *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = vformat(fmt, ap);
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
  *errmsg = vformat(fmt, ap);
  va_end(ap);
  return *errmsg ? rc : SQLITE_NOMEM;
}

const char *rmqx_value_cstr(sqlite3_value *v, int *nul_at) {
  const char *t = (const char *)sqlite3_value_text(v);
  /* The length of the value, not strlen: that would stop at the NUL looked for. */
  size_t n = t ? (size_t)sqlite3_value_bytes(v) : 0;
  const char *nul = t ? memchr(t, '\0', n) : NULL;
  *nul_at = nul ? (int)(nul - t) : -1;
  return t;
}
