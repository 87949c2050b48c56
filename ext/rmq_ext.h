/*
** rmq_ext.h: interface between the files of ext/, the SQLite glue.
**
** ext/rocketmq.c is the entry point; every other file registers one
** virtual table or a group of SQL functions and includes this header after
** <sqlite3ext.h> (SQLITE_EXTENSION_INIT3 gives it the API table).
*/
#ifndef RMQ_EXT_H
#define RMQ_EXT_H

#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#include <stdbool.h>

#include "rmq.h"

/*
** error.c: errors for the user, formatted as sqlite3_mprintf formats. On a
** table (a cursor's errors go to its table, cur->pVtab): returns
** SQLITE_ERROR, or SQLITE_NOMEM when the message could not be made. On a
** function's context: the error, or SQLITE_NOMEM. In an errmsg
** out-parameter (xCreate's, a row check's): returns rc, or SQLITE_NOMEM.
*/
int rmqx_vtab_error(sqlite3_vtab *vt, const char *fmt, ...);
void rmqx_result_error(sqlite3_context *ctx, const char *fmt, ...);
int rmqx_errmsg(char **errmsg, int rc, const char *fmt, ...);
/*
** The text of v for a name or a path that goes to the engine as a C string,
** NULL for SQL NULL (or out of memory). *nul_at: the byte offset of the
** first NUL in the text, or -1. A NUL would end the engine's string there,
** so 'billing' || char(0) || 'x' would name the group billing: a caller
** refuses such a value with RMQX_NUL_MESSAGE (the function or table, the
** argument's name, *nul_at, the text, which ends at the NUL, and "name" or
** "path"), as an INSERT refuses such a topic.
*/
const char *rmqx_value_cstr(sqlite3_value *v, int *nul_at);
#define RMQX_NUL_MESSAGE \
  "%s: %s contains a NUL byte at byte %d (after '%s'): a %s cannot contain NUL"

/* Registration, one function per file. */
int rmqx_register_store_table(sqlite3 *db);        /* vtab_store.c: rocketmq */
int rmqx_register_commitlog_table(sqlite3 *db);    /* vtab_commitlog.c: rocketmq_commitlog */
int rmqx_register_consumequeue_table(sqlite3 *db); /* vtab_consumequeue.c: rocketmq_consumequeue */
int rmqx_register_index_table(sqlite3 *db);        /* vtab_index.c: rocketmq_index */
int rmqx_register_queues_table(sqlite3 *db);       /* vtab_queues.c: rocketmq_queues */
int rmqx_register_stats_table(sqlite3 *db);        /* vtab_stats.c: rocketmq_stats */
int rmqx_register_ha_table(sqlite3 *db);           /* vtab_ha.c: rocketmq_ha */
int rmqx_register_verify_table(sqlite3 *db);       /* vtab_verify.c: rocketmq_verify */
int rmqx_register_scheduled_table(sqlite3 *db);    /* vtab_scheduled.c: rocketmq_scheduled */
int rmqx_register_files_table(sqlite3 *db);        /* vtab_files.c: rocketmq_files */
/* vtab_consumer_offsets.c: rocketmq_consumer_offsets */
int rmqx_register_consumer_offsets_table(sqlite3 *db);
int rmqx_register_functions(sqlite3 *db); /* functions.c: rocketmq_flush, ... */

/*
** A store to read, for the companion tables and functions that take a
** directory: the live store when this process has it open (shared through
** rmq_store_find), otherwise the files opened read-only (no lock taken,
** nothing written, sizes read off the files). On failure *errmsg is a
** sqlite3_malloc'd message for the user.
*/
typedef struct rmqx_reader {
  rmq_store *store;
  bool shared; /* from rmq_store_find: release, do not close */
} rmqx_reader;

