/*
** message.h: the CommitLog record codec (CommitLog.MessageExtEncoder,
** MessageDecoder, CommitLog.checkMessageAndReturnSize).
**
** Encodes version-1 records byte-for-byte as Apache RocketMQ 4.9 does and
** decodes v1 and v2 (5.x, int16 topic length) records. The decoder never
** trusts a length field: every length is checked against the bytes that
** exist before it is used. Also here: the masked body CRC and the big-endian
** helpers every file format uses. The codec needs only crc32.c; the
** properties string, msgIds, UNIQ_KEYs, file names and topic rules have
** their own files.
*/
#ifndef RMQ_MESSAGE_H
#define RMQ_MESSAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rmq.h" /* rmq_message, rmq_host, rmq_decode_status, the limits, rmq_body_crc */

#define RMQ_MAGIC_V1 ((int32_t)0xDAA320A7)
#define RMQ_MAGIC_V2 ((int32_t)0xDAA320AB)
#define RMQ_MAGIC_BLANK ((int32_t)0xCBD43194)

#define RMQ_SYSFLAG_COMPRESSED 0x1
#define RMQ_SYSFLAG_MULTI_TAGS 0x2
#define RMQ_SYSFLAG_TRANSACTION_MASK 0xC
#define RMQ_SYSFLAG_TRANSACTION_NOT_TYPE 0x0
#define RMQ_SYSFLAG_TRANSACTION_PREPARED 0x4
#define RMQ_SYSFLAG_TRANSACTION_COMMIT 0x8
#define RMQ_SYSFLAG_TRANSACTION_ROLLBACK 0xC
#define RMQ_SYSFLAG_BORNHOST_V6 0x10
#define RMQ_SYSFLAG_STOREHOST_V6 0x20

#define RMQ_END_FILE_MIN_BLANK_LENGTH 8

/* Fixed positions inside a record (MessageDecoder). */
#define RMQ_POS_TOTAL_SIZE 0
#define RMQ_POS_MAGIC 4
#define RMQ_POS_BODY_CRC 8
#define RMQ_POS_QUEUE_ID 12
#define RMQ_POS_FLAG 16
#define RMQ_POS_QUEUE_OFFSET 20
#define RMQ_POS_PHYSICAL_OFFSET 28
#define RMQ_POS_SYSFLAG 36
#define RMQ_POS_BORN_TIMESTAMP 40
#define RMQ_POS_BORN_HOST 48
/* STORETIMESTAMP sits at 48 + born-host size: 56 (IPv4) or 68 (IPv6). */
#define RMQ_POS_STORE_TIMESTAMP(sys_flag) (48 + (((sys_flag)&RMQ_SYSFLAG_BORNHOST_V6) ? 20 : 8))

/* calMsgLength: the record size for these field sizes (v2: 2-byte topic length). */
int32_t rmq_message_length(int32_t sys_flag, int32_t body_len, int32_t topic_len,
                           int32_t properties_len, bool v2);

/*
** Encode m as a v1 record into buf. The host-v6 bits of sys_flag are set
** from the hosts (never cleared, as MessageExtEncoder). body_crc is written as
** given. Returns the record length, or -1 if cap is too small or a length
** is out of range (topic 1..127, properties 0..32767, body >= 0).
*/
int32_t rmq_message_encode(const rmq_message *m, uint8_t *buf, size_t cap);

/* What a put of encoded records reads of a v1 record, and where its store time goes. */
typedef struct rmq_record_head {
  int32_t len, sys_flag, queue_id;
  const char *topic;
  size_t topic_len;
  size_t store_timestamp_at;
} rmq_record_head;

/*
** Read the head of the v1 record at rec (at most room bytes) without
** decoding it; false if it is not a whole v1 record with its topic inside.
*/
bool rmq_record_head_read(const uint8_t *rec, size_t room, rmq_record_head *h);

/*
** Decode the record at buf, of which avail bytes exist. On OK, out holds
** every field; on other statuses out->total_size and out->magic hold what
** could be read (or 0). Never reads past buf + avail.
*/
rmq_decode_status rmq_message_decode(const uint8_t *buf, size_t avail, bool check_crc,
                                     rmq_message *out);

/* Big-endian helpers shared by every file format. */
static inline int32_t rmq_get32(const uint8_t *p) {
  return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}
static inline int64_t rmq_get64(const uint8_t *p) {
  return (int64_t)((uint64_t)(uint32_t)rmq_get32(p) << 32 | (uint32_t)rmq_get32(p + 4));
}
static inline void rmq_put32(uint8_t *p, int32_t v) {
  uint32_t u = (uint32_t)v;
  p[0] = (uint8_t)(u >> 24);
  p[1] = (uint8_t)(u >> 16);
  p[2] = (uint8_t)(u >> 8);
  p[3] = (uint8_t)u;
}
static inline void rmq_put64(uint8_t *p, int64_t v) {
  rmq_put32(p, (int32_t)((uint64_t)v >> 32));
  rmq_put32(p + 4, (int32_t)(uint64_t)v);
}

#endif
