//===- GraphLowering.cpp - a qat/onnx function to layer functions ---------===//
//
// Walks the function after `qat-lower` in order and gives each op a layer:
// a kernel spec, the tensors it reads and writes, and the packed constants
// it needs. Activations are NHWC inside the graph (channels padded to a
// multiple of 4 for int8 so that 4 input channels form one VNNI dword);
// layout conversions are layers of their own, inserted only where a graph
// input or output, or a reshape, needs the plain ONNX order. Quantized
// tensors are held as u8 with an offset (s8 + 128), so every int8 kernel
// reads unsigned activations. The arena is planned once all lifetimes are
// known; then every layer function is emitted with its final offsets.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "qatc/Dialect/Onnx/OnnxOps.h"
#include "qatc/Dialect/Qat/QatOps.h"
#include "qatc/Reference/Evaluator.h"
#include "qatc/Support/Locations.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace mlir;
using namespace qatc;
using namespace qatc::codegen;

namespace {

int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/// A tensor of the compiled graph: where and how it is stored.
struct CTensor {
  plan::TensorDesc desc;
  int storage = -1;
  int manifestIndex = -1;
  bool int8 = false; ///< stored as u8 (with desc.storedOffset)
  int64_t zp = 0, qmin = 0, qmax = 255; ///< stored domain
  float scale = 1;
  /// A rank-2 [N, C*H*W] view of rank-4 NHWC data (Flatten before a Gemm).
  bool flat = false;
  int64_t fC = 0, fH = 0, fW = 0, fCS = 0;

  int64_t dim(size_t i) const { return desc.shape[i]; }
  int64_t channels() const { return desc.shape.size() > 1 ? desc.shape[1] : 1; }
  /// Pixels (N*H*W, or M for rank 2) of an NHWC tensor.
  int64_t pixels() const {
    int64_t p = desc.shape[0];
    for (size_t i = 2; i < desc.shape.size(); ++i)
      p *= desc.shape[i];
    return p;
  }
};

struct Storage {
  int64_t bytes = 0;
  int first = 1 << 30, last = -1;
  int64_t offset = 0;
};

struct Layer {
  plan::LayerDesc desc;
  Location loc;
  std::function<void(KB &)> emit;
};

/// The values of a constant operand (onnx.Constant / qat.constant).
std::optional<ref::Tensor> constantOf(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return std::nullopt;
  ElementsAttr attr;
  if (auto c = dyn_cast<onnx::ConstantOp>(def))
    attr = dyn_cast<ElementsAttr>(c.getValue());
  else if (auto c = dyn_cast<qat::ConstantOp>(def))
    attr = c.getValue();
  if (!attr)
    return std::nullopt;
  return ref::constantValues(attr,
                             cast<ShapedType>(v.getType()).getElementType());
}

std::vector<float> floatsOf(const ref::Tensor &t) {
  std::vector<float> out(t.numElements());
  for (int64_t i = 0; i < t.numElements(); ++i)
    out[i] = t.dtype() == ref::DType::F64
                 ? static_cast<float>(t.data<double>()[i])
                 : t.data<float>()[i];
  return out;
}

int64_t intAt(const ref::Tensor &t, int64_t i) {
  switch (t.dtype()) {
  case ref::DType::I8:
    return t.data<int8_t>()[i];
  case ref::DType::U8:
    return t.data<uint8_t>()[i];
  case ref::DType::I32:
    return t.data<int32_t>()[i];
  default:
    return 0;
  }
}

/// The ONNX node a (possibly fused) location is mostly about: its first
/// node that is not a QuantizeLinear / DequantizeLinear.
std::optional<OnnxLocInfo> mainNode(Location loc) {
  auto infos = getOnnxLocInfos(loc);
  for (const OnnxLocInfo &i : infos)
    if (i.index >= 0 && i.kind != "QuantizeLinear" &&
        i.kind != "DequantizeLinear")
      return i;
  if (!infos.empty())
    return infos.front();
  return std::nullopt;
}

std::string nodeName(Location loc) {
  auto info = mainNode(loc);
  return info ? info->name : "?";
}

std::string opTypeOf(Location loc, Operation *op) {
  auto info = mainNode(loc);
  if (info && info->index >= 0)
    return info->kind;
  return op->getName().getStringRef().str();
}

class GraphLowering {
public:
  GraphLowering(func::FuncOp func, const Target &target, LoweredGraph &out)
      : func(func), target(target), out(out) {}
  LogicalResult run();

private:
  // Tensors and storage.
  /// Registers `t` with storage of its own, sized for its layout.
  int addTensor(CTensor t);
  int newTensor(std::string name, ArrayRef<int64_t> shape, bool int8,
                plan::Layout layout, Type quantType = {});
  /// The tensor of op result `res` (int8 when its type is quantized).
  int resultTensor(Value res, plan::Layout layout);
  int alias(int base, std::string name, ArrayRef<int64_t> shape);
  int tensorOf(Value v) { return valueTensor.lookup(v); }
  /// `t` in NHWC (converting a plain rank-4 tensor) or plain.
  int inLayout(int t, plan::Layout want, Location loc);
  std::string nameOf(Value v);
  int64_t addWeights(const void *data, size_t bytes);
  template <typename T> int64_t addArray(const std::vector<T> &v) {
    return addWeights(v.data(), v.size() * sizeof(T));
  }
  /// A per-channel f32 array padded for 16-lane loads past the last channel.
  int64_t addChannels(std::vector<float> v, int64_t channels) {
    v.resize(roundUp(channels, 64) + 16, 0.f);
    return addArray(v);
  }
  /// The per-channel values of constant `v` (a bias, a channel scale) in the
  /// weights blob, at `offset`.
  LogicalResult addChannelConstant(Operation *op, Value v, StringRef what,
                                   int64_t channels, int64_t &offset);
  /// The zero-point term -z_x * sum(w[c]) of every output channel, the
  /// int8 kernels' initial accumulators.
  int64_t addZeroPointTerms(int64_t channels, int64_t zx,
                            llvm::function_ref<int64_t(int64_t)> weightSum);
  int64_t padRow(bool int8, int64_t value, int64_t bytes);
  void addLayer(Location loc, std::string node, std::string opType,
                std::string kernel, std::string precision, bool parallel,
                int64_t macs, std::vector<int> inputs, std::vector<int> outputs,
                std::function<void(KB &)> emit);
  void addLayer(Operation *op, std::string kernel, std::string precision,
                bool parallel, int64_t macs, std::vector<int> inputs,
                std::vector<int> outputs, std::function<void(KB &)> emit) {
    addLayer(op->getLoc(), nodeName(op->getLoc()), opTypeOf(op->getLoc(), op),
             std::move(kernel), std::move(precision), parallel, macs,
             std::move(inputs), std::move(outputs), std::move(emit));
  }
  void fillEpilogueOut(Epilogue &ep, const CTensor &out);
  void fillActivation(Epilogue &ep, std::optional<qat::ClampAttr> act,
                      bool post);
  /// The epilogue of a qat.conv / qat.matmul with input `x`, weights `wl`
  /// and output tensor `o`: accumulator scales, bias, channel scale, clamps.
  template <typename OpTy>
  LogicalResult linearEpilogue(OpTy op, const CTensor &x,
                               const qat::QuantLayout &wl, int64_t channels,
                               int o, Epilogue &ep);
  /// A float Relu/Clip that is the only user of `v`: folded into its
  /// producer's epilogue (its result is the producer's tensor `o`).
  std::optional<std::pair<float, float>> foldActivation(Value v, int o);
  void foldActivation(Value v, int o, Epilogue &ep) {
    if (auto act = foldActivation(v, o)) {
      ep.hasAct = true;
      ep.actLo = act->first;
      ep.actHi = act->second;
    }
  }

