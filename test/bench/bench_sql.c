/*
** bench_sql.c: the SQL paths of the rocketmq store table (make bench).
**
** Every path runs, in the same process and through the SQLite C API with
** prepared statements and bound parameters as an application would, on three
** tables:
**
**   rocketmq  CREATE VIRTUAL TABLE mq USING rocketmq(dir=<fresh temp dir>, ...)
**             on a :memory: connection that loaded the extension (env RMQ_EXT,
**             default build/rocketmq).
**   plain     an ordinary SQLite table holding what a message carries (topic,
**             queue_id, queue_offset, uniq_key, tags, keys, body, properties,
**             flag, born_timestamp, born_host, store_timestamp, store_host;
**             the rowid stands for the commit-log offset), with an index on
**             (topic, queue_id, queue_offset) and one on keys, in a WAL
**             database with synchronous=NORMAL (FULL for the sync-flush row)
**             and a 64 MiB page cache. The application assigns queue_offset
**             from its own per-queue counter (cheaper than a max()+1 subquery,
**             so the fairest choice for the plain table) and its own uniq_key.
**   ceiling   a do-nothing virtual table defined here, with the same columns:
**             xUpdate discards rows, xFilter returns nothing. It is what the
**             SQL layer alone costs for the same statements.
**
** Rows (N = env RMQ_BENCH_SQL_N, default 200000):
**   1. N INSERTs in one transaction, 100 B and 1 KiB bodies; for rocketmq
**      also "until queryable", i.e. until the dispatcher has built the consume
**      queues and the key index (a plain table's indexes are built in the
**      INSERT itself).
**   2. N/10 autocommit INSERTs (flush='async' vs synchronous=NORMAL).
**   3. Autocommit INSERTs from 4 threads, one connection each, N/100 rows per
**      thread: flush='sync' (one shared group commit) vs synchronous=FULL
**      (busy_timeout for the write lock); rows/s and per-INSERT latency.
**   4. Consume-queue reads: all of queue 0 in 32-row batches
**      (queue_offset >= ? AND queue_offset < ?), of N 100 B messages.
**   5. N/10 key look-ups of random keys (topic = ? AND key = ? vs keys = ?).
** Env RMQ_BENCH_SQL_OPTIONS adds options to the flush='async' rocketmq tables
** (e.g. 'transient_store_pool=2'). Every figure is the median of 3 runs (inserts: fresh temp dirs, removed
** after; row 3's latencies come from the run of median rows/s; reads: 3
** passes over one store per table). Every message has tags 'TagA', keys
** 'key<i>', queue i % 4 (the thread's own queue in row 3) and no user
** properties.
*/
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#define RUNS 3
#define NQUEUES 4
#define NTHREADS 4
#define BATCH 32
#define TOPIC "BenchTopic"

typedef enum target { T_RMQ, T_PLAIN, T_CEIL, T_COUNT } target;

static const char *ext_path;

/* ------------------------------------------------------------ utilities */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void die(sqlite3 *db, const char *what) {
  fprintf(stderr, "bench_sql: %s: %s\n", what, db ? sqlite3_errmsg(db) : "out of memory");
  exit(1);
}

static void exec(sqlite3 *db, const char *sql) {
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "bench_sql: %s: %s\n", sql, err);
    exit(1);
  }
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) die(db, sql);
  return st;
}

/* --------------------------------------------- the do-nothing virtual table */

/* The rocketmq table's columns, so that the same statements run on it. */
#define MQ_COLUMNS                                                                              \
  "commitlog_offset INTEGER, size INTEGER, msg_id TEXT, uniq_key TEXT, topic TEXT,"             \
  " queue_id INTEGER, queue_offset INTEGER, tags TEXT, keys TEXT, body BLOB, body_text TEXT,"   \
  " properties TEXT, flag INTEGER, sys_flag INTEGER, body_crc INTEGER, born_timestamp INTEGER," \
  " born_host TEXT, store_timestamp INTEGER, store_host TEXT, reconsume_times INTEGER,"         \
  " prepared_transaction_offset INTEGER, delay_level INTEGER HIDDEN, key TEXT HIDDEN,"          \
  " wait_ms INTEGER HIDDEN"

