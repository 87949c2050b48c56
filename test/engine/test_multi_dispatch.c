/*
** test_multi_dispatch.c: light message queues (multi_dispatch.c) on
** encoded records: which topics take part, the check of
** INNER_MULTI_DISPATCH, the walk of the listed queues and their offsets,
** the rewrite under the put lock (offsets, WAIT dropped, an old
** INNER_MULTI_QUEUE_OFFSET replaced, the record's length, max_lmq_queues,
** the properties limit, undo) and another process's records followed.
*/
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "message.h"
#include "multi_dispatch.h"
#include "properties.h"
#include "rmq.h"

/* A record of topic/queue with these properties, encoded into a new buffer. */
static uint8_t *encode(const char *topic, int32_t queue_id, const char *props, int32_t sys_flag,
                       rmq_record_head *h) {
  rmq_message m = {.topic = topic,
                   .topic_len = (int32_t)strlen(topic),
                   .queue_id = queue_id,
                   .body = (const uint8_t *)"body",
                   .body_len = 4,
                   .properties = props,
                   .properties_len = (int32_t)strlen(props),
                   .sys_flag = sys_flag};
  rmq_host_parse("127.0.0.1:10911", &m.store_host);
  rmq_host_parse("127.0.0.1:5000", &m.born_host);
  int32_t len = rmq_message_length(m.sys_flag, m.body_len, m.topic_len, m.properties_len, false);
  uint8_t *rec = malloc((size_t)len);
  rmq_message_encode(&m, rec, (size_t)len);
  CHECK(rmq_record_head_read(rec, (size_t)len, h));
  return rec;
}

/* The properties of a whole record as a C string (separators as '|' and '='). */
static const char *props_of(const uint8_t *rec, const rmq_record_head *h, char *buf) {
  const char *p;
  size_t n;
  rmq_record_properties(rec, h, &p, &n);
  for (size_t i = 0; i < n; i++) buf[i] = p[i] == '\001' ? '=' : p[i] == '\002' ? '|' : p[i];
  buf[n] = '\0';
  return buf;
}

static void test_applies(void) {
  CHECK(rmq_lmq_name("%LMQ%a", 6));
  CHECK(!rmq_lmq_name("%LMQ", 4));
  CHECK(!rmq_lmq_name("LMQ%a", 5));
  CHECK(rmq_md_applies("orders", 6, 0));
  CHECK(rmq_md_applies("orders", 6, RMQ_SYSFLAG_TRANSACTION_COMMIT));
  CHECK(!rmq_md_applies("orders", 6, RMQ_SYSFLAG_TRANSACTION_PREPARED));
  CHECK(!rmq_md_applies("orders", 6, RMQ_SYSFLAG_TRANSACTION_ROLLBACK));
  CHECK(!rmq_md_applies("%RETRY%g", 8, 0));
  CHECK(!rmq_md_applies("%DLQ%g", 6, 0));
  CHECK(!rmq_md_applies("rmq_sys_x", 9, 0));
  CHECK(!rmq_md_applies(RMQ_SCHEDULE_TOPIC, strlen(RMQ_SCHEDULE_TOPIC), 0));
}

static void test_check(void) {
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_md_check("", 0, &err), RMQ_OK);
  const char ok[] = "INNER_MULTI_DISPATCH\001%LMQ%a,%LMQ%b";
  CHECK_EQ_INT(rmq_md_check(ok, strlen(ok), &err), RMQ_OK);
  const char other[] = "INNER_MULTI_DISPATCH\001%LMQ%a,orders";
  CHECK_EQ_INT(rmq_md_check(other, strlen(other), &err), RMQ_EINVAL);
  CHECK(strstr(err.msg, "\"orders\", which is not a light message queue") != NULL);
  rmq_err_clear(&err);
  const char twice[] = "INNER_MULTI_DISPATCH\001%LMQ%a,%LMQ%b,%LMQ%a";
  CHECK_EQ_INT(rmq_md_check(twice, strlen(twice), &err), RMQ_EINVAL);
  CHECK_EQ_STR(err.msg, "INNER_MULTI_DISPATCH lists \"%LMQ%a\" twice");
  rmq_err_clear(&err);
  const char empty_item[] = "INNER_MULTI_DISPATCH\001%LMQ%a,";
  CHECK_EQ_INT(rmq_md_check(empty_item, strlen(empty_item), &err), RMQ_EINVAL);
  rmq_err_clear(&err);
  const char bad_char[] = "INNER_MULTI_DISPATCH\001%LMQ%a b";
  CHECK_EQ_INT(rmq_md_check(bad_char, strlen(bad_char), &err), RMQ_EINVAL);
}

