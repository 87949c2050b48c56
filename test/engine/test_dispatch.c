/*
** test_dispatch.c: the consume queues and index files the dispatcher builds
** agree with the CommitLog, across file rolls of all three file kinds, after
** a normal and an abnormal restart; key and time look-ups.
*/
#include <fcntl.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"

#define SEG 65536
#define N 2000
#define TOPICS 5
#define QUEUES 3

typedef struct sent {
  rmq_put_result r;
  int topic, queue;
  bool in_queue; /* NOT_TYPE or COMMIT */
  char uniq[RMQ_MSG_ID_MAX];
} sent;

static sent msgs[N];

static void topic_name(int t, char out[24]) { snprintf(out, 24, "Topic%d", t); }

static void open_small(const char *dir, rmq_store **s) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  cfg.consumequeue_entries = 10;
  cfg.index_slots = 8;
  cfg.index_entries = 64;
  *s = tu_open(dir, &cfg);
}

static void produce(rmq_store *s) {
  rmq_uniq_key_gen *gen = rmq_uniq_key_gen_new();
  for (int i = 0; i < N; i++) {
    sent *m = &msgs[i];
    char topic[24], kv[256], body[64];
    m->topic = i % TOPICS;
    m->queue = (i / TOPICS) % QUEUES;
    topic_name(m->topic, topic);
    rmq_uniq_key_next(gen, m->uniq);
    snprintf(kv, sizeof kv, "TAGS=Tag%d;KEYS=k%d g%d-%d;UNIQ_KEY=%s", i % 4, i, m->topic, i / 50,
             m->uniq);
    int len = snprintf(body, sizeof body, "body %d", i);
    tu_msg t;
    rmq_message *rm = tu_message(&t, topic, m->queue, body, len, kv);
    int kind = i % 20;
    rm->sys_flag = kind == 7   ? RMQ_SYSFLAG_TRANSACTION_PREPARED
                   : kind == 8 ? RMQ_SYSFLAG_TRANSACTION_ROLLBACK
                   : kind == 9 ? RMQ_SYSFLAG_TRANSACTION_COMMIT
                               : 0;
    m->in_queue = kind != 7 && kind != 8;
    rmq_err err = {0};
    CHECK_EQ_INT(rmq_store_put(s, rm, 1, &m->r, &err), RMQ_OK);
  }
  rmq_uniq_key_gen_free(gen);
}

/* Every queue holds exactly its messages, in order, with contiguous offsets. */
static void check_queues(rmq_store *s) {
  int64_t flushed;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_flush(s, &flushed, &err), RMQ_OK);
  rmq_commitlog *cl = rmq_store_commitlog(s);
  int bad = 0, entries = 0;
  for (int t = 0; t < TOPICS; t++) {
    for (int q = 0; q < QUEUES; q++) {
      char topic[24];
      topic_name(t, topic);
      rmq_consume_queue *cq = rmq_cq_table_find(rmq_store_consume_queues(s), topic, q);
      CHECK(cq != NULL);
      if (!cq) continue;
      int expect = 0;
      for (int i = 0; i < N; i++)
        expect += msgs[i].topic == t && msgs[i].queue == q && msgs[i].in_queue;
      CHECK_EQ_INT(rmq_cq_min_offset(cq), 0);
      CHECK_EQ_INT(rmq_cq_max_offset(cq), expect);
      int64_t n = 0;
      for (int i = 0; i < N; i++) {
        if (msgs[i].topic != t || msgs[i].queue != q || !msgs[i].in_queue) continue;
        rmq_cq_entry e;
        rmq_commitlog_ref ref;
        rmq_message m;
        if (rmq_cq_get(cq, n, &e, &err) != RMQ_OK || e.phy_offset != msgs[i].r.physical_offset ||
            e.size != msgs[i].r.size ||
            rmq_commitlog_read_message(cl, e.phy_offset, true, &ref, &m, &err) != RMQ_OK) {
          bad++;
        } else {
          bad += m.queue_offset != n || m.queue_id != q ||
                 e.tags_code != rmq_commitlog_tags_code(cl, &m);
          rmq_commitlog_ref_release(&ref);
        }
        n++;
        entries++;
      }
    }
  }
  CHECK_EQ_INT(bad, 0);
  CHECK(entries > N / 2);
  /* Many consume-queue files and index files were rolled. */
  CHECK(rmq_index_service_count(rmq_store_index(s)) > 10);
}

static void check_keys(rmq_store *s) {
  int64_t offs[64];
  int n, wrong = 0;
  rmq_err err = {0};
  for (int i = 0; i < N; i++) {
    char topic[24], key[32], other[24];
    topic_name(msgs[i].topic, topic);
    topic_name((msgs[i].topic + 1) % TOPICS, other);
    snprintf(key, sizeof key, "k%d", i);
    CHECK_EQ_INT(rmq_store_query_key(s, topic, key, 0, INT64_MAX, 64, offs, &n, &err), RMQ_OK);
    bool rolled_back = i % 20 == 8;
    wrong += rolled_back ? n != 0 : !(n == 1 && offs[0] == msgs[i].r.physical_offset);
    CHECK_EQ_INT(rmq_store_query_key(s, topic, msgs[i].uniq, 0, INT64_MAX, 64, offs, &n, &err),
                 RMQ_OK);
    wrong += rolled_back ? n != 0 : !(n == 1 && offs[0] == msgs[i].r.physical_offset);
    /* Another topic never answers for this key. */
    CHECK_EQ_INT(rmq_store_query_key(s, other, key, 0, INT64_MAX, 64, offs, &n, &err), RMQ_OK);
    wrong += n != 0;
  }
  CHECK_EQ_INT(wrong, 0);
  /* A shared key finds all of its (non-rolled-back) messages in ascending order. */
  CHECK_EQ_INT(rmq_store_query_key(s, "Topic2", "g2-3", 0, INT64_MAX, 64, offs, &n, &err), RMQ_OK);
  int expect = 0;
  for (int i = 150; i < 200; i++) expect += msgs[i].topic == 2 && i % 20 != 8;
  CHECK_EQ_INT(n, expect);
  for (int i = 1; i < n; i++) CHECK(offs[i] > offs[i - 1]);
}

