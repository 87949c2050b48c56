/*
** test_options.c: the store's options keep their promises, and the periodic
** services run on their own.
**
** - warm_mapped_file=1: a segment is locked in memory while the writer
**   writes it (or it waits, pre-allocated, as the next one) and unlocked
**   once the writer has left it, so the locked size (VmLck) stays about two
**   segments however many rolls there were; with flush='sync' the warm
**   forces its pages every 4096 pages (MappedFile.warmMappedFile).
** - transient_store_pool=2: a reader that starts after a put returned sees
**   it; a put wakes CommitRealTimeService, which commits it long before its
**   200 ms interval.
** - FlushRealTimeService, CommitRealTimeService and FlushConsumeQueueService
**   run at their interval while data keeps arriving, without rmq_store_flush:
**   their run counters grow and the flushed positions reach the end.
**
** Times are bounded loosely: the machine may be busy.
*/
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "check.h"
#include "io.h"
#include "mapped_file.h"
#include "service_thread.h"
#include "testutil.h"

/* VmLck of this process in KiB, or -1 when /proc does not say. */
static long vm_locked_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof line, f)) {
    if (sscanf(line, "VmLck: %ld kB", &kib) == 1) break;
  }
  if (f) fclose(f);
  return kib;
}

static void put_n(rmq_store *s, const char *topic, int queue_id, int n, int body_len) {
  char body[4096];
  memset(body, 'o', sizeof body);
  tu_msg t;
  for (int i = 0; i < n; i++) {
    rmq_put_result r;
    rmq_err err = {0};
    int rc = rmq_store_put(s, tu_message(&t, topic, queue_id, body, body_len, NULL), 1, &r, &err);
    if (rc != RMQ_OK) {
      CHECK_EQ_INT(rc, RMQ_OK);
      fprintf(stderr, "  %s\n", err.msg);
      return;
    }
  }
}

/* n messages of body_len bytes as one batch: the flush and commit services see it whole. */
static void put_batch(rmq_store *s, const char *topic, int queue_id, int n, int body_len) {
  char body[4096];
  memset(body, 'b', sizeof body);
  tu_msg *t = malloc(sizeof *t * (size_t)n);
  rmq_message *msgs = malloc(sizeof *msgs * (size_t)n);
  rmq_err err = {0};
  for (int i = 0; t && msgs && i < n; i++) {
    msgs[i] = *tu_message(&t[i], topic, queue_id, body, body_len, NULL);
    msgs[i].properties = t[i].props;
  }
  int rc = t && msgs ? rmq_store_put(s, msgs, n, NULL, &err) : RMQ_ENOMEM;
  CHECK_EQ_INT(rc, RMQ_OK);
  if (rc != RMQ_OK) fprintf(stderr, "  %s\n", err.msg);
  free(msgs);
  free(t);
}

static rmq_stats stats_of(rmq_store *s) {
  rmq_stats st;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_stats(s, &st, &err), RMQ_OK);
  return st;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ------------------------------------------------------- warm_mapped_file */

#define WARM_SEG (1 << 20)

/* 14 segments of 1 MiB written: VmLck ends near two segments, not fourteen. */
static void test_warm_unlocks_left_segments(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  tu_small_config(&cfg, WARM_SEG);
  cfg.warm_mapped_file = true;
  long before = vm_locked_kib();
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  long most = 0;
  for (int seg = 0; seg < 14; seg++) {
    put_n(s, "Warm", 0, 260, 4000); /* a little over one segment */
    long now = vm_locked_kib() - before;
    if (now > most) most = now;
  }
  CHECK(stats_of(s).commitlog_files >= 14);
  /* The service thread unlocks the segment left last soon after the roll. */
  long locked = vm_locked_kib() - before;
  for (int i = 0; i < 200 && locked > 2 * WARM_SEG / 1024; i++) {
    sleep_ms(10);
    locked = vm_locked_kib() - before;
  }
  printf("warm_mapped_file: %ld KiB locked after 14 segments of %d KiB (at most %ld KiB)\n", locked,
         WARM_SEG / 1024, most);
  if (most == 0) printf("  nothing was locked (mlock refused or intercepted)\n");
  CHECK(locked >= 0);
  CHECK(locked <= 2 * WARM_SEG / 1024);
  CHECK(most <= 3 * WARM_SEG / 1024);
  rmq_store_close(s);
  CHECK(vm_locked_kib() - before <= 0);
  tu_rmrf(dir);
}

