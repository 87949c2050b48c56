/*
** mapped_file.c: MappedFile and MappedFileQueue (see mapped_file.h).
*/
#include "mapped_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "allocate.h"
#include "file_name.h"
#include "io.h"
#include "message.h"

/* ------------------------------------------------------------ MappedFile */

/*
** A new segment's name must survive a power loss as well as its bytes:
** fdatasync of the file does not persist the directory entry, so the
** directory is synced once when a segment is created.
*/
static int sync_parent_dir(const char *path, rmq_err *err) {
  char dir[4096];
  const char *slash = strrchr(path, '/');
  size_t n = slash ? (size_t)(slash - path) : 0;
  if (n == 0 || n >= sizeof dir) return RMQ_OK;
  memcpy(dir, path, n);
  dir[n] = '\0';
  int fd = rmq_io_open(dir, O_RDONLY | O_DIRECTORY, 0);
  int rc = fd >= 0 && rmq_io_fsync(fd) == 0 ? RMQ_OK
         : rmq_err_set(err, RMQ_EIO, "cannot sync directory %s: %s", dir, strerror(errno));
  if (fd >= 0) close(fd);
  return rc;
}

int rmq_mapped_file_open(const char *path, int64_t from, int32_t file_size, bool create,
                         bool writable, rmq_mapped_file **out, rmq_err *err) {
  *out = NULL;
  int flags = writable ? O_RDWR | (create ? O_CREAT : 0) : O_RDONLY;
  int fd = rmq_io_open(path, flags, 0644);
  if (fd < 0) {
    return rmq_err_set(err, errno == ENOENT ? RMQ_ENOTFOUND : RMQ_EIO, "cannot open %s: %s",
                       path, strerror(errno));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return rmq_err_set(err, RMQ_EIO, "cannot stat %s: %s", path, strerror(errno));
  }
  /* An empty file is a creation cut short by a crash: it becomes an empty segment. */
  if (st.st_size == 0 && writable && rmq_io_ftruncate(fd, file_size) != 0) {
    int e = errno;
    close(fd);
    return rmq_err_set(err, RMQ_EIO, "cannot size %s to %d bytes: %s", path, file_size,
                       strerror(e));
  } else if (st.st_size != file_size && !(st.st_size == 0 && writable)) {
    close(fd);
    return rmq_err_set(err, RMQ_ECORRUPT,
                       "%s is %lld bytes but the segment size is %d (check the size setting)",
                       path, (long long)st.st_size, file_size);
  }
  if (st.st_size == 0 && writable && sync_parent_dir(path, err) != RMQ_OK) {
    close(fd);
    return err->code;
  }
  void *map = rmq_io_mmap(fd, (size_t)file_size, writable);
  if (map == MAP_FAILED) {
    int e = errno;
    close(fd);
    return rmq_err_set(err, RMQ_EIO, "cannot map %s: %s", path, strerror(e));
  }
  rmq_mapped_file *mf = calloc(1, sizeof *mf);
  char *p = strdup(path);
  if (!mf || !p) {
    free(mf);
    free(p);
    munmap(map, (size_t)file_size);
    close(fd);
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory opening %s", path);
  }
  mf->path = p;
  mf->file_from_offset = from;
  mf->file_size = file_size;
  mf->fd = fd;
  mf->writable = writable;
  mf->mapped = map;
  atomic_init(&mf->refcount, 1);
  atomic_init(&mf->available, true);
  pthread_mutex_init(&mf->flush_mu, NULL);
  *out = mf;
  return RMQ_OK;
}

void rmq_mapped_file_use_pool(rmq_mapped_file *mf, rmq_transient_store_pool *pool) {
  mf->write_buffer = rmq_transient_store_pool_borrow(pool);
  mf->transient = mf->write_buffer != NULL;
  if (mf->write_buffer) mf->pool = pool;
}

static void mapped_file_return_buffer(rmq_mapped_file *mf) {
  if (mf->write_buffer) rmq_transient_store_pool_return(mf->pool, mf->write_buffer);
  mf->write_buffer = NULL;
}

