/*
** io.h: the engine's only door to the file system.
**
** Every open, pread, pwrite, fsync, msync, syncfs, ftruncate, fallocate, mmap and unlink of
** the engine goes through these wrappers so that tests can make the Nth call
** of one kind fail (EIO, ENOSPC, a short write, a failed fsync) and check
** that the store reports it and refuses further writes. They behave like the
** system calls they wrap: -1 (or MAP_FAILED) and errno on failure.
*/
#ifndef RMQ_IO_H
#define RMQ_IO_H

#include <stddef.h>
#include <sys/types.h>

typedef enum rmq_io_op {
  RMQ_IO_OPEN,
  RMQ_IO_PWRITE,
  RMQ_IO_FSYNC,
  RMQ_IO_MSYNC,
  RMQ_IO_FTRUNCATE,
  RMQ_IO_MMAP,
  RMQ_IO_UNLINK,
  RMQ_IO_FALLOCATE,
  RMQ_IO_PREAD,
  RMQ_IO_SYNCFS,
  RMQ_IO_OP_COUNT
} rmq_io_op;

/* open(2) with O_CLOEXEC and O_NONBLOCK added: it never waits for a FIFO's other end. */
int rmq_io_open(const char *path, int flags, mode_t mode);
/* One pread (retried on EINTR): it may return fewer bytes than asked at the end of the file. */
ssize_t rmq_io_pread(int fd, void *buf, size_t len, off_t off);
/* Writes all of len bytes (retrying short writes) unless a fault says otherwise. */
ssize_t rmq_io_pwrite(int fd, const void *buf, size_t len, off_t off);
int rmq_io_fsync(int fd);
int rmq_io_msync(void *addr, size_t len);
/* syncfs(2): everything written to the file system that holds fd reaches the disk. */
int rmq_io_syncfs(int fd);
int rmq_io_ftruncate(int fd, off_t len);
int rmq_io_fallocate(int fd, off_t off, off_t len);
void *rmq_io_mmap(int fd, size_t len, int writable);
int rmq_io_unlink(const char *path);
/* open + fsync + close of a directory, so that entries made or renamed in it persist. */
int rmq_io_fsync_dir(const char *dir);
/*
** UtilAll.getDiskPartitionSpaceUsedPercent, in whole percent: used = total -
** free, ceil(used * 100 / (used + usable)); -1 when statvfs fails.
*/
int rmq_io_disk_used_percent(const char *path);

/*
** Fault injection for tests: the nth call (1 = the next one) of op from now
** on fails with errno err. For RMQ_IO_PWRITE and RMQ_IO_PREAD, short_len >= 0
** makes it a short write or read of that many bytes instead. nth = 0 clears the fault. Faults are
** process-wide; the counters are atomic.
*/
void rmq_io_fault(rmq_io_op op, int nth, int err, long short_len);
/* The nth call of op sleeps ms before it runs (a slow disk); nth = 0 clears it. */
void rmq_io_stall(rmq_io_op op, int nth, int ms);

#endif
