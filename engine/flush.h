/*
** flush.h: the CommitLog's flush and commit services (CommitLog's FlushRealTimeService,
** GroupCommitService and CommitRealTimeService).
**
** async: FlushRealTimeService wakes every flush_interval_ms (500) and forces
**   segments with at least 4 dirty pages, everything every 10 s, and copies
**   the flushed store time into the checkpoint.
** sync: GroupCommitService. A producer queues a request "flushed up to
**   next_offset" and sleeps; the service swaps the write and read request
**   lists, forces segment after segment until the furthest request is on
**   disk, and wakes each request it served.
**   A request not served within sync_flush_timeout_ms fails with
**   RMQ_ETIMEOUT (the producer removes itself, so a stuck fsync cannot leave
**   a dangling request); an fsync failure fails every waiting request with
**   RMQ_EIO and poisons the CommitLog.
** transient store pool: CommitRealTimeService copies written bytes from the
**   write buffers into the files when a put wakes it (CommitLog.handleDiskFlush)
**   and every 200 ms, then wakes the flush service and the dispatcher. Readers
**   see committed bytes only; a reader that must see every acknowledged put
**   commits first (rmq_flush_commit).
** consume queues: FlushConsumeQueueService flushes every queue
**   with 2 dirty pages each second and everything (index files too) every
**   60 s, then writes the checkpoint with the logics time taken before.
*/
#ifndef RMQ_FLUSH_H
#define RMQ_FLUSH_H

#include <stdbool.h>
#include <stdint.h>

#include "checkpoint.h"
#include "commitlog.h"
#include "consume_queue.h"
#include "index_file.h"
#include "reput.h"

typedef struct rmq_flush_config {
  bool sync;
  int sync_flush_timeout_ms;      /* 5000 */
  int flush_interval_ms;          /* 500 */
  int flush_least_pages;          /* 4 */
  int flush_thorough_interval_ms; /* 10000 */
  int commit_interval_ms;         /* 200, with a transient store pool */
  rmq_reput_service *reput;       /* woken after a commit; NULL: none */
} rmq_flush_config;

typedef struct rmq_flush_service rmq_flush_service;

rmq_flush_service *rmq_flush_service_new(rmq_commitlog *cl, rmq_checkpoint *cp,
                                         const rmq_flush_config *cfg, rmq_err *err);
int rmq_flush_service_start(rmq_flush_service *fs, rmq_err *err);
/* Stop the threads after a last commit and flush of everything; free. */
void rmq_flush_service_free(rmq_flush_service *fs);

/* sync mode: wait until the CommitLog is on disk up to next_offset. */
int rmq_flush_wait(rmq_flush_service *fs, int64_t next_offset, rmq_err *err);
/* A put that does not wait (WAIT=false): the flush runs soon (GroupCommitService.wakeup). */
void rmq_flush_wakeup(rmq_flush_service *fs);
/* Commit and force everything written so far; *flushed_offset receives the result. */
int rmq_flush_all(rmq_flush_service *fs, int64_t *flushed_offset, rmq_err *err);
/*
** Commit everything written so far into the files, from the caller's thread
** (transient store pool; RMQ_OK at once without one), so that readers see
** every acknowledged put. RMQ_EIO (and the log poisoned) when a write fails.
*/
int rmq_flush_commit(rmq_flush_service *fs, rmq_err *err);
/* Passes of the flush thread that forced something; of CommitRealTimeService that committed. */
int64_t rmq_flush_runs(rmq_flush_service *fs);
int64_t rmq_flush_commit_runs(rmq_flush_service *fs);

typedef struct rmq_cq_flush_service rmq_cq_flush_service;

rmq_cq_flush_service *rmq_cq_flush_service_new(rmq_cq_table *cqs, rmq_index_service *index,
                                               rmq_checkpoint *cp, rmq_err *err);
int rmq_cq_flush_service_start(rmq_cq_flush_service *fs, rmq_err *err);
/* Flush every queue, index file and the checkpoint now (also the last pass at shutdown). */
int rmq_cq_flush_all(rmq_cq_flush_service *fs, rmq_err *err);
/* Stop the thread after a last thorough pass; free. */
void rmq_cq_flush_service_free(rmq_cq_flush_service *fs);
/* Passes of the thread that forced a queue (rmq_cq_flush_all not counted). */
int64_t rmq_cq_flush_runs(rmq_cq_flush_service *fs);

#endif
