/*
** allocate.c: AllocateMappedFileService (see allocate.h).
**
** Requests are kept in creation order in a small list guarded by one mutex.
** The service thread creates the oldest request's file, then signals; the
** writer that asked for it waits on the same condition variable. A request
** is identified by its path, so asking twice for the same file (the writer's
** "next" becomes the following call's "this") never creates it twice.
**
** Before each request it unlocks the warmed segment the writer left, if
** any. Between requests the same thread maps in staging chunks for transactions
** being built (staging.h), then maps the writer's segment writable a window
** ahead of its write position (an addition to RocketMQ, whose only remedy is
** warming whole files): page faults then happen off the append path.
** Staging comes first: an inserting thread needs its chunk now, the commit
** log's pages only at COMMIT.
*/
#include "allocate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "service_thread.h"

typedef struct allocate_request {
  char *path;
  int64_t from;
  int32_t size;
  rmq_mapped_file *file; /* set when created */
  rmq_err err;           /* set when creation failed */
  bool done;
  struct allocate_request *next;
} allocate_request;

/* MappedFile.warmMappedFile forces a warmed file every this many pages (sync flush). */
#define FLUSH_LEAST_PAGES_WHEN_WARM 4096

/* How far ahead of the writer pages are pre-faulted, and in what steps. */
#define PREFAULT_AHEAD (64 << 20)
#define PREFAULT_STEP (4 << 20)

struct rmq_allocate_service {
  rmq_service_thread thread;
  bool warm;
  bool flush_sync;
  rmq_transient_store_pool *pool;
  rmq_staging_pool *staging;
  pthread_mutex_t mu;
  pthread_cond_t done_cond;
  allocate_request *head;
  rmq_mapped_file *current; /* the writer's segment (held), pre-faulted ahead of it */
  rmq_mapped_file *left;    /* a warmed segment the writer has left (held), to unlock */
  int32_t prefaulted;       /* bytes of current already pre-faulted; service thread only */
};

static allocate_request *find_request(rmq_allocate_service *svc, const char *path) {
  for (allocate_request *r = svc->head; r; r = r->next) {
    if (strcmp(r->path, path) == 0) return r;
  }
  return NULL;
}

/* Queue a request for path unless one exists; called with mu held. */
static allocate_request *add_request(rmq_allocate_service *svc, const char *path, int64_t from,
                                     int32_t size) {
  allocate_request *r = find_request(svc, path);
  if (r) return r;
  r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup(path))) {
    free(r);
    return NULL;
  }
  r->from = from;
  r->size = size;
  allocate_request **tail = &svc->head;
  while (*tail) tail = &(*tail)->next;
  *tail = r;
  rmq_service_thread_wakeup(&svc->thread);
  return r;
}

static void unlink_request(rmq_allocate_service *svc, allocate_request *r) {
  for (allocate_request **p = &svc->head; *p; p = &(*p)->next) {
    if (*p == r) {
      *p = r->next;
      return;
    }
  }
}

static void free_request(allocate_request *r) {
  if (r->file) rmq_mapped_file_shutdown(r->file, true);
  free(r->path);
  free(r);
}

/* The oldest request not yet served, with mu held. */
static allocate_request *pending_request(rmq_allocate_service *svc) {
  for (allocate_request *r = svc->head; r; r = r->next) {
    if (!r->done) return r;
  }
  return NULL;
}

static void create_file(rmq_allocate_service *svc, allocate_request *r) {
  rmq_mapped_file *mf = NULL;
  rmq_err err = {0};
  if (rmq_mapped_file_open(r->path, r->from, r->size, RMQ_MF_CREATE, true, &mf, &err) == RMQ_OK) {
    if (svc->pool) rmq_mapped_file_use_pool(mf, svc->pool);
    int flush_pages = svc->flush_sync ? FLUSH_LEAST_PAGES_WHEN_WARM : 0;
    if (svc->warm && rmq_mapped_file_warm(mf, true, flush_pages, &err) != RMQ_OK) {
      rmq_mapped_file_shutdown(mf, true);
      mf = NULL;
    }
  }
  pthread_mutex_lock(&svc->mu);
  r->file = mf;
  r->err = err;
  r->done = true;
  pthread_cond_broadcast(&svc->done_cond);
  pthread_mutex_unlock(&svc->mu);
}

