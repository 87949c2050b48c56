/*
** commitlog_recover.c: recovery of the CommitLog (see commitlog_recover.h).
*/
#include "commitlog_recover.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commitlog_iter.h"
#include "damaged.h"
#include "file_name.h"
#include "io.h"
#include "rmq.h"

/* ------------------------------------------------------------- recovery */

/* The segment abnormal recovery starts from (CommitLog.isMappedFileMatchedRecover). */
static int abnormal_start_index(rmq_commitlog *cl, rmq_checkpoint *cp) {
  int64_t min_ts = rmq_checkpoint_min_timestamp(cp);
  for (int i = rmq_mfq_count(&cl->mfq) - 1; i >= 0; i--) {
    rmq_mapped_file *mf = rmq_mfq_get(&cl->mfq, i);
    if (!mf) continue;
    int32_t magic = rmq_get32(mf->mapped + RMQ_POS_MAGIC);
    int32_t sys_flag = rmq_get32(mf->mapped + RMQ_POS_SYSFLAG);
    int64_t ts = rmq_get64(mf->mapped + RMQ_POS_STORE_TIMESTAMP(sys_flag));
    rmq_mapped_file_release(mf);
    if ((magic == RMQ_MAGIC_V1 || magic == RMQ_MAGIC_V2) && ts != 0 && ts <= min_ts) return i;
  }
  return 0;
}

typedef struct recover_scan {
  int64_t end;            /* offset after the last valid record */
  rmq_decode_status stop; /* why the scan stopped */
  int64_t stop_time;      /* store time of the unsound record there, -1 when unreadable */
} recover_scan;

static void scan_segments(rmq_commitlog *cl, int index, rmq_record_cb cb, void *ctx,
                          recover_scan *out) {
  rmq_mapped_file *mf = rmq_mfq_get(&cl->mfq, index);
  out->end = mf ? mf->file_from_offset : 0;
  out->stop = RMQ_DECODE_BAD_MAGIC;
  out->stop_time = -1;
  if (!mf) return;
  rmq_mapped_file_release(mf);
  rmq_commitlog_iter it;
  rmq_commitlog_record rec;
  rmq_cl_iter_start(&it, cl, out->end, INT64_MAX,
                    RMQ_CL_ITER_WHOLE_SEGMENTS | RMQ_CL_ITER_CHECK_CRC | RMQ_CL_ITER_STRICT);
  while (rmq_commitlog_iter_next(&it, &rec)) {
    if (rec.kind == RMQ_RECORD_MESSAGE) {
      if (cb) cb(ctx, &rec.m);
      out->end = rec.offset + rec.size;
      continue;
    }
    /* A BLANK ends the log unless a later segment follows. */
    out->end = rec.offset;
    out->stop = rec.status;
    out->stop_time = rec.header ? rec.m.store_timestamp : -1;
  }
}

/*
** Where the bytes from position pos of mf end: a torn batch holds zeros
** only within a record (its held-back head, a body), so the scan stops at
** the first run of zeros longer than a record can be, or at the segment's
** end; reading a whole pre-allocated segment would fault in a gigabyte of
** zeros. pos itself when only zeros follow.
*/
static int32_t bytes_end(rmq_commitlog *cl, rmq_mapped_file *mf, int32_t pos) {
  int64_t gap = (int64_t)cl->cfg.max_message_size + RMQ_RECORD_SLACK + RMQ_OS_PAGE_SIZE;
  int32_t last = pos;
  for (int32_t i = pos; i < mf->file_size && i - last <= gap; i++) {
    if (mf->mapped[i] != 0) last = i + 1;
  }
  return last;
}

/*
** Count the CRC-sound records that start in [from, to) of mf, found by
** their magic code wherever they start; *min_time: the earliest store time.
** Returns where the last one ends, or from.
*/
static int32_t sound_records_in(rmq_mapped_file *mf, int32_t from, int32_t to, int *n,
                                int64_t *min_time) {
  int32_t end = from;
  for (int32_t p = from; p + 8 <= to; p++) {
    int32_t magic = rmq_get32(mf->mapped + p + RMQ_POS_MAGIC);
    rmq_message m;
    if ((magic != RMQ_MAGIC_V1 && magic != RMQ_MAGIC_V2) ||
        rmq_message_decode(mf->mapped + p, (size_t)(mf->file_size - p), true, &m) !=
            RMQ_DECODE_OK) {
      continue;
    }
    (*n)++;
    if (m.store_timestamp < *min_time) *min_time = m.store_timestamp;
    p += m.total_size - 1;
    end = p + 1;
  }
  return end;
}

