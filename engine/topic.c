/*
** topic.c: TopicValidator.validateTopic's and Validators.checkGroup's
** character and length rules.
*/
#include "rmq.h"

#include <string.h>

#include "message.h"

/* VALID_PATTERN_STR "^[%|a-zA-Z0-9_-]+$", up to max bytes. */
static bool name_valid(const char *name, size_t len, size_t max) {
  if (len < 1 || len > max) return false;
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '%' || c == '|';
    if (!ok) return false;
  }
  return true;
}

bool rmq_topic_valid(const char *topic, size_t len) {
  return name_valid(topic, len, RMQ_MAX_TOPIC_LEN);
}

bool rmq_group_valid(const char *group, size_t len) {
  return name_valid(group, len, RMQ_MAX_GROUP_LEN);
}

/* System topics (RocketMQ's TopicValidator) that only the broker writes. */
bool rmq_topic_system(const char *t, size_t n) {
  static const struct {
    const char *name;
    size_t len;
  } names[] = {{"SCHEDULE_TOPIC_XXXX", 19},
               {"TBW102", 6},
               {"SELF_TEST_TOPIC", 15},
               {"OFFSET_MOVED_EVENT", 18},
               {"TRANS_CHECK_MAX_TIME_TOPIC", 26},
               {"BenchmarkTest", 13}};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    if (n == names[i].len && memcmp(t, names[i].name, n) == 0) return true;
  }
  return n >= 8 && (memcmp(t, "RMQ_SYS_", 8) == 0 || memcmp(t, "rmq_sys_", 8) == 0);
}
