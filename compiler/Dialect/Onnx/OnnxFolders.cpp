//===- OnnxFolders.cpp - constant folding of shape computations -----------===//
//
// Exporters often compute shapes at run time (Shape -> Gather -> Unsqueeze ->
// Concat -> Reshape). With static shapes every such chain is a constant, and
// the importer folds it while building ops (createOrFold) so that Reshape,
// Slice and friends get constant attributes. Only small integer tensors are
// folded: folding float weights would change what the model computes (and
// must never touch Q/DQ weights), and large tensors belong in resources.
//
//===----------------------------------------------------------------------===//

#include "qatc/Dialect/Onnx/OnnxOps.h"

using namespace mlir;
using namespace qatc::onnx;

namespace {

/// Largest tensor the folders evaluate.
constexpr int64_t kMaxFoldElements = 4096;

/// Integer values of a small constant integer tensor, or nullopt.
std::optional<SmallVector<int64_t>> getInts(Attribute attr) {
  auto dense = dyn_cast_or_null<DenseIntElementsAttr>(attr);
  if (!dense || dense.getNumElements() > kMaxFoldElements)
    return std::nullopt;
  SmallVector<int64_t> out;
  out.reserve(dense.getNumElements());
  for (const APInt &v : dense.getValues<APInt>()) {
    auto elt = dense.getElementType();
    out.push_back(elt.isUnsignedInteger()
                      ? static_cast<int64_t>(v.getZExtValue())
                      : v.getSExtValue());
  }
  return out;
}

/// A dense attribute of `type` (a static integer tensor) holding `values`.
Attribute makeInts(Type type, ArrayRef<int64_t> values) {
  auto tensorType = dyn_cast<RankedTensorType>(type);
  if (!tensorType || !tensorType.hasStaticShape() ||
      !tensorType.getElementType().isIntOrIndex())
    return {};
  unsigned width = tensorType.getElementType().getIntOrFloatBitWidth();
  SmallVector<APInt> apints;
  apints.reserve(values.size());
  for (int64_t v : values)
    apints.emplace_back(
        width, static_cast<uint64_t>(v),
        /*isSigned=*/!tensorType.getElementType().isUnsignedInteger());
  return DenseElementsAttr::get(tensorType, apints);
}

bool isSmallIntTensor(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  return t && t.hasStaticShape() && t.getElementType().isIntOrIndex() &&
         t.getNumElements() <= kMaxFoldElements;
}

SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// Evaluates a broadcasting binary integer op on constants.
template <typename Fn>
OpFoldResult foldBinary(Operation *op, ArrayRef<Attribute> operands, Fn fn) {
  if (operands.size() != 2 || !isSmallIntTensor(op->getResult(0).getType()))
    return {};
  auto a = getInts(operands[0]), b = getInts(operands[1]);
  if (!a || !b)
    return {};
  auto aShape = cast<ShapedType>(op->getOperand(0).getType()).getShape();
  auto bShape = cast<ShapedType>(op->getOperand(1).getType()).getShape();
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());
  ArrayRef<int64_t> outShape = outType.getShape();
  size_t rank = outShape.size();
  SmallVector<int64_t> outStrides = stridesOf(outShape);
  auto index = [&](ArrayRef<int64_t> shape, int64_t flat) {
    SmallVector<int64_t> strides = stridesOf(shape);
    int64_t idx = 0;
    size_t offset = rank - shape.size();
    for (size_t d = 0; d < rank; ++d) {
      int64_t coord = (flat / outStrides[d]) % outShape[d];
      if (d >= offset && shape[d - offset] != 1)
        idx += coord * strides[d - offset];
    }
    return idx;
  };
  SmallVector<int64_t> out(outType.getNumElements());
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    auto r = fn((*a)[index(aShape, i)], (*b)[index(bShape, i)]);
    if (!r)
      return {};
    out[i] = *r;
  }
  return makeInts(outType, out);
}

/// Folds a pure reshape of a constant integer tensor (Squeeze, Unsqueeze,
/// Reshape): the values are unchanged, only the type differs.
OpFoldResult foldReshapeLike(Value input, Type resultType, Attribute operand) {
  if (input.getType() == resultType)
    return input;
  if (!isSmallIntTensor(resultType))
    return {};
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(operand))
    return dense.reshape(cast<ShapedType>(resultType));
  return {};
}

} // namespace

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult IdentityOp::fold(FoldAdaptor) { return getX(); }

