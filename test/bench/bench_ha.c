/*
** bench_ha.c: replication on loopback, master and slave in one process
** (make bench), with RocketMQ's default 1 GiB segments and flush='async':
**
** - async master: N messages (env RMQ_BENCH_HA_N, default 200,000) of 1 KiB
**   from one thread; the replication rate from the first put until the
**   slave's end equals the master's, and the lag (master's end minus the
**   slave's) sampled every 10 ms while it runs, p50 and p99;
** - catch-up: an empty slave opened beside a master that holds them all,
**   from its open until it has everything;
** - sync_master: 20,000 messages of 100 B from 16 threads, each put waiting
**   for the slave's ack: msg/s and put latency p50/p99; the same on an
**   async master beside it.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "rmq.h"
#include "store.h"

#define SYNC_THREADS 16
#define SYNC_MESSAGES 20000

static rmq_store *open_store(const char *dir, rmq_role role, const char *listen,
                             const char *master) {
  rmq_config cfg;
  rmq_config_init(&cfg);
  cfg.role = role;
  snprintf(cfg.ha_listen, sizeof cfg.ha_listen, "%s", listen);
  snprintf(cfg.ha_master, sizeof cfg.ha_master, "%s", master);
  rmq_store *s = NULL;
  rmq_err err = {0};
  if (rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK) fprintf(stderr, "open: %s\n", err.msg);
  return s;
}

static int64_t end_of(rmq_store *s) { return rmq_commitlog_max_offset(rmq_store_commitlog(s)); }

static int first_row(void *ctx, const rmq_ha_row *r) {
  *(bool *)ctx = strcmp(r->state, "connected") == 0;
  return RMQ_OK;
}

static bool wait_connected(rmq_store *m) {
  for (int i = 0; i < 1000; i++) {
    bool connected = false;
    rmq_err err = {0};
    rmq_store_ha(m, first_row, &connected, &err);
    if (connected) return true;
    usleep(5000);
  }
  return false;
}

static void wait_caught_up(rmq_store *m, rmq_store *s) {
  while (end_of(s) < end_of(m)) usleep(200);
}

typedef struct lag_sampler {
  rmq_store *m, *s;
  atomic_bool stop;
  double *lag;
  int n, cap;
} lag_sampler;

static void *sample_lag(void *arg) {
  lag_sampler *l = arg;
  while (!atomic_load(&l->stop) && l->n < l->cap) {
    l->lag[l->n++] = (double)(end_of(l->m) - end_of(l->s));
    usleep(10000);
  }
  return NULL;
}

static int put_one(rmq_store *s, const void *body, int len, int queue) {
  rmq_message m = {.topic = "BenchHa",
                   .topic_len = 7,
                   .queue_id = queue,
                   .body = body,
                   .body_len = len,
                   .born_timestamp = rmq_now_ms()};
  rmq_host_parse("10.0.0.1:40000", &m.born_host);
  rmq_err err = {0};
  int rc = rmq_store_put(s, &m, 1, NULL, &err);
  if (rc != RMQ_OK) fprintf(stderr, "put: %s\n", err.msg);
  return rc;
}

static void bench_async(int n) {
  char md[] = "/tmp/rmq-bench-ha-m-XXXXXX", sd[] = "/tmp/rmq-bench-ha-s-XXXXXX";
  char cd[] = "/tmp/rmq-bench-ha-c-XXXXXX";
  if (!mkdtemp(md) || !mkdtemp(sd) || !mkdtemp(cd)) return;
  rmq_store *m = open_store(md, RMQ_ROLE_MASTER, "127.0.0.1:0", "");
  rmq_store *s = m ? open_store(sd, RMQ_ROLE_SLAVE, "", rmq_store_ha_address(m)) : NULL;
  if (!s || !wait_connected(m)) return;
  static char body[1024];
  memset(body, 'b', sizeof body);
  lag_sampler l = {.m = m, .s = s, .cap = 100000};
  l.lag = malloc(sizeof(double) * (size_t)l.cap);
  pthread_t tid;
  pthread_create(&tid, NULL, sample_lag, &l);
  double t0 = now_s();
  for (int i = 0; i < n; i++) {
    if (put_one(m, body, sizeof body, i & 3) != RMQ_OK) break;
  }
  double put_s = now_s() - t0;
  wait_caught_up(m, s);
  double rep_s = now_s() - t0;
  atomic_store(&l.stop, true);
  pthread_join(tid, NULL);
  int64_t bytes = end_of(m);
  qsort(l.lag, (size_t)l.n, sizeof *l.lag, cmp_double);
  printf("async master + slave, %d x 1 KiB: replication %.1f MB/s (%.0f msg/s), puts alone %.1f "
         "MB/s; lag p50 %.2f MB, p99 %.2f MB (%d samples)\n",
         n, (double)bytes / rep_s / 1e6, n / rep_s, (double)bytes / put_s / 1e6,
         l.n ? l.lag[l.n / 2] / 1e6 : 0, l.n ? l.lag[l.n * 99 / 100] / 1e6 : 0, l.n);
  rmq_store_close(s);
  /* Catch-up: an empty slave of a master that holds everything (its last segment on). */
  t0 = now_s();
  rmq_store *c = open_store(cd, RMQ_ROLE_SLAVE, "", rmq_store_ha_address(m));
  if (c) {
    wait_caught_up(m, c);
    double s_up = now_s() - t0;
    int64_t from = rmq_commitlog_min_offset(rmq_store_commitlog(c));
    printf("catch-up: an empty slave copies %.1f MB in %.2f s: %.1f MB/s (from its open)\n",
           (double)(bytes - from) / 1e6, s_up, (double)(bytes - from) / s_up / 1e6);
  }
  rmq_store_close(c);
  rmq_store_close(m);
  free(l.lag);
  rm_rf(md);
  rm_rf(sd);
  rm_rf(cd);
}

