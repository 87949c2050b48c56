/*
** test_config.c: RocketMQ's config files: the golden files of
** test/golden/config read to the values their README lists and written back
** byte for byte, format/parse round trips, damaged texts, and persist/load
** with the .bak fallback and injected I/O faults.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "config_json.h"
#include "config_manager.h"
#include "io.h"
#include "testutil.h"

/* ------------------------------------------------------------- helpers */

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  char *buf = malloc(1 << 16);
  *len = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
  if (buf) buf[*len] = '\0';
  fclose(f);
  return buf;
}

static char *golden(const char *name, size_t *len) {
  const char *dir = getenv("RMQ_GOLDEN") ? getenv("RMQ_GOLDEN") : "test/golden";
  char path[4096];
  snprintf(path, sizeof path, "%s/config/%s", dir, name);
  char *text = slurp(path, len);
  if (text == NULL) fprintf(stderr, "cannot read %s\n", path);
  return text;
}

static void spit(const char *path, const char *text, size_t len) {
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(text, 1, len, f) != len) fprintf(stderr, "cannot write %s\n", path);
  if (f) fclose(f);
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* The entries a parse delivered. */
typedef struct offsets {
  rmq_consumer_offset e[64];
  int n, stop_at;
} offsets;

static int collect_offset(void *ctx, const rmq_consumer_offset *o) {
  offsets *c = ctx;
  if (c->stop_at && c->n == c->stop_at) return RMQ_EINVAL;
  if (c->n < 64) c->e[c->n++] = *o;
  return RMQ_OK;
}

/* Entries parsed back in group order: group g's queue q is g * 1000 + q. */
typedef struct offsets_seen {
  int n, bad;
} offsets_seen;

static int check_offset(void *ctx, const rmq_consumer_offset *o) {
  offsets_seen *s = ctx;
  int g = s->n / 16, q = s->n % 16;
  char group[16];
  snprintf(group, sizeof group, "G%d", g);
  if (strcmp(o->group, group) != 0 || o->queue_id != q || o->offset != (int64_t)g * 1000 + q) {
    s->bad++;
  }
  s->n++;
  return RMQ_OK;
}

typedef struct topics {
  rmq_topic_config t[16];
  int n;
} topics;

static int collect_topic(void *ctx, const rmq_topic_config *t) {
  topics *c = ctx;
  if (c->n < 16) c->t[c->n++] = *t;
  return RMQ_OK;
}

static bool offset_is(const rmq_consumer_offset *o, const char *topic, const char *group, int q,
                      int64_t off) {
  return strcmp(o->topic, topic) == 0 && strcmp(o->group, group) == 0 && o->queue_id == q &&
         o->offset == off;
}

/* -------------------------------------------------------------- golden */

static void test_golden_consumer_offsets(void) {
  size_t len;
  char *text = golden("consumerOffset.json", &len);
  offsets c = {0};
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_consumer_offsets_parse(text, len, collect_offset, &c, &err), RMQ_OK);
  CHECK_EQ_INT(c.n, 9);
  CHECK(offset_is(&c.e[0], "%RETRY%billing", "billing", 0, 0));
  CHECK(offset_is(&c.e[1], "Orders", "billing", 0, 250));
  CHECK(offset_is(&c.e[2], "Orders", "billing", 1, 249));
  CHECK(offset_is(&c.e[3], "Orders", "billing", 2, 251));
  CHECK(offset_is(&c.e[4], "Orders", "billing", 3, 250));
  CHECK(offset_is(&c.e[5], "Orders", "audit", 0, 12));
  CHECK(offset_is(&c.e[6], "Orders", "audit", 1, 0));
  CHECK(offset_is(&c.e[7], "Orders", "audit", 2, 7));
  CHECK(offset_is(&c.e[8], "Orders", "audit", 3, 3));
  /* Written back: the same bytes. */
  char *out = rmq_consumer_offsets_format(c.e, c.n);
  CHECK_EQ_STR(out, text);
  free(out);
  free(text);
}

static void test_golden_delay_offsets(void) {
  size_t len;
  char *text = golden("delayOffset.json", &len);
  int64_t off[18];
  for (int i = 0; i < 18; i++) off[i] = -7;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_delay_offsets_parse(text, len, off, 18, &err), RMQ_OK);
  CHECK_EQ_INT(off[0], 4);
  CHECK_EQ_INT(off[1], 0);
  CHECK_EQ_INT(off[2], 17);
  CHECK_EQ_INT(off[17], 2);
  int untouched = 0;
  for (int i = 3; i < 17; i++) untouched += off[i] == -7;
  CHECK_EQ_INT(untouched, 14);
  /* The format writes every level: levels 1..3 are the golden file without level 18. */
  char *out = rmq_delay_offsets_format(off, 3);
  char *cut = strstr(text, ",18:2");
  if (cut) memmove(cut, cut + 5, strlen(cut + 5) + 1);
  CHECK_EQ_STR(out, text);
  free(out);
  free(text);
}

