/*
** uniq_key.c: UNIQ_KEY ids as MessageClientIDSetter.createUniqID makes them.
*/
#include "rmq.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "message.h"
#include "message_id.h"

/*
** The first bytes of every id (IP, pid, a random int32) are fixed for the
** process, as Java keeps them in static fields; the counter is process-wide
** too, so that two generators never hand out the same id.
*/
static char uniq_prefix[45]; /* 20 or 44 hex digits */
static size_t uniq_prefix_len;
static atomic_uint uniq_counter;
static pthread_once_t uniq_once = PTHREAD_ONCE_INIT;

struct rmq_uniq_key_gen {
  /* The local month holding "now": its start in epoch seconds << 24 | its
  ** length in seconds (at most 31 days + 1 h < 2^24). One word, so that a
  ** reader never pairs the start of one month with the end of another. */
  _Atomic uint64_t month;
};

/* UtilAll.ipCheck: class A (not loopback), B or C, minus a few placeholder patterns. */
static bool ipv4_usable(const uint8_t *ip) {
  if (ip[0] >= 1 && ip[0] <= 126) {
    if (ip[1] == 1 && ip[2] == 1 && ip[3] == 1) return false;
    return !(ip[1] == 0 && ip[2] == 0 && ip[3] == 0);
  }
  if (ip[0] >= 128 && ip[0] <= 223) {
    if (ip[2] == 1 && ip[3] == 1) return false;
    return !(ip[2] == 0 && ip[3] == 0);
  }
  return false;
}

/* UtilAll.isInternalIP: 10/8, 172.16/12, 192.168/16. */
static bool ipv4_private(const uint8_t *ip) {
  return ip[0] == 10 || (ip[0] == 172 && (ip[1] & 0xF0) == 16) || (ip[0] == 192 && ip[1] == 168);
}

static bool ipv6_usable(const struct in6_addr *a) {
  return !IN6_IS_ADDR_UNSPECIFIED(a) && !IN6_IS_ADDR_LOOPBACK(a) && !IN6_IS_ADDR_LINKLOCAL(a) &&
         !IN6_IS_ADDR_SITELOCAL(a);
}

/* UtilAll.getIP: first public IPv4, else a private IPv4, else an IPv6; 0 if none. */
static size_t local_ip(uint8_t ip[16]) {
  struct ifaddrs *list, *ifa;
  size_t found = 0; /* 0 none, 16 IPv6, 4 private IPv4 */
  if (getifaddrs(&list) != 0) return 0;
  for (ifa = list; ifa != NULL; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == NULL || !(ifa->ifa_flags & IFF_UP)) continue;
    if (ifa->ifa_addr->sa_family == AF_INET) {
      const uint8_t *a = (const uint8_t *)&((struct sockaddr_in *)ifa->ifa_addr)->sin_addr;
      if (!ipv4_usable(a) || (found == 4 && ipv4_private(a))) continue;
      memcpy(ip, a, 4);
      found = 4;
      if (!ipv4_private(a)) break;
    } else if (ifa->ifa_addr->sa_family == AF_INET6 && found == 0) {
      const struct in6_addr *a = &((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr;
      if (!ipv6_usable(a)) continue;
      memcpy(ip, a, 16);
      found = 16;
    }
  }
  freeifaddrs(list);
  return found;
}

static void uniq_prefix_init(void) {
  uint8_t bytes[22];
  size_t ip_len = local_ip(bytes);
  if (ip_len == 0) { /* UtilAll.createFakeIP: the low 4 bytes of the time */
    rmq_put32(bytes, (int32_t)rmq_now_ms());
    ip_len = 4;
  }
  uint32_t rnd;
  if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
    rnd = (uint32_t)rmq_now_ms() ^ (uint32_t)getpid() << 16;
  bytes[ip_len] = (uint8_t)(getpid() >> 8);
  bytes[ip_len + 1] = (uint8_t)getpid();
  rmq_put32(bytes + ip_len + 2, (int32_t)rnd);
  uniq_prefix_len = (size_t)(rmq_bytes2string(uniq_prefix, bytes, ip_len + 6) - uniq_prefix);
}

rmq_uniq_key_gen *rmq_uniq_key_gen_new(void) {
  pthread_once(&uniq_once, uniq_prefix_init);
  rmq_uniq_key_gen *g = malloc(sizeof *g);
  if (g) atomic_init(&g->month, 0); /* an empty month: the first id computes it */
  return g;
}

void rmq_uniq_key_gen_free(rmq_uniq_key_gen *g) { free(g); }

/* MessageClientIDSetter.setStartTime: 00:00 local time on day 1 of this month and the next. */
static uint64_t month_of(int64_t ms) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  rmq_local_time(t, &tm);
  tm.tm_mday = 1;
  tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
  tm.tm_isdst = -1;
  time_t start = rmq_local_mktime(&tm);
  tm.tm_mon++;
  tm.tm_isdst = -1;
  time_t next = rmq_local_mktime(&tm);
  return (uint64_t)start << 24 | (uint64_t)(next - start);
}

int rmq_uniq_key_next(rmq_uniq_key_gen *g, char out[RMQ_MSG_ID_MAX]) {
  int64_t now = rmq_now_ms();
  uint64_t month = atomic_load_explicit(&g->month, memory_order_relaxed);
  int64_t start = (int64_t)(month >> 24) * 1000;
  if (now < start || now >= start + (int64_t)(month & 0xFFFFFF) * 1000) {
    month = month_of(now); /* racing threads compute the same value */
    atomic_store_explicit(&g->month, month, memory_order_relaxed);
    start = (int64_t)(month >> 24) * 1000;
  }
  uint8_t tail[6];
  rmq_put32(tail, (int32_t)(now - start));
  uint16_t counter = (uint16_t)atomic_fetch_add_explicit(&uniq_counter, 1, memory_order_relaxed);
  tail[4] = (uint8_t)(counter >> 8);
  tail[5] = (uint8_t)counter;
  memcpy(out, uniq_prefix, uniq_prefix_len);
  char *end = rmq_bytes2string(out + uniq_prefix_len, tail, sizeof tail);
  *end = '\0';
  return (int)(end - out);
}
