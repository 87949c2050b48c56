/*
** checkpoint.c: the StoreCheckpoint file (see checkpoint.h).
*/
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io.h"
#include "message.h"

static void checkpoint_read(rmq_checkpoint *cp, const uint8_t *b) {
  atomic_store(&cp->physic_msg_timestamp, rmq_get64(b));
  atomic_store(&cp->logics_msg_timestamp, rmq_get64(b + 8));
  atomic_store(&cp->index_msg_timestamp, rmq_get64(b + 16));
}

/* A read-only store's checkpoint is read once with pread; a missing one reads as zeros. */
static int checkpoint_open_readonly(rmq_checkpoint *cp, rmq_err *err) {
  uint8_t b[24] = {0};
  int fd = rmq_io_open(cp->path, O_RDONLY, 0);
  if (fd < 0) {
    if (errno == ENOENT) return RMQ_OK;
    return rmq_err_set(err, RMQ_EIO, "cannot open %s: %s", cp->path, strerror(errno));
  }
  ssize_t n = rmq_io_pread(fd, b, sizeof b, 0);
  int e = errno;
  close(fd);
  if (n < 0) return rmq_err_set(err, RMQ_EIO, "cannot read %s: %s", cp->path, strerror(e));
  if (n != (ssize_t)sizeof b) {
    return rmq_err_set(err, RMQ_ECORRUPT, "%s is %zd bytes, shorter than 24", cp->path, n);
  }
  checkpoint_read(cp, b);
  return RMQ_OK;
}

/*
** The file is written through its mapping: its blocks must exist first, or a
** full disk makes the first flush a SIGBUS. A file system without fallocate
** keeps it sparse.
*/
static int checkpoint_reserve(rmq_checkpoint *cp, rmq_err *err) {
  if (rmq_io_fallocate(cp->fd, 0, RMQ_CHECKPOINT_SIZE) == 0 || errno == EOPNOTSUPP) return RMQ_OK;
  return rmq_err_set(err, errno == ENOSPC || errno == EDQUOT ? RMQ_EFULL : RMQ_EIO,
                     "cannot allocate disk space for %s: %s", cp->path, strerror(errno));
}

int rmq_checkpoint_open(rmq_checkpoint *cp, const char *dir, bool writable, rmq_err *err) {
  memset(cp, 0, sizeof *cp);
  cp->fd = -1;
  size_t n = strlen(dir) + sizeof "/checkpoint";
  if ((cp->path = malloc(n)) == NULL) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  snprintf(cp->path, n, "%s/checkpoint", dir);
  if (!writable) return checkpoint_open_readonly(cp, err);
  cp->fd = rmq_io_open(cp->path, O_RDWR | O_CREAT, 0644);
  if (cp->fd < 0) {
    return rmq_err_set(err, RMQ_EIO, "cannot open %s: %s", cp->path, strerror(errno));
  }
  struct stat st;
  if (fstat(cp->fd, &st) != 0 ||
      (st.st_size != RMQ_CHECKPOINT_SIZE && rmq_io_ftruncate(cp->fd, RMQ_CHECKPOINT_SIZE) != 0)) {
    return rmq_err_set(err, RMQ_EIO, "cannot size %s to %d bytes: %s", cp->path,
                       RMQ_CHECKPOINT_SIZE, strerror(errno));
  }
  /* A file whose blocks are all there is not touched (a repair writes nothing to a sound store). */
  bool reserved = st.st_size == RMQ_CHECKPOINT_SIZE && st.st_blocks * 512 >= RMQ_CHECKPOINT_SIZE;
  if (!reserved && checkpoint_reserve(cp, err) != RMQ_OK) return err->code;
  void *map = rmq_io_mmap(cp->fd, RMQ_CHECKPOINT_SIZE, 1);
  if (map == MAP_FAILED) {
    return rmq_err_set(err, RMQ_EIO, "cannot map %s: %s", cp->path, strerror(errno));
  }
  cp->mapped = map;
  checkpoint_read(cp, cp->mapped);
  return RMQ_OK;
}

int rmq_checkpoint_flush(rmq_checkpoint *cp, rmq_err *err) {
  if (cp->mapped == NULL) return RMQ_OK;
  rmq_put64(cp->mapped, atomic_load(&cp->physic_msg_timestamp));
  rmq_put64(cp->mapped + 8, atomic_load(&cp->logics_msg_timestamp));
  rmq_put64(cp->mapped + 16, atomic_load(&cp->index_msg_timestamp));
  if (rmq_io_msync(cp->mapped, RMQ_CHECKPOINT_SIZE) != 0) {
    return rmq_err_set(err, RMQ_EIO, "cannot flush %s: %s", cp->path, strerror(errno));
  }
  return RMQ_OK;
}

void rmq_checkpoint_close(rmq_checkpoint *cp) {
  if (cp->mapped) munmap(cp->mapped, RMQ_CHECKPOINT_SIZE);
  if (cp->fd >= 0) close(cp->fd);
  free(cp->path);
  memset(cp, 0, sizeof *cp);
  cp->fd = -1;
}

int64_t rmq_checkpoint_min_timestamp(rmq_checkpoint *cp) {
  int64_t p = atomic_load(&cp->physic_msg_timestamp);
  int64_t l = atomic_load(&cp->logics_msg_timestamp);
  int64_t m = p < l ? p : l;
  /* Compared before subtracting: a damaged checkpoint may hold any value. */
  return m < 3000 ? 0 : m - 3000;
}
