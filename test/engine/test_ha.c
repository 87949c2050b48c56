/*
** test_ha.c: master/slave replication between two stores of this process
** on loopback: an async master and its slave end with byte-identical
** commit logs and working queues and index; a late slave starts at the
** master's last segment; sync_master waits for the slave's ack, fails at
** once with no slave and times out when the slave stops reporting; a slave
** that reports beyond the master's end is refused and the reason shown; a
** slave whose log diverged takes nothing it cannot check; a slave whose
** master went away reconnects and resumes from its own end; a slave takes
** a frame only at an offset it can hold (not negative, not near INT64_MAX,
** a segment's start when empty, its own end otherwise), makes nothing on
** disk for one it refuses, and follows a sound master after; the settings
** are checked.
*/
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "ha_wire.h"
#include "testutil.h"

#define FILE_SIZE 65536
#define TOPIC "HaTopic"

static void ha_config(rmq_config *cfg) {
  tu_small_config(cfg, FILE_SIZE);
  cfg->ha_heartbeat_ms = 100;
  cfg->ha_housekeeping_ms = 2000;
}

static rmq_store *open_master(const char *dir, rmq_role role, const char *listen) {
  rmq_config cfg;
  ha_config(&cfg);
  cfg.role = role;
  snprintf(cfg.ha_listen, sizeof cfg.ha_listen, "%s", listen);
  cfg.ha_slave_timeout_ms = 500;
  return tu_open(dir, &cfg);
}

static rmq_store *open_slave_flush(const char *dir, const char *master, bool flush_sync) {
  rmq_config cfg;
  ha_config(&cfg);
  cfg.flush_sync = flush_sync;
  cfg.role = RMQ_ROLE_SLAVE;
  snprintf(cfg.ha_master, sizeof cfg.ha_master, "%s", master);
  return tu_open(dir, &cfg);
}

static rmq_store *open_slave(const char *dir, const char *master) {
  return open_slave_flush(dir, master, false);
}

/* Put messages i in [from, to): queue i % 4, key k<i>, bodies of varied sizes. */
static int put_range(rmq_store *s, int from, int to) {
  static const int sizes[] = {0, 1, 16, 64, 100, 128, 200, 256, 300, 400, 512, 1024, 3000};
  char body[3000];
  int failed = 0;
  for (int i = from; i < to; i++) {
    char kv[64];
    int len = sizes[i % 13];
    for (int j = 0; j < len; j++) body[j] = (char)('a' + j % 26);
    snprintf(kv, sizeof kv, "KEYS=k%d;TAGS=T%d", i, i % 3);
    tu_msg t;
    rmq_err err = {0};
    if (rmq_store_put(s, tu_message(&t, TOPIC, i % 4, body, len, kv), 1, NULL, &err) != RMQ_OK) {
      if (failed++ == 0) fprintf(stderr, "  put %d: %s\n", i, err.msg);
    }
  }
  return failed;
}

static int64_t max_offset(rmq_store *s) { return rmq_commitlog_max_offset(rmq_store_commitlog(s)); }
static int64_t min_offset(rmq_store *s) { return rmq_commitlog_min_offset(rmq_store_commitlog(s)); }

/* Wait up to ms for the slave's end to reach offset. */
static bool wait_offset(rmq_store *slave, int64_t offset, int ms) {
  for (int64_t end = rmq_monotonic_ms() + ms; rmq_monotonic_ms() < end;) {
    if (max_offset(slave) >= offset) return true;
    usleep(5000);
  }
  return max_offset(slave) >= offset;
}

/* The slave's commit-log files equal the master's files of the same name. */
static void check_same_files(const char *master, const char *slave, int64_t from, int64_t to) {
  int files = 0;
  for (int64_t seg = from - from % FILE_SIZE; seg < to; seg += FILE_SIZE, files++) {
    char name[21], a[4200], b[4200];
    rmq_file_name(seg, name);
    snprintf(a, sizeof a, "%s/commitlog/%s", master, name);
    snprintf(b, sizeof b, "%s/commitlog/%s", slave, name);
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    CHECK(fa && fb);
    static uint8_t ba[FILE_SIZE], bb[FILE_SIZE];
    size_t na = fa ? fread(ba, 1, sizeof ba, fa) : 0, nb = fb ? fread(bb, 1, sizeof bb, fb) : 1;
    CHECK_EQ_INT(na, nb);
    if (na == nb) CHECK_EQ_MEM(ba, bb, na);
    if (fa) fclose(fa);
    if (fb) fclose(fb);
  }
  CHECK(files > 0);
}

/* Each queue of the slave holds the master's entries from the slave's start on. */
static void check_queues(rmq_store *master, rmq_store *slave) {
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_wait_dispatched(master, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_store_wait_dispatched(slave, &err), RMQ_OK);
  for (int q = 0; q < 4; q++) {
    rmq_consume_queue *mq = rmq_store_find_queue(master, TOPIC, q);
    rmq_consume_queue *sq = rmq_store_find_queue(slave, TOPIC, q);
    CHECK(mq && sq);
    if (!mq || !sq) continue;
    CHECK_EQ_INT(rmq_cq_max_offset(sq), rmq_cq_max_offset(mq));
    rmq_cq_iter mi, si;
    rmq_cq_entry me, se;
    rmq_cq_iter_start(&si, sq, rmq_cq_min_offset(sq));
    rmq_cq_iter_start(&mi, mq, rmq_cq_min_offset(sq));
    int n = 0, same = 0;
    while (rmq_cq_iter_next(&si, &se) && rmq_cq_iter_next(&mi, &me)) {
      n++;
      same += se.phy_offset == me.phy_offset && se.size == me.size && se.tags_code == me.tags_code;
    }
    CHECK(n > 0);
    CHECK_EQ_INT(same, n);
    rmq_cq_iter_stop(&si);
    rmq_cq_iter_stop(&mi);
  }
}

