/*
** remoting_command.h: the requests another process of this machine sends
** to a store's owner, and the owner's responses (RocketMQ's
** RemotingCommand, reduced to what a store's writers ask of its owner).
**
** The owner is the one process that runs the store's services; every other
** process that opened the store for writing sends it what changes the
** store: its appends (SEND_BATCH_MESSAGE), its waits for them to be durable,
** consumer offsets (UPDATE_CONSUMER_OFFSET), messages given back
** (CONSUMER_SEND_MSG_BACK), flush and clean; or it joins, and then appends
** itself under the shared put lock (shared_log.h), sending the puts the
** owner must make (a roll). Both ends are processes of one
** machine built from one source, so the frames are the structs' bytes.
**
** A request: its fixed part, then group and topic (their lengths in the
** fixed part, no NUL), then body_len bytes of whole encoded records (PUT).
** A response: its fixed part, then msg_len bytes of the error's message,
** then `results` rmq_remote_result entries (a PUT that asked for them),
** then body_len bytes of body (JOIN).
*/
#ifndef RMQ_REMOTING_COMMAND_H
#define RMQ_REMOTING_COMMAND_H

#include <stddef.h>
#include <stdint.h>

#include "rmq.h"

typedef enum rmq_request_code {
  RMQ_REQUEST_PUT = 1,       /* records; count; flags; -> a first offset, b end offset */
  RMQ_REQUEST_WAIT_DURABLE,  /* offset: the end to wait for; flags */
  RMQ_REQUEST_COMMIT_OFFSET, /* group, topic, count: queue id, offset */
  RMQ_REQUEST_SEND_BACK,     /* group, offset: the message's; -> a the new record's offset */
  RMQ_REQUEST_FLUSH,         /* -> a the flushed offset */
  RMQ_REQUEST_CLEAN,         /* -> a files deleted */
  RMQ_REQUEST_JOIN,          /* the sender appends itself (shared_log.h); -> a the log's end, body
                                the queue offsets there (rmq_commitlog_queue_offsets) */
  RMQ_REQUEST_CODE_END
} rmq_request_code;

/* flags of PUT and WAIT_DURABLE */
#define RMQ_REQUEST_SYNC 1    /* return once durable: the sender's flush='sync' */
#define RMQ_REQUEST_NOWAIT 2  /* PUT: return once appended; WAIT_DURABLE follows */
#define RMQ_REQUEST_RESULTS 4 /* PUT: send each record's queue offset and store time back */

typedef struct rmq_remote_request {
  int32_t code;
  int32_t count;
  int32_t flags;
  int64_t offset;
  char group[RMQ_MAX_GROUP_LEN + 1];
  char topic[RMQ_MAX_TOPIC_LEN + 1];
  const rmq_span *spans; /* sending: the records, in pieces */
  int nspans;
  const uint8_t *body; /* received: the records, whole */
  size_t body_len;
  int32_t timeout_ms; /* sending: how long the sender waits for the answer; 0: no limit */
} rmq_remote_request;

/* What a PUT's response says of each record, when asked. */
typedef struct rmq_remote_result {
  int64_t queue_offset;
  int64_t store_timestamp;
} rmq_remote_result;

typedef struct rmq_remote_response {
  int32_t rc;
  int64_t a, b;
  char msg[sizeof(((rmq_err *)0)->msg)];
  rmq_remote_result *results; /* malloc'd by the receiver, count entries */
  int32_t results_count;
  int32_t flags; /* RMQ_RESPONSE_* */
  uint8_t *body; /* JOIN: the owner's queue offsets; malloc'd (the receiver frees it) */
  size_t body_len;
} rmq_remote_response;

/* The owner flushes synchronously or is a sync_master: a put's caller waits (WAIT_DURABLE). */
#define RMQ_RESPONSE_OWNER_WAITS 1

/* The longest name of an owner's socket. */
#define RMQ_REMOTE_NAME_MAX 96

/* The largest request body: a transaction of records, one segment at most. */
#define RMQ_REMOTE_BODY_MAX ((size_t)1 << 31)

/*
** Send a request on a connected socket. RMQ_EIO (errno's text) when the
** peer is gone.
*/
int rmq_remote_send_request(int fd, const rmq_remote_request *q, rmq_err *err);
/*
** Read one request; *body is malloc'd (q->body points into it), freed by the
** caller. RMQ_ENOTFOUND at a clean end of the stream (the peer closed);
** RMQ_EIO, RMQ_ECORRUPT (a frame no sender of ours writes), RMQ_ENOMEM.
*/
int rmq_remote_read_request(int fd, rmq_remote_request *q, uint8_t **body, rmq_err *err);
int rmq_remote_send_response(int fd, const rmq_remote_response *r, rmq_err *err);
/* As rmq_remote_read_request; r->results malloc'd when results_count > 0. */
int rmq_remote_read_response(int fd, rmq_remote_response *r, rmq_err *err);

#endif
