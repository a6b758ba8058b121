#!/usr/bin/env python3
"""Coefficients of KB::erf (compiler/Codegen/KernelBuilder.cpp) and their
error.

AVX-512 (the default): erf on [0, 4) in 16 intervals of 1/4, interval i a
polynomial of degree 7 in t = |x| - i/4 (fitted by least squares on 400
Chebyshev nodes against mpmath's erf), except interval 0, x * q(x^2) with q
of degree 3, so that small x keep their relative precision. `--avx2`: 8
intervals of 1/2 (one ymm vpermps picks among 8), degree 9, q of degree 4.
The kernel picks each coefficient with vpermps by the interval; |x| at or
above 4 evaluates at the largest float below 4, where erf rounds to 1.

Prints the table as C++ rows (coefficient of t^k for each interval) and the
worst error, in ulps of the f32 result, of the f32 evaluation (each step
rounded as the kernel's FMAs) over 3 million inputs.

    /usr/bin/python3 scripts/erf_coefficients.py [--avx2]
"""
import math
import sys

import mpmath
import numpy as np

mpmath.mp.dps = 40
INTERVALS, DEGREE, WIDTH = (8, 9, 0.5) if "--avx2" in sys.argv else (16, 7,
                                                                       0.25)


def fit():
    coef = np.zeros((DEGREE + 1, INTERVALS))
    n = 400
    nodes = (np.cos(np.pi * (np.arange(n) + 0.5) / n)[::-1] + 1) * WIDTH / 2
    for i in range(INTERVALS):
        x = i * WIDTH + nodes
        y = np.array([float(mpmath.erf(float(v))) for v in x])
        if i == 0:
            terms = (DEGREE + 1) // 2
            a = np.stack([x ** (2 * j) for j in range(terms)], axis=1)
            q = np.linalg.lstsq(a, y / x, rcond=None)[0]
            coef[1::2, 0] = q
        else:
            a = np.stack([nodes ** k for k in range(DEGREE + 1)], axis=1)
            coef[:, i] = np.linalg.lstsq(a, y, rcond=None)[0]
    return coef.astype(np.float32)


def fma32(a, b, c):
    # a * b is exact in f64; the sum's double rounding to f32 is the rare
    # exception, which this estimate ignores.
    return (a.astype(np.float64) * b + c).astype(np.float32)


def evaluate(c, x):
    x = np.asarray(x, dtype=np.float32)
    a = np.minimum(np.abs(x), np.float32(3.9999998))
    idx = (a * np.float32(1 / WIDTH)).astype(np.int32)
    t = fma32(idx.astype(np.float32), np.float32(-WIDTH), a)
    acc = c[DEGREE][idx]
    for k in range(DEGREE - 1, -1, -1):
        acc = fma32(acc, t, c[k][idx])
    return np.copysign(acc, x)


def main():
    c = fit()
    for k in range(DEGREE + 1):
        print("    {" + ", ".join("%.9ef" % float(v) for v in c[k]) + "},")
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(0, 4.5, 2_000_000),
                        10 ** rng.uniform(-30, 0.7, 1_000_000),
                        np.arange(0, 4, 1 / 64)]).astype(np.float32)
    got = evaluate(c, x).astype(np.float64)
    ref = np.array([math.erf(float(v)) for v in x])
    err = np.abs(got - ref) / np.spacing(np.abs(ref.astype(np.float32)))
    print(f"worst {err.max():.2f} ulp at x = {x[err.argmax()]:.9g}")


if __name__ == "__main__":
    main()
