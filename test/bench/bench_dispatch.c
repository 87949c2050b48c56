/*
** bench_dispatch.c: dispatch, recovery and read benchmarks (make bench).
**
** 1. Dispatch lag while one thread appends 1,000,000 100-byte messages at
**    full speed: a sampler notes the CommitLog end, then sleeps on the
**    dispatcher's progress signal until it has passed it; p50/p99 of those
**    waits (they include the sampler's own wake-up).
** 2. Consume-queue reads (entry + CommitLog record decoded) and key look-ups
**    through the index files (record re-checked), per second.
** 3. Recovery after SIGKILL of a process that wrote a full 1 GiB segment
**    (abnormal recovery scans and CRC-checks it), beside the time to just
**    read the same bytes, and a normal (clean) reopen.
** 4. The integrity check of that store (rmq_verify, what rocketmq_verify
**    runs): every record's CRC, every consume-queue entry and index item
**    against its record, beside the time to just read the CommitLog
**    segment (best of three of each).
** 5. Delayed delivery (ScheduleMessageService): 100,000 level-1 ('2s')
**    messages put over 2 s, so that they fall due within 2 s of each other,
**    while another thread keeps appending ordinary messages; lateness of
**    each delivered copy (its store time - its due time, ms) p50/p99/max.
** Sizes follow RocketMQ's defaults except where noted; env RMQ_BENCH_N
** scales the message counts.
*/
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "properties.h"
#include "rmq.h"
#include "service_thread.h"
#include "store.h"

static void die(const char *what, const rmq_err *err) {
  fprintf(stderr, "%s: %s\n", what, err->msg);
  exit(1);
}

/* Put message i of topic BenchTopic, queue i%4, with KEYS=key<i> and a body of len bytes. */
static void put_one(rmq_store *s, int i, int len, rmq_put_result *r) {
  static uint8_t body[4096];
  char props[64];
  size_t plen = 0;
  char key[24];
  int klen = snprintf(key, sizeof key, "key%d", i);
  rmq_properties_append(props, sizeof props, &plen, "KEYS", 4, key, (size_t)klen);
  rmq_properties_append(props, sizeof props, &plen, "TAGS", 4, "TagA", 4);
  rmq_message m = {.topic = "BenchTopic",
                   .topic_len = 10,
                   .queue_id = i & 3,
                   .body = body,
                   .body_len = len,
                   .properties = props,
                   .properties_len = (int32_t)plen};
  rmq_host_parse("10.0.0.1:40000", &m.born_host);
  rmq_err err = {0};
  if (rmq_store_put(s, &m, 1, r, &err) != RMQ_OK) die("put", &err);
}

/* ------------------------------------------------------------ dispatch lag */

typedef struct lag_sampler {
  rmq_store *s;
  atomic_bool done;
  double *samples;
  int n, cap;
} lag_sampler;

/* Sleeps on the dispatcher's progress signal, as a waiting consumer does (no spinning). */
static void *sample_lag(void *p) {
  lag_sampler *ls = p;
  rmq_commitlog *cl = rmq_store_commitlog(ls->s);
  rmq_reput_service *r = rmq_store_reput(ls->s);
  while (!atomic_load(&ls->done) && ls->n < ls->cap) {
    int64_t end = rmq_commitlog_max_offset(cl);
    double t0 = now_s();
    rmq_err err = {0};
    if (rmq_reput_wait_for(r, end, 10000, &err) != RMQ_OK) die("lag", &err);
    ls->samples[ls->n++] = (now_s() - t0) * 1e6;
    usleep(100);
  }
  return NULL;
}

