/*
** test_store.c: the store's lock, abort file, recovery of a damaged tail,
** and its answers to failing and slow I/O (injected through io.h).
*/
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "io.h"
#include "testutil.h"

#define SEG 65536

static bool exists(const char *dir, const char *name) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return access(p, F_OK) == 0;
}

/* This program, for a child that runs it again. */
static const char *self_path;

static void test_lock_and_abort(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  CHECK(exists(dir, "abort"));
  CHECK(exists(dir, "checkpoint"));
  /*
  ** Another process's writable open follows this one: its put lands in this
  ** store. The child runs this program again (a fork of a threaded process
  ** may not start threads under TSan).
  */
  pid_t pid = fork();
  if (pid == 0) {
    execl(self_path, self_path, "--follow", dir, (char *)NULL);
    _exit(2);
  }
  int status;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  rmq_err we = {0};
  CHECK_EQ_INT(rmq_store_wait_dispatched(s, &we), RMQ_OK);
  rmq_consume_queue *cq = rmq_store_find_queue(s, "Child", 0);
  CHECK(cq && rmq_cq_max_offset(cq) == 1);
  /* A read-only open takes no lock and is allowed. */
  pid = fork();
  if (pid == 0) {
    rmq_config ro = cfg;
    ro.readonly = true;
    rmq_store *s2;
    rmq_err e2 = {0};
    int rc = rmq_store_open(dir, &ro, &s2, &e2);
    if (rc == RMQ_OK) rmq_store_close(s2);
    _exit(rc == RMQ_OK ? 0 : 1);
  }
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  rmq_store_close(s);
  CHECK(!exists(dir, "abort"));
  char lock[256];
  snprintf(lock, sizeof lock, "%s/lock", dir);
  int fd = open(lock, O_RDONLY);
  char b[5] = {0};
  CHECK_EQ_INT(read(fd, b, 4), 4);
  CHECK_EQ_STR(b, "lock");
  close(fd);
}

/* A repair in a child: 0 when it finds the store open (locked) elsewhere. */
static int child_finds_locked(const char *dir) {
  pid_t pid = fork();
  if (pid == 0) {
    rmq_err e = {0};
    int64_t moved;
    _exit(rmq_store_repair(dir, &moved, &e) == RMQ_ELOCKED ? 0 : 1);
  }
  int status;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}

/*
** Two engines of one process on one store: the second follows the first,
** takes its services over when it closes, and holds the store as long as
** it is open.
*/
static void test_lock_in_process(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg), *s2 = NULL;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_open(dir, &cfg, &s2, &err), RMQ_OK);
  CHECK(s2 && rmq_store_is_follower(s2) && !rmq_store_is_follower(s));
  tu_msg t;
  rmq_put_result r;
  CHECK_EQ_INT(rmq_store_put(s2, tu_message(&t, "Two", 0, "x", 1, NULL), 1, &r, &err), RMQ_OK);
  CHECK_EQ_INT(child_finds_locked(dir), 0);
  rmq_store_close(s);
  /* The follower takes over: its next put is served in this process. */
  CHECK_EQ_INT(rmq_store_put(s2, tu_message(&t, "Two", 0, "y", 1, NULL), 1, &r, &err), RMQ_OK);
  CHECK_EQ_INT(r.queue_offset, 1);
  CHECK_EQ_INT(child_finds_locked(dir), 0);
  rmq_store_close(s2);
  CHECK_EQ_INT(child_finds_locked(dir), 1);
}

