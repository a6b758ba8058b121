# Calibration images for calib-report.test (see there); with --cache also
# a TensorRT calibration cache naming the input.
import sys

import numpy as np

rng = np.random.RandomState(0)
x = np.full((32, 1, 28, 28), -0.8, np.float32)
bright = rng.rand(*x.shape) < 0.3
x[bright] = rng.uniform(0.2, 2.0, bright.sum()).astype(np.float32)
x[0, 0, 0, 0] = 2.0
np.save(sys.argv[1], x)
if "--cache" in sys.argv:
    with open(sys.argv[sys.argv.index("--cache") + 1], "w") as f:
        f.write("TRT-8601-EntropyCalibration2\ninput: 3c000000\n")
