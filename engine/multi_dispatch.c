/*
** multi_dispatch.c: MultiDispatch, light message queues (see multi_dispatch.h).
*/
#include "multi_dispatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "properties.h"

#define SPLITTER ',' /* MixAll.MULTI_DISPATCH_QUEUE_SPLITTER */

static bool has_prefix(const char *s, size_t len, const char *prefix) {
  size_t n = strlen(prefix);
  return len >= n && memcmp(s, prefix, n) == 0;
}

bool rmq_lmq_name(const char *name, size_t len) { return has_prefix(name, len, RMQ_LMQ_PREFIX); }

bool rmq_md_applies(const char *topic, size_t topic_len, int32_t sys_flag) {
  int32_t t = sys_flag & RMQ_SYSFLAG_TRANSACTION_MASK;
  if (t == RMQ_SYSFLAG_TRANSACTION_PREPARED || t == RMQ_SYSFLAG_TRANSACTION_ROLLBACK) return false;
  bool schedule = topic_len == strlen(RMQ_SCHEDULE_TOPIC) &&
                  memcmp(topic, RMQ_SCHEDULE_TOPIC, topic_len) == 0;
  return !schedule && !has_prefix(topic, topic_len, RMQ_RETRY_GROUP_TOPIC_PREFIX) &&
         !has_prefix(topic, topic_len, RMQ_DLQ_GROUP_TOPIC_PREFIX) &&
         !has_prefix(topic, topic_len, "rmq_sys_");
}

/* The next comma-separated item of [*p, end) into [*item, *item_len); false at the end. */
static bool next_item(const char **p, const char *end, const char **item, size_t *item_len) {
  if (*p > end) return false;
  const char *comma = memchr(*p, SPLITTER, (size_t)(end - *p));
  const char *stop = comma ? comma : end;
  *item = *p;
  *item_len = (size_t)(stop - *p);
  *p = stop + 1;
  return true;
}

int rmq_md_check(const char *props, size_t len, rmq_err *err) {
  size_t n = 0;
  const char *v = rmq_properties_get(props, len, RMQ_PROPERTY_INNER_MULTI_DISPATCH, &n);
  const char *p = v, *end = v + n, *name, *other;
  size_t name_len, other_len;
  while (v && n > 0 && next_item(&p, end, &name, &name_len)) {
    if (!rmq_lmq_name(name, name_len) || name_len > RMQ_MAX_TOPIC_LEN ||
        !rmq_topic_valid(name, name_len)) {
      return rmq_err_set(err, RMQ_EINVAL,
                         "INNER_MULTI_DISPATCH lists \"%.*s\", which is not a light message queue "
                         "(a topic of at most %d bytes of [A-Za-z0-9_%%|-] that starts with %s)",
                         (int)(name_len < 200 ? name_len : 200), name, RMQ_MAX_TOPIC_LEN,
                         RMQ_LMQ_PREFIX);
    }
    for (const char *q = v; q < name && next_item(&q, end, &other, &other_len);) {
      if (other_len == name_len && memcmp(other, name, name_len) == 0) {
        return rmq_err_set(err, RMQ_EINVAL, "INNER_MULTI_DISPATCH lists \"%.*s\" twice",
                           (int)name_len, name);
      }
    }
  }
  return RMQ_OK;
}

bool rmq_md_iter_start(rmq_md_iter *it, const char *props, size_t len, int32_t queue_id) {
  const char *names[] = {RMQ_PROPERTY_INNER_MULTI_DISPATCH, RMQ_PROPERTY_INNER_MULTI_QUEUE_OFFSET};
  rmq_property_value v[2];
  rmq_properties_find(props, len, names, 2, v);
  if (!v[0].value || !v[1].value || v[0].len == 0 || v[1].len == 0) return false;
  *it = (rmq_md_iter){.names = v[0].value,
                      .names_end = v[0].value + v[0].len,
                      .offsets = v[1].value,
                      .offsets_end = v[1].value + v[1].len,
                      .queue_id = queue_id};
  return true;
}

/* Long.parseLong of a queue offset: 1..18 digits; -1 when it is not one. */
static int64_t parse_offset(const char *s, size_t n) {
  if (n == 0 || n > 18) return -1;
  int64_t x = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    x = x * 10 + (s[i] - '0');
  }
  return x;
}