/* Tear the last record and scribble garbage after it: recovery cuts at the last good record. */
static void test_damaged_tail(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t;
  rmq_put_result r[5];
  for (int i = 0; i < 5; i++) {
    CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "Tail", 0, "0123456789", 10, ""), 1, &r[i], &err),
                 RMQ_OK);
  }
  rmq_store_close(s);
  char seg[256], abort_path[256];
  snprintf(seg, sizeof seg, "%s/commitlog/00000000000000000000", dir);
  snprintf(abort_path, sizeof abort_path, "%s/abort", dir);
  int fd = open(seg, O_RDWR);
  CHECK(pwrite(fd, "XX", 2, r[4].physical_offset + 90) == 2); /* inside the last body */
  CHECK(pwrite(fd, "garbage", 7, r[4].physical_offset + r[4].size + 100) == 7);
  close(fd);
  close(open(abort_path, O_CREAT | O_WRONLY, 0644)); /* as after a crash */
  s = tu_open(dir, &cfg);
  CHECK_EQ_INT(rmq_commitlog_max_offset(rmq_store_commitlog(s)), r[4].physical_offset);
  const char *rep = rmq_store_recovery_report(s);
  CHECK(strstr(rep, "abnormal recovery") != NULL);
  CHECK(strstr(rep, "damaged record was cut off (BAD_CRC)") != NULL);
  char off[32];
  snprintf(off, sizeof off, "offset %lld", (long long)r[4].physical_offset);
  CHECK(strstr(rep, off) != NULL);
  /* What was cut is in damaged/<time>/, named by its offset: the torn record up to the garbage. */
  CHECK(strstr(rep, "moved to damaged/") != NULL);
  char pattern[300];
  snprintf(pattern, sizeof pattern, "%s/damaged/*/%020lld", dir, (long long)r[4].physical_offset);
  glob_t g;
  CHECK_EQ_INT(glob(pattern, 0, NULL, &g), 0);
  struct stat st;
  CHECK(g.gl_pathc == 1 && stat(g.gl_pathv[0], &st) == 0 && st.st_size == r[4].size + 100 + 7);
  globfree(&g);
  /* The next put goes where the damaged record was. */
  rmq_put_result n;
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "Tail", 0, "new", 3, ""), 1, &n, &err), RMQ_OK);
  CHECK_EQ_INT(n.physical_offset, r[4].physical_offset);
  CHECK_EQ_INT(n.queue_offset, 4);
  rmq_store_close(s);

  /* A crash between creating a file and sizing it leaves empty files: they read as empty. */
  char empty[256];
  snprintf(empty, sizeof empty, "%s/commitlog/00000000000000065536", dir);
  close(open(empty, O_CREAT | O_WRONLY, 0644));
  snprintf(empty, sizeof empty, "%s/consumequeue/Tail/0/00000000000000002000", dir);
  close(open(empty, O_CREAT | O_WRONLY, 0644));
  close(open(abort_path, O_CREAT | O_WRONLY, 0644));
  rmq_err_clear(&err);
  s = tu_open(dir, &cfg);
  CHECK_EQ_INT(rmq_commitlog_max_offset(rmq_store_commitlog(s)), n.physical_offset + n.size);
  CHECK(access(empty, F_OK) != 0);
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "Tail", 0, "more", 4, ""), 1, &n, &err), RMQ_OK);
  CHECK_EQ_INT(n.queue_offset, 5);
  rmq_store_close(s);
}

/*
** After a crash, a bad record stored before the checkpoint's
** physicMsgTimestamp, with sound records after it, is damage, not a torn
** tail: the open fails and changes nothing; a repair moves it aside.
*/
static void test_damage_before_checkpoint(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t;
  rmq_put_result r[5];
  for (int i = 0; i < 5; i++) {
    usleep(3000); /* each record its own store time */
    CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "Dmg", 0, "0123456789", 10, ""), 1, &r[i], &err),
                 RMQ_OK);
  }
  rmq_store_close(s); /* the checkpoint holds r[4]'s store time */
  char seg[256], abort_path[256];
  snprintf(seg, sizeof seg, "%s/commitlog/00000000000000000000", dir);
  snprintf(abort_path, sizeof abort_path, "%s/abort", dir);
  int fd = open(seg, O_RDWR);
  CHECK(pwrite(fd, "XX", 2, r[1].physical_offset + 90) == 2); /* inside the body */
  close(fd);
  close(open(abort_path, O_CREAT | O_WRONLY, 0644));
  CHECK_EQ_INT(rmq_store_open(dir, &cfg, &s, &err), RMQ_ECORRUPT);
  char want[400];
  snprintf(want, sizeof want, "%s is damaged at offset %lld (BAD_CRC); 3 sound record(s) follow;",
           seg, (long long)r[1].physical_offset);
  CHECK(strstr(err.msg, want) != NULL);
  int64_t moved = 0;
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_store_repair(dir, &moved, &err), RMQ_OK);
  CHECK_EQ_INT(moved, r[4].physical_offset + r[4].size - r[1].physical_offset);
  s = tu_open(dir, &cfg);
  if (s) CHECK_EQ_INT(rmq_commitlog_max_offset(rmq_store_commitlog(s)), r[1].physical_offset);
  rmq_store_close(s);
}

