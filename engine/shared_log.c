/*
** shared_log.c: the put lock and the log's end shared by processes (see
** shared_log.h).
*/
#include "shared_log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "message.h"
#include "multi_dispatch.h"

int rmq_shared_log_init(rmq_shared_log *l, int64_t wrote, rmq_err *err) {
  memset(l, 0, sizeof *l);
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  /* A thread that takes it twice gets EDEADLK, not a hang of every process. */
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
  int rc = pthread_mutex_init(&l->mutex, &a);
  pthread_mutexattr_destroy(&a);
  if (rc != 0) return rmq_err_set(err, RMQ_EIO, "cannot make the put lock: %s", strerror(rc));
  atomic_store(&l->wrote, wrote);
  atomic_store(&l->pending_end, wrote);
  return RMQ_OK;
}

/* A spinning waiter tells the CPU so (PutMessageSpinLock spins on a compare-and-set). */
static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/*
** A put holds the lock for a copy of its records: a waiter spins that long
** before it sleeps, since a sleep and its wake-up (two system calls and a
** switch) take longer than most puts. use_spin_lock spins only.
*/
#define SPINS_BEFORE_SLEEP 200

/* Is the lock held? A load, so that spinners do not take its cache line from the holder. */
static bool held(rmq_shared_log *l) {
#ifdef __GLIBC__
  return __atomic_load_n(&l->mutex.__data.__lock, __ATOMIC_RELAXED) != 0;
#else
  (void)l;
  return false;
#endif
}

static int take(rmq_shared_log *l, bool spin) {
  int rc;
  for (int i = 0; (rc = pthread_mutex_trylock(&l->mutex)) == EBUSY; i++) {
    for (; held(l) && (spin || i < SPINS_BEFORE_SLEEP); i++) relax();
    if (!spin && i >= SPINS_BEFORE_SLEEP) return pthread_mutex_lock(&l->mutex);
  }
  return rc;
}

int rmq_shared_log_lock(rmq_shared_log *l, bool spin, const char *dir, rmq_err *err) {
  int rc = take(l, spin);
  /* Its last holder died: the next catch-up zeroes the tail it may have left (pending_end). */
  if (rc == EOWNERDEAD) rc = pthread_mutex_consistent(&l->mutex);
  if (rc == 0) return RMQ_OK;
  return rmq_err_set(err, RMQ_EIO, "cannot take the put lock of store %s: %s", dir, strerror(rc));
}

void rmq_shared_log_unlock(rmq_shared_log *l) { pthread_mutex_unlock(&l->mutex); }

/* ------------------------------------------------------------- writers */

/* Zero [from, to) of the segment holding from: what a dead holder left past the end. */
static void mend(rmq_shared_writer *w, int64_t from, int64_t to) {
  rmq_mapped_file *mf = to > from ? rmq_mfq_find(w->q, from) : NULL;
  if (!mf) return;
  int64_t end = mf->file_from_offset + mf->file_size;
  int32_t at = (int32_t)(from - mf->file_from_offset);
  rmq_mapped_file_zero(mf, at, (size_t)((to < end ? to : end) - from));
  rmq_mapped_file_release(mf);
}

static bool transaction_skip(int32_t sys_flag) {
  int32_t t = sys_flag & RMQ_SYSFLAG_TRANSACTION_MASK;
  return t == RMQ_SYSFLAG_TRANSACTION_PREPARED || t == RMQ_SYSFLAG_TRANSACTION_ROLLBACK;
}

/* Read back the queue offsets of the records in mf from pos up to `to`; the offset reached. */
static int64_t read_segment(rmq_shared_writer *w, rmq_mapped_file *mf, int64_t at, int64_t to,
                            rmq_err *err) {
  int64_t end = mf->file_from_offset + mf->file_size;
  while (at < to && at < end) {
    const uint8_t *rec = mf->mapped + (at - mf->file_from_offset);
    size_t room = (size_t)(end - at);
    if (room >= 8 && rmq_get32(rec + RMQ_POS_MAGIC) == RMQ_MAGIC_BLANK) return end;
    rmq_record_head h;
    if (!rmq_record_head_read(rec, room, &h)) {
      rmq_err_set(err, RMQ_ECORRUPT,
                  "%s: no record at offset %lld, before the end another process published",
                  mf->path, (long long)at);
      return -1;
    }
    rmq_tqt_entry *e = transaction_skip(h.sys_flag)
                           ? NULL
                           : rmq_tqt_get(w->tqt, h.topic, h.topic_len, h.queue_id);
    if (!transaction_skip(h.sys_flag) && !e) {
      rmq_err_set(err, RMQ_ENOMEM, "out of memory");
      return -1;
    }
    if (e) e->next_offset = rmq_get64(rec + RMQ_POS_QUEUE_OFFSET) + 1;
    if (w->lmq && !rmq_md_follow(w->tqt, rec, &h)) {
      rmq_err_set(err, RMQ_ENOMEM, "out of memory");
      return -1;
    }
    at += h.len;
  }
  return at;
}

/* The queue offsets of what others appended in [from, to). */
static int read_back(rmq_shared_writer *w, int64_t from, int64_t to, rmq_err *err) {
  while (from < to) {
    rmq_mapped_file *mf = rmq_mfq_find(w->q, from);
    if (!mf) {
      return rmq_err_set(err, w->appender ? RMQ_EAGAIN : RMQ_ECORRUPT,
                         "%s: no segment holds offset %lld, before the end another process "
                         "published",
                         w->q->dir, (long long)from);
    }
    from = read_segment(w, mf, from, to, err);
    rmq_mapped_file_release(mf);
    if (from < 0) return err->code;
  }
  return RMQ_OK;
}

