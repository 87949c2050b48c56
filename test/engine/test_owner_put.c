/*
** test_owner_put.c: the owner's socket. What the owner appends for another
** process (a PUT on its socket) meets the checks of a local put, no more and
** no less; a follower sends nothing to a listener of another user.
*/
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "remoting_client.h"
#include "remoting_command.h"
#include "remoting_server.h"
#include "shared_state.h"
#include "testutil.h"

#define MAX_SIZE 100000

/* The name of the socket the store's owner listens on. */
static void owner_socket(const char *dir, char *name, size_t cap) {
  rmq_shared_state *page = NULL;
  rmq_err err = {0};
  name[0] = '\0';
  CHECK_EQ_INT(rmq_shared_state_open(dir, &page, &err), RMQ_OK);
  if (page) rmq_shared_state_socket(page, name, cap);
  rmq_shared_state_close(page);
}

/* Send m, encoded (its body CRC spoiled when bad_crc), as a PUT to the store's owner. */
static int put_message(const char *dir, rmq_message *m, bool bad_crc, rmq_remote_response *r) {
  char name[RMQ_REMOTE_NAME_MAX];
  owner_socket(dir, name, sizeof name);
  m->body_crc = rmq_body_crc(m->body, (size_t)m->body_len);
  size_t cap = (size_t)m->body_len + 4096;
  uint8_t *rec = malloc(cap);
  int32_t n = rmq_message_encode(m, rec, cap);
  if (bad_crc) rec[RMQ_POS_BODY_CRC] ^= 1;
  rmq_span span = {rec, (size_t)n};
  rmq_remote_request q = {.code = RMQ_REQUEST_PUT, .count = 1, .spans = &span, .nspans = 1};
  rmq_remoting_client *c = rmq_remoting_client_new();
  rmq_err err = {0};
  int rc = rmq_remoting_client_call(c, name, &q, r, &err);
  if (rc != RMQ_OK) fprintf(stderr, "  call: %s\n", err.msg);
  rmq_remoting_client_free(c);
  free(r->results);
  free(r->body);
  free(rec);
  return rc;
}

/* Send one record of a body_len-byte body as a PUT to the store's owner; its answer in r. */
static int put_remote(const char *dir, int body_len, rmq_remote_response *r) {
  uint8_t *body = calloc(1, (size_t)body_len);
  tu_msg t;
  int rc = put_message(dir, tu_message(&t, "Big", 0, body, body_len, "KEYS=k"), false, r);
  free(body);
  return rc;
}

/*
** A body up to max_message_size is appended whatever the record's other
** bytes (a local put's rule: body, then record up to max + RMQ_RECORD_SLACK);
** one byte more is refused by name.
*/
static void test_body_limit(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  tu_small_config(&cfg, 1 << 20);
  cfg.max_message_size = MAX_SIZE;
  rmq_store *s = tu_open(dir, &cfg);
  static const int sizes[] = {MAX_SIZE - 100, MAX_SIZE - 1, MAX_SIZE};
  for (size_t i = 0; s && i < sizeof sizes / sizeof *sizes; i++) {
    rmq_remote_response r = {0};
    CHECK_EQ_INT(put_remote(dir, sizes[i], &r), RMQ_OK);
    CHECK_EQ_INT(r.rc, RMQ_OK);
    if (r.rc != RMQ_OK) fprintf(stderr, "  body of %d bytes: %s\n", sizes[i], r.msg);
  }
  rmq_remote_response r = {0};
  if (s) {
    CHECK_EQ_INT(put_remote(dir, MAX_SIZE + 1, &r), RMQ_OK);
    CHECK_EQ_INT(r.rc, RMQ_EINVAL);
    CHECK(strstr(r.msg, "more than max_message_size (100000 bytes)") != NULL);
  }
  rmq_store_close(s);
  tu_rmrf(dir);
}