static void test_iter(void) {
  rmq_md_iter it;
  rmq_md_target t;
  const char none[] = "INNER_MULTI_DISPATCH\001%LMQ%a";
  CHECK(!rmq_md_iter_start(&it, none, strlen(none), 3));
  const char two[] = "INNER_MULTI_DISPATCH\001%LMQ%a,plain\002INNER_MULTI_QUEUE_OFFSET\0017,12";
  CHECK(rmq_md_iter_start(&it, two, strlen(two), 3));
  CHECK_EQ_INT(rmq_md_iter_next(&it, &t), 1);
  CHECK(t.topic_len == 6 && memcmp(t.topic, "%LMQ%a", 6) == 0);
  CHECK_EQ_INT(t.queue_id, 0);
  CHECK_EQ_INT(t.queue_offset, 7);
  /* A name that is not an LMQ keeps the record's queue (MultiDispatch.queueKey). */
  CHECK_EQ_INT(rmq_md_iter_next(&it, &t), 1);
  CHECK_EQ_INT(t.queue_id, 3);
  CHECK_EQ_INT(t.queue_offset, 12);
  CHECK_EQ_INT(rmq_md_iter_next(&it, &t), 0);
  const char uneven[] = "INNER_MULTI_DISPATCH\001%LMQ%a,%LMQ%b\002INNER_MULTI_QUEUE_OFFSET\0017";
  CHECK(rmq_md_iter_start(&it, uneven, strlen(uneven), 0));
  CHECK_EQ_INT(rmq_md_iter_next(&it, &t), 1);
  CHECK_EQ_INT(rmq_md_iter_next(&it, &t), -1);
  const char nan[] = "INNER_MULTI_DISPATCH\001%LMQ%a\002INNER_MULTI_QUEUE_OFFSET\001x";
  CHECK(rmq_md_iter_start(&it, nan, strlen(nan), 0));
  CHECK_EQ_INT(rmq_md_iter_next(&it, &t), -1);
}

static void test_wrap(void) {
  rmq_topic_queue_table *tqt = rmq_tqt_new();
  rmq_tqt_get(tqt, "%LMQ%b", 6, 0)->next_offset = 99;
  rmq_record_head h, w;
  uint8_t *rec = encode("orders", 2,
                        "KEYS\001k\002WAIT\001true\002INNER_MULTI_DISPATCH\001%LMQ%a,%LMQ%b"
                        "\002INNER_MULTI_QUEUE_OFFSET\0015,5",
                        0, &h);
  uint8_t *out = malloc((size_t)h.len + rmq_md_growth(rec, &h));
  rmq_md_undo *undo = NULL;
  size_t nundo = 0;
  rmq_err err = {0};
  char buf[512];
  int32_t n = rmq_md_wrap(tqt, 10, rec, &h, out, &undo, &nundo, &err);
  CHECK(n > 0 && rmq_record_head_read(out, (size_t)n, &w) && w.len == n);
  /* WAIT and the producer's offsets go; the store's are appended. */
  CHECK_EQ_STR(props_of(out, &w, buf),
               "KEYS=k|INNER_MULTI_DISPATCH=%LMQ%a,%LMQ%b|INNER_MULTI_QUEUE_OFFSET=0,99");
  /* Everything before the properties is the record's own. */
  CHECK_EQ_MEM(out + 4, rec + 4, (size_t)((const uint8_t *)w.topic - out) + w.topic_len - 4);
  CHECK_EQ_INT(rmq_tqt_find(tqt, "%LMQ%a", 6, 0)->next_offset, 1);
  CHECK_EQ_INT(rmq_tqt_find(tqt, "%LMQ%b", 6, 0)->next_offset, 100);
  CHECK_EQ_INT(rmq_tqt_lmq_count(tqt), 2);
  /* The next one gets the next offsets; 99 -> 100 makes the record one byte longer. */
  int32_t n2 = rmq_md_wrap(tqt, 10, rec, &h, out, &undo, &nundo, &err);
  CHECK_EQ_INT(n2, n + 1);
  CHECK(rmq_record_head_read(out, (size_t)n2, &w));
  CHECK(strstr(props_of(out, &w, buf), "INNER_MULTI_QUEUE_OFFSET=1,100") != NULL);
  /* A failed batch gives every offset back. */
  CHECK_EQ_INT(nundo, 4);
  rmq_md_undo_all(tqt, undo, nundo);
  CHECK_EQ_INT(rmq_tqt_find(tqt, "%LMQ%a", 6, 0)->next_offset, 0);
  CHECK_EQ_INT(rmq_tqt_find(tqt, "%LMQ%b", 6, 0)->next_offset, 99);
  free(undo);
  free(out);
  free(rec);
  rmq_tqt_free(tqt);
}

