/*
** verify.c: the integrity check behind rocketmq_verify (the contract is in
** rmq.h: rmq_verify).
**
** First the names and sizes of the files, with stat alone, so that a store
** whose files cannot be opened still gets its rows. Then the contents, in
** one sequential pass over the commit log with the iterator: each record's
** CRC is checked, damaged records and misplaced BLANKs are reported and
** the walk goes on after them, and each message is checked, while its
** bytes are at hand, against the consume-queue entry at its QUEUEOFFSET
** (ConsumeQueue.putMessagePositionInfo wrote it there) and against the
** index items written for it (IndexService.buildIndex writes them in the
** records' order). What leads elsewhere is decoded where it leads, out of
** the walk's order: entries no record claimed, items out of order, and
** those left after the walk. The checkpoint is read first, before a live
** store's walk is given its end, so that later flushes cannot make it look
** ahead of the records read. Queues and index files are read through their mappings up
** to what they hold, not to what a recovery would keep, so that an entry
** that leads past the log's end is seen.
*/
#include "verify.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "commitlog_iter.h"
#include "consumer_offset.h"
#include "file_name.h"
#include "io.h"
#include "multi_dispatch.h"
#include "properties.h"
#include "store.h"
#include "topic_config.h"

typedef struct verifier {
  rmq_defect_fn fn;
  void *ctx;
  int rc;           /* the callback's code once it stopped the check */
  bool live;        /* a writer of this process may be creating a directory's last file */
  rmq_defect place; /* the next report's queue and record, set just before it */
} verifier;

static const rmq_defect no_place = {.queue_id = -1, .queue_offset = -1, .phy_offset = -1};

/* The next report is about entry queue_offset of topic/queue_id, or a record at phy_offset. */
static void place(verifier *v, const char *topic, int32_t queue_id, int64_t queue_offset,
                  int64_t phy_offset) {
  v->place = (rmq_defect){
      .topic = topic, .queue_id = queue_id, .queue_offset = queue_offset, .phy_offset = phy_offset};
}

static void report(verifier *v, const char *file, int64_t offset, const char *kind, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));

