/*
** ha_wire.c: socket addresses and sends for the HA protocol (see ha_wire.h).
*/
#include "ha_wire.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"

int rmq_ha_split_address(const char *address, char *host, size_t cap, int *port) {
  const char *colon = strrchr(address, ':'), *h = address, *h_end = colon;
  if (address[0] == '[') {
    h = address + 1;
    h_end = strchr(h, ']');
    if (!h_end || h_end[1] != ':') return -1;
    colon = h_end + 1;
  }
  size_t n = colon && h_end ? (size_t)(h_end - h) : 0;
  if (n == 0 || n >= cap) return -1;
  for (size_t i = 0; address[0] != '[' && i < n; i++) {
    if (!isalnum((unsigned char)h[i]) && !strchr("._-", h[i])) return -1;
  }
  char *end;
  errno = 0;
  long p = strtol(colon + 1, &end, 10);
  if (!isdigit((unsigned char)colon[1]) || *end || errno || p < 0 || p > 65535) return -1;
  memcpy(host, h, n);
  host[n] = '\0';
  *port = (int)p;
  return 0;
}

int rmq_ha_resolve(const char *address, struct sockaddr_storage *out, socklen_t *lens, int max,
                   char *why, size_t cap) {
  char host[256], port[16];
  int p;
  if (rmq_ha_split_address(address, host, sizeof host, &p) != 0) {
    if (why) snprintf(why, cap, "'%s' is not host:port", address);
    return -1;
  }
  snprintf(port, sizeof port, "%d", p);
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  int rc = getaddrinfo(host, port, &hints, &res);
  if (rc != 0 || !res) {
    if (why) snprintf(why, cap, "cannot resolve %s: %s", host, gai_strerror(rc));
    return -1;
  }
  int n = 0;
  for (struct addrinfo *a = res; a && n < max; a = a->ai_next) {
    if (a->ai_addrlen > sizeof *out) continue;
    memset(&out[n], 0, sizeof *out);
    memcpy(&out[n], a->ai_addr, a->ai_addrlen);
    lens[n++] = a->ai_addrlen;
  }
  freeaddrinfo(res);
  if (n == 0 && why) snprintf(why, cap, "%s has no IPv4 or IPv6 address", host);
  return n > 0 ? n : -1;
}

/* A socket connected to sa within timeout_ms, or -1 with the reason in why; -2 when stopped. */
static int connect_one(const struct sockaddr_storage *sa, socklen_t len, int stop_fd,
                       int timeout_ms, char *why, size_t cap) {
  int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(why, cap, "socket: %s", strerror(errno));
    return -1;
  }
  int one = 1, e = 0;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (const struct sockaddr *)sa, len) != 0 && errno != EINPROGRESS) {
    e = errno;
  } else {
    struct pollfd pfd[2] = {{.fd = fd, .events = POLLOUT}, {.fd = stop_fd, .events = POLLIN}};
    poll(pfd, stop_fd >= 0 ? 2 : 1, timeout_ms);
    if (pfd[1].revents & POLLIN) {
      close(fd);
      return -2;
    }
    socklen_t elen = sizeof e;
    if (!(pfd[0].revents & POLLOUT))
      e = ETIMEDOUT;
    else
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen);
  }
  if (e == 0) return fd;
  snprintf(why, cap, "%s", strerror(e));
  close(fd);
  return -1;
}

int rmq_ha_connect(const struct sockaddr_storage *addrs, const socklen_t *lens, int n, int stop_fd,
                   int timeout_ms, char *why, size_t cap) {
  size_t used = 0;
  why[0] = '\0';
  for (int i = 0; i < n; i++) {
    char addr[RMQ_HA_ADDR], reason[128];
    int fd = connect_one(&addrs[i], lens[i], stop_fd, timeout_ms, reason, sizeof reason);
    if (fd >= 0) return fd;
    if (fd == -2) {
      why[0] = '\0';
      return -1;
    }
    rmq_ha_format_sockaddr(&addrs[i], addr, sizeof addr);
    int k = snprintf(why + used, cap - used, "%s%s: %s", i ? "; " : "", addr, reason);
    if (k > 0) used = (size_t)k >= cap - used ? cap - 1 : used + (size_t)k;
  }
  return -1;
}

void rmq_ha_format_sockaddr(const struct sockaddr_storage *sa, char *buf, size_t cap) {
  rmq_host h = {0};
  if (sa->ss_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
    h.v6 = true;
    memcpy(h.addr, &a->sin6_addr, 16);
    h.port = ntohs(a->sin6_port);
  } else {
    const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
    memcpy(h.addr, &a->sin_addr, 4);
    h.port = ntohs(a->sin_port);
  }
  rmq_host_format(&h, buf, cap);
}

bool rmq_ha_send_all(int fd, const void *data, size_t len, int timeout_ms) {
  const uint8_t *p = data;
  int64_t deadline = rmq_monotonic_ms() + timeout_ms;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    int64_t left = deadline - rmq_monotonic_ms();
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) || left <= 0) return false;
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    poll(&pfd, 1, (int)left);
  }
  return true;
}
