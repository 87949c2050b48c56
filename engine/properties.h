/*
** properties.h: a message's properties string, "name\1value\2name\1value"
** (MessageDecoder.string2messageProperties and messageProperties2String).
*/
#ifndef RMQ_PROPERTIES_H
#define RMQ_PROPERTIES_H

#include <stdbool.h>
#include <stddef.h>

/* Property names the store reads. */
#define RMQ_PROPERTY_TAGS "TAGS"
#define RMQ_PROPERTY_KEYS "KEYS"
#define RMQ_PROPERTY_UNIQ_KEY "UNIQ_KEY"
#define RMQ_PROPERTY_DELAY "DELAY"
#define RMQ_PROPERTY_REAL_TOPIC "REAL_TOPIC"
#define RMQ_PROPERTY_REAL_QID "REAL_QID"
#define RMQ_NAME_VALUE_SEPARATOR '\001'
#define RMQ_PROPERTY_SEPARATOR '\002'

/*
** rmq_properties_get follows MessageDecoder 4.9.7: segments shorter than 3
** bytes and pairs with an empty name or value are ignored, a trailing \2 is
** accepted, and a later duplicate wins. Returns the value's start (not
** NUL-terminated) and its length, or NULL.
*/
const char *rmq_properties_get(const char *props, size_t len, const char *name,
                               size_t *value_len);

/* A property's value as rmq_properties_find reports it; value NULL when absent. */
typedef struct rmq_property_value {
  const char *value;
  size_t len;
} rmq_property_value;
/*
** Look n names up in one pass over props (readers want several per record):
** out[i] receives names[i]'s value, by rmq_properties_get's rules.
*/
void rmq_properties_find(const char *props, size_t len, const char *const *names, int n,
                         rmq_property_value *out);

typedef struct rmq_properties_iter {
  const char *p, *end;
} rmq_properties_iter;
void rmq_properties_iter_init(rmq_properties_iter *it, const char *props, size_t len);
/* Next valid pair in stored order; returns false at the end. */
bool rmq_properties_next(rmq_properties_iter *it, const char **name, size_t *name_len,
                         const char **value, size_t *value_len);

/* True if s holds \1 or \2, which no property name or value may contain. */
bool rmq_properties_has_separator(const char *s, size_t n);

/*
** Append "name\1value" (with a \2 before it when *len > 0) to buf.
** Returns 0, or -1 if it does not fit in cap or name/value contain \1 or \2.
*/
int rmq_properties_append(char *buf, size_t cap, size_t *len, const char *name,
                          size_t name_len, const char *value, size_t value_len);
/* rmq_properties_append without the separator checks: for a name and value known to be clean. */
int rmq_properties_put(char *buf, size_t cap, size_t *len, const char *name, size_t name_len,
                       const char *value, size_t value_len);

#endif
