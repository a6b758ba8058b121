//===- GraphLowering.cpp - a qat/onnx function to layer functions ---------===//
//
// The walk over the function, the tensors (storage, layouts, views,
// constants), the layers and the arena plan. See GraphLowering.h.
//
//===----------------------------------------------------------------------===//

#include "GraphLowering.h"

#include "qatc/Codegen/Barriers.h"
#include "qatc/Codegen/OneStepRequant.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <tuple>
#include <type_traits>

using namespace mlir;
using namespace qatc;
using namespace qatc::codegen;

namespace qatc::codegen::lowering {

std::string GraphLowering::nameOf(Value v) {
  if (Operation *def = v.getDefiningOp()) {
    if (auto names = def->getAttrOfType<ArrayAttr>(qatc::kOutputNamesAttr)) {
      unsigned i = cast<OpResult>(v).getResultNumber();
      if (i < names.size())
        if (auto s = dyn_cast<StringAttr>(names[i]))
          return s.str();
    }
    return nodeName(def->getLoc()) + ":out";
  }
  return nodeName(cast<BlockArgument>(v).getOwner()->getParentOp()->getLoc());
}

int GraphLowering::addTensor(CTensor t) {
  Storage s;
  s.bytes = roundUp(
      std::max<int64_t>(t.desc.storedElements() *
                            static_cast<int64_t>(plan::elemSize(t.desc.type)),
                        1),
      64);
  t.storage = storages.size();
  t.storageOffset = 0;
  storages.push_back(s);
  t.manifestIndex = out.manifest.tensors.size();
  out.manifest.tensors.push_back(t.desc);
  tensors.push_back(std::move(t));
  return tensors.size() - 1;
}

int GraphLowering::newTensor(std::string name, ArrayRef<int64_t> shape,
                             bool int8, plan::Layout layout, Type quantType) {
  CTensor t;
  t.desc.name = std::move(name);
  t.desc.shape.assign(shape.begin(), shape.end());
  t.desc.layout = layout;
  t.int8 = int8;
  if (int8) {
    qat::QuantLayout q(quantType);
    StoredQuant stored = storedQuant(q);
    t.desc.type = plan::ElemType::U8;
    t.desc.quantized = true;
    t.desc.isSigned = q.type.isSigned();
    t.desc.storedOffset = stored.offset;
    t.desc.scale = q.scales[0];
    t.desc.zeroPoint = q.zeroPoints[0];
    t.scale = stored.scale;
    t.zp = stored.zp;
    t.qmin = stored.qmin;
    t.qmax = stored.qmax;
  } else {
    t.desc.type = plan::ElemType::F32;
  }
  if (layout == plan::Layout::NHWC)
    t.desc.channelStride = t.packedChannelStride();
  return addTensor(std::move(t));
}

int GraphLowering::newIntTensor(std::string name, ArrayRef<int64_t> shape,
                                plan::ElemType type) {
  CTensor t;
  t.desc.name = std::move(name);
  t.desc.shape.assign(shape.begin(), shape.end());
  t.desc.layout = plan::Layout::Plain;
  t.desc.type = type;
  return addTensor(std::move(t));
}

int GraphLowering::resultTensor(Value res, plan::Layout layout) {
  if (slices.count(res) && layout == plan::Layout::NHWC)
    return sliceTensor(res, layout);
  auto type = cast<RankedTensorType>(res.getType());
  if (isIntegerValue(res)) {
    int o = newIntTensor(nameOf(res), type.getShape(),
                         heldIntType(type.getElementType()));
    valueTensor[res] = o;
    return o;
  }
  bool int8 = isa<quant::QuantizedType>(type.getElementType());
  int o = newTensor(nameOf(res), type.getShape(), int8, layout,
                    int8 ? type : Type());
  valueTensor[res] = o;
  return o;
}

int GraphLowering::alias(int base, std::string name, ArrayRef<int64_t> shape) {
  CTensor t = tensors[base];
  t.desc.name = std::move(name);
  t.desc.shape.assign(shape.begin(), shape.end());
  t.flat = false;
  t.manifestIndex = out.manifest.tensors.size();
  out.manifest.tensors.push_back(t.desc);
  tensors.push_back(std::move(t));
  return tensors.size() - 1;
}

int64_t GraphLowering::addWeights(const void *data, size_t bytes) {
  std::vector<uint8_t> &w = out.weights;
  w.resize(roundUp(w.size(), 64), 0);
  int64_t off = w.size();
  w.resize(off + bytes + 64, 0); // slack for vector loads past the end
  if (bytes)
    std::memcpy(w.data() + off, data, bytes);
  return off;
}

LogicalResult GraphLowering::addChannelConstant(Operation *op, Value v,
                                                StringRef what,
                                                int64_t channels,
                                                int64_t &offset) {
  auto c = constantOf(v);
  if (!c)
    return op->emitError("the ") << what << " must be a constant";
  offset = addChannels(floatsOf(*c), channels);
  return success();
}

int64_t GraphLowering::addZeroPointTerms(
    int64_t channels, int64_t zx,
    llvm::function_ref<int64_t(int64_t)> weightSum) {
  std::vector<int32_t> corr(roundUp(channels, 64) + 64, 0);
  for (int64_t c = 0; c < channels; ++c)
    corr[c] = static_cast<int32_t>(-zx * weightSum(c));
  return addArray(corr);
}

int64_t GraphLowering::interleavedCopy(int64_t off, int64_t channels,
                                       int64_t count) {
  std::vector<uint32_t> v(roundUp(channels, 64) + 64, 0);
  for (int64_t c = 0; c < channels; ++c)
    std::memcpy(&v[c < count ? interleave64Index(c) : c],
                out.weights.data() + off + 4 * c, 4);
  return addArray(v);
}

void GraphLowering::interleaveChannels(Epilogue &ep, int64_t channels,
                                       int64_t count) {
  ep.forEachChannelArray([&](int64_t &off) {
    if (off >= 0)
      off = interleavedCopy(off, channels, count);
  });
}

int64_t GraphLowering::padRow(bool int8, int64_t value, int64_t count) {
  count = roundUp(count, 64) + 64;
  if (int8)
    return addArray(std::vector<uint8_t>(count, static_cast<uint8_t>(value)));
  return addArray(std::vector<float>(count, 0.f));
}

void GraphLowering::addLayer(Location loc, std::string node, std::string opType,
                             std::string kernel, std::string precision,
                             bool parallel, int64_t macs,
                             std::vector<int> inputs, std::vector<int> outputs,
                             std::function<void(KB &)> emit) {
  int index = layers.size();
  Layer l{plan::LayerDesc(), loc, std::move(emit)};
  l.desc.symbol = "qatc_layer_" + std::to_string(index);
  l.desc.node = std::move(node);
  l.desc.opType = std::move(opType);
  l.desc.precision = std::move(precision);
  l.desc.kernel = std::move(kernel);
  l.desc.parallel = parallel;
  l.desc.macs = macs;
  auto use = [&](const std::vector<int> &list, std::vector<int> &manifest,
                 std::vector<int> &used) {
    for (int t : list) {
      Storage &s = storages[tensors[t].storage];
      s.first = std::min(s.first, index);
      s.last = std::max(s.last, index);
      used.push_back(tensors[t].storage);
      if (tensors[t].manifestIndex >= 0)
        manifest.push_back(tensors[t].manifestIndex);
    }
  };
  use(inputs, l.desc.inputs, l.reads);
  use(outputs, l.desc.outputs, l.writes);
  layers.push_back(std::move(l));
}

int GraphLowering::inLayout(int t, plan::Layout want, Location loc) {
  const CTensor &src = tensors[t];
  if (!src.view && src.desc.layout == want && !src.flat)
    return t;
  // (An f32 NHWC matrix aliasing a Concat's channel slice has a wider
  // channel stride.)
  bool rowsPacked = src.int8 ? src.desc.channelStride == src.dim(1)
                             : src.desc.layout != plan::Layout::NHWC ||
                                   src.desc.channelStride == src.dim(1);
  if (!src.view && src.desc.shape.size() == 2 && !src.flat && rowsPacked)
    return t; // identical bytes
  if (want == plan::Layout::NHWC && src.desc.shape.size() != 4 &&
      src.desc.shape.size() != 2)
    want = plan::Layout::Plain;
  auto key = std::make_pair(t, static_cast<int>(want));
  if (auto it = converted.find(key); it != converted.end())
    return it->second;
  // The same tensor (name, type, quantization) in the other layout.
  CTensor copy = src;
  bool toNHWC = want == plan::Layout::NHWC;
  copy.view = false;
  copy.vstrides.clear();
  copy.vbase = 0;
  copy.desc.layout = want;
  copy.desc.channelStride = toNHWC ? src.packedChannelStride() : 0;
  int res = addTensor(copy);
  converted[key] = res;
  std::string kernel = tensors[t].view ? "strided-copy"
                       : toNHWC        ? "nchw-to-nhwc"
                                       : "nhwc-to-nchw";
  std::vector<int64_t> shape = tensors[t].desc.shape;
  // A layer of its own, named after the op that needs the conversion.
  addLayer(loc, nodeName(loc) == "?" ? src.desc.name : nodeName(loc), "layout",
           kernel, "layout", product(shape) > 4096, 0, {t}, {res},
           [this, t, res, shape](KB &k) {
             StridedMap m;
             m.shape = shape;
             m.out = operand(Src{res, -1, {}}, shape);
             m.ins = {operand(Src{t, -1, {}}, shape)};
             emitStridedMap(k, m, nullptr);
           });
  return res;
}

std::vector<int64_t> GraphLowering::stridesOf(const CTensor &t) const {
  assert(!t.flat && "a flattened view is read by matrix products only");
  if (t.view)
    return t.vstrides;
  const std::vector<int64_t> &shape = t.desc.shape;
  if (t.desc.layout != plan::Layout::NHWC || shape.size() < 2)
    return rowMajor(shape);
  // Channels last: [N, C, D1, ...] stored as [N, D1, ..., C(stride)].
  std::vector<int64_t> st(shape.size(), 1);
  int64_t acc = t.desc.channelStride;
  for (size_t d = shape.size(); d-- > 2;) {
    st[d] = acc;
    acc *= shape[d];
  }
  st[0] = acc;
  return st;
}

StridedOperand GraphLowering::operand(const Src &s,
                                      ArrayRef<int64_t> loop) const {
  StridedOperand o;
  std::vector<int64_t> shape, st;
  if (s.tensor >= 0) {
    const CTensor &t = tensors[s.tensor];
    shape = t.desc.shape;
    st = stridesOf(t);
    o.byteOffset = t.desc.offset;
    o.elemBytes =
        t.int8 ? 1 : static_cast<int64_t>(plan::elemSize(t.desc.type));
    o.isInt = t.isInt();
    o.offset = t.view ? t.vbase : 0;
  } else {
    shape = s.shape;
    st = rowMajor(shape);
    o.inWeights = true;
    o.byteOffset = s.weightOff;
    o.isInt = s.isInt;
    o.elemBytes = s.isInt ? 8 : 4;
  }
  // numpy broadcasting: shapes align at the right; size-1 dims repeat.
  o.strides.assign(loop.size(), 0);
  size_t lead = loop.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1)
      o.strides[lead + d] = st[d];
  return o;
}

