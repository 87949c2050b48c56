/*
** test_index.c: IndexFile and IndexService (engine/index_file.h): the
** bytes of IndexFile.putKey for a known key, chains with collisions across many rolled files, time
** ranges, the prev-file-end quirk, load after an abnormal exit, expiry,
** file naming, damaged files, and queries while the dispatcher writes.
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "file_name.h"
#include "index_file.h"
#include "io.h"
#include "message.h"
#include "service_thread.h"
#include "testutil.h"

static char root[64];

/* A fresh store directory under root for one test. */
static void sub_dir(char *out, size_t cap, const char *name) {
  snprintf(out, cap, "%s/%s", root, name);
  mkdir(out, 0755);
}

static rmq_index_request request(const char *topic, int64_t offset, int64_t ts, int32_t sys_flag,
                                 const char *keys, const char *uniq) {
  rmq_index_request r = {
      .topic = topic,
      .topic_len = strlen(topic),
      .commit_log_offset = offset,
      .store_timestamp = ts,
      .sys_flag = sys_flag,
      .keys = keys,
      .keys_len = keys ? strlen(keys) : 0,
      .uniq_key = uniq,
      .uniq_key_len = uniq ? strlen(uniq) : 0,
  };
  return r;
}

static int build(rmq_index_service *s, const char *topic, int64_t offset, int64_t ts,
                 const char *keys, const char *uniq) {
  rmq_err err = {0};
  rmq_index_request r = request(topic, offset, ts, 0, keys, uniq);
  int rc = rmq_index_service_build(s, &r, &err);
  if (rc != RMQ_OK) fprintf(stderr, "  build %lld: %s\n", (long long)offset, err.msg);
  return rc;
}

static int query(rmq_index_service *s, const char *topic, const char *key, int max, int64_t begin,
                 int64_t end, int64_t *out) {
  rmq_err err = {0};
  int n = -1;
  int rc = rmq_index_service_query(s, topic, strlen(topic), key, strlen(key), max, begin, end, out,
                                   &n, &err);
  CHECK_EQ_INT(rc, RMQ_OK);
  return n;
}

static void read_bytes(const char *dir, const char *name, off_t off, uint8_t *buf, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/index/%s", dir, name);
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0 && pread(fd, buf, n, off) == (ssize_t)n);
  if (fd >= 0) close(fd);
}

static void hex(const char *s, uint8_t *out) {
  for (size_t i = 0; s[2 * i]; i++) sscanf(s + 2 * i, "%2hhx", &out[i]);
}

static int init(rmq_index_service *s, const char *dir, int32_t slots, int32_t entries,
                bool writable, rmq_checkpoint *cp) {
  rmq_err err = {0};
  int rc = rmq_index_service_init(s, dir, slots, entries, writable, cp, &err);
  CHECK_EQ_INT(rc, RMQ_OK);
  return rc;
}

/* --------------------------------------------------- putKey's bytes */

static void test_vector(void) {
  char dir[128];
  sub_dir(dir, sizeof dir, "vector");
  rmq_index_service s;
  init(&s, dir, RMQ_INDEX_DEFAULT_SLOTS, RMQ_INDEX_DEFAULT_ENTRIES, true, NULL);
  CHECK_EQ_INT(rmq_index_key_hash("TopicTest", 9, "order-1", 7), 1829193424);
  CHECK_EQ_INT(
      build(&s, "TopicTest", 0, 1700000000123, "order-1", "7F00000112340A0B0C0D000010000001"),
      RMQ_OK);
  CHECK_EQ_INT(rmq_index_service_count(&s), 1);
  rmq_index_header h;
  char name[18];
  CHECK(rmq_index_service_file_info(&s, 0, &h, name));
  CHECK_EQ_INT(strlen(name), 17);
  struct stat st;
  char path[512];
  snprintf(path, sizeof path, "%s/index/%s", dir, name);
  CHECK(stat(path, &st) == 0 && st.st_size == 420000040);

  uint8_t got[40], want[40];
  read_bytes(dir, name, 20000060, got, 20);
  hex("686FDE9E00000000000000000000000000000000", want);
  CHECK_EQ_MEM(got, want, 20);
  read_bytes(dir, name, 20000080, got, 20);
  hex("6D0746D000000000000000000000000000000000", want);
  CHECK_EQ_MEM(got, want, 20);
  read_bytes(dir, name, 8647840, got, 4);
  hex("00000001", want);
  CHECK_EQ_MEM(got, want, 4);
  read_bytes(dir, name, 16773736, got, 4);
  hex("00000002", want);
  CHECK_EQ_MEM(got, want, 4);
  read_bytes(dir, name, 0, got, 40);
  hex("0000018BCFE5687B0000018BCFE5687B00000000000000000000000000000000"
      "0000000200000003",
      want);
  CHECK_EQ_MEM(got, want, 40);
  CHECK_EQ_INT(h.index_count, 3);
  CHECK_EQ_INT(h.hash_slot_count, 2);

  int64_t out[4];
  CHECK_EQ_INT(query(&s, "TopicTest", "order-1", 4, 0, INT64_MAX, out), 1);
  CHECK_EQ_INT(out[0], 0);
  CHECK_EQ_INT(query(&s, "TopicTest", "7F00000112340A0B0C0D000010000001", 4, 0, INT64_MAX, out), 1);
  CHECK_EQ_INT(query(&s, "TopicTest", "order-2", 4, 0, INT64_MAX, out), 0);
  CHECK_EQ_INT(query(&s, "OtherTopic", "order-1", 4, 0, INT64_MAX, out), 0);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_index_service_flush(&s, &err), RMQ_OK);
  rmq_index_service_destroy(&s);
  tu_rmrf(dir);
}

/* ---------------------------------------- many keys, collisions, rolls */

#define MSGS 100
#define BASE_TS 1700000000000LL

typedef struct model {
  char keys[MSGS][4][16];
  int nkeys[MSGS];
} model;

static int64_t msg_offset(int i) { return 1000 + 100 * i; }
static int64_t msg_ts(int i) { return BASE_TS + 1000LL * i; }

static bool msg_has(const model *m, int i, const char *key) {
  for (int k = 0; k < m->nkeys[i]; k++) {
    if (strcmp(m->keys[i][k], key) == 0) return true;
  }
  return false;
}

/* Messages of the model whose time is in [from_i, to_i] and that carry key, ascending. */
static int expected(const model *m, const char *key, int from_i, int to_i, int64_t *out) {
  int n = 0;
  for (int i = from_i; i <= to_i; i++) {
    if (msg_has(m, i, key)) out[n++] = msg_offset(i);
  }
  return n;
}

/* What the caller does with an index answer: keep the messages that really carry key. */
static int filter(const model *m, const char *key, const int64_t *in, int n, int64_t *out) {
  int k = 0;
  for (int j = 0; j < n; j++) {
    int i = (int)((in[j] - 1000) / 100);
    if (i >= 0 && i < MSGS && msg_has(m, i, key)) out[k++] = in[j];
  }
  return k;
}

