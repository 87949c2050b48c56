/*
** store_cq.c: the consume-queue plan of the rocketmq table ("cq" in
** store_plan.c): topic = ? AND queue_id = ?, each an IN list or one value,
** read queue by queue from the first wanted queue offset (after the time
** search of store_timestamp >= ?), through the index entries of the
** consume queue to their records in the commit log.
**
** tags = ? matches an entry's tag hash first, then the record's tags
** themselves. LIMIT and OFFSET, when the plan takes them, count the rows
** SQLite keeps: an entry is skipped unread only when nothing but its record
** could reject it. An entry whose record expired before the queue's min
** offset moved past it is skipped, as RocketMQ's getMessage does. A record
** reached through a light message queue shows as that queue's message.
**
** wait_ms = ? is a long poll, as RocketMQ holds a pull request: while the
** query has returned no row, the end of the queue waits up to wait_ms for
** more, in slices of WAIT_SLICE_MS, and sqlite3_interrupt() ends the wait
** with SQLITE_INTERRUPT.
*/
#include <string.h>

#include "store_table.h"

/* How long a long poll sleeps between two looks for sqlite3_interrupt(). */
#define WAIT_SLICE_MS 50

/*
** SQLITE_INTERRUPT once sqlite3_interrupt() was called on the connection.
** SQLite 3.40 has no call that asks (sqlite3_is_interrupted is 3.41), but
** it documents that a statement started after sqlite3_interrupt(), while
** others still run, is interrupted: so a trivial statement is stepped. This
** works the same on every version.
*/
static int check_interrupt(store_cursor *c) {
  sqlite3 *db = c->vt->db;
  if (!c->probe && sqlite3_prepare_v2(db, "SELECT 1", -1, &c->probe, NULL) != SQLITE_OK) {
    return rmqx_vtab_error(&c->vt->base, "%s", sqlite3_errmsg(db));
  }
  int rc = sqlite3_step(c->probe);
  sqlite3_reset(c->probe);
  return rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/*
** Long poll, as RocketMQ holds a pull request: while the query has returned
** no row, sleep until the queue grows past next_offset (*grew) or the
** deadline passes. It sleeps in slices of WAIT_SLICE_MS and stops with
** SQLITE_INTERRUPT when the connection is interrupted. A read-only engine
** waits for the process that writes the store (rmq_store_wait_queue).
*/
static int wait_for_arrival(store_cursor *c, bool *grew) {
  *grew = false;
  rmq_store *s = c->vt->store;
  if (c->found || c->deadline == 0) return SQLITE_OK;
  for (int64_t now = rmq_monotonic_ms(); now < c->deadline && !*grew; now = rmq_monotonic_ms()) {
    int64_t until = c->deadline - now > WAIT_SLICE_MS ? now + WAIT_SLICE_MS : c->deadline;
    *grew = rmq_store_wait_queue(s, c->topic, c->queue_id, c->next_offset, until);
    /* Also after an arrival: messages the tags filter rejects can keep coming. */
    int rc = check_interrupt(c);
    if (rc != SQLITE_OK) return rc;
  }
  if (*grew && !c->cq) c->cq = rmq_store_find_queue(s, c->topic, c->queue_id);
  return SQLITE_OK;
}

/*
** Whether a consume-queue entry points below the commit log's first
** segment: expiry deleted its record before CleanConsumeQueueService moved
** the queue's min offset past it. The reader skips it, as RocketMQ's
** getMessage does (MESSAGE_WAS_REMOVING).
*/
static bool expired(store_cursor *c, int64_t phy_offset) {
  if (phy_offset < c->cl_min) return true;
  c->cl_min = rmq_store_min_offset(c->vt->store); /* the next entries of the segment need not ask */
  return phy_offset < c->cl_min;
}

/* The index in tags of a wanted tag whose hash is code, from k on; -1 if none. */
static int tags_code_at(const store_cursor *c, int k, int64_t code) {
  for (; k < c->tags.n; k++) {
    if (c->tags_codes[k] == code) return k;
  }
  return -1;
}

/*
** Whether the entry's tagsCode is a ConsumeQueueExt address (rmq_cq_ext_addr).
** Not in SCHEDULE_TOPIC_XXXX, whose tagsCode is a due time that the entry
** check and verify hold to.
*/
static bool entry_ext_addr(const store_cursor *c, const rmq_cq_entry *e) {
  return rmq_cq_ext_addr(e->tags_code) && strcmp(c->topic, RMQ_SCHEDULE_TOPIC) != 0;
}

/*
** Whether the current record's tags are one of the wanted ones as SQLite
** compares them: the same bytes, read as TEXT (tags that are not UTF-8
** read as a BLOB, which equals no text). The hash alone can collide, and
** a LIMIT must count only rows SQLite keeps.
*/
static bool tags_match(store_cursor *c, const rmq_cq_entry *e) {
  int64_t code = e->tags_code;
  const rmq_property_value *v = rmqx_store_property(c, PROP_TAGS);
  if (!v->value || !rmqx_utf8_valid((const uint8_t *)v->value, v->len)) return false;
  /* An extension address says nothing of the tags: every wanted one is compared. */
  bool ext = entry_ext_addr(c, e);
  for (int k = ext ? 0 : tags_code_at(c, 0, code); k >= 0 && k < c->tags.n;
       k = ext ? k + 1 : tags_code_at(c, k + 1, code)) {
    sqlite3_value *t = c->tags.v[k];
    const unsigned char *text = sqlite3_value_text(t);
    if (text && (size_t)sqlite3_value_bytes(t) == v->len && memcmp(text, v->value, v->len) == 0) {
      return true;
    }
  }
  return false;
}

/*
** An OFFSET skips an entry without reading its record when nothing but
** the record could reject it (no tags, no time bound) and it points at or
** above the commit log's first offset (cl_min, taken when the read began).
*/
static bool skip_unread(const store_cursor *c, const rmq_cq_entry *e) {
  return c->skip > 0 && !c->has_tags && c->ts_lo == INT64_MIN && e->phy_offset >= c->cl_min;
}

/* Read the queue of the current (topic, queue id) pair from its first wanted offset. */
static int cq_open_pair(store_cursor *c) {
  c->topic = (const char *)sqlite3_value_text(c->topics.v[c->pair / c->inner.n]);
  c->queue_id = (int32_t)sqlite3_value_int64(c->inner.v[c->pair % c->inner.n]);
  if (!c->topic) return SQLITE_NOMEM;
  c->cq = rmq_store_find_queue(c->vt->store, c->topic, c->queue_id);
  c->next_offset = c->qoff_lo;
  if (c->cq && c->ts_lo > INT64_MIN && c->qoff_lo < c->qoff_end) {
    int64_t at;
    rmq_err err = {0};
    if (rmq_store_queue_offset_at_time(c->vt->store, c->topic, c->queue_id, c->ts_lo, &at, &err) !=
        RMQ_OK) {
      return rmqx_vtab_error(&c->vt->base, "%s", err.msg);
    }
    if (at > c->next_offset) c->next_offset = at;
  }
  return SQLITE_OK;
}

/*
** Read the record of a consume-queue entry whose tag hash matched; *row:
** whether it is a row to return, not one that expired, does not match or
** is skipped by OFFSET. SQLITE_CORRUPT when no valid record is there.
*/
static int cq_entry_row(store_cursor *c, const rmq_cq_entry *e, bool *row) {
  *row = false;
  int rc = rmqx_store_read_record(c, e->phy_offset);
  if (rc == RMQ_ENOTFOUND && expired(c, e->phy_offset)) return SQLITE_OK;
  if (rc != RMQ_OK) {
    rmqx_vtab_error(&c->vt->base,
                    "consume queue %s/%d entry %lld points at commit log offset "
                    "%lld, where no valid record is",
                    c->topic, c->queue_id, (long long)(c->it.offset - 1), (long long)e->phy_offset);
    return SQLITE_CORRUPT;
  }
  rmq_err err = {0};
  if (rmq_store_check_entry(c->vt->store, c->topic, c->queue_id, c->it.offset - 1, e, &c->m,
                            &err) != RMQ_OK) {
    rmqx_vtab_error(&c->vt->base, "%s", err.msg);
    return SQLITE_CORRUPT;
  }
  if (c->m.queue_id != c->queue_id || (size_t)c->m.topic_len != strlen(c->topic) ||
      memcmp(c->m.topic, c->topic, (size_t)c->m.topic_len) != 0) {
    /* Through a light message queue: the row is the message as that queue's consumer sees it. */
    c->m.topic = c->topic;
    c->m.topic_len = (int32_t)strlen(c->topic);
    c->m.queue_id = c->queue_id;
    c->m.queue_offset = c->it.offset - 1;
  }
  if (c->has_tags && !tags_match(c, e)) return SQLITE_OK;
  if (c->m.store_timestamp < c->ts_lo) return SQLITE_OK; /* stored while the clock went back */
  if (c->skip > 0) {
    c->skip--;
    return SQLITE_OK;
  }
  *row = true;
  return SQLITE_OK;
}

/*
** The next consume-queue entry in [it.offset, qoff_end) whose tags match,
** with its record, past OFFSET and within LIMIT; then the next pair's
** queue. At the end of the queue, a query with wait_ms that found nothing
** yet waits for more.
*/
int rmqx_store_cq_next(store_cursor *c) {
  rmq_commitlog_ref_release(&c->ref);
  while (c->limit != 0) {
    rmq_cq_entry e;
    if (!c->iterating && c->cq) {
      rmq_cq_iter_start(&c->it, c->cq, c->next_offset);
      c->iterating = true;
    }
    if (c->iterating && c->it.offset < c->qoff_end && rmq_cq_iter_next(&c->it, &e)) {
      c->next_offset = c->it.offset;
      if (c->has_tags && !entry_ext_addr(c, &e) && tags_code_at(c, 0, e.tags_code) < 0) continue;
      if (skip_unread(c, &e)) {
        c->skip--;
        continue;
      }
      bool row;
      int rc = cq_entry_row(c, &e, &row);
      if (rc != SQLITE_OK) return rc;
      if (!row) continue;
      if (c->limit > 0) c->limit--;
      return c->found = true, SQLITE_OK;
    }
    if (c->iterating) rmq_cq_iter_stop(&c->it);
    c->iterating = false;
    /* A damaged queue ends early: what it would hold past there is not known. */
    if (c->cq && rmq_cq_damage(c->cq) && c->next_offset < c->qoff_end) {
      rmqx_vtab_error(&c->vt->base, "%s", rmq_cq_damage(c->cq));
      return SQLITE_CORRUPT;
    }
    bool grew = false;
    if (c->next_offset < c->qoff_end) {
      int rc = wait_for_arrival(c, &grew);
      if (rc != SQLITE_OK) return rc;
    }
    if (grew) continue;
    if (++c->pair >= c->topics.n * c->inner.n) break;
    int rc = cq_open_pair(c);
    if (rc != SQLITE_OK) return rc;
  }
  c->eof = true;
  return SQLITE_OK;
}

/* The wanted tags and their hash codes. */
static int cq_tags(store_cursor *c, filter_args *a, int idx) {
  c->has_tags = idx & BIT(S_TAGS);
  int rc = rmqx_store_list_collect(&c->tags, a, S_TAGS, idx, IN_TAGS);
  if (rc != SQLITE_OK || c->tags.n == 0) return rc;
  c->tags_codes = sqlite3_malloc64((sqlite3_uint64)c->tags.n * sizeof *c->tags_codes);
  if (!c->tags_codes) return SQLITE_NOMEM;
  for (int k = 0; k < c->tags.n; k++) {
    const char *t = (const char *)sqlite3_value_text(c->tags.v[k]);
    if (!t) return SQLITE_NOMEM;
    c->tags_codes[k] = rmq_tags_code(t, (size_t)sqlite3_value_bytes(c->tags.v[k]));
  }
  return SQLITE_OK;
}

/* LIMIT and OFFSET (a negative LIMIT is none, as in SQLite), and the log's start for OFFSET. */
static void cq_limit(store_cursor *c, filter_args *a) {
  c->limit = a->limit ? sqlite3_value_int64(a->limit) : -1;
  if (c->limit < 0) c->limit = -1;
  c->skip = a->offset ? sqlite3_value_int64(a->offset) : 0;
  if (c->skip < 0) c->skip = 0;
  if (c->skip > 0) c->cl_min = rmq_store_min_offset(c->vt->store);
}

int rmqx_store_cq_filter(store_cursor *c, filter_args *a, int idx) {
  int rc = rmqx_store_wait_dispatched(c);
  if (rc == SQLITE_OK) rc = rmqx_store_list_collect(&c->topics, a, S_TOPIC, idx, IN_TOPIC);
  if (rc == SQLITE_OK) rc = rmqx_store_list_collect(&c->inner, a, S_QUEUE, idx, IN_QUEUE);
  if (rc == SQLITE_OK) rc = cq_tags(c, a, idx);
  if (rc != SQLITE_OK) return rc;
  cq_limit(c, a);
  range q = {0, INT64_MAX}, ts = rmqx_store_time_range(a);
  rmqx_store_range_narrow(&q, SQLITE_INDEX_CONSTRAINT_EQ, a->v[S_QOFF_EQ]);
  rmqx_store_range_narrow(&q, SQLITE_INDEX_CONSTRAINT_GE, a->v[S_QOFF_GE]);
  rmqx_store_range_narrow(&q, SQLITE_INDEX_CONSTRAINT_GT, a->v[S_QOFF_GT]);
  rmqx_store_range_narrow(&q, SQLITE_INDEX_CONSTRAINT_LE, a->v[S_QOFF_LE]);
  rmqx_store_range_narrow(&q, SQLITE_INDEX_CONSTRAINT_LT, a->v[S_QOFF_LT]);
  if (ts.lo >= ts.hi) q.hi = q.lo;
  c->qoff_lo = q.lo;
  c->qoff_end = q.hi;
  c->ts_lo = ts.lo;
  if (c->topics.n == 0 || c->inner.n == 0 || (c->has_tags && c->tags.n == 0)) {
    c->eof = true;
    return SQLITE_OK;
  }
  /* wait_ms is capped at 2^31 ms (24 days) so that the deadline cannot overflow */
  int64_t wait_ms = rmqx_store_arg_int(a, S_WAIT, 0);
  if (wait_ms > 0) c->deadline = rmq_monotonic_ms() + (wait_ms > INT32_MAX ? INT32_MAX : wait_ms);
  rc = cq_open_pair(c);
  return rc == SQLITE_OK ? rmqx_store_cq_next(c) : rc;
}
