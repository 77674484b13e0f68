#!/usr/bin/env bash
# Runs one libFuzzer target for a fixed time over its seed corpus: the ctest entries of
# fuzz/CMakeLists.txt (label fuzz). Fails (exit 1) on a crash, a sanitizer report, an input that
# runs over 10 s or a run over 2 GiB, printing the end of the log, the crashing input's file and
# how to replay it; new inputs the run finds are kept in WORK_DIR/corpus for the next run (the
# seed corpus in the tree is only read).
#   run-fuzzer.sh FUZZER SEED_CORPUS WORK_DIR SECONDS
#   run-fuzzer.sh --skip REASON      exits 77 (the tests' skip code)
set -euo pipefail
if [ "${1:-}" = "--skip" ]; then
  echo "fuzz: skipped: ${2:-}"
  exit 77
fi
if [ $# -ne 4 ]; then
  echo "usage: $0 FUZZER SEED_CORPUS WORK_DIR SECONDS | --skip REASON" >&2
  exit 2
fi
fuzzer=$1 seeds=$2 work=$3 seconds=$4
name=$(basename "$fuzzer")
if [ ! -x "$fuzzer" ]; then
  echo "fuzz: $fuzzer is not built (the main build's target \`fuzzers\` builds it)" >&2
  exit 1
fi
mkdir -p "$work/corpus" "$work/artifacts"
log=$work/last-run.log
prefix=$work/artifacts/$(date +%Y%m%d-%H%M%S)-
# Leak checking is off as in `make sanitized` (LeakSanitizer cannot run under every sandbox); any
# other ASan or UBSan report aborts the input and fails the run.
status=0
ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  "$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -error_exitcode=1 \
  -timeout_exitcode=1 -detect_leaks=0 -print_final_stats=1 -artifact_prefix="$prefix" \
  "$work/corpus" "$seeds" >"$log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
  tail -n 80 "$log"
  echo "fuzz: $name FAILED (exit $status); $(grep -m1 'INFO: Seed:' "$log" || true)" >&2
  for a in "$prefix"*; do
    [ -e "$a" ] && echo "fuzz: input: $a (replay: $fuzzer $a)" >&2
  done
  exit 1
fi
runs=$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
echo "fuzz: $name ok: ${runs:-?} inputs in ${seconds} s, corpus $(ls "$work/corpus" | wc -l) + $(ls "$seeds" | wc -l) seeds"
