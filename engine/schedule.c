/*
** schedule.c: ScheduleMessageService and its DeliverDelayedMessageTimerTask
** (see schedule.h), and the listing of the delayed messages not yet
** delivered (rmq_store_scheduled, rocketmq_scheduled).
*/
#include "schedule.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config_json.h"
#include "config_manager.h"
#include "message.h"
#include "properties.h"
#include "service_thread.h"

/* A batch of due messages is put at once; it stays well inside one commit-log segment. */
#define BATCH_MAX_RECORDS 256
#define BATCH_MAX_BYTES (1 << 20)

struct rmq_schedule_service {
  rmq_service_thread thread;
  rmq_service_thread persist_thread;
  rmq_commitlog *cl;
  rmq_cq_table *cqs;
  rmq_reput_service *reput;
  char path[PATH_MAX]; /* config/delayOffset.json */
  _Atomic int64_t offsets[RMQ_MAX_DELAY_LEVELS];
  int64_t persisted[RMQ_MAX_DELAY_LEVELS]; /* what the file holds (persist_thread's, then free's) */
  _Atomic int64_t delivered, dropped;
  /* the batch being built by the thread: records end to end */
  uint8_t *buf;
  size_t cap, len;
  int count;
};

int64_t rmq_schedule_correct_deliver_time(int64_t now, int64_t deliver, int64_t delay_ms) {
  return deliver > rmq_time_add(now, delay_ms) ? now : deliver;
}

/* ------------------------------------------------------------ messageTimeup */

static bool parse_queue_id(const rmq_property_value *v, int32_t *out) {
  if (!v->value || v->len == 0 || v->len > 10) return false;
  int64_t x = 0;
  for (size_t i = 0; i < v->len; i++) {
    if (v->value[i] < '0' || v->value[i] > '9') return false;
    x = x * 10 + (v->value[i] - '0');
  }
  if (x > INT32_MAX) return false;
  *out = (int32_t)x;
  return true;
}

/*
** The message to put for a due record m (ScheduleMessageService.messageTimeup):
** its real topic and queue, flag, body, born host and time, reconsume times
** and properties string as stored (RocketMQ clears DELAY from the map after
** the string was made, so the string keeps DELAY, REAL_TOPIC and REAL_QID);
** sys_flag as stored (messageTimeup copies it: a committed transaction's
** message stays one). False for a message to drop: no valid real topic or
** queue, a transaction half message (executeOnTimeup discards those), a
** prepared or rolled-back one (CommitLog never delays those).
*/
static bool message_timeup(const rmq_message *m, rmq_message *in) {
  static const char *const names[] = {RMQ_PROPERTY_REAL_TOPIC, RMQ_PROPERTY_REAL_QID};
  rmq_property_value v[2];
  rmq_properties_find(m->properties, (size_t)m->properties_len, names, 2, v);
  int tran = m->sys_flag & RMQ_SYSFLAG_TRANSACTION_MASK;
  if (!v[0].value || !rmq_topic_valid(v[0].value, v[0].len) ||
      (v[0].len == strlen(RMQ_TRANS_HALF_TOPIC) &&
       memcmp(v[0].value, RMQ_TRANS_HALF_TOPIC, v[0].len) == 0) ||
      tran == RMQ_SYSFLAG_TRANSACTION_PREPARED || tran == RMQ_SYSFLAG_TRANSACTION_ROLLBACK) {
    return false;
  }
  *in = (rmq_message){.topic = v[0].value,
                      .topic_len = (int32_t)v[0].len,
                      .flag = m->flag,
                      .body = m->body,
                      .body_len = m->body_len,
                      .properties = m->properties,
                      .properties_len = m->properties_len,
                      .sys_flag = m->sys_flag,
                      .born_timestamp = m->born_timestamp,
                      .born_host = m->born_host,
                      .reconsume_times = m->reconsume_times};
  return parse_queue_id(&v[1], &in->queue_id);
}

/* ------------------------------------------------------------------ batch */

static int batch_put(rmq_schedule_service *s, rmq_err *err) {
  if (s->count == 0) return RMQ_OK;
  rmq_span span = {s->buf, s->len};
  int64_t first, end;
  int rc = rmq_commitlog_put_encoded(s->cl, &span, 1, s->count, NULL, &first, &end, err);
  if (rc == RMQ_OK) {
    atomic_fetch_add(&s->delivered, s->count);
    rmq_reput_wakeup(s->reput);
  }
  s->len = 0;
  s->count = 0;
  return rc;
}

