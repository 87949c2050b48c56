/*
** fuzz_zlib.c: libFuzzer target for rmq_decompress with zlib (inflate_target.h).
*/
#include "inflate_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return inflate_one(RMQ_CODEC_ZLIB, data, size);
}
