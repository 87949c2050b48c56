/*
** mapped_file_queue.c: MappedFileQueue (see mapped_file_queue.h).
*/
#include "mapped_file_queue.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_name.h"

int rmq_mfq_init(rmq_mapped_file_queue *q, const char *dir, int32_t file_size, bool writable,
                 rmq_err *err) {
  memset(q, 0, sizeof *q);
  q->dir = strdup(dir);
  if (!q->dir) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  q->file_size = file_size;
  q->writable = writable;
  pthread_rwlock_init(&q->lock, NULL);
  pthread_mutex_init(&q->flush_mu, NULL);
  return RMQ_OK;
}

void rmq_mfq_destroy(rmq_mapped_file_queue *q) {
  if (q->dir == NULL) return;
  for (int i = 0; i < q->count; i++) rmq_mapped_file_shutdown(q->files[i], false);
  free(q->files);
  free(q->dir);
  pthread_rwlock_destroy(&q->lock);
  pthread_mutex_destroy(&q->flush_mu);
  memset(q, 0, sizeof *q);
}

static int mfq_push(rmq_mapped_file_queue *q, rmq_mapped_file *mf, rmq_err *err) {
  if (q->count == q->cap) {
    int cap = q->cap ? q->cap * 2 : 8;
    rmq_mapped_file **files = realloc(q->files, (size_t)cap * sizeof *files);
    if (!files) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
    q->files = files;
    q->cap = cap;
  }
  mf->write_failed = q->write_failed;
  mf->write_failed_ctx = q->write_failed_ctx;
  q->files[q->count++] = mf;
  return RMQ_OK;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir that are 20-digit segment names, sorted. */
static int list_segments(const char *dir, char ***names, int *n, rmq_err *err) {
  *names = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) return RMQ_OK;
    return rmq_err_set(err, RMQ_EIO, "cannot list %s: %s", dir, strerror(errno));
  }
  int cap = 0, rc = RMQ_OK;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int64_t off;
    if (rmq_file_name_parse(e->d_name, &off) != 0) continue;
    if (*n == cap) {
      cap = cap ? cap * 2 : 16;
      char **grown = realloc(*names, (size_t)cap * sizeof *grown);
      if (!grown) {
        rc = rmq_err_set(err, RMQ_ENOMEM, "out of memory");
        break;
      }
      *names = grown;
    }
    if (((*names)[*n] = strdup(e->d_name)) == NULL) {
      rc = rmq_err_set(err, RMQ_ENOMEM, "out of memory");
      break;
    }
    (*n)++;
  }
  closedir(d);
  if (*n > 1) qsort(*names, (size_t)*n, sizeof **names, cmp_names);
  return rc;
}