/*
** Map the next step of pages ahead of the writer, so that its appends do not
** stop for page faults. Only mapped (MADV_POPULATE_WRITE), never written:
** the bytes stay the file's, whoever writes them (this process's writer or
** another process's, shared_log.h). Zeros written ahead by pwrite instead
** made the writer slower: the kernel writes them back and write-protects
** the pages again before the writer's bytes land. The window is
** PREFAULT_AHEAD plus the staging memory of open transactions, whose COMMIT
** copies that much at once. False when there is nothing to do.
*/
static bool prefault_step(rmq_allocate_service *svc, rmq_mapped_file *mf) {
  if (mf->transient || svc->prefaulted >= mf->file_size) return false;
  int32_t wrote = rmq_mapped_file_wrote(mf);
  int64_t pending = (int64_t)rmq_staging_out(svc->staging) * RMQ_STAGING_CHUNK;
  int64_t target = (int64_t)wrote + PREFAULT_AHEAD + pending;
  if (target > mf->file_size) target = mf->file_size;
  int32_t from = wrote > svc->prefaulted ? wrote : svc->prefaulted;
  from += (RMQ_OS_PAGE_SIZE - from % RMQ_OS_PAGE_SIZE) % RMQ_OS_PAGE_SIZE;
  if (from >= target) return false;
  int32_t to = target - from > PREFAULT_STEP ? from + PREFAULT_STEP : (int32_t)target;
  /* Without the call (Linux < 5.14) the writer faults its pages in itself. */
  if (rmq_mapped_file_populate(mf, from, to - from)) atomic_store(&mf->populated_position, to);
  svc->prefaulted = to;
  return true;
}

/* Take the writer's new segment (if it changed) for pre-faulting; with mu held. */
static rmq_mapped_file *take_current(rmq_allocate_service *svc, rmq_mapped_file **seen) {
  if (svc->current != *seen) {
    *seen = svc->current;
    svc->prefaulted = 0;
  }
  return svc->current && rmq_mapped_file_hold(svc->current) ? svc->current : NULL;
}

/*
** munlock the segment the writer left (CommitLog.putMessage's
** unlockMappedFile after a roll), here rather than on the writer's thread:
** unlocking a large segment walks all its pages.
*/
static void unlock_left(rmq_allocate_service *svc) {
  pthread_mutex_lock(&svc->mu);
  rmq_mapped_file *left = svc->left;
  svc->left = NULL;
  pthread_mutex_unlock(&svc->mu);
  if (!left) return;
  rmq_mapped_file_unlock(left);
  rmq_mapped_file_release(left);
}

static void allocate_run(rmq_service_thread *st) {
  rmq_allocate_service *svc = st->arg;
  rmq_mapped_file *seen = NULL;
  while (!rmq_service_thread_stopped(st)) {
    unlock_left(svc);
    pthread_mutex_lock(&svc->mu);
    allocate_request *r = pending_request(svc);
    pthread_mutex_unlock(&svc->mu);
    /* Only this thread serves requests, and only the writer removes served ones. */
    if (r) {
      create_file(svc, r);
      continue;
    }
    if (rmq_staging_fill_step(svc->staging)) continue;
    pthread_mutex_lock(&svc->mu);
    rmq_mapped_file *cur = take_current(svc, &seen);
    pthread_mutex_unlock(&svc->mu);
    bool worked = cur && prefault_step(svc, cur);
    bool done = !cur || svc->prefaulted >= cur->file_size;
    if (cur) rmq_mapped_file_release(cur);
    /* While the writer's segment is not fully pre-faulted, look again soon. */
    if (!worked) rmq_service_thread_wait(st, done ? 1000 : 10);
  }
}

static rmq_mapped_file *allocate_for_queue(void *svc, const char *path, int64_t from,
                                           const char *next_path, int64_t next_from, int32_t size,
                                           rmq_err *err) {
  return rmq_allocate_mapped_file(svc, path, from, next_path, next_from, size, err);
}