static bool contains(const int64_t *a, int n, int64_t v) {
  for (int j = 0; j < n; j++) {
    if (a[j] == v) return true;
  }
  return false;
}

static void build_model(model *m, rmq_index_service *s) {
  for (int i = 0; i < MSGS; i++) {
    char uniq[16], keys[64];
    snprintf(uniq, sizeof uniq, "U%03d", i);
    /* Extra spaces make empty tokens, which are skipped. */
    snprintf(keys, sizeof keys, "K%d%s%s", i % 10, i % 2 ? "  odd " : "",
             i == 50   ? " Aa"
             : i == 51 ? " BB"
                       : "");
    snprintf(m->keys[i][0], 16, "%s", uniq);
    snprintf(m->keys[i][1], 16, "K%d", i % 10);
    m->nkeys[i] = 2;
    if (i % 2) snprintf(m->keys[i][m->nkeys[i]++], 16, "odd");
    if (i == 50) snprintf(m->keys[i][m->nkeys[i]++], 16, "Aa");
    if (i == 51) snprintf(m->keys[i][m->nkeys[i]++], 16, "BB");
    CHECK_EQ_INT(build(s, "TopicK", msg_offset(i), msg_ts(i), keys, uniq), RMQ_OK);
  }
}

static void check_all_keys(const model *m, rmq_index_service *s, int first_msg) {
  int bad_superset = 0, bad_exact = 0;
  for (int i = 0; i < MSGS; i++) {
    for (int k = 0; k < m->nkeys[i]; k++) {
      const char *key = m->keys[i][k];
      int64_t got[256], kept[256], want[256];
      int n = query(s, "TopicK", key, 256, 0, INT64_MAX, got);
      int nw = expected(m, key, first_msg, MSGS - 1, want);
      for (int j = 0; j < nw; j++) bad_superset += !contains(got, n, want[j]);
      for (int j = 1; j < n; j++) bad_exact += got[j - 1] > got[j]; /* sorted */
      int nk = filter(m, key, got, n, kept);
      bad_exact += nk != nw || memcmp(kept, want, (size_t)nw * sizeof *want) != 0;
    }
  }
  CHECK_EQ_INT(bad_superset, 0);
  CHECK_EQ_INT(bad_exact, 0);
}

/* A clean pass before the first key: nothing to delete (and, under UBSan, no memmove of NULL). */
static void test_delete_with_no_file(void) {
  char dir[128];
  sub_dir(dir, sizeof dir, "none");
  rmq_index_service s;
  if (init(&s, dir, 8, 16, true, NULL) != RMQ_OK) return;
  CHECK_EQ_INT(rmq_index_service_count(&s), 0);
  CHECK_EQ_INT(rmq_index_service_delete_expired(&s, INT64_MAX), 0);
  rmq_index_service_destroy(&s);
}

static void test_many_keys(void) {
  char dir[128];
  sub_dir(dir, sizeof dir, "many");
  rmq_index_service s;
  static model m;
  init(&s, dir, 8, 16, true, NULL);
  build_model(&m, &s);

  /* 250 items, 15 per file. */
  int files = rmq_index_service_count(&s);
  CHECK_EQ_INT(files, 17);
  int not_full = 0, order = 0, chained = 0;
  char prev_name[18] = "";
  rmq_index_header prev = {0};
  for (int j = 0; j < files; j++) {
    rmq_index_header h;
    char name[18];
    CHECK(rmq_index_service_file_info(&s, j, &h, name));
    if (j < files - 1 && h.index_count != 16) not_full++;
    if (strcmp(prev_name, name) >= 0) order++;
    if (j > 0 && h.begin_phy_offset < prev.end_phy_offset) chained++;
    memcpy(prev_name, name, sizeof name);
    prev = h;
  }
  CHECK_EQ_INT(not_full, 0);
  CHECK_EQ_INT(order, 0);
  CHECK_EQ_INT(chained, 0);
  check_all_keys(&m, &s, 0);

  /* Java's "Aa" and "BB" hash alike: the index returns both, the caller filters. */
  int64_t got[256], kept[256];
  CHECK_EQ_INT(query(&s, "TopicK", "Aa", 256, 0, INT64_MAX, got), 2);
  CHECK_EQ_INT(filter(&m, "Aa", got, 2, kept), 1);
  CHECK_EQ_INT(kept[0], msg_offset(50));

  /* max_num keeps the newest ones, returned ascending. */
  int64_t want[256];
  int nw = expected(&m, "odd", 0, MSGS - 1, want);
  CHECK_EQ_INT(query(&s, "TopicK", "odd", 10, 0, INT64_MAX, got), 10);
  CHECK(memcmp(got, want + nw - 10, 10 * sizeof *got) == 0);

  /* A time range: items are at most 1 s late (the timeDiff of a file's first item). */
  int n = query(&s, "TopicK", "K3", 256, msg_ts(30) - 500, msg_ts(60) + 500, got);
  nw = expected(&m, "K3", 30, 60, want);
  CHECK_EQ_INT(filter(&m, "K3", got, n, kept), nw);
  CHECK(memcmp(kept, want, (size_t)nw * sizeof *want) == 0);
  CHECK_EQ_INT(query(&s, "TopicK", "K3", 256, msg_ts(200), msg_ts(300), got), 0);

  /* Expiry: files ending below the CommitLog min offset go, never the newest. */
  int deleted = rmq_index_service_delete_expired(&s, msg_offset(50));
  CHECK(deleted > 0);
  CHECK_EQ_INT(rmq_index_service_count(&s), files - deleted);
  rmq_index_header h;
  char name[18];
  CHECK(rmq_index_service_file_info(&s, 0, &h, name) && h.end_phy_offset >= msg_offset(50));
  CHECK_EQ_INT(query(&s, "TopicK", "U010", 256, 0, INT64_MAX, got), 0);
  CHECK_EQ_INT(query(&s, "TopicK", "U080", 256, 0, INT64_MAX, got), 1);
  CHECK_EQ_INT(rmq_index_service_delete_expired(&s, INT64_MAX), files - deleted - 1);
  CHECK_EQ_INT(rmq_index_service_count(&s), 1);
  CHECK_EQ_INT(query(&s, "TopicK", "U099", 256, 0, INT64_MAX, got), 1);
  rmq_index_service_destroy(&s);

  /* Reload (clean exit): the same answers for what is left. */
  init(&s, dir, 8, 16, true, NULL);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_index_service_load(&s, true, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_index_service_count(&s), 1);
  CHECK_EQ_INT(query(&s, "TopicK", "U099", 256, 0, INT64_MAX, got), 1);
  CHECK_EQ_INT(got[0], msg_offset(99));
  rmq_index_service_destroy(&s);
  tu_rmrf(dir);
}

/* -------------------------------- rolled files, checkpoint, abnormal load */

#define T0 1800000000000LL