int GraphLowering::tensorOf(Value v) {
  if (auto it = valueTensor.find(v); it != valueTensor.end())
    return it->second;
  // A constant read where a tensor is needed (a graph output, a Concat
  // input): copied from the weights once.
  auto type = cast<ShapedType>(v.getType());
  bool isInt = isIntegerValue(v);
  Src c = isInt ? intSrcOf(v) : srcOf(v);
  if (c.tensor >= 0 || (!type.getElementType().isF32() && !isInt)) {
    if (!constantError)
      emitError(v.getLoc(), "qatc compiles f32 and integer constants only; "
                            "this one is ")
          << type;
    constantError = true;
    return 0;
  }
  int t = resultTensor(v, plan::Layout::Plain);
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  addLayer(v.getLoc(), nameOf(v), "Constant", "constant", "fp32", false, 0, {},
           {t}, [=](KB &k) {
             StridedMap m;
             m.shape = shape;
             m.out = operand(Src{t, -1, {}}, shape);
             m.ins = {operand(c, shape)};
             const CTensor &T = tensors[t];
             // int64 constants narrow to an int32 tensor.
             emitStridedMap(k, m,
                            T.isInt() && T.desc.type == plan::ElemType::I32
                                ? ElementFn([&](ArrayRef<Value> v) -> Value {
                                    return k.b.create<arith::TruncIOp>(
                                        k.loc, k.i32, v[0]);
                                  })
                                : ElementFn());
           });
  return t;
}

