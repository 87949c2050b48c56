/*
** clean.c: CleanCommitLogService and CleanConsumeQueueService, and the dry
** run of their next pass (see clean.h).
**
** The rule for commit-log segments is segment_goes(), which the pass and
** the dry run both walk; consume-queue and index files follow
** rmq_cq_expired_files and rmq_index_service_expired_files, which their
** delete functions use too.
*/
#include "clean.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "clock.h"
#include "io.h"
#include "service_thread.h"
#include "shared_state.h"

struct rmq_clean_service {
  const char *dir;
  const rmq_config *cfg;
  rmq_commitlog *cl;
  rmq_cq_table *cqs;
  rmq_index_service *index;
  rmq_retired_files *retired;
  rmq_service_thread thread;
  pthread_mutex_t pass_mu;  /* one pass at a time; a dry run reads under it */
  int64_t last_min_offset;  /* CleanConsumeQueueService.lastPhysicalMinOffset, under pass_mu */
  pthread_mutex_t pause_mu; /* the pauses between deletions, which stopping cuts short */
  pthread_cond_t pause_cond;
  bool stopping; /* under pause_mu */
  _Atomic int64_t runs;
  _Atomic int64_t files_deleted;
  rmq_clean_deleted_fn deleted_fn; /* under pass_mu */
  void *deleted_ctx;
};

/* ------------------------------------------------------------ the rule */

/* What a pass starting now sees. */
typedef struct clean_plan {
  const rmq_config *cfg;
  int64_t now_ms;
  int percent;     /* disk used by the commit log's disk, -1 unknown */
  int hour;        /* local hour of day */
  bool time_up;    /* the hour is one of delete_when's */
  bool space_full; /* isSpaceToDelete: above disk_max_used_ratio, or unknown */
  bool at_once;    /* cleanImmediately: above disk_clean_forcibly_ratio */
  bool manual;     /* rmq_store_clean */
} clean_plan;

/* UtilAll.isItTimeToDo: is hour one of the ';'-separated hours of when? */
static bool is_delete_hour(const char *when, int hour) {
  for (const char *p = when; *p;) {
    char *end;
    long h = strtol(p, &end, 10);
    if (end != p && h == hour) return true;
    p = *end ? end + 1 : end;
  }
  return false;
}

static void make_plan(rmq_clean_service *cs, bool manual, clean_plan *p) {
  const rmq_config *cfg = cs->cfg;
  struct tm tm;
  *p = (clean_plan){.cfg = cfg, .now_ms = rmq_now_ms(), .manual = manual};
  rmq_local_time((time_t)(p->now_ms / 1000), &tm);
  p->hour = tm.tm_hour;
  p->time_up = is_delete_hour(cfg->delete_when, p->hour);
  p->percent = rmq_io_disk_used_percent(cs->cl->mfq.dir);
  p->space_full = p->percent < 0 || p->percent > cfg->disk_max_used_ratio;
  p->at_once = p->percent > cfg->disk_clean_forcibly_ratio;
}

static bool triggered(const clean_plan *p) {
  return p->time_up || p->space_full || p->at_once || p->manual;
}

/* The highest disk level the disk is above, by its setting's name. */
static const char *disk_level(const clean_plan *p, int *level) {
  const rmq_config *cfg = p->cfg;
  if (p->percent > cfg->disk_warning_ratio) {
    *level = cfg->disk_warning_ratio;
    return "disk_warning_ratio";
  }
  if (p->percent > cfg->disk_clean_forcibly_ratio) {
    *level = cfg->disk_clean_forcibly_ratio;
    return "disk_clean_forcibly_ratio";
  }
  *level = cfg->disk_max_used_ratio;
  return "disk_max_used_ratio";
}

/* Why expired segments go in this pass. */
static void trigger_reason(const clean_plan *p, char *out, size_t cap) {
  int level;
  const char *name = disk_level(p, &level);
  if (p->time_up) {
    snprintf(out, cap, "%02d is a delete_when hour", p->hour);
  } else if (p->manual) {
    snprintf(out, cap, "cleaning was asked for");
  } else if (p->percent < 0) {
    snprintf(out, cap, "the disk's use cannot be measured");
  } else {
    snprintf(out, cap, "disk %d%% used, above %s %d%%", p->percent, name, level);
  }
}

