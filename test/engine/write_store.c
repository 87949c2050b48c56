/*
** write_store.c: write a varied store and print what was put, for
** test/engine_store_decode.py.
**
**   write_store <dir>
**
** <dir> must not exist or be empty. Writes about 3000 messages into a store
** with 4 MiB CommitLog segments (several rolls): several topics and queue
** ids, TAGS/KEYS/UNIQ_KEY and user properties with non-ASCII UTF-8, IPv4 and
** IPv6 born hosts, empty and 1 MiB bodies, a batch of 10, a transaction
** PREPARED and its COMMIT, and DELAY=2 messages. The store is closed and
** reopened twice with another store_host (IPv4, then IPv6, then IPv4).
**
** For every successful put it prints one JSON line with the keys that
** test/spec_decoder.py prints for a record, filled from what was put and
** the rmq_put_result, never from the files: the topic, queue id and
** properties of a delayed message are computed here as CommitLog.asyncPutMessage
** rewrites them,
** the body CRC with zlib, hosts as "a.b.c.d:port" / "[v6]:port" (inet_ntop).
** Exits 0 when every put succeeded, 1 (with a message on stderr) otherwise.
*/
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "message.h"
#include "properties.h"
#include "rmq.h"

#define FILE_SIZE (4 * 1024 * 1024)
#define BIG_BODY (1024 * 1024)
#define MAX_PROPS 2048

static rmq_store *store;
static rmq_config cfg;
static int delay_level_count;
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static rmq_uniq_key_gen *uniq;
static int puts_done;

static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

static void die(const char *what, const rmq_err *err) {
  fprintf(stderr, "write_store: %s: %s\n", what, err ? err->msg : strerror(errno));
  exit(1);
}

/* ------------------------------------------------------------- output */

static void print_hex(const void *bytes, size_t n) {
  static const char digits[] = "0123456789abcdef";
  const uint8_t *p = bytes;
  char buf[4096];
  size_t k = 0;
  putchar('"');
  for (size_t i = 0; i < n; i++) {
    buf[k++] = digits[p[i] >> 4];
    buf[k++] = digits[p[i] & 15];
    if (k == sizeof buf) {
      fwrite(buf, 1, k, stdout);
      k = 0;
    }
  }
  fwrite(buf, 1, k, stdout);
  putchar('"');
}

static void format_host(const rmq_host *h, char *out, size_t cap) {
  char addr[INET6_ADDRSTRLEN];
  if (!inet_ntop(h->v6 ? AF_INET6 : AF_INET, h->addr, addr, sizeof addr)) die("inet_ntop", NULL);
  snprintf(out, cap, h->v6 ? "[%s]:%d" : "%s:%d", addr, (int)h->port);
}

/* The value of property name in "n\1v\2n\1v" (the last one wins), or NULL. */
static const char *find_property(const char *props, size_t len, const char *name, size_t *vlen) {
  const char *found = NULL;
  size_t nl = strlen(name);
  for (size_t i = 0; i < len;) {
    size_t j = i;
    while (j < len && props[j] != RMQ_PROPERTY_SEPARATOR) j++;
    const char *eq = memchr(props + i, RMQ_NAME_VALUE_SEPARATOR, j - i);
    if (eq && (size_t)(eq - (props + i)) == nl && memcmp(props + i, name, nl) == 0 &&
        eq + 1 < props + j) {
      found = eq + 1;
      *vlen = (size_t)(props + j - found);
    }
    i = j + 1;
  }
  return found;
}

