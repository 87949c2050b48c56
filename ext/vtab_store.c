/*
** vtab_store.c: the `rocketmq` virtual table, a RocketMQ message store.
**
** Usage:
**
**    CREATE VIRTUAL TABLE mq USING rocketmq(dir='path/to/store', flush='async');
**    INSERT INTO mq(topic, tags, keys, body) VALUES ('Orders', 'paid', 'o-1', 'hello');
**    SELECT last_insert_rowid();             -- the commit-log offset of that message
**    SELECT queue_offset, body_text FROM mq
**     WHERE topic = 'Orders' AND queue_id = 0 AND queue_offset >= 0;
**    SELECT * FROM mq WHERE topic = 'Orders' AND key = 'o-1';
**
** Arguments (args.c): dir is required; the others have RocketMQ's defaults.
** Every table of every connection of the process that names the same
** directory shares one engine (rmq_store_acquire), whose threads start with
** the first and stop, after a final flush, with the last. DROP TABLE never
** deletes the store's files. CREATE fails when the store cannot be opened;
** a table of the schema whose store cannot be opened when it connects (say,
** another process has it locked) fails each statement that uses it with that
** error until it can be opened, and can still be dropped.
**
** Columns: see STORE_SCHEMA; rowid is commitlog_offset. delay_level, key and
** wait_ms are HIDDEN: delay_level is an INSERT input, key and wait_ms are
** search inputs. A topic, tags, keys, uniq_key or properties that another
** producer wrote in bytes that are not UTF-8 reads as a BLOB of those bytes
** (TEXT that is not UTF-8 breaks readers that decode it); body_text is NULL
** for such a body.
**
** INSERT. The row is checked (row.c: topic rules and not a system topic, queue id,
** sizes, JSON properties, delay level) before anything is appended; a bad
** row is an error naming the limit (SQLITE_CONSTRAINT, so INSERT OR IGNORE
** skips it). Columns the store assigns cannot be given. In autocommit mode
** each row is appended when it is inserted and last_insert_rowid() is its
** commit-log offset; a statement's rows after its first form a run, which
** waits in the store's write window until xSync (or xRollback). Inside
** BEGIN ... COMMIT rows are kept per connection
** and appended at COMMIT (xSync) as one contiguous batch; ROLLBACK, ROLLBACK
** TO and a failed statement drop exactly their rows; DROP TABLE is refused
** (SQLITE_LOCKED) while rows wait for COMMIT. With flush='sync' a COMMIT,
** or an autocommit statement, returns only once its rows are on disk (one
** wait at the statement's end, however many rows it inserted). UPDATE and
** DELETE are refused: messages are immutable, and leave the store only when
** their commit-log segment expires (CleanCommitLogService). A readonly=1
** table refuses INSERT even when this process also has the store open for
** writing. A full disk (above disk_warning_ratio) fails INSERT, or COMMIT,
** with SQLITE_FULL.
**
** Expiry and readers. A cursor keeps reading a segment that expiry deletes
** under it until it lets go; one that holds it longer than clean_grace_ms
** gets an error for its row ("the segment holding offset N was deleted by
** expiry while this cursor held it"), never the zeros that replace it. A
** read by queue offset skips the entries whose records expired before the
** queue's min offset moved past them, as RocketMQ's getMessage does.
**
** SELECT plans (xBestIndex; idxNum holds one bit per constraint slot used,
** idxStr names the plan for EXPLAIN QUERY PLAN):
**    "offset=?"                  commitlog_offset/rowid = ?: one direct read
**    "msgid"                     msg_id = ?: decoded to an offset, one read
**    "index key" / "index uniq_key"
**                                topic = ? AND key = ? (or uniq_key = ?):
**                                index-file look-up, each record re-checked
**    "cq topic=? queue_id=? ..." topic = ? AND queue_id = ? with optional
**                                queue_offset bounds, tags = ? (tag hash
**                                first), store_timestamp >= ? (time search)
**                                and wait_ms = ? (long poll: when nothing
**                                is found, wait up to wait_ms for a message;
**                                sqlite3_interrupt() ends the wait within
**                                WAIT_SLICE_MS with SQLITE_INTERRUPT)
**    "offset range"              commitlog_offset bounds: a commit-log walk
**    "scan"                      the whole commit log in physical order,
**                                starting at the first segment that can hold
**                                store_timestamp >= ? when given
** key and wait_ms are no columns SQLite can re-check, so their plans win over
** the point reads, they take only `=` (and IN), and a query that gives them
** without what they need (topic; topic and queue_id), or refers to them
** where no such plan can serve (in an OR with other conditions, in an
** expression, as a result column but of a point read, which shows NULL), is
** an error. Bounds are taken as SQLite compares (bounds.c): reals are
** rounded to the integers on their side, NULL matches nothing, and text
** that is no number bounds nothing (SQLite re-checks every row anyway). A
** plan costs the rows it reads; a scan is priced as unbounded, so that in a
** join SQLite reads the log through the plans that the other tables' rows
** feed (plan_rows).
** Before a consume-queue or index plan runs, it waits for the dispatcher to
** reach the commit log's end, so a query sees every message whose INSERT
** returned before it started.
** On SQLite 3.38 and later (asked at run time: the host's API table of an
** older one lacks the calls), one xFilter iterates the IN lists itself
** (sqlite3_vtab_in; idxStr shows "topic IN (...)"): the consume-queue plan
** reads each topic's each queue in turn, in the lists' order, and matches
** a queue's entries against the whole tags list in one pass; a key look-up
** looks each topic's each key up. Not with wait_ms, whose wait belongs to
** one queue: SQLite then runs the plan once per value, as on older hosts.
** The consume-queue plan also takes LIMIT and OFFSET ("LIMIT ? OFFSET ?")
** when it alone decides which rows match (take_limit): it skips OFFSET
** entries without reading their records when no tags or time bound needs
** the record, and checks tags and store_timestamp on the record itself so
** that what it counts are rows SQLite keeps.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rmq_ext.h"

#define STORE_SCHEMA                                                                      \
  "CREATE TABLE x(commitlog_offset INTEGER, size INTEGER, msg_id TEXT, uniq_key TEXT,"    \
  " topic TEXT, queue_id INTEGER, queue_offset INTEGER, tags TEXT, keys TEXT, body BLOB," \
  " body_text TEXT, properties TEXT, flag INTEGER, sys_flag INTEGER, body_crc INTEGER,"   \
  " born_timestamp INTEGER, born_host TEXT, store_timestamp INTEGER, store_host TEXT,"    \
  " reconsume_times INTEGER, prepared_transaction_offset INTEGER, body_raw BLOB,"         \
  " delay_level INTEGER HIDDEN, key TEXT HIDDEN, wait_ms INTEGER HIDDEN)"

enum {
  COL_COMMITLOG_OFFSET,
  COL_SIZE,
  COL_MSG_ID,
  COL_UNIQ_KEY,
  COL_TOPIC,
  COL_QUEUE_ID,
  COL_QUEUE_OFFSET,
  COL_TAGS,
  COL_KEYS,
  COL_BODY,
  COL_BODY_TEXT,
  COL_PROPERTIES,
  COL_FLAG,
  COL_SYS_FLAG,
  COL_BODY_CRC,
  COL_BORN_TIMESTAMP,
  COL_BORN_HOST,
  COL_STORE_TIMESTAMP,
  COL_STORE_HOST,
  COL_RECONSUME_TIMES,
  COL_PREPARED_TX_OFFSET,
  COL_BODY_RAW,
  COL_DELAY_LEVEL,
  COL_KEY,
  COL_WAIT_MS,
  COL_COUNT
};

/* Most candidates one key look-up reads (RocketMQ caps a query at 64). */
#define KEY_QUERY_MAX 1024

/* ------------------------------------------------------------ the table */

