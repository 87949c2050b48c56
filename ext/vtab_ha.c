/*
** vtab_ha.c: rocketmq_ha, a store's replication as rows, read-only.
**
** Usage:
**
**    SELECT * FROM rocketmq_ha('path/to/store');
**
** An eponymous, table-valued, read-only virtual table whose HIDDEN column
** dir, the argument, is required. It reads the live store when this
** process has dir open (a store opened here only for the query replicates
** nothing, so it has no rows); it is SQLITE_VTAB_DIRECTONLY.
**
** Rows: on a master (ha_listen) one per connected slave, on a slave one for
** its master. Columns:
**
**    address          the slave's ip:port (master), ha_master (slave)
**    role             'master', 'sync_master' or 'slave': the store's role
**    state            master: 'connected' once the slave reported its
**                     offset, 'handshake' before; slave: 'connecting',
**                     'connected' or 'retrying'
**    acked_offset     master: the offset the slave acknowledged (NULL
**                     before its first report); NULL on a slave
**    offset           slave: its own commit-log end; NULL on a master
**    lag_bytes        the master's end minus the slave's offset (on a
**                     slave, as far as the last frame heard tells)
**    connected_since  ms since the epoch when the connection began, NULL
**                     when not connected
**    last_error       slave: why its last connection ended ('' when none)
**
** How it works: xFilter copies the rows of rmq_store_ha once; idxNum is 1
** when dir was given and 0 for the plan without it, which fails in
** xFilter.
*/
#include "rmq_ext.h"

#define HA_SCHEMA                                                                              \
  "CREATE TABLE x(address TEXT, role TEXT, state TEXT, acked_offset INTEGER, offset INTEGER, " \
  "lag_bytes INTEGER, connected_since INTEGER, last_error TEXT, dir HIDDEN)"

enum {
  COL_ADDRESS,
  COL_ROLE,
  COL_STATE,
  COL_ACKED,
  COL_OFFSET,
  COL_LAG,
  COL_SINCE,
  COL_ERROR,
  COL_DIR
};

typedef struct ha_row {
  char *address, *state, *last_error; /* sqlite3_malloc'd */
  int64_t offset, lag, since;
} ha_row;

typedef struct ha_cursor {
  sqlite3_vtab_cursor base;
  rmqx_tvf_dir src;
  const char *role;
  bool slave;
  ha_row *rows;
  int n, cap, i;
} ha_cursor;

static int ha_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  bool ready;
  int rc = rmqx_tvf_best_index(vt, info, &ready);
  if (rc != SQLITE_OK) return rc;
  info->estimatedRows = 4;
  if (!ready) return SQLITE_OK;
  info->idxStr = "ha";
  info->estimatedCost = 100;
  return SQLITE_OK;
}

static int keep_row(void *ctx, const rmq_ha_row *r) {
  ha_cursor *c = ctx;
  if (c->n == c->cap) {
    int cap = c->cap ? c->cap * 2 : 4;
    ha_row *rows = sqlite3_realloc64(c->rows, (sqlite3_uint64)cap * sizeof *rows);
    if (!rows) return SQLITE_NOMEM;
    c->rows = rows;
    c->cap = cap;
  }
  ha_row *row = &c->rows[c->n++];
  *row = (ha_row){.offset = r->offset, .lag = r->lag_bytes, .since = r->connected_since_ms};
  row->address = sqlite3_mprintf("%s", r->address);
  row->state = sqlite3_mprintf("%s", r->state);
  row->last_error = sqlite3_mprintf("%s", r->last_error);
  return row->address && row->state && row->last_error ? SQLITE_OK : SQLITE_NOMEM;
}

static int compute_rows(void *ctx, rmqx_reader *r) {
  ha_cursor *c = ctx;
  const rmq_config *cfg = rmq_store_config(r->store);
  c->role = rmq_role_name(cfg->role);
  c->slave = cfg->role == RMQ_ROLE_SLAVE;
  rmq_err err = {0};
  return rmq_store_ha(r->store, keep_row, c, &err) == RMQ_OK ? SQLITE_OK : SQLITE_NOMEM;
}

