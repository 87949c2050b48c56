/*
** test_clean.c: retention (CleanCommitLogService, CleanConsumeQueueService)
** on stores of 4 KiB segments whose mtimes the tests set back, as `touch -d`
** does.
**   periodic: the pass runs on its own; at another hour it deletes nothing.
**   forecast: rmq_store_files names exactly the files the next pass deletes
**     (10 segments, the consume-queue and index files below the new
**     minimum), and the reads that follow never see a deleted message.
**   hour: at a delete_when hour the periodic passes delete every expired
**     segment but the current one.
**   manual: rmq_store_clean deletes at any hour, never an unexpired segment
**     and never across a young one (no holes).
**   reader: a reader holding a deleted segment reads it until it lets go,
**     or until clean_grace_ms takes it away.
**   concurrent: writes, queue reads and dry runs while passes expire every
**     segment at once (for TSan).
**   disk: on a tmpfs the test mounts, a disk above disk_warning_ratio
**     refuses puts (RMQ_EFULL) until a pass finds it below again, and one
**     above disk_clean_forcibly_ratio loses segments before they expire.
**   expiry: mtime + file_reserved_hours stops at INT64_MAX, never wraps.
*/
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "clean.h"
#include "testutil.h"

#define SEG 4096
#define BODY 400
#define TOPIC "Clean"

static char body[BODY];

static void config(rmq_config *cfg, int32_t file_size, const char *when) {
  tu_small_config(cfg, file_size);
  cfg->consumequeue_entries = 10;
  cfg->index_entries = 16;
  snprintf(cfg->delete_when, sizeof cfg->delete_when, "%s", when);
  /* The machine's own disk must not trigger anything. */
  cfg->disk_max_used_ratio = 95;
  cfg->disk_clean_forcibly_ratio = 99;
  cfg->disk_warning_ratio = 99;
  cfg->clean_first_delay_ms = 3600000;
}

/*
** delete_when for the hour now (and the next, so that a pass at the turn of
** the hour counts), the first without a leading zero ("4;05"), as RocketMQ
** reads either (Integer.parseInt).
*/
static void hours(char *now, char *other, size_t cap) {
  time_t t = time(NULL);
  struct tm tm;
  localtime_r(&t, &tm);
  snprintf(now, cap, "%d;%02d", tm.tm_hour, (tm.tm_hour + 1) % 24);
  snprintf(other, cap, "%02d", (tm.tm_hour + 12) % 24);
}

