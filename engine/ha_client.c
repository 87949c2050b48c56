/*
** ha_client.c: the slave's side of replication (see ha_client.h).
*/
#include "ha_client.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "ha_wire.h"
#include "message.h"

/* RocketMQ's slave reads into a 4 MiB buffer; ours reads frames in pieces of this size. */
#define READ_BUFFER (256 << 10)

struct rmq_ha_client {
  rmq_commitlog *cl;
  char master[RMQ_HA_ADDR];
  int heartbeat_ms, housekeeping_ms;
  rmq_ha_appended_fn appended;
  void *ctx;
  pthread_t tid;
  bool started;
  int stop_fd;
  atomic_bool stopping;
  pthread_mutex_t mu; /* guards state, last_error, connected_since_ms, master_end */
  const char *state;
  char last_error[256];
  int64_t connected_since_ms;
  int64_t master_end; /* the end of the last frame heard: the master's end, as far as known */
  /* the thread's own */
  int fd;
  uint8_t *rbuf;
  uint8_t header[RMQ_HA_HEADER_SIZE];
  int header_len;
  int32_t frame_left; /* body bytes of the current frame still to come */
  uint8_t *pending;   /* bytes received past the log's end, not yet whole records */
  size_t pending_len, pending_cap;
  int64_t reported; /* the last report sent */
  int64_t last_write_ms, last_read_ms;
};

static void set_state(rmq_ha_client *c, const char *state, const char *why) {
  pthread_mutex_lock(&c->mu);
  c->state = state;
  if (why) snprintf(c->last_error, sizeof c->last_error, "%s", why);
  c->connected_since_ms = strcmp(state, "connected") == 0 ? rmq_now_ms() : 0;
  pthread_mutex_unlock(&c->mu);
}

/* The log's end: what was appended, not what readers see (a write buffer commits later). */
static int64_t log_end(rmq_ha_client *c) { return rmq_mfq_max_wrote(&c->cl->mfq); }

/* The slave's end as the master sees it: the log and the record in flight. */
static int64_t own_end(rmq_ha_client *c) { return log_end(c) + (int64_t)c->pending_len; }

/* Why a send or receive failed: a reset or broken pipe is the master closing, said as such. */
static void peer_error(rmq_ha_client *c, const char *doing, char *why, size_t cap) {
  int e = errno;
  if (e == ECONNRESET || e == EPIPE) {
    snprintf(why, cap, "master %s closed the connection (%s)", c->master, strerror(e));
  } else {
    snprintf(why, cap, "%s master %s: %s", doing, c->master, strerror(e));
  }
}

/* HAClient.reportSlaveMaxOffset. */
static bool report(rmq_ha_client *c, char *why, size_t cap) {
  uint8_t buf[RMQ_HA_REPORT_SIZE];
  int64_t end = own_end(c);
  rmq_ha_report_encode(buf, end);
  if (!rmq_ha_send_all(c->fd, buf, sizeof buf, c->housekeeping_ms)) {
    peer_error(c, "cannot send a report to", why, cap);
    return false;
  }
  c->reported = end;
  c->last_write_ms = rmq_monotonic_ms();
  return true;
}

/* ------------------------------------------------------- record checks */

/*
** Why the len bytes at rec, landing at log offset `at`, are no record the
** slave may take; NULL when they are one. seg_left: bytes left in the
** segment. Called once the record's TOTALSIZE bytes are all there.
*/
static const char *unsound(const uint8_t *rec, int32_t len, int64_t at, int32_t seg_left,
                           int64_t *store_time) {
  if (rmq_get32(rec + RMQ_POS_MAGIC) == RMQ_MAGIC_BLANK) {
    return len == seg_left ? NULL : "an end-of-segment BLANK that does not end the segment";
  }
  rmq_message m;
  rmq_decode_status s = rmq_message_decode(rec, (size_t)len, true, &m);
  if (s != RMQ_DECODE_OK) return rmq_decode_status_name(s);
  if (m.physical_offset != at) return "a record whose PHYSICALOFFSET is not where it lands";
  *store_time = m.store_timestamp;
  return NULL;
}

/*
** The length of the record at p (avail bytes of it here), or 0 when more
** bytes must come first, or -1 (with *bad) when its first 8 bytes already
** tell it is no record.
*/
static int32_t record_length(const uint8_t *p, size_t avail, int32_t seg_left, const char **bad) {
  if (avail < 8) return 0;
  int32_t len = rmq_get32(p), magic = rmq_get32(p + RMQ_POS_MAGIC);
  bool blank = magic == RMQ_MAGIC_BLANK;
  if (!blank && magic != RMQ_MAGIC_V1 && magic != RMQ_MAGIC_V2) {
    *bad = "bytes with no magic code of a record (the middle of a record?)";
    return -1;
  }
  /* A record leaves room for a BLANK behind it (DefaultAppendMessageCallback.doAppend). */
  if (len < 8 || len > seg_left || (!blank && len + RMQ_END_FILE_MIN_BLANK_LENGTH > seg_left)) {
    *bad = "a record length that does not fit in the segment";
    return -1;
  }
  return (size_t)len <= avail ? len : 0;
}