static int64_t file_length(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

/*
** A segment may start at from: not below 0 (its name would be negative) nor
** so far that it ends past RMQ_MAX_LOG_OFFSET, where offsets near INT64_MAX
** overflow. Callers check their offsets first; this keeps a wrong one from
** ever reaching the disk, and a file named so from being taken for a segment.
*/
static bool segment_fits(const rmq_mapped_file_queue *q, int64_t from) {
  return from >= 0 && from <= RMQ_MAX_LOG_OFFSET - q->file_size;
}

static int mfq_load_one(rmq_mapped_file_queue *q, const char *name, rmq_err *err) {
  char path[4096];
  int64_t from;
  snprintf(path, sizeof path, "%s/%s", q->dir, name);
  /* A reader skips a file whose creation a crash cut short (a writer sizes it). */
  if (!q->writable && file_length(path) == 0) return RMQ_OK;
  rmq_file_name_parse(name, &from);
  if (!segment_fits(q, from)) {
    return rmq_err_set(err, RMQ_ECORRUPT,
                       "%s starts at %lld: a segment of %d bytes starts at most at %lld, so "
                       "that it ends by 2^62",
                       path, (long long)from, q->file_size,
                       (long long)(RMQ_MAX_LOG_OFFSET - q->file_size));
  }
  if (q->count > 0) {
    rmq_mapped_file *prev = q->files[q->count - 1];
    if (from != prev->file_from_offset + q->file_size) {
      return rmq_err_set(err, RMQ_ECORRUPT,
                         "%s starts at %lld but the previous segment ends at %lld: a segment "
                         "is missing",
                         path, (long long)from, (long long)(prev->file_from_offset + q->file_size));
    }
  }
  rmq_mapped_file *mf;
  int rc = rmq_mapped_file_open(path, from, q->file_size, RMQ_MF_EXISTING, q->writable, &mf, err);
  if (rc != RMQ_OK) return rc;
  if (q->close_fds) rmq_mapped_file_close_fd(mf);
  rmq_mapped_file_set_positions(mf, q->file_size);
  rc = mfq_push(q, mf, err);
  if (rc != RMQ_OK) rmq_mapped_file_shutdown(mf, false);
  return rc;
}

/*
** Segments of another size than the setting makes. When they all have one
** size that the setting could make, the store was written with that
** setting (RMQ_EINVAL, saying so); when one stands alone, it may also be a
** damaged file (RMQ_ECORRUPT). Mixed sizes: the file's own check reports.
** Asked only once a load failed, so that a sound open stats nothing more.
*/
static int check_geometry(rmq_mapped_file_queue *q, char **names, int n, rmq_err *err) {
  char path[4096];
  int64_t size = -1;
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/%s", q->dir, names[i]);
    int64_t len = file_length(path);
    if (i > 0 && len != size) return RMQ_OK;
    size = len;
  }
  int32_t unit = q->size_unit > 0 ? q->size_unit : 1;
  if (n == 0 || !q->size_setting || size <= 0 || size == q->file_size || size % unit != 0 ||
      size > INT32_MAX) {
    return RMQ_OK;
  }
  snprintf(path, sizeof path, "%s/%s", q->dir, names[0]);
  return rmq_err_set(err, n > 1 ? RMQ_EINVAL : RMQ_ECORRUPT,
                     "%s%s is %lld bytes, but %s=%d makes files of %d bytes: %s %s=%lld%s", path,
                     n > 1 ? " (as is every file beside it)" : "", (long long)size, q->size_setting,
                     q->file_size / unit, q->file_size,
                     n > 1 ? "the store was written with" : "if the store was written with",
                     q->size_setting, (long long)(size / unit),
                     n > 1 ? ": open it with that" : ", open it with that");
}

int rmq_mfq_load(rmq_mapped_file_queue *q, bool size_from_files, rmq_err *err) {
  char **names;
  int n, rc = list_segments(q->dir, &names, &n, err);
  if (rc == RMQ_OK && n > 0 && size_from_files) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", q->dir, names[0]);
    int64_t len = file_length(path);
    if (len > 0 && len <= INT32_MAX) q->file_size = (int32_t)len;
  }
  /*
  ** Only the last segment is written to: the others give up their descriptor
  ** as the next one opens (and open the file if they ever need it), so a
  ** queue of many segments never holds a descriptor for each.
  */
  for (int i = 0; rc == RMQ_OK && i < n; i++) {
    rc = mfq_load_one(q, names[i], err);
    if (q->count > 1) rmq_mapped_file_close_fd(q->files[q->count - 2]);
  }
  rmq_err geometry = {0};
  if (rc == RMQ_ECORRUPT && !size_from_files && check_geometry(q, names, n, &geometry) != RMQ_OK) {
    *err = geometry;
    rc = geometry.code;
  }
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  return rc;
}

int rmq_mfq_count(rmq_mapped_file_queue *q) {
  pthread_rwlock_rdlock(&q->lock);
  int n = q->count;
  pthread_rwlock_unlock(&q->lock);
  return n;
}

rmq_mapped_file *rmq_mfq_get(rmq_mapped_file_queue *q, int i) {
  rmq_mapped_file *mf = NULL;
  pthread_rwlock_rdlock(&q->lock);
  if (i >= 0 && i < q->count && rmq_mapped_file_hold(q->files[i])) mf = q->files[i];
  pthread_rwlock_unlock(&q->lock);
  return mf;
}

rmq_mapped_file *rmq_mfq_first(rmq_mapped_file_queue *q) { return rmq_mfq_get(q, 0); }

