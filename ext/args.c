/*
** args.c: the arguments of CREATE VIRTUAL TABLE ... USING rocketmq(...).
**
** Each argument is key=value; a value may be quoted with '...' or "...".
** `dir` is required (a path, quoted or not, but not an unquoted NULL); every
** other key has RocketMQ's default (rmq.h). An unknown key, a repeated key or
** a bad value is an error that names it, and the whole configuration is then
** checked against its limits.
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rmq_ext.h"

#define SPACE " \t\r\n"

typedef enum arg_kind {
  ARG_INT,
  ARG_BOOL,
  ARG_TEXT,
  ARG_FLUSH,
  ARG_HOST,
  ARG_HOURS,
  ARG_ROLE,
  ARG_CODEC
} arg_kind;

typedef struct arg_spec {
  const char *name;
  arg_kind kind;
  size_t offset; /* into rmq_config; for ARG_TEXT the field's size is text_cap */
  size_t text_cap;
} arg_spec;

#define INT_ARG(n) \
  { #n, ARG_INT, offsetof(rmq_config, n), 0 }
#define TEXT_ARG(n) \
  { #n, ARG_TEXT, offsetof(rmq_config, n), sizeof(((rmq_config *)0)->n) }

static const arg_spec arg_specs[] = {
    {"flush", ARG_FLUSH, 0, 0},
    INT_ARG(commitlog_file_size),
    INT_ARG(consumequeue_entries),
    INT_ARG(index_slots),
    INT_ARG(index_entries),
    INT_ARG(max_message_size),
    INT_ARG(default_queues),
    TEXT_ARG(delay_levels),
    INT_ARG(file_reserved_hours),
    {"delete_when", ARG_HOURS, offsetof(rmq_config, delete_when),
     sizeof(((rmq_config *)0)->delete_when)},
    INT_ARG(disk_max_used_ratio),
    INT_ARG(disk_clean_forcibly_ratio),
    INT_ARG(disk_warning_ratio),
    INT_ARG(clean_interval_ms),
    INT_ARG(clean_first_delay_ms),
    INT_ARG(clean_grace_ms),
    {"readonly", ARG_BOOL, offsetof(rmq_config, readonly), 0},
    {"store_host", ARG_HOST, offsetof(rmq_config, store_host), 0},
    INT_ARG(sync_flush_timeout_ms),
    INT_ARG(transient_store_pool),
    {"warm_mapped_file", ARG_BOOL, offsetof(rmq_config, warm_mapped_file), 0},
    INT_ARG(max_reconsume_times),
    INT_ARG(compress_over),
    {"compress_type", ARG_CODEC, offsetof(rmq_config, compress_type), 0},
    INT_ARG(compress_level),
    {"enable_lmq", ARG_BOOL, offsetof(rmq_config, enable_lmq), 0},
    INT_ARG(max_lmq_queues),
    {"role", ARG_ROLE, offsetof(rmq_config, role), 0},
    TEXT_ARG(ha_listen),
    TEXT_ARG(ha_master),
    INT_ARG(ha_slave_timeout_ms),
};
/* parse_one keeps one bit per argument in a uint64_t, bits 62 and 63 its own. */
_Static_assert(sizeof arg_specs / sizeof *arg_specs < 62, "too many arguments for `seen`");

/*
** The value with the white space around it and its quotes removed, as a
** new string. SQLite passes an argument as written: `dir = 'x'` keeps its
** spaces (and line breaks).
*/
static char *unquote(const char *v) {
  v += strspn(v, SPACE);
  size_t n = strlen(v);
  while (n > 0 && strchr(SPACE, v[n - 1])) n--;
  if (n >= 2 && (v[0] == '\'' || v[0] == '"') && v[n - 1] == v[0]) {
    sqlite3_str *s = sqlite3_str_new(0);
    for (size_t i = 1; i < n - 1; i++) {
      sqlite3_str_appendchar(s, 1, v[i]);
      if (v[i] == v[0] && v[i + 1] == v[0]) i++; /* '' inside '...' is one quote */
    }
    char *r = sqlite3_str_finish(s);
    return r ? r : sqlite3_mprintf("%s", "");
  }
  return sqlite3_mprintf("%.*s", (int)n, v);
}

/* Is the value written in quotes? (An unquoted NULL is SQL's NULL, not a name.) */
static bool quoted(const char *v) {
  v += strspn(v, SPACE);
  return v[0] == '\'' || v[0] == '"';
}

/*
** delete_when: hours 0 to 23 of one or two digits joined by ';' ("4",
** "04", "01;13"), each compared as a number with the current hour
** (UtilAll.isItTimeToDo parses each with Integer.parseInt).
*/
static bool hours_valid(const char *v) {
  for (;;) {
    int n = 0, hour = 0;
    for (; n < 2 && v[n] >= '0' && v[n] <= '9'; n++) hour = hour * 10 + (v[n] - '0');
    if (n == 0 || hour > 23) return false;
    if (v[n] == '\0') return true;
    if (v[n] != ';') return false;
    v += n + 1;
  }
}

static int set_text(const arg_spec *a, const char *v, char *field, char **errmsg) {
  if (strlen(v) >= a->text_cap) {
    return rmqx_errmsg(errmsg, SQLITE_ERROR, "%s: the value is longer than %d bytes", a->name,
                       (int)a->text_cap - 1);
  }
  memcpy(field, v, strlen(v) + 1);
  return SQLITE_OK;
}

static int set_value(const arg_spec *a, const char *v, rmq_config *cfg, char **errmsg) {
  char *base = (char *)cfg + a->offset;
  char *end;
  switch (a->kind) {
    case ARG_INT: {
      errno = 0;
      long long x = strtoll(v, &end, 10);
      if (!*v || *end) {
        return rmqx_errmsg(errmsg, SQLITE_ERROR, "%s: '%s' is not an integer", a->name, v);
      }
      if (errno || x < INT32_MIN || x > INT32_MAX) {
        return rmqx_errmsg(errmsg, SQLITE_ERROR, "%s: %s does not fit in 32 bits", a->name, v);
      }
      *(int32_t *)base = (int32_t)x;
      return SQLITE_OK;
    }
    case ARG_BOOL:
      if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
        return rmqx_errmsg(errmsg, SQLITE_ERROR, "%s: '%s' must be 0 or 1", a->name, v);
      }
      *(bool *)base = v[0] == '1';
      return SQLITE_OK;
    case ARG_HOURS:
      if (!hours_valid(v)) {
        *errmsg = sqlite3_mprintf("%s: '%s' is not a list of hours like '4', '04' or '01;13' "
                                  "(0 to 23)",
                                  a->name, v);
        return SQLITE_ERROR;
      }
      return set_text(a, v, base, errmsg);
    case ARG_TEXT: return set_text(a, v, base, errmsg);
    case ARG_FLUSH:
      if (strcmp(v, "async") != 0 && strcmp(v, "sync") != 0) {
        return rmqx_errmsg(errmsg, SQLITE_ERROR, "flush: '%s' must be 'async' or 'sync'", v);
      }
      cfg->flush_sync = v[0] == 's';
      return SQLITE_OK;
    case ARG_ROLE: {
      rmq_err err = {0};
      if (rmq_role_parse(v, (rmq_role *)base, &err) != RMQ_OK) {
        return rmqx_errmsg(errmsg, SQLITE_ERROR, "%s", err.msg);
      }
      return SQLITE_OK;
    }
    case ARG_CODEC:
      if ((*(rmq_codec *)base = rmq_codec_by_name(v)) == RMQ_CODEC_NONE) {
        return rmqx_errmsg(errmsg, SQLITE_ERROR,
                           "compress_type: '%s' must be 'zlib', 'lz4' or 'zstd'", v);
      }
      return SQLITE_OK;
    case ARG_HOST:
      if (rmq_host_parse(v, (rmq_host *)base) != 0) {
        return rmqx_errmsg(errmsg, SQLITE_ERROR,
                           "store_host: '%s' is not ip:port (e.g. 10.0.0.5:10911 or "
                           "[2001:db8::5]:10911)",
                           v);
      }
      return SQLITE_OK;
  }
  return SQLITE_ERROR;
}

/* The error for an unknown key: it lists every argument there is. */
static int unknown_arg(const char *key, char **errmsg) {
  sqlite3_str *s = sqlite3_str_new(0);
  sqlite3_str_appendf(s, "unknown argument '%s' (arguments: dir", key);
  for (size_t i = 0; i < sizeof arg_specs / sizeof *arg_specs; i++) {
    sqlite3_str_appendf(s, ", %s", arg_specs[i].name);
  }
  sqlite3_str_appendchar(s, 1, ')');
  *errmsg = sqlite3_str_finish(s);
  return *errmsg ? SQLITE_ERROR : SQLITE_NOMEM;
}

static int parse_one(const char *arg, rmq_config *cfg, char **dir, uint64_t *seen, char **errmsg) {
  const char *eq = strchr(arg, '=');
  if (!eq) {
    return rmqx_errmsg(errmsg, SQLITE_ERROR, "argument '%s' is not key=value", arg);
  }
  char *key = sqlite3_mprintf("%.*s", (int)(eq - arg), arg);
  char *value = unquote(eq + 1);
  /* keys may be written with spaces around '=' */
  for (char *k = key + strlen(key); k > key && strchr(SPACE, k[-1]); k--) k[-1] = 0;
  char *k = key + strspn(key, SPACE);
  int rc = SQLITE_OK, n = (int)(sizeof arg_specs / sizeof *arg_specs);
  int i = 0;
  while (i < n && strcmp(arg_specs[i].name, k) != 0) i++;
  uint64_t bit = UINT64_C(1) << (i < n ? i : 63);
  if (strcmp(k, "dir") == 0) {
    bit = UINT64_C(1) << 62;
  }
  if (*seen & bit) {
    *errmsg = sqlite3_mprintf("argument %s is given twice", k);
    rc = SQLITE_ERROR;
  } else if (strcmp(k, "dir") == 0 && sqlite3_stricmp(value, "NULL") == 0 && !quoted(eq + 1)) {
    *errmsg = sqlite3_mprintf("dir=NULL names no directory; quote a directory named NULL "
                              "(dir='NULL')");
    rc = SQLITE_ERROR;
  } else if (strcmp(k, "dir") == 0) {
    *dir = sqlite3_mprintf("%s", value);
  } else if (i == n) {
    rc = unknown_arg(k, errmsg);
  } else {
    rc = set_value(&arg_specs[i], value, cfg, errmsg);
  }
  *seen |= bit;
  sqlite3_free(key);
  sqlite3_free(value);
  return rc;
}

int rmqx_parse_args(int argc, const char *const *argv, rmq_config *cfg, char **dir, char **errmsg) {
  rmq_config_init(cfg);
  *dir = NULL;
  uint64_t seen = 0;
  for (int i = 0; i < argc; i++) {
    if (parse_one(argv[i], cfg, dir, &seen, errmsg) != SQLITE_OK) return SQLITE_ERROR;
  }
  if (!*dir || !**dir) {
    return rmqx_errmsg(errmsg, SQLITE_ERROR, "the argument dir='path/to/store' is required");
  }
  rmq_err err = {0};
  if (rmq_config_check(cfg, &err) != RMQ_OK) {
    return rmqx_errmsg(errmsg, SQLITE_ERROR, "%s", err.msg);
  }
  return SQLITE_OK;
}
