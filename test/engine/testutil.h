/*
** testutil.h: shared pieces of the engine's C tests: temporary store
** directories, opening a store, and building messages to put. For test
** programs: it includes check.h (guarded, so the counters stay single).
*/
#ifndef RMQ_TESTUTIL_H
#define RMQ_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "message.h"
#include "message_id.h"
#include "properties.h"
#include "rmq.h"
#include "store.h"

/* A fresh directory under /tmp (static buffer per call site is the caller's). */
static inline void tu_tmpdir(char *out, size_t cap) {
  snprintf(out, cap, "/tmp/rmq-ctest-XXXXXX");
  if (!mkdtemp(out)) {
    perror("mkdtemp");
    exit(2);
  }
}

static inline void tu_rmrf(const char *dir) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* A message of topic/queue with a text body and properties given as "k=v;k=v". */
typedef struct tu_msg {
  rmq_message m;
  char props[4096];
} tu_msg;

static inline rmq_message *tu_message(tu_msg *t, const char *topic, int queue_id, const void *body,
                                      int body_len, const char *kv) {
  memset(t, 0, sizeof *t);
  size_t len = 0;
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", kv ? kv : "");
  for (char *save = NULL, *p = strtok_r(buf, ";", &save); p; p = strtok_r(NULL, ";", &save)) {
    char *eq = strchr(p, '=');
    if (!eq) continue;
    rmq_properties_append(t->props, sizeof t->props, &len, p, (size_t)(eq - p), eq + 1,
                          strlen(eq + 1));
  }
  t->m.topic = topic;
  t->m.topic_len = (int32_t)strlen(topic);
  t->m.queue_id = queue_id;
  t->m.body = body;
  t->m.body_len = body_len;
  t->m.properties = t->props;
  t->m.properties_len = (int32_t)len;
  t->m.born_timestamp = 1700000000000;
  rmq_host_parse("198.51.100.7:54321", &t->m.born_host);
  return &t->m;
}

/*
** Open the store in dir with cfg, as one CHECK at the caller's line; prints
** the error if the open fails or reports one. Returns the store (NULL on failure).
*/
#define tu_open(dir, cfg) tu_open_at((dir), (cfg), __FILE__, __LINE__)

static inline rmq_store *tu_open_at(const char *dir, const rmq_config *cfg, const char *file,
                                    int line) {
  rmq_store *s = NULL;
  rmq_err err = {0};
  int rc = rmq_store_open(dir, cfg, &s, &err);
  check_result(rc == RMQ_OK, file, line, "rmq_store_open(dir, cfg) == RMQ_OK");
  if (rc != RMQ_OK || err.code) fprintf(stderr, "  %s\n", err.msg);
  return s;
}

static inline void tu_small_config(rmq_config *cfg, int32_t file_size) {
  rmq_config_init(cfg);
  cfg->commitlog_file_size = file_size;
  cfg->consumequeue_entries = 100;
  cfg->index_slots = 64;
  cfg->index_entries = 256;
}

#endif
