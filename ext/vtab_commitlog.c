/*
** vtab_commitlog.c: rocketmq_commitlog, every physical record of a store's
** commit log, read-only.
**
** Usage:
**
**    SELECT offset, size, kind, topic, queue_id, queue_offset
**      FROM rocketmq_commitlog('path/to/store');
**    SELECT * FROM rocketmq_commitlog('path/to/store') WHERE NOT valid;
**    SELECT * FROM rocketmq_commitlog('path/to/store') WHERE offset >= 65536;
**
** An eponymous, table-valued, read-only virtual table: `dir` is a HIDDEN
** column given as the first argument (or `dir = ?`); without it the query
** fails with "rocketmq_commitlog: missing argument dir; use
** rocketmq_commitlog('path/to/store')". It reads the live store when this
** process has dir open (rocketmq table), and otherwise opens the files
** read-only (nothing on disk changes), including a store written by Apache
** RocketMQ, whose segment size is read off the files. It is
** SQLITE_VTAB_DIRECTONLY: a view or trigger cannot use it.
**
** Columns, one row per physical record in offset order (rowid = offset):
**
**    file            the segment's name, its 20-digit start offset
**    offset          physical (commit-log) offset of the record
**    size            TOTALSIZE; for a BLANK the bytes it fills; for damage
**                    the bytes the row covers
**    magic           MAGICCODE as stored, a signed 32-bit INTEGER:
**                    -626843481 (0xDAA320A7) a message, -875286124
**                    (0xCBD43194) a BLANK, -626843477 (0xDAA320AB) a 5.x
**                    message; printf('%08X', magic & 0xFFFFFFFF) shows it
**                    in hex. NULL when fewer than 8 bytes are left.
**    kind            'message', 'blank' (the end-of-segment filler) or
**                    'damaged' (bytes that are not a sound record)
**    valid           1 when RocketMQ's recovery check (checkCRCOnRecover on)
**                    accepts the record: a message whose lengths agree and
**                    whose body CRC matches, or a BLANK that fills the rest
**                    of its segment; else 0
**    crc_ok          1 or 0 when the body could be checked (a message, or a
**                    damaged record whose body lies within its TOTALSIZE;
**                    an empty body is always 1, as RocketMQ checks none);
**                    NULL otherwise
**    reason          why valid is 0, NULL when it is 1
**    topic, queue_id, queue_offset, sys_flag, flag, body_crc,
**    born_timestamp, born_host, store_timestamp, store_host,
**    reconsume_times, prepared_transaction_offset, body_length
**                    the decoded header (hosts as 'ip:port'), also for a
**                    damaged record as far as its bytes go; NULL for a BLANK
**    properties      the properties as a JSON object of strings
**    msg_id          the offset message id: store host + PHYSICALOFFSET
**    body, body_text, body_raw
**                    a message's body as the store table gives it: inflated
**                    when SYSFLAG marks it compressed, as text, as stored;
**                    NULL for a BLANK or a damaged record
**
** How it works: the engine's commit-log iterator (rmq_commitlog_iter_*)
** walks the segments in order from the first; in each,
** records are decoded (every length is checked against the bytes that
** exist) and the walk moves on by TOTALSIZE, to the next segment after a
** BLANK. A record whose CRC or lengths are wrong but whose TOTALSIZE fits
** in the segment is reported ('damaged', or 'message' with valid = 0 for a
** CRC error alone) and the walk goes on after it, so an invalid record in
** the middle of the log does not hide the ones after it. Bytes that cannot
** be a record (an unknown magic code, an impossible TOTALSIZE) become one
** 'damaged' row up to the end of the segment. Zero bytes end a segment's
** data: that is the end of the log when no later segment holds records,
** and a 'damaged' row ("no end-of-file BLANK") when one does.
**
** Of the live store only what the writer has published is read (each
** segment up to its read position), so the end of the log is never torn.
** A store opened from the files is read to the end of each segment, which
** is how a damaged tail (a torn last record, stray bytes after the end)
** shows up; telling zeros from damage reads the unwritten rest of the last
** segment once. Segments are held (reference counted) while read: one that
** expiry deletes meanwhile stays readable until the cursor lets go, or
** until clean_grace_ms have passed, after which the cursor's next row or
** column is an error ("the segment holding offset N was deleted by expiry
** while this cursor held it").
**
** Plans (xBestIndex). idxNum bits say which constraints were passed to
** xFilter, in this argv order:
**    CL_DIR  0x01   dir = ?                           (required)
**    CL_EQ   0x02   offset = ?
**    CL_GE   0x04   offset >= ?      CL_GT 0x08   offset > ?
**    CL_LE   0x10   offset <= ?      CL_LT 0x20   offset < ?
** idxStr names the plan for EXPLAIN QUERY PLAN: "scan" or "offset range"
** ("no dir": the plan of a query without dir, the costliest, fails in
** xFilter; a dir that is constrained but not yet usable makes the plan
** unusable instead, so that another join order supplies it).
** Offset bounds start the walk at the segment that holds the lower bound
** (records are found only by walking a segment from its start) and stop it
** past the upper bound; SQLite still checks them on each row. ORDER BY
** offset is consumed.
*/
#include <stdio.h>
#include <string.h>

