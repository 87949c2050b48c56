/*
** test_schedule.c: the ScheduleMessageService (engine/schedule.c) seen from
** the engine: the delivery-time correction for clock jumps; the record it
** puts for the delayed message of RocketMQ's golden store, compared field by
** field with the one RocketMQ's ScheduleMessageService put; which messages
** are dropped (a transaction half message's REAL_TOPIC) and which sys_flag
** bits a delivered copy keeps; the offsets it persists and loads; the
** dispatcher's wake-up when a delayed message reaches its queue; the limit
** on a delay (365 days) and the sums of a time and a duration, which stop at
** the ends of int64 instead of wrapping.
*/
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "commitlog.h"
#include "schedule.h"
#include "store.h"
#include "testutil.h"

/* Wait up to 5 s for (topic, queue) to hold n messages. */
static bool wait_queue(rmq_store *s, const char *topic, int queue, int64_t n) {
  return rmq_store_wait_queue(s, topic, queue, n - 1, rmq_monotonic_ms() + 5000);
}

static void test_correct_deliver_time(void) {
  CHECK_EQ_INT(rmq_schedule_correct_deliver_time(1000, 1500, 1000), 1500);
  CHECK_EQ_INT(rmq_schedule_correct_deliver_time(1000, 2000, 1000), 2000);
  /* further ahead than the delay: the clock went back since the put */
  CHECK_EQ_INT(rmq_schedule_correct_deliver_time(1000, 2001, 1000), 1000);
  CHECK_EQ_INT(rmq_schedule_correct_deliver_time(1000, 500, 1000), 500);
  /* now + delay past INT64_MAX: the sum stops there, the due time stands */
  CHECK_EQ_INT(rmq_schedule_correct_deliver_time(INT64_MAX - 10, INT64_MAX, 1000), INT64_MAX);
  CHECK_EQ_INT(rmq_schedule_correct_deliver_time(INT64_MAX - 10, INT64_MAX - 5, RMQ_MAX_DELAY_MS),
               INT64_MAX - 5);
}

/*
** A delay is at most 365 days (RMQ_MAX_DELAY_MS), which every unit reaches
** exactly; a longer one, the sum that overflowed in the issue's
** 106751991167d among them, is refused naming its level.
*/
static void test_delay_limits(void) {
  int64_t ms[RMQ_MAX_DELAY_LEVELS];
  int n = 0;
  rmq_err err = {0};
  CHECK_EQ_INT(
      rmq_parse_delay_levels("365d 8760h 525600m 31536000s", ms, RMQ_MAX_DELAY_LEVELS, &n, &err),
      RMQ_OK);
  CHECK_EQ_INT(n, 4);
  for (int i = 0; i < n; i++) CHECK_EQ_INT(ms[i], RMQ_MAX_DELAY_MS);
  CHECK_EQ_INT(RMQ_MAX_DELAY_MS, 365LL * 86400000);
  static const char *const bad[][2] = {
      {"1s 106751991167d", "delay_levels: level 2 is 106751991167d; a delay is at most 365d"},
      {"366d", "delay_levels: level 1 is 366d; a delay is at most 365d"},
      {"1s 2s 8761h", "delay_levels: level 3 is 8761h; a delay is at most 365d"},
      {"525601m", "delay_levels: level 1 is 525601m; a delay is at most 365d"},
      {"31536001s", "delay_levels: level 1 is 31536001s; a delay is at most 365d"},
      {"1s 99999999999999999999s",
       "delay_levels: level 2 is 99999999999999999999s; a delay is at most 365d"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    rmq_err_clear(&err);
    CHECK_EQ_INT(rmq_parse_delay_levels(bad[i][0], ms, RMQ_MAX_DELAY_LEVELS, &n, &err), RMQ_EINVAL);
    CHECK_EQ_STR(err.msg, bad[i][1]);
  }
  rmq_config cfg;
  rmq_config_init(&cfg);
  snprintf(cfg.delay_levels, sizeof cfg.delay_levels, "1s 106751991167d");
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_config_check(&cfg, &err), RMQ_EINVAL);
  CHECK_EQ_STR(err.msg, bad[0][1]);
}

