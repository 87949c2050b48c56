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
#include <unistd.h>

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

/* ------------------------------------------------------- damaged files */

/* The first defect of kind config that rmq_verify reports, and how many there are. */
typedef struct config_rows {
  int n;
  char file[64];
  int64_t offset;
  char detail[512];
} config_rows;

static int collect_config(void *ctx, const rmq_defect *d) {
  config_rows *r = ctx;
  if (strcmp(d->kind, "config") != 0) return RMQ_OK;
  if (r->n++ == 0) {
    snprintf(r->file, sizeof r->file, "%s", d->file);
    r->offset = d->offset;
    snprintf(r->detail, sizeof r->detail, "%s", d->detail);
  }
  return RMQ_OK;
}

static config_rows verify_config(const char *dir) {
  config_rows r = {.n = 0};
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_verify(dir, collect_config, &r, &err), RMQ_OK);
  return r;
}

static void write_config(const char *dir, const char *name, const char *text, size_t len) {
  char path[4200];
  snprintf(path, sizeof path, "%s/config/%s", dir, name);
  FILE *f = fopen(path, "wb");
  CHECK(f && fwrite(text, 1, len, f) == len);
  if (f) fclose(f);
}

static char *read_config(const char *dir, const char *name, size_t *len) {
  char path[4200];
  snprintf(path, sizeof path, "%s/config/%s", dir, name);
  return read_file(path, len);
}

/* What a repair moved into <dir>/damaged/<time>/name, the newest such copy; NULL when none. */
static char *damaged_copy(const char *dir, const char *name, size_t *len) {
  char cmd[4400];
  snprintf(cmd, sizeof cmd, "ls -d '%s'/damaged/*/%s 2>/dev/null | tail -n 1", dir, name);
  FILE *p = popen(cmd, "r");
  char path[4200] = "";
  if (p && fgets(path, sizeof path, p)) path[strcspn(path, "\n")] = '\0';
  if (p) pclose(p);
  return path[0] ? read_file(path, len) : NULL;
}

static rmq_group_offset *group_offsets(const char *dir, int *n) {
  rmq_config cfg;
  tu_small_config(&cfg, 1 << 20);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_group_offset *all = NULL;
  rmq_err err = {0};
  *n = -1;
  if (s) CHECK_EQ_INT(rmq_store_group_offsets(s, &all, n, &err), RMQ_OK);
  rmq_store_close(s);
  return all;
}

/*
** consumerOffset.json cut in the middle of its second group, no .bak: the
** writable open fails naming rocketmq_repair, rmq_verify reports where the
** file breaks, and the repair moves it into damaged/ and writes the entries
** before the cut, which the store then reads.
*/
static void test_damaged_offsets(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, 1 << 20);
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  put_messages(s, 8);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_commit_offset(s, "g0", "T", 0, 1, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_store_commit_offset(s, "g0", "T", 1, 2, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_store_commit_offset(s, "g1", "T", 2, 1, &err), RMQ_OK);
  rmq_store_close(s);

  size_t len;
  char *text = read_config(dir, "consumerOffset.json", &len);
  const char *g1 = text ? strstr(text, "\"T@g1\"") : NULL;
  CHECK(g1 != NULL);
  if (!g1) return free(text);
  size_t cut = (size_t)(g1 - text) + 10; /* inside "T@g1":{2:1 */
  write_config(dir, "consumerOffset.json", text, cut);
  char bak[4200];
  snprintf(bak, sizeof bak, "%s/config/consumerOffset.json.bak", dir);
  unlink(bak);

  rmq_store *none = NULL;
  rmq_err open_err = {0};
  CHECK_EQ_INT(rmq_store_open(dir, &cfg, &none, &open_err), RMQ_ECORRUPT);
  CHECK(strstr(open_err.msg, "consumerOffset.json: offset ") != NULL);
  char hint[4300];
  snprintf(hint, sizeof hint,
           "; run SELECT rocketmq_repair('%s') to move it aside into %s/damaged/", dir, dir);
  CHECK(strstr(open_err.msg, hint) != NULL);

  config_rows r = verify_config(dir);
  CHECK_EQ_INT(r.n, 1);
  CHECK_EQ_STR(r.file, "config/consumerOffset.json");
  CHECK_EQ_INT(r.offset, (int64_t)cut);
  CHECK(strstr(r.detail, "there is no .bak; a writable open fails until rocketmq_repair") != NULL);

  int64_t moved = 0;
  CHECK_EQ_INT(rmq_store_repair(dir, &moved, &err), RMQ_OK);
  CHECK_EQ_INT(moved, (int64_t)cut);
  size_t kept_len = 0;
  char *kept = damaged_copy(dir, "consumerOffset.json", &kept_len);
  CHECK(kept && kept_len == cut && memcmp(kept, text, cut) == 0);
  free(kept);
  parsed p = parse_offsets(dir);
  CHECK_EQ_INT(p.n, 2);
  CHECK_EQ_INT(offset_of(&p, "g0", 0), 1);
  CHECK_EQ_INT(offset_of(&p, "g0", 1), 2);
  int n;
  rmq_group_offset *all = group_offsets(dir, &n);
  CHECK_EQ_INT(n, 2);
  free(all);
  CHECK_EQ_INT(verify_config(dir).n, 0);
  free(text);
}