/* Does the appender's segment hold offset? */
static bool segment_holds(const rmq_shared_writer *w, int64_t offset) {
  rmq_mapped_file *mf = w->segment;
  return mf && offset >= mf->file_from_offset && offset < mf->file_from_offset + mf->file_size;
}

/* Move the writer from `synced` to the shared end: segments, queue offsets, positions. */
static int move_to(rmq_shared_writer *w, int64_t end, rmq_err *err) {
  int64_t from = w->synced < end ? w->synced : end;
  int rc = RMQ_OK;
  w->segment = NULL;
  if (w->appender) {
    rc = rmq_mfq_keep_range(w->q, from, end, err);
    if (rc == RMQ_ENOTFOUND) rc = RMQ_EAGAIN;
  }
  if (rc == RMQ_OK && w->synced < end) rc = read_back(w, w->synced, end, err);
  if (rc != RMQ_OK) return rc;
  rmq_mfq_advance_to(w->q, from, end);
  w->synced = end;
  if (!w->appender) return RMQ_OK;
  /* Only the segment at the end stays open. */
  w->segment = NULL;
  if (rmq_mfq_keep_range(w->q, end, end, err) != RMQ_OK) return RMQ_EAGAIN;
  w->segment = rmq_mfq_last(w->q);
  /* Held by its queue, which only this writer changes, under the lock. */
  if (w->segment) rmq_mapped_file_release(w->segment);
  return RMQ_OK;
}

static int catch_up(rmq_shared_writer *w, rmq_err *err) {
  rmq_shared_log *l = w->log;
  if (w->appender && (atomic_load(&l->cut) != w->cut_seen || atomic_load(&l->poisoned))) {
    return rmq_err_set(err, RMQ_EAGAIN, "the owner cut the log or refuses writes");
  }
  int64_t end = atomic_load_explicit(&l->wrote, memory_order_acquire);
  bool moved = end != w->synced || (w->appender && !segment_holds(w, end));
  int rc = moved ? move_to(w, end, err) : RMQ_OK;
  if (rc != RMQ_OK) return rc;
  /* Past the end before any batch is begun: what a holder that died (or a failed batch) left. */
  int64_t pending = atomic_load(&l->pending_end);
  if (pending > end) {
    mend(w, end, pending);
    atomic_store(&l->pending_end, end);
  }
  return RMQ_OK;
}

int rmq_shared_writer_enter(rmq_shared_writer *w, rmq_err *err) {
  int rc = rmq_shared_log_lock(w->log, w->spin, w->q->dir, err);
  if (rc != RMQ_OK) return rc;
  rc = catch_up(w, err);
  if (rc != RMQ_OK) rmq_shared_log_unlock(w->log);
  return rc;
}

int rmq_shared_writer_join(rmq_shared_writer *w, rmq_seed_fn seed, void *ctx, rmq_err *err) {
  int rc = rmq_shared_log_lock(w->log, w->spin, w->q->dir, err);
  if (rc != RMQ_OK) return rc;
  size_t pos = 0;
  for (rmq_tqt_entry *e; (e = rmq_tqt_next(w->tqt, &pos)) != NULL;) e->next_offset = 0;
  rc = seed(ctx, w->tqt, &w->synced, err);
  w->cut_seen = atomic_load(&w->log->cut);
  /* A new owner's recovery cut the log since the offsets were taken: they are stale. */
  if (rc == RMQ_OK && w->synced > atomic_load(&w->log->wrote)) {
    rc = rmq_err_set(err, RMQ_EAGAIN, "the log was cut since the owner gave its queue offsets");
  }
  if (rc == RMQ_OK) rc = catch_up(w, err);
  rmq_shared_log_unlock(w->log);
  return rc;
}

void rmq_shared_writer_pending(rmq_shared_writer *w, int64_t end) {
  /* Read only under the lock: the batch's bytes need no order against it. */
  atomic_store_explicit(&w->log->pending_end, end, memory_order_relaxed);
}

void rmq_shared_writer_publish(rmq_shared_writer *w, int64_t end, int64_t store_timestamp) {
  w->synced = end;
  atomic_store_explicit(&w->log->store_timestamp, store_timestamp, memory_order_relaxed);
  atomic_store_explicit(&w->log->wrote, end, memory_order_release);
  atomic_store_explicit(&w->log->pending_end, end, memory_order_relaxed);
}

void rmq_shared_writer_leave(rmq_shared_writer *w) { rmq_shared_log_unlock(w->log); }

void rmq_shared_writer_recovered(rmq_shared_writer *w, int64_t end) {
  rmq_shared_log *l = w->log;
  mend(w, end, atomic_load(&l->pending_end));
  if (atomic_load(&l->wrote) > end) atomic_fetch_add(&l->cut, 1);
  w->cut_seen = atomic_load(&l->cut);
  w->synced = end;
  atomic_store(&w->followed, end);
  atomic_store(&l->poisoned, 0);
  atomic_store(&l->pending_end, end);
  atomic_store_explicit(&l->wrote, end, memory_order_release);
}

bool rmq_shared_writer_follow(rmq_shared_writer *w) {
  /* Until a follower appends itself, the owner's own puts are all there is. */
  if (!w->log || w->appender ||
      !atomic_load_explicit(&w->log->direct_writers, memory_order_relaxed)) {
    return false;
  }
  int64_t end = atomic_load_explicit(&w->log->wrote, memory_order_acquire);
  if (end <= atomic_load(&w->followed)) return false;
  pthread_mutex_lock(&w->follow_mu);
  int64_t seen = atomic_load(&w->followed);
  bool moved = end > seen;
  if (moved) rmq_mfq_advance_to(w->q, seen, end);
  if (moved) atomic_store(&w->followed, end);
  pthread_mutex_unlock(&w->follow_mu);
  return moved;
}
