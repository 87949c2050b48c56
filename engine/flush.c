/*
** flush.c: FlushRealTimeService, GroupCommitService and CommitRealTimeService
** (see flush.h).
*/
#include "flush.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "service_thread.h"

typedef struct group_commit_request {
  int64_t next_offset;
  int rc;
  bool done;
  struct group_commit_request *next;
} group_commit_request;

struct rmq_flush_service {
  rmq_commitlog *cl;
  rmq_checkpoint *cp;
  rmq_flush_config cfg;
  rmq_service_thread flush_thread;
  rmq_service_thread commit_thread; /* only with a transient store pool */
  pthread_mutex_t gc_mu;
  pthread_cond_t gc_done;
  pthread_cond_t gc_arrived; /* as many requests wait as the last flush served */
  group_commit_request *requests_write;
  group_commit_request *requests_read;
  int pending;                 /* requests in requests_write */
  int last_served;             /* requests the last flush served */
  int64_t last_flush_ns;       /* how long that flush took */
  char io_error[512];          /* the failure that poisoned the log, for waiting producers */
  _Atomic int64_t flush_runs;  /* passes of the flush thread that forced something */
  _Atomic int64_t commit_runs; /* passes of CommitRealTimeService that committed something */
};

/* What readers see grew: the dispatcher and the HA senders, which read only committed bytes. */
static void tell_readers(rmq_flush_service *fs) {
  if (fs->cfg.reput) rmq_reput_wakeup(fs->cfg.reput);
  if (fs->cl->appended) fs->cl->appended(fs->cl->appended_ctx);
}

/* Commit (pool mode) then flush until nothing moves: everything written is on disk. */
static int flush_until_stable(rmq_flush_service *fs, rmq_err *err) {
  bool moved = true;
  int rc = RMQ_OK;
  rmq_commitlog_follow_shared(fs->cl);
  bool buffered = rmq_commitlog_buffered(fs->cl);
  for (int i = 0; rc == RMQ_OK && moved && i < 1000; i++) {
    bool committed = false, flushed = false;
    if (buffered) rc = rmq_mfq_commit(&fs->cl->mfq, 0, &committed, err);
    if (rc == RMQ_OK) rc = rmq_mfq_flush(&fs->cl->mfq, 0, &flushed, err);
    moved = committed || flushed;
  }
  if (buffered) tell_readers(fs);
  return rc;
}

static void record_flush_time(rmq_flush_service *fs) {
  int64_t ts = atomic_load(&fs->cl->mfq.store_timestamp);
  if (ts > 0) atomic_store(&fs->cp->physic_msg_timestamp, ts);
}

static void on_io_failure(rmq_flush_service *fs, const rmq_err *err) {
  rmq_commitlog_poison(fs->cl, err->msg);
}

/* ------------------------------------------------------ FlushRealTime */

static void flush_real_time_run(rmq_service_thread *st) {
  rmq_flush_service *fs = st->arg;
  int64_t last_thorough = rmq_monotonic_ms();
  while (!rmq_service_thread_stopped(st)) {
    rmq_service_thread_wait(st, fs->cfg.flush_interval_ms);
    int least = fs->cfg.flush_least_pages;
    int64_t now = rmq_monotonic_ms();
    if (now - last_thorough >= fs->cfg.flush_thorough_interval_ms) {
      last_thorough = now;
      least = 0;
    }
    rmq_err err = {0};
    bool moved;
    rmq_commitlog_follow_shared(fs->cl);
    if (rmq_mfq_flush(&fs->cl->mfq, least, &moved, &err) != RMQ_OK) {
      on_io_failure(fs, &err);
    } else {
      record_flush_time(fs);
      if (moved) atomic_fetch_add(&fs->flush_runs, 1);
    }
  }
}

/* ----------------------------------------------------- CommitRealTime */

/*
** Commit everything written so far, segment after segment; then the
** dispatcher is told, since readers see only committed bytes, and the flush
** thread unless it is the caller (the group commit). *moved: whether
** anything was committed.
*/
static int commit_written(rmq_flush_service *fs, bool wake_flush, bool *moved, rmq_err *err) {
  bool step = true;
  int rc = RMQ_OK;
  *moved = false;
  while (rc == RMQ_OK && step) {
    rc = rmq_mfq_commit(&fs->cl->mfq, 0, &step, err);
    *moved = *moved || step;
  }
  if (rc != RMQ_OK) {
    on_io_failure(fs, err);
  } else if (*moved) {
    if (wake_flush) rmq_service_thread_wakeup(&fs->flush_thread);
    tell_readers(fs);
  }
  return rc;
}