static void test_golden_topics(void) {
  size_t len;
  char *text = golden("topics.json", &len);
  topics c = {0};
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_topic_configs_parse(text, len, collect_topic, &c, &err), RMQ_OK);
  CHECK_EQ_INT(c.n, 2);
  CHECK_EQ_STR(c.t[0].topic, "Orders");
  CHECK_EQ_INT(c.t[0].read_queues, 4);
  CHECK_EQ_INT(c.t[0].write_queues, 4);
  CHECK_EQ_INT(c.t[0].perm, 6);
  CHECK_EQ_INT(c.t[0].sys_flag, 0);
  CHECK(!c.t[0].order);
  CHECK_EQ_STR(c.t[1].topic, "SCHEDULE_TOPIC_XXXX");
  CHECK_EQ_INT(c.t[1].read_queues, 18);
  CHECK_EQ_INT(c.t[1].write_queues, 18);
  CHECK_EQ_INT(c.t[1].perm, 6);
  char *out = rmq_topic_configs_format(c.t, c.n, 3, 1764576000000);
  CHECK_EQ_STR(out, text);
  free(out);
  free(text);
}

/* ---------------------------------------------------------- round trips */

static void test_round_trips(void) {
  rmq_err err = {0};
  /* Entries of one group apart from each other are written together. */
  rmq_consumer_offset in[5] = {{"T1", "g1", 0, 5},
                               {"T2", "g1", 0, INT64_MAX},
                               {"T1", "g1", 7, 0},
                               {"T1", "g2", 1, 9},
                               {"%RETRY%g|x", "g-2_%", INT32_MAX, 1}};
  char *text = rmq_consumer_offsets_format(in, 5);
  offsets c = {0};
  CHECK_EQ_INT(rmq_consumer_offsets_parse(text, strlen(text), collect_offset, &c, &err), RMQ_OK);
  CHECK_EQ_INT(c.n, 5);
  CHECK(offset_is(&c.e[0], "T1", "g1", 0, 5));
  CHECK(offset_is(&c.e[1], "T1", "g1", 7, 0));
  CHECK(offset_is(&c.e[2], "T2", "g1", 0, INT64_MAX));
  CHECK(offset_is(&c.e[3], "T1", "g2", 1, 9));
  CHECK(offset_is(&c.e[4], "%RETRY%g|x", "g-2_%", INT32_MAX, 1));
  free(text);

  text = rmq_consumer_offsets_format(NULL, 0);
  CHECK_EQ_STR(text, "{\n\t\"offsetTable\":{}\n}");
  c.n = 0;
  CHECK_EQ_INT(rmq_consumer_offsets_parse(text, strlen(text), collect_offset, &c, &err), RMQ_OK);
  CHECK_EQ_INT(c.n, 0);
  free(text);

  int64_t levels[RMQ_MAX_DELAY_LEVELS], back[RMQ_MAX_DELAY_LEVELS];
  for (int i = 0; i < RMQ_MAX_DELAY_LEVELS; i++) levels[i] = (int64_t)i * 1000003, back[i] = -1;
  levels[5] = INT64_MAX;
  text = rmq_delay_offsets_format(levels, RMQ_MAX_DELAY_LEVELS);
  CHECK_EQ_INT(rmq_delay_offsets_parse(text, strlen(text), back, RMQ_MAX_DELAY_LEVELS, &err),
               RMQ_OK);
  CHECK_EQ_MEM(levels, back, sizeof levels);
  free(text);
  text = rmq_delay_offsets_format(NULL, 0);
  CHECK_EQ_STR(text, "{\n\t\"offsetTable\":{}\n}");
  free(text);

  rmq_topic_config t[2] = {{"A", 1, 2, 4, 3, true}, {"B-b", 0, 0, 15, INT32_MAX, false}};
  text = rmq_topic_configs_format(t, 2, -1, 0);
  topics tc = {0};
  CHECK_EQ_INT(rmq_topic_configs_parse(text, strlen(text), collect_topic, &tc, &err), RMQ_OK);
  CHECK_EQ_INT(tc.n, 2);
  CHECK_EQ_MEM(&tc.t[0], &t[0], sizeof t[0]);
  CHECK(strcmp(tc.t[1].topic, "B-b") == 0 && tc.t[1].perm == 15 && tc.t[1].sys_flag == INT32_MAX &&
        tc.t[1].read_queues == 0 && !tc.t[1].order);
  free(text);
  text = rmq_topic_configs_format(NULL, 0, 0, 0);
  CHECK_EQ_STR(text, "{\n\t\"dataVersion\":{\n\t\t\"counter\":0,\n\t\t\"timestamp\":0\n\t},\n\t"
                     "\"topicConfigTable\":{}\n}");
  free(text);
}

/* Many groups whose entries come interleaved: each group is written once, its queues in order. */
static void test_many_groups(void) {
  enum { GROUPS = 500, QUEUES = 16 };
  rmq_consumer_offset *in = calloc(GROUPS * QUEUES, sizeof *in);
  for (int q = 0, i = 0; q < QUEUES; q++) {
    for (int g = 0; g < GROUPS; g++, i++) {
      snprintf(in[i].topic, sizeof in[i].topic, "T%d", g % 7);
      snprintf(in[i].group, sizeof in[i].group, "G%d", g);
      in[i].queue_id = q;
      in[i].offset = (int64_t)g * 1000 + q;
    }
  }
  char *text = rmq_consumer_offsets_format(in, GROUPS * QUEUES);
  int n = 0;
  for (const char *p = text; (p = strstr(p, "@G")) != NULL; p++) n++;
  CHECK_EQ_INT(n, GROUPS);
  /* The first group comes first, with its queues 0..15 in a row. */
  CHECK(strncmp(text, "{\n\t\"offsetTable\":{\n\t\t\"T0@G0\":{0:0,1:1,2:2,", 30) == 0);
  rmq_err err = {0};
  offsets_seen seen = {0};
  CHECK_EQ_INT(rmq_consumer_offsets_parse(text, strlen(text), check_offset, &seen, &err), RMQ_OK);
  CHECK_EQ_INT(seen.n, GROUPS * QUEUES);
  CHECK_EQ_INT(seen.bad, 0);
  free(text);
  free(in);
}

