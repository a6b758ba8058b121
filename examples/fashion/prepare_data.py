#!/usr/bin/env python3
"""Writes the Fashion-MNIST test and calibration data of the fashion example
as .npy files. Standard library only: runs on any python3 (>= 3.6).

    python3 examples/fashion/prepare_data.py --out build/fashion-data

Reads the IDX files of Debian's package dataset-fashion-mnist (or the four
files of the original distribution in --data-dir) and writes into --out:

  test_images.npy  float32 [10000,1,28,28]  normalized test images
  test_labels.npy  int64   [10000]          their labels (0..9)
  calib.npy        float32 [512,1,28,28]    calibration images (see below)
  input.npy        float32 [1,1,28,28]      the first test image

Normalization (the constants train_fashion.py trains with): a pixel p in
0..255 becomes float32((p / 255 - MEAN) / STD), computed in double precision
and rounded once to float32 (train_fashion.py uses the same 256-entry table,
so both produce bit-identical inputs).

Calibration images: the training images with index 117 * i, i = 0..511
(117 = 60000 // 512: every 117th image, starting with the first), in that
order. train_fashion.py max-calibrates the post-training quantization on
exactly these images.

The .npy files are version 1.0, little-endian, C order (they load with
numpy.load and with tests/ort/npy.js).
"""

import argparse
import gzip
import os
import struct
import sys

DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}
CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")

# Mean and standard deviation of the 60000 training images' pixels / 255
# (measured: 0.28604, 0.35302), rounded.
MEAN = 0.2860
STD = 0.3530

NUM_CALIB = 512
CALIB_STEP = 117          # 60000 // 512


def calib_indices(num_train=60000):
    """Indices of the calibration images in the training set: 0, 117, ..., 59787."""
    idx = [CALIB_STEP * i for i in range(NUM_CALIB)]
    if idx[-1] >= num_train:
        raise ValueError(f"need at least {idx[-1] + 1} training images, have {num_train}")
    return idx


def normalize_table():
    """float32 value of every pixel value 0..255 (as Python floats that are
    exactly representable in float32)."""
    return [struct.unpack("<f", struct.pack("<f", (p / 255.0 - MEAN) / STD))[0]
            for p in range(256)]


def data_path(data_dir, key):
    path = os.path.join(data_dir, FILES[key])
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{path}: not found; install the Debian package dataset-fashion-mnist "
            f"(apt-get install dataset-fashion-mnist) or pass --data-dir with the four "
            f"Fashion-MNIST files ({', '.join(FILES.values())})")
    return path


def read_idx(path):
    """(shape, bytes) of a gzipped IDX file of unsigned bytes."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path}: not an IDX file")
    if data[2] != 0x08:
        raise ValueError(f"{path}: element type 0x{data[2]:02x}, expected 0x08 (unsigned byte)")
    ndim = data[3]
    shape = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    body = data[4 + 4 * ndim:]
    n = 1
    for d in shape:
        n *= d
    if len(body) != n:
        raise ValueError(f"{path}: {len(body)} data bytes, shape {shape} needs {n}")
    return shape, body


def load(data_dir, key):
    return read_idx(data_path(data_dir, key))


def npy_bytes(descr, shape, payload):
    """A complete .npy (format 1.0) file: header + raw little-endian data."""
    shape_txt = "(%s)" % (", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else ""))
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_txt)
    # Pad with spaces so that magic(6) + version(2) + length(2) + header + '\n'
    # is a multiple of 64, as numpy does.
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + payload


def write_npy(path, descr, shape, payload):
    with open(path, "wb") as f:
        f.write(npy_bytes(descr, shape, payload))


def float_pixels(pixels, table_bytes):
    """Normalized little-endian float32 bytes of a byte string of pixels."""
    return b"".join(map(table_bytes.__getitem__, pixels))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                    help=f"directory with the Fashion-MNIST IDX .gz files (default {DEFAULT_DATA_DIR})")
    ap.add_argument("--out", required=True, help="output directory (created if missing)")
    args = ap.parse_args(argv)

    try:
        (ntest, h, w), test_px = load(args.data_dir, "test_images")
        (nlab,), test_lab = load(args.data_dir, "test_labels")
        (ntrain, th, tw), train_px = load(args.data_dir, "train_images")
    except (FileNotFoundError, ValueError) as e:
        sys.exit(f"prepare_data.py: {e}")
    if nlab != ntest or (th, tw) != (h, w):
        sys.exit("prepare_data.py: image and label files do not match")

    os.makedirs(args.out, exist_ok=True)
    table = [struct.pack("<f", v) for v in normalize_table()]
    size = h * w

    wrote = []

    def emit(name, descr, shape, payload, what):
        path = os.path.join(args.out, name)
        write_npy(path, descr, shape, payload)
        wrote.append(f"{path}: {descr} {list(shape)}  {what}")

    emit("test_images.npy", "<f4", (ntest, 1, h, w), float_pixels(test_px, table),
         f"test images, (p/255 - {MEAN}) / {STD}")
    emit("test_labels.npy", "<i8", (ntest,), struct.pack(f"<{ntest}q", *test_lab),
         "test labels")
    idx = calib_indices(ntrain)
    calib = b"".join(train_px[i * size:(i + 1) * size] for i in idx)
    emit("calib.npy", "<f4", (len(idx), 1, h, w), float_pixels(calib, table),
         f"training images {idx[0]}, {idx[1]}, ..., {idx[-1]} (every {CALIB_STEP}th)")
    emit("input.npy", "<f4", (1, 1, h, w), float_pixels(test_px[:size], table),
         f"test image 0 (label {test_lab[0]}, {CLASSES[test_lab[0]]})")
    for line in wrote:
        print(line)


if __name__ == "__main__":
    main()
