/*
** remoting_server.h: the owner's listener for the store's other processes
** (RocketMQ's NettyRemotingServer, on an abstract Unix socket).
**
** One thread accepts, one thread serves each connection: it reads a
** request, hands it to the handler and writes the response, in order. The
** handler runs in the connection's thread, so one process's slow request
** (a put waiting to be durable) never holds up another's. Only processes
** of the same user, or root, are served (SO_PEERCRED): an abstract socket
** has no file permissions.
*/
#ifndef RMQ_REMOTING_SERVER_H
#define RMQ_REMOTING_SERVER_H

#include <sys/socket.h>
#include <sys/un.h>

#include "remoting_command.h"

typedef struct rmq_remoting_server rmq_remoting_server;

/* Serve request q: fill r (rc, a, b, msg; results malloc'd, freed by the server). */
typedef void (*rmq_remoting_handler)(void *ctx, const rmq_remote_request *q,
                                     rmq_remote_response *r);

/*
** Listen on the abstract socket `name` (no leading NUL; at most 100 bytes).
** RMQ_EIO when it cannot (the name taken: another owner of the same store).
*/
int rmq_remoting_server_start(const char *name, rmq_remoting_handler fn, void *ctx,
                              rmq_remoting_server **out, rmq_err *err);
/* Stop listening, end every connection (a request in a handler finishes first) and free. */
void rmq_remoting_server_stop(rmq_remoting_server *srv);
/*
** In a forked child: close the descriptors inherited from the parent's
** server (its threads did not come along), so that the parent's listener
** and connections end when the parent closes them.
*/
void rmq_remoting_server_drop_inherited(rmq_remoting_server *srv);
/*
** An abstract socket has no file permissions: any local process can reach
** it, or bind a name first. The peer on fd is trusted only when it runs as
** this user (or root), which could write the store's files itself: the
** owner serves only such peers, and a follower talks only to such an owner.
*/
bool rmq_remoting_peer_allowed(int fd);
/* Abstract socket address of name; its length for bind/connect. */
socklen_t rmq_remoting_address(const char *name, struct sockaddr_un *addr);

#endif
