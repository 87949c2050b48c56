/*
** store.h: the parts of an rmq_store (DefaultMessageStore), for the
** engine's components and its C tests; users of the engine see rmq.h only.
*/
#ifndef RMQ_STORE_H
#define RMQ_STORE_H

#include "commitlog.h"
#include "consume_queue.h"
#include "index_file.h"
#include "reput.h"
#include "rmq.h"

/* The store's parts (NULL reput in a read-only store). */
rmq_commitlog *rmq_store_commitlog(rmq_store *s);
rmq_cq_table *rmq_store_consume_queues(rmq_store *s);
rmq_index_service *rmq_store_index(rmq_store *s);
rmq_reput_service *rmq_store_reput(rmq_store *s);
/* Store time of the record at phy_offset, or -1 (a rmq_cq_store_time_fn; store is the rmq_store). */
int64_t rmq_store_time_at(void *store, int64_t phy_offset, int32_t size);

#endif