/*
** One JSON line for a record that was put as m (the caller's input, after
** the delay rewrite the caller computed) with result r.
*/
static void print_record(const rmq_message *m, const rmq_put_result *r) {
  const rmq_host *sh = &cfg.store_host;
  int32_t sys_flag = m->sys_flag & ~(RMQ_SYSFLAG_BORNHOST_V6 | RMQ_SYSFLAG_STOREHOST_V6);
  if (m->born_host.v6) sys_flag |= RMQ_SYSFLAG_BORNHOST_V6;
  if (sh->v6) sys_flag |= RMQ_SYSFLAG_STOREHOST_V6;
  int32_t crc = (int32_t)(crc32(crc32(0L, Z_NULL, 0), m->body, (uInt)m->body_len) & 0x7FFFFFFF);
  char born[80], stored[80];
  format_host(&m->born_host, born, sizeof born);
  format_host(sh, stored, sizeof stored);
  size_t tags_len = 0;
  const char *tags = find_property(m->properties, (size_t)m->properties_len, RMQ_PROPERTY_TAGS,
                                   &tags_len);
  int64_t tags_code = tags ? rmq_tags_code(tags, tags_len) : 0;

  printf("{\"physicalOffset\":%" PRId64 ",\"size\":%" PRId32 ",\"topic\":\"%.*s\""
         ",\"queueId\":%" PRId32 ",\"queueOffset\":%" PRId64 ",\"sysFlag\":%" PRId32
         ",\"flag\":%" PRId32 ",\"bodyCRC\":%" PRId32 ",\"bornTimestamp\":%" PRId64
         ",\"bornHost\":\"%s\",\"storeTimestamp\":%" PRId64 ",\"storeHost\":\"%s\""
         ",\"reconsumeTimes\":%" PRId32 ",\"preparedTransactionOffset\":%" PRId64
         ",\"bodyLength\":%" PRId32 ",\"bodyHex\":",
         r->physical_offset, r->size, (int)m->topic_len, m->topic, m->queue_id, r->queue_offset,
         sys_flag, m->flag, crc, m->born_timestamp, born, r->store_timestamp, stored,
         m->reconsume_times, m->prepared_transaction_offset, m->body_len);
  print_hex(m->body, (size_t)m->body_len);
  fputs(",\"propertiesHex\":", stdout);
  print_hex(m->properties, (size_t)m->properties_len);
  printf(",\"msgId\":\"%s\",\"tagsCode\":%" PRId64 ",\"blank\":false}\n", r->msg_id, tags_code);
}

/* ------------------------------------------------------------- messages */

typedef struct msg {
  rmq_message m;
  char props[MAX_PROPS];
  size_t props_len;
  uint8_t body_small[8192];
  uint8_t *body_big;
} msg;

static void add_prop(msg *t, const char *name, const char *value) {
  if (rmq_properties_append(t->props, sizeof t->props, &t->props_len, name, strlen(name), value,
                            strlen(value)) != 0) {
    fprintf(stderr, "write_store: property %s does not fit\n", name);
    exit(1);
  }
  t->m.properties = t->props;
  t->m.properties_len = (int32_t)t->props_len;
}

static const char *const topics[] = {"TopicA", "TopicB", "%RETRY%GroupX", "orders_v2", "Topic-C|x"};
static const char *const tag_values[] = {"TagA",    "TagB", "标签",      "tag😀",
                                         "Ünïcödé", "x",    "TagA||TagB"};
static const char *const born_hosts[] = {"198.51.100.7:54321", "[2001:db8::1234]:40000",
                                         "10.0.0.1:1", "[::1]:65535", "[fe80::1:2:3:4]:9876"};

static int64_t born_clock = 1700000000000;

