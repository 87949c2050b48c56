/*
** consumer_offset.h: ConsumerOffsetManager, the next offset each consumer
** group reads in each queue, kept in <store>/config/consumerOffset.json in
** RocketMQ's format.
*/
#ifndef RMQ_CONSUMER_OFFSET_H
#define RMQ_CONSUMER_OFFSET_H

#include "rmq.h"

typedef struct rmq_consumer_offset_manager rmq_consumer_offset_manager;

/*
** Load config/consumerOffset.json under store_dir (its .bak when the file is
** missing or broken; an empty table when neither exists). RMQ_ECORRUPT: a
** file exists but neither it nor its .bak parses (the parser's message).
** RMQ_ENOMEM, RMQ_EIO.
*/
int rmq_com_load(const char *store_dir, rmq_consumer_offset_manager **out, rmq_err *err);
void rmq_com_free(rmq_consumer_offset_manager *m);

/*
** Set (group, topic, queue_id) to offset and persist the table before
** returning. Commits that arrive while a persist runs are written together
** by the next one (group commit). RMQ_EIO: the file could not be written
** (the entry stays set in memory and goes out with the next persist).
*/
int rmq_com_commit(rmq_consumer_offset_manager *m, const char *group, const char *topic,
                   int32_t queue_id, int64_t offset, rmq_err *err);

/* A malloc'd copy of every entry, in the order they were first committed. RMQ_ENOMEM. */
int rmq_com_snapshot(rmq_consumer_offset_manager *m, rmq_group_offset **out, int *count,
                     rmq_err *err);

#endif