int64_t rmq_clean_expires_at(int64_t mtime_ms, int file_reserved_hours) {
  return rmq_time_add(mtime_ms, (int64_t)file_reserved_hours * 3600000);
}

static bool segment_expired(const clean_plan *p, int64_t mtime_ms) {
  return p->now_ms >= rmq_clean_expires_at(mtime_ms, p->cfg->file_reserved_hours);
}

/* The segment by itself, last modified at mtime_ms: does this pass delete it? */
static bool segment_due(const clean_plan *p, int64_t mtime_ms, char *why, size_t cap) {
  int hours = p->cfg->file_reserved_hours;
  int64_t expires = rmq_clean_expires_at(mtime_ms, hours);
  bool expired = segment_expired(p, mtime_ms);
  if (expired && triggered(p)) {
    char trigger[128];
    trigger_reason(p, trigger, sizeof trigger);
    snprintf(why, cap, "expired (modified more than %d h ago), %s", hours, trigger);
    return true;
  }
  if (expired) {
    snprintf(why, cap, "expired; waits for a delete_when hour (%s)", p->cfg->delete_when);
    return false;
  }
  if (p->at_once) {
    int level;
    const char *name = disk_level(p, &level);
    snprintf(why, cap, "disk %d%% used, above %s %d%%: deleted before expiry", p->percent, name,
             level);
    return true;
  }
  struct tm tm;
  char until[32];
  if (!rmq_local_time((time_t)(expires / 1000), &tm)) {
    snprintf(why, cap,
             "kept: modified at %lld ms since the epoch, too far ahead to expire "
             "(file_reserved_hours %d)",
             (long long)mtime_ms, hours);
    return false;
  }
  strftime(until, sizeof until, "%Y-%m-%d %H:%M", &tm);
  snprintf(why, cap, "kept until %s (file_reserved_hours %d)", until, hours);
  return false;
}

/* MappedFile.getLastModifiedTimestamp. */
static int64_t mtime_ms_of(const struct stat *st) { return rmq_timespec_ms(&st->st_mtim); }

/* A walk over the commit log's segments, oldest first (deleteExpiredFileByTime). */
typedef struct segment_walk {
  const clean_plan *plan;
  int deleted; /* segments the walk deletes so far */
  bool kept;   /* a segment was kept: no later one goes (no holes) */
} segment_walk;

/* A segment as the walk sees it. */
typedef struct segment_state {
  int64_t mtime_ms;
  bool current; /* the last one, where the writer appends */
  bool flushed; /* all on disk: the flush services never come back to it */
} segment_state;

static void segment_state_of(rmq_commitlog *cl, rmq_mapped_file *mf, bool current,
                             segment_state *out) {
  struct stat st;
  out->mtime_ms = stat(mf->path, &st) == 0 ? mtime_ms_of(&st) : 0;
  out->current = current;
  out->flushed = mf->file_from_offset + mf->file_size <= rmq_commitlog_flushed_offset(cl);
}

static bool segment_goes(segment_walk *w, const segment_state *seg, char *why, size_t cap) {
  bool goes = false;
  if (seg->current) {
    snprintf(why, cap, "current segment: never deleted");
  } else if (!seg->flushed && segment_expired(w->plan, seg->mtime_ms)) {
    /* Said before any hour it waits for: no pass deletes it until then. */
    snprintf(why, cap, "expired, but not flushed to disk yet: deleted once it is");
  } else if (!segment_due(w->plan, seg->mtime_ms, why, cap)) {
    /* why says it */
  } else if (!seg->flushed) {
    snprintf(why, cap, "not flushed to disk yet: deleted once it is");
  } else if (w->deleted == RMQ_CLEAN_MAX_SEGMENTS) {
    snprintf(why, cap, "beyond the %d segments of one pass", RMQ_CLEAN_MAX_SEGMENTS);
  } else if (w->kept) {
    snprintf(why, cap, "an older segment is kept (no holes)");
  } else {
    goes = true;
  }
  if (goes) {
    w->deleted++;
  } else {
    w->kept = true;
  }
  return goes;
}

/* ------------------------------------------------------------ the pass */

