/*
** test_consume_queue.c: ConsumeQueue and the consume-queue table
** (engine/consume_queue.h) on tiny segments of 5 entries (100 bytes), so
** that every operation crosses segment boundaries.
**
** Entry i of a queue written by put_range() has commitLogOffset 100*i,
** size 50+i and tagsCode i; the fake CommitLog gives it store time
** 1000 + 10*i.
*/
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "consume_queue.h"
#include "io.h"
#include "testutil.h"

#define PER_FILE 5
#define FILE_BYTES (PER_FILE * RMQ_CQ_UNIT_SIZE)

static char root[64];

static bool exists(const char *fmt, const char *a) {
  char path[512];
  snprintf(path, sizeof path, fmt, root, a);
  return access(path, F_OK) == 0;
}

static rmq_consume_queue *open_cq(const char *topic, int32_t qid, bool writable) {
  rmq_err err = {0};
  rmq_consume_queue *cq = NULL;
  int rc = rmq_cq_open(root, topic, qid, PER_FILE, writable, &cq, &err);
  CHECK_EQ_INT(rc, RMQ_OK);
  if (rc != RMQ_OK) fprintf(stderr, "  %s\n", err.msg);
  return cq;
}

static void put_range(rmq_consume_queue *cq, int64_t from, int64_t to) {
  for (int64_t i = from; i < to; i++) {
    rmq_err err = {0};
    int rc = rmq_cq_put(cq, 100 * i, (int32_t)(50 + i), i, 1000 + 10 * i, i, NULL, &err);
    if (rc != RMQ_OK) {
      CHECK_EQ_INT(rc, RMQ_OK);
      fprintf(stderr, "  put %lld: %s\n", (long long)i, err.msg);
      return;
    }
  }
}

/* Every entry in [from, to) reads back as put_range wrote it. */
static void check_entries(rmq_consume_queue *cq, int64_t from, int64_t to) {
  int bad = 0;
  for (int64_t i = from; i < to; i++) {
    rmq_err err = {0};
    rmq_cq_entry e;
    if (rmq_cq_get(cq, i, &e, &err) != RMQ_OK || e.phy_offset != 100 * i || e.size != 50 + i ||
        e.tags_code != i) {
      bad++;
    }
  }
  CHECK_EQ_INT(bad, 0);
}

/* Store time of the fake CommitLog; ctx, when set, names an offset whose read fails. */
static int64_t fake_store_time(void *ctx, int64_t phy_offset, int32_t size) {
  if (ctx && *(int64_t *)ctx == phy_offset) return -1;
  if (size != 50 + phy_offset / 100) return -1;
  return 1000 + phy_offset / 100 * 10;
}

static void test_put_get_iterate(void) {
  rmq_consume_queue *cq = open_cq("TopicA", 0, true);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 0);
  CHECK(!exists("%s/consumequeue/%s", "TopicA")); /* nothing on disk before a put */
  put_range(cq, 0, 23);
  CHECK_EQ_INT(rmq_cq_min_offset(cq), 0);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 23);
  CHECK_EQ_INT(rmq_cq_max_physic_offset(cq), 2200 + 72);
  CHECK_EQ_INT(rmq_mfq_count(&cq->mfq), 5);
  CHECK(exists("%s/consumequeue/%s/0/00000000000000000000", "TopicA"));
  CHECK(exists("%s/consumequeue/%s/0/00000000000000000400", "TopicA"));
  check_entries(cq, 0, 23);

  rmq_err err = {0};
  rmq_cq_entry e;
  CHECK_EQ_INT(rmq_cq_get(cq, 23, &e, &err), RMQ_ENOTFOUND);
  CHECK(strstr(err.msg, "TopicA/0") && strstr(err.msg, "[0, 23)"));
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_cq_get(cq, -1, &e, &err), RMQ_ENOTFOUND);

  /* Raw bytes of entry 6: second segment, position 20. */
  rmq_mapped_file *mf = rmq_mfq_find(&cq->mfq, 6 * 20);
  static const uint8_t want[20] = {0, 0,  0, 0, 0, 0, 0x02, 0x58, 0, 0,
                                   0, 56, 0, 0, 0, 0, 0,    0,    0, 6};
  CHECK(mf && memcmp(mf->mapped + 20, want, 20) == 0);
  if (mf) rmq_mapped_file_release(mf);

  rmq_cq_iter it;
  int n = 0, order_ok = 1;
  rmq_cq_iter_start(&it, cq, 0);
  while (rmq_cq_iter_next(&it, &e)) {
    if (e.phy_offset != 100 * n || it.offset != n + 1) order_ok = 0;
    n++;
  }
  CHECK_EQ_INT(n, 23);
  CHECK(order_ok);
  /* A live iterator sees entries appended after it reached the end. */
  put_range(cq, 23, 26);
  CHECK(rmq_cq_iter_next(&it, &e) && e.phy_offset == 2300);
  rmq_cq_iter_stop(&it);

  rmq_cq_iter_start(&it, cq, 11);
  n = 0;
  while (rmq_cq_iter_next(&it, &e)) n++;
  rmq_cq_iter_stop(&it);
  CHECK_EQ_INT(n, 15);
  rmq_cq_iter_start(&it, cq, 1000);
  CHECK(!rmq_cq_iter_next(&it, &e));
  rmq_cq_iter_stop(&it);

  CHECK_EQ_INT(rmq_cq_flush(cq, 0, &err), RMQ_OK);
  rmq_cq_close(cq);
}

static void test_pre_fill(void) {
  /* A queue that begins at 2, inside its first segment, with a reader waiting. */
  rmq_consume_queue *cq = open_cq("TopicP", 1, true);
  rmq_cq_iter it;
  rmq_cq_entry e;
  rmq_cq_iter_start(&it, cq, 0);
  CHECK(!rmq_cq_iter_next(&it, &e));
  put_range(cq, 2, 4);
  CHECK(rmq_cq_iter_next(&it, &e) && e.phy_offset == 200);
  rmq_cq_iter_stop(&it);
  CHECK_EQ_INT(rmq_cq_min_offset(cq), 2);
  rmq_cq_close(cq);

  cq = open_cq("TopicP", 2, true);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_cq_put(cq, 700, 57, 7, 1070, 7, NULL, &err), RMQ_OK);
  /* 7*20 = 140: the first segment starts at 100, entries 5 and 6 are pre-blank. */
  CHECK(exists("%s/consumequeue/%s/2/00000000000000000100", "TopicP"));
  CHECK(!exists("%s/consumequeue/%s/2/00000000000000000000", "TopicP"));
  CHECK_EQ_INT(rmq_cq_min_offset(cq), 7);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 8);
  static const uint8_t blank[20] = {0,    0,    0, 0, 0, 0, 0, 0, 0x7F, 0xFF,
                                    0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0,    0};
  rmq_mapped_file *mf = rmq_mfq_first(&cq->mfq);
  CHECK(mf && memcmp(mf->mapped, blank, 20) == 0 && memcmp(mf->mapped + 20, blank, 20) == 0);
  if (mf) rmq_mapped_file_release(mf);

  CHECK_EQ_INT(rmq_cq_get(cq, 6, &e, &err), RMQ_ENOTFOUND);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_cq_get(cq, 7, &e, &err), RMQ_OK);
  CHECK_EQ_INT(e.phy_offset, 700);
  rmq_cq_iter_start(&it, cq, 0);
  CHECK(rmq_cq_iter_next(&it, &e) && e.phy_offset == 700 && it.offset == 8);
  rmq_cq_iter_stop(&it);
  put_range(cq, 8, 12);
  CHECK(exists("%s/consumequeue/%s/2/00000000000000000200", "TopicP"));
  check_entries(cq, 8, 12);
  rmq_cq_close(cq);

  /* After a restart the fillers are neither the min offset nor the max physic offset. */
  cq = open_cq("TopicP", 2, true);
  rmq_cq_recover(cq);
  rmq_cq_correct_min_offset(cq, 0);
  CHECK_EQ_INT(rmq_cq_min_offset(cq), 7);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 12);
  CHECK_EQ_INT(rmq_cq_max_physic_offset(cq), 1100 + 61);
  rmq_cq_close(cq);
}