static int batch_room(rmq_schedule_service *s, size_t need, rmq_err *err) {
  if (s->cap - s->len >= need) return RMQ_OK;
  size_t cap = s->cap ? s->cap : 65536;
  while (cap - s->len < need) cap *= 2;
  uint8_t *p = realloc(s->buf, cap);
  if (!p) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  s->buf = p;
  s->cap = cap;
  return RMQ_OK;
}

/* Encode the due record at e into the batch (or drop it); RMQ_OK unless the store fails. */
static int batch_add(rmq_schedule_service *s, const rmq_cq_entry *e, rmq_err *err) {
  rmq_commitlog_ref ref;
  rmq_message m, in;
  rmq_err ignored = {0};
  /* An expired or unreadable record is skipped, as lookMessageByOffset's null is. */
  if (rmq_commitlog_read_message(s->cl, e->phy_offset, false, &ref, &m, &ignored) != RMQ_OK) {
    atomic_fetch_add(&s->dropped, 1);
    return RMQ_OK;
  }
  int rc = RMQ_OK;
  if (!message_timeup(&m, &in)) {
    atomic_fetch_add(&s->dropped, 1);
    goto done;
  }
  int32_t len = rmq_commitlog_encode_timeup(s->cl, &in, NULL, 0, &ignored);
  if (len < 0) {
    atomic_fetch_add(&s->dropped, 1); /* breaks a limit of this store: it cannot be put */
    goto done;
  }
  if (s->count > 0 && s->len + (size_t)len > BATCH_MAX_BYTES) rc = batch_put(s, err);
  if (rc == RMQ_OK) rc = batch_room(s, (size_t)len, err);
  if (rc == RMQ_OK) {
    rmq_commitlog_encode_timeup(s->cl, &in, s->buf + s->len, s->cap - s->len, err);
    s->len += (size_t)len;
    s->count++;
  }
done:
  rmq_commitlog_ref_release(&ref);
  return rc;
}

/* Move *next earlier to t. */
static void wake_at(int64_t *next, int64_t t) {
  if (t < *next) *next = t;
}

/* ------------------------------------------------------------ delayOffset */

void rmq_schedule_offsets_path(const char *store_dir, char *out, size_t cap) {
  snprintf(out, cap, "%s/config/delayOffset.json", store_dir);
}

static int parse_offsets(void *ctx, const char *text, size_t len, rmq_err *err) {
  return rmq_delay_offsets_parse(text, len, ctx, RMQ_MAX_DELAY_LEVELS, err);
}

/* ScheduleMessageService.correctDelayOffset: each offset inside its queue's bounds. */
static void clamp_offsets(rmq_cq_table *cqs, int64_t *offsets) {
  for (int i = 0; i < RMQ_MAX_DELAY_LEVELS; i++) {
    rmq_consume_queue *cq = rmq_cq_table_find(cqs, RMQ_SCHEDULE_TOPIC, i);
    int64_t lo = cq ? rmq_cq_min_offset(cq) : 0, hi = cq ? rmq_cq_max_offset(cq) : 0;
    offsets[i] = offsets[i] < lo ? lo : offsets[i] > hi ? hi : offsets[i];
  }
}

int rmq_schedule_load_offsets(const char *store_dir, rmq_cq_table *cqs, int64_t *offsets,
                              char *report, size_t cap, rmq_err *err) {
  char path[PATH_MAX];
  int from;
  rmq_schedule_offsets_path(store_dir, path, sizeof path);
  memset(offsets, 0, RMQ_MAX_DELAY_LEVELS * sizeof *offsets);
  report[0] = '\0';
  int rc = rmq_config_load(path, parse_offsets, offsets, &from, err);
  if (rc != RMQ_OK) {
    memset(offsets, 0, RMQ_MAX_DELAY_LEVELS * sizeof *offsets);
    snprintf(report, cap, "%s; delayed messages are listed from each schedule queue's start",
             err->msg);
    if (rc == RMQ_ECORRUPT) rmq_config_repair_hint(err, store_dir);
  } else if (from == RMQ_CONFIG_BAK) {
    snprintf(report, cap, "%s could not be used: read its .bak", path);
  }
  clamp_offsets(cqs, offsets);
  return rc;
}

/* ------------------------------------------------------ verify and repair */

