/*
** consume_queue.c: ConsumeQueue and the consume-queue table (see
** consume_queue.h). Line references are to RocketMQ 4.9.7's
** ConsumeQueue.java (CQ), MappedFileQueue.java (MFQ) and
** DefaultMessageStore.java (DMS).
*/
#include "consume_queue.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "damaged.h"
#include "io.h"
#include "message.h"
#include "rmq.h"
#include "topic_queue_table.h"

#define UNIT RMQ_CQ_UNIT_SIZE

/* ---------------------------------------------------------------- entries */

static void entry_read(const uint8_t *p, rmq_cq_entry *e) {
  e->phy_offset = rmq_get64(p);
  e->size = rmq_get32(p + 8);
  e->tags_code = rmq_get64(p + 12);
}

/* The end-of-data test of recover and truncation (CQ 112-122, 312-322). */
/* ConsumeQueue.recover's test, plus an end that fits in int64 (a damaged entry may not). */
static bool entry_valid(const rmq_cq_entry *e) {
  return e->phy_offset >= 0 && e->size > 0 && e->phy_offset <= INT64_MAX - e->size;
}

static bool entry_pre_blank(const rmq_cq_entry *e) {
  return e->phy_offset == 0 && e->size == RMQ_CQ_PRE_BLANK_SIZE && e->tags_code == 0;
}

/*
** Reads that walk a writable queue's entries (recovery, the open's checks,
** the min offset) go through pread, not the mapping: a mapping never touched
** costs no page-table page, no fault, and nothing to tear down at close, and
** a store of tens of thousands of queues paid all three for each. Only this
** process writes a writable queue, so pread sees whole entries below its
** positions. A read-only queue, which another process may be writing, is read
** through the mapping (entries published size last), as is any chunk that
** pread cannot read. Chunks hold whole entries, from a page's worth (a queue
** of few entries reads no hole) doubling up to 64 KiB.
*/
#define SCAN_FIRST (204 * UNIT)
#define SCAN_CHUNK (3276 * UNIT)

typedef struct entry_scan {
  bool by_pread;
  const rmq_consume_queue *cq; /* its opening copy, if any, is read first */
  rmq_mapped_file *mf;         /* the file the chunk is of, and its start */
  int64_t file_from;
  int fd;
  int32_t from, to; /* the chunk holds [from, to) of mf */
  int32_t next;     /* the next chunk's length */
  uint8_t *chunk;
} entry_scan;

static void scan_start(entry_scan *sc, const rmq_consume_queue *cq) {
  *sc = (entry_scan){.by_pread = cq->writable, .cq = cq, .fd = -1, .next = SCAN_FIRST};
}

static void scan_stop(entry_scan *sc) {
  if (sc->fd >= 0) close(sc->fd);
  free(sc->chunk);
  *sc = (entry_scan){.fd = -1};
}

/* Is the chunk of mf? (Another file may take the address of one released.) */
static bool scan_of(const entry_scan *sc, const rmq_mapped_file *mf) {
  return sc->mf == mf && sc->file_from == mf->file_from_offset;
}

/* Read the chunk of mf from pos; false: read this entry through the mapping. */
static bool scan_fill(entry_scan *sc, rmq_mapped_file *mf, int32_t pos) {
  if (!scan_of(sc, mf)) {
    if (sc->fd >= 0) close(sc->fd);
    sc->fd = open(mf->path, O_RDONLY | O_CLOEXEC);
    sc->mf = mf;
    sc->file_from = mf->file_from_offset;
    sc->from = sc->to = 0;
  }
  if (sc->fd < 0 || (!sc->chunk && !(sc->chunk = malloc(SCAN_CHUNK)))) return false;
  int32_t want = mf->file_size - pos < sc->next ? mf->file_size - pos : sc->next;
  if (sc->next < SCAN_CHUNK / 2) sc->next *= 2;
  ssize_t got = pread(sc->fd, sc->chunk, (size_t)want, pos);
  if (got < UNIT) return false;
  sc->from = pos;
  sc->to = pos + (int32_t)got - (int32_t)got % UNIT;
  return true;
}

/* The entry at byte pos of mf. */
static void scan_entry(entry_scan *sc, rmq_mapped_file *mf, int32_t pos, rmq_cq_entry *e) {
  const rmq_consume_queue *cq = sc->cq;
  if (cq->opening && cq->opening_file == mf && cq->opening_from == mf->file_from_offset &&
      pos + UNIT <= cq->opening_len) {
    entry_read(cq->opening + pos, e);
    return;
  }
  bool held = sc->by_pread && scan_of(sc, mf) && pos >= sc->from && pos + UNIT <= sc->to;
  if (held || (sc->by_pread && scan_fill(sc, mf, pos))) {
    entry_read(sc->chunk + (pos - sc->from), e);
  } else {
    entry_read(mf->mapped + pos, e);
  }
}

/* ------------------------------------------------------------ open, close */

/*
** mkdir -p of path (changed on the way, restored), its own mkdir first since
** its parents usually exist: how many directories it made, or -1.
*/
static int make_path(char *path) {
  if (mkdir(path, 0755) == 0) return 1;
  if (errno == EEXIST) return 0;
  char *slash = strrchr(path, '/');
  if (errno != ENOENT || !slash || slash == path) return -1;
  *slash = '\0';
  int made = make_path(path);
  *slash = '/';
  if (made < 0) return -1;
  return mkdir(path, 0755) == 0 ? made + 1 : errno == EEXIST ? made : -1;
}

/*
** The queue directory appears with the first segment (MF ensureDirOK). The
** directories it made are synced with the segment's name (new_dirs).
*/
static int make_dirs(rmq_consume_queue *cq, rmq_err *err) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s", cq->mfq.dir);
  int made = make_path(path);
  if (made < 0) {
    return rmq_err_set(err, RMQ_EIO, "cannot create directory %s: %s", path, strerror(errno));
  }
  if (made > atomic_load(&cq->new_dirs)) atomic_store(&cq->new_dirs, made);
  return RMQ_OK;
}

/* A queue keeps at most this much while the store opens: 51 MB for 100,000 queues. */
#define OPENING_MAX (25 * UNIT)

/*
** A writable queue's last segment is read once while its load still holds
** the descriptor: its first entries become the opening copy, and recovery
** (ConsumeQueue.recover) finds a short queue's end in them with no system
** call of its own. A segment whose first OPENING_MAX bytes are all entries
** is scanned as before. Then the descriptor goes: a store of many queues
** must not hold one per file (they are written through the mapping).
*/
static void take_opening(rmq_consume_queue *cq) {
  cq->mfq.close_fds = true;
  rmq_mapped_file *mf = rmq_mfq_last(&cq->mfq);
  if (mf == NULL) return;
  int32_t want = cq->file_size < OPENING_MAX ? cq->file_size : OPENING_MAX;
  ssize_t got = -1;
  if (cq->writable && mf->fd >= 0 && (cq->opening = malloc((size_t)want)) != NULL) {
    got = pread(mf->fd, cq->opening, (size_t)want, 0);
  }
  if (got >= UNIT) {
    cq->opening_len = (int32_t)got - (int32_t)got % UNIT;
    cq->opening_file = mf;
    cq->opening_from = mf->file_from_offset;
  } else {
    rmq_cq_opened(cq);
  }
  rmq_mapped_file_close_fd(mf);
  rmq_mapped_file_release(mf);
}

