/*
** test_group_commit.c: GroupCommitService (flush='sync') with segments
** that roll at nearly every message: several producers at once leave the
** flush several segments behind, and every put must still return once its
** bytes are on disk, never with a timeout that did not happen.
*/
#include <pthread.h>

#include "check.h"
#include "testutil.h"

#define THREADS 4
#define PUTS 300
#define BODY 3000

typedef struct producer {
  rmq_store *s;
  int thread;
  int failed;
  char first_error[512];
} producer;

static void *produce(void *p) {
  producer *a = p;
  char body[BODY];
  memset(body, 'a' + a->thread, sizeof body);
  tu_msg t;
  for (int i = 0; i < PUTS; i++) {
    rmq_put_result r;
    rmq_err err = {0};
    if (rmq_store_put(a->s, tu_message(&t, "GroupCommit", a->thread, body, BODY, NULL), 1, &r,
                      &err) == RMQ_OK) {
      continue;
    }
    if (a->failed++ == 0) snprintf(a->first_error, sizeof a->first_error, "%s", err.msg);
  }
  return NULL;
}

/* Four producers, 4 KiB segments, 3 KB bodies: one message per segment. */
static void test_rolling_segments(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  tu_small_config(&cfg, 4096);
  cfg.flush_sync = true;
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  producer ps[THREADS];
  pthread_t tids[THREADS];
  for (int i = 0; i < THREADS; i++) {
    ps[i] = (producer){.s = s, .thread = i};
    pthread_create(&tids[i], NULL, produce, &ps[i]);
  }
  int failed = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(tids[i], NULL);
    failed += ps[i].failed;
    if (ps[i].failed) fprintf(stderr, "  thread %d: %s\n", i, ps[i].first_error);
  }
  CHECK_EQ_INT(failed, 0);
  rmq_store_close(s);
  tu_rmrf(dir);
}

int main(void) {
  for (int round = 0; round < 3; round++) test_rolling_segments();
  return check_report();
}
