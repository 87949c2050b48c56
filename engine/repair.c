/*
** repair.c: rmq_store_repair (the contract is in rmq.h).
**
** First the commit log (rmq_store_repair_with: damage moved aside, `abort`
** left). Then, under the same lock, the derived files: rmq_verify finds
** every defect of the repaired store, and each consume queue or index file
** it names is set aside into the same kind of damaged/ directory from the
** segment holding its first defect on. The checkpoint is then moved back so
** that the next open, which recovers abnormally, dispatches the log again
** from before them (DefaultMessageStore.recover, from the segment the
** checkpoint's time picks): the dispatcher skips what the sound queues and
** index files hold and writes the rest.
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "damaged.h"
#include "file_name.h"
#include "index_file.h"
#include "io.h"
#include "rmq.h"
#include "store.h"

/* A consume queue to set aside from one of its entries on. */
typedef struct damaged_queue {
  char topic[RMQ_MAX_TOPIC_LEN + 1];
  int32_t queue_id;
  int64_t from; /* queue offset of its first damaged entry */
} damaged_queue;

/* What verify found damaged in the derived files. */
typedef struct repair_plan {
  damaged_queue *queues;
  int n, cap;
  char index_name[18]; /* the first damaged index file, "" when none */
  int64_t index_phy;   /* the first record whose key has no item; INT64_MAX: none */
  int64_t log_end;     /* what leads at or past it, the next open cuts */
} repair_plan;

static int add_queue(repair_plan *p, const char *topic, int32_t queue_id, int64_t from) {
  for (int i = 0; i < p->n; i++) {
    damaged_queue *q = &p->queues[i];
    if (q->queue_id != queue_id || strcmp(q->topic, topic) != 0) continue;
    if (from < q->from) q->from = from;
    return RMQ_OK;
  }
  if (p->n == p->cap) {
    int cap = p->cap ? p->cap * 2 : 8;
    damaged_queue *grown = realloc(p->queues, (size_t)cap * sizeof *grown);
    if (!grown) return RMQ_ENOMEM;
    p->queues = grown;
    p->cap = cap;
  }
  damaged_queue *q = &p->queues[p->n++];
  snprintf(q->topic, sizeof q->topic, "%s", topic);
  q->queue_id = queue_id;
  q->from = from;
  return RMQ_OK;
}

/* rmq_defect_fn: note the queue or index file a defect is in. */
static int plan_defect(void *ctx, const rmq_defect *d) {
  repair_plan *p = ctx;
  if (d->phy_offset >= p->log_end) return RMQ_OK; /* past the log's end: recovery cuts it */
  if (d->topic && d->queue_offset >= 0) return add_queue(p, d->topic, d->queue_id, d->queue_offset);
  if (strncmp(d->file, "index/", 6) == 0 && strlen(d->file + 6) == 17) {
    if (!p->index_name[0] || strcmp(d->file + 6, p->index_name) < 0) {
      snprintf(p->index_name, sizeof p->index_name, "%s", d->file + 6);
    }
  } else if (strcmp(d->kind, "index_gap") == 0 && d->phy_offset < p->index_phy) {
    p->index_phy = d->phy_offset;
  }
  return RMQ_OK;
}

/* Names in dir, sorted; *n 0 when it cannot be listed. */
static char **list_dir(const char *dir, int *n) {
  struct dirent **ents;
  *n = scandir(dir, &ents, NULL, alphasort);
  if (*n < 0) {
    *n = 0;
    return NULL;
  }
  char **names = calloc((size_t)(*n ? *n : 1), sizeof *names);
  for (int i = 0; i < *n; i++) {
    if (names) names[i] = strdup(ents[i]->d_name);
    free(ents[i]);
  }
  free(ents);
  return names;
}

static void free_names(char **names, int n) {
  for (int i = 0; names && i < n; i++) free(names[i]);
  free(names);
}

/* dir/name into path (PATH_MAX bytes); false when it does not fit. */
static bool join(char *path, const char *dir, const char *name) {
  return snprintf(path, PATH_MAX, "%s/%s", dir, name) < PATH_MAX;
}

