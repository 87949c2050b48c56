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

/* ------------------------------------------------------------ contexts */

/*
** Each codec's state, set up at its first use and reset for each body: zlib
** allocates some 300 KB a deflate stream, zstd and LZ4 their contexts, and a
** row that set them up anew paid for fresh memory every time.
*/
struct rmq_codec_ctx {
  z_stream deflate, inflate;
  int deflate_level; /* the level deflate was set up with; -2: not set up */
  bool inflate_ready;
  ZSTD_CCtx *zstd_c;
  ZSTD_DCtx *zstd_d;
  LZ4F_cctx *lz4_c;
  LZ4F_dctx *lz4_d;
};

rmq_codec_ctx *rmq_codec_ctx_new(void) {
  rmq_codec_ctx *x = calloc(1, sizeof *x);
  if (x) x->deflate_level = -2;
  return x;
}

void rmq_codec_ctx_free(rmq_codec_ctx *x) {
  if (!x) return;
  if (x->deflate_level != -2) deflateEnd(&x->deflate);
  if (x->inflate_ready) inflateEnd(&x->inflate);
  ZSTD_freeCCtx(x->zstd_c);
  ZSTD_freeDCtx(x->zstd_d);
  LZ4F_freeCompressionContext(x->lz4_c);
  LZ4F_freeDecompressionContext(x->lz4_d);
  free(x);
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

static int no_memory(inflated *o, rmq_err *err) {
  free(o->buf);
  return rmq_err_set(err, RMQ_ENOMEM, "out of memory inflating a body");
}

static int inflate_zlib(rmq_codec_ctx *x, const uint8_t *src, size_t len, inflated *o,
                        rmq_err *err) {
  z_stream *z = &x->inflate;
  if (len > UINT32_MAX) return inflate_failed(o, RMQ_CODEC_ZLIB, "it is longer than 4 GiB", err);
  int zrc = x->inflate_ready ? inflateReset(z) : inflateInit(z);
  if (zrc != Z_OK) return no_memory(o, err);
  x->inflate_ready = true;
  z->next_in = (Bytef *)src;
  z->avail_in = (uInt)len;
  while (zrc == Z_OK) {
    if (o->len == o->cap && !inflated_grow(o)) return inflate_no_room(o, RMQ_CODEC_ZLIB, err);
    z->next_out = o->buf + o->len;
    z->avail_out = (uInt)(o->cap - o->len);
    zrc = inflate(z, Z_NO_FLUSH);
    o->len = o->cap - z->avail_out;
    /* Z_BUF_ERROR with output room left: the input ran out before the stream's end. */
    if (zrc == Z_BUF_ERROR && z->avail_out > 0) break;
    if (zrc == Z_BUF_ERROR) zrc = Z_OK;
  }
  if (zrc != Z_STREAM_END) {
    return inflate_failed(o, RMQ_CODEC_ZLIB, z->msg ? z->msg : "it is cut short", err);
  }
  if (o->len > o->max) return inflate_no_room(o, RMQ_CODEC_ZLIB, err);
  return RMQ_OK;
}

static int inflate_lz4(rmq_codec_ctx *x, const uint8_t *src, size_t len, inflated *o,
                       rmq_err *err) {
  if (x->lz4_d) {
    LZ4F_resetDecompressionContext(x->lz4_d);
  } else if (LZ4F_isError(LZ4F_createDecompressionContext(&x->lz4_d, LZ4F_VERSION))) {
    x->lz4_d = NULL;
    return no_memory(o, err);
  }
  size_t pos = 0, hint = 1;
  /* Frame after frame, as RocketMQ's decoder reads on (lz4-java's LZ4FrameInputStream). */
  while (hint != 0 || pos < len) {
    if (o->len == o->cap && !inflated_grow(o)) return inflate_no_room(o, RMQ_CODEC_LZ4, err);
    size_t out = o->cap - o->len, in = len - pos;
    hint = LZ4F_decompress(x->lz4_d, o->buf + o->len, &out, src + pos, &in, NULL);
    if (LZ4F_isError(hint)) return inflate_failed(o, RMQ_CODEC_LZ4, LZ4F_getErrorName(hint), err);
    o->len += out;
    pos += in;
    /* The frame wants more input than there is, and no output is pending. */
    if (hint != 0 && pos == len && out == 0 && o->len < o->cap) break;
  }
  if (hint != 0) return inflate_failed(o, RMQ_CODEC_LZ4, "the frame is cut short", err);
  if (o->len > o->max) return inflate_no_room(o, RMQ_CODEC_LZ4, err);
  return RMQ_OK;
}

static int inflate_zstd(rmq_codec_ctx *x, const uint8_t *src, size_t len, inflated *o,
                        rmq_err *err) {
  if (x->zstd_d) {
    ZSTD_DCtx_reset(x->zstd_d, ZSTD_reset_session_only);
  } else if (!(x->zstd_d = ZSTD_createDCtx())) {
    return no_memory(o, err);
  }
  ZSTD_inBuffer in = {src, len, 0};
  size_t hint = 1;
  /* Frame after frame, as RocketMQ's decoder reads on (zstd-jni's ZstdInputStream). */
  while (hint != 0 || in.pos < in.size) {
    if (o->len == o->cap && !inflated_grow(o)) return inflate_no_room(o, RMQ_CODEC_ZSTD, err);
    ZSTD_outBuffer out = {o->buf, o->cap, o->len};
    hint = ZSTD_decompressStream(x->zstd_d, &out, &in);
    o->len = out.pos;
    if (ZSTD_isError(hint)) return inflate_failed(o, RMQ_CODEC_ZSTD, ZSTD_getErrorName(hint), err);
    if (hint != 0 && in.pos == in.size && out.pos < out.size) break;
  }
  if (hint != 0) return inflate_failed(o, RMQ_CODEC_ZSTD, "the frame is cut short", err);
  if (o->len > o->max) return inflate_no_room(o, RMQ_CODEC_ZSTD, err);
  return RMQ_OK;
}

static int decompress_with(rmq_codec_ctx *x, rmq_codec c, const uint8_t *src, size_t len,
                           size_t max, uint8_t **out, size_t *out_len, rmq_err *err) {
  inflated o = {.max = max};
  int rc = c == RMQ_CODEC_LZ4    ? inflate_lz4(x, src, len, &o, err)
           : c == RMQ_CODEC_ZSTD ? inflate_zstd(x, src, len, &o, err)
                                 : inflate_zlib(x, src, len, &o, err);
  if (rc != RMQ_OK) return rc;
  if (o.buf == NULL && !(o.buf = malloc(1))) return no_memory(&o, err);
  *out = o.buf;
  *out_len = o.len;
  return RMQ_OK;
}

int rmq_decompress(rmq_codec_ctx *x, rmq_codec c, const uint8_t *src, size_t len, size_t max,
                   uint8_t **out, size_t *out_len, rmq_err *err) {
  *out = NULL;
  *out_len = 0;
  if (c != RMQ_CODEC_ZLIB && c != RMQ_CODEC_LZ4 && c != RMQ_CODEC_ZSTD) {
    return rmq_err_set(err, RMQ_ECORRUPT,
                       "SYSFLAG names compression type %d, which is no codec of RocketMQ's "
                       "(1 LZ4, 2 ZSTD, 0 or 3 zlib)",
                       (int)c);
  }
  rmq_codec_ctx *own = x ? NULL : rmq_codec_ctx_new();
  if (!x && !own) return rmq_err_set(err, RMQ_ENOMEM, "out of memory inflating a body");
  int rc = decompress_with(x ? x : own, c, src, len, max, out, out_len, err);
  rmq_codec_ctx_free(own);
  return rc;
}

/* ------------------------------------------------------------ compressing */

static const char *deflate_zlib(rmq_codec_ctx *x, int level, const uint8_t *src, size_t len,
                                uint8_t *buf, size_t *n) {
  z_stream *z = &x->deflate;
  if (len > UINT32_MAX || *n > UINT32_MAX) return "the body is longer than 4 GiB";
  if (x->deflate_level != level) {
    if (x->deflate_level != -2) deflateEnd(z);
    x->deflate_level = -2;
    *z = (z_stream){0};
    if (deflateInit(z, level) != Z_OK) return "out of memory";
    x->deflate_level = level;
  } else if (deflateReset(z) != Z_OK) {
    return "deflateReset failed";
  }
  z->next_in = (Bytef *)src;
  z->avail_in = (uInt)len;
  z->next_out = buf;
  z->avail_out = (uInt)*n;
  if (deflate(z, Z_FINISH) != Z_STREAM_END) return "deflate did not finish";
  *n = z->total_out;
  return NULL;
}

static const char *compress_with(rmq_codec_ctx *x, rmq_codec c, int level, const uint8_t *src,
                                 size_t len, uint8_t *buf, size_t *n) {
  if (c == RMQ_CODEC_LZ4) {
    if (!x->lz4_c && LZ4F_isError(LZ4F_createCompressionContext(&x->lz4_c, LZ4F_VERSION))) {
      x->lz4_c = NULL;
      return "out of memory";
    }
    /* A frame as LZ4F_compressFrame writes it, through the kept context. */
    LZ4F_preferences_t prefs = {.compressionLevel = level};
    size_t at = LZ4F_compressBegin(x->lz4_c, buf, *n, &prefs), r = 0;
    if (!LZ4F_isError(at)) r = LZ4F_compressUpdate(x->lz4_c, buf + at, *n - at, src, len, NULL);
    if (!LZ4F_isError(at) && !LZ4F_isError(r)) at += r;
    if (!LZ4F_isError(at) && !LZ4F_isError(r))
      r = LZ4F_compressEnd(x->lz4_c, buf + at, *n - at, NULL);
    if (LZ4F_isError(at) || LZ4F_isError(r)) return LZ4F_getErrorName(LZ4F_isError(at) ? at : r);
    *n = at + r;
    return NULL;
  }
  if (c == RMQ_CODEC_ZSTD) {
    if (!x->zstd_c && !(x->zstd_c = ZSTD_createCCtx())) return "out of memory";
    size_t r = ZSTD_compressCCtx(x->zstd_c, buf, *n, src, len, level);
    if (ZSTD_isError(r)) return ZSTD_getErrorName(r);
    *n = r;
    return NULL;
  }
  return deflate_zlib(x, level, src, len, buf, n);
}

int rmq_compress(rmq_codec_ctx *x, rmq_codec c, int level, const uint8_t *src, size_t len,
                 uint8_t **out, size_t *out_len, rmq_err *err) {
  LZ4F_preferences_t prefs = {.compressionLevel = level};
  size_t bound = c == RMQ_CODEC_LZ4    ? LZ4F_compressFrameBound(len, &prefs)
                 : c == RMQ_CODEC_ZSTD ? ZSTD_compressBound(len)
                                       : compressBound((uLong)len);
  rmq_codec_ctx *own = x ? NULL : rmq_codec_ctx_new();
  uint8_t *buf = malloc(bound);
  *out = NULL;
  if (!buf || (!x && !own)) {
    free(buf);
    rmq_codec_ctx_free(own);
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory compressing a body");
  }
  size_t n = bound;
  const char *why = compress_with(x ? x : own, c, level, src, len, buf, &n);
  rmq_codec_ctx_free(own);
  if (why) {
    free(buf);
    return rmq_err_set(err, RMQ_EIO, "cannot compress a body with %s: %s", rmq_codec_name(c), why);
  }
  *out = buf;
  *out_len = n;
  return RMQ_OK;
}
