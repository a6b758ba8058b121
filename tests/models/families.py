#!/usr/bin/python3
"""Generates small ONNX test models of the vision families published models use.

    /usr/bin/python3 tests/models/families.py --out DIR [--models a,b,...] [--list]

Small (64x64 to 96x128 inputs, narrow channels, < ~3 MB each except googlenet)
but structurally faithful models, random seeded weights, BatchNorm statistics
measured on random batches (as in generate.py). Families:

  unet            U-Net: 3 encoder levels (Conv-BN-ReLU x2, MaxPool), decoder
                  upsampling with ConvTranspose2d (k2 s2; k3 s2 p1
                  output_padding 1; k2 s2 groups 4), torch.cat skips, 1x1 head.
  lraspp          torchvision's LRASPP head on a reduced mobilenet_v3_small
                  (width 0.5, reduced tail, dilated last stage): Hardswish,
                  squeeze-excitation, AdaptiveAvgPool + Sigmoid gating, bilinear
                  Resize (align_corners=False) to runtime (Shape-derived) sizes.
                  (torchvision's lraspp_mobilenet_v3_large is 12.9 MB.)
  fpn_ssd         Detector: strided-conv backbone, FPN top-down path (nearest
                  Resize x2 + lateral adds), P6 by a strided conv, SSD heads per
                  level: Conv -> Transpose -> Reshape(N, -1, K) -> Concat over
                  levels; two outputs: boxes [N, A, 4], sigmoid scores [N, A, 4].
  face_nhwc       Face detector: NHWC float input (0..255) transposed inside,
                  normalised (Mul/Sub), depthwise-separable stride-2 blocks with
                  ReLU6 (Clip), ReLU and PRelu, heads on two levels; outputs
                  scores (Softmax over the last axis), boxes and landmarks.
                  Also exported at opset 12 (as published face detectors are).
  line_seg        M-LSD-like line-segment detector: NHWC input, bilinear decoder,
                  post-processing inside the graph (3x3 max-pool suppression with
                  Equal/Cast/Mul, TopK over the map, the peaks' (y, x) by int64
                  floor Div and Mod of the indices, Concat); int64 and float outputs.
  shape_subgraph  Built with onnx.helper the way tf2onnx writes TF graphs: NHWC
                  input with a dynamic batch, Transpose to NCHW, a stride-2 Conv
                  with 'SAME' padding computed at run time (Pad whose pads come
                  from Shape -> Slice -> Equal/Where -> Add/Sub/Mul/Div -> Max/Min
                  -> Concat), a nearest Resize whose sizes come from Shape ->
                  Slice -> Cast -> Mul 2 -> Cast -> Concat (empty roi/scales),
                  a Reshape to Shape -> Gather -> Unsqueeze -> Concat, and Range,
                  ConstantOfShape, Expand, Tile, Squeeze on the shapes. All the
                  shape math is constant once the input shape is fixed. (At
                  opset 11 integer Max/Min go through Cast to float, as Max-8
                  has no integer types.)

For each family: NAME_float_op11.onnx and NAME_float_op13.onnx (dynamic batch
axis on the input and outputs), NAME_qdq.onnx (TensorRT recipe, trt_qdq.py,
opset 13, dynamic batch; ConvTranspose2d quantized by QuantConvTranspose2d
below: per-tensor input, weight per output channel on axis 1, per tensor for
groups > 1), face_nhwc_float_op12.onnx, NAME_input.npy (batch 1) and
NAME_calib.npy (batch 8, also the Q/DQ calibration data); shape_subgraph has no
Q/DQ variant.

"Requantize" variants (NAME_rq_qdq.onnx, static 1x3x64x64, num_classes 10, and
NAME_rq_input.npy) of torchvision squeezenet1_1, shufflenet_v2_x1_0 and
googlenet: exported as NVIDIA pytorch-quantization does with its quantized
pooling modules: besides the Conv/Linear input quantizers every MaxPool2d and
(Adaptive)AvgPool2d has its own input quantizer, every input of the Fire and
Inception torch.cat has its own, and ShuffleNet's channel shuffle quantizes
its input. Activation scales come from percentile calibration (99.99% of |x|,
pytorch-quantization's histogram "percentile" method), so the separately
calibrated quantizers disagree: the graphs have DequantizeLinear(s1) ->
[MaxPool/Concat/Reshape/Transpose/...] -> QuantizeLinear(s2 != s1) chains
(counted and printed as "requant").

Deterministic (fixed seeds). Needs Debian's python (torch 1.13, torchvision
0.14, onnx 1.12). Check the files with families_check.py (ONNX Runtime).
"""

