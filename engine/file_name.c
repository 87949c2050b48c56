/*
** file_name.c: store file names from offsets and times, and back.
*/
#include "file_name.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "clock.h"

/* Writes v (>= 0) as exactly `width` decimal digits, keeping the low ones. */
static char *put_digits(char *out, int64_t v, int width) {
  for (int i = width - 1; i >= 0; i--) {
    out[i] = (char)('0' + v % 10);
    v /= 10;
  }
  return out + width;
}

void rmq_file_name(int64_t offset, char out[21]) { snprintf(out, 21, "%020" PRId64, offset); }

int rmq_file_name_parse(const char *name, int64_t *offset) {
  int64_t v = 0;
  for (int i = 0; i < 20; i++) {
    if (name[i] < '0' || name[i] > '9') return -1;
    int d = name[i] - '0';
    if (v > (INT64_MAX - d) / 10) return -1; /* 20 digits can exceed int64 */
    v = v * 10 + d;
  }
  if (name[20] != '\0') return -1;
  *offset = v;
  return 0;
}

void rmq_index_file_name(int64_t ms, char out[18]) {
  int64_t sec = ms / 1000, milli = ms % 1000;
  if (milli < 0) { /* floor, for the (theoretical) times before 1970 */
    milli += 1000;
    sec--;
  }
  time_t t = (time_t)sec;
  struct tm tm;
  rmq_local_time(t, &tm);
  char *p = put_digits(out, tm.tm_year + 1900, 4);
  p = put_digits(p, tm.tm_mon + 1, 2);
  p = put_digits(p, tm.tm_mday, 2);
  p = put_digits(p, tm.tm_hour, 2);
  p = put_digits(p, tm.tm_min, 2);
  p = put_digits(p, tm.tm_sec, 2);
  put_digits(p, milli, 3)[0] = '\0';
}

int rmq_damaged_dir_make(const char *store_dir, char *out, size_t cap, rmq_err *err) {
  char stamp[32];
  int64_t now = rmq_now_ms();
  time_t secs = (time_t)(now / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", &tm);
  int n = snprintf(out, cap, "%s/damaged", store_dir);
  if (n < 0 || (size_t)n >= cap || (mkdir(out, 0755) != 0 && errno != EEXIST)) {
    return rmq_err_set(err, RMQ_EIO, "cannot create %s: %s", out, strerror(errno));
  }
  n = snprintf(out, cap, "%s/damaged/%s.%03d", store_dir, stamp, (int)(now % 1000));
  if (n < 0 || (size_t)n >= cap || (mkdir(out, 0755) != 0 && errno != EEXIST)) {
    return rmq_err_set(err, RMQ_EIO, "cannot create %s: %s", out, strerror(errno));
  }
  return RMQ_OK;
}
