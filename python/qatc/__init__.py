"""qatc: compile quantized (Q/DQ) ONNX models to plans and run them.

    import numpy as np, qatc

    qatc.quantize("m_fp32.onnx", calib=images, output="m_qdq.onnx")
    plan = qatc.compile("m_qdq.onnx", output="m.plan")
    session = plan.session(threads=2)
    logits = session.run(images[:1])["logits"]

The compiler commands run in this process exactly as the ``qatc`` command
line runs them (the same parser, the same code): a result is bit for bit
what ``qatc compile`` / ``qatc run`` give. Their progress goes to stderr as
in the CLI. A failure raises :class:`qatc.Error` with the CLI's message,
which names the ONNX node it is about.

Plans run in the native runtime; ``Session.run`` releases the GIL, so
threads with a session each run in parallel on one plan.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _qatc

__all__ = ["Error", "Plan", "Session", "compile", "eval", "quantize", "run_cli"]

#: Raised for every failure: a model qatc refuses (the message names the
#: node), a damaged plan, wrong inputs. A subclass of RuntimeError.
Error = _qatc.Error

ArrayLike = Any  # numpy arrays, torch tensors, anything np.asarray takes
Shapes = Optional[Mapping[str, Sequence[int]]]


def run_cli(*args: str, capture: bool = False) -> Tuple[int, str, str]:
    """Runs ``qatc <args>`` in this process; returns (exit code, stdout,
    stderr). stderr is passed on as it comes; stdout too unless `capture`."""
    rc, out, err = _qatc.run_command(["qatc", *map(str, args)], not capture)
    return rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def _message(err: str) -> str:
    """The located error lines of a command's stderr (or its last line)."""
    lines = [l for l in err.splitlines() if l.strip()]
    errors = [l for l in lines if "error" in l.lower() and not l.startswith("[")]
    picked = errors or lines[-1:] or ["qatc failed without a message"]
    return "\n".join(picked)


def _run(*args: str, capture: bool = False) -> str:
    rc, out, err = run_cli(*args, capture=capture)
    if rc != 0:
        raise Error(_message(err))
    return out


def _shape_args(shapes: Shapes) -> List[str]:
    args: List[str] = []
    for name, dims in (shapes or {}).items():
        args += ["--input-shape", f"{name}=" + "x".join(str(int(d)) for d in dims)]
    return args


def _as_array(x: ArrayLike) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(_maybe_numpy(x)))


def _write_calibration(calib: Any, directory: str) -> int:
    """Writes calibration data as files `qatc quantize --calib DIR` reads:
    an array (a batch of the only input) as .npy, a mapping of input names
    to arrays as .npz; an iterable gives one file per item. A (data, label)
    pair, as a torch DataLoader yields, contributes its first element."""

    def one(item: Any, i: int) -> None:
        if isinstance(item, (tuple, list)):
            if not item:
                raise Error(f"calibration item {i} is empty")
            item = item[0]
        path = os.path.join(directory, f"calib_{i:06d}")
        if isinstance(item, Mapping):
            np.savez(path + ".npz", **{str(k): _as_array(v) for k, v in item.items()})
        else:
            a = _as_array(item)
            if a.dtype == object:
                raise Error(f"calibration item {i} is not an array or a dict of arrays")
            np.save(path + ".npy", a)

    if isinstance(calib, Mapping) or isinstance(calib, np.ndarray) or hasattr(calib, "detach"):
        one(calib, 0)
        return 1
    count = 0
    for i, item in enumerate(calib):
        one(item, i)
        count += 1
    if count == 0:
        raise Error("the calibration data is empty")
    return count