/* The slave finds message i by its key, at the master's offset. */
static void check_key(rmq_store *master, rmq_store *slave, int i) {
  char key[32];
  snprintf(key, sizeof key, "k%d", i);
  int64_t a[4], b[4];
  int na = 0, nb = 0;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_query_key(master, TOPIC, key, 0, INT64_MAX, 4, a, &na, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_store_query_key(slave, TOPIC, key, 0, INT64_MAX, 4, b, &nb, &err), RMQ_OK);
  CHECK_EQ_INT(nb, 1);
  CHECK(na == 1 && nb == 1 && a[0] == b[0]);
}

typedef struct ha_rows {
  int n;
  rmq_ha_row row;
  char state[32], last_error[256], address[64];
} ha_rows;

static int keep_row(void *ctx, const rmq_ha_row *r) {
  ha_rows *h = ctx;
  h->n++;
  h->row = *r;
  snprintf(h->state, sizeof h->state, "%s", r->state);
  snprintf(h->last_error, sizeof h->last_error, "%s", r->last_error);
  snprintf(h->address, sizeof h->address, "%s", r->address);
  return RMQ_OK;
}

static ha_rows rows_of(rmq_store *s) {
  ha_rows h = {0};
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_ha(s, keep_row, &h, &err), RMQ_OK);
  return h;
}

/* Wait until the master has a slave that reported. */
static bool wait_connected(rmq_store *m) {
  for (int i = 0; i < 500; i++) {
    if (strcmp(rows_of(m).state, "connected") == 0) return true;
    usleep(10000);
  }
  return false;
}

/* An empty slave of an empty master gets everything, as it is put. */
static void test_async(void) {
  char md[64], sd[64];
  tu_tmpdir(md, sizeof md);
  tu_tmpdir(sd, sizeof sd);
  rmq_store *m = open_master(md, RMQ_ROLE_MASTER, "127.0.0.1:0");
  rmq_store *s = m ? open_slave(sd, rmq_store_ha_address(m)) : NULL;
  if (s) {
    CHECK(wait_connected(m));
    CHECK_EQ_INT(put_range(m, 0, 4), 0);
    /* A long poll on the slave wakes as replicated data is dispatched. */
    CHECK(rmq_store_wait_queue(s, TOPIC, 3, 0, rmq_monotonic_ms() + 5000));
    CHECK_EQ_INT(put_range(m, 4, 300), 0);
    CHECK(wait_offset(s, max_offset(m), 10000));
    CHECK_EQ_INT(max_offset(s), max_offset(m));
    CHECK_EQ_INT(min_offset(s), 0);
    check_same_files(md, sd, 0, max_offset(m));
    check_queues(m, s);
    check_key(m, s, 0);
    check_key(m, s, 299);
    ha_rows mr = rows_of(m), sr = rows_of(s);
    CHECK_EQ_INT(mr.n, 1);
    CHECK_EQ_STR(mr.state, "connected");
    CHECK_EQ_INT(mr.row.lag_bytes, 0);
    CHECK_EQ_INT(sr.n, 1);
    CHECK_EQ_STR(sr.state, "connected");
    CHECK_EQ_STR(sr.address, rmq_store_ha_address(m));
    CHECK_EQ_INT(sr.row.offset, max_offset(m));
    tu_msg t;
    rmq_err err = {0};
    CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, TOPIC, 0, "x", 1, NULL), 1, NULL, &err),
                 RMQ_EINVAL);
    CHECK(strstr(err.msg, rmq_store_ha_address(m)) != NULL);
    rmq_stats st;
    CHECK_EQ_INT(rmq_store_stats(s, &st, &err), RMQ_OK);
    CHECK_EQ_STR(st.role, "slave");
    CHECK_EQ_INT(rmq_store_stats(m, &st, &err), RMQ_OK);
    CHECK_EQ_STR(st.role, "master");
    CHECK_EQ_INT(st.ha_slaves, 1);
    CHECK_EQ_INT(st.ha_push2slave_offset, max_offset(m));
  }
  rmq_store_close(s);
  rmq_store_close(m);
  /* Reopened as it was, the slave's store is sound and holds the same messages. */
  rmq_config cfg;
  ha_config(&cfg);
  rmq_store *again = tu_open(sd, &cfg);
  if (again) CHECK_EQ_INT(rmq_store_find_queue(again, TOPIC, 1) != NULL, 1);
  rmq_store_close(again);
  tu_rmrf(md);
  tu_rmrf(sd);
}

/*
** A slave that connects late starts at the master's last segment
** (HAConnection's rule). This one names its master by host name, and
** flushes synchronously: what it acknowledged is on its disk.
*/
static void test_late_slave(void) {
  char md[64], sd[64];
  tu_tmpdir(md, sizeof md);
  tu_tmpdir(sd, sizeof sd);
  rmq_store *m = open_master(md, RMQ_ROLE_MASTER, "127.0.0.1:0");
  if (m) CHECK_EQ_INT(put_range(m, 0, 500), 0);
  /* The master by host name. */
  char by_name[64];
  snprintf(by_name, sizeof by_name, "localhost%s", m ? strrchr(rmq_store_ha_address(m), ':') : "");
  rmq_store *s = m ? open_slave_flush(sd, by_name, true) : NULL;
  bool caught_up = s && wait_offset(s, max_offset(m), 10000);
  CHECK(caught_up);
  if (s && !caught_up) fprintf(stderr, "  slave of %s: %s\n", by_name, rows_of(s).last_error);
  if (caught_up) {
    int64_t start = max_offset(m) - max_offset(m) % FILE_SIZE;
    CHECK(start > 0);
    CHECK_EQ_INT(min_offset(s), start);
    CHECK_EQ_INT(put_range(m, 500, 700), 0);
    CHECK(wait_offset(s, max_offset(m), 10000));
    check_same_files(md, sd, start, max_offset(m));
    check_queues(m, s);
    check_key(m, s, 699);
    rmq_consume_queue *q0 = rmq_store_find_queue(s, TOPIC, 0);
    CHECK(q0 && rmq_cq_min_offset(q0) > 0);
    rmq_stats st;
    rmq_err err = {0};
    for (int i = 0; i < 500 && rows_of(m).row.offset < max_offset(m); i++) usleep(10000);
    CHECK_EQ_INT(rows_of(m).row.offset, max_offset(m));
    CHECK_EQ_INT(rmq_store_stats(s, &st, &err), RMQ_OK);
    CHECK(st.flushed_offset >= max_offset(m));
  }
  rmq_store_close(s);
  rmq_store_close(m);
  tu_rmrf(md);
  tu_rmrf(sd);
}