static void test_duplicates_and_gaps(void) {
  rmq_checkpoint cp;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_checkpoint_open(&cp, root, true, &err), RMQ_OK);
  rmq_consume_queue *cq = open_cq("TopicD", 0, true);
  put_range(cq, 0, 6);
  CHECK_EQ_INT(rmq_cq_put(cq, 600, 56, 6, 987654, 6, &cp, &err), RMQ_OK);
  CHECK_EQ_INT(atomic_load(&cp.logics_msg_timestamp), 987654);
  /* Re-dispatch of a record already in the queue: skipped by the physic guard. */
  CHECK_EQ_INT(rmq_cq_put(cq, 500, 55, 5, 1, 5, &cp, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 7);
  CHECK_EQ_INT(atomic_load(&cp.logics_msg_timestamp), 987654);
  /* A queue offset below the tail: skipped by the logic guard. */
  CHECK_EQ_INT(rmq_cq_put(cq, 5000, 10, 0, 2, 3, &cp, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 7);
  CHECK_EQ_INT(rmq_cq_max_physic_offset(cq), 656);
  /* A queue offset past the tail: appended at the tail, as RocketMQ does, and counted. */
  CHECK_EQ_INT(rmq_cq_put(cq, 900, 59, 9, 3, 9, &cp, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 8);
  CHECK_EQ_INT(atomic_load(&cq->logic_gaps), 1);
  rmq_cq_entry e;
  CHECK(rmq_cq_get(cq, 7, &e, &err) == RMQ_OK && e.phy_offset == 900);
  /* Entries that are not records are refused. */
  CHECK_EQ_INT(rmq_cq_put(cq, 1000, 0, 0, 4, 8, &cp, &err), RMQ_EINVAL);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_cq_put(cq, 1000, 10, 0, 4, -1, &cp, &err), RMQ_EINVAL);
  rmq_cq_close(cq);
  rmq_checkpoint_close(&cp);
}

/* An entry whose end does not fit in int64 is damage: recovery stops before it. */
static void test_recover_offset_overflow(void) {
  rmq_consume_queue *cq = open_cq("TopicO", 0, true);
  put_range(cq, 0, 3);
  rmq_cq_close(cq);
  char path[512];
  snprintf(path, sizeof path, "%s/consumequeue/TopicO/0/00000000000000000000", root);
  uint8_t entry[20];
  rmq_put64(entry, INT64_MAX - 60000);
  rmq_put32(entry + 8, 773324);
  rmq_put64(entry + 12, 0);
  int fd = open(path, O_WRONLY);
  CHECK(fd >= 0 && pwrite(fd, entry, sizeof entry, 3 * 20) == (ssize_t)sizeof entry);
  close(fd);
  cq = open_cq("TopicO", 0, false);
  rmq_cq_recover(cq);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 3);
  CHECK_EQ_INT(rmq_cq_max_physic_offset(cq), 200 + 52);
  rmq_cq_close(cq);
}

static void test_recover(void) {
  rmq_consume_queue *cq = open_cq("TopicR", 1, true);
  put_range(cq, 0, 23);
  rmq_cq_close(cq);
  /* An all-zero segment after the end, as a crash can leave behind. */
  char path[512];
  snprintf(path, sizeof path, "%s/consumequeue/TopicR/1/00000000000000000500", root);
  int fd = open(path, O_CREAT | O_WRONLY, 0644);
  CHECK(fd >= 0 && ftruncate(fd, FILE_BYTES) == 0);
  close(fd);

  /* Read-only: the end is found, and nothing on disk changes. */
  cq = open_cq("TopicR", 1, false);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 30); /* loaded segments count as full */
  rmq_cq_recover(cq);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 23);
  CHECK_EQ_INT(rmq_cq_max_physic_offset(cq), 2200 + 72);
  CHECK_EQ_INT(rmq_mfq_count(&cq->mfq), 5);
  CHECK(access(path, F_OK) == 0);
  check_entries(cq, 0, 23);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_cq_put(cq, 2300, 73, 23, 0, 23, NULL, &err), RMQ_EINVAL);
  rmq_cq_truncate_dirty(cq, 1000);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 10);
  CHECK(exists("%s/consumequeue/%s/1/00000000000000000400", "TopicR"));
  rmq_cq_close(cq);

  /* Writable: the trailing segment is deleted; the queue goes on at 23. */
  cq = open_cq("TopicR", 1, true);
  rmq_cq_recover(cq);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 23);
  CHECK(access(path, F_OK) != 0);
  put_range(cq, 23, 27);
  check_entries(cq, 0, 27);
  rmq_cq_close(cq);
  cq = open_cq("TopicR", 1, true);
  rmq_cq_recover(cq);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 27);
  rmq_cq_close(cq);

  /* A segment of the wrong size is a load error naming it. */
  snprintf(path, sizeof path, "%s/consumequeue/TopicR/1/00000000000000000600", root);
  fd = open(path, O_CREAT | O_WRONLY, 0644);
  CHECK(fd >= 0 && ftruncate(fd, 99) == 0);
  close(fd);
  cq = NULL;
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_cq_open(root, "TopicR", 1, PER_FILE, true, &cq, &err), RMQ_ECORRUPT);
  CHECK(strstr(err.msg, "00000000000000000600") != NULL);
  CHECK(cq == NULL);
  unlink(path);
}