/* What fastjson also reads: compact text, quoted integer keys, unknown members. */
static void test_lenient(void) {
  rmq_err err = {0};
  offsets c = {0};
  const char *compact = "{\"offsetTable\":{\"Orders@billing\":{0:250,\"1\":-0}}}";
  CHECK_EQ_INT(rmq_consumer_offsets_parse(compact, strlen(compact), collect_offset, &c, &err),
               RMQ_OK);
  CHECK_EQ_INT(c.n, 2);
  CHECK(offset_is(&c.e[1], "Orders", "billing", 1, 0));

  const char *extra =
      " \r\n{\"dataVersion\":{\"counter\":1e3,\"x\":[1,-2.5E+3,[],{},\"s\\u00e9\\ud83d\\ude00\","
      "true,false,null]},\"offsetTable\":{\"T@g\":{3:4}},\"more\":null, "
      "\"big\":123456789012345678901234567890}\n";
  c.n = 0;
  CHECK_EQ_INT(rmq_consumer_offsets_parse(extra, strlen(extra), collect_offset, &c, &err), RMQ_OK);
  if (err.code) fprintf(stderr, "  %s\n", err.msg);
  CHECK(c.n == 1 && offset_is(&c.e[0], "T", "g", 3, 4));

  /* Absent fields keep TopicConfig's defaults. */
  const char *sparse = "{\"topicConfigTable\":{\"T\":{\"perm\":4,\"attributes\":{\"a\":\"b\"}}}}";
  topics tc = {0};
  CHECK_EQ_INT(rmq_topic_configs_parse(sparse, strlen(sparse), collect_topic, &tc, &err), RMQ_OK);
  CHECK(tc.n == 1 && tc.t[0].read_queues == 16 && tc.t[0].write_queues == 16 && tc.t[0].perm == 4 &&
        tc.t[0].sys_flag == 0 && !tc.t[0].order);

  /* Levels beyond max_levels are ignored; offsets stay untouched. */
  int64_t off[2] = {-1, -1};
  const char *delay = "{\"offsetTable\":{2:9,64:1}}";
  CHECK_EQ_INT(rmq_delay_offsets_parse(delay, strlen(delay), off, 2, &err), RMQ_OK);
  CHECK(off[0] == -1 && off[1] == 9);
  CHECK_EQ_INT(rmq_delay_offsets_parse(delay, strlen(delay), off, 65, &err), RMQ_EINVAL);
  CHECK_EQ_STR(err.msg, "max_levels 65 is outside 0..64");
}

/* ------------------------------------------------------------- damage */

static int never_called(void *ctx, const rmq_consumer_offset *o) {
  (void)o;
  ++*(int *)ctx;
  return RMQ_OK;
}

static int never_called_topic(void *ctx, const rmq_topic_config *t) {
  (void)t;
  ++*(int *)ctx;
  return RMQ_OK;
}

/* A consumerOffset text that must fail with exactly msg, delivering nothing. */
static void offsets_bad(const char *text, const char *msg) {
  rmq_err err = {0};
  int calls = 0;
  CHECK_EQ_INT(rmq_consumer_offsets_parse(text, strlen(text), never_called, &calls, &err),
               RMQ_ECORRUPT);
  CHECK_EQ_STR(err.msg, msg);
  CHECK_EQ_INT(calls, 0);
}

static void topics_bad(const char *text, const char *msg) {
  rmq_err err = {0};
  int calls = 0;
  CHECK_EQ_INT(rmq_topic_configs_parse(text, strlen(text), never_called_topic, &calls, &err),
               RMQ_ECORRUPT);
  CHECK_EQ_STR(err.msg, msg);
  CHECK_EQ_INT(calls, 0);
}

static void delay_bad(const char *text, const char *msg) {
  rmq_err err = {0};
  int64_t off[18] = {0};
  CHECK_EQ_INT(rmq_delay_offsets_parse(text, strlen(text), off, 18, &err), RMQ_ECORRUPT);
  CHECK_EQ_STR(err.msg, msg);
}

