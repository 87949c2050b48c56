/*
** mapped_file.h: MappedFile.
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
*/
#ifndef RMQ_MAPPED_FILE_H
#define RMQ_MAPPED_FILE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "rmq.h"
#include "transient_store_pool.h"

#define RMQ_OS_PAGE_SIZE 4096

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
  int fd; /* -1 once closed: a call that needs one opens the file for itself */
  /* fd's users and a close asked for while it had some (fd_get, fd_put). */
  pthread_mutex_t fd_mu;
  int fd_users;
  bool fd_close_wanted;
  bool writable;
  uint8_t *mapped;                /* file_size bytes of the file */
  uint8_t *write_buffer;          /* where bytes from buffer_from are written, or NULL */
  int32_t buffer_from;            /* the segment position of write_buffer[0] */
  int32_t buffer_size;            /* write_buffer's bytes */
  atomic_bool transient;          /* written by pwrite, from a write buffer or not */
  rmq_transient_store_pool *pool; /* where write_buffer goes back; NULL for a window */
  atomic_int wrote_position;
  atomic_int committed_position;
  atomic_int flushed_position;
  atomic_int reserved_position;    /* disk blocks are allocated below this (commit log) */
  atomic_int populated_position;   /* pages from the write position to here are mapped */
  _Atomic int64_t store_timestamp; /* store time of the last record appended */
  atomic_int refcount;
  atomic_bool available;
  atomic_bool unlink_on_free;
  atomic_bool revoked; /* rmq_mapped_file_revoke: the mapping holds zeros now */
  struct rmq_retired_files *_Atomic retired_in; /* the list watching it once deleted */
  dev_t dev; /* the file's identity: a deleted file's name may be a new file's by the time */
  ino_t ino; /* its last reader lets go (a slave re-creating a dropped segment) */
  bool first_in_queue;              /* first file a consume queue ever created */
  rmq_write_failed_fn write_failed; /* from the queue; NULL: nobody to tell */
  void *write_failed_ctx;
  pthread_mutex_t flush_mu; /* one flush or commit of this file at a time */
} rmq_mapped_file;

/* Sync a directory of segments, so that names made or removed in it persist. RMQ_EIO. */
int rmq_mapped_file_sync_dir(const char *dir, rmq_err *err);

/* What rmq_mapped_file_open does about a missing file. */
typedef enum rmq_mf_create {
  RMQ_MF_EXISTING,        /* it is an error (RMQ_ENOTFOUND) */
  RMQ_MF_CREATE,          /* created, and its directory synced for its name */
  RMQ_MF_CREATE_UNSYNCED, /* created; the caller syncs the directory later */
} rmq_mf_create;

/* What a file that is not a regular one is, for errors: "a FIFO", "a directory", ... */
const char *rmq_file_type(mode_t m);
/* Whether a directory entry at path with type d_type (readdir's) is a directory, or leads to one. */
bool rmq_dirent_is_dir(const char *path, unsigned char d_type);

/*
** A failed mmap of path (errno e) as RMQ_EIO; when the process holds as many
** mappings as vm.max_map_count allows, the error says so and how to raise it.
*/
int rmq_map_failed(rmq_err *err, const char *path, int e);

/*
** Open the segment at path, whose first byte is global offset from. With
** create, a missing file is created at file_size bytes (sparse); an existing
** file must be a regular file (else RMQ_ECORRUPT naming its type) of exactly
** file_size bytes, else RMQ_ECORRUPT naming both sizes.
** Positions start at 0; the caller sets them (load marks files full).
*/
int rmq_mapped_file_open(const char *path, int64_t from, int32_t file_size, rmq_mf_create create,
                         bool writable, rmq_mapped_file **out, rmq_err *err);

/*
** Give up the file's descriptor: the mapping stays, and a write, fallocate
** or fsync opens the file for the length of the call. For files written
** seldom other than through the mapping (consume queues, index files), so
** that a store with many queues does not hold one descriptor per file.
** Read-only files give theirs up at open. Call before the file is shared.
*/
void rmq_mapped_file_close_fd(rmq_mapped_file *mf);