static void test_prev_file_end(void) {
  char dir[128], cpdir[128];
  sub_dir(dir, sizeof dir, "quirk");
  snprintf(cpdir, sizeof cpdir, "%s", dir);
  rmq_checkpoint cp;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_checkpoint_open(&cp, cpdir, true, &err), RMQ_OK);
  rmq_index_service s;
  init(&s, dir, 8, 4, true, &cp); /* 3 items per file */
  CHECK_EQ_INT(build(&s, "TQ", 100, T0, NULL, "U0"), RMQ_OK);
  CHECK_EQ_INT(build(&s, "TQ", 200, T0 + 1500, NULL, "U1"), RMQ_OK);
  CHECK_EQ_INT(build(&s, "TQ", 300, T0 + 2600, NULL, "U2"), RMQ_OK);
  CHECK_EQ_INT(rmq_index_service_count(&s), 1);
  CHECK_EQ_INT(atomic_load(&cp.index_msg_timestamp), 0);
  CHECK_EQ_INT(build(&s, "TQ", 400, T0 + 10000, NULL, "U3"), RMQ_OK);
  CHECK_EQ_INT(rmq_index_service_count(&s), 2);

  rmq_index_header h1, h2;
  char n1[18], n2[18];
  CHECK(rmq_index_service_file_info(&s, 0, &h1, n1) && rmq_index_service_file_info(&s, 1, &h2, n2));
  CHECK_EQ_INT(h1.index_count, 4);
  CHECK_EQ_INT(h1.end_timestamp, T0 + 2600);
  /* The new file began at the full one's end; its first item overwrote begin. */
  CHECK_EQ_INT(h2.begin_timestamp, T0 + 10000);
  CHECK_EQ_INT(h2.begin_phy_offset, 400);
  uint8_t item[20];
  int32_t first_item = 40 + 8 * 4 + 20;
  read_bytes(dir, n2, first_item, item, 20);
  CHECK_EQ_INT(rmq_get32(item + 12), 7); /* (T0+10000 - (T0+2600)) / 1000 */
  read_bytes(dir, n1, first_item, item, 20);
  CHECK_EQ_INT(rmq_get32(item + 12), 0); /* the very first file began at 0 */
  read_bytes(dir, n1, first_item + 40, item, 20);
  CHECK_EQ_INT(rmq_get32(item + 12), 2);
  /* ...so RocketMQ places that item 7 s late, and so do we. */
  int64_t got[8];
  CHECK_EQ_INT(query(&s, "TQ", "U3", 8, 0, INT64_MAX, got), 1);
  CHECK_EQ_INT(query(&s, "TQ", "U3", 8, T0 + 10000, T0 + 16999, got), 0);
  CHECK_EQ_INT(query(&s, "TQ", "U3", 8, T0 + 10000, T0 + 17000, got), 1);

  /* The full file was flushed and the checkpoint says so, on disk too. */
  CHECK_EQ_INT(atomic_load(&cp.index_msg_timestamp), T0 + 2600);
  uint8_t cpb[24];
  char cppath[512];
  snprintf(cppath, sizeof cppath, "%s/checkpoint", cpdir);
  int fd = open(cppath, O_RDONLY);
  CHECK(fd >= 0 && pread(fd, cpb, 24, 0) == 24);
  close(fd);
  CHECK_EQ_INT(rmq_get64(cpb + 16), T0 + 2600);

  /* Re-dispatch: below endPhyOffset is skipped; the last record itself is not. */
  CHECK_EQ_INT(build(&s, "TQ", 300, T0 + 2600, NULL, "U2"), RMQ_OK);
  CHECK(rmq_index_service_file_info(&s, 1, &h2, n2) && h2.index_count == 2);
  CHECK_EQ_INT(build(&s, "TQ", 400, T0 + 10000, NULL, "U3"), RMQ_OK);
  CHECK(rmq_index_service_file_info(&s, 1, &h2, n2) && h2.index_count == 3);
  CHECK_EQ_INT(query(&s, "TQ", "U3", 8, 0, INT64_MAX, got), 2);
  /* ROLLBACK records are not indexed; PREPARED and COMMIT are. */
  rmq_index_request r = request("TQ", 500, T0 + 11000, RMQ_SYSFLAG_TRANSACTION_ROLLBACK, "rb",
                                NULL);
  CHECK_EQ_INT(rmq_index_service_build(&s, &r, &err), RMQ_OK);
  CHECK_EQ_INT(query(&s, "TQ", "rb", 8, 0, INT64_MAX, got), 0);
  r = request("TQ", 600, T0 + 11000, RMQ_SYSFLAG_TRANSACTION_PREPARED, "tx", NULL);
  CHECK_EQ_INT(rmq_index_service_build(&s, &r, &err), RMQ_OK);
  r = request("TQ", 700, T0 + 12000, RMQ_SYSFLAG_TRANSACTION_COMMIT, "tx", NULL);
  CHECK_EQ_INT(rmq_index_service_build(&s, &r, &err), RMQ_OK);
  CHECK_EQ_INT(query(&s, "TQ", "tx", 8, 0, INT64_MAX, got), 2);
  CHECK_EQ_INT(rmq_index_service_count(&s), 3);
  rmq_index_header h;
  char n3[18];
  CHECK(rmq_index_service_file_info(&s, 2, &h, n3));
  CHECK_EQ_INT(atomic_load(&cp.index_msg_timestamp), T0 + 11000); /* file 2 filled at 600 */
  rmq_index_service_destroy(&s);

  /* Clean exit: every file loads. */
  init(&s, dir, 8, 4, true, &cp);
  CHECK_EQ_INT(rmq_index_service_load(&s, true, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_index_service_count(&s), 3);
  rmq_index_service_destroy(&s);
  /* Abnormal exit, read-only: nothing is deleted. */
  init(&s, dir, 8, 4, false, &cp);
  CHECK_EQ_INT(rmq_index_service_load(&s, false, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_index_service_count(&s), 3);
  CHECK_EQ_INT(query(&s, "TQ", "U3", 8, 0, INT64_MAX, got), 2);
  r = request("TQ", 800, T0 + 12000, 0, "x", NULL);
  CHECK_EQ_INT(rmq_index_service_build(&s, &r, &err), RMQ_EINVAL);
  rmq_err_clear(&err);
  rmq_index_service_destroy(&s);
  /* Abnormal exit: files that end after the checkpoint's indexMsgTimestamp are deleted. */
  init(&s, dir, 8, 4, true, &cp);
  CHECK_EQ_INT(rmq_index_service_load(&s, false, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_index_service_count(&s), 2);
  char path[512];
  snprintf(path, sizeof path, "%s/index/%s", dir, n3);
  CHECK(access(path, F_OK) != 0);
  snprintf(path, sizeof path, "%s/index/%s", dir, n2); /* ended exactly at it: kept */
  CHECK(access(path, F_OK) == 0);
  char name[18];
  CHECK(rmq_index_service_file_info(&s, 1, &h, name) && strcmp(name, n2) == 0);
  /* Dispatch rebuilds: the newest full file makes the next record roll again. */
  CHECK_EQ_INT(build(&s, "TQ", 800, T0 + 12000, "x", NULL), RMQ_OK);
  CHECK_EQ_INT(query(&s, "TQ", "x", 8, 0, INT64_MAX, got), 1);
  rmq_index_service_destroy(&s);
  /* Without a checkpoint every file of an abnormal exit goes. */
  init(&s, dir, 8, 4, true, NULL);
  CHECK_EQ_INT(rmq_index_service_load(&s, false, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_index_service_count(&s), 0);
  rmq_index_service_destroy(&s);
  rmq_checkpoint_close(&cp);
  tu_rmrf(dir);
}

/*
** A header value out of range is an error that names it, never arithmetic
** that overflows (UBSan would report beginTimestamp + timeDiff * 1000).
*/
static const rmq_index_check settled = {.settled = true};

static void check_damaged_header(const char *path) {
  static const struct {
    int at, width;
    int64_t value;
    const char *name;
  } bad[] = {
      {0, 8, INT64_MAX - 5, "beginTimestamp"}, {0, 8, -1, "beginTimestamp"},
      {8, 8, INT64_MIN, "endTimestamp"},       {16, 8, -7, "beginPhyOffset"},
      {24, 8, INT64_MIN, "endPhyOffset"},      {32, 4, 9, "hashSlotCount"},
  };
  int fd = open(path, O_RDWR);
  uint8_t saved[40];
  CHECK(pread(fd, saved, sizeof saved, 0) == (ssize_t)sizeof saved);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint8_t v[8];
    if (bad[i].width == 8) rmq_put64(v, bad[i].value);
    if (bad[i].width == 4) rmq_put32(v, (int32_t)bad[i].value);
    CHECK(pwrite(fd, v, (size_t)bad[i].width, bad[i].at) == bad[i].width);
    rmq_index_file *f;
    rmq_err err = {0};
    int rc = rmq_index_file_load(path, 8, 16, true, &settled, &f, &err);
    CHECK_EQ_INT(rc, RMQ_ECORRUPT);
    CHECK(strstr(err.msg, bad[i].name) != NULL);
    if (rc == RMQ_OK) {
      int64_t out[16];
      int n = 0;
      rmq_index_file_select(f, 5, 16, 0, INT64_MAX, out, &n);
      rmq_index_file_put_key(f, 5, 100, INT64_MIN + 1);
      rmq_index_file_close(f, false);
    }
    CHECK(pwrite(fd, saved, sizeof saved, 0) == (ssize_t)sizeof saved);
  }
  close(fd);
}

/* ------------------------------------------------------- file level */

static void test_file_level(void) {
  char dir[128], path[512];
  sub_dir(dir, sizeof dir, "file");
  snprintf(path, sizeof path, "%s/index", dir);
  mkdir(path, 0755);
  rmq_err err = {0};
  rmq_index_file *f = NULL;
  snprintf(path, sizeof path, "%s/index/20240101000000000", dir);
  CHECK_EQ_INT(rmq_index_file_create(path, 8, 16, 300, T0 + 2600, &f, &err), RMQ_OK);
  uint8_t hb[40], want[40];
  read_bytes(dir, "20240101000000000", 0, hb, 40);
  memset(want, 0, sizeof want);
  rmq_put64(want, T0 + 2600);
  rmq_put64(want + 8, T0 + 2600);
  rmq_put64(want + 16, 300);
  rmq_put64(want + 24, 300);
  CHECK_EQ_MEM(hb, want, 40); /* indexCount stays 0 on disk until the first item */
  rmq_index_header h;
  rmq_index_file_header(f, &h);
  CHECK_EQ_INT(h.index_count, 1);
  CHECK(!rmq_index_file_time_matched(f, 0, T0));
  CHECK(rmq_index_file_time_matched(f, 0, T0 + 2600));

  /* Three items in one chain, then damage the chain. */
  for (int i = 1; i <= 3; i++) CHECK(rmq_index_file_put_key(f, 8 * i + 5, 1000 * i, T0 + 3000 * i));
  CHECK(rmq_index_file_put_key(f, 5, 5000, T0 + 9000)); /* hash 5, same slot */
  int64_t out[16];
  int n = 0;
  rmq_index_file_select(f, 5, 16, 0, INT64_MAX, out, &n);
  CHECK_EQ_INT(n, 1);
  CHECK_EQ_INT(out[0], 5000);
  uint8_t *items = f->mf->mapped + 40 + 8 * 4;
  CHECK_EQ_INT(rmq_get32(items + 4 * 20 + 16), 3); /* item 4 chains to item 3 */
  rmq_put32(items + 1 * 20 + 16, 4);               /* item 1 -> item 4: a cycle */
  n = 0;
  rmq_index_file_select(f, 8 * 2 + 5, 16, 0, INT64_MAX, out, &n);
  CHECK_EQ_INT(n, 1);
  rmq_put32(items + 3 * 20 + 16, 3); /* item 3 -> itself */
  n = 0;
  rmq_index_file_select(f, 5, 16, 0, INT64_MAX, out, &n);
  CHECK_EQ_INT(n, 1);
  rmq_put32(f->mf->mapped + 40 + 5 * 4, 16); /* slot -> item 16, past the end */
  n = 0;
  rmq_index_file_select(f, 5, 16, 0, INT64_MAX, out, &n);
  CHECK_EQ_INT(n, 0);
  rmq_put32(f->mf->mapped + 40 + 5 * 4, 4); /* repair the slot and item 3 */
  rmq_put32(items + 3 * 20 + 16, 2);
  rmq_put32(items + 2 * 20 + 12, -1); /* a negative timeDiff ends the walk */
  n = 0;
  rmq_index_file_select(f, 8 * 2 + 5, 16, 0, INT64_MAX, out, &n);
  CHECK_EQ_INT(n, 0);
  rmq_put32(items + 2 * 20 + 12, 0); /* and repair the rest */
  rmq_put32(items + 1 * 20 + 16, 0);
  /* Full at index_num - 1 items. */
  for (int i = 5; i < 16; i++) CHECK(rmq_index_file_put_key(f, i, 5000 + i, T0 + 100000));
  CHECK(rmq_index_file_is_full(f));
  CHECK(!rmq_index_file_put_key(f, 1, 1, T0));
  rmq_index_file_header(f, &h);
  CHECK_EQ_INT(h.index_count, 16);
  CHECK_EQ_INT(rmq_index_file_flush(f, &err), RMQ_OK);
  rmq_index_file_close(f, false);

  /* Reopen: the header comes back; read-only refuses items. */
  CHECK_EQ_INT(rmq_index_file_load(path, 8, 16, false, &settled, &f, &err), RMQ_OK);
  rmq_index_file_header(f, &h);
  CHECK_EQ_INT(h.index_count, 16);
  CHECK_EQ_INT(h.end_timestamp, T0 + 100000);
  CHECK_EQ_INT(h.begin_phy_offset, 1000);
  rmq_index_file_close(f, false);
  /* Sizes that do not match the settings, and a damaged indexCount. */
  CHECK_EQ_INT(rmq_index_file_load(path, 16, 16, true, &settled, &f, &err), RMQ_ECORRUPT);
  CHECK(strstr(err.msg, "index_slots 16") && strstr(err.msg, "20240101000000000"));
  CHECK(f == NULL);
  rmq_err_clear(&err);
  int fd = open(path, O_WRONLY);
  uint8_t big[4];
  rmq_put32(big, 17);
  CHECK(pwrite(fd, big, 4, 36) == 4);
  close(fd);
  CHECK_EQ_INT(rmq_index_file_load(path, 8, 16, true, &settled, &f, &err), RMQ_ECORRUPT);
  CHECK(strstr(err.msg, "indexCount 17") != NULL);
  rmq_err_clear(&err);
  rmq_put32(big, 0); /* <= 0 reads as 1, but items follow it: damage, unless a writer is adding */
  fd = open(path, O_WRONLY);
  CHECK(pwrite(fd, big, 4, 36) == 4);
  close(fd);
  CHECK_EQ_INT(rmq_index_file_load(path, 8, 16, true, &settled, &f, &err), RMQ_ECORRUPT);
  CHECK(strstr(err.msg, "indexCount is 0 but item 1 after the last is written") != NULL);
  rmq_err_clear(&err);
  rmq_index_check live = {.settled = false};
  CHECK_EQ_INT(rmq_index_file_load(path, 8, 16, true, &live, &f, &err), RMQ_OK);
  rmq_index_file_header(f, &h);
  CHECK_EQ_INT(h.index_count, 1);
  rmq_index_file_close(f, false);
  check_damaged_header(path);
  CHECK_EQ_INT(rmq_index_file_load(path, 8, 16, true, &live, &f, &err), RMQ_OK);
  rmq_index_file_close(f, true);
  CHECK(access(path, F_OK) != 0);

  rmq_index_service s;
  CHECK_EQ_INT(rmq_index_service_init(&s, dir, 0, 16, true, NULL, &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "index_slots") != NULL);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_index_service_init(&s, dir, 5000000, 200000000, true, NULL, &err), RMQ_EINVAL);
  tu_rmrf(dir);
}

/* --------------------------------------------------------- file names */

static void test_names(void) {
  char dir[128], path[512];
  sub_dir(dir, sizeof dir, "names");
  snprintf(path, sizeof path, "%s/index", dir);
  mkdir(path, 0755);
  /* Names for the next 1.5 s are taken: the new file must bump past them. */
  int64_t now = rmq_now_ms();
  char first[18], last[18];
  rmq_index_file_name(now, first);
  for (int64_t ms = now; ms < now + 1500; ms++) {
    char name[18];
    rmq_index_file_name(ms, name);
    memcpy(last, name, sizeof name);
    snprintf(path, sizeof path, "%s/index/%s", dir, name);
    close(open(path, O_CREAT | O_WRONLY, 0644));
  }
  rmq_index_service s;
  init(&s, dir, 8, 16, true, NULL);
  CHECK_EQ_INT(build(&s, "TN", 1, now, NULL, "u"), RMQ_OK);
  rmq_index_header h;
  char name[18];
  CHECK(rmq_index_service_file_info(&s, 0, &h, name));
  CHECK(strcmp(name, last) > 0);
  struct stat st;
  snprintf(path, sizeof path, "%s/index/%s", dir, first);
  CHECK(stat(path, &st) == 0 && st.st_size == 0);
  rmq_index_service_destroy(&s);
  tu_rmrf(dir);

  /* A newest file from the future (clock stepped back): the next one sorts after it. */
  sub_dir(dir, sizeof dir, "future");
  snprintf(path, sizeof path, "%s/index", dir);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/index/21000101000000000", dir);
  rmq_index_file *f;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_index_file_create(path, 8, 4, 0, 0, &f, &err), RMQ_OK);
  for (int i = 0; i < 3; i++) rmq_index_file_put_key(f, i, 10 + i, now);
  rmq_index_file_close(f, false);
  init(&s, dir, 8, 4, true, NULL);
  CHECK_EQ_INT(rmq_index_service_load(&s, true, &err), RMQ_OK);
  CHECK_EQ_INT(build(&s, "TN", 100, now, NULL, "v"), RMQ_OK);
  CHECK(rmq_index_service_file_info(&s, 1, &h, name));
  CHECK_EQ_STR(name, "21000101000000001");
  /* Files whose names are not index names are ignored by load. */
  rmq_index_service_destroy(&s);
  snprintf(path, sizeof path, "%s/index/notes.txt", dir);
  close(open(path, O_CREAT | O_WRONLY, 0644));
  init(&s, dir, 8, 4, true, NULL);
  CHECK_EQ_INT(rmq_index_service_load(&s, true, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_index_service_count(&s), 2);
  rmq_index_service_destroy(&s);
  /* An empty file left by a crash: skipped read-only, an empty index file writable. */
  snprintf(path, sizeof path, "%s/index/21000101000000003", dir);
  close(open(path, O_CREAT | O_WRONLY, 0644));
  init(&s, dir, 8, 4, false, NULL);
  CHECK_EQ_INT(rmq_index_service_load(&s, true, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_index_service_count(&s), 2);
  rmq_index_service_destroy(&s);
  init(&s, dir, 8, 4, true, NULL);
  CHECK_EQ_INT(rmq_index_service_load(&s, false, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_index_service_count(&s), 1); /* the full ones ended after "checkpoint" 0 */
  CHECK(rmq_index_service_file_info(&s, 0, &h, name) && h.index_count == 1 && h.end_timestamp == 0);
  CHECK_EQ_STR(name, "21000101000000003");
  struct stat st3;
  CHECK(stat(path, &st3) == 0 && st3.st_size == 40 + 8 * 4 + 4 * 20);
  CHECK_EQ_INT(build(&s, "TN", 200, now, NULL, "w"), RMQ_OK); /* it takes items */
  CHECK_EQ_INT(rmq_index_service_count(&s), 1);
  rmq_index_service_destroy(&s);
  /* A file of the wrong size is a load error. */
  snprintf(path, sizeof path, "%s/index/21000101000000005", dir);
  int fd = open(path, O_CREAT | O_WRONLY, 0644);
  CHECK(fd >= 0 && ftruncate(fd, 100) == 0);
  close(fd);
  init(&s, dir, 8, 4, true, NULL);
  CHECK_EQ_INT(rmq_index_service_load(&s, true, &err), RMQ_ECORRUPT);
  CHECK(strstr(err.msg, "21000101000000005") != NULL);
  rmq_index_service_destroy(&s);
  tu_rmrf(dir);
}

/* ------------------------------------------------------------- faults */

static void test_faults(void) {
  char dir[128];
  sub_dir(dir, sizeof dir, "faults");
  rmq_checkpoint cp;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_checkpoint_open(&cp, dir, true, &err), RMQ_OK);
  rmq_index_service s;
  init(&s, dir, 8, 4, true, &cp);
  for (int i = 0; i < 3; i++) CHECK_EQ_INT(build(&s, "TF", 10 * i, T0 + i, NULL, "k"), RMQ_OK);
  rmq_io_fault(RMQ_IO_MSYNC, 1, EIO, -1);
  rmq_index_request r = request("TF", 100, T0 + 5, 0, NULL, "k");
  CHECK_EQ_INT(rmq_index_service_build(&s, &r, &err), RMQ_EIO);
  CHECK(strstr(err.msg, "index") != NULL);
  CHECK_EQ_INT(atomic_load(&cp.index_msg_timestamp), 0); /* not recorded as flushed */
  rmq_io_fault(RMQ_IO_MSYNC, 1, EIO, -1);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_index_service_flush(&s, &err), RMQ_EIO);
  rmq_io_fault(RMQ_IO_MSYNC, 0, 0, -1);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_index_service_flush(&s, &err), RMQ_OK);
  /* A file that cannot be created. */
  for (int i = 0; i < 3; i++) CHECK_EQ_INT(build(&s, "TF", 200 + i, T0 + 9, NULL, "k"), RMQ_OK);
  rmq_io_fault(RMQ_IO_OPEN, 1, EIO, -1);
  r = request("TF", 300, T0 + 10, 0, NULL, "k");
  CHECK_EQ_INT(rmq_index_service_build(&s, &r, &err), RMQ_EIO);
  rmq_io_fault(RMQ_IO_OPEN, 0, 0, -1);
  CHECK_EQ_INT(rmq_index_service_count(&s), 2);
  rmq_index_service_destroy(&s);
  rmq_checkpoint_close(&cp);
  tu_rmrf(dir);
}

