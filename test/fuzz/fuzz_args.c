/*
** fuzz_args.c: libFuzzer target for rmqx_parse_args, the parser of the
** key=value arguments of CREATE VIRTUAL TABLE ... USING rocketmq(...).
**
** The input is the argument list, one argument per line (SQLite hands each
** argument over as written, quotes and spaces included). args.c allocates
** through SQLite's API table: an auto-extension hands this program the table
** of the system SQLite (-lsqlite3) once at start-up.
*/
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rmq.h"

/* ext/args.c's entry point (ext/rmq_ext.h, which needs sqlite3ext.h). */
int rmqx_parse_args(int argc, const char *const *argv, rmq_config *cfg, char **dir, char **errmsg);

#define MAX_ARGS 32

const sqlite3_api_routines *sqlite3_api;

static int grab_api(sqlite3 *db, char **errmsg, const sqlite3_api_routines *api) {
  (void)db;
  (void)errmsg;
  sqlite3_api = api;
  return SQLITE_OK;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  sqlite3 *db;
  sqlite3_auto_extension((void (*)(void))grab_api);
  if (sqlite3_open(":memory:", &db) != SQLITE_OK || !sqlite3_api) abort();
  sqlite3_close(db);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  memcpy(text, data, size);
  text[size] = '\0';
  const char *argv[MAX_ARGS];
  int argc = 0;
  for (char *line = text; line && argc < MAX_ARGS; argc++) {
    argv[argc] = line;
    line = strchr(line, '\n');
    if (line) *line++ = '\0';
  }
  rmq_config cfg;
  char *dir = NULL, *errmsg = NULL;
  int rc = rmqx_parse_args(argc, argv, &cfg, &dir, &errmsg);
  if (rc == SQLITE_OK && (!dir || !*dir || errmsg)) abort();
  if (rc != SQLITE_OK && !errmsg) abort();
  sqlite3_free(dir);
  sqlite3_free(errmsg);
  free(text);
  return 0;
}
