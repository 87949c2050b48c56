/*
** vtab_files.c: rocketmq_files, every file of a store and what the next
** clean pass would do to it, read-only: the dry run an operator reads
** before rocketmq_clean().
**
** Usage:
**
**    SELECT * FROM rocketmq_files('path/to/store');
**    SELECT path, reason FROM rocketmq_files('path/to/store') WHERE would_delete;
**    SELECT kind, count(*), sum(disk_bytes) FROM rocketmq_files('path/to/store') GROUP BY kind;
**
** An eponymous, table-valued, read-only virtual table whose HIDDEN column
** dir, the argument, is required ("rocketmq_files: missing argument dir;
** use rocketmq_files('path/to/store')"). Like the other companion tables it
** reads the live store when this process has dir open, and otherwise the
** files opened read-only; it is SQLITE_VTAB_DIRECTONLY.
**
** Columns, one row per file under dir (symbolic links not followed):
**
**    kind          'commitlog', 'consumequeue', 'index', 'checkpoint',
**                  'abort', 'lock', 'config' or 'other'
**    path          relative to dir ('commitlog/00000000000000000000')
**    first_offset  the commit-log offset a commit-log segment starts at;
**                  the queue offset of a consume-queue file's first entry;
**                  an index file's first commit-log offset; NULL for the
**                  others
**    size          the file's size in bytes
**    disk_bytes    the disk space it takes (allocated blocks: a
**                  pre-allocated segment is sparse until written)
**    mtime         its modification time, ms since the epoch
**    expires_at    when a commit-log segment is old enough to delete
**                  (mtime + file_reserved_hours), ms since the epoch; NULL
**                  for the files that go with the commit log
**    would_delete  1 when the next periodic clean pass (CleanCommitLogService,
**                  then CleanConsumeQueueService and the index files)
**                  deletes it, else 0: it honours delete_when, the disk's
**                  use against disk_max_used_ratio and
**                  disk_clean_forcibly_ratio, and keeps the current segment
**    reason        why it would be deleted, or why it is kept (TEXT)
**
** rocketmq_clean() runs a pass at any hour, so it may delete files that
** show would_delete 0 only because the hour is not in delete_when. A store
** that no table of this process has open is judged by RocketMQ's default
** settings (file_reserved_hours 72, delete_when '04', the default ratios).
**
** How it works: xFilter lists every file once (rmq_store_files) into a
** snapshot, after the dispatcher caught up (the consume-queue and index
** files of every message inserted before the query are there); nothing is
** changed. idxNum is 1 when dir was given and 0 for
** the plan without it, which fails in xFilter; idxStr is "files" or "no dir".
*/
#include <string.h>

#include "rmq_ext.h"

#define FL_SCHEMA                                                                        \
  "CREATE TABLE x(kind TEXT, path TEXT, first_offset INTEGER, size INTEGER,"             \
  " disk_bytes INTEGER, mtime INTEGER, expires_at INTEGER, would_delete INTEGER, reason" \
  " TEXT, dir HIDDEN)"

enum {
  COL_KIND,
  COL_PATH,
  COL_FIRST_OFFSET,
  COL_SIZE,
  COL_DISK_BYTES,
  COL_MTIME,
  COL_EXPIRES_AT,
  COL_WOULD_DELETE,
  COL_REASON,
  COL_DIR
};

typedef struct fl_row {
  const char *kind; /* one of the engine's static names */
  char *path, *reason;
  int64_t first_offset, size, disk_bytes, mtime, expires_at;
  bool would_delete;
} fl_row;

typedef struct fl_cursor {
  sqlite3_vtab_cursor base;
  rmqx_tvf_dir src; /* dir, its store open only during xFilter */
  fl_row *rows;
  int n, cap, i;
} fl_cursor;

static int fl_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  bool ready;
  int rc = rmqx_tvf_best_index(vt, info, &ready);
  if (rc != SQLITE_OK) return rc;
  info->estimatedRows = 1000;
  if (!ready) return SQLITE_OK; /* priced out by rmqx_tvf_best_index */
  info->idxStr = "files";
  info->estimatedCost = 10000;
  return SQLITE_OK;
}

static int fl_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  (void)vt;
  return rmqx_tvf_cursor_new(sizeof(fl_cursor), out) ? SQLITE_OK : SQLITE_NOMEM;
}

static void clear_rows(fl_cursor *c) {
  for (int i = 0; i < c->n; i++) {
    sqlite3_free(c->rows[i].path);
    sqlite3_free(c->rows[i].reason);
  }
  sqlite3_free(c->rows);
  rmqx_tvf_dir_close(&c->src);
  c->rows = NULL;
  c->n = c->cap = c->i = 0;
}

static int fl_close(sqlite3_vtab_cursor *cur) {
  clear_rows((fl_cursor *)cur);
  sqlite3_free(cur);
  return SQLITE_OK;
}

