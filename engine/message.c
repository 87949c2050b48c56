/*
** message.c: the CommitLog record codec.
**
** Encoding writes a version-1 record exactly as CommitLog.MessageExtEncoder
** (4.9.7) does. It never allocates: one length check, then straight-line
** stores, because it runs once per message on the put path.
**
** Decoding validates like CommitLog.checkMessageAndReturnSize and reads
** nothing outside [buf, buf + avail):
**
**   magic BLANK                         -> RMQ_DECODE_BLANK (total_size = its length)
**   magic neither v1, v2 nor BLANK      -> RMQ_DECODE_BAD_MAGIC
**   TOTALSIZE < 91 or > avail, a length
**     < 0, a field past TOTALSIZE       -> RMQ_DECODE_TRUNCATED
**   masked CRC32(body) != BODYCRC       -> RMQ_DECODE_BAD_CRC (check_crc, body non-empty)
**   calMsgLength != TOTALSIZE           -> RMQ_DECODE_BAD_LENGTH
**
** The checks run in Java's order (the CRC before the topic and the length
** comparison). Java reads a record in the rest of the mapped file, so a
** field that overruns TOTALSIZE but not the file is a length mismatch there;
** here every field must lie inside TOTALSIZE. Both end recovery, and
** TRUNCATED keeps a reader from skipping TOTALSIZE bytes of a record whose
** lengths contradict each other. Java also tolerates a negative body or
** properties length (it reads nothing); this decoder rejects them.
*/
#include "message.h"

#include <string.h>

#include "crc32.h"

/* calMsgLength with every variable length 0 and IPv4 hosts. */
#define MIN_RECORD_LEN 91

/* ------------------------------------------------------------- encoding */

static int32_t host_len(bool v6) { return v6 ? 20 : 8; }

/* CommitLog.calMsgLength: 72 + B + S (B, S: the born and store host sizes) is
** everything up to the body: the fixed fields, both hosts and BODYLENGTH. */
int32_t rmq_message_length(int32_t sys_flag, int32_t body_len, int32_t topic_len,
                           int32_t properties_len, bool v2) {
  /* Negative lengths count as 0, as in Java's calMsgLength; int64 so that
  ** a 2 GiB body is reported as too long instead of wrapping. */
  int64_t len = (int64_t)72 + host_len(sys_flag & RMQ_SYSFLAG_BORNHOST_V6) +
                host_len(sys_flag & RMQ_SYSFLAG_STOREHOST_V6) + (body_len > 0 ? body_len : 0) +
                (v2 ? 2 : 1) + topic_len + 2 + (properties_len > 0 ? properties_len : 0);
  return len > INT32_MAX ? -1 : (int32_t)len;
}

static uint8_t *put32(uint8_t *p, int32_t v) {
  rmq_put32(p, v);
  return p + 4;
}

static uint8_t *put64(uint8_t *p, int64_t v) {
  rmq_put64(p, v);
  return p + 8;
}

static uint8_t *put_bytes(uint8_t *p, const void *src, size_t n) {
  if (n > 0) memcpy(p, src, n); /* src may be NULL when n is 0 */
  return p + n;
}

static uint8_t *put_host(uint8_t *p, const rmq_host *h) {
  p = put_bytes(p, h->addr, h->v6 ? 16 : 4);
  return put32(p, h->port);
}

/* A v6 flag with an IPv4 host would make calMsgLength disagree with the bytes. */
static bool host_matches_flag(const rmq_host *h, int32_t sys_flag, int32_t v6_bit) {
  return h->v6 == ((sys_flag & v6_bit) != 0);
}

