#!/usr/bin/env bash
#
# run.sh: run the test programs of sqlite-rocketmq and add up their counts.
#
#   test/run.sh BUILD [REGEX]
#
# BUILD is the build directory (build, build-asan, build-tsan). REGEX, if
# given, runs only the programs whose name matches it (bash =~, e.g.
# `test/run.sh build 'version|message'`); `make check T=REGEX` passes it.
#
# The programs, run one after another from the repository root:
#   BUILD/test/test_*     the engine's C tests (test/engine/test_*.c)
#   test/*.test           Tcl tests, run as `tclsh test/NAME.test`
#   test/*.py             Python tests, run as `/usr/bin/python3 test/NAME.py`
#                         (except the libraries test/spec_decoder.py and
#                         test/checks.py)
#   test/*.mjs            Node.js tests, run as `node --test
#                         --test-reporter=./test/node/reporter.mjs test/NAME.mjs`;
#                         they fetch what they need from the npm registry
#                         into BUILD/node and BUILD/oldsqlite when missing.
#                         Without node a Node test fails saying so; under
#                         RMQ_PRELOAD (a sanitizer build) it is skipped, 0 tests,
#                         as node and the shells it builds are not instrumented;
#                         on a Node older than 18 it is skipped, saying so
# No program takes arguments. Each one gets this environment (absolute paths):
#   RMQ_EXT     BUILD/rocketmq, the extension without its .so suffix, ready
#               for load_extension() / .load / conn.load_extension()
#   RMQ_BUILD   BUILD; helper programs live in RMQ_BUILD/test/ (golden_dump)
#   RMQ_GOLDEN  the golden RocketMQ store files (test/golden)
# Values already set in the environment are kept.
#
# Each program must end its output with the line
#   tests: T passed, T failed; checks: N passed, N failed
# and exit non-zero when something failed. A test is a named test (a Tcl
# do_*_test); a check is one assertion (a C CHECK, a Python check, often one
# field). check.h's check_report(), tester.tcl's finish_test and checks.py's
# report() print it. A program that crashes, exits non-zero, times out or
# prints no such line counts as at least 1 failed test. Its output goes to
# BUILD/test-logs/NAME.log and is shown when it fails (always with
# RMQ_VERBOSE=1).
#
# Other settings:
#   RMQ_TIMEOUT   seconds each program may run (default 900)
#   RMQ_NOFILE    the soft limit of open descriptors each program runs
#                 under (default 1024, what a Debian login gets), so that a
#                 machine with a higher limit does not hide a store that
#                 needs more
#   RMQ_PRELOAD   a library prepended to LD_PRELOAD for tclsh and python3
#                 only (a sanitizer runtime: the interpreters are not
#                 instrumented); ASAN_OPTIONS then also gets detect_leaks=0
#                 for them, as the interpreters' own leaks are not ours.
#                 Node tests are skipped then.
#
# It prints a table (tests and checks, passed and failed, per program), then
# the first failure lines of each program that failed; the last line of the
# output is the total in the programs' form; the exit status is non-zero
# when any test or check failed.

set -uo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 BUILD [REGEX]" >&2
  exit 2
fi

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
build=$(cd "$1" 2>/dev/null && pwd) || { echo "run.sh: no build directory $1" >&2; exit 2; }
filter=${2:-}
timeout_s=${RMQ_TIMEOUT:-900}
nofile=${RMQ_NOFILE:-1024}
logs=$build/test-logs
mkdir -p "$logs"

export RMQ_EXT=${RMQ_EXT:-$build/rocketmq}
export RMQ_BUILD=${RMQ_BUILD:-$build}
export RMQ_GOLDEN=${RMQ_GOLDEN:-$root/test/golden}