/* Put n messages with KEYS=k<first + i> over two queues; their offsets into offsets. */
static void put_messages(rmq_store *s, int first, int n, int64_t *offsets) {
  for (int i = 0; i < n; i++) {
    tu_msg t;
    char kv[32];
    rmq_put_result r;
    rmq_err err = {0};
    snprintf(kv, sizeof kv, "KEYS=k%d", first + i);
    int rc = rmq_store_put(s, tu_message(&t, TOPIC, (first + i) % 2, body, BODY, kv), 1, &r, &err);
    if (rc != RMQ_OK) fprintf(stderr, "  put %d: %s\n", first + i, err.msg);
    if (offsets) offsets[i] = rc == RMQ_OK ? r.physical_offset : -1;
  }
  rmq_err err = {0};
  int64_t flushed;
  CHECK_EQ_INT(rmq_store_wait_dispatched(s, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_store_flush(s, &flushed, &err), RMQ_OK);
}

/* The store's figures (zeros, reported, on failure; not a check: polling loops call it). */
static rmq_stats stats(rmq_store *s) {
  rmq_stats st;
  rmq_err err = {0};
  if (rmq_store_stats(s, &st, &err) != RMQ_OK) {
    fprintf(stderr, "  stats: %s\n", err.msg);
    memset(&st, 0, sizeof st);
  }
  return st;
}

/* Set the mtime of commit-log segment i (in name order) back by `hours`; -1: every segment. */
static void age_segments(const char *dir, int only, int hours_back) {
  char cl[4200];
  snprintf(cl, sizeof cl, "%s/commitlog", dir);
  struct dirent **names;
  int n = scandir(cl, &names, NULL, alphasort), seg = 0;
  time_t then = time(NULL) - (time_t)hours_back * 3600;
  struct timespec ts[2] = {{.tv_sec = then}, {.tv_sec = then}};
  for (int i = 0; i < n; i++) {
    char path[4400];
    snprintf(path, sizeof path, "%s/commitlog/%s", dir, names[i]->d_name);
    if (names[i]->d_name[0] != '.' && (only < 0 || seg++ == only)) {
      CHECK(utimensat(AT_FDCWD, path, ts, 0) == 0);
    }
    free(names[i]);
  }
  if (n >= 0) free(names);
}

/* ------------------------------------------------------------ file sets */

#define MAX_FILES 512

typedef struct file_set {
  char path[MAX_FILES][96];
  char reason[MAX_FILES][256];
  int n;
} file_set;

static bool set_has(const file_set *fs, const char *path) {
  for (int i = 0; i < fs->n; i++)
    if (strcmp(fs->path[i], path) == 0) return true;
  return false;
}

static void set_add(file_set *fs, const char *path, const char *reason) {
  if (fs->n == MAX_FILES) return;
  snprintf(fs->path[fs->n], sizeof fs->path[0], "%s", path);
  snprintf(fs->reason[fs->n], sizeof fs->reason[0], "%s", reason ? reason : "");
  fs->n++;
}

/* Every regular file under dir/rel, as paths relative to dir. */
static void list_files(const char *dir, const char *rel, file_set *fs) {
  char path[4200];
  snprintf(path, sizeof path, "%s%s%s", dir, rel[0] ? "/" : "", rel);
  DIR *d = opendir(path);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    char child[96], full[4300];
    struct stat st;
    int n = snprintf(child, sizeof child, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name);
    snprintf(full, sizeof full, "%s/%s", dir, child);
    if (n >= (int)sizeof child || lstat(full, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      list_files(dir, child, fs);
    } else {
      set_add(fs, child, NULL);
    }
  }
  closedir(d);
}

typedef struct forecast {
  file_set all, doomed;
  int doomed_segments;
} forecast;

static int on_file(void *ctx, const rmq_file_info *f) {
  forecast *fc = ctx;
  set_add(&fc->all, f->path, f->reason);
  if (f->would_delete) set_add(&fc->doomed, f->path, f->reason);
  if (f->would_delete && strcmp(f->kind, "commitlog") == 0) fc->doomed_segments++;
  return 0;
}

static forecast *files(rmq_store *s) {
  forecast *fc = calloc(1, sizeof *fc);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_files(s, on_file, fc, &err), RMQ_OK);
  return fc;
}

static const char *reason_of(const forecast *fc, const char *path) {
  for (int i = 0; i < fc->all.n; i++)
    if (strcmp(fc->all.path[i], path) == 0) return fc->all.reason[i];
  return "";
}

static void segment_name(int64_t offset, char *out, size_t cap) {
  snprintf(out, cap, "commitlog/%020lld", (long long)offset);
}

/* ------------------------------------------------------------- periodic */

/* Wait until the store has run `runs` more passes; false after 10 s. */
static bool wait_runs(rmq_store *s, int64_t runs) {
  int64_t until = stats(s).clean_runs + runs;
  for (int i = 0; i < 1000; i++) {
    if (stats(s).clean_runs >= until) return true;
    usleep(10000);
  }
  return false;
}

