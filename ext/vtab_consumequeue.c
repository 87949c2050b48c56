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
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rmq_ext.h"

#define CQ_SCHEMA                                                                       \
  "CREATE TABLE x(cq_offset INTEGER, commitlog_offset INTEGER, size INTEGER,"           \
  " tags_code INTEGER, dir HIDDEN, topic HIDDEN, queue_id HIDDEN)"

enum { COL_CQ_OFFSET, COL_COMMITLOG_OFFSET, COL_SIZE, COL_TAGS_CODE, COL_DIR, COL_TOPIC, COL_QID };

#define CQ_DIR 0x01
#define CQ_TOPIC 0x02
#define CQ_QID 0x04
#define CQ_EQ 0x08
#define CQ_GE 0x10
#define CQ_GT 0x20
#define CQ_LE 0x40
#define CQ_LT 0x80
#define CQ_ARGS (CQ_DIR | CQ_TOPIC | CQ_QID)

#define CQ_USAGE "use rocketmq_consumequeue('path/to/store', 'TopicA', 0)"

typedef struct cq_cursor {
  sqlite3_vtab_cursor base;
  rmq_reader reader;
  char *dir;          /* the directory reader has open, or NULL */
  char *topic;
  int32_t queue_id;
  rmq_cq_iter it;
  bool iterating;     /* it was started and not stopped */
  int64_t hi;
  bool eof;
  int64_t offset;     /* the current entry */
  rmq_cq_entry entry;
} cq_cursor;

static int set_vtab_error(sqlite3_vtab *vt, char *msg) {
  sqlite3_free(vt->zErrMsg);
  vt->zErrMsg = msg;
  return msg ? SQLITE_ERROR : SQLITE_NOMEM;
}

/* ------------------------------------------------------------ the table */

static int cq_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                      sqlite3_vtab **out, char **errmsg) {
  (void)aux;
  (void)argc;
  (void)argv;
  (void)errmsg;
  int rc = sqlite3_declare_vtab(db, CQ_SCHEMA);
  if (rc != SQLITE_OK) return rc;
  sqlite3_vtab_config(db, SQLITE_VTAB_DIRECTONLY);
  sqlite3_vtab *vt = sqlite3_malloc(sizeof *vt);
  if (vt == NULL) return SQLITE_NOMEM;
  memset(vt, 0, sizeof *vt);
  *out = vt;
  return SQLITE_OK;
}

static int cq_disconnect(sqlite3_vtab *vt) {
  sqlite3_free(vt);
  return SQLITE_OK;
}

static int cq_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  (void)vt;
  enum { NBITS = 8 };
  int slot[NBITS];
  for (int b = 0; b < NBITS; b++) slot[b] = -1;
  int constrained = 0; /* argument bits that have an = constraint, usable or not */
  for (int i = 0; i < info->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &info->aConstraint[i];
    int b = -1;
    if (c->iColumn >= COL_DIR && c->op == SQLITE_INDEX_CONSTRAINT_EQ) {
      b = c->iColumn - COL_DIR;
      constrained |= 1 << b;
      if (!c->usable) b = -1;
    } else if (c->iColumn == COL_CQ_OFFSET && c->usable) {
      b = c->op == SQLITE_INDEX_CONSTRAINT_EQ ? 3 : c->op == SQLITE_INDEX_CONSTRAINT_GE ? 4
        : c->op == SQLITE_INDEX_CONSTRAINT_GT ? 5 : c->op == SQLITE_INDEX_CONSTRAINT_LE ? 6
        : c->op == SQLITE_INDEX_CONSTRAINT_LT ? 7 : -1;
    }
    if (b >= 0 && slot[b] < 0) slot[b] = i;
  }
  int have = 0;
  for (int b = 0; b < 3; b++) have |= slot[b] >= 0 ? 1 << b : 0;
  /* The arguments are inputs: see vtab_commitlog.c. */
  if (have != constrained) return SQLITE_CONSTRAINT;
  if (slot[3] >= 0) slot[4] = slot[5] = slot[6] = slot[7] = -1;
  if (slot[4] >= 0) slot[5] = -1;
  if (slot[6] >= 0) slot[7] = -1;
  int idx = 0, argc = 0;
  for (int b = 0; b < NBITS; b++) {
    if (slot[b] < 0) continue;
    idx |= 1 << b;
    info->aConstraintUsage[slot[b]].argvIndex = ++argc;
    info->aConstraintUsage[slot[b]].omit = b < 3;
  }
  info->idxNum = idx;
  bool args = (idx & CQ_ARGS) == CQ_ARGS;
  info->idxStr = !args ? "no arguments" : idx == CQ_ARGS ? "queue" : "queue range";
  info->estimatedCost = !args ? 1e300 : idx & CQ_EQ ? 10 : idx != CQ_ARGS ? 1000 : 100000;
  info->estimatedRows = idx & CQ_EQ ? 1 : idx != CQ_ARGS ? 100 : 10000;
  if (info->nOrderBy == 1 && info->aOrderBy[0].iColumn == COL_CQ_OFFSET &&
      !info->aOrderBy[0].desc) {
    info->orderByConsumed = 1;
  }
  return SQLITE_OK;
}

