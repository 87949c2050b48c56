/*
** checkpoint.h: StoreCheckpoint.
**
** A 4096-byte file mapped read-write holding three big-endian int64 store
** timestamps: physicMsgTimestamp at 0 (last record known flushed in the
** CommitLog), logicsMsgTimestamp at 8 (last record written to a consume
** queue), indexMsgTimestamp at 16 (end of the last index file that became
** full and was flushed). The in-memory values are atomics that any service
** may update; rmq_checkpoint_flush() writes all three and msyncs the page.
** getMinTimestamp = max(0, min(physic, logics) - 3000) picks the start
** segment of abnormal recovery.
*/
#ifndef RMQ_CHECKPOINT_H
#define RMQ_CHECKPOINT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "rmq.h"

#define RMQ_CHECKPOINT_SIZE 4096

typedef struct rmq_checkpoint {
  char *path;
  int fd;
  uint8_t *mapped; /* NULL when read from a read-only store */
  _Atomic int64_t physic_msg_timestamp;
  _Atomic int64_t logics_msg_timestamp;
  _Atomic int64_t index_msg_timestamp;
} rmq_checkpoint;

/* Open (creating when writable) <dir>/checkpoint and read its values. */
int rmq_checkpoint_open(rmq_checkpoint *cp, const char *dir, bool writable, rmq_err *err);
int rmq_checkpoint_flush(rmq_checkpoint *cp, rmq_err *err);
void rmq_checkpoint_close(rmq_checkpoint *cp);

int64_t rmq_checkpoint_min_timestamp(rmq_checkpoint *cp);

#endif
