/*
** test_shared_log.c: the put lock and log end that processes share
** (shared_log.h). A process that dies holding the lock leaves it, and the
** bytes it wrote past the end, to the next taker: that one zeroes them
** before it appends, so recovery never finds a torn or foreign record
** behind the end. An appender reads back the queue offsets of what others
** appended.
*/
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "shared_state.h"
#include "testutil.h"

#define SEG 65536

static int64_t shared_end(const char *dir) {
  rmq_shared_state *st = NULL;
  rmq_err err = {0};
  if (rmq_shared_state_attach(dir, false, false, &st, &err) != RMQ_OK || !st) return -1;
  int64_t end = atomic_load(&rmq_shared_state_log(st)->wrote);
  rmq_shared_state_close(st);
  return end;
}

/*
** A child takes the lock, writes a record's worth of non-zero bytes past
** the end (as a batch cut short by SIGKILL would), says where its batch
** would end, and exits holding the lock.
*/
static void die_holding_lock(const char *dir, int64_t end, size_t len) {
  rmq_shared_state *st = NULL;
  rmq_err err = {0};
  if (rmq_shared_state_attach(dir, false, false, &st, &err) != RMQ_OK || !st) _exit(2);
  rmq_shared_log *l = rmq_shared_state_log(st);
  /* As the owner marks the log when a follower joins: from now on its puts take this lock. */
  atomic_store(&l->direct_writers, 1);
  if (rmq_shared_log_lock(l, false, dir, &err) != RMQ_OK) _exit(3);
  atomic_store(&l->pending_end, end + (int64_t)len);
  char path[512];
  snprintf(path, sizeof path, "%s/commitlog/%020lld", dir, (long long)(end - end % SEG));
  int fd = open(path, O_WRONLY);
  uint8_t junk[512];
  memset(junk, 0xA5, sizeof junk);
  if (fd < 0 || pwrite(fd, junk, len, end % SEG) != (ssize_t)len) _exit(4);
  _exit(0);
}

static bool all_zero(const char *dir, int64_t from, size_t len) {
  char path[512];
  snprintf(path, sizeof path, "%s/commitlog/%020lld", dir, (long long)(from - from % SEG));
  int fd = open(path, O_RDONLY);
  uint8_t buf[512] = {0};
  bool zero = fd >= 0 && pread(fd, buf, len, from % SEG) == (ssize_t)len;
  for (size_t i = 0; zero && i < len; i++) zero = buf[i] == 0;
  if (fd >= 0) close(fd);
  return zero;
}

static void test_dead_holder(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t;
  rmq_put_result r;
  for (int i = 0; s && i < 5; i++) {
    CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "D", 0, "before", 6, ""), 1, &r, &err), RMQ_OK);
  }
  int64_t end = shared_end(dir);
  CHECK_EQ_INT(end, r.physical_offset + r.size);
  pid_t pid = fork();
  if (pid == 0) die_holding_lock(dir, end, 400);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  /* The next put takes the lock over, zeroes the dead batch's bytes, and appends at the end. */
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "D", 0, "after", 5, ""), 1, &r, &err), RMQ_OK);
  CHECK_EQ_INT(r.physical_offset, end);
  CHECK_EQ_INT(r.queue_offset, 5);
  int64_t after = r.physical_offset + r.size;
  CHECK(all_zero(dir, after, (size_t)(end + 400 - after)));
  CHECK_EQ_INT(shared_end(dir), after);
  rmq_store_close(s);
  CHECK(all_zero(dir, after, (size_t)(end + 400 - after)));
  /* Recovery ends the log at the last whole record: six messages, nothing of the dead batch. */
  s = tu_open(dir, &cfg);
  if (!s) return;
  CHECK_EQ_INT(rmq_commitlog_max_offset(rmq_store_commitlog(s)), after);
  rmq_consume_queue *cq = s ? rmq_store_find_queue(s, "D", 0) : NULL;
  CHECK(cq != NULL && rmq_cq_max_offset(cq) == 6);
  rmq_store_close(s);
}

/*
** A second store of this process on the same files stands for another
** process: it is a follower, whose puts go into the shared log themselves;
** each store's queue offsets follow the other's appends.
*/
static void test_two_writers(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *owner = tu_open(dir, &cfg);
  rmq_store *follower = tu_open(dir, &cfg);
  CHECK(follower && rmq_store_is_follower(follower));
  rmq_err err = {0};
  tu_msg t;
  rmq_put_result r;
  int64_t next = 0;
  /* Past several segment ends: rolls go to the owner, the rest stays with each writer. */
  static char body[700];
  memset(body, 'w', sizeof body);
  for (int i = 0; owner && follower && i < 400; i++) {
    rmq_store *s = i % 3 == 0 ? owner : follower;
    CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "W", 0, body, sizeof body, ""), 1, &r, &err),
                 RMQ_OK);
    CHECK_EQ_INT(r.queue_offset, next);
    next++;
  }
  CHECK(rmq_commitlog_max_offset(rmq_store_commitlog(owner)) > 4 * SEG);
  CHECK_EQ_INT(rmq_store_wait_dispatched(owner, &err), RMQ_OK);
  rmq_consume_queue *cq = owner ? rmq_store_find_queue(owner, "W", 0) : NULL;
  CHECK(cq != NULL && rmq_cq_max_offset(cq) == 400);
  rmq_store_close(follower);
  rmq_store_close(owner);
}

int main(void) {
  void (*tests[])(const char *) = {test_dead_holder, test_two_writers};
  for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
    char dir[64];
    tu_tmpdir(dir, sizeof dir);
    tests[i](dir);
    tu_rmrf(dir);
  }
  return check_report();
}
