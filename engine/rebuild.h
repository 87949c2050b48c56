/*
** rebuild.h: the derived files' check at open. The consume queues and the
** index files hold nothing the commit log does not (ReputMessageService
** writes them from it), so damage in them is never fatal: a writable open
** sets the damaged files aside into <store>/damaged/ and dispatches the log
** again from the first record they held, as RocketMQ's abnormal recovery
** dispatches from the checkpoint; a read-only open serves what is sound and
** fails the reads that need the rest, naming the file.
*/
#ifndef RMQ_REBUILD_H
#define RMQ_REBUILD_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "commitlog.h"
#include "consume_queue.h"
#include "index_file.h"

typedef struct rmq_rebuild {
  const char *dir; /* the store */
  rmq_commitlog *cl;
  rmq_cq_table *cqs;
  rmq_index_service *index;
  bool writable;
  /* Called once before the first file is set aside, so that a crash from there on leaves a
     store whose next open dispatches everything again (the store makes the exit unclean). */
  int (*unclean)(void *ctx, rmq_err *err);
  void *unclean_ctx;
  int64_t from;  /* out: dispatch again from this commit-log offset; INT64_MAX: no need */
  int64_t moved; /* out: bytes set aside */
  char damaged_dir[PATH_MAX]; /* made at the first file set aside */
  char report[512];           /* out: what was rebuilt or found damaged, "" when nothing */
} rmq_rebuild;

/* Set up r for the parts of the store in dir; nothing is read yet. */
void rmq_rebuild_init(rmq_rebuild *r, const char *dir, rmq_commitlog *cl, rmq_cq_table *cqs,
                      rmq_index_service *index, bool writable);

/*
** After the index files were loaded (rmq_index_service_load) and before
** anything is dispatched: a writer sets aside the damaged file it stopped
** at and every later one. Errors: RMQ_EIO.
*/
int rmq_rebuild_index(rmq_rebuild *r, rmq_err *err);

/*
** After the commit log was recovered to end: a writer deletes the index
** files whose items reach past it (a crash or a repair cut records they
** index) and dispatches again from the last one kept, so that the records
** written there again are indexed.
*/
void rmq_rebuild_index_end(rmq_rebuild *r, int64_t end);

/*
** After the consume queues and the commit log were recovered: each queue's
** structure (rmq_cq_check), and whether its last entry leads to the record
** it should (readers check the others as they follow them). A damaged
** queue is set aside from the segment holding the damage (writer) or marked
** (reader). Errors: RMQ_EIO, RMQ_ENOMEM.
*/
int rmq_rebuild_queues(rmq_rebuild *r, rmq_err *err);

#endif
