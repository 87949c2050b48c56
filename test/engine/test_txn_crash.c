/*
** test_txn_crash.c: kill a process with SIGKILL while it appends large
** transactions (rmq_batch_append, what SQL's COMMIT calls) and check that
** after recovery every transaction is wholly in the log or wholly absent,
** and every acknowledged one is there.
**
** The child builds transactions of 20,000 to 200,000 rows; each row's body
** names its round, transaction, index and the transaction's size. Before
** each append it tells the parent (pipe) that the append starts, after it
** that it returned and how long it took. The parent lets one transaction
** through, then kills the child at a random moment within the expected
** duration of a later append: mostly while the rows are being copied into
** the log. It then opens the store (abnormal recovery), walks the whole log
** and counts each transaction's rows. Rounds alternate flush='async' and
** flush='sync' and share one store, so recovery also runs on a store that
** was recovered after a torn transaction.
**
** Kills: RMQ_TORTURE_KILLS (default 4; `make torture` runs more).
*/
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"

#define SEG (64 << 20)
#define MAX_TXNS 4096

typedef struct note {
  int32_t kind; /* 'S': append starts, 'A': acknowledged */
  int32_t txn, rows;
  int64_t us; /* how long the append took ('A') */
} note;

static int txn_rows(int round, int txn) { return 20000 + (round * 7919 + txn * 104729) % 180000; }

static int make_body(char *buf, int round, int txn, int i, int rows) {
  int len = snprintf(buf, 64, "r%d t%d i%d n%d ", round, txn, i, rows);
  int pad = i % 61;
  for (int k = 0; k < pad; k++) buf[len + k] = (char)('a' + (i + k) % 26);
  return len + pad;
}

static void config(rmq_config *cfg, bool sync) {
  tu_small_config(cfg, SEG);
  cfg->consumequeue_entries = 100000;
  cfg->index_slots = 1024;
  cfg->index_entries = 4096;
  cfg->flush_sync = sync;
}

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void tell(int fd, note n) {
  if (write(fd, &n, sizeof n) != (ssize_t)sizeof n) _exit(4);
}

static void child(const char *dir, int fd, int round, bool sync) {
  rmq_config cfg;
  config(&cfg, sync);
  rmq_store *s;
  rmq_err err = {0};
  if (rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK) {
    fprintf(stderr, "child cannot open: %s\n", err.msg);
    _exit(3);
  }
  rmq_batch *b = rmq_batch_new(s);
  char body[128];
  for (int txn = 0;; txn++) {
    int rows = txn_rows(round, txn);
    for (int i = 0; i < rows; i++) {
      tu_msg t;
      int len = make_body(body, round, txn, i, rows);
      if (rmq_batch_add(b, tu_message(&t, "Txn", i % 4, body, len, NULL), &err) != RMQ_OK) _exit(5);
    }
    int64_t first, start = now_us();
    tell(fd, (note){'S', txn, rows, 0});
    if (rmq_batch_append(b, &first, &err) != RMQ_OK) {
      fprintf(stderr, "child append: %s\n", err.msg);
      _exit(6);
    }
    tell(fd, (note){'A', txn, rows, now_us() - start});
  }
}

/* Read one note; false once the child is gone. */
static bool read_note(int fd, note *n) { return read(fd, n, sizeof *n) == (ssize_t)sizeof *n; }

/*
** Follow the child: after the first acknowledged append, kill it at a random
** moment within the last append's duration after a later one starts.
** acked[t] is set for every transaction acknowledged. Returns whether the
** kill came while an append was running (neither acknowledged nor before it).
*/
static bool follow_and_kill(pid_t pid, int fd, bool *acked) {
  note n;
  int64_t last_us = 0;
  int started = -1;
  while (read_note(fd, &n)) {
    if (n.kind == 'A') {
      acked[n.txn] = true;
      last_us = n.us;
      continue;
    }
    started = n.txn;
    if (last_us > 0) break;
  }
  usleep((useconds_t)(rand() % (last_us + 1)));
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  bool during = true;
  while (read_note(fd, &n)) {
    if (n.kind == 'A') acked[n.txn] = true;
    if (n.kind == 'A' && n.txn == started) during = false;
  }
  return during && started >= 0;
}

