/*
** test_commitlog.c: CommitLog appends, rolls, batches, limits, reads and
** reopening, through the engine API.
*/
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "commitlog.h"
#include "testutil.h"

#define SEG 65536

static int put1(rmq_store *s, rmq_message *m, rmq_put_result *r, rmq_err *err) {
  rmq_err_clear(err);
  return rmq_store_put(s, m, 1, r, err);
}

/* Decode the record at offset and compare the basics. */
static void check_record(rmq_store *s, const rmq_put_result *r, const char *topic, int qid,
                         const void *body, int body_len) {
  rmq_commitlog_ref ref;
  rmq_message m;
  rmq_err err = {0};
  int rc = rmq_commitlog_read_message(rmq_store_commitlog(s), r->physical_offset, true, &ref, &m,
                                      &err);
  CHECK_EQ_INT(rc, RMQ_OK);
  if (rc != RMQ_OK) {
    fprintf(stderr, "  %s\n", err.msg);
    return;
  }
  CHECK_EQ_INT(m.total_size, r->size);
  CHECK_EQ_INT(m.physical_offset, r->physical_offset);
  CHECK_EQ_INT(m.queue_offset, r->queue_offset);
  CHECK_EQ_INT(m.queue_id, qid);
  CHECK(m.topic_len == (int)strlen(topic) && memcmp(m.topic, topic, strlen(topic)) == 0);
  CHECK(m.body_len == body_len && (body_len == 0 || memcmp(m.body, body, body_len) == 0));
  CHECK_EQ_INT(m.store_timestamp, r->store_timestamp);
  rmq_commitlog_ref_release(&ref);
}

static void test_put_and_roll(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t;
  rmq_put_result r, prev = {0};
  char body[3000];
  int64_t next_q[3][4] = {{0}};
  const char *topics[3] = {"TopicA", "TopicB", "%RETRY%G"};
  for (int i = 0; i < 200; i++) {
    int len = (i * 37) % (int)sizeof body;
    memset(body, 'a' + i % 26, (size_t)len);
    int ti = i % 3, q = i % 4;
    CHECK_EQ_INT(
        put1(s, tu_message(&t, topics[ti], q, body, len, "TAGS=TagA;KEYS=k1 k2"), &r, &err),
        RMQ_OK);
    CHECK_EQ_INT(r.queue_offset, next_q[ti][q]);
    next_q[ti][q]++;
    /* Contiguous, except for a roll to the next segment. */
    int64_t expect = prev.physical_offset + prev.size;
    if (i > 0 && r.physical_offset != expect) {
      CHECK_EQ_INT(r.physical_offset % SEG, 0);
      CHECK(r.physical_offset - expect >= RMQ_END_FILE_MIN_BLANK_LENGTH);
      CHECK(r.physical_offset - expect <= r.size + RMQ_END_FILE_MIN_BLANK_LENGTH);
    }
    CHECK_EQ_INT(r.physical_offset / SEG, (r.physical_offset + r.size - 1) / SEG);
    check_record(s, &r, topics[ti], q, body, len);
    prev = r;
  }
  CHECK(rmq_commitlog_max_offset(rmq_store_commitlog(s)) > 4 * SEG);
  /* Every full segment ends with a BLANK whose size is what was left. */
  rmq_commitlog *cl = rmq_store_commitlog(s);
  int files = rmq_mfq_count(&cl->mfq);
  for (int i = 0; i + 1 < files; i++) {
    rmq_mapped_file *mf = rmq_mfq_get(&cl->mfq, i);
    int32_t pos = 0;
    rmq_message m;
    while (rmq_message_decode(mf->mapped + pos, (size_t)(SEG - pos), true, &m) == RMQ_DECODE_OK)
      pos += m.total_size;
    CHECK_EQ_INT(rmq_message_decode(mf->mapped + pos, (size_t)(SEG - pos), true, &m),
                 RMQ_DECODE_BLANK);
    CHECK_EQ_INT(m.total_size, SEG - pos);
    rmq_mapped_file_release(mf);
  }
  int64_t end = rmq_commitlog_max_offset(cl);
  rmq_store_close(s);

  /* Reopen: normal recovery ends where we stopped; queue offsets go on. */
  s = tu_open(dir, &cfg);
  CHECK_EQ_INT(rmq_commitlog_max_offset(rmq_store_commitlog(s)), end);
  CHECK(strstr(rmq_store_recovery_report(s), "normal recovery") != NULL);
  check_record(s, &prev, topics[199 % 3], 199 % 4, body, (199 * 37) % (int)sizeof body);
  rmq_store_close(s);
}

