/*
** test_compression.c: the body codecs (compression.c): SYSFLAG's codec
** bits, round trips of each codec, zlib's stream as Java's Deflater and
** Python write it, and the errors of damaged, cut and oversized streams.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "check.h"
#include "rmq.h"

static const rmq_codec codecs[] = {RMQ_CODEC_ZLIB, RMQ_CODEC_LZ4, RMQ_CODEC_ZSTD};

/* Text-like bytes that compress, or noise that does not. */
static uint8_t *sample(size_t n, bool noise) {
  uint8_t *b = malloc(n ? n : 1);
  uint32_t x = 12345;
  for (size_t i = 0; i < n; i++) {
    x = x * 1103515245 + 12345;
    b[i] = noise         ? (uint8_t)(x >> 16)
           : i % 64 == 0 ? (uint8_t)('0' + (x >> 28) % 10)
                         : (uint8_t)("lorem ipsum dolor "[i % 18]);
  }
  return b;
}

static void test_sys_flag(void) {
  CHECK_EQ_INT(rmq_codec_of_sys_flag(0), RMQ_CODEC_NONE);
  CHECK_EQ_INT(rmq_codec_of_sys_flag(0x300), RMQ_CODEC_NONE); /* bit 0 clear: not compressed */
  /* Type 0 is zlib: 4.9.0-4.9.3 set bit 0 alone (CompressionType.findByValue). */
  CHECK_EQ_INT(rmq_codec_of_sys_flag(0x1), RMQ_CODEC_ZLIB);
  CHECK_EQ_INT(rmq_codec_of_sys_flag(0x301), RMQ_CODEC_ZLIB);
  CHECK_EQ_INT(rmq_codec_of_sys_flag(0x101 | 0x10), RMQ_CODEC_LZ4);
  CHECK_EQ_INT(rmq_codec_of_sys_flag(0x201), RMQ_CODEC_ZSTD);
  /* Types 4-7 name no codec: the inflation says so. */
  CHECK_EQ_INT(rmq_codec_of_sys_flag(0x701), 7);
  CHECK_EQ_STR(rmq_codec_name(7), "unknown");
  uint8_t *out;
  size_t on;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_decompress(NULL, 7, (const uint8_t *)"x", 1, 100, &out, &on, &err),
               RMQ_ECORRUPT);
  CHECK(strstr(err.msg, "compression type 7") != NULL);
  CHECK_EQ_INT(rmq_codec_sys_flag(RMQ_CODEC_ZLIB), 0x301);
  CHECK_EQ_INT(rmq_codec_sys_flag(RMQ_CODEC_LZ4), 0x101);
  CHECK_EQ_INT(rmq_codec_sys_flag(RMQ_CODEC_ZSTD), 0x201);
  CHECK_EQ_INT(rmq_codec_by_name("ZLIB"), RMQ_CODEC_ZLIB);
  CHECK_EQ_INT(rmq_codec_by_name("lz4"), RMQ_CODEC_LZ4);
  CHECK_EQ_INT(rmq_codec_by_name("Zstd"), RMQ_CODEC_ZSTD);
  CHECK_EQ_INT(rmq_codec_by_name("gzip"), RMQ_CODEC_NONE);
  CHECK_EQ_INT(rmq_codec_by_name(NULL), RMQ_CODEC_NONE);
  CHECK_EQ_STR(rmq_codec_name(RMQ_CODEC_ZSTD), "zstd");
}

/* Each codec gives back what it was given, at sizes around its blocks' and at none. */
static void test_round_trips(void) {
  static const size_t sizes[] = {0, 1, 100, 4096, 65535, 65536, 65537, 300000, 4 << 20};
  /* One state across codecs, sizes and levels, as a table keeps it; and none. */
  rmq_codec_ctx *x = rmq_codec_ctx_new();
  for (size_t c = 0; c < 3; c++) {
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
      for (int noise = 0; noise < 2; noise++) {
        uint8_t *in = sample(sizes[s], noise), *z, *out;
        size_t zn, on;
        rmq_err err = {0};
        int level = (int)(s % 3) + 1;
        CHECK_EQ_INT(rmq_compress(noise ? NULL : x, codecs[c], level, in, sizes[s], &z, &zn, &err),
                     RMQ_OK);
        if (!noise && sizes[s] >= 4096) CHECK(zn < sizes[s] / 2);
        CHECK_EQ_INT(rmq_decompress(noise ? NULL : x, codecs[c], z, zn, RMQ_MAX_INFLATED_BODY, &out,
                                    &on, &err),
                     RMQ_OK);
        CHECK_EQ_INT(on, sizes[s]);
        if (on == sizes[s]) CHECK_EQ_MEM(out, in, on);
        free(in);
        free(z);
        free(out);
      }
    }
  }
  rmq_codec_ctx_free(x);
}

/* zlib at level 5 is the RFC 1950 stream Deflater(5) writes: zlib's own inflate reads it. */
static void test_zlib_stream(void) {
  uint8_t *in = sample(6000, false), *z;
  size_t zn;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_compress(NULL, RMQ_CODEC_ZLIB, 5, in, 6000, &z, &zn, &err), RMQ_OK);
  uint8_t expect[8192];
  uLongf en = sizeof expect;
  CHECK_EQ_INT(compress2(expect, &en, in, 6000, 5), Z_OK);
  CHECK_EQ_INT(zn, en);
  if (zn == en) CHECK_EQ_MEM(z, expect, zn);
  CHECK_EQ_INT(z[0], 0x78);
  CHECK_EQ_INT(z[1], 0x5E);
  free(in);
  free(z);
}

