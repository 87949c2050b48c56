/*
** consumer_offset.h: ConsumerOffsetManager, the next offset each consumer
** group reads in each queue, kept in <store>/config/consumerOffset.json in
** RocketMQ's format.
*/
#ifndef RMQ_CONSUMER_OFFSET_H
#define RMQ_CONSUMER_OFFSET_H

#include "config_manager.h"
#include "rmq.h"

typedef struct rmq_consumer_offset_manager rmq_consumer_offset_manager;

/*
** Load config/consumerOffset.json under store_dir (its .bak when the file is
** missing or broken; an empty table when neither exists). RMQ_ECORRUPT: a
** file exists but neither it nor its .bak parses (the parser's message,
** then how to run rmq_store_repair). RMQ_ENOMEM, RMQ_EIO.
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

/* rocketmq_verify: how config/consumerOffset.json and its .bak read (rmq_config_examine). */
int rmq_com_examine(const char *store_dir, rmq_config_copy *file, rmq_config_copy *bak,
                    rmq_err *err);
/*
** rocketmq_repair: when the file needs a repair (rmq_config_needs_repair),
** move each damaged copy into damaged_dir (rmq_config_set_aside) and write
** a new file with every entry that still reads, those of the file replacing
** those of its .bak: an empty table when none does, the damaged copies
** kept. rmq_config_set_aside's and rmq_config_persist's errors.
*/
int rmq_com_repair(const char *store_dir, char *damaged_dir, size_t cap, int64_t *moved,
                   rmq_err *err);

#endif
