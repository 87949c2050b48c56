/*
** properties.c: a message's properties string, parsed in place (nothing is
** copied: values point into the record) and built by appending pairs.
*/
#include "properties.h"

#include <string.h>
#include <strings.h>

void rmq_properties_iter_init(rmq_properties_iter *it, const char *props, size_t len) {
  it->p = props;
  it->end = props + len;
}

bool rmq_properties_next(rmq_properties_iter *it, const char **name, size_t *name_len,
                         const char **value, size_t *value_len) {
  while (it->p < it->end) {
    const char *seg = it->p;
    const char *sep = memchr(seg, RMQ_PROPERTY_SEPARATOR, (size_t)(it->end - seg));
    const char *seg_end = sep ? sep : it->end;
    it->p = sep ? sep + 1 : it->end;
    /* A non-empty name and value imply Java's "at least 3 chars" rule. */
    const char *kv = memchr(seg, RMQ_NAME_VALUE_SEPARATOR, (size_t)(seg_end - seg));
    if (kv == NULL || kv == seg || kv + 1 == seg_end) continue;
    *name = seg;
    *name_len = (size_t)(kv - seg);
    *value = kv + 1;
    *value_len = (size_t)(seg_end - kv - 1);
    return true;
  }
  return false;
}

void rmq_properties_find(const char *props, size_t len, const char *const *names, int n,
                         rmq_property_value *out) {
  for (int i = 0; i < n; i++) out[i] = (rmq_property_value){NULL, 0};
  const char *name, *value;
  size_t nl, vl;
  rmq_properties_iter it;
  rmq_properties_iter_init(&it, props, len);
  while (rmq_properties_next(&it, &name, &nl, &value, &vl)) {
    for (int i = 0; i < n; i++) { /* keep going: the last one wins */
      /* name is never empty (the iterator skips those); most names differ in byte 0 */
      if (names[i][0] == name[0] && strlen(names[i]) == nl && memcmp(name, names[i], nl) == 0) {
        out[i] = (rmq_property_value){value, vl};
      }
    }
  }
}

const char *rmq_properties_get(const char *props, size_t len, const char *name, size_t *value_len) {
  rmq_property_value v;
  rmq_properties_find(props, len, &name, 1, &v);
  if (v.value) *value_len = v.len;
  return v.value;
}

bool rmq_properties_has_separator(const char *s, size_t n) {
  /* Most names and values are short: a plain loop beats two memchr calls there. */
  if (n >= 32) {
    return memchr(s, RMQ_NAME_VALUE_SEPARATOR, n) || memchr(s, RMQ_PROPERTY_SEPARATOR, n);
  }
  for (size_t i = 0; i < n; i++) {
    if ((unsigned char)s[i] - 1u < 2u) return true; /* the separators are 1 and 2 */
  }
  return false;
}

int rmq_properties_put(char *buf, size_t cap, size_t *len, const char *name, size_t name_len,
                       const char *value, size_t value_len) {
  size_t sep = *len > 0;
  if (*len > cap || sep + name_len + 1 + value_len > cap - *len) return -1;
  char *p = buf + *len;
  if (sep) *p++ = RMQ_PROPERTY_SEPARATOR;
  memcpy(p, name, name_len);
  p += name_len;
  *p++ = RMQ_NAME_VALUE_SEPARATOR;
  memcpy(p, value, value_len);
  *len = (size_t)(p + value_len - buf);
  return 0;
}

int rmq_properties_append(char *buf, size_t cap, size_t *len, const char *name, size_t name_len,
                          const char *value, size_t value_len) {
  if (rmq_properties_has_separator(name, name_len) ||
      rmq_properties_has_separator(value, value_len)) {
    return -1;
  }
  return rmq_properties_put(buf, cap, len, name, name_len, value, value_len);
}

bool rmq_message_waits(const rmq_message *m) {
  /* Asked of every put: most have no WAIT at all, which one memmem tells. */
  static const char name[] = {'W', 'A', 'I', 'T', RMQ_NAME_VALUE_SEPARATOR};
  if (!m->properties || !memmem(m->properties, (size_t)m->properties_len, name, sizeof name)) {
    return true;
  }
  size_t n = 0;
  const char *v = rmq_properties_get(m->properties, (size_t)m->properties_len, RMQ_PROPERTY_WAIT,
                                     &n);
  return v == NULL || (n == 4 && strncasecmp(v, "true", 4) == 0);
}

bool rmq_properties_have_key(const char *props, size_t len, const char *key, size_t key_len) {
  size_t n;
  const char *p = rmq_properties_get(props, len, RMQ_PROPERTY_UNIQ_KEY, &n);
  if (p && n == key_len && memcmp(p, key, n) == 0) return true;
  p = rmq_properties_get(props, len, RMQ_PROPERTY_KEYS, &n);
  for (const char *end = p + (p ? n : 0); p && p < end;) {
    const char *sp = memchr(p, ' ', (size_t)(end - p));
    const char *tok_end = sp ? sp : end;
    if ((size_t)(tok_end - p) == key_len && memcmp(p, key, key_len) == 0) return true;
    p = tok_end + 1;
  }
  return false;
}
