/*
** test_sync_torture.c: SIGKILL sync producers again and again, and after
** every restart check the whole log: each acknowledged message is there
** exactly once, and nothing unacknowledged is half there.
**
** RMQ_TORTURE_KILLS rounds (default 3; `make torture` asks for at least
** 50) share one store in flush='sync' mode with 64 KiB segments, so that
** puts often wait for a flush that spans a segment roll. In each round a
** child process runs four producer threads: three put one message at a time,
** the fourth batches of one to four. Every message's body starts with its
** unique key "r<round> t<thread> s<seq>" and the rest of it follows from the
** key. After each successful put the child writes the keys to a pipe; the
** parent kills it at a random moment, reopens the store (abnormal recovery)
** and walks every record of the log:
**   - every record is a sound message whose body is the one its key names
**     (a torn or half-written record fails the walk or this comparison);
**   - no key occurs twice in the whole log;
**   - every acknowledged key occurs, at the offset its put returned;
**   - each consume queue holds, in order, exactly its records of the log.
*/
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"

#define SEG (64 << 10)
#define THREADS 4
#define QUEUES 3
#define BATCH_MAX 4
#define BODY_MAX 1200

/* One message: its key, and where its put said it landed. */
typedef struct ack {
  int32_t round, thread, seq;
  int32_t size;
  int64_t offset;
} ack;

typedef struct producer {
  rmq_store *s;
  int fd, round, thread;
} producer;

static int make_body(char *buf, int round, int thread, int seq) {
  int len = 40 + (seq * 97 + thread * 31 + round * 7) % (BODY_MAX - 40);
  for (int i = 0; i < len; i++) buf[i] = (char)('a' + (i * 7 + seq + thread + round) % 26);
  int head = snprintf(buf, 40, "r%d t%d s%d ", round, thread, seq);
  buf[head] = '.'; /* snprintf's NUL becomes a byte of the body */
  return len;
}

static void config(rmq_config *cfg) {
  tu_small_config(cfg, SEG);
  cfg->flush_sync = true;
  cfg->consumequeue_entries = 1000;
}

static const char *const topics[2] = {"Torture0", "Torture1"};

static rmq_message *make_message(tu_msg *t, char *body, const producer *p, int seq) {
  int len = make_body(body, p->round, p->thread, seq);
  return tu_message(t, topics[p->thread % 2], (p->thread + seq) % QUEUES, body, len, NULL);
}

static bool send_ack(const producer *p, int seq, const rmq_put_result *r) {
  ack a = {p->round, p->thread, seq, r->size, r->physical_offset};
  return write(p->fd, &a, sizeof a) == (ssize_t)sizeof a;
}

static void *produce(void *arg) {
  producer *p = arg;
  static _Thread_local char bodies[BATCH_MAX][BODY_MAX];
  tu_msg t[BATCH_MAX];
  rmq_message msgs[BATCH_MAX];
  rmq_put_result r[BATCH_MAX];
  for (int seq = 0;;) {
    int n = p->thread == THREADS - 1 ? 1 + seq % BATCH_MAX : 1;
    for (int i = 0; i < n; i++) msgs[i] = *make_message(&t[i], bodies[i], p, seq + i);
    rmq_err err = {0};
    /* A failed put is not retried: its seq is skipped, so no key is sent twice. */
    if (rmq_store_put(p->s, msgs, n, r, &err) == RMQ_OK) {
      for (int i = 0; i < n; i++) {
        if (!send_ack(p, seq + i, &r[i])) return NULL;
      }
    }
    seq += n;
  }
}

static void child(const char *dir, int fd, int round) {
  rmq_config cfg;
  config(&cfg);
  rmq_store *s;
  rmq_err err = {0};
  if (rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK) {
    fprintf(stderr, "child cannot open: %s\n", err.msg);
    _exit(3);
  }
  pthread_t th[THREADS];
  producer ps[THREADS];
  for (int i = 0; i < THREADS; i++) {
    ps[i] = (producer){s, fd, round, i};
    pthread_create(&th[i], NULL, produce, &ps[i]);
  }
  for (;;) pause();
}