int rmq_cq_open(const char *root, const char *topic, int32_t queue_id, int32_t entries_per_file,
                bool writable, rmq_consume_queue **out, rmq_err *err) {
  *out = NULL;
  /* The topic becomes a path component: check it before any path exists. */
  size_t topic_len = topic ? strlen(topic) : 0;
  if (topic == NULL || !rmq_topic_valid(topic, topic_len)) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "invalid topic \"%.*s\": a topic is 1 to %d characters of "
                       "[A-Za-z0-9_%%|-]",
                       (int)(topic_len > 160 ? 160 : topic_len), topic ? topic : "",
                       RMQ_MAX_TOPIC_LEN);
  }
  if (queue_id < 0) {
    return rmq_err_set(err, RMQ_EINVAL, "invalid queue id %d for topic %s: must be >= 0",
                       (int)queue_id, topic);
  }
  if (entries_per_file <= 0 || entries_per_file > INT32_MAX / UNIT) {
    return rmq_err_set(err, RMQ_EINVAL, "consumequeue_entries is %d: it must be between 1 and %d",
                       (int)entries_per_file, INT32_MAX / UNIT);
  }
  char dir[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s/consumequeue/%s/%d", root, topic, (int)queue_id) >=
      (int)sizeof dir) {
    return rmq_err_set(err, RMQ_EINVAL, "store path %s is too long", root);
  }
  rmq_consume_queue *cq = calloc(1, sizeof *cq);
  if (cq == NULL || (cq->topic = strdup(topic)) == NULL) {
    free(cq);
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory opening consume queue %s", dir);
  }
  cq->queue_id = queue_id;
  cq->file_size = entries_per_file * UNIT;
  cq->writable = writable;
  atomic_init(&cq->max_physic_offset, -1);
  atomic_init(&cq->min_logic_offset, 0);
  atomic_init(&cq->logic_gaps, 0);
  int rc = rmq_mfq_init(&cq->mfq, dir, cq->file_size, writable, err);
  cq->mfq.size_setting = "consumequeue_entries";
  cq->mfq.size_unit = RMQ_CQ_UNIT_SIZE;
  /*
  ** A new segment's name (and its queue's and topic's directories) is synced
  ** by the next flush, before a checkpoint counts on its entries, not on the
  ** dispatcher's path.
  */
  cq->mfq.defer_dir_sync = true;
  /* A reader takes the segment size off the files (a broker's may differ from ours). */
  if (rc == RMQ_OK) rc = rmq_mfq_load(&cq->mfq, !writable, err);
  if (rc == RMQ_OK && cq->mfq.file_size != cq->file_size) {
    if (cq->mfq.file_size % UNIT != 0) {
      rc = rmq_err_set(err, RMQ_ECORRUPT,
                       "consume queue files in %s are %d bytes, not a whole number of %d-byte "
                       "entries (consumequeue_entries)",
                       dir, (int)cq->mfq.file_size, UNIT);
    }
    cq->file_size = cq->mfq.file_size;
  }
  if (rc == RMQ_OK) take_opening(cq);
  if (rc != RMQ_OK) {
    rmq_cq_close(cq);
    return rc;
  }
  *out = cq;
  return RMQ_OK;
}

void rmq_cq_close(rmq_consume_queue *cq) {
  if (cq == NULL) return;
  rmq_cq_opened(cq);
  rmq_mfq_destroy(&cq->mfq);
  free(cq->damage);
  free(cq->topic);
  free(cq);
}

/* ------------------------------------------------------------------- put */

/*
** Blocks for the entries, in steps that grow with the segment, from a page
** to 1 MiB: a queue with one message takes one page of disk and of memory,
** a busy one few system calls.
*/
#define CQ_RESERVE_MIN RMQ_OS_PAGE_SIZE
#define CQ_RESERVE_MAX (1 << 20)

/* How far past upto to reserve: to the end of the step that holds it, on a page boundary. */
static int32_t reserve_ahead_of(int32_t upto) {
  int32_t step = CQ_RESERVE_MIN;
  while (step < CQ_RESERVE_MAX && step < upto) step <<= 1;
  return step - upto % RMQ_OS_PAGE_SIZE;
}

/*
** Reserve the segment's blocks below `upto` before writing them through the
** mapping (a full disk is then an error, not SIGBUS), also in a segment
** loaded from disk, which may be sparse; map each new step's pages writable.
*/
static int reserve_entries(rmq_mapped_file *mf, int32_t upto, rmq_err *err) {
  int32_t before = atomic_load(&mf->reserved_position);
  if (upto <= before) return RMQ_OK;
  /*
  ** No read-ahead: a fault in a new step would otherwise read (and zero)
  ** megabytes of the file's holes around it, for each new queue.
  */
  if (before == 0) rmq_mapped_file_random_access(mf);
  int rc = rmq_mapped_file_reserve_ahead(mf, upto, reserve_ahead_of(upto), err);
  int32_t after = atomic_load(&mf->reserved_position);
  if (rc == RMQ_OK && after > before) rmq_mapped_file_populate(mf, before, after - before);
  return rc;
}

/*
** Append an entry that a reader in another process, which has no write
** position of ours to go by, takes only whole: offset and tagsCode first,
** then the size (4-byte aligned) with a release store; such a reader loads
** the size with acquire and takes no entry of size 0 (rmq_cq_follow).
*/
static bool append_entry(rmq_mapped_file *mf, int64_t phy_offset, int32_t size, int64_t tags_code) {
  int32_t pos = rmq_mapped_file_wrote(mf);
  if (UNIT > mf->file_size - pos) return false;
  uint8_t *p = mf->mapped + pos;
  rmq_put64(p, phy_offset);
  rmq_put64(p + 12, tags_code);
  __atomic_store_n((uint32_t *)(p + 8), htobe32((uint32_t)size), __ATOMIC_RELEASE);
  rmq_mapped_file_advance(mf, UNIT);
  return true;
}

/* fillPreBlank (CQ 532-542): filler entries from position 0 up to `until`. */
static void fill_pre_blank(rmq_mapped_file *mf, int32_t until) {
  for (int32_t i = 0; i < until; i += UNIT) append_entry(mf, 0, RMQ_CQ_PRE_BLANK_SIZE, 0);
}

int rmq_cq_put(rmq_consume_queue *cq, int64_t phy_offset, int32_t size, int64_t tags_code,
               int64_t store_timestamp, int64_t cq_offset, rmq_checkpoint *checkpoint,
               rmq_err *err) {
  if (!cq->writable) {
    return rmq_err_set(err, RMQ_EINVAL, "consume queue %s is read-only", cq->mfq.dir);
  }
  if (cq_offset < 0 || cq_offset > INT64_MAX / UNIT || phy_offset < 0 || size <= 0 ||
      phy_offset > INT64_MAX - size) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "bad entry for %s: queue offset %lld, commitlog offset %lld, size %d",
                       cq->mfq.dir, (long long)cq_offset, (long long)phy_offset, (int)size);
  }
  /* Duplicate guard (CQ 481-484): a re-dispatched record is already here. */
  if (phy_offset + size <= atomic_load(&cq->max_physic_offset)) return RMQ_OK;

  int64_t expect = cq_offset * UNIT;
  int rc;
  if (rmq_mfq_count(&cq->mfq) == 0 && (rc = make_dirs(cq, err)) != RMQ_OK) return rc;
  rmq_mapped_file *mf = rmq_mfq_last_or_create(&cq->mfq, expect, err);
  if (mf == NULL) return err->code;
  int32_t wrote = rmq_mapped_file_wrote(mf), pre_blank = (int32_t)(expect % cq->file_size);
  rc = reserve_entries(mf, (wrote > pre_blank ? wrote : pre_blank) + UNIT, err);
  if (rc != RMQ_OK) return rc;

  /* A queue whose first entry is not offset 0 (CQ 497-504). */
  if (mf->first_in_queue && cq_offset != 0 && rmq_mapped_file_wrote(mf) == 0) {
    atomic_store(&cq->min_logic_offset, expect);
    atomic_store(&cq->mfq.flushed_where, expect);
    atomic_store(&cq->mfq.committed_where, expect);
    fill_pre_blank(mf, (int32_t)(expect % cq->file_size));
  }
  if (cq_offset != 0) {
    int64_t current = mf->file_from_offset + rmq_mapped_file_wrote(mf);
    if (expect < current) return RMQ_OK; /* already written */
    /* RocketMQ logs a gap and still appends at the tail (CQ 506-525). */
    if (expect > current) atomic_fetch_add(&cq->logic_gaps, 1);
  }
  if (!append_entry(mf, phy_offset, size, tags_code)) {
    return rmq_err_set(err, RMQ_ECORRUPT, "no room for an entry at position %d of %s",
                       (int)rmq_mapped_file_wrote(mf), mf->path);
  }
  atomic_store(&cq->max_physic_offset, phy_offset + size);
  if (checkpoint) atomic_store(&checkpoint->logics_msg_timestamp, store_timestamp);
  return RMQ_OK;
}

