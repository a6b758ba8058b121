#!/usr/bin/env bash
# The main job: install what is missing, build qatc, and run it on the
# bundled examples:
#  - Fashion-MNIST (examples/fashion): the float model is quantized after
#    training with each calibration method (`qatc quantize`), and every model
#    (fp32, PTQ per method, QAT) is evaluated on the 10000 test images by
#    qatc: the fp32 graph as it is, each quantized model as its int8 qat IR.
#  - the fp32 and the QAT int8 Fashion-MNIST models are compiled to plans
#    (`qatc compile`), the 10000 test images run through both with the
#    runtime (`qatc run`), and their accuracy and latency (`qatc bench`,
#    1 thread, batch 1) are printed side by side.
#  - digits (examples/digits): a QAT model compiled to the qat dialect with
#    its precision report.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup-deps.sh
scripts/build.sh
qatc=build/bin/qatc
out=build/example
data=build/fashion-data
mkdir -p "$out"

echo
echo "== Fashion-MNIST test data (Debian's dataset-fashion-mnist)"
if [[ ! -f "$data/test_labels.npy" ]]; then
  python3 examples/fashion/prepare_data.py --out "$data"
else
  echo "   using $data"
fi

# Top-1 accuracy of `qatc eval ... --labels`, as a number.
accuracy() {
  "$qatc" eval "$@" --input "$data/test_images.npy" \
    --labels "$data/test_labels.npy" --batch-size 50 |
    sed -n 's/^top-1 accuracy: \([0-9.]*\)%.*/\1/p'
}

echo
echo "== post-training quantization of examples/fashion/fashion_float.onnx"
echo "   (TensorRT recipe, 512 calibration images)"
methods=(max percentile entropy mse)
for m in "${methods[@]}"; do
  "$qatc" quantize examples/fashion/fashion_float.onnx --recipe trt \
    --calib "$data/calib.npy" --calib-method "$m" \
    -o "$out/fashion_ptq_$m.onnx" 2>"$out/fashion_ptq_$m.log" | sed 's/^/   /'
  # The calibration warnings (entropy clips the stem's input), not the
  # progress bars.
  grep "warning: tensor" "$out/fashion_ptq_$m.log" | sed 's/^/   /' || true
done

echo
echo "== evaluating on the 10000 test images (about a minute)"
declare -A acc
acc[fp32]=$(accuracy examples/fashion/fashion_float.onnx)
for m in "${methods[@]}"; do
  acc[$m]=$(accuracy "$out/fashion_ptq_$m.onnx" --stage qat)
done
acc[qat]=$(accuracy examples/fashion/fashion_qat.onnx --stage qat)

echo
printf '%-34s %-22s %9s %9s\n' "model" "runs as" "top-1" "vs fp32"
row() {
  awk -v name="$1" -v how="$2" -v a="$3" -v ref="${acc[fp32]}" \
    'BEGIN { printf "%-34s %-22s %8.2f%% %+8.2f\n", name, how, a, a - ref }'
}
row "fp32 (fashion_float.onnx)" "fp32 graph" "${acc[fp32]}"
for m in "${methods[@]}"; do
  row "PTQ, $m calibration" "int8 qat IR" "${acc[$m]}"
done
row "QAT (fashion_qat.onnx)" "int8 qat IR" "${acc[qat]}"

echo
echo "== plans: qatc compile, qatc run (10000 test images), qatc bench (1 thread)"
declare -A planAcc planMs
for m in float qat; do
  "$qatc" compile "examples/fashion/fashion_$m.onnx" -o "$out/fashion_$m.plan" \
    2>&1 | grep -v warning | tail -n 1 | sed 's/^/   /'
  planAcc[$m]=$("$qatc" run "$out/fashion_$m.plan" --input "$data/test_images.npy" \
    --labels "$data/test_labels.npy" | sed -n 's/^top-1 accuracy: \([0-9.]*\).*/\1/p')
  planMs[$m]=$("$qatc" bench "$out/fashion_$m.plan" --iterations 2000 --json |
    sed -n 's/.*"median_ms": \([0-9.]*\).*/\1/p')
done
"$qatc" inspect "$out/fashion_qat.plan" | sed -n '2p;6,7p' | sed 's/^/   /'
echo
printf '%-34s %-22s %9s %14s\n' "plan" "precision" "top-1" "latency (ms)"
for m in float qat; do
  isa=$("$qatc" inspect "$out/fashion_$m.plan" | sed -n 's/.*target \([a-z0-9]*\);.*/\1/p')
  awk -v name="fashion_$m.plan" -v how="$([[ $m == qat ]] && echo "int8, $isa" || echo "fp32, $isa")" \
    -v a="${planAcc[$m]}" -v t="${planMs[$m]}" \
    'BEGIN { printf "%-34s %-22s %8.2f%% %14.4f\n", name, how, a, t }'
done

echo
echo "== qatc compile examples/fashion/fashion_qat.onnx --emit=qat"
"$qatc" compile examples/fashion/fashion_qat.onnx --emit=qat \
  -o "$out/fashion_qat.qat.mlir" --precision-report "$out/fashion_qat.report.txt" \
  2>/dev/null
tail -n 2 "$out/fashion_qat.report.txt" | sed 's/^/   /'
echo "   IR: $out/fashion_qat.qat.mlir, report: $out/fashion_qat.report.txt"

echo
echo "== qatc eval examples/digits/digits_qdq.onnx --stage qat --input examples/digits/digits_input.npy"
echo "   (the digits QAT model as int8 qat IR; the image shows a 7)"
"$qatc" eval examples/digits/digits_qdq.onnx --stage qat \
  --input examples/digits/digits_input.npy
