/*
** remoting_client.h: a process's requests to its store's owner (RocketMQ's
** NettyRemotingClient): a few connections to the owner's socket, each used
** by one request at a time, kept for the next.
*/
#ifndef RMQ_REMOTING_CLIENT_H
#define RMQ_REMOTING_CLIENT_H

#include "remoting_command.h"

typedef struct rmq_remoting_client rmq_remoting_client;

rmq_remoting_client *rmq_remoting_client_new(void);
void rmq_remoting_client_free(rmq_remoting_client *c);

/*
** Send q to the owner listening on the abstract socket `name` and read its
** response into r (r->results malloc'd, the caller frees). RMQ_ENOTFOUND:
** no owner took the request (none listens, or the connection was gone
** before the request was whole): it was not acted on, and may be sent again.
** RMQ_EIO: the owner went away after it had the request, which it may or
** may not have carried out. Otherwise RMQ_OK, with the owner's answer in r.
*/
int rmq_remoting_client_call(rmq_remoting_client *c, const char *name, const rmq_remote_request *q,
                             rmq_remote_response *r, rmq_err *err);
/* Drop the kept connections (the owner changed). */
void rmq_remoting_client_reset(rmq_remoting_client *c);

#endif