/* Levels salvaged from a copy: a later copy's replace an earlier's. */
typedef struct salvaged_levels {
  int64_t offsets[RMQ_MAX_DELAY_LEVELS];
  bool seen[RMQ_MAX_DELAY_LEVELS];
} salvaged_levels;

/* Salvage into a salvaged_levels (ctx), or only find the damage (ctx NULL). */
static int salvage_offsets(void *ctx, const char *text, size_t len, rmq_config_damage *d,
                           rmq_err *err) {
  salvaged_levels *l = ctx;
  return rmq_delay_offsets_salvage(text, len, l ? l->offsets : NULL, l ? l->seen : NULL, d, err);
}

int rmq_schedule_examine_offsets(const char *store_dir, rmq_config_copy *file, rmq_config_copy *bak,
                                 rmq_err *err) {
  char path[PATH_MAX];
  rmq_schedule_offsets_path(store_dir, path, sizeof path);
  return rmq_config_examine(path, salvage_offsets, NULL, file, bak, err);
}

/*
** The levels salvaged, up to the highest one read: a level below it that
** could not be read is written as 0, which the open clamps to its queue's
** start, as it does a level the file lacks.
*/
static int write_salvaged(const char *path, const salvaged_levels *l, rmq_err *err) {
  int n = 0;
  int64_t offsets[RMQ_MAX_DELAY_LEVELS] = {0};
  for (int i = 0; i < RMQ_MAX_DELAY_LEVELS; i++) {
    if (l->seen[i]) offsets[i] = l->offsets[i], n = i + 1;
  }
  char *text = rmq_delay_offsets_format(offsets, n);
  if (!text) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  int rc = rmq_config_persist(path, text, strlen(text), err);
  free(text);
  return rc;
}

int rmq_schedule_repair_offsets(const char *store_dir, char *damaged_dir, size_t cap,
                                int64_t *moved, rmq_err *err) {
  char path[PATH_MAX];
  salvaged_levels l = {.seen = {false}};
  rmq_config_copy file, bak;
  rmq_schedule_offsets_path(store_dir, path, sizeof path);
  int rc = rmq_config_examine(path, salvage_offsets, &l, &file, &bak, err);
  if (rc != RMQ_OK || !rmq_config_needs_repair(&file, &bak)) return rc;
  rc = rmq_config_set_aside(store_dir, path, &file, &bak, damaged_dir, cap, moved, err);
  return rc == RMQ_OK ? write_salvaged(path, &l, err) : rc;
}

/* Write the offsets when they moved since the last write (ScheduleMessageService.persist). */
static int persist(rmq_schedule_service *s, rmq_err *err) {
  int64_t now[RMQ_MAX_DELAY_LEVELS];
  int n = s->cl->cfg.delay_level_count;
  rmq_schedule_offsets(s, now);
  if (memcmp(now, s->persisted, sizeof now) == 0) return RMQ_OK;
  char *text = rmq_delay_offsets_format(now, n);
  if (!text) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  int rc = rmq_config_persist(s->path, text, strlen(text), err);
  free(text);
  if (rc == RMQ_OK) memcpy(s->persisted, now, sizeof now);
  return rc;
}

/* The persist thread: the writes' fsyncs never delay a delivery. */
static void persist_run(rmq_service_thread *t) {
  rmq_schedule_service *s = t->arg;
  while (!rmq_service_thread_stopped(t)) {
    rmq_service_thread_wait(t, RMQ_SCHEDULE_PERSIST_MS);
    rmq_err err = {0};
    persist(s, &err); /* a failure is tried again at the next period, and at close */
  }
}

/* ------------------------------------------------------------------ levels */

