/*
** rmq.h: the engine's public API, Apache RocketMQ 4.9's message store in C.
**
** A store is a directory laid out as RocketMQ lays it out: commitlog/,
** consumequeue/, index/, checkpoint, abort and lock. Opening a store for
** writing takes a lock on the `lock` file that conflicts with the POSIX lock a
** Java broker takes and with any other engine's, in this process or another,
** recovers the files
** (DefaultMessageStore.recover) and starts the background services; closing
** it flushes everything, stops the services and removes `abort`, the mark
** of a clean shutdown. No function here calls into SQLite.
**
** This header is the only one a user of the engine includes (the SQLite
** glue in ext/ includes nothing else); the component headers of engine/
** include it, never the other way. Handles are opaque; the structs a caller
** allocates (iterators, views, references) say which fields are private.
**
** Errors: every call that can fail returns an RMQ_* code and fills the
** caller's rmq_err with a sentence that names the path, offset or setting
** involved. Each function below lists the codes it returns.
*/
#ifndef RMQ_H
#define RMQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The version of sqlite-rocketmq, as rocketmq_version() returns it. */
#define RMQ_VERSION "0.1.0"

/* -------------------------------------------------------------- messages */

/*
** The CommitLog record codec's types (MessageDecoder): a record decoded in
** place, the host and msgId formats, the properties string
** "name\1value\2name\1value", and the names and hashes RocketMQ derives.
*/
#define RMQ_MAX_TOPIC_LEN 127
#define RMQ_MAX_PROPERTIES_LEN 32767

/* A host: IPv4 (4 address bytes) or IPv6 (16), and a port. */
typedef struct rmq_host {
  uint8_t addr[16];
  int32_t port;
  bool v6;
} rmq_host;

/*
** One record. Decoding fills it with pointers into the decoded buffer
** (nothing is copied); encoding reads it. total_size and magic are outputs
** of the encoder and ignored on input.
*/
typedef struct rmq_message {
  int32_t total_size;
  int32_t magic;
  int32_t body_crc;
  int32_t queue_id;
  int32_t flag;
  int64_t queue_offset;
  int64_t physical_offset;
  int32_t sys_flag;
  int64_t born_timestamp;
  rmq_host born_host;
  int64_t store_timestamp;
  rmq_host store_host;
  int32_t reconsume_times;
  int64_t prepared_transaction_offset;
  const uint8_t *body;
  int32_t body_len;
  const char *topic;
  int32_t topic_len;
  const char *properties;
  int32_t properties_len;
} rmq_message;

typedef enum rmq_decode_status {
  RMQ_DECODE_OK = 0,     /* a valid record; total_size bytes */
  RMQ_DECODE_BLANK,      /* end-of-segment BLANK; total_size = its length */
  RMQ_DECODE_BAD_MAGIC,  /* neither v1, v2 nor BLANK (zero bytes land here) */
  RMQ_DECODE_TRUNCATED,  /* a field or a length runs past the available bytes */
  RMQ_DECODE_BAD_LENGTH, /* calMsgLength differs from TOTALSIZE */
  RMQ_DECODE_BAD_CRC     /* check_crc and the masked CRC32 of the body differs */
} rmq_decode_status;

const char *rmq_decode_status_name(rmq_decode_status s);

/* CRC32(bytes) & 0x7FFFFFFF, the stored BODYCRC. */
int32_t rmq_body_crc(const void *bytes, size_t len);

/* Parse "a.b.c.d:port" or "[v6]:port"; returns 0, or -1 when malformed. */
int rmq_host_parse(const char *s, rmq_host *out);
/* Format as "a.b.c.d:port" or "[v6]:port" into buf (at least 64 bytes). */
void rmq_host_format(const rmq_host *h, char *buf, size_t cap);

/* Offset msgId: store host bytes + port + offset, upper-case hex (33 or 57 bytes with NUL). */
#define RMQ_MSG_ID_MAX 57
void rmq_msg_id_format(const rmq_host *store_host, int64_t offset, char out[RMQ_MSG_ID_MAX]);
/* Decode a msgId (32 hex chars: IPv4, 56: IPv6, case-insensitive); returns 0 or -1. */
int rmq_msg_id_parse(const char *hex, size_t len, rmq_host *store_host, int64_t *offset);

/* Property names the store reads. */
#define RMQ_PROPERTY_TAGS "TAGS"
#define RMQ_PROPERTY_KEYS "KEYS"
#define RMQ_PROPERTY_UNIQ_KEY "UNIQ_KEY"
/* ScheduleMessageService's topic: queue level - 1 holds the messages of delay level `level`. */
#define RMQ_SCHEDULE_TOPIC "SCHEDULE_TOPIC_XXXX"
#define RMQ_PROPERTY_DELAY "DELAY"
#define RMQ_PROPERTY_WAIT "WAIT" /* "false": the put does not wait for the disk (flush='sync') */
#define RMQ_PROPERTY_REAL_TOPIC "REAL_TOPIC"
#define RMQ_PROPERTY_REAL_QID "REAL_QID"
#define RMQ_PROPERTY_RETRY_TOPIC "RETRY_TOPIC"             /* a retried message's first topic */
#define RMQ_PROPERTY_ORIGIN_MESSAGE_ID "ORIGIN_MESSAGE_ID" /* the msgId it was first stored as */

/* A property's value as rmq_properties_find reports it; value NULL when absent. */
typedef struct rmq_property_value {
  const char *value;
  size_t len;
} rmq_property_value;
/*
** Look n names up in one pass over props (readers want several per record):
** out[i] receives names[i]'s value, by MessageDecoder 4.9.7's rules:
** segments shorter than 3 bytes and pairs with an empty name or value are
** ignored, a trailing \2 is accepted, and a later duplicate wins.
*/
void rmq_properties_find(const char *props, size_t len, const char *const *names, int n,
                         rmq_property_value *out);

typedef struct rmq_properties_iter {
  const char *p, *end;
} rmq_properties_iter;
void rmq_properties_iter_init(rmq_properties_iter *it, const char *props, size_t len);
/*
** MessageExt.isWaitStoreMsgOK: whether a put of m waits for the disk
** (flush='sync') and for a slave (sync_master): unless its WAIT property is
** there and is not "true" in any case (Boolean.parseBoolean).
*/
bool rmq_message_waits(const rmq_message *m);
/* Next valid pair in stored order; returns false at the end. */
bool rmq_properties_next(rmq_properties_iter *it, const char **name, size_t *name_len,
                         const char **value, size_t *value_len);

/* True if s holds \1 or \2, which no property name or value may contain. */
bool rmq_properties_has_separator(const char *s, size_t n);
/* Does the UNIQ_KEY, or one of the space-separated KEYS, of props equal key (IndexService keys)? */
bool rmq_properties_have_key(const char *props, size_t len, const char *key, size_t key_len);
/*
** Append "name\1value" (with a \2 before it when *len > 0) to buf, for a
** name and value known to hold no separator. Returns 0, or -1 if it does
** not fit in cap.
*/
int rmq_properties_put(char *buf, size_t cap, size_t *len, const char *name, size_t name_len,
                       const char *value, size_t value_len);

/* Java String.hashCode over the UTF-16 units of UTF-8 text (U+FFFD for bad sequences). */
int32_t rmq_java_hash(const char *utf8, size_t len);
/* tagsCode of a TAGS value: the Java hash sign-extended; 0 for empty/absent. */
int64_t rmq_tags_code(const char *tags, size_t len);
/* Index key hash of "topic#key": abs(javaHash), Integer.MIN_VALUE -> 0. */
int32_t rmq_index_key_hash(const char *topic, size_t topic_len, const char *key, size_t key_len);