static void test_truncate_dirty(void) {
  rmq_consume_queue *cq = open_cq("TopicT", 0, true);
  put_range(cq, 0, 23);
  /* Cut inside the 4th segment: entries 0..15 stay, the 5th segment goes. */
  rmq_cq_truncate_dirty(cq, 1550);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 16);
  CHECK_EQ_INT(rmq_cq_max_physic_offset(cq), 1500 + 65);
  CHECK(!exists("%s/consumequeue/%s/0/00000000000000000400", "TopicT"));
  check_entries(cq, 0, 16);
  /* Cut exactly at a segment start: two segments go, the 2nd stays full. */
  rmq_cq_truncate_dirty(cq, 1000);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 10);
  CHECK_EQ_INT(rmq_mfq_count(&cq->mfq), 2);
  CHECK(!exists("%s/consumequeue/%s/0/00000000000000000200", "TopicT"));
  CHECK_EQ_INT(rmq_cq_max_physic_offset(cq), 900 + 59);
  /* Past the end: nothing is cut. */
  rmq_cq_truncate_dirty(cq, 1 << 30);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 10);
  CHECK_EQ_INT(rmq_cq_max_physic_offset(cq), 959);
  /* The queue goes on where it was cut, overwriting the stale bytes. */
  put_range(cq, 10, 14);
  check_entries(cq, 0, 14);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 14);
  rmq_cq_truncate_dirty(cq, 0);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 0);
  CHECK_EQ_INT(rmq_mfq_count(&cq->mfq), 0);
  CHECK(!exists("%s/consumequeue/%s/0/00000000000000000000", "TopicT"));
  put_range(cq, 0, 3);
  check_entries(cq, 0, 3);
  rmq_cq_close(cq);
}

/* The last entry as rmq_cq_check reads it, through the opening copy while there is one. */
static rmq_cq_entry checked_last(rmq_consume_queue *cq) {
  char why[300];
  rmq_cq_entry last;
  CHECK_EQ_INT(rmq_cq_check(cq, 1 << 30, why, sizeof why, &last), -1);
  return last;
}

/*
** A writable queue's load reads the first entries of its last segment, and
** recovery keeps the valid ones for the passes of the open; a cut forgets
** them (the entries cut are written again), and so does the end of the
** open. A read-only queue: no copy.
*/
static void test_opening_copy(void) {
  rmq_consume_queue *cq = open_cq("TopicO", 0, true);
  put_range(cq, 0, 3);
  rmq_cq_close(cq);
  cq = open_cq("TopicO", 0, true);
  CHECK(cq->opening != NULL);
  CHECK_EQ_INT(cq->opening_len, PER_FILE * RMQ_CQ_UNIT_SIZE);
  rmq_cq_recover(cq);
  CHECK(cq->opening != NULL);
  CHECK_EQ_INT(cq->opening_len, 3 * RMQ_CQ_UNIT_SIZE);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 3);
  /* A cut past the end keeps it. */
  rmq_cq_truncate_dirty(cq, 1 << 30);
  CHECK(cq->opening != NULL);
  CHECK_EQ_INT(checked_last(cq).phy_offset, 200);
  rmq_cq_correct_min_offset(cq, 100);
  CHECK_EQ_INT(rmq_cq_min_offset(cq), 1);
  /* Entry 2 cut and written again with other bytes: they are read, not the copy's. */
  rmq_cq_truncate_dirty(cq, 150);
  CHECK(cq->opening == NULL);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_cq_put(cq, 160, 10, 7, 0, 2, NULL, &err), RMQ_OK);
  CHECK_EQ_INT(checked_last(cq).phy_offset, 160);
  rmq_cq_close(cq);
  cq = open_cq("TopicO", 0, true);
  rmq_cq_recover(cq);
  CHECK(cq->opening != NULL);
  rmq_cq_opened(cq);
  CHECK(cq->opening == NULL);
  CHECK_EQ_INT(checked_last(cq).phy_offset, 160);
  rmq_cq_close(cq);
  cq = open_cq("TopicO", 0, false);
  rmq_cq_recover(cq);
  CHECK(cq->opening == NULL);
  rmq_cq_close(cq);
  /* 26 entries in the last segment: the copy holds the first 25, the scan reads on. */
  cq = NULL;
  CHECK_EQ_INT(rmq_cq_open(root, "TopicO", 1, 64, true, &cq, &err), RMQ_OK);
  put_range(cq, 0, 26);
  rmq_cq_close(cq);
  CHECK_EQ_INT(rmq_cq_open(root, "TopicO", 1, 64, true, &cq, &err), RMQ_OK);
  rmq_cq_recover(cq);
  CHECK(cq->opening != NULL);
  CHECK_EQ_INT(cq->opening_len, 25 * RMQ_CQ_UNIT_SIZE);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 26);
  check_entries(cq, 0, 26);
  CHECK_EQ_INT(checked_last(cq).phy_offset, 2500);
  /* Entries put while the copy is kept are read from the file. */
  put_range(cq, 26, 28);
  check_entries(cq, 0, 28);
  CHECK_EQ_INT(checked_last(cq).phy_offset, 2700);
  rmq_cq_close(cq);
  /* A segment made but never written (a crash before its first entry): no copy, and no stale entry. */
  char path[512];
  snprintf(path, sizeof path, "%s/consumequeue/TopicO/2", root);
  CHECK(mkdir(path, 0755) == 0);
  snprintf(path, sizeof path, "%s/consumequeue/TopicO/2/00000000000000000000", root);
  int fd = open(path, O_CREAT | O_WRONLY, 0644);
  CHECK(fd >= 0 && ftruncate(fd, 64 * RMQ_CQ_UNIT_SIZE) == 0);
  close(fd);
  CHECK_EQ_INT(rmq_cq_open(root, "TopicO", 2, 64, true, &cq, &err), RMQ_OK);
  CHECK(cq->opening != NULL);
  rmq_cq_recover(cq);
  CHECK(cq->opening == NULL);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 0);
  put_range(cq, 0, 2);
  check_entries(cq, 0, 2);
  rmq_cq_correct_min_offset(cq, 0);
  CHECK_EQ_INT(rmq_cq_min_offset(cq), 0);
  rmq_cq_close(cq);
  /* The table tests load every topic: this one's segment size is not theirs. */
  char dir[512];
  snprintf(dir, sizeof dir, "%s/consumequeue/TopicO", root);
  tu_rmrf(dir);
}

static void test_min_and_expiry(void) {
  rmq_consume_queue *cq = open_cq("TopicE", 0, true);
  put_range(cq, 0, 23);
  /* Nothing in the first segment qualifies (a pass killed before it deleted it): the next's. */
  rmq_cq_correct_min_offset(cq, 450);
  CHECK_EQ_INT(rmq_cq_min_offset(cq), 5);
  rmq_cq_correct_min_offset(cq, 250);
  CHECK_EQ_INT(rmq_cq_min_offset(cq), 3);
  rmq_err err = {0};
  rmq_cq_entry e;
  CHECK_EQ_INT(rmq_cq_get(cq, 2, &e, &err), RMQ_ENOTFOUND);

  /* Segments whose last entry is below 1250: [0,5) and [5,10). */
  CHECK_EQ_INT(rmq_cq_delete_expired(cq, 1250), 2);
  CHECK_EQ_INT(rmq_cq_min_offset(cq), 13);
  CHECK(!exists("%s/consumequeue/%s/0/00000000000000000000", "TopicE"));
  CHECK(!exists("%s/consumequeue/%s/0/00000000000000000100", "TopicE"));
  CHECK(exists("%s/consumequeue/%s/0/00000000000000000200", "TopicE"));
  rmq_cq_iter it;
  rmq_cq_iter_start(&it, cq, 0);
  CHECK(rmq_cq_iter_next(&it, &e) && e.phy_offset == 1300);
  rmq_cq_iter_stop(&it);
  check_entries(cq, 13, 23);
  /* The last segment is never deleted, even when all of it is old. */
  CHECK_EQ_INT(rmq_cq_delete_expired(cq, 1 << 30), 2);
  CHECK_EQ_INT(rmq_mfq_count(&cq->mfq), 1);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 23);
  rmq_cq_close(cq);

  /*
  ** The clean service deletes the segment an iterator holds: the mapping stays
  ** valid, and the iterator moves on to the new min offset, since the entries
  ** it skips point below the CommitLog min offset (their messages are gone).
  */
  cq = open_cq("TopicE", 1, true);
  put_range(cq, 0, 12);
  rmq_cq_iter_start(&it, cq, 1);
  CHECK(rmq_cq_iter_next(&it, &e) && e.phy_offset == 100);
  CHECK_EQ_INT(rmq_cq_delete_expired(cq, 1000), 2);
  int n = 0;
  int64_t last = -1;
  while (rmq_cq_iter_next(&it, &e)) n++, last = e.phy_offset;
  rmq_cq_iter_stop(&it);
  CHECK_EQ_INT(n, 2); /* 10 and 11 */
  CHECK_EQ_INT(last, 1100);
  rmq_cq_close(cq);
}

