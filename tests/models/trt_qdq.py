"""TensorRT explicit-quantization (Q/DQ) recipe for float PyTorch models.

Turns a float model into a fake-quantized one that exports to ONNX with
QuantizeLinear/DequantizeLinear pairs placed the way NVIDIA's
pytorch-quantization toolkit places them for TensorRT:

* BatchNorm2d is folded into the Conv2d that feeds it before anything is
  quantized, so there is never a Q/DQ pair (or a BatchNormalization node)
  between a Conv and its BN.
* The input of every Conv2d and Linear (exported as Gemm, or as
  Transpose+MatMul+Add when the input has rank > 2) is quantized per tensor,
  symmetric int8: zero point 0, scale = amax / 127, range [-128, 127].
* Their weights are quantized per output channel (axis 0 of the Conv weight
  [Cout, Cin/g, kh, kw] and of the Linear weight [out, in]), symmetric int8,
  scale[c] = amax[c] / 127. The bias stays float.
* Both inputs of activation x activation matmuls (`MatMul` modules, e.g.
  attention Q.K^T and attn.V) and of residual adds (`Add` modules and the
  patched torchvision blocks below) are quantized, per tensor each.
* Outputs of Conv/Linear are not quantized.

Fake quantization uses torch.fake_quantize_per_tensor_affine and
torch.fake_quantize_per_channel_affine; torch 1.13's ONNX exporter (opset >= 13)
turns each into a QuantizeLinear -> DequantizeLinear pair (per-channel ones
carry axis=0). Weights are exported as QuantizeLinear(float initializer) ->
DequantizeLinear; the exporter does not constant-fold the weight Q into an
int8 initializer. Scales and zero points become initializers (scale float32,
zero point int8). The exporter deduplicates equal initializers (all zero
points are equal) by inserting Identity nodes; `export_onnx` removes those
again unless keep_identity=True, so equal scales/zero points are shared.

Calibration is "max" calibration: activation amax is the running max of |x|
over the calibration batches, measured on the float (BN-folded) model with
quantization disabled; weight amax per output channel is taken from the
weights themselves. Scales stay fixed afterwards (also during QAT, as in
pytorch-quantization without learn_amax); call `calibrate_weights` to
re-derive weight scales after training if wanted.

Supported residual adds (quantized on both inputs):
  torchvision resnet BasicBlock and Bottleneck, mobilenet_v2 InvertedResidual,
  mobilenet_v3 InvertedResidual, efficientnet MBConv/FusedMBConv, and the
  `Add` module of this file (use it in your own models). Activation matmuls
  are quantized where a model uses this file's `MatMul` module. Every other
  model gets Conv2d/Linear input + weight quantization only (adds, concats,
  pooling etc. stay float). `register_block_patch` adds more block types.

Typical use:

    import trt_qdq
    qmodel = trt_qdq.quantize_model(model, calib_batches)   # fold, wrap, calibrate
    # optional QAT: qmodel.train(); ... ordinary training loop ...
    trt_qdq.export_onnx(qmodel, example_input, "model_qdq.onnx")
"""

import copy
import warnings
from collections import Counter

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = [
    "TensorQuantizer", "QuantConv2d", "QuantLinear", "Add", "MatMul",
    "QuantAdd", "QuantMatMul", "fold_batchnorm", "replace_modules",
    "quantize_model", "calibrate", "calibrate_weights", "quantizers",
    "set_quantization", "register_block_patch", "export_onnx", "op_counts",
    "qdq_summary", "strip_initializer_identities", "QMIN", "QMAX",
]

QMIN, QMAX = -128, 127          # int8 range used by TensorRT (narrow range not needed)
_BOUND = 127.0                  # symmetric: scale = amax / 127
_EPS = 2.0 ** -24               # amax at or below this counts as zero


# --------------------------------------------------------------------------
# Quantizer
# --------------------------------------------------------------------------

