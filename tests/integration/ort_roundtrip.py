"""Runs tests/ort/roundtrip.js on a list of jobs and returns its results.

Each job: {"name", "a": original.onnx, "b": exported.onnx, "inputs": {name:
npy}, optional "inputs_b" (the inputs model b takes) and "levels"}. Each
result: {"name", "level", "status": exact | mismatch | a_failed | b_failed,
"detail"}.
"""
import json
import os
import subprocess


def run_roundtrip(ort_dir, work, jobs):
    jobs_file = os.path.join(work, "jobs.json")
    results_file = os.path.join(work, "results.json")
    with open(jobs_file, "w") as f:
        json.dump(jobs, f)
    subprocess.run(["node", os.path.join(ort_dir, "roundtrip.js"), jobs_file, results_file],
                   check=True)
    with open(results_file) as f:
        return json.load(f)
