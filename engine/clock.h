/*
** clock.h: the engine's clocks.
**
** Wall time (CLOCK_REALTIME) is what RocketMQ stores: born and store
** timestamps, index file times. Everything that measures an interval or
** waits (deadlines, flush intervals, latencies, long polls) uses
** CLOCK_MONOTONIC, which a clock step cannot move backwards.
*/
#ifndef RMQ_CLOCK_H
#define RMQ_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "rmq.h"

/* rmq_now_ms and rmq_monotonic_ms are public: rmq.h. */
int64_t rmq_monotonic_ns(void);  /* monotonic clock, ns */
/* An absolute CLOCK_MONOTONIC deadline ms from now, for pthread_cond_timedwait. */
void rmq_deadline_in(struct timespec *ts, int64_t ms);
/* Initialise a condition variable that waits on CLOCK_MONOTONIC. */
void rmq_cond_init_monotonic(pthread_cond_t *cond);

#endif
