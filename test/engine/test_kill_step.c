/*
** test_kill_step.c: what a SIGKILL leaves at each instruction of an append.
**
** A child opens a store, appends and flushes a first batch (the checkpoint
** then holds its store time) and stops before it appends a second batch as
** SQL's COMMIT does (rmq_batch_append). The parent traces it with ptrace,
** one instruction at a time, through that append. Whenever the log's bytes
** change, the files are what a SIGKILL at that instruction would leave (the
** page cache outlives the process): the parent copies the store and opens
** the copy, which must recover without reporting damage and end where the
** first batch ends or where the second does, nowhere else. Batches of one
** small record, of several small ones and of several of 1 KiB (which the
** C library copies in another order), and a run of batches of one record
** (the rows of an INSERT ... SELECT), whose rows after its first wait in
** the write window until its end writes them to the file, their bytes, then
** their first head: a kill keeps its first rows, none torn.
*/
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define SEG (1 << 20)
#define WATCHED 8192 /* the batches end within the log's first bytes */
#define MAX_ENDS 4096

static void config(rmq_config *cfg) {
  tu_small_config(cfg, SEG);
  cfg->flush_interval_ms = 60000; /* no flush pass while the parent looks */
}

static void tell(int fd, int64_t v) {
  if (write(fd, &v, sizeof v) != (ssize_t)sizeof v) _exit(4);
}

static int add(rmq_batch *b, int i, int body_len, rmq_err *err) {
  char body[1024];
  memset(body, 'x', sizeof body);
  tu_msg t;
  return rmq_batch_add(b, tu_message(&t, "Step", i % 2, body, body_len, "KEYS=k"), err);
}

/* One batch of count records; or, with run, a run of count batches of one, waited for. */
static int append(rmq_store *s, rmq_batch *b, int count, int body_len, bool run, int64_t *end) {
  rmq_err err = {0};
  int64_t first;
  int rc = RMQ_OK;
  *end = 0;
  for (int i = 0; rc == RMQ_OK && i < count; i++) {
    rc = add(b, i, body_len, &err);
    if (rc == RMQ_OK && (run || i == count - 1)) {
      rc = rmq_batch_append_unflushed(b, &first, end, &err);
      rmq_batch_clear(b);
    }
  }
  if (rc == RMQ_OK && run) rc = rmq_store_wait_flushed(s, *end, &err);
  if (rc != RMQ_OK) fprintf(stderr, "child: %s\n", err.msg);
  return rc;
}

/* Append a flushed batch, stop under the tracer, append the traced one. */
static void child(const char *dir, int fd, int count, int body_len, bool run) {
  rmq_config cfg;
  config(&cfg);
  rmq_store *s;
  rmq_err err = {0};
  if (rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK) _exit(3);
  rmq_batch *b = rmq_batch_new(s);
  int64_t end, flushed;
  if (append(s, b, 3, 100, false, &end) != RMQ_OK || rmq_store_flush(s, &flushed, &err) != RMQ_OK) {
    _exit(3);
  }
  rmq_batch_clear(b);
  tell(fd, end);
  if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) _exit(5);
  raise(SIGSTOP);
  if (append(s, b, count, body_len, run, &end) != RMQ_OK) _exit(3);
  tell(fd, end);
  raise(SIGSTOP);
  _exit(0);
}

typedef struct tracer {
  const char *dir;
  int count, body_len;
  const uint8_t *log; /* the first segment, as the child's page cache holds it */
  uint8_t seen[WATCHED];
  int64_t ends[MAX_ENDS];
  int nends, damaged, steps;
} tracer;