/* A failed fsync fails the waiting put, then every put, until the store is reopened. */
static void test_fsync_failure(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  cfg.flush_sync = true;
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t;
  rmq_put_result r;
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "F", 0, "ok", 2, ""), 1, &r, &err), RMQ_OK);
  rmq_io_fault(RMQ_IO_MSYNC, 1, EIO, -1);
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "F", 0, "lost?", 5, ""), 1, &r, &err), RMQ_EIO);
  CHECK(strstr(err.msg, "flush to disk failed") && strstr(err.msg, "Input/output error"));
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "F", 0, "next", 4, ""), 1, &r, &err), RMQ_EPOISONED);
  CHECK(strstr(err.msg, "reopened") != NULL);
  rmq_store_close(s);
  CHECK(exists(dir, "abort")); /* not a clean shutdown */
  rmq_err_clear(&err);
  s = tu_open(dir, &cfg);
  CHECK(strstr(rmq_store_recovery_report(s), "abnormal") != NULL);
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "F", 0, "again", 5, ""), 1, &r, &err), RMQ_OK);
  rmq_store_close(s);
}

/* A flush slower than sync_flush_timeout_ms is an error, never a success. */
static void test_flush_timeout(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  cfg.flush_sync = true;
  cfg.sync_flush_timeout_ms = 200;
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t;
  rmq_put_result r;
  rmq_io_stall(RMQ_IO_MSYNC, 1, 1000);
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "S", 0, "slow", 4, ""), 1, &r, &err), RMQ_ETIMEOUT);
  CHECK(strstr(err.msg, "sync_flush_timeout_ms") != NULL);
  usleep(1000 * 1000); /* the stalled flush ends; the next put is served at once */
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "S", 0, "fast", 4, ""), 1, &r, &err), RMQ_OK);
  CHECK(rmq_commitlog_flushed_offset(rmq_store_commitlog(s)) >= r.physical_offset + r.size);
  rmq_store_close(s);
}

/*
** A message whose WAIT property is false does not wait for the disk
** (CommitLog.handleDiskFlush's isWaitStoreMsgOK): with a flush stalled past
** sync_flush_timeout_ms it returns at once, readable, and the group commit
** forces it later; WAIT=TRUE (any case) and a batch with one waiting row wait.
*/
static void test_wait_false(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  cfg.flush_sync = true;
  cfg.sync_flush_timeout_ms = 200;
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t;
  rmq_put_result r;
  rmq_io_stall(RMQ_IO_MSYNC, 1, 1000);
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "W", 0, "nowait", 6, "WAIT=false"), 1, &r, &err),
               RMQ_OK);
  int64_t end = r.physical_offset + r.size;
  rmq_commitlog_ref ref = {0};
  rmq_message m;
  CHECK_EQ_INT(rmq_store_read(s, r.physical_offset, &ref, &m, &err), RMQ_OK);
  CHECK(m.body_len == 6 && memcmp(m.body, "nowait", 6) == 0);
  rmq_commitlog_ref_release(&ref);
  CHECK(rmq_commitlog_flushed_offset(rmq_store_commitlog(s)) < end);
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "W", 0, "wait", 4, "WAIT=TRUE"), 1, &r, &err),
               RMQ_ETIMEOUT);
  usleep(1100 * 1000); /* the stalled flush ends: nobody waited for it, and it forced both */
  CHECK(rmq_commitlog_flushed_offset(rmq_store_commitlog(s)) >= r.physical_offset + r.size);
  /* A batch waits when one of its rows does. */
  rmq_batch *b = rmq_batch_new(s);
  int64_t first;
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_batch_add(b, tu_message(&t, "W", 0, "b1", 2, "WAIT=false"), &err), RMQ_OK);
  CHECK_EQ_INT(rmq_batch_add(b, tu_message(&t, "W", 0, "b2", 2, NULL), &err), RMQ_OK);
  CHECK(rmq_batch_waits(b));
  rmq_batch_clear(b);
  CHECK(!rmq_batch_waits(b));
  /* A batch of rows that do not wait returns while the group commit is stalled on it. */
  CHECK_EQ_INT(rmq_batch_add(b, tu_message(&t, "W", 0, "b3", 2, "WAIT=no"), &err), RMQ_OK);
  CHECK(!rmq_batch_waits(b));
  rmq_io_stall(RMQ_IO_MSYNC, 1, 1000);
  CHECK_EQ_INT(rmq_batch_append(b, &first, &err), RMQ_OK);
  CHECK(first > 0 && rmq_commitlog_flushed_offset(rmq_store_commitlog(s)) <= first);
  /* One that waits, behind it, times out. */
  CHECK_EQ_INT(rmq_batch_add(b, tu_message(&t, "W", 0, "b4", 2, NULL), &err), RMQ_OK);
  CHECK_EQ_INT(rmq_batch_append(b, &first, &err), RMQ_ETIMEOUT);
  CHECK(!rmq_batch_waits(b)); /* appended: cleared */
  rmq_batch_free(b);
  usleep(1100 * 1000);
  rmq_store_close(s);
}

