/*
** rmq.h: the engine's public API, Apache RocketMQ 4.9's message store in C.
**
** A store is a directory laid out as RocketMQ lays it out (spec §1):
** commitlog/, consumequeue/, index/, checkpoint, abort and lock. Opening a
** store for writing takes the `lock` file's POSIX record lock (the same lock
** a Java broker takes, so the two exclude each other), recovers the files
** (spec §8) and starts the background services; closing it flushes
** everything, stops the services and removes `abort`, the mark of a clean
** shutdown. No function here calls into SQLite.
**
** Errors: every call that can fail returns an RMQ_* code (rmq_err.h) and
** fills the caller's rmq_err with a message that names the path, offset or
** setting involved.
*/
#ifndef RMQ_H
#define RMQ_H

#include <stdbool.h>
#include <stdint.h>

#include "commitlog.h"
#include "consume_queue.h"
#include "index_file.h"
#include "file_name.h"
#include "java_hash.h"
#include "message.h"
#include "message_id.h"
#include "properties.h"
#include "reput.h"
#include "rmq_err.h"
#include "staging.h"
#include "topic.h"
#include "uniq_key.h"

typedef struct rmq_config {
  bool flush_sync;                  /* flush='sync': puts return once on disk */
  int32_t commitlog_file_size;      /* 1073741824 */
  int32_t consumequeue_entries;     /* 300000 (20-byte entries per file) */
  int32_t index_slots;              /* 5000000 */
  int32_t index_entries;            /* 20000000 */
  int32_t max_message_size;         /* 4194304: limit on a body */
  int default_queues;               /* 4 */
  char delay_levels[512];           /* "1s 5s ... 2h" */
  int file_reserved_hours;          /* 72 */
  char delete_when[64];             /* "04" */
  int disk_max_used_ratio;          /* 75 */
  bool readonly;                    /* read the files, take no lock, write nothing */
  rmq_host store_host;              /* 127.0.0.1:10911, part of every msgId */
  int sync_flush_timeout_ms;        /* 5000 */
  int transient_store_pool;         /* write buffers; 0 = off (async flush only) */
  bool warm_mapped_file;            /* pre-fault and mlock new CommitLog segments */
  bool use_spin_lock;               /* put lock: spin instead of a mutex */
  int flush_interval_ms;            /* 500: FlushRealTimeService */
} rmq_config;

/* RocketMQ's defaults. */
void rmq_config_init(rmq_config *cfg);
/* Check every value against its limit; RMQ_EINVAL names the setting. */
int rmq_config_check(const rmq_config *cfg, rmq_err *err);
/* Parse "1s 5s 10m 2h ..." (units s, m, h, d) into ms per level. */
int rmq_parse_delay_levels(const char *s, int64_t *ms, int max, int *count, rmq_err *err);

typedef struct rmq_store rmq_store;

/*
** Open the store in dir (created when missing and writable), recover it and
** start its services. RMQ_ELOCKED: another process has it open for writing
** ("store <dir> is locked by another process"). RMQ_ECORRUPT: a file does
** not follow the format (named, with the offset).
*/
int rmq_store_open(const char *dir, const rmq_config *cfg, rmq_store **out, rmq_err *err);
/* Flush everything, stop the services, remove `abort`, release the lock. */
void rmq_store_close(rmq_store *s);

/*
** Append n messages as one contiguous batch (see rmq_commitlog_put for the
** fields used and the checks; results may be NULL). With flush='sync', returns only after the
** batch is on disk; a flush that fails or times out is an error
** (RMQ_EIO / RMQ_ETIMEOUT), never a silent success.
*/
int rmq_store_put(rmq_store *s, const rmq_message *msgs, int n, rmq_put_result *results,
                  rmq_err *err);
/*
** A transaction's rows, encoded as they are inserted and appended at COMMIT
** with one copy: rmq_store_encode writes message m into buf (cap bytes) as
** the record the store will append (checked as rmq_store_put checks, a
** delayed message rewritten, body CRC and store host filled in) and returns
** its length; a length above cap means nothing was written (call again with
** room); -1, an error. rmq_store_put_encoded appends `count` such records,
** laid end to end in spans, as one contiguous batch: it writes each one's
** queue offset, physical offset and store time into the spans, then copies
** them (so a batch that failed can be put again). *first_offset: the first
** record's offset. Flushing as rmq_store_put.
*/
int32_t rmq_store_encode(rmq_store *s, const rmq_message *m, uint8_t *buf, size_t cap,
                         rmq_err *err);
int rmq_store_put_encoded(rmq_store *s, const rmq_span *spans, int nspans, int count,
                          int64_t *first_offset, rmq_err *err);

/*
** Memory for a transaction's rows: a chunk of RMQ_STAGING_CHUNK bytes whose
** pages the allocation thread mapped in ahead (staging.h). NULL when out of
** memory or the store is read-only. Every chunk goes back (give) before the
** store is closed.
*/
void *rmq_store_staging_take(rmq_store *s);
void rmq_store_staging_give(rmq_store *s, void *chunk);

