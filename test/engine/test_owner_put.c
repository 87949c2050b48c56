/*
** test_owner_put.c: what the owner appends for another process (a PUT on
** its socket) meets the checks of a local put, no more and no less.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "remoting_client.h"
#include "remoting_command.h"
#include "shared_state.h"
#include "testutil.h"

#define MAX_SIZE 100000

/* Send one record of a body_len-byte body as a PUT to the store's owner; its answer in r. */
static int put_remote(const char *dir, int body_len, rmq_remote_response *r) {
  rmq_shared_state *page = NULL;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_shared_state_open(dir, &page, &err), RMQ_OK);
  if (!page) return -1;
  char name[RMQ_REMOTE_NAME_MAX];
  rmq_shared_state_socket(page, name, sizeof name);
  rmq_shared_state_close(page);
  uint8_t *body = calloc(1, (size_t)body_len);
  tu_msg t;
  rmq_message *m = tu_message(&t, "Big", 0, body, body_len, "KEYS=k");
  size_t cap = (size_t)body_len + 4096;
  uint8_t *rec = malloc(cap);
  int32_t n = rmq_message_encode(m, rec, cap);
  rmq_span span = {rec, (size_t)n};
  rmq_remote_request q = {.code = RMQ_REQUEST_PUT, .count = 1, .spans = &span, .nspans = 1};
  rmq_remoting_client *c = rmq_remoting_client_new();
  int rc = rmq_remoting_client_call(c, name, &q, r, &err);
  if (rc != RMQ_OK) fprintf(stderr, "  call: %s\n", err.msg);
  rmq_remoting_client_free(c);
  free(r->results);
  free(r->body);
  free(rec);
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

int main(void) {
  test_body_limit();
  return check_report();
}