class TensorQuantizer(nn.Module):
    """Symmetric int8 fake quantizer, per tensor (axis=None) or per channel.

    Modes: `calibrating` (records max |x|, passes x through unchanged),
    `enabled` (fake-quantizes with the stored scale), or disabled (identity).
    Buffers: `amax` (recorded range), `scale` (amax/127, 1.0 where amax is 0),
    `zero_point` (int32 zeros, exported as int8).
    """

    def __init__(self, axis=None, channels=None):
        super().__init__()
        self.axis = axis
        shape = () if axis is None else (int(channels),)
        self.register_buffer("amax", torch.zeros(shape))
        self.register_buffer("scale", torch.ones(shape))
        self.register_buffer("zero_point", torch.zeros(shape, dtype=torch.int32))
        self.calibrating = False
        self.enabled = False
        self.calibrated = False

    def extra_repr(self):
        kind = "per-tensor" if self.axis is None else f"per-channel axis={self.axis}"
        state = "calibrating" if self.calibrating else ("on" if self.enabled else "off")
        return f"{kind}, int8 symmetric, {state}"

    def reset_amax(self):
        self.amax.zero_()
        self.calibrated = False

    @torch.no_grad()
    def observe(self, x):
        """Running max of |x| (per channel along `axis` if set)."""
        x = x.detach().float().abs()
        if self.axis is None:
            m = x.max()
        else:
            dims = [d for d in range(x.dim()) if d != self.axis % x.dim()]
            m = x.amax(dim=dims) if dims else x
        torch.maximum(self.amax, m.to(self.amax.device), out=self.amax)
        self.calibrated = True

    @torch.no_grad()
    def load_amax(self, amax=None):
        """Sets amax (or uses the recorded one) and derives the scale."""
        if amax is not None:
            self.amax.copy_(torch.as_tensor(amax, dtype=torch.float32))
            self.calibrated = True
        amax = self.amax.float()
        ok = torch.isfinite(amax) & (amax > _EPS)
        self.scale.copy_(torch.where(ok, amax / _BOUND, torch.ones_like(amax)))

    def forward(self, x):
        if self.calibrating:
            self.observe(x)
            return x
        if not self.enabled:
            return x
        if self.axis is None:
            return torch.fake_quantize_per_tensor_affine(
                x, self.scale, self.zero_point, QMIN, QMAX)
        return torch.fake_quantize_per_channel_affine(
            x, self.scale, self.zero_point, self.axis, QMIN, QMAX)


# --------------------------------------------------------------------------
# Quantized layers and the helper modules for adds and matmuls
# --------------------------------------------------------------------------

def _adopt(q, float_mod):
    q.weight = float_mod.weight
    q.bias = float_mod.bias
    for sub in (q.input_quantizer, q.weight_quantizer):
        sub.to(float_mod.weight.device)
    return q.train(float_mod.training)


class QuantConv2d(nn.Conv2d):
    """nn.Conv2d with a per-tensor input and a per-output-channel weight quantizer."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.input_quantizer = TensorQuantizer()
        self.weight_quantizer = TensorQuantizer(axis=0, channels=self.out_channels)

    @classmethod
    def from_float(cls, conv):
        # Built on the meta device (no init, no RNG use), then given the
        # float module's own parameters.
        q = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride,
                conv.padding, conv.dilation, conv.groups, conv.bias is not None,
                conv.padding_mode, device="meta")
        return _adopt(q, conv)

    def forward(self, x):
        return self._conv_forward(self.input_quantizer(x),
                                  self.weight_quantizer(self.weight), self.bias)


class QuantLinear(nn.Linear):
    """nn.Linear with a per-tensor input and a per-output-channel weight quantizer."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.input_quantizer = TensorQuantizer()
        self.weight_quantizer = TensorQuantizer(axis=0, channels=self.out_features)

    @classmethod
    def from_float(cls, lin):
        q = cls(lin.in_features, lin.out_features, lin.bias is not None, device="meta")
        return _adopt(q, lin)

    def forward(self, x):
        return F.linear(self.input_quantizer(x), self.weight_quantizer(self.weight), self.bias)