static void mapped_file_free(rmq_mapped_file *mf) {
  munmap(mf->mapped, (size_t)mf->file_size);
  close(mf->fd);
  if (atomic_load(&mf->unlink_on_free)) rmq_io_unlink(mf->path);
  mapped_file_return_buffer(mf);
  pthread_mutex_destroy(&mf->flush_mu);
  free(mf->path);
  free(mf);
}

bool rmq_mapped_file_hold(rmq_mapped_file *mf) {
  if (!atomic_load_explicit(&mf->available, memory_order_acquire)) return false;
  atomic_fetch_add_explicit(&mf->refcount, 1, memory_order_acq_rel);
  return true;
}

void rmq_mapped_file_release(rmq_mapped_file *mf) {
  if (atomic_fetch_sub_explicit(&mf->refcount, 1, memory_order_acq_rel) == 1) {
    mapped_file_free(mf);
  }
}

void rmq_mapped_file_shutdown(rmq_mapped_file *mf, bool unlink_file) {
  if (unlink_file) atomic_store(&mf->unlink_on_free, true);
  if (atomic_exchange(&mf->available, false)) rmq_mapped_file_release(mf);
}

bool rmq_mapped_file_append(rmq_mapped_file *mf, const void *data, int32_t len) {
  int32_t pos = rmq_mapped_file_wrote(mf);
  if (len > mf->file_size - pos) return false;
  memcpy(rmq_mapped_file_write_base(mf) + pos, data, (size_t)len);
  rmq_mapped_file_advance(mf, len);
  return true;
}

void rmq_mapped_file_set_positions(rmq_mapped_file *mf, int32_t pos) {
  atomic_store(&mf->wrote_position, pos);
  atomic_store(&mf->committed_position, pos);
  atomic_store(&mf->flushed_position, pos);
}

/* MF isAbleToFlush / isAbleToCommit: the page rule of spec §9.1. */
static bool able_to(int32_t done, int32_t target, int32_t file_size, int least_pages) {
  if (target == file_size && done < target) return true;
  if (least_pages > 0) {
    return target / RMQ_OS_PAGE_SIZE - done / RMQ_OS_PAGE_SIZE >= least_pages;
  }
  return target > done;
}

int rmq_mapped_file_flush(rmq_mapped_file *mf, int least_pages, rmq_err *err) {
  int rc = RMQ_OK;
  pthread_mutex_lock(&mf->flush_mu);
  int32_t flushed = atomic_load(&mf->flushed_position);
  int32_t target = rmq_mapped_file_read_position(mf);
  if (able_to(flushed, target, mf->file_size, least_pages)) {
    int32_t start = flushed - flushed % RMQ_OS_PAGE_SIZE;
    int sys = mf->transient ? rmq_io_fsync(mf->fd)
                               : rmq_io_msync(mf->mapped + start, (size_t)(target - start));
    if (sys != 0) {
      rc = rmq_err_set(err, RMQ_EIO, "cannot flush %s up to position %d: %s", mf->path, target,
                       strerror(errno));
    } else {
      atomic_store_explicit(&mf->flushed_position, target, memory_order_release);
    }
  }
  pthread_mutex_unlock(&mf->flush_mu);
  return rc;
}

int rmq_mapped_file_commit(rmq_mapped_file *mf, int least_pages, rmq_err *err) {
  if (!mf->transient) return RMQ_OK;
  int rc = RMQ_OK;
  pthread_mutex_lock(&mf->flush_mu);
  int32_t committed = atomic_load(&mf->committed_position);
  int32_t wrote = rmq_mapped_file_wrote(mf);
  if (able_to(committed, wrote, mf->file_size, least_pages)) {
    size_t len = (size_t)(wrote - committed);
    if (rmq_io_pwrite(mf->fd, mf->write_buffer + committed, len, committed) != (ssize_t)len) {
      rc = rmq_err_set(err, RMQ_EIO, "cannot commit %s bytes %d..%d: %s", mf->path, committed,
                       wrote, errno ? strerror(errno) : "short write");
    } else {
      atomic_store_explicit(&mf->committed_position, wrote, memory_order_release);
      if (wrote == mf->file_size) mapped_file_return_buffer(mf);
    }
  }
  pthread_mutex_unlock(&mf->flush_mu);
  return rc;
}

