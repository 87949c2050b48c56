/*
** golden_queues_dump.c: print what engine/consume_queue.c and
** engine/index_file.c read from a RocketMQ store, as JSON lines, for
** test/golden_queues.py to compare with expected.json.
**
**   golden_queues_dump STORE CQ_ENTRIES INDEX_SLOTS INDEX_ENTRIES [END_PHY] < keys
**   golden_queues_dump --rebuild OUT CQ_ENTRIES INDEX_SLOTS INDEX_ENTRIES < records
**
** The store is opened READ-ONLY (nothing on disk changes). stdin holds one
** index key per line, "topic#key". Output, one JSON object per line:
**   {"queue":"T/q","min":m,"max":M,"maxPhysic":p,"entries":[[n,phy,size,tags],...]}
**       every consume queue after rmq_cq_recover
**   {"indexFile":"index/NAME","beginTimestamp":..,"endTimestamp":..,
**    "beginPhyOffset":..,"endPhyOffset":..,"hashSlotCount":..,"indexCount":..}
**   {"lookup":"topic#key","phyOffsets":[...]}     begin 0, end INT64_MAX
**   {"truncated":"T/q","min":m,"max":M}
**       with END_PHY: every queue after rmq_cq_truncate_dirty(END_PHY) and
**       rmq_cq_correct_min_offset(0), i.e. what RocketMQ's recovery shows
**
** --rebuild writes consume queues and an index into the new store OUT from
** dispatched records on stdin, one per line, tab-separated:
**   topic qid queueOffset phyOffset size tagsCode storeTimestamp sysFlag
**   toConsumeQueue(0/1) keys uniqKey
** where keys / uniqKey are "-" when absent (they never are "-" in the golden
** stores) -- so that the files can be compared byte for byte with RocketMQ's.
**
** Exit status 1, with the message on stderr, when the engine reports an error.
*/
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consume_queue.h"
#include "index_file.h"

#define MAX_HITS 4096

/* A JSON string: quotes, backslashes and control bytes escaped, UTF-8 passed through. */
static void json_str(const char *s, size_t n) {
  putchar('"');
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      printf("\\%c", c);
    } else if (c < 0x20) {
      printf("\\u%04x", c);
    } else {
      putchar(c);
    }
  }
  putchar('"');
}

static int cmp_queues(const void *a, const void *b) {
  const rmq_consume_queue *x = *(rmq_consume_queue *const *)a;
  const rmq_consume_queue *y = *(rmq_consume_queue *const *)b;
  int c = strcmp(x->topic, y->topic);
  return c ? c : (x->queue_id > y->queue_id) - (x->queue_id < y->queue_id);
}

static void print_queue_name(const char *field, rmq_consume_queue *cq) {
  char name[200];
  int n = snprintf(name, sizeof name, "%s/%d", cq->topic, (int)cq->queue_id);
  printf("{\"%s\":", field);
  json_str(name, (size_t)n);
}

static void dump_queue(rmq_consume_queue *cq) {
  print_queue_name("queue", cq);
  printf(",\"min\":%" PRId64 ",\"max\":%" PRId64 ",\"maxPhysic\":%" PRId64 ",\"entries\":[",
         rmq_cq_min_offset(cq), rmq_cq_max_offset(cq), rmq_cq_max_physic_offset(cq));
  rmq_cq_iter it;
  rmq_cq_entry e;
  rmq_cq_iter_start(&it, cq, 0);
  for (int first = 1; rmq_cq_iter_next(&it, &e); first = 0) {
    printf("%s[%" PRId64 ",%" PRId64 ",%d,%" PRId64 "]", first ? "" : ",", it.offset - 1,
           e.phy_offset, (int)e.size, e.tags_code);
  }
  rmq_cq_iter_stop(&it);
  printf("]}\n");
}