bool rmq_mapped_file_hold(rmq_mapped_file *mf);
void rmq_mapped_file_release(rmq_mapped_file *mf);
/* Refuse new holds and drop the owner's reference; unlink at the last release if asked. */
void rmq_mapped_file_shutdown(rmq_mapped_file *mf, bool unlink_file);
/*
** Unlink the file now and drop the owner's reference: for a file cut from
** its queue whose name may be made again at once (recovery's truncation, a
** slave starting over), which a late holder's release must not unlink.
*/
void rmq_mapped_file_delete_now(rmq_mapped_file *mf);
/*
** Take a deleted file away from readers that still hold it: its mapping is
** replaced by zeros (never SIGBUS), its name unlinked and its descriptor
** closed, so its disk space is freed now. Readers see rmq_mapped_file_revoked
** and must check it after copying bytes out.
*/
void rmq_mapped_file_revoke(rmq_mapped_file *mf);
bool rmq_mapped_file_revoked(const rmq_mapped_file *mf);

/*
** Deleted files that readers still hold (MappedFile.destroy): each one is
** unmapped and unlinked when its last reader lets go (the release that
** leaves only the list's hold takes it off the list), or revoked once it was held longer
** than a grace period after its deletion (ReferenceResource.shutdown with
** intervalForcibly). One list per store; thread-safe.
*/
typedef struct rmq_retired_file {
  rmq_mapped_file *mf; /* held by the list */
  int64_t since_ms;    /* monotonic time of the deletion */
} rmq_retired_file;
typedef struct rmq_retired_files {
  pthread_mutex_t mu;
  rmq_retired_file *items;
  int count, cap;
} rmq_retired_files;
void rmq_retired_init(rmq_retired_files *r);
/* Let go of every file (each is unlinked at its last release) and free the list. */
void rmq_retired_destroy(rmq_retired_files *r);
/* Shut mf down for unlinking; when readers hold it, watch it until they let go. */
void rmq_retired_add(rmq_retired_files *r, rmq_mapped_file *mf);
/*
** A read-only store lets go of a file that a writer in another process
** deleted: as rmq_retired_add, but nothing is unlinked (the reader never
** changes the store's files). r may be NULL: then it is shut down at once.
*/
void rmq_retired_let_go(rmq_retired_files *r, rmq_mapped_file *mf);
/* Free the files nobody holds; revoke those held past grace_ms. Returns how many still wait. */
int rmq_retired_reap(rmq_retired_files *r, int64_t grace_ms);
int rmq_retired_count(rmq_retired_files *r);

/* Take a write buffer from the pool (transient store pool mode); none left is fine. */
void rmq_mapped_file_use_pool(rmq_mapped_file *mf, rmq_transient_store_pool *pool);

/* Where the writer puts the byte at pos: in the write buffer or the mapping. */
static inline uint8_t *rmq_mapped_file_write_ptr(rmq_mapped_file *mf, int32_t pos) {
  return mf->write_buffer ? mf->write_buffer + (pos - mf->buffer_from) : mf->mapped + pos;
}

