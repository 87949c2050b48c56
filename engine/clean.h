/*
** clean.h: retention, DefaultMessageStore's CleanCommitLogService and
** CleanConsumeQueueService in one service thread ("rmq-clean").
**
** A writable store starts it after the open and stops it first at close.
** The first pass runs clean_first_delay_ms after the start, then one every
** clean_interval_ms; rmq_clean_pass runs one more on request (manual, any
** hour). Passes never overlap. Each pass:
**  - checks the disk that holds the commit log (isSpaceToDelete): above
**    disk_warning_ratio the commit log refuses puts (RMQ_EFULL) until a pass
**    finds the disk below it again; above disk_clean_forcibly_ratio segments
**    go before they expire (cleanImmediately); above disk_max_used_ratio, or
**    when the disk cannot be measured, expired segments go at any hour;
**  - deletes commit-log segments (deleteExpiredFileByTime) when triggered:
**    by the hour (delete_when), by the disk, or on request. Oldest first,
**    never the current segment, stopping at the first one kept so that no
**    hole is left, at most RMQ_CLEAN_MAX_SEGMENTS per pass, 100 ms apart. A
**    segment goes when it was modified file_reserved_hours ago, or at once
**    when the disk is above disk_clean_forcibly_ratio; never before it was
**    flushed whole, so that the flush services never look for it again;
**  - when the commit log's minimum offset grew, deletes the consume-queue
**    files whose last entry is below it (rmq_cq_delete_expired, 100 ms after
**    each queue that lost a file), then the index files
**    (rmq_index_service_delete_expired);
**  - frees the deleted files that readers no longer hold, and takes away
**    those held longer than clean_grace_ms (rmq_retired_reap).
** Deleted files go through the store's retired list: a reader that holds
** one keeps reading it until it lets go.
**
** Unlike RocketMQ, a disk above disk_clean_forcibly_ratio triggers a pass by
** itself, whatever disk_max_used_ratio says (RocketMQ waits for the hour or
** the disk_max_used_ratio trigger; with the default ratios it is the same).
**
** rmq_clean_forecast is the dry run: the same rule, applied to every file
** of the store without deleting anything (rmq_store_files).
*/
#ifndef RMQ_CLEAN_H
#define RMQ_CLEAN_H

#include <stdbool.h>
#include <stdint.h>

#include "commitlog.h"
#include "consume_queue.h"
#include "index_file.h"
#include "mapped_file.h"
#include "rmq.h"

/* MappedFileQueue.deleteExpiredFileByTime's DELETE_FILES_BATCH_MAX. */
#define RMQ_CLEAN_MAX_SEGMENTS 10
/* deleteCommitLogFilesInterval and deleteConsumeQueueFilesInterval. */
#define RMQ_CLEAN_DELETE_INTERVAL_MS 100

typedef struct rmq_clean_service rmq_clean_service;

/*
** A service over the store's parts; cfg and dir must outlive it. The thread
** is not started: a read-only store has one too, for its dry runs.
*/
rmq_clean_service *rmq_clean_service_new(const char *dir, const rmq_config *cfg, rmq_commitlog *cl,
                                         rmq_cq_table *cqs, rmq_index_service *index,
                                         rmq_retired_files *retired, rmq_err *err);
int rmq_clean_service_start(rmq_clean_service *cs, rmq_err *err);
/* Stop the thread (a pass in progress ends at its next deletion) and free. */
void rmq_clean_service_free(rmq_clean_service *cs);

/* One pass now, at any hour (manual); *deleted: the files it deleted, all kinds. */
int rmq_clean_pass(rmq_clean_service *cs, int *deleted, rmq_err *err);
/* What the next periodic pass would do to each file under the store (rmq_store_files). */
int rmq_clean_forecast(rmq_clean_service *cs, rmq_file_fn fn, void *ctx, rmq_err *err);

/*
** Call fn(ctx) at the end of each pass that deleted files: the owner of a
** store tells the other processes, which let go of them. NULL fn: none.
*/
typedef void (*rmq_clean_deleted_fn)(void *ctx);
void rmq_clean_on_deleted(rmq_clean_service *cs, rmq_clean_deleted_fn fn, void *ctx);

/* Passes run and files deleted since the start. */
void rmq_clean_counts(rmq_clean_service *cs, int64_t *runs, int64_t *files_deleted);

/*
** When a segment last modified at mtime_ms expires: file_reserved_hours
** later, at most INT64_MAX (an mtime far ahead, on a file system that keeps
** 64-bit seconds, never wraps to the past).
*/
int64_t rmq_clean_expires_at(int64_t mtime_ms, int file_reserved_hours);

#endif