void rmq_mapped_file_warm(rmq_mapped_file *mf, bool lock_memory) {
  if (!mf->writable) return;
  /* A write to each page makes the kernel allocate it now, not on the hot path. */
  for (int32_t i = 0; i < mf->file_size; i += RMQ_OS_PAGE_SIZE) mf->mapped[i] = 0;
  if (lock_memory) {
    mlock(mf->mapped, (size_t)mf->file_size);
  }
}

int rmq_mapped_file_reserve(rmq_mapped_file *mf, int32_t upto, rmq_err *err) {
  int32_t reserved = atomic_load_explicit(&mf->reserved_position, memory_order_acquire);
  if (upto <= reserved) return RMQ_OK;
  int64_t end = (int64_t)upto + RMQ_RESERVE_STEP;
  if (end > mf->file_size) end = mf->file_size;
  /* The writer and the pre-fault thread both reserve; allocating a range twice is harmless. */
  if (rmq_io_fallocate(mf->fd, reserved, end - reserved) != 0 && errno != EOPNOTSUPP) {
    return rmq_err_set(err, errno == ENOSPC || errno == EDQUOT ? RMQ_EFULL : RMQ_EIO,
                       "cannot allocate disk space for %s bytes %d..%lld: %s", mf->path,
                       reserved, (long long)end, strerror(errno));
  }
  while (reserved < end && !atomic_compare_exchange_weak(&mf->reserved_position, &reserved,
                                                         (int32_t)end)) {
  }
  return RMQ_OK;
}

void rmq_mapped_file_populate(rmq_mapped_file *mf, int32_t from, int32_t len) {
  if (mf->writable && !mf->transient) {
    int32_t start = from - from % RMQ_OS_PAGE_SIZE;
    madvise(mf->mapped + start, (size_t)(from + len - start), MADV_POPULATE_WRITE);
  }
}

/* A write this large goes through pwrite (rmq_mapped_file_write), */
#define PWRITE_MIN (256 << 10)
/*
** and in pieces no larger than this: the kernel backs one write with page
** cache folios as large as the write, up to 2 MiB, and on a virtual machine
** whose host reclaims free memory (virtio-balloon free-page reporting) a
** 2 MiB folio is what it has taken back: 3.6 us per KiB against 0.22.
*/
#define PWRITE_PIECE (256 << 10)

static const uint8_t zeros[PWRITE_PIECE];

static void mapped_file_write_failed(rmq_mapped_file *mf, int64_t at, int e) {
  char why[256];
  snprintf(why, sizeof why, "cannot zero the bytes of a failed write at %lld of %s: %s",
           (long long)at, mf->path, e ? strerror(e) : "short write");
  if (mf->write_failed) mf->write_failed(mf->write_failed_ctx, why);
}

void rmq_mapped_file_zero(rmq_mapped_file *mf, int32_t at, size_t len) {
  if (mf->write_buffer) {
    memset(mf->write_buffer + at, 0, len);
    return;
  }
  /* By pwrite: through the mapping, a page without disk blocks would be SIGBUS. */
  for (size_t done = 0; done < len; done += sizeof zeros) {
    size_t n = len - done < sizeof zeros ? len - done : sizeof zeros;
    errno = 0; /* a short write sets none */
    if (rmq_io_pwrite(mf->fd, zeros, n, at + (off_t)done) != (ssize_t)n) {
      mapped_file_write_failed(mf, at + (int64_t)done, errno);
      return;
    }
  }
}

/*
** The claim and a pre-fill each publish before they look at the other
** (sequentially consistent), so at least one sees the other: the pre-fill
** then gives up, or the writer waits for it to end.
*/
int32_t rmq_mapped_file_claim(rmq_mapped_file *mf, int32_t upto) {
  /* Read first: a pre-fill that starts after the claim begins above it. */
  int32_t ready = atomic_load(&mf->prefilled_position);
  atomic_store(&mf->write_claim, upto);
  for (;;) {
    int64_t busy = atomic_load(&mf->prefilling);
    if (busy == 0 || (int32_t)(busy >> 32) >= upto) return ready;
    sched_yield();
  }
}