/*
** The CommitLog's write window (commitlog.h): a small buffer, reused, that
** takes appends to the last segment from its write position until a commit
** (rmq_mapped_file_commit) writes them to the file with pwrite; readers see
** committed bytes while it is attached (the file is `transient`). Attach and
** the window calls are the writer's, under its put lock.
*/
void rmq_mapped_file_window_attach(rmq_mapped_file *mf, uint8_t *window, int32_t size);
/* Room for need more bytes in the window: commit it and start it at the write position if full. */
int rmq_mapped_file_window_room(rmq_mapped_file *mf, int32_t need, rmq_err *err);
/* Commit the window and let go of it: appends go through the mapping again. */
int rmq_mapped_file_window_detach(rmq_mapped_file *mf, rmq_err *err);
static inline int32_t rmq_mapped_file_wrote(rmq_mapped_file *mf) {
  return atomic_load_explicit(&mf->wrote_position, memory_order_acquire);
}
static inline int32_t rmq_mapped_file_read_position(rmq_mapped_file *mf) {
  return mf->transient ? atomic_load_explicit(&mf->committed_position, memory_order_acquire)
                       : atomic_load_explicit(&mf->wrote_position, memory_order_acquire);
}
static inline bool rmq_mapped_file_is_full(rmq_mapped_file *mf) {
  return rmq_mapped_file_wrote(mf) == mf->file_size;
}
/* Publish n more written bytes (after they were copied in). */
static inline void rmq_mapped_file_advance(rmq_mapped_file *mf, int32_t n) {
  atomic_fetch_add_explicit(&mf->wrote_position, n, memory_order_release);
}
/*
** Publish bytes up to pos (never back): the CommitLog's writer, and an
** owner following what other processes appended (shared_log.h), may both
** move a position, so each moves it to a place, not by an amount.
*/
static inline void rmq_mapped_file_advance_to(rmq_mapped_file *mf, int32_t pos) {
  int32_t at = rmq_mapped_file_wrote(mf);
  while (at < pos &&
         !atomic_compare_exchange_weak_explicit(&mf->wrote_position, &at, pos, memory_order_release,
                                                memory_order_acquire)) {
  }
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
/*
** Whether rmq_mapped_file_flush would force anything now, and *target, the
** position it would reach; for a file without a write buffer.
*/
bool rmq_mapped_file_flush_due(rmq_mapped_file *mf, int least_pages, int32_t *target);
/* The bytes up to target reached the disk another way (a sync of the whole file system). */
void rmq_mapped_file_flushed_to(rmq_mapped_file *mf, int32_t target);
/* Copy [committed, wrote) of the write buffer into the file (pwrite), same page rule. */
int rmq_mapped_file_commit(rmq_mapped_file *mf, int least_pages, rmq_err *err);
/*
** Allocate the file's disk blocks (fallocate) below `upto` and RMQ_RESERVE_STEP
** beyond, unless done already; writers call it before they write (the
** CommitLog writer; the dispatcher, for consume-queue and index files). A
** full disk is then an error of the write that needs the space, where
** a sparse mapping would raise SIGBUS at the first write to a page; and a
** page fault on reserved blocks skips ext4's per-page delayed allocation,
** which makes those faults much cheaper. File systems without
** fallocate keep the file sparse. RMQ_EFULL when the disk is full. Safe to
** call from several threads at once.
*/
#define RMQ_RESERVE_STEP (64 << 20)
int rmq_mapped_file_reserve(rmq_mapped_file *mf, int32_t upto, rmq_err *err);
/* The same, reserving `ahead` bytes beyond upto instead of RMQ_RESERVE_STEP. */
int rmq_mapped_file_reserve_ahead(rmq_mapped_file *mf, int32_t upto, int32_t ahead, rmq_err *err);
/*
** Map the pages of [from, from + len) writable now (MADV_POPULATE_WRITE;
** bytes untouched), so that later writes take no page fault: on ext4 a first
** write to a page updates the file's mtime through the journal, and can wait
** for a journal commit. Consume-queue segments are populated as they are
** reserved, step by step; the commit log ahead of its writer by the
** allocation thread. False when the pages are not mapped (a transient
** segment, or a kernel without the call).
*/
bool rmq_mapped_file_populate(rmq_mapped_file *mf, int32_t from, int32_t len);

/*
** Take the file's pages out of this process's mapping (MADV_DONTNEED): they
** stay in the page cache, dirty ones too, and the next access maps them again.
*/
void rmq_mapped_file_drop_pages(rmq_mapped_file *mf);
/* Faults read only the page they need (MADV_RANDOM): no read-ahead of the file's holes. */
void rmq_mapped_file_random_access(rmq_mapped_file *mf);
/*
** Copy len bytes to offset `at` of the segment, not yet published. A large
** write goes through pwrite: the kernel then fills page-cache pages without
** zeroing them first or faulting them into the mapping, which is faster than
** copying into unmapped pages. RMQ_EIO or RMQ_EFULL on failure, with the
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
/* fsync the whole file now, through a descriptor of the call when the file keeps none. */
int rmq_mapped_file_fsync(rmq_mapped_file *mf, rmq_err *err);
/*
** Are bytes [from, to) of the file all zeros? Holes (SEEK_HOLE) are zeros
** without being read: reading a sparse segment's holes through the mapping
** would fill page cache with zeros, one page at a time.
*/
bool rmq_mapped_file_all_zero(rmq_mapped_file *mf, int32_t from, int32_t to);
/* About to be read from start to end (recovery): read ahead, map in large steps. */
void rmq_mapped_file_will_read(rmq_mapped_file *mf);
/*
** Reserve the whole file's blocks, then touch every page so that appends do
** not fault, forcing the touched pages to disk every flush_pages pages when
** flush_pages > 0 (sync flush); mlock it too when asked, quietly doing
** without when the kernel refuses. RMQ_EFULL or RMQ_EIO from the reserve,
** RMQ_EIO from a flush.
*/
int rmq_mapped_file_warm(rmq_mapped_file *mf, bool lock_memory, int flush_pages, rmq_err *err);
/* munlock the whole file: the writer has left it (MappedFile.munlock). */
void rmq_mapped_file_unlock(rmq_mapped_file *mf);

#endif
