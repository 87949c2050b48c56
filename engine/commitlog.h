/*
** commitlog.h: the CommitLog (spec §2, §8.2-8.4, §9.2).
**
** One append-only byte stream over a MappedFileQueue of fixed-size segments.
** Appends run under the put lock (a mutex, or a spin lock when configured):
** take the writer's segment, assign the queue offset from the topic-queue
** table, write a BLANK and roll when the record (or batch) does not fit with
** 8 bytes to spare, encode the record straight into the segment, stamp the
** store time and publish the new write position. Flushing is done by
** FlushRealTimeService (async) or GroupCommitService (sync, see flush.h).
**
** A failed fsync or commit poisons the CommitLog: every later put fails with
** RMQ_EPOISONED until the store is reopened, since the page cache's state is
** unknown after such a failure.
*/
#ifndef RMQ_COMMITLOG_H
#define RMQ_COMMITLOG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "checkpoint.h"
#include "mapped_file_queue.h"
#include "message.h"
#include "message_id.h"
#include "rmq_err.h"
#include "topic_queue_table.h"

#define RMQ_SCHEDULE_TOPIC "SCHEDULE_TOPIC_XXXX"
#define RMQ_MAX_DELAY_LEVELS 64

typedef struct rmq_commitlog_config {
  int32_t file_size;
  int32_t max_message_size;
  bool use_spin_lock;
  rmq_host store_host;
  int delay_level_count;
  int64_t delay_ms[RMQ_MAX_DELAY_LEVELS]; /* level i+1 waits delay_ms[i] */
} rmq_commitlog_config;

typedef struct rmq_commitlog {
  rmq_commitlog_config cfg;
  rmq_mapped_file_queue mfq;
  rmq_topic_queue_table *tqt;
  pthread_mutex_t put_mutex;
  pthread_spinlock_t put_spin;
  atomic_bool poisoned;
  char poison_msg[256];            /* written once, before poisoned is set */
  _Atomic int64_t begin_time_in_lock; /* 0 when the lock is free (stats) */
  _Atomic int64_t put_count;
} rmq_commitlog;

/* What an append tells the producer (spec §2.10 step 6). */
typedef struct rmq_put_result {
  int64_t physical_offset;
  int32_t size;
  int64_t queue_offset;
  int64_t store_timestamp;
  char msg_id[RMQ_MSG_ID_MAX];
} rmq_put_result;

int rmq_commitlog_init(rmq_commitlog *cl, const char *store_dir, const rmq_commitlog_config *cfg,
                       bool writable, rmq_err *err);
void rmq_commitlog_destroy(rmq_commitlog *cl);

/*
** Append n records contiguously in one segment (n = 1 for a single put).
** Input: topic, queue_id, flag, body, properties, born host/time, sys_flag,
** reconsume_times, prepared_transaction_offset. The store sets body CRC,
** store host, store time, offsets and the host-v6 bits, and rewrites a
** message with DELAY > 0 to SCHEDULE_TOPIC_XXXX (spec §2.10). Every record
** is checked first (topic, properties, body and record size limits); a bad
** one fails the whole call with RMQ_EINVAL naming the limit, and nothing is
** appended. results[i] receive each record's offsets and msgId (results may
** be NULL); *end_offset, the offset just past the batch.
*/
int rmq_commitlog_put(rmq_commitlog *cl, const rmq_message *msgs, int n,
                      rmq_put_result *results, int64_t *end_offset, rmq_err *err);

/*
** Encode m into buf (cap bytes) as rmq_commitlog_put would append it:
** checked the same way, a delayed message rewritten, body CRC, store host
** and host bits filled in; queue offset, physical offset and store time are
** left for rmq_commitlog_put_encoded. Returns the record's length (when it
** exceeds cap, nothing was written: call again with room), or -1 with err.
*/
int32_t rmq_commitlog_encode(rmq_commitlog *cl, const rmq_message *m, uint8_t *buf, size_t cap,
                             rmq_err *err);