static void test_damaged(void) {
  offsets_bad("", "offset 0: expected '{', found the end of the text");
  offsets_bad("[]", "offset 0: expected '{', found '['");
  offsets_bad("{\"offsetTable\":{\"T@g\":{0:1}}} x",
              "offset 30: expected the end of the text, found 'x'");
  offsets_bad("{\"offsetTable\":{\"T@g\":{0:1,}}}", "offset 27: expected a key, found '}'");
  offsets_bad("{\"offsetTable\":{\"T@g\":{0 1}}}",
              "offset 25: expected ':' after a key, found '1'");
  offsets_bad("{\"offsetTable\":{\"T@g\":{0:1}",
              "offset 27: expected ',' or '}', found the end of the text");
  offsets_bad("{\"offsetTable\":{\"Tg\":{0:1}}}",
              "offset 16: expected \"<topic>@<group>\" with a valid topic and group as the key, "
              "found \"Tg\"");
  offsets_bad("{\"offsetTable\":{\"T@g@h\":{0:1}}}",
              "offset 16: expected \"<topic>@<group>\" with a valid topic and group as the key, "
              "found \"T@g@h\"");
  offsets_bad("{\"offsetTable\":{\"T@g\":{x:1}}}", "offset 23: expected a key, found 'x'");
  offsets_bad("{\"offsetTable\":{\"T@g\":{\"a\":1}}}",
              "offset 23: expected queue id 0..2147483647 as the key, found \"a\"");
  offsets_bad("{\"offsetTable\":{\"T@g\":{2147483648:1}}}",
              "offset 23: expected queue id 0..2147483647 as the key, found \"2147483648\"");
  offsets_bad("{\"offsetTable\":{\"T@g\":{-1:1}}}",
              "offset 23: expected queue id 0..2147483647 as the key, found \"-1\"");
  offsets_bad("{\"offsetTable\":{\"T@g\":{0:-1}}}",
              "offset 25: offset -1 out of range 0..9223372036854775807");
  offsets_bad("{\"offsetTable\":{\"T@g\":{0:9223372036854775808}}}",
              "offset 25: integer out of the range of a long");
  offsets_bad("{\"offsetTable\":{\"T@g\":{0:99999999999999999999999}}}",
              "offset 25: integer out of the range of a long");
  offsets_bad("{\"offsetTable\":{\"T@g\":{0:1.5}}}",
              "offset 26: expected an integer without fraction or exponent, found '.'");
  offsets_bad("{\"offsetTable\":{\"T@g\":{0:\"1\"}}}",
              "offset 25: expected an integer, found '\"'");
  offsets_bad("{\"offsetTable\":{\"T@g\":{0:1}},\"x\":\"a\\qb\"}",
              "offset 36: expected an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u), found 'q'");
  offsets_bad("{\"x\":\"\\u12\"}", "offset 10: expected four hex digits after \\u, found '\"'");
  offsets_bad("{\"x\":\"\\ud800x\"}",
              "offset 12: expected a \\u low surrogate after a high one, found 'x'");
  offsets_bad("{\"x\":\"\\u0000\"}", "offset 12: expected a string without \\u0000, found '\"'");
  offsets_bad("{\"x\":tru}", "offset 5: expected a value, found 't'");
  offsets_bad("{\"x\":-}", "offset 6: expected a digit, found '}'");

  /* A NUL byte inside the given length. */
  rmq_err err = {0};
  int calls = 0;
  const char nul[] = "{\"x\":\"a\0b\"}";
  CHECK_EQ_INT(rmq_consumer_offsets_parse(nul, sizeof nul - 1, never_called, &calls, &err),
               RMQ_ECORRUPT);
  CHECK_EQ_STR(err.msg, "offset 7: expected a string without NUL bytes, found byte 0x00");

  /* Deep nesting in a member nobody reads. */
  char deep[256] = "{\"x\":";
  for (int i = 0; i < 40; i++) strcat(deep, "[");
  offsets_bad(deep, "offset 20: nesting deeper than 16 levels");
  char nested[512] = "";
  for (int i = 0; i < 16; i++) strcat(nested, "{\"a\":");
  strcat(nested, "{}");
  offsets_bad(nested, "offset 80: nesting deeper than 16 levels");

  /* A key longer than any name. */
  char *long_key = malloc(3000);
  snprintf(long_key, 3000, "{\"offsetTable\":{\"%02000d\":{}}}", 0);
  offsets_bad(long_key, "offset 16: string longer than 1024 bytes");
  free(long_key);

  /* A group of 256 characters, a topic of 128. */
  char name[600];
  snprintf(name, sizeof name, "{\"offsetTable\":{\"T@%0256d\":{}}}", 0);
  rmq_err e2 = {0};
  CHECK_EQ_INT(rmq_consumer_offsets_parse(name, strlen(name), never_called, &calls, &e2),
               RMQ_ECORRUPT);
  snprintf(name, sizeof name, "{\"offsetTable\":{\"T@%0255d\":{}}}", 0);
  CHECK_EQ_INT(rmq_consumer_offsets_parse(name, strlen(name), never_called, &calls, &e2), RMQ_OK);

  topics_bad("{\"topicConfigTable\":{\"a b\":{}}}",
             "offset 21: expected a valid topic name (1..127 of [A-Za-z0-9_%|-]) as the key, "
             "found \"a b\"");
  topics_bad("{\"topicConfigTable\":{\"A\":{\"topicName\":\"B\"}}}",
             "offset 38: expected topicName \"A\" as its key says, found \"B\"");
  topics_bad("{\"topicConfigTable\":{\"A\":{\"perm\":16}}}",
             "offset 33: perm 16 out of range 0..15");
  topics_bad("{\"topicConfigTable\":{\"A\":{\"readQueueNums\":-4}}}",
             "offset 42: readQueueNums -4 out of range 0..2147483647");
  topics_bad("{\"topicConfigTable\":{\"A\":{\"order\":1}}}",
             "offset 34: expected true or false, found '1'");
  topics_bad("{\"topicConfigTable\":{\"A\":{}},\"dataVersion\":{\"counter\":}}",
             "offset 54: expected a value, found '}'");

  offsets_bad("null", "offset 0: expected '{', found 'n'");
  offsets_bad("{\"offsetTable\":null}x", "offset 20: expected the end of the text, found 'x'");
  /* Leading zeros: refused, never cut to another number. */
  char zeros[2100] = "{\"offsetTable\":{\"T@g\":{";
  for (int i = 0; i < 2000; i++) strcat(zeros, "0");
  strcat(zeros, "1:5}}}");
  offsets_bad(zeros, "offset 23: expected an integer without a leading zero");

  delay_bad("{\"offsetTable\":{0:1}}",
            "offset 16: expected delay level 1..64 as the key, found \"0\"");
  delay_bad("{\"offsetTable\":{65:1}}",
            "offset 16: expected delay level 1..64 as the key, found \"65\"");
  delay_bad("{\"offsetTable\":{1:-5}}", "offset 18: offset -5 out of range 0..9223372036854775807");
  delay_bad("{\"offsetTable\":[1]}", "offset 15: expected '{', found '['");
  /* A key twice is a flipped byte that made one key into another: level 11 lost. */
  delay_bad("{\"offsetTable\":{1:7,10:0,\t1:0}}",
            "offset 26: the key \"1\" twice in one object (first at offset 16)");
  offsets_bad("{\"offsetTable\":{\"T@g\":{0:5,0:6}}}",
              "offset 27: the key \"0\" twice in one object (first at offset 23)");
  offsets_bad("{\"offsetTable\":{\"T@g\":{0:5},\"T@\\u0067\":{1:6}}}",
              "offset 28: the key \"T@g\" twice in one object (first at offset 16)");
  topics_bad("{\"topicConfigTable\":{\"T\":{\"perm\":2,\"perm\":4}}}",
             "offset 35: the key \"perm\" twice in one object (first at offset 26)");
  /* Many keys, one object: the set grows and still finds the twin. */
  char many[40000] = "{\"offsetTable\":{\"T@g\":{", msg[128];
  size_t first = 0;
  for (int i = 0; i < 3000; i++) {
    if (i == 2999) first = strlen(many);
    sprintf(many + strlen(many), "%d:1,", i);
  }
  snprintf(msg, sizeof msg,
           "offset %zu: the key \"2999\" twice in one object (first at offset %zu)", strlen(many),
           first);
  strcat(many, "2999:2}}}");
  offsets_bad(many, msg);
}