static void report(verifier *v, const char *file, int64_t offset, const char *kind, const char *fmt,
                   ...) {
  if (v->rc != RMQ_OK) return;
  char detail[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  rmq_defect d = v->place;
  d.file = file;
  d.offset = offset;
  d.kind = kind;
  d.detail = detail;
  v->place = no_place;
  v->rc = v->fn(v->ctx, &d);
}

/* ================================================================ files */

/* Names of a directory's entries, sorted; NULL entries when it cannot be listed. */
typedef struct name_list {
  char **names;
  int n;
} name_list;

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(name_list *l) {
  for (int i = 0; i < l->n; i++) free(l->names[i]);
  free(l->names);
  l->names = NULL;
  l->n = 0;
}

/* A missing directory lists as empty. */
static int names_of(const char *dir, name_list *l, rmq_err *err) {
  l->names = NULL;
  l->n = 0;
  DIR *d = opendir(dir);
  if (!d) return errno == ENOENT ? RMQ_OK : rmq_err_set(err, RMQ_EIO, "cannot list %s", dir);
  int cap = 0, rc = RMQ_OK;
  struct dirent *e;
  while (rc == RMQ_OK && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (l->n == cap) {
      cap = cap ? cap * 2 : 16;
      char **grown = realloc(l->names, (size_t)cap * sizeof *grown);
      if (!grown) rc = rmq_err_set(err, RMQ_ENOMEM, "out of memory");
      if (grown) l->names = grown;
    }
    if (rc == RMQ_OK && (l->names[l->n++] = strdup(e->d_name)) == NULL) {
      l->n--;
      rc = rmq_err_set(err, RMQ_ENOMEM, "out of memory");
    }
  }
  closedir(d);
  if (l->n > 1) qsort(l->names, (size_t)l->n, sizeof *l->names, cmp_names);
  if (rc != RMQ_OK) names_free(l);
  return rc;
}

/* a/b into out (PATH_MAX bytes); RMQ_EINVAL when it does not fit. */
static int join(char *out, const char *a, const char *b, rmq_err *err) {
  if (snprintf(out, PATH_MAX, "%s/%s", a, b) < PATH_MAX) return RMQ_OK;
  return rmq_err_set(err, RMQ_EINVAL, "the path %s/%s is longer than PATH_MAX", a, b);
}

/* Size of a regular file, -1 for anything else. */
static int64_t regular_size(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
}

static bool is_directory(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A live store's newest file is empty for a moment while it is made (created, then sized). */
static bool being_created(const verifier *v, int64_t len, int i, int n) {
  return v->live && len == 0 && i == n - 1;
}

/*
** The segments of a MappedFileQueue directory (the commit log, or one
** consume queue), rel its path under the store: names of 20 digits that
** follow each other by size bytes, each size bytes long. size 0: the
** first file's (a consume queue's must be a multiple of unit).
*/
static int check_segments(verifier *v, const char *root, const char *rel, int64_t size,
                          int64_t unit, rmq_err *err) {
  char dir[PATH_MAX], path[PATH_MAX], file[PATH_MAX];
  name_list l = {0};
  int rc = join(dir, root, rel, err);
  if (rc == RMQ_OK) rc = names_of(dir, &l, err);
  int64_t expect = -1;
  for (int i = 0; rc == RMQ_OK && i < l.n; i++) {
    int64_t from, len;
    if ((rc = join(file, rel, l.names[i], err)) != RMQ_OK) break;
    if ((rc = join(path, dir, l.names[i], err)) != RMQ_OK) break;
    len = regular_size(path);
    if (being_created(v, len, i, l.n)) continue;
    if (rmq_file_name_parse(l.names[i], &from) != 0 || len < 0) {
      report(v, file, -1, RMQ_DEFECT_FILE_NAME,
             "not a segment: a segment is a regular file named by its 20-digit start offset");
      continue;
    }
    if (size == 0 && len > 0 && len % unit == 0) size = len;
    if (len != size) {
      report(v, file, -1, RMQ_DEFECT_FILE_SIZE, "%lld bytes where a segment has %lld",
             (long long)len, (long long)size);
    } else if (size > 0 && from % size != 0) {
      report(v, file, -1, RMQ_DEFECT_FILE_NAME, "starts at %lld, not a multiple of the size %lld",
             (long long)from, (long long)size);
    } else if (expect >= 0 && from != expect) {
      report(v, file, -1, RMQ_DEFECT_FILE_NAME,
             "starts at %lld but the segment before it ends at %lld", (long long)from,
             (long long)expect);
    }
    if (size > 0) expect = from + size;
  }
  names_free(&l);
  return rc;
}

/* consumequeue/<topic>/<queueId>/: RocketMQ's names, then each queue's segments. */
static bool queue_dir_name(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > 10 || (n > 1 && name[0] == '0')) return false;
  long long q = 0;
  for (size_t i = 0; i < n; i++) {
    if (name[i] < '0' || name[i] > '9') return false;
    q = q * 10 + (name[i] - '0');
  }
  return q <= INT32_MAX;
}

static int check_topic(verifier *v, const char *root, const char *topic, int64_t size,
                       rmq_err *err) {
  char topic_rel[PATH_MAX], dir[PATH_MAX], rel[PATH_MAX];
  name_list l = {0};
  int rc = join(topic_rel, "consumequeue", topic, err);
  if (rc == RMQ_OK) rc = join(dir, root, topic_rel, err);
  if (rc == RMQ_OK) rc = names_of(dir, &l, err);
  for (int i = 0; rc == RMQ_OK && i < l.n; i++) {
    if ((rc = join(rel, topic_rel, l.names[i], err)) != RMQ_OK) break;
    if ((rc = join(dir, root, rel, err)) != RMQ_OK) break;
    if (!queue_dir_name(l.names[i]) || !is_directory(dir)) {
      report(v, rel, -1, RMQ_DEFECT_FILE_NAME,
             "not a queue: a queue is a directory named by its queue id in decimal");
      continue;
    }
    rc = check_segments(v, root, rel, size, RMQ_CQ_UNIT_SIZE, err);
  }
  names_free(&l);
  return rc;
}

static int check_consume_queues(verifier *v, const char *root, int64_t size, rmq_err *err) {
  char dir[PATH_MAX], rel[PATH_MAX];
  name_list l = {0};
  int rc = join(dir, root, "consumequeue", err);
  if (rc == RMQ_OK) rc = names_of(dir, &l, err);
  for (int i = 0; rc == RMQ_OK && i < l.n; i++) {
    if ((rc = join(rel, "consumequeue", l.names[i], err)) != RMQ_OK) break;
    if ((rc = join(dir, root, rel, err)) != RMQ_OK) break;
    if (!rmq_topic_valid(l.names[i], strlen(l.names[i])) || !is_directory(dir)) {
      report(v, rel, -1, RMQ_DEFECT_FILE_NAME,
             "not a topic: a topic is a directory of 1 to %d characters of [A-Za-z0-9_%%|-]",
             RMQ_MAX_TOPIC_LEN);
      continue;
    }
    rc = check_topic(v, root, l.names[i], size, err);
  }
  names_free(&l);
  return rc;
}

/* An index file's size: the store's geometry, or one a reader finds (rmq_index_file_readable_size). */
static bool index_size_ok(const char *path, int64_t len, rmq_store *s) {
  rmq_config c;
  rmq_config_init(&c);
  if (s) c = *rmq_store_config(s);
  if (s && !c.readonly) return len == rmq_index_file_size(c.index_slots, c.index_entries);
  return rmq_index_file_readable_size(path, len, c.index_slots, c.index_entries);
}

static bool index_name(const char *name) {
  if (strlen(name) != 17) return false;
  for (int i = 0; i < 17; i++) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  return true;
}

static int check_index_files(verifier *v, const char *root, rmq_store *s, rmq_err *err) {
  char dir[PATH_MAX], path[PATH_MAX], rel[PATH_MAX];
  name_list l = {0};
  int rc = join(dir, root, "index", err);
  if (rc == RMQ_OK) rc = names_of(dir, &l, err);
  for (int i = 0; rc == RMQ_OK && i < l.n; i++) {
    if ((rc = join(rel, "index", l.names[i], err)) != RMQ_OK) break;
    if ((rc = join(path, dir, l.names[i], err)) != RMQ_OK) break;
    int64_t len = regular_size(path);
    if (being_created(v, len, i, l.n)) continue;
    if (!index_name(l.names[i]) || len < 0) {
      report(v, rel, -1, RMQ_DEFECT_FILE_NAME,
             "not an index file: an index file is a regular file named by its creation "
             "time, yyyyMMddHHmmssSSS");
    } else if (!index_size_ok(path, len, s)) {
      report(v, rel, -1, RMQ_DEFECT_FILE_SIZE,
             "%lld bytes fit no index geometry: 40 + 4 * index_slots + 20 * index_entries",
             (long long)len);
    }
  }
  names_free(&l);
  return rc;
}

/* Names and sizes; s: the store open on dir in this process, else NULL. */
static int check_files(verifier *v, const char *dir, rmq_store *s, rmq_err *err) {
  const rmq_config *c = s ? rmq_store_config(s) : NULL;
  int64_t cl_size = c ? c->commitlog_file_size : 0;
  int64_t cq_size = v->live ? (int64_t)c->consumequeue_entries * RMQ_CQ_UNIT_SIZE : 0;
  int rc = check_segments(v, dir, "commitlog", cl_size, 1, err);
  if (rc == RMQ_OK && v->rc == RMQ_OK) rc = check_consume_queues(v, dir, cq_size, err);
  if (rc == RMQ_OK && v->rc == RMQ_OK) rc = check_index_files(v, dir, s, err);
  char path[PATH_MAX];
  if (rc == RMQ_OK) rc = join(path, dir, "checkpoint", err);
  int64_t len = rc == RMQ_OK ? regular_size(path) : -1;
  if (len >= 0 && len != RMQ_CHECKPOINT_SIZE) {
    report(v, "checkpoint", -1, RMQ_DEFECT_FILE_SIZE, "%lld bytes where the checkpoint has %d",
           (long long)len, RMQ_CHECKPOINT_SIZE);
  }
  return rc;
}

/* ============================================================== contents */

/*
** A consume queue as the walk meets its records: the records of a queue
** come in the order of their queue offsets, so each claims the entry at
** its QUEUEOFFSET, and `next` is the first position not yet claimed in
** order. The entry read last's segment is held.
*/
typedef struct queue_state {
  rmq_consume_queue *cq;
  bool is_schedule; /* SCHEDULE_TOPIC_XXXX: tagsCode is a due time */
  size_t topic_len;
  rmq_mapped_file *mf;
  int64_t next;
} queue_state;

/* The index items in the order they were written (that of their records), one at a time. */
typedef struct index_cursor {
  rmq_index_view iv; /* iv.mf NULL: no more items */
  int32_t k, end;    /* the current item, and the end of the file's items */
  rmq_index_item item;
} index_cursor;

typedef struct store_check {
  verifier v;
  rmq_codec_ctx *codec; /* inflates compressed bodies; NULL until one */
  const char *dir;
  rmq_commitlog *cl;
  rmq_cq_table *cqs;
  rmq_index_service *index;
  bool live;
  int64_t log_to;           /* the walk's end: records starting before it */
  int64_t log_max;          /* the log's end when the walk began */
  int64_t log_min, log_end; /* the records walked: [min, end of the last message) */
  int64_t max_store_time;   /* the latest store time of a record with a header */
  int64_t checkpoint[3];    /* read before anything else */
  bool have_checkpoint;
  queue_state *queues; /* open addressing by topic and queue id; cq NULL: free */
  size_t queue_mask;
  rmq_mapped_file *rec_mf; /* held for the records decoded out of the walk's order */
  index_cursor ix;
  bool index_damaged; /* a file's structure is damaged: its items are not walked */
  int64_t index_from; /* the first record the index covers; INT64_MAX: none yet */
  int64_t delay_ms[RMQ_MAX_DELAY_LEVELS]; /* each level's delay as the store was written */
} store_check;

/* ------------------------------------------------------------- checkpoint */

static const char *const checkpoint_fields[] = {"physicMsgTimestamp", "logicsMsgTimestamp",
                                                "indexMsgTimestamp"};

/* The three timestamps as the file holds them; false when it cannot be read. */
static bool read_checkpoint(const char *dir, int64_t ts[3]) {
  char path[PATH_MAX];
  uint8_t buf[24];
  rmq_err err = {0};
  if (join(path, dir, "checkpoint", &err) != RMQ_OK) return false;
  int fd = rmq_io_open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW, 0);
  if (fd < 0) return false;
  bool ok = rmq_io_pread(fd, buf, sizeof buf, 0) == (ssize_t)sizeof buf;
  close(fd);
  for (int i = 0; ok && i < 3; i++) ts[i] = rmq_get64(buf + 8 * i);
  return ok;
}