/* Two LZ4 or zstd frames one after the other inflate to both, as RocketMQ's decoders read them. */
static void test_concatenated_frames(void) {
  static const rmq_codec framed[] = {RMQ_CODEC_LZ4, RMQ_CODEC_ZSTD};
  for (size_t c = 0; c < 2; c++) {
    uint8_t *a = sample(5000, false), *b = sample(70000, true), *za, *zb, *out;
    size_t na, nb, on;
    rmq_err err = {0};
    CHECK_EQ_INT(rmq_compress(NULL, framed[c], 1, a, 5000, &za, &na, &err), RMQ_OK);
    CHECK_EQ_INT(rmq_compress(NULL, framed[c], 1, b, 70000, &zb, &nb, &err), RMQ_OK);
    uint8_t *both = malloc(na + nb), *plain = malloc(75000);
    memcpy(both, za, na);
    memcpy(both + na, zb, nb);
    memcpy(plain, a, 5000);
    memcpy(plain + 5000, b, 70000);
    CHECK_EQ_INT(
        rmq_decompress(NULL, framed[c], both, na + nb, RMQ_MAX_INFLATED_BODY, &out, &on, &err),
        RMQ_OK);
    CHECK_EQ_INT(on, 75000);
    if (on == 75000) CHECK_EQ_MEM(out, plain, on);
    free(out);
    /* The second frame cut short is damage, not the first frame alone. */
    out = NULL;
    CHECK_EQ_INT(
        rmq_decompress(NULL, framed[c], both, na + nb - 3, RMQ_MAX_INFLATED_BODY, &out, &on, &err),
        RMQ_ECORRUPT);
    free(out);
    free(a);
    free(b);
    free(za);
    free(zb);
    free(both);
    free(plain);
  }
}

/* A damaged, cut or foreign stream is RMQ_ECORRUPT naming the codec. */
static void test_damage(void) {
  rmq_codec_ctx *x = rmq_codec_ctx_new();
  for (size_t c = 0; c < 3; c++) {
    uint8_t *in = sample(20000, false), *z, *out = NULL;
    size_t zn, on;
    rmq_err err = {0};
    CHECK_EQ_INT(rmq_compress(NULL, codecs[c], 5, in, 20000, &z, &zn, &err), RMQ_OK);
    char name[64];
    snprintf(name, sizeof name, "the %s body", rmq_codec_name(codecs[c]));
    /* Cut short, at every length down to none. */
    int cut_ok = 0, cut_named = 0;
    for (size_t n = 0; n < zn; n += n < 64 ? 1 : 97) {
      rmq_err e = {0};
      if (rmq_decompress(x, codecs[c], z, n, RMQ_MAX_INFLATED_BODY, &out, &on, &e) == RMQ_OK) {
        cut_ok++;
        free(out);
      }
      cut_named += e.code == RMQ_ECORRUPT && strstr(e.msg, name) != NULL;
    }
    CHECK_EQ_INT(cut_ok, 0);
    CHECK(cut_named > 0);
    /* The first bytes (the header or the magic) overwritten. */
    memset(z, 0xFF, 4);
    err = (rmq_err){0};
    CHECK_EQ_INT(rmq_decompress(x, codecs[c], z, zn, RMQ_MAX_INFLATED_BODY, &out, &on, &err),
                 RMQ_ECORRUPT);
    CHECK(strstr(err.msg, name) && strstr(err.msg, "does not inflate"));
    CHECK(out == NULL);
    /* The state a damaged stream left inflates the next sound one. */
    uint8_t *again;
    size_t an;
    CHECK_EQ_INT(rmq_compress(x, codecs[c], 5, in, 20000, &again, &an, &err), RMQ_OK);
    CHECK_EQ_INT(rmq_decompress(x, codecs[c], again, an, RMQ_MAX_INFLATED_BODY, &out, &on, &err),
                 RMQ_OK);
    CHECK(on == 20000 && memcmp(out, in, on) == 0);
    free(out);
    free(again);
    out = NULL;
    free(in);
    free(z);
  }
  rmq_codec_ctx_free(x);
}

/* A stream that inflates past max is refused before it takes more than max + 1 bytes. */
static void test_bomb(void) {
  size_t n = 8 << 20;
  uint8_t *zeros = calloc(1, n);
  for (size_t c = 0; c < 3; c++) {
    uint8_t *z, *out;
    size_t zn, on;
    rmq_err err = {0};
    CHECK_EQ_INT(rmq_compress(NULL, codecs[c], 5, zeros, n, &z, &zn, &err), RMQ_OK);
    CHECK(zn < n / 100);
    CHECK_EQ_INT(rmq_decompress(NULL, codecs[c], z, zn, n - 1, &out, &on, &err), RMQ_ECORRUPT);
    CHECK(strstr(err.msg, "inflates past 8388607 bytes") != NULL);
    /* Exactly max is fine. */
    err = (rmq_err){0};
    CHECK_EQ_INT(rmq_decompress(NULL, codecs[c], z, zn, n, &out, &on, &err), RMQ_OK);
    CHECK_EQ_INT(on, n);
    free(out);
    free(z);
  }
  free(zeros);
}

int main(void) {
  test_sys_flag();
  test_round_trips();
  test_zlib_stream();
  test_concatenated_frames();
  test_damage();
  test_bomb();
  return check_report();
}
