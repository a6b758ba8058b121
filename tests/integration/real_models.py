#!/usr/bin/env python3
"""Models as exporters write them, end to end against ONNX Runtime.

The vision families of tests/models/families.py (U-Net with ConvTranspose,
LR-ASPP with bilinear Resize, an FPN detector with nearest Resize and an
SSD-style head, an NHWC-input face detector with PRelu, and a tf2onnx-style
model whose Pad, Resize and Reshape parameters come from Shape subgraphs),
exported at opsets 11 and 13 (and 12), float and with TensorRT-recipe Q/DQ:

- every float export compiles to an fp32 plan (host) within 1e-4 of ONNX
  Runtime: max|plan - ort| <= 1e-4 * max|ort|, every output;
- every Q/DQ export compiles to an int8 plan that agrees with ONNX Runtime's
  literal evaluation of the Q/DQ graph (graph optimizations off) within the
  model's band: the noise floor (qatc fp32 vs fp64 evaluation of the same
  graph) as ort_differential.band() widens it;
- `qatc quantize --recipe trt` on the opset-11 float export says "converted
  from opset 11 to 13", writes an opset-13 model that ONNX Runtime runs, and
  that model's int8 plan agrees with ONNX Runtime on it within its band.

Prints one row per model and check; exits 1 on any failure.
"""
import argparse
import os
import sys

import numpy as np
import onnx

from harness import Checker, nan_aware_diff, run
from ort_differential import band, load_outputs, read_index  # noqa: E402

FLOAT_REL = 1e-4
FAMILIES = ["unet", "lraspp", "fpn_ssd", "face_nhwc", "line_seg", "shape_subgraph"]


def compare(got, ref):
    """(max |diff| / max |ref|, max |diff| / range(ref), cosine)."""
    one_side, diff, both = nan_aware_diff(got.ravel(), ref.ravel())
    if one_side:  # a NaN on one side only fails every measure
        return float("inf"), float("inf"), -1.0
    g = got.astype(np.float64).ravel()[both]
    r = ref.astype(np.float64).ravel()[both]
    scale = float(np.abs(r).max()) or 1.0
    rng = float(r.max() - r.min()) or 1.0
    denom = float(np.linalg.norm(g) * np.linalg.norm(r))
    cos = float(np.dot(g, r) / denom) if denom else 1.0
    return diff / scale, diff / rng, cos