/* Woken by every put (rmq_commitlog.put_wakeup), else every commit_interval_ms. */
static void commit_real_time_run(rmq_service_thread *st) {
  rmq_flush_service *fs = st->arg;
  while (!rmq_service_thread_stopped(st)) {
    rmq_service_thread_wait(st, fs->cfg.commit_interval_ms);
    rmq_err err = {0};
    bool moved;
    /* commitCommitLogThoroughInterval equals the interval: every pass commits all. */
    if (commit_written(fs, true, &moved, &err) == RMQ_OK && moved) {
      atomic_fetch_add(&fs->commit_runs, 1);
    }
  }
}

int rmq_flush_commit(rmq_flush_service *fs, rmq_err *err) {
  bool moved;
  return rmq_commitlog_buffered(fs->cl) ? commit_written(fs, true, &moved, err) : RMQ_OK;
}

/* ---------------------------------------------------- GroupCommit */

static int64_t max_requested(group_commit_request *r) {
  int64_t m = 0;
  for (; r; r = r->next) m = r->next_offset > m ? r->next_offset : m;
  return m;
}

/*
** Wake every request served. A request still beyond the flushed offset after
** a pass without error means the flush stopped short of bytes it was told
** were written: named as such, not as a timeout.
*/
static void complete_requests(rmq_flush_service *fs, int rc) {
  int64_t flushed = rmq_commitlog_flushed_offset(fs->cl);
  for (group_commit_request *r = fs->requests_read; r; r = r->next) {
    r->rc = rc != RMQ_OK ? rc : flushed >= r->next_offset ? RMQ_OK : RMQ_EIO;
    if (r->rc == RMQ_EIO && rc == RMQ_OK) {
      snprintf(fs->io_error, sizeof fs->io_error,
               "the commit log flushed up to offset %lld and had nothing more to flush",
               (long long)flushed);
    }
    r->done = true;
  }
  fs->requests_read = NULL;
  pthread_cond_broadcast(&fs->gc_done);
}

/*
** GroupCommitService.doCommit: flush segment after segment until the target
** is on disk; each pass forces one segment, and the requests of one swap may
** span many when segments are small. With no request it still forces once.
*/
static int flush_to(rmq_flush_service *fs, int64_t target, rmq_err *err) {
  bool moved, any = false;
  int rc = rmq_commitlog_buffered(fs->cl) ? commit_written(fs, false, &moved, err) : RMQ_OK;
  if (rc != RMQ_OK) return rc;
  rmq_commitlog_follow_shared(fs->cl);
  do {
    rc = rmq_mfq_flush(&fs->cl->mfq, 0, &moved, err);
    any = any || moved;
  } while (rc == RMQ_OK && moved && rmq_commitlog_flushed_offset(fs->cl) < target);
  if (any) atomic_fetch_add(&fs->flush_runs, 1);
  return rc;
}

static int64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* At most this long a flush waits for the writers of the last one to come back. */
#define GATHER_MAX_NS 1000000

/*
** The writers the last flush woke come back one by one; flushing at the
** first of them would flush once for every few. So wait, at most as long as
** the last flush took, until as many requests wait as it served: a steady
** set of writers shares each flush, and a lone writer never waits. Called
** with gc_mu held.
*/
static void gather_requests(rmq_flush_service *fs) {
  if (fs->pending == 0 || fs->pending >= fs->last_served) return;
  int64_t wait = fs->last_flush_ns < GATHER_MAX_NS ? fs->last_flush_ns : GATHER_MAX_NS;
  int64_t end = monotonic_ns() + wait;
  struct timespec deadline = {end / 1000000000, end % 1000000000};
  while (fs->pending < fs->last_served) {
    if (pthread_cond_timedwait(&fs->gc_arrived, &fs->gc_mu, &deadline) != 0) break;
  }
}

static void group_commit_once(rmq_flush_service *fs) {
  pthread_mutex_lock(&fs->gc_mu);
  gather_requests(fs);
  fs->requests_read = fs->requests_write;
  fs->requests_write = NULL;
  int served = fs->pending;
  fs->pending = 0;
  int64_t target = max_requested(fs->requests_read);
  pthread_mutex_unlock(&fs->gc_mu);

  rmq_err err = {0};
  int64_t t0 = monotonic_ns();
  int rc = flush_to(fs, target, &err);
  int64_t took = monotonic_ns() - t0;
  if (rc != RMQ_OK) {
    pthread_mutex_lock(&fs->gc_mu);
    snprintf(fs->io_error, sizeof fs->io_error, "%s", err.msg);
    pthread_mutex_unlock(&fs->gc_mu);
    on_io_failure(fs, &err);
  } else {
    record_flush_time(fs);
  }
  pthread_mutex_lock(&fs->gc_mu);
  if (served > 0) {
    fs->last_served = served;
    fs->last_flush_ns = took;
  }
  complete_requests(fs, rc);
  pthread_mutex_unlock(&fs->gc_mu);
}

