/*
** test_message.c: the record codec against fixed test vectors (values
** computed by RocketMQ's own code) and against damaged input.
**
** Covers the Java hashes, CRCs, magics and file names, a 178-byte record
** (MessageExtEncoder's output) byte for byte, IPv6 and v2 records, the
** properties rules of MessageDecoder.string2messageProperties, every truncation and several corruptions of a
** record (run under ASan to prove nothing is read out of bounds), msgIds,
** UNIQ_KEYs, hosts and topic names.
*/
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "check.h"
#include "crc32.h"
#include "file_name.h"
#include "message.h"
#include "message_id.h"
#include "properties.h"
#include "rmq.h"

/* ------------------------------------------------------------ helpers */

static size_t unhex(const char *hex, uint8_t *out) {
  size_t n = 0;
  for (const char *p = hex; *p; p++) {
    if (*p == ' ' || *p == '\n') continue;
    unsigned v;
    sscanf(p, "%2x", &v);
    out[n++] = (uint8_t)v;
    p++;
  }
  return n;
}

/* String.hashCode over explicit UTF-16 units. */
static int32_t units_hash(const uint16_t *u, size_t n) {
  uint32_t h = 0;
  for (size_t i = 0; i < n; i++) h = h * 31 + u[i];
  return (int32_t)h;
}

/* The 178-byte record: fields, then the full dump. */
static const char BODY_155[] = "Hello RocketMQ";
static const char TOPIC_155[] = "TopicTest";
static const char PROPS_155[] =
    "KEYS\001order-1\002TAGS\001TagA\002UNIQ_KEY\0017F00000112340A0B0C0D000010000001";
static const char DUMP_155[] = "00 00 00 B2 DA A3 20 A7 69 C8 65 ED 00 00 00 01"
                               "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
                               "00 00 00 00 00 00 00 00 00 00 01 8B CF E5 68 00"
                               "C0 A8 01 14 00 00 C8 22 00 00 01 8B CF E5 68 7B"
                               "C0 A8 01 0A 00 00 2A 9F 00 00 00 00 00 00 00 00"
                               "00 00 00 00 00 00 00 0E 48 65 6C 6C 6F 20 52 6F"
                               "63 6B 65 74 4D 51 09 54 6F 70 69 63 54 65 73 74"
                               "00 40 4B 45 59 53 01 6F 72 64 65 72 2D 31 02 54"
                               "41 47 53 01 54 61 67 41 02 55 4E 49 51 5F 4B 45"
                               "59 01 37 46 30 30 30 30 30 31 31 32 33 34 30 41"
                               "30 42 30 43 30 44 30 30 30 30 31 30 30 30 30 30"
                               "30 31";

static rmq_message message_155(void) {
  rmq_message m = {0};
  m.body_crc = rmq_body_crc(BODY_155, strlen(BODY_155));
  m.queue_id = 1;
  m.born_timestamp = 1700000000000;
  rmq_host_parse("192.168.1.20:51234", &m.born_host);
  m.store_timestamp = 1700000000123;
  rmq_host_parse("192.168.1.10:10911", &m.store_host);
  m.body = (const uint8_t *)BODY_155;
  m.body_len = (int32_t)strlen(BODY_155);
  m.topic = TOPIC_155;
  m.topic_len = (int32_t)strlen(TOPIC_155);
  m.properties = PROPS_155;
  m.properties_len = (int32_t)strlen(PROPS_155);
  return m;
}

static size_t dump_155(uint8_t *out) { return unhex(DUMP_155, out); }

/*
** Decodes exactly n bytes copied into a heap block of that size, so ASan sees
** over-reads. The copy lives until the next call, so out's pointers stay valid.
*/
static rmq_decode_status decode_exact(const uint8_t *bytes, size_t n, bool check_crc,
                                      rmq_message *out) {
  static uint8_t *copy;
  free(copy);
  copy = malloc(n ? n : 1);
  memcpy(copy, bytes, n);
  return rmq_message_decode(copy, n, check_crc, out);
}

static void check_same_message(const rmq_message *a, const rmq_message *b) {
  CHECK_EQ_INT(a->body_crc, b->body_crc);
  CHECK_EQ_INT(a->queue_id, b->queue_id);
  CHECK_EQ_INT(a->flag, b->flag);
  CHECK_EQ_INT(a->queue_offset, b->queue_offset);
  CHECK_EQ_INT(a->physical_offset, b->physical_offset);
  CHECK_EQ_INT(a->born_timestamp, b->born_timestamp);
  CHECK_EQ_INT(a->store_timestamp, b->store_timestamp);
  CHECK_EQ_INT(a->born_host.v6, b->born_host.v6);
  CHECK_EQ_MEM(a->born_host.addr, b->born_host.addr, a->born_host.v6 ? 16 : 4);
  CHECK_EQ_INT(a->born_host.port, b->born_host.port);
  CHECK_EQ_INT(a->store_host.v6, b->store_host.v6);
  CHECK_EQ_MEM(a->store_host.addr, b->store_host.addr, a->store_host.v6 ? 16 : 4);
  CHECK_EQ_INT(a->store_host.port, b->store_host.port);
  CHECK_EQ_INT(a->reconsume_times, b->reconsume_times);
  CHECK_EQ_INT(a->prepared_transaction_offset, b->prepared_transaction_offset);
  CHECK_EQ_INT(a->body_len, b->body_len);
  CHECK_EQ_MEM(a->body, b->body, (size_t)a->body_len);
  CHECK_EQ_INT(a->topic_len, b->topic_len);
  CHECK_EQ_MEM(a->topic, b->topic, (size_t)a->topic_len);
  CHECK_EQ_INT(a->properties_len, b->properties_len);
  CHECK_EQ_MEM(a->properties, b->properties, (size_t)a->properties_len);
}

/* ---------------------------------------------------------- Java hash */