static void check_checkpoint(store_check *c) {
  const int64_t *ts = c->checkpoint;
  for (int i = 0; i < 3 && c->have_checkpoint; i++) {
    if (ts[i] <= c->max_store_time || (ts[i] <= 0)) continue;
    report(&c->v, "checkpoint", 8 * i, RMQ_DEFECT_CHECKPOINT,
           "%s %lld is later than the last record's store time %lld: records it counts as "
           "written are missing",
           checkpoint_fields[i], (long long)ts[i], (long long)c->max_store_time);
  }
}

/* ------------------------------------------------------------- records */

/*
** Decode the record at phy (its CRC unchecked) from the held segment *mf,
** which moves to the segment that holds phy, for what leads to a record
** out of the walk's order. Only the records walked count: [log_min, log_end).
*/
static rmq_decode_status record_at(store_check *c, rmq_mapped_file **mf, int64_t phy,
                                   rmq_message *m) {
  if (phy < c->log_min || phy >= c->log_end) return RMQ_DECODE_TRUNCATED;
  if (*mf == NULL || phy < (*mf)->file_from_offset ||
      phy >= (*mf)->file_from_offset + (*mf)->file_size) {
    if (*mf) rmq_mapped_file_release(*mf);
    *mf = rmq_mfq_find(&c->cl->mfq, phy);
  }
  if (*mf == NULL) return RMQ_DECODE_TRUNCATED;
  int32_t pos = (int32_t)(phy - (*mf)->file_from_offset);
  int32_t limit = c->live ? rmq_mapped_file_read_position(*mf) : (*mf)->file_size;
  if (pos >= limit) return RMQ_DECODE_TRUNCATED;
  return rmq_message_decode((*mf)->mapped + pos, (size_t)(limit - pos), false, m);
}

/* Why phy leads to no record: outside the records walked, or what its decode says. */
static const char *no_record_why(store_check *c, int64_t phy, rmq_decode_status st) {
  return phy < c->log_min || phy >= c->log_end ? "outside the log's records"
                                               : rmq_decode_status_name(st);
}

static void record_file(const rmq_commitlog_record *rec, char file[32]) {
  rmq_file_name(rec->segment, file + snprintf(file, 32, "commitlog/"));
}

/* The properties the checks need, found in one pass over a record's properties. */
typedef struct record_props {
  rmq_property_value tags, uniq_key, keys;
} record_props;

static void find_props(const rmq_message *m, record_props *p) {
  static const char *const names[] = {RMQ_PROPERTY_TAGS, RMQ_PROPERTY_UNIQ_KEY, RMQ_PROPERTY_KEYS};
  rmq_property_value v[3];
  rmq_properties_find(m->properties, (size_t)m->properties_len, names, 3, v);
  *p = (record_props){v[0], v[1], v[2]};
}

/* --------------------------------------------------------- consume queues */

static uint64_t queue_hash(const char *topic, size_t len, int32_t queue_id) {
  uint64_t h = 14695981039346656037u ^ (uint32_t)queue_id;
  for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)topic[i]) * 1099511628211u;
  return h;
}

static queue_state *find_queue(store_check *c, const char *topic, size_t len, int32_t queue_id) {
  for (size_t i = queue_hash(topic, len, queue_id) & c->queue_mask;; i = (i + 1) & c->queue_mask) {
    queue_state *q = &c->queues[i];
    if (q->cq == NULL) return NULL;
    if (q->cq->queue_id == queue_id && q->topic_len == len && memcmp(q->cq->topic, topic, len) == 0)
      return q;
  }
}

/* Every queue of the store, each starting at its first segment. */
static int load_queues(store_check *c, rmq_err *err) {
  rmq_consume_queue **all;
  int n;
  int rc = rmq_cq_table_snapshot(c->cqs, &all, &n, err);
  if (rc != RMQ_OK) return rc;
  size_t cap = 16;
  while (cap < 2 * (size_t)n) cap *= 2;
  c->queues = calloc(cap, sizeof *c->queues);
  c->queue_mask = cap - 1;
  for (int i = 0; c->queues && i < n; i++) {
    size_t len = strlen(all[i]->topic);
    size_t j = queue_hash(all[i]->topic, len, all[i]->queue_id) & c->queue_mask;
    while (c->queues[j].cq) j = (j + 1) & c->queue_mask;
    rmq_mapped_file *first = rmq_mfq_first(&all[i]->mfq);
    c->queues[j] = (queue_state){.cq = all[i],
                                 .is_schedule = strcmp(all[i]->topic, RMQ_SCHEDULE_TOPIC) == 0 &&
                                                all[i]->queue_id < RMQ_MAX_DELAY_LEVELS,
                                 .topic_len = len,
                                 .mf = first};
    if (first) c->queues[j].next = first->file_from_offset / RMQ_CQ_UNIT_SIZE;
  }
  free(all);
  return c->queues ? RMQ_OK : rmq_err_set(err, RMQ_ENOMEM, "out of memory");
}

static void free_queues(store_check *c) {
  for (size_t i = 0; c->queues && i <= c->queue_mask; i++) {
    if (c->queues[i].mf) rmq_mapped_file_release(c->queues[i].mf);
  }
  free(c->queues);
  c->queues = NULL;
}