def quantize(
    model: str,
    calib: Any = None,
    *,
    output: str,
    recipe: str = "trt",
    method: str = "max",
    percentile: Optional[float] = None,
    include_nodes: Sequence[str] = (),
    exclude_nodes: Sequence[str] = (),
    include_op_types: Sequence[str] = (),
    exclude_op_types: Sequence[str] = (),
    calib_cache: Optional[str] = None,
    write_calib_cache: Optional[str] = None,
    calib_report: Optional[str] = None,
    input_shapes: Shapes = None,
    threads: int = 2,
) -> str:
    """Post-training quantization: inserts Q/DQ into a float ONNX model.

    Args:
        model: the float model (.onnx).
        calib: calibration data. A numpy array (or torch tensor) holding a
            batch of the model's only input; a mapping {input name: array};
            or an iterable of either, e.g. a torch DataLoader (of a
            (data, label) pair the data is used).
        output: where the quantized model is written.
        recipe: "trt" (Q/DQ on inputs and weights) or "tf" (outputs and
            weights).
        method: "max", "percentile", "entropy" or "mse".
        percentile: for method="percentile" (default 99.99).
        include_nodes / exclude_nodes: node-name regexes to quantize only /
            leave float.
        include_op_types / exclude_op_types: op types likewise.
        calib_cache: read activation scales from a TensorRT calibration
            cache instead of calibrating.
        write_calib_cache: also write the scales as a TensorRT cache.
        calib_report: write the calibration report (.txt or .json).
        input_shapes: sizes of dynamic dimensions, {input: dims}.
        threads: calibration threads.

    Returns:
        `output`.
    """
    args = ["quantize", model, "-o", output, "--recipe", recipe, "--calib-method", method,
            "--threads", str(threads)]
    if percentile is not None:
        args += ["--percentile", repr(float(percentile))]
    for flag, values in (("--include-nodes", include_nodes), ("--exclude-nodes", exclude_nodes)):
        for v in values:
            args += [flag, v]
    if include_op_types:
        args += ["--include-op-types", ",".join(include_op_types)]
    if exclude_op_types:
        args += ["--exclude-op-types", ",".join(exclude_op_types)]
    if calib_cache:
        args += ["--calib-cache", calib_cache]
    if write_calib_cache:
        args += ["--write-calib-cache", write_calib_cache]
    if calib_report:
        args += ["--calib-report", calib_report]
    args += _shape_args(input_shapes)
    with tempfile.TemporaryDirectory(prefix="qatc-calib-") as d:
        if calib is not None:
            _write_calibration(calib, d)
            args += ["--calib", d]
        elif not calib_cache:
            raise Error("give calibration data (calib=...) or a calibration cache (calib_cache=...)")
        _run(*args)
    return output


def compile(
    model: str,
    output: Optional[str] = None,
    *,
    target_cpu: str = "host",
    input_shapes: Shapes = None,
    precision_override: Union[None, str, Mapping[str, str]] = None,
    precision_report: Optional[str] = None,
    trt_compat: bool = False,
) -> "Plan":
    """Compiles an ONNX model (Q/DQ or float) to a plan file and loads it.

    Args:
        model: the model (.onnx).
        output: the plan file (default: the model's name with .plan).
        target_cpu: "host", "amx", "avx512vnni", "avxvnni", "avx2", "generic",
            "x86-64-multi" or a comma-separated list (a multi-path plan).
        input_shapes: sizes of dynamic dimensions, {input: dims}; a dynamic
            dimension not given becomes 1 (with a warning naming it).
        precision_override: a file of "<node regex> fp32|int8" lines, or a
            mapping {node regex: "fp32"|"int8"}.
        precision_report: write the per-node precision report (.txt, .csv,
            .json, or .html: the graph coloured by precision).
        trt_compat: refuse what TensorRT refuses.
    """
    if output is None:
        output = os.path.splitext(model)[0] + ".plan"
    args = ["compile", model, "-o", output, "--target-cpu", target_cpu] + _shape_args(input_shapes)
    if precision_report:
        args += ["--precision-report", precision_report]
    if trt_compat:
        args.append("--trt-compat")
    with tempfile.TemporaryDirectory(prefix="qatc-compile-") as d:
        if isinstance(precision_override, Mapping):
            path = os.path.join(d, "override.txt")
            with open(path, "w") as f:
                for pattern, precision in precision_override.items():
                    f.write(f"{pattern} {precision}\n")
            args += ["--precision-override", path]
        elif precision_override:
            args += ["--precision-override", precision_override]
        _run(*args)
    return Plan(output)


