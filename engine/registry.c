/*
** registry.c: one engine per store directory per process (rmq_store_acquire,
** rmq_store_find, rmq_store_release in rmq.h): the process-wide table of
** open stores, compared by real path.
**
** A plain list under one mutex: a process opens few stores, and opens are
** rare next to reads and appends, which never touch the registry.
*/
#include "rmq.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct registry_entry {
  char *real_dir;
  rmq_store *store;
  int refs;
  struct registry_entry *next;
} registry_entry;

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static registry_entry *registry_head;

static registry_entry *find_entry(const char *real_dir) {
  for (registry_entry *e = registry_head; e; e = e->next) {
    if (strcmp(e->real_dir, real_dir) == 0) return e;
  }
  return NULL;
}

/* The settings two opens of one store must agree on; NULL when they do. */
static const char *differing_setting(const rmq_config *a, const rmq_config *b) {
  if (a->flush_sync != b->flush_sync) return "flush";
  if (a->consumequeue_entries != b->consumequeue_entries) return "consumequeue_entries";
  if (a->index_slots != b->index_slots) return "index_slots";
  if (a->index_entries != b->index_entries) return "index_entries";
  if (a->max_message_size != b->max_message_size) return "max_message_size";
  if (a->transient_store_pool != b->transient_store_pool) return "transient_store_pool";
  if (strcmp(a->delay_levels, b->delay_levels) != 0) return "delay_levels";
  if (memcmp(&a->store_host, &b->store_host, sizeof a->store_host) != 0) return "store_host";
  return NULL;
}

/* realpath of dir; a writable open creates the directory first. */
static int resolve(const char *dir, bool create, char real[PATH_MAX], rmq_err *err) {
  if (create && mkdir(dir, 0755) != 0 && errno != EEXIST) {
    return rmq_err_set(err, RMQ_EIO, "cannot create %s: %s", dir, strerror(errno));
  }
  if (!realpath(dir, real)) {
    return rmq_err_set(err, errno == ENOENT ? RMQ_ENOTFOUND : RMQ_EIO, "cannot open store %s: %s",
                       dir, strerror(errno));
  }
  return RMQ_OK;
}

static int share(registry_entry *e, const rmq_config *cfg, rmq_store **out, rmq_err *err) {
  const rmq_config *have = rmq_store_config(e->store);
  if (have->readonly && !cfg->readonly) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "store %s is open read-only in this process; close it before opening it "
                       "for writing",
                       e->real_dir);
  }
  const char *diff = cfg->readonly ? NULL : differing_setting(have, cfg);
  if (diff) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "store %s is already open in this process with another %s; open it "
                       "with the same settings",
                       e->real_dir, diff);
  }
  e->refs++;
  *out = e->store;
  return RMQ_OK;
}

int rmq_store_acquire(const char *dir, const rmq_config *cfg, rmq_store **out, rmq_err *err) {
  char real[PATH_MAX];
  *out = NULL;
  int rc = resolve(dir, !cfg->readonly, real, err);
  if (rc != RMQ_OK) return rc;
  pthread_mutex_lock(&registry_mu);
  registry_entry *e = find_entry(real);
  if (e) {
    rc = share(e, cfg, out, err);
  } else if ((e = calloc(1, sizeof *e)) == NULL || (e->real_dir = strdup(real)) == NULL) {
    free(e);
    rc = rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  } else if ((rc = rmq_store_open(real, cfg, &e->store, err)) != RMQ_OK) {
    free(e->real_dir);
    free(e);
  } else {
    e->refs = 1;
    e->next = registry_head;
    registry_head = e;
    *out = e->store;
  }
  pthread_mutex_unlock(&registry_mu);
  return rc;
}

rmq_store *rmq_store_find(const char *dir) {
  char real[PATH_MAX];
  if (!realpath(dir, real)) return NULL;
  pthread_mutex_lock(&registry_mu);
  registry_entry *e = find_entry(real);
  if (e) e->refs++;
  pthread_mutex_unlock(&registry_mu);
  return e ? e->store : NULL;
}

void rmq_store_release(rmq_store *s) {
  if (!s) return;
  pthread_mutex_lock(&registry_mu);
  registry_entry **p = &registry_head;
  while (*p && (*p)->store != s) p = &(*p)->next;
  registry_entry *e = *p;
  bool last = e && --e->refs == 0;
  if (last) *p = e->next;
  pthread_mutex_unlock(&registry_mu);
  /* Closing joins threads and flushes: done outside the registry lock. */
  if (last) {
    rmq_store_close(e->store);
    free(e->real_dir);
    free(e);
  }
}
