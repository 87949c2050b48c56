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
**
** How it works. Segments are walked in order from the first; in each,
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
** segment once. Segments are held (reference counted) while read.
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

#define CL_SCHEMA                                                                            \
  "CREATE TABLE x(file TEXT, offset INTEGER, size INTEGER, magic INTEGER, kind TEXT,"        \
  " valid INTEGER, crc_ok INTEGER, reason TEXT, topic TEXT, queue_id INTEGER,"               \
  " queue_offset INTEGER, sys_flag INTEGER, flag INTEGER, body_crc INTEGER,"                 \
  " born_timestamp INTEGER, born_host TEXT, store_timestamp INTEGER, store_host TEXT,"       \
  " reconsume_times INTEGER, prepared_transaction_offset INTEGER, body_length INTEGER,"      \
  " properties TEXT, msg_id TEXT, dir HIDDEN)"

enum {
  COL_FILE, COL_OFFSET, COL_SIZE, COL_MAGIC, COL_KIND, COL_VALID, COL_CRC_OK, COL_REASON,
  COL_TOPIC, COL_QUEUE_ID, COL_QUEUE_OFFSET, COL_SYS_FLAG, COL_FLAG, COL_BODY_CRC,
  COL_BORN_TIMESTAMP, COL_BORN_HOST, COL_STORE_TIMESTAMP, COL_STORE_HOST, COL_RECONSUME_TIMES,
  COL_PREPARED_TX_OFFSET, COL_BODY_LENGTH, COL_PROPERTIES, COL_MSG_ID, COL_DIR
};

/* idxNum bits that pricing looks at (rmq_tvf_best_index sets them all). */
#define CL_DIR 0x01
#define CL_EQ 0x02

/* Smallest record: the fixed fields with IPv4 hosts, empty body, topic and properties. */
#define MIN_RECORD_SIZE 91

typedef enum row_kind { ROW_MESSAGE, ROW_BLANK, ROW_DAMAGED } row_kind;

/* Where the walk goes after a row. */
typedef enum row_next { NEXT_RECORD, NEXT_FILE } row_next;

typedef struct cl_cursor {
  sqlite3_vtab_cursor base;
  rmq_tvf_dir src;         /* the store read */
  rmq_commitlog *cl;
  bool whole_files;        /* no writer in this process: read each segment to its end */
  rmq_mapped_file *mf;     /* held segment of the current row, or NULL at the end */
  int32_t limit;           /* bytes of mf to read */
  int32_t pos;             /* position of the current row in mf */
  int64_t lo, hi;          /* offset bounds */
  /* the current row */
  row_kind kind;
  row_next next;
  int32_t size;
  bool has_magic;
  int32_t magic;
  rmq_message m;
  bool header;             /* m's header fields were read */
  int crc_ok;              /* -1: not yet computed, 0/1, 2: not checkable */
  char *reason;            /* structural reason (sqlite3_malloc'd), NULL if none */
  char *full_reason;       /* reason with the CRC, for the column */
} cl_cursor;

/* ------------------------------------------------------------ the table */

static int cl_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  bool ready;
  int rc = rmq_tvf_best_index(vt, info, &ready);
  if (rc != SQLITE_OK) return rc;
  int idx = info->idxNum;
  info->estimatedRows = idx & CL_EQ ? 1 : idx != CL_DIR ? 1000 : 100000;
  if (!ready) return SQLITE_OK; /* priced out by rmq_tvf_best_index */
  info->idxStr = idx == CL_DIR ? "scan" : "offset range";
  info->estimatedCost = idx & CL_EQ ? 100 : idx != CL_DIR ? 10000 : 1000000;
  return SQLITE_OK;
}

/* ------------------------------------------------------------ the walk */

