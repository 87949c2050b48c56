/*
** rocketmq.c: the entry point of sqlite-rocketmq, a SQLite loadable
** extension that stores messages the way Apache RocketMQ's broker does:
** a CommitLog of records, a ConsumeQueue per topic and queue, and hash
** IndexFiles, byte-compatible with the files of Apache RocketMQ 4.9.
** The store itself is the C engine under engine/, which knows nothing of
** SQLite; the files under ext/ translate SQL to engine calls and back.
**
** Usage:
**
**    .load build/rocketmq
**    SELECT rocketmq_version();          -- '0.1.0'
**
** What this file registers:
**
**    rocketmq_version()   the extension's version, a TEXT value.
**
** and, through the other files of ext/: the store table rocketmq
** (vtab_store.c), the companion tables rocketmq_commitlog,
** rocketmq_consumequeue, rocketmq_index, rocketmq_queues, rocketmq_stats,
** rocketmq_verify, rocketmq_scheduled, rocketmq_consumer_offsets and
** rocketmq_files (vtab_*.c),
** and rocketmq_flush, rocketmq_clean, rocketmq_repair, rocketmq_commit_offset,
** rocketmq_send_back and rocketmq_java_hash (functions.c).
**
** Loading the extension again on a connection that has it is a no-op.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1

#include "rmq_ext.h"

/* rocketmq_version(): the version string RMQ_VERSION. */
static void rmqVersionFunc(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  (void)argv;
  sqlite3_result_text(ctx, RMQ_VERSION, -1, SQLITE_STATIC);
}

/*
** True if this connection already has the extension. SQLite refuses to
** replace a function while a statement runs, and `SELECT load_extension()`
** is one, so a second load must not register anything again.
*/
static int rmqAlreadyLoaded(sqlite3 *db) {
  sqlite3_stmt *pStmt = 0;
  int found = 0;
  if (sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_function_list WHERE name = 'rocketmq_version'",
                         -1, &pStmt, 0) == SQLITE_OK) {
    found = sqlite3_step(pStmt) == SQLITE_ROW;
  }
  sqlite3_finalize(pStmt);
  return found;
}

__attribute__((visibility("default"))) int sqlite3_rocketmq_init(sqlite3 *db, char **pzErrMsg,
                                                                 const sqlite3_api_routines *pApi) {
  (void)pzErrMsg;
  SQLITE_EXTENSION_INIT2(pApi);
  if (rmqAlreadyLoaded(db)) return SQLITE_OK;
  int rc = sqlite3_create_function(db, "rocketmq_version", 0,
                                   SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, 0,
                                   rmqVersionFunc, 0, 0);
  if (rc == SQLITE_OK) rc = rmqx_register_store_table(db);
  if (rc == SQLITE_OK) rc = rmqx_register_commitlog_table(db);
  if (rc == SQLITE_OK) rc = rmqx_register_consumequeue_table(db);
  if (rc == SQLITE_OK) rc = rmqx_register_index_table(db);
  if (rc == SQLITE_OK) rc = rmqx_register_queues_table(db);
  if (rc == SQLITE_OK) rc = rmqx_register_stats_table(db);
  if (rc == SQLITE_OK) rc = rmqx_register_ha_table(db);
  if (rc == SQLITE_OK) rc = rmqx_register_verify_table(db);
  if (rc == SQLITE_OK) rc = rmqx_register_scheduled_table(db);
  if (rc == SQLITE_OK) rc = rmqx_register_consumer_offsets_table(db);
  if (rc == SQLITE_OK) rc = rmqx_register_files_table(db);
  if (rc == SQLITE_OK) rc = rmqx_register_functions(db);
  return rc;
}
