/*
** test_mapped_file.c: mapping the commit-log segment's pages ahead of the
** writer (populate) never changes a byte the writer wrote; the zeroing of a
** failed write goes through io.h, and a failed zeroing is reported. A deleted segment waits for its readers: it stays
** mapped and on disk while held, goes at the last release, and a reader that
** holds it past the grace period finds it revoked (zeros, never SIGBUS).
** A queue makes no segment outside offsets 0 to RMQ_MAX_LOG_OFFSET, and
** takes none named so. A process at vm.max_map_count is told so.
*/
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "io.h"
#include "mapped_file.h"
#include "mapped_file_queue.h"
#include "testutil.h"

#define SIZE (16 << 20)

static rmq_mapped_file *open_segment(const char *dir) {
  char path[256];
  snprintf(path, sizeof path, "%s/00000000000000000000", dir);
  rmq_mapped_file *mf = NULL;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_mapped_file_open(path, 0, SIZE, RMQ_MF_CREATE, true, &mf, &err), RMQ_OK);
  if (mf) CHECK_EQ_INT(rmq_mapped_file_reserve(mf, SIZE, &err), RMQ_OK);
  return mf;
}

/* The byte the writer puts at pos. */
static uint8_t pattern(int32_t pos) { return (uint8_t)(pos % 251 + 1); }

/* Append [pos, pos + len) as the commit log's writer does: copy, publish. */
static void append(rmq_mapped_file *mf, int32_t len) {
  int32_t pos = rmq_mapped_file_wrote(mf);
  for (int32_t i = 0; i < len; i++) mf->mapped[pos + i] = pattern(pos + i);
  rmq_mapped_file_advance(mf, len);
}

static int32_t first_wrong(rmq_mapped_file *mf, int32_t upto) {
  for (int32_t i = 0; i < upto; i++) {
    if (mf->mapped[i] != pattern(i)) return i;
  }
  return -1;
}

static void test_populate_keeps_bytes(const char *dir) {
  rmq_mapped_file *mf = open_segment(dir);
  if (!mf) return;
  append(mf, 10000);
  /* Over written bytes and past them: mapped, nothing changed. */
  CHECK(rmq_mapped_file_populate(mf, 0, 1 << 20));
  CHECK_EQ_INT(first_wrong(mf, 10000), -1);
  CHECK_EQ_INT(mf->mapped[20000], 0);
  rmq_mapped_file_shutdown(mf, true);
}

typedef struct race {
  rmq_mapped_file *mf;
  atomic_bool done;
  int populates;
} race;

/* Populate from the page the writer is on, as the allocation thread does, until it is done. */
static void *populater(void *p) {
  race *r = p;
  while (!atomic_load(&r->done)) {
    int32_t from = rmq_mapped_file_wrote(r->mf);
    if (from >= SIZE) break;
    int32_t to = from + (1 << 20) > SIZE ? SIZE : from + (1 << 20);
    if (rmq_mapped_file_populate(r->mf, from, to - from)) r->populates++;
  }
  return NULL;
}

/* A writer racing a populate over the whole segment keeps every byte it wrote. */
static void test_populate_races_writer(const char *dir) {
  rmq_mapped_file *mf = open_segment(dir);
  if (!mf) return;
  race r = {.mf = mf};
  pthread_t th;
  pthread_create(&th, NULL, populater, &r);
  /* Appends of varied sizes, some spanning several pages. */
  int32_t sizes[] = {1, 300, 4096, 5000, 70000, 131072, 17};
  for (int i = 0; rmq_mapped_file_wrote(mf) < SIZE; i++) {
    int32_t len = sizes[i % 7], room = SIZE - rmq_mapped_file_wrote(mf);
    append(mf, len < room ? len : room);
  }
  atomic_store(&r.done, true);
  pthread_join(th, NULL);
  CHECK_EQ_INT(first_wrong(mf, SIZE), -1);
  CHECK(r.populates > 0);
  rmq_mapped_file_shutdown(mf, true);
}

