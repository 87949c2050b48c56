/*
** row.c: a row INSERTed into the rocketmq table, checked and turned into
** the message to append (see rmq_ext.h for the interface).
**
** A RocketMQ producer checks a message before it sends it
** (Validators.checkMessage, Validators.checkTopic) and fills in what the
** broker expects: the queue, chosen round robin when none is given
** (MQFaultStrategy.selectOneMessageQueue), the uniq key
** (MessageClientIDSetter.setUniqID), the born time and host. This file does
** the same for a row, in this order, each check naming the limit it hits:
**
**    check_assigned    no column the store assigns, no search input
**    check_topic       a valid topic, not a system topic (TopicValidator)
**    choose_queue      queue_id, or the next default queue
**    check_body        a BLOB or TEXT body within max_message_size
**    build_properties  the JSON properties, then tags, keys, uniq_key and
**                      delay_level as RocketMQ's properties
**    producer_fields   flag, born_timestamp, born_host
**
** Text (topic, tags, keys, uniq_key, properties, born_host) must be UTF-8:
** the error names the column and the offset of the first bad byte.
** Producers repeat their topic and host from row to row: the ones accepted
** last are kept (rmqx_row_state) and not checked again. Nothing is allocated
** per row.
*/
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "rmq_ext.h"

/* Columns the store assigns or that only search: an INSERT may not give them. */
#define ASSIGNED(field, search) \
  { offsetof(rmqx_row, field), #field, search }
static const struct {
  size_t at;
  const char *name;
  bool search;
} assigned_columns[] = {
    ASSIGNED(commitlog_offset, false),
    ASSIGNED(size, false),
    ASSIGNED(msg_id, false),
    ASSIGNED(queue_offset, false),
    ASSIGNED(body_text, false),
    ASSIGNED(sys_flag, false),
    ASSIGNED(body_crc, false),
    ASSIGNED(store_timestamp, false),
    ASSIGNED(store_host, false),
    ASSIGNED(reconsume_times, false),
    ASSIGNED(prepared_transaction_offset, false),
    ASSIGNED(body_raw, false),
    ASSIGNED(key, true),
    ASSIGNED(wait_ms, true),
};

/* Properties the columns or the store set; JSON properties may not name them. */
static const struct {
  const char *name;
  const char *use;
} reserved_properties[] = {
    {"TAGS", "the tags column"},
    {"KEYS", "the keys column"},
    {"UNIQ_KEY", "the uniq_key column"},
    {"DELAY", "the delay_level column"},
    {"REAL_TOPIC", "the store (delayed messages)"},
    {"REAL_QID", "the store (delayed messages)"},
};

/* One row being checked: its message is built in out. */
typedef struct row_builder {
  rmqx_row_state *st;
  const rmq_config *cfg; /* the store's */
  rmqx_row_message *out;
  size_t topic_len, props_len;
  char **errmsg;
} row_builder;

/* Refuse a name or value holding RocketMQ's separators; what names it in the error. */
static int check_separators(row_builder *b, const char *what, const char *s, size_t n) {
  if (!rmq_properties_has_separator(s, n)) return SQLITE_OK;
  return rmqx_errmsg(b->errmsg, SQLITE_CONSTRAINT,
                     "%s contains the byte 0x01 or 0x02, which separate RocketMQ's properties",
                     what);
}

/*
** Refuse text that is not UTF-8, naming what and the offset of the first bad
** byte: SQLite keeps such bytes in a TEXT value, and a reader that decodes
** the value (Python's sqlite3) would fail on the message later. The error
** does not quote the text, which could not be decoded either.
*/
static int check_utf8(row_builder *b, const char *what, const char *s, size_t n) {
  size_t bad = rmqx_utf8_invalid_at((const uint8_t *)s, n);
  if (bad == n) return SQLITE_OK;
  return rmqx_errmsg(b->errmsg, SQLITE_CONSTRAINT, "%s: invalid UTF-8 at byte offset %lld", what,
                     (long long)bad);
}

/* Add one property, whose name and value were checked; what names it in errors. */
static int add_property(row_builder *b, const char *what, const char *name, size_t nlen,
                        const char *value, size_t vlen) {
  if (rmq_properties_put(b->out->props, sizeof b->out->props, &b->props_len, name, nlen, value,
                         vlen) == 0) {
    return SQLITE_OK;
  }
  return rmqx_errmsg(b->errmsg, SQLITE_CONSTRAINT,
                     "%s does not fit: a message's properties are limited to %d bytes", what,
                     RMQ_MAX_PROPERTIES_LEN);
}

/* True if the properties built so far hold name (RocketMQ keeps one value per name). */
static bool has_property(row_builder *b, const char *name, size_t nlen) {
  rmq_properties_iter it;
  const char *n, *v;
  size_t n_len, v_len;
  rmq_properties_iter_init(&it, b->out->props, b->props_len);
  while (rmq_properties_next(&it, &n, &n_len, &v, &v_len)) {
    if (n_len == nlen && memcmp(n, name, nlen) == 0) return true;
  }
  return false;
}

static int json_pair(void *ctx, const char *name, size_t nlen, const char *value, size_t vlen,
                     char **errmsg) {
  for (size_t i = 0; i < sizeof reserved_properties / sizeof *reserved_properties; i++) {
    if (strlen(reserved_properties[i].name) == nlen &&
        memcmp(reserved_properties[i].name, name, nlen) == 0) {
      return rmqx_errmsg(errmsg, SQLITE_CONSTRAINT, "properties: %s is set by %s",
                         reserved_properties[i].name, reserved_properties[i].use);
    }
  }
  if (nlen == 0 || vlen == 0) {
    return rmqx_errmsg(errmsg, SQLITE_CONSTRAINT,
                       "properties: names and values must not be empty (RocketMQ drops "
                       "such pairs)");
  }
  row_builder *b = ctx;
  int rc = check_utf8(b, "properties: a name", name, nlen);
  if (rc != SQLITE_OK) return rc;
  char *what = sqlite3_mprintf("properties: %.*s", (int)nlen, name);
  if (!what) return SQLITE_NOMEM;
  rc = check_utf8(b, what, value, vlen);
  if (rc == SQLITE_OK) rc = check_separators(b, what, name, nlen);
  if (rc == SQLITE_OK) rc = check_separators(b, what, value, vlen);
  if (rc == SQLITE_OK && has_property(b, name, nlen)) {
    rc = rmqx_errmsg(errmsg, SQLITE_CONSTRAINT, "%s is given twice", what);
  }
  if (rc == SQLITE_OK) rc = add_property(b, what, name, nlen, value, vlen);
  sqlite3_free(what);
  return rc;
}

static const char *value_text(sqlite3_value *v) {
  return sqlite3_value_type(v) == SQLITE_NULL ? NULL : (const char *)sqlite3_value_text(v);
}

/*
** The bytes of a value and their length, NULL for SQL NULL. For a string
** bound by the application, sqlite3_value_text would first make a
** NUL-terminated copy (an allocation per column per row); the blob view of
** the same value is the bytes as they are.
*/
static const char *value_bytes(sqlite3_value *v, size_t *len) {
  if (sqlite3_value_type(v) == SQLITE_NULL) return NULL;
  const char *p = sqlite3_value_blob(v);
  *len = (size_t)sqlite3_value_bytes(v);
  return p ? p : "";
}

static int add_text_column(row_builder *b, sqlite3_value *v, const char *column,
                           const char *property) {
  size_t n;
  const char *t = value_bytes(v, &n);
  if (!t) return SQLITE_OK;
  if (n == 0) return rmqx_errmsg(b->errmsg, SQLITE_CONSTRAINT, "%s must not be empty", column);
  int rc = check_utf8(b, column, t, n);
  if (rc == SQLITE_OK) rc = check_separators(b, column, t, n);
  return rc == SQLITE_OK ? add_property(b, column, property, strlen(property), t, n) : rc;
}

static int check_assigned(row_builder *b, const rmqx_row *row) {
  if (sqlite3_value_type(row->rowid) != SQLITE_NULL) {
    return rmqx_errmsg(b->errmsg, SQLITE_CONSTRAINT,
                       "%s is assigned by the store and cannot be given", "commitlog_offset");
  }
  for (size_t i = 0; i < sizeof assigned_columns / sizeof *assigned_columns; i++) {
    sqlite3_value *v = *(sqlite3_value *const *)((const char *)row + assigned_columns[i].at);
    if (sqlite3_value_type(v) != SQLITE_NULL) {
      return rmqx_errmsg(b->errmsg, SQLITE_CONSTRAINT,
                         assigned_columns[i].search
                             ? "%s is a search input, not a column an INSERT can set"
                             : "%s is assigned by the store and cannot be given",
                         assigned_columns[i].name);
    }
  }
  return SQLITE_OK;
}

/*
** A valid, writable topic, copied NUL-terminated into out->topic; the one
** accepted last is not checked again.
*/
static int check_topic(row_builder *b, sqlite3_value *v) {
  rmqx_row_state *st = b->st;
  size_t n;
  const char *t = value_bytes(v, &n);
  if (!t) return rmqx_errmsg(b->errmsg, SQLITE_CONSTRAINT, "%s is required", "topic");
  bool same = n > 0 && n == st->last_topic_len && memcmp(t, st->last_topic, n) == 0;
  int rc = same ? SQLITE_OK : check_utf8(b, "topic", t, n);
  if (rc != SQLITE_OK) return rc;
  if (!same && !rmq_topic_valid(t, n)) {
    return rmqx_errmsg(b->errmsg, SQLITE_CONSTRAINT,
                       "topic '%.*s' is not a valid RocketMQ topic: 1 to 127 characters of "
                       "[A-Za-z0-9_%%|-]",
                       (int)n, t);
  }
  memcpy(b->out->topic, t, n);
  b->out->topic[n] = '\0';
  b->topic_len = n;
  if (same) return SQLITE_OK;
  if (rmq_topic_system(b->out->topic, n)) {
    return rmqx_errmsg(b->errmsg, SQLITE_CONSTRAINT,
                       "topic '%s' is a system topic and cannot be written", b->out->topic);
  }
  memcpy(st->last_topic, b->out->topic, n + 1);
  st->last_topic_len = n;
  return SQLITE_OK;
}

static int choose_queue(row_builder *b, sqlite3_value *v, int32_t *queue_id) {
  if (sqlite3_value_type(v) == SQLITE_NULL) {
    *queue_id = (int32_t)(b->st->next_queue++ % (uint32_t)b->cfg->default_queues);
    return SQLITE_OK;
  }
  int64_t q;
  if (!rmqx_value_integer(v, &q) || q < 0 || q > INT32_MAX) {
    return rmqx_errmsg(b->errmsg, SQLITE_CONSTRAINT, "queue_id %s is not a non-negative integer",
                       (const char *)sqlite3_value_text(v));
  }
  *queue_id = (int32_t)q;
  return SQLITE_OK;
}

static int add_delay(row_builder *b, sqlite3_value *v) {
  if (sqlite3_value_type(v) == SQLITE_NULL) return SQLITE_OK;
  int64_t level;
  if (!rmqx_value_integer(v, &level) || level < 1 || level > b->st->delay_levels) {
    return rmqx_errmsg(b->errmsg, SQLITE_CONSTRAINT,
                       "delay_level %s is unknown: delay_levels defines levels 1 to %d",
                       (const char *)sqlite3_value_text(v), b->st->delay_levels);
  }
  char t[16];
  int n = snprintf(t, sizeof t, "%lld", (long long)level);
  return add_property(b, "delay_level", RMQ_PROPERTY_DELAY, strlen(RMQ_PROPERTY_DELAY), t,
                      (size_t)n);
}

static int add_uniq_key(row_builder *b, sqlite3_value *v) {
  if (sqlite3_value_type(v) != SQLITE_NULL) {
    return add_text_column(b, v, "uniq_key", RMQ_PROPERTY_UNIQ_KEY);
  }
  char key[RMQ_MSG_ID_MAX];
  int n = rmq_uniq_key_next(b->st->uniq, key);
  return add_property(b, "uniq_key", RMQ_PROPERTY_UNIQ_KEY, strlen(RMQ_PROPERTY_UNIQ_KEY), key,
                      (size_t)n);
}

static int build_properties(row_builder *b, const rmqx_row *row) {
  const char *json = value_text(row->properties);
  int rc = json ? rmqx_properties_from_json(json, json_pair, b, b->errmsg) : SQLITE_OK;
  if (rc == SQLITE_ERROR) rc = SQLITE_CONSTRAINT;
  if (rc == SQLITE_OK) rc = add_text_column(b, row->tags, "tags", RMQ_PROPERTY_TAGS);
  if (rc == SQLITE_OK) rc = add_text_column(b, row->keys, "keys", RMQ_PROPERTY_KEYS);
  if (rc == SQLITE_OK) rc = add_uniq_key(b, row->uniq_key);
  if (rc == SQLITE_OK) rc = add_delay(b, row->delay_level);
  return rc;
}

/* born_host parsed, with the last one remembered: producers send the same host every row. */
static int born_host(row_builder *b, sqlite3_value *v, rmq_host *out) {
  rmqx_row_state *st = b->st;
  size_t n;
  const char *t = value_bytes(v, &n);
  if (!t) t = "127.0.0.1:0", n = strlen(t);
  if (n < sizeof st->last_host_text && n == st->last_host_len &&
      memcmp(t, st->last_host_text, n) == 0) {
    *out = st->last_host;
    return SQLITE_OK;
  }
  int rc = check_utf8(b, "born_host", t, n);
  if (rc != SQLITE_OK) return rc;
  char text[sizeof st->last_host_text];
  /* A NUL would end the C string early: '1.2.3.4:80\0junk' must not pass as 1.2.3.4:80. */
  if (n >= sizeof text || memchr(t, '\0', n) != NULL ||
      (memcpy(text, t, n), text[n] = '\0', rmq_host_parse(text, out) != 0)) {
    return rmqx_errmsg(b->errmsg, SQLITE_CONSTRAINT, "born_host '%.*s' is not ip:port", (int)n, t);
  }
  memcpy(st->last_host_text, text, n + 1);
  st->last_host_len = n;
  st->last_host = *out;
  return SQLITE_OK;
}

static int producer_fields(row_builder *b, const rmqx_row *row, rmq_message *m) {
  sqlite3_value *flag = row->flag, *born = row->born_timestamp;
  if (sqlite3_value_type(flag) != SQLITE_NULL) {
    int64_t f;
    if (!rmqx_value_integer(flag, &f) || f < INT32_MIN || f > INT32_MAX)
      return rmqx_errmsg(b->errmsg, SQLITE_CONSTRAINT, "flag %s is not a 32-bit integer",
                         (const char *)sqlite3_value_text(flag));
    m->flag = (int32_t)f;
  }
  if (sqlite3_value_type(born) == SQLITE_NULL) {
    m->born_timestamp = rmq_now_ms();
  } else {
    if (!rmqx_value_integer(born, &m->born_timestamp))
      return rmqx_errmsg(b->errmsg, SQLITE_CONSTRAINT,
                         "born_timestamp %s is not an integer (ms since the epoch)",
                         (const char *)sqlite3_value_text(born));
  }
  return born_host(b, row->born_host, &m->born_host);
}

static int check_body(row_builder *b, sqlite3_value *v, const void **body, int *len) {
  int type = sqlite3_value_type(v);
  if (type != SQLITE_NULL && type != SQLITE_BLOB && type != SQLITE_TEXT) {
    return rmqx_errmsg(b->errmsg, SQLITE_CONSTRAINT, "body must be a BLOB or TEXT, not %s",
                       type == SQLITE_INTEGER ? "an integer" : "a real");
  }
  size_t n = 0;
  *body = value_bytes(v, &n);
  *len = (int)n;
  int32_t max = b->cfg->max_message_size;
  if (*len > max) {
    char *n = sqlite3_mprintf("%d bytes, more than max_message_size (%d bytes)", *len, max);
    int rc = rmqx_errmsg(b->errmsg, SQLITE_CONSTRAINT, "body is %s", n);
    sqlite3_free(n);
    return rc;
  }
  return SQLITE_OK;
}

int rmqx_row_state_init(rmqx_row_state *st, const rmq_config *cfg) {
  memset(st, 0, sizeof *st);
  int64_t delay_ms[RMQ_MAX_DELAY_LEVELS];
  rmq_err err = {0};
  /* args.c checked the levels already. */
  rmq_parse_delay_levels(cfg->delay_levels, delay_ms, RMQ_MAX_DELAY_LEVELS, &st->delay_levels,
                         &err);
  st->uniq = rmq_uniq_key_gen_new();
  return st->uniq ? SQLITE_OK : SQLITE_NOMEM;
}

void rmqx_row_state_free(rmqx_row_state *st) {
  rmq_uniq_key_gen_free(st->uniq);
  st->uniq = NULL;
  free(st->compressed);
  st->compressed = NULL;
  rmq_codec_ctx_free(st->codec);
  st->codec = NULL;
}

/*
** A body of compress_over bytes or more is stored compressed, with SYSFLAG
** marking its codec, as a 4.9 producer sends it (DefaultMQProducerImpl.
** tryToCompressMessage); unlike the producer, only when it gets smaller,
** and never when longer than a read inflates (RMQ_MAX_INFLATED_BODY): such
** a body is stored as it is, so that it can be read back.
*/
static int compress_body(row_builder *b, rmq_message *m) {
  const rmq_config *cfg = b->cfg;
  if (cfg->compress_over <= 0 || m->body_len < cfg->compress_over ||
      m->body_len > RMQ_MAX_INFLATED_BODY) {
    return SQLITE_OK;
  }
  uint8_t *z;
  size_t n;
  rmq_err err = {0};
  if (!b->st->codec && !(b->st->codec = rmq_codec_ctx_new())) return SQLITE_NOMEM;
  int rc = rmq_compress(b->st->codec, cfg->compress_type, cfg->compress_level, m->body,
                        (size_t)m->body_len, &z, &n, &err);
  if (rc == RMQ_ENOMEM) return SQLITE_NOMEM;
  if (rc != RMQ_OK) return rmqx_errmsg(b->errmsg, SQLITE_ERROR, "%s", err.msg);
  if (n >= (size_t)m->body_len) {
    free(z);
    return SQLITE_OK;
  }
  free(b->st->compressed);
  b->st->compressed = z;
  m->body = z;
  m->body_len = (int32_t)n;
  m->sys_flag |= rmq_codec_sys_flag(cfg->compress_type);
  return SQLITE_OK;
}

int rmqx_row_message_build(rmqx_row_state *st, const rmq_config *cfg, const rmqx_row *row,
                           rmqx_row_message *out, char **errmsg) {
  row_builder b = {.st = st, .cfg = cfg, .out = out, .errmsg = errmsg};
  rmq_message *m = &out->m;
  memset(m, 0, sizeof *m);
  const void *body = NULL;
  int body_len = 0;
  int rc = check_assigned(&b, row);
  if (rc == SQLITE_OK) rc = check_topic(&b, row->topic);
  if (rc == SQLITE_OK) rc = choose_queue(&b, row->queue_id, &m->queue_id);
  if (rc == SQLITE_OK) rc = check_body(&b, row->body, &body, &body_len);
  if (rc == SQLITE_OK) rc = build_properties(&b, row);
  if (rc == SQLITE_OK) rc = producer_fields(&b, row, m);
  if (rc != SQLITE_OK) return rc;
  m->topic = out->topic;
  m->topic_len = (int32_t)b.topic_len;
  m->body = body;
  m->body_len = body_len;
  m->properties = out->props;
  m->properties_len = (int32_t)b.props_len;
  return compress_body(&b, m);
}
