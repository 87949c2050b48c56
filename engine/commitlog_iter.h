/*
** commitlog_iter.h: the commit-log iterator (its types and Next/Stop are
** public: rmq.h), interface to code in commitlog_iter.c.
**
** Every reader that walks the CommitLog record by record goes through it:
** recovery (CommitLog.recoverNormally / recoverAbnormally), the
** rocketmq_commitlog table and the rocketmq table's scans. The walk starts
** at the segment that holds `from` (records are found only by walking a
** segment from its start), returns the records that start in [from, to)
** and goes on to the next segment after a BLANK or at the end of a
** segment's data. It holds the segment it reads (reference counted) from
** one Next to the next, so a record's bytes stay mapped until then, and it
** never trusts a length field: every one is checked against the bytes that
** exist (rmq_message_decode).
*/
#ifndef RMQ_COMMITLOG_ITER_H
#define RMQ_COMMITLOG_ITER_H

#include "commitlog.h"

/* Start a walk of cl over the records that start in [from, to). */
void rmq_cl_iter_start(rmq_commitlog_iter *it, rmq_commitlog *cl, int64_t from, int64_t to,
                       unsigned flags);
/*
** Where records stored at or after ts can start: the last segment whose
** first record was stored before ts (the first segment when none was).
** Not "at or before": many records share a millisecond, so the segment
** before one that starts at ts can end with records of ts.
*/
int64_t rmq_commitlog_segment_for_time(rmq_commitlog *cl, int64_t ts);

#endif
