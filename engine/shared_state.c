/*
** shared_state.c: the page the processes of one store share (see
** shared_state.h). Its fields are atomics in a MAP_SHARED mapping, so that
** a store in one process is seen by a load in another; seq is also the
** futex word (a shared futex: the key is the file's page, not the address).
*/
#include "shared_state.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "io.h"

#define PAGE_SIZE 4096
#define MAGIC "sqlite-rocketmq"
#define VERSION 2
#define BOOT_ID_LEN 40

typedef struct shared_page {
  char magic[16];
  _Atomic uint32_t version;
  _Atomic uint32_t seq;
  _Atomic int64_t epoch;
  _Atomic int32_t owner_pid;
  _Atomic int64_t dispatched;
  char socket[RMQ_SHARED_SOCKET_MAX];
  char boot_id[BOOT_ID_LEN]; /* the kernel's: a page from before a reboot is stale */
  _Alignas(64) rmq_shared_log log;
} shared_page;

_Static_assert(sizeof(shared_page) <= PAGE_SIZE, "the shared page fits a page");

struct rmq_shared_state {
  shared_page *page;
  bool owner;
};

static void page_path(const char *dir, char *out, size_t cap) {
  snprintf(out, cap, "%s/%s", dir, RMQ_SHARED_STATE_FILE);
}

