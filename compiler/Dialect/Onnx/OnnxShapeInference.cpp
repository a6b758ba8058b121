//===- OnnxShapeInference.cpp - result types of onnx ops ------------------===//
//
// Static shape inference for every op of the `onnx` dialect that derives its
// result types (InferTypeOpAdaptor). The importer calls these before it
// creates an op, so a shape error is reported at the ONNX node rather than
// asserting in a builder; the verifier calls them again on every parse.
//
// Unranked inputs (which only appear downstream of `onnx.Unsupported`) give
// unranked results so that an import with unsupported nodes can still finish
// and list all of them.
//
//===----------------------------------------------------------------------===//

#include "qatc/Dialect/Onnx/OnnxOps.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace qatc::onnx;

namespace {

/// Largest dimension, pad, stride or kernel size shape inference accepts;
/// it keeps every intermediate of the size formulas far from int64 overflow.
constexpr int64_t kMaxDim = int64_t(1) << 31;

/// Emits a shape-inference error at `loc` (if any) and returns failure.
template <typename... Args>
LogicalResult fail(std::optional<Location> loc, Args &&...args) {
  return emitOptionalError(loc, std::forward<Args>(args)...);
}

std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, ",");
  os << "]";
  return os.str();
}

/// Pushes an unranked tensor of `elementType` and succeeds.
LogicalResult unranked(Type elementType, SmallVectorImpl<Type> &types) {
  types.push_back(UnrankedTensorType::get(elementType));
  return success();
}

Type elementTypeOf(Value v) {
  return cast<ShapedType>(v.getType()).getElementType();
}

/// The static shape of `v`, or nullopt when it is unranked.
std::optional<ArrayRef<int64_t>> shapeOf(Value v) {
  auto ranked = dyn_cast<RankedTensorType>(v.getType());
  if (!ranked)
    return std::nullopt;
  return ranked.getShape();
}

/// Output size of one spatial axis of a sliding window (Conv, pooling).
FailureOr<int64_t> windowOutputSize(std::optional<Location> loc, int64_t in,
                                    int64_t kernel, int64_t stride,
                                    int64_t padBegin, int64_t padEnd,
                                    int64_t dilation, bool ceilMode) {
  if (kernel <= 0 || stride <= 0 || dilation <= 0 || padBegin < 0 || padEnd < 0)
    return fail(loc, "kernel, stride and dilation must be positive and pads "
                     "non-negative");
  int64_t span = dilation * (kernel - 1) + 1;
  int64_t avail = in + padBegin + padEnd - span;
  if (avail < 0)
    return fail(loc, "window of size ", span, " does not fit an input of size ",
                in, " with pads ", padBegin, "+", padEnd);
  int64_t out = avail / stride + 1;
  if (ceilMode && avail % stride != 0) {
    ++out;
    // As in PyTorch and ONNX Runtime: the last window must start inside the
    // input or its leading padding, never in the trailing padding.
    if ((out - 1) * stride >= in + padBegin)
      --out;
  }
  return out;
}

/// Checks the per-spatial-axis attribute lengths of a windowed op.
LogicalResult checkWindowAttrs(std::optional<Location> loc, size_t spatial,
                               ArrayRef<int64_t> kernel,
                               ArrayRef<int64_t> strides,
                               ArrayRef<int64_t> pads,
                               ArrayRef<int64_t> dilations) {
  if (kernel.size() != spatial || strides.size() != spatial ||
      dilations.size() != spatial || pads.size() != 2 * spatial)
    return fail(loc, "expected ", spatial,
                " kernel_shape/strides/dilations entries and ", 2 * spatial,
                " pads for a ", spatial, "-D window, got ", kernel.size(), "/",
                strides.size(), "/", dilations.size(), " and ", pads.size());
  // Bounded so that window arithmetic cannot overflow.
  auto inRange = [](ArrayRef<int64_t> values, int64_t lo) {
    return llvm::all_of(values,
                        [&](int64_t v) { return v >= lo && v <= kMaxDim; });
  };
  if (!inRange(kernel, 1) || !inRange(strides, 1) || !inRange(dilations, 1) ||
      !inRange(pads, 0))
    return fail(loc, "kernel_shape, strides and dilations must be in [1, ",
                kMaxDim, "] and pads in [0, ", kMaxDim, "]");
  return success();
}

