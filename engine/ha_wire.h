/*
** ha_wire.h: the bytes of RocketMQ 4.9's HA protocol (HAService, HAConnection,
** HAClient), big-endian, over raw TCP with no other framing:
** - slave -> master: an 8-byte report, the slave's commit-log end
**   (HAClient.reportSlaveMaxOffset); the master reads the last complete one;
** - master -> slave: a 12-byte header (offset of the first body byte, body
**   size) and the body, raw commit-log bytes of one segment, at most
**   RMQ_HA_TRANSFER_BATCH; a header alone is a heartbeat
**   (HAConnection.WriteSocketService).
*/
#ifndef RMQ_HA_WIRE_H
#define RMQ_HA_WIRE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "message.h"
#include "rmq.h"

#define RMQ_HA_REPORT_SIZE 8
#define RMQ_HA_HEADER_SIZE 12
#define RMQ_HA_TRANSFER_BATCH 32768 /* haTransferBatchSize */
/* haSlaveFallbehindMax: a sync put waits only when a slave is at most this far behind. */
#define RMQ_HA_FALLBEHIND_MAX (256LL << 20)

static inline void rmq_ha_report_encode(uint8_t out[RMQ_HA_REPORT_SIZE], int64_t offset) {
  rmq_put64(out, offset);
}
static inline int64_t rmq_ha_report_decode(const uint8_t in[RMQ_HA_REPORT_SIZE]) {
  return rmq_get64(in);
}
static inline void rmq_ha_header_encode(uint8_t out[RMQ_HA_HEADER_SIZE], int64_t offset,
                                        int32_t size) {
  rmq_put64(out, offset);
  rmq_put32(out + 8, size);
}
static inline void rmq_ha_header_decode(const uint8_t in[RMQ_HA_HEADER_SIZE], int64_t *offset,
                                        int32_t *size) {
  *offset = rmq_get64(in);
  *size = rmq_get32(in + 8);
}

/*
** Split "host:port" or "[v6]:port" into host (cap bytes) and port; host is
** an IP address or a host name of [A-Za-z0-9._-]. -1 when malformed or the
** port is not 0..65535.
*/
int rmq_ha_split_address(const char *address, char *host, size_t cap, int *port);
/* The most addresses of one host name a slave tries. */
#define RMQ_HA_MAX_ADDRS 8

/*
** The socket addresses of "host:port", up to max in getaddrinfo's order (a
** host name may have several: localhost is ::1 and 127.0.0.1 on Debian);
** their count, or -1 with why (cap bytes, may be NULL) when there is none.
*/
int rmq_ha_resolve(const char *address, struct sockaddr_storage *out, socklen_t *lens, int max,
                   char *why, size_t cap);
/*
** A connected non-blocking TCP socket to the first of the n addresses that
** accepts within timeout_ms each, as a client tries every address of a
** name. -1 when none does, with each address and its reason in why (cap
** bytes), or when stop_fd turns readable first (why empty).
*/
int rmq_ha_connect(const struct sockaddr_storage *addrs, const socklen_t *lens, int n, int stop_fd,
                   int timeout_ms, char *why, size_t cap);
/* "ip:port" of a socket address, into buf (RMQ_HA_ADDR bytes). */
void rmq_ha_format_sockaddr(const struct sockaddr_storage *sa, char *buf, size_t cap);
/* Send every byte (MSG_NOSIGNAL) of a blocking or non-blocking socket, waiting up to timeout_ms
   in all; false when the peer is gone or too slow. */
bool rmq_ha_send_all(int fd, const void *data, size_t len, int timeout_ms);

#endif
