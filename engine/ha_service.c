/*
** ha_service.c: the master's side of replication (see ha_service.h).
*/
#include "ha_service.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "clock.h"
#include "ha_wire.h"

/* How often the accept thread looks for finished connections to join. */
#define REAP_INTERVAL_MS 1000

typedef struct ha_conn ha_conn;

struct rmq_ha_service {
  rmq_commitlog *cl;
  int heartbeat_ms, housekeeping_ms;
  int listen_fd;
  int stop_fd; /* eventfd: wakes the accept thread to stop */
  pthread_t accept_tid;
  bool accept_started;
  atomic_bool stopping;
  atomic_int sleepers;      /* senders waiting for data: an append wakes them */
  _Atomic uint64_t appends; /* counts the appends, for a sender about to sleep */
  char address[RMQ_HA_ADDR];
  pthread_mutex_t mu; /* guards the list, the acks and last_error */
  pthread_cond_t acked;
  ha_conn *conns;
  int reported;           /* connections whose slave reported */
  int64_t push2slave_max; /* push2SlaveMaxOffset; -1 before any report */
  char last_error[256];
};

/* HAConnection: one slave. The fields after `tid` belong to the connection's thread. */
struct ha_conn {
  rmq_ha_service *ha;
  ha_conn *next;
  int fd;
  int wake_fd;
  atomic_bool sleeping;
  atomic_bool done;
  _Atomic int64_t ack; /* slaveAckOffset; -1 before the first report */
  char address[RMQ_HA_ADDR];
  int64_t connected_since_ms;
  pthread_t tid;
  int64_t next_transfer; /* nextTransferFromWhere; -1 before the first report */
  int64_t last_write_ms, last_read_ms;
  uint8_t report[RMQ_HA_REPORT_SIZE];
  int report_len;
};

/* --------------------------------------------------------------- acks */

static void set_last_error(rmq_ha_service *ha, const char *why) {
  pthread_mutex_lock(&ha->mu);
  snprintf(ha->last_error, sizeof ha->last_error, "%s", why);
  pthread_mutex_unlock(&ha->mu);
}

/* HAService.notifyTransferSome: a slave acknowledged offset. */
static void acked(rmq_ha_service *ha, ha_conn *c, int64_t offset) {
  pthread_mutex_lock(&ha->mu);
  if (atomic_load(&c->ack) < 0) ha->reported++;
  atomic_store(&c->ack, offset);
  if (offset > ha->push2slave_max) {
    ha->push2slave_max = offset;
    pthread_cond_broadcast(&ha->acked);
  }
  pthread_mutex_unlock(&ha->mu);
}

/*
** Does a record (or a segment's BLANK) start at offset? Its PHYSICALOFFSET
** field says where the master wrote it: bytes from the middle of a record
** almost never hold their own offset there. The end of the log and a
** segment's start (a slave that starts empty) are starts too.
*/
static bool record_starts_at(rmq_commitlog *cl, int64_t offset, int64_t max) {
  if (offset == max || offset % cl->cfg.file_size == 0) return true;
  rmq_commitlog_ref ref;
  if (rmq_commitlog_get_data(cl, offset, &ref) != RMQ_OK) return false;
  rmq_message m;
  rmq_decode_status st = rmq_message_decode(ref.data, ref.avail, false, &m);
  bool ok = st == RMQ_DECODE_BLANK || (st == RMQ_DECODE_OK && m.physical_offset == offset);
  rmq_commitlog_ref_release(&ref);
  return ok;
}

/*
** A report (ReadSocketService.processReadEvent): the first is where the
** transfer starts. RocketMQ takes any first report at its word; ours must
** be the end of the master's log or where a record of it starts, and no
** report may pass the master's end: else the slave's log diverged from the
** master's (a longer one, or other records), and streaming to it would send
** the middle of a record. false with why to drop the connection.
*/
static bool on_report(ha_conn *c, int64_t offset, char *why, size_t cap) {
  rmq_commitlog *cl = c->ha->cl;
  int64_t max = rmq_commitlog_max_offset(cl);
  if (offset < 0 || offset > max) {
    snprintf(why, cap,
             "slave %s reported offset %lld beyond the master's end %lld: its commit log "
             "diverged from the master's (longer); disconnected",
             c->address, (long long)offset, (long long)max);
    return false;
  }
  if (c->next_transfer < 0 && !record_starts_at(cl, offset, max)) {
    snprintf(why, cap,
             "slave %s reported offset %lld, where no record of the master starts: its commit "
             "log diverged from the master's; disconnected",
             c->address, (long long)offset);
    return false;
  }
  if (c->next_transfer < 0) {
    c->next_transfer = offset == 0 ? max - max % cl->cfg.file_size : offset;
  }
  acked(c->ha, c, offset);
  return true;
}