int rmq_md_iter_next(rmq_md_iter *it, rmq_md_target *t) {
  const char *offset;
  size_t offset_len;
  bool name = next_item(&it->names, it->names_end, &t->topic, &t->topic_len);
  bool number = next_item(&it->offsets, it->offsets_end, &offset, &offset_len);
  if (!name && !number) return 0;
  t->queue_offset = name && number ? parse_offset(offset, offset_len) : -1;
  if (t->queue_offset < 0 || t->topic_len == 0 || t->topic_len > RMQ_MAX_TOPIC_LEN) return -1;
  t->queue_id = rmq_lmq_name(t->topic, t->topic_len) ? 0 : it->queue_id;
  return 1;
}

bool rmq_md_lists(const rmq_message *m, const char *topic, size_t topic_len, int32_t queue_id,
                  int64_t n) {
  rmq_md_iter it;
  rmq_md_target t;
  if (!rmq_md_applies(m->topic, (size_t)m->topic_len, m->sys_flag) ||
      !rmq_md_iter_start(&it, m->properties, (size_t)m->properties_len, m->queue_id)) {
    return false;
  }
  while (rmq_md_iter_next(&it, &t) == 1) {
    if (t.topic_len == topic_len && memcmp(t.topic, topic, topic_len) == 0) {
      return t.queue_id == queue_id && t.queue_offset == n;
    }
  }
  return false;
}

void rmq_record_properties(const uint8_t *rec, const rmq_record_head *h, const char **props,
                           size_t *len) {
  size_t at = (size_t)((const uint8_t *)h->topic - rec) + h->topic_len;
  size_t n = at + 2 <= (size_t)h->len ? (size_t)(rec[at] << 8 | rec[at + 1]) : 0;
  bool whole = at + 2 + n <= (size_t)h->len;
  /* A record cut within its properties has none: nothing past its end is read. */
  *props = (const char *)rec + (whole ? at + 2 : (size_t)h->len);
  *len = whole ? n : 0;
}

size_t rmq_md_growth(const uint8_t *rec, const rmq_record_head *h) {
  const char *props;
  size_t len, n = 0;
  rmq_record_properties(rec, h, &props, &len);
  const char *v = rmq_properties_get(props, len, RMQ_PROPERTY_INNER_MULTI_DISPATCH, &n);
  size_t queues = 1;
  for (size_t i = 0; v && i < n; i++) queues += v[i] == SPLITTER;
  return sizeof RMQ_PROPERTY_INNER_MULTI_QUEUE_OFFSET + 1 + queues * 20;
}

/* Log e's offset, then advance it; false when the log cannot grow. */
static bool advance(rmq_tqt_entry *e, rmq_md_undo **undo, size_t *nundo) {
  if ((*nundo & (*nundo - 1)) == 0) {
    rmq_md_undo *grown = realloc(*undo, (*nundo ? *nundo * 2 : 4) * sizeof **undo);
    if (!grown) return false;
    *undo = grown;
  }
  rmq_md_undo *u = &(*undo)[(*nundo)++];
  memcpy(u->topic, e->topic, e->topic_len);
  u->topic_len = (uint8_t)e->topic_len;
  u->queue_id = e->queue_id;
  u->next_offset = e->next_offset++;
  return true;
}

/* Each listed queue's next offset, joined by commas, into buf; advanced in tqt. */
static int assign_offsets(rmq_topic_queue_table *tqt, int max_lmq, const char *names, size_t n,
                          int32_t queue_id, char *buf, size_t cap, size_t *len, rmq_md_undo **undo,
                          size_t *nundo, rmq_err *err) {
  const char *p = names, *end = names + n, *name;
  size_t name_len;
  *len = 0;
  while (next_item(&p, end, &name, &name_len)) {
    int32_t qid = rmq_lmq_name(name, name_len) ? 0 : queue_id;
    rmq_tqt_entry *e = rmq_tqt_find(tqt, name, name_len, qid);
    if (!e && rmq_lmq_name(name, name_len) && rmq_tqt_lmq_count(tqt) >= (size_t)max_lmq) {
      return rmq_err_set(err, RMQ_EINVAL,
                         "%d light message queues exist (max_lmq_queues): a put into another, "
                         "\"%.*s\", is refused",
                         max_lmq, (int)name_len, name);
    }
    if ((!e && (e = rmq_tqt_get(tqt, name, name_len, qid)) == NULL) || !advance(e, undo, nundo)) {
      return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
    }
    *len += (size_t)snprintf(buf + *len, cap - *len, "%s%lld", *len ? "," : "",
                             (long long)(*undo)[*nundo - 1].next_offset);
  }
  return RMQ_OK;
}

