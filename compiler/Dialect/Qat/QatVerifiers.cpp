//===- QatVerifiers.cpp - verifiers and interface methods of the qat ops --===//
//
// The verifiers check every shape and quantization invariant a kernel relies
// on, so hand-written or transformed IR that breaks one fails at the op (with
// its ONNX node name) instead of computing garbage later.
//
//===----------------------------------------------------------------------===//

#include "qatc/Dialect/Onnx/OnnxOps.h"
#include "qatc/Dialect/Qat/QatOps.h"

#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace qatc::qat;

namespace {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "," : "") + std::to_string(d);
  return s + "]";
}

/// Checks that a per-axis type's dimension and scale count fit `shape`.
LogicalResult verifyQuantShape(Operation *op, Type type, StringRef what) {
  auto axis =
      dyn_cast<quant::UniformQuantizedPerAxisType>(getElementTypeOrSelf(type));
  if (!axis)
    return success();
  ArrayRef<int64_t> shape = cast<RankedTensorType>(type).getShape();
  int64_t dim = axis.getQuantizedDimension();
  if (dim < 0 || dim >= static_cast<int64_t>(shape.size()))
    return op->emitOpError() << what << " is quantized along axis " << dim
                             << " but has rank " << shape.size();
  if (static_cast<int64_t>(axis.getScales().size()) != shape[dim])
    return op->emitOpError()
           << what << " has " << axis.getScales().size()
           << " per-axis scales for axis " << dim << " of size " << shape[dim];
  return success();
}

LogicalResult verifySameShape(Operation *op, Value a, Value b) {
  if (shapeOf(a) != shapeOf(b))
    return op->emitOpError()
           << "operand shape " << shapeStr(shapeOf(a))
           << " differs from the result shape " << shapeStr(shapeOf(b));
  return success();
}

/// Expected result shape of a sliding-window op over `input`.
FailureOr<SmallVector<int64_t>>
windowShape(Operation *op, ArrayRef<int64_t> input, int64_t channels,
            ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
            ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
            bool ceilMode) {
  if (input.size() < 3)
    return op->emitOpError("expects an input of rank >= 3, got ")
           << shapeStr(input);
  size_t spatial = input.size() - 2;
  if (kernel.size() != spatial || strides.size() != spatial ||
      pads.size() != 2 * spatial ||
      (!dilations.empty() && dilations.size() != spatial))
    return op->emitOpError("expects ")
           << spatial << " kernel/stride/dilation entries and " << 2 * spatial
           << " pads";
  SmallVector<int64_t> out{input[0], channels};
  for (size_t i = 0; i < spatial; ++i) {
    auto size = qatc::onnx::getWindowOutputSize(
        op->getLoc(), input[i + 2], kernel[i], strides[i], pads[i],
        pads[i + spatial], dilations.empty() ? 1 : dilations[i], ceilMode);
    if (failed(size))
      return failure();
    out.push_back(*size);
  }
  return out;
}

LogicalResult verifyResultShape(Operation *op, ArrayRef<int64_t> expected) {
  ArrayRef<int64_t> got = shapeOf(op->getResult(0));
  if (got != expected)
    return op->emitOpError("result shape ")
           << shapeStr(got) << " should be " << shapeStr(expected);
  return success();
}