void rmq_allocate_attach(rmq_allocate_service *svc, rmq_mapped_file_queue *q) {
  q->allocate = allocate_for_queue;
  q->allocate_ctx = svc;
}

/* A warmed segment the writer left waits for the service thread to unlock it. */
void rmq_allocate_prefault(rmq_allocate_service *svc, rmq_mapped_file *mf) {
  if (!rmq_mapped_file_hold(mf)) return;
  pthread_mutex_lock(&svc->mu);
  rmq_mapped_file *old = svc->current, *unlock_now = NULL;
  svc->current = mf;
  if (svc->warm && old && old != mf) {
    unlock_now = svc->left; /* two rolls before the thread ran: the older one here */
    svc->left = old;
    old = NULL;
  }
  pthread_mutex_unlock(&svc->mu);
  if (unlock_now) {
    rmq_mapped_file_unlock(unlock_now);
    rmq_mapped_file_release(unlock_now);
  }
  if (old) rmq_mapped_file_release(old);
  rmq_service_thread_wakeup(&svc->thread);
}

void rmq_allocate_wakeup(rmq_allocate_service *svc) { rmq_service_thread_wakeup(&svc->thread); }

rmq_allocate_service *rmq_allocate_service_new(bool warm, bool flush_sync,
                                               rmq_transient_store_pool *pool,
                                               rmq_staging_pool *staging) {
  rmq_allocate_service *svc = calloc(1, sizeof *svc);
  if (!svc) return NULL;
  svc->warm = warm;
  svc->flush_sync = flush_sync;
  svc->pool = pool;
  svc->staging = staging;
  pthread_mutex_init(&svc->mu, NULL);
  rmq_cond_init_monotonic(&svc->done_cond);
  rmq_service_thread_init(&svc->thread, "AllocateMappedFileService", allocate_run, svc);
  return svc;
}

int rmq_allocate_service_start(rmq_allocate_service *svc, rmq_err *err) {
  return rmq_service_thread_start(&svc->thread, err);
}

void rmq_allocate_service_free(rmq_allocate_service *svc) {
  if (!svc) return;
  rmq_service_thread_shutdown(&svc->thread);
  if (svc->current) rmq_mapped_file_release(svc->current);
  if (svc->left) rmq_mapped_file_release(svc->left);
  while (svc->head) {
    allocate_request *r = svc->head;
    svc->head = r->next;
    free_request(r);
  }
  pthread_cond_destroy(&svc->done_cond);
  pthread_mutex_destroy(&svc->mu);
  free(svc);
}

rmq_mapped_file *rmq_allocate_mapped_file(rmq_allocate_service *svc, const char *path, int64_t from,
                                          const char *next_path, int64_t next_from, int32_t size,
                                          rmq_err *err) {
  struct timespec deadline;
  rmq_deadline_in(&deadline, RMQ_ALLOCATE_WAIT_MS);
  pthread_mutex_lock(&svc->mu);
  allocate_request *r = add_request(svc, path, from, size);
  if (r && next_path) add_request(svc, next_path, next_from, size);
  int wait_rc = 0;
  while (r && !r->done && wait_rc == 0) {
    wait_rc = pthread_cond_timedwait(&svc->done_cond, &svc->mu, &deadline);
  }
  rmq_mapped_file *mf = NULL;
  if (!r) {
    rmq_err_set(err, RMQ_ENOMEM, "out of memory allocating %s", path);
  } else if (!r->done) {
    rmq_err_set(err, RMQ_ETIMEOUT, "creating %s took more than %d ms", path, RMQ_ALLOCATE_WAIT_MS);
  } else {
    mf = r->file;
    r->file = NULL;
    if (!mf) rmq_err_set(err, r->err.code, "%s", r->err.msg);
    unlink_request(svc, r);
    free_request(r);
  }
  pthread_mutex_unlock(&svc->mu);
  if (mf) rmq_allocate_prefault(svc, mf);
  return mf;
}
