/*
** commitlog.h: the CommitLog (RocketMQ's CommitLog: put and read; recovery is
** commitlog_recover.h).
**
** One append-only byte stream over a MappedFileQueue of fixed-size segments.
** A put has one path: each message is checked and encoded into its record
** outside the lock (rmq_commitlog_encode), then the records are appended
** (rmq_commitlog_put_encoded) under the put lock (a mutex, or a spin lock
** when configured): take the writer's segment, write a BLANK and roll when
** the batch does not fit with 8 bytes to spare, copy each record in and
** stamp its queue offset from the topic-queue table, its physical offset and
** the store time, the first record's TOTALSIZE and MAGIC last (so that a
** batch cut short by a crash leaves zeros where it starts, and recovery ends
** the log before it), and publish the new write position. Flushing is done by
** FlushRealTimeService (async) or GroupCommitService (sync, see flush.h).
**
** A failed fsync or commit poisons the CommitLog: every later put fails with
** RMQ_EPOISONED until the store is reopened, since the page cache's state is
** unknown after such a failure. While the clean service finds the disk above
** disk_warning_ratio (RunningFlags' DISK_FULL), every put fails with
** RMQ_EFULL before anything is written.
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
#include "rmq.h"
#include "shared_log.h"
#include "topic_queue_table.h"

/* A record may exceed max_message_size by its topic, properties and fixed fields, up to this. */
#define RMQ_RECORD_SLACK 65536

typedef struct rmq_commitlog_config {
  int32_t file_size;
  int32_t max_message_size;
  bool use_spin_lock;
  bool flush_sync;        /* a batch is forced to disk before its head (flush='sync') */
  int disk_warning_ratio; /* named when a full disk refuses a put */
  rmq_host store_host;
  int delay_level_count;
  bool enable_lmq;    /* MultiDispatch: INNER_MULTI_DISPATCH gets its offsets at append */
  int max_lmq_queues; /* maxLmqConsumeQueueNum */
  int64_t delay_ms[RMQ_MAX_DELAY_LEVELS]; /* level i+1 waits delay_ms[i] */
} rmq_commitlog_config;

typedef struct rmq_commitlog {
  rmq_commitlog_config cfg;
  rmq_mapped_file_queue mfq;
  rmq_topic_queue_table *tqt;
  pthread_mutex_t put_mutex;
  pthread_spinlock_t put_spin;
  atomic_bool poisoned;
  pthread_mutex_t poison_mu; /* the first poisoner writes the message */
  char poison_msg[256];      /* written once, before poisoned is set */
  atomic_int disk_full;      /* 0, or the disk's used percent above disk_warning_ratio (clean.c) */
  rmq_shared_writer shared;  /* the processes' put lock and end, when shared (its log not NULL) */
  _Atomic int64_t disk_check_at;      /* the writer looks at the disk again past this offset */
  _Atomic int64_t begin_time_in_lock; /* 0 when the lock is free (stats) */
  _Atomic int64_t put_count;
  /* Woken after each put (CommitRealTimeService), or NULL; the flush thread reads it too. */
  _Atomic(struct rmq_service_thread *) put_wakeup;
  void (*appended)(void *ctx); /* told after each append and commit, outside the lock (HA) */
  void *appended_ctx;
  uint8_t *window;            /* the write window (rmq_commitlog_use_window), or NULL */
  rmq_mapped_file *window_mf; /* the segment it is attached to, held; NULL if none */
  atomic_bool window_dirty;   /* a run put bytes into it that may not be committed yet */
} rmq_commitlog;

int rmq_commitlog_init(rmq_commitlog *cl, const char *store_dir, const rmq_commitlog_config *cfg,
                       bool writable, rmq_err *err);
void rmq_commitlog_destroy(rmq_commitlog *cl);

/*
** A run of puts (rmq_commitlog_put_encoded_run: the rows of one INSERT ...
** SELECT) goes through a write window (rmq_mapped_file_window_attach), as
** TransientStorePool's buffers do in RocketMQ but small and reused: a copy
** into memory the CPU already maps is far cheaper than writing through a
** shared mapping, whose fresh pages each fault and whose flushes
** write-protect them again (a TLB shoot-down per page). The run's end (a
** sync wait, or rmq_flush_commit), the group commit, or the writer when the
** window is full, pwrites them into the file. Any other put commits the
** window and writes through the mapping. Not while other processes append
** (rmq_commitlog_let_others_append). Call before any put; RMQ_ENOMEM.
*/
int rmq_commitlog_use_window(rmq_commitlog *cl, rmq_err *err);
/* Whether puts are committed later (a transient store pool, or a write window). */
bool rmq_commitlog_buffered(rmq_commitlog *cl);
/*
** The end of a run (flush='async'): commit what the runs put into the window,
** under the put lock; one atomic load when they put nothing. A failed write
** poisons the log. *committed: whether anything was.
*/
int rmq_commitlog_commit_window(rmq_commitlog *cl, bool *committed, rmq_err *err);

