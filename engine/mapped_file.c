/*
** mapped_file.c: MappedFile (see mapped_file.h).
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

#include "io.h"
#include "transient_store_pool.h"

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
  return rmq_mapped_file_sync_dir(dir, err);
}

int rmq_mapped_file_sync_dir(const char *dir, rmq_err *err) {
  if (rmq_io_fsync_dir(dir) == 0) return RMQ_OK;
  return rmq_err_set(err, RMQ_EIO, "cannot sync directory %s: %s", dir, strerror(errno));
}

const char *rmq_file_type(mode_t m) {
  return S_ISFIFO(m)   ? "a FIFO"
         : S_ISDIR(m)  ? "a directory"
         : S_ISSOCK(m) ? "a socket"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
                       : "not a regular file";
}

bool rmq_dirent_is_dir(const char *path, unsigned char d_type) {
  struct stat st;
  if (d_type != DT_UNKNOWN && d_type != DT_LNK) return d_type == DT_DIR;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* How many mappings this process has (lines of /proc/self/maps), or -1. */
static long mapping_count(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  long n = 0;
  for (int c; (c = getc(f)) != EOF;) n += c == '\n';
  fclose(f);
  return n;
}

static long max_map_count(void) {
  FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
  long n = -1;
  if (f && fscanf(f, "%ld", &n) != 1) n = -1;
  if (f) fclose(f);
  return n;
}

int rmq_map_failed(rmq_err *err, const char *path, int e) {
  long have = e == ENOMEM ? mapping_count() : -1, max = have >= 0 ? max_map_count() : -1;
  /* A store maps each consume-queue file: tens of thousands of queues reach the kernel's limit. */
  if (max > 0 && have >= max - 16) {
    return rmq_err_set(err, RMQ_EIO,
                       "cannot map %s: this process has %ld mappings, the most vm.max_map_count "
                       "(%ld) allows, and a store maps each consume-queue file: raise it (sysctl "
                       "-w vm.max_map_count=655360, as RocketMQ's os.sh does)",
                       path, have, max);
  }
  return rmq_err_set(err, RMQ_EIO, "cannot map %s: %s", path, strerror(e));
}