/*
** WAIT=false through the owner: an owner with transient_store_pool makes a
** follower's puts itself. The follower asked for flush='sync', the owner
** flushes only when told (a long flush interval): a put that waits returns
** flushed, one that does not returns before any flush.
*/
static void test_wait_false_forwarded(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  cfg.transient_store_pool = 2;
  cfg.flush_interval_ms = 600000;
  rmq_store *s = tu_open(dir, &cfg), *s2 = NULL;
  rmq_config fcfg = cfg;
  fcfg.flush_sync = true;
  fcfg.transient_store_pool = 0;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_open(dir, &fcfg, &s2, &err), RMQ_OK);
  CHECK(s2 && rmq_store_is_follower(s2));
  tu_msg t;
  rmq_put_result r;
  rmq_commitlog *cl = rmq_store_commitlog(s);
  CHECK_EQ_INT(rmq_store_put(s2, tu_message(&t, "F", 0, "nowait", 6, "WAIT=false"), 1, &r, &err),
               RMQ_OK);
  CHECK(rmq_commitlog_flushed_offset(cl) < r.physical_offset + r.size);
  CHECK_EQ_INT(rmq_store_put(s2, tu_message(&t, "F", 0, "wait", 4, NULL), 1, &r, &err), RMQ_OK);
  CHECK(rmq_commitlog_flushed_offset(cl) >= r.physical_offset + r.size);
  rmq_store_close(s2);
  rmq_store_close(s);
}

/* A segment that cannot be created fails the put with the path; nothing is half-written. */
static void test_open_failure(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t;
  rmq_put_result r;
  rmq_io_fault(RMQ_IO_FTRUNCATE, 1, ENOSPC, -1);
  CHECK(rmq_store_put(s, tu_message(&t, "N", 0, "x", 1, ""), 1, &r, &err) != RMQ_OK);
  CHECK(strstr(err.msg, "No space left on device") != NULL);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "N", 0, "x", 1, ""), 1, &r, &err), RMQ_OK);
  CHECK_EQ_INT(r.queue_offset, 0);
  rmq_store_close(s);
}

/* A new segment's directory entry is synced; when that fails the put says so and appends nothing. */
static void test_dir_sync_failure(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t;
  rmq_put_result r;
  rmq_io_fault(RMQ_IO_FSYNC, 1, EIO, -1);
  CHECK(rmq_store_put(s, tu_message(&t, "D", 0, "x", 1, ""), 1, &r, &err) != RMQ_OK);
  CHECK(strstr(err.msg, "cannot sync directory") != NULL);
  CHECK(strstr(err.msg, "/commitlog: Input/output error") != NULL);
  CHECK_EQ_INT(rmq_commitlog_max_offset(rmq_store_commitlog(s)), 0);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "D", 0, "x", 1, ""), 1, &r, &err), RMQ_OK);
  CHECK_EQ_INT(r.physical_offset, 0);
  rmq_store_close(s);
}

/* Bytes of disk the file at dir/commitlog/name has allocated. */
static long long allocated(const char *dir, const char *name) {
  char p[256];
  struct stat st;
  snprintf(p, sizeof p, "%s/commitlog/%s", dir, name);
  return stat(p, &st) == 0 ? (long long)st.st_blocks * 512 : -1;
}

/*
** The writer allocates a segment's disk blocks before writing into it: a full
** disk fails that put with RMQ_EFULL and appends nothing (a sparse mapping
** would raise SIGBUS instead), and a file system without fallocate is used
** sparse.
*/
static void test_disk_reservation(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t;
  rmq_put_result r;
  rmq_io_fault(RMQ_IO_FALLOCATE, 1, ENOSPC, -1);
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "F", 0, "x", 1, ""), 1, &r, &err), RMQ_EFULL);
  CHECK(strstr(err.msg, "cannot allocate disk space for ") != NULL);
  CHECK(strstr(err.msg, "00000000000000000000 bytes 0..65536: No space left on device") != NULL);
  CHECK_EQ_INT(rmq_commitlog_max_offset(rmq_store_commitlog(s)), 0);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "F", 0, "x", 1, ""), 1, &r, &err), RMQ_OK);
  CHECK_EQ_INT(r.physical_offset, 0);
  CHECK_EQ_INT(r.queue_offset, 0);
  CHECK_EQ_INT(allocated(dir, "00000000000000000000"), SEG);
  /* The next segment (if created yet) is reserved when the writer rolls into it, not before. */
  CHECK(allocated(dir, "00000000000000065536") <= 0);
  rmq_io_fault(RMQ_IO_FALLOCATE, 1, EOPNOTSUPP, -1);
  static char body[SEG / 2];
  memset(body, 'b', sizeof body);
  for (int i = 0; i < 2; i++) {
    CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "F", 0, body, sizeof body, ""), 1, &r, &err),
                 RMQ_OK);
  }
  CHECK_EQ_INT(r.physical_offset, SEG);
  rmq_store_close(s);
}