static void test_java_hash(void) {
  static const struct {
    const char *s;
    int32_t hash;
    int32_t key_hash; /* abs(), MIN_VALUE -> 0 */
  } v[] = {
      {"", 0, 0},
      {"a", 97, 97},
      {"TagA", 2598919, 2598919},
      {"TagB", 2598920, 2598920},
      {"order-1", -1207111310, 1207111310},
      {"TopicTest#order-1", -1829193424, 1829193424},
      {"\xE8\xAE\xA2\xE5\x8D\x95", 1129459, 1129459},           /* 订单 */
      {"TopicTest#\xE8\xAE\xA2\xE5\x8D\x95", 3872117, 3872117}, /* TopicTest#订单 */
      {"\xF0\x9F\x98\x80", 1772899, 1772899},                   /* U+1F600 */
      {"polygenelubricants", INT32_MIN, 0},
      {"TopicTest#7F00000112340A0B0C0D000010000001", 1752161950, 1752161950},
  };
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    const char *s = v[i].s;
    CHECK_EQ_INT(rmq_java_hash(s, strlen(s)), v[i].hash);
    CHECK_EQ_INT(rmq_tags_code(s, strlen(s)), (int64_t)v[i].hash); /* sign-extended */
  }
  CHECK_EQ_INT(rmq_tags_code("order-1", 7), (int64_t)0xFFFFFFFFB80CF172LL);
  CHECK_EQ_INT(rmq_tags_code(NULL, 0), 0);

  /* Index keys hashed as topic, '#', key without joining them. */
  CHECK_EQ_INT(rmq_index_key_hash("TopicTest", 9, "order-1", 7), 1829193424);
  CHECK_EQ_INT(rmq_index_key_hash("TopicTest", 9, "order-1", 7) % 5000000, 4193424);
  CHECK_EQ_INT(rmq_index_key_hash("TopicTest", 9, "\xE8\xAE\xA2\xE5\x8D\x95", 6), 3872117);
  CHECK_EQ_INT(rmq_index_key_hash("TopicTest", 9, "7F00000112340A0B0C0D000010000001", 32),
               1752161950);
  CHECK_EQ_INT(rmq_index_key_hash("TopicTest", 9, "7F00000112340A0B0C0D000010000001", 32) % 5000000,
               2161950);
  /* "TopicTest#ogaQmc" hashes to Integer.MIN_VALUE, like "polygenelubricants". */
  CHECK_EQ_INT(rmq_java_hash("TopicTest#ogaQmc", 16), INT32_MIN);
  CHECK_EQ_INT(rmq_index_key_hash("TopicTest", 9, "ogaQmc", 6), 0);
  CHECK_EQ_INT(rmq_index_key_hash("a", 1, "", 0), rmq_java_hash("a#", 2));
}

/* Malformed UTF-8 becomes U+FFFD per malformed sequence, as the JDK decodes it. */
static void test_java_hash_malformed(void) {
  static const struct {
    const char *s;
    uint16_t units[4];
    size_t n;
  } v[] = {
      {"\xFF", {0xFFFD}, 1},
      {"a\x80"
       "b",
       {'a', 0xFFFD, 'b'},
       3},
      {"\xC0\xAF", {0xFFFD, 0xFFFD}, 2}, /* overlong lead */
      {"\xE4\xB8", {0xFFFD}, 1},         /* truncated 3-byte */
      {"\xE4\xB8"
       "a",
       {0xFFFD, 'a'},
       2},
      {"\xE0\x80\x80", {0xFFFD, 0xFFFD, 0xFFFD}, 3}, /* overlong 3-byte */
      {"\xED\xA0\x80", {0xFFFD}, 1},                 /* encoded surrogate */
      {"\xED\xA0", {0xFFFD}, 1},
      {"\xED\xA0"
       "a",
       {0xFFFD, 'a'},
       2},
      {"\xF0\x9F\x98", {0xFFFD}, 1}, /* truncated 4-byte */
      {"\xF0\x9F\x98"
       "a",
       {0xFFFD, 'a'},
       2},
      {"\xF4\x90\x80\x80", {0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}, 4}, /* above U+10FFFF */
      {"\xC3\xA9", {0xE9}, 1},                                   /* é */
  };
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    CHECK_EQ_INT(rmq_java_hash(v[i].s, strlen(v[i].s)), units_hash(v[i].units, v[i].n));
}

/* ------------------------------------- CRCs, magics, file names vectors */

static void test_crc(void) {
  CHECK_EQ_INT(rmq_body_crc("Hello RocketMQ", 14), 0x69C865ED);
  CHECK_EQ_INT(rmq_body_crc("hello", 5), 0x3610A686);
  CHECK_EQ_INT(rmq_body_crc("123456789", 9), 0x4BF43926);
  CHECK_EQ_INT(rmq_body_crc("TopicTest", 9), 0x04743BC9);
  CHECK_EQ_INT(rmq_body_crc("", 0), 0);
}

/*
** rmq_crc32 against zlib's crc32, unmasked: every length to 4 KiB at three
** alignments (short inputs take the table path, from RMQ_CRC32_FOLD_MIN on
** the folding one where the CPU has it), and continued from a running CRC.
*/
static void test_crc32_matches_zlib(void) {
  static uint8_t buf[4096 + 3];
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < sizeof buf; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    buf[i] = (uint8_t)x;
  }
  int mismatches = 0;
  for (size_t len = 0; len <= 4096; len++) {
    for (size_t off = 0; off < 3; off++) {
      mismatches += rmq_crc32(buf + off, len) != (uint32_t)crc32(0, buf + off, (uInt)len);
    }
  }
  CHECK_EQ_INT(mismatches, 0);
  for (size_t split = 0; split <= 300; split += 7) {
    uint32_t want = (uint32_t)crc32(0, buf, 1000);
    CHECK_EQ_INT(rmq_crc32_update(rmq_crc32(buf, split), buf + split, 1000 - split), want);
  }
  static const uint8_t zeros[1024];
  CHECK_EQ_INT(rmq_crc32(zeros, sizeof zeros), (uint32_t)crc32(0, zeros, sizeof zeros));
  printf("# crc32: %s path for inputs of %d bytes and more\n",
         rmq_crc32_folds() ? "folding (PCLMULQDQ)" : "table", RMQ_CRC32_FOLD_MIN);
}

