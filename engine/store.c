/*
** store.c: DefaultMessageStore: open, recover, run and close a store
** (see rmq.h).
**
** Open (DefaultMessageStore.load): check that the path leaves room for the
** longest file name and that the store's files are regular files (a FIFO would
** block an open), take the lock (writable stores), note whether `abort`
** exists (the last exit was not clean), load the CommitLog segments, the
** checkpoint, the consume queues and the index files, recover (consume
** queues first, then the CommitLog, dispatching every record it scans when
** the exit was abnormal, then cut consume-queue entries past the recovered
** end and rebuild the topic-queue table), start the services, let the
** dispatcher catch up, and create `abort`. Close undoes it in reverse
** order; `abort` is removed only when everything was dispatched and flushed,
** so a store whose last flush failed recovers abnormally. Recovery fails the
** open when sound records follow damage in the commit log; repair
** (rmq_store_repair) recovers the commit log alone with the damage moved
** aside and leaves `abort` for the next open.
*/
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "allocate.h"
#include "checkpoint.h"
#include "clean.h"
#include "commitlog_iter.h"
#include "commitlog_recover.h"
#include "consume_queue.h"
#include "consumer_offset.h"
#include "flush.h"
#include "follow.h"
#include "ha_client.h"
#include "ha_service.h"
#include "ha_wire.h"
#include "index_file.h"
#include "io.h"
#include "message.h"
#include "owner_link.h"
#include "properties.h"
#include "rebuild.h"
#include "remoting_server.h"
#include "shared_state.h"
#include "reput.h"
#include "send_back.h"
#include "service_thread.h"
#include "topic_config.h"

/* How long open waits for the dispatcher to catch up with the recovered log. */
#define CATCH_UP_TIMEOUT_MS 600000

struct rmq_store {
  char *dir;
  pid_t pid;           /* the process that opened it: its threads run only there */
  rmq_config cfg;      /* readonly set when via_owner: this process's view of the files */
  rmq_config user_cfg; /* what the opener asked for (rmq_store_config) */
  int lock_fd;
  /*
  ** Opened for writing while another process ran the services (a follower
  ** of the owner): this process reads the files as a read-only store does,
  ** appends itself under the processes' put lock (appender, shared_log.h)
  ** and sends the rest of what it writes to the owner (owner_link.h), or,
  ** once it took the services over, to the owner it opened in itself.
  */
  bool via_owner;
  rmq_owner_link *link;             /* via_owner: the way to the owner */
  atomic_bool owner_waits;          /* the owner's last answer: RMQ_RESPONSE_OWNER_WAITS */
  rmq_remoting_server *server;      /* the owner's listener for the other processes */
  char socket[RMQ_REMOTE_NAME_MAX]; /* its name, which the shared page gives */
  bool last_exit_ok;
  rmq_checkpoint checkpoint;
  rmq_commitlog commitlog;
  rmq_cq_table *cqs;
  rmq_index_service index;
  rmq_rebuild rebuild; /* what the open found damaged in the derived files */
  rmq_transient_store_pool *pool;
  rmq_staging_pool *staging;
  rmq_allocate_service *allocate;
  rmq_flush_service *flush;
  rmq_reput_service *reput;
  rmq_cq_flush_service *cq_flush;
  rmq_consumer_offset_manager *offsets; /* NULL when read-only */
  rmq_topic_config_manager *topics;     /* NULL when read-only */
  rmq_schedule_service *schedule;
  rmq_clean_service *clean;
  rmq_ha_service *ha;        /* a master's listener, NULL without ha_listen */
  rmq_ha_client *ha_client;  /* a slave's connection to its master */
  rmq_retired_files retired; /* deleted files that readers still hold */
  /* Several processes: the owner's page (shared_state.h), or a read-only store's follower. */
  rmq_shared_state *shared;
  bool holding_put_lock;           /* the owner's open holds the processes' put lock */
  rmq_commitlog *_Atomic appender; /* a follower's own writer on the shared log, once made */
  atomic_bool appender_stale;      /* it must join again before it appends */
  pthread_mutex_t join_mu;         /* joins, one at a time */
  bool join_refused;               /* under join_mu: the owner appends every put itself */
  pthread_mutex_t publish_mu;      /* the owner's publishes, in order */
  int64_t published;               /* the dispatched offset last published; under publish_mu */
  rmq_follower *follow;            /* a read-only view following the files (follow.h) */
  char delay_offset_report[RMQ_SCHEDULE_REPORT_MAX];
  char recovery_report[1536];
  /* put latency, sampled: bucket i counts puts that took [2^i, 2^(i+1)) ns */
  _Atomic int64_t latency_buckets[RMQ_LATENCY_BUCKETS];
};

/* ------------------------------------------------------------- lock/abort */

/* The longest name under a store: consumequeue/<topic>/<queue id>/<20-digit offset>. */
#define LONGEST_NAME \
  ((int)(sizeof "/consumequeue/" - 1 + RMQ_MAX_TOPIC_LEN + sizeof "/2147483647/" - 1 + 20))

int rmq_store_check_path(const char *dir, rmq_err *err) {
  size_t n = strlen(dir);
  if (n + LONGEST_NAME < PATH_MAX) return RMQ_OK;
  return rmq_err_set(err, RMQ_EINVAL,
                     "store path %.64s... is %zu bytes: with the longest file name in a store "
                     "(%d bytes more) it passes the limit of %d bytes on a path (PATH_MAX); "
                     "use a store path of at most %d bytes",
                     dir, n, LONGEST_NAME, PATH_MAX - 1, PATH_MAX - 1 - LONGEST_NAME);
}

int rmq_store_make_dir(const char *dir, rmq_err *err) {
  char *path = strdup(dir);
  if (!path) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  int rc = RMQ_OK;
  for (char *p = path + 1; rc == RMQ_OK; p++) {
    if (*p != '/' && *p != '\0') continue;
    char saved = *p;
    *p = '\0';
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
      rc = rmq_err_set(err, RMQ_EIO, "cannot create %s: %s", path, strerror(errno));
    }
    if (saved == '\0') break;
    *p = saved;
  }
  free(path);
  return rc;
}

static void store_path(const rmq_store *s, const char *name, char *out, size_t cap) {
  snprintf(out, cap, "%s/%s", s->dir, name);
}

/*
** The store's `lock` file, where DefaultMessageStore.start takes its
** FileChannel.tryLock on byte 0. Our locks are open file description locks:
** they conflict with the POSIX lock a Java broker takes and, unlike POSIX
** locks, with another engine's in this process too, and they are not
** dropped when another descriptor of the file is closed. Every writer of
** ours shares byte 0 (so a broker and our processes exclude each other);
** the owner, which runs the services, holds byte 1 alone; a repair holds
** byte 0 alone.
*/
typedef enum lock_mode {
  LOCK_WRITER, /* byte 0 shared; byte 1 when free (the owner), else a follower */
  LOCK_OWNER,  /* byte 0 shared and byte 1: RMQ_ELOCKED when another process is the owner */
  LOCK_REPAIR  /* byte 0 alone: no other process has the store open for writing */
} lock_mode;

static int lock_byte(int fd, short type, off_t byte) {
  struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1};
  return fcntl(fd, F_OFD_SETLK, &fl);
}

static int lock_refused(rmq_store *s, const char *path, const char *whose, rmq_err *err) {
  if (errno != EAGAIN && errno != EACCES) {
    return rmq_err_set(err, RMQ_EIO, "cannot lock %s: %s", path, strerror(errno));
  }
  return rmq_err_set(err, RMQ_ELOCKED, "store %s is %s", s->dir, whose);
}

static int take_lock(rmq_store *s, lock_mode mode, rmq_err *err) {
  char path[PATH_MAX];
  store_path(s, "lock", path, sizeof path);
  s->lock_fd = rmq_io_open(path, O_RDWR | O_CREAT, 0644);
  if (s->lock_fd < 0) {
    return rmq_err_set(err, RMQ_EIO, "cannot open %s: %s", path, strerror(errno));
  }
  if (lock_byte(s->lock_fd, mode == LOCK_REPAIR ? F_WRLCK : F_RDLCK, 0) != 0) {
    return lock_refused(s, path, "locked by another process", err);
  }
  if (mode != LOCK_REPAIR && lock_byte(s->lock_fd, F_WRLCK, 1) != 0) {
    if (mode == LOCK_OWNER || (errno != EAGAIN && errno != EACCES)) {
      return lock_refused(s, path, "run by another process", err);
    }
    s->via_owner = true;
    return RMQ_OK;
  }
  /* RocketMQ's lock file says "lock"; written only when it does not (a repair writes nothing). */
  char held[4];
  if (rmq_io_pread(s->lock_fd, held, 4, 0) == 4 && memcmp(held, "lock", 4) == 0) return RMQ_OK;
  if (rmq_io_pwrite(s->lock_fd, "lock", 4, 0) != 4 || rmq_io_fsync(s->lock_fd) != 0) {
    return rmq_err_set(err, RMQ_EIO, "cannot write %s: %s", path, strerror(errno));
  }
  return RMQ_OK;
}

/* Does another process have the store open for writing (a shared lock on byte 0)? */
static bool others_writing(rmq_store *s) {
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
  return fcntl(s->lock_fd, F_OFD_GETLK, &fl) != 0 || fl.l_type != F_UNLCK;
}

void rmq_store_drop_inherited_lock(rmq_store *s) {
  if (s->lock_fd >= 0) close(s->lock_fd);
  s->lock_fd = -1;
  rmq_remoting_server_drop_inherited(s->server);
  rmq_store *owner = s->link ? rmq_owner_link_owner(s->link) : NULL;
  if (owner) rmq_store_drop_inherited_lock(owner);
}

/* ------------------------------------------------------------ file types */

/* A file the store opens is regular or missing: opening a FIFO would block. */
static int check_regular(const char *path, rmq_err *err) {
  struct stat st;
  if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return RMQ_OK;
  return rmq_err_set(err, RMQ_ECORRUPT, "%s is %s, not a regular file", path,
                     rmq_file_type(st.st_mode));
}

static bool all_digits(const char *name) {
  if (!*name) return false;
  while (*name >= '0' && *name <= '9') name++;
  return *name == '\0';
}

/*
** The segments under dir (named by digits) are regular files; depth levels of directories
** lead to them (consumequeue/<topic>/<queue id>/). The entries' types come
** from the listing: a stat of each would slow the open of many queues.
*/
static int check_segments(const char *dir, int depth, rmq_err *err) {
  DIR *d = opendir(dir);
  if (!d) return RMQ_OK; /* missing, or not a directory: loading says so */
  int rc = RMQ_OK;
  struct dirent *e;
  while (rc == RMQ_OK && (e = readdir(d)) != NULL) {
    char path[PATH_MAX];
    if (e->d_name[0] == '.' || snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= PATH_MAX) {
      continue;
    }
    if (depth == 0 && all_digits(e->d_name)) {
      if (e->d_type != DT_REG) rc = check_regular(path, err);
    } else if (depth > 0 && rmq_dirent_is_dir(path, e->d_type)) {
      rc = check_segments(path, depth - 1, err);
    }
  }
  closedir(d);
  return rc;
}

