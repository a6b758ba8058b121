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
#include <deque>

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
  /// A strided view of another tensor's storage (Transpose, Slice, a
  /// Reshape that needs no copy): element strides and first element. Only
  /// strided kernels read views; the others get a copy (inLayout).
  bool view = false;
  std::vector<int64_t> vstrides;
  int64_t vbase = 0;

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

/// Where a strided kernel reads an operand: a tensor, or a constant in the
/// weights blob (f32, row-major `shape`).
struct Src {
  int tensor = -1;
  int64_t weightOff = -1;
  std::vector<int64_t> shape;
};

/// A float scalar body of a strided kernel.
using ScalarFn = std::function<Value(KB &, ArrayRef<Value>)>;

std::vector<int64_t> rowMajor(ArrayRef<int64_t> shape) {
  std::vector<int64_t> st(shape.size(), 1);
  int64_t acc = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    st[d] = acc;
    acc *= shape[d];
  }
  return st;
}

int64_t product(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// The strides of `newShape` over the same elements as `shape` with
/// `strides` (row-major order), when no copy is needed: merged dimensions
/// must be contiguous in each other.
std::optional<std::vector<int64_t>>
reshapedStrides(ArrayRef<int64_t> shape, ArrayRef<int64_t> strides,
                ArrayRef<int64_t> newShape) {
  std::vector<int64_t> os, ost;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1) {
      os.push_back(shape[d]);
      ost.push_back(strides[d]);
    }
  std::vector<size_t> nd;
  for (size_t d = 0; d < newShape.size(); ++d)
    if (newShape[d] != 1)
      nd.push_back(d);
  std::vector<int64_t> nst(newShape.size(), 0);
  size_t a = 0, b = 0;
  while (a < os.size() && b < nd.size()) {
    int64_t po = os[a], pn = newShape[nd[b]];
    size_t a2 = a + 1, b2 = b + 1;
    while (po != pn) {
      if (po < pn) {
        if (a2 >= os.size())
          return std::nullopt;
        po *= os[a2++];
      } else {
        if (b2 >= nd.size())
          return std::nullopt;
        pn *= newShape[nd[b2++]];
      }
    }
    for (size_t i = a; i + 1 < a2; ++i)
      if (ost[i] != ost[i + 1] * os[i + 1])
        return std::nullopt;
    int64_t st = ost[a2 - 1];
    for (size_t i = b2; i-- > b;) {
      nst[nd[i]] = st;
      st *= newShape[nd[i]];
    }
    a = a2;
    b = b2;
  }
  if (a != os.size() || b != nd.size())
    return std::nullopt;
  return nst;
}

/// The common refinement of two shapes of the same elements (each dimension
/// split, never merged) and both sides' strides over it: the loop of a copy
/// that reshapes. Fails when the shapes do not split into each other.
bool refineShapes(ArrayRef<int64_t> as, ArrayRef<int64_t> ast,
                  ArrayRef<int64_t> bs, ArrayRef<int64_t> bst,
                  std::vector<int64_t> &shape, std::vector<int64_t> &sa,
                  std::vector<int64_t> &sb) {
  size_t i = 0, j = 0;
  int64_t ra = as.empty() ? 1 : as[0], rb = bs.empty() ? 1 : bs[0];
  while (i < as.size() && j < bs.size()) {
    if (ra == 1) {
      if (++i < as.size())
        ra = as[i];
      continue;
    }
    if (rb == 1) {
      if (++j < bs.size())
        rb = bs[j];
      continue;
    }
    int64_t piece;
    if (ra % rb == 0)
      piece = rb;
    else if (rb % ra == 0)
      piece = ra;
    else
      return false;
    shape.push_back(piece);
    sa.push_back(ast[i] * (ra / piece));
    sb.push_back(bst[j] * (rb / piece));
    ra /= piece;
    rb /= piece;
  }
  return true;
}

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
  /// The tensor holding `v`; a constant gets one, filled by a layer.
  int tensorOf(Value v);
  /// `t` in NHWC (converting a plain rank-4 tensor) or plain, and not a
  /// view: a copy when needed.
  int inLayout(int t, plan::Layout want, Location loc);
  /// The layout of a new tensor of `shape`: NHWC for ranks 2 and 4.
  static plan::Layout layoutFor(ArrayRef<int64_t> shape) {
    return shape.size() == 4 || shape.size() == 2 ? plan::Layout::NHWC
                                                  : plan::Layout::Plain;
  }
  /// Element strides of `t` over its logical shape.
  std::vector<int64_t> stridesOf(const CTensor &t) const;
  /// `s` read by a strided kernel over `loop` (broadcast from the right).
  StridedOperand operand(const Src &s, ArrayRef<int64_t> loop) const;
  Src srcOf(Value v);
  /// Result `res` as a view of `base`'s storage.
  void makeView(int base, Value res, std::vector<int64_t> strides,
                int64_t offset);
  std::string nameOf(Value v);
  int64_t addWeights(const void *data, size_t bytes);
  template <typename T> int64_t addArray(const std::vector<T> &v) {
    return addWeights(v.data(), v.size() * sizeof(T));
  }
  /// A per-channel f32 array padded for 16-lane loads past the last channel.
  int64_t addChannels(std::vector<float> v, int64_t channels) {
    v.resize(roundUp(channels, 64) + 64, 0.f);
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
  /// Max pooling, or average pooling when `average` (count_include_pad:
  /// `countPad`); int8 or f32.
  LogicalResult lowerPool(Operation *op, Value in, ArrayRef<int64_t> kernel,
                          ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                          ArrayRef<int64_t> dilations, bool average = false,
                          bool countPad = false);
  LogicalResult lowerReshape(Operation *op, Value in);
  LogicalResult lowerFloatConv(onnx::ConvOp op);
  LogicalResult lowerGemm(onnx::GemmOp op);
  /// A strided elementwise layer: result = fn(inputs dequantized to f32),
  /// quantized when the result is; a float Relu/Clip after it folds in.
  LogicalResult lowerMap(Operation *op, std::vector<Src> ins,
                         std::string kernel, ScalarFn fn);
  LogicalResult lowerUnary(Operation *op, std::string kernel, ScalarFn fn) {
    return lowerMap(op, {srcOf(op->getOperand(0))}, std::move(kernel),
                    std::move(fn));
  }
  LogicalResult lowerBinary(Operation *op, std::string kernel, ScalarFn fn) {
    return lowerMap(op, {srcOf(op->getOperand(0)), srcOf(op->getOperand(1))},
                    std::move(kernel), std::move(fn));
  }
  LogicalResult lowerTranspose(Operation *op, Value in, ArrayRef<int64_t> perm);
  LogicalResult lowerSlice(Operation *op, Value in, ArrayRef<int64_t> starts,
                           ArrayRef<int64_t> steps);
  LogicalResult lowerConcat(Operation *op, ValueRange ins, int64_t axis);
  LogicalResult lowerPad(onnx::PadOp op);
  LogicalResult lowerBatchNorm(onnx::BatchNormalizationOp op);
  /// Mean over `axes` (GlobalAveragePool, ReduceMean), int8 or f32 input.
  LogicalResult lowerMean(Operation *op, Value in, ArrayRef<int64_t> axes);
  LogicalResult lowerSoftmax(onnx::SoftmaxOp op);
  LogicalResult lowerPow(onnx::PowOp op);
  LogicalResult lowerLayerNorm(onnx::LayerNormalizationOp op);
  LogicalResult lowerFloatMatMul(onnx::MatMulOp op);
  /// `t` as a [M, K] matrix with contiguous (int8: 4-padded) rows for the
  /// dense kernel: an alias of plain data, else a copy.
  int asRows(int t, Location loc);
  /// A batched product of two activations (numpy matmul broadcasting) into
  /// `o`: per element acc * mult (int8), * scale[n], + bias[n], clamp.
  LogicalResult batchedProduct(Operation *op, int ta, int tb, bool transB,
                               int o, float mult, int64_t scaleOff,
                               int64_t biasOff,
                               std::optional<qat::ClampAttr> act);

  /// A 2-D convolution, int8 or fp32, dense or depthwise, of input tensor
  /// `in` to `o`; `weight(i)` is element i of the [OC, IC/group, KH, KW]
  /// weight.
  LogicalResult lowerConv(Operation *op, bool int8, int in, int o,
                          ArrayRef<int64_t> wShape, int64_t group,
                          ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                          ArrayRef<int64_t> dilations, Epilogue ep,
                          int64_t corrOff, int residual,
                          std::function<double(int64_t)> weight);
  /// Picks the tile of `s` and packs `weightAt(oc, ic, kh, kw)` for it
  /// (zero beyond the real channels).
  DenseConvSpec
  packDense(DenseConvSpec s,
            std::function<double(int64_t, int64_t, int64_t, int64_t)> weightAt);
  std::string denseKernelName(const DenseConvSpec &s) const;
  /// A dense convolution layer: packs `weightAt(oc, ic, kh, kw)` for the
  /// micro-kernel (zero beyond the real channels) and picks the tile.
  LogicalResult
  denseConv(Operation *op, DenseConvSpec s, int in, int outT,
            std::function<double(int64_t, int64_t, int64_t, int64_t)> weightAt,
            int residual);
  /// A grouped convolution: one dense kernel per group in one layer, each
  /// reading its input channels and writing its output channels in place.
  LogicalResult groupedConv(Operation *op, bool int8, int in, int o,
                            ArrayRef<int64_t> wShape, int64_t group,
                            ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                            ArrayRef<int64_t> dilations, Epilogue ep,
                            int64_t corrOff, int residual,
                            std::function<double(int64_t)> weight);
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
  /// A deque: handlers hold references to tensors while adding others.
  std::deque<CTensor> tensors;
  std::vector<Storage> storages;
  std::vector<Layer> layers;
  llvm::DenseMap<Value, int> valueTensor;
  std::map<std::pair<int, int>, int> converted;
  llvm::DenseSet<Operation *> folded;
  llvm::DenseMap<Value, int64_t> constantOffsets;
  bool constantError = false;
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
    o.elemBytes = t.int8 ? 1 : 4;
    o.offset = t.view ? t.vbase : 0;
  } else {
    shape = s.shape;
    st = rowMajor(shape);
    o.inWeights = true;
    o.byteOffset = s.weightOff;
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
  Src c = srcOf(v);
  if (c.tensor >= 0 || !type.getElementType().isF32()) {
    if (!constantError)
      emitError(v.getLoc(), "qatc compiles f32 constants only; this one is ")
          << type;
    constantError = true;
    return 0;
  }
  int t = newTensor(nameOf(v), type.getShape(), false, plan::Layout::Plain);
  valueTensor[v] = t;
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  addLayer(v.getLoc(), nameOf(v), "Constant", "constant", "fp32", false, 0, {},
           {t}, [=](KB &k) {
             StridedMap m;
             m.shape = shape;
             m.out = operand(Src{t, -1, {}}, shape);
             m.ins = {operand(c, shape)};
             emitStridedMap(k, m, nullptr);
           });
  return t;
}

