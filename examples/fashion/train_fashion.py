#!/usr/bin/python3
"""Trains the Fashion-MNIST example: a small MobileNet-style CNN, float and
QAT with TensorRT-recipe Q/DQ.

    /usr/bin/python3 examples/fashion/train_fashion.py

Needs Debian's python (torch 1.13, onnx 1.12, numpy) and the Debian package
dataset-fashion-mnist (the IDX files; --data-dir points elsewhere). Steps:
train the float network, export it; fold BN and insert TensorRT-recipe fake
quantization (tests/models/trt_qdq.py), max-calibrate on the 512 calibration
images prepare_data.py picks (PTQ), fine-tune with quantization active (QAT),
export; then check both files with ONNX Runtime for Node.js (tests/ort, if
installed) on the 10000 test images. Writes next to this script:

  fashion_float.onnx  float model (opset 13; the exporter folds BN into Conv)
  fashion_qat.onnx    Q/DQ model after QAT (opset 13, per-channel weights, axis 0)
  README.md           architecture, preprocessing, timings, accuracies

Both models: input "input" float32 [batch,1,28,28], output "logits" float32
[batch,10], the batch dimension dynamic. Inputs are normalized as in
prepare_data.py ((p/255 - MEAN)/STD), which writes the test data as .npy.

Deterministic with one thread (the default; seeded): reruns write the same
.onnx files (README.md differs only in the measured times).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, OrderedDict

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
sys.path.insert(0, HERE)
import prepare_data  # noqa: E402  (standard library only: IDX reading, constants)
import trt_qdq  # noqa: E402

SEED = 0
FLOAT_EPOCHS, FLOAT_LR = 6, 3e-3         # Adam, one-cycle schedule
PCT_START = 0.15                         # one-cycle warm-up fraction
QAT_EPOCHS, QAT_LR = 1, 1e-4             # Adam, cosine decay to 0
BATCH = 128
CALIB_BATCH = 128                        # 512 calibration images = 4 batches
EVAL_BATCH = 250
ORT_BATCH = 2500                         # test images per ONNX Runtime run
CHECK_BATCH = 7                          # extra ORT-vs-PyTorch check on 7 images

STEM = 16
# Inverted-residual blocks: (expansion t, output channels, stride).
BLOCKS = [(2, 24, 2), (4, 24, 1), (4, 32, 2), (4, 32, 1), (4, 32, 1)]
HEAD = 128
NUM_CLASSES = 10

DYNAMIC_AXES = {"input": {0: "batch"}, "logits": {0: "batch"}}
RUN_JS = os.path.join(ROOT, "tests", "ort", "run.js")


# --------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------

class ConvBN(nn.Sequential):
    """Conv (no bias) + BatchNorm (+ ReLU6). trt_qdq folds the BN into the conv."""

    def __init__(self, cin, cout, k, stride=1, groups=1, act=True):
        layers = [("conv", nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False)),
                  ("bn", nn.BatchNorm2d(cout))]
        if act:
            layers.append(("act", nn.ReLU6()))
        super().__init__(OrderedDict(layers))


class InvertedResidual(nn.Module):
    """MobileNetV2 block: 1x1 expand + BN + ReLU6, 3x3 depthwise + BN + ReLU6,
    1x1 linear projection + BN, and a residual add (trt_qdq.Add, quantized on
    both inputs) when stride is 1 and the channel count is unchanged."""

    def __init__(self, cin, cout, stride, t):
        super().__init__()
        hidden = cin * t
        self.expand = ConvBN(cin, hidden, 1)
        self.dw = ConvBN(hidden, hidden, 3, stride, groups=hidden)
        self.project = ConvBN(hidden, cout, 1, act=False)
        self.use_res = stride == 1 and cin == cout
        if self.use_res:
            self.add = trt_qdq.Add()

    def forward(self, x):
        y = self.project(self.dw(self.expand(x)))
        return self.add(x, y) if self.use_res else y


class FashionNet(nn.Module):
    """[B,1,28,28] normalized images -> [B,10] logits."""

    def __init__(self):
        super().__init__()
        self.stem = ConvBN(1, STEM, 3)
        blocks, c = [], STEM
        for t, cout, stride in BLOCKS:
            blocks.append(InvertedResidual(c, cout, stride, t))
            c = cout
        self.blocks = nn.Sequential(*blocks)
        self.head = ConvBN(c, HEAD, 1)
        self.pool = nn.AdaptiveAvgPool2d(1)              # GlobalAveragePool
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(HEAD, NUM_CLASSES)           # Gemm transB=1

    def forward(self, x):
        x = self.head(self.blocks(self.stem(x)))
        return self.fc(self.flatten(self.pool(x)))


def layer_table(model):
    """Markdown rows (layer, output shape, parameters, MACs per image) of the
    float model, measured with forward hooks on one image."""
    shapes = {}
    hooks = [m.register_forward_hook(lambda m, i, o, n=n: shapes.__setitem__(n, tuple(o.shape[1:])))
             for n, m in model.named_modules() if n]
    with torch.no_grad():
        model.eval()(torch.zeros(1, 1, 28, 28))
    for h in hooks:
        h.remove()

    def params(m):
        return sum(p.numel() for p in m.parameters())

    def macs(m):
        total = 0
        for n, sub in m.named_modules():
            if isinstance(sub, nn.Conv2d):
                out = shapes[sub_names[id(sub)]]
                total += out[0] * out[1] * out[2] * sub.in_channels // sub.groups \
                    * sub.kernel_size[0] * sub.kernel_size[1]
            elif isinstance(sub, nn.Linear):
                total += sub.in_features * sub.out_features
        return total

    sub_names = {id(m): n for n, m in model.named_modules()}

    def shp(name):
        return "x".join(str(d) for d in shapes[name])

    rows = [("input", "", "1x28x28", 0, 0)]
    rows.append(("stem", f"Conv 1->{STEM} 3x3 s1 + BN + ReLU6", shp("stem"),
                 params(model.stem), macs(model.stem)))
    c = STEM
    for i, (blk, (t, cout, stride)) in enumerate(zip(model.blocks, BLOCKS)):
        h = c * t
        desc = (f"inverted residual t={t}: 1x1 {c}->{h} + BN + ReLU6, "
                f"dw 3x3 s{stride} ({h} groups) + BN + ReLU6, 1x1 {h}->{cout} + BN"
                + (", Add(x, .)" if blk.use_res else ""))
        rows.append((f"blocks.{i}", desc, shp(f"blocks.{i}"), params(blk), macs(blk)))
        c = cout
    rows.append(("head", f"Conv 1x1 {c}->{HEAD} + BN + ReLU6", shp("head"),
                 params(model.head), macs(model.head)))
    rows.append(("pool", "GlobalAveragePool", shp("pool"), 0, 0))
    rows.append(("flatten, fc", f"Flatten, Linear {HEAD}->{NUM_CLASSES} (Gemm)", shp("fc"),
                 params(model.fc), macs(model.fc)))
    total = ("total", "", "", params(model), sum(r[4] for r in rows))
    lines = ["| layer | operation | output (CxHxW) | parameters | MACs/image |",
             "|---|---|---|---:|---:|"]
    for name, desc, out, p, m in rows + [total]:
        lines.append(f"| `{name}` | {desc} | {out} | {p:,} | {m:,} |" if name != "total"
                     else f"| **total** | | | **{p:,}** | **{m:,}** |")
    return "\n".join(lines), params(model), total[4]


# --------------------------------------------------------------------------
# Data, training, evaluation
# --------------------------------------------------------------------------

def load_split(data_dir, split):
    """(x float32 [N,1,28,28] normalized, y int64 [N]) via prepare_data's IDX
    reader and its 256-entry normalization table (bit-identical to the .npy files)."""
    (n, h, w), px = prepare_data.load(data_dir, f"{split}_images")
    (nl,), lab = prepare_data.load(data_dir, f"{split}_labels")
    assert nl == n and (h, w) == (28, 28)
    table = torch.tensor(prepare_data.normalize_table(), dtype=torch.float32)
    u8 = torch.frombuffer(bytearray(px), dtype=torch.uint8).view(n, 1, h, w)
    x = table[u8.long()]
    y = torch.frombuffer(bytearray(lab), dtype=torch.uint8).long()
    return x, y


@torch.no_grad()
def predict(model, x):
    model.eval()
    return torch.cat([model(x[i:i + EVAL_BATCH]) for i in range(0, len(x), EVAL_BATCH)])


def accuracy(model, x, y):
    return (predict(model, x).argmax(1) == y).float().mean().item()


def train(model, x, y, epochs, opt, sched, gen, xte, yte, tag):
    """Adam steps over shuffled batches with random horizontal flips; the
    scheduler steps every batch. Returns one (seconds of training, mean loss,
    training accuracy, test accuracy) tuple per epoch."""
    loss_fn = nn.CrossEntropyLoss()
    log = []
    for epoch in range(epochs):
        model.train()
        t0 = time.time()
        perm = torch.randperm(len(x), generator=gen)
        flip = torch.rand(len(x), generator=gen) < 0.5
        total, correct, loss_sum = 0, 0, 0.0
        for i in range(0, len(x), BATCH):
            idx = perm[i:i + BATCH]
            xb = x[idx]
            xb = torch.where(flip[idx, None, None, None], xb.flip(3), xb)
            opt.zero_grad()
            out = model(xb)
            loss = loss_fn(out, y[idx])
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.item() * len(idx)
            correct += (out.argmax(1) == y[idx]).sum().item()
            total += len(idx)
        seconds = time.time() - t0
        acc = accuracy(model, xte, yte)
        log.append((seconds, loss_sum / total, correct / total, acc))
        print(f"{tag} epoch {epoch + 1}/{epochs}: loss {loss_sum / total:.4f}, "
              f"train acc {correct / total:.4f}, test acc {acc:.4f}, {seconds:.1f}s", flush=True)
    return log


# --------------------------------------------------------------------------
# ONNX checks
# --------------------------------------------------------------------------

def check_onnx(path):
    """onnx.checker, opset 13, names and the dynamic batch dimension."""
    import onnx
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    assert proto.opset_import[0].version == 13 and proto.ir_version <= 8
    (inp,), (out,) = proto.graph.input, proto.graph.output

    def dims(v):
        return [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
    assert inp.name == "input" and dims(inp) == ["batch", 1, 28, 28], dims(inp)
    assert out.name == "logits" and dims(out) == ["batch", NUM_CLASSES], dims(out)
    assert inp.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert os.path.getsize(path) < 1 << 20, f"{path}: {os.path.getsize(path)} bytes"
    return proto


def ort_available():
    return (shutil.which("node") is not None
            and os.path.isdir(os.path.join(ROOT, "tests", "ort", "node_modules", "onnxruntime-node")))


ORT_LEVELS = ("all", "disabled")        # graph optimization levels checked


def ort_run(model_path, x_file, work, level):
    out_dir = tempfile.mkdtemp(dir=work)
    cmd = ["node", RUN_JS, model_path, out_dir, f"input={x_file}"]
    if level == "disabled":
        cmd.append("--no-opt")
    subprocess.run(cmd, check=True)
    return np.load(os.path.join(out_dir, "logits.npy"))


def ort_evaluate(model_path, chunks, check_file, input_file, ref, ref_check, ref_input, y, work,
                 level):
    """ONNX Runtime logits on the test set (in chunks of ORT_BATCH images),
    on CHECK_BATCH images and on input.npy (batch 1): accuracy, max |ORT -
    PyTorch| and argmax agreement with PyTorch."""
    logits = np.concatenate([ort_run(model_path, f, work, level) for f in chunks])
    small = ort_run(model_path, check_file, work, level)
    one = ort_run(model_path, input_file, work, level)
    assert logits.shape == ref.shape and small.shape == ref_check.shape and one.shape == ref_input.shape
    return {
        "acc": float((logits.argmax(1) == y).mean()),
        "maxdiff": float(np.abs(logits - ref).max()),
        "maxdiff_check": float(max(np.abs(small - ref_check).max(), np.abs(one - ref_input).max())),
        "agree": int((logits.argmax(1) == ref.argmax(1)).sum()),
    }


def qdq_placement(proto):
    """Short facts about where the Q/DQ pairs sit (for README.md)."""
    g = proto.graph
    prod = {o: n for n in g.node for o in n.output}
    inits = {t.name for t in g.initializer}

    def src(name):
        n = prod.get(name)
        return n.op_type if n is not None else ("initializer" if name in inits else "graph input")
    facts = Counter()
    for n in g.node:
        if n.op_type in ("Add", "Conv", "Gemm", "GlobalAveragePool", "Clip", "Flatten"):
            kinds = tuple(src(i) for i in n.input[:2] if i)
            facts[(n.op_type, kinds)] += 1
    return facts



# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=prepare_data.DEFAULT_DATA_DIR,
                    help="directory with the Fashion-MNIST IDX .gz files")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--out", default=HERE, help="where to write the .onnx files and README.md")
    ap.add_argument("--epochs", type=int, default=FLOAT_EPOCHS, help="float training epochs")
    ap.add_argument("--qat-epochs", type=int, default=QAT_EPOCHS, help="QAT epochs")
    ap.add_argument("--no-ort", action="store_true", help="skip the ONNX Runtime checks")
    ap.add_argument("--limit", type=int, default=0,
                    help="train on the first N training images only (smoke tests)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    t_start = time.time()
    try:
        xtr, ytr = load_split(args.data_dir, "train")
        xte, yte = load_split(args.data_dir, "test")
    except FileNotFoundError as e:
        sys.exit(f"train_fashion.py: {e}")
    calib_idx = prepare_data.calib_indices(len(xtr))
    xcal = xtr[calib_idx]
    if args.limit:
        xtr, ytr = xtr[:args.limit], ytr[:args.limit]
    print(f"data: {len(xtr)} training, {len(xte)} test images ({time.time() - t_start:.1f}s)")
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="fashion-")
    try:
        run(args, gen, xtr, ytr, xte, yte, xcal, work, t_start)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args, gen, xtr, ytr, xte, yte, xcal, work, t_start):
    # 0. prepare_data.py's files must be exactly what this script feeds PyTorch
    data_dir = os.path.join(work, "data")
    prepare_data.main(["--data-dir", args.data_dir, "--out", data_dir])

    def npy(name):
        return np.load(os.path.join(data_dir, name))
    assert np.array_equal(npy("test_images.npy"), xte.numpy())
    assert np.array_equal(npy("test_labels.npy"), yte.numpy())
    assert np.array_equal(npy("calib.npy"), xcal.numpy())
    assert np.array_equal(npy("input.npy"), xte[:1].numpy())
    print("prepare_data.py output matches the tensors trained/evaluated on (bit-exact)")

    # 1. float training
    model = FashionNet()
    table, nparams, nmacs = layer_table(model)
    steps = args.epochs * ((len(xtr) + BATCH - 1) // BATCH)
    opt = torch.optim.Adam(model.parameters(), lr=FLOAT_LR)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=FLOAT_LR, total_steps=steps,
                                                pct_start=PCT_START)
    float_log = train(model, xtr, ytr, args.epochs, opt, sched, gen, xte, yte, "float")
    model.eval()
    acc_float = accuracy(model, xte, yte)
    print(f"float test accuracy: {acc_float:.4f}  ({time.time() - t_start:.1f}s)")

    # 2. PTQ: BN folding + Q/DQ insertion + max calibration on the 512 images
    calib = [xcal[i:i + CALIB_BATCH] for i in range(0, len(xcal), CALIB_BATCH)]
    qmodel = trt_qdq.quantize_model(model, calib)
    acc_ptq = accuracy(qmodel, xte, yte)
    print(f"PTQ (max calibration) fake-quant test accuracy: {acc_ptq:.4f}")
    example = xte[:2].clone()
    ptq_path = os.path.join(work, "fashion_ptq.onnx")
    trt_qdq.export_onnx(qmodel, example, ptq_path, output_names=("logits",),
                        dynamic_axes=DYNAMIC_AXES)
    ptq_logits = predict(qmodel, xte)
    ptq_check = predict(qmodel, xte[:CHECK_BATCH])

    # 3. QAT fine-tuning (straight-through estimator, scales fixed)
    steps = args.qat_epochs * ((len(xtr) + BATCH - 1) // BATCH)
    opt = torch.optim.Adam(qmodel.parameters(), lr=QAT_LR)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(steps, 1))
    qat_log = train(qmodel, xtr, ytr, args.qat_epochs, opt, sched, gen, xte, yte, "QAT")
    qmodel.eval()
    acc_qat = accuracy(qmodel, xte, yte)
    print(f"QAT test accuracy: {acc_qat:.4f}  ({time.time() - t_start:.1f}s)")

    # 4. export
    float_path = os.path.join(args.out, "fashion_float.onnx")
    qat_path = os.path.join(args.out, "fashion_qat.onnx")
    pf = trt_qdq.export_onnx(model, example, float_path, output_names=("logits",),
                             dynamic_axes=DYNAMIC_AXES)
    pq = trt_qdq.export_onnx(qmodel, example, qat_path, output_names=("logits",),
                             dynamic_axes=DYNAMIC_AXES)
    for p in (float_path, qat_path, ptq_path):
        check_onnx(p)
    s = trt_qdq.qdq_summary(pq)
    nconv = sum(isinstance(m, nn.Conv2d) for m in model.modules())
    assert s["QuantizeLinear"] == s["DequantizeLinear"] > 0
    assert s["per_axis_dq"] == nconv + 1 and s["dq_axes"] == {0: nconv + 1}, s
    assert "BatchNormalization" not in trt_qdq.op_counts(pf)
    print("float ops:", trt_qdq.op_counts(pf))
    print("qat ops:  ", trt_qdq.op_counts(pq))
    print("qat Q/DQ: ", s)
    for k, v in sorted(qdq_placement(pq).items()):
        print(f"  {k[0]} <- {', '.join(k[1])}: {v}")

    # 5. ONNX Runtime
    results = {
        "float": (acc_float, float_path, predict(model, xte), predict(model, xte[:CHECK_BATCH])),
        "ptq": (acc_ptq, ptq_path, ptq_logits, ptq_check),
        "qat": (acc_qat, qat_path, predict(qmodel, xte), predict(qmodel, xte[:CHECK_BATCH])),
    }
    ort = {}
    if args.no_ort:
        print("ONNX Runtime checks skipped (--no-ort)")
    elif not ort_available():
        print("ONNX Runtime checks skipped: needs node and tests/ort/node_modules "
              "(scripts/test.sh installs onnxruntime-node there)")
    else:
        chunks = []
        for i in range(0, len(xte), ORT_BATCH):
            chunks.append(os.path.join(work, f"test_{i}.npy"))
            np.save(chunks[-1], xte[i:i + ORT_BATCH].numpy())
        check_file = os.path.join(work, "check.npy")
        np.save(check_file, xte[:CHECK_BATCH].numpy())
        input_file = os.path.join(data_dir, "input.npy")
        y = yte.numpy()
        for key, (_, path, ref, ref_check) in results.items():
            ort[key] = {}
            for level in ORT_LEVELS:
                r = ort_evaluate(path, chunks, check_file, input_file, ref.numpy(),
                                 ref_check.numpy(), ref[:1].numpy(), y, work, level)
                ort[key][level] = r
                print(f"ORT {key} (optimizations {level}): accuracy {r['acc']:.4f}, "
                      f"max |ORT - PyTorch| {r['maxdiff']:.3g} (batches {ORT_BATCH}), "
                      f"{r['maxdiff_check']:.3g} (batches {CHECK_BATCH} and 1), "
                      f"argmax agrees on {r['agree']}/{len(y)}", flush=True)

    with torch.no_grad():
        logits_q = qmodel(xte[:1])[0]
    total = time.time() - t_start
    print("\n| model | PyTorch | ORT | ORT --no-opt |\n|---|---|---|---|")
    for key, name in (("float", "float"), ("ptq", "PTQ (max)"), ("qat", "QAT")):
        o = " | ".join(f"{ort[key][lv]['acc'] * 100:.2f}%" if key in ort else "-"
                       for lv in ORT_LEVELS)
        print(f"| {name} | {results[key][0] * 100:.2f}% | {o} |")
    print(f"float epochs: {', '.join(f'{e[0]:.0f}s' for e in float_log)}; "
          f"QAT epochs: {', '.join(f'{e[0]:.0f}s' for e in qat_log)}; total {total:.0f}s")

    write_readme(args, table, nparams, nmacs, results, ort, float_log, qat_log, total,
                 trt_qdq.op_counts(pf), trt_qdq.op_counts(pq), s, int(yte[0]), logits_q)
    print(f"done in {time.time() - t_start:.1f}s")


def write_readme(args, table, nparams, nmacs, results, ort, float_log, qat_log, total,
                 ops_f, ops_q, summary, label, logits_q):
    def ops(d):
        return ", ".join(f"{k} {v}" for k, v in d.items())

    def pct(v):
        return f"{v * 100:.2f}%"

    def epochs(n):
        return f"{n} epoch" + ("" if n == 1 else "s")

    log_rows = [f"| {tag} {i + 1} | {sec:.0f} s | {loss:.4f} | {pct(tr)} | {pct(te)} |"
                for tag, log in (("float", float_log), ("QAT", qat_log))
                for i, (sec, loss, tr, te) in enumerate(log)]

    rows = []
    for key, name in (("float", "float (`fashion_float.onnx`)"),
                      ("ptq", "PTQ: fake-quantized after max calibration"),
                      ("qat", f"QAT: after {epochs(args.qat_epochs)} of QAT (`fashion_qat.onnx`)")):
        if key in ort:
            a, d = ort[key]["all"], ort[key]["disabled"]
            rows.append(f"| {name} | {pct(results[key][0])} | {pct(a['acc'])} | {pct(d['acc'])} | "
                        f"{a['maxdiff']:.2g} / {d['maxdiff']:.2g} | {a['agree']} / {d['agree']} |")
        else:
            rows.append(f"| {name} | {pct(results[key][0])} | not run | not run | | |")
    logits = ", ".join(f"{v:.3f}" for v in logits_q.tolist())
    threads = "one thread" if args.threads == 1 else f"{args.threads} threads"
    classes = ", ".join(f"{i} {c}" for i, c in enumerate(prepare_data.CLASSES))
    text = f"""# fashion: a MobileNet-style example on Fashion-MNIST

