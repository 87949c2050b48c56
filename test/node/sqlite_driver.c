/*
** sqlite_driver.c: a minimal sqlite3 shell for test/older_sqlite.mjs, built
** with an older SQLite amalgamation: it loads the extension given as its
** argument into an in-memory database, runs the SQL read from stdin
** statement by statement, and prints each row with its values joined by
** '|' (NULL as empty) and each error as "error: MESSAGE", going on with
** the next statement.
**
**    sqlite_driver build/rocketmq < script.sql
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite3.h"

static char *read_all(FILE *f) {
  size_t cap = 1 << 16, n = 0, got;
  char *buf = malloc(cap);
  while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (n + 1 == cap) buf = realloc(buf, cap *= 2);
  }
  if (buf) buf[n] = '\0';
  return buf;
}

static void print_rows(sqlite3 *db, sqlite3_stmt *st) {
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    for (int i = 0; i < sqlite3_column_count(st); i++) {
      const unsigned char *v = sqlite3_column_text(st, i);
      printf("%s%s", i ? "|" : "", v ? (const char *)v : "");
    }
    printf("\n");
  }
  if (rc != SQLITE_DONE) printf("error: %s\n", sqlite3_errmsg(db));
}

int main(int argc, char **argv) {
  sqlite3 *db;
  char *err = NULL;
  char *sql = read_all(stdin);
  if (argc != 2 || !sql || sqlite3_open(":memory:", &db) != SQLITE_OK) {
    fprintf(stderr, "usage: %s EXTENSION < script.sql\n", argv[0]);
    return 2;
  }
  sqlite3_enable_load_extension(db, 1);
  if (sqlite3_load_extension(db, argv[1], NULL, &err) != SQLITE_OK) {
    printf("error: %s\n", err);
    return 1;
  }
  for (const char *tail = sql; *tail;) {
    const char *start = tail;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, start, -1, &st, &tail) != SQLITE_OK) {
      printf("error: %s\n", sqlite3_errmsg(db));
      /* go on after the statement's ';' when SQLite did not say where it ends */
      if (tail <= start) tail = strchr(start, ';') ? strchr(start, ';') + 1 : start + strlen(start);
      continue;
    }
    if (!st) break; /* only comments or spaces were left */
    print_rows(db, st);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  free(sql);
  return 0;
}
