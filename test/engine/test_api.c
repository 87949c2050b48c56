/*
** test_api.c: the public API of rmq.h as the SQLite glue uses it: one
** engine per directory (acquire, find, release), point reads and their
** errors, queue listing and iteration, long polling, index views and stats.
*/
#include "check.h"
#include "testutil.h"

#define SEG 65536
#define N 10

static void test_registry(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *a, *b;
  rmq_err err = {0};
  CHECK(rmq_store_find(dir) == NULL);
  CHECK_EQ_INT(rmq_store_acquire(dir, &cfg, &a, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_store_acquire(dir, &cfg, &b, &err), RMQ_OK);
  CHECK(a == b);
  CHECK(rmq_store_find(dir) == a);
  rmq_config other = cfg;
  other.max_message_size = 1024;
  CHECK_EQ_INT(rmq_store_acquire(dir, &other, &b, &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "with max_message_size=4194304; this open asks for "
                        "max_message_size=1024: open it with the same settings") != NULL);
  for (int i = 0; i < 3; i++) rmq_store_release(a);
  CHECK(rmq_store_find(dir) == NULL);
}

/* A setting of a second acquire that differs, and the message naming it with both values. */
typedef struct setting_case {
  const char *name;
  void (*change)(rmq_config *);
  const char *values;
} setting_case;

static void more_queues(rmq_config *c) { c->default_queues = 8; }
static void bigger_segments(rmq_config *c) { c->commitlog_file_size = 2 * SEG; }
static void longer_timeout(rmq_config *c) { c->sync_flush_timeout_ms = 9000; }
static void warm(rmq_config *c) { c->warm_mapped_file = true; }
static void sync_flush(rmq_config *c) { c->flush_sync = true; }
static void more_entries(rmq_config *c) { c->consumequeue_entries = 200; }
static void more_slots(rmq_config *c) { c->index_slots = 128; }
static void more_index_entries(rmq_config *c) { c->index_entries = 512; }
static void other_levels(rmq_config *c) { snprintf(c->delay_levels, 8, "1s 2s"); }
static void other_hours(rmq_config *c) { c->file_reserved_hours = 1; }
static void other_when(rmq_config *c) { snprintf(c->delete_when, 8, "05"); }
static void other_ratio(rmq_config *c) { c->disk_max_used_ratio = 80; }
static void other_host(rmq_config *c) { rmq_host_parse("10.0.0.5:10911", &c->store_host); }
static void pool(rmq_config *c) { c->transient_store_pool = 2; }
static void spin(rmq_config *c) { c->use_spin_lock = true; }
static void other_interval(rmq_config *c) { c->flush_interval_ms = 100; }
static void smaller_messages(rmq_config *c) { c->max_message_size = 1024; }

static void test_settings_agree(const char *dir) {
  static const setting_case cases[] = {
      {"default_queues", more_queues, "default_queues=4; this open asks for default_queues=8"},
      {"commitlog_file_size", bigger_segments,
       "commitlog_file_size=65536; this open asks for commitlog_file_size=131072"},
      {"sync_flush_timeout_ms", longer_timeout,
       "sync_flush_timeout_ms=5000; this open asks for sync_flush_timeout_ms=9000"},
      {"warm_mapped_file", warm, "warm_mapped_file=0; this open asks for warm_mapped_file=1"},
      {"flush", sync_flush, "flush='async'; this open asks for flush='sync'"},
      {"consumequeue_entries", more_entries,
       "consumequeue_entries=100; this open asks for consumequeue_entries=200"},
      {"index_slots", more_slots, "index_slots=64; this open asks for index_slots=128"},
      {"index_entries", more_index_entries,
       "index_entries=256; this open asks for index_entries=512"},
      {"delay_levels", other_levels,
       "delay_levels='1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h'; this open asks "
       "for delay_levels='1s 2s'"},
      {"file_reserved_hours", other_hours,
       "file_reserved_hours=72; this open asks for file_reserved_hours=1"},
      {"delete_when", other_when, "delete_when='04'; this open asks for delete_when='05'"},
      {"disk_max_used_ratio", other_ratio,
       "disk_max_used_ratio=75; this open asks for disk_max_used_ratio=80"},
      {"store_host", other_host,
       "store_host='127.0.0.1:10911'; this open asks for store_host='10.0.0.5:10911'"},
      {"transient_store_pool", pool,
       "transient_store_pool=0; this open asks for transient_store_pool=2"},
      {"use_spin_lock", spin, "use_spin_lock=0; this open asks for use_spin_lock=1"},
      {"flush_interval_ms", other_interval,
       "flush_interval_ms=500; this open asks for flush_interval_ms=100"},
      {"max_message_size", smaller_messages,
       "max_message_size=4194304; this open asks for max_message_size=1024"},
  };
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s, *t;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_acquire(dir, &cfg, &s, &err), RMQ_OK);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    rmq_config other = cfg;
    cases[i].change(&other);
    rmq_err_clear(&err);
    CHECK_EQ_INT(rmq_store_acquire(dir, &other, &t, &err), RMQ_EINVAL);
    char want[300];
    snprintf(want, sizeof want, "already open in this process with %s", cases[i].values);
    bool named = strstr(err.msg, want) != NULL;
    CHECK(named);
    if (!named) fprintf(stderr, "  %s: %s\n", cases[i].name, err.msg);
  }
  /* A read-only acquire shares the live store whatever it asks for. */
  rmq_config ro = cfg;
  ro.readonly = true;
  ro.default_queues = 9;
  CHECK_EQ_INT(rmq_store_acquire(dir, &ro, &t, &err), RMQ_OK);
  CHECK(t == s);
  rmq_store_release(t);
  rmq_store_release(s);
}

