/*
** damaged.c: the directory of what was set aside (see damaged.h).
*/
#include "damaged.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "clock.h"
#include "io.h"

static int make_dir(const char *path, rmq_err *err) {
  if (mkdir(path, 0755) == 0 || errno == EEXIST) return RMQ_OK;
  return rmq_err_set(err, RMQ_EIO, "cannot create %s: %s", path, strerror(errno));
}

int rmq_damaged_dir(const char *store, char *out, size_t cap, rmq_err *err) {
  char stamp[32];
  int64_t now = rmq_now_ms();
  time_t secs = (time_t)(now / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", &tm);
  int n = snprintf(out, cap, "%s/damaged", store);
  if (n < 0 || (size_t)n >= cap)
    return rmq_err_set(err, RMQ_EIO, "store path %s is too long", store);
  int rc = make_dir(out, err);
  n = snprintf(out, cap, "%s/damaged/%s.%03d", store, stamp, (int)(now % 1000));
  if (n < 0 || (size_t)n >= cap)
    return rmq_err_set(err, RMQ_EIO, "store path %s is too long", store);
  return rc == RMQ_OK ? make_dir(out, err) : rc;
}

/* mkdir -p of base/sub. */
static int make_dirs(const char *base, const char *sub, char *out, size_t cap, rmq_err *err) {
  int n = snprintf(out, cap, "%s/%s", base, sub);
  if (n < 0 || (size_t)n >= cap)
    return rmq_err_set(err, RMQ_EIO, "path %s/%s is too long", base, sub);
  for (char *p = out + strlen(base) + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char saved = *p;
    *p = '\0';
    int rc = make_dir(out, err);
    *p = saved;
    if (rc != RMQ_OK || saved == '\0') return rc;
  }
}

int rmq_damaged_move(const char *dir, const char *name, const char *damaged_dir, const char *sub,
                     int64_t *moved, rmq_err *err) {
  char to_dir[PATH_MAX], from[PATH_MAX], to[PATH_MAX];
  int rc = make_dirs(damaged_dir, sub, to_dir, sizeof to_dir, err);
  if (rc != RMQ_OK) return rc;
  snprintf(from, sizeof from, "%s/%s", dir, name);
  if (snprintf(to, sizeof to, "%s/%s", to_dir, name) >= (int)sizeof to) {
    return rmq_err_set(err, RMQ_EIO, "path %s/%s is too long", to_dir, name);
  }
  struct stat st;
  int64_t size = stat(from, &st) == 0 ? (int64_t)st.st_size : 0;
  if (rename(from, to) != 0) {
    return rmq_err_set(err, RMQ_EIO, "cannot move %s to %s: %s", from, to, strerror(errno));
  }
  if (moved) *moved += size;
  return rmq_io_fsync_dir(dir) == 0
             ? RMQ_OK
             : rmq_err_set(err, RMQ_EIO, "cannot sync directory %s: %s", dir, strerror(errno));
}