int rmqx_reader_open(const char *dir, rmqx_reader *r, char **errmsg);
void rmqx_reader_close(rmqx_reader *r);
/*
** For readers of consume queues and index files: rmq_store_wait_dispatched,
** so that a query sees every message whose INSERT returned before it
** started. On failure *errmsg is a sqlite3_malloc'd message.
*/
int rmqx_reader_wait_dispatched(rmqx_reader *r, char **errmsg);

/*
** bounds.c: the integers an INTEGER column can hold under range
** constraints, [lo, hi] (none when lo > hi). rmqx_bounds_narrow narrows b by
** `column op v` (op: SQLITE_INDEX_CONSTRAINT_EQ, GT, GE, LT or LE) as SQLite
** compares: a real rounded to the integers on its side, NULL matching
** nothing, text that is no number bounding nothing, saturating at the
** int64 limits. SQLite still re-checks every row.
*/
/* Range operators, in the order the plans keep their slots: =, >=, >, <=, <. */
enum { RMQX_RANGE_EQ, RMQX_RANGE_GE, RMQX_RANGE_GT, RMQX_RANGE_LE, RMQX_RANGE_LT, RMQX_RANGE_NOPS };
/* The RMQX_RANGE_* of an xBestIndex operator, or -1 for one no range plan takes. */
int rmqx_range_op(int op);
typedef struct rmqx_bounds {
  int64_t lo, hi;
} rmqx_bounds;

void rmqx_bounds_narrow(rmqx_bounds *b, int op, sqlite3_value *v);
/*
** The integer v holds as an INTEGER column stores it: an integer, or a real
** (or numeric text) that is a whole number within the int64 range, as
** INTEGER affinity converts it; false for anything else. Some hosts bind
** every number as a double: Node's better-sqlite3 binds 1 as 1.0.
*/
bool rmqx_value_integer(sqlite3_value *v, int64_t *out);

/*
** tvf.c: the pieces shared by the read-only, table-valued companion tables.
**
** A table describes itself with a static rmqx_tvf and registers with
** rmqx_tvf_register, which hands the description to rmqx_tvf_connect (its
** xConnect; rmqx_tvf_disconnect is its xDisconnect). Its arguments are its
** last columns, HIDDEN. rmqx_tvf_best_index passes xFilter, in this argv
** order, one = constraint per argument given, then, when range_col is set,
** the bounds of range_col: = ?, then >= ? or > ?, then <= ? or < ?. idxNum
** has bit n for argument n, then the bits of =, >=, >, <= and < on
** range_col (bit n_args up to n_args + 4).
*/
#define RMQX_TVF_MAX_ARGS 8

typedef struct rmqx_tvf {
  const char *name;             /* the module's name, which starts its error messages */
  const char *schema;           /* its CREATE TABLE, the argument columns last */
  int arg_col;                  /* column number of the first argument */
  int n_args;                   /* argument columns, 1 to RMQX_TVF_MAX_ARGS */
  int n_required;               /* the first n_required of them must be given */
  const char *const *arg_names; /* their names, for "missing argument NAME" */
  const char *usage;            /* a call that works: "rocketmq_x('path/to/store')" */
  const char *no_args_plan;     /* idxStr of a plan that lacks a required argument */
  int range_col;                /* an INTEGER column whose bounds xFilter takes, or -1 */
} rmqx_tvf;

int rmqx_tvf_register(sqlite3 *db, const sqlite3_module *m, const rmqx_tvf *t);
int rmqx_tvf_connect(sqlite3 *db, void *aux, int argc, const char *const *argv, sqlite3_vtab **out,
                     char **errmsg);