/// Shared shape inference of MaxPool and AveragePool.
template <typename Adaptor>
LogicalResult inferPool(std::optional<Location> loc, Adaptor adaptor,
                        SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getX());
  auto shape = shapeOf(adaptor.getX());
  if (!shape)
    return unranked(elt, types);
  if (shape->size() < 3)
    return fail(loc, "pooling input must have rank >= 3, got ",
                shapeStr(*shape));
  size_t spatial = shape->size() - 2;
  if (failed(checkWindowAttrs(loc, spatial, adaptor.getKernelShape(),
                              adaptor.getStrides(), adaptor.getPads(),
                              adaptor.getDilations())))
    return failure();
  SmallVector<int64_t> out(shape->begin(), shape->begin() + 2);
  for (size_t i = 0; i < spatial; ++i) {
    auto size =
        windowOutputSize(loc, (*shape)[i + 2], adaptor.getKernelShape()[i],
                         adaptor.getStrides()[i], adaptor.getPads()[i],
                         adaptor.getPads()[i + spatial],
                         adaptor.getDilations()[i], adaptor.getCeilMode() != 0);
    if (failed(size))
      return failure();
    out.push_back(*size);
  }
  types.push_back(RankedTensorType::get(out, elt));
  return success();
}

/// Normalizes `axis` into [0, rank) or fails.
FailureOr<int64_t> normalizeAxis(std::optional<Location> loc, int64_t axis,
                                 int64_t rank, StringRef what = "axis") {
  if (axis < -rank || axis >= rank)
    return fail(loc, what, " ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

/// Checks the scale/zero-point operands of QuantizeLinear/DequantizeLinear
/// against the quantized tensor: rank-0 (or [1]) means per-tensor, a 1-D
/// tensor of length shape[axis] means per-axis; blocked forms are refused.
LogicalResult checkQuantParams(std::optional<Location> loc, Value x,
                               Value scale, Value zeroPoint, int64_t axis) {
  auto xShape = shapeOf(x);
  auto sShape = shapeOf(scale);
  if (!xShape || !sShape)
    return success();
  if (zeroPoint) {
    auto zShape = shapeOf(zeroPoint);
    if (zShape && *zShape != *sShape)
      return fail(loc, "zero point shape ", shapeStr(*zShape),
                  " differs from scale shape ", shapeStr(*sShape));
  }
  // Rank 0 is per-tensor; so is [1], which most producers also emit.
  if (sShape->empty() || (sShape->size() == 1 && (*sShape)[0] == 1))
    return success();
  if (sShape->size() != 1)
    return fail(loc, "scale of shape ", shapeStr(*sShape),
                " is a blocked quantization, which qatc does not support "
                "(only per-tensor and per-axis)");
  auto rank = static_cast<int64_t>(xShape->size());
  if (axis < 0 || axis >= rank)
    return fail(loc, "per-axis quantization axis ", axis,
                " is out of range for an input of rank ", rank);
  if ((*sShape)[0] != (*xShape)[axis])
    return fail(loc, "per-axis scale has ", (*sShape)[0], " elements but axis ",
                axis, " of the input has size ", (*xShape)[axis]);
  return success();
}

} // namespace

FailureOr<int64_t> qatc::onnx::getWindowOutputSize(
    std::optional<Location> loc, int64_t in, int64_t kernel, int64_t stride,
    int64_t padBegin, int64_t padEnd, int64_t dilation, bool ceilMode) {
  return windowOutputSize(loc, in, kernel, stride, padBegin, padEnd, dilation,
                          ceilMode);
}

//===----------------------------------------------------------------------===//
// Broadcasting
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<int64_t>>
qatc::onnx::broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return failure();
    out[i] = da == 1 ? db : da;
  }
  return out;
}

LogicalResult qatc::onnx::inferBroadcastType(std::optional<Location> loc,
                                             Type lhs, Type rhs,
                                             SmallVectorImpl<Type> &types) {
  auto lt = cast<ShapedType>(lhs);
  auto rt = cast<ShapedType>(rhs);
  if (lt.getElementType() != rt.getElementType())
    return fail(loc, "operand element types differ: ", lt.getElementType(),
                " vs ", rt.getElementType());
  if (!lt.hasRank() || !rt.hasRank())
    return unranked(lt.getElementType(), types);
  auto shape = broadcastShapes(lt.getShape(), rt.getShape());
  if (failed(shape))
    return fail(loc, "shapes ", shapeStr(lt.getShape()), " and ",
                shapeStr(rt.getShape()), " are not broadcastable");
  types.push_back(RankedTensorType::get(*shape, lt.getElementType()));
  return success();
}

