"""What the integration scripts that drive `qatc` share: running commands,
collecting failures, and the exit status."""
import json
import os
import subprocess

TIMEOUT = 1800


def nan_aware_diff(got, ref):
    """Compares two float arrays of one shape: (how many elements are NaN
    in one only, max |got - ref| over the elements that are numbers in both,
    with equal values (infinities too) differing by 0, and the mask of those
    elements). A NaN left in the difference would compare false against any
    limit, so a plan writing NaN where the reference has a number passed."""
    import numpy as np  # only the numerical checks need it
    g, r = got.astype(np.float64), ref.astype(np.float64)
    one_side = int((np.isnan(g) != np.isnan(r)).sum())
    both = ~np.isnan(g) & ~np.isnan(r)
    with np.errstate(invalid="ignore"):  # inf - inf, replaced by 0
        diff = np.where(g == r, 0.0, np.abs(g - r))[both]
    return one_side, float(diff.max()) if diff.size else 0.0, both


def run(cmd, timeout=TIMEOUT):
    """Runs `cmd`; returns (exit code, stdout, stderr)."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


class Checker:
    """Runs qatc (`args.qatc`) and collects failures per model."""

    def __init__(self, args):
        self.args = args
        self.failures = []

    def fail(self, label, msg):
        self.failures.append(f"{label}: {msg}")
        print(f"   FAIL {msg}", flush=True)

    def qatc(self, *cmd):
        """Runs `qatc CMD...`; raises RuntimeError with its stderr on failure,
        returns (stdout, stderr) otherwise."""
        rc, out, err = run([self.args.qatc, *cmd])
        if rc:
            raise RuntimeError(f"qatc {' '.join(cmd)} failed:\n{err[-3000:]}")
        return out, err

    def finish(self, success_message):
        """Prints the failures (or `success_message`); returns the exit code."""
        if self.failures:
            print(f"\n{len(self.failures)} failure(s):")
            for f in self.failures:
                print("  " + f)
            return 1
        print("\n" + success_message)
        return 0


def manifest_models(models_dir, variant):
    """(label, path) of every model's `variant` ("float" or "qdq") in the
    generator's manifest.json, sorted by name."""
    with open(os.path.join(models_dir, "manifest.json")) as f:
        manifest = json.load(f)
    return [(f"{name}_{variant}", os.path.join(models_dir, entry[variant]["file"]))
            for name, entry in sorted(manifest["models"].items())]
