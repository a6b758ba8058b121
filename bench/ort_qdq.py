#!/usr/bin/python3
"""ONNX Runtime's static Q/DQ recipe applied to a float ONNX model: the
"ORT int8 on ORT's own u8 export" contender of bench/plan_bench.py.

  /usr/bin/python3 bench/ort_qdq.py float.onnx -o out.onnx [--batches 4] \\
      [--per-tensor] [--seed 0]

ORT's quantizer (`onnxruntime.quantization.quantize_static`) is Python only
and cannot be installed here: pip has no index, Debian packages no
onnxruntime, and npm's onnxruntime-node has no quantizer. So this script
writes what `quantize_static(quant_format=QDQ, activation_type=QUInt8,
weight_type=QInt8, per_channel=True, calibrate_method=MinMax)` writes, from
its documented rules, and calibrates with ORT itself (tests/ort/minmax.js):

* Calibration: min and max of every float tensor over `--batches` seeded
  standard-normal batches (dynamic dimensions 1), run by ORT on the model
  with every float tensor made a graph output.
* Activations: uint8, asymmetric, per tensor. The range is widened to
  contain 0; scale = (max - min) / 255, zero point = round(-min / scale).
  Softmax outputs take the range [0, 1].
* Weights (input 1 of Conv, ConvTranspose, Gemm and MatMul when it is an
  initializer): int8, symmetric in [-127, 127], scale = max|w| / 127, per
  output channel (per tensor with --per-tensor, ORT's default), read through
  DequantizeLinear. Biases: int32 with scale s_input * s_weight.
* Which tensors: every float input and output of Conv, ConvTranspose, Gemm,
  MatMul, Add, Mul, Sigmoid, LeakyRelu, GlobalAveragePool, Concat, Softmax,
  Where and ArgMax (ORT's default op types). Data movement (Reshape,
  Transpose, Squeeze, Unsqueeze, MaxPool, AveragePool, Resize, Slice, Split,
  Pad, Gather) is quantized only when its input is, and its outputs share
  the input's scale and zero point. A Relu or Clip whose input is quantized
  and read by it alone is removed: its producer writes its output and takes
  its range, as ORT's QDQRemovableActivation does.
* Every reader of a quantized tensor (quantized op or not) reads the one
  DequantizeLinear after its QuantizeLinear.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Every float input and output is quantized (ORT's QDQOperatorBase).
QUANTIZED_OPS = {"Add", "Mul", "Sigmoid", "LeakyRelu", "GlobalAveragePool", "Concat",
                 "Softmax", "Where", "ArgMax"}
# Input 0 and the output are activations, input 1 a weight when constant.
WEIGHTED_OPS = {"Conv", "ConvTranspose", "Gemm", "MatMul"}
# Quantized only behind a quantized input; outputs share its parameters.
DIRECT_OPS = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "MaxPool", "AveragePool",
              "Resize", "Slice", "Split", "Pad", "Gather"}
REMOVABLE_OPS = {"Relu", "Clip"}


def act_qparams(lo, hi):
    """uint8 asymmetric scale and zero point of the range [lo, hi]."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi == lo:
        return np.float32(1.0), np.uint8(0)
    scale = np.float32((hi - lo) / 255.0)
    return scale, np.uint8(min(max(round(-lo / float(scale)), 0), 255))


def weight_qparams(w, axis):
    """int8 symmetric scales (per `axis`, or per tensor for None) and values."""
    red = tuple(d for d in range(w.ndim) if d != axis) if axis is not None else None
    amax = np.abs(w).max(axis=red)
    scale = np.where(amax > 0, amax * 2 / np.float32(254.0), 1.0).astype(np.float32)
    shape = [1] * w.ndim
    if axis is not None:
        shape[axis] = -1
    q = np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return scale, q