/* RocketMQ's topic rule: 1..127 bytes of [A-Za-z0-9_%|-]. */
bool rmq_topic_valid(const char *topic, size_t len);
/* A system topic (RocketMQ's TopicValidator) that only the broker writes: SCHEDULE_TOPIC_XXXX, ... */
bool rmq_topic_system(const char *topic, size_t len);
/* RocketMQ's group rule (Validators.checkGroup): 1..255 bytes of the same characters. */
#define RMQ_MAX_GROUP_LEN 255
bool rmq_group_valid(const char *group, size_t len);

/* 20-digit zero-padded start offset, as CommitLog and ConsumeQueue files are named. */
void rmq_file_name(int64_t offset, char out[21]);

/*
** The end no commit log or consume queue passes: 2^62 bytes (4 EiB), far
** enough below INT64_MAX that an offset plus a segment plus a replication
** frame cannot overflow. No segment that would end past it is made, and a
** slave refuses a master's frame that would need one.
*/
#define RMQ_MAX_LOG_OFFSET (INT64_C(1) << 62)

/*
** UNIQ_KEY generator in MessageClientIDSetter's format: client
** IP (IPv4 preferred), pid low 16 bits, a per-process int32, ms since the
** start of the local month, a 16-bit counter. Thread-safe.
*/
typedef struct rmq_uniq_key_gen rmq_uniq_key_gen;
/* NULL when out of memory. */
rmq_uniq_key_gen *rmq_uniq_key_gen_new(void);
void rmq_uniq_key_gen_free(rmq_uniq_key_gen *g);
/* Writes the id and a NUL (33 or 57 bytes); returns its length. */
int rmq_uniq_key_next(rmq_uniq_key_gen *g, char out[RMQ_MSG_ID_MAX]);

/* ---------------------------------------------------------------- errors */

/*
** Every engine call that can fail takes an `rmq_err *` and returns an
** RMQ_* code. On failure the code is also stored in err->code and
** err->msg holds a sentence with context: the path, the offset, what was
** expected, what was found, and which setting to change.
**
** rmq_err_set keeps the first error recorded: a later failure (a cleanup
** that fails after the root cause) never overwrites its message. That is
** all that is sticky. Unlike fts5's pRc, a callee does not look at err on
** entry and does not return early because it already holds an error: each
** caller stops its own chain at the first failing return code. A caller
** that goes on after a failure it handled clears err (rmq_err_clear) first,
** or the next error's message is lost.
*/
enum {
  RMQ_OK = 0,
  RMQ_EINVAL,    /* bad argument or message: nothing was written */
  RMQ_ENOMEM,    /* out of memory */
  RMQ_EIO,       /* an I/O call failed; the store may now refuse writes */
  RMQ_ECORRUPT,  /* a file's bytes do not follow the format */
  RMQ_ELOCKED,   /* another process holds the store's lock */
  RMQ_ETIMEOUT,  /* a flush or an allocation did not finish in time */
  RMQ_EPOISONED, /* an earlier fsync or write failed: reopen the store */
  RMQ_ENOTFOUND, /* no such message, queue or file */
  RMQ_ECLOSED,   /* the store is shutting down */
  RMQ_EFULL,     /* a segment or an index file has no room, or the disk is full */
  RMQ_ENOSLAVE,  /* sync_master: no slave to replicate to (SLAVE_NOT_AVAILABLE) */
  RMQ_EAGAIN     /* engine-internal: this process cannot append now; its owner appends it */
};

typedef struct rmq_err {
  int code;
  char msg[512];
} rmq_err;