static void wake_all(shared_page *p) {
  syscall(SYS_futex, &p->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static int map_page(const char *dir, bool writable, shared_page **out, rmq_err *err) {
  char path[PATH_MAX];
  page_path(dir, path, sizeof path);
  int fd = rmq_io_open(path, writable ? O_RDWR | O_CREAT : O_RDONLY, 0644);
  if (fd < 0) {
    if (!writable && errno == ENOENT) return RMQ_OK;
    return rmq_err_set(err, RMQ_EIO, "cannot open %s: %s", path, strerror(errno));
  }
  struct stat st;
  int rc = RMQ_OK;
  if (fstat(fd, &st) != 0) {
    rc = rmq_err_set(err, RMQ_EIO, "cannot stat %s: %s", path, strerror(errno));
  } else if (writable && st.st_size != PAGE_SIZE && rmq_io_ftruncate(fd, PAGE_SIZE) != 0) {
    rc = rmq_err_set(err, RMQ_EIO, "cannot size %s: %s", path, strerror(errno));
  } else if (writable && rmq_io_fallocate(fd, 0, PAGE_SIZE) != 0 && errno != EOPNOTSUPP) {
    /* Its block, now: a write to a sparse page on a full disk would raise SIGBUS. */
    rc = rmq_err_set(err, errno == ENOSPC ? RMQ_EFULL : RMQ_EIO, "cannot allocate %s: %s", path,
                     strerror(errno));
  } else if (writable || st.st_size == PAGE_SIZE) {
    void *m = rmq_io_mmap(fd, PAGE_SIZE, writable);
    if (m == MAP_FAILED) {
      rc = rmq_err_set(err, RMQ_EIO, "cannot map %s: %s", path, strerror(errno));
    } else {
      *out = m;
    }
  }
  close(fd);
  return rc;
}

/* The running kernel's boot id; "" when it cannot be read. */
static void boot_id(char out[BOOT_ID_LEN]) {
  memset(out, 0, BOOT_ID_LEN);
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, out, BOOT_ID_LEN - 1);
  close(fd);
  if (n < 0) n = 0;
  out[n] = '\0';
}

static bool page_valid(const shared_page *p) {
  char boot[BOOT_ID_LEN];
  boot_id(boot);
  return memcmp(p->magic, MAGIC, sizeof MAGIC) == 0 && atomic_load(&p->version) == VERSION &&
         memcmp(p->boot_id, boot, BOOT_ID_LEN) == 0;
}

/* Write the page anew: nobody uses it, or it is not one of this boot's. */
static int make_page(shared_page *p, rmq_err *err) {
  int64_t epoch = atomic_load(&p->epoch);
  memset(p, 0, sizeof *p);
  memcpy(p->magic, MAGIC, sizeof MAGIC);
  boot_id(p->boot_id);
  atomic_store(&p->epoch, epoch);
  int rc = rmq_shared_log_init(&p->log, 0, err);
  atomic_store(&p->version, VERSION);
  return rc;
}

int rmq_shared_state_attach(const char *dir, bool owner, bool alone, rmq_shared_state **out,
                            rmq_err *err) {
  *out = NULL;
  rmq_shared_state *st = calloc(1, sizeof *st);
  if (!st) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  int rc = map_page(dir, true, &st->page, err);
  bool valid = rc == RMQ_OK && page_valid(st->page);
  if (rc == RMQ_OK && owner && (alone || !valid)) rc = make_page(st->page, err);
  if (rc != RMQ_OK || (!owner && !valid)) {
    if (st->page) munmap(st->page, PAGE_SIZE);
    free(st);
    return rc;
  }
  st->owner = owner;
  *out = st;
  return RMQ_OK;
}

void rmq_shared_state_own(rmq_shared_state *st, const char *socket_name, int64_t dispatched) {
  shared_page *p = st->page;
  snprintf(p->socket, sizeof p->socket, "%s", socket_name);
  atomic_store(&p->dispatched, dispatched);
  atomic_store(&p->owner_pid, (int32_t)getpid());
  atomic_fetch_add(&p->epoch, 1);
  atomic_fetch_add(&p->seq, 1);
  wake_all(p);
}

rmq_shared_log *rmq_shared_state_log(rmq_shared_state *st) { return &st->page->log; }

int rmq_shared_state_open(const char *dir, rmq_shared_state **out, rmq_err *err) {
  *out = NULL;
  shared_page *p = NULL;
  int rc = map_page(dir, false, &p, err);
  if (rc != RMQ_OK || !p) return rc;
  if (!page_valid(p)) {
    munmap(p, PAGE_SIZE);
    return RMQ_OK;
  }
  rmq_shared_state *st = calloc(1, sizeof *st);
  if (!st) {
    munmap(p, PAGE_SIZE);
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  }
  st->page = p;
  *out = st;
  return RMQ_OK;
}

void rmq_shared_state_close(rmq_shared_state *st) {
  if (!st) return;
  if (st->owner && atomic_load(&st->page->owner_pid) == (int32_t)getpid()) {
    st->page->socket[0] = '\0';
    atomic_store(&st->page->owner_pid, 0);
    atomic_fetch_add(&st->page->seq, 1);
    wake_all(st->page);
  }
  munmap(st->page, PAGE_SIZE);
  free(st);
}

void rmq_shared_state_publish(rmq_shared_state *st, int64_t dispatched) {
  shared_page *p = st->page;
  atomic_store(&p->dispatched, dispatched);
  atomic_fetch_add(&p->seq, 1);
  wake_all(p);
}

uint32_t rmq_shared_state_seq(const rmq_shared_state *st) { return atomic_load(&st->page->seq); }
int64_t rmq_shared_state_epoch(const rmq_shared_state *st) { return atomic_load(&st->page->epoch); }
int64_t rmq_shared_state_dispatched(const rmq_shared_state *st) {
  return atomic_load(&st->page->dispatched);
}
int32_t rmq_shared_state_owner(const rmq_shared_state *st) {
  return atomic_load(&st->page->owner_pid);
}

void rmq_shared_state_socket(const rmq_shared_state *st, char *out, size_t cap) {
  /* The owner writes it before it bumps seq; a torn read only fails a connect, which retries. */
  char copy[RMQ_SHARED_SOCKET_MAX];
  memcpy(copy, st->page->socket, sizeof copy);
  copy[sizeof copy - 1] = '\0';
  snprintf(out, cap, "%s", copy);
}

bool rmq_shared_state_wait(const rmq_shared_state *st, uint32_t seen, int timeout_ms) {
  struct timespec end, now;
  clock_gettime(CLOCK_MONOTONIC, &end);
  end.tv_sec += timeout_ms / 1000;
  end.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (end.tv_nsec >= 1000000000L) end.tv_sec++, end.tv_nsec -= 1000000000L;
  while (atomic_load(&st->page->seq) == seen) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long left = (long long)(end.tv_sec - now.tv_sec) * 1000000000LL +
                     (end.tv_nsec - now.tv_nsec);
    if (left <= 0) return false;
    struct timespec ts = {(time_t)(left / 1000000000LL), (long)(left % 1000000000LL)};
    syscall(SYS_futex, &st->page->seq, FUTEX_WAIT, seen, &ts, NULL, 0);
  }
  return true;
}
