/*
** vtab_verify.c: rocketmq_verify, every defect of a store, read-only.
**
** Usage:
**
**    SELECT * FROM rocketmq_verify('path/to/store');   -- no rows: a sound store
**    SELECT kind, count(*) FROM rocketmq_verify('path/to/store') GROUP BY kind;
**
** An eponymous, table-valued, read-only virtual table: `dir` is a HIDDEN
** column given as the first argument (or `dir = ?`); without it the query
** fails with "rocketmq_verify: missing argument dir; use
** rocketmq_verify('path/to/store')". It reads the live store when this
** process has dir open (rocketmq table), after the dispatcher caught up,
** and otherwise opens the files read-only, including a store written by
** Apache RocketMQ. It never writes a byte. It is SQLITE_VTAB_DIRECTONLY.
**
** Columns, one row per defect, in the order found (rowid = that order):
**
**    file      the file, relative to dir ("commitlog/00000000000000000000",
**              "consumequeue/TopicA/0/00000000000000000000",
**              "index/20261129085724620", "checkpoint"); "" for the store
**    offset    the byte offset in that file; NULL when the defect is the
**              file itself (its name or size)
**    kind      what is wrong (rmq.h lists them): file_name, file_size, crc,
**              length, magic, blank, cq_offset, cq_size, cq_tags, cq_queue,
**              cq_queue_offset, cq_duplicate, cq_gap, index_entry,
**              checkpoint; unreadable when the files cannot be opened as a
**              store at all
**    detail    a sentence: what was found, what was expected
**
** How it works (rmq_verify, engine/verify.c): the names and sizes of the
** files are checked first, with stat alone; then the store's contents: the
** commit log in one sequential pass with the CRC of every body checked,
** each consume-queue entry and index item against the record it leads to,
** and the checkpoint against the records' store times. A store that is not
** open here is opened read-only without recovery (the check reads every
** record once itself). A file of the wrong size or a missing segment stops
** that open: the contents are then not checked, and an `unreadable` row
** says why. All rows are found in xFilter (a check is one pass over the
** store), then returned.
*/

#include "rmq_ext.h"

#define VF_SCHEMA "CREATE TABLE x(file TEXT, offset INTEGER, kind TEXT, detail TEXT, dir HIDDEN)"

enum { COL_FILE, COL_OFFSET, COL_KIND, COL_DETAIL, COL_DIR };

typedef struct vf_row {
  char *file, *kind, *detail; /* sqlite3_malloc'd */
  int64_t offset;             /* -1: NULL */
} vf_row;

typedef struct vf_cursor {
  sqlite3_vtab_cursor base;
  char *dir;
  vf_row *rows;
  int n, cap, at;
} vf_cursor;

static int vf_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  bool ready;
  int rc = rmqx_tvf_best_index(vt, info, &ready);
  if (rc != SQLITE_OK || !ready) return rc;
  info->idxStr = "verify";
  info->estimatedCost = 1e6;
  info->estimatedRows = 10;
  return SQLITE_OK;
}

static void clear_rows(vf_cursor *c) {
  for (int i = 0; i < c->n; i++) {
    sqlite3_free(c->rows[i].file);
    sqlite3_free(c->rows[i].kind);
    sqlite3_free(c->rows[i].detail);
  }
  sqlite3_free(c->rows);
  c->rows = NULL;
  c->n = c->cap = c->at = 0;
}

/* The engine's rmq_defect_fn: keep a copy of the defect as a row. */
static int add_row(void *ctx, const rmq_defect *d) {
  vf_cursor *c = ctx;
  if (c->n == c->cap) {
    int cap = c->cap ? c->cap * 2 : 16;
    vf_row *grown = sqlite3_realloc64(c->rows, (sqlite3_uint64)cap * sizeof *grown);
    if (grown == NULL) return RMQ_ENOMEM;
    c->rows = grown;
    c->cap = cap;
  }
  vf_row *r = &c->rows[c->n];
  /* A damaged name or record may quote any bytes: those that are not UTF-8 become \xHH. */
  rmqx_errmsg(&r->file, SQLITE_OK, "%s", d->file);
  r->kind = sqlite3_mprintf("%s", d->kind);
  rmqx_errmsg(&r->detail, SQLITE_OK, "%s", d->detail);
  r->offset = d->offset;
  c->n++;
  return r->file && r->kind && r->detail ? RMQ_OK : RMQ_ENOMEM;
}