/*
** Record an error unless one is already recorded. Returns err->code: the
** first error's code, which may differ from code (code itself when err is NULL).
*/
int rmq_err_set(rmq_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Forget any recorded error. */
void rmq_err_clear(rmq_err *err);
/* A fixed English name for a code ("I/O error", "store is locked", ...). */
const char *rmq_strerror(int code);

/* ------------------------------------------------------ body compression */

/*
** CompressionType, ZlibCompressor, Lz4Compressor and ZstdCompressor
** (compression.c). A 4.9 producer compresses a body of
** compressMsgBodyOverHowmuch bytes or more and marks it in SYSFLAG: bit 0
** (COMPRESSED_FLAG) and the codec in bits 8-10 (0 or 3 zlib, 1 LZ4, 2 ZSTD).
** The store keeps the compressed bytes; a consumer inflates them
** (MessageDecoder.decode). zlib is the RFC 1950 stream of
** java.util.zip.Deflater, LZ4 the frame format of lz4-java's
** LZ4FrameOutputStream, ZSTD the zstd frame format of zstd-jni.
*/
#define RMQ_SYSFLAG_COMPRESSED 0x1
#define RMQ_SYSFLAG_COMPRESSION_TYPE 0x700
/* An inflated body is bounded: a damaged or hostile one gets an error, not the memory. */
#define RMQ_MAX_INFLATED_BODY (64 << 20)

typedef enum rmq_codec {
  RMQ_CODEC_NONE = 0,
  RMQ_CODEC_LZ4 = 1,
  RMQ_CODEC_ZSTD = 2,
  RMQ_CODEC_ZLIB = 3,
} rmq_codec;

/*
** The codec a record's SYSFLAG names; NONE when bit 0 is clear
** (CompressionType.findByValue: type 0 is zlib). Types 4-7 come back as
** they are, which rmq_decompress refuses.
*/
rmq_codec rmq_codec_of_sys_flag(int32_t sys_flag);
/* The SYSFLAG bits a producer sets for a body compressed with c. */
int32_t rmq_codec_sys_flag(rmq_codec c);
/* "zlib", "lz4", "zstd" ("unknown" for another type); and back (any case), NONE for another name. */
const char *rmq_codec_name(rmq_codec c);
rmq_codec rmq_codec_by_name(const char *name);
/*
** Each codec's state kept from one body to the next, so that a run of
** bodies does not set one up for each; one per table, cursor or thread (not
** thread-safe). NULL when out of memory.
*/
typedef struct rmq_codec_ctx rmq_codec_ctx;
rmq_codec_ctx *rmq_codec_ctx_new(void);
void rmq_codec_ctx_free(rmq_codec_ctx *x);
/*
** Inflate len bytes at src with c into *out (malloc'd, *out_len bytes; at
** least one byte allocated), with x's state (NULL: set up for this body
** alone). RMQ_ECORRUPT naming the codec and what is wrong for a damaged or
** cut stream, or one that inflates past max bytes; RMQ_ENOMEM.
*/
int rmq_decompress(rmq_codec_ctx *x, rmq_codec c, const uint8_t *src, size_t len, size_t max,
                   uint8_t **out, size_t *out_len, rmq_err *err);
/*
** Compress len bytes at src with c at level (zlib 0-9, zstd 1-22, LZ4 0-12)
** into *out (malloc'd, *out_len bytes), with x's state (NULL: set up for
** this body alone). RMQ_ENOMEM, or RMQ_EIO naming the codec's error.
*/
int rmq_compress(rmq_codec_ctx *x, rmq_codec c, int level, const uint8_t *src, size_t len,
                 uint8_t **out, size_t *out_len, rmq_err *err);

/* ---------------------------------------------------------------- clocks */

int64_t rmq_now_ms(void);       /* wall clock, ms since the epoch (timestamps) */
int64_t rmq_monotonic_ms(void); /* monotonic clock, ms (deadlines) */

/* ---------------------------------------------------------------- config */

#define RMQ_MAX_DELAY_LEVELS 64
/*
** The longest delay of a level: 365 days. RocketMQ has no limit, but a
** store time plus a delay must not overflow; with this bound the sum stays
** far from INT64_MAX for any wall-clock time.
*/
#define RMQ_MAX_DELAY_MS (365LL * 86400000)

/* BrokerRole: a master that does not wait for its slaves, one that does, a slave. */
typedef enum rmq_role { RMQ_ROLE_MASTER, RMQ_ROLE_SYNC_MASTER, RMQ_ROLE_SLAVE } rmq_role;
#define RMQ_HA_ADDR 64 /* bytes of a "host:port" setting, its NUL included */

typedef struct rmq_config {
  bool flush_sync;               /* flush='sync': puts return once on disk */
  int32_t commitlog_file_size;   /* 1073741824 */
  int32_t consumequeue_entries;  /* 300000 (20-byte entries per file) */
  int32_t index_slots;           /* 5000000 */
  int32_t index_entries;         /* 20000000 */
  int32_t max_message_size;      /* 4194304: limit on a body */
  int default_queues;            /* 4 */
  char delay_levels[512];        /* "1s 5s ... 2h"; each at most RMQ_MAX_DELAY_MS */
  int file_reserved_hours;       /* 72 */
  char delete_when[128];         /* "04"; every hour, "00;01;...;23", fits */
  int disk_max_used_ratio;       /* 75: above it, expired segments go at any hour */
  int disk_clean_forcibly_ratio; /* 85: above it, unexpired segments go too */
  int disk_warning_ratio;        /* 90: above it, writes are refused (RMQ_EFULL) */
  int clean_interval_ms;         /* 10000: CleanCommitLogService's period */
  int clean_first_delay_ms;      /* 60000: before the first periodic pass */
  int clean_grace_ms;            /* 120000: a deleted file's wait for its readers */
  bool readonly;                 /* read the files, take no lock, write nothing */
  rmq_host store_host;           /* 127.0.0.1:10911, part of every msgId */
  int sync_flush_timeout_ms;     /* 5000 */
  int transient_store_pool;      /* write buffers; 0 = off (async flush only) */
  bool warm_mapped_file;         /* pre-fault and mlock new CommitLog segments */
  bool use_spin_lock;            /* put lock: spin instead of a mutex */
  int flush_interval_ms;         /* 500: FlushRealTimeService, 1..86400000 */
  int max_reconsume_times;       /* 16: retries before rmq_store_send_back goes to %DLQ% */
  int32_t compress_over;         /* 4096: INSERT compresses bodies this long; 0: never */
  rmq_codec compress_type;       /* zlib */
  int compress_level;            /* 5 */
  bool enable_lmq;               /* light message queues: INNER_MULTI_DISPATCH is dispatched */
  int max_lmq_queues;            /* 20000: light message queues a store may hold */
  rmq_role role;                 /* master */
  char ha_listen[RMQ_HA_ADDR];   /* "host:port" the master serves slaves on; "": none */
  char ha_master[RMQ_HA_ADDR];   /* "host:port" a slave replicates from */
  int ha_slave_timeout_ms;       /* 3000: a sync_master put's wait for a slave */
  int ha_heartbeat_ms;           /* 5000: haSendHeartbeatInterval, and a slave's retry */
  int ha_housekeeping_ms;        /* 20000: haHousekeepingInterval, a silent peer's limit */
} rmq_config;

/* RocketMQ's defaults. */
void rmq_config_init(rmq_config *cfg);
/* "master", "sync_master", "slave"; and back (RMQ_EINVAL naming role). */
const char *rmq_role_name(rmq_role role);
int rmq_role_parse(const char *name, rmq_role *out, rmq_err *err);
/* Check every value against its limit. RMQ_EINVAL names the setting. */
int rmq_config_check(const rmq_config *cfg, rmq_err *err);
/*
** Parse "1s 5s 10m 2h ..." (units s, m, h, d) into ms per level, at most max
** levels. RMQ_EINVAL names the level that is malformed, one too many, or
** longer than RMQ_MAX_DELAY_MS.
*/
int rmq_parse_delay_levels(const char *s, int64_t *ms, int max, int *count, rmq_err *err);

/* ----------------------------------------------------------------- store */

typedef struct rmq_store rmq_store;

/*
** Open the store in dir (created when missing and writable), recover it and
** start its services; the caller owns it alone (see rmq_store_acquire to
** share it). When another process or engine runs the store's services, a
** writable open follows it instead: it starts none, appends into the commit
** log itself under the processes' shared put lock, sends the rest of its
** writes there, and takes the services over when that one closes or dies.
** RMQ_ELOCKED: a RocketMQ broker holds the store's lock, or a repair runs
** ("store <dir> is locked by another process"). RMQ_ECORRUPT: a file does not
** follow the format (named, with the offset), or a file of the store is not a
** regular file (a FIFO, say: named, with its type); a writable open also fails
** so when a sound record follows damage in the commit log, or bytes follow the
** end of a cleanly closed one, and says to run rmq_store_repair (a torn tail
** left by a crash is moved aside instead, see rmq_store_recovery_report);
** it also fails so when config/consumerOffset.json or config/delayOffset.json
** and its .bak do not parse (the parser names the byte), which cannot be
** rebuilt, while a topics.json that does not parse is moved aside and
** rebuilt from the consume queues (rmq_store_recovery_report says so).
** RMQ_EINVAL: a setting out of range, or a path under dir would be longer than
** PATH_MAX.
** RMQ_EIO, RMQ_ENOMEM, RMQ_ENOTFOUND (a read-only store that does not exist).
*/
int rmq_store_open(const char *dir, const rmq_config *cfg, rmq_store **out, rmq_err *err);
/* Flush everything, stop the services, remove `abort`, release the lock. */
void rmq_store_close(rmq_store *s);

/*
** One engine per store directory per process: every caller that acquires
** the same directory (compared by device and inode, so a bind mount or a
** renamed directory is the same store) shares one rmq_store, its threads and
** its lock; a forked child never shares its parent's engine (its own open
** finds the store locked). A missing directory is created with its parents.
** The first acquire opens the store; the last release closes it. A second
** acquire must ask for the same settings: RMQ_EINVAL names the one that
** differs and both values, or says the store is open read-only in this
** process when a writable open is asked for. A read-only acquire of a store
** this process has open for writing shares the live store. Other errors as
** rmq_store_open, and RMQ_ELOCKED when this process has open a store that was
** at dir before the directory was removed or renamed.
*/
int rmq_store_acquire(const char *dir, const rmq_config *cfg, rmq_store **out, rmq_err *err);
/* The live store for dir if this process has it acquired (a new reference), else NULL. */
rmq_store *rmq_store_find(const char *dir);
/* Drop a reference taken by acquire or find; the last one closes the store. */
void rmq_store_release(rmq_store *s);

/* RMQ_EINVAL when this process is a child forked since s was opened, which cannot use it. */
int rmq_store_check_process(rmq_store *s, rmq_err *err);
const rmq_config *rmq_store_config(rmq_store *s);
const char *rmq_store_dir(rmq_store *s);
/* One sentence on how the last open recovered the store (and what it moved aside). */
const char *rmq_store_recovery_report(rmq_store *s);
/*
** Move the damaged part of a store's commit log aside: everything from the
** first unsound record that recovery finds to the end of the log goes into
** <dir>/damaged/<UTC time>/ (later segments whole, the damaged segment's
** tail copied there then zeroed; each file named by the commit-log offset
** of its first byte), and `abort` is left so that the next open recovers
** the consume queues from the repaired log. A sound store is left as it was. Then each config file that
** needs it (rmq_verify's kind config) is moved into the same directory, with
** its .bak when that is damaged too: consumerOffset.json and
** delayOffset.json are written again with every entry that still reads of
** them (none: an empty table, the damaged copies kept), topics.json is left
** for the next open to write from the consume queues. *moved: the bytes
** moved aside, of the commit log and of the config files (0 for a sound
** store). RMQ_ELOCKED: the store is open for writing here or in another
** process. RMQ_ENOTFOUND: no store directory. RMQ_EIO.
*/
int rmq_store_repair(const char *dir, int64_t *moved, rmq_err *err);

/* ------------------------------------------------------------------ puts */

/* What an append tells the producer (PutMessageResult / AppendMessageResult). */
typedef struct rmq_put_result {
  int64_t physical_offset;
  int32_t size;
  int64_t queue_offset;
  int64_t store_timestamp;
  char msg_id[RMQ_MSG_ID_MAX];
} rmq_put_result;

/* Bytes holding whole encoded records, end to end. */
typedef struct rmq_span {
  uint8_t *data;
  size_t len;
} rmq_span;

/*
** Append n messages as one contiguous batch. Input fields: topic, queue_id,
** flag, body, properties, born host/time, sys_flag, reconsume_times,
** prepared_transaction_offset; the store sets the rest, and rewrites a
** message with DELAY > 0 to SCHEDULE_TOPIC_XXXX. results (may be NULL)
** receive each record's offsets and msgId. RMQ_EINVAL: a message breaks a
** limit (named) or the store is read-only; nothing was appended.
** RMQ_EPOISONED: an earlier I/O failure stopped writes. RMQ_EFULL, RMQ_EIO.
** With flush='sync', returns only after the batch is on disk; a flush that
** fails or times out is an error (RMQ_EIO / RMQ_ETIMEOUT), never a silent
** success. A batch none of whose messages waits (rmq_message_waits) returns
** once it is readable (rmq_store_handle_flush). A slave refuses every put (RMQ_EINVAL naming its master). A
** sync_master returns once a slave acknowledged the batch; the batch is
** written locally either way: RMQ_ENOSLAVE when no slave has reported
** (SLAVE_NOT_AVAILABLE), RMQ_ETIMEOUT past ha_slave_timeout_ms
** (FLUSH_SLAVE_TIMEOUT).
*/
int rmq_store_put(rmq_store *s, const rmq_message *msgs, int n, rmq_put_result *results,
                  rmq_err *err);
/*
** A transaction's rows, encoded as they are inserted and appended at COMMIT
** with one copy: rmq_store_encode writes message m into buf (cap bytes) as
** the record the store will append (checked as rmq_store_put checks, a
** delayed message rewritten, body CRC and store host filled in) and returns
** its length; a length above cap means nothing was written (call again with
** room); -1, an error (RMQ_EINVAL). rmq_store_put_encoded appends `count`
** such records, laid end to end in spans, as one contiguous batch: it
** stamps each one's queue offset, physical offset and store time as it
** copies them in (the spans stay reusable, so a batch that failed can be
** put again).
** *first_offset: the first record's offset; -1 when the batch was not
** appended (an error after the append, a failed flush or wait for a slave,
** leaves it set). Errors and flushing as rmq_store_put.
*/
int32_t rmq_store_encode(rmq_store *s, const rmq_message *m, uint8_t *buf, size_t cap,
                         rmq_err *err);
int rmq_store_put_encoded(rmq_store *s, const rmq_span *spans, int nspans, int count,
                          int64_t *first_offset, rmq_err *err);

/*
** Memory for a transaction's rows: a chunk of RMQ_STAGING_CHUNK bytes whose
** pages the allocation thread mapped in ahead. NULL when out of memory or
** the store is read-only. Every chunk goes back (give) before the store is
** closed.
*/
#define RMQ_STAGING_CHUNK (4 << 20)
void *rmq_store_staging_take(rmq_store *s);
void rmq_store_staging_give(rmq_store *s, void *chunk);

/*
** Put latency (whole rmq_store_put, sync flush included) at a quantile
** (0.5, 0.99) in ns, from a sample of the puts, rounded up to a power of two.
*/
#define RMQ_LATENCY_BUCKETS 40
int64_t rmq_store_put_latency_ns(rmq_store *s, double quantile);

/*
** Force everything written so far to disk; *flushed_offset gets the flushed
** end. RMQ_EIO (the store is then poisoned), RMQ_EPOISONED.
*/
int rmq_store_flush(rmq_store *s, int64_t *flushed_offset, rmq_err *err);
/*
** What a put waits for after its append: with flush='sync', until the
** commit log is on disk up to end_offset (sharing the group commit), then on
** a sync master until a slave has it; RMQ_OK at once when neither applies.
** Errors as a put's wait (RMQ_EIO, RMQ_ETIMEOUT, RMQ_EPOISONED).
*/
int rmq_store_wait_flushed(rmq_store *s, int64_t end_offset, rmq_err *err);
/*
** CommitLog.handleDiskFlush and handleHA: with wait, rmq_store_wait_flushed.
** Without (no record of the put waits: rmq_message_waits), the records are
** made readable (the write window committed), the group commit is woken to
** force them soon, and a sync master does not wait for a slave.
*/
int rmq_store_handle_flush(rmq_store *s, int64_t end_offset, bool wait, rmq_err *err);

/* ----------------------------------------------------------------- reads */

/*
** A held view of a record's bytes: the segment stays mapped until
** rmq_commitlog_ref_release (which is safe on a zeroed or released ref).
** The fields are private.
*/
typedef struct rmq_commitlog_ref {
  struct rmq_mapped_file *file;
  const uint8_t *data;
  size_t avail;
} rmq_commitlog_ref;
void rmq_commitlog_ref_release(rmq_commitlog_ref *ref);
/*
** false once expiry took the held segment away: a reader that held it longer
** than clean_grace_ms after its deletion. Bytes read through the ref are
** then zeros, not the record: check after copying them out.
*/
bool rmq_commitlog_ref_valid(const rmq_commitlog_ref *ref);

/*
** Decode the record at a commit-log offset (no CRC check) into *out, whose
** pointers stay valid until ref is released. RMQ_ENOTFOUND: no readable
** data at offset (expired, past the end). RMQ_ECORRUPT: the bytes there are
** no valid record (the decoder's verdict named). On error ref holds nothing.
*/
int rmq_store_read(rmq_store *s, int64_t offset, rmq_commitlog_ref *ref, rmq_message *out,
                   rmq_err *err);

/* ----------------------------------------------------- commit-log walks */

/*
** A walk of the commit log record by record (CommitLog's recovery walk, the
** rocketmq_commitlog table, scans): it starts at the segment that holds
** `from` (records are found only by walking a segment from its start),
** returns the records that start in [from, to) and goes on to the next
** segment after a BLANK or at the end of a segment's data. It holds the
** segment it reads from one Next to the next, so a record's bytes stay
** mapped until then, and it never trusts a length field.
**
** A record whose CRC or lengths are wrong but whose TOTALSIZE fits in the
** segment is returned as damaged and the walk goes on after it; bytes that
** cannot be a record (an unknown magic code, an impossible TOTALSIZE) are
** one damaged record up to the end of the segment. Zero bytes end a
** segment's data: that is the end of the log when no later segment holds
** records, and damage ("no end-of-file BLANK") when one does.
*/

/*
** Read each segment to its end, not to what the writer published: the files
** as they are (a read-only store, recovery); segments are read ahead.
*/
#define RMQ_CL_ITER_WHOLE_SEGMENTS 0x1
/* Check each message's body CRC as it is decoded (checkCRCOnRecover). */
#define RMQ_CL_ITER_CHECK_CRC 0x2
/*
** Stop at the first record that is not sound: it is returned as damaged
** (status says why; it is returned even below `from`) and nothing after it
** is looked at; a segment read whole must end with a BLANK, as in
** RocketMQ's recovery.
*/
#define RMQ_CL_ITER_STRICT 0x4

typedef enum rmq_record_kind {
  RMQ_RECORD_MESSAGE, /* a message; with a bad CRC, m.body_crc tells (unless CHECK_CRC) */
  RMQ_RECORD_BLANK,   /* the end-of-segment filler; the walk goes on in the next segment */
  RMQ_RECORD_DAMAGED  /* bytes that are not a sound record; reason says why */
} rmq_record_kind;

/* One record as Next returns it; its pointers are valid until the next Next or Stop. */
typedef struct rmq_commitlog_record {
  rmq_record_kind kind;
  rmq_decode_status status; /* the decoder's verdict (OK, BLANK, or why it failed) */
  int64_t offset;           /* physical offset where the record starts */
  int64_t segment;          /* start offset of its segment, the file's name */
  int32_t size;             /* TOTALSIZE; for a BLANK the bytes it fills; for damage the
                               bytes the record covers (to the segment's end when its
                               TOTALSIZE cannot be trusted) */
  bool has_magic;           /* 8 bytes or more were there: m.magic is MAGICCODE */
  bool header;              /* the header fields of m were read */
  bool crc_checked;         /* RMQ_CL_ITER_CHECK_CRC and the body was read */
  rmq_message m;            /* the decoded fields, as far as the bytes go */
  char reason[192];         /* why a BLANK or damaged record is unsound, "" otherwise */
} rmq_commitlog_record;

/* Caller-allocated; the fields are private. Stop is harmless on a zeroed iterator. */
typedef struct rmq_commitlog_iter {
  struct rmq_commitlog *cl;
  struct rmq_mapped_file *mf; /* the held segment, NULL at the end */
  int32_t pos, limit;         /* next record's position in mf; bytes of mf to read */
  int64_t from, to;
  unsigned flags;
  bool started;      /* a record was returned: Next moves past it first */
  bool next_segment; /* the last record ends its segment's data */
  bool last_damaged;
  int32_t last_size;
  int64_t lost; /* -1, or a segment expiry took from under the walk: its records were skipped */
} rmq_commitlog_iter;

/*
** Start a walk over the records that start in [from, to), from the segment
** that holds from or, when min_store_time > INT64_MIN and it is later, from
** the last segment whose first record was stored before min_store_time
** (not "at or before": many records share a millisecond, so the segment
** before one that starts at that time can end with records of it).
** flags: RMQ_CL_ITER_*. Cannot fail: an empty range or log returns nothing.
** An iterator that still holds a segment is stopped before it starts again.
*/
void rmq_commitlog_iter_start(rmq_commitlog_iter *it, rmq_store *s, int64_t from, int64_t to,
                              int64_t min_store_time, unsigned flags);
/* The next record into *rec; false at the end of the walk (the segment is let go). */
bool rmq_commitlog_iter_next(rmq_commitlog_iter *it, rmq_commitlog_record *rec);
/* Let go of the held segment; the iterator may be started again. */
void rmq_commitlog_iter_stop(rmq_commitlog_iter *it);
/*
** -1 while the walk is sound; else the start offset of a segment that expiry
** took away from it (held longer than clean_grace_ms): the record the last
** Next returned is zeros, or the walk skipped the rest of that segment.
*/
int64_t rmq_commitlog_iter_expired(const rmq_commitlog_iter *it);

/* -------------------------------------------------------- consume queues */

typedef struct rmq_consume_queue rmq_consume_queue;

/* A consume-queue entry (ConsumeQueue's 20-byte unit). */
typedef struct rmq_cq_entry {
  int64_t phy_offset; /* CommitLog offset of the record */
  int32_t size;       /* its TOTALSIZE */
  int64_t tags_code;
} rmq_cq_entry;

/*
** A broker with enableConsumeQueueExt may put in tagsCode the address of the
** entry's ConsumeQueueExt unit instead of the tags' hash
** (ConsumeQueueExt.isExtAddr: at or below Integer.MIN_VALUE - 1); the tags
** are then known only from the record.
*/
#define RMQ_CQ_EXT_ADDR_MAX (INT64_C(-2147483649))
static inline bool rmq_cq_ext_addr(int64_t tags_code) { return tags_code <= RMQ_CQ_EXT_ADDR_MAX; }

/*
** The queue (topic, queue_id), or NULL when it has no messages (also for a
** NULL or invalid topic). It lives as long as the store.
*/
rmq_consume_queue *rmq_store_find_queue(rmq_store *s, const char *topic, int32_t queue_id);
/* The commit log's first offset (getMinPhyOffset): records below it expired. */
int64_t rmq_store_min_offset(rmq_store *s);
/* minOffsetInQueue and maxOffsetInQueue (the next offset to write). */
int64_t rmq_cq_min_offset(rmq_consume_queue *cq);
int64_t rmq_cq_max_offset(rmq_consume_queue *cq);
/*
** NULL for a sound queue. For one a read-only open found damaged: why,
** naming its directory and first damaged entry; the queue then ends there,
** and a read that wants entries past its end must fail with this text.
*/
const char *rmq_cq_damage(rmq_consume_queue *cq);
/*
** Does entry n of (topic, queue_id), e, lead to the record m it should: the
** record's topic, queue and QUEUEOFFSET n, its size and tagsCode? Else
** RMQ_ECORRUPT naming the queue's entry and what differs, and how to
** rebuild it. Readers check every entry they follow, so that damage the
** open could not see without reading the log is never served.
*/
int rmq_store_check_entry(rmq_store *s, const char *topic, int32_t queue_id, int64_t n,
                          const rmq_cq_entry *e, const rmq_message *m, rmq_err *err);

/*
** Sequential reads, Redis-stream style: the caller owns the struct.
**   rmq_cq_iter it; rmq_cq_entry e;
**   rmq_cq_iter_start(&it, cq, from);
**   while (rmq_cq_iter_next(&it, &e)) { ... it.offset - 1 is e's queue offset ... }
**   rmq_cq_iter_stop(&it);
** start never fails; a from below the min offset (or in a deleted segment)
** starts at the min offset, and entries that fall below it while iterating
** (expiry) are skipped. next returns false at the current end of the queue;
** a later next sees entries appended since. The segment being read is held,
** so expiry cannot unmap it under the reader. Entries are returned raw: the
** commit-log read that follows checks offset and size. `offset` may be
** read (the queue offset of the entry next returns next); the other fields
** are private.
*/
typedef struct rmq_cq_iter {
  rmq_consume_queue *cq;      /* private */
  struct rmq_mapped_file *mf; /* private: the held segment holding `offset`, or NULL */
  int64_t offset;
} rmq_cq_iter;
void rmq_cq_iter_start(rmq_cq_iter *it, rmq_consume_queue *cq, int64_t from);
/* The next entry; false at the end of the queue's published entries. */
bool rmq_cq_iter_next(rmq_cq_iter *it, rmq_cq_entry *out);
void rmq_cq_iter_stop(rmq_cq_iter *it);

/* One queue of the store, as rmq_store_queues lists it. */
typedef struct rmq_queue_info {
  const char *topic; /* valid while the store is open */
  int32_t queue_id;
  int64_t min_offset, max_offset;
  int files; /* its segments */
} rmq_queue_info;
/*
** Every queue of the store at this moment, in no particular order: *out is
** a malloc'd array of *count entries that the caller frees. RMQ_ENOMEM.
*/
int rmq_store_queues(rmq_store *s, rmq_queue_info **out, int *count, rmq_err *err);

/*
** The queue offset of the first message of (topic, queue_id) stored at or
** after timestamp (0 for a queue that does not exist; the max offset when
** none was). RMQ_ECORRUPT: an entry points at no readable record.
*/
int rmq_store_queue_offset_at_time(rmq_store *s, const char *topic, int32_t queue_id,
                                   int64_t timestamp, int64_t *queue_offset, rmq_err *err);

/*
** Long polling, as RocketMQ holds a pull request: sleep until the queue
** (topic, queue_id) holds an entry at queue_offset or later (true), or the
** monotonic clock reaches deadline_ms (false). A read-only store whose
** writer runs in another process sleeps on the writer's shared page and
** refreshes at each wake-up (rmq_store_refresh); without a page it looks
** again every few tens of ms.
*/
bool rmq_store_wait_queue(rmq_store *s, const char *topic, int32_t queue_id, int64_t queue_offset,
                          int64_t deadline_ms);

/*
** Wait until the dispatcher has put everything appended before this call
** into the consume queues and index files, at most RMQ_DISPATCH_WAIT_MS,
** so that a reader sees every message whose put returned before it started;
** with transient_store_pool it first commits what the write buffers hold.
** A read-only store refreshes (rmq_store_refresh) and, when an owner of
** ours runs, waits for its dispatcher to reach the complete records the log
** holds now.
** RMQ_ETIMEOUT: the dispatcher did not get there in time. RMQ_EPOISONED:
** dispatch stopped after a failed write (the message says why). RMQ_EIO: the
** commit failed (the store then refuses writes until it is reopened).
*/
#define RMQ_DISPATCH_WAIT_MS 30000
int rmq_store_wait_dispatched(rmq_store *s, rmq_err *err);

/*
** A read-only store written by another process (a store of ours whose
** owner runs, or a broker's): bring what it reads up to what the files hold
** now: new commit-log segments and the log's end, new consume-queue entries,
** segments and queues, new index files and items, and the files the writer
** deleted let go (see follow.h for what is trusted). The reads of the store
** call it themselves; it costs one atomic load when the owner published
** nothing since the last one. RMQ_OK at once for a writable store. Errors:
** RMQ_EIO, RMQ_ECORRUPT (a new file that does not load), RMQ_ENOMEM.
*/
int rmq_store_refresh(rmq_store *s, rmq_err *err);

/* ------------------------------------------------------- consumer groups */

/*
** Consumer groups as a broker keeps them: each group's next offset per
** queue in <dir>/config/consumerOffset.json (ConsumerOffsetManager), and
** messages a consumer gives back re-stored for a later retry
** (SendMessageProcessor.consumerSendMsgBack). Group names follow
** RocketMQ's rule: 1..255 characters of [%|a-zA-Z0-9_-].
*/
#define RMQ_RETRY_GROUP_TOPIC_PREFIX "%RETRY%"
#define RMQ_DLQ_GROUP_TOPIC_PREFIX "%DLQ%"

/* One committed position. */
typedef struct rmq_group_offset {
  char group[RMQ_MAX_GROUP_LEN + 1];
  char topic[RMQ_MAX_TOPIC_LEN + 1];
  int32_t queue_id;
  int64_t offset; /* the next queue offset the group reads */
} rmq_group_offset;

/*
** Commit group's next offset in (topic, queue_id), durably: the file is
** written and synced before this returns, and commits from several threads
** share a write. offset may be anything from 0 to the queue's max offset
** (everything read). RMQ_EINVAL, naming the argument: a group or topic
** that is not valid, a negative offset, or one beyond the max offset, or a
** read-only store; RMQ_ENOTFOUND: the store has no such queue; nothing is
** then written. RMQ_EIO, RMQ_ENOMEM.
*/
int rmq_store_commit_offset(rmq_store *s, const char *group, const char *topic, int32_t queue_id,
                            int64_t offset, rmq_err *err);
/*
** Every committed position, a malloc'd array the caller frees, in the
** order the file lists them. A read-only store reads the file each call (a
** writer elsewhere may have changed it). RMQ_ECORRUPT: the file and its
** .bak do not parse (the parser names the byte offset, and the message
** says to run rmq_store_repair). RMQ_ENOMEM, RMQ_EIO.
*/
int rmq_store_group_offsets(rmq_store *s, rmq_group_offset **out, int *count, rmq_err *err);

/*
** A consumer of group gives back the message at commitlog_offset: it is
** stored again, with reconsume_times + 1, RETRY_TOPIC (its topic, unless it
** has one) and ORIGIN_MESSAGE_ID (its msgId, unless it has one), into
** %RETRY%<group> queue 0 through delay level 3 + reconsume_times (the last
** level at most), or, once reconsume_times reaches max_reconsume_times,
** straight into %DLQ%<group> queue 0 with every property of the message
** (REAL_TOPIC and REAL_QID of its last retry kept) and DELAY 0.
** *new_offset: the new record's commit-log offset. RMQ_EINVAL: a group that
** is not valid (or longer than a retry topic allows), a read-only store;
** RMQ_ENOTFOUND / RMQ_ECORRUPT: no message at commitlog_offset.
** rmq_store_put's errors.
*/
int rmq_store_send_back(rmq_store *s, const char *group, int64_t commitlog_offset,
                        int64_t *new_offset, rmq_err *err);

/* ------------------------------------------------------------ index files */

/*
** Messages of topic whose UNIQ_KEY or one of whose KEYS equals key, stored
** in [begin, end] (ms), found through the index files newest first and
** re-checked on each record, so a hash collision never returns another key's
** or another topic's message; the newest max matching messages, however many
** other keys share the hash (each costs one record read). offsets[0..*count)
** is ascending; offsets needs room for max entries. RMQ_ENOMEM; RMQ_ECORRUPT:
** a read-only store skipped an index file (rmq_store_index_error).
*/
int rmq_store_query_key(rmq_store *s, const char *topic, const char *key, int64_t begin,
                        int64_t end, int max, int64_t *offsets, int *count, rmq_err *err);

/* An index file's 40-byte header (IndexHeader). */
typedef struct rmq_index_header {
  int64_t begin_timestamp;
  int64_t end_timestamp;
  int64_t begin_phy_offset;
  int64_t end_phy_offset;
  int32_t hash_slot_count;
  int32_t index_count; /* the next item number; 1 in a file without items */
} rmq_index_header;

/*
** A reader's view of one index file, to walk it item by item without the
** index service's lock: the mapping is held, so expiry cannot unmap it, and
** the header is a snapshot. Items 1 .. header.index_count - 1 were complete
** when it was taken; a slot read later may name a newer item, which is
** complete too. name and header may be read; the other fields are private.
*/
typedef struct rmq_index_view {
  struct rmq_mapped_file *mf;
  char name[18];
  int32_t slot_num;
  int32_t index_num;
  rmq_index_header header;
} rmq_index_view;

/* An index item (IndexFile's 20-byte unit). */
typedef struct rmq_index_item {
  int32_t key_hash;
  int64_t phy_offset;
  int32_t time_diff;  /* seconds after the file's beginTimestamp */
  int32_t prev_index; /* the previous item of the slot's chain, 0 at its end */
} rmq_index_item;

/*
** RMQ_OK, or why a read-only store skipped an index file it could not read
** (RMQ_ECORRUPT naming the file and what its geometry could be): key
** look-ups and index views would miss what it holds. Reading anything else
** is not affected.
*/
int rmq_store_index_error(rmq_store *s, rmq_err *err);
/*
** The oldest index file whose name sorts after `after` (NULL: the oldest),
** into *v; false when there is none. Release each view.
*/
bool rmq_store_index_view(rmq_store *s, const char *after, rmq_index_view *v);
void rmq_index_view_release(rmq_index_view *v);
/* As rmq_commitlog_ref_valid: false once expiry took the file away from the view. */
bool rmq_index_view_valid(const rmq_index_view *v);
/* The newest item number in key_hash's slot (0: empty). */
int32_t rmq_index_view_slot(const rmq_index_view *v, int32_t key_hash);
/* Item k; false unless 1 <= k < the file's item capacity. */
bool rmq_index_view_item(const rmq_index_view *v, int32_t k, rmq_index_item *out);
/*
** The end of the item numbers a reader may use: those the header snapshot
** counts, or for a slot's chain in a file being written, every item the
** file can hold (a slot may name an item newer than the snapshot).
*/
int32_t rmq_index_view_items_end(const rmq_index_view *v, bool chain);

/* ------------------------------------------------------ delayed delivery */

/*
** A delayed message not yet delivered, as rocketmq_scheduled lists it: its
** entry in SCHEDULE_TOPIC_XXXX queue level-1 and what its record says. The
** pointers are valid during the callback; a record that can no longer be
** read (expired) has real_topic, keys and uniq_key NULL.
*/
typedef struct rmq_scheduled {
  int level;
  int64_t due_time;         /* ms since the epoch: the entry's tags code */
  int64_t queue_offset;     /* in SCHEDULE_TOPIC_XXXX queue level-1 */
  int64_t commitlog_offset; /* of the delayed record */
  const char *real_topic;   /* REAL_TOPIC */
  size_t real_topic_len;
  int32_t real_queue_id; /* REAL_QID; -1 when missing or not a number */
  const char *keys;      /* KEYS */
  size_t keys_len;
  const char *uniq_key; /* UNIQ_KEY */
  size_t uniq_key_len;
} rmq_scheduled;
/* Told each message; anything but RMQ_OK stops the listing with that code. */
typedef int (*rmq_scheduled_fn)(void *ctx, const rmq_scheduled *m);
/*
** The delayed messages not yet delivered (ScheduleMessageService), by level
** then schedule-queue offset: from each level's delivery offset, the live
** service's, or on a store opened read-only the one config/delayOffset.json
** (or its .bak) holds, each queue's start when neither can be read.
** RMQ_ENOMEM, or the callback's code.
*/
int rmq_store_scheduled(rmq_store *s, rmq_scheduled_fn fn, void *ctx, rmq_err *err);

/* ----------------------------------------------------------------- stats */

/* A store's figures, as rocketmq_stats shows them. */
typedef struct rmq_stats {
  int64_t commitlog_min_offset;  /* start of the first commit-log segment */
  int64_t commitlog_max_offset;  /* end of what was appended (write position) */
  int64_t committed_offset;      /* end of what readers see (maxPhyOffset) */
  int64_t flushed_offset;        /* end of what is known to be on disk */
  int64_t dispatched_offset;     /* end of what the dispatcher covered (read-only: committed) */
  int64_t dispatch_behind_bytes; /* committed_offset - dispatched_offset */
  int64_t dispatch_skipped;      /* records the dispatcher skipped as invalid */
  int64_t put_count;             /* messages appended since the store was opened */
  int64_t put_latency_p50_ns;    /* rmq_store_put_latency_ns at 0.5 and 0.99 */
  int64_t put_latency_p99_ns;
  int64_t commitlog_files, commitlog_file_size;
  int64_t consume_queues;     /* (topic, queue_id) pairs */
  int64_t consumequeue_files; /* their segments, all queues together */
  int64_t index_files, index_slots, index_entries;
  int64_t file_bytes;             /* the sizes of all files under the store's directory */
  int64_t disk_bytes;             /* the disk space they take (allocated blocks) */
  const char *recovery;           /* rmq_store_recovery_report, valid while the store is open */
  bool poisoned;                  /* an I/O failure stopped writes until the store is reopened */
  char poison_reason[256];        /* why, "" when not poisoned */
  int64_t schedule_delivered;     /* delayed messages put into their real topics since the open */
  const char *delay_offsets;      /* NULL, or why delayOffset.json was read from its .bak */
  double disk_used_ratio;         /* of the disk holding the commit log, 0..1; -1 unknown */
  bool disk_full;                 /* writes refused: disk_used_ratio above disk_warning_ratio */
  int64_t clean_runs;             /* clean passes since the open, periodic and rmq_store_clean */
  int64_t files_deleted;          /* files the clean passes deleted since the open */
  int64_t files_awaiting_readers; /* deleted files a reader still holds (space not yet free) */
  int64_t flush_runs;             /* FlushRealTimeService / GroupCommitService flushes done */
  int64_t commit_runs;            /* CommitRealTimeService commits done (transient_store_pool) */
  int64_t cq_flush_runs;          /* FlushConsumeQueueService flushes done */
  const char *role;               /* rmq_role_name of the store's role; NULL when read-only */
  const char *process;            /* "owner" (runs the services), "follower" or "reader" */
  int64_t owner_pid;              /* the process that runs the services; 0 when none is known */
  int64_t ha_slaves;              /* master: slaves connected now */
  int64_t ha_push2slave_offset;   /* master: the largest offset a slave acknowledged, -1: none */
  char ha_state[128];             /* "" without replication; see rmq_ha_row's state */
  char ha_last_error[256];        /* why the last connection was refused or dropped, "" */
} rmq_stats;
/*
** Fill *st. The file sizes come from a walk of the store's directory
** (symbolic links not followed; a file that vanishes meanwhile is left
** out). RMQ_ENOMEM when the list of consume queues cannot be copied.
*/
int rmq_store_stats(rmq_store *s, rmq_stats *st, rmq_err *err);

/* ----------------------------------------------------------- replication */

/*
** RocketMQ 4.9's master/slave replication of the commit log (HAService,
** HAConnection, HAClient), wire-compatible with its brokers. A master with
** ha_listen accepts slaves there (bound to that address alone; the protocol
** has no authentication: a trusted network only); a slave (role slave,
** ha_master) connects, reports its commit-log end and appends what it
** receives at the same offsets, checking each record, and dispatches its own
** consume queues and index. A sync_master's put returns once a slave
** acknowledged it (rmq_store_put's RMQ_ETIMEOUT and RMQ_ENOSLAVE).
**
** One row of rocketmq_ha: on a master one per connected slave, on a slave
** one for its master. Pointers are valid during the callback.
*/
typedef struct rmq_ha_row {
  const char *address;        /* the slave's (master), the master's (slave) */
  const char *state;          /* master: "connected" (reported) or "handshake" (not yet);
                                 slave: "connecting", "connected" or "retrying" */
  const char *last_error;     /* slave: why the last connection ended, "" */
  int64_t offset;             /* master: the slave's acknowledged offset (-1 before its first
                                 report); slave: its own commit-log end */
  int64_t lag_bytes;          /* master's end minus offset (slave: as last heard from the master) */
  int64_t connected_since_ms; /* ms since the epoch, 0 when not connected */
} rmq_ha_row;
typedef int (*rmq_ha_fn)(void *ctx, const rmq_ha_row *row);
/*
** The replication rows of s, none when it replicates nothing. A non-zero
** return of fn stops the listing and is returned; nothing else fails.
*/
int rmq_store_ha(rmq_store *s, rmq_ha_fn fn, void *ctx, rmq_err *err);

/* ------------------------------------------------------------- retention */

/*
** One clean pass now (DefaultMessageStore's manual delete): CleanCommitLogService
** at any hour, still honouring file_reserved_hours (and deleting unexpired
** segments when the disk is above disk_clean_forcibly_ratio), then
** CleanConsumeQueueService and the index files. At most 10 commit-log segments,
** oldest first, never the current one, stopping at the first one kept.
** *deleted: the files deleted (all kinds). RMQ_EINVAL on a read-only store,
** RMQ_ENOMEM when the consume queues cannot be listed.
*/
int rmq_store_clean(rmq_store *s, int *deleted, rmq_err *err);

/*
** A file of the store as rmq_store_files reports it. Pointers are valid
** during the callback. kind: "commitlog", "consumequeue", "index",
** "checkpoint", "abort", "lock", "config", or "other". first_offset: the
** commit-log offset a segment starts at; for a consume-queue file the
** queue offset of its first entry; for an index file its first commit-log
** offset; -1 for the others. expires_at: ms since the epoch when a
** commit-log segment becomes old enough to delete (mtime +
** file_reserved_hours), -1 for files that go with the commit log.
*/
typedef struct rmq_file_info {
  const char *kind;
  const char *path; /* relative to the store's directory */
  int64_t first_offset;
  int64_t size;       /* st_size */
  int64_t disk_bytes; /* allocated blocks */
  int64_t mtime_ms;
  int64_t expires_at_ms;
  bool would_delete;  /* the next periodic clean pass deletes it */
  const char *reason; /* why it would be deleted, or kept */
} rmq_file_info;
typedef int (*rmq_file_fn)(void *ctx, const rmq_file_info *f);
/*
** Every file under the store's directory, with what the next periodic clean
** pass would do to it (a dry run: nothing is changed). A non-zero return of
** fn stops the walk and is returned. RMQ_EIO when the directory cannot be read.
*/
int rmq_store_files(rmq_store *s, rmq_file_fn fn, void *ctx, rmq_err *err);

/* ---------------------------------------------------------------- verify */

/*
** The integrity check behind rocketmq_verify (engine/verify.c): every
** defect of a store, without stopping at the first. It only reads: no
** byte is written, nothing is locked, cut or deleted.
**
** One defect: file is relative to the store's directory
** ("commitlog/00000000000000000000", "consumequeue/T/0/...", "index/...",
** "checkpoint"); offset is the byte offset in that file, -1 when the
** defect is the file itself; detail is a sentence with what was found and
** what was expected. kind is one of:
**   file_name     a file or directory named as no RocketMQ file is, or a
**                 segment that does not follow the one before it
**   file_size     a file of the wrong size
**   crc           a message whose body CRC differs from its BODYCRC
**   length        a record whose lengths disagree or run past its TOTALSIZE
**   magic         bytes that are no record (unknown magic code, zeros
**                 where a record or an end-of-file BLANK should be)
**   blank         a BLANK that does not fill the rest of its segment
**   phy_offset    a message whose PHYSICALOFFSET is not where it is
**   cq_offset     a consume-queue entry that leads to no sound record
**                 (beyond the log, or not at a record's start)
**   cq_size, cq_tags   an entry whose size or tagsCode differs from its record's
**   cq_queue      an entry whose record belongs to another topic or queue
**   cq_queue_offset    an entry whose record's QUEUEOFFSET is not its position
**   cq_duplicate  an entry that leads to the same record as the one before it
**   cq_gap        a message that no consume-queue entry leads to
**   index_entry   an index item that leads to no record, or to one none of
**                 whose keys (topic#UNIQ_KEY, topic#KEYS token) has its hash,
**                 or whose timeDiff or chain link is not what putKey wrote
**   index_header  an index file header field out of range or not what its
**                 items and records show (counts, offsets, times)
**   index_slot    a hash slot that does not hold its chain's newest item
**   index_gap     a key of a message that no index item leads to
**   checkpoint    a checkpoint timestamp later than every record's store time
**   unreadable    files that cannot be opened as a store (detail says why)
**   config        config/consumerOffset.json, delayOffset.json or
**                 topics.json that does not parse (or its .bak, when the
**                 file is missing): offset is where the parser stopped,
**                 detail its message and whether the .bak is read instead,
**                 or that a writable open fails (the offsets files) or
**                 rebuilds it (topics.json); a damaged .bak beside a sound
**                 file is not reported, as no load reads it
*/
typedef struct rmq_defect {
  const char *file;
  int64_t offset;
  const char *kind;
  const char *detail;
  /* The consume queue and entry a cq_* defect is about (topic NULL for others), and the
     commit-log offset the entry, index item or record is at (-1 for others). */
  const char *topic;
  int32_t queue_id;
  int64_t queue_offset;
  int64_t phy_offset;
} rmq_defect;
/* Told each defect (valid during the call); anything but RMQ_OK stops the check with that code. */
typedef int (*rmq_defect_fn)(void *ctx, const rmq_defect *d);

/*
** Check the store in dir: the names and sizes of its files (stat alone),
** then every commit-log record (CRC checked, one sequential pass), every
** consume-queue entry and index item against the record it leads to, and
** the checkpoint, last the config files. A store this process has open
** (rmq_store_find) is read live: what was published when the check started, after the dispatcher
** caught up. Otherwise the files are opened read-only without recovery;
** files that cannot be opened as a store (a segment of the wrong size or
** missing) are one more defect, kind "unreadable", which names why.
** Errors: RMQ_ENOTFOUND (dir is not a directory), RMQ_EIO (a directory
** that cannot be listed), rmq_store_wait_dispatched's, RMQ_ENOMEM, or the
** callback's code.
*/
int rmq_verify(const char *dir, rmq_defect_fn fn, void *ctx, rmq_err *err);

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
** RMQ_ENOMEM; the batch is then intact and can be appended again, unless
** it was appended and only its sync flush or a sync_master's wait for a
** slave failed (*first_offset >= 0): then it is cleared, being in the log.
*/
int rmq_batch_append(rmq_batch *b, int64_t *first_offset, rmq_err *err);
/*
** As rmq_batch_append, but it returns without waiting for the disk:
** *end_offset, where the batch ends, goes to rmq_store_wait_flushed before
** the batch is reported written (several batches, one wait). On entry
** *end_offset is 0, or the end of the caller's previous such batch not yet
** waited for: the batch then continues a run, which may wait in this
** process's write window (unseen by readers, lost if the process dies)
** until rmq_store_wait_flushed.
*/
int rmq_batch_append_unflushed(rmq_batch *b, int64_t *first_offset, int64_t *end_offset,
                               rmq_err *err);
/*
** Whether a row of the batch waits for the disk (rmq_message_waits): when
** none does, rmq_batch_append returns once the batch is in the log and
** readable, and the group commit forces it soon after.
*/
bool rmq_batch_waits(const rmq_batch *b);
/* Give the batch's memory back (NULL: nothing). */
void rmq_batch_free(rmq_batch *b);

#endif