typedef struct store_vtab {
  sqlite3_vtab base;
  sqlite3 *db;
  rmq_store *store; /* NULL until opened when connecting could not (store_ready) */
  rmq_batch *batch; /* the open transaction's rows; NULL while store is */
  char *dir;
  rmq_config cfg;
  rmqx_row_state row;    /* what INSERT keeps from one row to the next (row.c) */
  bool readonly;         /* readonly=1, even when the engine it shares is writable */
  int64_t unflushed_end; /* autocommit rows appended, whose flush xSync waits for; 0: none */
  bool unflushed_waits;  /* one of them waits for the disk (rmq_message_waits) */
} store_vtab;

/*
** xCreate and xConnect. CREATE fails when the store cannot be opened. A
** connect (a table of the schema, used for the first time) that cannot open
** it, say because another process has it locked, still succeeds: the error
** then comes from every statement that uses the table (store_ready retries),
** and DROP TABLE, which needs a connected table, still works. The batch is
** made with the store: a table just created takes part in the transaction
** without an xBegin, and one that could not connect gets its xBegin before
** anything else of a transaction.
*/
static int store_init(sqlite3 *db, int argc, const char *const *argv, bool create,
                      sqlite3_vtab **out, char **errmsg) {
  store_vtab *vt = NULL;
  int rc = sqlite3_declare_vtab(db, STORE_SCHEMA);
  if (rc == SQLITE_OK && (vt = sqlite3_malloc(sizeof *vt)) == NULL) rc = SQLITE_NOMEM;
  if (rc == SQLITE_OK) {
    memset(vt, 0, sizeof *vt);
    vt->db = db;
    rc = rmqx_parse_args(argc - 3, argv + 3, &vt->cfg, &vt->dir, errmsg);
  }
  if (rc == SQLITE_OK) {
    vt->readonly = vt->cfg.readonly;
    rmq_err err = {0};
    if (rmq_store_acquire(vt->dir, &vt->cfg, &vt->store, &err) != RMQ_OK && create) {
      rc = rmqx_errmsg(errmsg, SQLITE_ERROR, "%s", err.msg);
    } else if (rmqx_row_state_init(&vt->row, &vt->cfg) != SQLITE_OK ||
               (vt->store && (vt->batch = rmq_batch_new(vt->store)) == NULL)) {
      rc = SQLITE_NOMEM;
    }
  }
  if (rc == SQLITE_OK) {
    sqlite3_vtab_config(db, SQLITE_VTAB_CONSTRAINT_SUPPORT, 1);
    *out = &vt->base;
  } else if (vt) {
    rmq_batch_free(vt->batch);
    rmqx_row_state_free(&vt->row);
    rmq_store_release(vt->store);
    sqlite3_free(vt->dir);
    sqlite3_free(vt);
  }
  return rc;
}

static int store_create(sqlite3 *db, void *aux, int argc, const char *const *argv,
                        sqlite3_vtab **out, char **errmsg) {
  (void)aux;
  return store_init(db, argc, argv, true, out, errmsg);
}

static int store_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                         sqlite3_vtab **out, char **errmsg) {
  (void)aux;
  return store_init(db, argc, argv, false, out, errmsg);
}

/* The store open and its batch made, or the error why not (see store_init). */
static int store_ready(store_vtab *vt) {
  if (vt->batch) return SQLITE_OK;
  rmq_err err = {0};
  if (!vt->store && rmq_store_acquire(vt->dir, &vt->cfg, &vt->store, &err) != RMQ_OK) {
    return rmqx_vtab_error(&vt->base, "%s", err.msg);
  }
  return (vt->batch = rmq_batch_new(vt->store)) ? SQLITE_OK : SQLITE_NOMEM;
}

static int store_disconnect(sqlite3_vtab *base) {
  store_vtab *vt = (store_vtab *)base;
  rmq_batch_free(vt->batch);
  rmqx_row_state_free(&vt->row);
  rmq_store_release(vt->store);
  sqlite3_free(vt->dir);
  sqlite3_free(vt);
  return SQLITE_OK;
}

/*
** DROP TABLE. SQLite frees the dropped table's object now, even inside a
** transaction that ROLLBACK TO can take back to before the DROP, and then
** calls no xSync or xRollbackTo on it: rows it holds for COMMIT would be lost
** while the table came back. So a DROP is refused while rows are pending,
** with SQLITE_LOCKED ("database table is locked"), as SQLite refuses to drop
** a table a statement still reads: SQLite shows no message of xDestroy's.
** The store's files stay.
*/
static int store_destroy(sqlite3_vtab *base) {
  store_vtab *vt = (store_vtab *)base;
  if (vt->batch && rmq_batch_count(vt->batch) > 0) return SQLITE_LOCKED_VTAB;
  return store_disconnect(base);
}

/* ------------------------------------------------------------- xBestIndex */

/*
** Constraint slots, in the order their values reach xFilter's argv. A
** column's bounds follow each other in the order =, >=, >, <=, < (RMQX_RANGE_*).
*/
enum {
  S_OFFSET_EQ,
  S_MSGID,
  S_TOPIC,
  S_KEY,
  S_UNIQ,
  S_QUEUE,
  S_QOFF_EQ,
  S_QOFF_GE,
  S_QOFF_GT,
  S_QOFF_LE,
  S_QOFF_LT,
  S_TAGS,
  S_WAIT,
  S_OFF_GE,
  S_OFF_GT,
  S_OFF_LE,
  S_OFF_LT,
  S_TS_GE,
  S_TS_GT,
  S_TS_LE,
  S_TS_LT,
  S_COUNT
};
#define BIT(s) (1 << (s))
#define QOFF_BITS \
  (BIT(S_QOFF_EQ) | BIT(S_QOFF_GE) | BIT(S_QOFF_GT) | BIT(S_QOFF_LE) | BIT(S_QOFF_LT))
#define OFF_BITS (BIT(S_OFF_GE) | BIT(S_OFF_GT) | BIT(S_OFF_LE) | BIT(S_OFF_LT))
#define TS_BITS (BIT(S_TS_GE) | BIT(S_TS_GT))
/* Upper bounds: a key look-up passes both to the index (IndexService.queryOffset's begin, end). */
#define TS_HI_BITS (BIT(S_TS_LE) | BIT(S_TS_LT))

/* The slot a usable constraint can fill, or -1. */
static int constraint_slot(int col, int op) {
  int r = rmqx_range_op(op);
  bool eq = r == RMQX_RANGE_EQ;
  switch (col) {
    case -1:
    case COL_COMMITLOG_OFFSET:
      return eq ? S_OFFSET_EQ : r > RMQX_RANGE_EQ ? S_OFF_GE + r - RMQX_RANGE_GE : -1;
    case COL_MSG_ID: return eq ? S_MSGID : -1;
    case COL_TOPIC: return eq ? S_TOPIC : -1;
    case COL_KEY: return eq ? S_KEY : -1;
    case COL_UNIQ_KEY: return eq ? S_UNIQ : -1;
    case COL_QUEUE_ID: return eq ? S_QUEUE : -1;
    case COL_QUEUE_OFFSET: return r >= 0 ? S_QOFF_EQ + r : -1;
    case COL_TAGS: return eq ? S_TAGS : -1;
    case COL_WAIT_MS: return eq ? S_WAIT : -1;
    case COL_STORE_TIMESTAMP:
      if (r == RMQX_RANGE_GE || r == RMQX_RANGE_GT) return S_TS_GE + r - RMQX_RANGE_GE;
      return r == RMQX_RANGE_LE || r == RMQX_RANGE_LT ? S_TS_LE + r - RMQX_RANGE_LE : -1;
    default: return -1;
  }
}

typedef enum plan {
  PLAN_OFFSET,
  PLAN_MSGID,
  PLAN_KEY,
  PLAN_UNIQ,
  PLAN_CQ,
  PLAN_RANGE,
  PLAN_SCAN
} plan;

