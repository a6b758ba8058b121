#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time on its seed corpus (read
# only) and a working corpus (what it finds, kept between runs), with ASan
# and UBSan on. A crash, sanitizer report, leak, timeout or out-of-memory
# fails the run and leaves the input under WORK.
#   tests/fuzz/run-fuzzer.sh FUZZER SEEDS WORK SECONDS [libFuzzer flags...]
# e.g. a million executions: ... WORK 0 -runs=1000000
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3 seconds=$4
shift 4
if [[ ! -x "$fuzzer" ]]; then
  echo "$fuzzer is not built: run 'ninja -C build qatc-fuzz' (scripts/test.sh does)"
  exit 1
fi
mkdir -p "$work/corpus"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allow_user_poisoning=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
limit=()
if [[ "$seconds" != 0 ]]; then
  limit=(-max_total_time="$seconds")
fi
log="$work/fuzz.log"
set +e
"$fuzzer" "${limit[@]}" -timeout=20 -rss_limit_mb=3072 -print_final_stats=1 \
  -artifact_prefix="$work/" "$@" "$work/corpus" "$seeds" >"$log" 2>&1
rc=$?
set -e
if [[ $rc -ne 0 ]]; then
  tail -n 60 "$log"
  echo "$(basename "$fuzzer"): FAILED (exit $rc); log $log, inputs under $work"
  exit 1
fi
runs=$(grep -m1 -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$')
corpus=$(ls "$work/corpus" | wc -l)
echo "$(basename "$fuzzer"): ${runs:-?} executions, 0 findings (working corpus $corpus inputs, seeds $(ls "$seeds" | wc -l))"