/// Checks an optional per-channel f32 operand (bias, scale) has `channels`
/// elements.
LogicalResult verifyChannelVector(Operation *op, Value v, int64_t channels,
                                  StringRef what) {
  if (!v)
    return success();
  ArrayRef<int64_t> shape = shapeOf(v);
  if (shape.size() != 1 || shape[0] != channels)
    return op->emitOpError() << what << " must have shape [" << channels
                             << "], got " << shapeStr(shape);
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// QuantizedOpInterface
//===----------------------------------------------------------------------===//

LogicalResult qatc::qat::verifyQuantizedOp(Operation *op) {
  auto iface = cast<QuantizedOpInterface>(op);
  if (iface.getScaleRelation() == ScaleRelation::SameScale) {
    Type expected = getElementTypeOrSelf(op->getResult(0).getType());
    SmallVector<Value> values(op->getOperands());
    values.append(op->result_begin(), op->result_end());
    for (Value v : values) {
      Type elt = getElementTypeOrSelf(v.getType());
      if (isa<quant::QuantizedType>(elt) && elt != expected)
        return op->emitOpError("selects or moves values, so every quantized "
                               "operand and result must have the type ")
               << expected << ", got " << elt;
    }
  }
  if (auto w = iface.getWeightOperandIndex()) {
    Type type = op->getOperand(*w).getType();
    if (auto axis = dyn_cast<quant::UniformQuantizedPerAxisType>(
            getElementTypeOrSelf(type))) {
      int64_t want = iface.getWeightChannelAxis();
      if (axis.getQuantizedDimension() != want)
        return op->emitOpError("weight is quantized per axis along axis ")
               << axis.getQuantizedDimension()
               << ", but only its output-channel axis " << want
               << " can be factored out of the integer sum";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Boundaries and constants
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::verify() {
  auto valueType = cast<ShapedType>(getValue().getType());
  auto type = getOutput().getType();
  auto qtype = getQuantType(type);
  if (valueType.getShape() != type.getShape())
    return emitOpError("value shape ")
           << shapeStr(valueType.getShape()) << " differs from the result "
           << shapeStr(type.getShape());
  auto storage = dyn_cast<IntegerType>(valueType.getElementType());
  if (!storage || storage.getWidth() != qtype.getStorageTypeIntegralWidth())
    return emitOpError("value must hold the ")
           << qtype.getStorageTypeIntegralWidth()
           << "-bit integers of the quantized type, got "
           << valueType.getElementType();
  return verifyQuantShape(*this, type, "result");
}

LogicalResult StorageCastOp::verify() {
  if (failed(verifySameShape(*this, getInput(), getOutput())))
    return failure();
  auto qin = getQuantType(getInput().getType());
  auto qout = getQuantType(getOutput().getType());
  if (bool(qin) == bool(qout))
    return emitOpError("casts between an integer tensor and a quantized one; "
                       "exactly one side must be quantized");
  auto qtype = qin ? qin : qout;
  auto storage = dyn_cast<IntegerType>(
      getElementTypeOrSelf(qin ? getOutput() : getInput()));
  if (!storage || storage.getWidth() != qtype.getStorageTypeIntegralWidth() ||
      storage.isUnsigned() == qtype.isSigned())
    return emitOpError("integer type ")
           << getElementTypeOrSelf(qin ? getOutput() : getInput())
           << " does not store " << qtype;
  return verifyQuantShape(
      *this, qtype == qin ? getInput().getType() : getOutput().getType(),
      "quantized side");
}

LogicalResult QuantizeOp::verify() {
  if (failed(verifySameShape(*this, getInput(), getOutput())))
    return failure();
  return verifyQuantShape(*this, getOutput().getType(), "result");
}

LogicalResult DequantizeOp::verify() {
  if (failed(verifySameShape(*this, getInput(), getOutput())))
    return failure();
  return verifyQuantShape(*this, getInput().getType(), "operand");
}

LogicalResult RequantizeOp::verify() {
  return verifySameShape(*this, getInput(), getOutput());
}

ScaleRelation RequantizeOp::getScaleRelation() {
  return ScaleRelation::Rescale;
}

//===----------------------------------------------------------------------===//
// Conv and matmul
//===----------------------------------------------------------------------===//

/// Accumulator scales s_in * s_w[c] of an op with `channels` outputs.
static SmallVector<double> accumulatorScales(Value input, Value weight,
                                             int64_t channels) {
  double sIn = getPerTensorType(input.getType()).getScale();
  SmallVector<double> scales =
      getChannelScales(getQuantType(weight.getType()), channels);
  for (double &s : scales)
    s *= sIn;
  return scales;
}

/// Checks the epilogue operands shared by conv and matmul.
template <typename OpTy>
static LogicalResult verifyEpilogue(OpTy op, int64_t channels) {
  if (failed(verifyChannelVector(op, op.getBias(), channels, "bias")) ||
      failed(verifyChannelVector(op, op.getChannelScale(), channels,
                                 "channel scale")) ||
      failed(verifyQuantShape(op, op->getOperand(1).getType(), "weight")))
    return failure();
  if (Value r = op.getResidual())
    if (failed(verifySameShape(op, r, op.getOutput())))
      return failure();
  return success();
}

LogicalResult ConvOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getInput()), w = shapeOf(getWeight());
  if (x.size() < 3 || x.size() != w.size())
    return emitOpError("input ") << shapeStr(x) << " and weight " << shapeStr(w)
                                 << " must have the same rank >= 3";
  int64_t group = getGroup();
  if (group <= 0 || w[0] % group != 0 || x[1] != w[1] * group)
    return emitOpError("input has ")
           << x[1] << " channels but the weight " << shapeStr(w)
           << " with group=" << group << " expects " << w[1] * group;
  auto expected = windowShape(*this, x, w[0], w.drop_front(2), getStrides(),
                              getPads(), getDilations(), false);
  if (failed(expected) || failed(verifyResultShape(*this, *expected)))
    return failure();
  return verifyEpilogue(*this, w[0]);
}

ScaleRelation ConvOp::getScaleRelation() { return ScaleRelation::Rescale; }
std::optional<unsigned> ConvOp::getWeightOperandIndex() { return 1; }
int64_t ConvOp::getWeightChannelAxis() { return 0; }
std::optional<unsigned> ConvOp::getBiasOperandIndex() {
  if (!getBias())
    return std::nullopt;
  return 2;
}
SmallVector<double> ConvOp::getAccumulatorScales() {
  return accumulatorScales(getInput(), getWeight(), shapeOf(getWeight())[0]);
}

/// Output columns N of a matmul.
static int64_t matmulColumns(MatMulOp op) {
  ArrayRef<int64_t> b = shapeOf(op.getRhs());
  return op.getTransposeRhs() ? b[b.size() - 2] : b.back();
}

LogicalResult MatMulOp::verify() {
  ArrayRef<int64_t> a = shapeOf(getLhs()), b = shapeOf(getRhs());
  if (a.size() < 2 || b.size() < 2)
    return emitOpError("operands must have rank >= 2, got ")
           << shapeStr(a) << " and " << shapeStr(b);
  int64_t k = a.back();
  int64_t kb = getTransposeRhs() ? b.back() : b[b.size() - 2];
  if (k != kb)
    return emitOpError("contracts ")
           << shapeStr(a) << " with " << shapeStr(b)
           << (getTransposeRhs() ? " (transposed)" : "")
           << ": inner dimensions differ";
  auto batch = qatc::onnx::broadcastShapes(a.drop_back(2), b.drop_back(2));
  if (failed(batch))
    return emitOpError("batch dimensions of ")
           << shapeStr(a) << " and " << shapeStr(b) << " do not broadcast";
  SmallVector<int64_t> expected(*batch);
  expected.push_back(a[a.size() - 2]);
  expected.push_back(matmulColumns(*this));
  if (failed(verifyResultShape(*this, expected)))
    return failure();
  if (isa<quant::UniformQuantizedPerAxisType>(
          getElementTypeOrSelf(getRhs().getType())) &&
      b.size() != 2)
    return emitOpError("a per-axis quantized rhs must be a 2-D weight");
  return verifyEpilogue(*this, matmulColumns(*this));
}

ScaleRelation MatMulOp::getScaleRelation() { return ScaleRelation::Rescale; }
std::optional<unsigned> MatMulOp::getWeightOperandIndex() { return 1; }
int64_t MatMulOp::getWeightChannelAxis() {
  int64_t rank = shapeOf(getRhs()).size();
  return getTransposeRhs() ? rank - 2 : rank - 1;
}
std::optional<unsigned> MatMulOp::getBiasOperandIndex() {
  if (!getBias())
    return std::nullopt;
  return 2;
}
SmallVector<double> MatMulOp::getAccumulatorScales() {
  return accumulatorScales(getLhs(), getRhs(), matmulColumns(*this));
}

//===----------------------------------------------------------------------===//
// Elementwise and pooling
//===----------------------------------------------------------------------===//

static LogicalResult verifyElementwise(Operation *op, Value lhs, Value rhs) {
  auto shape = qatc::onnx::broadcastShapes(shapeOf(lhs), shapeOf(rhs));
  if (failed(shape))
    return op->emitOpError("operand shapes ")
           << shapeStr(shapeOf(lhs)) << " and " << shapeStr(shapeOf(rhs))
           << " do not broadcast";
  return verifyResultShape(op, *shape);
}

LogicalResult AddOp::verify() {
  return verifyElementwise(*this, getLhs(), getRhs());
}
LogicalResult MulOp::verify() {
  return verifyElementwise(*this, getLhs(), getRhs());
}

LogicalResult AvgPoolOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getInput());
  if (x.size() < 3)
    return emitOpError("expects an input of rank >= 3");
  auto expected = windowShape(*this, x, x[1], getKernelShape(), getStrides(),
                              getPads(), {}, getCeilMode() != 0);
  if (failed(expected))
    return failure();
  return verifyResultShape(*this, *expected);
}
ScaleRelation AvgPoolOp::getScaleRelation() { return ScaleRelation::Rescale; }