static void check_time(rmq_store *s) {
  rmq_err err = {0};
  rmq_consume_queue *cq = rmq_cq_table_find(rmq_store_consume_queues(s), "Topic1", 2);
  int64_t max = rmq_cq_max_offset(cq), bad = 0;
  for (int64_t q = 0; q < max; q += 7) {
    rmq_cq_entry e;
    rmq_cq_get(cq, q, &e, &err);
    int64_t ts = rmq_store_time_at(s, e.phy_offset, e.size), got;
    CHECK_EQ_INT(rmq_store_queue_offset_at_time(s, "Topic1", 2, ts, &got, &err), RMQ_OK);
    rmq_cq_get(cq, got, &e, &err);
    bad += rmq_store_time_at(s, e.phy_offset, e.size) != ts;
    if (got > 0) {
      rmq_cq_get(cq, got - 1, &e, &err);
      bad += rmq_store_time_at(s, e.phy_offset, e.size) >= ts;
    }
  }
  CHECK_EQ_INT(bad, 0);
  int64_t got;
  CHECK_EQ_INT(rmq_store_queue_offset_at_time(s, "Topic1", 2, INT64_MAX, &got, &err), RMQ_OK);
  CHECK_EQ_INT(got, max);
}

/* A put that returned is dispatched once rmq_reput_wait_for(its end) returns. */
static void check_visible_after_put(rmq_store *s) {
  tu_msg t;
  rmq_put_result r;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "Fresh", 0, "x", 1, "KEYS=fresh"), 1, &r, &err),
               RMQ_OK);
  CHECK_EQ_INT(rmq_reput_wait_for(rmq_store_reput(s), r.physical_offset + r.size, 5000, &err),
               RMQ_OK);
  rmq_consume_queue *cq = rmq_cq_table_find(rmq_store_consume_queues(s), "Fresh", 0);
  CHECK(cq && rmq_cq_max_offset(cq) == r.queue_offset + 1);
}

/*
** "T#Aa" and "T#BB" have the same Java hash: 1,100 newer messages keyed BB
** sit in front of Aa's entry on one hash chain. The cap counts matching
** records, so they cannot hide it.
*/
static void check_colliding_keys(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  tu_small_config(&cfg, 1 << 20);
  cfg.index_slots = 64;
  cfg.index_entries = 4096;
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  tu_msg t;
  rmq_put_result r, first;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "T", 0, "a", 1, "KEYS=Aa"), 1, &first, &err),
               RMQ_OK);
  for (int i = 0; i < 1100; i++) {
    rmq_store_put(s, tu_message(&t, "T", 0, "b", 1, "KEYS=BB"), 1, &r, &err);
  }
  CHECK_EQ_INT(rmq_store_wait_dispatched(s, &err), RMQ_OK);
  static int64_t offs[1024];
  int n = 0;
  CHECK_EQ_INT(rmq_store_query_key(s, "T", "Aa", 0, INT64_MAX, 1024, offs, &n, &err), RMQ_OK);
  CHECK_EQ_INT(n, 1);
  CHECK_EQ_INT(offs[0], first.physical_offset);
  CHECK_EQ_INT(rmq_store_query_key(s, "T", "BB", 0, INT64_MAX, 1024, offs, &n, &err), RMQ_OK);
  CHECK_EQ_INT(n, 1024);
  rmq_store_close(s);
  tu_rmrf(dir);
}

int main(void) {
  check_colliding_keys();
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  rmq_store *s;
  open_small(dir, &s);
  produce(s);
  check_queues(s);
  check_keys(s);
  check_time(s);
  check_visible_after_put(s);
  rmq_store_close(s);

  /* Normal restart: everything as before, queue offsets go on. */
  open_small(dir, &s);
  check_queues(s);
  check_keys(s);
  rmq_store_close(s);

  /* Abnormal restart: index files newer than the checkpoint are rebuilt by dispatch. */
  char p[128];
  snprintf(p, sizeof p, "%s/abort", dir);
  close(open(p, O_CREAT | O_WRONLY, 0644));
  snprintf(p, sizeof p, "%s/checkpoint", dir);
  int fd = open(p, O_WRONLY);
  static const uint8_t zero[24];
  CHECK(pwrite(fd, zero, sizeof zero, 0) == (ssize_t)sizeof zero);
  close(fd);
  open_small(dir, &s);
  CHECK(strstr(rmq_store_recovery_report(s), "abnormal") != NULL);
  check_queues(s);
  check_keys(s);
  check_time(s);
  rmq_store_close(s);
  tu_rmrf(dir);
  return check_report();
}