/*
** Garbage in the file with a sound .bak: the store reads the .bak, rmq_verify
** says so, and the repair keeps the .bak's entries updated by those of the
** file before the garbage. A bad number in a file without .bak: the entry
** is not kept; nothing read: an empty table, the damaged file kept.
*/
static void test_damaged_with_bak(const char *dir) {
  const char *bak_text = "{\"offsetTable\":{\"T@g0\":{0:1,1:1},\"T@g1\":{2:1}}}";
  const char *file_text = "{\"offsetTable\":{\"T@g0\":{0:2,1:2},\"T@g1\":{2:2}}}";
  write_config(dir, "consumerOffset.json.bak", bak_text, strlen(bak_text));
  write_config(dir, "consumerOffset.json", file_text, strlen(file_text));
  char *garbled = strdup(file_text);
  memcpy(garbled + 36, "##", 2); /* over g1 of "T@g1", whose key starts at 33 */
  write_config(dir, "consumerOffset.json", garbled, strlen(garbled));
  int n;
  rmq_group_offset *all = group_offsets(dir, &n);
  CHECK(n == 3 && all[0].offset == 1);
  free(all);
  config_rows r = verify_config(dir);
  CHECK_EQ_INT(r.n, 1);
  CHECK_EQ_INT(r.offset, 33);
  CHECK(strstr(r.detail, "its .bak is sound and is read instead") != NULL);
  int64_t moved = 0;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_repair(dir, &moved, &err), RMQ_OK);
  CHECK_EQ_INT(moved, (int64_t)strlen(garbled));
  parsed p = parse_offsets(dir);
  CHECK_EQ_INT(p.n, 3);
  CHECK_EQ_INT(offset_of(&p, "g0", 0), 2);
  CHECK_EQ_INT(offset_of(&p, "g0", 1), 2);
  CHECK_EQ_INT(offset_of(&p, "g1", 2), 1);
  free(garbled);

  char bak[4200];
  snprintf(bak, sizeof bak, "%s/config/consumerOffset.json.bak", dir);
  const char *bad_number = "{\"offsetTable\":{\"T@g0\":{0:3,1:-4}}}";
  write_config(dir, "consumerOffset.json", bad_number, strlen(bad_number));
  unlink(bak);
  CHECK_EQ_INT(rmq_store_repair(dir, &moved, &err), RMQ_OK);
  p = parse_offsets(dir);
  CHECK(p.n == 1 && offset_of(&p, "g0", 0) == 3);

  write_config(dir, "consumerOffset.json", "garbage", 7);
  CHECK_EQ_INT(rmq_store_repair(dir, &moved, &err), RMQ_OK);
  CHECK_EQ_INT(moved, 7);
  p = parse_offsets(dir);
  CHECK_EQ_INT(p.n, 0);
  size_t len = 0;
  char *kept = damaged_copy(dir, "consumerOffset.json", &len);
  CHECK(kept && len == 7 && memcmp(kept, "garbage", 7) == 0);
  free(kept);
  all = group_offsets(dir, &n);
  CHECK_EQ_INT(n, 0);
  free(all);
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
  test_damaged_offsets(dir);
  test_damaged_with_bak(dir);
  tu_rmrf(dir);
  tu_tmpdir(dir, sizeof dir);
  test_send_back(dir);
  tu_rmrf(dir);
  tu_tmpdir(dir, sizeof dir);
  test_topics(dir);
  tu_rmrf(dir);
  return check_report();
}