/*
** Append n messages contiguously in one segment (n = 1 for a single put):
** each is encoded (rmq_commitlog_encode) into memory of the call, on the
** stack for a small batch, and the records appended with
** rmq_commitlog_put_encoded. Input: topic, queue_id, flag, body,
** properties, born host/time, sys_flag, reconsume_times,
** prepared_transaction_offset. Every message is checked first; a bad one
** fails the whole call with RMQ_EINVAL naming it ("message <i>: ...") and
** the limit, and nothing is appended. results[i] receive each record's
** offsets and msgId (results may be NULL); *end_offset, the offset just past
** the batch.
*/
int rmq_commitlog_put(rmq_commitlog *cl, const rmq_message *msgs, int n, rmq_put_result *results,
                      int64_t *end_offset, rmq_err *err);

/*
** The records rmq_commitlog_put would append for msgs, checked and encoded as
** it encodes them, end to end in out->data (malloc'd; the caller frees it).
** Errors as rmq_commitlog_put's before it appends.
*/
int rmq_commitlog_encode_batch(rmq_commitlog *cl, const rmq_message *msgs, int n, rmq_span *out,
                               rmq_err *err);
/*
** Encode m into buf (cap bytes) as the record the log will hold: topic,
** properties, body and record size checked against their limits; a message
** with DELAY > 0 (not a prepared or rolled-back transaction) rewritten to
** SCHEDULE_TOPIC_XXXX queue level-1 with REAL_TOPIC and REAL_QID
** (CommitLog.asyncPutMessage); body CRC, store host and host-v6 bits filled
** in. Queue offset, physical offset and store time are left for
** rmq_commitlog_put_encoded. Returns the record's length (when it exceeds
** cap, nothing was written: call again with room), or -1 with err.
*/
int32_t rmq_commitlog_encode(rmq_commitlog *cl, const rmq_message *m, uint8_t *buf, size_t cap,
                             rmq_err *err);
/*
** As rmq_commitlog_encode, without the delay rewrite: a delayed message that
** is due goes to its real topic with its properties string as it was stored,
** DELAY included (ScheduleMessageService.messageTimeup).
*/
int32_t rmq_commitlog_encode_timeup(rmq_commitlog *cl, const rmq_message *m, uint8_t *buf,
                                    size_t cap, rmq_err *err);

/*
** Make sure the log has a segment to write to (a new store has none), so
** that the allocation thread maps it ahead while a first transaction is
** being built. Errors are left for the append to report.
*/
void rmq_commitlog_prepare_segment(rmq_commitlog *cl);
/*
** Append the `count` records that rmq_commitlog_encode wrote into spans, in
** order, as one contiguous batch; RMQ_EINVAL when it does not fit in one
** segment. Each record's queue offset (0, without advancing its queue, for a
** prepared or rolled-back transaction), physical offset and store time are
** stamped as it is copied in (DefaultAppendMessageCallback.doAppend); the
** spans are only read or stamped, so a batch that failed can be put again as
** it is. results[i], when results is not NULL, receive record i's offsets,
** size, store time and msgId. *first_offset, *end_offset: where the batch
** starts and ends.
*/
int rmq_commitlog_put_encoded(rmq_commitlog *cl, const rmq_span *spans, int nspans, int count,
                              rmq_put_result *results, int64_t *first_offset, int64_t *end_offset,
                              rmq_err *err);
/*
** As rmq_commitlog_put_encoded, for a put that continues a run whose caller
** commits it at its end (rmq_flush_commit, or a sync wait): the batch may
** wait in the write window until then, unseen by readers and lost with the
** process.
*/
int rmq_commitlog_put_encoded_run(rmq_commitlog *cl, const rmq_span *spans, int nspans, int count,
                                  int64_t *first_offset, int64_t *end_offset, rmq_err *err);
/*
** As rmq_commitlog_put_encoded, for the records in the first len bytes of
** file fd (a large transaction's, rmq_batch): read back in chunks, stamped
** and written to the log by pwrite, the first head last. RMQ_EIO if the
** file cannot be read.
*/
int rmq_commitlog_put_file(rmq_commitlog *cl, int fd, int64_t len, int count, int64_t *first_offset,
                           int64_t *end_offset, rmq_err *err);
/*
** A slave's append of what its master sent (CommitLog.appendData): len bytes
** of whole records, checked by the caller, at offset, which must be the
** log's end; an empty log (empty segments dropped) starts at offset, a
** segment's start. The bytes must stay in one segment; len 0 only makes the segment.
** store_timestamp: the last record's, for the checkpoint. RMQ_EINVAL when
** offset is not the end or the bytes pass the segment's end; RMQ_EPOISONED,
** RMQ_EFULL, RMQ_EIO.
*/
int rmq_commitlog_append_data(rmq_commitlog *cl, int64_t offset, const uint8_t *data, size_t len,
                              int64_t store_timestamp, rmq_err *err);
