/*
** fuzz_config.c: libFuzzer target for the readers of RocketMQ's config
** files (config_json.h), which read what a broker or a user left in
** <store>/config.
**
** The input is given to all three parsers. A text that fails must fail with
** RMQ_ECORRUPT and a message that names the offset, without calling fn; a
** text that parses must write back (rmq_*_format) to a text that parses to
** the same entries, and that text must write back to itself. The salvaging
** reads say where a failing text breaks, as the parsers' messages do, and
** what they keep of it writes back to a text that parses.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_json.h"

#define MAX_ENTRIES 4096

typedef struct offsets {
  rmq_consumer_offset *e;
  int n;
  bool full;
} offsets;

static int add_offset(void *ctx, const rmq_consumer_offset *o) {
  offsets *c = ctx;
  if (c->n == MAX_ENTRIES) return c->full = true, RMQ_EFULL;
  c->e[c->n++] = *o;
  return RMQ_OK;
}

typedef struct topics {
  rmq_topic_config *t;
  int n;
  bool full;
} topics;

static int add_topic(void *ctx, const rmq_topic_config *t) {
  topics *c = ctx;
  if (c->n == MAX_ENTRIES) return c->full = true, RMQ_EFULL;
  c->t[c->n++] = *t;
  return RMQ_OK;
}

/* A failed parse: RMQ_ECORRUPT naming an offset, or fn's code. */
static void check_failure(int rc, const rmq_err *err, bool full) {
  if (rc == RMQ_EFULL && full) return;
  if (rc != RMQ_ECORRUPT || strncmp(err->msg, "offset ", 7) != 0) abort();
}

/* text must parse and format back to itself. */
static void check_fixed_point(const char *text) {
  offsets c = {.e = malloc(sizeof *c.e * MAX_ENTRIES)};
  rmq_err err = {0};
  if (rmq_consumer_offsets_parse(text, strlen(text), add_offset, &c, &err) != RMQ_OK) abort();
  char *again = rmq_consumer_offsets_format(c.e, c.n);
  if (again == NULL || strcmp(again, text) != 0) abort();
  free(again);
  free(c.e);
}

static void fuzz_consumer_offsets(const char *text, size_t len) {
  offsets c = {.e = malloc(sizeof *c.e * MAX_ENTRIES)};
  rmq_err err = {0};
  int rc = rmq_consumer_offsets_parse(text, len, add_offset, &c, &err);
  if (rc != RMQ_OK) {
    check_failure(rc, &err, c.full);
    if (rc == RMQ_ECORRUPT && c.n != 0) abort();
  } else {
    char *out = rmq_consumer_offsets_format(c.e, c.n);
    if (out == NULL) abort();
    check_fixed_point(out);
    free(out);
  }
  free(c.e);
}

static void fuzz_topics(const char *text, size_t len) {
  topics c = {.t = malloc(sizeof *c.t * MAX_ENTRIES)};
  rmq_err err = {0};
  int rc = rmq_topic_configs_parse(text, len, add_topic, &c, &err);
  if (rc != RMQ_OK) {
    check_failure(rc, &err, c.full);
    if (rc == RMQ_ECORRUPT && c.n != 0) abort();
    free(c.t);
    return;
  }
  char *out = rmq_topic_configs_format(c.t, c.n, 1, 2);
  topics back = {.t = malloc(sizeof *back.t * MAX_ENTRIES)};
  if (out == NULL || rmq_topic_configs_parse(out, strlen(out), add_topic, &back, &err) != RMQ_OK ||
      back.n != c.n || memcmp(back.t, c.t, sizeof *c.t * (size_t)c.n) != 0) {
    abort();
  }
  free(out);
  free(back.t);
  free(c.t);
}

static void fuzz_delay_offsets(const char *text, size_t len) {
  int64_t off[RMQ_MAX_DELAY_LEVELS] = {0}, back[RMQ_MAX_DELAY_LEVELS] = {0};
  rmq_err err = {0};
  int rc = rmq_delay_offsets_parse(text, len, off, RMQ_MAX_DELAY_LEVELS, &err);
  if (rc != RMQ_OK) {
    check_failure(rc, &err, false);
    for (int i = 0; i < RMQ_MAX_DELAY_LEVELS; i++) {
      if (off[i] != 0) abort();
    }
    return;
  }
  char *out = rmq_delay_offsets_format(off, RMQ_MAX_DELAY_LEVELS);
  if (out == NULL ||
      rmq_delay_offsets_parse(out, strlen(out), back, RMQ_MAX_DELAY_LEVELS, &err) != RMQ_OK ||
      memcmp(off, back, sizeof off) != 0) {
    abort();
  }
  free(out);
}

/* The damage a salvage found agrees with the parse: none, or at the offset the message names. */
static void check_damage(int parse_rc, const rmq_config_damage *d, size_t len) {
  char head[32];
  snprintf(head, sizeof head, "offset %lld: ", (long long)d->at);
  if (parse_rc == RMQ_OK
          ? d->at != -1
          : d->at < 0 || (size_t)d->at > len || strncmp(d->why, head, strlen(head)) != 0) {
    abort();
  }
}

static void fuzz_salvage(const char *text, size_t len) {
  offsets c = {.e = malloc(sizeof *c.e * MAX_ENTRIES)};
  rmq_config_damage d;
  rmq_err err = {0}, ignored = {0};
  int parse_rc = rmq_consumer_offsets_parse(text, len, NULL, NULL, &ignored);
  int rc = rmq_consumer_offsets_salvage(text, len, add_offset, &c, &d, &err);
  if (rc != RMQ_OK && !(rc == RMQ_EFULL && c.full)) abort();
  if (rc == RMQ_OK) {
    check_damage(parse_rc, &d, len);
    char *out = rmq_consumer_offsets_format(c.e, c.n);
    if (out == NULL || rmq_consumer_offsets_parse(out, strlen(out), NULL, NULL, &err) != RMQ_OK) {
      abort();
    }
    free(out);
  }
  free(c.e);
  int64_t off[RMQ_MAX_DELAY_LEVELS] = {0};
  bool seen[RMQ_MAX_DELAY_LEVELS] = {false};
  rmq_err_clear(&ignored);
  parse_rc = rmq_delay_offsets_parse(text, len, off, RMQ_MAX_DELAY_LEVELS, &ignored);
  if (rmq_delay_offsets_salvage(text, len, off, seen, &d, &err) != RMQ_OK) abort();
  check_damage(parse_rc, &d, len);
  rmq_err_clear(&ignored);
  parse_rc = rmq_topic_configs_parse(text, len, NULL, NULL, &ignored);
  if (rmq_topic_configs_salvage(text, len, NULL, NULL, &d, &err) != RMQ_OK) abort();
  check_damage(parse_rc, &d, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A copy of exactly size bytes, so that a read past the end is caught. */
  char *text = malloc(size ? size : 1);
  memcpy(text, data, size);
  fuzz_consumer_offsets(text, size);
  fuzz_topics(text, size);
  fuzz_delay_offsets(text, size);
  fuzz_salvage(text, size);
  free(text);
  return 0;
}