/* Sleep between two deletions; false when the service is stopping. */
static bool pause_between(rmq_clean_service *cs) {
  struct timespec deadline;
  rmq_deadline_in(&deadline, RMQ_CLEAN_DELETE_INTERVAL_MS);
  pthread_mutex_lock(&cs->pause_mu);
  while (!cs->stopping && pthread_cond_timedwait(&cs->pause_cond, &cs->pause_mu, &deadline) == 0) {
  }
  bool go = !cs->stopping;
  pthread_mutex_unlock(&cs->pause_mu);
  return go;
}

/* isSpaceFull: writes are refused above disk_warning_ratio, allowed again below it. */
static void set_disk_full(rmq_clean_service *cs, int percent) {
  bool full = percent > cs->cfg->disk_warning_ratio;
  rmq_commitlog_set_disk_full(cs->cl, full ? percent : 0);
}

static int clean_commitlog(rmq_clean_service *cs, const clean_plan *p) {
  rmq_mapped_file_queue *q = &cs->cl->mfq;
  segment_walk w = {.plan = p};
  char why[256];
  int deleted = 0;
  for (;;) {
    rmq_mapped_file *mf = rmq_mfq_first(q);
    if (mf == NULL) break;
    segment_state seg;
    segment_state_of(cs->cl, mf, rmq_mfq_count(q) == 1, &seg);
    bool goes = segment_goes(&w, &seg, why, sizeof why);
    rmq_mapped_file_release(mf);
    if (!goes || (deleted > 0 && !pause_between(cs)) || !rmq_mfq_delete_first(q)) break;
    deleted++;
  }
  return deleted;
}

/*
** CleanConsumeQueueService.deleteExpiredFiles for a commit log that now
** starts at min, adding to *deleted; *complete is false when stopping cut
** it short. RMQ_ENOMEM when the queues cannot be listed.
*/
static int clean_queues(rmq_clean_service *cs, int64_t min, int *deleted, bool *complete,
                        rmq_err *err) {
  rmq_consume_queue **all;
  int n;
  *complete = false;
  int rc = rmq_cq_table_snapshot(cs->cqs, &all, &n, err);
  if (rc != RMQ_OK) return rc;
  bool go = true;
  for (int i = 0; go && i < n; i++) {
    int d = rmq_cq_delete_expired(all[i], min);
    *deleted += d;
    if (d > 0) go = pause_between(cs);
  }
  free(all);
  if (go) *deleted += rmq_index_service_delete_expired(cs->index, min);
  *complete = go;
  return RMQ_OK;
}

static int run_pass(rmq_clean_service *cs, bool manual, int *deleted, rmq_err *err) {
  pthread_mutex_lock(&cs->pass_mu);
  clean_plan p;
  make_plan(cs, manual, &p);
  set_disk_full(cs, p.percent);
  *deleted = clean_commitlog(cs, &p);
  int64_t min = rmq_commitlog_min_offset(cs->cl);
  int rc = RMQ_OK;
  bool complete = false;
  if (min > cs->last_min_offset) {
    rc = clean_queues(cs, min, deleted, &complete, err);
    if (complete) cs->last_min_offset = min;
  }
  rmq_retired_reap(cs->retired, cs->cfg->clean_grace_ms);
  /* What was deleted may have brought the disk below the warning level. */
  if (*deleted > 0) set_disk_full(cs, rmq_io_disk_used_percent(cs->cl->mfq.dir));
  atomic_fetch_add(&cs->runs, 1);
  atomic_fetch_add(&cs->files_deleted, *deleted);
  if (*deleted > 0 && cs->deleted_fn) cs->deleted_fn(cs->deleted_ctx);
  pthread_mutex_unlock(&cs->pass_mu);
  return rc;
}

void rmq_clean_on_deleted(rmq_clean_service *cs, rmq_clean_deleted_fn fn, void *ctx) {
  pthread_mutex_lock(&cs->pass_mu);
  cs->deleted_fn = fn;
  cs->deleted_ctx = ctx;
  pthread_mutex_unlock(&cs->pass_mu);
}

int rmq_clean_pass(rmq_clean_service *cs, int *deleted, rmq_err *err) {
  return run_pass(cs, true, deleted, err);
}

