/*
** index_file.h: IndexFile and IndexService, the hash index on message keys
**
** An IndexFile `<root>/index/<yyyyMMddHHmmssSSS>` is a fixed-size hash
** table, big-endian, byte-for-byte RocketMQ's layout:
**   header (40): beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset
**                (int64 each), hashSlotCount, indexCount (int32 each)
**   slots: slot_num int32, each the newest item number of its chain (0: empty)
**   items: index_num * 20 bytes; item k (k >= 1, item 0 is never used) is
**          keyHash int32, phyOffset int64, timeDiff int32 (seconds from
**          beginTimestamp), prevIndex int32 (0 ends the chain)
** so its size is 40 + slot_num*4 + index_num*20 and it holds index_num - 1
** items. The key of an item is "topic#key"; its hash is rmq_index_key_hash
** (abs of Java's String.hashCode, MIN_VALUE -> 0), its slot hash % slot_num.
**
** Threads: one writer (the dispatcher) calls rmq_index_service_build; any
** number of readers query. A reader follows a slot's chain without a lock:
** the writer fills an item before it stores the item's number in the slot
** (a release store; readers load slots with acquire), and the header values
** readers use are atomics. The service's file list is guarded by a rwlock
** that a query holds while it walks the files (as RocketMQ does), so
** delete_expired never unmaps a file under a query; a view (rmq_index_view)
** holds its file instead, which delete_expired hands to the store's retired
** list. The lock prefers writers, so that steady queries cannot hold off a
** roll.
**
** Index look-ups compare hashes only: different keys with the same hash
** (collisions) come back too, as in RocketMQ. THE CALLER must read each
** message and keep those whose topic and KEYS/UNIQ_KEY really match.
*/
#ifndef RMQ_INDEX_FILE_H
#define RMQ_INDEX_FILE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checkpoint.h"
#include "mapped_file.h"
#include "rmq.h"

#define RMQ_INDEX_HEADER_SIZE 40
#define RMQ_INDEX_SLOT_SIZE 4
#define RMQ_INDEX_ITEM_SIZE 20
#define RMQ_INDEX_DEFAULT_SLOTS 5000000
#define RMQ_INDEX_DEFAULT_ENTRIES 20000000

/* Where a file's structure breaks: the byte offset in the file and why. */
typedef struct rmq_index_defect {
  int64_t at;
  int64_t items_at; /* where the items start: the header and slots are before */
  char why[200];
} rmq_index_defect;

typedef struct rmq_index_file {
  rmq_mapped_file *mf; /* the whole file, mapped from offset 0 */
  int32_t slot_num;
  int32_t index_num;
  _Atomic int64_t begin_timestamp;
  _Atomic int64_t end_timestamp;
  _Atomic int64_t begin_phy_offset;
  _Atomic int64_t end_phy_offset;
  atomic_int hash_slot_count;
  atomic_int index_count;
  atomic_int checked;      /* 1 sound, -1 damaged, 0 only its header checked so far */
  rmq_index_defect damage; /* once checked is -1 */
} rmq_index_file;

/* 40 + slot_num*4 + index_num*20, or -1 when a count is out of range or it exceeds INT32_MAX. */
int64_t rmq_index_file_size(int32_t slot_num, int32_t index_num);

/*
** Create a new index file at path (which must not exist). A file rolled
** after a full one gets begin/end phy offset := prev_end_phy_offset and
** begin/end timestamp := prev_end_timestamp when they are > 0 (RocketMQ's
** IndexFile constructor; see rmq_index_file_put_key). Errors: RMQ_EINVAL
** (sizes), RMQ_EIO, RMQ_ENOMEM.
*/
int rmq_index_file_create(const char *path, int32_t slot_num, int32_t index_num,
                          int64_t prev_end_phy_offset, int64_t prev_end_timestamp,
                          rmq_index_file **out, rmq_err *err);
/* How much of a file rmq_index_file_check may hold to. */
typedef struct rmq_index_check {
  bool settled;     /* no writer is adding items: its header and slots are final */
  bool every_slot;  /* read every slot, not only those the items use (verify) */
  bool header_only; /* the header and the items it names first and last, nothing more */
} rmq_index_check;