/*
** Where the data from position pos of mf ends: its last non-zero byte, or
** the end of its last sound record (which may end in zeros). *n and
** *min_time as sound_records_in.
*/
static int32_t data_end(rmq_commitlog *cl, rmq_mapped_file *mf, int32_t pos, int *n,
                        int64_t *min_time) {
  int32_t to = bytes_end(cl, mf, pos);
  int32_t sound_end = sound_records_in(mf, pos, to, n, min_time);
  return sound_end > to ? sound_end : to;
}

/* What lies after the recovered end: a torn tail, or damage. */
typedef struct beyond_end {
  int64_t tail_to;      /* where the bytes after the end stop, in its segment */
  int sound;            /* CRC-sound records after the end */
  int later_with_bytes; /* later segments that hold bytes */
  int later_empty;      /* later segments of zeros */
  int64_t min_time;     /* earliest store time of a record after the end */
} beyond_end;

static void look_beyond(rmq_commitlog *cl, const recover_scan *scan, beyond_end *b) {
  memset(b, 0, sizeof *b);
  b->tail_to = scan->end;
  b->min_time = scan->stop_time >= 0 ? scan->stop_time : INT64_MAX;
  for (int i = 0; i < rmq_mfq_count(&cl->mfq); i++) {
    rmq_mapped_file *mf = rmq_mfq_get(&cl->mfq, i);
    if (!mf) continue;
    int64_t seg_end = mf->file_from_offset + mf->file_size;
    if (seg_end > scan->end &&
        (mf->file_from_offset > scan->end || scan->stop != RMQ_DECODE_BLANK)) {
      int32_t from = mf->file_from_offset > scan->end ? 0 : (int32_t)(scan->end % mf->file_size);
      int32_t to = data_end(cl, mf, from, &b->sound, &b->min_time);
      if (mf->file_from_offset <= scan->end) {
        b->tail_to = mf->file_from_offset + to;
      } else if (to > 0) {
        b->later_with_bytes++;
      } else {
        b->later_empty++;
      }
    }
    rmq_mapped_file_release(mf);
  }
}

/*
** Bytes after the recovered end are a torn tail when the store was not
** closed cleanly, no later segment holds bytes, and nothing after the end
** was stored before the checkpoint's physicMsgTimestamp (a crash tears only
** what was never flushed). Anything else is damage.
*/
static bool is_damage(const rmq_recovery *r, const recover_scan *scan, const beyond_end *b) {
  if (b->later_with_bytes > 0) return true;
  if (r->last_exit_ok) return b->tail_to > scan->end;
  return b->min_time < atomic_load(&r->cp->physic_msg_timestamp);
}

/* The segment that holds offset (or the first after it): its path, for messages. */
static void segment_path(rmq_commitlog *cl, int64_t offset, char *out, size_t cap) {
  char name[21];
  rmq_file_name(offset - offset % cl->mfq.file_size, name);
  snprintf(out, cap, "%s/%s", cl->mfq.dir, name);
}

/* The store's directory: the commit log's parent. */
static void store_dir_of(rmq_commitlog *cl, char *out, size_t cap) {
  const char *slash = strrchr(cl->mfq.dir, '/');
  int n = slash ? (int)(slash - cl->mfq.dir) : 1;
  snprintf(out, cap, "%.*s", n, slash ? cl->mfq.dir : ".");
}

static int damage_error(rmq_commitlog *cl, const recover_scan *scan, const beyond_end *b,
                        rmq_err *err) {
  char path[4096], dir[4096];
  segment_path(cl, scan->end, path, sizeof path);
  store_dir_of(cl, dir, sizeof dir);
  return rmq_err_set(err, RMQ_ECORRUPT,
                     "%s is damaged at offset %lld (%s); %d sound record(s) follow%s; run SELECT "
                     "rocketmq_repair('%s') to move the damaged part aside into %s/damaged/",
                     path, (long long)scan->end, rmq_decode_status_name(scan->stop), b->sound,
                     b->later_with_bytes ? " in this and later segments" : "", dir, dir);
}

/* Create <store>/damaged/<UTC time> for what recovery or a repair moves aside. */
static int make_damaged_dir(rmq_commitlog *cl, char *out, size_t cap, rmq_err *err) {
  char store[4096];
  store_dir_of(cl, store, sizeof store);
  return rmq_damaged_dir(store, out, cap, err);
}

