/*
** commitlog_iter.c: the commit-log iterator (the contract is in rmq.h).
**
** Next decodes the record at the position, classifies it (message, BLANK,
** damaged with a reason) and remembers how to move past it: by its
** TOTALSIZE, or to the next segment after a BLANK or bytes that cannot be
** trusted. Telling a clean end (zeros) from damage looks at the rest of the
** segment and at the first bytes of the later ones; a strict walk skips
** that, since it stops at the first unsound record anyway.
*/
#include "commitlog_iter.h"

#include <stdio.h>
#include <string.h>

/* Smallest record: the fixed fields with IPv4 hosts, empty body, topic and properties. */
#define MIN_RECORD_SIZE 91

static int32_t segment_limit(rmq_commitlog_iter *it, rmq_mapped_file *mf) {
  return it->flags & RMQ_CL_ITER_WHOLE_SEGMENTS ? mf->file_size : rmq_mapped_file_read_position(mf);
}

/* Hold the segment that starts at from (or the first one, when from was deleted). */
static void enter_segment(rmq_commitlog_iter *it, int64_t from) {
  if (it->mf) rmq_mapped_file_release(it->mf);
  it->mf = rmq_mfq_find(&it->cl->mfq, from);
  if (!it->mf && from < rmq_commitlog_min_offset(it->cl)) it->mf = rmq_mfq_first(&it->cl->mfq);
  it->pos = 0;
  if (!it->mf) return;
  it->limit = segment_limit(it, it->mf);
  if (it->flags & RMQ_CL_ITER_WHOLE_SEGMENTS) rmq_mapped_file_will_read(it->mf);
}

static void next_segment(rmq_commitlog_iter *it) {
  enter_segment(it, it->mf->file_from_offset + it->cl->mfq.file_size);
}

void rmq_cl_iter_start(rmq_commitlog_iter *it, rmq_commitlog *cl, int64_t from, int64_t to,
                       unsigned flags) {
  memset(it, 0, sizeof *it);
  it->cl = cl;
  it->from = from;
  it->to = to;
  it->flags = flags;
  it->lost = -1;
  int64_t min = rmq_commitlog_min_offset(cl);
  enter_segment(it, from > min ? from - from % cl->mfq.file_size : min);
}

void rmq_commitlog_iter_stop(rmq_commitlog_iter *it) {
  if (it->mf) rmq_mapped_file_release(it->mf);
  it->mf = NULL;
}

int64_t rmq_commitlog_iter_expired(const rmq_commitlog_iter *it) {
  if (it->mf && rmq_mapped_file_revoked(it->mf)) return it->mf->file_from_offset;
  return it->lost;
}