/* ------------------------------------ queries while the dispatcher writes */

#define LIVE_MSGS 3000

typedef struct live {
  rmq_index_service *s;
  atomic_int built; /* messages fully indexed */
  atomic_int done;
  int misses;
} live;

static void *live_reader(void *p) {
  live *l = p;
  unsigned seed = 7;
  while (!atomic_load(&l->done)) {
    int upto = atomic_load(&l->built);
    if (upto == 0) continue;
    int i = (int)(rand_r(&seed) % (unsigned)upto);
    char uniq[16];
    snprintf(uniq, sizeof uniq, "C%05d", i);
    int64_t got[64];
    rmq_err err = {0};
    int n = 0;
    rmq_index_service_query(l->s, "TL", 2, uniq, strlen(uniq), 64, 0, INT64_MAX, got, &n, &err);
    if (!contains(got, n, 10 * (int64_t)i)) l->misses++;
    rmq_index_service_query(l->s, "TL", 2, "G1", 2, 64, 0, INT64_MAX, got, &n, &err);
  }
  return NULL;
}

static void test_live_queries(void) {
  char dir[128];
  sub_dir(dir, sizeof dir, "live");
  rmq_index_service s;
  init(&s, dir, 64, 256, true, NULL);
  static live l;
  l.s = &s;
  pthread_t tid[3];
  for (int i = 0; i < 3; i++) pthread_create(&tid[i], NULL, live_reader, &l);
  int failures = 0;
  for (int i = 0; i < LIVE_MSGS; i++) {
    char uniq[16], keys[16];
    snprintf(uniq, sizeof uniq, "C%05d", i);
    snprintf(keys, sizeof keys, "G%d", i % 20);
    failures += build(&s, "TL", 10 * (int64_t)i, T0 + i, keys, uniq) != RMQ_OK;
    atomic_store(&l.built, i + 1);
  }
  atomic_store(&l.done, 1);
  for (int i = 0; i < 3; i++) pthread_join(tid[i], NULL);
  CHECK_EQ_INT(failures, 0);
  CHECK_EQ_INT(l.misses, 0);
  CHECK(rmq_index_service_count(&s) > 20);
  rmq_index_service_destroy(&s);
  tu_rmrf(dir);
}

