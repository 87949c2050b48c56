/*
** vtab_consumequeue.c: rocketmq_consumequeue, the entries of one consume
** queue, read-only.
**
** Usage:
**
**    SELECT * FROM rocketmq_consumequeue('path/to/store', 'TopicA', 0);
**    SELECT commitlog_offset, size FROM rocketmq_consumequeue('path/to/store', 'TopicA', 0)
**     WHERE cq_offset >= 100;
**
** An eponymous, table-valued, read-only virtual table. Its arguments are
** the HIDDEN columns dir, topic and queue_id, given in that order (or as
** `dir = ?`, `topic = ?`, `queue_id = ?`); all three are required, and a
** missing one fails with "rocketmq_consumequeue: missing argument topic;
** use rocketmq_consumequeue('path/to/store', 'TopicA', 0)". A queue that
** the store does not have is an error ("no consume queue TopicA/9 in
** path/to/store"), not an empty result. Like the other companion tables it
** reads the live store when this process has dir open, and otherwise the
** files opened read-only (consume-queue segment sizes are read off the
** files); it is SQLITE_VTAB_DIRECTONLY.
**
** Columns, one row per entry in queue order (rowid = cq_offset):
**
**    cq_offset          the entry's queue offset (logical position)
**    commitlog_offset   where its record starts in the commit log
**    size               the record's TOTALSIZE
**    tags_code          the tags code: Java String.hashCode of TAGS (0 for
**                       none), or the delivery time for SCHEDULE_TOPIC_XXXX
**
** The queue is what the store's recovery leaves: entries that point at or
** past the recovered end of the commit log (a torn last record) are not
** part of it, as in RocketMQ; pre-blank filler entries below the queue's
** min offset are skipped.
**
** Plans (xBestIndex). idxNum bits say which constraints were passed to
** xFilter, in this argv order:
**    CQ_DIR 0x01, CQ_TOPIC 0x02, CQ_QID 0x04   the arguments (required)
**    CQ_EQ  0x08   cq_offset = ?
**    CQ_GE  0x10   cq_offset >= ?      CQ_GT 0x20   cq_offset > ?
**    CQ_LE  0x40   cq_offset <= ?      CQ_LT 0x80   cq_offset < ?
** idxStr is "queue" or "queue range" ("no arguments" for a plan that lacks
** one and fails in xFilter). A lower bound starts the queue's iterator
** there (a direct seek: entry n is at byte n*20); an upper bound stops it.
** SQLite still checks the bounds on each row. ORDER BY cq_offset is
** consumed. The iterator holds the segment it reads.
*/
#include <stdio.h>
#include <string.h>

#include "rmq_ext.h"

#define CQ_NAME "rocketmq_consumequeue"
#define CQ_SCHEMA                                                             \
  "CREATE TABLE x(cq_offset INTEGER, commitlog_offset INTEGER, size INTEGER," \
  " tags_code INTEGER, dir HIDDEN, topic HIDDEN, queue_id HIDDEN)"

enum { COL_CQ_OFFSET, COL_COMMITLOG_OFFSET, COL_SIZE, COL_TAGS_CODE, COL_DIR, COL_TOPIC, COL_QID };

/* idxNum bits that pricing looks at (rmqx_tvf_best_index sets them all). */
#define CQ_DIR 0x01
#define CQ_TOPIC 0x02
#define CQ_QID 0x04
#define CQ_EQ 0x08
#define CQ_ARGS (CQ_DIR | CQ_TOPIC | CQ_QID)

typedef struct cq_cursor {
  sqlite3_vtab_cursor base;
  rmqx_tvf_dir src; /* the store read */
  char *topic;
  int32_t queue_id;
  rmq_cq_iter it;
  bool iterating; /* it was started and not stopped */
  int64_t hi;
  bool eof;
  int64_t offset; /* the current entry */
  rmq_cq_entry entry;
} cq_cursor;

/* ------------------------------------------------------------ the table */

static int cq_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  bool ready;
  int rc = rmqx_tvf_best_index(vt, info, &ready);
  if (rc != SQLITE_OK) return rc;
  int idx = info->idxNum;
  info->estimatedRows = idx & CQ_EQ ? 1 : idx != CQ_ARGS ? 100 : 10000;
  if (!ready) return SQLITE_OK; /* priced out by rmqx_tvf_best_index */
  info->idxStr = idx == CQ_ARGS ? "queue" : "queue range";
  info->estimatedCost = idx & CQ_EQ ? 10 : idx != CQ_ARGS ? 1000 : 100000;
  return SQLITE_OK;
}

/* ------------------------------------------------------------ the cursor */

static int cq_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  (void)vt;
  cq_cursor *c = rmqx_tvf_cursor_new(sizeof *c, out);
  if (c == NULL) return SQLITE_NOMEM;
  c->eof = true;
  return SQLITE_OK;
}

static void stop_iter(cq_cursor *c) {
  if (c->iterating) rmq_cq_iter_stop(&c->it);
  c->iterating = false;
}

static int cq_close(sqlite3_vtab_cursor *cur) {
  cq_cursor *c = (cq_cursor *)cur;
  stop_iter(c);
  rmqx_tvf_dir_close(&c->src);
  sqlite3_free(c->topic);
  sqlite3_free(c);
  return SQLITE_OK;
}