static int check_file_types(rmq_store *s, rmq_err *err) {
  static const char *const files[] = {"lock", "abort", "checkpoint"};
  static const struct {
    const char *name;
    int depth;
  } dirs[] = {{"commitlog", 0}, {"index", 0}, {"consumequeue", 2}};
  char path[PATH_MAX];
  int rc = RMQ_OK;
  for (size_t i = 0; rc == RMQ_OK && i < sizeof files / sizeof *files; i++) {
    store_path(s, files[i], path, sizeof path);
    rc = check_regular(path, err);
  }
  /* A writable open loads every queue, and rmq_mapped_file_open checks each file then. */
  size_t walked = s->cfg.readonly ? sizeof dirs / sizeof *dirs : 2;
  for (size_t i = 0; rc == RMQ_OK && i < walked; i++) {
    store_path(s, dirs[i].name, path, sizeof path);
    rc = check_segments(path, dirs[i].depth, err);
  }
  return rc;
}

static bool abort_exists(rmq_store *s) {
  char path[PATH_MAX];
  store_path(s, "abort", path, sizeof path);
  return access(path, F_OK) == 0;
}

static int create_abort(rmq_store *s, rmq_err *err) {
  char path[PATH_MAX];
  store_path(s, "abort", path, sizeof path);
  int fd = rmq_io_open(path, O_WRONLY | O_CREAT, 0644);
  if (fd < 0 || rmq_io_fsync(fd) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return rmq_err_set(err, RMQ_EIO, "cannot create %s: %s", path, strerror(e));
  }
  close(fd);
  return RMQ_OK;
}

static void remove_abort(rmq_store *s) {
  char path[PATH_MAX];
  store_path(s, "abort", path, sizeof path);
  rmq_io_unlink(path);
}

/* ------------------------------------------------------------- open/close */

/* The CommitLog's settings; flush_sync as this process asked (a follower's own puts). */
static int commitlog_config(rmq_store *s, rmq_commitlog_config *cc, rmq_err *err) {
  *cc = (rmq_commitlog_config){
      .file_size = s->cfg.commitlog_file_size,
      .max_message_size = s->cfg.max_message_size,
      .use_spin_lock = s->cfg.use_spin_lock,
      .flush_sync = s->user_cfg.flush_sync,
      .disk_warning_ratio = s->cfg.disk_warning_ratio,
      .store_host = s->cfg.store_host,
      .enable_lmq = s->cfg.enable_lmq,
      .max_lmq_queues = s->cfg.max_lmq_queues,
  };
  return rmq_parse_delay_levels(s->cfg.delay_levels, cc->delay_ms, RMQ_MAX_DELAY_LEVELS,
                                &cc->delay_level_count, err);
}

static int open_commitlog(rmq_store *s, rmq_err *err) {
  rmq_commitlog_config cc;
  int rc = commitlog_config(s, &cc, err);
  if (rc == RMQ_OK) rc = rmq_commitlog_init(&s->commitlog, s->dir, &cc, !s->cfg.readonly, err);
  s->commitlog.mfq.retired = &s->retired;
  if (rc == RMQ_OK) rc = rmq_mfq_load(&s->commitlog.mfq, s->cfg.readonly, err);
  if (rc == RMQ_OK) s->cfg.commitlog_file_size = s->commitlog.mfq.file_size;
  if (rc == RMQ_ECORRUPT && !s->cfg.readonly) {
    size_t n = strlen(err->msg);
    snprintf(err->msg + n, sizeof err->msg - n,
             "; if the file is damaged, run SELECT rocketmq_repair('%s') to move it and the "
             "segments after it aside into %s/damaged/",
             s->dir, s->dir);
  }
  return rc;
}

/*
** A writable open is about to set damaged derived files aside: should it die
** before it dispatched the log again over them, the next open must recover
** abnormally from the log's start (the checkpoint's logicsMsgTimestamp 0),
** or the queues would stay short of what was moved.
*/
static int rebuild_unclean(void *ctx, rmq_err *err) {
  rmq_store *s = ctx;
  atomic_store(&s->checkpoint.logics_msg_timestamp, 0);
  int rc = rmq_checkpoint_flush(&s->checkpoint, err);
  return rc == RMQ_OK ? create_abort(s, err) : rc;
}

static int open_queues(rmq_store *s, rmq_err *err) {
  bool writable = !s->cfg.readonly;
  int rc = rmq_cq_table_new(s->dir, s->cfg.consumequeue_entries, writable, &s->cqs, err);
  if (rc == RMQ_OK) rmq_cq_table_set_retired(s->cqs, &s->retired);
  if (rc == RMQ_OK) rc = rmq_cq_table_load(s->cqs, err);
  if (rc == RMQ_OK) {
    rc = rmq_index_service_init(&s->index, s->dir, s->cfg.index_slots, s->cfg.index_entries,
                                writable, &s->checkpoint, err);
  }
  s->index.retired = &s->retired;
  if (rc == RMQ_OK) rc = rmq_index_service_load(&s->index, s->last_exit_ok, err);
  rmq_rebuild_init(&s->rebuild, s->dir, &s->commitlog, s->cqs, &s->index, writable);
  s->rebuild.unclean = rebuild_unclean;
  s->rebuild.unclean_ctx = s;
  if (rc == RMQ_OK) rc = rmq_rebuild_index(&s->rebuild, err);
  if (rc == RMQ_OK) s->reput = rmq_reput_new(&s->commitlog, s->cqs, &s->index, &s->checkpoint, err);
  return rc == RMQ_OK && !s->reput ? err->code : rc;
}

/* The largest CommitLog end any consume queue points at, or -1. */
static int64_t cq_max_physic(rmq_store *s) {
  rmq_consume_queue **all;
  int n;
  int64_t max = -1;
  rmq_err err = {0};
  if (rmq_cq_table_snapshot(s->cqs, &all, &n, &err) != RMQ_OK) return max;
  for (int i = 0; i < n; i++) {
    int64_t m = rmq_cq_max_physic_offset(all[i]);
    if (m > max) max = m;
  }
  free(all);
  return max;
}

/* recoverTopicQueueTable: queue offsets go on from each queue's end. */
static int recover_topic_queue_table(rmq_store *s, rmq_err *err) {
  rmq_consume_queue **all;
  int n;
  int rc = rmq_cq_table_snapshot(s->cqs, &all, &n, err);
  if (rc != RMQ_OK) return rc;
  int64_t min = rmq_commitlog_min_offset(&s->commitlog);
  for (int i = 0; i < n; i++) {
    rmq_commitlog_set_queue_offset(&s->commitlog, all[i]->topic, strlen(all[i]->topic),
                                   all[i]->queue_id, rmq_cq_max_offset(all[i]));
    rmq_cq_correct_min_offset(all[i], min);
  }
  free(all);
  return RMQ_OK;
}

typedef struct recovery_dispatch {
  rmq_reput_service *reput;
  rmq_err err;
} recovery_dispatch;

static void dispatch_scanned(void *ctx, const rmq_message *m) {
  recovery_dispatch *d = ctx;
  if (d->err.code == RMQ_OK) rmq_reput_dispatch(d->reput, m, &d->err);
}

/*
** Consume queues first, then the CommitLog (DefaultMessageStore.recover). A
** read-only store is only scanned for its end: nothing is dispatched or cut
** on disk. Damage after the end fails the open (rmq_commitlog_recover).
*/
static int recover(rmq_store *s, rmq_err *err) {
  int64_t max_cq;
  int rc = rmq_cq_table_recover(s->cqs, &max_cq, err);
  if (rc != RMQ_OK) return rc;
  bool scan_only = s->cfg.readonly || s->last_exit_ok;
  recovery_dispatch d = {.reput = s->reput};
  rmq_recovery *r = calloc(1, sizeof *r);
  if (!r) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  *r = (rmq_recovery){.last_exit_ok = scan_only,
                      .cp = &s->checkpoint,
                      .on_record = scan_only ? NULL : dispatch_scanned,
                      .ctx = &d};
  rc = rmq_commitlog_recover(&s->commitlog, r, err);
  int64_t end = r->end;
  snprintf(s->recovery_report, sizeof s->recovery_report, "%s", r->report);
  free(r);
  if (rc != RMQ_OK) return rc;
  if (d.err.code != RMQ_OK) return rmq_err_set(err, d.err.code, "%s", d.err.msg);
  if (max_cq >= end) rc = rmq_cq_table_truncate_dirty(s->cqs, end, err);
  if (max_cq > end) {
    size_t len = strlen(s->recovery_report);
    snprintf(s->recovery_report + len, sizeof s->recovery_report - len,
             "; consume-queue entries at or past %lld cut", (long long)end);
  }
  if (rc == RMQ_OK) rmq_rebuild_index_end(&s->rebuild, end);
  if (rc == RMQ_OK) rc = rmq_rebuild_queues(&s->rebuild, err);
  if (s->rebuild.report[0]) {
    size_t len = strlen(s->recovery_report);
    snprintf(s->recovery_report + len, sizeof s->recovery_report - len, "; %s%s", s->rebuild.report,
             s->rebuild.moved ? ", the damaged files moved into damaged/" : "");
  }
  return rc == RMQ_OK ? recover_topic_queue_table(s, err) : rc;
}

/* Dispatch what the consume queues lack (ReputMessageService) and wait for it. */
static int catch_up(rmq_store *s, rmq_err *err) {
  int64_t from = cq_max_physic(s), min = rmq_commitlog_min_offset(&s->commitlog);
  if (s->rebuild.from < from) from = s->rebuild.from;
  int rc = rmq_reput_start(s->reput, from > min ? from : min, err);
  if (rc == RMQ_OK) {
    rc = rmq_reput_wait_for(s->reput, rmq_commitlog_max_offset(&s->commitlog), CATCH_UP_TIMEOUT_MS,
                            err);
  }
  return rc == RMQ_OK ? recover_topic_queue_table(s, err) : rc;
}

/* ScheduleMessageService, once the consume queues hold every delayed message. */
static int start_schedule(rmq_store *s, rmq_err *err) {
  int64_t offsets[RMQ_MAX_DELAY_LEVELS];
  int rc = rmq_schedule_load_offsets(s->dir, s->cqs, offsets, s->delay_offset_report,
                                     sizeof s->delay_offset_report, err);
  if (rc != RMQ_OK) return rc;
  s->schedule = rmq_schedule_new(&s->commitlog, s->cqs, s->reput, s->dir, offsets, err);
  return s->schedule ? rmq_schedule_start(s->schedule, err) : err->code;
}