/* --------------------------------------------------- recovery, truncation */

/*
** Drop the segments that start at or after `from`, last first. They are
** deleted from disk only when the queue is writable: a read-only store never
** changes the broker's files (rmq_mfq_truncate_dirty would unlink them).
*/
static void drop_files_from(rmq_consume_queue *cq, int64_t from) {
  if (cq->opening && cq->opening_from >= from) rmq_cq_opened(cq);
  rmq_mapped_file_queue *q = &cq->mfq;
  pthread_rwlock_wrlock(&q->lock);
  while (q->count > 0 && q->files[q->count - 1]->file_from_offset >= from) {
    rmq_mapped_file_shutdown(q->files[--q->count], cq->writable);
  }
  pthread_rwlock_unlock(&q->lock);
}

static void set_flushed_where(rmq_consume_queue *cq, int64_t where) {
  atomic_store(&cq->mfq.flushed_where, where);
  atomic_store(&cq->mfq.committed_where, where);
}

void rmq_cq_opened(rmq_consume_queue *cq) {
  free(cq->opening);
  cq->opening = NULL;
}

/*
** Keep what the scan read of mf's first valid bytes, when one read held them
** all. A copy read at load keeps only the valid entries, which no put changes.
*/
static void keep_opening(rmq_consume_queue *cq, const entry_scan *sc, rmq_mapped_file *mf,
                         int32_t valid) {
  if (cq->opening && cq->opening_file == mf && cq->opening_from == mf->file_from_offset) {
    if (valid < cq->opening_len) cq->opening_len = valid;
    if (valid == 0) rmq_cq_opened(cq);
    return;
  }
  if (valid == 0 || valid > OPENING_MAX || !scan_of(sc, mf) || sc->from != 0 || sc->to < valid)
    return;
  rmq_cq_opened(cq);
  if (!(cq->opening = malloc((size_t)valid))) return;
  memcpy(cq->opening, sc->chunk, (size_t)valid);
  cq->opening_len = valid;
  cq->opening_file = mf;
  cq->opening_from = mf->file_from_offset;
}

/* Entries of mf that are valid from position 0; sets max_physic_offset. */
static int32_t scan_valid(rmq_consume_queue *cq, rmq_mapped_file *mf) {
  entry_scan sc;
  scan_start(&sc, cq);
  int32_t pos = 0;
  for (; pos + UNIT <= cq->file_size; pos += UNIT) {
    rmq_cq_entry e;
    scan_entry(&sc, mf, pos, &e);
    if (!entry_valid(&e)) break;
    if (!entry_pre_blank(&e)) atomic_store(&cq->max_physic_offset, e.phy_offset + e.size);
  }
  if (sc.by_pread) keep_opening(cq, &sc, mf, pos);
  scan_stop(&sc);
  return pos;
}

void rmq_cq_recover(rmq_consume_queue *cq) {
  int n = rmq_mfq_count(&cq->mfq);
  if (n == 0) return;
  int i = n - 3 < 0 ? 0 : n - 3;
  rmq_mapped_file *mf = rmq_mfq_get(&cq->mfq, i);
  if (mf == NULL) return;
  int32_t pos = scan_valid(cq, mf);
  /* A completely valid segment moves the scan on to the next one (CQ 92-157). */
  while (pos == cq->file_size && i + 1 < n) {
    rmq_mapped_file *next = rmq_mfq_get(&cq->mfq, i + 1);
    if (next == NULL) break;
    rmq_mapped_file_release(mf);
    mf = next;
    i++;
    pos = scan_valid(cq, mf);
  }
  int64_t end = mf->file_from_offset + pos;
  rmq_mapped_file_set_positions(mf, pos);
  /*
  ** A queue whose first file holds no entry (a crash between its creation
  ** and its first entry) is empty: its next entry makes its first file
  ** again, with the filler entries below a first offset that is not 0 (a
  ** slave that started at its master's last segment).
  */
  drop_files_from(cq, i == 0 && pos == 0 ? mf->file_from_offset : mf->file_from_offset + 1);
  rmq_mapped_file_release(mf);
  set_flushed_where(cq, end);
}

/*
** The kept length of the last segment when cutting at phy_offset, or -1 when
** the whole segment goes (its first entry is at or past phy_offset).
*/
static int32_t truncate_scan(rmq_consume_queue *cq, rmq_mapped_file *mf, int64_t phy_offset) {
  int32_t kept = 0, wrote = rmq_mapped_file_wrote(mf);
  entry_scan sc;
  scan_start(&sc, cq);
  /* Cutting never lengthens: a queue marked damaged keeps its early end. */
  for (int32_t pos = 0; pos + UNIT <= wrote; pos += UNIT) {
    rmq_cq_entry e;
    scan_entry(&sc, mf, pos, &e);
    if (pos == 0 && e.phy_offset >= phy_offset) {
      kept = -1;
      break;
    }
    if (!entry_valid(&e) || e.phy_offset >= phy_offset) break;
    kept = pos + UNIT;
    atomic_store(&cq->max_physic_offset, e.phy_offset + e.size);
  }
  scan_stop(&sc);
  return kept;
}

void rmq_cq_truncate_dirty(rmq_consume_queue *cq, int64_t phy_offset) {
  atomic_store(&cq->max_physic_offset, phy_offset);
  rmq_mapped_file *mf;
  /* From the last segment backwards (CQ 228-296). */
  while ((mf = rmq_mfq_last(&cq->mfq)) != NULL) {
    int32_t kept = truncate_scan(cq, mf, phy_offset);
    int64_t from = mf->file_from_offset;
    /* Entries cut are written again: the copy of them goes. */
    if (kept != rmq_mapped_file_wrote(mf)) rmq_cq_opened(cq);
    if (kept >= 0) rmq_mapped_file_set_positions(mf, kept);
    rmq_mapped_file_release(mf);
    if (kept >= 0) {
      int64_t end = from + kept;
      if (atomic_load(&cq->mfq.flushed_where) > end) set_flushed_where(cq, end);
      return;
    }
    drop_files_from(cq, from);
  }
  set_flushed_where(cq, 0);
}

/* The first entry of mf at >= phy_min_offset, as a byte offset of the queue; -1 if none. */
static int64_t first_entry_from(entry_scan *sc, rmq_mapped_file *mf, int64_t phy_min_offset) {
  int32_t readable = rmq_mapped_file_read_position(mf);
  for (int32_t pos = 0; pos + UNIT <= readable; pos += UNIT) {
    rmq_cq_entry e;
    scan_entry(sc, mf, pos, &e);
    /* A filler entry is never a message to start from (RocketMQ may take one). */
    if (e.phy_offset >= phy_min_offset && !entry_pre_blank(&e)) return mf->file_from_offset + pos;
  }
  return -1;
}

/*
** Past the first segment too, unlike RocketMQ's: a process killed within a
** clean pass leaves segments wholly below the log's minimum until the next.
*/
void rmq_cq_correct_min_offset(rmq_consume_queue *cq, int64_t phy_min_offset) {
  int64_t found = -1;
  entry_scan sc;
  scan_start(&sc, cq);
  for (int i = 0; found < 0; i++) {
    rmq_mapped_file *mf = rmq_mfq_get(&cq->mfq, i);
    if (mf == NULL) break;
    found = first_entry_from(&sc, mf, phy_min_offset);
    rmq_mapped_file_release(mf);
  }
  scan_stop(&sc);
  if (found >= 0) atomic_store(&cq->min_logic_offset, found);
}