/*
** The structure of an index file's bytes p (slot_num and index_num its
** geometry), without the commit log: every header field in range; items
** 1 .. indexCount-1 each linked to the item written before it in its slot,
** their commit-log offsets non-decreasing from beginPhyOffset to
** endPhyOffset; each used slot naming its newest item; and, settled, no
** item written past indexCount and hashSlotCount the number of used slots.
** What a damaged header, a zeroed slot table or zeroed items would hide
** from a key look-up is found here. False with *d set at the first defect.
** Reads indexCount * 20 bytes and, with every_slot, the whole slot table.
*/
bool rmq_index_file_check(const uint8_t *p, int32_t slot_num, int32_t index_num,
                          const rmq_index_check *c, rmq_index_defect *d);

/*
** Open an existing index file, check it (rmq_index_file_check) and read its
** header (indexCount <= 0 reads as 1); an empty file opened writable is
** sized first. Errors: RMQ_ECORRUPT when the size does not match
** slot_num/index_num (naming both settings) or the check fails (naming the
** offset and what is wrong); RMQ_EIO; RMQ_ENOMEM.
*/
int rmq_index_file_load(const char *path, int32_t slot_num, int32_t index_num, bool writable,
                        const rmq_index_check *check, rmq_index_file **out, rmq_err *err);
/*
** Check a file whose load read only its header (rmq_index_check.header_only)
** whole, once: RMQ_OK when it is sound, else RMQ_ECORRUPT naming it and
** where it breaks. A key look-up calls this before it reads a file.
*/
int rmq_index_file_ensure_checked(rmq_index_file *f, rmq_err *err);
/* Unmap (after the last reader) and free; unlink the file too if asked. */
void rmq_index_file_close(rmq_index_file *f, bool unlink_file);

const char *rmq_index_file_path(const rmq_index_file *f);
void rmq_index_file_header(rmq_index_file *f, rmq_index_header *out);
/* indexCount >= index_num: no room for another item. */
bool rmq_index_file_is_full(rmq_index_file *f);

/*
** IndexFile.putKey with the key's hash: write item indexCount (timeDiff
** from the CURRENT beginTimestamp, 0 while it is <= 0, clamped to
** [0, INT32_MAX]), chain it in its slot, then update the header; the first
** item sets beginPhyOffset/beginTimestamp after its timeDiff was computed.
** False when the file is full or read-only (nothing written).
*/
bool rmq_index_file_put_key(rmq_index_file *f, int32_t key_hash, int64_t phy_offset,
                            int64_t store_timestamp);

/*
** IndexFile.selectPhyOffset: walk the chain of key_hash's slot, newest
** first, appending to out[*count] the phyOffset of every item whose hash
** equals key_hash and whose time (beginTimestamp + timeDiff*1000) is within
** [begin, end], until *count reaches max_num. Stops at an item older than
** begin. A damaged chain (an item number out of range or not decreasing)
** ends the walk.
*/
void rmq_index_file_select(rmq_index_file *f, int32_t key_hash, int max_num, int64_t begin,
                           int64_t end, int64_t *out, int *count);

/* isTimeMatched (IF 168-173): does [begin, end] overlap the file's time range? */
bool rmq_index_file_time_matched(rmq_index_file *f, int64_t begin, int64_t end);

/* msync the whole file. RMQ_EIO with the path on failure. */
int rmq_index_file_flush(rmq_index_file *f, rmq_err *err);

/* ---------------------------------------------------------------------- */

/* The dispatch fields the index needs (DispatchRequest). Strings need no NUL. */
typedef struct rmq_index_request {
  const char *topic;
  size_t topic_len;
  int64_t commit_log_offset;
  int64_t store_timestamp;
  int32_t sys_flag;
  const char *keys; /* the KEYS property, NULL when absent */
  size_t keys_len;
  const char *uniq_key; /* the UNIQ_KEY property, NULL when absent */
  size_t uniq_key_len;
} rmq_index_request;

typedef struct rmq_index_service {
  char *dir; /* <root>/index */
  int32_t slot_num;
  int32_t index_num;
  bool writable;
  rmq_checkpoint *checkpoint; /* may be NULL */
  pthread_rwlock_t lock;      /* guards files/count/cap */
  rmq_index_file **files;     /* oldest first (name order) */
  int count, cap;
  rmq_err skipped;            /* why the first file it could not read was skipped */
  char damaged_from[18];      /* writable: the first damaged file; it and later ones go */
  rmq_retired_files *retired; /* where deleted files wait for their readers; NULL: none */
} rmq_index_service;