OpFoldResult ShapeOp::fold(FoldAdaptor) {
  auto in = dyn_cast<RankedTensorType>(getData().getType());
  auto outType = dyn_cast<RankedTensorType>(getType());
  if (!in || !in.hasStaticShape() || !outType || !outType.hasStaticShape())
    return {};
  auto rank = static_cast<int64_t>(in.getRank());
  int64_t start = static_cast<int64_t>(getStart());
  if (start < 0)
    start += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  SmallVector<int64_t> dims(
      in.getShape().drop_front(start).take_front(outType.getNumElements()));
  return makeInts(outType, dims);
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (!isSmallIntTensor(getType()))
    return {};
  auto values = getInts(adaptor.getInput());
  if (!values)
    return {};
  return makeInts(getType(), *values);
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      *this, adaptor.getOperands(),
      [](int64_t a, int64_t b) -> std::optional<int64_t> { return a + b; });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      *this, adaptor.getOperands(),
      [](int64_t a, int64_t b) -> std::optional<int64_t> { return a - b; });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      *this, adaptor.getOperands(),
      [](int64_t a, int64_t b) -> std::optional<int64_t> { return a * b; });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  // Integer Div truncates toward zero, as in the ONNX reference.
  return foldBinary(*this, adaptor.getOperands(),
                    [](int64_t a, int64_t b) -> std::optional<int64_t> {
                      if (b == 0 || (b == -1 && a == INT64_MIN))
                        return std::nullopt;
                      return a / b;
                    });
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (!isSmallIntTensor(getType()))
    return {};
  auto outType = cast<RankedTensorType>(getType());
  int64_t axis = static_cast<int64_t>(getAxis());
  // Row-major concat: for each outer index, append each input's inner block.
  ArrayRef<int64_t> outShape = outType.getShape();
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= outShape[d];
  SmallVector<SmallVector<int64_t>> values;
  SmallVector<int64_t> blocks;
  for (auto [operand, attr] : llvm::zip(getInputs(), adaptor.getInputs())) {
    auto v = getInts(attr);
    if (!v)
      return {};
    auto shape = cast<RankedTensorType>(operand.getType()).getShape();
    int64_t block = 1;
    for (size_t d = axis; d < shape.size(); ++d)
      block *= shape[d];
    values.push_back(std::move(*v));
    blocks.push_back(block);
  }
  SmallVector<int64_t> out;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < values.size(); ++i)
      out.append(values[i].begin() + o * blocks[i],
                 values[i].begin() + (o + 1) * blocks[i]);
  return makeInts(outType, out);
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  auto inType = dyn_cast<RankedTensorType>(getData().getType());
  if (!inType || !isSmallIntTensor(getType()))
    return {};
  auto values = getInts(adaptor.getData());
  if (!values)
    return {};
  auto outType = cast<RankedTensorType>(getType());
  ArrayRef<int64_t> outShape = outType.getShape();
  SmallVector<int64_t> inStrides = stridesOf(inType.getShape());
  SmallVector<int64_t> outStrides = stridesOf(outShape);
  SmallVector<int64_t> out(outType.getNumElements());
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < outShape.size(); ++d) {
      int64_t coord = (i / outStrides[d]) % outShape[d];
      src += (getStarts()[d] + coord * getSteps()[d]) * inStrides[d];
    }
    out[i] = (*values)[src];
  }
  return makeInts(outType, out);
}

OpFoldResult SqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(getData(), getType(), adaptor.getData());
}

OpFoldResult UnsqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(getData(), getType(), adaptor.getData());
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(getData(), getType(), adaptor.getData());
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  auto inType = dyn_cast<RankedTensorType>(getData().getType());
  if (!inType || !isSmallIntTensor(getType()))
    return {};
  auto data = getInts(adaptor.getData());
  auto indices = getInts(adaptor.getIndices());
  if (!data || !indices)
    return {};
  ArrayRef<int64_t> shape = inType.getShape();
  auto rank = static_cast<int64_t>(shape.size());
  int64_t axis = static_cast<int64_t>(getAxis());
  if (axis < 0)
    axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= shape[d];
  int64_t n = shape[axis];
  SmallVector<int64_t> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t idx : *indices) {
      if (idx < -n || idx >= n)
        return {};
      if (idx < 0)
        idx += n;
      auto begin = data->begin() + (o * n + idx) * inner;
      out.append(begin, begin + inner);
    }
  return makeInts(getType(), out);
}
