#!/usr/bin/env python3
"""The compiled exp, sigmoid, tanh and erf against float64, in ulps.

The plans' exp (KB::exp), sigmoid (KB::sigmoid) and the SiLU chain
x * sigmoid(x) are our own polynomial code, not libm; tanh and erf are
MLIR's expansions (GELU's erf, the tanh form). plans.py compares
float models at 1e-4 of the output range, which would not see an error of
a few hundred ulps; this test would. Each op runs as a float plan over about
a million inputs: a dense sweep of [-130, 130], random values of every
magnitude from 1e-30 to 1e30 of both signs, and the special values (+-0,
+-inf, NaN, denormals, the thresholds where exp overflows and underflows).
For every target (host, avx512vnni beside it on an AMX host, avx2,
generic) the error of each finite result is measured against the float64
function of the same float32 input, in ulps of the float32 result:

- exp: at most 1 ulp, NaN for NaN, inf and 0 where exp overflows and
  underflows. From x = 88 to the overflow at 88.72, 6 ulps: MLIR's
  expansion (avx2, generic) scales by 2^k in two steps there and measured
  5.2 (our AVX-512 exp is within 1 ulp there too). A denormal result (x below -87.3) may also be flushed to 0:
  the AVX-512 code underflows gradually, MLIR's expansion on the other
  targets flushes;
- sigmoid: at most 2.5 ulps (exp's ulp, the sum 1 + e^-x and the
  reciprocal each round, as they do in the reference's float code);
  below 2^-100 the plans may return any value under 2^-100 (a clamp keeps
  the reciprocal finite);
- x * sigmoid(x): as sigmoid, one rounding more (3 ulps), and under
  |x| * 2^-100 where sigmoid is. At x = -inf the limit is 0, float
  arithmetic gives NaN (-inf * 0) or -inf (-inf times the clamped
  sigmoid): that input is left out;
- tanh and erf: at most 5 ulps (MLIR's rational and polynomial
  approximations measured 4.12 and 4.33; the absolute error is under
  3e-7 everywhere). On AVX-512 and AVX2 erf is our own (KB::erf: a
  polynomial per interval of 1/4 and of 1/2, 2.22 and 2.38 ulps
  measured): at most 2.5.

A chain whose result is quantized may use a shorter exp (KB::sigmoid):
Sigmoid -> QuantizeLinear and SiLU -> QuantizeLinear run over the inputs
of magnitude 1e-6 to 1e30 and +-inf at output scales that spread the results over many steps, and each
integer is compared with float64's sat(rne(y / s) + zp): at most 1 off, on
at most 2e-5 of the elements (the numerical contract allows 1e-3). The
plans measured 2e-6 with the short exp and with the long one alike; a
polynomial without its f^5 term (error 4e-5) measured 1e-4.

It prints the worst error per op and target, so a change of the polynomials
shows its effect. Run with Debian's /usr/bin/python3 (numpy and onnx).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Checker  # noqa: E402
from plans import TARGETS, amx_note  # noqa: E402


def inputs(rng):
    """The test inputs, float32, one dimension."""
    sweep = np.linspace(-130.0, 130.0, 1 << 19).astype(np.float32)
    mags = 10.0 ** rng.uniform(-30, 30, 1 << 18)
    signs = rng.choice([-1.0, 1.0], mags.size)
    wide = (mags * signs).astype(np.float32)
    # Every float32 between 2^-4 and 2^4 would be 2^27 values; a random
    # quarter million of their bit patterns covers the polynomials' range.
    bits = rng.integers(0x3D800000, 0x41800000, 1 << 18, dtype=np.uint32)
    mid = bits.view(np.float32) * rng.choice([-1.0, 1.0], bits.size).astype(np.float32)
    special = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, -1e-40,
         1.17549435e-38, 88.0, 88.72, 88.7228, 88.73, 89.0, -87.3, -88.0,
         -100.0, -103.0, -103.97, -104.0, -105.0, 87.3, 100.0, 104.0,
         126 * np.log(2), -126 * np.log(2), 3.4e38, -3.4e38, 1.0, -1.0, 0.5],
        np.float32)
    return np.concatenate([sweep, wide, mid, special]).astype(np.float32)


def model(path, op, n):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])
    if op == "SiLU":
        nodes = [helper.make_node("Sigmoid", ["x"], ["s"], name="sigmoid"),
                 helper.make_node("Mul", ["x", "s"], ["y"], name="mul")]
    else:
        nodes = [helper.make_node(op, ["x"], ["y"], name=op.lower())]
    g = helper.make_graph(nodes, op.lower(), [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(m, path)


def quantized_model(path, op, scale, zp, dtype, n):
    """x -> Sigmoid (times x for SiLU) -> QuantizeLinear -> DequantizeLinear:
    the chain ends in the quantization, the output stays float."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"], name="sigmoid")]
    last = "s"
    if op == "SiLU":
        nodes.append(helper.make_node("Mul", ["x", "s"], ["m"], name="mul"))
        last = "m"
    nodes += [helper.make_node("QuantizeLinear", [last, "sc", "zp"], ["q"],
                               name="quantize"),
              helper.make_node("DequantizeLinear", ["q", "sc", "zp"], ["y"],
                               name="dequantize")]
    inits = [helper.make_tensor("sc", TensorProto.FLOAT, [], [scale]),
             helper.make_tensor("zp", dtype, [], [zp])]
    g = helper.make_graph(nodes, f"{op.lower()}_q", [x], [y], inits)
    onnx.save(helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 13)]), path)