static void test_periodic(const char *dir, const char *other) {
  rmq_config cfg;
  config(&cfg, SEG, other);
  cfg.clean_first_delay_ms = 0;
  cfg.clean_interval_ms = 100;
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  put_messages(s, 0, 120, NULL);
  age_segments(dir, -1, 100);
  int64_t segments = stats(s).commitlog_files;
  CHECK(segments >= 15);
  CHECK(wait_runs(s, 3));
  rmq_stats st = stats(s);
  CHECK_EQ_INT(st.commitlog_files, segments);
  CHECK_EQ_INT(st.files_deleted, 0);
  CHECK(st.disk_used_ratio > 0 && st.disk_used_ratio < 1);
  CHECK(!st.disk_full);
  forecast *fc = files(s);
  CHECK_EQ_INT(fc->doomed.n, 0);
  char seg[64], want[64];
  segment_name(0, seg, sizeof seg);
  snprintf(want, sizeof want, "expired; waits for a delete_when hour (%s)", other);
  CHECK_EQ_STR(reason_of(fc, seg), want);
  free(fc);
  rmq_store_close(s);
}

/* ------------------------------------------------------------- forecast */

static int64_t offsets[120];

/* What the forecast said the pass deletes is what it deleted. */
static void check_forecast(rmq_store *s, const char *dir, forecast *fc) {
  file_set *before = calloc(1, sizeof *before), *after = calloc(1, sizeof *after);
  list_files(dir, "", before);
  int deleted = -1;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_clean(s, &deleted, &err), RMQ_OK);
  list_files(dir, "", after);
  int gone = 0;
  for (int i = 0; i < before->n; i++) {
    if (set_has(after, before->path[i])) continue;
    gone++;
    if (!set_has(&fc->doomed, before->path[i])) fprintf(stderr, "  %s\n", before->path[i]);
    CHECK(set_has(&fc->doomed, before->path[i]));
  }
  CHECK_EQ_INT(gone, fc->doomed.n);
  CHECK_EQ_INT(deleted, fc->doomed.n);
  free(before);
  free(after);
}

/* Reads below the new minimum: nothing deleted comes back, queues start at their min. */
static void check_reads(rmq_store *s) {
  rmq_stats st = stats(s);
  int64_t min = st.commitlog_min_offset;
  CHECK_EQ_INT(min, (int64_t)RMQ_CLEAN_MAX_SEGMENTS * SEG);
  rmq_commitlog_ref ref;
  rmq_message m;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_read(s, offsets[0], &ref, &m, &err), RMQ_ENOTFOUND);
  for (int q = 0; q < 2; q++) {
    rmq_consume_queue *cq = rmq_store_find_queue(s, TOPIC, q);
    CHECK(cq && rmq_cq_min_offset(cq) > 0);
    if (!cq) continue;
    rmq_cq_iter it;
    rmq_cq_entry e;
    rmq_cq_iter_start(&it, cq, 0);
    CHECK_EQ_INT(it.offset, rmq_cq_min_offset(cq));
    CHECK(rmq_cq_iter_next(&it, &e));
    CHECK(e.phy_offset >= min);
    rmq_cq_iter_stop(&it);
  }
  int found_old = 0, found_new = 0;
  for (int i = 0; i < 120; i++) {
    char key[16];
    int64_t hits[4];
    int n = 0;
    snprintf(key, sizeof key, "k%d", i);
    CHECK_EQ_INT(rmq_store_query_key(s, TOPIC, key, 0, INT64_MAX, 4, hits, &n, &err), RMQ_OK);
    if (offsets[i] < min) found_old += n;
    if (offsets[i] >= min) found_new += n == 1 && hits[0] == offsets[i];
  }
  CHECK_EQ_INT(found_old, 0);
  int kept = 0;
  for (int i = 0; i < 120; i++) kept += offsets[i] >= min;
  CHECK_EQ_INT(found_new, kept);
}