/* Append pending[from, to) at log offset at. */
static int append_run(rmq_ha_client *c, size_t from, size_t to, int64_t at, int64_t store_time,
                      rmq_err *err) {
  if (to == from) return RMQ_OK;
  int rc = rmq_commitlog_append_data(c->cl, at, c->pending + from, to - from, store_time, err);
  return rc == RMQ_OK ? c->appended(c->ctx, at + (int64_t)(to - from), err) : rc;
}

/*
** Append the whole, sound records at the start of pending (a run per
** segment), keep the rest. false with why when a record is unsound: the
** connection goes, and with it what is pending.
*/
static bool take_records(rmq_ha_client *c, char *why, size_t cap) {
  int64_t base = log_end(c), store_time = 0;
  int32_t fs = c->cl->cfg.file_size;
  size_t pos = 0, run = 0;
  rmq_err err = {0};
  for (;;) {
    int64_t at = base + (int64_t)pos;
    int32_t seg_left = (int32_t)(fs - at % fs);
    const char *bad = NULL;
    int32_t len = record_length(c->pending + pos, c->pending_len - pos, seg_left, &bad);
    if (len > 0) bad = unsound(c->pending + pos, len, at, seg_left, &store_time);
    if (bad) {
      snprintf(why, cap,
               "master %s sent bytes at offset %lld that are no sound record (%s): the slave's "
               "log diverged from the master's; nothing from there on was taken",
               c->master, (long long)at, bad);
      break;
    }
    if (len == 0) break;
    pos += (size_t)len;
    if (len == seg_left) { /* the segment is complete: the next run starts a new one */
      if (append_run(c, run, pos, base + (int64_t)run, store_time, &err) != RMQ_OK) break;
      run = pos;
    }
  }
  if (!why[0] && !err.code) append_run(c, run, pos, base + (int64_t)run, store_time, &err);
  if (err.code) snprintf(why, cap, "cannot append what master %s sent: %.200s", c->master, err.msg);
  if (why[0]) return false;
  if (pos > 0) memmove(c->pending, c->pending + pos, c->pending_len - pos);
  c->pending_len -= pos;
  return true;
}

/* ------------------------------------------------------------- frames */

static bool pending_room(rmq_ha_client *c, size_t more) {
  if (c->pending_len + more <= c->pending_cap) return true;
  size_t cap = c->pending_cap * 2 > c->pending_len + more ? c->pending_cap * 2
                                                          : c->pending_len + more;
  uint8_t *p = realloc(c->pending, cap);
  if (!p) return false;
  c->pending = p;
  c->pending_cap = cap;
  return true;
}

/*
** Why the slave cannot take a frame at offset (into why), or false when it
** can. HAClient.dispatchReadRequest checks only that a frame starts at the
** slave's end (own), and an empty slave starts its log wherever the first
** frame says; a broken or hostile peer could then have it make a segment at
** a negative offset, or one whose end overflows.
*/
static bool frame_refused(rmq_ha_client *c, int64_t offset, int64_t own, char *why, size_t cap) {
  int32_t fs = c->cl->cfg.file_size;
  if (offset < 0) {
    snprintf(why, cap,
             "master %s sent a frame at offset %lld: a commit-log offset is never negative",
             c->master, (long long)offset);
  } else if (offset > RMQ_MAX_LOG_OFFSET - fs) {
    snprintf(why, cap,
             "master %s sent a frame at offset %lld: a slave takes offsets up to %lld, so that its "
             "log ends by 2^62",
             c->master, (long long)offset, (long long)(RMQ_MAX_LOG_OFFSET - fs));
  } else if (own == 0 && offset % fs != 0) {
    snprintf(why, cap,
             "master %s sent offset %lld to an empty slave: its log must start at a segment's "
             "start, a multiple of commitlog_file_size (%d)",
             c->master, (long long)offset, fs);
  } else if (own != 0 && offset != own) {
    snprintf(why, cap,
             "master %s sent data for offset %lld, but the slave's commit log ends at %lld",
             c->master, (long long)offset, (long long)own);
  } else {
    return false;
  }
  return true;
}

