#!/usr/bin/env bash
#
# run.sh: run libFuzzer targets built by `make fuzz-build`.
#
#   test/fuzz/run.sh FUZZ_BUILD SECONDS NAME...
#
# Runs FUZZ_BUILD/fuzz_NAME for SECONDS on the corpus FUZZ_BUILD/corpus/NAME,
# which keeps what earlier runs found and is seeded first with the files of
# test/fuzz/seed/NAME/ and, for the readers of store files, the matching
# files of the golden stores (test/golden); the record readers also get the
# first record of each commit-log file alone. A crash leaves its input in
# FUZZ_BUILD/NAME-crash-*; the last lines of each run are printed, and the
# exit status is non-zero when any target failed.

set -uo pipefail

if [ $# -lt 3 ]; then
  echo "usage: $0 FUZZ_BUILD SECONDS NAME..." >&2
  exit 2
fi
cd "$(dirname "$0")/../.." || exit 2
build=$1
seconds=$2
shift 2

# The golden store files a target reads, as shell globs.
golden_seed() {
  case $1 in
    decode | record_head | multi_dispatch) echo 'test/golden/store-*/commitlog/*' ;;
    consume_queue) echo 'test/golden/store-*/consumequeue/*/*/*' ;;
    index_file) echo 'test/golden/store-*/index/*' ;;
    config) echo 'test/golden/config/*.json' ;;
  esac
}

# The first record of a commit-log file, by its TOTALSIZE (big-endian).
first_record() {
  local n
  n=$(od -An -tu1 -N4 "$1" | awk '{ print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4 }')
  [ "$n" -gt 0 ] && [ "$n" -le "$(stat -c %s "$1")" ] && head -c "$n" "$1"
}

failed=()
for name in "$@"; do
  corpus=$build/corpus/$name
  mkdir -p "$corpus"
  i=0
  # Golden files share names across stores and queues: number the copies.
  for f in $(golden_seed "$name") test/fuzz/seed/"$name"/*; do
    [ -f "$f" ] || continue
    i=$((i + 1))
    cp -f "$f" "$corpus/seed-$i"
    case $name in
      decode | record_head | multi_dispatch) first_record "$f" >"$corpus/seed-$i-first" ;;
    esac
  done
  log=$build/$name.log
  echo "== fuzz_$name, ${seconds}s"
  "$build/fuzz_$name" -max_total_time="$seconds" -max_len=70000 -print_final_stats=1 \
    -artifact_prefix="$build/$name-" "$corpus" >"$log" 2>&1
  rc=$?
  tail -n 12 "$log" | sed 's/^/    /'
  if [ "$rc" -ne 0 ]; then
    echo "fuzz_$name FAILED (exit status $rc; log $log)"
    failed+=("$name")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]}"
  exit 1
fi
echo "fuzz: ${#@} targets ran ${seconds}s each without a crash"
