/*
** store_table.h: what the files of the rocketmq table share: vtab_store.c
** (the module, connecting, xColumn), store_plan.c (xBestIndex),
** store_cursor.c (the cursor and what every plan reads through),
** store_filter.c (xFilter and xNext), store_cq.c (the consume-queue plan)
** and store_insert.c (INSERT and transactions). Their functions called
** from another of these files are named rmqx_store_*. The calls go one
** way: vtab_store.c calls the others (its module names their methods),
** store_filter.c calls store_plan.c, store_cq.c and store_cursor.c, and
** store_cq.c calls store_cursor.c.
*/
#ifndef STORE_TABLE_H
#define STORE_TABLE_H

#include "rmq_ext.h"

/* The columns, in the order of STORE_SCHEMA (vtab_store.c). */
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
** The store open and its batch made, or the error why not: a table that
** could not open its store when it connected (vtab_store.c) tries again
** in each statement that uses it, in xFilter, xBegin and xUpdate. Defined
** here rather than in vtab_store.c, which calls the files that need it.
*/
static inline int store_ready(store_vtab *vt) {
  rmq_err err = {0};
  if (vt->store && rmq_store_check_process(vt->store, &err) != RMQ_OK) {
    return rmqx_vtab_error(&vt->base, "%s", err.msg);
  }
  if (vt->batch) return SQLITE_OK;
  if (!vt->store && rmq_store_acquire(vt->dir, &vt->cfg, &vt->store, &err) != RMQ_OK) {
    return rmqx_vtab_error(&vt->base, "%s", err.msg);
  }
  return (vt->batch = rmq_batch_new(vt->store)) ? SQLITE_OK : SQLITE_NOMEM;
}

/* ------------------------------------------------- plans (store_plan.c) */

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
** idxNum bits beyond the slots' (BIT(s)): an IN list xFilter iterates
** itself (sqlite3_vtab_in), LIMIT and OFFSET taken by the consume-queue
** plan, and a search input (key, wait_ms) that the plan cannot serve,
** whose error xFilter gives (store_plan.c says when).
*/
#define IN_TOPIC (1 << 21)
#define IN_QUEUE (1 << 22)
#define IN_TAGS (1 << 23)
#define IN_KEY (1 << 24)
#define USE_LIMIT (1 << 25)
#define USE_OFFSET (1 << 26)
_Static_assert(S_COUNT <= 21, "the slots' bits reach IN_TOPIC");
#define DEFER_KEY (1 << 29)
#define DEFER_WAIT (1 << 30)

/* xBestIndex. */
int rmqx_store_best_index(sqlite3_vtab *vt, sqlite3_index_info *info);
/* The plan for the slots in avail, and in *use the slots it takes. */
plan rmqx_store_choose_plan(int avail, int *use);
/* xFilter: the error of a plan that a DEFER_* bit marks, else SQLITE_OK. */
int rmqx_store_plan_check(sqlite3_vtab *vt, int idx_num);

/* ------------------------------------------ the cursor (store_cursor.c) */

/* The properties columns show, in store_cursor.props. */
enum { PROP_UNIQ_KEY, PROP_TAGS, PROP_KEYS, PROP_DELAY, PROP_COUNT };

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

/* xFilter's arguments by slot (NULL: not in the plan). */
typedef struct filter_args {
  sqlite3_value *v[S_COUNT];
  sqlite3_value *limit, *offset; /* USE_LIMIT, USE_OFFSET */
} filter_args;

/* The integers an INTEGER column may hold under some bounds: [lo, hi). */
typedef struct range {
  int64_t lo, hi;
} range;

/* The error of a row whose segment expiry took away (rmqx_store_record_expired). */
#define STORE_EXPIRED_MESSAGE                                                                \
  "the segment holding offset %lld was deleted by expiry while this cursor held it (longer " \
  "than clean_grace_ms)"

/* xOpen and xClose. */
int rmqx_store_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out);
int rmqx_store_close(sqlite3_vtab_cursor *cur);
/* Let go of what the last xFilter held; the cursor is at its end. */
void rmqx_store_cursor_reset(store_cursor *c);
/*
** Load the record at offset into the cursor: RMQ_OK, RMQ_ENOTFOUND (no data
** there: expired, or past the end) or RMQ_ECORRUPT.
*/
int rmqx_store_read_record(store_cursor *c, int64_t offset);
/* A property of the current record (PROP_*): its value is NULL when it has none. */
const rmq_property_value *rmqx_store_property(store_cursor *c, int which);
/* -1 while the current record is sound, else an offset of the segment expiry took away. */
int64_t rmqx_store_record_expired(const store_cursor *c);
/* Wait for the dispatcher to cover everything appended before this query started. */
int rmqx_store_wait_dispatched(store_cursor *c);

/* The integer argument of slot s, or dflt when the plan has none. */
int64_t rmqx_store_arg_int(filter_args *a, int s, int64_t dflt);
/* Fill l with the values of argument s: its IN list's when idx has in, else its own. */
int rmqx_store_list_collect(value_list *l, filter_args *a, int s, int idx, int in);
/* Narrow r by `column op v` (rmqx_bounds_narrow); v NULL: no such constraint. */
void rmqx_store_range_narrow(range *r, int op, sqlite3_value *v);
/* The store_timestamp bounds a plan takes (lower bounds only). */
range rmqx_store_time_range(filter_args *a);

/* ---------------------------------- the consume-queue plan (store_cq.c) */

/* Start the plan: the queues, tags, bounds, LIMIT and OFFSET of a, then the first row. */
int rmqx_store_cq_filter(store_cursor *c, filter_args *a, int idx);
/* The next row. */
int rmqx_store_cq_next(store_cursor *c);

/* -------------------------------------- running a plan (store_filter.c) */

int rmqx_store_filter(sqlite3_vtab_cursor *cur, int idx_num, const char *idx_str, int argc,
                      sqlite3_value **argv);
int rmqx_store_next(sqlite3_vtab_cursor *cur);
int rmqx_store_eof(sqlite3_vtab_cursor *cur);
int rmqx_store_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *rowid);

/* ----------------------------- INSERT and transactions (store_insert.c) */

int rmqx_store_update(sqlite3_vtab *vt, int argc, sqlite3_value **argv, sqlite3_int64 *rowid);
int rmqx_store_begin(sqlite3_vtab *vt);
int rmqx_store_sync(sqlite3_vtab *vt);
int rmqx_store_commit(sqlite3_vtab *vt);
int rmqx_store_rollback(sqlite3_vtab *vt);
int rmqx_store_savepoint(sqlite3_vtab *vt, int level);
int rmqx_store_release(sqlite3_vtab *vt, int level);
int rmqx_store_rollback_to(sqlite3_vtab *vt, int level);

#endif