static void test_batch(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t[40];
  rmq_message msgs[40];
  rmq_put_result res[40];
  char body[1000];
  memset(body, 'x', sizeof body);
  for (int round = 0; round < 6; round++) {
    for (int i = 0; i < 40; i++) msgs[i] = *tu_message(&t[i], "Batch", i % 2, body, 1000, "");
    CHECK_EQ_INT(rmq_store_put(s, msgs, 40, res, &err), RMQ_OK);
    for (int i = 0; i < 40; i++) {
      if (i > 0) {
        CHECK_EQ_INT(res[i].physical_offset, res[i - 1].physical_offset + res[i - 1].size);
      }
      CHECK_EQ_INT(res[i].queue_offset, round * 20 + i / 2);
      /* Past the first records the batch outgrew the put's stack memory: all read back. */
      check_record(s, &res[i], "Batch", i % 2, body, 1000);
      char id[RMQ_MSG_ID_MAX];
      rmq_msg_id_format(&cfg.store_host, res[i].physical_offset, id);
      CHECK(strcmp(res[i].msg_id, id) == 0);
    }
    CHECK_EQ_INT(res[0].physical_offset / SEG, (res[39].physical_offset + res[39].size) / SEG);
  }
  /* A batch larger than a segment is refused whole, its size counted in full. */
  tu_msg big[70];
  rmq_message bm[70];
  for (int i = 0; i < 70; i++) bm[i] = *tu_message(&big[i], "Batch", 0, body, 1000, "");
  int64_t before = rmq_commitlog_max_offset(rmq_store_commitlog(s));
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_store_put(s, bm, 70, res, &err), RMQ_EINVAL);
  char want[200];
  snprintf(want, sizeof want,
           "70 message(s) of %d bytes do not fit in one commitlog segment of "
           "%d bytes (commitlog_file_size)",
           70 * res[0].size, SEG);
  CHECK(strcmp(err.msg, want) == 0);
  CHECK_EQ_INT(rmq_commitlog_max_offset(rmq_store_commitlog(s)), before);
  rmq_store_close(s);
}

/*
** One batch of a plain message, a prepared and a committed transaction's
** and a delayed one: each result says where its record went, as a put of
** each alone would have.
*/
static void test_batch_kinds(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t[4];
  rmq_message ms[4] = {*tu_message(&t[0], "Kinds", 0, "plain", 5, ""),
                       *tu_message(&t[1], "Kinds", 0, "prepared", 8, ""),
                       *tu_message(&t[2], "Kinds", 0, "commit", 6, ""),
                       *tu_message(&t[3], "Kinds", 3, "later", 5, "DELAY=2")};
  ms[1].sys_flag = RMQ_SYSFLAG_TRANSACTION_PREPARED;
  ms[2].sys_flag = RMQ_SYSFLAG_TRANSACTION_COMMIT;
  rmq_put_result r[4];
  CHECK_EQ_INT(rmq_store_put(s, ms, 4, r, &err), RMQ_OK);
  CHECK_EQ_INT(r[0].queue_offset, 0);
  CHECK_EQ_INT(r[1].queue_offset, 0);
  CHECK_EQ_INT(r[2].queue_offset, 1);
  CHECK_EQ_INT(r[3].queue_offset, 0);
  check_record(s, &r[0], "Kinds", 0, "plain", 5);
  check_record(s, &r[1], "Kinds", 0, "prepared", 8);
  check_record(s, &r[2], "Kinds", 0, "commit", 6);
  check_record(s, &r[3], "SCHEDULE_TOPIC_XXXX", 1, "later", 5);
  rmq_store_close(s);
}

