#!/usr/bin/env python3
"""The compiled kernels over odd shapes, against the reference evaluator.

Builds small ONNX models, one kernel each (TensorRT-style Q/DQ int8 and
float twins): convolutions with channel counts that are not multiples of
4/16/64, stride 2, asymmetric padding, dilation, groups, depthwise, 1x1 and
7x7 windows, tiny maps, batches of several images, activation zero points
away from 0 (int8 and uint8);
matrix products with odd M, K and N; products of two activations
(attention's Q.K^T and softmax.V, strided operands); average and max pooling with and
without count_include_pad; broadcasting elementwise ops; channel
concatenations written in place (Inception, a DenseNet block) and ones
that must stay copies. Each is checked
with plans.py's check_model: compiled for host (AMX on an AMX host, with
avx512vnni beside it), AVX2 and generic, the
plan's outputs and every int8 tensor against `qatc eval --stage=qat`
(int8: 1 LSB on at most 0.1 % of elements; float: 1e-4 relative), 2
threads giving the same bytes, deterministic compilation.

Run with Debian's /usr/bin/python3 (it needs numpy and onnx).
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Checker  # noqa: E402
from plans import TARGETS, amx_note, check_model  # noqa: E402


def out_size(n, k, s, p0, p1, d):
    return (n + p0 + p1 - d * (k - 1) - 1) // s + 1


class Builder:
    """One graph: initializers, nodes, Q/DQ helpers."""

    def __init__(self, rng, qdq, xzp=0, xtype=np.int8):
        self.rng, self.qdq = rng, qdq
        self.inits, self.nodes = [], []
        self.xzp, self.xtype = xzp, xtype
        self.count = 0

    def name(self, base):
        self.count += 1
        return f"{base}{self.count}"

    def const(self, base, array):
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(array, n))
        return n

    def node(self, op, inputs, **attrs):
        out = self.name(op.lower() + "_out")
        self.nodes.append(helper.make_node(op, inputs, [out], name=self.name(op), **attrs))
        return out

    def act_qdq(self, t, scale, zp=None, dtype=None):
        """Q/DQ on an activation (a no-op in the float twin)."""
        if not self.qdq:
            return t
        zp = self.xzp if zp is None else zp
        dtype = dtype or self.xtype
        s = self.const("s", np.array(scale, np.float32))
        z = self.const("z", np.array(zp, dtype))
        return self.node("DequantizeLinear", [self.node("QuantizeLinear", [t, s, z]), s, z])

    def weight(self, shape, axis=0, q=None):
        """A weight: int8 per-channel through DequantizeLinear, or float
        (`q`: its integers, else random in [-127, 127])."""
        if q is None:
            q = self.rng.integers(-127, 128, size=shape).astype(np.int8)
        scales = self.rng.uniform(0.004, 0.012, size=shape[axis]).astype(np.float32)
        if not self.qdq:
            bshape = [1] * len(shape)
            bshape[axis] = shape[axis]
            return self.const("w", q.astype(np.float32) * scales.reshape(bshape))
        return self.node("DequantizeLinear",
                         [self.const("wq", q), self.const("ws", scales),
                          self.const("wz", np.zeros(shape[axis], np.int8))], axis=axis)

    def model(self, path, in_shape, out, out_shape):
        graph = helper.make_graph(
            self.nodes, "kernel",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)],
            self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        onnx.save(m, path)


def silu(b, y, c):
    return b.node("Mul", [y, b.node("Sigmoid", [y])])


def prelu(b, y, c):
    """PRelu with a slope per channel: a fused chain's own per-channel
    constant."""
    return b.node("PRelu", [y, b.const("slope", b.rng.uniform(0.05, 0.3, (c, 1, 1)).astype(np.float32))])


def scale_shift(b, y, c):
    y = b.node("Mul", [y, b.const("scale", b.rng.uniform(0.5, 1.5, (c, 1, 1)).astype(np.float32))])
    return b.node("Add", [y, b.const("shift", b.rng.normal(0, 0.3, (c, 1, 1)).astype(np.float32))])


def relu6(b, y, c):
    return b.node("Clip", [y, b.const("lo", np.array(0, np.float32)),
                           b.const("hi", np.array(6, np.float32))])


def conv_case(b, ic, oc, hw, k, stride=1, pads=(0, 0, 0, 0), dil=1, group=1, relu=True, n=1,
              post=None, out_scale=0.08, out_zp=None, out_type=None):
    """A conv, then Relu (`relu`) or `post(b, y, oc)`, quantized (the
    output's zero point and type the case's unless given)."""
    h, w = hw
    x = b.act_qdq("x", 0.05)
    wt = b.weight([oc, ic // group, k, k])
    bias = b.const("b", b.rng.normal(0, 0.2, oc).astype(np.float32))
    y = b.node("Conv", [x, wt, bias], kernel_shape=[k, k], strides=[stride, stride],
               pads=list(pads), dilations=[dil, dil], group=group)
    if post:
        y = post(b, y, oc)
    elif relu:
        y = b.node("Relu", [y])
    y = b.act_qdq(y, out_scale, out_zp, out_type)
    oh = out_size(h, k, stride, pads[0], pads[2], dil)
    ow = out_size(w, k, stride, pads[1], pads[3], dil)
    return [n, ic, h, w], y, [n, oc, oh, ow]


def gemm_case(b, m, kk, n):
    x = b.act_qdq("x", 0.05)
    y = b.node("Gemm", [x, b.weight([n, kk]), b.const("b", b.rng.normal(0, 0.2, n).astype(np.float32))],
               transB=1)
    return [m, kk], b.act_qdq(y, 0.1), [m, n]


def matmul_residual_case(b, rows, d, quantized_sum, quantized_out=False):
    """A transformer's projection and its residual Add, f32 after the Add
    (the layer norm's input): the Add runs in the product's epilogue. With
    `quantized_sum` both Add inputs are Q/DQ'd (the product requantized,
    the residual read as int8), else the product's f32 result and x;
    `quantized_out` quantizes the sum too (the add's two-FMA form)."""
    xq = b.act_qdq("x", 0.05)
    w = b.weight([d, d], axis=1)
    y = b.node("MatMul", [xq, w])
    if quantized_sum:
        out = b.node("Add", [xq, b.act_qdq(y, 0.08)])
        return [1, rows, d], b.act_qdq(out, 0.1) if quantized_out else out, [1, rows, d]
    return [1, rows, d], b.node("Add", [y, "x"]), [1, rows, d]


def pool_case(b, c, hw, kind, k, stride, pads, count_pad=0, n=1):
    x = b.act_qdq("x", 0.05)
    attrs = dict(kernel_shape=[k, k], strides=[stride, stride], pads=list(pads))
    if kind == "AveragePool":
        attrs["count_include_pad"] = count_pad
    y = b.act_qdq(b.node(kind, [x], **attrs), 0.05)
    h, w = hw
    return [n, c, h, w], y, [n, c, out_size(h, k, stride, pads[0], pads[2], 1),
                              out_size(w, k, stride, pads[1], pads[3], 1)]


def maxpool_nan_case(b):
    """A 3x3 max pool over taps some of which are NaN (the float twin: x
    plus a constant with NaN at 4 % of its elements): the reference's
    std::max skips them, and so must the plan."""
    shape = [1, 21, 9, 11]
    x = b.act_qdq("x", 0.05)
    if not b.qdq:
        c = np.zeros(shape, np.float32)
        c.flat[b.rng.choice(c.size, c.size // 25, replace=False)] = np.nan
        x = b.node("Add", [x, b.const("nan", c)])
    y = b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    return shape, b.act_qdq(y, 0.05), shape


def broadcast_case(b, shape, other):
    x = b.act_qdq("x", 0.05)
    y = b.node("Mul", [x, b.const("c", b.rng.normal(0, 1, other).astype(np.float32))])
    y = b.node("Add", [y, x])
    return list(shape), b.act_qdq(y, 0.1), list(shape)


def layernorm_case(b, shape, axis):
    x = b.act_qdq("x", 0.05)
    n = int(np.prod(shape[axis:]))
    y = b.node("LayerNormalization",
               [x, b.const("g", b.rng.uniform(0.5, 1.5, shape[axis:]).astype(np.float32)),
                b.const("b", b.rng.normal(0, 0.2, shape[axis:]).astype(np.float32))],
               axis=axis, epsilon=1e-5)
    assert n
    return list(shape), b.act_qdq(y, 0.05), list(shape)


def layernorm_decomposed_case(b, shape, pow_square=True, affine=True):
    """A layer norm over the last axis as exporters before opset 17 write it
    (ReduceMean, Sub, Pow 2 or Mul(d, d), ReduceMean, Add eps, Sqrt, Div,
    Mul gamma, Add beta): qat-layernorm-fuse makes it one LayerNormalization,
    whose row kernel quantizes in registers."""
    x = b.act_qdq("x", 0.05)
    m = b.node("ReduceMean", [x], axes=[-1])
    d = b.node("Sub", [x, m])
    sq = (b.node("Pow", [d, b.const("two", np.array(2, np.float32))]) if pow_square
          else b.node("Mul", [d, d]))
    v = b.node("ReduceMean", [sq], axes=[-1])
    s = b.node("Sqrt", [b.node("Add", [v, b.const("eps", np.array(1e-5, np.float32))])])
    y = b.node("Div", [d, s])
    if affine:
        n = shape[-1]
        y = b.node("Mul", [y, b.const("g", b.rng.uniform(0.5, 1.5, n).astype(np.float32))])
        y = b.node("Add", [y, b.const("b", b.rng.normal(0, 0.2, n).astype(np.float32))])
    return list(shape), b.act_qdq(y, 0.05), list(shape)


def softmax_case(b, shape):
    """Softmax over the last axis, quantized after (attention's
    probabilities before softmax . V): each row in registers, rows four at
    a time, the QuantizeLinear in the same layer."""
    x = b.act_qdq("x", 0.1)
    return list(shape), b.act_qdq(b.node("Softmax", [x], axis=-1), 1 / 255), list(shape)


def residual_add_case(b, c, hw, downsample, group=1):
    """conv -> Q/DQ -> Add(residual, both quantized) -> Relu -> Q/DQ: the Add
    runs in the epilogue of the conv made last (ResNet's bottleneck); in the
    float twin too, where it adds f32 (`group`: the 3x3 conv's groups)."""
    x = b.act_qdq("x", 0.05)

    def conv(inp, k, g=1):
        return b.node("Conv", [inp, b.weight([c, c // g, k, k]),
                               b.const("b", b.rng.normal(0, 0.2, c).astype(np.float32))],
                      kernel_shape=[k, k], pads=[k // 2] * 4, group=g)

    y = b.act_qdq(conv(x, 3, group), 0.04)
    r = b.act_qdq(conv(x, 1), 0.06) if downsample else x
    out = b.act_qdq(b.node("Relu", [b.node("Add", [y, r])]), 0.05)
    return [1, c, *hw], out, [1, c, *hw]


def relu_input_case(b, ic, mid, oc, hw, k, pool=False, gemm=False):
    """Convolutions (or a Gemm) reading a Relu's quantized output, zero
    point 0: bytes q in [0, 127], which avx2 multiplies by vpmaddubsw
    (int8-maddubs). A small scale saturates many at 127, and whole output
    channels of weights -128 and 127 reach the largest pair sums,
    |127 * -128 * 2| < 2^15. `pool`: a max pool between them."""
    h, w = hw
    x = b.act_qdq("x", 0.05)
    y = b.node("Relu", [b.node("Conv", [x, b.weight([mid, ic, 3, 3]),
                                        b.const("b", b.rng.normal(0, 0.2, mid).astype(np.float32))],
                               pads=[1] * 4)])
    y = b.act_qdq(y, 0.01, 0, np.int8)
    if pool:
        y = b.act_qdq(b.node("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2]), 0.01, 0,
                      np.int8)
        h, w = h // 2, w // 2
    shape = [oc, mid * h * w] if gemm else [oc, mid, k, k]
    q = b.rng.integers(-128, 128, size=shape).astype(np.int8)
    q[0] = -128
    q[1] = 127
    q[2, ::2] = -128
    wt = b.weight(shape, q=q)
    bias = b.const("b", b.rng.normal(0, 0.2, oc).astype(np.float32))
    if gemm:
        y = b.node("Gemm", [b.node("Flatten", [y]), wt, bias], transB=1)
        return [1, ic, *hw], b.act_qdq(y, 2.0), [1, oc]
    y = b.node("Conv", [y, wt, bias], pads=[k // 2] * 4)
    return [1, ic, *hw], b.act_qdq(y, 0.5), [1, oc, h, w]


def concat_inception_case(b, n, hw, same_scale=True):
    """Inception: four branches (1x1 conv, 3x3 conv, depthwise 3x3, 3x3 max
    pool) concatenated on the channels and read by a 1x1 conv. The branches
    write their channels of the concatenation in place; 20, 12, 8 and 8
    channels put the f32 slices off every vector width. With other scales
    per branch the int8 Concat requantizes (a copy)."""
    ic = 8
    x = b.act_qdq("x", 0.05)

    def conv(inp, oc, k, group=1):
        return b.node("Relu", [b.node(
            "Conv", [inp, b.weight([oc, ic // group, k, k]),
                     b.const("b", b.rng.normal(0, 0.2, oc).astype(np.float32))],
            kernel_shape=[k, k], pads=[k // 2] * 4, group=group)])

    branches = [conv(x, 20, 1), conv(x, 12, 3), conv(x, ic, 3, ic),
                b.node("MaxPool", [x], kernel_shape=[3, 3], pads=[1] * 4)]
    branches = [b.act_qdq(t, 0.08 if same_scale else 0.05 + 0.01 * i)
                for i, t in enumerate(branches)]
    cat = b.act_qdq(b.node("Concat", branches, axis=1), 0.08)
    y = b.node("Conv", [cat, b.weight([16, 48, 1, 1]),
                        b.const("b", b.rng.normal(0, 0.2, 16).astype(np.float32))])
    return [n, ic, *hw], b.act_qdq(y, 0.1), [n, 16, *hw]


def concat_dense_case(b):
    """A DenseNet block: every layer reads BatchNorm + Relu of the
    concatenation of all earlier features and adds 12 channels; the block's
    Concats are prefixes of one buffer. The features feed only Concats, and
    the last Concat is the output (f32, as DenseNet's features are)."""
    x = b.act_qdq("x", 0.05)
    feats = [b.node("Conv", [x, b.weight([8, 5, 3, 3]),
                             b.const("b", b.rng.normal(0, 0.2, 8).astype(np.float32))],
                    pads=[1] * 4)]
    for layer in range(3):
        cat = b.node("Concat", feats, axis=1)  # one input first, as torch exports
        c = 8 + 12 * layer
        bn = b.node("BatchNormalization", [
            cat, b.const("g", b.rng.uniform(0.5, 1.5, c).astype(np.float32)),
            b.const("b", b.rng.normal(0, 0.2, c).astype(np.float32)),
            b.const("m", b.rng.normal(0, 0.2, c).astype(np.float32)),
            b.const("v", b.rng.uniform(0.5, 1.5, c).astype(np.float32))])
        h = b.act_qdq(b.node("Relu", [bn]), 0.04)
        feats.append(b.node("Conv", [h, b.weight([12, c, 3, 3]),
                                     b.const("b", b.rng.normal(0, 0.2, 12).astype(np.float32))],
                            pads=[1] * 4))
    out = b.node("Concat", feats, axis=1)
    return [1, 5, 7, 6], out, [1, 44, 7, 6]


def concat_relu_case(b):
    """Relus that no producer takes (one on the input, one on the Concat's
    result) write a slice of the Concat and read the whole: their loops
    follow the wide channel stride."""
    x = b.act_qdq("x", 0.05)
    r = b.act_qdq(b.node("Relu", [x]), 0.05)
    c = b.act_qdq(b.node("Conv", [x, b.weight([12, 8, 1, 1]),
                                  b.const("b", b.rng.normal(0, 0.2, 12).astype(np.float32))]), 0.05)
    y = b.act_qdq(b.node("Relu", [b.node("Concat", [r, c], axis=1)]), 0.05)
    out = b.node("Conv", [y, b.weight([7, 20, 1, 1]),
                          b.const("b", b.rng.normal(0, 0.2, 7).astype(np.float32))])
    return [2, 8, 5, 6], b.act_qdq(out, 0.1), [2, 7, 5, 6]


def concat_prefix_flatten_case(b):
    """Two Concats of pooled features, one a prefix of the other (one
    buffer), each flattened into a Gemm: the shorter one's rows are its
    channels of the wider buffer, for 2 images."""
    x = b.act_qdq("x", 0.05)
    p = b.act_qdq(b.node("GlobalAveragePool", [x]), 0.03)

    def conv(oc):
        return b.node("Conv", [p, b.weight([oc, 8, 1, 1]),
                               b.const("b", b.rng.normal(0, 0.2, oc).astype(np.float32))])

    c1, c2, c3 = conv(6), conv(10), conv(4)
    cat1 = b.node("Concat", [c1, c2], axis=1)
    cat2 = b.node("Concat", [c1, c2, c3], axis=1)

    def gemm(t, k):
        # The float twin's Gemm reads the Flatten itself.
        return b.node("Gemm", [b.act_qdq(b.node("Flatten", [t]), 0.04), b.weight([5, k]),
                               b.const("b", b.rng.normal(0, 0.2, 5).astype(np.float32))],
                      transB=1)

    y = b.node("Add", [gemm(cat1, 16), gemm(cat2, 20)])
    return [2, 8, 4, 4], b.act_qdq(y, 0.1), [2, 5]


def concat_shared_case(b):
    """Concats an in-place buffer cannot serve: the same input twice, and an
    input also read by an Add. Both stay copies."""
    x = b.act_qdq("x", 0.05)
    y = b.act_qdq(b.node("Conv", [x, b.weight([6, 6, 1, 1]),
                                  b.const("b", b.rng.normal(0, 0.2, 6).astype(np.float32))]), 0.06)
    cat = b.node("Concat", [y, y], axis=1)
    z = b.node("Conv", [cat, b.weight([6, 12, 1, 1]),
                        b.const("b", b.rng.normal(0, 0.2, 6).astype(np.float32))])
    return [1, 6, 5, 9], b.act_qdq(b.node("Add", [z, y]), 0.1), [1, 6, 5, 9]


def channel_shuffle_case(b, c, hw):
    """ShuffleNet's channel shuffle between two 1x1 convolutions (NHWC
    data): Reshape to 2 groups, swap them with the channels, Reshape back.
    The copy writes every second channel (int8 twin: bytes 2 apart; float:
    floats 2 apart), c / 2 channels a run."""
    x = b.act_qdq("x", 0.05)
    y = b.act_qdq(b.node("Conv", [x, b.weight([c, 8, 1, 1]),
                                  b.const("b", b.rng.normal(0, 0.2, c).astype(np.float32))]),
                  0.06)
    r = b.node("Reshape", [y, b.const("s1", np.array([1, 2, c // 2] + list(hw), np.int64))])
    t = b.node("Transpose", [r], perm=[0, 2, 1, 3, 4])
    z = b.act_qdq(b.node("Reshape", [t, b.const("s2", np.array([1, c] + list(hw), np.int64))]),
                  0.06)
    out = b.node("Conv", [z, b.weight([8, c, 1, 1]),
                          b.const("b", b.rng.normal(0, 0.2, 8).astype(np.float32))])
    return [1, 8] + list(hw), b.act_qdq(out, 0.1), [1, 8] + list(hw)


def squeeze_excitation_case(b, c, hw, k, stride=1, n=1, project=0, act="silu"):
    """Squeeze-excitation's start: a depthwise conv with SiLU, whose f32
    result a GlobalAveragePool reads, gated back by the Sigmoid of the mean
    (the depthwise layer sums each band's pixels for the pool as it stores
    them). With `project`, the quantized gated map feeds a 1x1 conv to that many
    channels, which runs the gating Mul on the pixels each thread's share
    reads (GraphLowering::denseConv). `act` "relu" puts a Relu where the
    SiLU goes."""
    h, w = hw
    p = k // 2
    x = b.act_qdq("x", 0.05)
    bias = b.const("b", b.rng.normal(0, 0.2, c).astype(np.float32))
    y = b.node("Conv", [x, b.weight([c, 1, k, k]), bias], kernel_shape=[k, k],
               strides=[stride, stride], pads=[p] * 4, group=c)
    y = silu(b, y, c) if act == "silu" else b.node("Relu", [y])
    gate = b.node("Sigmoid", [b.node("GlobalAveragePool", [y])])
    out = b.act_qdq(b.node("Mul", [y, gate]), 0.05)
    oh, ow = out_size(h, k, stride, p, p, 1), out_size(w, k, stride, p, p, 1)
    if project:
        pb = b.const("pb", b.rng.normal(0, 0.2, project).astype(np.float32))
        out = b.act_qdq(b.node("Conv", [out, b.weight([project, c, 1, 1]), pb]), 0.1)
        return [n, c, h, w], out, [n, project, oh, ow]
    return [n, c, h, w], out, [n, c, oh, ow]


def global_pool_case(b, shape):
    x = b.act_qdq("x", 0.05)
    y = b.act_qdq(b.node("GlobalAveragePool", [x]), 0.02)
    return list(shape), y, list(shape[:2]) + [1] * (len(shape) - 2)


def add_constant_case(b, shape):
    """x + a constant that is itself Q/DQ'd (a quantized constant operand)."""
    x = b.act_qdq("x", 0.05)
    c = b.act_qdq(b.const("c", b.rng.normal(0, 1, shape[1:]).astype(np.float32)), 0.03)
    return list(shape), b.act_qdq(b.node("Add", [x, c]), 0.1), list(shape)


def batched_case(b, transposed, symmetric=True):
    """Attention-like products of two activations, both read from the
    input: rows 0..4 of each [18, 7] matrix times rows 5.. (transposed: a
    strided right-hand side, as K^T; else rows of 7 as V). K = 7 is no
    multiple of 4 and N no multiple of 16; 2 x 3 batches."""
    x = b.act_qdq("x", 0.05, *((0, np.int8) if symmetric else ()))
    axes = b.const("ax", np.array([2], np.int64))
    a = b.node("Slice", [x, b.const("st", np.array([0], np.int64)),
                         b.const("en", np.array([5], np.int64)), axes])
    r = b.node("Slice", [x, b.const("st", np.array([5], np.int64)),
                         b.const("en", np.array([18 if transposed else 12], np.int64)),
                         axes])
    if transposed:
        r = b.node("Transpose", [r], perm=[0, 1, 3, 2])
    y = b.node("MatMul", [a, r])
    return [2, 3, 18, 7], b.act_qdq(y, 0.2), [2, 3, 5, 13 if transposed else 7]


def attention_case(b, zp=0, seq=18, softmax=False, merge=False):
    """Attention over rank-3 plain rows ([3 heads, seq, 24] in place of
    [heads, seq, d]): S = A . K^T with K^T a transposed view (K contiguous:
    each column packed 16 bytes at a time; K = 10, N = seq), then S . V with
    V a column slice (N contiguous: 16 columns of 4 rows interleaved per
    store; K = seq rows, 18 has 2 past the last group of 4, N = 19). With
    `softmax`, S is scaled, softmaxed and quantized: in the first product's
    epilogue where a tile holds a row (seq <= 64), else its own layer. With
    `merge`, the heads go back to rows (Transpose, Reshape to [seq, 57]):
    the product writes through the transpose's strides."""
    dt = np.uint8 if zp else np.int8
    x = b.act_qdq("x", 0.05, zp, dt)
    axes = b.const("ax", np.array([2], np.int64))

    def cols(lo, hi):
        return b.node("Slice", [x, b.const("st", np.array([lo], np.int64)),
                                b.const("en", np.array([hi], np.int64)), axes])

    kt = b.node("Transpose", [cols(10, 20)], perm=[0, 2, 1])
    s = b.node("MatMul", [cols(0, 10), kt])
    if softmax:
        s = b.node("Mul", [s, b.const("scale", np.array(0.3, np.float32))])
        s = b.act_qdq(b.node("Softmax", [s], axis=-1), 1 / 255, 0, np.uint8)
    else:
        s = b.act_qdq(s, 0.1, zp, dt)
    y = b.node("MatMul", [s, cols(4, 23)])
    if merge:
        y = b.node("Transpose", [y], perm=[1, 0, 2])
        y = b.node("Reshape", [y, b.const("shape", np.array([seq, 57], np.int64))])
        return [3, seq, 24], b.act_qdq(y, 0.2), [seq, 57]
    return [3, seq, 24], b.act_qdq(y, 0.2), [3, seq, 19]


CASES = {
    # Channels off every vector width, tiny and odd maps.
    "conv_ic3_oc7_3x3": lambda b: conv_case(b, 3, 7, (9, 11), 3, pads=(1, 1, 1, 1)),
    "conv_ic5_oc19_s2": lambda b: conv_case(b, 5, 19, (13, 10), 3, stride=2, pads=(1, 0, 1, 2)),
    "conv_ic17_oc65_1x1": lambda b: conv_case(b, 17, 65, (5, 7), 1),
    "conv_ic67_oc130_1x1_s2": lambda b: conv_case(b, 67, 130, (7, 7), 1, stride=2),
    "conv_ic1_oc33_7x7_s2": lambda b: conv_case(b, 1, 33, (17, 15), 7, stride=2,
                                                pads=(3, 3, 3, 3)),
    # Kernel rows inside the image run as one loop of KW * IC steps (the
    # stem's 7 x 3), in batches (tiles crossing rows and images) and on a
    # map exactly one window wide.
    "conv_stem_ic3_oc64_7x7_s2_batch2": lambda b: conv_case(
        b, 3, 64, (13, 61), 7, stride=2, pads=(3, 3, 3, 3), n=2),
    "conv_ic3_oc16_5x5_one_window_wide": lambda b: conv_case(
        b, 3, 16, (9, 5), 5, pads=(2, 0, 2, 0)),
    "conv_ic6_oc10_dil2": lambda b: conv_case(b, 6, 10, (12, 12), 3, dil=2, pads=(2, 2, 2, 2)),
    "conv_tiny_1x1_map": lambda b: conv_case(b, 9, 21, (1, 1), 3, pads=(1, 1, 1, 1)),
    "conv_tiny_2x3_map": lambda b: conv_case(b, 20, 36, (2, 3), 3, pads=(1, 1, 1, 1),
                                             relu=False),
    # Batches: tiles of output pixels span images.
    "conv_batch3_ic8_oc24_3x3": lambda b: conv_case(b, 8, 24, (5, 7), 3, pads=(1, 1, 1, 1), n=3),
    "depthwise_batch2_c24_s2": lambda b: conv_case(b, 24, 24, (9, 9), 3, stride=2,
                                                   pads=(1, 1, 1, 1), group=24, n=2),
    "conv_group2_ic10_oc6": lambda b: conv_case(b, 10, 6, (8, 9), 3, pads=(1, 1, 1, 1), group=2),
    "conv_group3_ic24_oc48_s2": lambda b: conv_case(b, 24, 48, (9, 9), 3, stride=2,
                                                    pads=(1, 1, 1, 1), group=3),
    "depthwise_c17_3x3": lambda b: conv_case(b, 17, 17, (10, 9), 3, pads=(1, 1, 1, 1), group=17),
    "depthwise_c40_5x5_s2": lambda b: conv_case(b, 40, 40, (11, 11), 5, stride=2,
                                                pads=(2, 2, 2, 2), group=40),
    # Stride-1 depthwise runs bands of two output rows: an odd row count
    # leaves a one-row band at each image's bottom.
    "depthwise_c33_3x3_odd_rows_batch2": lambda b: conv_case(
        b, 33, 33, (11, 7), 3, pads=(1, 1, 1, 1), group=33, n=2),
    "depthwise_c24_5x5_s1": lambda b: conv_case(b, 24, 24, (9, 13), 5,
                                                pads=(2, 2, 2, 2), group=24),
    "depthwise_c16_3x3_asym_pad": lambda b: conv_case(b, 16, 16, (8, 8), 3,
                                                      pads=(0, 1, 1, 0), group=16),
    "depthwise_c20_3x3_tiny_map": lambda b: conv_case(b, 20, 20, (3, 2), 3,
                                                      pads=(1, 1, 1, 1), group=20),
    # Dilated int8 depthwise interleaves 4 taps per dword (not columns).
    "depthwise_c20_3x3_dil2": lambda b: conv_case(b, 20, 20, (9, 8), 3, dil=2,
                                                  pads=(2, 2, 2, 2), group=20),
    # Wide rows run in chunks of pixels (the last one partial) per channel
    # block.
    "depthwise_c200_3x3_wide": lambda b: conv_case(b, 200, 200, (5, 61), 3,
                                                   pads=(1, 1, 1, 1), group=200),
    "depthwise_c200_3x3_s2_wide": lambda b: conv_case(
        b, 200, 200, (5, 123), 3, stride=2, pads=(1, 1, 1, 1), group=200),
    # On AVX-512, whole blocks of 64 channels interleave in-lane
    # (interleave64): every channel a whole block (tails of 3 and 1
    # pixels), blocks of 16 after them with odd rows on 2 images and a
    # fused SiLU, a stride 2 with a per-channel PRelu (the chain's own
    # constants reordered), 5x5 with a per-channel scale and shift, ReLU6.
    # A SiLU epilogue quantizing to a scale so small that both ends
    # saturate (silu >= -0.28 is -140 steps): the packs' saturation is the
    # lower clamp where the zero point is >= 0 (u8 131, s8 5), not at s8 -3.
    "conv_ic24_oc40_1x1_silu_saturating_u8_zp131": lambda b: conv_case(
        b, 24, 40, (6, 7), 1, post=silu, out_scale=0.002, out_zp=131,
        out_type=np.uint8),
    "conv_ic24_oc40_1x1_silu_saturating_s8_zp5": lambda b: conv_case(
        b, 24, 40, (6, 7), 1, post=silu, out_scale=0.002, out_zp=5,
        out_type=np.int8),
    "conv_ic24_oc40_1x1_silu_saturating_s8_zpm3": lambda b: conv_case(
        b, 24, 40, (6, 7), 1, post=silu, out_scale=0.002, out_zp=-3,
        out_type=np.int8),
    "depthwise_c64_3x3_whole_blocks": lambda b: conv_case(
        b, 64, 64, (9, 11), 3, pads=(1, 1, 1, 1), group=64),
    # A depthwise SiLU result read by a GlobalAveragePool: the layer sums
    # each band's pixels per chunk, and the mean adds the sums. 2-row bands
    # and a 1-row last band of each of 2 images, 40 channels (2 blocks, the
    # second of 8); 1-row bands (3x3, stride 2) with a tail of 2 pixels;
    # 5x5 rows of 150 pixels in 2 chunks, the last with a tail of 2.
    "depthwise_silu_pool_c40_odd_rows_batch2": lambda b: squeeze_excitation_case(
        b, 40, (9, 13), 3, n=2),
    "depthwise_silu_pool_c24_3x3_s2": lambda b: squeeze_excitation_case(
        b, 24, (11, 11), 3, stride=2),
    "depthwise_silu_pool_c40_5x5_chunks": lambda b: squeeze_excitation_case(
        b, 40, (5, 150), 5),
    # The gating Mul inside the projection's layer: 40 channels (a masked
    # block of 8) and a gate per image; 18 channels (stored 20 apart: the
    # conv reads each pixel's 2 padding bytes, which the map does not
    # write); a 7x7 map (an equal pixel range per thread, tiles of MR and
    # MR - 1) and a 16x24 one (whole tiles per thread).
    "squeeze_excitation_c40_project_batch2": lambda b: squeeze_excitation_case(
        b, 40, (9, 13), 3, n=2, project=24),
    "squeeze_excitation_c18_project_7x7": lambda b: squeeze_excitation_case(
        b, 18, (7, 7), 3, project=20),
    "squeeze_excitation_c32_project_16x24": lambda b: squeeze_excitation_case(
        b, 32, (16, 24), 3, project=48),
    "depthwise_c144_3x3_odd_rows_batch2_silu": lambda b: conv_case(
        b, 144, 144, (7, 10), 3, pads=(1, 1, 1, 1), group=144, n=2, post=silu),
    "depthwise_c128_3x3_s2_prelu": lambda b: conv_case(
        b, 128, 128, (9, 13), 3, stride=2, pads=(1, 1, 1, 1), group=128, post=prelu),
    "depthwise_c80_5x5_scale_shift": lambda b: conv_case(
        b, 80, 80, (6, 9), 5, pads=(2, 2, 2, 2), group=80, post=scale_shift),
    "depthwise_c192_3x3_relu6": lambda b: conv_case(
        b, 192, 192, (5, 6), 3, pads=(1, 1, 1, 1), group=192, post=relu6),
    # Bands and tiles inside the image take a version with no bounds
    # checks: whole tiles whose last one reads the column past the image (W
    # a multiple of 4; stride 2 with W odd), and a left padding wider than
    # the columns a tile carries over.
    "depthwise_c32_3x3_w24": lambda b: conv_case(b, 32, 32, (8, 24), 3,
                                                 pads=(1, 1, 1, 1), group=32),
    "depthwise_c48_3x3_s2_w31": lambda b: conv_case(
        b, 48, 48, (9, 31), 3, stride=2, pads=(1, 1, 1, 1), group=48),
    "depthwise_c16_3x3_s2_pad2": lambda b: conv_case(
        b, 16, 16, (9, 40), 3, stride=2, pads=(1, 2, 1, 2), group=16),
    # AMX tile kernels (on an AMX host as host): the stride's four phases in
    # batches, a channel block past the last channel; taps read in place
    # (no padding) with a kernel row as one K run; dilation through the
    # relayout with two K tiles per tap; the residual epilogue on a grid
    # whose rows past each output row store nowhere.
    "amx_conv_ic64_oc72_3x3_s2_batch2": lambda b: conv_case(
        b, 64, 72, (25, 23), 3, stride=2, pads=(1, 1, 1, 1), n=2),
    "amx_conv_ic40_oc33_3x3_in_place": lambda b: conv_case(b, 40, 33, (8, 10), 3),
    "amx_conv_ic128_oc40_3x3_dil2": lambda b: conv_case(b, 128, 40, (19, 17), 3, dil=2,
                                                        pads=(2, 2, 2, 2)),
    "amx_residual_add_c72": lambda b: residual_add_case(b, 72, (7, 6), True),
    "residual_add_c24": lambda b: residual_add_case(b, 24, (7, 9), False),
    "residual_add_downsample_c20": lambda b: residual_add_case(b, 20, (6, 5), True),
    # The 1x1 conv's residual epilogue on whole 64-channel blocks (AVX-512:
    # one store per pixel); 35 and 15 pixels end in a short tile. 64
    # channels: the threads split the pixels; 576: the (block, tile) items,
    # the next block's weights prefetched.
    "residual_add_1x1_c64": lambda b: residual_add_case(b, 64, (7, 5), True),
    "residual_add_1x1_c576": lambda b: residual_add_case(b, 576, (5, 3), True),
    # The Add in a depthwise and a grouped conv's epilogue (the float twins:
    # f32 residuals at each group's channels).
    "residual_add_depthwise_c20": lambda b: residual_add_case(b, 20, (6, 7), False, 20),
    "residual_add_group2_c36": lambda b: residual_add_case(b, 36, (5, 6), False, 2),
    # Inputs known to be Relu outputs (avx2: int8-maddubs tiles of 2x32 and
    # 4x16, the last under a mask).
    "relu_input_3x3_oc64": lambda b: relu_input_case(b, 5, 24, 64, (9, 7), 3),
    "relu_input_pool_1x1_oc20": lambda b: relu_input_case(b, 6, 36, 20, (10, 8), 1, pool=True),
    "relu_input_gemm": lambda b: relu_input_case(b, 4, 8, 10, (4, 3), 1, gemm=True),
    # Concatenations written in place by their inputs' layers, and not.
    "concat_inception_n2": lambda b: concat_inception_case(b, 2, (6, 7)),
    "concat_inception_rescaled": lambda b: concat_inception_case(b, 1, (5, 5), False),
    "concat_dense_block": concat_dense_case,
    "concat_shared_input": concat_shared_case,
    "concat_relu_slices": concat_relu_case,
    "concat_prefix_flatten": concat_prefix_flatten_case,
    # Rows of 40 (a vector and a masked 8; 11 rows: a tile and a tail).
    "matmul_residual_quantized": lambda b: matmul_residual_case(b, 11, 40, True),
    "matmul_residual_f32": lambda b: matmul_residual_case(b, 11, 40, False),
    "gemm_m1_k3_n5": lambda b: gemm_case(b, 1, 3, 5),
    "gemm_m7_k67_n130": lambda b: gemm_case(b, 7, 67, 130),
    "gemm_m13_k16_n17": lambda b: gemm_case(b, 13, 16, 17),
    "avgpool_3x3_s2_pad": lambda b: pool_case(b, 19, (9, 10), "AveragePool", 3, 2, (1, 1, 1, 1)),
    "avgpool_count_pad": lambda b: pool_case(b, 5, (7, 7), "AveragePool", 3, 2, (1, 1, 1, 1), 1),
    "maxpool_3x3_s2": lambda b: pool_case(b, 23, (10, 9), "MaxPool", 3, 2, (0, 1, 1, 0)),
    # Whole vectors (64 int8 / 16 f32 channels) and a masked remainder.
    "maxpool_c83_3x3_s1_batch2": lambda b: pool_case(b, 83, (6, 7), "MaxPool", 3, 1,
                                                     (1, 1, 1, 1), n=2),
    "maxpool_3x3_nan_taps": maxpool_nan_case,
    "broadcast_channel": lambda b: broadcast_case(b, (1, 21, 5, 6), (1, 21, 1, 1)),
    "broadcast_row": lambda b: broadcast_case(b, (2, 3, 7), (7,)),
    "global_avgpool_rank3": lambda b: global_pool_case(b, (2, 7, 13)),
    "global_avgpool_rank5": lambda b: global_pool_case(b, (1, 6, 3, 4, 5)),
    # Large maps: threads sum parts of the rows, one adds them (4 parts of
    # 100 pixels for 2 images; 2 parts of 351 pixels; an odd count, 7x7, a
    # part per row for 2 images; 40, 24 and 200 channels, no multiple of
    # 16).
    "channel_shuffle_c40": lambda b: channel_shuffle_case(b, 40, (5, 6)),
    "channel_shuffle_c64": lambda b: channel_shuffle_case(b, 64, (3, 7)),
    "global_avgpool_parts4": lambda b: global_pool_case(b, (2, 40, 20, 20)),
    "global_avgpool_parts2": lambda b: global_pool_case(b, (1, 24, 26, 27)),
    "global_avgpool_rows7": lambda b: global_pool_case(b, (2, 200, 7, 7)),
    # The NCHW input of 5 channels made NHWC (int8: quantized, 8 bytes a
    # pixel; float: a copy): each pixel's channels come from 5 planes, so
    # the threads cut the planes' 667 pixels into runs (384 and 283) and
    # each takes whole runs of every plane of both images.
    "conv_ic5_1x1_nchw_input_runs": lambda b: conv_case(b, 5, 7, (23, 29), 1, n=2),
    "add_quantized_constant": lambda b: add_constant_case(b, (2, 5, 3, 4)),
    # A dense map is one loop of 3059 elements: threads take runs of it
    # (multiples of 64), the last run with the 3 past the last vector.
    "add_quantized_constant_runs": lambda b: add_constant_case(b, (1, 7, 19, 23)),
    "layernorm_last_axis": lambda b: layernorm_case(b, (1, 5, 19), -1),
    "layernorm_two_axes": lambda b: layernorm_case(b, (2, 3, 4, 5), 2),
    # 64 rows of 130 (8 vectors and a masked tail), shared by threads.
    "layernorm_decomposed": lambda b: layernorm_decomposed_case(b, (1, 64, 130)),
    "layernorm_decomposed_mul_plain": lambda b: layernorm_decomposed_case(
        b, (2, 9, 48), pow_square=False, affine=False),
    # Rows of 37 (2 vectors and a masked 5) in groups of 4, 42 rows: each
    # thread's last rows one at a time; rows of 200 (13 vectors) one by one.
    "softmax_rows37": lambda b: softmax_case(b, (2, 3, 7, 37)),
    "softmax_rows200": lambda b: softmax_case(b, (1, 9, 200)),
    # Products of two activations through the packed dense kernel.
    "attention_packed_rhs": lambda b: attention_case(b),
    "attention_packed_rhs_u8": lambda b: attention_case(b, zp=128),
    # Softmax in the scores' epilogue: rows of 18 (2 vectors, the second of
    # 2 lanes; a 12-row tile and one of 6 per head); rows of 64 (4 vectors,
    # 6-row tiles; AVX2 and generic: their own layer); rows of 70 (no tile
    # holds them: their own layer).
    "attention_softmax_18": lambda b: attention_case(b, softmax=True),
    "attention_softmax_64": lambda b: attention_case(b, seq=64, softmax=True),
    "attention_softmax_70": lambda b: attention_case(b, seq=70, softmax=True),
    # The heads back to rows: the second product writes rows of 57 through
    # the transpose's strides (no copy); the Reshape is a view.
    "attention_merge_heads": lambda b: attention_case(b, seq=20, softmax=True,
                                                      merge=True),
    "batched_qk_transposed": lambda b: batched_case(b, True),
    "batched_av_strided": lambda b: batched_case(b, False),
    "batched_zero_point": lambda b: batched_case(b, True, symmetric=False),
    # 29 channels a group: one whole vector and a masked remainder.
    "channel_shuffle_c58": lambda b: channel_shuffle_case(b, 58, (4, 5)),
    # RGB stems over rows of more than 16 pixels with a remainder (37, 45):
    # the image's quantize (or NCHW -> NHWC copy) interleaves 3 planes in
    # registers; tiles of 16 pixels inside one output row read them at
    # constant offsets, those across rows or borders one by one.
    "stem_rgb_3x3_s2": lambda b: conv_case(b, 3, 16, (20, 37), 3, stride=2,
                                           pads=(1, 1, 1, 1)),
    "stem_rgb_7x7_s2": lambda b: conv_case(b, 3, 24, (30, 45), 7, stride=2,
                                           pads=(3, 3, 3, 3)),
    # A projection whose residual Add is quantized too: the add's two FMAs
    # after the product's own quantization, the residual read as rows.
    "matmul_residual_requantized": lambda b: matmul_residual_case(b, 11, 40, True, True),
    # (New cases go last: a case's index seeds its data and picks its zero
    # point, so a case inserted above moves every later one's.)
    # Without VNNI, 3x3 bands over a multiple of 8 channels go in blocks of
    # 8, two pixels per epilogue vector: an odd pixel count per row (the
    # tail of 3 pairs its last pixel with itself) and a 16-channel block's
    # half left over (40 channels).
    "depthwise_c40_3x3_odd_rows_batch2": lambda b: conv_case(
        b, 40, 40, (9, 7), 3, pads=(1, 1, 1, 1), group=40, n=2),
    # 8-channel blocks (halfBlocks) on a map of one tail tile per row: 3
    # pixels, the last paired with itself; a one-row band at the bottom.
    "depthwise_c24_3x3_tiny_map": lambda b: conv_case(b, 24, 24, (3, 3), 3,
                                                      pads=(1, 1, 1, 1), group=24),
    # Without a chain the 3x3 bands go in blocks of 8 channels on AVX2
    # (halfBlocks), whose sums are 8 lanes a row.
    "depthwise_relu_pool_c40_odd_rows_batch2": lambda b: squeeze_excitation_case(
        b, 40, (9, 13), 3, n=2, act="relu"),
    # On AVX-512, 32 channels after the wide blocks go in one block of two
    # vectors in channel order (pairBlocks): stride 2 over 96 (a wide block
    # and a pair) on 2 images with tails of 2 pixels and a per-channel
    # PRelu; 160 (two wide, a pair) in 2-row bands with a one-row band
    # left and a fused SiLU; 5x5 over 112 (a wide block, a pair and 16).
    "depthwise_c96_3x3_s2_prelu_batch2": lambda b: conv_case(
        b, 96, 96, (9, 11), 3, stride=2, pads=(1, 1, 1, 1), group=96, n=2,
        post=prelu),
    "depthwise_c160_3x3_odd_rows_silu": lambda b: conv_case(
        b, 160, 160, (7, 10), 3, pads=(1, 1, 1, 1), group=160, post=silu),
    "depthwise_c112_5x5_s2_scale_shift": lambda b: conv_case(
        b, 112, 112, (11, 13), 5, stride=2, pads=(2, 2, 2, 2), group=112,
        post=scale_shift),
}

# Activation quantization variants (int8 and uint8, zero points off 0).
ZERO_POINTS = [(np.int8, -3), (np.uint8, 131)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qatc", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--only", action="append", default=[])
    args = ap.parse_args()
    c = Checker(args)
    print(amx_note(), flush=True)
    os.makedirs(args.work, exist_ok=True)
    targets = args.targets.split(",")
    for i, (case, make) in enumerate(CASES.items()):
        if args.only and case not in args.only:
            continue
        dtype, zp = ZERO_POINTS[i % len(ZERO_POINTS)]
        for qdq in (True, False):
            label = f"{case}_{'qdq' if qdq else 'float'}"
            work = os.path.join(args.work, label)
            os.makedirs(work, exist_ok=True)
            b = Builder(np.random.default_rng(i), qdq, zp, dtype)
            in_shape, out, out_shape = make(b)
            model = os.path.join(work, label + ".onnx")
            b.model(model, in_shape, out, out_shape)
            inp = os.path.join(work, "x.npy")
            np.save(inp, np.random.default_rng(100 + i).normal(0, 1.5, in_shape)
                    .astype(np.float32))
            print(f"== {label}", flush=True)
            try:
                check_model(c, label, model, inp, None, work, targets)
            except RuntimeError as e:
                c.fail(label, str(e))
    return c.finish("every kernel agrees with the reference")


if __name__ == "__main__":
    sys.exit(main())