def calibrate(model, tensors, batches):
    """{tensor: (min, max)} over `batches` ({input name: array} each), by ORT."""
    import onnx
    from onnx import helper
    aug = onnx.ModelProto()
    aug.CopyFrom(model)
    g = aug.graph
    have = {o.name for o in g.output}
    inputs = {i.name for i in g.input}
    for t in tensors:
        if t not in have and t not in inputs:
            g.output.append(helper.make_tensor_value_info(t, onnx.TensorProto.FLOAT, None))
    ranges = {}
    for name in inputs & set(tensors):
        vals = [b[name] for b in batches]
        ranges[name] = (min(float(v.min()) for v in vals), max(float(v.max()) for v in vals))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "calibrate.onnx")
        onnx.save(aug, path)
        feeds = []
        for k, b in enumerate(batches):
            for name, v in b.items():
                f = os.path.join(tmp, f"in{k}_{len(feeds)}.npy")
                np.save(f, v)
                feeds.append(f"{name}={f}")
        r = subprocess.run(["node", os.path.join(ROOT, "tests", "ort", "minmax.js"), path]
                           + feeds, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"calibration failed: {r.stderr.strip()}")
        ranges.update({k: tuple(v) for k, v in json.loads(r.stdout).items()})
    return ranges


def ort_qdq(model, batches=4, per_channel=True, seed=0, log=None):
    """The Q/DQ model (onnx.ModelProto) of float `model` (see the module doc)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.shape_inference.infer_shapes(model)
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    float_t = {t.name for t in g.initializer if t.data_type == onnx.TensorProto.FLOAT}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            float_t.add(vi.name)
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    graph_outputs = {o.name for o in g.output}

    # What to quantize, in graph order: tensor -> ("act",) | ("same", source)
    # | ("weight", axis). Biases per node (an exporter may share one bias
    # initializer between nodes of other scales): node index -> (bias,
    # input, weight).
    plan, removed, out_rename, biases = {}, set(), {}, {}

    def act(t):
        if t and t in float_t and t not in plan:
            plan[t] = ("act",)

    for idx, n in enumerate(g.node):
        op = n.op_type
        if op in WEIGHTED_OPS:
            act(n.input[0])
            w = n.input[1] if len(n.input) > 1 else ""
            if w in inits and w in float_t:
                rank = len(inits[w].dims)
                attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
                axis = {"Conv": 0, "ConvTranspose": 1, "MatMul": rank - 1,
                        "Gemm": 0 if attrs.get("transB", 0) else 1}[op]
                plan[w] = ("weight", axis if per_channel else None)
                if len(n.input) > 2 and n.input[2] in inits:
                    biases[idx] = (n.input[2], n.input[0], w)
            else:
                act(w)
            act(n.output[0])
        elif op in QUANTIZED_OPS:
            for t in list(n.input) + list(n.output):
                act(t)
        elif op in DIRECT_OPS:
            if n.input[0] in plan:
                for o in n.output:
                    if o in float_t:
                        plan.setdefault(o, ("same", n.input[0]))
        elif op in REMOVABLE_OPS:
            x, y = n.input[0], n.output[0]
            if x not in plan:
                continue
            if (plan[x] == ("act",) and x not in graph_outputs and x not in inits
                    and len(consumers.get(x, [])) == 1):
                removed.add(idx)
                out_rename[x] = y
                del plan[x]
            plan[y] = ("act",)

    # Calibrate the activations that get their own range.
    acts = [t for t, p in plan.items() if p == ("act",) and t not in inits]
    rng = np.random.default_rng(seed)
    shapes = {}
    for i in g.input:
        if i.name in inits:
            continue
        if i.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            raise ValueError(f"input {i.name}: only float inputs can be calibrated")
        shapes[i.name] = [d.dim_value if d.dim_value > 0 else 1
                          for d in i.type.tensor_type.shape.dim]
    data = [{k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
            for _ in range(batches)]
    if log:
        log(f"calibrating {len(acts)} tensors on {batches} batches")
    ranges = calibrate(model, acts, data)
    softmax_out = {n.output[0] for n in g.node if n.op_type == "Softmax"}

    new_inits, qparams = [], {}

    def add_init(name, array):
        new_inits.append(numpy_helper.from_array(array, name))
        return name

    def params_of(t):
        """(scale name, zero point name, scale, zero point) of activation t."""
        if t in qparams:
            return qparams[t]
        p = plan[t]
        if p[0] == "same":
            qparams[t] = params_of(p[1])
            return qparams[t]
        if t in inits:
            v = numpy_helper.to_array(inits[t])
            lo, hi = float(v.min()), float(v.max())
        elif t in softmax_out:
            lo, hi = 0.0, 1.0
        else:
            lo, hi = ranges[t]
        s, z = act_qparams(lo, hi)
        qparams[t] = (add_init(f"{t}_scale", np.array(s)),
                      add_init(f"{t}_zero_point", np.array(z)), s, z)
        return qparams[t]

    use, head = {}, []                     # tensor -> name its readers read

    def quantize(t, into):
        """Q -> DQ of activation t; readers read the DQ output."""
        s, z = params_of(t)[:2]
        src = t
        if t in graph_outputs:             # the graph output stays the DQ's
            src = f"{t}_float"
        into.append(helper.make_node("QuantizeLinear", [src, s, z], [f"{t}_QuantizeLinear_Output"],
                                     name=f"{t}_QuantizeLinear"))
        into.append(helper.make_node("DequantizeLinear", [f"{t}_QuantizeLinear_Output", s, z],
                                     [t if t in graph_outputs else f"{t}_DequantizeLinear_Output"],
                                     name=f"{t}_DequantizeLinear"))
        use[t] = into[-1].output[0]
        return src

    weight_scales = {}                     # weight -> its scales, for its biases
    for t, p in plan.items():              # constants: quantized initializers
        if t not in inits:
            continue
        v = numpy_helper.to_array(inits[t]).astype(np.float32)
        if p[0] == "weight":
            s, q = weight_qparams(v, p[1])
            weight_scales[t] = s
            zp = np.zeros(s.shape, np.int8)
            axis = p[1]
        else:
            sname, zname, s, z = params_of(t)
            q = np.clip(np.round(v / s) + int(z), 0, 255).astype(np.uint8)
            head.append(helper.make_node("DequantizeLinear", [add_init(f"{t}_quantized", q),
                                                              sname, zname],
                                         [f"{t}_DequantizeLinear_Output"],
                                         name=f"{t}_DequantizeLinear"))
            use[t] = head[-1].output[0]
            continue
        kw = {"axis": axis} if axis is not None and s.ndim else {}
        head.append(helper.make_node(
            "DequantizeLinear", [add_init(f"{t}_quantized", q), add_init(f"{t}_scale", s),
                                 add_init(f"{t}_zero_point", zp)],
            [f"{t}_DequantizeLinear_Output"], name=f"{t}_DequantizeLinear", **kw))
        use[t] = head[-1].output[0]

    # Biases: int32 with scale s_input * s_weight, one per node.
    readers = {}
    for b, _, _ in biases.values():
        readers[b] = readers.get(b, 0) + 1
    bias_use = {}
    for idx, (b, x, w) in biases.items():
        t = b if readers[b] == 1 else f"{b}_{idx}"
        v = numpy_helper.to_array(inits[b]).astype(np.float64)
        s = (np.float32(params_of(x)[2]) * weight_scales[w]).astype(np.float32)
        s = np.where(s > 0, s, np.float32(1.0)).astype(np.float32)
        q = np.round(v / s.astype(np.float64)).astype(np.int32)
        kw = {"axis": 0} if s.ndim else {}
        head.append(helper.make_node(
            "DequantizeLinear", [add_init(f"{t}_quantized", q), add_init(f"{t}_scale", s),
                                 add_init(f"{t}_zero_point", np.zeros(s.shape, np.int32))],
            [f"{t}_DequantizeLinear_Output"], name=f"{t}_DequantizeLinear", **kw))
        bias_use[idx] = head[-1].output[0]

    nodes = list(head)
    for i in g.input:
        if i.name in plan and i.name not in inits:
            quantize(i.name, nodes)
    for idx, n in enumerate(g.node):
        if idx in removed:
            continue
        for k, t in enumerate(n.input):
            if t in use:
                n.input[k] = use[t]
        if idx in bias_use:
            n.input[2] = bias_use[idx]
        outs = []
        for k, o in enumerate(n.output):
            o = out_rename.get(o, o)
            n.output[k] = o
            if o in plan:
                n.output[k] = quantize(o, outs)
        nodes.append(n)
        nodes.extend(outs)

    used = {t for n in nodes for t in n.input}
    kept = [t for t in g.initializer if t.name in used and t.name not in plan]
    del g.node[:]
    g.node.extend(nodes)
    del g.initializer[:]
    g.initializer.extend(kept + new_inits)
    del g.value_info[:]
    onnx.checker.check_model(model)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--batches", type=int, default=4, help="calibration batches (default 4)")
    ap.add_argument("--per-tensor", action="store_true",
                    help="per-tensor weight scales (ORT's per_channel=False)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import onnx
    q = ort_qdq(onnx.load(args.model), args.batches, not args.per_tensor, args.seed,
                log=lambda m: print(f"ort_qdq: {m}", file=sys.stderr))
    onnx.save(q, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
