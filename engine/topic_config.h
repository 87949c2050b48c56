/*
** topic_config.h: TopicConfigManager, the topics of a store with their
** queue counts, kept in <store>/config/topics.json in RocketMQ's format so
** that a broker started on the directory serves them.
*/
#ifndef RMQ_TOPIC_CONFIG_H
#define RMQ_TOPIC_CONFIG_H

#include "config_manager.h"
#include "consume_queue.h"
#include "rmq.h"

typedef struct rmq_topic_config_manager rmq_topic_config_manager;

/*
** Load config/topics.json under store_dir (or its .bak), so that topics a
** broker created are kept; an empty table when neither exists. When neither
** parses, they are moved into <store_dir>/damaged/<UTC time>/ and the table
** starts empty, to be rebuilt from the queues: report (cap bytes) then says
** so, else it is "". SCHEDULE_TOPIC_XXXX gets one queue per delay level.
** The service that keeps the table up to date with the consume queues is
** not started yet. RMQ_ENOMEM, RMQ_EIO (a file that cannot be read or moved).
*/
int rmq_tcm_load(const char *store_dir, rmq_cq_table *queues, const char *delay_levels,
                 rmq_topic_config_manager **out, char *report, size_t cap, rmq_err *err);
/* rocketmq_verify: how config/topics.json and its .bak read (rmq_config_examine). */
int rmq_tcm_examine(const char *store_dir, rmq_config_copy *file, rmq_config_copy *bak,
                    rmq_err *err);
/*
** rocketmq_repair: when topics.json needs a repair (rmq_config_needs_repair),
** move each damaged copy into damaged_dir (rmq_config_set_aside); no new
** file is written: the next open writes it from the queues.
*/
int rmq_tcm_repair(const char *store_dir, char *damaged_dir, size_t cap, int64_t *moved,
                   rmq_err *err);
/*
** Sync once (the file exists from the first open on), then start the service: every
** RMQ_TOPIC_CONFIG_INTERVAL_MS it adds the queues that appeared. rmq_tcm_sync's errors.
*/
#define RMQ_TOPIC_CONFIG_INTERVAL_MS 1000
int rmq_tcm_start(rmq_topic_config_manager *m, rmq_err *err);
/* Add the store's queues now and persist the file if anything changed. RMQ_EIO, RMQ_ENOMEM. */
int rmq_tcm_sync(rmq_topic_config_manager *m, rmq_err *err);
/* Stop the service, sync a last time (errors are dropped: the next open syncs again), free. */
void rmq_tcm_free(rmq_topic_config_manager *m);

#endif