static void test_forecast(const char *dir, const char *now) {
  rmq_config cfg;
  config(&cfg, SEG, now);
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  age_segments(dir, -1, 100);
  forecast *fc = files(s);
  CHECK_EQ_INT(fc->doomed_segments, RMQ_CLEAN_MAX_SEGMENTS);
  CHECK(fc->doomed.n > RMQ_CLEAN_MAX_SEGMENTS); /* consume-queue and index files too */
  char seg[64];
  segment_name((int64_t)RMQ_CLEAN_MAX_SEGMENTS * SEG, seg, sizeof seg);
  CHECK_EQ_STR(reason_of(fc, seg), "beyond the 10 segments of one pass");
  CHECK_EQ_STR(reason_of(fc, "checkpoint"), "not subject to retention");
  CHECK(strstr(reason_of(fc, "consumequeue/Clean/0/00000000000000000000"),
               "its last entry is below the commit log's minimum offset 40960 after this pass"));
  check_forecast(s, dir, fc);
  free(fc);
  check_reads(s);
  rmq_stats st = stats(s);
  CHECK_EQ_INT(st.clean_runs, 1);
  CHECK(st.files_deleted > RMQ_CLEAN_MAX_SEGMENTS);
  rmq_store_close(s);
}

/* Periodic passes at a delete_when hour take every expired segment but the current one. */
static void test_hour(const char *dir, const char *now) {
  rmq_config cfg;
  config(&cfg, SEG, now);
  cfg.clean_first_delay_ms = 0;
  cfg.clean_interval_ms = 100;
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  int64_t segments = -1;
  for (int i = 0; i < 500 && (segments = stats(s).commitlog_files) > 1; i++) usleep(10000);
  CHECK_EQ_INT(segments, 1);
  forecast *fc = files(s);
  char seg[64];
  segment_name(stats(s).commitlog_min_offset, seg, sizeof seg);
  CHECK_EQ_STR(reason_of(fc, seg), "current segment: never deleted");
  free(fc);
  rmq_store_close(s);
}

/* ---------------------------------------------------------------- manual */

static void test_manual(const char *dir, const char *now, const char *other) {
  rmq_config cfg;
  config(&cfg, SEG, now);
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  put_messages(s, 0, 60, NULL);
  int64_t segments = stats(s).commitlog_files;
  CHECK(segments >= 6);
  rmq_err err = {0};
  int deleted = -1;
  CHECK_EQ_INT(rmq_store_clean(s, &deleted, &err), RMQ_OK);
  CHECK_EQ_INT(deleted, 0); /* nothing expired */
  /* Segment 2 is young: 0 and 1 go, nothing after it. */
  age_segments(dir, -1, 100);
  age_segments(dir, 2, 1);
  forecast *fc = files(s);
  char seg[64];
  segment_name(3 * SEG, seg, sizeof seg);
  CHECK_EQ_STR(reason_of(fc, seg), "an older segment is kept (no holes)");
  segment_name(2 * SEG, seg, sizeof seg);
  CHECK(strncmp(reason_of(fc, seg), "kept until ", 11) == 0);
  CHECK(strstr(reason_of(fc, seg), "(file_reserved_hours 72)") != NULL);
  free(fc);
  CHECK_EQ_INT(rmq_store_clean(s, &deleted, &err), RMQ_OK);
  rmq_stats st = stats(s);
  CHECK_EQ_INT(st.commitlog_min_offset, 2 * SEG);
  CHECK_EQ_INT(st.commitlog_files, segments - 2);
  rmq_store_close(s);
  /* Aged again, at another hour: on request every expired segment goes, the current one stays. */
  config(&cfg, SEG, other);
  s = tu_open(dir, &cfg);
  if (!s) return;
  age_segments(dir, -1, 100);
  CHECK_EQ_INT(rmq_store_clean(s, &deleted, &err), RMQ_OK);
  CHECK_EQ_INT(stats(s).commitlog_files, 1);
  rmq_store_close(s);
  /* Read-only: the forecast works, cleaning is refused. */
  cfg.readonly = true;
  s = tu_open(dir, &cfg);
  if (!s) return;
  fc = files(s);
  CHECK(fc->all.n > 0);
  free(fc);
  CHECK_EQ_INT(rmq_store_clean(s, &deleted, &err), RMQ_EINVAL);
  rmq_store_close(s);
}