LogicalResult GlobalAvgPoolOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getInput());
  if (x.size() < 3)
    return emitOpError("expects an input of rank >= 3");
  SmallVector<int64_t> expected{x[0], x[1]};
  expected.append(x.size() - 2, 1);
  return verifyResultShape(*this, expected);
}
ScaleRelation GlobalAvgPoolOp::getScaleRelation() {
  return ScaleRelation::Rescale;
}

LogicalResult MaxPoolOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getInput());
  if (x.size() < 3)
    return emitOpError("expects an input of rank >= 3");
  auto expected = windowShape(*this, x, x[1], getKernelShape(), getStrides(),
                              getPads(), getDilations(), getCeilMode() != 0);
  if (failed(expected))
    return failure();
  if (getPerTensorType(getInput().getType()).getScale() <= 0)
    return emitOpError("max pooling on integers needs a positive scale");
  return verifyResultShape(*this, *expected);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ClampOp::verify() {
  auto type = getPerTensorType(getInput().getType());
  auto lo = static_cast<int64_t>(getMin()), hi = static_cast<int64_t>(getMax());
  if (lo > hi)
    return emitOpError("min ") << lo << " exceeds max " << hi;
  if (lo < type.getStorageTypeMin() || hi > type.getStorageTypeMax())
    return emitOpError("bounds [")
           << lo << ", " << hi << "] leave the storage range ["
           << type.getStorageTypeMin() << ", " << type.getStorageTypeMax()
           << "]";
  return verifySameShape(*this, getInput(), getOutput());
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  ArrayRef<int64_t> out = shapeOf(getOutput());
  int64_t axis = getAxis();
  if (axis < 0 || axis >= static_cast<int64_t>(out.size()))
    return emitOpError("axis ") << axis << " is out of range";
  int64_t total = 0;
  for (Value in : getInputs()) {
    ArrayRef<int64_t> s = shapeOf(in);
    if (s.size() != out.size())
      return emitOpError("inputs must have the result's rank");
    for (size_t d = 0; d < s.size(); ++d)
      if (static_cast<int64_t>(d) != axis && s[d] != out[d])
        return emitOpError("input ")
               << shapeStr(s) << " differs from the result " << shapeStr(out)
               << " outside axis " << axis;
    total += s[axis];
  }
  if (total != out[axis])
    return emitOpError("inputs add up to ") << total << " along axis " << axis
                                            << ", the result has " << out[axis];
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getOutput().getType());
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << shapeStr(in.getShape()) << " to " << shapeStr(out.getShape());
  return success();
}

