//===- GraphLowering.cpp - a qat/onnx function to layer functions ---------===//
//
// The walk over the function, the tensors (storage, layouts, views,
// constants), the layers and the arena plan. See GraphLowering.h.
//
//===----------------------------------------------------------------------===//

#include "GraphLowering.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

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
    t.desc.type = plan::ElemType::U8;
    t.desc.quantized = true;
    t.desc.isSigned = q.type.isSigned();
    t.desc.storedOffset = q.type.isSigned() ? 128 : 0;
    t.desc.scale = q.scales[0];
    t.desc.zeroPoint = q.zeroPoints[0];
    t.scale = static_cast<float>(q.scales[0]);
    t.zp = q.zeroPoints[0] + t.desc.storedOffset;
    t.qmin = q.qmin + t.desc.storedOffset;
    t.qmax = q.qmax + t.desc.storedOffset;
  } else {
    t.desc.type = plan::ElemType::F32;
  }
  if (layout == plan::Layout::NHWC)
    t.desc.channelStride = int8 ? roundUp(t.channels(), 4) : t.channels();
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
  auto use = [&](const std::vector<int> &list, std::vector<int> &manifest) {
    for (int t : list) {
      Storage &s = storages[tensors[t].storage];
      s.first = std::min(s.first, index);
      s.last = std::max(s.last, index);
      if (tensors[t].manifestIndex >= 0)
        manifest.push_back(tensors[t].manifestIndex);
    }
  };
  use(inputs, l.desc.inputs);
  use(outputs, l.desc.outputs);
  layers.push_back(std::move(l));
}