int rmqx_tvf_disconnect(sqlite3_vtab *vt);
/* xOpen: a zeroed cursor of size bytes (sqlite3_vtab_cursor first) in *out, or NULL. */
void *rmqx_tvf_cursor_new(size_t size, sqlite3_vtab_cursor **out);
/*
** xBestIndex for the arguments and range: sets idxNum, the argv usage and
** orderByConsumed (ascending range_col); *ready says whether every required
** argument is in the plan. A plan that is not ready gets no_args_plan and a
** cost of 1e300; the table prices a ready plan itself. SQLITE_CONSTRAINT:
** a required argument is constrained but not usable in this join order.
*/
int rmqx_tvf_best_index(sqlite3_vtab *vt, sqlite3_index_info *info, bool *ready);
/* xFilter: the "missing argument" error of a plan that is not ready, else SQLITE_OK. */
int rmqx_tvf_check_args(sqlite3_vtab *vt, int idx);
/* xFilter: narrow [*lo, *hi] (the caller's defaults) by the range bounds in argv (rmqx_bounds). */
void rmqx_tvf_range(sqlite3_vtab *vt, int idx, sqlite3_value **argv, int64_t *lo, int64_t *hi);

/*
** The store a cursor reads, from its dir argument. rmqx_tvf_dir_open keeps
** the store of the previous xFilter when dir is the same; the caller
** releases what it holds of that store first. A table that reads all it
** needs in xFilter may rmqx_reader_close(&d->reader) at once and keep dir
** for its dir column: the next xFilter opens the store again.
*/
typedef struct rmqx_tvf_dir {
  rmqx_reader reader; /* reader.store is NULL when none is open */
  char *dir;          /* the directory of the last xFilter, or NULL */
} rmqx_tvf_dir;

int rmqx_tvf_dir_open(rmqx_tvf_dir *d, sqlite3_vtab *vt, sqlite3_value *v);
/* rmqx_reader_wait_dispatched, its failure an error on vt. */
int rmqx_tvf_dir_wait_dispatched(rmqx_tvf_dir *d, sqlite3_vtab *vt);
void rmqx_tvf_dir_close(rmqx_tvf_dir *d);
/*
** xFilter of a table whose rows are a snapshot taken once: checks the
** arguments, opens the store of dir (after the dispatcher caught up, when
** `dispatched`), calls fill(ctx, reader) and lets the store go. dir is
** argv[0] of the plans that have it.
*/
typedef int (*rmqx_tvf_fill_fn)(void *ctx, rmqx_reader *r);
int rmqx_tvf_dir_snapshot(rmqx_tvf_dir *d, sqlite3_vtab *vt, int idx, int argc,
                          sqlite3_value **argv, bool dispatched, rmqx_tvf_fill_fn fill, void *ctx);

/*
** row.c: a row INSERTed into the rocketmq table, checked and turned into
** the message to append, as a RocketMQ producer checks and completes a
** message before sending it. A row that breaks a rule is SQLITE_CONSTRAINT
** (so INSERT OR IGNORE skips it) with *errmsg, sqlite3_malloc'd, naming
** the limit; otherwise SQLITE_OK, or SQLITE_NOMEM.
*/

/* An INSERT's values by column (SQL NULL for a column not given); rowid is commitlog_offset's. */
typedef struct rmqx_row {
  sqlite3_value *rowid;
  /* what a producer gives */
  sqlite3_value *topic, *queue_id, *tags, *keys, *uniq_key, *body, *properties, *delay_level, *flag,
      *born_timestamp, *born_host;
  /* what the store assigns, and the search inputs: an INSERT may not give them */
  sqlite3_value *commitlog_offset, *size, *msg_id, *queue_offset, *body_text, *sys_flag, *body_crc,
      *store_timestamp, *store_host, *reconsume_times, *prepared_transaction_offset, *body_raw,
      *key, *wait_ms;
} rmqx_row;

/* What a table keeps from one row to the next. */
typedef struct rmqx_row_state {
  rmq_uniq_key_gen *uniq;
  int delay_levels;                       /* levels 1 to this are defined (the table's argument) */
  uint32_t next_queue;                    /* round robin over default_queues */
  char last_topic[RMQ_MAX_TOPIC_LEN + 1]; /* the topic accepted last (producers repeat it) */
  size_t last_topic_len;
  char last_host_text[64]; /* the born_host text parsed last, and its value */
  size_t last_host_len;
  rmq_host last_host;
  uint8_t *compressed;  /* the last row's compressed body, which its message points at */
  rmq_codec_ctx *codec; /* kept from row to row; NULL until a body is compressed */
} rmqx_row_state;