#include "rmq_ext.h"

#define CL_SCHEMA                                                                       \
  "CREATE TABLE x(file TEXT, offset INTEGER, size INTEGER, magic INTEGER, kind TEXT,"   \
  " valid INTEGER, crc_ok INTEGER, reason TEXT, topic TEXT, queue_id INTEGER,"          \
  " queue_offset INTEGER, sys_flag INTEGER, flag INTEGER, body_crc INTEGER,"            \
  " born_timestamp INTEGER, born_host TEXT, store_timestamp INTEGER, store_host TEXT,"  \
  " reconsume_times INTEGER, prepared_transaction_offset INTEGER, body_length INTEGER," \
  " properties TEXT, msg_id TEXT, body BLOB, body_text TEXT, body_raw BLOB, dir HIDDEN)"

enum {
  COL_FILE,
  COL_OFFSET,
  COL_SIZE,
  COL_MAGIC,
  COL_KIND,
  COL_VALID,
  COL_CRC_OK,
  COL_REASON,
  COL_TOPIC,
  COL_QUEUE_ID,
  COL_QUEUE_OFFSET,
  COL_SYS_FLAG,
  COL_FLAG,
  COL_BODY_CRC,
  COL_BORN_TIMESTAMP,
  COL_BORN_HOST,
  COL_STORE_TIMESTAMP,
  COL_STORE_HOST,
  COL_RECONSUME_TIMES,
  COL_PREPARED_TX_OFFSET,
  COL_BODY_LENGTH,
  COL_PROPERTIES,
  COL_MSG_ID,
  COL_BODY,
  COL_BODY_TEXT,
  COL_BODY_RAW,
  COL_DIR
};

/* idxNum bits that pricing looks at (rmqx_tvf_best_index sets them all). */
#define CL_DIR 0x01
#define CL_EQ 0x02

typedef struct cl_cursor {
  sqlite3_vtab_cursor base;
  rmqx_tvf_dir src;      /* the store read */
  rmq_commitlog_iter it; /* holds the segment of the current row */
  bool eof;
  rmq_commitlog_record rec; /* the current row */
  int crc_ok;               /* -1: not yet computed, 0/1, 2: not checkable */
  char *full_reason;        /* the record's reason with the CRC, for the column */
  rmqx_body body;           /* the message's, inflated */
} cl_cursor;

/* ------------------------------------------------------------ the table */

static int cl_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  bool ready;
  int rc = rmqx_tvf_best_index(vt, info, &ready);
  if (rc != SQLITE_OK) return rc;
  int idx = info->idxNum;
  info->estimatedRows = idx & CL_EQ ? 1 : idx != CL_DIR ? 1000 : 100000;
  if (!ready) return SQLITE_OK; /* priced out by rmqx_tvf_best_index */
  info->idxStr = idx == CL_DIR ? "scan" : "offset range";
  info->estimatedCost = idx & CL_EQ ? 100 : idx != CL_DIR ? 10000 : 1000000;
  return SQLITE_OK;
}

/* ------------------------------------------------------------ the walk */

static void clear_row(cl_cursor *c) {
  rmqx_body_free(&c->body);
  sqlite3_free(c->full_reason);
  c->full_reason = NULL;
  c->crc_ok = -1;
}

static const char expired_fmt[] = "rocketmq_commitlog: the segment holding offset %lld was "
                                  "deleted by expiry while this cursor held it (longer than "
                                  "clean_grace_ms)";

/*
** The next row. A segment that expiry took from this cursor reads as zeros
** (rmq_commitlog_iter_expired): that is an error, never rows, nor an end.
*/
static int step(cl_cursor *c) {
  clear_row(c);
  c->eof = !rmq_commitlog_iter_next(&c->it, &c->rec);
  int64_t expired = rmq_commitlog_iter_expired(&c->it);
  if (expired < 0) return SQLITE_OK;
  return rmqx_vtab_error(c->base.pVtab, expired_fmt, (long long)expired);
}

