/*
** config_manager.c: ConfigManager.persist and ConfigManager.load (see
** config_manager.h).
*/
#include "config_manager.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "damaged.h"
#include "file_name.h"
#include "io.h"

/* <path>.tmp and <path>.bak. */
static int config_names(const char *path, char *tmp, char *bak, rmq_err *err) {
  if (path == NULL || path[0] == '\0') return rmq_err_set(err, RMQ_EINVAL, "no config file path");
  if (strlen(path) + sizeof ".tmp" > PATH_MAX) {
    return rmq_err_set(err, RMQ_EINVAL, "config file path %.200s... is longer than %d bytes", path,
                       PATH_MAX - (int)sizeof ".tmp");
  }
  snprintf(tmp, PATH_MAX, "%s.tmp", path);
  snprintf(bak, PATH_MAX, "%s.bak", path);
  return RMQ_OK;
}

/* The directory of path ("." when it names none). */
static void config_dir(const char *path, char *dir) {
  const char *slash = strrchr(path, '/');
  if (slash == NULL) {
    snprintf(dir, PATH_MAX, ".");
  } else {
    snprintf(dir, PATH_MAX, "%.*s", slash == path ? 1 : (int)(slash - path), path);
  }
}

/* mkdir -p of path's directory: <store>/config appears with the first file. */
static int make_dirs(const char *path, rmq_err *err) {
  char dir[PATH_MAX];
  config_dir(path, dir);
  for (char *p = dir + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char saved = *p;
    *p = '\0';
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
      return rmq_err_set(err, RMQ_EIO, "cannot create directory %s: %s", dir, strerror(errno));
    }
    if (saved == '\0') return RMQ_OK;
    *p = saved;
  }
}

/* Writes and fsyncs the whole file (MixAll.string2FileNotSafe, made durable). */
static int write_file(const char *path, const char *data, size_t len, rmq_err *err) {
  int fd = rmq_io_open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return rmq_err_set(err, RMQ_EIO, "cannot create %s: %s", path, strerror(errno));
  int rc = RMQ_OK;
  ssize_t n = rmq_io_pwrite(fd, data, len, 0);
  if (n < 0) {
    rc = rmq_err_set(err, RMQ_EIO, "cannot write %s: %s", path, strerror(errno));
  } else if ((size_t)n != len) {
    rc = rmq_err_set(err, RMQ_EIO, "cannot write %s: wrote %zd of %zu bytes", path, n, len);
  } else if (rmq_io_fsync(fd) != 0) {
    rc = rmq_err_set(err, RMQ_EIO, "cannot fsync %s: %s", path, strerror(errno));
  }
  close(fd);
  return rc;
}

