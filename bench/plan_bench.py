#!/usr/bin/python3
"""qatc plans against ONNX Runtime (npm onnxruntime-node) in one run.

  /usr/bin/python3 bench/plan_bench.py [--threads 1 2] [--runs 300] [--torch] \\
      model.onnx[:input_name=x.npy[,other=y.npy ...]] ...

Inputs not given a .npy get random data of their shape (a dynamic
dimension 1) for both qatc and ORT.

For each model: `qatc compile`, `qatc bench --json` (median of --runs runs)
and ORT's median on the same model (graph optimizations on, sequential),
for each thread count; prints a table with the ratios and qatc's share of
the int8 peak on its conv/matmul layers. Give a Q/DQ model and its float
twin as separate entries (NAME_qdq.onnx, NAME_float.onnx): a second table
puts them side by side (ORT fp32, ORT int8, qatc fp32, qatc int8 and qatc
int8's speedups). With several thread counts a third table gives each
model's speedup over the fewest threads, qatc's beside ORT's. Medians only
(the machine is shared and noisy). The report starts with the host's CPU
(model name, family and model, its int8 units), which every figure quoted
from it must name: plans for `host` differ from CPU to CPU.

With --rounds R every measurement (qatc, ORT, the compare target, PyTorch)
is taken R times, the contenders alternating within each round, and each
figure is the median of its rounds' medians: a host whose speed changes
for minutes at a time (another tenant on the core) then slows every
contender alike instead of whichever ran during it. Within a round each
contender runs its thread counts back to back, and the thread-scaling
table gives the median of the rounds' ratios.

With --ort-u8 every float model with a Q/DQ twin is also quantized with
ONNX Runtime's own static recipe (bench/ort_qdq.py: uint8 activations,
int8 per-channel weights, MinMax calibration by ORT) and ORT is timed on
that export too: ORT's int8 at its best, beside ORT on the same export as
qatc.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def random_feeds(model, feeds, work):
    """name=x.npy for each graph input `feeds` does not name: random data of
    its shape (a dynamic dimension 1, as `qatc compile` takes it), so ORT is
    fed what `qatc bench` is (random data of the plan's shape)."""
    import numpy as np
    import onnx
    try:  # onnx >= 1.13
        from onnx.helper import tensor_dtype_to_np_dtype as to_np
    except ImportError:
        from onnx.mapping import TENSOR_TYPE_TO_NP_TYPE
        to_np = TENSOR_TYPE_TO_NP_TYPE.__getitem__
    given = {f.partition("=")[0] for f in feeds}
    graph = onnx.load(model, load_external_data=False).graph
    inits = {i.name for i in graph.initializer}
    rng = np.random.default_rng(0)
    out = []
    for vi in graph.input:
        if vi.name in given or vi.name in inits:
            continue
        t = vi.type.tensor_type
        dtype = np.dtype(to_np(t.elem_type))
        shape = [d.dim_value if d.HasField("dim_value") else 1
                 for d in t.shape.dim]
        data = (rng.standard_normal(shape) if dtype.kind == "f"
                else np.zeros(shape)).astype(dtype)
        path = os.path.join(work, "%s.%s.npy" % (
            os.path.splitext(os.path.basename(model))[0],
            "".join(c if c.isalnum() else "_" for c in vi.name)))
        np.save(path, data)
        out.append("%s=%s" % (vi.name, path))
    return out


def host_line():
    """The CPU the figures were measured on, as a note must name it: model
    name, family and model, logical CPUs, and the int8 units it has (a plan
    for `host` uses the best of them)."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if not line.strip():
                    break  # the first CPU's block is enough
                info.setdefault(key, value.strip())
    except OSError:
        return "host: unknown CPU (no /proc/cpuinfo)"
    flags = set(info.get("flags", "").split())
    units = [u for u in ("amx_int8", "avx512_vnni", "avx_vnni", "avx2")
             if u in flags]
    missing = [u for u in ("amx_int8", "avx512_vnni") if u not in flags]
    return "host: %s (family %s model %s), %d CPUs, has %s%s" % (
        info.get("model name", "unknown"), info.get("cpu family", "?"),
        info.get("model", "?"), os.cpu_count() or 0,
        ", ".join(units) or "none of avx2/avx512_vnni/amx_int8",
        "; no " + ", no ".join(missing) if missing else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--qatc", default=os.path.join(ROOT, "build", "bin", "qatc"))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--min-ms", type=float, default=300,
                    help="time at least this many ms per measurement: a "
                         "model faster than min-ms / runs runs more often "
                         "(qatc and ORT alike), so a sub-millisecond model's "
                         "median is not a handful of runs")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure everything this many times, alternating, "
                         "and report the median of the rounds' medians")
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "plan-bench"))
    ap.add_argument("--compare-target", metavar="TARGET",
                    help="also compile each Q/DQ model for --target-cpu TARGET "
                         "(e.g. avx512vnni on an AMX host) and time it in the "
                         "same run: a column beside qatc int8")
    ap.add_argument("--torch", action="store_true",
                    help="also time PyTorch's int8 engine (FX post-training "
                         "quantization, onednn backend; bench/torch_int8.py) on "
                         "pairs named after a tests/models/generate.py model")
    ap.add_argument("--ort-u8", action="store_true",
                    help="also time ORT on its own uint8 Q/DQ export of each "
                         "float model with a Q/DQ twin (bench/ort_qdq.py)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    # Every plan first, then the rounds of measurements.
    specs = []
    for spec in args.models:
        model, _, feed = spec.partition(":")
        name = os.path.splitext(os.path.basename(model))[0]
        plan = os.path.join(args.work, name + ".plan")
        compile_cmd = [args.qatc, "compile", model, "-o", plan]
        # Dynamic dimensions take their sizes from the input data (one
        # name=x.npy per input, comma-separated).
        feeds = [f for f in feed.split(",") if "=" in f] if feed else []
        feeds += random_feeds(model, feeds, args.work)
        for f in feeds:
            import numpy as np
            input_name, _, npy = f.partition("=")
            shape = np.load(npy, mmap_mode="r").shape
            compile_cmd.append("--input-shape=%s=%s" % (
                input_name, "x".join(str(d) for d in shape)))
        subprocess.run(compile_cmd, check=True, capture_output=True)
        plan2 = None
        if args.compare_target and name.endswith("_qdq"):
            plan2 = os.path.join(args.work, name + "." + args.compare_target + ".plan")
            subprocess.run([args.qatc, "compile", model, "-o", plan2,
                            "--target-cpu", args.compare_target]
                           + compile_cmd[5:], check=True, capture_output=True)
        specs.append((name, model, plan, feeds, plan2))
    # ORT's own u8 exports, made once (keyed by the float model's name).
    ort_u8 = {}
    names = [s[0] for s in specs]
    if args.ort_u8:
        import onnx
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from ort_qdq import ort_qdq
        for name, model, *_ in specs:
            base = name[: -len("_float")]
            if name.endswith("_float") and base + "_qdq" in names:
                path = os.path.join(args.work, base + "_ortu8.onnx")
                print(f"ORT u8 export of {name}", file=sys.stderr, flush=True)
                onnx.save(ort_qdq(onnx.load(model)), path)
                ort_u8[name] = path

    def ort_time(model, feeds, t, runs):
        env = dict(os.environ, ORT_THREADS=str(t))
        return json.loads(subprocess.run(
            ["node", os.path.join(ROOT, "tests", "ort", "time.js"), model,
             str(runs)] + feeds, check=True,
            capture_output=True, text=True, env=env).stdout)["median_ms"]

    def bench(plan, t, runs, warmup=10):
        return json.loads(subprocess.run(
            [args.qatc, "bench", plan, "--threads", str(t), "--iterations",
             str(runs), "--warmup", str(warmup), "--json"], check=True,
            capture_output=True, text=True).stdout)

    # Runs per measurement of each model and thread count: at least --runs,
    # and enough to fill --min-ms at qatc's speed (a quick estimate), the
    # same count for every contender.
    runs_for = {}
    for name, _, plan, _, _ in specs:
        for t in args.threads:
            est = bench(plan, t, 5, warmup=2)["median_ms"]
            runs_for[(name, t)] = min(5000, max(
                args.runs, int(args.min_ms / max(est, 1e-3)) + 1))

    samples = {}  # (name, threads) -> {what: [ms per round]}
    # PyTorch's int8 engine on the same architecture (its own quantization
    # of the same seeded model), for Q/DQ models with a float twin.
    torch_bases = [n[: -len("_qdq")] for n in names
                   if n.endswith("_qdq") and n[: -len("_qdq")] + "_float" in names] \
        if args.torch else []
    torch_samples = {}
    torch_failed = set()
    for _ in range(args.rounds):
        for name, model, plan, feeds, plan2 in specs:
            # Each contender's thread counts back to back, so that a
            # model's 1- and 2-thread medians of a round are seconds apart
            # and the scaling table can pair them by round.
            for t in args.threads:
                got = samples.setdefault((name, t), {})
                q = bench(plan, t, runs_for[(name, t)])
                # Conv/matmul layers of the plan's main precision, against
                # that precision's peak as `qatc bench` measures it
                # (rt::measureHostPeak).
                by = {}
                for l in q["layers"]:
                    if l["macs"]:
                        w = by.setdefault(l["precision"], [0, 0.0])
                        w[0] += l["macs"]
                        w[1] += l["ms"]
                prec = max(by, key=lambda p: by[p][0]) if by else "int8"
                macs, ms = by.get(prec, (0, 0.0))
                pk = q["fp32_peak_gops"] if prec == "fp32" else q["peak_gops"]
                peak = 2 * macs / (ms * 1e-3) / 1e9 / pk * 100 if ms else 0
                got.setdefault("qatc", []).append(q["median_ms"])
                got.setdefault("peak", []).append(peak)
            others = [("ort", lambda t, n: ort_time(model, feeds, t, n))]
            if name in ort_u8:
                others.append(("ortu8", lambda t, n: ort_time(
                    ort_u8[name], feeds, t, n)))
            if plan2:
                others.append(("other", lambda t, n: bench(plan2, t, n)["median_ms"]))
            for what, timed in others:
                for t in args.threads:
                    samples[(name, t)].setdefault(what, []).append(
                        timed(t, runs_for[(name, t)]))
        # PyTorch in the same round; a model it cannot quantize is tried once.
        for base in torch_bases:
            for t in args.threads:
                if (base, t) in torch_failed:
                    continue
                r = subprocess.run(
                    ["/usr/bin/python3", os.path.join(ROOT, "bench", "torch_int8.py"),
                     base, "--threads", str(t), "--runs", str(min(args.runs, 100))],
                    capture_output=True, text=True)
                if r.returncode == 0:
                    torch_samples.setdefault((base, t), []).append(
                        json.loads(r.stdout)["median_ms"])
                else:
                    torch_failed.add((base, t))
                    print(r.stderr.strip(), file=sys.stderr)
    med = statistics.median
    rows = []
    for name, *_ in specs:
        for t in args.threads:
            g = samples[(name, t)]
            rows.append((name, t, med(g["ort"]), med(g["qatc"]), med(g["peak"]),
                         med(g["other"]) if "other" in g else None,
                         med(g["ortu8"]) if "ortu8" in g else None))
    torch_ms = {k: med(v) for k, v in torch_samples.items()}
    print(host_line())
    print(f"{'model':28s} {'thr':>3s} {'ORT ms':>9s} {'qatc ms':>9s} "
          f"{'ORT/qatc':>9s} {'conv %peak':>10s}")
    for name, t, o, q, p, *_ in rows:
        print(f"{name:28s} {t:3d} {o:9.4f} {q:9.4f} {o / q:9.2f} {p:10.1f}")
    # Q/DQ exports beside their float twins (NAME_qdq / NAME_float).
    pairs = {}
    for name, t, o, q, p, other, ortu8 in rows:
        for suffix, kind in (("_qdq", "int8"), ("_float", "fp32")):
            if name.endswith(suffix):
                pairs.setdefault((name[: -len(suffix)], t), {})[kind] = (o, q, p)
                if other is not None:
                    pairs[(name[: -len(suffix)], t)]["other"] = other
                if ortu8 is not None:
                    pairs[(name[: -len(suffix)], t)]["ortu8"] = ortu8
    full = [(k, v) for k, v in pairs.items() if "int8" in v and "fp32" in v]
    if full:
        print()
        ct = args.compare_target
        ohead = f" {'int8 ' + ct:>16s} {'vs ' + ct:>14s}" if ct else ""
        uhead = f" {'ORT u8':>9s} {'vs ORT u8':>9s}" if args.ort_u8 else ""
        print(f"{'model':22s} {'thr':>3s} {'ORT fp32':>9s} {'ORT int8':>9s}{uhead} "
              f"{'torch int8':>10s} {'qatc fp32':>9s} {'qatc int8':>9s}  "
              f"{'vs ORT int8':>11s} {'vs ORT fp32':>11s} {'vs torch':>9s} "
              f"{'vs own fp32':>11s} {'int8 conv %peak':>15s}{ohead}")
        for (base, t), v in full:
            of, qf, _ = v["fp32"]
            oi, qi, pi = v["int8"]
            tm = torch_ms.get((base, t))
            tcol = f"{tm:10.3f}" if tm else f"{'-':>10s}"
            tvs = f"{tm / qi:8.2f}x" if tm else f"{'-':>9s}"
            ucol = ""
            if args.ort_u8:
                u = v.get("ortu8")
                ucol = f" {u:9.3f} {u / qi:8.2f}x" if u else f" {'-':>9s} {'-':>9s}"
            ocol = ""
            if ct and "other" in v:
                ocol = f" {v['other']:16.3f} {v['other'] / qi:13.2f}x"
            print(f"{base:22s} {t:3d} {of:9.3f} {oi:9.3f}{ucol} {tcol} {qf:9.3f} "
                  f"{qi:9.3f}  {oi / qi:10.2f}x {of / qi:10.2f}x {tvs} "
                  f"{qf / qi:10.2f}x {pi:15.1f}{ocol}")
    # Thread scaling: each round's median on the fewest threads over its
    # median on each other count (measured back to back), the median of
    # those ratios over the rounds, qatc beside ORT. On a shared host a
    # slow minute then spoils one round's ratio, not a whole column.
    ts = sorted(set(args.threads))
    if len(ts) > 1:
        def scaling(name, t, what):
            a, b = samples[(name, ts[0])][what], samples[(name, t)][what]
            return med([x / y for x, y in zip(a, b)])
        print()
        cols = "".join(f" {'qatc %d/%d' % (t, ts[0]):>10s} {'ORT %d/%d' % (t, ts[0]):>9s}"
                       for t in ts[1:])
        print(f"{'model':28s}{cols}")
        for name, *_ in specs:
            print(f"{name:28s}" + "".join(
                f" {scaling(name, t, 'qatc'):9.2f}x {scaling(name, t, 'ort'):8.2f}x"
                for t in ts[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
