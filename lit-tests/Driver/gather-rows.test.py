# Inputs and expected outputs of gather-rows.test.
import os
import sys

import numpy as np

d = sys.argv[2]
ids = np.array([[0, -1, 7], [2, -6, 3]], np.int64)   # 7 and -6: out of range
if sys.argv[1] == "inputs":
    np.save(os.path.join(d, "ids.npy"), ids)
    np.save(os.path.join(d, "ids32.npy"), ids.astype(np.int32))
    np.save(os.path.join(d, "x.npy"), np.arange(20, dtype=np.float32).reshape(5, 4))
    sys.exit(0)

table = np.arange(5)[:, None] * 10 + np.arange(4)[None, :]


def rows(t, i, axis, fill):
    n = t.shape[axis]
    safe = np.where((i >= -n) & (i < n), i % n, 0)
    out = np.take(t, safe, axis=axis).astype(np.float32)
    bad = np.broadcast_to(((i < -n) | (i >= n)).reshape(
        (1,) * axis + i.shape + (1,) * (t.ndim - axis - 1)), out.shape)
    out[bad] = fill
    return out


def check(name, got, want):
    if got.shape != want.shape or not np.array_equal(got, want):
        print(f"{name} FAILED:\n{got}\nwant\n{want}")
        sys.exit(1)
    print(f"{name} ok")


check("f32 rows", np.load(os.path.join(d, "f32.npy")), rows(table, ids, 0, 0.0))
t2 = np.stack([table[:, :3], table[:, :3] + 100])
check("axis 1", np.load(os.path.join(d, "axis1.npy")), rows(t2, ids, 1, 0.0))
# int8: q = clamp(round(x / 0.5) - 3); the zero point (-3) dequantizes to 0.
q = np.clip(np.round(table / 0.5) - 3, -128, 127)
check("int8 rows", np.load(os.path.join(d, "int8.npy")), rows((q + 3) * 0.5, ids, 0, 0.0))
x = np.arange(20, dtype=np.float32).reshape(5, 4)
check("constant 2-D indices", np.load(os.path.join(d, "const2d.npy")),
      x[np.array([[4, 0], [4, 2]])])
