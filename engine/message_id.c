/*
** message_id.c: hosts as text and the offset msgId.
*/
#include "message_id.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

static int parse_port(const char *s, int32_t *port) {
  int32_t v = 0;
  size_t n = 0;
  for (; s[n] >= '0' && s[n] <= '9'; n++) {
    if (n == 5) return -1;
    v = v * 10 + (s[n] - '0');
  }
  if (n == 0 || s[n] != '\0' || v > 65535) return -1;
  *port = v;
  return 0;
}

int rmq_host_parse(const char *s, rmq_host *out) {
  char addr[INET6_ADDRSTRLEN];
  const char *addr_start = s, *addr_end, *port;
  rmq_host h = {0};
  if (s[0] == '[') {
    addr_start = s + 1;
    addr_end = strchr(addr_start, ']');
    if (addr_end == NULL || addr_end[1] != ':') return -1;
    port = addr_end + 2;
    h.v6 = true;
  } else {
    addr_end = strrchr(s, ':');
    if (addr_end == NULL) return -1;
    port = addr_end + 1;
  }
  size_t n = (size_t)(addr_end - addr_start);
  if (n == 0 || n >= sizeof addr) return -1;
  memcpy(addr, addr_start, n);
  addr[n] = '\0';
  if (inet_pton(h.v6 ? AF_INET6 : AF_INET, addr, h.addr) != 1) return -1;
  if (parse_port(port, &h.port) != 0) return -1;
  *out = h;
  return 0;
}

void rmq_host_format(const rmq_host *h, char *buf, size_t cap) {
  char addr[INET6_ADDRSTRLEN];
  inet_ntop(h->v6 ? AF_INET6 : AF_INET, h->addr, addr, sizeof addr);
  snprintf(buf, cap, h->v6 ? "[%s]:%d" : "%s:%d", addr, (int)h->port);
}
static const char HEX[] = "0123456789ABCDEF";

char *rmq_bytes2string(char *out, const uint8_t *bytes, size_t n) {
  for (size_t i = 0; i < n; i++) {
    *out++ = HEX[bytes[i] >> 4];
    *out++ = HEX[bytes[i] & 0xF];
  }
  return out;
}

void rmq_msg_id_format(const rmq_host *store_host, int64_t offset, char out[RMQ_MSG_ID_MAX]) {
  uint8_t tail[12];
  rmq_put32(tail, store_host->port);
  rmq_put64(tail + 4, offset);
  char *p = rmq_bytes2string(out, store_host->addr, store_host->v6 ? 16 : 4);
  p = rmq_bytes2string(p, tail, sizeof tail);
  *p = '\0';
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

int rmq_msg_id_parse(const char *hex, size_t len, rmq_host *store_host, int64_t *offset) {
  uint8_t bytes[28];
  if (len != 32 && len != 56) return -1;
  for (size_t i = 0; i < len / 2; i++) {
    int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return -1;
    bytes[i] = (uint8_t)(hi << 4 | lo);
  }
  size_t addr_len = len == 32 ? 4 : 16;
  *store_host = (rmq_host){.v6 = addr_len == 16};
  memcpy(store_host->addr, bytes, addr_len);
  store_host->port = rmq_get32(bytes + addr_len);
  *offset = rmq_get64(bytes + addr_len + 4);
  return 0;
}
