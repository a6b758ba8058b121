#!/usr/bin/env python3
"""Imports the generated TensorRT-recipe models and checks them.

For every model in the generator's manifest (float and Q/DQ variants):
- qatc imports it; the ops it prints match the ONNX node counts by op type
  (shape-computation nodes the importer folds away are allowed to vanish);
- every op's location names its ONNX node: name, op type and node index agree
  with the model file;
- exporting it back (qatc import --emit=onnx) gives a model that ONNX Runtime
  evaluates bit-identically to the original, with graph optimizations on and
  off.

Run with Debian's /usr/bin/python3 (it needs numpy and onnx).
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import onnx

from ort_roundtrip import run_roundtrip

# Nodes the importer may fold into constants (static shapes) or drop.
FOLDABLE = {"Constant", "Shape", "Gather", "Unsqueeze", "Concat", "Identity", "Cast",
            "ConstantOfShape", "Squeeze", "Slice", "Div", "Mul", "Add", "Sub", "Reshape"}
LOC = re.compile(r'^\s*(?:%\S+ = )?onnx\.(\w+).*loc\("([^"]*)"\(fused<"(\w+)">\[".*":(\d+):0\]\)\)$')


def check_model(qatc, path, failures):
    model = onnx.load(path)
    nodes = model.graph.node
    start = time.time()
    p = subprocess.run([qatc + "-opt", path, "--mlir-print-debuginfo", "--mlir-print-local-scope",
                        "--mlir-elide-resource-strings-if-larger=1"],
                       capture_output=True, text=True)
    elapsed = time.time() - start
    name = os.path.basename(path)
    if p.returncode != 0:
        failures.append(f"{name}: import failed\n{p.stderr}")
        return None
    imported = collections.Counter()
    located = 0
    for line in p.stdout.splitlines():
        m = LOC.match(line)
        if not m:
            continue
        op, node_name, kind, index = m.group(1), m.group(2), m.group(3), int(m.group(4))
        if kind in ("initializer", "graph-input"):
            continue
        imported[op] += 1
        located += 1
        node = nodes[index] if index < len(nodes) else None
        expect_name = node.name if node is not None and node.name else f"{kind}_{index}"
        if node is None or node.op_type != kind or node_name != expect_name:
            failures.append(f"{name}: op onnx.{op} at node #{index} is located at "
                            f"'{node_name}' ({kind}) but the model has "
                            f"'{node.name if node else '?'}' ({node.op_type if node else '?'})")
        elif op != kind and not (kind == "Dropout" and op == "Identity"):
            failures.append(f"{name}: node '{node_name}' ({kind}) became onnx.{op}")
    expected = collections.Counter(n.op_type for n in nodes)
    for op in sorted(set(expected) | set(imported)):
        e, i = expected.get(op, 0), imported.get(op, 0)
        if op in FOLDABLE and i <= e:
            continue
        if e != i:
            failures.append(f"{name}: {e} {op} nodes in the model, {i} onnx.{op} ops imported")
    if located == 0:
        failures.append(f"{name}: no located ops in the IR")
    return elapsed, sum(imported.values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qatc", required=True, help="path of the qatc binary")
    ap.add_argument("--models", required=True, help="directory with manifest.json")
    ap.add_argument("--work", required=True)
    ap.add_argument("--ort", required=True, help="directory of the ORT node scripts")
    ap.add_argument("--extra", action="append", default=[],
                    help="another model to check: model.onnx:input_name=input.npy")
    args = ap.parse_args()

    with open(os.path.join(args.models, "manifest.json")) as f:
        manifest = json.load(f)
    os.makedirs(args.work, exist_ok=True)
    if not os.path.isdir(os.path.join(args.ort, "node_modules")):
        print(f"FAIL: ONNX Runtime is not installed in {args.ort}; run scripts/setup-ort.sh")
        return 1

    failures, jobs = [], []
    rng = np.random.default_rng(0)
    for model_name, entry in sorted(manifest["models"].items()):
        for variant in ("float", "qdq"):
            info = entry[variant]
            path = os.path.join(args.models, info["file"])
            result = check_model(args.qatc, path, failures)
            if result is None:
                continue
            elapsed, ops = result
            print(f"{info['file']}: {ops} ops imported in {elapsed:.2f} s")
            exported = os.path.join(args.work, info["file"])
            p = subprocess.run([args.qatc, "import", path, "--emit=onnx", "-o", exported],
                               capture_output=True, text=True)
            if p.returncode != 0:
                failures.append(f"{info['file']}: export failed\n{p.stderr}")
                continue
            inputs = {}
            for i in info["inputs"]:
                npy = os.path.join(args.work, f"{model_name}.{i['name']}.npy")
                np.save(npy, rng.standard_normal(i["shape"]).astype(np.float32))
                inputs[i["name"]] = npy
            jobs.append({"name": info["file"], "a": path, "b": exported, "inputs": inputs,
                         "levels": ["all", "disabled"]})

    for spec in args.extra:
        path, _, binding = spec.partition(":")
        input_name, _, npy = binding.partition("=")
        result = check_model(args.qatc, path, failures)
        if result is None:
            continue
        print(f"{os.path.basename(path)}: {result[1]} ops imported in {result[0]:.2f} s")
        exported = os.path.join(args.work, os.path.basename(path))
        p = subprocess.run([args.qatc, "import", path, "--emit=onnx", "-o", exported],
                           capture_output=True, text=True)
        if p.returncode != 0:
            failures.append(f"{path}: export failed\n{p.stderr}")
            continue
        jobs.append({"name": os.path.basename(path), "a": path, "b": exported,
                     "inputs": {input_name: npy}, "levels": ["all", "disabled"]})

    results = run_roundtrip(args.ort, args.work, jobs)
    exact = 0
    for r in results:
        if r["status"] == "exact":
            exact += 1
        else:
            failures.append(f"{r['name']} (ORT level {r['level']}): {r['status']} {r['detail']}")
    for f in failures:
        print("FAIL:", f)
    print(f"generated models: {len(jobs)} imported and exported; "
          f"ONNX Runtime round trip bit-exact in {exact}/{len(results)} runs")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