static void bench_dispatch_lag(int n) {
  char dir[] = "/tmp/rmq-bench-XXXXXX";
  if (!mkdtemp(dir)) return;
  rmq_config cfg;
  rmq_config_init(&cfg);
  rmq_store *s;
  rmq_err err = {0};
  if (rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK) die("open", &err);
  lag_sampler ls = {.s = s, .cap = 100000};
  ls.samples = malloc(sizeof(double) * (size_t)ls.cap);
  pthread_t th;
  pthread_create(&th, NULL, sample_lag, &ls);
  rmq_put_result r;
  double t0 = now_s();
  for (int i = 0; i < n; i++) put_one(s, i, 100, &r);
  double put_s = now_s() - t0;
  atomic_store(&ls.done, true);
  pthread_join(th, NULL);
  if (rmq_reput_wait_for(rmq_store_reput(s), r.physical_offset + r.size, 60000, &err) != RMQ_OK)
    die("dispatch", &err);
  double all_s = now_s() - t0;
  qsort(ls.samples, (size_t)ls.n, sizeof(double), cmp_double);
  printf("%-44s %12.0f msg/s appended, %.0f msg/s dispatched\n",
         "append 100 B + dispatch (CQ + index)", n / put_s, n / all_s);
  printf("%-44s p50 %.1f us, p99 %.1f us (%d samples)\n", "dispatch lag while appending",
         ls.samples[ls.n / 2], ls.samples[ls.n * 99 / 100], ls.n);
  free(ls.samples);

  /* Reads: every consume-queue entry with its record, then key look-ups. */
  rmq_cq_table *cqs = rmq_store_consume_queues(s);
  t0 = now_s();
  int64_t read = 0;
  for (int q = 0; q < 4; q++) {
    rmq_consume_queue *cq = rmq_cq_table_find(cqs, "BenchTopic", q);
    rmq_cq_iter it;
    rmq_cq_entry e;
    rmq_cq_iter_start(&it, cq, 0);
    while (rmq_cq_iter_next(&it, &e)) {
      rmq_commitlog_ref ref;
      rmq_message m;
      if (rmq_commitlog_read_message(rmq_store_commitlog(s), e.phy_offset, false, &ref, &m, &err) !=
          RMQ_OK)
        die("read", &err);
      read += m.body_len > 0;
      rmq_commitlog_ref_release(&ref);
    }
    rmq_cq_iter_stop(&it);
  }
  printf("%-44s %12.0f msg/s (%lld messages)\n", "consume-queue read (entry + record)",
         (double)read / (now_s() - t0), (long long)read);
  int lookups = n < 200000 ? n : 200000, found = 0;
  srand(7);
  t0 = now_s();
  for (int i = 0; i < lookups; i++) {
    char key[24];
    int64_t offs[4];
    int cnt;
    snprintf(key, sizeof key, "key%d", rand() % n);
    rmq_store_query_key(s, "BenchTopic", key, 0, INT64_MAX, 4, offs, &cnt, &err);
    found += cnt;
  }
  printf("%-44s %12.0f lookups/s (%d of %d found)\n", "key look-up (index + record re-check)",
         lookups / (now_s() - t0), found, lookups);
  rmq_store_close(s);
  rm_rf(dir);
}

/* ---------------------------------------------------------------- recovery */

/* Child: fill one 1 GiB segment with 1 KiB messages, say so, wait to be killed. */
static void fill_and_wait(const char *dir, int fd) {
  rmq_config cfg;
  rmq_config_init(&cfg);
  rmq_store *s;
  rmq_err err = {0};
  if (rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK) die("open", &err);
  rmq_put_result r = {0};
  for (int i = 0; r.physical_offset < cfg.commitlog_file_size; i++) put_one(s, i, 1024, &r);
  rmq_reput_wait_for(rmq_store_reput(s), r.physical_offset + r.size, 600000, &err);
  if (write(fd, &r.physical_offset, sizeof r.physical_offset) < 0) _exit(1);
  pause();
  _exit(0);
}

static double time_read(const char *dir) {
  char path[256];
  snprintf(path, sizeof path, "%s/commitlog/00000000000000000000", dir);
  int fd = open(path, O_RDONLY);
  static char buf[1 << 20];
  double t0 = now_s();
  uint64_t sum = 0;
  ssize_t got;
  while ((got = read(fd, buf, sizeof buf)) > 0) sum += (uint8_t)buf[got - 1];
  close(fd);
  return sum == 42 ? 0 : now_s() - t0;
}

static double time_open(const char *dir, char *report, size_t cap) {
  rmq_config cfg;
  rmq_config_init(&cfg);
  rmq_store *s;
  rmq_err err = {0};
  double t0 = now_s();
  if (rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK) die("reopen", &err);
  double t = now_s() - t0;
  snprintf(report, cap, "%s", rmq_store_recovery_report(s));
  rmq_store_close(s);
  return t;
}

static int count_defect(void *ctx, const rmq_defect *d) {
  (void)d;
  ++*(int *)ctx;
  return RMQ_OK;
}

/* Check the closed store; *defects: how many were found. */
static double time_verify(const char *dir, int *defects) {
  rmq_err err = {0};
  double t0 = now_s();
  *defects = 0;
  if (rmq_verify(dir, count_defect, defects, &err) != RMQ_OK) die("verify", &err);
  return now_s() - t0;
}

static void bench_recovery(void) {
  char dir[] = "/tmp/rmq-bench-XXXXXX";
  if (!mkdtemp(dir)) return;
  int fds[2];
  if (pipe(fds) != 0) return;
  pid_t pid = fork();
  if (pid == 0) fill_and_wait(dir, fds[1]);
  int64_t last;
  if (read(fds[0], &last, sizeof last) != sizeof last) return;
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  char report[1024];
  double read_s = time_read(dir);
  double abnormal = time_open(dir, report, sizeof report);
  printf("%-44s %8.3f s  (%s)\n", "recovery after SIGKILL, 1 GiB CommitLog", abnormal, report);
  printf("%-44s %8.3f s\n", "just reading the same 1 GiB", read_s);
  double normal = time_open(dir, report, sizeof report);
  printf("%-44s %8.3f s\n", "reopen after a clean shutdown", normal);
  /* Best of three of each, read and check in turn, as the machine's load comes and goes. */
  int defects;
  double verify = 1e9, read_best = 1e9;
  for (int i = 0; i < 3; i++) {
    double r = time_read(dir), v = time_verify(dir, &defects);
    read_best = r < read_best ? r : read_best;
    verify = v < verify ? v : verify;
  }
  printf("%-44s %8.3f s  (%d defects; %.2f of the speed of reading it, %.3f s)\n",
         "verify (rocketmq_verify), 1 GiB CommitLog", verify, defects, read_best / verify,
         read_best);
  rm_rf(dir);
}

