/*
** tvf.c: what the read-only, table-valued companion tables have in common
** (rocketmq_commitlog, rocketmq_consumequeue, rocketmq_index,
** rocketmq_queues and rocketmq_stats; see rmq_ext.h for the interface).
**
** Each of those tables is an eponymous virtual table whose arguments are
** its last, HIDDEN columns, and which reads a store given by directory. So
** that each file only has to say what is its own (its columns, its plans,
** its walk), this file holds, once:
**
**    xConnect/xDisconnect   declare the schema of the table's rmqx_tvf and
**                           make the table SQLITE_VTAB_DIRECTONLY (a view or
**                           trigger must not reach files with it)
**    rmqx_tvf_cursor_new    a zeroed cursor for xOpen
**    rmqx_tvf_best_index    the argument columns (and an optional INTEGER
**                           range) of xBestIndex, passed to xFilter in a
**                           fixed argv order
**    rmqx_tvf_check_args    the "missing argument" error of xFilter
**    rmqx_tvf_range         the bounds of that range, in xFilter
**    rmqx_tvf_dir_*         the store a cursor reads, kept from one xFilter
**                           to the next on the same directory
** Their errors start with the table's name.
*/
#include <string.h>

#include "rmq_ext.h"

/* The range operators, in the order of their idxNum bits after the arguments. */

/* The vtab of every companion table: it remembers the table's description. */
typedef struct tvf_vtab {
  sqlite3_vtab base;
  const rmqx_tvf *tvf;
} tvf_vtab;

static const rmqx_tvf *tvf_of(sqlite3_vtab *vt) { return ((tvf_vtab *)vt)->tvf; }

/* ------------------------------------------------------------ the table */

int rmqx_tvf_register(sqlite3 *db, const sqlite3_module *m, const rmqx_tvf *t) {
  /* The description reaches xConnect as the module's client data. */
  return sqlite3_create_module(db, t->name, m, (void *)t);
}

int rmqx_tvf_connect(sqlite3 *db, void *aux, int argc, const char *const *argv, sqlite3_vtab **out,
                     char **errmsg) {
  (void)argc;
  (void)argv;
  (void)errmsg;
  const rmqx_tvf *t = aux;
  int rc = sqlite3_declare_vtab(db, t->schema);
  if (rc != SQLITE_OK) return rc;
  sqlite3_vtab_config(db, SQLITE_VTAB_DIRECTONLY);
  tvf_vtab *vt = sqlite3_malloc(sizeof *vt);
  if (vt == NULL) return SQLITE_NOMEM;
  memset(vt, 0, sizeof *vt);
  vt->tvf = t;
  *out = &vt->base;
  return SQLITE_OK;
}

int rmqx_tvf_disconnect(sqlite3_vtab *vt) {
  sqlite3_free(vt);
  return SQLITE_OK;
}

void *rmqx_tvf_cursor_new(size_t size, sqlite3_vtab_cursor **out) {
  sqlite3_vtab_cursor *c = sqlite3_malloc64(size);
  if (c == NULL) return NULL;
  memset(c, 0, size);
  *out = c;
  return c;
}

/* ------------------------------------------------------------ plans */

/* Bits of the arguments that must be given. */
static int required_bits(const rmqx_tvf *t) { return (1 << t->n_required) - 1; }

/* Keep one lower and one upper bound: = beats >= beats >, and <= beats <. */
static void prune_range(int *range) {
  if (range[RMQX_RANGE_EQ] >= 0) {
    range[RMQX_RANGE_GE] = range[RMQX_RANGE_GT] = range[RMQX_RANGE_LE] = range[RMQX_RANGE_LT] = -1;
  }
  if (range[RMQX_RANGE_GE] >= 0) range[RMQX_RANGE_GT] = -1;
  if (range[RMQX_RANGE_LE] >= 0) range[RMQX_RANGE_LT] = -1;
}

/*
** Fill slot[] (one per idxNum bit, -1 for none) with the first usable
** constraint of each argument and range operator; return the bits of the
** arguments that have an = constraint, usable or not.
*/
static int pick_slots(const rmqx_tvf *t, const sqlite3_index_info *info, int *slot) {
  int constrained = 0;
  for (int i = 0; i < info->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &info->aConstraint[i];
    int b = -1;
    if (c->iColumn >= t->arg_col && c->iColumn < t->arg_col + t->n_args &&
        c->op == SQLITE_INDEX_CONSTRAINT_EQ) {
      constrained |= 1 << (c->iColumn - t->arg_col);
      if (c->usable) b = c->iColumn - t->arg_col;
    } else if (t->range_col >= 0 && c->iColumn == t->range_col && c->usable) {
      b = rmqx_range_op(c->op);
      if (b >= 0) b += t->n_args;
    }
    if (b >= 0 && slot[b] < 0) slot[b] = i;
  }
  return constrained;
}

/* Pass the picked constraints to xFilter in idxNum bit order; return idxNum. */
static int use_slots(const rmqx_tvf *t, sqlite3_index_info *info, const int *slot, int nbits) {
  int idx = 0, argc = 0;
  for (int b = 0; b < nbits; b++) {
    if (slot[b] < 0) continue;
    idx |= 1 << b;
    info->aConstraintUsage[slot[b]].argvIndex = ++argc;
    /* SQLite still checks the bounds: text that is no number bounds nothing here. */
    info->aConstraintUsage[slot[b]].omit = b < t->n_args;
  }
  return idx;
}

