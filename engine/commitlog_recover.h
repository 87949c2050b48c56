/*
** commitlog_recover.h: recovery of the CommitLog (CommitLog.recoverNormally,
** recoverAbnormally), on the commit-log iterator (commitlog_iter.h), which
** sits on the CommitLog's reads (commitlog.h).
*/
#ifndef RMQ_COMMITLOG_RECOVER_H
#define RMQ_COMMITLOG_RECOVER_H

#include <stdbool.h>
#include <stdint.h>

#include "checkpoint.h"
#include "commitlog.h"

/*
** Recovery of the CommitLog alone (CommitLog.recoverNormally,
** recoverAbnormally): scan from the chosen segment with CRC checks, call
** on_record for every valid record when dispatching (abnormal recovery),
** then look at what follows the last valid record. A read-only log is only
** scanned. A writable one never deletes a record that passes its CRC:
** - a torn tail (the store was not closed cleanly, no later segment holds
**   bytes, and nothing after the end was stored before the checkpoint's
**   physicMsgTimestamp) is moved aside: its bytes copied into
**   <store>/damaged/<UTC time>/, in a file named by the offset of its first
**   byte, then zeroed in the log;
** - anything else after the end is damage: RMQ_ECORRUPT naming the segment,
**   the offset and the sound records that follow, and how to repair;
**   nothing is changed. With repair, damage is moved aside as a torn tail
**   is, and every later segment that holds bytes is linked into the same
**   directory.
** Then the log is truncated after the last valid record (empty later
** segments deleted).
*/
typedef void (*rmq_record_cb)(void *ctx, const rmq_message *m);
typedef struct rmq_recovery {
  bool last_exit_ok;       /* in: no abort file */
  bool repair;             /* in: move damage aside instead of failing */
  rmq_checkpoint *cp;      /* in */
  rmq_record_cb on_record; /* in: each valid record, when dispatching */
  void *ctx;
  int64_t end;         /* out: the recovered end */
  int64_t moved;       /* out: bytes moved aside */
  char moved_to[4096]; /* out: where to, "" when nothing was */
  char report[768];    /* out: one sentence on what recovery did */
} rmq_recovery;
int rmq_commitlog_recover(rmq_commitlog *cl, rmq_recovery *r, rmq_err *err);
/*
** Load the segments for a repair: the segment size is the largest file's,
** and the segment that cannot be loaded (short, or after a gap) and every
** one after it are moved into a new <store>/damaged/<UTC time>/ (r->moved_to,
** r->moved), for rmq_commitlog_recover with repair to go on there.
*/
int rmq_commitlog_load_for_repair(rmq_commitlog *cl, rmq_recovery *r, rmq_err *err);

#endif
