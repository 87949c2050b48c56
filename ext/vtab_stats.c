/*
** vtab_stats.c: rocketmq_stats, a store's figures as (name, value) rows,
** read-only.
**
** Usage:
**
**    SELECT * FROM rocketmq_stats('path/to/store');
**    SELECT value FROM rocketmq_stats('path/to/store') WHERE name = 'dispatch_behind_bytes';
**
** An eponymous, table-valued, read-only virtual table whose HIDDEN column
** dir, the argument, is required ("rocketmq_stats: missing argument dir;
** use rocketmq_stats('path/to/store')"). Like the other companion tables it
** reads the live store when this process has dir open, and otherwise the
** files opened read-only; it is SQLITE_VTAB_DIRECTONLY.
**
** Columns: name TEXT, value (INTEGER, REAL or TEXT, by row). The rows, in
** this order:
**
**    live                   1: the live store of this process; 0: the
**                           files, opened read-only for this query
**    commitlog_min_offset   start of the first commit-log segment
**    commitlog_max_offset   end of what was appended (write position)
**    committed_offset       end of what readers see (RocketMQ's
**                           maxPhyOffset): below commitlog_max_offset only
**                           while transient_store_pool buffers hold bytes
**    flushed_offset         end of what is known to be on disk
**    dispatched_offset      end of what the dispatcher (ReputMessageService)
**                           put into consume queues and index; for files
**                           opened read-only, committed_offset
**    dispatch_behind_bytes  committed_offset - dispatched_offset
**    dispatch_skipped       records the dispatcher skipped as invalid
**    put_count              messages appended since the store was opened
**    put_latency_p50_us     median and 99th percentile of the time a put
**    put_latency_p99_us     took, sync flush included (REAL, microseconds;
**                           from a sample of puts, rounded up to a power
**                           of two in ns; 0 when nothing was put)
**    commitlog_files        commit-log segments
**    commitlog_file_size    their size in bytes (read off the files when
**                           opened read-only)
**    consume_queues         (topic, queue_id) pairs
**    consumequeue_files     consume-queue segments, all queues together
**    index_files            index files
**    index_slots            hash slots and items per index file (of the
**    index_entries          newest file when opened read-only)
**    file_bytes             the sizes of all files under dir, added up
**    disk_bytes             the disk space they take (allocated blocks, as
**                           du counts them: pre-allocated segments are
**                           sparse until written)
**    recovery               how the last open recovered the store, and
**                           whether it rebuilt config/topics.json (TEXT)
**    poisoned               1 when an I/O failure stopped writes until the
**                           store is reopened, else 0
**    poison_reason          why (TEXT), NULL when not poisoned
**    schedule_delivered     delayed messages put back into their real
**                           topics since the store was opened
**    delay_offsets          NULL, or that config/delayOffset.json could
**                           not be used when the store was opened and its
**                           .bak was read (neither: the open fails)
**    disk_used_ratio        the used share of the disk holding the commit
**                           log, 0 to 1 (REAL; -1 when it cannot be read)
**    disk_full              1 while writes are refused because
**                           disk_used_ratio is above disk_warning_ratio
**                           (INSERT fails with SQLITE_FULL), else 0
**    clean_runs             clean passes since the store was opened, the
**                           periodic ones and rocketmq_clean()'s
**    files_deleted          files those passes deleted
**    files_awaiting_readers deleted files that a reader (a cursor) still
**                           holds: their disk space is freed when it lets
**                           go, or after clean_grace_ms
**    flush_runs             passes of FlushRealTimeService (flush='async')
**                           or GroupCommitService (flush='sync') that forced
**                           commit-log bytes to disk, since the store was
**                           opened (rocketmq_flush not counted); 0 when
**                           opened read-only
**    commit_runs            passes of CommitRealTimeService that copied
**                           bytes from transient_store_pool buffers into
**                           the commit log (0 without a pool)
**    cq_flush_runs          passes of FlushConsumeQueueService (every
**                           second) that forced a consume queue to disk
**    role                   'master', 'sync_master' or 'slave'; NULL for
**                           files opened read-only for the query
**    process                'owner': this process runs the store's
**                           services; 'follower': it opened the store for
**                           writing and another process runs them;
**                           'reader': readonly=1
**    owner_pid              the process that runs the services (0: none
**                           known, as for a broker's store)
**    ha_state               replication: a master's listen address, slaves
**                           and how many reported; a slave's state and
**                           master; NULL without replication
**    ha_last_error          why the last slave was refused or dropped
**                           (master; e.g. a report beyond its end), or why
**                           the slave's last connection ended; NULL if none
**    ha_slaves              slaves connected to this master now
**    ha_push2slave_offset   the largest offset a slave acknowledged
**                           (push2SlaveMaxOffset), -1 when none did
**
** How it works: xFilter computes every row once, from rmq_store_stats
** (which walks dir for the file sizes, symbolic links not followed); idxNum
** is 1 when dir was given (argv[0]) and 0 for the plan without it, which
** fails in xFilter; idxStr is "stats" or "no dir".
*/
#include "rmq_ext.h"