/* ------------------------------------------------------------- reading */

int64_t rmq_cq_min_offset(rmq_consume_queue *cq) {
  return atomic_load(&cq->min_logic_offset) / UNIT;
}

int64_t rmq_cq_max_offset(rmq_consume_queue *cq) { return rmq_mfq_max_offset(&cq->mfq) / UNIT; }

int64_t rmq_cq_max_physic_offset(rmq_consume_queue *cq) {
  return atomic_load(&cq->max_physic_offset);
}

/*
** Read the entry at queue offset n from its held segment: true when it is
** below the read position. *mf is the segment to use (found when NULL or
** when it does not cover n; the caller releases it).
*/
static bool read_entry(rmq_consume_queue *cq, rmq_mapped_file **mf, int64_t n, entry_scan *sc,
                       rmq_cq_entry *out) {
  if (n < 0 || n > INT64_MAX / UNIT) return false;
  int64_t pos = n * UNIT;
  if (*mf && (pos < (*mf)->file_from_offset || pos >= (*mf)->file_from_offset + cq->file_size)) {
    rmq_mapped_file_release(*mf);
    *mf = NULL;
  }
  if (*mf == NULL && (*mf = rmq_mfq_find(&cq->mfq, pos)) == NULL) return false;
  int32_t rel = (int32_t)(pos - (*mf)->file_from_offset);
  if (rel + UNIT > rmq_mapped_file_read_position(*mf)) return false;
  if (sc) {
    scan_entry(sc, *mf, rel, out);
  } else {
    entry_read((*mf)->mapped + rel, out);
  }
  if (!rmq_mapped_file_revoked(*mf)) return true;
  /* Deleted by expiry while this reader held it: those zeros are no entry. */
  rmq_mapped_file_release(*mf);
  *mf = NULL;
  return false;
}

static bool read_at(rmq_consume_queue *cq, rmq_mapped_file **mf, int64_t n, rmq_cq_entry *out) {
  return read_entry(cq, mf, n, NULL, out);
}

int rmq_cq_get(rmq_consume_queue *cq, int64_t n, rmq_cq_entry *out, rmq_err *err) {
  rmq_mapped_file *mf = NULL;
  bool ok = n >= rmq_cq_min_offset(cq) && read_at(cq, &mf, n, out);
  if (mf) rmq_mapped_file_release(mf);
  if (ok) return RMQ_OK;
  return rmq_err_set(err, RMQ_ENOTFOUND,
                     "queue offset %lld of %s/%d is outside the queue [%lld, %lld)", (long long)n,
                     cq->topic, (int)cq->queue_id, (long long)rmq_cq_min_offset(cq),
                     (long long)rmq_cq_max_offset(cq));
}

/* The oldest queue offset that can still be read: entries below it are fillers or deleted. */
static int64_t oldest_offset(rmq_consume_queue *cq) {
  int64_t min = rmq_cq_min_offset(cq);
  int64_t first_file = rmq_mfq_min_offset(&cq->mfq) / UNIT;
  return min > first_file ? min : first_file;
}

void rmq_cq_iter_start(rmq_cq_iter *it, rmq_consume_queue *cq, int64_t from) {
  int64_t oldest = oldest_offset(cq);
  it->cq = cq;
  it->mf = NULL;
  it->offset = from > oldest ? from : oldest;
}

bool rmq_cq_iter_next(rmq_cq_iter *it, rmq_cq_entry *out) {
  /* Fillers put below the min after start (a queue begun at offset > 0) are skipped. */
  int64_t min = rmq_cq_min_offset(it->cq);
  if (it->offset < min) it->offset = min;
  if (!read_at(it->cq, &it->mf, it->offset, out)) {
    /* The end, or the clean service deleted the segment before we got to it. */
    int64_t oldest = oldest_offset(it->cq);
    if (it->offset >= oldest) return false;
    it->offset = oldest;
    if (!read_at(it->cq, &it->mf, it->offset, out)) return false;
  }
  it->offset++;
  return true;
}

void rmq_cq_iter_stop(rmq_cq_iter *it) {
  if (it->mf) rmq_mapped_file_release(it->mf);
  it->mf = NULL;
}

/* -------------------------------------------------------- structure check */

/*
** Entries [oldest, max) as dispatch wrote them: valid, no filler among
** them, each record inside one segment of seg bytes, and each after the one
** before it. The queue offset of the first entry
** that breaks this (an entry out of order is counted from the one before
** it, as either may be the damaged one), or -1.
*/
int64_t rmq_cq_check(rmq_consume_queue *cq, int64_t seg, char *why, size_t cap,
                     rmq_cq_entry *last) {
  rmq_mapped_file *mf = NULL;
  int64_t prev_end = -1, end = rmq_cq_max_offset(cq), bad = -1;
  entry_scan sc;
  scan_start(&sc, cq);
  last->size = 0;
  for (int64_t n = oldest_offset(cq); n < end && bad < 0; n++) {
    rmq_cq_entry e;
    if (!read_entry(cq, &mf, n, &sc, &e)) break;
    if (n == end - 1) *last = e;
    if (!entry_valid(&e) || entry_pre_blank(&e) || e.size > seg ||
        e.phy_offset / seg != (e.phy_offset + e.size - 1) / seg) {
      snprintf(why, cap, "entry %lld is no entry: offset %lld, size %d", (long long)n,
               (long long)e.phy_offset, (int)e.size);
      bad = n;
    } else if (e.phy_offset < prev_end) {
      snprintf(why, cap, "entry %lld leads to %lld, before the end %lld of entry %lld",
               (long long)n, (long long)e.phy_offset, (long long)prev_end, (long long)n - 1);
      bad = n - 1;
    }
    prev_end = e.phy_offset + e.size;
  }
  scan_stop(&sc);
  if (mf) rmq_mapped_file_release(mf);
  return bad;
}

/* Entry n's commit-log offset, or its end (offset + size); -1 when it is no sound entry. */
static int64_t entry_phy(rmq_consume_queue *cq, int64_t n, bool end) {
  rmq_mapped_file *mf = NULL;
  rmq_cq_entry e;
  bool ok = n >= 0 && read_at(cq, &mf, n, &e) && entry_valid(&e) && !entry_pre_blank(&e);
  if (mf) rmq_mapped_file_release(mf);
  return !ok ? -1 : end ? e.phy_offset + e.size : e.phy_offset;
}

int rmq_cq_mark_damaged(rmq_consume_queue *cq, int64_t n, const char *why, rmq_err *err) {
  char text[1024];
  snprintf(text, sizeof text, "consume queue %s/%d is damaged at entry %lld (file %s): %s",
           cq->topic, (int)cq->queue_id, (long long)n, cq->mfq.dir, why);
  free(cq->damage);
  if ((cq->damage = strdup(text)) == NULL) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  /* Readers are served the sound entries before it; what needs the rest fails (rmq_cq_damage). */
  rmq_mapped_file *mf = rmq_mfq_find(&cq->mfq, n * UNIT);
  if (!mf) return RMQ_OK;
  int64_t from = mf->file_from_offset;
  rmq_mapped_file_set_positions(mf, (int32_t)(n * UNIT - from));
  rmq_mapped_file_release(mf);
  drop_files_from(cq, from + 1);
  return RMQ_OK;
}

const char *rmq_cq_damage(rmq_consume_queue *cq) { return cq->damage; }

