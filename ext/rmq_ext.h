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

#endif
