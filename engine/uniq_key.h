/*
** uniq_key.h: the UNIQ_KEY property's generator (MessageClientIDSetter).
*/
#ifndef RMQ_UNIQ_KEY_H
#define RMQ_UNIQ_KEY_H

#include "message_id.h"

/*
** UNIQ_KEY generator in MessageClientIDSetter's format: client
** IP (IPv4 preferred), pid low 16 bits, a per-process int32, ms since the
** start of the local month, a 16-bit counter. Thread-safe.
*/
typedef struct rmq_uniq_key_gen rmq_uniq_key_gen;
rmq_uniq_key_gen *rmq_uniq_key_gen_new(void);
void rmq_uniq_key_gen_free(rmq_uniq_key_gen *g);
/* Writes the id and a NUL (33 or 57 bytes); returns its length. */
int rmq_uniq_key_next(rmq_uniq_key_gen *g, char out[RMQ_MSG_ID_MAX]);

#endif