LogicalResult PowOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getX());
  auto a = shapeOf(adaptor.getX()), b = shapeOf(adaptor.getY());
  if (!a || !b)
    return unranked(elt, types);
  auto shape = broadcastShapes(*a, *b);
  if (failed(shape))
    return fail(loc, "shapes ", shapeStr(*a), " and ", shapeStr(*b),
                " are not broadcastable");
  types.push_back(RankedTensorType::get(*shape, elt));
  return success();
}

//===----------------------------------------------------------------------===//
// Metadata and quantization
//===----------------------------------------------------------------------===//

LogicalResult ShapeOp::inferReturnTypes(MLIRContext *ctx,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  auto i64 = IntegerType::get(ctx, 64);
  auto shape = shapeOf(adaptor.getData());
  if (!shape)
    return unranked(i64, types);
  auto rank = static_cast<int64_t>(shape->size());
  auto clampIdx = [&](int64_t v) {
    if (v < 0)
      v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  int64_t start = clampIdx(static_cast<int64_t>(adaptor.getStart()));
  int64_t end = adaptor.getEnd()
                    ? clampIdx(static_cast<int64_t>(*adaptor.getEnd()))
                    : rank;
  types.push_back(
      RankedTensorType::get({std::max<int64_t>(0, end - start)}, i64));
  return success();
}

LogicalResult QuantizeLinearOp::inferReturnTypes(MLIRContext *ctx,
                                                 std::optional<Location> loc,
                                                 Adaptor adaptor,
                                                 SmallVectorImpl<Type> &types) {
  Type elt = adaptor.getYZeroPoint()
                 ? elementTypeOf(adaptor.getYZeroPoint())
                 : IntegerType::get(ctx, 8, IntegerType::Unsigned);
  if (failed(checkQuantParams(loc, adaptor.getX(), adaptor.getYScale(),
                              adaptor.getYZeroPoint(),
                              static_cast<int64_t>(adaptor.getAxis()))))
    return failure();
  auto shape = shapeOf(adaptor.getX());
  if (!shape)
    return unranked(elt, types);
  types.push_back(RankedTensorType::get(*shape, elt));
  return success();
}

LogicalResult
DequantizeLinearOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                     Adaptor adaptor,
                                     SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getXScale());
  if (failed(checkQuantParams(loc, adaptor.getX(), adaptor.getXScale(),
                              adaptor.getXZeroPoint(),
                              static_cast<int64_t>(adaptor.getAxis()))))
    return failure();
  auto shape = shapeOf(adaptor.getX());
  if (!shape)
    return unranked(elt, types);
  types.push_back(RankedTensorType::get(*shape, elt));
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution, matrix products, normalization
//===----------------------------------------------------------------------===//

LogicalResult ConvOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getX());
  auto x = shapeOf(adaptor.getX()), w = shapeOf(adaptor.getW());
  if (!x || !w)
    return unranked(elt, types);
  if (x->size() < 3 || x->size() != w->size())
    return fail(loc, "Conv input ", shapeStr(*x), " and weight ", shapeStr(*w),
                " must have the same rank >= 3");
  int64_t group = static_cast<int64_t>(adaptor.getGroup());
  size_t spatial = x->size() - 2;
  if (group <= 0 || (*w)[0] % group != 0 || (*x)[1] != (*w)[1] * group)
    return fail(loc, "Conv input has ", (*x)[1], " channels but the weight ",
                shapeStr(*w), " with group=", group, " expects ",
                (*w)[1] * group);
  if (failed(checkWindowAttrs(loc, spatial, adaptor.getKernelShape(),
                              adaptor.getStrides(), adaptor.getPads(),
                              adaptor.getDilations())))
    return failure();
  if (adaptor.getKernelShape() != w->drop_front(2))
    return fail(loc, "kernel_shape ", shapeStr(adaptor.getKernelShape()),
                " does not match the weight shape ", shapeStr(*w));
  if (adaptor.getB()) {
    auto b = shapeOf(adaptor.getB());
    if (b && (b->size() != 1 || (*b)[0] != (*w)[0]))
      return fail(loc, "Conv bias of shape ", shapeStr(*b), " must be [",
                  (*w)[0], "]");
  }
  SmallVector<int64_t> out{(*x)[0], (*w)[0]};
  for (size_t i = 0; i < spatial; ++i) {
    auto size =
        windowOutputSize(loc, (*x)[i + 2], (*w)[i + 2], adaptor.getStrides()[i],
                         adaptor.getPads()[i], adaptor.getPads()[i + spatial],
                         adaptor.getDilations()[i], false);
    if (failed(size))
      return failure();
    out.push_back(*size);
  }
  types.push_back(RankedTensorType::get(out, elt));
  return success();
}