/* ---------------------------------------------------------- delayed delivery */

typedef struct background {
  rmq_store *s;
  atomic_bool done;
  int64_t puts;
} background;

/* Ordinary traffic while delayed messages fall due: 100 B puts with a short pause. */
static void *background_puts(void *p) {
  background *b = p;
  rmq_put_result r;
  for (int i = 0; !atomic_load(&b->done); i++) {
    put_one(b->s, i, 100, &r);
    b->puts++;
    if ((i & 63) == 0) usleep(1000);
  }
  return NULL;
}

static void put_delayed(rmq_store *s, int i, int64_t *due) {
  char props[32];
  size_t plen = 0;
  rmq_properties_append(props, sizeof props, &plen, "DELAY", 5, "1", 1);
  rmq_message m = {.topic = "Late",
                   .topic_len = 4,
                   .body = (const uint8_t *)&i,
                   .body_len = sizeof i,
                   .properties = props,
                   .properties_len = (int32_t)plen};
  rmq_put_result r;
  rmq_err err = {0};
  if (rmq_store_put(s, &m, 1, &r, &err) != RMQ_OK) die("put delayed", &err);
  due[i] = r.store_timestamp + 2000;
}

/* Lateness of every delivered copy in the real topic, ms, sorted. */
static int lateness(rmq_store *s, const int64_t *due, int n, double *late) {
  rmq_consume_queue *cq = rmq_store_find_queue(s, "Late", 0);
  rmq_cq_iter it;
  rmq_cq_entry e;
  rmq_err err = {0};
  int k = 0;
  rmq_cq_iter_start(&it, cq, 0);
  while (k < n && rmq_cq_iter_next(&it, &e)) {
    rmq_commitlog_ref ref;
    rmq_message m;
    if (rmq_store_read(s, e.phy_offset, &ref, &m, &err) != RMQ_OK) die("read", &err);
    int i;
    memcpy(&i, m.body, sizeof i);
    late[k++] = (double)(m.store_timestamp - due[i]);
    rmq_commitlog_ref_release(&ref);
  }
  rmq_cq_iter_stop(&it);
  qsort(late, (size_t)k, sizeof *late, cmp_double);
  return k;
}

static void bench_delayed(int n) {
  char dir[] = "/tmp/rmq-bench-XXXXXX";
  if (!mkdtemp(dir)) return;
  rmq_config cfg;
  rmq_config_init(&cfg);
  snprintf(cfg.delay_levels, sizeof cfg.delay_levels, "2s");
  rmq_store *s;
  rmq_err err = {0};
  if (rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK) die("open", &err);
  int64_t *due = malloc(sizeof *due * (size_t)n);
  double *late = malloc(sizeof *late * (size_t)n);
  background b = {.s = s};
  pthread_t th;
  pthread_create(&th, NULL, background_puts, &b);
  /* n puts spread over 2 s, in steps of 1 ms */
  double t0 = now_s();
  for (int i = 0; i < n; i++) {
    put_delayed(s, i, due);
    double ahead = t0 + 2.0 * (i + 1) / n - now_s();
    if (ahead > 0.001) usleep((useconds_t)(ahead * 1e6));
  }
  bool all = rmq_store_wait_queue(s, "Late", 0, n - 1, rmq_monotonic_ms() + 30000);
  atomic_store(&b.done, true);
  pthread_join(th, NULL);
  int k = lateness(s, due, n, late);
  printf("%-44s p50 %.0f ms, p99 %.0f ms, max %.0f ms (%d of %d delivered, %lld other puts)\n",
         "delayed delivery lateness (2 s level)", late[k / 2], late[k * 99 / 100], late[k - 1], k,
         n, (long long)b.puts);
  if (!all) fprintf(stderr, "delayed delivery: only %d of %d delivered in time\n", k, n);
  free(due);
  free(late);
  rmq_store_close(s);
  rm_rf(dir);
}

int main(void) {
  const char *env = getenv("RMQ_BENCH_N");
  int n = env ? atoi(env) : 1000000;
  printf("\nDispatch, reads and recovery (one run each; flush='async')\n");
  bench_dispatch_lag(n);
  bench_recovery();
  bench_delayed(n / 10);
  return 0;
}
