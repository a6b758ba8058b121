#!/usr/bin/env bash
# Runs every test: installs what is missing (build and test packages, ONNX
# Runtime from npm), builds, then runs the unit, lit and integration tests.
#   scripts/test.sh               release build
#   scripts/test.sh --sanitize    the same tests on an ASan + UBSan build
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup-deps.sh --test
scripts/setup-ort.sh
scripts/build.sh "$@"
build_dir=build
[[ "${1:-}" == "--sanitize" ]] && build_dir=build-asan
ctest --test-dir "$build_dir" --output-on-failure -j "${QATC_JOBS:-2}"

# The counts the test run promises (lit, unit tests, ONNX node tests, round trips).
log="$build_dir/Testing/Temporary/LastTest.log"
if [[ -f "$log" ]]; then
  echo
  echo "== summary"
  grep -hE "^(ONNX node tests|export round trip|generated models|lit-checks|  Passed|Total Discovered Tests)" "$log" || true
  echo "unit tests: $(grep -c "^[0-9]*/[0-9]* Test.*\(Importer\|Locations\|ShapeInference\|Npy\)\." "$log" 2>/dev/null || true) GoogleTest cases"
fi
