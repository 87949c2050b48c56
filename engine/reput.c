/*
** reput.c: ReputMessageService (see reput.h).
*/
#include "reput.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "multi_dispatch.h"
#include "properties.h"
#include "service_thread.h"

struct rmq_reput_service {
  rmq_commitlog *cl;
  rmq_cq_table *cqs;
  rmq_index_service *index;
  rmq_checkpoint *cp;
  rmq_service_thread thread;
  _Atomic int64_t reput_from_offset;
  _Atomic int64_t skipped;
  atomic_bool failed;
  pthread_mutex_t mu; /* guards nothing but the progress condition */
  pthread_cond_t progress;
  pthread_mutex_t schedule_mu; /* held while schedule_fn runs, so clearing it waits for a call */
  rmq_reput_schedule_fn schedule_fn;
  void *schedule_ctx;
  pthread_mutex_t progress_mu; /* held while progress_fn runs, as schedule_mu */
  rmq_reput_progress_fn progress_fn;
  void *progress_ctx;
  int64_t told_ns, told_offset; /* the last tell_progress; the dispatcher's thread only */
};

static bool is_type(int32_t sys_flag, int32_t type) {
  return (sys_flag & RMQ_SYSFLAG_TRANSACTION_MASK) == type;
}

/* The properties dispatch reads, found in one pass. */
enum { DISPATCH_TAGS, DISPATCH_KEYS, DISPATCH_UNIQ_KEY, DISPATCH_PROPS };
static const char *const dispatch_properties[DISPATCH_PROPS] = {
    RMQ_PROPERTY_TAGS, RMQ_PROPERTY_KEYS, RMQ_PROPERTY_UNIQ_KEY};

/* The queue's consume queue, made when it is new. */
static rmq_consume_queue *queue_of(rmq_reput_service *r, const char *topic, size_t topic_len,
                                   int32_t queue_id, int64_t at, rmq_err *err) {
  char name[RMQ_MAX_TOPIC_LEN + 1];
  if (topic_len > RMQ_MAX_TOPIC_LEN) {
    rmq_err_set(err, RMQ_ECORRUPT, "record at %lld names a %zu-byte topic", (long long)at,
                topic_len);
    return NULL;
  }
  memcpy(name, topic, topic_len);
  name[topic_len] = '\0';
  rmq_consume_queue *cq = rmq_cq_table_find(r->cqs, name, queue_id);
  if (!cq && rmq_cq_table_find_or_create(r->cqs, name, queue_id, &cq, err) != RMQ_OK) return NULL;
  return cq;
}

/*
** ConsumeQueue.multiDispatchLmqQueue: the record's entry into each light
** message queue it lists, at the offset the append gave it there.
*/
static int dispatch_lmq(rmq_reput_service *r, const rmq_message *m, int64_t tags_code,
                        rmq_err *err) {
  rmq_md_iter it;
  rmq_md_target t;
  if (!r->cl->cfg.enable_lmq || !rmq_md_applies(m->topic, (size_t)m->topic_len, m->sys_flag) ||
      !rmq_md_iter_start(&it, m->properties, (size_t)m->properties_len, m->queue_id)) {
    return RMQ_OK;
  }
  int more;
  while ((more = rmq_md_iter_next(&it, &t)) == 1) {
    rmq_consume_queue *cq = queue_of(r, t.topic, t.topic_len, t.queue_id, m->physical_offset, err);
    if (!cq || rmq_cq_put(cq, m->physical_offset, m->total_size, tags_code, m->store_timestamp,
                          t.queue_offset, r->cp, err) != RMQ_OK) {
      return err->code;
    }
  }
  /* RocketMQ logs such a record and dispatches no further ("[bug] queues.length!=..."). */
  return RMQ_OK;
}

static int build_consume_queue(rmq_reput_service *r, const rmq_message *m,
                               const rmq_property_value *props, rmq_err *err) {
  if (!is_type(m->sys_flag, RMQ_SYSFLAG_TRANSACTION_NOT_TYPE) &&
      !is_type(m->sys_flag, RMQ_SYSFLAG_TRANSACTION_COMMIT)) {
    return RMQ_OK;
  }
  rmq_consume_queue *cq = queue_of(r, m->topic, (size_t)m->topic_len, m->queue_id,
                                   m->physical_offset, err);
  if (!cq) return err->code;
  const rmq_property_value *tags = &props[DISPATCH_TAGS];
  int64_t tags_code = rmq_commitlog_tags_code_of(r->cl, m, tags->value, tags->len);
  int rc = rmq_cq_put(cq, m->physical_offset, m->total_size, tags_code, m->store_timestamp,
                      m->queue_offset, r->cp, err);
  if (rc == RMQ_OK) rc = dispatch_lmq(r, m, tags_code, err);
  if (rc == RMQ_OK && strcmp(cq->topic, RMQ_SCHEDULE_TOPIC) == 0) {
    pthread_mutex_lock(&r->schedule_mu);
    if (r->schedule_fn) r->schedule_fn(r->schedule_ctx);
    pthread_mutex_unlock(&r->schedule_mu);
  }
  return rc;
}

