/*
** registry.c: one engine per store per process (rmq_store_acquire,
** rmq_store_find, rmq_store_release in rmq.h): the process-wide table of
** open stores.
**
** A store is its directory's device and inode, not the path that names it:
** a bind mount, a symbolic link or a renamed directory reaches the same
** engine. Each entry remembers the process that opened it: a forked child
** inherits the table but not the engine's threads, so it never uses nor
** closes its parent's engines; it opens its own, and finds the store locked
** by the parent. The child also closes its copy of each inherited lock
** descriptor at fork, so that the lock lives exactly as long as the parent's
** engine.
**
** A plain list under one mutex: a process opens few stores, and opens are
** rare next to reads and appends, which never touch the registry.
*/
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"

typedef struct registry_entry {
  dev_t dev;
  ino_t ino;
  pid_t pid; /* the process whose engine this is */
  char *real_dir;
  rmq_store *store;
  int refs;
  struct registry_entry *next;
} registry_entry;

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t registry_once = PTHREAD_ONCE_INIT;
static registry_entry *registry_head;

/* fork() takes the registry lock, so that the child's copy of the table is whole. */
static void before_fork(void) { pthread_mutex_lock(&registry_mu); }
static void after_fork_parent(void) { pthread_mutex_unlock(&registry_mu); }
static void after_fork_child(void) {
  for (registry_entry *e = registry_head; e; e = e->next) rmq_store_drop_inherited_lock(e->store);
  pthread_mutex_unlock(&registry_mu);
}
static void registry_init(void) {
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

static registry_entry *find_entry(const struct stat *st) {
  pid_t me = getpid();
  for (registry_entry *e = registry_head; e; e = e->next) {
    if (e->pid == me && e->dev == st->st_dev && e->ino == st->st_ino) return e;
  }
  return NULL;
}

/* An engine of this process opened on real_dir when that path named another directory. */
static registry_entry *find_replaced(const char *real_dir) {
  pid_t me = getpid();
  for (registry_entry *e = registry_head; e; e = e->next) {
    if (e->pid == me && strcmp(e->real_dir, real_dir) == 0) return e;
  }
  return NULL;
}

/* ------------------------------------------------------------- settings */

typedef enum setting_kind {
  SET_INT,
  SET_BOOL,
  SET_FLUSH,
  SET_TEXT,
  SET_HOST,
  SET_ROLE,
  SET_CODEC
} setting_kind;

typedef struct setting {
  const char *name;
  setting_kind kind;
  size_t offset; /* into rmq_config */
} setting;

_Static_assert(sizeof(int32_t) == sizeof(int), "SET_INT reads int32_t fields as int");

#define SETTING(n, kind) \
  { #n, kind, offsetof(rmq_config, n) }

/* Every setting of rmq_config but readonly: two opens of one store must agree on all. */
static const setting settings[] = {
    {"flush", SET_FLUSH, offsetof(rmq_config, flush_sync)},
    SETTING(commitlog_file_size, SET_INT),
    SETTING(consumequeue_entries, SET_INT),
    SETTING(index_slots, SET_INT),
    SETTING(index_entries, SET_INT),
    SETTING(max_message_size, SET_INT),
    SETTING(default_queues, SET_INT),
    SETTING(delay_levels, SET_TEXT),
    SETTING(file_reserved_hours, SET_INT),
    SETTING(delete_when, SET_TEXT),
    SETTING(disk_max_used_ratio, SET_INT),
    SETTING(disk_clean_forcibly_ratio, SET_INT),
    SETTING(disk_warning_ratio, SET_INT),
    SETTING(clean_interval_ms, SET_INT),
    SETTING(clean_first_delay_ms, SET_INT),
    SETTING(clean_grace_ms, SET_INT),
    SETTING(store_host, SET_HOST),
    SETTING(sync_flush_timeout_ms, SET_INT),
    SETTING(transient_store_pool, SET_INT),
    SETTING(warm_mapped_file, SET_BOOL),
    SETTING(use_spin_lock, SET_BOOL),
    SETTING(flush_interval_ms, SET_INT),
    SETTING(max_reconsume_times, SET_INT),
    SETTING(enable_lmq, SET_BOOL),
    SETTING(max_lmq_queues, SET_INT),
    SETTING(role, SET_ROLE),
    SETTING(ha_listen, SET_TEXT),
    SETTING(ha_master, SET_TEXT),
    SETTING(ha_slave_timeout_ms, SET_INT),
    SETTING(ha_heartbeat_ms, SET_INT),
    SETTING(ha_housekeeping_ms, SET_INT),
    /* INSERT compresses with the engine's settings: a second table cannot ask for others. */
    SETTING(compress_over, SET_INT),
    SETTING(compress_type, SET_CODEC),
    SETTING(compress_level, SET_INT),
};

/* The setting's value in cfg, as an argument would give it. */
static void format_setting(const setting *k, const rmq_config *cfg, char *out, size_t cap) {
  const char *p = (const char *)cfg + k->offset;
  switch (k->kind) {
    case SET_INT: snprintf(out, cap, "%d", *(const int *)p); return;
    case SET_BOOL: snprintf(out, cap, "%d", *(const bool *)p); return;
    case SET_FLUSH: snprintf(out, cap, "'%s'", *(const bool *)p ? "sync" : "async"); return;
    case SET_TEXT: snprintf(out, cap, "'%s'", p); return;
    case SET_ROLE: snprintf(out, cap, "'%s'", rmq_role_name(*(const rmq_role *)p)); return;
    case SET_CODEC: snprintf(out, cap, "'%s'", rmq_codec_name(*(const rmq_codec *)p)); return;
    case SET_HOST: {
      char host[64];
      rmq_host_format((const rmq_host *)p, host, sizeof host);
      snprintf(out, cap, "'%s'", host);
      return;
    }
  }
}

/* The first setting on which a and b differ, or NULL. */
static const setting *differing_setting(const rmq_config *a, const rmq_config *b) {
  for (size_t i = 0; i < sizeof settings / sizeof *settings; i++) {
    char va[600], vb[600];
    format_setting(&settings[i], a, va, sizeof va);
    format_setting(&settings[i], b, vb, sizeof vb);
    if (strcmp(va, vb) != 0) return &settings[i];
  }
  return NULL;
}

/* ------------------------------------------------------------ acquire */

/* The directory's real path and identity; a writable open creates it (mkdir -p) first. */
static int resolve(const char *dir, bool create, char real[PATH_MAX], struct stat *st,
                   rmq_err *err) {
  int rc = rmq_store_check_path(dir, err);
  if (rc == RMQ_OK && create) rc = rmq_store_make_dir(dir, err);
  if (rc != RMQ_OK) return rc;
  if (!realpath(dir, real) || stat(real, st) != 0) {
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
  const setting *diff = cfg->readonly ? NULL : differing_setting(have, cfg);
  if (diff) {
    char was[600], asked[600];
    format_setting(diff, have, was, sizeof was);
    format_setting(diff, cfg, asked, sizeof asked);
    return rmq_err_set(err, RMQ_EINVAL,
                       "store %s is already open in this process with %s=%s; this open asks for "
                       "%s=%s: open it with the same settings",
                       e->real_dir, diff->name, was, diff->name, asked);
  }
  e->refs++;
  *out = e->store;
  return RMQ_OK;
}

/* Open the store as a new entry (the registry lock is held). */
static int open_entry(const char *real, const struct stat *st, const rmq_config *cfg,
                      rmq_store **out, rmq_err *err) {
  /* The old engine still writes by path: two engines would write one directory's files. */
  registry_entry *old = find_replaced(real);
  if (old) {
    return rmq_err_set(err, RMQ_ELOCKED,
                       "store %s is locked by an engine of this process opened on the directory "
                       "this path named before it was removed or renamed; close that store's "
                       "tables first",
                       real);
  }
  registry_entry *e = calloc(1, sizeof *e);
  if (e == NULL || (e->real_dir = strdup(real)) == NULL) {
    free(e);
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  }
  int rc = rmq_store_open(real, cfg, &e->store, err);
  if (rc != RMQ_OK) {
    free(e->real_dir);
    free(e);
    return rc;
  }
  e->dev = st->st_dev;
  e->ino = st->st_ino;
  e->pid = getpid();
  e->refs = 1;
  e->next = registry_head;
  registry_head = e;
  *out = e->store;
  return RMQ_OK;
}

int rmq_store_acquire(const char *dir, const rmq_config *cfg, rmq_store **out, rmq_err *err) {
  char real[PATH_MAX];
  struct stat st;
  *out = NULL;
  pthread_once(&registry_once, registry_init);
  int rc = resolve(dir, !cfg->readonly, real, &st, err);
  if (rc != RMQ_OK) return rc;
  pthread_mutex_lock(&registry_mu);
  registry_entry *e = find_entry(&st);
  rc = e ? share(e, cfg, out, err) : open_entry(real, &st, cfg, out, err);
  pthread_mutex_unlock(&registry_mu);
  return rc;
}

rmq_store *rmq_store_find(const char *dir) {
  struct stat st;
  if (stat(dir, &st) != 0) return NULL;
  pthread_mutex_lock(&registry_mu);
  registry_entry *e = find_entry(&st);
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
  /* Closing joins threads and flushes: done outside the registry lock, and never in a forked
     child, which has none of the parent's threads (the engine is left as it is). */
  if (last) {
    if (e->pid == getpid()) rmq_store_close(e->store);
    free(e->real_dir);
    free(e);
  }
}
