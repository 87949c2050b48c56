/*
** transient_store_pool.h: TransientStorePool.
**
** Holds `buffers` off-heap buffers of one segment each, mlock'ed when
** possible; a segment that borrows one is written in memory and committed
** to its file by CommitRealTimeService.
*/
#ifndef RMQ_TRANSIENT_STORE_POOL_H
#define RMQ_TRANSIENT_STORE_POOL_H

#include <stdint.h>

#include "rmq_err.h"

typedef struct rmq_transient_store_pool rmq_transient_store_pool;

rmq_transient_store_pool *rmq_transient_store_pool_new(int buffers, int32_t size, rmq_err *err);
void rmq_transient_store_pool_free(rmq_transient_store_pool *pool);
/* A buffer, or NULL when all are lent. */
uint8_t *rmq_transient_store_pool_borrow(rmq_transient_store_pool *pool);
void rmq_transient_store_pool_return(rmq_transient_store_pool *pool, uint8_t *buf);

#endif
