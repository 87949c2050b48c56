/*
** mapped_file_queue.h: MappedFileQueue.
**
** The ordered list of segments (mapped_file.h) of one directory: the
** CommitLog, or one consume queue. Its array is guarded by a rwlock; look-ups
** return held files. Only the single writer (under the CommitLog's put lock,
** or the dispatcher for a consume queue) appends and rolls. A new segment is
** made by the queue's allocator when it has one (the CommitLog's is
** AllocateMappedFileService, allocate.h), else created inline.
*/
#ifndef RMQ_MAPPED_FILE_QUEUE_H
#define RMQ_MAPPED_FILE_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "mapped_file.h"
#include "rmq.h"
#include "transient_store_pool.h"

/*
** Make the segment at path (start from, size bytes) and prepare the one at
** next_path (next_from) ahead, unless next_path is NULL (none may follow);
** NULL with err on failure.
*/
typedef rmq_mapped_file *(*rmq_allocate_fn)(void *ctx, const char *path, int64_t from,
                                            const char *next_path, int64_t next_from, int32_t size,
                                            rmq_err *err);

typedef struct rmq_mapped_file_queue {
  char *dir;
  int32_t file_size;
  /* The setting that makes file_size, in units of size_unit bytes (named when a file differs). */
  const char *size_setting;
  int32_t size_unit;
  bool writable;
  rmq_allocate_fn allocate; /* pre-creates segments; NULL: create inline */
  void *allocate_ctx;
  rmq_transient_store_pool *pool; /* write buffers; NULL: write the mapping */
  bool close_fds;                 /* files keep no descriptor (rmq_mapped_file_close_fd) */
  /* New files' directory entries are synced later (rmq_mfq_sync_dir), not at once. */
  bool defer_dir_sync;
  atomic_bool dir_unsynced; /* a file was created since the owner last synced */
  pthread_rwlock_t lock;
  rmq_mapped_file **files;
  int count, cap;
  _Atomic int64_t flushed_where;
  _Atomic int64_t committed_where;
  _Atomic int64_t store_timestamp;  /* of the last record flushed with leastPages 0 */
  pthread_mutex_t flush_mu;         /* queue-level flush/commit are serialised */
  rmq_write_failed_fn write_failed; /* given to each file the queue takes */
  void *write_failed_ctx;
  rmq_retired_files *retired; /* where deleted files wait for their readers; NULL: none */
} rmq_mapped_file_queue;

int rmq_mfq_init(rmq_mapped_file_queue *q, const char *dir, int32_t file_size, bool writable,
                 rmq_err *err);
/* Unmap every file (no unlink) and free the queue. */
void rmq_mfq_destroy(rmq_mapped_file_queue *q);

/*
** With defer_dir_sync: once a file was created since the last call, sync
** the queue's directory, so that the new names survive a power loss (before
** a checkpoint counts on them). RMQ_EIO naming it; the next call tries again.
*/
int rmq_mfq_sync_dir(rmq_mapped_file_queue *q, rmq_err *err);

/*
** Load the segments in dir in name order, each must be file_size bytes and
** follow the previous one by exactly file_size; positions are set to "full"
** until recovery truncates. A readonly store (q->writable false) whose
** first file's length differs adopts that length when size_from_files.
** RMQ_ECORRUPT names a file that does not follow, or one that would end
** past RMQ_MAX_LOG_OFFSET.
*/
int rmq_mfq_load(rmq_mapped_file_queue *q, bool size_from_files, rmq_err *err);

/* Number of files, and a held reference to file i / the first / the last (NULL if none). */
int rmq_mfq_count(rmq_mapped_file_queue *q);
rmq_mapped_file *rmq_mfq_get(rmq_mapped_file_queue *q, int i);
rmq_mapped_file *rmq_mfq_first(rmq_mapped_file_queue *q);
rmq_mapped_file *rmq_mfq_last(rmq_mapped_file_queue *q);
/* Held file covering offset, or NULL. */
rmq_mapped_file *rmq_mfq_find(rmq_mapped_file_queue *q, int64_t offset);

