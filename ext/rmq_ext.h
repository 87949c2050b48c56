/*
** rmq_ext.h: interface between the files of ext/, the SQLite glue.
**
** ext/rocketmq.c is the entry point; every other file registers one
** virtual table or a group of SQL functions and includes this header after
** <sqlite3ext.h> (SQLITE_EXTENSION_INIT3 gives it the API table).
*/
#ifndef RMQ_EXT_H
#define RMQ_EXT_H

#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#include <stdbool.h>

#include "registry.h"
#include "rmq.h"

/* Registration, one function per file. */
int rmq_register_store_table(sqlite3 *db);        /* vtab_store.c: rocketmq */
int rmq_register_commitlog_table(sqlite3 *db);    /* vtab_commitlog.c: rocketmq_commitlog */
int rmq_register_consumequeue_table(sqlite3 *db); /* vtab_consumequeue.c: rocketmq_consumequeue */
int rmq_register_index_table(sqlite3 *db);        /* vtab_index.c: rocketmq_index */
int rmq_register_queues_table(sqlite3 *db);       /* vtab_queues.c: rocketmq_queues */
int rmq_register_stats_table(sqlite3 *db);        /* vtab_stats.c: rocketmq_stats */
int rmq_register_functions(sqlite3 *db);          /* functions.c: rocketmq_flush, ... */

/*
** A store to read, for the companion tables and functions that take a
** directory: the live store when this process has it open (shared through
** the registry), otherwise the files opened read-only (no lock taken,
** nothing written, sizes read off the files). On failure *errmsg is a
** sqlite3_malloc'd message for the user.
*/
typedef struct rmq_reader {
  rmq_store *store;
  bool shared;  /* from the registry: release, do not close */
} rmq_reader;

int rmq_reader_open(const char *dir, rmq_reader *r, char **errmsg);
void rmq_reader_close(rmq_reader *r);
/*
** For readers of consume queues and index files: wait (up to 30 s) until
** the live store's dispatcher has covered everything appended before now,
** so that a query sees every message whose INSERT returned before it
** started. A no-op for files opened read-only. On failure *errmsg is a
** sqlite3_malloc'd message.
*/
int rmq_reader_wait_dispatched(rmq_reader *r, char **errmsg);

/*
** args.c: the key=value arguments of CREATE VIRTUAL TABLE ... USING
** rocketmq(...) into a checked configuration; *dir is sqlite3_malloc'd.
*/
int rmq_parse_args(int argc, const char *const *argv, rmq_config *cfg, char **dir,
                   char **errmsg);

/* json.c: properties as a JSON object of strings (sqlite3_free the result). */
char *rmq_properties_json(const char *props, size_t len);
/* One name/value pair of a JSON object given by the user; return SQLITE_OK or fail with *errmsg. */
typedef int (*rmq_json_pair_cb)(void *ctx, const char *name, size_t name_len, const char *value,
                                size_t value_len, char **errmsg);
/*
** Parse a JSON object whose values are strings, numbers or true/false
** (null skips the pair), calling cb for each pair in order.
*/
int rmq_properties_from_json(const char *text, rmq_json_pair_cb cb, void *ctx, char **errmsg);
/* Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
bool rmq_utf8_valid(const uint8_t *s, size_t n);

#endif
