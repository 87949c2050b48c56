/*
** java_hash.c: String.hashCode as the Java broker computes it.
**
** On-disk strings are UTF-8; Java hashes UTF-16 units, so the hash
** decodes UTF-8 on the fly, replacing malformed input with U+FFFD the way
** the JDK's UTF-8 decoder does (one per maximal valid prefix; an encoded
** surrogate is one U+FFFD for its three bytes).
*/
#include "rmq.h"

#include <stdbool.h>

static bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

/*
** Decodes one code point from s[0..n), n >= 1, and returns the bytes used.
** Malformed input gives U+FFFD for its longest valid prefix (at least one
** byte), as the JDK's UTF-8 decoder does; the second-byte ranges reject
** overlong forms and code points above U+10FFFF.
*/
static size_t utf8_next(const uint8_t *s, size_t n, uint32_t *cp) {
  uint8_t b = s[0];
  *cp = 0xFFFD;
  if (b < 0xC2) { /* ASCII is the caller's fast path; 80..C1 never start a sequence */
    if (b < 0x80) *cp = b;
    return 1;
  }
  if (n < 2 || !is_cont(s[1])) return 1;
  if (b < 0xE0) {
    *cp = (uint32_t)(b & 0x1F) << 6 | (s[1] & 0x3F);
    return 2;
  }
  if (b < 0xF0) {
    if (b == 0xE0 && s[1] < 0xA0) return 1;
    if (n < 3 || !is_cont(s[2])) return 2;
    uint32_t c = (uint32_t)(b & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
    if (c < 0xD800 || c > 0xDFFF) *cp = c; /* an encoded surrogate stays U+FFFD */
    return 3;
  }
  if (b > 0xF4 || (b == 0xF0 && s[1] < 0x90) || (b == 0xF4 && s[1] > 0x8F)) return 1;
  if (n < 3 || !is_cont(s[2])) return 2;
  if (n < 4 || !is_cont(s[3])) return 3;
  *cp = (uint32_t)(b & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 |
        (s[3] & 0x3F);
  return 4;
}

/* Continues String.hashCode's h = 31*h + unit over the UTF-16 units of s. */
static uint32_t hash_utf8(uint32_t h, const char *text, size_t len) {
  const uint8_t *s = (const uint8_t *)text;
  size_t i = 0;
  while (i < len) {
    if (s[i] < 0x80) {
      h = h * 31 + s[i++];
      continue;
    }
    uint32_t cp;
    i += utf8_next(s + i, len - i, &cp);
    if (cp < 0x10000) {
      h = h * 31 + cp;
    } else {
      cp -= 0x10000;
      h = h * 31 + (0xD800 + (cp >> 10));
      h = h * 31 + (0xDC00 + (cp & 0x3FF));
    }
  }
  return h;
}

int32_t rmq_java_hash(const char *utf8, size_t len) { return (int32_t)hash_utf8(0, utf8, len); }

int64_t rmq_tags_code(const char *tags, size_t len) { return tags ? rmq_java_hash(tags, len) : 0; }

int32_t rmq_index_key_hash(const char *topic, size_t topic_len, const char *key, size_t key_len) {
  /* Hashing topic, '#', key in turn equals hashing the joined string. */
  uint32_t h = hash_utf8(0, topic, topic_len);
  h = hash_utf8(h * 31 + '#', key, key_len);
  int32_t v = (int32_t)h;
  /* IndexFile: Math.abs, and abs(Integer.MIN_VALUE) < 0 becomes 0. */
  return v == INT32_MIN ? 0 : (v < 0 ? -v : v);
}