LogicalResult ConvTransposeOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getX());
  auto x = shapeOf(adaptor.getX()), w = shapeOf(adaptor.getW());
  if (!x || !w)
    return unranked(elt, types);
  if (x->size() < 3 || x->size() != w->size())
    return fail(loc, "ConvTranspose input ", shapeStr(*x), " and weight ",
                shapeStr(*w), " must have the same rank >= 3");
  int64_t group = static_cast<int64_t>(adaptor.getGroup());
  size_t spatial = x->size() - 2;
  if (group <= 0 || (*x)[1] != (*w)[0] || (*w)[0] % group != 0)
    return fail(loc, "ConvTranspose input has ", (*x)[1],
                " channels but the weight ", shapeStr(*w), " expects ",
                (*w)[0]);
  if (failed(checkWindowAttrs(loc, spatial, adaptor.getKernelShape(),
                              adaptor.getStrides(), adaptor.getPads(),
                              adaptor.getDilations())))
    return failure();
  if (adaptor.getOutputPadding().size() != spatial ||
      llvm::any_of(adaptor.getOutputPadding(),
                   [](int64_t v) { return v < 0 || v > kMaxDim; }))
    return fail(loc, "expected ", spatial, " output_padding entries in [0, ",
                kMaxDim, "]");
  if (adaptor.getKernelShape() != w->drop_front(2))
    return fail(loc, "kernel_shape ", shapeStr(adaptor.getKernelShape()),
                " does not match the weight shape ", shapeStr(*w));
  int64_t outChannels = (*w)[1] * group;
  if (adaptor.getB()) {
    auto b = shapeOf(adaptor.getB());
    if (b && (b->size() != 1 || (*b)[0] != outChannels))
      return fail(loc, "ConvTranspose bias of shape ", shapeStr(*b),
                  " must be [", outChannels, "]");
  }
  SmallVector<int64_t> out{(*x)[0], outChannels};
  for (size_t i = 0; i < spatial; ++i) {
    int64_t k = (*w)[i + 2];
    int64_t size = adaptor.getStrides()[i] * ((*x)[i + 2] - 1) +
                   adaptor.getOutputPadding()[i] +
                   (k - 1) * adaptor.getDilations()[i] + 1 -
                   adaptor.getPads()[i] - adaptor.getPads()[i + spatial];
    if (size <= 0)
      return fail(loc, "ConvTranspose output size ", size, " is not positive");
    out.push_back(size);
  }
  types.push_back(RankedTensorType::get(out, elt));
  return success();
}

LogicalResult GemmOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getA());
  auto a = shapeOf(adaptor.getA()), b = shapeOf(adaptor.getB());
  if (!a || !b)
    return unranked(elt, types);
  if (a->size() != 2 || b->size() != 2)
    return fail(loc, "Gemm operands must be 2-D, got ", shapeStr(*a), " and ",
                shapeStr(*b));
  int64_t m = adaptor.getTransA() ? (*a)[1] : (*a)[0];
  int64_t ka = adaptor.getTransA() ? (*a)[0] : (*a)[1];
  int64_t kb = adaptor.getTransB() ? (*b)[1] : (*b)[0];
  int64_t n = adaptor.getTransB() ? (*b)[0] : (*b)[1];
  if (ka != kb)
    return fail(loc, "Gemm inner dimensions differ: ", ka, " vs ", kb);
  if (adaptor.getC()) {
    auto c = shapeOf(adaptor.getC());
    if (c) {
      auto bc = broadcastShapes(*c, {m, n});
      if (failed(bc) || *bc != ArrayRef<int64_t>{m, n})
        return fail(loc, "Gemm C of shape ", shapeStr(*c),
                    " does not broadcast to [", m, ",", n, "]");
    }
  }
  types.push_back(RankedTensorType::get({m, n}, elt));
  return success();
}

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getA());
  auto a = shapeOf(adaptor.getA()), b = shapeOf(adaptor.getB());
  if (!a || !b)
    return unranked(elt, types);
  if (a->empty() || b->empty())
    return fail(loc, "MatMul operands must have rank >= 1");
  SmallVector<int64_t> as(*a), bs(*b);
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
  if (as.back() != bs[bs.size() - 2])
    return fail(loc, "MatMul inner dimensions differ: ", shapeStr(*a), " x ",
                shapeStr(*b));
  auto batch =
      broadcastShapes(ArrayRef(as).drop_back(2), ArrayRef(bs).drop_back(2));
  if (failed(batch))
    return fail(loc, "MatMul batch dimensions of ", shapeStr(*a), " and ",
                shapeStr(*b), " are not broadcastable");
  SmallVector<int64_t> out(*batch);
  if (!aVec)
    out.push_back(as[as.size() - 2]);
  if (!bVec)
    out.push_back(bs.back());
  types.push_back(RankedTensorType::get(out, elt));
  return success();
}