void rmq_reput_on_schedule(rmq_reput_service *r, rmq_reput_schedule_fn fn, void *ctx) {
  pthread_mutex_lock(&r->schedule_mu);
  r->schedule_fn = fn;
  r->schedule_ctx = ctx;
  pthread_mutex_unlock(&r->schedule_mu);
}

static int build_index(rmq_reput_service *r, const rmq_message *m, const rmq_property_value *props,
                       rmq_err *err) {
  if (!r->index) return RMQ_OK;
  rmq_index_request q = {
      .topic = m->topic,
      .topic_len = (size_t)m->topic_len,
      .commit_log_offset = m->physical_offset,
      .store_timestamp = m->store_timestamp,
      .sys_flag = m->sys_flag,
  };
  q.keys = props[DISPATCH_KEYS].value;
  q.keys_len = props[DISPATCH_KEYS].len;
  q.uniq_key = props[DISPATCH_UNIQ_KEY].value;
  q.uniq_key_len = props[DISPATCH_UNIQ_KEY].len;
  return rmq_index_service_build(r->index, &q, err);
}

int rmq_reput_dispatch(rmq_reput_service *r, const rmq_message *m, rmq_err *err) {
  rmq_property_value props[DISPATCH_PROPS];
  rmq_properties_find(m->properties, (size_t)m->properties_len, dispatch_properties, DISPATCH_PROPS,
                      props);
  int rc = build_consume_queue(r, m, props, err);
  if (rc == RMQ_OK) rc = build_index(r, m, props, err);
  return rc;
}

static void publish(rmq_reput_service *r, int64_t offset) {
  pthread_mutex_lock(&r->mu);
  atomic_store_explicit(&r->reput_from_offset, offset, memory_order_release);
  pthread_cond_broadcast(&r->progress);
  pthread_mutex_unlock(&r->mu);
}

static void fail(rmq_reput_service *r, const rmq_err *err) {
  char why[600];
  snprintf(why, sizeof why, "dispatch to the consume queues and index failed: %s", err->msg);
  rmq_commitlog_poison(r->cl, why);
  atomic_store(&r->failed, true);
  publish(r, atomic_load(&r->reput_from_offset)); /* wake waiters so they see it */
}

/*
** Dispatch the records of one segment's readable bytes from offset; returns
** the offset reached (the next segment's start after a BLANK).
*/
static int64_t reput_segment(rmq_reput_service *r, int64_t offset, bool *stop) {
  rmq_commitlog_ref ref;
  if (rmq_commitlog_get_data(r->cl, offset, &ref) != RMQ_OK) {
    *stop = true;
    return offset;
  }
  size_t pos = 0;
  while (pos < ref.avail) {
    rmq_message m;
    rmq_decode_status s = rmq_message_decode(ref.data + pos, ref.avail - pos, false, &m);
    if (s == RMQ_DECODE_BLANK) {
      offset = rmq_commitlog_roll_next(r->cl, offset);
      pos = 0;
      break;
    }
    if (s != RMQ_DECODE_OK) {
      /* Written bytes that are no record: RocketMQ's master skips the rest of the buffer. */
      atomic_fetch_add(&r->skipped, 1);
      offset += (int64_t)ref.avail;
      pos = 0;
      break;
    }
    rmq_err err = {0};
    if (rmq_reput_dispatch(r, &m, &err) != RMQ_OK) {
      fail(r, &err);
      *stop = true;
      break;
    }
    pos += (size_t)m.total_size;
  }
  rmq_commitlog_ref_release(&ref);
  return offset + (int64_t)pos;
}

void rmq_reput_on_progress(rmq_reput_service *r, rmq_reput_progress_fn fn, void *ctx) {
  pthread_mutex_lock(&r->progress_mu);
  r->progress_fn = fn;
  r->progress_ctx = ctx;
  pthread_mutex_unlock(&r->progress_mu);
}

static void tell_progress(rmq_reput_service *r, int64_t offset) {
  r->told_ns = rmq_monotonic_ns();
  r->told_offset = offset;
  pthread_mutex_lock(&r->progress_mu);
  if (r->progress_fn) r->progress_fn(r->progress_ctx, offset);
  pthread_mutex_unlock(&r->progress_mu);
}

/*
** Other processes are told with a system call (a futex wake): under load at
** most every TELL_INTERVAL_NS, and always before the dispatcher sleeps, so
** that the last of a burst is told at once.
*/
#define TELL_INTERVAL_NS 1000000

static void tell_idle(rmq_reput_service *r) {
  int64_t offset = rmq_reput_offset(r);
  if (offset != r->told_offset) tell_progress(r, offset);
}

static void do_reput(rmq_reput_service *r) {
  int64_t offset = atomic_load(&r->reput_from_offset);
  int64_t min = rmq_commitlog_min_offset(r->cl);
  if (offset < min) offset = min;
  int64_t start = offset;
  bool stop = false;
  while (!stop && !atomic_load(&r->failed) && offset < rmq_commitlog_max_offset(r->cl)) {
    int64_t next = reput_segment(r, offset, &stop);
    if (next != offset) publish(r, next);
    offset = next;
  }
  if (offset != start && rmq_monotonic_ns() - r->told_ns >= TELL_INTERVAL_NS) {
    tell_progress(r, offset);
  }
}