static int start_services(rmq_store *s, rmq_err *err) {
  rmq_mapped_file_queue *q = &s->commitlog.mfq;
  if (s->cfg.transient_store_pool > 0) {
    s->pool = rmq_transient_store_pool_new(s->cfg.transient_store_pool, q->file_size, err);
    if (!s->pool) return err->code;
    q->pool = s->pool;
  } else if (s->cfg.role != RMQ_ROLE_SLAVE && !rmq_commitlog_direct_writers(&s->commitlog)) {
    int rc = rmq_commitlog_use_window(&s->commitlog, err);
    if (rc != RMQ_OK) return rc;
  }
  s->staging = rmq_staging_pool_new(RMQ_STAGING_LINGER_MS);
  if (s->staging)
    s->allocate = rmq_allocate_service_new(s->cfg.warm_mapped_file, s->cfg.flush_sync, s->pool,
                                           s->staging);
  if (!s->allocate) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  rmq_allocate_attach(s->allocate, q);
  rmq_flush_config fc = {
      .sync = s->cfg.flush_sync,
      .sync_flush_timeout_ms = s->cfg.sync_flush_timeout_ms,
      .flush_interval_ms = s->cfg.flush_interval_ms,
      .flush_least_pages = 4,
      .flush_thorough_interval_ms = 10000,
      .commit_interval_ms = 200,
      .reput = s->reput,
  };
  s->flush = rmq_flush_service_new(&s->commitlog, &s->checkpoint, &fc, err);
  if (!s->flush) return err->code;
  s->cq_flush = rmq_cq_flush_service_new(s->cqs, &s->index, &s->checkpoint, err);
  if (!s->cq_flush) return err->code;
  int rc = rmq_allocate_service_start(s->allocate, err);
  if (rc == RMQ_OK) rc = catch_up(s, err);
  rmq_cq_table_opened(s->cqs);
  if (rc == RMQ_OK) rc = rmq_flush_service_start(s->flush, err);
  if (rc == RMQ_OK) rc = rmq_cq_flush_service_start(s->cq_flush, err);
  /* A slave's log is its master's: delayed messages are delivered there, not here. */
  if (rc == RMQ_OK && s->cfg.role != RMQ_ROLE_SLAVE) rc = start_schedule(s, err);
  rmq_mapped_file *last = rmq_mfq_last(q);
  if (last) {
    rmq_allocate_prefault(s->allocate, last);
    rmq_mapped_file_release(last);
  }
  return rc;
}

/*
** The master's listener, before any thread appends: the commit log tells it
** of every append (puts, delayed delivery, a slave's own appends).
*/
static int start_ha_service(rmq_store *s, rmq_err *err) {
  if (!s->cfg.ha_listen[0]) return RMQ_OK;
  int rc = rmq_ha_service_start(&s->commitlog, &s->cfg, &s->ha, err);
  if (rc != RMQ_OK) return rc;
  s->commitlog.appended = rmq_ha_service_wakeup;
  s->commitlog.appended_ctx = s->ha;
  return RMQ_OK;
}

/* A slave appended what its master sent: dispatch it, and flush it as the store flushes. */
static int replica_appended(void *ctx, int64_t end, rmq_err *err) {
  rmq_store *s = ctx;
  rmq_reput_wakeup(s->reput);
  return s->cfg.flush_sync ? rmq_flush_wait(s->flush, end, err) : RMQ_OK;
}

/*
** TopicConfigManager's table; a topics.json that does not parse is rebuilt
** from the consume queues, which the recovery report then says.
*/
static int load_topics(rmq_store *s, rmq_err *err) {
  char rebuilt[640];
  int rc = rmq_tcm_load(s->dir, s->cqs, s->user_cfg.delay_levels, &s->topics, rebuilt,
                        sizeof rebuilt, err);
  if (rc == RMQ_OK && rebuilt[0]) {
    size_t len = strlen(s->recovery_report);
    snprintf(s->recovery_report + len, sizeof s->recovery_report - len, "; %s", rebuilt);
  }
  return rc;
}

static int start_follower(rmq_store *s, rmq_err *err);
static int start_server(rmq_store *s, rmq_err *err);

/*
** The owner maps the shared page before its recovery, and holds its put
** lock until its services run: followers that append themselves
** (shared_log.h) wait while the log's end is found and dispatched. A page
** nobody else uses is written anew.
*/
static int lock_shared_log(rmq_store *s, rmq_err *err) {
  int rc = rmq_shared_state_attach(s->dir, true, !others_writing(s), &s->shared, err);
  if (rc == RMQ_OK) {
    rc = rmq_shared_log_lock(rmq_shared_state_log(s->shared), s->cfg.use_spin_lock, s->dir, err);
  }
  s->holding_put_lock = rc == RMQ_OK;
  return rc;
}

static void unlock_shared_log(rmq_store *s) {
  if (s->holding_put_lock) rmq_shared_log_unlock(rmq_shared_state_log(s->shared));
  s->holding_put_lock = false;
}