/* What the write_failed callback was told. */
typedef struct told {
  int calls;
  char why[256];
} told;

static void record_write_failed(void *ctx, const char *why) {
  told *t = ctx;
  t->calls++;
  snprintf(t->why, sizeof t->why, "%s", why);
}

static void test_zero_failure_is_reported(const char *dir) {
  rmq_mapped_file *mf = open_segment(dir);
  if (!mf) return;
  told t = {0};
  mf->write_failed = record_write_failed;
  mf->write_failed_ctx = &t;
  memset(mf->mapped, 9, 1 << 20);
  rmq_mapped_file_zero(mf, 0, 1 << 20);
  CHECK_EQ_INT(t.calls, 0);
  CHECK_EQ_INT(mf->mapped[(1 << 20) - 1], 0);
  /* The second piece fails: the callback names the file, the offset and the error. */
  memset(mf->mapped, 9, 1 << 20);
  rmq_io_fault(RMQ_IO_PWRITE, 2, EIO, -1);
  rmq_mapped_file_zero(mf, 0, 1 << 20);
  CHECK_EQ_INT(t.calls, 1);
  CHECK(strstr(t.why, "at 262144 of ") && strstr(t.why, mf->path) && strstr(t.why, strerror(EIO)));
  /* A short write is a failure too. */
  rmq_io_fault(RMQ_IO_PWRITE, 1, 0, 100);
  rmq_mapped_file_zero(mf, 4096, 8192);
  CHECK_EQ_INT(t.calls, 2);
  CHECK(strstr(t.why, "at 4096 of ") && strstr(t.why, "short write"));
  rmq_io_fault(RMQ_IO_PWRITE, 0, 0, -1);
  rmq_mapped_file_shutdown(mf, true);
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* A queue of three small segments, the first holding the pattern, deleted through retired. */
static rmq_mapped_file *retire_first(const char *dir, rmq_mapped_file_queue *q,
                                     rmq_retired_files *r, char *path, size_t cap) {
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_mfq_init(q, dir, 4096, true, &err), RMQ_OK);
  q->retired = r;
  for (int i = 0; i < 3; i++) {
    rmq_mapped_file *mf = rmq_mfq_last_or_create(q, 0, &err);
    CHECK(mf != NULL);
    if (!mf) return NULL;
    append(mf, 4096);
  }
  rmq_mapped_file *reader = rmq_mfq_first(q);
  snprintf(path, cap, "%s", reader->path);
  CHECK(rmq_mfq_delete_first(q));
  CHECK_EQ_INT(rmq_mfq_count(q), 2);
  CHECK(!rmq_mapped_file_hold(reader)); /* no new reader of a deleted file */
  return reader;
}

static void test_deleted_file_waits_for_reader(const char *dir) {
  rmq_mapped_file_queue q;
  rmq_retired_files r;
  rmq_retired_init(&r);
  char path[256];
  rmq_mapped_file *reader = retire_first(dir, &q, &r, path, sizeof path);
  if (!reader) return;
  CHECK(exists(path));
  CHECK_EQ_INT(rmq_retired_reap(&r, 60000), 1);
  CHECK(exists(path));
  CHECK_EQ_INT(first_wrong(reader, 4096), -1);
  CHECK(!rmq_mapped_file_revoked(reader));
  rmq_mapped_file_release(reader); /* the last reader: the file goes with it */
  CHECK(!exists(path));
  CHECK_EQ_INT(rmq_retired_count(&r), 0);
  rmq_retired_destroy(&r);
  rmq_mfq_destroy(&q);
}

