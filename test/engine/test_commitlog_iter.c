/*
** test_commitlog_iter.c: the commit-log iterator: a walk over segments and
** BLANKs, ranges and a store time, an empty store, and damage (a bad CRC, an
** impossible TOTALSIZE, a record cut by the end of the written data) in
** the lenient, CRC-checking and strict modes.
*/
#include <fcntl.h>
#include <unistd.h>

#include "check.h"
#include "commitlog_iter.h"
#include "testutil.h"

#define SEG 65536
#define N 60

static rmq_put_result put[N];

/* N messages of about 3 KB: about 20 per segment, so the log rolls twice. */
static void fill(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  char body[3000];
  tu_msg t;
  rmq_err err = {0};
  for (int i = 0; i < N; i++) {
    memset(body, 'a' + i % 26, sizeof body);
    CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "Iter", i % 4, body, (int)sizeof body, ""), 1,
                               &put[i], &err),
                 RMQ_OK);
  }
  rmq_store_close(s);
}

static rmq_store *open_readonly(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  cfg.readonly = true;
  return tu_open(dir, &cfg);
}

/* Overwrite n bytes at a commit-log offset of the closed store. */
static void poke(const char *dir, int64_t offset, const void *bytes, size_t n) {
  char path[4200];
  snprintf(path, sizeof path, "%s/commitlog/%020lld", dir, (long long)(offset - offset % SEG));
  int fd = open(path, O_WRONLY);
  CHECK(fd >= 0 && pwrite(fd, bytes, n, offset % SEG) == (ssize_t)n);
  if (fd >= 0) close(fd);
}

/* The index of the message at offset, or -1. */
static int message_at(int64_t offset) {
  for (int i = 0; i < N; i++) {
    if (put[i].physical_offset == offset) return i;
  }
  return -1;
}

static void test_empty(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_commitlog_iter it;
  rmq_commitlog_record rec;
  rmq_commitlog_iter_start(&it, s, INT64_MIN, INT64_MAX, INT64_MIN, 0);
  CHECK(!rmq_commitlog_iter_next(&it, &rec));
  rmq_commitlog_iter_start(&it, s, 0, INT64_MAX, 1, RMQ_CL_ITER_STRICT);
  CHECK(!rmq_commitlog_iter_next(&it, &rec));
  rmq_commitlog_iter_stop(&it);
  rmq_store_close(s);
}

/* The whole log: every message in order, a BLANK at the end of each full segment. */
static void test_walk(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_commitlog_iter it;
  rmq_commitlog_record rec;
  int messages = 0, blanks = 0, order_bad = 0;
  rmq_commitlog_iter_start(&it, s, INT64_MIN, INT64_MAX, INT64_MIN, 0);
  while (rmq_commitlog_iter_next(&it, &rec)) {
    if (rec.kind == RMQ_RECORD_BLANK) {
      blanks++;
      CHECK_EQ_INT(rec.offset + rec.size, rec.segment + SEG);
      CHECK_EQ_STR(rec.reason, "");
      continue;
    }
    CHECK_EQ_INT(rec.kind, RMQ_RECORD_MESSAGE);
    order_bad += message_at(rec.offset) != messages;
    CHECK_EQ_INT(rec.m.physical_offset, rec.offset);
    CHECK_EQ_INT(rec.size, put[messages].size);
    CHECK(!rec.crc_checked);
    messages++;
  }
  CHECK_EQ_INT(messages, N);
  CHECK_EQ_INT(order_bad, 0);
  CHECK_EQ_INT(blanks, (int)(put[N - 1].physical_offset / SEG));
  /* The iterator let go of its segment: Stop after the end is harmless. */
  rmq_commitlog_iter_stop(&it);
  rmq_store_close(s);
}

/* The first message a walk over [from, to) returns, and how many messages it returns. */
static int walk_range(rmq_store *s, int64_t from, int64_t to, int64_t ts, int *count) {
  rmq_commitlog_iter it;
  rmq_commitlog_record rec;
  int first = -1;
  *count = 0;
  rmq_commitlog_iter_start(&it, s, from, to, ts, RMQ_CL_ITER_STRICT);
  while (rmq_commitlog_iter_next(&it, &rec)) {
    if (rec.kind != RMQ_RECORD_MESSAGE) continue;
    if (first < 0) first = message_at(rec.offset);
    CHECK(rec.offset >= from && rec.offset < to);
    (*count)++;
  }
  return first;
}

