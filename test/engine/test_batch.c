/*
** test_batch.c: a transaction's rows (rmq_batch): added, cut back to
** savepoint levels, released, cleared, and appended as one contiguous batch
** that reads back; failures that leave the batch as it was.
*/
#include <stdlib.h>

#include "check.h"
#include "testutil.h"

#define SEG 65536

/* Add a message of topic T, queue 0, whose body is text; CHECKs that it was added. */
static void add_text(rmq_batch *b, const char *text) {
  tu_msg t;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_batch_add(b, tu_message(&t, "T", 0, text, (int)strlen(text), "KEYS=k"), &err),
               RMQ_OK);
}

/* Add a message of body_len bytes of byte c. */
static void add_bytes(rmq_batch *b, char c, int body_len) {
  char *body = malloc((size_t)body_len);
  memset(body, c, (size_t)body_len);
  tu_msg t;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_batch_add(b, tu_message(&t, "T", 0, body, body_len, ""), &err), RMQ_OK);
  free(body);
}

/*
** The log from `from` on holds exactly the records whose bodies are
** expected (NULL-terminated), with queue offsets counting from qoff. A
** body "@c:n" stands for n bytes of c.
*/
static void check_log(rmq_store *s, int64_t from, int64_t qoff, const char *const *expected) {
  rmq_commitlog *cl = rmq_store_commitlog(s);
  int64_t offset = from;
  for (int i = 0; expected[i]; i++) {
    rmq_commitlog_ref ref;
    rmq_message m;
    rmq_err err = {0};
    CHECK_EQ_INT(rmq_commitlog_read_message(cl, offset, true, &ref, &m, &err), RMQ_OK);
    if (err.code) return;
    const char *want = expected[i];
    if (want[0] == '@') {
      int n = atoi(want + 3);
      CHECK_EQ_INT(m.body_len, n);
      bool same = m.body_len == n;
      for (int j = 0; same && j < n; j++) same = ((const char *)m.body)[j] == want[1];
      CHECK(same);
    } else {
      CHECK(m.body_len == (int)strlen(want) && memcmp(m.body, want, strlen(want)) == 0);
    }
    CHECK_EQ_INT(m.physical_offset, offset);
    CHECK_EQ_INT(m.queue_offset, qoff + i);
    CHECK(m.store_timestamp > 0);
    offset += m.total_size;
    rmq_commitlog_ref_release(&ref);
  }
  CHECK_EQ_INT(rmq_commitlog_max_offset(cl), offset);
}

static void append_ok(rmq_batch *b, int64_t expected_first) {
  int64_t first = -2;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_batch_append(b, &first, &err), RMQ_OK);
  CHECK_EQ_INT(first, expected_first);
  CHECK_EQ_INT(rmq_batch_count(b), 0);
}

static rmq_store *open_store(const char *dir, int32_t file_size, int32_t max_message_size) {
  rmq_config cfg;
  tu_small_config(&cfg, file_size);
  cfg.max_message_size = max_message_size;
  return tu_open(dir, &cfg);
}

/* Rows added read back in order after the append; a second batch follows the first. */
static void test_add_append(const char *dir) {
  rmq_store *s = open_store(dir, SEG, 4096);
  rmq_batch *b = rmq_batch_new(s);
  CHECK_EQ_INT(rmq_batch_count(b), 0);
  add_text(b, "a");
  add_text(b, "b");
  add_text(b, "c");
  CHECK_EQ_INT(rmq_batch_count(b), 3);
  CHECK_EQ_INT(rmq_commitlog_max_offset(rmq_store_commitlog(s)), 0); /* nothing before */
  append_ok(b, 0);
  check_log(s, 0, 0, (const char *const[]){"a", "b", "c", NULL});
  int64_t end = rmq_commitlog_max_offset(rmq_store_commitlog(s));
  add_text(b, "d");
  append_ok(b, end);
  check_log(s, 0, 0, (const char *const[]){"a", "b", "c", "d", NULL});
  /* An empty batch appends nothing. */
  append_ok(b, -1);
  rmq_batch_free(b);
  rmq_store_close(s);
}