/*
** The slots each plan takes from what is available. key and wait_ms have no
** column value that SQLite could re-check, so the plans that use them come
** before the cheaper point reads: a point read would ignore them and every
** row would then fail `key = ?`.
*/
static plan choose_plan(int avail, int *use) {
  bool topic = avail & BIT(S_TOPIC), cq = topic && (avail & BIT(S_QUEUE));
  int key_ts = avail & (TS_BITS | TS_HI_BITS);
  if (topic && (avail & BIT(S_KEY))) return *use = BIT(S_TOPIC) | BIT(S_KEY) | key_ts, PLAN_KEY;
  if (cq && (avail & BIT(S_WAIT))) {
    *use = avail & (BIT(S_TOPIC) | BIT(S_QUEUE) | QOFF_BITS | BIT(S_TAGS) | BIT(S_WAIT) | TS_BITS);
    return PLAN_CQ;
  }
  if (avail & BIT(S_OFFSET_EQ)) return *use = BIT(S_OFFSET_EQ), PLAN_OFFSET;
  if (avail & BIT(S_MSGID)) return *use = BIT(S_MSGID), PLAN_MSGID;
  if (topic && (avail & BIT(S_UNIQ))) {
    return *use = BIT(S_TOPIC) | BIT(S_UNIQ) | key_ts, PLAN_UNIQ;
  }
  if (cq) {
    *use = avail & (BIT(S_TOPIC) | BIT(S_QUEUE) | QOFF_BITS | BIT(S_TAGS) | TS_BITS);
    return PLAN_CQ;
  }
  if (avail & OFF_BITS) return *use = avail & (OFF_BITS | TS_BITS), PLAN_RANGE;
  *use = avail & TS_BITS;
  return PLAN_SCAN;
}

/*
** idxNum bits beyond the slots' (BIT(s)): an IN list xFilter iterates
** itself (sqlite3_vtab_in), LIMIT and OFFSET taken by the consume-queue
** plan, and the DEFER_* bits (below).
*/
#define IN_TOPIC (1 << 21)
#define IN_QUEUE (1 << 22)
#define IN_TAGS (1 << 23)
#define IN_KEY (1 << 24)
#define USE_LIMIT (1 << 25)
#define USE_OFFSET (1 << 26)
_Static_assert(S_COUNT <= 21, "the slots' bits reach IN_TOPIC");

/* The IN bit of a slot whose list xFilter can iterate, or 0. */
static int in_bit(int s) {
  switch (s) {
    case S_TOPIC: return IN_TOPIC;
    case S_QUEUE: return IN_QUEUE;
    case S_TAGS: return IN_TAGS;
    case S_KEY: return IN_KEY;
    default: return 0;
  }
}

/* " NAME=?", or " NAME IN (...)" when xFilter iterates its IN list. */
static const char *eq_name(int idx, int s, const char *eq, const char *in) {
  if (!(idx & BIT(s))) return "";
  return idx & in_bit(s) ? in : eq;
}

static char *plan_name(plan p, int idx) {
  static const char *const names[] = {"offset=?", "msgid",        "index key", "index uniq_key",
                                      "cq",       "offset range", "scan"};
  const char *key_ts = idx & (TS_BITS | TS_HI_BITS) ? " store_timestamp range" : "";
  if (p == PLAN_KEY) {
    return sqlite3_mprintf("index key%s%s%s", idx & IN_TOPIC ? " topic IN (...)" : "",
                           idx & IN_KEY ? " key IN (...)" : "", key_ts);
  }
  if (p == PLAN_UNIQ) return sqlite3_mprintf("index uniq_key%s", key_ts);
  if (p != PLAN_CQ) {
    bool ts = p == PLAN_SCAN && (idx & TS_BITS);
    return sqlite3_mprintf("%s%s", names[p], ts ? " store_timestamp>=?" : "");
  }
  return sqlite3_mprintf(
      "cq%s%s%s%s%s%s%s%s%s%s%s", eq_name(idx, S_TOPIC, " topic=?", " topic IN (...)"),
      eq_name(idx, S_QUEUE, " queue_id=?", " queue_id IN (...)"),
      idx & BIT(S_QOFF_EQ) ? " queue_offset=?" : "", idx & BIT(S_QOFF_GE) ? " queue_offset>=?" : "",
      idx & BIT(S_QOFF_GT) ? " queue_offset>?" : "", idx & BIT(S_QOFF_LE) ? " queue_offset<=?" : "",
      idx & BIT(S_QOFF_LT) ? " queue_offset<?" : "",
      eq_name(idx, S_TAGS, " tags=?", " tags IN (...)"), idx & TS_BITS ? " store_timestamp>=?" : "",
      idx & BIT(S_WAIT) ? " wait_ms=?" : "",
      idx & USE_OFFSET  ? " LIMIT ? OFFSET ?"
      : idx & USE_LIMIT ? " LIMIT ?"
                        : "");
}

/*
** The rows a plan reads, which is also its cost: one for a point read, a few
** candidates for a key look-up, one queue from an offset for the consume
** queue (fewer with an upper bound), part of the log for an offset range.
** A scan reads the whole log, which grows without bound: it is priced as
** SQLite's generate_series prices an unbounded span (2^31 rows). Without
** ANALYZE SQLite takes an ordinary table for a million rows or so, and a
** lower price made it scan the log in a join, looking the ordinary table up
** through an automatic index, rather than read the queues its rows name.
*/
static double plan_rows(plan p, int use) {
  switch (p) {
    case PLAN_OFFSET:
    case PLAN_MSGID: return 1;
    case PLAN_KEY:
    case PLAN_UNIQ: return 10;
    case PLAN_CQ: return use & (BIT(S_QOFF_EQ) | BIT(S_QOFF_LE) | BIT(S_QOFF_LT)) ? 20 : 100;
    case PLAN_RANGE: return 10000;
    default: return INT32_MAX;
  }
}

/* Rows come in commit-log order for walks, queue order for the consume queue. */
static bool order_consumed(sqlite3_index_info *info, plan p) {
  if (info->nOrderBy != 1 || info->aOrderBy[0].desc) return false;
  int col = info->aOrderBy[0].iColumn;
  if (p == PLAN_CQ) return col == COL_QUEUE_OFFSET;
  return (p == PLAN_RANGE || p == PLAN_SCAN) && (col == -1 || col == COL_COMMITLOG_OFFSET);
}

/*
** key and wait_ms have no value of their own to re-check: key is the key a
** look-up searched for (NULL in any other plan), wait_ms is always NULL. So
** they take only `=` (and IN), and a plan that does not use them while the
** query refers to them (colUsed: in an OR with other conditions, in an
** expression, as a result) would give wrong rows. When a value they need
** comes from a table not yet read, the plan is refused (SQLITE_CONSTRAINT)
** and SQLite picks a join order in which it is usable. Otherwise such a plan
** is priced out and fails when run (DEFER_KEY, DEFER_WAIT in idxNum), so
** that SQLite prefers a plan that works: `(key = 'a' OR key = 'b')` is
** also planned branch by branch, where a branch lacks topic = ?, and as
** `key IN ('a', 'b')`, which works.
*/
#define DEFER_KEY (1 << 29)
#define DEFER_WAIT (1 << 30)
#define COST_UNUSABLE 1e300

static const char key_needs[] = "key = ? needs topic = ? in the same query: the index holds "
                                "topic#key";
static const char wait_needs[] = "wait_ms = ? needs topic = ? AND queue_id = ? (and no key = ?) "
                                 "in the same query: it long-polls one consume queue";

