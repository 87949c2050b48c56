/*
** message.c: the CommitLog record codec (spec §2, §3, §4, §14).
**
** Encoding writes a version-1 record exactly as CommitLog.MessageExtEncoder
** (4.9.7) does. It never allocates: one length check, then straight-line
** stores, because it runs once per message on the put path.
**
** Decoding validates like CommitLog.checkMessageAndReturnSize (spec §8.2)
** and reads nothing outside [buf, buf + avail):
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
**
** Text: on-disk strings are UTF-8; Java hashes UTF-16 units, so the hash
** decodes UTF-8 on the fly, replacing malformed input with U+FFFD the way
** the JDK's UTF-8 decoder does (one per maximal valid prefix; an encoded
** surrogate is one U+FFFD for its three bytes).
*/
#include "message.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "crc32.h"

/* calMsgLength with every variable length 0 and IPv4 hosts. */
#define MIN_RECORD_LEN 91

/* ---------------------------------------------------------------- hosts */

static int parse_port(const char *s, int32_t *port) {
  int32_t v = 0;
  size_t n = 0;
  for (; s[n] >= '0' && s[n] <= '9'; n++) {
    if (n == 5) return -1;
    v = v * 10 + (s[n] - '0');
  }
  if (n == 0 || s[n] != '\0' || v > 65535) return -1;
  *port = v;
  return 0;
}

int rmq_host_parse(const char *s, rmq_host *out) {
  char addr[INET6_ADDRSTRLEN];
  const char *addr_start = s, *addr_end, *port;
  rmq_host h = {0};
  if (s[0] == '[') {
    addr_start = s + 1;
    addr_end = strchr(addr_start, ']');
    if (addr_end == NULL || addr_end[1] != ':') return -1;
    port = addr_end + 2;
    h.v6 = true;
  } else {
    addr_end = strrchr(s, ':');
    if (addr_end == NULL) return -1;
    port = addr_end + 1;
  }
  size_t n = (size_t)(addr_end - addr_start);
  if (n == 0 || n >= sizeof addr) return -1;
  memcpy(addr, addr_start, n);
  addr[n] = '\0';
  if (inet_pton(h.v6 ? AF_INET6 : AF_INET, addr, h.addr) != 1) return -1;
  if (parse_port(port, &h.port) != 0) return -1;
  *out = h;
  return 0;
}

void rmq_host_format(const rmq_host *h, char *buf, size_t cap) {
  char addr[INET6_ADDRSTRLEN];
  inet_ntop(h->v6 ? AF_INET6 : AF_INET, h->addr, addr, sizeof addr);
  snprintf(buf, cap, h->v6 ? "[%s]:%d" : "%s:%d", addr, (int)h->port);
}

/* ------------------------------------------------------------- encoding */

static int32_t host_len(bool v6) { return v6 ? 20 : 8; }

/* 72 + B + S is everything up to the body: the fixed fields, both hosts and
** BODYLENGTH (spec §2.3 prints 72 + B + S for the part before BODYLENGTH,
** which is 68 + B + S; its total, 75 + B + S + lengths, is right). */
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
  /* Java checks the CRC only when there is a body (CL 343-353). */
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

  if (rmq_message_length(out->sys_flag, out->body_len, out->topic_len, out->properties_len,
                         v2) != size)
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

/* ---------------------------------------------------------- Java hashes */

static bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