int rmq_cq_set_aside_from(rmq_consume_queue *cq, int64_t n, const char *damaged_dir, int64_t *moved,
                          int64_t *redispatch_from, rmq_err *err) {
  rmq_mapped_file *mf = rmq_mfq_find(&cq->mfq, n * UNIT);
  int64_t from = mf ? mf->file_from_offset : n * UNIT;
  if (mf) rmq_mapped_file_release(mf);
  /* Dispatch again from the first record moved: entries before n are sound. */
  int64_t first = from / UNIT;
  int64_t prev = first > oldest_offset(cq) ? entry_phy(cq, first - 1, true) : -1;
  *redispatch_from = first < n ? entry_phy(cq, first, false) : prev;
  char sub[PATH_MAX];
  snprintf(sub, sizeof sub, "consumequeue/%s/%d", cq->topic, (int)cq->queue_id);
  rmq_mapped_file_queue *q = &cq->mfq;
  int rc = RMQ_OK;
  rmq_cq_opened(cq);
  pthread_rwlock_wrlock(&q->lock);
  while (rc == RMQ_OK && q->count > 0 && q->files[q->count - 1]->file_from_offset >= from) {
    rmq_mapped_file *f = q->files[--q->count];
    char name[32];
    snprintf(name, sizeof name, "%s", f->path + strlen(q->dir) + 1);
    rmq_mapped_file_shutdown(f, false);
    rc = rmq_damaged_move(q->dir, name, damaged_dir, sub, moved, err);
  }
  pthread_rwlock_unlock(&q->lock);
  atomic_store(&cq->max_physic_offset, prev);
  return rc;
}

/* ------------------------------------------------------------ following */

/* The size field of the entry at p, loaded with acquire: 0 while its writer has not finished it. */
static int32_t entry_size_acquire(const uint8_t *p) {
  return (int32_t)be32toh(__atomic_load_n((const uint32_t *)(p + 8), __ATOMIC_ACQUIRE));
}

/*
** The entries of mf from pos on that are whole and whose record ends by
** bound (fillers always): where they end. Sets max_physic_offset.
*/
static int32_t follow_entries(rmq_consume_queue *cq, rmq_mapped_file *mf, int32_t pos,
                              int64_t bound) {
  for (; pos + UNIT <= mf->file_size; pos += UNIT) {
    const uint8_t *p = mf->mapped + pos;
    rmq_cq_entry e = {.size = entry_size_acquire(p)};
    if (e.size == 0) break;
    e.phy_offset = rmq_get64(p);
    e.tags_code = rmq_get64(p + 12);
    if (entry_pre_blank(&e)) continue;
    if (!entry_valid(&e) || e.phy_offset + e.size > bound) break;
    atomic_store(&cq->max_physic_offset, e.phy_offset + e.size);
  }
  return pos;
}

/* The held segment holding the queue's end: the first that is not full, or the last; NULL: none. */
static rmq_mapped_file *end_file(rmq_consume_queue *cq) {
  rmq_mapped_file_queue *q = &cq->mfq;
  rmq_mapped_file *mf = NULL;
  pthread_rwlock_rdlock(&q->lock);
  int i = q->count - 1;
  while (i > 0 && rmq_mapped_file_read_position(q->files[i - 1]) < q->files[i - 1]->file_size) i--;
  if (i >= 0 && rmq_mapped_file_hold(q->files[i])) mf = q->files[i];
  pthread_rwlock_unlock(&q->lock);
  return mf;
}

/* A reader's queue that had no segment takes the size of the first one it follows. */
static int adopt_file_size(rmq_consume_queue *cq, rmq_err *err) {
  int32_t size = cq->mfq.file_size;
  if (size == cq->file_size) return RMQ_OK;
  if (size % UNIT != 0) {
    return rmq_err_set(err, RMQ_ECORRUPT,
                       "consume queue files in %s are %d bytes, not a whole number of %d-byte "
                       "entries",
                       cq->mfq.dir, (int)size, UNIT);
  }
  cq->file_size = size;
  return RMQ_OK;
}

void rmq_cq_follow_start(rmq_consume_queue *cq) {
  rmq_mapped_file_queue *q = &cq->mfq;
  pthread_rwlock_rdlock(&q->lock);
  /* Where ConsumeQueue.recover starts: the third segment from the end. */
  for (int i = q->count > 3 ? q->count - 3 : 0; i < q->count; i++) {
    rmq_mapped_file_set_positions(q->files[i], 0);
  }
  pthread_rwlock_unlock(&q->lock);
  cq->followed = true;
}

int rmq_cq_follow(rmq_consume_queue *cq, int64_t bound, rmq_err *err) {
  int rc = RMQ_OK;
  rmq_mapped_file *mf = end_file(cq);
  while (rc == RMQ_OK) {
    if (mf) {
      int32_t pos = rmq_mapped_file_read_position(mf);
      int32_t end = follow_entries(cq, mf, pos, bound);
      if (end > pos) rmq_mapped_file_set_positions(mf, end);
      int64_t next = mf->file_from_offset + mf->file_size;
      bool full = end == mf->file_size;
      rmq_mapped_file_release(mf);
      if (!full) break;
      if ((mf = rmq_mfq_find(&cq->mfq, next)) != NULL) continue;
    }
    int added;
    rc = rmq_mfq_follow_new(&cq->mfq, &added, err);
    if (rc != RMQ_OK || added == 0) break;
    rc = adopt_file_size(cq, err);
    mf = rc == RMQ_OK ? end_file(cq) : NULL;
  }
  return rc;
}

int rmq_cq_follow_deleted(rmq_consume_queue *cq, bool identity, int64_t phy_min_offset,
                          rmq_err *err) {
  int dropped;
  int rc = rmq_mfq_follow_deleted(&cq->mfq, identity, &dropped, err);
  if (rc == RMQ_OK) rmq_cq_correct_min_offset(cq, phy_min_offset);
  return rc;
}

/* ----------------------------------------------------------- time search */

/* The file's mtime in ms (MappedFile.getLastModifiedTimestamp). */
static int64_t file_mtime_ms(rmq_mapped_file *mf) {
  struct stat st;
  if (stat(mf->path, &st) != 0) return 0;
  return rmq_timespec_ms(&st.st_mtim);
}

/* getMappedFileByTime (MFQ 78-92): first segment modified at or after ts, else the last. Held. */
static rmq_mapped_file *file_by_time(rmq_consume_queue *cq, int64_t ts) {
  int n = rmq_mfq_count(&cq->mfq);
  for (int i = 0; i < n; i++) {
    rmq_mapped_file *mf = rmq_mfq_get(&cq->mfq, i);
    if (mf == NULL) continue;
    if (file_mtime_ms(mf) >= ts) return mf;
    rmq_mapped_file_release(mf);
  }
  return rmq_mfq_last(&cq->mfq);
}

static int store_time_error(rmq_consume_queue *cq, int64_t n, const rmq_cq_entry *e, rmq_err *err) {
  return rmq_err_set(err, RMQ_ECORRUPT,
                     "cannot read the store time of the commitlog record at offset %lld "
                     "(size %d) of %s/%d entry %lld",
                     (long long)e->phy_offset, (int)e->size, cq->topic, (int)cq->queue_id,
                     (long long)n);
}

