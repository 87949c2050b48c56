/*
** bench_clean.c: producing while the clean service deletes (make bench).
**
** Autocommit INSERTs of 1 KiB bodies (4 queues, a key each) into a
** rocketmq table on a fresh store with 1 MiB commit-log segments,
** file_reserved_hours=0 and delete_when the current hour, so that every
** segment but the current one has expired as soon as it is full. Each run
** first writes WARMUP messages and flushes them (a backlog of expired
** segments), then produces for RMQ_BENCH_CLEAN_SECONDS (default 1):
**
**   no clean pass      clean_first_delay_ms=86400000: no pass runs
**   while cleaning     a pass every clean_interval_ms=100 from the start,
**                      deleting commit-log segments (at most 10 a pass,
**                      100 ms apart), consume-queue and index files
**
** Rows/s is the median of 3 runs of each, alternated; the run of median
** rows/s also reports the commit-log segments deleted during its window and
** those left at its end.
*/
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

#define RUNS 3
#define NQUEUES 4
#define BODY 1024
#define SEGMENT 1048576
#define WARMUP 30000

typedef struct result {
  double rate;
  long long segments_deleted, commitlog_files;
} result;

static const char *ext_path;

static void die(sqlite3 *db, const char *what) {
  fprintf(stderr, "bench_clean: %s: %s\n", what, db ? sqlite3_errmsg(db) : "out of memory");
  exit(1);
}

static void exec(sqlite3 *db, const char *sql) {
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "bench_clean: %s: %s\n", sql, err);
    exit(1);
  }
}

static long long stat_value(sqlite3 *db, const char *dir, const char *name) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT value FROM rocketmq_stats(?1) WHERE name = ?2", -1, &st,
                         NULL) != SQLITE_OK) {
    die(db, "prepare stats");
  }
  sqlite3_bind_text(st, 1, dir, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
  long long v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  return v;
}

/* A connection on which mq is a rocketmq table of a store in dir. */
static sqlite3 *open_store(const char *dir, bool cleaning) {
  sqlite3 *db;
  char *err = NULL;
  if (sqlite3_open(":memory:", &db) != SQLITE_OK) die(db, "open");
  sqlite3_enable_load_extension(db, 1);
  if (sqlite3_load_extension(db, ext_path, NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "bench_clean: cannot load %s (env RMQ_EXT): %s\n", ext_path, err);
    exit(1);
  }
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  char *sql = sqlite3_mprintf(
      "CREATE VIRTUAL TABLE mq USING rocketmq(dir='%q', commitlog_file_size=%d,"
      " consumequeue_entries=30000, index_slots=5000, index_entries=20000,"
      " file_reserved_hours=0, delete_when='%02d;%02d', clean_first_delay_ms=%d,"
      " clean_interval_ms=100)",
      dir, SEGMENT, tm.tm_hour, (tm.tm_hour + 1) % 24, cleaning ? 0 : 86400000);
  exec(db, sql);
  sqlite3_free(sql);
  return db;
}

/* Autocommit INSERTs of keys key<from>.. until `until` (now_s) or n rows; returns the rows. */
static int produce(sqlite3 *db, sqlite3_stmt *ins, int from, int n, double until) {
  static unsigned char body[BODY];
  memset(body, 'b', sizeof body);
  char key[32];
  int i = 0;
  for (; i < n && (until == 0 || (i % 256 != 0 || now_s() < until)); i++) {
    snprintf(key, sizeof key, "key%d", from + i);
    sqlite3_bind_int(ins, 1, (from + i) % NQUEUES);
    sqlite3_bind_text(ins, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_blob(ins, 3, body, sizeof body, SQLITE_STATIC);
    if (sqlite3_step(ins) != SQLITE_DONE) die(db, "insert");
    sqlite3_reset(ins);
  }
  return i;
}

/*
** A backlog of WARMUP expired, flushed segments first, so that a pass has
** segments to delete during the whole measured window of `seconds`.
*/
static result run_once(double seconds, bool cleaning) {
  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/rmq-bench-clean-XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    exit(1);
  }
  sqlite3 *db = open_store(dir, cleaning);
  sqlite3_stmt *ins;
  if (sqlite3_prepare_v2(db,
                         "INSERT INTO mq(topic, queue_id, keys, body) VALUES ('Bench', ?1, ?2, ?3)",
                         -1, &ins, NULL) != SQLITE_OK) {
    die(db, "prepare insert");
  }
  int warm = produce(db, ins, 0, WARMUP, 0);
  char *flush = sqlite3_mprintf("SELECT rocketmq_flush('%q')", dir);
  exec(db, flush);
  sqlite3_free(flush);
  long long min0 = stat_value(db, dir, "commitlog_min_offset");
  double t0 = now_s();
  int rows = produce(db, ins, warm, INT32_MAX, t0 + seconds);
  result r = {.rate = rows / (now_s() - t0)};
  sqlite3_finalize(ins);
  /* A pass counts its files when it ends: the first segment left says what went. */
  r.segments_deleted = (stat_value(db, dir, "commitlog_min_offset") - min0) / SEGMENT;
  r.commitlog_files = stat_value(db, dir, "commitlog_files");
  if (sqlite3_close(db) != SQLITE_OK) die(db, "close");
  rm_rf(dir);
  return r;
}

/* The run of median rows/s. */
static result median_run(result *runs) {
  double rates[RUNS];
  for (int i = 0; i < RUNS; i++) rates[i] = runs[i].rate;
  double m = median(rates, RUNS);
  for (int i = 0; i < RUNS; i++) {
    if (runs[i].rate == m) return runs[i];
  }
  return runs[0];
}

int main(void) {
  const char *env = getenv("RMQ_BENCH_CLEAN_SECONDS");
  double seconds = env ? atof(env) : 1;
  if (seconds <= 0) seconds = 1;
  ext_path = getenv("RMQ_EXT") ? getenv("RMQ_EXT") : "build/rocketmq";

  result runs[2][RUNS];
  for (int i = 0; i < RUNS; i++) {
    runs[0][i] = run_once(seconds, false);
    runs[1][i] = run_once(seconds, true);
  }
  printf("\nProduce while cleaning: autocommit INSERTs x 1 KiB for %.1f s (env "
         "RMQ_BENCH_CLEAN_SECONDS)\nafter %d (flushed), 1 MiB segments, file_reserved_hours=0, "
         "delete_when the current hour;\nSQLite %s\n",
         seconds, WARMUP, sqlite3_libversion());
  printf("%-44s %4s %11s %14s %14s\n", "what", "runs", "rows/s", "segments gone", "segments left");
  static const char *const what[2] = {"produce, no clean pass",
                                      "produce while cleaning (a pass every 100 ms)"};
  for (int c = 0; c < 2; c++) {
    result r = median_run(runs[c]);
    printf("%-44s %4d %11.0f %14lld %14lld\n", what[c], RUNS, r.rate, r.segments_deleted,
           r.commitlog_files);
  }
  return 0;
}
