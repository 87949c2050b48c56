/*
** test_crash.c: kill a real producing process with SIGKILL in flush='sync'
** mode and check that every put it was told succeeded is in the store after
** the restart (abnormal recovery), byte for byte.
**
** The child runs three producer threads; after each successful put it
** writes (offset, size, thread, seq) to a pipe. Two put one message at a
** time (rmq_store_put); the third encodes one to five messages ahead and
** appends them from two spans (rmq_store_encode, rmq_store_put_encoded), as
** SQL's COMMIT does. Both go through the one append path. The parent reads the pipe
** while the child runs, kills it at a random moment, then reopens the store
** and reads every acknowledged record back, finds each by its key through
** the index, and checks that every consume-queue entry points at a valid
** record of its topic and queue with contiguous queue offsets. Three rounds
** share one store, so recovery also runs on a store that was recovered.
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
#define MAX_ACKS 200000

typedef struct ack {
  int64_t offset;
  int32_t size;
  int32_t round, thread, seq;
} ack;

typedef struct producer_arg {
  rmq_store *s;
  int fd, round, thread;
} producer_arg;

/* The body of (round, thread, seq): its length and bytes follow from the triple. */
static int make_body(char *buf, int round, int thread, int seq) {
  int len = 50 + (seq * 131 + thread * 17) % 1500;
  for (int i = 0; i < len; i++) buf[i] = (char)('a' + (i + seq + thread + round) % 26);
  snprintf(buf, 40, "r%d t%d s%d ", round, thread, seq);
  return len;
}

static const char *const topics[3] = {"Crash0", "Crash1", "Crash2"};

/* Message seq of a producer: its topic, queue, body and key follow from (round, thread, seq). */
static rmq_message *make_message(tu_msg *t, char *body, const producer_arg *a, int seq) {
  char kv[64];
  int len = make_body(body, a->round, a->thread, seq);
  snprintf(kv, sizeof kv, "KEYS=r%dt%ds%d", a->round, a->thread, seq);
  return tu_message(t, topics[a->thread], seq % 4, body, len, kv);
}

static bool send_ack(const producer_arg *a, int64_t offset, int32_t size, int seq) {
  ack k = {offset, size, a->round, a->thread, seq};
  return write(a->fd, &k, sizeof k) == (ssize_t)sizeof k;
}

static void *produce(void *p) {
  producer_arg *a = p;
  char body[2048];
  tu_msg t;
  for (int seq = 0;; seq++) {
    rmq_put_result r;
    rmq_err err = {0};
    if (rmq_store_put(a->s, make_message(&t, body, a, seq), 1, &r, &err) != RMQ_OK) continue;
    if (!send_ack(a, r.physical_offset, r.size, seq)) return NULL;
  }
}

#define BATCH_MAX 5
#define SPAN_CAP (BATCH_MAX * 2048)

/* Encode messages seq..seq+n-1 into two spans, the first `split` into the first span. */
static bool encode_batch(const producer_arg *a, int seq, int n, int split,
                         uint8_t bufs[2][SPAN_CAP], rmq_span spans[2], int32_t *lens) {
  char body[2048];
  tu_msg t;
  spans[0] = (rmq_span){bufs[0], 0};
  spans[1] = (rmq_span){bufs[1], 0};
  for (int i = 0; i < n; i++) {
    rmq_span *sp = &spans[i < split ? 0 : 1];
    rmq_err err = {0};
    lens[i] = rmq_store_encode(a->s, make_message(&t, body, a, seq + i), sp->data + sp->len,
                               SPAN_CAP - sp->len, &err);
    if (lens[i] <= 0 || (size_t)lens[i] > SPAN_CAP - sp->len) return false;
    sp->len += (size_t)lens[i];
  }
  return true;
}

static void *produce_encoded(void *p) {
  producer_arg *a = p;
  static uint8_t bufs[2][SPAN_CAP];
  for (int seq = 0;;) {
    int n = 1 + seq % BATCH_MAX, split = 1 + seq % n;
    rmq_span spans[2];
    int32_t lens[BATCH_MAX];
    int64_t first;
    rmq_err err = {0};
    if (!encode_batch(a, seq, n, split, bufs, spans, lens)) return NULL;
    if (rmq_store_put_encoded(a->s, spans, split < n ? 2 : 1, n, &first, &err) != RMQ_OK) {
      continue;
    }
    for (int i = 0; i < n; first += lens[i++]) {
      if (!send_ack(a, first, lens[i], seq + i)) return NULL;
    }
    seq += n;
  }
}

static void child(const char *dir, int fd, int round) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  cfg.flush_sync = true;
  rmq_store *s;
  rmq_err err = {0};
  if (rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK) {
    fprintf(stderr, "child cannot open: %s\n", err.msg);
    _exit(3);
  }
  pthread_t th[3];
  producer_arg args[3];
  for (int i = 0; i < 3; i++) {
    args[i] = (producer_arg){s, fd, round, i};
    pthread_create(&th[i], NULL, i == 2 ? produce_encoded : produce, &args[i]);
  }
  for (;;) pause();
}