class Add(nn.Module):
    """a + b as a module, so that `quantize_model` can quantize both inputs."""

    def forward(self, a, b):
        return a + b


class MatMul(nn.Module):
    """torch.matmul(a, b) as a module (activation x activation matmul)."""

    def forward(self, a, b):
        return torch.matmul(a, b)


class QuantAdd(Add):
    """Residual add with its own per-tensor quantizer on each input."""

    def __init__(self):
        super().__init__()
        self.input_quantizer_a = TensorQuantizer()
        self.input_quantizer_b = TensorQuantizer()

    def forward(self, a, b):
        return self.input_quantizer_a(a) + self.input_quantizer_b(b)


class QuantMatMul(MatMul):
    """Activation matmul with its own per-tensor quantizer on each input."""

    def __init__(self):
        super().__init__()
        self.input_quantizer_a = TensorQuantizer()
        self.input_quantizer_b = TensorQuantizer()

    def forward(self, a, b):
        return torch.matmul(self.input_quantizer_a(a), self.input_quantizer_b(b))


# --------------------------------------------------------------------------
# Residual-add patches for torchvision blocks (class swap + extra QuantAdd)
# --------------------------------------------------------------------------

class _ResidualPatch:
    """Mixin: a patched block gets a `residual_add` QuantAdd submodule (only
    blocks that actually add, i.e. without `use_res_connect` or with it set)."""

    def _init_quant(self):
        if getattr(self, "use_res_connect", True):
            self.residual_add = QuantAdd()


def _resnet_patches():
    from torchvision.models import resnet

    class QuantBasicBlock(_ResidualPatch, resnet.BasicBlock):
        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            return self.relu(self.residual_add(out, identity))

    class QuantBottleneck(_ResidualPatch, resnet.Bottleneck):
        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            return self.relu(self.residual_add(out, identity))

    return {resnet.BasicBlock: QuantBasicBlock, resnet.Bottleneck: QuantBottleneck}


def _mobilenet_patches():
    from torchvision.models import mobilenetv2, mobilenetv3

    class QuantInvertedResidualV2(_ResidualPatch, mobilenetv2.InvertedResidual):
        def forward(self, x):
            if self.use_res_connect:
                return self.residual_add(x, self.conv(x))
            return self.conv(x)

    class QuantInvertedResidualV3(_ResidualPatch, mobilenetv3.InvertedResidual):
        def forward(self, x):
            result = self.block(x)
            if self.use_res_connect:
                result = self.residual_add(result, x)
            return result

    return {mobilenetv2.InvertedResidual: QuantInvertedResidualV2,
            mobilenetv3.InvertedResidual: QuantInvertedResidualV3}


def _efficientnet_patches():
    from torchvision.models import efficientnet

    patches = {}
    for name in ("MBConv", "FusedMBConv"):
        base = getattr(efficientnet, name, None)
        if base is None:
            continue

        def forward(self, x):
            result = self.block(x)
            if self.use_res_connect:
                result = self.stochastic_depth(result)
                result = self.residual_add(result, x)
            return result

        patches[base] = type("Quant" + name, (_ResidualPatch, base), {"forward": forward})
    return patches


_BLOCK_PATCHES = None
_USER_PATCHES = {}


def register_block_patch(float_cls, quant_cls):
    """Registers `quant_cls` (a subclass of `float_cls` overriding forward and
    defining `_init_quant(self)` to add its quantizers) as the replacement
    class for instances of exactly `float_cls`."""
    _USER_PATCHES[float_cls] = quant_cls


def _block_patches():
    global _BLOCK_PATCHES
    if _BLOCK_PATCHES is None:
        _BLOCK_PATCHES = {}
        for make in (_resnet_patches, _mobilenet_patches, _efficientnet_patches):
            try:
                _BLOCK_PATCHES.update(make())
            except ImportError:          # torchvision missing or too old
                pass
    return {**_BLOCK_PATCHES, **_USER_PATCHES}