/*
** DeliverDelayedMessageTimerTask.executeOnTimeup for one level: put every
** due entry from the level's offset, in order, and advance the offset past
** what was put. *next: when this level needs looking at again.
*/
static void deliver_level(rmq_schedule_service *s, int level, int64_t *next) {
  int64_t delay = s->cl->cfg.delay_ms[level - 1];
  rmq_consume_queue *cq = rmq_cq_table_find(s->cqs, RMQ_SCHEDULE_TOPIC, level - 1);
  if (!cq) {
    wake_at(next, rmq_time_add(rmq_now_ms(), delay));
    return;
  }
  rmq_cq_iter it;
  rmq_cq_entry e;
  rmq_err err = {0};
  int rc = RMQ_OK;
  bool pending = false;
  rmq_cq_iter_start(&it, cq, atomic_load(&s->offsets[level - 1]));
  int64_t done = it.offset;
  while (rc == RMQ_OK && rmq_cq_iter_next(&it, &e)) {
    int64_t now = rmq_now_ms();
    int64_t due = rmq_schedule_correct_deliver_time(now, e.tags_code, delay);
    if (due > now) {
      wake_at(next, due);
      pending = true;
      break;
    }
    rc = batch_add(s, &e, &err);
    if (rc == RMQ_OK && s->count >= BATCH_MAX_RECORDS) rc = batch_put(s, &err);
    if (rc == RMQ_OK && s->count == 0) atomic_store(&s->offsets[level - 1], it.offset);
    done = it.offset;
  }
  rmq_cq_iter_stop(&it);
  if (rc == RMQ_OK) rc = batch_put(s, &err);
  if (rc == RMQ_OK) {
    atomic_store(&s->offsets[level - 1], done);
    if (!pending) wake_at(next, rmq_time_add(rmq_now_ms(), delay));
  } else {
    s->len = 0;
    s->count = 0;
    wake_at(next, rmq_now_ms() + RMQ_SCHEDULE_RETRY_MS);
  }
}

static void schedule_run(rmq_service_thread *t) {
  rmq_schedule_service *s = t->arg;
  while (!rmq_service_thread_stopped(t)) {
    int64_t next = INT64_MAX;
    for (int level = 1; level <= s->cl->cfg.delay_level_count; level++) {
      deliver_level(s, level, &next);
    }
    int64_t wait = next - rmq_now_ms();
    rmq_service_thread_wait(t, wait > 0 ? wait : 1);
  }
}

/* ---------------------------------------------------------------- service */

rmq_schedule_service *rmq_schedule_new(rmq_commitlog *cl, rmq_cq_table *cqs,
                                       rmq_reput_service *reput, const char *store_dir,
                                       const int64_t *offsets, rmq_err *err) {
  rmq_schedule_service *s = calloc(1, sizeof *s);
  if (!s) {
    rmq_err_set(err, RMQ_ENOMEM, "out of memory");
    return NULL;
  }
  s->cl = cl;
  s->cqs = cqs;
  s->reput = reput;
  rmq_schedule_offsets_path(store_dir, s->path, sizeof s->path);
  for (int i = 0; i < RMQ_MAX_DELAY_LEVELS; i++) {
    atomic_init(&s->offsets[i], offsets[i]);
    s->persisted[i] = offsets[i]; /* written once something is delivered */
  }
  rmq_service_thread_init(&s->thread, "ScheduleMessageService", schedule_run, s);
  rmq_service_thread_init(&s->persist_thread, "ScheduleMessageService.persist", persist_run, s);
  return s;
}

void rmq_schedule_wakeup(rmq_schedule_service *s) { rmq_service_thread_wakeup(&s->thread); }

static void wake_on_dispatch(void *ctx) { rmq_schedule_wakeup(ctx); }

int rmq_schedule_start(rmq_schedule_service *s, rmq_err *err) {
  int rc = rmq_service_thread_start(&s->thread, err);
  if (rc == RMQ_OK) rc = rmq_service_thread_start(&s->persist_thread, err);
  if (rc == RMQ_OK) rmq_reput_on_schedule(s->reput, wake_on_dispatch, s);
  return rc;
}

void rmq_schedule_free(rmq_schedule_service *s) {
  if (!s) return;
  rmq_reput_on_schedule(s->reput, NULL, NULL);
  rmq_service_thread_shutdown(&s->thread);
  rmq_service_thread_shutdown(&s->persist_thread);
  rmq_err err = {0};
  persist(s, &err);
  free(s->buf);
  free(s);
}

int64_t rmq_schedule_offset(rmq_schedule_service *s, int level) {
  return atomic_load(&s->offsets[level - 1]);
}

void rmq_schedule_offsets(rmq_schedule_service *s, int64_t *offsets) {
  for (int i = 0; i < RMQ_MAX_DELAY_LEVELS; i++) offsets[i] = atomic_load(&s->offsets[i]);
}

int64_t rmq_schedule_delivered(rmq_schedule_service *s) { return atomic_load(&s->delivered); }
int64_t rmq_schedule_dropped(rmq_schedule_service *s) { return atomic_load(&s->dropped); }

