/*
** fuzz_record_head.c: libFuzzer target for rmq_record_head_read, the reader
** of an encoded v1 record's head that a put of encoded records uses
** (CommitLog.putMessages takes records a producer encoded).
**
** The input is one record. When the reader accepts it, what it reports must
** lie inside the input: the record length, the topic and the place of the
** store timestamp. AddressSanitizer watches every byte the reader touches.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "message.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A copy of exactly size bytes, so any read past the end is caught. */
  uint8_t *buf = malloc(size ? size : 1);
  memcpy(buf, data, size);
  rmq_record_head h;
  if (rmq_record_head_read(buf, size, &h)) {
    const uint8_t *topic = (const uint8_t *)h.topic;
    if (h.len <= 0 || (size_t)h.len > size) abort();
    if (topic < buf || topic + h.topic_len > buf + h.len) abort();
    if (h.store_timestamp_at + 8 > (size_t)h.len) abort();
    (void)rmq_java_hash(h.topic, h.topic_len); /* reads every byte of the topic */
  }
  free(buf);
  return 0;
}