# (op, scale, zero point, type): SiLU's steps from 0.02 (results of a few
# units span the int8 range) to 0.1; the sigmoid's over [0, 1].
QUANTIZED = [("SiLU", 0.02, 0, TensorProto.INT8),
             ("SiLU", 0.1, -20, TensorProto.INT8),
             ("SiLU", 0.05, 3, TensorProto.UINT8),
             ("Sigmoid", 1 / 256, -128, TensorProto.INT8),
             ("Sigmoid", 1 / 255, 0, TensorProto.UINT8)]


def quantized_errors(op, scale, zp, dtype, x, got):
    """(elements more than 1 off, elements 1 off) against float64."""
    if op == "SiLU":
        keep = x != -np.inf
        x, got = x[keep], got[keep]
    s = np.float64(np.float32(scale))
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore"):
        y = 1.0 / (1.0 + np.exp(-x64))
    if op == "SiLU":
        y = x64 * y
    lo, hi = (-128, 127) if dtype == TensorProto.INT8 else (0, 255)
    ref = np.clip(np.rint(y / s) + zp, lo, hi).astype(np.int64)
    q = np.rint(got.astype(np.float64) / s).astype(np.int64) + zp
    if op == "Sigmoid":  # +-inf: exactly 1 and 0
        inf = np.isinf(x)
        ref[inf] = np.clip(np.rint((x64[inf] > 0) / s) + zp, lo, hi)
    d = np.abs(q - ref)
    return int((d > 1).sum()), int((d == 1).sum())


def reference(op, x):
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if op == "Exp":
            return np.exp(x64)
        if op == "Tanh":
            return np.tanh(x64)
        if op == "Erf":
            return np.frompyfunc(math.erf, 1, 1)(x64).astype(np.float64)
        s = 1.0 / (1.0 + np.exp(-x64))
        return s if op == "Sigmoid" else x64 * s


def ulp_errors(op, x, got, own_erf):
    """(NaN or infinity mismatches, worst ulp error, the x where it is,
    elements over their bound, the op's bound). `own_erf`: the plan's target
    has AVX-512 or is AVX2, where erf is our own code."""
    if op == "SiLU":
        keep = x != -np.inf
        x, got = x[keep], got[keep]
    ref = reference(op, x)
    with np.errstate(over="ignore"):  # exp beyond float32: inf, as it must
        r32 = ref.astype(np.float32)
    nan_mismatch = int((np.isnan(got) != np.isnan(r32)).sum())
    both = ~np.isnan(got) & ~np.isnan(r32)
    g, r, xs = got[both].astype(np.float64), ref[both], x[both].astype(np.float64)
    r32 = r32[both]
    # Infinities (and the results that round to them) must match exactly.
    inf = np.isinf(r32) | np.isinf(g)
    inf_mismatch = int((inf & (g != r32.astype(np.float64))).sum())
    fin = ~inf
    g, r, xs, r32 = g[fin], r[fin], xs[fin], r32[fin]
    ulp = np.spacing(np.abs(r32)).astype(np.float64)
    bound = {"Exp": 1.0, "Sigmoid": 2.5, "SiLU": 3.0, "Tanh": 5.0,
             "Erf": 2.5 if own_erf else 5.0}[op]
    err = np.abs(g - r) / ulp
    # Each element's bound: exp's is 6 ulps from 88 to the overflow.
    limit = np.where(xs >= 88.0, 6.0, bound) if op == "Exp" else bound
    if op == "Exp":
        # A denormal result may be flushed to 0.
        tiny = 2.0 ** -126
        err = np.where((np.abs(r) < tiny) & (np.abs(g - r) <= tiny), 0.0, err)
    elif op in ("Sigmoid", "SiLU"):
        # Below 2^-100 the sigmoid may be anything under 2^-100.
        floor = 2.0 ** -100 * np.maximum(1.0, np.abs(xs))
        err = np.where((np.abs(r) < floor) & (np.abs(g) <= floor), 0.0, err)
    worst = int(np.argmax(err)) if err.size else 0
    over = int((err > limit).sum())
    return (nan_mismatch + inf_mismatch, float(err.max()) if err.size else 0.0,
            float(xs[worst]) if err.size else 0.0, over, bound)


