/*
** vtab_queues.c: rocketmq_queues, the consume queues of a store, read-only.
**
** Usage:
**
**    SELECT * FROM rocketmq_queues('path/to/store');
**    SELECT topic, sum(message_count) FROM rocketmq_queues('path/to/store') GROUP BY topic;
**
** An eponymous, table-valued, read-only virtual table whose HIDDEN column
** dir, the argument, is required ("rocketmq_queues: missing argument dir;
** use rocketmq_queues('path/to/store')"). Like the other companion tables
** it reads the live store when this process has dir open, and otherwise the
** files opened read-only; it is SQLITE_VTAB_DIRECTONLY.
**
** Columns, one row per consume queue, ordered by topic (bytewise) and
** queue_id:
**
**    topic           the topic (the directory under consumequeue/)
**    queue_id
**    min_offset      the first queue offset that can be read
**                    (minOffsetInQueue)
**    max_offset      the queue offset the next message gets
**                    (maxOffsetInQueue)
**    message_count   max_offset - min_offset
**
** These are the offsets RocketMQ reports after its recovery: entries that
** point past the recovered end of the commit log are not counted.
**
** How it works: xFilter takes a snapshot of the store's queue table and of
** each queue's offsets, and the rows come from that snapshot. idxNum is 1
** when dir was given (argv[0]) and 0 for the plan without it, which fails
** in xFilter; idxStr is "queues" or "no dir".
*/
#include <stdlib.h>
#include <string.h>

#include "rmq_ext.h"

#define QS_SCHEMA                                                                        \
  "CREATE TABLE x(topic TEXT, queue_id INTEGER, min_offset INTEGER, max_offset INTEGER," \
  " message_count INTEGER, dir HIDDEN)"

enum { COL_TOPIC, COL_QUEUE_ID, COL_MIN, COL_MAX, COL_COUNT, COL_DIR };

typedef struct qs_row {
  char *topic;
  int32_t queue_id;
  int64_t min, max;
} qs_row;

typedef struct qs_cursor {
  sqlite3_vtab_cursor base;
  rmqx_tvf_dir src; /* dir, its store open only during xFilter */
  qs_row *rows;
  int n, i;
} qs_cursor;

/* ------------------------------------------------------------ the table */

static int qs_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  bool ready;
  int rc = rmqx_tvf_best_index(vt, info, &ready);
  if (rc != SQLITE_OK) return rc;
  info->estimatedRows = 100;
  if (!ready) return SQLITE_OK; /* priced out by rmqx_tvf_best_index */
  info->idxStr = "queues";
  info->estimatedCost = 1000;
  return SQLITE_OK;
}

/* ------------------------------------------------------------ the cursor */

static int qs_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  (void)vt;
  return rmqx_tvf_cursor_new(sizeof(qs_cursor), out) ? SQLITE_OK : SQLITE_NOMEM;
}

static void clear_rows(qs_cursor *c) {
  for (int i = 0; i < c->n; i++) sqlite3_free(c->rows[i].topic);
  sqlite3_free(c->rows);
  rmqx_tvf_dir_close(&c->src);
  c->rows = NULL;
  c->n = c->i = 0;
}

static int qs_close(sqlite3_vtab_cursor *cur) {
  qs_cursor *c = (qs_cursor *)cur;
  clear_rows(c);
  sqlite3_free(c);
  return SQLITE_OK;
}

static int cmp_rows(const void *a, const void *b) {
  const qs_row *x = a, *y = b;
  int c = strcmp(x->topic, y->topic);
  return c ? c : (x->queue_id > y->queue_id) - (x->queue_id < y->queue_id);
}

/* Copy the offsets of every queue of the store into c->rows. */
static int snapshot(void *ctx, rmqx_reader *reader) {
  qs_cursor *c = ctx;
  rmq_store *store = reader->store;
  rmq_queue_info *all;
  int n;
  rmq_err err = {0};
  if (rmq_store_queues(store, &all, &n, &err) != RMQ_OK) return SQLITE_NOMEM;
  int rc = SQLITE_OK;
  c->rows = sqlite3_malloc64((sqlite3_uint64)(n ? n : 1) * sizeof *c->rows);
  for (int i = 0; c->rows && i < n; i++) {
    qs_row *r = &c->rows[c->n];
    if ((r->topic = sqlite3_mprintf("%s", all[i].topic)) == NULL) break;
    r->queue_id = all[i].queue_id;
    r->min = all[i].min_offset;
    r->max = all[i].max_offset;
    if (r->max < r->min) r->max = r->min; /* a queue cut to nothing by recovery */
    c->n++;
  }
  if (c->rows == NULL || c->n < n) rc = SQLITE_NOMEM;
  free(all);
  if (rc == SQLITE_OK && c->n > 1) qsort(c->rows, (size_t)c->n, sizeof *c->rows, cmp_rows);
  return rc;
}
static int qs_filter(sqlite3_vtab_cursor *cur, int idx, const char *idx_str, int argc,
                     sqlite3_value **argv) {
  (void)idx_str;
  qs_cursor *c = (qs_cursor *)cur;
  clear_rows(c);
  return rmqx_tvf_dir_snapshot(&c->src, cur->pVtab, idx, argc, argv, true, snapshot, c);
}

static int qs_next(sqlite3_vtab_cursor *cur) {
  ((qs_cursor *)cur)->i++;
  return SQLITE_OK;
}

static int qs_eof(sqlite3_vtab_cursor *cur) {
  qs_cursor *c = (qs_cursor *)cur;
  return c->i >= c->n;
}

static int qs_rowid(sqlite3_vtab_cursor *cur, sqlite_int64 *rowid) {
  *rowid = ((qs_cursor *)cur)->i + 1;
  return SQLITE_OK;
}

static int qs_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col) {
  qs_cursor *c = (qs_cursor *)cur;
  const qs_row *r = &c->rows[c->i];
  switch (col) {
    case COL_TOPIC: rmqx_result_text_or_blob(ctx, r->topic, -1, SQLITE_TRANSIENT); break;
    case COL_QUEUE_ID: sqlite3_result_int(ctx, r->queue_id); break;
    case COL_MIN: sqlite3_result_int64(ctx, r->min); break;
    case COL_MAX: sqlite3_result_int64(ctx, r->max); break;
    case COL_COUNT: sqlite3_result_int64(ctx, r->max - r->min); break;
    case COL_DIR: sqlite3_result_text(ctx, c->src.dir, -1, SQLITE_TRANSIENT); break;
  }
  return SQLITE_OK;
}

static sqlite3_module qs_module = {
    .iVersion = 0,
    .xConnect = rmqx_tvf_connect,
    .xBestIndex = qs_best_index,
    .xDisconnect = rmqx_tvf_disconnect,
    .xOpen = qs_open,
    .xClose = qs_close,
    .xFilter = qs_filter,
    .xNext = qs_next,
    .xEof = qs_eof,
    .xColumn = qs_column,
    .xRowid = qs_rowid,
};

static const char *const qs_args[] = {"dir"};

static const rmqx_tvf qs_tvf = {
    .name = "rocketmq_queues",
    .schema = QS_SCHEMA,
    .arg_col = COL_DIR,
    .n_args = 1,
    .n_required = 1,
    .arg_names = qs_args,
    .usage = "rocketmq_queues('path/to/store')",
    .no_args_plan = "no dir",
    .range_col = -1,
};

int rmqx_register_queues_table(sqlite3 *db) { return rmqx_tvf_register(db, &qs_module, &qs_tvf); }