rmq_mapped_file *rmq_mfq_last(rmq_mapped_file_queue *q) {
  rmq_mapped_file *mf = NULL;
  pthread_rwlock_rdlock(&q->lock);
  if (q->count > 0 && rmq_mapped_file_hold(q->files[q->count - 1])) mf = q->files[q->count - 1];
  pthread_rwlock_unlock(&q->lock);
  return mf;
}

rmq_mapped_file *rmq_mfq_find(rmq_mapped_file_queue *q, int64_t offset) {
  rmq_mapped_file *mf = NULL;
  pthread_rwlock_rdlock(&q->lock);
  if (q->count > 0 && offset >= q->files[0]->file_from_offset) {
    int64_t i = (offset - q->files[0]->file_from_offset) / q->file_size;
    if (i < q->count && rmq_mapped_file_hold(q->files[i])) mf = q->files[i];
  }
  pthread_rwlock_unlock(&q->lock);
  return mf;
}

static rmq_mapped_file *mfq_create(rmq_mapped_file_queue *q, int64_t from, rmq_err *err) {
  char name[21], path[4096], next_name[21], next_path[4096];
  if (!segment_fits(q, from)) {
    rmq_err_set(err, RMQ_EINVAL,
                "%s: no segment is made at offset %lld: segments of %d bytes lie between offset 0 "
                "and 2^62",
                q->dir, (long long)from, q->file_size);
    return NULL;
  }
  rmq_file_name(from, name);
  snprintf(path, sizeof path, "%s/%s", q->dir, name);
  rmq_mapped_file *mf = NULL;
  if (q->allocate) {
    /* The next segment is made ahead only where one may be. */
    bool next = segment_fits(q, from + q->file_size);
    rmq_file_name(from + q->file_size, next_name);
    snprintf(next_path, sizeof next_path, "%s/%s", q->dir, next_name);
    mf = q->allocate(q->allocate_ctx, path, from, next ? next_path : NULL, from + q->file_size,
                     q->file_size, err);
  } else if (rmq_mapped_file_open(path, from, q->file_size,
                                  q->defer_dir_sync ? RMQ_MF_CREATE_UNSYNCED : RMQ_MF_CREATE, true,
                                  &mf, err) == RMQ_OK) {
    if (q->defer_dir_sync) atomic_store(&q->dir_unsynced, true);
    /* Sparse: its writer reserves blocks before it writes (rmq_mapped_file_reserve). */
    if (q->pool) rmq_mapped_file_use_pool(mf, q->pool);
    if (q->close_fds) rmq_mapped_file_close_fd(mf);
  }
  if (mf == NULL) return NULL;
  pthread_rwlock_wrlock(&q->lock);
  mf->first_in_queue = q->count == 0;
  int rc = mfq_push(q, mf, err);
  /* As in mfq_load: the segment before the new last one is sealed and gives up its descriptor. */
  rmq_mapped_file *sealed = rc == RMQ_OK && q->count > 1 ? q->files[q->count - 2] : NULL;
  if (sealed) rmq_mapped_file_close_fd(sealed);
  pthread_rwlock_unlock(&q->lock);
  if (rc != RMQ_OK) {
    rmq_mapped_file_shutdown(mf, true);
    return NULL;
  }
  return mf;
}

rmq_mapped_file *rmq_mfq_last_or_create(rmq_mapped_file_queue *q, int64_t start_offset,
                                        rmq_err *err) {
  /* The lock guards the array against the clean service's delete_first. */
  pthread_rwlock_rdlock(&q->lock);
  rmq_mapped_file *last = q->count > 0 ? q->files[q->count - 1] : NULL;
  pthread_rwlock_unlock(&q->lock);
  if (last && !rmq_mapped_file_is_full(last)) return last;
  /* A negative start is kept as it is, for mfq_create to refuse (rounding would make it 0). */
  int64_t from = last               ? last->file_from_offset + q->file_size
                 : start_offset < 0 ? start_offset
                                    : start_offset - start_offset % q->file_size;
  return mfq_create(q, from, err);
}

int64_t rmq_mfq_min_offset(rmq_mapped_file_queue *q) {
  rmq_mapped_file *mf = rmq_mfq_first(q);
  if (!mf) return 0;
  int64_t off = mf->file_from_offset;
  rmq_mapped_file_release(mf);
  return off;
}