#define ST_SCHEMA "CREATE TABLE x(name TEXT, value, dir HIDDEN)"

enum { COL_NAME, COL_VALUE, COL_DIR };

#define MAX_ROWS 48

typedef struct st_row {
  const char *name;
  int type; /* SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT or SQLITE_NULL */
  int64_t i;
  double d;
  char *text; /* sqlite3_malloc'd */
} st_row;

typedef struct st_cursor {
  sqlite3_vtab_cursor base;
  rmqx_tvf_dir src; /* dir, its store open only during xFilter */
  st_row rows[MAX_ROWS];
  int n, i;
} st_cursor;

/* ------------------------------------------------------------ the table */

static int st_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  bool ready;
  int rc = rmqx_tvf_best_index(vt, info, &ready);
  if (rc != SQLITE_OK) return rc;
  info->estimatedRows = MAX_ROWS;
  if (!ready) return SQLITE_OK; /* priced out by rmqx_tvf_best_index */
  info->idxStr = "stats";
  info->estimatedCost = 1000;
  return SQLITE_OK;
}

/* ------------------------------------------------------------ the rows */

static void add_int(st_cursor *c, const char *name, int64_t v) {
  c->rows[c->n++] = (st_row){.name = name, .type = SQLITE_INTEGER, .i = v};
}

static void add_real(st_cursor *c, const char *name, double v) {
  c->rows[c->n++] = (st_row){.name = name, .type = SQLITE_FLOAT, .d = v};
}

/* A TEXT row (NULL when text is NULL); false when out of memory. */
static bool add_text(st_cursor *c, const char *name, const char *text) {
  st_row r = {.name = name, .type = text ? SQLITE_TEXT : SQLITE_NULL};
  if (text && (r.text = sqlite3_mprintf("%s", text)) == NULL) return false;
  c->rows[c->n++] = r;
  return true;
}

static int compute_rows(void *ctx, rmqx_reader *r) {
  st_cursor *c = ctx;
  rmq_stats st;
  rmq_err err = {0};
  if (rmq_store_stats(r->store, &st, &err) != RMQ_OK) return SQLITE_NOMEM;
  add_int(c, "live", r->shared);
  add_int(c, "commitlog_min_offset", st.commitlog_min_offset);
  add_int(c, "commitlog_max_offset", st.commitlog_max_offset);
  add_int(c, "committed_offset", st.committed_offset);
  add_int(c, "flushed_offset", st.flushed_offset);
  add_int(c, "dispatched_offset", st.dispatched_offset);
  add_int(c, "dispatch_behind_bytes", st.dispatch_behind_bytes);
  add_int(c, "dispatch_skipped", st.dispatch_skipped);
  add_int(c, "put_count", st.put_count);
  add_real(c, "put_latency_p50_us", (double)st.put_latency_p50_ns / 1000.0);
  add_real(c, "put_latency_p99_us", (double)st.put_latency_p99_ns / 1000.0);
  add_int(c, "commitlog_files", st.commitlog_files);
  add_int(c, "commitlog_file_size", st.commitlog_file_size);
  add_int(c, "consume_queues", st.consume_queues);
  add_int(c, "consumequeue_files", st.consumequeue_files);
  add_int(c, "index_files", st.index_files);
  add_int(c, "index_slots", st.index_slots);
  add_int(c, "index_entries", st.index_entries);
  add_int(c, "file_bytes", st.file_bytes);
  add_int(c, "disk_bytes", st.disk_bytes);
  bool ok = add_text(c, "recovery", st.recovery);
  add_int(c, "poisoned", st.poisoned);
  ok = ok && add_text(c, "poison_reason", st.poisoned ? st.poison_reason : NULL);
  add_int(c, "schedule_delivered", st.schedule_delivered);
  ok = ok && add_text(c, "delay_offsets", st.delay_offsets);
  add_real(c, "disk_used_ratio", st.disk_used_ratio);
  add_int(c, "disk_full", st.disk_full);
  add_int(c, "clean_runs", st.clean_runs);
  add_int(c, "files_deleted", st.files_deleted);
  add_int(c, "files_awaiting_readers", st.files_awaiting_readers);
  add_int(c, "flush_runs", st.flush_runs);
  add_int(c, "commit_runs", st.commit_runs);
  add_int(c, "cq_flush_runs", st.cq_flush_runs);
  ok = ok && add_text(c, "role", st.role);
  ok = ok && add_text(c, "process", st.process);
  add_int(c, "owner_pid", st.owner_pid);
  ok = ok && add_text(c, "ha_state", st.ha_state[0] ? st.ha_state : NULL);
  ok = ok && add_text(c, "ha_last_error", st.ha_last_error[0] ? st.ha_last_error : NULL);
  add_int(c, "ha_slaves", st.ha_slaves);
  add_int(c, "ha_push2slave_offset", st.ha_push2slave_offset);
  return ok ? SQLITE_OK : SQLITE_NOMEM;
}

