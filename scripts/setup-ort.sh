#!/usr/bin/env bash
# Installs ONNX Runtime for Node.js (the reference peer of the tests) into
# tests/ort/node_modules. --ignore-scripts: its install script would try a
# download this machine cannot make; the CPU library ships in the package.
set -euo pipefail
cd "$(dirname "$0")/../tests/ort"
if [[ -f node_modules/onnxruntime-node/package.json ]] &&
   grep -q '"version": "1.30.0"' node_modules/onnxruntime-node/package.json; then
  exit 0
fi
echo "setup: installing onnxruntime-node 1.30.0 from npm"
npm install --ignore-scripts --no-audit --no-fund --loglevel=error
