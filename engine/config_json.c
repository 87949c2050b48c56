/*
** config_json.c: the JSON of delayOffset.json, consumerOffset.json and
** topics.json, read and written as fastjson 1.x does (see config_json.h).
**
** The reader is a cursor over the given bytes. cj_object walks one object
** and hands each member's key and value to a callback, which reads the
** value or skips it; every config file is a few such walks nested. The
** parsers walk the text twice: once to check it, once to call fn, so that
** a damaged text never delivers half of its entries.
*/
#include "config_json.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- reader */

typedef struct cj {
  const char *text;
  size_t len, pos;
  int depth;
  rmq_err *err;
  size_t err_at; /* the byte the error's message names: where the text breaks */
} cj;

/* The text breaks at byte `at`: the message starts "offset <at>: ". */
__attribute__((format(printf, 3, 4))) static int cj_corrupt(cj *r, size_t at, const char *fmt,
                                                            ...) {
  char what[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  r->err_at = at;
  return rmq_err_set(r->err, RMQ_ECORRUPT, "offset %zu: %s", at, what);
}

/* Describes the byte at pos for an error: 'x', byte 0x01, or the end of the text. */
static const char *cj_found(const cj *r, char *buf, size_t cap) {
  if (r->pos >= r->len) return "the end of the text";
  unsigned char c = (unsigned char)r->text[r->pos];
  if (c > 0x20 && c < 0x7f) {
    snprintf(buf, cap, "'%c'", c);
  } else {
    snprintf(buf, cap, "byte 0x%02x", c);
  }
  return buf;
}

static int cj_fail(cj *r, const char *expected) {
  char buf[16];
  return cj_corrupt(r, r->pos, "expected %s, found %s", expected, cj_found(r, buf, sizeof buf));
}

static void cj_ws(cj *r) {
  while (r->pos < r->len) {
    char c = r->text[r->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
    r->pos++;
  }
}

/* The next byte after whitespace, or -1 at the end. */
static int cj_peek(cj *r) {
  cj_ws(r);
  return r->pos < r->len ? (unsigned char)r->text[r->pos] : -1;
}

static int cj_expect(cj *r, char c, const char *what) {
  if (cj_peek(r) != (unsigned char)c) return cj_fail(r, what);
  r->pos++;
  return RMQ_OK;
}

/* Consumes the literal word (true, false, null) when it is next. */
static bool cj_word(cj *r, const char *word) {
  size_t n = strlen(word);
  if (cj_peek(r) < 0 || r->len - r->pos < n || memcmp(r->text + r->pos, word, n) != 0) return false;
  r->pos += n;
  return true;
}

static int cj_hex4(cj *r, unsigned *out) {
  *out = 0;
  for (int i = 0; i < 4; i++, r->pos++) {
    int c = r->pos < r->len ? (unsigned char)r->text[r->pos] : -1;
    int v = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (v < 0) return cj_fail(r, "four hex digits after \\u");
    *out = *out << 4 | (unsigned)v;
  }
  return RMQ_OK;
}

/* A \u escape (pos after the 'u'), a surrogate pair joined, as a code point. */
static int cj_unicode(cj *r, unsigned *cp) {
  int rc = cj_hex4(r, cp);
  if (rc != RMQ_OK) return rc;
  if (*cp >= 0xDC00 && *cp <= 0xDFFF) return cj_fail(r, "a high surrogate before a low one");
  if (*cp < 0xD800 || *cp > 0xDBFF) return RMQ_OK;
  unsigned lo;
  if (r->len - r->pos < 2 || memcmp(r->text + r->pos, "\\u", 2) != 0) {
    return cj_fail(r, "a \\u low surrogate after a high one");
  }
  r->pos += 2;
  if ((rc = cj_hex4(r, &lo)) != RMQ_OK) return rc;
  if (lo < 0xDC00 || lo > 0xDFFF) return cj_fail(r, "a low surrogate after a high one");
  *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
  return RMQ_OK;
}

/* Appends the UTF-8 of cp, or of a plain byte when cp < 0x80, to out (NULL: count only). */
static size_t cj_utf8(unsigned cp, char *out) {
  char b[4];
  size_t n;
  if (cp < 0x80) {
    b[0] = (char)cp, n = 1;
  } else if (cp < 0x800) {
    b[0] = (char)(0xC0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
  } else if (cp < 0x10000) {
    b[0] = (char)(0xE0 | cp >> 12), b[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    b[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
  } else {
    b[0] = (char)(0xF0 | cp >> 18), b[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    b[2] = (char)(0x80 | (cp >> 6 & 0x3F)), b[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
  }
  if (out) memcpy(out, b, n);
  return n;
}

/* One character of a string body (pos inside the quotes) as a code point or byte. */
static int cj_char(cj *r, unsigned *cp) {
  unsigned char c = (unsigned char)r->text[r->pos];
  if (c == '\0') return cj_fail(r, "a string without NUL bytes");
  r->pos++;
  if (c != '\\') return *cp = c, RMQ_OK;
  if (r->pos >= r->len) return cj_fail(r, "an escape after '\\'");
  const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
  const char *e = strchr(from, r->text[r->pos]);
  if (r->text[r->pos] == 'u') {
    r->pos++;
    int rc = cj_unicode(r, cp);
    if (rc == RMQ_OK && *cp == 0) return cj_fail(r, "a string without \\u0000");
    return rc;
  }
  if (e == NULL || *e == '\0') {
    return cj_fail(r, "an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u)");
  }
  r->pos++;
  *cp = (unsigned char)to[e - from];
  return RMQ_OK;
}

/*
** A quoted string, decoded into out (NUL-terminated, at most cap - 1 bytes);
** out NULL skips it, whatever its length.
*/
static int cj_string(cj *r, char *out, size_t cap) {
  int rc = cj_expect(r, '"', "'\"'");
  if (rc != RMQ_OK) return rc;
  size_t n = 0, start = r->pos - 1;
  while (rc == RMQ_OK) {
    if (r->pos >= r->len) return cj_fail(r, "'\"' closing the string");
    if (r->text[r->pos] == '"') break;
    unsigned cp;
    if ((rc = cj_char(r, &cp)) != RMQ_OK) break;
    if (out == NULL) continue;
    if (n + cj_utf8(cp, NULL) >= cap) {
      r->pos = start;
      return cj_corrupt(r, start, "string longer than %zu bytes", cap - 1);
    }
    n += cj_utf8(cp, out + n);
  }
  if (rc != RMQ_OK) return rc;
  r->pos++;
  if (out) out[n] = '\0';
  return RMQ_OK;
}

/* Decimal digits with an optional '-', into *v; RMQ_ECORRUPT past int64's range. */
static int cj_digits(cj *r, int64_t *v) {
  size_t start = r->pos;
  bool neg = r->pos < r->len && r->text[r->pos] == '-';
  if (neg) r->pos++;
  uint64_t u = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  size_t first = r->pos;
  for (; r->pos < r->len && r->text[r->pos] >= '0' && r->text[r->pos] <= '9'; r->pos++) {
    unsigned d = (unsigned)(r->text[r->pos] - '0');
    if (u > (limit - d) / 10) {
      r->pos = start;
      return cj_corrupt(r, start, "integer out of the range of a long");
    }
    u = u * 10 + d;
  }
  if (r->pos == first) return r->pos = start, cj_fail(r, "an integer");
  /* JSON writes no leading zero, nor does fastjson: "02" is damage, not 2. */
  if (r->text[first] == '0' && r->pos > first + 1) {
    return cj_corrupt(r, first, "expected an integer without a leading zero");
  }
  *v = neg ? (int64_t)(0 - u) : (int64_t)u;
  return RMQ_OK;
}

/* An integer value in min..max; what names it in errors. */
static int cj_int(cj *r, int64_t min, int64_t max, const char *what, int64_t *v) {
  cj_ws(r);
  size_t start = r->pos;
  int rc = cj_digits(r, v);
  if (rc != RMQ_OK) return rc;
  if (r->pos < r->len && strchr(".eE", r->text[r->pos]) && r->text[r->pos] != '\0') {
    return cj_fail(r, "an integer without fraction or exponent");
  }
  if (*v < min || *v > max) {
    return cj_corrupt(r, start, "%s %" PRId64 " out of range %" PRId64 "..%" PRId64, what, *v, min,
                      max);
  }
  return RMQ_OK;
}

static int cj_bool(cj *r, bool *v) {
  if (cj_word(r, "true")) return *v = true, RMQ_OK;
  if (cj_word(r, "false")) return *v = false, RMQ_OK;
  return cj_fail(r, "true or false");
}

/* Digits at pos; what names them when there are none. */
static int cj_skip_digits(cj *r, const char *what) {
  size_t first = r->pos;
  while (r->pos < r->len && r->text[r->pos] >= '0' && r->text[r->pos] <= '9') r->pos++;
  return r->pos > first ? RMQ_OK : cj_fail(r, what);
}

/* A number in a member this code does not read: any size, fraction and exponent allowed. */
static int cj_skip_number(cj *r) {
  if (r->pos < r->len && r->text[r->pos] == '-') r->pos++;
  int rc = cj_skip_digits(r, "a digit");
  if (rc == RMQ_OK && r->pos < r->len && r->text[r->pos] == '.') {
    r->pos++;
    rc = cj_skip_digits(r, "a digit after '.'");
  }
  if (rc == RMQ_OK && r->pos < r->len && (r->text[r->pos] == 'e' || r->text[r->pos] == 'E')) {
    if (++r->pos < r->len && (r->text[r->pos] == '+' || r->text[r->pos] == '-')) r->pos++;
    rc = cj_skip_digits(r, "a digit in the exponent");
  }
  return rc;
}

static int cj_enter(cj *r, char open, const char *what) {
  if (r->depth >= RMQ_CONFIG_JSON_DEPTH) {
    cj_ws(r);
    return cj_corrupt(r, r->pos, "nesting deeper than %d levels", RMQ_CONFIG_JSON_DEPTH);
  }
  int rc = cj_expect(r, open, what);
  if (rc == RMQ_OK) r->depth++;
  return rc;
}

/*
** After a member or element: true when another follows (its ',' consumed),
** false at the closing byte (consumed).
*/
static int cj_more(cj *r, char close, bool *more) {
  int c = cj_peek(r);
  if (c == close) {
    r->pos++;
    r->depth--;
    *more = false;
    return RMQ_OK;
  }
  *more = true;
  return c == ',' ? (r->pos++, RMQ_OK) : cj_fail(r, close == '}' ? "',' or '}'" : "',' or ']'");
}

static int cj_skip(cj *r);

static int cj_skip_array(cj *r) {
  int rc = cj_enter(r, '[', "'['");
  if (rc != RMQ_OK) return rc;
  if (cj_peek(r) == ']') return r->pos++, r->depth--, RMQ_OK;
  for (bool more = true; more && rc == RMQ_OK;) {
    rc = cj_skip(r);
    if (rc == RMQ_OK) rc = cj_more(r, ']', &more);
  }
  return rc;
}

typedef int (*cj_member_fn)(cj *r, const char *key, size_t key_pos, void *ctx);

static int cj_object(cj *r, cj_member_fn member, void *ctx);

static int cj_skip_member(cj *r, const char *key, size_t key_pos, void *ctx) {
  (void)key, (void)key_pos, (void)ctx;
  return cj_skip(r);
}

/* Any value, checked for syntax and dropped. */
static int cj_skip(cj *r) {
  int c = cj_peek(r);
  if (c == '{') return cj_object(r, cj_skip_member, NULL);
  if (c == '[') return cj_skip_array(r);
  if (c == '"') return cj_string(r, NULL, 0);
  if (c == '-' || (c >= '0' && c <= '9')) return cj_skip_number(r);
  if (cj_word(r, "true") || cj_word(r, "false") || cj_word(r, "null")) return RMQ_OK;
  return cj_fail(r, "a value");
}

/* A key: a quoted string, or an integer without quotes as fastjson writes map keys. */
static int cj_key(cj *r, char *key, size_t cap) {
  int c = cj_peek(r);
  if (c == '"') return cj_string(r, key, cap);
  if (c != '-' && (c < '0' || c > '9')) return cj_fail(r, "a key");
  size_t start = r->pos;
  int64_t v;
  int rc = cj_digits(r, &v);
  if (rc != RMQ_OK) return rc;
  /* Leading zeros can make a small integer long. */
  if (r->pos - start >= cap) {
    r->pos = start;
    return cj_corrupt(r, start, "key longer than %zu bytes", cap - 1);
  }
  snprintf(key, cap, "%.*s", (int)(r->pos - start), r->text + start);
  return RMQ_OK;
}

/*
** The keys of one object so far, by hash and where each starts: fastjson
** writes a map, so a key twice is damage (a flipped byte that made one key
** into another), not a value to let the last one win.
*/
typedef struct cj_keys {
  struct cj_key_slot {
    uint64_t hash;
    size_t pos; /* SIZE_MAX: empty */
  } * slots;
  size_t n, cap;
} cj_keys;

static uint64_t cj_key_hash(const char *key) {
  uint64_t h = 14695981039346656037u; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)key; *p; p++) h = (h ^ *p) * 1099511628211u;
  return h;
}

static int cj_keys_grow(cj_keys *k) {
  size_t cap = k->cap ? k->cap * 2 : 16;
  struct cj_key_slot *slots = malloc(cap * sizeof *slots);
  if (slots == NULL) return RMQ_ENOMEM;
  for (size_t i = 0; i < cap; i++) slots[i].pos = SIZE_MAX;
  for (size_t i = 0; i < k->cap; i++) {
    if (k->slots[i].pos == SIZE_MAX) continue;
    size_t j = k->slots[i].hash & (cap - 1);
    while (slots[j].pos != SIZE_MAX) j = (j + 1) & (cap - 1);
    slots[j] = k->slots[i];
  }
  free(k->slots);
  k->slots = slots;
  k->cap = cap;
  return RMQ_OK;
}

/* Adds key (read at key_pos); RMQ_ECORRUPT when the object already has it. */
static int cj_keys_add(cj *r, cj_keys *k, const char *key, size_t key_pos) {
  if ((k->n + 1) * 2 > k->cap && cj_keys_grow(k) != RMQ_OK) {
    return rmq_err_set(r->err, RMQ_ENOMEM, "out of memory reading the keys of an object");
  }
  uint64_t h = cj_key_hash(key);
  size_t j = h & (k->cap - 1);
  for (; k->slots[j].pos != SIZE_MAX; j = (j + 1) & (k->cap - 1)) {
    if (k->slots[j].hash != h) continue;
    char first[RMQ_CONFIG_JSON_STRING + 1];
    cj again = {.text = r->text, .len = r->len, .pos = k->slots[j].pos, .err = &(rmq_err){0}};
    if (cj_key(&again, first, sizeof first) == RMQ_OK && strcmp(first, key) == 0) {
      return cj_corrupt(r, key_pos, "the key \"%.64s\" twice in one object (first at offset %zu)",
                        key, k->slots[j].pos);
    }
  }
  k->slots[j] = (struct cj_key_slot){h, key_pos};
  k->n++;
  return RMQ_OK;
}

static int cj_members(cj *r, cj_member_fn member, void *ctx, cj_keys *keys) {
  int rc = RMQ_OK;
  for (bool more = true; more;) {
    char key[RMQ_CONFIG_JSON_STRING + 1];
    size_t key_pos = (cj_ws(r), r->pos);
    if ((rc = cj_key(r, key, sizeof key)) != RMQ_OK) return rc;
    if ((rc = cj_expect(r, ':', "':' after a key")) != RMQ_OK) return rc;
    if ((rc = cj_keys_add(r, keys, key, key_pos)) != RMQ_OK) return rc;
    if ((rc = member(r, key, key_pos, ctx)) != RMQ_OK) return rc;
    if ((rc = cj_more(r, '}', &more)) != RMQ_OK) return rc;
  }
  return rc;
}

/* Walks an object (null reads as an empty one): member reads or skips each value. */
static int cj_object(cj *r, cj_member_fn member, void *ctx) {
  if (cj_word(r, "null")) return RMQ_OK;
  int rc = cj_enter(r, '{', "'{'");
  if (rc != RMQ_OK) return rc;
  if (cj_peek(r) == '}') return r->pos++, r->depth--, RMQ_OK;
  cj_keys keys = {0};
  rc = cj_members(r, member, ctx, &keys);
  free(keys.slots);
  return rc;
}

/*
** The whole text is one object and nothing but whitespace after it.
** *err_at (may be NULL): where a text that fails with RMQ_ECORRUPT breaks.
*/
static int cj_walk(const char *text, size_t len, cj_member_fn member, void *ctx, rmq_err *err,
                   size_t *err_at) {
  cj r = {.text = text, .len = len, .err = err};
  if (text == NULL) return rmq_err_set(err, RMQ_EINVAL, "no text to parse");
  int rc = cj_peek(&r) != '{' ? cj_fail(&r, "'{'") : cj_object(&r, member, ctx);
  if (rc == RMQ_OK && cj_peek(&r) >= 0) rc = cj_fail(&r, "the end of the text");
  if (err_at) *err_at = r.err_at;
  return rc;
}

static int cj_document(const char *text, size_t len, cj_member_fn member, void *ctx, rmq_err *err) {
  return cj_walk(text, len, member, ctx, err, NULL);
}

/* An integer key in min..max. */
static int cj_key_int(cj *r, const char *key, size_t key_pos, int64_t min, int64_t max,
                      const char *what, int64_t *v) {
  cj k = {.text = key, .len = strlen(key), .err = r->err};
  int rc = cj_int(&k, min, max, what, v);
  if (rc == RMQ_OK && k.pos == k.len) return RMQ_OK;
  rmq_err_clear(r->err);
  return cj_corrupt(r, key_pos, "expected %s %" PRId64 "..%" PRId64 " as the key, found \"%.64s\"",
                    what, min, max, key);
}

/*
** A text that parses but lacks its table (a renamed member, say) holds
** nothing a broker would read: damage, not an empty table.
*/
static int no_table(rmq_err *err, const char *member) {
  return rmq_err_set(err, RMQ_ECORRUPT, "offset 0: expected the \"%s\" member, found none", member);
}

/* ------------------------------------------------------ delayOffset.json */

typedef struct delay_ctx {
  bool table; /* the offsetTable member was there */
  int64_t offsets[RMQ_MAX_DELAY_LEVELS];
  bool seen[RMQ_MAX_DELAY_LEVELS];
  size_t before; /* levels whose offset ends at or past this byte are not taken (salvage) */
} delay_ctx;

static int delay_level(cj *r, const char *key, size_t key_pos, void *ctx) {
  delay_ctx *d = ctx;
  int64_t level, offset;
  int rc = cj_key_int(r, key, key_pos, 1, RMQ_MAX_DELAY_LEVELS, "delay level", &level);
  if (rc == RMQ_OK) rc = cj_int(r, 0, INT64_MAX, "offset", &offset);
  if (rc != RMQ_OK || r->pos >= d->before) return rc;
  d->offsets[level - 1] = offset;
  d->seen[level - 1] = true;
  return RMQ_OK;
}

static int delay_top(cj *r, const char *key, size_t key_pos, void *ctx) {
  (void)key_pos;
  if (strcmp(key, "offsetTable") != 0) return cj_skip(r);
  ((delay_ctx *)ctx)->table = true;
  return cj_object(r, delay_level, ctx);
}

int rmq_delay_offsets_parse(const char *text, size_t len, int64_t *offsets, int max_levels,
                            rmq_err *err) {
  if (max_levels < 0 || max_levels > RMQ_MAX_DELAY_LEVELS) {
    return rmq_err_set(err, RMQ_EINVAL, "max_levels %d is outside 0..%d", max_levels,
                       RMQ_MAX_DELAY_LEVELS);
  }
  delay_ctx d = {.before = SIZE_MAX};
  int rc = cj_document(text, len, delay_top, &d, err);
  if (rc == RMQ_OK && !d.table) rc = no_table(err, "offsetTable");
  if (rc != RMQ_OK) return rc;
  for (int i = 0; i < max_levels; i++) {
    if (d.seen[i]) offsets[i] = d.offsets[i];
  }
  return RMQ_OK;
}

/* ------------------------------------------------------- consumerOffset */

typedef struct offsets_ctx {
  bool table; /* the offsetTable member was there */
  int (*fn)(void *ctx, const rmq_consumer_offset *o);
  void *ctx;
  size_t before; /* entries whose offset ends at or past this byte are not taken (salvage) */
  rmq_consumer_offset o;
} offsets_ctx;

static int offsets_queue(cj *r, const char *key, size_t key_pos, void *ctx) {
  offsets_ctx *c = ctx;
  int64_t queue_id;
  int rc = cj_key_int(r, key, key_pos, 0, INT32_MAX, "queue id", &queue_id);
  if (rc == RMQ_OK) rc = cj_int(r, 0, INT64_MAX, "offset", &c->o.offset);
  if (rc != RMQ_OK || c->fn == NULL || r->pos >= c->before) return rc;
  c->o.queue_id = (int32_t)queue_id;
  return c->fn(c->ctx, &c->o);
}

static int offsets_group(cj *r, const char *key, size_t key_pos, void *ctx) {
  offsets_ctx *c = ctx;
  const char *at = strchr(key, '@');
  size_t topic_len = at ? (size_t)(at - key) : 0;
  if (at == NULL || !rmq_topic_valid(key, topic_len) || !rmq_group_valid(at + 1, strlen(at + 1))) {
    return cj_corrupt(r, key_pos,
                      "expected \"<topic>@<group>\" with a valid topic and group as the key, "
                      "found \"%.64s\"",
                      key);
  }
  memcpy(c->o.topic, key, topic_len);
  c->o.topic[topic_len] = '\0';
  snprintf(c->o.group, sizeof c->o.group, "%s", at + 1);
  return cj_object(r, offsets_queue, c);
}

static int offsets_top(cj *r, const char *key, size_t key_pos, void *ctx) {
  (void)key_pos;
  if (strcmp(key, "offsetTable") != 0) return cj_skip(r);
  ((offsets_ctx *)ctx)->table = true;
  return cj_object(r, offsets_group, ctx);
}

int rmq_consumer_offsets_parse(const char *text, size_t len,
                               int (*fn)(void *ctx, const rmq_consumer_offset *o), void *ctx,
                               rmq_err *err) {
  offsets_ctx c = {.fn = NULL, .ctx = ctx, .before = SIZE_MAX};
  int rc = cj_document(text, len, offsets_top, &c, err);
  if (rc == RMQ_OK && !c.table) rc = no_table(err, "offsetTable");
  if (rc != RMQ_OK || fn == NULL) return rc;
  c.fn = fn;
  return cj_document(text, len, offsets_top, &c, err);
}

/* ------------------------------------------------------------ topics.json */

typedef struct topics_ctx {
  bool table; /* the topicConfigTable member was there */
  int (*fn)(void *ctx, const rmq_topic_config *t);
  void *ctx;
  size_t before; /* topics whose object closes past this byte are not taken (salvage) */
  rmq_topic_config t;
} topics_ctx;

static int topics_int32(cj *r, const char *what, int64_t max, int32_t *out) {
  int64_t v;
  int rc = cj_int(r, 0, max, what, &v);
  if (rc == RMQ_OK) *out = (int32_t)v;
  return rc;
}

/* One field of TopicConfig. */
static int topics_field(cj *r, const char *key, size_t key_pos, void *ctx) {
  topics_ctx *c = ctx;
  (void)key_pos;
  if (strcmp(key, "readQueueNums") == 0) return topics_int32(r, key, INT32_MAX, &c->t.read_queues);
  if (strcmp(key, "writeQueueNums") == 0) {
    return topics_int32(r, key, INT32_MAX, &c->t.write_queues);
  }
  if (strcmp(key, "perm") == 0) return topics_int32(r, key, 15, &c->t.perm);
  if (strcmp(key, "topicSysFlag") == 0) return topics_int32(r, key, INT32_MAX, &c->t.sys_flag);
  if (strcmp(key, "order") == 0) return cj_bool(r, &c->t.order);
  if (strcmp(key, "topicName") != 0) return cj_skip(r);
  char name[RMQ_CONFIG_JSON_STRING + 1];
  cj_ws(r);
  size_t pos = r->pos;
  int rc = cj_string(r, name, sizeof name);
  if (rc == RMQ_OK && strcmp(name, c->t.topic) != 0) {
    return cj_corrupt(r, pos, "expected topicName \"%s\" as its key says, found \"%.64s\"",
                      c->t.topic, name);
  }
  return rc;
}

static int topics_topic(cj *r, const char *key, size_t key_pos, void *ctx) {
  topics_ctx *c = ctx;
  if (!rmq_topic_valid(key, strlen(key))) {
    return cj_corrupt(r, key_pos,
                      "expected a valid topic name (1..%d of [A-Za-z0-9_%%|-]) as the key, found "
                      "\"%.64s\"",
                      RMQ_MAX_TOPIC_LEN, key);
  }
  /* Zeroed whole, so that two parses of one topic compare equal byte for byte. */
  memset(&c->t, 0, sizeof c->t);
  c->t.read_queues = c->t.write_queues = 16;
  c->t.perm = 6;
  snprintf(c->t.topic, sizeof c->t.topic, "%s", key);
  int rc = cj_object(r, topics_field, c);
  /* Its closing '}' ends a topic's object: what follows it may be the damage. */
  if (rc != RMQ_OK || c->fn == NULL || r->pos > c->before) return rc;
  return c->fn(c->ctx, &c->t);
}

static int topics_top(cj *r, const char *key, size_t key_pos, void *ctx) {
  (void)key_pos;
  if (strcmp(key, "topicConfigTable") != 0) return cj_skip(r);
  ((topics_ctx *)ctx)->table = true;
  return cj_object(r, topics_topic, ctx);
}

int rmq_topic_configs_parse(const char *text, size_t len,
                            int (*fn)(void *ctx, const rmq_topic_config *t), void *ctx,
                            rmq_err *err) {
  topics_ctx c = {.fn = NULL, .ctx = ctx, .before = SIZE_MAX};
  int rc = cj_document(text, len, topics_top, &c, err);
  if (rc == RMQ_OK && !c.table) rc = no_table(err, "topicConfigTable");
  if (rc != RMQ_OK || fn == NULL) return rc;
  c.fn = fn;
  return cj_document(text, len, topics_top, &c, err);
}

/* ---------------------------------------------------------------- salvage */

/* Walk the text to find where it breaks: d->at -1 for a sound text. Other failures as they are. */
static int find_damage(const char *text, size_t len, cj_member_fn top, void *ctx, const bool *table,
                       const char *member, rmq_config_damage *d, rmq_err *err) {
  rmq_err why = {0};
  size_t at = 0;
  int rc = cj_walk(text, len, top, ctx, &why, &at);
  if (rc == RMQ_OK && !*table) rc = no_table(&why, member);
  d->at = -1;
  d->why[0] = '\0';
  if (rc == RMQ_ECORRUPT) {
    d->at = (int64_t)at;
    snprintf(d->why, sizeof d->why, "%.255s", why.msg);
    return RMQ_OK;
  }
  return rc == RMQ_OK ? RMQ_OK : rmq_err_set(err, rc, "%s", why.msg);
}

/* The limit of what a salvaging walk takes: everything of a sound text. */
static size_t before_damage(const rmq_config_damage *d) {
  return d->at < 0 ? SIZE_MAX : (size_t)d->at;
}

/*
** The walk that takes the entries, up to the damage find_damage found,
** where it stops again: that failure is expected. Other codes (fn's) as
** they are.
*/
static int take_entries(const char *text, size_t len, cj_member_fn top, void *ctx,
                        const rmq_config_damage *d, rmq_err *err) {
  rmq_err walk = {0};
  int rc = cj_document(text, len, top, ctx, &walk);
  if (rc == RMQ_OK || (rc == RMQ_ECORRUPT && d->at >= 0)) return RMQ_OK;
  return rmq_err_set(err, rc, "%s", walk.code ? walk.msg : rmq_strerror(rc));
}

int rmq_delay_offsets_salvage(const char *text, size_t len, int64_t *offsets, bool *seen,
                              rmq_config_damage *d, rmq_err *err) {
  delay_ctx c = {.before = SIZE_MAX};
  int rc = find_damage(text, len, delay_top, &c, &c.table, "offsetTable", d, err);
  if (rc != RMQ_OK || offsets == NULL) return rc;
  c = (delay_ctx){.before = before_damage(d)};
  rc = take_entries(text, len, delay_top, &c, d, err);
  for (int i = 0; rc == RMQ_OK && i < RMQ_MAX_DELAY_LEVELS; i++) {
    if (!c.seen[i]) continue;
    offsets[i] = c.offsets[i];
    seen[i] = true;
  }
  return rc;
}

int rmq_consumer_offsets_salvage(const char *text, size_t len,
                                 int (*fn)(void *ctx, const rmq_consumer_offset *o), void *ctx,
                                 rmq_config_damage *d, rmq_err *err) {
  offsets_ctx c = {.fn = NULL, .ctx = ctx, .before = SIZE_MAX};
  int rc = find_damage(text, len, offsets_top, &c, &c.table, "offsetTable", d, err);
  if (rc != RMQ_OK || fn == NULL) return rc;
  c.fn = fn;
  c.before = before_damage(d);
  return take_entries(text, len, offsets_top, &c, d, err);
}

int rmq_topic_configs_salvage(const char *text, size_t len,
                              int (*fn)(void *ctx, const rmq_topic_config *t), void *ctx,
                              rmq_config_damage *d, rmq_err *err) {
  topics_ctx c = {.fn = NULL, .ctx = ctx, .before = SIZE_MAX};
  int rc = find_damage(text, len, topics_top, &c, &c.table, "topicConfigTable", d, err);
  if (rc != RMQ_OK || fn == NULL) return rc;
  c.fn = fn;
  c.before = before_damage(d);
  return take_entries(text, len, topics_top, &c, d, err);
}

/* ---------------------------------------------------------------- writer */

typedef struct sb {
  char *p;
  size_t len, cap;
  bool oom;
} sb;

static void sb_add(sb *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) {
      b->oom = true;
      return;
    }
    b->p = p, b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static void sb_put(sb *b, const char *s) { sb_add(b, s, strlen(s)); }

/* Short formatted pieces: a number and its punctuation. */
__attribute__((format(printf, 2, 3))) static void sb_printf(sb *b, const char *fmt, ...) {
  char buf[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof buf) b->oom = true;
  sb_add(b, buf, (size_t)n);
}

/* A quoted string as fastjson escapes it. */
static void sb_string(sb *b, const char *s) {
  sb_put(b, "\"");
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    const char *e = c == '"'    ? "\\\""
                    : c == '\\' ? "\\\\"
                    : c == '\n' ? "\\n"
                    : c == '\r' ? "\\r"
                    : c == '\t' ? "\\t"
                                : NULL;
    if (e) {
      sb_put(b, e);
    } else if (c < 0x20) {
      sb_printf(b, "\\u%04x", c);
    } else {
      sb_add(b, s, 1);
    }
  }
  sb_put(b, "\"");
}

static char *sb_finish(sb *b) {
  if (!b->oom && b->p == NULL) sb_add(b, "", 0);
  if (!b->oom) return b->p;
  free(b->p);
  return NULL;
}

char *rmq_delay_offsets_format(const int64_t *offsets, int n) {
  sb b = {0};
  sb_put(&b, "{\n\t\"offsetTable\":{");
  for (int i = 0; i < n; i++) sb_printf(&b, "%s%d:%" PRId64, i ? "," : "", i + 1, offsets[i]);
  sb_put(&b, n > 0 ? "\n\t}\n}" : "}\n}");
  return sb_finish(&b);
}

static int cmp_key(const rmq_consumer_offset *a, const rmq_consumer_offset *b) {
  int c = strcmp(a->topic, b->topic);
  return c ? c : strcmp(a->group, b->group);
}

/* Orders entry indexes by topic, group, then index. */
static int cmp_by_key(const void *x, const void *y, void *entries) {
  const rmq_consumer_offset *e = entries;
  int a = *(const int *)x, b = *(const int *)y;
  int c = cmp_key(&e[a], &e[b]);
  return c ? c : (a > b) - (a < b);
}

/* One topic@group: the entries order[k..] that share entries[order[k]]'s key. */
static void offsets_group_format(sb *b, const rmq_consumer_offset *entries, int n, const int *order,
                                 int k) {
  const rmq_consumer_offset *head = &entries[order[k]];
  char key[sizeof head->topic + sizeof head->group + 1];
  snprintf(key, sizeof key, "%s@%s", head->topic, head->group);
  sb_string(b, key);
  sb_put(b, ":{");
  for (int j = k; j < n && cmp_key(&entries[order[j]], head) == 0; j++) {
    const rmq_consumer_offset *e = &entries[order[j]];
    sb_printf(b, "%s%" PRId32 ":%" PRId64, j > k ? "," : "", e->queue_id, e->offset);
  }
  sb_put(b, "\n\t\t}");
}

/*
** The entries sorted by key (order), and for each entry that is the first of
** its topic@group, where its group starts in order (-1 for the others).
*/
static void group_entries(const rmq_consumer_offset *entries, int n, int *order, int *start) {
  for (int i = 0; i < n; i++) order[i] = i, start[i] = -1;
  qsort_r(order, (size_t)n, sizeof *order, cmp_by_key, (void *)entries);
  for (int k = 0; k < n; k++) {
    if (k == 0 || cmp_key(&entries[order[k]], &entries[order[k - 1]]) != 0) start[order[k]] = k;
  }
}

char *rmq_consumer_offsets_format(const rmq_consumer_offset *entries, int n) {
  int *order = malloc(sizeof *order * (size_t)(n + 1)),
      *start = malloc(sizeof *start * (size_t)(n + 1));
  sb b = {.oom = order == NULL || start == NULL};
  if (!b.oom) group_entries(entries, n, order, start);
  sb_put(&b, "{\n\t\"offsetTable\":{");
  for (int i = 0, groups = 0; i < n && !b.oom; i++) {
    if (start[i] < 0) continue;
    sb_put(&b, groups++ ? ",\n\t\t" : "\n\t\t");
    offsets_group_format(&b, entries, n, order, start[i]);
  }
  sb_put(&b, n > 0 ? "\n\t}\n}" : "}\n}");
  free(order);
  free(start);
  return sb_finish(&b);
}

static void topic_config_format(sb *b, const rmq_topic_config *t) {
  sb_put(b, "\n\t\t");
  sb_string(b, t->topic);
  sb_printf(b, ":{\n\t\t\t\"order\":%s,\n\t\t\t\"perm\":%" PRId32 ",", t->order ? "true" : "false",
            t->perm);
  sb_printf(b, "\n\t\t\t\"readQueueNums\":%" PRId32 ",", t->read_queues);
  sb_put(b, "\n\t\t\t\"topicFilterType\":\"SINGLE_TAG\",\n\t\t\t\"topicName\":");
  sb_string(b, t->topic);
  sb_printf(b, ",\n\t\t\t\"topicSysFlag\":%" PRId32 ",", t->sys_flag);
  sb_printf(b, "\n\t\t\t\"writeQueueNums\":%" PRId32 "\n\t\t}", t->write_queues);
}

char *rmq_topic_configs_format(const rmq_topic_config *topics, int n, int64_t counter,
                               int64_t timestamp) {
  sb b = {0};
  sb_printf(&b, "{\n\t\"dataVersion\":{\n\t\t\"counter\":%" PRId64 ",", counter);
  sb_printf(&b, "\n\t\t\"timestamp\":%" PRId64 "\n\t},", timestamp);
  sb_put(&b, "\n\t\"topicConfigTable\":{");
  for (int i = 0; i < n; i++) {
    if (i) sb_put(&b, ",");
    topic_config_format(&b, &topics[i]);
  }
  sb_put(&b, n > 0 ? "\n\t}\n}" : "}\n}");
  return sb_finish(&b);
}
