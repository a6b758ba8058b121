#!/usr/bin/env python3
"""RNN, GRU and LSTM (unrolled at import) against ONNX Runtime.

The ONNX node tests cover the defaults; these models cover what exporters
and published OCR / speech models use, each as an fp32 plan within 1e-4 of
ONNX Runtime (and the reference evaluator within 1e-5 of it):

- torch exports: a 2-layer bidirectional LSTM, batch_first GRU (torch writes
  linear_before_reset=1) and a ReLU RNN, with initial states;
- onnx.helper models with what torch does not write: direction "reverse",
  LSTM peepholes, cell clip, input_forget, HardSigmoid / LeakyRelu
  activations with their alpha / beta, GRU with linear_before_reset=0 and
  a clip, sequence_lens of full length (layout 1, which ONNX Runtime
  refuses, is covered by the node tests' *_batchwise);
- a sequence_lens shorter than the sequence is refused at the node.

Run with Debian's /usr/bin/python3 (torch, onnx). Exits 1 on any failure.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

from real_models import Runner, compare

SEQ, BATCH, IN, HID = 7, 3, 5, 6


class Stack(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        if kind == "lstm":
            self.rnn = torch.nn.LSTM(IN, HID, num_layers=2, bidirectional=True)
        elif kind == "gru":
            self.rnn = torch.nn.GRU(IN, HID, batch_first=True)
        else:
            self.rnn = torch.nn.RNN(IN, HID, nonlinearity="relu", bidirectional=True)

    def forward(self, x, h):
        if self.kind == "lstm":
            y, (hn, cn) = self.rnn(x, (h, h * 0.5))
            return y, hn, cn
        y, hn = self.rnn(x, h)
        return y, hn


def torch_models(out, rng):
    models = []
    torch.manual_seed(0)
    for kind in ("lstm", "gru", "rnn"):
        m = Stack(kind).eval()
        x = rng.randn(*((BATCH, SEQ, IN) if kind == "gru" else (SEQ, BATCH, IN)))
        layers = 4 if kind == "lstm" else 2 if kind == "rnn" else 1
        h = rng.randn(layers, BATCH, HID)
        x, h = x.astype(np.float32), h.astype(np.float32)
        path = os.path.join(out, f"torch_{kind}.onnx")
        outs = ["y", "hn", "cn"] if kind == "lstm" else ["y", "hn"]
        with torch.no_grad():
            torch.onnx.export(m, (torch.from_numpy(x), torch.from_numpy(h)), path,
                              input_names=["x", "h"], output_names=outs, opset_version=14)
        models.append((f"torch_{kind}", path, {"x": x, "h": h}))
    return models


def helper_model(out, name, op, gates, attrs, rng, layout=0, dirs=1, peep=False,
                 lens=None):
    x_shape = [BATCH, SEQ, IN] if layout else [SEQ, BATCH, IN]
    inits = [
        numpy_helper.from_array((rng.randn(dirs, gates * HID, IN) * 0.4).astype(np.float32), "W"),
        numpy_helper.from_array((rng.randn(dirs, gates * HID, HID) * 0.4).astype(np.float32), "R"),
        numpy_helper.from_array((rng.randn(dirs, 2 * gates * HID) * 0.2).astype(np.float32), "B"),
    ]
    ins = ["x", "W", "R", "B", ""]
    if lens is not None:
        inits.append(numpy_helper.from_array(np.array(lens, np.int32), "lens"))
        ins[4] = "lens"
    h_shape = [BATCH, dirs, HID] if layout else [dirs, BATCH, HID]
    ins.append("h0")
    if op == "LSTM":
        ins.append("c0")
        if peep:
            inits.append(numpy_helper.from_array(
                (rng.randn(dirs, 3 * HID) * 0.3).astype(np.float32), "P"))
            ins.append("P")
    y_shape = [BATCH, SEQ, dirs, HID] if layout else [SEQ, dirs, BATCH, HID]
    outs = ["y", "yh"] + (["yc"] if op == "LSTM" else [])
    node = helper.make_node(op, ins, outs, hidden_size=HID, layout=layout, **attrs)
    graph_in = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape),
                helper.make_tensor_value_info("h0", TensorProto.FLOAT, h_shape)]
    feeds = {"x": rng.randn(*x_shape).astype(np.float32),
             "h0": rng.randn(*h_shape).astype(np.float32)}
    if op == "LSTM":
        graph_in.append(helper.make_tensor_value_info("c0", TensorProto.FLOAT, h_shape))
        feeds["c0"] = rng.randn(*h_shape).astype(np.float32)
    graph_out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape),
                 helper.make_tensor_value_info("yh", TensorProto.FLOAT, h_shape)]
    if op == "LSTM":
        graph_out.append(helper.make_tensor_value_info("yc", TensorProto.FLOAT, h_shape))
    g = helper.make_graph([node], name, graph_in, graph_out, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    path = os.path.join(out, name + ".onnx")
    onnx.save(m, path)
    return name, path, feeds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qatc", required=True)
    ap.add_argument("--ort", required=True, help="directory with run.js")
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rng = np.random.RandomState(0)
    c = Runner(args)
    models = torch_models(args.work, rng)
    models += [
        helper_model(args.work, "lstm_reverse_peep_clip", "LSTM", 4,
                     {"direction": "reverse", "clip": 1.5}, rng, peep=True),
        helper_model(args.work, "lstm_bidir_forget_acts", "LSTM", 4,
                     {"direction": "bidirectional", "input_forget": 1,
                      "activations": ["HardSigmoid", "Tanh", "LeakyRelu"] * 2,
                      "activation_alpha": [0.3, 0.05, 0.3, 0.05],
                      "activation_beta": [0.6, 0.6]}, rng, dirs=2, peep=True),
        helper_model(args.work, "gru_lens", "GRU", 3,
                     {"linear_before_reset": 0, "clip": 0.8}, rng, lens=[SEQ] * BATCH),
        helper_model(args.work, "gru_bidir_lbr", "GRU", 3,
                     {"direction": "bidirectional", "linear_before_reset": 1}, rng, dirs=2),
        helper_model(args.work, "rnn_reverse_sigmoid", "RNN", 1,
                     {"direction": "reverse", "activations": ["Sigmoid"]}, rng),
    ]
    for name, path, feeds in models:
        w = os.path.join(args.work, name)
        os.makedirs(w, exist_ok=True)
        inputs = {}
        for k, v in feeds.items():
            inputs[k] = os.path.join(w, f"{k}.npy")
            np.save(inputs[k], v)
        try:
            ref = c.check_float(name, path, inputs, w)
            out = os.path.join(w, "eval.npz")
            c.qatc("eval", path, "-o", out, *[f"--input={k}={v}" for k, v in inputs.items()])
            got = dict(np.load(out))
            worst = max(compare(got[k], r)[0] for k, r in ref.items())
            ok = worst <= 1e-5
            print(f"   {name:30s} reference vs ORT   max|d|/max|ort| {worst:.2e} (limit 1e-05)"
                  f"  {'ok' if ok else 'FAIL'}", flush=True)
            if not ok:
                c.fail(name, f"the reference differs from ORT by {worst:.2e}")
        except RuntimeError as e:
            c.fail(name, str(e))
    # A shorter sequence is refused at the node, not miscomputed.
    name, path, feeds = helper_model(args.work, "gru_short_lens", "GRU", 3, {}, rng,
                                     lens=[SEQ, SEQ - 2, SEQ])
    p = subprocess.run([args.qatc, "compile", path, "-o", os.path.join(args.work, "short.plan")],
                       capture_output=True, text=True)
    rc, err = p.returncode, p.stderr
    want = 'node "GRU_0" (#0, GRU): error: qatc compiles GRU only when every sequence has the full length'
    ok = rc == 1 and want in err
    print(f"   {'gru_short_lens':30s} refused at the node  {'ok' if ok else 'FAIL'}", flush=True)
    if not ok:
        c.fail("gru_short_lens", f"exit {rc}:\n{err}")
    return c.finish("every recurrent model agrees with ONNX Runtime")


if __name__ == "__main__":
    sys.exit(main())
