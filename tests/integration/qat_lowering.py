#!/usr/bin/env python3
"""Precision preservation of the quantization passes on real Q/DQ models.

For every Q/DQ model (the generator's manifest, --extra models, and optionally
more generated models from --optional-dir):

1. `qatc compile --emit=qat` with a JSON precision report. Every Conv, Gemm
   and MatMul whose inputs the model quantizes must be an int8 qat op (the
   generated models quantize all of them), and every fp32 compute node, and
   every quantize/dequantize left standing, must carry a reason.
2. Per layer: the reference evaluation of the Q/DQ graph is dumped, then the
   qat IR is evaluated layer-wise (`--layerwise`: every op reads the
   reference's tensors). Each int8 tensor the qat IR produces must equal the
   reference's within 1 LSB on at most 0.1 % of its elements (the numerical
   contract in docs/Design.md); float tensors within 1e-4 of their range.
3. End to end, on --seeds inputs: the qat IR's outputs must be within the
   model's noise floor (the band ort_differential.py uses: the fp32-vs-fp64
   distance of the Q/DQ graph, doubled, at least 1 % of the range), the
   floor being the largest one over the inputs.
4. Classifiers with labelled test data (--labelled model:x.npy:y.npy) must
   give identical top-1 predictions in the qat IR and the Q/DQ graph.

Prints the int8 coverage table and exits 1 on failure. Run with Debian's
/usr/bin/python3 (numpy, onnx).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Checker as BaseChecker, manifest_models  # noqa: E402
from ort_differential import band, graph_inputs, load_outputs, metrics, read_index  # noqa: E402

MAX_LSB = 1
MAX_LSB_FRACTION = 0.001
FLOAT_RANGE_REL = 1e-4



class Checker(BaseChecker):
    def __init__(self, args):
        super().__init__(args)
        self.table = []

    def check(self, label, path, inputs):
        print(f"== {label}", flush=True)
        work = os.path.join(self.args.work, label)
        if os.path.isdir(work):
            shutil.rmtree(work)
        os.makedirs(work)
        qat = os.path.join(work, "model.qat.mlir")
        report_path = os.path.join(work, "report.json")
        start = time.time()
        self.qatc("compile", path, "--emit=qat", "-o", qat,
                  f"--precision-report={report_path}")
        compile_s = time.time() - start
        with open(report_path) as f:
            report = json.load(f)
        s = report["summary"]
        nodes = report["nodes"]
        fp32 = [n for n in nodes if n["compute"] and n["precision"] == "fp32"]
        for n in nodes:
            if n["precision"] in ("fp32", "quantize", "dequantize", "removed") \
                    and not n.get("reason"):
                self.fail(label, f"node {n['node']} ({n['precision']}) has no reason")
        if s["conv_gemm_matmul_int8"] != s["conv_gemm_matmul"]:
            left = [n["node"] for n in fp32 if n["op_type"] in ("Conv", "Gemm", "MatMul")]
            self.fail(label, f"{s['conv_gemm_matmul'] - s['conv_gemm_matmul_int8']} "
                             f"Conv/Gemm/MatMul not int8: {left[:5]}")

        ins = [f"--input={k}={v}" for k, v in inputs.items()]
        ref_dump, lw_dump = os.path.join(work, "ref"), os.path.join(work, "layerwise")
        self.qatc("eval", path, *ins, "-o", os.path.join(work, "ref.npz"),
                  f"--dump-tensors={ref_dump}")
        self.qatc("eval", qat, *ins, "-o", os.path.join(work, "lw.npz"),
                  f"--dump-tensors={lw_dump}", f"--layerwise={ref_dump}")

        # Per layer.
        ref_idx, lw_idx = read_index(ref_dump), read_index(lw_dump)
        common = [n for n in lw_idx if n in ref_idx]
        worst_frac, max_lsb, int8_tensors = 0.0, 0, 0
        for name in common:
            a, b = np.load(ref_idx[name]), np.load(lw_idx[name])
            if a.shape != b.shape or a.dtype != b.dtype:
                self.fail(label, f"{name}: qat {b.dtype}{list(b.shape)}, "
                                 f"reference {a.dtype}{list(a.shape)}")
                continue
            if a.dtype in (np.int8, np.uint8):
                int8_tensors += 1
                d = np.abs(a.astype(np.int32) - b.astype(np.int32))
                lsb = int(d.max()) if d.size else 0
                frac = float(np.count_nonzero(d)) / max(d.size, 1)
                max_lsb, worst_frac = max(max_lsb, lsb), max(worst_frac, frac)
                if lsb > MAX_LSB or frac > MAX_LSB_FRACTION:
                    self.fail(label, f"{name}: {lsb} LSB on {100 * frac:.3f}% of elements "
                                     f"(limit {MAX_LSB} LSB on {100 * MAX_LSB_FRACTION}%)")
            elif a.dtype in (np.float32, np.float64):
                m = metrics(a, b)
                if m["range_rel"] > FLOAT_RANGE_REL:
                    self.fail(label, f"{name}: float tensor off by {100 * m['range_rel']:.4f}% "
                                     f"of its range (limit {100 * FLOAT_RANGE_REL}%)")
        if int8_tensors == 0:
            self.fail(label, "no int8 tensor to compare layer by layer")

        # End to end, on several inputs: the noise floor (fp32 against fp64
        # of the same Q/DQ graph) varies a lot from one input to the next (a
        # single flip early in the network decides it), so the band comes
        # from the largest floor seen, and every input must stay within it.
        runs = []
        for seed, seed_inputs in enumerate(self.inputs_for_seeds(label, path, inputs, work)):
            sins = [f"--input={k}={v}" for k, v in seed_inputs.items()]
            outs = {}
            for tag, model, extra in (("ref", path, []), ("ref64", path, ["--fp64"]),
                                      ("qat", qat, [])):
                out = os.path.join(work, f"e2e{seed}_{tag}.npz")
                self.qatc("eval", model, *sins, "-o", out, *extra)
                outs[tag] = load_outputs(out)
            runs.append(outs)
        e2e = []
        for k in runs[0]["ref"]:
            floors = [metrics(r["ref64"][k], r["ref"][k]) for r in runs]
            floor = {"range_rel": max(f["range_rel"] for f in floors),
                     "cosine": min(f["cosine"] for f in floors)}
            rr, cos = band(floor)
            for seed, r in enumerate(runs):
                m = metrics(r["ref"][k], r["qat"][k])
                e2e.append((m["range_rel"], m["cosine"], rr))
                if m["range_rel"] > rr or m["cosine"] < cos:
                    self.fail(label, f"output {k}, input {seed}: {100 * m['range_rel']:.3f}% of "
                                     f"range, cosine {m['cosine']:.6f}; band {100 * rr:.2f}% / "
                                     f"{cos:.6f} (floor {100 * floor['range_rel']:.2f}%)")
        cp = s["compute_nodes"]
        self.table.append((label, s["conv_gemm_matmul_int8"], s["conv_gemm_matmul"],
                           cp.get("int8", 0) + cp.get("int8->fp32", 0), cp.get("fp32", 0),
                           int8_tensors, max_lsb, worst_frac,
                           max(r for r, _, _ in e2e), min(c for _, c, _ in e2e),
                           max(b for _, _, b in e2e), compile_s))

    def inputs_for_seeds(self, label, path, inputs, work):
        """The given inputs, then seeded random ones up to --seeds inputs."""
        yield inputs
        for seed in range(1, self.args.seeds):
            yield seeded_inputs(path, work, label, seed)

    def check_top1(self, label, path, x, y):
        """The qat IR's top-1 equals the Q/DQ graph's on every image, except
        where the fp32 and fp64 evaluations of the Q/DQ graph disagree with
        each other (a near tie of two logits inside the noise floor); there
        the qat IR must agree with one of the two."""
        print(f"== {label}: top-1 on {x}", flush=True)
        work = os.path.join(self.args.work, label + "_top1")
        os.makedirs(work, exist_ok=True)
        outs = {}
        for tag, extra in (("onnx", ["--stage=onnx"]), ("fp64", ["--stage=onnx", "--fp64"]),
                           ("qat", ["--stage=qat"])):
            out = os.path.join(work, f"{tag}.npz")
            text, _ = self.qatc("eval", path, f"--input={x}", *extra, "--batch-size=50",
                             "-o", out, f"--labels={y}")
            acc = [l for l in text.splitlines() if l.startswith("top-1")]
            print(f"   {tag}: {acc[0] if acc else '?'}", flush=True)
            outs[tag] = next(iter(load_outputs(out).values()))
        ref, ref64, got = (outs[t].argmax(-1) for t in ("onnx", "fp64", "qat"))
        differ = np.nonzero(ref != got)[0]
        noise = [int(i) for i in differ if ref[i] != ref64[i] and got[i] == ref64[i]]
        real = [int(i) for i in differ if int(i) not in noise]
        if real:
            self.fail(label, f"top-1 differs on {len(real)} of {ref.size} images "
                             f"(first: {real[:5]})")
        else:
            print(f"   identical top-1 on {ref.size - len(noise)} of {ref.size} images; "
                  f"{len(noise)} within the noise floor (fp32 and fp64 evaluations of the "
                  f"Q/DQ graph disagree there; the qat IR agrees with fp64): {noise[:5]}",
                  flush=True)


def seeded_inputs(path, work, label, seed=0):
    model = onnx.load(path, load_external_data=False)
    rng = np.random.default_rng(seed)
    files = {}
    for name, dims in graph_inputs(model):
        f = os.path.join(work, f"{label}_{name.replace('/', '_')}_{seed}.npy")
        np.save(f, rng.standard_normal(dims).astype(np.float32))
        files[name] = f
    return files


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--qatc", required=True)
    p.add_argument("--models", help="generator output directory (manifest.json)")
    p.add_argument("--optional-dir", action="append", default=[],
                   help="more *_qdq.onnx models (all checked)")
    p.add_argument("--extra", action="append", default=[],
                   help="model.onnx[:name=input.npy,...]")
    p.add_argument("--labelled", action="append", default=[],
                   help="model.onnx:x.npy:y.npy or model.onnx:data.npz (arrays x, y): "
                        "identical top-1 check")
    p.add_argument("--work", required=True)
    p.add_argument("--seeds", type=int, default=3,
                   help="inputs for the end-to-end check (default 3)")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    c = Checker(a)
    models = []
    if a.models:
        models += [(label, path, None) for label, path in manifest_models(a.models, "qdq")]
    for d in a.optional_dir:
        for f in sorted(os.listdir(d)):
            if f.endswith("_qdq.onnx"):
                models.append((f[:-5], os.path.join(d, f), None))
    for spec in a.extra:
        path, _, rest = spec.partition(":")
        inputs = dict(kv.split("=", 1) for kv in rest.split(",") if kv) or None
        models.append((os.path.splitext(os.path.basename(path))[0], path, inputs))
    for label, path, inputs in models:
        try:
            c.check(label, path, inputs or seeded_inputs(path, a.work, label))
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            c.fail(label, str(e))
    for spec in a.labelled:
        parts = spec.split(":")
        if len(parts) == 2:
            path, data = parts
            with np.load(data) as z:
                x, y = (os.path.join(a.work, os.path.basename(data) + f".{k}.npy") for k in "xy")
                np.save(x, z["x"])
                np.save(y, z["y"])
        else:
            path, x, y = parts
        try:
            c.check_top1(os.path.splitext(os.path.basename(path))[0], path, x, y)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            c.fail(path, str(e))

    print("\nint8 coverage and precision (per layer: qat op on the reference's inputs;"
          " end to end: against the Q/DQ graph)")
    hdr = ("model", "conv/gemm/mm int8", "compute int8", "compute fp32", "int8 tensors",
           "max LSB", "worst LSB%", "e2e range%", "e2e cosine", "band%", "compile s")
    print("  ".join(f"{h:>18}" if i == 0 else f"{h:>12}" for i, h in enumerate(hdr)))
    for (label, li, lt, ci, cf, nt, lsb, frac, rr, cos, b, secs) in c.table:
        print(f"{label:>18}  {f'{li}/{lt}':>12}  {ci:>12}  {cf:>12}  {nt:>12}  {lsb:>12}  "
              f"{100 * frac:>12.4f}  {100 * rr:>12.4f}  {cos:>12.6f}  {100 * b:>12.2f}  "
              f"{secs:>12.2f}")
    return c.finish(f"qat lowering: {len(c.table)} models, all within the contract")


if __name__ == "__main__":
    sys.exit(main())