/*
** Copy [from, to) of the log into dir, in a file named by the offset of its
** first byte (as a segment is), then zero it in the log and force both to
** disk: later appends may end short of it, and a later recovery would take
** its sound records for data after theirs.
*/
static int move_tail(rmq_commitlog *cl, const char *dir, int64_t from, int64_t to, rmq_err *err) {
  rmq_mapped_file *mf = rmq_mfq_find(&cl->mfq, from);
  if (!mf) return RMQ_OK;
  char name[21], path[4200];
  rmq_file_name(from, name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int32_t pos = (int32_t)(from - mf->file_from_offset);
  size_t len = (size_t)(to - from);
  int fd = rmq_io_open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
  errno = 0;
  int rc = fd >= 0 && rmq_io_pwrite(fd, mf->mapped + pos, len, 0) == (ssize_t)len &&
                   rmq_io_fsync(fd) == 0
               ? RMQ_OK
               : rmq_err_set(err, RMQ_EIO, "cannot write %s: %s", path,
                             errno ? strerror(errno) : "short write");
  if (fd >= 0) close(fd);
  if (rc == RMQ_OK) rc = rmq_mapped_file_sync_dir(dir, err);
  if (rc == RMQ_OK) {
    rmq_mapped_file_zero(mf, pos, len);
    rc = rmq_mapped_file_fsync(mf, err);
  }
  rmq_mapped_file_release(mf);
  return rc;
}

/* Link the segments after offset that hold bytes into dir: truncation unlinks them from the log. */
static int move_segments(rmq_commitlog *cl, const char *dir, int64_t offset, int64_t *moved,
                         rmq_err *err) {
  int rc = RMQ_OK;
  for (int i = 0; rc == RMQ_OK && i < rmq_mfq_count(&cl->mfq); i++) {
    rmq_mapped_file *mf = rmq_mfq_get(&cl->mfq, i);
    if (!mf) continue;
    int ignored = 0;
    int64_t no_time = 0;
    int32_t bytes = mf->file_from_offset > offset ? data_end(cl, mf, 0, &ignored, &no_time) : 0;
    if (bytes > 0) {
      char path[4200];
      snprintf(path, sizeof path, "%s/%s", dir, strrchr(mf->path, '/') + 1);
      if (link(mf->path, path) != 0) {
        rc = rmq_err_set(err, RMQ_EIO, "cannot link %s to %s: %s", mf->path, path, strerror(errno));
      }
      *moved += bytes;
    }
    rmq_mapped_file_release(mf);
  }
  return rc == RMQ_OK ? rmq_mapped_file_sync_dir(dir, err) : rc;
}

static int move_aside(rmq_commitlog *cl, const recover_scan *scan, const beyond_end *b,
                      rmq_recovery *r, rmq_err *err) {
  int rc = r->moved_to[0] ? RMQ_OK : make_damaged_dir(cl, r->moved_to, sizeof r->moved_to, err);
  if (rc == RMQ_OK && b->tail_to > scan->end) {
    rc = move_tail(cl, r->moved_to, scan->end, b->tail_to, err);
    r->moved += b->tail_to - scan->end;
  }
  if (rc == RMQ_OK && b->later_with_bytes) {
    rc = move_segments(cl, r->moved_to, scan->end, &r->moved, err);
  }
  return rc;
}

static void write_report(rmq_commitlog *cl, const rmq_recovery *r, const recover_scan *scan,
                         const beyond_end *b, char *out, size_t cap) {
  int n = snprintf(out, cap, "%s: commitlog ends at offset %lld",
                   !cl->mfq.writable ? "read-only scan"
                   : r->repair       ? "repair"
                   : r->last_exit_ok ? "normal recovery"
                                     : "abnormal recovery",
                   (long long)scan->end);
  if (n < 0 || (size_t)n >= cap) return;
  char store[4096];
  store_dir_of(cl, store, sizeof store);
  if (b->tail_to > scan->end) {
    n += snprintf(out + n, cap - (size_t)n, ", where a damaged record was cut off (%s)",
                  rmq_decode_status_name(scan->stop));
  }
  if (r->moved_to[0] && (size_t)n < cap) {
    snprintf(out + n, cap - (size_t)n, "; %lld byte(s) (%d sound record(s)) moved to %s",
             (long long)r->moved, b->sound, r->moved_to + strlen(store) + 1);
  } else if ((size_t)n < cap) {
    snprintf(out + n, cap - (size_t)n, "; %d empty segment(s) after it %s", b->later_empty,
             cl->mfq.writable ? "deleted" : "ignored");
  }
}

/* The largest segment file's size in dir: a short segment is damage, not the size. */
static int32_t largest_segment(const char *dir) {
  DIR *d = opendir(dir);
  int32_t size = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    int64_t off;
    struct stat st;
    if (rmq_file_name_parse(e->d_name, &off) == 0 && fstatat(dirfd(d), e->d_name, &st, 0) == 0 &&
        st.st_size > size && st.st_size <= INT32_MAX) {
      size = (int32_t)st.st_size;
    }
  }
  if (d) closedir(d);
  return size;
}