/*
** Append what the child writes to acks until ms have passed, then kill it
** and drain the pipe. Pipe writes of one ack are atomic, so whole acks arrive.
** Returns the new count.
*/
static int collect(pid_t pid, int fd, int ms, ack *acks, int n) {
  size_t have = (size_t)n * sizeof(ack), cap = (size_t)MAX_ACKS * sizeof(ack);
  int64_t start = rmq_monotonic_ms();
  bool killed = false;
  for (;;) {
    if (!killed && rmq_monotonic_ms() - start >= ms) {
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
    have += (size_t)r;
  }
  return (int)(have / sizeof(ack));
}

/* Every acknowledged message is found by its key, and only it. */
static int verify_keys(rmq_store *s, const ack *acks, int from, int n) {
  int bad = 0;
  for (int i = from; i < n; i++) {
    char topic[24], key[64];
    int64_t offs[8];
    int count;
    rmq_err e = {0};
    snprintf(topic, sizeof topic, "Crash%d", acks[i].thread);
    snprintf(key, sizeof key, "r%dt%ds%d", acks[i].round, acks[i].thread, acks[i].seq);
    rmq_store_query_key(s, topic, key, 0, INT64_MAX, 8, offs, &count, &e);
    if (count != 1 || offs[0] != acks[i].offset) {
      if (bad++ < 5) fprintf(stderr, "  key %s found %d times\n", key, count);
    }
  }
  return bad;
}

/* Each consume-queue entry points at a valid record of its topic and queue, in order. */
static int verify_queues(rmq_store *s) {
  int bad = 0;
  for (int t = 0; t < 3; t++) {
    for (int q = 0; q < 4; q++) {
      char topic[24];
      snprintf(topic, sizeof topic, "Crash%d", t);
      rmq_consume_queue *cq = rmq_cq_table_find(rmq_store_consume_queues(s), topic, q);
      if (!cq) continue;
      for (int64_t i = rmq_cq_min_offset(cq); i < rmq_cq_max_offset(cq); i++) {
        rmq_cq_entry e;
        rmq_commitlog_ref ref;
        rmq_message m;
        rmq_err err = {0};
        if (rmq_cq_get(cq, i, &e, &err) != RMQ_OK ||
            rmq_commitlog_read_message(rmq_store_commitlog(s), e.phy_offset, true, &ref, &m,
                                       &err) != RMQ_OK) {
          if (bad++ < 5) fprintf(stderr, "  %s/%d@%lld: %s\n", topic, q, (long long)i, err.msg);
          continue;
        }
        bool ok = m.total_size == e.size && m.queue_id == q && m.queue_offset == i &&
                  m.topic_len == (int)strlen(topic) && memcmp(m.topic, topic, strlen(topic)) == 0;
        if (!ok && bad++ < 5) {
          fprintf(stderr, "  %s/%d@%lld: wrong record\n", topic, q, (long long)i);
        }
        rmq_commitlog_ref_release(&ref);
      }
    }
  }
  return bad;
}

static int verify(const char *dir, const ack *acks, int from, int n, int64_t *end) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s;
  rmq_err err = {0};
  if (rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK) {
    fprintf(stderr, "reopen failed: %s\n", err.msg);
    return -1;
  }
  int missing = 0;
  char body[2048];
  for (int i = from; i < n; i++) {
    rmq_commitlog_ref ref;
    rmq_message m;
    rmq_err e = {0};
    int len = make_body(body, acks[i].round, acks[i].thread, acks[i].seq);
    if (rmq_commitlog_read_message(rmq_store_commitlog(s), acks[i].offset, true, &ref, &m, &e) !=
        RMQ_OK) {
      if (missing++ < 5) {
        fprintf(stderr, "  missing ack at %lld: %s\n", (long long)acks[i].offset, e.msg);
      }
      continue;
    }
    if (m.total_size != acks[i].size || m.body_len != len || memcmp(m.body, body, (size_t)len)) {
      if (missing++ < 5) fprintf(stderr, "  wrong record at %lld\n", (long long)acks[i].offset);
    }
    rmq_commitlog_ref_release(&ref);
  }
  missing += verify_keys(s, acks, from, n) + verify_queues(s);
  printf("%s\n", rmq_store_recovery_report(s));
  *end = rmq_commitlog_max_offset(rmq_store_commitlog(s));
  rmq_store_close(s);
  return missing;
}

int main(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  ack *acks = malloc(sizeof(ack) * MAX_ACKS);
  int n = 0;
  srand((unsigned)time(NULL));
  for (int round = 0; round < 3; round++) {
    int fds[2];
    if (pipe(fds) != 0) return 2;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      child(dir, fds[1], round);
    }
    close(fds[1]);
    int before = n;
    n = collect(pid, fds[0], 400 + rand() % 600, acks, n);
    close(fds[0]);
    int64_t end = 0;
    int per_thread[3] = {0};
    for (int i = before; i < n; i++) per_thread[acks[i].thread]++;
    printf("round %d: %d acknowledged puts (%d, %d; %d encoded)\n", round, n - before,
           per_thread[0], per_thread[1], per_thread[2]);
    for (int t = 0; t < 3; t++) CHECK(per_thread[t] > 10);
    CHECK_EQ_INT(verify(dir, acks, 0, n, &end), 0);
    CHECK(end >= acks[n - 1].offset + acks[n - 1].size);
  }
  free(acks);
  tu_rmrf(dir);
  return check_report();
}
