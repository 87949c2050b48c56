/*
** schedule.h: ScheduleMessageService, the delivery of delayed messages.
**
** A message put with DELAY = level waits in SCHEDULE_TOPIC_XXXX queue
** level-1 (CommitLog.asyncPutMessage); its consume-queue entry's tags code
** is its delivery time. One thread walks each level's queue from the level's
** offset and, for every entry that is due, puts the message back into its
** REAL_TOPIC / REAL_QID as a new record (messageTimeup), then advances the
** level's offset. Instead of RocketMQ's 100 ms polling it sleeps until the
** next entry of any level is due, and the dispatcher wakes it when it puts a
** new delayed message into its queue (one due sooner than any other, after
** a clock step, is then not missed).
**
** The offsets are the progress a restart resumes from: a second thread
** writes them to config/delayOffset.json every RMQ_SCHEDULE_PERSIST_MS when
** they moved (its fsyncs never delay a delivery), and close writes them last;
** a crash can deliver again what was delivered since the last write, never
** lose a message.
*/
#ifndef RMQ_SCHEDULE_H
#define RMQ_SCHEDULE_H

#include "commitlog.h"
#include "config_manager.h"
#include "consume_queue.h"
#include "reput.h"
#include "rmq.h"

/*
** RocketMQ writes every 10 s (flushDelayOffsetInterval); a shorter period
** bounds what a crash delivers twice to the last period's deliveries, and an
** idle store writes nothing.
*/
#define RMQ_SCHEDULE_PERSIST_MS 100
/* A put that failed is tried again this much later (DELAY_FOR_A_PERIOD is 10 s in RocketMQ). */
#define RMQ_SCHEDULE_RETRY_MS 1000
#define RMQ_TRANS_HALF_TOPIC "RMQ_SYS_TRANS_HALF_TOPIC"

typedef struct rmq_schedule_service rmq_schedule_service;

/* The longest report rmq_schedule_load_offsets writes. */
#define RMQ_SCHEDULE_REPORT_MAX 640

/* <store_dir>/config/delayOffset.json */
void rmq_schedule_offsets_path(const char *store_dir, char *out, size_t cap);
/*
** The offsets to resume from (ScheduleMessageService.load): config/
** delayOffset.json, or its .bak when it is missing or damaged, each offset
** clamped to its schedule queue's bounds (correctDelayOffset); all zero (each
** queue's start) for a new store. report is "", or says that the .bak was
** read. When neither file can be used, offsets are the queues' starts,
** report says why, and the load's error is returned (RMQ_ECORRUPT, with how
** to run rmq_store_repair; RMQ_EIO, RMQ_ENOMEM): delivery must not start
** there, which would deliver every delayed message again, but a listing
** may.
*/
int rmq_schedule_load_offsets(const char *store_dir, rmq_cq_table *cqs, int64_t *offsets,
                              char *report, size_t cap, rmq_err *err);
/* rocketmq_verify: how config/delayOffset.json and its .bak read (rmq_config_examine). */
int rmq_schedule_examine_offsets(const char *store_dir, rmq_config_copy *file, rmq_config_copy *bak,
                                 rmq_err *err);
/*
** rocketmq_repair: when delayOffset.json needs a repair (rmq_config_needs_repair),
** move each damaged copy into damaged_dir (rmq_config_set_aside) and write
** a new file with every level that still reads, the file's replacing its
** .bak's: an empty table when none does (each level then delivers from its
** queue's start), the damaged copies kept. rmq_config_set_aside's and
** rmq_config_persist's errors.
*/
int rmq_schedule_repair_offsets(const char *store_dir, char *damaged_dir, size_t cap,
                                int64_t *moved, rmq_err *err);

/*
** A service for the store's levels (cl->cfg.delay_ms), each level starting
** at offsets[level-1], persisting them to store_dir's delayOffset.json.
** NULL with err (RMQ_ENOMEM).
*/
rmq_schedule_service *rmq_schedule_new(rmq_commitlog *cl, rmq_cq_table *cqs,
                                       rmq_reput_service *reput, const char *store_dir,
                                       const int64_t *offsets, rmq_err *err);
int rmq_schedule_start(rmq_schedule_service *s, rmq_err *err);
/* Look at every level now (a delayed message was put, or a test wants it). */
void rmq_schedule_wakeup(rmq_schedule_service *s);
/*
** Stop the threads, write the offsets (when they moved) and free; NULL:
** nothing. When the write fails the file keeps older offsets: the next open
** delivers some messages again, never loses one.
*/
void rmq_schedule_free(rmq_schedule_service *s);

/* The next SCHEDULE_TOPIC_XXXX queue offset of a level (1-based) to deliver. */
int64_t rmq_schedule_offset(rmq_schedule_service *s, int level);
/* Copy every level's offset into offsets[0..RMQ_MAX_DELAY_LEVELS). */
void rmq_schedule_offsets(rmq_schedule_service *s, int64_t *offsets);
/* Messages put back into their real topics, and those dropped (no real topic, half messages). */
int64_t rmq_schedule_delivered(rmq_schedule_service *s);
int64_t rmq_schedule_dropped(rmq_schedule_service *s);

/*
** ScheduleMessageService.correctDeliverTimestamp: a delivery time further
** ahead than the level's delay (the clock went back since the put) is now;
** now + delay stops at INT64_MAX.
*/
int64_t rmq_schedule_correct_deliver_time(int64_t now, int64_t deliver, int64_t delay_ms);

/*
** rmq_store_scheduled over the store's parts: each level's entries of cqs
** from where delivery stands (svc's offsets; without a service, those of
** dir's config/delayOffset.json), with their records read from cl.
*/
int rmq_schedule_list(rmq_schedule_service *svc, const char *dir, rmq_cq_table *cqs,
                      rmq_commitlog *cl, rmq_scheduled_fn fn, void *ctx, rmq_err *err);

#endif