/* Read acks until ms have passed since the first, kill the child, drain the pipe. */
static ack *collect(pid_t pid, int fd, int ms, ack *acks, int *n, int *cap) {
  /* The clock starts at the first acknowledgement (a sanitizer's child opens slowly): 30 s at most. */
  int64_t start = rmq_monotonic_ms() + 30000 - ms;
  bool killed = false, acked = false;
  union {
    ack a[256];
    char bytes[256 * sizeof(ack)];
  } buf;
  size_t have = 0; /* a read may end in the middle of an ack */
  for (;;) {
    if (!killed && rmq_monotonic_ms() - start >= ms) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      killed = true;
    }
    struct pollfd pf = {fd, POLLIN, 0};
    if (poll(&pf, 1, 10) <= 0) {
      if (killed) break;
      continue;
    }
    ssize_t r = read(fd, buf.bytes + have, sizeof buf - have);
    if (r <= 0) break;
    have += (size_t)r;
    if (!acked) start = rmq_monotonic_ms();
    acked = true;
    int whole = (int)(have / sizeof(ack));
    if (*n + whole > *cap) {
      *cap = *cap * 2 + whole + 4096;
      acks = realloc(acks, (size_t)*cap * sizeof *acks);
    }
    memcpy(acks + *n, buf.a, (size_t)whole * sizeof(ack));
    *n += whole;
    have -= (size_t)whole * sizeof(ack);
    memmove(buf.bytes, buf.bytes + (size_t)whole * sizeof(ack), have);
  }
  return acks;
}

static int64_t key_of(int round, int thread, int seq) {
  return ((int64_t)round << 40) | ((int64_t)thread << 32) | (uint32_t)seq;
}