Src GraphLowering::srcOf(Value v) {
  if (auto c = constantOf(v)) {
    Src s;
    auto [it, fresh] = constantOffsets.try_emplace(v, 0);
    if (fresh)
      it->second = addArray(floatsOf(*c));
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
  if (!qat::getPerTensorType(op.getOutput().getType()))
    return op.emitError("qatc compiles per-tensor activation quantization "
                        "only");
  return lowerUnary(op, "quantize",
                    [](KB &, ArrayRef<Value> v) { return v[0]; });
}

LogicalResult GraphLowering::lowerDequantize(qat::DequantizeOp op) {
  if (!qat::getPerTensorType(op.getInput().getType()))
    return op.emitError("qatc compiles per-tensor dequantization only");
  return lowerUnary(op, "dequantize",
                    [](KB &, ArrayRef<Value> v) { return v[0]; });
}

LogicalResult GraphLowering::lowerMap(Operation *op, std::vector<Src> ins,
                                      std::string kernel, ScalarFn fn) {
  Value res = op->getResult(0);
  auto shape = cast<RankedTensorType>(res.getType()).getShape();
  int o = resultTensor(res, layoutFor(shape));
  std::optional<std::pair<float, float>> act;
  if (!tensors[o].int8)
    act = foldActivation(res, o);
  std::vector<int> reads;
  bool int8 = tensors[o].int8;
  for (const Src &s : ins)
    if (s.tensor >= 0) {
      reads.push_back(s.tensor);
      int8 |= tensors[s.tensor].int8;
    }
  std::vector<int64_t> loop(shape.begin(), shape.end());
  addLayer(
      op, kernel, int8 ? "int8" : "fp32", product(loop) > 4096, 0, reads, {o},
      [=](KB &k) {
        StridedMap m;
        m.shape = loop;
        m.out = operand(Src{o, -1, {}}, loop);
        for (const Src &s : ins)
          m.ins.push_back(operand(s, loop));
        const CTensor &O = tensors[o];
        emitStridedMap(k, m, [&](ArrayRef<Value> v) -> Value {
          SmallVector<Value> f;
          for (size_t i = 0; i < ins.size(); ++i) {
            const Src &s = ins[i];
            f.push_back(s.tensor >= 0 && tensors[s.tensor].int8
                            ? k.dequantize(v[i], tensors[s.tensor].zp,
                                           tensors[s.tensor].scale)
                            : v[i]);
          }
          Value y = fn(k, f);
          if (act) {
            if (!std::isinf(act->first))
              y = k.b.create<arith::MaximumFOp>(k.loc, y, k.cf(act->first));
            if (!std::isinf(act->second))
              y = k.b.create<arith::MinimumFOp>(k.loc, y, k.cf(act->second));
          }
          return O.int8 ? k.quantize(y, O.scale, O.zp, O.qmin, O.qmax) : y;
        });
      });
  return success();
}

LogicalResult GraphLowering::lowerTranspose(Operation *op, Value inV,
                                            ArrayRef<int64_t> perm) {
  int in = tensorOf(inV);
  std::vector<int64_t> st = stridesOf(tensors[in]), out(perm.size());
  for (size_t d = 0; d < perm.size(); ++d)
    out[d] = st[perm[d]];
  makeView(in, op->getResult(0), out, tensors[in].view ? tensors[in].vbase : 0);
  return success();
}

LogicalResult GraphLowering::lowerSlice(Operation *op, Value inV,
                                        ArrayRef<int64_t> starts,
                                        ArrayRef<int64_t> steps) {
  int in = tensorOf(inV);
  std::vector<int64_t> st = stridesOf(tensors[in]);
  if (starts.size() != st.size() || steps.size() != st.size())
    return op->emitError("a slice needs bounds for every axis");
  int64_t base = tensors[in].view ? tensors[in].vbase : 0;
  for (size_t d = 0; d < st.size(); ++d) {
    base += starts[d] * st[d];
    st[d] *= steps[d];
  }
  makeView(in, op->getResult(0), st, base);
  return success();
}

LogicalResult GraphLowering::lowerConcat(Operation *op, ValueRange ins,
                                         int64_t axis) {
  Value res = op->getResult(0);
  auto shape = cast<RankedTensorType>(res.getType()).getShape();
  if (axis < 0)
    axis += shape.size();
  int o = resultTensor(res, layoutFor(shape));
  std::vector<int> parts;
  for (Value v : ins)
    parts.push_back(tensorOf(v));
  for (int p : parts)
    if (tensors[p].int8 != tensors[o].int8)
      return op->emitError("qatc compiles a concatenation of int8 inputs to "
                           "an int8 result, or of f32 inputs to f32");
  addLayer(op, "concat", tensors[o].int8 ? "int8" : "fp32",
           product(shape) > 4096, 0, parts, {o}, [=](KB &k) {
             const CTensor &O = tensors[o];
             int64_t start = 0;
             for (int p : parts) {
               const CTensor &P = tensors[p];
               StridedMap m;
               m.shape = P.desc.shape;
               m.out = operand(Src{o, -1, {}}, m.shape);
               m.out.offset += start * stridesOf(O)[axis];
               m.ins = {operand(Src{p, -1, {}}, m.shape)};
               start += P.desc.shape[axis];
               bool same = !O.int8 || (P.zp == O.zp && P.scale == O.scale);
               // Inputs with other quantization parameters are requantized.
               emitStridedMap(k, m,
                              same ? ElementFn()
                                   : ElementFn([&](ArrayRef<Value> v) -> Value {
                                       return k.quantize(
                                           k.dequantize(v[0], P.zp, P.scale),
                                           O.scale, O.zp, O.qmin, O.qmax);
                                     }));
             }
           });
  return success();
}

LogicalResult GraphLowering::lowerPad(onnx::PadOp op) {
  if (llvm::any_of(op.getPads(), [](int64_t p) { return p != 0; }))
    return op.emitError("qatc compiles Pad with zero pads only (other pads "
                        "are folded into the convolution or pool that "
                        "follows)");
  valueTensor[op.getOutput()] = tensorOf(op.getData());
  return success();
}

LogicalResult GraphLowering::lowerBatchNorm(onnx::BatchNormalizationOp op) {
  auto shape = cast<ShapedType>(op.getX().getType()).getShape();
  if (shape.size() < 2)
    return op.emitError("BatchNormalization needs a channel axis");
  std::vector<std::optional<ref::Tensor>> c = {
      constantOf(op.getScale()), constantOf(op.getB()),
      constantOf(op.getInputMean()), constantOf(op.getInputVar())};
  if (llvm::any_of(c, [](auto &t) { return !t; }))
    return op.emitError("qatc compiles BatchNormalization with constant "
                        "parameters only");
  int64_t C = shape[1];
  std::vector<float> scale = floatsOf(*c[0]), bias = floatsOf(*c[1]),
                     mean = floatsOf(*c[2]), var = floatsOf(*c[3]);
  // As the reference: (x - mean) / sqrt(var + eps) * scale + bias, in f32.
  std::vector<float> denom(C);
  float eps = op.getEpsilon().convertToFloat();
  for (int64_t i = 0; i < C; ++i)
    denom[i] = std::sqrt(var[i] + eps);
  std::vector<int64_t> cshape(shape.size() - 1, 1);
  cshape[0] = C;
  auto channel = [&](const std::vector<float> &v) {
    return Src{-1, addArray(v), cshape};
  };
  return lowerMap(op,
                  {srcOf(op.getX()), channel(mean), channel(denom),
                   channel(scale), channel(bias)},
                  "batchnorm", [](KB &k, ArrayRef<Value> v) -> Value {
                    OpBuilder &b = k.b;
                    Value y = b.create<arith::SubFOp>(k.loc, v[0], v[1]);
                    y = b.create<arith::DivFOp>(k.loc, y, v[2]);
                    y = b.create<arith::MulFOp>(k.loc, y, v[3]);
                    return b.create<arith::AddFOp>(k.loc, y, v[4]);
                  });
}

LogicalResult GraphLowering::lowerMean(Operation *op, Value inV,
                                       ArrayRef<int64_t> axesIn) {
  int in = tensorOf(inV);
  Value res = op->getResult(0);
  auto outShape = cast<ShapedType>(res.getType()).getShape();
  std::vector<int64_t> inShape = tensors[in].desc.shape;
  // No axes: ReduceMean over everything.
  std::vector<bool> reduced(inShape.size(), axesIn.empty());
  for (int64_t a : axesIn)
    reduced[a < 0 ? a + inShape.size() : a] = true;
  // The loop runs over the input shape with reduced axes of size 1 (the
  // keepdims shape); the result's strides skip them.
  int o = resultTensor(res, layoutFor(outShape));
  std::vector<int64_t> loop, reduceShape;
  for (size_t d = 0; d < inShape.size(); ++d) {
    loop.push_back(reduced[d] ? 1 : inShape[d]);
    if (reduced[d])
      reduceShape.push_back(inShape[d]);
  }
  int64_t count = product(reduceShape);
  bool int8In = tensors[in].int8;
  addLayer(
      op, int8In ? "int8-mean" : "fp32-mean", int8In ? "int8" : "fp32",
      product(loop) >= 64, 0, {in}, {o}, [=](KB &k) {
        const CTensor &X = tensors[in], &O = tensors[o];
        StridedReduce r;
        r.shape = loop;
        StridedOperand full = operand(Src{in, -1, {}}, inShape);
        r.in = full;
        for (size_t d = 0; d < inShape.size(); ++d) {
          if (reduced[d]) {
            r.in.strides[d] = 0;
            r.reduceStrides.push_back(full.strides[d]);
          }
        }
        r.reduceShape = reduceShape;
        // The result over the keepdims loop: its own strides in order.
        std::vector<int64_t> ost = stridesOf(O);
        r.out = operand(Src{o, -1, {}}, outShape);
        r.out.strides.assign(loop.size(), 0);
        for (size_t d = 0, j = 0; d < loop.size(); ++d) {
          if (outShape.size() == loop.size()) {
            r.out.strides[d] = loop[d] == 1 ? 0 : ost[d];
          } else if (!reduced[d]) {
            r.out.strides[d] = ost[j++];
          }
        }
        OpBuilder &b = k.b;
        emitStridedReduce(
            k, r,
            [&](ArrayRef<Value> v) -> Value {
              Value x = v[1];
              if (X.int8) {
                // (q - z) summed exactly: integers below 2^24.
                Value i = b.create<arith::ExtUIOp>(k.loc, k.i32, x);
                i = b.create<arith::SubIOp>(
                    k.loc, i, b.create<arith::ConstantIntOp>(k.loc, X.zp, 32));
                x = b.create<arith::SIToFPOp>(k.loc, k.f32, i);
              }
              return b.create<arith::AddFOp>(k.loc, v[0], x);
            },
            [&](ArrayRef<Value> v) -> Value {
              if (!X.int8)
                return b.create<arith::DivFOp>(k.loc, v[0], k.cf(float(count)));
              // As the reference: the mean in double, times the scale.
              FloatType f64 = b.getF64Type();
              Value m = b.create<arith::ExtFOp>(k.loc, f64, v[0]);
              m = b.create<arith::DivFOp>(
                  k.loc, m,
                  b.create<arith::ConstantFloatOp>(
                      k.loc, llvm::APFloat(double(count)), b.getF64Type()));
              m = b.create<arith::MulFOp>(
                  k.loc, m,
                  b.create<arith::ConstantFloatOp>(
                      k.loc, llvm::APFloat(X.desc.scale), b.getF64Type()));
              Value y = b.create<arith::TruncFOp>(k.loc, k.f32, m);
              return O.int8 ? k.quantize(y, O.scale, O.zp, O.qmin, O.qmax) : y;
            });
      });
  return success();
}

LogicalResult GraphLowering::lowerSoftmax(onnx::SoftmaxOp op) {
  auto shape = cast<ShapedType>(op.getX().getType()).getShape();
  int64_t axis = op.getAxis();
  if (axis < 0)
    axis += shape.size();
  int in = inLayout(tensorOf(op.getX()), plan::Layout::Plain, op.getLoc());
  int o = resultTensor(op.getResult(), plan::Layout::Plain);
  // Rows of n elements `inner` apart.
  int64_t n = shape[axis], inner = product(shape.drop_front(axis + 1)),
          rows = product(shape) / n;
  addLayer(op, "fp32-softmax", "fp32", rows >= 8, 0, {in}, {o}, [=](KB &k) {
    OpBuilder &b = k.b;
    int64_t xo = tensors[in].desc.offset, yo = tensors[o].desc.offset;
    auto [b0, e0] = k.share(rows);
    k.loop(b0, e0, 1, [&](Value r) {
      Value base = k.add(k.mul(k.div(r, k.c(inner)), k.c(n * inner)),
                         k.rem(r, k.c(inner)));
      auto at = [&](int64_t off, Value i) {
        return k.at(off, k.add(base, k.mul(i, k.c(inner))), 4);
      };
      auto x = [&](Value i) { return k.load(k.f32, at(xo, i)); };
      Value mx =
          k.loop(k.c(0), k.c(n), 1,
                 ValueRange{k.cf(-std::numeric_limits<float>::infinity())},
                 [&](Value i, ValueRange a) -> SmallVector<Value> {
                   return {b.create<arith::MaximumFOp>(k.loc, a[0], x(i))};
                 })[0];
      Value sum = k.loop(k.c(0), k.c(n), 1, ValueRange{k.cf(0.f)},
                         [&](Value i, ValueRange a) -> SmallVector<Value> {
                           Value e = b.create<math::ExpOp>(
                               k.loc, b.create<arith::SubFOp>(k.loc, x(i), mx));
                           k.store(e, at(yo, i));
                           return {b.create<arith::AddFOp>(k.loc, a[0], e)};
                         })[0];
      k.loop(k.c(0), k.c(n), 1, [&](Value i) {
        Value p = at(yo, i);
        k.store(b.create<arith::DivFOp>(k.loc, k.load(k.f32, p), sum), p);
      });
    });
  });
  return success();
}

LogicalResult GraphLowering::lowerLayerNorm(onnx::LayerNormalizationOp op) {
  auto shape = cast<ShapedType>(op.getX().getType()).getShape();
  int64_t axis = static_cast<int64_t>(op.getAxis());
  if (axis < 0)
    axis += shape.size();
  int64_t n = product(shape.drop_front(axis)), rows = product(shape) / n;
  // Scale and bias over the normalized block (broadcast from 1 element).
  auto block = [&](Value v, float fill) -> std::optional<std::vector<float>> {
    if (!v)
      return std::vector<float>(n, fill);
    auto c = constantOf(v);
    if (!c)
      return std::nullopt;
    std::vector<float> f = floatsOf(*c);
    if (f.size() == 1)
      f.assign(n, f[0]);
    if (static_cast<int64_t>(f.size()) != n)
      return std::nullopt;
    return f;
  };
  auto scale = block(op.getScale(), 1.f), bias = block(op.getB(), 0.f);
  if (!scale || !bias)
    return op.emitError("qatc compiles LayerNormalization with constant "
                        "scale and bias over the normalized axes only");
  int64_t scaleOff = addArray(*scale), biasOff = addArray(*bias);
  int in = inLayout(tensorOf(op.getX()), plan::Layout::Plain, op.getLoc());
  int o = resultTensor(op.getY(), plan::Layout::Plain);
  float eps = op.getEpsilon().convertToFloat();
  addLayer(op, "fp32-layernorm", "fp32", rows >= 8, 0, {in}, {o}, [=](KB &k) {
    OpBuilder &b = k.b;
    int64_t xo = tensors[in].desc.offset, yo = tensors[o].desc.offset;
    auto [b0, e0] = k.share(rows);
    k.loop(b0, e0, 1, [&](Value r) {
      Value base = k.mul(r, k.c(n));
      auto x = [&](Value i) {
        return k.load(k.f32, k.at(xo, k.add(base, i), 4));
      };
      auto sum = [&](llvm::function_ref<Value(Value)> term) {
        return k.loop(k.c(0), k.c(n), 1, ValueRange{k.cf(0.f)},
                      [&](Value i, ValueRange a) -> SmallVector<Value> {
                        return {b.create<arith::AddFOp>(k.loc, a[0], term(i))};
                      })[0];
      };
      Value mean = b.create<arith::DivFOp>(
          k.loc, sum([&](Value i) { return x(i); }), k.cf(float(n)));
      Value var = b.create<arith::DivFOp>(
          k.loc, sum([&](Value i) -> Value {
            Value d = b.create<arith::SubFOp>(k.loc, x(i), mean);
            return b.create<arith::MulFOp>(k.loc, d, d);
          }),
          k.cf(float(n)));
      Value inv = b.create<arith::DivFOp>(
          k.loc, k.cf(1.f),
          b.create<math::SqrtOp>(
              k.loc, b.create<arith::AddFOp>(k.loc, var, k.cf(eps))));
      k.loop(k.c(0), k.c(n), 1, [&](Value i) {
        auto param = [&](int64_t off) {
          return k.load(k.f32,
                        k.gep(k.weights, k.add(k.c(off), k.mul(i, k.c(4)))));
        };
        Value y = b.create<arith::MulFOp>(
            k.loc, b.create<arith::SubFOp>(k.loc, x(i), mean), inv);
        y = b.create<arith::MulFOp>(k.loc, y, param(scaleOff));
        y = b.create<arith::AddFOp>(k.loc, y, param(biasOff));
        k.store(y, k.at(yo, k.add(base, i), 4));
      });
    });
  });
  return success();
}

LogicalResult GraphLowering::lowerPow(onnx::PowOp op) {
  // x^2 (LayerNorm's variance) as a product; other exponents through powf.
  if (auto e = constantOf(op.getY()))
    if (e->numElements() == 1 && floatsOf(*e)[0] == 2.f)
      return lowerMap(op, {srcOf(op.getX())}, "square",
                      [](KB &k, ArrayRef<Value> v) -> Value {
                        return k.b.create<arith::MulFOp>(k.loc, v[0], v[0]);
                      });
  return lowerBinary(op, "pow", [](KB &k, ArrayRef<Value> v) -> Value {
    return k.b.create<math::PowFOp>(k.loc, v[0], v[1]);
  });
}

DenseConvSpec GraphLowering::packDense(
    DenseConvSpec s,
    std::function<double(int64_t, int64_t, int64_t, int64_t)> weightAt) {
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
  const int64_t KS = s.kSteps(), step = s.int8 ? 4 : 1;
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
  return s;
}

std::string GraphLowering::denseKernelName(const DenseConvSpec &s) const {
  std::string isaName = s.int8 ? (target.isa == Isa::AVX512VNNI ? "vnni"
                                  : target.isa == Isa::AVXVNNI  ? "avxvnni"
                                                               : "int8-generic")
                               : "fp32-fma";
  return isaName + "-conv " + std::to_string(s.MR) + "x" +
         std::to_string(s.NV * 16);
}

LogicalResult GraphLowering::denseConv(
    Operation *op, DenseConvSpec s, int in, int outT,
    std::function<double(int64_t, int64_t, int64_t, int64_t)> weightAt,
    int residual) {
  s = packDense(s, weightAt);
  std::string kernel = denseKernelName(s);
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
    return groupedConv(op, int8, in, o, ws, group, strides, pads, dilations, ep,
                       corrOff, residual, weight);
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

LogicalResult GraphLowering::groupedConv(
    Operation *op, bool int8, int in, int o, ArrayRef<int64_t> ws,
    int64_t group, ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
    ArrayRef<int64_t> dilations, Epilogue ep, int64_t corrOff, int residual,
    std::function<double(int64_t)> weight) {
  const CTensor &x = tensors[in];
  int64_t OC = ws[0], ICg = ws[1], KH = ws[2], KW = ws[3];
  if (OC % group || x.channels() != ICg * group)
    return op->emitError("a grouped convolution needs channels divisible by "
                         "its group count");
  int64_t OCg = OC / group;
  std::vector<DenseConvSpec> specs;
  int64_t padRowOff = padRow(int8, x.zp, x.desc.channelStride + 64);
  for (int64_t g = 0; g < group; ++g) {
    DenseConvSpec s;
    s.int8 = int8;
    setWindow(s, x.desc.shape, tensors[o].desc.shape, KH, KW, strides, pads,
              dilations);
    s.IC = ICg;
    s.OC = OCg;
    // Pixels keep the full strides; the K loop reads this group's channels
    // (int8: rounded up to dwords; the weights past ICg are zero).
    s.inCS = x.desc.channelStride;
    s.outCS = tensors[o].desc.channelStride;
    s.KC = int8 ? roundUp(ICg, 4) : ICg;
    s.padRowOff = padRowOff;
    s.ep = ep;
    auto shift = [&](int64_t &off) {
      if (off >= 0)
        off += g * OCg * 4;
    };
    shift(s.ep.multOff);
    shift(s.ep.scaleOff);
    shift(s.ep.biasOff);
    s.corrOff = corrOff;
    shift(s.corrOff);
    specs.push_back(packDense(
        s, [&](int64_t oc, int64_t ic, int64_t kh, int64_t kw) -> double {
          return ic < ICg
                     ? weight((((g * OCg + oc) * ICg + ic) * KH + kh) * KW + kw)
                     : 0;
        }));
  }
  // The last group's dword reads may pass the last pixel's channels.
  storages[x.storage].bytes += 64;
  std::vector<int> ins = {in};
  if (residual >= 0)
    ins.push_back(residual);
  const DenseConvSpec &s0 = specs[0];
  int64_t macs = s0.N * s0.OH * s0.OW * OC * KH * KW * ICg;
  Isa isa = target.isa;
  int64_t inEs = int8 ? 1 : 4, outEs = tensors[o].int8 ? 1 : 4;
  addLayer(op, denseKernelName(s0) + " x" + std::to_string(group) + " groups",
           int8 ? "int8" : "fp32", macs > 50000, macs, ins, {o}, [=](KB &k) {
             for (int64_t g = 0; g < group; ++g) {
               DenseConvSpec spec = specs[g];
               spec.inOff = tensors[in].desc.offset + g * ICg * inEs;
               spec.outOff = tensors[o].desc.offset + g * OCg * outEs;
               if (residual >= 0)
                 spec.ep.resOff = tensors[residual].desc.offset + g * OCg;
               emitDenseConv(k, isa, spec);
             }
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

int GraphLowering::asRows(int t, Location loc) {
  const CTensor &x = tensors[t];
  if (x.flat)
    return t;
  if (x.desc.shape.size() == 2)
    return inLayout(t, plan::Layout::NHWC, loc);
  int64_t K = x.desc.shape.back(), M = product(x.desc.shape) / K;
  std::vector<int64_t> rows = {M, K};
  if (!x.view && x.desc.layout == plan::Layout::Plain &&
      (!x.int8 || K % 4 == 0)) {
    // The same bytes as a [M, K] matrix.
    int a = alias(t, x.desc.name, rows);
    tensors[a].desc.layout = plan::Layout::NHWC;
    tensors[a].desc.channelStride = K;
    out.manifest.tensors[tensors[a].manifestIndex] = tensors[a].desc;
    return a;
  }
  // A copy with the rows padded for the int8 kernel.
  CTensor copy = x;
  copy.view = false;
  copy.vstrides.clear();
  copy.vbase = 0;
  copy.desc.shape = rows;
  copy.desc.layout = plan::Layout::NHWC;
  copy.desc.channelStride = x.int8 ? roundUp(K, 4) : K;
  int r = addTensor(copy);
  std::vector<int64_t> shape = x.desc.shape;
  addLayer(loc, nodeName(loc), "layout", "strided-copy", "layout",
           product(shape) > 4096, 0, {t}, {r}, [=](KB &k) {
             StridedMap m;
             m.shape = shape;
             m.ins = {operand(Src{t, -1, {}}, shape)};
             m.out = operand(Src{r, -1, {}}, rows);
             // Row m of the copy holds the last axis of input index m.
             m.out.strides.assign(shape.size(), 0);
             int64_t st = tensors[r].desc.channelStride;
             m.out.strides.back() = 1;
             for (size_t d = shape.size() - 1; d-- > 0;) {
               m.out.strides[d] = st;
               st *= shape[d];
             }
             emitStridedMap(k, m, nullptr);
           });
  return r;
}

LogicalResult GraphLowering::batchedProduct(Operation *op, int ta, int tb,
                                            bool transB, int o, float mult,
                                            int64_t scaleOff, int64_t biasOff,
                                            std::optional<qat::ClampAttr> act) {
  std::vector<int64_t> outShape = tensors[o].desc.shape;
  size_t rank = outShape.size();
  int64_t M = outShape[rank - 2], N = outShape[rank - 1],
          K = tensors[ta].desc.shape.back();
  std::vector<int64_t> batch(outShape.begin(), outShape.end() - 2);
  int64_t batches = product(batch);
  float lo = -std::numeric_limits<float>::infinity(), hi = -lo;
  if (act && *act) {
    lo = static_cast<float>(act->getMin());
    hi = static_cast<float>(act->getMax());
  }
  bool int8 = tensors[ta].int8;
  addLayer(
      op, int8 ? "int8-batched-matmul" : "fp32-batched-matmul",
      int8 ? "int8" : "fp32", batches * M * N * K > 50000, batches * M * N * K,
      {ta, tb}, {o}, [=](KB &k) {
        const CTensor &A = tensors[ta], &B = tensors[tb], &O = tensors[o];
        std::vector<int64_t> la = batch, lb = batch;
        la.insert(la.end(), {M, K});
        lb.insert(lb.end(), transB ? std::initializer_list<int64_t>{N, K}
                                   : std::initializer_list<int64_t>{K, N});
        StridedOperand sa = operand(Src{ta, -1, {}}, la),
                       sb = operand(Src{tb, -1, {}}, lb),
                       so = operand(Src{o, -1, {}}, outShape);
        if (transB)
          std::swap(sb.strides[rank - 2], sb.strides[rank - 1]);
        OpBuilder &bb = k.b;
        auto elem = [&](const StridedOperand &s, Value idx) {
          Value p = k.gep(s.inWeights ? k.weights : k.arena,
                          k.add(k.c(s.byteOffset + s.offset * s.elemBytes),
                                k.mul(idx, k.c(s.elemBytes))));
          Value v = k.load(s.elemBytes == 1 ? k.i8 : k.f32, p);
          return v;
        };
        auto centered = [&](Value q, int64_t zp) -> Value {
          Value i = bb.create<arith::ExtUIOp>(k.loc, k.i32, q);
          return bb.create<arith::SubIOp>(
              k.loc, i, bb.create<arith::ConstantIntOp>(k.loc, zp, 32));
        };
        auto [b0, e0] = k.share(batches * M);
        k.loop(b0, e0, 1, [&](Value r) {
          Value m = k.rem(r, k.c(M)), rest = k.div(r, k.c(M));
          Value ba = k.mul(m, k.c(sa.strides[rank - 2])),
                bo = k.mul(m, k.c(so.strides[rank - 2])), bbase = k.c(0);
          for (size_t d = rank - 2; d-- > 0;) {
            Value idx = d == 0 ? rest : k.rem(rest, k.c(batch[d]));
            if (d > 0)
              rest = k.div(rest, k.c(batch[d]));
            ba = k.add(ba, k.mul(idx, k.c(sa.strides[d])));
            bbase = k.add(bbase, k.mul(idx, k.c(sb.strides[d])));
            bo = k.add(bo, k.mul(idx, k.c(so.strides[d])));
          }
          k.loop(k.c(0), k.c(N), 1, [&](Value n) {
            Value zero =
                int8 ? bb.create<arith::ConstantIntOp>(k.loc, 0, 32).getResult()
                     : k.cf(0.f);
            Value acc = k.loop(
                k.c(0), k.c(K), 1, ValueRange{zero},
                [&](Value kk, ValueRange s) -> SmallVector<Value> {
                  Value x =
                      elem(sa, k.add(ba, k.mul(kk, k.c(sa.strides[rank - 1]))));
                  Value w = elem(
                      sb,
                      k.add(bbase, k.add(k.mul(kk, k.c(sb.strides[rank - 2])),
                                         k.mul(n, k.c(sb.strides[rank - 1])))));
                  if (int8)
                    return {bb.create<arith::AddIOp>(
                        k.loc, s[0],
                        bb.create<arith::MulIOp>(k.loc, centered(x, A.zp),
                                                 centered(w, B.zp)))};
                  return {bb.create<arith::AddFOp>(
                      k.loc, s[0], bb.create<arith::MulFOp>(k.loc, x, w))};
                })[0];
            Value y = int8
                          ? bb.create<arith::MulFOp>(
                                  k.loc,
                                  bb.create<arith::SIToFPOp>(k.loc, k.f32, acc),
                                  k.cf(mult))
                                .getResult()
                          : acc;
            if (!int8 && mult != 1.f)
              y = bb.create<arith::MulFOp>(k.loc, y, k.cf(mult));
            auto channel = [&](int64_t off) {
              return k.load(
                  k.f32, k.gep(k.weights, k.add(k.c(off), k.mul(n, k.c(4)))));
            };
            if (scaleOff >= 0)
              y = bb.create<arith::MulFOp>(k.loc, y, channel(scaleOff));
            if (biasOff >= 0)
              y = bb.create<arith::AddFOp>(k.loc, y, channel(biasOff));
            if (!std::isinf(lo))
              y = bb.create<arith::MaximumFOp>(k.loc, y, k.cf(lo));
            if (!std::isinf(hi))
              y = bb.create<arith::MinimumFOp>(k.loc, y, k.cf(hi));
            Value idx = k.add(bo, k.mul(n, k.c(so.strides[rank - 1])));
            if (O.int8)
              k.store(k.quantize(y, O.scale, O.zp, O.qmin, O.qmax),
                      k.at(O.desc.offset, idx, 1));
            else
              k.store(y, k.at(O.desc.offset, idx, 4));
          });
        });
      });
  return success();
}

LogicalResult GraphLowering::lowerQatMatMul(qat::MatMulOp op) {
  auto w = constantOf(op.getRhs());
  bool outInt8 =
      isa<quant::QuantizedType>(op.getOutput().getType().getElementType());
  auto outShape = op.getOutput().getType().getShape();
  if (!w || cast<ShapedType>(op.getRhs().getType()).getRank() != 2) {
    // Activation x activation (attention): a batched product.
    if (op.getResidual())
      return op.emitError("a residual on a matrix product is not compiled "
                          "yet");
    if (!qat::getPerTensorType(op.getRhs().getType()))
      return op.emitError("qatc compiles activation matrix products with a "
                          "per-tensor right-hand side only");
    int o = resultTensor(op.getOutput(), plan::Layout::Plain);
    const CTensor &A = tensors[tensorOf(op.getLhs())],
                  &B = tensors[tensorOf(op.getRhs())];
    float mult =
        static_cast<float>(A.desc.scale) * static_cast<float>(B.desc.scale);
    int64_t N = outShape.back(), scaleOff = -1, biasOff = -1;
    if (op.getBias() &&
        failed(addChannelConstant(op, op.getBias(), "bias", N, biasOff)))
      return failure();
    if (op.getChannelScale() &&
        failed(addChannelConstant(op, op.getChannelScale(), "channel scale", N,
                                  scaleOff)))
      return failure();
    if (op.getResidualActivation())
      return op.emitError("a residual activation without a residual");
    return batchedProduct(op, tensorOf(op.getLhs()), tensorOf(op.getRhs()),
                          op.getTransposeRhs(), o, mult, scaleOff, biasOff,
                          op.getActivation());
  }
  qat::QuantLayout wl(op.getRhs().getType());
  if (failed(requireSymmetric(op, wl)))
    return failure();
  int in = asRows(tensorOf(op.getLhs()), op.getLoc());
  const CTensor &x = tensors[in];
  auto rs = cast<ShapedType>(op.getRhs().getType()).getShape();
  bool tr = op.getTransposeRhs();
  int64_t K = tr ? rs[1] : rs[0], N = tr ? rs[0] : rs[1];
  int o = resultTensor(op.getOutput(), outInt8 && outShape.size() == 2
                                           ? plan::Layout::NHWC
                                           : plan::Layout::Plain);
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
  float lo = -std::numeric_limits<float>::infinity(), hi = -lo;
  if (act && *act) {
    lo = static_cast<float>(act->getMin());
    hi = static_cast<float>(act->getMax());
  }
  return lowerMap(
      op, {srcOf(a), srcOf(b)}, mul ? "mul" : "add",
      [=](KB &k, ArrayRef<Value> v) -> Value {
        OpBuilder &bb = k.b;
        Value y = mul ? bb.create<arith::MulFOp>(k.loc, v[0], v[1]).getResult()
                      : bb.create<arith::AddFOp>(k.loc, v[0], v[1]).getResult();
        if (!std::isinf(lo))
          y = bb.create<arith::MaximumFOp>(k.loc, y, k.cf(lo));
        if (!std::isinf(hi))
          y = bb.create<arith::MinimumFOp>(k.loc, y, k.cf(hi));
        return y;
      });
}

LogicalResult GraphLowering::lowerClamp(Operation *op, Value inV, double lo,
                                        double hi) {
  // Input and result in the same layout: one flat loop over the storage.
  plan::Layout layout =
      layoutFor(cast<ShapedType>(op->getResult(0).getType()).getShape());
  int in = inLayout(tensorOf(inV), layout, op->getLoc());
  int o = resultTensor(op->getResult(0), layout);
  const CTensor &x = tensors[in];
  int64_t count = x.desc.storedElements();
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

LogicalResult GraphLowering::lowerPool(Operation *op, Value inV,
                                       ArrayRef<int64_t> kernel,
                                       ArrayRef<int64_t> strides,
                                       ArrayRef<int64_t> pads,
                                       ArrayRef<int64_t> dilations,
                                       bool average, bool countPad) {
  if (kernel.size() != 2)
    return op->emitError("qatc compiles 2-D pooling only");
  int in = inLayout(tensorOf(inV), plan::Layout::NHWC, op->getLoc());
  int o = resultTensor(op->getResult(0), plan::Layout::NHWC);
  if (!average && tensors[in].int8 &&
      (tensors[o].zp != tensors[in].zp ||
       tensors[o].scale != tensors[in].scale))
    return op->emitError("an int8 max pool keeps its input's quantization");
  ConvSpec s;
  setWindow(s, tensors[in].desc.shape, tensors[o].desc.shape, kernel[0],
            kernel[1], strides, pads, dilations);
  int64_t C = tensors[o].channels();
  // The divisor of every output position (ONNX: the taps inside the input,
  // or inside the padded input with count_include_pad).
  int64_t divOff = -1;
  if (average) {
    std::vector<float> divisor(s.OH * s.OW);
    int64_t PB = pads.size() > 2 ? pads[2] : s.PT,
            PR = pads.size() > 3 ? pads[3] : s.PL;
    auto taps = [&](int64_t o, int64_t S, int64_t P, int64_t K, int64_t D,
                    int64_t in, int64_t padEnd) {
      int64_t n = 0;
      for (int64_t t = 0; t < K; ++t) {
        int64_t i = o * S - P + t * D;
        n += countPad ? (i < in + padEnd) : (i >= 0 && i < in);
      }
      return n;
    };
    for (int64_t oh = 0; oh < s.OH; ++oh)
      for (int64_t ow = 0; ow < s.OW; ++ow)
        divisor[oh * s.OW + ow] = static_cast<float>(
            std::max<int64_t>(taps(oh, s.SH, s.PT, s.KH, s.DH, s.H, PB) *
                                  taps(ow, s.SW, s.PL, s.KW, s.DW, s.W, PR),
                              1));
    divOff = addArray(divisor);
  }
  addLayer(
      op, average ? "avgpool" : "maxpool", tensors[in].int8 ? "int8" : "fp32",
      true, 0, {in}, {o}, [=](KB &k) {
        const CTensor &X = tensors[in], &O = tensors[o];
        int64_t es = X.int8 ? 1 : 4;
        Type et = X.int8 ? Type(k.i8) : Type(k.f32);
        OpBuilder &bb = k.b;
        auto [b0, e0] = k.share(s.N * s.OH);
        k.loop(b0, e0, 1, [&](Value r) {
          Value n = k.div(r, k.c(s.OH)), oh = k.rem(r, k.c(s.OH));
          k.loop(k.c(0), k.c(s.OW), 1, [&](Value ow) {
            k.loop(k.c(0), k.c(C), 1, [&](Value ch) {
              Value m;
              if (average)
                m = k.cf(0.f);
              else
                m = X.int8 ? bb.create<arith::ConstantIntOp>(k.loc, 0, 8)
                                 .getResult()
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
                  Value next;
                  if (average) {
                    if (X.int8) // q - z, exact in f32
                      v = bb.create<arith::SIToFPOp>(
                          k.loc, k.f32,
                          bb.create<arith::SubIOp>(
                              k.loc, bb.create<arith::ExtUIOp>(k.loc, k.i32, v),
                              bb.create<arith::ConstantIntOp>(k.loc, X.zp,
                                                              32)));
                    next = bb.create<arith::AddFOp>(k.loc, m, v);
                  } else {
                    next =
                        X.int8
                            ? bb.create<arith::MaxUIOp>(k.loc, m, v).getResult()
                            : bb.create<arith::MaximumFOp>(k.loc, m, v)
                                  .getResult();
                  }
                  m = k.select(ok, next, m);
                }
              if (average) {
                Value d = k.load(
                    k.f32, k.gep(k.weights,
                                 k.add(k.c(divOff),
                                       k.mul(k.add(k.mul(oh, k.c(s.OW)), ow),
                                             k.c(4)))));
                if (X.int8) {
                  // As the reference: the mean in double, times the scale.
                  FloatType f64 = bb.getF64Type();
                  Value md = bb.create<arith::DivFOp>(
                      k.loc, bb.create<arith::ExtFOp>(k.loc, f64, m),
                      bb.create<arith::ExtFOp>(k.loc, f64, d));
                  md = bb.create<arith::MulFOp>(
                      k.loc, md,
                      bb.create<arith::ConstantFloatOp>(
                          k.loc, llvm::APFloat(X.desc.scale), f64));
                  m = bb.create<arith::TruncFOp>(k.loc, k.f32, md);
                } else {
                  m = bb.create<arith::DivFOp>(k.loc, m, d);
                }
                if (O.int8)
                  m = k.quantize(m, O.scale, O.zp, O.qmin, O.qmax);
              }
              Value opix =
                  k.add(k.mul(k.add(k.mul(n, k.c(s.OH)), oh), k.c(s.OW)), ow);
              k.store(m, k.at(O.desc.offset,
                              k.add(k.mul(opix, k.c(O.desc.channelStride)), ch),
                              O.int8 ? 1 : 4));
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
  if (!x.view && x.desc.layout == plan::Layout::NHWC &&
      x.desc.shape.size() == 4 && shape.size() == 2 &&
      x.dim(2) * x.dim(3) == 1 && shape[1] == x.dim(1)) {
    int a = alias(in, nameOf(res), shape);
    valueTensor[res] = a;
    return success();
  }
  // [N, C, H, W] NHWC -> [N, C*H*W] read only by matrix products: a view;
  // the product's packed weights absorb the order.
  bool onlyProducts = llvm::all_of(res.getUsers(), [](Operation *u) {
    return isa<qat::MatMulOp, onnx::GemmOp>(u);
  });
  if (!x.view && x.desc.layout == plan::Layout::NHWC &&
      x.desc.shape.size() == 4 && shape.size() == 2 && shape[0] == x.dim(0) &&
      x.dim(0) == 1 && onlyProducts && !res.use_empty()) {
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
  bool rowMajorBytes =
      !x.view && !x.flat &&
      (x.desc.layout == plan::Layout::Plain ||
       (x.desc.shape.size() == 2 && x.desc.channelStride == x.dim(1)));
  if (!rowMajorBytes && !x.flat) {
    // A view of the same storage when the strides allow (splitting the
    // channels of NHWC data, merging contiguous dimensions)...
    if (auto st = reshapedStrides(x.desc.shape, stridesOf(x), shape)) {
      makeView(in, res, *st, x.view ? x.vbase : 0);
      return success();
    }
    // ... else one copy into the result's layout, looping over the common
    // refinement of both shapes.
    std::vector<int64_t> loop, sIn, sOut;
    int o = resultTensor(res, layoutFor(shape));
    if (refineShapes(x.desc.shape, stridesOf(x), shape, stridesOf(tensors[o]),
                     loop, sIn, sOut)) {
      addLayer(op, "strided-copy", "layout", product(shape) > 4096, 0, {in},
               {o}, [=](KB &k) {
                 StridedMap m;
                 m.shape = loop;
                 m.out = operand(Src{o, -1, {}}, tensors[o].desc.shape);
                 m.out.strides = sOut;
                 m.ins = {operand(Src{in, -1, {}}, tensors[in].desc.shape)};
                 m.ins[0].strides = sIn;
                 emitStridedMap(k, m, nullptr);
               });
      return success();
    }
    // (The result tensor stays unused: it takes no arena space.)
  }
  // Anything else: plain row-major order is reshape-invariant.
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

LogicalResult GraphLowering::lowerFloatMatMul(onnx::MatMulOp op) {
  auto w = constantOf(op.getB());
  auto bs = cast<ShapedType>(op.getB().getType()).getShape();
  int o = resultTensor(op.getY(), plan::Layout::Plain);
  if (!w || bs.size() != 2) {
    std::optional<std::pair<float, float>> act = foldActivation(op.getY(), o);
    std::optional<qat::ClampAttr> clamp;
    if (act)
      clamp = qat::ClampAttr::get(op.getContext(), act->first, act->second);
    return batchedProduct(op, tensorOf(op.getA()), tensorOf(op.getB()), false,
                          o, 1.f, -1, -1, clamp);
  }
  if (cast<ShapedType>(op.getA().getType()).getRank() < 2)
    return op.emitError("qatc compiles MatMul with a matrix left-hand side");
  std::vector<float> wf = floatsOf(*w);
  int in = asRows(tensorOf(op.getA()), op.getLoc());
  int64_t K = bs[0], N = bs[1];
  Epilogue ep;
  foldActivation(op.getY(), o, ep);
  return matrixProduct(
      op, false, in, o, K, N, ep, -1,
      [wf, N](int64_t n, int64_t k) -> double { return wf[k * N + n]; });
}

LogicalResult GraphLowering::lowerGemm(onnx::GemmOp op) {
  float alpha = op.getAlpha().convertToFloat(),
        beta = op.getBeta().convertToFloat();
  int a = tensorOf(op.getA());
  if (op.getTransA()) {
    // A transposed view; the product reads it through a copy.
    CTensor v = tensors[a];
    std::vector<int64_t> st = stridesOf(v);
    std::swap(st[0], st[1]);
    std::swap(v.desc.shape[0], v.desc.shape[1]);
    v.vbase = v.view ? v.vbase : 0;
    v.view = true;
    v.vstrides = st;
    v.flat = false;
    v.manifestIndex = -1;
    tensors.push_back(v);
    a = tensors.size() - 1;
  }
  auto bs = cast<ShapedType>(op.getB().getType()).getShape();
  bool tr = op.getTransB();
  int64_t K = tr ? bs[1] : bs[0], N = tr ? bs[0] : bs[1];
  int o = resultTensor(op.getY(), plan::Layout::Plain);
  std::vector<float> bias;
  if (op.getC()) {
    auto c = constantOf(op.getC());
    if (!c)
      return op.emitError("qatc compiles Gemm with a constant C only");
    bias = floatsOf(*c);
    if (bias.size() == 1)
      bias.assign(N, bias[0]);
    if (static_cast<int64_t>(bias.size()) != N)
      return op.emitError("qatc compiles Gemm with a per-column C only");
    for (float &x : bias)
      x *= beta;
  }
  Epilogue ep;
  if (!bias.empty())
    ep.biasOff = addChannels(bias, N);
  auto w = constantOf(op.getB());
  if (!w) {
    std::optional<std::pair<float, float>> act = foldActivation(op.getY(), o);
    std::optional<qat::ClampAttr> clamp;
    if (act)
      clamp = qat::ClampAttr::get(op.getContext(), act->first, act->second);
    return batchedProduct(op, a, tensorOf(op.getB()), tr, o, alpha, -1,
                          ep.biasOff, clamp);
  }
  std::vector<float> wf = floatsOf(*w);
  // alpha folds into the weights.
  if (alpha != 1.f)
    for (float &x : wf)
      x *= alpha;
  int in = asRows(a, op.getLoc());
  foldActivation(op.getY(), o, ep);
  return matrixProduct(op, false, in, o, K, N, ep, -1,
                       [wf, tr, K, N](int64_t n, int64_t k) -> double {
                         return wf[tr ? n * K + k : k * N + n];
                       });
}

LogicalResult GraphLowering::run() {
  // Graph inputs: plain, as the user gives them.
  std::vector<std::string> inNames = ref::getInputNames(func);
  if (func.getNumArguments() == 0)
    return func.emitError("the model has no inputs (its outputs are "
                          "constants): there is nothing to compile");
  for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !type.getElementType().isF32())
      return func.emitError("qatc compiles models with f32 inputs only; "
                            "input ")
             << i << " is " << arg.getType();
    if (type.getNumElements() == 0)
      return func.emitError("qatc compiles models whose inputs have elements; "
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
              return lowerMean(o, o.getInput(), {2, 3});
            })
            .Case<onnx::GlobalAveragePoolOp>([&](auto o) {
              return lowerMean(o, o.getX(), {2, 3});
            })
            .Case<onnx::ReduceMeanOp>(
                [&](auto o) { return lowerMean(o, o.getData(), o.getAxes()); })
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
            .Case<onnx::PadOp>([&](auto o) { return lowerPad(o); })
            .Case<onnx::BatchNormalizationOp>(
                [&](auto o) { return lowerBatchNorm(o); })
            .Case<onnx::SoftmaxOp>([&](auto o) { return lowerSoftmax(o); })
            .Case<onnx::LayerNormalizationOp>(
                [&](auto o) { return lowerLayerNorm(o); })
            .Case<onnx::PowOp>([&](auto o) { return lowerPow(o); })
            .Case<onnx::SubOp>([&](auto o) {
              return lowerBinary(o, "sub", [](KB &k, ArrayRef<Value> v) {
                return k.b.create<arith::SubFOp>(k.loc, v[0], v[1]);
              });
            })
            .Case<onnx::MulOp>([&](auto o) {
              return lowerBinary(o, "mul", [](KB &k, ArrayRef<Value> v) {
                return k.b.create<arith::MulFOp>(k.loc, v[0], v[1]);
              });
            })
            .Case<onnx::DivOp>([&](auto o) {
              return lowerBinary(o, "div", [](KB &k, ArrayRef<Value> v) {
                return k.b.create<arith::DivFOp>(k.loc, v[0], v[1]);
              });
            })
            .Case<onnx::SigmoidOp>([&](auto o) {
              return lowerUnary(o, "sigmoid", [](KB &k, ArrayRef<Value> v) {
                // 1 / (1 + exp(-x)), as the reference.
                OpBuilder &b = k.b;
                Value e = b.create<math::ExpOp>(
                    k.loc, b.create<arith::NegFOp>(k.loc, v[0]));
                return b.create<arith::DivFOp>(
                    k.loc, k.cf(1.f),
                    b.create<arith::AddFOp>(k.loc, k.cf(1.f), e));
              });
            })
            .Case<onnx::HardSigmoidOp>([&](auto o) {
              float alpha = o.getAlpha().convertToFloat(),
                    beta = o.getBeta().convertToFloat();
              return lowerUnary(
                  o, "hardsigmoid", [=](KB &k, ArrayRef<Value> v) -> Value {
                    OpBuilder &b = k.b;
                    Value y = b.create<arith::AddFOp>(
                        k.loc,
                        b.create<arith::MulFOp>(k.loc, v[0], k.cf(alpha)),
                        k.cf(beta));
                    y = b.create<arith::MinimumFOp>(k.loc, y, k.cf(1.f));
                    return b.create<arith::MaximumFOp>(k.loc, y, k.cf(0.f));
                  });
            })
            .Case<onnx::HardSwishOp>([&](auto o) {
              return lowerUnary(
                  o, "hardswish", [](KB &k, ArrayRef<Value> v) -> Value {
                    OpBuilder &b = k.b;
                    Value y = b.create<arith::AddFOp>(
                        k.loc,
                        b.create<arith::MulFOp>(k.loc, v[0], k.cf(1.f / 6.f)),
                        k.cf(0.5f));
                    y = b.create<arith::MinimumFOp>(k.loc, y, k.cf(1.f));
                    y = b.create<arith::MaximumFOp>(k.loc, y, k.cf(0.f));
                    return b.create<arith::MulFOp>(k.loc, v[0], y);
                  });
            })
            .Case<onnx::ErfOp>([&](auto o) {
              return lowerUnary(o, "erf", [](KB &k, ArrayRef<Value> v) {
                return k.b.create<math::ErfOp>(k.loc, v[0]);
              });
            })
            .Case<onnx::TanhOp>([&](auto o) {
              return lowerUnary(o, "tanh", [](KB &k, ArrayRef<Value> v) {
                return k.b.create<math::TanhOp>(k.loc, v[0]);
              });
            })
            .Case<onnx::ExpOp>([&](auto o) {
              return lowerUnary(o, "exp", [](KB &k, ArrayRef<Value> v) {
                return k.b.create<math::ExpOp>(k.loc, v[0]);
              });
            })
            .Case<onnx::SqrtOp>([&](auto o) {
              return lowerUnary(o, "sqrt", [](KB &k, ArrayRef<Value> v) {
                return k.b.create<math::SqrtOp>(k.loc, v[0]);
              });
            })
            .Case<onnx::LeakyReluOp>([&](auto o) {
              float alpha = o.getAlpha().convertToFloat();
              return lowerUnary(
                  o, "leakyrelu", [=](KB &k, ArrayRef<Value> v) -> Value {
                    OpBuilder &b = k.b;
                    Value neg = b.create<arith::CmpFOp>(
                        k.loc, arith::CmpFPredicate::OLT, v[0], k.cf(0.f));
                    return k.select(
                        neg, b.create<arith::MulFOp>(k.loc, v[0], k.cf(alpha)),
                        v[0]);
                  });
            })
            .Case<onnx::LogOp>([&](auto o) {
              return lowerUnary(o, "log", [](KB &k, ArrayRef<Value> v) {
                return k.b.create<math::LogOp>(k.loc, v[0]);
              });
            })
            .Case<onnx::AbsOp>([&](auto o) {
              return lowerUnary(o, "abs", [](KB &k, ArrayRef<Value> v) {
                return k.b.create<math::AbsFOp>(k.loc, v[0]);
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
            .Case<onnx::NegOp>([&](auto o) {
              return lowerUnary(o, "neg", [](KB &k, ArrayRef<Value> v) {
                return k.b.create<arith::NegFOp>(k.loc, v[0]);
              });
            })
            .Case<onnx::ReciprocalOp>([&](auto o) {
              return lowerUnary(o, "reciprocal", [](KB &k, ArrayRef<Value> v) {
                return k.b.create<arith::DivFOp>(k.loc, k.cf(1.f), v[0]);
              });
            })
            .Case<onnx::IdentityOp>([&](auto o) {
              valueTensor[o->getResult(0)] = tensorOf(o->getOperand(0));
              return success();
            })
            .Case<onnx::SqueezeOp, onnx::UnsqueezeOp>(
                [&](Operation *o) { return lowerReshape(o, o->getOperand(0)); })
            .Case<qat::ReshapeOp>(
                [&](auto o) { return lowerReshape(o, o.getInput()); })
            .Case<onnx::FlattenOp>(
                [&](auto o) { return lowerReshape(o, o.getInput()); })
            .Case<onnx::ReshapeOp>(
                [&](auto o) { return lowerReshape(o, o.getData()); })
            .Case<onnx::ConvOp>([&](auto o) { return lowerFloatConv(o); })
            .Case<onnx::GemmOp>([&](auto o) { return lowerGemm(o); })
            .Case<onnx::MatMulOp>([&](auto o) { return lowerFloatMatMul(o); })
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
                if (constantError)
                  return failure();
                // A graph input or an earlier output returned again gets a
                // tensor of its own (its name is this output's).
                auto &io = out.manifest;
                int mi = tensors[t].manifestIndex;
                if (llvm::is_contained(io.inputs, mi) ||
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