/* Bytes holding whole encoded records, end to end. */
typedef struct rmq_span {
  uint8_t *data;
  size_t len;
} rmq_span;

/*
** Make sure the log has a segment to write to (a new store has none), so
** that the allocation thread pre-fills it while a first transaction is
** being built. Errors are left for the append to report.
*/
void rmq_commitlog_prepare_segment(rmq_commitlog *cl);
/*
** Append the `count` records that rmq_commitlog_encode wrote into spans, in
** order, as one contiguous batch (the same size limit as rmq_commitlog_put).
** Each record's queue offset, physical offset and store time are written
** into the spans, then the spans are copied: a batch that failed can be put
** again as it is. *first_offset, *end_offset: where the batch starts and ends.
*/
int rmq_commitlog_put_encoded(rmq_commitlog *cl, const rmq_span *spans, int nspans, int count,
                              int64_t *first_offset, int64_t *end_offset, rmq_err *err);
/* Poison the log after an I/O failure (first message kept). */
void rmq_commitlog_poison(rmq_commitlog *cl, const char *why);

int64_t rmq_commitlog_min_offset(rmq_commitlog *cl);
int64_t rmq_commitlog_max_offset(rmq_commitlog *cl);
int64_t rmq_commitlog_flushed_offset(rmq_commitlog *cl);
/* Start of the segment after the one holding offset (how BLANK is skipped). */
int64_t rmq_commitlog_roll_next(rmq_commitlog *cl, int64_t offset);

/*
** A held view of the bytes from offset to the end of its segment's readable
** data. Release it with rmq_commitlog_ref_release. RMQ_ENOTFOUND when no
** segment holds offset or offset is at or past the readable end.
*/
typedef struct rmq_commitlog_ref {
  rmq_mapped_file *file;
  const uint8_t *data;
  size_t avail;
} rmq_commitlog_ref;
int rmq_commitlog_get_data(rmq_commitlog *cl, int64_t offset, rmq_commitlog_ref *ref);
void rmq_commitlog_ref_release(rmq_commitlog_ref *ref);

/*
** Read and validate the record at offset; *out points into ref, which the
** caller releases. RMQ_ECORRUPT with the offset and reason if the bytes
** there are not a valid record.
*/
int rmq_commitlog_read_message(rmq_commitlog *cl, int64_t offset, bool check_crc,
                               rmq_commitlog_ref *ref, rmq_message *out, rmq_err *err);

/*
** Recovery of the CommitLog alone (spec §8.3, §8.4): scan from the chosen
** segment with CRC checks, call on_record for every valid record when
** dispatching (abnormal recovery), and truncate after the last valid
** record. *process_offset receives the recovered end; *truncated_bytes how
** many bytes of written data were cut (the damaged tail), so callers can say so.
*/
typedef void (*rmq_record_cb)(void *ctx, const rmq_message *m);
int rmq_commitlog_recover(rmq_commitlog *cl, bool last_exit_ok, rmq_checkpoint *cp,
                          rmq_record_cb on_record, void *ctx, int64_t *process_offset,
                          char *report, size_t report_cap);

/* Set the next queue offset of (topic, queue_id): recovery rebuilds the table from the queues. */
void rmq_commitlog_set_queue_offset(rmq_commitlog *cl, const char *topic, size_t topic_len,
                                    int32_t queue_id, int64_t next_offset);

/* tagsCode of a decoded record (§3.5, the SCHEDULE_TOPIC_XXXX delivery-time exception). */
int64_t rmq_commitlog_tags_code(rmq_commitlog *cl, const rmq_message *m);
/* The same, given the record's TAGS value (NULL when it has none). */
int64_t rmq_commitlog_tags_code_of(rmq_commitlog *cl, const rmq_message *m, const char *tags,
                                   size_t tags_len);

#endif