/*
** Set up the service for <root>/index; nothing is read or created yet.
** Errors: RMQ_EINVAL when slot_num < 1, index_num < 2 or the file size
** exceeds INT32_MAX (naming index_slots / index_entries); RMQ_ENOMEM.
*/
int rmq_index_service_init(rmq_index_service *s, const char *root, int32_t slot_num,
                           int32_t index_num, bool writable, rmq_checkpoint *checkpoint,
                           rmq_err *err);
/* Close every file (nothing is deleted) and free the list. */
void rmq_index_service_destroy(rmq_index_service *s);

/*
** Load the 17-digit-named files of the directory in name order (IndexService.load).
** An empty file (a creation cut short by a crash) loads as an empty index
** file when writable, as RocketMQ maps it at full size, and is skipped when
** read-only. A read-only service takes each file's geometry from its size:
** the configured slot_num/index_num when they give that size, else
** RocketMQ's proportion index_num = 4 * slot_num (size = 40 + 84 * slot_num),
** else what its items show; a file that holds no item is skipped, and so is
** one whose geometry none of these gives, with the reason in `skipped`
** (the first such file's), so that what does not need the index still
** reads. Its slot_num/index_num then describe the newest file loaded.
** Each file is checked as rmq_index_file_load does, the newest whole and
** the others by their headers (whole at their first look-up): a read-only
** service skips a damaged one (key look-ups fail naming it), a writable one
** stops at it (rmq_index_service_rebuild_from). A file of another size than the
** configured geometry fails a writable load (a setting, not damage).
** After an abnormal exit (!last_exit_ok) a writable service deletes every
** file whose endTimestamp > checkpoint indexMsgTimestamp (0 without a
** checkpoint), so that dispatch rebuilds them; a read-only service keeps
** them, as they are the best index it can have.
*/
int rmq_index_service_load(rmq_index_service *s, bool last_exit_ok, rmq_err *err);

/*
** rmq_index_file_check of the file `name` of the service's directory, with
** every slot read, the geometry taken as a load takes it. RMQ_ECORRUPT with
** *d set when it is damaged (also when it cannot be opened or mapped);
** RMQ_OK for a sound file and for one no geometry explains or that holds
** no item (a load skips those with its own reason).
*/
int rmq_index_service_check_file(rmq_index_service *s, const char *name, bool settled,
                                 rmq_index_defect *d);

/*
** Where dispatch must rebuild the index from after a writable load found a
** damaged file: the end of the last file kept (0: the log's start);
** INT64_MAX when nothing was damaged.
*/
int64_t rmq_index_service_rebuild_from(rmq_index_service *s);
/*
** After recovery cut the commit log at end: delete the newest files whose
** items reach it (endPhyOffset >= end: records that are gone), as
** IndexService.load deletes those a crash left unflushed, so that records
** written at those offsets again are indexed. Returns the end of the last
** file kept (0: none kept), or INT64_MAX when nothing was cut.
*/
int64_t rmq_index_service_cut(rmq_index_service *s, int64_t end);
/*
** Move the damaged file a writable load found, and every later one, into
** damaged_dir/index/ (adding their sizes to *moved). Errors: RMQ_EIO.
*/
int rmq_index_service_set_aside(rmq_index_service *s, const char *damaged_dir, int64_t *moved,
                                rmq_err *err);

/*
** Does a reader find a geometry for the index file at path of size bytes
** (the configured slot_num and index_num, RocketMQ's 4 items per slot, or
** what its items show), as rmq_index_service_load takes it read-only?
*/
bool rmq_index_file_readable_size(const char *path, int64_t size, int32_t slot_num,
                                  int32_t index_num);

