/*
** batch.c: the rows of one transaction, waiting for COMMIT (rmq_batch in
** rmq.h).
**
** A broker appends each message as it arrives (CommitLog.putMessage) or a
** producer's batch at once (CommitLog.putMessages); a transaction's rows
** arrive one INSERT at a time and must be appended together, at COMMIT. So
** each row is encoded when it is added, as the record the store will
** append (rmq_store_encode), at the end of the batch's block: one of the
** store's staging chunks (staging.h), reused from transaction to
** transaction. A transaction larger than the block goes on in a memory file
** (memfd): the full block is written there, and COMMIT has the store read
** the file back in chunks (rmq_store_put_encoded_file). Its rows never sit
** in fresh memory of this process, whose every page would fault when
** touched; the kernel copies them into and out of the file's pages. A
** record larger than the block is encoded on the heap and written there.
** Appending hands the block (or the file) to the store, which fills in
** offsets and store time. A savepoint mark is the batch's length in bytes
** and rows when the level was opened; rolling back to it cuts the batch
** there. Nothing is allocated per row (the INSERT path is hot).
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io.h"
#include "rmq.h"
#include "store.h"

/* Where the batch ended when a savepoint level was opened. */
typedef struct batch_mark {
  int64_t bytes;
  int count;
} batch_mark;

struct rmq_batch {
  rmq_store *store;
  uint8_t *block;    /* the batch's newest bytes; NULL until the first row */
  size_t used, cap;  /* bytes in the block, and its room */
  bool staged;       /* the block is a staging chunk (else from the heap: a store without) */
  int fd;            /* the memory file, -1 until the batch outgrows the block */
  int64_t spilled;   /* the batch's first bytes, in the file */
  int count;         /* records in the batch */
  bool waits;        /* a row waits for the disk (rmq_message_waits); kept until cleared */
  batch_mark *marks; /* one per open savepoint level */
  int nmarks, marks_cap;
};

rmq_batch *rmq_batch_new(rmq_store *s) {
  rmq_batch *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  b->store = s;
  b->fd = -1;
  return b;
}

static int64_t batch_bytes(const rmq_batch *b) { return b->spilled + (int64_t)b->used; }

/* Append n bytes to the memory file, made when first needed. */
static int file_write(rmq_batch *b, const uint8_t *data, size_t n, rmq_err *err) {
  if (b->fd < 0 && (b->fd = memfd_create("rmq-transaction", MFD_CLOEXEC)) < 0) {
    return rmq_err_set(err, RMQ_ENOMEM, "cannot make a memory file for a transaction's rows: %s",
                       strerror(errno));
  }
  errno = 0; /* a short write sets none */
  if (rmq_io_pwrite(b->fd, data, n, b->spilled) != (ssize_t)n) {
    return rmq_err_set(err, errno == ENOSPC ? RMQ_EFULL : RMQ_ENOMEM,
                       "cannot keep a transaction's rows in a memory file: %s",
                       errno ? strerror(errno) : "short write");
  }
  b->spilled += (int64_t)n;
  return RMQ_OK;
}

/* The block's bytes go to the file: the block is empty again. */
static int spill(rmq_batch *b, rmq_err *err) {
  if (b->used == 0) return RMQ_OK;
  int rc = file_write(b, b->block, b->used, err);
  if (rc == RMQ_OK) b->used = 0;
  return rc;
}

static int take_block(rmq_batch *b, rmq_err *err) {
  b->block = rmq_store_staging_take(b->store);
  b->staged = b->block != NULL;
  if (!b->block && (b->block = malloc(RMQ_STAGING_CHUNK)) == NULL) {
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory for a transaction's rows");
  }
  b->cap = RMQ_STAGING_CHUNK;
  return RMQ_OK;
}

/* A record larger than the block: encoded on the heap, written to the file after the rest. */
static int add_large(rmq_batch *b, const rmq_message *m, int32_t len, rmq_err *err) {
  uint8_t *rec = malloc((size_t)len);
  if (!rec) {
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory for a transaction's record of %d bytes",
                       len);
  }
  int rc = rmq_store_encode(b->store, m, rec, (size_t)len, err) < 0 ? err->code : spill(b, err);
  if (rc == RMQ_OK) rc = file_write(b, rec, (size_t)len, err);
  free(rec);
  return rc;
}