static int noop_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                        sqlite3_vtab **out, char **errmsg) {
  (void)aux, (void)argc, (void)argv, (void)errmsg;
  int rc = sqlite3_declare_vtab(db, "CREATE TABLE x(" MQ_COLUMNS ")");
  if (rc != SQLITE_OK) return rc;
  if ((*out = sqlite3_malloc(sizeof **out)) == NULL) return SQLITE_NOMEM;
  memset(*out, 0, sizeof **out);
  return SQLITE_OK;
}

static int noop_disconnect(sqlite3_vtab *vt) {
  sqlite3_free(vt);
  return SQLITE_OK;
}

/* Take every usable constraint, so that its value reaches xFilter as rocketmq's do. */
static int noop_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  (void)vt;
  int n = 0;
  for (int i = 0; i < info->nConstraint; i++) {
    if (!info->aConstraint[i].usable) continue;
    info->aConstraintUsage[i].argvIndex = ++n;
    info->aConstraintUsage[i].omit = 1;
  }
  info->estimatedCost = n ? 1 : 1e6;
  return SQLITE_OK;
}

static int noop_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  (void)vt;
  if ((*out = sqlite3_malloc(sizeof **out)) == NULL) return SQLITE_NOMEM;
  memset(*out, 0, sizeof **out);
  return SQLITE_OK;
}

static int noop_close(sqlite3_vtab_cursor *c) {
  sqlite3_free(c);
  return SQLITE_OK;
}

static int noop_filter(sqlite3_vtab_cursor *c, int idx_num, const char *idx_str, int argc,
                       sqlite3_value **argv) {
  (void)c, (void)idx_num, (void)idx_str, (void)argc, (void)argv;
  return SQLITE_OK;
}

static int noop_next(sqlite3_vtab_cursor *c) {
  (void)c;
  return SQLITE_OK;
}

static int noop_eof(sqlite3_vtab_cursor *c) {
  (void)c;
  return 1;
}

static int noop_column(sqlite3_vtab_cursor *c, sqlite3_context *ctx, int col) {
  (void)c, (void)ctx, (void)col;
  return SQLITE_OK;
}

static int noop_rowid(sqlite3_vtab_cursor *c, sqlite3_int64 *rowid) {
  (void)c;
  *rowid = 0;
  return SQLITE_OK;
}

static int noop_update(sqlite3_vtab *vt, int argc, sqlite3_value **argv, sqlite3_int64 *rowid) {
  (void)vt, (void)argc, (void)argv;
  *rowid = 0;
  return SQLITE_OK;
}

static sqlite3_module noop_module = {
    .iVersion = 1,
    .xCreate = noop_connect,
    .xConnect = noop_connect,
    .xBestIndex = noop_best_index,
    .xDisconnect = noop_disconnect,
    .xDestroy = noop_disconnect,
    .xOpen = noop_open,
    .xClose = noop_close,
    .xFilter = noop_filter,
    .xNext = noop_next,
    .xEof = noop_eof,
    .xColumn = noop_column,
    .xRowid = noop_rowid,
    .xUpdate = noop_update,
};

/* ------------------------------------------------------------ the tables */

#define PLAIN_SCHEMA                                                                         \
  "CREATE TABLE mq(topic TEXT, queue_id INTEGER, queue_offset INTEGER, uniq_key TEXT,"       \
  " tags TEXT, keys TEXT, body BLOB, properties TEXT, flag INTEGER, born_timestamp INTEGER," \
  " born_host TEXT, store_timestamp INTEGER, store_host TEXT);"                              \
  "CREATE INDEX mq_queue ON mq(topic, queue_id, queue_offset);"                              \
  "CREATE INDEX mq_keys ON mq(keys);"

/* rocketmq assigns queue_offset, uniq_key, store_timestamp and store_host itself. */
#define STORE_INSERT                                                             \
  "INSERT INTO mq(topic, queue_id, tags, keys, body, born_timestamp, born_host)" \
  " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
#define PLAIN_INSERT                                                             \
  "INSERT INTO mq(topic, queue_id, tags, keys, body, born_timestamp, born_host," \
  " queue_offset, uniq_key, store_timestamp, store_host)"                        \
  " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"

