"""checks.py: the pass/fail counting of the Python tests (a library, not a
test: test/run.sh skips it).

A failed check prints a line starting with FAILED and the test goes on;
report() prints the line "tests: 0 passed, 0 failed; checks: N passed,
N failed" that test/run.sh adds up (each ok() or eq() is one check, often
one field; the Python tests name no tests) and returns the exit status (1
if any check failed).
"""


class Checks:
    def __init__(self, max_shown=None, max_repr=None):
        """max_shown: print at most this many failures; max_repr: cut got/expected
        to this many characters (None: no limit)."""
        self.passed = self.failed = 0
        self.max_shown = max_shown
        self.max_repr = max_repr

    def ok(self, cond, what):
        """One check that cond is true; prints "FAILED what" if not."""
        if cond:
            self.passed += 1
            return True
        self.failed += 1
        if self.max_shown is None or self.failed <= self.max_shown:
            print('FAILED ' + what)
        elif self.failed == self.max_shown + 1:
            print('(more failures not shown)')
        return False

    def eq(self, what, got, want):
        """One check that got == want; prints both if not."""
        if got == want:
            return self.ok(True, what)
        g, w = repr(got), repr(want)
        if self.max_repr is not None:
            g, w = g[:self.max_repr], w[:self.max_repr]
        return self.ok(False, '%s: got %s, expected %s' % (what, g, w))

    def report(self):
        print('tests: 0 passed, 0 failed; checks: %d passed, %d failed'
              % (self.passed, self.failed))
        return 1 if self.failed else 0
