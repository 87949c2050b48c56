/*
** test_pool_crash.c: kill a real process that produces with
** transient_store_pool=1 and 2 (flush='async') with SIGKILL, and check that what
** it lost is what docs/guarantees.md allows: only puts acknowledged less than one
** commit interval (200 ms) before the kill. Every put wakes
** CommitRealTimeService, so in practice the loss is none or the last few
** puts.
**
** The child runs two producer threads; after each successful put it writes
** (offset, size, thread, seq, time acknowledged) to a pipe. The parent kills
** it at a random moment, reopens the store (abnormal recovery) and reads
** every acknowledged record back; a missing one must have been acknowledged
** within the commit interval before the kill. Six rounds share one store.
*/
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "service_thread.h"
#include "testutil.h"

#define SEG (1 << 20)
#define MAX_ACKS 400000
#define THREADS 2
#define COMMIT_INTERVAL_MS 200
#define ROUNDS 6

typedef struct ack {
  int64_t offset;
  int64_t acked_ms; /* monotonic: the parent and the child share the clock */
  int32_t size;
  int32_t round, thread, seq;
} ack;

typedef struct producer_arg {
  rmq_store *s;
  int fd, round, thread;
} producer_arg;

static int make_body(char *buf, int round, int thread, int seq) {
  int len = 40 + (seq * 131 + thread * 17) % 700;
  for (int i = 0; i < len; i++) buf[i] = (char)('a' + (i + seq + thread + round) % 26);
  snprintf(buf, 40, "r%d t%d s%d ", round, thread, seq);
  return len;
}

static void *produce(void *p) {
  producer_arg *a = p;
  char body[1024];
  tu_msg t;
  for (int seq = 0;; seq++) {
    int len = make_body(body, a->round, a->thread, seq);
    rmq_put_result r;
    rmq_err err = {0};
    if (rmq_store_put(a->s, tu_message(&t, "PoolCrash", a->thread, body, len, NULL), 1, &r, &err) !=
        RMQ_OK) {
      continue;
    }
    ack k = {r.physical_offset, rmq_monotonic_ms(), r.size, a->round, a->thread, seq};
    if (write(a->fd, &k, sizeof k) != (ssize_t)sizeof k) return NULL;
  }
}

static void child(const char *dir, int fd, int round) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  /* One buffer: every other segment is written without one, the case where order matters. */
  cfg.transient_store_pool = 1 + round % 2;
  rmq_store *s;
  rmq_err err = {0};
  if (rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK) {
    fprintf(stderr, "child cannot open: %s\n", err.msg);
    _exit(3);
  }
  pthread_t th[THREADS];
  producer_arg args[THREADS];
  for (int i = 0; i < THREADS; i++) {
    args[i] = (producer_arg){s, fd, round, i};
    pthread_create(&th[i], NULL, produce, &args[i]);
  }
  for (;;) pause();
}

/*
** Read acks until ms have passed since the first (30 s at most), kill the
** child, drain the pipe; *killed_ms: when.
*/
static int collect(pid_t pid, int fd, int ms, ack *acks, int n, int64_t *killed_ms) {
  size_t have = (size_t)n * sizeof(ack), cap = (size_t)MAX_ACKS * sizeof(ack);
  int64_t began = rmq_monotonic_ms();
  int64_t start = -1; /* the first acknowledgement: a slow open under a sanitizer is not counted */
  bool killed = false;
  for (;;) {
    int64_t now = rmq_monotonic_ms();
    if (!killed && ((start >= 0 && now - start >= ms) || now - began >= 30000 || have >= cap)) {
      *killed_ms = rmq_monotonic_ms();
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      killed = true;
    }
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10) <= 0) {
      if (killed) break;
      continue;
    }
    ssize_t r = read(fd, (char *)acks + have, cap - have);
    if (r <= 0) break;
    if (start < 0) start = rmq_monotonic_ms();
    have += (size_t)r;
  }
  return (int)(have / sizeof(ack));
}

/*
** Read back acks [from, n) of the last round; a missing or wrong one counts
** as lost, and *oldest_ms receives the age at the kill of the oldest lost.
*/
static int count_lost(rmq_store *s, const ack *acks, int from, int n, int64_t killed_ms,
                      int64_t *oldest_ms) {
  int lost = 0;
  char body[1024];
  *oldest_ms = 0;
  for (int i = from; i < n; i++) {
    rmq_commitlog_ref ref;
    rmq_message m;
    rmq_err e = {0};
    int len = make_body(body, acks[i].round, acks[i].thread, acks[i].seq);
    bool ok = rmq_commitlog_read_message(rmq_store_commitlog(s), acks[i].offset, true, &ref, &m,
                                         &e) == RMQ_OK;
    if (ok) {
      ok = m.total_size == acks[i].size && m.body_len == len &&
           memcmp(m.body, body, (size_t)len) == 0;
      rmq_commitlog_ref_release(&ref);
    }
    if (ok) continue;
    lost++;
    int64_t age = killed_ms - acks[i].acked_ms;
    if (age > *oldest_ms) *oldest_ms = age;
  }
  return lost;
}

/* Reopen (abnormal recovery) and measure what the round lost. */
static void verify(const char *dir, const ack *acks, int before, int n, int64_t killed_ms) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s;
  rmq_err err = {0};
  if (rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK) {
    CHECK_EQ_STR(err.msg, "");
    return;
  }
  int64_t oldest;
  int lost = count_lost(s, acks, before, n, killed_ms, &oldest);
  printf("  lost %d of %d acknowledged puts, the oldest acknowledged %lld ms before the kill\n",
         lost, n - before, (long long)oldest);
  printf("  %s\n", rmq_store_recovery_report(s));
  CHECK(oldest <= COMMIT_INTERVAL_MS);
  rmq_store_close(s);
}

int main(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  ack *acks = malloc(sizeof(ack) * MAX_ACKS);
  int n = 0;
  srand((unsigned)time(NULL));
  for (int round = 0; round < ROUNDS; round++) {
    int fds[2];
    if (pipe(fds) != 0) return 2;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      child(dir, fds[1], round);
    }
    close(fds[1]);
    int before = n;
    int64_t killed_ms = 0;
    n = collect(pid, fds[0], 300 + rand() % 700, acks, n, &killed_ms);
    close(fds[0]);
    printf("round %d: %d acknowledged puts\n", round, n - before);
    CHECK(n - before > 100);
    verify(dir, acks, before, n, killed_ms);
    if (n >= MAX_ACKS) break;
  }
  free(acks);
  tu_rmrf(dir);
  return check_report();
}