static void set_mtime(const char *topic, const char *name, int64_t ms) {
  char path[512];
  snprintf(path, sizeof path, "%s/consumequeue/%s/0/%s", root, topic, name);
  struct timespec ts[2] = {{ms / 1000, (ms % 1000) * 1000000}, {ms / 1000, (ms % 1000) * 1000000}};
  CHECK(utimensat(AT_FDCWD, path, ts, 0) == 0);
}

static int64_t by_time(rmq_consume_queue *cq, int64_t t, int64_t cl_min) {
  rmq_err err = {0};
  int64_t out = -99;
  int rc = rmq_cq_offset_by_time(cq, t, cl_min, fake_store_time, NULL, &out, &err);
  CHECK_EQ_INT(rc, RMQ_OK);
  return out;
}

static int64_t first_at(rmq_consume_queue *cq, int64_t t, int64_t cl_min) {
  rmq_err err = {0};
  int64_t out = -99;
  int rc = rmq_cq_first_offset_at_or_after_time(cq, t, cl_min, fake_store_time, NULL, &out, &err);
  CHECK_EQ_INT(rc, RMQ_OK);
  return out;
}

static void test_time_search(void) {
  rmq_consume_queue *cq = open_cq("TopicS", 0, true);
  rmq_err err = {0};
  int64_t out = -1;
  CHECK_EQ_INT(rmq_cq_offset_by_time(cq, 1000, 0, fake_store_time, NULL, &out, &err), RMQ_OK);
  CHECK_EQ_INT(out, 0);
  CHECK_EQ_INT(first_at(cq, 1000, 0), 0);
  put_range(cq, 0, 23);

  /* Every segment was modified "now", long after 1970: the first one is searched. */
  CHECK_EQ_INT(by_time(cq, 1020, 0), 2); /* exact */
  CHECK_EQ_INT(by_time(cq, 1024, 0), 2); /* nearer to 1020 than to 1030 */
  CHECK_EQ_INT(by_time(cq, 1025, 0), 2); /* a tie goes to the earlier one */
  CHECK_EQ_INT(by_time(cq, 1026, 0), 3);
  CHECK_EQ_INT(by_time(cq, 500, 0), 0);
  CHECK_EQ_INT(by_time(cq, 99999, 0), 4);     /* RocketMQ stays in the chosen segment */
  CHECK_EQ_INT(by_time(cq, 1000, 250), 3);    /* entries 0..2 are below the CommitLog min */
  CHECK_EQ_INT(by_time(cq, 1000, 100000), 5); /* all too early: past them, not (0-1)/20 */

  CHECK_EQ_INT(first_at(cq, 1020, 0), 2);
  CHECK_EQ_INT(first_at(cq, 1024, 0), 3);
  CHECK_EQ_INT(first_at(cq, 1021, 0), 3);
  CHECK_EQ_INT(first_at(cq, 500, 0), 0);
  CHECK_EQ_INT(first_at(cq, 1220, 0), 22);
  CHECK_EQ_INT(first_at(cq, 99999, 0), 23);
  CHECK_EQ_INT(first_at(cq, 0, 250), 3);

  /* The segment is picked by file mtime (MFQ getMappedFileByTime). */
  set_mtime("TopicS", "00000000000000000000", 1040);
  set_mtime("TopicS", "00000000000000000100", 1090);
  set_mtime("TopicS", "00000000000000000200", 1140);
  CHECK_EQ_INT(by_time(cq, 1095, 0), 10);
  CHECK_EQ_INT(by_time(cq, 1112, 0), 11);
  CHECK_EQ_INT(first_at(cq, 1095, 0), 10);

  /* A store time that cannot be read is an error naming the entry. */
  int64_t broken = 1100;
  CHECK_EQ_INT(rmq_cq_offset_by_time(cq, 1112, 0, fake_store_time, &broken, &out, &err),
               RMQ_ECORRUPT);
  CHECK(strstr(err.msg, "offset 1100") && strstr(err.msg, "TopicS/0 entry 11"));
  rmq_err_clear(&err);
  CHECK_EQ_INT(
      rmq_cq_first_offset_at_or_after_time(cq, 1112, 0, fake_store_time, &broken, &out, &err),
      RMQ_ECORRUPT);

  /* After expiry the search starts at the min offset. */
  CHECK_EQ_INT(rmq_cq_delete_expired(cq, 1300), 2);
  CHECK_EQ_INT(first_at(cq, 0, 0), 13);
  rmq_cq_close(cq);
}

static void test_invalid_topics(void) {
  char long_topic[129];
  memset(long_topic, 'a', 128);
  long_topic[128] = '\0';
  const char *bad[] = {"", "..", "a/b", long_topic, "a b", "x.y"};
  rmq_cq_table *t = NULL;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_cq_table_new(root, PER_FILE, true, &t, &err), RMQ_OK);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    rmq_consume_queue *cq = (rmq_consume_queue *)1;
    rmq_err_clear(&err);
    CHECK_EQ_INT(rmq_cq_open(root, bad[i], 0, PER_FILE, true, &cq, &err), RMQ_EINVAL);
    CHECK(cq == NULL);
    CHECK(strstr(err.msg, "invalid topic") != NULL);
    rmq_err_clear(&err);
    CHECK_EQ_INT(rmq_cq_table_find_or_create(t, bad[i], 0, &cq, &err), RMQ_EINVAL);
    CHECK(rmq_cq_table_find(t, bad[i], 0) == NULL);
  }
  rmq_consume_queue *cq = NULL;
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_cq_open(root, NULL, 0, PER_FILE, true, &cq, &err), RMQ_EINVAL);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_cq_open(root, "a/b", 0, PER_FILE, true, &cq, &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "\"a/b\"") != NULL);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_cq_open(root, "TopicOk", -1, PER_FILE, true, &cq, &err), RMQ_EINVAL);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_cq_open(root, "TopicOk", 0, 0, true, &cq, &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "consumequeue_entries") != NULL);
  /* The longest valid topic is fine. */
  long_topic[127] = '\0';
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_cq_open(root, long_topic, 0, PER_FILE, true, &cq, &err), RMQ_OK);
  rmq_cq_close(cq);
  rmq_cq_table_free(t);
  /* Nothing was created for any of them. */
  CHECK(!exists("%s/%s", "a") && !exists("%s/consumequeue/%s", "a") &&
        !exists("%s/consumequeue/%s", "..b") && !exists("%s/consumequeue/%s", long_topic));
}