/*
** Decodes one code point from s[0..n), n >= 1, and returns the bytes used.
** Malformed input gives U+FFFD for its longest valid prefix (at least one
** byte), as the JDK's UTF-8 decoder does; the second-byte ranges reject
** overlong forms and code points above U+10FFFF.
*/
static size_t utf8_next(const uint8_t *s, size_t n, uint32_t *cp) {
  uint8_t b = s[0];
  *cp = 0xFFFD;
  if (b < 0xC2) { /* ASCII is the caller's fast path; 80..C1 never start a sequence */
    if (b < 0x80) *cp = b;
    return 1;
  }
  if (n < 2 || !is_cont(s[1])) return 1;
  if (b < 0xE0) {
    *cp = (uint32_t)(b & 0x1F) << 6 | (s[1] & 0x3F);
    return 2;
  }
  if (b < 0xF0) {
    if (b == 0xE0 && s[1] < 0xA0) return 1;
    if (n < 3 || !is_cont(s[2])) return 2;
    uint32_t c = (uint32_t)(b & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
    if (c < 0xD800 || c > 0xDFFF) *cp = c; /* an encoded surrogate stays U+FFFD */
    return 3;
  }
  if (b > 0xF4 || (b == 0xF0 && s[1] < 0x90) || (b == 0xF4 && s[1] > 0x8F)) return 1;
  if (n < 3 || !is_cont(s[2])) return 2;
  if (n < 4 || !is_cont(s[3])) return 3;
  *cp = (uint32_t)(b & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 |
        (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
  return 4;
}

/* Continues String.hashCode's h = 31*h + unit over the UTF-16 units of s. */
static uint32_t hash_utf8(uint32_t h, const char *text, size_t len) {
  const uint8_t *s = (const uint8_t *)text;
  size_t i = 0;
  while (i < len) {
    if (s[i] < 0x80) {
      h = h * 31 + s[i++];
      continue;
    }
    uint32_t cp;
    i += utf8_next(s + i, len - i, &cp);
    if (cp < 0x10000) {
      h = h * 31 + cp;
    } else {
      cp -= 0x10000;
      h = h * 31 + (0xD800 + (cp >> 10));
      h = h * 31 + (0xDC00 + (cp & 0x3FF));
    }
  }
  return h;
}

int32_t rmq_java_hash(const char *utf8, size_t len) {
  return (int32_t)hash_utf8(0, utf8, len);
}

int64_t rmq_tags_code(const char *tags, size_t len) {
  return tags ? rmq_java_hash(tags, len) : 0;
}

int32_t rmq_index_key_hash(const char *topic, size_t topic_len, const char *key,
                           size_t key_len) {
  /* Hashing topic, '#', key in turn equals hashing the joined string. */
  uint32_t h = hash_utf8(0, topic, topic_len);
  h = hash_utf8(h * 31 + '#', key, key_len);
  int32_t v = (int32_t)h;
  /* IndexFile: Math.abs, and abs(Integer.MIN_VALUE) < 0 becomes 0. */
  return v == INT32_MIN ? 0 : (v < 0 ? -v : v);
}

/* ----------------------------------------------------------- properties */

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

const char *rmq_properties_get(const char *props, size_t len, const char *name,
                               size_t *value_len) {
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

int rmq_properties_append(char *buf, size_t cap, size_t *len, const char *name,
                          size_t name_len, const char *value, size_t value_len) {
  if (rmq_properties_has_separator(name, name_len) ||
      rmq_properties_has_separator(value, value_len)) {
    return -1;
  }
  return rmq_properties_put(buf, cap, len, name, name_len, value, value_len);
}

/* --------------------------------------------------------------- msgId */

static const char HEX[] = "0123456789ABCDEF";

static char *hex_bytes(char *out, const uint8_t *bytes, size_t n) {
  for (size_t i = 0; i < n; i++) {
    *out++ = HEX[bytes[i] >> 4];
    *out++ = HEX[bytes[i] & 0xF];
  }
  return out;
}

void rmq_msg_id_format(const rmq_host *store_host, int64_t offset, char out[RMQ_MSG_ID_MAX]) {
  uint8_t tail[12];
  rmq_put32(tail, store_host->port);
  rmq_put64(tail + 4, offset);
  char *p = hex_bytes(out, store_host->addr, store_host->v6 ? 16 : 4);
  p = hex_bytes(p, tail, sizeof tail);
  *p = '\0';
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

int rmq_msg_id_parse(const char *hex, size_t len, rmq_host *store_host, int64_t *offset) {
  uint8_t bytes[28];
  if (len != 32 && len != 56) return -1;
  for (size_t i = 0; i < len / 2; i++) {
    int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return -1;
    bytes[i] = (uint8_t)(hi << 4 | lo);
  }
  size_t addr_len = len == 32 ? 4 : 16;
  *store_host = (rmq_host){.v6 = addr_len == 16};
  memcpy(store_host->addr, bytes, addr_len);
  store_host->port = rmq_get32(bytes + addr_len);
  *offset = rmq_get64(bytes + addr_len + 4);
  return 0;
}

/* ------------------------------------------------------------- UNIQ_KEY */

/*
** The first bytes of every id (IP, pid, a random int32) are fixed for the
** process, as Java keeps them in static fields; the counter is process-wide
** too, so that two generators never hand out the same id.
*/
static char uniq_prefix[45]; /* 20 or 44 hex digits */
static size_t uniq_prefix_len;
static atomic_uint uniq_counter;
static pthread_once_t uniq_once = PTHREAD_ONCE_INIT;

struct rmq_uniq_key_gen {
  /* The local month holding "now": its start in epoch seconds << 24 | its
  ** length in seconds (at most 31 days + 1 h < 2^24). One word, so that a
  ** reader never pairs the start of one month with the end of another. */
  _Atomic uint64_t month;
};

/* UtilAll.ipCheck: class A (not loopback), B or C, minus a few placeholder patterns. */
static bool ipv4_usable(const uint8_t *ip) {
  if (ip[0] >= 1 && ip[0] <= 126) {
    if (ip[1] == 1 && ip[2] == 1 && ip[3] == 1) return false;
    return !(ip[1] == 0 && ip[2] == 0 && ip[3] == 0);
  }
  if (ip[0] >= 128 && ip[0] <= 223) {
    if (ip[2] == 1 && ip[3] == 1) return false;
    return !(ip[2] == 0 && ip[3] == 0);
  }
  return false;
}

/* UtilAll.isInternalIP: 10/8, 172.16/12, 192.168/16. */
static bool ipv4_private(const uint8_t *ip) {
  return ip[0] == 10 || (ip[0] == 172 && (ip[1] & 0xF0) == 16) ||
         (ip[0] == 192 && ip[1] == 168);
}

static bool ipv6_usable(const struct in6_addr *a) {
  return !IN6_IS_ADDR_UNSPECIFIED(a) && !IN6_IS_ADDR_LOOPBACK(a) &&
         !IN6_IS_ADDR_LINKLOCAL(a) && !IN6_IS_ADDR_SITELOCAL(a);
}

/* UtilAll.getIP: first public IPv4, else a private IPv4, else an IPv6; 0 if none. */
static size_t local_ip(uint8_t ip[16]) {
  struct ifaddrs *list, *ifa;
  size_t found = 0; /* 0 none, 16 IPv6, 4 private IPv4 */
  if (getifaddrs(&list) != 0) return 0;
  for (ifa = list; ifa != NULL; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == NULL || !(ifa->ifa_flags & IFF_UP)) continue;
    if (ifa->ifa_addr->sa_family == AF_INET) {
      const uint8_t *a = (const uint8_t *)&((struct sockaddr_in *)ifa->ifa_addr)->sin_addr;
      if (!ipv4_usable(a) || (found == 4 && ipv4_private(a))) continue;
      memcpy(ip, a, 4);
      found = 4;
      if (!ipv4_private(a)) break;
    } else if (ifa->ifa_addr->sa_family == AF_INET6 && found == 0) {
      const struct in6_addr *a = &((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr;
      if (!ipv6_usable(a)) continue;
      memcpy(ip, a, 16);
      found = 16;
    }
  }
  freeifaddrs(list);
  return found;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void uniq_prefix_init(void) {
  uint8_t bytes[22];
  size_t ip_len = local_ip(bytes);
  if (ip_len == 0) { /* UtilAll.createFakeIP: the low 4 bytes of the time */
    rmq_put32(bytes, (int32_t)now_ms());
    ip_len = 4;
  }
  uint32_t rnd;
  if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
    rnd = (uint32_t)now_ms() ^ (uint32_t)getpid() << 16;
  bytes[ip_len] = (uint8_t)(getpid() >> 8);
  bytes[ip_len + 1] = (uint8_t)getpid();
  rmq_put32(bytes + ip_len + 2, (int32_t)rnd);
  uniq_prefix_len = (size_t)(hex_bytes(uniq_prefix, bytes, ip_len + 6) - uniq_prefix);
}

rmq_uniq_key_gen *rmq_uniq_key_gen_new(void) {
  pthread_once(&uniq_once, uniq_prefix_init);
  rmq_uniq_key_gen *g = malloc(sizeof *g);
  if (g) atomic_init(&g->month, 0); /* an empty month: the first id computes it */
  return g;
}

void rmq_uniq_key_gen_free(rmq_uniq_key_gen *g) { free(g); }

/* MessageClientIDSetter.setStartTime: 00:00 local time on day 1 of this month and the next. */
static uint64_t month_of(int64_t ms) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  localtime_r(&t, &tm);
  tm.tm_mday = 1;
  tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
  tm.tm_isdst = -1;
  time_t start = mktime(&tm);
  tm.tm_mon++;
  tm.tm_isdst = -1;
  time_t next = mktime(&tm);
  return (uint64_t)start << 24 | (uint64_t)(next - start);
}

int rmq_uniq_key_next(rmq_uniq_key_gen *g, char out[RMQ_MSG_ID_MAX]) {
  int64_t now = now_ms();
  uint64_t month = atomic_load_explicit(&g->month, memory_order_relaxed);
  int64_t start = (int64_t)(month >> 24) * 1000;
  if (now < start || now >= start + (int64_t)(month & 0xFFFFFF) * 1000) {
    month = month_of(now); /* racing threads compute the same value */
    atomic_store_explicit(&g->month, month, memory_order_relaxed);
    start = (int64_t)(month >> 24) * 1000;
  }
  uint8_t tail[6];
  rmq_put32(tail, (int32_t)(now - start));
  uint16_t counter = (uint16_t)atomic_fetch_add_explicit(&uniq_counter, 1, memory_order_relaxed);
  tail[4] = (uint8_t)(counter >> 8);
  tail[5] = (uint8_t)counter;
  memcpy(out, uniq_prefix, uniq_prefix_len);
  char *end = hex_bytes(out + uniq_prefix_len, tail, sizeof tail);
  *end = '\0';
  return (int)(end - out);
}

/* ----------------------------------------------------------- file names */

/* Writes v (>= 0) as exactly `width` decimal digits, keeping the low ones. */
static char *put_digits(char *out, int64_t v, int width) {
  for (int i = width - 1; i >= 0; i--) {
    out[i] = (char)('0' + v % 10);
    v /= 10;
  }
  return out + width;
}

void rmq_file_name(int64_t offset, char out[21]) {
  snprintf(out, 21, "%020" PRId64, offset);
}

int rmq_file_name_parse(const char *name, int64_t *offset) {
  int64_t v = 0;
  for (int i = 0; i < 20; i++) {
    if (name[i] < '0' || name[i] > '9') return -1;
    int d = name[i] - '0';
    if (v > (INT64_MAX - d) / 10) return -1; /* 20 digits can exceed int64 */
    v = v * 10 + d;
  }
  if (name[20] != '\0') return -1;
  *offset = v;
  return 0;
}

void rmq_index_file_name(int64_t ms, char out[18]) {
  int64_t sec = ms / 1000, milli = ms % 1000;
  if (milli < 0) { /* floor, for the (theoretical) times before 1970 */
    milli += 1000;
    sec--;
  }
  time_t t = (time_t)sec;
  struct tm tm;
  localtime_r(&t, &tm);
  char *p = put_digits(out, tm.tm_year + 1900, 4);
  p = put_digits(p, tm.tm_mon + 1, 2);
  p = put_digits(p, tm.tm_mday, 2);
  p = put_digits(p, tm.tm_hour, 2);
  p = put_digits(p, tm.tm_min, 2);
  p = put_digits(p, tm.tm_sec, 2);
  put_digits(p, milli, 3)[0] = '\0';
}

bool rmq_topic_valid(const char *topic, size_t len) {
  if (len < 1 || len > RMQ_MAX_TOPIC_LEN) return false;
  for (size_t i = 0; i < len; i++) {
    char c = topic[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '%' || c == '|';
    if (!ok) return false;
  }
  return true;
}
