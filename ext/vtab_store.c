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
** INSERT and its transactions: store_insert.c. Queries: store_plan.c (the
** plans), store_filter.c and store_cq.c (running them), store_cursor.c
** (the cursor and its record). What these files share is in store_table.h.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_table.h"

#define STORE_SCHEMA                                                                      \
  "CREATE TABLE x(commitlog_offset INTEGER, size INTEGER, msg_id TEXT, uniq_key TEXT,"    \
  " topic TEXT, queue_id INTEGER, queue_offset INTEGER, tags TEXT, keys TEXT, body BLOB," \
  " body_text TEXT, properties TEXT, flag INTEGER, sys_flag INTEGER, body_crc INTEGER,"   \
  " born_timestamp INTEGER, born_host TEXT, store_timestamp INTEGER, store_host TEXT,"    \
  " reconsume_times INTEGER, prepared_transaction_offset INTEGER, body_raw BLOB,"         \
  " delay_level INTEGER HIDDEN, key TEXT HIDDEN, wait_ms INTEGER HIDDEN)"

/* ------------------------------------------------------------ the table */

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

/* -------------------------------------------------------------- xColumn */

static void result_property(sqlite3_context *ctx, store_cursor *c, int which) {
  const rmq_property_value *v = rmqx_store_property(c, which);
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
      const rmq_property_value *v = rmqx_store_property(c, PROP_DELAY);
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
  int64_t expired = rmqx_store_record_expired(c);
  if (expired >= 0) rmqx_result_error(ctx, STORE_EXPIRED_MESSAGE, (long long)expired);
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
    .xBestIndex = rmqx_store_best_index,
    .xDisconnect = store_disconnect,
    .xDestroy = store_destroy,
    .xOpen = rmqx_store_open,
    .xClose = rmqx_store_close,
    .xFilter = rmqx_store_filter,
    .xNext = rmqx_store_next,
    .xEof = rmqx_store_eof,
    .xColumn = store_column,
    .xRowid = rmqx_store_rowid,
    .xUpdate = rmqx_store_update,
    .xBegin = rmqx_store_begin,
    .xSync = rmqx_store_sync,
    .xCommit = rmqx_store_commit,
    .xRollback = rmqx_store_rollback,
    .xRename = store_rename,
    .xSavepoint = rmqx_store_savepoint,
    .xRelease = rmqx_store_release,
    .xRollbackTo = rmqx_store_rollback_to,
};

int rmqx_register_store_table(sqlite3 *db) {
  return sqlite3_create_module_v2(db, "rocketmq", &store_module, 0, 0);
}