/*
** Several processes append to one log (shared_log.h): once a follower
** appends itself, every put takes log's lock as well, catching up with what
** the others appended; until then the owner's puts only publish the end.
** The owner takes the lock (rmq_shared_log_lock) before its recovery and
** holds it until its services run; it shares its log once recovered and
** calls rmq_commitlog_shared_recovered. An appender (a
** follower's log, its segments opened as it needs them) starts from the
** owner's queue offsets (rmq_shared_writer_join); its puts fail with
** RMQ_EAGAIN when the owner must append them (a roll, a cut log, a failed
** owner).
*/
void rmq_commitlog_share(rmq_commitlog *cl, rmq_shared_log *log, bool appender);
void rmq_commitlog_shared_recovered(rmq_commitlog *cl);
/* A follower appends itself (shared_log.h's direct_writers). */
bool rmq_commitlog_direct_writers(rmq_commitlog *cl);
/*
** The owner lets followers append themselves: from now on its puts take the
** processes' lock as well as its own (set under its own, so no put of its
** is under way with the one lock only).
*/
int rmq_commitlog_let_others_append(rmq_commitlog *cl, rmq_err *err);
/*
** The owner, under the put lock: every queue's next offset (CommitLog's
** topicQueueTable) as of the log's end *end, in *out (malloc'd, *len bytes),
** for a follower that joins; rmq_commitlog_seed_queue_offsets reads them
** into its table (RMQ_ECORRUPT when they are cut short).
*/
int rmq_commitlog_queue_offsets(rmq_commitlog *cl, uint8_t **out, size_t *len, int64_t *end,
                                rmq_err *err);
int rmq_commitlog_seed_queue_offsets(rmq_topic_queue_table *tqt, const uint8_t *p, size_t len,
                                     rmq_err *err);
/*
** The owner: take in what other processes appended (positions, the last
** store time) and wake the flush and HA services for it. Flushes and a wait
** for a follower's durable end call it; rmq_commitlog_max_offset follows
** the positions alone.
*/
void rmq_commitlog_follow_shared(rmq_commitlog *cl);
/* The disk is above disk_warning_ratio (percent), or not (0); every process of a shared log. */
int rmq_commitlog_disk_full(rmq_commitlog *cl);
void rmq_commitlog_set_disk_full(rmq_commitlog *cl, int percent);

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
int rmq_commitlog_get_data(rmq_commitlog *cl, int64_t offset, rmq_commitlog_ref *ref);

/*
** Read and validate the record at offset; *out points into ref, which the
** caller releases. RMQ_ECORRUPT with the offset and reason if the bytes
** there are not a valid record.
*/
int rmq_commitlog_read_message(rmq_commitlog *cl, int64_t offset, bool check_crc,
                               rmq_commitlog_ref *ref, rmq_message *out, rmq_err *err);

/*
** Store time of the record at offset, read from its header alone, or -1
** when fewer than size bytes (or no header) are readable there.
*/
int64_t rmq_commitlog_time_at(rmq_commitlog *cl, int64_t offset, int32_t size);

/*
** Set the next queue offset of (topic, queue_id): recovery rebuilds the
** table from the queues, at open, before any put (so without the put lock,
** which an owner takes only after the processes' lock).
*/
void rmq_commitlog_set_queue_offset(rmq_commitlog *cl, const char *topic, size_t topic_len,
                                    int32_t queue_id, int64_t next_offset);

/*
** tagsCode of a decoded record (CommitLog.checkMessageAndReturnSize, with
** the SCHEDULE_TOPIC_XXXX delivery-time exception).
*/
int64_t rmq_commitlog_tags_code(rmq_commitlog *cl, const rmq_message *m);
/* The same, given the record's TAGS value (NULL when it has none). */
int64_t rmq_commitlog_tags_code_of(rmq_commitlog *cl, const rmq_message *m, const char *tags,
                                   size_t tags_len);

/*
** Does consume-queue entry n of topic/queue_id hold what dispatch writes for
** the record m it leads to (ConsumeQueue.putMessagePositionInfo: the
** record's topic, queue and QUEUEOFFSET n, its size and tagsCode)? The
** tagsCode of SCHEDULE_TOPIC_XXXX, a due time by the delay levels the store
** was written with, is not compared. False with why (cap bytes) set.
*/
bool rmq_commitlog_entry_check(rmq_commitlog *cl, const char *topic, int32_t queue_id, int64_t n,
                               const rmq_cq_entry *e, const rmq_message *m, char *why, size_t cap);

#endif