/*
** Sums of a time and a duration stop at the ends of int64 instead of
** wrapping: a delayed record's due time (its tags code) from a store time
** near INT64_MAX, as a broker's damaged or odd store may hold; the engine's
** own sums and condition-wait deadlines.
*/
static void test_time_sums_saturate(void) {
  CHECK_EQ_INT(rmq_time_add(INT64_MAX - 1, 10), INT64_MAX);
  CHECK_EQ_INT(rmq_time_add(INT64_MIN + 1, -10), INT64_MIN);
  CHECK_EQ_INT(rmq_time_add(1000, RMQ_MAX_DELAY_MS), 1000 + RMQ_MAX_DELAY_MS);
  struct timespec now, ts;
  clock_gettime(CLOCK_MONOTONIC, &now);
  rmq_deadline_in(&ts, INT64_MAX);
  CHECK(ts.tv_sec >= now.tv_sec && ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000);
  rmq_deadline_in(&ts, -5000);
  CHECK(ts.tv_sec >= now.tv_sec && ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000);
  CHECK_EQ_INT(rmq_timespec_ms(&(struct timespec){INT64_MAX, 999999999}), INT64_MAX);
  CHECK_EQ_INT(rmq_timespec_ms(&(struct timespec){INT64_MIN, 0}), INT64_MIN);
  CHECK_EQ_INT(rmq_timespec_ms(&(struct timespec){1, 5000000}), 1005);

  char dir[256];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  tu_small_config(&cfg, 65536);
  snprintf(cfg.delay_levels, sizeof cfg.delay_levels, "1s 365d");
  rmq_store *s = tu_open(dir, &cfg);
  if (s) {
    tu_msg t;
    rmq_message *m = tu_message(&t, RMQ_SCHEDULE_TOPIC, 1, "x", 1, "DELAY=2");
    m->store_timestamp = INT64_MAX - 1000;
    CHECK_EQ_INT(rmq_commitlog_tags_code(rmq_store_commitlog(s), m), INT64_MAX);
    m->store_timestamp = 1000;
    CHECK_EQ_INT(rmq_commitlog_tags_code(rmq_store_commitlog(s), m), 1000 + RMQ_MAX_DELAY_MS);
  }
  rmq_store_close(s);
  tu_rmrf(dir);
}

/* The golden store's properties of the delayed record and of RocketMQ's delivered copy. */
static const char golden_props[] =
    "REAL_TOPIC\001TopicA\002KEYS\001delay-1\002UNIQ_KEY\001C000020110922F2A1B3C0000006E000A"
    "\002CLUSTER\001GoldenCluster\002DELAY\0013\002TAGS\001TagDelay\002REAL_QID\0011";

/*
** RocketMQ's store-normal holds one level-3 message (due long ago) and the
** copy ScheduleMessageService put into TopicA queue 1 at queue offset 1;
** with no delayOffset.json our service delivers it again, at offset 2, and
** the copy must match RocketMQ's in every field it copies.
*/
static void test_golden_redelivery(void) {
  char dir[256], cmd[1024];
  const char *golden = getenv("RMQ_GOLDEN");
  tu_tmpdir(dir, sizeof dir);
  snprintf(cmd, sizeof cmd, "cp -r '%s/store-normal/.' '%s/'", golden ? golden : "test/golden",
           dir);
  CHECK_EQ_INT(system(cmd), 0);
  rmq_config cfg;
  tu_small_config(&cfg, 65536);
  cfg.consumequeue_entries = 100;
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  CHECK(wait_queue(s, "TopicA", 1, 3));
  rmq_consume_queue *cq = rmq_store_find_queue(s, "TopicA", 1);
  rmq_cq_iter it;
  rmq_cq_entry e[3];
  rmq_cq_iter_start(&it, cq, 0);
  int n = 0;
  while (n < 3 && rmq_cq_iter_next(&it, &e[n])) n++;
  rmq_cq_iter_stop(&it);
  CHECK_EQ_INT(n, 3);
  rmq_commitlog_ref ref[2];
  rmq_message theirs, ours;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_read(s, e[1].phy_offset, &ref[0], &theirs, &err), RMQ_OK);
  CHECK_EQ_INT(rmq_store_read(s, e[2].phy_offset, &ref[1], &ours, &err), RMQ_OK);
  CHECK_EQ_INT(e[2].tags_code, e[1].tags_code);
  CHECK_EQ_INT(ours.topic_len, theirs.topic_len);
  CHECK_EQ_MEM(ours.topic, "TopicA", 6);
  CHECK_EQ_INT(ours.queue_id, 1);
  CHECK_EQ_INT(ours.queue_offset, 2);
  CHECK_EQ_INT(ours.flag, theirs.flag);
  CHECK_EQ_INT(ours.sys_flag, theirs.sys_flag);
  CHECK_EQ_INT(ours.body_crc, theirs.body_crc);
  CHECK_EQ_INT(ours.born_timestamp, theirs.born_timestamp);
  CHECK(memcmp(&ours.born_host, &theirs.born_host, sizeof ours.born_host) == 0);
  CHECK_EQ_INT(ours.reconsume_times, theirs.reconsume_times);
  CHECK_EQ_INT(ours.prepared_transaction_offset, theirs.prepared_transaction_offset);
  CHECK_EQ_INT(ours.body_len, theirs.body_len);
  CHECK_EQ_MEM(ours.body, theirs.body, (size_t)theirs.body_len);
  CHECK_EQ_INT(ours.properties_len, (int)sizeof golden_props - 1);
  CHECK_EQ_MEM(ours.properties, golden_props, sizeof golden_props - 1);
  CHECK_EQ_INT(theirs.properties_len, (int)sizeof golden_props - 1);
  CHECK_EQ_MEM(theirs.properties, golden_props, sizeof golden_props - 1);
  rmq_commitlog_ref_release(&ref[0]);
  rmq_commitlog_ref_release(&ref[1]);
  CHECK_EQ_INT(rmq_schedule_offset(rmq_store_schedule(s), 3), 1);
  CHECK_EQ_INT(rmq_schedule_delivered(rmq_store_schedule(s)), 1);
  rmq_store_close(s);
  tu_rmrf(dir);
}

