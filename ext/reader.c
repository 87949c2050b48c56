/*
** reader.c: a store to read for the companion tables (see rmq_ext.h).
*/
#include "rmq_ext.h"

int rmqx_reader_open(const char *dir, rmqx_reader *r, char **errmsg) {
  r->store = rmq_store_find(dir);
  r->shared = r->store != NULL;
  if (r->store) return SQLITE_OK;
  rmq_config cfg;
  rmq_config_init(&cfg);
  cfg.readonly = true;
  rmq_err err = {0};
  if (rmq_store_open(dir, &cfg, &r->store, &err) != RMQ_OK) {
    *errmsg = sqlite3_mprintf("%s", err.msg);
    r->store = NULL;
    return SQLITE_ERROR;
  }
  return SQLITE_OK;
}

void rmqx_reader_close(rmqx_reader *r) {
  if (!r->store) return;
  if (r->shared) {
    rmq_store_release(r->store);
  } else {
    rmq_store_close(r->store);
  }
  r->store = NULL;
}

int rmqx_reader_wait_dispatched(rmqx_reader *r, char **errmsg) {
  rmq_err err = {0};
  if (rmq_store_wait_dispatched(r->store, &err) != RMQ_OK) {
    return rmqx_errmsg(errmsg, SQLITE_ERROR, "%s", err.msg);
  }
  return SQLITE_OK;
}