int rmq_mapped_file_open(const char *path, int64_t from, int32_t file_size, rmq_mf_create create,
                         bool writable, rmq_mapped_file **out, rmq_err *err) {
  *out = NULL;
  int flags = writable ? O_RDWR | (create != RMQ_MF_EXISTING ? O_CREAT : 0) : O_RDONLY;
  int fd = rmq_io_open(path, flags, 0644);
  if (fd < 0) {
    return rmq_err_set(err, errno == ENOENT ? RMQ_ENOTFOUND : RMQ_EIO, "cannot open %s: %s", path,
                       strerror(errno));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return rmq_err_set(err, RMQ_EIO, "cannot stat %s: %s", path, strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return rmq_err_set(err, RMQ_ECORRUPT, "%s is %s, not a regular file", path,
                       rmq_file_type(st.st_mode));
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
                       "%s is %lld bytes but the segment size is %d (check the size setting)", path,
                       (long long)st.st_size, file_size);
  }
  if (st.st_size == 0 && writable && create != RMQ_MF_CREATE_UNSYNCED &&
      sync_parent_dir(path, err) != RMQ_OK) {
    close(fd);
    return err->code;
  }
  void *map = rmq_io_mmap(fd, (size_t)file_size, writable);
  if (map == MAP_FAILED) {
    int e = errno;
    close(fd);
    return rmq_map_failed(err, path, e);
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
  mf->dev = st.st_dev;
  mf->ino = st.st_ino;
  mf->file_from_offset = from;
  mf->file_size = file_size;
  mf->fd = fd;
  pthread_mutex_init(&mf->fd_mu, NULL);
  /* A reader reads the mapping only: the mapping outlives the descriptor. */
  if (!writable) rmq_mapped_file_close_fd(mf);
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
  mf->buffer_from = 0;
  mf->buffer_size = mf->file_size;
  mf->transient = mf->write_buffer != NULL;
  if (mf->write_buffer) mf->pool = pool;
}

static void mapped_file_return_buffer(rmq_mapped_file *mf) {
  if (mf->write_buffer && mf->pool) rmq_transient_store_pool_return(mf->pool, mf->write_buffer);
  mf->write_buffer = NULL;
}

void rmq_mapped_file_window_attach(rmq_mapped_file *mf, uint8_t *window, int32_t size) {
  pthread_mutex_lock(&mf->flush_mu);
  /* What was written before reached the file as it was written. */
  int32_t wrote = rmq_mapped_file_wrote(mf);
  if (atomic_load(&mf->committed_position) < wrote) {
    atomic_store_explicit(&mf->committed_position, wrote, memory_order_release);
  }
  mf->write_buffer = window;
  mf->buffer_from = wrote;
  mf->buffer_size = size;
  mf->transient = true;
  pthread_mutex_unlock(&mf->flush_mu);
}

int rmq_mapped_file_window_room(rmq_mapped_file *mf, int32_t need, rmq_err *err) {
  int32_t wrote = rmq_mapped_file_wrote(mf);
  if ((int64_t)wrote + need <= (int64_t)mf->buffer_from + mf->buffer_size) return RMQ_OK;
  int rc = rmq_mapped_file_commit(mf, 0, err);
  if (rc != RMQ_OK) return rc;
  pthread_mutex_lock(&mf->flush_mu);
  mf->buffer_from = wrote;
  pthread_mutex_unlock(&mf->flush_mu);
  return RMQ_OK;
}

int rmq_mapped_file_window_detach(rmq_mapped_file *mf, rmq_err *err) {
  int rc = rmq_mapped_file_commit(mf, 0, err);
  if (rc != RMQ_OK) return rc;
  pthread_mutex_lock(&mf->flush_mu);
  /* Committed to the write position: readers may look at either. */
  mf->write_buffer = NULL;
  mf->transient = false;
  pthread_mutex_unlock(&mf->flush_mu);
  return RMQ_OK;
}

/*
** Closed at once, or by the last fd_put when a flush or a write still uses
** it: the writer closes a sealed segment's descriptor while the flush
** service may be forcing it, and a closed number can be reused at once.
*/
void rmq_mapped_file_close_fd(rmq_mapped_file *mf) {
  pthread_mutex_lock(&mf->fd_mu);
  if (mf->fd >= 0 && mf->fd_users > 0) {
    mf->fd_close_wanted = true;
  } else if (mf->fd >= 0) {
    close(mf->fd);
    mf->fd = -1;
  }
  pthread_mutex_unlock(&mf->fd_mu);
}

/*
** The descriptor for a write, fallocate or fsync: the file's own, or one
** opened for this call when the file keeps none or is closing it (put it
** back with fd_put). The file's own never comes back once closed, so an
** opened one is never mistaken for it.
*/
static int fd_get(rmq_mapped_file *mf) {
  pthread_mutex_lock(&mf->fd_mu);
  int fd = mf->fd >= 0 && !mf->fd_close_wanted ? mf->fd : -1;
  if (fd >= 0) mf->fd_users++;
  pthread_mutex_unlock(&mf->fd_mu);
  return fd >= 0 ? fd : rmq_io_open(mf->path, mf->writable ? O_RDWR : O_RDONLY, 0);
}

static void fd_put(rmq_mapped_file *mf, int fd) {
  if (fd < 0) return;
  int e = errno; /* the caller may still report the call's errno */
  pthread_mutex_lock(&mf->fd_mu);
  bool own = fd == mf->fd;
  if (own && --mf->fd_users == 0 && mf->fd_close_wanted) {
    close(mf->fd);
    mf->fd = -1;
  }
  pthread_mutex_unlock(&mf->fd_mu);
  if (!own) close(fd);
  errno = e;
}

/* Unlink the file by its name, unless that name is another file's by now. */
static void unlink_own(rmq_mapped_file *mf) {
  struct stat st;
  if (stat(mf->path, &st) == 0 && st.st_dev == mf->dev && st.st_ino == mf->ino) {
    rmq_io_unlink(mf->path);
  }
}

static void mapped_file_free(rmq_mapped_file *mf) {
  munmap(mf->mapped, (size_t)mf->file_size);
  rmq_mapped_file_close_fd(mf);
  if (atomic_load(&mf->unlink_on_free)) unlink_own(mf);
  mapped_file_return_buffer(mf);
  pthread_mutex_destroy(&mf->flush_mu);
  pthread_mutex_destroy(&mf->fd_mu);
  free(mf->path);
  free(mf);
}

bool rmq_mapped_file_hold(rmq_mapped_file *mf) {
  if (!atomic_load_explicit(&mf->available, memory_order_acquire)) return false;
  atomic_fetch_add_explicit(&mf->refcount, 1, memory_order_acq_rel);
  return true;
}

static void retired_collect(rmq_retired_files *r, rmq_mapped_file *mf);

void rmq_mapped_file_release(rmq_mapped_file *mf) {
  /* Read while this hold keeps mf alive: after the decrement the list may free it. */
  rmq_retired_files *r = atomic_load(&mf->retired_in);
  int before = atomic_fetch_sub_explicit(&mf->refcount, 1, memory_order_acq_rel);
  if (before == 1) {
    mapped_file_free(mf);
  } else if (before == 2 && r != NULL) {
    retired_collect(r, mf); /* the last reader let go: only the list holds it */
  }
}

void rmq_mapped_file_shutdown(rmq_mapped_file *mf, bool unlink_file) {
  if (unlink_file) atomic_store(&mf->unlink_on_free, true);
  if (atomic_exchange(&mf->available, false)) rmq_mapped_file_release(mf);
}

void rmq_mapped_file_delete_now(rmq_mapped_file *mf) {
  unlink_own(mf);
  rmq_mapped_file_shutdown(mf, false);
}

void rmq_mapped_file_revoke(rmq_mapped_file *mf) {
  /* Flag first: a reader that copied bytes and then sees the flag clear copied the file's. */
  atomic_store_explicit(&mf->revoked, true, memory_order_release);
  void *zeros = mmap(mf->mapped, (size_t)mf->file_size, PROT_READ,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  (void)zeros; /* on failure the file stays mapped: readers still see the flag */
  if (atomic_exchange(&mf->unlink_on_free, false)) unlink_own(mf);
  rmq_mapped_file_close_fd(mf);
}

bool rmq_mapped_file_revoked(const rmq_mapped_file *mf) {
  atomic_thread_fence(memory_order_acquire);
  return atomic_load_explicit(&mf->revoked, memory_order_acquire);
}

/* ------------------------------------------------------------ retired */

void rmq_retired_init(rmq_retired_files *r) {
  memset(r, 0, sizeof *r);
  pthread_mutex_init(&r->mu, NULL);
}

/* Let go of the list's hold (under r->mu): no release may come back to the list. */
static void retired_drop(rmq_mapped_file *mf) {
  atomic_store(&mf->retired_in, NULL);
  rmq_mapped_file_release(mf);
}

void rmq_retired_destroy(rmq_retired_files *r) {
  for (int i = 0; i < r->count; i++) retired_drop(r->items[i].mf);
  free(r->items);
  pthread_mutex_destroy(&r->mu);
  memset(r, 0, sizeof *r);
}

/* Keep watching mf (holding it); false when the list cannot grow. Under r->mu. */
static bool retired_push(rmq_retired_files *r, rmq_mapped_file *mf) {
  if (r->count == r->cap) {
    int cap = r->cap ? r->cap * 2 : 8;
    rmq_retired_file *items = realloc(r->items, (size_t)cap * sizeof *items);
    if (items == NULL) return false;
    r->items = items;
    r->cap = cap;
  }
  if (!rmq_mapped_file_hold(mf)) return false;
  r->items[r->count++] = (rmq_retired_file){mf, rmq_monotonic_ms()};
  atomic_store(&mf->retired_in, r);
  return true;
}

/* Take mf off the list and free it if only the list holds it; mf may be gone already. */
static void retired_collect(rmq_retired_files *r, rmq_mapped_file *mf) {
  pthread_mutex_lock(&r->mu);
  for (int i = 0; i < r->count; i++) {
    if (r->items[i].mf != mf) continue;
    /* Found: the list's hold keeps it alive. */
    if (atomic_load(&mf->refcount) == 1) {
      r->items[i] = r->items[--r->count];
      retired_drop(mf);
    }
    break;
  }
  pthread_mutex_unlock(&r->mu);
}

static void retire(rmq_retired_files *r, rmq_mapped_file *mf, bool unlink_file) {
  pthread_mutex_lock(&r->mu);
  /* Without room to watch it, the file is still unlinked at its last release. */
  retired_push(r, mf);
  pthread_mutex_unlock(&r->mu);
  /* Drops the owner's hold; without readers that leaves the list's, which collects it now. */
  rmq_mapped_file_shutdown(mf, unlink_file);
}

void rmq_retired_add(rmq_retired_files *r, rmq_mapped_file *mf) { retire(r, mf, true); }

void rmq_retired_let_go(rmq_retired_files *r, rmq_mapped_file *mf) {
  if (r) {
    retire(r, mf, false);
  } else {
    rmq_mapped_file_shutdown(mf, false);
  }
}

int rmq_retired_reap(rmq_retired_files *r, int64_t grace_ms) {
  pthread_mutex_lock(&r->mu);
  int64_t now = rmq_monotonic_ms();
  int kept = 0;
  for (int i = 0; i < r->count; i++) {
    rmq_retired_file f = r->items[i];
    /* Only the list holds it, and no new hold can come: it is free to go. */
    bool unread = atomic_load(&f.mf->refcount) == 1;
    if (!unread && now - f.since_ms < grace_ms) {
      r->items[kept++] = f;
      continue;
    }
    if (!unread) rmq_mapped_file_revoke(f.mf);
    retired_drop(f.mf);
  }
  r->count = kept;
  pthread_mutex_unlock(&r->mu);
  return kept;
}

int rmq_retired_count(rmq_retired_files *r) {
  pthread_mutex_lock(&r->mu);
  int n = r->count;
  pthread_mutex_unlock(&r->mu);
  return n;
}

bool rmq_mapped_file_append(rmq_mapped_file *mf, const void *data, int32_t len) {
  int32_t pos = rmq_mapped_file_wrote(mf);
  if (len > mf->file_size - pos) return false;
  memcpy(rmq_mapped_file_write_ptr(mf, pos), data, (size_t)len);
  rmq_mapped_file_advance(mf, len);
  return true;
}

void rmq_mapped_file_set_positions(rmq_mapped_file *mf, int32_t pos) {
  atomic_store(&mf->wrote_position, pos);
  atomic_store(&mf->committed_position, pos);
  atomic_store(&mf->flushed_position, pos);
}

/* MappedFile.isAbleToFlush / isAbleToCommit: how many whole pages make a flush due. */
static bool able_to(int32_t done, int32_t target, int32_t file_size, int least_pages) {
  if (target == file_size && done < target) return true;
  if (least_pages > 0) {
    return target / RMQ_OS_PAGE_SIZE - done / RMQ_OS_PAGE_SIZE >= least_pages;
  }
  return target > done;
}

bool rmq_mapped_file_flush_due(rmq_mapped_file *mf, int least_pages, int32_t *target) {
  *target = rmq_mapped_file_read_position(mf);
  return !mf->transient &&
         able_to(atomic_load(&mf->flushed_position), *target, mf->file_size, least_pages);
}

void rmq_mapped_file_flushed_to(rmq_mapped_file *mf, int32_t target) {
  pthread_mutex_lock(&mf->flush_mu);
  if (target > atomic_load(&mf->flushed_position)) {
    atomic_store_explicit(&mf->flushed_position, target, memory_order_release);
  }
  pthread_mutex_unlock(&mf->flush_mu);
}

int rmq_mapped_file_flush(rmq_mapped_file *mf, int least_pages, rmq_err *err) {
  int rc = RMQ_OK;
  pthread_mutex_lock(&mf->flush_mu);
  int32_t flushed = atomic_load(&mf->flushed_position);
  int32_t target = rmq_mapped_file_read_position(mf);
  if (able_to(flushed, target, mf->file_size, least_pages)) {
    int32_t start = flushed - flushed % RMQ_OS_PAGE_SIZE;
    /* A window's file is forced by range too: pages mapped ahead of it stay out. */
    bool pool = mf->transient && mf->pool;
    int fd = pool ? fd_get(mf) : -1;
    int sys = pool ? (fd < 0 ? -1 : rmq_io_fsync(fd))
                   : rmq_io_msync(mf->mapped + start, (size_t)(target - start));
    fd_put(mf, fd);
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

/*
** pwrite [from, to) of the write buffer, its first 8 bytes last: `from` is
** where a batch starts (the write position is published only at batch
** ends), and a process killed mid-write leaves zeros where its head goes.
*/
static bool commit_range(rmq_mapped_file *mf, int32_t from, int32_t to) {
  const int32_t head = 8;
  size_t len = (size_t)(to - from - head);
  const uint8_t *src = mf->write_buffer + (from - mf->buffer_from);
  int fd = fd_get(mf);
  errno = 0; /* a short write sets none */
  bool ok = fd >= 0 && rmq_io_pwrite(fd, src + head, len, from + head) == (ssize_t)len &&
            rmq_io_pwrite(fd, src, head, from) == head;
  fd_put(mf, fd);
  return ok;
}

int rmq_mapped_file_commit(rmq_mapped_file *mf, int least_pages, rmq_err *err) {
  int rc = RMQ_OK;
  pthread_mutex_lock(&mf->flush_mu);
  int32_t committed = atomic_load(&mf->committed_position);
  int32_t wrote = rmq_mapped_file_wrote(mf);
  if (!mf->write_buffer) {
    /*
    ** MappedFile.commit: a file written without a buffer (the pool had none
    ** left, or past the window) is committed as written, or the queue's
    ** commit would stop at it.
    */
    if (committed < wrote)
      atomic_store_explicit(&mf->committed_position, wrote, memory_order_release);
  } else if (able_to(committed, wrote, mf->file_size, least_pages)) {
    if (!commit_range(mf, committed, wrote)) {
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

/* MappedFile.warmMappedFile's force every flushLeastPagesWhenWarmMapedFile pages (sync flush). */
static int warm_flush(rmq_mapped_file *mf, int32_t from, int32_t to, rmq_err *err) {
  if (rmq_io_msync(mf->mapped + from, (size_t)(to - from)) == 0) return RMQ_OK;
  return rmq_err_set(err, RMQ_EIO, "cannot flush %s bytes %d..%d while warming it: %s", mf->path,
                     from, to, strerror(errno));
}

int rmq_mapped_file_warm(rmq_mapped_file *mf, bool lock_memory, int flush_pages, rmq_err *err) {
  if (!mf->writable) return RMQ_OK;
  /* The pages are written through the mapping: without blocks a full disk is SIGBUS. */
  int rc = rmq_mapped_file_reserve(mf, mf->file_size, err);
  if (rc != RMQ_OK) return rc;
  /* A write to each page makes the kernel allocate it now, not on the hot path. */
  int32_t flushed = 0;
  for (int32_t i = 0; rc == RMQ_OK && i < mf->file_size; i += RMQ_OS_PAGE_SIZE) {
    mf->mapped[i] = 0;
    /* A sync flush would otherwise meet a whole segment of dirty zeros at once. */
    if (flush_pages > 0 && (i - flushed) / RMQ_OS_PAGE_SIZE >= flush_pages) {
      rc = warm_flush(mf, flushed, i, err);
      flushed = i;
    }
  }
  if (rc == RMQ_OK && flush_pages > 0) rc = warm_flush(mf, flushed, mf->file_size, err);
  /* Best effort, as RocketMQ's: RLIMIT_MEMLOCK may forbid it. */
  if (rc == RMQ_OK && lock_memory) mlock(mf->mapped, (size_t)mf->file_size);
  return rc;
}

void rmq_mapped_file_unlock(rmq_mapped_file *mf) { munlock(mf->mapped, (size_t)mf->file_size); }

int rmq_mapped_file_reserve(rmq_mapped_file *mf, int32_t upto, rmq_err *err) {
  return rmq_mapped_file_reserve_ahead(mf, upto, RMQ_RESERVE_STEP, err);
}

int rmq_mapped_file_reserve_ahead(rmq_mapped_file *mf, int32_t upto, int32_t ahead, rmq_err *err) {
  int32_t reserved = atomic_load_explicit(&mf->reserved_position, memory_order_acquire);
  if (upto <= reserved) return RMQ_OK;
  int64_t end = (int64_t)upto + ahead;
  if (end > mf->file_size) end = mf->file_size;
  /* The writer and the pre-fault thread both reserve; allocating a range twice is harmless. */
  int fd = fd_get(mf);
  int sys = fd < 0 ? -1 : rmq_io_fallocate(fd, reserved, end - reserved);
  fd_put(mf, fd);
  if (sys != 0 && errno != EOPNOTSUPP) {
    return rmq_err_set(err, errno == ENOSPC || errno == EDQUOT ? RMQ_EFULL : RMQ_EIO,
                       "cannot allocate disk space for %s bytes %d..%lld: %s", mf->path, reserved,
                       (long long)end, strerror(errno));
  }
  while (reserved < end &&
         !atomic_compare_exchange_weak(&mf->reserved_position, &reserved, (int32_t)end)) {
  }
  return RMQ_OK;
}

void rmq_mapped_file_drop_pages(rmq_mapped_file *mf) {
  madvise(mf->mapped, (size_t)mf->file_size, MADV_DONTNEED);
}

void rmq_mapped_file_random_access(rmq_mapped_file *mf) {
  madvise(mf->mapped, (size_t)mf->file_size, MADV_RANDOM);
}

bool rmq_mapped_file_populate(rmq_mapped_file *mf, int32_t from, int32_t len) {
  if (!mf->writable || mf->transient) return false;
  int32_t start = from - from % RMQ_OS_PAGE_SIZE;
  return madvise(mf->mapped + start, (size_t)(from + len - start), MADV_POPULATE_WRITE) == 0;
}

/* A write this large goes through pwrite (rmq_mapped_file_write), */
#define PWRITE_MIN (256 << 10)
/*
** and in pieces no larger than this: the kernel backs one write with page
** cache folios as large as the write, up to 2 MiB, and on a virtual machine
** whose host reclaims free memory (virtio-balloon free-page reporting) a
** free 2 MiB block is what it has taken back, and backing it again costs far
** more than small folios, which mostly come from memory still backed.
*/
#define PWRITE_PIECE (256 << 10)

static const uint8_t zeros[PWRITE_PIECE];

static void mapped_file_write_failed(rmq_mapped_file *mf, int64_t at, int e) {
  char why[256];
  snprintf(why, sizeof why, "cannot zero the bytes of a failed write at %lld of %s: %s",
           (long long)at, mf->path, e ? strerror(e) : "short write");
  if (mf->write_failed) mf->write_failed(mf->write_failed_ctx, why);
}

int rmq_mapped_file_fsync(rmq_mapped_file *mf, rmq_err *err) {
  int fd = fd_get(mf);
  int sys = fd < 0 ? -1 : rmq_io_fsync(fd);
  fd_put(mf, fd);
  if (sys == 0) return RMQ_OK;
  return rmq_err_set(err, RMQ_EIO, "cannot flush %s: %s", mf->path, strerror(errno));
}

void rmq_mapped_file_zero(rmq_mapped_file *mf, int32_t at, size_t len) {
  if (mf->write_buffer) {
    memset(rmq_mapped_file_write_ptr(mf, at), 0, len);
    return;
  }
  /* By pwrite: through the mapping, a page without disk blocks would be SIGBUS. */
  int fd = fd_get(mf);
  for (size_t done = 0; done < len; done += sizeof zeros) {
    size_t n = len - done < sizeof zeros ? len - done : sizeof zeros;
    errno = 0; /* a short write sets none */
    if (fd < 0 || rmq_io_pwrite(fd, zeros, n, at + (off_t)done) != (ssize_t)n) {
      mapped_file_write_failed(mf, at + (int64_t)done, errno);
      break;
    }
  }
  fd_put(mf, fd);
}

int rmq_mapped_file_write(rmq_mapped_file *mf, int32_t at, const void *data, size_t len,
                          rmq_err *err) {
  if (mf->write_buffer || len < PWRITE_MIN) {
    memcpy(rmq_mapped_file_write_ptr(mf, at), data, len);
    return RMQ_OK;
  }
  size_t done = 0;
  int fd = fd_get(mf);
  while (fd >= 0 && done < len) {
    size_t n = len - done < PWRITE_PIECE ? len - done : PWRITE_PIECE;
    if (rmq_io_pwrite(fd, (const uint8_t *)data + done, n, at + (off_t)done) != (ssize_t)n) {
      break;
    }
    done += n;
  }
  fd_put(mf, fd);
  if (done == len) return RMQ_OK;
  int e = errno;
  rmq_mapped_file_zero(mf, at, len);
  return rmq_err_set(err, e == ENOSPC || e == EDQUOT ? RMQ_EFULL : RMQ_EIO,
                     "cannot write %zu bytes at %d of %s: %s", len, at, mf->path, strerror(e));
}

static bool bytes_zero(const uint8_t *p, size_t n) {
  return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

bool rmq_mapped_file_all_zero(rmq_mapped_file *mf, int32_t from, int32_t to) {
  int fd = fd_get(mf);
  bool zero = true;
  for (off_t pos = from; zero && pos < to;) {
    errno = 0;
    off_t data = fd >= 0 ? lseek(fd, pos, SEEK_DATA) : -1;
    /* ENXIO: nothing but a hole after pos; another failure: read the bytes. */
    if (data < 0 && errno == ENXIO) break;
    if (data < 0) {
      zero = bytes_zero(mf->mapped + pos, (size_t)(to - pos));
      break;
    }
    if (data >= to) break;
    off_t hole = lseek(fd, data, SEEK_HOLE);
    if (hole < 0 || hole > to) hole = to;
    zero = bytes_zero(mf->mapped + data, (size_t)(hole - data));
    pos = hole;
  }
  fd_put(mf, fd);
  return zero;
}

void rmq_mapped_file_will_read(rmq_mapped_file *mf) {
  madvise(mf->mapped, (size_t)mf->file_size, MADV_SEQUENTIAL);
  madvise(mf->mapped, (size_t)mf->file_size, MADV_WILLNEED);
}
