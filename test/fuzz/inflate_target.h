/*
** inflate_target.h: the body of the libFuzzer targets of the three body
** codecs (fuzz_zlib.c, fuzz_lz4.c, fuzz_zstd.c), which read bodies a store
** holds and a broker may have written (rmq_decompress).
**
** The input is a stored body. It inflates to at most MAX bytes or is
** refused with RMQ_ECORRUPT; what inflates compresses and inflates back to
** the same bytes.
*/
#ifndef INFLATE_TARGET_H
#define INFLATE_TARGET_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rmq.h"

/* Small, so that a stream that inflates without end is found quickly. */
#define MAX (1 << 20)

static int inflate_one(rmq_codec codec, const uint8_t *data, size_t size) {
  /* One state for every input, as a cursor keeps it: what one body leaves must not hurt the next. */
  static rmq_codec_ctx *x;
  if (!x && !(x = rmq_codec_ctx_new())) abort();
  uint8_t *out;
  size_t n;
  rmq_err err = {0};
  int rc = rmq_decompress(x, codec, data, size, MAX, &out, &n, &err);
  if (rc != RMQ_OK) {
    if (rc != RMQ_ECORRUPT || out != NULL) abort();
    return 0;
  }
  if (n > MAX) abort();
  uint8_t *z, *again;
  size_t zn, an;
  if (rmq_compress(x, codec, 1, out, n, &z, &zn, &err) != RMQ_OK) abort();
  if (rmq_decompress(NULL, codec, z, zn, MAX, &again, &an, &err) != RMQ_OK) abort();
  if (an != n || memcmp(again, out, n) != 0) abort();
  free(again);
  free(z);
  free(out);
  return 0;
}

#endif
