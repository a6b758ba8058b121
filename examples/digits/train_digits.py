#!/usr/bin/python3
"""Trains the bundled example: a small QAT CNN on scikit-learn's digits.

    /usr/bin/python3 examples/digits/train_digits.py

Needs Debian's python (torch 1.13, onnx 1.12, scikit-learn). Steps: train a
float CNN, fold BN and insert TensorRT-recipe fake quantization
(tests/models/trt_qdq.py), max-calibrate, fine-tune with quantization active
(QAT), then export next to this script:

  digits_float.onnx   float model (opset 13; the exporter folds BN into Conv)
  digits_qdq.onnx     Q/DQ model (opset 13, per-channel weights, axis 0)
  digits_test.npz     x float32 [N,1,8,8] (preprocessed), y int64 [N]: test split
  digits_input.npy    the first test image, float32 [1,1,8,8]
  README.md           accuracies, preprocessing, architecture

Deterministic (seeded, single thread): reruns write the same files.
"""

import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "models"))
import trt_qdq  # noqa: E402

SEED = 0
TEST_FRACTION = 0.2
FLOAT_EPOCHS, FLOAT_LR = 30, 3e-3
QAT_EPOCHS, QAT_LR = 5, 1e-4
BATCH = 32
CALIB_BATCHES, CALIB_BATCH = 4, 128


class DigitsNet(nn.Module):
    """[B,1,8,8] in [0,1] -> [B,10] logits."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.relu2 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)                          # 8x8 -> 4x4
        self.conv3 = nn.Conv2d(32, 32, 3, padding=1)
        self.bn3 = nn.BatchNorm2d(32)
        self.relu3 = nn.ReLU()
        self.add = trt_qdq.Add()                             # residual: pool + block
        self.gap = nn.AdaptiveAvgPool2d(1)                   # GlobalAveragePool
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(32, 10)                          # Gemm transB=1

    def forward(self, x):
        x = self.relu1(self.bn1(self.conv1(x)))
        x = self.pool(self.relu2(self.bn2(self.conv2(x))))
        x = self.add(x, self.relu3(self.bn3(self.conv3(x))))
        return self.fc(self.flatten(self.gap(x)))


def load_data():
    """Digits images /16 -> [0,1], stratified 80/20 split with a fixed seed."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = d.target.astype(np.int64)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=TEST_FRACTION, random_state=SEED,
                                          stratify=y)
    return (torch.from_numpy(xtr), torch.from_numpy(ytr),
            torch.from_numpy(xte), torch.from_numpy(yte))


@torch.no_grad()
def accuracy(model, x, y):
    model.eval()
    return (model(x).argmax(1) == y).float().mean().item()


def train(model, x, y, epochs, opt, sched=None, gen=None):
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(epochs):
        model.train()
        perm = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), BATCH):
            idx = perm[i:i + BATCH]
            opt.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
        if sched is not None:
            sched.step()
    return model


def main():
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    t0 = time.time()
    xtr, ytr, xte, yte = load_data()

    # 1. float training
    model = DigitsNet()
    opt = torch.optim.Adam(model.parameters(), lr=FLOAT_LR)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, FLOAT_EPOCHS)
    train(model, xtr, ytr, FLOAT_EPOCHS, opt, sched, gen)
    model.eval()
    acc_float = accuracy(model, xte, yte)
    print(f"float test accuracy: {acc_float:.4f}  ({time.time() - t0:.1f}s)")

    # 2. BN folding + Q/DQ insertion + max calibration on training images
    perm = torch.randperm(len(xtr), generator=gen)
    calib = [xtr[perm[i * CALIB_BATCH:(i + 1) * CALIB_BATCH]] for i in range(CALIB_BATCHES)]
    qmodel = trt_qdq.quantize_model(model, calib)
    acc_ptq = accuracy(qmodel, xte, yte)
    print(f"PTQ (calibrated) test accuracy: {acc_ptq:.4f}")

    # 3. QAT fine-tuning (straight-through estimator, scales fixed)
    opt = torch.optim.Adam(qmodel.parameters(), lr=QAT_LR)
    train(qmodel, xtr, ytr, QAT_EPOCHS, opt, None, gen)
    qmodel.eval()
    acc_qat = accuracy(qmodel, xte, yte)
    print(f"QAT test accuracy: {acc_qat:.4f}  ({time.time() - t0:.1f}s)")

    # 4. export + data
    example = xte[:1].clone()
    float_path = os.path.join(HERE, "digits_float.onnx")
    qdq_path = os.path.join(HERE, "digits_qdq.onnx")
    pf = trt_qdq.export_onnx(model, example, float_path)
    pq = trt_qdq.export_onnx(qmodel, example, qdq_path)
    np.savez_compressed(os.path.join(HERE, "digits_test.npz"), x=xte.numpy(), y=yte.numpy())
    np.save(os.path.join(HERE, "digits_input.npy"), example.numpy())

    # 5. checks on the exported Q/DQ model
    s = trt_qdq.qdq_summary(pq)
    assert pq.opset_import[0].version == 13 and pq.ir_version <= 8
    assert s["QuantizeLinear"] == s["DequantizeLinear"] > 0
    assert s["per_axis_dq"] == 4 and s["dq_axes"] == {0: 4}, s
    assert "BatchNormalization" not in trt_qdq.op_counts(pf)
    with torch.no_grad():
        logits_f = model(example)[0]
        logits_q = qmodel(example)[0]
    print("float ops:", trt_qdq.op_counts(pf))
    print("qdq ops:  ", trt_qdq.op_counts(pq))
    print(f"digits_input.npy: label {int(yte[0])}, float predicts {int(logits_f.argmax())}, "
          f"qdq predicts {int(logits_q.argmax())}")

    write_readme(acc_float, acc_ptq, acc_qat, len(xtr), len(xte), trt_qdq.op_counts(pf),
                 trt_qdq.op_counts(pq), int(yte[0]), logits_q)
    print(f"done in {time.time() - t0:.1f}s")


