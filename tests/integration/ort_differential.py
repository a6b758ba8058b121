#!/usr/bin/env python3
"""Differential test of qatc's reference evaluator against ONNX Runtime.

For every model (float and Q/DQ variants of the generator's manifest, the
--extra models, and optionally more generated models from --optional-dir):
run ONNX Runtime with graph optimizations disabled and enabled, `qatc eval`
(float32) and `qatc eval --fp64` on the same seeded input, and compare.

- Float models: qatc (fp32) must match both ORT runs to
  max|qatc - ort| <= 1e-4 * max|ort|.
- Q/DQ models: the noise floor is qatc fp32 against qatc fp64 (the same Q/DQ
  graph, only float rounding differs; a single-LSB flip of one Q cascades
  through deep networks). qatc fp32 against ORT (no-opt and opt) must stay
  within a band derived from that floor (see band() below).
- Every Q/DQ model is also run by ORT (no-opt) with every QuantizeLinear
  output (and any other int8/uint8 tensor) added as a graph output, and those
  int8 tensors are compared with `qatc eval --dump-tensors`: the share of
  elements that differ is reported; models named with --exact (default: the
  digits example) must be bit-identical, with the float output within 1e-5.

Prints a table (model, variant, comparison, cosine, range-relative diff, max
abs diff, the limit and the verdict) and exits 1 on failure.

Run with Debian's /usr/bin/python3 (it needs numpy and onnx).
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

# Float models: max|qatc - ort| <= FLOAT_REL * max|ort|.
FLOAT_REL = 1e-4
# Exact models (digits): float outputs within this absolute difference of ORT no-opt.
EXACT_FLOAT_ATOL = 1e-5
# Q/DQ band against ORT, from the noise floor: qatc fp32 against qatc fp64 on
# the same Q/DQ graph. In a Q/DQ network a float difference of one ulp that
# lands on a rounding boundary flips one int8 value by one LSB, and the flip
# cascades; fp32 against fp64 measures how far that alone moves the outputs.
# qatc and ORT (no-opt) are two fp32 evaluations that differ only in rounding
# order (e.g. the conv accumulation order), so each is about the floor
# distance d away from fp64, and they are within 2d of each other (triangle
# inequality): range-relative diff <= 2 x floor. Shallow models have floors
# of 0 to 1% (ResNet-18 0.9%, SqueezeNet 0.5%, the transformer 0), and a few
# flips near the output can move it by about that much, so the band never
# goes below 1% of the range. For the cosine the same argument on angles
# (1 - cos ~ angle^2 / 2, angle doubled) gives 1 - cos <= 4 x (1 - floor
# cosine); its minimum 1e-3 matches the 1% one: an error of 1% of the range
# (about 6 standard deviations for these logits) on every element gives
# 1 - cos ~ 0.06^2 / 2 ~ 2e-3.
#
# ORT with graph optimizations on runs a different arithmetic (float biases
# rounded to int32, integer kernels with their own requantization), and moves
# its own outputs away from its literal evaluation by up to ~20% of the range
# on these random-weight models. qatc must be no farther from ORT-opt than
# ORT's literal evaluation is, plus the band: the band is widened by ORT's
# own opt-vs-no-opt gap (range-relative differences add; for the cosine the
# angles add).
#
# The issue also pins two shallow models to 0.5% of the output range against
# ORT's literal evaluation.
TIGHT_RANGE_REL = {"transformer_qdq": 0.005, "squeezenet1_0_qdq": 0.005}
BAND_RANGE_FACTOR, BAND_RANGE_MIN = 2.0, 0.01
BAND_COS_FACTOR, BAND_COS_MIN = 4.0, 1e-3
TIMEOUT = 1800


def band(floor, ort_gap=None):
    """The (max range-relative diff, min cosine) allowed against ORT for a Q/DQ
    model; `ort_gap` (ORT opt vs ORT no-opt) widens it for ORT-opt."""
    rr = max(BAND_RANGE_FACTOR * floor["range_rel"], BAND_RANGE_MIN)
    cos = 1.0 - max(BAND_COS_FACTOR * (1.0 - floor["cosine"]), BAND_COS_MIN)
    if ort_gap is not None:
        rr += ort_gap["range_rel"]
        angle = math.acos(min(1.0, cos)) + math.acos(min(1.0, max(-1.0, ort_gap["cosine"])))
        cos = math.cos(min(angle, math.pi))
    return rr, cos


def run(cmd, timeout=TIMEOUT):
    start = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = -1, "", f"timed out after {timeout} s"
    return rc, out, err, time.time() - start


def read_index(d):
    """name -> file of a dump or ORT output directory (index.txt: file<TAB>name)."""
    names = {}
    with open(os.path.join(d, "index.txt")) as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                file, _, name = line.partition("\t")
                names[name] = os.path.join(d, file)
    return names


def load_outputs(path):
    if os.path.isdir(path):
        return {k: np.load(v) for k, v in read_index(path).items()}
    if path.endswith(".npz"):
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    return {"": np.load(path)}


def metrics(ref, got):
    """Float comparison of got against ref, in float64."""
    r = np.asarray(ref, np.float64).ravel()
    g = np.asarray(got, np.float64).ravel()
    d = np.abs(g - r)
    max_abs = float(d.max()) if d.size else 0.0
    rng = float(r.max() - r.min()) if r.size else 0.0
    peak = float(np.abs(r).max()) if r.size else 0.0
    nr, ng = float(np.linalg.norm(r)), float(np.linalg.norm(g))
    cos = 1.0 if nr == 0 and ng == 0 else (float(r @ g) / (nr * ng) if nr and ng else 0.0)
    return {"cosine": cos, "max_abs": max_abs,
            "range_rel": max_abs / rng if rng else (0.0 if max_abs == 0 else float("inf")),
            "peak_rel": max_abs / peak if peak else (0.0 if max_abs == 0 else float("inf"))}


def graph_inputs(model):
    inits = {i.name for i in model.graph.initializer}
    out = []
    for i in model.graph.input:
        if i.name in inits:
            continue
        dims = [d.dim_value if d.dim_value > 0 else 1 for d in i.type.tensor_type.shape.dim]
        out.append((i.name, dims))
    return out


def is_qdq(model):
    return any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in model.graph.node)


def with_int8_outputs(model, path):
    """Saves a copy of `model` whose outputs also include every QuantizeLinear
    output and every other int8/uint8 tensor; returns their names in graph order."""
    int8 = (TensorProto.INT8, TensorProto.UINT8)
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type
             for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    consts = {i.name: i.data_type for i in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    consts[n.output[0]] = a.t.data_type
    present = {o.name for o in model.graph.output}
    names = []
    for n in model.graph.node:
        for k, name in enumerate(n.output):
            if not name:
                continue
            elem = types.get(name, 0)
            if n.op_type == "QuantizeLinear" and k == 0 and elem not in int8:
                zp = n.input[2] if len(n.input) > 2 and n.input[2] else None
                elem = consts.get(zp, TensorProto.UINT8) if zp else TensorProto.UINT8
            if (n.op_type == "QuantizeLinear" and k == 0) or elem in int8:
                names.append(name)
                if name not in present:
                    model.graph.output.append(helper.make_tensor_value_info(name, elem, None))
    onnx.save(model, path)
    return names


def compare_int8(names, ref_dir, dump_dir):
    """Element mismatches of the int8 tensors `names` between ORT and qatc's dump."""
    ref, got = read_index(ref_dir), read_index(dump_dir)
    s = {"tensors": len(names), "elements": 0, "differ": 0, "max_lsb": 0, "tensors_differ": 0,
         "exact_prefix": 0, "first_differ": None, "missing": [], "problems": []}
    prefix_open = True
    for name in names:
        if name not in ref or name not in got:
            s["missing"].append(name)
            continue
        a, b = np.load(ref[name]), np.load(got[name])
        if a.dtype != b.dtype or a.shape != b.shape:
            s["problems"].append(f"{name}: qatc {b.dtype}{list(b.shape)}, "
                                 f"ORT {a.dtype}{list(a.shape)}")
            prefix_open = False
            continue
        diff = np.abs(a.astype(np.int32) - b.astype(np.int32))
        n_diff = int(np.count_nonzero(diff))
        s["elements"] += a.size
        s["differ"] += n_diff
        if n_diff:
            s["tensors_differ"] += 1
            s["max_lsb"] = max(s["max_lsb"], int(diff.max()))
            if s["first_differ"] is None:
                s["first_differ"] = (names.index(name), name, n_diff, a.size)
            prefix_open = False
        elif prefix_open:
            s["exact_prefix"] += 1
    return s


