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
int64_t rmq_monotonic_ns(void); /* monotonic clock, ns */
/* An absolute CLOCK_MONOTONIC deadline ms from now, for pthread_cond_timedwait. */
void rmq_deadline_in(struct timespec *ts, int64_t ms);
/* Initialise a condition variable that waits on CLOCK_MONOTONIC. */
void rmq_cond_init_monotonic(pthread_cond_t *cond);
/*
** localtime_r and mktime, one caller at a time: the local-time names of
** index files and the month of UNIQ_KEY (MessageClientIDSetter) are made on
** different threads.
*/
void rmq_local_time(time_t t, struct tm *tm);
time_t rmq_local_mktime(struct tm *tm);

#endif