  // Op handlers.
  LogicalResult lowerQuantize(qat::QuantizeOp op);
  LogicalResult lowerDequantize(qat::DequantizeOp op);
  LogicalResult lowerQatConv(qat::ConvOp op);
  LogicalResult lowerQatMatMul(qat::MatMulOp op);
  LogicalResult lowerElementwise(Operation *op, Value a, Value b, bool mul,
                                 std::optional<qat::ClampAttr> act);
  LogicalResult lowerClamp(Operation *op, Value in, double lo, double hi);
  LogicalResult lowerMaxPool(Operation *op, Value in, ArrayRef<int64_t> kernel,
                             ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                             ArrayRef<int64_t> dilations);
  LogicalResult lowerReshape(Operation *op, Value in);
  LogicalResult lowerFloatConv(onnx::ConvOp op);
  LogicalResult lowerGemm(onnx::GemmOp op);
  LogicalResult lowerGlobalAvgPool(onnx::GlobalAveragePoolOp op);

  /// A 2-D convolution, int8 or fp32, dense or depthwise, of input tensor
  /// `in` to `o`; `weight(i)` is element i of the [OC, IC/group, KH, KW]
  /// weight.
  LogicalResult lowerConv(Operation *op, bool int8, int in, int o,
                          ArrayRef<int64_t> wShape, int64_t group,
                          ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                          ArrayRef<int64_t> dilations, Epilogue ep,
                          int64_t corrOff, int residual,
                          std::function<double(int64_t)> weight);
  /// A dense convolution layer: packs `weightAt(oc, ic, kh, kw)` for the
  /// micro-kernel (zero beyond the real channels) and picks the tile.
  LogicalResult
  denseConv(Operation *op, DenseConvSpec s, int in, int outT,
            std::function<double(int64_t, int64_t, int64_t, int64_t)> weightAt,
            int residual);
  /// A matrix product of `in` ([M, K], or a flattened NHWC view) with the
  /// constant weight `weightAt(n, k)` (ONNX order) as a 1x1 convolution.
  LogicalResult matrixProduct(Operation *op, bool int8, int in, int o,
                              int64_t K, int64_t N, Epilogue ep,
                              int64_t corrOff,
                              std::function<double(int64_t, int64_t)> weightAt);

  // After the walk.
  void planArena();
  void emitLayers();

