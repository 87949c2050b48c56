/*
** topic_config.c: TopicConfigManager (see topic_config.h).
**
** A broker creates a topic's config when a producer first sends to it
** (TopicConfigManager.createTopicInSendMessageMethod); here the dispatcher
** creates consume queues, and a service compares the store's queues with
** the table every RMQ_TOPIC_CONFIG_INTERVAL_MS: a topic is added with as
** many queues as its highest queue id + 1, a known topic grows to cover a
** new queue, and the file is persisted when anything changed, with
** dataVersion's counter bumped (DataVersion.nextVersion). Topics the file
** held are kept, with their settings. Retry topics get perm 6 and dead
** letter topics perm 2 (write only), as SendMessageProcessor creates them.
**
** The file is derived: the consume queues hold every topic and queue of the
** store. So a topics.json that neither it nor its .bak parses never stops
** an open: both are moved into <store>/damaged/<UTC time>/ and the file is
** written again from the queues (the settings a broker had given a topic
** are what is lost).
*/
#include "topic_config.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_json.h"
#include "config_manager.h"
#include "consume_queue.h"
#include "service_thread.h"
#include "topic_queue_table.h"

#define PERM_READ_WRITE 6 /* PermName.PERM_READ | PERM_WRITE */
#define PERM_WRITE 2

struct rmq_topic_config_manager {
  rmq_service_thread thread;
  rmq_cq_table *queues;   /* the store's consume queues, whose topics the table holds */
  char delay_levels[512]; /* the store's levels: SCHEDULE_TOPIC_XXXX has one queue each */
  pthread_mutex_t mu;     /* the table: the service and rmq_tcm_sync's callers */
  rmq_topic_config *topics;
  int n, cap;
  rmq_topic_queue_table *places; /* topic (queue id 0) -> its index in topics, plus one */
  int64_t counter;
  bool dirty;
  char path[PATH_MAX];
};

/* Hashed: the sync looks up every queue's topic each second (tens of thousands). */
static rmq_topic_config *find(rmq_topic_config_manager *m, const char *topic) {
  rmq_tqt_entry *e = rmq_tqt_find(m->places, topic, strlen(topic), 0);
  return e ? &m->topics[e->next_offset - 1] : NULL;
}

static rmq_topic_config *add(rmq_topic_config_manager *m, const rmq_topic_config *t) {
  if (m->n == m->cap) {
    int cap = m->cap ? m->cap * 2 : 16;
    rmq_topic_config *grown = realloc(m->topics, (size_t)cap * sizeof *grown);
    if (!grown) return NULL;
    m->topics = grown;
    m->cap = cap;
  }
  rmq_tqt_entry *e = rmq_tqt_get(m->places, t->topic, strlen(t->topic), 0);
  if (!e) return NULL;
  m->topics[m->n] = *t;
  e->next_offset = ++m->n;
  return &m->topics[m->n - 1];
}

static int load_topic(void *ctx, const rmq_topic_config *t) {
  rmq_topic_config_manager *m = ctx;
  rmq_topic_config *have = find(m, t->topic);
  if (have) {
    *have = *t;
    return RMQ_OK;
  }
  return add(m, t) ? RMQ_OK : RMQ_ENOMEM;
}

static int parse_file(void *ctx, const char *text, size_t len, rmq_err *err) {
  rmq_topic_config_manager *m = ctx;
  int rc = rmq_topic_configs_parse(text, len, load_topic, m, err);
  if (rc == RMQ_ENOMEM) rmq_err_set(err, rc, "out of memory loading %s", m->path);
  return rc;
}

/* RocketMQ's retry and dead-letter topics (MixAll.getRetryTopic, getDLQTopic). */
static int perm_of(const char *topic) {
  size_t n = strlen(RMQ_DLQ_GROUP_TOPIC_PREFIX);
  return strncmp(topic, RMQ_DLQ_GROUP_TOPIC_PREFIX, n) == 0 ? PERM_WRITE : PERM_READ_WRITE;
}

