/*
** compression.c: the body codecs (rmq.h: body compression).
*/

#include <lz4frame.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#include <zstd.h>

#include "rmq.h"

rmq_codec rmq_codec_of_sys_flag(int32_t sys_flag) {
  if (!(sys_flag & RMQ_SYSFLAG_COMPRESSED)) return RMQ_CODEC_NONE;
  int type = (sys_flag & RMQ_SYSFLAG_COMPRESSION_TYPE) >> 8;
  return type == 0 ? RMQ_CODEC_ZLIB : (rmq_codec)type;
}

int32_t rmq_codec_sys_flag(rmq_codec c) { return RMQ_SYSFLAG_COMPRESSED | ((int32_t)c << 8); }

const char *rmq_codec_name(rmq_codec c) {
  return c == RMQ_CODEC_LZ4    ? "lz4"
         : c == RMQ_CODEC_ZSTD ? "zstd"
         : c == RMQ_CODEC_ZLIB ? "zlib"
                               : "unknown";
}

rmq_codec rmq_codec_by_name(const char *name) {
  static const rmq_codec all[] = {RMQ_CODEC_ZLIB, RMQ_CODEC_LZ4, RMQ_CODEC_ZSTD};
  for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++) {
    if (strcasecmp(name, rmq_codec_name(all[i])) == 0) return all[i];
  }
  return RMQ_CODEC_NONE;
}

/* ------------------------------------------------------------ inflating */

/* The output of an inflation: grown as the stream yields, never past max. */
typedef struct inflated {
  uint8_t *buf;
  size_t len, cap, max;
} inflated;

/* Room for more output: false when out of memory or already at max. */
static bool inflated_grow(inflated *o) {
  if (o->cap >= o->max + 1) return false;
  size_t cap = o->cap ? 2 * o->cap : 4096;
  /* One byte past max lets a stream that goes on past it be told from one that ends there. */
  if (cap > o->max + 1) cap = o->max + 1;
  uint8_t *b = realloc(o->buf, cap);
  if (!b) return false;
  o->buf = b;
  o->cap = cap;
  return true;
}

static int inflate_failed(inflated *o, rmq_codec c, const char *why, rmq_err *err) {
  free(o->buf);
  return rmq_err_set(err, RMQ_ECORRUPT, "the %s body does not inflate: %s", rmq_codec_name(c), why);
}

/* The stream went past max, or memory ran out: which one. */
static int inflate_no_room(inflated *o, rmq_codec c, rmq_err *err) {
  bool too_big = o->cap >= o->max + 1;
  free(o->buf);
  if (!too_big) return rmq_err_set(err, RMQ_ENOMEM, "out of memory inflating a body");
  return rmq_err_set(err, RMQ_ECORRUPT, "the %s body inflates past %zu bytes", rmq_codec_name(c),
                     o->max);
}

static int inflate_zlib(const uint8_t *src, size_t len, inflated *o, rmq_err *err) {
  z_stream z = {.next_in = (Bytef *)src, .avail_in = (uInt)len};
  if (len > UINT32_MAX || inflateInit(&z) != Z_OK) {
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory inflating a body");
  }
  int zrc = Z_OK;
  while (zrc == Z_OK) {
    if (o->len == o->cap && !inflated_grow(o)) {
      inflateEnd(&z);
      return inflate_no_room(o, RMQ_CODEC_ZLIB, err);
    }
    z.next_out = o->buf + o->len;
    z.avail_out = (uInt)(o->cap - o->len);
    zrc = inflate(&z, Z_NO_FLUSH);
    o->len = o->cap - z.avail_out;
    /* Z_BUF_ERROR with output room left: the input ran out before the stream's end. */
    if (zrc == Z_BUF_ERROR && z.avail_out > 0) break;
    if (zrc == Z_BUF_ERROR) zrc = Z_OK;
  }
  char why[160];
  snprintf(why, sizeof why, "%s", zrc == Z_STREAM_END ? "" : z.msg ? z.msg : "it is cut short");
  inflateEnd(&z);
  if (zrc != Z_STREAM_END) return inflate_failed(o, RMQ_CODEC_ZLIB, why, err);
  if (o->len > o->max) return inflate_no_room(o, RMQ_CODEC_ZLIB, err);
  return RMQ_OK;
}

