/*
** test_many_queues.c: what a store holds open and takes on disk does not
** grow with its files the way it used to.
**
** Descriptors: consume-queue and index files keep none (their writer
** opens the file for each fallocate), nor does any file of a read-only
** store, so 1,100 queues open, write, reopen and open read-only under the
** default limit of 1,024 descriptors. A commit-log segment gives up its
** descriptor when loaded, unless it is the last one.
** Disk: consume-queue files and index items take blocks in steps as entries
** arrive, so a store with RocketMQ's 300,000 entries per consume-queue file
** and one message per queue does not take 6 MB per queue, nor its index
** file 64 MiB of items.
*/
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"

#define QUEUES 1100

static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (!d) return -1;
  while (readdir(d)) n++;
  closedir(d);
  return n - 3; /* ".", ".." and the directory's own descriptor */
}

static void put_each_queue(rmq_store *s, int queues) {
  int failed = 0;
  rmq_err err = {0};
  for (int q = 0; q < queues; q++) {
    tu_msg t;
    rmq_put_result r;
    if (rmq_store_put(s, tu_message(&t, "Many", q, "m", 1, "KEYS=k"), 1, &r, &err) != RMQ_OK &&
        failed++ == 0) {
      fprintf(stderr, "  put to queue %d: %s\n", q, err.msg);
    }
  }
  CHECK_EQ_INT(failed, 0);
  CHECK_EQ_INT(rmq_store_wait_dispatched(s, &err), RMQ_OK);
  if (err.code) fprintf(stderr, "  %s\n", err.msg);
}

static void test_descriptors(void) {
  struct rlimit lim;
  getrlimit(RLIMIT_NOFILE, &lim);
  struct rlimit low = {1024, lim.rlim_max};
  CHECK_EQ_INT(setrlimit(RLIMIT_NOFILE, &low), 0);
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  tu_small_config(&cfg, 1 << 20);
  rmq_store *s = tu_open(dir, &cfg);
  if (s) {
    put_each_queue(s, QUEUES);
    printf("%d descriptors open with %d queues written\n", open_fds(), QUEUES);
    CHECK(open_fds() < 64);
    rmq_store_close(s);
  }
  /* Reopen: recovery loads every queue. */
  s = tu_open(dir, &cfg);
  if (s) {
    CHECK(open_fds() < 64);
    put_each_queue(s, QUEUES);
    rmq_store_close(s);
  }
  cfg.readonly = true;
  s = tu_open(dir, &cfg);
  if (s) {
    rmq_consume_queue *cq = rmq_cq_table_find(rmq_store_consume_queues(s), "Many", QUEUES - 1);
    CHECK(cq && rmq_cq_max_offset(cq) == 2);
    CHECK(open_fds() < 16);
    rmq_store_close(s);
  }
  setrlimit(RLIMIT_NOFILE, &lim);
  tu_rmrf(dir);
}

/*
** A store holds a descriptor for its last commit-log segment only (and the
** one made ahead), while it writes segment after segment and once reopened.
*/
static void test_segments(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  tu_small_config(&cfg, 4096);
  static char body[3000];
  rmq_store *s = tu_open(dir, &cfg);
  for (int i = 0; s && i < 300; i++) {
    tu_msg t;
    rmq_put_result r;
    rmq_err err = {0};
    rmq_store_put(s, tu_message(&t, "Seg", 0, body, sizeof body, NULL), 1, &r, &err);
  }
  if (s) {
    printf("%d descriptors open after writing 300 commit-log segments\n", open_fds());
    CHECK(open_fds() < 64);
    rmq_store_close(s);
  }
  s = tu_open(dir, &cfg);
  if (s) {
    printf("%d descriptors open with 300 commit-log segments\n", open_fds());
    CHECK(open_fds() < 64);
    rmq_store_close(s);
  }
  tu_rmrf(dir);
}

/* Bytes of disk the files under dir take (st_blocks). */
static int64_t disk_bytes(const char *dir) {
  int64_t total = 0;
  DIR *d = opendir(dir);
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (lstat(path, &st) != 0) continue;
    total += S_ISDIR(st.st_mode) ? disk_bytes(path) : (int64_t)st.st_blocks * 512;
  }
  closedir(d);
  return total;
}

static void test_queue_disk(void) {
  char dir[64], cq_dir[96];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  tu_small_config(&cfg, 1 << 20);
  cfg.consumequeue_entries = 300000; /* RocketMQ's: 6,000,000-byte files */
  cfg.index_slots = 5000000;         /* and 20,000,000 entries: 420,000,040 bytes */
  cfg.index_entries = 20000000;
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  put_each_queue(s, 8);
  snprintf(cq_dir, sizeof cq_dir, "%s/consumequeue", dir);
  int64_t used = disk_bytes(cq_dir);
  printf("8 consume queues of one message take %lld bytes of disk\n", (long long)used);
  CHECK(used <= 8 * (128 << 10));
  /* The index takes its slot table (20,000,040 bytes) and one step of items. */
  snprintf(cq_dir, sizeof cq_dir, "%s/index", dir);
  used = disk_bytes(cq_dir);
  printf("the index file takes %lld bytes of disk\n", (long long)used);
  CHECK(used <= 20000040 + (2 << 20));
  rmq_store_close(s);
  tu_rmrf(dir);
}

int main(void) {
  test_descriptors();
  test_segments();
  test_queue_disk();
  return check_report();
}
