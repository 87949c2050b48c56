/*
** fuzz_consume_queue.c: libFuzzer target for the ConsumeQueue reader: the
** files of a queue opened read-only (as rocketmq_consumequeue opens a
** broker's store), recovered, and read by offset, by iterator and by time.
**
** The first input byte says how many segments (1 or 2) the rest is cut
** into; each is written as a file of the queue T/0 under a temporary
** directory. The reader maps the files, so AddressSanitizer sees only
** reads outside the mappings; the checks below hold the reader to the
** entries that exist.
*/
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "consume_queue.h"

#define ENTRIES_PER_FILE 300000

static char root[64];
static char queue_dir[128];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  snprintf(root, sizeof root, "/tmp/rmq-fuzz-cq-XXXXXX");
  if (!mkdtemp(root)) abort();
  const char *levels[] = {"/consumequeue", "/T", "/0"};
  snprintf(queue_dir, sizeof queue_dir, "%s", root);
  for (size_t i = 0; i < sizeof levels / sizeof *levels; i++) {
    strcat(queue_dir, levels[i]);
    if (mkdir(queue_dir, 0755) != 0) abort();
  }
  return 0;
}

static void segment_path(char *path, size_t cap, int64_t start) {
  snprintf(path, cap, "%s/%020lld", queue_dir, (long long)start);
}

static void write_segments(const uint8_t *data, size_t size, int n) {
  size_t seg = size / (size_t)n;
  for (int i = 0; i < n; i++) {
    char path[192];
    segment_path(path, sizeof path, (int64_t)(seg * (size_t)i));
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (seg && fwrite(data + seg * (size_t)i, seg, 1, f) != 1) abort();
    fclose(f);
  }
}

static void remove_segments(int n, size_t seg) {
  for (int i = 0; i < n; i++) {
    char path[192];
    segment_path(path, sizeof path, (int64_t)(seg * (size_t)i));
    unlink(path);
  }
}

/* Store times grow with CommitLog offsets, as the time searches assume. */
static int64_t store_time(void *ctx, int64_t phy_offset, int32_t size) {
  (void)ctx;
  return size > 0 && phy_offset >= 0 ? phy_offset / 16 : -1;
}

static void read_queue(rmq_consume_queue *cq) {
  rmq_cq_recover(cq);
  rmq_cq_correct_min_offset(cq, 0);
  int64_t min = rmq_cq_min_offset(cq), max = rmq_cq_max_offset(cq);
  if (min < 0 || max < min) abort();
  rmq_cq_entry e;
  rmq_err err = {0};
  rmq_cq_iter it;
  int64_t n = 0;
  rmq_cq_iter_start(&it, cq, 0);
  while (rmq_cq_iter_next(&it, &e)) {
    if (it.offset - 1 < min || it.offset > max) abort();
    n++;
  }
  rmq_cq_iter_stop(&it);
  if (n > max - min) abort();
  if (max > min && rmq_cq_get(cq, max - 1, &e, &err) != RMQ_OK) abort();
  if (rmq_cq_get(cq, max, &e, &err) == RMQ_OK) abort();
  int64_t at;
  int64_t times[] = {0, 1, 1000, INT64_MAX};
  for (size_t i = 0; i < sizeof times / sizeof *times; i++) {
    rmq_cq_offset_by_time(cq, times[i], 0, store_time, NULL, &at, &err);
    rmq_cq_first_offset_at_or_after_time(cq, times[i], 0, store_time, NULL, &at, &err);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int n = 1 + (data[0] & 1);
  write_segments(data + 1, size - 1, n);
  rmq_consume_queue *cq;
  rmq_err err = {0};
  if (rmq_cq_open(root, "T", 0, ENTRIES_PER_FILE, false, &cq, &err) == RMQ_OK) {
    read_queue(cq);
    rmq_cq_close(cq);
  }
  remove_segments(n, (size - 1) / (size_t)n);
  return 0;
}