LogicalResult BatchNormalizationOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getX());
  auto x = shapeOf(adaptor.getX());
  if (!x)
    return unranked(elt, types);
  if (x->size() < 2)
    return fail(loc, "BatchNormalization input must have rank >= 2");
  for (Value p : {adaptor.getScale(), adaptor.getB(), adaptor.getInputMean(),
                  adaptor.getInputVar()}) {
    auto s = shapeOf(p);
    if (s && (s->size() != 1 || (*s)[0] != (*x)[1]))
      return fail(loc, "BatchNormalization parameter of shape ", shapeStr(*s),
                  " must be [", (*x)[1], "]");
  }
  types.push_back(adaptor.getX().getType());
  return success();
}

LogicalResult LayerNormalizationOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  auto x = shapeOf(adaptor.getX());
  if (x && failed(normalizeAxis(loc, static_cast<int64_t>(adaptor.getAxis()),
                                x->size())))
    return failure();
  types.push_back(adaptor.getX().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Pooling and reductions
//===----------------------------------------------------------------------===//

LogicalResult MaxPoolOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  return inferPool(loc, adaptor, types);
}

LogicalResult AveragePoolOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &types) {
  return inferPool(loc, adaptor, types);
}

static LogicalResult inferGlobalPool(std::optional<Location> loc, Value x,
                                     SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(x);
  auto shape = shapeOf(x);
  if (!shape)
    return unranked(elt, types);
  if (shape->size() < 3)
    return fail(loc, "global pooling input must have rank >= 3, got ",
                shapeStr(*shape));
  SmallVector<int64_t> out(*shape);
  std::fill(out.begin() + 2, out.end(), 1);
  types.push_back(RankedTensorType::get(out, elt));
  return success();
}

LogicalResult GlobalAveragePoolOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  return inferGlobalPool(loc, adaptor.getX(), types);
}

LogicalResult GlobalMaxPoolOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  return inferGlobalPool(loc, adaptor.getX(), types);
}

LogicalResult qatc::onnx::inferReduceType(std::optional<Location> loc,
                                          Type input, ArrayRef<int64_t> axes,
                                          int64_t keepdims,
                                          SmallVectorImpl<Type> &types) {
  auto type = cast<ShapedType>(input);
  Type elt = type.getElementType();
  if (!type.hasRank())
    return unranked(elt, types);
  ArrayRef<int64_t> shape = type.getShape();
  auto rank = static_cast<int64_t>(shape.size());
  SmallVector<bool> reduced(rank, axes.empty());
  for (int64_t axis : axes) {
    auto a = normalizeAxis(loc, axis, rank);
    if (failed(a))
      return failure();
    reduced[*a] = true;
  }
  SmallVector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[i])
      out.push_back(shape[i]);
    else if (keepdims)
      out.push_back(1);
  }
  types.push_back(RankedTensorType::get(out, elt));
  return success();
}

/// ArgMax / ArgMin: int64 indices with `axis` reduced.
template <typename Adaptor>
LogicalResult inferArgReduce(MLIRContext *ctx, std::optional<Location> loc,
                             Adaptor adaptor, SmallVectorImpl<Type> &types) {
  Type i64 = IntegerType::get(ctx, 64);
  auto shape = shapeOf(adaptor.getData());
  if (!shape)
    return unranked(i64, types);
  auto rank = static_cast<int64_t>(shape->size());
  auto axis = normalizeAxis(loc, static_cast<int64_t>(adaptor.getAxis()), rank);
  if (failed(axis))
    return failure();
  SmallVector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i)
    if (i != *axis)
      out.push_back((*shape)[i]);
    else if (adaptor.getKeepdims())
      out.push_back(1);
  types.push_back(RankedTensorType::get(out, i64));
  return success();
}