/*
** A slave whose log is empty but has a segment 0 (made ahead by a first
** transaction, or by a heartbeat before a crash) starts at its master's last
** segment all the same: the empty segment goes.
*/
static void test_empty_segment(void) {
  char md[64], sd[64];
  tu_tmpdir(md, sizeof md);
  tu_tmpdir(sd, sizeof sd);
  rmq_config cfg;
  ha_config(&cfg);
  rmq_store *plain = tu_open(sd, &cfg);
  if (plain) rmq_store_staging_give(plain, rmq_store_staging_take(plain));
  rmq_store_close(plain);
  char seg0[128];
  snprintf(seg0, sizeof seg0, "%s/commitlog/00000000000000000000", sd);
  FILE *f = fopen(seg0, "rb");
  CHECK(f != NULL);
  if (f) fclose(f);
  rmq_store *m = open_master(md, RMQ_ROLE_MASTER, "127.0.0.1:0");
  if (m) CHECK_EQ_INT(put_range(m, 0, 500), 0);
  rmq_store *s = m ? open_slave(sd, rmq_store_ha_address(m)) : NULL;
  if (s) {
    CHECK(wait_offset(s, max_offset(m), 10000));
    CHECK_EQ_INT(min_offset(s), max_offset(m) - max_offset(m) % FILE_SIZE);
    check_queues(m, s);
  }
  rmq_store_close(s);
  rmq_store_close(m);
  tu_rmrf(md);
  tu_rmrf(sd);
}

/*
** A consume queue whose only file is empty at recovery (a crash between
** its creation and its first entry, as a slave killed right after it began
** a queue in the middle): the file goes, and the re-dispatched entries land
** at their own queue offsets, with filler entries below the first.
*/
static void test_empty_queue_file(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  ha_config(&cfg);
  rmq_store *s = tu_open(dir, &cfg);
  if (s) CHECK_EQ_INT(put_range(s, 0, 2400), 0); /* 600 per queue: files 0..500 */
  rmq_store_close(s);
  char cmd[512];
  snprintf(cmd, sizeof cmd,
           "rm -f %s/consumequeue/%s/1/* && head -c 2000 /dev/zero > "
           "%s/consumequeue/%s/1/00000000000000010000 && touch %s/abort",
           dir, TOPIC, dir, TOPIC, dir);
  CHECK_EQ_INT(system(cmd), 0);
  s = tu_open(dir, &cfg);
  rmq_consume_queue *cq = s ? rmq_store_find_queue(s, TOPIC, 1) : NULL;
  CHECK(cq != NULL);
  int wrong = 0, n = 0;
  if (cq) {
    CHECK_EQ_INT(rmq_cq_max_offset(cq), 600);
    rmq_cq_iter it;
    rmq_cq_entry e;
    rmq_cq_iter_start(&it, cq, rmq_cq_min_offset(cq));
    for (int64_t q = rmq_cq_min_offset(cq); rmq_cq_iter_next(&it, &e); q++, n++) {
      rmq_commitlog_ref ref;
      rmq_message m;
      rmq_err err = {0};
      if (rmq_store_read(s, e.phy_offset, &ref, &m, &err) != RMQ_OK || m.queue_offset != q) {
        wrong++;
      }
      rmq_commitlog_ref_release(&ref);
    }
    rmq_cq_iter_stop(&it);
  }
  CHECK(n > 0);
  CHECK_EQ_INT(wrong, 0);
  rmq_store_close(s);
  tu_rmrf(dir);
}

/*
** A name with several addresses (Debian's localhost is ::1, then
** 127.0.0.1): the slave tries each in turn, and says why each one failed.
*/
static void test_every_address(void) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof sa;
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, len) == 0 && listen(lfd, 4) == 0 &&
        getsockname(lfd, (struct sockaddr *)&sa, &len) == 0);
  char v6[64], v4[64], why[400];
  snprintf(v6, sizeof v6, "[::1]:%d", ntohs(sa.sin_port));
  snprintf(v4, sizeof v4, "127.0.0.1:%d", ntohs(sa.sin_port));
  struct sockaddr_storage addrs[2];
  socklen_t lens[2];
  CHECK_EQ_INT(rmq_ha_resolve(v6, &addrs[0], &lens[0], 1, why, sizeof why), 1);
  CHECK_EQ_INT(rmq_ha_resolve(v4, &addrs[1], &lens[1], 1, why, sizeof why), 1);
  int fd = rmq_ha_connect(addrs, lens, 2, -1, 2000, why, sizeof why);
  CHECK(fd >= 0); /* nothing listens on ::1 at that port */
  if (fd >= 0) close(fd);
  close(lfd);
  fd = rmq_ha_connect(addrs, lens, 2, -1, 2000, why, sizeof why);
  CHECK(fd < 0);
  CHECK(strstr(why, ":1]:") && strstr(why, v4) && strchr(why, ';'));
  if (fd >= 0) close(fd);
  CHECK_EQ_INT(rmq_ha_resolve("localhost:1", addrs, lens, 2, why, sizeof why) > 0, 1);
  CHECK_EQ_INT(rmq_ha_resolve("no-such-host.invalid:1", addrs, lens, 2, why, sizeof why), -1);
  CHECK(strstr(why, "cannot resolve no-such-host.invalid") != NULL);
}

/* A raw peer: connect to the master, send reports by hand. */
static int peer_connect(const char *address) {
  struct sockaddr_storage sa;
  socklen_t len;
  if (rmq_ha_resolve(address, &sa, &len, 1, NULL, 0) < 0) return -1;
  int fd = socket(sa.ss_family, SOCK_STREAM, 0);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void peer_report(int fd, int64_t offset) {
  uint8_t b[8];
  rmq_ha_report_encode(b, offset);
  CHECK_EQ_INT(send(fd, b, sizeof b, MSG_NOSIGNAL), 8);
}

/* Does the master close the peer within ms (reading and dropping what it sends)? */
static bool peer_closed(int fd, int ms) {
  uint8_t buf[65536];
  for (int64_t end = rmq_monotonic_ms() + ms; rmq_monotonic_ms() < end;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 50) <= 0) continue;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return true;
  }
  return false;
}