/* ---------------------------------------------------------------- reader */

static void test_reader(const char *dir, const char *other, int grace_ms) {
  rmq_config cfg;
  config(&cfg, SEG, other);
  cfg.clean_grace_ms = grace_ms;
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  int64_t at[30];
  put_messages(s, 0, 30, at);
  /* A reader of the first segment and one of the first index file. */
  rmq_commitlog_ref ref;
  rmq_message m;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_read(s, at[0], &ref, &m, &err), RMQ_OK);
  rmq_index_view v;
  CHECK(rmq_store_index_view(s, NULL, &v));
  char segment[4200], index[4200];
  snprintf(segment, sizeof segment, "%s/commitlog/%020d", dir, 0);
  snprintf(index, sizeof index, "%s/index/%s", dir, v.name);
  int32_t slot = rmq_index_view_slot(&v, 0);
  age_segments(dir, -1, 100);
  int deleted = 0;
  CHECK_EQ_INT(rmq_store_clean(s, &deleted, &err), RMQ_OK);
  CHECK(deleted >= 1);
  CHECK(stats(s).commitlog_min_offset > 0);
  CHECK(stats(s).index_files < 3);
  if (grace_ms > 0) {
    /* Still held: readable, and on disk until they are let go. */
    CHECK(rmq_commitlog_ref_valid(&ref));
    CHECK_EQ_MEM(m.body, body, BODY);
    CHECK(rmq_index_view_valid(&v));
    CHECK_EQ_INT(rmq_index_view_slot(&v, 0), slot);
    CHECK(access(segment, F_OK) == 0);
    CHECK(access(index, F_OK) == 0);
    CHECK_EQ_INT(stats(s).files_awaiting_readers, 2);
    forecast *fc = files(s);
    char rel[64];
    segment_name(0, rel, sizeof rel);
    CHECK_EQ_STR(reason_of(fc, rel), "deleted; a reader still holds it (freed when it lets go)");
    snprintf(rel, sizeof rel, "index/%s", v.name);
    CHECK_EQ_STR(reason_of(fc, rel), "deleted; a reader still holds it (freed when it lets go)");
    CHECK_EQ_INT(fc->doomed.n, 0);
    free(fc);
    rmq_commitlog_ref_release(&ref); /* the last readers: the files go with them */
    rmq_index_view_release(&v);
  } else {
    /* Held past the grace period: taken away, their space freed. */
    CHECK(!rmq_commitlog_ref_valid(&ref));
    CHECK(!rmq_index_view_valid(&v));
    rmq_commitlog_ref_release(&ref);
    rmq_index_view_release(&v);
  }
  CHECK(access(segment, F_OK) != 0);
  CHECK(access(index, F_OK) != 0);
  CHECK_EQ_INT(stats(s).files_awaiting_readers, 0);
  rmq_store_close(s);
}

/* ------------------------------------------------------------- concurrent */

typedef struct racer {
  rmq_store *s;
  atomic_bool stop;
  int64_t reads, bad;
} racer;

/* Read every queue from its start while passes delete under the reader. */
static void *race_reader(void *arg) {
  racer *r = arg;
  while (!atomic_load(&r->stop)) {
    for (int q = 0; q < 2; q++) {
      rmq_consume_queue *cq = rmq_store_find_queue(r->s, TOPIC, q);
      if (!cq) continue;
      rmq_cq_iter it;
      rmq_cq_entry e;
      rmq_cq_iter_start(&it, cq, 0);
      while (rmq_cq_iter_next(&it, &e)) {
        rmq_commitlog_ref ref;
        rmq_message m;
        rmq_err err = {0};
        if (rmq_store_read(r->s, e.phy_offset, &ref, &m, &err) != RMQ_OK) continue;
        bool same = m.body_len == BODY && memcmp(m.body, body, BODY) == 0;
        r->bad += !same && rmq_commitlog_ref_valid(&ref);
        r->reads++;
        rmq_commitlog_ref_release(&ref);
      }
      rmq_cq_iter_stop(&it);
    }
    forecast *fc = calloc(1, sizeof *fc);
    rmq_err err = {0};
    r->bad += rmq_store_files(r->s, on_file, fc, &err) != RMQ_OK; /* no CHECK off the main thread */
    free(fc);
  }
  return NULL;
}