/*
** The writer's file: the last one, or a new one when there is none (starting
** at start_offset) or the last is full. Not held: only the writer calls it,
** and the writer never deletes files. Returns NULL with err set on failure;
** RMQ_EINVAL names the offset when the segment would start below 0 or end
** past RMQ_MAX_LOG_OFFSET.
*/
rmq_mapped_file *rmq_mfq_last_or_create(rmq_mapped_file_queue *q, int64_t start_offset,
                                        rmq_err *err);

int64_t rmq_mfq_min_offset(rmq_mapped_file_queue *q); /* first file's start, or 0 */
/* start + read position (or wrote) of the last file with data; files past it read as empty */
int64_t rmq_mfq_max_offset(rmq_mapped_file_queue *q);
int64_t rmq_mfq_max_wrote(rmq_mapped_file_queue *q);

/*
** Flush the file that holds flushed_where (see rmq_mapped_file_flush) and
** advance flushed_where. *flushed_something tells whether it moved.
*/
int rmq_mfq_flush(rmq_mapped_file_queue *q, int least_pages, bool *flushed_something, rmq_err *err);
/*
** A flush of the file that holds flushed_where done by a sync of the whole
** file system: rmq_mfq_flush_due says whether one is due and holds the file
** in *plan; after the sync, rmq_mfq_flushed_by_sync advances flushed_where
** to the target taken before it, and lets the file go.
*/
typedef struct rmq_mfq_flush_plan {
  rmq_mapped_file *mf;
  int32_t target;
} rmq_mfq_flush_plan;
bool rmq_mfq_flush_due(rmq_mapped_file_queue *q, int least_pages, rmq_mfq_flush_plan *plan);
void rmq_mfq_flushed_by_sync(rmq_mapped_file_queue *q, rmq_mfq_flush_plan *plan);
int rmq_mfq_commit(rmq_mapped_file_queue *q, int least_pages, bool *committed_something,
                   rmq_err *err);

/*
** Recovery truncation (MFQ truncateDirtyFiles): delete files that start past
** offset, set the positions of the file that holds it to offset % size. A
** read-only queue deletes nothing: later files get positions 0.
*/
void rmq_mfq_truncate_dirty(rmq_mapped_file_queue *q, int64_t offset);

/*
** Remove the first file (expiry) and unlink it, through q->retired when set
** (readers first: see rmq_retired_add); false if it is the only one.
*/
bool rmq_mfq_delete_first(rmq_mapped_file_queue *q);

/*
** A read-only queue follows the files a writer in another process makes and
** deletes (rmq_store_refresh). rmq_mfq_follow_new opens the segments that
** follow its last one (all of them when it has none, the segment size then
** taken off the first) at position 0, for the caller to move as it finds
** data; a file not sized yet (a writer creates it empty, then sizes it) or
** not following the last one ends them; *added says how many.
** rmq_mfq_follow_deleted lets go (rmq_retired_let_go: nothing is unlinked)
** of the leading segments whose files are gone (expiry) and, with identity,
** of every segment from the first whose name holds another file now (a new
** owner's recovery made it again), for follow_new to open again; *dropped
** says how many. Errors: RMQ_EIO (listing), RMQ_ECORRUPT and RMQ_EIO as
** rmq_mapped_file_open, RMQ_ENOMEM.
*/
int rmq_mfq_follow_new(rmq_mapped_file_queue *q, int *added, rmq_err *err);

/* Publish the bytes of [from, to) in the files that hold them (rmq_mapped_file_advance_to). */
void rmq_mfq_advance_to(rmq_mapped_file_queue *q, int64_t from, int64_t to);
/*
** A follower that appends itself keeps open (writable) the segments that
** hold [from, to] and none before: those another process made since, opened
** from their files. RMQ_ENOTFOUND when one is not there (expired, or not
** made yet); RMQ_ECORRUPT and RMQ_EIO as rmq_mapped_file_open.
*/
int rmq_mfq_keep_range(rmq_mapped_file_queue *q, int64_t from, int64_t to, rmq_err *err);
int rmq_mfq_follow_deleted(rmq_mapped_file_queue *q, bool identity, int *dropped, rmq_err *err);

#endif
