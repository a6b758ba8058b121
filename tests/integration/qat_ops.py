#!/usr/bin/env python3
"""Per-pattern exactness of qatc's int8 fusions on small Q/DQ models.

Every pattern the quantization passes fuse (qat.conv with its epilogue,
qat.matmul, qat.add/qat.mul, the pools, concat with per-branch requantize,
data movement with identity or requantize, uint8 with a non-zero zero point)
is built as a small TensorRT-style Q/DQ ONNX model with onnx.helper: opset 13,
a dynamic batch axis "N", seeded random float weights quantized symmetric
int8 per output channel (float initializer -> QuantizeLinear ->
DequantizeLinear, or int8 initializer -> DequantizeLinear), activations
quantized per tensor with zero point 0 (uint8 with a non-zero zero point in
the uint8 patterns), scales from the data range as a max calibrator sets them
(amax / 127 of a float run of the same graph without its Q/DQ, on separate
calibration samples). The graph output is the integer tensor of the final
QuantizeLinear, so results compare in LSBs. Each pattern also comes in
awkward sizes: channels that are not a multiple of 4/8/16, odd spatial
sizes, 1x1 maps. Beyond the single fusions, a few two-layer groups the
passes must handle (an activation after a Q/DQ pair folded into the conv, a
conv's int8 output as another conv's residual, a Q moved back across a
Concat into two convs) are checked end to end where the contract's 1-LSB
flip of the first layer cannot grow past one LSB of the output.

For every model:
1. `qatc compile --emit=qat --precision-report=r.json`: the pattern's nodes
   (compute node and what its epilogue absorbs) must be int8 (precision
   "int8" or "int8->fp32"), so the fusion really happened, and no compute
   node may be left in fp32.
2. On 1000 seeded random samples (fewer for the larger models), evaluated in
   one call thanks to the dynamic batch axis: `qatc eval` (the literal Q/DQ
   graph in fp32, the golden reference) against `qatc eval --stage=qat` (the
   fused int8 ops). The numerical contract (docs/Design.md): at most 1 LSB,
   on at most 0.1 % of the elements.
3. ONNX Runtime with graph optimizations disabled on the same data, a third
   literal evaluation: its agreement with the reference is reported, and it
   fails the pattern only beyond the same contract. Skipped with a message
   when tests/ort/node_modules is missing.

Prints a table (pattern, elements compared, max LSB, % differing, ORT max
LSB and % differing, fused as) and exits 1 on failure. Run with Debian's
/usr/bin/python3 (numpy, onnx).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import run  # noqa: E402
from ort_differential import load_outputs  # noqa: E402

MAX_LSB = 1
MAX_LSB_FRACTION = 0.001
# A meaningful output spreads over the integer range.
MIN_DISTINCT = 16
SAMPLES = 1000
CALIB_SAMPLES = 200
OPSET = 13
INT8_PRECISIONS = ("int8", "int8->fp32")


#===----------------------------------------------------------------------===#
# Model building
#===----------------------------------------------------------------------===#

class Graph:
    """Builds one pattern's model twice: in calibration mode (no Q/DQ on
    activations, every tensor a Q would read becomes a graph output so a
    float run measures its range) and in Q/DQ mode (with the scales that run
    produced). Weights are quantized in both modes' numbers the same way;
    in calibration mode they stay float."""

    def __init__(self, name, rng, calib, ranges=None):
        self.name, self.rng, self.calib = name, rng, calib
        self.ranges = ranges or {}
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.input_data = {}   # name -> (shape without batch, sampler)
        self.taps = {}         # key -> float tensor name (calibration)
        self.input_taps = {}   # key -> graph input name
        self.counter = 0

    def fresh(self, hint):
        self.counter += 1
        return f"{hint}_{self.counter}"

    # -- pieces ------------------------------------------------------------

    def input(self, name, dims, sampler=None):
        """A float graph input of shape ["N", *dims]."""
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", *dims]))
        self.input_data[name] = (tuple(dims),
                                 sampler or (lambda rng, shape: rng.standard_normal(shape)))
        return name

    def const(self, array, hint):
        name = self.fresh(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op, inputs, name=None, **attrs):
        name = name or self.fresh(op.lower())
        out = name + "_out"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def qparams(self, key, dtype=np.int8, zp=None, factor=1.0):
        """(scale, zero point) of activation `key` from its calibrated range:
        int8 symmetric amax/127 (int8 asymmetric when zp is 'asym'); uint8
        with a given zero point (the scale
        covers both sides of it), asymmetric (max - min)/255 when zp is
        'asym', or max/255 with no zero point input at all (uint8, zero
        point 0) when zp is 'none'."""
        lo, hi = self.ranges[key]
        if dtype == np.int8 and zp == "asym":
            lo, hi = min(lo, 0.0), max(hi, 0.0)
            scale = np.float32(factor * (hi - lo) / 255.0)
            return scale, np.int8(np.clip(np.round(-128 - lo / float(scale)), -128, 127))
        if dtype == np.int8:
            amax = max(abs(lo), abs(hi))
            return np.float32(factor * (amax if amax > 0 else 127.0) / 127.0), np.int8(0)
        if zp == "none":
            return np.float32(factor * (hi if hi > 0 else 255.0) / 255.0), None
        if zp == "asym":
            lo, hi = min(lo, 0.0), max(hi, 0.0)
            scale = np.float32(factor * (hi - lo) / 255.0)
            return scale, np.uint8(np.clip(np.round(-lo / float(scale)), 0, 255))
        pos, neg = max(hi, 0.0) / (255 - zp), max(-lo, 0.0) / zp
        return np.float32(factor * max(pos, neg)), np.uint8(zp)

    def quantize(self, x, key, dtype=np.int8, zp=None, factor=1.0, name=None):
        """QuantizeLinear of float tensor `x` with the scale calibrated for
        `key`; in calibration mode records `x` under `key` and returns it."""
        if self.calib:
            # A key quantized twice (a Q after a MaxPool with the input's
            # scale) keeps the range of its first tensor.
            if key not in self.taps and key not in self.input_taps:
                if any(i.name == x for i in self.inputs):
                    self.input_taps[key] = x
                else:
                    self.taps[key] = x
            return x
        return self.node("QuantizeLinear", [x, *self.scale_zp(key, dtype, zp, factor)], name=name)

    def dequantize(self, q, key, dtype=np.int8, zp=None, factor=1.0, name=None):
        if self.calib:
            return q
        return self.node("DequantizeLinear", [q, *self.scale_zp(key, dtype, zp, factor)],
                         name=name)

    def scale_zp(self, key, dtype, zp, factor):
        """The scale and zero point initializers of a Q/DQ (no zero point
        when zp is 'none')."""
        s, z = self.qparams(key, dtype, zp, factor)
        names = [self.const(s, key + "_scale")]
        if z is not None:
            names.append(self.const(z, key + "_zp"))
        return names

    def qdq(self, x, key, dtype=np.int8, zp=None, factor=1.0):
        q = self.quantize(x, key, dtype, zp, factor)
        return self.dequantize(q, key, dtype, zp, factor)

    def weight(self, w, axis, style="float", hint="w"):
        """Symmetric int8 weight, per channel along `axis` (amax/127 per
        channel) or per tensor (axis None): float initializer -> Q -> DQ
        ('float') or int8 initializer -> DQ ('int8'); the plain float weight
        in calibration mode."""
        w = np.asarray(w, np.float32)
        if self.calib:
            return self.const(w, hint)
        if axis is None:
            amax = np.abs(w).max()
            scale = np.float32(amax / 127.0 if amax > 0 else 1.0)
            bshape, attrs = [], {}
        else:
            red = tuple(d for d in range(w.ndim) if d != axis)
            amax = np.abs(w).max(axis=red)
            scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
            bshape = [1] * w.ndim
            bshape[axis] = -1
            attrs = {"axis": axis}
        zp = np.zeros(np.shape(scale), np.int8)
        self.last_weight_scale = scale
        s_name, z_name = self.const(scale, hint + "_scale"), self.const(zp, hint + "_zp")
        if style == "float":
            q = self.node("QuantizeLinear", [self.const(w, hint), s_name, z_name],
                          name=self.fresh("q_" + hint), **attrs)
        else:
            # numpy's round is half to even, as QuantizeLinear rounds.
            wq = np.clip(np.round(w / np.reshape(scale, bshape)), -127, 127).astype(np.int8)
            q = self.const(wq, hint + "_int8")
        return self.node("DequantizeLinear", [q, s_name, z_name],
                         name=self.fresh("dq_" + hint), **attrs)

    def bias(self, b, x_key, x_dtype=np.int8, x_zp=None):
        """An int32 bias read through a DequantizeLinear with scale
        s_x * s_w[c] (the last weight's scales), zero point 0; the float bias
        in calibration mode."""
        b = np.asarray(b, np.float32)
        if self.calib:
            return self.const(b, "bias")
        s_x, _ = self.qparams(x_key, x_dtype, x_zp)
        scale = (np.float32(s_x) * np.asarray(self.last_weight_scale, np.float32)
                 * np.ones(b.shape, np.float32)).astype(np.float32)
        bq = np.round(b / scale).astype(np.int32)
        return self.node("DequantizeLinear", [self.const(bq, "bias_int32"),
                                              self.const(scale, "bias_scale"),
                                              self.const(np.zeros(b.shape, np.int32), "bias_zp")],
                         name=self.fresh("dq_bias"), axis=0)

    def output(self, x, key, dtype=np.int8, zp=None, factor=1.0):
        """The final QuantizeLinear; its integer tensor is the graph output."""
        y = self.quantize(x, key, dtype, zp, factor, name="q_out")
        elem = TensorProto.INT8 if dtype == np.int8 else TensorProto.UINT8
        if not self.calib:
            self.outputs.append(helper.make_tensor_value_info(y, elem, None))
        return y

    def model(self):
        outputs = list(self.outputs)
        if self.calib:
            for t in dict.fromkeys(self.taps.values()):
                outputs.append(helper.make_tensor_value_info(t, TensorProto.FLOAT, None))
        g = helper.make_graph(self.nodes, self.name, self.inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="qat_ops.py")
        m.ir_version = 7
        # The outputs' shapes (with the dynamic "N") from shape inference.
        ig = onnx.shape_inference.infer_shapes(m).graph
        inferred = {v.name: v for v in list(ig.value_info) + list(ig.output)
                    if v.type.tensor_type.HasField("shape")}
        for o in m.graph.output:
            if o.name in inferred:
                o.type.CopyFrom(inferred[o.name].type)
        onnx.checker.check_model(m, full_check=True)
        return m


#===----------------------------------------------------------------------===#
# Patterns. Each builder takes a Graph and returns the names of the nodes
# that must end up int8 (the compute node first).
#===----------------------------------------------------------------------===#

def gained(gain):
    return lambda rng, s: gain * rng.standard_normal(s)


def uniform(lo, hi):
    return lambda rng, s: rng.uniform(lo, hi, s)


def conv_block(g, cin=8, cout=16, hw=(12, 12), k=3, strides=None, pads=None, dilations=None,
               group=1, bias="float", bn=False, act="relu", residual=None, residual_first=False,
               act2=None, wstyle="float", per_tensor_weight=False, in_dtype=np.int8, in_zp=None,
               out_dtype=np.int8, out_zp=None, r_dtype=np.int8, r_zp=None, in_sampler=None,
               out_factor=1.0, auto_pad=None, kernel_shape_attr=True):
    """DQ(x), DQ(w), b -> Conv (1-D/2-D/3-D) -> [BN] -> [act] -> [Add(DQ(r))]
    -> [act2] -> Q (out_factor < 1: a finer output scale that saturates).
    auto_pad: 'SAME_UPPER'/'SAME_LOWER'/'VALID' instead of pads;
    kernel_shape_attr=False leaves kernel_shape to the weight's shape.
    act/act2: None, 'relu', 'clip6', 'clip_lo' (Clip with a min only) or
    'clip_hi' (Clip with a max only, its min input empty).
    bias: None, 'float' (a float initializer) or 'int32' (int32 initializer
    -> DequantizeLinear with scale s_x * s_w[c]).
    residual: None, 'before_act' (Conv -> Add -> act), 'after_act' (Conv ->
    act -> Add -> act2), or 'identity' (the Add's other input is the conv's
    own dequantized input: a ResNet identity shortcut sharing one DQ)."""
    nd = len(hw)
    ks = (k,) * nd if isinstance(k, int) else tuple(k)
    strides = list(strides or (1,) * nd)
    dilations = list(dilations or (1,) * nd)
    if pads is None:
        pads = [ks[d] // 2 * dilations[d] for d in range(nd)] * 2
    pads = list(pads)
    x = g.input("x", [cin, *hw], in_sampler)
    xd = g.qdq(x, "x", in_dtype, in_zp)
    fan_in = cin // group * int(np.prod(ks))
    w = (g.rng.standard_normal((cout, cin // group, *ks)) / np.sqrt(fan_in)).astype(np.float32)
    wd = g.weight(w, None if per_tensor_weight else 0, wstyle)
    ins = [xd, wd]
    if bias:
        b = (0.3 * g.rng.standard_normal(cout)).astype(np.float32)
        ins.append(g.bias(b, "x", in_dtype, in_zp) if bias == "int32" else g.const(b, "bias"))
    attrs = dict(strides=strides, dilations=dilations, group=group)
    if kernel_shape_attr:
        attrs["kernel_shape"] = list(ks)
    if auto_pad:
        attrs["auto_pad"] = auto_pad
        if auto_pad == "VALID":
            pads = [0] * (2 * nd)
        else:  # SAME_*: output = ceil(input / stride)
            for d in range(nd):
                total = max(0, (-(-hw[d] // strides[d]) - 1) * strides[d]
                            + dilations[d] * (ks[d] - 1) + 1 - hw[d])
                small, large = total // 2, total - total // 2
                pads[d], pads[d + nd] = (small, large) if auto_pad == "SAME_UPPER" \
                    else (large, small)
    else:
        attrs["pads"] = pads
    y = g.node("Conv", ins, name="conv", **attrs)
    expect = ["conv"]
    out_hw = [(hw[d] + pads[d] + pads[d + nd] - dilations[d] * (ks[d] - 1) - 1) // strides[d] + 1
              for d in range(nd)]
    if bn:
        gamma = (g.rng.uniform(0.5, 2.0, cout) * g.rng.choice([-1, 1], cout)).astype(np.float32)
        beta = g.rng.standard_normal(cout).astype(np.float32)
        mean = (0.5 * g.rng.standard_normal(cout)).astype(np.float32)
        var = g.rng.uniform(0.2, 3.0, cout).astype(np.float32)
        y = g.node("BatchNormalization", [y] + [g.const(v, n) for v, n in
                   ((gamma, "gamma"), (beta, "beta"), (mean, "mean"), (var, "var"))],
                   name="bn", epsilon=1e-5)
        expect.append("bn")

    def activation(y, kind, name):
        if kind is None:
            return y
        expect.append(name)
        if kind == "relu":
            return g.node("Relu", [y], name=name)
        if kind == "clip6":
            return g.node("Clip", [y, g.const(np.float32(0), "lo"), g.const(np.float32(6), "hi")],
                          name=name)
        if kind == "clip_lo":
            return g.node("Clip", [y, g.const(np.float32(-0.25), "lo")], name=name)
        if kind == "clip_hi":
            return g.node("Clip", [y, "", g.const(np.float32(0.9), "hi")], name=name)
        raise ValueError(kind)

    if residual == "after_act":
        y = activation(y, act, "act")
    if residual:
        if residual == "identity":
            rd = xd
        else:
            r = g.input("r", [cout, *out_hw], gained(1.5))
            rd = g.qdq(r, "r", r_dtype, r_zp)
        y = g.node("Add", [rd, y] if residual_first else [y, rd], name="add")
        expect.append("add")
    if residual == "after_act":
        y = activation(y, act2, "act2")
    else:
        y = activation(y, act, "act")
    g.output(y, "y", out_dtype, out_zp, factor=out_factor)
    expect.append("q_out")
    return expect


def downsample_block(g, cin=6, cout=10, hw=(9, 9)):
    """ResNet's downsampling block: the residual is another conv's int8
    output. x -> conv_a (3x3 stride 2) -> Add(DQ(Q(conv_b(x)))) -> Relu -> Q
    with conv_b a 1x1 stride 2 conv whose output the recipe quantizes; the
    shared DQ(x) feeds both. Two int8 layers in a row: conv_b's result may
    flip by one LSB of its scale, which moves the sum by s_r / s_out of an
    output LSB; s_r <= s_out here (the sum's range is the wider one), so the
    end result stays within one LSB."""
    x = g.input("x", [cin, *hw])
    xd = g.qdq(x, "x")

    def conv(name, k):
        w = (g.rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
        b = g.const((0.3 * g.rng.standard_normal(cout)).astype(np.float32), "b")
        return g.node("Conv", [xd, g.weight(w, 0), b], name=name, kernel_shape=[k, k],
                      strides=[2, 2], pads=[k // 2] * 4)

    a = conv("conv_a", 3)
    r = g.qdq(conv("conv_b", 1), "r")
    y = g.node("Relu", [g.node("Add", [a, r], name="add")], name="relu")
    g.output(y, "y")
    return ["conv_a", "add", "relu", "conv_b", "q_out"]


def conv_qdq_act_block(g, act="relu", factor=1.0, cin=6, cout=10, hw=(9, 9)):
    """Conv -> Q(s) -> DQ(s) -> Relu/Clip -> Q(s * factor): the activation
    after a Q/DQ pair becomes an integer clamp, folded into the conv's
    epilogue (an identity or a requantize for the final Q).

    Two roundings in a row: the contract allows the conv's int8 result a
    1-LSB flip, and a requantize to a finer scale (factor < 1) would stretch
    that flip to more than one LSB of the output (factor 0.8: 1.25 LSB, seen
    as 2 after rounding), so the requantize here goes to a coarser scale
    (factor >= 1), where a 1-LSB flip stays within 1 LSB."""
    x = g.input("x", [cin, *hw])
    w = (g.rng.standard_normal((cout, cin, 3, 3)) / np.sqrt(cin * 9)).astype(np.float32)
    y = g.node("Conv", [g.qdq(x, "x"), g.weight(w, 0),
                        g.const((0.3 * g.rng.standard_normal(cout)).astype(np.float32), "b")],
               name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    y = g.qdq(y, "c")
    if act == "relu":
        y = g.node("Relu", [y], name="act")
    else:
        y = g.node("Clip", [y, g.const(np.float32(0), "lo"), g.const(np.float32(6), "hi")],
                   name="act")
    g.output(y, "c", factor=factor)
    return ["conv", "act"]


def gemm_block(g, k=24, m=20, trans_b=1, alpha=1.0, beta=1.0, bias="vector", wstyle="float",
               act=None):
    """DQ(a), DQ(w) -> Gemm (alpha, beta, C) -> [Relu] -> Q, per-channel
    weight along the output axis (0 with transB, 1 without). bias: None,
    'vector' ([M]), 'row' ([1, M]) or 'int32' (DQ of an int32 [M])."""
    a = g.input("a", [k])
    ad = g.qdq(a, "a")
    w = (g.rng.standard_normal((m, k) if trans_b else (k, m)) / np.sqrt(k)).astype(np.float32)
    ins = [ad, g.weight(w, 0 if trans_b else 1, wstyle)]
    if bias:
        c = (0.5 * g.rng.standard_normal(m)).astype(np.float32)
        if bias == "int32":
            ins.append(g.bias(c, "a"))
        else:
            ins.append(g.const(c if bias == "vector" else c.reshape(1, m), "c"))
    y = g.node("Gemm", ins, name="gemm", transB=trans_b, alpha=alpha, beta=beta)
    expect = ["gemm"]
    if act == "relu":
        y = g.node("Relu", [y], name="relu")
        expect.append("relu")
    g.output(y, "y")
    return expect + ["q_out"]


def matmul_weight_block(g, t=(5,), k=24, m=20, wstyle="int8", bias=True, scale=None,
                        transposed=False, residual=False, act=None, bias_first=False):
    """DQ(x[N,*t,K]) @ DQ(W[K,M], per column) -> [Add(bias[M])] -> [Mul(c)]
    -> [Add(DQ(r))] -> [Relu] -> Q. transposed: W stored [M,K] per row
    (axis 0) behind a Transpose, as a Linear is exported; scale: a scalar
    or a per-column vector [M]; bias_first: Add(bias, x @ W)."""
    t = list(t)
    x = g.input("x", [*t, k])
    xd = g.qdq(x, "x")
    if transposed:
        w = (g.rng.standard_normal((m, k)) / np.sqrt(k)).astype(np.float32)
        wd = g.node("Transpose", [g.weight(w, 0, wstyle)], name="w_t", perm=[1, 0])
    else:
        w = (g.rng.standard_normal((k, m)) / np.sqrt(k)).astype(np.float32)
        wd = g.weight(w, 1, wstyle)
    y = g.node("MatMul", [xd, wd], name="matmul")
    expect = ["matmul"]
    if bias:
        b = g.const((0.5 * g.rng.standard_normal(m)).astype(np.float32), "b")
        y = g.node("Add", [b, y] if bias_first else [y, b], name="bias_add")
        expect.append("bias_add")
    if scale is not None:
        y = g.node("Mul", [y, g.const(np.asarray(scale, np.float32), "s")], name="scale_mul")
        expect.append("scale_mul")
    if residual:
        r = g.input("r", [*t, m], gained(1.3))
        y = g.node("Add", [g.qdq(r, "r"), y], name="res_add")
        expect.append("res_add")
    if act == "relu":
        y = g.node("Relu", [y], name="relu")
        expect.append("relu")
    g.output(y, "y")
    return expect + ["q_out"]


def attention_block(g, heads=2, t=7, d=16, transpose_k=True, op="Mul", const_first=False):
    """Q.K^T of two activations: DQ(q) @ Transpose(DQ(k)) -> Mul(1/sqrt(d))
    (or Div(sqrt(d))) -> Q; const_first: Mul(1/sqrt(d), Q.K^T)."""
    q = g.input("q", [heads, t, d])
    qd = g.qdq(q, "q")
    if transpose_k:
        kk = g.input("k", [heads, t, d], gained(0.7))
        kd = g.node("Transpose", [g.qdq(kk, "k")], name="k_t", perm=[0, 1, 3, 2])
    else:
        kk = g.input("k", [heads, d, t], gained(0.7))
        kd = g.qdq(kk, "k")
    y = g.node("MatMul", [qd, kd], name="qk")
    if op == "Mul":
        c = g.const(np.float32(1.0 / np.sqrt(d)), "inv_sqrt_d")
        y = g.node("Mul", [c, y] if const_first else [y, c], name="scale")
    else:
        y = g.node("Div", [y, g.const(np.float32(np.sqrt(d)), "sqrt_d")], name="scale")
    g.output(y, "y")
    return ["qk", "scale", "q_out"]


def attention_av_block(g, heads=2, t=7, d=12):
    """softmax(.)·V: DQ(p) @ DQ(v) -> Q, p in [0, 1) quantized as a softmax
    output often is, uint8 by a QuantizeLinear without a zero point input,
    v int8."""
    p = g.input("p", [heads, t, t], uniform(0.0, 1.0))
    v = g.input("v", [heads, t, d])
    y = g.node("MatMul", [g.qdq(p, "p", np.uint8, "none"), g.qdq(v, "v")], name="av")
    g.output(y, "y")
    return ["av", "q_out"]


def eltwise_block(g, op="Add", a_dims=(8, 9, 9), b_dims=(8, 9, 9), b_gain=3.0, act=None,
                  dtype=np.int8, zp=None, square=False, b_dtype=None, b_zp=None):
    """DQ(a) op DQ(b) -> [Relu] -> Q, a and b with different scales (or
    DQ(a) op DQ(a) when square)."""
    a = g.input("a", list(a_dims), uniform(-0.7, 1.9) if dtype == np.uint8 else None)
    ad = g.qdq(a, "a", dtype, zp)
    if square:
        bd = ad
    else:
        b = g.input("b", list(b_dims), gained(b_gain))
        bd = g.qdq(b, "b", b_dtype or dtype, zp if b_dtype is None else b_zp)
    y = g.node(op, [ad, bd], name="op")
    expect = ["op"]
    if act == "relu":
        y = g.node("Relu", [y], name="relu")
        expect.append("relu")
    g.output(y, "y", dtype, zp)
    return expect + ["q_out"]


def avgpool_block(g, c=8, hw=(12, 12), k=3, stride=2, pads=(1, 1, 1, 1), count_include_pad=0,
                  ceil_mode=0, in_dtype=np.int8, in_zp=None, out_dtype=np.int8, out_zp=None,
                  in_sampler=None, auto_pad=None):
    """DQ -> AveragePool (1-D or 2-D; explicit pads or auto_pad) -> Q."""
    nd = len(hw)
    x = g.input("x", [c, *hw], in_sampler)
    padding = {"auto_pad": auto_pad} if auto_pad else {"pads": list(pads)}
    y = g.node("AveragePool", [g.qdq(x, "x", in_dtype, in_zp)], name="pool",
               kernel_shape=[k] * nd, strides=[stride] * nd, **padding,
               count_include_pad=count_include_pad, ceil_mode=ceil_mode)
    g.output(y, "y", out_dtype, out_zp)
    return ["pool", "q_out"]


def gap_block(g, c=16, hw=(7, 7), dtype=np.int8, zp=None, in_sampler=None):
    x = g.input("x", [c, *hw], in_sampler)
    y = g.node("GlobalAveragePool", [g.qdq(x, "x", dtype, zp)], name="pool")
    g.output(y, "y", dtype, zp)
    return ["pool", "q_out"]


def maxpool_block(g, c=8, hw=(12, 12), k=3, stride=2, pads=(1, 1, 1, 1), ceil_mode=0,
                  dtype=np.int8, zp=None, in_sampler=None, factor=1.0, global_pool=False):
    """DQ -> MaxPool (or GlobalMaxPool) -> Q with the same scale: an int8
    max pool (padding never wins, whatever the zero point); with factor != 1
    the output scale differs and a requantize follows it."""
    x = g.input("x", [c, *hw], in_sampler)
    xd = g.qdq(x, "x", dtype, zp)
    if global_pool:
        y = g.node("GlobalMaxPool", [xd], name="pool")
    else:
        y = g.node("MaxPool", [xd], name="pool", kernel_shape=[k, k], strides=[stride, stride],
                   pads=list(pads), ceil_mode=ceil_mode)
    g.output(y, "x", dtype, zp, factor=factor)  # same key: the input's scale (times factor)
    return ["pool"]


def concat_block(g, channels=(8, 8), gains=(1.0, 3.0), hw=(6, 6), axis=1, out_key="y",
                 dtype=np.int8, zp=None, shared_in_key=False, out_factor=1.0):
    """Concat of DQ inputs with different scales -> Q: each branch is
    requantized to the output's scale. shared_in_key: every input uses the
    first input's scale (the DQ moves forward across the Concat; the final
    Q is then one requantize, with out_factor != 1)."""
    parts = []
    for i, (c, gain) in enumerate(zip(channels, gains)):
        dims = [c, *hw] if axis in (1, -3) else [channels[0], *hw[:-1], c] \
            if axis in (-1, 3) else None
        sampler = (lambda rng, s, gain=gain: gain * rng.uniform(-0.4, 1.0, s)) \
            if dtype == np.uint8 else gained(gain)
        x = g.input(f"x{i}", dims, sampler)
        parts.append(g.qdq(x, "x0" if shared_in_key else f"x{i}", dtype, zp))
    y = g.node("Concat", parts, name="concat", axis=axis)
    g.output(y, out_key, dtype, zp, factor=out_factor)
    return ["concat"]


def branches_block(g, cin=6, couts=(5, 7), hw=(7, 7)):
    """One DQ(x) shared by two convs (1x1 and 3x3) whose float Relu outputs
    are concatenated, then quantized: the Q moves back across the Concat
    into both convs' epilogues, the shared DQ is duplicated per consumer."""
    x = g.input("x", [cin, *hw])
    xd = g.qdq(x, "x")
    outs = []
    for i, (co, k) in enumerate(zip(couts, (1, 3))):
        w = (g.rng.standard_normal((co, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
        c = g.node("Conv", [xd, g.weight(w, 0), g.const(
            (0.3 * g.rng.standard_normal(co)).astype(np.float32), "b")], name=f"conv{i}",
            kernel_shape=[k, k], pads=[k // 2] * 4)
        outs.append(g.node("Relu", [c], name=f"relu{i}"))
    y = g.node("Concat", outs, name="concat", axis=1)
    g.output(y, "y")
    return ["conv0", "conv1", "relu0", "relu1", "concat"]


def movement_block(g, op="Reshape", dims=(6, 4, 5), factor=1.0, dtype=np.int8, zp=None,
                   out_dtype=None, out_zp=None):
    """DQ -> Reshape/Transpose/Flatten/Slice/Gather/Squeeze/Unsqueeze -> Q:
    with the same scale an identity (the op runs on the integers), with
    another scale (or type) a requantize."""
    x = g.input("x", list(dims), uniform(-0.5, 1.5) if dtype == np.uint8 else None)
    xd = g.qdq(x, "x", dtype, zp)
    rank = len(dims) + 1
    if op == "Reshape":
        y = g.node("Reshape", [xd, g.const(np.array([0, -1], np.int64), "shape")], name="move")
    elif op == "Transpose":
        y = g.node("Transpose", [xd], name="move", perm=[0] + list(range(rank - 1, 0, -1)))
    elif op == "Flatten":
        y = g.node("Flatten", [xd], name="move", axis=1)
    elif op == "Slice":
        y = g.node("Slice", [xd, g.const(np.array([1, -1], np.int64), "starts"),
                             g.const(np.array([dims[0], 0], np.int64), "ends"),
                             g.const(np.array([1, rank - 1], np.int64), "axes"),
                             g.const(np.array([2, -2], np.int64), "steps")], name="move")
    elif op == "Gather":
        idx = np.array([dims[0] - 1, 0, 2 % dims[0], dims[0] - 1], np.int64)
        y = g.node("Gather", [xd, g.const(idx, "idx")], name="move", axis=1)
    elif op == "Squeeze":
        y = g.node("Squeeze", [xd, g.const(np.array([2], np.int64), "axes")], name="move")
    elif op == "Unsqueeze":
        y = g.node("Unsqueeze", [xd, g.const(np.array([1], np.int64), "axes")], name="move")
    else:
        raise ValueError(op)
    if out_dtype is None:
        g.output(y, "x", dtype, zp, factor=factor)  # the input's range, times factor
    else:
        g.output(y, "x", out_dtype, out_zp, factor=factor)
    return ["move"]


def clamp_block(g, op="Relu", lo=0.0, hi=6.0, factor=1.0, dims=(5, 6, 7), dtype=np.int8,
                zp=None, gain=3.0):
    """DQ -> Relu/Clip -> Q: an integer clamp when the bounds lie on the
    grid (the DQ moves forward), else the Q moves backward across the clip
    and quantizes its bounds."""
    x = g.input("x", list(dims), gained(gain))
    xd = g.qdq(x, "x", dtype, zp)
    if op == "Relu":
        y = g.node("Relu", [xd], name="clamp")
    else:
        y = g.node("Clip", [xd, g.const(np.float32(lo), "lo"), g.const(np.float32(hi), "hi")],
                   name="clamp")
    g.output(y, "x", dtype, zp, factor=factor)
    return ["clamp"]


def patterns():
    """(name, builder, batch) for every pattern and its awkward variants."""
    P = []

    def add(name, fn, batch=SAMPLES, **kw):
        P.append((name, (lambda g, fn=fn, kw=kw: fn(g, **kw)), batch))

    # 1. Conv 3x3 pad 1 + bias + Relu -> Q, and its geometries.
    add("conv3x3_relu", conv_block)
    add("conv3x3_relu_int8w", conv_block, wstyle="int8")
    add("conv3x3_relu_c3to5_7x9", conv_block, cin=3, cout=5, hw=(7, 9))
    add("conv3x3_relu_1x1map", conv_block, cin=13, cout=7, hw=(1, 1))
    add("conv3x3_per_tensor_w", conv_block, cin=5, cout=6, hw=(6, 5), per_tensor_weight=True)
    add("conv3x3_int32_bias", conv_block, cin=7, cout=9, hw=(8, 7), bias="int32")
    add("conv_stride2", conv_block, strides=(2, 2))
    add("conv_stride2_odd", conv_block, cin=5, cout=11, hw=(11, 7), strides=(2, 2))
    add("conv_dilation2", conv_block, dilations=(2, 2))
    add("conv_dilation2_odd", conv_block, cin=7, cout=9, hw=(9, 13), dilations=(2, 2))
    add("conv_dil2_s2_group3", conv_block, cin=9, cout=6, hw=(11, 10), dilations=(2, 2),
        strides=(2, 2), group=3)
    add("conv_group4", conv_block, cin=16, cout=16, group=4)
    add("conv_group4_odd", conv_block, cin=12, cout=20, hw=(9, 9), group=4, wstyle="int8")
    add("conv_depthwise", conv_block, cin=16, cout=16, group=16)
    add("conv_depthwise_odd", conv_block, cin=13, cout=13, hw=(7, 7), group=13, strides=(2, 2))
    add("conv_depthwise_x2", conv_block, cin=5, cout=10, hw=(5, 5), group=5)
    add("conv1x1", conv_block, cin=16, cout=24, k=1, hw=(8, 8))
    add("conv1x1_odd", conv_block, cin=13, cout=3, k=1, hw=(5, 3), wstyle="int8")
    add("conv1x1_1x1map", conv_block, cin=7, cout=5, k=1, hw=(1, 1))
    add("conv7x7_s2_p3", conv_block, cin=3, cout=16, k=7, hw=(32, 32), strides=(2, 2),
        pads=(3, 3, 3, 3), batch=250)
    add("conv7x7_s2_p3_odd", conv_block, cin=3, cout=13, k=7, hw=(15, 17), strides=(2, 2),
        pads=(3, 3, 3, 3), batch=500)
    add("conv_asym_pads", conv_block, pads=(0, 1, 2, 0))
    add("conv_asym_pads_odd", conv_block, cin=5, cout=7, hw=(7, 5), k=(3, 2),
        pads=(2, 0, 1, 1), act=None)
    add("conv_saturating_out", conv_block, cin=6, cout=10, hw=(7, 7), out_factor=0.3)
    add("conv_auto_pad_same_upper_s2", conv_block, cin=5, cout=6, hw=(8, 7), strides=(2, 2),
        auto_pad="SAME_UPPER", kernel_shape_attr=False)
    add("conv_auto_pad_same_lower_k4", conv_block, cin=3, cout=5, hw=(6, 9), k=4,
        auto_pad="SAME_LOWER")
    add("conv_auto_pad_valid", conv_block, cin=4, cout=7, hw=(5, 6), auto_pad="VALID")
    add("conv_no_bias", conv_block, cin=6, cout=10, hw=(6, 6), bias=None)
    add("conv1d_k5_s2", conv_block, cin=6, cout=10, hw=(23,), k=5, strides=(2,))
    add("conv3d_3x3x3", conv_block, cin=3, cout=5, hw=(5, 6, 7), k=3, batch=500)
    # 2. Conv -> BatchNormalization -> Relu -> Q.
    add("conv_bn_relu", conv_block, bn=True)
    add("conv_bn_relu_odd", conv_block, cin=5, cout=7, hw=(7, 7), bn=True, strides=(2, 2),
        wstyle="int8")
    add("conv_bn_nobias_1x1map", conv_block, cin=9, cout=3, hw=(1, 1), bn=True, bias=None)
    add("conv_bn_noact_dw", conv_block, cin=11, cout=11, hw=(6, 6), group=11, bn=True, act=None)
    # 3. Residual fusion.
    add("conv_add_relu", conv_block, residual="before_act")
    add("conv_add_relu_odd", conv_block, cin=5, cout=11, hw=(7, 5), residual="before_act",
        residual_first=True, bn=True)
    add("conv_relu_add", conv_block, residual="after_act")
    add("conv_relu_add_odd", conv_block, cin=3, cout=9, hw=(1, 1), residual="after_act",
        residual_first=True)
    add("conv_relu_add_relu", conv_block, cin=6, cout=10, hw=(7, 7), residual="after_act",
        act2="relu", bn=True)
    add("conv_add_identity_shortcut", conv_block, cin=8, cout=8, hw=(9, 9),
        residual="identity", bn=True)
    add("conv_downsample_residual", downsample_block)
    add("conv_downsample_residual_odd", downsample_block, cin=3, cout=5, hw=(7, 5))
    add("conv_add_u8_residual", conv_block, cin=5, cout=7, hw=(6, 7), residual="before_act",
        r_dtype=np.uint8, r_zp=128)
    # 4. Clip(0, 6) and other clamps.
    add("conv_clip6", conv_block, act="clip6")
    add("conv_clip6_odd", conv_block, cin=7, cout=5, hw=(9, 7), act="clip6", strides=(2, 2),
        wstyle="int8")
    add("conv_clip_min_only", conv_block, cin=5, cout=6, hw=(5, 5), act="clip_lo")
    add("conv_clip_max_only", conv_block, cin=6, cout=5, hw=(4, 7), act="clip_hi")
    add("conv_qdq_relu_q", conv_qdq_act_block, act="relu")
    add("conv_qdq_clip6_requant", conv_qdq_act_block, act="clip6", factor=1.6)
    add("dq_relu_q_same_scale", clamp_block, op="Relu")
    add("dq_clip_offgrid_q", clamp_block, op="Clip", lo=-0.45, hi=0.77, gain=0.5)
    add("dq_clip6_q_requant", clamp_block, op="Clip", lo=0.0, hi=6.0, factor=0.5)
    add("dq_relu_q_u8_zp", clamp_block, op="Relu", dtype=np.uint8, zp="asym", dims=(3, 5, 1))
    # 5. Gemm / MatMul.
    add("gemm_transB_alpha_beta", gemm_block, trans_b=1, alpha=0.7, beta=1.3)
    add("gemm_transB_odd", gemm_block, k=13, m=7, trans_b=1, alpha=2.5, beta=0.4, wstyle="int8",
        act="relu")
    add("gemm_transB_int32_bias", gemm_block, k=17, m=9, trans_b=1, beta=0.5, bias="int32")
    add("gemm_noTransB", gemm_block, trans_b=0, bias="row")
    add("gemm_noTransB_odd", gemm_block, k=5, m=3, trans_b=0, wstyle="int8")
    add("gemm_no_bias", gemm_block, k=9, m=1, trans_b=1, bias=None, alpha=3.0)
    add("matmul_weight_bias", matmul_weight_block)
    add("matmul_weight_bias_odd", matmul_weight_block, t=(3,), k=11, m=13, wstyle="float",
        scale=0.6)
    add("matmul_2d_bias_first_vec_scale", matmul_weight_block, t=(), k=9, m=7, bias_first=True,
        scale=np.linspace(0.3, 2.0, 7))
    add("matmul_4d_x_2d_w", matmul_weight_block, t=(2, 3), k=5, m=6)
    add("matmul_linear_transposed_w", matmul_weight_block, t=(4,), k=10, m=6, transposed=True)
    add("matmul_bias_residual_relu", matmul_weight_block, t=(3,), k=7, m=5, residual=True,
        act="relu")
    add("attention_qk_mul", attention_block)
    add("attention_qk_div_odd", attention_block, heads=3, t=5, d=7, transpose_k=False, op="Div")
    # Mul commutes and exporters write either order: Mul(1/sqrt(d), Q.K^T)
    # must fuse as Mul(Q.K^T, 1/sqrt(d)) does.
    add("attention_qk_mul_const_first", attention_block, heads=2, t=6, d=8, const_first=True)
    add("attention_softmax_v_u8", attention_av_block)
    # 6. Elementwise.
    add("add_two_scales", eltwise_block, op="Add")
    add("add_two_scales_relu", eltwise_block, op="Add", a_dims=(5, 7, 3), b_dims=(5, 7, 3),
        act="relu")
    add("add_broadcast_c11", eltwise_block, op="Add", a_dims=(8, 9, 9), b_dims=(8, 1, 1))
    add("add_broadcast_odd", eltwise_block, op="Add", a_dims=(13, 5, 7), b_dims=(13, 1, 1),
        b_gain=0.2)
    add("add_broadcast_1hw", eltwise_block, op="Add", a_dims=(6, 5, 3), b_dims=(1, 5, 3))
    add("add_u8_zero_points", eltwise_block, op="Add", a_dims=(5, 4, 3), b_dims=(5, 4, 3),
        dtype=np.uint8, zp="asym")
    add("mul_two_scales", eltwise_block, op="Mul")
    add("mul_broadcast_odd", eltwise_block, op="Mul", a_dims=(7, 3, 5), b_dims=(7, 1, 1),
        b_gain=0.5)
    add("mul_broadcast_lhs", eltwise_block, op="Mul", a_dims=(6, 1, 1), b_dims=(6, 4, 5))
    add("add_mixed_u8_i8", eltwise_block, op="Add", a_dims=(4, 5, 6), b_dims=(4, 5, 6),
        dtype=np.uint8, zp="asym", b_dtype=np.int8)
    add("mul_square_shared_dq", eltwise_block, op="Mul", a_dims=(3, 5, 5), square=True)
    add("mul_u8_zero_points", eltwise_block, op="Mul", a_dims=(7, 3, 3), b_dims=(7, 1, 1),
        dtype=np.uint8, zp="asym")
    # 7. Pools.
    add("avgpool_s2_p1_excl", avgpool_block, count_include_pad=0)
    add("avgpool_s2_p1_incl", avgpool_block, count_include_pad=1)
    add("avgpool_excl_odd", avgpool_block, c=5, hw=(7, 9), count_include_pad=0)
    add("avgpool_incl_odd_ceil", avgpool_block, c=7, hw=(8, 11), count_include_pad=1,
        ceil_mode=1)
    add("avgpool_2x2_s2_1x1map", avgpool_block, c=3, hw=(1, 1), k=2, pads=(0, 0, 1, 1),
        count_include_pad=0)
    add("avgpool_auto_pad_same_upper", avgpool_block, c=5, hw=(8, 7), k=3, stride=2,
        auto_pad="SAME_UPPER", count_include_pad=0)
    add("avgpool1d_k3_s2_incl", avgpool_block, c=5, hw=(17,), pads=(1, 1),
        count_include_pad=1)
    add("gap", gap_block)
    add("gap1d", gap_block, c=6, hw=(11,))
    add("gap_odd", gap_block, c=13, hw=(5, 7))
    add("gap_1x1map", gap_block, c=7, hw=(1, 1))
    add("gap_u8_zp", gap_block, c=5, hw=(3, 9), dtype=np.uint8, zp="asym",
        in_sampler=uniform(-0.4, 1.2))
    add("maxpool_same_scale", maxpool_block)
    add("maxpool_odd", maxpool_block, c=5, hw=(7, 9), pads=(0, 1, 1, 0), ceil_mode=1)
    add("maxpool_requantize", maxpool_block, c=4, hw=(6, 7), factor=0.7)
    add("global_maxpool_odd", maxpool_block, c=5, hw=(3, 7), global_pool=True)
    add("maxpool_u8_zp_pads", maxpool_block, c=3, hw=(5, 5), pads=(1, 1, 1, 1), dtype=np.uint8,
        zp="asym", in_sampler=uniform(-2.0, -0.1))
    # 8. Concat.
    add("concat_two_scales", concat_block)
    add("concat_three_odd", concat_block, channels=(3, 5, 1), gains=(0.3, 1.0, 4.0), hw=(5, 3))
    add("concat_one_shared_scale", concat_block, channels=(6, 2), gains=(2.0, 0.5), hw=(3, 3),
        out_key="x0")
    add("concat_last_axis", concat_block, channels=(3, 4), gains=(1.0, 2.5), hw=(2, 5),
        axis=-1)
    add("concat_u8_zero_points", concat_block, channels=(2, 3), gains=(1.0, 3.0), hw=(4, 4),
        dtype=np.uint8, zp="asym")
    add("concat_shared_scale_requant", concat_block, channels=(4, 3), gains=(1.0, 1.0),
        hw=(3, 5), shared_in_key=True, out_factor=1.3)
    add("conv_branches_concat", branches_block)
    # 9. Data movement.
    add("reshape_same_scale", movement_block, op="Reshape")
    add("reshape_requantize", movement_block, op="Reshape", factor=1.37)
    add("transpose_same_scale", movement_block, op="Transpose", dims=(3, 5, 7))
    add("transpose_requantize", movement_block, op="Transpose", dims=(3, 5, 7), factor=0.61)
    add("flatten_same_scale", movement_block, op="Flatten", dims=(13, 1, 1))
    add("flatten_requantize", movement_block, op="Flatten", dims=(5, 3, 3), factor=2.3)
    add("slice_same_scale", movement_block, op="Slice", dims=(7, 3, 9))
    add("slice_requantize", movement_block, op="Slice", dims=(5, 9), factor=0.7)
    add("gather_same_scale", movement_block, op="Gather", dims=(5, 3))
    add("gather_requantize", movement_block, op="Gather", dims=(3, 4, 2), factor=1.9)
    add("squeeze_requantize", movement_block, op="Squeeze", dims=(3, 1, 5), factor=1.1)
    add("unsqueeze_same_scale", movement_block, op="Unsqueeze", dims=(3, 5))
    add("reshape_u8_to_i8", movement_block, op="Reshape", dims=(3, 4, 5), dtype=np.uint8,
        zp="asym", out_dtype=np.int8)
    add("transpose_u8_zp_requant", movement_block, op="Transpose", dims=(2, 3, 7),
        dtype=np.uint8, zp="asym", factor=1.2)
    # 10. uint8 with a non-zero zero point: padding is the zero point (and
    # int8 with a non-zero zero point, which qatc accepts outside --trt-compat).
    add("u8_conv_pad_zp128", conv_block, in_dtype=np.uint8, in_zp=128, out_dtype=np.uint8,
        out_zp=128, act=None)
    add("u8_conv_pad_asym_zp", conv_block, cin=5, cout=7, hw=(7, 7), in_dtype=np.uint8,
        in_zp="asym", out_dtype=np.uint8, out_zp="asym", act=None,
        in_sampler=uniform(-0.5, 2.0), pads=(1, 2, 1, 0))
    add("u8_conv_relu_zp128_out", conv_block, cin=4, cout=6, hw=(5, 6), in_dtype=np.uint8,
        in_zp=128, out_dtype=np.uint8, out_zp=128, act="relu", strides=(2, 2),
        dilations=(2, 1), pads=(2, 1, 2, 1))
    add("u8_conv_depthwise_zp128", conv_block, cin=9, cout=9, group=9, hw=(5, 5),
        in_dtype=np.uint8, in_zp=128, out_dtype=np.int8, act=None)
    add("u8_conv_7x7_1x1map", conv_block, cin=3, cout=5, k=7, hw=(1, 1), pads=(3, 3, 3, 3),
        in_dtype=np.uint8, in_zp="asym", in_sampler=uniform(0.2, 1.5), act=None)
    add("i8_conv_pad_nonzero_zp", conv_block, cin=5, cout=6, hw=(6, 6), in_dtype=np.int8,
        in_zp="asym", in_sampler=uniform(-0.2, 1.8), out_dtype=np.int8, out_zp="asym",
        act="clip6")
    add("i8_avgpool_incl_zp_same_lower", avgpool_block, c=4, hw=(7, 6),
        count_include_pad=1, auto_pad="SAME_LOWER", stride=2, in_dtype=np.int8, in_zp="asym",
        in_sampler=uniform(0.3, 2.0), out_dtype=np.int8, out_zp="asym")
    add("u8_avgpool_incl_zp128", avgpool_block, count_include_pad=1, in_dtype=np.uint8, in_zp=128,
        out_dtype=np.uint8, out_zp=128)
    add("u8_avgpool_excl_asym_zp", avgpool_block, c=5, hw=(7, 7), count_include_pad=0,
        in_dtype=np.uint8, in_zp="asym", out_dtype=np.uint8, out_zp="asym",
        in_sampler=uniform(-0.3, 1.5))
    add("u8_avgpool_incl_asym_zp_odd", avgpool_block, c=3, hw=(5, 5), count_include_pad=1,
        in_dtype=np.uint8, in_zp="asym", out_dtype=np.uint8, out_zp="asym",
        in_sampler=uniform(-0.3, 1.5))
    add("u8_avgpool_incl_ceil_zp", avgpool_block, c=3, hw=(6, 6), count_include_pad=1,
        ceil_mode=1, in_dtype=np.uint8, in_zp="asym", out_dtype=np.int8,
        in_sampler=uniform(0.1, 1.5))
    return P

#===----------------------------------------------------------------------===#
# Running
#===----------------------------------------------------------------------===#

def save_inputs(g, work, tag, batch, rng):
    files = {}
    for name, (dims, sampler) in g.input_data.items():
        f = os.path.join(work, f"{tag}_{name}.npy")
        np.save(f, np.asarray(sampler(rng, (batch, *dims)), np.float32))
        files[name] = f
    return files


def lsb_stats(ref, got):
    d = np.abs(ref.astype(np.int32) - got.astype(np.int32))
    return (int(d.max()) if d.size else 0), (float(np.count_nonzero(d)) / max(d.size, 1))


def worst_elements(ref, got, count=3):
    """The `count` elements that differ most: 'index: reference vs got'."""
    d = np.abs(ref.astype(np.int32) - got.astype(np.int32)).ravel()
    order = np.argsort(-d, kind="stable")[:count]
    return "; ".join(f"{list(np.unravel_index(i, ref.shape))}: {ref.flat[i]} vs {got.flat[i]}"
                     for i in order if d[i])


class Runner:
    def __init__(self, args):
        self.args = args
        self.rows = []
        self.failures = []
        self.ort_ok = os.path.isdir(os.path.join(args.ort, "node_modules"))

    def fail(self, name, msg):
        self.failures.append(f"{name}: {msg}")
        print(f"   FAIL {msg}", flush=True)

    def qatc(self, *cmd):
        rc, out, err = run([self.args.qatc, *cmd])
        if rc:
            raise RuntimeError(f"qatc {' '.join(cmd)} failed:\n{err.strip()[-3000:]}")
        return out

    def check(self, name, build, batch):
        """Builds, compiles and evaluates one pattern; appends its row."""
        a = self.args
        failures_before = len(self.failures)
        work = os.path.join(a.work, name)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        seed = zlib.crc32(name.encode())
        print(f"== {name}", flush=True)
        start = time.time()

        # Calibration: the same graph without activation Q/DQ, float weights.
        g = Graph(name, np.random.default_rng(seed), calib=True)
        build(g)
        calib_path = os.path.join(work, "calib.onnx")
        onnx.save(g.model(), calib_path)
        cin = save_inputs(g, work, "calib", CALIB_SAMPLES, np.random.default_rng(seed + 1))
        ranges = {}
        for key, inp in g.input_taps.items():
            x = np.load(cin[inp])
            ranges[key] = (float(x.min()), float(x.max()))
        if g.taps:
            out = os.path.join(work, "calib.npz")
            self.qatc("eval", calib_path, *[f"--input={k}={v}" for k, v in cin.items()],
                      "-o", out)
            outs = load_outputs(out)
            for key, t in g.taps.items():
                ranges[key] = (float(outs[t].min()), float(outs[t].max()))

        # The Q/DQ model: the same random weights (same seed), calibrated scales.
        g = Graph(name, np.random.default_rng(seed), calib=False, ranges=ranges)
        expect = build(g)
        path = os.path.join(work, "model.onnx")
        onnx.save(g.model(), path)
        inputs = save_inputs(g, work, "data", batch, np.random.default_rng(seed + 2))
        ins = [f"--input={k}={v}" for k, v in inputs.items()]
        out_name = g.outputs[0].name

        # 1. The fusion happened.
        report_path = os.path.join(work, "report.json")
        self.qatc("compile", path, "--emit=qat", "-o", os.path.join(work, "model.qat.mlir"),
                  f"--precision-report={report_path}")
        with open(report_path) as f:
            report = json.load(f)
        nodes = {n["node"]: n for n in report["nodes"]}
        fused = "?"
        for i, node in enumerate(expect):
            n = nodes.get(node)
            if n is None:
                self.fail(name, f"node '{node}' missing from the precision report")
                continue
            if i == 0:
                fused = f"{n['precision']} {n.get('kernel', '')}".strip()
            if n["precision"] not in INT8_PRECISIONS:
                self.fail(name, f"node '{node}' ({n['op_type']}) is {n['precision']}"
                                f"{' (' + n['reason'] + ')' if n.get('reason') else ''}; "
                                f"expected int8")
        fp32 = [n["node"] for n in report["nodes"] if n["compute"] and n["precision"] == "fp32"]
        if fp32:
            self.fail(name, f"compute nodes left in fp32: {fp32}")

        # 2. Reference (literal Q/DQ) against the fused int8 ops.
        ref_out, qat_out = os.path.join(work, "ref.npz"), os.path.join(work, "qat.npz")
        self.qatc("eval", path, *ins, "-o", ref_out)
        self.qatc("eval", path, "--stage=qat", *ins, "-o", qat_out)
        ref, got = load_outputs(ref_out)[out_name], load_outputs(qat_out)[out_name]
        if ref.dtype != got.dtype or ref.shape != got.shape:
            self.fail(name, f"qat stage gives {got.dtype}{list(got.shape)}, reference "
                            f"{ref.dtype}{list(ref.shape)}")
            lsb, frac = -1, 1.0
        else:
            lsb, frac = lsb_stats(ref, got)
            if lsb > MAX_LSB or frac > MAX_LSB_FRACTION:
                self.fail(name, f"qat stage differs from the reference by up to {lsb} LSB on "
                                f"{100 * frac:.4f}% of {ref.size} elements (limit {MAX_LSB} "
                                f"LSB on {100 * MAX_LSB_FRACTION}%); worst (reference vs "
                                f"qat): {worst_elements(ref, got)}")
        distinct = len(np.unique(ref))
        if distinct < MIN_DISTINCT:
            self.fail(name, f"the reference output takes only {distinct} values: the pattern "
                            "tests next to nothing (a scale or the data is off)")

        # 3. ONNX Runtime, no optimizations: a third literal evaluation.
        ort_lsb, ort_frac = None, None
        if self.ort_ok:
            odir = os.path.join(work, "ort")
            rc, _, err = run(["node", os.path.join(a.ort, "run.js"), path, odir, "--no-opt",
                              *[f"{k}={v}" for k, v in inputs.items()]])
            if rc:
                self.fail(name, f"ONNX Runtime failed: {err.strip()[-2000:]}")
            else:
                o = load_outputs(odir)[out_name]
                if o.dtype != ref.dtype or o.shape != ref.shape:
                    self.fail(name, f"ONNX Runtime gives {o.dtype}{list(o.shape)}, reference "
                                    f"{ref.dtype}{list(ref.shape)}")
                else:
                    ort_lsb, ort_frac = lsb_stats(ref, o)
                    if ort_lsb > MAX_LSB or ort_frac > MAX_LSB_FRACTION:
                        self.fail(name, f"ONNX Runtime differs from the reference by up to "
                                        f"{ort_lsb} LSB on {100 * ort_frac:.4f}% of the elements;"
                                        f" worst (reference vs ORT): {worst_elements(ref, o)}")
        secs = time.time() - start
        print(f"   {ref.size} elements: max {lsb} LSB, {100 * frac:.4f}% differ; "
              f"ORT {'-' if ort_lsb is None else ort_lsb} LSB; {fused} ({secs:.1f} s)",
              flush=True)
        ok = len(self.failures) == failures_before
        self.rows.append((name, ref.size, lsb, frac, ort_lsb, ort_frac, fused, ok))
        if not ok:
            # Keep the data, and say how to look at the layers.
            data = " ".join(f"--input={k}={v}" for k, v in inputs.items())
            q = a.qatc
            print(f"   to investigate (files kept in {work}):\n"
                  f"     {q} compile {path} --emit=qat\n"
                  f"     {q} eval {path} {data} --dump-tensors={work}/ref_dump\n"
                  f"     {q} eval {path} --stage=qat {data} --dump-tensors={work}/qat_dump\n"
                  f"     {q} compare {work}/ref_dump {work}/qat_dump --allow-missing",
                  flush=True)
        elif not a.keep:
            for f in os.listdir(work):
                if f.endswith(".npy") or f.endswith(".npz"):
                    os.remove(os.path.join(work, f))
            shutil.rmtree(os.path.join(work, "ort"), ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--qatc", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--ort", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "..", "ort"),
                   help="directory of the ONNX Runtime node scripts (tests/ort)")
    p.add_argument("--only", action="append", default=[],
                   help="run only patterns whose name contains this (repeatable)")
    p.add_argument("--keep", action="store_true",
                   help="keep the data and outputs in the work directory")
    a = p.parse_args()
    if not (os.path.isfile(a.qatc) and os.access(a.qatc, os.X_OK)):
        print(f"FAIL: qatc is not an executable file: {a.qatc}")
        return 1
    os.makedirs(a.work, exist_ok=True)
    r = Runner(a)
    if not r.ort_ok:
        print(f"note: ONNX Runtime is not installed in {a.ort} (no node_modules; "
              "scripts/setup-ort.sh installs it): its column is skipped", flush=True)
    start = time.time()
    selected = [pt for pt in patterns() if not a.only or any(s in pt[0] for s in a.only)]
    for name, build, batch in selected:
        try:
            r.check(name, build, batch)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            r.fail(name, str(e))
            r.rows.append((name, 0, None, None, None, None, "(not run to the end)", False))
        except Exception as e:  # a model this script could not build
            r.fail(name, f"{type(e).__name__}: {e}")
            r.rows.append((name, 0, None, None, None, None, "(not run to the end)", False))

    print(f"\nint8 fusions against the literal Q/DQ evaluation (limit {MAX_LSB} LSB on "
          f"{100 * MAX_LSB_FRACTION}% of the elements)")
    hdr = (f"{'pattern':<30} {'elements':>10} {'max LSB':>7} {'% differ':>9} "
           f"{'ORT LSB':>7} {'ORT %':>8} {'verdict':>7}  fused as")
    print(hdr)
    print("-" * (len(hdr) + 16))

    def fmt(v, f):
        return "-" if v is None else f(v)

    for name, n, lsb, frac, olsb, ofrac, fused, ok in r.rows:
        print(f"{name:<30} {n:>10} {fmt(lsb, str):>7} "
              f"{fmt(frac, lambda v: f'{100 * v:.4f}'):>9} {fmt(olsb, str):>7} "
              f"{fmt(ofrac, lambda v: f'{100 * v:.4f}'):>8} {'ok' if ok else 'FAIL':>7}  {fused}")
    print(f"\n{len(selected)} patterns in {time.time() - start:.0f} s")
    failed = {f.split(":", 1)[0] for f in r.failures}
    if r.failures:
        print(f"\n{len(r.failures)} failure(s):")
        for f in r.failures:
            print("  " + f)
    print(f"qat-ops: {len(selected) - len(failed)} passed, {len(failed)} failed")
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
