/*
** fuzz_index_file.c: libFuzzer target for the IndexFile reader: an index
** file opened read-only (as rocketmq_index opens a broker's store), its
** headers, its items, its slot chains and key queries.
**
** The first input byte gives the slot count (1 to 256); the rest, cut or
** padded with zeros to the size of a whole file with that many slots, is
** written as the index file of a temporary store. The reader maps the file,
** so AddressSanitizer sees only reads outside the mapping; a chain walk
** must end however the items point.
*/
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index_file.h"

static char root[64];
static char file_path[128];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  snprintf(root, sizeof root, "/tmp/rmq-fuzz-index-XXXXXX");
  if (!mkdtemp(root)) abort();
  char dir[96];
  snprintf(dir, sizeof dir, "%s/index", root);
  if (mkdir(dir, 0755) != 0) abort();
  snprintf(file_path, sizeof file_path, "%s/20240101000000000", dir);
  return 0;
}

/* Writes the file; returns its item count (index_num). */
static int32_t write_file(const uint8_t *data, size_t size, int32_t slots) {
  size_t head = RMQ_INDEX_HEADER_SIZE + (size_t)slots * RMQ_INDEX_SLOT_SIZE;
  size_t items = size > head ? (size - head) / RMQ_INDEX_ITEM_SIZE : 0;
  if (items < 2) items = 2;
  size_t len = head + items * RMQ_INDEX_ITEM_SIZE;
  uint8_t *buf = calloc(1, len);
  memcpy(buf, data, size < len ? size : len);
  FILE *f = fopen(file_path, "wb");
  if (!f || fwrite(buf, len, 1, f) != 1) abort();
  fclose(f);
  free(buf);
  return (int32_t)items;
}

static void read_items(rmq_index_service *s) {
  rmq_index_view v;
  for (bool ok = rmq_index_service_view(s, NULL, &v); ok;) {
    rmq_index_item item;
    for (int32_t k = 1; k < v.index_num && k < 4096; k++) {
      if (!rmq_index_view_item(&v, k, &item)) abort();
      (void)rmq_index_view_slot(&v, item.key_hash); /* a raw file value: any int32 */
      int64_t offsets[64];
      int count = 0;
      rmq_index_file_select(s->files[0], item.key_hash, 64, 0, INT64_MAX, offsets, &count);
      if (count < 0 || count > 64) abort();
    }
    if (rmq_index_view_item(&v, v.index_num, &item)) abort();
    char name[18];
    memcpy(name, v.name, sizeof name);
    rmq_index_view_release(&v);
    ok = rmq_index_service_view(s, name, &v);
  }
}

static void query(rmq_index_service *s) {
  int64_t offsets[64];
  int count = 0;
  rmq_err err = {0};
  rmq_index_service_query(s, "T", 1, "k", 1, 64, 0, INT64_MAX, offsets, &count, &err);
  if (count < 0 || count > 64) abort();
  rmq_index_header h;
  char name[18];
  for (int i = 0; rmq_index_service_file_info(s, i, &h, name); i++) {
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int32_t slots = 1 + data[0];
  int32_t items = write_file(data + 1, size - 1, slots);
  rmq_index_service s;
  rmq_err err = {0};
  if (rmq_index_service_init(&s, root, slots, items, false, NULL, &err) != RMQ_OK) abort();
  if (rmq_index_service_load(&s, true, &err) == RMQ_OK && rmq_index_service_count(&s) == 1) {
    read_items(&s);
    query(&s);
  }
  rmq_index_service_destroy(&s);
  unlink(file_path);
  return 0;
}