/* A message with pseudo-random contents; body_len < 0 picks a size. */
static rmq_message *make_msg(msg *t, int i, int body_len) {
  memset(&t->m, 0, sizeof t->m);
  t->props_len = 0;
  t->m.topic = topics[rnd() % 5];
  t->m.topic_len = (int32_t)strlen(t->m.topic);
  t->m.queue_id = (int32_t)(rnd() % 8);
  t->m.flag = (int32_t)rnd();
  t->m.sys_flag = rnd() % 7 == 0 ? RMQ_SYSFLAG_MULTI_TAGS : 0;
  t->m.born_timestamp = born_clock += rnd() % 5000;
  rmq_host_parse(born_hosts[rnd() % 4 == 0 ? 1 + rnd() % 4 : 0], &t->m.born_host);
  t->m.reconsume_times = (int32_t)(rnd() % 17);
  if (body_len < 0) body_len = i % 50 == 0 ? 0 : (int)(rnd() % 6000);
  uint8_t *body = t->body_small;
  if (body_len > (int)sizeof t->body_small) {
    free(t->body_big);
    if (!(t->body_big = malloc((size_t)body_len))) die("malloc", NULL);
    body = t->body_big;
  }
  for (int k = 0; k < body_len; k++) body[k] = (uint8_t)rnd();
  t->m.body = body;
  t->m.body_len = body_len;
  t->m.properties = t->props;
  t->m.properties_len = 0;
  if (i % 23 == 0) return &t->m; /* no properties at all */
  if (rnd() % 4) add_prop(t, "TAGS", tag_values[rnd() % 7]);
  if (rnd() % 2) {
    char keys[64];
    snprintf(keys, sizeof keys, "order-%d key%u 鍵%d", i, rnd() % 100, i % 7);
    add_prop(t, "KEYS", keys);
  }
  char id[RMQ_MSG_ID_MAX];
  rmq_uniq_key_next(uniq, id);
  add_prop(t, "UNIQ_KEY", id);
  if (rnd() % 2) add_prop(t, "city", "Zürich");
  if (rnd() % 3 == 0) add_prop(t, "名前", "値😀🚀");
  if (rnd() % 5 == 0) add_prop(t, "WAIT", "true");
  return &t->m;
}

/* Put n messages as one batch and print them; in[] is what was put. */
static void put_print(const rmq_message *in, int n) {
  rmq_put_result res[16];
  rmq_err err = {0};
  if (n > 16) exit(2);
  if (rmq_store_put(store, in, n, res, &err) != RMQ_OK) die("put", &err);
  for (int i = 0; i < n; i++) print_record(&in[i], &res[i]);
  puts_done += n;
}

static rmq_put_result put_one(const rmq_message *m) {
  rmq_put_result r;
  rmq_err err = {0};
  if (rmq_store_put(store, m, 1, &r, &err) != RMQ_OK) die("put", &err);
  print_record(m, &r);
  puts_done++;
  return r;
}

/*
** A DELAY=level message: put as is, printed as CommitLog.asyncPutMessage
** stores it: REAL_TOPIC and REAL_QID appended to the properties, topic
** SCHEDULE_TOPIC_XXXX, queue id min(level, levels) - 1.
*/
static void put_delayed(msg *t, int i, int level) {
  rmq_message *m = make_msg(t, i, 100 + i % 50);
  char lv[16];
  snprintf(lv, sizeof lv, "%d", level);
  add_prop(t, "DELAY", lv);
  rmq_put_result r;
  rmq_err err = {0};
  if (rmq_store_put(store, m, 1, &r, &err) != RMQ_OK) die("put delayed", &err);

  static char props[MAX_PROPS + 256];
  int len = m->properties_len;
  memcpy(props, m->properties, (size_t)len);
  len += snprintf(props + len, sizeof props - (size_t)len, "%sREAL_TOPIC\001%.*s\002REAL_QID\001%d",
                  len > 0 ? "\002" : "", (int)m->topic_len, m->topic, m->queue_id);
  rmq_message stored = *m;
  stored.topic = "SCHEDULE_TOPIC_XXXX";
  stored.topic_len = (int32_t)strlen(stored.topic);
  stored.queue_id = (level < delay_level_count ? level : delay_level_count) - 1;
  stored.properties = props;
  stored.properties_len = len;
  print_record(&stored, &r);
  puts_done++;
}

/* --------------------------------------------------------------- store */

