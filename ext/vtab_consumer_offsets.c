/*
** vtab_consumer_offsets.c: rocketmq_consumer_offsets, the positions of a
** store's consumer groups and how far behind each is, read-only.
**
** Usage:
**
**    SELECT * FROM rocketmq_consumer_offsets('path/to/store');
**    SELECT "group", sum(lag) FROM rocketmq_consumer_offsets('path/to/store') GROUP BY 1;
**
** An eponymous, table-valued, read-only virtual table whose HIDDEN column
** dir, the argument, is required ("rocketmq_consumer_offsets: missing
** argument dir; use rocketmq_consumer_offsets('path/to/store')"). It reads
** the live store when this process has dir open, and otherwise the files
** read-only: dir/config/consumerOffset.json (or its .bak when the file is
** missing or does not parse) as a RocketMQ broker or rocketmq_commit_offset
** wrote it, and the consume queues. It is SQLITE_VTAB_DIRECTONLY.
**
** Columns, one row per (group, topic, queue) committed, ordered by group,
** topic (bytewise) and queue_id:
**
**    group         the consumer group
**    topic
**    queue_id
**    offset        the next queue offset the group reads
**    max_offset    the queue's max offset (the offset its next message
**                  gets); 0 for a queue that holds no messages
**    lag           max_offset - offset, the messages not read yet (0 when
**                  the group is at or past the end)
**
** A file that neither parses nor has a .bak that does is an error naming
** the file and the byte offset where it breaks.
**
** How it works: xFilter copies the committed positions and each queue's
** max offset, and the rows come from that snapshot. idxNum is 1 when dir
** was given and 0 for the plan without it, which fails in xFilter; idxStr
** is "offsets" or "no dir".
*/
#include <stdlib.h>
#include <string.h>

#include "rmq_ext.h"

#define CO_SCHEMA                                                                            \
  "CREATE TABLE x(\"group\" TEXT, topic TEXT, queue_id INTEGER, offset INTEGER, max_offset " \
  "INTEGER, lag INTEGER, dir HIDDEN)"

enum { COL_GROUP, COL_TOPIC, COL_QUEUE_ID, COL_OFFSET, COL_MAX, COL_LAG, COL_DIR };

typedef struct co_row {
  rmq_group_offset o;
  int64_t max;
} co_row;

typedef struct co_cursor {
  sqlite3_vtab_cursor base;
  rmqx_tvf_dir src; /* dir, its store open only during xFilter */
  co_row *rows;
  int n, i;
} co_cursor;

static int co_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  bool ready;
  int rc = rmqx_tvf_best_index(vt, info, &ready);
  if (rc != SQLITE_OK) return rc;
  info->estimatedRows = 100;
  if (!ready) return SQLITE_OK; /* priced out by rmqx_tvf_best_index */
  info->idxStr = "offsets";
  info->estimatedCost = 1000;
  return SQLITE_OK;
}

static int co_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  (void)vt;
  return rmqx_tvf_cursor_new(sizeof(co_cursor), out) ? SQLITE_OK : SQLITE_NOMEM;
}

static void clear_rows(co_cursor *c) {
  sqlite3_free(c->rows);
  rmqx_tvf_dir_close(&c->src);
  c->rows = NULL;
  c->n = c->i = 0;
}

static int co_close(sqlite3_vtab_cursor *cur) {
  co_cursor *c = (co_cursor *)cur;
  clear_rows(c);
  sqlite3_free(c);
  return SQLITE_OK;
}

static int cmp_rows(const void *a, const void *b) {
  const rmq_group_offset *x = &((const co_row *)a)->o, *y = &((const co_row *)b)->o;
  int c = strcmp(x->group, y->group);
  if (c == 0) c = strcmp(x->topic, y->topic);
  return c ? c : (x->queue_id > y->queue_id) - (x->queue_id < y->queue_id);
}

