/*
** allocate.h: AllocateMappedFileService and TransientStorePool (spec §1.2, §9.2).
**
** The CommitLog writer asks for segment N and, in the same call, for N+1 in
** the background, so that a roll normally finds its next file created (and
** warmed when warm_mapped_file is set) already. The writer waits at most
** 5 s for its own file. Files pre-created but never claimed are deleted at
** shutdown, as RocketMQ does.
**
** The TransientStorePool holds `size` off-heap buffers of one segment each,
** mlock'ed when possible; a segment that borrows one is written in memory
** and committed to its file by CommitRealTimeService.
*/
#ifndef RMQ_ALLOCATE_H
#define RMQ_ALLOCATE_H

#include <stdbool.h>
#include <stdint.h>

#include "mapped_file.h"
#include "staging.h"

#define RMQ_ALLOCATE_WAIT_MS 5000

rmq_allocate_service *rmq_allocate_service_new(bool warm, rmq_transient_store_pool *pool,
                                               rmq_staging_pool *staging);
int rmq_allocate_service_start(rmq_allocate_service *svc, rmq_err *err);
/* Stop the thread, delete unclaimed pre-created files, free. */
void rmq_allocate_service_free(rmq_allocate_service *svc);

/*
** The segment at path (start from, size bytes), created by the service, and
** a request for next_path (next_from) queued behind it. NULL with err on
** failure or after RMQ_ALLOCATE_WAIT_MS.
*/
rmq_mapped_file *rmq_allocate_mapped_file(rmq_allocate_service *svc, const char *path,
                                          int64_t from, const char *next_path,
                                          int64_t next_from, int32_t size, rmq_err *err);

/* Pre-fault pages of mf (the writer's segment) ahead of its write position. */
void rmq_allocate_prefault(rmq_allocate_service *svc, rmq_mapped_file *mf);
/* Look for work now (a staging chunk was taken). */
void rmq_allocate_wakeup(rmq_allocate_service *svc);

rmq_transient_store_pool *rmq_transient_store_pool_new(int buffers, int32_t size, rmq_err *err);
void rmq_transient_store_pool_free(rmq_transient_store_pool *pool);
/* A buffer, or NULL when all are lent. */
uint8_t *rmq_transient_store_pool_borrow(rmq_transient_store_pool *pool);
void rmq_transient_store_pool_return(rmq_transient_store_pool *pool, uint8_t *buf);

#endif
