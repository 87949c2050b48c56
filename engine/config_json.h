/*
** config_json.h: the JSON of RocketMQ's config files (ConfigManager.encode
** and decode of ScheduleMessageService, ConsumerOffsetManager and
** TopicConfigManager) read and written as fastjson 1.x does.
**
** Reading: a lenient reader for what fastjson writes and reads: objects,
** strings with escapes, integers, true/false/null, and arrays and
** fractions inside members it does not know (skipped); whitespace of any
** kind (tabs, newlines), compact or pretty; map keys quoted, or integers
** without quotes ({0:250}), or integers in quotes ({"0":250}). A later
** duplicate key wins. It is bounded: nesting at most RMQ_CONFIG_JSON_DEPTH,
** strings at most RMQ_CONFIG_JSON_STRING bytes; it reads only the len
** bytes given (a NUL among them is an error) and allocates nothing.
**
** Each parser checks the whole text before it calls fn once: a text that
** fails never reaches fn, and delay offsets are left untouched. Errors:
** RMQ_ECORRUPT, with the byte offset and what was expected ("offset 42:
** expected ':' after a key, found '}'"), for bad syntax, a value out of
** range, a topic or group that breaks RocketMQ's naming rule, or input
** too deep or too long; otherwise fn's non-zero return, as it is.
**
** Writing: RocketMQ's pretty layout (JSON.toJSONString(this, true)): tab
** indentation, a string-keyed map with each member on its own line, an
** integer-keyed map on the line of its key and closed on its own line
** ({0:250,1:249\n\t\t}), an empty map as {}, bean fields in alphabetical
** order, no newline at the end. The texts are malloc'd and NUL-terminated,
** NULL when out of memory.
**
** Salvaging (rocketmq_verify, rocketmq_repair): a damaged text is read as far
** as it goes. The rmq_*_salvage functions say where it breaks and hand over
** every entry read whole before that byte: a queue's or level's offset when
** a byte that parsed follows its digits (a number the damage cut short, or
** one run into garbage, is not taken), a topic when its object closed. A
** sound text is read whole, as the parsers read it.
*/
#ifndef RMQ_CONFIG_JSON_H
#define RMQ_CONFIG_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rmq.h"

#define RMQ_CONFIG_JSON_DEPTH 16
#define RMQ_CONFIG_JSON_STRING 1024

/* Where a text breaks: the byte the parser stopped at, -1 for a sound text, and its message. */
typedef struct rmq_config_damage {
  int64_t at;
  char why[256]; /* "offset 42: expected ':' after a key, found '}'" */
} rmq_config_damage;

/* ------------------------------------------------------ delayOffset.json */

/*
** ScheduleMessageService's {"offsetTable":{<level>:<offset>,...}}. Sets
** offsets[level-1] for each level present, 1 <= level <= max_levels (at most
** RMQ_MAX_DELAY_LEVELS); levels above max_levels up to RMQ_MAX_DELAY_LEVELS
** are ignored (a broker configured with more levels wrote them), a level
** outside 1..RMQ_MAX_DELAY_LEVELS or a negative offset is RMQ_ECORRUPT.
** RMQ_EINVAL: max_levels outside 0..RMQ_MAX_DELAY_LEVELS.
*/
int rmq_delay_offsets_parse(const char *text, size_t len, int64_t *offsets, int max_levels,
                            rmq_err *err);
/*
** Salvage: *d, and (offsets not NULL) for each level read whole,
** offsets[level-1] and seen[level-1] = true (both RMQ_MAX_DELAY_LEVELS long;
** other levels untouched). RMQ_OK for a damaged text too.
*/
int rmq_delay_offsets_salvage(const char *text, size_t len, int64_t *offsets, bool *seen,
                              rmq_config_damage *d, rmq_err *err);
/* offsets[0..n) as levels 1..n. */
char *rmq_delay_offsets_format(const int64_t *offsets, int n);

/* --------------------------------------------------- consumerOffset.json */

typedef struct rmq_consumer_offset {
  char topic[128]; /* RocketMQ topics are at most 127 chars */
  char group[256]; /* groups at most 255 */
  int32_t queue_id;
  int64_t offset;
} rmq_consumer_offset;

/*
** ConsumerOffsetManager's {"offsetTable":{"<topic>@<group>":{<queueId>:
** <offset>,...},...}}: calls fn once per (topic, group, queue) in the order
** of the text; a non-zero return stops the walk and is returned. The key
** splits at its first '@'; topic and group must be valid (rmq_topic_valid,
** rmq_group_valid), queue ids 0..INT32_MAX and offsets >= 0, or
** RMQ_ECORRUPT. Other members (dataVersion) are skipped.
*/
int rmq_consumer_offsets_parse(const char *text, size_t len,
                               int (*fn)(void *ctx, const rmq_consumer_offset *o), void *ctx,
                               rmq_err *err);
/* Salvage: *d, and fn (may be NULL) for each entry read whole; RMQ_OK or fn's code. */
int rmq_consumer_offsets_salvage(const char *text, size_t len,
                                 int (*fn)(void *ctx, const rmq_consumer_offset *o), void *ctx,
                                 rmq_config_damage *d, rmq_err *err);
/* entries grouped by topic@group, the groups in the order of their first entry. */
char *rmq_consumer_offsets_format(const rmq_consumer_offset *entries, int n);

/* ------------------------------------------------------------ topics.json */

typedef struct rmq_topic_config {
  char topic[128];
  int32_t read_queues, write_queues, perm, sys_flag;
  bool order;
} rmq_topic_config;

/*
** TopicConfigSerializeWrapper's {"dataVersion":{...},"topicConfigTable":
** {"<topic>":{TopicConfig's fields},...}}: calls fn once per topic. A field
** that is absent keeps TopicConfig's default (16 read and 16 write queues,
** perm 6, sys flag 0, not ordered); unknown fields are skipped. RMQ_ECORRUPT:
** a topic name that is invalid or differs from its "topicName", queue
** numbers or sys flag outside 0..INT32_MAX, perm outside 0..15.
** dataVersion is checked for syntax only.
*/
int rmq_topic_configs_parse(const char *text, size_t len,
                            int (*fn)(void *ctx, const rmq_topic_config *t), void *ctx,
                            rmq_err *err);
/* Salvage: *d, and fn (may be NULL) for each topic read whole; RMQ_OK or fn's code. */
int rmq_topic_configs_salvage(const char *text, size_t len,
                              int (*fn)(void *ctx, const rmq_topic_config *t), void *ctx,
                              rmq_config_damage *d, rmq_err *err);
/* counter and timestamp go into "dataVersion". */
char *rmq_topic_configs_format(const rmq_topic_config *topics, int n, int64_t counter,
                               int64_t timestamp);

#endif
