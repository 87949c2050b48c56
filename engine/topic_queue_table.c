/*
** topic_queue_table.c: the (topic, queueId) hash table (see topic_queue_table.h).
*/
#include "topic_queue_table.h"

#include <stdlib.h>
#include <string.h>

struct rmq_topic_queue_table {
  rmq_tqt_entry *slots;
  size_t cap, count; /* cap is 0 or a power of two */
  size_t lmq;        /* entries whose topic starts with RMQ_LMQ_PREFIX */
};

/* FNV-1a over the topic, mixed with the queue id; the final shift feeds the mask high bits. */
static uint64_t tqt_hash(const char *topic, size_t len, int32_t queue_id) {
  uint64_t h = 14695981039346656037ULL;
  for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)topic[i]) * 1099511628211ULL;
  h ^= (uint64_t)(uint32_t)queue_id * 0x9E3779B97F4A7C15ULL;
  return h ^ (h >> 29);
}

/* The slot of (topic, queue_id): its entry, or the empty slot where it would go. */
static inline rmq_tqt_entry *tqt_slot(rmq_tqt_entry *slots, size_t cap, const char *topic,
                                      size_t len, int32_t queue_id, uint64_t h) {
  size_t mask = cap - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    rmq_tqt_entry *e = &slots[i];
    if (e->topic == NULL) return e;
    if (e->hash == h && e->queue_id == queue_id && e->topic_len == len &&
        memcmp(e->topic, topic, len) == 0) {
      return e;
    }
  }
}

static int tqt_grow(rmq_topic_queue_table *t) {
  size_t cap = t->cap ? t->cap * 2 : 64;
  rmq_tqt_entry *slots = calloc(cap, sizeof *slots);
  if (!slots) return -1;
  for (size_t i = 0; i < t->cap; i++) {
    rmq_tqt_entry *e = &t->slots[i];
    if (e->topic) *tqt_slot(slots, cap, e->topic, e->topic_len, e->queue_id, e->hash) = *e;
  }
  free(t->slots);
  t->slots = slots;
  t->cap = cap;
  return 0;
}

rmq_topic_queue_table *rmq_tqt_new(void) { return calloc(1, sizeof(rmq_topic_queue_table)); }

void rmq_tqt_free(rmq_topic_queue_table *t) {
  if (!t) return;
  for (size_t i = 0; i < t->cap; i++) free(t->slots[i].topic);
  free(t->slots);
  free(t);
}

rmq_tqt_entry *rmq_tqt_find(rmq_topic_queue_table *t, const char *topic, size_t len,
                            int32_t queue_id) {
  if (t->count == 0) return NULL;
  rmq_tqt_entry *e = tqt_slot(t->slots, t->cap, topic, len, queue_id,
                              tqt_hash(topic, len, queue_id));
  return e->topic ? e : NULL;
}

rmq_tqt_entry *rmq_tqt_get(rmq_topic_queue_table *t, const char *topic, size_t len,
                           int32_t queue_id) {
  if ((t->count + 1) * 2 > t->cap && tqt_grow(t) != 0) return NULL;
  uint64_t h = tqt_hash(topic, len, queue_id);
  rmq_tqt_entry *e = tqt_slot(t->slots, t->cap, topic, len, queue_id, h);
  if (e->topic) return e;
  char *copy = malloc(len ? len : 1);
  if (!copy) return NULL;
  memcpy(copy, topic, len);
  *e = (rmq_tqt_entry){.topic = copy, .topic_len = (uint32_t)len, .queue_id = queue_id, .hash = h};
  t->count++;
  if (len >= sizeof RMQ_LMQ_PREFIX - 1 &&
      memcmp(topic, RMQ_LMQ_PREFIX, sizeof RMQ_LMQ_PREFIX - 1) == 0) {
    t->lmq++;
  }
  return e;
}

size_t rmq_tqt_count(const rmq_topic_queue_table *t) { return t->count; }
size_t rmq_tqt_lmq_count(const rmq_topic_queue_table *t) { return t->lmq; }

rmq_tqt_entry *rmq_tqt_next(rmq_topic_queue_table *t, size_t *pos) {
  for (; *pos < t->cap; (*pos)++) {
    if (t->slots[*pos].topic) return &t->slots[(*pos)++];
  }
  return NULL;
}