# --------------------------------------------------------------------------
# Graph rewriting
# --------------------------------------------------------------------------

def _set_submodule(root, name, module):
    parent, _, leaf = name.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, leaf, module)


def _conv_bn_pairs_fx(model):
    import torch.fx
    gm = torch.fx.symbolic_trace(model)
    modules = dict(gm.named_modules())
    calls = Counter(n.target for n in gm.graph.nodes if n.op == "call_module")
    pairs = []
    for node in gm.graph.nodes:
        if node.op != "call_module" or not isinstance(modules.get(node.target), nn.BatchNorm2d):
            continue
        src = node.args[0] if node.args else None
        if (isinstance(src, torch.fx.Node) and src.op == "call_module"
                and isinstance(modules.get(src.target), nn.Conv2d)
                and len(src.users) == 1 and calls[src.target] == 1 and calls[node.target] == 1):
            pairs.append((src.target, node.target))
    return pairs


def _conv_bn_pairs_sequential(model):
    pairs = []
    for name, mod in model.named_modules():
        if not isinstance(mod, nn.Sequential):
            continue
        items = list(mod.named_children())
        for (n1, m1), (n2, m2) in zip(items, items[1:]):
            if isinstance(m1, nn.Conv2d) and isinstance(m2, nn.BatchNorm2d):
                prefix = name + "." if name else ""
                pairs.append((prefix + n1, prefix + n2))
    return pairs


def fold_batchnorm(model):
    """Folds every BatchNorm2d whose only input is a Conv2d (whose only user is
    that BN) into the conv, in place; the BN becomes nn.Identity. Pairs are
    found with torch.fx (data flow); if the model cannot be fx-traced, only
    Conv2d -> BatchNorm2d neighbours inside nn.Sequential are folded.
    Returns the list of (conv, bn) names folded. The model is put in eval mode."""
    model.eval()
    if not any(isinstance(m, nn.BatchNorm2d) for m in model.modules()):
        return []
    try:
        pairs = _conv_bn_pairs_fx(model)
    except Exception as e:  # noqa: BLE001 - any tracing failure means "use the fallback"
        warnings.warn(f"fold_batchnorm: fx trace failed ({type(e).__name__}: {e}); "
                      "folding Conv2d->BatchNorm2d inside nn.Sequential only")
        pairs = _conv_bn_pairs_sequential(model)
    for conv_name, bn_name in pairs:
        conv, bn = model.get_submodule(conv_name), model.get_submodule(bn_name)
        if conv.out_channels != bn.num_features or not bn.track_running_stats:
            continue
        _set_submodule(model, conv_name, torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn))
        _set_submodule(model, bn_name, nn.Identity())
    return pairs


def replace_modules(model, residual=True, skip=()):
    """In place: Conv2d -> QuantConv2d, Linear -> QuantLinear, MatMul ->
    QuantMatMul, and (if `residual`) Add -> QuantAdd plus the registered
    block patches. Modules whose qualified name is in `skip` are left float.
    Quantizers start disabled and uncalibrated."""
    patches = _block_patches() if residual else {}
    for name, mod in list(model.named_modules()):
        if name in skip:
            continue
        new = None
        if type(mod) is nn.Conv2d:
            new = QuantConv2d.from_float(mod)
        elif type(mod) is nn.Linear:
            new = QuantLinear.from_float(mod)
        elif type(mod) is MatMul:
            new = QuantMatMul().train(mod.training)
        elif type(mod) is Add and residual:
            new = QuantAdd().train(mod.training)
        elif type(mod) in patches:
            mod.__class__ = patches[type(mod)]
            mod._init_quant()
        if new is not None:
            if name:
                _set_submodule(model, name, new)
            else:
                raise ValueError("the root module itself cannot be replaced")
    return model


def quantizers(model):
    """(name, TensorQuantizer) pairs of a model."""
    return [(n, m) for n, m in model.named_modules() if isinstance(m, TensorQuantizer)]