static void test_magic(void) {
  uint8_t b[4];
  CHECK_EQ_INT(RMQ_MAGIC_V1, -626843481);
  CHECK_EQ_INT(RMQ_MAGIC_BLANK, -875286124);
  CHECK_EQ_INT(RMQ_MAGIC_V2, -626843477);
  rmq_put32(b, RMQ_MAGIC_V1);
  CHECK_EQ_MEM(b, "\xDA\xA3\x20\xA7", 4);
  rmq_put32(b, RMQ_MAGIC_BLANK);
  CHECK_EQ_MEM(b, "\xCB\xD4\x31\x94", 4);
  rmq_put32(b, RMQ_MAGIC_V2);
  CHECK_EQ_MEM(b, "\xDA\xA3\x20\xAB", 4);
}

static void test_file_names(void) {
  char name[21], index_name[18];
  int64_t off = -1;
  rmq_file_name(0, name);
  CHECK_EQ_STR(name, "00000000000000000000");
  rmq_file_name(6000000, name);
  CHECK_EQ_STR(name, "00000000000006000000");
  rmq_file_name(1073741824, name);
  CHECK_EQ_STR(name, "00000000001073741824");
  rmq_file_name(INT64_MAX, name);
  CHECK_EQ_STR(name, "09223372036854775807");

  CHECK_EQ_INT(rmq_file_name_parse("00000000001073741824", &off), 0);
  CHECK_EQ_INT(off, 1073741824);
  CHECK_EQ_INT(rmq_file_name_parse("09223372036854775807", &off), 0);
  CHECK_EQ_INT(off, INT64_MAX);
  CHECK_EQ_INT(rmq_file_name_parse("09223372036854775808", &off), -1); /* overflow */
  CHECK_EQ_INT(rmq_file_name_parse("99999999999999999999", &off), -1);
  CHECK_EQ_INT(rmq_file_name_parse("0000000000107374182", &off), -1);   /* 19 digits */
  CHECK_EQ_INT(rmq_file_name_parse("000000000010737418240", &off), -1); /* 21 digits */
  CHECK_EQ_INT(rmq_file_name_parse("0000000000107374182x", &off), -1);
  CHECK_EQ_INT(rmq_file_name_parse("-0000000000107374182", &off), -1);
  CHECK_EQ_INT(rmq_file_name_parse("", &off), -1);

  /* 2023-11-14 22:13:20.123, with local time set to UTC. */
  setenv("TZ", "UTC", 1);
  tzset();
  rmq_index_file_name(1700000000123, index_name);
  CHECK_EQ_STR(index_name, "20231114221320123");
  rmq_index_file_name(1700000000005, index_name);
  CHECK_EQ_STR(index_name, "20231114221320005");
  setenv("TZ", "CST-8", 1); /* POSIX rule for UTC+8, no tzdata needed: 2023-11-15 06:13:20 */
  tzset();
  rmq_index_file_name(1700000000123, index_name);
  CHECK_EQ_STR(index_name, "20231115061320123");
  setenv("TZ", "UTC", 1);
  tzset();
}

/* -------------------------------------------------------- the record */

static void test_record_155(void) {
  uint8_t want[200], buf[256];
  size_t want_len = dump_155(want);
  rmq_message m = message_155(), d;
  char id[RMQ_MSG_ID_MAX];

  CHECK_EQ_INT(want_len, 178);
  CHECK_EQ_INT(rmq_message_length(0, 14, 9, 64, false), 178);
  CHECK_EQ_INT(rmq_message_encode(&m, buf, sizeof buf), 178);
  CHECK_EQ_MEM(buf, want, 178);
  CHECK_EQ_INT(rmq_message_encode(&m, buf, 177), -1); /* cap too small */
  CHECK_EQ_INT(rmq_message_encode(&m, buf, 178), 178);

  CHECK_EQ_INT(decode_exact(want, 178, true, &d), RMQ_DECODE_OK);
  CHECK_EQ_INT(d.total_size, 178);
  CHECK_EQ_INT(d.magic, RMQ_MAGIC_V1);
  CHECK_EQ_INT(d.sys_flag, 0);
  check_same_message(&d, &m);
  /* Decoding copies nothing: the pointers lie inside the buffer. */
  CHECK_EQ_INT(rmq_message_decode(want, 178, true, &d), RMQ_DECODE_OK);
  CHECK(d.body == want + 88 && (const uint8_t *)d.topic == want + 103 &&
        (const uint8_t *)d.properties == want + 114);
  CHECK_EQ_INT(rmq_get64(want + RMQ_POS_STORE_TIMESTAMP(d.sys_flag)), 1700000000123);

  /* A larger buffer (the rest of a segment) decodes the same record. */
  memset(buf, 0, sizeof buf);
  memcpy(buf, want, 178);
  CHECK_EQ_INT(rmq_message_decode(buf, sizeof buf, true, &d), RMQ_DECODE_OK);
  CHECK_EQ_INT(d.total_size, 178);

  size_t vl = 0;
  const char *tags = rmq_properties_get(d.properties, (size_t)d.properties_len, "TAGS", &vl);
  CHECK(tags && vl == 4 && memcmp(tags, "TagA", 4) == 0);
  CHECK_EQ_INT(rmq_tags_code(tags, vl), 0x27A807);
  rmq_msg_id_format(&d.store_host, d.physical_offset, id);
  CHECK_EQ_STR(id, "C0A8010A00002A9F0000000000000000");
}

/* Reads the head of exactly n bytes copied into a heap block of that size (as decode_exact). */
static bool head_read_exact(const uint8_t *bytes, size_t n, rmq_record_head *h) {
  static uint8_t *copy;
  free(copy);
  copy = malloc(n);
  memcpy(copy, bytes, n);
  return rmq_record_head_read(copy, n, h);
}

