#!/usr/bin/python3
"""PyTorch's own int8 engine on a zoo model, for the peer table.

    /usr/bin/python3 bench/torch_int8.py NAME [--threads 1] [--runs 100]

NAME is a model of tests/models/generate.py (resnet50, efficientnet_b0,
...). The model is built as generate.py builds it (seeded random weights,
BatchNorm statistics from random batches), quantized post-training with
FX graph mode and the `onednn` backend (x86's int8 engine: oneDNN kernels,
AMX where the CPU has it), calibrated on a few random batches, and timed
on one input. Prints JSON: {"median_ms": ..., "min_ms": ...}. Needs
Debian's python3-torch; a model FX cannot trace is reported as an error
(exit code 2) with the reason.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "tests", "models"))
import generate  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name", choices=sorted(generate.MODELS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--calib-batches", type=int, default=4)
    args = ap.parse_args()

    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    torch.manual_seed(generate.SEED)
    build, shape, *_ = generate.MODELS[args.name]
    with torch.no_grad():
        model = build()
        generate._set_bn_stats(model, shape, 2)
    model.eval()
    torch.backends.quantized.engine = "onednn"
    example = torch.randn(shape)
    try:
        prepared = prepare_fx(model, get_default_qconfig_mapping("onednn"),
                              example_inputs=(example,))
    except Exception as e:  # FX tracing limits (data-dependent control flow)
        print(f"torch_int8.py: {args.name}: FX graph mode cannot quantize it: "
              f"{type(e).__name__}: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    with torch.no_grad():
        for _ in range(args.calib_batches):
            prepared(torch.randn(shape))
        quantized = convert_fx(prepared)
        torch.set_num_threads(args.threads)
        for _ in range(10):
            quantized(example)
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            quantized(example)
            times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    print(json.dumps({"median_ms": times[len(times) // 2], "min_ms": times[0]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
