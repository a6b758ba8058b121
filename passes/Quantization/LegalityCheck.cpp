//===- LegalityCheck.cpp - refuse Q/DQ graphs qatc cannot honour ----------===//
//
// Explicit quantization makes the Q/DQ nodes the specification: qatc may move
// and fuse them only where the arithmetic stays the same, and must say so
// when a model asks for something it cannot do exactly. This pass runs on the
// imported onnx dialect, before anything is converted, and reports every
// problem at its ONNX node (all of them, not just the first).
//
//===----------------------------------------------------------------------===//

#include "QuantUtils.h"
#include "qatc/Quantization/Passes.h"

#include "mlir/IR/TypeUtilities.h"

#include <cmath>

namespace qatc::quantization {
#define GEN_PASS_DEF_QATLEGALITYCHECK
#include "qatc/Quantization/Passes.h.inc"
} // namespace qatc::quantization

using namespace mlir;
using namespace qatc;
using namespace qatc::quantization;

namespace {

/// True if every use of `v` is a Conv/ConvTranspose/Gemm/MatMul weight
/// operand (where the int8 kernels need symmetric weights).
bool feedsWeightOperand(Value v) {
  if (v.use_empty())
    return false;
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    unsigned i = use.getOperandNumber();
    bool weight = (isa<onnx::ConvOp, onnx::ConvTransposeOp>(user) && i == 1) ||
                  (isa<onnx::GemmOp, onnx::MatMulOp>(user) && i == 1);
    if (!weight)
      return false;
  }
  return true;
}

