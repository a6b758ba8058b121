//===- QdqConvert.cpp - ONNX Q/DQ nodes to qat.quantize / qat.dequantize --===//
//
// After this pass the quantization parameters live in the types: a
// QuantizeLinear's result is a tensor of `!quant.uniform<i8:f32, s:z>` (or a
// per-axis type), so every later pass and the lowering read scales and zero
// points from the value itself instead of chasing constant operands.
//
//===----------------------------------------------------------------------===//

#include "QuantUtils.h"
#include "qatc/Quantization/Passes.h"

#include "mlir/IR/Iterators.h"
#include "mlir/IR/TypeUtilities.h"

namespace qatc::quantization {
#define GEN_PASS_DEF_QATQDQCONVERT
#include "qatc/Quantization/Passes.h.inc"
} // namespace qatc::quantization

using namespace mlir;
using namespace qatc;
using namespace qatc::quantization;

namespace {

/// The `!quant.uniform` element type a Q/DQ node describes.
FailureOr<quant::QuantizedType> buildQuantType(Operation *op, Value data,
                                               Value scale, Value zeroPoint,
                                               IntegerType storage,
                                               int64_t axis) {
  auto scales = getConstantAsDoubles(scale);
  std::optional<std::vector<double>> zps;
  if (zeroPoint)
    zps = getConstantAsDoubles(zeroPoint);
  if (!scales || scales->empty() || (zeroPoint && !zps))
    return op->emitError("quantization parameters must be constants (run "
                         "qat-legality-check first)"),
           failure();
  if (!zps)
    zps = std::vector<double>(scales->size(), 0.0);
  MLIRContext *ctx = op->getContext();
  bool isSigned = !storage.isUnsigned();
  unsigned width = storage.getWidth();
  int64_t qmin =
      quant::QuantizedType::getDefaultMinimumForInteger(isSigned, width);
  int64_t qmax =
      quant::QuantizedType::getDefaultMaximumForInteger(isSigned, width);
  unsigned flags = isSigned ? quant::QuantizationFlags::Signed : 0;
  Type storageType = IntegerType::get(ctx, width);
  Type f32 = Float32Type::get(ctx);
  auto emit = [&] { return op->emitError(); };
  if (scales->size() == 1) {
    auto type = quant::UniformQuantizedType::getChecked(
        emit, flags, storageType, f32, (*scales)[0],
        static_cast<int64_t>((*zps)[0]), qmin, qmax);
    if (!type)
      return failure();
    return cast<quant::QuantizedType>(type);
  }
  auto rank = cast<RankedTensorType>(data.getType()).getRank();
  if (axis < 0)
    axis += rank;
  SmallVector<int64_t> zpInts;
  for (double z : *zps)
    zpInts.push_back(static_cast<int64_t>(z));
  auto type = quant::UniformQuantizedPerAxisType::getChecked(
      emit, flags, storageType, f32, *scales, zpInts,
      static_cast<int32_t>(axis), qmin, qmax);
  if (!type)
    return failure();
  return cast<quant::QuantizedType>(type);
}

struct QatQdqConvertPass
    : public qatc::quantization::impl::QatQdqConvertBase<QatQdqConvertPass> {
  void runOnOperation() override {
    SmallVector<Operation *> qdq;
    getOperation().walk([&](Operation *op) {
      if (isa<onnx::QuantizeLinearOp, onnx::DequantizeLinearOp>(op))
        qdq.push_back(op);
    });
    for (Operation *op : qdq) {
      LogicalResult result =
          isa<onnx::QuantizeLinearOp>(op)
              ? convertQuantize(cast<onnx::QuantizeLinearOp>(op))
              : convertDequantize(cast<onnx::DequantizeLinearOp>(op));
      if (failed(result))
        return signalPassFailure();
    }
    // Casts that only fed converted dequantizes, and the scale and zero
    // point constants, are dead now.
    SmallVector<Operation *> dead;
    getOperation().walk<WalkOrder::PostOrder, mlir::ReverseIterator>(
        [&](Operation *op) {
          if (isa<qat::StorageCastOp, onnx::ConstantOp>(op) && op->use_empty())
            dead.push_back(op);
        });
    for (Operation *op : dead)
      op->erase();
  }

  LogicalResult convertQuantize(onnx::QuantizeLinearOp q) {
    auto storage = cast<IntegerType>(getElementTypeOrSelf(q.getY().getType()));
    auto qtype = buildQuantType(q, q.getX(), q.getYScale(), q.getYZeroPoint(),
                                storage, q.getAxis());
    if (failed(qtype))
      return failure();
    OpBuilder b(q);
    auto shape = cast<RankedTensorType>(q.getY().getType()).getShape();
    auto newQ = b.create<qat::QuantizeOp>(q.getLoc(), tensorOf(shape, *qtype),
                                          q.getX(), halfToEven(b.getContext()));
    setTensorName(newQ, getTensorName(q.getY()));
    // Integer consumers (graph outputs, dequantizes not yet converted) see
    // the stored integers through a cast.
    auto back = b.create<qat::StorageCastOp>(q.getLoc(), q.getY().getType(),
                                             newQ.getResult());
    q.getY().replaceAllUsesWith(back.getResult());
    q.erase();
    return success();
  }

  LogicalResult convertDequantize(onnx::DequantizeLinearOp dq) {
    auto storage = dyn_cast<IntegerType>(getElementTypeOrSelf(dq.getX()));
    if (!storage)
      return dq.emitError("DequantizeLinear of non-integer data");
    auto qtype = buildQuantType(dq, dq.getX(), dq.getXScale(),
                                dq.getXZeroPoint(), storage, dq.getAxis());
    if (failed(qtype))
      return failure();
    OpBuilder b(dq);
    auto shape = cast<RankedTensorType>(dq.getX().getType()).getShape();
    Type quantTensor = tensorOf(shape, *qtype);
    // The integers as the quantized type: straight from a converted
    // quantize with the same parameters, else reinterpreted.
    Value input;
    if (auto back = dq.getX().getDefiningOp<qat::StorageCastOp>())
      if (back.getInput().getType() == quantTensor)
        input = back.getInput();
    if (!input)
      input = b.create<qat::StorageCastOp>(dq.getLoc(), quantTensor, dq.getX());
    auto newDq =
        b.create<qat::DequantizeOp>(dq.getLoc(), dq.getY().getType(), input);
    setTensorName(newDq, getTensorName(dq.getY()));
    dq.getY().replaceAllUsesWith(newDq.getResult());
    dq.erase();
    return success();
  }
};

} // namespace
