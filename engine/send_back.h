/*
** send_back.h: SendMessageProcessor.consumerSendMsgBack, the copy of a
** message that a consumer gives back (rmq_store_send_back in rmq.h puts it).
*/
#ifndef RMQ_SEND_BACK_H
#define RMQ_SEND_BACK_H

#include <stdbool.h>
#include <stddef.h>

#include "rmq.h"

/* The copy's properties, built in place. */
typedef struct rmq_send_back_props {
  char buf[RMQ_MAX_PROPERTIES_LEN + 1];
  size_t len;
  bool has_retry_topic, has_origin_id;
} rmq_send_back_props;

/* The message to put: m points into topic, props and the original message. */
typedef struct rmq_send_back {
  rmq_message m;
  char topic[RMQ_MAX_TOPIC_LEN + 1];
  rmq_send_back_props props;
} rmq_send_back;

/* A group may send back: a valid group whose %RETRY% topic is a valid topic. RMQ_EINVAL. */
int rmq_send_back_check_group(const char *group, rmq_err *err);
/*
** The copy of m (read at its offset) that group gives back, as cfg's
** max_reconsume_times and delay_levels make it: %RETRY%<group> with a
** DELAY level, or %DLQ%<group>. RMQ_EINVAL when the properties pass their
** limit.
*/
int rmq_send_back_copy(const rmq_config *cfg, const char *group, const rmq_message *m,
                       rmq_send_back *out, rmq_err *err);

#endif