/* A row's message; it points into this struct and into the row's values. */
typedef struct rmqx_row_message {
  rmq_message m;
  char topic[RMQ_MAX_TOPIC_LEN + 1];
  char props[RMQ_MAX_PROPERTIES_LEN + 1];
} rmqx_row_message;

/* cfg: the table's arguments (delay_levels). SQLITE_NOMEM or SQLITE_OK. */
int rmqx_row_state_init(rmqx_row_state *st, const rmq_config *cfg);
void rmqx_row_state_free(rmqx_row_state *st);
/*
** Check row and build its message in *out; cfg: the store's (default_queues,
** max_message_size, compress_*). A compressed body stays in st until the next row.
*/
int rmqx_row_message_build(rmqx_row_state *st, const rmq_config *cfg, const rmqx_row *row,
                           rmqx_row_message *out, char **errmsg);

/*
** body.c: a record's body as a consumer receives it (MessageDecoder.decode
** with deCompressBody): inflated when SYSFLAG marks it compressed, at most
** RMQ_MAX_INFLATED_BODY bytes; a body that does not inflate is an error
** naming the record's offset and the codec. A cursor keeps the body it
** inflated last, so that body and body_text inflate it once.
*/
typedef struct rmqx_body {
  const uint8_t *of; /* the stored bytes it was inflated from, and their record's offset */
  int64_t at;
  uint8_t *bytes; /* what they inflated to, or NULL with err set */
  size_t len;
  rmq_err err;
  rmq_codec_ctx *codec; /* kept from row to row; NULL until a body inflates */
} rmqx_body;
/* The body column (text: body_text, NULL when not UTF-8) of m into ctx. */
void rmqx_result_body(sqlite3_context *ctx, rmqx_body *b, const rmq_message *m, bool text);
/* Forget the row's body (its codec state stays); done: the codec state too. */
void rmqx_body_free(rmqx_body *b);
void rmqx_body_done(rmqx_body *b);

/*
** args.c: the key=value arguments of CREATE VIRTUAL TABLE ... USING
** rocketmq(...) into a checked configuration; *dir is sqlite3_malloc'd.
*/
int rmqx_parse_args(int argc, const char *const *argv, rmq_config *cfg, char **dir, char **errmsg);

/* json.c: properties as a JSON object of strings (sqlite3_free the result). */
char *rmqx_properties_json(const char *props, size_t len);
/* One name/value pair of a JSON object given by the user; return SQLITE_OK or fail with *errmsg. */
typedef int (*rmqx_json_pair_cb)(void *ctx, const char *name, size_t name_len, const char *value,
                                 size_t value_len, char **errmsg);
/*
** Parse a JSON object whose values are strings, numbers or true/false
** (null skips the pair), calling cb for each pair in order.
*/
int rmqx_properties_from_json(const char *text, rmqx_json_pair_cb cb, void *ctx, char **errmsg);

/* utf8.c: strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
bool rmqx_utf8_valid(const uint8_t *s, size_t n);
/* The offset of the first byte of s that does not start valid UTF-8; n when all are valid. */
size_t rmqx_utf8_invalid_at(const uint8_t *s, size_t n);
/*
** Text read from a store (n < 0: NUL-terminated) as a TEXT result, or as a
** BLOB of the same bytes when it is not valid UTF-8: a store written by
** another producer may hold any bytes, and TEXT that is not UTF-8 breaks
** the callers that decode it (Python's sqlite3). del as for sqlite3_result_text.
*/
void rmqx_result_text_or_blob(sqlite3_context *ctx, const char *s, int n, void (*del)(void *));

#endif
