/*
** message.h: the CommitLog record codec (spec §2, §3, §4, §14).
**
** Encodes version-1 records byte-for-byte as Apache RocketMQ 4.9 does and
** decodes v1 and v2 (5.x, int16 topic length) records. The decoder never
** trusts a length field: every length is checked against the bytes that
** exist before it is used. Also here: the properties codec, the masked body
** CRC, Java's String.hashCode (the tags code and the index key hash), the
** offset msgId, UNIQ_KEY generation and file names.
*/
#ifndef RMQ_MESSAGE_H
#define RMQ_MESSAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

#define RMQ_MAX_TOPIC_LEN 127
#define RMQ_MAX_PROPERTIES_LEN 32767
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
#define RMQ_POS_STORE_TIMESTAMP(sys_flag) \
  (48 + (((sys_flag) & RMQ_SYSFLAG_BORNHOST_V6) ? 20 : 8))

/* Property names the store reads (spec §3.3). */
#define RMQ_PROPERTY_TAGS "TAGS"
#define RMQ_PROPERTY_KEYS "KEYS"
#define RMQ_PROPERTY_UNIQ_KEY "UNIQ_KEY"
#define RMQ_PROPERTY_DELAY "DELAY"
#define RMQ_PROPERTY_REAL_TOPIC "REAL_TOPIC"
#define RMQ_PROPERTY_REAL_QID "REAL_QID"
#define RMQ_NAME_VALUE_SEPARATOR '\001'
#define RMQ_PROPERTY_SEPARATOR '\002'

/* A host: IPv4 (4 address bytes) or IPv6 (16), and a port. */
typedef struct rmq_host {
  uint8_t addr[16];
  int32_t port;
  bool v6;
} rmq_host;

/* Parse "a.b.c.d:port" or "[v6]:port"; returns 0, or -1 when malformed. */
int rmq_host_parse(const char *s, rmq_host *out);
/* Format as "a.b.c.d:port" or "[v6]:port" into buf (at least 64 bytes). */
void rmq_host_format(const rmq_host *h, char *buf, size_t cap);

/*
** One record. Decoding fills it with pointers into the decoded buffer
** (nothing is copied); encoding reads it. total_size and magic are outputs
** of the encoder and ignored on input.
*/
typedef struct rmq_message {
  int32_t total_size;
  int32_t magic;
  int32_t body_crc;
  int32_t queue_id;
  int32_t flag;
  int64_t queue_offset;
  int64_t physical_offset;
  int32_t sys_flag;
  int64_t born_timestamp;
  rmq_host born_host;
  int64_t store_timestamp;
  rmq_host store_host;
  int32_t reconsume_times;
  int64_t prepared_transaction_offset;
  const uint8_t *body;
  int32_t body_len;
  const char *topic;
  int32_t topic_len;
  const char *properties;
  int32_t properties_len;
} rmq_message;

/* calMsgLength: the record size for these field sizes (v2: 2-byte topic length). */
int32_t rmq_message_length(int32_t sys_flag, int32_t body_len, int32_t topic_len,
                           int32_t properties_len, bool v2);

/*
** Encode m as a v1 record into buf. The host-v6 bits of sys_flag are set
** from the hosts (never cleared, as CL 652-660). body_crc is written as
** given. Returns the record length, or -1 if cap is too small or a length
** is out of range (topic 1..127, properties 0..32767, body >= 0).
*/
int32_t rmq_message_encode(const rmq_message *m, uint8_t *buf, size_t cap);

typedef enum rmq_decode_status {
  RMQ_DECODE_OK = 0,      /* a valid record; total_size bytes */
  RMQ_DECODE_BLANK,       /* end-of-segment BLANK; total_size = its length */
  RMQ_DECODE_BAD_MAGIC,   /* neither v1, v2 nor BLANK (zero bytes land here) */
  RMQ_DECODE_TRUNCATED,   /* a field or a length runs past the available bytes */
  RMQ_DECODE_BAD_LENGTH,  /* calMsgLength differs from TOTALSIZE */
  RMQ_DECODE_BAD_CRC      /* check_crc and the masked CRC32 of the body differs */
} rmq_decode_status;

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
const char *rmq_decode_status_name(rmq_decode_status s);

