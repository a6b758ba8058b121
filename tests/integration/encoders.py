#!/usr/bin/env python3
"""Transformer encoders end to end against ONNX Runtime.

The encoders of tests/models/encoders.py (BERT-style with int64 input_ids,
token_type_ids and attention_mask; BERT-style with the mask derived from
padding ids, tanh GELU and opset-17 LayerNormalization; ViT-style with a
patch Conv, class token and position embedding), each:

- float export -> fp32 plan (host) within 1e-4 of ONNX Runtime, at the
  model's opset and at opset 11;
- TensorRT Q/DQ export -> int8 plan within the model's band of ONNX
  Runtime's literal evaluation of the Q/DQ graph;
- `qatc quantize --recipe trt` on the float export (calibrated on
  NAME_calib.npz) -> a model ONNX Runtime runs, whose int8 plan agrees with
  it within its band;
- without --input-shape the dynamic batch and sequence dimensions become 1
  with one warning per input naming it (trtexec's convention), and the plan
  compiles.

The sequence length comes from the data: plans are compiled with
--input-shape from each input's shape. Exits 1 on any failure.
"""
import argparse
import os
import sys

import numpy as np

from real_models import Runner

ENCODERS = ["bert", "bert_padmask", "vit"]


class EncoderRunner(Runner):
    def compile_args(self, inputs):
        # The sequence length from the data, not trtexec's default of 1.
        shapes = []
        for name, path in inputs.items():
            dims = "x".join(str(d) for d in np.load(path).shape)
            shapes += ["--input-shape", f"{name}={dims}"]
        return shapes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qatc", required=True)
    ap.add_argument("--ort", required=True, help="directory with run.js")
    ap.add_argument("--models", required=True, help="tests/models/encoders.py's output")
    ap.add_argument("--work", required=True)
    ap.add_argument("--encoders", default=",".join(ENCODERS))
    args = ap.parse_args()
    c = EncoderRunner(args)
    for name in args.encoders.split(","):
        print(f"== {name}", flush=True)
        work = os.path.join(args.work, name)
        os.makedirs(work, exist_ok=True)
        inputs = {}
        with np.load(os.path.join(args.models, f"{name}_inputs.npz")) as z:
            for k in z.files:
                inputs[k] = os.path.join(work, f"{k}.npy")
                np.save(inputs[k], z[k])
        model = lambda kind: os.path.join(args.models, f"{name}_{kind}.onnx")  # noqa: E731
        for label, check in ((f"{name}_float", lambda w: c.check_float(f"{name}_float", model("float"), inputs, w)),
                             (f"{name}_float11", lambda w: c.check_float(f"{name}_float11", model("float11"), inputs, w)),
                             (f"{name}_qdq", lambda w: c.check_int8(f"{name}_qdq", model("qdq"), inputs, w))):
            w = os.path.join(work, label)
            os.makedirs(w, exist_ok=True)
            try:
                check(w)
            except RuntimeError as e:
                c.fail(label, str(e))
        label = f"{name} quantized"
        w = os.path.join(work, "ptq")
        os.makedirs(w, exist_ok=True)
        ptq = os.path.join(w, f"{name}_ptq.onnx")
        try:
            c.qatc("quantize", model("float"), "--recipe", "trt", "--calib",
                   os.path.join(args.models, f"{name}_calib.npz"), "-o", ptq)
            c.ort(ptq, inputs, os.path.join(w, "ort-opt"), no_opt=False)
            c.check_int8(label, ptq, inputs, w)
        except RuntimeError as e:
            c.fail(label, str(e))
        # trtexec's convention for the dynamic dimensions.
        label = f"{name} dynamic dims"
        try:
            _, err = c.qatc("compile", model("float"), "-o", os.path.join(work, "dyn.plan"))
            warned = [n for n in inputs if f'graph input "{n}": warning: dynamic dimension' in err]
            ok = sorted(warned) == sorted(inputs)
            print(f"   {label:30s} compiles with a warning naming each input: "
                  f"{', '.join(warned) or 'none'}  {'ok' if ok else 'FAIL'}", flush=True)
            if not ok:
                c.fail(label, f"warnings for {warned}, inputs {list(inputs)}:\n{err}")
        except RuntimeError as e:
            c.fail(label, str(e))
    return c.finish("every encoder agrees with ONNX Runtime")


if __name__ == "__main__":
    sys.exit(main())
