/*
** send_back.c: SendMessageProcessor.consumerSendMsgBack, a consumer giving
** a message back: the copy it stores (see send_back.h; rmq_store_send_back
** in store.c reads the message, asks for the copy and puts it).
**
** The message read at the offset is stored again as the broker builds
** its copy: body, flag, sys flag, born time and host are kept, the
** properties are copied with RETRY_TOPIC and ORIGIN_MESSAGE_ID added when
** absent, and reconsume times goes up by one. Below max_reconsume_times
** the copy goes to %RETRY%<group> with DELAY = 3 + reconsume times, so
** the put stores it in SCHEDULE_TOPIC_XXXX and the schedule service
** delivers it when due; past it, to %DLQ%<group> at once. Both have one
** queue (retryQueueNums, DLQ_NUMS_PER_GROUP). A retry drops DELAY,
** REAL_TOPIC and REAL_QID of an earlier delay: the put sets them anew. A
** dead letter keeps them, as consumerSendMsgBack copies every property of
** the message it is given (MessageAccessor.setProperties): REAL_TOPIC
** %RETRY%<group> and REAL_QID say where the last retry was delivered; its
** DELAY becomes 0, so that the put stores it in %DLQ%<group> at once.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "send_back.h"

#include "properties.h"

/* RocketMQ retries from level 3 (10 s with the default levels) on. */
#define FIRST_RETRY_LEVEL 3

static bool is(const char *name, size_t n, const char *want) {
  return n == strlen(want) && memcmp(name, want, n) == 0;
}

static int put_prop(rmq_send_back_props *p, const char *name, const char *value, size_t value_len,
                    rmq_err *err) {
  if (rmq_properties_put(p->buf, sizeof p->buf - 1, &p->len, name, strlen(name), value,
                         value_len) == 0) {
    return RMQ_OK;
  }
  return rmq_err_set(err, RMQ_EINVAL,
                     "the message's properties with %s added pass the limit of %d bytes", name,
                     RMQ_MAX_PROPERTIES_LEN);
}

/* The delay properties a retry drops, as the put of a delayed message sets them anew. */
static bool delay_property(const char *name, size_t n) {
  return is(name, n, RMQ_PROPERTY_DELAY) || is(name, n, RMQ_PROPERTY_REAL_TOPIC) ||
         is(name, n, RMQ_PROPERTY_REAL_QID);
}

/*
** The properties of the copy: a retry's without the delay properties (the
** level is added after), a dead letter's all of them with DELAY 0.
*/
static int copy_properties(const rmq_message *m, bool dead, rmq_send_back_props *p, rmq_err *err) {
  rmq_properties_iter it;
  const char *name, *value;
  size_t nlen, vlen;
  bool has_delay = false;
  rmq_properties_iter_init(&it, m->properties, (size_t)m->properties_len);
  while (rmq_properties_next(&it, &name, &nlen, &value, &vlen)) {
    if (!dead && delay_property(name, nlen)) continue;
    if (dead && is(name, nlen, RMQ_PROPERTY_DELAY)) {
      has_delay = true;
      value = "0", vlen = 1;
    }
    p->has_retry_topic |= is(name, nlen, RMQ_PROPERTY_RETRY_TOPIC);
    p->has_origin_id |= is(name, nlen, RMQ_PROPERTY_ORIGIN_MESSAGE_ID);
    if (rmq_properties_put(p->buf, sizeof p->buf - 1, &p->len, name, nlen, value, vlen) != 0) {
      return rmq_err_set(err, RMQ_EINVAL, "the message's properties pass the limit of %d bytes",
                         RMQ_MAX_PROPERTIES_LEN);
    }
  }
  int rc = dead && !has_delay ? put_prop(p, RMQ_PROPERTY_DELAY, "0", 1, err) : RMQ_OK;
  if (rc == RMQ_OK && !p->has_retry_topic) {
    rc = put_prop(p, RMQ_PROPERTY_RETRY_TOPIC, m->topic, (size_t)m->topic_len, err);
  }
  if (rc == RMQ_OK && !p->has_origin_id) {
    char id[RMQ_MSG_ID_MAX];
    rmq_msg_id_format(&m->store_host, m->physical_offset, id);
    rc = put_prop(p, RMQ_PROPERTY_ORIGIN_MESSAGE_ID, id, strlen(id), err);
  }
  return rc;
}

int rmq_send_back_check_group(const char *group, rmq_err *err) {
  size_t n = strlen(group);
  if (!rmq_group_valid(group, n)) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "group \"%.255s\" is not a valid RocketMQ group (1..255 characters of "
                       "[%%|a-zA-Z0-9_-])",
                       group);
  }
  size_t max = RMQ_MAX_TOPIC_LEN - strlen(RMQ_RETRY_GROUP_TOPIC_PREFIX);
  if (n > max) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "group \"%s\" is %zu characters: its retry topic %s<group> would pass "
                       "the topic limit of %d (groups that send back: at most %zu)",
                       group, n, RMQ_RETRY_GROUP_TOPIC_PREFIX, RMQ_MAX_TOPIC_LEN, max);
  }
  return RMQ_OK;
}

int rmq_send_back_copy(const rmq_config *cfg, const char *group, const rmq_message *m,
                       rmq_send_back *out, rmq_err *err) {
  bool dead = m->reconsume_times >= cfg->max_reconsume_times;
  rmq_send_back_props *p = &out->props;
  *p = (rmq_send_back_props){0};
  snprintf(out->topic, sizeof out->topic, "%s%s",
           dead ? RMQ_DLQ_GROUP_TOPIC_PREFIX : RMQ_RETRY_GROUP_TOPIC_PREFIX, group);
  int rc = copy_properties(m, dead, p, err);
  if (rc == RMQ_OK && !dead) {
    int64_t levels[RMQ_MAX_DELAY_LEVELS];
    int count;
    rc = rmq_parse_delay_levels(cfg->delay_levels, levels, RMQ_MAX_DELAY_LEVELS, &count, err);
    int64_t level = (int64_t)FIRST_RETRY_LEVEL + m->reconsume_times;
    char text[24];
    int len = snprintf(text, sizeof text, "%lld", (long long)(level < count ? level : count));
    if (rc == RMQ_OK) rc = put_prop(p, RMQ_PROPERTY_DELAY, text, (size_t)len, err);
  }
  out->m = (rmq_message){
      .topic = out->topic,
      .topic_len = (int32_t)strlen(out->topic),
      .queue_id = 0,
      .flag = m->flag,
      .body = m->body,
      .body_len = m->body_len,
      .properties = p->buf,
      .properties_len = (int32_t)p->len,
      .sys_flag = m->sys_flag,
      .born_timestamp = m->born_timestamp,
      .born_host = m->born_host,
      .reconsume_times = m->reconsume_times + 1,
  };
  return rc;
}
