/*
** verify.c: the integrity check behind rocketmq_verify (the contract is in
** rmq.h: rmq_verify_files, rmq_store_verify).
**
** rmq_verify_files looks at names and sizes only (stat), so it also works
** on a store that a read-only open refuses. rmq_store_verify reads an open
** store in four steps: the checkpoint file (first, so that a live store's
** later flushes cannot make it look ahead of the records read), the commit
** log in one sequential pass with the iterator (CRC checked, damaged
** records and misplaced BLANKs reported, the walk going on after them),
** then every consume-queue entry and every index item against the record
** it leads to, decoded in place from the mapping without its CRC (the walk
** has reported a bad CRC once already). Consume queues and index files are
** read through their mappings up to what they hold, not up to what
** recovery kept, so that an entry a read-only open would leave out (one
** that leads past the log's end) is seen.
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
#include "file_name.h"
#include "io.h"
#include "properties.h"
#include "store.h"

typedef struct verifier {
  rmq_defect_fn fn;
  void *ctx;
  int rc;    /* the callback's code once it stopped the check */
  bool live; /* a writer of this process may be creating a directory's last file */
} verifier;

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
  rmq_defect d = {.file = file, .offset = offset, .kind = kind, .detail = detail};
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
             "not a queue: a queue is a directory named by its "
             "queue id in decimal");
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
             "not a topic: a topic is a directory of 1 to %d "
             "characters of [A-Za-z0-9_%%|-]",
             RMQ_MAX_TOPIC_LEN);
      continue;
    }
    rc = check_topic(v, root, l.names[i], size, err);
  }
  names_free(&l);
  return rc;
}