/* The kind names are the engine's static strings, but "other" may be anything. */
static const char *kind_name(const char *kind) {
  static const char *const kinds[] = {"commitlog", "consumequeue", "index",  "checkpoint", "abort",
                                      "lock",      "shared",       "config", "other"};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    if (strcmp(kinds[i], kind) == 0) return kinds[i];
  }
  return "other";
}

static int add_row(void *ctx, const rmq_file_info *f) {
  fl_cursor *c = ctx;
  if (c->n == c->cap) {
    int cap = c->cap ? c->cap * 2 : 64;
    fl_row *rows = sqlite3_realloc64(c->rows, (sqlite3_uint64)cap * sizeof *rows);
    if (!rows) return RMQ_ENOMEM;
    c->rows = rows;
    c->cap = cap;
  }
  fl_row *r = &c->rows[c->n++];
  *r = (fl_row){.kind = kind_name(f->kind),
                .path = sqlite3_mprintf("%s", f->path),
                .reason = f->reason ? sqlite3_mprintf("%s", f->reason) : NULL,
                .first_offset = f->first_offset,
                .size = f->size,
                .disk_bytes = f->disk_bytes,
                .mtime = f->mtime_ms,
                .expires_at = f->expires_at_ms,
                .would_delete = f->would_delete};
  return r->path && (r->reason || !f->reason) ? RMQ_OK : RMQ_ENOMEM;
}

/* The store's files into c->rows. */
static int list_files(void *ctx, rmqx_reader *r) {
  fl_cursor *c = ctx;
  rmq_err err = {0};
  int rc = rmq_store_files(r->store, add_row, c, &err);
  if (rc == RMQ_OK) return SQLITE_OK;
  if (rc == RMQ_ENOMEM) return SQLITE_NOMEM;
  return rmqx_vtab_error(c->base.pVtab, "rocketmq_files: %s", err.msg);
}

static int fl_filter(sqlite3_vtab_cursor *cur, int idx, const char *idx_str, int argc,
                     sqlite3_value **argv) {
  (void)idx_str;
  fl_cursor *c = (fl_cursor *)cur;
  clear_rows(c);
  return rmqx_tvf_dir_snapshot(&c->src, cur->pVtab, idx, argc, argv, true, list_files, c);
}

static int fl_next(sqlite3_vtab_cursor *cur) {
  ((fl_cursor *)cur)->i++;
  return SQLITE_OK;
}

static int fl_eof(sqlite3_vtab_cursor *cur) {
  fl_cursor *c = (fl_cursor *)cur;
  return c->i >= c->n;
}

static int fl_rowid(sqlite3_vtab_cursor *cur, sqlite_int64 *rowid) {
  *rowid = ((fl_cursor *)cur)->i + 1;
  return SQLITE_OK;
}

/* The engine's -1 ("none") is NULL. */
static void result_optional(sqlite3_context *ctx, int64_t v) {
  if (v >= 0) sqlite3_result_int64(ctx, v);
}

static int fl_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col) {
  fl_cursor *c = (fl_cursor *)cur;
  const fl_row *r = &c->rows[c->i];
  switch (col) {
    case COL_KIND: sqlite3_result_text(ctx, r->kind, -1, SQLITE_STATIC); break;
    case COL_PATH: rmqx_result_text_or_blob(ctx, r->path, -1, SQLITE_TRANSIENT); break;
    case COL_FIRST_OFFSET: result_optional(ctx, r->first_offset); break;
    case COL_SIZE: sqlite3_result_int64(ctx, r->size); break;
    case COL_DISK_BYTES: sqlite3_result_int64(ctx, r->disk_bytes); break;
    case COL_MTIME: sqlite3_result_int64(ctx, r->mtime); break;
    case COL_EXPIRES_AT: result_optional(ctx, r->expires_at); break;
    case COL_WOULD_DELETE: sqlite3_result_int(ctx, r->would_delete); break;
    case COL_REASON:
      if (r->reason) sqlite3_result_text(ctx, r->reason, -1, SQLITE_TRANSIENT);
      break;
    case COL_DIR: sqlite3_result_text(ctx, c->src.dir, -1, SQLITE_TRANSIENT); break;
  }
  return SQLITE_OK;
}

static sqlite3_module fl_module = {
    .iVersion = 0,
    .xConnect = rmqx_tvf_connect,
    .xBestIndex = fl_best_index,
    .xDisconnect = rmqx_tvf_disconnect,
    .xOpen = fl_open,
    .xClose = fl_close,
    .xFilter = fl_filter,
    .xNext = fl_next,
    .xEof = fl_eof,
    .xColumn = fl_column,
    .xRowid = fl_rowid,
};

static const char *const fl_args[] = {"dir"};

static const rmqx_tvf fl_tvf = {
    .name = "rocketmq_files",
    .schema = FL_SCHEMA,
    .arg_col = COL_DIR,
    .n_args = 1,
    .n_required = 1,
    .arg_names = fl_args,
    .usage = "rocketmq_files('path/to/store')",
    .no_args_plan = "no dir",
    .range_col = -1,
};

int rmqx_register_files_table(sqlite3 *db) { return rmqx_tvf_register(db, &fl_module, &fl_tvf); }