/* ------------------------------------------------------------ the cursor */

static int cq_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  (void)vt;
  cq_cursor *c = sqlite3_malloc(sizeof *c);
  if (c == NULL) return SQLITE_NOMEM;
  memset(c, 0, sizeof *c);
  c->eof = true;
  *out = &c->base;
  return SQLITE_OK;
}

static void stop_iter(cq_cursor *c) {
  if (c->iterating) rmq_cq_iter_stop(&c->it);
  c->iterating = false;
}

static void close_reader(cq_cursor *c) {
  stop_iter(c);
  rmq_reader_close(&c->reader);
  sqlite3_free(c->dir);
  c->dir = NULL;
}

static int cq_close(sqlite3_vtab_cursor *cur) {
  cq_cursor *c = (cq_cursor *)cur;
  close_reader(c);
  sqlite3_free(c->topic);
  sqlite3_free(c);
  return SQLITE_OK;
}

/* Open dir for this cursor, keeping the store of an earlier xFilter on the same dir. */
static int open_dir(cq_cursor *c, sqlite3_value *v) {
  const char *dir = (const char *)sqlite3_value_text(v);
  if (dir == NULL) {
    return set_vtab_error(c->base.pVtab,
                          sqlite3_mprintf("rocketmq_consumequeue: the store directory is NULL"));
  }
  if (c->dir && strcmp(c->dir, dir) == 0) return SQLITE_OK;
  close_reader(c);
  char *msg = NULL;
  if (rmq_reader_open(dir, &c->reader, &msg) != SQLITE_OK) {
    char *full = sqlite3_mprintf("rocketmq_consumequeue: %s", msg);
    sqlite3_free(msg);
    return set_vtab_error(c->base.pVtab, full);
  }
  return (c->dir = sqlite3_mprintf("%s", dir)) ? SQLITE_OK : SQLITE_NOMEM;
}

/* See every message appended before this query (rmq_reader_wait_dispatched). */
static int wait_dispatched(cq_cursor *c) {
  char *msg = NULL;
  if (rmq_reader_wait_dispatched(&c->reader, &msg) == SQLITE_OK) return SQLITE_OK;
  char *full = sqlite3_mprintf("rocketmq_consumequeue: %s", msg);
  sqlite3_free(msg);
  return set_vtab_error(c->base.pVtab, full);
}

/* An integer bound from v: exact for integers, rounded outward for reals; false otherwise. */
static bool bound(sqlite3_value *v, bool lower, int64_t *out) {
  switch (sqlite3_value_numeric_type(v)) {
    case SQLITE_INTEGER:
      *out = sqlite3_value_int64(v);
      return true;
    case SQLITE_FLOAT: {
      double d = lower ? floor(sqlite3_value_double(v)) : ceil(sqlite3_value_double(v));
      if (d <= -9.2e18) d = -9.2e18;
      if (d >= 9.2e18) d = 9.2e18;
      *out = (int64_t)d;
      return true;
    }
    default:
      return false; /* no integer satisfies it; SQLite's own check drops every row */
  }
}