/*
** Put latency (whole rmq_store_put, sync flush included) at a quantile
** (0.5, 0.99) in ns, from a sample of the puts, rounded up to a power of two.
*/
#define RMQ_LATENCY_BUCKETS 40
int64_t rmq_store_put_latency_ns(rmq_store *s, double quantile);

/* Force everything written so far to disk; *flushed_offset gets the flushed end. */
int rmq_store_flush(rmq_store *s, int64_t *flushed_offset, rmq_err *err);

const rmq_config *rmq_store_config(rmq_store *s);
const char *rmq_store_dir(rmq_store *s);
/* The store's parts, for readers (NULL reput in a read-only store). */
rmq_commitlog *rmq_store_commitlog(rmq_store *s);
rmq_cq_table *rmq_store_consume_queues(rmq_store *s);
rmq_index_service *rmq_store_index(rmq_store *s);
rmq_reput_service *rmq_store_reput(rmq_store *s);
/*
** Messages of topic whose UNIQ_KEY or one of whose KEYS equals key, stored
** in [begin, end] (ms), found through the index files newest first (at most
** max candidates) and re-checked on each record, so a hash collision never
** returns another key's or another topic's message. offsets[0..*count) is
** ascending; offsets needs room for max entries.
*/
int rmq_store_query_key(rmq_store *s, const char *topic, const char *key, int64_t begin,
                        int64_t end, int max, int64_t *offsets, int *count, rmq_err *err);
/* The queue offset of the first message of (topic, queue_id) stored at or after timestamp. */
int rmq_store_queue_offset_at_time(rmq_store *s, const char *topic, int32_t queue_id,
                                   int64_t timestamp, int64_t *queue_offset, rmq_err *err);
/* Store time of the record at phy_offset, or -1 (a rmq_cq_store_time_fn; store is the rmq_store). */
int64_t rmq_store_time_at(void *store, int64_t phy_offset, int32_t size);

/* One sentence on how the last open recovered the store (and what it cut). */
const char *rmq_store_recovery_report(rmq_store *s);

/* ================================================================ batches
**
** A transaction's rows, kept until COMMIT appends them as one contiguous
** batch (engine/batch.c). RocketMQ has no counterpart: a broker appends a
** message, or a producer's batch, when it arrives. Each row is encoded when
** it is added, as the record the store will append, into the store's
** staging memory (rmq_store_staging_take); the append copies the records
** once, the store filling in offsets and store time. One staging chunk is
** kept between transactions; rmq_batch_free gives everything back, and
** must come before the store is closed.
**
** Savepoint levels are SQLite's: rmq_batch_savepoint(level) opens levels up
** to level (each marking where the batch ends now), rmq_batch_release(level)
** closes level and those above it, rmq_batch_rollback_to(level) drops the
** rows added since level was opened and keeps it open. Levels are >= 0.
*/
typedef struct rmq_batch rmq_batch;

/* An empty batch for s; NULL when out of memory. No staging memory is taken yet. */
rmq_batch *rmq_batch_new(rmq_store *s);
/*
** Encode m (checked as rmq_store_put checks it, a delayed message
** rewritten) at the batch's end. Errors are rmq_store_encode's (RMQ_EINVAL
** names the limit), or RMQ_ENOMEM when no staging memory can be had; the
** batch is then as it was.
*/
int rmq_batch_add(rmq_batch *b, const rmq_message *m, rmq_err *err);
/* Records in the batch. */
int rmq_batch_count(const rmq_batch *b);
/* Open savepoint levels up to level. RMQ_ENOMEM: the level is not opened. */
int rmq_batch_savepoint(rmq_batch *b, int level, rmq_err *err);
void rmq_batch_release(rmq_batch *b, int level);
/* Drop exactly the rows added since level was opened; a level not open is a no-op. */
void rmq_batch_rollback_to(rmq_batch *b, int level);
/* Drop every row; open levels stay open, marking the empty batch. */
void rmq_batch_clear(rmq_batch *b);
/*
** Append the batch as one contiguous batch (rmq_store_put_encoded: flushed
** as rmq_store_put is) and clear it; *first_offset: the first record's
** offset, -1 for an empty batch, which appends nothing. Errors are
** rmq_store_put_encoded's (RMQ_EINVAL naming commitlog_file_size for a
** batch larger than a segment, RMQ_EFULL, RMQ_EIO, RMQ_EPOISONED, ...) or
** RMQ_ENOMEM; the batch is then intact and can be appended again.
*/
int rmq_batch_append(rmq_batch *b, int64_t *first_offset, rmq_err *err);
/* Give the batch's memory back (NULL: nothing). */
void rmq_batch_free(rmq_batch *b);

#endif