/*
** A frame's header: its offset must be the slave's end, unless the slave is
** empty: then it starts its log there. Nothing is made on disk before the
** offset is known to be one the slave can hold.
*/
static bool on_header(rmq_ha_client *c, char *why, size_t cap) {
  int64_t offset, own = own_end(c);
  int32_t size;
  rmq_ha_header_decode(c->header, &offset, &size);
  if (size < 0 || size > c->cl->cfg.file_size) {
    snprintf(why, cap, "master %s sent a frame of %d bytes: not the HA protocol", c->master, size);
    return false;
  }
  if (frame_refused(c, offset, own, why, cap)) return false;
  rmq_err err = {0};
  if (own == 0 && rmq_commitlog_append_data(c->cl, offset, NULL, 0, 0, &err) != RMQ_OK) {
    snprintf(why, cap, "master %s sent offset %lld to an empty slave: %.200s", c->master,
             (long long)offset, err.msg);
    return false;
  }
  pthread_mutex_lock(&c->mu);
  c->master_end = offset + size;
  pthread_mutex_unlock(&c->mu);
  c->frame_left = size;
  return true;
}

/* The frame is whole: take its records, report when the end grew. */
static bool on_frame_end(rmq_ha_client *c, char *why, size_t cap) {
  if (!take_records(c, why, cap)) return false;
  return own_end(c) == c->reported || report(c, why, cap);
}

/* Feed n received bytes through the frame parser. */
static bool on_bytes(rmq_ha_client *c, const uint8_t *p, size_t n, char *why, size_t cap) {
  while (n > 0) {
    if (c->header_len < RMQ_HA_HEADER_SIZE) {
      size_t k = RMQ_HA_HEADER_SIZE - (size_t)c->header_len;
      if (k > n) k = n;
      memcpy(c->header + c->header_len, p, k);
      c->header_len += (int)k;
      p += k;
      n -= k;
      if (c->header_len < RMQ_HA_HEADER_SIZE) break;
      if (!on_header(c, why, cap)) return false;
    }
    size_t k = (size_t)c->frame_left < n ? (size_t)c->frame_left : n;
    if (!pending_room(c, k)) {
      snprintf(why, cap, "out of memory for a frame from master %s", c->master);
      return false;
    }
    if (k > 0) memcpy(c->pending + c->pending_len, p, k);
    c->pending_len += k;
    c->frame_left -= (int32_t)k;
    p += k;
    n -= k;
    if (c->frame_left > 0) break;
    c->header_len = 0;
    if (!on_frame_end(c, why, cap)) return false;
  }
  return true;
}

/* ------------------------------------------------------- connection */

/* Wait up to ms for fd (-1: none) to be ready for events, or for the stop; false once stopped. */
static bool wait_fd(rmq_ha_client *c, int fd, short events, int ms, short *revents) {
  struct pollfd pfd[2] = {{.fd = c->stop_fd, .events = POLLIN}, {.fd = fd, .events = events}};
  poll(pfd, fd >= 0 ? 2 : 1, ms);
  *revents = fd >= 0 ? pfd[1].revents : 0;
  return !atomic_load(&c->stopping);
}

/* Connected to the first address of the master's name that accepts; false with why. */
static bool connect_master(rmq_ha_client *c, char *why, size_t cap) {
  struct sockaddr_storage sa[RMQ_HA_MAX_ADDRS];
  socklen_t lens[RMQ_HA_MAX_ADDRS];
  char reasons[400];
  int n = rmq_ha_resolve(c->master, sa, lens, RMQ_HA_MAX_ADDRS, reasons, sizeof reasons);
  if (n > 0)
    c->fd = rmq_ha_connect(sa, lens, n, c->stop_fd, c->housekeeping_ms, reasons, sizeof reasons);
  if (c->fd >= 0) return true;
  if (reasons[0]) snprintf(why, cap, "cannot connect to master %s: %s", c->master, reasons);
  return false;
}

/* Read what is there; false with why when the master closed or failed. */
static bool read_master(rmq_ha_client *c, char *why, size_t cap) {
  for (;;) {
    ssize_t n = recv(c->fd, c->rbuf, READ_BUFFER, MSG_DONTWAIT);
    if (n == 0) {
      snprintf(why, cap, "master %s closed the connection", c->master);
      return false;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      peer_error(c, "cannot read from", why, cap);
      return false;
    }
    c->last_read_ms = rmq_monotonic_ms();
    if (!on_bytes(c, c->rbuf, (size_t)n, why, cap)) return false;
  }
}

