/*
** store_filter.c: xFilter, xNext, xEof and xRowid of the rocketmq table:
** the plan that store_plan.c chose, run. The point reads (commitlog_offset
** or rowid = ?, msg_id = ?), the walks of the commit log (an offset range,
** or the whole log in physical order), and key look-ups in the index files
** (topic = ? AND key = ? or uniq_key = ?, each record re-checked) are
** here; the consume-queue plan is in store_cq.c. Before a consume-queue or
** index plan runs, and before any plan on a read-only store, it waits for
** the dispatcher, so a query sees every message whose INSERT returned
** before it started.
*/
#include <string.h>

#include "store_table.h"

/* Most candidates one key look-up reads (RocketMQ caps a query at 64). */
#define KEY_QUERY_MAX 1024

/* ---- point reads (offset=?, msgid) */

/* Load the record at offset into the cursor; false when no valid record is there. */
static bool load_record(store_cursor *c, int64_t offset) {
  return rmqx_store_read_record(c, offset) == RMQ_OK;
}

static int point_filter(store_cursor *c, int64_t offset) {
  c->eof = offset < 0 || !load_record(c, offset) || c->m.physical_offset != offset;
  return SQLITE_OK;
}

static int msgid_filter(store_cursor *c, const char *id) {
  rmq_host host;
  int64_t offset;
  if (!id || rmq_msg_id_parse(id, strlen(id), &host, &offset) != 0) {
    c->eof = true;
    return SQLITE_OK;
  }
  point_filter(c, offset);
  if (!c->eof && memcmp(&c->m.store_host, &host, sizeof host) != 0) c->eof = true;
  return SQLITE_OK;
}

/* ---- walks (offset range, scan) */

/*
** The next record of the walk, BLANKs skipped. An invalid record inside the
** written log is an error, never an end.
*/
static int walk_next(store_cursor *c) {
  rmq_commitlog_ref_release(&c->ref);
  rmq_commitlog_record rec;
  while (rmq_commitlog_iter_next(&c->walk, &rec)) {
    if (rmqx_store_record_expired(c) >= 0) break;
    if (rec.kind == RMQ_RECORD_BLANK) continue;
    if (rec.kind == RMQ_RECORD_DAMAGED) {
      rmqx_vtab_error(&c->vt->base,
                      "commit log offset %lld holds no valid record (%s): the "
                      "store is damaged; rocketmq_commitlog shows where",
                      (long long)rec.offset, rmq_decode_status_name(rec.status));
      return SQLITE_CORRUPT;
    }
    c->m = rec.m;
    c->props_found = false;
    return SQLITE_OK;
  }
  int64_t expired = rmqx_store_record_expired(c);
  if (expired >= 0) return rmqx_vtab_error(&c->vt->base, STORE_EXPIRED_MESSAGE, (long long)expired);
  c->eof = true;
  return SQLITE_OK;
}

static int walk_filter(store_cursor *c, filter_args *a) {
  range r = {INT64_MIN, INT64_MAX}, ts = rmqx_store_time_range(a);
  rmqx_store_range_narrow(&r, SQLITE_INDEX_CONSTRAINT_GE, a->v[S_OFF_GE]);
  rmqx_store_range_narrow(&r, SQLITE_INDEX_CONSTRAINT_GT, a->v[S_OFF_GT]);
  rmqx_store_range_narrow(&r, SQLITE_INDEX_CONSTRAINT_LE, a->v[S_OFF_LE]);
  rmqx_store_range_narrow(&r, SQLITE_INDEX_CONSTRAINT_LT, a->v[S_OFF_LT]);
  if (ts.lo >= ts.hi || r.lo >= r.hi) {
    c->eof = true;
    return SQLITE_OK;
  }
  /* The walk starts at the segment that holds r.lo, or that can hold ts.lo when later. */
  rmq_commitlog_iter_start(&c->walk, c->vt->store, r.lo, r.hi, ts.lo, RMQ_CL_ITER_STRICT);
  return walk_next(c);
}

/* ---- key look-ups */

/* Look up the key of the current (topic, key) pair. */
static int key_lookup(store_cursor *c) {
  const char *topic = (const char *)sqlite3_value_text(c->topics.v[c->pair / c->inner.n]);
  c->key = (const char *)sqlite3_value_text(c->inner.v[c->pair % c->inner.n]);
  if (!topic || !c->key) return SQLITE_NOMEM;
  c->ioffset = 0;
  rmq_err err = {0};
  if (rmq_store_query_key(c->vt->store, topic, c->key, c->key_begin, c->key_end, KEY_QUERY_MAX,
                          c->offsets, &c->noffsets, &err) != RMQ_OK) {
    return rmqx_vtab_error(&c->vt->base, "%s", err.msg);
  }
  return SQLITE_OK;
}

/*
** Was the record found for an earlier key of its topic's pairs? A message
** with keys a and b is one row of `key IN (a, b)`, not two.
*/
static bool found_before(store_cursor *c) {
  if (c->plan != PLAN_KEY) return false;
  for (int k = 0; k < c->pair % c->inner.n; k++) {
    sqlite3_value *v = c->inner.v[k];
    const char *key = (const char *)sqlite3_value_text(v);
    if (key && rmq_properties_have_key(c->m.properties, (size_t)c->m.properties_len, key,
                                       (size_t)sqlite3_value_bytes(v))) {
      return true;
    }
  }
  return false;
}

