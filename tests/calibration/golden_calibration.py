#!/usr/bin/python3
"""Golden amax values for qatc's histogram calibration methods.

    /usr/bin/python3 tests/calibration/golden_calibration.py --out FILE
    /usr/bin/python3 tests/calibration/golden_calibration.py --check FILE

The first form builds a few fixed histograms of |x| (2048 bins over
[0, range]) and writes them with the amax every histogram method gives for
them; the second reads such a file, recomputes every amax from the counts it
holds and fails if one differs. tests/CalibrationTest.cpp asserts that the C++
implementation (passes/Quantization/Calibration.cpp) gives the same values.

This script is the independent side of that comparison: it is written from
the descriptions of NVIDIA pytorch-quantization's histogram calibrators
(pytorch_quantization/calib/histogram.py in NVIDIA/TensorRT,
tools/pytorch-quantization) in qdq-rules §7 and in the function comments
below, not from the C++.
It uses numpy the way those calibrators do, so that their rounding is
reproduced too: np.sum (pairwise summation) for the totals, np.cumsum
(sequential) for the CDF, and for the KL divergence the semantics of
scipy.stats.entropy, whose terms are evaluated with the C library's log.
That is why the terms use math.log and not np.log: numpy's vectorised log
(SVML on AVX-512 machines) differs from libm in the last bit for about a
fifth of all arguments, and a last-bit difference can flip a near tie.
(scipy itself is not needed.)

To keep the golden values robust against such last-bit effects, every
search (entropy, mse) is checked to have a clear winner: the best score must
beat every different score by a relative margin of more than 1e-9 (exact
ties are fine: they are resolved by a documented rule, not by rounding), and
the mse winner must be the same when the errors are evaluated in float32,
the precision pytorch-quantization uses.

File format (text, one record per histogram; '#' starts a comment line):

    histogram NAME
    range R                  R: the histogram covers [0, R], %.17g
    bins N                   number of bins
    counts C0 C1 ... C(N-1)  N non-negative integers on one line
    amax METHOD [P] A        A: expected amax, %.17g; one line per method
                             (P: shortest decimal that reads back exactly)
    end

METHOD is one of
    percentile P      pytorch-quantization's percentile rule with percentile P
    entropy           KL-divergence search, signed int8 (128 levels)
    entropy-unsigned  the same with 256 levels (unsigned 8-bit)
    mse               mean-squared-error search, signed int8 ([-127, 127])
    mse-unsigned      the same for unsigned 8-bit ([0, 255])
All searches use start bin 128 and stride 1.

Needs Debian's python3 with numpy.
"""

import argparse
import math
import sys

import numpy as np

NUM_BINS = 2048
START_BIN = 128
STRIDE = 1
PERCENTILES = (99.99, 99.9)
MIN_MARGIN = 1e-9


# --------------------------------------------------------------------------
# The methods
# --------------------------------------------------------------------------


def bin_edges(rng, num_bins):
    """Edges 0, w, 2w, ..., R of num_bins equal bins (numpy.linspace)."""
    return np.linspace(0.0, rng, num_bins + 1)


def percentile_amax(counts, rng, percentile):
    """Lower edge of the bin in which the normalised CDF reaches percentile.

    The CDF is the running sum of count/total; the bin is the first one whose
    CDF is >= percentile/100 (a left-sided binary search). If rounding keeps
    the CDF below the target to the end, the answer is the upper edge of the
    last bin.
    """
    total = counts.sum()
    cdf = np.cumsum(counts / total)
    target = percentile / 100
    idx = len(cdf)
    for k in range(len(cdf)):
        if cdf[k] >= target:
            idx = k
            break
    return float(bin_edges(rng, len(counts))[idx])