int32_t rmq_message_encode(const rmq_message *m, uint8_t *buf, size_t cap) {
  if (m->topic_len < 1 || m->topic_len > RMQ_MAX_TOPIC_LEN || m->properties_len < 0 ||
      m->properties_len > RMQ_MAX_PROPERTIES_LEN || m->body_len < 0)
    return -1;
  int32_t sys_flag = m->sys_flag | (m->born_host.v6 ? RMQ_SYSFLAG_BORNHOST_V6 : 0) |
                     (m->store_host.v6 ? RMQ_SYSFLAG_STOREHOST_V6 : 0);
  if (!host_matches_flag(&m->born_host, sys_flag, RMQ_SYSFLAG_BORNHOST_V6) ||
      !host_matches_flag(&m->store_host, sys_flag, RMQ_SYSFLAG_STOREHOST_V6))
    return -1;
  int32_t len = rmq_message_length(sys_flag, m->body_len, m->topic_len, m->properties_len, false);
  if (len < 0 || (size_t)len > cap) return -1;

  uint8_t *p = buf;
  p = put32(p, len);
  p = put32(p, RMQ_MAGIC_V1);
  p = put32(p, m->body_crc);
  p = put32(p, m->queue_id);
  p = put32(p, m->flag);
  p = put64(p, m->queue_offset);
  p = put64(p, m->physical_offset);
  p = put32(p, sys_flag);
  p = put64(p, m->born_timestamp);
  p = put_host(p, &m->born_host);
  p = put64(p, m->store_timestamp);
  p = put_host(p, &m->store_host);
  p = put32(p, m->reconsume_times);
  p = put64(p, m->prepared_transaction_offset);
  p = put32(p, m->body_len);
  p = put_bytes(p, m->body, (size_t)m->body_len);
  *p++ = (uint8_t)m->topic_len;
  p = put_bytes(p, m->topic, (size_t)m->topic_len);
  *p++ = (uint8_t)(m->properties_len >> 8);
  *p++ = (uint8_t)m->properties_len;
  put_bytes(p, m->properties, (size_t)m->properties_len);
  return len;
}

/* ------------------------------------------------------------- decoding */

static const uint8_t *get_host(const uint8_t *p, bool v6, rmq_host *h) {
  size_t n = v6 ? 16 : 4;
  h->v6 = v6;
  memcpy(h->addr, p, n);
  h->port = rmq_get32(p + n);
  return p + n + 4;
}

/*
** Reads BODYCRC .. PREPAREDTRANSACTIONOFFSET of a record of size >= 91 bytes.
** Returns where BODYLENGTH starts, or NULL when the host sizes that SYSFLAG
** announces leave no room for it.
*/
static const uint8_t *get_header(const uint8_t *buf, int32_t size, rmq_message *m) {
  m->body_crc = rmq_get32(buf + RMQ_POS_BODY_CRC);
  m->queue_id = rmq_get32(buf + RMQ_POS_QUEUE_ID);
  m->flag = rmq_get32(buf + RMQ_POS_FLAG);
  m->queue_offset = rmq_get64(buf + RMQ_POS_QUEUE_OFFSET);
  m->physical_offset = rmq_get64(buf + RMQ_POS_PHYSICAL_OFFSET);
  m->sys_flag = rmq_get32(buf + RMQ_POS_SYSFLAG);
  m->born_timestamp = rmq_get64(buf + RMQ_POS_BORN_TIMESTAMP);
  bool born_v6 = m->sys_flag & RMQ_SYSFLAG_BORNHOST_V6;
  bool store_v6 = m->sys_flag & RMQ_SYSFLAG_STOREHOST_V6;
  /* The fixed part plus BODYLENGTH must fit: 88 bytes with IPv4 hosts, 112 with IPv6. */
  if (72 + host_len(born_v6) + host_len(store_v6) > size) return NULL;
  const uint8_t *p = get_host(buf + RMQ_POS_BORN_HOST, born_v6, &m->born_host);
  m->store_timestamp = rmq_get64(p);
  p = get_host(p + 8, store_v6, &m->store_host);
  m->reconsume_times = rmq_get32(p);
  m->prepared_transaction_offset = rmq_get64(p + 4);
  return p + 12;
}