/* sync_master: no slave, a slave, a slave that stops reporting. */
static void test_sync_master(void) {
  char md[64], sd[64];
  tu_tmpdir(md, sizeof md);
  tu_tmpdir(sd, sizeof sd);
  rmq_store *m = open_master(md, RMQ_ROLE_SYNC_MASTER, "127.0.0.1:0");
  if (!m) return;
  tu_msg t;
  rmq_err err = {0};
  int64_t t0 = rmq_monotonic_ms();
  CHECK_EQ_INT(rmq_store_put(m, tu_message(&t, TOPIC, 0, "a", 1, NULL), 1, NULL, &err),
               RMQ_ENOSLAVE);
  CHECK(rmq_monotonic_ms() - t0 < 200);
  CHECK(strstr(err.msg, "SLAVE_NOT_AVAILABLE") != NULL);
  CHECK(strstr(err.msg, "written locally") != NULL);
  CHECK(max_offset(m) > 0); /* written all the same, as RocketMQ does */

  /* A transaction's batch, appended but not replicated, is not kept for a second append. */
  rmq_batch *b = rmq_batch_new(m);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_batch_add(b, tu_message(&t, TOPIC, 1, "batch", 5, NULL), &err), RMQ_OK);
  int64_t first = -1, before = max_offset(m);
  CHECK_EQ_INT(rmq_batch_append(b, &first, &err), RMQ_ENOSLAVE);
  CHECK_EQ_INT(first, before);
  CHECK_EQ_INT(rmq_batch_count(b), 0);
  rmq_batch_free(b);

  /* A peer connected but silent is no slave yet: it does not count until it reports. */
  int fd = peer_connect(rmq_store_ha_address(m));
  CHECK(fd >= 0);
  for (int i = 0; i < 100 && rows_of(m).n == 0; i++) usleep(10000);
  CHECK_EQ_STR(rows_of(m).state, "handshake");
  rmq_err_clear(&err);
  t0 = rmq_monotonic_ms();
  CHECK_EQ_INT(rmq_store_put(m, tu_message(&t, TOPIC, 0, "h", 1, NULL), 1, NULL, &err),
               RMQ_ENOSLAVE);
  CHECK(rmq_monotonic_ms() - t0 < 200);

  /* Once it reported and then never again: the put times out. */
  peer_report(fd, max_offset(m));
  for (int i = 0; i < 100 && strcmp(rows_of(m).state, "connected") != 0; i++) usleep(10000);
  rmq_err_clear(&err);
  t0 = rmq_monotonic_ms();
  CHECK_EQ_INT(rmq_store_put(m, tu_message(&t, TOPIC, 0, "b", 1, NULL), 1, NULL, &err),
               RMQ_ETIMEOUT);
  int64_t waited = rmq_monotonic_ms() - t0;
  CHECK(waited >= 450 && waited < 3000);
  CHECK(strstr(err.msg, "FLUSH_SLAVE_TIMEOUT") != NULL);
  close(fd);

  /* A real slave: every put returns once the slave has it. */
  rmq_store *s = open_slave(sd, rmq_store_ha_address(m));
  for (int i = 0; s && i < 300 && rows_of(m).row.offset < max_offset(m); i++) usleep(10000);
  int failed = 0;
  for (int i = 0; s && i < 50; i++) {
    rmq_err_clear(&err);
    if (rmq_store_put(m, tu_message(&t, TOPIC, i % 4, "synced", 6, NULL), 1, NULL, &err) !=
        RMQ_OK) {
      if (failed++ == 0) fprintf(stderr, "  sync put %d: %s\n", i, err.msg);
      continue;
    }
    if (max_offset(s) < max_offset(m)) failed++;
  }
  CHECK_EQ_INT(failed, 0);
  rmq_store_close(s);
  rmq_store_close(m);
  tu_rmrf(md);
  tu_rmrf(sd);
}

/*
** The master's timers: a heartbeat (offset, 0) after ha_heartbeat_ms with
** nothing to send, and the connection closed after ha_housekeeping_ms
** without a report.
*/
static void test_master_timers(void) {
  char md[64];
  tu_tmpdir(md, sizeof md);
  rmq_store *m = open_master(md, RMQ_ROLE_MASTER, "127.0.0.1:0");
  if (!m) return;
  CHECK_EQ_INT(put_range(m, 0, 5), 0);
  int fd = peer_connect(rmq_store_ha_address(m));
  CHECK(fd >= 0);
  peer_report(fd, max_offset(m));
  uint8_t h[RMQ_HA_HEADER_SIZE];
  int64_t t0 = rmq_monotonic_ms();
  CHECK_EQ_INT(recv(fd, h, sizeof h, MSG_WAITALL), RMQ_HA_HEADER_SIZE);
  int64_t offset;
  int32_t size;
  rmq_ha_header_decode(h, &offset, &size);
  CHECK_EQ_INT(offset, max_offset(m));
  CHECK_EQ_INT(size, 0);
  CHECK(rmq_monotonic_ms() - t0 >= 50);
  /* Silent past housekeeping (2 s here): closed, and the reason kept. */
  t0 = rmq_monotonic_ms();
  CHECK(peer_closed(fd, 5000));
  CHECK(rmq_monotonic_ms() - t0 >= 1500);
  close(fd);
  rmq_stats st;
  rmq_err err = {0};
  for (int i = 0; i < 100; i++) {
    rmq_store_stats(m, &st, &err);
    if (st.ha_last_error[0]) break;
    usleep(10000);
  }
  CHECK(strstr(st.ha_last_error, "haHousekeepingInterval") != NULL);
  rmq_store_close(m);
  tu_rmrf(md);
}

