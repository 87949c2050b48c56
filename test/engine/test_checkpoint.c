/*
** test_checkpoint.c: StoreCheckpoint's file, written by a writable store and
** read back by a read-only one, and the errors of that read (opened and read
** through io.h, so that faults can be injected).
*/
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "checkpoint.h"
#include "io.h"
#include "testutil.h"

static void write_checkpoint(const char *dir) {
  rmq_checkpoint cp;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_checkpoint_open(&cp, dir, true, &err), RMQ_OK);
  atomic_store(&cp.physic_msg_timestamp, 1700000000001);
  atomic_store(&cp.logics_msg_timestamp, 1700000000002);
  atomic_store(&cp.index_msg_timestamp, 1700000000003);
  CHECK_EQ_INT(rmq_checkpoint_flush(&cp, &err), RMQ_OK);
  rmq_checkpoint_close(&cp);
}

static void test_read_back(const char *dir) {
  rmq_checkpoint cp;
  rmq_err err = {0};
  /* No file yet: a read-only store reads zeros. */
  CHECK_EQ_INT(rmq_checkpoint_open(&cp, dir, false, &err), RMQ_OK);
  CHECK_EQ_INT(atomic_load(&cp.physic_msg_timestamp), 0);
  rmq_checkpoint_close(&cp);
  write_checkpoint(dir);
  CHECK_EQ_INT(rmq_checkpoint_open(&cp, dir, false, &err), RMQ_OK);
  CHECK_EQ_INT(atomic_load(&cp.physic_msg_timestamp), 1700000000001);
  CHECK_EQ_INT(atomic_load(&cp.logics_msg_timestamp), 1700000000002);
  CHECK_EQ_INT(atomic_load(&cp.index_msg_timestamp), 1700000000003);
  rmq_checkpoint_close(&cp);
}

/* A read-only open with the nth call of op failing with e (short_len as rmq_io_fault). */
static void open_with_fault(const char *dir, rmq_io_op op, int e, long short_len, int want,
                            const char *want_msg) {
  rmq_checkpoint cp;
  rmq_err err = {0};
  rmq_io_fault(op, 1, e, short_len);
  CHECK_EQ_INT(rmq_checkpoint_open(&cp, dir, false, &err), want);
  CHECK(strstr(err.msg, want_msg) != NULL && strstr(err.msg, "/checkpoint") != NULL);
  if (!strstr(err.msg, want_msg)) fprintf(stderr, "  %s\n", err.msg);
  rmq_io_fault(op, 0, 0, -1);
  rmq_checkpoint_close(&cp);
}

static void test_read_faults(const char *dir) {
  write_checkpoint(dir);
  open_with_fault(dir, RMQ_IO_OPEN, EACCES, -1, RMQ_EIO, strerror(EACCES));
  open_with_fault(dir, RMQ_IO_PREAD, EIO, -1, RMQ_EIO, strerror(EIO));
  open_with_fault(dir, RMQ_IO_PREAD, 0, 10, RMQ_ECORRUPT, "is 10 bytes, shorter than 24");
}

int main(void) {
  void (*tests[])(const char *) = {test_read_back, test_read_faults};
  for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
    char dir[64];
    tu_tmpdir(dir, sizeof dir);
    tests[i](dir);
    tu_rmrf(dir);
  }
  return check_report();
}
