#!/usr/bin/env python3
"""`qatc quantize` end to end: placement, calibration caches, ONNX Runtime.

For each float model (the generator's manifest, --extra models):

1. `qatc quantize --recipe trt` and `--recipe tf` with random calibration
   data (8 seeded samples). The written model must pass onnx.checker, keep
   the float model's graph inputs and outputs (names, and dynamic
   dimensions), and place Q/DQ as the recipe says (checked on the ONNX
   graph):
   - trt: the activation input of every Conv/Gemm/MatMul is a
     DequantizeLinear output, its weight is an int8 initializer read through
     a per-channel DequantizeLinear (axis = the output channel), biases stay
     float; every Add of two computed tensors reads at least one
     DequantizeLinear; every QuantizeLinear feeds only DequantizeLinear
     nodes; no Conv output is quantized directly.
   - tf: every Conv/Gemm/MatMul output chain (through Relu/Clip) ends in a
     QuantizeLinear; weights as for trt.
2. Calibration cache round trip: --write-calib-cache, then --calib-cache
   with that file, must write a byte-identical model; a cache naming a
   tensor the model does not have gets a warning naming it.
3. ONNX Runtime runs every written model; its output (optimizations off)
   must agree with `qatc eval` of the same Q/DQ model within the band of
   ort_differential.py.
4. --accuracy MODEL:DATA.npy:LABELS.npy:CALIB.npy: a float CNN trained on
   real data is quantized with every calibration method; at least one
   method must keep top-1 accuracy within 1 point of fp32 under ONNX Runtime
   and under qatc (the qat IR).

Run with Debian's /usr/bin/python3 (numpy, onnx). Exits 1 on failure.
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Checker as BaseChecker, manifest_models, run  # noqa: E402
from ort_differential import band, graph_inputs, load_outputs, metrics  # noqa: E402

METHODS = ("max", "percentile", "entropy", "mse")



class Checker(BaseChecker):
    def __init__(self, args):
        super().__init__(args)
        self.rows = []

    def ort(self, model, out_dir, inputs):
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        cmd = ["node", os.path.join(self.args.ort, "run.js"), model, out_dir, "--no-opt"]
        cmd += [f"{k}={v}" for k, v in inputs.items()]
        rc, _, err = run(cmd)
        if rc:
            raise RuntimeError(f"ONNX Runtime failed on {model}:\n{err[-2000:]}")
        return load_outputs(out_dir)

    # -- placement ---------------------------------------------------------

    def check_placement(self, label, recipe, float_model, model):
        g = model.graph
        producers = {o: n for n in g.node for o in n.output}
        consumers = {}
        for n in g.node:
            for i, name in enumerate(n.input):
                consumers.setdefault(name, []).append((n, i))
        inits = {t.name: t for t in g.initializer}
        # The float model's interface is kept, dynamic dimensions included.
        for a, b in ((float_model.graph.input, g.input), (float_model.graph.output, g.output)):
            sig = lambda vs: [(v.name, [d.dim_param or d.dim_value
                                        for d in v.type.tensor_type.shape.dim]) for v in vs
                              if v.name not in inits]
            if sig(a) != sig(b):
                self.fail(label, f"{recipe}: graph interface changed: {sig(a)} -> {sig(b)}")

        def op_of(name):
            n = producers.get(name)
            return n.op_type if n else ("initializer" if name in inits else "input")

        weighted = [n for n in g.node if n.op_type in ("Conv", "Gemm", "MatMul")]
        if not weighted:
            self.fail(label, "no Conv/Gemm/MatMul to check")
        for n in weighted:
            w = n.input[1]
            if op_of(w) != "DequantizeLinear":
                if n.op_type == "MatMul" and op_of(w) not in ("initializer",):
                    pass  # activation x activation: checked below for trt
                else:
                    self.fail(label, f"{recipe}: {n.name} weight is not dequantized")
                    continue
            dq = producers.get(w)
            if dq is not None and dq.input[0] in inits:
                t = inits[dq.input[0]]
                if t.data_type != onnx.TensorProto.INT8:
                    self.fail(label, f"{recipe}: {n.name} weight is not int8")
                scale = numpy_helper.to_array(inits[dq.input[1]])
                axis = next((a.i for a in dq.attribute if a.name == "axis"), 1)
                want = 0 if n.op_type == "Conv" else (
                    0 if any(a.name == "transB" and a.i for a in n.attribute) else 1)
                if scale.size > 1 and axis != want:
                    self.fail(label, f"{recipe}: {n.name} weight quantized along axis {axis}")
            if len(n.input) > 2 and n.input[2] and op_of(n.input[2]) != "initializer":
                self.fail(label, f"{recipe}: {n.name} bias is not a float initializer")
        if recipe == "trt":
            for n in weighted:
                if op_of(n.input[0]) != "DequantizeLinear":
                    self.fail(label, f"trt: {n.name} input is not quantized")
            # Every activation Q/DQ is an input Q/DQ of a quantizable op
            # (weighted ops, residual Adds, average pools, Concats).
            quantizable = {"Conv", "Gemm", "MatMul", "Add", "AveragePool",
                           "GlobalAveragePool", "Concat", "Transpose"}
            for n in g.node:
                if n.op_type == "QuantizeLinear":
                    users = {c.op_type for c, _ in consumers.get(n.output[0], [])}
                    if users - {"DequantizeLinear"}:
                        self.fail(label, f"trt: {n.name} feeds {users}")
                    for dq, _ in consumers.get(n.output[0], []):
                        readers = {c.op_type for c, _ in consumers.get(dq.output[0], [])}
                        if not readers or readers - quantizable:
                            self.fail(label, f"trt: {n.name} quantizes for {readers}")
                if n.op_type == "Add" and all(x not in inits and op_of(x) != "Constant"
                                              for x in n.input):
                    if not any(op_of(x) == "DequantizeLinear" for x in n.input):
                        self.fail(label, f"trt: residual {n.name} has no quantized input")
        else:
            for n in weighted:
                out = n.output[0]
                while True:
                    users = consumers.get(out, [])
                    bias_add = (len(users) == 1 and users[0][0].op_type == "Add" and
                                any(x in inits for x in users[0][0].input))
                    if len(users) == 1 and (bias_add or users[0][0].op_type in (
                            "Relu", "Clip", "BatchNormalization")):
                        out = users[0][0].output[0]
                        continue
                    break
                if out in {o.name for o in g.output}:
                    continue
                if not any(c.op_type == "QuantizeLinear" for c, _ in consumers.get(out, [])):
                    self.fail(label, f"tf: output of {n.name} ({out}) is not quantized")

    # -- per model ---------------------------------------------------------

    def check(self, label, path):
        print(f"== {label}", flush=True)
        work = os.path.join(self.args.work, label)
        if os.path.isdir(work):
            shutil.rmtree(work)
        os.makedirs(work)
        float_model = onnx.load(path)
        inputs = graph_inputs(float_model)
        rng = np.random.default_rng(0)
        if len(inputs) != 1:
            raise RuntimeError("the test calibrates single-input models")
        name, dims = inputs[0]
        calib = os.path.join(work, "calib.npy")
        np.save(calib, rng.standard_normal([8] + dims[1:]).astype(np.float32))
        x = os.path.join(work, "x.npy")
        np.save(x, rng.standard_normal(dims).astype(np.float32))
        for recipe in ("trt", "tf"):
            out = os.path.join(work, f"{recipe}.onnx")
            cache = os.path.join(work, f"{recipe}.cache")
            text, _ = self.qatc("quantize", path, "--recipe", recipe, "--calib", calib,
                                "-o", out, "--write-calib-cache", cache)
            model = onnx.load(out)
            onnx.checker.check_model(model)
            self.check_placement(label, recipe, float_model, model)
            # Cache round trip: the same scales give the same model.
            again = os.path.join(work, f"{recipe}_from_cache.onnx")
            self.qatc("quantize", path, "--recipe", recipe, "--calib-cache", cache, "-o", again)
            if open(out, "rb").read() != open(again, "rb").read():
                self.fail(label, f"{recipe}: the model written from the cache differs")
            # ONNX Runtime against qatc's reference evaluation.
            ort = self.ort(out, os.path.join(work, f"{recipe}_ort"), {name: x})
            ref_out, ref64_out = (os.path.join(work, f"{recipe}_{t}.npz") for t in ("ref", "ref64"))
            self.qatc("eval", out, f"--input={name}={x}", "-o", ref_out)
            self.qatc("eval", out, f"--input={name}={x}", "-o", ref64_out, "--fp64")
            ref, ref64 = load_outputs(ref_out), load_outputs(ref64_out)
            for k in ref:
                m = metrics(ref[k], ort[k])
                floor = metrics(ref64[k], ref[k])
                rr, cos = band(floor)
                ok = m["range_rel"] <= rr and m["cosine"] >= cos
                self.rows.append((label, recipe, m["range_rel"], m["cosine"], rr, ok))
                if not ok:
                    self.fail(label, f"{recipe}: ORT vs qatc {100 * m['range_rel']:.3f}% of "
                                     f"range, cosine {m['cosine']:.6f} (band {100 * rr:.2f}%)")
        # A cache with a tensor the model does not have: reported by name.
        cache = os.path.join(work, "trt.cache")
        extra = os.path.join(work, "extra.cache")
        with open(cache) as f, open(extra, "w") as g:
            g.write(f.read() + "no_such_tensor: 3c010204\n")
        _, err = self.qatc("quantize", path, "--calib-cache", extra,
                           "-o", os.path.join(work, "extra.onnx"))
        if "'no_such_tensor'" not in err:
            self.fail(label, "an unknown tensor in the cache is not reported by name")

    def check_accuracy(self, spec):
        model, data, labels, calib = spec.split(":")
        label = os.path.splitext(os.path.basename(model))[0]
        print(f"== {label}: accuracy on {data}", flush=True)
        work = os.path.join(self.args.work, label + "_accuracy")
        os.makedirs(work, exist_ok=True)
        y = np.load(labels)

        def qatc_acc(path, *extra):
            text, _ = self.qatc("eval", path, f"--input={data}", f"--labels={labels}",
                                "--batch-size=50", *extra)
            line = [l for l in text.splitlines() if l.startswith("top-1")][0]
            return float(line.split()[2].rstrip("%"))

        def ort_acc(path):
            name = graph_inputs(onnx.load(path))[0][0]
            out = self.ort(path, os.path.join(work, "ort"), {name: data})
            logits = next(iter(out.values()))
            return 100.0 * float(np.mean(logits.argmax(-1) == y))

        base_q, base_o = qatc_acc(model), ort_acc(model)
        print(f"   fp32: qatc {base_q:.2f}%  ORT {base_o:.2f}%", flush=True)
        best = None
        for m in METHODS:
            out = os.path.join(work, f"ptq_{m}.onnx")
            self.qatc("quantize", model, "--recipe", "trt", "--calib", calib,
                      "--calib-method", m, "-o", out)
            q, o = qatc_acc(out, "--stage=qat"), ort_acc(out)
            print(f"   {m:10s}: qatc (qat IR) {q:.2f}%  ORT {o:.2f}%", flush=True)
            self.rows.append((label, f"ptq {m}", q, o, base_q, True))
            if base_q - q <= 1.0 and base_o - o <= 1.0:
                best = best or m
        if not best:
            self.fail(label, "no calibration method keeps top-1 within 1 point of fp32")
        else:
            print(f"   within 1 point of fp32 with {best} calibration", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--qatc", required=True)
    p.add_argument("--ort", required=True, help="directory with run.js and node_modules")
    p.add_argument("--models", help="generator output directory (manifest.json)")
    p.add_argument("--extra", action="append", default=[], help="float model.onnx")
    p.add_argument("--accuracy", action="append", default=[],
                   help="model.onnx:x.npy:labels.npy:calib.npy")
    p.add_argument("--work", required=True)
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    c = Checker(a)
    models = []
    if a.models:
        models += manifest_models(a.models, "float")
    for path in a.extra:
        models.append((os.path.splitext(os.path.basename(path))[0], path))
    for label, path in models:
        try:
            c.check(label, path)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            c.fail(label, str(e))
    for spec in a.accuracy:
        try:
            c.check_accuracy(spec)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            c.fail(spec, str(e))
    print("\nmodel / recipe: ONNX Runtime against qatc's evaluation of the written model")
    for row in c.rows:
        if isinstance(row[2], float) and row[1] in ("trt", "tf"):
            label, recipe, rr, cos, b, ok = row
            print(f"  {label:28s} {recipe:4s} {100 * rr:8.4f}% of range  cosine {cos:.6f}  "
                  f"band {100 * b:.2f}%  {'ok' if ok else 'FAIL'}")
    return c.finish("qatc quantize: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