/* ROLLBACK TO at several levels drops exactly the rows added after each. */
static void test_rollback_to(const char *dir) {
  rmq_store *s = open_store(dir, SEG, 4096);
  rmq_batch *b = rmq_batch_new(s);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_batch_savepoint(b, 0, &err), RMQ_OK);
  add_text(b, "a");
  CHECK_EQ_INT(rmq_batch_savepoint(b, 1, &err), RMQ_OK);
  add_text(b, "b1");
  add_text(b, "b2");
  /* Levels 2 and 3 open at once (a table that joins a transaction late). */
  CHECK_EQ_INT(rmq_batch_savepoint(b, 3, &err), RMQ_OK);
  add_text(b, "c");
  rmq_batch_rollback_to(b, 3);
  CHECK_EQ_INT(rmq_batch_count(b), 3);
  add_text(b, "c2");
  rmq_batch_rollback_to(b, 2); /* opened with 3: the same place */
  CHECK_EQ_INT(rmq_batch_count(b), 3);
  rmq_batch_rollback_to(b, 3); /* closed by the rollback to 2: nothing */
  CHECK_EQ_INT(rmq_batch_count(b), 3);
  rmq_batch_rollback_to(b, 1);
  CHECK_EQ_INT(rmq_batch_count(b), 1);
  add_text(b, "d");
  rmq_batch_rollback_to(b, 1); /* the level stays open: roll back twice */
  add_text(b, "e");
  append_ok(b, 0);
  check_log(s, 0, 0, (const char *const[]){"a", "e", NULL});
  /* Level 0 of an emptied batch: everything since goes. */
  int64_t end = rmq_commitlog_max_offset(rmq_store_commitlog(s));
  add_text(b, "f");
  rmq_batch_rollback_to(b, 0);
  CHECK_EQ_INT(rmq_batch_count(b), 0);
  append_ok(b, -1);
  CHECK_EQ_INT(rmq_commitlog_max_offset(rmq_store_commitlog(s)), end);
  rmq_batch_free(b);
  rmq_store_close(s);
}

/* RELEASE closes a level and those above; their rows stay. */
static void test_release(const char *dir) {
  rmq_store *s = open_store(dir, SEG, 4096);
  rmq_batch *b = rmq_batch_new(s);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_batch_savepoint(b, 0, &err), RMQ_OK);
  add_text(b, "a");
  CHECK_EQ_INT(rmq_batch_savepoint(b, 1, &err), RMQ_OK);
  add_text(b, "b");
  CHECK_EQ_INT(rmq_batch_savepoint(b, 2, &err), RMQ_OK);
  add_text(b, "c");
  rmq_batch_release(b, 1);
  rmq_batch_rollback_to(b, 1); /* released: nothing */
  rmq_batch_rollback_to(b, 2);
  CHECK_EQ_INT(rmq_batch_count(b), 3);
  rmq_batch_rollback_to(b, 0);
  CHECK_EQ_INT(rmq_batch_count(b), 0);
  add_text(b, "d");
  rmq_batch_release(b, 0);
  rmq_batch_rollback_to(b, 0);
  append_ok(b, 0);
  check_log(s, 0, 0, (const char *const[]){"d", NULL});
  rmq_batch_free(b);
  rmq_store_close(s);
}

/*
** clear drops every row and leaves the open levels marking the empty
** batch, even when the chunks they named were given back.
*/
static void test_clear(const char *dir) {
  rmq_store *s = open_store(dir, 16 << 20, 1 << 20);
  rmq_batch *b = rmq_batch_new(s);
  rmq_err err = {0};
  add_text(b, "a");
  CHECK_EQ_INT(rmq_batch_savepoint(b, 0, &err), RMQ_OK);
  for (int i = 0; i < 5; i++) add_bytes(b, 'x', 1000000); /* a second chunk */
  rmq_batch_clear(b);
  CHECK_EQ_INT(rmq_batch_count(b), 0);
  add_text(b, "b");
  rmq_batch_rollback_to(b, 0);
  CHECK_EQ_INT(rmq_batch_count(b), 0);
  add_text(b, "c");
  append_ok(b, 0);
  check_log(s, 0, 0, (const char *const[]){"c", NULL});
  rmq_batch_free(b);
  rmq_store_close(s);
}

/* A message the store refuses leaves the batch as it was, in a fresh block too. */
static void test_encode_error(const char *dir) {
  rmq_store *s = open_store(dir, SEG, 4096);
  rmq_batch *b = rmq_batch_new(s);
  rmq_err err = {0};
  tu_msg t;
  char body[5000];
  memset(body, 'z', sizeof body);
  CHECK_EQ_INT(rmq_batch_add(b, tu_message(&t, "T", 0, body, sizeof body, ""), &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "max_message_size") != NULL);
  CHECK_EQ_INT(rmq_batch_count(b), 0);
  add_text(b, "a");
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_batch_add(b, tu_message(&t, "bad topic", 0, "x", 1, ""), &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "not a valid RocketMQ topic") != NULL);
  CHECK_EQ_INT(rmq_batch_count(b), 1);
  add_text(b, "b");
  append_ok(b, 0);
  check_log(s, 0, 0, (const char *const[]){"a", "b", NULL});
  rmq_batch_free(b);
  rmq_store_close(s);
}

/*
** Records larger than a staging chunk get a block of their own, around and
** between chunk-sized ones; more blocks than an append passes without
** allocating; a rollback gives such a block back.
*/
static void test_large_records(const char *dir) {
  int big = RMQ_STAGING_CHUNK + 100000, most = RMQ_STAGING_CHUNK - 300000;
  rmq_store *s = open_store(dir, 64 << 20, big);
  rmq_batch *b = rmq_batch_new(s);
  rmq_err err = {0};
  add_text(b, "a");
  add_bytes(b, 'B', big);
  add_text(b, "c");
  for (int i = 0; i < 4; i++) add_bytes(b, (char)('0' + i), most); /* a chunk each */
  CHECK_EQ_INT(rmq_batch_savepoint(b, 0, &err), RMQ_OK);
  add_bytes(b, 'D', big);
  rmq_batch_rollback_to(b, 0);
  CHECK_EQ_INT(rmq_batch_count(b), 7);
  add_text(b, "e");
  append_ok(b, 0);
  char bb[32], m[4][32];
  snprintf(bb, sizeof bb, "@B:%d", big);
  for (int i = 0; i < 4; i++) snprintf(m[i], sizeof m[i], "@%c:%d", '0' + i, most);
  check_log(s, 0, 0, (const char *const[]){"a", bb, "c", m[0], m[1], m[2], m[3], "e", NULL});
  rmq_batch_free(b);
  rmq_store_close(s);
}

