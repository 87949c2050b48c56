/*
** vtab_scheduled.c: rocketmq_scheduled, the delayed messages of a store not
** yet delivered, read-only.
**
** Usage:
**
**    SELECT * FROM rocketmq_scheduled('path/to/store');
**    SELECT level, count(*), min(due_time) FROM rocketmq_scheduled('path/to/store') GROUP BY level;
**
** An eponymous, table-valued, read-only virtual table whose HIDDEN column
** dir, the argument, is required ("rocketmq_scheduled: missing argument
** dir; use rocketmq_scheduled('path/to/store')"). Like the other companion
** tables it reads the live store when this process has it open, and
** otherwise the files opened read-only (a RocketMQ broker's store too); it is
** SQLITE_VTAB_DIRECTONLY.
**
** Columns, one row per message waiting in SCHEDULE_TOPIC_XXXX, ordered by
** level and queue_offset:
**
**    level             the delay level (the schedule queue's id + 1)
**    due_time          when it is delivered, ms since the epoch (the
**                      consume-queue entry's tags code)
**    queue_offset      its offset in SCHEDULE_TOPIC_XXXX queue level-1
**    commitlog_offset  the delayed record's offset
**    real_topic        REAL_TOPIC: where it goes
**    real_queue_id     REAL_QID
**    keys, uniq_key    its KEYS and UNIQ_KEY properties
**
** On a live store the rows start at each level's delivery offset (what the
** ScheduleMessageService has not put back yet); on a store read from its
** files, at each queue's start. A record that has expired shows NULL in
** the columns read from it.
**
** How it works: xFilter lists every row once (rmq_store_scheduled) into a
** snapshot, after the dispatcher caught up. idxNum is 1 when dir was given
** and 0 for the plan without it, which fails in xFilter; idxStr is
** "scheduled" or "no dir".
*/
#include <stdlib.h>
#include <string.h>

#include "rmq_ext.h"

#define SC_SCHEMA                                                                          \
  "CREATE TABLE x(level INTEGER, due_time INTEGER, queue_offset INTEGER,"                  \
  " commitlog_offset INTEGER, real_topic TEXT, real_queue_id INTEGER, keys TEXT, uniq_key" \
  " TEXT, dir HIDDEN)"

enum {
  COL_LEVEL,
  COL_DUE,
  COL_QUEUE_OFFSET,
  COL_CL_OFFSET,
  COL_REAL_TOPIC,
  COL_REAL_QID,
  COL_KEYS,
  COL_UNIQ_KEY,
  COL_DIR
};

typedef struct sc_row {
  int level;
  int64_t due, queue_offset, cl_offset;
  int32_t real_qid;
  char *real_topic, *keys, *uniq_key; /* NULL when absent */
} sc_row;

typedef struct sc_cursor {
  sqlite3_vtab_cursor base;
  rmqx_tvf_dir src;
  sc_row *rows;
  int n, cap, i;
} sc_cursor;

static int sc_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  bool ready;
  int rc = rmqx_tvf_best_index(vt, info, &ready);
  if (rc != SQLITE_OK) return rc;
  info->estimatedRows = 1000;
  if (!ready) return SQLITE_OK;
  info->idxStr = "scheduled";
  info->estimatedCost = 10000;
  return SQLITE_OK;
}

static int sc_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  (void)vt;
  return rmqx_tvf_cursor_new(sizeof(sc_cursor), out) ? SQLITE_OK : SQLITE_NOMEM;
}

static void clear_rows(sc_cursor *c) {
  for (int i = 0; i < c->n; i++) {
    sqlite3_free(c->rows[i].real_topic);
    sqlite3_free(c->rows[i].keys);
    sqlite3_free(c->rows[i].uniq_key);
  }
  sqlite3_free(c->rows);
  rmqx_tvf_dir_close(&c->src);
  c->rows = NULL;
  c->n = c->cap = c->i = 0;
}

static int sc_close(sqlite3_vtab_cursor *cur) {
  clear_rows((sc_cursor *)cur);
  sqlite3_free(cur);
  return SQLITE_OK;
}

/* A copy of len bytes at p (NULL stays NULL); *ok turns false when out of memory. */
static char *copy(const char *p, size_t len, bool *ok) {
  if (!p) return NULL;
  char *s = sqlite3_malloc64(len + 1);
  if (!s) {
    *ok = false;
    return NULL;
  }
  memcpy(s, p, len);
  s[len] = '\0';
  return s;
}