/*
** The dispatcher reserves its files too: a disk that is full when a consume
** queue file is created stops dispatch with the reason, and the store then
** refuses writes (fail-stop), where writing through a sparse mapping would
** have raised SIGBUS in the dispatch thread.
*/
static void dispatch_disk_full(const char *dir, int nth, const char *file) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t;
  rmq_put_result r;
  rmq_io_fault(RMQ_IO_FALLOCATE, nth, ENOSPC, -1);
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "Q", 0, "x", 1, "KEYS=k"), 1, &r, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_reput_wait_for(rmq_store_reput(s), r.physical_offset + r.size, 5000, &err),
               RMQ_EPOISONED);
  CHECK(strstr(err.msg, "dispatch stopped: dispatch to the consume queues and index failed: "
                        "cannot allocate disk space for ") != NULL);
  CHECK(strstr(err.msg, file) != NULL);
  CHECK(strstr(err.msg, ": No space left on device") != NULL);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "Q", 0, "y", 1, ""), 1, &r, &err), RMQ_EPOISONED);
  rmq_store_close(s);
}

/* Fallocate calls: the commit log's, the new consume queue file's, the new index file's. */
static void test_dispatch_disk_full(const char *dir) {
  dispatch_disk_full(dir, 2, "/consumequeue/Q/0/00000000000000000000 bytes 0..2000");
  tu_rmrf(dir);
  dispatch_disk_full(dir, 3, "/index/");
}

/* Encode message m at buf's end (len bytes used so far of cap). */
static void encode_into(rmq_store *s, const rmq_message *m, uint8_t *buf, size_t *len, size_t cap) {
  rmq_err err = {0};
  int32_t n = rmq_store_encode(s, m, buf + *len, cap - *len, &err);
  CHECK(n > 0 && (size_t)n <= cap - *len);
  if (n > 0 && (size_t)n <= cap - *len) *len += (size_t)n;
}

/*
** Have the allocation thread map the first segment, as a transaction's
** first row does: a batch is then copied through the mapping, not written.
*/
static void populate_first_segment(rmq_store *s) {
  rmq_commitlog *cl = rmq_store_commitlog(s);
  rmq_commitlog_prepare_segment(cl);
  rmq_mapped_file *mf = rmq_mfq_last(&cl->mfq);
  CHECK(mf != NULL);
  if (!mf) return;
  for (int i = 0; i < 500 && atomic_load(&mf->populated_position) < mf->file_size; i++) {
    usleep(10000);
  }
  CHECK_EQ_INT(atomic_load(&mf->populated_position), mf->file_size);
  rmq_mapped_file_release(mf);
}

/*
** Records encoded ahead and put as one batch from two spans read back as
** rmq_store_put would have written them: offsets per queue, the physical
** offset, the store time, a delayed message rewritten; a second batch
** continues where the first ended.
*/
static void put_encoded(const char *dir, bool populated) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  if (populated) populate_first_segment(s);
  rmq_commitlog *cl = rmq_store_commitlog(s);
  rmq_err err = {0};
  static uint8_t a[4096], b[4096];
  size_t alen = 0, blen = 0;
  tu_msg t;
  /* Too little room: the length comes back, nothing is written. */
  a[0] = 0x5a;
  int32_t need = rmq_store_encode(s, tu_message(&t, "P", 0, "b0", 2, "KEYS=x"), a, 10, &err);
  CHECK_EQ_INT(need, rmq_message_length(0, 2, 1, 6, false)); /* KEYS\1x */
  CHECK_EQ_INT(a[0], 0x5a);
  char body[5][16];
  for (int round = 0; round < 2; round++) {
    alen = blen = 0;
    for (int i = 0; i < 5; i++) {
      snprintf(body[i], sizeof body[i], "b%d", i);
      const rmq_message *m = tu_message(&t, "P", i % 2, body[i], (int)strlen(body[i]),
                                        i == 3 ? "DELAY=2" : "KEYS=x");
      if (i < 2)
        encode_into(s, m, a, &alen, sizeof a);
      else
        encode_into(s, m, b, &blen, sizeof b);
    }
    rmq_span spans[2] = {{a, alen}, {b, blen}};
    int64_t first = -1;
    int64_t before = rmq_commitlog_max_offset(cl);
    CHECK_EQ_INT(rmq_store_put_encoded(s, spans, 2, 5, &first, &err), RMQ_OK);
    CHECK_EQ_INT(first, before);
    CHECK_EQ_INT(rmq_commitlog_max_offset(cl), before + (int64_t)(alen + blen));
    int64_t offset = first;
    for (int i = 0; i < 5; i++) {
      rmq_commitlog_ref ref;
      rmq_message m;
      CHECK_EQ_INT(rmq_commitlog_read_message(cl, offset, true, &ref, &m, &err), RMQ_OK);
      CHECK(m.body_len == (int)strlen(body[i]) && memcmp(m.body, body[i], strlen(body[i])) == 0);
      const char *topic = i == 3 ? "SCHEDULE_TOPIC_XXXX" : "P";
      CHECK(m.topic_len == (int)strlen(topic) && memcmp(m.topic, topic, strlen(topic)) == 0);
      CHECK_EQ_INT(m.queue_id, i == 3 ? 1 : i % 2);
      /* Queue 0 gets messages 0, 2, 4 of each round; queue 1 gets 1; delay level 2 gets 3. */
      int64_t expected = i == 3 ? round : i == 1 ? round : 3 * round + i / 2;
      CHECK_EQ_INT(m.queue_offset, expected);
      CHECK_EQ_INT(m.physical_offset, offset);
      CHECK(m.store_timestamp > 0);
      offset += m.total_size;
      rmq_commitlog_ref_release(&ref);
    }
  }
  rmq_store_close(s);
}