/* The next record found for the current pair's key, then for the next pair's. */
static int key_next(store_cursor *c) {
  rmq_commitlog_ref_release(&c->ref);
  for (;;) {
    while (c->ioffset < c->noffsets) {
      if (!load_record(c, c->offsets[c->ioffset++])) continue;
      if (!found_before(c)) return SQLITE_OK;
      rmq_commitlog_ref_release(&c->ref);
    }
    if (++c->pair >= c->topics.n * c->inner.n) break;
    int rc = key_lookup(c);
    if (rc != SQLITE_OK) return rc;
  }
  c->eof = true;
  return SQLITE_OK;
}

/*
** A key look-up: the store_timestamp bounds go to the index as [begin, end]
** (IndexService.queryOffset), so that KEY_QUERY_MAX counts only records in them.
*/
static int key_filter(store_cursor *c, filter_args *a, int idx) {
  int rc = rmqx_store_list_collect(&c->topics, a, S_TOPIC, idx, IN_TOPIC);
  if (rc == SQLITE_OK) {
    rc = rmqx_store_list_collect(&c->inner, a, c->plan == PLAN_KEY ? S_KEY : S_UNIQ, idx, IN_KEY);
  }
  if (rc == SQLITE_OK) rc = rmqx_store_wait_dispatched(c);
  if (rc != SQLITE_OK) return rc;
  range ts = rmqx_store_time_range(a);
  rmqx_store_range_narrow(&ts, SQLITE_INDEX_CONSTRAINT_LE, a->v[S_TS_LE]);
  rmqx_store_range_narrow(&ts, SQLITE_INDEX_CONSTRAINT_LT, a->v[S_TS_LT]);
  c->key_begin = ts.lo < 0 ? 0 : ts.lo;
  c->key_end = ts.hi == INT64_MAX ? INT64_MAX : ts.hi - 1;
  if (c->topics.n == 0 || c->inner.n == 0 || ts.lo >= ts.hi) {
    c->eof = true;
    return SQLITE_OK;
  }
  c->offsets = sqlite3_malloc(KEY_QUERY_MAX * (int)sizeof *c->offsets);
  if (!c->offsets) return SQLITE_NOMEM;
  rc = key_lookup(c);
  return rc == SQLITE_OK ? key_next(c) : rc;
}

/* ---- xFilter, xNext, xEof, xRowid */

/* xFilter's argv by slot: the constraints in the order xBestIndex numbered them. */
static filter_args args_by_slot(int idx_num, int argc, sqlite3_value **argv) {
  filter_args a = {.limit = NULL};
  int i = 0;
  for (int s = 0; s < S_COUNT && i < argc; s++) {
    if (idx_num & BIT(s)) a.v[s] = argv[i++];
  }
  if ((idx_num & USE_LIMIT) && i < argc) a.limit = argv[i++];
  if ((idx_num & USE_OFFSET) && i < argc) a.offset = argv[i++];
  return a;
}

static const char *arg_text(filter_args *a, int s) {
  return a->v[s] ? (const char *)sqlite3_value_text(a->v[s]) : NULL;
}

int rmqx_store_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str, int argc,
                      sqlite3_value **argv) {
  (void)idx_str;
  store_cursor *c = (store_cursor *)base;
  rmqx_store_cursor_reset(c);
  int rc = rmqx_store_plan_check(base->pVtab, idx_num);
  if (rc == SQLITE_OK) rc = store_ready(c->vt);
  if (rc != SQLITE_OK) return rc;
  /*
  ** A read-only store reads what another process wrote since the last
  ** query, as far as that process's dispatcher got (rmq_store_wait_dispatched).
  */
  if (rmq_store_config(c->vt->store)->readonly) {
    rc = rmqx_store_wait_dispatched(c);
    if (rc != SQLITE_OK) return rc;
  }
  c->eof = false;
  filter_args a = args_by_slot(idx_num, argc, argv);
  int use = idx_num;
  c->plan = rmqx_store_choose_plan(idx_num, &use);
  switch (c->plan) {
    case PLAN_OFFSET: return point_filter(c, rmqx_store_arg_int(&a, S_OFFSET_EQ, -1));
    case PLAN_MSGID: return msgid_filter(c, arg_text(&a, S_MSGID));
    case PLAN_KEY:
    case PLAN_UNIQ: return key_filter(c, &a, idx_num);
    case PLAN_CQ: return rmqx_store_cq_filter(c, &a, idx_num);
    default: return walk_filter(c, &a);
  }
}

int rmqx_store_next(sqlite3_vtab_cursor *base) {
  store_cursor *c = (store_cursor *)base;
  switch (c->plan) {
    case PLAN_OFFSET:
    case PLAN_MSGID:
      rmq_commitlog_ref_release(&c->ref);
      c->eof = true;
      return SQLITE_OK;
    case PLAN_KEY:
    case PLAN_UNIQ: return key_next(c);
    case PLAN_CQ: return rmqx_store_cq_next(c);
    default: return walk_next(c);
  }
}

int rmqx_store_eof(sqlite3_vtab_cursor *base) { return ((store_cursor *)base)->eof; }

int rmqx_store_rowid(sqlite3_vtab_cursor *base, sqlite3_int64 *rowid) {
  *rowid = ((store_cursor *)base)->m.physical_offset;
  return SQLITE_OK;
}