/*
** After a pass, look for new appends a few times over ~100 us before
** blocking. Under load the next append is there already, so the dispatcher
** takes appends in batches and the writer's wake-up finds it awake (a
** load, no futex call); an idle store still sleeps at once after that.
*/
#define LINGER_POLLS 10
#define LINGER_POLL_NS 10000

static bool linger(rmq_reput_service *r) {
  struct timespec ts = {0, LINGER_POLL_NS};
  for (int i = 0; i < LINGER_POLLS; i++) {
    if (rmq_commitlog_max_offset(r->cl) > rmq_reput_offset(r)) return true;
    nanosleep(&ts, NULL);
  }
  return false;
}

static void reput_run(rmq_service_thread *st) {
  rmq_reput_service *r = st->arg;
  while (!rmq_service_thread_stopped(st)) {
    do_reput(r);
    if (!atomic_load(&r->failed) && linger(r)) continue;
    tell_idle(r);
    /* Followers that append themselves wake nobody here: look every 1 ms (ReputMessageService). */
    rmq_service_thread_wait(st, rmq_commitlog_direct_writers(r->cl) ? 1 : 1000);
  }
  do_reput(r); /* what was appended before shutdown */
  tell_idle(r);
}

rmq_reput_service *rmq_reput_new(rmq_commitlog *cl, rmq_cq_table *cqs, rmq_index_service *index,
                                 rmq_checkpoint *cp, rmq_err *err) {
  rmq_reput_service *r = calloc(1, sizeof *r);
  if (!r) {
    rmq_err_set(err, RMQ_ENOMEM, "out of memory");
    return NULL;
  }
  r->cl = cl;
  r->cqs = cqs;
  r->index = index;
  r->cp = cp;
  pthread_mutex_init(&r->mu, NULL);
  pthread_mutex_init(&r->schedule_mu, NULL);
  pthread_mutex_init(&r->progress_mu, NULL);
  rmq_cond_init_monotonic(&r->progress);
  rmq_service_thread_init(&r->thread, "ReputMessageService", reput_run, r);
  return r;
}

int rmq_reput_start(rmq_reput_service *r, int64_t from_offset, rmq_err *err) {
  atomic_store(&r->reput_from_offset, from_offset);
  return rmq_service_thread_start(&r->thread, err);
}

void rmq_reput_free(rmq_reput_service *r) {
  if (!r) return;
  rmq_service_thread_shutdown(&r->thread);
  pthread_cond_destroy(&r->progress);
  pthread_mutex_destroy(&r->mu);
  pthread_mutex_destroy(&r->schedule_mu);
  pthread_mutex_destroy(&r->progress_mu);
  free(r);
}

void rmq_reput_wakeup(rmq_reput_service *r) { rmq_service_thread_wakeup(&r->thread); }

int64_t rmq_reput_offset(rmq_reput_service *r) {
  return atomic_load_explicit(&r->reput_from_offset, memory_order_acquire);
}

int64_t rmq_reput_behind(rmq_reput_service *r) {
  int64_t behind = rmq_commitlog_max_offset(r->cl) - rmq_reput_offset(r);
  return behind > 0 ? behind : 0;
}

int64_t rmq_reput_skipped(rmq_reput_service *r) { return atomic_load(&r->skipped); }

int rmq_reput_wait_for(rmq_reput_service *r, int64_t offset, int timeout_ms, rmq_err *err) {
  struct timespec deadline;
  rmq_deadline_in(&deadline, timeout_ms);
  pthread_mutex_lock(&r->mu);
  int wait_rc = 0;
  while (rmq_reput_offset(r) < offset && !atomic_load(&r->failed) && wait_rc == 0) {
    wait_rc = pthread_cond_timedwait(&r->progress, &r->mu, &deadline);
  }
  pthread_mutex_unlock(&r->mu);
  if (rmq_reput_offset(r) >= offset) return RMQ_OK;
  if (atomic_load(&r->failed)) {
    return rmq_err_set(err, RMQ_EPOISONED, "dispatch stopped: %s", r->cl->poison_msg);
  }
  return rmq_err_set(err, RMQ_ETIMEOUT, "dispatch did not reach offset %lld within %d ms",
                     (long long)offset, timeout_ms);
}

int64_t rmq_reput_wait_progress(rmq_reput_service *r, int64_t seen, int timeout_ms) {
  struct timespec deadline;
  rmq_deadline_in(&deadline, timeout_ms);
  pthread_mutex_lock(&r->mu);
  int wait_rc = 0;
  while (rmq_reput_offset(r) <= seen && !atomic_load(&r->failed) && wait_rc == 0) {
    wait_rc = pthread_cond_timedwait(&r->progress, &r->mu, &deadline);
  }
  pthread_mutex_unlock(&r->mu);
  return rmq_reput_offset(r);
}
