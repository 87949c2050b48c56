/*
** test_consumer_offset.c: ConsumerOffsetManager (consumer_offset.c), the
** store's commit and send-back calls, and TopicConfigManager
** (topic_config.c): commits from many threads all reach the file, the file
** reads back with the config parser and after a reopen, bad input writes
** nothing, a message given back carries RocketMQ's properties, and
** topics.json lists each topic's queues.
*/
#include <pthread.h>
#include <sys/stat.h>

#include "config_json.h"
#include "testutil.h"

#define THREADS 8
#define COMMITS 50

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = malloc(1 << 20);
  *len = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
  if (buf) buf[*len] = '\0';
  fclose(f);
  return buf;
}

typedef struct parsed {
  rmq_consumer_offset e[64];
  int n;
} parsed;

static int collect(void *ctx, const rmq_consumer_offset *o) {
  parsed *p = ctx;
  if (p->n < 64) p->e[p->n++] = *o;
  return 0;
}

/* The file's entries, read with the config parser; -1 entries when it does not parse. */
static parsed parse_offsets(const char *dir) {
  char path[4200];
  parsed p = {.n = 0};
  size_t len = 0;
  snprintf(path, sizeof path, "%s/config/consumerOffset.json", dir);
  char *text = read_file(path, &len);
  rmq_err err = {0};
  if (!text || rmq_consumer_offsets_parse(text, len, collect, &p, &err) != RMQ_OK) p.n = -1;
  free(text);
  return p;
}

static int64_t offset_of(const parsed *p, const char *group, int32_t q) {
  for (int i = 0; i < p->n; i++) {
    if (strcmp(p->e[i].group, group) == 0 && p->e[i].queue_id == q) return p->e[i].offset;
  }
  return -1;
}

typedef struct committer {
  rmq_store *s;
  int id;
  int failures;
} committer;

/* Thread id commits offsets 1..COMMITS of queue id % 4 for group g<id>. */
static void *commit_loop(void *arg) {
  committer *c = arg;
  char group[16];
  snprintf(group, sizeof group, "g%d", c->id);
  for (int i = 1; i <= COMMITS; i++) {
    rmq_err err = {0};
    if (rmq_store_commit_offset(c->s, group, "T", c->id % 4, i, &err) != RMQ_OK) c->failures++;
  }
  return NULL;
}

static void put_messages(rmq_store *s, int n) {
  for (int i = 0; i < n; i++) {
    tu_msg t;
    rmq_err err = {0};
    CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "T", i % 4, "body", 4, "KEYS=k"), 1, NULL, &err),
                 RMQ_OK);
  }
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_wait_dispatched(s, &err), RMQ_OK);
}

static void test_concurrent_commits(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, 1 << 20);
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  put_messages(s, 4 * COMMITS);
  pthread_t tid[THREADS];
  committer c[THREADS];
  for (int i = 0; i < THREADS; i++) {
    c[i] = (committer){.s = s, .id = i};
    pthread_create(&tid[i], NULL, commit_loop, &c[i]);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(tid[i], NULL);
  parsed p = parse_offsets(dir);
  CHECK_EQ_INT(p.n, THREADS);
  for (int i = 0; i < THREADS; i++) {
    char group[16];
    snprintf(group, sizeof group, "g%d", i);
    CHECK_EQ_INT(c[i].failures, 0);
    CHECK_EQ_INT(offset_of(&p, group, i % 4), COMMITS);
  }
  rmq_store_close(s);

  /* A reopen loads them; a read-only store reads the file. */
  s = tu_open(dir, &cfg);
  rmq_group_offset *all = NULL;
  int n = 0;
  rmq_err err = {0};
  CHECK(s && rmq_store_group_offsets(s, &all, &n, &err) == RMQ_OK);
  CHECK_EQ_INT(n, THREADS);
  CHECK(n == 0 || all[0].offset == COMMITS);
  free(all);
  rmq_store_close(s);
  cfg.readonly = true;
  s = tu_open(dir, &cfg);
  all = NULL;
  CHECK(s && rmq_store_group_offsets(s, &all, &n, &err) == RMQ_OK);
  CHECK_EQ_INT(n, THREADS);
  free(all);
  CHECK_EQ_INT(rmq_store_commit_offset(s, "g0", "T", 0, 1, &err), RMQ_EINVAL);
  rmq_store_close(s);
}

static void test_bad_input(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, 1 << 20);
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  put_messages(s, 4);
  struct {
    const char *group, *topic;
    int32_t q;
    int64_t off;
    int rc;
    const char *msg;
  } cases[] = {
      {"a b", "T", 0, 0, RMQ_EINVAL, "group \"a b\" is not a valid RocketMQ group"},
      {"g", "T T", 0, 0, RMQ_EINVAL, "topic \"T T\" is not a valid RocketMQ topic"},
      {"g", "T", 9, 0, RMQ_ENOTFOUND, "queue 9 of topic T does not exist"},
      {"g", "T", 0, -5, RMQ_EINVAL, "offset -5 is negative"},
      {"g", "T", 0, 2, RMQ_EINVAL, "offset 2 is beyond the max offset of queue 0 of topic T"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    rmq_err err = {0};
    CHECK_EQ_INT(
        rmq_store_commit_offset(s, cases[i].group, cases[i].topic, cases[i].q, cases[i].off, &err),
        cases[i].rc);
    CHECK(strstr(err.msg, cases[i].msg) != NULL);
  }
  char path[4200];
  struct stat st;
  snprintf(path, sizeof path, "%s/config/consumerOffset.json", dir);
  CHECK(stat(path, &st) != 0); /* nothing written */
  rmq_store_close(s);
}