/* Every cut of the golden files fails cleanly and delivers nothing. */
static void test_truncated(void) {
  const char *names[] = {"consumerOffset.json", "delayOffset.json", "topics.json"};
  for (int f = 0; f < 3; f++) {
    size_t len;
    char *text = golden(names[f], &len);
    int bad = 0, calls = 0;
    for (size_t cut = 0; text && cut < len; cut++) {
      rmq_err err = {0};
      int64_t off[18] = {0};
      /* A copy of exactly cut bytes, so that ASan sees any read past it. */
      char *part = malloc(cut ? cut : 1);
      memcpy(part, text, cut);
      int rc = f == 0   ? rmq_consumer_offsets_parse(part, cut, never_called, &calls, &err)
               : f == 1 ? rmq_delay_offsets_parse(part, cut, off, 18, &err)
                        : rmq_topic_configs_parse(part, cut, never_called_topic, &calls, &err);
      if (rc != RMQ_ECORRUPT || strncmp(err.msg, "offset ", 7) != 0) {
        bad++;
        fprintf(stderr, "  %s cut at %zu: %d %s\n", names[f], cut, rc, err.msg);
      }
      free(part);
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(calls, 0);
    free(text);
  }
}

/* ------------------------------------------------------------- salvage */

/*
** Where each "<queue>:<offset>" or "<level>:<offset>" of a golden text ends
** (the byte after its digits), in the text's order: an entry a cut keeps is
** one that ends before the cut.
*/
static int entry_ends(const char *text, size_t len, size_t *ends, int cap) {
  int n = 0;
  for (size_t i = 1; i + 1 < len && n < cap; i++) {
    if (text[i] != ':' || text[i - 1] < '0' || text[i - 1] > '9') continue;
    size_t j = i + 1;
    while (j < len && text[j] >= '0' && text[j] <= '9') j++;
    ends[n++] = j;
  }
  return n;
}

/*
** Every cut of the golden consumerOffset.json: the damage is at the cut, and
** the entries kept are exactly the golden's that end before it, in order,
** with their values; the whole text is sound and gives every entry.
*/
static void test_salvage_cuts(void) {
  size_t len, ends[64];
  char *text = golden("consumerOffset.json", &len);
  if (!text) return;
  offsets all = {.n = 0};
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_consumer_offsets_parse(text, len, collect_offset, &all, &err), RMQ_OK);
  int n = entry_ends(text, len, ends, 64);
  CHECK_EQ_INT(n, all.n);
  int bad = 0;
  for (size_t cut = 0; cut <= len; cut++) {
    char *part = malloc(cut ? cut : 1);
    memcpy(part, text, cut);
    offsets got = {.n = 0};
    rmq_config_damage d;
    int rc = rmq_consumer_offsets_salvage(part, cut, collect_offset, &got, &d, &err);
    int want = 0;
    while (want < n && ends[want] < cut) want++;
    bool same = rc == RMQ_OK && got.n == (cut == len ? n : want);
    for (int i = 0; same && i < got.n; i++) {
      same = offset_is(&got.e[i], all.e[i].topic, all.e[i].group, all.e[i].queue_id,
                       all.e[i].offset);
    }
    same = same && d.at == (cut == len ? -1 : (int64_t)cut);
    if (!same) {
      bad++;
      fprintf(stderr, "  cut at %zu: rc %d, %d entries, damage at %lld (%s)\n", cut, rc, got.n,
              (long long)d.at, d.why);
    }
    free(part);
  }
  CHECK_EQ_INT(bad, 0);
  free(text);
}

