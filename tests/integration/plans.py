#!/usr/bin/env python3
"""Plans end to end: each model (the examples, and generated torchvision
Q/DQ exports with their float twins) compiles for every target, and the plan's
outputs agree with the reference evaluator of the same graph (`qatc eval
--stage=qat`): float models within 1e-4 relative, int8 models every int8
tensor within 1 LSB on at most 0.1 % of its elements and the outputs within
0.5 % of their range; top-1 on labelled test sets identical to the
reference's; 1 and 2 threads give the same bytes; compilation is
deterministic; corrupted plans are refused with a message, never a crash.

--ort-recipe NAME quantizes a generated float model the way ONNX Runtime's
quantize_static does (bench/ort_qdq.py: uint8 activations on every quantized
op's inputs and outputs, Relu folded into its producer, Softmax on [0, 1])
and checks that export too: it is what users bring from ORT's tools, and
the export the bench times ORT on."""
import argparse
import os
import shutil
import struct
import sys

import numpy as np

from harness import Checker, manifest_models, nan_aware_diff, run
from ort_differential import load_outputs  # noqa: E402
from qat_lowering import seeded_inputs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))



def host_has_amx():
    """The CPU has AMX int8 tiles (--target-cpu host is then amx)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " amx_int8" in line for line in f)
    except OSError:
        return False


# On an AMX host, host is amx: the VNNI kernels it replaces are checked too.
TARGETS = ["host"] + (["avx512vnni"] if host_has_amx() else []) + ["avx2", "generic"]


def amx_note():
    """One line saying whether the AMX kernels run here."""
    if host_has_amx():
        return "AMX host: host is amx (tile kernels), avx512vnni checked beside it"
    return ("no AMX on this host (amx_int8): the AMX tile kernels are not run "
            "here; an AMX host runs them as --target-cpu host")


def outputs(path):
    """The arrays of an .npz, in order."""
    return list(load_outputs(path).values())


def plan_checksum(data, skip_off=24, skip_len=8):
    """plan::checksum (runtime/PlanFormat.cpp) in Python."""
    mask = (1 << 64) - 1
    b = bytearray(data)
    b[skip_off:skip_off + skip_len] = b"\0" * skip_len
    size = len(b)
    h = (0x9e3779b97f4a7c15 ^ size) & mask
    n = size // 8
    words = struct.unpack_from("<%dQ" % n, b, 0)
    for w in words:
        h = ((h ^ w) * 0x100000001b3) & mask
        h ^= h >> 29
    tail = int.from_bytes(bytes(b[n * 8:]) + b"\0" * 8, "little") & mask
    h ^= tail
    h ^= h >> 33
    h = (h * 0xff51afd7ed558ccd) & mask
    h ^= h >> 33
    h = (h * 0xc4ceb9fe1a85ec53) & mask
    h ^= h >> 33
    return h


def check_model(c, label, model, inp, labelled, work, targets):
    ref = os.path.join(work, "ref.npz")
    ref_dump = os.path.join(work, "ref-dump")
    c.qatc("eval", model, "--stage=qat", "--input", inp, "-o", ref,
           "--dump-tensors", ref_dump)
    ref_out = outputs(ref)
    ref_tensors = load_outputs(ref_dump)
    first = None
    for target in targets:
        plan = os.path.join(work, f"{target}.plan")
        c.qatc("compile", model, "--target-cpu", target, "-o", plan)
        out = os.path.join(work, f"{target}.npz")
        dump = os.path.join(work, f"{target}-dump")
        shutil.rmtree(dump, ignore_errors=True)
        c.qatc("run", plan, "--input", inp, "-o", out, "--dump-tensors", dump)
        got = outputs(out)
        for g, r in zip(got, ref_out):
            nan_diff, err, _ = nan_aware_diff(g, r)
            if nan_diff:
                c.fail(label, f"{target}: {nan_diff} outputs are NaN in one of "
                              "the plan and the reference only")
            finite = ~np.isnan(r)
            rng = float(np.ptp(r[finite])) if finite.any() else 0.0
            rng = rng if np.isfinite(rng) and rng else 1.0
            float_model = "float" in os.path.basename(model)
            limit = 1e-4 * max(float(np.abs(r).max()), 1e-6) if float_model \
                else 0.005 * rng
            print(f"   {target:8s} output max |diff| {err:.3g} "
                  f"(limit {limit:.3g})")
            if err > limit:
                c.fail(label, f"{target}: output differs by {err:.3g} > {limit:.3g}")
        # Every int8 tensor the plan dumps against the reference's.
        checked = worst = 0
        for name, t in load_outputs(dump).items():
            r = ref_tensors.get(name)
            if r is None or r.shape != t.shape:
                continue
            if t.dtype in (np.int8, np.uint8):
                d = np.abs(t.astype(np.int32) - r.astype(np.int32))
                frac = float((d > 0).mean())
                if d.max() > 1 or frac > 0.001:
                    c.fail(label, f"{target}: tensor {name}: max {d.max()} LSB "
                                  f"on {frac:.4%} of elements")
                worst = max(worst, int(d.max()))
                checked += 1
        print(f"   {target:8s} {checked} int8 tensors within {worst} LSB")
        if first is None:
            first = got
            # Threads: the same bytes on 2 threads, and on 3 with unequal
            # shares down to the smallest the runtime gives a thread.
            out2 = os.path.join(work, "threads2.npz")
            for args, what in (
                    (["--threads", "2"], "2 threads"),
                    (["--threads", "3", "--thread-shares",
                      "0.5,0.1666667,0.3333333"], "3 unequal threads")):
                c.qatc("run", plan, "--input", inp, "-o", out2, *args)
                for a, b in zip(got, outputs(out2)):
                    if not np.array_equal(a, b, equal_nan=True):
                        c.fail(label, f"{what} give other outputs than 1")
            # Deterministic compilation.
            again = os.path.join(work, "again.plan")
            c.qatc("compile", model, "--target-cpu", target, "-o", again)
            if open(plan, "rb").read() != open(again, "rb").read():
                c.fail(label, "two compilations gave different plan bytes")
    if labelled:
        images, labels = labelled
        ref_all = os.path.join(work, "ref-all.npz")
        c.qatc("eval", model, "--stage=qat", "--input", images, "-o", ref_all,
               "--batch-size", "100")
        plan = os.path.join(work, "host.plan")
        got_all = os.path.join(work, "plan-all.npz")
        c.qatc("run", plan, "--input", images, "-o", got_all)
        y = np.load(labels)
        a = outputs(ref_all)[0].argmax(1)
        b = outputs(got_all)[0].argmax(1)
        acc_ref, acc_plan = (a == y).mean() * 100, (b == y).mean() * 100
        same = (a == b).mean() * 100
        print(f"   top-1 reference {acc_ref:.2f} %, plan {acc_plan:.2f} %, "
              f"same prediction on {same:.2f} % of {len(y)} images")
        if acc_ref != acc_plan:
            c.fail(label, f"top-1 {acc_plan:.2f} % vs the reference's {acc_ref:.2f} %")


def ort_recipe_export(c, label, float_path, path):
    """Writes ORT's u8 recipe of `float_path` to `path`; fails `label` unless
    every Conv, Gemm and MatMul reads DequantizeLinear outputs and feeds a
    QuantizeLinear, the pattern ORT fuses into its int8 kernels (else the
    bench would time ORT's fp32 kernels as its int8)."""
    import onnx
    from ort_qdq import ort_qdq
    q = ort_qdq(onnx.load(float_path))
    onnx.save(q, path)
    producer = {o: n for n in q.graph.node for o in n.output}
    readers = {}
    for n in q.graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n.op_type)
    loose = [n.name for n in q.graph.node if n.op_type in ("Conv", "Gemm", "MatMul")
             and (any(getattr(producer.get(i), "op_type", "") != "DequantizeLinear"
                      for i in n.input[:2])
                  or readers.get(n.output[0]) != ["QuantizeLinear"])]
    if loose:
        c.fail(label, f"ORT cannot fuse {len(loose)} node(s) into int8 kernels: "
                      f"{', '.join(loose[:3])}")


