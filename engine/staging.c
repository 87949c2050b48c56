/*
** staging.c: the pool of transaction staging chunks (see staging.h).
**
** Ready chunks form a stack, so the warmest (most recently returned) chunk
** is handed out first. The filler maps a chunk in outside the mutex: only
** pushing it takes the lock. Chunks given back beyond RMQ_STAGING_KEEP are
** handed out again before any new one is mapped, and unmapped by the filler
** when they have lingered: freeing a large transaction's hundreds of MiB
** would otherwise hold up its COMMIT.
*/
#include "staging.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

struct rmq_staging_pool {
  pthread_mutex_t mu;
  void *ready[RMQ_STAGING_KEEP];
  int nready;
  int out;      /* chunks taken and not yet given back */
  bool want;    /* a take found fewer than RMQ_STAGING_AHEAD ready: fill up */
  void *excess; /* chunks beyond the kept ones, linked through their first bytes */
  int64_t linger_ms;
  int64_t excess_given_ms; /* when a chunk was last added to excess */
};

rmq_staging_pool *rmq_staging_pool_new(int64_t linger_ms) {
  rmq_staging_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  pthread_mutex_init(&p->mu, NULL);
  p->linger_ms = linger_ms;
  return p;
}

/* Unlink an excess chunk (with mu held); NULL if none. */
static void *pop_excess(rmq_staging_pool *p) {
  void *c = p->excess;
  if (c) p->excess = *(void **)c;
  return c;
}

/* Unmap one excess chunk (only once they have lingered, unless forced); false if none. */
static bool release_step(rmq_staging_pool *p, bool force) {
  pthread_mutex_lock(&p->mu);
  bool due = p->excess && (force || rmq_monotonic_ms() - p->excess_given_ms >= p->linger_ms);
  void *c = due ? pop_excess(p) : NULL;
  pthread_mutex_unlock(&p->mu);
  if (c) munmap(c, RMQ_STAGING_CHUNK);
  return c != NULL;
}

void rmq_staging_pool_free(rmq_staging_pool *p) {
  if (!p) return;
  while (release_step(p, true)) {
  }
  for (int i = 0; i < p->nready; i++) munmap(p->ready[i], RMQ_STAGING_CHUNK);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

/*
** A chunk of small pages. Huge pages would take 2 faults instead of 1024,
** but on a virtual machine whose host takes free memory back
** (virtio-balloon free-page reporting) a free 2 MiB block is what the host
** has taken, and backing it again costs the filler far more than small
** pages, which mostly come from memory still backed. The filler then falls
** behind and the inserting thread faults in huge pages itself. THP may be
** on for every mapping: refuse it explicitly.
*/
static void *map_chunk(void) {
  void *c = mmap(NULL, RMQ_STAGING_CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                 0);
  if (c == MAP_FAILED) return NULL;
  madvise(c, RMQ_STAGING_CHUNK, MADV_NOHUGEPAGE);
  return c;
}

void *rmq_staging_take(rmq_staging_pool *p, bool *fill) {
  pthread_mutex_lock(&p->mu);
  void *c = p->nready > 0 ? p->ready[--p->nready] : pop_excess(p);
  p->out++;
  /* Wake the filler once per shortfall, not on every take. */
  *fill = !p->want && p->nready < RMQ_STAGING_AHEAD;
  if (*fill) p->want = true;
  pthread_mutex_unlock(&p->mu);
  if (!c && !(c = map_chunk())) rmq_staging_give(p, NULL);
  return c;
}

/* Give back a chunk (NULL: only count a failed take back). */
bool rmq_staging_give(rmq_staging_pool *p, void *chunk) {
  pthread_mutex_lock(&p->mu);
  p->out--;
  bool wake = false;
  if (chunk && p->nready < RMQ_STAGING_KEEP) {
    p->ready[p->nready++] = chunk;
  } else if (chunk) {
    wake = !p->excess;
    *(void **)chunk = p->excess;
    p->excess = chunk;
    p->excess_given_ms = rmq_monotonic_ms();
  }
  pthread_mutex_unlock(&p->mu);
  return wake;
}

int rmq_staging_out(rmq_staging_pool *p) {
  pthread_mutex_lock(&p->mu);
  int out = p->out;
  pthread_mutex_unlock(&p->mu);
  return out;
}

/* Whether to fill; a pool with no chunk out has no transaction to fill for. */
static bool wanted(rmq_staging_pool *p) {
  pthread_mutex_lock(&p->mu);
  if (p->out == 0 || p->nready >= RMQ_STAGING_AHEAD) p->want = false;
  bool w = p->want;
  pthread_mutex_unlock(&p->mu);
  return w;
}

bool rmq_staging_fill_step(rmq_staging_pool *p) {
  if (!wanted(p)) return release_step(p, false);
  void *c = map_chunk();
  if (!c) return false;
  /* Without the call (Linux < 5.14) the chunk is handed out unmapped: only slower. */
  madvise(c, RMQ_STAGING_CHUNK, MADV_POPULATE_WRITE);
  pthread_mutex_lock(&p->mu);
  bool keep = p->nready < RMQ_STAGING_KEEP;
  if (keep) p->ready[p->nready++] = c;
  pthread_mutex_unlock(&p->mu);
  if (!keep) munmap(c, RMQ_STAGING_CHUNK);
  return keep;
}