Src GraphLowering::intSrcOf(Value v) {
  auto c = constantOf(v);
  if (!c)
    return Src{tensorOf(v), -1, {}};
  std::vector<int64_t> values(c->numElements());
  for (int64_t i = 0; i < c->numElements(); ++i)
    values[i] = intAt(*c, i);
  Src s;
  s.weightOff = addArray(values);
  auto shape = cast<ShapedType>(v.getType()).getShape();
  s.shape.assign(shape.begin(), shape.end());
  s.isInt = true;
  return s;
}

Src GraphLowering::srcOf(Value v) {
  if (auto c = constantOf(v)) {
    Src s;
    auto [it, fresh] = constantOffsets.try_emplace(v, 0);
    if (fresh) {
      std::vector<float> values = floatsOf(*c);
      // A quantized constant (qat.constant) is read by strided kernels as
      // the real values it stands for.
      auto type = cast<ShapedType>(v.getType());
      if (isa<quant::QuantizedType>(type.getElementType())) {
        qat::QuantLayout q(type);
        for (size_t i = 0; i < values.size(); ++i) {
          int64_t ch = q.channel(i);
          values[i] = (values[i] - static_cast<float>(q.zeroPoints[ch])) *
                      static_cast<float>(q.scales[ch]);
        }
      }
      it->second = addArray(values);
    }
    s.weightOff = it->second;
    auto shape = cast<ShapedType>(v.getType()).getShape();
    s.shape.assign(shape.begin(), shape.end());
    return s;
  }
  return Src{tensorOf(v), -1, {}};
}

void GraphLowering::makeView(int base, Value res, std::vector<int64_t> strides,
                             int64_t offset) {
  CTensor v = tensors[base];
  auto shape = cast<ShapedType>(res.getType()).getShape();
  v.desc.name = nameOf(res);
  v.desc.shape.assign(shape.begin(), shape.end());
  v.flat = false;
  v.view = true;
  v.vstrides = std::move(strides);
  v.vbase = offset;
  v.manifestIndex = -1;
  tensors.push_back(std::move(v));
  valueTensor[res] = tensors.size() - 1;
}

void GraphLowering::fillEpilogueOut(Epilogue &ep, const CTensor &o) {
  ep.quantOut = o.int8;
  if (o.int8) {
    ep.outScale = o.scale;
    ep.outZp = o.zp;
    ep.qmin = o.qmin;
    ep.qmax = o.qmax;
  }
}

void GraphLowering::boundChain(
    Epilogue &ep, int64_t channels,
    llvm::function_ref<std::pair<int64_t, int64_t>(int64_t)> accRange,
    llvm::function_ref<float(int64_t, int64_t)> channel) {
  // The chain's input is the accumulator's affine image only without a
  // residual, a second quantization or an activation after the add.
  if (ep.multOff < 0 || ep.midQuant || ep.hasResidual || ep.hasPost)
    return;
  double xLo = INFINITY, xHi = -INFINITY, worst = 0;
  bool bounded = ep.chainBound != nullptr;
  for (int64_t c = 0; c < channels; ++c) {
    auto [lo, hi] = accRange(c);
    double m = channel(ep.multOff, c);
    if (ep.scaleOff >= 0)
      m *= channel(ep.scaleOff, c);
    double b = ep.biasOff >= 0 ? channel(ep.biasOff, c) : 0.0;
    double x0 = lo * m + b, x1 = hi * m + b;
    if (ep.hasAct) {
      // The activation before the chain, min(max(x, lo), hi) as the
      // epilogue applies it (even where lo > hi): monotone, so it maps the
      // range's ends to the image's.
      auto act = [&](double x) {
        return std::min(std::max(x, double(ep.actLo)), double(ep.actHi));
      };
      x0 = act(x0);
      x1 = act(x1);
    }
    xLo = std::min({xLo, x0, x1});
    xHi = std::max({xHi, x0, x1});
    std::optional<std::pair<double, double>> r =
        bounded ? ep.chainBound({std::min(x0, x1), std::max(x0, x1)})
                : std::nullopt;
    bounded = r.has_value();
    if (r)
      worst = std::max({worst, std::abs(r->first), std::abs(r->second)});
  }
  // Widened by a part in a million for y's own f32 roundings (the affine
  // image in f32, not in reals).
  double slack = 1e-6 * std::max(std::abs(xLo), std::abs(xHi));
  if (channels > 0 && std::isfinite(xLo) && std::isfinite(xHi))
    ep.chainInputRange = std::pair{xLo - slack, xHi + slack};
  // Twice the bound covers the f32 roundings of y and of the chain's
  // approximate steps many times over.
  const double quotient = 2 * worst / ep.outScale + std::abs(double(ep.outZp));
  ep.chainQuotientFits =
      ep.quantOut && ep.chainApproximate && bounded && quotient < 0x1p30;
  ep.chainQuotientSmall = ep.chainQuotientFits && quotient < 0x1p21;
}