/* An operator as SQL writes it after its column. */
static const char *op_text(int op) {
  switch (op) {
    case SQLITE_INDEX_CONSTRAINT_GT: return "> ?";
    case SQLITE_INDEX_CONSTRAINT_GE: return ">= ?";
    case SQLITE_INDEX_CONSTRAINT_LT: return "< ?";
    case SQLITE_INDEX_CONSTRAINT_LE: return "<= ?";
    case SQLITE_INDEX_CONSTRAINT_NE: return "!= ?";
    case SQLITE_INDEX_CONSTRAINT_LIKE: return "LIKE ?";
    case SQLITE_INDEX_CONSTRAINT_GLOB: return "GLOB ?";
    case SQLITE_INDEX_CONSTRAINT_REGEXP: return "REGEXP ?";
    case SQLITE_INDEX_CONSTRAINT_MATCH: return "MATCH ?";
    case SQLITE_INDEX_CONSTRAINT_IS: return "IS ?";
    case SQLITE_INDEX_CONSTRAINT_ISNOT: return "IS NOT ?";
    case SQLITE_INDEX_CONSTRAINT_ISNULL: return "IS NULL";
    case SQLITE_INDEX_CONSTRAINT_ISNOTNULL: return "IS NOT NULL";
    default: return "?";
  }
}

/* A text column compared under a collation other than BINARY, which no look-up serves. */
static bool folds_text(sqlite3_index_info *info, int i) {
  int col = info->aConstraint[i].iColumn;
  if (col != COL_TOPIC && col != COL_TAGS && col != COL_KEY && col != COL_UNIQ_KEY &&
      col != COL_MSG_ID) {
    return false;
  }
  const char *coll = sqlite3_vtab_collation(info, i);
  return coll && sqlite3_stricmp(coll, "BINARY") != 0;
}

/*
** An operator other than = on key or wait_ms is an error that names it, as
** is key = ? under a collation. The highest op is named: SQLite adds >= and
** < terms for `key LIKE 'a'`.
*/
static int check_search_ops(sqlite3_vtab *base, sqlite3_index_info *info) {
  const struct sqlite3_index_constraint *bad = NULL;
  for (int i = 0; i < info->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &info->aConstraint[i];
    if (c->iColumn == COL_KEY && c->op == SQLITE_INDEX_CONSTRAINT_EQ && folds_text(info, i)) {
      return rmqx_vtab_error(base,
                             "key = ? COLLATE %s: the index finds a key by its exact bytes; "
                             "compare key without COLLATE",
                             sqlite3_vtab_collation(info, i));
    }
    if (c->op == SQLITE_INDEX_CONSTRAINT_EQ) continue;
    if (c->iColumn != COL_KEY && c->iColumn != COL_WAIT_MS) continue;
    if (!bad || c->op > bad->op) bad = c;
  }
  if (!bad) return SQLITE_OK;
  if (bad->iColumn == COL_KEY) {
    return rmqx_vtab_error(base,
                           "key %s: key takes only key = ? or key IN (...), with topic = ?: it "
                           "looks keys up in the index",
                           op_text(bad->op));
  }
  return rmqx_vtab_error(base,
                         "wait_ms %s: wait_ms takes only wait_ms = ?, with topic = ? AND "
                         "queue_id = ?: it is how long to wait",
                         op_text(bad->op));
}

/*
** Does the query refer to col other than through a constraint? Not counted:
** UPDATE and DELETE, which read every column (bit 63, beyond the last
** column), and a point read, whose one row shows key and wait_ms as NULL.
*/
static bool col_used(const sqlite3_index_info *info, plan p, int col) {
  if ((info->colUsed >> 63) || p == PLAN_OFFSET || p == PLAN_MSGID) return false;
  return (info->colUsed >> col) & 1;
}

/* SQLITE_CONSTRAINT for a plan to refuse, else SQLITE_OK with the DEFER_* bits of the plan. */
static int check_search_inputs(const sqlite3_index_info *info, int present, int avail, plan p,
                               int use, int *defer) {
  int pending = present & ~avail;
  *defer = 0;
  if ((present & BIT(S_KEY) || col_used(info, p, COL_KEY)) && !(use & BIT(S_KEY))) {
    if ((present & BIT(S_KEY)) && (pending & (BIT(S_KEY) | BIT(S_TOPIC)))) return SQLITE_CONSTRAINT;
    *defer |= DEFER_KEY;
  }
  if ((present & BIT(S_WAIT) || col_used(info, p, COL_WAIT_MS)) && !(use & BIT(S_WAIT))) {
    if ((present & BIT(S_WAIT)) && !(present & BIT(S_KEY)) &&
        (pending & (BIT(S_WAIT) | BIT(S_TOPIC) | BIT(S_QUEUE)))) {
      return SQLITE_CONSTRAINT;
    }
    *defer |= DEFER_WAIT;
  }
  return SQLITE_OK;
}

/*
** SQLite 3.38 gave xBestIndex the IN lists (sqlite3_vtab_in) and LIMIT and
** OFFSET. The extension reaches SQLite through the host's API table, which
** on an older host lacks those calls: they are used only when the SQLite
** that loaded it has them.
*/
static bool planner_338(void) { return sqlite3_libversion_number() >= 3038000; }

/*
** Which IN lists xFilter iterates itself, in one pass, rather than SQLite
** running the plan once per value: topic and queue_id (each queue in turn)
** and tags (a set the queue's entries are matched against) for the consume
** queue, topic and key for a key look-up. Not with wait_ms, whose wait
** belongs to one queue. SQLite keeps re-checking the values.
*/
static int take_in_lists(sqlite3_index_info *info, const int *slot_of, plan p, int use) {
  static const int cq_slots[] = {S_TOPIC, S_QUEUE, S_TAGS}, key_slots[] = {S_TOPIC, S_KEY};
  if (!planner_338() || (use & BIT(S_WAIT))) return 0;
  if (p != PLAN_CQ && p != PLAN_KEY) return 0;
  const int *slots = p == PLAN_CQ ? cq_slots : key_slots;
  int n = p == PLAN_CQ ? 3 : 2, in = 0;
  for (int k = 0; k < n; k++) {
    int i = slot_of[slots[k]];
    if (!(use & BIT(slots[k])) || !sqlite3_vtab_in(info, i, -1)) continue;
    sqlite3_vtab_in(info, i, 1);
    in |= in_bit(slots[k]);
  }
  return in;
}

/* Whether constraint i is an IN list SQLite iterates, running the plan once per value. */
static bool in_per_value(sqlite3_index_info *info, int i, int in) {
  const struct sqlite3_index_constraint *c = &info->aConstraint[i];
  return sqlite3_vtab_in(info, i, -1) && !(in & in_bit(constraint_slot(c->iColumn, c->op)));
}

/*
** LIMIT and OFFSET go to the consume-queue plan when it alone decides
** which rows match, so that stopping after LIMIT rows and skipping OFFSET
** rows cannot give other rows than SQLite would: every other constraint
** is one the plan takes (SQLite 3.40 offers LIMIT even when one is left
** over, later versions do not), no IN list is left to SQLite (which would
** run the plan once per value), and the rows come in the ORDER BY's order.
** Not with wait_ms: the poll returns once a row exists, skipped or not.
*/
static int take_limit(sqlite3_index_info *info, plan p, int use, int in, int *argv_index) {
  int limit = -1, offset = -1;
  if (!planner_338() || p != PLAN_CQ || (use & BIT(S_WAIT))) return 0;
  if (info->nOrderBy > 0 && !info->orderByConsumed) return 0;
  for (int i = 0; i < info->nConstraint; i++) {
    int op = info->aConstraint[i].op;
    bool limit_op = op == SQLITE_INDEX_CONSTRAINT_LIMIT || op == SQLITE_INDEX_CONSTRAINT_OFFSET;
    /* SQLite retries a plan it cannot use with LIMIT and OFFSET unusable */
    if (limit_op && !info->aConstraint[i].usable) return 0;
    if (op == SQLITE_INDEX_CONSTRAINT_LIMIT) {
      limit = i;
    } else if (op == SQLITE_INDEX_CONSTRAINT_OFFSET) {
      offset = i;
    } else if (info->aConstraintUsage[i].argvIndex == 0 || in_per_value(info, i, in)) {
      return 0;
    }
  }
  if (limit < 0) return 0;
  info->aConstraintUsage[limit].argvIndex = ++*argv_index;
  if (offset < 0) return USE_LIMIT;
  /* omit: SQLite then skips no rows itself */
  info->aConstraintUsage[offset].argvIndex = ++*argv_index;
  info->aConstraintUsage[offset].omit = 1;
  return USE_LIMIT | USE_OFFSET;
}

