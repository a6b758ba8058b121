#!/usr/bin/env bash
# Configures and builds qatc in build/ (or $QATC_BUILD_DIR).
#   scripts/build.sh              release build
#   scripts/build.sh --sanitize   ASan + UBSan build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${QATC_BUILD_DIR:-build}
extra=()
if [[ "${1:-}" == "--sanitize" ]]; then
  build_dir=${QATC_BUILD_DIR:-build-asan}
  # The fuzz targets are sanitized already: the release build runs them.
  extra=(-DQATC_ENABLE_SANITIZERS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQATC_FUZZ=OFF)
fi
jobs=${QATC_JOBS:-2}

if [[ ! -f "$build_dir/build.ninja" ]]; then
  cmake -G Ninja -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${extra[@]}"
fi
start=$(date +%s)
ninja -C "$build_dir" -j "$jobs"
echo "build: $build_dir built in $(( $(date +%s) - start )) s"