def check_corruption(c, plan, inp, work):
    data = open(plan, "rb").read()
    header = struct.unpack_from("<8sIIQQQQQQQQQ", data, 0)
    manifest_off, weights_off, code_off = header[6], header[8], header[10]
    cases = {
        "truncated": data[: len(data) // 2],
        "empty": b"",
        "not a plan": b"hello world" * 20,
        "bit flip in the manifest": None,
        "bit flip in the weights": None,
        "bit flip in the code": None,
        "wrong format version": None,
        "unknown CPU feature": None,
        "appended bytes": data + b"\0" * 16,
    }

    def flip(off):
        b = bytearray(data)
        b[off] ^= 0x10
        return bytes(b)

    cases["bit flip in the manifest"] = flip(manifest_off + 5)
    cases["bit flip in the weights"] = flip(weights_off + 7)
    cases["bit flip in the code"] = flip(code_off + 100)
    b = bytearray(data)
    struct.pack_into("<I", b, 8, 99)
    cases["wrong format version"] = bytes(b)
    b = bytearray(data)
    feats = struct.unpack_from("<Q", b, 32)[0] | (1 << 40)
    struct.pack_into("<Q", b, 32, feats)
    struct.pack_into("<Q", b, 24, plan_checksum(bytes(b)))
    cases["unknown CPU feature"] = bytes(b)
    expect = {
        "truncated": "truncated", "empty": "not a qatc plan",
        "not a plan": "not a qatc plan", "bit flip in the manifest": "checksum",
        "bit flip in the weights": "checksum", "bit flip in the code": "checksum",
        "wrong format version": "format version",
        "unknown CPU feature": "does not know",
        "appended bytes": "appended",
    }
    for name, blob in cases.items():
        p = os.path.join(work, "corrupt.plan")
        with open(p, "wb") as f:
            f.write(blob)
        for cmd in (["run", p, "--input", inp], ["inspect", p]):
            rc, out, err = run([c.args.qatc, *cmd])
            msg = err.strip().splitlines()[-1] if err.strip() else ""
            if rc != 1 or expect[name] not in err:
                c.fail("corruption", f"{name}: qatc {cmd[0]} exit {rc}, "
                       f"message '{msg}' (expected '{expect[name]}')")
        print(f"   {name:26s} refused: {msg}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--qatc", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model", action="append", default=[],
                    help="model.onnx:input.npy[:images.npy:labels.npy]")
    ap.add_argument("--models", help="the test-model generator's directory")
    ap.add_argument("--generated", action="append", default=[],
                    help="a generated model (both its Q/DQ and float "
                         "variants) that must compile; random input")
    ap.add_argument("--ort-recipe", action="append", default=[],
                    help="a generated model whose float variant is quantized "
                         "with ORT's u8 recipe and checked; random input")
    ap.add_argument("--targets", default=",".join(TARGETS),
                    help="comma-separated --target-cpu values (default: %(default)s)")
    args = ap.parse_args()
    c = Checker(args)
    print(amx_note(), flush=True)
    os.makedirs(args.work, exist_ok=True)
    specs = list(args.model)
    for variant in ("qdq", "float"):
        for label, path in manifest_models(args.models, variant) if args.models else []:
            if label.rsplit("_", 1)[0] in args.generated:
                work = os.path.join(args.work, label)
                os.makedirs(work, exist_ok=True)
                inp = list(seeded_inputs(path, work, label).values())[0]
                specs.append(f"{path}:{inp}")
    for label, path in manifest_models(args.models, "float") if args.models else []:
        name = label.rsplit("_", 1)[0]
        if name in args.ort_recipe:
            work = os.path.join(args.work, f"{name}_ortu8")
            os.makedirs(work, exist_ok=True)
            export = os.path.join(work, f"{name}_ortu8.onnx")
            ort_recipe_export(c, f"{name}_ortu8", path, export)
            inp = list(seeded_inputs(export, work, f"{name}_ortu8").values())[0]
            specs.append(f"{export}:{inp}")
    first_plan = first_input = None
    for spec in specs:
        parts = spec.split(":")
        model, inp = parts[0], parts[1]
        labelled = (parts[2], parts[3]) if len(parts) == 4 else None
        label = os.path.splitext(os.path.basename(model))[0]
        work = os.path.join(args.work, label)
        os.makedirs(work, exist_ok=True)
        print(f"== {label}", flush=True)
        try:
            check_model(c, label, model, inp, labelled, work, args.targets.split(","))
        except RuntimeError as e:
            c.fail(label, str(e))
        if first_plan is None and os.path.exists(os.path.join(work, "host.plan")):
            first_plan, first_input = os.path.join(work, "host.plan"), inp
    if first_plan:
        print("== corrupted plans", flush=True)
        check_corruption(c, first_plan, first_input, args.work)
    return c.finish("every plan agrees with the reference")


if __name__ == "__main__":
    sys.exit(main())