LogicalResult ArgMaxOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return inferArgReduce(ctx, loc, adaptor, types);
}

LogicalResult ArgMinOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return inferArgReduce(ctx, loc, adaptor, types);
}

LogicalResult TopKOp::inferReturnTypes(MLIRContext *ctx,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getX());
  Type i64 = IntegerType::get(ctx, 64);
  auto shape = shapeOf(adaptor.getX());
  if (!shape) {
    types.push_back(UnrankedTensorType::get(elt));
    return unranked(i64, types);
  }
  auto rank = static_cast<int64_t>(shape->size());
  auto axis = normalizeAxis(loc, static_cast<int64_t>(adaptor.getAxis()), rank);
  if (failed(axis))
    return failure();
  int64_t k = static_cast<int64_t>(adaptor.getK());
  if (k < 0 || k > (*shape)[*axis])
    return fail(loc, "TopK k = ", k, " is out of range for an axis of size ",
                (*shape)[*axis]);
  SmallVector<int64_t> out(*shape);
  out[*axis] = k;
  types.push_back(RankedTensorType::get(out, elt));
  types.push_back(RankedTensorType::get(out, i64));
  return success();
}

//===----------------------------------------------------------------------===//
// Selection
//===----------------------------------------------------------------------===//

LogicalResult WhereOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getX());
  if (elementTypeOf(adaptor.getY()) != elt)
    return fail(loc, "Where operands have different element types: ", elt,
                " vs ", elementTypeOf(adaptor.getY()));
  if (!elementTypeOf(adaptor.getCondition()).isInteger(1))
    return fail(loc, "Where condition must be bool");
  auto c = shapeOf(adaptor.getCondition()), x = shapeOf(adaptor.getX()),
       y = shapeOf(adaptor.getY());
  if (!c || !x || !y)
    return unranked(elt, types);
  auto xy = broadcastShapes(*x, *y);
  FailureOr<SmallVector<int64_t>> all = failure();
  if (succeeded(xy))
    all = broadcastShapes(*c, *xy);
  if (failed(all))
    return fail(loc, "Where shapes ", shapeStr(*c), ", ", shapeStr(*x), " and ",
                shapeStr(*y), " are not broadcastable");
  types.push_back(RankedTensorType::get(*all, elt));
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  if (adaptor.getInputs().empty())
    return fail(loc, "Concat needs at least one input");
  Type elt = elementTypeOf(adaptor.getInputs()[0]);
  std::optional<SmallVector<int64_t>> out;
  int64_t axis = static_cast<int64_t>(adaptor.getAxis());
  for (Value in : adaptor.getInputs()) {
    if (elementTypeOf(in) != elt)
      return fail(loc, "Concat inputs have different element types");
    auto shape = shapeOf(in);
    if (!shape)
      return unranked(elt, types);
    if (!out) {
      if (axis < 0 || axis >= static_cast<int64_t>(shape->size()))
        return fail(loc, "Concat axis ", axis, " is out of range for rank ",
                    shape->size());
      out.emplace(*shape);
      continue;
    }
    if (shape->size() != out->size())
      return fail(loc, "Concat inputs have different ranks");
    for (size_t i = 0; i < shape->size(); ++i) {
      if (static_cast<int64_t>(i) == axis)
        continue;
      if ((*shape)[i] != (*out)[i])
        return fail(loc, "Concat input of shape ", shapeStr(*shape),
                    " does not match ", shapeStr(*out), " outside axis ", axis);
    }
    (*out)[axis] += (*shape)[axis];
  }
  types.push_back(RankedTensorType::get(*out, elt));
  return success();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getInput());
  auto shape = shapeOf(adaptor.getInput());
  ArrayRef<int64_t> split = adaptor.getSplit();
  if (!shape) {
    for (size_t i = 0; i < split.size(); ++i)
      types.push_back(UnrankedTensorType::get(elt));
    return success();
  }
  int64_t axis = static_cast<int64_t>(adaptor.getAxis());
  if (axis < 0 || axis >= static_cast<int64_t>(shape->size()))
    return fail(loc, "Split axis ", axis, " is out of range");
  int64_t total = 0;
  for (int64_t s : split) {
    if (s < 0 || s > kMaxDim)
      return fail(loc, "Split sizes must be in [0, ", kMaxDim, "]");
    total += s;
  }
  if (split.empty() || total != (*shape)[axis])
    return fail(loc, "Split sizes ", shapeStr(split), " do not add up to ",
                (*shape)[axis]);
  for (int64_t s : split) {
    SmallVector<int64_t> out(*shape);
    out[axis] = s;
    types.push_back(RankedTensorType::get(out, elt));
  }
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getData());
  auto shape = shapeOf(adaptor.getData());
  if (!shape)
    return unranked(elt, types);
  size_t rank = shape->size();
  if (adaptor.getStarts().size() != rank || adaptor.getEnds().size() != rank ||
      adaptor.getSteps().size() != rank)
    return fail(loc, "Slice needs one start, end and step per axis");
  SmallVector<int64_t> out;
  for (size_t i = 0; i < rank; ++i) {
    int64_t start = adaptor.getStarts()[i], end = adaptor.getEnds()[i],
            step = adaptor.getSteps()[i];
    if (step == 0)
      return fail(loc, "Slice step must not be 0");
    if (std::abs(start) > kMaxDim || std::abs(end) > kMaxDim ||
        std::abs(step) > kMaxDim)
      return fail(loc, "Slice bounds must be normalized (|value| <= ", kMaxDim,
                  ")");
    int64_t n = step > 0 ? (end - start + step - 1) / step
                         : (start - end + (-step) - 1) / (-step);
    out.push_back(std::max<int64_t>(0, n));
  }
  types.push_back(RankedTensorType::get(out, elt));
  return success();
}