static int dump_queues(const char *store, int32_t entries, int64_t end_phy, rmq_err *err) {
  rmq_cq_table *t;
  int rc = rmq_cq_table_new(store, entries, false, &t, err);
  if (rc != RMQ_OK) return rc;
  rmq_consume_queue **all = NULL;
  int n = 0;
  int64_t max_physic;
  if ((rc = rmq_cq_table_load(t, err)) == RMQ_OK &&
      (rc = rmq_cq_table_recover(t, &max_physic, err)) == RMQ_OK &&
      (rc = rmq_cq_table_snapshot(t, &all, &n, err)) == RMQ_OK) {
    qsort(all, (size_t)n, sizeof *all, cmp_queues);
    for (int i = 0; i < n; i++) dump_queue(all[i]);
    for (int i = 0; end_phy >= 0 && i < n; i++) {
      rmq_cq_truncate_dirty(all[i], end_phy);
      rmq_cq_correct_min_offset(all[i], 0);
      print_queue_name("truncated", all[i]);
      printf(",\"min\":%" PRId64 ",\"max\":%" PRId64 "}\n", rmq_cq_min_offset(all[i]),
             rmq_cq_max_offset(all[i]));
    }
  }
  free(all);
  rmq_cq_table_free(t);
  return rc;
}

static void dump_lookup(rmq_index_service *s, const char *line, size_t len) {
  const char *hash = memchr(line, '#', len);
  int64_t hits[MAX_HITS];
  int n = 0;
  rmq_err err = {0};
  if (hash) {
    /* A topic never contains '#', so the first one ends it. */
    rmq_index_service_query(s, line, (size_t)(hash - line), hash + 1,
                            len - (size_t)(hash - line) - 1, MAX_HITS, 0, INT64_MAX, hits, &n,
                            &err);
  }
  printf("{\"lookup\":");
  json_str(line, len);
  printf(",\"phyOffsets\":[");
  for (int i = 0; i < n; i++) printf("%s%" PRId64, i ? "," : "", hits[i]);
  printf("]}\n");
}

static int dump_index(const char *store, int32_t slots, int32_t entries, rmq_err *err) {
  rmq_index_service s;
  int rc = rmq_index_service_init(&s, store, slots, entries, false, NULL, err);
  if (rc != RMQ_OK) return rc;
  if ((rc = rmq_index_service_load(&s, true, err)) == RMQ_OK) {
    rmq_index_header h;
    char name[18];
    for (int i = 0; rmq_index_service_file_info(&s, i, &h, name); i++) {
      printf("{\"indexFile\":\"index/%s\",\"beginTimestamp\":%" PRId64 ",\"endTimestamp\":%" PRId64
             ",\"beginPhyOffset\":%" PRId64 ",\"endPhyOffset\":%" PRId64
             ",\"hashSlotCount\":%d,\"indexCount\":%d}\n",
             name, h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset,
             (int)h.hash_slot_count, (int)h.index_count);
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, stdin)) > 0) {
      if (line[len - 1] == '\n') len--;
      if (len > 0) dump_lookup(&s, line, (size_t)len);
    }
    free(line);
  }
  rmq_index_service_destroy(&s);
  return rc;
}

typedef struct record {
  char *topic, *keys, *uniq;
  int32_t queue_id, size, sys_flag;
  int64_t queue_offset, phy_offset, tags_code, store_timestamp;
  bool to_cq;
} record;

/* Split one record line in place; false when it has not 11 fields. */
static bool parse_record(char *line, record *r) {
  char *f[11];
  int n = 0;
  for (char *p = line; n < 11 && p; n++) f[n] = strsep(&p, "\t");
  if (n != 11) return false;
  r->topic = f[0];
  r->queue_id = (int32_t)atoi(f[1]);
  r->queue_offset = strtoll(f[2], NULL, 10);
  r->phy_offset = strtoll(f[3], NULL, 10);
  r->size = (int32_t)atoi(f[4]);
  r->tags_code = strtoll(f[5], NULL, 10);
  r->store_timestamp = strtoll(f[6], NULL, 10);
  r->sys_flag = (int32_t)atoi(f[7]);
  r->to_cq = atoi(f[8]) != 0;
  r->keys = strcmp(f[9], "-") ? f[9] : NULL;
  r->uniq = strcmp(f[10], "-") ? f[10] : NULL;
  return true;
}

