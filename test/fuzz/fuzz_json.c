/*
** fuzz_json.c: libFuzzer target for ext/json.c, the parser of the JSON
** object a user gives as `properties` in an INSERT, and the JSON writer of
** a record's properties.
**
** The input is the JSON text. Every pair the parser reports (a copy, which
** AddressSanitizer bounds) is appended to a properties string as the INSERT
** does, and the properties are written back as JSON. json.c allocates through
** SQLite's API table: an auto-extension hands this program the table of
** the system SQLite (-lsqlite3) once at start-up.
*/
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "properties.h"

/* The entry points of ext/json.c and ext/utf8.c (ext/rmq_ext.h, which needs sqlite3ext.h). */
typedef int (*rmqx_json_pair_cb)(void *ctx, const char *name, size_t name_len, const char *value,
                                 size_t value_len, char **errmsg);
int rmqx_properties_from_json(const char *text, rmqx_json_pair_cb cb, void *ctx, char **errmsg);
char *rmqx_properties_json(const char *props, size_t len);
bool rmqx_utf8_valid(const uint8_t *s, size_t n);

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

/* The properties string the pairs make. */
typedef struct pairs {
  char props[4096];
  size_t len;
} pairs;

static int on_pair(void *ctx, const char *name, size_t name_len, const char *value,
                   size_t value_len, char **errmsg) {
  pairs *p = ctx;
  (void)errmsg;
  if (!rmqx_utf8_valid((const uint8_t *)name, name_len)) return SQLITE_OK;
  if (!rmqx_utf8_valid((const uint8_t *)value, value_len)) return SQLITE_OK;
  rmq_properties_append(p->props, sizeof p->props, &p->len, name, name_len, value, value_len);
  return SQLITE_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* NUL-terminated, as SQLite hands text to the extension. */
  char *text = malloc(size + 1);
  memcpy(text, data, size);
  text[size] = '\0';
  pairs *p = calloc(1, sizeof *p);
  char *errmsg = NULL;
  rmqx_properties_from_json(text, on_pair, p, &errmsg);
  sqlite3_free(errmsg);
  char *json = rmqx_properties_json(p->props, p->len);
  sqlite3_free(json);
  free(p);
  free(text);
  return 0;
}