int32_t rmq_mapped_file_prefill(rmq_mapped_file *mf, int32_t from, int32_t to) {
  while (from < to) {
    int32_t end = to - from < PWRITE_PIECE ? to : from + PWRITE_PIECE;
    atomic_store(&mf->prefilling, (int64_t)from << 32 | end);
    bool ok = atomic_load(&mf->write_claim) <= from &&
              rmq_io_pwrite(mf->fd, zeros, (size_t)(end - from), from) == end - from;
    atomic_store(&mf->prefilling, 0);
    if (!ok) break;
    from = end;
  }
  return from;
}

int rmq_mapped_file_write(rmq_mapped_file *mf, int32_t at, const void *data, size_t len,
                          rmq_err *err) {
  if (mf->write_buffer || len < PWRITE_MIN) {
    memcpy(rmq_mapped_file_write_base(mf) + at, data, len);
    return RMQ_OK;
  }
  size_t done = 0;
  while (done < len) {
    size_t n = len - done < PWRITE_PIECE ? len - done : PWRITE_PIECE;
    if (rmq_io_pwrite(mf->fd, (const uint8_t *)data + done, n, at + (off_t)done) != (ssize_t)n) {
      break;
    }
    done += n;
  }
  if (done == len) return RMQ_OK;
  int e = errno;
  rmq_mapped_file_zero(mf, at, len);
  return rmq_err_set(err, e == ENOSPC || e == EDQUOT ? RMQ_EFULL : RMQ_EIO,
                     "cannot write %zu bytes at %d of %s: %s", len, at, mf->path, strerror(e));
}

void rmq_mapped_file_will_read(rmq_mapped_file *mf) {
  madvise(mf->mapped, (size_t)mf->file_size, MADV_SEQUENTIAL);
  madvise(mf->mapped, (size_t)mf->file_size, MADV_WILLNEED);
}

/* ------------------------------------------------------- MappedFileQueue */

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

static int mfq_load_one(rmq_mapped_file_queue *q, const char *name, rmq_err *err) {
  char path[4096];
  int64_t from;
  snprintf(path, sizeof path, "%s/%s", q->dir, name);
  /* A reader skips a file whose creation a crash cut short (a writer sizes it). */
  if (!q->writable && file_length(path) == 0) return RMQ_OK;
  rmq_file_name_parse(name, &from);
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
  int rc = rmq_mapped_file_open(path, from, q->file_size, false, q->writable, &mf, err);
  if (rc != RMQ_OK) return rc;
  rmq_mapped_file_set_positions(mf, q->file_size);
  rc = mfq_push(q, mf, err);
  if (rc != RMQ_OK) rmq_mapped_file_shutdown(mf, false);
  return rc;
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
  for (int i = 0; rc == RMQ_OK && i < n; i++) rc = mfq_load_one(q, names[i], err);
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
  rmq_file_name(from, name);
  snprintf(path, sizeof path, "%s/%s", q->dir, name);
  rmq_mapped_file *mf = NULL;
  if (q->allocate) {
    rmq_file_name(from + q->file_size, next_name);
    snprintf(next_path, sizeof next_path, "%s/%s", q->dir, next_name);
    mf = rmq_allocate_mapped_file(q->allocate, path, from, next_path, from + q->file_size,
                                  q->file_size, err);
  } else if (rmq_mapped_file_open(path, from, q->file_size, true, true, &mf, err) == RMQ_OK) {
    if (q->pool) rmq_mapped_file_use_pool(mf, q->pool);
    /* Reserved whole: a consume queue is written by the dispatcher, which must not SIGBUS. */
    if (rmq_mapped_file_reserve(mf, mf->file_size, err) != RMQ_OK) {
      rmq_mapped_file_shutdown(mf, true);
      return NULL;
    }
    rmq_mapped_file_populate(mf, 0, mf->file_size);
  }
  if (mf == NULL) return NULL;
  pthread_rwlock_wrlock(&q->lock);
  mf->first_in_queue = q->count == 0;
  int rc = mfq_push(q, mf, err);
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
  int64_t from = last ? last->file_from_offset + q->file_size
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
      rmq_mapped_file_shutdown(mf, true);
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
    rmq_mapped_file_shutdown(q->files[0], true);
    memmove(q->files, q->files + 1, (size_t)(q->count - 1) * sizeof *q->files);
    q->count--;
  }
  pthread_rwlock_unlock(&q->lock);
  return done;
}
