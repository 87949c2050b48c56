/*
** test_verify.c: the integrity check of rmq.h (rmq_verify) where SQL
** cannot reach: a live store checked while a
** thread appends, a record's QUEUEOFFSET field and a consume-queue entry
** that leads into another queue, files named as no store names them, a
** callback that stops the check, and not a byte of the files changed.
*/
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"

#define SEG 65536
#define N 200
#define MAX_DEFECTS 16

typedef struct found {
  int n;
  char kind[MAX_DEFECTS][32];
  char file[MAX_DEFECTS][128];
  int64_t offset[MAX_DEFECTS];
} found;

static int collect(void *ctx, const rmq_defect *d) {
  found *f = ctx;
  if (f->n < MAX_DEFECTS) {
    snprintf(f->kind[f->n], sizeof f->kind[0], "%s", d->kind);
    snprintf(f->file[f->n], sizeof f->file[0], "%s", d->file);
    f->offset[f->n] = d->offset;
  }
  f->n++;
  return RMQ_OK;
}

static void verify(const char *dir, found *f) {
  rmq_err err = {0};
  memset(f, 0, sizeof *f);
  CHECK_EQ_INT(rmq_verify(dir, collect, f, &err), RMQ_OK);
}

/* N messages over two topics, two queues each, with keys; the put results in r. */
static void write_store(const char *dir, rmq_put_result *r) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t;
  char body[300] = {0};
  for (int i = 0; s && i < N; i++) {
    char kv[64];
    snprintf(kv, sizeof kv, "KEYS=k%d x%d;TAGS=t%d", i, i, i % 5);
    rmq_message *m = tu_message(&t, i % 2 ? "VerA" : "VerB", i % 4 / 2, body, 50 + i, kv);
    CHECK_EQ_INT(rmq_store_put(s, m, 1, &r[i], &err), RMQ_OK);
  }
  rmq_store_close(s);
}

/* -------------------------------------------------- the files stay as they were */

static uint64_t tree_sum;

static int sum_file(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)ftw;
  tree_sum = tree_sum * 31 + (uint64_t)st->st_size + (uint64_t)st->st_mtim.tv_nsec;
  if (type != FTW_F) return 0;
  int fd = open(path, O_RDONLY);
  uint8_t buf[4096];
  ssize_t got;
  while (fd >= 0 && (got = read(fd, buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < got; i++) tree_sum = (tree_sum ^ buf[i]) * 1099511628211u;
  }
  if (fd >= 0) close(fd);
  return 0;
}

static uint64_t tree_fingerprint(const char *dir) {
  tree_sum = 14695981039346656037u;
  nftw(dir, sum_file, 16, FTW_PHYS);
  return tree_sum;
}

static void test_sound(const char *dir) {
  uint64_t before = tree_fingerprint(dir);
  found f;
  verify(dir, &f);
  CHECK_EQ_INT(f.n, 0);
  CHECK(tree_fingerprint(dir) == before);
}

/* ------------------------------------------------------------ a live store */

typedef struct appender {
  rmq_store *s;
  atomic_bool done;
  int puts;
} appender;

static void *append_messages(void *p) {
  appender *a = p;
  tu_msg t;
  rmq_err err = {0};
  for (int i = 0; i < 3000; i++) {
    char kv[32];
    snprintf(kv, sizeof kv, "KEYS=live%d", i);
    if (rmq_store_put(a->s, tu_message(&t, "Live", i % 3, "a body", 6, kv), 1, NULL, &err) == 0) {
      a->puts++;
    }
  }
  atomic_store(&a->done, true);
  return NULL;
}

static void test_live(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_acquire(dir, &cfg, &s, &err), RMQ_OK);
  if (err.code) return;
  appender a = {.s = s};
  pthread_t th;
  pthread_create(&th, NULL, append_messages, &a);
  int rounds = 0, defects = 0, failed = 0;
  while (!atomic_load(&a.done) || rounds < 3) {
    found f = {0};
    failed += rmq_verify(dir, collect, &f, &err) != RMQ_OK;
    defects += f.n;
    for (int i = 0; i < f.n && i < MAX_DEFECTS; i++) {
      fprintf(stderr, "  %s %lld %s\n", f.file[i], (long long)f.offset[i], f.kind[i]);
    }
    rounds++;
  }
  pthread_join(th, NULL);
  CHECK_EQ_INT(a.puts, 3000);
  CHECK_EQ_INT(failed, 0);
  CHECK_EQ_INT(defects, 0);
  CHECK(rounds >= 3);
  rmq_store_release(s);
}

/* -------------------------------------------------------------- damage */

static void poke(const char *dir, const char *rel, int64_t at, const void *bytes, size_t n) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  int fd = open(path, O_WRONLY);
  CHECK(fd >= 0 && pwrite(fd, bytes, n, at) == (ssize_t)n);
  if (fd >= 0) close(fd);
}