static void put_messages(rmq_store *s, rmq_put_result *r) {
  tu_msg t;
  rmq_err err = {0};
  for (int i = 0; i < N; i++) {
    char keys[32];
    snprintf(keys, sizeof keys, "KEYS=k%d", i);
    CHECK_EQ_INT(rmq_store_put(s, tu_message(&t, "Api", i % 2, "body", 4, keys), 1, &r[i], &err),
                 RMQ_OK);
  }
  CHECK_EQ_INT(rmq_store_wait_dispatched(s, &err), RMQ_OK);
}

static void test_reads(rmq_store *s, const rmq_put_result *r) {
  rmq_commitlog_ref ref = {0};
  rmq_message m;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_read(s, r[3].physical_offset, &ref, &m, &err), RMQ_OK);
  CHECK(m.topic_len == 3 && memcmp(m.topic, "Api", 3) == 0);
  CHECK_EQ_INT(m.queue_offset, r[3].queue_offset);
  rmq_commitlog_ref_release(&ref);
  CHECK_EQ_INT(rmq_store_read(s, r[3].physical_offset + 1, &ref, &m, &err), RMQ_ECORRUPT);
  CHECK(strstr(err.msg, "holds no valid record") != NULL);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_store_read(s, 1 << 30, &ref, &m, &err), RMQ_ENOTFOUND);
  rmq_commitlog_ref_release(&ref);
}

static void test_queues(rmq_store *s, const rmq_put_result *r) {
  rmq_queue_info *all;
  int n;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_queues(s, &all, &n, &err), RMQ_OK);
  CHECK_EQ_INT(n, 2);
  for (int i = 0; i < n; i++) {
    CHECK_EQ_STR(all[i].topic, "Api");
    CHECK_EQ_INT(all[i].max_offset - all[i].min_offset, N / 2);
    CHECK_EQ_INT(all[i].files, 1);
  }
  free(all);
  rmq_consume_queue *cq = rmq_store_find_queue(s, "Api", 1);
  CHECK(cq != NULL && rmq_store_find_queue(s, "Api", 2) == NULL);
  rmq_cq_iter it;
  rmq_cq_entry e;
  int count = 0;
  rmq_cq_iter_start(&it, cq, 1);
  while (rmq_cq_iter_next(&it, &e)) {
    int i = 2 * (int)(it.offset - 1) + 1;
    CHECK_EQ_INT(e.phy_offset, r[i].physical_offset);
    count++;
  }
  rmq_cq_iter_stop(&it);
  CHECK_EQ_INT(count, N / 2 - 1);
  /* Long polling: an entry that is there returns at once, one that is not waits it out. */
  CHECK(rmq_store_wait_queue(s, "Api", 1, N / 2 - 1, rmq_monotonic_ms() + 10000));
  int64_t t0 = rmq_monotonic_ms();
  CHECK(!rmq_store_wait_queue(s, "Api", 1, N / 2, t0 + 50));
  CHECK(rmq_monotonic_ms() - t0 >= 50);
}

static void test_index_view(rmq_store *s, const rmq_put_result *r) {
  rmq_index_view v = {0};
  rmq_index_item item;
  CHECK(rmq_store_index_view(s, NULL, &v));
  /* Each message is indexed by its UNIQ_KEY (none here) and its key. */
  CHECK_EQ_INT(rmq_index_view_items_end(&v, false), N + 1);
  int32_t k = rmq_index_view_slot(&v, rmq_index_key_hash("Api", 3, "k4", 2));
  CHECK(k > 0 && rmq_index_view_item(&v, k, &item));
  CHECK_EQ_INT(item.phy_offset, r[4].physical_offset);
  char name[sizeof v.name];
  snprintf(name, sizeof name, "%s", v.name);
  rmq_index_view_release(&v);
  CHECK(!rmq_store_index_view(s, name, &v));
}

static void test_stats(rmq_store *s) {
  rmq_stats st;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_stats(s, &st, &err), RMQ_OK);
  CHECK_EQ_INT(st.put_count, N);
  CHECK_EQ_INT(st.consume_queues, 2);
  CHECK_EQ_INT(st.consumequeue_files, 2);
  CHECK_EQ_INT(st.commitlog_file_size, SEG);
  CHECK_EQ_INT(st.dispatched_offset, st.committed_offset);
  CHECK(st.file_bytes > 0 && st.recovery != NULL && !st.poisoned);
  CHECK_EQ_STR(st.poison_reason, "");
}

static void test_store(const char *dir) {
  rmq_config cfg;
  tu_small_config(&cfg, SEG);
  rmq_store *s;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_acquire(dir, &cfg, &s, &err), RMQ_OK);
  rmq_put_result r[N];
  put_messages(s, r);
  test_reads(s, r);
  test_queues(s, r);
  test_index_view(s, r);
  test_stats(s);
  rmq_store_release(s);
  /* Files opened read-only: nothing arrives, nothing to wait for. */
  cfg.readonly = true;
  CHECK_EQ_INT(rmq_store_open(dir, &cfg, &s, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_store_wait_dispatched(s, &err), RMQ_OK);
  CHECK(!rmq_store_wait_queue(s, "Api", 1, N, rmq_monotonic_ms() + 10000));
  rmq_store_close(s);
}

int main(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  test_registry(dir);
  tu_rmrf(dir);
  tu_tmpdir(dir, sizeof dir);
  test_settings_agree(dir);
  tu_rmrf(dir);
  tu_tmpdir(dir, sizeof dir);
  test_store(dir);
  tu_rmrf(dir);
  return check_report();
}