/* ------------------------------------------------------------ the table */

#define THREADS 4
#define TOPICS 50
#define QUEUES 4

typedef struct table_arg {
  rmq_cq_table *t;
  int seed;
  rmq_consume_queue *seen[TOPICS * QUEUES];
  int errors;
} table_arg;

static void *table_worker(void *p) {
  table_arg *a = p;
  for (int n = 0; n < TOPICS * QUEUES; n++) {
    int k = (n * 7 + a->seed * 31) % (TOPICS * QUEUES); /* each thread in its own order */
    char topic[32];
    snprintf(topic, sizeof topic, "Topic%d", k / QUEUES);
    rmq_err err = {0};
    rmq_consume_queue *cq = NULL;
    if (rmq_cq_table_find_or_create(a->t, topic, k % QUEUES, &cq, &err) != RMQ_OK ||
        rmq_cq_table_find(a->t, topic, k % QUEUES) != cq) {
      a->errors++;
    }
    a->seen[k] = cq;
  }
  return NULL;
}

static void test_table_threads(void) {
  rmq_cq_table *t = NULL;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_cq_table_new(root, PER_FILE, true, &t, &err), RMQ_OK);
  static table_arg args[THREADS];
  pthread_t tid[THREADS];
  for (int i = 0; i < THREADS; i++) {
    args[i] = (table_arg){.t = t, .seed = i};
    pthread_create(&tid[i], NULL, table_worker, &args[i]);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(tid[i], NULL);
  int errors = 0, mismatch = 0;
  for (int i = 0; i < THREADS; i++) {
    errors += args[i].errors;
    for (int k = 0; k < TOPICS * QUEUES; k++) {
      if (args[i].seen[k] == NULL || args[i].seen[k] != args[0].seen[k]) mismatch++;
    }
  }
  CHECK_EQ_INT(errors, 0);
  CHECK_EQ_INT(mismatch, 0);
  rmq_consume_queue **all = NULL;
  int n = 0;
  CHECK_EQ_INT(rmq_cq_table_snapshot(t, &all, &n, &err), RMQ_OK);
  CHECK_EQ_INT(n, TOPICS * QUEUES);
  free(all);
  CHECK(rmq_cq_table_find(t, "Topic3", 9) == NULL);
  CHECK(rmq_cq_table_find(t, NULL, 0) == NULL);
  rmq_cq_table_free(t);
}

static void make_dir(const char *rel) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  CHECK(mkdir(path, 0755) == 0 || errno == EEXIST);
}