static void test_salvage_damage(void) {
  rmq_config_damage d;
  rmq_err err = {0};
  offsets got = {.n = 0};
  /* Garbage in the middle: what comes before it. */
  const char *garbage = "{\"offsetTable\":{\"T@g\":{0:5,1:6},\"U@g\":{0:7#!x,1:8}}}";
  CHECK_EQ_INT(
      rmq_consumer_offsets_salvage(garbage, strlen(garbage), collect_offset, &got, &d, &err),
      RMQ_OK);
  CHECK_EQ_INT(got.n, 2);
  CHECK(got.n == 2 && offset_is(&got.e[1], "T", "g", 1, 6));
  CHECK_EQ_INT(d.at, 42);
  CHECK_EQ_STR(d.why, "offset 42: expected ',' or '}', found '#'");
  /* A bad number: a negative offset, digits run into a letter. */
  const char *negative = "{\"offsetTable\":{\"T@g\":{0:5,1:-3,2:7}}}";
  got.n = 0;
  CHECK_EQ_INT(
      rmq_consumer_offsets_salvage(negative, strlen(negative), collect_offset, &got, &d, &err),
      RMQ_OK);
  CHECK(got.n == 1 && offset_is(&got.e[0], "T", "g", 0, 5));
  CHECK_EQ_INT(d.at, 29);
  const char *run_on = "{\"offsetTable\":{\"T@g\":{0:12a}}}";
  got.n = 0;
  CHECK_EQ_INT(rmq_consumer_offsets_salvage(run_on, strlen(run_on), collect_offset, &got, &d, &err),
               RMQ_OK);
  CHECK_EQ_INT(got.n, 0);
  CHECK_EQ_INT(d.at, 27);
  /* Nothing reads: no entry, the damage at the first byte. */
  got.n = 0;
  CHECK_EQ_INT(rmq_consumer_offsets_salvage("garbage", 7, collect_offset, &got, &d, &err), RMQ_OK);
  CHECK_EQ_INT(got.n, 0);
  CHECK_EQ_INT(d.at, 0);
  /* fn's code stops the walk and is returned. */
  offsets stop = {.stop_at = 1};
  CHECK_EQ_INT(
      rmq_consumer_offsets_salvage(garbage, strlen(garbage), collect_offset, &stop, &d, &err),
      RMQ_EINVAL);
}

/* delayOffset.json: the levels read whole, the others untouched; topics.json's damage. */
static void test_salvage_levels(void) {
  size_t len, ends[16];
  char *text = golden("delayOffset.json", &len);
  if (!text) return;
  int n = entry_ends(text, len, ends, 16);
  CHECK_EQ_INT(n, 4);
  static const int levels[] = {1, 2, 3, 18};
  static const int64_t values[] = {4, 0, 17, 2};
  int bad = 0;
  for (size_t cut = 0; cut < len; cut++) {
    int64_t off[RMQ_MAX_DELAY_LEVELS];
    bool seen[RMQ_MAX_DELAY_LEVELS] = {false};
    for (int i = 0; i < RMQ_MAX_DELAY_LEVELS; i++) off[i] = -1;
    rmq_config_damage d;
    rmq_err err = {0};
    int rc = rmq_delay_offsets_salvage(text, cut, off, seen, &d, &err);
    int kept = 0, wrong = 0;
    for (int k = 0; k < n; k++) {
      bool want = ends[k] < cut;
      kept += seen[levels[k] - 1];
      wrong += seen[levels[k] - 1] != want || (want && off[levels[k] - 1] != values[k]);
    }
    if (rc != RMQ_OK || wrong || d.at != (int64_t)cut || off[4] != -1) {
      bad++;
      fprintf(stderr, "  cut at %zu: rc %d, %d kept, %d wrong, at %lld\n", cut, rc, kept, wrong,
              (long long)d.at);
    }
  }
  CHECK_EQ_INT(bad, 0);
  free(text);

  text = golden("topics.json", &len);
  if (!text) return;
  topics got = {.n = 0};
  rmq_config_damage d;
  rmq_err err = {0};
  /* The cut falls inside SCHEDULE_TOPIC_XXXX's object: Orders closed before it. */
  size_t cut = (size_t)(strstr(text, "\"SCHEDULE_TOPIC_XXXX\":{") - text) + 30;
  CHECK_EQ_INT(rmq_topic_configs_salvage(text, cut, collect_topic, &got, &d, &err), RMQ_OK);
  CHECK(got.n == 1 && strcmp(got.t[0].topic, "Orders") == 0 && got.t[0].read_queues == 4);
  CHECK_EQ_INT(d.at, (int64_t)cut);
  CHECK_EQ_INT(rmq_topic_configs_salvage(text, len, NULL, NULL, &d, &err), RMQ_OK);
  CHECK_EQ_INT(d.at, -1);
  free(text);
}

/* fn's non-zero return stops the walk and is returned. */
static void test_callback_stops(void) {
  size_t len;
  char *text = golden("consumerOffset.json", &len);
  offsets c = {.stop_at = 2};
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_consumer_offsets_parse(text, len, collect_offset, &c, &err), RMQ_EINVAL);
  CHECK_EQ_INT(c.n, 2);
  free(text);
}

