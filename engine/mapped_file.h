/*
** mapped_file.h: MappedFile and MappedFileQueue (spec §1.2, §2.1, §9.1).
**
** A MappedFile is one fixed-size segment named by its 20-digit start offset,
** mapped read-write (or read-only) with MAP_SHARED, with three positions:
** wrote (bytes appended), committed (bytes copied from a transient-pool
** write buffer into the file; equal to wrote without a buffer) and flushed
** (bytes forced to disk). Readers see `read position` bytes: wrote, or
** committed when a write buffer is in use. The writer publishes a position
** with a release store after the bytes are in place, and readers load it
** with acquire, so a reader never sees a position before its bytes.
**
** Lifetime: a file starts with one reference, owned by its queue. Every
** reader holds the file (rmq_mapped_file_hold) while it uses the mapping and
** releases it after. rmq_mapped_file_shutdown() makes new holds fail and
** drops the queue's reference; the mapping is unmapped, and the file
** unlinked if asked, only when the last reference goes.
**
** A MappedFileQueue is the ordered list of segments of one directory (the
** CommitLog, or one consume queue). Its array is guarded by a rwlock; look-ups
** return held files. Only the single writer (under the CommitLog's put lock,
** or the dispatcher for a consume queue) appends and rolls.
*/
#ifndef RMQ_MAPPED_FILE_H
#define RMQ_MAPPED_FILE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "rmq_err.h"

#define RMQ_OS_PAGE_SIZE 4096

typedef struct rmq_transient_store_pool rmq_transient_store_pool;
typedef struct rmq_allocate_service rmq_allocate_service;

/*
** Told when a file's bytes no longer match what its positions promise: a
** failed write left a failed batch's records on disk (rmq_mapped_file_zero).
** Runs on the writer's thread (for the CommitLog, under its put lock).
*/
typedef void (*rmq_write_failed_fn)(void *ctx, const char *why);

typedef struct rmq_mapped_file {
  char *path;
  int64_t file_from_offset;
  int32_t file_size;
  int fd;
  bool writable;
  uint8_t *mapped;                 /* file_size bytes of the file */
  uint8_t *write_buffer;           /* from the transient store pool, or NULL once committed */
  bool transient;                  /* written through a pool buffer; never changes once set */
  rmq_transient_store_pool *pool;  /* where write_buffer goes back */
  atomic_int wrote_position;
  atomic_int committed_position;
  atomic_int flushed_position;
  atomic_int reserved_position;    /* disk blocks are allocated below this (commit log) */
  atomic_int write_claim;          /* the writer writes below this next (commit log) */
  _Atomic int64_t prefilling;      /* 0, or the range being pre-filled: from << 32 | to */
  atomic_int prefilled_position;   /* pages from the write position to here are pre-filled */
  _Atomic int64_t store_timestamp; /* store time of the last record appended */
  atomic_int refcount;
  atomic_bool available;
  atomic_bool unlink_on_free;
  bool first_in_queue;             /* first file a consume queue ever created */
  rmq_write_failed_fn write_failed; /* from the queue; NULL: nobody to tell */
  void *write_failed_ctx;
  pthread_mutex_t flush_mu;        /* one flush or commit of this file at a time */
} rmq_mapped_file;

/*
** Open the segment at path, whose first byte is global offset from. With
** create, a missing file is created at file_size bytes (sparse); an existing
** file must be exactly file_size bytes, else RMQ_ECORRUPT naming both sizes.
** Positions start at 0; the caller sets them (load marks files full).
*/
int rmq_mapped_file_open(const char *path, int64_t from, int32_t file_size, bool create,
                         bool writable, rmq_mapped_file **out, rmq_err *err);

bool rmq_mapped_file_hold(rmq_mapped_file *mf);
void rmq_mapped_file_release(rmq_mapped_file *mf);
/* Refuse new holds and drop the owner's reference; unlink at the last release if asked. */
void rmq_mapped_file_shutdown(rmq_mapped_file *mf, bool unlink_file);