/* DefaultMessageStore's two dispatchers for one record: BuildConsumeQueue, BuildIndex. */
static int dispatch(rmq_cq_table *t, rmq_index_service *s, const record *r, rmq_err *err) {
  if (r->to_cq) {
    rmq_consume_queue *cq;
    int rc = rmq_cq_table_find_or_create(t, r->topic, r->queue_id, &cq, err);
    if (rc == RMQ_OK) {
      rc = rmq_cq_put(cq, r->phy_offset, r->size, r->tags_code, r->store_timestamp, r->queue_offset,
                      NULL, err);
    }
    if (rc != RMQ_OK) return rc;
  }
  rmq_index_request req = {
      .topic = r->topic,
      .topic_len = strlen(r->topic),
      .commit_log_offset = r->phy_offset,
      .store_timestamp = r->store_timestamp,
      .sys_flag = r->sys_flag,
      .keys = r->keys,
      .keys_len = r->keys ? strlen(r->keys) : 0,
      .uniq_key = r->uniq,
      .uniq_key_len = r->uniq ? strlen(r->uniq) : 0,
  };
  return rmq_index_service_build(s, &req, err);
}

static int rebuild(const char *out, int32_t entries, int32_t slots, int32_t index_num,
                   rmq_err *err) {
  rmq_cq_table *t;
  rmq_index_service s;
  int rc = rmq_cq_table_new(out, entries, true, &t, err);
  if (rc != RMQ_OK) return rc;
  if ((rc = rmq_index_service_init(&s, out, slots, index_num, true, NULL, err)) != RMQ_OK) {
    rmq_cq_table_free(t);
    return rc;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  while (rc == RMQ_OK && (len = getline(&line, &cap, stdin)) > 0) {
    if (line[len - 1] == '\n') line[len - 1] = '\0';
    record r;
    if (!parse_record(line, &r)) {
      rc = rmq_err_set(err, RMQ_EINVAL, "a record line without 11 tab-separated fields");
    } else {
      rc = dispatch(t, &s, &r, err);
    }
  }
  free(line);
  if (rc == RMQ_OK) rc = rmq_cq_table_flush(t, 0, NULL, err);
  if (rc == RMQ_OK) rc = rmq_index_service_flush(&s, err);
  rmq_index_service_destroy(&s);
  rmq_cq_table_free(t);
  return rc;
}

int main(int argc, char **argv) {
  if (argc == 6 && strcmp(argv[1], "--rebuild") == 0) {
    rmq_err err = {0};
    int rc = rebuild(argv[2], (int32_t)atoi(argv[3]), (int32_t)atoi(argv[4]),
                     (int32_t)atoi(argv[5]), &err);
    if (rc != RMQ_OK) {
      fprintf(stderr, "golden_queues_dump: %s: %s\n", rmq_strerror(rc), err.msg);
    }
    return rc == RMQ_OK ? 0 : 1;
  }
  if (argc != 5 && argc != 6) {
    fprintf(stderr,
            "usage: %s STORE CQ_ENTRIES INDEX_SLOTS INDEX_ENTRIES [END_PHY] < keys\n"
            "       %s --rebuild OUT CQ_ENTRIES INDEX_SLOTS INDEX_ENTRIES < records\n",
            argv[0], argv[0]);
    return 2;
  }
  int64_t end_phy = argc == 6 ? strtoll(argv[5], NULL, 10) : -1;
  rmq_err err = {0};
  int rc = dump_queues(argv[1], (int32_t)atoi(argv[2]), end_phy, &err);
  if (rc == RMQ_OK) {
    rc = dump_index(argv[1], (int32_t)atoi(argv[3]), (int32_t)atoi(argv[4]), &err);
  }
  if (rc != RMQ_OK) {
    fprintf(stderr, "golden_queues_dump: %s: %s\n", rmq_strerror(rc), err.msg);
    return 1;
  }
  return 0;
}