/*
** The end of the data: start + position of the last file that has any. A
** read-only queue keeps the files past its recovered end, at position 0
** (it deletes nothing); a writer's newly rolled file is at 0 only while the
** one before it is full, which ends where the new one starts. Files leave
** the array only under the write lock, so they stay valid here.
*/
static int64_t mfq_end(rmq_mapped_file_queue *q, bool wrote) {
  int64_t end = 0;
  pthread_rwlock_rdlock(&q->lock);
  for (int i = q->count - 1; i >= 0; i--) {
    rmq_mapped_file *mf = q->files[i];
    int32_t pos = wrote ? rmq_mapped_file_wrote(mf) : rmq_mapped_file_read_position(mf);
    end = mf->file_from_offset + pos;
    if (pos > 0) break;
  }
  pthread_rwlock_unlock(&q->lock);
  return end;
}

int64_t rmq_mfq_max_offset(rmq_mapped_file_queue *q) { return mfq_end(q, false); }
int64_t rmq_mfq_max_wrote(rmq_mapped_file_queue *q) { return mfq_end(q, true); }

/* The held file at `where`, or the first file when where is 0 (MFQ flush). */
static rmq_mapped_file *mfq_at(rmq_mapped_file_queue *q, int64_t where) {
  rmq_mapped_file *mf = rmq_mfq_find(q, where);
  return mf || where != 0 ? mf : rmq_mfq_first(q);
}

int rmq_mfq_flush(rmq_mapped_file_queue *q, int least_pages, bool *flushed_something,
                  rmq_err *err) {
  *flushed_something = false;
  pthread_mutex_lock(&q->flush_mu);
  int64_t where = atomic_load(&q->flushed_where);
  rmq_mapped_file *mf = mfq_at(q, where);
  int rc = RMQ_OK;
  if (mf) {
    int64_t ts = atomic_load(&mf->store_timestamp);
    rc = rmq_mapped_file_flush(mf, least_pages, err);
    int64_t now_where = mf->file_from_offset + atomic_load(&mf->flushed_position);
    if (rc == RMQ_OK && now_where > where) {
      *flushed_something = true;
      atomic_store(&q->flushed_where, now_where);
      if (least_pages == 0 && ts > 0) atomic_store(&q->store_timestamp, ts);
    }
    rmq_mapped_file_release(mf);
  }
  pthread_mutex_unlock(&q->flush_mu);
  return rc;
}

bool rmq_mfq_flush_due(rmq_mapped_file_queue *q, int least_pages, rmq_mfq_flush_plan *plan) {
  plan->mf = mfq_at(q, atomic_load(&q->flushed_where));
  if (plan->mf && rmq_mapped_file_flush_due(plan->mf, least_pages, &plan->target)) return true;
  if (plan->mf) rmq_mapped_file_release(plan->mf);
  return false;
}

void rmq_mfq_flushed_by_sync(rmq_mapped_file_queue *q, rmq_mfq_flush_plan *plan) {
  pthread_mutex_lock(&q->flush_mu);
  rmq_mapped_file_flushed_to(plan->mf, plan->target);
  int64_t now_where = plan->mf->file_from_offset + plan->target;
  if (now_where > atomic_load(&q->flushed_where)) atomic_store(&q->flushed_where, now_where);
  pthread_mutex_unlock(&q->flush_mu);
  rmq_mapped_file_release(plan->mf);
}

int rmq_mfq_commit(rmq_mapped_file_queue *q, int least_pages, bool *committed_something,
                   rmq_err *err) {
  *committed_something = false;
  pthread_mutex_lock(&q->flush_mu);
  int64_t where = atomic_load(&q->committed_where);
  rmq_mapped_file *mf = mfq_at(q, where);
  int rc = RMQ_OK;
  if (mf) {
    rc = rmq_mapped_file_commit(mf, least_pages, err);
    int64_t now_where = mf->file_from_offset + atomic_load(&mf->committed_position);
    if (rc == RMQ_OK && now_where > where) {
      *committed_something = true;
      atomic_store(&q->committed_where, now_where);
    }
    rmq_mapped_file_release(mf);
  }
  pthread_mutex_unlock(&q->flush_mu);
  return rc;
}