/* ---------------------------------------------------------------- listing */

static void property(const rmq_property_value *v, const char **p, size_t *len) {
  *p = v->value;
  *len = v->value ? v->len : 0;
}

/* Tell fn about an entry and the record it leads to. */
static int list_entry(rmq_commitlog *cl, int level, int64_t queue_offset, const rmq_cq_entry *e,
                      rmq_scheduled_fn fn, void *ctx) {
  static const char *const names[] = {RMQ_PROPERTY_REAL_TOPIC, RMQ_PROPERTY_REAL_QID,
                                      RMQ_PROPERTY_KEYS, RMQ_PROPERTY_UNIQ_KEY};
  rmq_commitlog_ref ref;
  rmq_message m;
  rmq_err ignored = {0};
  rmq_scheduled row = {.level = level,
                       .due_time = e->tags_code,
                       .queue_offset = queue_offset,
                       .commitlog_offset = e->phy_offset,
                       .real_queue_id = -1};
  if (rmq_commitlog_read_message(cl, e->phy_offset, false, &ref, &m, &ignored) != RMQ_OK) {
    return fn(ctx, &row);
  }
  rmq_property_value v[4];
  rmq_properties_find(m.properties, (size_t)m.properties_len, names, 4, v);
  property(&v[0], &row.real_topic, &row.real_topic_len);
  if (!parse_queue_id(&v[1], &row.real_queue_id)) row.real_queue_id = -1;
  property(&v[2], &row.keys, &row.keys_len);
  property(&v[3], &row.uniq_key, &row.uniq_key_len);
  int rc = fn(ctx, &row);
  rmq_commitlog_ref_release(&ref);
  return rc;
}

static int list_level(rmq_commitlog *cl, rmq_consume_queue *cq, const int64_t *offsets,
                      rmq_scheduled_fn fn, void *ctx) {
  rmq_cq_iter it;
  rmq_cq_entry e;
  int rc = RMQ_OK;
  int32_t level = cq->queue_id;
  rmq_cq_iter_start(&it, cq, level < RMQ_MAX_DELAY_LEVELS ? offsets[level] : 0);
  while (rc == RMQ_OK && rmq_cq_iter_next(&it, &e)) {
    rc = list_entry(cl, level + 1, it.offset - 1, &e, fn, ctx);
  }
  rmq_cq_iter_stop(&it);
  return rc;
}

static int cmp_queue_id(const void *a, const void *b) {
  const rmq_consume_queue *x = *(rmq_consume_queue *const *)a, *y = *(rmq_consume_queue *const *)b;
  return (x->queue_id > y->queue_id) - (x->queue_id < y->queue_id);
}

/*
** Where each level's undelivered messages start: the live service's
** offsets, or the file's; each queue's start when the file cannot be read (a
** listing shows more, never less, than waits).
*/
static void delivery_offsets(rmq_schedule_service *svc, const char *dir, rmq_cq_table *cqs,
                             int64_t *offsets) {
  char report[RMQ_SCHEDULE_REPORT_MAX];
  rmq_err ignored = {0};
  if (svc) {
    rmq_schedule_offsets(svc, offsets);
  } else {
    rmq_schedule_load_offsets(dir, cqs, offsets, report, sizeof report, &ignored);
  }
}

int rmq_schedule_list(rmq_schedule_service *svc, const char *dir, rmq_cq_table *cqs,
                      rmq_commitlog *cl, rmq_scheduled_fn fn, void *ctx, rmq_err *err) {
  rmq_consume_queue **all;
  int n, levels = 0;
  int64_t offsets[RMQ_MAX_DELAY_LEVELS];
  delivery_offsets(svc, dir, cqs, offsets);
  int rc = rmq_cq_table_snapshot(cqs, &all, &n, err);
  if (rc != RMQ_OK) return rc;
  for (int i = 0; i < n; i++) {
    if (strcmp(all[i]->topic, RMQ_SCHEDULE_TOPIC) == 0) all[levels++] = all[i];
  }
  qsort(all, (size_t)levels, sizeof *all, cmp_queue_id);
  for (int i = 0; rc == RMQ_OK && i < levels; i++) rc = list_level(cl, all[i], offsets, fn, ctx);
  free(all);
  if (rc != RMQ_OK) rmq_err_set(err, rc, "listing the delayed messages: %s", rmq_strerror(rc));
  return rc;
}
