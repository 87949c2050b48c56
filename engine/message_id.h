/*
** message_id.h: hosts and the offset msgId (MessageDecoder.createMessageId,
** decodeMessageId): the store host's address and port and the record's
** CommitLog offset, in upper-case hex.
*/
#ifndef RMQ_MESSAGE_ID_H
#define RMQ_MESSAGE_ID_H

#include <stddef.h>
#include <stdint.h>

#include "message.h"

/* Parse "a.b.c.d:port" or "[v6]:port"; returns 0, or -1 when malformed. */
int rmq_host_parse(const char *s, rmq_host *out);
/* Format as "a.b.c.d:port" or "[v6]:port" into buf (at least 64 bytes). */
void rmq_host_format(const rmq_host *h, char *buf, size_t cap);

/* Offset msgId: store host bytes + port + offset, upper-case hex (33 or 57 bytes with NUL). */
#define RMQ_MSG_ID_MAX 57
void rmq_msg_id_format(const rmq_host *store_host, int64_t offset, char out[RMQ_MSG_ID_MAX]);
/* Decode a msgId (32 hex chars: IPv4, 56: IPv6, case-insensitive); returns 0 or -1. */
int rmq_msg_id_parse(const char *hex, size_t len, rmq_host *store_host, int64_t *offset);

/* UtilAll.bytes2string: n bytes as 2n upper-case hex digits (no NUL); returns the end. */
char *rmq_bytes2string(char *out, const uint8_t *bytes, size_t n);

#endif