/*
** A batch that fails leaves the spans fit to be put again: too large for a
** segment (nothing written), or holding a record the store did not encode
** (queue offsets given back, nothing published, the bytes copied zeroed).
*/
static void put_encoded_failures(const char *dir, bool populated) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  if (populated) populate_first_segment(s);
  rmq_commitlog *cl = rmq_store_commitlog(s);
  rmq_err err = {0};
  static char body[SEG / 3];
  memset(body, 'r', sizeof body);
  static uint8_t buf[SEG + SEG / 2];
  size_t len = 0;
  tu_msg t;
  for (int i = 0; i < 3; i++) {
    encode_into(s, tu_message(&t, "R", 0, body, sizeof body, i == 1 ? "DELAY=2" : ""), buf, &len,
                sizeof buf);
  }
  int64_t first;
  rmq_span all = {buf, len};
  CHECK_EQ_INT(rmq_store_put_encoded(s, &all, 1, 3, &first, &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "commitlog_file_size") != NULL);
  CHECK_EQ_INT(rmq_commitlog_max_offset(cl), 0);
  rmq_err_clear(&err);
  /* One good span, then garbage: the first span's offsets are given back. */
  static uint8_t junk[200];
  memset(junk, 0x11, sizeof junk);
  size_t one = (size_t)rmq_get32(buf);
  rmq_span bad[2] = {{buf, one}, {junk, sizeof junk}};
  CHECK_EQ_INT(rmq_store_put_encoded(s, bad, 2, 2, &first, &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "did not encode") != NULL);
  CHECK_EQ_INT(rmq_commitlog_max_offset(cl), 0);
  rmq_err_clear(&err);
  rmq_commitlog_ref ref;
  rmq_message m;
  CHECK(rmq_commitlog_read_message(cl, 0, true, &ref, &m, &err) != RMQ_OK);
  rmq_err_clear(&err);
  /* The first two, as they were: offsets from 0 again. */
  size_t two = one + (size_t)rmq_get32(buf + one);
  rmq_span good = {buf, two};
  CHECK_EQ_INT(rmq_store_put_encoded(s, &good, 1, 2, &first, &err), RMQ_OK);
  CHECK_EQ_INT(first, 0);
  CHECK_EQ_INT(rmq_commitlog_read_message(cl, 0, true, &ref, &m, &err), RMQ_OK);
  CHECK_EQ_INT(m.queue_offset, 0);
  rmq_commitlog_ref_release(&ref);
  CHECK_EQ_INT(rmq_commitlog_read_message(cl, (int64_t)one, true, &ref, &m, &err), RMQ_OK);
  CHECK(m.topic_len == 19 && memcmp(m.topic, "SCHEDULE_TOPIC_XXXX", 19) == 0);
  CHECK_EQ_INT(m.queue_id, 1);
  CHECK_EQ_INT(m.queue_offset, 0);
  rmq_commitlog_ref_release(&ref);
  rmq_store_close(s);
}