static void test_wrap_limits(void) {
  rmq_topic_queue_table *tqt = rmq_tqt_new();
  rmq_record_head h;
  rmq_md_undo *undo = NULL;
  size_t nundo = 0;
  rmq_err err = {0};
  uint8_t *rec = encode("orders", 0, "INNER_MULTI_DISPATCH\001%LMQ%a,%LMQ%b,%LMQ%c", 0, &h);
  uint8_t *out = malloc((size_t)h.len + rmq_md_growth(rec, &h));
  /* Two exist at most: the third is refused, and the batch's undo restores the first two. */
  CHECK_EQ_INT(rmq_md_wrap(tqt, 2, rec, &h, out, &undo, &nundo, &err), -1);
  CHECK_EQ_STR(err.msg,
               "2 light message queues exist (max_lmq_queues): a put into another, \"%LMQ%c\", "
               "is refused");
  rmq_md_undo_all(tqt, undo, nundo);
  CHECK_EQ_INT(rmq_tqt_find(tqt, "%LMQ%a", 6, 0)->next_offset, 0);
  CHECK(rmq_tqt_find(tqt, "%LMQ%c", 6, 0) == NULL);
  free(out);
  free(rec);
  /* Properties at the limit cannot take the offsets. */
  size_t fill = RMQ_MAX_PROPERTIES_LEN - 10;
  char *props = malloc(fill + 64);
  int k = snprintf(props, fill + 64, "INNER_MULTI_DISPATCH\001%%LMQ%%a\002PAD\001");
  memset(props + k, 'x', fill - (size_t)k);
  props[fill] = '\0';
  rec = encode("orders", 0, props, 0, &h);
  out = malloc((size_t)h.len + rmq_md_growth(rec, &h));
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_md_wrap(tqt, 100, rec, &h, out, &undo, &nundo, &err), -1);
  CHECK(strstr(err.msg, "more than the limit of 32767 bytes") != NULL);
  free(undo);
  free(props);
  free(out);
  free(rec);
  rmq_tqt_free(tqt);
}

static void test_lists_and_follow(void) {
  rmq_record_head h;
  uint8_t *rec = encode("orders", 1,
                        "INNER_MULTI_DISPATCH\001%LMQ%a,%LMQ%b\002INNER_MULTI_QUEUE_OFFSET\0014,9",
                        0, &h);
  rmq_message m;
  CHECK_EQ_INT(rmq_message_decode(rec, (size_t)h.len, false, &m), RMQ_DECODE_OK);
  CHECK(rmq_md_lists(&m, "%LMQ%b", 6, 0, 9));
  CHECK(!rmq_md_lists(&m, "%LMQ%b", 6, 0, 8));
  CHECK(!rmq_md_lists(&m, "%LMQ%b", 6, 1, 9));
  CHECK(!rmq_md_lists(&m, "%LMQ%c", 6, 0, 9));
  rmq_topic_queue_table *tqt = rmq_tqt_new();
  rmq_tqt_get(tqt, "%LMQ%b", 6, 0)->next_offset = 20;
  CHECK(rmq_md_follow(tqt, rec, &h));
  CHECK_EQ_INT(rmq_tqt_find(tqt, "%LMQ%a", 6, 0)->next_offset, 5);
  CHECK_EQ_INT(rmq_tqt_find(tqt, "%LMQ%b", 6, 0)->next_offset, 20); /* never back */
  free(rec);
  /* A retry topic's copy of the properties is not followed. */
  rec = encode("%RETRY%g", 0, "INNER_MULTI_DISPATCH\001%LMQ%z\002INNER_MULTI_QUEUE_OFFSET\0013", 0,
               &h);
  CHECK(rmq_md_follow(tqt, rec, &h));
  CHECK(rmq_tqt_find(tqt, "%LMQ%z", 6, 0) == NULL);
  free(rec);
  rmq_tqt_free(tqt);
}

int main(void) {
  test_applies();
  test_check();
  test_iter();
  test_wrap();
  test_wrap_limits();
  test_lists_and_follow();
  return check_report();
}