/* props without WAIT and INNER_MULTI_QUEUE_OFFSET, then the new offsets, into out. */
static size_t rewrite_properties(const char *props, size_t len, const char *offsets,
                                 size_t offsets_len, char *out, size_t cap) {
  rmq_properties_iter it;
  const char *name, *value;
  size_t name_len, value_len, n = 0;
  rmq_properties_iter_init(&it, props, len);
  while (rmq_properties_next(&it, &name, &name_len, &value, &value_len)) {
    bool dropped = (name_len == strlen(RMQ_PROPERTY_WAIT) &&
                    memcmp(name, RMQ_PROPERTY_WAIT, name_len) == 0) ||
                   (name_len == strlen(RMQ_PROPERTY_INNER_MULTI_QUEUE_OFFSET) &&
                    memcmp(name, RMQ_PROPERTY_INNER_MULTI_QUEUE_OFFSET, name_len) == 0);
    if (!dropped) rmq_properties_put(out, cap, &n, name, name_len, value, value_len);
  }
  rmq_properties_put(out, cap, &n, RMQ_PROPERTY_INNER_MULTI_QUEUE_OFFSET,
                     strlen(RMQ_PROPERTY_INNER_MULTI_QUEUE_OFFSET), offsets, offsets_len);
  return n;
}

int32_t rmq_md_wrap(rmq_topic_queue_table *tqt, int max_lmq, const uint8_t *rec,
                    const rmq_record_head *h, uint8_t *out, rmq_md_undo **undo, size_t *nundo,
                    rmq_err *err) {
  const char *props, *names;
  size_t len, names_len = 0, offsets_len;
  rmq_record_properties(rec, h, &props, &len);
  names = rmq_properties_get(props, len, RMQ_PROPERTY_INNER_MULTI_DISPATCH, &names_len);
  if (!names || names_len == 0) {
    memcpy(out, rec, (size_t)h->len);
    return h->len;
  }
  if (rmq_md_check(props, len, err) != RMQ_OK) return -1;
  size_t cap = rmq_md_growth(rec, h);
  char *offsets = malloc(cap);
  if (!offsets) return rmq_err_set(err, RMQ_ENOMEM, "out of memory"), -1;
  int rc = assign_offsets(tqt, max_lmq, names, names_len, h->queue_id, offsets, cap, &offsets_len,
                          undo, nundo, err);
  size_t head = (size_t)((const char *)props - (const char *)rec);
  size_t n = rc == RMQ_OK ? rewrite_properties(props, len, offsets, offsets_len, (char *)out + head,
                                               len + cap)
                          : 0;
  free(offsets);
  if (rc != RMQ_OK) return -1;
  if (n > RMQ_MAX_PROPERTIES_LEN) {
    rmq_err_set(err, RMQ_EINVAL,
                "properties grow to %zu bytes with INNER_MULTI_QUEUE_OFFSET, more than the limit "
                "of %d bytes",
                n, RMQ_MAX_PROPERTIES_LEN);
    return -1;
  }
  memcpy(out, rec, head - 2);
  out[head - 2] = (uint8_t)(n >> 8);
  out[head - 1] = (uint8_t)n;
  rmq_put32(out, (int32_t)(head + n));
  return (int32_t)(head + n);
}

void rmq_md_undo_all(rmq_topic_queue_table *tqt, const rmq_md_undo *undo, size_t n) {
  while (n-- > 0) {
    rmq_tqt_entry *e = rmq_tqt_find(tqt, undo[n].topic, undo[n].topic_len, undo[n].queue_id);
    if (e) e->next_offset = undo[n].next_offset;
  }
}

bool rmq_md_follow(rmq_topic_queue_table *tqt, const uint8_t *rec, const rmq_record_head *h) {
  const char *props;
  size_t len;
  rmq_md_iter it;
  rmq_md_target t;
  if (!rmq_md_applies(h->topic, h->topic_len, h->sys_flag)) return true;
  rmq_record_properties(rec, h, &props, &len);
  if (!rmq_md_iter_start(&it, props, len, h->queue_id)) return true;
  while (rmq_md_iter_next(&it, &t) == 1) {
    rmq_tqt_entry *e = rmq_tqt_get(tqt, t.topic, t.topic_len, t.queue_id);
    if (!e) return false;
    if (e->next_offset <= t.queue_offset) e->next_offset = t.queue_offset + 1;
  }
  return true;
}