static bool all_zero(const uint8_t *p, size_t n) {
  return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/* Does a segment after the current one start with a record? */
static bool later_segment_has_data(rmq_commitlog_iter *it) {
  int64_t size = it->cl->mfq.file_size;
  for (int64_t from = it->mf->file_from_offset + size;; from += size) {
    rmq_mapped_file *mf = rmq_mfq_find(&it->cl->mfq, from);
    if (mf == NULL) return false;
    bool data = segment_limit(it, mf) >= 8 && !all_zero(mf->mapped, 8);
    rmq_mapped_file_release(mf);
    if (data) return true;
  }
}

#define REASON(rec, ...) snprintf((rec)->reason, sizeof(rec)->reason, __VA_ARGS__)

/* A damaged record covering the rest of the segment. */
static void damaged_tail(rmq_commitlog_iter *it, rmq_commitlog_record *rec, int32_t avail) {
  rec->kind = RMQ_RECORD_DAMAGED;
  rec->size = avail;
  it->next_segment = true;
}

/* The record at a message magic whose decode failed with rec->status. */
static void damaged_record(rmq_commitlog_iter *it, rmq_commitlog_record *rec, int32_t avail) {
  int32_t size = rec->m.total_size;
  if (rec->status == RMQ_DECODE_TRUNCATED && (size < MIN_RECORD_SIZE || size > avail)) {
    damaged_tail(it, rec, avail);
    REASON(rec, "TOTALSIZE %d is impossible: a record takes %d to %d bytes here", (int)size,
           MIN_RECORD_SIZE, (int)avail);
    return;
  }
  rec->kind = RMQ_RECORD_DAMAGED;
  rec->size = size;
  if (rec->status == RMQ_DECODE_BAD_CRC) {
    REASON(rec, "body CRC %d does not match the stored BODYCRC %d",
           (int)rmq_body_crc(rec->m.body, (size_t)rec->m.body_len), (int)rec->m.body_crc);
  } else if (rec->status == RMQ_DECODE_BAD_LENGTH) {
    const rmq_message *m = &rec->m;
    REASON(rec, "TOTALSIZE %d does not match the record's fields, which take %d bytes", (int)size,
           (int)rmq_message_length(m->sys_flag, m->body_len, m->topic_len, m->properties_len,
                                   m->magic == RMQ_MAGIC_V2));
  } else {
    REASON(rec, "the %s runs past TOTALSIZE %d",
           rec->header ? "body, topic or properties" : "header", (int)size);
  }
}

/* Fewer than 8 bytes, or zeros: false at the end of the log. */
static bool segment_tail(rmq_commitlog_iter *it, rmq_commitlog_record *rec, int32_t avail,
                         bool zero) {
  rec->status = avail < 8 ? RMQ_DECODE_TRUNCATED : RMQ_DECODE_BAD_MAGIC;
  damaged_tail(it, rec, avail);
  if (!zero) {
    REASON(rec, "%d bytes at the end of the segment are too few for a record", (int)avail);
    return true;
  }
  REASON(rec, "zero bytes up to the end of the segment where a record or an end-of-file "
              "BLANK should be, and later segments hold records");
  return later_segment_has_data(it);
}

static void decoded(rmq_commitlog_iter *it, rmq_commitlog_record *rec, int32_t avail) {
  rec->size = rec->m.total_size;
  switch (rec->status) {
    case RMQ_DECODE_OK: rec->kind = RMQ_RECORD_MESSAGE; break;
    case RMQ_DECODE_BLANK: {
      int32_t left = it->mf->file_size - it->pos;
      rec->kind = RMQ_RECORD_BLANK;
      it->next_segment = true;
      if (rec->m.total_size != left || rec->m.total_size < 8) {
        REASON(rec, "BLANK of %d bytes does not fill the %d bytes left in the segment",
               (int)rec->m.total_size, (int)left);
      }
      break;
    }
    case RMQ_DECODE_BAD_MAGIC:
      damaged_tail(it, rec, avail);
      /* A strict walk does not look at the bytes after it. */
      REASON(rec, "magic code 0x%08X is neither a message nor a BLANK%s", (unsigned)rec->m.magic,
             it->flags & RMQ_CL_ITER_STRICT ? "" : ", and the bytes after it are not all zero");
      break;
    default: damaged_record(it, rec, avail); break;
  }
}

/* Decode the record at it->pos into rec; false at the end of the log. */
static bool read_record(rmq_commitlog_iter *it, rmq_commitlog_record *rec) {
  int32_t avail = it->limit - it->pos;
  const uint8_t *p = it->mf->mapped + it->pos;
  /* Field by field: the decoder clears m, and a reason is rare (the hot path of a scan). */
  rec->segment = it->mf->file_from_offset;
  rec->offset = rec->segment + it->pos;
  rec->has_magic = rec->header = rec->crc_checked = false;
  rec->reason[0] = '\0';
  it->next_segment = false;
  bool strict = it->flags & RMQ_CL_ITER_STRICT;
  if (!strict) {
    bool zero = (avail < 8 || rmq_get32(p + RMQ_POS_MAGIC) == 0) &&
                rmq_mapped_file_all_zero(it->mf, it->pos, it->limit);
    if (avail < 8 || zero) {
      memset(&rec->m, 0, sizeof rec->m);
      return segment_tail(it, rec, avail, zero);
    }
  }
  rec->status = rmq_message_decode(p, (size_t)avail, it->flags & RMQ_CL_ITER_CHECK_CRC, &rec->m);
  rec->has_magic = avail >= 8;
  rec->header = rec->m.body != NULL;
  rec->crc_checked = (it->flags & RMQ_CL_ITER_CHECK_CRC) && rec->header;
  decoded(it, rec, avail);
  return true;
}

/* Move past the record returned last. */
static void advance(rmq_commitlog_iter *it) {
  if (it->last_damaged && (it->flags & RMQ_CL_ITER_STRICT)) {
    rmq_commitlog_iter_stop(it);
  } else if (it->next_segment) {
    next_segment(it);
  } else {
    it->pos += it->last_size;
  }
}

bool rmq_commitlog_iter_next(rmq_commitlog_iter *it, rmq_commitlog_record *rec) {
  /* A segment read whole must end with a BLANK in strict mode: its end is read as a record. */
  bool end_is_record = (it->flags & RMQ_CL_ITER_STRICT) && (it->flags & RMQ_CL_ITER_WHOLE_SEGMENTS);
  if (it->started && it->mf) advance(it);
  it->started = true;
  while (it->mf) {
    /* Expiry took the segment from under a walk held past clean_grace_ms: go on after it. */
    bool revoked = rmq_mapped_file_revoked(it->mf);
    if (revoked && it->lost < 0) it->lost = it->mf->file_from_offset;
    if ((it->pos >= it->limit && !end_is_record) || revoked) {
      next_segment(it);
      continue;
    }
    int64_t offset = it->mf->file_from_offset + it->pos;
    if (offset >= it->to || !read_record(it, rec)) break;
    if (rmq_mapped_file_revoked(it->mf)) continue; /* what was read may be the zeros */
    it->last_damaged = rec->kind == RMQ_RECORD_DAMAGED;
    it->last_size = rec->size;
    /* A strict walk reports damage even below the range: the walk cannot go past it. */
    if (offset >= it->from || (it->last_damaged && (it->flags & RMQ_CL_ITER_STRICT))) return true;
    advance(it); /* below the range: skipped having read no more than its header */
  }
  rmq_commitlog_iter_stop(it);
  return false;
}

int64_t rmq_commitlog_segment_for_time(rmq_commitlog *cl, int64_t ts) {
  int64_t start = rmq_commitlog_min_offset(cl);
  for (int i = 0, n = rmq_mfq_count(&cl->mfq); i < n; i++) {
    rmq_mapped_file *mf = rmq_mfq_get(&cl->mfq, i);
    if (!mf) continue;
    int64_t from = mf->file_from_offset;
    rmq_mapped_file_release(mf);
    int64_t first_ts = rmq_commitlog_time_at(cl, from, 0);
    if (first_ts < 0 || first_ts >= ts) break;
    start = from;
  }
  return start;
}
