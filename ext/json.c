/*
** json.c: the little JSON the extension speaks. Message properties appear
** in SQL as one JSON object of strings (rocketmq.properties,
** rocketmq_commitlog.properties), and an INSERT may give user properties
** as such an object.
*/
#include <string.h>

#include "rmq_ext.h"

/* ------------------------------------------------------------- output */

static void json_string(sqlite3_str *out, const char *s, size_t n) {
  sqlite3_str_appendchar(out, 1, '"');
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      sqlite3_str_appendf(out, "\\%c", c);
    } else if (c < 0x20) {
      sqlite3_str_appendf(out, "\\u%04x", c);
    } else {
      sqlite3_str_appendchar(out, 1, (char)c);
    }
  }
  sqlite3_str_appendchar(out, 1, '"');
}

char *rmqx_properties_json(const char *props, size_t len) {
  sqlite3_str *out = sqlite3_str_new(0);
  rmq_properties_iter it;
  const char *name, *value;
  size_t nlen, vlen;
  bool first = true;
  sqlite3_str_appendchar(out, 1, '{');
  rmq_properties_iter_init(&it, props, len);
  while (rmq_properties_next(&it, &name, &nlen, &value, &vlen)) {
    if (!first) sqlite3_str_appendchar(out, 1, ',');
    first = false;
    json_string(out, name, nlen);
    sqlite3_str_appendchar(out, 1, ':');
    json_string(out, value, vlen);
  }
  sqlite3_str_appendchar(out, 1, '}');
  return sqlite3_str_finish(out);
}

/* -------------------------------------------------------------- input */

typedef struct json_in {
  const char *start, *p, *end;
  char **errmsg;
} json_in;

static void skip_ws(json_in *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) {
    j->p++;
  }
}

static int json_fail(json_in *j, const char *what) {
  return rmqx_errmsg(j->errmsg, SQLITE_ERROR, "properties: %s at byte %d of the JSON text", what,
                     (int)(j->p - j->start));
}

static int hex4(const char *p, unsigned *out) {
  *out = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    int v = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (v < 0) return -1;
    *out = *out * 16 + (unsigned)v;
  }
  return 0;
}

