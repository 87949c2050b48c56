/*
** test_staging.c: the pool of transaction staging chunks, alone and filled
** by a store's allocation thread.
*/
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "rmq.h"
#include "staging.h"
#include "testutil.h"

/* How many of the chunk's pages are resident (mapped in). */
static size_t resident_pages(void *chunk) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE), n = RMQ_STAGING_CHUNK / page, count = 0;
  unsigned char *vec = malloc(n);
  if (vec && mincore(chunk, RMQ_STAGING_CHUNK, vec) == 0) {
    for (size_t i = 0; i < n; i++) count += vec[i] & 1;
  }
  free(vec);
  return count;
}

static size_t chunk_pages(void) { return RMQ_STAGING_CHUNK / (size_t)sysconf(_SC_PAGESIZE); }

/* Takes, gives, the filler's rule and the cap on kept chunks. */
static void test_pool(void) {
  rmq_staging_pool *p = rmq_staging_pool_new(0);
  CHECK(p != NULL);
  CHECK(!rmq_staging_fill_step(p)); /* nothing out: nothing to fill for */
  bool fill = false;
  char *a = rmq_staging_take(p, &fill);
  CHECK(a != NULL);
  CHECK(fill); /* none ready: wake the filler */
  a[0] = 1;
  a[RMQ_STAGING_CHUNK - 1] = 2;
  /* The filler maps chunks in until RMQ_STAGING_AHEAD are ready, then stops. */
  for (int i = 0; i < RMQ_STAGING_AHEAD; i++) CHECK(rmq_staging_fill_step(p));
  CHECK(!rmq_staging_fill_step(p));
  char *b = rmq_staging_take(p, &fill);
  CHECK(b != NULL && b != a);
  CHECK(fill); /* one below RMQ_STAGING_AHEAD again */
  CHECK_EQ_INT(resident_pages(b), chunk_pages());
  char *c = rmq_staging_take(p, &fill);
  CHECK(!fill); /* woken once per shortfall */
  /* A returned chunk is handed out next, as it was (the warmest). */
  rmq_staging_give(p, a);
  char *d = rmq_staging_take(p, &fill);
  CHECK(d == a);
  CHECK_EQ_INT(d[RMQ_STAGING_CHUNK - 1], 2);
  rmq_staging_give(p, b);
  rmq_staging_give(p, c);
  rmq_staging_give(p, d);
  /* Nothing out: the filler rests however few are ready. */
  CHECK(!rmq_staging_fill_step(p));
  /* More than RMQ_STAGING_KEEP given back: the filler unmaps the rest. */
  char *out[RMQ_STAGING_KEEP + 2];
  for (int i = 0; i < RMQ_STAGING_KEEP + 2; i++) out[i] = rmq_staging_take(p, &fill);
  for (int i = 0; i < RMQ_STAGING_KEEP; i++) CHECK(!rmq_staging_give(p, out[i]));
  CHECK(rmq_staging_give(p, out[RMQ_STAGING_KEEP])); /* wake the filler to unmap it */
  CHECK(!rmq_staging_give(p, out[RMQ_STAGING_KEEP + 1]));
  CHECK(rmq_staging_fill_step(p));
  CHECK(rmq_staging_fill_step(p));
  CHECK(!rmq_staging_fill_step(p));
  for (int i = 0; i < RMQ_STAGING_KEEP; i++) out[i] = rmq_staging_take(p, &fill);
  CHECK(rmq_staging_fill_step(p)); /* all kept ones are out: fill again */
  for (int i = 0; i < RMQ_STAGING_KEEP; i++) rmq_staging_give(p, out[i]);
  rmq_staging_pool_free(p);
}

/* Chunks beyond the kept ones linger, and are handed out again before new ones. */
static void test_linger(void) {
  rmq_staging_pool *p = rmq_staging_pool_new(60000);
  bool fill;
  char *out[RMQ_STAGING_KEEP + 1];
  for (int i = 0; i <= RMQ_STAGING_KEEP; i++) out[i] = rmq_staging_take(p, &fill);
  out[RMQ_STAGING_KEEP][RMQ_STAGING_CHUNK - 1] = 7;
  for (int i = 0; i <= RMQ_STAGING_KEEP; i++) rmq_staging_give(p, out[i]);
  CHECK(!rmq_staging_fill_step(p)); /* given back just now: not unmapped yet */
  char *again[RMQ_STAGING_KEEP + 1];
  for (int i = 0; i <= RMQ_STAGING_KEEP; i++) again[i] = rmq_staging_take(p, &fill);
  CHECK(again[RMQ_STAGING_KEEP] == out[RMQ_STAGING_KEEP]); /* the lingering one, as it was */
  CHECK_EQ_INT(again[RMQ_STAGING_KEEP][RMQ_STAGING_CHUNK - 1], 7);
  for (int i = 0; i <= RMQ_STAGING_KEEP; i++) rmq_staging_give(p, again[i]);
  rmq_staging_pool_free(p); /* unmaps the lingering one too */
}

/* A store's allocation thread maps chunks in ahead of the transaction taking them. */
static void test_store_fills(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  rmq_config_init(&cfg);
  rmq_store *s = NULL;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_open(dir, &cfg, &s, &err), RMQ_OK);
  void *first = rmq_store_staging_take(s);
  CHECK(first != NULL);
  /* The take woke the thread; give it up to 5 s on a busy machine. Chunks it
  ** has not filled yet are kept out, so each take looks at a new one. */
  void *taken[500];
  int n = 0;
  bool filled = false;
  while (n < 500 && !filled) {
    usleep(10000);
    taken[n] = rmq_store_staging_take(s);
    filled = taken[n] && resident_pages(taken[n]) == chunk_pages();
    n++;
  }
  CHECK(filled);
  rmq_store_staging_give(s, first);
  for (int i = 0; i < n; i++) rmq_store_staging_give(s, taken[i]);
  rmq_store_close(s);
  tu_rmrf(dir);
}

int main(void) {
  test_pool();
  test_linger();
  test_store_fills();
  return check_report();
}