/* 40 MiB warmed with flush='sync': forced at 16 MiB, 32 MiB and the end, three msyncs. */
static void test_warm_flushes_while_warming(void) {
  char dir[64], path[128];
  tu_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/00000000000000000000", dir);
  int32_t size = 40 << 20;
  for (int nth = 3; nth <= 4; nth++) {
    rmq_mapped_file *mf;
    rmq_err err = {0};
    unlink(path);
    if (rmq_mapped_file_open(path, 0, size, RMQ_MF_CREATE, true, &mf, &err) != RMQ_OK) {
      CHECK_EQ_STR(err.msg, "");
      return;
    }
    rmq_io_fault(RMQ_IO_MSYNC, nth, EIO, -1);
    int rc = rmq_mapped_file_warm(mf, false, 4096, &err);
    rmq_io_fault(RMQ_IO_MSYNC, 0, 0, -1);
    /* The third msync is the last one: a fault at the fourth never fires. */
    CHECK_EQ_INT(rc, nth == 3 ? RMQ_EIO : RMQ_OK);
    if (nth == 3) CHECK(strstr(err.msg, "while warming it") != NULL);
    rmq_mapped_file_shutdown(mf, true);
  }
  /* flush='async' warms without forcing. */
  rmq_mapped_file *mf;
  rmq_err err = {0};
  if (rmq_mapped_file_open(path, 0, size, RMQ_MF_CREATE, true, &mf, &err) == RMQ_OK) {
    rmq_io_fault(RMQ_IO_MSYNC, 1, EIO, -1);
    CHECK_EQ_INT(rmq_mapped_file_warm(mf, false, 0, &err), RMQ_OK);
    rmq_io_fault(RMQ_IO_MSYNC, 0, 0, -1);
    rmq_mapped_file_shutdown(mf, true);
  }
  tu_rmrf(dir);
}

/* The store warms with flush='sync' too, and its puts are durable as ever. */
static void test_warm_sync_store(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  tu_small_config(&cfg, WARM_SEG);
  cfg.warm_mapped_file = true;
  cfg.flush_sync = true;
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  put_n(s, "WarmSync", 1, 600, 4000);
  rmq_stats st = stats_of(s);
  CHECK_EQ_INT(st.flushed_offset, st.commitlog_max_offset);
  CHECK(st.commitlog_files >= 3);
  CHECK(st.flush_runs > 0);
  rmq_store_close(s);
  tu_rmrf(dir);
}

/* --------------------------------------------------- transient_store_pool */

/*
** Every put, read at once through the commit log and the consume queue.
** With one buffer, every other segment is written without one (the next
** segment is made while the current one holds it).
*/
static void test_pool_read_after_put(int buffers) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  tu_small_config(&cfg, 64 << 10);
  cfg.transient_store_pool = buffers;
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  char body[300];
  memset(body, 'p', sizeof body);
  int unseen = 0, rolls = 0;
  for (int i = 0; i < 3000; i++) {
    tu_msg t;
    rmq_put_result r;
    rmq_err err = {0};
    if (rmq_store_put(s, tu_message(&t, "Pool", 2, body, (int)sizeof body, NULL), 1, &r, &err) !=
            RMQ_OK ||
        rmq_store_wait_dispatched(s, &err) != RMQ_OK) {
      CHECK_EQ_STR(err.msg, "");
      break;
    }
    rmq_commitlog_ref ref;
    rmq_message m;
    bool read = rmq_store_read(s, r.physical_offset, &ref, &m, &err) == RMQ_OK;
    if (read) rmq_commitlog_ref_release(&ref);
    rmq_consume_queue *cq = rmq_store_find_queue(s, "Pool", 2);
    if (!read || !cq || rmq_cq_max_offset(cq) <= r.queue_offset) unseen++;
    rolls = (int)(r.physical_offset / (64 << 10));
  }
  CHECK_EQ_INT(unseen, 0);
  CHECK(rolls >= 10);
  rmq_store_close(s);
  tu_rmrf(dir);
}

/* A put is committed by the service it wakes, well before the 200 ms interval. */
static void test_pool_put_wakes_commit(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  tu_small_config(&cfg, 1 << 20);
  cfg.transient_store_pool = 2;
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  int64_t waits[21];
  for (int i = 0; i < 21; i++) {
    put_n(s, "PoolWake", 0, 1, 100);
    int64_t t0 = rmq_monotonic_ms();
    rmq_stats st = stats_of(s);
    while (st.committed_offset < st.commitlog_max_offset && rmq_monotonic_ms() - t0 < 2000) {
      sleep_ms(1);
      st = stats_of(s);
    }
    waits[i] = rmq_monotonic_ms() - t0;
    sleep_ms(7); /* land at another point of the commit interval */
  }
  for (int i = 0; i < 21; i++) {
    for (int j = i + 1; j < 21; j++) {
      if (waits[j] < waits[i]) {
        int64_t x = waits[i];
        waits[i] = waits[j];
        waits[j] = x;
      }
    }
  }
  printf("transient_store_pool: a put is committed after %lld ms (median of 21), %lld ms at most\n",
         (long long)waits[10], (long long)waits[20]);
  CHECK(waits[10] < 50);
  CHECK(stats_of(s).commit_runs >= 10);
  rmq_store_close(s);
  tu_rmrf(dir);
}

/* ------------------------------------------------------ periodic services */

