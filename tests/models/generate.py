#!/usr/bin/python3
"""Generates float and TensorRT-recipe Q/DQ ONNX test models.

    /usr/bin/python3 tests/models/generate.py --out DIR [--models a,b,...] [--list]

For every model NAME it writes DIR/NAME_float.onnx and DIR/NAME_qdq.onnx
(opset 13, batch 1, static shapes) and finally DIR/manifest.json with the file
names, input/output names and shapes and node counts by op type of both
variants. Weights are random but seeded (torchvision `weights=None` under
torch.manual_seed), BatchNorm statistics are set from a few random batches so
that BN folding is not trivial, and the Q/DQ variant is max-calibrated on a
few random normal batches (see trt_qdq.py for the recipe). Output is
deterministic: the same command writes byte-identical files.

Needs Debian's python (torch 1.13, torchvision 0.14, onnx 1.12).
"""

import argparse
import hashlib
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trt_qdq  # noqa: E402

SEED = 0


# --------------------------------------------------------------------------
# Transformer encoder built from plain modules (no nn.MultiheadAttention /
# nn.TransformerEncoderLayer, whose fast paths export differently).
# --------------------------------------------------------------------------

class SelfAttention(nn.Module):
    def __init__(self, d_model, heads, tokens_2d=False):
        super().__init__()
        assert d_model % heads == 0
        self.heads, self.head_dim = heads, d_model // heads
        self.tokens_2d = tokens_2d
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        self.qk = trt_qdq.MatMul()        # Q . K^T
        self.av = trt_qdq.MatMul()        # softmax(.) . V

    def _heads(self, t, seq):             # [B*S, D] or [B, S, D] -> [B, H, S, Dh]
        return t.reshape(-1, seq, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x, seq):
        q = self._heads(self.query(x), seq)
        k = self._heads(self.key(x), seq).transpose(-1, -2)
        v = self._heads(self.value(x), seq)
        scores = self.qk(q, k) * (1.0 / math.sqrt(self.head_dim))
        ctx = self.av(torch.softmax(scores, dim=-1), v)        # [B, H, S, Dh]
        ctx = ctx.permute(0, 2, 1, 3)
        ctx = ctx.reshape(-1, self.heads * self.head_dim) if self.tokens_2d \
            else ctx.reshape(-1, seq, self.heads * self.head_dim)
        return self.out(ctx)


class EncoderLayer(nn.Module):
    """Post-LN (BERT-style) encoder layer."""

    def __init__(self, d_model, heads, ffn, tokens_2d=False):
        super().__init__()
        self.attn = SelfAttention(d_model, heads, tokens_2d)
        self.add1 = trt_qdq.Add()
        self.norm1 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, ffn)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(ffn, d_model)
        self.add2 = trt_qdq.Add()
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x, seq):
        x = self.norm1(self.add1(x, self.attn(x, seq)))
        return self.norm2(self.add2(x, self.fc2(self.act(self.fc1(x)))))


class TransformerEncoder(nn.Module):
    """Input [B, S, D] float, output [B, S, D]. With tokens_2d the tokens are
    flattened to [B*S, D] around the layers so that every nn.Linear exports
    as Gemm (transB=1); otherwise Linear on a rank-3 tensor exports as
    Transpose(W) + MatMul + Add."""

    def __init__(self, layers=2, d_model=64, heads=4, ffn=128, tokens_2d=False):
        super().__init__()
        self.tokens_2d = tokens_2d
        self.layers = nn.ModuleList(EncoderLayer(d_model, heads, ffn, tokens_2d)
                                    for _ in range(layers))

    def forward(self, x):
        seq, d = x.shape[1], x.shape[2]
        h = x.reshape(-1, d) if self.tokens_2d else x
        for layer in self.layers:
            h = layer(h, seq)
        return h.reshape(-1, seq, d) if self.tokens_2d else h


# --------------------------------------------------------------------------
# Model registry
# --------------------------------------------------------------------------

def _tv(name, **kw):
    def build():
        import torchvision
        return getattr(torchvision.models, name)(weights=None, **kw)
    return build


IMAGE = (1, 3, 224, 224)

# name: (builder, input shape, default?, note)
MODELS = {
    "resnet18": (_tv("resnet18"), IMAGE, True, "conv/gemm + BasicBlock residual adds"),
    "mobilenet_v2": (_tv("mobilenet_v2"), IMAGE, True,
                     "depthwise conv, ReLU6 (Clip) + InvertedResidual adds"),
    "transformer": (lambda: TransformerEncoder(), (1, 16, 64), True,
                    "2-layer post-LN encoder, d=64, 4 heads, ffn 128, seq 16; "
                    "Linear on rank-3 input -> Transpose+MatMul+Add"),
    "transformer_gemm": (lambda: TransformerEncoder(tokens_2d=True), (1, 16, 64), False,
                         "same encoder with tokens flattened to [16, 64]: Linear -> Gemm"),
    "resnet50": (_tv("resnet50"), IMAGE, False, "Bottleneck residual adds"),
    "efficientnet_b0": (_tv("efficientnet_b0"), IMAGE, False,
                        "SiLU (Sigmoid+Mul), squeeze-excitation, MBConv residual adds"),
    "mobilenet_v3_small": (_tv("mobilenet_v3_small"), IMAGE, False,
                           "Hardswish (HardSigmoid+Mul), SE, InvertedResidual adds"),
    "squeezenet1_0": (_tv("squeezenet1_0"), IMAGE, False, "no BN; concat; conv only"),
    "shufflenet_v2_x1_0": (_tv("shufflenet_v2_x1_0"), IMAGE, False,
                           "channel shuffle (runtime Shape arithmetic + Reshape/Transpose), concat; "
                           "conv/gemm only; not fx-traceable, BN folded via nn.Sequential"),
    "googlenet": (_tv("googlenet", aux_logits=False, transform_input=False, init_weights=True),
                  IMAGE, False, "inception concat; conv/gemm only"),
    "densenet121": (_tv("densenet121"), IMAGE, False,
                    "pre-activation BN after concat stays BatchNormalization; conv/gemm only"),
}
DEFAULT = [n for n, v in MODELS.items() if v[2]]