static int store_open_steps(rmq_store *s, bool may_follow, rmq_err *err) {
  bool writable = !s->cfg.readonly;
  int rc = writable ? rmq_store_make_dir(s->dir, err) : RMQ_OK;
  if (rc != RMQ_OK) return rc;
  struct stat st;
  if (!writable && (stat(s->dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
    return rmq_err_set(err, RMQ_ENOTFOUND, "no store at %s: not a directory", s->dir);
  }
  rc = check_file_types(s, err);
  if (rc == RMQ_OK && writable) rc = take_lock(s, may_follow ? LOCK_WRITER : LOCK_OWNER, err);
  if (rc == RMQ_OK && s->via_owner) {
    /* Another process runs the services: this one reads the files as a reader does. */
    s->cfg.readonly = true;
    writable = false;
  }
  if (rc == RMQ_OK && writable) rc = lock_shared_log(s, err);
  s->last_exit_ok = !abort_exists(s);
  if (rc == RMQ_OK) rc = open_commitlog(s, err);
  if (rc == RMQ_OK) rc = rmq_checkpoint_open(&s->checkpoint, s->dir, writable, err);
  if (rc == RMQ_OK) rc = open_queues(s, err);
  if (rc == RMQ_OK) rc = recover(s, err);
  if (rc == RMQ_OK && s->shared) {
    rmq_commitlog_share(&s->commitlog, rmq_shared_state_log(s->shared), false);
    rmq_commitlog_shared_recovered(&s->commitlog);
  }
  if (rc == RMQ_OK) {
    s->clean = rmq_clean_service_new(s->dir, &s->cfg, &s->commitlog, s->cqs, &s->index, &s->retired,
                                     err);
    if (!s->clean) rc = err->code;
  }
  if (rc != RMQ_OK || !writable) return rc == RMQ_OK && s->via_owner ? start_follower(s, err) : rc;
  rc = start_ha_service(s, err);
  if (rc == RMQ_OK) rc = start_services(s, err);
  unlock_shared_log(s);
  if (rc == RMQ_OK) rc = rmq_com_load(s->dir, &s->offsets, err);
  if (rc == RMQ_OK) rc = load_topics(s, err);
  if (rc == RMQ_OK) rc = rmq_tcm_start(s->topics, err);
  if (rc == RMQ_OK) rc = create_abort(s, err);
  if (rc == RMQ_OK) rc = rmq_clean_service_start(s->clean, err);
  if (rc == RMQ_OK && s->cfg.role == RMQ_ROLE_SLAVE) {
    rc = rmq_ha_client_start(&s->commitlog, &s->cfg, replica_appended, s, &s->ha_client, err);
  }
  return rc == RMQ_OK ? start_server(s, err) : rc;
}

/* ------------------------------------------------- several processes */

/*
** The owner tells the other processes how far it dispatched, and that files
** went (shared_state.h). The dispatcher and the clean service both publish:
** the offset never goes back.
*/
static void publish_progress(void *ctx, int64_t dispatched) {
  rmq_store *s = ctx;
  pthread_mutex_lock(&s->publish_mu);
  if (dispatched > s->published) s->published = dispatched;
  rmq_shared_state_publish(s->shared, s->published);
  pthread_mutex_unlock(&s->publish_mu);
}

/* The clean service deleted files: readers in other processes let go of them. */
static void publish_deleted(void *ctx) {
  rmq_store *s = ctx;
  publish_progress(s, rmq_reput_offset(s->reput));
}

/*
** Once the open is done: the owner, whose dispatcher has caught up, makes
** the page that the other processes follow; a read-only store follows it.
*/
static int store_share(rmq_store *s, rmq_err *err) {
  if (s->cfg.readonly) {
    return rmq_follower_new(s->dir, &s->commitlog, s->cqs, &s->index, &s->follow, err);
  }
  s->published = rmq_reput_offset(s->reput);
  rmq_shared_state_own(s->shared, s->socket, s->published);
  rmq_reput_on_progress(s->reput, publish_progress, s);
  rmq_clean_on_deleted(s->clean, publish_deleted, s);
  /* What was dispatched between the page's making and the hook. */
  publish_deleted(s);
  return RMQ_OK;
}

/* After the services stopped: nothing publishes any more. */
static void store_unshare(rmq_store *s) {
  unlock_shared_log(s);
  rmq_commitlog *appender = atomic_load(&s->appender);
  if (appender) rmq_commitlog_destroy(appender);
  free(appender);
  atomic_store(&s->appender, NULL);
  rmq_follower_free(s->follow);
  s->follow = NULL;
  /* The page goes: the log is this process's alone for what is left of the close. */
  s->commitlog.shared.log = NULL;
  rmq_shared_state_close(s->shared);
  s->shared = NULL;
}

int rmq_store_refresh(rmq_store *s, rmq_err *err) {
  return s->follow ? rmq_follower_refresh(s->follow, err) : RMQ_OK;
}

/* For the reads that report no error: a failed refresh leaves the view as it was. */
static void refresh_quietly(rmq_store *s) {
  rmq_err ignored = {0};
  rmq_store_refresh(s, &ignored);
}

/* How often a via-owner open starts again when a file it listed went away under it. */
#define FOLLOWER_OPEN_TRIES 20

static int store_open_once(const char *dir, const rmq_config *cfg, bool may_follow, rmq_store **out,
                           bool *via_owner, rmq_err *err) {
  rmq_store *s = calloc(1, sizeof *s);
  if (!s || !(s->dir = strdup(dir))) {
    free(s);
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  }
  s->cfg = s->user_cfg = *cfg;
  s->pid = getpid();
  s->lock_fd = -1;
  s->checkpoint.fd = -1;
  rmq_retired_init(&s->retired);
  pthread_mutex_init(&s->publish_mu, NULL);
  pthread_mutex_init(&s->join_mu, NULL);
  int rc = store_open_steps(s, may_follow, err);
  if (rc == RMQ_OK) rc = store_share(s, err);
  /* What the files decided (a segment size), and a via-owner store still writes. */
  s->user_cfg = s->cfg;
  s->user_cfg.readonly = cfg->readonly;
  *via_owner = s->via_owner;
  if (rc != RMQ_OK) {
    rmq_store_close(s);
    return rc;
  }
  *out = s;
  return RMQ_OK;
}

/* may_follow false: RMQ_ELOCKED when another process runs the services (a take-over lost). */
static int store_open(const char *dir, const rmq_config *cfg, bool may_follow, rmq_store **out,
                      rmq_err *err) {
  *out = NULL;
  int rc = rmq_config_check(cfg, err);
  if (rc == RMQ_OK) rc = rmq_store_check_path(dir, err);
  for (int tries = 1; rc == RMQ_OK; tries++) {
    rmq_err why = {0};
    bool via_owner = false;
    rc = store_open_once(dir, cfg, may_follow, out, &via_owner, &why);
    /* The owner's recovery or retention removed a file this open had just listed. */
    if (rc == RMQ_ENOTFOUND && via_owner && tries < FOLLOWER_OPEN_TRIES) {
      usleep(10000);
      rc = RMQ_OK;
      continue;
    }
    if (rc != RMQ_OK) rmq_err_set(err, rc, "%s", why.msg);
    break;
  }
  return rc;
}

int rmq_store_open(const char *dir, const rmq_config *cfg, rmq_store **out, rmq_err *err) {
  return store_open(dir, cfg, true, out, err);
}

/*
** Under the store's lock: load the commit log with what cannot be loaded
** set aside and recover it with damage moved aside.
*/
static int repair_steps(rmq_store *s, rmq_recovery *r, rmq_err *err) {
  struct stat st;
  if (stat(s->dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    return rmq_err_set(err, RMQ_ENOTFOUND, "no store at %s: not a directory", s->dir);
  }
  int rc = take_lock(s, LOCK_REPAIR, err);
  rmq_commitlog_config cc = {.file_size = s->cfg.commitlog_file_size,
                             .max_message_size = s->cfg.max_message_size};
  *r = (rmq_recovery){.last_exit_ok = !abort_exists(s), .repair = true, .cp = &s->checkpoint};
  if (rc == RMQ_OK) rc = rmq_commitlog_init(&s->commitlog, s->dir, &cc, true, err);
  if (rc == RMQ_OK) rc = rmq_commitlog_load_for_repair(&s->commitlog, r, err);
  if (rc == RMQ_OK) rc = rmq_checkpoint_open(&s->checkpoint, s->dir, true, err);
  return rc == RMQ_OK ? rmq_commitlog_recover(&s->commitlog, r, err) : rc;
}

/*
** The config files a repair mends, under the store's lock: each damaged copy
** moved into the repair's damaged/ directory, the offsets files written
** again with what still reads of them; their bytes count as moved.
*/
static int repair_config(rmq_store *s, rmq_recovery *r, rmq_err *err) {
  char *to = r->moved_to;
  size_t cap = sizeof r->moved_to;
  int rc = rmq_com_repair(s->dir, to, cap, &r->moved, err);
  if (rc == RMQ_OK) rc = rmq_schedule_repair_offsets(s->dir, to, cap, &r->moved, err);
  return rc == RMQ_OK ? rmq_tcm_repair(s->dir, to, cap, &r->moved, err) : rc;
}

int rmq_store_repair_with(const char *dir, rmq_repair_step step, void *ctx, int64_t *moved,
                          rmq_err *err) {
  *moved = 0;
  rmq_store *s = calloc(1, sizeof *s);
  rmq_recovery *r = calloc(1, sizeof *r);
  int rc = s && r && (s->dir = strdup(dir)) ? RMQ_OK
                                            : rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  if (rc == RMQ_OK) {
    rmq_config_init(&s->cfg);
    s->lock_fd = -1;
    s->checkpoint.fd = -1;
    rmq_retired_init(&s->retired);
    pthread_mutex_init(&s->publish_mu, NULL);
    pthread_mutex_init(&s->join_mu, NULL);
    rc = repair_steps(s, r, err);
    if (rc == RMQ_OK) rc = repair_config(s, r, err);
    *moved = r->moved;
    /* Under the lock, with the log sound: what else the repair mends. */
    rmq_repair_state st = {dir, &s->checkpoint, r->end, r->moved_to, moved};
    if (rc == RMQ_OK && step) rc = step(ctx, &st, err);
    /*
    ** When something was moved, `abort` makes the next open recover
    ** abnormally: it dispatches again from the checkpoint and cuts the
    ** consume-queue entries past the new end. A sound store is left as it was.
    */
    if (rc == RMQ_OK && *moved > 0) rc = create_abort(s, err);
    rmq_store_close(s);
  } else if (s) {
    free(s->dir);
    free(s);
  }
  free(r);
  return rc;
}

/*
** A slave's client stops first (it appends), then retention, then the
** CommitLog's last commit and flush (readers see only committed bytes), then
** a master's HA service (appends and commits tell it), then the dispatcher's
** last pass, then the queues, the index and the checkpoint; deleted files
** still held go last.
*/
void rmq_store_close(rmq_store *s) {
  if (!s) return;
  /* Services taken over from a dead owner stop first; an owner takes no more requests. */
  rmq_owner_link_stop(s->link);
  rmq_remoting_server_stop(s->server);
  bool started = s->flush != NULL;
  rmq_ha_client_stop(s->ha_client);
  rmq_clean_service_free(s->clean);
  rmq_schedule_free(s->schedule);
  rmq_flush_service_free(s->flush);
  /* After every thread that appends or commits: they tell the HA senders. */
  rmq_ha_service_stop(s->ha);
  rmq_reput_free(s->reput);
  rmq_tcm_free(s->topics);
  rmq_com_free(s->offsets);
  rmq_cq_flush_service_free(s->cq_flush);
  rmq_allocate_service_free(s->allocate);
  s->commitlog.mfq.allocate = NULL;
  rmq_staging_pool_free(s->staging);
  store_unshare(s);
  rmq_err err = {0};
  bool clean = started && !atomic_load(&s->commitlog.poisoned) &&
               rmq_cq_table_flush(s->cqs, 0, NULL, &err) == RMQ_OK &&
               rmq_index_service_flush(&s->index, &err) == RMQ_OK &&
               rmq_checkpoint_flush(&s->checkpoint, &err) == RMQ_OK;
  if (clean) remove_abort(s);
  rmq_index_service_destroy(&s->index);
  rmq_cq_table_free(s->cqs);
  rmq_checkpoint_close(&s->checkpoint);
  rmq_commitlog_destroy(&s->commitlog);
  rmq_retired_destroy(&s->retired);
  rmq_transient_store_pool_free(s->pool);
  if (s->lock_fd >= 0) close(s->lock_fd);
  pthread_mutex_destroy(&s->publish_mu);
  pthread_mutex_destroy(&s->join_mu);
  free(s->dir);
  free(s);
}

/* ------------------------------------------------------------------ use */

static void record_latency(rmq_store *s, int64_t ns) {
  int b = 0;
  while (b < RMQ_LATENCY_BUCKETS - 1 && ns >= (int64_t)2 << b) b++;
  atomic_fetch_add_explicit(&s->latency_buckets[b], 1, memory_order_relaxed);
}

/* What a put appends: messages, or records rmq_store_encode wrote (spans). */
typedef struct put_args {
  const rmq_message *msgs;
  rmq_put_result *results;
  const rmq_span *spans;
  int nspans;
  int n;                 /* messages, or records in the spans */
  int64_t *first_offset; /* spans: where the batch starts, -1 when it was not appended */
  int64_t *end_offset;   /* set: where it ends, and the caller waits (rmq_store_wait_flushed) */
  bool run;              /* it continues the caller's run of such puts (the write window) */
  bool no_wait;          /* no message waits for the disk (rmq_message_waits) */
  int fd;                /* > 0: the records are the first file_len bytes of this file */
  int64_t file_len;
} put_args;

static int follower_put(rmq_store *s, const put_args *a, rmq_err *err);
/* Carry out q in the owner (owner_link.h); *a (may be NULL): the answer's first figure. */
static int ask_owner(rmq_store *s, const rmq_remote_request *q, int64_t *a, rmq_err *err);

/* Beyond the owner's own waits (its flush, a slave's ack), what an answer may take. */
#define OWNER_ANSWER_SLACK_MS 5000

/* How long a request waits for the owner's answer, so that a stopped owner stops no one for long. */
static int32_t owner_answer_ms(const rmq_store *s) {
  return s->user_cfg.sync_flush_timeout_ms + s->user_cfg.ha_slave_timeout_ms +
         OWNER_ANSWER_SLACK_MS;
}
static int follower_wait_durable(rmq_store *s, int64_t end_offset, rmq_err *err);

int rmq_store_wait_flushed(rmq_store *s, int64_t end_offset, rmq_err *err) {
  if (s->via_owner) return follower_wait_durable(s, end_offset, err);
  if (!s->flush) return RMQ_OK;
  /* The group commit commits the write window before it flushes; async, a run ends here. */
  bool committed = false;
  int rc = s->cfg.flush_sync ? rmq_flush_wait(s->flush, end_offset, err)
                             : rmq_commitlog_commit_window(&s->commitlog, &committed, err);
  if (committed) rmq_reput_wakeup(s->reput);
  /* CommitLog.handleHA: after the flush, a sync master waits for a slave. */
  if (rc == RMQ_OK && s->cfg.role == RMQ_ROLE_SYNC_MASTER) {
    rc = rmq_ha_service_wait(s->ha, end_offset, s->cfg.ha_slave_timeout_ms, err);
  }
  return rc;
}

int rmq_store_handle_flush(rmq_store *s, int64_t end_offset, bool wait, rmq_err *err) {
  if (wait) return rmq_store_wait_flushed(s, end_offset, err);
  if (s->via_owner || !s->flush) return RMQ_OK;
  bool committed = false;
  int rc = rmq_commitlog_commit_window(&s->commitlog, &committed, err);
  if (committed) rmq_reput_wakeup(s->reput);
  if (s->cfg.flush_sync) rmq_flush_wakeup(s->flush);
  return rc;
}

static int store_put(rmq_store *s, const put_args *a, rmq_err *err) {
  if (s->via_owner) return follower_put(s, a, err);
  if (s->cfg.readonly) return rmq_err_set(err, RMQ_EINVAL, "store %s is open read-only", s->dir);
  if (s->cfg.role == RMQ_ROLE_SLAVE) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "store %s is a slave of %s: it takes its messages from the master; write "
                       "to the master",
                       s->dir, s->cfg.ha_master);
  }
  int64_t end = 0;
  int rc = a->fd > 0  ? rmq_commitlog_put_file(&s->commitlog, a->fd, a->file_len, a->n,
                                               a->first_offset, &end, err)
           : a->run   ? rmq_commitlog_put_encoded_run(&s->commitlog, a->spans, a->nspans, a->n,
                                                      a->first_offset, &end, err)
           : a->spans ? rmq_commitlog_put_encoded(&s->commitlog, a->spans, a->nspans, a->n,
                                                  a->results, a->first_offset, &end, err)
                      : rmq_commitlog_put(&s->commitlog, a->msgs, a->n, a->results, &end, err);
  if (rc != RMQ_OK && a->first_offset) *a->first_offset = -1;
  if (rc != RMQ_OK) return rc;
  rmq_reput_wakeup(s->reput);
  if (a->end_offset) {
    *a->end_offset = end;
    return RMQ_OK;
  }
  return rmq_store_handle_flush(s, end, !a->no_wait, err);
}

void *rmq_store_staging_take(rmq_store *s) {
  if (!s->staging) return NULL;
  bool fill = false;
  void *chunk = rmq_staging_take(s->staging, &fill);
  if (fill && s->allocate) rmq_allocate_wakeup(s->allocate);
  /* A slave's first segment is where its master's data starts; a follower's, the owner's care. */
  if (chunk && s->cfg.role != RMQ_ROLE_SLAVE && !s->cfg.readonly) {
    rmq_commitlog_prepare_segment(&s->commitlog);
  }
  return chunk;
}

void rmq_store_staging_give(rmq_store *s, void *chunk) {
  if (chunk && rmq_staging_give(s->staging, chunk) && s->allocate) rmq_allocate_wakeup(s->allocate);
}

/* One put in 16 per thread is timed: the clock costs more than a hot append. */
static int timed_put(rmq_store *s, const put_args *a, rmq_err *err) {
  static _Thread_local unsigned calls;
  if ((calls++ & 15) != 0) return store_put(s, a, err);
  int64_t t0 = rmq_monotonic_ns();
  int rc = store_put(s, a, err);
  if (rc == RMQ_OK) record_latency(s, rmq_monotonic_ns() - t0);
  return rc;
}

int rmq_store_put(rmq_store *s, const rmq_message *msgs, int n, rmq_put_result *results,
                  rmq_err *err) {
  put_args a = {.msgs = msgs, .n = n, .results = results, .no_wait = n > 0};
  for (int i = 0; i < n && a.no_wait; i++) a.no_wait = !rmq_message_waits(&msgs[i]);
  return timed_put(s, &a, err);
}

int32_t rmq_store_encode(rmq_store *s, const rmq_message *m, uint8_t *buf, size_t cap,
                         rmq_err *err) {
  return rmq_commitlog_encode(&s->commitlog, m, buf, cap, err);
}

int rmq_store_put_encoded(rmq_store *s, const rmq_span *spans, int nspans, int count,
                          int64_t *first_offset, rmq_err *err) {
  put_args a = {.spans = spans, .nspans = nspans, .n = count, .first_offset = first_offset};
  *first_offset = -1;
  return timed_put(s, &a, err);
}

int rmq_store_put_encoded_unflushed(rmq_store *s, const rmq_span *spans, int nspans, int count,
                                    int64_t *first_offset, int64_t *end_offset, rmq_err *err) {
  put_args a = {.spans = spans,
                .nspans = nspans,
                .n = count,
                .first_offset = first_offset,
                .end_offset = end_offset,
                .run = *end_offset != 0};
  return timed_put(s, &a, err);
}

int rmq_store_put_encoded_file(rmq_store *s, int fd, int64_t len, int count, int64_t *first_offset,
                               int64_t *end_offset, rmq_err *err) {
  put_args a = {.fd = fd,
                .file_len = len,
                .n = count,
                .first_offset = first_offset,
                .end_offset = end_offset};
  *first_offset = -1;
  return timed_put(s, &a, err);
}

int64_t rmq_store_put_latency_ns(rmq_store *s, double quantile) {
  int64_t counts[RMQ_LATENCY_BUCKETS], total = 0, seen = 0;
  for (int b = 0; b < RMQ_LATENCY_BUCKETS; b++)
    total += counts[b] = atomic_load(&s->latency_buckets[b]);
  if (total == 0) return 0;
  for (int b = 0; b < RMQ_LATENCY_BUCKETS; b++) {
    seen += counts[b];
    if ((double)seen >= quantile * (double)total) return (int64_t)2 << b;
  }
  return (int64_t)2 << (RMQ_LATENCY_BUCKETS - 1);
}

int rmq_store_flush(rmq_store *s, int64_t *flushed_offset, rmq_err *err) {
  if (s->via_owner) {
    rmq_remote_request q = {.code = RMQ_REQUEST_FLUSH, .timeout_ms = owner_answer_ms(s)};
    return ask_owner(s, &q, flushed_offset, err);
  }
  if (!s->flush) {
    *flushed_offset = rmq_commitlog_max_offset(&s->commitlog);
    return RMQ_OK;
  }
  int rc = rmq_flush_all(s->flush, flushed_offset, err);
  if (rc == RMQ_OK) rc = rmq_reput_wait_for(s->reput, *flushed_offset, CATCH_UP_TIMEOUT_MS, err);
  if (rc == RMQ_OK) rc = rmq_cq_flush_all(s->cq_flush, err);
  if (rc == RMQ_OK) rc = rmq_tcm_sync(s->topics, err);
  return rc;
}

int rmq_store_check_process(rmq_store *s, rmq_err *err) {
  if (s->pid == getpid()) return RMQ_OK;
  return rmq_err_set(err, RMQ_EINVAL,
                     "store %s was opened by process %d, and this process (%d) is a child forked "
                     "from it: a forked child cannot use its parent's connection to a store "
                     "(its engine's threads run only in the parent); open a new connection in "
                     "the child",
                     s->dir, (int)s->pid, (int)getpid());
}

const rmq_config *rmq_store_config(rmq_store *s) { return &s->user_cfg; }
const char *rmq_store_dir(rmq_store *s) { return s->dir; }
rmq_commitlog *rmq_store_commitlog(rmq_store *s) { return &s->commitlog; }
rmq_cq_table *rmq_store_consume_queues(rmq_store *s) { return s->cqs; }
rmq_index_service *rmq_store_index(rmq_store *s) { return &s->index; }
rmq_reput_service *rmq_store_reput(rmq_store *s) { return s->cfg.readonly ? NULL : s->reput; }

int rmq_store_scheduled(rmq_store *s, rmq_scheduled_fn fn, void *ctx, rmq_err *err) {
  int rc = rmq_store_refresh(s, err);
  return rc == RMQ_OK ? rmq_schedule_list(s->schedule, s->dir, s->cqs, &s->commitlog, fn, ctx, err)
                      : rc;
}

/* ------------------------------------------------------- consumer groups */
/*
** A consumer gives a message back (SendMessageProcessor.consumerSendMsgBack):
** its copy (send_back.h) is put, by the owner of the store.
*/
int rmq_store_send_back(rmq_store *s, const char *group, int64_t commitlog_offset,
                        int64_t *new_offset, rmq_err *err) {
  if (s->user_cfg.readonly)
    return rmq_err_set(err, RMQ_EINVAL, "store %s is open read-only", s->dir);
  int rc = rmq_send_back_check_group(group, err);
  if (rc != RMQ_OK) return rc;
  if (rmq_store_is_follower(s)) {
    rmq_remote_request q = {.code = RMQ_REQUEST_SEND_BACK,
                            .offset = commitlog_offset,
                            .timeout_ms = owner_answer_ms(s)};
    snprintf(q.group, sizeof q.group, "%s", group);
    return ask_owner(s, &q, new_offset, err);
  }
  rmq_commitlog_ref ref = {0};
  rmq_message m;
  rc = rmq_store_read(s, commitlog_offset, &ref, &m, err);
  if (rc != RMQ_OK) return rc;
  rmq_send_back *copy = malloc(sizeof *copy);
  rc = copy ? rmq_send_back_copy(&s->user_cfg, group, &m, copy, err)
            : rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  rmq_put_result res;
  if (rc == RMQ_OK) rc = rmq_store_put(s, &copy->m, 1, &res, err);
  if (rc == RMQ_OK) *new_offset = res.physical_offset;
  free(copy);
  rmq_commitlog_ref_release(&ref);
  return rc;
}

int rmq_store_commit_offset(rmq_store *s, const char *group, const char *topic, int32_t queue_id,
                            int64_t offset, rmq_err *err) {
  if (s->user_cfg.readonly) {
    return rmq_err_set(err, RMQ_EINVAL, "store %s is open read-only", s->dir);
  }
  if (!rmq_group_valid(group, strlen(group))) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "group \"%.255s\" is not a valid RocketMQ group (1..255 characters of "
                       "[%%|a-zA-Z0-9_-])",
                       group);
  }
  if (!rmq_topic_valid(topic, strlen(topic))) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "topic \"%.127s\" is not a valid RocketMQ topic (1..%d bytes of "
                       "[A-Za-z0-9_%%|-])",
                       topic, RMQ_MAX_TOPIC_LEN);
  }
  if (offset < 0) {
    return rmq_err_set(err, RMQ_EINVAL, "offset %lld is negative", (long long)offset);
  }
  /* One process writes the file: the owner, which sees every queue's end. */
  if (rmq_store_is_follower(s)) {
    rmq_remote_request q = {.code = RMQ_REQUEST_COMMIT_OFFSET,
                            .count = queue_id,
                            .offset = offset,
                            .timeout_ms = owner_answer_ms(s)};
    snprintf(q.group, sizeof q.group, "%s", group);
    snprintf(q.topic, sizeof q.topic, "%s", topic);
    return ask_owner(s, &q, NULL, err);
  }
  rmq_consumer_offset_manager *m = s->offsets;
  /* A queue appears when the dispatcher reaches its first message. */
  int rc = rmq_store_wait_dispatched(s, err);
  if (rc != RMQ_OK) return rc;
  rmq_consume_queue *cq = rmq_store_find_queue(s, topic, queue_id);
  if (!cq) {
    return rmq_err_set(err, RMQ_ENOTFOUND, "queue %d of topic %s does not exist in store %s",
                       queue_id, topic, s->dir);
  }
  int64_t max = rmq_cq_max_offset(cq);
  if (offset > max) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "offset %lld is beyond the max offset of queue %d of topic %s (0..%lld)",
                       (long long)offset, queue_id, topic, (long long)max);
  }
  return rmq_com_commit(m, group, topic, queue_id, offset, err);
}