import argparse
import copy
import math
import os
import sys
import time
import warnings
import zlib
from collections import Counter

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trt_qdq  # noqa: E402

SEED = 0
CALIB = 8               # calibration samples
PERCENTILE = 99.99      # activation calibration of the _rq models


# --------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------

def conv_bn(cin, cout, k=3, s=1, groups=1, act="relu", prelu=False):
    layers = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if prelu:
        layers.append(nn.PReLU(cout))
    elif act == "relu":
        layers.append(nn.ReLU(inplace=True))
    elif act == "relu6":
        layers.append(nn.ReLU6(inplace=True))
    return nn.Sequential(*layers)


def flat_head(t, k):
    """SSD/YOLO-style head output: [N, A*k, H, W] -> [N, H*W*A, k]."""
    return t.permute(0, 2, 3, 1).reshape(t.shape[0], -1, k)


# --------------------------------------------------------------------------
# 1. U-Net
# --------------------------------------------------------------------------

class UNet(nn.Module):
    def __init__(self, cin=3, classes=3, w=8):
        super().__init__()
        self.enc1 = nn.Sequential(conv_bn(cin, w), conv_bn(w, w))
        self.enc2 = nn.Sequential(conv_bn(w, 2 * w), conv_bn(2 * w, 2 * w))
        self.enc3 = nn.Sequential(conv_bn(2 * w, 4 * w), conv_bn(4 * w, 4 * w))
        self.pool = nn.MaxPool2d(2, 2)
        self.mid = nn.Sequential(conv_bn(4 * w, 8 * w), conv_bn(8 * w, 8 * w))
        self.up3 = nn.ConvTranspose2d(8 * w, 4 * w, 2, stride=2)
        self.dec3 = nn.Sequential(conv_bn(8 * w, 4 * w), conv_bn(4 * w, 4 * w))
        self.up2 = nn.ConvTranspose2d(4 * w, 2 * w, 3, stride=2, padding=1, output_padding=1)
        self.dec2 = nn.Sequential(conv_bn(4 * w, 2 * w), conv_bn(2 * w, 2 * w))
        self.up1 = nn.ConvTranspose2d(2 * w, w, 2, stride=2, groups=4)
        self.dec1 = nn.Sequential(conv_bn(2 * w, w), conv_bn(w, w))
        self.head = nn.Conv2d(w, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        e3 = self.enc3(self.pool(e2))
        m = self.mid(self.pool(e3))
        d3 = self.dec3(torch.cat([self.up3(m), e3], 1))
        d2 = self.dec2(torch.cat([self.up2(d3), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return self.head(d1)


# --------------------------------------------------------------------------
# 2. LRASPP (torchvision head on a reduced mobilenet_v3_small)
# --------------------------------------------------------------------------

class LRASPPOut(nn.Module):
    """torchvision's LRASPP returns {"out": tensor}; export the tensor."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def build_lraspp(classes=4):
    from torchvision.models import mobilenet_v3_small
    from torchvision.models.segmentation import lraspp
    backbone = mobilenet_v3_small(weights=None, width_mult=0.5, reduced_tail=True, dilated=True)
    return LRASPPOut(lraspp._lraspp_mobilenetv3(backbone, classes))


# --------------------------------------------------------------------------
# 3. FPN + SSD heads
# --------------------------------------------------------------------------

class FPNSSD(nn.Module):
    def __init__(self, classes=4, anchors=3, ch=32):
        super().__init__()
        self.classes, self.anchors = classes, anchors
        self.stem = conv_bn(3, 16, s=2)
        self.c3 = nn.Sequential(conv_bn(16, 32, s=2), conv_bn(32, 32))
        self.c4 = nn.Sequential(conv_bn(32, 48, s=2), conv_bn(48, 48))
        self.c5 = nn.Sequential(conv_bn(48, 64, s=2), conv_bn(64, 64))
        self.lat3, self.lat4, self.lat5 = (nn.Conv2d(c, ch, 1) for c in (32, 48, 64))
        self.add3, self.add4 = trt_qdq.Add(), trt_qdq.Add()
        self.smooth = nn.ModuleList(nn.Conv2d(ch, ch, 3, padding=1) for _ in range(3))
        self.p6 = nn.Conv2d(64, ch, 3, stride=2, padding=1)
        self.cls = nn.ModuleList(nn.Conv2d(ch, anchors * classes, 3, padding=1) for _ in range(4))
        self.box = nn.ModuleList(nn.Conv2d(ch, anchors * 4, 3, padding=1) for _ in range(4))

    def forward(self, x):
        c3 = self.c3(self.stem(x))
        c4 = self.c4(c3)
        c5 = self.c5(c4)
        p5 = self.lat5(c5)
        p4 = self.add4(self.lat4(c4), F.interpolate(p5, scale_factor=2, mode="nearest"))
        p3 = self.add3(self.lat3(c3), F.interpolate(p4, scale_factor=2, mode="nearest"))
        feats = [s(p) for s, p in zip(self.smooth, (p3, p4, p5))] + [self.p6(c5)]
        boxes = torch.cat([flat_head(b(f), 4) for b, f in zip(self.box, feats)], 1)
        scores = torch.cat([flat_head(c(f), self.classes) for c, f in zip(self.cls, feats)], 1)
        return boxes, torch.sigmoid(scores)


# --------------------------------------------------------------------------
# 4. NHWC face detector
# --------------------------------------------------------------------------

def dw_block(cin, cout, s):
    """Depthwise 3x3 (stride s) -> BN -> ReLU6 or ReLU, pointwise -> BN -> PReLU."""
    return nn.Sequential(conv_bn(cin, cin, 3, s, groups=cin, act="relu6" if s == 2 else "relu"),
                         conv_bn(cin, cout, 1, prelu=True))


class FaceNHWC(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = conv_bn(3, 16, s=2, act="relu6")
        self.body = nn.Sequential(dw_block(16, 24, 1), dw_block(24, 32, 2), dw_block(32, 48, 2))
        self.down = dw_block(48, 64, 2)
        self.anchors = (2, 3)
        levels = list(zip((48, 64), self.anchors))
        self.cls = nn.ModuleList(nn.Conv2d(c, a * 2, 3, padding=1) for c, a in levels)
        self.box = nn.ModuleList(nn.Conv2d(c, a * 4, 3, padding=1) for c, a in levels)
        self.ldm = nn.ModuleList(nn.Conv2d(c, a * 10, 1) for c, a in levels)

    def forward(self, x):                          # x: [N, H, W, 3], 0..255
        x = x.permute(0, 3, 1, 2) * (1.0 / 128.0) - 1.0
        f1 = self.body(self.stem(x))
        feats = (f1, self.down(f1))
        scores = torch.cat([flat_head(c(f), 2) for c, f in zip(self.cls, feats)], 1)
        boxes = torch.cat([flat_head(b(f), 4) for b, f in zip(self.box, feats)], 1)
        ldms = torch.cat([flat_head(m(f), 10) for m, f in zip(self.ldm, feats)], 1)
        return torch.softmax(scores, dim=-1), boxes, ldms


class LineSeg(nn.Module):
    """An M-LSD-like line-segment detector with its post-processing in the
    graph: NHWC input, a strided backbone, a bilinear upsampling decoder, a
    4-channel map (center + displacements) and, as in the published models,
    the center peaks chosen inside the model: 3x3 max-pool suppression
    (Equal -> Cast -> Mul), TopK over the flattened map, and the peaks'
    (y, x) from the indices (floor Div / Mod on int64, Unsqueeze, Concat)."""

    def __init__(self, k=50):
        super().__init__()
        self.k = k
        self.enc = nn.Sequential(conv_bn(3, 16, s=2), conv_bn(16, 24), conv_bn(24, 32, s=2),
                                 conv_bn(32, 32))
        self.dec = conv_bn(32, 16)
        self.head = nn.Conv2d(16, 4, 1)

    def forward(self, x):                          # x: [N, H, W, 3], 0..255
        x = x.permute(0, 3, 1, 2) * (1.0 / 127.5) - 1.0
        f = self.enc(x)
        f = F.interpolate(f, scale_factor=2.0, mode="bilinear", align_corners=False)
        vmap = self.head(self.dec(f))
        center = torch.sigmoid(vmap[:, :1])
        hmax = F.max_pool2d(center, 3, 1, 1)
        center = center * (hmax == center).float()
        w = center.shape[3]
        scores, idx = torch.topk(center.reshape(center.shape[0], -1), self.k, dim=1)
        yy = torch.div(idx, w, rounding_mode="floor").unsqueeze(-1)
        xx = torch.remainder(idx, w).unsqueeze(-1)
        return torch.cat([yy, xx], dim=-1), scores, vmap


# --------------------------------------------------------------------------
# 5. tf2onnx-style runtime shape subgraph (onnx.helper)
# --------------------------------------------------------------------------

SHAPE_HW, SHAPE_COUT = (48, 41), 8      # even H: pads (0, 1); odd W: pads (1, 1)


def shape_subgraph_weights():
    rng = np.random.RandomState(SEED)
    w = (rng.standard_normal((SHAPE_COUT, 3, 3, 3)) * math.sqrt(2.0 / 27)).astype(np.float32)
    b = (rng.standard_normal(SHAPE_COUT) * 0.1).astype(np.float32)
    return w, b


def shape_subgraph_proto(opset):
    import onnx
    from onnx import TensorProto as TP, helper as oh, numpy_helper as nh

    w, b = shape_subgraph_weights()
    nodes, inits, count = [], [], Counter()
    i64 = lambda v: np.array(v, dtype=np.int64)          # noqa: E731

    def const(name, value):
        if name not in {t.name for t in inits}:
            inits.append(nh.from_array(np.asarray(value), name))
        return name

    def op(op_type, inputs, **attrs):
        count[op_type] += 1
        name = f"{op_type}__{count[op_type]}" if count[op_type] > 1 else op_type
        nodes.append(oh.make_node(op_type, list(inputs), [name + ":0"], name=name, **attrs))
        return name + ":0"

    def unsqueeze(x, axes):
        if opset >= 13:
            return op("Unsqueeze", [x, const(f"const_axes_{'_'.join(map(str, axes))}", i64(axes))])
        return op("Unsqueeze", [x], axes=axes)

    def squeeze(x, axes):
        if opset >= 13:
            return op("Squeeze", [x, const(f"const_axes_{'_'.join(map(str, axes))}", i64(axes))])
        return op("Squeeze", [x], axes=axes)

    def int_minmax(kind, a, b):                # Max/Min-8 have no int64; tf2onnx casts
        if opset >= 12:
            return op(kind, [a, b])
        fa, fb = op("Cast", [a], to=TP.FLOAT), op("Cast", [b], to=TP.FLOAT)
        return op("Cast", [op(kind, [fa, fb])], to=TP.INT64)

    def sl(x, start, end):
        return op("Slice", [x, const(f"const_starts_{start}", i64([start])),
                            const(f"const_ends_{end}", i64([end])),
                            const("const_axes_0", i64([0]))])

    k, s = 3, 2
    t = op("Transpose", ["input"], perm=[0, 3, 1, 2])
    hw = sl(op("Shape", [t]), 2, 4)                                  # [H, W]
    hw = op("Where", [op("Equal", [hw, const("const_zero", i64(0))]),
                      const("const_one", i64(1)), hw])
    out = op("Div", [op("Add", [hw, const("const_stride_m1", i64(s - 1))]),
                     const("const_stride", i64(s))])                  # ceil(in / s)
    need = op("Sub", [op("Add", [op("Mul", [op("Sub", [out, "const_one"]), "const_stride"]),
                                 const("const_kernel", i64(k))]), hw])
    total = int_minmax("Min", int_minmax("Max", need, "const_zero"),
                       const("const_k_m1", i64(k - 1)))
    beg = op("Div", [total, const("const_two", i64(2))])
    end = op("Sub", [total, beg])
    zeros2 = const("const_zeros2", i64([0, 0]))
    pads = op("Concat", [zeros2, beg, zeros2, end], axis=0)
    padded = op("Pad", [t, pads, const("const_pad_value", np.array(0.0, np.float32))],
                mode="constant")
    conv = op("Conv", [padded, const("conv.weight", w), const("conv.bias", b)],
              kernel_shape=[k, k], strides=[s, s], pads=[0, 0, 0, 0], dilations=[1, 1], group=1)
    r = op("Relu", [conv])

    sr = op("Shape", [r])
    up = op("Cast", [op("Mul", [op("Cast", [sl(sr, 2, 4)], to=TP.FLOAT),
                                const("const_scale2", np.array(2.0, np.float32))])], to=TP.INT64)
    sizes = op("Concat", [sl(sr, 0, 2), up], axis=0)
    empty = const("const_empty_float", np.zeros((0,), np.float32))
    y = op("Resize", [r, empty, empty, sizes], mode="nearest",
           coordinate_transformation_mode="asymmetric", nearest_mode="floor")

    yt = op("Transpose", [y], perm=[0, 2, 3, 1])                     # NHWC
    sy = op("Shape", [yt])
    n = op("Gather", [sy, const("const_idx0", i64(0))], axis=0)     # scalar N
    c = squeeze(sl(sy, 3, 4), [0])                                   # scalar C
    n1, c1 = unsqueeze(n, [0]), unsqueeze(c, [0])
    tokens = op("Reshape", [yt, op("Concat", [n1, const("const_minus1", i64([-1])), c1], axis=0)])

    ramp = op("Cast", [op("Range", [const("const_zero_scalar", i64(0)), c,
                                    const("const_one_scalar", i64(1))])], to=TP.FLOAT)
    bias = unsqueeze(op("Mul", [ramp, const("const_tenth", np.array(0.1, np.float32))]), [0, 1])
    hw_tok = unsqueeze(op("Gather", [op("Shape", [tokens]), const("const_idx1", i64(1))],
                          axis=0), [0])
    bias = op("Tile", [bias, op("Concat", [n1, hw_tok, const("const_one_1d", i64([1]))], axis=0)])
    half = op("ConstantOfShape", [op("Concat", [const("const_ones2", i64([1, 1])), c1], axis=0)],
              value=nh.from_array(np.array([0.5], np.float32), "value"))
    half = op("Expand", [half, op("Concat", [n1, "const_one_1d", c1], axis=0)])    # [N, 1, C]
    op("Add", [op("Mul", [tokens, half]), bias])
    nodes[-1].output[0] = "output"                   # the graph output

    h, wd = SHAPE_HW
    oh_, ow = 2 * ((h + 1) // 2), 2 * ((wd + 1) // 2)
    graph = oh.make_graph(
        nodes, "shape_subgraph",
        [oh.make_tensor_value_info("input", TP.FLOAT, ["batch", h, wd, 3])],
        [oh.make_tensor_value_info("output", TP.FLOAT, ["batch", oh_ * ow, SHAPE_COUT])],
        inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)],
                          producer_name="tests/models/families.py (tf2onnx style)")
    model.ir_version = 7
    onnx.checker.check_model(model)
    return model


def shape_subgraph_reference(x):
    """What shape_subgraph computes, in torch: x [N, H, W, 3] -> [N, 2H'*2W', C]."""
    w, b = shape_subgraph_weights()
    t = torch.as_tensor(x).permute(0, 3, 1, 2)
    pads = []
    for size in t.shape[2:]:
        total = min(max(((size + 1) // 2 - 1) * 2 + 3 - size, 0), 2)
        pads.append((total // 2, total - total // 2))
    t = F.pad(t, (pads[1][0], pads[1][1], pads[0][0], pads[0][1]))
    r = F.relu(F.conv2d(t, torch.from_numpy(w), torch.from_numpy(b), stride=2))
    y = F.interpolate(r, scale_factor=2, mode="nearest").permute(0, 2, 3, 1)
    y = y.reshape(y.shape[0], -1, y.shape[3])
    return y * 0.5 + torch.arange(y.shape[2], dtype=torch.float32) * 0.1


# --------------------------------------------------------------------------
# Q/DQ additions (not in trt_qdq.py): ConvTranspose2d, pooling, concat, shuffle
# --------------------------------------------------------------------------

class QuantConvTranspose2d(nn.ConvTranspose2d):
    """ConvTranspose2d with a per-tensor input quantizer and a weight quantizer
    per output channel (axis 1 of the [Cin, Cout/g, kh, kw] weight), per tensor
    when groups > 1 (axis 1 then holds Cout/g channels of each group)."""

    def _init_quant(self):
        self.input_quantizer = trt_qdq.TensorQuantizer()
        self.weight_quantizer = (trt_qdq.TensorQuantizer(axis=1, channels=self.out_channels)
                                 if self.groups == 1 else trt_qdq.TensorQuantizer())

    def forward(self, x):
        return F.conv_transpose2d(self.input_quantizer(x), self.weight_quantizer(self.weight),
                                  self.bias, self.stride, self.padding, self.output_padding,
                                  self.groups, self.dilation)


def _pool_patch(base):
    def _init_quant(self):
        self.input_quantizer = trt_qdq.TensorQuantizer()

    def forward(self, x):
        return base.forward(self, self.input_quantizer(x))
    return type("Quant" + base.__name__, (base,), {"_init_quant": _init_quant, "forward": forward})


def _cat_patches():
    from torchvision.models import shufflenetv2, squeezenet
    import importlib
    googlenet = importlib.import_module("torchvision.models.googlenet")

    class QuantFire(squeezenet.Fire):
        def _init_quant(self):
            self.cat_quantizers = nn.ModuleList(trt_qdq.TensorQuantizer() for _ in range(2))

        def forward(self, x):
            x = self.squeeze_activation(self.squeeze(x))
            a = self.expand1x1_activation(self.expand1x1(x))
            b = self.expand3x3_activation(self.expand3x3(x))
            return torch.cat([self.cat_quantizers[0](a), self.cat_quantizers[1](b)], 1)

    class QuantInception(googlenet.Inception):
        def _init_quant(self):
            self.cat_quantizers = nn.ModuleList(trt_qdq.TensorQuantizer() for _ in range(4))

        def forward(self, x):
            return torch.cat([q(t) for q, t in zip(self.cat_quantizers, self._forward(x))], 1)

    class QuantShuffleUnit(shufflenetv2.InvertedResidual):
        def _init_quant(self):
            self.shuffle_quantizer = trt_qdq.TensorQuantizer()

        def forward(self, x):
            if self.stride == 1:
                x1, x2 = x.chunk(2, dim=1)
                out = torch.cat((x1, self.branch2(x2)), dim=1)
            else:
                out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
            return shufflenetv2.channel_shuffle(self.shuffle_quantizer(out), 2)

    return {squeezenet.Fire: QuantFire, googlenet.Inception: QuantInception,
            shufflenetv2.InvertedResidual: QuantShuffleUnit}


def _swap_classes(model, patches):
    for mod in model.modules():
        cls = patches.get(type(mod))
        if cls is not None:
            mod.__class__ = cls
            mod._init_quant()


class PercentileQuantizer(trt_qdq.TensorQuantizer):
    """Per-tensor quantizer calibrated to the PERCENTILE-th percentile of |x|."""

    @torch.no_grad()
    def observe(self, x):
        super().observe(x)
        self.__dict__.setdefault("_samples", []).append(x.detach().float().abs().flatten())

    @torch.no_grad()
    def load_amax(self, amax=None):
        samples = self.__dict__.pop("_samples", None)
        if amax is None and samples:
            v = torch.cat(samples)
            kth = max(1, min(v.numel(), int(math.ceil(v.numel() * PERCENTILE / 100.0))))
            amax = v.kthvalue(kth).values
        super().load_amax(amax)

    def reset_amax(self):
        super().reset_amax()
        self.__dict__.pop("_samples", None)


def quantize(model, calib_batches, requantize=False):
    """trt_qdq.quantize_model plus ConvTranspose2d, and (requantize) the
    pytorch-quantization pooling / concat / shuffle quantizers with percentile
    calibration. Returns a new fake-quantized model in eval mode."""
    model = copy.deepcopy(model).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # fx-trace fallback notices
        trt_qdq.fold_batchnorm(model)
    trt_qdq.replace_modules(model)
    patches = {nn.ConvTranspose2d: QuantConvTranspose2d}
    if requantize:
        patches.update({c: _pool_patch(c) for c in
                        (nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d)})
        patches.update(_cat_patches())
    _swap_classes(model, patches)
    if requantize:
        for _, q in trt_qdq.quantizers(model):
            if q.axis is None:
                q.__class__ = PercentileQuantizer
    trt_qdq.calibrate(model, calib_batches)
    with torch.no_grad():                      # trt_qdq.calibrate_weights knows Conv/Linear only
        for mod in model.modules():
            if isinstance(mod, QuantConvTranspose2d):
                q = mod.weight_quantizer
                q.__class__ = trt_qdq.TensorQuantizer
                q.reset_amax()
                q.observe(mod.weight)
                q.load_amax()
    return model.eval()


# --------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------

def _tv(name, **kw):
    def build():
        import torchvision
        return getattr(torchvision.models, name)(weights=None, **kw)
    return build


# name: dict(build: () -> float nn.Module (None: shape_subgraph, onnx.helper),
#            shape: input shape at batch 1, outputs: output names,
#            [data: "normal" (default) or "pixels" (uniform 0..255)],
#            [opsets: of the float exports, default (11, 13)],
#            [kind: "family" (default) or "rq"], note)
MODELS = {
    "unet": dict(build=UNet, shape=(1, 3, 64, 64), outputs=("output",),
                 note="Conv-BN-ReLU, MaxPool, ConvTranspose (k2s2, k3s2p1op1, groups 4), concat"),
    "lraspp": dict(build=build_lraspp, shape=(1, 3, 96, 128), outputs=("output",),
                   note="mobilenet_v3_small x0.5 + LRASPP: Hardswish, SE, sigmoid gate, "
                        "bilinear Resize"),
    "fpn_ssd": dict(build=FPNSSD, shape=(1, 3, 96, 128), outputs=("boxes", "scores"),
                    note="FPN nearest Resize x2 + adds, SSD heads Transpose/Reshape/Concat, "
                         "sigmoid"),
    "face_nhwc": dict(build=FaceNHWC, shape=(1, 96, 128, 3),
                      outputs=("scores", "boxes", "landmarks"),
                      data="pixels", opsets=(11, 12, 13),
                      note="NHWC input, depthwise, PRelu, Clip, Softmax(-1), 3 outputs"),
    "line_seg": dict(build=LineSeg, shape=(1, 64, 64, 3), outputs=("pts", "pts_score", "vmap"),
                     data="pixels",
                     note="NHWC input, bilinear decoder, in-graph post-processing: max-pool "
                          "NMS, TopK, int64 Div/Mod on the indices, Concat"),
    "shape_subgraph": dict(build=None, shape=(1,) + SHAPE_HW + (3,), outputs=("output",),
                           note="onnx.helper tf2onnx-style runtime shape math, Pad/Resize/Reshape"),
    "squeezenet1_1_rq": dict(build=_tv("squeezenet1_1", num_classes=10), shape=(1, 3, 64, 64),
                             outputs=("output",), kind="rq",
                             note="Fire concat inputs + MaxPool + AdaptiveAvgPool quantized"),
    "shufflenet_v2_x1_0_rq": dict(build=_tv("shufflenet_v2_x1_0", num_classes=10),
                                  shape=(1, 3, 64, 64), outputs=("output",), kind="rq",
                                  note="channel-shuffle input + MaxPool quantized"),
    "googlenet_rq": dict(build=_tv("googlenet", num_classes=10, aux_logits=False,
                                   transform_input=False, init_weights=True),
                         shape=(1, 3, 64, 64), outputs=("output",), kind="rq",
                         note="Inception concat inputs + MaxPool + AdaptiveAvgPool quantized"),
}


def info(name):
    m = dict(MODELS[name])
    m.setdefault("kind", "family")
    m.setdefault("data", "normal")
    m.setdefault("opsets", (11, 13))
    return m


def _seed(name):
    return SEED * 1000003 + zlib.crc32(name.encode()) % 100000


def make_data(name, batch):
    """Seeded input data: batch 1 is NAME_input.npy, batch CALIB NAME_calib.npy."""
    m = info(name)
    rng = np.random.RandomState(_seed(name) + batch)
    shape = (batch,) + tuple(m["shape"][1:])
    if m["data"] == "pixels":
        return rng.uniform(0.0, 255.0, shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


@torch.no_grad()
def _set_bn_stats(model, name, batches=2, batch=4):
    """As generate._set_bn_stats, with the model's own input distribution:
    BN affine parameters around (1, 0), running statistics from random batches;
    PReLU slopes drawn in [0.05, 0.3]."""
    for p in model.modules():
        if isinstance(p, nn.PReLU):
            p.weight.uniform_(0.05, 0.3)
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for bn in bns:
        if bn.affine:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.normal_(0.0, 0.1)
        bn.reset_running_stats()
        bn.momentum = None
    model.train()
    rng = np.random.RandomState(_seed(name) + 7)
    shape = (batch,) + tuple(info(name)["shape"][1:])
    for _ in range(batches):
        pixels = info(name)["data"] == "pixels"
        x = rng.uniform(0, 255, shape) if pixels else rng.standard_normal(shape)
        model(torch.from_numpy(x.astype(np.float32)))
    model.eval()
    for bn in bns:
        bn.momentum = 0.1


def build_float(name):
    """The seeded float torch model of a family / rq model (eval mode)."""
    m = info(name)
    torch.manual_seed(SEED)
    model = m["build"]().eval()
    _set_bn_stats(model, name)
    return model


def build_qdq(name, model=None):
    """The fake-quantized model (calibrated on NAME_calib.npy in batches of 4)."""
    model = build_float(name) if model is None else model
    calib = torch.from_numpy(make_data(name, CALIB))
    return quantize(model, list(calib.split(4)), requantize=info(name)["kind"] == "rq")


# --------------------------------------------------------------------------
# Inspection
# --------------------------------------------------------------------------

INTERESTING = ("Conv", "ConvTranspose", "BatchNormalization", "Gemm", "Resize", "Pad", "PRelu",
               "Clip", "HardSigmoid", "Sigmoid", "Softmax", "MaxPool", "AveragePool",
               "GlobalAveragePool", "ReduceMean", "Concat", "Reshape", "Transpose", "Split",
               "Shape", "Gather", "Range", "ConstantOfShape", "Expand", "Tile", "Where", "Equal",
               "Max", "Min", "Squeeze", "Unsqueeze", "QuantizeLinear", "DequantizeLinear")

# Ops that only select/move values: a DQ reached from a Q's input through them
# feeds that Q with the DQ's values (same grid unless the scales differ).
VALUE_SELECTING = ("MaxPool", "Reshape", "Transpose", "Concat", "Split", "Slice", "Flatten",
                   "Squeeze", "Unsqueeze", "Identity", "Gather", "Resize")   # Resize: nearest


def requant_pairs(proto):
    """(different, same): DequantizeLinear -> [value-selecting ops] ->
    QuantizeLinear pairs whose scales differ / are equal."""
    from onnx import numpy_helper
    g = proto.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant":
            inits[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    producer = {o: n for n in g.node for o in n.output}
    diff = same = 0
    for q in g.node:
        if q.op_type != "QuantizeLinear" or q.input[0] in inits:
            continue
        stack, seen, dqs = [q.input[0]], set(), []
        while stack:
            t = stack.pop()
            if t in seen:
                continue
            seen.add(t)
            p = producer.get(t)
            if p is None:
                continue
            if p.op_type == "DequantizeLinear":
                dqs.append(p)
            elif p.op_type == "Concat":
                stack.extend(p.input)
            elif p.op_type in VALUE_SELECTING and (p.op_type != "Resize" or any(
                    a.name == "mode" and a.s == b"nearest" for a in p.attribute)):
                stack.append(p.input[0])
        for dq in dqs:
            if np.array_equal(inits.get(dq.input[1]), inits.get(q.input[1])):
                same += 1
            else:
                diff += 1
    return diff, same


def summary(path):
    import onnx
    proto = onnx.load(path)
    counts = Counter(n.op_type for n in proto.graph.node)
    opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    ops = " ".join(f"{k}={counts[k]}" for k in INTERESTING if counts.get(k))
    line = f"{os.path.basename(path):34s} op{opset}  {os.path.getsize(path) / 1e6:6.2f} MB  {ops}"
    if counts.get("QuantizeLinear"):
        d, s = requant_pairs(proto)
        line += f"  | requant DQ->Q diff-scale={d} same-scale={s}"
    return line


# --------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------

def _export(model, example, path, m, opset, dynamic=True):
    outs = list(m["outputs"])
    axes = {n: {0: "batch"} for n in ["input"] + outs} if dynamic else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # exporter shape-inference notices
        trt_qdq.export_onnx(model, example, path, input_names=("input",), output_names=outs,
                            opset=opset, dynamic_axes=axes)


def generate(name, out_dir):
    import onnx
    m = info(name)
    files = []
    x1, xc = make_data(name, 1), make_data(name, CALIB)
    if m["kind"] == "rq":
        np.save(os.path.join(out_dir, f"{name}_input.npy"), x1)
        qmodel = build_qdq(name)
        path = os.path.join(out_dir, f"{name}_qdq.onnx")
        _export(qmodel, torch.from_numpy(x1), path, m, 13, dynamic=False)
        return [path]
    np.save(os.path.join(out_dir, f"{name}_input.npy"), x1)
    np.save(os.path.join(out_dir, f"{name}_calib.npy"), xc)
    if m["build"] is None:                      # shape_subgraph
        for opset in (11, 13):
            path = os.path.join(out_dir, f"{name}_float_op{opset}.onnx")
            onnx.save(shape_subgraph_proto(opset), path)
            files.append(path)
        return files
    model = build_float(name)
    example = torch.from_numpy(x1)
    for opset in m["opsets"]:
        path = os.path.join(out_dir, f"{name}_float_op{opset}.onnx")
        _export(model, example, path, m, opset)
        files.append(path)
    path = os.path.join(out_dir, f"{name}_qdq.onnx")
    _export(build_qdq(name, model), example, path, m, 13)
    files.append(path)
    return files


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="output directory (created if missing)")
    ap.add_argument("--models", default=",".join(MODELS),
                    help="comma-separated model names (default: all)")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = ap.parse_args(argv)
    if args.list:
        for n in MODELS:
            m = info(n)
            print(f"{n:22s} {'x'.join(map(str, m['shape'])):12s} {m['kind']:6s}  {m['note']}")
        return 0
    if not args.out:
        ap.error("--out is required")
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; see --list")
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    for name in names:
        t0 = time.time()
        files = generate(name, args.out)
        for f in files:
            print(summary(f), flush=True)
        print(f"  ({name}: {time.time() - t0:.1f}s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