static void put64(uint8_t *p, int64_t v) {
  for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

/*
** A record's QUEUEOFFSET (not in its body CRC) changed: no entry at the
** offset it claims, and its own entry leads to a record that says another.
*/
static void test_queue_offset_field(const char *dir, const rmq_put_result *r) {
  uint8_t qo[8];
  put64(qo, 77);
  poke(dir, "commitlog/00000000000000000000", r[5].physical_offset + 20, qo, 8);
  found f;
  verify(dir, &f);
  CHECK_EQ_INT(f.n, 2);
  CHECK_EQ_STR(f.kind[0], "cq_gap");
  CHECK_EQ_STR(f.file[0], "commitlog/00000000000000000000");
  CHECK_EQ_INT(f.offset[0], r[5].physical_offset);
  /* record 5: VerA, queue 0 */
  CHECK_EQ_STR(f.kind[1], "cq_queue_offset");
  CHECK_EQ_STR(f.file[1], "consumequeue/VerA/0/00000000000000000000");
  CHECK_EQ_INT(f.offset[1], r[5].queue_offset * 20);
}

/* An entry of VerB/0 that leads to a record of VerA/1, and one past the log. */
static void test_entry_elsewhere(const char *dir, const rmq_put_result *r) {
  uint8_t e[20] = {0};
  put64(e, r[3].physical_offset);
  e[8] = (uint8_t)(r[3].size >> 24), e[9] = (uint8_t)(r[3].size >> 16);
  e[10] = (uint8_t)(r[3].size >> 8), e[11] = (uint8_t)r[3].size;
  poke(dir, "consumequeue/VerB/0/00000000000000000000", 20, e, 20);
  put64(e, 1 << 28);
  poke(dir, "consumequeue/VerB/1/00000000000000000000", 40, e, 8);
  found f;
  verify(dir, &f);
  CHECK_EQ_INT(f.n, 2);
  CHECK_EQ_STR(f.kind[0], "cq_queue");
  CHECK_EQ_STR(f.kind[1], "cq_offset");
  CHECK_EQ_INT(f.offset[1], 40);
}

/* Names no store gives its files, and a checkpoint of the wrong size. */
static void test_names(const char *dir) {
  char path[4200];
  const char *made[] = {"commitlog/junk", "consumequeue/Bad Topic", "consumequeue/VerA/01",
                        "index/123"};
  for (int i = 0; i < 4; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, made[i]);
    CHECK(i % 2 ? mkdir(path, 0755) == 0 : close(open(path, O_CREAT | O_WRONLY, 0644)) == 0);
  }
  snprintf(path, sizeof path, "%s/checkpoint", dir);
  CHECK(truncate(path, 8192) == 0);
  found f;
  verify(dir, &f);
  CHECK_EQ_INT(f.n, 5);
  for (int i = 0; i < 4 && i < f.n; i++) {
    CHECK_EQ_STR(f.file[i], made[i]);
    CHECK_EQ_STR(f.kind[i], "file_name");
  }
  CHECK_EQ_STR(f.kind[4], "file_size");
}

static void write_config(const char *dir, const char *name, const char *text) {
  char path[4200];
  snprintf(path, sizeof path, "%s/config", dir);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/config/%s", dir, name);
  FILE *f = fopen(path, "wb");
  CHECK(f && fputs(text, f) >= 0);
  if (f) fclose(f);
}

/*
** Config files that a load would read no further than their .bak, or not
** at all: one row each, kind config, at the byte where the text breaks,
** after the rows of the store's other files. A damaged .bak beside a sound
** file is no defect (no load reads it); nothing is written.
*/
static void test_config_files(const char *dir) {
  write_config(dir, "consumerOffset.json", "{\"offsetTable\":{\"T@g\":{0:1");
  write_config(dir, "delayOffset.json", "{\"offsetTable\":{1:2}}");
  write_config(dir, "delayOffset.json.bak", "{\"offsetTable\":{1:");
  write_config(dir, "topics.json.bak", "{\"topicConfigTable\":{\"A B\":{}}}");
  char topics[4200];
  snprintf(topics, sizeof topics, "%s/config/topics.json", dir);
  CHECK(unlink(topics) == 0); /* a load then reads the .bak */
  uint64_t before = tree_fingerprint(dir);
  found f;
  verify(dir, &f);
  CHECK_EQ_INT(f.n, 2);
  CHECK_EQ_STR(f.kind[0], "config");
  CHECK_EQ_STR(f.file[0], "config/consumerOffset.json");
  CHECK_EQ_INT(f.offset[0], 26);
  CHECK_EQ_STR(f.kind[1], "config");
  CHECK_EQ_STR(f.file[1], "config/topics.json.bak");
  CHECK_EQ_INT(f.offset[1], 21);
  CHECK(tree_fingerprint(dir) == before);
}

static int stop_at_first(void *ctx, const rmq_defect *d) {
  (void)d;
  ++*(int *)ctx;
  return RMQ_ENOMEM;
}

static void test_stop(const char *dir) {
  int calls = 0;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_verify(dir, stop_at_first, &calls, &err), RMQ_ENOMEM);
  CHECK_EQ_INT(calls, 1);
}

int main(void) {
  char dir[64], live[64];
  rmq_put_result r[N];
  tu_tmpdir(dir, sizeof dir);
  write_store(dir, r);
  test_sound(dir);
  test_queue_offset_field(dir, r);
  tu_rmrf(dir);
  tu_tmpdir(dir, sizeof dir);
  write_store(dir, r);
  test_entry_elsewhere(dir, r);
  tu_rmrf(dir);
  tu_tmpdir(dir, sizeof dir);
  write_store(dir, r);
  test_names(dir);
  test_stop(dir);
  tu_rmrf(dir);
  tu_tmpdir(dir, sizeof dir);
  write_store(dir, r);
  test_config_files(dir);
  tu_rmrf(dir);
  tu_tmpdir(live, sizeof live);
  test_live(live);
  tu_rmrf(live);
  return check_report();
}