int rmq_store_group_offsets(rmq_store *s, rmq_group_offset **out, int *count, rmq_err *err) {
  *out = NULL;
  *count = 0;
  rmq_consumer_offset_manager *m = s->offsets;
  if (m) return rmq_com_snapshot(m, out, count, err);
  rmq_consumer_offset_manager *file;
  int rc = rmq_com_load(s->dir, &file, err);
  if (rc != RMQ_OK) return rc;
  rc = rmq_com_snapshot(file, out, count, err);
  rmq_com_free(file);
  return rc;
}
rmq_schedule_service *rmq_store_schedule(rmq_store *s) { return s->schedule; }
const char *rmq_store_recovery_report(rmq_store *s) { return s->recovery_report; }
const char *rmq_store_delay_offset_report(rmq_store *s) { return s->delay_offset_report; }
rmq_clean_service *rmq_store_clean_service(rmq_store *s) { return s->clean; }
rmq_retired_files *rmq_store_retired(rmq_store *s) { return &s->retired; }

/* ----------------------------------------------------------- replication */

int rmq_store_ha(rmq_store *s, rmq_ha_fn fn, void *ctx, rmq_err *err) {
  (void)err;
  if (s->ha) return rmq_ha_service_rows(s->ha, fn, ctx);
  return s->ha_client ? rmq_ha_client_rows(s->ha_client, fn, ctx) : RMQ_OK;
}