static void test_table_load(void) {
  rmq_err err = {0};
  rmq_cq_table *t = NULL;
  CHECK_EQ_INT(rmq_cq_table_new(root, PER_FILE, true, &t, &err), RMQ_OK);
  rmq_consume_queue *a, *b;
  CHECK_EQ_INT(rmq_cq_table_find_or_create(t, "L1", 0, &a, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_cq_table_find_or_create(t, "L1", 3, &b, &err), RMQ_OK);
  put_range(a, 0, 12);
  put_range(b, 0, 7);
  CHECK_EQ_INT(rmq_cq_table_flush(t, 0, NULL, &err), RMQ_OK);
  rmq_cq_table_free(t);
  /* Directories RocketMQ would not have written are skipped silently. */
  make_dir("consumequeue/bad.topic");
  make_dir("consumequeue/bad.topic/0");
  make_dir("consumequeue/L1/abc");
  make_dir("consumequeue/L1/01");
  make_dir("consumequeue/L1/-1");
  make_dir("consumequeue/L1/99999999999");
  char path[512];
  snprintf(path, sizeof path, "%s/consumequeue/L1/7", root); /* a file, not a dir */
  int fd = open(path, O_CREAT | O_WRONLY, 0644);
  close(fd);

  CHECK_EQ_INT(rmq_cq_table_new(root, PER_FILE, true, &t, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_cq_table_load(t, &err), RMQ_OK);
  rmq_consume_queue **all = NULL;
  int n = 0;
  CHECK_EQ_INT(rmq_cq_table_snapshot(t, &all, &n, &err), RMQ_OK);
  free(all);
  /* The queues of the earlier tests that have files, plus L1/0 and L1/3. */
  CHECK_EQ_INT(n, 11);
  a = rmq_cq_table_find(t, "L1", 0);
  b = rmq_cq_table_find(t, "L1", 3);
  CHECK(a != NULL && b != NULL);
  CHECK(rmq_cq_table_find(t, "L1", 1) == NULL);
  CHECK(rmq_cq_table_find(t, "L1", 7) == NULL);
  CHECK(rmq_cq_table_find(t, "bad.topic", 0) == NULL);
  int64_t max = 0;
  CHECK_EQ_INT(rmq_cq_table_recover(t, &max, &err), RMQ_OK);
  CHECK(max >= 1100 + 61);
  CHECK_EQ_INT(rmq_cq_max_offset(a), 12);
  CHECK_EQ_INT(rmq_cq_max_offset(b), 7);
  CHECK_EQ_INT(rmq_cq_table_truncate_dirty(t, 500, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_cq_max_offset(a), 5);
  CHECK_EQ_INT(rmq_cq_max_offset(b), 5);
  CHECK_EQ_INT(rmq_cq_max_physic_offset(a), 400 + 54);
  rmq_cq_table_free(t);

  /* An empty store has no queues; the max physic offset is then -1. */
  char saved[sizeof root];
  memcpy(saved, root, sizeof root);
  if (snprintf(root, sizeof root, "%.40s/empty", saved) >= (int)sizeof root) return;
  mkdir(root, 0755);
  CHECK_EQ_INT(rmq_cq_table_new(root, PER_FILE, true, &t, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_cq_table_load(t, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_cq_table_recover(t, &max, &err), RMQ_OK);
  CHECK_EQ_INT(max, -1);
  rmq_cq_table_free(t);
  memcpy(root, saved, sizeof root);
}

/*
** A store of many topics loads on several cores (a loader per other core):
** every queue once, a second load (a reader's refresh) keeps the queues it
** has, and a damaged queue fails the load naming its file.
*/
#define MANY_TOPICS 200

static void test_table_load_many(void) {
  char saved[sizeof root];
  memcpy(saved, root, sizeof root);
  if (snprintf(root, sizeof root, "%.40s/many", saved) >= (int)sizeof root) return;
  mkdir(root, 0755);
  rmq_err err = {0};
  rmq_cq_table *t = NULL;
  CHECK_EQ_INT(rmq_cq_table_new(root, PER_FILE, true, &t, &err), RMQ_OK);
  for (int i = 0; i < 2 * MANY_TOPICS; i++) {
    char topic[32];
    snprintf(topic, sizeof topic, "M%d", i / 2);
    rmq_consume_queue *cq;
    CHECK_EQ_INT(rmq_cq_table_find_or_create(t, topic, i % 2, &cq, &err), RMQ_OK);
    put_range(cq, 0, 1 + i % 7);
  }
  CHECK_EQ_INT(rmq_cq_table_flush(t, 0, NULL, &err), RMQ_OK);
  rmq_cq_table_free(t);

  CHECK_EQ_INT(rmq_cq_table_new(root, PER_FILE, true, &t, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_cq_table_load(t, &err), RMQ_OK);
  rmq_consume_queue **all = NULL;
  int n = 0;
  CHECK_EQ_INT(rmq_cq_table_snapshot(t, &all, &n, &err), RMQ_OK);
  free(all);
  CHECK_EQ_INT(n, 2 * MANY_TOPICS);
  int64_t max = 0;
  CHECK_EQ_INT(rmq_cq_table_recover(t, &max, &err), RMQ_OK);
  int wrong = 0;
  for (int i = 0; i < 2 * MANY_TOPICS; i++) {
    char topic[32];
    snprintf(topic, sizeof topic, "M%d", i / 2);
    rmq_consume_queue *cq = rmq_cq_table_find(t, topic, i % 2);
    if (cq == NULL || rmq_cq_max_offset(cq) != 1 + i % 7) wrong++;
  }
  CHECK_EQ_INT(wrong, 0);
  rmq_consume_queue *kept = rmq_cq_table_find(t, "M7", 1);
  CHECK_EQ_INT(rmq_cq_table_load(t, &err), RMQ_OK);
  CHECK(rmq_cq_table_find(t, "M7", 1) == kept);
  CHECK_EQ_INT(rmq_cq_table_snapshot(t, &all, &n, &err), RMQ_OK);
  free(all);
  CHECK_EQ_INT(n, 2 * MANY_TOPICS);
  rmq_cq_table_free(t);

  char path[512];
  snprintf(path, sizeof path, "%s/consumequeue/M150/1/00000000000000000000", root);
  CHECK(truncate(path, 7) == 0);
  CHECK_EQ_INT(rmq_cq_table_new(root, PER_FILE, true, &t, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_cq_table_load(t, &err), RMQ_ECORRUPT);
  CHECK(strstr(err.msg, "M150/1/00000000000000000000 is 7 bytes") != NULL);
  rmq_cq_table_free(t);
  tu_rmrf(root);
  memcpy(root, saved, sizeof root);
}

/* --------------------------------------- one writer, readers meanwhile */

#define LIVE_ENTRIES 3000

static void *live_reader(void *p) {
  rmq_consume_queue *cq = p;
  rmq_cq_iter it;
  rmq_cq_entry e;
  int64_t n = 0, bad = 0;
  rmq_cq_iter_start(&it, cq, 0);
  while (n < LIVE_ENTRIES) {
    if (!rmq_cq_iter_next(&it, &e)) continue;
    if (e.phy_offset != 100 * n || e.size != 50 + n) bad++;
    n++;
  }
  rmq_cq_iter_stop(&it);
  return (void *)(intptr_t)bad;
}

static void test_live_readers(void) {
  rmq_consume_queue *cq = open_cq("TopicLive", 0, true);
  pthread_t tid[2];
  for (int i = 0; i < 2; i++) pthread_create(&tid[i], NULL, live_reader, cq);
  put_range(cq, 0, LIVE_ENTRIES);
  intptr_t bad = 0;
  for (int i = 0; i < 2; i++) {
    void *r;
    pthread_join(tid[i], &r);
    bad += (intptr_t)r;
  }
  CHECK_EQ_INT(bad, 0);
  rmq_cq_close(cq);
}

static void test_io_faults(void) {
  rmq_consume_queue *cq = open_cq("TopicF", 0, true);
  put_range(cq, 0, 3);
  rmq_err err = {0};
  rmq_io_fault(RMQ_IO_MSYNC, 1, EIO, -1);
  CHECK_EQ_INT(rmq_cq_flush(cq, 0, &err), RMQ_EIO);
  CHECK(strstr(err.msg, "TopicF") != NULL);
  rmq_io_fault(RMQ_IO_MSYNC, 0, 0, -1);
  put_range(cq, 3, 5);
  rmq_err_clear(&err);
  rmq_io_fault(RMQ_IO_OPEN, 1, EIO, -1);
  CHECK_EQ_INT(rmq_cq_put(cq, 500, 55, 5, 0, 5, NULL, &err), RMQ_EIO);
  rmq_io_fault(RMQ_IO_OPEN, 0, 0, -1);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 5);
  put_range(cq, 5, 6);
  check_entries(cq, 0, 6);
  rmq_cq_close(cq);
}

/*
** A new segment's directory entries (and its new queue and topic
** directories) are synced by the next flush, not by the put: a put with the
** next fsync failing succeeds, the flush fails naming the directory, and the
** flush after it syncs them.
*/
static void test_dirs_synced_by_flush(void) {
  rmq_consume_queue *cq = open_cq("TopicDirs", 0, true);
  rmq_io_fault(RMQ_IO_FSYNC, 1, EIO, -1);
  put_range(cq, 0, PER_FILE + 1);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_cq_flush(cq, 0, &err), RMQ_EIO);
  CHECK(strstr(err.msg, "cannot sync directory") != NULL && strstr(err.msg, "TopicDirs/0") != NULL);
  rmq_io_fault(RMQ_IO_FSYNC, 0, 0, -1);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_cq_flush(cq, 0, &err), RMQ_OK);
  CHECK(!atomic_load(&cq->mfq.dir_unsynced));
  check_entries(cq, 0, PER_FILE + 1);
  rmq_cq_close(cq);
}

/*
** The table's flush syncs the names of new queue and topic directories: a
** topic's directory once for its queues, then consumequeue/ (the third
** fsync here fails, then the next flush does it); a put syncs nothing.
*/
static void test_table_syncs_new_dirs(void) {
  rmq_err err = {0};
  rmq_cq_table *t = NULL;
  CHECK_EQ_INT(rmq_cq_table_new(root, PER_FILE, true, &t, &err), RMQ_OK);
  rmq_consume_queue *a = NULL, *b = NULL;
  CHECK_EQ_INT(rmq_cq_table_find_or_create(t, "NewDirs", 0, &a, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_cq_table_find_or_create(t, "NewDirs", 1, &b, &err), RMQ_OK);
  if (!a || !b) return;
  rmq_io_fault(RMQ_IO_FSYNC, 3, EIO, -1);
  put_range(a, 0, 2);
  put_range(b, 0, 2);
  CHECK_EQ_INT(atomic_load(&a->new_dirs), 2);
  CHECK_EQ_INT(atomic_load(&b->new_dirs), 1);
  bool moved = false;
  /* fsyncs: a's directory, b's, the topic's (fails). */
  CHECK_EQ_INT(rmq_cq_table_flush(t, 0, &moved, &err), RMQ_EIO);
  CHECK(strstr(err.msg, "consumequeue/NewDirs:") != NULL);
  CHECK_EQ_INT(atomic_load(&a->new_dirs), 2);
  rmq_io_fault(RMQ_IO_FSYNC, 0, 0, -1);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_cq_table_flush(t, 0, &moved, &err), RMQ_OK);
  CHECK(moved);
  CHECK_EQ_INT(atomic_load(&a->new_dirs), 0);
  CHECK_EQ_INT(atomic_load(&b->new_dirs), 0);
  rmq_cq_table_free(t);
}

/*
** Many new queues are synced by one syncfs, not an msync and a directory
** fsync each (which are made to fail here): a failed syncfs leaves every
** queue to sync again, and the next pass marks each flushed to its end.
*/
static void test_table_bulk_flush(void) {
  rmq_err err = {0};
  rmq_cq_table *t = NULL;
  CHECK_EQ_INT(rmq_cq_table_new(root, PER_FILE, true, &t, &err), RMQ_OK);
  rmq_consume_queue *q[40] = {0};
  for (int i = 0; i < 40; i++) {
    char topic[32];
    snprintf(topic, sizeof topic, "Bulk%d", i / 4);
    CHECK_EQ_INT(rmq_cq_table_find_or_create(t, topic, i % 4, &q[i], &err), RMQ_OK);
    if (!q[i]) return;
    put_range(q[i], 0, 3);
  }
  rmq_io_fault(RMQ_IO_SYNCFS, 1, EIO, -1);
  bool moved = false;
  CHECK_EQ_INT(rmq_cq_table_flush(t, 0, &moved, &err), RMQ_EIO);
  CHECK(strstr(err.msg, "cannot sync the file system") != NULL);
  CHECK(!moved);
  CHECK_EQ_INT(atomic_load(&q[5]->new_dirs), 1);
  CHECK(atomic_load(&q[5]->mfq.dir_unsynced));
  CHECK_EQ_INT(atomic_load(&q[5]->mfq.flushed_where), 0);
  rmq_err_clear(&err);
  rmq_io_fault(RMQ_IO_MSYNC, 1, EIO, -1);
  rmq_io_fault(RMQ_IO_FSYNC, 1, EIO, -1);
  CHECK_EQ_INT(rmq_cq_table_flush(t, 0, &moved, &err), RMQ_OK);
  rmq_io_fault(RMQ_IO_MSYNC, 0, 0, -1);
  rmq_io_fault(RMQ_IO_FSYNC, 0, 0, -1);
  CHECK(moved);
  int left = 0;
  for (int i = 0; i < 40; i++) {
    left += atomic_load(&q[i]->new_dirs) + atomic_load(&q[i]->mfq.dir_unsynced) +
            (atomic_load(&q[i]->mfq.flushed_where) != 3 * RMQ_CQ_UNIT_SIZE);
  }
  CHECK_EQ_INT(left, 0);
  /* Nothing due now: a pass syncs nothing. */
  rmq_io_fault(RMQ_IO_SYNCFS, 1, EIO, -1);
  moved = false;
  CHECK_EQ_INT(rmq_cq_table_flush(t, 0, &moved, &err), RMQ_OK);
  CHECK(!moved);
  rmq_io_fault(RMQ_IO_SYNCFS, 0, 0, -1);
  rmq_cq_table_free(t);
}

/* A reader takes the segment size off the files, whatever entries_per_file says. */
static void test_readonly_size(void) {
  rmq_consume_queue *cq = open_cq("TopicRo", 0, true);
  put_range(cq, 0, 12);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_cq_flush(cq, 0, &err), RMQ_OK);
  rmq_cq_close(cq);

  CHECK_EQ_INT(rmq_cq_open(root, "TopicRo", 0, RMQ_CQ_DEFAULT_ENTRIES, false, &cq, &err), RMQ_OK);
  if (cq == NULL) return;
  CHECK_EQ_INT(cq->file_size, FILE_BYTES);
  rmq_cq_recover(cq);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 12);
  check_entries(cq, 0, 12);
  rmq_cq_close(cq);

  /* A writer still insists on its configured size, and names the one the files have. */
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_cq_open(root, "TopicRo", 0, PER_FILE + 1, true, &cq, &err), RMQ_EINVAL);
  char want[64];
  snprintf(want, sizeof want, "written with consumequeue_entries=%d", PER_FILE);
  CHECK(strstr(err.msg, want) != NULL);

  /* A length that is not a whole number of entries. */
  cq = open_cq("TopicRo", 1, true);
  put_range(cq, 0, 3);
  rmq_cq_close(cq);
  char path[512];
  snprintf(path, sizeof path, "%s/consumequeue/TopicRo/1/00000000000000000000", root);
  CHECK_EQ_INT(truncate(path, FILE_BYTES + 1), 0);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_cq_open(root, "TopicRo", 1, RMQ_CQ_DEFAULT_ENTRIES, false, &cq, &err),
               RMQ_ECORRUPT);
  CHECK(strstr(err.msg, "are 101 bytes, not a whole number of 20-byte entries "
                        "(consumequeue_entries)") != NULL);
}

