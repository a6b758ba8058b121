//===- OnnxVerifiers.cpp - verifiers of onnx ops --------------------------===//
//
// Checks for ops whose result type is not derived by shape inference, and the
// element-type rules of QuantizeLinear/DequantizeLinear (qdq-rules §2).
//
//===----------------------------------------------------------------------===//

#include "qatc/Dialect/Onnx/OnnxOps.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace qatc::onnx;

namespace {

bool isInt8Like(Type t) { return t.isInteger(8); }

bool isQuantScaleType(Type t) { return t.isF32() || t.isF16() || t.isBF16(); }

} // namespace

LogicalResult QuantizeLinearOp::verify() {
  Type x = getElementTypeOrSelf(getX().getType());
  if (!x.isF32() && !x.isF16() && !x.isBF16() && !x.isInteger(32))
    return emitOpError("input must be float or int32, got ") << x;
  if (!isQuantScaleType(getElementTypeOrSelf(getYScale().getType())))
    return emitOpError("scale must be float32, float16 or bfloat16");
  Type y = getElementTypeOrSelf(getY().getType());
  if (!isInt8Like(y))
    return emitOpError("output type ")
           << y << " is not supported (qatc quantizes to int8 or uint8)";
  return success();
}

LogicalResult DequantizeLinearOp::verify() {
  Type x = getElementTypeOrSelf(getX().getType());
  if (!isInt8Like(x) && !x.isSignlessInteger(32))
    return emitOpError("input type ")
           << x << " is not supported (qatc dequantizes int8, uint8 or int32)";
  if (!isQuantScaleType(getElementTypeOrSelf(getXScale().getType())))
    return emitOpError("scale must be float32, float16 or bfloat16");
  if (Value zp = getXZeroPoint()) {
    if (getElementTypeOrSelf(zp.getType()) != x)
      return emitOpError("zero point type ")
             << getElementTypeOrSelf(zp.getType())
             << " differs from input type " << x;
    // ONNX: an int32 input (a quantized bias) has no zero point, or zero.
    DenseIntElementsAttr zpValue;
    if (x.isSignlessInteger(32) && matchPattern(zp, m_Constant(&zpValue)) &&
        llvm::any_of(zpValue.getValues<APInt>(),
                     [](const APInt &v) { return !v.isZero(); }))
      return emitOpError("int32 input must have a zero point of 0");
  }
  return success();
}

LogicalResult CastOp::verify() {
  auto in = cast<ShapedType>(getInput().getType());
  auto out = cast<ShapedType>(getOutput().getType());
  if (in.hasRank() && out.hasRank() && in.getShape() != out.getShape())
    return emitOpError("changes the shape");
  return success();
}

/// Softmax and LogSoftmax: the axis must exist.
static LogicalResult verifySoftmaxAxis(Operation *op, Value x, int64_t axis) {
  auto type = dyn_cast<RankedTensorType>(x.getType());
  if (type && (axis < -type.getRank() || axis >= type.getRank()))
    return op->emitOpError("axis ")
           << axis << " is out of range for rank " << type.getRank();
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return verifySoftmaxAxis(*this, getX(), static_cast<int64_t>(getAxis()));
}

LogicalResult LogSoftmaxOp::verify() {
  return verifySoftmaxAxis(*this, getX(), static_cast<int64_t>(getAxis()));
}

LogicalResult ExpandOp::verify() {
  auto in = cast<ShapedType>(getInput().getType());
  auto out = cast<ShapedType>(getOutput().getType());
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type");
  if (in.hasRank() && out.hasRank()) {
    auto shape = broadcastShapes(in.getShape(), out.getShape());
    if (failed(shape) || ArrayRef<int64_t>(*shape) != out.getShape())
      return emitOpError("cannot broadcast ")
             << in << " to the result type " << out;
  }
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = cast<ShapedType>(getData().getType());
  auto out = cast<ShapedType>(getReshaped().getType());
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type");
  if (in.hasStaticShape() && out.hasStaticShape() &&
      in.getNumElements() != out.getNumElements())
    return emitOpError("changes the number of elements from ")
           << in.getNumElements() << " to " << out.getNumElements();
  return success();
}

LogicalResult ResizeOp::verify() {
  auto in = cast<ShapedType>(getX().getType());
  auto out = cast<ShapedType>(getY().getType());
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type");
  if (in.hasRank() && out.hasRank()) {
    if (in.getRank() != out.getRank())
      return emitOpError("changes the rank");
    if (static_cast<int64_t>(getScales().size()) != in.getRank())
      return emitOpError("needs one scale per axis");
  }
  StringRef mode = getMode();
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return emitOpError("mode '") << mode << "' is not supported";
  return success();
}