void rmq_store_ha_stats(rmq_store *s, rmq_stats *st) {
  st->role = s->user_cfg.readonly ? NULL : rmq_role_name(s->user_cfg.role);
  bool took_over = s->via_owner && rmq_owner_link_owner(s->link);
  st->process = s->user_cfg.readonly ? "reader" : s->via_owner && !took_over ? "follower" : "owner";
  st->owner_pid = s->via_owner ? rmq_owner_link_owner_pid(s->link)
                  : s->shared  ? rmq_shared_state_owner(s->shared)
                               : 0;
  st->ha_push2slave_offset = -1;
  if (s->ha) rmq_ha_service_stats(s->ha, st);
  if (s->ha_client) rmq_ha_client_stats(s->ha_client, st);
}

const char *rmq_store_ha_address(rmq_store *s) {
  return s->ha ? rmq_ha_service_address(s->ha) : NULL;
}

/* ------------------------------------------------------------- retention */

int rmq_store_clean(rmq_store *s, int *deleted, rmq_err *err) {
  *deleted = 0;
  if (s->via_owner) {
    rmq_remote_request q = {.code = RMQ_REQUEST_CLEAN, .timeout_ms = owner_answer_ms(s)};
    int64_t n = 0;
    int rc = ask_owner(s, &q, &n, err);
    *deleted = (int)n;
    return rc;
  }
  if (s->cfg.readonly) return rmq_err_set(err, RMQ_EINVAL, "store %s is open read-only", s->dir);
  return rmq_clean_pass(s->clean, deleted, err);
}

int rmq_store_files(rmq_store *s, rmq_file_fn fn, void *ctx, rmq_err *err) {
  int rc = rmq_store_refresh(s, err);
  if (rc != RMQ_OK) return rc;
  return rmq_clean_forecast(s->clean, fn, ctx, err);
}

void rmq_store_service_runs(rmq_store *s, rmq_stats *st) {
  st->flush_runs = s->flush ? rmq_flush_runs(s->flush) : 0;
  st->commit_runs = s->flush ? rmq_flush_commit_runs(s->flush) : 0;
  st->cq_flush_runs = s->cq_flush ? rmq_cq_flush_runs(s->cq_flush) : 0;
}

/* ------------------------------------------------------------- queries */

int rmq_store_read(rmq_store *s, int64_t offset, rmq_commitlog_ref *ref, rmq_message *out,
                   rmq_err *err) {
  return rmq_commitlog_read_message(&s->commitlog, offset, false, ref, out, err);
}

int rmq_store_check_entry(rmq_store *s, const char *topic, int32_t queue_id, int64_t n,
                          const rmq_cq_entry *e, const rmq_message *m, rmq_err *err) {
  char why[300];
  if (rmq_commitlog_entry_check(&s->commitlog, topic, queue_id, n, e, m, why, sizeof why)) {
    return RMQ_OK;
  }
  return rmq_err_set(err, RMQ_ECORRUPT,
                     "consume queue %s/consumequeue/%s/%d is damaged: %s; close the store and "
                     "run SELECT rocketmq_repair('%s') to rebuild it from the commit log",
                     s->dir, topic, (int)queue_id, why, s->dir);
}

rmq_consume_queue *rmq_store_find_queue(rmq_store *s, const char *topic, int32_t queue_id) {
  refresh_quietly(s);
  rmq_consume_queue *cq = rmq_cq_table_find(s->cqs, topic, queue_id);
  /* A queue the writer made since the last refresh's look at the directories. */
  if (!cq && s->follow) cq = rmq_follower_open_queue(s->follow, topic, queue_id);
  return cq;
}

int64_t rmq_store_min_offset(rmq_store *s) { return rmq_commitlog_min_offset(&s->commitlog); }

int rmq_store_queues(rmq_store *s, rmq_queue_info **out, int *count, rmq_err *err) {
  rmq_consume_queue **all;
  int n;
  *out = NULL;
  *count = 0;
  int rc = rmq_store_refresh(s, err);
  if (rc == RMQ_OK) rc = rmq_cq_table_snapshot(s->cqs, &all, &n, err);
  if (rc != RMQ_OK) return rc;
  rmq_queue_info *info = malloc((size_t)(n ? n : 1) * sizeof *info);
  for (int i = 0; info && i < n; i++) {
    info[i] = (rmq_queue_info){.topic = all[i]->topic,
                               .queue_id = all[i]->queue_id,
                               .min_offset = rmq_cq_min_offset(all[i]),
                               .max_offset = rmq_cq_max_offset(all[i]),
                               .files = rmq_mfq_count(&all[i]->mfq)};
  }
  free(all);
  if (!info) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  *out = info;
  *count = n;
  return RMQ_OK;
}

/*
** A read-only store's long poll: look, then sleep until the owner publishes
** (the mark taken before the look, so that a publish during it wakes).
*/
static bool follow_wait_queue(rmq_store *s, const char *topic, int32_t queue_id,
                              int64_t queue_offset, int64_t deadline_ms) {
  for (;;) {
    uint32_t mark = rmq_follower_mark(s->follow);
    rmq_consume_queue *cq = rmq_store_find_queue(s, topic, queue_id);
    if (cq && rmq_cq_max_offset(cq) > queue_offset) return true;
    int64_t now = rmq_monotonic_ms();
    if (deadline_ms <= now) return false;
    rmq_follower_sleep(s->follow, mark, deadline_ms - now);
  }
}

/* The queue's end is read after the dispatcher's offset, so a message dispatched in between
   is seen, not slept through. */
bool rmq_store_wait_queue(rmq_store *s, const char *topic, int32_t queue_id, int64_t queue_offset,
                          int64_t deadline_ms) {
  if (s->follow) return follow_wait_queue(s, topic, queue_id, queue_offset, deadline_ms);
  rmq_reput_service *r = rmq_store_reput(s);
  if (!r) return false;
  for (;;) {
    int64_t seen = rmq_reput_offset(r);
    rmq_consume_queue *cq = rmq_cq_table_find(s->cqs, topic, queue_id);
    if (cq && rmq_cq_max_offset(cq) > queue_offset) return true;
    int64_t now = rmq_monotonic_ms();
    if (deadline_ms <= now)
      return false; /* before subtracting: a caller's deadline may be anything */
    int64_t left = deadline_ms - now;
    rmq_reput_wait_progress(r, seen, left > INT32_MAX ? INT32_MAX : (int)left);
  }
}

int rmq_store_index_error(rmq_store *s, rmq_err *err) {
  if (s->index.skipped.code == RMQ_OK) return RMQ_OK;
  return rmq_err_set(err, s->index.skipped.code, "%s", s->index.skipped.msg);
}

bool rmq_store_index_view(rmq_store *s, const char *after, rmq_index_view *v) {
  if (!after) refresh_quietly(s);
  return rmq_index_service_view(&s->index, after, v);
}

int32_t rmq_index_view_items_end(const rmq_index_view *v, bool chain) {
  return chain && v->mf->writable ? v->index_num : v->header.index_count;
}

void rmq_commitlog_iter_start(rmq_commitlog_iter *it, rmq_store *s, int64_t from, int64_t to,
                              int64_t min_store_time, unsigned flags) {
  refresh_quietly(s);
  if (min_store_time > INT64_MIN) {
    int64_t seg = rmq_commitlog_segment_for_time(&s->commitlog, min_store_time);
    if (seg > from) from = seg;
  }
  rmq_cl_iter_start(it, &s->commitlog, from, to, flags);
}

/* A read-only store: what the owner dispatched of what its log holds now (follow.h). */
static int follow_dispatched(rmq_store *s, rmq_err *err) {
  int rc = rmq_follower_refresh(s->follow, err);
  if (rc != RMQ_OK) return rc;
  rmq_follower_wait_dispatched(s->follow, RMQ_DISPATCH_WAIT_MS);
  return rmq_follower_refresh(s->follow, err);
}

int rmq_store_wait_dispatched(rmq_store *s, rmq_err *err) {
  if (s->follow) return follow_dispatched(s, err);
  rmq_reput_service *r = rmq_store_reput(s);
  if (!r) return RMQ_OK;
  /* What was acknowledged may still wait in a write buffer (a pool's, or the window). */
  int rc = rmq_flush_commit(s->flush, err);
  if (rc != RMQ_OK) return rc;
  return rmq_reput_wait_for(r, rmq_commitlog_max_offset(&s->commitlog), RMQ_DISPATCH_WAIT_MS, err);
}

typedef struct key_lookup {
  rmq_store *s;
  const char *topic, *key;
  size_t topic_len, key_len;
  int64_t begin, end; /* the store times asked for */
} key_lookup;

