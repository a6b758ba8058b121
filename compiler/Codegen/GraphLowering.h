//===- GraphLowering.h - a qat/onnx function to layer functions -*- C++ -*-===//
//
// Internal to compiler/Codegen. GraphLowering walks the function after
// `qat-lower` in order and gives each op a layer: a kernel spec, the tensors
// it reads and writes, and the packed constants it needs. Activations are
// NHWC inside the graph (channels padded to a multiple of 4 for int8 so that
// 4 input channels form one VNNI dword); layout conversions are layers of
// their own, inserted only where a graph input or output, or a reshape,
// needs the plain ONNX order. Quantized tensors are held as u8 with an
// offset (s8 + 128), so every int8 kernel reads unsigned activations. The
// arena is planned once all lifetimes are known; then every layer function
// is emitted with its final offsets.
//
// The handlers live in three files: GraphLowering.cpp (tensors, layers,
// arena, the op walk), ConvLowering.cpp (convolutions and matrix products)
// and MapLowering.cpp (elementwise ops, data movement, pooling, reductions).
//
//===----------------------------------------------------------------------===//

#ifndef QATC_CODEGEN_GRAPHLOWERING_H
#define QATC_CODEGEN_GRAPHLOWERING_H

#include "KernelBuilder.h"

#include "qatc/Dialect/Onnx/OnnxOps.h"
#include "qatc/Dialect/Qat/QatOps.h"
#include "qatc/Reference/Evaluator.h"
#include "qatc/Support/Locations.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <deque>
#include <functional>
#include <map>
#include <memory>

namespace qatc::codegen::lowering {

using namespace mlir;

inline int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/// A per-tensor int8 type's parameters in the plan's stored domain: u8,
/// signed int8 offset by 128.
struct StoredQuant {
  int64_t offset = 0, zp = 0, qmin = 0, qmax = 255;
  float scale = 1;
};
inline StoredQuant storedQuant(const qat::QuantLayout &q) {
  StoredQuant s;
  s.offset = q.type.isSigned() ? 128 : 0;
  s.zp = q.zeroPoints[0] + s.offset;
  s.qmin = q.qmin + s.offset;
  s.qmax = q.qmax + s.offset;
  s.scale = static_cast<float>(q.scales[0]);
  return s;
}

/// The static shape of a tensor value.
inline ArrayRef<int64_t> shapeOf(Value v) {
  return cast<ShapedType>(v.getType()).getShape();
}

/// A tensor of the compiled graph: where and how it is stored.
struct CTensor {
  plan::TensorDesc desc;
  int storage = -1;
  /// Bytes into the storage: a channel slice of a concatenation's buffer
  /// (ConcatSlices), which its producer writes in place.
  int64_t storageOffset = 0;
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
  /// An int32 / int64 tensor (TopK and ArgMax indices and what is computed
  /// from them); always plain.
  bool isInt() const {
    return desc.type == plan::ElemType::I32 || desc.type == plan::ElemType::I64;
  }
  int64_t channels() const { return desc.shape.size() > 1 ? desc.shape[1] : 1; }
  /// The channel stride of NHWC data of its own: the channels (int8: in
  /// whole dwords).
  int64_t packedChannelStride() const {
    return int8 ? roundUp(channels(), 4) : channels();
  }
  /// Not a channel slice of a wider buffer (planConcatSlices): NHWC with its
  /// own channel stride, or plain.
  bool packedChannels() const {
    return desc.layout != plan::Layout::NHWC ||
           desc.channelStride == packedChannelStride();
  }
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
  /// A constant's element in the weights blob: f32, or (isInt) int64.
  bool isInt = false;
};

/// A float scalar body of a strided kernel.
using ScalarFn = std::function<Value(KB &, ArrayRef<Value>)>;

/// The f32 arithmetic of an elementwise op (Sigmoid, Mul, Clip, ...) on
/// scalars or vectors alike; nullopt for ops that are not elementwise f32
/// math. PointwiseFusion.cpp.
std::optional<ScalarFn> elementwiseBody(Operation *op);
/// The kernel name of an elementwise op's layer ("sigmoid").
std::string elementwiseKernel(Operation *op);

/// Elementwise ops that run as one: inside a producer's epilogue or as one
/// map layer. Only `exit`, the last op's result, is used outside.
struct Chain {
  std::vector<Operation *> ops; ///< block order; a qat.quantize only last
  Value exit;
};

/// An operand of a chain step: an earlier value (an input or a step's
/// result), a scalar constant, or a per-channel constant in the weights.
struct ChainArg {
  enum Kind { Slot, Scalar, Channel } kind = Slot;
  int slot = 0;
  float value = 0;
  int64_t offset = -1;
  /// A Channel constant's smallest and largest value (ChainProgram::ranges).
  float lo = 0, hi = 0;
};
/// [lo, hi] of the values a chain step can take (both finite).
using ChainRange = std::pair<double, double>;
struct ChainStep {
  ScalarFn fn;
  std::vector<ChainArg> args;
  /// The step's range from its operands' (ChainProgram::ranges); unset where
  /// the op has no rule here.
  std::function<std::optional<ChainRange>(ArrayRef<ChainRange>)> range;
};
/// A chain compiled to steps, independent of the IR: values 0..inputs-1
/// are the inputs, then one per step; `result` is the chain's value (a
/// final quantize is the caller's).
struct ChainProgram {
  int inputs = 0;
  std::vector<ChainStep> steps;
  int result = 0;
  std::string name; ///< "sigmoid+mul+quantize"
  /// A step rounds more than once (Epilogue::chainApproximate).
  bool approximate = false;
  /// The chain ends in a QuantizeLinear, or its result reaches only
  /// quantizations (KB::quantizedChain while it runs).
  bool quantized = false;
  /// The range of every value (the inputs, then each step's) for a single
  /// input in `in`, by interval arithmetic over the steps; nullopt from a
  /// step with no rule on, and where a range is not finite. They hold for
  /// the exact values; an approximate step's result may leave its range by
  /// its ulps.
  std::vector<std::optional<ChainRange>>
  ranges(std::optional<ChainRange> in) const;
  /// The chain on `in` (scalars or 16-lane vectors); `channel(offset)` loads
  /// a per-channel constant.
  Value run(KB &k, ArrayRef<Value> in,
            llvm::function_ref<Value(int64_t)> channel) const;
};

/// Ops folded into the layer that computes a value (foldChainAfter): the
/// chain after it, if any, and the value the layer then writes.
struct FoldedChain {
  std::shared_ptr<ChainProgram> chain;
  Value exit;                 ///< the result the fused layer writes
  SmallVector<Location> locs; ///< the folded nodes (a softmax, the chain)
  /// The layer's location: `op`'s, with the folded nodes'.
  Location locOf(Operation *op) const {
    if (locs.empty())
      return op->getLoc();
    SmallVector<Location> all = {op->getLoc()};
    all.append(locs.begin(), locs.end());
    return FusedLoc::get(op->getContext(), all);
  }
  /// `base` with the chain's name ("fp32-softmax 16+quantize").
  std::string kernel(std::string base) const {
    return chain ? base + "+" + chain->name : base;
  }
};

inline std::vector<int64_t> rowMajor(ArrayRef<int64_t> shape) {
  std::vector<int64_t> st(shape.size(), 1);
  int64_t acc = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    st[d] = acc;
    acc *= shape[d];
  }
  return st;
}