static void test_group_valid(void) {
  char name[300];
  memset(name, 'g', sizeof name);
  CHECK(rmq_group_valid(name, 255));
  CHECK(!rmq_group_valid(name, 256));
  CHECK(!rmq_group_valid(name, 0));
  CHECK(rmq_group_valid("%RETRY%a|b-c_9", 14));
  CHECK(!rmq_group_valid("a@b", 3));
  CHECK(!rmq_group_valid("a.b", 3));
  CHECK(rmq_topic_valid(name, 127) && !rmq_topic_valid(name, 128));
}

/* ------------------------------------------------------ persist and load */

typedef struct load_ctx {
  offsets o;
} load_ctx;

static int parse_offsets(void *ctx, const char *text, size_t len, rmq_err *err) {
  load_ctx *l = ctx;
  l->o.n = 0;
  return rmq_consumer_offsets_parse(text, len, collect_offset, &l->o, err);
}

static const char *one_text = "{\"offsetTable\":{\"T@g\":{0:1}}}";
static const char *two_text = "{\"offsetTable\":{\"T@g\":{0:2}}}";

/* Loads path: want rc and from, and the offset of T@g queue 0 when one was loaded. */
static void load_expect(const char *path, int want_rc, int want_from, int64_t want_offset,
                        const char *want_msg) {
  load_ctx l = {0};
  int from = -1;
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_config_load(path, parse_offsets, &l, &from, &err), want_rc);
  CHECK_EQ_INT(from, want_from);
  if (want_from != RMQ_CONFIG_NONE) CHECK(l.o.n == 1 && l.o.e[0].offset == want_offset);
  if (want_msg) CHECK_EQ_STR(err.msg, want_msg);
}

static void test_persist_load(const char *dir) {
  char path[512], bak[600], tmp[600], msg[4096];
  snprintf(path, sizeof path, "%s/config/consumerOffset.json", dir);
  snprintf(bak, sizeof bak, "%s.bak", path);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  rmq_err err = {0};

  /* Nothing yet: a new store. */
  load_expect(path, RMQ_OK, RMQ_CONFIG_NONE, 0, "");
  /* The first persist creates config/ and no .bak. */
  CHECK_EQ_INT(rmq_config_persist(path, one_text, strlen(one_text), &err), RMQ_OK);
  CHECK(!exists(bak) && !exists(tmp));
  load_expect(path, RMQ_OK, RMQ_CONFIG_FILE, 1, "");
  /* The second keeps the first in .bak. */
  CHECK_EQ_INT(rmq_config_persist(path, two_text, strlen(two_text), &err), RMQ_OK);
  size_t len;
  char *b = slurp(bak, &len);
  CHECK_EQ_STR(b, one_text);
  free(b);
  load_expect(path, RMQ_OK, RMQ_CONFIG_FILE, 2, "");

  /* The main file missing, empty, cut short: the .bak. */
  unlink(path);
  load_expect(path, RMQ_OK, RMQ_CONFIG_BAK, 1, "");
  spit(path, "", 0);
  load_expect(path, RMQ_OK, RMQ_CONFIG_BAK, 1, "");
  spit(path, two_text, 20);
  load_expect(path, RMQ_OK, RMQ_CONFIG_BAK, 1, "");

  /* An empty main file is not copied over a useful .bak. */
  spit(path, "", 0);
  CHECK_EQ_INT(rmq_config_persist(path, two_text, strlen(two_text), &err), RMQ_OK);
  b = slurp(bak, &len);
  CHECK_EQ_STR(b, one_text);
  free(b);

  /* Broken with no .bak, both broken, only the .bak broken: errors that name the files. */
  spit(path, two_text, 20);
  unlink(bak);
  snprintf(
      msg, sizeof msg,
      "%s: offset 20: expected '\"' closing the string, found the end of the text; no %s to fall "
      "back to",
      path, bak);
  load_expect(path, RMQ_ECORRUPT, RMQ_CONFIG_NONE, 0, msg);
  spit(bak, "{", 1);
  snprintf(
      msg, sizeof msg,
      "%s: offset 20: expected '\"' closing the string, found the end of the text; and %s: offset "
      "1: expected a key, found the end of the text",
      path, bak);
  load_expect(path, RMQ_ECORRUPT, RMQ_CONFIG_NONE, 0, msg);
  unlink(path);
  snprintf(msg, sizeof msg, "%s: offset 1: expected a key, found the end of the text", bak);
  load_expect(path, RMQ_ECORRUPT, RMQ_CONFIG_NONE, 0, msg);
  /* Both empty: a new store. */
  spit(path, "", 0);
  spit(bak, "", 0);
  load_expect(path, RMQ_OK, RMQ_CONFIG_NONE, 0, "");

  CHECK_EQ_INT(rmq_config_persist(NULL, "", 0, &err), RMQ_EINVAL);
  CHECK_EQ_STR(err.msg, "no config file path");
}

static int parse_refuses(void *ctx, const char *text, size_t len, rmq_err *err) {
  (void)text, (void)len;
  ++*(int *)ctx;
  return rmq_err_set(err, RMQ_ENOMEM, "no memory for the table");
}