LogicalResult TransposeOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput());
  ArrayRef<int64_t> perm = getPerm();
  if (perm.size() != in.size())
    return emitOpError("perm has ")
           << perm.size() << " entries for rank " << in.size();
  SmallVector<int64_t> expected;
  SmallVector<bool> seen(in.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(in.size()) || seen[p])
      return emitOpError("perm is not a permutation");
    seen[p] = true;
    expected.push_back(in[p]);
  }
  return verifyResultShape(*this, expected);
}

LogicalResult SliceOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput());
  size_t rank = in.size();
  if (getStarts().size() != rank || getEnds().size() != rank ||
      getSteps().size() != rank)
    return emitOpError("needs one start, end and step per axis");
  SmallVector<int64_t> expected;
  for (size_t i = 0; i < rank; ++i) {
    int64_t step = getSteps()[i];
    if (step == 0)
      return emitOpError("step must not be 0");
    int64_t span = getEnds()[i] - getStarts()[i];
    int64_t n = step > 0 ? (span + step - 1) / step : (span + step + 1) / step;
    expected.push_back(std::max<int64_t>(0, n));
  }
  return verifyResultShape(*this, expected);
}

LogicalResult GatherOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput()), idx = shapeOf(getIndices());
  int64_t axis = getAxis();
  if (axis < 0 || axis >= static_cast<int64_t>(in.size()))
    return emitOpError("axis ") << axis << " is out of range";
  SmallVector<int64_t> expected(in.begin(), in.begin() + axis);
  expected.append(idx.begin(), idx.end());
  expected.append(in.begin() + axis + 1, in.end());
  return verifyResultShape(*this, expected);
}

LogicalResult ResizeOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getOutput());
  if (in.size() != out.size() || getScales().size() != in.size())
    return emitOpError("needs one scale per axis and keeps the rank");
  return success();
}

LogicalResult PadOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput());
  ArrayRef<int64_t> pads = getPads();
  if (pads.size() != 2 * in.size())
    return emitOpError("needs ") << 2 * in.size() << " pads";
  SmallVector<int64_t> expected;
  for (size_t d = 0; d < in.size(); ++d)
    expected.push_back(in[d] + pads[d] + pads[d + in.size()]);
  return verifyResultShape(*this, expected);
}

#define GET_OP_CLASSES
#include "qatc/Dialect/Qat/QatOps.cpp.inc"