/* Entry n of q into *e; false past the entries written (zeros are an entry here). */
static bool entry_at(store_check *c, queue_state *q, int64_t n, rmq_cq_entry *e) {
  /* n may be a damaged record's QUEUEOFFSET: no queue reaches past INT64_MAX bytes. */
  if (n < 0 || n > INT64_MAX / RMQ_CQ_UNIT_SIZE) n = -1;
  int64_t at = n * RMQ_CQ_UNIT_SIZE;
  rmq_mapped_file *mf = q->mf;
  if (n < 0 || mf == NULL || at < mf->file_from_offset ||
      at >= mf->file_from_offset + mf->file_size) {
    if (mf) rmq_mapped_file_release(mf);
    mf = q->mf = n < 0 ? NULL : rmq_mfq_find(&q->cq->mfq, at);
  }
  if (mf == NULL) return false;
  int32_t pos = (int32_t)(at - mf->file_from_offset);
  int32_t limit = c->live ? rmq_mapped_file_read_position(mf) : mf->file_size;
  if (pos + RMQ_CQ_UNIT_SIZE > limit) return false;
  const uint8_t *p = mf->mapped + pos;
  *e = (rmq_cq_entry){rmq_get64(p), rmq_get32(p + 8), rmq_get64(p + 12)};
  return true;
}

static bool entry_zero(const rmq_cq_entry *e) {
  return e->phy_offset == 0 && e->size == 0 && e->tags_code == 0;
}

static bool entry_pre_blank(const rmq_cq_entry *e) {
  return e->phy_offset == 0 && e->size == RMQ_CQ_PRE_BLANK_SIZE && e->tags_code == 0;
}

static void cq_report(store_check *c, queue_state *q, int64_t n, const char *kind, const char *fmt,
                      ...) __attribute__((format(printf, 5, 6)));

/*
** The entries that lead below the log's first record expired with its
** segments: each queue starts after them (ConsumeQueue.correctMinOffset), as
** a clean pass leaves the file that holds the new first entry, and a process
** killed within a pass also the files wholly below it.
*/
static void skip_expired_entries(store_check *c) {
  int64_t min = rmq_commitlog_min_offset(c->cl);
  for (size_t i = 0; c->queues && i <= c->queue_mask; i++) {
    queue_state *q = &c->queues[i];
    rmq_cq_entry e;
    while (q->cq && entry_at(c, q, q->next, &e) && !entry_zero(&e) &&
           (e.phy_offset < min || entry_pre_blank(&e))) {
      q->next++;
    }
  }
}

/* A defect of entry n of q, reported at its segment and offset. */
static void cq_report(store_check *c, queue_state *q, int64_t n, const char *kind, const char *fmt,
                      ...) {
  char file[PATH_MAX], name[21], detail[400];
  int64_t at = n * RMQ_CQ_UNIT_SIZE, size = q->cq->mfq.file_size;
  rmq_file_name(at - at % size, name);
  snprintf(file, sizeof file, "consumequeue/%s/%d/%s", q->cq->topic, (int)q->cq->queue_id, name);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  rmq_cq_entry e;
  place(&c->v, q->cq->topic, q->cq->queue_id, n, entry_at(c, q, n, &e) ? e.phy_offset : -1);
  report(&c->v, file, at % size, kind, "%s", detail);
}

/* Entry n against the record it leads to (p: its properties, or NULL): its size and tagsCode. */
static void compare_entry(store_check *c, queue_state *q, int64_t n, const rmq_cq_entry *e,
                          const rmq_message *m, const record_props *p) {
  if (e->size != m->total_size) {
    cq_report(c, q, n, RMQ_DEFECT_CQ_SIZE, "entry %lld says size %d, its record at %lld has %d",
              (long long)n, (int)e->size, (long long)e->phy_offset, (int)m->total_size);
  }
  record_props found;
  if (p == NULL) {
    find_props(m, &found);
    p = &found;
  }
  int64_t tags = rmq_commitlog_tags_code_of(c->cl, m, p->tags.value, p->tags.len);
  if (q->is_schedule && c->delay_ms[q->cq->queue_id] >= 0) {
    tags = m->store_timestamp + c->delay_ms[q->cq->queue_id];
  }
  /* A delayed message's tagsCode is its due time: an address there is damage, as before. */
  if (e->tags_code != tags && (q->is_schedule || !rmq_cq_ext_addr(e->tags_code))) {
    cq_report(c, q, n, RMQ_DEFECT_CQ_TAGS,
              "entry %lld says tagsCode %lld, its record at %lld has %lld", (long long)n,
              (long long)e->tags_code, (long long)e->phy_offset, (long long)tags);
  }
}

/*
** Entry n met out of the walk's order (one no record claimed in order, or
** one that leads elsewhere than the record claiming it): what it leads to.
** Returns true when the entry leads to a sound record of its queue at its
** position (then only its size and tagsCode are compared).
*/
static bool classify_entry(store_check *c, queue_state *q, int64_t n, const rmq_cq_entry *e) {
  rmq_cq_entry prev;
  if (entry_pre_blank(e)) return true;
  if (e->phy_offset < 0 || e->size <= 0) {
    cq_report(c, q, n, RMQ_DEFECT_CQ_OFFSET, "entry %lld is no entry: offset %lld, size %d",
              (long long)n, (long long)e->phy_offset, (int)e->size);
    return false;
  }
  if (entry_at(c, q, n - 1, &prev) && prev.phy_offset == e->phy_offset) {
    cq_report(c, q, n, RMQ_DEFECT_CQ_DUPLICATE,
              "entry %lld leads to the record at %lld, as entry %lld does", (long long)n,
              (long long)e->phy_offset, (long long)n - 1);
    return false;
  }
  rmq_message m;
  rmq_decode_status st = record_at(c, &c->rec_mf, e->phy_offset, &m);
  if (st != RMQ_DECODE_OK) {
    cq_report(c, q, n, RMQ_DEFECT_CQ_OFFSET, "entry %lld leads to no record at %lld: %s",
              (long long)n, (long long)e->phy_offset, no_record_why(c, e->phy_offset, st));
    return false;
  }
  bool own = (size_t)m.topic_len == q->topic_len &&
             memcmp(m.topic, q->cq->topic, q->topic_len) == 0 && m.queue_id == q->cq->queue_id;
  if (!own && rmq_md_lists(&m, q->cq->topic, q->topic_len, q->cq->queue_id, n)) {
    compare_entry(c, q, n, e, &m, NULL);
    return true;
  }
  if (!own) {
    cq_report(c, q, n, RMQ_DEFECT_CQ_QUEUE,
              "entry %lld of %s/%d leads to a record of %.*s/%d at %lld", (long long)n,
              q->cq->topic, (int)q->cq->queue_id, (int)m.topic_len, m.topic, (int)m.queue_id,
              (long long)e->phy_offset);
    return false;
  }
  if (m.queue_offset != n) {
    cq_report(c, q, n, RMQ_DEFECT_CQ_QUEUE_OFFSET,
              "entry %lld leads to the record at %lld, whose QUEUEOFFSET is %lld", (long long)n,
              (long long)e->phy_offset, (long long)m.queue_offset);
    return false;
  }
  compare_entry(c, q, n, e, &m, NULL);
  return true;
}