# The environment of interpreter runs: the sanitizer runtime preloaded.
interp_env=()
if [ -n "${RMQ_PRELOAD:-}" ]; then
  interp_env=(env "LD_PRELOAD=$RMQ_PRELOAD${LD_PRELOAD:+:$LD_PRELOAD}"
              "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
fi

# Collect "name<TAB>kind<TAB>path" for every program to run.
programs=()
for f in "$build"/test/test_*; do
  [ -f "$f" ] && [ -x "$f" ] && programs+=("$(basename "$f")	c	$f")
done
for f in test/*.test; do
  [ -f "$f" ] && programs+=("$(basename "$f")	tcl	$f")
done
for f in test/*.py; do
  case $f in test/spec_decoder.py | test/checks.py) continue ;; esac
  [ -f "$f" ] && programs+=("$(basename "$f")	py	$f")
done
for f in test/*.mjs; do
  [ -f "$f" ] && programs+=("$(basename "$f")	node	$f")
done

# A program that prints why it does not run and the counts line of 0 tests.
skipped() {
  printf '%s\n' "$1" 'tests: 0 passed, 0 failed; checks: 0 passed, 0 failed'
}

counts_re='^tests: ([0-9]+) passed, ([0-9]+) failed; checks: ([0-9]+) passed, ([0-9]+) failed$'
total_tp=0 total_tf=0 total_cp=0 total_cf=0
ran=0
failed_names=()
printf '%-30s %6s %6s %8s %6s %8s\n' program tests failed checks failed time

for entry in "${programs[@]}"; do
  IFS=$'\t' read -r name kind path <<<"$entry"
  if [ -n "$filter" ] && ! [[ $name =~ $filter ]]; then continue; fi
  ran=$((ran + 1))
  case $kind in
    c)   cmd=("$path") ;;
    tcl) cmd=("${interp_env[@]}" tclsh "$path") ;;
    py)  cmd=("${interp_env[@]}" /usr/bin/python3 "$path") ;;
    node)
      if [ -n "${RMQ_PRELOAD:-}" ]; then
        cmd=(skipped "skipped: node and its shells cannot load an extension built with sanitizers (RMQ_PRELOAD)")
      elif ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        cmd=(sh -c 'echo "node and npm are needed for the Node tests (test/deps.sh installs nodejs and npm)"; exit 1')
      elif ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 18 ? 0 : 1)'; then
        cmd=(skipped "skipped: Node $(node --version) is older than 18, the oldest node --test and better-sqlite3 11 support")
      else
        cmd=(node --test --test-reporter=./test/node/reporter.mjs "$path")
      fi
      ;;
  esac
  log=$logs/$name.log
  start=$EPOCHREALTIME
  # In a subshell, so that bash's note on a program killed by a signal
  # ("Aborted") goes to the log.
  if [ "${cmd[0]}" = skipped ]; then
    "${cmd[@]}" >"$log"
  else
    (ulimit -Sn "$nofile" 2>/dev/null; timeout --kill-after=10 "$timeout_s" "${cmd[@]}"; exit $?) \
      </dev/null >"$log" 2>&1
  fi
  rc=$?
  end=$EPOCHREALTIME
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')

  counts=$(grep -E "$counts_re" "$log" | tail -n 1)
  note=""
  if [[ $counts =~ $counts_re ]]; then
    tp=${BASH_REMATCH[1]} tf=${BASH_REMATCH[2]} cp=${BASH_REMATCH[3]} cf=${BASH_REMATCH[4]}
  else
    tp=0 tf=0 cp=0 cf=0
    note=" (no \"tests: ...; checks: ...\" line)"
  fi
  [ "${cmd[0]}" = skipped ] && note=" (${cmd[1]})"
  if [ "$rc" -ne 0 ]; then
    if [ "$rc" -eq 124 ]; then
      note="$note (timed out after ${timeout_s}s)"
    elif [ "$rc" -gt 128 ]; then
      note="$note (killed by SIG$(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128))))"
    else
      note="$note (exit status $rc)"
    fi
    [ $((tf + cf)) -eq 0 ] && tf=1
  elif [ -z "$counts" ]; then
    tf=1
  fi
  fail=$((tf + cf))

  if [ "$fail" -ne 0 ] || [ -n "${RMQ_VERBOSE:-}" ]; then
    echo "---- $name output (last 200 lines of $log)"
    tail -n 200 "$log" | sed 's/^/    /'
  fi
  printf '%-30s %6d %6d %8d %6d %7ss%s\n' "$name" "$tp" "$tf" "$cp" "$cf" "$secs" "$note"
  total_tp=$((total_tp + tp)) total_tf=$((total_tf + tf))
  total_cp=$((total_cp + cp)) total_cf=$((total_cf + cf))
  [ "$fail" -ne 0 ] && failed_names+=("$name")
done

if [ "$ran" -eq 0 ]; then
  echo "run.sh: no test program matched${filter:+ \"$filter\"}"
  total_tf=1
fi
if [ ${#failed_names[@]} -gt 0 ]; then
  echo "failed: ${failed_names[*]}"
  # What failed, again at the end, where a long run's output is read first.
  for name in "${failed_names[@]}"; do
    echo "---- $name: its first failures (all in $logs/$name.log)"
    grep -a -m 6 -A 3 -E 'FAILED|ended by itself' "$logs/$name.log" | cut -c1-300 | sed 's/^/    /'
    tail -n 3 "$logs/$name.log" | cut -c1-300 | sed 's/^/    /'
  done
fi
printf '%-30s %6d %6d %8d %6d\n' total "$total_tp" "$total_tf" "$total_cp" "$total_cf"
echo "tests: $total_tp passed, $total_tf failed; checks: $total_cp passed, $total_cf failed"
[ $((total_tf + total_cf)) -eq 0 ]
