/*
** topic_queue_table.h: a hash table keyed by (topic, queueId).
**
** RocketMQ keeps two such maps: CommitLog.topicQueueTable ("topic-queueId"
** -> the next queue offset) and ConsumeQueueStore's table of consume queues.
** Both are this table: open addressing with linear probing, the capacity a
** power of two, doubled when half full. A slot holds a copy of the topic and
** either an int64 (next_offset) or a pointer (value), as its user chooses;
** a new slot starts with zero in both. Entries are never removed. The table
** takes no lock: each user guards it as it needs.
*/
#ifndef RMQ_TOPIC_QUEUE_TABLE_H
#define RMQ_TOPIC_QUEUE_TABLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct rmq_tqt_entry {
  char *topic; /* NULL: an empty slot; else the table's copy, not NUL-terminated */
  uint32_t topic_len;
  int32_t queue_id;
  uint64_t hash;
  union {
    int64_t next_offset; /* CommitLog.topicQueueTable's value */
    void *value;         /* any other user's */
  };
} rmq_tqt_entry;

typedef struct rmq_topic_queue_table rmq_topic_queue_table;

/* An empty table, or NULL when out of memory. */
rmq_topic_queue_table *rmq_tqt_new(void);
/* Free the table and its topics (not what values point to). */
void rmq_tqt_free(rmq_topic_queue_table *t);

/* The entry of (topic, queue_id), or NULL. */
rmq_tqt_entry *rmq_tqt_find(rmq_topic_queue_table *t, const char *topic, size_t len,
                            int32_t queue_id);
/*
** The entry of (topic, queue_id), added (zeroed) when absent; NULL when out
** of memory. Adding may move every entry: a pointer from find or get is
** valid only until the next get.
*/
rmq_tqt_entry *rmq_tqt_get(rmq_topic_queue_table *t, const char *topic, size_t len,
                           int32_t queue_id);

size_t rmq_tqt_count(const rmq_topic_queue_table *t);
/* MixAll.isLmq: a light message queue's name starts with this. */
#define RMQ_LMQ_PREFIX "%LMQ%"
/* Entries of light message queues (DefaultMessageStore's lmqConsumeQueueNum). */
size_t rmq_tqt_lmq_count(const rmq_topic_queue_table *t);
/* Iteration: the next entry at or after slot *pos (start at 0), or NULL at the end. */
rmq_tqt_entry *rmq_tqt_next(rmq_topic_queue_table *t, size_t *pos);

#endif