static void put_delayed(rmq_store *s, const char *topic, int32_t sys_flag, const char *body) {
  tu_msg t;
  rmq_message *m = tu_message(&t, topic, 0, body, (int)strlen(body), "DELAY=1");
  m->sys_flag = sys_flag;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_put(s, m, 1, NULL, &err), RMQ_OK);
}

/*
** A half message (real topic RMQ_SYS_TRANS_HALF_TOPIC) is dropped, as
** executeOnTimeup discards it; a committed transaction's message is put
** with its sys_flag as stored, as messageTimeup copies it; the offsets
** survive a close.
*/
static void test_drop_and_flags(void) {
  char dir[256];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  tu_small_config(&cfg, 65536);
  snprintf(cfg.delay_levels, sizeof cfg.delay_levels, "1s");
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  put_delayed(s, RMQ_TRANS_HALF_TOPIC, 0, "half");
  put_delayed(s, "Tx", RMQ_SYSFLAG_TRANSACTION_COMMIT, "committed");
  CHECK(wait_queue(s, "Tx", 0, 1));
  CHECK(rmq_store_find_queue(s, RMQ_TRANS_HALF_TOPIC, 0) == NULL);
  rmq_cq_entry e;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_cq_get(rmq_store_find_queue(s, "Tx", 0), 0, &e, &err), RMQ_OK);
  rmq_commitlog_ref ref;
  rmq_message m;
  CHECK_EQ_INT(rmq_store_read(s, e.phy_offset, &ref, &m, &err), RMQ_OK);
  CHECK_EQ_INT(m.sys_flag & RMQ_SYSFLAG_TRANSACTION_MASK, RMQ_SYSFLAG_TRANSACTION_COMMIT);
  CHECK_EQ_MEM(m.body, "committed", 9);
  rmq_commitlog_ref_release(&ref);
  rmq_schedule_service *svc = rmq_store_schedule(s);
  CHECK_EQ_INT(rmq_schedule_dropped(svc), 1);
  CHECK_EQ_INT(rmq_schedule_delivered(svc), 1);
  CHECK_EQ_INT(rmq_schedule_offset(svc, 1), 2);
  rmq_store_close(s);

  int64_t offsets[RMQ_MAX_DELAY_LEVELS];
  char report[RMQ_SCHEDULE_REPORT_MAX];
  cfg.readonly = true;
  s = tu_open(dir, &cfg);
  if (!s) return;
  CHECK(rmq_store_schedule(s) == NULL);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_schedule_load_offsets(dir, rmq_store_consume_queues(s), offsets, report,
                                         sizeof report, &err),
               RMQ_OK);
  CHECK_EQ_INT(offsets[0], 2);
  CHECK_EQ_STR(report, "");
  rmq_store_close(s);
  tu_rmrf(dir);
}

/*
** The dispatcher wakes the service when a delayed message reaches its queue:
** with one 60 s level the service sleeps 60 s when it has nothing, yet an
** entry due at once (a record written to SCHEDULE_TOPIC_XXXX without DELAY,
** whose tags code is 0) is delivered at once.
*/
static void test_wake_on_dispatch(void) {
  char dir[256];
  tu_tmpdir(dir, sizeof dir);
  rmq_config cfg;
  tu_small_config(&cfg, 65536);
  snprintf(cfg.delay_levels, sizeof cfg.delay_levels, "60s");
  rmq_store *s = tu_open(dir, &cfg);
  if (!s) return;
  usleep(200000); /* the service has looked at its levels and sleeps */
  tu_msg t;
  rmq_message *m = tu_message(&t, RMQ_SCHEDULE_TOPIC, 0, "now", 3, "REAL_TOPIC=W;REAL_QID=0");
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_store_put(s, m, 1, NULL, &err), RMQ_OK);
  int64_t t0 = rmq_monotonic_ms();
  CHECK(wait_queue(s, "W", 0, 1));
  CHECK(rmq_monotonic_ms() - t0 < 2000);
  rmq_store_close(s);
  tu_rmrf(dir);
}

int main(void) {
  test_correct_deliver_time();
  test_delay_limits();
  test_time_sums_saturate();
  test_wake_on_dispatch();
  test_golden_redelivery();
  test_drop_and_flags();
  return check_report();
}