def write_readme(acc_float, acc_ptq, acc_qat, ntrain, ntest, ops_f, ops_q, label, logits_q):
    def ops(d):
        return ", ".join(f"{k} {v}" for k, v in d.items())
    logits = ", ".join(f"{v:.3f}" for v in logits_q.tolist())
    text = f"""# digits: the bundled example model

A small CNN trained on scikit-learn's digits (8x8 grayscale, 10 classes),
quantization-aware trained with the TensorRT explicit-quantization recipe and
exported to ONNX with QuantizeLinear/DequantizeLinear nodes. It is the model
`scripts/example.sh` feeds to `qatc import`.

| file | contents |
|---|---|
| `digits_qdq.onnx` | the Q/DQ (QAT) model, opset 13, input `input` float32 [1,1,8,8], output `output` float32 [1,10] (logits) |
| `digits_float.onnx` | the float model before quantization (same input/output) |
| `digits_test.npz` | `x` float32 [{ntest},1,8,8] (preprocessed test images), `y` int64 [{ntest}] labels |
| `digits_input.npy` | the first test image, float32 [1,1,8,8] (label {label}) |
| `train_digits.py` | regenerates everything above and this README |

## Accuracy on the {ntest} test images (evaluated in PyTorch)

| model | accuracy |
|---|---|
| float | {acc_float * 100:.2f}% |
| fake-quantized after max calibration (PTQ) | {acc_ptq * 100:.2f}% |
| after {QAT_EPOCHS} epochs of QAT (= `digits_qdq.onnx`) | {acc_qat * 100:.2f}% |

PyTorch logits of the QAT model for `digits_input.npy`:
[{logits}] (argmax {int(logits_q.argmax())}).

## Data

`sklearn.datasets.load_digits()` ({ntrain + ntest} images, shipped with
scikit-learn, no download). Pixels (0..16) are divided by 16, so inputs are in
[0, 1]; no mean/std normalization. Split: `train_test_split(test_size=0.2,
random_state=0, stratify=y)`, {ntrain} training / {ntest} test images.

## Architecture

```
input [1,1,8,8]
Conv 1->16 3x3 pad 1 + BN + ReLU
Conv 16->32 3x3 pad 1 + BN + ReLU
MaxPool 2x2                               -> [1,32,4,4]  (p)
Conv 32->32 3x3 pad 1 + BN + ReLU         (r)
Add(p, r)                                 residual add
GlobalAveragePool -> Flatten -> Linear 32->10 (Gemm transB=1)
output [1,10] logits
```

Training: Adam lr {FLOAT_LR}, cosine schedule, {FLOAT_EPOCHS} epochs, batch {BATCH},
seed {SEED}, one thread. Quantization (`tests/models/trt_qdq.py`): BN folded into
the convs, then per-tensor symmetric int8 Q/DQ (zero point 0, scale = amax/127)
on the inputs of every Conv and of the Gemm and on both inputs of the residual
Add, per-output-channel symmetric int8 Q/DQ (axis 0) on the weights, float
biases; max calibration on {CALIB_BATCHES}x{CALIB_BATCH} training images;
then QAT with Adam lr {QAT_LR} for {QAT_EPOCHS} epochs (scales fixed).

Weights are exported as float initializers feeding QuantizeLinear ->
DequantizeLinear (axis 0); scales are float32 initializers, zero points int8
initializers. Node names are the exporter's scoped names
(`/conv1/input_quantizer/QuantizeLinear`, `/conv1/Conv`, ...).
In `digits_float.onnx` torch's exporter has folded BN into the convs.

Op counts: float: {ops(ops_f)}.
Q/DQ: {ops(ops_q)}.

## Regenerate

```
/usr/bin/python3 examples/digits/train_digits.py
```

(Debian's python with torch 1.13, onnx 1.12 and scikit-learn; about 10 seconds on
one core; deterministic.)
"""
    with open(os.path.join(HERE, "README.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
