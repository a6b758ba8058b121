#!/usr/bin/env python3
"""Runs the ONNX backend node tests through qatc's reference evaluator.

Every node test whose operators qatc supports (the candidates of
onnx_node_tests.py, minus the tests in node_tests_refused.txt that qatc
refuses to import on purpose) is evaluated with `qatc eval` on the inputs of
test_data_set_0, parameter inputs frozen exactly as onnx_node_tests.py does,
and each output is compared with the expected output_N.pb the way the ONNX
backend test runner does: same dtype and shape, floats with
numpy.testing.assert_allclose(rtol=1e-3, atol=1e-7) (NaNs compare equal),
integers and bools exactly.

Tests expected not to pass through the evaluator are listed, each with a
reason, in node_conformance_skipped.txt. The run fails if a listed test
passes (stale entry), if a test not listed fails, or if fewer than 95% of the
candidates pass.

With --plans, each candidate is compiled to a plan (`qatc compile`, for
--target-cpu) and run (`qatc run`) instead: a test qatc refuses to compile
with a clean error naming the node is counted as not compiled, every plan
that compiles must match the expected outputs like the evaluator (tests
expected not to are listed in plan_conformance_skipped.txt), and at least
--min-compiled tests must compile.

Run with Debian's /usr/bin/python3 (it needs numpy and onnx).
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_node_tests import PARAM_INPUTS, load_refusals  # noqa: E402

RTOL, ATOL = 1e-3, 1e-7  # onnx.backend.test defaults
MIN_PASS_RATE = 95.0
TIMEOUT = 600


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def elem_type_name(value_info):
    t = value_info.type
    if t.HasField("tensor_type"):
        return onnx.TensorProto.DataType.Name(t.tensor_type.elem_type).lower()
    return t.WhichOneof("value")


def plan(args, supported, refused):
    """Candidate selection (as in onnx_node_tests.py) and per-test jobs."""
    tests = sorted(d for d in os.listdir(args.data)
                   if os.path.isfile(os.path.join(args.data, d, "model.onnx")))
    jobs = []
    for name in tests:
        model_path = os.path.join(args.data, name, "model.onnx")
        model = onnx.load(model_path, load_external_data=False)
        ops = {(n.domain or "", n.op_type) for n in model.graph.node}
        if not all(d in ("", "ai.onnx") and op in supported for d, op in ops):
            continue
        if name in refused:
            continue
        inits = {i.name for i in model.graph.initializer}
        graph_inputs = [i.name for i in model.graph.input if i.name not in inits]
        params = {n.input[k] for n in model.graph.node
                  for k in PARAM_INPUTS.get(n.op_type, []) if k < len(n.input)}
        if args.freeze == "all-but-first":
            params = set(graph_inputs[1:])
        ds = os.path.join(args.data, name, "test_data_set_0")
        job = {"name": name, "model": model_path, "frozen": {}, "inputs": {},
               "outputs": [(o.name, elem_type_name(o)) for o in model.graph.output],
               "expected": [os.path.join(ds, f"output_{i}.pb")
                            for i in range(len(model.graph.output))],
               "missing": []}
        for idx, input_name in enumerate(graph_inputs):
            pb = os.path.join(ds, f"input_{idx}.pb")
            if not os.path.exists(pb):
                job["missing"].append(input_name)
                continue
            npy = os.path.join(args.work, f"{name}.in{idx}.npy")
            np.save(npy, read_pb(pb))
            (job["frozen"] if input_name in params else job["inputs"])[input_name] = npy
        jobs.append(job)
    return tests, jobs


def compare(name, expected, got, declared, notes):
    """Returns None if `got` matches `expected` like the ONNX backend test, else why not.

    Element types must match exactly (float64 outputs are computed in float64).
    """
    if expected.dtype != got.dtype:
        return (f"output '{name}': dtype {got.dtype}, expected {expected.dtype} "
                f"(declared {declared})")
    if expected.shape != got.shape:
        return f"output '{name}': shape {list(got.shape)}, expected {list(expected.shape)}"
    try:
        if np.issubdtype(expected.dtype, np.floating) or np.issubdtype(expected.dtype,
                                                                      np.complexfloating):
            np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL, equal_nan=True)
        else:
            np.testing.assert_array_equal(got, expected)
    except AssertionError as e:
        msg = "\n    ".join(line.replace(" x: ", " got: ").replace(" y: ", " expected: ")
                           for line in str(e).strip().splitlines() if line.strip())
        return f"output '{name}' ({expected.dtype}{list(expected.shape)}): {msg}"
    return None


NOT_COMPILED = "not compiled"


def run_test(qatc, work, job, target=None):
    """Evaluates one test (or compiles and runs its plan for `target`);
    returns (name, None if it passed else the reason, notes)."""
    name = job["name"]
    notes = []
    if job["missing"]:
        return name, f"no test data for input(s) {', '.join(job['missing'])}", notes
    out = os.path.join(work, name + ".out.npz")
    if os.path.exists(out):
        os.remove(out)
    frozen = [f"--freeze-input={k}={v}" for k, v in job["frozen"].items()]
    inputs = [f"--input={k}={v}" for k, v in job["inputs"].items()]
    steps = [("qatc eval", [qatc, "eval", job["model"], "-o", out] + frozen + inputs)]
    if target:
        plan_path = os.path.join(work, name + ".plan")
        steps = [("qatc compile", [qatc, "compile", job["model"], "--target-cpu", target,
                                   "-o", plan_path] + frozen),
                 ("qatc run", [qatc, "run", plan_path, "-o", out] + inputs)]
    for i, (what, cmd) in enumerate(steps):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            return name, f"{what} timed out after {TIMEOUT} s", notes
        if p.returncode == 1 and target and i == 0 and "error:" in p.stderr:
            return name, NOT_COMPILED, [p.stderr.strip().splitlines()[-1]]
        if p.returncode != 0:
            kind = "crashed" if p.returncode < 0 or p.returncode > 1 else "failed"
            err = (p.stderr.strip() or p.stdout.strip()).splitlines()
            return name, f"{what} {kind} (exit {p.returncode}): " + "\n    ".join(err[:8]), notes
    try:
        got = dict(np.load(out, allow_pickle=False))
    except Exception as e:  # noqa: BLE001 - any unreadable output is a failure
        return name, f"cannot read {out}: {e}", notes
    problems = []
    for (out_name, declared), pb in zip(job["outputs"], job["expected"]):
        if not os.path.exists(pb):
            problems.append(f"output '{out_name}': no expected data {pb}")
            continue
        if out_name not in got:
            problems.append(f"output '{out_name}' missing from qatc's outputs "
                            f"({', '.join(sorted(got)) or 'none'})")
            continue
        why = compare(out_name, read_pb(pb), got[out_name], declared, notes)
        if why:
            problems.append(why)
    return name, "; ".join(problems) if problems else None, notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qatc", required=True)
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data/node")
    ap.add_argument("--skipped", required=True,
                    help="node_conformance_skipped.txt: tests expected not to pass, with reasons")
    ap.add_argument("--refused", help="node_tests_refused.txt (default: next to this script)")
    ap.add_argument("--work", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", action="append", default=[], help="run only these tests")
    ap.add_argument("--plans", metavar="TARGET",
                    help="compile and run plans for this --target-cpu instead of evaluating")
    ap.add_argument("--freeze", choices=["params", "all-but-first"], default="params",
                    help="which graph inputs become constants: the inputs qatc needs at "
                         "compile time (default), or every input but the first (as an "
                         "outside runner that counts all node tests does)")
    ap.add_argument("--min-compiled", type=int, default=0,
                    help="with --plans: fail if fewer tests compile")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="also print why each skipped test fails")
    args = ap.parse_args()

    start = time.time()
    if not os.path.isdir(args.data):
        print(f"node-conformance: {args.data} is missing; install libonnx-testdata")
        return 1
    refused_path = args.refused or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                "node_tests_refused.txt")
    refused = load_refusals(refused_path)
    skipped = load_refusals(args.skipped)  # same "name  reason" format
    supported = set(subprocess.run([args.qatc, "ops"], check=True, capture_output=True,
                                   text=True).stdout.split())
    os.makedirs(args.work, exist_ok=True)

    failures = []
    for name, reason in skipped.items():
        if not reason:
            failures.append(f"{name}: listed in {args.skipped} without a reason")
    tests, jobs = plan(args, supported, refused)
    candidates = {j["name"] for j in jobs}
    for name in sorted(set(skipped) - candidates):
        failures.append(f"{name}: listed in {args.skipped} but not a candidate (no such test, "
                        "unsupported operators, or refused at import)")
    if args.only:
        jobs = [j for j in jobs if j["name"] in args.only]

    passed, failed, skipped_ok, skip_notes, dtype_notes = [], [], [], [], []
    not_compiled = []
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for name, why, notes in pool.map(
                lambda j: run_test(args.qatc, args.work, j, args.plans), jobs):
            if why == NOT_COMPILED:
                not_compiled.append(f"{name}: {notes[0] if notes else ''}")
                continue
            if why is None and notes:
                dtype_notes += [f"{name}: {n}" for n in notes]
            if why is None and name in skipped:
                failures.append(f"{name}: passes now; remove it from {args.skipped} "
                                f"(listed as: {skipped[name]})")
                passed.append(name)
            elif why is None:
                passed.append(name)
            elif name in skipped:
                skipped_ok.append(name)
                skip_notes.append(f"{name} [{skipped[name]}]: {why}")
            else:
                failed.append(name)
                failures.append(f"{name}: {why}")

    if args.verbose:
        for note in skip_notes:
            print("SKIPPED:", note)
    for note in dtype_notes:
        print("NOTE: passed comparing values only:", note)
    for f in failures:
        print("FAIL:", f)
    if args.plans:
        if args.verbose:
            for note in not_compiled:
                print("NOT COMPILED:", note)
        compiled = len(jobs) - len(not_compiled)
        print(f"ONNX node tests as plans ({args.plans}): {len(jobs)} candidates, {compiled} "
              f"compiled, {len(passed)} passed, {len(failed)} failed, {len(skipped_ok)} "
              f"skipped (each with a reason), {len(not_compiled)} refused by the compiler "
              f"({time.time() - start:.0f} s)")
        if compiled < args.min_compiled:
            print(f"FAIL: {compiled} tests compile, fewer than --min-compiled {args.min_compiled}")
            return 1
        return 1 if failures else 0
    n = len(jobs)
    rate = 100.0 * len(passed) / n if n else 0.0
    print(f"ONNX node conformance: {n} candidates, {len(passed)} passed, {len(failed)} failed, "
          f"{len(skipped_ok)} skipped (each with a reason); pass rate {rate:.1f}% of candidates "
          f"({len(tests)} node tests in total; {time.time() - start:.0f} s)")
    if n and rate < MIN_PASS_RATE and not args.only:
        print(f"FAIL: pass rate {rate:.1f}% is below {MIN_PASS_RATE:.0f}%")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
