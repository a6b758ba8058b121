#!/usr/bin/python3
"""Times qatc's reference evaluator on whole models, with ONNX Runtime in the
same run for scale.

    bench/eval_bench.py [--runs 5] [--models resnet50,resnet18] [--work DIR]

Generates the models with tests/models/generate.py (float32, batch 1) unless
they are in DIR already, runs `qatc eval` RUNS times (the evaluation time it
prints, not process start-up or import) and ONNX Runtime (one session, all
graph optimizations, one thread), and prints medians and the ratio. The
evaluator is the golden model, not the fast path: the target is about a
second per ResNet-50 image so that calibration is practical.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--models", default="resnet50")
    ap.add_argument("--variant", default="float", choices=["float", "qdq"])
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench-models"))
    ap.add_argument("--qatc", default=os.path.join(ROOT, "build", "bin", "qatc"))
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    names = args.models.split(",")
    missing = [n for n in names
               if not os.path.exists(os.path.join(args.work, f"{n}_{args.variant}.onnx"))]
    if missing:
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "models", "generate.py"),
                        "--out", args.work, "--models", ",".join(missing)], check=True)
    print(f"{'model':<24} {'qatc eval (ms)':>16} {'ORT (ms)':>10} {'ratio':>8}")
    for name in names:
        model = os.path.join(args.work, f"{name}_{args.variant}.onnx")
        shape = (1, 16, 64) if name.startswith("transformer") else (1, 3, 224, 224)
        x = os.path.join(args.work, f"{name}.input.npy")
        np.save(x, np.random.default_rng(0).standard_normal(shape).astype(np.float32))
        times = []
        for _ in range(args.runs):
            out = subprocess.run([args.qatc, "eval", model, "--input", x], check=True,
                                 capture_output=True, text=True).stdout
            times.append(float(re.search(r"in ([0-9.]+) s", out).group(1)) * 1e3)
        ort = json.loads(subprocess.run(
            ["node", os.path.join(ROOT, "tests", "ort", "time.js"), model, str(args.runs),
             f"input={x}"], check=True, capture_output=True, text=True).stdout)
        q = statistics.median(times)
        print(f"{name + '_' + args.variant:<24} {q:>16.1f} {ort['median_ms']:>10.1f} "
              f"{q / ort['median_ms']:>7.1f}x")


if __name__ == "__main__":
    main()
