#!/usr/bin/python3
"""The Fashion-MNIST story through the Python API: quantize the bundled
float model from a numpy data loader with each calibration method, compile
every result and the QAT model to plans, and compare their accuracy and
latency on the 10 000 test images.

    examples/fashion/prepare_data.py --out build/fashion-data
    PYTHONPATH=build/python /usr/bin/python3 examples/python/fashion.py \
        --data build/fashion-data --work build/python-example
"""

import argparse
import os
import time

import numpy as np

import qatc

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(os.path.dirname(HERE), "fashion")


def batches(images, size):
    """A minimal data loader: (images, labels)-style batches of numpy arrays."""
    for i in range(0, len(images), size):
        yield images[i:i + size], None


def accuracy_and_latency(plan, images, labels):
    """Top-1 over the test set (one image per run, batch 1 as compiled) and
    the median single-image latency."""
    session = plan.session()
    name = plan.inputs[0][0]
    correct, times = 0, []
    for i in range(len(images)):
        x = images[i:i + 1]
        t0 = time.perf_counter()
        logits = session.run({name: x})
        times.append(time.perf_counter() - t0)
        correct += int(np.argmax(next(iter(logits.values()))) == labels[i])
    return correct / len(images), float(np.median(times)) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="build/fashion-data",
                    help="the directory examples/fashion/prepare_data.py wrote")
    ap.add_argument("--work", default="build/python-example")
    ap.add_argument("--methods", default="max,percentile,entropy,mse")
    ap.add_argument("--images", type=int, default=10000,
                    help="test images to score (all 10000 by default)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    calib = np.load(os.path.join(args.data, "calib.npy"))
    images = np.load(os.path.join(args.data, "test_images.npy"))[:args.images]
    labels = np.load(os.path.join(args.data, "test_labels.npy"))[:args.images]

    rows = []
    plan = qatc.compile(os.path.join(MODELS, "fashion_float.onnx"),
                        output=os.path.join(args.work, "fashion_float.plan"))
    rows.append(("float model, fp32 plan", *accuracy_and_latency(plan, images, labels)))
    plan = qatc.compile(os.path.join(MODELS, "fashion_qat.onnx"),
                        output=os.path.join(args.work, "fashion_qat.plan"))
    rows.append(("QAT model, int8 plan", *accuracy_and_latency(plan, images, labels)))
    for method in args.methods.split(","):
        qdq = os.path.join(args.work, f"fashion_ptq_{method}.onnx")
        qatc.quantize(os.path.join(MODELS, "fashion_float.onnx"), batches(calib, 64),
                      output=qdq, method=method)
        plan = qatc.compile(qdq, output=os.path.join(args.work, f"fashion_ptq_{method}.plan"))
        rows.append((f"PTQ {method}, int8 plan", *accuracy_and_latency(plan, images, labels)))

    print(f"\n{'model':<28} {'top-1':>8} {'median ms':>10}   ({len(images)} test images, batch 1)")
    for name, acc, ms in rows:
        print(f"{name:<28} {acc * 100:7.2f}% {ms:10.4f}")


if __name__ == "__main__":
    main()
