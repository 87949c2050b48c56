/*
** body.c: the body a consumer receives (see rmq_ext.h).
*/
#include <stdlib.h>
#include <string.h>

#include "rmq_ext.h"

void rmqx_body_free(rmqx_body *b) {
  free(b->bytes);
  rmq_codec_ctx *codec = b->codec;
  memset(b, 0, sizeof *b);
  b->codec = codec;
}

void rmqx_body_done(rmqx_body *b) {
  rmqx_body_free(b);
  rmq_codec_ctx_free(b->codec);
  b->codec = NULL;
}

/* Inflate m's body into b, unless b holds it already. */
static void inflate_into(rmqx_body *b, const rmq_message *m) {
  if (b->of == m->body && b->at == m->physical_offset && (b->bytes || b->err.code != RMQ_OK)) {
    return;
  }
  rmqx_body_free(b);
  b->of = m->body;
  b->at = m->physical_offset;
  if (!b->codec && !(b->codec = rmq_codec_ctx_new())) {
    rmq_err_set(&b->err, RMQ_ENOMEM, "out of memory");
    return;
  }
  rmq_decompress(b->codec, rmq_codec_of_sys_flag(m->sys_flag), m->body, (size_t)m->body_len,
                 RMQ_MAX_INFLATED_BODY, &b->bytes, &b->len, &b->err);
}

void rmqx_result_body(sqlite3_context *ctx, rmqx_body *b, const rmq_message *m, bool text) {
  const uint8_t *bytes = m->body;
  size_t len = (size_t)m->body_len;
  if (rmq_codec_of_sys_flag(m->sys_flag) != RMQ_CODEC_NONE) {
    inflate_into(b, m);
    if (b->err.code == RMQ_ENOMEM) {
      sqlite3_result_error_nomem(ctx);
      return;
    }
    if (b->err.code != RMQ_OK) {
      rmqx_result_error(ctx, "message at commit-log offset %lld: %s", (long long)m->physical_offset,
                        b->err.msg);
      return;
    }
    bytes = b->bytes;
    len = b->len;
  }
  if (!text) {
    sqlite3_result_blob64(ctx, bytes, len, SQLITE_TRANSIENT);
  } else if (rmqx_utf8_valid(bytes, len)) {
    sqlite3_result_text64(ctx, (const char *)bytes, len, SQLITE_TRANSIENT, SQLITE_UTF8);
  }
}