A small MobileNetV2-style CNN (inverted-residual blocks with depthwise
convolutions and residual adds) trained on Fashion-MNIST (28x28 grayscale,
10 classes), exported as a float model and, after quantization-aware training
with the TensorRT explicit-quantization recipe, as a model with
QuantizeLinear/DequantizeLinear nodes.

| file | contents |
|---|---|
| `fashion_qat.onnx` | the Q/DQ (QAT) model, opset 13, input `input` float32 [batch,1,28,28], output `logits` float32 [batch,10]; `batch` is a dynamic dimension |
| `fashion_float.onnx` | the float model before quantization (same input/output) |
| `prepare_data.py` | writes the test images, labels, calibration images and one input as `.npy` (standard library only, any python3) |
| `train_fashion.py` | regenerates the two `.onnx` files and this README |

The `.npy` data is not stored here; make it with

```
python3 examples/fashion/prepare_data.py --out build/fashion-data
```

which writes `test_images.npy` float32 [10000,1,28,28], `test_labels.npy`
int64 [10000], `calib.npy` float32 [512,1,28,28] (calibration images for
post-training quantization) and `input.npy` float32 [1,1,28,28] (the first
test image, label {label}: {prepare_data.CLASSES[label]}).

## Accuracy on the 10000 test images

| model | PyTorch | ORT | ORT `--no-opt` | max \\|ORT - PyTorch\\| (logits; ORT / `--no-opt`) | test images where ORT's argmax = PyTorch's (ORT / `--no-opt`) |
|---|---|---|---|---|---|
{chr(10).join(rows)}