static int vf_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  (void)vt;
  return rmqx_tvf_cursor_new(sizeof(vf_cursor), out) ? SQLITE_OK : SQLITE_NOMEM;
}

static int vf_close(sqlite3_vtab_cursor *cur) {
  vf_cursor *c = (vf_cursor *)cur;
  clear_rows(c);
  sqlite3_free(c->dir);
  sqlite3_free(c);
  return SQLITE_OK;
}

static int vf_filter(sqlite3_vtab_cursor *cur, int idx, const char *idx_str, int argc,
                     sqlite3_value **argv) {
  (void)idx_str;
  (void)argc;
  vf_cursor *c = (vf_cursor *)cur;
  int rc = rmqx_tvf_check_args(cur->pVtab, idx);
  if (rc != SQLITE_OK) return rc;
  clear_rows(c);
  sqlite3_free(c->dir);
  int nul_at;
  const char *dir = rmqx_value_cstr(argv[0], &nul_at);
  if (dir == NULL)
    return rmqx_vtab_error(cur->pVtab, "rocketmq_verify: the store directory is NULL");
  if (nul_at >= 0) {
    return rmqx_vtab_error(cur->pVtab, RMQX_NUL_MESSAGE, "rocketmq_verify", "dir", nul_at, dir,
                           "path");
  }
  if ((c->dir = sqlite3_mprintf("%s", dir)) == NULL) return SQLITE_NOMEM;
  rmq_err err = {0};
  if (rmq_verify(c->dir, add_row, c, &err) != RMQ_OK) {
    clear_rows(c);
    if (err.code == RMQ_ENOMEM) return SQLITE_NOMEM;
    return rmqx_vtab_error(cur->pVtab, "rocketmq_verify: %s", err.msg);
  }
  return SQLITE_OK;
}

static int vf_next(sqlite3_vtab_cursor *cur) {
  ((vf_cursor *)cur)->at++;
  return SQLITE_OK;
}

static int vf_eof(sqlite3_vtab_cursor *cur) {
  vf_cursor *c = (vf_cursor *)cur;
  return c->at >= c->n;
}

static int vf_rowid(sqlite3_vtab_cursor *cur, sqlite_int64 *rowid) {
  *rowid = ((vf_cursor *)cur)->at + 1;
  return SQLITE_OK;
}

static int vf_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col) {
  vf_cursor *c = (vf_cursor *)cur;
  const vf_row *r = &c->rows[c->at];
  switch (col) {
    case COL_FILE: sqlite3_result_text(ctx, r->file, -1, SQLITE_TRANSIENT); break;
    case COL_OFFSET:
      if (r->offset >= 0) sqlite3_result_int64(ctx, r->offset);
      break;
    case COL_KIND: sqlite3_result_text(ctx, r->kind, -1, SQLITE_TRANSIENT); break;
    case COL_DETAIL: sqlite3_result_text(ctx, r->detail, -1, SQLITE_TRANSIENT); break;
    case COL_DIR: sqlite3_result_text(ctx, c->dir, -1, SQLITE_TRANSIENT); break;
  }
  return SQLITE_OK;
}

static sqlite3_module vf_module = {
    .iVersion = 0,
    .xConnect = rmqx_tvf_connect,
    .xBestIndex = vf_best_index,
    .xDisconnect = rmqx_tvf_disconnect,
    .xOpen = vf_open,
    .xClose = vf_close,
    .xFilter = vf_filter,
    .xNext = vf_next,
    .xEof = vf_eof,
    .xColumn = vf_column,
    .xRowid = vf_rowid,
};

static const char *const vf_args[] = {"dir"};

static const rmqx_tvf vf_tvf = {
    .name = "rocketmq_verify",
    .schema = VF_SCHEMA,
    .arg_col = COL_DIR,
    .n_args = 1,
    .n_required = 1,
    .arg_names = vf_args,
    .usage = "rocketmq_verify('path/to/store')",
    .no_args_plan = "no dir",
    .range_col = -1,
};

int rmqx_register_verify_table(sqlite3 *db) { return rmqx_tvf_register(db, &vf_module, &vf_tvf); }
