/*
** topic.c: TopicValidator.validateTopic's character and length rule.
*/
#include "rmq.h"

#include "message.h"

bool rmq_topic_valid(const char *topic, size_t len) {
  if (len < 1 || len > RMQ_MAX_TOPIC_LEN) return false;
  for (size_t i = 0; i < len; i++) {
    char c = topic[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '%' || c == '|';
    if (!ok) return false;
  }
  return true;
}
