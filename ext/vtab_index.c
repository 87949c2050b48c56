/*
** vtab_index.c: rocketmq_index, the items of a store's index files,
** read-only.
**
** Usage:
**
**    SELECT * FROM rocketmq_index('path/to/store');
**    SELECT commitlog_offset FROM rocketmq_index('path/to/store', 'TopicA#order-1');
**    SELECT * FROM rocketmq_index('path/to/store') WHERE key = 'TopicA#order-1';
**
** An eponymous, table-valued, read-only virtual table. The HIDDEN column
** dir, the first argument, is required ("rocketmq_index: missing argument
** dir; use rocketmq_index('path/to/store')"); the HIDDEN column key, the
** optional second argument, is an index key as RocketMQ builds it:
** 'topic#key' for each space-separated token of KEYS and 'topic#UNIQ_KEY'.
** Like the other companion tables it reads the live store when this
** process has dir open, and otherwise the files opened read-only (the
** geometry of each index file is read off its size); it is
** SQLITE_VTAB_DIRECTONLY.
**
** Columns, one row per index item:
**
**    file               the index file's name (yyyyMMddHHmmssSSS)
**    entry              the item's number in the file (1 .. indexCount-1)
**    key_hash           abs(Java hashCode of 'topic#key') (MIN_VALUE -> 0)
**    commitlog_offset   the indexed record's commit-log offset
**    time_diff          seconds from the file's beginTimestamp to the
**                       record's store time
**    prev_entry         the previous item of the same slot's chain (0: none)
**
** Without key: every used item of every file, files oldest first, items in
** entry order. With `key = ?`: in each file, oldest first, the chain of the
** key's slot (hash % slot count) from its newest item backwards, and of it
** the items whose key_hash equals the key's: like RocketMQ's queryMessage,
** this includes other keys with the same hash, so the caller re-checks the
** record (the rocketmq table's `key = ?` plan does). A chain that does not
** point strictly backwards (damage) ends the walk in that file.
**
** How it works: each file is walked through a view that holds its mapping
** and a snapshot of its header, without holding the index service's lock
** between rows (see rmq_store_index_view); the next file is the first
** whose name sorts after the current one, so files deleted meanwhile do
** not disturb the walk. A file that expiry deletes while the cursor reads
** it stays readable until the cursor moves on, or until clean_grace_ms have
** passed, after which the cursor's next row is an error ("the index file F
** was deleted by expiry while this cursor held it").
**
** Plans (xBestIndex). idxNum bits say which constraints were passed to
** xFilter, in this argv order:
**    IX_DIR 0x01   dir = ?   (required)
**    IX_KEY 0x02   key = ?
** idxStr is "all items" or "key chain" ("no dir" for a plan without dir,
** which fails in xFilter).
*/
#include <stdio.h>
#include <string.h>

#include "rmq_ext.h"

#define IX_NAME "rocketmq_index"
#define IX_SCHEMA                                                                        \
  "CREATE TABLE x(file TEXT, entry INTEGER, key_hash INTEGER, commitlog_offset INTEGER," \
  " time_diff INTEGER, prev_entry INTEGER, dir HIDDEN, key HIDDEN)"

enum {
  COL_FILE,
  COL_ENTRY,
  COL_KEY_HASH,
  COL_COMMITLOG_OFFSET,
  COL_TIME_DIFF,
  COL_PREV,
  COL_DIR,
  COL_KEY
};

#define IX_DIR 0x01
#define IX_KEY 0x02

typedef struct ix_cursor {
  sqlite3_vtab_cursor base;
  rmqx_tvf_dir src; /* the store read */
  rmq_store *store;
  char *key;           /* the key argument, or NULL for every item */
  int key_len;         /* its bytes: a key may hold a NUL, which its hash covers too */
  int32_t hash;        /* its hash */
  rmq_index_view view; /* the file being read */
  bool in_file;        /* view holds a file; false at the end */
  int32_t entry;       /* the current item's number */
  rmq_index_item item;
  sqlite3_int64 rowid;
} ix_cursor;

/* ------------------------------------------------------------ the table */

