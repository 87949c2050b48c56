/*
** remoting_server.c: the owner's listener (see remoting_server.h).
*/
#include "remoting_server.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct connection {
  struct rmq_remoting_server *srv;
  int fd;
  pthread_t thread;
  atomic_bool done; /* its peer went: the thread ends, to be joined */
  struct connection *next;
} connection;

struct rmq_remoting_server {
  int fd;
  pthread_t accept_thread;
  rmq_remoting_handler fn;
  void *ctx;
  pthread_mutex_t mu; /* guards conns and stopping */
  connection *conns;
  bool stopping;
};

socklen_t rmq_remoting_address(const char *name, struct sockaddr_un *addr) {
  memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  size_t n = strnlen(name, sizeof addr->sun_path - 2);
  memcpy(addr->sun_path + 1, name, n);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static void serve_one(connection *c, const rmq_remote_request *q) {
  rmq_remote_response r = {0};
  c->srv->fn(c->srv->ctx, q, &r);
  rmq_err err = {0};
  rmq_remote_send_response(c->fd, &r, &err);
  free(r.results);
  free(r.body);
}

static void *serve(void *arg) {
  connection *c = arg;
  for (;;) {
    rmq_remote_request q;
    uint8_t *body;
    rmq_err err = {0};
    int rc = rmq_remote_read_request(c->fd, &q, &body, &err);
    if (rc == RMQ_OK) serve_one(c, &q);
    free(body);
    if (rc != RMQ_OK) break;
  }
  shutdown(c->fd, SHUT_RDWR);
  atomic_store(&c->done, true);
  return NULL;
}

static void end_connection(connection *c) {
  pthread_join(c->thread, NULL);
  close(c->fd);
  free(c);
}

/* Under mu: join the connections whose peers went (processes that closed the store come and go). */
static void reap_connections(rmq_remoting_server *srv) {
  for (connection **at = &srv->conns; *at;) {
    connection *c = *at;
    if (!atomic_load(&c->done)) {
      at = &c->next;
      continue;
    }
    *at = c->next;
    end_connection(c);
  }
}

/* A new connection and its thread, unless the server stops. */
static void add_connection(rmq_remoting_server *srv, int fd) {
  connection *c = calloc(1, sizeof *c);
  pthread_mutex_lock(&srv->mu);
  reap_connections(srv);
  bool ok = c && !srv->stopping;
  if (ok) {
    *c = (connection){.srv = srv, .fd = fd, .next = srv->conns};
    ok = pthread_create(&c->thread, NULL, serve, c) == 0;
    if (ok) srv->conns = c;
  }
  pthread_mutex_unlock(&srv->mu);
  if (!ok) {
    close(fd);
    free(c);
  }
}

bool rmq_remoting_peer_allowed(int fd) {
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  return cred.uid == geteuid() || cred.uid == 0;
}

static void *accept_loop(void *arg) {
  rmq_remoting_server *srv = arg;
  for (;;) {
    int fd = accept4(srv->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0 && !rmq_remoting_peer_allowed(fd)) {
      close(fd);
      continue;
    }
    if (fd >= 0) {
      add_connection(srv, fd);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    pthread_mutex_lock(&srv->mu);
    bool stopping = srv->stopping;
    pthread_mutex_unlock(&srv->mu);
    if (stopping) return NULL;
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      usleep(10000); /* out of descriptors for now: others close theirs */
      continue;
    }
    return NULL;
  }
}

int rmq_remoting_server_start(const char *name, rmq_remoting_handler fn, void *ctx,
                              rmq_remoting_server **out, rmq_err *err) {
  *out = NULL;
  rmq_remoting_server *srv = calloc(1, sizeof *srv);
  if (!srv) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  srv->fn = fn;
  srv->ctx = ctx;
  pthread_mutex_init(&srv->mu, NULL);
  struct sockaddr_un addr;
  socklen_t len = rmq_remoting_address(name, &addr);
  srv->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int rc = RMQ_OK;
  if (srv->fd < 0 || bind(srv->fd, (struct sockaddr *)&addr, len) != 0 ||
      listen(srv->fd, 64) != 0) {
    rc = rmq_err_set(err, RMQ_EIO, "cannot listen on @%s for the store's other processes: %s", name,
                     strerror(errno));
  } else if (pthread_create(&srv->accept_thread, NULL, accept_loop, srv) != 0) {
    rc = rmq_err_set(err, RMQ_ENOMEM, "cannot start the listener's thread");
  }
  if (rc != RMQ_OK) {
    if (srv->fd >= 0) close(srv->fd);
    pthread_mutex_destroy(&srv->mu);
    free(srv);
    return rc;
  }
  *out = srv;
  return RMQ_OK;
}

void rmq_remoting_server_stop(rmq_remoting_server *srv) {
  if (!srv) return;
  pthread_mutex_lock(&srv->mu);
  srv->stopping = true;
  for (connection *c = srv->conns; c; c = c->next) shutdown(c->fd, SHUT_RD);
  pthread_mutex_unlock(&srv->mu);
  /* Wakes accept (EINVAL) on Linux. */
  shutdown(srv->fd, SHUT_RDWR);
  pthread_join(srv->accept_thread, NULL);
  close(srv->fd);
  /* No thread adds a connection any more. */
  for (connection *c = srv->conns, *next; c; c = next) {
    next = c->next;
    end_connection(c);
  }
  pthread_mutex_destroy(&srv->mu);
  free(srv);
}

void rmq_remoting_server_drop_inherited(rmq_remoting_server *srv) {
  if (!srv) return;
  close(srv->fd);
  for (connection *c = srv->conns; c; c = c->next) close(c->fd);
}
