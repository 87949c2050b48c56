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
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "rmq.h"

/* rmq_now_ms and rmq_monotonic_ms are public: rmq.h. */
int64_t rmq_monotonic_ns(void); /* monotonic clock, ns */
/*
** t + ms, stopped at INT64_MAX (or INT64_MIN) instead of wrapping. For the
** sums of a time and a duration whose time comes from disk (a record's store
** time, a file's mtime), which may be anything: the settings' limits keep
** the engine's own sums far from the ends.
*/
int64_t rmq_time_add(int64_t t, int64_t ms);
/* A timespec in ms (a file's mtime), stopped at the ends of int64. */
int64_t rmq_timespec_ms(const struct timespec *ts);
/*
** The longest wait one deadline covers: 2^31 ms (24 days), so that the
** seconds of a deadline cannot overflow. A longer wait wakes early; every
** caller waits in a loop that looks again.
*/
#define RMQ_LONGEST_WAIT_MS ((int64_t)INT32_MAX)
/*
** An absolute CLOCK_MONOTONIC deadline ms from now, for
** pthread_cond_timedwait: now when ms <= 0, at most RMQ_LONGEST_WAIT_MS ahead.
*/
void rmq_deadline_in(struct timespec *ts, int64_t ms);
/* Initialise a condition variable that waits on CLOCK_MONOTONIC. */
void rmq_cond_init_monotonic(pthread_cond_t *cond);
/*
** localtime_r and mktime, one caller at a time: the local-time names of
** index files and the month of UNIQ_KEY (MessageClientIDSetter) are made on
** different threads. rmq_local_time returns false, with *tm zeroed, when t
** is beyond what struct tm holds (a time stopped at INT64_MAX).
*/
bool rmq_local_time(time_t t, struct tm *tm);
time_t rmq_local_mktime(struct tm *tm);

#endif
