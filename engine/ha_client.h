/*
** ha_client.h: the slave's side of replication (RocketMQ's HAClient).
**
** One thread connects to the master, reports the slave's commit-log end at
** once (RocketMQ waits haSendHeartbeatInterval first), then after every
** frame that made it grow and after each heartbeat interval of silence. A
** frame must start at the slave's end (an empty slave takes any segment's
** start and begins its log there); anything else drops the connection.
** Unlike RocketMQ, which appends raw bytes, the slave checks what it
** receives record by record (magic, lengths, body CRC, and the record's
** PHYSICALOFFSET against where it lands) and appends whole records only:
** the part of a record still in flight stays in memory, so the dispatcher
** never meets a partial record, and bytes that are no record (a master
** whose log diverged from the slave's) drop the connection with the reason
** instead of wedging the dispatcher. A dropped connection is retried once
** a heartbeat interval has passed since the last attempt began. The thread
** waits on its socket in poll(), with an eventfd that the stop writes.
*/
#ifndef RMQ_HA_CLIENT_H
#define RMQ_HA_CLIENT_H

#include <stdint.h>

#include "commitlog.h"
#include "rmq.h"

typedef struct rmq_ha_client rmq_ha_client;

/*
** Told after each append with the slave's new end: wake the dispatcher,
** flush when the store flushes synchronously. An error drops the connection.
*/
typedef int (*rmq_ha_appended_fn)(void *ctx, int64_t end, rmq_err *err);

/* Start replicating from cfg->ha_master into cl. RMQ_ENOMEM, RMQ_EIO (no thread). */
int rmq_ha_client_start(rmq_commitlog *cl, const rmq_config *cfg, rmq_ha_appended_fn appended,
                        void *ctx, rmq_ha_client **out, rmq_err *err);
/* Close the connection, stop the thread and free (NULL: nothing). */
void rmq_ha_client_stop(rmq_ha_client *c);

/* The slave's row for rocketmq_ha. */
int rmq_ha_client_rows(rmq_ha_client *c, rmq_ha_fn fn, void *ctx);
/* The slave's replication figures into st. */
void rmq_ha_client_stats(rmq_ha_client *c, rmq_stats *st);

#endif
