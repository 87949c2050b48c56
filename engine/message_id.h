/*
** message_id.h: hosts and the offset msgId (MessageDecoder.createMessageId,
** decodeMessageId): the store host's address and port and the record's
** CommitLog offset, in upper-case hex.
*/
#ifndef RMQ_MESSAGE_ID_H
#define RMQ_MESSAGE_ID_H

#include <stddef.h>
#include <stdint.h>

#include "rmq.h" /* hosts and msgIds; here, what only the engine uses */

/* UtilAll.bytes2string: n bytes as 2n upper-case hex digits (no NUL); returns the end. */
char *rmq_bytes2string(char *out, const uint8_t *bytes, size_t n);

#endif
