/*
** owner_link.h: how a process that opened a store for writing, but does not
** run its services, reaches the process that does (the owner), and takes
** the services over when the owner is gone.
**
** The owner holds the exclusive lock on byte 1 of the store's `lock` file
** (every writer of ours holds a shared lock on byte 0, where a RocketMQ
** broker takes its own, so that a broker and our processes exclude each
** other). Requests go to the socket the shared page names
** (shared_state.h). When no owner answers, or a watcher that looks every
** RMQ_OWNER_WATCH_MS finds byte 1 free, this process tries to become the
** owner itself: take_over opens the store's services here (with the
** recovery a crashed owner calls for) and requests are served in-process
** from then on. Of several processes that try at once, the lock lets one
** win; the others go on sending to it.
*/
#ifndef RMQ_OWNER_LINK_H
#define RMQ_OWNER_LINK_H

#include "remoting_command.h"

#define RMQ_OWNER_WATCH_MS 100
/* How long a request waits for an owner (a new one recovering a large store) before it fails. */
#define RMQ_OWNER_WAIT_MS 30000

typedef struct rmq_owner_link rmq_owner_link;

typedef struct rmq_owner_link_ops {
  /* Become the owner: *owner the services now running here. RMQ_ELOCKED: another process won. */
  int (*take_over)(void *ctx, void **owner, rmq_err *err);
  /* Serve a request in the owner (what the owner's listener does with one from elsewhere). */
  void (*serve)(void *owner, const rmq_remote_request *q, rmq_remote_response *r);
  /* Stop the services taken over (the store is closing in this process). */
  void (*close_owner)(void *owner);
  void *ctx;
} rmq_owner_link_ops;

/* lock_fd: this process's descriptor of `lock` (its shared lock on byte 0). */
int rmq_owner_link_start(const char *dir, int lock_fd, const rmq_owner_link_ops *ops,
                         rmq_owner_link **out, rmq_err *err);
/* Stop watching, and the services if this process took them over. */
void rmq_owner_link_stop(rmq_owner_link *l);

/*
** Carry out q in the owner, wherever it runs; r as rmq_remoting_client_call
** fills it. RMQ_EIO: the owner went away with the request, which it may or
** may not have carried out (the message says so); RMQ_ETIMEOUT: no process
** became the owner within RMQ_OWNER_WAIT_MS; RMQ_ECLOSED: the link stops.
*/
int rmq_owner_link_call(rmq_owner_link *l, const rmq_remote_request *q, rmq_remote_response *r,
                        rmq_err *err);
/* The pid the shared page names as the owner; 0 when it names none. */
int64_t rmq_owner_link_owner_pid(rmq_owner_link *l);
/* The services this process took over, or NULL. */
void *rmq_owner_link_owner(rmq_owner_link *l);

#endif