static bool prop_is(const rmq_message *m, const char *name, const char *want) {
  size_t n;
  const char *v = rmq_properties_get(m->properties, (size_t)m->properties_len, name, &n);
  return v && want ? n == strlen(want) && memcmp(v, want, n) == 0 : v == NULL && want == NULL;
}

static void test_send_back(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, 1 << 20);
  cfg.max_reconsume_times = 1;
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  tu_msg t;
  rmq_put_result r;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "Orders", 2, "x", 1, "TAGS=A"), 1, &r, &err),
               RMQ_OK);
  int64_t retry = -1, dead = -1;
  CHECK_EQ_INT(rmq_store_send_back(s, "grp", r.physical_offset, &retry, &err), RMQ_OK);
  rmq_commitlog_ref ref;
  rmq_message m;
  CHECK(rmq_store_read(s, retry, &ref, &m, &err) == RMQ_OK);
  CHECK(m.topic_len == 19 && memcmp(m.topic, "SCHEDULE_TOPIC_XXXX", 19) == 0);
  CHECK_EQ_INT(m.queue_id, 2);
  CHECK_EQ_INT(m.reconsume_times, 1);
  CHECK(prop_is(&m, "DELAY", "3"));
  CHECK(prop_is(&m, "REAL_TOPIC", "%RETRY%grp"));
  CHECK(prop_is(&m, "REAL_QID", "0"));
  CHECK(prop_is(&m, "RETRY_TOPIC", "Orders"));
  CHECK(prop_is(&m, "ORIGIN_MESSAGE_ID", r.msg_id));
  CHECK(prop_is(&m, "TAGS", "A"));
  rmq_commitlog_ref_release(&ref);

  CHECK_EQ_INT(rmq_store_send_back(s, "grp", retry, &dead, &err), RMQ_OK);
  CHECK(rmq_store_read(s, dead, &ref, &m, &err) == RMQ_OK);
  CHECK(m.topic_len == 8 && memcmp(m.topic, "%DLQ%grp", 8) == 0);
  CHECK_EQ_INT(m.queue_id, 0);
  CHECK_EQ_INT(m.reconsume_times, 2);
  /* Every property of the message given back, DELAY 0 (consumerSendMsgBack). */
  CHECK(prop_is(&m, "DELAY", "0"));
  CHECK(prop_is(&m, "REAL_TOPIC", "%RETRY%grp"));
  CHECK(prop_is(&m, "REAL_QID", "0"));
  CHECK(prop_is(&m, "RETRY_TOPIC", "Orders"));
  CHECK(prop_is(&m, "TAGS", "A"));
  CHECK(prop_is(&m, "ORIGIN_MESSAGE_ID", r.msg_id));
  rmq_commitlog_ref_release(&ref);

  rmq_err e2 = {0};
  CHECK_EQ_INT(rmq_store_send_back(s, "grp", dead + 1, &retry, &e2), RMQ_ECORRUPT);
  rmq_err e3 = {0};
  CHECK_EQ_INT(rmq_store_send_back(s, "g:rp", r.physical_offset, &retry, &e3), RMQ_EINVAL);
  rmq_store_close(s);
}

typedef struct topics {
  rmq_topic_config t[16];
  int n;
} topics;

static int collect_topic(void *ctx, const rmq_topic_config *t) {
  topics *p = ctx;
  if (p->n < 16) p->t[p->n++] = *t;
  return 0;
}

static const rmq_topic_config *topic_named(const topics *p, const char *name) {
  for (int i = 0; i < p->n; i++) {
    if (strcmp(p->t[i].topic, name) == 0) return &p->t[i];
  }
  return NULL;
}

static void test_topics(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, 1 << 20);
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  put_messages(s, 3); /* T queues 0..2 */
  int64_t flushed;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_flush(s, &flushed, &err), RMQ_OK);
  rmq_store_close(s);
  char path[4200];
  size_t len = 0;
  snprintf(path, sizeof path, "%s/config/topics.json", dir);
  char *text = read_file(path, &len);
  topics p = {.n = 0};
  CHECK(text && rmq_topic_configs_parse(text, len, collect_topic, &p, &err) == RMQ_OK);
  free(text);
  const rmq_topic_config *t = topic_named(&p, "T");
  CHECK(t && t->read_queues == 3 && t->write_queues == 3 && t->perm == 6);
  t = topic_named(&p, "SCHEDULE_TOPIC_XXXX");
  CHECK(t && t->read_queues == 18);
}

int main(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  test_concurrent_commits(dir);
  tu_rmrf(dir);
  tu_tmpdir(dir, sizeof dir);
  test_bad_input(dir);
  tu_rmrf(dir);
  tu_tmpdir(dir, sizeof dir);
  test_send_back(dir);
  tu_rmrf(dir);
  tu_tmpdir(dir, sizeof dir);
  test_topics(dir);
  tu_rmrf(dir);
  return check_report();
}