static void test_unread_file_goes_at_once(const char *dir) {
  rmq_mapped_file_queue q;
  rmq_retired_files r;
  rmq_retired_init(&r);
  char path[256];
  rmq_mapped_file *reader = retire_first(dir, &q, &r, path, sizeof path);
  if (!reader) return;
  rmq_mapped_file_release(reader);
  CHECK_EQ_INT(rmq_retired_count(&r), 0);
  rmq_mapped_file *second = rmq_mfq_first(&q);
  char second_path[256];
  snprintf(second_path, sizeof second_path, "%s", second->path);
  rmq_mapped_file_release(second);
  CHECK(rmq_mfq_delete_first(&q)); /* never held while deleted: gone at once */
  CHECK_EQ_INT(rmq_retired_count(&r), 0);
  CHECK(!exists(second_path));
  CHECK(!exists(path));
  rmq_retired_destroy(&r);
  rmq_mfq_destroy(&q);
}

static void test_reader_past_grace_is_revoked(const char *dir) {
  rmq_mapped_file_queue q;
  rmq_retired_files r;
  rmq_retired_init(&r);
  char path[256];
  rmq_mapped_file *reader = retire_first(dir, &q, &r, path, sizeof path);
  if (!reader) return;
  CHECK_EQ_INT(rmq_retired_reap(&r, 0), 0);
  CHECK(!exists(path)); /* unlinked and unmapped while still held */
  CHECK(rmq_mapped_file_revoked(reader));
  CHECK_EQ_INT(first_wrong(reader, 1), 0); /* zeros, not a fault */
  CHECK_EQ_INT(reader->mapped[4095], 0);
  rmq_mapped_file_release(reader);
  rmq_retired_destroy(&r);
  rmq_mfq_destroy(&q);
}

/* The names in dir (0 when none). */
static int files_in(const char *dir) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "ls -A %s | wc -l", dir);
  FILE *p = popen(cmd, "r");
  int n = -1;
  if (p && fscanf(p, "%d", &n) != 1) n = -1;
  if (p) pclose(p);
  return n;
}

/*
** A queue makes no segment below offset 0 (a negative start is not rounded
** up to 0) nor one that would end past RMQ_MAX_LOG_OFFSET, whatever its
** caller asks; the error names the offset and the bound.
*/
static void test_segment_bounds(const char *dir) {
  rmq_mapped_file_queue q;
  rmq_err err = {0};
  char want[256];
  CHECK_EQ_INT(rmq_mfq_init(&q, dir, 4096, true, &err), RMQ_OK);
  const int64_t wrong[] = {-4096, -1000, INT64_MAX - INT64_MAX % 4096, RMQ_MAX_LOG_OFFSET + 1};
  for (int i = 0; i < 4; i++) {
    rmq_err_clear(&err);
    CHECK(rmq_mfq_last_or_create(&q, wrong[i], &err) == NULL);
    CHECK_EQ_INT(err.code, RMQ_EINVAL);
    int64_t from = wrong[i] < 0 ? wrong[i] : wrong[i] - wrong[i] % 4096;
    snprintf(want, sizeof want,
             "%s: no segment is made at offset %lld: segments of 4096 bytes lie between offset 0 "
             "and 2^62",
             dir, (long long)from);
    CHECK_EQ_STR(err.msg, want);
  }
  CHECK_EQ_INT(files_in(dir), 0);
  CHECK_EQ_INT(rmq_mfq_count(&q), 0);
  rmq_err_clear(&err);
  rmq_mapped_file *mf = rmq_mfq_last_or_create(&q, RMQ_MAX_LOG_OFFSET - 1, &err);
  CHECK(mf != NULL);
  if (mf) {
    CHECK_EQ_INT(mf->file_from_offset, RMQ_MAX_LOG_OFFSET - 4096);
    append(mf, 4096);
    CHECK(rmq_mfq_last_or_create(&q, 0, &err) == NULL); /* the next would pass the bound */
    CHECK_EQ_INT(err.code, RMQ_EINVAL);
    CHECK_EQ_INT(rmq_mfq_max_wrote(&q), RMQ_MAX_LOG_OFFSET);
  }
  CHECK_EQ_INT(files_in(dir), 1);
  rmq_mfq_destroy(&q);
}

