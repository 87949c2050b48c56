/*
** reput.h: ReputMessageService, the dispatcher (DefaultMessageStore.ReputMessageService).
**
** One thread reads the CommitLog from reput_from_offset up to what the
** writer has published, validates each record (without the CRC, as
** RocketMQ) and hands it to the dispatchers in order: BuildConsumeQueue
** (NOT_TYPE and COMMIT records only) and BuildIndex (all but ROLLBACK).
** Unlike RocketMQ's 1 ms polling, the writer wakes the thread after each
** append, so the lag is the time of one dispatch, not of a sleep.
**
** Readers that must see a message they just put call rmq_reput_wait_for(),
** and long-polling readers sleep on the same progress signal. A dispatch
** that cannot write a consume queue or an index file is fatal for writing:
** the CommitLog is poisoned with the reason, as RocketMQ marks the store not
** writable, and the dispatcher stops.
*/
#ifndef RMQ_REPUT_H
#define RMQ_REPUT_H

#include <stdbool.h>
#include <stdint.h>

#include "checkpoint.h"
#include "commitlog.h"
#include "consume_queue.h"
#include "index_file.h"

typedef struct rmq_reput_service rmq_reput_service;

rmq_reput_service *rmq_reput_new(rmq_commitlog *cl, rmq_cq_table *cqs, rmq_index_service *index,
                                 rmq_checkpoint *cp, rmq_err *err);
/* Start dispatching at from_offset. */
int rmq_reput_start(rmq_reput_service *r, int64_t from_offset, rmq_err *err);
/* Stop the thread (after it dispatched what is written, when it can) and free. */
void rmq_reput_free(rmq_reput_service *r);

/* Dispatch one record now (abnormal recovery calls this as it scans). */
int rmq_reput_dispatch(rmq_reput_service *r, const rmq_message *m, rmq_err *err);

/* The writer appended: wake the dispatcher. */
void rmq_reput_wakeup(rmq_reput_service *r);

/* Everything before this offset is dispatched. */
int64_t rmq_reput_offset(rmq_reput_service *r);
/* Bytes written but not yet dispatched. */
int64_t rmq_reput_behind(rmq_reput_service *r);

/*
** Wait until everything before offset is dispatched, at most timeout_ms.
** RMQ_ETIMEOUT when it is not; RMQ_EPOISONED when dispatch failed.
*/
int rmq_reput_wait_for(rmq_reput_service *r, int64_t offset, int timeout_ms, rmq_err *err);
/*
** Sleep until the dispatcher makes progress past `seen` or timeout_ms passes
** (long polling); returns the dispatched offset.
*/
int64_t rmq_reput_wait_progress(rmq_reput_service *r, int64_t seen, int timeout_ms);

/*
** Call fn(ctx) after each SCHEDULE_TOPIC_XXXX record is put into its consume
** queue: the ScheduleMessageService looks at the new delayed message's due
** time at once. May be called while the dispatcher runs; NULL fn: none.
*/
typedef void (*rmq_reput_schedule_fn)(void *ctx);
void rmq_reput_on_schedule(rmq_reput_service *r, rmq_reput_schedule_fn fn, void *ctx);

/*
** Call fn(ctx, offset) after each dispatch pass that moved the dispatched
** offset, with the offset reached: the owner of a store tells the other
** processes (shared_state.h). May be called while the dispatcher runs;
** NULL fn: none.
*/
typedef void (*rmq_reput_progress_fn)(void *ctx, int64_t dispatched);
void rmq_reput_on_progress(rmq_reput_service *r, rmq_reput_progress_fn fn, void *ctx);

/* Records the dispatcher skipped as invalid (a damaged store), for stats. */
int64_t rmq_reput_skipped(rmq_reput_service *r);

#endif