static void test_record_head(void) {
  uint8_t rec[200];
  rmq_record_head h;
  size_t n = dump_155(rec);
  CHECK(head_read_exact(rec, n, &h));
  CHECK_EQ_INT(h.len, 178);
  CHECK_EQ_INT(h.queue_id, 1);
  CHECK_EQ_INT(h.store_timestamp_at, 56);
  CHECK(h.topic_len == 9 && memcmp(h.topic, "TopicTest", 9) == 0);

  /* The smallest v1 record (91 bytes) whose SYSFLAG claims IPv6 hosts: its
  ** BODYLENGTH would sit at 108, past the record's end. */
  enum { MIN_RECORD_LEN = 91 };
  uint8_t small[MIN_RECORD_LEN] = {0};
  rmq_put32(small, MIN_RECORD_LEN);
  rmq_put32(small + RMQ_POS_MAGIC, RMQ_MAGIC_V1);
  rmq_put32(small + RMQ_POS_SYSFLAG, RMQ_SYSFLAG_BORNHOST_V6 | RMQ_SYSFLAG_STOREHOST_V6);
  CHECK(!head_read_exact(small, sizeof small, &h));
  rmq_put32(small + RMQ_POS_SYSFLAG, RMQ_SYSFLAG_STOREHOST_V6);
  CHECK(!head_read_exact(small, sizeof small, &h));
  /* With IPv4 hosts the same bytes are a record with an empty topic. */
  rmq_put32(small + RMQ_POS_SYSFLAG, 0);
  CHECK(head_read_exact(small, sizeof small, &h));
  CHECK_EQ_INT(h.topic_len, 0);
}

static void test_record_ipv6(void) {
  uint8_t buf[512];
  rmq_message m = message_155(), d;
  char id[RMQ_MSG_ID_MAX];
  CHECK_EQ_INT(rmq_host_parse("[2001:db8::1234]:40000", &m.born_host), 0);
  CHECK_EQ_INT(rmq_host_parse("[2001:db8::10]:10911", &m.store_host), 0);
  m.sys_flag = RMQ_SYSFLAG_MULTI_TAGS;
  m.queue_offset = 7;
  m.physical_offset = 11587;
  m.flag = -3;
  m.reconsume_times = 2;
  m.prepared_transaction_offset = 12140;

  int32_t len = rmq_message_encode(&m, buf, sizeof buf);
  CHECK_EQ_INT(len, 115 + 14 + 9 + 64);
  CHECK_EQ_INT(rmq_get32(buf + RMQ_POS_SYSFLAG), 0x32); /* v6 bits set from the hosts */
  CHECK_EQ_INT(rmq_get64(buf + RMQ_POS_STORE_TIMESTAMP(0x32)), 1700000000123);
  CHECK_EQ_INT(RMQ_POS_STORE_TIMESTAMP(0x32), 68);
  CHECK_EQ_INT(decode_exact(buf, (size_t)len, true, &d), RMQ_DECODE_OK);
  CHECK_EQ_INT(d.total_size, len);
  CHECK_EQ_INT(d.sys_flag, 0x32);
  check_same_message(&d, &m);
  rmq_msg_id_format(&d.store_host, d.physical_offset, id);
  CHECK_EQ_STR(id, "20010DB800000000000000000000001000002A9F0000000000002D43");

  /* Born host IPv6 only: 103 bytes of overhead. */
  rmq_host_parse("192.0.2.10:10911", &m.store_host);
  len = rmq_message_encode(&m, buf, sizeof buf);
  CHECK_EQ_INT(len, 103 + 14 + 9 + 64);
  CHECK_EQ_INT(decode_exact(buf, (size_t)len, true, &d), RMQ_DECODE_OK);
  CHECK_EQ_INT(d.sys_flag, 0x12);
  check_same_message(&d, &m);

  /* A v6 flag with an IPv4 host would give an inconsistent record. */
  m.sys_flag = RMQ_SYSFLAG_STOREHOST_V6;
  CHECK_EQ_INT(rmq_message_encode(&m, buf, sizeof buf), -1);
}

static void test_encode_limits(void) {
  uint8_t buf[300];
  char topic[129];
  rmq_message m = message_155();
  memset(topic, 'T', sizeof topic);
  m.topic = topic;
  m.topic_len = 127;
  CHECK_EQ_INT(rmq_message_encode(&m, buf, sizeof buf), 91 + 14 + 127 + 64);
  m.topic_len = 128;
  CHECK_EQ_INT(rmq_message_encode(&m, buf, sizeof buf), -1);
  m.topic_len = 0;
  CHECK_EQ_INT(rmq_message_encode(&m, buf, sizeof buf), -1);
  m = message_155();
  m.properties_len = 32768;
  CHECK_EQ_INT(rmq_message_encode(&m, buf, sizeof buf), -1);
  m = message_155();
  m.body_len = -1;
  CHECK_EQ_INT(rmq_message_encode(&m, buf, sizeof buf), -1);
  m = message_155();
  m.body = NULL;
  m.body_len = 0;
  m.body_crc = 0;
  m.properties = NULL;
  m.properties_len = 0;
  CHECK_EQ_INT(rmq_message_encode(&m, buf, sizeof buf), 100);
  rmq_message d;
  CHECK_EQ_INT(decode_exact(buf, 100, true, &d), RMQ_DECODE_OK);
  CHECK_EQ_INT(d.body_len, 0);
  CHECK_EQ_INT(d.properties_len, 0);

  CHECK_EQ_INT(rmq_message_length(0, 0, 0, 0, false), 91);
  CHECK_EQ_INT(rmq_message_length(0, 0, 0, 0, true), 92);
  CHECK_EQ_INT(rmq_message_length(0x30, 0, 0, 0, false), 115);
  CHECK_EQ_INT(rmq_message_length(0x20, -5, 1, -2, false), 104); /* negatives count 0 */
  CHECK_EQ_INT(rmq_message_length(0, INT32_MAX, 1, 0, false), -1);
}

/* A 5.x record: magic 0xDAA320AB and a 2-byte topic length. */
static size_t build_v2(uint8_t *out, const char *topic, size_t topic_len) {
  uint8_t v1[512];
  rmq_message m = message_155();
  int32_t len = rmq_message_encode(&m, v1, sizeof v1);
  size_t before = 88 + 14, after = (size_t)len - before - 1 - 9;
  size_t n = 0;
  memcpy(out, v1, before);
  n = before;
  out[n++] = (uint8_t)(topic_len >> 8);
  out[n++] = (uint8_t)topic_len;
  memcpy(out + n, topic, topic_len);
  n += topic_len;
  memcpy(out + n, v1 + before + 1 + 9, after);
  n += after;
  rmq_put32(out, (int32_t)n);
  rmq_put32(out + 4, RMQ_MAGIC_V2);
  return n;
}