def plan_outputs(c, args, name, path, xin):
    """(target, whether the plan's erf is our own (AVX-512 or AVX2), output)
    for each target:
    `path` compiled for it and run on `xin`; a target that fails is
    reported under `name` and skipped."""
    for target in args.targets.split(","):
        plan = os.path.join(args.work, f"{name}-{target}.plan")
        out = os.path.join(args.work, f"{name}-{target}.npy")
        try:
            c.qatc("compile", path, "--target-cpu", target, "-o", plan)
            c.qatc("run", plan, "--input", xin, "-o", out)
            isa = json.loads(c.qatc("inspect", plan, "--json")[0])["target"]
        except RuntimeError as e:
            c.fail(name, f"{target}: {e}")
            continue
        yield target, isa in ("avx512vnni", "amx", "avx2", "avxvnni"), \
            np.load(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--qatc", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--targets", default=",".join(TARGETS))
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    c = Checker(args)
    print(amx_note())
    x = inputs(np.random.default_rng(7))
    xin = os.path.join(args.work, "x.npy")
    np.save(xin, x)
    for op in ["Exp", "Sigmoid", "SiLU", "Tanh", "Erf"]:
        path = os.path.join(args.work, f"{op.lower()}.onnx")
        model(path, op, x.size)
        print(f"== {op} on {x.size} inputs", flush=True)
        for target, own_erf, got in plan_outputs(c, args, op.lower(), path,
                                                 xin):
            got = got.astype(np.float32)
            bad, worst, at, over, bound = ulp_errors(op, x, got, own_erf)
            print(f"   {target:10s} worst {worst:.3f} ulp at x = {at:.9g}; "
                  f"{over} over {bound:g} ulp; {bad} NaN/inf mismatches")
            if bad:
                c.fail(op, f"{target}: {bad} results NaN or infinite in only "
                           "one of the plan and float64, or infinities differ")
            if over:
                c.fail(op, f"{target}: {over} results beyond {bound:g} ulp "
                           f"(worst {worst:.3f} at x = {at:.9g})")
    # Finite inputs from 1e-6 to 1e30 in magnitude. Below 1e-6 the float32
    # sigmoid is 1/2 and the quotient by 1/255 is a tie, which float64
    # breaks by x's sign and float32 to even; beyond -1e30 the sigmoid's
    # floor (2^-127, in float plans too) times x is a few steps.
    # And +-inf (sigmoid 1 and 0; SiLU +inf saturates, -inf is left out
    # as above).
    ax = np.abs(x)
    xf = np.concatenate([x[np.isfinite(x) & (ax >= 1e-6) & (ax <= 1e30)],
                         np.float32([np.inf, -np.inf])])
    xq = os.path.join(args.work, "xq.npy")
    np.save(xq, xf)
    for op, scale, zp, dtype in QUANTIZED:
        name = f"{op.lower()}-q{scale:.4g}-{zp}"
        path = os.path.join(args.work, f"{name}.onnx")
        quantized_model(path, op, scale, zp, dtype, xf.size)
        print(f"== {op} -> QuantizeLinear (scale {scale:.4g}, zero point "
              f"{zp}) on {xf.size} inputs", flush=True)
        for target, _, got in plan_outputs(c, args, name, path, xq):
            far, one = quantized_errors(op, scale, zp, dtype, xf, got)
            print(f"   {target:10s} {one} one step off "
                  f"({100 * one / xf.size:.4f} %), {far} further")
            if far or one > 2e-5 * xf.size:
                c.fail(name, f"{target}: {far} results more than a step off "
                             f"and {one} one step off float64 (at most "
                             f"{int(2e-5 * xf.size)})")
    return c.finish("the plans' exp, sigmoid, SiLU, tanh and erf are within "
                    "their ulp bounds; quantized sigmoid and SiLU within a "
                    "step")


if __name__ == "__main__":
    sys.exit(main())