def set_quantization(model, enabled=True):
    """Turns fake quantization on or off for all quantizers. (The on/off state
    is not part of the state_dict: after loading a saved quantized state into
    a model prepared the same way (fold_batchnorm + replace_modules), call
    set_quantization(model, True).)"""
    for _, q in quantizers(model):
        q.enabled = enabled
        q.calibrating = False
    return model


@torch.no_grad()
def calibrate_weights(model):
    """Per-output-channel max calibration of every weight quantizer from the
    current weights."""
    for mod in model.modules():
        if isinstance(mod, (QuantConv2d, QuantLinear)):
            wq = mod.weight_quantizer
            wq.reset_amax()
            wq.observe(mod.weight)
            wq.load_amax()


def _run(model, batch):
    if isinstance(batch, (list, tuple)):
        return model(*batch)
    if isinstance(batch, dict):
        return model(**batch)
    return model(batch)


@torch.no_grad()
def calibrate(model, calib_batches):
    """Max calibration: runs the batches with quantization disabled, records
    max |x| at every activation quantizer, derives scales, and enables fake
    quantization. Weight quantizers are calibrated from the weights. Each
    batch is a tensor, a tuple of positional inputs, or a dict of kwargs."""
    was_training = model.training
    model.eval()
    set_quantization(model, False)      # calibrate on the float model
    act = [q for _, q in quantizers(model) if q.axis is None]
    for q in act:
        q.reset_amax()
        q.calibrating = True
    n = 0
    for batch in calib_batches:
        _run(model, batch)
        n += 1
    if n == 0:
        raise ValueError("calibrate: no calibration batches")
    for q in act:
        q.calibrating = False
        if not q.calibrated:
            warnings.warn("calibrate: a quantizer saw no data (unused module?); scale 1.0")
        q.load_amax()
    calibrate_weights(model)
    set_quantization(model, True)
    model.train(was_training)
    return model


def quantize_model(model, calib_batches, *, fold_bn=True, residual=True, skip=(), inplace=False):
    """Float model -> TensorRT-recipe fake-quantized model (in eval mode).

    1. (fold_bn) fold BatchNorm2d into the preceding Conv2d,
    2. replace Conv2d/Linear/MatMul/Add (+ torchvision residual blocks) by
       their quantized versions (see `replace_modules`),
    3. max-calibrate on `calib_batches` (iterable of input tensors / tuples /
       kwargs dicts) and enable fake quantization.
    `skip`: qualified module names to keep float. The float model is deep-copied
    unless inplace=True."""
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    if fold_bn:
        fold_batchnorm(model)
    replace_modules(model, residual=residual, skip=skip)
    calibrate(model, calib_batches)
    return model.eval()


# --------------------------------------------------------------------------
# ONNX export and inspection
# --------------------------------------------------------------------------

def strip_initializer_identities(proto):
    """Removes Identity nodes whose input is an initializer (rewiring their
    users to the initializer). torch 1.13's exporter deduplicates equal
    initializers (e.g. the all-zero int8 zero points, equal scales of two
    quantizers reading the same tensor, equal biases) by keeping one and
    inserting an unnamed `Identity_N` node for every duplicate. Returns the
    number of nodes removed; `proto` is modified in place."""
    g = proto.graph
    inits = {t.name for t in g.initializer}
    outputs = {o.name for o in g.output}
    rename, keep = {}, []
    for n in g.node:
        if n.op_type == "Identity" and n.input[0] in inits and n.output[0] not in outputs:
            rename[n.output[0]] = n.input[0]
        else:
            keep.append(n)
    if not rename:
        return 0
    for n in keep:
        for i, name in enumerate(n.input):
            if name in rename:
                n.input[i] = rename[name]
    del g.node[:]
    g.node.extend(keep)
    vi = [v for v in g.value_info if v.name not in rename]
    del g.value_info[:]
    g.value_info.extend(vi)
    return len(rename)


