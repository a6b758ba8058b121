#!/usr/bin/python3
"""Checks the models written by families.py with onnx.checker and ONNX Runtime.

    /usr/bin/python3 tests/models/families_check.py DIR [--models a,b,...] [--no-torch]

For every model of families.py found in DIR:
* onnx.checker.check_model on each NAME_*.onnx;
* each file runs under ONNX Runtime (node tests/ort/run.js, graph optimizations
  on, and off with --no-opt) on NAME_input.npy; families' float files also on
  NAME_calib.npy (batch 8: the dynamic batch axis);
* every output is finite; the float opsets agree (max |a - b| <= 1e-5 * max |a|)
  and match PyTorch (the same seeded model rebuilt by families.py; for
  shape_subgraph its torch reference) within 1e-4 relative;
* Q/DQ files: ORT without graph optimizations must match the PyTorch
  fake-quantized model within 0.1 relative (float summation order may flip a
  value at a rounding tie; in practice ~1e-7, ~1e-2 where a tie flipped).
  ORT with optimizations is only checked for finiteness and its difference is
  reported: its QDQ transformations run the int8 kernels with int32-quantized
  biases (s_in * s_w), which flips single quantized values by one step; with
  random weights these flips spread layer by layer (unet ~5%, googlenet ~50%
  of max |y| at the output). Not a semantic difference of the model.
Exit status 1 if any check fails.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import families  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
RUN_JS = os.path.join(ROOT, "tests", "ort", "run.js")
FLOAT_TOL, TORCH_TOL, QDQ_TOL = 1e-5, 1e-4, 0.1


def ort_run(model, feeds, tmp, no_opt=False):
    """{output name: array} from ONNX Runtime (node tests/ort/run.js)."""
    out = tempfile.mkdtemp(dir=tmp)
    args = ["node", RUN_JS, model, out] + (["--no-opt"] if no_opt else [])
    for name, array in feeds.items():
        path = os.path.join(out, f"feed.{name}.npy")
        np.save(path, array)
        args.append(f"{name}={path}")
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ORT failed on {os.path.basename(model)}: {r.stderr.strip()}")
    result = {}
    with open(os.path.join(out, "index.txt")) as f:
        for line in f:
            file, name = line.rstrip("\n").split("\t")
            result[name] = np.load(os.path.join(out, file))
    return result


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf")
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-12))


def as_list(y):
    return [t.numpy() for t in (y if isinstance(y, (tuple, list)) else (y,))]


class Checker:
    def __init__(self):
        self.failures = []

    def expect(self, ok, what):
        if not ok:
            self.failures.append(what)
            print(f"    FAIL {what}")
        return ok

    def finite(self, outs, what):
        for k, v in outs.items():
            self.expect(np.isfinite(v).all(), f"{what}: output {k} not finite")

    def compare(self, got, ref, tol, what):
        worst = 0.0
        for k in ref:
            r = rel(got[k], ref[k])
            worst = max(worst, r)
            self.expect(r <= tol, f"{what}: output {k} differs by {r:.2e} (> {tol:g})")
        return worst


def check_model(name, d, tmp, use_torch, c):
    m = families.info(name)
    outs = list(m["outputs"])
    x = np.load(os.path.join(d, f"{name}_input.npy"))
    calib_path = os.path.join(d, f"{name}_calib.npy")
    xc = np.load(calib_path) if os.path.exists(calib_path) else None
    floats = [os.path.join(d, f"{name}_float_op{o}.onnx") for o in m["opsets"]
              if m["kind"] == "family"]
    qdq = os.path.join(d, f"{name}_qdq.onnx")
    for f in floats + [qdq]:
        if os.path.exists(f):
            onnx.checker.check_model(onnx.load(f))

    ref = ref_c = None
    if use_torch and m["kind"] == "family":
        with torch.no_grad():
            if m["build"] is None:
                ref, ref_c = ([families.shape_subgraph_reference(v).numpy()] for v in (x, xc))
            else:
                model = families.build_float(name)
                ref = as_list(model(torch.from_numpy(x)))
                ref_c = as_list(model(torch.from_numpy(xc)))
        ref, ref_c = dict(zip(outs, ref)), dict(zip(outs, ref_c))

    first = first_c = None
    for f in floats:
        base = os.path.basename(f)
        got = ort_run(f, {"input": x}, tmp)
        got_c = ort_run(f, {"input": xc}, tmp)
        got_n = ort_run(f, {"input": x}, tmp, no_opt=True)
        c.finite(got, base)
        c.finite(got_c, base + " (batch 8)")
        c.expect(list(got) == outs, f"{base}: outputs {list(got)} != {outs}")
        msg = [f"{base:34s} finite"]
        msg.append(f"opt/no-opt {c.compare(got_n, got, FLOAT_TOL, base + ' no-opt'):.1e}")
        if first is None:
            first, first_c = got, got_c
        else:
            r = max(c.compare(got, first, FLOAT_TOL, base + " vs first opset"),
                    c.compare(got_c, first_c, FLOAT_TOL, base + " vs first opset (batch 8)"))
            msg.append(f"vs op{m['opsets'][0]} {r:.1e}")
        if ref is not None:
            r = max(c.compare(got, ref, TORCH_TOL, base + " vs torch"),
                    c.compare(got_c, ref_c, TORCH_TOL, base + " vs torch (batch 8)"))
            msg.append(f"vs torch {r:.1e}")
        print("  " + ", ".join(msg), flush=True)

    if os.path.exists(qdq):
        base = os.path.basename(qdq)
        got = ort_run(qdq, {"input": x}, tmp)
        got_n = ort_run(qdq, {"input": x}, tmp, no_opt=True)
        c.finite(got, base)
        c.finite(got_n, base + " no-opt")
        msg = [f"{base:34s} finite",
               f"opt/no-opt {max(rel(got[k], got_n[k]) for k in outs):.1e} (info)"]
        if first is not None:
            msg.append(f"vs float {max(rel(got_n[k], first[k]) for k in outs):.1e} (info)")
        if use_torch:
            with torch.no_grad():
                qref = dict(zip(outs, as_list(families.build_qdq(name)(torch.from_numpy(x)))))
            r = c.compare(got_n, qref, QDQ_TOL, base + " vs torch")
            msg.append(f"vs torch fake-quant {r:.1e}")
        d_, s_ = families.requant_pairs(onnx.load(qdq))
        msg.append(f"requant diff-scale={d_} same-scale={s_}")
        if m["kind"] == "rq":
            c.expect(d_ > 0, f"{base}: no DQ->Q pair with different scales")
        print("  " + ", ".join(msg), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--models", default=None, help="comma-separated (default: all found in DIR)")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch comparisons")
    args = ap.parse_args(argv)
    if not os.path.isdir(os.path.join(ROOT, "tests", "ort", "node_modules", "onnxruntime-node")):
        print("tests/ort/node_modules missing: run scripts/setup-ort.sh", file=sys.stderr)
        return 2
    names = args.models.split(",") if args.models else [
        n for n in families.MODELS if os.path.exists(os.path.join(args.dir, f"{n}_input.npy"))]
    torch.set_num_threads(1)
    c = Checker()
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            print(name, flush=True)
            try:
                check_model(name, args.dir, tmp, not args.no_torch, c)
            except Exception as e:  # noqa: BLE001 - report and go on
                c.expect(False, f"{name}: {type(e).__name__}: {e}")
    print(f"{len(names)} models, {len(c.failures)} failures")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