static void test_ranges(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  int count;
  CHECK_EQ_INT(walk_range(s, put[5].physical_offset, INT64_MAX, INT64_MIN, &count), 5);
  CHECK_EQ_INT(count, N - 5);
  /* A bound inside a record: records that start in the range only. */
  CHECK_EQ_INT(
      walk_range(s, put[5].physical_offset + 1, put[30].physical_offset + 1, INT64_MIN, &count), 6);
  CHECK_EQ_INT(count, 30 - 6 + 1);
  /* A range in a later segment starts there, not at the first. */
  CHECK_EQ_INT(walk_range(s, put[N - 1].physical_offset, INT64_MAX, INT64_MIN, &count), N - 1);
  CHECK_EQ_INT(count, 1);
  CHECK_EQ_INT(walk_range(s, put[7].physical_offset, put[7].physical_offset, INT64_MIN, &count),
               -1);
  CHECK_EQ_INT(count, 0);
  CHECK_EQ_INT(
      walk_range(s, put[N - 1].physical_offset + put[N - 1].size, INT64_MAX, INT64_MIN, &count),
      -1);
  /* A store time later than every record: the last segment with records. */
  int last_seg_first = 0;
  while (put[last_seg_first].physical_offset < put[N - 1].physical_offset / SEG * SEG) {
    last_seg_first++;
  }
  CHECK_EQ_INT(walk_range(s, INT64_MIN, INT64_MAX, INT64_MAX - 1, &count), last_seg_first);
  CHECK_EQ_INT(walk_range(s, INT64_MIN, INT64_MAX, put[0].store_timestamp, &count), 0);
  rmq_store_close(s);
}

/* A flipped body byte: a message with a bad CRC, damage when the CRC is checked. */
static void test_bad_crc(const char *dir) {
  int i = 3;
  int64_t body_at = put[i].physical_offset + put[i].size - 3000 - 1 - 4 - 2;
  poke(dir, body_at, "#", 1);
  rmq_store *s = open_readonly(dir);
  rmq_commitlog_iter it;
  rmq_commitlog_record rec;
  unsigned modes[3] = {RMQ_CL_ITER_WHOLE_SEGMENTS,
                       RMQ_CL_ITER_WHOLE_SEGMENTS | RMQ_CL_ITER_CHECK_CRC,
                       RMQ_CL_ITER_WHOLE_SEGMENTS | RMQ_CL_ITER_CHECK_CRC | RMQ_CL_ITER_STRICT};
  for (int mode = 0; mode < 3; mode++) {
    rmq_commitlog_iter_start(&it, s, put[i].physical_offset, INT64_MAX, INT64_MIN, modes[mode]);
    CHECK(rmq_commitlog_iter_next(&it, &rec));
    CHECK_EQ_INT(rec.offset, put[i].physical_offset);
    CHECK_EQ_INT(rec.size, put[i].size);
    CHECK_EQ_INT(rec.crc_checked, mode > 0);
    CHECK_EQ_INT(rec.kind, mode == 0 ? RMQ_RECORD_MESSAGE : RMQ_RECORD_DAMAGED);
    CHECK_EQ_INT(rec.status, mode == 0 ? RMQ_DECODE_OK : RMQ_DECODE_BAD_CRC);
    if (mode == 0) CHECK(rmq_body_crc(rec.m.body, 3000) != rec.m.body_crc);
    if (mode == 1) CHECK(strstr(rec.reason, "does not match the stored BODYCRC") != NULL);
    /* The walk goes on after it, except a strict one. */
    bool more = rmq_commitlog_iter_next(&it, &rec);
    CHECK_EQ_INT(more, mode < 2);
    if (more) CHECK_EQ_INT(rec.offset, put[i + 1].physical_offset);
    rmq_commitlog_iter_stop(&it);
  }
  rmq_store_close(s);
}