static int ha_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  (void)vt;
  return rmqx_tvf_cursor_new(sizeof(ha_cursor), out) ? SQLITE_OK : SQLITE_NOMEM;
}

static void clear_rows(ha_cursor *c) {
  for (int i = 0; i < c->n; i++) {
    sqlite3_free(c->rows[i].address);
    sqlite3_free(c->rows[i].state);
    sqlite3_free(c->rows[i].last_error);
  }
  rmqx_tvf_dir_close(&c->src);
  c->n = c->i = 0;
}

static int ha_close(sqlite3_vtab_cursor *cur) {
  ha_cursor *c = (ha_cursor *)cur;
  clear_rows(c);
  sqlite3_free(c->rows);
  sqlite3_free(c);
  return SQLITE_OK;
}

static int ha_filter(sqlite3_vtab_cursor *cur, int idx, const char *idx_str, int argc,
                     sqlite3_value **argv) {
  (void)idx_str;
  ha_cursor *c = (ha_cursor *)cur;
  clear_rows(c);
  return rmqx_tvf_dir_snapshot(&c->src, cur->pVtab, idx, argc, argv, false, compute_rows, c);
}

static int ha_next(sqlite3_vtab_cursor *cur) {
  ((ha_cursor *)cur)->i++;
  return SQLITE_OK;
}

static int ha_eof(sqlite3_vtab_cursor *cur) {
  ha_cursor *c = (ha_cursor *)cur;
  return c->i >= c->n;
}

static int ha_rowid(sqlite3_vtab_cursor *cur, sqlite_int64 *rowid) {
  *rowid = ((ha_cursor *)cur)->i + 1;
  return SQLITE_OK;
}

/* An offset column: the row's offset where it applies and is known, else NULL. */
static void result_offset(sqlite3_context *ctx, const ha_row *r, bool applies) {
  if (applies && r->offset >= 0) sqlite3_result_int64(ctx, r->offset);
}

static int ha_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col) {
  ha_cursor *c = (ha_cursor *)cur;
  const ha_row *r = &c->rows[c->i];
  switch (col) {
    case COL_ADDRESS: sqlite3_result_text(ctx, r->address, -1, SQLITE_TRANSIENT); break;
    case COL_ROLE: sqlite3_result_text(ctx, c->role, -1, SQLITE_STATIC); break;
    case COL_STATE: sqlite3_result_text(ctx, r->state, -1, SQLITE_TRANSIENT); break;
    case COL_ACKED: result_offset(ctx, r, !c->slave); break;
    case COL_OFFSET: result_offset(ctx, r, c->slave); break;
    case COL_LAG: sqlite3_result_int64(ctx, r->lag); break;
    case COL_SINCE:
      if (r->since > 0) sqlite3_result_int64(ctx, r->since);
      break;
    case COL_ERROR: sqlite3_result_text(ctx, r->last_error, -1, SQLITE_TRANSIENT); break;
    case COL_DIR: sqlite3_result_text(ctx, c->src.dir, -1, SQLITE_TRANSIENT); break;
  }
  return SQLITE_OK;
}

static sqlite3_module ha_module = {
    .iVersion = 0,
    .xConnect = rmqx_tvf_connect,
    .xBestIndex = ha_best_index,
    .xDisconnect = rmqx_tvf_disconnect,
    .xOpen = ha_open,
    .xClose = ha_close,
    .xFilter = ha_filter,
    .xNext = ha_next,
    .xEof = ha_eof,
    .xColumn = ha_column,
    .xRowid = ha_rowid,
};

static const char *const ha_args[] = {"dir"};

static const rmqx_tvf ha_tvf = {
    .name = "rocketmq_ha",
    .schema = HA_SCHEMA,
    .arg_col = COL_DIR,
    .n_args = 1,
    .n_required = 1,
    .arg_names = ha_args,
    .usage = "rocketmq_ha('path/to/store')",
    .no_args_plan = "no dir",
    .range_col = -1,
};

int rmqx_register_ha_table(sqlite3 *db) { return rmqx_tvf_register(db, &ha_module, &ha_tvf); }
