/*
** store_cursor.c: the cursor of the rocketmq table (vtab_store.c) and what
** every plan reads through: xOpen and xClose; the record the cursor is on,
** read from the commit log, with the properties the columns show, found
** when first asked for; the wait for the dispatcher; xFilter's arguments
** as the plans take them, IN lists as value lists and bounds as ranges.
** store_filter.c runs the plans.
**
** Expiry. A cursor keeps reading a segment that expiry deletes under it
** until it lets go; one that holds it longer than clean_grace_ms gets an
** error for its row ("the segment holding offset N was deleted by expiry
** while this cursor held it"), never the zeros that replace it.
*/
#include <string.h>

#include "store_table.h"

/* The properties the columns show, by PROP_*. */
static const char *const shown_properties[PROP_COUNT] = {RMQ_PROPERTY_UNIQ_KEY, RMQ_PROPERTY_TAGS,
                                                         RMQ_PROPERTY_KEYS, RMQ_PROPERTY_DELAY};

int rmqx_store_open(sqlite3_vtab *base, sqlite3_vtab_cursor **out) {
  store_cursor *c = sqlite3_malloc(sizeof *c);
  if (!c) return SQLITE_NOMEM;
  memset(c, 0, sizeof *c);
  c->vt = (store_vtab *)base;
  *out = &c->base;
  return SQLITE_OK;
}

static void list_free(value_list *l) {
  for (int i = 0; i < l->n; i++) sqlite3_value_free(l->v[i]);
  sqlite3_free(l->v);
  memset(l, 0, sizeof *l);
}

void rmqx_store_cursor_reset(store_cursor *c) {
  rmq_commitlog_ref_release(&c->ref);
  rmqx_body_free(&c->body);
  rmq_commitlog_iter_stop(&c->walk);
  if (c->iterating) rmq_cq_iter_stop(&c->it);
  c->iterating = false;
  list_free(&c->topics);
  list_free(&c->inner);
  list_free(&c->tags);
  sqlite3_free(c->tags_codes);
  sqlite3_free(c->offsets);
  c->topic = c->key = NULL;
  c->tags_codes = NULL;
  c->has_tags = false;
  c->pair = 0;
  c->offsets = NULL;
  c->noffsets = c->ioffset = 0;
  c->cq = NULL;
  c->cl_min = 0;
  c->deadline = 0;
  sqlite3_finalize(c->probe);
  c->probe = NULL;
  c->found = false;
  c->eof = true;
}

int rmqx_store_close(sqlite3_vtab_cursor *base) {
  rmqx_store_cursor_reset((store_cursor *)base);
  rmqx_body_done(&((store_cursor *)base)->body);
  sqlite3_free(base);
  return SQLITE_OK;
}

/* ---- the record the cursor is on */

int rmqx_store_read_record(store_cursor *c, int64_t offset) {
  rmq_commitlog_ref_release(&c->ref);
  c->props_found = false;
  rmq_err err = {0};
  return rmq_store_read(c->vt->store, offset, &c->ref, &c->m, &err);
}

const rmq_property_value *rmqx_store_property(store_cursor *c, int which) {
  if (!c->props_found) {
    rmq_properties_find(c->m.properties, (size_t)c->m.properties_len, shown_properties, PROP_COUNT,
                        c->props);
    c->props_found = true;
  }
  return &c->props[which];
}

/*
** A cursor that held a deleted segment longer than clean_grace_ms reads
** zeros there: its row is an error, never those bytes. -1 while sound, else
** an offset in the segment taken away.
*/
int64_t rmqx_store_record_expired(const store_cursor *c) {
  if (c->plan == PLAN_SCAN || c->plan == PLAN_RANGE) return rmq_commitlog_iter_expired(&c->walk);
  return rmq_commitlog_ref_valid(&c->ref) ? -1 : c->m.physical_offset;
}

int rmqx_store_wait_dispatched(store_cursor *c) {
  rmq_err err = {0};
  if (rmq_store_wait_dispatched(c->vt->store, &err) != RMQ_OK) {
    return rmqx_vtab_error(&c->vt->base, "%s", err.msg);
  }
  return SQLITE_OK;
}

/* ---- xFilter's arguments */

int64_t rmqx_store_arg_int(filter_args *a, int s, int64_t dflt) {
  return a->v[s] ? sqlite3_value_int64(a->v[s]) : dflt;
}

/*
** Whether v can equal the column of slot s: NULL equals nothing, a BLOB no
** TEXT column (key has no column: it is looked up as text), and queue_id
** holds integers from 0 to 2^31 - 1. A value that cannot match is left
** out, so that values that read alike (1 and 1.5, 0 and 'x') never make
** one queue be read twice. The engine takes a topic or key as a C string:
** one holding a NUL byte would be looked up cut short there ('k' for
** 'k' || char(0) || 'x', and a key is not checked again), and no topic
** holds one.
*/
static bool can_match(int s, sqlite3_value *v) {
  int64_t q;
  int type = sqlite3_value_type(v), nul_at = -1;
  if (type == SQLITE_NULL) return false;
  if (s == S_QUEUE) return rmqx_value_integer(v, &q) && q >= 0 && q <= INT32_MAX;
  if (type == SQLITE_BLOB && s != S_KEY) return false;
  if (s == S_TOPIC || s == S_KEY) rmqx_value_cstr(v, &nul_at);
  return nul_at < 0;
}

static int list_add(value_list *l, int s, sqlite3_value *v) {
  if (!can_match(s, v)) return SQLITE_OK;
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 4;
    sqlite3_value **grown = sqlite3_realloc64(l->v, (sqlite3_uint64)cap * sizeof *grown);
    if (!grown) return SQLITE_NOMEM;
    l->v = grown;
    l->cap = cap;
  }
  if ((l->v[l->n] = sqlite3_value_dup(v)) == NULL) return SQLITE_NOMEM;
  l->n++;
  return SQLITE_OK;
}

int rmqx_store_list_collect(value_list *l, filter_args *a, int s, int idx, int in) {
  sqlite3_value *arg = a->v[s], *v;
  if (!arg) return SQLITE_OK;
  if (!(idx & in)) return list_add(l, s, arg);
  int rc;
  for (rc = sqlite3_vtab_in_first(arg, &v); rc == SQLITE_OK; rc = sqlite3_vtab_in_next(arg, &v)) {
    int added = list_add(l, s, v);
    if (added != SQLITE_OK) return added;
  }
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

void rmqx_store_range_narrow(range *r, int op, sqlite3_value *v) {
  if (!v) return;
  rmqx_bounds b = {INT64_MIN, INT64_MAX};
  rmqx_bounds_narrow(&b, op, v);
  if (b.lo > b.hi) {
    r->hi = INT64_MIN; /* nothing matches */
    return;
  }
  if (b.lo > r->lo) r->lo = b.lo;
  if (b.hi < INT64_MAX && b.hi + 1 < r->hi) r->hi = b.hi + 1;
}

range rmqx_store_time_range(filter_args *a) {
  range ts = {INT64_MIN, INT64_MAX};
  rmqx_store_range_narrow(&ts, SQLITE_INDEX_CONSTRAINT_GE, a->v[S_TS_GE]);
  rmqx_store_range_narrow(&ts, SQLITE_INDEX_CONSTRAINT_GT, a->v[S_TS_GT]);
  return ts;
}