static bool all_zero(const uint8_t *p, size_t n) {
  return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

static int32_t file_limit(cl_cursor *c, rmq_mapped_file *mf) {
  return c->whole_files ? mf->file_size : rmq_mapped_file_read_position(mf);
}

/* Hold the segment that starts at from (or the first one, when from was deleted). */
static void enter_file(cl_cursor *c, int64_t from) {
  if (c->mf) rmq_mapped_file_release(c->mf);
  c->mf = rmq_mfq_find(&c->cl->mfq, from);
  if (c->mf == NULL && from < rmq_commitlog_min_offset(c->cl)) c->mf = rmq_mfq_first(&c->cl->mfq);
  c->pos = 0;
  if (c->mf) c->limit = file_limit(c, c->mf);
}

/* Does a segment after the current one start with a record? */
static bool later_file_has_data(cl_cursor *c) {
  int64_t size = c->cl->mfq.file_size;
  for (int64_t from = c->mf->file_from_offset + size;; from += size) {
    rmq_mapped_file *mf = rmq_mfq_find(&c->cl->mfq, from);
    if (mf == NULL) return false;
    bool data = file_limit(c, mf) >= 8 && !all_zero(mf->mapped, 8);
    rmq_mapped_file_release(mf);
    if (data) return true;
  }
}

static void clear_row(cl_cursor *c) {
  sqlite3_free(c->reason);
  sqlite3_free(c->full_reason);
  c->reason = c->full_reason = NULL;
  c->has_magic = c->header = false;
  c->crc_ok = -1;
  memset(&c->m, 0, sizeof c->m);
}

/* A row covering the rest of the segment. */
static void damaged_tail(cl_cursor *c, int32_t avail, char *reason) {
  c->kind = ROW_DAMAGED;
  c->size = avail;
  c->next = NEXT_FILE;
  c->reason = reason;
}

/* The record at message magic whose decode failed with status s. */
static void damaged_record(cl_cursor *c, rmq_decode_status s, int32_t avail) {
  int32_t size = c->m.total_size;
  if (s == RMQ_DECODE_TRUNCATED && (size < MIN_RECORD_SIZE || size > avail)) {
    damaged_tail(c, avail, sqlite3_mprintf("TOTALSIZE %d is impossible: a record takes %d to %d "
                                           "bytes here", (int)size, MIN_RECORD_SIZE, (int)avail));
    return;
  }
  c->kind = ROW_DAMAGED;
  c->size = size;
  c->next = NEXT_RECORD;
  if (s == RMQ_DECODE_BAD_LENGTH) {
    int32_t want = rmq_message_length(c->m.sys_flag, c->m.body_len, c->m.topic_len,
                                      c->m.properties_len, c->m.magic == RMQ_MAGIC_V2);
    c->reason = sqlite3_mprintf("TOTALSIZE %d does not match the record's fields, which take %d "
                                "bytes", (int)size, (int)want);
  } else {
    c->reason = sqlite3_mprintf("the %s runs past TOTALSIZE %d",
                                c->header ? "body, topic or properties" : "header", (int)size);
  }
}

/* Decode the row at c->pos (pos < limit); false at the end of the log. */
static bool read_row(cl_cursor *c) {
  clear_row(c);
  int32_t avail = c->limit - c->pos;
  const uint8_t *p = c->mf->mapped + c->pos;
  bool zero = (avail < 8 || rmq_get32(p + RMQ_POS_MAGIC) == 0) && all_zero(p, (size_t)avail);
  if (avail < 8 || zero) {
    if (zero) {
      /* The end of this segment's data. */
      if (!later_file_has_data(c)) return false;
      damaged_tail(c, avail, sqlite3_mprintf("zero bytes up to the end of the segment where a "
                                             "record or an end-of-file BLANK should be, and "
                                             "later segments hold records"));
    } else {
      damaged_tail(c, avail, sqlite3_mprintf("%d bytes at the end of the segment are too few "
                                             "for a record", (int)avail));
    }
    return true;
  }
  rmq_decode_status s = rmq_message_decode(p, (size_t)avail, false, &c->m);
  c->has_magic = true;
  c->magic = c->m.magic;
  c->header = c->m.body != NULL;
  switch (s) {
    case RMQ_DECODE_OK:
      c->kind = ROW_MESSAGE;
      c->size = c->m.total_size;
      c->next = NEXT_RECORD;
      break;
    case RMQ_DECODE_BLANK:
      c->kind = ROW_BLANK;
      c->size = c->m.total_size;
      c->next = NEXT_FILE;
      c->crc_ok = 2;
      if (c->m.total_size != c->mf->file_size - c->pos || c->m.total_size < 8) {
        c->reason = sqlite3_mprintf("BLANK of %d bytes does not fill the %d bytes left in the "
                                    "segment", (int)c->m.total_size,
                                    (int)(c->mf->file_size - c->pos));
      }
      break;
    case RMQ_DECODE_BAD_MAGIC:
      c->crc_ok = 2;
      damaged_tail(c, avail, sqlite3_mprintf("magic code 0x%08X is neither a message nor a "
                                             "BLANK, and the bytes after it are not all zero",
                                             (unsigned)c->m.magic));
      break;
    default:
      damaged_record(c, s, avail);
      break;
  }
  if (!c->header) c->crc_ok = 2;
  return true;
}

/* Advance past the current row (or start, when mf was just entered at pos 0). */
static void step(cl_cursor *c, bool advance) {
  if (advance) {
    if (c->next == NEXT_FILE) {
      enter_file(c, c->mf->file_from_offset + c->cl->mfq.file_size);
    } else {
      c->pos += c->size;
    }
  }
  while (c->mf) {
    if (c->pos >= c->limit) {
      enter_file(c, c->mf->file_from_offset + c->cl->mfq.file_size);
      continue;
    }
    int64_t offset = c->mf->file_from_offset + c->pos;
    if (offset > c->hi || !read_row(c)) break;
    if (offset >= c->lo) return;
    /* Below the lower bound: skip it without reading more than its header. */
    if (c->next == NEXT_FILE) {
      enter_file(c, c->mf->file_from_offset + c->cl->mfq.file_size);
    } else {
      c->pos += c->size;
    }
  }
  if (c->mf) rmq_mapped_file_release(c->mf);
  c->mf = NULL;
}

/* 1/0 for the body CRC, 2 when there is no body to check. */
static int row_crc_ok(cl_cursor *c) {
  if (c->crc_ok < 0) {
    c->crc_ok = c->m.body_len == 0 ||
                rmq_body_crc(c->m.body, (size_t)c->m.body_len) == c->m.body_crc;
  }
  return c->crc_ok;
}

static bool row_valid(cl_cursor *c) {
  if (c->kind == ROW_BLANK) return c->reason == NULL;
  return c->kind == ROW_MESSAGE && row_crc_ok(c) == 1;
}

static const char *row_reason(cl_cursor *c) {
  if (c->full_reason) return c->full_reason;
  bool crc_bad = c->kind != ROW_BLANK && row_crc_ok(c) == 0;
  if (!crc_bad) return c->reason;
  int32_t computed = rmq_body_crc(c->m.body, (size_t)c->m.body_len);
  c->full_reason = sqlite3_mprintf("%s%sbody CRC %d does not match the stored BODYCRC %d",
                                   c->reason ? c->reason : "", c->reason ? "; " : "",
                                   (int)computed, (int)c->m.body_crc);
  return c->full_reason;
}

/* ------------------------------------------------------------ the cursor */

static int cl_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  (void)vt;
  cl_cursor *c = rmq_tvf_cursor_new(sizeof *c, out);
  if (c == NULL) return SQLITE_NOMEM;
  c->crc_ok = -1;
  return SQLITE_OK;
}