/*
** The slave's side: a master that cannot be reached is a state with its
** reason, retried; one that accepts and stays silent is dropped after
** ha_housekeeping_ms; the first report goes out at once, then one each
** ha_heartbeat_ms.
*/
static void test_slave_timers(void) {
  char sd[64], address[64];
  tu_tmpdir(sd, sizeof sd);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof sa;
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, len) == 0 &&
        getsockname(lfd, (struct sockaddr *)&sa, &len) == 0);
  snprintf(address, sizeof address, "127.0.0.1:%d", ntohs(sa.sin_port));
  rmq_store *s = open_slave(sd, address); /* bound, not listening: refused */
  ha_rows r = {0};
  for (int i = 0; s && i < 200; i++) {
    r = rows_of(s);
    if (strcmp(r.state, "retrying") == 0) break;
    usleep(10000);
  }
  CHECK_EQ_STR(r.state, "retrying");
  CHECK(strstr(r.last_error, "cannot connect") != NULL);
  CHECK_EQ_INT(listen(lfd, 4), 0);
  struct pollfd p = {.fd = lfd, .events = POLLIN};
  int fd = poll(&p, 1, 3000) == 1 ? accept(lfd, NULL, NULL) : -1;
  CHECK(fd >= 0);
  uint8_t rep[8];
  int64_t t0 = rmq_monotonic_ms();
  CHECK_EQ_INT(recv(fd, rep, sizeof rep, MSG_WAITALL), 8);
  CHECK(rmq_monotonic_ms() - t0 < 1000);
  CHECK_EQ_INT(rmq_ha_report_decode(rep), 0);
  CHECK_EQ_INT(recv(fd, rep, sizeof rep, MSG_WAITALL), 8); /* the idle report */
  CHECK(peer_closed(fd, 5000));
  CHECK(rmq_monotonic_ms() - t0 >= 1500);
  for (int i = 0; i < 100; i++) {
    r = rows_of(s);
    if (strstr(r.last_error, "haHousekeepingInterval")) break;
    usleep(10000);
  }
  CHECK(strstr(r.last_error, "haHousekeepingInterval") != NULL);
  close(fd);
  close(lfd);
  rmq_store_close(s);
  tu_rmrf(sd);
}

/* A report beyond the master's end is refused at once, the first one too; stats say why. */
static void test_beyond_end(void) {
  char md[64];
  tu_tmpdir(md, sizeof md);
  rmq_store *m = open_master(md, RMQ_ROLE_MASTER, "127.0.0.1:0");
  if (!m) return;
  CHECK_EQ_INT(put_range(m, 0, 10), 0);
  int fd = peer_connect(rmq_store_ha_address(m));
  CHECK(fd >= 0);
  peer_report(fd, max_offset(m) + 1000);
  CHECK(peer_closed(fd, 2000));
  close(fd);
  rmq_stats st;
  rmq_err err = {0};
  for (int i = 0; i < 100; i++) {
    rmq_store_stats(m, &st, &err);
    if (st.ha_last_error[0]) break;
    usleep(10000);
  }
  CHECK(strstr(st.ha_last_error, "beyond the master's end") != NULL);
  CHECK_EQ_INT(st.ha_slaves, 0);
  CHECK_EQ_INT(st.ha_push2slave_offset, -1);
  rmq_store_close(m);
  tu_rmrf(md);
}

/*
** Diverged slaves. One whose log is longer than the master's is refused by
** the master, and so is one whose log ends where no record of the master
** starts; the slave keeps its log as it was. (A master that streams such
** bytes all the same, as RocketMQ's does, meets the slave's own record
** checks: test_ha_golden, scenario d.)
*/
static void test_diverged(void) {
  char m0[64], m1[64], sd[64];
  tu_tmpdir(m0, sizeof m0);
  tu_tmpdir(m1, sizeof m1);
  tu_tmpdir(sd, sizeof sd);
  rmq_config cfg;
  ha_config(&cfg);
  rmq_store *old = tu_open(sd, &cfg);
  if (old) CHECK_EQ_INT(put_range(old, 1000, 1150), 0);
  int64_t slave_end = old ? max_offset(old) : 0;
  rmq_store_close(old);

  rmq_store *m = open_master(m1, RMQ_ROLE_MASTER, "127.0.0.1:0");
  if (m) CHECK_EQ_INT(put_range(m, 0, 20), 0);
  rmq_store *s = m ? open_slave(sd, rmq_store_ha_address(m)) : NULL;
  rmq_stats st;
  rmq_err err = {0};
  for (int i = 0; s && i < 200; i++) {
    rmq_store_stats(m, &st, &err);
    if (st.ha_last_error[0]) break;
    usleep(10000);
  }
  if (s) CHECK(strstr(st.ha_last_error, "diverged") != NULL);
  /*
  ** The master grows past the slave's end, which is now the middle of one of
  ** the master's records: refused too (RocketMQ would stream from there).
  */
  if (s) CHECK_EQ_INT(put_range(m, 20, 400), 0);
  CHECK(m && max_offset(m) > slave_end);
  for (int i = 0; s && i < 300; i++) {
    rmq_store_stats(m, &st, &err);
    if (strstr(st.ha_last_error, "no record of the master starts")) break;
    usleep(10000);
  }
  CHECK(strstr(st.ha_last_error, "no record of the master starts") != NULL);
  ha_rows r = rows_of(s);
  CHECK(strcmp(r.state, "connected") != 0 || strstr(r.last_error, "closed") != NULL);
  if (s) CHECK_EQ_INT(max_offset(s), slave_end);
  if (s) CHECK_EQ_INT(rmq_store_wait_dispatched(s, &err), RMQ_OK);
  if (s) CHECK_EQ_INT(rmq_reput_skipped(rmq_store_reput(s)), 0);
  rmq_store_close(s);
  rmq_store_close(m);
  tu_rmrf(m0);
  tu_rmrf(m1);
  tu_rmrf(sd);
}