static int ix_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  bool ready;
  int rc = rmqx_tvf_best_index(vt, info, &ready);
  if (rc != SQLITE_OK) return rc;
  int idx = info->idxNum;
  info->estimatedRows = idx & IX_KEY ? 4 : 100000;
  if (!ready) return SQLITE_OK; /* priced out by rmqx_tvf_best_index */
  info->idxStr = idx & IX_KEY ? "key chain" : "all items";
  info->estimatedCost = idx & IX_KEY ? 100 : 1000000;
  return SQLITE_OK;
}

/* ------------------------------------------------------------ the walk */

/* The first item of the current file to show, or 0. */
static int32_t first_entry(ix_cursor *c) {
  const rmq_index_view *v = &c->view;
  if (c->key == NULL) return v->header.index_count > 1 ? 1 : 0;
  int32_t k = rmq_index_view_slot(v, c->hash);
  return k > 0 && k < rmq_index_view_items_end(v, true) ? k : 0;
}

/* The item after the current one in the current file, or 0. */
static int32_t next_entry(ix_cursor *c) {
  if (c->key == NULL) return c->entry + 1 < c->view.header.index_count ? c->entry + 1 : 0;
  int32_t prev = c->item.prev_index;
  return prev > 0 && prev < c->entry ? prev : 0;
}

/*
** Move to item k, or on to the next file's first item when k is 0. A file
** that expiry took from this cursor reads as zeros (rmq_index_view_valid):
** that is an error, never items.
*/
static int seek(ix_cursor *c, int32_t k) {
  while (c->in_file) {
    for (; k > 0; k = next_entry(c)) {
      c->entry = k;
      bool got = rmq_index_view_item(&c->view, k, &c->item);
      if (!rmq_index_view_valid(&c->view)) {
        return rmqx_vtab_error(c->base.pVtab,
                               IX_NAME ": the index file %s was deleted by expiry while this "
                                       "cursor held it (longer than clean_grace_ms)",
                               c->view.name);
      }
      if (!got) break;
      if (c->key == NULL || c->item.key_hash == c->hash) return SQLITE_OK;
    }
    char name[sizeof c->view.name];
    snprintf(name, sizeof name, "%s", c->view.name);
    rmq_index_view_release(&c->view);
    c->in_file = rmq_store_index_view(c->store, name, &c->view);
    if (c->in_file) k = first_entry(c);
  }
  return SQLITE_OK;
}

/* ------------------------------------------------------------ the cursor */

static int ix_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  (void)vt;
  return rmqx_tvf_cursor_new(sizeof(ix_cursor), out) ? SQLITE_OK : SQLITE_NOMEM;
}

static int ix_close(sqlite3_vtab_cursor *cur) {
  ix_cursor *c = (ix_cursor *)cur;
  rmq_index_view_release(&c->view);
  rmqx_tvf_dir_close(&c->src);
  sqlite3_free(c->key);
  sqlite3_free(c);
  return SQLITE_OK;
}

/*
** Take the key argument; *none when it is NULL (no item has that key). The
** hash is of all its bytes (sqlite3_value_bytes), as the dispatcher hashes a
** key that holds a NUL: strlen would hash 'T#k' for 'T#k' || char(0) || 'x'.
*/
static int set_key(ix_cursor *c, sqlite3_value *v, bool *none) {
  const char *key = (const char *)sqlite3_value_text(v);
  *none = key == NULL;
  if (key == NULL) return SQLITE_OK;
  int n = sqlite3_value_bytes(v);
  const char *hash_sign = memchr(key, '#', (size_t)n);
  if (hash_sign == NULL) {
    return rmqx_vtab_error(c->base.pVtab, IX_NAME ": key \"%s\" is not an index key 'topic#key'",
                           key);
  }
  size_t topic_len = (size_t)(hash_sign - key);
  c->hash = rmq_index_key_hash(key, topic_len, hash_sign + 1, (size_t)n - topic_len - 1);
  if ((c->key = sqlite3_malloc(n + 1)) == NULL) return SQLITE_NOMEM;
  memcpy(c->key, key, (size_t)n + 1);
  c->key_len = n;
  return SQLITE_OK;
}