LogicalResult FlattenOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getInput());
  auto shape = shapeOf(adaptor.getInput());
  if (!shape)
    return unranked(elt, types);
  auto rank = static_cast<int64_t>(shape->size());
  int64_t axis = static_cast<int64_t>(adaptor.getAxis());
  if (axis < -rank || axis > rank)
    return fail(loc, "Flatten axis ", axis, " is out of range for rank ", rank);
  if (axis < 0)
    axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    (i < axis ? outer : inner) *= (*shape)[i];
  types.push_back(RankedTensorType::get({outer, inner}, elt));
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getData());
  auto shape = shapeOf(adaptor.getData());
  if (!shape)
    return unranked(elt, types);
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if (perm.size() != shape->size())
    return fail(loc, "Transpose perm ", shapeStr(perm), " does not match rank ",
                shape->size());
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> out;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[p])
      return fail(loc, "Transpose perm ", shapeStr(perm),
                  " is not a permutation");
    seen[p] = true;
    out.push_back((*shape)[p]);
  }
  types.push_back(RankedTensorType::get(out, elt));
  return success();
}

LogicalResult SqueezeOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getData());
  auto shape = shapeOf(adaptor.getData());
  if (!shape)
    return unranked(elt, types);
  SmallVector<bool> drop(shape->size(), false);
  for (int64_t a : adaptor.getAxes()) {
    if (a < 0 || a >= static_cast<int64_t>(shape->size()))
      return fail(loc, "Squeeze axis ", a, " is out of range");
    if ((*shape)[a] != 1)
      return fail(loc, "Squeeze axis ", a, " has size ", (*shape)[a],
                  ", not 1");
    drop[a] = true;
  }
  SmallVector<int64_t> out;
  for (size_t i = 0; i < shape->size(); ++i)
    if (!drop[i])
      out.push_back((*shape)[i]);
  types.push_back(RankedTensorType::get(out, elt));
  return success();
}