static void clean_run(rmq_service_thread *st) {
  rmq_clean_service *cs = st->arg;
  rmq_service_thread_wait(st, cs->cfg->clean_first_delay_ms);
  while (!rmq_service_thread_stopped(st)) {
    int deleted;
    rmq_err ignored = {0}; /* the next pass tries again */
    run_pass(cs, false, &deleted, &ignored);
    rmq_service_thread_wait(st, cs->cfg->clean_interval_ms);
  }
}

/* ------------------------------------------------------------ service */

rmq_clean_service *rmq_clean_service_new(const char *dir, const rmq_config *cfg, rmq_commitlog *cl,
                                         rmq_cq_table *cqs, rmq_index_service *index,
                                         rmq_retired_files *retired, rmq_err *err) {
  rmq_clean_service *cs = calloc(1, sizeof *cs);
  if (cs == NULL) {
    rmq_err_set(err, RMQ_ENOMEM, "out of memory");
    return NULL;
  }
  *cs = (rmq_clean_service){
      .dir = dir, .cfg = cfg, .cl = cl, .cqs = cqs, .index = index, .retired = retired};
  pthread_mutex_init(&cs->pass_mu, NULL);
  pthread_mutex_init(&cs->pause_mu, NULL);
  rmq_cond_init_monotonic(&cs->pause_cond);
  rmq_service_thread_init(&cs->thread, "rmq-clean", clean_run, cs);
  return cs;
}

/* A store opened on a full disk refuses writes at once, not after the first pass. */
int rmq_clean_service_start(rmq_clean_service *cs, rmq_err *err) {
  set_disk_full(cs, rmq_io_disk_used_percent(cs->cl->mfq.dir));
  return rmq_service_thread_start(&cs->thread, err);
}

void rmq_clean_service_free(rmq_clean_service *cs) {
  if (cs == NULL) return;
  pthread_mutex_lock(&cs->pause_mu);
  cs->stopping = true;
  pthread_cond_broadcast(&cs->pause_cond);
  pthread_mutex_unlock(&cs->pause_mu);
  rmq_service_thread_shutdown(&cs->thread);
  pthread_cond_destroy(&cs->pause_cond);
  pthread_mutex_destroy(&cs->pause_mu);
  pthread_mutex_destroy(&cs->pass_mu);
  free(cs);
}

void rmq_clean_counts(rmq_clean_service *cs, int64_t *runs, int64_t *files_deleted) {
  *runs = atomic_load(&cs->runs);
  *files_deleted = atomic_load(&cs->files_deleted);
}

/* ------------------------------------------------------------ dry run */

typedef struct segment_verdict {
  int64_t offset;
  bool goes;
  char why[200];
} segment_verdict;

typedef struct forecast {
  rmq_clean_service *cs;
  clean_plan plan;
  segment_verdict *segments; /* the commit log's, oldest first */
  int nsegments;
  int64_t min_after;     /* the commit log's min offset after the pass */
  bool queues_cleaned;   /* it grows: consume queues and index files are cleaned */
  rmq_consume_queue *cq; /* the queue expired_in_cq is for */
  int expired_in_cq;
  rmq_file_fn fn;
  void *ctx;
  char why[256];
} forecast;

/* Walk the segments as the pass would; the min offset after it is the first one kept. */
static int forecast_segments(forecast *f, rmq_err *err) {
  rmq_mapped_file_queue *q = &f->cs->cl->mfq;
  int n = rmq_mfq_count(q);
  f->segments = calloc((size_t)(n > 0 ? n : 1), sizeof *f->segments);
  if (f->segments == NULL) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  segment_walk w = {.plan = &f->plan};
  bool found_min = false;
  for (int i = 0; i < n; i++) {
    rmq_mapped_file *mf = rmq_mfq_get(q, i);
    if (mf == NULL) break;
    segment_verdict *v = &f->segments[f->nsegments++];
    segment_state seg;
    segment_state_of(f->cs->cl, mf, i == n - 1, &seg);
    v->offset = mf->file_from_offset;
    v->goes = segment_goes(&w, &seg, v->why, sizeof v->why);
    rmq_mapped_file_release(mf);
    if (!v->goes && !found_min) {
      f->min_after = v->offset;
      found_min = true;
    }
  }
  f->queues_cleaned = f->min_after > f->cs->last_min_offset;
  return RMQ_OK;
}