int GraphLowering::inLayout(int t, plan::Layout want, Location loc) {
  const CTensor &src = tensors[t];
  if (!src.view && src.desc.layout == want && !src.flat)
    return t;
  if (!src.view && src.desc.shape.size() == 2 && !src.flat &&
      (!src.int8 || src.desc.channelStride == src.dim(1)))
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
  copy.desc.channelStride =
      toNHWC ? (src.int8 ? roundUp(src.channels(), 4) : src.channels()) : 0;
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

/// The scalar body that is one op of `OpTy` on the (f32) operands.
template <typename OpTy> static ScalarFn binaryFn() {
  return [](KB &k, ArrayRef<Value> v) -> Value {
    return k.b.create<OpTy>(k.loc, v[0], v[1]);
  };
}

/// The axes a global pool averages: every axis after N and C.
static std::vector<int64_t> spatialAxes(Value v) {
  std::vector<int64_t> axes;
  for (int64_t d = 2; d < cast<ShapedType>(v.getType()).getRank(); ++d)
    axes.push_back(d);
  return axes;
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
      return func.emitError("qatc compiles models with f32, integer (8 to 64 "
                            "bits, but not uint64) and bool inputs; input ")
             << i << " is " << arg.getType();
    if (type.getNumElements() == 0)
      return func.emitError("qatc compiles models whose inputs have elements; "
                            "input ")
             << i << " is " << arg.getType();
    std::string name =
        i < inNames.size() ? inNames[i] : "input" + std::to_string(i);
    bool boolean = elt.isInteger(1), narrow = narrowInt(elt).has_value();
    int t;
    if (boolean)
      t = newIntTensor(name, type.getShape(), plan::ElemType::Bool);
    else if (isa<IntegerType>(elt))
      t = newIntTensor(name, type.getShape(), boundaryIntType(elt));
    else
      t = newTensor(name, type.getShape(), false, plan::Layout::Plain);
    storages[tensors[t].storage].first = -1;
    out.manifest.inputs.push_back(tensors[t].manifestIndex);
    // Bools are held as f32 0 / 1 inside the plan, narrow integers as int32
    // (uint32 as int64).
    if (boolean || narrow)
      t = inputAsHeld(t, elt, name, func.getLoc());
    valueTensor[arg] = t;
  }
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
            .Case<qat::QuantizeOp>([&](auto o) { return lowerQuantize(o); })
            .Case<qat::DequantizeOp>([&](auto o) { return lowerDequantize(o); })
            .Case<qat::RequantizeOp>([&](auto o) { return lowerRequantize(o); })
            .Case<qat::ConvOp>([&](auto o) { return lowerQatConv(o); })
            .Case<qat::MatMulOp>([&](auto o) { return lowerQatMatMul(o); })
            .Case<qat::AddOp>([&](auto o) {
              return lowerElementwise(o, o.getLhs(), o.getRhs(), false,
                                      o.getActivation());
            })
            .Case<qat::MulOp>([&](auto o) {
              return lowerElementwise(o, o.getLhs(), o.getRhs(), true,
                                      o.getActivation());
            })
            .Case<qat::ClampOp>([&](auto o) {
              int64_t so = tensors[tensorOf(o.getInput())].desc.storedOffset;
              return lowerClamp(o, o.getInput(), double(o.getMin() + so),
                                double(o.getMax() + so));
            })
            .Case<qat::MaxPoolOp>([&](auto o) {
              return lowerPool(o, o.getInput(), o.getKernelShape(),
                               o.getStrides(), o.getPads(), o.getDilations());
            })
            .Case<onnx::MaxPoolOp>([&](auto o) {
              return lowerPool(o, o.getX(), o.getKernelShape(), o.getStrides(),
                               o.getPads(), o.getDilations());
            })
            .Case<qat::AvgPoolOp>([&](auto o) {
              return lowerPool(o, o.getInput(), o.getKernelShape(),
                               o.getStrides(), o.getPads(), {}, true,
                               o.getCountIncludePad() != 0);
            })
            .Case<onnx::AveragePoolOp>([&](auto o) {
              return lowerPool(o, o.getX(), o.getKernelShape(), o.getStrides(),
                               o.getPads(), o.getDilations(), true,
                               o.getCountIncludePad() != 0);
            })
            .Case<qat::GlobalAvgPoolOp>([&](auto o) {
              return lowerMean(o, o.getInput(), spatialAxes(o.getInput()));
            })
            .Case<onnx::GlobalAveragePoolOp>([&](auto o) {
              return lowerMean(o, o.getX(), spatialAxes(o.getX()));
            })
            .Case<onnx::ReduceMeanOp>(
                [&](auto o) { return lowerMean(o, o.getData(), o.getAxes()); })
            .Case<onnx::ReduceSumOp>([&](auto o) {
              return lowerReduce(o, o.getData(), o.getAxes(), ReduceKind::Sum);
            })
            .Case<onnx::ReduceMaxOp>([&](auto o) {
              return lowerReduce(o, o.getData(), o.getAxes(), ReduceKind::Max);
            })
            .Case<onnx::ReduceMinOp>([&](auto o) {
              return lowerReduce(o, o.getData(), o.getAxes(), ReduceKind::Min);
            })
            .Case<onnx::ReduceProdOp>([&](auto o) {
              return lowerReduce(o, o.getData(), o.getAxes(), ReduceKind::Prod);
            })
            .Case<onnx::ReduceL1Op>([&](auto o) {
              return lowerReduce(o, o.getData(), o.getAxes(), ReduceKind::L1);
            })
            .Case<onnx::ReduceL2Op>([&](auto o) {
              return lowerReduce(o, o.getData(), o.getAxes(), ReduceKind::L2);
            })
            .Case<onnx::ReduceSumSquareOp>([&](auto o) {
              return lowerReduce(o, o.getData(), o.getAxes(),
                                 ReduceKind::SumSquare);
            })
            .Case<onnx::LogSoftmaxOp>(
                [&](auto o) { return lowerLogSoftmax(o); })
            .Case<onnx::ArgMaxOp, onnx::ArgMinOp>(
                [&](Operation *o) { return lowerArgReduce(o); })
            .Case<onnx::TopKOp>([&](auto o) { return lowerTopK(o); })
            .Case<onnx::EqualOp, onnx::LessOp, onnx::LessOrEqualOp,
                  onnx::GreaterOp, onnx::GreaterOrEqualOp>(
                [&](Operation *o) -> LogicalResult {
                  if (isIntegerValue(o->getOperand(0))) {
                    // Integer comparisons (of indices): int64, bool result.
                    arith::CmpIPredicate ip =
                        isa<onnx::EqualOp>(o)  ? arith::CmpIPredicate::eq
                        : isa<onnx::LessOp>(o) ? arith::CmpIPredicate::slt
                        : isa<onnx::LessOrEqualOp>(o)
                            ? arith::CmpIPredicate::sle
                        : isa<onnx::GreaterOp>(o) ? arith::CmpIPredicate::sgt
                                                  : arith::CmpIPredicate::sge;
                    return lowerIntMap(
                        o,
                        {intSrcOf(o->getOperand(0)),
                         intSrcOf(o->getOperand(1))},
                        "int-compare", [=](KB &k, ArrayRef<Value> v) -> Value {
                          Value c =
                              k.b.create<arith::CmpIOp>(k.loc, ip, v[0], v[1]);
                          return k.select(c, k.cf(1.f), k.cf(0.f));
                        });
                  }
                  // Bool results are f32 0 / 1.
                  arith::CmpFPredicate pred =
                      isa<onnx::EqualOp>(o)         ? arith::CmpFPredicate::OEQ
                      : isa<onnx::LessOp>(o)        ? arith::CmpFPredicate::OLT
                      : isa<onnx::LessOrEqualOp>(o) ? arith::CmpFPredicate::OLE
                      : isa<onnx::GreaterOp>(o)     ? arith::CmpFPredicate::OGT
                                                    : arith::CmpFPredicate::OGE;
                  return lowerBinary(
                      o, "compare", [=](KB &k, ArrayRef<Value> v) -> Value {
                        Value c =
                            k.b.create<arith::CmpFOp>(k.loc, pred, v[0], v[1]);
                        return k.select(c, k.cf(1.f), k.cf(0.f));
                      });
                })
            .Case<onnx::CastOp>([&](onnx::CastOp o) -> LogicalResult {
              Type from = getElementTypeOrSelf(o.getInput().getType());
              Type to = getElementTypeOrSelf(o.getType());
              // Bool is held as f32 0 / 1: to f32 it is the same bytes.
              if ((from.isF32() || from.isInteger(1)) && to.isF32()) {
                valueTensor[o.getResult()] = tensorOf(o.getInput());
                return success();
              }
              if (from.isF32() && to.isInteger(1))
                return lowerUnary(o, "to-bool", [](KB &k, ArrayRef<Value> v) {
                  Value c = k.b.create<arith::CmpFOp>(
                      k.loc, arith::CmpFPredicate::UNE, v[0], k.cf(0.f));
                  return k.select(c, k.cf(1.f), k.cf(0.f));
                });
              bool fromInt = isIntegerValue(o.getInput()),
                   toInt = isIntegerValue(o.getResult());
              if ((fromInt || from.isF32() || from.isInteger(1)) &&
                  (toInt || to.isF32() || to.isInteger(1))) {
                // Integers through int64: f32 to integers truncates toward
                // zero (ONNX), integers to bool compare with 0.
                bool toBool = to.isInteger(1);
                return lowerIntMap(
                    o, {fromInt ? intSrcOf(o.getInput()) : srcOf(o.getInput())},
                    "cast", [=](KB &k, ArrayRef<Value> v) -> Value {
                      OpBuilder &b = k.b;
                      Value x = v[0];
                      if (x.getType() == k.f32)
                        return b.create<arith::FPToSIOp>(k.loc, k.i64, x);
                      if (toBool) {
                        Value c = b.create<arith::CmpIOp>(
                            k.loc, arith::CmpIPredicate::ne, x, k.c(0));
                        return k.select(c, k.cf(1.f), k.cf(0.f));
                      }
                      if (!toInt)
                        return b.create<arith::SIToFPOp>(k.loc, k.f32, x);
                      return x;
                    });
              }
              return o.emitError("qatc compiles Cast between f32, bool, "
                                 "int32 and int64 only; this one casts ")
                     << from << " to " << to;
            })
            .Case<onnx::NotOp>([&](auto o) {
              return lowerUnary(o, "not", [](KB &k, ArrayRef<Value> v) {
                return k.b.create<arith::SubFOp>(k.loc, k.cf(1.f), v[0]);
              });
            })
            .Case<onnx::AndOp>([&](auto o) {
              return lowerBinary(o, "and", binaryFn<arith::MulFOp>());
            })
            .Case<onnx::OrOp>([&](auto o) {
              return lowerBinary(o, "or", binaryFn<arith::MaximumFOp>());
            })
            .Case<onnx::XorOp>([&](auto o) {
              return lowerBinary(o, "xor", [](KB &k, ArrayRef<Value> v) {
                Value c = k.b.create<arith::CmpFOp>(
                    k.loc, arith::CmpFPredicate::ONE, v[0], v[1]);
                return k.select(c, k.cf(1.f), k.cf(0.f));
              });
            })
            .Case<onnx::WhereOp>([&](auto o) -> LogicalResult {
              if (isIntegerValue(o.getResult()))
                return lowerIntMap(
                    o,
                    {srcOf(o.getCondition()), intSrcOf(o.getX()),
                     intSrcOf(o.getY())},
                    "int-where", [](KB &k, ArrayRef<Value> v) -> Value {
                      Value c = k.b.create<arith::CmpFOp>(
                          k.loc, arith::CmpFPredicate::ONE, v[0], k.cf(0.f));
                      return k.select(c, v[1], v[2]);
                    });
              return lowerMap(
                  o,
                  {srcOf(o.getCondition()), srcOf(o.getX()), srcOf(o.getY())},
                  "where", [](KB &k, ArrayRef<Value> v) -> Value {
                    Value c = k.b.create<arith::CmpFOp>(
                        k.loc, arith::CmpFPredicate::ONE, v[0], k.cf(0.f));
                    return k.select(c, v[1], v[2]);
                  });
            })
            .Case<onnx::SigmoidOp, onnx::HardSigmoidOp, onnx::HardSwishOp,
                  onnx::ErfOp, onnx::TanhOp, onnx::ExpOp, onnx::SqrtOp,
                  onnx::LeakyReluOp, onnx::LogOp, onnx::AbsOp, onnx::NegOp,
                  onnx::ReciprocalOp, onnx::FloorOp, onnx::CeilOp,
                  onnx::RoundOp, onnx::SignOp, onnx::SoftplusOp, onnx::EluOp,
                  onnx::PReluOp, onnx::ScalarMathOpInterface>(
                [&](Operation *o) { return lowerPointwise(o); })
            .Case<qat::ConcatOp>([&](auto o) {
              return lowerConcat(o, o.getInputs(), o.getAxis());
            })
            .Case<onnx::ConcatOp>([&](auto o) {
              return lowerConcat(o, o.getInputs(), o.getAxis());
            })
            .Case<qat::TransposeOp>([&](auto o) {
              return lowerTranspose(o, o.getInput(), o.getPerm());
            })
            .Case<onnx::TransposeOp>([&](auto o) {
              return lowerTranspose(o, o.getData(), o.getPerm());
            })
            .Case<qat::SliceOp>([&](auto o) {
              return lowerSlice(o, o.getInput(), o.getStarts(), o.getSteps());
            })
            .Case<onnx::SliceOp>([&](auto o) {
              return lowerSlice(o, o.getData(), o.getStarts(), o.getSteps());
            })
            .Case<onnx::PadOp, qat::PadOp>(
                [&](Operation *o) { return lowerPad(o); })
            .Case<onnx::ResizeOp>(
                [&](auto o) { return lowerResize(o, o.getX()); })
            .Case<qat::ResizeOp>(
                [&](auto o) { return lowerResize(o, o.getInput()); })
            .Case<onnx::GatherOp>([&](auto o) {
              return lowerGather(o, o.getData(), o.getIndices(), o.getAxis());
            })
            .Case<onnx::GatherElementsOp>(
                [&](auto o) { return lowerGatherElements(o); })
            .Case<qat::GatherOp>([&](auto o) {
              return lowerGather(o, o.getInput(), o.getIndices(), o.getAxis());
            })
            .Case<onnx::DepthToSpaceOp, onnx::SpaceToDepthOp>(
                [&](Operation *o) { return lowerDepthSpace(o); })
            .Case<onnx::TileOp>([&](auto o) { return lowerTile(o); })
            .Case<onnx::ExpandOp>([&](auto o) { return lowerExpand(o); })
            .Case<onnx::BatchNormalizationOp>(
                [&](auto o) { return lowerBatchNorm(o); })
            .Case<onnx::SoftmaxOp>([&](auto o) { return lowerSoftmax(o); })
            .Case<onnx::LayerNormalizationOp>(
                [&](auto o) { return lowerLayerNorm(o); })
            .Case<onnx::PowOp>([&](auto o) { return lowerPow(o); })
            .Case<onnx::AddOp, onnx::SubOp, onnx::MulOp, onnx::DivOp,
                  onnx::ModOp, onnx::MaxOp, onnx::MinOp>([&](Operation *o)
                                                             -> LogicalResult {
              if (!isIntegerValue(o->getResult(0)))
                return lowerPointwise(o);
              // Integer arithmetic on indices, in int64 (ONNX Div
              // truncates, Mod without fmod takes the divisor's sign).
              bool fmod = false;
              if (auto m = dyn_cast<onnx::ModOp>(o))
                fmod = m.getFmod() != 0;
              return lowerIntMap(
                  o, {intSrcOf(o->getOperand(0)), intSrcOf(o->getOperand(1))},
                  "int-" + o->getName().stripDialect().lower(),
                  [o, fmod](KB &k, ArrayRef<Value> v) -> Value {
                    OpBuilder &b = k.b;
                    Value x = v[0], y = v[1];
                    if (isa<onnx::AddOp>(o))
                      return b.create<arith::AddIOp>(k.loc, x, y);
                    if (isa<onnx::SubOp>(o))
                      return b.create<arith::SubIOp>(k.loc, x, y);
                    if (isa<onnx::MulOp>(o))
                      return b.create<arith::MulIOp>(k.loc, x, y);
                    if (isa<onnx::MaxOp>(o))
                      return b.create<arith::MaxSIOp>(k.loc, x, y);
                    if (isa<onnx::MinOp>(o))
                      return b.create<arith::MinSIOp>(k.loc, x, y);
                    // Division by 0 (and by -1, for Mod) gives 0, as
                    // the reference.
                    Value zero = k.c(0);
                    Value bad = b.create<arith::CmpIOp>(
                        k.loc, arith::CmpIPredicate::eq, y, zero);
                    if (isa<onnx::ModOp>(o))
                      bad = b.create<arith::OrIOp>(
                          k.loc, bad,
                          b.create<arith::CmpIOp>(
                              k.loc, arith::CmpIPredicate::eq, y, k.c(-1)));
                    Value safe = k.select(bad, k.c(1), y);
                    if (isa<onnx::DivOp>(o))
                      return k.select(bad, zero,
                                      b.create<arith::DivSIOp>(k.loc, x, safe));
                    Value r = b.create<arith::RemSIOp>(k.loc, x, safe);
                    if (!fmod) {
                      // r != 0 and sign(r) != sign(y): r + y.
                      Value rneg = b.create<arith::CmpIOp>(
                          k.loc, arith::CmpIPredicate::slt, r, zero);
                      Value yneg = b.create<arith::CmpIOp>(
                          k.loc, arith::CmpIPredicate::slt, safe, zero);
                      Value nz = b.create<arith::CmpIOp>(
                          k.loc, arith::CmpIPredicate::ne, r, zero);
                      Value differ = b.create<arith::AndIOp>(
                          k.loc, nz,
                          b.create<arith::XOrIOp>(k.loc, rneg, yneg));
                      r = k.select(differ,
                                   b.create<arith::AddIOp>(k.loc, r, safe), r);
                    }
                    return k.select(bad, zero, r);
                  });
            })
            .Case<onnx::SplitOp>([&](onnx::SplitOp o) -> LogicalResult {
              // Every piece is a slice view of the input.
              int in = tensorOf(o.getInput());
              int64_t rank = cast<ShapedType>(o.getInput().getType()).getRank(),
                      axis = static_cast<int64_t>(o.getAxis());
              if (axis < 0)
                axis += rank;
              std::vector<int64_t> st = stridesOf(tensors[in]);
              int64_t base = tensors[in].view ? tensors[in].vbase : 0;
              for (Value r : o.getResults()) {
                makeView(in, r, st, base);
                base +=
                    cast<ShapedType>(r.getType()).getDimSize(axis) * st[axis];
              }
              return success();
            })
            .Case<onnx::IdentityOp>([&](auto o) {
              valueTensor[o->getResult(0)] = tensorOf(o->getOperand(0));
              return success();
            })
            .Case<onnx::SqueezeOp, onnx::UnsqueezeOp>(
                [&](Operation *o) { return lowerReshape(o, o->getOperand(0)); })
            .Case<qat::ReshapeOp>([&](auto o) {
              if (auto r = tryZeroInsertion(o))
                return *r;
              return lowerReshape(o, o.getInput());
            })
            .Case<onnx::FlattenOp>(
                [&](auto o) { return lowerReshape(o, o.getInput()); })
            .Case<onnx::ReshapeOp>([&](auto o) {
              if (auto r = tryZeroInsertion(o))
                return *r;
              return lowerReshape(o, o.getData());
            })
            .Case<onnx::ConvOp>([&](auto o) { return lowerFloatConv(o); })
            .Case<onnx::GemmOp>([&](auto o) { return lowerGemm(o); })
            .Case<onnx::MatMulOp>([&](auto o) { return lowerFloatMatMul(o); })
            .Case<onnx::ReluOp>([&](auto o) {
              if (auto fusedMap = tryFusedMap(o))
                return *fusedMap;
              return lowerClamp(o, o.getX(), 0.0,
                                std::numeric_limits<double>::infinity());
            })
            .Case<onnx::ClipOp>([&](auto o) {
              if (isIntegerValue(o.getX())) {
                // Integers clamp exactly (bounds are whole numbers of the
                // data's type).
                std::optional<int64_t> lo, hi;
                if (o.getMin())
                  lo = static_cast<int64_t>(o.getMin()->convertToDouble());
                if (o.getMax())
                  hi = static_cast<int64_t>(o.getMax()->convertToDouble());
                return lowerIntMap(
                    o, {intSrcOf(o.getX())}, "clip",
                    [=](KB &k, ArrayRef<Value> v) -> Value {
                      Value x = v[0];
                      if (lo)
                        x = k.b.create<arith::MaxSIOp>(k.loc, x, k.c(*lo));
                      if (hi)
                        x = k.b.create<arith::MinSIOp>(k.loc, x, k.c(*hi));
                      return x;
                    });
              }
              if (auto fusedMap = tryFusedMap(o))
                return *fusedMap;
              double inf = std::numeric_limits<double>::infinity();
              return lowerClamp(
                  o, o.getX(),
                  o.getMin() ? o.getMin()->convertToDouble() : -inf,
                  o.getMax() ? o.getMax()->convertToDouble() : inf);
            })
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
                Type elt = getElementTypeOrSelf(v.getType());
                if (elt.isInteger(1) || narrowInt(elt))
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
            .Default([](Operation *o) {
              return o->emitError("qatc cannot compile ")
                     << o->getName()
                     << " to native code yet (it runs in the reference "
                        "evaluator: qatc eval)";
            });
    if (failed(r) || constantError)
      return failure();
  }

  planArena();
  emitLayers();
  return success();
}