static void put_utf8(sqlite3_str *s, unsigned cp) {
  char b[4];
  int n;
  if (cp < 0x80) {
    b[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    b[0] = (char)(0xC0 | cp >> 6);
    b[1] = (char)(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    b[0] = (char)(0xE0 | cp >> 12);
    b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    b[2] = (char)(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    b[0] = (char)(0xF0 | cp >> 18);
    b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    b[3] = (char)(0x80 | (cp & 0x3F));
    n = 4;
  }
  sqlite3_str_append(s, b, n);
}

/*
** A \u escape, with a surrogate pair joined into one code point. A lone
** surrogate is an error: it has no UTF-8 form, and the properties are text.
*/
static int unicode_escape(json_in *j, sqlite3_str *s) {
  unsigned cp, lo;
  if (j->end - j->p < 5 || hex4(j->p + 1, &cp) != 0) return json_fail(j, "bad \\u escape");
  if (cp >= 0xD800 && cp < 0xDC00 && j->end - j->p >= 11 && j->p[5] == '\\' && j->p[6] == 'u' &&
      hex4(j->p + 7, &lo) == 0 && lo >= 0xDC00 && lo < 0xE000) {
    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    j->p += 6;
  } else if (cp >= 0xD800 && cp < 0xE000) {
    return json_fail(j, "lone surrogate in a \\u escape");
  }
  j->p += 5;
  put_utf8(s, cp);
  return SQLITE_OK;
}

/* A JSON string at j->p into a new sqlite3_str result (*out, sqlite3_free it). */
static int parse_string(json_in *j, char **out, int *len) {
  if (j->p >= j->end || *j->p != '"') return json_fail(j, "expected a string");
  j->p++;
  sqlite3_str *s = sqlite3_str_new(0);
  int rc = SQLITE_OK;
  while (rc == SQLITE_OK && j->p < j->end && *j->p != '"') {
    char c = *j->p;
    if ((unsigned char)c < 0x20) {
      rc = json_fail(j, "control character in a string (write it as \\u00XX)");
      break;
    }
    if (c != '\\') {
      sqlite3_str_appendchar(s, 1, c);
      j->p++;
      continue;
    }
    if (++j->p >= j->end) break;
    const char *esc = strchr("\"\\/bfnrt", *j->p);
    if (*j->p == 'u') {
      rc = unicode_escape(j, s);
      continue;
    }
    if (!esc || !*j->p) {
      rc = json_fail(j, "bad escape");
      break;
    }
    sqlite3_str_appendchar(s, 1, "\"\\/\b\f\n\r\t"[esc - "\"\\/bfnrt"]);
    j->p++;
  }
  if (rc == SQLITE_OK && (j->p >= j->end || *j->p != '"')) rc = json_fail(j, "unterminated string");
  *len = sqlite3_str_length(s);
  *out = sqlite3_str_finish(s);
  if (rc == SQLITE_OK && !*out) *out = sqlite3_mprintf("%s", "");
  if (rc != SQLITE_OK) {
    sqlite3_free(*out);
    *out = NULL;
  } else {
    j->p++;
  }
  return rc;
}

static size_t digits(const char *p, const char *end) {
  const char *q = p;
  while (q < end && *q >= '0' && *q <= '9') q++;
  return (size_t)(q - p);
}

/* Length of the JSON number at p (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?), or 0. */
static size_t number_length(const char *p, const char *end) {
  const char *q = p + (p < end && *p == '-');
  size_t n = digits(q, end);
  if (n == 0 || (n > 1 && *q == '0')) return 0;
  q += n;
  if (q < end && *q == '.') {
    if ((n = digits(q + 1, end)) == 0) return 0;
    q += 1 + n;
  }
  if (q < end && (*q == 'e' || *q == 'E')) {
    const char *e = q + 1 + (q + 1 < end && (q[1] == '+' || q[1] == '-'));
    if ((n = digits(e, end)) == 0) return 0;
    q = e + n;
  }
  return (size_t)(q - p);
}

/* A scalar value: string, number (kept as written), true or false; null gives NULL. */
static int parse_value(json_in *j, char **out, int *len) {
  if (j->p < j->end && *j->p == '"') return parse_string(j, out, len);
  const char *start = j->p;
  while (j->p < j->end && strchr(",} \t\r\n", *j->p) == NULL) j->p++;
  size_t n = (size_t)(j->p - start);
  if (n == 4 && memcmp(start, "null", 4) == 0) {
    *out = NULL;
    return SQLITE_OK;
  }
  bool number = n > 0 && number_length(start, j->end) == n;
  bool boolean = (n == 4 && memcmp(start, "true", 4) == 0) ||
                 (n == 5 && memcmp(start, "false", 5) == 0);
  if (!number && !boolean) {
    j->p = start;
    return json_fail(j, "a value must be a string, a number or true/false");
  }
  *out = sqlite3_mprintf("%.*s", (int)n, start);
  *len = (int)n;
  return SQLITE_OK;
}

int rmqx_properties_from_json(const char *text, rmqx_json_pair_cb cb, void *ctx, char **errmsg) {
  json_in j = {text, text, text + strlen(text), errmsg};
  skip_ws(&j);
  if (j.p >= j.end || *j.p != '{') return json_fail(&j, "expected a JSON object");
  j.p++;
  skip_ws(&j);
  int rc = SQLITE_OK;
  bool first = true;
  while (rc == SQLITE_OK && j.p < j.end && *j.p != '}') {
    if (!first) {
      if (*j.p != ',') return json_fail(&j, "expected ',' or '}'");
      j.p++;
      skip_ws(&j);
    }
    first = false;
    char *name = NULL, *value = NULL;
    int nlen = 0, vlen = 0;
    rc = parse_string(&j, &name, &nlen);
    skip_ws(&j);
    if (rc == SQLITE_OK && (j.p >= j.end || *j.p != ':')) rc = json_fail(&j, "expected ':'");
    if (rc == SQLITE_OK) j.p++;
    skip_ws(&j);
    if (rc == SQLITE_OK) rc = parse_value(&j, &value, &vlen);
    if (rc == SQLITE_OK && value) rc = cb(ctx, name, (size_t)nlen, value, (size_t)vlen, errmsg);
    sqlite3_free(name);
    sqlite3_free(value);
    skip_ws(&j);
  }
  if (rc == SQLITE_OK && (j.p >= j.end || *j.p != '}')) return json_fail(&j, "unterminated object");
  if (rc == SQLITE_OK) {
    j.p++;
    skip_ws(&j);
    if (j.p != j.end) return json_fail(&j, "text after the object");
  }
  return rc;
}