void GraphLowering::foldRequantization(
    Epilogue &ep, int64_t channels,
    llvm::function_ref<std::pair<int64_t, int64_t>(int64_t)> accRange) {
  // The packed stores it needs are AVX-512's and AVX2's (generic keeps the
  // division: SSE2 has no FMA to fold into); a fused chain or a degenerate
  // activation (a Clip whose min exceeds its max, which the epilogue applies
  // as it stands) keep the two-step form, and so does a residual or a
  // second quantization other than the requantized add.
  const bool add = ep.midQuant && ep.hasResidual;
  auto channel = [&](int64_t off, int64_t c) {
    float v;
    std::memcpy(&v, out.weights.data() + off + 4 * c, 4);
    return v;
  };
  if (ep.chain)
    boundChain(ep, channels, accRange, channel);
  // A requantized add with an f32 result (a transformer's Add before its
  // layer norm) folds the conv's own quantization; the add stays in f32.
  if (!(hasAvx512(target.isa) || target.isa == Isa::AVX2) ||
      !(ep.quantOut || add) || ep.multOff < 0 || ep.chain ||
      (ep.hasAct && !(ep.actLo <= ep.actHi)) ||
      (!add && (ep.midQuant || ep.hasResidual || ep.hasPost)))
    return;
  if (add && ep.quantOut)
    foldResidualAdd(ep);
  std::vector<Requant> rs(channels);
  std::vector<std::pair<int64_t, int64_t>> ranges(channels);
  std::pair<bool, bool> clamps{false, false};
  for (int64_t c = 0; c < channels; ++c) {
    Requant &r = rs[c];
    r.mult = channel(ep.multOff, c);
    r.hasScale = ep.scaleOff >= 0;
    r.scale = r.hasScale ? channel(ep.scaleOff, c) : 1.f;
    r.hasBias = ep.biasOff >= 0;
    r.bias = r.hasBias ? channel(ep.biasOff, c) : 0.f;
    // Before an add, the conv's own quantization.
    r.outScale = add ? ep.midScale : ep.outScale;
    r.zp = add ? ep.midZp : ep.outZp;
    r.qmin = add ? ep.midQmin : ep.qmin;
    r.qmax = add ? ep.midQmax : ep.qmax;
    r.hasAct = ep.hasAct;
    r.actLo = ep.actLo;
    r.actHi = ep.actHi;
    ranges[c] = accRange(c);
    auto need = OneStepRequant::clamps(r, ranges[c].first, ranges[c].second);
    clamps.first |= need.first;
    clamps.second |= need.second;
  }
  // Before an add the result stays in f32, where no pack saturates it.
  if (add)
    clamps = {true, true};
  // Each exception costs a compare and a masked add per 16 outputs. Where
  // the two-step form divides (vdivps), four still cost less; against the
  // multiplication and two FMAs of the reciprocal form, two.
  const size_t maxExceptions =
      target.reciprocalDivision ? 2 : Epilogue::kMaxFoldExceptions;
  std::vector<OneStepRequant> folds;
  for (int64_t c = 0; c < channels; ++c) {
    std::optional<OneStepRequant> f = OneStepRequant::find(
        rs[c], ranges[c].first, ranges[c].second, maxExceptions, clamps);
    if (!f)
      return;
    folds.push_back(std::move(*f));
  }
  std::vector<float> m(channels), b(channels);
  size_t exceptions = 0;
  bool onBytes = !add;
  for (int64_t c = 0; c < channels; ++c) {
    m[c] = folds[c].m;
    b[c] = folds[c].b;
    exceptions = std::max(exceptions, folds[c].exceptions.size());
    onBytes &= folds[c].clampsOnBytes(ranges[c].first, ranges[c].second);
  }
  ep.foldClampBytes = onBytes;
  ep.foldMulOff = addChannels(m, channels);
  ep.foldAddOff = addChannels(b, channels);
  std::tie(ep.foldClampLo, ep.foldClampHi) = clamps;
  ep.foldLo = folds[0].lo;
  ep.foldHi = folds[0].hi;
  ep.foldExceptions = exceptions;
  for (size_t e = 0; e < exceptions; ++e) {
    // Channels with fewer exceptions add 0 at accumulator 0.
    std::vector<int32_t> at(roundUp(channels, 64) + 64, 0), delta(at.size(), 0);
    for (int64_t c = 0; c < channels; ++c)
      if (e < folds[c].exceptions.size())
        std::tie(at[c], delta[c]) = folds[c].exceptions[e];
    ep.foldAccOff[e] = addArray(at);
    // Before an add the delta is added in f32: stored as f32, it needs no
    // conversion per epilogue.
    ep.foldDeltaOff[e] =
        add ? addArray(std::vector<float>(delta.begin(), delta.end()))
            : addArray(delta);
  }
}

void GraphLowering::foldResidualAdd(Epilogue &ep) {
  AddRequant r;
  r.s1 = ep.midScale;
  r.s2 = ep.resScale;
  r.outScale = ep.outScale;
  // Both operands are stored bytes (StoredQuant's domain).
  r.uLo = ep.midQmin - ep.midZp;
  r.uHi = ep.midQmax - ep.midZp;
  r.rZp = ep.resZp;
  r.zp = ep.outZp;
  r.qmin = ep.qmin;
  r.qmax = ep.qmax;
  r.hasAct = ep.hasPost;
  r.actLo = ep.postLo;
  r.actHi = ep.postHi;
  std::optional<OneStepAdd> f = OneStepAdd::find(r);
  if (!f)
    return;
  ep.addFold = true;
  ep.addA = f->a;
  ep.addB = f->b;
  ep.addC = f->c;
  ep.addClampLo = f->clampLo;
  ep.addClampHi = f->clampHi;
  ep.addLo = f->lo;
  ep.addHi = f->hi;
  ep.addClampBytes = f->clampsOnBytes;
}

