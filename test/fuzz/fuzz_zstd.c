/*
** fuzz_zstd.c: libFuzzer target for rmq_decompress with zstd (inflate_target.h).
*/
#include "inflate_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return inflate_one(RMQ_CODEC_ZSTD, data, size);
}