/* Copy the committed positions and their queues' max offsets into c->rows. */
static int snapshot(void *ctx, rmqx_reader *reader) {
  co_cursor *c = ctx;
  rmq_store *store = reader->store;
  rmq_group_offset *all;
  int n;
  rmq_err err = {0};
  if (rmq_store_group_offsets(store, &all, &n, &err) != RMQ_OK) {
    return err.code == RMQ_ENOMEM
               ? SQLITE_NOMEM
               : rmqx_vtab_error(c->base.pVtab, "rocketmq_consumer_offsets: %s", err.msg);
  }
  c->rows = sqlite3_malloc64((sqlite3_uint64)(n ? n : 1) * sizeof *c->rows);
  for (int i = 0; c->rows && i < n; i++) {
    rmq_consume_queue *cq = rmq_store_find_queue(store, all[i].topic, all[i].queue_id);
    c->rows[i] = (co_row){.o = all[i], .max = cq ? rmq_cq_max_offset(cq) : 0};
  }
  free(all);
  if (c->rows == NULL) return SQLITE_NOMEM;
  c->n = n;
  if (n > 1) qsort(c->rows, (size_t)n, sizeof *c->rows, cmp_rows);
  return SQLITE_OK;
}

static int co_filter(sqlite3_vtab_cursor *cur, int idx, const char *idx_str, int argc,
                     sqlite3_value **argv) {
  (void)idx_str;
  co_cursor *c = (co_cursor *)cur;
  clear_rows(c);
  return rmqx_tvf_dir_snapshot(&c->src, cur->pVtab, idx, argc, argv, true, snapshot, c);
}

static int co_next(sqlite3_vtab_cursor *cur) {
  ((co_cursor *)cur)->i++;
  return SQLITE_OK;
}

static int co_eof(sqlite3_vtab_cursor *cur) {
  co_cursor *c = (co_cursor *)cur;
  return c->i >= c->n;
}

static int co_rowid(sqlite3_vtab_cursor *cur, sqlite_int64 *rowid) {
  *rowid = ((co_cursor *)cur)->i + 1;
  return SQLITE_OK;
}

static int co_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col) {
  co_cursor *c = (co_cursor *)cur;
  const co_row *r = &c->rows[c->i];
  switch (col) {
    case COL_GROUP: sqlite3_result_text(ctx, r->o.group, -1, SQLITE_TRANSIENT); break;
    case COL_TOPIC: sqlite3_result_text(ctx, r->o.topic, -1, SQLITE_TRANSIENT); break;
    case COL_QUEUE_ID: sqlite3_result_int(ctx, r->o.queue_id); break;
    case COL_OFFSET: sqlite3_result_int64(ctx, r->o.offset); break;
    case COL_MAX: sqlite3_result_int64(ctx, r->max); break;
    case COL_LAG: sqlite3_result_int64(ctx, r->max > r->o.offset ? r->max - r->o.offset : 0); break;
    case COL_DIR: sqlite3_result_text(ctx, c->src.dir, -1, SQLITE_TRANSIENT); break;
  }
  return SQLITE_OK;
}

static sqlite3_module co_module = {
    .iVersion = 0,
    .xConnect = rmqx_tvf_connect,
    .xBestIndex = co_best_index,
    .xDisconnect = rmqx_tvf_disconnect,
    .xOpen = co_open,
    .xClose = co_close,
    .xFilter = co_filter,
    .xNext = co_next,
    .xEof = co_eof,
    .xColumn = co_column,
    .xRowid = co_rowid,
};

static const char *const co_args[] = {"dir"};

static const rmqx_tvf co_tvf = {
    .name = "rocketmq_consumer_offsets",
    .schema = CO_SCHEMA,
    .arg_col = COL_DIR,
    .n_args = 1,
    .n_required = 1,
    .arg_names = co_args,
    .usage = "rocketmq_consumer_offsets('path/to/store')",
    .no_args_plan = "no dir",
    .range_col = -1,
};

int rmqx_register_consumer_offsets_table(sqlite3 *db) {
  return rmqx_tvf_register(db, &co_module, &co_tvf);
}
