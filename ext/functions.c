/*
** functions.c: the SQL functions of sqlite-rocketmq other than
** rocketmq_version() (which rocketmq.c registers: it marks the extension
** as loaded).
**
**    rocketmq_flush(dir)       flush the commit log, then wait for the
**                              dispatcher to reach the flushed end and flush
**                              the consume queues, the index and the
**                              checkpoint; returns the flushed commit-log
**                              offset (INTEGER). dir must be a store this
**                              process has open (a rocketmq table), else:
**                              "rocketmq_flush: store DIR is not open in
**                              this process (open it with CREATE VIRTUAL
**                              TABLE ... USING rocketmq(dir='DIR'))". An I/O
**                              failure is an error with the engine's message.
**    rocketmq_clean(dir)       run expiry now and return the number of files
**                              deleted. Expiry (CleanCommitLogService and
**                              CleanConsumeQueueService) is not built yet,
**                              so this deletes nothing and returns 0; the
**                              store must be open in this process, as for
**                              rocketmq_flush.
**    rocketmq_repair(dir)      move the damaged part of the store's commit
**                              log aside, into dir/damaged/<UTC time>/:
**                              from the first unsound record recovery finds
**                              to the end of the log (later segments whole,
**                              the damaged segment's tail copied, then
**                              zeroed in the log); returns the bytes moved
**                              aside (INTEGER, 0 for a sound store). Takes
**                              the store's lock: the store must not be open
**                              in this process ("rocketmq_repair: store DIR
**                              is open in this process: close it first") nor
**                              for writing in another. The next open
**                              recovers the consume queues and the index.
**    rocketmq_java_hash(text)  Java's String.hashCode of text taken as UTF-16
**                              units (the tags code of a TAGS value, and the
**                              index hash before abs): INTEGER, NULL for NULL.
**                              Invalid UTF-8 counts as U+FFFD, as Java decodes
**                              it.
**
** The functions that take a path are SQLITE_DIRECTONLY, so that a schema
** written by someone else (a view, a trigger) cannot reach files with them;
** rocketmq_java_hash is SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS.
*/

#include "rmq_ext.h"

/* The live store for argv[0], or NULL after setting the error on ctx. */
static rmq_store *open_store(sqlite3_context *ctx, const char *fn, sqlite3_value *arg) {
  const char *dir = (const char *)sqlite3_value_text(arg);
  if (dir == NULL) {
    rmqx_result_error(ctx, "%s: the store directory is NULL", fn);
    return NULL;
  }
  rmq_store *s = rmq_store_find(dir);
  if (s == NULL) {
    rmqx_result_error(ctx,
                      "%s: store %s is not open in this process (open it with CREATE VIRTUAL "
                      "TABLE ... USING rocketmq(dir='%s'))",
                      fn, dir, dir);
  }
  return s;
}

/* rocketmq_flush(dir) */
static void flush_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  rmq_store *s = open_store(ctx, "rocketmq_flush", argv[0]);
  if (s == NULL) return;
  int64_t flushed = 0;
  rmq_err err = {0};
  if (rmq_store_flush(s, &flushed, &err) == RMQ_OK) {
    sqlite3_result_int64(ctx, flushed);
  } else {
    rmqx_result_error(ctx, "rocketmq_flush: %s", err.msg);
  }
  rmq_store_release(s);
}

/* rocketmq_clean(dir): expiry is not built yet, so nothing is deleted. */
static void clean_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  rmq_store *s = open_store(ctx, "rocketmq_clean", argv[0]);
  if (s == NULL) return;
  sqlite3_result_int(ctx, 0);
  rmq_store_release(s);
}

/* rocketmq_repair(dir) */
static void repair_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  const char *dir = (const char *)sqlite3_value_text(argv[0]);
  if (dir == NULL) {
    rmqx_result_error(ctx, "rocketmq_repair: the store directory is NULL");
    return;
  }
  int64_t moved = 0;
  rmq_err err = {0};
  if (rmq_store_repair(dir, &moved, &err) == RMQ_OK) {
    sqlite3_result_int64(ctx, moved);
  } else {
    rmqx_result_error(ctx, "rocketmq_repair: %s", err.msg);
  }
}

/* rocketmq_java_hash(text) */
static void java_hash_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  const char *text = (const char *)sqlite3_value_text(argv[0]);
  if (text == NULL) return;
  sqlite3_result_int(ctx, rmq_java_hash(text, (size_t)sqlite3_value_bytes(argv[0])));
}

int rmqx_register_functions(sqlite3 *db) {
  static const struct {
    const char *name;
    void (*fn)(sqlite3_context *, int, sqlite3_value **);
    int flags;
  } funcs[] = {
      {"rocketmq_flush", flush_func, SQLITE_DIRECTONLY},
      {"rocketmq_clean", clean_func, SQLITE_DIRECTONLY},
      {"rocketmq_repair", repair_func, SQLITE_DIRECTONLY},
      {"rocketmq_java_hash", java_hash_func, SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS},
  };
  int rc = SQLITE_OK;
  for (size_t i = 0; rc == SQLITE_OK && i < sizeof funcs / sizeof funcs[0]; i++) {
    rc = sqlite3_create_function(db, funcs[i].name, 1, SQLITE_UTF8 | funcs[i].flags, 0, funcs[i].fn,
                                 0, 0);
  }
  return rc;
}
