#!/usr/bin/env bash
# Runs each fuzz target for SECONDS on its committed seeds (fuzz/corpus/<target>, never
# written to) plus a working corpus that grows across runs (target/fuzz/corpus/<target>),
# and prints one line per target: executions, executions per second, corpus size, result.
# A crash leaves its input in target/fuzz/artifacts/<target>/ and fails the run (after every
# target has run); reproduce it with `BIN <input>` as printed.
#   fuzz/run.sh SECONDS TARGET...   (FUZZ_BIN_DIR: where `cargo fuzz build` put the binaries;
#                                    FUZZ_WORK_DIR: instead of target/fuzz)
set -uo pipefail

seconds=$1; shift
repo=$(cd "$(dirname "$0")/.." && pwd)
bin_dir=${FUZZ_BIN_DIR:-$repo/fuzz/target/x86_64-unknown-linux-gnu/release}
work=${FUZZ_WORK_DIR:-$repo/target/fuzz}
status=0
printf '%-18s %12s %10s %8s  %s\n' target executions exec/s corpus result
for t in "$@"; do
  mkdir -p "$work/corpus/$t" "$work/artifacts/$t" "$work/logs"
  log=$work/logs/$t.log
  # -timeout: an input running over 10 s is a hang; -rss_limit_mb: a leak or a bomb.
  "$bin_dir/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/$t/" "$work/corpus/$t" "$repo/fuzz/corpus/$t" > "$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corpus=$(ls "$work/corpus/$t" "$repo/fuzz/corpus/$t" 2>/dev/null | grep -cv '^$\|:$')
  if [ $rc = 0 ]; then
    result=ok
  else
    status=1
    crash=$(ls -t "$work/artifacts/$t" | head -1)
    result="FAILED (exit $rc): $bin_dir/$t $work/artifacts/$t/$crash; log $log"
  fi
  printf '%-18s %12s %10s %8s  %s\n' "$t" "${runs:-?}" "${rate:-?}" "$corpus" "$result"
  [ $rc = 0 ] || grep -m 5 -E "panicked at|ERROR: |SUMMARY" "$log" | sed 's/^/    /'
done
exit $status