static int add_row(void *ctx, const rmq_scheduled *m) {
  sc_cursor *c = ctx;
  if (c->n == c->cap) {
    int cap = c->cap ? c->cap * 2 : 64;
    sc_row *rows = sqlite3_realloc64(c->rows, (sqlite3_uint64)cap * sizeof *rows);
    if (!rows) return RMQ_ENOMEM;
    c->rows = rows;
    c->cap = cap;
  }
  bool ok = true;
  c->rows[c->n++] = (sc_row){.level = m->level,
                             .due = m->due_time,
                             .queue_offset = m->queue_offset,
                             .cl_offset = m->commitlog_offset,
                             .real_qid = m->real_queue_id,
                             .real_topic = copy(m->real_topic, m->real_topic_len, &ok),
                             .keys = copy(m->keys, m->keys_len, &ok),
                             .uniq_key = copy(m->uniq_key, m->uniq_key_len, &ok)};
  return ok ? RMQ_OK : RMQ_ENOMEM;
}

/* The pending delayed messages into c->rows. */
static int list_scheduled(void *ctx, rmqx_reader *r) {
  rmq_err err = {0};
  return rmq_store_scheduled(r->store, add_row, ctx, &err) == RMQ_OK ? SQLITE_OK : SQLITE_NOMEM;
}

static int sc_filter(sqlite3_vtab_cursor *cur, int idx, const char *idx_str, int argc,
                     sqlite3_value **argv) {
  (void)idx_str;
  sc_cursor *c = (sc_cursor *)cur;
  clear_rows(c);
  return rmqx_tvf_dir_snapshot(&c->src, cur->pVtab, idx, argc, argv, true, list_scheduled, c);
}

static int sc_next(sqlite3_vtab_cursor *cur) {
  ((sc_cursor *)cur)->i++;
  return SQLITE_OK;
}

static int sc_eof(sqlite3_vtab_cursor *cur) {
  sc_cursor *c = (sc_cursor *)cur;
  return c->i >= c->n;
}

static int sc_rowid(sqlite3_vtab_cursor *cur, sqlite_int64 *rowid) {
  *rowid = ((sc_cursor *)cur)->i + 1;
  return SQLITE_OK;
}

static void result_text(sqlite3_context *ctx, const char *s) {
  if (s) rmqx_result_text_or_blob(ctx, s, -1, SQLITE_TRANSIENT);
}

static int sc_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col) {
  sc_cursor *c = (sc_cursor *)cur;
  const sc_row *r = &c->rows[c->i];
  switch (col) {
    case COL_LEVEL: sqlite3_result_int(ctx, r->level); break;
    case COL_DUE: sqlite3_result_int64(ctx, r->due); break;
    case COL_QUEUE_OFFSET: sqlite3_result_int64(ctx, r->queue_offset); break;
    case COL_CL_OFFSET: sqlite3_result_int64(ctx, r->cl_offset); break;
    case COL_REAL_TOPIC: result_text(ctx, r->real_topic); break;
    case COL_REAL_QID:
      if (r->real_qid >= 0) sqlite3_result_int(ctx, r->real_qid);
      break;
    case COL_KEYS: result_text(ctx, r->keys); break;
    case COL_UNIQ_KEY: result_text(ctx, r->uniq_key); break;
    case COL_DIR: sqlite3_result_text(ctx, c->src.dir, -1, SQLITE_TRANSIENT); break;
  }
  return SQLITE_OK;
}

static sqlite3_module sc_module = {
    .iVersion = 0,
    .xConnect = rmqx_tvf_connect,
    .xBestIndex = sc_best_index,
    .xDisconnect = rmqx_tvf_disconnect,
    .xOpen = sc_open,
    .xClose = sc_close,
    .xFilter = sc_filter,
    .xNext = sc_next,
    .xEof = sc_eof,
    .xColumn = sc_column,
    .xRowid = sc_rowid,
};

static const char *const sc_args[] = {"dir"};

static const rmqx_tvf sc_tvf = {
    .name = "rocketmq_scheduled",
    .schema = SC_SCHEMA,
    .arg_col = COL_DIR,
    .n_args = 1,
    .n_required = 1,
    .arg_names = sc_args,
    .usage = "rocketmq_scheduled('path/to/store')",
    .no_args_plan = "no dir",
    .range_col = -1,
};

int rmqx_register_scheduled_table(sqlite3 *db) {
  return rmqx_tvf_register(db, &sc_module, &sc_tvf);
}