#define READ_COLUMNS \
  "SELECT queue_offset, uniq_key, tags, keys, body, born_timestamp, store_timestamp FROM mq"
#define CQ_READ \
  READ_COLUMNS " WHERE topic = ?1 AND queue_id = ?2 AND queue_offset >= ?3 AND queue_offset < ?4"
#define STORE_KEY_READ READ_COLUMNS " WHERE topic = ?1 AND key = ?2"
#define PLAIN_KEY_READ READ_COLUMNS " WHERE topic = ?1 AND keys = ?2"

typedef struct table {
  target t;
  char dir[64];      /* rocketmq's store, the plain database's directory */
  const char *flush; /* rocketmq: 'async' or 'sync' */
  const char *sync;  /* plain: NORMAL or FULL */
} table;

static void table_create(table *tb, target t, const char *flush, const char *sync) {
  tb->t = t;
  tb->flush = flush;
  tb->sync = sync;
  tb->dir[0] = 0;
  if (t != T_CEIL) {
    snprintf(tb->dir, sizeof tb->dir, "/tmp/rmq-bench-sql-XXXXXX");
    if (!mkdtemp(tb->dir)) {
      perror("mkdtemp");
      exit(1);
    }
  }
}

static void table_remove(table *tb) {
  if (tb->dir[0]) rm_rf(tb->dir);
}

/* A new connection on which `mq` is the table; first creates the plain schema. */
static sqlite3 *table_connect(const table *tb, bool first) {
  sqlite3 *db;
  char path[128];
  snprintf(path, sizeof path, "%s/plain.db", tb->dir);
  if (sqlite3_open(tb->t == T_PLAIN ? path : ":memory:", &db) != SQLITE_OK) die(db, "open");
  char *sql = NULL;
  switch (tb->t) {
    case T_RMQ: {
      char *err = NULL;
      sqlite3_enable_load_extension(db, 1);
      if (sqlite3_load_extension(db, ext_path, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "bench_sql: cannot load %s (env RMQ_EXT): %s\n", ext_path, err);
        exit(1);
      }
      const char *opts = getenv("RMQ_BENCH_SQL_OPTIONS");
      bool async = strcmp(tb->flush, "async") == 0;
      sql = sqlite3_mprintf("CREATE VIRTUAL TABLE mq USING rocketmq(dir='%q', flush='%s'%s%s)",
                            tb->dir, tb->flush, opts && async ? ", " : "",
                            opts && async ? opts : "");
      exec(db, sql);
      break;
    }
    case T_PLAIN:
      sqlite3_busy_timeout(db, 60000);
      sql = sqlite3_mprintf("PRAGMA journal_mode=WAL; PRAGMA synchronous=%s;"
                            " PRAGMA cache_size=-65536;",
                            tb->sync);
      exec(db, sql);
      if (first) exec(db, PLAIN_SCHEMA);
      break;
    default:
      if (sqlite3_create_module(db, "noop", &noop_module, NULL) != SQLITE_OK) die(db, "module");
      exec(db, "CREATE VIRTUAL TABLE mq USING noop");
      break;
  }
  sqlite3_free(sql);
  return db;
}

/* ------------------------------------------------------------- producers */

typedef struct writer {
  sqlite3 *db;
  sqlite3_stmt *ins;
  target t;
  int64_t next_offset[NQUEUES]; /* plain: the application's queue-offset counters */
  uint64_t seq;                 /* plain: the application's uniq keys */
  int64_t epoch;
  const uint8_t *body;
  int body_len;
} writer;

static void writer_init(writer *w, sqlite3 *db, target t, const uint8_t *body, int body_len) {
  memset(w, 0, sizeof *w);
  w->db = db;
  w->t = t;
  w->ins = prepare(db, t == T_PLAIN ? PLAIN_INSERT : STORE_INSERT);
  w->epoch = now_ms();
  w->body = body;
  w->body_len = body_len;
}