/* The binary search of CQ 159-226 over one held segment. */
static int search_file_by_time(rmq_consume_queue *cq, rmq_mapped_file *mf, int64_t ts,
                               int64_t cl_min, rmq_cq_store_time_fn store_time, void *ctx,
                               int64_t *out, rmq_err *err) {
  int64_t from = mf->file_from_offset;
  int64_t min_logic = atomic_load(&cq->min_logic_offset);
  int64_t low = min_logic > from ? min_logic - from : 0;
  int64_t high = (int64_t)rmq_mapped_file_read_position(mf) - UNIT;
  int64_t target = -1, left = -1, right = -1, left_time = -1, right_time = -1;
  *out = 0;
  if (high < 0) return RMQ_OK; /* selectMappedBuffer(0) finds nothing to read */
  while (high >= low) {
    int64_t mid = (low + high) / (2 * UNIT) * UNIT;
    rmq_cq_entry e;
    entry_read(mf->mapped + mid, &e);
    if (e.phy_offset < cl_min) {
      low = mid + UNIT;
      left = mid;
      continue;
    }
    int64_t t = store_time(ctx, e.phy_offset, e.size);
    if (t < 0) return store_time_error(cq, (from + mid) / UNIT, &e, err);
    if (t == ts) {
      target = mid;
      break;
    } else if (t > ts) {
      high = mid - UNIT;
      right = mid;
      right_time = t;
    } else {
      low = mid + UNIT;
      left = mid;
      left_time = t;
    }
  }
  int64_t pos;
  if (target != -1) {
    pos = target;
  } else if (left_time == -1 && right_time == -1) {
    pos = low; /* every probe was too early: RocketMQ would answer (from - 1) / 20 */
  } else if (left_time == -1) {
    pos = right;
  } else if (right_time == -1) {
    pos = left;
  } else {
    pos = ts - left_time > right_time - ts ? right : left;
  }
  *out = (from + pos) / UNIT;
  return RMQ_OK;
}

int rmq_cq_offset_by_time(rmq_consume_queue *cq, int64_t timestamp, int64_t commitlog_min_offset,
                          rmq_cq_store_time_fn store_time, void *ctx, int64_t *out, rmq_err *err) {
  *out = 0;
  rmq_mapped_file *mf = file_by_time(cq, timestamp);
  if (mf == NULL) return RMQ_OK;
  int rc = search_file_by_time(cq, mf, timestamp, commitlog_min_offset, store_time, ctx, out, err);
  rmq_mapped_file_release(mf);
  return rc;
}

int rmq_cq_first_offset_at_or_after_time(rmq_consume_queue *cq, int64_t timestamp,
                                         int64_t commitlog_min_offset,
                                         rmq_cq_store_time_fn store_time, void *ctx, int64_t *out,
                                         rmq_err *err) {
  int64_t lo = oldest_offset(cq);
  int64_t hi = rmq_cq_max_offset(cq);
  rmq_mapped_file *mf = NULL;
  int rc = RMQ_OK;
  /* Invariant: entries before lo are too early, entries from hi on are not. */
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    rmq_cq_entry e;
    if (!read_at(cq, &mf, mid, &e)) {
      /* Deleted under us by the clean service: everything before it is gone. */
      lo = mid + 1;
      continue;
    }
    bool early = e.phy_offset < commitlog_min_offset;
    if (!early) {
      int64_t t = store_time(ctx, e.phy_offset, e.size);
      if (t < 0) {
        rc = store_time_error(cq, mid, &e, err);
        break;
      }
      early = t < timestamp;
    }
    if (early) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (mf) rmq_mapped_file_release(mf);
  *out = lo;
  return rc;
}

/* ------------------------------------------------------- flush, cleaning */

int rmq_cq_flush(rmq_consume_queue *cq, int least_pages, rmq_err *err) {
  bool flushed;
  /* The names of its new segments; its new directories' names are the table's (new_dirs). */
  int rc = rmq_mfq_sync_dir(&cq->mfq, err);
  return rc == RMQ_OK ? rmq_mfq_flush(&cq->mfq, least_pages, &flushed, err) : rc;
}

/* The CommitLog offset of the last entry of a full segment, or -1 if it is not full. */
static int64_t last_entry_offset(rmq_consume_queue *cq, rmq_mapped_file *mf) {
  if (rmq_mapped_file_read_position(mf) != cq->file_size) return -1;
  return rmq_get64(mf->mapped + cq->file_size - UNIT);
}

int rmq_cq_expired_files(rmq_consume_queue *cq, int64_t phy_min_offset) {
  int n = 0;
  for (int count = rmq_mfq_count(&cq->mfq); n < count - 1; n++) {
    rmq_mapped_file *mf = rmq_mfq_get(&cq->mfq, n);
    if (mf == NULL) break;
    int64_t last = last_entry_offset(cq, mf);
    rmq_mapped_file_release(mf);
    if (last < 0 || last >= phy_min_offset) break;
  }
  return n;
}

int rmq_cq_delete_expired(rmq_consume_queue *cq, int64_t phy_min_offset) {
  int expired = rmq_cq_expired_files(cq, phy_min_offset), deleted = 0;
  while (deleted < expired && rmq_mfq_delete_first(&cq->mfq)) deleted++;
  rmq_cq_correct_min_offset(cq, phy_min_offset);
  return deleted;
}

/* ------------------------------------------------------------- the table */

struct rmq_cq_table {
  char *root;
  int32_t entries_per_file;
  bool writable;
  rmq_retired_files *retired; /* given to every queue's file list */
  pthread_rwlock_t lock;
  rmq_topic_queue_table *queues; /* (topic, queue_id) -> rmq_consume_queue * */
  _Atomic int sync_fd;           /* consumequeue/, for syncfs; -1 until a pass needs it */
};

int rmq_cq_table_new(const char *root, int32_t entries_per_file, bool writable, rmq_cq_table **out,
                     rmq_err *err) {
  *out = NULL;
  rmq_cq_table *t = calloc(1, sizeof *t);
  if (t == NULL || (t->root = strdup(root)) == NULL || (t->queues = rmq_tqt_new()) == NULL) {
    if (t) free(t->root);
    free(t);
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  }
  t->entries_per_file = entries_per_file;
  t->writable = writable;
  atomic_init(&t->sync_fd, -1);
  /* Readers never stop coming: without writer preference creation could starve. */
  pthread_rwlockattr_t attr;
  pthread_rwlockattr_init(&attr);
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&t->lock, &attr);
  pthread_rwlockattr_destroy(&attr);
  *out = t;
  return RMQ_OK;
}

void rmq_cq_table_set_retired(rmq_cq_table *t, rmq_retired_files *retired) { t->retired = retired; }

void rmq_cq_table_free(rmq_cq_table *t) {
  if (t == NULL) return;
  size_t pos = 0;
  for (rmq_tqt_entry *e; (e = rmq_tqt_next(t->queues, &pos)) != NULL;) rmq_cq_close(e->value);
  rmq_tqt_free(t->queues);
  if (atomic_load(&t->sync_fd) >= 0) close(atomic_load(&t->sync_fd));
  free(t->root);
  pthread_rwlock_destroy(&t->lock);
  free(t);
}

/* The queue, or NULL; with the lock held. */
static rmq_consume_queue *table_find(rmq_cq_table *t, const char *topic, int32_t queue_id) {
  rmq_tqt_entry *e = rmq_tqt_find(t->queues, topic, strlen(topic), queue_id);
  return e ? e->value : NULL;
}

rmq_consume_queue *rmq_cq_table_find(rmq_cq_table *t, const char *topic, int32_t queue_id) {
  if (topic == NULL) return NULL;
  pthread_rwlock_rdlock(&t->lock);
  rmq_consume_queue *cq = table_find(t, topic, queue_id);
  pthread_rwlock_unlock(&t->lock);
  return cq;
}

/* Add the open queue cq to the table; with the write lock held. */
static int table_insert(rmq_cq_table *t, rmq_consume_queue *cq, rmq_err *err) {
  cq->mfq.retired = t->retired;
  rmq_tqt_entry *e = rmq_tqt_get(t->queues, cq->topic, strlen(cq->topic), cq->queue_id);
  if (e == NULL) {
    rmq_cq_close(cq);
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  }
  e->value = cq;
  return RMQ_OK;
}

/* Open the queue and add it to the table; with the write lock held. */
static int table_add(rmq_cq_table *t, const char *topic, int32_t queue_id, rmq_consume_queue **out,
                     rmq_err *err) {
  int rc = rmq_cq_open(t->root, topic, queue_id, t->entries_per_file, t->writable, out, err);
  if (rc == RMQ_OK) rc = table_insert(t, *out, err);
  if (rc != RMQ_OK) *out = NULL;
  return rc;
}

