/*
** topic.h: TopicValidator's rule for topic names.
*/
#ifndef RMQ_TOPIC_H
#define RMQ_TOPIC_H

#include <stdbool.h>
#include <stddef.h>

/* RocketMQ's topic rule: 1..127 bytes of [A-Za-z0-9_%|-]. */
bool rmq_topic_valid(const char *topic, size_t len);

#endif
