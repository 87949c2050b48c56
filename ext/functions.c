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
**    rocketmq_clean(dir)       run a clean pass now, at any hour (RocketMQ's
**                              manual delete): CleanCommitLogService still
**                              honours file_reserved_hours (and deletes
**                              unexpired segments when the disk is above
**                              disk_clean_forcibly_ratio), then
**                              CleanConsumeQueueService and the index files;
**                              returns the number of files deleted
**                              (INTEGER). The store must be open for writing
**                              in this process, as for rocketmq_flush; a
**                              file that cannot be unlinked is an error
**                              naming it.
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
**    rocketmq_commit_offset(dir, group, topic, queue_id, next_offset)
**                              commit a consumer group's next offset in a
**                              queue into dir/config/consumerOffset.json,
**                              written and synced before it returns (commits
**                              of several threads share a write); returns
**                              next_offset. next_offset runs from 0 to the
**                              queue's max offset (all read). The store must
**                              be open for writing in this process. Each bad
**                              argument is an error naming it ("rocketmq_
**                              commit_offset: queue 9 of topic T does not
**                              exist in store DIR"), and nothing is written.
**    rocketmq_send_back(dir, group, commitlog_offset)
**                              a consumer of group gives the message at
**                              commitlog_offset back: it is stored again in
**                              %RETRY%group through delay level 3 +
**                              reconsume_times, or in %DLQ%group once
**                              reconsume_times reaches the table's
**                              max_reconsume_times (rmq_store_send_back);
**                              returns the new record's commit-log offset.
**    rocketmq_java_hash(text)  Java's String.hashCode of text taken as UTF-16
**                              units (the tags code of a TAGS value, and the
**                              index hash before abs): INTEGER, NULL for NULL.
**                              Invalid UTF-8 counts as U+FFFD, as Java decodes
**                              it.
**
** A dir, group or topic argument that holds a NUL byte is an error naming
** it (RMQX_NUL_MESSAGE): the engine would read it only up to the NUL.
**
** The functions that take a path are SQLITE_DIRECTONLY, so that a schema
** written by someone else (a view, a trigger) cannot reach files with them;
** rocketmq_java_hash is SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS.
*/

#include <stdint.h>

#include "rmq_ext.h"

/*
** A TEXT argument that names something (what: "name") or is a path
** ("path"), or NULL after setting the error that names it: NULL, or a NUL
** byte inside, where the engine's C string would end it.
*/
static const char *cstr_arg(sqlite3_context *ctx, const char *fn, const char *name,
                            const char *what, sqlite3_value *v) {
  int nul_at;
  const char *t = rmqx_value_cstr(v, &nul_at);
  if (t == NULL) {
    rmqx_result_error(ctx, "%s: %s is NULL", fn, name);
  } else if (nul_at >= 0) {
    rmqx_result_error(ctx, RMQX_NUL_MESSAGE, fn, name, nul_at, t, what);
    return NULL;
  }
  return t;
}

/* The store directory argument, or NULL after setting the error on ctx. */
static const char *dir_arg(sqlite3_context *ctx, const char *fn, sqlite3_value *v) {
  if (sqlite3_value_type(v) == SQLITE_NULL) {
    rmqx_result_error(ctx, "%s: the store directory is NULL", fn);
    return NULL;
  }
  return cstr_arg(ctx, fn, "dir", "path", v);
}

/* The live store for argv[0], or NULL after setting the error on ctx. */
static rmq_store *open_store(sqlite3_context *ctx, const char *fn, sqlite3_value *arg) {
  const char *dir = dir_arg(ctx, fn, arg);
  if (dir == NULL) return NULL;
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

/* rocketmq_clean(dir) */
static void clean_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  rmq_store *s = open_store(ctx, "rocketmq_clean", argv[0]);
  if (s == NULL) return;
  int deleted = 0;
  rmq_err err = {0};
  if (rmq_store_clean(s, &deleted, &err) == RMQ_OK) {
    sqlite3_result_int(ctx, deleted);
  } else {
    rmqx_result_error(ctx, "rocketmq_clean: %s", err.msg);
  }
  rmq_store_release(s);
}

/* rocketmq_repair(dir) */
static void repair_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  const char *dir = dir_arg(ctx, "rocketmq_repair", argv[0]);
  if (dir == NULL) return;
  int64_t moved = 0;
  rmq_err err = {0};
  if (rmq_store_repair(dir, &moved, &err) == RMQ_OK) {
    sqlite3_result_int64(ctx, moved);
  } else {
    rmqx_result_error(ctx, "rocketmq_repair: %s", err.msg);
  }
}

