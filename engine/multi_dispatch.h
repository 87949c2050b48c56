/*
** multi_dispatch.h: MultiDispatch, light message queues (LMQ).
**
** With enable_lmq (RocketMQ's enableLmq and enableMultiDispatch), a message
** whose INNER_MULTI_DISPATCH property lists queues "%LMQ%a,%LMQ%b" is stored
** once and dispatched into each listed queue too, at queue id 0. At append
** time, under the put lock, the store writes each queue's next offset into
** INNER_MULTI_QUEUE_OFFSET ("0,17", MultiDispatch.wrapMultiDispatch) and
** drops WAIT from the stored properties, as RocketMQ does; the dispatcher
** puts the record's entry into each queue at that offset
** (ConsumeQueue.multiDispatchLmqQueue). The record keeps its own topic and
** queue: an LMQ entry leads to a record that lists the queue.
**
** Not for %RETRY%, %DLQ%, system topics or SCHEDULE_TOPIC_XXXX (a delayed
** message is dispatched when it is delivered to its real topic), nor for a
** prepared or rolled-back record (MultiDispatch.isNeedHandleMultiDispatch).
*/
#ifndef RMQ_MULTI_DISPATCH_H
#define RMQ_MULTI_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "message.h"
#include "topic_queue_table.h"

#define RMQ_PROPERTY_INNER_MULTI_DISPATCH "INNER_MULTI_DISPATCH"
#define RMQ_PROPERTY_INNER_MULTI_QUEUE_OFFSET "INNER_MULTI_QUEUE_OFFSET"

/* MixAll.isLmq: a queue name that starts with "%LMQ%". */
bool rmq_lmq_name(const char *name, size_t len);

/* Whether a record of this topic and SYSFLAG is multi-dispatched. */
bool rmq_md_applies(const char *topic, size_t topic_len, int32_t sys_flag);

/*
** INNER_MULTI_DISPATCH of a message put with enable_lmq: every name a
** valid topic that starts with "%LMQ%", none twice. RMQ_EINVAL names the
** first that is not. A message without the property passes.
*/
int rmq_md_check(const char *props, size_t len, rmq_err *err);

/* One queue a record is dispatched into besides its own. */
typedef struct rmq_md_target {
  const char *topic;
  size_t topic_len;
  int32_t queue_id; /* 0 for an LMQ; the record's own for another name */
  int64_t queue_offset;
} rmq_md_target;

typedef struct rmq_md_iter {
  const char *names, *names_end, *offsets, *offsets_end;
  int32_t queue_id;
} rmq_md_iter;

/*
** Walk the queues a record's properties list with their offsets; false
** when the record lists none (either property absent or empty).
*/
bool rmq_md_iter_start(rmq_md_iter *it, const char *props, size_t len, int32_t queue_id);
/* 1: *t is the next queue; 0: the end; -1: the lists do not pair up or an offset is no number. */
int rmq_md_iter_next(rmq_md_iter *it, rmq_md_target *t);

/*
** Whether the record m lists queue (topic, queue_id) at offset n: an LMQ
** entry of that queue may lead to it.
*/
bool rmq_md_lists(const rmq_message *m, const char *topic, size_t topic_len, int32_t queue_id,
                  int64_t n);

/* The properties of a whole v1 record whose head h was read. */
void rmq_record_properties(const uint8_t *rec, const rmq_record_head *h, const char **props,
                           size_t *len);

/*
** MultiDispatch.wrapMultiDispatch on the encoded record rec (head h), which
** lists queues in INNER_MULTI_DISPATCH: write to out (room for h->len +
** rmq_md_growth bytes) the record with INNER_MULTI_QUEUE_OFFSET set to each
** listed queue's next offset in tqt and WAIT dropped, and advance those
** offsets (updateMultiQueueOffset). A queue not in tqt is new: refused
** (RMQ_EINVAL naming max_lmq_queues) when max_lmq exist already. Returns
** the new record's length, or -1 with err. Each offset is logged in *undo
** (*nundo entries, grown with realloc) before it moves: when the batch
** fails, rmq_md_undo_all gives them back.
*/
typedef struct rmq_md_undo {
  char topic[RMQ_MAX_TOPIC_LEN];
  uint8_t topic_len;
  int32_t queue_id;
  int64_t next_offset;
} rmq_md_undo;
int32_t rmq_md_wrap(rmq_topic_queue_table *tqt, int max_lmq, const uint8_t *rec,
                    const rmq_record_head *h, uint8_t *out, rmq_md_undo **undo, size_t *nundo,
                    rmq_err *err);
/* The most rmq_md_wrap makes a record grow: the property's name and 20 bytes per queue. */
size_t rmq_md_growth(const uint8_t *rec, const rmq_record_head *h);
/* Give the offsets back, newest change first. */
void rmq_md_undo_all(rmq_topic_queue_table *tqt, const rmq_md_undo *undo, size_t n);

/*
** After another process appended rec: its listed queues' next offsets
** follow from INNER_MULTI_QUEUE_OFFSET. false when out of memory.
*/
bool rmq_md_follow(rmq_topic_queue_table *tqt, const uint8_t *rec, const rmq_record_head *h);

#endif