static void group_commit_run(rmq_service_thread *st) {
  rmq_flush_service *fs = st->arg;
  while (!rmq_service_thread_stopped(st)) {
    rmq_service_thread_wait(st, 10);
    group_commit_once(fs);
  }
  /* Serve whatever arrived during shutdown so no producer waits for its timeout. */
  group_commit_once(fs);
}

/* Take r out of whichever list holds it; called with gc_mu held. */
static void unlink_request(rmq_flush_service *fs, group_commit_request *r) {
  group_commit_request **lists[2] = {&fs->requests_write, &fs->requests_read};
  for (int i = 0; i < 2; i++) {
    for (group_commit_request **p = lists[i]; *p; p = &(*p)->next) {
      if (*p == r) {
        *p = r->next;
        if (i == 0) fs->pending--;
        return;
      }
    }
  }
}

void rmq_flush_wakeup(rmq_flush_service *fs) { rmq_service_thread_wakeup(&fs->flush_thread); }

int rmq_flush_wait(rmq_flush_service *fs, int64_t next_offset, rmq_err *err) {
  if (!fs->cfg.sync || rmq_commitlog_flushed_offset(fs->cl) >= next_offset) return RMQ_OK;
  group_commit_request req = {.next_offset = next_offset};
  struct timespec deadline;
  rmq_deadline_in(&deadline, fs->cfg.sync_flush_timeout_ms);
  pthread_mutex_lock(&fs->gc_mu);
  req.next = fs->requests_write;
  fs->requests_write = &req;
  if (++fs->pending >= fs->last_served) pthread_cond_signal(&fs->gc_arrived);
  pthread_mutex_unlock(&fs->gc_mu);
  rmq_service_thread_wakeup(&fs->flush_thread);

  pthread_mutex_lock(&fs->gc_mu);
  while (!req.done) {
    if (pthread_cond_timedwait(&fs->gc_done, &fs->gc_mu, &deadline) != 0 && !req.done) {
      unlink_request(fs, &req);
      req.rc = RMQ_ETIMEOUT;
      break;
    }
  }
  int rc = req.rc;
  if (rc == RMQ_ETIMEOUT) {
    rmq_err_set(err, rc,
                "flush to disk did not reach offset %lld within %d ms (sync_flush_timeout_ms); "
                "the message is written but may not be durable",
                (long long)next_offset, fs->cfg.sync_flush_timeout_ms);
  } else if (rc != RMQ_OK) {
    rmq_err_set(err, rc, "flush to disk failed: %s", fs->io_error);
  }
  pthread_mutex_unlock(&fs->gc_mu);
  return rc;
}

/* ---------------------------------------------------------- lifecycle */

rmq_flush_service *rmq_flush_service_new(rmq_commitlog *cl, rmq_checkpoint *cp,
                                         const rmq_flush_config *cfg, rmq_err *err) {
  rmq_flush_service *fs = calloc(1, sizeof *fs);
  if (!fs) {
    rmq_err_set(err, RMQ_ENOMEM, "out of memory");
    return NULL;
  }
  fs->cl = cl;
  fs->cp = cp;
  fs->cfg = *cfg;
  pthread_mutex_init(&fs->gc_mu, NULL);
  rmq_cond_init_monotonic(&fs->gc_done);
  rmq_cond_init_monotonic(&fs->gc_arrived);
  rmq_service_thread_init(&fs->flush_thread,
                          cfg->sync ? "GroupCommitService" : "FlushRealTimeService",
                          cfg->sync ? group_commit_run : flush_real_time_run, fs);
  if (cl->mfq.pool) {
    rmq_service_thread_init(&fs->commit_thread, "CommitRealTimeService", commit_real_time_run, fs);
    atomic_store(&cl->put_wakeup, &fs->commit_thread);
  }
  return fs;
}

int rmq_flush_service_start(rmq_flush_service *fs, rmq_err *err) {
  int rc = rmq_service_thread_start(&fs->flush_thread, err);
  if (rc == RMQ_OK && fs->commit_thread.run) rc = rmq_service_thread_start(&fs->commit_thread, err);
  return rc;
}

int rmq_flush_all(rmq_flush_service *fs, int64_t *flushed_offset, rmq_err *err) {
  int rc = flush_until_stable(fs, err);
  if (rc != RMQ_OK) {
    on_io_failure(fs, err);
  } else {
    record_flush_time(fs);
  }
  if (flushed_offset) *flushed_offset = rmq_commitlog_flushed_offset(fs->cl);
  return rc;
}