PyTorch evaluates the fake-quantized model (torch.fake_quantize_*). ONNX
Runtime for Node.js (`tests/ort/run.js`, one thread) runs the exported files
on the test images in batches of {ORT_BATCH}, and on batches of {CHECK_BATCH}
and 1 (the batch dimension is dynamic), once with all graph optimizations
(run.js's default) and once without (`--no-opt`). The PTQ model is exported
to a temporary file for this check only.

Without optimizations ORT evaluates the Q/DQ nodes as written and agrees
with the fake-quantized PyTorch model up to float rounding (an activation
that lands on the other side of a rounding boundary moves by one int8 step).
With all optimizations (onnxruntime-node 1.30) ORT rewrites the Q/DQ
models: it quantizes most float Conv biases to int32 (scale = input scale x
weight scale), moves int8 activations to uint8 with zero point 128
(equivalent), runs the projection Convs whose output only feeds the residual
Add's Q as integer QLinearConv (int32 accumulation, then requantization), and
the other Convs as float (Fused)Conv on dequantized inputs; so its logits
differ more from the Q/DQ arithmetic, and a few near-ties flip.

PyTorch logits of the QAT model for `input.npy`:
[{logits}] (argmax {int(logits_q.argmax())}).

## Data

Debian's package `dataset-fashion-mnist`
(`/usr/share/datasets/fashion-mnist/{{train,t10k}}-{{images-idx3,labels-idx1}}-ubyte.gz`;
`--data-dir` for another copy): 60000 training and 10000 test images.
Classes: {classes}.

Preprocessing: a pixel p (0..255) becomes (p/255 - {prepare_data.MEAN}) / {prepare_data.STD},
computed in double precision and rounded to float32 (MEAN and STD are the
mean and standard deviation of the training pixels, measured 0.28604 and
0.35302, rounded). No resizing; the input layout is NCHW.

Calibration images: training images 0, 117, 234, ..., 59787 (index 117*i,
i = 0..511), in that order — `calib.npy`.

## Architecture

{table}

Every Conv has no bias before BN folding; ReLU6 exports as Clip(0, 6). The
residual Add is `x + project(...)` (block input first).

## Training and quantization

Float: Adam, one-cycle learning rate (max {FLOAT_LR}, {PCT_START * 100:.0f}% warm-up, cosine
annealing), {epochs(args.epochs)}, batch {BATCH}, random horizontal flips, seed {SEED},
{threads}. Quantization (`tests/models/trt_qdq.py`): BN folded into the
convs, then per-tensor symmetric int8 Q/DQ (zero point 0, scale = amax/127)
on the input of every Conv (including the depthwise ones) and of the Gemm, and
on both inputs of each residual Add; per-output-channel symmetric int8 Q/DQ
(axis 0) on the weights; float biases; max calibration on the 512
calibration images. QAT: Adam lr {QAT_LR} with cosine decay to 0,
{epochs(args.qat_epochs)}, same batches/augmentation (scales fixed).

Training log ({threads}; the time is the training pass only, without the test
evaluation after it; the whole script took {total / 60:.1f} min including data
loading, evaluation, export and the ONNX Runtime checks — times depend on the
CPU and its load):

| epoch | time | mean loss | train accuracy (flipped batches) | test accuracy |
|---|---:|---:|---:|---:|
{chr(10).join(log_rows)}

Weights are exported as float initializers feeding QuantizeLinear ->
DequantizeLinear (axis 0); scales are float32 initializers, zero points int8
initializers. Node names are the exporter's scoped names
(`/blocks/blocks.1/expand/conv/input_quantizer/QuantizeLinear`,
`/blocks/blocks.1/expand/conv/Conv`, ...). In `fashion_float.onnx` torch's
exporter has folded BN into the convs.

Where the Q/DQ pairs sit in `fashion_qat.onnx`:

- every Conv (stem, expand, depthwise, projection, head) reads a per-tensor
  DQ on its input and a per-channel DQ (axis 0) on its weight — the depthwise
  weights [C,1,3,3] too, so each depthwise channel has its own weight scale.
  Conv outputs carry no Q/DQ of their own: Conv -> Clip (ReLU6) is float up
  to the next consumer's Q;
- a residual Add reads two DQs: `input_quantizer_a` on the block input and
  `input_quantizer_b` on the projection Conv's output. The block input
  therefore goes through two separate Q -> DQ pairs (the expand Conv's and
  the Add's), which have the same scale (both max-calibrated on the same
  tensor; the exporter shares the initializer). The Add's output is not
  quantized by the Add; its consumers (the next block's expand Conv and Add,
  or the head Conv) quantize it;
- GlobalAveragePool reads the head's ReLU6 output unquantized (float) and
  Flatten passes it on; the Gemm's input Q/DQ sits between Flatten and Gemm,
  so the pooling runs in float.

Op counts: float: {ops(ops_f)}.
Q/DQ: {ops(ops_q)}.
Per-channel DQs: {summary['per_axis_dq']} (weights); DQ consumers: {ops(summary['dq_consumers'])}.

## Regenerate

```
/usr/bin/python3 examples/fashion/train_fashion.py
```

(Debian's python with torch 1.13, onnx 1.12, numpy; deterministic with one
thread, the default; `--threads N` is faster but may change the results.
The ONNX Runtime checks run when `tests/ort/node_modules` exists, which
`scripts/test.sh` installs; `--no-ort` skips them.)
"""
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