/* CRC32(bytes) & 0x7FFFFFFF, the stored BODYCRC. */
int32_t rmq_body_crc(const void *bytes, size_t len);

/* Java String.hashCode over the UTF-16 units of UTF-8 text (U+FFFD for bad sequences). */
int32_t rmq_java_hash(const char *utf8, size_t len);
/* tagsCode of a TAGS value: the Java hash sign-extended; 0 for empty/absent. */
int64_t rmq_tags_code(const char *tags, size_t len);
/* Index key hash of "topic#key": abs(javaHash), Integer.MIN_VALUE -> 0. */
int32_t rmq_index_key_hash(const char *topic, size_t topic_len, const char *key, size_t key_len);

/*
** Properties (spec §3): "name\1value\2name\1value". rmq_properties_get
** follows MessageDecoder 4.9.7: segments shorter than 3 bytes and pairs with
** an empty name or value are ignored, a trailing \2 is accepted, and a later
** duplicate wins. Returns the value's start (not NUL-terminated) and its
** length, or NULL.
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

/* Offset msgId: store host bytes + port + offset, upper-case hex (33 or 57 bytes with NUL). */
#define RMQ_MSG_ID_MAX 57
void rmq_msg_id_format(const rmq_host *store_host, int64_t offset, char out[RMQ_MSG_ID_MAX]);
/* Decode a msgId (32 hex chars: IPv4, 56: IPv6, case-insensitive); returns 0 or -1. */
int rmq_msg_id_parse(const char *hex, size_t len, rmq_host *store_host, int64_t *offset);

/*
** UNIQ_KEY generator in MessageClientIDSetter's format (spec §4.2): client
** IP (IPv4 preferred), pid low 16 bits, a per-process int32, ms since the
** start of the local month, a 16-bit counter. Thread-safe.
*/
typedef struct rmq_uniq_key_gen rmq_uniq_key_gen;
rmq_uniq_key_gen *rmq_uniq_key_gen_new(void);
void rmq_uniq_key_gen_free(rmq_uniq_key_gen *g);
/* Writes the id and a NUL (33 or 57 bytes); returns its length. */
int rmq_uniq_key_next(rmq_uniq_key_gen *g, char out[RMQ_MSG_ID_MAX]);

/* 20-digit zero-padded start offset, as CommitLog and ConsumeQueue files are named. */
void rmq_file_name(int64_t offset, char out[21]);
/* Parse such a name; returns 0, or -1 unless exactly 20 decimal digits. */
int rmq_file_name_parse(const char *name, int64_t *offset);
/* yyyyMMddHHmmssSSS of a ms timestamp in local time (index file names). */
void rmq_index_file_name(int64_t ms, char out[18]);

/* RocketMQ's topic rule: 1..127 bytes of [A-Za-z0-9_%|-]. */
bool rmq_topic_valid(const char *topic, size_t len);

/* Big-endian helpers shared by every file format. */
static inline int32_t rmq_get32(const uint8_t *p) {
  return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}
static inline int64_t rmq_get64(const uint8_t *p) {
  return (int64_t)((uint64_t)(uint32_t)rmq_get32(p) << 32 | (uint32_t)rmq_get32(p + 4));
}
static inline void rmq_put32(uint8_t *p, int32_t v) {
  uint32_t u = (uint32_t)v;
  p[0] = (uint8_t)(u >> 24); p[1] = (uint8_t)(u >> 16); p[2] = (uint8_t)(u >> 8); p[3] = (uint8_t)u;
}
static inline void rmq_put64(uint8_t *p, int64_t v) {
  rmq_put32(p, (int32_t)((uint64_t)v >> 32));
  rmq_put32(p + 4, (int32_t)(uint64_t)v);
}

#endif