static void test_limits(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  cfg.max_message_size = 1024;
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  rmq_commitlog *cl = rmq_store_commitlog(s);
  tu_msg t;
  rmq_put_result r;
  char body[2048] = {0};
  char topic[200];
  memset(topic, 'T', 128);
  topic[128] = 0;
  int64_t before = rmq_commitlog_max_offset(cl);
  CHECK_EQ_INT(put1(s, tu_message(&t, topic, 0, "x", 1, ""), &r, &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "not a valid RocketMQ topic") != NULL);
  topic[127] = 0;
  CHECK_EQ_INT(put1(s, tu_message(&t, topic, 0, "x", 1, ""), &r, &err), RMQ_OK);
  before = rmq_commitlog_max_offset(cl);
  CHECK_EQ_INT(put1(s, tu_message(&t, "a/b", 0, "x", 1, ""), &r, &err), RMQ_EINVAL);
  CHECK_EQ_INT(put1(s, tu_message(&t, "..", 0, "x", 1, ""), &r, &err), RMQ_EINVAL);
  CHECK_EQ_INT(put1(s, tu_message(&t, "", 0, "x", 1, ""), &r, &err), RMQ_EINVAL);
  CHECK_EQ_INT(put1(s, tu_message(&t, "T", -1, "x", 1, ""), &r, &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "negative") != NULL);
  CHECK_EQ_INT(put1(s, tu_message(&t, "T", 0, body, 1025, ""), &r, &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "max_message_size") != NULL);
  CHECK_EQ_INT(put1(s, tu_message(&t, "T", 0, body, 1024, ""), &r, &err), RMQ_OK);
  before = rmq_commitlog_max_offset(cl);
  rmq_message *m = tu_message(&t, "T", 0, "x", 1, "");
  static char props[40000];
  memset(props, 'p', sizeof props);
  m->properties = props;
  m->properties_len = 32768;
  CHECK_EQ_INT(put1(s, m, &r, &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "32767") != NULL);
  /* One bad message in a batch: nothing of the batch is appended. */
  tu_msg t2[3];
  rmq_message ms[3] = {*tu_message(&t2[0], "T", 0, "a", 1, ""),
                       *tu_message(&t2[1], "T", 0, body, 2000, ""),
                       *tu_message(&t2[2], "T", 0, "c", 1, "")};
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_store_put(s, ms, 3, NULL, &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "message 1") != NULL);
  CHECK_EQ_INT(rmq_commitlog_max_offset(cl), before);
  rmq_store_close(s);
}

static void test_transactions_and_delay(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t;
  rmq_put_result r;
  CHECK_EQ_INT(put1(s, tu_message(&t, "Tx", 0, "a", 1, ""), &r, &err), RMQ_OK);
  CHECK_EQ_INT(r.queue_offset, 0);
  rmq_message *m = tu_message(&t, "Tx", 0, "b", 1, "");
  m->sys_flag = RMQ_SYSFLAG_TRANSACTION_PREPARED;
  CHECK_EQ_INT(put1(s, m, &r, &err), RMQ_OK);
  CHECK_EQ_INT(r.queue_offset, 0);
  m = tu_message(&t, "Tx", 0, "c", 1, "");
  m->sys_flag = RMQ_SYSFLAG_TRANSACTION_ROLLBACK;
  CHECK_EQ_INT(put1(s, m, &r, &err), RMQ_OK);
  CHECK_EQ_INT(r.queue_offset, 0);
  m = tu_message(&t, "Tx", 0, "d", 1, "");
  m->sys_flag = RMQ_SYSFLAG_TRANSACTION_COMMIT;
  CHECK_EQ_INT(put1(s, m, &r, &err), RMQ_OK);
  CHECK_EQ_INT(r.queue_offset, 1);

  /* DELAY=3 goes to SCHEDULE_TOPIC_XXXX queue 2 with REAL_TOPIC / REAL_QID. */
  CHECK_EQ_INT(put1(s, tu_message(&t, "TopicA", 1, "later", 5, "DELAY=3;TAGS=T"), &r, &err),
               RMQ_OK);
  rmq_commitlog_ref ref;
  rmq_message d;
  CHECK_EQ_INT(
      rmq_commitlog_read_message(rmq_store_commitlog(s), r.physical_offset, true, &ref, &d, &err),
      RMQ_OK);
  CHECK(d.topic_len == 19 && memcmp(d.topic, "SCHEDULE_TOPIC_XXXX", 19) == 0);
  CHECK_EQ_INT(d.queue_id, 2);
  size_t n;
  const char *v = rmq_properties_get(d.properties, (size_t)d.properties_len, "REAL_TOPIC", &n);
  CHECK(v && n == 6 && memcmp(v, "TopicA", 6) == 0);
  v = rmq_properties_get(d.properties, (size_t)d.properties_len, "REAL_QID", &n);
  CHECK(v && n == 1 && v[0] == '1');
  CHECK_EQ_INT(rmq_commitlog_tags_code(rmq_store_commitlog(s), &d), d.store_timestamp + 10000);
  rmq_commitlog_ref_release(&ref);
  rmq_store_close(s);
}

