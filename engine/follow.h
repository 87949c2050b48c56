/*
** follow.h: a read-only store follows a writer in another process.
**
** A store opened with readonly=1 while another process runs the store's
** services (the owner) would read the files as they were at open. The
** follower brings its view up to what the files hold now, at the start of
** each read (rmq_store_refresh): new commit-log segments and the log's
** readable end; consume-queue entries, segments and queues; index files
** and items; and the files the writer deleted, which it lets go through the
** store's retired list, so that a reader holding one keeps it.
**
** What it may trust: with the owner's shared page (shared_state.h), the
** records before the page's dispatched offset and the consume-queue
** entries and index items that lead to them, and nothing is looked at while
** the page's seq has not moved (one atomic load per read). Without a page
** (a Java broker's store, or an owner that has not started), it looks at
** most every FOLLOW_POLL_MS: the log ends at the last complete record that
** follows the known end (magic, size and body CRC: a record being written
** is the end, not damage), and the page is looked for again as often. A
** new epoch on the page is a new owner whose recovery may have cut or made
** files again: every file is checked to be the one mapped.
**
** Long polls sleep on the page's futex (rmq_follower_sleep), or without a
** page poll every FOLLOW_SLEEP_MS.
**
** Threads: any number of readers; refreshes are serialised on one mutex,
** and readers see positions and file lists through the structures' own
** locks and atomics.
*/
#ifndef RMQ_FOLLOW_H
#define RMQ_FOLLOW_H

#include <stdint.h>

#include "commitlog.h"
#include "consume_queue.h"
#include "index_file.h"
#include "rmq.h"

typedef struct rmq_follower rmq_follower;

/* A follower of the store at dir, over its loaded and recovered parts. RMQ_ENOMEM. */
int rmq_follower_new(const char *dir, rmq_commitlog *cl, rmq_cq_table *cqs,
                     rmq_index_service *index, rmq_follower **out, rmq_err *err);
void rmq_follower_free(rmq_follower *f);

/*
** Bring the store's view up to the files (see above). Errors: those of
** opening a new segment, queue or index file (RMQ_EIO, RMQ_ECORRUPT,
** RMQ_ENOMEM); what was followed before the error stays.
*/
int rmq_follower_refresh(rmq_follower *f, rmq_err *err);

/* A queue whose directory appeared since the last refresh, followed to its end; NULL: none. */
rmq_consume_queue *rmq_follower_open_queue(rmq_follower *f, const char *topic, int32_t queue_id);

/* The page's seq before a look (0 without a page), for rmq_follower_sleep after it. */
uint32_t rmq_follower_mark(rmq_follower *f);
/* Sleep until the page's seq moves past mark or ms pass; without a page, FOLLOW_SLEEP_MS at most. */
void rmq_follower_sleep(rmq_follower *f, uint32_t mark, int64_t ms);

/*
** With a page whose owner runs: sleep until its dispatcher reached the end
** of the complete records the log holds now, at most timeout_ms, so that a
** read sees what a put in the owner returned before it started. Without a
** page nothing tells how far a broker dispatched: it returns at once.
*/
void rmq_follower_wait_dispatched(rmq_follower *f, int timeout_ms);

#endif
