/*
** topic.c: TopicValidator.validateTopic's and Validators.checkGroup's
** character and length rules.
*/
#include "rmq.h"

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