int rmqx_tvf_best_index(sqlite3_vtab *vt, sqlite3_index_info *info, bool *ready) {
  const rmqx_tvf *t = tvf_of(vt);
  int slot[RMQX_TVF_MAX_ARGS + RMQX_RANGE_NOPS];
  for (int b = 0; b < RMQX_TVF_MAX_ARGS + RMQX_RANGE_NOPS; b++) slot[b] = -1;
  int constrained = pick_slots(t, info, slot);
  int have = 0;
  for (int b = 0; b < t->n_args; b++) have |= slot[b] >= 0 ? 1 << b : 0;
  /*
  ** The arguments are inputs: a plan without a required one is unusable
  ** when it is constrained (another join order supplies it), and otherwise
  ** fails in xFilter, priced out so that SQLite can still prefer a plan
  ** that has it (an OR of two dirs).
  */
  if (constrained & ~have & required_bits(t)) return SQLITE_CONSTRAINT;
  if (t->range_col >= 0) prune_range(slot + t->n_args);
  int idx = use_slots(t, info, slot, t->n_args + (t->range_col >= 0 ? RMQX_RANGE_NOPS : 0));
  info->idxNum = idx;
  *ready = (idx & required_bits(t)) == required_bits(t);
  if (!*ready) {
    info->idxStr = (char *)t->no_args_plan;
    info->estimatedCost = 1e300;
  }
  /* The walk is in the order of the range column. */
  if (t->range_col >= 0 && info->nOrderBy == 1 && info->aOrderBy[0].iColumn == t->range_col &&
      !info->aOrderBy[0].desc) {
    info->orderByConsumed = 1;
  }
  return SQLITE_OK;
}

int rmqx_tvf_check_args(sqlite3_vtab *vt, int idx) {
  const rmqx_tvf *t = tvf_of(vt);
  for (int b = 0; b < t->n_required; b++) {
    if (!(idx & (1 << b))) {
      return rmqx_vtab_error(vt, "%s: missing argument %s; use %s", t->name, t->arg_names[b],
                             t->usage);
    }
  }
  return SQLITE_OK;
}

void rmqx_tvf_range(sqlite3_vtab *vt, int idx, sqlite3_value **argv, int64_t *lo, int64_t *hi) {
  static const int ops[RMQX_RANGE_NOPS] = {SQLITE_INDEX_CONSTRAINT_EQ, SQLITE_INDEX_CONSTRAINT_GE,
                                           SQLITE_INDEX_CONSTRAINT_GT, SQLITE_INDEX_CONSTRAINT_LE,
                                           SQLITE_INDEX_CONSTRAINT_LT};
  int n_args = tvf_of(vt)->n_args;
  int a = 0;
  for (int b = 0; b < n_args; b++) a += (idx >> b) & 1;
  rmqx_bounds bounds = {*lo, *hi};
  for (int r = 0; r < RMQX_RANGE_NOPS; r++) {
    if (idx & (1 << (n_args + r))) rmqx_bounds_narrow(&bounds, ops[r], argv[a++]);
  }
  *lo = bounds.lo;
  *hi = bounds.hi;
}

/* ------------------------------------------------------------ the store read */

int rmqx_tvf_dir_open(rmqx_tvf_dir *d, sqlite3_vtab *vt, sqlite3_value *v) {
  int nul_at;
  const char *dir = rmqx_value_cstr(v, &nul_at);
  if (dir == NULL) return rmqx_vtab_error(vt, "%s: the store directory is NULL", tvf_of(vt)->name);
  if (nul_at >= 0) {
    return rmqx_vtab_error(vt, RMQX_NUL_MESSAGE, tvf_of(vt)->name, "dir", nul_at, dir, "path");
  }
  /* Opening a store read-only reads its files: do it once per cursor and directory. */
  if (d->reader.store && d->dir && strcmp(d->dir, dir) == 0) return SQLITE_OK;
  rmqx_tvf_dir_close(d);
  char *msg = NULL;
  if (rmqx_reader_open(dir, &d->reader, &msg) != SQLITE_OK) {
    int rc = rmqx_vtab_error(vt, "%s: %s", tvf_of(vt)->name, msg);
    sqlite3_free(msg);
    return rc;
  }
  return (d->dir = sqlite3_mprintf("%s", dir)) ? SQLITE_OK : SQLITE_NOMEM;
}

int rmqx_tvf_dir_wait_dispatched(rmqx_tvf_dir *d, sqlite3_vtab *vt) {
  char *msg = NULL;
  if (rmqx_reader_wait_dispatched(&d->reader, &msg) == SQLITE_OK) return SQLITE_OK;
  int rc = rmqx_vtab_error(vt, "%s: %s", tvf_of(vt)->name, msg);
  sqlite3_free(msg);
  return rc;
}

int rmqx_tvf_dir_snapshot(rmqx_tvf_dir *d, sqlite3_vtab *vt, int idx, int argc,
                          sqlite3_value **argv, bool dispatched, rmqx_tvf_fill_fn fill, void *ctx) {
  int rc = rmqx_tvf_check_args(vt, idx);
  /* A plan without dir has no argv[0]: rmqx_tvf_check_args fails it before it is read. */
  if (rc == SQLITE_OK) rc = rmqx_tvf_dir_open(d, vt, argc ? argv[0] : NULL);
  if (rc != SQLITE_OK) return rc;
  if (dispatched) rc = rmqx_tvf_dir_wait_dispatched(d, vt);
  if (rc == SQLITE_OK) rc = fill(ctx, &d->reader);
  /* The rows are a snapshot: the store need not stay open. */
  rmqx_reader_close(&d->reader);
  return rc;
}

void rmqx_tvf_dir_close(rmqx_tvf_dir *d) {
  rmqx_reader_close(&d->reader);
  sqlite3_free(d->dir);
  d->dir = NULL;
}