static void test_put_encoded(const char *dir) { put_encoded(dir, false); }
static void test_put_encoded_populated(const char *dir) { put_encoded(dir, true); }
static void test_put_encoded_failures(const char *dir) { put_encoded_failures(dir, false); }
static void test_put_encoded_failures_populated(const char *dir) {
  put_encoded_failures(dir, true);
}

/* Write text as <dir>/config/<name>. */
static void write_config(const char *dir, const char *name, const char *text) {
  char path[300];
  snprintf(path, sizeof path, "%s/config/%s", dir, name);
  FILE *f = fopen(path, "wb");
  CHECK(f && fputs(text, f) >= 0);
  if (f) fclose(f);
}

static char *read_config(const char *dir, const char *name) {
  char path[300];
  snprintf(path, sizeof path, "%s/config/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *text = calloc(1, 1 << 16);
  if (text && fread(text, 1, (1 << 16) - 1, f) == 0) text[0] = '\0';
  fclose(f);
  return text;
}

typedef struct topic_list {
  rmq_topic_config t[8];
  int n;
} topic_list;

static int add_topic(void *ctx, const rmq_topic_config *t) {
  topic_list *l = ctx;
  if (l->n < 8) l->t[l->n++] = *t;
  return RMQ_OK;
}

static int32_t queues_of(const topic_list *l, const char *topic) {
  for (int i = 0; i < l->n; i++) {
    if (strcmp(l->t[i].topic, topic) == 0) return l->t[i].read_queues;
  }
  return -1;
}

/*
** topics.json and its .bak damaged: the open moves both into damaged/,
** writes the file again from the consume queues, each topic with its
** highest queue id + 1, and says so in the recovery report.
*/
static void test_topics_rebuilt(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  tu_msg t;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "A", 2, "a", 1, ""), 1, NULL, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "B", 0, "b", 1, ""), 1, NULL, &err), RMQ_OK);
  rmq_store_close(s);
  write_config(dir, "topics.json", "{\"topicConfigTable\":{\"A\":{\"perm\":x");
  write_config(dir, "topics.json.bak", "garbage");

  s = tu_open(dir, &cfg);
  if (!s) return;
  const char *rep = rmq_store_recovery_report(s);
  CHECK(strstr(rep, "; config/topics.json and its .bak did not parse (offset 33: expected an "
                    "integer, found 'x'): moved to damaged/") != NULL);
  CHECK(strstr(rep, "/ and rebuilt from the consume queues") != NULL);
  rmq_store_close(s);
  char pattern[300];
  snprintf(pattern, sizeof pattern, "%s/damaged/*/topics.json*", dir);
  glob_t g;
  CHECK_EQ_INT(glob(pattern, 0, NULL, &g), 0);
  CHECK_EQ_INT(g.gl_pathc, 2);
  globfree(&g);
  char *text = read_config(dir, "topics.json");
  topic_list l = {.n = 0};
  CHECK(text && rmq_topic_configs_parse(text, strlen(text), add_topic, &l, &err) == RMQ_OK);
  free(text);
  CHECK_EQ_INT(l.n, 3);
  CHECK_EQ_INT(queues_of(&l, "A"), 3);
  CHECK_EQ_INT(queues_of(&l, "B"), 1);
  CHECK_EQ_INT(queues_of(&l, "SCHEDULE_TOPIC_XXXX"), 18);
}

/*
** delayOffset.json that neither it nor its .bak parses: the writable open
** fails naming rocketmq_repair (delivering every delayed message again is
** no way out); the repair keeps the levels that still read.
*/
static void test_delay_offsets_repaired(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  rmq_store_close(s);
  write_config(dir, "delayOffset.json", "{\"offsetTable\":{1:5,2:7,3:x}}");
  write_config(dir, "delayOffset.json.bak", "{\"offsetTable\":{");
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_open(dir, &cfg, &s, &err), RMQ_ECORRUPT);
  char want[600];
  snprintf(want, sizeof want,
           "%s/config/delayOffset.json: offset 26: expected an integer, found 'x'; and "
           "%s/config/delayOffset.json.bak: offset 16: expected a key, found the end of the "
           "text; run SELECT rocketmq_repair('%s') to move it aside into %s/damaged/ keeping the "
           "entries that still read",
           dir, dir, dir, dir);
  CHECK_EQ_STR(err.msg, want);
  int64_t moved = 0;
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_store_repair(dir, &moved, &err), RMQ_OK);
  CHECK_EQ_INT(moved, 29 + 16);
  char *text = read_config(dir, "delayOffset.json");
  int64_t off[RMQ_MAX_DELAY_LEVELS] = {0};
  CHECK(text && rmq_delay_offsets_parse(text, strlen(text), off, 18, &err) == RMQ_OK);
  CHECK(off[0] == 5 && off[1] == 7 && off[2] == 0);
  CHECK(text && strstr(text, "3:") == NULL);
  free(text);
  s = tu_open(dir, &cfg);
  CHECK(s && strcmp(rmq_store_delay_offset_report(s), "") == 0);
  rmq_store_close(s);
}

