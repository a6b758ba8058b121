#!/usr/bin/env python3
"""Two plans of one model, run by turns in one process: A, B, B, A, ...

  PYTHONPATH=build/python /usr/bin/python3 bench/pair_bench.py A.plan B.plan \\
      [--threads 2] [--runs 1000] [--input x.npy] [--profile]

Loads both plans through the Python API, runs each --runs times on the same
input, alternating one run of each (the order flipping every pair), and
prints both medians, their ratio and, over blocks of 50 pairs, the median
of the blocks' ratios and how many blocks B won. Without --input each input
is random data of the plan's shape and type (the dynamic dimensions as the
plan was compiled).

Why one run each: on a shared 2-vCPU host the other tenants move a plan's
time by tens of percent within a minute (EfficientNet-B0 int8 on 2 threads:
1.5 to 2.0 ms), far more than most changes gain, and rounds of `qatc bench`
of several hundred runs each land in different stretches. Run by turns, A
and B see the same stretches; the blocks show whether B wins throughout or
only on average. --profile also sums each plan's per-layer profile by kernel
kind (the profile puts a barrier after every layer: on several threads it
misjudges data movement, so judge those by the whole-run ratio).
"""
import argparse
import collections
import re
import statistics
import sys
import time

import numpy as np

try:
    import qatc
except ImportError:
    sys.exit("pair_bench.py needs the Python API: PYTHONPATH=build/python "
             "(built with the project), and Debian's /usr/bin/python3")

BLOCK = 50


def inputs_for(plan, path):
    if path:
        x = np.load(path)
        if len(plan.inputs) != 1:
            sys.exit("--input gives one array; %s has %d inputs"
                     % (plan.path, len(plan.inputs)))
        return {plan.inputs[0][0]: x}
    rng = np.random.default_rng(0)
    feed = {}
    for name, shape, dtype in plan.inputs:
        dt = np.dtype(dtype)
        if dt.kind == "f":
            feed[name] = rng.normal(0, 1, shape).astype(dt)
        else:
            feed[name] = rng.integers(0, 2, shape).astype(dt)
    return feed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("plans", nargs=2, metavar="PLAN")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--input", help="an .npy for a plan of one input")
    ap.add_argument("--profile", action="store_true",
                    help="also the per-layer profile, summed by kernel kind")
    args = ap.parse_args()
    if args.runs < 1 or args.threads < 1:
        sys.exit("--runs and --threads must be at least 1")
    try:
        plans = [qatc.Plan(p) for p in args.plans]
    except qatc.Error as e:
        sys.exit(str(e))
    if plans[0].inputs != plans[1].inputs:
        sys.exit("the plans' inputs differ: compare plans of one model")
    feed = inputs_for(plans[0], args.input)
    sessions = [p.session(args.threads, args.profile) for p in plans]
    for _ in range(10):  # warm both: code, weights, the arena
        for s in sessions:
            s.run(feed)
    if args.profile:
        for s in sessions:
            s.reset_profile()
    times = ([], [])
    for i in range(args.runs):
        for k in ((0, 1) if i % 2 == 0 else (1, 0)):
            t0 = time.perf_counter()
            sessions[k].run(feed)
            times[k].append(time.perf_counter() - t0)
    a, b = (statistics.median(t) * 1e3 for t in times)
    print("%d runs of each on %d thread(s), by turns" % (args.runs, args.threads))
    print("A %s: median %.4f ms" % (args.plans[0], a))
    print("B %s: median %.4f ms" % (args.plans[1], b))
    line = "B/A %.3f" % (b / a)
    blocks = [statistics.median(times[1][i:i + BLOCK]) /
              statistics.median(times[0][i:i + BLOCK])
              for i in range(0, args.runs - BLOCK + 1, BLOCK)]
    if blocks:
        line += "; blocks of %d pairs: median B/A %.3f, B faster in %d of %d" % (
            BLOCK, statistics.median(blocks), sum(r < 1 for r in blocks),
            len(blocks))
    print(line)
    if args.profile:
        kinds = (collections.Counter(), collections.Counter())
        for s, k in zip(sessions, kinds):
            for layer in s.profile():
                k[layer["kernel"]] += layer["ms"]
        print("\n%-52s %9s %9s %6s" % ("kernel kind (profile, mean ms)", "A", "B",
                                      "B/A"))
        for kind in sorted(set(kinds[0]) | set(kinds[1])):
            ka, kb = kinds[0][kind], kinds[1][kind]
            print("%-52s %9.4f %9.4f %6s" % (kind[:52], ka, kb,
                                             "%.2f" % (kb / ka) if ka else "-"))


if __name__ == "__main__":
    main()
