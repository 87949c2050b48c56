/*
** clock.c: wall and monotonic clocks, monotonic deadlines (see clock.h).
*/
#include "clock.h"

#include <string.h>

static int64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t rmq_now_ms(void) { return clock_ns(CLOCK_REALTIME) / 1000000; }

int64_t rmq_monotonic_ms(void) { return clock_ns(CLOCK_MONOTONIC) / 1000000; }

int64_t rmq_monotonic_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

int64_t rmq_time_add(int64_t t, int64_t ms) {
  int64_t sum;
  if (!__builtin_add_overflow(t, ms, &sum)) return sum;
  return ms > 0 ? INT64_MAX : INT64_MIN;
}

int64_t rmq_timespec_ms(const struct timespec *ts) {
  int64_t ms;
  if (__builtin_mul_overflow((int64_t)ts->tv_sec, 1000, &ms)) {
    return ts->tv_sec > 0 ? INT64_MAX : INT64_MIN;
  }
  return rmq_time_add(ms, ts->tv_nsec / 1000000);
}

void rmq_deadline_in(struct timespec *ts, int64_t ms) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  if (ms <= 0) return;
  if (ms > RMQ_LONGEST_WAIT_MS) ms = RMQ_LONGEST_WAIT_MS;
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (ms % 1000) * 1000000;
  if (ts->tv_nsec >= 1000000000) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000;
  }
}

void rmq_cond_init_monotonic(pthread_cond_t *cond) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(cond, &attr);
  pthread_condattr_destroy(&attr);
}

/*
** glibc guards its time-zone state with an internal lock that ThreadSanitizer
** cannot see, so it reports the time-zone set-up of one thread against
** another's; one lock of ours orders them visibly. Calls are rare (a new
** index file, a new month).
*/
static pthread_mutex_t local_time_lock = PTHREAD_MUTEX_INITIALIZER;

bool rmq_local_time(time_t t, struct tm *tm) {
  pthread_mutex_lock(&local_time_lock);
  bool ok = localtime_r(&t, tm) != NULL;
  pthread_mutex_unlock(&local_time_lock);
  if (!ok) memset(tm, 0, sizeof *tm);
  return ok;
}

time_t rmq_local_mktime(struct tm *tm) {
  pthread_mutex_lock(&local_time_lock);
  time_t t = mktime(tm);
  pthread_mutex_unlock(&local_time_lock);
  return t;
}