void GraphLowering::fillActivation(Epilogue &ep,
                                   std::optional<qat::ClampAttr> act,
                                   bool post) {
  if (!act || !*act)
    return;
  float lo = static_cast<float>(act->getMin()),
        hi = static_cast<float>(act->getMax());
  if (post) {
    ep.hasPost = true;
    ep.postLo = lo;
    ep.postHi = hi;
  } else {
    ep.hasAct = true;
    ep.actLo = lo;
    ep.actHi = hi;
  }
}

/// The activation clamp `c` keeps its values at 0 or above.
static bool clampsAtZero(std::optional<qat::ClampAttr> c) {
  return c && *c && c->getMin() >= 0;
}

/// The last clamp on `op`'s result keeps it at 0 or above: for a product,
/// its epilogue's after the residual, if any.
template <typename OpTy> static bool resultClampsAtZero(OpTy op) {
  if constexpr (std::is_same_v<OpTy, qat::ConvOp> ||
                std::is_same_v<OpTy, qat::MatMulOp>)
    return clampsAtZero(op.getResidual() ? op.getResidualActivation()
                                         : op.getActivation());
  else
    return clampsAtZero(op.getActivation());
}

bool GraphLowering::storedNonNegative(Value v) {
  return storedFloor(v) >= storedQuant(qat::QuantLayout(v.getType())).zp;
}

int64_t GraphLowering::storedFloor(Value v) {
  if (!isa<quant::UniformQuantizedType>(getElementTypeOrSelf(v.getType())))
    return 0;
  if (auto it = floors.find(v); it != floors.end())
    return it->second;
  StoredQuant q = storedQuant(qat::QuantLayout(v.getType()));
  Operation *def = v.getDefiningOp();
  auto floorAtZero = [&](bool atZero) { return atZero ? q.zp : q.qmin; };
  int64_t floor =
      !def ? q.qmin
           : llvm::TypeSwitch<Operation *, int64_t>(def)
                 .Case<qat::ConvOp, qat::MatMulOp, qat::AddOp, qat::MulOp>(
                     [&](auto op) {
                       return floorAtZero(resultClampsAtZero(op));
                     })
                 .Case([&](qat::ClampOp c) {
                   return std::max(storedFloor(c.getInput()),
                                   static_cast<int64_t>(c.getMin()) + q.offset);
                 })
                 .Case<qat::MaxPoolOp, qat::ReshapeOp, qat::TransposeOp,
                       qat::SliceOp, qat::GatherOp>([&](Operation *op) {
                   return storedFloor(op->getOperand(0));
                 })
                 .Case([&](qat::ConcatOp c) {
                   int64_t least = q.qmax;
                   for (Value in : c.getInputs())
                     least = std::min(least, storedFloor(in));
                   return least;
                 })
                 .Case([&](qat::QuantizeOp op) {
                   return floorAtZero(nonNegativeFloat(op->getOperand(0)));
                 })
                 // Means (padding counts as 0) and rescalings of
                 // non-negative values.
                 .Case<qat::RequantizeOp, qat::AvgPoolOp, qat::GlobalAvgPoolOp>(
                     [&](Operation *op) {
                       return floorAtZero(storedNonNegative(op->getOperand(0)));
                     })
                 .Default([&](Operation *) { return q.qmin; });
  floor = std::max(floor, q.qmin);
  floors[v] = floor;
  return floor;
}

bool GraphLowering::nonNegativeFloat(Value v) {
  if (auto it = nonNegatives.find(v); it != nonNegatives.end())
    return it->second;
  // Not yet known while the producers are visited: no cycle reaches here in
  // a graph, but a false guess is the safe one.
  nonNegatives[v] = false;
  Operation *def = v.getDefiningOp();
  bool result =
      def && llvm::TypeSwitch<Operation *, bool>(def)
                 // The reference's v > 0 ? v : 0: never NaN.
                 .Case([&](onnx::ReluOp) { return true; })
                 // f32 results of int8 kernels: finite sums, then the clamps.
                 .Case<qat::ConvOp, qat::MatMulOp, qat::AddOp, qat::MulOp>(
                     [&](auto op) { return resultClampsAtZero(op); })
                 .Case([&](qat::DequantizeOp op) {
                   return storedNonNegative(op->getOperand(0));
                 })
                 .Case<onnx::ReshapeOp, onnx::TransposeOp, onnx::SliceOp,
                       onnx::SplitOp, onnx::FlattenOp, onnx::SqueezeOp,
                       onnx::UnsqueezeOp, onnx::IdentityOp, onnx::MaxPoolOp,
                       onnx::AveragePoolOp, onnx::GlobalAveragePoolOp>(
                     [&](Operation *op) {
                       return nonNegativeFloat(op->getOperand(0));
                     })
                 .Case([&](onnx::ConcatOp c) {
                   return llvm::all_of(c->getOperands(), [&](Value in) {
                     return nonNegativeFloat(in);
                   });
                 })
                 .Default([](Operation *) { return false; });
  nonNegatives[v] = result;
  return result;
}

std::optional<std::pair<float, float>> GraphLowering::foldActivation(Value v,
                                                                     int o) {
  if (!v.hasOneUse())
    return std::nullopt;
  Operation *user = *v.getUsers().begin();
  float inf = std::numeric_limits<float>::infinity();
  std::optional<std::pair<float, float>> bounds;
  if (isa<onnx::ReluOp>(user)) {
    bounds = std::make_pair(0.f, inf);
  } else if (auto clip = dyn_cast<onnx::ClipOp>(user)) {
    bounds =
        std::make_pair(clip.getMin() ? clip.getMin()->convertToFloat() : -inf,
                       clip.getMax() ? clip.getMax()->convertToFloat() : inf);
  }
  if (bounds) {
    folded.insert(user);
    valueTensor[user->getResult(0)] = o;
  }
  return bounds;
}