inline int64_t product(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// The strides of `newShape` over the same elements as `shape` with
/// `strides` (row-major order), when no copy is needed: merged dimensions
/// must be contiguous in each other.
inline std::optional<std::vector<int64_t>>
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
inline bool refineShapes(ArrayRef<int64_t> as, ArrayRef<int64_t> ast,
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
  std::vector<int> reads, writes; ///< storages
};

/// The values of a constant operand (onnx.Constant / qat.constant).
inline std::optional<ref::Tensor> constantOf(Value v) {
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

inline int64_t intAt(const ref::Tensor &t, int64_t i);

/// The values of a constant as f32, whatever its element type.
inline std::vector<float> floatsOf(const ref::Tensor &t) {
  std::vector<float> out(t.numElements());
  for (int64_t i = 0; i < t.numElements(); ++i)
    out[i] = t.dtype() == ref::DType::F64
                 ? static_cast<float>(t.data<double>()[i])
             : t.dtype() == ref::DType::F32 ? t.data<float>()[i]
                                            : static_cast<float>(intAt(t, i));
  return out;
}

inline int64_t intAt(const ref::Tensor &t, int64_t i) {
  switch (t.dtype()) {
  case ref::DType::I64:
    return t.data<int64_t>()[i];
  case ref::DType::I8:
    return t.data<int8_t>()[i];
  case ref::DType::U8:
    return t.data<uint8_t>()[i];
  case ref::DType::I32:
    return t.data<int32_t>()[i];
  case ref::DType::I16:
    return t.data<int16_t>()[i];
  case ref::DType::U16:
    return t.data<uint16_t>()[i];
  case ref::DType::U32:
    return t.data<uint32_t>()[i];
  case ref::DType::U64:
    return static_cast<int64_t>(t.data<uint64_t>()[i]);
  case ref::DType::Bool:
    return t.data<uint8_t>()[i] != 0;
  default:
    return 0;
  }
}

/// An int32 / int64 value (not bool, not quantized).
/// An integer type held wider inside a plan: 8- and 16-bit integers of
/// either signedness in int32, uint32 in int64 (each value extended as its
/// type says; arithmetic wraps back to the type after every op). Returns
/// {bits, unsigned}.
inline std::optional<std::pair<unsigned, bool>> narrowInt(Type t) {
  auto it = dyn_cast<IntegerType>(t);
  if (!it || it.getWidth() == 1 || it.getWidth() > 32 ||
      (it.getWidth() == 32 && !it.isUnsigned()))
    return std::nullopt;
  return std::make_pair(it.getWidth(), it.isUnsigned());
}

/// An element type compiled plans compute on: f32, bool, integers (but
/// uint64: narrowInt and 32/64-bit signless) and quantized int8.
inline bool isCompiledType(Type t) {
  return t.isF32() || t.isInteger(1) || t.isSignlessInteger(32) ||
         t.isSignlessInteger(64) || narrowInt(t).has_value() ||
         isa<quant::QuantizedType>(t);
}

/// The plan element type of integers of type `t` at the graph boundary.
inline plan::ElemType boundaryIntType(Type t) {
  auto it = cast<IntegerType>(t);
  bool u = it.isUnsigned();
  switch (it.getWidth()) {
  case 8:
    return u ? plan::ElemType::U8 : plan::ElemType::I8;
  case 16:
    return u ? plan::ElemType::U16 : plan::ElemType::I16;
  case 32:
    return u ? plan::ElemType::U32 : plan::ElemType::I32;
  default:
    return plan::ElemType::I64;
  }
}

/// The element type integers of type `t` are held in inside a plan.
inline plan::ElemType heldIntType(Type t) {
  auto it = cast<IntegerType>(t);
  return it.getWidth() == 64 || (it.getWidth() == 32 && it.isUnsigned())
             ? plan::ElemType::I64
             : plan::ElemType::I32;
}

/// `x` (an i64 scalar) wrapped to `t` when `t` is held narrower than i64
/// (narrowInt): its low bits, zero- or sign-extended again.
Value wrapToType(KB &k, Value x, Type t);

inline bool isIntegerValue(Value v) {
  auto it =
      dyn_cast<IntegerType>(cast<ShapedType>(v.getType()).getElementType());
  return it && it.getWidth() > 1;
}

/// The ONNX node a (possibly fused) location is mostly about: its first
/// node that is not a QuantizeLinear / DequantizeLinear.
inline std::optional<OnnxLocInfo> mainNode(Location loc) {
  auto infos = getOnnxLocInfos(loc);
  for (const OnnxLocInfo &i : infos)
    if (i.index >= 0 && i.kind != "QuantizeLinear" &&
        i.kind != "DequantizeLinear")
      return i;
  if (!infos.empty())
    return infos.front();
  return std::nullopt;
}

inline std::string nodeName(Location loc) {
  auto info = mainNode(loc);
  return info ? info->name : "?";
}

inline std::string opTypeOf(Location loc, Operation *op) {
  auto info = mainNode(loc);
  if (info && info->index >= 0)
    return info->kind;
  return op->getName().getStringRef().str();
}

class GraphLowering {
public:
  /// `modelType` is the function type the model declares: `func`'s own,
  /// unless `func` is a copy with f64 demoted to f32, whose f64 inputs and
  /// outputs then convert at the boundary.
  GraphLowering(func::FuncOp func, FunctionType modelType, const Target &target,
                LoweredGraph &out)
      : func(func), modelType(modelType), target(target), out(out) {}
  LogicalResult run();

private:
  // Tensors and storage.
  /// Registers `t` with storage of its own, sized for its layout.
  int addTensor(CTensor t);
  int newTensor(std::string name, ArrayRef<int64_t> shape, bool int8,
                plan::Layout layout, Type quantType = {});
  /// A plain int32 / int64 tensor.
  int newIntTensor(std::string name, ArrayRef<int64_t> shape,
                   plan::ElemType type);
  /// An integer constant read by strided kernels, as int64 in the weights.
  Src intSrcOf(Value v);
  /// An integer elementwise layer over int64 values (int32 operands are
  /// widened, an int32 result narrowed): Div, Mod, Add, Sub, Mul, Max,
  /// Min and Casts between integer types and f32.
  LogicalResult lowerIntMap(Operation *op, std::vector<Src> ins,
                            std::string kernel, ScalarFn fn);
  /// An elementwise op of elementwiseBody on f32 / int8 operands, with the
  /// chain after it when there is one (tryFusedMap).
  LogicalResult lowerPointwise(Operation *op);
  /// TopK of f32 data: values (f32) and indices (int64).
  LogicalResult lowerTopK(onnx::TopKOp op);
  /// The tensor of op result `res` (int8 when its type is quantized); a
  /// channel slice of a concatenation's buffer when planConcatSlices chose
  /// one for it and `layout` is NHWC.
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
  /// Where the int8 convolution being lowered began adding its constants
  /// (its epilogue arrays come before the lowering of the conv itself):
  /// the depthwise kernel prefetches them from there.
  int64_t convConstantsFrom = INT64_MAX;
  template <typename T> int64_t addArray(const std::vector<T> &v) {
    return addWeights(v.data(), v.size() * sizeof(T));
  }
  /// A copy of the per-channel array of 4-byte elements at weights offset
  /// `off` (`channels` of them) with its first `count` channels in
  /// interleave64Index's order.
  int64_t interleavedCopy(int64_t off, int64_t channels, int64_t count);
  /// `ep` reading interleavedCopy's of its per-channel arrays.
  void interleaveChannels(Epilogue &ep, int64_t channels, int64_t count);
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
  /// [min, max] of sum_i w(i) * (x_i - zx) over stored inputs x_i in [0,
  /// 255]: an int8 kernel's accumulator for weights w(0 .. n-1).
  static std::pair<int64_t, int64_t>
  accumulatorRange(int64_t zx, int64_t n,
                   llvm::function_ref<int64_t(int64_t)> w) {
    int64_t lo = 0, hi = 0;
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = w(i);
      lo += std::min<int64_t>(v * (0 - zx), v * (255 - zx));
      hi += std::max<int64_t>(v * (0 - zx), v * (255 - zx));
    }
    return {lo, hi};
  }
  /// Sets Epilogue::chainInputRange, the range of the chain's input over
  /// every accumulator of its channels (accRange), and chainQuotientFits
  /// where the chain's result over it divided by the output scale stays
  /// well inside int32. `channel(off, c)` reads a per-channel f32.
  void
  boundChain(Epilogue &ep, int64_t channels,
             llvm::function_ref<std::pair<int64_t, int64_t>(int64_t)> accRange,
             llvm::function_ref<float(int64_t, int64_t)> channel);
  /// The one-step requantization of `ep` (Epilogue::foldMulOff), where
  /// OneStepRequant proves it exact for every channel over the accumulators
  /// its weights allow (`accRange`: channel -> [min, max]); else `ep` keeps
  /// the two-step form. With a residual add (midQuant) the first step is
  /// the conv's own quantization and the second the add's (foldResidualAdd),
  /// each folded where it is proven.
  void foldRequantization(
      Epilogue &ep, int64_t channels,
      llvm::function_ref<std::pair<int64_t, int64_t>(int64_t)> accRange);
  /// The one-step residual add of `ep` (Epilogue::addFold), where OneStepAdd
  /// proves it exact over every pair of stored operands.
  void foldResidualAdd(Epilogue &ep);
  void fillActivation(Epilogue &ep, std::optional<qat::ClampAttr> act,
                      bool post);
  /// The epilogue of a qat.conv / qat.matmul with input `x` and weights
  /// `wl`: accumulator scales, bias, channel scale, clamps (the output part
  /// comes from epilogueOutput).
  template <typename OpTy>
  LogicalResult linearEpilogue(OpTy op, const CTensor &x,
                               const qat::QuantLayout &wl, int64_t channels,
                               Epilogue &ep);
  /// The least stored byte (u8, signed int8 offset by 128) quantized `v`
  /// can hold: its type's, or its zero point where the ops that compute it
  /// prove its real values non-negative (a clamp at 0 in an epilogue or on
  /// the integers; pooling, data movement and requantization of such
  /// values; a quantization of a nonNegativeFloat value). 0 for anything
  /// else.
  int64_t storedFloor(Value v);
  /// The float `v` is never negative (nor NaN): a Relu's output, an int8
  /// product's or sum's f32 result clamped at 0 in its epilogue, a
  /// dequantized value at or above its zero point, and data movement,
  /// concatenation, max pooling and means of such values. A quantization
  /// of it then stores its zero point or more (storedFloor): ShuffleNetV2's
  /// channel-shuffled concatenations of Relu outputs.
  bool nonNegativeFloat(Value v);
  /// storedFloor(v) is at least v's zero point: its real values are
  /// non-negative.
  bool storedNonNegative(Value v);
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

  // Pointwise fusion (PointwiseFusion.cpp).
  /// The longest chain of f32 elementwise ops (and a final per-tensor
  /// qat.quantize) fed by `seed` (epilogue mode: its other operands are
  /// scalar constants or constants per channel along `channelAxis`) or
  /// starting at `first` (map mode: any operands lowered before `first`)
  /// whose values, but the last, are used only inside it. Map mode needs two
  /// ops or more.
  std::optional<Chain> matchChain(Value seed, Operation *first,
                                  int64_t channelAxis);
  /// `c` as steps; map mode (`mapInputs`) collects the non-scalar operands
  /// from outside the chain as inputs after none, epilogue mode has `seed`
  /// as input 0 and puts per-channel constants in the weights.
  ChainProgram chainProgram(const Chain &c, Value seed, int64_t channelAxis,
                            std::vector<Src> *mapInputs);
  /// The output tensor of a producer (conv, matrix product) whose result is
  /// `v`: the exit of the chain after `v`, which `ep` then computes, or `v`'s
  /// own tensor; `ep` stores to it (fillEpilogueOut).
  int epilogueOutput(Value v, llvm::function_ref<plan::Layout(Value)> layout,
                     int64_t channelAxis, Epilogue &ep);
  int epilogueOutput(Value v, plan::Layout layout, int64_t channelAxis,
                     Epilogue &ep) {
    return epilogueOutput(
        v, [layout](Value) { return layout; }, channelAxis, ep);
  }
  /// Elementwise op `op` and the chain after it as one map layer; nullopt
  /// when no chain of two or more ops starts there.
  std::optional<LogicalResult> tryFusedMap(Operation *op);

  // Op handlers.
  LogicalResult lowerQuantize(qat::QuantizeOp op);
  LogicalResult lowerDequantize(qat::DequantizeOp op);
  /// int8 -> int8 with new parameters: Q(DQ(q)) in f32, as the reference.
  LogicalResult lowerRequantize(qat::RequantizeOp op);
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
  /// lowerPool's max pooling: per output pixel, the taps' pointers once,
  /// then 16 channels at a time.
  LogicalResult lowerMaxPool(Operation *op, int in, int out,
                             const ConvSpec &window);
  LogicalResult lowerReshape(Operation *op, Value in);
  LogicalResult lowerFloatConv(onnx::ConvOp op);
  LogicalResult lowerGemm(onnx::GemmOp op);
  /// A strided elementwise layer: result = fn(inputs dequantized to f32),
  /// quantized when the result is; a float Relu/Clip after it folds in.
  /// The result is `res` (default: op's), the layer's location `loc`
  /// (default: op's). With `lanes`, `fn` works on 16-lane vectors too and
  /// the innermost loop runs 16 elements at a time.
  LogicalResult lowerMap(Operation *op, std::vector<Src> ins,
                         std::string kernel, ScalarFn fn, Value res = {},
                         std::optional<Location> loc = std::nullopt,
                         bool lanes = false);
  /// Records the map just lowered (lowerMap) in inputMaps where one
  /// pointwise int8 convolution reads its quantized NHWC result; `element`
  /// is the map's whole computation of one result from its loaded inputs.
  void noteInputMap(Value res, int o, const std::vector<Src> &ins,
                    const std::vector<int64_t> &loop, const ScalarFn &element);
  LogicalResult lowerUnary(Operation *op, std::string kernel, ScalarFn fn,
                           bool lanes = false) {
    return lowerMap(op, {srcOf(op->getOperand(0))}, std::move(kernel),
                    std::move(fn), {}, std::nullopt, lanes);
  }
  LogicalResult lowerBinary(Operation *op, std::string kernel, ScalarFn fn) {
    return lowerMap(op, {srcOf(op->getOperand(0)), srcOf(op->getOperand(1))},
                    std::move(kernel), std::move(fn));
  }
  LogicalResult lowerTranspose(Operation *op, Value in, ArrayRef<int64_t> perm);
  LogicalResult lowerSlice(Operation *op, Value in, ArrayRef<int64_t> starts,
                           ArrayRef<int64_t> steps);
  LogicalResult lowerConcat(Operation *op, ValueRange ins, int64_t axis);
  /// The ops of each lowering file's family (MapLowering.cpp,
  /// PointwiseFusion.cpp, ConvLowering.cpp, ResampleLowering.cpp): the
  /// op's layers, or nullopt when `op` is not of the family. An op's
  /// lowering and its line in the dispatch live in one file.
  std::optional<LogicalResult> lowerMapFamily(Operation *op);
  std::optional<LogicalResult> lowerPointwiseFamily(Operation *op);
  std::optional<LogicalResult> lowerConvFamily(Operation *op);
  std::optional<LogicalResult> lowerResampleFamily(Operation *op);
  /// The lowering of one op type. A family file specializes it for an op
  /// (no declaration here) and lists the op in its family's dispatch.
  template <typename OpTy> LogicalResult lower(OpTy op);
  // ResampleLowering.cpp.
  /// A layer whose result element at index (i_0, ...) is the input element
  /// (idx[0][i_0], ...): an empty idx[d] keeps axis d, -1 marks padding
  /// (the result is `fill`).
  LogicalResult gatherLayer(Operation *op, std::string kernel, int in,
                            std::vector<std::vector<int64_t>> idx,
                            std::optional<double> fill);
  /// onnx.Resize (nearest or linear) and qat.resize (int8 nearest).
  LogicalResult lowerResize(Operation *op, Value in);
  /// onnx.Pad and qat.pad, every mode.
  LogicalResult lowerPad(Operation *op);
  /// The zero insertion of a rewritten ConvTranspose (Reshape to rank 6 ->
  /// Pad -> Reshape -> [border Pad]) starting at `reshape6`, as one gather;
  /// nullopt when the ops do not form it.
  std::optional<LogicalResult> tryZeroInsertion(Operation *reshape6);
  /// Graph inputs and outputs of types the plan holds otherwise inside
  /// (bools as f32 0 / 1, narrowInt integers wider): a layer converting
  /// every element of the plain tensor `from` into a new plain tensor of
  /// element type `to`, named `name`, as a layer of `node`; `fn` maps an
  /// element as loaded (in `from`'s stored type) to the value stored.
  /// Returns the new tensor.
  int boundaryConversion(Location loc, const std::string &node, int from,
                         const std::string &name, plan::ElemType to,
                         std::string kernel, std::string precision,
                         std::function<Value(KB &, Value)> fn);
  /// The graph input `raw` of element type `type` (bool, narrowInt or f64)
  /// as the plan holds it, and the held tensor `t` as graph output of
  /// `type`.
  int inputAsHeld(int raw, Type type, const std::string &name, Location loc);
  int heldAsOutput(int t, Type type, Location loc);
  /// Gather of f32 rows by int32 / int64 indices computed at run time (an
  /// embedding lookup).
  LogicalResult lowerRowGather(Operation *op, Value data, Value indices,
                               int64_t axis);
  /// Gather (onnx or qat) with constant 0-D or 1-D indices.
  LogicalResult lowerGather(Operation *op, Value data, Value indices,
                            int64_t axis);
  /// A copy of `in` to `o` over the index space `loop`, each side walked
  /// with its own element strides (block moves, tiling).
  LogicalResult stridedCopyLayer(Operation *op, std::string kernel, int in,
                                 int o, std::vector<int64_t> loop,
                                 std::vector<int64_t> inStrides,
                                 std::vector<int64_t> outStrides);
  /// DepthToSpace / SpaceToDepth.
  LogicalResult lowerDepthSpace(Operation *op);
  LogicalResult lowerTile(onnx::TileOp op);
  LogicalResult lowerExpand(onnx::ExpandOp op);
  LogicalResult lowerBatchNorm(onnx::BatchNormalizationOp op);
  /// Mean over `axes` (GlobalAveragePool, ReduceMean), int8 or f32 input.
  LogicalResult lowerMean(Operation *op, Value in, ArrayRef<int64_t> axes);
  enum class ReduceKind { Mean, Sum, Max, Min, Prod, L1, L2, SumSquare };
  /// A reduction over `axes`: means of int8 or f32 data, the others f32
  /// (accumulated in f32 in index order).
  LogicalResult lowerReduce(Operation *op, Value in, ArrayRef<int64_t> axes,
                            ReduceKind kind);
  LogicalResult lowerLogSoftmax(onnx::LogSoftmaxOp op);
  /// ArgMax / ArgMin of f32 data: an int64 tensor (a graph output; nothing
  /// else reads int64 at run time).
  LogicalResult lowerArgReduce(Operation *op);
  /// Softmax or LogSoftmax of `x` along `axis`.
  LogicalResult lowerSoftmaxLike(Operation *op, Value x, int64_t axis,
                                 bool log);
  /// Softmax over contiguous rows of 16 to 256 elements, each row in
  /// registers, with the chain after it (its QuantizeLinear).
  LogicalResult lowerSoftmaxInRegisters(Operation *op, int in, int64_t n,
                                        int64_t rows);
  LogicalResult lowerSoftmax(onnx::SoftmaxOp op);
  LogicalResult lowerPow(onnx::PowOp op);
  LogicalResult lowerLayerNorm(onnx::LayerNormalizationOp op);
  LogicalResult lowerFloatMatMul(onnx::MatMulOp op);
  /// `t` as a [M, K] matrix with contiguous (int8: 4-padded) rows for the
  /// dense kernel: an alias of plain data, else a copy.
  int asRows(int t, Location loc);
  /// A batched product of two activations through the dense micro-kernel
  /// (int8 or fp32): a layer packs each batch's right-hand side (any
  /// strides: transposes cost nothing) into the kernel's weight layout, with
  /// its zero-point terms for int8; a second runs the kernel per batch with
  /// epilogue `ep` (its multiplier array is set here from `mult`).
  /// With `softmax`, the product's rows are `o`'s softmax's input: the
  /// kernel's tiles hold whole rows, and their epilogue is the softmax and
  /// its chain (attention's scores never go to memory). With `outPerm`, `o`
  /// is the result of that transpose of the product.
  LogicalResult packedProduct(Operation *op, int ta, int tb, bool transB, int o,
                              float mult, Epilogue ep,
                              const FoldedChain *softmax = nullptr,
                              ArrayRef<int64_t> outPerm = {});
  /// The Transpose that alone reads product result `v`, keeping its last
  /// axis last (attention's heads back to rows): folded, its result is the
  /// product's output and `perm` its strides (packedProduct's `outPerm`).
  Operation *matchOutputTranspose(Value v);
  /// The Softmax over the last axis that alone reads product result `v`,
  /// when a dense tile holds its rows (at most 64 columns; 32 without
  /// AVX-512), with the chain after it; the ops are folded.
  std::optional<FoldedChain> matchRowSoftmax(Value v);
  /// The chain after `v` (per-channel constants along `channelAxis`),
  /// folded: its ops are marked, `exit` is its result (`v` without one).
  FoldedChain foldChainAfter(Value v, int64_t channelAxis);
  /// packedProduct applies: both operands int8 (a right-hand zero point
  /// that keeps w = q - z in s8) or both f32, the same batch shape.
  bool packable(int ta, int tb, ArrayRef<int64_t> outShape) const;
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
  /// Points the kernel spec `s` at its tensors' final arena offsets (at emit
  /// time): input `in` from channel `inChannel`, output `out` and the
  /// residual from `outChannel`.
  void bindConv(ConvSpec &s, int in, int out, int residual,
                int64_t inChannel = 0, int64_t outChannel = 0) const;
  /// Picks the register tile (MR x NV*16) of `s` for the target.
  void chooseTile(DenseConvSpec &s) const;
  /// Pixels per dense tile of `nv` vectors of 16 channels of `s`'s sums
  /// (int8 or not, in emitDot4Split's form or not) on the target.
  int64_t tileRows(const DenseConvSpec &s, int64_t nv) const;
  /// The row epilogue (DenseConvSpec::rowEpilogue) of a product whose rows
  /// are `sm`'s softmax's: the product's own factors and bias, the softmax,
  /// its chain, stored to `o`.
  std::function<void(KB &, const DenseConvSpec &, ArrayRef<SmallVector<Value>>,
                     ArrayRef<Value>)>
  rowSoftmaxEpilogue(const FoldedChain &sm, int o, int64_t N,
                     const Epilogue &ep);
  /// Sets `s.bytePairs` (and `s.signedBytes`) and its tile.
  void chooseBytePairs(DenseConvSpec &s, bool signedBytes) const;
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
  /// A dense int8 convolution (a Gemm / MatMul as a 1x1 one) on AMX tiles
  /// (AmxKernels.cpp): its taps read in place when padding and stride allow,
  /// else from a relayout layer before it (the stride's phases of the
  /// padded input, or im2col rows when the taps have few channels). False
  /// when the layer stays on the VNNI kernel.
  bool
  amxConv(Operation *op, const DenseConvSpec &s, int in, int outT,
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
                              std::function<double(int64_t, int64_t)> weightAt,
                              int residual = -1);
  /// Where the only reader of `out` (`op`'s f32 result) is an Add with an
  /// f32 operand of `out`'s shape made before `op`: folds the Add into `ep`
  /// as an f32 residual and returns that operand's tensor (NHWC, or [M, N]
  /// rows for a matrix product: `rows`), with `exit` the Add's result; else
  /// -1, with `exit` = `out`.
  int foldFloatResidual(Operation *op, Value out, bool rows, Epilogue &ep,
                        Value &exit);
  /// Whether a matrix product's epilogue can read tensor `t` as its
  /// residual rows (asRows with no copy and columns in logical order).
  bool residualRows(int t) const;
  /// `ep` quantizes its result to `out`'s int8 type, in the stored domain,
  /// before a residual add (Epilogue::midQuant).
  void setMidQuant(Epilogue &ep, Value out);
  /// `ep` adds the int8 tensor `residual` (dequantized); returns it.
  int setQuantResidual(Epilogue &ep, int residual);

  /// Before the walk: the channel concatenations whose inputs are written in
  /// place, each at its channel offset of one shared NHWC buffer, so that
  /// the Concat copies nothing (MapLowering.cpp).
  void planConcatSlices();
  /// The slice tensor of `res` in its concatenation buffer (`slices`).
  int sliceTensor(Value res, plan::Layout layout);

  // After the walk.
  void planArena();
  /// Sets each layer's desc.sync from what its storages overlap
  /// (barriersBefore), once the arena is planned.
  void planBarriers();
  void emitLayers();

  func::FuncOp func;
  FunctionType modelType;
  const Target &target;
  LoweredGraph &out;
  /// A deque: handlers hold references to tensors while adding others.
  std::deque<CTensor> tensors;
  std::vector<Storage> storages;
  std::vector<Layer> layers;
  llvm::DenseMap<Value, int> valueTensor;
  std::map<std::pair<int, int>, int> converted;
  /// Depthwise layers that can also sum their f32 result over each band's
  /// pixels (DepthwiseSpec::sumsOff), by result tensor: the layer, its
  /// parts, and where lowerReduce puts the tensor of sums it asks for (set
  /// once, before the layers are emitted).
  struct RowSums {
    int layer = -1;
    int64_t parts = 0;
    std::shared_ptr<int> sums;
  };
  std::map<int, RowSums> rowSumsOf;
  /// Elementwise maps to int8 NHWC data from f32 tensors with contiguous
  /// channels (squeeze-excitation's gating Mul and its quantize, a BatchNorm
  /// + ReLU + quantize) whose result only a pointwise int8 convolution
  /// reads, by result tensor: the map's layer, that convolution, the
  /// tensors the map reads, and its code over pixels [p0, p1). denseConv
  /// runs it inside the convolution's layer on the pixels each thread's
  /// share reads (noteInputMap records them).
  struct InputMap {
    int layer = -1;
    Operation *consumer = nullptr;
    std::vector<int> reads;
    std::function<void(KB &, mlir::Value, mlir::Value)> emitPixels;
  };
  std::map<int, InputMap> inputMaps;
  llvm::DenseSet<Operation *> folded;
  llvm::DenseMap<Value, int64_t> constantOffsets;
  /// storedFloor's and nonNegativeFloat's results.
  llvm::DenseMap<Value, int64_t> floors;
  llvm::DenseMap<Value, bool> nonNegatives;
  bool constantError = false;
  /// A buffer shared by concatenations and their inputs: channels (its
  /// channel stride) and its storage, made with the first slice.
  struct ConcatBuffer {
    int64_t channels = 0;
    int storage = -1;
  };
  std::vector<ConcatBuffer> concatBuffers;
  /// Values stored in a concatenation buffer: buffer and first channel.
  llvm::DenseMap<Value, std::pair<int, int64_t>> slices;
};

/// Sets the window of `s` from NCHW shapes and ONNX attributes.
inline void setWindow(ConvSpec &s, ArrayRef<int64_t> inShape,
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
inline LogicalResult requireSymmetric(Operation *op,
                                      const qat::QuantLayout &wl) {
  for (int64_t z : wl.zeroPoints)
    if (z != 0)
      return op->emitError("qatc needs symmetric weights (zero point 0); "
                           "this weight has zero point ")
             << z;
  return success();
}

/// The distance between rows (pixels) of an NHWC or plain tensor that is
/// no view: the channel stride, or the last dimension.
inline int64_t rowStride(const CTensor &x) {
  return x.desc.layout == plan::Layout::NHWC ? x.desc.channelStride
                                             : x.desc.shape.back();
}

/// The physical row length of a matrix product's input: the flattened NHWC
/// pixels x padded channels, or the (padded) row.
inline int64_t physicalK(const CTensor &x) {
  if (x.flat)
    return x.fH * x.fW * x.fCS;
  return x.desc.layout == plan::Layout::NHWC ? x.desc.channelStride : x.dim(1);
}

/// The ONNX (logical) column of physical column `kp` of `x`, or -1 for
/// padding.
inline int64_t logicalK(const CTensor &x, int64_t kp) {
  if (!x.flat)
    return kp < x.dim(1) ? kp : -1;
  int64_t pix = kp / x.fCS, c = kp % x.fCS;
  return c < x.fC ? c * x.fH * x.fW + pix : -1;
}

} // namespace qatc::codegen::lowering

#endif // QATC_CODEGEN_GRAPHLOWERING_H