/* A TOTALSIZE past the segment: the rest of the segment is one damaged record. */
static void test_bad_size(const char *dir) {
  uint8_t size[4];
  rmq_put32(size, SEG * 2);
  poke(dir, put[1].physical_offset, size, 4);
  rmq_store *s = open_readonly(dir);
  rmq_commitlog_iter it;
  rmq_commitlog_record rec;
  rmq_commitlog_iter_start(&it, s, INT64_MIN, INT64_MAX, INT64_MIN, RMQ_CL_ITER_WHOLE_SEGMENTS);
  CHECK(rmq_commitlog_iter_next(&it, &rec) && rec.kind == RMQ_RECORD_MESSAGE);
  CHECK(rmq_commitlog_iter_next(&it, &rec));
  CHECK_EQ_INT(rec.kind, RMQ_RECORD_DAMAGED);
  CHECK_EQ_INT(rec.offset, put[1].physical_offset);
  CHECK_EQ_INT(rec.size, SEG - put[1].physical_offset);
  CHECK(strstr(rec.reason, "TOTALSIZE 131072 is impossible") != NULL);
  /* The walk resumes at the next segment's first record. */
  CHECK(rmq_commitlog_iter_next(&it, &rec));
  CHECK_EQ_INT(rec.offset, SEG);
  CHECK_EQ_INT(rec.kind, RMQ_RECORD_MESSAGE);
  rmq_commitlog_iter_stop(&it);
  rmq_store_close(s);
}

/* The head of a record after the last one, its body never written. */
static void test_cut_record(const char *dir) {
  int64_t end = put[N - 1].physical_offset + put[N - 1].size;
  uint8_t head[60];
  char path[4200];
  snprintf(path, sizeof path, "%s/commitlog/%020lld", dir, 0LL);
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0 && pread(fd, head, sizeof head, 0) == (ssize_t)sizeof head);
  if (fd >= 0) close(fd);
  poke(dir, end, head, sizeof head);
  rmq_store *s = open_readonly(dir);
  rmq_commitlog_iter it;
  rmq_commitlog_record rec;
  for (int strict = 0; strict < 2; strict++) {
    unsigned flags = RMQ_CL_ITER_WHOLE_SEGMENTS | (strict ? RMQ_CL_ITER_STRICT : 0);
    rmq_commitlog_iter_start(&it, s, put[N - 1].physical_offset, INT64_MAX, INT64_MIN, flags);
    CHECK(rmq_commitlog_iter_next(&it, &rec) && rec.kind == RMQ_RECORD_MESSAGE);
    CHECK(rmq_commitlog_iter_next(&it, &rec));
    CHECK_EQ_INT(rec.kind, RMQ_RECORD_DAMAGED);
    CHECK_EQ_INT(rec.offset, end);
    CHECK(rec.status != RMQ_DECODE_OK && rec.status != RMQ_DECODE_BLANK);
    CHECK(rec.reason[0] != '\0');
    /* Zeros follow and no later segment has records: the end. */
    CHECK(!rmq_commitlog_iter_next(&it, &rec));
  }
  rmq_store_close(s);
  /* The store was closed cleanly: bytes after its end are damage, not a torn tail. */
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_open(dir, &cfg, &s, &err), RMQ_ECORRUPT);
  char want[128];
  snprintf(want, sizeof want, "commitlog/%020lld is damaged at offset %lld (",
           (long long)(end - end % SEG), (long long)end);
  CHECK(strstr(err.msg, want) != NULL);
  CHECK(strstr(err.msg, "rocketmq_repair(") != NULL);
  /* Repair moves the 60 bytes aside; recovery, the strict walk with CRC checks, ends the log there. */
  int64_t moved = 0;
  CHECK_EQ_INT(rmq_store_repair(dir, &moved, &err), RMQ_OK);
  CHECK_EQ_INT(moved, sizeof head);
  s = tu_open(dir, &cfg);
  if (s) CHECK_EQ_INT(rmq_commitlog_max_offset(rmq_store_commitlog(s)), end);
  rmq_store_close(s);
}

int main(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  test_empty(dir);
  tu_rmrf(dir);
  void (*tests[])(const char *) = {test_walk, test_ranges, test_bad_crc, test_bad_size,
                                   test_cut_record};
  for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
    tu_tmpdir(dir, sizeof dir);
    fill(dir);
    tests[i](dir);
    tu_rmrf(dir);
  }
  return check_report();
}
