/*
** consumer_offset.c: ConsumerOffsetManager (see consumer_offset.h).
**
** The table is an array of (topic, group, queue) entries searched in
** order: a store has few groups and queues. RocketMQ persists it every
** flushConsumerOffsetInterval; here a commit returns only once the file
** holding it has been renamed into place and its directory synced
** (ConfigManager.persist), so a commit survives a crash. Commits that
** arrive while another thread persists are written together by the next
** persist: each waits until a persist that started after its change
** has finished.
*/
#include "consumer_offset.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_json.h"
#include "config_manager.h"

struct rmq_consumer_offset_manager {
  pthread_mutex_t mu;
  pthread_cond_t persisted_cond;
  rmq_consumer_offset *entries;
  int n, cap;
  uint64_t version;   /* changes made so far */
  uint64_t persisted; /* changes the file holds */
  bool persisting;    /* a thread is writing the file */
  char path[PATH_MAX];
};

static rmq_consumer_offset *find(rmq_consumer_offset_manager *m, const char *group,
                                 const char *topic, int32_t queue_id) {
  for (int i = 0; i < m->n; i++) {
    rmq_consumer_offset *e = &m->entries[i];
    if (e->queue_id == queue_id && strcmp(e->topic, topic) == 0 && strcmp(e->group, group) == 0) {
      return e;
    }
  }
  return NULL;
}

/* Set an entry, adding it when new; false when out of memory. */
static bool put(rmq_consumer_offset_manager *m, const rmq_consumer_offset *o) {
  rmq_consumer_offset *e = find(m, o->group, o->topic, o->queue_id);
  if (e) {
    e->offset = o->offset;
    return true;
  }
  if (m->n == m->cap) {
    int cap = m->cap ? m->cap * 2 : 16;
    rmq_consumer_offset *grown = realloc(m->entries, (size_t)cap * sizeof *grown);
    if (!grown) return false;
    m->entries = grown;
    m->cap = cap;
  }
  m->entries[m->n++] = *o;
  return true;
}

static int load_entry(void *ctx, const rmq_consumer_offset *o) {
  return put(ctx, o) ? RMQ_OK : RMQ_ENOMEM;
}

static int parse_file(void *ctx, const char *text, size_t len, rmq_err *err) {
  rmq_consumer_offset_manager *m = ctx;
  int rc = rmq_consumer_offsets_parse(text, len, load_entry, m, err);
  if (rc == RMQ_ENOMEM) rmq_err_set(err, rc, "out of memory loading %s", m->path);
  return rc;
}

/* An empty table for store_dir's file; NULL when out of memory. */
static rmq_consumer_offset_manager *com_new(const char *store_dir) {
  rmq_consumer_offset_manager *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  pthread_mutex_init(&m->mu, NULL);
  pthread_cond_init(&m->persisted_cond, NULL);
  snprintf(m->path, sizeof m->path, "%s/config/consumerOffset.json", store_dir);
  return m;
}

int rmq_com_load(const char *store_dir, rmq_consumer_offset_manager **out, rmq_err *err) {
  *out = NULL;
  rmq_consumer_offset_manager *m = com_new(store_dir);
  if (!m) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  int from;
  int rc = rmq_config_load(m->path, parse_file, m, &from, err);
  /* The positions of the groups cannot be rebuilt: no table is made up, the user repairs. */
  if (rc == RMQ_ECORRUPT) rmq_config_repair_hint(err, store_dir);
  if (rc != RMQ_OK) {
    rmq_com_free(m);
    return rc;
  }
  *out = m;
  return RMQ_OK;
}

void rmq_com_free(rmq_consumer_offset_manager *m) {
  if (!m) return;
  pthread_mutex_destroy(&m->mu);
  pthread_cond_destroy(&m->persisted_cond);
  free(m->entries);
  free(m);
}

/* Under m->mu, released while writing: write what the table holds now. */
static int persist_locked(rmq_consumer_offset_manager *m, rmq_err *err) {
  uint64_t version = m->version;
  char *text = rmq_consumer_offsets_format(m->entries, m->n);
  if (!text) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  m->persisting = true;
  pthread_mutex_unlock(&m->mu);
  int rc = rmq_config_persist(m->path, text, strlen(text), err);
  free(text);
  pthread_mutex_lock(&m->mu);
  m->persisting = false;
  if (rc == RMQ_OK && version > m->persisted) m->persisted = version;
  pthread_cond_broadcast(&m->persisted_cond);
  return rc;
}

int rmq_com_commit(rmq_consumer_offset_manager *m, const char *group, const char *topic,
                   int32_t queue_id, int64_t offset, rmq_err *err) {
  rmq_consumer_offset o = {.queue_id = queue_id, .offset = offset};
  snprintf(o.topic, sizeof o.topic, "%s", topic);
  snprintf(o.group, sizeof o.group, "%s", group);
  int rc = RMQ_OK;
  pthread_mutex_lock(&m->mu);
  if (!put(m, &o)) rc = rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  uint64_t mine = ++m->version;
  while (rc == RMQ_OK && m->persisted < mine) {
    if (m->persisting) {
      pthread_cond_wait(&m->persisted_cond, &m->mu);
    } else {
      rc = persist_locked(m, err);
    }
  }
  pthread_mutex_unlock(&m->mu);
  return rc;
}

int rmq_com_snapshot(rmq_consumer_offset_manager *m, rmq_group_offset **out, int *count,
                     rmq_err *err) {
  pthread_mutex_lock(&m->mu);
  int n = m->n;
  rmq_group_offset *copy = malloc((size_t)(n ? n : 1) * sizeof *copy);
  for (int i = 0; copy && i < n; i++) {
    const rmq_consumer_offset *e = &m->entries[i];
    copy[i] = (rmq_group_offset){.queue_id = e->queue_id, .offset = e->offset};
    memcpy(copy[i].topic, e->topic, sizeof copy[i].topic);
    memcpy(copy[i].group, e->group, sizeof copy[i].group);
  }
  pthread_mutex_unlock(&m->mu);
  if (!copy) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  *out = copy;
  *count = n;
  return RMQ_OK;
}

/* ------------------------------------------------------ verify and repair */

/* Salvage into a table (ctx), or only find the damage (ctx NULL). */
static int salvage_file(void *ctx, const char *text, size_t len, rmq_config_damage *d,
                        rmq_err *err) {
  int rc = rmq_consumer_offsets_salvage(text, len, ctx ? load_entry : NULL, ctx, d, err);
  if (rc == RMQ_ENOMEM) rmq_err_set(err, rc, "out of memory salvaging consumer offsets");
  return rc;
}

int rmq_com_examine(const char *store_dir, rmq_config_copy *file, rmq_config_copy *bak,
                    rmq_err *err) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/config/consumerOffset.json", store_dir);
  return rmq_config_examine(path, salvage_file, NULL, file, bak, err);
}

int rmq_com_repair(const char *store_dir, char *damaged_dir, size_t cap, int64_t *moved,
                   rmq_err *err) {
  rmq_consumer_offset_manager *m = com_new(store_dir);
  if (!m) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  rmq_config_copy file, bak;
  int rc = rmq_config_examine(m->path, salvage_file, m, &file, &bak, err);
  if (rc == RMQ_OK && rmq_config_needs_repair(&file, &bak)) {
    rc = rmq_config_set_aside(store_dir, m->path, &file, &bak, damaged_dir, cap, moved, err);
    pthread_mutex_lock(&m->mu);
    if (rc == RMQ_OK) rc = persist_locked(m, err);
    pthread_mutex_unlock(&m->mu);
  }
  rmq_com_free(m);
  return rc;
}