Value wrapToType(KB &k, Value x, Type t) {
  auto n = narrowInt(t);
  if (!n)
    return x;
  auto [bits, isUnsigned] = *n;
  if (isUnsigned)
    return k.b.create<arith::AndIOp>(k.loc, x, k.c((int64_t(1) << bits) - 1));
  Value shift = k.c(64 - bits);
  return k.b.create<arith::ShRSIOp>(
      k.loc, k.b.create<arith::ShLIOp>(k.loc, x, shift), shift);
}

/// The scalar type an element of `t` is loaded and stored as.
static Type storedScalarType(KB &k, plan::ElemType t) {
  if (t == plan::ElemType::F32)
    return k.f32;
  if (t == plan::ElemType::F64)
    return k.b.getF64Type();
  switch (plan::elemSize(t)) {
  case 1:
    return k.i8;
  case 2:
    return k.b.getIntegerType(16);
  case 4:
    return k.i32;
  default:
    return k.i64;
  }
}

int GraphLowering::boundaryConversion(Location loc, const std::string &node,
                                      int from, const std::string &name,
                                      plan::ElemType to, std::string kernel,
                                      std::string precision,
                                      std::function<Value(KB &, Value)> fn) {
  std::vector<int64_t> shape = tensors[from].desc.shape;
  int t = to == plan::ElemType::F32
              ? newTensor(name, shape, false, plan::Layout::Plain)
              : newIntTensor(name, shape, to);
  int64_t n = product(shape);
  addLayer(loc, node, "Cast", std::move(kernel), std::move(precision), false, 0,
           {from}, {t}, [=](KB &k) {
             const plan::TensorDesc &F = tensors[from].desc,
                                    &T = tensors[t].desc;
             Type ft = storedScalarType(k, F.type);
             k.loop(k.c(0), k.c(n), 1, [&](Value i) {
               Value x = k.load(ft, k.at(F.offset, i, plan::elemSize(F.type)));
               k.store(fn(k, x), k.at(T.offset, i, plan::elemSize(T.type)));
             });
           });
  return t;
}

int GraphLowering::inputAsHeld(int raw, Type type, const std::string &name,
                               Location loc) {
  if (type.isF64()) // rounded to nearest
    return boundaryConversion(
        loc, name, raw, name + " (as f32)", plan::ElemType::F32, "f64-to-f32",
        "fp32", [](KB &k, Value x) -> Value {
          return k.b.create<arith::TruncFOp>(k.loc, k.f32, x);
        });
  if (type.isInteger(1))
    return boundaryConversion(
        loc, name, raw, name + " (as f32)", plan::ElemType::F32, "bool-to-f32",
        "fp32", [](KB &k, Value b) -> Value {
          Value set = k.b.create<arith::CmpIOp>(
              k.loc, arith::CmpIPredicate::ne, b,
              k.b.create<arith::ConstantIntOp>(k.loc, 0, 8));
          return k.select(set, k.cf(1.f), k.cf(0.f));
        });
  plan::ElemType held = heldIntType(type);
  bool isSigned = !type.isUnsignedInteger();
  return boundaryConversion(
      loc, name, raw, name + " (held)", held, "widen-int", "int",
      [=](KB &k, Value x) -> Value {
        x = isSigned ? Value(k.b.create<arith::ExtSIOp>(k.loc, k.i64, x))
                     : Value(k.b.create<arith::ExtUIOp>(k.loc, k.i64, x));
        return held == plan::ElemType::I64
                   ? x
                   : Value(k.b.create<arith::TruncIOp>(k.loc, k.i32, x));
      });
}

int GraphLowering::heldAsOutput(int t, Type type, Location loc) {
  std::string name = tensors[t].desc.name;
  if (type.isF64())
    return boundaryConversion(
        loc, name, t, name, plan::ElemType::F64, "f32-to-f64", "fp32",
        [](KB &k, Value x) -> Value {
          return k.b.create<arith::ExtFOp>(k.loc, k.b.getF64Type(), x);
        });
  if (type.isInteger(1))
    return boundaryConversion(
        loc, name, t, name, plan::ElemType::Bool, "f32-to-bool", "fp32",
        [](KB &k, Value f) -> Value {
          Value set = k.b.create<arith::CmpFOp>(
              k.loc, arith::CmpFPredicate::UNE, f, k.cf(0.f));
          return k.b.create<arith::ExtUIOp>(k.loc, k.i8, set);
        });
  plan::ElemType out = boundaryIntType(type);
  return boundaryConversion(
      loc, name, t, name, out, "narrow-int", "int",
      [=](KB &k, Value x) -> Value {
        if (x.getType() != k.i64)
          x = k.b.create<arith::ExtSIOp>(k.loc, k.i64, x);
        Type st = storedScalarType(k, out);
        return st == k.i64 ? x
                           : Value(k.b.create<arith::TruncIOp>(k.loc, st, x));
      });
}

