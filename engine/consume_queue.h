/*
** consume_queue.h: ConsumeQueue and the store's table of them
** (ConsumeQueueStore's map, on topic_queue_table.h).
**
** A ConsumeQueue is the per-(topic, queueId) list of 20-byte entries
** (commitLogOffset int64, size int32, tagsCode int64, big-endian) kept in
** fixed-size segments `<root>/consumequeue/<topic>/<queueId>/<20-digit
** logical byte offset>`. Entry n (the queue offset) lives at logical byte
** offset n*20. A segment holds `entries_per_file` entries (RocketMQ's
** mappedFileSizeConsumeQueue / 20, default 300000).
**
** Threads: one writer (the dispatcher) calls rmq_cq_put; any number of
** readers call get / the iterator / the time searches; the flush service
** calls rmq_cq_flush; the clean service calls rmq_cq_delete_expired. Entries
** are published by the segment's wrote position (release), so a reader never
** sees an entry before its bytes. recover and truncate_dirty run at startup,
** before any other thread uses the queue.
**
** Differences from RocketMQ 4.9.7, none of which changes a byte on disk:
**  - pre-blank filler entries (0, 0x7FFFFFFF, 0) never become the min offset
**    (correct_min_offset skips them) and never set max_physic_offset
**    (recover skips them): RocketMQ can do both;
**  - truncate_dirty keeps an invalid (zero) first entry out of the queue
**    instead of keeping it as a bogus 20-byte entry;
**  - a read-only queue never deletes or shortens a file on disk: recovery
**    and truncation only move the in-memory end;
**  - failures are returned as RMQ_* codes instead of being logged.
*/
#ifndef RMQ_CONSUME_QUEUE_H
#define RMQ_CONSUME_QUEUE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "checkpoint.h"
#include "mapped_file_queue.h"
#include "rmq.h"

#define RMQ_CQ_UNIT_SIZE 20
#define RMQ_CQ_DEFAULT_ENTRIES 300000
/* The size field of a pre-blank filler entry (offset 0, tagsCode 0). */
#define RMQ_CQ_PRE_BLANK_SIZE 0x7FFFFFFF

typedef struct rmq_consume_queue {
  char *topic;
  int32_t queue_id;
  _Atomic int32_t
      file_size; /* entries_per_file * 20; a reader sets it when its first segment appears */
  bool writable;
  rmq_mapped_file_queue mfq;
  _Atomic int64_t max_physic_offset; /* end (offset + size) of the last entry; -1: none */
  _Atomic int64_t min_logic_offset;  /* byte offset of the first valid entry */
  _Atomic int64_t logic_gaps;        /* puts whose queue offset was past the tail */
  char *damage;  /* a reader's damaged queue: what rmq_cq_damage says (set at open); NULL: sound */
  bool followed; /* a reader's queue whose end rmq_cq_follow moves (under the store's refresh) */
  _Atomic int new_dirs; /* directories made for it: rmq_cq_table_flush syncs their names */
  /*
  ** While a writable store opens: the entries of its last segment that
  ** recovery read (when they fit in its first read), so that the passes
  ** after it read them without a system call; NULL after the open.
  */
  uint8_t *opening;
  int32_t opening_len;
  const rmq_mapped_file *opening_file;
  int64_t opening_from;
} rmq_consume_queue;

/*
** Open the queue (topic, queue_id) under root and load its existing segments
** (each must be entries_per_file*20 bytes and follow the previous one). A
** read-only queue takes the segment size from its first file instead (a
** broker's mappedFileSizeConsumeQueue may differ from entries_per_file), so
** file_size is then that length, which must be a multiple of 20.
** Positions are "full" until rmq_cq_recover finds the end. Nothing is
** created on disk: the directory appears with the first put. Errors:
** RMQ_EINVAL (invalid topic, negative queue_id, entries_per_file <= 0 or too
** big), RMQ_ECORRUPT (a segment of the wrong size or, read-only, a first
** segment whose length is not a multiple of 20; a missing segment), RMQ_EIO,
** RMQ_ENOMEM.
*/
int rmq_cq_open(const char *root, const char *topic, int32_t queue_id, int32_t entries_per_file,
                bool writable, rmq_consume_queue **out, rmq_err *err);
/* Unmap every segment (nothing is deleted) and free the queue. */
void rmq_cq_close(rmq_consume_queue *cq);

/*
** putMessagePositionInfo: append the entry for queue offset
** cq_offset. A duplicate (phy_offset + size <= max_physic_offset, or a queue
** offset below the tail) is skipped and is a success. A queue offset past
** the tail is appended at the tail anyway, as RocketMQ does, and counted in
** logic_gaps. The first segment of a queue that starts at cq_offset != 0 is
** pre-filled with pre-blank entries. On success, checkpoint (may be NULL)
** gets logicsMsgTimestamp := store_timestamp. RocketMQ's 30 retries are the
** caller's business. Errors: RMQ_EINVAL (read-only, negative cq_offset),
** RMQ_EIO / RMQ_ENOMEM (creating a segment).
*/
int rmq_cq_put(rmq_consume_queue *cq, int64_t phy_offset, int32_t size, int64_t tags_code,
               int64_t store_timestamp, int64_t cq_offset, rmq_checkpoint *checkpoint,
               rmq_err *err);