/* The master goes away and comes back on the same address: the slave resumes from its end. */
static void test_reconnect(void) {
  char md[64], sd[64], address[64];
  tu_tmpdir(md, sizeof md);
  tu_tmpdir(sd, sizeof sd);
  rmq_store *m = open_master(md, RMQ_ROLE_MASTER, "127.0.0.1:0");
  if (!m) return;
  snprintf(address, sizeof address, "%s", rmq_store_ha_address(m));
  rmq_store *s = open_slave(sd, address);
  CHECK(s && wait_connected(m));
  CHECK_EQ_INT(put_range(m, 0, 200), 0);
  CHECK(s && wait_offset(s, max_offset(m), 10000));
  rmq_store_close(m);
  ha_rows r = {0};
  for (int i = 0; s && i < 300; i++) {
    r = rows_of(s);
    if (strcmp(r.state, "connected") != 0) break;
    usleep(10000);
  }
  CHECK(strcmp(r.state, "connected") != 0);
  /* It saw the connection close, or (a slow poll here) already failed to connect again. */
  CHECK(strstr(r.last_error, "closed") != NULL || strstr(r.last_error, "cannot connect") != NULL);
  m = open_master(md, RMQ_ROLE_MASTER, address);
  if (m) CHECK_EQ_INT(put_range(m, 200, 400), 0);
  CHECK(m && s && wait_offset(s, max_offset(m), 10000));
  if (m && s) {
    check_same_files(md, sd, 0, max_offset(m));
    check_queues(m, s);
    CHECK_EQ_STR(rows_of(s).state, "connected");
  }
  rmq_store_close(s);
  rmq_store_close(m);
  tu_rmrf(md);
  tu_rmrf(sd);
}

/*
** A proxy between slave and master that forwards both ways and, when told,
** cuts every connection after `cut_after` more bytes from the master (the
** middle of a frame), as the golden transcripts' proxy did in scenario c.
*/
typedef struct proxy {
  int listen_fd;
  char address[64], upstream[64];
  atomic_bool stop;
  _Atomic int64_t cut_after; /* -1: forward everything */
  atomic_int connections;
  pthread_t tid;
} proxy;

/* Forward one connection until either side closes, the cut, or the stop. */
static void proxy_pipe(proxy *px, int down) {
  int up = peer_connect(px->upstream);
  if (up < 0) return;
  atomic_fetch_add(&px->connections, 1);
  uint8_t buf[16384];
  while (!atomic_load(&px->stop)) {
    struct pollfd p[2] = {{.fd = down, .events = POLLIN}, {.fd = up, .events = POLLIN}};
    if (poll(p, 2, 50) <= 0) continue;
    if (p[0].revents) {
      ssize_t n = recv(down, buf, sizeof buf, 0);
      if (n <= 0 || send(up, buf, (size_t)n, MSG_NOSIGNAL) != n) break;
    }
    if (p[1].revents) {
      ssize_t n = recv(up, buf, sizeof buf, 0);
      int64_t cut = atomic_load(&px->cut_after);
      if (n > 0 && cut >= 0 && n >= cut) {
        send(down, buf, (size_t)cut, MSG_NOSIGNAL);
        atomic_store(&px->cut_after, -1);
        break;
      }
      if (n > 0 && cut > 0) atomic_store(&px->cut_after, cut - n);
      if (n <= 0 || send(down, buf, (size_t)n, MSG_NOSIGNAL) != n) break;
    }
  }
  close(up);
}

static void *proxy_run(void *arg) {
  proxy *px = arg;
  while (!atomic_load(&px->stop)) {
    struct pollfd p = {.fd = px->listen_fd, .events = POLLIN};
    if (poll(&p, 1, 50) <= 0) continue;
    int down = accept(px->listen_fd, NULL, NULL);
    if (down < 0) continue;
    proxy_pipe(px, down);
    close(down);
  }
  return NULL;
}

static bool proxy_start(proxy *px, const char *upstream) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof sa;
  snprintf(px->upstream, sizeof px->upstream, "%s", upstream);
  atomic_store(&px->cut_after, -1);
  px->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
  if (px->listen_fd < 0 || bind(px->listen_fd, (struct sockaddr *)&sa, len) != 0 ||
      listen(px->listen_fd, 4) != 0 || getsockname(px->listen_fd, (struct sockaddr *)&sa, &len)) {
    return false;
  }
  snprintf(px->address, sizeof px->address, "127.0.0.1:%d", ntohs(sa.sin_port));
  return pthread_create(&px->tid, NULL, proxy_run, px) == 0;
}

static void proxy_stop(proxy *px) {
  atomic_store(&px->stop, true);
  pthread_join(px->tid, NULL);
  close(px->listen_fd);
}

/*
** The connection is cut in the middle of a frame while data flows: the
** slave drops the part it holds, reconnects, reports its own end and the
** master resumes from there; the logs end identical.
*/
static void test_cut_mid_frame(void) {
  char md[64], sd[64];
  tu_tmpdir(md, sizeof md);
  tu_tmpdir(sd, sizeof sd);
  rmq_store *m = open_master(md, RMQ_ROLE_MASTER, "127.0.0.1:0");
  proxy px = {0};
  bool up = m && proxy_start(&px, rmq_store_ha_address(m));
  CHECK(up);
  rmq_store *s = up ? open_slave(sd, px.address) : NULL;
  if (s && wait_connected(m)) {
    CHECK_EQ_INT(put_range(m, 0, 200), 0);
    /* Cut a slave that holds data: an empty one starts over at the master's last segment. */
    CHECK(wait_offset(s, max_offset(m), 10000));
    atomic_store(&px.cut_after, 5000);
    CHECK_EQ_INT(put_range(m, 200, 600), 0);
    for (int i = 0; i < 300 && atomic_load(&px.connections) < 2; i++) usleep(10000);
    CHECK(atomic_load(&px.connections) >= 2);
    CHECK(wait_offset(s, max_offset(m), 10000));
    check_same_files(md, sd, 0, max_offset(m));
    check_queues(m, s);
    CHECK_EQ_INT(rmq_reput_skipped(rmq_store_reput(s)), 0);
  }
  rmq_store_close(s);
  if (up) proxy_stop(&px);
  rmq_store_close(m);
  tu_rmrf(md);
  tu_rmrf(sd);
}

