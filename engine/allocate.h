/*
** allocate.h: AllocateMappedFileService.
**
** The CommitLog writer asks for segment N and, in the same call, for N+1 in
** the background, so that a roll normally finds its next file created (and
** warmed when warm_mapped_file is set) already; a warmed segment is locked in
** memory while the writer writes it or waits for it, and unlocked after. The writer waits at most
** 5 s for its own file. Files pre-created but never claimed are deleted at
** shutdown, as RocketMQ does.
*/
#ifndef RMQ_ALLOCATE_H
#define RMQ_ALLOCATE_H

#include <stdbool.h>
#include <stdint.h>

#include "mapped_file.h"
#include "mapped_file_queue.h"
#include "staging.h"
#include "transient_store_pool.h"

#define RMQ_ALLOCATE_WAIT_MS 5000

typedef struct rmq_allocate_service rmq_allocate_service;

/*
** warm: warm_mapped_file (each new segment warmed and mlocked, and unlocked
** once the writer has left it); flush_sync: the warm forces its pages to disk
** as it goes.
*/
rmq_allocate_service *rmq_allocate_service_new(bool warm, bool flush_sync,
                                               rmq_transient_store_pool *pool,
                                               rmq_staging_pool *staging);
int rmq_allocate_service_start(rmq_allocate_service *svc, rmq_err *err);
/* Stop the thread, delete unclaimed pre-created files, free. */
void rmq_allocate_service_free(rmq_allocate_service *svc);

/*
** The segment at path (start from, size bytes), created by the service, and
** a request for next_path (next_from) queued behind it, when next_path is
** not NULL. NULL with err on
** failure or after RMQ_ALLOCATE_WAIT_MS.
*/
rmq_mapped_file *rmq_allocate_mapped_file(rmq_allocate_service *svc, const char *path, int64_t from,
                                          const char *next_path, int64_t next_from, int32_t size,
                                          rmq_err *err);

/* Make svc q's allocator (rmq_allocate_mapped_file); set q->allocate to NULL to detach it. */
void rmq_allocate_attach(rmq_allocate_service *svc, rmq_mapped_file_queue *q);

/* Pre-fault pages of mf (the writer's segment) ahead of its write position. */
void rmq_allocate_prefault(rmq_allocate_service *svc, rmq_mapped_file *mf);
/* Look for work now (a staging chunk was taken). */
void rmq_allocate_wakeup(rmq_allocate_service *svc);

#endif