def export_onnx(model, example_input, path, input_names=("input",), output_names=("output",),
                opset=13, check=True, keep_identity=False, dynamic_axes=None):
    """torch.onnx.export with static shapes (unless `dynamic_axes`, passed on
    to torch.onnx.export, e.g. {"input": {0: "batch"}}), constant folding
    and eval mode; then (unless keep_identity) removes the exporter's
    initializer-dedup Identity nodes (see `strip_initializer_identities`),
    and checks the file with onnx.checker (opset == `opset`, ir_version <= 8).
    Node names are the exporter's scoped names ("/layer1/layer1.0/conv1/Conv").
    Returns the saved onnx.ModelProto."""
    import onnx
    args = tuple(example_input) if isinstance(example_input, (list, tuple)) else (example_input,)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        torch.onnx.export(model, args, str(path), opset_version=opset,
                          do_constant_folding=True,
                          training=torch.onnx.TrainingMode.EVAL,
                          input_names=list(input_names), output_names=list(output_names),
                          dynamic_axes=dynamic_axes)
    proto = onnx.load(str(path))
    if not keep_identity and strip_initializer_identities(proto):
        onnx.save(proto, str(path))
    if check:
        onnx.checker.check_model(proto)
        got = {o.domain: o.version for o in proto.opset_import}
        if got.get("", got.get("ai.onnx")) != opset:
            raise RuntimeError(f"{path}: exported opset {got}, wanted {opset}")
        if proto.ir_version > 8:
            raise RuntimeError(f"{path}: ir_version {proto.ir_version} > 8")
    return proto


def _load(model_or_path):
    import onnx
    if isinstance(model_or_path, onnx.ModelProto):
        return model_or_path
    return onnx.load(str(model_or_path))


def op_counts(model_or_path):
    """{op_type: count} of the main graph, sorted by op type."""
    counts = Counter(n.op_type for n in _load(model_or_path).graph.node)
    return dict(sorted(counts.items()))


def qdq_summary(model_or_path):
    """Checks the Q/DQ structure of an exported model and summarises it:
    counts of Q/DQ nodes, per-axis (axis attribute present) DQs with their
    axes, zero-point data types, and which op types consume a DQ output."""
    import onnx
    proto = _load(model_or_path)
    g = proto.graph
    inits = {t.name: t for t in g.initializer}
    consts = {n.output[0]: n.attribute[0].t for n in g.node
              if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"}
    users = {}
    for n in g.node:
        for i in n.input:
            users.setdefault(i, []).append(n)
    out = {"QuantizeLinear": 0, "DequantizeLinear": 0, "per_axis_dq": 0, "dq_axes": Counter(),
           "zero_point_types": Counter(), "weight_q_on_initializer": 0,
           "int8_initializer_dq": 0, "dq_consumers": Counter()}
    for n in g.node:
        if n.op_type not in ("QuantizeLinear", "DequantizeLinear"):
            continue
        out[n.op_type] += 1
        if len(n.input) > 2:
            zp = inits.get(n.input[2]) or consts.get(n.input[2])
            if zp is not None:
                out["zero_point_types"][onnx.TensorProto.DataType.Name(zp.data_type)] += 1
        if n.op_type == "QuantizeLinear" and n.input[0] in inits:
            out["weight_q_on_initializer"] += 1
        if n.op_type == "DequantizeLinear":
            if n.input[0] in inits:
                out["int8_initializer_dq"] += 1
            scale = inits.get(n.input[1]) or consts.get(n.input[1])
            if scale is not None and len(scale.dims) == 1 and scale.dims[0] > 1:
                axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
                out["per_axis_dq"] += 1
                out["dq_axes"][axis] += 1
            for u in users.get(n.output[0], []):
                out["dq_consumers"][u.op_type] += 1
    for k in ("dq_axes", "zero_point_types", "dq_consumers"):
        out[k] = dict(sorted(out[k].items()))
    return out