/*
** With transient_store_pool on both sides: the master sends what its commit
** service made readable, woken by the commit (not by the 5 s heartbeat);
** the slave's appends go through its own write buffers.
*/
static void test_transient_pool(void) {
  char md[64], sd[64];
  tu_tmpdir(md, sizeof md);
  tu_tmpdir(sd, sizeof sd);
  rmq_config cfg;
  tu_small_config(&cfg, FILE_SIZE);
  cfg.transient_store_pool = 2;
  snprintf(cfg.ha_listen, sizeof cfg.ha_listen, "127.0.0.1:0");
  rmq_store *m = tu_open(md, &cfg);
  rmq_store *s = NULL;
  if (m) {
    rmq_config scfg;
    tu_small_config(&scfg, FILE_SIZE);
    scfg.transient_store_pool = 2;
    scfg.role = RMQ_ROLE_SLAVE;
    snprintf(scfg.ha_master, sizeof scfg.ha_master, "%s", rmq_store_ha_address(m));
    s = tu_open(sd, &scfg);
  }
  if (s && wait_connected(m)) {
    CHECK_EQ_INT(put_range(m, 0, 300), 0);
    int64_t t0 = rmq_monotonic_ms();
    rmq_err err = {0};
    CHECK_EQ_INT(rmq_store_wait_dispatched(m, &err), RMQ_OK); /* commits the buffers */
    CHECK(wait_offset(s, rmq_commitlog_max_offset(rmq_store_commitlog(m)), 3000));
    CHECK(rmq_monotonic_ms() - t0 < 3000);
    CHECK_EQ_INT(rmq_store_wait_dispatched(s, &err), RMQ_OK);
    check_queues(m, s);
  }
  int64_t end = m ? max_offset(m) : 0;
  rmq_store_close(s);
  rmq_store_close(m);
  if (end > 0) check_same_files(md, sd, 0, end);
  tu_rmrf(md);
  tu_rmrf(sd);
}

/*
** A fake master: a socket listening on loopback that the test answers by
** hand, frame by frame, to see what a slave takes.
*/
static int fake_listen(char *address, size_t cap) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof sa;
  int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, 4) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  snprintf(address, cap, "127.0.0.1:%d", ntohs(sa.sin_port));
  return fd;
}

/* The entries of dir/commitlog (0 when it does not exist). */
static int commitlog_files(const char *dir) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "ls -A %s/commitlog 2>/dev/null | wc -l", dir);
  FILE *p = popen(cmd, "r");
  int n = -1;
  if (p && fscanf(p, "%d", &n) != 1) n = -1;
  if (p) pclose(p);
  return n;
}

/* Wait up to 3 s for the slave's last_error to be `expected`; returns what it is. */
static ha_rows wait_last_error(rmq_store *s, const char *expected) {
  ha_rows r = {0};
  for (int i = 0; i < 300; i++) {
    r = rows_of(s);
    if (strcmp(r.last_error, expected) == 0) break;
    usleep(10000);
  }
  return r;
}

/*
** Serve the slave's next connection one frame: the header (offset, size)
** and `sent` bytes of its body. The slave must report `reports` first, then
** drop the connection, with `expected` as its last_error.
*/
static void refused_frame(rmq_store *s, int lfd, int64_t reports, int64_t offset, int32_t size,
                          int32_t sent, const char *expected) {
  struct pollfd p = {.fd = lfd, .events = POLLIN};
  int fd = poll(&p, 1, 5000) == 1 ? accept(lfd, NULL, NULL) : -1;
  CHECK(fd >= 0);
  if (fd < 0) return;
  uint8_t frame[RMQ_HA_HEADER_SIZE + 256] = {0}, rep[RMQ_HA_REPORT_SIZE];
  CHECK_EQ_INT(recv(fd, rep, sizeof rep, MSG_WAITALL), RMQ_HA_REPORT_SIZE);
  CHECK_EQ_INT(rmq_ha_report_decode(rep), reports);
  rmq_ha_header_encode(frame, offset, size);
  size_t n = RMQ_HA_HEADER_SIZE + (size_t)sent;
  CHECK_EQ_INT(send(fd, frame, n, MSG_NOSIGNAL), n);
  CHECK(peer_closed(fd, 3000));
  close(fd);
  CHECK_EQ_STR(wait_last_error(s, expected).last_error, expected);
}

/*
** An empty slave takes a first frame only at an offset it can hold: not
** negative, not where a segment and a frame would pass 2^62, at a segment's
** start. Each is refused with its reason, and nothing is made on disk; a
** sound master is then followed as if nothing had happened.
*/
static void test_bad_first_frame(void) {
  char md[64], sd[64], address[64], want[512];
  tu_tmpdir(md, sizeof md);
  tu_tmpdir(sd, sizeof sd);
  int lfd = fake_listen(address, sizeof address);
  CHECK(lfd >= 0);
  rmq_store *s = lfd >= 0 ? open_slave(sd, address) : NULL;
  if (s) {
    snprintf(want, sizeof want,
             "master %s sent a frame at offset -65536: a commit-log offset is never negative",
             address);
    refused_frame(s, lfd, 0, -FILE_SIZE, 0, 0, want);
    CHECK_EQ_INT(commitlog_files(sd), 0);
    /* Aligned but near INT64_MAX; one whose end alone overflows; the first one past the bound. */
    const int64_t past = RMQ_MAX_LOG_OFFSET - FILE_SIZE;
    const int64_t far[] = {INT64_MAX - INT64_MAX % FILE_SIZE, INT64_MAX - 100, past + 1};
    for (int i = 0; i < 3; i++) {
      snprintf(want, sizeof want,
               "master %s sent a frame at offset %lld: a slave takes offsets up to %lld, so that "
               "its log ends by 2^62",
               address, (long long)far[i], (long long)past);
      refused_frame(s, lfd, 0, far[i], i == 1 ? 200 : 0, i == 1 ? 200 : 0, want);
    }
    CHECK_EQ_INT(commitlog_files(sd), 0);
    snprintf(want, sizeof want,
             "master %s sent offset 1000 to an empty slave: its log must start at a segment's "
             "start, a multiple of commitlog_file_size (65536)",
             address);
    refused_frame(s, lfd, 0, 1000, 16, 16, want);
    CHECK_EQ_INT(commitlog_files(sd), 0);
    CHECK_EQ_INT(max_offset(s), 0);
  }
  if (lfd >= 0) close(lfd);
  /* A sound master on the same address: the slave follows it from its start. */
  rmq_store *m = s ? open_master(md, RMQ_ROLE_MASTER, address) : NULL;
  if (m) {
    CHECK(wait_connected(m));
    CHECK_EQ_INT(put_range(m, 0, 300), 0);
    CHECK(wait_offset(s, max_offset(m), 10000));
    CHECK_EQ_INT(min_offset(s), 0);
    check_same_files(md, sd, 0, max_offset(m));
    check_queues(m, s);
    CHECK_EQ_STR(rows_of(s).state, "connected");
  }
  rmq_store_close(s);
  rmq_store_close(m);
  tu_rmrf(md);
  tu_rmrf(sd);
}

