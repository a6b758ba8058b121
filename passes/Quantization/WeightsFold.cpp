//===- WeightsFold.cpp - quantized weights become qat.constant ------------===//
//
// A QAT export stores float weights followed by QuantizeLinear (TensorRT
// quantizes them at build time with the Q's scale); a PTQ export stores int8
// initializers. Both become one `qat.constant` of stored integers with the
// weight's per-axis type, so the int8 ops read their weights directly. The
// quantization is QuantizeLinear's own arithmetic (divide in f32, round half
// to even, saturate), so the folded integers are the ones the Q/DQ graph
// computes.
//
//===----------------------------------------------------------------------===//

#include "QuantUtils.h"
#include "qatc/Quantization/Passes.h"
#include "qatc/Support/QuantMath.h"

namespace qatc::quantization {
#define GEN_PASS_DEF_QATWEIGHTSFOLD
#include "qatc/Quantization/Passes.h.inc"
} // namespace qatc::quantization

using namespace mlir;
using namespace qatc;
using namespace qatc::quantization;

namespace {

/// qat.quantize(onnx.Constant f32) -> qat.constant.
bool foldQuantize(qat::QuantizeOp q) {
  auto floats = getConstantFloats(q.getInput());
  if (!floats)
    return false;
  auto type = cast<RankedTensorType>(q.getOutput().getType());
  qat::QuantLayout layout(type);
  std::vector<int64_t> values(floats->size());
  for (size_t i = 0; i < values.size(); ++i) {
    int64_t c = layout.channel(i);
    values[i] =
        quantizeValue<float>((*floats)[i], static_cast<float>(layout.scales[c]),
                             layout.zeroPoints[c], layout.qmin, layout.qmax);
  }
  OpBuilder b(q);
  auto cst = createQuantConstant(b, q.getLoc(), type, values,
                                 getTensorName(q.getOutput()));
  setTensorName(cst, getTensorName(q.getOutput()));
  q.getOutput().replaceAllUsesWith(cst.getOutput());
  q.erase();
  return true;
}

/// qat.storage_cast(onnx.Constant iN) -> qat.constant over the same data.
bool foldStorageCast(qat::StorageCastOp cast) {
  auto cst = cast.getInput().getDefiningOp<onnx::ConstantOp>();
  if (!cst || !qat::getQuantType(cast.getOutput().getType()))
    return false;
  auto value = dyn_cast<ElementsAttr>(cst.getValue());
  if (!value)
    return false;
  OpBuilder b(cast);
  auto folded = b.create<qat::ConstantOp>(fuseLocations({cast, cst}),
                                          cast.getOutput().getType(), value);
  setTensorName(folded, getTensorName(cast.getInput()));
  cast.getOutput().replaceAllUsesWith(folded.getOutput());
  cast.erase();
  return true;
}

/// onnx.Transpose(qat.dequantize(qat.constant)) -> dequantize of the
/// transposed constant (a Linear exported as Transpose + MatMul). The
/// per-axis dimension moves with the permutation.
bool foldTranspose(onnx::TransposeOp transpose) {
  auto dq = getDequantize(transpose.getData());
  if (!dq)
    return false;
  auto cst = dq.getInput().getDefiningOp<qat::ConstantOp>();
  if (!cst)
    return false;
  auto ints = getConstantInts(cst.getOutput());
  if (!ints)
    return false;
  auto inType = cast<RankedTensorType>(cst.getOutput().getType());
  ArrayRef<int64_t> perm = transpose.getPerm();
  ArrayRef<int64_t> inShape = inType.getShape();
  SmallVector<int64_t> outShape;
  for (int64_t p : perm)
    outShape.push_back(inShape[p]);
  // The element type: per-axis dimension d becomes the position of d in perm.
  quant::QuantizedType qtype = qat::getQuantType(inType);
  if (auto axis = dyn_cast<quant::UniformQuantizedPerAxisType>(qtype)) {
    int64_t pos = llvm::find(perm, axis.getQuantizedDimension()) - perm.begin();
    qtype = quant::UniformQuantizedPerAxisType::get(
        axis.getFlags(), axis.getStorageType(), axis.getExpressedType(),
        axis.getScales(), axis.getZeroPoints(), static_cast<int32_t>(pos),
        axis.getStorageTypeMin(), axis.getStorageTypeMax());
  }
  SmallVector<int64_t> inStrides(inShape.size(), 1);
  for (int64_t d = static_cast<int64_t>(inShape.size()) - 2; d >= 0; --d)
    inStrides[d] = inStrides[d + 1] * inShape[d + 1];
  std::vector<int64_t> out(ints->size());
  SmallVector<int64_t> index(outShape.size(), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < outShape.size(); ++d)
      src += index[d] * inStrides[perm[d]];
    out[i] = (*ints)[src];
    for (int64_t d = static_cast<int64_t>(outShape.size()) - 1; d >= 0; --d) {
      if (++index[d] < outShape[d])
        break;
      index[d] = 0;
    }
  }
  OpBuilder b(transpose);
  Location loc = fuseLocations({cst, transpose});
  auto folded = createQuantConstant(b, loc, tensorOf(outShape, qtype), out,
                                    getTensorName(transpose.getTransposed()));
  auto newDq = b.create<qat::DequantizeOp>(fuseLocations({dq, transpose}),
                                           transpose.getTransposed().getType(),
                                           folded.getOutput());
  setTensorName(newDq, getTensorName(transpose.getTransposed()));
  transpose.getTransposed().replaceAllUsesWith(newDq.getOutput());
  transpose.erase();
  if (dq->use_empty())
    dq.erase();
  if (cst->use_empty())
    cst.erase();
  return true;
}

struct QatWeightsFoldPass
    : public qatc::quantization::impl::QatWeightsFoldBase<QatWeightsFoldPass> {
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    SmallVector<onnx::TransposeOp> transposes;
    getOperation().walk([&](Operation *op) {
      if (isa<qat::QuantizeOp, qat::StorageCastOp>(op))
        ops.push_back(op);
      else if (auto t = dyn_cast<onnx::TransposeOp>(op))
        transposes.push_back(t);
    });
    for (Operation *op : ops) {
      if (auto q = dyn_cast<qat::QuantizeOp>(op))
        foldQuantize(q);
      else
        foldStorageCast(cast<qat::StorageCastOp>(op));
    }
    // Transposes after the constants exist (a QAT weight is Q -> DQ ->
    // Transpose).
    for (onnx::TransposeOp t : transposes)
      foldTranspose(t);
    // The float weights and integer initializers folded above.
    eraseUnusedConstants(getOperation());
  }
};

} // namespace