static int cl_close(sqlite3_vtab_cursor *cur) {
  cl_cursor *c = (cl_cursor *)cur;
  clear_row(c);
  if (c->mf) rmq_mapped_file_release(c->mf);
  rmq_tvf_dir_close(&c->src);
  sqlite3_free(c);
  return SQLITE_OK;
}

static int cl_filter(sqlite3_vtab_cursor *cur, int idx, const char *idx_str, int argc,
                     sqlite3_value **argv) {
  (void)idx_str;
  (void)argc;
  cl_cursor *c = (cl_cursor *)cur;
  int rc = rmq_tvf_check_args(cur->pVtab, idx);
  if (rc != SQLITE_OK) return rc;
  /* Let go of the segment before the store it belongs to may be closed. */
  if (c->mf) rmq_mapped_file_release(c->mf);
  c->mf = NULL;
  rc = rmq_tvf_dir_open(&c->src, cur->pVtab, argv[0]);
  if (rc != SQLITE_OK) return rc;
  c->cl = rmq_store_commitlog(c->src.reader.store);
  c->whole_files = rmq_store_config(c->src.reader.store)->readonly;
  c->lo = INT64_MIN;
  c->hi = INT64_MAX;
  rmq_tvf_range(cur->pVtab, idx, argv, &c->lo, &c->hi);
  int64_t min = rmq_commitlog_min_offset(c->cl);
  enter_file(c, c->lo > min ? c->lo - c->lo % c->cl->mfq.file_size : min);
  step(c, false);
  return SQLITE_OK;
}