static void test_decode_v2(void) {
  uint8_t buf[1024];
  char topic[300];
  rmq_message d;
  size_t n = build_v2(buf, "TopicTest", 9);
  CHECK_EQ_INT(n, 179);
  CHECK_EQ_INT(decode_exact(buf, n, true, &d), RMQ_DECODE_OK);
  CHECK_EQ_INT(d.magic, RMQ_MAGIC_V2);
  CHECK_EQ_INT(d.topic_len, 9);
  CHECK_EQ_MEM(d.topic, "TopicTest", 9);
  CHECK_EQ_INT(d.properties_len, 64);
  CHECK_EQ_MEM(d.properties, PROPS_155, 64);

  /* The reason for v2: topics longer than 127 bytes. */
  memset(topic, 'x', sizeof topic);
  n = build_v2(buf, topic, 300);
  CHECK_EQ_INT(n, (size_t)rmq_message_length(0, 14, 300, 64, true));
  CHECK_EQ_INT(decode_exact(buf, n, true, &d), RMQ_DECODE_OK);
  CHECK_EQ_INT(d.topic_len, 300);
  CHECK_EQ_INT(d.properties_len, 64);

  /* A negative int16 topic length, and a cut v2 record. */
  buf[102] = 0x80;
  CHECK_EQ_INT(decode_exact(buf, n, true, &d), RMQ_DECODE_TRUNCATED);
  n = build_v2(buf, "TopicTest", 9);
  for (size_t cut = 0; cut < n; cut++) {
    rmq_decode_status s = decode_exact(buf, cut, true, &d);
    CHECK(s == RMQ_DECODE_TRUNCATED);
  }
}

/* ------------------------------------------------- damaged records */

static void test_truncations(void) {
  uint8_t rec[178];
  rmq_message d;
  dump_155(rec);
  for (size_t avail = 0; avail < 178; avail++) {
    rmq_decode_status s = decode_exact(rec, avail, true, &d);
    CHECK(s == RMQ_DECODE_TRUNCATED || s == RMQ_DECODE_BAD_MAGIC);
  }
  CHECK_EQ_INT(decode_exact(rec, 3, true, &d), RMQ_DECODE_TRUNCATED);
  CHECK_EQ_INT(d.total_size, 0);
  CHECK_EQ_INT(decode_exact(rec, 100, true, &d), RMQ_DECODE_TRUNCATED);
  CHECK_EQ_INT(d.total_size, 178); /* what could be read */
  CHECK_EQ_INT(d.magic, RMQ_MAGIC_V1);
}

/* Decodes rec with the int32 at pos (or the byte/short) replaced. */
static rmq_decode_status decode_patched32(size_t pos, int32_t v, size_t avail) {
  uint8_t rec[256] = {0};
  rmq_message d;
  dump_155(rec);
  rmq_put32(rec + pos, v);
  return decode_exact(rec, avail, true, &d);
}

static void test_corrupt_lengths(void) {
  uint8_t rec[256] = {0};
  rmq_message d;

  CHECK_EQ_INT(decode_patched32(0, INT32_MAX, 178), RMQ_DECODE_TRUNCATED); /* huge TOTALSIZE */
  CHECK_EQ_INT(decode_patched32(0, -178, 178), RMQ_DECODE_TRUNCATED);
  CHECK_EQ_INT(decode_patched32(0, 90, 178), RMQ_DECODE_TRUNCATED);  /* below the minimum */
  CHECK_EQ_INT(decode_patched32(0, 91, 178), RMQ_DECODE_TRUNCATED);  /* body overruns it */
  CHECK_EQ_INT(decode_patched32(0, 177, 178), RMQ_DECODE_TRUNCATED); /* props overrun it */
  CHECK_EQ_INT(decode_patched32(0, 179, 178), RMQ_DECODE_TRUNCATED);
  CHECK_EQ_INT(decode_patched32(0, 180, 180), RMQ_DECODE_BAD_LENGTH); /* fields end early */
  CHECK_EQ_INT(decode_patched32(84, -1, 178), RMQ_DECODE_TRUNCATED);  /* negative body */
  CHECK_EQ_INT(decode_patched32(84, INT32_MIN, 178), RMQ_DECODE_TRUNCATED);
  CHECK_EQ_INT(decode_patched32(84, 1000, 178), RMQ_DECODE_TRUNCATED);
  CHECK_EQ_INT(decode_patched32(84, INT32_MAX, 178), RMQ_DECODE_TRUNCATED);
  /* IPv6 flags on IPv4 bytes: the header outgrows a short record. */
  CHECK_EQ_INT(decode_patched32(36, 0x30, 178), RMQ_DECODE_TRUNCATED);

  dump_155(rec);
  rec[102] = 0x80; /* topic length -128 */
  CHECK_EQ_INT(decode_exact(rec, 178, true, &d), RMQ_DECODE_TRUNCATED);
  dump_155(rec);
  rec[102] = 0x7F; /* topic runs past TOTALSIZE */
  CHECK_EQ_INT(decode_exact(rec, 178, true, &d), RMQ_DECODE_TRUNCATED);
  dump_155(rec);
  rec[112] = 0x80; /* properties length -32768 */
  rec[113] = 0x00;
  CHECK_EQ_INT(decode_exact(rec, 178, true, &d), RMQ_DECODE_TRUNCATED);
  dump_155(rec);
  rec[112] = 0xFF; /* properties length -1 */
  rec[113] = 0xFF;
  CHECK_EQ_INT(decode_exact(rec, 178, true, &d), RMQ_DECODE_TRUNCATED);
  dump_155(rec);
  rec[113] = 0x3F; /* one property byte fewer than TOTALSIZE says */
  CHECK_EQ_INT(decode_exact(rec, 178, true, &d), RMQ_DECODE_BAD_LENGTH);
  CHECK_EQ_INT(d.total_size, 178);
  dump_155(rec);
  rec[102] = 8; /* topic one byte shorter: props length is read from the topic */
  CHECK(decode_exact(rec, 178, true, &d) != RMQ_DECODE_OK);

  /* Every single-bit flip: one in TOTALSIZE, the magic, a host-size flag or a
  ** length is rejected (and, under ASan, read in bounds); any other one is
  ** invisible without the CRC check. */
  for (size_t pos = 0; pos < 178; pos++) {
    for (int bit = 0; bit < 8; bit++) {
      bool shape = pos < 8 || (pos >= 84 && pos < 88) || pos == 102 || pos == 112 || pos == 113 ||
                   (pos == 39 && (bit == 4 || bit == 5));
      dump_155(rec);
      rec[pos] ^= (uint8_t)(1 << bit);
      rmq_decode_status s = decode_exact(rec, 178, false, &d);
      if (shape) {
        CHECK(s != RMQ_DECODE_OK);
      } else {
        CHECK_EQ_INT(s, RMQ_DECODE_OK);
      }
    }
  }
}