int64_t rmq_flush_runs(rmq_flush_service *fs) { return atomic_load(&fs->flush_runs); }
int64_t rmq_flush_commit_runs(rmq_flush_service *fs) { return atomic_load(&fs->commit_runs); }

void rmq_flush_service_free(rmq_flush_service *fs) {
  if (!fs) return;
  atomic_store(&fs->cl->put_wakeup, NULL);
  rmq_service_thread_shutdown(&fs->commit_thread);
  rmq_service_thread_shutdown(&fs->flush_thread);
  rmq_err err = {0};
  if (!atomic_load(&fs->cl->poisoned)) rmq_flush_all(fs, NULL, &err);
  pthread_cond_destroy(&fs->gc_done);
  pthread_cond_destroy(&fs->gc_arrived);
  pthread_mutex_destroy(&fs->gc_mu);
  free(fs);
}

/* ------------------------------------------------- FlushConsumeQueue */

#define CQ_FLUSH_INTERVAL_MS 1000
#define CQ_FLUSH_LEAST_PAGES 2
#define CQ_FLUSH_THOROUGH_INTERVAL_MS 60000

struct rmq_cq_flush_service {
  rmq_cq_table *cqs;
  rmq_index_service *index;
  rmq_checkpoint *cp;
  rmq_service_thread thread;
  pthread_mutex_t mu;   /* one pass at a time: the thread or rmq_cq_flush_all */
  _Atomic int64_t runs; /* passes of the thread that forced a queue */
};

/* DMS doFlush: a thorough pass records the logics time taken before the queues were forced. */
static int cq_flush_pass(rmq_cq_flush_service *fs, bool thorough, bool *moved, rmq_err *err) {
  pthread_mutex_lock(&fs->mu);
  int64_t logics = atomic_load(&fs->cp->logics_msg_timestamp);
  int rc = rmq_cq_table_flush(fs->cqs, thorough ? 0 : CQ_FLUSH_LEAST_PAGES, moved, err);
  if (rc == RMQ_OK && thorough && fs->index) rc = rmq_index_service_flush(fs->index, err);
  if (rc == RMQ_OK && thorough) {
    atomic_store(&fs->cp->logics_msg_timestamp, logics);
    rc = rmq_checkpoint_flush(fs->cp, err);
  }
  pthread_mutex_unlock(&fs->mu);
  return rc;
}

static void cq_flush_run(rmq_service_thread *st) {
  rmq_cq_flush_service *fs = st->arg;
  int64_t last_thorough = rmq_monotonic_ms();
  while (!rmq_service_thread_stopped(st)) {
    rmq_service_thread_wait(st, CQ_FLUSH_INTERVAL_MS);
    bool thorough = rmq_monotonic_ms() - last_thorough >= CQ_FLUSH_THOROUGH_INTERVAL_MS;
    if (thorough) last_thorough = rmq_monotonic_ms();
    rmq_err err = {0};
    bool moved = false;
    /* A failure is retried next pass. */
    if (cq_flush_pass(fs, thorough, &moved, &err) == RMQ_OK && moved) {
      atomic_fetch_add(&fs->runs, 1);
    }
  }
}

rmq_cq_flush_service *rmq_cq_flush_service_new(rmq_cq_table *cqs, rmq_index_service *index,
                                               rmq_checkpoint *cp, rmq_err *err) {
  rmq_cq_flush_service *fs = calloc(1, sizeof *fs);
  if (!fs) {
    rmq_err_set(err, RMQ_ENOMEM, "out of memory");
    return NULL;
  }
  fs->cqs = cqs;
  fs->index = index;
  fs->cp = cp;
  pthread_mutex_init(&fs->mu, NULL);
  rmq_service_thread_init(&fs->thread, "FlushConsumeQueueService", cq_flush_run, fs);
  return fs;
}

int rmq_cq_flush_service_start(rmq_cq_flush_service *fs, rmq_err *err) {
  return rmq_service_thread_start(&fs->thread, err);
}

int rmq_cq_flush_all(rmq_cq_flush_service *fs, rmq_err *err) {
  bool moved = false;
  return cq_flush_pass(fs, true, &moved, err);
}

int64_t rmq_cq_flush_runs(rmq_cq_flush_service *fs) { return atomic_load(&fs->runs); }

void rmq_cq_flush_service_free(rmq_cq_flush_service *fs) {
  if (!fs) return;
  rmq_service_thread_shutdown(&fs->thread);
  pthread_mutex_destroy(&fs->mu);
  free(fs);
}