/* A file named as a segment past the bound (an offset near INT64_MAX) is no segment. */
static void test_segment_name_past_bound(const char *dir) {
  char path[128], want[512];
  snprintf(path, sizeof path, "%s/09223372036854710272", dir);
  FILE *f = fopen(path, "wb");
  CHECK(f && fseek(f, 4095, SEEK_SET) == 0 && fputc(0, f) == 0);
  if (f) fclose(f);
  for (int writable = 0; writable < 2; writable++) {
    rmq_mapped_file_queue q;
    rmq_err err = {0};
    CHECK_EQ_INT(rmq_mfq_init(&q, dir, 4096, writable, &err), RMQ_OK);
    CHECK_EQ_INT(rmq_mfq_load(&q, false, &err), RMQ_ECORRUPT);
    snprintf(want, sizeof want,
             "%s starts at 9223372036854710272: a segment of 4096 bytes starts at most at %lld, "
             "so that it ends by 2^62",
             path, (long long)(RMQ_MAX_LOG_OFFSET - 4096));
    CHECK_EQ_STR(err.msg, want);
    CHECK_EQ_INT(rmq_mfq_count(&q), 0);
    rmq_mfq_destroy(&q);
  }
}

/*
** A process at vm.max_map_count (a store of tens of thousands of queues maps
** each one's file) gets an error that names the limit and how to raise it.
** Not under a sanitizer: its runtime maps memory of its own at any time.
*/
static void test_map_count_limit(const char *dir) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  (void)dir;
#else
  FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
  long max = 0;
  CHECK(f && fscanf(f, "%ld", &max) == 1);
  if (f) fclose(f);
  char path[128];
  snprintf(path, sizeof path, "%s/00000000000000000000", dir);
  rmq_mapped_file *mf = NULL;
  rmq_err err = {0};
  /* Every other page of one region made readable: each its own mapping, until the kernel refuses. */
  size_t pages = (size_t)max + 64, page = 4096;
  char *region = mmap(NULL, pages * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(region != MAP_FAILED);
  if (region == MAP_FAILED) return;
  size_t i = 1;
  while (i < pages && mprotect(region + i * page, page, PROT_READ) == 0) i += 2;
  CHECK(i < pages);
  /* A split takes two; a new mapping may take the last one or two (mmap checks count > max). */
  void *extra[4];
  int n = 0;
  while (n < 4 && (extra[n] = mmap(NULL, page, n % 2 ? PROT_READ : PROT_NONE,
                                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) != MAP_FAILED) {
    n++;
  }
  CHECK(n < 4);
  int rc = rmq_mapped_file_open(path, 0, 4096, RMQ_MF_CREATE, true, &mf, &err);
  munmap(region, pages * page);
  while (n > 0) munmap(extra[--n], page);
  CHECK_EQ_INT(rc, RMQ_EIO);
  CHECK(strstr(err.msg, "the most vm.max_map_count") != NULL);
  CHECK(strstr(err.msg, "sysctl -w vm.max_map_count=655360") != NULL);
  if (mf) rmq_mapped_file_shutdown(mf, false);
  /* Below the limit again, the same file maps. */
  CHECK_EQ_INT(rmq_mapped_file_open(path, 0, 4096, RMQ_MF_CREATE, true, &mf, &err), RMQ_OK);
  if (mf) rmq_mapped_file_shutdown(mf, false);
#endif
}

int main(void) {
  char dir[64];
  void (*tests[])(const char *) = {
      test_populate_keeps_bytes,          test_populate_races_writer,
      test_populate_races_writer,         test_zero_failure_is_reported,
      test_deleted_file_waits_for_reader, test_unread_file_goes_at_once,
      test_reader_past_grace_is_revoked,  test_segment_bounds,
      test_segment_name_past_bound,       test_map_count_limit};
  for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
    tu_tmpdir(dir, sizeof dir);
    tests[i](dir);
    tu_rmrf(dir);
  }
  return check_report();
}