/* INSERT message i into queue q. */
static void writer_put(writer *w, int i, int q) {
  sqlite3_stmt *st = w->ins;
  char key[24], uniq[40];
  int klen = snprintf(key, sizeof key, "key%d", i);
  int64_t ts = now_ms();
  sqlite3_bind_text(st, 1, TOPIC, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 2, q);
  sqlite3_bind_text(st, 3, "TagA", 4, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, key, klen, SQLITE_STATIC);
  sqlite3_bind_blob(st, 5, w->body, w->body_len, SQLITE_STATIC);
  sqlite3_bind_int64(st, 6, ts);
  sqlite3_bind_text(st, 7, "10.0.0.1:40000", -1, SQLITE_STATIC);
  if (w->t == T_PLAIN) {
    int ulen = snprintf(uniq, sizeof uniq, "%016llX%016llX", (unsigned long long)w->epoch,
                        (unsigned long long)w->seq++);
    sqlite3_bind_int64(st, 8, w->next_offset[q]++);
    sqlite3_bind_text(st, 9, uniq, ulen, SQLITE_STATIC);
    sqlite3_bind_int64(st, 10, ts);
    sqlite3_bind_text(st, 11, "127.0.0.1:10911", -1, SQLITE_STATIC);
  }
  if (sqlite3_step(st) != SQLITE_DONE) die(w->db, "INSERT");
  sqlite3_reset(st);
}

static void writer_done(writer *w) { sqlite3_finalize(w->ins); }

/* Rows a key look-up of message i finds; for rocketmq it waits for the dispatcher first. */
static int key_count(sqlite3 *db, target t, int i) {
  sqlite3_stmt *st = prepare(db, t == T_PLAIN
                                     ? "SELECT count(*) FROM mq WHERE topic = ?1 AND keys = ?2"
                                     : "SELECT count(*) FROM mq WHERE topic = ?1 AND key = ?2");
  char key[24];
  snprintf(key, sizeof key, "key%d", i);
  sqlite3_bind_text(st, 1, TOPIC, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, key, -1, SQLITE_TRANSIENT);
  if (sqlite3_step(st) != SQLITE_ROW) die(db, "key count");
  int n = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  return n;
}

static void check_found(sqlite3 *db, target t, int i) {
  if (t != T_CEIL && key_count(db, t, i) != 1) {
    fprintf(stderr, "bench_sql: key%d not found after its INSERT\n", i);
    exit(1);
  }
}

/* ---------------------------------------------- 1, 2: one-connection INSERTs */

typedef struct insert_result {
  double rate;         /* rows/s at COMMIT (or at the last autocommit INSERT) */
  double indexed_rate; /* rows/s until a key look-up of the last row finds it */
} insert_result;

static insert_result run_inserts(target t, int n, int body_len, bool one_txn) {
  static uint8_t body[1024];
  memset(body, 'm', sizeof body);
  table tb;
  table_create(&tb, t, "async", "NORMAL");
  sqlite3 *db = table_connect(&tb, true);
  writer w;
  writer_init(&w, db, t, body, body_len);
  double t0 = now_s();
  if (one_txn) exec(db, "BEGIN");
  for (int i = 0; i < n; i++) writer_put(&w, i, i % NQUEUES);
  if (one_txn) exec(db, "COMMIT");
  double t1 = now_s();
  check_found(db, t, n - 1);
  double t2 = now_s();
  writer_done(&w);
  if (sqlite3_close(db) != SQLITE_OK) die(db, "close");
  table_remove(&tb);
  return (insert_result){n / (t1 - t0), n / (t2 - t0)};
}

/* Medians of RUNS runs of each target. */
static void median_inserts(int n, int body_len, bool one_txn, insert_result out[T_COUNT]) {
  for (int t = 0; t < T_COUNT; t++) {
    double r[RUNS], ir[RUNS];
    for (int i = 0; i < RUNS; i++) {
      insert_result x = run_inserts((target)t, n, body_len, one_txn);
      r[i] = x.rate;
      ir[i] = x.indexed_rate;
    }
    out[t].rate = median(r, RUNS);
    out[t].indexed_rate = median(ir, RUNS);
  }
}

/* --------------------------------------------- 3: sync INSERTs from 4 threads */

typedef struct thread_arg {
  writer w;
  int rows, queue;
  double *lat_us;
  pthread_barrier_t *start;
} thread_arg;