/* Take a write buffer from the pool (transient store pool mode); none left is fine. */
void rmq_mapped_file_use_pool(rmq_mapped_file *mf, rmq_transient_store_pool *pool);

/* Where the writer puts the next bytes: the write buffer or the mapping. */
static inline uint8_t *rmq_mapped_file_write_base(rmq_mapped_file *mf) {
  return mf->write_buffer ? mf->write_buffer : mf->mapped;
}
static inline int32_t rmq_mapped_file_wrote(rmq_mapped_file *mf) {
  return atomic_load_explicit(&mf->wrote_position, memory_order_acquire);
}
static inline int32_t rmq_mapped_file_read_position(rmq_mapped_file *mf) {
  return mf->transient
             ? atomic_load_explicit(&mf->committed_position, memory_order_acquire)
             : atomic_load_explicit(&mf->wrote_position, memory_order_acquire);
}
static inline bool rmq_mapped_file_is_full(rmq_mapped_file *mf) {
  return rmq_mapped_file_wrote(mf) == mf->file_size;
}
/* Publish n more written bytes (after they were copied in). */
static inline void rmq_mapped_file_advance(rmq_mapped_file *mf, int32_t n) {
  atomic_fetch_add_explicit(&mf->wrote_position, n, memory_order_release);
}
/* Append len bytes at the write position; false if they do not fit. */
bool rmq_mapped_file_append(rmq_mapped_file *mf, const void *data, int32_t len);

/* Set all three positions (load and recovery truncation). */
void rmq_mapped_file_set_positions(rmq_mapped_file *mf, int32_t pos);

/*
** Force to disk (msync, or fdatasync with a write buffer) when the file is
** full, or leastPages > 0 and that many whole pages are unflushed, or
** leastPages == 0 and anything is unflushed. Returns RMQ_OK or RMQ_EIO.
*/
int rmq_mapped_file_flush(rmq_mapped_file *mf, int least_pages, rmq_err *err);
/* Copy [committed, wrote) of the write buffer into the file (pwrite), same page rule. */
int rmq_mapped_file_commit(rmq_mapped_file *mf, int least_pages, rmq_err *err);
/*
** Allocate the file's disk blocks (fallocate) below `upto` and RMQ_RESERVE_STEP
** beyond, unless done already; writers call it before they write (the
** CommitLog writer; the dispatcher, for consume-queue and index files). A
** full disk is then an error of the write that needs the space, where
** a sparse mapping would raise SIGBUS at the first write to a page; and a
** page fault on reserved blocks skips ext4's per-page delayed allocation,
** which makes those faults several times faster. File systems without
** fallocate keep the file sparse. RMQ_EFULL when the disk is full. Safe to
** call from several threads at once.
*/
#define RMQ_RESERVE_STEP (64 << 20)
int rmq_mapped_file_reserve(rmq_mapped_file *mf, int32_t upto, rmq_err *err);
/*
** Map the pages of [from, from + len) writable now (MADV_POPULATE_WRITE;
** bytes untouched), so that later writes take no page fault: on ext4 a first
** write to a page updates the file's mtime through the journal, and can wait
** tens of ms for a journal commit. Consume-queue segments are populated whole
** when created; the CommitLog writer populates the range of a large batch.
*/
void rmq_mapped_file_populate(rmq_mapped_file *mf, int32_t from, int32_t len);
/*
** The writer is about to write below `upto`: wait out a pre-fill over its
** bytes and keep later ones above them. Called under the put lock before
** any write to the commit log's segment. Returns how far the pages from the
** write position on were pre-filled and mapped before the claim.
*/
int32_t rmq_mapped_file_claim(rmq_mapped_file *mf, int32_t upto);
/*
** Pre-fill [from, to) with zeros by pwrite, so that the writer's bytes land
** in page cache that exists (the pre-fault thread). pwrite makes page cache
** faster than faulting pages in one by one, above all on a virtual machine.
** Stops at the writer's claim (its bytes are never overwritten) or a failed
** write, which changes nothing on disk (the range held zeros and stays
** unwritten): the writer's own write or flush of those pages meets the
** failure and reports it. Returns how far it got.
*/
int32_t rmq_mapped_file_prefill(rmq_mapped_file *mf, int32_t from, int32_t to);
/*
** Copy len bytes to offset `at` of the segment, not yet published. A large
** write goes through pwrite: the kernel then fills page-cache pages without
** zeroing them first or faulting them into the mapping, about twice as fast
** as copying into unmapped pages. RMQ_EIO or RMQ_EFULL on failure, with the
** bytes written zeroed.
*/
int rmq_mapped_file_write(rmq_mapped_file *mf, int32_t at, const void *data, size_t len,
                          rmq_err *err);