static bool parse_offset(const char *name, size_t digits, int64_t *out) {
  if (strlen(name) != digits) return false;
  int64_t v = 0;
  for (size_t i = 0; i < digits; i++) {
    if (name[i] < '0' || name[i] > '9' || v > (INT64_MAX - 9) / 10) return false;
    v = v * 10 + (name[i] - '0');
  }
  *out = v;
  return true;
}

/* A file a pass deleted and a reader still holds: it stays on disk until the reader lets go. */
#define HELD "deleted; a reader still holds it (freed when it lets go)"

static void commitlog_file(forecast *f, const char *name, rmq_file_info *info) {
  int64_t offset;
  if (!parse_offset(name, 20, &offset)) return;
  info->kind = "commitlog";
  info->first_offset = offset;
  info->expires_at_ms = rmq_clean_expires_at(info->mtime_ms, f->cs->cfg->file_reserved_hours);
  for (int i = 0; i < f->nsegments; i++) {
    if (f->segments[i].offset != offset) continue;
    info->would_delete = f->segments[i].goes;
    info->reason = f->segments[i].why;
    return;
  }
  info->reason = offset < rmq_commitlog_min_offset(f->cs->cl)
                     ? HELD
                     : "made ahead for the next segment: not in the log yet";
}

/*
** The verdict on file number pos of count (-1: older than the first, or not
** found), when the first `expired` go by the rule.
*/
static void queue_file_verdict(forecast *f, int pos, int count, int expired, const char *newest,
                               rmq_file_info *info) {
  long long min = (long long)f->min_after;
  if (pos < 0 && f->cs->cl->mfq.writable) {
    info->reason = HELD;
  } else if (pos < 0 || pos >= count) {
    info->reason = "not one of the files the store reads: not subject to retention";
  } else if (pos == count - 1) {
    info->reason = newest;
  } else if (pos >= expired) {
    snprintf(f->why, sizeof f->why, "holds entries at or above %lld", min);
  } else if (f->queues_cleaned) {
    info->would_delete = true;
    snprintf(f->why, sizeof f->why,
             "its last entry is below the commit log's minimum offset %lld after this pass", min);
  } else {
    snprintf(f->why, sizeof f->why,
             "its last entry is below the commit log's minimum offset %lld, which did not grow "
             "since the last pass: deleted when it grows",
             min);
  }
}

static void consumequeue_file(forecast *f, const char *topic, const char *qid, const char *name,
                              rmq_file_info *info) {
  int64_t offset;
  char *end;
  long queue_id = strtol(qid, &end, 10);
  if (!parse_offset(name, 20, &offset) || *end || queue_id < 0 || queue_id > INT32_MAX) return;
  info->kind = "consumequeue";
  info->first_offset = offset / RMQ_CQ_UNIT_SIZE;
  rmq_consume_queue *cq = rmq_cq_table_find(f->cs->cqs, topic, (int32_t)queue_id);
  if (cq == NULL) {
    info->reason = "not one of the queues the store reads: not subject to retention";
    return;
  }
  if (cq != f->cq) {
    f->cq = cq;
    f->expired_in_cq = rmq_cq_expired_files(cq, f->min_after);
  }
  int64_t first = rmq_mfq_min_offset(&cq->mfq);
  int pos = offset < first ? -1 : (int)((offset - first) / cq->mfq.file_size);
  queue_file_verdict(f, pos, rmq_mfq_count(&cq->mfq), f->expired_in_cq, "the queue's current file",
                     info);
}

static void index_file(forecast *f, const char *name, rmq_file_info *info) {
  int64_t stamp;
  if (!parse_offset(name, 17, &stamp)) return;
  info->kind = "index";
  rmq_index_service *index = f->cs->index;
  int count = rmq_index_service_count(index), pos = -1;
  rmq_index_header h;
  char file[18];
  for (int i = 0; i < count && pos < 0; i++) {
    if (rmq_index_service_file_info(index, i, &h, file) && strcmp(file, name) == 0) pos = i;
  }
  if (pos >= 0) info->first_offset = h.begin_phy_offset;
  queue_file_verdict(f, pos, count, rmq_index_service_expired_files(index, f->min_after),
                     "the newest index file: never deleted", info);
}

