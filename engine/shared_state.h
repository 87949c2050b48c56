/*
** shared_state.h: what the processes that have one store open agree on,
** in <dir>/sqlite-rocketmq.shm, a file of our own that RocketMQ ignores.
**
** One process at a time runs the store's services: the owner, which holds
** the exclusive lock on byte 1 of `lock`. It writes this page; every other
** process maps it read-only (a readonly=1 reader never writes a byte):
**
**   magic, version  "sqlite-rocketmq" and 1; another value is a stale
**                   page, which the next owner writes again.
**   seq             bumped after dispatch progress (at most every
**                   millisecond under load, and before the dispatcher
**                   sleeps), after a clean pass that deleted files, and at
**                   each change of owner: a reader whose last look saw the
**                   same seq knows the files hold nothing new for it. It is
**                   a futex word: long polls in any process sleep on it.
**   epoch           bumped at each change of owner (its recovery may cut
**                   what a dead owner left half written).
**   owner_pid       the owner, 0 when none runs (closed cleanly).
**   dispatched      everything before this commit-log offset is in the
**                   consume queues and the index.
**   socket          the abstract Unix socket the owner takes writes on.
**   boot_id         the kernel's: a page written before a reboot is stale.
**   log             the CommitLog's put lock and end (shared_log.h), which
**                   the owner and followers that append themselves share.
**
** Nothing here is trusted that the store's files cannot give again: an
** owner that opens alone (no other process has the store open for
** writing), or finds a page of another version or boot, writes it anew and
** sets the log's end from its own recovery, so a missing, truncated or
** foreign file is rebuilt, never believed.
*/
#ifndef RMQ_SHARED_STATE_H
#define RMQ_SHARED_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "rmq.h"
#include "shared_log.h"

#define RMQ_SHARED_STATE_FILE "sqlite-rocketmq.shm"
#define RMQ_SHARED_SOCKET_MAX 96

typedef struct rmq_shared_state rmq_shared_state;

/*
** A writer maps the page writable, before its recovery (the put lock guards
** it). The owner (owner) writes it anew when alone or when it is not a valid
** page of this boot; a follower gets *out NULL (RMQ_OK) when it is not one.
*/
int rmq_shared_state_attach(const char *dir, bool owner, bool alone, rmq_shared_state **out,
                            rmq_err *err);
/* The open owner: its socket and dispatch on the page; epoch bumped, owner_pid this process. */
void rmq_shared_state_own(rmq_shared_state *st, const char *socket_name, int64_t dispatched);
rmq_shared_log *rmq_shared_state_log(rmq_shared_state *st);
/*
** Any other process: map the page read-only. *out NULL (and RMQ_OK) when the
** file is missing or not a page of ours: a store no owner of ours has run
** (a broker's), which readers follow by polling its files instead.
*/
int rmq_shared_state_open(const char *dir, rmq_shared_state **out, rmq_err *err);
/* The owner's close marks the page ownerless (owner_pid 0) and wakes every sleeper. */
void rmq_shared_state_close(rmq_shared_state *st);

/* The owner: dispatch reached `dispatched`, or files were deleted; wakes sleepers. */
void rmq_shared_state_publish(rmq_shared_state *st, int64_t dispatched);

uint32_t rmq_shared_state_seq(const rmq_shared_state *st);
int64_t rmq_shared_state_epoch(const rmq_shared_state *st);
int64_t rmq_shared_state_dispatched(const rmq_shared_state *st);
int32_t rmq_shared_state_owner(const rmq_shared_state *st);
/* The owner's socket name (abstract namespace, without the leading NUL), "" when none. */
void rmq_shared_state_socket(const rmq_shared_state *st, char *out, size_t cap);

/* Sleep until seq is no longer `seen`, at most timeout_ms; false on timeout. */
bool rmq_shared_state_wait(const rmq_shared_state *st, uint32_t seen, int timeout_ms);

#endif