int rmq_cq_table_find_or_create(rmq_cq_table *t, const char *topic, int32_t queue_id,
                                rmq_consume_queue **out, rmq_err *err) {
  /* Check the name before hashing it, so that NULL never reaches the table. */
  if (topic == NULL || !rmq_topic_valid(topic, strlen(topic))) {
    return rmq_cq_open(t->root, topic, queue_id, t->entries_per_file, t->writable, out, err);
  }
  if ((*out = rmq_cq_table_find(t, topic, queue_id)) != NULL) return RMQ_OK;
  pthread_rwlock_wrlock(&t->lock);
  int rc = RMQ_OK;
  /* Another thread may have created it between the two locks. */
  if ((*out = table_find(t, topic, queue_id)) == NULL) rc = table_add(t, topic, queue_id, out, err);
  pthread_rwlock_unlock(&t->lock);
  return rc;
}

/* "0", "17": what Integer.toString wrote; anything else is not a queue directory. */
static bool parse_queue_id(const char *name, int32_t *queue_id) {
  size_t n = strlen(name);
  if (n == 0 || n > 10 || (n > 1 && name[0] == '0')) return false;
  int64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + (name[i] - '0');
  }
  if (v > INT32_MAX) return false;
  *queue_id = (int32_t)v;
  return true;
}

/*
** Open every queue directory of one topic directory that the table lacks.
** A queue is opened outside the table's lock and only added under it, so
** loaders on other cores open theirs meanwhile.
*/
static int load_topic(rmq_cq_table *t, const char *topic_dir, const char *topic, rmq_err *err) {
  DIR *d = opendir(topic_dir);
  if (d == NULL) {
    return rmq_err_set(err, RMQ_EIO, "cannot list %s: %s", topic_dir, strerror(errno));
  }
  int rc = RMQ_OK;
  struct dirent *e;
  while (rc == RMQ_OK && (e = readdir(d)) != NULL) {
    char path[PATH_MAX];
    int32_t queue_id;
    if (!parse_queue_id(e->d_name, &queue_id)) continue;
    if (snprintf(path, sizeof path, "%s/%s", topic_dir, e->d_name) >= (int)sizeof path ||
        !rmq_dirent_is_dir(path, e->d_type)) {
      continue;
    }
    /* A reader's refresh loads again: the queues it has stay as they are. */
    if (rmq_cq_table_find(t, topic, queue_id) != NULL) continue;
    rmq_consume_queue *cq;
    rc = rmq_cq_open(t->root, topic, queue_id, t->entries_per_file, t->writable, &cq, err);
    if (rc != RMQ_OK) break;
    pthread_rwlock_wrlock(&t->lock);
    if (table_find(t, topic, queue_id) == NULL) {
      rc = table_insert(t, cq, err);
    } else {
      rmq_cq_close(cq); /* a writer's dispatch made it meanwhile */
    }
    pthread_rwlock_unlock(&t->lock);
  }
  closedir(d);
  return rc;
}

/* The topic directories of consumequeue/ (root), shared by the loaders. */
typedef struct table_loader {
  rmq_cq_table *t;
  const char *root;
  char **topics;
  int count;
  atomic_int next;
  pthread_mutex_t mu;
  int rc; /* the first failure's, and its err */
  rmq_err err;
} table_loader;

static void *load_topics(void *arg) {
  table_loader *l = arg;
  for (int i; (i = atomic_fetch_add(&l->next, 1)) < l->count;) {
    char path[PATH_MAX];
    rmq_err err = {0};
    snprintf(path, sizeof path, "%s/%s", l->root, l->topics[i]);
    int rc = load_topic(l->t, path, l->topics[i], &err);
    if (rc == RMQ_OK) continue;
    pthread_mutex_lock(&l->mu);
    if (l->rc == RMQ_OK) {
      l->rc = rc;
      l->err = err;
    }
    pthread_mutex_unlock(&l->mu);
    atomic_store(&l->next, l->count); /* the others stop at their next topic */
  }
  return NULL;
}

/* The topic directories under root; RMQ_OK with none when it does not exist. */
static int list_topics(const char *root, char ***out, int *count, rmq_err *err) {
  *out = NULL;
  *count = 0;
  DIR *d = opendir(root);
  if (d == NULL) {
    if (errno == ENOENT) return RMQ_OK;
    return rmq_err_set(err, RMQ_EIO, "cannot list %s: %s", root, strerror(errno));
  }
  int rc = RMQ_OK, cap = 0;
  struct dirent *e;
  while (rc == RMQ_OK && (e = readdir(d)) != NULL) {
    char path[PATH_MAX];
    if (!rmq_topic_valid(e->d_name, strlen(e->d_name))) continue;
    if (snprintf(path, sizeof path, "%s/%s", root, e->d_name) >= (int)sizeof path ||
        !rmq_dirent_is_dir(path, e->d_type)) {
      continue;
    }
    if (*count == cap) {
      cap = cap ? 2 * cap : 64;
      char **grown = realloc(*out, (size_t)cap * sizeof *grown);
      if (grown == NULL) {
        rc = rmq_err_set(err, RMQ_ENOMEM, "out of memory");
        break;
      }
      *out = grown;
    }
    if (((*out)[*count] = strdup(e->d_name)) == NULL) {
      rc = rmq_err_set(err, RMQ_ENOMEM, "out of memory");
    } else {
      (*count)++;
    }
  }
  closedir(d);
  return rc;
}

/* Loaders besides the caller: one per other core, for stores of many topics. */
#define LOADERS_MAX 3
#define TOPICS_PER_LOADER 64

int rmq_cq_table_load(rmq_cq_table *t, rmq_err *err) {
  char root[PATH_MAX];
  if (snprintf(root, sizeof root, "%s/consumequeue", t->root) >= (int)sizeof root) {
    return rmq_err_set(err, RMQ_EINVAL, "store path %s is too long", t->root);
  }
  table_loader l = {.t = t, .root = root};
  int rc = list_topics(root, &l.topics, &l.count, err);
  pthread_mutex_init(&l.mu, NULL);
  atomic_init(&l.next, 0);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int helpers = (int)(cores - 1 < LOADERS_MAX ? cores - 1 : LOADERS_MAX), started = 0;
  if (helpers > l.count / TOPICS_PER_LOADER) helpers = l.count / TOPICS_PER_LOADER;
  pthread_t tids[LOADERS_MAX];
  for (; rc == RMQ_OK && started < helpers; started++) {
    if (pthread_create(&tids[started], NULL, load_topics, &l) != 0) break;
  }
  if (rc == RMQ_OK) load_topics(&l);
  for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
  if (rc == RMQ_OK && l.rc != RMQ_OK) rc = rmq_err_set(err, l.rc, "%s", l.err.msg);
  pthread_mutex_destroy(&l.mu);
  for (int i = 0; i < l.count; i++) free(l.topics[i]);
  free(l.topics);
  return rc;
}

int rmq_cq_table_snapshot(rmq_cq_table *t, rmq_consume_queue ***out, int *count, rmq_err *err) {
  *out = NULL;
  *count = 0;
  pthread_rwlock_rdlock(&t->lock);
  size_t n = rmq_tqt_count(t->queues);
  rmq_consume_queue **all = malloc((n ? n : 1) * sizeof *all);
  size_t pos = 0;
  for (rmq_tqt_entry *e; all && (e = rmq_tqt_next(t->queues, &pos)) != NULL;) {
    all[(*count)++] = e->value;
  }
  pthread_rwlock_unlock(&t->lock);
  if (all == NULL) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  *out = all;
  return RMQ_OK;
}

int rmq_cq_table_recover(rmq_cq_table *t, int64_t *max_physic_offset, rmq_err *err) {
  rmq_consume_queue **all;
  int n;
  *max_physic_offset = -1;
  int rc = rmq_cq_table_snapshot(t, &all, &n, err);
  if (rc != RMQ_OK) return rc;
  for (int i = 0; i < n; i++) {
    rmq_cq_recover(all[i]);
    int64_t m = rmq_cq_max_physic_offset(all[i]);
    if (m > *max_physic_offset) *max_physic_offset = m;
  }
  free(all);
  return RMQ_OK;
}