static void test_crc_and_magic(void) {
  uint8_t rec[256] = {0};
  rmq_message d;
  dump_155(rec);
  rec[90] ^= 0x20; /* "Hello" -> "HeLlo" */
  CHECK_EQ_INT(decode_exact(rec, 178, true, &d), RMQ_DECODE_BAD_CRC);
  CHECK_EQ_INT(d.total_size, 178);
  CHECK_EQ_INT(decode_exact(rec, 178, false, &d), RMQ_DECODE_OK);
  dump_155(rec);
  rmq_put32(rec + 8, 0x69C865ED ^ 1); /* the stored CRC itself */
  CHECK_EQ_INT(decode_exact(rec, 178, true, &d), RMQ_DECODE_BAD_CRC);

  /* An empty body is not CRC-checked, as in Java. */
  rmq_message m = message_155();
  m.body_len = 0;
  m.body_crc = 12345;
  int32_t len = rmq_message_encode(&m, rec, sizeof rec);
  CHECK_EQ_INT(decode_exact(rec, (size_t)len, true, &d), RMQ_DECODE_OK);

  /* BLANK: 1000 bytes left at the end of a segment. */
  static const uint8_t blank[8] = {0x00, 0x00, 0x03, 0xE8, 0xCB, 0xD4, 0x31, 0x94};
  CHECK_EQ_INT(decode_exact(blank, 8, true, &d), RMQ_DECODE_BLANK);
  CHECK_EQ_INT(d.total_size, 1000);
  CHECK_EQ_INT(d.magic, RMQ_MAGIC_BLANK);
  CHECK_EQ_INT(decode_exact(blank, 7, true, &d), RMQ_DECODE_TRUNCATED);

  /* Zeros (the unwritten tail of a segment) and another magic. */
  memset(rec, 0, sizeof rec);
  CHECK_EQ_INT(decode_exact(rec, sizeof rec, true, &d), RMQ_DECODE_BAD_MAGIC);
  dump_155(rec);
  rec[7] = 0xA8;
  CHECK_EQ_INT(decode_exact(rec, 178, true, &d), RMQ_DECODE_BAD_MAGIC);

  CHECK_EQ_STR(rmq_decode_status_name(RMQ_DECODE_OK), "OK");
  CHECK_EQ_STR(rmq_decode_status_name(RMQ_DECODE_BLANK), "BLANK");
  CHECK_EQ_STR(rmq_decode_status_name(RMQ_DECODE_BAD_MAGIC), "BAD_MAGIC");
  CHECK_EQ_STR(rmq_decode_status_name(RMQ_DECODE_TRUNCATED), "TRUNCATED");
  CHECK_EQ_STR(rmq_decode_status_name(RMQ_DECODE_BAD_LENGTH), "BAD_LENGTH");
  CHECK_EQ_STR(rmq_decode_status_name(RMQ_DECODE_BAD_CRC), "BAD_CRC");
}

/* ------------------------------------------------------ properties */

typedef struct pair {
  const char *name, *value;
} pair;

static void check_iter(const char *props, size_t len, const pair *want, size_t n) {
  rmq_properties_iter it;
  const char *name, *value;
  size_t nl, vl, i = 0;
  rmq_properties_iter_init(&it, props, len);
  while (rmq_properties_next(&it, &name, &nl, &value, &vl)) {
    CHECK(i < n);
    if (i >= n) return;
    CHECK(nl == strlen(want[i].name) && memcmp(name, want[i].name, nl) == 0);
    CHECK(vl == strlen(want[i].value) && memcmp(value, want[i].value, vl) == 0);
    i++;
  }
  CHECK_EQ_INT(i, n);
}

static void check_get(const char *props, const char *name, const char *want) {
  size_t vl = 99;
  const char *v = rmq_properties_get(props, strlen(props), name, &vl);
  if (want == NULL) {
    CHECK(v == NULL);
  } else {
    CHECK(v != NULL && vl == strlen(want) && memcmp(v, want, vl) == 0);
  }
}

