/*
** bench_engine.c: the CommitLog append benchmark (make bench).
**
** Appends N messages (default 1,000,000; env RMQ_BENCH_N) of 100 B and of
** 1 KiB with flush='async' from one thread, through the engine API, each
** with a fresh UNIQ_KEY and a TAGS property as a producer sends them. Beside
** it, in the same run, the raw ceiling of this machine: memcpy of the same
** record bytes into a mapping that was warmed first; and the put again with
** transient_store_pool=2, whose put commits its bytes into the file before it
** returns. Each figure is the
** median of 3 runs; put latency p50/p99 come from the median run.
*/
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "message.h"
#include "properties.h"
#include "rmq.h"
#include "service_thread.h"
#include "store.h"

#define RUNS 3

typedef struct run_result {
  double seconds;
  double p50_us, p99_us;
  int64_t bytes;
} run_result;

/* One run of n appends of body_len bytes; latencies sampled on every 8th put. */
static int run_engine(int n, int body_len, int pool, run_result *out) {
  char dir[] = "/tmp/rmq-bench-XXXXXX";
  if (!mkdtemp(dir)) return -1;
  rmq_config cfg;
  rmq_config_init(&cfg);
  cfg.transient_store_pool = pool;
  rmq_store *s;
  rmq_err err = {0};
  if (rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK) {
    fprintf(stderr, "open: %s\n", err.msg);
    return -1;
  }
  rmq_uniq_key_gen *gen = rmq_uniq_key_gen_new();
  uint8_t *body = malloc((size_t)body_len);
  memset(body, 'm', (size_t)body_len);
  int samples = n / 8 + 1, ns = 0;
  double *lat = malloc(sizeof(double) * (size_t)samples);
  rmq_message m = {.topic = "BenchTopic",
                   .topic_len = 10,
                   .body = body,
                   .body_len = body_len,
                   .born_timestamp = rmq_now_ms()};
  rmq_host_parse("10.0.0.1:40000", &m.born_host);
  char props[128];
  rmq_put_result r;
  double t0 = now_s();
  for (int i = 0; i < n; i++) {
    double a = (i & 7) == 0 ? now_s() : 0;
    char key[RMQ_MSG_ID_MAX];
    int klen = rmq_uniq_key_next(gen, key);
    size_t plen = 0;
    rmq_properties_append(props, sizeof props, &plen, "UNIQ_KEY", 8, key, (size_t)klen);
    rmq_properties_append(props, sizeof props, &plen, "TAGS", 4, "TagA", 4);
    m.properties = props;
    m.properties_len = (int32_t)plen;
    m.queue_id = i & 3;
    if (rmq_store_put(s, &m, 1, &r, &err) != RMQ_OK) {
      fprintf(stderr, "put: %s\n", err.msg);
      return -1;
    }
    if (a != 0) lat[ns++] = (now_s() - a) * 1e6;
  }
  out->seconds = now_s() - t0;
  out->bytes = rmq_mfq_max_wrote(&rmq_store_commitlog(s)->mfq);
  qsort(lat, (size_t)ns, sizeof *lat, cmp_double);
  out->p50_us = lat[ns / 2];
  out->p99_us = lat[ns * 99 / 100];
  rmq_store_close(s);
  rmq_uniq_key_gen_free(gen);
  free(lat);
  free(body);
  rm_rf(dir);
  return 0;
}

/* The ceiling: copy the same number of records of the same size into a warmed mapping. */
static int run_ceiling(int n, int32_t record_len, run_result *out) {
  char path[] = "/tmp/rmq-bench-ceiling-XXXXXX";
  int fd = mkstemp(path);
  size_t total = (size_t)n * (size_t)record_len;
  if (fd < 0 || ftruncate(fd, (off_t)total) != 0) return -1;
  uint8_t *map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return -1;
  for (size_t i = 0; i < total; i += 4096) map[i] = 0;
  uint8_t *rec = malloc((size_t)record_len);
  memset(rec, 'r', (size_t)record_len);
  double t0 = now_s();
  for (int i = 0; i < n; i++) memcpy(map + (size_t)i * (size_t)record_len, rec, (size_t)record_len);
  out->seconds = now_s() - t0;
  out->bytes = (int64_t)total;
  munmap(map, total);
  close(fd);
  unlink(path);
  free(rec);
  return 0;
}

static int median_index(run_result *r) {
  double t[RUNS];
  for (int i = 0; i < RUNS; i++) t[i] = r[i].seconds;
  double m = median(t, RUNS);
  for (int i = 0; i < RUNS; i++)
    if (r[i].seconds == m) return i;
  return 0;
}

int main(void) {
  const char *env = getenv("RMQ_BENCH_N");
  int n = env ? atoi(env) : 1000000;
  int sizes[2] = {100, 1024};
  printf("CommitLog append, %d messages per run, median of %d runs, flush='async', 1 thread\n", n,
         RUNS);
  printf("%-8s %-22s %12s %10s %10s %10s %12s\n", "body", "what", "msg/s", "MB/s", "p50 us",
         "p99 us", "of ceiling");
  for (int si = 0; si < 2; si++) {
    run_result eng[RUNS], ceil[RUNS], pool[RUNS];
    for (int i = 0; i < RUNS; i++) {
      if (run_engine(n, sizes[si], 0, &eng[i]) != 0) return 1;
      int32_t rec = (int32_t)(eng[i].bytes / n);
      if (run_ceiling(n, rec, &ceil[i]) != 0) return 1;
      if (run_engine(n, sizes[si], 2, &pool[i]) != 0) return 1;
    }
    run_result *e = &eng[median_index(eng)], *c = &ceil[median_index(ceil)];
    run_result *p = &pool[median_index(pool)];
    double e_rate = n / e->seconds, c_rate = n / c->seconds;
    printf("%-8d %-22s %12.0f %10.1f %10.2f %10.2f %11.0f%%\n", sizes[si], "rocketmq engine put",
           e_rate, (double)e->bytes / e->seconds / 1e6, e->p50_us, e->p99_us,
           100.0 * e_rate / c_rate);
    printf("%-8d %-22s %12.0f %10.1f %10s %10s %12s\n", sizes[si], "memcpy ceiling", c_rate,
           (double)c->bytes / c->seconds / 1e6, "-", "-", "100%");
    double p_rate = n / p->seconds;
    printf("%-8d %-22s %12.0f %10.1f %10.2f %10.2f %11.0f%%\n", sizes[si], "put, transient pool 2",
           p_rate, (double)p->bytes / p->seconds / 1e6, p->p50_us, p->p99_us,
           100.0 * p_rate / c_rate);
  }
  return 0;
}