/* Cover queue_id of topic; under m->mu. RMQ_ENOMEM. */
static int note_queue(rmq_topic_config_manager *m, const char *topic, int32_t queue_id) {
  rmq_topic_config *t = find(m, topic);
  if (t && t->read_queues > queue_id && t->write_queues > queue_id) return RMQ_OK;
  if (!t) {
    rmq_topic_config fresh = {.perm = perm_of(topic)};
    snprintf(fresh.topic, sizeof fresh.topic, "%s", topic);
    if (!(t = add(m, &fresh))) return RMQ_ENOMEM;
  }
  /* A queue id of INT32_MAX leaves the count at INT32_MAX: a count is an int in RocketMQ. */
  int32_t count = queue_id == INT32_MAX ? INT32_MAX : queue_id + 1;
  if (t->read_queues < count) t->read_queues = count;
  if (t->write_queues < count) t->write_queues = count;
  m->dirty = true;
  return RMQ_OK;
}

/* A broker always has SCHEDULE_TOPIC_XXXX, one queue per delay level (TopicConfigManager). */
static int note_schedule_topic(rmq_topic_config_manager *m, rmq_err *err) {
  int64_t levels[RMQ_MAX_DELAY_LEVELS];
  int count;
  int rc = rmq_parse_delay_levels(m->delay_levels, levels, RMQ_MAX_DELAY_LEVELS, &count, err);
  if (rc == RMQ_OK && note_queue(m, RMQ_SCHEDULE_TOPIC, count - 1) != RMQ_OK) {
    rc = rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  }
  return rc;
}

/* Only find the damage: nothing of a damaged topics.json is kept. */
static int damage_of(void *ctx, const char *text, size_t len, rmq_config_damage *d, rmq_err *err) {
  (void)ctx;
  return rmq_topic_configs_salvage(text, len, NULL, NULL, d, err);
}

int rmq_tcm_examine(const char *store_dir, rmq_config_copy *file, rmq_config_copy *bak,
                    rmq_err *err) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/config/topics.json", store_dir);
  return rmq_config_examine(path, damage_of, NULL, file, bak, err);
}

/* The damaged copies of topics.json set aside; *what says which, and why, for a report. */
static int set_aside(const char *store_dir, const char *path, char *damaged_dir, size_t cap,
                     int64_t *moved, char *what, size_t what_cap, rmq_err *err) {
  rmq_config_copy file, bak;
  int rc = rmq_config_examine(path, damage_of, NULL, &file, &bak, err);
  what[0] = '\0';
  if (rc != RMQ_OK || !rmq_config_needs_repair(&file, &bak)) return rc;
  bool file_damaged = file.state == RMQ_CONFIG_DAMAGED;
  snprintf(what, what_cap, "config/topics.json%s did not parse (%s)",
           !file_damaged                     ? ".bak"
           : bak.state == RMQ_CONFIG_DAMAGED ? " and its .bak"
                                             : "",
           file_damaged ? file.damage.why : bak.damage.why);
  return rmq_config_set_aside(store_dir, path, &file, &bak, damaged_dir, cap, moved, err);
}

int rmq_tcm_repair(const char *store_dir, char *damaged_dir, size_t cap, int64_t *moved,
                   rmq_err *err) {
  char path[PATH_MAX], what[512];
  snprintf(path, sizeof path, "%s/config/topics.json", store_dir);
  return set_aside(store_dir, path, damaged_dir, cap, moved, what, sizeof what, err);
}

/*
** A topics.json that cannot be loaded is rebuilt: its damaged copies moved
** aside, the table left empty for rmq_tcm_start to fill from the queues.
*/
static int rebuild(rmq_topic_config_manager *m, const char *store_dir, char *report, size_t cap,
                   rmq_err *err) {
  char damaged[PATH_MAX] = "", what[512];
  int64_t moved = 0;
  int rc = set_aside(store_dir, m->path, damaged, sizeof damaged, &moved, what, sizeof what, err);
  if (rc == RMQ_OK && what[0]) {
    snprintf(report, cap, "%s: moved to %s/ and rebuilt from the consume queues", what,
             damaged + strlen(store_dir) + 1);
  }
  return rc;
}