static bool has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Fill in kind, offsets and the verdict from the file's place under the store. */
static void classify(forecast *f, const char *rel, rmq_file_info *info) {
  char path[PATH_MAX], *part[5];
  int n = 0;
  snprintf(path, sizeof path, "%s", rel);
  for (char *save = NULL, *p = strtok_r(path, "/", &save); p && n < 5;
       p = strtok_r(NULL, "/", &save)) {
    part[n++] = p;
  }
  if (n == 1 &&
      (strcmp(rel, "checkpoint") == 0 || strcmp(rel, "abort") == 0 || strcmp(rel, "lock") == 0)) {
    info->kind = strcmp(rel, "checkpoint") == 0 ? "checkpoint"
                 : strcmp(rel, "abort") == 0    ? "abort"
                                                : "lock";
  } else if (n == 1 && strcmp(rel, RMQ_SHARED_STATE_FILE) == 0) {
    info->kind = "shared";
  } else if (n == 2 && strcmp(part[0], "config") == 0 &&
             (has_suffix(part[1], ".json") || has_suffix(part[1], ".bak"))) {
    info->kind = "config";
  } else if (n == 2 && strcmp(part[0], "commitlog") == 0) {
    commitlog_file(f, part[1], info);
  } else if (n == 2 && strcmp(part[0], "index") == 0) {
    index_file(f, part[1], info);
  } else if (n == 4 && strcmp(part[0], "consumequeue") == 0) {
    consumequeue_file(f, part[1], part[2], part[3], info);
  }
}

static int report_file(forecast *f, const char *rel, const struct stat *st) {
  rmq_file_info info = {.kind = "other",
                        .path = rel,
                        .first_offset = -1,
                        .size = st->st_size,
                        .disk_bytes = (int64_t)st->st_blocks * 512,
                        .mtime_ms = mtime_ms_of(st),
                        .expires_at_ms = -1,
                        .reason = "not subject to retention"};
  f->why[0] = '\0';
  if (S_ISREG(st->st_mode)) classify(f, rel, &info);
  if (f->why[0]) info.reason = f->why;
  return f->fn(f->ctx, &info);
}

static int not_dots(const struct dirent *e) {
  return strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
}

/* a/b, or b when a is empty; false when it does not fit. */
static bool join(char *out, size_t cap, const char *a, const char *b) {
  int n = snprintf(out, cap, "%s%s%s", a, a[0] ? "/" : "", b);
  return n >= 0 && (size_t)n < cap;
}

/* Every file under rel (relative to the store's directory), in name order. */
static int walk_dir(forecast *f, const char *rel, rmq_err *err) {
  char dir[PATH_MAX];
  if (!join(dir, sizeof dir, f->cs->dir, rel)) return RMQ_OK; /* the store's paths fit */
  struct dirent **names;
  int n = scandir(dir, &names, not_dots, alphasort);
  if (n < 0) return rmq_err_set(err, RMQ_EIO, "cannot list %s: %s", dir, strerror(errno));
  int rc = RMQ_OK;
  for (int i = 0; i < n; i++) {
    char child[PATH_MAX], path[PATH_MAX];
    struct stat st;
    if (rc == RMQ_OK && join(child, sizeof child, rel, names[i]->d_name) &&
        join(path, sizeof path, f->cs->dir, child) && lstat(path, &st) == 0) {
      rc = S_ISDIR(st.st_mode) ? walk_dir(f, child, err) : report_file(f, child, &st);
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

/* The callback runs without the pass's lock: it may start a pass itself. */
int rmq_clean_forecast(rmq_clean_service *cs, rmq_file_fn fn, void *ctx, rmq_err *err) {
  forecast f = {.cs = cs, .fn = fn, .ctx = ctx};
  pthread_mutex_lock(&cs->pass_mu);
  make_plan(cs, false, &f.plan);
  int rc = forecast_segments(&f, err);
  pthread_mutex_unlock(&cs->pass_mu);
  if (rc == RMQ_OK) rc = walk_dir(&f, "", err);
  free(f.segments);
  return rc;
}
