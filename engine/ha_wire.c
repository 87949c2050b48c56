/*
** ha_wire.c: socket addresses and sends for the HA protocol (see ha_wire.h).
*/
#include "ha_wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"

int rmq_ha_sockaddr(const char *address, struct sockaddr_storage *out, socklen_t *len) {
  rmq_host h;
  if (rmq_host_parse(address, &h) != 0) return -1;
  memset(out, 0, sizeof *out);
  if (h.v6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)out;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)h.port);
    memcpy(&a->sin6_addr, h.addr, 16);
    *len = sizeof *a;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)out;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)h.port);
    memcpy(&a->sin_addr, h.addr, 4);
    *len = sizeof *a;
  }
  return 0;
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