static void test_ipv6_and_bodies(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, 4 << 20);
  rmq_host_parse("[2001:db8::10]:10911", &cfg.store_host);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t;
  rmq_put_result r;
  rmq_message *m = tu_message(&t, "V6", 0, "", 0, "");
  rmq_host_parse("[2001:db8::1234]:40000", &m->born_host);
  CHECK_EQ_INT(put1(s, m, &r, &err), RMQ_OK);
  CHECK_EQ_INT(r.size, 115 + 2);
  CHECK_EQ_INT(strlen(r.msg_id), 56);
  check_record(s, &r, "V6", 0, "", 0);
  char *mib = malloc(1 << 20);
  for (int i = 0; i < 1 << 20; i++) mib[i] = (char)(i * 7);
  CHECK_EQ_INT(put1(s, tu_message(&t, "Big", 0, mib, 1 << 20, ""), &r, &err), RMQ_OK);
  check_record(s, &r, "Big", 0, mib, 1 << 20);
  rmq_commitlog_ref ref;
  rmq_message d;
  rmq_commitlog_read_message(rmq_store_commitlog(s), r.physical_offset, true, &ref, &d, &err);
  CHECK_EQ_INT(d.sys_flag & (RMQ_SYSFLAG_STOREHOST_V6 | RMQ_SYSFLAG_BORNHOST_V6),
               RMQ_SYSFLAG_STOREHOST_V6);
  rmq_commitlog_ref_release(&ref);
  free(mib);
  rmq_store_close(s);
}

typedef struct thread_arg {
  rmq_store *s;
  int id;
  int64_t offsets[500];
} thread_arg;

static void *producer(void *p) {
  thread_arg *a = p;
  tu_msg t;
  rmq_put_result r;
  rmq_err err = {0};
  char body[64];
  for (int i = 0; i < 500; i++) {
    int len = snprintf(body, sizeof body, "thread %d message %d", a->id, i);
    a->offsets[i] = rmq_store_put(a->s, tu_message(&t, "Conc", a->id % 2, body, len, ""), 1, &r,
                                  &err) == RMQ_OK
                        ? r.physical_offset
                        : -1;
  }
  return NULL;
}

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Four producers, a spin lock and a transient store pool: no offset twice, no gap. */
static void test_concurrent(const char *dir, bool spin, int pool) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  cfg.use_spin_lock = spin;
  cfg.transient_store_pool = pool;
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  thread_arg args[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    args[i].s = s;
    args[i].id = i;
    pthread_create(&th[i], NULL, producer, &args[i]);
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  int64_t all[2000];
  for (int i = 0; i < 4; i++) memcpy(all + i * 500, args[i].offsets, sizeof args[i].offsets);
  qsort(all, 2000, sizeof all[0], cmp64);
  int dup = 0, bad = 0;
  for (int i = 0; i < 2000; i++) {
    if (all[i] < 0) bad++;
    if (i > 0 && all[i] == all[i - 1]) dup++;
  }
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(dup, 0);
  int64_t flushed;
  CHECK_EQ_INT(rmq_store_flush(s, &flushed, &err), RMQ_OK);
  CHECK_EQ_INT(flushed, rmq_commitlog_max_offset(rmq_store_commitlog(s)));
  /* Every record reads back (with a pool, only after the commit above). */
  int readable = 0;
  for (int i = 0; i < 2000; i++) {
    rmq_commitlog_ref ref;
    rmq_message m;
    rmq_err e = {0};
    if (rmq_commitlog_read_message(rmq_store_commitlog(s), all[i], true, &ref, &m, &e) == RMQ_OK) {
      readable++;
      rmq_commitlog_ref_release(&ref);
    }
  }
  CHECK_EQ_INT(readable, 2000);
  rmq_store_close(s);
}

