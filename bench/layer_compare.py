#!/usr/bin/env python3
"""Two plans of one model (or one plan on two thread counts), layer by layer.

  /usr/bin/python3 bench/layer_compare.py A.plan B.plan [--threads 2] \\
      [--rounds 9] [--iterations 200] [--kind depthwise]
  /usr/bin/python3 bench/layer_compare.py A.plan --threads 1 2

Runs `qatc bench --json` on A and B in turn, --rounds times, and prints
each layer's median time under both, their ratio, and the totals per kernel
kind. With one plan and two thread counts it compares the plan with itself:
a layer whose time does not halve on 2 threads stands out.

Why per layer and paired: a whole-model median moves a few percent with the
other tenants of a shared host, more than most single changes gain; a
change to one kind of layer shows in those layers, alternating A and B
spreads the host's slow minutes over both, and the median of the rounds
drops the outliers. A layer's time in `qatc bench` runs from the end of the
one before to its own end, so on several threads it includes the barrier
after it (the profile puts one after every layer).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench(qatc, plan, threads, iterations):
    out = subprocess.run(
        [qatc, "bench", plan, "--threads", str(threads), "--iterations",
         str(iterations), "--json"],
        capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("qatc bench %s failed:\n%s" % (plan, out.stderr))
    return json.loads(out.stdout)


def kind_of(kernel):
    """The kernel's family and its fused chain: "vnni-conv +sigmoid+mul"."""
    words = kernel.split()
    chain = [w for w in words[1:] if w.startswith("+")]
    return " ".join([words[0]] + chain) if words else "?"


def main():
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("plans", nargs="+", help="A.plan [B.plan]")
    ap.add_argument("--qatc", default=os.path.join(ROOT, "build", "bin", "qatc"))
    ap.add_argument("--threads", type=int, nargs="+", default=[1],
                    help="one count for both plans, or two counts for one plan")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--kind", default="",
                    help="print only the layers whose kernel contains this")
    ap.add_argument("--all", action="store_true",
                    help="print every layer, not only those that differ by "
                         "more than 3 %% or match --kind")
    args = ap.parse_args()

    if len(args.plans) == 2 and len(args.threads) == 1:
        runs = [(args.plans[0], args.threads[0]), (args.plans[1], args.threads[0])]
        labels = [os.path.basename(args.plans[0]), os.path.basename(args.plans[1])]
    elif len(args.plans) == 1 and len(args.threads) == 2:
        runs = [(args.plans[0], args.threads[0]), (args.plans[0], args.threads[1])]
        labels = ["%d thread(s)" % t for t in args.threads]
    else:
        ap.error("give two plans and one thread count, or one plan and two")

    totals = [[], []]
    times = [defaultdict(list), defaultdict(list)]
    layers = None
    for r in range(args.rounds):
        for side, (plan, threads) in enumerate(runs):
            result = bench(args.qatc, plan, threads, args.iterations)
            totals[side].append(result["median_ms"])
            names = [(l["node"], l["kernel"]) for l in result["layers"]]
            if layers is None:
                layers = names
            elif [n for n, _ in names] != [n for n, _ in layers]:
                sys.exit("the plans' layers differ: compare plans of one model "
                         "compiled alike")
            for i, l in enumerate(result["layers"]):
                times[side][i].append(l["ms"])
        print("round %d of %d: %s" % (r + 1, args.rounds, "  ".join(
            "%s %.4f ms" % (labels[s], totals[s][-1]) for s in (0, 1))),
              file=sys.stderr)

    med = [{i: statistics.median(v) for i, v in times[s].items()} for s in (0, 1)]
    print("A = %s, B = %s: medians of %d alternating rounds of %d runs" %
          (labels[0], labels[1], args.rounds, args.iterations))
    print("%-4s %-44s %-36s %9s %9s %6s" % ("#", "node", "kernel", "A ms", "B ms", "B/A"))
    for i, (node, kernel) in enumerate(layers):
        a, b = med[0][i], med[1][i]
        ratio = b / a if a > 0 else float("nan")
        wanted = args.all or (args.kind and args.kind in kernel) or (
            not args.kind and abs(ratio - 1) > 0.03 and max(a, b) > 0.001)
        if wanted:
            print("%-4d %-44s %-36s %9.4f %9.4f %6.2f" %
                  (i, node[-44:], kernel[:36], a, b, ratio))
    kinds = defaultdict(lambda: [0.0, 0.0])
    for i, (_, kernel) in enumerate(layers):
        for s in (0, 1):
            kinds[kind_of(kernel)][s] += med[s][i]
    print("\n%-44s %9s %9s %6s" % ("kernel kind (sum of layer medians)", "A ms", "B ms", "B/A"))
    for k, (a, b) in sorted(kinds.items(), key=lambda x: -x[1][0]):
        print("%-44s %9.4f %9.4f %6.2f" % (k[:44], a, b, b / a if a > 0 else float("nan")))
    a, b = statistics.median(totals[0]), statistics.median(totals[1])
    faster = sum(y < x for x, y in zip(totals[0], totals[1]))
    print("\nwhole plan (qatc bench median, timed without the per-layer "
          "barriers): A %.4f ms, B %.4f ms, B/A %.3f; B faster in %d of %d rounds"
          % (a, b, b / a, faster, args.rounds))


if __name__ == "__main__":
    main()
