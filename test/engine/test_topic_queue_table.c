/*
** test_topic_queue_table.c: the (topic, queueId) table shared by the
** CommitLog's topicQueueTable and the table of consume queues.
*/
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "topic_queue_table.h"

#define TOPICS 300
#define QUEUES 8

static void name(char *out, size_t cap, int i) { snprintf(out, cap, "Topic%d", i); }

static void test_get_find_grow(void) {
  rmq_topic_queue_table *t = rmq_tqt_new();
  CHECK(t != NULL);
  if (!t) return;
  char topic[32];
  CHECK(rmq_tqt_find(t, "T", 1, 0) == NULL);
  /* Enough entries to grow the table several times; each starts at zero. */
  for (int i = 0; i < TOPICS; i++) {
    name(topic, sizeof topic, i);
    for (int q = 0; q < QUEUES; q++) {
      rmq_tqt_entry *e = rmq_tqt_get(t, topic, strlen(topic), q);
      CHECK(e != NULL && e->next_offset == 0 && e->value == NULL);
      if (e) e->next_offset = i * 100 + q;
    }
  }
  CHECK_EQ_INT(rmq_tqt_count(t), TOPICS * QUEUES);
  int wrong = 0;
  for (int i = 0; i < TOPICS; i++) {
    name(topic, sizeof topic, i);
    for (int q = 0; q < QUEUES; q++) {
      rmq_tqt_entry *e = rmq_tqt_find(t, topic, strlen(topic), q);
      if (!e || e->next_offset != i * 100 + q || e->queue_id != q) wrong++;
      /* get finds the same entry and adds nothing. */
      if (rmq_tqt_get(t, topic, strlen(topic), q) != e) wrong++;
    }
  }
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT(rmq_tqt_count(t), TOPICS * QUEUES);
  /* The key is (bytes, length, queue id): a prefix or another queue is another key. */
  CHECK(rmq_tqt_find(t, "Topic1", 5, 0) == NULL);
  CHECK(rmq_tqt_find(t, "Topic1", 6, QUEUES) == NULL);
  CHECK(rmq_tqt_find(t, "Topic10x", 7, 0) != NULL);
  rmq_tqt_free(t);
}

static void test_iterate(void) {
  rmq_topic_queue_table *t = rmq_tqt_new();
  if (!t) return;
  int marks[50] = {0};
  char topic[32];
  for (int i = 0; i < 50; i++) {
    name(topic, sizeof topic, i);
    rmq_tqt_entry *e = rmq_tqt_get(t, topic, strlen(topic), -1);
    if (e) e->value = &marks[i];
  }
  size_t pos = 0, seen = 0;
  for (rmq_tqt_entry *e; (e = rmq_tqt_next(t, &pos)) != NULL; seen++) (*(int *)e->value)++;
  CHECK_EQ_INT(seen, 50);
  int once = 0;
  for (int i = 0; i < 50; i++) once += marks[i] == 1;
  CHECK_EQ_INT(once, 50);
  rmq_tqt_free(t);
  /* An empty table iterates nothing. */
  t = rmq_tqt_new();
  pos = 0;
  CHECK(t && rmq_tqt_next(t, &pos) == NULL);
  rmq_tqt_free(t);
}

int main(void) {
  test_get_find_grow();
  test_iterate();
  return check_report();
}