int rmq_tcm_load(const char *store_dir, rmq_cq_table *queues, const char *delay_levels,
                 rmq_topic_config_manager **out, char *report, size_t cap, rmq_err *err) {
  *out = NULL;
  report[0] = '\0';
  rmq_topic_config_manager *m = calloc(1, sizeof *m);
  if (m && !(m->places = rmq_tqt_new())) {
    free(m);
    m = NULL;
  }
  if (!m) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  m->queues = queues;
  snprintf(m->delay_levels, sizeof m->delay_levels, "%s", delay_levels);
  pthread_mutex_init(&m->mu, NULL);
  snprintf(m->path, sizeof m->path, "%s/config/topics.json", store_dir);
  int from;
  int rc = rmq_config_load(m->path, parse_file, m, &from, err);
  if (rc == RMQ_ECORRUPT) {
    rmq_err_clear(err);
    rc = rebuild(m, store_dir, report, cap, err);
  }
  if (rc == RMQ_OK) rc = note_schedule_topic(m, err);
  if (rc != RMQ_OK) {
    pthread_mutex_destroy(&m->mu);
    rmq_tqt_free(m->places);
    free(m->topics);
    free(m);
    return rc;
  }
  *out = m;
  return RMQ_OK;
}

/* Under m->mu: the file, when the table changed since it was written. */
static int persist_locked(rmq_topic_config_manager *m, rmq_err *err) {
  if (!m->dirty) return RMQ_OK;
  char *text = rmq_topic_configs_format(m->topics, m->n, m->counter + 1, rmq_now_ms());
  if (!text) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  int rc = rmq_config_persist(m->path, text, strlen(text), err);
  free(text);
  if (rc == RMQ_OK) {
    m->counter++;
    m->dirty = false;
  }
  return rc;
}

int rmq_tcm_sync(rmq_topic_config_manager *m, rmq_err *err) {
  rmq_consume_queue **queues;
  int n;
  int rc = rmq_cq_table_snapshot(m->queues, &queues, &n, err);
  if (rc != RMQ_OK) return rc;
  pthread_mutex_lock(&m->mu);
  for (int i = 0; rc == RMQ_OK && i < n; i++)
    rc = note_queue(m, queues[i]->topic, queues[i]->queue_id);
  if (rc == RMQ_ENOMEM) rmq_err_set(err, rc, "out of memory");
  if (rc == RMQ_OK) rc = persist_locked(m, err);
  pthread_mutex_unlock(&m->mu);
  free(queues);
  return rc;
}

/* A failed persist is tried again at the next interval: the table stays dirty. */
static void run(rmq_service_thread *self) {
  rmq_topic_config_manager *m = self->arg;
  while (!rmq_service_thread_stopped(self)) {
    rmq_service_thread_wait(self, RMQ_TOPIC_CONFIG_INTERVAL_MS);
    rmq_err err = {0};
    rmq_tcm_sync(m, &err);
  }
}

/* The file is written once at the start, so that a store always has it. */
int rmq_tcm_start(rmq_topic_config_manager *m, rmq_err *err) {
  int rc = rmq_tcm_sync(m, err);
  if (rc != RMQ_OK) return rc;
  rmq_service_thread_init(&m->thread, "TopicConfigManager", run, m);
  return rmq_service_thread_start(&m->thread, err);
}

void rmq_tcm_free(rmq_topic_config_manager *m) {
  if (!m) return;
  rmq_service_thread_shutdown(&m->thread);
  rmq_err err = {0};
  rmq_tcm_sync(m, &err);
  pthread_mutex_destroy(&m->mu);
  rmq_tqt_free(m->places);
  free(m->topics);
  free(m);
}