/*
** The delay of each level as the store was written (its delay_levels, or a
** broker's messageDelayLevel, which the files do not hold): what most of
** the level's entries show, tagsCode - store time, found by a majority
** vote (Boyer-Moore). A level without entries keeps -1: the configured one.
*/
static void infer_delays(store_check *c) {
  for (int i = 0; i < RMQ_MAX_DELAY_LEVELS; i++) c->delay_ms[i] = -1;
  for (size_t i = 0; c->queues && i <= c->queue_mask; i++) {
    queue_state *q = &c->queues[i];
    if (!q->cq || !q->is_schedule) continue;
    int64_t candidate = -1, votes = 0;
    rmq_cq_iter it;
    rmq_cq_entry e;
    rmq_cq_iter_start(&it, q->cq, 0);
    /* Read without recovery, a closed store's queue ends at its first empty entry. */
    while (rmq_cq_iter_next(&it, &e) && e.size > 0) {
      rmq_commitlog_ref ref;
      rmq_message m;
      rmq_err err = {0};
      if (rmq_commitlog_read_message(c->cl, e.phy_offset, false, &ref, &m, &err) != RMQ_OK)
        continue;
      int64_t delay = e.tags_code - m.store_timestamp;
      rmq_commitlog_ref_release(&ref);
      if (votes == 0) candidate = delay;
      votes += delay == candidate ? 1 : -1;
    }
    rmq_cq_iter_stop(&it);
    if (candidate >= 0) c->delay_ms[q->cq->queue_id] = candidate;
  }
}

/* Entries [q->next, to) that no record claimed in order; in a live store, up to the walk. */
static void classify_skipped(store_check *c, queue_state *q, int64_t to) {
  rmq_cq_entry e;
  for (; q->next < to && c->v.rc == RMQ_OK && entry_at(c, q, q->next, &e); q->next++) {
    if (entry_zero(&e) || (c->live && e.phy_offset >= c->log_end)) return;
    classify_entry(c, q, q->next, &e);
  }
}

/*
** The record's entry n of queue q (topic/queue_id; q NULL when the queue
** has no files) must lead to it (ConsumeQueue.putMessagePositionInfo).
*/
static void claim_entry(store_check *c, const rmq_commitlog_record *rec, const record_props *p,
                        queue_state *q, const char *topic, size_t topic_len, int32_t queue_id,
                        int64_t n) {
  rmq_cq_entry e;
  bool have = q && entry_at(c, q, n, &e) && !entry_zero(&e);
  /* An entry that leads further into the log is a later record's to claim: judged then. */
  bool later = have && e.phy_offset > rec->offset && e.phy_offset < c->log_max;
  if (have && e.phy_offset == rec->offset) {
    compare_entry(c, q, n, &e, &rec->m, p);
  } else if (!have || later || classify_entry(c, q, n, &e)) {
    char file[32], name[RMQ_MAX_TOPIC_LEN + 1];
    record_file(rec, file);
    snprintf(name, sizeof name, "%.*s", (int)topic_len, topic);
    place(&c->v, name, queue_id, n, rec->offset);
    report(&c->v, file, rec->offset - rec->segment, RMQ_DEFECT_CQ_GAP,
           "no consume-queue entry leads to the record at %lld of %s/%d, QUEUEOFFSET %lld",
           (long long)rec->offset, name, (int)queue_id, (long long)n);
  }
  if (!q || !have || later || n < q->next) return;
  /* The positions it skipped had no record in order. */
  classify_skipped(c, q, n);
  q->next = n + 1;
}

/*
** A message's entries: the one at its QUEUEOFFSET, and one in each light
** message queue it lists that the store holds (a store written without
** enable_lmq has none: the record only carries the property).
*/
static void check_record_entry(store_check *c, const rmq_commitlog_record *rec,
                               const record_props *p) {
  const rmq_message *m = &rec->m;
  int32_t tx = m->sys_flag & RMQ_SYSFLAG_TRANSACTION_MASK;
  if (tx == RMQ_SYSFLAG_TRANSACTION_PREPARED || tx == RMQ_SYSFLAG_TRANSACTION_ROLLBACK) return;
  claim_entry(c, rec, p, find_queue(c, m->topic, (size_t)m->topic_len, m->queue_id), m->topic,
              (size_t)m->topic_len, m->queue_id, m->queue_offset);
  rmq_md_iter it;
  rmq_md_target t;
  if (!rmq_md_applies(m->topic, (size_t)m->topic_len, m->sys_flag) ||
      !rmq_md_iter_start(&it, m->properties, (size_t)m->properties_len, m->queue_id)) {
    return;
  }
  while (rmq_md_iter_next(&it, &t) == 1) {
    queue_state *q = find_queue(c, t.topic, t.topic_len, t.queue_id);
    if (q) claim_entry(c, rec, p, q, t.topic, t.topic_len, t.queue_id, t.queue_offset);
  }
}

/* After the walk: the entries of each queue that no record claimed. */
static void check_unclaimed_entries(store_check *c) {
  for (size_t i = 0; c->queues && i <= c->queue_mask && c->v.rc == RMQ_OK; i++) {
    if (c->queues[i].cq) classify_skipped(c, &c->queues[i], INT64_MAX);
  }
}

/* ------------------------------------------------------------ index files */

/* Does topic#UNIQ_KEY or topic#(a KEYS token) of m (p: its properties) hash to key_hash? */
static bool record_has_hash(const rmq_message *m, const record_props *p, int32_t key_hash) {
  return rmq_index_keys_have_hash(m->topic, (size_t)m->topic_len, p->uniq_key.value,
                                  p->uniq_key.len, p->keys.value, p->keys.len, key_hash);
}

/* Move to the next item, in the next file after the last of one; false at the end. */
static bool index_next(store_check *c) {
  index_cursor *x = &c->ix;
  while (x->iv.mf) {
    if (++x->k < x->end && rmq_index_view_item(&x->iv, x->k, &x->item)) return true;
    char after[18];
    memcpy(after, x->iv.name, sizeof after);
    rmq_index_view_release(&x->iv);
    if (rmq_index_service_view(c->index, after, &x->iv)) {
      x->k = 0;
      x->end = rmq_index_view_items_end(&x->iv, false);
    }
  }
  return false;
}