static void *sync_writer(void *p) {
  thread_arg *a = p;
  pthread_barrier_wait(a->start);
  for (int i = 0; i < a->rows; i++) {
    double t0 = now_s();
    writer_put(&a->w, a->queue * a->rows + i, a->queue);
    a->lat_us[i] = (now_s() - t0) * 1e6;
  }
  return NULL;
}

typedef struct sync_result {
  double rate, p50_us, p99_us, max_us;
} sync_result;

static sync_result run_sync(target t, int rows_per_thread) {
  static uint8_t body[100];
  memset(body, 'm', sizeof body);
  table tb;
  table_create(&tb, t, "sync", "FULL");
  sqlite3 *dbs[NTHREADS];
  thread_arg args[NTHREADS];
  pthread_t th[NTHREADS];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, NTHREADS + 1);
  int total = rows_per_thread * NTHREADS;
  double *lat = malloc(sizeof(double) * (size_t)total);
  if (!lat) die(NULL, "latencies");
  for (int i = 0; i < NTHREADS; i++) {
    dbs[i] = table_connect(&tb, i == 0);
    writer_init(&args[i].w, dbs[i], t, body, (int)sizeof body);
    args[i].rows = rows_per_thread;
    args[i].queue = i;
    args[i].lat_us = lat + (size_t)i * (size_t)rows_per_thread;
    args[i].start = &start;
    pthread_create(&th[i], NULL, sync_writer, &args[i]);
  }
  pthread_barrier_wait(&start);
  double t0 = now_s();
  for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
  double secs = now_s() - t0;
  check_found(dbs[0], t, total - 1);
  for (int i = 0; i < NTHREADS; i++) {
    writer_done(&args[i].w);
    if (sqlite3_close(dbs[i]) != SQLITE_OK) die(dbs[i], "close");
  }
  pthread_barrier_destroy(&start);
  table_remove(&tb);
  qsort(lat, (size_t)total, sizeof *lat, cmp_double);
  sync_result r = {total / secs, lat[total / 2], lat[(size_t)total * 99 / 100], lat[total - 1]};
  free(lat);
  return r;
}

/* The run of median rate among RUNS runs; its latencies come with it. */
static sync_result median_sync(target t, int rows_per_thread) {
  sync_result r[RUNS];
  double rates[RUNS];
  for (int i = 0; i < RUNS; i++) rates[i] = (r[i] = run_sync(t, rows_per_thread)).rate;
  double m = median(rates, RUNS);
  for (int i = 0; i < RUNS; i++)
    if (r[i].rate == m) return r[i];
  return r[0];
}

/* ------------------------------------------------------------ 4, 5: reads */

/* Step a read to its end, touching every column as a consumer does; rows read. */
static int drain(sqlite3 *db, sqlite3_stmt *st, uint64_t *sum) {
  int rows = 0, rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    *sum += (uint64_t)sqlite3_column_int64(st, 0);
    *sum += (uint64_t)sqlite3_column_bytes(st, 1);
    *sum += (uint64_t)sqlite3_column_bytes(st, 2);
    *sum += (uint64_t)sqlite3_column_bytes(st, 3);
    const uint8_t *b = sqlite3_column_blob(st, 4);
    *sum += (uint64_t)sqlite3_column_bytes(st, 4) + (b ? b[0] : 0);
    *sum += (uint64_t)sqlite3_column_int64(st, 5) + (uint64_t)sqlite3_column_int64(st, 6);
    rows++;
  }
  if (rc != SQLITE_DONE) die(db, "read");
  sqlite3_reset(st);
  return rows;
}

/* All of queue 0 in BATCH-row batches; rows/s (BATCH x batches/s for the ceiling). */
static double run_cq_reads(sqlite3 *db, target t, int64_t queue_rows) {
  sqlite3_stmt *st = prepare(db, CQ_READ);
  uint64_t sum = 0;
  int64_t got = 0;
  double t0 = now_s();
  for (int64_t off = 0; off < queue_rows; off += BATCH) {
    sqlite3_bind_text(st, 1, TOPIC, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, 0);
    sqlite3_bind_int64(st, 3, off);
    sqlite3_bind_int64(st, 4, off + BATCH);
    got += drain(db, st, &sum);
  }
  double secs = now_s() - t0;
  if (t != T_CEIL && got != queue_rows) {
    fprintf(stderr, "bench_sql: queue 0 read %lld rows of %lld\n", (long long)got,
            (long long)queue_rows);
    exit(1);
  }
  if (t == T_PLAIN && sqlite3_stmt_status(st, SQLITE_STMTSTATUS_FULLSCAN_STEP, 0) != 0)
    fprintf(stderr, "bench_sql: warning: the plain consume-queue read scanned the table\n");
  sqlite3_finalize(st);
  return (double)(t == T_CEIL ? (queue_rows + BATCH - 1) / BATCH * BATCH : got) / secs;
}