/* Reads fd to its end into a malloc'd, NUL-terminated *out of *len bytes. */
static int read_fd(int fd, const char *path, char **out, size_t *len, rmq_err *err) {
  size_t cap = 0, n = 0;
  char *buf = NULL;
  for (;;) {
    if (n + 1 >= cap) {
      if (n >= RMQ_CONFIG_MAX_SIZE) {
        free(buf);
        return rmq_err_set(err, RMQ_ECORRUPT, "%s is larger than %d bytes", path,
                           RMQ_CONFIG_MAX_SIZE);
      }
      size_t want = cap ? cap * 2 : 4096;
      if (want > (size_t)RMQ_CONFIG_MAX_SIZE + 1) want = (size_t)RMQ_CONFIG_MAX_SIZE + 1;
      char *p = realloc(buf, want);
      if (p == NULL) {
        free(buf);
        return rmq_err_set(err, RMQ_ENOMEM, "out of memory reading %s", path);
      }
      buf = p, cap = want;
    }
    ssize_t got = rmq_io_pread(fd, buf + n, cap - 1 - n, (off_t)n);
    if (got < 0) {
      free(buf);
      return rmq_err_set(err, RMQ_EIO, "cannot read %s: %s", path, strerror(errno));
    }
    if (got == 0) break;
    n += (size_t)got;
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return RMQ_OK;
}

/* The whole file, as read_fd; *out stays NULL when the file does not exist. */
int rmq_config_read(const char *path, char **out, size_t *len, rmq_err *err) {
  *out = NULL;
  *len = 0;
  int fd = rmq_io_open(path, O_RDONLY, 0);
  if (fd < 0 && errno == ENOENT) return RMQ_OK;
  if (fd < 0) return rmq_err_set(err, RMQ_EIO, "cannot open %s: %s", path, strerror(errno));
  int rc = read_fd(fd, path, out, len, err);
  close(fd);
  return rc;
}

/* Copies the old file to <path>.bak (MixAll.string2File's prevContent). */
static int backup(const char *path, const char *bak, rmq_err *err) {
  char *old;
  size_t len;
  int rc = rmq_config_read(path, &old, &len, err);
  if (rc == RMQ_OK && old != NULL && len > 0) rc = write_file(bak, old, len, err);
  free(old);
  return rc;
}

static int sync_dir(const char *path, rmq_err *err) {
  char dir[PATH_MAX];
  config_dir(path, dir);
  if (rmq_io_fsync_dir(dir) == 0) return RMQ_OK;
  return rmq_err_set(err, RMQ_EIO, "cannot fsync directory %s: %s", dir, strerror(errno));
}

int rmq_config_persist(const char *path, const char *text, size_t len, rmq_err *err) {
  char tmp[PATH_MAX], bak[PATH_MAX];
  int rc = config_names(path, tmp, bak, err);
  if (rc == RMQ_OK) rc = make_dirs(path, err);
  if (rc != RMQ_OK) return rc;
  rc = write_file(tmp, text, len, err);
  if (rc == RMQ_OK) rc = backup(path, bak, err);
  if (rc == RMQ_OK && rename(tmp, path) != 0) {
    rc = rmq_err_set(err, RMQ_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
  }
  if (rc != RMQ_OK) {
    rmq_io_unlink(tmp);
    return rc;
  }
  return sync_dir(path, err);
}

/* What load_one found. */
enum { LOAD_ABSENT, LOAD_DONE, LOAD_FAILED };

/*
** Reads and parses one file. LOAD_FAILED (with err set) when it exists but
** cannot be used and the .bak may help; any other failure is returned.
*/
static int load_one(const char *path, rmq_config_parse_fn parse, void *ctx, int *state,
                    rmq_err *err) {
  char *text;
  size_t len;
  *state = LOAD_FAILED;
  int rc = rmq_config_read(path, &text, &len, err);
  if (rc == RMQ_EIO || rc == RMQ_ECORRUPT) return RMQ_OK;
  if (rc != RMQ_OK) return rc;
  if (text == NULL || len == 0) {
    free(text);
    *state = LOAD_ABSENT;
    return RMQ_OK;
  }
  rmq_err perr = {0};
  rc = parse(ctx, text, len, &perr);
  free(text);
  if (rc == RMQ_OK) {
    *state = LOAD_DONE;
    return RMQ_OK;
  }
  rmq_err_set(err, rc, "%s: %s", path, perr.msg);
  return rc == RMQ_ECORRUPT ? RMQ_OK : rc;
}

int rmq_config_load(const char *path, rmq_config_parse_fn parse, void *ctx, int *from,
                    rmq_err *err) {
  char tmp[PATH_MAX], bak[PATH_MAX];
  *from = RMQ_CONFIG_NONE;
  int rc = config_names(path, tmp, bak, err);
  if (rc != RMQ_OK) return rc;
  rmq_err file_err = {0}, bak_err = {0};
  int file_state, bak_state;
  rc = load_one(path, parse, ctx, &file_state, &file_err);
  if (rc != RMQ_OK) return rmq_err_set(err, rc, "%s", file_err.msg);
  if (file_state == LOAD_DONE) return *from = RMQ_CONFIG_FILE, RMQ_OK;
  rc = load_one(bak, parse, ctx, &bak_state, &bak_err);
  if (rc != RMQ_OK) return rmq_err_set(err, rc, "%s", bak_err.msg);
  if (bak_state == LOAD_DONE) return *from = RMQ_CONFIG_BAK, RMQ_OK;
  if (file_state == LOAD_ABSENT && bak_state == LOAD_ABSENT) return RMQ_OK;
  if (file_state == LOAD_ABSENT) return rmq_err_set(err, bak_err.code, "%s", bak_err.msg);
  if (bak_state == LOAD_ABSENT) {
    return rmq_err_set(err, file_err.code, "%s; no %s to fall back to", file_err.msg, bak);
  }
  return rmq_err_set(err, file_err.code, "%s; and %s", file_err.msg, bak_err.msg);
}

/* ------------------------------------------------------------- damage */

/* One copy through salvage; a copy that cannot be read at all is damaged as a whole. */
static int examine_copy(const char *path, rmq_config_salvage_fn salvage, void *ctx,
                        rmq_config_copy *c, rmq_err *err) {
  char *text;
  size_t len;
  rmq_err read_err = {0};
  struct stat st;
  *c = (rmq_config_copy){.state = RMQ_CONFIG_ABSENT, .damage = {.at = -1}};
  int rc = rmq_config_read(path, &text, &len, &read_err);
  if (rc == RMQ_EIO || rc == RMQ_ECORRUPT) {
    c->state = RMQ_CONFIG_DAMAGED;
    c->size = stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
    snprintf(c->damage.why, sizeof c->damage.why, "%.255s", read_err.msg);
    return RMQ_OK;
  }
  if (rc != RMQ_OK) return rmq_err_set(err, rc, "%s", read_err.msg);
  if (text != NULL && len > 0) {
    c->size = (int64_t)len;
    rc = salvage(ctx, text, len, &c->damage, err);
    c->state = c->damage.at >= 0 ? RMQ_CONFIG_DAMAGED : RMQ_CONFIG_SOUND;
  }
  free(text);
  return rc;
}

int rmq_config_examine(const char *path, rmq_config_salvage_fn salvage, void *ctx,
                       rmq_config_copy *file, rmq_config_copy *bak, rmq_err *err) {
  char tmp[PATH_MAX], bak_path[PATH_MAX];
  int rc = config_names(path, tmp, bak_path, err);
  if (rc == RMQ_OK) rc = examine_copy(bak_path, salvage, ctx, bak, err);
  return rc == RMQ_OK ? examine_copy(path, salvage, ctx, file, err) : rc;
}

bool rmq_config_needs_repair(const rmq_config_copy *file, const rmq_config_copy *bak) {
  return file->state == RMQ_CONFIG_DAMAGED ||
         (file->state == RMQ_CONFIG_ABSENT && bak->state == RMQ_CONFIG_DAMAGED);
}

/* Rename from into dir under its own name. */
static int move_copy(const char *from, const char *dir, rmq_err *err) {
  const char *slash = strrchr(from, '/');
  char to[PATH_MAX];
  if (snprintf(to, sizeof to, "%s/%s", dir, slash ? slash + 1 : from) >= (int)sizeof to) {
    return rmq_err_set(err, RMQ_EINVAL, "the path %s/%s is longer than %d bytes", dir,
                       slash ? slash + 1 : from, PATH_MAX - 1);
  }
  if (rename(from, to) == 0) return RMQ_OK;
  return rmq_err_set(err, RMQ_EIO, "cannot move %s to %s: %s", from, to, strerror(errno));
}

int rmq_config_set_aside(const char *store_dir, const char *path, const rmq_config_copy *file,
                         const rmq_config_copy *bak, char *damaged_dir, size_t cap, int64_t *moved,
                         rmq_err *err) {
  char tmp[PATH_MAX], bak_path[PATH_MAX];
  int rc = config_names(path, tmp, bak_path, err);
  if (rc == RMQ_OK && damaged_dir[0] == '\0') {
    rc = rmq_damaged_dir(store_dir, damaged_dir, cap, err);
  }
  if (rc == RMQ_OK && file->state == RMQ_CONFIG_DAMAGED) {
    rc = move_copy(path, damaged_dir, err);
    if (rc == RMQ_OK) *moved += file->size;
  }
  if (rc == RMQ_OK && bak->state == RMQ_CONFIG_DAMAGED) {
    rc = move_copy(bak_path, damaged_dir, err);
    if (rc == RMQ_OK) *moved += bak->size;
  }
  if (rc == RMQ_OK && rmq_io_fsync_dir(damaged_dir) != 0) {
    rc = rmq_err_set(err, RMQ_EIO, "cannot fsync directory %s: %s", damaged_dir, strerror(errno));
  }
  return rc == RMQ_OK ? sync_dir(path, err) : rc;
}

void rmq_config_repair_hint(rmq_err *err, const char *store_dir) {
  size_t n = strlen(err->msg);
  snprintf(err->msg + n, sizeof err->msg - n,
           "; run SELECT rocketmq_repair('%s') to move it aside into %s/damaged/ keeping the "
           "entries that still read",
           store_dir, store_dir);
}
