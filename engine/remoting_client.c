/*
** remoting_client.c: requests to the store's owner (see remoting_client.h).
*/
#include "remoting_client.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "remoting_server.h"

#define KEPT_MAX 8

struct rmq_remoting_client {
  pthread_mutex_t mu; /* guards kept and name */
  int kept[KEPT_MAX];
  int nkept;
  char name[RMQ_REMOTE_NAME_MAX];
};

rmq_remoting_client *rmq_remoting_client_new(void) {
  rmq_remoting_client *c = calloc(1, sizeof *c);
  if (c) pthread_mutex_init(&c->mu, NULL);
  return c;
}

static void drop_kept(rmq_remoting_client *c) {
  while (c->nkept > 0) close(c->kept[--c->nkept]);
}

void rmq_remoting_client_reset(rmq_remoting_client *c) {
  pthread_mutex_lock(&c->mu);
  drop_kept(c);
  pthread_mutex_unlock(&c->mu);
}

void rmq_remoting_client_free(rmq_remoting_client *c) {
  if (!c) return;
  drop_kept(c);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* A kept connection to name, or a new one; -1 with RMQ_ENOTFOUND when none listens. */
static int take(rmq_remoting_client *c, const char *name, rmq_err *err) {
  pthread_mutex_lock(&c->mu);
  if (strcmp(c->name, name) != 0) {
    drop_kept(c);
    snprintf(c->name, sizeof c->name, "%s", name);
  }
  int fd = c->nkept > 0 ? c->kept[--c->nkept] : -1;
  pthread_mutex_unlock(&c->mu);
  if (fd >= 0) return fd;
  struct sockaddr_un addr;
  socklen_t len = rmq_remoting_address(name, &addr);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, len) == 0) {
    if (rmq_remoting_peer_allowed(fd)) return fd;
    /* Another user's process holds the name: as good as no owner, and never sent a byte. */
    rmq_err_set(err, RMQ_ENOTFOUND,
                "no owner listens on @%s: a process of another user holds the name", name);
  } else {
    rmq_err_set(err, RMQ_ENOTFOUND, "no owner listens on @%s: %s", name, strerror(errno));
  }
  if (fd >= 0) close(fd);
  return -1;
}

static void give(rmq_remoting_client *c, const char *name, int fd) {
  pthread_mutex_lock(&c->mu);
  bool keep = c->nkept < KEPT_MAX && strcmp(c->name, name) == 0;
  if (keep) c->kept[c->nkept++] = fd;
  pthread_mutex_unlock(&c->mu);
  if (!keep) close(fd);
}

/* The request's bound on both directions of fd (0: none): a stopped owner ends the call. */
static void set_timeout(int fd, int32_t ms) {
  struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

int rmq_remoting_client_call(rmq_remoting_client *c, const char *name, const rmq_remote_request *q,
                             rmq_remote_response *r, rmq_err *err) {
  int fd = take(c, name, err);
  if (fd < 0) return RMQ_ENOTFOUND;
  set_timeout(fd, q->timeout_ms);
  rmq_err why = {0};
  int rc = rmq_remote_send_request(fd, q, &why);
  if (rc != RMQ_OK && rc != RMQ_ETIMEOUT) {
    rc = RMQ_ENOTFOUND; /* a request the owner did not have whole is one it never acted on */
  } else if (rc == RMQ_OK) {
    rc = rmq_remote_read_response(fd, r, &why);
    if (rc != RMQ_OK && rc != RMQ_ETIMEOUT) rc = RMQ_EIO;
  }
  if (rc != RMQ_OK) close(fd);
  if (rc == RMQ_ETIMEOUT) {
    return rmq_err_set(err, RMQ_ETIMEOUT,
                       "the store's owner did not answer within %d ms (it may be stopped); "
                       "the request may or may not have been carried out",
                       q->timeout_ms);
  }
  if (rc != RMQ_OK) return rmq_err_set(err, rc, "%s", why.msg);
  give(c, name, fd);
  return RMQ_OK;
}
