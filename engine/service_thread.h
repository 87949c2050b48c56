/*
** service_thread.h: RocketMQ's ServiceThread shape for every background
** thread of the engine.
**
** A service is started once, runs `run(self)` until shutdown, and sleeps in
** rmq_service_thread_wait(): a timed wait on a CLOCK_MONOTONIC condition
** variable that returns early when another thread calls wakeup(). A wakeup
** that arrives while the service is busy is remembered, so it is never lost.
** shutdown() sets the stop flag under the lock, wakes the thread and joins
** it; run() must check rmq_service_thread_stopped() after every wait.
*/
#ifndef RMQ_SERVICE_THREAD_H
#define RMQ_SERVICE_THREAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "clock.h"
#include "rmq.h"

typedef struct rmq_service_thread rmq_service_thread;
typedef void (*rmq_service_run)(rmq_service_thread *self);

struct rmq_service_thread {
  const char *name;
  rmq_service_run run;
  void *arg; /* the owning object, for run() */
  pthread_t tid;
  pthread_mutex_t mu;
  pthread_cond_t cond;
  bool started;
  atomic_bool notified; /* atomic so that wakeup() can skip the lock when one is pending */
  bool stopped;
};

void rmq_service_thread_init(rmq_service_thread *st, const char *name, rmq_service_run run,
                             void *arg);
int rmq_service_thread_start(rmq_service_thread *st, rmq_err *err);
void rmq_service_thread_wakeup(rmq_service_thread *st);
/* Sleep up to ms or until woken; consumes the wake-up. */
void rmq_service_thread_wait(rmq_service_thread *st, int64_t ms);
bool rmq_service_thread_stopped(rmq_service_thread *st);
/* Stop and join (a no-op if never started); then free the sync objects. */
void rmq_service_thread_shutdown(rmq_service_thread *st);

#endif