def kl_divergence(p, q):
    """KL(p || q) after normalising both, as scipy.stats.entropy(p, q).

    Term by term (scipy.special.rel_entr): x*log(x/y) if x > 0 and y > 0,
    0 if x == 0 and y >= 0, +inf if x > 0 and y == 0, NaN if either is NaN
    (an all-zero q normalises to 0/0). The terms are added with np.sum.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        pk = 1.0 * p / np.sum(p)
        qk = 1.0 * q / np.sum(q)
    terms = np.zeros(len(pk))
    both = (pk > 0) & (qk > 0)
    ratio = pk[both] / qk[both]
    terms[both] = pk[both] * np.array([math.log(r) for r in ratio])
    terms[(pk > 0) & (qk == 0)] = math.inf
    terms[np.isnan(pk) | np.isnan(qk)] = math.nan
    return float(np.sum(terms))


def level_of_bins(i, levels):
    """Which of `levels` equal merged levels each of the first i bins is in.

    The levels split [0, i) at the points k*i/levels; bin j belongs to the
    last level starting at or before j. With levels a power of two the
    split points are exact in floating point, so this is floor(j*levels/i).
    """
    return (np.arange(i) * levels) // i


def entropy_search(counts, levels):
    """KL divergence of every candidate i (bins kept) from START_BIN to N.

    The first bin's count is replaced by the second's (it holds the zeros
    of a ReLU output and would dominate). For candidate i the reference P
    is the first i bins with the mass of all later bins added to bin i-1;
    the candidate Q merges the first i bins (without that extra mass) into
    `levels` levels and spreads each level's count evenly over its non-empty
    bins, empty bins staying empty.
    """
    bins = counts.astype(np.int64).copy()
    bins[0] = bins[1]
    n = len(bins)
    candidates = []
    divergences = []
    for i in range(START_BIN, n + 1, STRIDE):
        kept = bins[:i]
        level = level_of_bins(i, levels)
        nonzero = kept != 0
        # Sums of integers: exact in float64, in any order.
        level_sum = np.bincount(level[nonzero], weights=kept[nonzero],
                                minlength=levels)
        level_nonzero = np.bincount(level[nonzero], minlength=levels)
        q = np.zeros(i)
        q[nonzero] = level_sum[level[nonzero]] / level_nonzero[level[nonzero]]
        p = kept.copy()
        p[-1] += bins[i:].sum()
        candidates.append(i)
        divergences.append(kl_divergence(p, q))
    return candidates, np.array(divergences)


def pick_last_minimum(scores):
    """Index of the last minimum, a NaN counting as smaller than anything.

    This is what numpy.argmin on the reversed array gives (argmin returns the
    first NaN if there is one), i.e. pytorch-quantization's tie rule for the
    entropy search.
    """
    nan = np.nonzero(np.isnan(scores))[0]
    if len(nan):
        return int(nan[-1])
    return int(np.nonzero(scores == scores.min())[0][-1])


def check_margin(name, scores, best):
    """Fails unless scores[best] beats every different score clearly;
    returns a description of the winner's lead."""
    winner = scores[best]
    if not math.isfinite(winner):
        return f"score {winner}, decided by the NaN/inf rule"
    others = scores[np.isfinite(scores) & (scores != winner)]
    if len(others) == 0:
        return f"score {winner:.6g}, no other finite score"
    runner_up = others.min()
    margin = (runner_up - winner) / abs(winner) if winner else runner_up
    if not margin > MIN_MARGIN:
        sys.exit(f"{name}: the winner's margin {margin:.3g} is too small "
                 f"to be a robust golden value")
    return f"score {winner:.6g}, next best {runner_up:.6g}"


def entropy_amax(counts, rng, levels, name="?"):
    """pytorch-quantization's entropy amax: the upper edge of the kept bins."""
    candidates, divergences = entropy_search(counts, levels)
    best = pick_last_minimum(divergences)
    margin = check_margin(name, divergences, best)
    amax = float(bin_edges(rng, len(counts))[candidates[best]])
    return amax, candidates[best], margin


