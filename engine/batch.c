/*
** batch.c: the rows of one transaction, waiting for COMMIT (rmq_batch in
** rmq.h).
**
** A broker appends each message as it arrives (CommitLog.putMessage) or a
** producer's batch at once (CommitLog.putMessages); a transaction's rows
** arrive one INSERT at a time and must be appended together, at COMMIT. So
** each row is encoded when it is added, as the record the store will
** append (rmq_store_encode), at the end of the newest block; blocks are the
** store's staging chunks, whose pages its allocation thread mapped in ahead
** (staging.h), or a malloc'd block for a record larger than a chunk.
** Appending hands the blocks to rmq_store_put_encoded as spans: one copy,
** the store filling in offsets and store time. A savepoint mark is where
** the batch ended when the level was opened; rolling back to it gives back
** the newer blocks and cuts the one it names. Nothing is allocated per row
** (the INSERT path is hot), and one chunk is kept, emptied, for the next
** transaction.
*/
#include <stdlib.h>

#include "rmq.h"
#include "store.h"

typedef struct batch_block {
  struct batch_block *next; /* the block before it */
  size_t used, cap;
  uint8_t data[];
} batch_block;

/* Room in a block made of a staging chunk. */
#define STAGED_CAP (RMQ_STAGING_CHUNK - sizeof(batch_block))

/* Where the batch ended when a savepoint level was opened. */
typedef struct batch_mark {
  batch_block *block; /* the newest block then, NULL if none */
  size_t used;
  int count;
} batch_mark;

struct rmq_batch {
  rmq_store *store;
  batch_block *blocks; /* the newest first */
  int count;           /* records in the blocks */
  batch_mark *marks;   /* one per open savepoint level */
  int nmarks, marks_cap;
};

/* Spans an append passes without allocating (a transaction of up to 4 chunks). */
#define LOCAL_SPANS 4

rmq_batch *rmq_batch_new(rmq_store *s) {
  rmq_batch *b = calloc(1, sizeof *b);
  if (b) b->store = s;
  return b;
}

static batch_block *block_push(rmq_batch *b, size_t n) {
  bool staged = n <= STAGED_CAP;
  batch_block *blk = staged ? rmq_store_staging_take(b->store) : malloc(sizeof *blk + n);
  if (!blk) return NULL;
  blk->used = 0;
  blk->cap = staged ? STAGED_CAP : n;
  blk->next = b->blocks;
  b->blocks = blk;
  return blk;
}

static void block_pop(rmq_batch *b) {
  batch_block *blk = b->blocks;
  b->blocks = blk->next;
  if (blk->cap == STAGED_CAP) {
    rmq_store_staging_give(b->store, blk);
  } else {
    free(blk);
  }
}

/* Give every block back; with keep_one, the newest staging chunk stays, emptied. */
static void blocks_clear(rmq_batch *b, bool keep_one) {
  batch_block *kept = NULL;
  while (b->blocks) {
    if (keep_one && !kept && b->blocks->cap == STAGED_CAP) {
      kept = b->blocks;
      b->blocks = kept->next;
    } else {
      block_pop(b);
    }
  }
  if (kept) {
    kept->next = NULL;
    kept->used = 0;
  }
  b->blocks = kept;
  b->count = 0;
}

int rmq_batch_add(rmq_batch *b, const rmq_message *m, rmq_err *err) {
  batch_block *blk = b->blocks;
  size_t room = blk ? blk->cap - blk->used : 0;
  int32_t len = rmq_store_encode(b->store, m, blk ? blk->data + blk->used : NULL, room, err);
  if (len > 0 && (size_t)len > room) {
    if ((blk = block_push(b, (size_t)len)) == NULL) {
      return rmq_err_set(err, RMQ_ENOMEM, "out of memory for a transaction's record of %d bytes",
                         len);
    }
    len = rmq_store_encode(b->store, m, blk->data, blk->cap, err);
  }
  if (len < 0) return err->code;
  blk->used += (size_t)len;
  b->count++;
  return RMQ_OK;
}

int rmq_batch_count(const rmq_batch *b) { return b->count; }

/* SQLite opens a statement savepoint around every INSERT in a transaction: no realloc each time. */
int rmq_batch_savepoint(rmq_batch *b, int level, rmq_err *err) {
  if (level >= b->marks_cap) {
    int cap = level + 8;
    batch_mark *grown = realloc(b->marks, sizeof *grown * (size_t)cap);
    if (!grown) return rmq_err_set(err, RMQ_ENOMEM, "out of memory for savepoint level %d", level);
    b->marks = grown;
    b->marks_cap = cap;
  }
  batch_mark now = {b->blocks, b->blocks ? b->blocks->used : 0, b->count};
  for (int i = b->nmarks; i < level; i++) b->marks[i] = now;
  b->marks[level] = now;
  b->nmarks = level + 1;
  return RMQ_OK;
}

void rmq_batch_release(rmq_batch *b, int level) {
  if (level < b->nmarks) b->nmarks = level;
}

void rmq_batch_rollback_to(rmq_batch *b, int level) {
  if (level >= b->nmarks) return;
  const batch_mark *m = &b->marks[level];
  b->nmarks = level + 1;
  if (!m->block) {
    blocks_clear(b, true);
    return;
  }
  while (b->blocks != m->block) block_pop(b);
  m->block->used = m->used;
  b->count = m->count;
}

/*
** The open levels stay open, now marking an empty batch: their blocks may
** be gone, and rows added later are still theirs to roll back.
*/
void rmq_batch_clear(rmq_batch *b) {
  blocks_clear(b, true);
  for (int i = 0; i < b->nmarks; i++) b->marks[i] = (batch_mark){NULL, 0, 0};
}

/* end_offset NULL: a put that waits for flush='sync'; else rmq_store_put_encoded_unflushed. */
static int append(rmq_batch *b, int64_t *first_offset, int64_t *end_offset, rmq_err *err) {
  *first_offset = -1;
  if (b->count == 0) return RMQ_OK;
  int n = 0;
  for (batch_block *blk = b->blocks; blk; blk = blk->next) n += blk->used > 0;
  rmq_span local[LOCAL_SPANS] = {{0}};
  rmq_span *spans = n <= LOCAL_SPANS ? local : malloc(sizeof *spans * (size_t)n);
  if (!spans) return rmq_err_set(err, RMQ_ENOMEM, "out of memory for a batch of %d blocks", n);
  int i = n;
  for (batch_block *blk = b->blocks; blk; blk = blk->next) {
    if (blk->used > 0) spans[--i] = (rmq_span){blk->data, blk->used};
  }
  int rc = end_offset ? rmq_store_put_encoded_unflushed(b->store, spans, n, b->count, first_offset,
                                                        end_offset, err)
                      : rmq_store_put_encoded(b->store, spans, n, b->count, first_offset, err);
  if (spans != local) free(spans);
  /* Appended, even if its flush or a slave's ack then failed: never again. */
  if (rc == RMQ_OK || *first_offset >= 0) rmq_batch_clear(b);
  return rc;
}

int rmq_batch_append(rmq_batch *b, int64_t *first_offset, rmq_err *err) {
  return append(b, first_offset, NULL, err);
}

int rmq_batch_append_unflushed(rmq_batch *b, int64_t *first_offset, int64_t *end_offset,
                               rmq_err *err) {
  return append(b, first_offset, end_offset, err);
}

void rmq_batch_free(rmq_batch *b) {
  if (!b) return;
  blocks_clear(b, false);
  free(b->marks);
  free(b);
}