/* Look-ups of random keys of the n messages; look-ups/s. */
static double run_key_reads(sqlite3 *db, target t, int n, int lookups) {
  sqlite3_stmt *st = prepare(db, t == T_PLAIN ? PLAIN_KEY_READ : STORE_KEY_READ);
  uint64_t sum = 0, x = 88172645463325252ull;
  int found = 0;
  double t0 = now_s();
  for (int i = 0; i < lookups; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    char key[24];
    int klen = snprintf(key, sizeof key, "key%d", (int)(x % (uint64_t)n));
    sqlite3_bind_text(st, 1, TOPIC, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, klen, SQLITE_STATIC);
    found += drain(db, st, &sum);
  }
  double secs = now_s() - t0;
  if (t != T_CEIL && found != lookups) {
    fprintf(stderr, "bench_sql: %d of %d keys found\n", found, lookups);
    exit(1);
  }
  if (t == T_PLAIN && sqlite3_stmt_status(st, SQLITE_STMTSTATUS_FULLSCAN_STEP, 0) != 0)
    fprintf(stderr, "bench_sql: warning: the plain key look-up scanned the table\n");
  sqlite3_finalize(st);
  return lookups / secs;
}

/* N 100 B messages in one transaction, then RUNS passes of each read; medians. */
static void run_reads(int n, double cq[T_COUNT], double keys[T_COUNT]) {
  static uint8_t body[100];
  memset(body, 'm', sizeof body);
  int lookups = n / 10 > 0 ? n / 10 : 1;
  for (int t = 0; t < T_COUNT; t++) {
    table tb;
    table_create(&tb, (target)t, "async", "NORMAL");
    sqlite3 *db = table_connect(&tb, true);
    writer w;
    writer_init(&w, db, (target)t, body, (int)sizeof body);
    exec(db, "BEGIN");
    for (int i = 0; i < n; i++) writer_put(&w, i, i % NQUEUES);
    exec(db, "COMMIT");
    writer_done(&w);
    check_found(db, (target)t, n - 1); /* rocketmq: dispatched before the reads start */
    double c[RUNS], k[RUNS];
    for (int i = 0; i < RUNS; i++) {
      c[i] = run_cq_reads(db, (target)t, (n + NQUEUES - 1) / NQUEUES);
      k[i] = run_key_reads(db, (target)t, n, lookups);
    }
    cq[t] = median(c, RUNS);
    keys[t] = median(k, RUNS);
    if (sqlite3_close(db) != SQLITE_OK) die(db, "close");
    table_remove(&tb);
  }
}

/* --------------------------------------------------------------- report */

static void row(const char *what, const char *runs, const double v[T_COUNT], const char *fmt,
                double floor) {
  char cells[T_COUNT][24], ratio[16] = "-", verdict[24] = "";
  for (int t = 0; t < T_COUNT; t++) {
    if (v[t] < 0)
      snprintf(cells[t], sizeof cells[t], "-");
    else
      snprintf(cells[t], sizeof cells[t], fmt, v[t]);
  }
  if (v[T_RMQ] >= 0 && v[T_PLAIN] > 0)
    snprintf(ratio, sizeof ratio, "%.2fx", v[T_RMQ] / v[T_PLAIN]);
  if (floor > 0) {
    snprintf(verdict, sizeof verdict, ">= %gx %s", floor,
             v[T_RMQ] >= floor * v[T_PLAIN] ? "ok" : "MISSED");
  }
  printf("%-46s %4s %11s %11s %11s %9s  %s\n", what, runs, cells[T_RMQ], cells[T_PLAIN],
         cells[T_CEIL], ratio, verdict);
}