class Runner:
    def __init__(self, args):
        self.args = args
        self.rows = []       # (model, variant, comparison, metrics or None, limit, ok)
        self.failures = []
        self.int8 = []       # (model, stats)
        self.times = []      # (model, seconds)

    def fail(self, msg):
        self.failures.append(msg)

    def row(self, model, variant, comparison, m, limit="", ok=None):
        self.rows.append((model, variant, comparison, m, limit, ok))

    def ort(self, model_path, out_dir, inputs, opt):
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        cmd = ["node", os.path.join(self.args.ort, "run.js"), model_path, out_dir]
        if not opt:
            cmd.append("--no-opt")
        cmd += [f"{k}={v}" for k, v in inputs.items()]
        rc, _, err, secs = run(cmd)
        return (None if rc else load_outputs(out_dir)), err, secs

    def qatc(self, model_path, out, inputs, fp64=False, dump=None):
        cmd = [self.args.qatc, "eval", model_path, "-o", out]
        cmd += [f"--input={k}={v}" for k, v in inputs.items()]
        if fp64:
            cmd.append("--fp64")
        if dump:
            if os.path.isdir(dump):
                shutil.rmtree(dump)
            cmd.append(f"--dump-tensors={dump}")
        rc, _, err, secs = run(cmd)
        return (None if rc else load_outputs(out)), err, secs

    def check_model(self, label, path, inputs):
        """Runs and compares one model; `inputs` maps input names to .npy files."""
        start = time.time()
        a = self.args
        model = onnx.load(path)
        variant = "qdq" if is_qdq(model) else "float"
        exact = os.path.splitext(os.path.basename(path))[0] in a.exact
        work = os.path.join(a.work, label)
        os.makedirs(work, exist_ok=True)
        print(f"== {label} ({variant}{', exact' if exact else ''})", flush=True)

        dump = os.path.join(work, "qatc_dump") if variant == "qdq" else None
        ort0, err0, t0 = self.ort(path, os.path.join(work, "ort_noopt"), inputs, opt=False)
        ort1, err1, t1 = self.ort(path, os.path.join(work, "ort_opt"), inputs, opt=True)
        q32, e32, t32 = self.qatc(path, os.path.join(work, "qatc_fp32.npz"), inputs, dump=dump)
        dump64 = os.path.join(work, "qatc_dump_fp64") if variant == "qdq" else None
        q64, e64, t64 = self.qatc(path, os.path.join(work, "qatc_fp64.npz"), inputs, fp64=True,
                                  dump=dump64)
        print(f"   ORT no-opt {t0:.1f} s, ORT opt {t1:.1f} s, qatc eval {t32:.1f} s, "
              f"qatc eval --fp64 {t64:.1f} s", flush=True)
        for res, err, what in ((ort0, err0, "ORT no-opt"), (ort1, err1, "ORT opt"),
                               (q32, e32, "qatc eval"), (q64, e64, "qatc eval --fp64")):
            if res is None:
                self.fail(f"{label}: {what} failed: {err.strip()[-2000:]}")
        if q32 is None or ort0 is None:
            self.times.append((label, time.time() - start))
            return

        def outputs(ref, got, what, same_dtype=True):
            """Pairs of (output name, ref, got) with matching shapes (and dtypes)."""
            pairs = []
            for name, r in ref.items():
                g = got.get(name)
                if g is None:
                    self.fail(f"{label}: {what}: output '{name}' missing")
                elif g.shape != r.shape:
                    self.fail(f"{label}: {what}: output '{name}' shape {list(g.shape)}, "
                              f"expected {list(r.shape)}")
                elif same_dtype and g.dtype != r.dtype:
                    self.fail(f"{label}: {what}: output '{name}' dtype {g.dtype}, "
                              f"expected {r.dtype}")
                else:
                    pairs.append((name, r, g))
            return pairs

        multi = len(ort0) > 1
        tag = (lambda n: f" [{n}]") if multi else (lambda n: "")
        floor = {}
        if variant == "qdq" and q64 is not None:
            for name, r, g in outputs(q64, q32, "qatc fp32 vs fp64", False):
                floor[name] = metrics(r, g)
                self.row(label, variant, "floor: qatc fp32 vs fp64" + tag(name), floor[name],
                         "(noise floor)")
        ort_gap = {}
        if ort1 is not None:
            for name, r, g in outputs(ort0, ort1, "ORT opt vs ORT no-opt"):
                ort_gap[name] = metrics(r, g)
        for ref, what in ((ort0, "ORT no-opt"), (ort1, "ORT opt")):
            if ref is None:
                continue
            for name, r, g in outputs(ref, q32, f"qatc vs {what}"):
                m = metrics(r, g)
                comparison = f"qatc fp32 vs {what}" + tag(name)
                if variant == "float":
                    ok = m["peak_rel"] <= FLOAT_REL
                    limit = f"max|d| <= {FLOAT_REL:g} max|ref| (is {m['peak_rel']:.2e})"
                elif exact and what == "ORT no-opt":
                    ok = m["max_abs"] <= EXACT_FLOAT_ATOL
                    limit = f"max|d| <= {EXACT_FLOAT_ATOL:g}"
                elif name in floor:
                    gap = ort_gap.get(name) if what == "ORT opt" else None
                    rr, cos = band(floor[name], gap)
                    tight = TIGHT_RANGE_REL.get(os.path.splitext(os.path.basename(path))[0])
                    if tight is not None and what == "ORT no-opt":
                        rr = min(rr, tight)
                    ok = m["range_rel"] <= rr and m["cosine"] >= cos
                    limit = (f"rr <= {100 * rr:.2f}%, cos >= {cos:.5f}"
                             + (" (band + ORT's own opt gap)" if gap else ""))
                else:
                    ok, limit = False, "no noise floor (qatc --fp64 failed)"
                if not ok and what == "ORT opt" and variant == "qdq" and a.ort_opt_info:
                    ok, limit = None, limit + " EXCEEDED (not asserted: --ort-opt-info)"
                self.row(label, variant, comparison, m, limit, ok)
                if ok is False:
                    self.fail(f"{label}: {comparison}: cosine {m['cosine']:.6f}, range-rel "
                              f"{100 * m['range_rel']:.3f}%, max abs {m['max_abs']:.3g} "
                              f"exceeds {limit}")
        for name, m in ort_gap.items():
            self.row(label, variant, "ORT opt vs ORT no-opt" + tag(name), m,
                     "(info: ORT's own optimizer effect)")
        if variant == "float" and q64 is not None:
            for name, r, g in outputs(ort0, q64, "qatc fp64 vs ORT no-opt", False):
                self.row(label, variant, "qatc fp64 vs ORT no-opt" + tag(name), metrics(r, g),
                         "(info)")

        if variant == "qdq":
            qpath = os.path.join(work, "with_int8_outputs.onnx")
            names = with_int8_outputs(onnx.load(path), qpath)
            qdir = os.path.join(work, "ort_noopt_int8")
            ortq, errq, tq = self.ort(qpath, qdir, inputs, opt=False)
            if ortq is None:
                self.fail(f"{label}: ORT no-opt with int8 outputs failed: {errq.strip()[-2000:]}")
            else:
                s = compare_int8(names, qdir, dump)
                s["floor"] = compare_int8(names, dump64, dump) if q64 is not None else None
                self.int8.append((label, s))
                for name in s["missing"]:
                    self.fail(f"{label}: int8 tensor '{name}' missing from the ORT outputs "
                              "or qatc's dump")
                for p in s["problems"]:
                    self.fail(f"{label}: int8 tensor {p}")
                if exact and (s["differ"] or s["missing"] or s["problems"]):
                    self.fail(f"{label}: {s['differ']} of {s['elements']} int8 elements differ "
                              f"from ORT no-opt (max {s['max_lsb']} LSB, first in "
                              f"{s['first_differ'] and s['first_differ'][1]}); must be 0")
            if not a.keep_dumps:
                for d in (dump, dump64, qdir):
                    shutil.rmtree(d, ignore_errors=True)
        self.times.append((label, time.time() - start))

    def report(self):
        print()
        hdr = (f"{'model':<26} {'variant':<7} {'comparison':<30} {'cosine':>10} "
               f"{'range-rel %':>11} {'max abs':>10}  limit / verdict")
        print(hdr)
        print("-" * len(hdr))
        for model, variant, comparison, m, limit, ok in self.rows:
            verdict = "" if ok is None else ("ok" if ok else "FAIL")
            print(f"{model:<26} {variant:<7} {comparison:<30} {m['cosine']:>10.6f} "
                  f"{100 * m['range_rel']:>11.4f} {m['max_abs']:>10.3g}  {limit} {verdict}")
        if self.int8:
            print()
            print("int8 tensors (every QuantizeLinear output), qatc fp32 against ORT no-opt; "
                  "floor: qatc fp32 against qatc fp64")
            hdr = (f"{'model':<26} {'tensors':>7} {'differ':>6} {'elements':>10} {'differ':>9} "
                   f"{'share %':>8} {'max LSB':>7} {'exact':>5} | {'floor %':>8} {'LSB':>4}  "
                   f"first differing tensor vs ORT (graph order)")
            print(hdr)
            print("-" * len(hdr))
            for model, s in self.int8:
                share = 100.0 * s["differ"] / s["elements"] if s["elements"] else 0.0
                f = s.get("floor")
                floor = (f"{100.0 * f['differ'] / f['elements'] if f['elements'] else 0.0:>8.4f} "
                         f"{f['max_lsb']:>4}") if f else f"{'-':>8} {'-':>4}"
                first = "-" if s["first_differ"] is None else (
                    f"#{s['first_differ'][0]} {s['first_differ'][1]} "
                    f"({s['first_differ'][2]}/{s['first_differ'][3]})")
                print(f"{model:<26} {s['tensors']:>7} {s['tensors_differ']:>6} "
                      f"{s['elements']:>10} {s['differ']:>9} {share:>8.4f} {s['max_lsb']:>7} "
                      f"{s['exact_prefix']:>5} | {floor}  {first}")
            print("(exact: leading int8 tensors, in graph order, that are bit-identical)")
        print()
        for label, secs in self.times:
            print(f"time {label}: {secs:.1f} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qatc", required=True)
    ap.add_argument("--models", required=True, help="directory with the generator's manifest.json")
    ap.add_argument("--work", required=True)
    ap.add_argument("--ort", required=True, help="directory of the ORT node scripts")
    ap.add_argument("--extra", action="append", default=[],
                    help="another model: model.onnx:input_name=input.npy")
    ap.add_argument("--exact", action="append", default=None,
                    help="model (file name without .onnx) whose int8 tensors must match ORT "
                         "no-opt bit for bit (default: digits_qdq)")
    ap.add_argument("--optional-dir", help="directory with more generated models "
                    "(<name>_float.onnx, <name>_qdq.onnx)")
    ap.add_argument("--optional-models", default="",
                    help="comma-separated names of models in --optional-dir to run")
    ap.add_argument("--only", action="append", default=[],
                    help="run only these models (manifest/optional names or extra file names)")
    ap.add_argument("--ort-opt-info", action="store_true",
                    help="report, but do not assert, the band for Q/DQ models against ORT with "
                         "optimizations (ORT then fuses Q/DQ into integer kernels that round "
                         "biases to int32 and requantize differently)")
    ap.add_argument("--keep-dumps", action="store_true", help="keep qatc's tensor dumps")
    args = ap.parse_args()
    args.exact = set(args.exact if args.exact is not None else ["digits_qdq"])

    start = time.time()
    if not os.path.isdir(os.path.join(args.ort, "node_modules")):
        print(f"FAIL: ONNX Runtime is not installed in {args.ort}; run scripts/setup-ort.sh")
        return 1
    os.makedirs(args.work, exist_ok=True)
    with open(os.path.join(args.models, "manifest.json")) as f:
        manifest = json.load(f)

    jobs = []  # (label, path, {input name: npy})

    def add_generated(name, directory):
        if args.only and name not in args.only:
            return
        paths = [os.path.join(directory, f"{name}_{v}.onnx") for v in ("float", "qdq")]
        entry = manifest["models"].get(name) if directory == args.models else None
        if entry:
            paths = [os.path.join(directory, entry[v]["file"]) for v in ("float", "qdq")]
        for path in paths:
            if not os.path.exists(path):
                jobs.append((os.path.basename(path), path, None))
                continue
            model = onnx.load(path, load_external_data=False)
            inputs = {}
            for input_name, dims in graph_inputs(model):
                # Seeded standard-normal input, as in generated_models.py; the
                # same data for the float and Q/DQ variants of a model.
                npy = os.path.join(args.work, f"{name}.{input_name}.npy")
                rng = np.random.default_rng(0)
                np.save(npy, rng.standard_normal(dims).astype(np.float32))
                inputs[input_name] = npy
            jobs.append((os.path.splitext(os.path.basename(path))[0], path, inputs))

    for name in sorted(manifest["models"]):
        add_generated(name, args.models)
    for spec in args.extra:
        path, _, bindings = spec.partition(":")
        label = os.path.splitext(os.path.basename(path))[0]
        if args.only and label not in args.only:
            continue
        inputs = {}
        for b in filter(None, bindings.split(",")):
            input_name, _, npy = b.partition("=")
            inputs[input_name] = os.path.abspath(npy)
        jobs.append((label, path, inputs))
    if args.optional_models:
        if not args.optional_dir:
            ap.error("--optional-models needs --optional-dir")
        for name in filter(None, args.optional_models.split(",")):
            add_generated(name.strip(), args.optional_dir)

    r = Runner(args)
    for label, path, inputs in jobs:
        if inputs is None:
            r.fail(f"{label}: {path} does not exist")
            continue
        r.check_model(label, path, inputs)
    r.report()
    for f in r.failures:
        print("FAIL:", f)
    checks = sum(1 for row in r.rows if row[5] is not None)
    failed = sum(1 for row in r.rows if row[5] is False)
    print(f"ORT differential: {len(jobs)} models, {checks} checked comparisons, {failed} out of "
          f"bounds, {len(r.failures)} failures ({time.time() - start:.0f} s)")
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