def eval(
    model: str,
    inputs: Union[ArrayLike, Mapping[str, ArrayLike]],
    stage: str = "onnx",
    *,
    input_shapes: Shapes = None,
) -> Dict[str, np.ndarray]:
    """Runs the reference evaluator: the ONNX graph as imported ("onnx") or
    after the quantization passes ("qat"). `inputs` is an array for a model
    with one input, or {input name: array}. Returns {output name: array}."""
    with tempfile.TemporaryDirectory(prefix="qatc-eval-") as d:
        args = ["eval", model, "--stage", stage] + _shape_args(input_shapes)
        items = inputs.items() if isinstance(inputs, Mapping) else [(None, inputs)]
        for i, (name, value) in enumerate(items):
            path = os.path.join(d, f"input_{i}.npy")
            np.save(path, _as_array(value))
            args += ["--input", path if name is None else f"{name}={path}"]
        out = os.path.join(d, "outputs.npz")
        args += ["-o", out]
        _run(*args, capture=True)
        with np.load(out) as z:
            return {k: z[k] for k in z.files}


class Session:
    """Runs a plan: an activation arena and `threads` workers. One thread
    at a time may run a session; give each thread its own (they share the
    plan)."""

    def __init__(self, plan: "Plan", threads: int = 1, profile: bool = False):
        self._plan = plan
        self._session = _qatc.Session(plan._plan, threads, profile)

    @property
    def threads(self) -> int:
        return self._session.threads

    def run(self, inputs: Union[ArrayLike, Mapping[str, ArrayLike]]) -> Dict[str, np.ndarray]:
        """Runs one inference. `inputs` is {input name: array}, or an array
        for a plan with one input; each must have the plan's dtype and shape
        exactly (C-contiguous arrays are read in place). Returns {output
        name: array}. The GIL is released while the plan runs."""
        if not isinstance(inputs, Mapping):
            names = [n for n, _, _ in self._plan.inputs]
            if len(names) != 1:
                raise Error(f"the plan has {len(names)} inputs ({', '.join(names)}): "
                            "give a dict {name: array}")
            inputs = {names[0]: inputs}
        return self._session.run({k: _maybe_numpy(v) for k, v in inputs.items()})

    def profile(self) -> List[Dict[str, Any]]:
        """Per-layer timings, the mean milliseconds per run since the session
        was created or reset_profile() (a session made with profile=True):
        [{"layer", "node", "op", "precision", "kernel", "macs", "ms"}]."""
        return self._session.profile()

    def reset_profile(self) -> None:
        self._session.reset_profile()


def _maybe_numpy(v: Any) -> Any:
    """A torch tensor as numpy (no copy on the CPU); anything else as is."""
    if hasattr(v, "detach"):
        return v.detach().cpu().numpy()
    return v


class Plan:
    """A compiled plan, loaded and verified (checksum, manifest, code, CPU
    features). Of a multi-path plan, the best code path this CPU runs, or
    the one `isa` names."""

    def __init__(self, path: str, isa: Optional[str] = None):
        self.path = path
        self._plan = _qatc.Plan(path, isa or "")

    @property
    def inputs(self) -> List[Tuple[str, Tuple[int, ...], str]]:
        """[(name, shape, numpy dtype name)] of the graph inputs."""
        return list(self._plan.inputs)

    @property
    def outputs(self) -> List[Tuple[str, Tuple[int, ...], str]]:
        """[(name, shape, numpy dtype name)] of the graph outputs."""
        return list(self._plan.outputs)

    @property
    def target(self) -> str:
        """The instruction set of the loaded code ("avx512vnni", ...)."""
        return self._plan.target

    @property
    def paths(self) -> List[str]:
        """The code paths of a multi-path plan, best first ([] otherwise)."""
        return list(self._plan.paths)

    def inspect(self) -> Dict[str, Any]:
        """What `qatc inspect --json` prints for this plan."""
        return json.loads(_run("inspect", self.path, "--json", capture=True))

    def session(self, threads: int = 1, profile: bool = False) -> Session:
        """A new session on this plan (see Session)."""
        return Session(self, threads, profile)

    def __repr__(self) -> str:
        return f"qatc.Plan({self.path!r}, target={self.target!r})"
