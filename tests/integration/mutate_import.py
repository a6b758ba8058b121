#!/usr/bin/env python3
"""Feeds corrupted models to `qatc import` (or `qatc compile`): it must fail
cleanly, never crash or hang.

Deterministic mutations of real models (the bundled digits example and a few
ONNX text models): truncation at many lengths, random byte flips, and
semantic mutations of a valid protobuf (huge or negative dimensions and
attributes, dangling inputs, wrong data sizes). Every run must exit with 0
(it imported) or 1 (it reported an error), print an error message when it
fails, and never abort, crash or report a sanitizer error.
"""
import argparse
import os
import random
import subprocess
import sys

import onnx
from onnx import helper


def mutations(model_bytes, rng, count):
    n = len(model_bytes)
    for i in range(count):
        kind = i % 3
        data = bytearray(model_bytes)
        if kind == 0:  # truncate
            yield f"truncate-{i}", bytes(data[: rng.randrange(0, n)])
        elif kind == 1:  # flip a few bytes
            for _ in range(rng.randrange(1, 8)):
                data[rng.randrange(n)] = rng.randrange(256)
            yield f"flip-{i}", bytes(data)
        else:  # overwrite a run with 0xff (huge varints)
            start = rng.randrange(n)
            for j in range(start, min(n, start + rng.randrange(1, 12))):
                data[j] = 0xFF
            yield f"smear-{i}", bytes(data)


def semantic_mutations(model, rng):
    """Valid protobufs with inconsistent content."""
    cases = []

    def variant(name, fn):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        fn(m)
        cases.append((name, m.SerializeToString()))

    def huge_dim(m):
        m.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 1 << 40
    variant("huge-input-dim", huge_dim)

    def neg_dim(m):
        m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = -3
    variant("negative-input-dim", neg_dim)

    for attr_name, value in [("pads", [1 << 62] * 4), ("strides", [0, 0]),
                             ("kernel_shape", [-1, 3]), ("dilations", [1 << 40, 1]),
                             ("group", 0), ("pads", [-5, 0, 0, 0])]:
        def set_attr(m, attr_name=attr_name, value=value):
            node = next(n for n in m.graph.node if n.op_type == "Conv")
            for a in list(node.attribute):
                if a.name == attr_name:
                    node.attribute.remove(a)
            node.attribute.append(helper.make_attribute(attr_name, value))
        variant(f"conv-{attr_name}-{value if isinstance(value, int) else value[0]}", set_attr)

    def dangling(m):
        m.graph.node[3].input[0] = "does_not_exist"
    variant("dangling-input", dangling)

    def short_weight(m):
        init = next(i for i in m.graph.initializer if len(i.raw_data) > 64)
        init.raw_data = init.raw_data[:-4]
    variant("short-weight", short_weight)

    def big_weight_dims(m):
        init = next(i for i in m.graph.initializer if len(i.dims) == 4)
        init.dims[0] = 1 << 50
    variant("weight-dims-overflow", big_weight_dims)

    def wrong_scale_len(m):
        node = next(n for n in m.graph.node if n.op_type == "DequantizeLinear"
                    and any(a.name == "axis" for a in n.attribute))
        init = next(i for i in m.graph.initializer if i.name == node.input[1])
        init.dims[0] += 1
    variant("per-axis-scale-length", wrong_scale_len)

    def bad_axis(m):
        node = next(n for n in m.graph.node if n.op_type == "DequantizeLinear"
                    and any(a.name == "axis" for a in n.attribute))
        for a in node.attribute:
            if a.name == "axis":
                a.i = 17
    variant("per-axis-bad-axis", bad_axis)

    def no_opset(m):
        del m.opset_import[:]
    variant("no-opset", no_opset)

    def cycle(m):
        m.graph.node[0].input[0] = m.graph.node[-1].output[0]
    variant("cycle", cycle)
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qatc", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--command", default="import", choices=["import", "compile"],
                    help="what to run on each model (compile writes a plan)")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rng = random.Random(args.seed)
    data = open(args.model, "rb").read()
    model = onnx.load_from_string(data)
    cases = list(mutations(data, rng, args.count)) + semantic_mutations(model, rng)
    failures = []
    outcomes = {0: 0, 1: 0}
    for name, blob in cases:
        path = os.path.join(args.work, name + ".onnx")
        with open(path, "wb") as f:
            f.write(blob)
        cmd = [args.qatc, args.command, path]
        if args.command == "compile":
            cmd += ["-o", os.path.join(args.work, "out.plan")]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True,
                               errors="replace", timeout=300)
        except subprocess.TimeoutExpired:
            failures.append(f"{name}: hung (over 300 s)")
            continue
        if p.returncode not in (0, 1):
            failures.append(f"{name}: exit {p.returncode}\n{p.stderr[-2000:]}")
        elif p.returncode == 1 and "error:" not in p.stderr:
            failures.append(f"{name}: failed without an error message\n{p.stderr[-2000:]}")
        elif "runtime error:" in p.stderr or "AddressSanitizer" in p.stderr:
            failures.append(f"{name}: sanitizer report\n{p.stderr[-2000:]}")
        else:
            outcomes[p.returncode] += 1
            os.remove(path)
    for f in failures:
        print("FAIL:", f)
    print(f"corrupted models ({args.command}): {len(cases)} runs, "
          f"{outcomes[1]} rejected with an error, "
          f"{outcomes[0]} still importable, {len(failures)} crashes")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