/*
** Put `burst` messages every `every_ms` for `ms`; returns how much the
** counter that `runs` reads grew meanwhile.
*/
typedef int64_t (*runs_fn)(const rmq_stats *st);
static int64_t runs_while_producing(rmq_store *s, const char *topic, int burst, int every_ms,
                                    int ms, runs_fn runs) {
  rmq_stats st = stats_of(s);
  int64_t first = runs(&st);
  for (int64_t t0 = rmq_monotonic_ms(); rmq_monotonic_ms() - t0 < ms;) {
    put_n(s, topic, 0, burst, 100);
    sleep_ms(every_ms);
  }
  st = stats_of(s);
  return runs(&st) - first;
}

static int64_t flush_runs(const rmq_stats *st) { return st->flush_runs; }
static int64_t commit_runs(const rmq_stats *st) { return st->commit_runs; }
static int64_t cq_flush_runs(const rmq_stats *st) { return st->cq_flush_runs; }

/* How long the flushed offset takes to reach the end after the last put, in ms. */
static int64_t ms_until_flushed(rmq_store *s, int limit_ms) {
  int64_t t0 = rmq_monotonic_ms();
  rmq_stats st = stats_of(s);
  while (st.flushed_offset < st.commitlog_max_offset && rmq_monotonic_ms() - t0 < limit_ms) {
    sleep_ms(5);
    st = stats_of(s);
  }
  return st.flushed_offset < st.commitlog_max_offset ? -1 : rmq_monotonic_ms() - t0;
}

/* FlushRealTimeService every 100 ms: runs while data arrives, flushes to the end on its own. */
static void test_flush_runs_on_its_own(bool pool) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  tu_small_config(&cfg, 4 << 20);
  cfg.flush_interval_ms = 100;
  cfg.transient_store_pool = pool ? 2 : 0;
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  /* 100 messages of ~200 bytes: more than the 4 pages a flush waits for. */
  int64_t grew = runs_while_producing(s, "Flush", 100, 40, 500, flush_runs);
  printf("flush%s: %lld runs in 5 intervals of 100 ms\n", pool ? " (pool)" : "", (long long)grew);
  CHECK(grew >= 2);
  /* One batch of more than 4 pages: the next pass flushes it, and the end, whole. */
  put_batch(s, "Flush", 1, 100, 100);
  int64_t ms = ms_until_flushed(s, 5000);
  printf("flush%s: the end was flushed %lld ms after the last put\n", pool ? " (pool)" : "",
         (long long)ms);
  CHECK(ms >= 0);
  CHECK(ms <= 1000); /* about 2 intervals, loosely: the machine may be busy */
  if (pool) {
    grew = runs_while_producing(s, "Commit", 20, 100, 1000, commit_runs);
    printf("commit: %lld runs in 5 intervals of 200 ms\n", (long long)grew);
    CHECK(grew >= 2);
  }
  rmq_store_close(s);
  tu_rmrf(dir);
}

/* FlushConsumeQueueService every second: the queue's file becomes flushed without rmq_store_flush. */
static void test_cq_flush_runs_on_its_own(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  tu_small_config(&cfg, 4 << 20);
  cfg.consumequeue_entries = 300000;
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  /* 500 entries a burst: 10,000 bytes, more than the 2 pages a pass waits for. */
  int64_t grew = runs_while_producing(s, "CqFlush", 500, 250, 5000, cq_flush_runs);
  printf("consume-queue flush: %lld runs in 5 intervals of 1000 ms\n", (long long)grew);
  CHECK(grew >= 2);
  rmq_consume_queue *cq = rmq_store_find_queue(s, "CqFlush", 0);
  CHECK(cq != NULL);
  if (cq) {
    /*
    ** A pass forces a queue with 2 dirty pages or more: soon after the last
    ** burst less than that is left (a pass may fall inside a burst).
    */
    int64_t end = rmq_cq_max_offset(cq) * 20, t0 = rmq_monotonic_ms();
    while (end - atomic_load(&cq->mfq.flushed_where) >= 2 * RMQ_OS_PAGE_SIZE &&
           rmq_monotonic_ms() - t0 < 5000) {
      sleep_ms(20);
    }
    int64_t ms = rmq_monotonic_ms() - t0, flushed = atomic_load(&cq->mfq.flushed_where);
    printf("consume-queue flush: %lld of %lld bytes flushed %lld ms after the last put\n",
           (long long)flushed, (long long)end, (long long)ms);
    CHECK(end - flushed < 2 * RMQ_OS_PAGE_SIZE);
    CHECK(ms <= 2500); /* about 2 intervals, loosely */
  }
  rmq_store_close(s);
  tu_rmrf(dir);
}

int main(void) {
  test_warm_unlocks_left_segments();
  test_warm_flushes_while_warming();
  test_warm_sync_store();
  test_pool_read_after_put(2);
  test_pool_read_after_put(1);
  test_pool_put_wakes_commit();
  test_flush_runs_on_its_own(false);
  test_flush_runs_on_its_own(true);
  test_cq_flush_runs_on_its_own();
  return check_report();
}