/* Read what the slave sent; the last complete 8-byte report wins. false: drop (why). */
static bool read_reports(ha_conn *c, char *why, size_t cap) {
  uint8_t buf[4096];
  for (;;) {
    ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) {
      snprintf(why, cap, "slave %s closed the connection", c->address);
      return false;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      snprintf(why, cap, "slave %s: %s", c->address, strerror(errno));
      return false;
    }
    c->last_read_ms = rmq_monotonic_ms();
    bool have = false;
    int64_t last = 0;
    for (ssize_t i = 0; i < n; i++) {
      c->report[c->report_len++] = buf[i];
      if (c->report_len == RMQ_HA_REPORT_SIZE) {
        last = rmq_ha_report_decode(c->report);
        have = true;
        c->report_len = 0;
      }
    }
    if (have && !on_report(c, last, why, cap)) return false;
  }
}

/* ------------------------------------------------------------ frames */

/* Send one frame: header and body (NULL for a heartbeat), within the housekeeping time. */
static bool send_frame(ha_conn *c, int64_t offset, const uint8_t *body, int32_t size) {
  uint8_t header[RMQ_HA_HEADER_SIZE];
  rmq_ha_header_encode(header, offset, size);
  struct iovec iov[2] = {{header, sizeof header}, {(void *)body, (size_t)size}};
  ssize_t n = writev(c->fd, iov, size > 0 ? 2 : 1);
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
  size_t sent = n > 0 ? (size_t)n : 0, total = sizeof header + (size_t)size;
  int timeout = c->ha->housekeeping_ms;
  if (sent < sizeof header) {
    if (!rmq_ha_send_all(c->fd, header + sent, sizeof header - sent, timeout)) return false;
    sent = sizeof header;
  }
  if (sent < total &&
      !rmq_ha_send_all(c->fd, body + (sent - sizeof header), total - sent, timeout)) {
    return false;
  }
  c->last_write_ms = rmq_monotonic_ms();
  return true;
}

/*
** WriteSocketService: the next frame from nextTransferFromWhere, at most a
** batch and never past its segment, from what readers see. *sent: whether
** one went. false: drop (why).
*/
static bool transfer(ha_conn *c, bool *sent, char *why, size_t cap) {
  rmq_commitlog_ref ref;
  *sent = false;
  if (c->next_transfer < 0) return true;
  if (rmq_commitlog_get_data(c->ha->cl, c->next_transfer, &ref) != RMQ_OK) {
    if (c->next_transfer >= rmq_commitlog_min_offset(c->ha->cl)) return true;
    snprintf(why, cap, "slave %s needs offset %lld, which the master no longer holds (expired)",
             c->address, (long long)c->next_transfer);
    return false;
  }
  int32_t size = ref.avail > RMQ_HA_TRANSFER_BATCH ? RMQ_HA_TRANSFER_BATCH : (int32_t)ref.avail;
  bool ok = send_frame(c, c->next_transfer, ref.data, size) && rmq_commitlog_ref_valid(&ref);
  rmq_commitlog_ref_release(&ref);
  if (!ok) {
    snprintf(why, cap, "slave %s did not take data at %lld within %d ms", c->address,
             (long long)c->next_transfer, c->ha->housekeeping_ms);
    return false;
  }
  c->next_transfer += size;
  *sent = true;
  return true;
}

/* ------------------------------------------------------------ the loop */

/* ms until the next heartbeat or housekeeping check is due. */
static int wait_ms(ha_conn *c, int64_t now) {
  int64_t hb = c->next_transfer >= 0 ? c->last_write_ms + c->ha->heartbeat_ms - now : INT32_MAX;
  int64_t hk = c->last_read_ms + c->ha->housekeeping_ms - now;
  int64_t t = hb < hk ? hb : hk;
  return t < 0 ? 0 : t > INT32_MAX ? INT32_MAX : (int)t;
}