/*
** A slave with a log takes a frame only at its own end: a gap, an overlap
** and a negative offset are refused, its files stay as they were, and a
** master whose log it continues is followed.
*/
static void test_bad_frame_offset(void) {
  char md[64], sd[64], address[64], want[512], cmd[256];
  tu_tmpdir(md, sizeof md);
  tu_tmpdir(sd, sizeof sd);
  rmq_config cfg;
  ha_config(&cfg);
  rmq_store *plain = tu_open(sd, &cfg);
  if (plain) CHECK_EQ_INT(put_range(plain, 0, 100), 0);
  int64_t end = plain ? max_offset(plain) : 0;
  rmq_store_close(plain);
  /* The master starts from a copy of the slave's store: the slave's log is its prefix. */
  snprintf(cmd, sizeof cmd, "cp -a %s/. %s/", sd, md);
  CHECK_EQ_INT(system(cmd), 0);
  int files = commitlog_files(sd);
  int lfd = fake_listen(address, sizeof address);
  CHECK(lfd >= 0 && end > 0);
  rmq_store *s = lfd >= 0 ? open_slave(sd, address) : NULL;
  if (s) {
    const int64_t wrong[] = {end + 100, end - 100, -FILE_SIZE};
    for (int i = 0; i < 3; i++) {
      if (i < 2) {
        snprintf(want, sizeof want,
                 "master %s sent data for offset %lld, but the slave's commit log ends at %lld",
                 address, (long long)wrong[i], (long long)end);
      } else {
        snprintf(want, sizeof want,
                 "master %s sent a frame at offset %lld: a commit-log offset is never negative",
                 address, (long long)wrong[i]);
      }
      refused_frame(s, lfd, end, wrong[i], 32, 32, want);
    }
    CHECK_EQ_INT(commitlog_files(sd), files);
    CHECK_EQ_INT(max_offset(s), end);
  }
  if (lfd >= 0) close(lfd);
  rmq_store *m = s ? open_master(md, RMQ_ROLE_MASTER, address) : NULL;
  if (m) {
    CHECK_EQ_INT(max_offset(m), end);
    CHECK_EQ_INT(put_range(m, 100, 300), 0);
    CHECK(wait_offset(s, max_offset(m), 10000));
    check_same_files(md, sd, 0, max_offset(m));
    check_queues(m, s);
  }
  rmq_store_close(s);
  rmq_store_close(m);
  tu_rmrf(md);
  tu_rmrf(sd);
}

static void check_bad_config(void (*set)(rmq_config *), const char *needle) {
  rmq_config cfg;
  ha_config(&cfg);
  set(&cfg);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_config_check(&cfg, &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, needle) != NULL);
  if (!strstr(err.msg, needle)) fprintf(stderr, "  %s\n", err.msg);
}

static void slave_without_master(rmq_config *c) { c->role = RMQ_ROLE_SLAVE; }
static void master_with_master(rmq_config *c) { strcpy(c->ha_master, "127.0.0.1:10912"); }
static void bad_address(rmq_config *c) { strcpy(c->ha_listen, "10.0.0.5"); }
static void bad_host(rmq_config *c) { strcpy(c->ha_listen, "broker a:10912"); }
static void bad_port(rmq_config *c) { strcpy(c->ha_listen, "127.0.0.1:70000"); }
static void slave_port_zero(rmq_config *c) {
  c->role = RMQ_ROLE_SLAVE;
  strcpy(c->ha_master, "127.0.0.1:0");
}
static void sync_without_listen(rmq_config *c) { c->role = RMQ_ROLE_SYNC_MASTER; }

static void test_config(void) {
  check_bad_config(slave_without_master, "ha_master");
  check_bad_config(master_with_master, "ha_master");
  check_bad_config(bad_address, "ha_listen");
  check_bad_config(bad_host, "ha_listen");
  check_bad_config(bad_port, "ha_listen");
  check_bad_config(slave_port_zero, "ha_master");
  check_bad_config(sync_without_listen, "ha_listen");
  rmq_role role;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_role_parse("sync_master", &role, &err), RMQ_OK);
  CHECK_EQ_INT(role, RMQ_ROLE_SYNC_MASTER);
  CHECK_EQ_INT(rmq_role_parse("SLAVE", &role, &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "role") != NULL);

  /* A port in use fails the open, naming ha_listen and the address. */
  char a[64], b[64];
  tu_tmpdir(a, sizeof a);
  tu_tmpdir(b, sizeof b);
  rmq_store *m = open_master(a, RMQ_ROLE_MASTER, "127.0.0.1:0");
  if (m) {
    rmq_config cfg;
    ha_config(&cfg);
    snprintf(cfg.ha_listen, sizeof cfg.ha_listen, "%s", rmq_store_ha_address(m));
    rmq_store *other = NULL;
    rmq_err_clear(&err);
    CHECK_EQ_INT(rmq_store_open(b, &cfg, &other, &err), RMQ_EIO);
    CHECK(strstr(err.msg, "ha_listen") && strstr(err.msg, rmq_store_ha_address(m)));
    CHECK(other == NULL);
  }
  rmq_store_close(m);
  tu_rmrf(a);
  tu_rmrf(b);
}

int main(void) {
  test_config();
  test_async();
  test_late_slave();
  test_every_address();
  test_sync_master();
  test_master_timers();
  test_slave_timers();
  test_beyond_end();
  test_diverged();
  test_reconnect();
  test_cut_mid_frame();
  test_transient_pool();
  test_empty_segment();
  test_empty_queue_file();
  test_bad_first_frame();
  test_bad_frame_offset();
  return check_report();
}