static int store_best_index(sqlite3_vtab *base, sqlite3_index_info *info) {
  int slot_of[S_COUNT], avail = 0, present = 0;
  int rc = check_search_ops(base, info);
  if (rc != SQLITE_OK) return rc;
  for (int s = 0; s < S_COUNT; s++) slot_of[s] = -1;
  for (int i = 0; i < info->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &info->aConstraint[i];
    /* Under another collation SQLite compares topic, tags and ids itself, on a scan. */
    int s = folds_text(info, i) ? -1 : constraint_slot(c->iColumn, c->op);
    if (s >= 0) present |= BIT(s);
    if (s >= 0 && c->usable && slot_of[s] < 0) {
      slot_of[s] = i;
      avail |= BIT(s);
    }
  }
  int use, defer;
  plan p = choose_plan(avail, &use);
  rc = check_search_inputs(info, present, avail, p, use, &defer);
  if (rc != SQLITE_OK) return rc;
  int argv_index = 0;
  for (int s = 0; s < S_COUNT; s++) {
    if (!(use & BIT(s))) continue;
    int i = slot_of[s];
    info->aConstraintUsage[i].argvIndex = ++argv_index;
    /* Search inputs have no column value to re-check; the rest SQLite re-checks. */
    info->aConstraintUsage[i].omit = s == S_KEY || s == S_WAIT;
  }
  int in = take_in_lists(info, slot_of, p, use);
  /*
  ** Several topics or queues come one after another, not in queue_offset
  ** order; a tags list only filters one queue. SQLite itself clears
  ** orderByConsumed for the IN lists it iterates.
  */
  info->orderByConsumed = !(in & (IN_TOPIC | IN_QUEUE)) && order_consumed(info, p);
  int limit = defer ? 0 : take_limit(info, p, use, in, &argv_index);
  info->idxNum = use | in | limit | defer;
  info->idxStr = plan_name(p, info->idxNum);
  info->needToFreeIdxStr = 1;
  info->estimatedCost = defer ? COST_UNUSABLE : plan_rows(p, use);
  info->estimatedRows = (sqlite3_int64)plan_rows(p, use);
  if (p == PLAN_OFFSET || p == PLAN_MSGID) info->idxFlags = SQLITE_INDEX_SCAN_UNIQUE;
  return SQLITE_OK;
}

/* ---------------------------------------------------------------- cursor */

/* The properties columns show, in store_cursor.props. */
enum { PROP_UNIQ_KEY, PROP_TAGS, PROP_KEYS, PROP_DELAY, PROP_COUNT };
static const char *const shown_properties[PROP_COUNT] = {RMQ_PROPERTY_UNIQ_KEY, RMQ_PROPERTY_TAGS,
                                                         RMQ_PROPERTY_KEYS, RMQ_PROPERTY_DELAY};

/*
** The values a search argument stands for: its IN list's when xFilter
** iterates it (sqlite3_vtab_in), else itself; NULLs, which match nothing,
** left out. Copies, owned by the cursor.
*/
typedef struct value_list {
  sqlite3_value **v;
  int n, cap;
} value_list;

typedef struct store_cursor {
  sqlite3_vtab_cursor base;
  store_vtab *vt;
  plan plan;
  bool eof;
  /* the current record, and its properties the columns show (found when first asked for) */
  rmq_commitlog_ref ref;
  rmq_message m;
  rmqx_body body; /* m's, inflated */
  bool props_found;
  rmq_property_value props[PROP_COUNT];
  /* walks: the commit log's records, the iterator holding the current one's segment */
  rmq_commitlog_iter walk;
  /* consume queue: the next queue offset to read */
  int64_t next_offset;
  /* consume queue */
  rmq_consume_queue *cq;
  rmq_cq_iter it;
  bool iterating;
  int64_t qoff_end;  /* exclusive */
  int64_t cl_min;    /* the commit log's min offset when an entry was last found expired */
  const char *topic; /* the queue's, in topics */
  int32_t queue_id;
  int64_t qoff_lo; /* where each queue's read starts, before the time search */
  int64_t ts_lo;   /* store_timestamp >= ts_lo; INT64_MIN: no bound */
  bool has_tags;   /* tags = ? or IN: only entries whose tags are in tags */
  value_list tags; /* the wanted tags, with their hash codes in tags_codes */
  int64_t *tags_codes;
  int64_t limit; /* rows still to return (LIMIT); -1: no limit */
  int64_t skip;  /* matching rows still to skip (OFFSET) */
  /* consume queues and key look-ups: topics x (queue ids or keys), pair number pair */
  value_list topics, inner;
  int pair;
  int64_t deadline;    /* long poll: wait for a first row until then (monotonic ms); 0: no */
  sqlite3_stmt *probe; /* long poll: a statement stepped to learn of sqlite3_interrupt() */
  bool found;          /* a row was returned: no more waiting */
  /* key look-ups: the store times [key_begin, key_end] the index is asked for */
  int64_t key_begin, key_end;
  int64_t *offsets;
  int noffsets, ioffset;
  const char *key; /* the key looked up, in inner */
} store_cursor;