/* ------------------------------------- read-only geometry and views */

/* Build n messages with uniq key "R<i>" and key "all" at offsets 100*i into a fresh dir. */
static void build_files(const char *dir, int32_t slots, int32_t entries, int n) {
  rmq_index_service s;
  init(&s, dir, slots, entries, true, NULL);
  for (int i = 0; i < n; i++) {
    char uniq[16];
    snprintf(uniq, sizeof uniq, "R%d", i);
    build(&s, "TR", 100 * (int64_t)i, T0 + 1000 * (int64_t)i, "all", uniq);
  }
  rmq_index_service_destroy(&s);
}

/* The path of the first index file listed in dir. */
static bool first_index_path(const char *dir, char *path, size_t cap) {
  DIR *d = opendir(dir);
  struct dirent *e;
  bool found = false;
  while (d && !found && (e = readdir(d)) != NULL) {
    int n = strlen(e->d_name) == 17 ? snprintf(path, cap, "%s/%s", dir, e->d_name) : -1;
    found = n > 0 && (size_t)n < cap;
  }
  if (d) closedir(d);
  return found;
}

/* Overwrite n bytes of the file at off, as damage would. */
static void patch_file(const char *path, const void *bytes, size_t n, off_t off) {
  int fd = open(path, O_WRONLY);
  CHECK(fd >= 0 && pwrite(fd, bytes, n, off) == (ssize_t)n);
  if (fd >= 0) close(fd);
}

