#!/usr/bin/env bash
# The main job: install what is missing, build qatc, and run it on the bundled
# example model (a QAT CNN trained on the scikit-learn digits).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup-deps.sh
scripts/build.sh
echo
echo "== qatc import examples/digits/digits_qdq.onnx"
build/bin/qatc import examples/digits/digits_qdq.onnx
echo
echo "== qatc eval examples/digits/digits_qdq.onnx --input examples/digits/digits_input.npy"
echo "   (reference evaluation of the Q/DQ graph; the image shows a 7)"
build/bin/qatc eval examples/digits/digits_qdq.onnx --input examples/digits/digits_input.npy