/* ------------------------------------------------------------ the cursor */

static int st_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  (void)vt;
  return rmqx_tvf_cursor_new(sizeof(st_cursor), out) ? SQLITE_OK : SQLITE_NOMEM;
}

static void clear_rows(st_cursor *c) {
  for (int i = 0; i < c->n; i++) sqlite3_free(c->rows[i].text);
  rmqx_tvf_dir_close(&c->src);
  c->n = c->i = 0;
}

static int st_close(sqlite3_vtab_cursor *cur) {
  st_cursor *c = (st_cursor *)cur;
  clear_rows(c);
  sqlite3_free(c);
  return SQLITE_OK;
}

static int st_filter(sqlite3_vtab_cursor *cur, int idx, const char *idx_str, int argc,
                     sqlite3_value **argv) {
  (void)idx_str;
  st_cursor *c = (st_cursor *)cur;
  clear_rows(c);
  return rmqx_tvf_dir_snapshot(&c->src, cur->pVtab, idx, argc, argv, false, compute_rows, c);
}

static int st_next(sqlite3_vtab_cursor *cur) {
  ((st_cursor *)cur)->i++;
  return SQLITE_OK;
}

static int st_eof(sqlite3_vtab_cursor *cur) {
  st_cursor *c = (st_cursor *)cur;
  return c->i >= c->n;
}

static int st_rowid(sqlite3_vtab_cursor *cur, sqlite_int64 *rowid) {
  *rowid = ((st_cursor *)cur)->i + 1;
  return SQLITE_OK;
}

static int st_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col) {
  st_cursor *c = (st_cursor *)cur;
  const st_row *r = &c->rows[c->i];
  if (col == COL_NAME) {
    sqlite3_result_text(ctx, r->name, -1, SQLITE_STATIC);
  } else if (col == COL_DIR) {
    sqlite3_result_text(ctx, c->src.dir, -1, SQLITE_TRANSIENT);
  } else if (r->type == SQLITE_INTEGER) {
    sqlite3_result_int64(ctx, r->i);
  } else if (r->type == SQLITE_FLOAT) {
    sqlite3_result_double(ctx, r->d);
  } else if (r->type == SQLITE_TEXT) {
    sqlite3_result_text(ctx, r->text, -1, SQLITE_TRANSIENT);
  }
  return SQLITE_OK;
}

static sqlite3_module st_module = {
    .iVersion = 0,
    .xConnect = rmqx_tvf_connect,
    .xBestIndex = st_best_index,
    .xDisconnect = rmqx_tvf_disconnect,
    .xOpen = st_open,
    .xClose = st_close,
    .xFilter = st_filter,
    .xNext = st_next,
    .xEof = st_eof,
    .xColumn = st_column,
    .xRowid = st_rowid,
};

static const char *const st_args[] = {"dir"};

static const rmqx_tvf st_tvf = {
    .name = "rocketmq_stats",
    .schema = ST_SCHEMA,
    .arg_col = COL_DIR,
    .n_args = 1,
    .n_required = 1,
    .arg_names = st_args,
    .usage = "rocketmq_stats('path/to/store')",
    .no_args_plan = "no dir",
    .range_col = -1,
};

int rmqx_register_stats_table(sqlite3 *db) { return rmqx_tvf_register(db, &st_module, &st_tvf); }
