/*
** shared_log.h: the CommitLog's write state that every process appending
** to one store shares, in the shared page (shared_state.h).
**
** RocketMQ serialises appends with a PutMessageLock inside one broker. Here
** the lock is a process-shared, robust mutex, so that the owner and every
** follower that appends itself take turns, and the log's end is published
** beside it (CommitLog's wrote position, for every process):
**
**   mutex            the put lock. A process killed while it held it leaves
**                    it to the next taker with EOWNERDEAD, which carries on.
**   wrote            the log's end: every byte before it is whole records
**                    (or a segment's BLANK). Stored after the bytes, with
**                    release; a writer's queue offsets are read back from
**                    the records another process appended (CommitLog's
**                    topicQueueTable, rebuilt from the log itself).
**   pending_end      where the batch being written ends (under the mutex);
**                    `wrote` once it is published. Past `wrote` when the
**                    lock is taken, it is what a holder that died (or a
**                    batch that failed) may have left: the taker zeroes it,
**                    so that no torn record ever lies behind the end.
**   store_timestamp  the last record's store time (the checkpoint's).
**   disk_full        0, or the disk's used percent above disk_warning_ratio:
**                    every process refuses puts until a clean pass clears it.
**   poisoned         the owner's flush failed: followers send their puts to
**                    the owner, which refuses them with its reason.
**   direct_writers   a follower appends itself: every writer then writes
**                    through the mapping (no write window).
**   cut              bumped when an owner's recovery ends the log before
**                    `wrote`: a follower's queue offsets are stale then.
*/
#ifndef RMQ_SHARED_LOG_H
#define RMQ_SHARED_LOG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "mapped_file_queue.h"
#include "rmq.h"
#include "topic_queue_table.h"

typedef struct rmq_shared_log {
  /* Written by each put: a line of their own, apart from what every put reads. */
  _Alignas(64) pthread_mutex_t mutex;
  _Atomic int64_t wrote;
  _Atomic int64_t pending_end;
  _Atomic int64_t store_timestamp;
  _Alignas(64) _Atomic int64_t cut;
  atomic_int disk_full;
  atomic_int poisoned;
  atomic_int direct_writers;
} rmq_shared_log;

/* A fresh state (no other process uses the page): the mutex made, the log ending at wrote. */
int rmq_shared_log_init(rmq_shared_log *l, int64_t wrote, rmq_err *err);

/*
** Take the put lock; spin (PutMessageSpinLock) or sleep on it. RMQ_EIO when
** it cannot be taken (left unrecoverable, or taken twice by one thread),
** naming dir.
*/
int rmq_shared_log_lock(rmq_shared_log *l, bool spin, const char *dir, rmq_err *err);
void rmq_shared_log_unlock(rmq_shared_log *l);

/*
** One process's CommitLog writer on a shared log: its segments and its
** queue offsets (CommitLog.topicQueueTable), which it brings up to the
** shared end each time it takes the lock, reading back the queue offset of
** every record appended since by another process. The owner's writer rolls
** segments; an appender (a follower's) only writes into the segment at the
** end, opened from its file.
*/
typedef struct rmq_shared_writer {
  rmq_shared_log *log; /* NULL: one process, no page */
  rmq_mapped_file_queue *q;
  rmq_topic_queue_table *tqt;
  bool appender;
  bool spin;
  bool lmq;         /* enable_lmq: light message queues' offsets are followed too */
  int64_t synced;   /* positions and queue offsets hold up to here; under the lock */
  int64_t cut_seen; /* the log's `cut` they hold for */
  rmq_mapped_file
      *segment; /* an appender's segment at `synced` (its queue's last); under the lock */
  pthread_mutex_t follow_mu; /* the owner's follows, one at a time */
  _Atomic int64_t followed;  /* the owner: the shared end its positions last followed */
} rmq_shared_writer;

/*
** Take the lock and catch up: the tail a dead holder left past the end
** zeroed, the queue offsets and positions of what others appended.
** RMQ_EAGAIN (the lock not held) when an appender cannot go on: the log was
** cut, or a segment it needs is not there (let the owner append).
*/
int rmq_shared_writer_enter(rmq_shared_writer *w, rmq_err *err);
/*
** An appender starts (or starts again, after RMQ_EAGAIN): under the lock,
** its queue offsets are cleared and seed gives every queue's next offset as
** of *from (the owner's, at the log's end then), then the records from there
** on are read back. RMQ_EAGAIN when the log was cut since.
*/
typedef int (*rmq_seed_fn)(void *ctx, rmq_topic_queue_table *tqt, int64_t *from, rmq_err *err);
int rmq_shared_writer_join(rmq_shared_writer *w, rmq_seed_fn seed, void *ctx, rmq_err *err);
/* Under the lock: a batch is about to be written up to end. */
void rmq_shared_writer_pending(rmq_shared_writer *w, int64_t end);
/* Under the lock: bytes up to end are whole records; store_timestamp, the last one's. */
void rmq_shared_writer_publish(rmq_shared_writer *w, int64_t end, int64_t store_timestamp);
void rmq_shared_writer_leave(rmq_shared_writer *w);
/*
** The owner's recovery, under the lock, found the log's end at `end`: the
** shared end is set there (a cut when it was further), a dead holder's tail
** past it zeroed, the owner's writer synced.
*/
void rmq_shared_writer_recovered(rmq_shared_writer *w, int64_t end);
/* The owner, without the lock: move its positions to the shared end; true if they moved. */
bool rmq_shared_writer_follow(rmq_shared_writer *w);

#endif