static int cmp_keys(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* A found record: its key and offset; sorted by key. */
typedef struct found {
  int64_t key, offset;
} found;

/* The record's key from its body, if the body is exactly the one that key names. */
static bool record_key(const rmq_message *m, int64_t *key) {
  int round, thread, seq;
  char body[BODY_MAX];
  if (m->body_len < 40 || m->body_len > BODY_MAX) return false;
  if (sscanf((const char *)m->body, "r%d t%d s%d ", &round, &thread, &seq) != 3) return false;
  if (make_body(body, round, thread, seq) != m->body_len) return false;
  if (memcmp(body, m->body, (size_t)m->body_len) != 0) return false;
  *key = key_of(round, thread, seq);
  return true;
}

/* Walk the whole log: every record sound, each key once. Returns the defects. */
static int walk_log(rmq_store *s, found **out, int *n) {
  int bad = 0, cap = 0;
  *out = NULL;
  *n = 0;
  rmq_commitlog_iter it = {0};
  rmq_commitlog_record rec;
  rmq_commitlog_iter_start(&it, s, 0, INT64_MAX, INT64_MIN,
                           RMQ_CL_ITER_CHECK_CRC | RMQ_CL_ITER_STRICT);
  while (rmq_commitlog_iter_next(&it, &rec)) {
    if (rec.kind == RMQ_RECORD_BLANK) continue;
    int64_t key;
    if (rec.kind != RMQ_RECORD_MESSAGE || !record_key(&rec.m, &key)) {
      if (bad++ < 5)
        fprintf(stderr, "  unsound record at %lld: %s\n", (long long)rec.offset, rec.reason);
      continue;
    }
    if (*n == cap) {
      cap = cap * 2 + 1024;
      *out = realloc(*out, (size_t)cap * sizeof **out);
    }
    (*out)[(*n)++] = (found){key, rec.offset};
  }
  rmq_commitlog_iter_stop(&it);
  qsort(*out, (size_t)*n, sizeof **out, cmp_keys);
  for (int i = 1; i < *n; i++) {
    if ((*out)[i].key == (*out)[i - 1].key && bad++ < 10) {
      fprintf(stderr, "  key %llx twice: at %lld and %lld\n", (unsigned long long)(*out)[i].key,
              (long long)(*out)[i - 1].offset, (long long)(*out)[i].offset);
    }
  }
  return bad;
}

/* Every acknowledged key is in the log once, where its put said. */
static int check_acks(const ack *acks, int n, const found *f, int nf) {
  int bad = 0;
  for (int i = 0; i < n; i++) {
    found want = {key_of(acks[i].round, acks[i].thread, acks[i].seq), 0};
    const found *hit = bsearch(&want, f, (size_t)nf, sizeof *f, cmp_keys);
    if ((!hit || hit->offset != acks[i].offset) && bad++ < 5) {
      fprintf(stderr, "  acknowledged r%d t%d s%d at %lld: %s\n", acks[i].round, acks[i].thread,
              acks[i].seq, (long long)acks[i].offset, hit ? "elsewhere" : "lost");
    }
  }
  return bad;
}

/* Each queue holds exactly its records of the log, in log order, offsets from 0 on. */
static int check_queues(rmq_store *s, int nf) {
  int bad = 0, entries = 0;
  for (int t = 0; t < 2; t++) {
    const char *topic = topics[t];
    for (int q = 0; q < QUEUES; q++) {
      rmq_consume_queue *cq = rmq_cq_table_find(rmq_store_consume_queues(s), topic, q);
      int64_t prev = -1;
      for (int64_t i = 0; cq && i < rmq_cq_max_offset(cq); i++, entries++) {
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
        bool ok = e.phy_offset > prev && m.queue_id == q && m.queue_offset == i &&
                  m.topic_len == 8 && memcmp(m.topic, topic, 8) == 0;
        if (!ok && bad++ < 5)
          fprintf(stderr, "  %s/%d@%lld: wrong record\n", topic, q, (long long)i);
        prev = e.phy_offset;
        rmq_commitlog_ref_release(&ref);
      }
    }
  }
  if (entries != nf && bad++ < 10) {
    fprintf(stderr, "  %d consume-queue entries for %d records\n", entries, nf);
  }
  return bad;
}

static int verify(const char *dir, const ack *acks, int n, int *records) {
  rmq_config cfg;
  config(&cfg);
  rmq_store *s;
  rmq_err err = {0};
  if (rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK) {
    fprintf(stderr, "reopen failed: %s\n", err.msg);
    return 1;
  }
  found *f;
  int bad = walk_log(s, &f, records);
  bad += check_acks(acks, n, f, *records);
  CHECK_EQ_INT(rmq_store_wait_dispatched(s, &err), RMQ_OK);
  bad += check_queues(s, *records);
  free(f);
  rmq_store_close(s);
  return bad;
}

static int kills_from_env(void) {
  const char *v = getenv("RMQ_TORTURE_KILLS");
  int k = v ? atoi(v) : 3;
  return k > 0 ? k : 3;
}

int main(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  int kills = kills_from_env(), n = 0, cap = 0;
  ack *acks = NULL;
  srand((unsigned)time(NULL));
  for (int round = 0; round < kills; round++) {
    int fds[2];
    if (pipe(fds) != 0) return 2;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      child(dir, fds[1], round);
    }
    close(fds[1]);
    int before = n, records = 0;
    acks = collect(pid, fds[0], 100 + rand() % 400, acks, &n, &cap);
    close(fds[0]);
    int bad = verify(dir, acks, n, &records);
    printf("kill %d: %d acknowledged (%d in all), %d records in the log, %d defects\n", round + 1,
           n - before, n, records, bad);
    CHECK_EQ_INT(bad, 0);
    CHECK(n > before);
  }
  free(acks);
  tu_rmrf(dir);
  return check_report();
}
