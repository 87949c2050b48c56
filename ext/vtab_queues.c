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

#define QS_SCHEMA                                                                          \
  "CREATE TABLE x(topic TEXT, queue_id INTEGER, min_offset INTEGER, max_offset INTEGER,"   \
  " message_count INTEGER, dir HIDDEN)"

enum { COL_TOPIC, COL_QUEUE_ID, COL_MIN, COL_MAX, COL_COUNT, COL_DIR };

typedef struct qs_row {
  char *topic;
  int32_t queue_id;
  int64_t min, max;
} qs_row;

typedef struct qs_cursor {
  sqlite3_vtab_cursor base;
  char *dir;
  qs_row *rows;
  int n, i;
} qs_cursor;

static int set_vtab_error(sqlite3_vtab *vt, char *msg) {
  sqlite3_free(vt->zErrMsg);
  vt->zErrMsg = msg;
  return msg ? SQLITE_ERROR : SQLITE_NOMEM;
}

/* ------------------------------------------------------------ the table */

static int qs_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                      sqlite3_vtab **out, char **errmsg) {
  (void)aux;
  (void)argc;
  (void)argv;
  (void)errmsg;
  int rc = sqlite3_declare_vtab(db, QS_SCHEMA);
  if (rc != SQLITE_OK) return rc;
  sqlite3_vtab_config(db, SQLITE_VTAB_DIRECTONLY);
  sqlite3_vtab *vt = sqlite3_malloc(sizeof *vt);
  if (vt == NULL) return SQLITE_NOMEM;
  memset(vt, 0, sizeof *vt);
  *out = vt;
  return SQLITE_OK;
}

static int qs_disconnect(sqlite3_vtab *vt) {
  sqlite3_free(vt);
  return SQLITE_OK;
}

static int qs_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  (void)vt;
  int slot = -1;
  bool constrained = false;
  for (int i = 0; i < info->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &info->aConstraint[i];
    if (c->iColumn != COL_DIR || c->op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
    constrained = true;
    if (c->usable && slot < 0) slot = i;
  }
  /* dir is an input (see vtab_commitlog.c). */
  if (constrained && slot < 0) return SQLITE_CONSTRAINT;
  if (slot >= 0) {
    info->aConstraintUsage[slot].argvIndex = 1;
    info->aConstraintUsage[slot].omit = 1;
  }
  info->idxNum = slot >= 0;
  info->idxStr = slot >= 0 ? "queues" : "no dir";
  info->estimatedCost = slot >= 0 ? 1000 : 1e300;
  info->estimatedRows = 100;
  return SQLITE_OK;
}

/* ------------------------------------------------------------ the cursor */

static int qs_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  (void)vt;
  qs_cursor *c = sqlite3_malloc(sizeof *c);
  if (c == NULL) return SQLITE_NOMEM;
  memset(c, 0, sizeof *c);
  *out = &c->base;
  return SQLITE_OK;
}

static void clear_rows(qs_cursor *c) {
  for (int i = 0; i < c->n; i++) sqlite3_free(c->rows[i].topic);
  sqlite3_free(c->rows);
  sqlite3_free(c->dir);
  c->rows = NULL;
  c->dir = NULL;
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
static int snapshot(qs_cursor *c, rmq_store *store) {
  rmq_consume_queue **all;
  int n;
  rmq_err err = {0};
  if (rmq_cq_table_snapshot(rmq_store_consume_queues(store), &all, &n, &err) != RMQ_OK) {
    return SQLITE_NOMEM;
  }
  int rc = SQLITE_OK;
  c->rows = sqlite3_malloc64((sqlite3_uint64)(n ? n : 1) * sizeof *c->rows);
  for (int i = 0; c->rows && i < n; i++) {
    qs_row *r = &c->rows[c->n];
    if ((r->topic = sqlite3_mprintf("%s", all[i]->topic)) == NULL) break;
    r->queue_id = all[i]->queue_id;
    r->min = rmq_cq_min_offset(all[i]);
    r->max = rmq_cq_max_offset(all[i]);
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
  (void)argc;
  qs_cursor *c = (qs_cursor *)cur;
  clear_rows(c);
  if (!idx) {
    return set_vtab_error(cur->pVtab, sqlite3_mprintf("rocketmq_queues: missing argument dir; "
                                                      "use rocketmq_queues('path/to/store')"));
  }
  const char *dir = (const char *)sqlite3_value_text(argv[0]);
  if (dir == NULL) {
    return set_vtab_error(cur->pVtab,
                          sqlite3_mprintf("rocketmq_queues: the store directory is NULL"));
  }
  if ((c->dir = sqlite3_mprintf("%s", dir)) == NULL) return SQLITE_NOMEM;
  rmq_reader reader;
  char *msg = NULL;
  if (rmq_reader_open(dir, &reader, &msg) != SQLITE_OK) {
    char *full = sqlite3_mprintf("rocketmq_queues: %s", msg);
    sqlite3_free(msg);
    return set_vtab_error(cur->pVtab, full);
  }
  int rc = rmq_reader_wait_dispatched(&reader, &msg);
  if (rc == SQLITE_OK) {
    rc = snapshot(c, reader.store);
  } else {
    set_vtab_error(cur->pVtab, sqlite3_mprintf("rocketmq_queues: %s", msg));
    sqlite3_free(msg);
  }
  rmq_reader_close(&reader);
  return rc;
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
    case COL_TOPIC: sqlite3_result_text(ctx, r->topic, -1, SQLITE_TRANSIENT); break;
    case COL_QUEUE_ID: sqlite3_result_int(ctx, r->queue_id); break;
    case COL_MIN: sqlite3_result_int64(ctx, r->min); break;
    case COL_MAX: sqlite3_result_int64(ctx, r->max); break;
    case COL_COUNT: sqlite3_result_int64(ctx, r->max - r->min); break;
    case COL_DIR: sqlite3_result_text(ctx, c->dir, -1, SQLITE_TRANSIENT); break;
  }
  return SQLITE_OK;
}

static sqlite3_module qs_module = {
    .iVersion = 0,
    .xConnect = qs_connect,
    .xBestIndex = qs_best_index,
    .xDisconnect = qs_disconnect,
    .xOpen = qs_open,
    .xClose = qs_close,
    .xFilter = qs_filter,
    .xNext = qs_next,
    .xEof = qs_eof,
    .xColumn = qs_column,
    .xRowid = qs_rowid,
};

int rmq_register_queues_table(sqlite3 *db) {
  return sqlite3_create_module(db, "rocketmq_queues", &qs_module, 0);
}
