/*
** rebuild.c: the derived files' check at open (see rebuild.h).
*/
#include "rebuild.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "damaged.h"

void rmq_rebuild_init(rmq_rebuild *r, const char *dir, rmq_commitlog *cl, rmq_cq_table *cqs,
                      rmq_index_service *index, bool writable) {
  *r = (rmq_rebuild){
      .dir = dir, .cl = cl, .cqs = cqs, .index = index, .writable = writable, .from = INT64_MAX};
}

static void note(rmq_rebuild *r, const char *what) {
  size_t n = strlen(r->report);
  if (n + 2 >= sizeof r->report) return;
  snprintf(r->report + n, sizeof r->report - n, "%s%s", n ? "; " : "", what);
}

/* Dispatch again from `from` (-1: the log's start), the lowest asked for. */
static void redispatch(rmq_rebuild *r, int64_t from) {
  int64_t min = rmq_commitlog_min_offset(r->cl);
  if (from < min) from = min;
  if (from < r->from) r->from = from;
}

/* Before the first file is set aside: the directory for it, and an unclean exit until done. */
static int damaged_dir(rmq_rebuild *r, rmq_err *err) {
  if (r->damaged_dir[0]) return RMQ_OK;
  int rc = r->unclean ? r->unclean(r->unclean_ctx, err) : RMQ_OK;
  return rc == RMQ_OK ? rmq_damaged_dir(r->dir, r->damaged_dir, sizeof r->damaged_dir, err) : rc;
}

int rmq_rebuild_index(rmq_rebuild *r, rmq_err *err) {
  int64_t from = rmq_index_service_rebuild_from(r->index);
  if (from == INT64_MAX) return RMQ_OK;
  int rc = damaged_dir(r, err);
  if (rc == RMQ_OK) rc = rmq_index_service_set_aside(r->index, r->damaged_dir, &r->moved, err);
  if (rc != RMQ_OK) return rc;
  char what[400];
  snprintf(what, sizeof what, "index rebuilt from commit-log offset %lld (%.320s)", (long long)from,
           r->index->skipped.msg);
  note(r, what);
  rmq_err_clear(&r->index->skipped); /* nothing is skipped: what it held is dispatched again */
  redispatch(r, from);
  return RMQ_OK;
}

void rmq_rebuild_index_end(rmq_rebuild *r, int64_t end) {
  int64_t from = r->writable ? rmq_index_service_cut(r->index, end) : INT64_MAX;
  if (from == INT64_MAX) return;
  char what[200];
  snprintf(what, sizeof what,
           "index rebuilt from commit-log offset %lld (it held items past the "
           "log's end %lld)",
           (long long)from, (long long)end);
  note(r, what);
  redispatch(r, from);
}

/* Does the queue's last entry (e, as rmq_cq_check read it) lead to the record it should? */
static bool last_entry_sound(rmq_rebuild *r, rmq_consume_queue *cq, rmq_cq_entry e, int64_t *n,
                             char *why, size_t cap) {
  *n = rmq_cq_max_offset(cq) - 1;
  rmq_err err = {0};
  if (e.size == 0) return true;                                    /* no entry to check */
  if (e.phy_offset < rmq_commitlog_min_offset(r->cl)) return true; /* expired */
  rmq_commitlog_ref ref;
  rmq_message m;
  if (rmq_commitlog_read_message(r->cl, e.phy_offset, false, &ref, &m, &err) != RMQ_OK) {
    snprintf(why, cap, "entry %lld leads to no record at %lld: %.200s", (long long)*n,
             (long long)e.phy_offset, err.msg);
    return false;
  }
  bool ok = rmq_commitlog_entry_check(r->cl, cq->topic, cq->queue_id, *n, &e, &m, why, cap);
  rmq_commitlog_ref_release(&ref);
  return ok;
}

static int queue_damaged(rmq_rebuild *r, rmq_consume_queue *cq, int64_t n, const char *why,
                         rmq_err *err) {
  char what[400];
  if (!r->writable) {
    int rc = rmq_cq_mark_damaged(cq, n, why, err);
    if (rc != RMQ_OK) return rc;
    snprintf(what, sizeof what, "consume queue %s/%d damaged at entry %lld: %s", cq->topic,
             (int)cq->queue_id, (long long)n, why);
    note(r, what);
    return RMQ_OK;
  }
  int64_t from;
  int rc = damaged_dir(r, err);
  if (rc == RMQ_OK) rc = rmq_cq_set_aside_from(cq, n, r->damaged_dir, &r->moved, &from, err);
  if (rc != RMQ_OK) return rc;
  snprintf(what, sizeof what, "consume queue %s/%d rebuilt from entry %lld (%s)", cq->topic,
           (int)cq->queue_id, (long long)n, why);
  note(r, what);
  redispatch(r, from);
  return RMQ_OK;
}

int rmq_rebuild_queues(rmq_rebuild *r, rmq_err *err) {
  rmq_consume_queue **all;
  int count;
  int rc = rmq_cq_table_snapshot(r->cqs, &all, &count, err);
  int64_t seg = r->cl->mfq.file_size;
  for (int i = 0; rc == RMQ_OK && i < count; i++) {
    char why[300];
    rmq_cq_entry last;
    int64_t n = rmq_cq_check(all[i], seg, why, sizeof why, &last);
    if (n >= 0 || !last_entry_sound(r, all[i], last, &n, why, sizeof why)) {
      rc = queue_damaged(r, all[i], n, why, err);
    }
  }
  free(all);
  return rc;
}
