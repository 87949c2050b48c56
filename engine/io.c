/*
** io.c: system-call wrappers with fault injection (see io.h).
*/
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <stdint.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

typedef struct io_fault {
  atomic_int countdown; /* act when this reaches 0 after a decrement */
  int err;
  long short_len;
  int stall_ms; /* > 0: the call sleeps this long, then succeeds */
} io_fault;

static io_fault faults[RMQ_IO_OP_COUNT];

void rmq_io_fault(rmq_io_op op, int nth, int err, long short_len) {
  faults[op].err = err;
  faults[op].short_len = short_len;
  faults[op].stall_ms = 0;
  atomic_store(&faults[op].countdown, nth);
}

void rmq_io_stall(rmq_io_op op, int nth, int ms) {
  faults[op].stall_ms = ms;
  atomic_store(&faults[op].countdown, nth);
}

/* True when this call of op is the one a test asked to fail; a stall just sleeps. */
static int io_should_fail(rmq_io_op op) {
  int n = atomic_load_explicit(&faults[op].countdown, memory_order_relaxed);
  while (n > 0) {
    if (atomic_compare_exchange_weak(&faults[op].countdown, &n, n - 1)) {
      if (n != 1) return 0;
      if (faults[op].stall_ms > 0) {
        struct timespec ts = {faults[op].stall_ms / 1000, (faults[op].stall_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        return 0;
      }
      errno = faults[op].err;
      return 1;
    }
  }
  return 0;
}

/* O_NONBLOCK: a FIFO put where a store file belongs fails or reads empty instead of blocking
   the open forever; on a regular file it changes nothing. */
int rmq_io_open(const char *path, int flags, mode_t mode) {
  if (io_should_fail(RMQ_IO_OPEN)) return -1;
  return open(path, flags | O_CLOEXEC | O_NONBLOCK, mode);
}

/* The length a faulty pread or pwrite transfers: -1 (fail), or at most short_len. */
static long io_fault_len(rmq_io_op op, size_t len) {
  long s = faults[op].short_len;
  return s < 0 || (size_t)s < len ? s : (long)len;
}

ssize_t rmq_io_pread(int fd, void *buf, size_t len, off_t off) {
  if (io_should_fail(RMQ_IO_PREAD)) {
    long n = io_fault_len(RMQ_IO_PREAD, len);
    if (n < 0) return -1;
    len = (size_t)n;
  }
  ssize_t n;
  do {
    n = pread(fd, buf, len, off);
  } while (n < 0 && errno == EINTR);
  return n;
}

ssize_t rmq_io_pwrite(int fd, const void *buf, size_t len, off_t off) {
  size_t done = 0;
  if (io_should_fail(RMQ_IO_PWRITE)) {
    long n = io_fault_len(RMQ_IO_PWRITE, len);
    return n < 0 ? -1 : pwrite(fd, buf, (size_t)n, off);
  }
  while (done < len) {
    ssize_t n = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? -1 : (ssize_t)done;
    done += (size_t)n;
  }
  return (ssize_t)done;
}

int rmq_io_fsync(int fd) {
  if (io_should_fail(RMQ_IO_FSYNC)) return -1;
  return fdatasync(fd);
}

int rmq_io_syncfs(int fd) {
  if (io_should_fail(RMQ_IO_SYNCFS)) return -1;
  return syncfs(fd);
}

int rmq_io_msync(void *addr, size_t len) {
  if (io_should_fail(RMQ_IO_MSYNC)) return -1;
  return msync(addr, len, MS_SYNC);
}

int rmq_io_fallocate(int fd, off_t off, off_t len) {
  if (io_should_fail(RMQ_IO_FALLOCATE)) return -1;
  return fallocate(fd, 0, off, len);
}

int rmq_io_ftruncate(int fd, off_t len) {
  if (io_should_fail(RMQ_IO_FTRUNCATE)) return -1;
  return ftruncate(fd, len);
}

void *rmq_io_mmap(int fd, size_t len, int writable) {
  if (io_should_fail(RMQ_IO_MMAP)) return MAP_FAILED;
  int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  return mmap(NULL, len, prot, MAP_SHARED, fd, 0);
}

int rmq_io_unlink(const char *path) {
  if (io_should_fail(RMQ_IO_UNLINK)) return -1;
  return unlink(path);
}

int rmq_io_fsync_dir(const char *dir) {
  int fd = rmq_io_open(dir, O_RDONLY | O_DIRECTORY, 0);
  if (fd < 0) return -1;
  int rc = rmq_io_fsync(fd);
  int e = errno;
  close(fd);
  errno = e;
  return rc;
}

int rmq_io_disk_used_percent(const char *path) {
  struct statvfs v;
  if (statvfs(path, &v) != 0 || v.f_blocks == 0) return -1;
  /* In blocks, not bytes: used * 100 cannot overflow. */
  uint64_t used = v.f_blocks - v.f_bfree, room = used + v.f_bavail;
  if (room == 0) return 0;
  return (int)((used * 100 + room - 1) / room);
}