static int64_t file_size(const char *dir, const char *name) {
  char path[PATH_MAX];
  struct stat st;
  return join(path, dir, name) && stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

/* The segments of queue q from the one holding its first damaged entry on. */
static int set_aside_queue(const char *store, const char *to, const damaged_queue *q,
                           int64_t *moved, rmq_err *err) {
  char dir[PATH_MAX], sub[PATH_MAX];
  snprintf(sub, sizeof sub, "consumequeue/%s/%d", q->topic, (int)q->queue_id);
  if (!join(dir, store, sub))
    return rmq_err_set(err, RMQ_EINVAL, "path %s/%s is too long", store, sub);
  int n, rc = RMQ_OK;
  char **names = list_dir(dir, &n);
  int64_t size = -1;
  for (int i = 0; rc == RMQ_OK && i < n; i++) {
    int64_t start;
    if (!names || !names[i] || rmq_file_name_parse(names[i], &start) != 0) continue;
    if (size < 0) size = file_size(dir, names[i]);
    if (size > 0 && start + size > q->from * RMQ_CQ_UNIT_SIZE) {
      rc = rmq_damaged_move(dir, names[i], to, sub, moved, err);
    }
  }
  free_names(names, n);
  return rc;
}

/* The end times kept by the index files before `name`; the newest kept one's, 0 when none. */
static int64_t kept_index_end(const char *dir, const char *name) {
  int n;
  char **names = list_dir(dir, &n);
  int64_t end = 0;
  for (int i = 0; names && i < n && names[i] && strcmp(names[i], name) < 0; i++) {
    char path[PATH_MAX];
    uint8_t h[16];
    int fd = join(path, dir, names[i]) ? rmq_io_open(path, O_RDONLY | O_CLOEXEC, 0) : -1;
    if (fd < 0) continue;
    if (rmq_io_pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h) end = rmq_get64(h + 8);
    close(fd);
  }
  free_names(names, n);
  return end;
}

/* The first index file whose items reach phy (its endPhyOffset at or past it). */
static void index_file_reaching(const char *dir, int64_t phy, char name[18]) {
  int n;
  char **names = list_dir(dir, &n);
  for (int i = 0; names && i < n && names[i] && !name[0]; i++) {
    char path[PATH_MAX];
    uint8_t h[32];
    bool named = strlen(names[i]) == 17 && join(path, dir, names[i]);
    int fd = named ? rmq_io_open(path, O_RDONLY | O_CLOEXEC, 0) : -1;
    if (fd < 0) continue;
    if (rmq_io_pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h && rmq_get64(h + 24) >= phy) {
      snprintf(name, 18, "%s", names[i]);
    }
    close(fd);
  }
  free_names(names, n);
}

/* The index files from the plan's first damaged one on; the checkpoint's indexMsgTimestamp. */
static int set_aside_index(const char *store, const char *to, repair_plan *p, rmq_checkpoint *cp,
                           int64_t *moved, rmq_err *err) {
  char dir[PATH_MAX];
  if (!join(dir, store, "index")) return rmq_err_set(err, RMQ_EINVAL, "path %s is too long", store);
  if (p->index_phy != INT64_MAX) {
    char reaching[18] = "";
    index_file_reaching(dir, p->index_phy, reaching);
    if (reaching[0] && (!p->index_name[0] || strcmp(reaching, p->index_name) < 0)) {
      memcpy(p->index_name, reaching, sizeof reaching);
    }
  }
  if (!p->index_name[0]) return RMQ_OK;
  int64_t end = kept_index_end(dir, p->index_name);
  atomic_store(&cp->index_msg_timestamp, end);
  if (atomic_load(&cp->logics_msg_timestamp) > end) atomic_store(&cp->logics_msg_timestamp, end);
  int n, rc = RMQ_OK;
  char **names = list_dir(dir, &n);
  for (int i = 0; rc == RMQ_OK && names && i < n; i++) {
    if (names[i] && strlen(names[i]) == 17 && strcmp(names[i], p->index_name) >= 0) {
      rc = rmq_damaged_move(dir, names[i], to, "index", moved, err);
    }
  }
  free_names(names, n);
  return rc;
}

/* rmq_repair_step: the derived files verify finds damaged, set aside for the next open. */
static int repair_derived(void *ctx, const rmq_repair_state *st, rmq_err *err) {
  repair_plan *p = ctx;
  p->log_end = st->log_end;
  int rc = rmq_verify(st->dir, plan_defect, p, err);
  if (rc != RMQ_OK || (p->n == 0 && !p->index_name[0] && p->index_phy == INT64_MAX)) return rc;
  char to[PATH_MAX];
  snprintf(to, sizeof to, "%s", st->moved_to);
  if (!to[0]) rc = rmq_damaged_dir(st->dir, to, sizeof to, err);
  /* A queue is rebuilt by dispatching the whole log again: the others skip what they hold. */
  if (rc == RMQ_OK && p->n > 0) atomic_store(&st->cp->logics_msg_timestamp, 0);
  for (int i = 0; rc == RMQ_OK && i < p->n; i++) {
    rc = set_aside_queue(st->dir, to, &p->queues[i], st->moved, err);
  }
  if (rc == RMQ_OK) rc = set_aside_index(st->dir, to, p, st->cp, st->moved, err);
  return rc == RMQ_OK ? rmq_checkpoint_flush(st->cp, err) : rc;
}

int rmq_store_repair(const char *dir, int64_t *moved, rmq_err *err) {
  rmq_store *live = rmq_store_find(dir);
  *moved = 0;
  if (live) {
    rmq_store_release(live);
    return rmq_err_set(err, RMQ_ELOCKED, "store %s is open in this process: close it first", dir);
  }
  repair_plan p = {.index_phy = INT64_MAX};
  int rc = rmq_store_repair_with(dir, repair_derived, &p, moved, err);
  free(p.queues);
  return rc;
}