/* An index file's size: the store's geometry, or RocketMQ's (4 items per slot) read-only. */
static bool index_size_ok(int64_t len, rmq_store *s) {
  if (s && !rmq_store_config(s)->readonly) {
    const rmq_config *c = rmq_store_config(s);
    return len == rmq_index_file_size(c->index_slots, c->index_entries);
  }
  rmq_config c;
  rmq_config_init(&c);
  if (s) c = *rmq_store_config(s);
  int64_t body = len - RMQ_INDEX_HEADER_SIZE;
  return len == rmq_index_file_size(c.index_slots, c.index_entries) ||
         (body > 0 && body % (RMQ_INDEX_SLOT_SIZE + 4 * RMQ_INDEX_ITEM_SIZE) == 0);
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
             "not an index file: an index file is a regular "
             "file named by its creation time, yyyyMMddHHmmssSSS");
    } else if (!index_size_ok(len, s)) {
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

typedef struct store_check {
  verifier v;
  const char *dir;
  rmq_commitlog *cl;
  rmq_cq_table *cqs;
  rmq_index_service *index;
  bool live;
  int64_t log_min, log_end; /* the records walked: [min, end of the last message) */
  int64_t max_store_time;   /* the latest store time of a record with a header */
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

static void check_checkpoint(store_check *c, const int64_t ts[3]) {
  for (int i = 0; i < 3; i++) {
    if (ts[i] <= c->max_store_time || (ts[i] <= 0)) continue;
    report(&c->v, "checkpoint", 8 * i, RMQ_DEFECT_CHECKPOINT,
           "%s %lld is later than the last record's store time %lld: records it counts as "
           "written are missing",
           checkpoint_fields[i], (long long)ts[i], (long long)c->max_store_time);
  }
}

/* ------------------------------------------------------------- commit log */

static const char *record_defect_kind(const rmq_commitlog_record *rec) {
  if (rec->kind == RMQ_RECORD_BLANK) return RMQ_DEFECT_BLANK;
  switch (rec->status) {
    case RMQ_DECODE_BAD_CRC: return RMQ_DEFECT_CRC;
    case RMQ_DECODE_BAD_MAGIC: return RMQ_DEFECT_MAGIC;
    default: return RMQ_DEFECT_LENGTH;
  }
}

static void walk_commitlog(store_check *c) {
  unsigned flags = RMQ_CL_ITER_CHECK_CRC | (c->live ? 0 : RMQ_CL_ITER_WHOLE_SEGMENTS);
  rmq_commitlog_iter it;
  rmq_commitlog_record rec;
  c->log_min = c->log_end = rmq_commitlog_min_offset(c->cl);
  rmq_cl_iter_start(&it, c->cl, INT64_MIN, INT64_MAX, flags);
  while (c->v.rc == RMQ_OK && rmq_commitlog_iter_next(&it, &rec)) {
    if (rec.header && rec.m.store_timestamp > c->max_store_time) {
      c->max_store_time = rec.m.store_timestamp;
    }
    if (rec.kind == RMQ_RECORD_MESSAGE) c->log_end = rec.offset + rec.size;
    if (rec.kind == RMQ_RECORD_MESSAGE || rec.reason[0] == '\0') continue;
    char file[32];
    rmq_file_name(rec.segment, file + snprintf(file, sizeof file, "commitlog/"));
    report(&c->v, file, rec.offset - rec.segment, record_defect_kind(&rec),
           "record at offset %lld: %s", (long long)rec.offset, rec.reason);
  }
  rmq_commitlog_iter_stop(&it);
}

/*
** Decode the record at phy (its CRC unchecked) from the held segment *mf,
** which moves to the segment that holds phy. A live store is read up to
** what was published, a read-only one to the end of its files.
*/
static rmq_decode_status record_at(store_check *c, rmq_mapped_file **mf, int64_t phy,
                                   rmq_message *m) {
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

/* ---------------------------------------------------------- consume queues */

typedef struct cq_walk {
  store_check *c;
  rmq_consume_queue *cq;
  char file[PATH_MAX]; /* the segment being read, relative to the store */
  int64_t pos;         /* the entry's byte offset in that segment */
  rmq_mapped_file *rec_mf;
  int64_t prev_phy, prev_queue_offset; /* of the last entry that led to a record; -1: none */
} cq_walk;

#define CQ_REPORT(w, kind, ...) report(&(w)->c->v, (w)->file, (w)->pos, kind, __VA_ARGS__)

/*
** The record's QUEUEOFFSET against the entry's position n. Entries that go
** on one by one after a reported jump are not reported again. A jump
** ahead cannot tell a missing entry from a wrong QUEUEOFFSET: the detail
** says both.
*/
static void check_queue_offset(cq_walk *w, int64_t n, int64_t qo) {
  int64_t prev = w->prev_queue_offset;
  w->prev_queue_offset = qo;
  if (qo == n || (prev >= 0 && qo == prev + 1)) return;
  if (prev >= 0 && qo > prev + 1) {
    CQ_REPORT(w, RMQ_DEFECT_CQ_GAP,
              "entry %lld leads to queue offset %lld after %lld: no entry leads to the records "
              "between, or the record's QUEUEOFFSET is wrong",
              (long long)n, (long long)qo, (long long)prev);
  } else {
    CQ_REPORT(w, RMQ_DEFECT_CQ_QUEUE_OFFSET,
              "entry %lld leads to a record whose QUEUEOFFSET is %lld", (long long)n,
              (long long)qo);
  }
}

/* The entry's record against the entry: what a consumer would get through it. */
static void check_entry_record(cq_walk *w, int64_t n, const rmq_cq_entry *e, const rmq_message *m) {
  rmq_consume_queue *cq = w->cq;
  if ((size_t)m->topic_len != strlen(cq->topic) || memcmp(m->topic, cq->topic, strlen(cq->topic)) ||
      m->queue_id != cq->queue_id) {
    CQ_REPORT(w, RMQ_DEFECT_CQ_QUEUE, "entry %lld of %s/%d leads to a record of %.*s/%d at %lld",
              (long long)n, cq->topic, (int)cq->queue_id, (int)m->topic_len, m->topic,
              (int)m->queue_id, (long long)e->phy_offset);
    w->prev_queue_offset = n;
    return;
  }
  if (e->size != m->total_size) {
    CQ_REPORT(w, RMQ_DEFECT_CQ_SIZE, "entry %lld says size %d, its record at %lld has %d",
              (long long)n, (int)e->size, (long long)e->phy_offset, (int)m->total_size);
  }
  int64_t tags = rmq_commitlog_tags_code(w->c->cl, m);
  if (e->tags_code != tags) {
    CQ_REPORT(w, RMQ_DEFECT_CQ_TAGS, "entry %lld says tagsCode %lld, its record at %lld has %lld",
              (long long)n, (long long)e->tags_code, (long long)e->phy_offset, (long long)tags);
  }
  check_queue_offset(w, n, m->queue_offset);
  w->prev_queue_offset = m->queue_offset;
}

/* Entry n; false at the end of the queue's entries (a zero entry, or one that is no entry). */
static bool check_entry(cq_walk *w, int64_t n, const rmq_cq_entry *e) {
  store_check *c = w->c;
  if (e->phy_offset == 0 && e->size == 0 && e->tags_code == 0) return false;
  if (e->phy_offset == 0 && e->size == RMQ_CQ_PRE_BLANK_SIZE && e->tags_code == 0) return true;
  if (e->phy_offset < 0 || e->size <= 0) {
    CQ_REPORT(w, RMQ_DEFECT_CQ_OFFSET, "entry %lld is no entry: offset %lld, size %d", (long long)n,
              (long long)e->phy_offset, (int)e->size);
    return false;
  }
  /* A live store's entries past the walk are newer than it. */
  if (c->live && e->phy_offset >= c->log_end) return false;
  if (e->phy_offset == w->prev_phy) {
    CQ_REPORT(w, RMQ_DEFECT_CQ_DUPLICATE,
              "entry %lld leads to the record at %lld, as entry %lld "
              "does",
              (long long)n, (long long)e->phy_offset, (long long)n - 1);
    return true;
  }
  rmq_message m;
  rmq_decode_status st = RMQ_DECODE_TRUNCATED;
  if (e->phy_offset >= c->log_min && e->phy_offset < c->log_end) {
    st = record_at(c, &w->rec_mf, e->phy_offset, &m);
  }
  if (st != RMQ_DECODE_OK) {
    CQ_REPORT(w, RMQ_DEFECT_CQ_OFFSET, "entry %lld leads to no record at %lld: %s", (long long)n,
              (long long)e->phy_offset,
              e->phy_offset >= c->log_end || e->phy_offset < c->log_min
                  ? "outside the log's records"
                  : rmq_decode_status_name(st));
    w->prev_phy = e->phy_offset;
    w->prev_queue_offset = n;
    return true;
  }
  w->prev_phy = e->phy_offset;
  check_entry_record(w, n, e, &m);
  return true;
}

/* One segment's entries; false when the queue's entries end in it. */
static bool check_cq_segment(cq_walk *w, rmq_mapped_file *mf) {
  int32_t limit = w->c->live ? rmq_mapped_file_read_position(mf) : mf->file_size;
  char name[21];
  rmq_file_name(mf->file_from_offset, name);
  snprintf(w->file, sizeof w->file, "consumequeue/%s/%d/%s", w->cq->topic, (int)w->cq->queue_id,
           name);
  for (int32_t pos = 0; pos + RMQ_CQ_UNIT_SIZE <= limit && w->c->v.rc == RMQ_OK;
       pos += RMQ_CQ_UNIT_SIZE) {
    const uint8_t *p = mf->mapped + pos;
    rmq_cq_entry e = {rmq_get64(p), rmq_get32(p + 8), rmq_get64(p + 12)};
    w->pos = pos;
    if (!check_entry(w, (mf->file_from_offset + pos) / RMQ_CQ_UNIT_SIZE, &e)) return false;
  }
  return limit == mf->file_size;
}

static void check_queue(store_check *c, rmq_consume_queue *cq) {
  cq_walk w = {.c = c, .cq = cq, .prev_phy = -1, .prev_queue_offset = -1};
  for (int i = 0, n = rmq_mfq_count(&cq->mfq); i < n && c->v.rc == RMQ_OK; i++) {
    rmq_mapped_file *mf = rmq_mfq_get(&cq->mfq, i);
    if (mf == NULL) continue;
    bool more = check_cq_segment(&w, mf);
    rmq_mapped_file_release(mf);
    if (!more) break;
  }
  if (w.rec_mf) rmq_mapped_file_release(w.rec_mf);
}

static int check_consume_queue_entries(store_check *c, rmq_err *err) {
  rmq_consume_queue **all;
  int n;
  int rc = rmq_cq_table_snapshot(c->cqs, &all, &n, err);
  for (int i = 0; rc == RMQ_OK && i < n && c->v.rc == RMQ_OK; i++) check_queue(c, all[i]);
  if (rc == RMQ_OK) free(all);
  return rc;
}

/* ------------------------------------------------------------ index files */

/* Does topic#UNIQ_KEY or topic#(a KEYS token) of m hash to key_hash? */
static bool record_has_hash(const rmq_message *m, int32_t key_hash) {
  static const char *const names[] = {RMQ_PROPERTY_UNIQ_KEY, RMQ_PROPERTY_KEYS};
  rmq_property_value v[2];
  rmq_properties_find(m->properties, (size_t)m->properties_len, names, 2, v);
  size_t tl = (size_t)m->topic_len;
  if (v[0].value && rmq_index_key_hash(m->topic, tl, v[0].value, v[0].len) == key_hash) return true;
  const char *p = v[1].value, *end = p ? p + v[1].len : NULL;
  while (p && p < end) {
    const char *sp = memchr(p, ' ', (size_t)(end - p));
    const char *tok_end = sp ? sp : end;
    if (tok_end > p && rmq_index_key_hash(m->topic, tl, p, (size_t)(tok_end - p)) == key_hash) {
      return true;
    }
    p = tok_end + 1;
  }
  return false;
}

static void check_index_item(store_check *c, const rmq_index_view *iv, int32_t k,
                             rmq_mapped_file **rec_mf) {
  rmq_index_item item;
  if (!rmq_index_view_item(iv, k, &item)) return;
  if (c->live && item.phy_offset >= c->log_end) return; /* newer than the walk */
  int64_t at = RMQ_INDEX_HEADER_SIZE + (int64_t)iv->slot_num * RMQ_INDEX_SLOT_SIZE +
               (int64_t)k * RMQ_INDEX_ITEM_SIZE;
  rmq_message m;
  rmq_decode_status st = RMQ_DECODE_TRUNCATED;
  bool inside = item.phy_offset >= c->log_min && item.phy_offset < c->log_end;
  if (inside) st = record_at(c, rec_mf, item.phy_offset, &m);
  char file[32];
  if (st == RMQ_DECODE_OK && record_has_hash(&m, item.key_hash)) return;
  snprintf(file, sizeof file, "index/%s", iv->name);
  if (st != RMQ_DECODE_OK) {
    report(&c->v, file, at, RMQ_DEFECT_INDEX_ENTRY, "item %d leads to no record at %lld: %s",
           (int)k, (long long)item.phy_offset,
           inside ? rmq_decode_status_name(st) : "outside the log's records");
  } else {
    report(&c->v, file, at, RMQ_DEFECT_INDEX_ENTRY,
           "item %d has hash %d, which no key of the record at %lld has", (int)k,
           (int)item.key_hash, (long long)item.phy_offset);
  }
}

static void check_index_items(store_check *c) {
  rmq_index_view iv;
  char after[18] = "";
  rmq_mapped_file *rec_mf = NULL;
  while (c->v.rc == RMQ_OK && rmq_index_service_view(c->index, after[0] ? after : NULL, &iv)) {
    int32_t end = rmq_index_view_items_end(&iv, false);
    for (int32_t k = 1; k < end && c->v.rc == RMQ_OK; k++) check_index_item(c, &iv, k, &rec_mf);
    memcpy(after, iv.name, sizeof after);
    rmq_index_view_release(&iv);
  }
  if (rec_mf) rmq_mapped_file_release(rec_mf);
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

static int check_contents(store_check *c, rmq_err *err) {
  int64_t ts[3];
  bool have_checkpoint = read_checkpoint(c->dir, ts);
  walk_commitlog(c);
  if (c->v.rc == RMQ_OK && have_checkpoint) check_checkpoint(c, ts);
  int rc = c->v.rc == RMQ_OK ? check_consume_queue_entries(c, err) : RMQ_OK;
  if (rc == RMQ_OK && c->v.rc == RMQ_OK) check_index_items(c);
  return rc;
}

/* A store this process has open: what was published, once the dispatcher caught up. */
static int check_live(store_check *c, rmq_store *s, rmq_err *err) {
  c->cl = rmq_store_commitlog(s);
  c->cqs = rmq_store_consume_queues(s);
  c->index = rmq_store_index(s);
  c->live = c->v.live = !rmq_store_config(s)->readonly;
  int rc = check_files(&c->v, c->dir, s, err);
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

int rmq_verify(const char *dir, rmq_defect_fn fn, void *ctx, rmq_err *err) {
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    return rmq_err_set(err, RMQ_ENOTFOUND, "no store at %s: not a directory", dir);
  }
  store_check c = {.v = {.fn = fn, .ctx = ctx}, .dir = dir};
  rmq_store *s = rmq_store_find(dir);
  int rc = s ? check_live(&c, s, err) : check_closed(&c, err);
  rmq_store_release(s);
  if (rc == RMQ_OK && c.v.rc != RMQ_OK) rc = rmq_err_set(err, c.v.rc, "verify stopped");
  return rc;
}
