/*
** stats.c: a store's figures in one struct (rmq_store_stats, see rmq.h),
** for rocketmq_stats and for monitoring, as RocketMQ's
** DefaultMessageStore.getRuntimeInfo gathers them.
*/
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io.h"
#include "store.h"

/* Add up the apparent and the allocated sizes of the files under path (no links followed). */
static void du(const char *path, int64_t *file_bytes, int64_t *disk_bytes) {
  DIR *d = opendir(path);
  if (d == NULL) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char child[PATH_MAX];
    struct stat st;
    if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child ||
        lstat(child, &st) != 0) {
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      du(child, file_bytes, disk_bytes);
    } else if (S_ISREG(st.st_mode)) {
      *file_bytes += st.st_size;
      *disk_bytes += (int64_t)st.st_blocks * 512;
    }
  }
  closedir(d);
}

/* Consume queues and their segments. */
static int count_queues(rmq_store *s, rmq_stats *st, rmq_err *err) {
  rmq_consume_queue **all;
  int n;
  int rc = rmq_cq_table_snapshot(rmq_store_consume_queues(s), &all, &n, err);
  if (rc != RMQ_OK) return rc;
  st->consume_queues = n;
  st->consumequeue_files = 0;
  for (int i = 0; i < n; i++) st->consumequeue_files += rmq_mfq_count(&all[i]->mfq);
  free(all);
  return RMQ_OK;
}

static void dispatch_stats(rmq_store *s, rmq_stats *st) {
  rmq_reput_service *reput = rmq_store_reput(s);
  st->dispatched_offset = reput ? rmq_reput_offset(reput) : st->committed_offset;
  st->dispatch_behind_bytes = reput ? rmq_reput_behind(reput) : 0;
  st->dispatch_skipped = reput ? rmq_reput_skipped(reput) : 0;
}

static void retention_stats(rmq_store *s, rmq_stats *st) {
  rmq_commitlog *cl = rmq_store_commitlog(s);
  int percent = rmq_io_disk_used_percent(cl->mfq.dir);
  st->disk_used_ratio = percent < 0 ? -1 : percent / 100.0;
  st->disk_full = rmq_commitlog_disk_full(cl) != 0;
  rmq_clean_counts(rmq_store_clean_service(s), &st->clean_runs, &st->files_deleted);
  st->files_awaiting_readers = rmq_retired_count(rmq_store_retired(s));
}

int rmq_store_stats(rmq_store *s, rmq_stats *st, rmq_err *err) {
  memset(st, 0, sizeof *st);
  int refreshed = rmq_store_refresh(s, err);
  if (refreshed != RMQ_OK) return refreshed;
  rmq_commitlog *cl = rmq_store_commitlog(s);
  rmq_index_service *index = rmq_store_index(s);
  int rc = count_queues(s, st, err);
  if (rc != RMQ_OK) return rc;
  st->commitlog_min_offset = rmq_commitlog_min_offset(cl);
  st->commitlog_max_offset = rmq_mfq_max_wrote(&cl->mfq);
  st->committed_offset = rmq_commitlog_max_offset(cl);
  st->flushed_offset = rmq_commitlog_flushed_offset(cl);
  dispatch_stats(s, st);
  st->put_count = atomic_load(&cl->put_count);
  st->put_latency_p50_ns = rmq_store_put_latency_ns(s, 0.5);
  st->put_latency_p99_ns = rmq_store_put_latency_ns(s, 0.99);
  st->commitlog_files = rmq_mfq_count(&cl->mfq);
  st->commitlog_file_size = cl->mfq.file_size;
  st->index_files = rmq_index_service_count(index);
  st->index_slots = index->slot_num;
  st->index_entries = index->index_num;
  du(rmq_store_dir(s), &st->file_bytes, &st->disk_bytes);
  st->recovery = rmq_store_recovery_report(s);
  st->poisoned = atomic_load(&cl->poisoned);
  /* poison_msg is written once, before poisoned is set. */
  if (st->poisoned) snprintf(st->poison_reason, sizeof st->poison_reason, "%s", cl->poison_msg);
  rmq_schedule_service *schedule = rmq_store_schedule(s);
  st->schedule_delivered = schedule ? rmq_schedule_delivered(schedule) : 0;
  const char *report = rmq_store_delay_offset_report(s);
  st->delay_offsets = report[0] ? report : NULL;
  retention_stats(s, st);
  rmq_store_service_runs(s, st);
  rmq_store_ha_stats(s, st);
  return RMQ_OK;
}