/*
** recover: scan from the 3rd-from-last segment while entries are
** valid (offset >= 0, size > 0), set the end there and drop the segments
** after it (deleted from disk unless read-only). Sets max_physic_offset.
*/
void rmq_cq_recover(rmq_consume_queue *cq);
/*
** The store is open: forget the copy recovery kept (entries change from now
** on). Before any thread but the dispatcher uses the queue.
*/
void rmq_cq_opened(rmq_consume_queue *cq);

/*
** truncateDirtyLogicFiles: cut every entry whose CommitLog
** offset is >= phy_offset, deleting segments whose first entry is cut.
** max_physic_offset becomes phy_offset, then the end of the last kept entry.
*/
void rmq_cq_truncate_dirty(rmq_consume_queue *cq, int64_t phy_offset);

/*
** The queue's structure, without reading the log: the queue offset of the
** first entry of [oldest, max) that is no entry (invalid, a filler, a
** record crossing a segment of seg bytes) or is not after the entry before
** it (a duplicate, an entry out of order: then the one before it); why
** says what (cap bytes). -1 when sound. Reads every entry once; *last is
** the entry at max - 1 when it read that far (else its size is 0).
*/
int64_t rmq_cq_check(rmq_consume_queue *cq, int64_t seg, char *why, size_t cap, rmq_cq_entry *last);
/*
** A reader's damaged queue: its end moves to entry n (the sound entries
** stay readable) and rmq_cq_damage then says why, naming the queue's
** directory, for the reads that needed the rest. Nothing changes on disk.
** RMQ_ENOMEM.
*/
int rmq_cq_mark_damaged(rmq_consume_queue *cq, int64_t n, const char *why, rmq_err *err);
/*
** A writer's damaged queue: move the segment holding entry n and every
** later one into damaged_dir/consumequeue/<topic>/<queueId>/ (their sizes
** added to *moved), so that dispatch rebuilds them. *redispatch_from is the
** commit-log offset of the first record whose entry was moved, or -1 when
** it is not known (dispatch from the log's start). Errors: RMQ_EIO.
*/
int rmq_cq_set_aside_from(rmq_consume_queue *cq, int64_t n, const char *damaged_dir, int64_t *moved,
                          int64_t *redispatch_from, rmq_err *err);
/* correctMinOffset: min := the first entry at >= phy_min_offset, in whichever segment. */
void rmq_cq_correct_min_offset(rmq_consume_queue *cq, int64_t phy_min_offset);

/*
** A read-only queue follows a writer in another process (rmq_store_refresh).
** rmq_cq_follow_start: a queue opened while following (its segments loaded
** "full") goes back to where ConsumeQueue.recover starts, for rmq_cq_follow
** to find its end. rmq_cq_follow moves the end on over the entries written
** since: each taken only when the acquire load of its size (which the
** writer stores last, with release) is not 0 and its record ends by bound;
** into the segments that follow (opened as they appear). rmq_cq_follow_deleted
** lets go of the segments the writer deleted (and, with identity, of those
** made again: rmq_mfq_follow_deleted), then correct_min_offset. Errors as
** rmq_mfq_follow_new; RMQ_ECORRUPT when the first segment of a queue that
** had none is no whole number of entries.
*/
void rmq_cq_follow_start(rmq_consume_queue *cq);
int rmq_cq_follow(rmq_consume_queue *cq, int64_t bound, rmq_err *err);
int rmq_cq_follow_deleted(rmq_consume_queue *cq, bool identity, int64_t phy_min_offset,
                          rmq_err *err);

/* rmq_cq_min_offset and rmq_cq_max_offset are public (rmq.h); the end of the last entry: */
int64_t rmq_cq_max_physic_offset(rmq_consume_queue *cq);

/*
** The entry at queue offset n. RMQ_ENOTFOUND (with a message naming the
** queue and its [min, max)) when n is below the min offset, in a deleted
** segment, or at or past the max offset.
*/
int rmq_cq_get(rmq_consume_queue *cq, int64_t n, rmq_cq_entry *out, rmq_err *err);

/*
** Store time of the CommitLog record at (phy_offset, size), or < 0 when it
** cannot be read (CommitLog.pickupStoreTimestamp).
*/
typedef int64_t (*rmq_cq_store_time_fn)(void *ctx, int64_t phy_offset, int32_t size);

