/*
** transient_store_pool.c: TransientStorePool (see transient_store_pool.h).
*/
#include "transient_store_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

struct rmq_transient_store_pool {
  pthread_mutex_t mu;
  int32_t size;
  int count, available;
  uint8_t **all;  /* every buffer, for free */
  uint8_t **free; /* stack of available buffers */
};

rmq_transient_store_pool *rmq_transient_store_pool_new(int buffers, int32_t size, rmq_err *err) {
  rmq_transient_store_pool *p = calloc(1, sizeof *p);
  if (p) {
    pthread_mutex_init(&p->mu, NULL);
    p->all = calloc((size_t)buffers, sizeof *p->all);
    p->free = calloc((size_t)buffers, sizeof *p->free);
  }
  if (!p || !p->all || !p->free) goto oom;
  p->size = size;
  for (; p->count < buffers; p->count++) {
    void *b = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) goto oom;
    mlock(b, (size_t)size); /* best effort: RLIMIT_MEMLOCK may forbid it */
    p->all[p->count] = p->free[p->count] = b;
  }
  p->available = p->count;
  return p;
oom:
  rmq_transient_store_pool_free(p);
  rmq_err_set(err, RMQ_ENOMEM, "cannot allocate %d transient store buffers of %d bytes", buffers,
              size);
  return NULL;
}

void rmq_transient_store_pool_free(rmq_transient_store_pool *p) {
  if (!p) return;
  for (int i = 0; i < p->count; i++) munmap(p->all[i], (size_t)p->size);
  pthread_mutex_destroy(&p->mu);
  free(p->all);
  free(p->free);
  free(p);
}

uint8_t *rmq_transient_store_pool_borrow(rmq_transient_store_pool *p) {
  pthread_mutex_lock(&p->mu);
  uint8_t *b = p->available > 0 ? p->free[--p->available] : NULL;
  pthread_mutex_unlock(&p->mu);
  return b;
}

void rmq_transient_store_pool_return(rmq_transient_store_pool *p, uint8_t *buf) {
  pthread_mutex_lock(&p->mu);
  p->free[p->available++] = buf;
  pthread_mutex_unlock(&p->mu);
}
