/*
** fuzz_multi_dispatch.c: libFuzzer target for the light-message-queue
** reading and rewriting of a record (multi_dispatch.c): the check of
** INNER_MULTI_DISPATCH, the walk of the listed queues and offsets that
** dispatch and verify make over a broker's records, and the rewrite that
** the append makes under the put lock.
**
** The input is one record. When its head reads, every listed queue must lie
** inside the record, and the rewritten record must fit the room
** rmq_md_growth promised (an exact allocation, so AddressSanitizer sees any
** byte past it) and read back as a record of the length returned.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "message.h"
#include "multi_dispatch.h"

static void walk(const uint8_t *rec, const rmq_record_head *h) {
  const char *props;
  size_t len;
  rmq_md_iter it;
  rmq_md_target t;
  rmq_record_properties(rec, h, &props, &len);
  if ((const uint8_t *)props + len > rec + h->len) abort();
  if (!rmq_md_iter_start(&it, props, len, h->queue_id)) return;
  while (rmq_md_iter_next(&it, &t) == 1) {
    if ((const uint8_t *)t.topic < rec || (const uint8_t *)t.topic + t.topic_len > rec + h->len) {
      abort();
    }
    if (t.queue_offset < 0) abort();
  }
}

static void wrap(const uint8_t *rec, const rmq_record_head *h) {
  rmq_topic_queue_table *tqt = rmq_tqt_new();
  uint8_t *out = malloc((size_t)h->len + rmq_md_growth(rec, h));
  rmq_md_undo *undo = NULL;
  size_t nundo = 0;
  rmq_err err = {0};
  int32_t n = rmq_md_wrap(tqt, 4, rec, h, out, &undo, &nundo, &err);
  rmq_record_head w;
  if (n >= 0 && (!rmq_record_head_read(out, (size_t)n, &w) || w.len != n)) abort();
  if (n >= 0 && !rmq_md_follow(tqt, out, &w)) abort();
  rmq_md_undo_all(tqt, undo, nundo);
  free(undo);
  free(out);
  rmq_tqt_free(tqt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *buf = malloc(size ? size : 1);
  memcpy(buf, data, size);
  rmq_record_head h;
  if (rmq_record_head_read(buf, size, &h)) {
    walk(buf, &h);
    wrap(buf, &h);
  }
  free(buf);
  return 0;
}