static int ix_filter(sqlite3_vtab_cursor *cur, int idx, const char *idx_str, int argc,
                     sqlite3_value **argv) {
  (void)idx_str;
  (void)argc;
  ix_cursor *c = (ix_cursor *)cur;
  rmq_index_view_release(&c->view);
  c->in_file = false;
  sqlite3_free(c->key);
  c->key = NULL;
  c->rowid = 0;
  bool none = false;
  int rc = rmqx_tvf_check_args(cur->pVtab, idx);
  if (rc == SQLITE_OK) rc = rmqx_tvf_dir_open(&c->src, cur->pVtab, argv[0]);
  if (rc == SQLITE_OK) rc = rmqx_tvf_dir_wait_dispatched(&c->src, cur->pVtab);
  if (rc == SQLITE_OK && (idx & IX_KEY)) rc = set_key(c, argv[1], &none);
  if (rc != SQLITE_OK || none) return rc;
  c->store = c->src.reader.store;
  rmq_err err = {0};
  if (rmq_store_index_error(c->store, &err) != RMQ_OK) {
    return rmqx_vtab_error(cur->pVtab, "rocketmq_index: %s", err.msg);
  }
  c->in_file = rmq_store_index_view(c->store, NULL, &c->view);
  return c->in_file ? seek(c, first_entry(c)) : SQLITE_OK;
}

static int ix_next(sqlite3_vtab_cursor *cur) {
  ix_cursor *c = (ix_cursor *)cur;
  c->rowid++;
  return seek(c, next_entry(c));
}

static int ix_eof(sqlite3_vtab_cursor *cur) { return !((ix_cursor *)cur)->in_file; }

static int ix_rowid(sqlite3_vtab_cursor *cur, sqlite_int64 *rowid) {
  *rowid = ((ix_cursor *)cur)->rowid;
  return SQLITE_OK;
}

static int ix_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col) {
  ix_cursor *c = (ix_cursor *)cur;
  switch (col) {
    case COL_FILE: sqlite3_result_text(ctx, c->view.name, -1, SQLITE_TRANSIENT); break;
    case COL_ENTRY: sqlite3_result_int(ctx, c->entry); break;
    case COL_KEY_HASH: sqlite3_result_int(ctx, c->item.key_hash); break;
    case COL_COMMITLOG_OFFSET: sqlite3_result_int64(ctx, c->item.phy_offset); break;
    case COL_TIME_DIFF: sqlite3_result_int(ctx, c->item.time_diff); break;
    case COL_PREV: sqlite3_result_int(ctx, c->item.prev_index); break;
    case COL_DIR: sqlite3_result_text(ctx, c->src.dir, -1, SQLITE_TRANSIENT); break;
    case COL_KEY:
      if (c->key) sqlite3_result_text(ctx, c->key, c->key_len, SQLITE_TRANSIENT);
      break;
  }
  return SQLITE_OK;
}

static sqlite3_module ix_module = {
    .iVersion = 0,
    .xConnect = rmqx_tvf_connect,
    .xBestIndex = ix_best_index,
    .xDisconnect = rmqx_tvf_disconnect,
    .xOpen = ix_open,
    .xClose = ix_close,
    .xFilter = ix_filter,
    .xNext = ix_next,
    .xEof = ix_eof,
    .xColumn = ix_column,
    .xRowid = ix_rowid,
};

static const char *const ix_args[] = {"dir", "key"};

/* key is optional: it only narrows the walk. */
static const rmqx_tvf ix_tvf = {
    .name = IX_NAME,
    .schema = IX_SCHEMA,
    .arg_col = COL_DIR,
    .n_args = 2,
    .n_required = 1,
    .arg_names = ix_args,
    .usage = "rocketmq_index('path/to/store')",
    .no_args_plan = "no dir",
    .range_col = -1,
};

int rmqx_register_index_table(sqlite3 *db) { return rmqx_tvf_register(db, &ix_module, &ix_tvf); }