/*
** An append that fails leaves the batch intact: too large for a segment
** (put again, then cut back and put), or a poisoned store.
*/
static void test_append_failure(const char *dir) {
  rmq_store *s = open_store(dir, SEG, SEG);
  rmq_commitlog *cl = rmq_store_commitlog(s);
  rmq_batch *b = rmq_batch_new(s);
  rmq_err err = {0};
  add_text(b, "a");
  CHECK_EQ_INT(rmq_batch_savepoint(b, 0, &err), RMQ_OK);
  for (int i = 0; i < 3; i++) add_bytes(b, 'r', SEG / 3);
  int64_t first;
  for (int attempt = 0; attempt < 2; attempt++) {
    rmq_err_clear(&err);
    CHECK_EQ_INT(rmq_batch_append(b, &first, &err), RMQ_EINVAL);
    CHECK(strstr(err.msg, "commitlog_file_size") != NULL);
    CHECK_EQ_INT(rmq_batch_count(b), 4);
    CHECK_EQ_INT(rmq_commitlog_max_offset(cl), 0);
  }
  rmq_batch_rollback_to(b, 0);
  add_text(b, "b");
  append_ok(b, 0);
  check_log(s, 0, 0, (const char *const[]){"a", "b", NULL});
  int64_t end = rmq_commitlog_max_offset(cl);
  add_text(b, "c");
  rmq_commitlog_poison(cl, "a test poisoned it");
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_batch_append(b, &first, &err), RMQ_EPOISONED);
  CHECK(strstr(err.msg, "a test poisoned it") != NULL);
  CHECK_EQ_INT(rmq_batch_count(b), 1);
  CHECK_EQ_INT(rmq_commitlog_max_offset(cl), end);
  rmq_batch_free(b);
  rmq_store_close(s);
}

/*
** A transaction larger than the block goes on in its memory file: levels
** opened before the block filled and after, cut back across the file's end
** and filled again over what was cut; a failed append (a poisoned store)
** leaves a spilled batch whole.
*/
static void test_spill(const char *dir) {
  enum { ROW = 100000 }; /* about 40 to a staging chunk */
  rmq_store *s = open_store(dir, 64 << 20, 1 << 20);
  rmq_commitlog *cl = rmq_store_commitlog(s);
  rmq_batch *b = rmq_batch_new(s);
  rmq_err err = {0};
  for (int i = 0; i < 30; i++) add_bytes(b, 'a', ROW);
  CHECK_EQ_INT(rmq_batch_savepoint(b, 0, &err), RMQ_OK);
  for (int i = 0; i < 50; i++) add_bytes(b, 'b', ROW);
  CHECK_EQ_INT(rmq_batch_savepoint(b, 1, &err), RMQ_OK);
  for (int i = 0; i < 50; i++) add_bytes(b, 'c', ROW);
  rmq_batch_rollback_to(b, 1);
  CHECK_EQ_INT(rmq_batch_count(b), 80);
  rmq_batch_rollback_to(b, 0);
  CHECK_EQ_INT(rmq_batch_count(b), 30);
  for (int i = 0; i < 60; i++) add_bytes(b, 'd', ROW);
  append_ok(b, 0);
  char a[16], d[16];
  snprintf(a, sizeof a, "@a:%d", ROW);
  snprintf(d, sizeof d, "@d:%d", ROW);
  const char *expected[91];
  for (int i = 0; i < 90; i++) expected[i] = i < 30 ? a : d;
  expected[90] = NULL;
  check_log(s, 0, 0, expected);
  int64_t end = rmq_commitlog_max_offset(cl);
  for (int i = 0; i < 50; i++) add_bytes(b, 'e', ROW);
  rmq_commitlog_poison(cl, "a test poisoned it");
  int64_t first;
  CHECK_EQ_INT(rmq_batch_append(b, &first, &err), RMQ_EPOISONED);
  CHECK_EQ_INT(rmq_batch_count(b), 50);
  CHECK_EQ_INT(rmq_commitlog_max_offset(cl), end);
  rmq_batch_free(b);
  rmq_store_close(s);
}

int main(void) {
  void (*tests[])(const char *) = {test_add_append,     test_rollback_to,  test_release,
                                   test_clear,          test_encode_error, test_large_records,
                                   test_append_failure, test_spill};
  for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
    char dir[64];
    tu_tmpdir(dir, sizeof dir);
    tests[i](dir);
    tu_rmrf(dir);
  }
  return check_report();
}
