#!/usr/bin/python3
"""Transformer encoders as users export them, float and TensorRT Q/DQ.

    encoders.py --out DIR [--encoders bert,bert_padmask,vit]

- bert: BERT-style, three int64 inputs (input_ids, token_type_ids,
  attention_mask; batch and sequence dynamic): word + position + token-type
  embeddings (Gather), LayerNorm, an additive mask built from the mask input
  ((1 - mask) * -10000 through Unsqueeze / Cast / Sub / Mul), Erf GELU,
  pooled output (tanh of a Linear on the first token).
- bert_padmask: input_ids only; the mask comes from the padding id
  (Equal / Where), GELU in the tanh form, LayerNormalization from
  torch's layer_norm at opset 17.
- vit: ViT-style, an image: patch-embedding Conv, class token Concat,
  position embedding Add, encoder, head on the class token.

Each gets NAME_float.onnx, NAME_float11.onnx (the float model exported at
opset 11, as older exporters and published models are), NAME_qdq.onnx (trt_qdq.py's recipe: every
Linear's input and weight, both operands of the attention products and the
residual adds), NAME_inputs.npz (one sample, the arrays named after the
graph inputs; ids padded with 0 after 12 of 16 tokens) and NAME_calib.npz
(8 samples for `qatc quantize`). Weights are seeded random (SEED).
"""

import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate  # noqa: E402
import trt_qdq  # noqa: E402

SEED = 0
VOCAB, SEQ, D, HEADS, FFN = 1000, 16, 64, 4, 128


class TanhGELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) *
                                           (x + 0.044715 * torch.pow(x, 3))))


class MaskedAttention(generate.SelfAttention):
    def forward(self, x, seq, mask=None):
        q = self._heads(self.query(x), seq)
        k = self._heads(self.key(x), seq).transpose(-1, -2)
        v = self._heads(self.value(x), seq)
        scores = self.qk(q, k) * (1.0 / math.sqrt(self.head_dim))
        if mask is not None:
            scores = scores + mask
        ctx = self.av(torch.softmax(scores, dim=-1), v)
        ctx = ctx.permute(0, 2, 1, 3).reshape(-1, seq, self.heads * self.head_dim)
        return self.out(ctx)


class Layer(generate.EncoderLayer):
    def __init__(self, d, heads, ffn, tanh_gelu=False):
        super().__init__(d, heads, ffn)
        self.attn = MaskedAttention(d, heads)
        if tanh_gelu:
            self.act = TanhGELU()

    def forward(self, x, seq, mask=None):
        x = self.norm1(self.add1(x, self.attn(x, seq, mask)))
        return self.norm2(self.add2(x, self.fc2(self.act(self.fc1(x)))))


class Bert(nn.Module):
    def __init__(self, layers=2, pad_mask=False):
        super().__init__()
        self.pad_mask = pad_mask
        self.word = nn.Embedding(VOCAB, D)
        self.position = nn.Embedding(64, D)
        self.token_type = nn.Embedding(2, D)
        self.norm = nn.LayerNorm(D)
        self.layers = nn.ModuleList(Layer(D, HEADS, FFN, tanh_gelu=pad_mask)
                                    for _ in range(layers))
        self.pooler = nn.Linear(D, D)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        seq = input_ids.shape[1]
        positions = torch.arange(seq, dtype=torch.long).unsqueeze(0)
        x = self.word(input_ids) + self.position(positions)
        if token_type_ids is not None:
            x = x + self.token_type(token_type_ids)
        x = self.norm(x)
        if self.pad_mask:                  # padding id 0 is masked out
            mask = torch.where(input_ids == 0, torch.tensor(-10000.0),
                               torch.tensor(0.0))[:, None, None, :]
        else:
            mask = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
        for layer in self.layers:
            x = layer(x, seq, mask)
        return torch.tanh(self.pooler(x[:, 0]))


class ViT(nn.Module):
    def __init__(self, layers=2, image=32, patch=4, classes=10):
        super().__init__()
        self.patch = nn.Conv2d(3, D, patch, stride=patch)
        tokens = (image // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, D) * 0.02)
        self.position = nn.Parameter(torch.randn(1, tokens + 1, D) * 0.02)
        self.layers = nn.ModuleList(Layer(D, HEADS, FFN) for _ in range(layers))
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, classes)

    def forward(self, image):
        x = self.patch(image).flatten(2).transpose(1, 2)          # [B, T, D]
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1)
        x = x + self.position
        seq = x.shape[1]
        for layer in self.layers:
            x = layer(x, seq)
        return self.head(self.norm(x)[:, 0])


def token_inputs(batch, rng, with_types):
    ids = rng.randint(1, VOCAB, size=(batch, SEQ)).astype(np.int64)
    ids[:, 12:] = 0                               # padding
    mask = (ids != 0).astype(np.int64)
    types = np.zeros_like(ids)
    types[:, 6:12] = 1
    out = {"input_ids": ids}
    if with_types:
        out["token_type_ids"] = types
        out["attention_mask"] = mask
    return out


def build(name, out):
    torch.manual_seed(SEED)
    rng = np.random.RandomState(SEED)
    if name == "vit":
        model = ViT().eval()
        names = ("image",)
        sample = {"image": rng.randn(1, 3, 32, 32).astype(np.float32)}
        calib = {"image": rng.randn(8, 3, 32, 32).astype(np.float32)}
        dynamic = {"image": {0: "batch"}}
        opset = 13
    else:
        pad = name == "bert_padmask"
        model = Bert(pad_mask=pad).eval()
        names = ("input_ids",) if pad else ("input_ids", "token_type_ids", "attention_mask")
        sample = token_inputs(1, rng, not pad)
        calib = token_inputs(8, rng, not pad)
        dynamic = {n: {0: "batch", 1: "sequence"} for n in names}
        opset = 17 if pad else 13
    example = tuple(torch.from_numpy(sample[n]) for n in names)
    batches = [tuple(torch.from_numpy(calib[n][i:i + 2]) for n in names) for i in range(0, 8, 2)]
    qmodel = trt_qdq.quantize_model(model, batches)
    output = ("logits",) if name == "vit" else ("pooled",)
    for kind, m, o in (("float", model, opset), ("float11", model, 11), ("qdq", qmodel, opset)):
        trt_qdq.export_onnx(m, example, os.path.join(out, f"{name}_{kind}.onnx"),
                            input_names=names, output_names=output, opset=o,
                            dynamic_axes=dynamic)
    np.savez(os.path.join(out, f"{name}_inputs.npz"), **sample)
    np.savez(os.path.join(out, f"{name}_calib.npz"), **calib)
    print(f"{name}: {trt_qdq.op_counts(os.path.join(out, f'{name}_qdq.onnx'))}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--encoders", default="bert,bert_padmask,vit")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.encoders.split(","):
        build(name, args.out)


if __name__ == "__main__":
    main()