/*
** The index compares hashes only: re-check topic and key on the record. An
** item that leads inside the log to no record, or to one none of whose
** keys has its hash, is damage, not a collision.
*/
static rmq_index_verdict record_matches(void *ctx, int64_t phy_offset, int32_t key_hash) {
  key_lookup *k = ctx;
  rmq_commitlog_ref ref;
  rmq_message m;
  rmq_err e = {0};
  /* Expired since it was indexed, or past an end that recovery cut after a crash. */
  if (phy_offset < rmq_commitlog_min_offset(&k->s->commitlog) ||
      phy_offset >= rmq_commitlog_max_offset(&k->s->commitlog)) {
    return RMQ_INDEX_OTHER;
  }
  if (rmq_commitlog_read_message(&k->s->commitlog, phy_offset, false, &ref, &m, &e) != RMQ_OK) {
    return RMQ_INDEX_DAMAGED;
  }
  rmq_index_verdict v = RMQ_INDEX_OTHER;
  if ((size_t)m.topic_len == k->topic_len && memcmp(m.topic, k->topic, k->topic_len) == 0 &&
      rmq_properties_have_key(m.properties, (size_t)m.properties_len, k->key, k->key_len)) {
    /* Outside the window asked for, a record of the key is not counted against max. */
    bool in_time = m.store_timestamp >= k->begin && m.store_timestamp <= k->end;
    v = in_time ? RMQ_INDEX_MATCH : RMQ_INDEX_OTHER;
  } else {
    size_t un = 0, kn = 0;
    const char *uniq = rmq_properties_get(m.properties, (size_t)m.properties_len,
                                          RMQ_PROPERTY_UNIQ_KEY, &un);
    const char *keys = rmq_properties_get(m.properties, (size_t)m.properties_len, RMQ_PROPERTY_KEYS,
                                          &kn);
    if (!rmq_index_keys_have_hash(m.topic, (size_t)m.topic_len, uniq, un, keys, kn, key_hash)) {
      v = RMQ_INDEX_DAMAGED;
    }
  }
  rmq_commitlog_ref_release(&ref);
  return v;
}

int rmq_store_query_key(rmq_store *s, const char *topic, const char *key, int64_t begin,
                        int64_t end, int max, int64_t *offsets, int *count, rmq_err *err) {
  key_lookup k = {s, topic, key, strlen(topic), strlen(key), begin, end};
  rmq_index_match match = {record_matches, &k};
  *count = 0;
  int rc = rmq_store_refresh(s, err);
  if (rc == RMQ_OK) rc = rmq_store_index_error(s, err);
  if (rc != RMQ_OK) return rc;
  /*
  ** An item keeps its store time in whole seconds after its file's first
  ** (IndexService.buildIndex): one stored at or after begin may read as up to
  ** 999 ms before it. The record decides.
  */
  int64_t item_begin = begin > INT64_MIN + 999 ? begin - 999 : INT64_MIN;
  return rmq_index_service_query_matching(&s->index, topic, k.topic_len, key, k.key_len, max,
                                          item_begin, end, &match, offsets, count, err);
}

int64_t rmq_store_time_at(void *store, int64_t phy_offset, int32_t size) {
  return rmq_commitlog_time_at(&((rmq_store *)store)->commitlog, phy_offset, size);
}
int rmq_store_queue_offset_at_time(rmq_store *s, const char *topic, int32_t queue_id,
                                   int64_t timestamp, int64_t *queue_offset, rmq_err *err) {
  rmq_consume_queue *cq = rmq_cq_table_find(s->cqs, topic, queue_id);
  if (!cq) {
    *queue_offset = 0;
    return RMQ_OK;
  }
  return rmq_cq_first_offset_at_or_after_time(cq, timestamp,
                                              rmq_commitlog_min_offset(&s->commitlog),
                                              rmq_store_time_at, s, queue_offset, err);
}

/* -------------------------------------------------------- several processes */

bool rmq_store_is_follower(rmq_store *s) { return s->via_owner; }

static int ask_owner(rmq_store *s, const rmq_remote_request *q, int64_t *a, rmq_err *err) {
  rmq_remote_response r;
  int rc = rmq_owner_link_call(s->link, q, &r, err);
  if (rc != RMQ_OK) return rc;
  atomic_store(&s->owner_waits, r.flags & RMQ_RESPONSE_OWNER_WAITS);
  free(r.results);
  if (a) *a = r.a;
  return r.rc == RMQ_OK ? RMQ_OK : rmq_err_set(err, r.rc, "%s", r.msg);
}

/* What a put of encoded records tells its caller, from the owner's answer. */
static void fill_results(rmq_store *s, const rmq_span *records, int64_t first,
                         const rmq_remote_response *r, rmq_put_result *results, int n) {
  int64_t at = first;
  const uint8_t *p = records->data;
  for (int i = 0; i < n; i++) {
    int32_t size = rmq_get32(p);
    results[i] = (rmq_put_result){.physical_offset = at, .size = size};
    if (i < r->results_count) {
      results[i].queue_offset = r->results[i].queue_offset;
      results[i].store_timestamp = r->results[i].store_timestamp;
    }
    rmq_msg_id_format(&s->cfg.store_host, at, results[i].msg_id);
    at += size;
    p += size;
  }
}

/* A put the owner makes for this process: the records sent over the socket. */
static int forward_put(rmq_store *s, const put_args *a, rmq_err *err) {
  rmq_span encoded = {0};
  int rc = a->spans ? RMQ_OK
                    : rmq_commitlog_encode_batch(&s->commitlog, a->msgs, a->n, &encoded, err);
  if (rc != RMQ_OK) return rc;
  rmq_remote_request q = {
      .code = RMQ_REQUEST_PUT,
      .count = a->n,
      /* The caller waits later (end_offset), or no message of the put waits (WAIT=false). */
      .flags = (a->end_offset || a->no_wait ? RMQ_REQUEST_NOWAIT : 0) |
               (s->user_cfg.flush_sync ? RMQ_REQUEST_SYNC : 0) |
               (a->results ? RMQ_REQUEST_RESULTS : 0),
      .spans = a->spans ? a->spans : &encoded,
      .nspans = a->spans ? a->nspans : 1,
      .timeout_ms = owner_answer_ms(s),
  };
  rmq_remote_response r = {.a = -1};
  rc = rmq_owner_link_call(s->link, &q, &r, err);
  if (rc == RMQ_OK) atomic_store(&s->owner_waits, r.flags & RMQ_RESPONSE_OWNER_WAITS);
  if (rc == RMQ_OK && r.rc != RMQ_OK) rc = rmq_err_set(err, r.rc, "%s", r.msg);
  if (a->first_offset) *a->first_offset = r.a;
  if (r.a >= 0) {
    if (a->end_offset) *a->end_offset = r.b;
    if (a->results) fill_results(s, &encoded, r.a, &r, a->results, a->n);
  }
  free(r.results);
  free(encoded.data);
  return rc;
}

/* -------------------------------------------- a follower's own appends */

/* The owner's answer to JOIN: the queues' next offsets as of the log's end in r->a. */
static int seed_queue_offsets(void *ctx, rmq_topic_queue_table *tqt, int64_t *from, rmq_err *err) {
  const rmq_remote_response *r = ctx;
  *from = r->a;
  return rmq_commitlog_seed_queue_offsets(tqt, r->body, r->body_len, err);
}

/* This process's writer on the shared log, made at the first put. */
static int make_appender(rmq_store *s, rmq_err *err) {
  rmq_commitlog_config cc;
  int rc = commitlog_config(s, &cc, err);
  if (rc != RMQ_OK) return rc;
  rmq_commitlog *cl = calloc(1, sizeof *cl);
  if (!cl) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  rc = rmq_commitlog_init(cl, s->dir, &cc, true, err);
  if (rc != RMQ_OK) {
    rmq_commitlog_destroy(cl);
    free(cl);
    return rc;
  }
  rmq_commitlog_share(cl, rmq_shared_state_log(s->shared), true);
  atomic_store(&s->appender_stale, true);
  atomic_store(&s->appender, cl);
  return RMQ_OK;
}

/*
** Ask the owner to let this process append itself (it answers with every
** queue's next offset at the log's end), then read back what was appended
** since. An owner that refuses (its puts go through a write buffer, or it is
** a slave) is not asked again.
*/
static int join(rmq_store *s, rmq_err *err) {
  rmq_remote_request q = {.code = RMQ_REQUEST_JOIN, .timeout_ms = owner_answer_ms(s)};
  rmq_remote_response r = {0};
  int rc = rmq_owner_link_call(s->link, &q, &r, err);
  if (rc == RMQ_OK && r.rc != RMQ_OK) rc = rmq_err_set(err, r.rc, "%s", r.msg);
  /* Refused (RMQ_EINVAL), or no page to share; a lost owner is asked again at the next put. */
  s->join_refused = rc == RMQ_EINVAL;
  if (rc == RMQ_OK && !s->shared) {
    rc = rmq_shared_state_attach(s->dir, false, false, &s->shared, err);
    if (rc == RMQ_OK && !s->shared) {
      s->join_refused = true;
      rc = rmq_err_set(err, RMQ_EAGAIN, "no shared page");
    }
  }
  if (rc == RMQ_OK && !atomic_load(&s->appender)) rc = make_appender(s, err);
  rmq_commitlog *cl = atomic_load(&s->appender);
  if (rc == RMQ_OK) rc = rmq_shared_writer_join(&cl->shared, seed_queue_offsets, &r, err);
  free(r.results);
  free(r.body);
  if (cl) atomic_store(&s->appender_stale, rc != RMQ_OK);
  return rc;
}

/* The writer to append with, or NULL: the owner appends for this process. */
static rmq_commitlog *appender(rmq_store *s) {
  rmq_commitlog *cl = atomic_load(&s->appender);
  if (cl && !atomic_load(&s->appender_stale)) return cl;
  pthread_mutex_lock(&s->join_mu);
  rmq_err ignored = {0};
  bool joined = atomic_load(&s->appender) && !atomic_load(&s->appender_stale);
  if (!joined && !s->join_refused) join(s, &ignored);
  cl = atomic_load(&s->appender_stale) ? NULL : atomic_load(&s->appender);
  pthread_mutex_unlock(&s->join_mu);
  return cl;
}

/* RMQ_EAGAIN: the owner must make this put (a roll), and the next one joins again. */
static int direct_put(rmq_store *s, const put_args *a, int64_t *end, rmq_err *err) {
  rmq_commitlog *cl = appender(s);
  if (!cl) return RMQ_EAGAIN;
  int64_t first;
  int rc = a->spans
               ? rmq_commitlog_put_encoded(cl, a->spans, a->nspans, a->n, a->results,
                                           a->first_offset ? a->first_offset : &first, end, err)
               : rmq_commitlog_put(cl, a->msgs, a->n, a->results, end, err);
  if (rc == RMQ_EAGAIN) atomic_store(&s->appender_stale, true);
  return rc;
}