/*
** A process of another user (nobody) that binds the owner's name first, or
** after the owner died, is treated as no owner: the request never reaches
** it. Needs root, to run the squatter as nobody.
*/
static void test_squatter(void) {
  if (geteuid() != 0) {
    printf("test_squatter skipped: needs root to run a process as another user\n");
    return;
  }
  char name[64];
  snprintf(name, sizeof name, "sqlite-rocketmq-test/squat/%d", (int)getpid());
  int ready[2];
  CHECK_EQ_INT(pipe(ready), 0);
  pid_t pid = fork();
  if (pid == 0) {
    struct sockaddr_un addr;
    socklen_t len = rmq_remoting_address(name, &addr);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (setgid(65534) != 0 || setuid(65534) != 0 || bind(fd, (struct sockaddr *)&addr, len) != 0 ||
        listen(fd, 4) != 0) {
      _exit(1);
    }
    (void)!write(ready[1], "r", 1);
    for (;;) {
      int c = accept(fd, NULL, NULL);
      char buf[4096];
      /* It reads what it is sent, and reports it through its exit status. */
      if (c >= 0 && read(c, buf, sizeof buf) > 0) _exit(2);
    }
  }
  char r;
  CHECK_EQ_INT(read(ready[0], &r, 1), 1);
  rmq_remote_request q = {.code = RMQ_REQUEST_FLUSH};
  rmq_remote_response resp = {0};
  rmq_err err = {0};
  rmq_remoting_client *c = rmq_remoting_client_new();
  CHECK_EQ_INT(rmq_remoting_client_call(c, name, &q, &resp, &err), RMQ_ENOTFOUND);
  CHECK(strstr(err.msg, "a process of another user holds the name") != NULL);
  rmq_remoting_client_free(c);
  usleep(100000);
  int status = 0;
  CHECK_EQ_INT(waitpid(pid, &status, WNOHANG), 0); /* still waiting: nothing was sent */
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  close(ready[0]);
  close(ready[1]);
}

/*
** What an INSERT refuses the owner refuses from another process: a negative
** queue id, a system topic, SCHEDULE_TOPIC_XXXX past the delay levels, a
** body that fails its CRC. The store then opens again as it was.
*/
static void test_refused(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  tu_small_config(&cfg, 1 << 20);
  rmq_store *s = tu_open(dir, &cfg);
  struct {
    const char *topic;
    int queue_id;
    bool bad_crc;
    const char *why;
  } cases[] = {
      {"T", -1, false, "names queue -1 of topic T"},
      {"TBW102", 0, false, "names queue 0 of topic TBW102"},
      {"RMQ_SYS_TRACE_TOPIC", 0, false, "of topic RMQ_SYS_TRACE_TOPIC"},
      {"SCHEDULE_TOPIC_XXXX", 5000, false, "names queue 5000 of topic SCHEDULE_TOPIC_XXXX"},
      {"T", 0, true, "is not valid (BAD_CRC)"},
  };
  for (size_t i = 0; s && i < sizeof cases / sizeof *cases; i++) {
    tu_msg t;
    rmq_remote_response r = {0};
    rmq_message *m = tu_message(&t, cases[i].topic, cases[i].queue_id, "body", 4, NULL);
    CHECK_EQ_INT(put_message(dir, m, cases[i].bad_crc, &r), RMQ_OK);
    CHECK_EQ_INT(r.rc, RMQ_EINVAL);
    CHECK(strstr(r.msg, cases[i].why) != NULL);
    if (!strstr(r.msg, cases[i].why)) fprintf(stderr, "  case %zu: %s\n", i, r.msg);
  }
  int64_t end = s ? rmq_commitlog_max_offset(rmq_store_commitlog(s)) : -1;
  CHECK_EQ_INT(end, 0);
  rmq_store_close(s);
  s = tu_open(dir, &cfg);
  rmq_store_close(s);
  tu_rmrf(dir);
}

int main(void) {
  test_body_limit();
  test_refused();
  test_squatter();
  return check_report();
}