/* Writes, reads, dry runs and passes that expire everything at once, all together. */
static void test_concurrent(const char *dir, const char *now) {
  rmq_config cfg;
  config(&cfg, SEG, now);
  cfg.file_reserved_hours = 0;
  cfg.clean_first_delay_ms = 0;
  cfg.clean_interval_ms = 10;
  cfg.flush_interval_ms = 10;
  racer r = {.s = tu_open(dir, &cfg)};
  if (!r.s) return;
  pthread_t reader;
  pthread_create(&reader, NULL, race_reader, &r);
  for (int round = 0; round < 20; round++) put_messages(r.s, round * 20, 20, NULL);
  atomic_store(&r.stop, true);
  pthread_join(reader, NULL);
  rmq_stats st = stats(r.s);
  CHECK(st.clean_runs > 0);
  CHECK(st.files_deleted > 0);
  CHECK(r.reads > 0);
  CHECK_EQ_INT(r.bad, 0);
  rmq_store_close(r.s);
}

/* ------------------------------------------------------------------ disk */

static char mnt[64];

/* Grow the ballast until the disk is `percent` used; shrink it with percent 0. */
static void ballast(int percent) {
  char path[128];
  snprintf(path, sizeof path, "%s/ballast", mnt);
  if (percent == 0) {
    unlink(path);
    return;
  }
  struct statvfs v;
  statvfs(mnt, &v);
  int64_t want = (int64_t)v.f_blocks * percent / 100 - (int64_t)(v.f_blocks - v.f_bfree);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  static char buf[4096];
  for (int64_t i = 0; i < want; i++) {
    if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) break;
  }
  close(fd);
}

static bool put_one(rmq_store *s, rmq_err *err) {
  tu_msg t;
  rmq_put_result r;
  return rmq_store_put(s, tu_message(&t, TOPIC, 0, body, BODY, "KEYS=d"), 1, &r, err) == RMQ_OK;
}

static void test_disk_levels(rmq_store *s, const char *dir) {
  int deleted = 0;
  rmq_err err = {0};
  /* Above disk_warning_ratio: unexpired segments go, and puts are refused. */
  ballast(97);
  forecast *fc = files(s);
  char seg[64];
  segment_name(0, seg, sizeof seg);
  CHECK(strstr(reason_of(fc, seg), "above disk_warning_ratio 90%: deleted before expiry"));
  free(fc);
  CHECK_EQ_INT(rmq_store_clean(s, &deleted, &err), RMQ_OK);
  CHECK(deleted >= 1);
  CHECK_EQ_INT(stats(s).commitlog_files, 1);
  /* Nothing left to delete: the disk stays full. */
  ballast(97);
  CHECK_EQ_INT(rmq_store_clean(s, &deleted, &err), RMQ_OK);
  CHECK_EQ_INT(deleted, 0);
  CHECK(stats(s).disk_used_ratio > 0.9);
  CHECK(stats(s).disk_full);
  CHECK(!put_one(s, &err));
  CHECK_EQ_INT(err.code, RMQ_EFULL);
  char want[256];
  snprintf(want, sizeof want, "disk of %s/commitlog is ", dir);
  CHECK(strstr(err.msg, want) == err.msg);
  CHECK(strstr(err.msg, "% full, above disk_warning_ratio 90%: writes are refused") != NULL);
  /* A message given back is a put too. */
  int64_t copy;
  CHECK_EQ_INT(rmq_store_send_back(s, "G", stats(s).commitlog_min_offset, &copy, &err), RMQ_EFULL);
  /* Room again: the next pass lets writes in. */
  ballast(0);
  CHECK_EQ_INT(rmq_store_clean(s, &deleted, &err), RMQ_OK);
  CHECK(!stats(s).disk_full);
  CHECK(put_one(s, &err));
  /* Between disk_clean_forcibly_ratio and disk_warning_ratio: segments go, writes go on. */
  put_messages(s, 0, 300, NULL);
  int64_t min = stats(s).commitlog_min_offset;
  ballast(87);
  CHECK_EQ_INT(rmq_store_clean(s, &deleted, &err), RMQ_OK);
  CHECK(deleted >= 1);
  CHECK(stats(s).commitlog_min_offset > min);
  CHECK(!stats(s).disk_full);
  CHECK(put_one(s, &err));
  ballast(0);
}