typedef struct producer {
  rmq_store *s;
  int n, q;
  double *lat;
} producer;

static void *produce(void *arg) {
  producer *p = arg;
  char body[100];
  memset(body, 's', sizeof body);
  for (int i = 0; i < p->n; i++) {
    double a = now_s();
    if (put_one(p->s, body, sizeof body, p->q) != RMQ_OK) break;
    p->lat[i] = (now_s() - a) * 1e6;
  }
  return NULL;
}

static void run_threads(rmq_store *m, const char *what) {
  producer ps[SYNC_THREADS];
  pthread_t tids[SYNC_THREADS];
  int per = SYNC_MESSAGES / SYNC_THREADS;
  double *lat = calloc((size_t)SYNC_MESSAGES, sizeof *lat);
  double t0 = now_s();
  for (int i = 0; i < SYNC_THREADS; i++) {
    ps[i] = (producer){.s = m, .n = per, .q = i & 3, .lat = lat + i * per};
    pthread_create(&tids[i], NULL, produce, &ps[i]);
  }
  for (int i = 0; i < SYNC_THREADS; i++) pthread_join(tids[i], NULL);
  double secs = now_s() - t0;
  int n = per * SYNC_THREADS;
  qsort(lat, (size_t)n, sizeof *lat, cmp_double);
  printf("%-28s %d threads x 100 B: %.0f msg/s, put p50 %.1f us, p99 %.1f us\n", what, SYNC_THREADS,
         n / secs, lat[n / 2], lat[n * 99 / 100]);
  free(lat);
}

static void bench_sync(rmq_role role, const char *what) {
  char md[] = "/tmp/rmq-bench-ha-m-XXXXXX", sd[] = "/tmp/rmq-bench-ha-s-XXXXXX";
  if (!mkdtemp(md) || !mkdtemp(sd)) return;
  rmq_store *m = open_store(md, role, "127.0.0.1:0", "");
  rmq_store *s = m ? open_store(sd, RMQ_ROLE_SLAVE, "", rmq_store_ha_address(m)) : NULL;
  if (s && wait_connected(m)) run_threads(m, what);
  rmq_store_close(s);
  rmq_store_close(m);
  rm_rf(md);
  rm_rf(sd);
}

int main(void) {
  const char *env = getenv("RMQ_BENCH_HA_N");
  int n = env ? atoi(env) : 200000;
  printf("Replication on loopback, master and slave in one process, 1 GiB segments\n");
  bench_async(n);
  bench_sync(RMQ_ROLE_SYNC_MASTER, "sync_master + slave:");
  bench_sync(RMQ_ROLE_MASTER, "async master + slave:");
  return 0;
}
