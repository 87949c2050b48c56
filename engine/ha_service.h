/*
** ha_service.h: the master's side of replication (RocketMQ's HAService,
** AcceptSocketService, HAConnection, GroupTransferService).
**
** One thread accepts slaves on the listen address; each slave then has one
** thread of its own that both reads its reports and sends it frames, with
** poll() on its socket and a wake-up eventfd: a thread per slave keeps a
** slow slave from holding up the others without a state machine of partial
** writes, and the number of slaves is small. These threads wait on
** sockets, so they sleep in poll() with an eventfd to wake them, not in a
** service thread's condition variable. RocketMQ's sender polls the
** log every 100 ms; ours is woken by each append (the commit log's appended
** hook), so an async slave lags by the link, not by a timer.
**
** Rules kept from RocketMQ: nothing is sent before the slave's first report,
** which is where the transfer starts (0: the start of the master's last
** segment); frames of at most 32 KiB never cross a segment and carry only
** what readers see; a heartbeat (offset, 0) after haSendHeartbeatInterval of
** silence; a slave not heard from for haHousekeepingInterval is dropped.
** Changed: a report beyond the master's end (a slave whose log is longer:
** diverged) is refused at once, the first one included, and so is a first
** report where no record of the master starts (a slave whose log holds
** other records), the reason kept for stats; a connected slave counts for
** sync_master only once it reported.
*/
#ifndef RMQ_HA_SERVICE_H
#define RMQ_HA_SERVICE_H

#include <stdint.h>

#include "commitlog.h"
#include "rmq.h"

typedef struct rmq_ha_service rmq_ha_service;

/*
** Listen on cfg->ha_listen (that address alone) and start accepting.
** RMQ_EIO naming ha_listen and the address when it cannot be bound (in use,
** not an address of this machine). RMQ_ENOMEM.
*/
int rmq_ha_service_start(rmq_commitlog *cl, const rmq_config *cfg, rmq_ha_service **out,
                         rmq_err *err);
/* Close every connection, stop the threads and free (NULL: nothing). */
void rmq_ha_service_stop(rmq_ha_service *ha);
/* The commit log grew: wake the senders that wait for data (ctx is the service). */
void rmq_ha_service_wakeup(void *ctx);
/* The bound address, "ip:port" (the port chosen by the system when 0 was asked). */
const char *rmq_ha_service_address(rmq_ha_service *ha);

/*
** GroupTransferService: wait until a slave acknowledged end_offset, at most
** timeout_ms. RMQ_ENOSLAVE at once when no connected slave has reported or
** the slaves are more than haSlaveFallbehindMax behind; RMQ_ETIMEOUT.
*/
int rmq_ha_service_wait(rmq_ha_service *ha, int64_t end_offset, int timeout_ms, rmq_err *err);

/* One row per connected slave (rmq_store_ha); fn's non-zero return stops and is returned. */
int rmq_ha_service_rows(rmq_ha_service *ha, rmq_ha_fn fn, void *ctx);
/* The master's replication figures into st. */
void rmq_ha_service_stats(rmq_ha_service *ha, rmq_stats *st);

#endif