bool rmq_record_head_read(const uint8_t *rec, size_t room, rmq_record_head *h) {
  h->len = room >= MIN_RECORD_LEN ? rmq_get32(rec) : 0;
  if (h->len < MIN_RECORD_LEN || (size_t)h->len > room ||
      rmq_get32(rec + RMQ_POS_MAGIC) != RMQ_MAGIC_V1) {
    return false;
  }
  h->sys_flag = rmq_get32(rec + RMQ_POS_SYSFLAG);
  h->queue_id = rmq_get32(rec + RMQ_POS_QUEUE_ID);
  h->store_timestamp_at = RMQ_POS_STORE_TIMESTAMP(h->sys_flag);
  /* STOREHOST, RECONSUMETIMES and PREPAREDTRANSACTIONOFFSET lie between. */
  size_t body_len_at = h->store_timestamp_at + 8 +
                       (size_t)host_len(h->sys_flag & RMQ_SYSFLAG_STOREHOST_V6) + 12;
  /* IPv6 hosts that SYSFLAG claims can put BODYLENGTH past a short record. */
  if (body_len_at + 4 > (size_t)h->len) return false;
  size_t topic_at = body_len_at + 4 + (uint32_t)rmq_get32(rec + body_len_at);
  if (topic_at >= (size_t)h->len || topic_at + 1 + rec[topic_at] > (size_t)h->len) return false;
  h->topic = (const char *)rec + topic_at + 1;
  h->topic_len = rec[topic_at];
  return true;
}

rmq_decode_status rmq_message_decode(const uint8_t *buf, size_t avail, bool check_crc,
                                     rmq_message *out) {
  *out = (rmq_message){0};
  if (avail >= 4) out->total_size = rmq_get32(buf);
  if (avail < 8) return RMQ_DECODE_TRUNCATED;
  out->magic = rmq_get32(buf + RMQ_POS_MAGIC);
  if (out->magic == RMQ_MAGIC_BLANK) return RMQ_DECODE_BLANK;
  if (out->magic != RMQ_MAGIC_V1 && out->magic != RMQ_MAGIC_V2) return RMQ_DECODE_BAD_MAGIC;
  bool v2 = out->magic == RMQ_MAGIC_V2;
  int32_t size = out->total_size;
  if (size < MIN_RECORD_LEN || (size_t)size > avail) return RMQ_DECODE_TRUNCATED;

  const uint8_t *end = buf + size;
  const uint8_t *p = get_header(buf, size, out);
  if (p == NULL) return RMQ_DECODE_TRUNCATED;
  /* From here each length is checked against the bytes left before TOTALSIZE. */
  out->body_len = rmq_get32(p);
  p += 4;
  if (out->body_len < 0 || out->body_len > end - p) return RMQ_DECODE_TRUNCATED;
  out->body = p;
  p += out->body_len;
  /* Java checks the CRC only when there is a body. */
  if (check_crc && out->body_len > 0 &&
      rmq_body_crc(out->body, (size_t)out->body_len) != out->body_crc)
    return RMQ_DECODE_BAD_CRC;

  if ((v2 ? 2 : 1) > end - p) return RMQ_DECODE_TRUNCATED;
  out->topic_len = v2 ? (int16_t)(p[0] << 8 | p[1]) : (int8_t)p[0];
  p += v2 ? 2 : 1;
  if (out->topic_len < 0 || out->topic_len > end - p) return RMQ_DECODE_TRUNCATED;
  out->topic = (const char *)p;
  p += out->topic_len;

  if (2 > end - p) return RMQ_DECODE_TRUNCATED;
  out->properties_len = (int16_t)(p[0] << 8 | p[1]);
  p += 2;
  if (out->properties_len < 0 || out->properties_len > end - p) return RMQ_DECODE_TRUNCATED;
  out->properties = (const char *)p;

  if (rmq_message_length(out->sys_flag, out->body_len, out->topic_len, out->properties_len, v2) !=
      size)
    return RMQ_DECODE_BAD_LENGTH;
  return RMQ_DECODE_OK;
}

const char *rmq_decode_status_name(rmq_decode_status s) {
  switch (s) {
    case RMQ_DECODE_OK: return "OK";
    case RMQ_DECODE_BLANK: return "BLANK";
    case RMQ_DECODE_BAD_MAGIC: return "BAD_MAGIC";
    case RMQ_DECODE_TRUNCATED: return "TRUNCATED";
    case RMQ_DECODE_BAD_LENGTH: return "BAD_LENGTH";
    case RMQ_DECODE_BAD_CRC: return "BAD_CRC";
  }
  return "UNKNOWN";
}

int32_t rmq_body_crc(const void *bytes, size_t len) {
  return (int32_t)(rmq_crc32(bytes, len) & 0x7FFFFFFF);
}