static void test_readonly(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t;
  rmq_put_result r;
  CHECK_EQ_INT(put1(s, tu_message(&t, "RO", 0, "hello", 5, ""), &r, &err), RMQ_OK);
  rmq_store_close(s);
  /* A pre-allocated, all-zero next segment, as a broker that was killed leaves. */
  char next[4200];
  snprintf(next, sizeof next, "%s/commitlog/%020lld", dir, (long long)SEG);
  FILE *f = fopen(next, "w");
  CHECK(f != NULL && ftruncate(fileno(f), SEG) == 0);
  if (f) fclose(f);
  rmq_config ro;
  tu_small_config(&ro, 1 << 20); /* the size is read off the files */
  ro.readonly = true;
  s = tu_open(dir, &ro);
  CHECK_EQ_INT(rmq_store_config(s)->commitlog_file_size, SEG);
  check_record(s, &r, "RO", 0, "hello", 5);
  /* The end is the last record's, whatever empty segments follow it on disk. */
  CHECK_EQ_INT(rmq_mfq_count(&rmq_store_commitlog(s)->mfq), 2);
  CHECK_EQ_INT(rmq_commitlog_max_offset(rmq_store_commitlog(s)), r.physical_offset + r.size);
  /* Consume-queue segments are sized by their files too. */
  rmq_consume_queue *cq = rmq_cq_table_find(rmq_store_consume_queues(s), "RO", 0);
  CHECK(cq != NULL && rmq_cq_max_offset(cq) == 1);
  CHECK_EQ_INT(put1(s, tu_message(&t, "RO", 0, "x", 1, ""), &r, &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "read-only") != NULL);
  rmq_store_close(s);
  /*
  ** A writable open with another segment size names the setting and the
  ** value the store was written with; its segments are not damaged.
  */
  rmq_config wrong;
  tu_small_config(&wrong, 2 * SEG);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_store_open(dir, &wrong, &s, &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "00000000000000000000 (as is every file beside it) is 65536 bytes, but "
                        "commitlog_file_size=131072 makes files of 131072 bytes: the store was "
                        "written with commitlog_file_size=65536: open it with that") != NULL);
  CHECK(strstr(err.msg, "rocketmq_repair") == NULL);
}

static bool segment_exists(const char *dir, int64_t offset) {
  char name[21], path[128];
  struct stat st;
  rmq_file_name(offset, name);
  snprintf(path, sizeof path, "%s/commitlog/%s", dir, name);
  return stat(path, &st) == 0;
}