/* Entry n of cq as (phy, size, tags), written in place. */
static void poke_entry(rmq_consume_queue *cq, int64_t n, int64_t phy, int32_t size) {
  rmq_mapped_file *mf = rmq_mfq_find(&cq->mfq, n * RMQ_CQ_UNIT_SIZE);
  CHECK(mf != NULL);
  if (!mf) return;
  uint8_t *p = mf->mapped + (n * RMQ_CQ_UNIT_SIZE - mf->file_from_offset);
  rmq_put64(p, phy);
  rmq_put32(p + 8, size);
  rmq_mapped_file_release(mf);
}

/* rmq_cq_check finds the first entry out of place; a reader's queue ends there, a writer's goes aside. */
static void test_check_damage(void) {
  char why[300];
  rmq_cq_entry last;
  rmq_consume_queue *cq = open_cq("TopicX", 0, true);
  put_range(cq, 0, 12);
  CHECK_EQ_INT(rmq_cq_check(cq, 1 << 20, why, sizeof why, &last), -1);
  /* The last entry as it read it (through pread: a writable queue's mapping is not touched). */
  CHECK_EQ_INT(last.phy_offset, 1100);
  CHECK_EQ_INT(last.size, 61);
  poke_entry(cq, 7, 600, 56); /* entry 6 again: a duplicate, counted from entry 6 */
  CHECK_EQ_INT(rmq_cq_check(cq, 1 << 20, why, sizeof why, &last), 6);
  CHECK(strstr(why, "entry 7 leads to 600, before the end 656 of entry 6") != NULL);
  poke_entry(cq, 7, 700, 0); /* no entry */
  CHECK_EQ_INT(rmq_cq_check(cq, 1 << 20, why, sizeof why, &last), 7);
  CHECK(strstr(why, "entry 7 is no entry: offset 700, size 0") != NULL);
  poke_entry(cq, 7, 1000, 57); /* crosses a 1024-byte segment of the log */
  CHECK_EQ_INT(rmq_cq_check(cq, 1024, why, sizeof why, &last), 7);
  poke_entry(cq, 7, 700, 57);
  CHECK_EQ_INT(rmq_cq_check(cq, 1 << 20, why, sizeof why, &last), -1);

  /* A writer: the segment holding entry 7 and the later ones go into damaged_dir. */
  poke_entry(cq, 7, 0, RMQ_CQ_PRE_BLANK_SIZE); /* a filler inside the queue */
  CHECK_EQ_INT(rmq_cq_check(cq, 1 << 20, why, sizeof why, &last), 7);
  char damaged[256];
  snprintf(damaged, sizeof damaged, "%s/damaged-test", root);
  mkdir(damaged, 0755);
  int64_t moved = 0, from = -2;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_cq_set_aside_from(cq, 7, damaged, &moved, &from, &err), RMQ_OK);
  CHECK_EQ_INT(moved, 2 * FILE_BYTES);
  CHECK_EQ_INT(from, 500); /* entry 5, the first of the segment moved, leads there */
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 5);
  CHECK_EQ_INT(rmq_cq_max_physic_offset(cq), 400 + 54);
  CHECK(exists("%s/damaged-test/consumequeue/%s/0/00000000000000000100", "TopicX"));
  CHECK(!exists("%s/consumequeue/%s/0/00000000000000000100", "TopicX"));
  put_range(cq, 5, 12); /* dispatch writes them again */
  check_entries(cq, 0, 12);
  CHECK_EQ_INT(rmq_cq_check(cq, 1 << 20, why, sizeof why, &last), -1);
  rmq_cq_close(cq);

  /* A reader: the queue ends at the damage, which rmq_cq_damage names. */
  cq = open_cq("TopicX", 0, true);
  rmq_cq_recover(cq);
  poke_entry(cq, 9, 100, 51);
  rmq_cq_close(cq);
  cq = open_cq("TopicX", 0, false);
  rmq_cq_recover(cq);
  CHECK(rmq_cq_damage(cq) == NULL);
  int64_t bad = rmq_cq_check(cq, 1 << 20, why, sizeof why, &last);
  CHECK_EQ_INT(bad, 8);
  CHECK_EQ_INT(rmq_cq_mark_damaged(cq, bad, why, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 8);
  check_entries(cq, 0, 8);
  CHECK(rmq_cq_damage(cq) &&
        strstr(rmq_cq_damage(cq), "consume queue TopicX/0 is damaged at entry 8"));
  /* Truncation never lengthens it again. */
  rmq_cq_truncate_dirty(cq, 1 << 30);
  CHECK_EQ_INT(rmq_cq_max_offset(cq), 8);
  rmq_cq_close(cq);
  char dir[256];
  snprintf(dir, sizeof dir, "%s/consumequeue/TopicX", root);
  tu_rmrf(dir);
  tu_rmrf(damaged);
}