static void test_properties(void) {
  /* short segments, an empty name, an empty value, no separator, a duplicate, a trailing \2 */
  const char *p = "a\001b\002\002x\002\001v\002k\001\002ab\002KEYS\001k1 k2\002a\001c\002"
                  "n\001v\001w\002";
  static const pair want[] = {{"a", "b"}, {"KEYS", "k1 k2"}, {"a", "c"}, {"n", "v\001w"}};
  check_iter(p, strlen(p), want, 4);
  check_get(p, "a", "c"); /* the later duplicate wins */
  check_get(p, "KEYS", "k1 k2");
  check_get(p, "n", "v\001w"); /* only the first \1 separates */
  check_get(p, "k", NULL);
  check_get(p, "x", NULL);
  check_get(p, "ab", NULL);
  check_get(p, "", NULL);

  const char *trailing = "TAGS\001TagA\002UNIQ_KEY\001ID\002"; /* 4.9.0 wrote a trailing \2 */
  static const pair want_trailing[] = {{"TAGS", "TagA"}, {"UNIQ_KEY", "ID"}};
  check_iter(trailing, strlen(trailing), want_trailing, 2);
  check_get(trailing, "UNIQ_KEY", "ID");
  check_iter("", 0, NULL, 0);
  check_iter("\002\002\002", 3, NULL, 0);
  check_get("TAGS\001TagA", "TAGS", "TagA");
  check_get("TAGS\001TagA", "TAG", NULL);
  check_get("TAGS\001TagA", "TAGSX", NULL);

  /* Several names in one pass give what one look-up each gives. */
  static const char *const names[] = {"a", "k", "KEYS", "n", "ab"};
  rmq_property_value found[5];
  rmq_properties_find(p, strlen(p), names, 5, found);
  for (int i = 0; i < 5; i++) {
    size_t one_len = 0;
    const char *one = rmq_properties_get(p, strlen(p), names[i], &one_len);
    CHECK(found[i].value == one && (!one || found[i].len == one_len));
  }
  CHECK(found[0].value && found[0].len == 1 && found[0].value[0] == 'c');

  /* The length bounds the scan: nothing after it is seen. */
  size_t vl;
  CHECK(rmq_properties_get("TAGS\001TagA", 6, "TAGS", &vl) != NULL && vl == 1);

  char buf[64];
  size_t len = 0;
  CHECK_EQ_INT(rmq_properties_append(buf, sizeof buf, &len, "KEYS", 4, "order-1", 7), 0);
  CHECK_EQ_INT(rmq_properties_append(buf, sizeof buf, &len, "TAGS", 4, "TagA", 4), 0);
  CHECK_EQ_INT(len, 22);
  CHECK_EQ_MEM(buf, "KEYS\001order-1\002TAGS\001TagA", 22);
  CHECK_EQ_INT(rmq_properties_append(buf, sizeof buf, &len, "A\002", 2, "v", 1), -1);
  CHECK_EQ_INT(rmq_properties_append(buf, sizeof buf, &len, "A", 1, "v\001", 2), -1);
  CHECK_EQ_INT(len, 22);
  char small[10];
  len = 0;
  CHECK_EQ_INT(rmq_properties_append(small, sizeof small, &len, "ABCD", 4, "12345", 5), 0);
  CHECK_EQ_INT(len, 10);
  CHECK_EQ_INT(rmq_properties_append(small, sizeof small, &len, "A", 1, "", 0), -1);
  CHECK_EQ_INT(len, 10);
  len = 0;
  CHECK_EQ_INT(rmq_properties_append(small, sizeof small, &len, "ABCD", 4, "123456", 6), -1);
  CHECK_EQ_INT(len, 0);
}

/* ------------------------------------------------- msgId and hosts */

static void test_msg_id(void) {
  rmq_host h;
  int64_t off;
  char id[RMQ_MSG_ID_MAX], text[64];
  CHECK_EQ_INT(rmq_msg_id_parse("C0A8010A00002A9F0000000000000000", 32, &h, &off), 0);
  CHECK(!h.v6 && memcmp(h.addr, "\xC0\xA8\x01\x0A", 4) == 0 && h.port == 10911 && off == 0);
  CHECK_EQ_INT(rmq_msg_id_parse("c000020a00002a9f00000000000000c3", 32, &h, &off), 0);
  CHECK_EQ_INT(off, 195);
  rmq_host_format(&h, text, sizeof text);
  CHECK_EQ_STR(text, "192.0.2.10:10911");
  rmq_msg_id_format(&h, off, id);
  CHECK_EQ_STR(id, "C000020A00002A9F00000000000000C3");

  const char *v6 = "20010db800000000000000000000001000002A9F0000000000002D43";
  CHECK_EQ_INT(rmq_msg_id_parse(v6, 56, &h, &off), 0);
  CHECK(h.v6 && h.port == 10911 && off == 11587);
  rmq_host_format(&h, text, sizeof text);
  CHECK_EQ_STR(text, "[2001:db8::10]:10911");

  rmq_host_parse("192.0.2.10:10911", &h);
  rmq_msg_id_format(&h, INT64_MAX, id);
  CHECK_EQ_STR(id, "C000020A00002A9F7FFFFFFFFFFFFFFF");
  CHECK_EQ_INT(rmq_msg_id_parse(id, 32, &h, &off), 0);
  CHECK_EQ_INT(off, INT64_MAX);

  CHECK_EQ_INT(rmq_msg_id_parse("C0A8010A00002A9F000000000000000", 31, &h, &off), -1);
  CHECK_EQ_INT(rmq_msg_id_parse("C0A8010A00002A9F00000000000000000", 33, &h, &off), -1);
  CHECK_EQ_INT(rmq_msg_id_parse("", 0, &h, &off), -1);
  CHECK_EQ_INT(rmq_msg_id_parse("C0A8010A00002A9F000000000000000G", 32, &h, &off), -1);
  CHECK_EQ_INT(rmq_msg_id_parse("C0A8010A00002A9F00000000000000-0", 32, &h, &off), -1);
  CHECK_EQ_INT(rmq_msg_id_parse("C0A8010A 0002A9F0000000000000000", 32, &h, &off), -1);
}