LogicalResult GraphLowering::run() {
  // Graph inputs: plain, as the user gives them.
  std::vector<std::string> inNames = ref::getInputNames(func);
  // A model without inputs (every input frozen: its outputs are constants)
  // still gets a plan: its layers copy the constants out.
  for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    // f32 data, int32 / int64 indices (token ids, masks), bool, or
    // narrower integers (held as int32 / int64 inside).
    Type elt = type ? type.getElementType() : Type();
    if (!type || !isCompiledType(elt) || isa<quant::QuantizedType>(elt))
      return func.emitError("qatc compiles models with f32, f64, integer (8 "
                            "to 64 bits, but not uint64) and bool inputs; "
                            "input ")
             << i << " is " << arg.getType();
    if (type.getNumElements() == 0)
      return func.emitError("qatc compiles models whose inputs have elements; "
                            "input ")
             << i << " is " << arg.getType();
    std::string name =
        i < inNames.size() ? inNames[i] : "input" + std::to_string(i);
    // The type the model declares (f64 where `func` holds f32).
    Type declared = getElementTypeOrSelf(modelType.getInput(i));
    bool boolean = elt.isInteger(1), narrow = narrowInt(elt).has_value();
    bool f64 = declared.isF64();
    int t;
    if (boolean)
      t = newIntTensor(name, type.getShape(), plan::ElemType::Bool);
    else if (f64)
      t = newIntTensor(name, type.getShape(), plan::ElemType::F64);
    else if (isa<IntegerType>(elt))
      t = newIntTensor(name, type.getShape(), boundaryIntType(elt));
    else
      t = newTensor(name, type.getShape(), false, plan::Layout::Plain);
    storages[tensors[t].storage].first = -1;
    out.manifest.inputs.push_back(tensors[t].manifestIndex);
    // Bools are held as f32 0 / 1 inside the plan, narrow integers as int32
    // (uint32 as int64), f64 as f32.
    if (boolean || narrow || f64)
      t = inputAsHeld(t, declared, name, func.getLoc());
    valueTensor[arg] = t;
  }
  planConcatSlices();
  for (Operation &opRef : func.getBody().front()) {
    Operation *op = &opRef;
    if (folded.contains(op))
      continue;
    // Compiled tensors are f32, int8 (quantized), bool (held as f32 0 / 1)
    // or int32 / int64 (indices and what is computed from them; the
    // lowerings that take them say so, the others refuse them).
    if (!isa<onnx::ConstantOp, qat::ConstantOp, func::ReturnOp>(op))
      for (Value r : op->getResults()) {
        Type elt = getElementTypeOrSelf(r.getType());
        if (!isCompiledType(elt))
          return op->emitError("qatc compiles f32, bool, integer (8 to 64 "
                               "bits, but not uint64) and quantized int8 "
                               "tensors; this ")
                 << op->getName().stripDialect() << " produces " << elt
                 << " values at run time";
      }
    LogicalResult r =
        llvm::TypeSwitch<Operation *, LogicalResult>(op)
            .Case<onnx::ConstantOp, qat::ConstantOp>(
                [](Operation *) { return success(); })
            .Case<func::ReturnOp>([&](func::ReturnOp ret) -> LogicalResult {
              std::vector<std::string> names = ref::getOutputNames(func);
              for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
                int t = tensorOf(v);
                if (constantError)
                  return failure();
                if (tensors[t].int8)
                  return ret.emitError("qatc compiles models with float "
                                       "outputs only (output ")
                         << i << " is quantized)";
                t = inLayout(t, plan::Layout::Plain, ret.getLoc());
                Type elt = getElementTypeOrSelf(modelType.getResult(i));
                if (elt.isInteger(1) || narrowInt(elt) || elt.isF64())
                  t = heldAsOutput(t, elt, ret.getLoc());
                // A graph input or an earlier output returned again gets a
                // tensor of its own (its name is this output's).
                auto &io = out.manifest;
                int mi = tensors[t].manifestIndex;
                if (mi < 0 || llvm::is_contained(io.inputs, mi) ||
                    llvm::is_contained(io.outputs, mi)) {
                  CTensor copy = tensors[t];
                  int c = addTensor(copy);
                  std::vector<int64_t> shape = copy.desc.shape;
                  addLayer(ret.getLoc(), copy.desc.name, "Identity", "copy",
                           "fp32", false, 0, {t}, {c}, [=](KB &k) {
                             StridedMap m;
                             m.shape = shape;
                             m.out = operand(Src{c, -1, {}}, shape);
                             m.ins = {operand(Src{t, -1, {}}, shape)};
                             emitStridedMap(k, m, nullptr);
                           });
                  t = c;
                }
                Storage &s = storages[tensors[t].storage];
                s.last = 1 << 30;
                if (i < names.size()) {
                  tensors[t].desc.name = names[i];
                  out.manifest.tensors[tensors[t].manifestIndex].name =
                      names[i];
                }
                out.manifest.outputs.push_back(tensors[t].manifestIndex);
              }
              return success();
            })

            .Default([&](Operation *o) -> LogicalResult {
              // Each lowering file lowers the ops of its family.
              for (auto family : {&GraphLowering::lowerMapFamily,
                                  &GraphLowering::lowerPointwiseFamily,
                                  &GraphLowering::lowerConvFamily,
                                  &GraphLowering::lowerResampleFamily})
                if (std::optional<LogicalResult> r = (this->*family)(o))
                  return *r;
              return o->emitError("qatc cannot compile ")
                     << o->getName()
                     << " to native code yet (it runs in the reference "
                        "evaluator: qatc eval)";
            });
    if (failed(r) || constantError)
      return failure();
  }

  planArena();
  planBarriers();
  emitLayers();
  return success();
}

void GraphLowering::planArena() {
  // Storages are laid out centred on "centres", and storages alive at the
  // same time (graph inputs from before the first layer, outputs to the
  // end) never share one: largest first, each to the first centre it fits
  // in time. The threads split most layers' outputs into contiguous halves
  // (rows, pixels, batches), so below a centre thread 0 writes and above it
  // thread 1, whichever storage holds it: a layer rarely writes lines the
  // other core wrote last, each a transfer between the cores before the
  // write. First fit by address packed tighter but mixed the halves (2
  // threads: ShuffleNetV2 int8 0.915 of its time, the transformer encoder
  // 0.973, MobileNetV2 0.974; 1 thread within 2 %; arenas 5-40 % larger).
  std::vector<int> order(storages.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return storages[a].bytes > storages[b].bytes;
  });
  struct Centre {
    int64_t width = 0;
    std::vector<int> members;
  };
  std::vector<Centre> centres;
  for (int s : order) {
    const Storage &st = storages[s];
    if (st.last < 0 && st.first > 0)
      continue; // never used
    auto fits = [&](const Centre &c) {
      return llvm::none_of(c.members, [&](int m) {
        return storages[m].first <= st.last && st.first <= storages[m].last;
      });
    };
    auto it = llvm::find_if(centres, fits);
    if (it == centres.end())
      it = centres.insert(centres.end(), Centre());
    it->members.push_back(s);
    it->width = std::max(it->width, st.bytes);
  }
  uint64_t arena = 0;
  for (const Centre &c : centres) {
    const int64_t half = roundUp((c.width + 1) / 2, 64);
    for (int m : c.members)
      storages[m].offset =
          arena + half - roundUp((storages[m].bytes + 1) / 2, 64);
    arena += 2 * half;
  }
  out.manifest.arenaBytes = roundUp(arena, 64);
  for (CTensor &t : tensors) {
    t.desc.offset = storages[t.storage].offset + t.storageOffset;
    if (t.manifestIndex >= 0) {
      out.manifest.tensors[t.manifestIndex].offset = t.desc.offset;
      out.manifest.tensors[t.manifestIndex].bytes =
          storages[t.storage].bytes - t.storageOffset;
    }
  }
}

