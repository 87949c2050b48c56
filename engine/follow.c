/*
** follow.c: a read-only store follows a writer in another process (see
** follow.h).
*/
#include "follow.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "clock.h"
#include "message.h"
#include "shared_state.h"

/* Without a page: a refresh, and a look for the page, at most this often. */
#define FOLLOW_POLL_MS 100
/* Without a page: how often a long poll looks again. */
#define FOLLOW_SLEEP_MS 20

struct rmq_follower {
  char *dir;
  rmq_commitlog *cl;
  rmq_cq_table *cqs;
  rmq_index_service *index;
  pthread_mutex_t mu;             /* one refresh at a time */
  rmq_shared_state *_Atomic page; /* NULL until an owner of ours has made one */
  _Atomic int64_t seen_seq;       /* the page's seq at the last refresh; -1: none yet */
  _Atomic int64_t polled_ms;      /* when the last refresh ran (monotonic) */
  int64_t page_tried_ms;          /* the last look for a page; under mu */
  int64_t epoch;                  /* the page's at the last refresh, 0 before one; under mu */
  int64_t min_offset;             /* the log's first offset at the last refresh; under mu */
};

static void mark_followed(rmq_cq_table *cqs) {
  rmq_consume_queue **all;
  int n;
  rmq_err ignored = {0};
  if (rmq_cq_table_snapshot(cqs, &all, &n, &ignored) != RMQ_OK) return;
  for (int i = 0; i < n; i++) all[i]->followed = true;
  free(all);
}

int rmq_follower_new(const char *dir, rmq_commitlog *cl, rmq_cq_table *cqs,
                     rmq_index_service *index, rmq_follower **out, rmq_err *err) {
  *out = NULL;
  rmq_follower *f = calloc(1, sizeof *f);
  if (!f || !(f->dir = strdup(dir))) {
    free(f);
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  }
  f->cl = cl;
  f->cqs = cqs;
  f->index = index;
  pthread_mutex_init(&f->mu, NULL);
  atomic_init(&f->seen_seq, -1);
  atomic_init(&f->polled_ms, INT64_MIN / 2);
  f->page_tried_ms = INT64_MIN / 2;
  f->min_offset = rmq_commitlog_min_offset(cl);
  /* The open recovered these queues: their ends are known. */
  mark_followed(cqs);
  rmq_shared_state *page = NULL;
  rmq_err ignored = {0};
  if (rmq_shared_state_open(dir, &page, &ignored) == RMQ_OK && page) {
    f->epoch = rmq_shared_state_epoch(page);
    atomic_init(&f->page, page);
  }
  *out = f;
  return RMQ_OK;
}

void rmq_follower_free(rmq_follower *f) {
  if (!f) return;
  rmq_shared_state_close(atomic_load(&f->page));
  pthread_mutex_destroy(&f->mu);
  free(f->dir);
  free(f);
}

/* Nothing to look at: the page's seq has not moved, or, without one, the last look is recent. */
static bool up_to_date(rmq_follower *f) {
  rmq_shared_state *page = atomic_load(&f->page);
  if (page) return (int64_t)rmq_shared_state_seq(page) == atomic_load(&f->seen_seq);
  return rmq_monotonic_ms() - atomic_load(&f->polled_ms) < FOLLOW_POLL_MS;
}

/* An owner may start after this store opened: look for its page now and then. */
static void look_for_page(rmq_follower *f) {
  int64_t now = rmq_monotonic_ms();
  if (atomic_load(&f->page) || now - f->page_tried_ms < FOLLOW_POLL_MS) return;
  f->page_tried_ms = now;
  rmq_shared_state *page = NULL;
  rmq_err ignored = {0};
  if (rmq_shared_state_open(f->dir, &page, &ignored) == RMQ_OK && page) {
    atomic_store(&f->page, page);
  }
}

/* ------------------------------------------------------------ the log */