static void test_disk(void) {
  snprintf(mnt, sizeof mnt, "/tmp/rmq-clean-XXXXXX");
  char cmd[160];
  bool made = mkdtemp(mnt) != NULL;
  snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=8m tmpfs %s 2>/dev/null", mnt);
  if (!made || geteuid() != 0 || system(cmd) != 0) {
    printf("disk: skipped: not root, cannot mount tmpfs\n");
    rmdir(mnt);
    return;
  }
  char dir[128];
  snprintf(dir, sizeof dir, "%s/store", mnt);
  rmq_config cfg;
  config(&cfg, 65536, "");
  cfg.disk_max_used_ratio = 75;
  cfg.disk_clean_forcibly_ratio = 85;
  cfg.disk_warning_ratio = 90;
  rmq_store *s = tu_open(dir, &cfg);
  if (s) {
    put_messages(s, 0, 600, NULL);
    CHECK(stats(s).commitlog_files >= 3);
    test_disk_levels(s, dir);
    rmq_store_close(s);
  }
  snprintf(cmd, sizeof cmd, "umount %s", mnt);
  if (system(cmd) != 0) fprintf(stderr, "could not unmount %s\n", mnt);
  rmdir(mnt);
}

/*
** A segment's expiry, mtime + file_reserved_hours, stops at INT64_MAX: an
** mtime far ahead never wraps into the past, where the segment would go at once.
*/
static void test_expiry_saturates(void) {
  CHECK_EQ_INT(rmq_clean_expires_at(1000, 1), 3601000);
  CHECK_EQ_INT(rmq_clean_expires_at(1000, 0), 1000);
  CHECK_EQ_INT(rmq_clean_expires_at(INT64_MAX - 5, 72), INT64_MAX);
  CHECK_EQ_INT(rmq_clean_expires_at(INT64_MAX, 1 << 20), INT64_MAX);
}

int main(void) {
  char now[16], other[16], dir[64];
  memset(body, 'b', sizeof body);
  hours(now, other, sizeof now);
  test_expiry_saturates();
  tu_tmpdir(dir, sizeof dir);
  test_periodic(dir, other);
  tu_rmrf(dir);
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  config(&cfg, SEG, other);
  rmq_store *s = tu_open(dir, &cfg);
  if (s) {
    put_messages(s, 0, 120, offsets);
    rmq_store_close(s);
  }
  test_forecast(dir, now);
  test_hour(dir, now);
  tu_rmrf(dir);
  tu_tmpdir(dir, sizeof dir);
  test_manual(dir, now, other);
  tu_rmrf(dir);
  tu_tmpdir(dir, sizeof dir);
  test_reader(dir, other, 120000);
  tu_rmrf(dir);
  tu_tmpdir(dir, sizeof dir);
  test_reader(dir, other, 0);
  tu_rmrf(dir);
  tu_tmpdir(dir, sizeof dir);
  test_concurrent(dir, now);
  tu_rmrf(dir);
  test_disk();
  return check_report();
}