/*
** An open that dies after setting a damaged queue aside, before it wrote the
** queue again (here its dispatch fails, out of disk), leaves an unclean exit:
** the next open recovers abnormally from the log's start and the queue is
** whole again, where a clean checkpoint would have left it short.
*/
static void test_rebuild_interrupted(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = tu_open(dir, &cfg);
  rmq_err err = {0};
  tu_msg t;
  rmq_put_result r;
  /* Q/1's messages come last: what its queue holds needs no dispatch at the next open. */
  for (int i = 0; s && i < 40; i++) {
    CHECK_EQ_INT(
        rmq_store_put(s, tu_message(&t, "Q", i < 30 ? 0 : 1, "body", 4, "KEYS=k"), 1, &r, &err),
        RMQ_OK);
  }
  rmq_store_close(s);
  /* Entry 19 copied over entry 20: a duplicate the open finds. */
  char path[512];
  snprintf(path, sizeof path, "%s/consumequeue/Q/0/00000000000000000000", dir);
  int fd = open(path, O_RDWR);
  uint8_t entry[RMQ_CQ_UNIT_SIZE];
  CHECK(pread(fd, entry, sizeof entry, 19 * RMQ_CQ_UNIT_SIZE) == (ssize_t)sizeof entry);
  CHECK(pwrite(fd, entry, sizeof entry, 20 * RMQ_CQ_UNIT_SIZE) == (ssize_t)sizeof entry);
  close(fd);
  /*
  ** The open's fallocate calls: the shared page's, then the rebuilt queue's
  ** first file's (the checkpoint's blocks are there already).
  */
  rmq_io_fault(RMQ_IO_FALLOCATE, 2, ENOSPC, -1);
  CHECK(rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK);
  CHECK(strstr(err.msg, "consumequeue/Q/0") != NULL);
  rmq_io_fault(RMQ_IO_FALLOCATE, 0, 0, -1);
  CHECK(exists(dir, "abort"));
  s = tu_open(dir, &cfg);
  rmq_consume_queue *cq = s ? rmq_store_find_queue(s, "Q", 0) : NULL;
  CHECK(cq != NULL && rmq_cq_max_offset(cq) == 30);
  for (int64_t n = 0; cq && n < 30; n++) {
    rmq_cq_entry e;
    rmq_commitlog_ref ref;
    rmq_message m;
    bool ok = rmq_cq_get(cq, n, &e, &err) == RMQ_OK &&
              rmq_store_read(s, e.phy_offset, &ref, &m, &err) == RMQ_OK;
    CHECK(ok && m.queue_offset == n);
    if (ok) rmq_commitlog_ref_release(&ref);
  }
  rmq_store_close(s);
}

/* The child of test_lock_and_abort: open dir for writing, put one message, close. */
static int follow_and_put(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s = NULL;
  rmq_err err = {0};
  tu_msg t;
  rmq_put_result r;
  int rc = rmq_store_open(dir, &cfg, &s, &err);
  if (rc == RMQ_OK) rc = rmq_store_put(s, tu_message(&t, "Child", 0, "c", 1, NULL), 1, &r, &err);
  bool follows = rc == RMQ_OK && rmq_store_is_follower(s) && r.physical_offset == 0;
  if (!follows) fprintf(stderr, "  follower: %s\n", err.msg);
  rmq_store_close(s);
  return follows ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--follow") == 0) return follow_and_put(argv[2]);
  self_path = argv[0];
  void (*tests[])(const char *) = {test_lock_and_abort,
                                   test_lock_in_process,
                                   test_damaged_tail,
                                   test_damage_before_checkpoint,
                                   test_fsync_failure,
                                   test_flush_timeout,
                                   test_wait_false,
                                   test_wait_false_forwarded,
                                   test_open_failure,
                                   test_dir_sync_failure,
                                   test_disk_reservation,
                                   test_dispatch_disk_full,
                                   test_put_encoded,
                                   test_put_encoded_failures,
                                   test_put_encoded_populated,
                                   test_put_encoded_failures_populated,
                                   test_topics_rebuilt,
                                   test_delay_offsets_repaired,
                                   test_rebuild_interrupted};
  for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
    char dir[64];
    tu_tmpdir(dir, sizeof dir);
    tests[i](dir);
    tu_rmrf(dir);
  }
  return check_report();
}