static void test_hosts(void) {
  rmq_host h;
  char text[64];
  CHECK_EQ_INT(rmq_host_parse("198.51.100.7:54321", &h), 0);
  CHECK(!h.v6 && memcmp(h.addr, "\xC6\x33\x64\x07", 4) == 0 && h.port == 54321);
  rmq_host_format(&h, text, sizeof text);
  CHECK_EQ_STR(text, "198.51.100.7:54321");
  CHECK_EQ_INT(rmq_host_parse("[2001:db8:0:0:0:0:0:1234]:40000", &h), 0);
  CHECK(h.v6 && h.port == 40000 && h.addr[0] == 0x20 && h.addr[15] == 0x34);
  rmq_host_format(&h, text, sizeof text);
  CHECK_EQ_STR(text, "[2001:db8::1234]:40000");
  CHECK_EQ_INT(rmq_host_parse("[::1]:0", &h), 0);
  CHECK(h.v6 && h.addr[15] == 1 && h.port == 0);
  CHECK_EQ_INT(rmq_host_parse("0.0.0.0:65535", &h), 0);
  CHECK_EQ_INT(h.port, 65535);

  static const char *bad[] = {"",           "1.2.3.4",      "1.2.3.4:",       "1.2.3.4:65536",
                              "1.2.3.4:-1", "1.2.3.4:12a",  "1.2.3.4:1 ",     "300.1.1.1:1",
                              ":80",        "[::1]80",      "[::1",           "[::1]:",
                              "::1:80",     "[1.2.3.4]:80", "1.2.3.4:123456", "[]:1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = rmq_host_parse(bad[i], &h);
    CHECK_EQ_INT(rc, -1);
    if (rc != -1) fprintf(stderr, "  accepted \"%s\"\n", bad[i]);
  }
}

/* ----------------------------------------------------------- UNIQ_KEY */

static bool upper_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'A' && s[i] <= 'F'))) return false;
  return true;
}

#define UNIQ_THREADS 4
#define UNIQ_PER_THREAD 2000

static void *uniq_worker(void *arg) {
  rmq_uniq_key_gen *g = rmq_uniq_key_gen_new();
  char(*ids)[RMQ_MSG_ID_MAX] = arg;
  for (int i = 0; i < UNIQ_PER_THREAD; i++) rmq_uniq_key_next(g, ids[i]);
  rmq_uniq_key_gen_free(g);
  return NULL;
}

static int cmp_id(const void *a, const void *b) { return strcmp(a, b); }

static void test_uniq_key(void) {
  rmq_uniq_key_gen *g = rmq_uniq_key_gen_new(), *g2 = rmq_uniq_key_gen_new();
  char a[RMQ_MSG_ID_MAX], b[RMQ_MSG_ID_MAX];
  CHECK(g != NULL && g2 != NULL);
  int n = rmq_uniq_key_next(g, a);
  CHECK(n == 32 || n == 56);
  CHECK_EQ_INT(strlen(a), n);
  CHECK(upper_hex(a, (size_t)n));
  int ip_hex = n == 32 ? 8 : 32;

  /* pid, low 16 bits, right after the IP */
  char pid[5];
  snprintf(pid, sizeof pid, "%04X", (unsigned)getpid() & 0xFFFF);
  CHECK_EQ_MEM(a + ip_hex, pid, 4);

  /* ms since the start of the local month, below 31 days and 1 hour (Java's
  ** int32 wraps negative after day 25, so compare as unsigned) */
  uint8_t tail[6];
  for (int i = 0; i < 6; i++) sscanf(a + n - 12 + 2 * i, "%2hhx", &tail[i]);
  uint32_t ms = (uint32_t)rmq_get32(tail);
  CHECK(ms < (31u * 24 + 1) * 3600 * 1000);

  /* The counter goes up by one; the first 10 bytes (22 for IPv6) never change. */
  unsigned c0 = (unsigned)strtoul(a + n - 4, NULL, 16);
  CHECK_EQ_INT(rmq_uniq_key_next(g2, b), n);
  CHECK_EQ_MEM(a, b, (size_t)(n - 12));
  CHECK_EQ_INT(strtoul(b + n - 4, NULL, 16), (c0 + 1) & 0xFFFF);
  CHECK_EQ_INT(rmq_uniq_key_next(g, b), n);
  CHECK_EQ_MEM(a, b, (size_t)(n - 12));
  CHECK_EQ_INT(strtoul(b + n - 4, NULL, 16), (c0 + 2) & 0xFFFF);
  rmq_uniq_key_gen_free(g);
  rmq_uniq_key_gen_free(g2);

  /* Threads share the counter: no id repeats. */
  static char ids[UNIQ_THREADS * UNIQ_PER_THREAD][RMQ_MSG_ID_MAX];
  pthread_t t[UNIQ_THREADS];
  for (int i = 0; i < UNIQ_THREADS; i++)
    pthread_create(&t[i], NULL, uniq_worker, ids + i * UNIQ_PER_THREAD);
  for (int i = 0; i < UNIQ_THREADS; i++) pthread_join(t[i], NULL);
  qsort(ids, UNIQ_THREADS * UNIQ_PER_THREAD, RMQ_MSG_ID_MAX, cmp_id);
  int dups = 0;
  for (int i = 1; i < UNIQ_THREADS * UNIQ_PER_THREAD; i++) dups += strcmp(ids[i - 1], ids[i]) == 0;
  CHECK_EQ_INT(dups, 0);
}

/* ------------------------------------------------------------- topics */

static void test_topics(void) {
  char long_topic[128];
  memset(long_topic, 'a', sizeof long_topic);
  CHECK(rmq_topic_valid("TopicTest", 9));
  CHECK(rmq_topic_valid("%RETRY%GroupX", 13));
  CHECK(rmq_topic_valid("a|b-c_d09AZ", 11));
  CHECK(rmq_topic_valid(long_topic, 127));
  CHECK(!rmq_topic_valid(long_topic, 128));
  CHECK(!rmq_topic_valid("", 0));
  CHECK(!rmq_topic_valid("Topic Test", 10));
  CHECK(!rmq_topic_valid("Topic#Test", 10));
  CHECK(!rmq_topic_valid("Topic.Test", 10));
  CHECK(!rmq_topic_valid("Topic/Test", 10));
  CHECK(!rmq_topic_valid("\xE8\xAE\xA2", 3));
  CHECK(!rmq_topic_valid("ab\0c", 4));
}

int main(void) {
  test_java_hash();
  test_java_hash_malformed();
  test_crc();
  test_crc32_matches_zlib();
  test_magic();
  test_file_names();
  test_record_155();
  test_record_head();
  test_record_ipv6();
  test_encode_limits();
  test_decode_v2();
  test_truncations();
  test_corrupt_lengths();
  test_crc_and_magic();
  test_properties();
  test_msg_id();
  test_hosts();
  test_uniq_key();
  test_topics();
  return check_report();
}