/*
** IndexService.buildIndex for one dispatched record: skip it when its offset
** is below the current file's endPhyOffset (already indexed) or it is a
** ROLLBACK; else index topic#UNIQ_KEY, then topic#token for each non-empty
** space-separated token of KEYS. A full file rolls to a new one named by the
** local time now (bumped past existing names), which starts at the full
** file's end values; the full file is then flushed, and the checkpoint's
** indexMsgTimestamp := its endTimestamp is flushed. Errors: RMQ_EINVAL
** (read-only), RMQ_EIO / RMQ_ENOMEM (creating or flushing a file).
*/
int rmq_index_service_build(rmq_index_service *s, const rmq_index_request *req, rmq_err *err);

/*
** IndexService.queryOffset: the phy offsets of items with the hash of
** topic#key and a time in [begin, end], from the newest file to the oldest,
** at most max_num (RocketMQ's caller caps it at maxMsgsNumBatch, 64), sorted
** ascending into offsets[0..*count). Duplicates are kept. Collisions are
** included: the caller filters (see the file header).
*/
int rmq_index_service_query(rmq_index_service *s, const char *topic, size_t topic_len,
                            const char *key, size_t key_len, int max_num, int64_t begin,
                            int64_t end, int64_t *offsets, int *count, rmq_err *err);

/*
** Does topic#uniq_key or topic#(a space-separated token of keys) hash to
** hash? What an item of a record must show (IndexService.buildIndex).
*/
bool rmq_index_keys_have_hash(const char *topic, size_t topic_len, const char *uniq_key,
                              size_t uniq_len, const char *keys, size_t keys_len, int32_t hash);

/* What a record makes of an item with the hash looked up. */
typedef enum rmq_index_verdict {
  RMQ_INDEX_OTHER,  /* another key of the same hash, or a record that expired */
  RMQ_INDEX_MATCH,  /* the record holds the key looked up */
  RMQ_INDEX_DAMAGED /* no record there, or none of its keys has the item's hash */
} rmq_index_verdict;

/* Whether the record at phy_offset holds the key looked up (the index compares hashes only). */
typedef struct rmq_index_match {
  rmq_index_verdict (*fn)(void *ctx, int64_t phy_offset, int32_t key_hash);
  void *ctx;
} rmq_index_match;

/*
** rmq_index_service_query keeping only the items whose record match
** accepts, each offset once: max_num caps matching records, so no number of
** colliding keys can hide a key's messages. An item match finds damaged
** ends the look-up with RMQ_ECORRUPT naming the file and the item. The work is bounded by the
** length of the hash chain within [begin, end] (at most index_entries items
** per file), one record read per item with the same hash.
*/
int rmq_index_service_query_matching(rmq_index_service *s, const char *topic, size_t topic_len,
                                     const char *key, size_t key_len, int max_num, int64_t begin,
                                     int64_t end, const rmq_index_match *match, int64_t *offsets,
                                     int *count, rmq_err *err);

/*
** IndexService.deleteExpiredFile: delete the oldest files, never the newest,
** while their endPhyOffset < commitlog_min_offset, through s->retired when
** set. Returns how many.
*/
int rmq_index_service_delete_expired(rmq_index_service *s, int64_t commitlog_min_offset);
/* How many files rmq_index_service_delete_expired would delete now (for dry runs). */
int rmq_index_service_expired_files(rmq_index_service *s, int64_t commitlog_min_offset);

/* msync every file; stops at the first failure. */
int rmq_index_service_flush(rmq_index_service *s, rmq_err *err);

/* Number of files, and a copy of file i's header and name; false if i is out of range. */
int rmq_index_service_count(rmq_index_service *s);
bool rmq_index_service_file_info(rmq_index_service *s, int i, rmq_index_header *header,
                                 char name[18]);

/*
** A read-only service follows a writer in another process (rmq_store_refresh):
** it lets go (rmq_retired_let_go) of the files whose names are gone (expiry)
** and, with identity, of those whose names hold other files now (a new
** owner's recovery made them again); loads the files newer than its newest
** (as rmq_index_service_load does read-only); and takes the headers of the
** files not full as they are now (indexCount, which the writer stores last
** with release, first). Errors: RMQ_EIO (listing), those of loading a file.
*/
int rmq_index_service_follow(rmq_index_service *s, bool identity, rmq_err *err);

/* The reader's view (rmq_index_view) is public: rmq.h. */
bool rmq_index_service_view(rmq_index_service *s, const char *after, rmq_index_view *v);

#endif
