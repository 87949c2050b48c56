/*
** properties.h: a message's properties string, "name\1value\2name\1value"
** (MessageDecoder.string2messageProperties and messageProperties2String).
*/
#ifndef RMQ_PROPERTIES_H
#define RMQ_PROPERTIES_H

#include <stdbool.h>
#include <stddef.h>

#include "rmq.h" /* the property names, find, iterate, put */

#define RMQ_NAME_VALUE_SEPARATOR '\001'
#define RMQ_PROPERTY_SEPARATOR '\002'

/*
** rmq_properties_get follows MessageDecoder 4.9.7: segments shorter than 3
** bytes and pairs with an empty name or value are ignored, a trailing \2 is
** accepted, and a later duplicate wins. Returns the value's start (not
** NUL-terminated) and its length, or NULL.
*/
const char *rmq_properties_get(const char *props, size_t len, const char *name, size_t *value_len);

/*
** Append "name\1value" (with a \2 before it when *len > 0) to buf.
** Returns 0, or -1 if it does not fit in cap or name/value contain \1 or \2.
*/
int rmq_properties_append(char *buf, size_t cap, size_t *len, const char *name, size_t name_len,
                          const char *value, size_t value_len);

#endif
