/*
** staging.h: memory for the rows of open transactions, mapped in ahead.
**
** A transaction's rows wait in memory until COMMIT appends them. Memory the
** process has never touched costs a page fault per 4 KiB page (dear on a
** virtual machine), which weighs heavily on inserting a row of a few KiB.
** The pool hands out chunks whose pages the allocation thread has already
** faulted in: when a take leaves fewer than RMQ_STAGING_AHEAD ready
** while chunks are out (a transaction is being built), the filler maps
** chunks in until that many are ready again. Returned chunks are kept, up to
** RMQ_STAGING_KEEP, for the next transaction. The filler unmaps the rest
** once none has been given back for the pool's linger time, so that a store
** taking large transactions one after another reuses memory already mapped
** in (fresh memory is what costs). A store's staging memory is thus, at
** rest, at most RMQ_STAGING_KEEP x RMQ_STAGING_CHUNK.
*/
#ifndef RMQ_STAGING_H
#define RMQ_STAGING_H

#include <stdbool.h>
#include <stdint.h>

/* Bytes per chunk. */
#define RMQ_STAGING_CHUNK (4 << 20)
/* Ready chunks the filler keeps while chunks are out. */
#define RMQ_STAGING_AHEAD 2
/* Ready chunks kept at most; more returned are unmapped. */
#define RMQ_STAGING_KEEP 4

typedef struct rmq_staging_pool rmq_staging_pool;

/* How long a store keeps chunks beyond RMQ_STAGING_KEEP after the last was given back. */
#define RMQ_STAGING_LINGER_MS 5000

rmq_staging_pool *rmq_staging_pool_new(int64_t linger_ms);
/* Unmaps the ready chunks; every chunk taken must have been given back. */
void rmq_staging_pool_free(rmq_staging_pool *p);

/*
** A chunk of RMQ_STAGING_CHUNK bytes, mapped in when one is ready (else a
** fresh mapping), or NULL when out of memory. *fill: the pool wants its
** filler woken.
*/
void *rmq_staging_take(rmq_staging_pool *p, bool *fill);
/* Give a chunk back; true: the pool wants its filler woken (to unmap what it keeps no more). */
bool rmq_staging_give(rmq_staging_pool *p, void *chunk);

/* Chunks taken and not yet given back: the rows of open transactions. */
int rmq_staging_out(rmq_staging_pool *p);

/*
** The filler (the allocation thread): map in one more chunk if wanted, else
** unmap one given back beyond RMQ_STAGING_KEEP once they have lingered;
** true if it did either.
*/
bool rmq_staging_fill_step(rmq_staging_pool *p);

#endif
