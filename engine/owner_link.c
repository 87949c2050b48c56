/*
** owner_link.c: requests to the store's owner, and taking its place (see
** owner_link.h).
*/
#include "owner_link.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "remoting_client.h"
#include "shared_state.h"

struct rmq_owner_link {
  char *dir;
  int lock_fd;
  rmq_owner_link_ops ops;
  rmq_remoting_client *client;
  pthread_mutex_t mu;     /* guards page, owner and stopping; held while taking over */
  pthread_cond_t cond;    /* the watcher's sleep */
  rmq_shared_state *page; /* opened once an owner wrote it */
  _Atomic(void *) owner;  /* the services taken over here */
  bool stopping;
  pthread_t watcher;
};

/* Is byte 1 of `lock` free: no process runs the services? */
static bool owner_gone(rmq_owner_link *l) {
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 1, .l_len = 1};
  return fcntl(l->lock_fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK;
}

/* Under mu: become the owner unless another process is. RMQ_OK when this process now is. */
static int take_over_locked(rmq_owner_link *l, rmq_err *err) {
  if (atomic_load(&l->owner)) return RMQ_OK;
  if (l->stopping) return rmq_err_set(err, RMQ_ECLOSED, "store %s is closing", l->dir);
  void *owner = NULL;
  int rc = l->ops.take_over(l->ops.ctx, &owner, err);
  if (rc == RMQ_OK) atomic_store(&l->owner, owner);
  return rc;
}

static int take_over(rmq_owner_link *l, rmq_err *err) {
  pthread_mutex_lock(&l->mu);
  int rc = take_over_locked(l, err);
  pthread_mutex_unlock(&l->mu);
  return rc;
}

static void *watch(void *arg) {
  rmq_owner_link *l = arg;
  pthread_mutex_lock(&l->mu);
  /* It stays until the stop (which joins it) even once this process took over. */
  while (!l->stopping) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += RMQ_OWNER_WATCH_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&l->cond, &l->mu, &until);
    if (l->stopping || atomic_load(&l->owner) || !owner_gone(l)) continue;
    rmq_err err = {0};
    take_over_locked(l, &err);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

int rmq_owner_link_start(const char *dir, int lock_fd, const rmq_owner_link_ops *ops,
                         rmq_owner_link **out, rmq_err *err) {
  *out = NULL;
  rmq_owner_link *l = calloc(1, sizeof *l);
  if (!l || !(l->dir = strdup(dir)) || !(l->client = rmq_remoting_client_new())) {
    if (l) free(l->dir);
    free(l);
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  }
  l->lock_fd = lock_fd;
  l->ops = *ops;
  pthread_mutex_init(&l->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&l->cond, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&l->watcher, NULL, watch, l) != 0) {
    rmq_remoting_client_free(l->client);
    pthread_cond_destroy(&l->cond);
    pthread_mutex_destroy(&l->mu);
    free(l->dir);
    free(l);
    return rmq_err_set(err, RMQ_ENOMEM, "cannot start the owner watcher's thread");
  }
  *out = l;
  return RMQ_OK;
}

void rmq_owner_link_stop(rmq_owner_link *l) {
  if (!l) return;
  pthread_mutex_lock(&l->mu);
  l->stopping = true;
  pthread_cond_signal(&l->cond);
  pthread_mutex_unlock(&l->mu);
  pthread_join(l->watcher, NULL);
  void *owner = atomic_load(&l->owner);
  if (owner) l->ops.close_owner(owner);
  rmq_shared_state_close(l->page);
  rmq_remoting_client_free(l->client);
  pthread_cond_destroy(&l->cond);
  pthread_mutex_destroy(&l->mu);
  free(l->dir);
  free(l);
}

void *rmq_owner_link_owner(rmq_owner_link *l) { return atomic_load(&l->owner); }

/* The owner's socket name as the shared page gives it; "" when there is no page yet. */
static void owner_socket(rmq_owner_link *l, char *out, size_t cap) {
  out[0] = '\0';
  pthread_mutex_lock(&l->mu);
  if (!l->page) {
    rmq_err ignored = {0};
    rmq_shared_state_open(l->dir, &l->page, &ignored);
  }
  if (l->page) rmq_shared_state_socket(l->page, out, cap);
  pthread_mutex_unlock(&l->mu);
}

/* One try at the owner elsewhere: RMQ_ENOTFOUND when none took the request. */
static int call_remote(rmq_owner_link *l, const rmq_remote_request *q, rmq_remote_response *r,
                       rmq_err *err) {
  char name[RMQ_REMOTE_NAME_MAX];
  owner_socket(l, name, sizeof name);
  if (!name[0]) return rmq_err_set(err, RMQ_ENOTFOUND, "no owner has named its socket");
  rmq_err why = {0};
  int rc = rmq_remoting_client_call(l->client, name, q, r, &why);
  if (rc == RMQ_EIO) {
    return rmq_err_set(err, RMQ_EIO,
                       "store %s: the process that ran its services went away during this "
                       "request, which it may or may not have carried out (%s)",
                       l->dir, why.msg);
  }
  return rc == RMQ_OK ? RMQ_OK : rmq_err_set(err, rc, "%s", why.msg);
}

int rmq_owner_link_call(rmq_owner_link *l, const rmq_remote_request *q, rmq_remote_response *r,
                        rmq_err *err) {
  int64_t deadline = rmq_monotonic_ms() + RMQ_OWNER_WAIT_MS;
  for (int tries = 0;; tries++) {
    void *owner = atomic_load(&l->owner);
    if (owner) {
      *r = (rmq_remote_response){0};
      l->ops.serve(owner, q, r);
      return RMQ_OK;
    }
    rmq_err why = {0};
    int rc = call_remote(l, q, r, &why);
    /* The other kept connections lead to the same dead owner. */
    if (rc == RMQ_EIO) rmq_remoting_client_reset(l->client);
    /* A wait for durability may go to the next owner: what was appended is in its log. */
    bool again = rc == RMQ_EIO &&
                 (q->code == RMQ_REQUEST_WAIT_DURABLE || q->code == RMQ_REQUEST_FLUSH);
    if (rc != RMQ_ENOTFOUND && !again) {
      return rc == RMQ_OK ? RMQ_OK : rmq_err_set(err, rc, "%s", why.msg);
    }
    /* Nobody took it: the owner is gone or not yet listening. */
    rmq_err taking = {0};
    rc = take_over(l, &taking);
    if (rc == RMQ_OK) continue;
    if (rc != RMQ_ELOCKED) return rmq_err_set(err, rc, "%s", taking.msg);
    if (rmq_monotonic_ms() > deadline) {
      return rmq_err_set(err, RMQ_ETIMEOUT,
                         "store %s: no process took over its services within %d ms (%s)", l->dir,
                         RMQ_OWNER_WAIT_MS, why.msg);
    }
    usleep(tries < 50 ? 2000 : 20000);
  }
}

int64_t rmq_owner_link_owner_pid(rmq_owner_link *l) {
  if (atomic_load(&l->owner)) return getpid();
  char ignored[RMQ_REMOTE_NAME_MAX];
  owner_socket(l, ignored, sizeof ignored);
  pthread_mutex_lock(&l->mu);
  int64_t pid = l->page ? rmq_shared_state_owner(l->page) : 0;
  pthread_mutex_unlock(&l->mu);
  return pid;
}