/* The queue named by the topic and queue_id arguments, or an error. */
static int find_queue(cq_cursor *c, sqlite3_value *topic_v, sqlite3_value *qid_v,
                      rmq_consume_queue **out) {
  sqlite3_vtab *vt = c->base.pVtab;
  const char *topic = (const char *)sqlite3_value_text(topic_v);
  if (topic == NULL) {
    return set_vtab_error(vt, sqlite3_mprintf("rocketmq_consumequeue: the topic is NULL"));
  }
  if (!rmq_topic_valid(topic, strlen(topic))) {
    return set_vtab_error(vt, sqlite3_mprintf("rocketmq_consumequeue: invalid topic \"%s\": a "
                                              "topic is 1 to %d characters of [A-Za-z0-9_%%|-]",
                                              topic, RMQ_MAX_TOPIC_LEN));
  }
  sqlite3_int64 qid = sqlite3_value_int64(qid_v);
  if (sqlite3_value_numeric_type(qid_v) != SQLITE_INTEGER || qid < 0 || qid > INT32_MAX) {
    return set_vtab_error(vt, sqlite3_mprintf("rocketmq_consumequeue: queue_id must be an "
                                              "integer from 0 to %d", INT32_MAX));
  }
  sqlite3_free(c->topic);
  if ((c->topic = sqlite3_mprintf("%s", topic)) == NULL) return SQLITE_NOMEM;
  c->queue_id = (int32_t)qid;
  *out = rmq_cq_table_find(rmq_store_consume_queues(c->reader.store), topic, c->queue_id);
  if (*out == NULL) {
    return set_vtab_error(vt, sqlite3_mprintf("rocketmq_consumequeue: no consume queue %s/%d "
                                              "in %s", topic, (int)c->queue_id, c->dir));
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
  if ((idx & CQ_ARGS) != CQ_ARGS) {
    const char *missing = !(idx & CQ_DIR) ? "dir" : !(idx & CQ_TOPIC) ? "topic" : "queue_id";
    return set_vtab_error(cur->pVtab, sqlite3_mprintf("rocketmq_consumequeue: missing argument "
                                                      "%s; " CQ_USAGE, missing));
  }
  rmq_consume_queue *cq;
  int rc = open_dir(c, argv[0]);
  if (rc == SQLITE_OK) rc = wait_dispatched(c);
  if (rc == SQLITE_OK) rc = find_queue(c, argv[1], argv[2], &cq);
  if (rc != SQLITE_OK) return rc;
  int a = 3;
  int64_t lo = 0, v;
  c->hi = INT64_MAX;
  if ((idx & CQ_EQ) && bound(argv[a++], true, &v)) lo = c->hi = v;
  if ((idx & (CQ_GE | CQ_GT)) && bound(argv[a++], true, &v)) lo = v;
  if ((idx & (CQ_LE | CQ_LT)) && bound(argv[a++], false, &v)) c->hi = v;
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
    case COL_DIR: sqlite3_result_text(ctx, c->dir, -1, SQLITE_TRANSIENT); break;
    case COL_TOPIC: sqlite3_result_text(ctx, c->topic, -1, SQLITE_TRANSIENT); break;
    case COL_QID: sqlite3_result_int(ctx, c->queue_id); break;
  }
  return SQLITE_OK;
}

static sqlite3_module cq_module = {
    .iVersion = 0,
    .xConnect = cq_connect,
    .xBestIndex = cq_best_index,
    .xDisconnect = cq_disconnect,
    .xOpen = cq_open,
    .xClose = cq_close,
    .xFilter = cq_filter,
    .xNext = cq_next,
    .xEof = cq_eof,
    .xColumn = cq_column,
    .xRowid = cq_rowid,
};

int rmq_register_consumequeue_table(sqlite3 *db) {
  return sqlite3_create_module(db, "rocketmq_consumequeue", &cq_module, 0);
}