LogicalResult UnsqueezeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getData());
  auto shape = shapeOf(adaptor.getData());
  if (!shape)
    return unranked(elt, types);
  auto outRank = static_cast<int64_t>(shape->size() + adaptor.getAxes().size());
  SmallVector<bool> inserted(outRank, false);
  for (int64_t a : adaptor.getAxes()) {
    if (a < 0 || a >= outRank || inserted[a])
      return fail(loc, "Unsqueeze axes ", shapeStr(adaptor.getAxes()),
                  " are invalid for an output of rank ", outRank);
    inserted[a] = true;
  }
  SmallVector<int64_t> out;
  auto it = shape->begin();
  for (int64_t i = 0; i < outRank; ++i)
    out.push_back(inserted[i] ? 1 : *it++);
  types.push_back(RankedTensorType::get(out, elt));
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getData());
  auto data = shapeOf(adaptor.getData()), idx = shapeOf(adaptor.getIndices());
  if (!data || !idx)
    return unranked(elt, types);
  auto idxElt = elementTypeOf(adaptor.getIndices());
  if (!idxElt.isInteger(64) && !idxElt.isInteger(32))
    return fail(loc, "Gather indices must be int32 or int64");
  auto axis =
      normalizeAxis(loc, static_cast<int64_t>(adaptor.getAxis()), data->size());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> out(data->begin(), data->begin() + *axis);
  out.append(idx->begin(), idx->end());
  out.append(data->begin() + *axis + 1, data->end());
  types.push_back(RankedTensorType::get(out, elt));
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getData());
  auto shape = shapeOf(adaptor.getData());
  if (!shape)
    return unranked(elt, types);
  size_t rank = shape->size();
  ArrayRef<int64_t> pads = adaptor.getPads();
  if (pads.size() != 2 * rank)
    return fail(loc, "Pad needs ", 2 * rank, " pads for rank ", rank, ", got ",
                pads.size());
  StringRef mode = adaptor.getMode();
  if (mode != "constant" && mode != "reflect" && mode != "edge" &&
      mode != "wrap")
    return fail(loc, "Pad mode '", mode, "' is not supported");
  if (llvm::any_of(pads, [](int64_t p) { return std::abs(p) > kMaxDim; }))
    return fail(loc, "Pad pads must be in [-", kMaxDim, ", ", kMaxDim, "]");
  SmallVector<int64_t> out;
  for (size_t i = 0; i < rank; ++i) {
    int64_t size = (*shape)[i] + pads[i] + pads[i + rank];
    if (size < 0)
      return fail(loc, "Pad makes axis ", i, " negative");
    out.push_back(size);
  }
  types.push_back(RankedTensorType::get(out, elt));
  return success();
}

LogicalResult TileOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getInput());
  auto shape = shapeOf(adaptor.getInput());
  if (!shape)
    return unranked(elt, types);
  ArrayRef<int64_t> repeats = adaptor.getRepeats();
  if (repeats.size() != shape->size())
    return fail(loc, "Tile has ", repeats.size(),
                " repeats for an input of rank ", shape->size());
  SmallVector<int64_t> out;
  for (auto [d, r] : llvm::zip(*shape, repeats)) {
    if (r < 0 || r > kMaxDim)
      return fail(loc, "Tile repeat ", r, " is out of range");
    out.push_back(d * r);
  }
  types.push_back(RankedTensorType::get(out, elt));
  return success();
}

LogicalResult DepthToSpaceOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getInput());
  auto shape = shapeOf(adaptor.getInput());
  if (!shape)
    return unranked(elt, types);
  int64_t b = static_cast<int64_t>(adaptor.getBlocksize());
  if (shape->size() != 4)
    return fail(loc, "DepthToSpace needs a rank-4 input");
  if (b <= 0 || b > kMaxDim || (*shape)[1] % (b * b) != 0)
    return fail(loc, "DepthToSpace: ", (*shape)[1],
                " channels do not split into blocks of ", b, "x", b);
  StringRef mode = adaptor.getMode();
  if (mode != "DCR" && mode != "CRD")
    return fail(loc, "DepthToSpace mode '", mode, "' is not DCR or CRD");
  types.push_back(RankedTensorType::get(
      {(*shape)[0], (*shape)[1] / (b * b), (*shape)[2] * b, (*shape)[3] * b},
      elt));
  return success();
}

LogicalResult SpaceToDepthOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(adaptor.getInput());
  auto shape = shapeOf(adaptor.getInput());
  if (!shape)
    return unranked(elt, types);
  int64_t b = static_cast<int64_t>(adaptor.getBlocksize());
  if (shape->size() != 4)
    return fail(loc, "SpaceToDepth needs a rank-4 input");
  if (b <= 0 || b > kMaxDim || (*shape)[2] % b != 0 || (*shape)[3] % b != 0)
    return fail(loc, "SpaceToDepth: spatial size ", (*shape)[2], "x",
                (*shape)[3], " does not split into blocks of ", b);
  types.push_back(RankedTensorType::get(
      {(*shape)[0], (*shape)[1] * b * b, (*shape)[2] / b, (*shape)[3] / b},
      elt));
  return success();
}