/* A file's records in memory, for a follower, which may have to send them to the owner. */
static int follower_put_file(rmq_store *s, const put_args *a, rmq_err *err) {
  uint8_t *data = malloc((size_t)a->file_len);
  if (!data)
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory for a batch of %lld bytes",
                       (long long)a->file_len);
  int rc = rmq_io_pread(a->fd, data, (size_t)a->file_len, 0) == a->file_len
               ? RMQ_OK
               : rmq_err_set(err, RMQ_EIO, "cannot read a transaction's rows back: %s",
                             errno ? strerror(errno) : "short read");
  rmq_span span = {data, (size_t)a->file_len};
  put_args b = *a;
  b.fd = 0;
  b.spans = &span;
  b.nspans = 1;
  if (rc == RMQ_OK) rc = follower_put(s, &b, err);
  free(data);
  return rc;
}

static int follower_put(rmq_store *s, const put_args *a, rmq_err *err) {
  if (a->fd > 0) return follower_put_file(s, a, err);
  int64_t end = 0;
  int rc = direct_put(s, a, &end, err);
  if (rc == RMQ_EAGAIN) {
    rmq_err_clear(err); /* the owner's answer, not why this process could not append */
    return forward_put(s, a, err);
  }
  if (rc != RMQ_OK || a->end_offset) {
    if (a->end_offset) *a->end_offset = end;
    return rc;
  }
  return a->no_wait ? RMQ_OK : follower_wait_durable(s, end, err);
}

static int follower_wait_durable(rmq_store *s, int64_t end_offset, rmq_err *err) {
  /* Nothing to wait for unless this process or the owner asks for durable or a slave's ack. */
  if (!s->user_cfg.flush_sync && !atomic_load(&s->owner_waits)) return RMQ_OK;
  rmq_remote_request q = {.code = RMQ_REQUEST_WAIT_DURABLE,
                          .timeout_ms = owner_answer_ms(s),
                          .offset = end_offset,
                          .flags = s->user_cfg.flush_sync ? RMQ_REQUEST_SYNC : 0};
  return ask_owner(s, &q, NULL, err);
}

/* -------------------------------------------------- the owner's side of it */

/*
** Where a follower's record goes is one an INSERT may name: a queue id of 0
** or more, of a topic that is not a system topic, or SCHEDULE_TOPIC_XXXX at
** a queue of a delay level (the follower rewrote a delayed message).
*/
static int check_record_queue(rmq_store *s, int i, const rmq_message *m, rmq_err *err) {
  bool schedule = (size_t)m->topic_len == strlen(RMQ_SCHEDULE_TOPIC) &&
                  memcmp(m->topic, RMQ_SCHEDULE_TOPIC, (size_t)m->topic_len) == 0;
  bool ok = m->queue_id >= 0 && (schedule ? m->queue_id < s->commitlog.cfg.delay_level_count
                                          : !rmq_topic_system(m->topic, (size_t)m->topic_len));
  if (ok) return RMQ_OK;
  return rmq_err_set(err, RMQ_EINVAL,
                     "record %d of a put from another process names queue %d of topic %.*s, "
                     "which no INSERT may write",
                     i, m->queue_id, (int)m->topic_len, m->topic);
}

/* A follower's records: whole, valid, count of them, nothing after. */
static int check_records(rmq_store *s, const rmq_remote_request *q, rmq_err *err) {
  const uint8_t *p = q->body;
  size_t left = q->body_len;
  int rc;
  for (int i = 0; i < q->count; i++) {
    rmq_message m;
    /* Its body CRC too: recovery would cut a record that fails it, and what follows. */
    rmq_decode_status st = rmq_message_decode(p, left, true, &m);
    if (st != RMQ_DECODE_OK || !rmq_topic_valid(m.topic, (size_t)m.topic_len)) {
      return rmq_err_set(err, RMQ_EINVAL,
                         "record %d of a put from another process is not valid (%s)", i,
                         rmq_decode_status_name(st));
    }
    rc = check_record_queue(s, i, &m, err);
    if (rc != RMQ_OK) return rc;
    /* The limits of a local put (rmq_commitlog_put): the body, and the record's slack. */
    if (m.body_len > s->cfg.max_message_size ||
        m.total_size > s->cfg.max_message_size + RMQ_RECORD_SLACK) {
      return rmq_err_set(
          err, RMQ_EINVAL,
          "record %d of a put from another process: body of %d bytes (record of %d), "
          "more than max_message_size (%d bytes)",
          i, m.body_len, m.total_size, s->cfg.max_message_size);
    }
    p += m.total_size;
    left -= (size_t)m.total_size;
  }
  if (left != 0 || q->count <= 0) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "a put from another process holds %zu bytes past its %d records", left,
                       q->count);
  }
  return RMQ_OK;
}

/*
** A follower asked for durable (its flush='sync') while this owner flushes
** asynchronously; what it appended itself is taken in first.
*/
static int wait_durable(rmq_store *s, int64_t end, bool sync, rmq_err *err) {
  rmq_commitlog_follow_shared(&s->commitlog);
  int64_t flushed;
  int rc = sync && !s->cfg.flush_sync ? rmq_flush_all(s->flush, &flushed, err) : RMQ_OK;
  return rc == RMQ_OK ? rmq_store_wait_flushed(s, end, err) : rc;
}

static int serve_put(rmq_store *s, const rmq_remote_request *q, rmq_remote_response *r,
                     rmq_err *err) {
  /* A request from this process (after a take-over) holds its records as the put had them. */
  int rc = q->spans ? RMQ_OK : check_records(s, q, err);
  if (rc != RMQ_OK) return rc;
  rmq_span records = {(uint8_t *)q->body, q->body_len};
  rmq_put_result *results = NULL;
  if ((q->flags & RMQ_REQUEST_RESULTS) && !(results = calloc((size_t)q->count, sizeof *results))) {
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  }
  put_args a = {.spans = q->spans ? q->spans : &records,
                .nspans = q->spans ? q->nspans : 1,
                .n = q->count,
                .results = results,
                .first_offset = &r->a,
                .end_offset = &r->b};
  r->a = -1;
  rc = timed_put(s, &a, err);
  if (rc == RMQ_OK) {
    /* Readable when the answer goes, durable too unless the follower waits on its own. */
    rc = q->flags & RMQ_REQUEST_NOWAIT ? rmq_store_handle_flush(s, r->b, false, err)
                                       : wait_durable(s, r->b, q->flags & RMQ_REQUEST_SYNC, err);
  }
  if (results && r->a >= 0 && (r->results = malloc(sizeof *r->results * (size_t)q->count))) {
    for (int i = 0; i < q->count; i++) {
      r->results[i] = (rmq_remote_result){results[i].queue_offset, results[i].store_timestamp};
    }
    r->results_count = q->count;
  }
  free(results);
  return rc;
}

/*
** A follower will append itself. Not when this owner's puts go through a
** write buffer (the pool's bytes reach the file later, by this process) or
** it is a slave (its log is its master's).
*/
static int serve_join(rmq_store *s, rmq_remote_response *r, rmq_err *err) {
  if (s->pool || s->cfg.role == RMQ_ROLE_SLAVE) {
    return rmq_err_set(err, RMQ_EINVAL, "the owner of %s makes every put itself (%s)", s->dir,
                       s->pool ? "transient_store_pool" : "a slave");
  }
  int rc = rmq_commitlog_let_others_append(&s->commitlog, err);
  if (rc != RMQ_OK) return rc;
  return rmq_commitlog_queue_offsets(&s->commitlog, &r->body, &r->body_len, &r->a, err);
}

static void serve_request(void *owner, const rmq_remote_request *q, rmq_remote_response *r) {
  rmq_store *s = owner;
  rmq_err err = {0};
  int rc, deleted = 0;
  switch (q->code) {
    case RMQ_REQUEST_PUT: rc = serve_put(s, q, r, &err); break;
    case RMQ_REQUEST_WAIT_DURABLE:
      rc = wait_durable(s, q->offset, q->flags & RMQ_REQUEST_SYNC, &err);
      break;
    case RMQ_REQUEST_COMMIT_OFFSET:
      rc = rmq_store_commit_offset(s, q->group, q->topic, q->count, q->offset, &err);
      break;
    case RMQ_REQUEST_SEND_BACK:
      rc = rmq_store_send_back(s, q->group, q->offset, &r->a, &err);
      break;
    case RMQ_REQUEST_FLUSH: rc = rmq_store_flush(s, &r->a, &err); break;
    case RMQ_REQUEST_JOIN: rc = serve_join(s, r, &err); break;
    case RMQ_REQUEST_CLEAN:
      rc = rmq_store_clean(s, &deleted, &err);
      r->a = deleted;
      break;
    default: rc = rmq_err_set(&err, RMQ_EINVAL, "request code %d is not one of ours", q->code);
  }
  r->rc = rc;
  snprintf(r->msg, sizeof r->msg, "%s", rc == RMQ_OK ? "" : err.msg);
  if (s->cfg.flush_sync || s->cfg.role == RMQ_ROLE_SYNC_MASTER)
    r->flags |= RMQ_RESPONSE_OWNER_WAITS;
}

/* The owner's listener; store_share names it on the shared page. */
static int start_server(rmq_store *s, rmq_err *err) {
  struct stat st;
  if (stat(s->dir, &st) != 0) {
    return rmq_err_set(err, RMQ_EIO, "cannot stat %s: %s", s->dir, strerror(errno));
  }
  /*
  ** Unique to this open (a forked child may still hold an earlier listener's
  ** name), and unpredictable: another user cannot bind it first.
  */
  uint64_t nonce = 0;
  if (getrandom(&nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce) {
    return rmq_err_set(err, RMQ_EIO, "cannot name the owner's socket: getrandom: %s",
                       strerror(errno));
  }
  snprintf(s->socket, sizeof s->socket, "sqlite-rocketmq/%llx/%llx/%d/%016llx",
           (unsigned long long)st.st_dev, (unsigned long long)st.st_ino, (int)getpid(),
           (unsigned long long)nonce);
  return rmq_remoting_server_start(s->socket, serve_request, s, &s->server, err);
}

/* A follower becomes the owner: the services open here, with the recovery a dead owner calls for. */
static int take_over_services(void *ctx, void **owner, rmq_err *err) {
  rmq_store *s = ctx;
  rmq_store *o = NULL;
  int rc = store_open(s->dir, &s->user_cfg, false, &o, err);
  *owner = o;
  return rc;
}

static void close_owner(void *owner) { rmq_store_close(owner); }

static int start_follower(rmq_store *s, rmq_err *err) {
  s->staging = rmq_staging_pool_new(RMQ_STAGING_LINGER_MS);
  if (!s->staging) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  rmq_owner_link_ops ops = {take_over_services, serve_request, close_owner, s};
  return rmq_owner_link_start(s->dir, s->lock_fd, &ops, &s->link, err);
}
