/*
** test_full_disk.c: a full disk is an error, never SIGBUS. Every file the
** engine writes through a mapping has its blocks reserved before the first
** write, so a write to a page cannot meet a disk with no room.
**
** Each case runs on a small tmpfs and on a small loop-mounted ext4 (mounting
** needs root; without it the test says so and skips). The store runs in a
** child process: a child killed by a signal fails the check.
**   checkpoint: the store is open when the disk fills; puts fail, and the
**     last flush at close writes the checkpoint through its mapping.
**   warm: warm_mapped_file=1 with less room than one segment; the new
**     segment is touched page by page through its mapping.
**   full: opening a store, putting and closing with from no room at all
**     up to 64 KiB free, so that the disk fills at every step of creating it.
*/
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"

#define SEG (1 << 20)

static char mnt[64], img[80];

static int run(const char *cmd) {
  char quiet[600];
  snprintf(quiet, sizeof quiet, "%s >/dev/null 2>&1", cmd);
  return system(quiet);
}

static bool mount_fs(const char *kind) {
  char cmd[512];
  if (strcmp(kind, "tmpfs") == 0) {
    snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=8m tmpfs %s", mnt);
  } else {
    snprintf(cmd, sizeof cmd, "truncate -s 8M %s && mkfs.ext4 -q %s && mount -o loop %s %s", img,
             img, img, mnt);
  }
  return geteuid() == 0 && run(cmd) == 0;
}

static void unmount_fs(void) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "umount %s", mnt);
  if (run(cmd) != 0) fprintf(stderr, "could not unmount %s\n", mnt);
  unlink(img);
}

/* Write a file until the disk has no room left, then give back `room` bytes. */
static void fill(size_t room) {
  char path[128];
  snprintf(path, sizeof path, "%s/filler", mnt);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  static char buf[65536];
  off_t size = 0;
  for (size_t chunk = sizeof buf; chunk > 0; chunk /= 2) {
    ssize_t n;
    while ((n = write(fd, buf, chunk)) > 0) size += n;
  }
  if (room > 0 && ftruncate(fd, size > (off_t)room ? size - (off_t)room : 0) != 0) perror("trunc");
  fsync(fd);
  close(fd);
}

static rmq_store *open_store(bool warm) {
  char dir[128];
  snprintf(dir, sizeof dir, "%s/store", mnt);
  mkdir(dir, 0755);
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  cfg.warm_mapped_file = warm;
  rmq_store *s = NULL;
  rmq_err err = {0};
  if (rmq_store_open(dir, &cfg, &s, &err) != RMQ_OK) printf("  open: %s\n", err.msg);
  return s;
}

/* Put until a put fails; true when one did (the disk is full). */
static bool put_until_error(rmq_store *s, int max) {
  static char body[4000];
  tu_msg t;
  for (int i = 0; i < max; i++) {
    rmq_put_result r;
    rmq_err err = {0};
    if (rmq_store_put(s, tu_message(&t, "Full", 0, body, sizeof body, "KEYS=k"), 1, &r, &err) !=
        RMQ_OK) {
      printf("  put %d: %s\n", i, err.msg);
      return true;
    }
  }
  return false;
}

static int case_checkpoint(void) {
  rmq_store *s = open_store(false);
  if (!s) return 1;
  if (put_until_error(s, 1)) return 1;
  rmq_err err = {0};
  rmq_store_wait_dispatched(s, &err);
  fill(0);
  bool failed = put_until_error(s, 2 * SEG / 4000);
  rmq_store_close(s);
  return failed ? 0 : 1;
}

static int case_warm(void) {
  fill(SEG / 4);
  rmq_store *s = open_store(true);
  if (!s) return 0; /* refused at open: fine too */
  bool failed = put_until_error(s, 4);
  rmq_store_close(s);
  return failed ? 0 : 1;
}

/* Open, put and close with `room` bytes free; 0, or 1 when a put succeeded on a full disk. */
static int open_with_room(size_t room) {
  fill(room);
  rmq_store *s = open_store(false);
  if (!s) return 0;
  bool failed = put_until_error(s, 2 * SEG / 4000);
  rmq_store_close(s);
  return failed ? 0 : 1;
}

/*
** Every amount of room from none to 64 KiB, so that the disk fills at each
** step of creating a store: its directories, lock, checkpoint, first files.
*/
static int case_full(void) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s/store %s/filler", mnt, mnt);
  for (size_t room = 0; room <= 64 << 10; room += 1024) {
    if (run(cmd) != 0) return 2;
    pid_t pid = fork();
    if (pid == 0) _exit(open_with_room(room));
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "  with %zu bytes free: %s\n", room,
              WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "a put succeeded");
      return 1;
    }
  }
  return 0;
}

/* Run one case in a child on a fresh file system: it must end by itself, with status 0. */
static void run_case(const char *kind, const char *name, int (*fn)(void)) {
  if (!mount_fs(kind)) {
    printf("skipped %s on %s: cannot mount (needs root and loop devices)\n", name, kind);
    return;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) _exit(fn());
  int status = 0;
  waitpid(pid, &status, 0);
  unmount_fs();
  bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  check_result(ok, __FILE__, __LINE__, name);
  if (WIFSIGNALED(status)) {
    fprintf(stderr, "  %s on %s: killed by %s\n", name, kind, strsignal(WTERMSIG(status)));
  } else if (!ok) {
    fprintf(stderr, "  %s on %s: no put failed on a full disk\n", name, kind);
  } else {
    printf("%s on %s: errors, no signal\n", name, kind);
  }
}

int main(void) {
  snprintf(mnt, sizeof mnt, "/tmp/rmq-fulldisk-XXXXXX");
  if (!mkdtemp(mnt)) return 2;
  snprintf(img, sizeof img, "%s.img", mnt);
  static const char *const kinds[] = {"tmpfs", "ext4"};
  for (int k = 0; k < 2; k++) {
    run_case(kinds[k], "checkpoint", case_checkpoint);
    run_case(kinds[k], "warm", case_warm);
    run_case(kinds[k], "full", case_full);
  }
  rmdir(mnt);
  return check_report();
}