void GraphLowering::planBarriers() {
  // Whole storages: a kernel may read past its tensor into the storage's
  // slack (tile loads past the last pixel), and a view is part of one.
  // Storages whose lifetimes meet share bytes (planArena), so a layer
  // writing where the one before it read still waits; padding the
  // lifetimes by a layer to avoid that grew the arenas by 14-36 % (the
  // transformer 88 -> 120 KiB) for 2-4 barriers fewer per model.
  auto ranges = [&](const std::vector<int> &used,
                    std::vector<std::pair<int64_t, int64_t>> &out) {
    for (int s : used)
      out.push_back(
          {storages[s].offset,
           storages[s].offset + std::max<int64_t>(storages[s].bytes, 1)});
  };
  std::vector<LayerAccess> access(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    access[i].parallel = layers[i].desc.parallel;
    ranges(layers[i].reads, access[i].reads);
    ranges(layers[i].writes, access[i].writes);
  }
  std::vector<bool> meet = barriersBefore(access);
  for (size_t i = 0; i < layers.size(); ++i)
    layers[i].desc.sync = meet[i];
}

void GraphLowering::emitLayers() {
  MLIRContext *ctx = func.getContext();
  OpBuilder b(ctx);
  out.kernels = ModuleOp::create(func.getLoc());
  b.setInsertionPointToEnd(out.kernels->getBody());
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  auto fnType =
      b.getFunctionType({ptr, ptr, b.getI64Type(), b.getI64Type()}, {});
  for (Layer &l : layers) {
    auto fn = b.create<func::FuncOp>(l.loc, l.desc.symbol, fnType);
    // For IR dumps and lit tests: the kernel the manifest names.
    fn->setAttr("qatc.kernel", b.getStringAttr(l.desc.kernel));
    if (!l.desc.sync)
      fn->setAttr("qatc.sync", b.getBoolAttr(false));
    Block *entry = fn.addEntryBlock();
    OpBuilder fb = OpBuilder::atBlockBegin(entry);
    KB k(fb, l.loc, entry->getArgument(0), entry->getArgument(1),
         entry->getArgument(2), entry->getArgument(3));
    k.avx512 = hasAvx512(target.isa);
    k.hasFma = target.isa != Isa::Generic;
    k.reciprocalDivision = target.reciprocalDivision;
    l.emit(k);
    fb.create<func::ReturnOp>(l.loc);
    out.manifest.layers.push_back(l.desc);
  }
}

} // namespace qatc::codegen::lowering

namespace {

Type demotedType(Type t) {
  auto shaped = dyn_cast<ShapedType>(t);
  if (shaped && shaped.getElementType().isF64())
    return shaped.clone(Float32Type::get(t.getContext()));
  return t;
}

/// Retypes every f64 value of `func` (a copy of the model's function) to
/// f32, converting f64 constants: plans compute f64 models in f32.
void demoteF64(func::FuncOp func) {
  Block &body = func.getBody().front();
  for (BlockArgument arg : body.getArguments())
    arg.setType(demotedType(arg.getType()));
  func.walk([&](Operation *op) {
    if (auto c = dyn_cast<onnx::ConstantOp>(op)) {
      auto type = dyn_cast<RankedTensorType>(c.getType());
      if (type && type.getElementType().isF64()) {
        auto t = lowering::constantOf(c.getResult());
        std::vector<float> values;
        for (int64_t i = 0; i < t->numElements(); ++i)
          values.push_back(static_cast<float>(t->data<double>()[i]));
        auto f32 = cast<RankedTensorType>(demotedType(type));
        c.setValueAttr(DenseElementsAttr::get(f32, ArrayRef<float>(values)));
      }
    }
    for (Value r : op->getResults())
      r.setType(demotedType(r.getType()));
  });
  SmallVector<Type> results;
  for (Type t : func.getResultTypes())
    results.push_back(demotedType(t));
  func.setFunctionType(
      FunctionType::get(func.getContext(), body.getArgumentTypes(), results));
}

bool isF64Tensor(Type t) { return getElementTypeOrSelf(t).isF64(); }

} // namespace

bool qatc::codegen::computesF64(func::FuncOp func) {
  bool any = false;
  func.walk([&](Operation *op) {
    for (Value r : op->getResults())
      any |= isF64Tensor(r.getType());
  });
  return any || llvm::any_of(func.getArgumentTypes(), isF64Tensor);
}

LogicalResult qatc::codegen::lowerGraph(func::FuncOp func, const Target &target,
                                        LoweredGraph &out) {
  MLIRContext *ctx = func.getContext();
  ctx->loadDialect<func::FuncDialect, arith::ArithDialect, scf::SCFDialect,
                   vector::VectorDialect, math::MathDialect,
                   LLVM::LLVMDialect>();
  out.manifest.target = target.name;
  out.manifest.compiler = compilerVersion();
  // f64 tensors are held as f32 (as TensorRT does): a copy of the function
  // computes in f32, and its f64 inputs and outputs convert at the boundary.
  FunctionType modelType = func.getFunctionType();
  OwningOpRef<func::FuncOp> demoted;
  if (computesF64(func)) {
    demoted = func.clone();
    demoteF64(*demoted);
    func = *demoted;
  }
  lowering::GraphLowering lowering(func, modelType, target, out);
  return lowering.run();
}