/*
** A slave's appends (rmq_commitlog_append_data) start an empty log only at
** a segment's start from 0, and no segment is made that would end past
** RMQ_MAX_LOG_OFFSET, nor made ahead there: the checks of the HA client,
** kept again below it.
*/
static void test_append_data_bounds(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  rmq_commitlog *cl = rmq_store_commitlog(s);
  rmq_err err = {0};
  char want[512];
  CHECK_EQ_INT(rmq_commitlog_append_data(cl, -SEG, NULL, 0, 0, &err), RMQ_EINVAL);
  CHECK_EQ_STR(err.msg, "an empty commit log starts at a segment's start (a multiple of "
                        "commitlog_file_size, 65536, from 0), not at -65536");
  CHECK(!segment_exists(dir, -SEG));
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_commitlog_append_data(cl, RMQ_MAX_LOG_OFFSET, NULL, 0, 0, &err), RMQ_EINVAL);
  snprintf(want, sizeof want,
           "%s/commitlog: no segment is made at offset %lld: segments of 65536 bytes lie between "
           "offset 0 and 2^62",
           dir, (long long)RMQ_MAX_LOG_OFFSET);
  CHECK_EQ_STR(err.msg, want);
  CHECK(!segment_exists(dir, RMQ_MAX_LOG_OFFSET));
  /* The last segment there may be: made, with none after it. */
  int64_t last = RMQ_MAX_LOG_OFFSET - SEG;
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_commitlog_append_data(cl, last, NULL, 0, 0, &err), RMQ_OK);
  CHECK(segment_exists(dir, last));
  static uint8_t blank[SEG];
  rmq_put32(blank, SEG);
  rmq_put32(blank + 4, RMQ_MAGIC_BLANK);
  CHECK_EQ_INT(rmq_commitlog_append_data(cl, last, blank, SEG, 0, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_commitlog_max_offset(cl), RMQ_MAX_LOG_OFFSET);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_commitlog_append_data(cl, RMQ_MAX_LOG_OFFSET, blank, 8, 0, &err), RMQ_EINVAL);
  CHECK_EQ_STR(err.msg, want);
  usleep(100000); /* the allocation service would have made the next one by now */
  CHECK(!segment_exists(dir, RMQ_MAX_LOG_OFFSET));
  rmq_store_close(s);
}

static void test_config(void) {
  rmq_config cfg;
  rmq_err err = {0};
  rmq_config_init(&cfg);
  CHECK_EQ_INT(rmq_config_check(&cfg, &err), RMQ_OK);
  snprintf(cfg.delay_levels, sizeof cfg.delay_levels, "1s 5x");
  CHECK_EQ_INT(rmq_config_check(&cfg, &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "delay_levels") != NULL);
  rmq_config_init(&cfg);
  cfg.flush_sync = true;
  cfg.transient_store_pool = 2;
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_config_check(&cfg, &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "transient_store_pool") != NULL);
  /* The flush service's period: a wait of at most a day, never zero or negative. */
  const int intervals[][2] = {
      {0, RMQ_EINVAL}, {1, RMQ_OK}, {86400000, RMQ_OK}, {86400001, RMQ_EINVAL}, {-500, RMQ_EINVAL}};
  for (int i = 0; i < 5; i++) {
    rmq_config_init(&cfg);
    cfg.flush_interval_ms = intervals[i][0];
    rmq_err_clear(&err);
    CHECK_EQ_INT(rmq_config_check(&cfg, &err), intervals[i][1]);
    char want[128];
    snprintf(want, sizeof want, "flush_interval_ms: %d is out of range (1..86400000)",
             intervals[i][0]);
    if (intervals[i][1] != RMQ_OK) CHECK_EQ_STR(err.msg, want);
  }
  int64_t ms[64];
  int n;
  CHECK_EQ_INT(rmq_parse_delay_levels("1s 5s 10m 2h 1d", ms, 64, &n, &err), RMQ_OK);
  CHECK_EQ_INT(n, 5);
  CHECK_EQ_INT(ms[4], 86400000);
}

/* Row i of a run: about 1 KiB, its length varying, to queue i % 4. */
static int run_row(rmq_batch *b, int i, char *body, rmq_err *err) {
  tu_msg t;
  int len = 700 + (i * 37) % 600;
  memset(body, 'a' + i % 26, (size_t)len);
  return rmq_batch_add(b, tu_message(&t, "Run", i % 4, body, len, "KEYS=k"), err);
}

/* A run of n rows, as one INSERT ... SELECT appends them; firsts[i]: row i's offset. */
static int64_t put_run(rmq_batch *b, int n, int64_t *firsts) {
  char body[2000];
  rmq_err err = {0};
  int64_t end = 0;
  for (int i = 0; i < n; i++) {
    CHECK_EQ_INT(run_row(b, i, body, &err), RMQ_OK);
    CHECK_EQ_INT(rmq_batch_append_unflushed(b, &firsts[i], &end, &err), RMQ_OK);
    rmq_batch_clear(b);
  }
  return end;
}