/*
** An integer argument (text or a real that reads as one counts, as with INTEGER affinity), or
** false after setting the error that names it and shows the value.
*/
static bool int_arg(sqlite3_context *ctx, const char *fn, const char *name, sqlite3_value *v,
                    int64_t *out) {
  if (rmqx_value_integer(v, out)) return true;
  if (sqlite3_value_type(v) == SQLITE_NULL) {
    rmqx_result_error(ctx, "%s: %s is NULL, not an integer", fn, name);
  } else {
    rmqx_result_error(ctx, "%s: %s must be an integer, not '%s'", fn, name,
                      (const char *)sqlite3_value_text(v));
  }
  return false;
}

/* rocketmq_commit_offset(dir, group, topic, queue_id, next_offset) */
static void commit_offset_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  static const char fn[] = "rocketmq_commit_offset";
  const char *group = cstr_arg(ctx, fn, "group", "name", argv[1]);
  const char *topic = group ? cstr_arg(ctx, fn, "topic", "name", argv[2]) : NULL;
  int64_t queue_id, offset;
  if (!topic || !int_arg(ctx, fn, "queue_id", argv[3], &queue_id) ||
      !int_arg(ctx, fn, "next_offset", argv[4], &offset)) {
    return;
  }
  if (queue_id < 0 || queue_id > INT32_MAX) {
    rmqx_result_error(ctx, "%s: queue_id %lld is out of range (0..%d)", fn, (long long)queue_id,
                      INT32_MAX);
    return;
  }
  rmq_store *s = open_store(ctx, fn, argv[0]);
  if (s == NULL) return;
  rmq_err err = {0};
  if (rmq_store_commit_offset(s, group, topic, (int32_t)queue_id, offset, &err) == RMQ_OK) {
    sqlite3_result_int64(ctx, offset);
  } else {
    rmqx_result_error(ctx, "%s: %s", fn, err.msg);
  }
  rmq_store_release(s);
}

/* rocketmq_send_back(dir, group, commitlog_offset) */
static void send_back_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  static const char fn[] = "rocketmq_send_back";
  const char *group = cstr_arg(ctx, fn, "group", "name", argv[1]);
  int64_t offset, new_offset = 0;
  if (!group || !int_arg(ctx, fn, "commitlog_offset", argv[2], &offset)) return;
  rmq_store *s = open_store(ctx, fn, argv[0]);
  if (s == NULL) return;
  rmq_err err = {0};
  if (rmq_store_send_back(s, group, offset, &new_offset, &err) == RMQ_OK) {
    sqlite3_result_int64(ctx, new_offset);
  } else {
    rmqx_result_error(ctx, "%s: %s", fn, err.msg);
  }
  rmq_store_release(s);
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
    int n_args;
    void (*fn)(sqlite3_context *, int, sqlite3_value **);
    int flags;
  } funcs[] = {
      {"rocketmq_flush", 1, flush_func, SQLITE_DIRECTONLY},
      {"rocketmq_clean", 1, clean_func, SQLITE_DIRECTONLY},
      {"rocketmq_repair", 1, repair_func, SQLITE_DIRECTONLY},
      {"rocketmq_commit_offset", 5, commit_offset_func, SQLITE_DIRECTONLY},
      {"rocketmq_send_back", 3, send_back_func, SQLITE_DIRECTONLY},
      {"rocketmq_java_hash", 1, java_hash_func, SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS},
  };
  int rc = SQLITE_OK;
  for (size_t i = 0; rc == SQLITE_OK && i < sizeof funcs / sizeof funcs[0]; i++) {
    rc = sqlite3_create_function(db, funcs[i].name, funcs[i].n_args, SQLITE_UTF8 | funcs[i].flags,
                                 0, funcs[i].fn, 0, 0);
  }
  return rc;
}