void GraphLowering::planArena() {
  // Greedy by size, first fit against storages alive at the same time
  // (graph inputs from before the first layer, outputs to the end).
  std::vector<int> order(storages.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return storages[a].bytes > storages[b].bytes;
  });
  std::vector<int> placed;
  uint64_t arena = 0;
  for (int s : order) {
    Storage &st = storages[s];
    if (st.last < 0 && st.first > 0)
      continue; // never used
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int p : placed) {
      const Storage &o = storages[p];
      if (o.first <= st.last && st.first <= o.last)
        busy.push_back({o.offset, o.offset + o.bytes});
    }
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (auto [b, e] : busy) {
      if (off + st.bytes <= b)
        break;
      off = std::max(off, roundUp(e, 64));
    }
    st.offset = off;
    arena = std::max<uint64_t>(arena, off + st.bytes);
    placed.push_back(s);
  }
  out.manifest.arenaBytes = roundUp(arena, 64);
  for (CTensor &t : tensors) {
    t.desc.offset = storages[t.storage].offset;
    if (t.manifestIndex >= 0) {
      out.manifest.tensors[t.manifestIndex].offset = t.desc.offset;
      out.manifest.tensors[t.manifestIndex].bytes = storages[t.storage].bytes;
    }
  }
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
    Block *entry = fn.addEntryBlock();
    OpBuilder fb = OpBuilder::atBlockBegin(entry);
    KB k(fb, l.loc, entry->getArgument(0), entry->getArgument(1),
         entry->getArgument(2), entry->getArgument(3));
    k.avx512 = target.isa == Isa::AVX512VNNI;
    l.emit(k);
    fb.create<func::ReturnOp>(l.loc);
    out.manifest.layers.push_back(l.desc);
  }
}

} // namespace qatc::codegen::lowering

LogicalResult qatc::codegen::lowerGraph(func::FuncOp func, const Target &target,
                                        LoweredGraph &out) {
  MLIRContext *ctx = func.getContext();
  ctx->loadDialect<func::FuncDialect, arith::ArithDialect, scf::SCFDialect,
                   vector::VectorDialect, math::MathDialect,
                   LLVM::LLVMDialect>();
  out.manifest.target = target.name;
  out.manifest.compiler = compilerVersion();
  lowering::GraphLowering lowering(func, target, out);
  return lowering.run();
}