static int store_open(sqlite3_vtab *base, sqlite3_vtab_cursor **out) {
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

static void cursor_reset(store_cursor *c) {
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

static int store_close(sqlite3_vtab_cursor *base) {
  cursor_reset((store_cursor *)base);
  rmqx_body_done(&((store_cursor *)base)->body);
  sqlite3_free(base);
  return SQLITE_OK;
}

/*
** Load the record at offset into the cursor: RMQ_OK, RMQ_ENOTFOUND (no data
** there: expired, or past the end) or RMQ_ECORRUPT.
*/
static int read_record(store_cursor *c, int64_t offset) {
  rmq_commitlog_ref_release(&c->ref);
  c->props_found = false;
  rmq_err err = {0};
  return rmq_store_read(c->vt->store, offset, &c->ref, &c->m, &err);
}

/* Load the record at offset into the cursor; false when no valid record is there. */
static bool load_record(store_cursor *c, int64_t offset) {
  return read_record(c, offset) == RMQ_OK;
}

/*
** A cursor that held a deleted segment longer than clean_grace_ms reads
** zeros there: its row is an error, never those bytes. -1 while sound, else
** an offset in the segment taken away.
*/
static int64_t record_expired(const store_cursor *c) {
  if (c->plan == PLAN_SCAN || c->plan == PLAN_RANGE) return rmq_commitlog_iter_expired(&c->walk);
  return rmq_commitlog_ref_valid(&c->ref) ? -1 : c->m.physical_offset;
}

static const char expired_fmt[] = "the segment holding offset %lld was deleted by expiry while "
                                  "this cursor held it (longer than clean_grace_ms)";

/* ---- walks (offset range, scan) */

/*
** The next record of the walk, BLANKs skipped. An invalid record inside the
** written log is an error, never an end.
*/
static int walk_next(store_cursor *c) {
  rmq_commitlog_ref_release(&c->ref);
  rmq_commitlog_record rec;
  while (rmq_commitlog_iter_next(&c->walk, &rec)) {
    if (record_expired(c) >= 0) break;
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
  int64_t expired = record_expired(c);
  if (expired >= 0) return rmqx_vtab_error(&c->vt->base, expired_fmt, (long long)expired);
  c->eof = true;
  return SQLITE_OK;
}

/* ---- consume queue */

/* Wait for the dispatcher to cover everything appended before this query started. */
static int wait_dispatched(store_cursor *c) {
  rmq_err err = {0};
  if (rmq_store_wait_dispatched(c->vt->store, &err) != RMQ_OK) {
    return rmqx_vtab_error(&c->vt->base, "%s", err.msg);
  }
  return SQLITE_OK;
}

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

static const rmq_property_value *cursor_property(store_cursor *c, int which);

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
  const rmq_property_value *v = cursor_property(c, PROP_TAGS);
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
  int rc = read_record(c, e->phy_offset);
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
static int cq_next(store_cursor *c) {
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

/* The next record found for the current pair's key, then for the next pair's. */
static int key_next(store_cursor *c) {
  rmq_commitlog_ref_release(&c->ref);
  for (;;) {
    while (c->ioffset < c->noffsets) {
      if (load_record(c, c->offsets[c->ioffset++])) return SQLITE_OK;
    }
    if (++c->pair >= c->topics.n * c->inner.n) break;
    int rc = key_lookup(c);
    if (rc != SQLITE_OK) return rc;
  }
  c->eof = true;
  return SQLITE_OK;
}

/* ---- xFilter */

typedef struct filter_args {
  sqlite3_value *v[S_COUNT];
  sqlite3_value *limit, *offset; /* USE_LIMIT, USE_OFFSET */
} filter_args;

static int64_t arg_int(filter_args *a, int s, int64_t dflt) {
  return a->v[s] ? sqlite3_value_int64(a->v[s]) : dflt;
}

static const char *arg_text(filter_args *a, int s) {
  return a->v[s] ? (const char *)sqlite3_value_text(a->v[s]) : NULL;
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

/* Fill l with the values of argument s: its IN list's when idx has in, else its own. */
static int list_collect(value_list *l, filter_args *a, int s, int idx, int in) {
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

/* The integers an INTEGER column may hold under some bounds: [lo, hi). */
typedef struct range {
  int64_t lo, hi;
} range;

/* Narrow r by `column op v` (rmqx_bounds_narrow); v NULL: no such constraint. */
static void range_narrow(range *r, int op, sqlite3_value *v) {
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

/* The store_timestamp bounds a plan takes (lower bounds only). */
static range time_range(filter_args *a) {
  range ts = {INT64_MIN, INT64_MAX};
  range_narrow(&ts, SQLITE_INDEX_CONSTRAINT_GE, a->v[S_TS_GE]);
  range_narrow(&ts, SQLITE_INDEX_CONSTRAINT_GT, a->v[S_TS_GT]);
  return ts;
}

/* The wanted tags and their hash codes. */
static int cq_tags(store_cursor *c, filter_args *a, int idx) {
  c->has_tags = idx & BIT(S_TAGS);
  int rc = list_collect(&c->tags, a, S_TAGS, idx, IN_TAGS);
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

/*
** A key look-up: the store_timestamp bounds go to the index as [begin, end]
** (IndexService.queryOffset), so that KEY_QUERY_MAX counts only records in them.
*/
static int key_filter(store_cursor *c, filter_args *a) {
  int rc = wait_dispatched(c);
  if (rc != SQLITE_OK) return rc;
  range ts = time_range(a);
  range_narrow(&ts, SQLITE_INDEX_CONSTRAINT_LE, a->v[S_TS_LE]);
  range_narrow(&ts, SQLITE_INDEX_CONSTRAINT_LT, a->v[S_TS_LT]);
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

/* LIMIT and OFFSET (a negative LIMIT is none, as in SQLite), and the log's start for OFFSET. */
static void cq_limit(store_cursor *c, filter_args *a) {
  c->limit = a->limit ? sqlite3_value_int64(a->limit) : -1;
  if (c->limit < 0) c->limit = -1;
  c->skip = a->offset ? sqlite3_value_int64(a->offset) : 0;
  if (c->skip < 0) c->skip = 0;
  if (c->skip > 0) c->cl_min = rmq_store_min_offset(c->vt->store);
}

static int cq_filter(store_cursor *c, filter_args *a, int idx) {
  int rc = wait_dispatched(c);
  if (rc == SQLITE_OK) rc = list_collect(&c->topics, a, S_TOPIC, idx, IN_TOPIC);
  if (rc == SQLITE_OK) rc = list_collect(&c->inner, a, S_QUEUE, idx, IN_QUEUE);
  if (rc == SQLITE_OK) rc = cq_tags(c, a, idx);
  if (rc != SQLITE_OK) return rc;
  cq_limit(c, a);
  range q = {0, INT64_MAX}, ts = time_range(a);
  range_narrow(&q, SQLITE_INDEX_CONSTRAINT_EQ, a->v[S_QOFF_EQ]);
  range_narrow(&q, SQLITE_INDEX_CONSTRAINT_GE, a->v[S_QOFF_GE]);
  range_narrow(&q, SQLITE_INDEX_CONSTRAINT_GT, a->v[S_QOFF_GT]);
  range_narrow(&q, SQLITE_INDEX_CONSTRAINT_LE, a->v[S_QOFF_LE]);
  range_narrow(&q, SQLITE_INDEX_CONSTRAINT_LT, a->v[S_QOFF_LT]);
  if (ts.lo >= ts.hi) q.hi = q.lo;
  c->qoff_lo = q.lo;
  c->qoff_end = q.hi;
  c->ts_lo = ts.lo;
  if (c->topics.n == 0 || c->inner.n == 0 || (c->has_tags && c->tags.n == 0)) {
    c->eof = true;
    return SQLITE_OK;
  }
  /* wait_ms is capped at 2^31 ms (24 days) so that the deadline cannot overflow */
  int64_t wait_ms = arg_int(a, S_WAIT, 0);
  if (wait_ms > 0) c->deadline = rmq_monotonic_ms() + (wait_ms > INT32_MAX ? INT32_MAX : wait_ms);
  rc = cq_open_pair(c);
  return rc == SQLITE_OK ? cq_next(c) : rc;
}

static int walk_filter(store_cursor *c, filter_args *a) {
  range r = {INT64_MIN, INT64_MAX}, ts = time_range(a);
  range_narrow(&r, SQLITE_INDEX_CONSTRAINT_GE, a->v[S_OFF_GE]);
  range_narrow(&r, SQLITE_INDEX_CONSTRAINT_GT, a->v[S_OFF_GT]);
  range_narrow(&r, SQLITE_INDEX_CONSTRAINT_LE, a->v[S_OFF_LE]);
  range_narrow(&r, SQLITE_INDEX_CONSTRAINT_LT, a->v[S_OFF_LT]);
  if (ts.lo >= ts.hi || r.lo >= r.hi) {
    c->eof = true;
    return SQLITE_OK;
  }
  /* The walk starts at the segment that holds r.lo, or that can hold ts.lo when later. */
  rmq_commitlog_iter_start(&c->walk, c->vt->store, r.lo, r.hi, ts.lo, RMQ_CL_ITER_STRICT);
  return walk_next(c);
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

static int store_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str, int argc,
                        sqlite3_value **argv) {
  (void)idx_str;
  store_cursor *c = (store_cursor *)base;
  cursor_reset(c);
  if (idx_num & (DEFER_KEY | DEFER_WAIT)) {
    return rmqx_vtab_error(base->pVtab, "%s", idx_num & DEFER_KEY ? key_needs : wait_needs);
  }
  int rc = store_ready(c->vt);
  if (rc != SQLITE_OK) return rc;
  /*
  ** A read-only store reads what another process wrote since the last
  ** query, as far as that process's dispatcher got (rmq_store_wait_dispatched).
  */
  if (rmq_store_config(c->vt->store)->readonly && (rc = wait_dispatched(c)) != SQLITE_OK) return rc;
  c->eof = false;
  filter_args a = {.limit = NULL};
  int i = 0;
  for (int s = 0; s < S_COUNT && i < argc; s++) {
    if (idx_num & BIT(s)) a.v[s] = argv[i++];
  }
  if ((idx_num & USE_LIMIT) && i < argc) a.limit = argv[i++];
  if ((idx_num & USE_OFFSET) && i < argc) a.offset = argv[i++];
  int use = idx_num;
  c->plan = choose_plan(idx_num, &use);
  switch (c->plan) {
    case PLAN_OFFSET: return point_filter(c, arg_int(&a, S_OFFSET_EQ, -1));
    case PLAN_MSGID: return msgid_filter(c, arg_text(&a, S_MSGID));
    case PLAN_KEY:
    case PLAN_UNIQ:
      rc = list_collect(&c->topics, &a, S_TOPIC, idx_num, IN_TOPIC);
      if (rc == SQLITE_OK) {
        rc = list_collect(&c->inner, &a, c->plan == PLAN_KEY ? S_KEY : S_UNIQ, idx_num, IN_KEY);
      }
      return rc == SQLITE_OK ? key_filter(c, &a) : rc;
    case PLAN_CQ: return cq_filter(c, &a, idx_num);
    default: return walk_filter(c, &a);
  }
}

static int store_next(sqlite3_vtab_cursor *base) {
  store_cursor *c = (store_cursor *)base;
  switch (c->plan) {
    case PLAN_OFFSET:
    case PLAN_MSGID:
      rmq_commitlog_ref_release(&c->ref);
      c->eof = true;
      return SQLITE_OK;
    case PLAN_KEY:
    case PLAN_UNIQ: return key_next(c);
    case PLAN_CQ: return cq_next(c);
    default: return walk_next(c);
  }
}

static int store_eof(sqlite3_vtab_cursor *base) { return ((store_cursor *)base)->eof; }

static int store_rowid(sqlite3_vtab_cursor *base, sqlite3_int64 *rowid) {
  *rowid = ((store_cursor *)base)->m.physical_offset;
  return SQLITE_OK;
}

/* ---- xColumn */

static const rmq_property_value *cursor_property(store_cursor *c, int which) {
  if (!c->props_found) {
    rmq_properties_find(c->m.properties, (size_t)c->m.properties_len, shown_properties, PROP_COUNT,
                        c->props);
    c->props_found = true;
  }
  return &c->props[which];
}

static void result_property(sqlite3_context *ctx, store_cursor *c, int which) {
  const rmq_property_value *v = cursor_property(c, which);
  if (v->value) rmqx_result_text_or_blob(ctx, v->value, (int)v->len, SQLITE_TRANSIENT);
}

static void result_properties(sqlite3_context *ctx, const rmq_message *m) {
  char *json = rmqx_properties_json(m->properties, (size_t)m->properties_len);
  if (json) {
    rmqx_result_text_or_blob(ctx, json, -1, sqlite3_free);
  } else {
    sqlite3_result_error_nomem(ctx);
  }
}

static void result_host(sqlite3_context *ctx, const rmq_host *h) {
  char buf[64];
  rmq_host_format(h, buf, sizeof buf);
  sqlite3_result_text(ctx, buf, -1, SQLITE_TRANSIENT);
}

static int store_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  store_cursor *c = (store_cursor *)base;
  const rmq_message *m = &c->m;
  char id[RMQ_MSG_ID_MAX];
  switch (col) {
    case COL_COMMITLOG_OFFSET: sqlite3_result_int64(ctx, m->physical_offset); break;
    case COL_SIZE: sqlite3_result_int(ctx, m->total_size); break;
    case COL_MSG_ID:
      rmq_msg_id_format(&m->store_host, m->physical_offset, id);
      sqlite3_result_text(ctx, id, -1, SQLITE_TRANSIENT);
      break;
    case COL_UNIQ_KEY: result_property(ctx, c, PROP_UNIQ_KEY); break;
    case COL_TOPIC: rmqx_result_text_or_blob(ctx, m->topic, m->topic_len, SQLITE_TRANSIENT); break;
    case COL_QUEUE_ID: sqlite3_result_int(ctx, m->queue_id); break;
    case COL_QUEUE_OFFSET: sqlite3_result_int64(ctx, m->queue_offset); break;
    case COL_TAGS: result_property(ctx, c, PROP_TAGS); break;
    case COL_KEYS: result_property(ctx, c, PROP_KEYS); break;
    case COL_BODY: rmqx_result_body(ctx, &c->body, m, false); break;
    case COL_BODY_TEXT: rmqx_result_body(ctx, &c->body, m, true); break;
    case COL_BODY_RAW: sqlite3_result_blob(ctx, m->body, m->body_len, SQLITE_TRANSIENT); break;
    case COL_PROPERTIES: result_properties(ctx, m); break;
    case COL_FLAG: sqlite3_result_int(ctx, m->flag); break;
    case COL_SYS_FLAG: sqlite3_result_int(ctx, m->sys_flag); break;
    case COL_BODY_CRC: sqlite3_result_int(ctx, m->body_crc); break;
    case COL_BORN_TIMESTAMP: sqlite3_result_int64(ctx, m->born_timestamp); break;
    case COL_BORN_HOST: result_host(ctx, &m->born_host); break;
    case COL_STORE_TIMESTAMP: sqlite3_result_int64(ctx, m->store_timestamp); break;
    case COL_STORE_HOST: result_host(ctx, &m->store_host); break;
    case COL_RECONSUME_TIMES: sqlite3_result_int(ctx, m->reconsume_times); break;
    case COL_PREPARED_TX_OFFSET: sqlite3_result_int64(ctx, m->prepared_transaction_offset); break;
    case COL_DELAY_LEVEL: {
      const rmq_property_value *v = cursor_property(c, PROP_DELAY);
      char level[24]; /* the value is not NUL-terminated in the log */
      if (v->value) {
        snprintf(level, sizeof level, "%.*s", (int)v->len, v->value);
        sqlite3_result_int64(ctx, strtoll(level, NULL, 10));
      }
      break;
    }
    case COL_KEY:
      if (c->key) sqlite3_result_text(ctx, c->key, -1, SQLITE_TRANSIENT);
      break;
    case COL_WAIT_MS: break;
  }
  int64_t expired = record_expired(c);
  if (expired >= 0) rmqx_result_error(ctx, expired_fmt, (long long)expired);
  return SQLITE_OK;
}

/* ------------------------------------------------------------- INSERT */

/* An engine call's outcome as SQLite's: a full disk is SQLITE_FULL. */
static int put_result(store_vtab *vt, int rc, const rmq_err *err) {
  if (rc == RMQ_OK) return SQLITE_OK;
  rmqx_vtab_error(&vt->base, "%s", err->msg);
  return rc == RMQ_EFULL ? SQLITE_FULL : SQLITE_ERROR;
}

/* The values of an INSERT's columns, by name. */
static rmqx_row row_values(sqlite3_value *rowid, sqlite3_value **c) {
  return (rmqx_row){.rowid = rowid,
                    .topic = c[COL_TOPIC],
                    .queue_id = c[COL_QUEUE_ID],
                    .tags = c[COL_TAGS],
                    .keys = c[COL_KEYS],
                    .uniq_key = c[COL_UNIQ_KEY],
                    .body = c[COL_BODY],
                    .properties = c[COL_PROPERTIES],
                    .delay_level = c[COL_DELAY_LEVEL],
                    .flag = c[COL_FLAG],
                    .born_timestamp = c[COL_BORN_TIMESTAMP],
                    .born_host = c[COL_BORN_HOST],
                    .commitlog_offset = c[COL_COMMITLOG_OFFSET],
                    .size = c[COL_SIZE],
                    .msg_id = c[COL_MSG_ID],
                    .queue_offset = c[COL_QUEUE_OFFSET],
                    .body_text = c[COL_BODY_TEXT],
                    .sys_flag = c[COL_SYS_FLAG],
                    .body_crc = c[COL_BODY_CRC],
                    .store_timestamp = c[COL_STORE_TIMESTAMP],
                    .store_host = c[COL_STORE_HOST],
                    .reconsume_times = c[COL_RECONSUME_TIMES],
                    .prepared_transaction_offset = c[COL_PREPARED_TX_OFFSET],
                    .body_raw = c[COL_BODY_RAW],
                    .key = c[COL_KEY],
                    .wait_ms = c[COL_WAIT_MS]};
}

/*
** Check one inserted row (row.c) and add it to the batch. The engine's own
** checks are limits too (a delayed message's grown properties).
*/
static int build_row(store_vtab *vt, sqlite3_value *rowid, sqlite3_value **cols, char **errmsg) {
  rmqx_row row = row_values(rowid, cols);
  rmqx_row_message msg;
  int rc = rmqx_row_message_build(&vt->row, rmq_store_config(vt->store), &row, &msg, errmsg);
  if (rc != SQLITE_OK) return rc;
  rmq_err err = {0};
  rc = rmq_batch_add(vt->batch, &msg.m, &err);
  if (rc == RMQ_OK) return SQLITE_OK;
  if (rc == RMQ_ENOMEM) return SQLITE_NOMEM;
  return rmqx_errmsg(errmsg, SQLITE_CONSTRAINT, "%s", err.msg);
}

static int store_update(sqlite3_vtab *base, int argc, sqlite3_value **argv, sqlite3_int64 *rowid) {
  store_vtab *vt = (store_vtab *)base;
  if (argc == 1 || sqlite3_value_type(argv[0]) != SQLITE_NULL) {
    return rmqx_vtab_error(base, "%s",
                           "rocketmq tables are append-only: messages are immutable, so "
                           "UPDATE and DELETE are not supported; a message leaves the store "
                           "only when its commit-log file expires (file_reserved_hours, "
                           "delete_when, disk_max_used_ratio; rocketmq_clean())");
  }
  int rc = store_ready(vt);
  if (rc != SQLITE_OK) return rc;
  if (vt->readonly) {
    /* The engine may be a writable one shared with another table: refuse here. */
    rmqx_vtab_error(base, "store %s is open read-only (readonly=1): INSERT is not allowed",
                    rmq_store_dir(vt->store));
    return SQLITE_READONLY;
  }
  char *errmsg = NULL;
  rc = build_row(vt, argv[1], argv + 2, &errmsg);
  if (rc == SQLITE_CONSTRAINT && sqlite3_vtab_on_conflict(vt->db) == SQLITE_IGNORE) {
    /*
    ** SQLite skips the row itself when it gets SQLITE_CONSTRAINT under OR
    ** IGNORE; SQLITE_OK would count it in changes() and make
    ** last_insert_rowid() the unset rowid (0, another message's offset).
    */
    sqlite3_free(errmsg);
    return SQLITE_CONSTRAINT;
  }
  if (rc != SQLITE_OK) {
    sqlite3_free(base->zErrMsg);
    base->zErrMsg = errmsg;
    return rc;
  }
  if (!sqlite3_get_autocommit(vt->db)) {
    /* Offsets are assigned at COMMIT, when the batch is appended. */
    *rowid = -1;
    return SQLITE_OK;
  }
  /*
  ** The statement's flush is awaited once, at its end (xSync): INSERT ...
  ** SELECT flushes once. Its later rows continue a run (the write window).
  */
  int64_t offset = 0, end = vt->unflushed_end;
  rmq_err err = {0};
  bool waits = rmq_batch_waits(vt->batch);
  rc = put_result(vt, rmq_batch_append_unflushed(vt->batch, &offset, &end, &err), &err);
  rmq_batch_clear(vt->batch);
  if (rc == SQLITE_OK) {
    *rowid = offset;
    vt->unflushed_end = end;
    vt->unflushed_waits |= waits;
  }
  return rc;
}

/* --------------------------------------------------------- transactions */

/* A write statement begins here: the store's error, if it cannot be opened, comes first. */
static int store_begin(sqlite3_vtab *base) { return store_ready((store_vtab *)base); }

/*
** The autocommit rows of the statement ending are on disk (flush='sync')
** before it reports success, as they were when each waited for itself,
** unless none of them waits (WAIT=false): they are then readable, and on
** disk soon after.
*/
static int wait_flushed(store_vtab *vt) {
  if (vt->unflushed_end == 0) return SQLITE_OK;
  int64_t end = vt->unflushed_end;
  bool wait = vt->unflushed_waits;
  vt->unflushed_end = 0;
  vt->unflushed_waits = false;
  rmq_err err = {0};
  return put_result(vt, rmq_store_handle_flush(vt->store, end, wait, &err), &err);
}

/*
** COMMIT appends the transaction's rows here, so that a failure can still
** roll it back. The batch is empty once appended: a COMMIT that then fails
** on the database file (SQLITE_BUSY) stays open and calls xSync again when
** retried, which must not append the rows a second time.
*/
static int store_sync(sqlite3_vtab *base) {
  store_vtab *vt = (store_vtab *)base;
  int64_t first;
  rmq_err err = {0};
  int rc = wait_flushed(vt);
  if (rc != SQLITE_OK) return rc;
  return put_result(vt, rmq_batch_append(vt->batch, &first, &err), &err);
}

static int store_commit(sqlite3_vtab *base) {
  store_vtab *vt = (store_vtab *)base;
  rmq_batch_clear(vt->batch);
  rmq_batch_release(vt->batch, 0);
  return SQLITE_OK;
}

/* A failed statement's rows appended before the failure are made durable all the same. */
static int store_rollback(sqlite3_vtab *base) {
  wait_flushed((store_vtab *)base);
  return store_commit(base);
}

static int store_savepoint(sqlite3_vtab *base, int level) {
  store_vtab *vt = (store_vtab *)base;
  rmq_err err = {0};
  return rmq_batch_savepoint(vt->batch, level, &err) == RMQ_OK ? SQLITE_OK : SQLITE_NOMEM;
}

/*
** Level -1 is the transaction itself: ROLLBACK TO a savepoint that began the
** transaction (SAVEPOINT outside BEGIN) drops every row, and its RELEASE
** closes every level.
*/
static int store_release(sqlite3_vtab *base, int level) {
  rmq_batch_release(((store_vtab *)base)->batch, level < 0 ? 0 : level);
  return SQLITE_OK;
}

static int store_rollback_to(sqlite3_vtab *base, int level) {
  store_vtab *vt = (store_vtab *)base;
  if (level < 0) {
    rmq_batch_clear(vt->batch);
  } else {
    rmq_batch_rollback_to(vt->batch, level);
  }
  return SQLITE_OK;
}

static int store_rename(sqlite3_vtab *base, const char *name) {
  (void)base;
  (void)name;
  return SQLITE_OK;
}

static sqlite3_module store_module = {
    .iVersion = 2,
    .xCreate = store_create,
    .xConnect = store_connect,
    .xBestIndex = store_best_index,
    .xDisconnect = store_disconnect,
    .xDestroy = store_destroy,
    .xOpen = store_open,
    .xClose = store_close,
    .xFilter = store_filter,
    .xNext = store_next,
    .xEof = store_eof,
    .xColumn = store_column,
    .xRowid = store_rowid,
    .xUpdate = store_update,
    .xBegin = store_begin,
    .xSync = store_sync,
    .xCommit = store_commit,
    .xRollback = store_rollback,
    .xRename = store_rename,
    .xSavepoint = store_savepoint,
    .xRelease = store_release,
    .xRollbackTo = store_rollback_to,
};

int rmqx_register_store_table(sqlite3 *db) {
  return sqlite3_create_module_v2(db, "rocketmq", &store_module, 0, 0);
}
