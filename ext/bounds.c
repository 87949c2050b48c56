/*
** bounds.c: the integers an INTEGER column can hold under the constraints
** xBestIndex passed to xFilter (see rmq_ext.h), for the plans that walk a
** range: commit-log offsets, consume-queue offsets, store times.
**
** A bound is taken as SQLite compares the column with it. An integer is
** exact. A real bounds the integers on its side, exactly: `x > 2.5` is
** x >= 3, `x = 2.5` matches nothing, `x <= 1e300` bounds nothing. Numeric
** text is a number (the column's affinity converts it). NULL matches
** nothing. Other text and blobs bound nothing: they sort above every
** number, so `x < 'a'` holds for every row and `x > 'a'` for none, and
** SQLite re-checks each row the plan returns anyway.
*/
#include "rmq_ext.h"

int rmqx_range_op(int op) {
  switch (op) {
    case SQLITE_INDEX_CONSTRAINT_EQ: return RMQX_RANGE_EQ;
    case SQLITE_INDEX_CONSTRAINT_GE: return RMQX_RANGE_GE;
    case SQLITE_INDEX_CONSTRAINT_GT: return RMQX_RANGE_GT;
    case SQLITE_INDEX_CONSTRAINT_LE: return RMQX_RANGE_LE;
    case SQLITE_INDEX_CONSTRAINT_LT: return RMQX_RANGE_LT;
    default: return -1;
  }
}

/* 2^63 as a double: every int64 x has -2^63 <= x < 2^63. */
#define TWO_POW_63 9223372036854775808.0

static void set_empty(rmqx_bounds *b) {
  b->lo = INT64_MAX;
  b->hi = INT64_MIN;
}

static void narrow_to(rmqx_bounds *b, int64_t lo, int64_t hi) {
  if (lo > b->lo) b->lo = lo;
  if (hi < b->hi) b->hi = hi;
}

/* x op v for an integer v. */
static void narrow_int(rmqx_bounds *b, int op, int64_t v) {
  switch (op) {
    case SQLITE_INDEX_CONSTRAINT_EQ: narrow_to(b, v, v); break;
    case SQLITE_INDEX_CONSTRAINT_GE: narrow_to(b, v, INT64_MAX); break;
    case SQLITE_INDEX_CONSTRAINT_LE: narrow_to(b, INT64_MIN, v); break;
    case SQLITE_INDEX_CONSTRAINT_GT:
      if (v == INT64_MAX)
        set_empty(b);
      else
        narrow_to(b, v + 1, INT64_MAX);
      break;
    case SQLITE_INDEX_CONSTRAINT_LT:
      if (v == INT64_MIN)
        set_empty(b);
      else
        narrow_to(b, INT64_MIN, v - 1);
      break;
  }
}

/*
** x op d for a real d: beyond the int64 range every integer is on one side
** of it; within, x > d is x > floor(d), x >= d is x >= ceil(d) and so on
** (doubles that large are integers, so floor and ceil stay in range; libm
** is not linked).
*/
static void narrow_real(rmqx_bounds *b, int op, double d) {
  bool upper = op == SQLITE_INDEX_CONSTRAINT_LE || op == SQLITE_INDEX_CONSTRAINT_LT;
  bool lower = op == SQLITE_INDEX_CONSTRAINT_GE || op == SQLITE_INDEX_CONSTRAINT_GT;
  if (d >= TWO_POW_63 || d < -TWO_POW_63) {
    /* Above every integer: x < d holds for all; below every one: x > d does. */
    if ((d > 0 && !upper) || (d < 0 && !lower)) set_empty(b);
    return;
  }
  int64_t t = (int64_t)d; /* toward zero */
  int64_t f = t - (d < (double)t), c = t + (d > (double)t);
  switch (op) {
    case SQLITE_INDEX_CONSTRAINT_EQ: narrow_to(b, c, f); break; /* empty unless d is whole */
    case SQLITE_INDEX_CONSTRAINT_GE:
    case SQLITE_INDEX_CONSTRAINT_LT: narrow_int(b, op, c); break;
    case SQLITE_INDEX_CONSTRAINT_GT:
    case SQLITE_INDEX_CONSTRAINT_LE: narrow_int(b, op, f); break;
  }
}

bool rmqx_value_integer(sqlite3_value *v, int64_t *out) {
  switch (sqlite3_value_numeric_type(v)) {
    case SQLITE_INTEGER: *out = sqlite3_value_int64(v); return true;
    case SQLITE_FLOAT: {
      double d = sqlite3_value_double(v);
      if (!(d >= -TWO_POW_63 && d < TWO_POW_63) || (double)(int64_t)d != d) return false;
      *out = (int64_t)d;
      return true;
    }
    default: return false;
  }
}

void rmqx_bounds_narrow(rmqx_bounds *b, int op, sqlite3_value *v) {
  switch (sqlite3_value_numeric_type(v)) {
    case SQLITE_INTEGER: narrow_int(b, op, sqlite3_value_int64(v)); break;
    case SQLITE_FLOAT: narrow_real(b, op, sqlite3_value_double(v)); break;
    case SQLITE_NULL: set_empty(b); break;
    default: break; /* text that is no number, a blob */
  }
}
