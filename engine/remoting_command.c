/*
** remoting_command.c: requests and responses on a Unix stream socket (see
** remoting_command.h).
*/
#include "remoting_command.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define REQUEST_MAGIC 0x524d5131u  /* "RMQ1" */
#define RESPONSE_MAGIC 0x524d5132u /* "RMQ2" */

typedef struct request_head {
  uint32_t magic;
  int32_t code, count, flags;
  int64_t offset;
  uint16_t group_len, topic_len;
  uint64_t body_len;
} request_head;

typedef struct response_head {
  uint32_t magic;
  int32_t rc;
  int64_t a, b;
  uint32_t msg_len;
  int32_t results_count;
  int32_t flags;
  uint64_t body_len;
} response_head;

/* Writes every byte of iov (MSG_NOSIGNAL: a gone peer is an error, not SIGPIPE). */
static int send_all(int fd, struct iovec *iov, int n, rmq_err *err) {
  while (n > 0) {
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)(n < IOV_MAX ? n : IOV_MAX)};
    ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return rmq_err_set(err, RMQ_ETIMEOUT, "the peer took nothing in time");
    }
    if (w < 0)
      return rmq_err_set(err, RMQ_EIO, "cannot send to the store's owner: %s", strerror(errno));
    size_t left = (size_t)w;
    for (; n > 0 && left >= iov->iov_len; iov++, n--) left -= iov->iov_len;
    if (n > 0) {
      iov->iov_base = (char *)iov->iov_base + left;
      iov->iov_len -= left;
    }
  }
  return RMQ_OK;
}

/* Reads len bytes. RMQ_ENOTFOUND when the stream ends before the first byte, RMQ_EIO after it. */
static int recv_all(int fd, void *buf, size_t len, bool first, rmq_err *err) {
  for (size_t got = 0; got < len;) {
    ssize_t r = recv(fd, (char *)buf + got, len - got, 0);
    if (r < 0 && errno == EINTR) continue;
    /* SO_RCVTIMEO ran out (the sender's timeout_ms). */
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return rmq_err_set(err, RMQ_ETIMEOUT, "no answer in time");
    }
    if (r == 0 && got == 0 && first) return rmq_err_set(err, RMQ_ENOTFOUND, "the peer closed");
    if (r <= 0) {
      return rmq_err_set(err, RMQ_EIO, "the peer went away mid-frame: %s",
                         r == 0 ? "end of stream" : strerror(errno));
    }
    got += (size_t)r;
  }
  return RMQ_OK;
}

int rmq_remote_send_request(int fd, const rmq_remote_request *q, rmq_err *err) {
  uint64_t body_len = 0;
  for (int i = 0; i < q->nspans; i++) body_len += q->spans[i].len;
  if (body_len > RMQ_REMOTE_BODY_MAX) {
    return rmq_err_set(err, RMQ_EINVAL, "a request of %llu bytes is larger than %zu",
                       (unsigned long long)body_len, RMQ_REMOTE_BODY_MAX);
  }
  request_head h = {REQUEST_MAGIC,
                    q->code,
                    q->count,
                    q->flags,
                    q->offset,
                    (uint16_t)strlen(q->group),
                    (uint16_t)strlen(q->topic),
                    body_len};
  int n = 3 + q->nspans;
  struct iovec local[19], *iov = n <= 19 ? local : malloc(sizeof *iov * (size_t)n);
  if (!iov) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  iov[0] = (struct iovec){&h, sizeof h};
  iov[1] = (struct iovec){(void *)q->group, h.group_len};
  iov[2] = (struct iovec){(void *)q->topic, h.topic_len};
  for (int i = 0; i < q->nspans; i++)
    iov[3 + i] = (struct iovec){q->spans[i].data, q->spans[i].len};
  int rc = send_all(fd, iov, n, err);
  if (iov != local) free(iov);
  return rc;
}

static int read_name(int fd, char *out, size_t cap, size_t len, rmq_err *err) {
  if (len >= cap) return rmq_err_set(err, RMQ_ECORRUPT, "a request names %zu bytes", len);
  out[len] = '\0';
  return recv_all(fd, out, len, false, err);
}

int rmq_remote_read_request(int fd, rmq_remote_request *q, uint8_t **body, rmq_err *err) {
  request_head h;
  *body = NULL;
  int rc = recv_all(fd, &h, sizeof h, true, err);
  if (rc != RMQ_OK) return rc;
  if (h.magic != REQUEST_MAGIC || h.code <= 0 || h.code >= RMQ_REQUEST_CODE_END ||
      h.body_len > RMQ_REMOTE_BODY_MAX) {
    return rmq_err_set(err, RMQ_ECORRUPT, "a request that is not ours (code %d)", h.code);
  }
  *q = (rmq_remote_request){.code = h.code, .count = h.count, .flags = h.flags, .offset = h.offset};
  rc = read_name(fd, q->group, sizeof q->group, h.group_len, err);
  if (rc == RMQ_OK) rc = read_name(fd, q->topic, sizeof q->topic, h.topic_len, err);
  if (rc != RMQ_OK || h.body_len == 0) return rc;
  *body = malloc(h.body_len);
  if (!*body)
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory for a %llu-byte request",
                       (unsigned long long)h.body_len);
  q->body = *body;
  q->body_len = h.body_len;
  return recv_all(fd, *body, h.body_len, false, err);
}

int rmq_remote_send_response(int fd, const rmq_remote_response *r, rmq_err *err) {
  response_head h = {RESPONSE_MAGIC,   r->rc,    r->a,       r->b, (uint32_t)strlen(r->msg),
                     r->results_count, r->flags, r->body_len};
  struct iovec iov[4] = {{&h, sizeof h},
                         {(void *)r->msg, h.msg_len},
                         {r->results, sizeof *r->results * (size_t)r->results_count},
                         {r->body, r->body_len}};
  return send_all(fd, iov, 4, err);
}

int rmq_remote_read_response(int fd, rmq_remote_response *r, rmq_err *err) {
  response_head h;
  int rc = recv_all(fd, &h, sizeof h, true, err);
  if (rc == RMQ_ENOTFOUND) return rmq_err_set(err, RMQ_EIO, "the peer closed");
  if (rc != RMQ_OK) return rc;
  if (h.magic != RESPONSE_MAGIC || h.msg_len >= sizeof r->msg || h.results_count < 0 ||
      h.body_len > RMQ_REMOTE_BODY_MAX) {
    return rmq_err_set(err, RMQ_ECORRUPT, "a response that is not ours");
  }
  *r = (rmq_remote_response){
      .rc = h.rc, .a = h.a, .b = h.b, .results_count = h.results_count, .flags = h.flags};
  rc = recv_all(fd, r->msg, h.msg_len, false, err);
  r->msg[h.msg_len] = '\0';
  if (rc == RMQ_OK && h.results_count > 0) {
    r->results = malloc(sizeof *r->results * (size_t)h.results_count);
    rc = r->results
             ? recv_all(fd, r->results, sizeof *r->results * (size_t)h.results_count, false, err)
             : rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  }
  if (rc != RMQ_OK || h.body_len == 0) return rc;
  r->body = malloc(h.body_len);
  r->body_len = h.body_len;
  return r->body ? recv_all(fd, r->body, h.body_len, false, err)
                 : rmq_err_set(err, RMQ_ENOMEM, "out of memory");
}
