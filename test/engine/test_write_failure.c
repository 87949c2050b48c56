/*
** test_write_failure.c: a batch of encoded records that fails is zeroed in
** the commit log, lest recovery take its records for real ones; when that
** zeroing fails too, the store is poisoned and refuses writes.
*/
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "io.h"
#include "testutil.h"

#define SEG 65536

static void test_failed_zeroing_poisons(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  rmq_commitlog *cl = rmq_store_commitlog(s);
  rmq_err err = {0};
  uint8_t rec[512], junk[200];
  tu_msg t;
  int32_t n = rmq_store_encode(s, tu_message(&t, "W", 0, "body", 4, "KEYS=k"), rec, sizeof rec,
                               &err);
  CHECK(n > 0 && (size_t)n <= sizeof rec);
  memset(junk, 0x11, sizeof junk);
  /* The good record is copied, the junk fails the batch, and zeroing the copy fails. */
  rmq_span bad[2] = {{rec, (size_t)n}, {junk, sizeof junk}};
  int64_t first;
  rmq_io_fault(RMQ_IO_PWRITE, 1, EIO, -1);
  CHECK_EQ_INT(rmq_store_put_encoded(s, bad, 2, 2, &first, &err), RMQ_EINVAL);
  rmq_io_fault(RMQ_IO_PWRITE, 0, 0, -1);
  CHECK(atomic_load(&cl->poisoned));
  CHECK(strstr(cl->poison_msg, "cannot zero the bytes of a failed write at 0 of ") != NULL);
  rmq_err_clear(&err);
  rmq_span good = {rec, (size_t)n};
  CHECK_EQ_INT(rmq_store_put_encoded(s, &good, 1, 1, &first, &err), RMQ_EPOISONED);
  CHECK(strstr(err.msg, "cannot zero") != NULL);
  CHECK_EQ_INT(rmq_commitlog_max_offset(cl), 0);
  rmq_store_close(s);
}

/* Zeroing that works leaves the store writable. */
static void test_zeroing_keeps_store(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  rmq_err err = {0};
  uint8_t rec[512], junk[200];
  tu_msg t;
  int32_t n = rmq_store_encode(s, tu_message(&t, "W", 0, "body", 4, ""), rec, sizeof rec, &err);
  memset(junk, 0x11, sizeof junk);
  rmq_span bad[2] = {{rec, (size_t)n}, {junk, sizeof junk}};
  int64_t first;
  CHECK_EQ_INT(rmq_store_put_encoded(s, bad, 2, 2, &first, &err), RMQ_EINVAL);
  CHECK(!atomic_load(&rmq_store_commitlog(s)->poisoned));
  rmq_err_clear(&err);
  rmq_span good = {rec, (size_t)n};
  CHECK_EQ_INT(rmq_store_put_encoded(s, &good, 1, 1, &first, &err), RMQ_OK);
  CHECK_EQ_INT(first, 0);
  rmq_store_close(s);
}

int main(void) {
  void (*tests[])(const char *) = {test_failed_zeroing_poisons, test_zeroing_keeps_store};
  for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
    char dir[64];
    tu_tmpdir(dir, sizeof dir);
    tests[i](dir);
    tu_rmrf(dir);
  }
  return check_report();
}