void rmq_mfq_truncate_dirty(rmq_mapped_file_queue *q, int64_t offset) {
  pthread_rwlock_wrlock(&q->lock);
  int keep = 0;
  for (int i = 0; i < q->count; i++) {
    rmq_mapped_file *mf = q->files[i];
    if (mf->file_from_offset + q->file_size <= offset) {
      keep = i + 1;
    } else if (mf->file_from_offset <= offset) {
      rmq_mapped_file_set_positions(mf, (int32_t)(offset % q->file_size));
      keep = i + 1;
    } else if (q->writable) {
      rmq_mapped_file_delete_now(mf);
    } else {
      /* A reader must not delete: the files past the end just read as empty. */
      rmq_mapped_file_set_positions(mf, 0);
      keep = i + 1;
    }
  }
  q->count = keep;
  pthread_rwlock_unlock(&q->lock);
  atomic_store(&q->flushed_where, offset);
  atomic_store(&q->committed_where, offset);
}

bool rmq_mfq_delete_first(rmq_mapped_file_queue *q) {
  pthread_rwlock_wrlock(&q->lock);
  bool done = q->count > 1;
  if (done) {
    if (q->retired) {
      rmq_retired_add(q->retired, q->files[0]);
    } else {
      rmq_mapped_file_shutdown(q->files[0], true);
    }
    memmove(q->files, q->files + 1, (size_t)(q->count - 1) * sizeof *q->files);
    q->count--;
  }
  pthread_rwlock_unlock(&q->lock);
  return done;
}

/* ------------------------------------------------------------ following */

/* Does the segment's name still hold the file it mapped? */
static bool same_file(const rmq_mapped_file *mf) {
  struct stat st;
  return stat(mf->path, &st) == 0 && st.st_dev == mf->dev && st.st_ino == mf->ino;
}

/*
** Open segment `name` after the queue's last one when it follows it and is
** sized (a writer creates a file at 0 bytes, then sizes it); *stop when it
** ends what can be followed now. The first segment of an empty queue gives
** the segment size.
*/
static int follow_one(rmq_mapped_file_queue *q, const char *name, int *added, bool *stop,
                      rmq_err *err) {
  char path[4096];
  int64_t from;
  snprintf(path, sizeof path, "%s/%s", q->dir, name);
  rmq_file_name_parse(name, &from);
  pthread_rwlock_rdlock(&q->lock);
  int count = q->count;
  int64_t expect = count ? q->files[count - 1]->file_from_offset + q->file_size : from;
  pthread_rwlock_unlock(&q->lock);
  if (from < expect) return RMQ_OK;
  int64_t len = file_length(path);
  int32_t size = count ? q->file_size : (len > 0 && len <= INT32_MAX ? (int32_t)len : 0);
  *stop = from != expect || len <= 0 || size == 0 || from < 0 || from > RMQ_MAX_LOG_OFFSET - size;
  if (*stop) return RMQ_OK;
  rmq_mapped_file *mf;
  int rc = rmq_mapped_file_open(path, from, size, RMQ_MF_EXISTING, false, &mf, err);
  if (rc != RMQ_OK) return rc;
  pthread_rwlock_wrlock(&q->lock);
  if (q->count == 0) q->file_size = size;
  rc = mfq_push(q, mf, err);
  pthread_rwlock_unlock(&q->lock);
  if (rc != RMQ_OK) {
    rmq_mapped_file_shutdown(mf, false);
    return rc;
  }
  (*added)++;
  return RMQ_OK;
}

int rmq_mfq_follow_new(rmq_mapped_file_queue *q, int *added, rmq_err *err) {
  char **names;
  int n;
  *added = 0;
  int rc = list_segments(q->dir, &names, &n, err);
  bool stop = false;
  for (int i = 0; rc == RMQ_OK && !stop && i < n; i++)
    rc = follow_one(q, names[i], added, &stop, err);
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  return rc;
}