int main(void) {
  const char *env = getenv("RMQ_BENCH_SQL_N");
  int n = env ? atoi(env) : 200000;
  if (n < 400) n = 400;
  ext_path = getenv("RMQ_EXT") ? getenv("RMQ_EXT") : "build/rocketmq";
  int auto_n = n / 10, sync_rows = n / 100;

  printf("\nSQL paths: rocketmq table vs a plain SQLite table (WAL) vs a do-nothing virtual\n"
         "table (the SQL ceiling); N = %d (env RMQ_BENCH_SQL_N); SQLite %s\n",
         n, sqlite3_libversion());
  printf("%-46s %4s %11s %11s %11s %9s  %s\n", "what", "runs", "rocketmq", "plain", "ceiling",
         "rmq/plain", "floor");

  insert_result ins[T_COUNT];
  double v[T_COUNT];
  char what[64];
  int sizes[2] = {100, 1024};
  double floors[2] = {3, 8};
  for (int s = 0; s < 2; s++) {
    median_inserts(n, sizes[s], true, ins);
    for (int t = 0; t < T_COUNT; t++) v[t] = ins[t].rate;
    snprintf(what, sizeof what, "INSERT %d x %s, 1 txn, rows/s", n, s ? "1 KiB" : "100 B");
    row(what, "3", v, "%.0f", floors[s]);
    v[T_RMQ] = ins[T_RMQ].indexed_rate;
    v[T_PLAIN] = ins[T_PLAIN].indexed_rate;
    v[T_CEIL] = -1;
    row("  ... until queryable (rmq: dispatched)", "3", v, "%.0f", 0);
  }

  median_inserts(auto_n, 100, false, ins);
  for (int t = 0; t < T_COUNT; t++) v[t] = ins[t].rate;
  snprintf(what, sizeof what, "INSERT %d x 100 B, autocommit, rows/s", auto_n);
  row(what, "3", v, "%.0f", 0);

  sync_result sr[T_COUNT];
  for (int t = 0; t < T_COUNT; t++) sr[t] = median_sync((target)t, sync_rows);
  for (int t = 0; t < T_COUNT; t++) v[t] = sr[t].rate;
  snprintf(what, sizeof what, "INSERT %d x 100 B, 4 threads, sync, rows/s", sync_rows * NTHREADS);
  row(what, "3", v, "%.0f", 0);
  for (int t = 0; t < T_COUNT; t++) v[t] = sr[t].p50_us;
  row("  ... p50 us per INSERT (lower is better)", "3", v, "%.1f", 0);
  for (int t = 0; t < T_COUNT; t++) v[t] = sr[t].p99_us;
  row("  ... p99 us per INSERT (lower is better)", "3", v, "%.1f", 0);
  for (int t = 0; t < T_COUNT; t++) v[t] = sr[t].max_us;
  row("  ... max us per INSERT (lower is better)", "3", v, "%.1f", 0);

  double cq[T_COUNT], keys[T_COUNT];
  run_reads(n, cq, keys);
  snprintf(what, sizeof what, "read queue 0 (%d rows) by %d, rows/s *", (n + 3) / NQUEUES, BATCH);
  row(what, "3", cq, "%.0f", 1);
  snprintf(what, sizeof what, "key look-up x %d, look-ups/s *", n / 10);
  row(what, "3", keys, "%.0f", 1);

  printf("rocketmq: flush='async' (rows 1, 2, reads), flush='sync' (4 threads, one group commit);\n"
         "plain: synchronous=NORMAL, FULL for the 4-thread row (busy_timeout for the write lock);\n"
         "its queue_offset comes from an application counter, as does its uniq_key.\n"
         "runs 3 = median of 3 runs (fresh temp dirs, removed after); the 4-thread latencies\n"
         "come from the run of median rows/s; reads: median of 3 passes over one store.\n"
         "'until queryable': rows/s until a key look-up finds the last row (rocketmq builds its\n"
         "consume queues and key index in the dispatcher, after COMMIT; plain, in the INSERT).\n"
         "* ceiling for reads: the same statements returning no rows, counted as %d rows or\n"
         "  one look-up each.\n",
         BATCH);
  return 0;
}