static void test_load_other_code(const char *dir) {
  char path[512];
  snprintf(path, sizeof path, "%s/config/x.json", dir);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_config_persist(path, one_text, strlen(one_text), &err), RMQ_OK);
  CHECK_EQ_INT(rmq_config_persist(path, one_text, strlen(one_text), &err), RMQ_OK);
  int calls = 0, from = -1;
  CHECK_EQ_INT(rmq_config_load(path, parse_refuses, &calls, &from, &err), RMQ_ENOMEM);
  CHECK_EQ_INT(calls, 1);
  CHECK_EQ_INT(from, RMQ_CONFIG_NONE);
  char msg[1024];
  snprintf(msg, sizeof msg, "%s: no memory for the table", path);
  CHECK_EQ_STR(err.msg, msg);
}

/* Persist with the nth call of op failing: RMQ_EIO naming file, the old text intact. */
static void persist_fault(const char *path, rmq_io_op op, int nth, int e, long short_len,
                          const char *want_msg) {
  rmq_err err = {0};
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  rmq_io_fault(op, nth, e, short_len);
  int rc = rmq_config_persist(path, two_text, strlen(two_text), &err);
  rmq_io_fault(op, 0, 0, -1);
  CHECK_EQ_INT(rc, RMQ_EIO);
  CHECK_EQ_STR(err.msg, want_msg);
  CHECK(!exists(tmp));
  size_t len;
  char *text = slurp(path, &len);
  CHECK_EQ_STR(text, one_text);
  free(text);
}

static void test_faults(const char *dir) {
  char cdir[256], path[512], bak[600], msg[4096];
  snprintf(cdir, sizeof cdir, "%s/faults", dir);
  snprintf(path, sizeof path, "%s/x.json", cdir);
  snprintf(bak, sizeof bak, "%s.bak", path);
  rmq_err err = {0};
  CHECK_EQ_INT(rmq_config_persist(path, one_text, strlen(one_text), &err), RMQ_OK);

  snprintf(msg, sizeof msg, "cannot create %s.tmp: %s", path, strerror(ENOSPC));
  persist_fault(path, RMQ_IO_OPEN, 1, ENOSPC, -1, msg);
  snprintf(msg, sizeof msg, "cannot write %s.tmp: %s", path, strerror(ENOSPC));
  persist_fault(path, RMQ_IO_PWRITE, 1, ENOSPC, -1, msg);
  snprintf(msg, sizeof msg, "cannot write %s.tmp: wrote 3 of %zu bytes", path, strlen(two_text));
  persist_fault(path, RMQ_IO_PWRITE, 1, 0, 3, msg);
  snprintf(msg, sizeof msg, "cannot fsync %s.tmp: %s", path, strerror(EIO));
  persist_fault(path, RMQ_IO_FSYNC, 1, EIO, -1, msg);
  snprintf(msg, sizeof msg, "cannot read %s: %s", path, strerror(EIO));
  persist_fault(path, RMQ_IO_PREAD, 1, EIO, -1, msg);
  snprintf(msg, sizeof msg, "cannot fsync %s: %s", bak, strerror(EIO));
  persist_fault(path, RMQ_IO_FSYNC, 2, EIO, -1, msg);

  /* The directory's fsync fails after the rename: the new text is in place, unsynced. */
  rmq_io_fault(RMQ_IO_FSYNC, 3, EIO, -1);
  CHECK_EQ_INT(rmq_config_persist(path, two_text, strlen(two_text), &err), RMQ_EIO);
  rmq_io_fault(RMQ_IO_FSYNC, 0, 0, -1);
  snprintf(msg, sizeof msg, "cannot fsync directory %s: %s", cdir, strerror(EIO));
  CHECK_EQ_STR(err.msg, msg);

  /* A read that fails falls back to the .bak, and both failing is RMQ_EIO. */
  load_expect(path, RMQ_OK, RMQ_CONFIG_FILE, 2, "");
  rmq_io_fault(RMQ_IO_PREAD, 1, EIO, -1);
  load_expect(path, RMQ_OK, RMQ_CONFIG_BAK, 1, "");
  rmq_io_fault(RMQ_IO_OPEN, 1, EACCES, -1);
  load_expect(path, RMQ_OK, RMQ_CONFIG_BAK, 1, "");
  rmq_io_fault(RMQ_IO_PREAD, 1, EIO, -1);
  unlink(bak);
  snprintf(msg, sizeof msg, "cannot read %s: %s; no %s to fall back to", path, strerror(EIO), bak);
  load_expect(path, RMQ_EIO, RMQ_CONFIG_NONE, 0, msg);
  rmq_io_fault(RMQ_IO_PREAD, 0, 0, -1);
  rmq_io_fault(RMQ_IO_OPEN, 0, 0, -1);

  /* A file where a directory should be. */
  char blocked[600];
  snprintf(blocked, sizeof blocked, "%s/y.json", path);
  rmq_err_clear(&err);
  CHECK_EQ_INT(rmq_config_persist(blocked, one_text, strlen(one_text), &err), RMQ_EIO);
  snprintf(msg, sizeof msg, "cannot create %s.tmp: %s", blocked, strerror(ENOTDIR));
  CHECK_EQ_STR(err.msg, msg);
}

int main(void) {
  char dir[64];
  tu_tmpdir(dir, sizeof dir);
  test_golden_consumer_offsets();
  test_golden_delay_offsets();
  test_golden_topics();
  test_round_trips();
  test_many_groups();
  test_lenient();
  test_damaged();
  test_truncated();
  test_salvage_cuts();
  test_salvage_damage();
  test_salvage_levels();
  test_callback_stops();
  test_group_valid();
  test_persist_load(dir);
  test_load_other_code(dir);
  test_faults(dir);
  tu_rmrf(dir);
  return check_report();
}