/* The queue named by the topic and queue_id arguments, or an error. */
static int find_queue(cq_cursor *c, sqlite3_value *topic_v, sqlite3_value *qid_v,
                      rmq_consume_queue **out) {
  sqlite3_vtab *vt = c->base.pVtab;
  int nul_at;
  const char *topic = rmqx_value_cstr(topic_v, &nul_at);
  if (topic == NULL) return rmqx_vtab_error(vt, CQ_NAME ": the topic is NULL");
  if (nul_at >= 0) {
    return rmqx_vtab_error(vt, RMQX_NUL_MESSAGE, CQ_NAME, "topic", nul_at, topic, "name");
  }
  if (!rmq_topic_valid(topic, strlen(topic))) {
    return rmqx_vtab_error(vt,
                           CQ_NAME ": invalid topic \"%s\": a topic is 1 to %d characters "
                                   "of [A-Za-z0-9_%%|-]",
                           topic, RMQ_MAX_TOPIC_LEN);
  }
  int64_t qid;
  if (!rmqx_value_integer(qid_v, &qid) || qid < 0 || qid > INT32_MAX) {
    return rmqx_vtab_error(vt, CQ_NAME ": queue_id must be an integer from 0 to %d", INT32_MAX);
  }
  sqlite3_free(c->topic);
  if ((c->topic = sqlite3_mprintf("%s", topic)) == NULL) return SQLITE_NOMEM;
  c->queue_id = (int32_t)qid;
  *out = rmq_store_find_queue(c->src.reader.store, topic, c->queue_id);
  if (*out == NULL) {
    return rmqx_vtab_error(vt, CQ_NAME ": no consume queue %s/%d in %s", topic, (int)c->queue_id,
                           c->src.dir);
  }
  return SQLITE_OK;
}

static void next_entry(cq_cursor *c) {
  /* The iterator may skip entries that expired meanwhile: its offset says where it was. */
  c->eof = !rmq_cq_iter_next(&c->it, &c->entry) || (c->offset = c->it.offset - 1) > c->hi;
  if (c->eof) stop_iter(c);
}

static int cq_filter(sqlite3_vtab_cursor *cur, int idx, const char *idx_str, int argc,
                     sqlite3_value **argv) {
  (void)idx_str;
  (void)argc;
  cq_cursor *c = (cq_cursor *)cur;
  stop_iter(c);
  c->eof = true;
  rmq_consume_queue *cq;
  int rc = rmqx_tvf_check_args(cur->pVtab, idx);
  if (rc == SQLITE_OK) rc = rmqx_tvf_dir_open(&c->src, cur->pVtab, argv[0]);
  if (rc == SQLITE_OK) rc = rmqx_tvf_dir_wait_dispatched(&c->src, cur->pVtab);
  if (rc == SQLITE_OK) rc = find_queue(c, argv[1], argv[2], &cq);
  if (rc != SQLITE_OK) return rc;
  int64_t lo = 0;
  c->hi = INT64_MAX;
  rmqx_tvf_range(cur->pVtab, idx, argv, &lo, &c->hi);
  rmq_cq_iter_start(&c->it, cq, lo);
  c->iterating = true;
  next_entry(c);
  return SQLITE_OK;
}

static int cq_next(sqlite3_vtab_cursor *cur) {
  next_entry((cq_cursor *)cur);
  return SQLITE_OK;
}

static int cq_eof(sqlite3_vtab_cursor *cur) { return ((cq_cursor *)cur)->eof; }

static int cq_rowid(sqlite3_vtab_cursor *cur, sqlite_int64 *rowid) {
  *rowid = ((cq_cursor *)cur)->offset;
  return SQLITE_OK;
}

static int cq_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col) {
  cq_cursor *c = (cq_cursor *)cur;
  switch (col) {
    case COL_CQ_OFFSET: sqlite3_result_int64(ctx, c->offset); break;
    case COL_COMMITLOG_OFFSET: sqlite3_result_int64(ctx, c->entry.phy_offset); break;
    case COL_SIZE: sqlite3_result_int(ctx, c->entry.size); break;
    case COL_TAGS_CODE: sqlite3_result_int64(ctx, c->entry.tags_code); break;
    case COL_DIR: sqlite3_result_text(ctx, c->src.dir, -1, SQLITE_TRANSIENT); break;
    case COL_TOPIC: rmqx_result_text_or_blob(ctx, c->topic, -1, SQLITE_TRANSIENT); break;
    case COL_QID: sqlite3_result_int(ctx, c->queue_id); break;
  }
  return SQLITE_OK;
}

static sqlite3_module cq_module = {
    .iVersion = 0,
    .xConnect = rmqx_tvf_connect,
    .xBestIndex = cq_best_index,
    .xDisconnect = rmqx_tvf_disconnect,
    .xOpen = cq_open,
    .xClose = cq_close,
    .xFilter = cq_filter,
    .xNext = cq_next,
    .xEof = cq_eof,
    .xColumn = cq_column,
    .xRowid = cq_rowid,
};

static const char *const cq_args[] = {"dir", "topic", "queue_id"};

static const rmqx_tvf cq_tvf = {
    .name = CQ_NAME,
    .schema = CQ_SCHEMA,
    .arg_col = COL_DIR,
    .n_args = 3,
    .n_required = 3,
    .arg_names = cq_args,
    .usage = "rocketmq_consumequeue('path/to/store', 'TopicA', 0)",
    .no_args_plan = "no arguments",
    .range_col = COL_CQ_OFFSET,
};

int rmqx_register_consumequeue_table(sqlite3 *db) {
  return rmqx_tvf_register(db, &cq_module, &cq_tvf);
}