def mse_errors(counts, rng, bound, lower, dtype):
    """Mean squared fake-quantization error of the bin centres, weighted by
    the counts, for each candidate amax = centre of bin i, i >= START_BIN."""
    edges = bin_edges(rng, len(counts)).astype(dtype)
    centers = (edges[1:] + edges[:-1]) / dtype(2)
    weights = counts.astype(dtype)
    candidates = []
    errors = []
    for i in range(START_BIN, len(centers), STRIDE):
        amax = centers[i]
        scale = dtype(bound) / amax
        q = np.clip(np.round(centers * scale), dtype(lower), dtype(bound))
        fq = q / scale
        candidates.append(i)
        errors.append(np.mean((fq - centers) ** 2 * weights))
    return candidates, np.array(errors, dtype=np.float64), centers


def mse_amax(counts, rng, unsigned, name="?"):
    """pytorch-quantization's mse amax: the first best bin centre."""
    bound = 255 if unsigned else 127
    lower = 0 if unsigned else -127
    candidates, errors, centers = mse_errors(counts, rng, bound, lower,
                                             np.float64)
    best = int(np.argmin(errors))  # first minimum
    margin = check_margin(name, errors, best)
    cand32, errors32, _ = mse_errors(counts, rng, bound, lower, np.float32)
    if int(np.argmin(errors32)) != best:
        sys.exit(f"{name}: float32 and float64 errors pick different bins")
    return float(centers[candidates[best]]), candidates[best], margin


def compute_all(counts, rng):
    """[(method, param, amax, note)] for one histogram."""
    out = []
    for p in PERCENTILES:
        out.append(("percentile", p, percentile_amax(counts, rng, p), ""))
    for method, levels in (("entropy", 128), ("entropy-unsigned", 256)):
        amax, i, margin = entropy_amax(counts, rng, levels, method)
        out.append((method, None, amax, f"{i} bins kept; {margin}"))
    for method, unsigned in (("mse", False), ("mse-unsigned", True)):
        amax, i, margin = mse_amax(counts, rng, unsigned, method)
        out.append((method, None, amax, f"centre of bin {i}; {margin}"))
    return out


# --------------------------------------------------------------------------
# The histograms
# --------------------------------------------------------------------------


def relu_histogram():
    """A ReLU output: a spike of exact zeros in bin 0, an exponentially
    decaying bulk, a thin tail and the maximum alone in the last bin."""
    counts = np.zeros(NUM_BINS, dtype=np.int64)
    counts[0] = 2_000_000
    for k in range(1, NUM_BINS):
        counts[k] = math.floor(30000.0 * math.exp(-k / 60.0) +
                               40.0 * math.exp(-k / 250.0))
    for k, c in ((1500, 2), (1720, 1), (1900, 1), (2047, 1)):
        counts[k] += c
    return "relu", 6.0, counts


def gaussian_histogram():
    """|x| of a normal distribution (sigma = 1, 10^6 samples), range = 5.3."""
    rng = 5.3
    width = rng / NUM_BINS
    counts = np.zeros(NUM_BINS, dtype=np.int64)
    for k in range(NUM_BINS):
        lo, hi = k * width / math.sqrt(2), (k + 1) * width / math.sqrt(2)
        counts[k] = round(1e6 * (math.erf(hi) - math.erf(lo)))
    counts[-1] += 1
    return "gaussian", rng, counts


def longtail_histogram():
    """A Laplace-like bulk in the first ~150 bins and isolated outliers up to
    the maximum, 40 (e.g. an attention score or a residual sum)."""
    counts = np.zeros(NUM_BINS, dtype=np.int64)
    for k in range(NUM_BINS):
        counts[k] = math.floor(50000.0 * math.exp(-k / 12.0))
    for k, c in ((160, 4), (220, 2), (400, 3), (777, 1), (1300, 2),
                 (2047, 1)):
        counts[k] += c
    return "longtail", 40.0, counts


def sparse_high_histogram():
    """Nearly empty, all mass at or above bin 128: for every candidate that
    keeps no data the candidate distribution is 0/0 (NaN), and the NaN rule
    of the last-minimum search decides."""
    counts = np.zeros(NUM_BINS, dtype=np.int64)
    counts[1000] = 1
    counts[2047] = 1
    return "sparse-high", 3.0, counts