static int cl_next(sqlite3_vtab_cursor *cur) {
  step((cl_cursor *)cur, true);
  return SQLITE_OK;
}

static int cl_eof(sqlite3_vtab_cursor *cur) { return ((cl_cursor *)cur)->mf == NULL; }

static int cl_rowid(sqlite3_vtab_cursor *cur, sqlite_int64 *rowid) {
  cl_cursor *c = (cl_cursor *)cur;
  *rowid = c->mf->file_from_offset + c->pos;
  return SQLITE_OK;
}

static void result_host(sqlite3_context *ctx, const rmq_host *h) {
  char buf[64];
  rmq_host_format(h, buf, sizeof buf);
  sqlite3_result_text(ctx, buf, -1, SQLITE_TRANSIENT);
}

/* The decoded fields, NULL where the bytes did not reach them. */
static void header_column(cl_cursor *c, sqlite3_context *ctx, int col) {
  const rmq_message *m = &c->m;
  if (!c->header) return;
  switch (col) {
    case COL_TOPIC:
      if (m->topic) sqlite3_result_text(ctx, m->topic, m->topic_len, SQLITE_TRANSIENT);
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
        char *json = rmq_properties_json(m->properties, (size_t)m->properties_len);
        if (json == NULL) {
          sqlite3_result_error_nomem(ctx);
        } else {
          sqlite3_result_text(ctx, json, -1, sqlite3_free);
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

static int cl_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col) {
  cl_cursor *c = (cl_cursor *)cur;
  static const char *const kinds[] = {"message", "blank", "damaged"};
  switch (col) {
    case COL_FILE: {
      char name[21];
      rmq_file_name(c->mf->file_from_offset, name);
      sqlite3_result_text(ctx, name, -1, SQLITE_TRANSIENT);
      break;
    }
    case COL_OFFSET: sqlite3_result_int64(ctx, c->mf->file_from_offset + c->pos); break;
    case COL_SIZE: sqlite3_result_int(ctx, c->size); break;
    case COL_MAGIC:
      if (c->has_magic) sqlite3_result_int(ctx, c->magic);
      break;
    case COL_KIND: sqlite3_result_text(ctx, kinds[c->kind], -1, SQLITE_STATIC); break;
    case COL_VALID: sqlite3_result_int(ctx, row_valid(c)); break;
    case COL_CRC_OK:
      if (c->kind != ROW_BLANK && row_crc_ok(c) != 2) sqlite3_result_int(ctx, row_crc_ok(c));
      break;
    case COL_REASON: {
      const char *r = row_reason(c);
      if (r) sqlite3_result_text(ctx, r, -1, SQLITE_TRANSIENT);
      break;
    }
    case COL_DIR: sqlite3_result_text(ctx, c->src.dir, -1, SQLITE_TRANSIENT); break;
    default: header_column(c, ctx, col); break;
  }
  return SQLITE_OK;
}

static sqlite3_module cl_module = {
    .iVersion = 0,
    .xConnect = rmq_tvf_connect,
    .xBestIndex = cl_best_index,
    .xDisconnect = rmq_tvf_disconnect,
    .xOpen = cl_open,
    .xClose = cl_close,
    .xFilter = cl_filter,
    .xNext = cl_next,
    .xEof = cl_eof,
    .xColumn = cl_column,
    .xRowid = cl_rowid,
};

static const char *const cl_args[] = {"dir"};

static const rmq_tvf cl_tvf = {
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

int rmq_register_commitlog_table(sqlite3 *db) {
  return rmq_tvf_register(db, &cl_module, &cl_tvf);
}