  func::FuncOp func;
  const Target &target;
  LoweredGraph &out;
  std::vector<CTensor> tensors;
  std::vector<Storage> storages;
  std::vector<Layer> layers;
  llvm::DenseMap<Value, int> valueTensor;
  std::map<std::pair<int, int>, int> converted;
  llvm::DenseSet<Operation *> folded;
};

/// Sets the window of `s` from NCHW shapes and ONNX attributes.
void setWindow(ConvSpec &s, ArrayRef<int64_t> inShape,
               ArrayRef<int64_t> outShape, int64_t KH, int64_t KW,
               ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
               ArrayRef<int64_t> dilations) {
  s.N = outShape[0];
  s.H = inShape[2];
  s.W = inShape[3];
  s.OH = outShape[2];
  s.OW = outShape[3];
  s.KH = KH;
  s.KW = KW;
  s.SH = strides[0];
  s.SW = strides[1];
  s.PT = pads[0];
  s.PL = pads[1];
  s.DH = dilations.empty() ? 1 : dilations[0];
  s.DW = dilations.empty() ? 1 : dilations[1];
}

/// The weights of a matrix product are symmetric (zero point 0).
LogicalResult requireSymmetric(Operation *op, const qat::QuantLayout &wl) {
  for (int64_t z : wl.zeroPoints)
    if (z != 0)
      return op->emitError("qatc needs symmetric weights (zero point 0); "
                           "this weight has zero point ")
             << z;
  return success();
}

/// The physical row length of a matrix product's input: the flattened NHWC
/// pixels x padded channels, or the (padded) row.
int64_t physicalK(const CTensor &x) {
  if (x.flat)
    return x.fH * x.fW * x.fCS;
  return x.desc.layout == plan::Layout::NHWC ? x.desc.channelStride : x.dim(1);
}

/// The ONNX (logical) column of physical column `kp` of `x`, or -1 for
/// padding.
int64_t logicalK(const CTensor &x, int64_t kp) {
  if (!x.flat)
    return kp < x.dim(1) ? kp : -1;
  int64_t pix = kp / x.fCS, c = kp % x.fCS;
  return c < x.fC ? c * x.fH * x.fW + pix : -1;
}

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

int GraphLowering::resultTensor(Value res, plan::Layout layout) {
  auto type = cast<RankedTensorType>(res.getType());
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
  std::vector<int32_t> corr(roundUp(channels, 64) + 16, 0);
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
  if (src.desc.layout == want && !src.flat)
    return t;
  if (src.desc.shape.size() == 2 && !src.flat &&
      (!src.int8 || src.desc.channelStride == src.dim(1)))
    return t; // identical bytes
  auto key = std::make_pair(t, static_cast<int>(want));
  if (auto it = converted.find(key); it != converted.end())
    return it->second;
  // The same tensor (name, type, quantization) in the other layout.
  CTensor copy = src;
  bool toNHWC = want == plan::Layout::NHWC;
  copy.desc.layout = want;
  copy.desc.channelStride =
      toNHWC ? (src.int8 ? roundUp(src.channels(), 4) : src.channels()) : 0;
  int res = addTensor(copy);
  converted[key] = res;
  const CTensor &r = tensors[res], &s = tensors[t];
  int64_t N = s.dim(0), C = s.channels(),
          HW = s.desc.shape.size() == 4 ? s.dim(2) * s.dim(3) : 1;
  int64_t cs = toNHWC ? r.desc.channelStride : s.desc.channelStride;
  int64_t es = plan::elemSize(s.desc.type);
  // A layer of its own, named after the op that needs the conversion.
  addLayer(loc, nodeName(loc) == "?" ? s.desc.name : nodeName(loc), "layout",
           toNHWC ? "nchw-to-nhwc" : "nhwc-to-nchw", "layout", false, 0, {t},
           {res}, [this, t, res, N, C, HW, cs, es, toNHWC](KB &k) {
             int64_t inOff = tensors[t].desc.offset,
                     outOff = tensors[res].desc.offset;
             Type type = es == 1 ? k.i8 : k.f32;
             k.loop(k.c(0), k.c(N * HW), 1, [&](Value p) {
               Value n = k.div(p, k.c(HW)), hw = k.rem(p, k.c(HW));
               k.loop(k.c(0), k.c(C), 1, [&](Value ch) {
                 Value plain =
                     k.add(k.mul(k.add(k.mul(n, k.c(C)), ch), k.c(HW)), hw);
                 Value nhwc = k.add(k.mul(p, k.c(cs)), ch);
                 Value v = k.load(type, k.at(inOff, toNHWC ? plain : nhwc, es));
                 k.store(v, k.at(outOff, toNHWC ? nhwc : plain, es));
               });
             });
           });
  return res;
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

template <typename OpTy>
LogicalResult GraphLowering::linearEpilogue(OpTy op, const CTensor &x,
                                            const qat::QuantLayout &wl,
                                            int64_t channels, int o,
                                            Epilogue &ep) {
  fillEpilogueOut(ep, tensors[o]);
  // s_x * s_w[c] in f32, as the reference multiplies them.
  std::vector<float> mult(channels);
  for (int64_t c = 0; c < channels; ++c)
    mult[c] = static_cast<float>(x.desc.scale) *
              static_cast<float>(wl.scales[wl.scales.size() == 1 ? 0 : c]);
  ep.multOff = addChannels(mult, channels);
  if (op.getBias() && failed(addChannelConstant(op, op.getBias(), "bias",
                                                channels, ep.biasOff)))
    return failure();
  if (op.getChannelScale() &&
      failed(addChannelConstant(op, op.getChannelScale(), "channel scale",
                                channels, ep.scaleOff)))
    return failure();
  fillActivation(ep, op.getActivation(), false);
  fillActivation(ep, op.getResidualActivation(), true);
  return success();
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

LogicalResult GraphLowering::lowerQuantize(qat::QuantizeOp op) {
  int in = tensorOf(op.getInput());
  auto shape = op.getOutput().getType().getShape();
  if (shape.size() != 4 && shape.size() != 2)
    return op.emitError("qatc cannot compile a rank-")
           << shape.size() << " QuantizeLinear yet (ranks 2 and 4 compile)";
  if (!qat::getPerTensorType(op.getOutput().getType()))
    return op.emitError("qatc compiles per-tensor activation quantization "
                        "only");
  int o = resultTensor(op.getOutput(), plan::Layout::NHWC);
  const CTensor &src = tensors[in];
  int64_t C = shape[1], HW = shape.size() == 4 ? shape[2] * shape[3] : 1,
          N = shape[0];
  bool srcPlain = src.desc.layout == plan::Layout::Plain;
  int64_t srcCS = srcPlain ? C : src.desc.channelStride;
  addLayer(op, "quantize", "int8", true, 0, {in}, {o}, [=](KB &k) {
    const CTensor &s = tensors[in], &d = tensors[o];
    auto [b, e] = k.share(N * HW);
    k.loop(b, e, 1, [&](Value p) {
      Value n = k.div(p, k.c(HW)), hw = k.rem(p, k.c(HW));
      k.loop(k.c(0), k.c(C), 1, [&](Value ch) {
        Value si = srcPlain
                       ? k.add(k.mul(k.add(k.mul(n, k.c(C)), ch), k.c(HW)), hw)
                       : k.add(k.mul(p, k.c(srcCS)), ch);
        Value x = k.load(k.f32, k.at(s.desc.offset, si, 4));
        k.store(k.quantize(x, d.scale, d.zp, d.qmin, d.qmax),
                k.at(d.desc.offset,
                     k.add(k.mul(p, k.c(d.desc.channelStride)), ch), 1));
      });
    });
  });
  return success();
}

LogicalResult GraphLowering::lowerDequantize(qat::DequantizeOp op) {
  if (!qat::getPerTensorType(op.getInput().getType()))
    return op.emitError("qatc compiles per-tensor dequantization only");
  int in = inLayout(tensorOf(op.getInput()), plan::Layout::NHWC, op.getLoc());
  int o = resultTensor(op.getOutput(), plan::Layout::NHWC);
  int64_t C = tensors[in].channels(), P = tensors[in].pixels();
  addLayer(op, "dequantize", "int8", true, 0, {in}, {o}, [=](KB &k) {
    const CTensor &s = tensors[in], &d = tensors[o];
    auto [b, e] = k.share(P);
    k.loop(b, e, 1, [&](Value p) {
      k.loop(k.c(0), k.c(C), 1, [&](Value ch) {
        Value q = k.load(
            k.i8, k.at(s.desc.offset,
                       k.add(k.mul(p, k.c(s.desc.channelStride)), ch), 1));
        k.store(k.dequantize(q, s.zp, s.scale),
                k.at(d.desc.offset,
                     k.add(k.mul(p, k.c(d.desc.channelStride)), ch), 4));
      });
    });
  });
  return success();
}

LogicalResult GraphLowering::denseConv(
    Operation *op, DenseConvSpec s, int in, int outT,
    std::function<double(int64_t, int64_t, int64_t, int64_t)> weightAt,
    int residual) {
  bool avx512 = target.isa == Isa::AVX512VNNI;
  s.NV = std::min<int64_t>(avx512 ? 4 : 2, (s.OC + 15) / 16);
  s.MR = avx512 ? (s.NV >= 4   ? 6
                   : s.NV == 3 ? 8
                   : s.NV == 2 ? 12
                               : 16)
                : (s.NV >= 2 ? 2 : 4);
  const int64_t NB = s.NV * 16, blocks = (s.OC + NB - 1) / NB;
  // Packed [blk][kh][kw][k][NB]: k steps of 4 input channels (one int8
  // dword per lane) or of one float.
  const int64_t KS = s.int8 ? s.inCS / 4 : s.IC, step = s.int8 ? 4 : 1;
  auto index = [&](int64_t oc, int64_t kh, int64_t kw, int64_t ic) {
    return ((((oc / NB * s.KH + kh) * s.KW + kw) * KS + ic / step) * NB +
            oc % NB) *
               step +
           ic % step;
  };
  std::vector<int8_t> packed8;
  std::vector<float> packedF;
  (s.int8 ? packed8.resize(blocks * s.KH * s.KW * KS * NB * step)
          : packedF.resize(blocks * s.KH * s.KW * KS * NB));
  for (int64_t oc = 0; oc < s.OC; ++oc)
    for (int64_t kh = 0; kh < s.KH; ++kh)
      for (int64_t kw = 0; kw < s.KW; ++kw)
        for (int64_t ic = 0; ic < KS * step; ++ic) {
          double w = weightAt(oc, ic, kh, kw);
          if (s.int8)
            packed8[index(oc, kh, kw, ic)] = static_cast<int8_t>(w);
          else
            packedF[index(oc, kh, kw, ic)] = static_cast<float>(w);
        }
  s.weightOff = s.int8 ? addArray(packed8) : addArray(packedF);
  std::string isaName = s.int8 ? (target.isa == Isa::AVX512VNNI ? "vnni"
                                  : target.isa == Isa::AVXVNNI  ? "avxvnni"
                                                               : "int8-generic")
                               : "fp32-fma";
  std::string kernel =
      isaName + "-conv " + std::to_string(s.MR) + "x" + std::to_string(NB);
  std::vector<int> ins = {in};
  if (residual >= 0)
    ins.push_back(residual);
  int64_t macs = s.N * s.OH * s.OW * s.OC * s.KH * s.KW * s.IC;
  Isa isa = target.isa;
  addLayer(op, kernel, s.int8 ? "int8" : "fp32", macs > 50000, macs, ins,
           {outT}, [=](KB &k) {
             DenseConvSpec spec = s;
             spec.inOff = tensors[in].desc.offset;
             spec.outOff = tensors[outT].desc.offset;
             if (residual >= 0)
               spec.ep.resOff = tensors[residual].desc.offset;
             emitDenseConv(k, isa, spec);
           });
  return success();
}

LogicalResult GraphLowering::lowerConv(Operation *op, bool int8, int in, int o,
                                       ArrayRef<int64_t> ws, int64_t group,
                                       ArrayRef<int64_t> strides,
                                       ArrayRef<int64_t> pads,
                                       ArrayRef<int64_t> dilations, Epilogue ep,
                                       int64_t corrOff, int residual,
                                       std::function<double(int64_t)> weight) {
  const CTensor &x = tensors[in];
  int64_t OC = ws[0], ICg = ws[1], KH = ws[2], KW = ws[3], IC = x.channels();
  auto inShape = x.desc.shape, outShape = tensors[o].desc.shape;
  if (group == 1) {
    DenseConvSpec s;
    s.int8 = int8;
    setWindow(s, inShape, outShape, KH, KW, strides, pads, dilations);
    s.IC = IC;
    s.OC = OC;
    s.inCS = x.desc.channelStride;
    s.outCS = tensors[o].desc.channelStride;
    s.corrOff = corrOff;
    s.padRowOff = padRow(int8, x.zp, int8 ? x.desc.channelStride : IC);
    s.ep = ep;
    return denseConv(
        op, s, in, o,
        [weight, ICg, KH, KW](int64_t oc, int64_t ic, int64_t kh,
                              int64_t kw) -> double {
          return ic < ICg ? weight(((oc * ICg + ic) * KH + kh) * KW + kw) : 0;
        },
        residual);
  }
  if (group != IC || OC != IC || ICg != 1)
    return op->emitError("qatc compiles dense and depthwise convolutions; "
                         "this one has group=")
           << group << " (grouped convolution is not implemented yet)";
  DepthwiseSpec s;
  s.int8 = int8;
  setWindow(s, inShape, outShape, KH, KW, strides, pads, dilations);
  s.C = IC;
  s.inCS = x.desc.channelStride;
  s.outCS = tensors[o].desc.channelStride;
  s.corrOff = corrOff;
  int64_t C16 = roundUp(IC, 16);
  s.padRowOff = padRow(int8, x.zp, C16);
  s.ep = ep;
  // [kh][kw][C16]
  std::vector<int8_t> packed8(int8 ? KH * KW * C16 : 0, 0);
  std::vector<float> packedF(int8 ? 0 : KH * KW * C16, 0.f);
  for (int64_t c = 0; c < IC; ++c)
    for (int64_t t = 0; t < KH * KW; ++t) {
      double w = weight(c * KH * KW + t);
      if (int8)
        packed8[t * C16 + c] = static_cast<int8_t>(w);
      else
        packedF[t * C16 + c] = static_cast<float>(w);
    }
  s.weightOff = int8 ? addArray(packed8) : addArray(packedF);
  std::vector<int> ins = {in};
  if (residual >= 0)
    ins.push_back(residual);
  int64_t macs = s.N * s.OH * s.OW * IC * KH * KW;
  addLayer(op, int8 ? "int8-depthwise 1x16" : "fp32-depthwise 1x16",
           int8 ? "int8" : "fp32", macs > 50000, macs, ins, {o}, [=](KB &k) {
             DepthwiseSpec spec = s;
             spec.inOff = tensors[in].desc.offset;
             spec.outOff = tensors[o].desc.offset;
             if (residual >= 0)
               spec.ep.resOff = tensors[residual].desc.offset;
             emitDepthwise(k, spec);
           });
  return success();
}

LogicalResult GraphLowering::lowerQatConv(qat::ConvOp op) {
  if (op.getInput().getType().getRank() != 4)
    return op.emitError("qatc compiles 2-D convolutions only");
  int in = inLayout(tensorOf(op.getInput()), plan::Layout::NHWC, op.getLoc());
  auto w = constantOf(op.getWeight());
  if (!w)
    return op.emitError("the weight of a compiled convolution must be a "
                        "constant");
  qat::QuantLayout wl(op.getWeight().getType());
  if (failed(requireSymmetric(op, wl)))
    return failure();
  const CTensor &x = tensors[in];
  auto ws = cast<ShapedType>(op.getWeight().getType()).getShape();
  int64_t OC = ws[0], perChannel = ws[1] * ws[2] * ws[3];
  int o = resultTensor(op.getOutput(), plan::Layout::NHWC);
  Epilogue ep;
  if (failed(linearEpilogue(op, x, wl, OC, o, ep)))
    return failure();
  int residual = -1;
  if (op.getResidual()) {
    residual =
        inLayout(tensorOf(op.getResidual()), plan::Layout::NHWC, op.getLoc());
    const CTensor &r = tensors[residual];
    ep.hasResidual = true;
    ep.resCS = r.desc.channelStride;
    ep.resZp = r.zp;
    ep.resScale = r.scale;
  }
  ref::Tensor wt = *w;
  int64_t corrOff = addZeroPointTerms(OC, x.zp, [&](int64_t c) {
    int64_t sum = 0;
    for (int64_t i = 0; i < perChannel; ++i)
      sum += intAt(wt, c * perChannel + i);
    return sum;
  });
  return lowerConv(op, true, in, o, ws, op.getGroup(), op.getStrides(),
                   op.getPads(), op.getDilations(), ep, corrOff, residual,
                   [wt](int64_t i) -> double { return intAt(wt, i); });
}

LogicalResult
GraphLowering::matrixProduct(Operation *op, bool int8, int in, int o, int64_t K,
                             int64_t N, Epilogue ep, int64_t corrOff,
                             std::function<double(int64_t, int64_t)> weightAt) {
  const CTensor &x = tensors[in];
  int64_t kPhys = physicalK(x), M = x.dim(0);
  DenseConvSpec s;
  s.int8 = int8;
  s.W = s.OW = M;
  s.IC = s.inCS = kPhys;
  s.OC = N;
  s.outCS = tensors[o].desc.layout == plan::Layout::NHWC
                ? tensors[o].desc.channelStride
                : N;
  s.corrOff = corrOff;
  s.padRowOff = padRow(int8, x.zp, kPhys);
  s.ep = ep;
  CTensor view = x;
  return denseConv(
      op, s, in, o,
      [view, weightAt](int64_t n, int64_t kp, int64_t, int64_t) -> double {
        int64_t kl = logicalK(view, kp);
        return kl < 0 ? 0 : weightAt(n, kl);
      },
      -1);
}

LogicalResult GraphLowering::lowerQatMatMul(qat::MatMulOp op) {
  if (op.getLhs().getType().getRank() != 2)
    return op.emitError("qatc compiles 2-D matrix products only (batched "
                        "MatMul is not implemented yet)");
  auto w = constantOf(op.getRhs());
  if (!w)
    return op.emitError("qatc compiles matrix products with a constant "
                        "right-hand side only");
  qat::QuantLayout wl(op.getRhs().getType());
  if (failed(requireSymmetric(op, wl)))
    return failure();
  int in = tensorOf(op.getLhs());
  const CTensor &x = tensors[in];
  auto rs = cast<ShapedType>(op.getRhs().getType()).getShape();
  bool tr = op.getTransposeRhs();
  int64_t K = tr ? rs[1] : rs[0], N = tr ? rs[0] : rs[1];
  bool outInt8 =
      isa<quant::QuantizedType>(op.getOutput().getType().getElementType());
  int o = resultTensor(op.getOutput(),
                       outInt8 ? plan::Layout::NHWC : plan::Layout::Plain);
  Epilogue ep;
  if (failed(linearEpilogue(op, x, wl, N, o, ep)))
    return failure();
  if (op.getResidual())
    return op.emitError("a residual on a matrix product is not compiled yet");
  ref::Tensor wt = *w;
  auto weightAt = [wt, tr, K, N](int64_t n, int64_t k) -> double {
    return intAt(wt, tr ? n * K + k : k * N + n);
  };
  int64_t corrOff = addZeroPointTerms(N, x.zp, [&](int64_t n) {
    int64_t sum = 0;
    for (int64_t k = 0; k < K; ++k)
      sum += static_cast<int64_t>(weightAt(n, k));
    return sum;
  });
  return matrixProduct(op, true, in, o, K, N, ep, corrOff, weightAt);
}

LogicalResult
GraphLowering::lowerElementwise(Operation *op, Value a, Value b, bool mul,
                                std::optional<qat::ClampAttr> act) {
  Value res = op->getResult(0);
  auto rt = cast<RankedTensorType>(res.getType());
  if (cast<ShapedType>(a.getType()).getShape() != rt.getShape() ||
      cast<ShapedType>(b.getType()).getShape() != rt.getShape())
    return op->emitError("qatc compiles elementwise ops on equal shapes only "
                         "(broadcasting is not implemented yet)");
  int ta = inLayout(tensorOf(a), plan::Layout::NHWC, op->getLoc());
  int tb = inLayout(tensorOf(b), plan::Layout::NHWC, op->getLoc());
  float lo = -std::numeric_limits<float>::infinity(), hi = -lo;
  if (act && *act) {
    lo = static_cast<float>(act->getMin());
    hi = static_cast<float>(act->getMax());
  }
  int o = resultTensor(res, plan::Layout::NHWC);
  if (!tensors[o].int8 && !tensors[ta].int8)
    if (auto f = foldActivation(res, o)) {
      lo = f->first;
      hi = f->second;
    }
  int64_t C = tensors[o].channels(), P = tensors[o].pixels();
  bool int8In = tensors[ta].int8;
  addLayer(op, mul ? "mul" : "add", int8In ? "int8" : "fp32", P * C > 4096, 0,
           {ta, tb}, {o}, [=](KB &k) {
             const CTensor &A = tensors[ta], &B = tensors[tb], &O = tensors[o];
             OpBuilder &bb = k.b;
             auto index = [&](const CTensor &t, Value p, Value ch) {
               return k.add(k.mul(p, k.c(t.desc.channelStride)), ch);
             };
             auto value = [&](const CTensor &t, Value p, Value ch) -> Value {
               if (!t.int8)
                 return k.load(k.f32, k.at(t.desc.offset, index(t, p, ch), 4));
               Value q = k.load(k.i8, k.at(t.desc.offset, index(t, p, ch), 1));
               return k.dequantize(q, t.zp, t.scale);
             };
             auto [b0, e0] = k.share(P);
             k.loop(b0, e0, 1, [&](Value p) {
               k.loop(k.c(0), k.c(C), 1, [&](Value ch) {
                 Value y = mul ? bb.create<arith::MulFOp>(
                                       k.loc, value(A, p, ch), value(B, p, ch))
                                     .getResult()
                               : bb.create<arith::AddFOp>(
                                       k.loc, value(A, p, ch), value(B, p, ch))
                                     .getResult();
                 if (!std::isinf(lo))
                   y = bb.create<arith::MaximumFOp>(k.loc, y, k.cf(lo));
                 if (!std::isinf(hi))
                   y = bb.create<arith::MinimumFOp>(k.loc, y, k.cf(hi));
                 if (O.int8)
                   k.store(k.quantize(y, O.scale, O.zp, O.qmin, O.qmax),
                           k.at(O.desc.offset, index(O, p, ch), 1));
                 else
                   k.store(y, k.at(O.desc.offset, index(O, p, ch), 4));
               });
             });
           });
  return success();
}

LogicalResult GraphLowering::lowerClamp(Operation *op, Value inV, double lo,
                                        double hi) {
  int in = inLayout(tensorOf(inV), plan::Layout::NHWC, op->getLoc());
  int o = resultTensor(op->getResult(0), plan::Layout::NHWC);
  const CTensor &x = tensors[in];
  int64_t count = x.pixels() * x.desc.channelStride;
  addLayer(op, "clamp", x.int8 ? "int8" : "fp32", count > 4096, 0, {in}, {o},
           [=](KB &k) {
             const CTensor &X = tensors[in], &O = tensors[o];
             int64_t es = X.int8 ? 1 : 4;
             auto [b0, e0] = k.share(count);
             OpBuilder &bb = k.b;
             k.loop(b0, e0, 1, [&](Value i) {
               Value v =
                   k.load(X.int8 ? k.i8 : k.f32, k.at(X.desc.offset, i, es));
               if (X.int8) {
                 // Stored-domain bounds (lo/hi are stored integers here).
                 v = bb.create<arith::MaxUIOp>(
                     k.loc, v,
                     bb.create<arith::ConstantIntOp>(k.loc, int64_t(lo), 8));
                 v = bb.create<arith::MinUIOp>(
                     k.loc, v,
                     bb.create<arith::ConstantIntOp>(k.loc, int64_t(hi), 8));
               } else {
                 if (!std::isinf(lo))
                   v = bb.create<arith::MaximumFOp>(k.loc, v, k.cf(lo));
                 if (!std::isinf(hi))
                   v = bb.create<arith::MinimumFOp>(k.loc, v, k.cf(hi));
               }
               k.store(v, k.at(O.desc.offset, i, es));
             });
           });
  return success();
}

LogicalResult GraphLowering::lowerMaxPool(Operation *op, Value inV,
                                          ArrayRef<int64_t> kernel,
                                          ArrayRef<int64_t> strides,
                                          ArrayRef<int64_t> pads,
                                          ArrayRef<int64_t> dilations) {
  if (kernel.size() != 2)
    return op->emitError("qatc compiles 2-D pooling only");
  int in = inLayout(tensorOf(inV), plan::Layout::NHWC, op->getLoc());
  int o = resultTensor(op->getResult(0), plan::Layout::NHWC);
  ConvSpec s;
  setWindow(s, tensors[in].desc.shape, tensors[o].desc.shape, kernel[0],
            kernel[1], strides, pads, dilations);
  int64_t C = tensors[o].channels();
  addLayer(
      op, "maxpool", tensors[in].int8 ? "int8" : "fp32", true, 0, {in}, {o},
      [=](KB &k) {
        const CTensor &X = tensors[in], &O = tensors[o];
        int64_t es = X.int8 ? 1 : 4;
        Type et = X.int8 ? Type(k.i8) : Type(k.f32);
        OpBuilder &bb = k.b;
        auto [b0, e0] = k.share(s.N * s.OH);
        k.loop(b0, e0, 1, [&](Value r) {
          Value n = k.div(r, k.c(s.OH)), oh = k.rem(r, k.c(s.OH));
          k.loop(k.c(0), k.c(s.OW), 1, [&](Value ow) {
            k.loop(k.c(0), k.c(C), 1, [&](Value ch) {
              Value m =
                  X.int8
                      ? bb.create<arith::ConstantIntOp>(k.loc, 0, 8).getResult()
                      : k.cf(-std::numeric_limits<float>::infinity());
              for (int64_t kh = 0; kh < s.KH; ++kh)
                for (int64_t kw = 0; kw < s.KW; ++kw) {
                  Value ih = k.add(k.mul(oh, k.c(s.SH)), k.c(kh * s.DH - s.PT));
                  Value iw = k.add(k.mul(ow, k.c(s.SW)), k.c(kw * s.DW - s.PL));
                  Value ok = k.andi(k.lt(ih, k.c(s.H)), k.lt(iw, k.c(s.W)));
                  // Out-of-bounds taps read pixel 0 and are discarded.
                  Value pixel = k.select(
                      ok,
                      k.add(k.mul(k.add(k.mul(n, k.c(s.H)), ih), k.c(s.W)), iw),
                      k.c(0));
                  Value v = k.load(
                      et,
                      k.at(X.desc.offset,
                           k.add(k.mul(pixel, k.c(X.desc.channelStride)), ch),
                           es));
                  Value mx =
                      X.int8
                          ? bb.create<arith::MaxUIOp>(k.loc, m, v).getResult()
                          : bb.create<arith::MaximumFOp>(k.loc, m, v)
                                .getResult();
                  m = k.select(ok, mx, m);
                }
              Value opix =
                  k.add(k.mul(k.add(k.mul(n, k.c(s.OH)), oh), k.c(s.OW)), ow);
              k.store(m, k.at(O.desc.offset,
                              k.add(k.mul(opix, k.c(O.desc.channelStride)), ch),
                              es));
            });
          });
        });
      });
  return success();
}

LogicalResult GraphLowering::lowerReshape(Operation *op, Value inV) {
  Value res = op->getResult(0);
  auto rt = cast<RankedTensorType>(res.getType());
  int in = tensorOf(inV);
  const CTensor x = tensors[in];
  auto shape = rt.getShape();
  // [N, C, 1, 1] NHWC -> [N, C]: the same bytes.
  if (x.desc.layout == plan::Layout::NHWC && x.desc.shape.size() == 4 &&
      shape.size() == 2 && x.dim(2) * x.dim(3) == 1 && shape[1] == x.dim(1)) {
    int a = alias(in, nameOf(res), shape);
    valueTensor[res] = a;
    return success();
  }
  // [N, C, H, W] NHWC -> [N, C*H*W] read only by matrix products: a view;
  // the product's packed weights absorb the order.
  bool onlyProducts = llvm::all_of(res.getUsers(), [](Operation *u) {
    return isa<qat::MatMulOp, onnx::GemmOp>(u);
  });
  if (x.desc.layout == plan::Layout::NHWC && x.desc.shape.size() == 4 &&
      shape.size() == 2 && shape[0] == x.dim(0) && x.dim(0) == 1 &&
      onlyProducts && !res.use_empty()) {
    CTensor v = x;
    v.flat = true;
    v.fC = x.dim(1);
    v.fH = x.dim(2);
    v.fW = x.dim(3);
    v.fCS = x.desc.channelStride;
    v.desc.name = nameOf(res);
    v.desc.shape.assign(shape.begin(), shape.end());
    v.manifestIndex = -1;
    tensors.push_back(v);
    valueTensor[res] = tensors.size() - 1;
    return success();
  }
  // Anything else: plain row-major order is reshape-invariant.
  // (A rank-2 NHWC tensor without padding already is in that order.)
  int plain = inLayout(in, plan::Layout::Plain, op->getLoc());
  int a = alias(plain, nameOf(res), shape);
  tensors[a].desc.layout = plan::Layout::Plain;
  tensors[a].desc.channelStride = 0;
  out.manifest.tensors[tensors[a].manifestIndex] = tensors[a].desc;
  valueTensor[res] = a;
  return success();
}

LogicalResult GraphLowering::lowerFloatConv(onnx::ConvOp op) {
  auto inType = cast<RankedTensorType>(op.getX().getType());
  if (inType.getRank() != 4 || !inType.getElementType().isF32())
    return op.emitError("qatc compiles 2-D f32 convolutions only");
  int in = inLayout(tensorOf(op.getX()), plan::Layout::NHWC, op.getLoc());
  auto w = constantOf(op.getW());
  if (!w)
    return op.emitError("the weight of a compiled convolution must be a "
                        "constant");
  std::vector<float> wf = floatsOf(*w);
  auto ws = cast<ShapedType>(op.getW().getType()).getShape();
  int o = resultTensor(op.getY(), plan::Layout::NHWC);
  Epilogue ep;
  if (op.getB() &&
      failed(addChannelConstant(op, op.getB(), "bias", ws[0], ep.biasOff)))
    return failure();
  foldActivation(op.getY(), o, ep);
  return lowerConv(op, false, in, o, ws, op.getGroup(), op.getStrides(),
                   op.getPads(), op.getDilations(), ep, -1, -1,
                   [wf](int64_t i) -> double { return wf[i]; });
}

LogicalResult GraphLowering::lowerGemm(onnx::GemmOp op) {
  if (op.getTransA() || op.getAlpha().convertToFloat() != 1.f ||
      op.getBeta().convertToFloat() != 1.f)
    return op.emitError("qatc compiles Gemm with alpha=1, beta=1, transA=0 "
                        "only");
  auto w = constantOf(op.getB());
  if (!w)
    return op.emitError("qatc compiles Gemm with a constant B only");
  std::vector<float> wf = floatsOf(*w);
  int in = tensorOf(op.getA());
  auto bs = cast<ShapedType>(op.getB().getType()).getShape();
  bool tr = op.getTransB();
  int64_t K = tr ? bs[1] : bs[0], N = tr ? bs[0] : bs[1];
  int o = resultTensor(op.getY(), plan::Layout::Plain);
  Epilogue ep;
  if (op.getC()) {
    auto b = constantOf(op.getC());
    if (!b)
      return op.emitError("qatc compiles Gemm with a constant C only");
    std::vector<float> bias = floatsOf(*b);
    if (bias.size() == 1)
      bias.assign(N, bias[0]);
    if (static_cast<int64_t>(bias.size()) != N)
      return op.emitError("qatc compiles Gemm with a per-column C only");
    ep.biasOff = addChannels(bias, N);
  }
  foldActivation(op.getY(), o, ep);
  return matrixProduct(op, false, in, o, K, N, ep, -1,
                       [wf, tr, K, N](int64_t n, int64_t k) -> double {
                         return wf[tr ? n * K + k : k * N + n];
                       });
}

LogicalResult GraphLowering::lowerGlobalAvgPool(onnx::GlobalAveragePoolOp op) {
  auto rt = cast<RankedTensorType>(op.getY().getType());
  if (rt.getRank() != 4)
    return op.emitError("qatc compiles 2-D global pooling only");
  int in = inLayout(tensorOf(op.getX()), plan::Layout::NHWC, op.getLoc());
  int o = resultTensor(op.getY(), plan::Layout::NHWC);
  const CTensor &x = tensors[in];
  int64_t N = x.dim(0), C = x.dim(1), HW = x.dim(2) * x.dim(3);
  addLayer(op, "fp32-global-avgpool", "fp32", false, 0, {in}, {o}, [=](KB &k) {
    const CTensor &X = tensors[in], &O = tensors[o];
    OpBuilder &bb = k.b;
    k.loop(k.c(0), k.c(N), 1, [&](Value n) {
      k.loop(k.c(0), k.c(C), 1, [&](Value ch) {
        SmallVector<Value> sum =
            k.loop(k.c(0), k.c(HW), 1, ValueRange{k.cf(0.f)},
                   [&](Value p, ValueRange acc) -> SmallVector<Value> {
                     Value idx = k.add(k.mul(k.add(k.mul(n, k.c(HW)), p),
                                             k.c(X.desc.channelStride)),
                                       ch);
                     Value v = k.load(k.f32, k.at(X.desc.offset, idx, 4));
                     return {bb.create<arith::AddFOp>(k.loc, acc[0], v)};
                   });
        Value mean = bb.create<arith::DivFOp>(k.loc, sum[0], k.cf(float(HW)));
        k.store(mean, k.at(O.desc.offset,
                           k.add(k.mul(n, k.c(O.desc.channelStride)), ch), 4));
      });
    });
  });
  return success();
}

LogicalResult GraphLowering::run() {
  // Graph inputs: plain, as the user gives them.
  std::vector<std::string> inNames = ref::getInputNames(func);
  for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !type.getElementType().isF32())
      return func.emitError("qatc compiles models with f32 inputs only; "
                            "input ")
             << i << " is " << arg.getType();
    int t =
        newTensor(i < inNames.size() ? inNames[i] : "input" + std::to_string(i),
                  type.getShape(), false, plan::Layout::Plain);
    storages[tensors[t].storage].first = -1;
    valueTensor[arg] = t;
    out.manifest.inputs.push_back(tensors[t].manifestIndex);
  }
  for (Operation &opRef : func.getBody().front()) {
    Operation *op = &opRef;
    if (folded.contains(op))
      continue;
    LogicalResult r =
        llvm::TypeSwitch<Operation *, LogicalResult>(op)
            .Case<onnx::ConstantOp, qat::ConstantOp>(
                [](Operation *) { return success(); })
            .Case<qat::QuantizeOp>([&](auto o) { return lowerQuantize(o); })
            .Case<qat::DequantizeOp>([&](auto o) { return lowerDequantize(o); })
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
              return lowerMaxPool(o, o.getInput(), o.getKernelShape(),
                                  o.getStrides(), o.getPads(),
                                  o.getDilations());
            })
            .Case<onnx::MaxPoolOp>([&](auto o) {
              return lowerMaxPool(o, o.getX(), o.getKernelShape(),
                                  o.getStrides(), o.getPads(),
                                  o.getDilations());
            })
            .Case<qat::ReshapeOp>(
                [&](auto o) { return lowerReshape(o, o.getInput()); })
            .Case<onnx::FlattenOp>(
                [&](auto o) { return lowerReshape(o, o.getInput()); })
            .Case<onnx::ReshapeOp>(
                [&](auto o) { return lowerReshape(o, o.getData()); })
            .Case<onnx::ConvOp>([&](auto o) { return lowerFloatConv(o); })
            .Case<onnx::GemmOp>([&](auto o) { return lowerGemm(o); })
            .Case<onnx::GlobalAveragePoolOp>(
                [&](auto o) { return lowerGlobalAvgPool(o); })
            .Case<onnx::AddOp>([&](auto o) {
              return lowerElementwise(o, o.getA(), o.getB(), false,
                                      std::nullopt);
            })
            .Case<onnx::ReluOp>([&](auto o) {
              return lowerClamp(o, o.getX(), 0.0,
                                std::numeric_limits<double>::infinity());
            })
            .Case<onnx::ClipOp>([&](auto o) {
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
                if (tensors[t].int8)
                  return ret.emitError("qatc compiles models with float "
                                       "outputs only (output ")
                         << i << " is quantized)";
                t = inLayout(t, plan::Layout::Plain, ret.getLoc());
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
    if (failed(r))
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
    Block *entry = fn.addEntryBlock();
    OpBuilder fb = OpBuilder::atBlockBegin(entry);
    KB k(fb, l.loc, entry->getArgument(0), entry->getArgument(1),
         entry->getArgument(2), entry->getArgument(3));
    l.emit(k);
    fb.create<func::ReturnOp>(l.loc);
    out.manifest.layers.push_back(l.desc);
  }
}

} // namespace

LogicalResult qatc::codegen::lowerGraph(func::FuncOp func, const Target &target,
                                        LoweredGraph &out) {
  MLIRContext *ctx = func.getContext();
  ctx->loadDialect<func::FuncDialect, arith::ArithDialect, scf::SCFDialect,
                   vector::VectorDialect, math::MathDialect,
                   LLVM::LLVMDialect>();
  out.manifest.target = target.name;
  out.manifest.compiler = compilerVersion();
  GraphLowering lowering(func, target, out);
  return lowering.run();
}