def sparse_low_histogram():
    """Nearly empty with one value below bin 128: candidates whose last kept
    bin is empty while mass lies beyond it have infinite divergence."""
    counts = np.zeros(NUM_BINS, dtype=np.int64)
    counts[3] = 5
    counts[700] = 2
    counts[2047] = 1
    return "sparse-low", 1.5, counts


HISTOGRAMS = (relu_histogram, gaussian_histogram, longtail_histogram,
              sparse_high_histogram, sparse_low_histogram)


# --------------------------------------------------------------------------
# File I/O
# --------------------------------------------------------------------------


def self_check():
    """The level rule equals a digitize over linspace split points (the
    formulation in the algorithm's description) for the sizes used here."""
    for levels in (128, 256):
        for i in (128, 129, 1000, 1921, 2047, 2048):
            split = np.linspace(0, i, num=levels + 1)
            by_digitize = np.digitize(np.arange(i), split) - 1
            if not np.array_equal(by_digitize, level_of_bins(i, levels)):
                sys.exit(f"level rule differs from digitize for i={i}")


def write_file(path):
    self_check()
    lines = [line.rstrip() for line in __doc__.split("File format")[1]
             .split("Needs Debian")[0].splitlines()]
    out = ["# Golden amax values for qatc's histogram calibration methods.",
           "# Generated by tests/calibration/golden_calibration.py; do not "
           "edit.",
           "# Regenerate with --out, verify with --check.", "#",
           "# File format" + lines[0]]
    out += ["#" + (" " + l if l else "") for l in lines[1:]]
    while out[-1] == "#":
        out.pop()
    for make in HISTOGRAMS:
        name, rng, counts = make()
        out.append("")
        out.append(f"histogram {name}")
        out.append(f"range {rng:.17g}")
        out.append(f"bins {len(counts)}")
        out.append("counts " + " ".join(str(int(c)) for c in counts))
        for method, param, amax, note in compute_all(counts, rng):
            if note:
                out.append(f"# {method}: {note}")
            p = f" {param!r}" if param is not None else ""
            out.append(f"amax {method}{p} {amax:.17g}")
        out.append("end")
        print(f"{name}: done", file=sys.stderr)
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def read_file(path):
    """[(name, range, counts, [(method, param, amax)])]."""
    records = []
    current = None
    with open(path) as f:
        for number, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            key, _, rest = line.partition(" ")
            if key == "histogram":
                current = {"name": rest, "amax": []}
            elif current is None:
                sys.exit(f"{path}:{number}: '{key}' outside a histogram")
            elif key == "range":
                current["range"] = float(rest)
            elif key == "bins":
                current["bins"] = int(rest)
            elif key == "counts":
                current["counts"] = np.array([int(t) for t in rest.split()],
                                             dtype=np.int64)
            elif key == "amax":
                fields = rest.split()
                param = float(fields[1]) if len(fields) == 3 else None
                current["amax"].append((fields[0], param, float(fields[-1])))
            elif key == "end":
                if len(current["counts"]) != current["bins"]:
                    sys.exit(f"{path}:{number}: wrong number of counts")
                records.append(current)
                current = None
            else:
                sys.exit(f"{path}:{number}: unknown line '{key}'")
    return records


def check_file(path):
    self_check()
    failures = 0
    checked = 0
    for rec in read_file(path):
        got = {(m, p): a for m, p, a, _ in compute_all(rec["counts"],
                                                       rec["range"])}
        for method, param, expected in rec["amax"]:
            actual = got.get((method, param))
            checked += 1
            if actual != expected:
                failures += 1
                print(f"{rec['name']} {method}: file has {expected:.17g}, "
                      f"recomputed {actual!r}", file=sys.stderr)
    print(f"{checked - failures} passed, {failures} failed")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", help="write the golden file")
    group.add_argument("--check", help="recompute and verify a golden file")
    args = parser.parse_args()
    if args.out:
        write_file(args.out)
        return 0
    return check_file(args.check)


if __name__ == "__main__":
    sys.exit(main())