/*
** The end of the complete records from `end` on (CommitLog's recovery
** check: magic, size and body CRC), across the BLANK that ends a segment
** into the next one when it is open. A record being written ends it.
*/
static int64_t scan_end(rmq_commitlog *cl, int64_t end) {
  for (;;) {
    rmq_mapped_file *mf = rmq_mfq_find(&cl->mfq, end);
    if (!mf) return end;
    int32_t pos = (int32_t)(end - mf->file_from_offset);
    rmq_decode_status st = RMQ_DECODE_OK;
    while (pos < mf->file_size && st == RMQ_DECODE_OK) {
      rmq_message m;
      st = rmq_message_decode(mf->mapped + pos, (size_t)(mf->file_size - pos), true, &m);
      if (st == RMQ_DECODE_OK) pos += m.total_size;
    }
    int64_t next = mf->file_from_offset + mf->file_size;
    end = mf->file_from_offset + pos;
    rmq_mapped_file_release(mf);
    if (st != RMQ_DECODE_OK && st != RMQ_DECODE_BLANK) return end;
    rmq_mapped_file *after = rmq_mfq_find(&cl->mfq, next);
    if (!after) return end;
    rmq_mapped_file_release(after);
    end = next;
  }
}

/* Move the log's readable end forward to `end` (the segments before it full). */
static void set_end(rmq_mapped_file_queue *q, int64_t end) {
  pthread_rwlock_rdlock(&q->lock);
  for (int i = 0; i < q->count; i++) {
    rmq_mapped_file *mf = q->files[i];
    int64_t pos = end - mf->file_from_offset;
    if (pos > mf->file_size) pos = mf->file_size;
    if (pos > rmq_mapped_file_read_position(mf)) rmq_mapped_file_set_positions(mf, (int32_t)pos);
  }
  pthread_rwlock_unlock(&q->lock);
}

/* bound: the page's dispatched offset, or -1 without a page (scan for the end). */
static int follow_log(rmq_follower *f, int64_t bound, bool identity, rmq_err *err) {
  rmq_mapped_file_queue *q = &f->cl->mfq;
  int dropped, added;
  int rc = rmq_mfq_follow_deleted(q, identity, &dropped, err);
  if (rc == RMQ_OK) rc = rmq_mfq_follow_new(q, &added, err);
  if (rc != RMQ_OK) return rc;
  /* Even a page's offset goes only as far as the records are sound: the page may be stale. */
  int64_t end = rmq_mfq_max_offset(q);
  int64_t target = scan_end(f->cl, end);
  if (bound >= 0 && bound < target) target = bound;
  if (target > end) set_end(q, target);
  return RMQ_OK;
}

/* ------------------------------------------------------------ the queues */

/* A queue seen for the first time: its segments loaded "full" go back to where recovery starts. */
static int follow_queue(rmq_consume_queue *cq, int64_t bound, bool deleted, bool identity,
                        int64_t min, rmq_err *err) {
  bool fresh = !cq->followed;
  int rc = RMQ_OK;
  /* A queue the open found damaged ends at the damage until a repair rebuilds it. */
  if (rmq_cq_damage(cq)) return RMQ_OK;
  if (fresh) {
    rmq_cq_follow_start(cq);
  } else if (deleted) {
    rc = rmq_cq_follow_deleted(cq, identity, min, err);
  }
  if (rc == RMQ_OK) rc = rmq_cq_follow(cq, bound, err);
  if (fresh) rmq_cq_correct_min_offset(cq, min);
  return rc;
}

/* New queues (new directories), then every queue's new entries; deleted: the log's start moved. */
static int follow_queues(rmq_follower *f, int64_t bound, bool deleted, bool identity, int64_t min,
                         rmq_err *err) {
  int rc = rmq_cq_table_load(f->cqs, err);
  rmq_consume_queue **all;
  int n;
  if (rc == RMQ_OK) rc = rmq_cq_table_snapshot(f->cqs, &all, &n, err);
  if (rc != RMQ_OK) return rc;
  for (int i = 0; rc == RMQ_OK && i < n; i++) {
    rc = follow_queue(all[i], bound, deleted, identity, min, err);
  }
  free(all);
  return rc;
}

/* The bound of consume-queue entries: the page's dispatched offset, else the log's end. */
static int64_t queue_bound(rmq_follower *f, int64_t dispatched) {
  int64_t end = rmq_commitlog_max_offset(f->cl);
  return dispatched >= 0 && dispatched < end ? dispatched : end;
}

