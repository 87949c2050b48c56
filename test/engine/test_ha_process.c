/*
** test_ha_process.c: replication between processes on loopback, with
** SIGKILL. The program runs itself (fork and exec of /proc/self/exe) as the
** other node:
**
**   test_ha_process master <dir> <role>   open a master on 127.0.0.1:0,
**        print "address <ip:port>", wait for a slave to report, then put
**        messages one by one, printing "acked <end offset>" after each put
**        that returned, until killed
**   test_ha_process slave <dir> <master>  open a slave, print "ready",
**        wait to be killed
**
** - A sync_master killed with SIGKILL: every message whose put returned is
**   on the slave (this process), whole and dispatched.
** - A slave killed mid-stream and started again recovers its log and
**   resumes from its own end: in the end its commit log is the master's,
**   byte for byte, and so are its consume queues.
**
** RMQ_HA_KILLS=N runs both cases N times (default 1), each with a kill at a
** random point (the seed is printed).
*/
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"

#define FILE_SIZE 65536
#define TOPIC "HaProc"

static void node_config(rmq_config *cfg) {
  tu_small_config(cfg, FILE_SIZE);
  cfg->ha_heartbeat_ms = 100;
  cfg->ha_housekeeping_ms = 2000;
}

static int put_one(rmq_store *s, int i, int len, int64_t *end) {
  static char body[1024];
  memset(body, 'a' + i % 26, sizeof body);
  char kv[32];
  snprintf(kv, sizeof kv, "KEYS=k%d", i);
  tu_msg t;
  rmq_put_result r;
  rmq_err err = {0};
  int rc = rmq_store_put(s, tu_message(&t, TOPIC, i % 4, body, len, kv), 1, &r, &err);
  if (rc == RMQ_OK) *end = r.physical_offset + r.size;
  return rc;
}

static int first_state(void *ctx, const rmq_ha_row *r) {
  snprintf(ctx, 32, "%s", r->state);
  return RMQ_OK;
}

static bool reported(rmq_store *m) {
  char state[32] = "";
  rmq_err err = {0};
  rmq_store_ha(m, first_state, state, &err);
  return strcmp(state, "connected") == 0;
}

/* ------------------------------------------------------------ the nodes */

static int run_master(const char *dir, const char *role_name) {
  rmq_config cfg;
  node_config(&cfg);
  rmq_err err = {0};
  if (rmq_role_parse(role_name, &cfg.role, &err) != RMQ_OK) return 2;
  snprintf(cfg.ha_listen, sizeof cfg.ha_listen, "127.0.0.1:0");
  cfg.ha_slave_timeout_ms = 3000;
  rmq_store *m = NULL;
  if (rmq_store_open(dir, &cfg, &m, &err) != RMQ_OK) {
    fprintf(stderr, "master: %s\n", err.msg);
    return 2;
  }
  printf("address %s\n", rmq_store_ha_address(m));
  fflush(stdout);
  while (!reported(m)) usleep(5000);
  for (int i = 0;; i++) {
    int64_t end;
    if (put_one(m, i, 200, &end) != RMQ_OK) continue;
    printf("acked %lld\n", (long long)end);
    fflush(stdout);
  }
}

static int run_slave(const char *dir, const char *master) {
  rmq_config cfg;
  node_config(&cfg);
  cfg.role = RMQ_ROLE_SLAVE;
  snprintf(cfg.ha_master, sizeof cfg.ha_master, "%s", master);
  rmq_store *s = NULL;
  rmq_err err = {0};
  if (rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK) {
    fprintf(stderr, "slave: %s\n", err.msg);
    return 2;
  }
  printf("ready\n");
  fflush(stdout);
  for (;;) pause();
}

/* Start this program as a node; its stdout is *out. */
static pid_t start_node(const char *mode, const char *dir, const char *arg, FILE **out) {
  int p[2];
  if (pipe(p) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    close(p[1]);
    execl("/proc/self/exe", "test_ha_process", mode, dir, arg, (char *)NULL);
    _exit(127);
  }
  close(p[1]);
  *out = fdopen(p[0], "r");
  return pid;
}

