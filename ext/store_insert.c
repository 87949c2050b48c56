/*
** store_insert.c: INSERT into the rocketmq table (vtab_store.c), and its
** transactions and savepoints.
**
** The row is checked (row.c: topic rules and not a system topic, queue id,
** sizes, JSON properties, delay level) before anything is appended; a bad
** row is an error naming the limit (SQLITE_CONSTRAINT, so INSERT OR IGNORE
** skips it). Columns the store assigns cannot be given. In autocommit mode
** each row is appended when it is inserted and last_insert_rowid() is its
** commit-log offset; a statement's rows after its first form a run, which
** waits in the store's write window until xSync (or xRollback). Inside
** BEGIN ... COMMIT rows are kept per connection and appended at COMMIT
** (xSync) as one contiguous batch; ROLLBACK, ROLLBACK TO and a failed
** statement drop exactly their rows; DROP TABLE is refused (SQLITE_LOCKED)
** while rows wait for COMMIT. With flush='sync' a COMMIT, or an autocommit
** statement, returns only once its rows are on disk (one wait at the
** statement's end, however many rows it inserted). UPDATE and DELETE are
** refused: messages are immutable, and leave the store only when their
** commit-log segment expires (CleanCommitLogService). A readonly=1 table
** refuses INSERT even when this process also has the store open for
** writing. A full disk (above disk_warning_ratio) fails INSERT, or COMMIT,
** with SQLITE_FULL.
*/
#include "store_table.h"

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

/*
** An autocommit row, appended now. The statement's flush is awaited once,
** at its end (xSync): INSERT ... SELECT flushes once. Its later rows
** continue a run (the write window).
*/
static int append_autocommit(store_vtab *vt, sqlite3_int64 *rowid) {
  int64_t offset = 0, end = vt->unflushed_end;
  rmq_err err = {0};
  bool waits = rmq_batch_waits(vt->batch);
  int rc = put_result(vt, rmq_batch_append_unflushed(vt->batch, &offset, &end, &err), &err);
  rmq_batch_clear(vt->batch);
  if (rc == SQLITE_OK) {
    *rowid = offset;
    vt->unflushed_end = end;
    vt->unflushed_waits |= waits;
  }
  return rc;
}

int rmqx_store_update(sqlite3_vtab *base, int argc, sqlite3_value **argv, sqlite3_int64 *rowid) {
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
  return append_autocommit(vt, rowid);
}

/* --------------------------------------------------------- transactions */

/* A write statement begins here: the store's error, if it cannot be opened, comes first. */
int rmqx_store_begin(sqlite3_vtab *base) { return store_ready((store_vtab *)base); }

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
int rmqx_store_sync(sqlite3_vtab *base) {
  store_vtab *vt = (store_vtab *)base;
  int64_t first;
  rmq_err err = {0};
  int rc = wait_flushed(vt);
  if (rc != SQLITE_OK) return rc;
  return put_result(vt, rmq_batch_append(vt->batch, &first, &err), &err);
}

int rmqx_store_commit(sqlite3_vtab *base) {
  store_vtab *vt = (store_vtab *)base;
  rmq_batch_clear(vt->batch);
  rmq_batch_release(vt->batch, 0);
  return SQLITE_OK;
}

/* A failed statement's rows appended before the failure are made durable all the same. */
int rmqx_store_rollback(sqlite3_vtab *base) {
  wait_flushed((store_vtab *)base);
  return rmqx_store_commit(base);
}

int rmqx_store_savepoint(sqlite3_vtab *base, int level) {
  store_vtab *vt = (store_vtab *)base;
  rmq_err err = {0};
  return rmq_batch_savepoint(vt->batch, level, &err) == RMQ_OK ? SQLITE_OK : SQLITE_NOMEM;
}

/*
** Level -1 is the transaction itself: ROLLBACK TO a savepoint that began the
** transaction (SAVEPOINT outside BEGIN) drops every row, and its RELEASE
** closes every level.
*/
int rmqx_store_release(sqlite3_vtab *base, int level) {
  rmq_batch_release(((store_vtab *)base)->batch, level < 0 ? 0 : level);
  return SQLITE_OK;
}

int rmqx_store_rollback_to(sqlite3_vtab *base, int level) {
  store_vtab *vt = (store_vtab *)base;
  if (level < 0) {
    rmq_batch_clear(vt->batch);
  } else {
    rmq_batch_rollback_to(vt->batch, level);
  }
  return SQLITE_OK;
}