/* -------------------------------------- a reader follows another writer */

/* Stands for a writer in another process that has written offset and tagsCode but not the size. */
static void half_written(rmq_consume_queue *cq, int64_t n) {
  rmq_mapped_file *mf = rmq_mfq_last(&cq->mfq);
  int32_t pos = (int32_t)(n * RMQ_CQ_UNIT_SIZE - mf->file_from_offset);
  rmq_put64(mf->mapped + pos, 100 * n);
  rmq_put64(mf->mapped + pos + 12, n);
  rmq_mapped_file_release(mf);
}

static int follow(rmq_consume_queue *cq, int64_t bound) {
  rmq_err err = {0};
  int rc = rmq_cq_follow(cq, bound, &err);
  if (rc != RMQ_OK) fprintf(stderr, "  follow: %s\n", err.msg);
  return rc;
}

static void test_follow(void) {
  rmq_consume_queue *w = open_cq("TopicFollow", 0, true);
  put_range(w, 0, 3);
  rmq_consume_queue *r = open_cq("TopicFollow", 0, false);
  rmq_cq_recover(r);
  CHECK_EQ_INT(rmq_cq_max_offset(r), 3);
  /* Entries in this and two more segments; the bound holds back the records past entry 11. */
  put_range(w, 3, 14);
  CHECK_EQ_INT(rmq_cq_max_offset(r), 3);
  CHECK_EQ_INT(follow(r, 100 * 11 + 50 + 11), RMQ_OK);
  CHECK_EQ_INT(rmq_cq_max_offset(r), 12);
  CHECK_EQ_INT(rmq_mfq_count(&r->mfq), 3);
  CHECK_EQ_INT(follow(r, INT64_MAX), RMQ_OK);
  CHECK_EQ_INT(rmq_cq_max_offset(r), 14);
  CHECK_EQ_INT(rmq_cq_max_physic_offset(r), 100 * 13 + 50 + 13);
  check_entries(r, 0, 14);
  /* An entry whose size is not written yet is no entry; once it is, it is taken. */
  half_written(w, 14);
  CHECK_EQ_INT(follow(r, INT64_MAX), RMQ_OK);
  CHECK_EQ_INT(rmq_cq_max_offset(r), 14);
  put_range(w, 14, 16);
  CHECK_EQ_INT(follow(r, INT64_MAX), RMQ_OK);
  CHECK_EQ_INT(rmq_cq_max_offset(r), 16);
  check_entries(r, 0, 16);
  /* The writer's expiry deletes the first two segments: the reader lets them go. */
  CHECK_EQ_INT(rmq_cq_delete_expired(w, 100 * 10), 2);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_cq_follow_deleted(r, false, 100 * 10, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_mfq_count(&r->mfq), 2);
  CHECK_EQ_INT(rmq_cq_min_offset(r), 10);
  check_entries(r, 10, 16);
  rmq_cq_close(r);
  rmq_cq_close(w);
}

/* A queue a reader opened before its first segment was made takes that segment's size. */
static void test_follow_new_queue(void) {
  static const char *const levels[] = {"consumequeue", "consumequeue/TopicFollowNew",
                                       "consumequeue/TopicFollowNew/0"};
  for (int i = 0; i < 3; i++) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", root, levels[i]);
    mkdir(dir, 0755);
  }
  rmq_consume_queue *r = NULL;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_cq_open(root, "TopicFollowNew", 0, 300000, false, &r, &err), RMQ_OK);
  rmq_consume_queue *w = open_cq("TopicFollowNew", 0, true);
  put_range(w, 0, 7);
  CHECK_EQ_INT(follow(r, INT64_MAX), RMQ_OK);
  CHECK_EQ_INT(r->file_size, FILE_BYTES);
  CHECK_EQ_INT(rmq_cq_max_offset(r), 7);
  check_entries(r, 0, 7);
  rmq_cq_close(r);
  rmq_cq_close(w);
}

int main(void) {
  tu_tmpdir(root, sizeof root);
  test_check_damage();
  test_put_get_iterate();
  test_pre_fill();
  test_duplicates_and_gaps();
  test_recover();
  test_truncate_dirty();
  test_opening_copy();
  test_table_load_many();
  test_min_and_expiry();
  test_time_search();
  test_invalid_topics();
  test_table_threads();
  test_table_load();
  test_live_readers();
  test_io_faults();
  test_dirs_synced_by_flush();
  test_table_syncs_new_dirs();
  test_table_bulk_flush();
  test_readonly_size();
  test_recover_offset_overflow();
  test_follow();
  test_follow_new_queue();
  tu_rmrf(root);
  return check_report();
}
