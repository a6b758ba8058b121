"""The Python API (build/python/qatc) against the qatc executable, bit for
bit, plus threads sharing one plan and every error path.

Run by ctest (python-api) as
    PYTHONPATH=build/python QATC_BIN=build/bin/qatc /usr/bin/python3 -m pytest tests/python
"""

import os
import subprocess
import threading

import numpy as np
import pytest

import qatc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QATC_BIN = os.environ.get("QATC_BIN", os.path.join(ROOT, "build", "bin", "qatc"))
FLOAT_MODEL = os.path.join(ROOT, "examples", "fashion", "fashion_float.onnx")
QAT_MODEL = os.path.join(ROOT, "examples", "fashion", "fashion_qat.onnx")


def cli(*args):
    """The qatc executable; its stdout (fails the test on a non-zero exit)."""
    p = subprocess.run([QATC_BIN, *map(str, args)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


def images(n, seed):
    # Fashion-MNIST-like: a batch of 1x28x28 images, normalized as the
    # bundled models expect (values about -1..2).
    return (np.random.RandomState(seed).rand(n, 1, 28, 28).astype(np.float32) * 3 - 1)


def read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("api")


@pytest.fixture(scope="module")
def quantized(work):
    """The float model quantized through the API and through the CLI."""
    calib = images(16, 1)
    api = str(work / "api_qdq.onnx")
    assert qatc.quantize(FLOAT_MODEL, calib, output=api, method="percentile",
                         percentile=99.9) == api
    np.save(work / "calib.npy", calib)
    ref = str(work / "cli_qdq.onnx")
    cli("quantize", FLOAT_MODEL, "-o", ref, "--calib", work / "calib.npy",
        "--calib-method", "percentile", "--percentile", "99.9")
    return api, ref, calib


def test_quantize_matches_cli(quantized):
    api, ref, _ = quantized
    assert read(api) == read(ref)


def test_calibration_report(work):
    import json
    report = str(work / "calib.json")
    qatc.quantize(FLOAT_MODEL, images(8, 2), output=str(work / "r.onnx"), calib_report=report)
    data = json.load(open(report))
    assert data["method"] == "max" and data["samples"] == 8
    inputs = [t for t in data["tensors"] if t["graph_input"]]
    assert [t["tensor"] for t in inputs] == ["input"]
    assert inputs[0]["clipped_share"] == 0 and inputs[0]["range"] >= inputs[0]["observed_max"]


def test_dataloader_calibration(quantized, work):
    # An iterable of (data, label) batches, as a torch DataLoader yields,
    # calibrates exactly as the whole array does.
    api, _, calib = quantized
    torch = pytest.importorskip("torch")
    data = torch.utils.data.TensorDataset(torch.from_numpy(calib), torch.zeros(len(calib)))
    loader = torch.utils.data.DataLoader(data, batch_size=5)
    out = str(work / "loader_qdq.onnx")
    qatc.quantize(FLOAT_MODEL, loader, output=out, method="percentile", percentile=99.9)
    assert read(out) == read(api)
    # Dicts of named inputs too.
    out2 = str(work / "dict_qdq.onnx")
    qatc.quantize(FLOAT_MODEL, [{"input": calib[:8]}, {"input": calib[8:]}], output=out2,
                  method="percentile", percentile=99.9)
    assert read(out2) == read(api)


def test_compile_and_run_match_cli(quantized, work):
    api_model, _, _ = quantized
    plan = qatc.compile(api_model, output=str(work / "api.plan"))
    cli("compile", api_model, "-o", work / "cli.plan")
    assert read(work / "api.plan") == read(work / "cli.plan")
    assert plan.inputs == [("input", (1, 1, 28, 28), "float32")]
    assert plan.outputs == [("logits", (1, 10), "float32")]
    x = images(1, 7)
    np.save(work / "x.npy", x)
    cli("run", work / "cli.plan", "--input", work / "x.npy", "-o", work / "y.npy")
    y = plan.session().run(x)["logits"]
    assert y.dtype == np.float32 and y.shape == (1, 10)
    assert np.array_equal(y, np.load(work / "y.npy"))
    # The same through a dict, a non-contiguous view and a torch tensor.
    wide = np.zeros((1, 1, 28, 56), np.float32)
    wide[..., ::2] = x
    session = plan.session()
    assert np.array_equal(session.run({"input": wide[..., ::2]})["logits"], y)
    torch = pytest.importorskip("torch")
    assert np.array_equal(session.run(torch.from_numpy(x))["logits"], y)


def test_inspect_matches_cli(quantized, work):
    plan = qatc.compile(QAT_MODEL, output=str(work / "qat.plan"))
    import json
    assert plan.inspect() == json.loads(cli("inspect", work / "qat.plan", "--json"))
    assert plan.target == plan.inspect()["target"]


def test_eval_matches_cli(work):
    x = images(1, 3)
    np.save(work / "e.npy", x)
    for stage in ("onnx", "qat"):
        out = qatc.eval(QAT_MODEL, x, stage=stage)
        cli("eval", QAT_MODEL, "--stage", stage, "--input", work / "e.npy", "-o",
            work / f"e_{stage}.npy")
        assert set(out) == {"logits"}
        assert np.array_equal(out["logits"], np.load(work / f"e_{stage}.npy"))


def test_threads_share_a_plan(work):
    plan = qatc.compile(QAT_MODEL, output=str(work / "threads.plan"))
    inputs = [images(1, 100 + i) for i in range(12)]
    lone = plan.session()
    expected = [lone.run(x)["logits"] for x in inputs]
    results = {}
    errors = []

    def worker(t):
        try:
            session = plan.session(threads=2)
            for _ in range(5):
                for i, x in enumerate(inputs):
                    results[(t, i)] = session.run(x)["logits"]
                    assert np.array_equal(results[(t, i)], expected[i])
        except Exception as e:  # reported below, with the thread
            errors.append((t, e))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 4 * len(inputs)


def test_profile(work):
    plan = qatc.compile(QAT_MODEL, output=str(work / "profile.plan"))
    session = plan.session(profile=True)
    for _ in range(3):
        session.run(images(1, 5))
    layers = session.profile()
    assert len(layers) == len(plan.inspect()["layers"])
    assert all(l["ms"] >= 0 for l in layers) and sum(l["ms"] for l in layers) > 0
    assert {"node", "op", "precision", "kernel", "macs", "ms"} <= set(layers[0])
    with pytest.raises(qatc.Error, match="profile=True"):
        plan.session().profile()


def test_multi_path_plan(work):
    plan = qatc.compile(QAT_MODEL, output=str(work / "multi.plan"), target_cpu="avx2,generic")
    assert plan.paths == ["avx2", "generic"] and plan.target == "avx2"
    generic = qatc.Plan(str(work / "multi.plan"), isa="generic")
    assert generic.target == "generic"
    x = images(1, 9)
    assert np.array_equal(plan.session().run(x)["logits"], generic.session().run(x)["logits"])


# Every error is a qatc.Error with the CLI's message, never a crash.

POOL_1D = """<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,6] x) => (float[1,1,3] y) {
  y = MaxPool <kernel_shape = [2], strides = [2]> (x)
}
"""


def test_error_names_the_node(work):
    model = work / "pool1d.onnxtext"
    model.write_text(POOL_1D)
    with pytest.raises(qatc.Error, match=r'node "MaxPool_0" \(#0, MaxPool\): error: qatc compiles 2-D pooling only'):
        qatc.compile(str(model), output=str(work / "pool1d.plan"))
    assert issubclass(qatc.Error, RuntimeError)


def test_command_errors(work, quantized):
    with pytest.raises(qatc.Error, match="cannot be read"):
        qatc.compile(str(work / "missing.onnx"))
    with pytest.raises(qatc.Error, match="unknown --target-cpu 'pentium'"):
        qatc.compile(QAT_MODEL, output=str(work / "p.plan"), target_cpu="pentium")
    with pytest.raises(qatc.Error, match="--calib-method"):
        qatc.quantize(FLOAT_MODEL, images(2, 0), output=str(work / "m.onnx"), method="bogus")
    with pytest.raises(qatc.Error, match="calibration data"):
        qatc.quantize(FLOAT_MODEL, None, output=str(work / "m.onnx"))
    with pytest.raises(qatc.Error, match="calibration data is empty"):
        qatc.quantize(FLOAT_MODEL, [], output=str(work / "m.onnx"))
    with pytest.raises(qatc.Error, match="input"):
        qatc.eval(QAT_MODEL, np.zeros((1, 2, 3), np.float32))
    # After errors the in-process commands still work.
    api, _, _ = quantized
    qatc.compile(api, output=str(work / "after.plan"))


def test_plan_and_session_errors(work):
    bad = work / "bad.plan"
    bad.write_bytes(b"not a plan at all" * 20)
    with pytest.raises(qatc.Error, match="not a qatc plan"):
        qatc.Plan(str(bad))
    with pytest.raises(qatc.Error, match="cannot open"):
        qatc.Plan(str(work / "none.plan"))
    plan = qatc.compile(QAT_MODEL, output=str(work / "e.plan"))
    with pytest.raises(qatc.Error, match=r"holds one code path \(\w+\), not 'neon'"):
        qatc.Plan(str(work / "e.plan"), isa="neon")
    session = plan.session()
    x = images(1, 0)
    with pytest.raises(qatc.Error, match="is float64, the plan takes float32"):
        session.run(x.astype(np.float64))
    with pytest.raises(qatc.Error, match=r"has shape \(2, 1, 28, 28\), the plan takes \(1, 1, 28, 28\)"):
        session.run(images(2, 0))
    with pytest.raises(qatc.Error, match="missing input 'input'"):
        session.run({})
    with pytest.raises(qatc.Error, match="has no input 'x'"):
        session.run({"input": x, "x": x})
    with pytest.raises(qatc.Error, match="threads must be at least 1"):
        plan.session(threads=0)
    # The session still runs after refusing.
    assert session.run(x)["logits"].shape == (1, 10)