static void index_start(store_check *c) {
  index_cursor *x = &c->ix;
  if (!rmq_index_service_view(c->index, NULL, &x->iv)) return;
  x->k = 0;
  x->end = rmq_index_view_items_end(&x->iv, false);
  index_next(c);
}

static void index_report(store_check *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void index_report(store_check *c, const char *fmt, ...) {
  const index_cursor *x = &c->ix;
  char file[32], detail[400];
  snprintf(file, sizeof file, "index/%s", x->iv.name);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  int64_t at = RMQ_INDEX_HEADER_SIZE + (int64_t)x->iv.slot_num * RMQ_INDEX_SLOT_SIZE +
               (int64_t)x->k * RMQ_INDEX_ITEM_SIZE;
  place(&c->v, NULL, -1, -1, x->item.phy_offset);
  report(&c->v, file, at, RMQ_DEFECT_INDEX_ENTRY, "%s", detail);
}

/*
** The current item's timeDiff, and the header's times, against its
** record's store time (IndexFile.putKey): timeDiff counts seconds from
** beginTimestamp, which the first item set to its own record's time; the
** first item's was counted from the time before (a rolled file's
** predecessor's end), which is not known here.
*/
static void check_item_time(store_check *c, int64_t ts) {
  const rmq_index_header *h = &c->ix.iv.header;
  int32_t k = c->ix.k;
  int64_t begin = h->begin_timestamp;
  if (k == 1 && ts != begin) {
    index_report(c, "beginTimestamp %lld is not the store time %lld of item 1's record",
                 (long long)begin, (long long)ts);
    return;
  }
  int64_t diff = begin <= 0 || ts <= begin ? 0 : (ts - begin) / 1000;
  if (diff > INT32_MAX) diff = INT32_MAX;
  if (k >= 2 && c->ix.item.time_diff != diff) {
    index_report(c, "item %d has timeDiff %d, its record's store time %lld gives %lld", (int)k,
                 (int)c->ix.item.time_diff, (long long)ts, (long long)diff);
  } else if (k == h->index_count - 1 && !c->live && ts != h->end_timestamp) {
    index_report(c, "endTimestamp %lld is not the store time %lld of the last item's record",
                 (long long)h->end_timestamp, (long long)ts);
  }
}

/* The current item against the record it leads to (m and p, or decoded here when NULL). */
static void check_item(store_check *c, const rmq_message *m, const record_props *p) {
  const rmq_index_item *it = &c->ix.item;
  rmq_message decoded;
  record_props found;
  rmq_decode_status st = RMQ_DECODE_OK;
  if (m == NULL) {
    st = record_at(c, &c->rec_mf, it->phy_offset, &decoded);
    m = &decoded;
    if (st == RMQ_DECODE_OK) find_props(m, &found);
    p = &found;
  }
  if (st != RMQ_DECODE_OK) {
    index_report(c, "item %d leads to no record at %lld: %s", (int)c->ix.k,
                 (long long)it->phy_offset, no_record_why(c, it->phy_offset, st));
  } else if (!record_has_hash(m, p, it->key_hash)) {
    index_report(c, "item %d has hash %d, which no key of the record at %lld has", (int)c->ix.k,
                 (int)it->key_hash, (long long)it->phy_offset);
  } else {
    check_item_time(c, m->store_timestamp);
  }
}

/* More keys than this in one record are not checked for their items. */
#define RECORD_KEYS_MAX 64

static bool hash_in(const int32_t *hashes, int n, int32_t h) {
  for (int i = 0; i < n; i++) {
    if (hashes[i] == h) return true;
  }
  return false;
}

static void report_gap(store_check *c, const rmq_commitlog_record *rec, const char *key,
                       size_t len) {
  char file[32];
  record_file(rec, file);
  place(&c->v, NULL, -1, -1, rec->offset);
  report(&c->v, file, rec->offset - rec->segment, RMQ_DEFECT_INDEX_GAP,
         "no index item leads to the record at %lld for its key %.*s#%.*s", (long long)rec->offset,
         (int)rec->m.topic_len, rec->m.topic, (int)(len > 200 ? 200 : len), key);
}

/*
** Each key of a record the index covers has an item (IndexService.buildIndex:
** topic#UNIQ_KEY, then each KEYS token; none for a ROLLBACK), own the items
** that lead to it.
*/
static void check_record_keys(store_check *c, const rmq_commitlog_record *rec,
                              const record_props *p, const int32_t *own, int n_own) {
  const rmq_message *m = &rec->m;
  if (c->index_damaged || rec->offset < c->index_from || n_own >= RECORD_KEYS_MAX ||
      (m->sys_flag & RMQ_SYSFLAG_TRANSACTION_MASK) == RMQ_SYSFLAG_TRANSACTION_ROLLBACK) {
    return;
  }
  size_t tl = (size_t)m->topic_len;
  const rmq_property_value *u = &p->uniq_key;
  if (u->value && !hash_in(own, n_own, rmq_index_key_hash(m->topic, tl, u->value, u->len))) {
    report_gap(c, rec, u->value, u->len);
  }
  const char *k = p->keys.value, *end = k ? k + p->keys.len : NULL;
  while (k && k < end && c->v.rc == RMQ_OK) {
    const char *sp = memchr(k, ' ', (size_t)(end - k));
    const char *tok_end = sp ? sp : end;
    size_t len = (size_t)(tok_end - k);
    if (len > 0 && !hash_in(own, n_own, rmq_index_key_hash(m->topic, tl, k, len))) {
      report_gap(c, rec, k, len);
    }
    k = tok_end + 1;
  }
}

/*
** The items written for the records before rec (IndexService.buildIndex
** writes them in the records' order) and those for rec itself. An item
** out of that order is checked against the record it names all the same.
*/
static void check_record_items(store_check *c, const rmq_commitlog_record *rec,
                               const record_props *p) {
  int32_t own[RECORD_KEYS_MAX];
  int n_own = 0;
  while (c->ix.iv.mf && c->ix.item.phy_offset <= rec->offset && c->v.rc == RMQ_OK) {
    bool is_own = c->ix.item.phy_offset == rec->offset;
    if (c->index_from == INT64_MAX) c->index_from = c->ix.item.phy_offset;
    if (is_own && n_own < RECORD_KEYS_MAX) own[n_own++] = c->ix.item.key_hash;
    /* An item below the log's first record expired with its segment. */
    if (c->ix.item.phy_offset >= c->log_min) {
      check_item(c, is_own ? &rec->m : NULL, is_own ? p : NULL);
    }
    index_next(c);
  }
  check_record_keys(c, rec, p, own, n_own);
}

/* After the walk: the items left lead past the records walked (in a live store, newer ones). */
static void check_items_left(store_check *c) {
  for (; c->ix.iv.mf && c->v.rc == RMQ_OK; index_next(c)) {
    if (!c->live || c->ix.item.phy_offset < c->log_end) check_item(c, NULL, NULL);
  }
}

/* A structural defect's kind by where it is: the header, the slot table or the items. */
static const char *index_defect_kind(const rmq_index_defect *d) {
  if (d->at >= 0 && d->at < RMQ_INDEX_HEADER_SIZE) return RMQ_DEFECT_INDEX_HEADER;
  return d->at >= 0 && d->at < d->items_at ? RMQ_DEFECT_INDEX_SLOT : RMQ_DEFECT_INDEX_ENTRY;
}

/*
** Each index file's structure (rmq_index_file_check, every slot read). The
** newest file of a store being written, or left by a crash, may hold items
** its header does not count yet.
*/
static int check_index_structure(store_check *c, rmq_err *err) {
  char dir[PATH_MAX], path[PATH_MAX];
  name_list l = {0};
  int rc = join(dir, c->dir, "index", err);
  if (rc == RMQ_OK) rc = join(path, c->dir, "abort", err);
  bool crashed = rc == RMQ_OK && access(path, F_OK) == 0;
  if (rc == RMQ_OK) rc = names_of(dir, &l, err);
  for (int i = 0; rc == RMQ_OK && i < l.n && c->v.rc == RMQ_OK; i++) {
    if (!index_name(l.names[i])) continue;
    rmq_index_defect d;
    bool settled = !(c->live || crashed) || i < l.n - 1;
    if (rmq_index_service_check_file(c->index, l.names[i], settled, &d) == RMQ_OK) continue;
    char file[32];
    snprintf(file, sizeof file, "index/%s", l.names[i]);
    report(&c->v, file, d.at, index_defect_kind(&d), "%s", d.why);
    c->index_damaged = true;
  }
  names_free(&l);
  return rc;
}

/* -------------------------------------------------------------- the walk */

static const char *record_defect_kind(const rmq_commitlog_record *rec) {
  if (rec->kind == RMQ_RECORD_BLANK) return RMQ_DEFECT_BLANK;
  switch (rec->status) {
    case RMQ_DECODE_BAD_CRC: return RMQ_DEFECT_CRC;
    case RMQ_DECODE_BAD_MAGIC: return RMQ_DEFECT_MAGIC;
    default: return RMQ_DEFECT_LENGTH;
  }
}

/* A record that is not sound: the walk's verdict. */
static void report_record(store_check *c, const rmq_commitlog_record *rec) {
  char file[32];
  record_file(rec, file);
  report(&c->v, file, rec->offset - rec->segment, record_defect_kind(rec),
         "record at offset %lld: %s", (long long)rec->offset, rec->reason);
}

/* A compressed body inflates, as a consumer inflates it (MessageDecoder.decode). */
static void check_body_codec(store_check *c, const rmq_commitlog_record *rec) {
  rmq_codec codec = rmq_codec_of_sys_flag(rec->m.sys_flag);
  if (codec == RMQ_CODEC_NONE) return;
  uint8_t *body;
  size_t len;
  rmq_err err = {0};
  if (!c->codec && !(c->codec = rmq_codec_ctx_new())) return;
  if (rmq_decompress(c->codec, codec, rec->m.body, (size_t)rec->m.body_len, RMQ_MAX_INFLATED_BODY,
                     &body, &len, &err) == RMQ_OK) {
    free(body);
    return;
  }
  if (err.code != RMQ_ECORRUPT) return; /* out of memory says nothing of the store */
  char file[32];
  record_file(rec, file);
  report(&c->v, file, rec->offset - rec->segment, RMQ_DEFECT_BODY_CODEC,
         "the message at offset %lld: %s", (long long)rec->offset, err.msg);
}

/*
** One pass over the records, each CRC checked, and each message checked
** at once against its consume-queue entry and its index items while its
** bytes are at hand.
*/
static void walk_commitlog(store_check *c) {
  unsigned flags = RMQ_CL_ITER_CHECK_CRC | (c->live ? 0 : RMQ_CL_ITER_WHOLE_SEGMENTS);
  rmq_commitlog_iter it;
  rmq_commitlog_record rec;
  c->log_min = c->log_end = rmq_commitlog_min_offset(c->cl);
  c->log_max = rmq_commitlog_max_offset(c->cl);
  index_start(c);
  rmq_cl_iter_start(&it, c->cl, INT64_MIN, c->log_to, flags);
  while (c->v.rc == RMQ_OK && rmq_commitlog_iter_next(&it, &rec)) {
    if (rec.header && rec.m.store_timestamp > c->max_store_time) {
      c->max_store_time = rec.m.store_timestamp;
    }
    if (rec.kind != RMQ_RECORD_MESSAGE) {
      if (rec.reason[0]) report_record(c, &rec);
      continue;
    }
    if (rec.m.physical_offset != rec.offset) {
      char file[32];
      record_file(&rec, file);
      report(&c->v, file, rec.offset - rec.segment, RMQ_DEFECT_PHY_OFFSET,
             "the record at offset %lld says PHYSICALOFFSET %lld", (long long)rec.offset,
             (long long)rec.m.physical_offset);
    }
    check_body_codec(c, &rec);
    record_props p;
    find_props(&rec.m, &p);
    c->log_end = rec.offset + rec.size;
    check_record_entry(c, &rec, &p);
    check_record_items(c, &rec, &p);
  }
  rmq_commitlog_iter_stop(&it);
}

static int check_contents(store_check *c, rmq_err *err) {
  int rc = check_index_structure(c, err);
  if (rc == RMQ_OK) rc = load_queues(c, err);
  if (rc == RMQ_OK) infer_delays(c);
  if (rc == RMQ_OK) skip_expired_entries(c);
  if (rc == RMQ_OK) walk_commitlog(c);
  if (rc == RMQ_OK && c->v.rc == RMQ_OK) check_checkpoint(c);
  if (rc == RMQ_OK && c->v.rc == RMQ_OK) check_unclaimed_entries(c);
  if (rc == RMQ_OK && c->v.rc == RMQ_OK) check_items_left(c);
  rmq_index_view_release(&c->ix.iv);
  if (c->rec_mf) rmq_mapped_file_release(c->rec_mf);
  free_queues(c);
  rmq_codec_ctx_free(c->codec);
  c->codec = NULL;
  return rc;
}

/* ------------------------------------------------------------- the parts */

/*
** The files opened read-only as the store's parts, without the recovery a
** store's open runs (a scan of the last segments with their CRCs): the
** check reads every record once, itself. Sizes come from the files.
*/
typedef struct own_parts {
  rmq_commitlog cl;
  rmq_cq_table *cqs;
  rmq_index_service index;
  int opened; /* how many of the three were set up */
} own_parts;

static int open_commitlog(const char *dir, rmq_commitlog *cl, rmq_err *err) {
  rmq_config cfg;
  rmq_config_init(&cfg);
  rmq_commitlog_config cc = {.file_size = cfg.commitlog_file_size,
                             .max_message_size = cfg.max_message_size,
                             .store_host = cfg.store_host};
  int rc = rmq_parse_delay_levels(cfg.delay_levels, cc.delay_ms, RMQ_MAX_DELAY_LEVELS,
                                  &cc.delay_level_count, err);
  if (rc == RMQ_OK) rc = rmq_commitlog_init(cl, dir, &cc, false, err);
  return rc == RMQ_OK ? rmq_mfq_load(&cl->mfq, true, err) : rc;
}

static int open_parts(const char *dir, own_parts *p, rmq_err *err) {
  rmq_config cfg;
  rmq_config_init(&cfg);
  int rc = open_commitlog(dir, &p->cl, err);
  p->opened = 1;
  if (rc == RMQ_OK) rc = rmq_cq_table_new(dir, cfg.consumequeue_entries, false, &p->cqs, err);
  if (rc == RMQ_OK) rc = rmq_cq_table_load(p->cqs, err);
  if (rc != RMQ_OK) return rc;
  rc = rmq_index_service_init(&p->index, dir, cfg.index_slots, cfg.index_entries, false, NULL, err);
  if (rc == RMQ_OK) p->opened = 3;
  return rc == RMQ_OK ? rmq_index_service_load(&p->index, true, err) : rc;
}

static void close_parts(own_parts *p) {
  if (p->opened >= 3) rmq_index_service_destroy(&p->index);
  rmq_cq_table_free(p->cqs);
  if (p->opened >= 1) rmq_commitlog_destroy(&p->cl);
}

/* A store this process has open: what was published, once the dispatcher caught up. */
static int check_live(store_check *c, rmq_store *s, rmq_err *err) {
  c->cl = rmq_store_commitlog(s);
  c->cqs = rmq_store_consume_queues(s);
  c->index = rmq_store_index(s);
  c->live = c->v.live = !rmq_store_config(s)->readonly;
  int rc = check_files(&c->v, c->dir, s, err);
  /* What was published before the wait is in the queues and the index after it. */
  c->log_to = c->live ? rmq_commitlog_max_offset(c->cl) : INT64_MAX;
  if (rc == RMQ_OK && c->live) rc = rmq_store_wait_dispatched(s, err);
  return rc == RMQ_OK && c->v.rc == RMQ_OK ? check_contents(c, err) : rc;
}

/* Files that cannot be opened as a store are a defect too: say why. */
static int check_closed(store_check *c, rmq_err *err) {
  int rc = check_files(&c->v, c->dir, NULL, err);
  if (rc != RMQ_OK || c->v.rc != RMQ_OK) return rc;
  own_parts p = {0};
  rmq_err why = {0};
  if (open_parts(c->dir, &p, &why) == RMQ_OK) {
    c->cl = &p.cl;
    c->cqs = p.cqs;
    c->index = &p.index;
    rc = check_contents(c, err);
  } else {
    report(&c->v, "", -1, RMQ_DEFECT_UNREADABLE, "%s", why.msg);
  }
  close_parts(&p);
  return rc;
}

/* ============================================================== config */

/* A config file of config/, and how its owner reads it. */
typedef struct config_file {
  const char *name;
  int (*examine)(const char *store_dir, rmq_config_copy *file, rmq_config_copy *bak, rmq_err *err);
  bool derived; /* rebuilt from the consume queues when it cannot be read */
} config_file;

/* What the store does about the damaged copy: read the .bak, refuse, or rebuild. */
static const char *config_outcome(const config_file *f, const rmq_config_copy *bak) {
  if (bak->state == RMQ_CONFIG_SOUND) return "its .bak is sound and is read instead";
  if (f->derived) {
    return "the next writable open moves it aside and rebuilds it from the consume queues";
  }
  return "a writable open fails until rocketmq_repair moves it aside, keeping the entries that "
         "still read";
}

/*
** One row for a config file that a load reads no further than its .bak, or
** not at all: its damaged copy (the file, or the .bak of a missing file),
** where it breaks (the parser's offset) and what that does to the store.
*/
static int check_config_file(verifier *v, const char *dir, const config_file *f, rmq_err *err) {
  rmq_config_copy file, bak;
  int rc = f->examine(dir, &file, &bak, err);
  if (rc != RMQ_OK || !rmq_config_needs_repair(&file, &bak)) return rc;
  char path[64];
  bool in_file = file.state == RMQ_CONFIG_DAMAGED;
  snprintf(path, sizeof path, "config/%s%s", f->name, in_file ? "" : ".bak");
  const rmq_config_copy *d = in_file ? &file : &bak;
  const char *bak_state = !in_file                          ? "the file is missing"
                          : bak.state == RMQ_CONFIG_ABSENT  ? "there is no .bak"
                          : bak.state == RMQ_CONFIG_DAMAGED ? "its .bak is damaged too"
                                                            : NULL;
  report(v, path, d->damage.at, RMQ_DEFECT_CONFIG, "%s; %s%s%s", d->damage.why,
         bak_state ? bak_state : "", bak_state ? "; " : "",
         config_outcome(f, in_file ? &bak : &file));
  return RMQ_OK;
}

/* consumerOffset.json, delayOffset.json and topics.json: those that do not parse. */
static int check_config_files(verifier *v, const char *dir, rmq_err *err) {
  static const config_file files[] = {
      {"consumerOffset.json", rmq_com_examine, false},
      {"delayOffset.json", rmq_schedule_examine_offsets, false},
      {"topics.json", rmq_tcm_examine, true},
  };
  int rc = RMQ_OK;
  for (size_t i = 0; rc == RMQ_OK && v->rc == RMQ_OK && i < sizeof files / sizeof *files; i++) {
    rc = check_config_file(v, dir, &files[i], err);
  }
  return rc;
}

int rmq_verify(const char *dir, rmq_defect_fn fn, void *ctx, rmq_err *err) {
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    return rmq_err_set(err, RMQ_ENOTFOUND, "no store at %s: not a directory", dir);
  }
  store_check c = {.v = {.fn = fn, .ctx = ctx, .place = no_place},
                   .dir = dir,
                   .log_to = INT64_MAX,
                   .index_from = INT64_MAX};
  /* First: a live store's later flushes must not count records the walk does not read. */
  c.have_checkpoint = read_checkpoint(dir, c.checkpoint);
  rmq_store *s = rmq_store_find(dir);
  int rc = s ? check_live(&c, s, err) : check_closed(&c, err);
  rmq_store_release(s);
  if (rc == RMQ_OK && c.v.rc == RMQ_OK) rc = check_config_files(&c.v, dir, err);
  if (rc == RMQ_OK && c.v.rc != RMQ_OK) rc = rmq_err_set(err, c.v.rc, "verify stopped");
  return rc;
}