static void test_readonly_geometry(void) {
  char dir[128];
  rmq_err err = {0};
  int64_t got[64];
  rmq_index_service s;
  /* RocketMQ's proportion (4 items a slot): a reader with the defaults finds it. */
  sub_dir(dir, sizeof dir, "ro4");
  build_files(dir, 8, 32, 20); /* 40 items, 31 a file: 2 files */
  init(&s, dir, RMQ_INDEX_DEFAULT_SLOTS, RMQ_INDEX_DEFAULT_ENTRIES, false, NULL);
  CHECK_EQ_INT(rmq_index_service_load(&s, true, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_index_service_count(&s), 2);
  CHECK_EQ_INT(s.slot_num, 8);
  CHECK_EQ_INT(s.index_num, 32);
  CHECK_EQ_INT(query(&s, "TR", "all", 64, 0, INT64_MAX, got), 20);
  CHECK_EQ_INT(query(&s, "TR", "R7", 64, 0, INT64_MAX, got), 1);
  CHECK_EQ_INT(got[0], 700);

  /* Views: every item of every file, oldest file first, and a slot's chain. */
  rmq_index_view v;
  int files = 0, items = 0, chain = 0, bad = 0;
  int32_t hash = rmq_index_key_hash("TR", 2, "all", 3);
  char after[18] = "";
  for (bool ok = rmq_index_service_view(&s, NULL, &v); ok;
       ok = rmq_index_service_view(&s, after, &v)) {
    files++;
    if (strcmp(v.name, after) <= 0) bad++;
    CHECK_EQ_INT(v.slot_num, 8);
    rmq_index_item it;
    for (int32_t k = 1; k < v.header.index_count; k++) {
      if (!rmq_index_view_item(&v, k, &it) || it.prev_index >= k) bad++;
      items++;
    }
    for (int32_t k = rmq_index_view_slot(&v, hash); k > 0; k = it.prev_index) {
      if (!rmq_index_view_item(&v, k, &it)) break;
      chain += it.key_hash == hash;
    }
    CHECK(!rmq_index_view_item(&v, 0, &it) && !rmq_index_view_item(&v, 32, &it));
    memcpy(after, v.name, sizeof after);
    rmq_index_view_release(&v);
  }
  CHECK_EQ_INT(files, 2);
  CHECK_EQ_INT(items, 40);
  CHECK_EQ_INT(chain, 20);
  CHECK_EQ_INT(bad, 0);
  CHECK(v.mf == NULL);
  rmq_index_service_destroy(&s);
  tu_rmrf(dir);

  /* Another proportion: the items written show it (6 items of 15, not full). */
  sub_dir(dir, sizeof dir, "ro2");
  build_files(dir, 8, 16, 3);
  init(&s, dir, RMQ_INDEX_DEFAULT_SLOTS, RMQ_INDEX_DEFAULT_ENTRIES, false, NULL);
  CHECK_EQ_INT(rmq_index_service_load(&s, true, &err), RMQ_OK);
  CHECK_EQ_INT(s.skipped.code, RMQ_OK);
  CHECK_EQ_INT(s.slot_num, 8);
  CHECK_EQ_INT(s.index_num, 16);
  CHECK_EQ_INT(query(&s, "TR", "R2", 64, 0, INT64_MAX, got), 1);
  CHECK_EQ_INT(query(&s, "TR", "all", 64, 0, INT64_MAX, got), 3);
  rmq_index_service_destroy(&s);
  /* A header that disagrees with the items: the file is skipped, and why is kept. */
  char index_dir[PATH_MAX], path[PATH_MAX];
  snprintf(index_dir, sizeof index_dir, "%s/index", dir);
  CHECK(first_index_path(index_dir, path, sizeof path));
  uint8_t junk[8] = {0x7f, 1, 2, 3, 4, 5, 6, 7};
  patch_file(path, junk, sizeof junk, 24); /* endPhyOffset */
  init(&s, dir, RMQ_INDEX_DEFAULT_SLOTS, RMQ_INDEX_DEFAULT_ENTRIES, false, NULL);
  CHECK_EQ_INT(rmq_index_service_load(&s, true, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_index_service_count(&s), 0);
  CHECK_EQ_INT(s.skipped.code, RMQ_ECORRUPT);
  CHECK(strstr(s.skipped.msg, "is 392 bytes: index_slots 5000000 and index_entries 20000000 "
                              "give 420000040, index_entries = 4 * index_slots fits no size, "
                              "and its items do not show its geometry") != NULL);
  rmq_index_service_destroy(&s);
  /* With its geometry given, the disagreement itself is the damage that skips it. */
  init(&s, dir, 8, 16, false, NULL);
  CHECK_EQ_INT(rmq_index_service_load(&s, true, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_index_service_count(&s), 0);
  CHECK(strstr(s.skipped.msg, "is damaged at offset") && strstr(s.skipped.msg, "endPhyOffset"));
  rmq_index_service_destroy(&s);
  tu_rmrf(dir);
}

/* rmq_index_file_check on a file built in memory: each rule, then each header-only rule. */
static void test_structure_check(void) {
  enum { SLOTS = 8, ENTRIES = 16 };
  char dir[128], path[512];
  sub_dir(dir, sizeof dir, "structure");
  snprintf(path, sizeof path, "%s/index", dir);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/index/20240101000000000", dir);
  rmq_index_file *f;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_index_file_create(path, SLOTS, ENTRIES, 0, 0, &f, &err), RMQ_OK);
  for (int i = 1; i <= 6; i++) CHECK(rmq_index_file_put_key(f, i % 3, 100 * i, T0 + 1000 * i));
  uint8_t *p = f->mf->mapped;
  uint8_t *slots = p + 40, *items = p + 40 + SLOTS * 4;
  rmq_index_check full = {.settled = true}, every = {.settled = true, .every_slot = true};
  rmq_index_check quick = {.settled = true, .header_only = true};
  rmq_index_defect d;
  CHECK(rmq_index_file_check(p, SLOTS, ENTRIES, &every, &d));
  /* A slot no item uses, not empty: only a check of every slot reads it. */
  rmq_put32(slots + 7 * 4, 3);
  CHECK(rmq_index_file_check(p, SLOTS, ENTRIES, &full, &d));
  CHECK(!rmq_index_file_check(p, SLOTS, ENTRIES, &every, &d));
  CHECK(strstr(d.why, "slot 7 holds item 3 where its newest item is 0") && d.at == 40 + 7 * 4);
  rmq_put32(slots + 7 * 4, 0);
  /* hashSlotCount off by one. */
  rmq_put32(p + 32, 2);
  CHECK(!rmq_index_file_check(p, SLOTS, ENTRIES, &full, &d));
  CHECK(strstr(d.why, "hashSlotCount is 2 but 3 slots hold items") != NULL);
  rmq_put32(p + 32, 3);
  /* Items out of commit-log order; a negative hash. */
  rmq_put64(items + 3 * 20 + 4, 150);
  CHECK(!rmq_index_file_check(p, SLOTS, ENTRIES, &full, &d));
  CHECK(strstr(d.why, "item 3 leads to commit-log offset 150, below item 2's 200") != NULL);
  rmq_put64(items + 3 * 20 + 4, 300);
  rmq_put32(items + 2 * 20, -5);
  CHECK(!rmq_index_file_check(p, SLOTS, ENTRIES, &full, &d));
  CHECK(strstr(d.why, "item 2 has hash -5") != NULL);
  rmq_put32(items + 2 * 20, 2);
  CHECK(rmq_index_file_check(p, SLOTS, ENTRIES, &every, &d));
  /* The header-only check: the ends of the items against the header's offsets. */
  rmq_put64(p + 24, 601);
  CHECK(!rmq_index_file_check(p, SLOTS, ENTRIES, &quick, &d));
  CHECK(strstr(d.why, "endPhyOffset is 601 but the last item 6 leads to 600") && d.at == 24);
  rmq_put64(p + 24, 600);
  rmq_put64(items + 1 * 20 + 4, 99);
  CHECK(!rmq_index_file_check(p, SLOTS, ENTRIES, &quick, &d));
  CHECK(strstr(d.why, "beginPhyOffset is 100 but item 1 leads to 99") != NULL);
  rmq_put64(items + 1 * 20 + 4, 100);
  /* A zeroed slot table passes the header-only check; a look-up checks the file whole first. */
  memset(slots, 0, SLOTS * 4);
  CHECK(rmq_index_file_check(p, SLOTS, ENTRIES, &quick, &d));
  atomic_store(&f->checked, 0);
  CHECK_EQ_INT(rmq_index_file_ensure_checked(f, &err), RMQ_ECORRUPT);
  CHECK(strstr(err.msg, "20240101000000000 is damaged at offset") &&
        strstr(err.msg, "rocketmq_repair"));
  rmq_index_file_close(f, false);
  tu_rmrf(dir);
}

/*
** A file whose items use few of its slots (a store's newest, checked at each
** open) is checked with a small hash of the used slots, not an array of
** every slot: it finds what the array finds, with the same words.
*/
static void test_structure_check_sparse(void) {
  enum { SLOTS = 4096, ENTRIES = 256, ITEMS = 40 };
  char dir[128], path[512];
  sub_dir(dir, sizeof dir, "sparse");
  snprintf(path, sizeof path, "%s/index", dir);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/index/20240101000000000", dir);
  rmq_index_file *f;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_index_file_create(path, SLOTS, ENTRIES, 0, 0, &f, &err), RMQ_OK);
  /* Chains of several items in 7 slots, and slots of one item, some hashes past SLOTS. */
  for (int i = 1; i <= ITEMS; i++) {
    int32_t hash = i % 2 ? (i % 7) * 600 : 5000 + 37 * i;
    CHECK(rmq_index_file_put_key(f, hash, 100 * i, T0 + 1000 * i));
  }
  uint8_t *p = f->mf->mapped;
  uint8_t *slots = p + 40, *items = p + 40 + SLOTS * 4;
  rmq_index_check full = {.settled = true}, every = {.settled = true, .every_slot = true};
  rmq_index_defect d, de;
  CHECK(rmq_index_file_check(p, SLOTS, ENTRIES, &full, &d));
  CHECK(rmq_index_file_check(p, SLOTS, ENTRIES, &every, &d));
  /* Item 15 (a chain of slot 600) linked to item 3 where item 1 came before it. */
  int32_t prev = rmq_get32(items + 15 * 20 + 16);
  rmq_put32(items + 15 * 20 + 16, 3);
  CHECK(!rmq_index_file_check(p, SLOTS, ENTRIES, &full, &d));
  CHECK(!rmq_index_file_check(p, SLOTS, ENTRIES, &every, &de));
  CHECK(strstr(d.why, "item 15 links to item 3, but the item before it in slot 600 is 1") != NULL);
  CHECK(strcmp(d.why, de.why) == 0 && d.at == de.at);
  rmq_put32(items + 15 * 20 + 16, prev);
  /* A used slot that names an older item of its chain. */
  int32_t slot = (5000 + 37 * 40) % SLOTS;
  rmq_put32(slots + slot * 4, 12);
  CHECK(!rmq_index_file_check(p, SLOTS, ENTRIES, &full, &d));
  CHECK(!rmq_index_file_check(p, SLOTS, ENTRIES, &every, &de));
  CHECK(strstr(d.why, "holds item 12 where its newest item is 40") != NULL);
  CHECK(strcmp(d.why, de.why) == 0 && d.at == de.at && d.at == 40 + slot * 4);
  rmq_put32(slots + slot * 4, 40);
  /* hashSlotCount off by one. */
  int32_t used = rmq_get32(p + 32);
  rmq_put32(p + 32, used + 1);
  CHECK(!rmq_index_file_check(p, SLOTS, ENTRIES, &full, &d));
  CHECK(strstr(d.why, "hashSlotCount is") != NULL);
  rmq_put32(p + 32, used);
  CHECK(rmq_index_file_check(p, SLOTS, ENTRIES, &full, &d));
  rmq_index_file_close(f, false);
  tu_rmrf(dir);
}

/* -------------------------------------- a reader follows another writer */

static int follow(rmq_index_service *s) {
  rmq_err err = {0};
  int rc = rmq_index_service_follow(s, false, &err);
  if (rc != RMQ_OK) fprintf(stderr, "  follow: %s\n", err.msg);
  return rc;
}

static void test_follow(void) {
  char dir[128];
  sub_dir(dir, sizeof dir, "follow");
  rmq_index_service w, r;
  init(&w, dir, 4, 6, true, NULL);
  CHECK_EQ_INT(build(&w, "T", 100, 1700000000000, "a0", NULL), RMQ_OK);
  init(&r, dir, 4, 6, false, NULL);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_index_service_load(&r, true, &err), RMQ_OK);
  int64_t out[8];
  CHECK_EQ_INT(query(&r, "T", "a0", 8, 0, INT64_MAX, out), 1);
  /* Items in the reader's file after it loaded, then in two new files (5 items each). */
  for (int i = 1; i < 12; i++) {
    char key[16];
    snprintf(key, sizeof key, "a%d", i);
    CHECK_EQ_INT(build(&w, "T", 100 + 100 * i, 1700000000000 + i, key, NULL), RMQ_OK);
  }
  CHECK_EQ_INT(rmq_index_service_count(&w), 3);
  CHECK_EQ_INT(follow(&r), RMQ_OK);
  CHECK_EQ_INT(rmq_index_service_count(&r), 3);
  CHECK_EQ_INT(query(&r, "T", "a4", 8, 0, INT64_MAX, out), 1);
  CHECK_EQ_INT(out[0], 500);
  CHECK_EQ_INT(query(&r, "T", "a11", 8, 0, INT64_MAX, out), 1);
  CHECK_EQ_INT(out[0], 1200);
  rmq_index_header h;
  char name[18];
  CHECK(rmq_index_service_file_info(&r, 2, &h, name));
  CHECK_EQ_INT(h.index_count, 3);
  CHECK_EQ_INT(h.end_phy_offset, 1200);
  /* A key put after the refresh is found at once: the slot leads to it and the header counts it. */
  CHECK_EQ_INT(build(&w, "T", 1300, 1700000000013, "a12", NULL), RMQ_OK);
  CHECK_EQ_INT(query(&r, "T", "a12", 8, 0, INT64_MAX, out), 1);
  /* The writer's expiry deletes the first two files: the reader lets them go. */
  CHECK_EQ_INT(rmq_index_service_delete_expired(&w, 1100), 2);
  CHECK_EQ_INT(follow(&r), RMQ_OK);
  CHECK_EQ_INT(rmq_index_service_count(&r), 1);
  CHECK_EQ_INT(query(&r, "T", "a4", 8, 0, INT64_MAX, out), 0);
  CHECK_EQ_INT(query(&r, "T", "a12", 8, 0, INT64_MAX, out), 1);
  rmq_index_service_destroy(&r);
  rmq_index_service_destroy(&w);
}

int main(void) {
  tu_tmpdir(root, sizeof root);
  test_structure_check();
  test_structure_check_sparse();
  test_vector();
  test_delete_with_no_file();
  test_many_keys();
  test_prev_file_end();
  test_file_level();
  test_names();
  test_faults();
  test_live_queries();
  test_readonly_geometry();
  test_follow();
  tu_rmrf(root);
  return check_report();
}