static int inflate_lz4(const uint8_t *src, size_t len, inflated *o, rmq_err *err) {
  LZ4F_dctx *d;
  if (LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION))) {
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory inflating a body");
  }
  size_t pos = 0, hint = 1;
  while (hint != 0) {
    if (o->len == o->cap && !inflated_grow(o)) {
      LZ4F_freeDecompressionContext(d);
      return inflate_no_room(o, RMQ_CODEC_LZ4, err);
    }
    size_t out = o->cap - o->len, in = len - pos;
    hint = LZ4F_decompress(d, o->buf + o->len, &out, src + pos, &in, NULL);
    if (LZ4F_isError(hint)) {
      const char *why = LZ4F_getErrorName(hint);
      LZ4F_freeDecompressionContext(d);
      return inflate_failed(o, RMQ_CODEC_LZ4, why, err);
    }
    o->len += out;
    pos += in;
    /* The frame wants more input than there is, and no output is pending. */
    if (hint != 0 && pos == len && out == 0 && o->len < o->cap) break;
  }
  LZ4F_freeDecompressionContext(d);
  if (hint != 0) return inflate_failed(o, RMQ_CODEC_LZ4, "the frame is cut short", err);
  if (o->len > o->max) return inflate_no_room(o, RMQ_CODEC_LZ4, err);
  return RMQ_OK;
}

static int inflate_zstd(const uint8_t *src, size_t len, inflated *o, rmq_err *err) {
  ZSTD_DStream *d = ZSTD_createDStream();
  if (!d) return rmq_err_set(err, RMQ_ENOMEM, "out of memory inflating a body");
  ZSTD_inBuffer in = {src, len, 0};
  size_t hint = 1;
  while (hint != 0) {
    if (o->len == o->cap && !inflated_grow(o)) {
      ZSTD_freeDStream(d);
      return inflate_no_room(o, RMQ_CODEC_ZSTD, err);
    }
    ZSTD_outBuffer out = {o->buf, o->cap, o->len};
    hint = ZSTD_decompressStream(d, &out, &in);
    o->len = out.pos;
    if (ZSTD_isError(hint)) {
      const char *why = ZSTD_getErrorName(hint);
      ZSTD_freeDStream(d);
      return inflate_failed(o, RMQ_CODEC_ZSTD, why, err);
    }
    if (hint != 0 && in.pos == in.size && out.pos < out.size) break;
  }
  ZSTD_freeDStream(d);
  if (hint != 0) return inflate_failed(o, RMQ_CODEC_ZSTD, "the frame is cut short", err);
  if (o->len > o->max) return inflate_no_room(o, RMQ_CODEC_ZSTD, err);
  return RMQ_OK;
}

int rmq_decompress(rmq_codec c, const uint8_t *src, size_t len, size_t max, uint8_t **out,
                   size_t *out_len, rmq_err *err) {
  inflated o = {.max = max};
  *out = NULL;
  *out_len = 0;
  if (c != RMQ_CODEC_ZLIB && c != RMQ_CODEC_LZ4 && c != RMQ_CODEC_ZSTD) {
    return rmq_err_set(err, RMQ_ECORRUPT,
                       "SYSFLAG names compression type %d, which is no codec of RocketMQ's "
                       "(1 LZ4, 2 ZSTD, 0 or 3 zlib)",
                       (int)c);
  }
  int rc = c == RMQ_CODEC_LZ4    ? inflate_lz4(src, len, &o, err)
           : c == RMQ_CODEC_ZSTD ? inflate_zstd(src, len, &o, err)
                                 : inflate_zlib(src, len, &o, err);
  if (rc != RMQ_OK) return rc;
  if (o.buf == NULL && !(o.buf = malloc(1))) {
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory inflating a body");
  }
  *out = o.buf;
  *out_len = o.len;
  return RMQ_OK;
}

/* ------------------------------------------------------------ compressing */

int rmq_compress(rmq_codec c, int level, const uint8_t *src, size_t len, uint8_t **out,
                 size_t *out_len, rmq_err *err) {
  LZ4F_preferences_t prefs = {.compressionLevel = level};
  size_t bound = c == RMQ_CODEC_LZ4    ? LZ4F_compressFrameBound(len, &prefs)
                 : c == RMQ_CODEC_ZSTD ? ZSTD_compressBound(len)
                                       : compressBound((uLong)len);
  uint8_t *buf = malloc(bound);
  *out = NULL;
  if (!buf) return rmq_err_set(err, RMQ_ENOMEM, "out of memory compressing a body");
  size_t n;
  const char *why = NULL;
  if (c == RMQ_CODEC_LZ4) {
    n = LZ4F_compressFrame(buf, bound, src, len, &prefs);
    if (LZ4F_isError(n)) why = LZ4F_getErrorName(n);
  } else if (c == RMQ_CODEC_ZSTD) {
    n = ZSTD_compress(buf, bound, src, len, level);
    if (ZSTD_isError(n)) why = ZSTD_getErrorName(n);
  } else {
    uLongf zn = (uLongf)bound;
    if (compress2(buf, &zn, src, (uLong)len, level) != Z_OK) why = "compress2 failed";
    n = (size_t)zn;
  }
  if (why) {
    free(buf);
    return rmq_err_set(err, RMQ_EIO, "cannot compress a body with %s: %s", rmq_codec_name(c), why);
  }
  *out = buf;
  *out_len = n;
  return RMQ_OK;
}