/* Every row of the run reads back at its offset, each queue's offsets consecutive. */
static void check_run(rmq_store *s, const int64_t *firsts, int n) {
  char body[2000];
  int64_t next[4] = {-1, -1, -1, -1};
  for (int i = 0; i < n; i++) {
    rmq_commitlog_ref ref;
    rmq_message m;
    rmq_err err = {0};
    int len = 700 + (i * 37) % 600;
    memset(body, 'a' + i % 26, (size_t)len);
    if (rmq_commitlog_read_message(rmq_store_commitlog(s), firsts[i], true, &ref, &m, &err) !=
        RMQ_OK) {
      CHECK_EQ_STR(err.msg, "");
      return;
    }
    CHECK(m.body_len == len && memcmp(m.body, body, (size_t)len) == 0);
    if (next[i % 4] < 0) next[i % 4] = m.queue_offset;
    CHECK_EQ_INT(m.queue_offset, next[i % 4]++);
    rmq_commitlog_ref_release(&ref);
  }
}

/*
** The rows of a run wait in the write window until its end: readers see
** what the window committed when it filled, the rest after
** rmq_store_wait_flushed; a put outside a run commits the run first; the
** run crosses segment ends; and what was waited for is in the files.
*/
static void test_write_window(const char *dir, bool sync) {
  rmq_config cfg;
  tu_small_config(&cfg, 1 << 20);
  cfg.flush_sync = sync;
  rmq_store *s = tu_open(dir, &cfg);
  rmq_commitlog *cl = rmq_store_commitlog(s);
  rmq_batch *b = rmq_batch_new(s);
  enum { N = 3000 };
  int64_t *firsts = malloc(sizeof *firsts * N);
  int64_t end = put_run(b, N, firsts);
  CHECK(rmq_commitlog_max_offset(cl) > firsts[N / 2]); /* committed as the window filled */
  /* Flush='sync' commits with every group commit; async, only the run's end does. */
  if (!sync) CHECK(rmq_commitlog_max_offset(cl) < end);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_wait_flushed(s, end, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_commitlog_max_offset(cl), end);
  if (sync) CHECK(rmq_commitlog_flushed_offset(cl) >= end);
  check_run(s, firsts, N);
  CHECK(end > 2 << 20);

  /* A put outside a run goes after the run's rows, which it commits. */
  int64_t run_end = put_run(b, 5, firsts);
  tu_msg t;
  rmq_put_result r;
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "Run", 0, "x", 1, NULL), 1, &r, &err), RMQ_OK);
  CHECK_EQ_INT(r.physical_offset, run_end);
  CHECK_EQ_INT(rmq_commitlog_max_offset(cl), r.physical_offset + r.size);

  /* A run left without its wait: the store's close commits it. */
  put_run(b, 200, firsts);
  rmq_batch_free(b);
  rmq_store_close(s);
  s = tu_open(dir, &cfg);
  check_run(s, firsts, 200);
  rmq_store_close(s);
  free(firsts);
}

int main(void) {
  char dir[64];
  void (*store_tests[])(const char *) = {
      test_put_and_roll,           test_batch,           test_batch_kinds, test_limits,
      test_transactions_and_delay, test_ipv6_and_bodies, test_readonly,    test_append_data_bounds};
  for (size_t i = 0; i < sizeof store_tests / sizeof *store_tests; i++) {
    tu_tmpdir(dir, sizeof dir);
    store_tests[i](dir);
    tu_rmrf(dir);
  }
  bool spin[3] = {false, true, false};
  int pool[3] = {0, 0, 2};
  for (int i = 0; i < 3; i++) {
    tu_tmpdir(dir, sizeof dir);
    test_concurrent(dir, spin[i], pool[i]);
    tu_rmrf(dir);
  }
  for (int sync = 0; sync < 2; sync++) {
    tu_tmpdir(dir, sizeof dir);
    test_write_window(dir, sync);
    tu_rmrf(dir);
  }
  test_config();
  return check_report();
}