# --------------------------------------------------------------------------

@torch.no_grad()
def _set_bn_stats(model, shape, batches):
    """Random-but-plausible BN parameters: affine params drawn around (1, 0),
    running statistics measured on random batches (as after training)."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for bn in bns:
        if bn.affine:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.normal_(0.0, 0.1)
        bn.reset_running_stats()
        bn.momentum = None                # cumulative average over the batches
    model.train()
    for _ in range(batches):
        model(torch.randn(shape))
    model.eval()
    for bn in bns:
        bn.momentum = 0.1


def _io(proto):
    import onnx
    import onnx.mapping

    def desc(v):
        t = v.type.tensor_type
        return {"name": v.name, "shape": [d.dim_value for d in t.shape.dim],
                "dtype": onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t.elem_type].name}
    inits = {t.name for t in proto.graph.initializer}
    return ([desc(v) for v in proto.graph.input if v.name not in inits],
            [desc(v) for v in proto.graph.output])


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def generate(name, out_dir, calib_batches=2, calib_batch_size=4, keep_identity=False,
             save_io=False):
    builder, shape, _, note = MODELS[name]
    t0 = time.time()
    torch.manual_seed(SEED)
    model = builder().eval()
    batch_shape = (calib_batch_size,) + tuple(shape[1:])
    _set_bn_stats(model, batch_shape, 2)
    calib = [torch.randn(batch_shape) for _ in range(calib_batches)]
    example = torch.randn(shape)
    qmodel = trt_qdq.quantize_model(model, calib)

    entry = {"note": note, "seed": SEED}
    for kind, m in (("float", model), ("qdq", qmodel)):
        fname = f"{name}_{kind}.onnx"
        path = os.path.join(out_dir, fname)
        proto = trt_qdq.export_onnx(m, example, path, keep_identity=keep_identity)
        inputs, outputs = _io(proto)
        entry[kind] = {
            "file": fname,
            "sha256": _sha256(path),
            "bytes": os.path.getsize(path),
            "opset": proto.opset_import[0].version,
            "ir_version": proto.ir_version,
            "inputs": inputs,
            "outputs": outputs,
            "initializers": len(proto.graph.initializer),
            "nodes": len(proto.graph.node),
            "op_counts": trt_qdq.op_counts(proto),
        }
        if kind == "qdq":
            s = trt_qdq.qdq_summary(proto)
            entry[kind]["qdq"] = {k: s[k] for k in ("per_axis_dq", "dq_axes", "dq_consumers",
                                                   "weight_q_on_initializer")}
        if save_io:
            import numpy as np
            with torch.no_grad():
                y = m(example)
            np.save(os.path.join(out_dir, f"{name}_{kind}_output.npy"), y.numpy())
    if save_io:
        import numpy as np
        np.save(os.path.join(out_dir, f"{name}_input.npy"), example.numpy())
        entry["io_files"] = {"input": f"{name}_input.npy",
                             "float_output": f"{name}_float_output.npy",
                             "qdq_output": f"{name}_qdq_output.npy"}
    entry["seconds"] = round(time.time() - t0, 1)
    return entry


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="output directory (created if missing)")
    ap.add_argument("--models", default=",".join(DEFAULT),
                    help="comma-separated model names (default: %(default)s)")
    ap.add_argument("--list", action="store_true", help="list the known models and exit")
    ap.add_argument("--calib-batches", type=int, default=2)
    ap.add_argument("--calib-batch-size", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--keep-identity", action="store_true",
                    help="keep the exporter's initializer-dedup Identity nodes")
    ap.add_argument("--save-io", action="store_true",
                    help="also write NAME_input.npy and the PyTorch outputs "
                         "NAME_{float,qdq}_output.npy")
    args = ap.parse_args(argv)

    if args.list:
        for n, (_, shape, default, note) in MODELS.items():
            print(f"{n:20s} {'x'.join(map(str, shape)):12s} {'default ' if default else 'optional'}"
                  f"  {note}")
        return 0
    if not args.out:
        ap.error("--out is required")
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; see --list")

    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    manifest_path = os.path.join(args.out, "manifest.json")
    manifest = {"generator": "tests/models/generate.py", "torch": torch.__version__.split("+")[0],
                "models": {}}
    for name in names:
        print(f"{name} ...", end=" ", flush=True)
        entry = generate(name, args.out, args.calib_batches, args.calib_batch_size,
                         args.keep_identity, args.save_io)
        seconds = entry.pop("seconds")
        manifest["models"][name] = entry
        q = entry["qdq"]["op_counts"]
        print(f"{seconds:.1f}s  Q={q.get('QuantizeLinear', 0)} DQ={q.get('DequantizeLinear', 0)}",
              flush=True)
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
