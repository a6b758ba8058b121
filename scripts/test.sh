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
if [[ "${1:-}" != "--sanitize" ]]; then
  # The libFuzzer targets: a clang sub-build in build/fuzz (ctest runs them).
  start=$(date +%s)
  ninja -C build -j "${QATC_JOBS:-2}" qatc-fuzz
  echo "build: fuzz targets built in $(( $(date +%s) - start )) s"
fi
if [[ "${1:-}" == "--sanitize" ]]; then
  build_dir=build-asan
  # Distinct exit codes: a sanitizer report is never mistaken for an
  # ordinary error exit (1) by the tests.
  # allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons and unpoisons
  # its slabs in inline code; our instrumented code (creating a qat
  # attribute) can start a slab that the uninstrumented libMLIR then fills
  # without unpoisoning, which ASan would report as use-after-poison. Real
  # heap errors are still caught.
  export ASAN_OPTIONS=exitcode=86:detect_leaks=1:abort_on_error=0:allow_user_poisoning=0
  export UBSAN_OPTIONS=exitcode=87:print_stacktrace=1:halt_on_error=1
fi
ctest --test-dir "$build_dir" --output-on-failure -j "${QATC_JOBS:-2}"

# The counts the test run promises (lit, unit tests, ONNX node tests, round trips).
log="$build_dir/Testing/Temporary/LastTest.log"
if [[ -f "$log" ]]; then
  echo
  echo "== summary"
  grep -hE "^(fuzz-[a-z-]+: [0-9]|soak: |reload: |threads: |edited plans: |ONNX node tests|ONNX node conformance|ORT differential|export round trip|generated models|corrupted models|qat lowering|qatc quantize|qat-ops|   identical top-1|   within 1 point|  Passed|Total Discovered Tests)" "$log" || true
  echo "unit tests: $(ctest --test-dir "$build_dir" -N | grep -cE 'Test +#[0-9]+: [A-Za-z]+[.][A-Za-z]') GoogleTest cases"
fi