static int refresh_locked(rmq_follower *f, rmq_err *err) {
  look_for_page(f);
  rmq_shared_state *page = atomic_load(&f->page);
  /* seq before dispatched: a publish stores dispatched, then moves seq. */
  int64_t seq = page ? (int64_t)rmq_shared_state_seq(page) : -1;
  int64_t epoch = page ? rmq_shared_state_epoch(page) : f->epoch;
  int64_t dispatched = page ? rmq_shared_state_dispatched(page) : -1;
  bool identity = epoch != f->epoch;
  int rc = follow_log(f, dispatched, identity, err);
  int64_t min = rmq_commitlog_min_offset(f->cl);
  if (rc == RMQ_OK) {
    rc = follow_queues(f, queue_bound(f, dispatched), identity || min != f->min_offset, identity,
                       min, err);
  }
  if (rc == RMQ_OK) rc = rmq_index_service_follow(f->index, identity, err);
  if (rc != RMQ_OK) return rc;
  f->epoch = epoch;
  f->min_offset = min;
  atomic_store(&f->seen_seq, seq);
  atomic_store(&f->polled_ms, rmq_monotonic_ms());
  return RMQ_OK;
}

int rmq_follower_refresh(rmq_follower *f, rmq_err *err) {
  if (up_to_date(f)) return RMQ_OK;
  pthread_mutex_lock(&f->mu);
  int rc = up_to_date(f) ? RMQ_OK : refresh_locked(f, err);
  pthread_mutex_unlock(&f->mu);
  return rc;
}

static bool queue_dir_exists(rmq_follower *f, const char *topic, int32_t queue_id) {
  char path[PATH_MAX];
  struct stat st;
  return snprintf(path, sizeof path, "%s/consumequeue/%s/%d", f->dir, topic, (int)queue_id) <
             (int)sizeof path &&
         stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

rmq_consume_queue *rmq_follower_open_queue(rmq_follower *f, const char *topic, int32_t queue_id) {
  if (!topic || !rmq_topic_valid(topic, strlen(topic)) || queue_id < 0 ||
      !queue_dir_exists(f, topic, queue_id)) {
    return NULL;
  }
  pthread_mutex_lock(&f->mu);
  rmq_consume_queue *cq = NULL;
  rmq_err err = {0};
  rmq_shared_state *page = atomic_load(&f->page);
  int64_t bound = queue_bound(f, page ? rmq_shared_state_dispatched(page) : -1);
  if (rmq_cq_table_find_or_create(f->cqs, topic, queue_id, &cq, &err) == RMQ_OK && !cq->followed) {
    /* Up to the log's end as this store knows it: the next refresh takes the rest. */
    int64_t end = rmq_commitlog_max_offset(f->cl);
    follow_queue(cq, bound < end ? bound : end, false, false, rmq_commitlog_min_offset(f->cl),
                 &err);
  }
  pthread_mutex_unlock(&f->mu);
  return cq;
}

/* ------------------------------------------------------------ waiting */

uint32_t rmq_follower_mark(rmq_follower *f) {
  rmq_shared_state *page = atomic_load(&f->page);
  return page ? rmq_shared_state_seq(page) : 0;
}

void rmq_follower_sleep(rmq_follower *f, uint32_t mark, int64_t ms) {
  if (ms <= 0) return;
  rmq_shared_state *page = atomic_load(&f->page);
  if (page) {
    rmq_shared_state_wait(page, mark, ms > INT_MAX ? INT_MAX : (int)ms);
    return;
  }
  if (ms > FOLLOW_SLEEP_MS) ms = FOLLOW_SLEEP_MS;
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Does the page's owner still run? A killed owner leaves its pid behind. */
static bool owner_runs(const rmq_shared_state *page) {
  int32_t pid = rmq_shared_state_owner(page);
  return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

void rmq_follower_wait_dispatched(rmq_follower *f, int timeout_ms) {
  rmq_shared_state *page = atomic_load(&f->page);
  if (!page) return;
  int64_t target = scan_end(f->cl, rmq_commitlog_max_offset(f->cl));
  int64_t deadline = rmq_monotonic_ms() + timeout_ms;
  for (;;) {
    uint32_t mark = rmq_shared_state_seq(page);
    if (rmq_shared_state_dispatched(page) >= target || !owner_runs(page)) return;
    int64_t left = deadline - rmq_monotonic_ms();
    if (left <= 0) return;
    rmq_shared_state_wait(page, mark, (int)left);
  }
}
