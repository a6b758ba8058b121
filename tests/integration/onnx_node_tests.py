#!/usr/bin/env python3
"""Imports the ONNX backend node tests with qatc and checks the export round trip.

Every test model (Debian's libonnx-testdata) whose operators qatc supports
must import; the ones qatc refuses on purpose (an unsupported variant of a
supported operator) are listed with the reason in node_tests_refused.txt, and
that list must stay exact. Each imported model is exported back to ONNX and
ONNX Runtime must give bit-identical outputs for the original and the export
on the test's own inputs. A crash is always a failure.

Run with Debian's /usr/bin/python3 (it needs the onnx package).
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

from ort_roundtrip import run_roundtrip


# Inputs qatc needs at compile time (shapes, axes, bounds, sizes): when a
# test feeds one of these as a graph input, the runner freezes it to the
# test's value with --freeze-input, as a user would.
PARAM_INPUTS = {
    "Reshape": [1], "Pad": [1, 2, 3], "Resize": [1, 2, 3], "Clip": [1, 2],
    "Slice": [1, 2, 3, 4], "Split": [1], "Squeeze": [1], "Unsqueeze": [1],
    "ReduceMean": [1], "ConstantOfShape": [0], "Dropout": [1, 2],
    "ReduceSum": [1], "ReduceMax": [1], "ReduceMin": [1], "ReduceProd": [1],
    "ReduceL1": [1], "ReduceL2": [1], "ReduceSumSquare": [1],
    "ReduceLogSumExp": [1], "Tile": [1], "TopK": [1], "Expand": [1],
    "Range": [0, 1, 2], "Upsample": [1], "Trilu": [1], "OneHot": [1],
    "LayerNormalization": [1, 2], "CumSum": [1],
    "RNN": [1, 2, 3, 4], "GRU": [1, 2, 3, 4], "LSTM": [1, 2, 3, 4, 7],
}


# Operators qatc imports as a composition of other ops (a loss as
# LogSoftmax / GatherElements / ReduceSum, ReduceLogSum as Log of ReduceSum,
# the recurrent ops unrolled, CumSum and Einsum as MatMul / Mul / ReduceSum):
# ONNX Runtime sums their export in another order than its own kernel, so
# their round trip is compared within 1e-6 of each output's largest
# magnitude (a few float32 ulps), not bit for bit.
COMPOSED_OPS = {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss", "ReduceLogSum",
                "ReduceLogSumExp",
                "RNN", "GRU", "LSTM", "CumSum", "Einsum"}
COMPOSED_RTOL = 1e-6


def load_refusals(path):
    refused = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition(" ")
            refused[name] = reason.strip().lstrip("#").strip()
    return refused


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qatc", required=True)
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data/node")
    ap.add_argument("--refused", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--ort", help="directory of the ORT node scripts (skips the round trip if absent)")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()

    if not os.path.isdir(args.data):
        print(f"node-tests: {args.data} is missing; install libonnx-testdata")
        return 1
    supported = set(subprocess.run([args.qatc, "ops"], check=True, capture_output=True,
                                   text=True).stdout.split())
    refused = load_refusals(args.refused)
    os.makedirs(args.work, exist_ok=True)

    tests = sorted(d for d in os.listdir(args.data)
                   if os.path.isfile(os.path.join(args.data, d, "model.onnx")))
    candidates, skipped = [], []
    frozen = {}  # test -> {input name: npy path}
    for name in tests:
        model = onnx.load(os.path.join(args.data, name, "model.onnx"), load_external_data=False)
        ops = {(n.domain or "", n.op_type) for n in model.graph.node}
        if not all(d in ("", "ai.onnx") and op in supported for d, op in ops):
            skipped.append(name)
            continue
        candidates.append(name)
        inits = {i.name for i in model.graph.initializer}
        graph_inputs = [i.name for i in model.graph.input if i.name not in inits]
        params = {n.input[k] for n in model.graph.node
                  for k in PARAM_INPUTS.get(n.op_type, []) if k < len(n.input)}
        for idx, input_name in enumerate(graph_inputs):
            if input_name not in params:
                continue
            pb = os.path.join(args.data, name, "test_data_set_0", f"input_{idx}.pb")
            if not os.path.exists(pb):
                continue
            t = onnx.TensorProto()
            with open(pb, "rb") as f:
                t.ParseFromString(f.read())
            npy = os.path.join(args.work, f"{name}.frozen{idx}.npy")
            np.save(npy, numpy_helper.to_array(t))
            frozen.setdefault(name, {})[input_name] = npy

    def run_import(name):
        out = os.path.join(args.work, name + ".onnx")
        cmd = [args.qatc, "import", os.path.join(args.data, name, "model.onnx"),
               "--emit=onnx", "-o", out]
        for input_name, npy in frozen.get(name, {}).items():
            cmd.append(f"--freeze-input={input_name}={npy}")
        p = subprocess.run(cmd, capture_output=True, text=True)
        return name, p.returncode, p.stderr

    failures = []
    imported, refused_ok = [], []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for name, rc, err in pool.map(run_import, candidates):
            if rc < 0 or rc > 1:
                failures.append(f"{name}: qatc crashed or aborted (exit {rc})\n{err}")
            elif rc == 0 and name in refused:
                failures.append(f"{name}: imports now; remove it from {args.refused}")
            elif rc == 0:
                imported.append(name)
            elif name in refused:
                refused_ok.append(name)
            else:
                failures.append(f"{name}: import failed\n{err}")
    stale = sorted(set(refused) - set(candidates))
    for name in stale:
        failures.append(f"{name}: listed in {args.refused} but not a candidate (no such test, "
                        "or it uses unsupported operators)")

    exact = ort_cannot = 0
    if args.ort and os.path.isdir(os.path.join(args.ort, "node_modules")):
        jobs = []
        for name in imported:
            src = os.path.join(args.data, name)
            model = onnx.load(os.path.join(src, "model.onnx"), load_external_data=False)
            inits = {i.name for i in model.graph.initializer}
            names = [i.name for i in model.graph.input if i.name not in inits]
            ds = os.path.join(src, "test_data_set_0")
            inputs = {}
            for i, input_name in enumerate(names):
                pb = os.path.join(ds, f"input_{i}.pb")
                if not os.path.exists(pb):
                    break
                t = onnx.TensorProto()
                with open(pb, "rb") as f:
                    t.ParseFromString(f.read())
                npy = os.path.join(args.work, f"{name}.in{i}.npy")
                np.save(npy, numpy_helper.to_array(t))
                inputs[input_name] = npy
            if len(inputs) != len(names):
                continue
            frozen_names = set(frozen.get(name, {}))
            # LayerNormalization's Mean / InvStdDev outputs are composed too.
            composed = any(n.op_type in COMPOSED_OPS or (
                n.op_type == "LayerNormalization" and sum(1 for o in n.output if o) > 1)
                for n in model.graph.node)
            jobs.append({"name": name, "a": os.path.join(src, "model.onnx"),
                         "b": os.path.join(args.work, name + ".onnx"), "inputs": inputs,
                         "inputs_b": {k: v for k, v in inputs.items() if k not in frozen_names},
                         "rtol": COMPOSED_RTOL if composed else 0})
        for r in run_roundtrip(args.ort, args.work, jobs):
            if r["status"] == "exact":
                exact += 1
            elif r["status"] == "a_failed":
                ort_cannot += 1
            else:
                failures.append(f"{r['name']}: export round trip {r['status']}: {r['detail']}")

    for f in failures:
        print("FAIL:", f)
    print(f"ONNX node tests: {len(tests)} total, {len(skipped)} use operators qatc does not "
          f"support, {len(candidates)} use only supported operators: {len(imported)} imported "
          f"and verified ({len(frozen)} with frozen shape inputs), {len(refused_ok)} refused as "
          f"listed (unsupported variants)")
    if args.ort:
        print(f"export round trip under ONNX Runtime: {exact} bit-exact (composed ops within "
              f"{COMPOSED_RTOL:g}), "
              f"{ort_cannot} not runnable by ONNX Runtime itself")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
