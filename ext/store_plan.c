/*
** store_plan.c: the SELECT plans of the rocketmq table (vtab_store.c),
** chosen in xBestIndex and run by xFilter (store_filter.c). idxNum holds
** one bit per constraint slot used and the bits of store_table.h; idxStr
** names the plan for EXPLAIN QUERY PLAN:
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
#include "store_table.h"

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
      /* = X starts the time search at X as BETWEEN X AND X does; SQLite checks the rest. */
      if (eq) return S_TS_GE;
      if (r == RMQX_RANGE_GE || r == RMQX_RANGE_GT) return S_TS_GE + r - RMQX_RANGE_GE;
      return r == RMQX_RANGE_LE || r == RMQX_RANGE_LT ? S_TS_LE + r - RMQX_RANGE_LE : -1;
    default: return -1;
  }
}

/*
** The slots each plan takes from what is available. key and wait_ms have no
** column value that SQLite could re-check, so the plans that use them come
** before the cheaper point reads: a point read would ignore them and every
** row would then fail `key = ?`.
*/
plan rmqx_store_choose_plan(int avail, int *use) {
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
** is priced out and fails when run (DEFER_KEY, DEFER_WAIT in idxNum:
** rmqx_store_plan_check), so that SQLite prefers a plan that works:
** `(key = 'a' OR key = 'b')` is also planned branch by branch, where a
** branch lacks topic = ?, and as `key IN ('a', 'b')`, which works.
*/
#define COST_UNUSABLE 1e300

static const char key_needs[] = "key = ? needs topic = ? in the same query: the index holds "
                                "topic#key";
static const char wait_needs[] = "wait_ms = ? needs topic = ? AND queue_id = ? (and no key = ?) "
                                 "in the same query: it long-polls one consume queue";

int rmqx_store_plan_check(sqlite3_vtab *vt, int idx_num) {
  if (!(idx_num & (DEFER_KEY | DEFER_WAIT))) return SQLITE_OK;
  return rmqx_vtab_error(vt, "%s", idx_num & DEFER_KEY ? key_needs : wait_needs);
}

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

int rmqx_store_best_index(sqlite3_vtab *base, sqlite3_index_info *info) {
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
  plan p = rmqx_store_choose_plan(avail, &use);
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
