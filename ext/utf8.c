/*
** utf8.c: strict UTF-8 (see rmq_ext.h), and text read from a store given
** to SQL as TEXT only when it is UTF-8. A store written by another producer
** may hold any bytes, and readers that decode TEXT (Python's sqlite3) fail
** on bytes that are not UTF-8: the text columns and body_text, the checks
** of an INSERT's text, and error.c's messages go through here.
*/
#include <string.h>

#include "rmq_ext.h"

size_t rmqx_utf8_invalid_at(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    size_t len = c < 0x80             ? 1
                 : (c & 0xE0) == 0xC0 ? 2
                 : (c & 0xF0) == 0xE0 ? 3
                 : (c & 0xF8) == 0xF0 ? 4
                                      : 0;
    if (len == 0 || i + len > n) return i;
    uint32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = cp << 6 | (s[i + k] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return n;
}

bool rmqx_utf8_valid(const uint8_t *s, size_t n) { return rmqx_utf8_invalid_at(s, n) == n; }

void rmqx_result_text_or_blob(sqlite3_context *ctx, const char *s, int n, void (*del)(void *)) {
  size_t len = n < 0 ? strlen(s) : (size_t)n;
  if (rmqx_utf8_valid((const uint8_t *)s, len)) {
    sqlite3_result_text(ctx, s, (int)len, del);
  } else {
    sqlite3_result_blob(ctx, s, (int)len, del);
  }
}
