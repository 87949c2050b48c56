/*
** check.h: the assertions of the engine's C tests.
**
** Each test program includes this once, calls CHECK* as often as it likes
** and ends main() with `return check_report();`, which prints the line
** "tests: 0 passed, 0 failed; checks: N passed, N failed" that test/run.sh
** adds up: each CHECK is one check (an assertion), and the C tests name no
** tests. A failed check prints the file, line and expression, and the
** program goes on, so one run reports every failure.
*/
#ifndef RMQ_CHECK_H
#define RMQ_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int check_passed, check_failed;

static void check_result(int ok, const char *file, int line, const char *what) {
  if (ok) {
    check_passed++;
  } else {
    check_failed++;
    fprintf(stderr, "FAILED %s:%d: %s\n", file, line, what);
  }
}

#define CHECK(cond) check_result(!!(cond), __FILE__, __LINE__, #cond)

#define CHECK_EQ_INT(a, b)                                                                        \
  do {                                                                                            \
    long long check_a_ = (long long)(a), check_b_ = (long long)(b);                               \
    check_result(check_a_ == check_b_, __FILE__, __LINE__, #a " == " #b);                         \
    if (check_a_ != check_b_) fprintf(stderr, "  got %lld, expected %lld\n", check_a_, check_b_); \
  } while (0)

#define CHECK_EQ_STR(a, b)                                                               \
  do {                                                                                   \
    const char *check_a_ = (a), *check_b_ = (b);                                         \
    int check_ok_ = check_a_ && check_b_ && strcmp(check_a_, check_b_) == 0;             \
    check_result(check_ok_, __FILE__, __LINE__, #a " == " #b);                           \
    if (!check_ok_)                                                                      \
      fprintf(stderr, "  got \"%s\", expected \"%s\"\n", check_a_ ? check_a_ : "(null)", \
              check_b_ ? check_b_ : "(null)");                                           \
  } while (0)

#define CHECK_EQ_MEM(a, b, n) \
  check_result(memcmp((a), (b), (n)) == 0, __FILE__, __LINE__, "memcmp(" #a ", " #b ") == 0")

static int check_report(void) {
  printf("tests: 0 passed, 0 failed; checks: %d passed, %d failed\n", check_passed, check_failed);
  return check_failed ? 1 : 0;
}

#endif