class Runner(Checker):
    def ort(self, model, inputs, out_dir, no_opt):
        cmd = ["node", os.path.join(self.args.ort, "run.js"), model, out_dir]
        if no_opt:
            cmd.append("--no-opt")
        cmd += [f"{k}={v}" for k, v in inputs.items()]
        rc, _, err = run(cmd)
        if rc:
            raise RuntimeError(f"ONNX Runtime failed on {model}:\n{err[-2000:]}")
        names = read_index(out_dir)
        return {n: np.load(os.path.join(out_dir, f)) for n, f in names.items()}

    def compile_args(self, inputs):
        """Extra `qatc compile` arguments for a model given `inputs`."""
        return []

    def plan_outputs(self, model, inputs, work, tag):
        plan = os.path.join(work, f"{tag}.plan")
        self.qatc("compile", model, "-o", plan, *self.compile_args(inputs))
        out = os.path.join(work, f"{tag}.npz")
        args = ["run", plan, "-o", out]
        for k, v in inputs.items():
            args += ["--input", f"{k}={v}"]
        self.qatc(*args)
        got = load_outputs(out)
        # Unequal thread shares (a slower core's) give the same bytes.
        out2 = os.path.join(work, f"{tag}-shares.npz")
        self.qatc(*args[:3], out2, *args[4:], "--threads", "2",
                  "--thread-shares", "0.3,0.7")
        for name, a in load_outputs(out2).items():
            if not np.array_equal(a, got[name], equal_nan=True):
                raise RuntimeError(f"{tag} plan output {name} differs on 2 "
                                   f"threads with shares 0.3 and 0.7")
        return got

    def floor(self, model, inputs, work):
        """The noise floor: qatc fp32 vs fp64 on the same Q/DQ graph, per
        output (range-relative diff and cosine)."""
        res = {}
        for fp64 in (False, True):
            out = os.path.join(work, f"floor{int(fp64)}.npz")
            args = ["eval", model, "-o", out] + (["--fp64"] if fp64 else [])
            for k, v in inputs.items():
                args += ["--input", f"{k}={v}"]
            self.qatc(*args)
            res[fp64] = load_outputs(out)
        floors = {}
        for name, a in res[False].items():
            _, rr, cos = compare(a, res[True][name])
            floors[name] = {"range_rel": rr, "cosine": cos}
        return floors

    def check_float(self, label, model, inputs, work):
        """Checks the fp32 plan against ORT; returns ORT's outputs."""
        got = self.plan_outputs(model, inputs, work, "fp32")
        ref = self.ort(model, inputs, os.path.join(work, "ort"), no_opt=False)
        for name, r in ref.items():
            rel, _, cos = compare(got[name], r)
            ok = rel <= FLOAT_REL
            print(f"   {label:30s} fp32 plan vs ORT   {name:12s} "
                  f"max|d|/max|ort| {rel:.2e} (limit {FLOAT_REL:.0e}) cos {cos:.6f}"
                  f"  {'ok' if ok else 'FAIL'}", flush=True)
            if not ok:
                self.fail(label, f"fp32 plan output {name} differs from ORT by "
                                 f"{rel:.2e} of its max")
        return ref

    def check_int8(self, label, model, inputs, work):
        got = self.plan_outputs(model, inputs, work, "int8")
        ref = self.ort(model, inputs, os.path.join(work, "ort-noopt"), no_opt=True)
        floors = self.floor(model, inputs, work)
        for name, r in ref.items():
            _, rr, cos = compare(got[name], r)
            lim_rr, lim_cos = band(floors[name])
            ok = rr <= lim_rr and cos >= lim_cos
            print(f"   {label:30s} int8 plan vs ORT   {name:12s} "
                  f"range-rel {rr:.2e} (band {lim_rr:.2e}) cos {cos:.6f} "
                  f"(band {lim_cos:.6f})  {'ok' if ok else 'FAIL'}", flush=True)
            if not ok:
                self.fail(label, f"int8 plan output {name}: range-relative "
                                 f"{rr:.2e}, cosine {cos:.6f} against ORT "
                                 f"(band {lim_rr:.2e} / {lim_cos:.6f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qatc", required=True)
    ap.add_argument("--ort", required=True, help="directory with run.js")
    ap.add_argument("--models", required=True,
                    help="tests/models/families.py's output directory")
    ap.add_argument("--work", required=True)
    ap.add_argument("--families", default=",".join(FAMILIES))
    args = ap.parse_args()
    c = Runner(args)
    os.makedirs(args.work, exist_ok=True)
    for fam in args.families.split(","):
        print(f"== {fam}", flush=True)
        inp = os.path.join(args.models, f"{fam}_input.npy")
        calib = os.path.join(args.models, f"{fam}_calib.npy")
        fwork = os.path.join(args.work, fam)
        os.makedirs(fwork, exist_ok=True)
        float_models = sorted(f for f in os.listdir(args.models)
                              if f.startswith(f"{fam}_float_op") and f.endswith(".onnx"))
        name = onnx.load(os.path.join(args.models, float_models[0]),
                         load_external_data=False).graph.input[0].name
        inputs = {name: inp}
        for f in float_models:
            label = f[:-5]
            work = os.path.join(fwork, label)
            os.makedirs(work, exist_ok=True)
            try:
                c.check_float(label, os.path.join(args.models, f), inputs, work)
            except RuntimeError as e:
                c.fail(label, str(e))
        qdq = os.path.join(args.models, f"{fam}_qdq.onnx")
        if os.path.exists(qdq):
            work = os.path.join(fwork, "qdq")
            os.makedirs(work, exist_ok=True)
            try:
                c.check_int8(f"{fam}_qdq", qdq, inputs, work)
            except RuntimeError as e:
                c.fail(f"{fam}_qdq", str(e))
        # qatc quantize on the opset-11 float export.
        label = f"{fam}_op11 quantized"
        work = os.path.join(fwork, "ptq")
        os.makedirs(work, exist_ok=True)
        ptq = os.path.join(work, f"{fam}_ptq.onnx")
        try:
            out, _ = c.qatc("quantize", os.path.join(args.models, f"{fam}_float_op11.onnx"),
                            "--recipe", "trt", "--calib", calib, "-o", ptq)
            opset = [o.version for o in onnx.load(ptq).opset_import if o.domain in ("", "ai.onnx")]
            said = "converted from opset 11 to 13" in out
            print(f"   {label:30s} qatc quantize: opset {opset[0]}, "
                  f"{'says' if said else 'does NOT say'} 'converted from opset 11 to 13'",
                  flush=True)
            if opset != [13] or not said:
                c.fail(label, f"quantized model has opset {opset}; stdout: {out.strip()}")
            c.ort(ptq, inputs, os.path.join(work, "ort-opt"), no_opt=False)
            c.check_int8(label, ptq, inputs, work)
        except RuntimeError as e:
            c.fail(label, str(e))
    return c.finish("every family model agrees with ONNX Runtime")


if __name__ == "__main__":
    sys.exit(main())