/*
** Sleep until the slave writes, an append wakes us or a timer is due. seen:
** the append count read before the log's end was. The sleeper is counted
** before the count is read again and an append counts itself before it
** looks for sleepers (all sequentially consistent), so one of the two sees
** the other: an append in between is never slept through.
*/
static void sleep_for_data(ha_conn *c, uint64_t seen) {
  rmq_ha_service *ha = c->ha;
  atomic_store(&c->sleeping, true);
  atomic_fetch_add(&ha->sleepers, 1);
  int timeout = wait_ms(c, rmq_monotonic_ms());
  if (atomic_load(&ha->appends) != seen) timeout = 0;
  struct pollfd pfd[2] = {{.fd = c->fd, .events = POLLIN}, {.fd = c->wake_fd, .events = POLLIN}};
  poll(pfd, 2, timeout);
  atomic_fetch_sub(&ha->sleepers, 1);
  atomic_store(&c->sleeping, false);
  uint64_t v;
  if (pfd[1].revents & POLLIN) (void)!read(c->wake_fd, &v, sizeof v);
}

/* One turn: reports, a frame or a heartbeat, the housekeeping check, a sleep when idle. */
static bool conn_step(ha_conn *c, char *why, size_t cap) {
  if (!read_reports(c, why, cap)) return false;
  uint64_t seen = atomic_load(&c->ha->appends);
  bool sent;
  if (!transfer(c, &sent, why, cap)) return false;
  if (sent) return true;
  int64_t now = rmq_monotonic_ms();
  if (now - c->last_read_ms >= c->ha->housekeeping_ms) {
    snprintf(why, cap, "slave %s sent nothing for %d ms (haHousekeepingInterval)", c->address,
             c->ha->housekeeping_ms);
    return false;
  }
  if (c->next_transfer >= 0 && now - c->last_write_ms >= c->ha->heartbeat_ms) {
    if (!send_frame(c, c->next_transfer, NULL, 0)) {
      snprintf(why, cap, "slave %s did not take a heartbeat", c->address);
      return false;
    }
    return true;
  }
  sleep_for_data(c, seen);
  return true;
}

static void *conn_run(void *arg) {
  ha_conn *c = arg;
  rmq_ha_service *ha = c->ha;
  char why[256] = "";
  while (!atomic_load(&ha->stopping) && conn_step(c, why, sizeof why)) {
  }
  pthread_mutex_lock(&ha->mu);
  if (atomic_load(&c->ack) >= 0) ha->reported--;
  if (why[0] && !atomic_load(&ha->stopping)) {
    snprintf(ha->last_error, sizeof ha->last_error, "%s", why);
  }
  atomic_store(&c->done, true);
  pthread_mutex_unlock(&ha->mu);
  shutdown(c->fd, SHUT_RDWR);
  return NULL;
}

/* ---------------------------------------------------------- accepting */

static void conn_free(ha_conn *c) {
  pthread_join(c->tid, NULL);
  close(c->fd);
  close(c->wake_fd);
  free(c);
}

/* Join and free the connections whose thread ended. */
static void reap(rmq_ha_service *ha) {
  pthread_mutex_lock(&ha->mu);
  ha_conn *dead = NULL;
  for (ha_conn **p = &ha->conns; *p;) {
    ha_conn *c = *p;
    if (!atomic_load(&c->done)) {
      p = &c->next;
      continue;
    }
    *p = c->next;
    c->next = dead;
    dead = c;
  }
  pthread_mutex_unlock(&ha->mu);
  while (dead) {
    ha_conn *next = dead->next;
    conn_free(dead);
    dead = next;
  }
}

