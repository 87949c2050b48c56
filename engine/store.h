/*
** store.h: the parts of an rmq_store (DefaultMessageStore), for the
** engine's components and its C tests; users of the engine see rmq.h only.
*/
#ifndef RMQ_STORE_H
#define RMQ_STORE_H

#include "clean.h"
#include "commitlog.h"
#include "consume_queue.h"
#include "index_file.h"
#include "remoting_command.h"
#include "reput.h"
#include "rmq.h"
#include "schedule.h"

/* The store's parts (NULL reput in a read-only store). */
rmq_commitlog *rmq_store_commitlog(rmq_store *s);
rmq_cq_table *rmq_store_consume_queues(rmq_store *s);
rmq_index_service *rmq_store_index(rmq_store *s);
rmq_reput_service *rmq_store_reput(rmq_store *s);
/* The clean service (its thread runs in a writable store only) and the store's retired files. */
rmq_clean_service *rmq_store_clean_service(rmq_store *s);
rmq_retired_files *rmq_store_retired(rmq_store *s);
/* The delayed-delivery service, NULL in a read-only store. */
rmq_schedule_service *rmq_store_schedule(rmq_store *s);
/* How the open found config/delayOffset.json: "" when it was sound or missing. */
const char *rmq_store_delay_offset_report(rmq_store *s);
/*
** rmq_store_put_encoded without waiting for flush='sync': *end_offset gets
** where the batch ends, for rmq_store_wait_flushed; on entry, a run's
** previous end or 0 (rmq_batch_append_unflushed).
*/
int rmq_store_put_encoded_unflushed(rmq_store *s, const rmq_span *spans, int nspans, int count,
                                    int64_t *first_offset, int64_t *end_offset, rmq_err *err);
/*
** rmq_store_put_encoded of the records in the first len bytes of file fd (a
** large transaction, rmq_batch); end_offset as rmq_store_put_encoded_unflushed,
** or NULL to wait as rmq_store_put_encoded does.
*/
int rmq_store_put_encoded_file(rmq_store *s, int fd, int64_t len, int count, int64_t *first_offset,
                               int64_t *end_offset, rmq_err *err);
/* The runs of the flush, commit and consume-queue flush services (rmq_stats). */
void rmq_store_service_runs(rmq_store *s, rmq_stats *st);
/*
** RMQ_EINVAL, naming the limit, when a path under dir would pass PATH_MAX (the longest name under
** a store is known: a consume-queue segment of a topic of the longest length).
*/
int rmq_store_check_path(const char *dir, rmq_err *err);
/* mkdir -p dir; RMQ_EIO names the directory that could not be made. */
int rmq_store_make_dir(const char *dir, rmq_err *err);
/* In a forked child: close the inherited descriptor of the parent's lock, which the parent's
   engine alone holds and releases. */
void rmq_store_drop_inherited_lock(rmq_store *s);
/*
** rmq_store_repair's steps for the commit log (moving its damage aside),
** then, still under the store's lock, step (when not NULL) with the store's
** checkpoint, the log's repaired end and where its damage went ("" when
** nothing was moved), adding what it moves to *moved; `abort` is left when
** anything was. The caller makes sure that no engine of this process has
** the store open (rmq_store_find).
*/
typedef struct rmq_repair_state {
  const char *dir;
  rmq_checkpoint *cp;
  int64_t log_end;
  const char *moved_to;
  int64_t *moved;
} rmq_repair_state;
typedef int (*rmq_repair_step)(void *ctx, const rmq_repair_state *st, rmq_err *err);
int rmq_store_repair_with(const char *dir, rmq_repair_step step, void *ctx, int64_t *moved,
                          rmq_err *err);
/*
** Opened for writing while another process runs the services (a follower):
** what changes the store goes to that process, the owner.
*/
bool rmq_store_is_follower(rmq_store *s);
/* The replication figures of rmq_stats (role, ha_*). */
void rmq_store_ha_stats(rmq_store *s, rmq_stats *st);
/* The master's bound HA address ("ip:port"), NULL without ha_listen (tests ask for port 0). */
const char *rmq_store_ha_address(rmq_store *s);
/* Store time of the record at phy_offset, or -1 (a rmq_cq_store_time_fn; store is the rmq_store). */
int64_t rmq_store_time_at(void *store, int64_t phy_offset, int32_t size);

#endif