/* 1/0 for the body CRC, 2 when there is no body to check. */
static int row_crc_ok(cl_cursor *c) {
  const rmq_message *m = &c->rec.m;
  if (c->crc_ok < 0 && (c->rec.kind == RMQ_RECORD_BLANK || !c->rec.header)) c->crc_ok = 2;
  if (c->crc_ok < 0) {
    c->crc_ok = m->body_len == 0 || rmq_body_crc(m->body, (size_t)m->body_len) == m->body_crc;
  }
  return c->crc_ok;
}

static bool row_valid(cl_cursor *c) {
  if (c->rec.kind == RMQ_RECORD_BLANK) return c->rec.reason[0] == '\0';
  return c->rec.kind == RMQ_RECORD_MESSAGE && row_crc_ok(c) == 1;
}

static const char *row_reason(cl_cursor *c) {
  const char *reason = c->rec.reason[0] ? c->rec.reason : NULL;
  if (c->full_reason) return c->full_reason;
  bool crc_bad = c->rec.kind != RMQ_RECORD_BLANK && row_crc_ok(c) == 0;
  if (!crc_bad) return reason;
  const rmq_message *m = &c->rec.m;
  int32_t computed = rmq_body_crc(m->body, (size_t)m->body_len);
  c->full_reason = sqlite3_mprintf("%s%sbody CRC %d does not match the stored BODYCRC %d",
                                   reason ? reason : "", reason ? "; " : "", (int)computed,
                                   (int)m->body_crc);
  return c->full_reason;
}

/* ------------------------------------------------------------ the cursor */

static int cl_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  (void)vt;
  cl_cursor *c = rmqx_tvf_cursor_new(sizeof *c, out);
  if (c == NULL) return SQLITE_NOMEM;
  c->crc_ok = -1;
  return SQLITE_OK;
}

static int cl_close(sqlite3_vtab_cursor *cur) {
  cl_cursor *c = (cl_cursor *)cur;
  clear_row(c);
  rmqx_body_done(&c->body);
  rmq_commitlog_iter_stop(&c->it);
  rmqx_tvf_dir_close(&c->src);
  sqlite3_free(c);
  return SQLITE_OK;
}

static int cl_filter(sqlite3_vtab_cursor *cur, int idx, const char *idx_str, int argc,
                     sqlite3_value **argv) {
  (void)idx_str;
  (void)argc;
  cl_cursor *c = (cl_cursor *)cur;
  int rc = rmqx_tvf_check_args(cur->pVtab, idx);
  if (rc != SQLITE_OK) return rc;
  /* Let go of the segment before the store it belongs to may be closed. */
  rmq_commitlog_iter_stop(&c->it);
  c->eof = true;
  rc = rmqx_tvf_dir_open(&c->src, cur->pVtab, argv[0]);
  if (rc != SQLITE_OK) return rc;
  rmq_store *s = c->src.reader.store;
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  rmqx_tvf_range(cur->pVtab, idx, argv, &lo, &hi);
  /* Without a writer in this process, each segment is read to its end. */
  unsigned flags = rmq_store_config(s)->readonly ? RMQ_CL_ITER_WHOLE_SEGMENTS : 0;
  rmq_commitlog_iter_start(&c->it, s, lo, hi == INT64_MAX ? hi : hi + 1, INT64_MIN, flags);
  return step(c);
}

static int cl_next(sqlite3_vtab_cursor *cur) { return step((cl_cursor *)cur); }

static int cl_eof(sqlite3_vtab_cursor *cur) { return ((cl_cursor *)cur)->eof; }

static int cl_rowid(sqlite3_vtab_cursor *cur, sqlite_int64 *rowid) {
  *rowid = ((cl_cursor *)cur)->rec.offset;
  return SQLITE_OK;
}

static void result_host(sqlite3_context *ctx, const rmq_host *h) {
  char buf[64];
  rmq_host_format(h, buf, sizeof buf);
  sqlite3_result_text(ctx, buf, -1, SQLITE_TRANSIENT);
}