void rmq_cq_table_opened(rmq_cq_table *t) {
  rmq_consume_queue **all;
  int n;
  rmq_err err = {0};
  if (rmq_cq_table_snapshot(t, &all, &n, &err) != RMQ_OK) return; /* close frees them */
  for (int i = 0; i < n; i++) rmq_cq_opened(all[i]);
  free(all);
}

int rmq_cq_table_truncate_dirty(rmq_cq_table *t, int64_t phy_offset, rmq_err *err) {
  rmq_consume_queue **all;
  int n;
  int rc = rmq_cq_table_snapshot(t, &all, &n, err);
  if (rc != RMQ_OK) return rc;
  for (int i = 0; i < n; i++) rmq_cq_truncate_dirty(all[i], phy_offset);
  free(all);
  return RMQ_OK;
}

/* A queue whose directories were made since the last pass, and how many (new_dirs). */
typedef struct made_dirs {
  rmq_consume_queue *cq;
  int made;
} made_dirs;

static int by_topic(const void *a, const void *b) {
  return strcmp(((const made_dirs *)a)->cq->topic, ((const made_dirs *)b)->cq->topic);
}

/* Sync <root>/consumequeue/<topic>, or consumequeue/ itself when topic is NULL. */
static int sync_dir_of(const rmq_cq_table *t, const char *topic, rmq_err *err) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/consumequeue%s%s", t->root, topic ? "/" : "", topic ? topic : "");
  return rmq_mapped_file_sync_dir(dir, err);
}

/* Give back a count of directories taken for a sync that failed: the next pass syncs them. */
static void untake_new_dirs(rmq_consume_queue *cq, int made) {
  int now = atomic_load(&cq->new_dirs);
  while (now < made && !atomic_compare_exchange_weak(&cq->new_dirs, &now, made)) {
  }
}

/*
** The names of the queue and topic directories made since the last pass:
** each topic's directory once, and consumequeue/ once if a topic is new. What
** fails is synced again by the next pass.
*/
static int sync_new_dirs(rmq_cq_table *t, rmq_consume_queue **all, int n, rmq_err *err) {
  made_dirs *taken = malloc(sizeof *taken * (size_t)(n > 0 ? n : 1));
  if (!taken) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  int count = 0, most = 0;
  for (int i = 0; i < n; i++) {
    int made = atomic_exchange(&all[i]->new_dirs, 0);
    if (made > 0) taken[count++] = (made_dirs){all[i], made};
    if (made > most) most = made;
  }
  qsort(taken, (size_t)count, sizeof *taken, by_topic);
  int rc = RMQ_OK;
  for (int i = 0; rc == RMQ_OK && i < count; i++) {
    if (i == 0 || strcmp(taken[i].cq->topic, taken[i - 1].cq->topic) != 0) {
      rc = sync_dir_of(t, taken[i].cq->topic, err);
    }
  }
  if (rc == RMQ_OK && most > 1) rc = sync_dir_of(t, NULL, err);
  for (int i = 0; rc != RMQ_OK && i < count; i++) untake_new_dirs(taken[i].cq, taken[i].made);
  free(taken);
  return rc;
}

/*
** With this many files or directories to sync, one syncfs of the file
** system beats an msync or fsync of each (a journal commit and a disk flush
** each): closing a store of 20,000 new queues would take seconds.
*/
#define BULK_FLUSH_QUEUES 16

/* What one queue's part of a bulk flush took: its due file, and its names to sync. */
typedef struct bulk_item {
  rmq_consume_queue *cq;
  rmq_mfq_flush_plan plan;
  bool due, dir_unsynced;
  int new_dirs;
} bulk_item;

static int sync_fd(rmq_cq_table *t, rmq_err *err) {
  int fd = atomic_load(&t->sync_fd);
  if (fd >= 0) return fd;
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/consumequeue", t->root);
  fd = rmq_io_open(dir, O_RDONLY | O_DIRECTORY, 0);
  if (fd < 0) return rmq_err_set(err, RMQ_EIO, "cannot open %s: %s", dir, strerror(errno)), -1;
  int none = -1;
  if (!atomic_compare_exchange_strong(&t->sync_fd, &none, fd)) {
    close(fd);
    fd = none;
  }
  return fd;
}

/* One syncfs for every due queue's file and every name made; undone on failure. */
static int bulk_sync(rmq_cq_table *t, bulk_item *items, int n, bool *moved, rmq_err *err) {
  int fd = sync_fd(t, err);
  int rc = fd >= 0 && rmq_io_syncfs(fd) != 0
               ? rmq_err_set(err, RMQ_EIO, "cannot sync the file system of %s/consumequeue: %s",
                             t->root, strerror(errno))
           : fd < 0 ? err->code
                    : RMQ_OK;
  for (int i = 0; i < n; i++) {
    bulk_item *it = &items[i];
    if (rc != RMQ_OK && it->dir_unsynced) atomic_store(&it->cq->mfq.dir_unsynced, true);
    if (rc != RMQ_OK) untake_new_dirs(it->cq, it->new_dirs);
    if (!it->due) continue;
    if (rc == RMQ_OK) {
      rmq_mfq_flushed_by_sync(&it->cq->mfq, &it->plan);
      if (moved) *moved = true;
    } else {
      rmq_mapped_file_release(it->plan.mf);
    }
  }
  return rc;
}

/*
** When much is to sync: take each queue's due file and its unsynced names
** (the flags first, so that what is made after them waits for the next
** pass), sync the file system once, and mark them flushed.
*/
static int bulk_flush(rmq_cq_table *t, rmq_consume_queue **all, int n, int least_pages, bool *moved,
                      rmq_err *err) {
  bulk_item *items = malloc(sizeof *items * (size_t)(n > 0 ? n : 1));
  if (!items) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  int work = 0;
  for (int i = 0; i < n; i++) {
    bulk_item *it = &items[i];
    it->cq = all[i];
    it->dir_unsynced = atomic_exchange(&all[i]->mfq.dir_unsynced, false);
    it->new_dirs = atomic_exchange(&all[i]->new_dirs, 0);
    it->due = rmq_mfq_flush_due(&all[i]->mfq, least_pages, &it->plan);
    work += it->due + it->dir_unsynced + (it->new_dirs > 0);
  }
  if (work < BULK_FLUSH_QUEUES) {
    for (int i = 0; i < n; i++) {
      if (items[i].dir_unsynced) atomic_store(&items[i].cq->mfq.dir_unsynced, true);
      untake_new_dirs(items[i].cq, items[i].new_dirs);
      if (items[i].due) rmq_mapped_file_release(items[i].plan.mf);
    }
    free(items);
    return RMQ_OK;
  }
  int rc = bulk_sync(t, items, n, moved, err);
  free(items);
  return rc;
}

int rmq_cq_table_flush(rmq_cq_table *t, int least_pages, bool *moved, rmq_err *err) {
  rmq_consume_queue **all;
  int n;
  int rc = rmq_cq_table_snapshot(t, &all, &n, err);
  if (rc == RMQ_OK && t->writable) rc = bulk_flush(t, all, n, least_pages, moved, err);
  /* What the bulk pass left (a queue's second due file, or all when few were due). */
  for (int i = 0; rc == RMQ_OK && i < n; i++) {
    int64_t before = atomic_load(&all[i]->mfq.flushed_where);
    rc = rmq_cq_flush(all[i], least_pages, err);
    if (moved && atomic_load(&all[i]->mfq.flushed_where) != before) *moved = true;
  }
  if (rc == RMQ_OK) rc = sync_new_dirs(t, all, n, err);
  free(all);
  return rc;
}
