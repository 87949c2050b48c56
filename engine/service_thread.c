/*
** service_thread.c: start-once background threads with wakeup and timed
** waits on a monotonic clock (see service_thread.h).
*/
#include "service_thread.h"

#include <stdio.h>
#include <string.h>

void rmq_service_thread_init(rmq_service_thread *st, const char *name, rmq_service_run run,
                             void *arg) {
  memset(st, 0, sizeof *st);
  st->name = name;
  st->run = run;
  st->arg = arg;
  pthread_mutex_init(&st->mu, NULL);
  rmq_cond_init_monotonic(&st->cond);
}

static void *service_main(void *p) {
  rmq_service_thread *st = p;
  char name[16]; /* the kernel keeps 15 bytes: enough to tell the services apart in top */
  snprintf(name, sizeof name, "%s", st->name);
  pthread_setname_np(pthread_self(), name);
  st->run(st);
  return NULL;
}

int rmq_service_thread_start(rmq_service_thread *st, rmq_err *err) {
  if (st->started) return RMQ_OK;
  int rc = pthread_create(&st->tid, NULL, service_main, st);
  if (rc != 0) {
    return rmq_err_set(err, RMQ_ENOMEM, "cannot start the %s thread: %s", st->name, strerror(rc));
  }
  st->started = true;
  return RMQ_OK;
}

/* Called after every append: when a wake-up is already pending it costs one load. */
void rmq_service_thread_wakeup(rmq_service_thread *st) {
  if (atomic_load_explicit(&st->notified, memory_order_acquire)) return;
  pthread_mutex_lock(&st->mu);
  if (!atomic_load(&st->notified)) {
    atomic_store(&st->notified, true);
    pthread_cond_signal(&st->cond);
  }
  pthread_mutex_unlock(&st->mu);
}

void rmq_service_thread_wait(rmq_service_thread *st, int64_t ms) {
  struct timespec deadline;
  rmq_deadline_in(&deadline, ms);
  pthread_mutex_lock(&st->mu);
  while (!atomic_load(&st->notified) && !st->stopped) {
    if (pthread_cond_timedwait(&st->cond, &st->mu, &deadline) != 0) break;
  }
  atomic_store(&st->notified, false);
  pthread_mutex_unlock(&st->mu);
}

bool rmq_service_thread_stopped(rmq_service_thread *st) {
  pthread_mutex_lock(&st->mu);
  bool stopped = st->stopped;
  pthread_mutex_unlock(&st->mu);
  return stopped;
}

void rmq_service_thread_shutdown(rmq_service_thread *st) {
  if (st->run == NULL) return;
  pthread_mutex_lock(&st->mu);
  st->stopped = true;
  pthread_cond_signal(&st->cond);
  pthread_mutex_unlock(&st->mu);
  if (st->started) pthread_join(st->tid, NULL);
  st->started = false;
  pthread_cond_destroy(&st->cond);
  pthread_mutex_destroy(&st->mu);
  st->run = NULL;
}