static void open_store(const char *dir, const char *store_host) {
  rmq_config_init(&cfg);
  cfg.commitlog_file_size = FILE_SIZE; /* the same for every open */
  cfg.consumequeue_entries = 1000;
  cfg.index_slots = 1024;
  cfg.index_entries = 8192;
  if (rmq_host_parse(store_host, &cfg.store_host) != 0) {
    fprintf(stderr, "write_store: bad host %s\n", store_host);
    exit(2);
  }
  int64_t ms[RMQ_MAX_DELAY_LEVELS];
  rmq_err err = {0};
  if (rmq_parse_delay_levels(cfg.delay_levels, ms, RMQ_MAX_DELAY_LEVELS, &delay_level_count,
                             &err) != RMQ_OK) {
    die("delay_levels", &err);
  }
  if (rmq_store_open(dir, &cfg, &store, &err) != RMQ_OK) die("open", &err);
}

static void check_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    if (errno != ENOENT) die(dir, NULL);
    if (mkdir(dir, 0755) != 0) die(dir, NULL);
    return;
  }
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
      fprintf(stderr, "write_store: %s is not empty\n", dir);
      exit(2);
    }
  }
  closedir(d);
}

/* Small messages i0..i1-1, with a 1 MiB body at each index in bigs. */
static void put_range(msg *t, int i0, int i1, const int *bigs, int nbigs) {
  for (int i = i0; i < i1; i++) {
    int len = -1;
    for (int k = 0; k < nbigs; k++)
      if (bigs[k] == i) len = BIG_BODY;
    put_one(make_msg(t, i, len));
  }
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: write_store <dir>\n");
    return 2;
  }
  static char outbuf[1 << 20];
  setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
  check_dir(argv[1]);
  uniq = rmq_uniq_key_gen_new();
  if (!uniq) die("rmq_uniq_key_gen_new", NULL);
  static msg t, batch[10];

  /* Part 1: an IPv4 store host. */
  open_store(argv[1], "192.0.2.10:10911");
  static const int bigs1[] = {100, 700};
  put_range(&t, 0, 1000, bigs1, 2);
  rmq_message bm[10];
  for (int k = 0; k < 10; k++) {
    bm[k] = *make_msg(&batch[k], 1000 + k, 50 * k);
    bm[k].topic = "BatchTopic";
    bm[k].topic_len = (int32_t)strlen("BatchTopic");
    bm[k].queue_id = 3;
    bm[k].sys_flag = 0;
  }
  put_print(bm, 10);
  /* A transaction: the half message, then its commit. */
  rmq_message *m = make_msg(&t, 1010, 300);
  m->sys_flag = RMQ_SYSFLAG_TRANSACTION_PREPARED;
  add_prop(&t, "TRAN_MSG", "true");
  add_prop(&t, "PGROUP", "tx-group");
  rmq_put_result half = put_one(m);
  m = make_msg(&t, 1011, 300);
  m->sys_flag = RMQ_SYSFLAG_TRANSACTION_COMMIT;
  m->prepared_transaction_offset = half.physical_offset;
  add_prop(&t, "PGROUP", "tx-group");
  put_one(m);
  put_delayed(&t, 1012, 2);
  put_range(&t, 1013, 1200, NULL, 0);
  rmq_store_close(store);

  /* Part 2: reopened with an IPv6 store host. */
  open_store(argv[1], "[2001:db8::10]:10911");
  static const int bigs2[] = {1500};
  put_range(&t, 1200, 2000, bigs2, 1);
  put_delayed(&t, 2000, 2);
  put_range(&t, 2001, 2300, NULL, 0);
  rmq_store_close(store);

  /* Part 3: IPv4 again, another host and port. */
  open_store(argv[1], "10.1.2.3:10915");
  static const int bigs3[] = {2600};
  put_range(&t, 2300, 3000, bigs3, 1);
  rmq_store_close(store);

  rmq_uniq_key_gen_free(uniq);
  free(t.body_big);
  fflush(stdout);
  fprintf(stderr, "write_store: %d messages put\n", puts_done);
  return 0;
}