/* Copy the store and open the copy: where its recovered log ends (-1: refused). */
static int64_t recover_copy(const char *dir) {
  char copy[96], cmd[300];
  snprintf(copy, sizeof copy, "%s.copy", dir);
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", copy, dir, copy);
  if (system(cmd) != 0) return -1;
  rmq_config cfg;
  config(&cfg);
  rmq_store *s;
  rmq_err err = {0};
  int64_t end = -1;
  if (rmq_store_open(copy, &cfg, &s, &err) == RMQ_OK) {
    rmq_stats st;
    if (rmq_store_stats(s, &st, &err) == RMQ_OK) end = st.commitlog_max_offset;
    rmq_store_close(s);
  } else {
    fprintf(stderr, "  recovery refused the store: %s\n", err.msg);
  }
  tu_rmrf(copy);
  return end;
}

/* The log changed since the last look: what a kill now leaves must recover. */
static void look(tracer *t) {
  if (memcmp(t->seen, t->log, WATCHED) == 0) return;
  memcpy(t->seen, t->log, WATCHED);
  int64_t end = recover_copy(t->dir);
  if (end < 0) t->damaged++;
  if (t->nends < MAX_ENDS) t->ends[t->nends++] = end;
}

/* Step the stopped child until it stops itself again; false if it died. */
static bool step_through(tracer *t, pid_t pid) {
  int status, sig = 0;
  for (;;) {
    if (ptrace(PTRACE_SINGLESTEP, pid, NULL, (void *)(intptr_t)sig) != 0) return false;
    if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) return false;
    sig = WSTOPSIG(status) == SIGTRAP ? 0 : WSTOPSIG(status);
    if (sig == SIGSTOP) return true;
    t->steps++;
    look(t);
  }
}

static void run(int count, int body_len, bool as_run) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  int fds[2];
  CHECK(pipe(fds) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    child(dir, fds[1], count, body_len, as_run);
  }
  close(fds[1]);
  int64_t end1 = 0, end2 = 0;
  int status;
  CHECK(read(fds[0], &end1, sizeof end1) == (ssize_t)sizeof end1);
  CHECK(waitpid(pid, &status, 0) == pid && WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP);
  char path[4200];
  snprintf(path, sizeof path, "%s/commitlog/00000000000000000000", dir);
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0);
  tracer *t = calloc(1, sizeof *t);
  *t = (tracer){.dir = dir, .count = count, .body_len = body_len};
  t->log = mmap(NULL, WATCHED, PROT_READ, MAP_SHARED, fd, 0);
  CHECK(t->log != MAP_FAILED);
  memcpy(t->seen, t->log, WATCHED);
  CHECK(step_through(t, pid));
  CHECK(read(fds[0], &end2, sizeof end2) == (ssize_t)sizeof end2);
  CHECK(end2 <= WATCHED);
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  fprintf(stderr, "%d record(s) of %d B%s: %d instructions, %d looks at the log\n", count, body_len,
          as_run ? " in a run" : "", t->steps, t->nends);
  /* Each record's copy and the head; a run's commit: its bytes and its head. */
  CHECK(t->nends > (as_run ? 1 : count));
  CHECK_EQ_INT(t->damaged, 0);
  /* A run is not one batch: a kill keeps its first rows (each of the same size). */
  int64_t step = as_run ? (end2 - end1) / count : end2 - end1;
  int torn = 0;
  for (int i = 0; i < t->nends; i++) {
    if (t->ends[i] < end1 || t->ends[i] > end2 || (t->ends[i] - end1) % step != 0) {
      fprintf(stderr, "  look %d: the log ends at %lld, not %lld or %lld\n", i,
              (long long)t->ends[i], (long long)end1, (long long)end2);
      torn++;
    }
  }
  CHECK_EQ_INT(torn, 0);
  CHECK_EQ_INT(t->ends[t->nends - 1], end2); /* the head was the last store */
  CHECK_EQ_INT(recover_copy(dir), end2);
  munmap((void *)t->log, WATCHED);
  close(fd);
  close(fds[0]);
  free(t);
  tu_rmrf(dir);
}

int main(void) {
  run(3, 1024, false);
#ifndef __SANITIZE_THREAD__ /* each instruction there is a hundred: the copy order is the same */
  run(1, 10, false);
  run(5, 100, false);
  run(5, 100, true);
#endif
  return check_report();
}