/*
** Zero len unpublished bytes at `at` (what a failed append left), lest
** recovery take them for records. If that fails too, the write_failed
** callback is told: the file holds bytes nobody may trust.
*/
void rmq_mapped_file_zero(rmq_mapped_file *mf, int32_t at, size_t len);
/* About to be read from start to end (recovery): read ahead, map in large steps. */
void rmq_mapped_file_will_read(rmq_mapped_file *mf);
/* Touch every page so that appends do not fault; mlock it too when asked. */
void rmq_mapped_file_warm(rmq_mapped_file *mf, bool lock_memory);

/* --------------------------------------------------------------------- */

typedef struct rmq_mapped_file_queue {
  char *dir;
  int32_t file_size;
  bool writable;
  rmq_allocate_service *allocate;  /* pre-creates segments; NULL: create inline */
  rmq_transient_store_pool *pool;  /* write buffers; NULL: write the mapping */
  pthread_rwlock_t lock;
  rmq_mapped_file **files;
  int count, cap;
  _Atomic int64_t flushed_where;
  _Atomic int64_t committed_where;
  _Atomic int64_t store_timestamp; /* of the last record flushed with leastPages 0 */
  pthread_mutex_t flush_mu;        /* queue-level flush/commit are serialised */
  rmq_write_failed_fn write_failed; /* given to each file the queue takes */
  void *write_failed_ctx;
} rmq_mapped_file_queue;

int rmq_mfq_init(rmq_mapped_file_queue *q, const char *dir, int32_t file_size, bool writable,
                 rmq_err *err);
/* Unmap every file (no unlink) and free the queue. */
void rmq_mfq_destroy(rmq_mapped_file_queue *q);

/*
** Load the segments in dir in name order, each must be file_size bytes and
** follow the previous one by exactly file_size; positions are set to "full"
** until recovery truncates. A readonly store (q->writable false) whose
** first file's length differs adopts that length when size_from_files.
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
** and the writer never deletes files. Returns NULL with err set on failure.
*/
rmq_mapped_file *rmq_mfq_last_or_create(rmq_mapped_file_queue *q, int64_t start_offset,
                                        rmq_err *err);

int64_t rmq_mfq_min_offset(rmq_mapped_file_queue *q);   /* first file's start, or 0 */
/* start + read position (or wrote) of the last file with data; files past it read as empty */
int64_t rmq_mfq_max_offset(rmq_mapped_file_queue *q);
int64_t rmq_mfq_max_wrote(rmq_mapped_file_queue *q);

/*
** Flush the file that holds flushed_where (see rmq_mapped_file_flush) and
** advance flushed_where. *flushed_something tells whether it moved.
*/
int rmq_mfq_flush(rmq_mapped_file_queue *q, int least_pages, bool *flushed_something,
                  rmq_err *err);
int rmq_mfq_commit(rmq_mapped_file_queue *q, int least_pages, bool *committed_something,
                   rmq_err *err);

/*
** Recovery truncation (MFQ truncateDirtyFiles): delete files that start past
** offset, set the positions of the file that holds it to offset % size. A
** read-only queue deletes nothing: later files get positions 0.
*/
void rmq_mfq_truncate_dirty(rmq_mapped_file_queue *q, int64_t offset);

/* Remove and unlink the first file (expiry); false if it is the only one. */
bool rmq_mfq_delete_first(rmq_mapped_file_queue *q);

#endif