static void kill_node(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

/* ---------------------------------------------------------------- tests */

/* "acked <offset>\n"; a line the kill cut short is no acknowledgement. */
static bool acked_line(const char *line, long long *end) {
  size_t n = strlen(line);
  return n > 0 && line[n - 1] == '\n' && sscanf(line, "acked %lld", end) == 1;
}

/* Every put a killed sync_master acknowledged is on the slave. */
static void test_kill_sync_master(int kill_after) {
  char md[64], sd[64], line[256], address[64] = "";
  tu_tmpdir(md, sizeof md);
  tu_tmpdir(sd, sizeof sd);
  FILE *out;
  pid_t pid = start_node("master", md, "sync_master", &out);
  if (fgets(line, sizeof line, out)) sscanf(line, "address %63s", address);
  CHECK(address[0] != '\0');
  rmq_config cfg;
  node_config(&cfg);
  cfg.role = RMQ_ROLE_SLAVE;
  snprintf(cfg.ha_master, sizeof cfg.ha_master, "%s", address);
  rmq_store *s = tu_open(sd, &cfg);
  int acked = 0;
  long long last = 0, end;
  while (s && acked < kill_after && fgets(line, sizeof line, out)) {
    if (acked_line(line, &end)) acked++, last = end;
  }
  kill_node(pid);
  while (fgets(line, sizeof line, out)) { /* acknowledged before the kill */
    if (acked_line(line, &end)) acked++, last = end;
  }
  fclose(out);
  CHECK(acked >= kill_after);
  if (s) {
    CHECK(rmq_commitlog_max_offset(rmq_store_commitlog(s)) >= last);
    rmq_err err = {0};
    CHECK_EQ_INT(rmq_store_wait_dispatched(s, &err), RMQ_OK);
    int64_t messages = 0;
    for (int q = 0; q < 4; q++) {
      rmq_consume_queue *cq = rmq_store_find_queue(s, TOPIC, q);
      if (cq) messages += rmq_cq_max_offset(cq);
    }
    CHECK(messages >= acked);
    CHECK_EQ_INT(rmq_reput_skipped(rmq_store_reput(s)), 0);
  }
  rmq_store_close(s);
  tu_rmrf(md);
  tu_rmrf(sd);
}

static bool wait_acked(rmq_store *m, int64_t offset, int ms) {
  for (int64_t t = rmq_monotonic_ms() + ms; rmq_monotonic_ms() < t; usleep(5000)) {
    rmq_stats st;
    rmq_err err = {0};
    rmq_store_stats(m, &st, &err);
    if (st.ha_slaves > 0 && reported(m) && st.ha_push2slave_offset >= offset) return true;
  }
  return false;
}

static void check_same_log(const char *a, const char *b, int64_t end) {
  static uint8_t x[FILE_SIZE], y[FILE_SIZE];
  for (int64_t seg = 0; seg < end; seg += FILE_SIZE) {
    char name[21], pa[4200], pb[4200];
    rmq_file_name(seg, name);
    snprintf(pa, sizeof pa, "%s/commitlog/%s", a, name);
    snprintf(pb, sizeof pb, "%s/commitlog/%s", b, name);
    FILE *fa = fopen(pa, "rb"), *fb = fopen(pb, "rb");
    size_t na = fa ? fread(x, 1, sizeof x, fa) : 0, nb = fb ? fread(y, 1, sizeof y, fb) : 0;
    CHECK(na == FILE_SIZE && nb == FILE_SIZE && memcmp(x, y, na) == 0);
    if (fa) fclose(fa);
    if (fb) fclose(fb);
  }
}

/* A slave killed mid-stream, started again: it recovers and resumes from its own end. */
static void test_kill_slave(int kill_at) {
  char md[64], sd[64], line[256];
  tu_tmpdir(md, sizeof md);
  tu_tmpdir(sd, sizeof sd);
  rmq_config cfg;
  node_config(&cfg);
  snprintf(cfg.ha_listen, sizeof cfg.ha_listen, "127.0.0.1:0");
  rmq_store *m = tu_open(md, &cfg);
  if (!m) return;
  FILE *out;
  pid_t pid = start_node("slave", sd, rmq_store_ha_address(m), &out);
  CHECK(fgets(line, sizeof line, out) && strcmp(line, "ready\n") == 0);
  fclose(out);
  /* The slave holds something before the kill: an empty one would start over at the
     master's last segment. */
  int64_t end = 0;
  CHECK_EQ_INT(put_one(m, 0, 1024, &end), RMQ_OK);
  CHECK(wait_acked(m, end, 5000));
  for (int i = 1; i < 3000; i++) {
    CHECK_EQ_INT(put_one(m, i, 1024, &end), RMQ_OK);
    if (i == kill_at) kill_node(pid);
  }
  pid = start_node("slave", sd, rmq_store_ha_address(m), &out);
  CHECK(fgets(line, sizeof line, out) && strcmp(line, "ready\n") == 0);
  fclose(out);
  CHECK(wait_acked(m, end, 10000));
  kill_node(pid);
  rmq_store_close(m);
  /* The slave's files, recovered as any store: the master's log, byte for byte. */
  rmq_config plain;
  node_config(&plain);
  rmq_store *s = tu_open(sd, &plain);
  if (s) {
    CHECK_EQ_INT(rmq_commitlog_max_offset(rmq_store_commitlog(s)), end);
    check_same_log(md, sd, end);
    int64_t messages = 0;
    for (int q = 0; q < 4; q++) {
      rmq_consume_queue *cq = rmq_store_find_queue(s, TOPIC, q);
      if (cq) messages += rmq_cq_max_offset(cq);
    }
    CHECK_EQ_INT(messages, 3000);
  }
  rmq_store_close(s);
  tu_rmrf(md);
  tu_rmrf(sd);
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "master") == 0) return run_master(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "slave") == 0) return run_slave(argv[2], argv[3]);
  const char *env = getenv("RMQ_HA_KILLS");
  int rounds = env ? atoi(env) : 1;
  unsigned seed = (unsigned)getpid() ^ (unsigned)rmq_now_ms();
  fprintf(stderr, "test_ha_process: seed %u, %d round(s)\n", seed, rounds);
  srand(seed);
  for (int r = 0; r < rounds; r++) {
    test_kill_sync_master(1 + rand() % 400);
    test_kill_slave(1 + rand() % 2999);
  }
  return check_report();
}