/* The decoded fields, NULL where the bytes did not reach them. */
static void header_column(cl_cursor *c, sqlite3_context *ctx, int col) {
  const rmq_message *m = &c->rec.m;
  if (!c->rec.header) return;
  switch (col) {
    case COL_TOPIC:
      if (m->topic) rmqx_result_text_or_blob(ctx, m->topic, m->topic_len, SQLITE_TRANSIENT);
      break;
    case COL_QUEUE_ID: sqlite3_result_int(ctx, m->queue_id); break;
    case COL_QUEUE_OFFSET: sqlite3_result_int64(ctx, m->queue_offset); break;
    case COL_SYS_FLAG: sqlite3_result_int(ctx, m->sys_flag); break;
    case COL_FLAG: sqlite3_result_int(ctx, m->flag); break;
    case COL_BODY_CRC: sqlite3_result_int(ctx, m->body_crc); break;
    case COL_BORN_TIMESTAMP: sqlite3_result_int64(ctx, m->born_timestamp); break;
    case COL_BORN_HOST: result_host(ctx, &m->born_host); break;
    case COL_STORE_TIMESTAMP: sqlite3_result_int64(ctx, m->store_timestamp); break;
    case COL_STORE_HOST: result_host(ctx, &m->store_host); break;
    case COL_RECONSUME_TIMES: sqlite3_result_int(ctx, m->reconsume_times); break;
    case COL_PREPARED_TX_OFFSET: sqlite3_result_int64(ctx, m->prepared_transaction_offset); break;
    case COL_BODY_LENGTH: sqlite3_result_int(ctx, m->body_len); break;
    case COL_PROPERTIES:
      if (m->properties) {
        char *json = rmqx_properties_json(m->properties, (size_t)m->properties_len);
        if (json == NULL) {
          sqlite3_result_error_nomem(ctx);
        } else {
          rmqx_result_text_or_blob(ctx, json, -1, sqlite3_free);
        }
      }
      break;
    case COL_MSG_ID: {
      char id[RMQ_MSG_ID_MAX];
      rmq_msg_id_format(&m->store_host, m->physical_offset, id);
      sqlite3_result_text(ctx, id, -1, SQLITE_TRANSIENT);
      break;
    }
  }
}

/* A message's body; a BLANK's or a damaged record's is NULL. */
static void body_column(cl_cursor *c, sqlite3_context *ctx, int col) {
  const rmq_message *m = &c->rec.m;
  if (c->rec.kind != RMQ_RECORD_MESSAGE) return;
  if (col == COL_BODY_RAW) {
    sqlite3_result_blob(ctx, m->body, m->body_len, SQLITE_TRANSIENT);
  } else {
    rmqx_result_body(ctx, &c->body, m, col == COL_BODY_TEXT);
  }
}

static int cl_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col) {
  cl_cursor *c = (cl_cursor *)cur;
  static const char *const kinds[] = {"message", "blank", "damaged"};
  switch (col) {
    case COL_FILE: {
      char name[21];
      rmq_file_name(c->rec.segment, name);
      sqlite3_result_text(ctx, name, -1, SQLITE_TRANSIENT);
      break;
    }
    case COL_OFFSET: sqlite3_result_int64(ctx, c->rec.offset); break;
    case COL_SIZE: sqlite3_result_int(ctx, c->rec.size); break;
    case COL_MAGIC:
      if (c->rec.has_magic) sqlite3_result_int(ctx, c->rec.m.magic);
      break;
    case COL_KIND: sqlite3_result_text(ctx, kinds[c->rec.kind], -1, SQLITE_STATIC); break;
    case COL_VALID: sqlite3_result_int(ctx, row_valid(c)); break;
    case COL_CRC_OK:
      if (row_crc_ok(c) != 2) sqlite3_result_int(ctx, row_crc_ok(c));
      break;
    case COL_REASON: {
      const char *r = row_reason(c);
      if (r) sqlite3_result_text(ctx, r, -1, SQLITE_TRANSIENT);
      break;
    }
    case COL_DIR: sqlite3_result_text(ctx, c->src.dir, -1, SQLITE_TRANSIENT); break;
    case COL_BODY:
    case COL_BODY_TEXT:
    case COL_BODY_RAW: body_column(c, ctx, col); break;
    default: header_column(c, ctx, col); break;
  }
  int64_t expired = rmq_commitlog_iter_expired(&c->it);
  if (expired >= 0) rmqx_result_error(ctx, expired_fmt, (long long)expired);
  return SQLITE_OK;
}

static sqlite3_module cl_module = {
    .iVersion = 0,
    .xConnect = rmqx_tvf_connect,
    .xBestIndex = cl_best_index,
    .xDisconnect = rmqx_tvf_disconnect,
    .xOpen = cl_open,
    .xClose = cl_close,
    .xFilter = cl_filter,
    .xNext = cl_next,
    .xEof = cl_eof,
    .xColumn = cl_column,
    .xRowid = cl_rowid,
};

static const char *const cl_args[] = {"dir"};

static const rmqx_tvf cl_tvf = {
    .name = "rocketmq_commitlog",
    .schema = CL_SCHEMA,
    .arg_col = COL_DIR,
    .n_args = 1,
    .n_required = 1,
    .arg_names = cl_args,
    .usage = "rocketmq_commitlog('path/to/store')",
    .no_args_plan = "no dir",
    .range_col = COL_OFFSET,
};

int rmqx_register_commitlog_table(sqlite3 *db) {
  return rmqx_tvf_register(db, &cl_module, &cl_tvf);
}