typedef struct txn_count {
  int rows;     /* the transaction's size, from its bodies */
  int seen;     /* rows found */
  int next;     /* the index expected next */
  bool ordered; /* every row in order, once */
} txn_count;

static void count_row(txn_count (*tc)[MAX_TXNS], const rmq_message *m, int *bad) {
  char text[64];
  int len = m->body_len < 63 ? m->body_len : 63, r, t, i, rows;
  memcpy(text, m->body, (size_t)len);
  text[len] = '\0';
  if (sscanf(text, "r%d t%d i%d n%d", &r, &t, &i, &rows) != 4 || r < 0 || r >= 64 || t < 0 ||
      t >= MAX_TXNS) {
    (*bad)++;
    return;
  }
  txn_count *c = &tc[r][t];
  if (c->seen == 0) *c = (txn_count){.rows = rows, .ordered = true};
  c->ordered = c->ordered && i == c->next && rows == c->rows;
  c->next = i + 1;
  c->seen++;
  char body[128];
  if (m->body_len != make_body(body, r, t, i, rows) || memcmp(body, m->body, m->body_len) != 0) {
    (*bad)++;
  }
}

/* Each transaction of every round is whole or absent; acknowledged ones are there. */
static int check_txns(txn_count (*tc)[MAX_TXNS], int rounds, bool (*acked)[MAX_TXNS]) {
  int bad = 0;
  for (int r = 0; r < rounds; r++) {
    for (int t = 0; t < MAX_TXNS; t++) {
      const txn_count *c = &tc[r][t];
      bool whole = c->seen == c->rows && c->ordered, absent = c->seen == 0;
      if ((!whole && !absent) || (acked[r][t] && !whole)) {
        if (bad++ < 5) {
          fprintf(stderr, "  round %d txn %d: %d of %d rows%s\n", r, t, c->seen, c->rows,
                  acked[r][t] ? " (acknowledged)" : "");
        }
      }
    }
  }
  return bad;
}

/* Open the store (recovery runs) and walk the whole log. */
static int verify(const char *dir, int rounds, bool (*acked)[MAX_TXNS]) {
  rmq_config cfg;
  config(&cfg, false);
  rmq_store *s;
  rmq_err err = {0};
  if (rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK) {
    fprintf(stderr, "reopen failed: %s\n", err.msg);
    return -1;
  }
  printf("  %s\n", rmq_store_recovery_report(s));
  txn_count(*tc)[MAX_TXNS] = calloc(64, sizeof *tc);
  int bad = 0;
  rmq_commitlog_iter it;
  rmq_commitlog_record rec;
  rmq_commitlog_iter_start(&it, s, 0, INT64_MAX, 0, RMQ_CL_ITER_CHECK_CRC);
  while (rmq_commitlog_iter_next(&it, &rec)) {
    if (rec.kind == RMQ_RECORD_MESSAGE) count_row(tc, &rec.m, &bad);
  }
  rmq_commitlog_iter_stop(&it);
  bad += check_txns(tc, rounds, acked);
  free(tc);
  rmq_store_close(s);
  return bad;
}

static int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && atoi(v) > 0 ? atoi(v) : dflt;
}

int main(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  int kills = env_int("RMQ_TORTURE_KILLS", 4), during = 0;
  if (kills > 64) kills = 64;
  bool(*acked)[MAX_TXNS] = calloc(64, sizeof *acked);
  unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
  srand(seed);
  printf("random seed %u, %d kills\n", seed, kills);
  for (int round = 0; round < kills; round++) {
    bool sync = round % 2 == 1;
    int fds[2];
    if (pipe(fds) != 0) return 2;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      child(dir, fds[1], round, sync);
    }
    close(fds[1]);
    bool mid = follow_and_kill(pid, fds[0], acked[round]);
    close(fds[0]);
    during += mid;
    printf("round %d (%s): killed %s an append\n", round, sync ? "sync" : "async",
           mid ? "during" : "after");
    CHECK_EQ_INT(verify(dir, round + 1, acked), 0);
  }
  CHECK(during > 0);
  free(acked);
  tu_rmrf(dir);
  return check_report();
}
