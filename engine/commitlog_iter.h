/*
** commitlog_iter.h: the commit-log iterator, interface to code in
** commitlog_iter.c.
**
** Every reader that walks the CommitLog record by record goes through it:
** recovery (CommitLog.recoverNormally / recoverAbnormally), the
** rocketmq_commitlog table and the rocketmq table's scans. The walk starts
** at the segment that holds `from` (records are found only by walking a
** segment from its start), returns the records that start in [from, to)
** and goes on to the next segment after a BLANK or at the end of a
** segment's data. It holds the segment it reads (reference counted) from
** one Next to the next, so a record's bytes stay mapped until then, and it
** never trusts a length field: every one is checked against the bytes that
** exist (rmq_message_decode).
*/
#ifndef RMQ_COMMITLOG_ITER_H
#define RMQ_COMMITLOG_ITER_H

#include "commitlog.h"

/*
** Read each segment to its end, not to what the writer published: the files
** as they are (a read-only store, recovery); segments are read ahead.
*/
#define RMQ_CL_ITER_WHOLE_SEGMENTS 0x1
/* Check each message's body CRC as it is decoded (checkCRCOnRecover). */
#define RMQ_CL_ITER_CHECK_CRC 0x2
/*
** Stop at the first record that is not sound: it is returned as damaged
** with the decoder's verdict, and nothing after it is looked at; a segment
** read whole must end with a BLANK, as in RocketMQ's recovery.
*/
#define RMQ_CL_ITER_STRICT 0x4

typedef enum rmq_record_kind {
  RMQ_RECORD_MESSAGE, /* a message; with a bad CRC, m.body_crc tells (unless CHECK_CRC) */
  RMQ_RECORD_BLANK,   /* the end-of-segment filler; the walk goes on in the next segment */
  RMQ_RECORD_DAMAGED  /* bytes that are not a sound record; reason says why */
} rmq_record_kind;

/* One record as Next returns it; its pointers are valid until the next Next or Stop. */
typedef struct rmq_commitlog_record {
  rmq_record_kind kind;
  rmq_decode_status status; /* the decoder's verdict (OK, BLANK, or why it failed) */
  int64_t offset;           /* physical offset where the record starts */
  int64_t segment;          /* start offset of its segment, the file's name */
  int32_t size;             /* TOTALSIZE; for a BLANK the bytes it fills; for damage the
                               bytes the record covers (to the segment's end when its
                               TOTALSIZE cannot be trusted) */
  bool has_magic;           /* 8 bytes or more were there: m.magic is MAGICCODE */
  bool header;              /* the header fields of m were read */
  bool crc_checked;         /* RMQ_CL_ITER_CHECK_CRC and the body was read */
  rmq_message m;            /* the decoded fields, as far as the bytes go */
  char reason[192];         /* why a BLANK or damaged record is unsound, "" otherwise */
} rmq_commitlog_record;

/* Caller-allocated; its fields are private to commitlog_iter.c. */
typedef struct rmq_commitlog_iter {
  rmq_commitlog *cl;
  rmq_mapped_file *mf;     /* the held segment, NULL at the end */
  int32_t pos, limit;      /* next record's position in mf; bytes of mf to read */
  int64_t from, to;
  unsigned flags;
  bool started;            /* a record was returned: Next moves past it first */
  bool next_segment;       /* the last record ends its segment's data */
  bool last_damaged;
  int32_t last_size;
} rmq_commitlog_iter;

/* Start a walk of cl over the records that start in [from, to). */
void rmq_cl_iter_start(rmq_commitlog_iter *it, rmq_commitlog *cl, int64_t from, int64_t to,
                       unsigned flags);
/* The next record into *rec; false at the end of the walk (the segment is let go). */
bool rmq_commitlog_iter_next(rmq_commitlog_iter *it, rmq_commitlog_record *rec);
/* Let go of the held segment; the iterator may be started again. */
void rmq_commitlog_iter_stop(rmq_commitlog_iter *it);

/*
** Where records stored at or after ts can start: the last segment whose
** first record was stored before ts (the first segment when none was).
** Not "at or before": many records share a millisecond, so the segment
** before one that starts at ts can end with records of ts.
*/
int64_t rmq_commitlog_segment_for_time(rmq_commitlog *cl, int64_t ts);

#endif