/* One connection, from the first report to a drop (why) or the stop. */
static void run_connection(rmq_ha_client *c, char *why, size_t cap) {
  c->header_len = 0;
  c->pending_len = 0;
  c->last_read_ms = rmq_monotonic_ms();
  set_state(c, "connected", NULL);
  if (!report(c, why, cap)) return;
  while (!atomic_load(&c->stopping)) {
    int64_t now = rmq_monotonic_ms();
    if (now - c->last_read_ms >= c->housekeeping_ms) {
      snprintf(why, cap, "master %s sent nothing for %d ms (haHousekeepingInterval)", c->master,
               c->housekeeping_ms);
      return;
    }
    if (now - c->last_write_ms >= c->heartbeat_ms && !report(c, why, cap)) return;
    int64_t hb = c->last_write_ms + c->heartbeat_ms - now;
    int64_t hk = c->last_read_ms + c->housekeeping_ms - now;
    short rev;
    wait_fd(c, c->fd, POLLIN, (int)(hb < hk ? hb : hk) + 1, &rev);
    if (rev && !read_master(c, why, cap)) return;
  }
}

static void close_fd(rmq_ha_client *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
}

static void *client_run(void *arg) {
  rmq_ha_client *c = arg;
  while (!atomic_load(&c->stopping)) {
    int64_t began = rmq_monotonic_ms();
    char why[512] = "";
    set_state(c, "connecting", NULL);
    if (connect_master(c, why, sizeof why)) run_connection(c, why, sizeof why);
    close_fd(c);
    if (atomic_load(&c->stopping)) break;
    set_state(c, "retrying", why);
    int64_t left = began + c->heartbeat_ms - rmq_monotonic_ms();
    short rev;
    if (left > 0) wait_fd(c, -1, 0, (int)left, &rev);
  }
  return NULL;
}

int rmq_ha_client_start(rmq_commitlog *cl, const rmq_config *cfg, rmq_ha_appended_fn appended,
                        void *ctx, rmq_ha_client **out, rmq_err *err) {
  *out = NULL;
  rmq_ha_client *c = calloc(1, sizeof *c);
  if (!c || !(c->rbuf = malloc(READ_BUFFER))) {
    free(c);
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  }
  c->cl = cl;
  snprintf(c->master, sizeof c->master, "%s", cfg->ha_master);
  c->heartbeat_ms = cfg->ha_heartbeat_ms;
  c->housekeeping_ms = cfg->ha_housekeeping_ms;
  c->appended = appended;
  c->ctx = ctx;
  c->fd = -1;
  c->state = "connecting";
  c->reported = -1;
  pthread_mutex_init(&c->mu, NULL);
  c->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int rc = c->stop_fd < 0 ? rmq_err_set(err, RMQ_EIO, "eventfd: %s", strerror(errno)) : RMQ_OK;
  if (rc == RMQ_OK && pthread_create(&c->tid, NULL, client_run, c) != 0) {
    rc = rmq_err_set(err, RMQ_EIO, "cannot start the HA client thread");
  }
  c->started = rc == RMQ_OK;
  if (rc != RMQ_OK) {
    rmq_ha_client_stop(c);
    return rc;
  }
  *out = c;
  return RMQ_OK;
}

void rmq_ha_client_stop(rmq_ha_client *c) {
  if (!c) return;
  atomic_store(&c->stopping, true);
  uint64_t one = 1;
  if (c->stop_fd >= 0) (void)!write(c->stop_fd, &one, sizeof one);
  if (c->started) pthread_join(c->tid, NULL);
  close_fd(c);
  if (c->stop_fd >= 0) close(c->stop_fd);
  pthread_mutex_destroy(&c->mu);
  free(c->pending);
  free(c->rbuf);
  free(c);
}

int rmq_ha_client_rows(rmq_ha_client *c, rmq_ha_fn fn, void *ctx) {
  int64_t end = log_end(c);
  pthread_mutex_lock(&c->mu);
  char state[32], last_error[256];
  snprintf(state, sizeof state, "%s", c->state);
  snprintf(last_error, sizeof last_error, "%s", c->last_error);
  int64_t lag = c->master_end > end ? c->master_end - end : 0;
  rmq_ha_row row = {.address = c->master,
                    .state = state,
                    .last_error = last_error,
                    .offset = end,
                    .lag_bytes = lag,
                    .connected_since_ms = c->connected_since_ms};
  pthread_mutex_unlock(&c->mu);
  return fn(ctx, &row);
}

void rmq_ha_client_stats(rmq_ha_client *c, rmq_stats *st) {
  pthread_mutex_lock(&c->mu);
  snprintf(st->ha_state, sizeof st->ha_state, "%s to master %s", c->state, c->master);
  snprintf(st->ha_last_error, sizeof st->ha_last_error, "%s", c->last_error);
  pthread_mutex_unlock(&c->mu);
}