int rmq_batch_add(rmq_batch *b, const rmq_message *m, rmq_err *err) {
  if (!b->block && take_block(b, err) != RMQ_OK) return err->code;
  size_t room = b->cap - b->used;
  int32_t len = rmq_store_encode(b->store, m, b->block + b->used, room, err);
  if (len < 0) return err->code;
  if ((size_t)len > room) {
    int rc = (size_t)len > b->cap ? add_large(b, m, len, err) : spill(b, err);
    if (rc != RMQ_OK) return rc;
    if ((size_t)len <= b->cap) {
      rmq_store_encode(b->store, m, b->block, b->cap, err);
      b->used = (size_t)len;
    }
  } else {
    b->used += (size_t)len;
  }
  b->count++;
  if (!b->waits) b->waits = rmq_message_waits(m);
  return RMQ_OK;
}

int rmq_batch_count(const rmq_batch *b) { return b->count; }

bool rmq_batch_waits(const rmq_batch *b) { return b->waits; }

/* SQLite opens a statement savepoint around every INSERT in a transaction: no realloc each time. */
int rmq_batch_savepoint(rmq_batch *b, int level, rmq_err *err) {
  if (level >= b->marks_cap) {
    int cap = level + 8;
    batch_mark *grown = realloc(b->marks, sizeof *grown * (size_t)cap);
    if (!grown) return rmq_err_set(err, RMQ_ENOMEM, "out of memory for savepoint level %d", level);
    b->marks = grown;
    b->marks_cap = cap;
  }
  batch_mark now = {batch_bytes(b), b->count};
  for (int i = b->nmarks; i < level; i++) b->marks[i] = now;
  b->marks[level] = now;
  b->nmarks = level + 1;
  return RMQ_OK;
}

void rmq_batch_release(rmq_batch *b, int level) {
  if (level < b->nmarks) b->nmarks = level;
}

/* Cut the batch to its first `bytes` bytes and `count` records. */
static void cut(rmq_batch *b, int64_t bytes, int count) {
  if (bytes >= b->spilled) {
    b->used = (size_t)(bytes - b->spilled);
  } else {
    b->spilled = bytes;
    b->used = 0;
  }
  b->count = count;
}

void rmq_batch_rollback_to(rmq_batch *b, int level) {
  if (level >= b->nmarks) return;
  b->nmarks = level + 1;
  cut(b, b->marks[level].bytes, b->marks[level].count);
}

/*
** The open levels stay open, now marking an empty batch, and rows added
** later are still theirs to roll back. The memory file gives its pages back.
*/
void rmq_batch_clear(rmq_batch *b) {
  if (b->spilled > 0 && ftruncate(b->fd, 0) != 0) {
    close(b->fd);
    b->fd = -1;
  }
  cut(b, 0, 0);
  for (int i = 0; i < b->nmarks; i++) b->marks[i] = (batch_mark){0, 0};
  b->waits = false;
}

/*
** end_offset NULL: a put that waits for flush='sync' (unless no row waits);
** else rmq_store_put_encoded_unflushed.
*/
static int append(rmq_batch *b, int64_t *first_offset, int64_t *end_offset, rmq_err *err) {
  *first_offset = -1;
  if (b->count == 0) return RMQ_OK;
  int64_t end = 0;
  bool settle = end_offset == NULL && !b->waits;
  if (settle) end_offset = &end;
  int rc;
  if (b->spilled > 0) {
    rc = spill(b, err);
    if (rc == RMQ_OK) {
      rc = rmq_store_put_encoded_file(b->store, b->fd, b->spilled, b->count, first_offset,
                                      end_offset, err);
    }
  } else {
    rmq_span span = {b->block, b->used};
    rc = end_offset ? rmq_store_put_encoded_unflushed(b->store, &span, 1, b->count, first_offset,
                                                      end_offset, err)
                    : rmq_store_put_encoded(b->store, &span, 1, b->count, first_offset, err);
  }
  if (rc == RMQ_OK && settle) rc = rmq_store_handle_flush(b->store, end, false, err);
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
  if (b->staged) {
    rmq_store_staging_give(b->store, b->block);
  } else {
    free(b->block);
  }
  if (b->fd >= 0) close(b->fd);
  free(b->marks);
  free(b);
}