int rmq_mfq_follow_deleted(rmq_mapped_file_queue *q, bool identity, int *dropped, rmq_err *err) {
  char **names;
  int n;
  *dropped = 0;
  int rc = list_segments(q->dir, &names, &n, err);
  if (rc != RMQ_OK) return rc;
  int64_t first = INT64_MAX;
  if (n > 0) rmq_file_name_parse(names[0], &first);
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  pthread_rwlock_wrlock(&q->lock);
  int gone = 0, keep_to = q->count;
  while (gone < q->count && q->files[gone]->file_from_offset < first) gone++;
  for (int i = gone; identity && i < keep_to; i++) {
    if (!same_file(q->files[i])) keep_to = i;
  }
  for (int i = q->count - 1; i >= keep_to; i--) rmq_retired_let_go(q->retired, q->files[i]);
  for (int i = 0; i < gone && i < keep_to; i++) rmq_retired_let_go(q->retired, q->files[i]);
  int kept = keep_to > gone ? keep_to - gone : 0;
  if (kept > 0) memmove(q->files, q->files + gone, (size_t)kept * sizeof *q->files);
  *dropped = q->count - kept;
  q->count = kept;
  pthread_rwlock_unlock(&q->lock);
  return RMQ_OK;
}

/* ------------------------------------------------------ shared appends */

void rmq_mfq_advance_to(rmq_mapped_file_queue *q, int64_t from, int64_t to) {
  pthread_rwlock_rdlock(&q->lock);
  /* The files follow one another: start at the one holding from. */
  int64_t first = q->count ? (from - q->files[0]->file_from_offset) / q->file_size : 0;
  for (int i = first > 0 ? (int)first : 0; i < q->count; i++) {
    rmq_mapped_file *mf = q->files[i];
    if (mf->file_from_offset >= to) break;
    if (mf->file_from_offset + mf->file_size <= from) continue;
    int64_t pos = to - mf->file_from_offset;
    rmq_mapped_file_advance_to(mf, (int32_t)(pos < mf->file_size ? pos : mf->file_size));
  }
  pthread_rwlock_unlock(&q->lock);
}

/* Shut the first keep_from files down (no unlink: they are the store's). */
static void drop_leading(rmq_mapped_file_queue *q, int keep_from) {
  if (keep_from == 0) return;
  for (int i = 0; i < keep_from; i++) rmq_mapped_file_shutdown(q->files[i], false);
  memmove(q->files, q->files + keep_from, (size_t)(q->count - keep_from) * sizeof *q->files);
  q->count -= keep_from;
}

static int open_segment(rmq_mapped_file_queue *q, int64_t from, rmq_err *err) {
  char path[4096], name[21];
  rmq_file_name(from, name);
  snprintf(path, sizeof path, "%s/%s", q->dir, name);
  if (access(path, F_OK) != 0) {
    return rmq_err_set(err, RMQ_ENOTFOUND, "no segment %s: %s", path, strerror(errno));
  }
  rmq_mapped_file *mf;
  int rc = rmq_mapped_file_open(path, from, q->file_size, RMQ_MF_EXISTING, true, &mf, err);
  if (rc == RMQ_OK && (rc = mfq_push(q, mf, err)) != RMQ_OK) rmq_mapped_file_shutdown(mf, false);
  return rc;
}

int rmq_mfq_keep_range(rmq_mapped_file_queue *q, int64_t from, int64_t to, rmq_err *err) {
  int64_t first = from - from % q->file_size, last = to - to % q->file_size;
  pthread_rwlock_wrlock(&q->lock);
  int keep = 0;
  while (keep < q->count && q->files[keep]->file_from_offset < first) keep++;
  /* Opened in order from the first segment wanted: files kept must start there. */
  if (keep < q->count && q->files[keep]->file_from_offset != first) keep = q->count;
  drop_leading(q, keep);
  int64_t next = q->count ? q->files[q->count - 1]->file_from_offset + q->file_size : first;
  int rc = RMQ_OK;
  for (; rc == RMQ_OK && next <= last; next += q->file_size) rc = open_segment(q, next, err);
  pthread_rwlock_unlock(&q->lock);
  return rc;
}

int rmq_mfq_sync_dir(rmq_mapped_file_queue *q, rmq_err *err) {
  if (!atomic_exchange(&q->dir_unsynced, false)) return RMQ_OK;
  int rc = rmq_mapped_file_sync_dir(q->dir, err);
  if (rc != RMQ_OK) atomic_store(&q->dir_unsynced, true);
  return rc;
}
