#!/usr/bin/env bash
# Installs every Debian package qatc needs. Idempotent: does nothing when all are present.
#   scripts/setup-deps.sh          packages to build qatc and run the main job
#   scripts/setup-deps.sh --test   also the packages the tests need (torch, ONNX test data, ORT)
set -euo pipefail

build_pkgs=(
  cmake ninja-build ccache g++ pkg-config python3
  llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools
  libonnx-dev libprotobuf-dev protobuf-compiler zlib1g-dev libfmt-dev
  dataset-fashion-mnist
  libgtest-dev libgmock-dev libbenchmark-dev
  pybind11-dev python3-dev python3-numpy graphviz
)
test_pkgs=(
  python3 python3-numpy python3-onnx python3-torch python3-torchvision python3-sklearn
  python3-pytest chromium
  libonnx-testdata nodejs npm
  clang-19 libclang-rt-19-dev
)

want=("${build_pkgs[@]}")
if [[ "${1:-}" == "--test" ]]; then
  want+=("${test_pkgs[@]}")
fi

missing=()
for p in "${want[@]}"; do
  # nodejs/npm may come from elsewhere (nodesource); a working binary is enough.
  if [[ "$p" == nodejs ]] && command -v node >/dev/null; then continue; fi
  if [[ "$p" == npm ]] && command -v npm >/dev/null; then continue; fi
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  if [[ $(id -u) -eq 0 ]]; then
    SUDO=()
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    SUDO=(sudo)
  else
    echo "setup: missing Debian packages; run as root:" >&2
    echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