static void start_conn(rmq_ha_service *ha, int fd, const struct sockaddr_storage *sa) {
  ha_conn *c = calloc(1, sizeof *c);
  int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (!c || wake < 0) {
    set_last_error(ha, "cannot accept a slave: out of memory or descriptors");
    free(c);
    if (wake >= 0) close(wake);
    close(fd);
    return;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  *c = (ha_conn){.ha = ha, .fd = fd, .wake_fd = wake, .next_transfer = -1};
  atomic_store(&c->ack, -1);
  rmq_ha_format_sockaddr(sa, c->address, sizeof c->address);
  c->connected_since_ms = rmq_now_ms();
  c->last_read_ms = c->last_write_ms = rmq_monotonic_ms();
  pthread_mutex_lock(&ha->mu);
  if (pthread_create(&c->tid, NULL, conn_run, c) != 0) {
    pthread_mutex_unlock(&ha->mu);
    set_last_error(ha, "cannot start a thread for a slave");
    close(fd);
    close(wake);
    free(c);
    return;
  }
  c->next = ha->conns;
  ha->conns = c;
  pthread_mutex_unlock(&ha->mu);
}

/* AcceptSocketService. */
static void *accept_run(void *arg) {
  rmq_ha_service *ha = arg;
  while (!atomic_load(&ha->stopping)) {
    struct pollfd pfd[2] = {{.fd = ha->listen_fd, .events = POLLIN},
                            {.fd = ha->stop_fd, .events = POLLIN}};
    poll(pfd, 2, REAP_INTERVAL_MS);
    reap(ha);
    if (atomic_load(&ha->stopping) || !(pfd[0].revents & POLLIN)) continue;
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    int fd = accept4(ha->listen_fd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) start_conn(ha, fd, &sa);
  }
  return NULL;
}

static int listen_on(rmq_ha_service *ha, const char *address, rmq_err *err) {
  struct sockaddr_storage sa;
  socklen_t len;
  char why[200];
  if (rmq_ha_resolve(address, &sa, &len, 1, why, sizeof why) < 0) {
    return rmq_err_set(err, RMQ_EIO, "ha_listen: cannot listen on %s: %s", address, why);
  }
  ha->listen_fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  if (ha->listen_fd >= 0) setsockopt(ha->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ha->listen_fd < 0 || bind(ha->listen_fd, (struct sockaddr *)&sa, len) != 0 ||
      listen(ha->listen_fd, 64) != 0) {
    return rmq_err_set(err, RMQ_EIO, "ha_listen: cannot listen on %s: %s", address,
                       strerror(errno));
  }
  len = sizeof sa;
  getsockname(ha->listen_fd, (struct sockaddr *)&sa, &len);
  rmq_ha_format_sockaddr(&sa, ha->address, sizeof ha->address);
  return RMQ_OK;
}

int rmq_ha_service_start(rmq_commitlog *cl, const rmq_config *cfg, rmq_ha_service **out,
                         rmq_err *err) {
  *out = NULL;
  rmq_ha_service *ha = calloc(1, sizeof *ha);
  if (!ha) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  ha->cl = cl;
  ha->heartbeat_ms = cfg->ha_heartbeat_ms;
  ha->housekeeping_ms = cfg->ha_housekeeping_ms;
  ha->push2slave_max = -1;
  ha->listen_fd = -1;
  pthread_mutex_init(&ha->mu, NULL);
  rmq_cond_init_monotonic(&ha->acked);
  ha->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int rc = ha->stop_fd < 0 ? rmq_err_set(err, RMQ_EIO, "eventfd: %s", strerror(errno))
                           : listen_on(ha, cfg->ha_listen, err);
  if (rc == RMQ_OK && pthread_create(&ha->accept_tid, NULL, accept_run, ha) != 0) {
    rc = rmq_err_set(err, RMQ_EIO, "cannot start the HA accept thread");
  }
  ha->accept_started = rc == RMQ_OK;
  if (rc != RMQ_OK) {
    rmq_ha_service_stop(ha);
    return rc;
  }
  *out = ha;
  return RMQ_OK;
}

void rmq_ha_service_stop(rmq_ha_service *ha) {
  if (!ha) return;
  atomic_store(&ha->stopping, true);
  uint64_t one = 1;
  if (ha->stop_fd >= 0) (void)!write(ha->stop_fd, &one, sizeof one);
  if (ha->accept_started) pthread_join(ha->accept_tid, NULL);
  pthread_mutex_lock(&ha->mu);
  for (ha_conn *c = ha->conns; c; c = c->next) {
    shutdown(c->fd, SHUT_RDWR);
    (void)!write(c->wake_fd, &one, sizeof one);
  }
  pthread_cond_broadcast(&ha->acked);
  ha_conn *all = ha->conns;
  ha->conns = NULL;
  pthread_mutex_unlock(&ha->mu);
  while (all) {
    ha_conn *next = all->next;
    conn_free(all);
    all = next;
  }
  if (ha->listen_fd >= 0) close(ha->listen_fd);
  if (ha->stop_fd >= 0) close(ha->stop_fd);
  pthread_cond_destroy(&ha->acked);
  pthread_mutex_destroy(&ha->mu);
  free(ha);
}

void rmq_ha_service_wakeup(void *ctx) {
  rmq_ha_service *ha = ctx;
  atomic_fetch_add(&ha->appends, 1);
  if (atomic_load(&ha->sleepers) == 0) return;
  uint64_t one = 1;
  pthread_mutex_lock(&ha->mu);
  for (ha_conn *c = ha->conns; c; c = c->next) {
    if (atomic_exchange(&c->sleeping, false)) (void)!write(c->wake_fd, &one, sizeof one);
  }
  pthread_mutex_unlock(&ha->mu);
}

const char *rmq_ha_service_address(rmq_ha_service *ha) { return ha->address; }

/* ------------------------------------------------------ group transfer */

int rmq_ha_service_wait(rmq_ha_service *ha, int64_t end_offset, int timeout_ms, rmq_err *err) {
  struct timespec deadline;
  rmq_deadline_in(&deadline, timeout_ms);
  pthread_mutex_lock(&ha->mu);
  bool available = ha->reported > 0 && end_offset - ha->push2slave_max < RMQ_HA_FALLBEHIND_MAX;
  int wait_rc = 0;
  while (available && ha->push2slave_max < end_offset && wait_rc == 0 &&
         !atomic_load(&ha->stopping)) {
    wait_rc = pthread_cond_timedwait(&ha->acked, &ha->mu, &deadline);
  }
  int64_t acked_offset = ha->push2slave_max;
  pthread_mutex_unlock(&ha->mu);
  if (!available) {
    return rmq_err_set(err, RMQ_ENOSLAVE,
                       "no slave connected (SLAVE_NOT_AVAILABLE); the message is written locally "
                       "up to offset %lld",
                       (long long)end_offset);
  }
  if (acked_offset >= end_offset) return RMQ_OK;
  return rmq_err_set(err, RMQ_ETIMEOUT,
                     "written locally but not replicated to a slave within %d ms "
                     "(FLUSH_SLAVE_TIMEOUT); a slave acknowledged up to %lld of %lld",
                     timeout_ms, (long long)acked_offset, (long long)end_offset);
}

/* --------------------------------------------------------------- views */

int rmq_ha_service_rows(rmq_ha_service *ha, rmq_ha_fn fn, void *ctx) {
  int64_t max = rmq_commitlog_max_offset(ha->cl);
  int rc = RMQ_OK;
  pthread_mutex_lock(&ha->mu);
  for (ha_conn *c = ha->conns; c && rc == RMQ_OK; c = c->next) {
    if (atomic_load(&c->done)) continue;
    int64_t ack = atomic_load(&c->ack);
    rmq_ha_row row = {.address = c->address,
                      .state = ack >= 0 ? "connected" : "handshake",
                      .last_error = "",
                      .offset = ack,
                      .lag_bytes = ack >= 0 ? max - ack : max,
                      .connected_since_ms = c->connected_since_ms};
    rc = fn(ctx, &row);
  }
  pthread_mutex_unlock(&ha->mu);
  return rc;
}

void rmq_ha_service_stats(rmq_ha_service *ha, rmq_stats *st) {
  pthread_mutex_lock(&ha->mu);
  int n = 0;
  for (ha_conn *c = ha->conns; c; c = c->next) n += !atomic_load(&c->done);
  st->ha_slaves = n;
  st->ha_push2slave_offset = ha->push2slave_max;
  snprintf(st->ha_state, sizeof st->ha_state, "listening on %s, %d slave(s), %d reported",
           ha->address, n, ha->reported);
  snprintf(st->ha_last_error, sizeof st->ha_last_error, "%s", ha->last_error);
  pthread_mutex_unlock(&ha->mu);
}