/*
** getOffsetInQueueByTime, RocketMQ 4.9.7 semantics: the NEAREST
** message in time, searched only in the first segment whose file mtime is
** >= timestamp (else the last one): the exact match if the binary search
** hits one, else the closer of the two neighbours (a tie goes to the earlier
** one). Entries below commitlog_min_offset count as "too early". *out is 0
** when there is no segment or the chosen one holds no entry. Unlike
** RocketMQ, which returns 0 when a store time cannot be read, that is an
** error (RMQ_ECORRUPT naming the entry), and when no probed entry had a
** store time (all too early) the answer is the first entry past them instead
** of (segment start - 1) / 20.
*/
int rmq_cq_offset_by_time(rmq_consume_queue *cq, int64_t timestamp, int64_t commitlog_min_offset,
                          rmq_cq_store_time_fn store_time, void *ctx, int64_t *out, rmq_err *err);

/*
** What a SQL user means by "messages from time T on": the queue offset of
** the first entry (from the min offset, over all segments) whose CommitLog
** offset is >= commitlog_min_offset and whose store time is >= timestamp;
** the max offset when there is none. Binary search over the whole queue
** (store times grow with CommitLog offsets). Errors: RMQ_ECORRUPT when a
** store time cannot be read.
*/
int rmq_cq_first_offset_at_or_after_time(rmq_consume_queue *cq, int64_t timestamp,
                                         int64_t commitlog_min_offset,
                                         rmq_cq_store_time_fn store_time, void *ctx, int64_t *out,
                                         rmq_err *err);

/*
** Flush by MappedFile.isAbleToFlush's page rule (FlushConsumeQueueService:
** 2 pages periodically, 0 thoroughly), after syncing the queue's directory
** when it made a segment since.
*/
int rmq_cq_flush(rmq_consume_queue *cq, int least_pages, rmq_err *err);

/*
** deleteExpiredFile: delete leading full segments, never the
** last, whose last entry points below phy_min_offset, then
** correct_min_offset(phy_min_offset). Returns the number deleted.
*/
int rmq_cq_delete_expired(rmq_consume_queue *cq, int64_t phy_min_offset);
/* How many segments rmq_cq_delete_expired would delete now (its rule, for dry runs). */
int rmq_cq_expired_files(rmq_consume_queue *cq, int64_t phy_min_offset);

/* ------------------------------------------------------------------------
** The store's consume queues, keyed by (topic, queue_id). Look-ups are a
** hash probe under a read lock (the dispatcher's hot path); creation takes
** the write lock. Queues are never removed before rmq_cq_table_free, so a
** pointer from find stays valid until then.
*/
typedef struct rmq_cq_table rmq_cq_table;

int rmq_cq_table_new(const char *root, int32_t entries_per_file, bool writable, rmq_cq_table **out,
                     rmq_err *err);
/* Close every queue and free the table. */
void rmq_cq_table_free(rmq_cq_table *t);
/*
** Where the queues' deleted segments wait for their readers (rmq_retired_add);
** set before the table is loaded: each queue it opens gets it.
*/
void rmq_cq_table_set_retired(rmq_cq_table *t, rmq_retired_files *retired);

/*
** Open every queue under <root>/consumequeue. Directories whose name is not
** a valid topic, and queue directories whose name is not a canonical
** non-negative decimal int32 ("0", "12"; what RocketMQ writes), are skipped
** without an error. A queue that fails to load is an error.
*/
int rmq_cq_table_load(rmq_cq_table *t, rmq_err *err);

/* The queue, or NULL (also for a NULL or invalid topic). */
rmq_consume_queue *rmq_cq_table_find(rmq_cq_table *t, const char *topic, int32_t queue_id);
/* The queue, opened (and loaded) first if absent. Errors as rmq_cq_open. */
int rmq_cq_table_find_or_create(rmq_cq_table *t, const char *topic, int32_t queue_id,
                                rmq_consume_queue **out, rmq_err *err);

/*
** Every queue at this moment, in no particular order: *out is a malloc'd
** array the caller frees (the queues stay owned by the table).
*/
int rmq_cq_table_snapshot(rmq_cq_table *t, rmq_consume_queue ***out, int *count, rmq_err *err);

/* recover every queue (DMS recoverConsumeQueue); *max_physic_offset: their max, or -1. */
int rmq_cq_table_recover(rmq_cq_table *t, int64_t *max_physic_offset, rmq_err *err);
/* rmq_cq_opened of every queue. */
void rmq_cq_table_opened(rmq_cq_table *t);
/*
** truncate_dirty every queue (DMS truncateDirtyLogicFiles; the caller decides,
** as CommitLog recovery does, whether any queue reaches phy_offset).
*/
int rmq_cq_table_truncate_dirty(rmq_cq_table *t, int64_t phy_offset, rmq_err *err);
/*
** Flush every queue (*moved, unless NULL: whether one was forced), then sync
** the directories made for new queues and topics; stops at the first failure.
*/
int rmq_cq_table_flush(rmq_cq_table *t, int least_pages, bool *moved, rmq_err *err);

#endif
