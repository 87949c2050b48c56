/*
** fuzz_decode.c: libFuzzer target for the record decoder and the properties
** codec, the code that reads bytes from disk (make fuzz).
**
** The input is taken as a CommitLog segment: records are decoded one after
** another the way recovery walks them, and every valid record's properties
** are iterated and searched. The decoder must never read past the input
** (AddressSanitizer watches) and must agree with itself on what it found.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "java_hash.h"
#include "message.h"
#include "properties.h"

static void walk_properties(const rmq_message *m) {
  rmq_properties_iter it;
  const char *n, *v;
  size_t nl, vl;
  rmq_properties_iter_init(&it, m->properties, (size_t)m->properties_len);
  while (rmq_properties_next(&it, &n, &nl, &v, &vl)) {
    if (nl == 0 || vl == 0) abort();
  }
  size_t len;
  const char *keys = rmq_properties_get(m->properties, (size_t)m->properties_len, "KEYS", &len);
  if (keys) rmq_java_hash(keys, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A copy of exactly size bytes, so any read past the end is caught. */
  uint8_t *buf = malloc(size ? size : 1);
  memcpy(buf, data, size);
  size_t pos = 0;
  while (pos < size) {
    rmq_message m;
    rmq_decode_status s = rmq_message_decode(buf + pos, size - pos, true, &m);
    if (s != RMQ_DECODE_OK) break;
    if (m.total_size <= 0 || (size_t)m.total_size > size - pos) abort();
    walk_properties(&m);
    pos += (size_t)m.total_size;
  }
  free(buf);
  return 0;
}