struct QatLegalityCheckPass
    : public qatc::quantization::impl::QatLegalityCheckBase<
          QatLegalityCheckPass> {
  using QatLegalityCheckBase::QatLegalityCheckBase;

  void runOnOperation() override {
    bool ok = true;
    getOperation().walk([&](Operation *op) {
      if (auto q = dyn_cast<onnx::QuantizeLinearOp>(op))
        ok &= succeeded(checkQuantize(q));
      else if (auto dq = dyn_cast<onnx::DequantizeLinearOp>(op))
        ok &= succeeded(checkDequantize(dq));
    });
    if (!ok)
      signalPassFailure();
  }

  /// Checks the scale and zero point shared by Q and DQ. `quantType` is the
  /// integer type (Q's result, DQ's input).
  LogicalResult checkParams(Operation *op, Value data, Value scale,
                            Value zeroPoint, Type quantType, int64_t axis) {
    StringRef kind = op->getName().stripDialect();
    // Scale: a constant float32 tensor of finite, positive values.
    Type scaleElt = getElementTypeOrSelf(scale.getType());
    if (!scaleElt.isF32())
      return op->emitError() << kind << " scale is " << scaleElt
                             << "; qatc supports float32 scales only";
    auto scales = getConstantAsDoubles(scale);
    if (!scales)
      return op->emitError()
             << kind
             << " scale must be a constant (an initializer); a scale computed "
                "at run time cannot be compiled";
    for (auto [i, s] : llvm::enumerate(*scales))
      if (!(s > 0) || !std::isfinite(s)) {
        InFlightDiagnostic diag = op->emitError();
        diag << kind << " scale";
        if (scales->size() > 1)
          diag << "[" << i << "]";
        return diag << " is " << s
                    << "; scales must be finite and positive (a non-positive "
                       "scale breaks max pooling, Relu and clamps, which "
                       "rely on quantization being monotone)";
      }
    // Zero point: constant, and of a type qatc computes with.
    std::optional<std::vector<double>> zps;
    if (zeroPoint && !(zps = getConstantAsDoubles(zeroPoint)))
      return op->emitError() << kind << " zero point must be a constant";
    auto intType = dyn_cast<IntegerType>(quantType);
    bool isInt32 = intType && intType.getWidth() == 32;
    if (!intType || (intType.getWidth() != 8 && !isInt32))
      return op->emitError()
             << kind << " with " << quantType
             << " data is not supported: qatc computes in int8/uint8 (and "
                "int32 only for biases)";
    if (isInt32) {
      if (!isa<onnx::DequantizeLinearOp>(op))
        return op->emitError("QuantizeLinear to int32 is not supported");
      if (zps) {
        if (llvm::any_of(*zps, [](double z) { return z != 0; }))
          return op->emitError("DequantizeLinear of int32 data (a bias) must "
                               "have zero point 0");
      }
    }
    bool perAxis = scales->size() > 1;
    // Activations are quantized per tensor: an int8 kernel applies one scale
    // to a whole input (TensorRT imposes the same rule).
    // Weights: an initializer, or (QAT exports) QuantizeLinear of one.
    bool constantData = data.getDefiningOp<onnx::ConstantOp>() != nullptr;
    if (auto q = data.getDefiningOp<onnx::QuantizeLinearOp>())
      constantData = q.getX().getDefiningOp<onnx::ConstantOp>() != nullptr;
    if (perAxis && !constantData)
      return op->emitError()
             << kind << " quantizes a computed tensor per axis (axis " << axis
             << "); activations must be quantized per tensor, only constant "
                "weights per channel";
    if (zps) {
      bool nonZero = llvm::any_of(*zps, [](double z) { return z != 0; });
      if (nonZero && trtCompat)
        return op->emitError()
               << kind
               << " has a non-zero zero point; TensorRT (and --trt-compat) "
                  "accept symmetric quantization only";
      if (nonZero && constantData && isa<onnx::DequantizeLinearOp>(op) &&
          feedsWeightOperand(op->getResult(0)))
        return op->emitError(
            "weight zero point is not 0: qatc's int8 kernels need symmetric "
            "weights (zero point 0), as TensorRT does");
    } else if (trtCompat && isa<onnx::QuantizeLinearOp>(op)) {
      return op->emitError(
          "QuantizeLinear without a zero point produces uint8 (ONNX default); "
          "TensorRT (and --trt-compat) need an int8 zero point");
    }
    if (trtCompat && intType.isUnsigned())
      return op->emitError()
             << kind
             << " uses uint8; TensorRT (and --trt-compat) accept uint8 only as "
                "a network input or output type, not for Q/DQ";
    return success();
  }

  LogicalResult checkQuantize(onnx::QuantizeLinearOp q) {
    Type in = getElementTypeOrSelf(q.getX().getType());
    if (!in.isF32())
      return q.emitError() << "QuantizeLinear of " << in
                           << " input is not supported (float32 only)";
    return checkParams(q, q.getX(), q.getYScale(), q.getYZeroPoint(),
                       getElementTypeOrSelf(q.getY().getType()), q.getAxis());
  }

  LogicalResult checkDequantize(onnx::DequantizeLinearOp dq) {
    if (failed(checkParams(dq, dq.getX(), dq.getXScale(), dq.getXZeroPoint(),
                           getElementTypeOrSelf(dq.getX().getType()),
                           dq.getAxis())))
      return failure();
    // A per-axis weight must be quantized along an axis its consumer can
    // factor out of the integer sum; otherwise it is evaluated in float,
    // which is exact but slow, so say so.
    auto scales = getConstantAsDoubles(dq.getXScale());
    if (scales && scales->size() > 1)
      for (OpOperand &use : dq.getY().getUses())
        warnReductionAxis(dq, use);
    return success();
  }

  void warnReductionAxis(onnx::DequantizeLinearOp dq, OpOperand &use) {
    Operation *user = use.getOwner();
    int64_t axis = dq.getAxis();
    std::optional<int64_t> want =
        weightChannelAxis(user, use.getOperandNumber());
    if (want && *want != axis)
      dq.emitWarning() << "weight is quantized per channel along axis " << axis
                       << ", a reduction axis of "
                       << user->getName().stripDialect()
                       << " (its output channels are axis " << *want
                       << "); the node will run in fp32";
  }
};

} // namespace