/* Rename every segment file that starts at or after `from` into r->moved_to. */
static int set_aside_from(rmq_commitlog *cl, int64_t from, rmq_recovery *r, rmq_err *err) {
  DIR *d = opendir(cl->mfq.dir);
  if (!d) return rmq_err_set(err, RMQ_EIO, "cannot list %s: %s", cl->mfq.dir, strerror(errno));
  int rc = RMQ_OK;
  struct dirent *e;
  while (rc == RMQ_OK && (e = readdir(d)) != NULL) {
    int64_t off;
    struct stat st;
    if (rmq_file_name_parse(e->d_name, &off) != 0 || off < from) continue;
    char src[4400], dst[4400];
    snprintf(src, sizeof src, "%s/%s", cl->mfq.dir, e->d_name);
    snprintf(dst, sizeof dst, "%s/%s", r->moved_to, e->d_name);
    if (stat(src, &st) != 0 || rename(src, dst) != 0) {
      rc = rmq_err_set(err, RMQ_EIO, "cannot move %s to %s: %s", src, dst, strerror(errno));
    }
    r->moved += (int64_t)st.st_size;
  }
  closedir(d);
  if (rc == RMQ_OK) rc = rmq_mapped_file_sync_dir(r->moved_to, err);
  return rc == RMQ_OK ? rmq_mapped_file_sync_dir(cl->mfq.dir, err) : rc;
}

int rmq_commitlog_load_for_repair(rmq_commitlog *cl, rmq_recovery *r, rmq_err *err) {
  int32_t size = largest_segment(cl->mfq.dir);
  if (size > 0) cl->mfq.file_size = cl->cfg.file_size = size;
  int rc = rmq_mfq_load(&cl->mfq, false, err);
  if (rc != RMQ_ECORRUPT) return rc;
  rmq_err_clear(err);
  rmq_mapped_file *last = rmq_mfq_last(&cl->mfq);
  int64_t from = last ? last->file_from_offset + size : 0;
  if (last) rmq_mapped_file_release(last);
  rc = make_damaged_dir(cl, r->moved_to, sizeof r->moved_to, err);
  return rc == RMQ_OK ? set_aside_from(cl, from, r, err) : rc;
}

/*
** The first segment before index `before` that does not start with a
** record (a 0-byte file a writer sized, or zeros), or `before`: the scan
** must start there, lest it miss a hole that it does not read.
*/
static int first_empty_before(rmq_commitlog *cl, int before) {
  for (int i = 0; i < before; i++) {
    rmq_mapped_file *mf = rmq_mfq_get(&cl->mfq, i);
    bool empty = mf && rmq_get32(mf->mapped) == 0;
    if (mf) rmq_mapped_file_release(mf);
    if (empty) return i;
  }
  return before;
}

int rmq_commitlog_recover(rmq_commitlog *cl, rmq_recovery *r, rmq_err *err) {
  int count = rmq_mfq_count(&cl->mfq);
  recover_scan scan = {.stop_time = -1};
  if (count > 0) {
    int start = r->last_exit_ok ? (count > 3 ? count - 3 : 0) : abnormal_start_index(cl, r->cp);
    if (cl->mfq.writable) start = first_empty_before(cl, start);
    scan_segments(cl, start, r->last_exit_ok ? NULL : r->on_record, r->ctx, &scan);
  }
  beyond_end b;
  look_beyond(cl, &scan, &b);
  r->end = scan.end;
  if (cl->mfq.writable && is_damage(r, &scan, &b) && !r->repair) {
    return damage_error(cl, &scan, &b, err);
  }
  bool cut = b.tail_to > scan.end || b.later_with_bytes > 0;
  if (cl->mfq.writable && cut && move_aside(cl, &scan, &b, r, err) != RMQ_OK) return err->code;
  rmq_mfq_truncate_dirty(&cl->mfq, scan.end);
  write_report(cl, r, &scan, &b, r->report, sizeof r->report);
  return RMQ_OK;
}
