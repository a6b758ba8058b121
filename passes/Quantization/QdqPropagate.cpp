//===- QdqPropagate.cpp - move Q/DQ across value-selecting ops ------------===//
//
// TensorRT grows the int8 region of a Q/DQ graph by moving dequantizes
// forward and quantizes backward across ops that commute with them: ops whose
// outputs are a selection of their input values (data movement, max pooling)
// and clamps (Relu, Clip). For those, Q(op(x)) == op(Q(x)) and
// op(DQ(q)) == DQ(op(q)) exactly, so the move never changes a result. Ops that
// compute new values are never crossed (qdq-rules §4, §6).
//
// Moving a dequantize forward turns `op(DQ(q))` into `DQ(op_q(q))` with an
// int8 twin `op_q` in the qat dialect; moving a quantize backward turns
// `Q(op(x))` into `op_q(Q(x))`. Then DQ -> Q pairs collapse: an identity
// when the parameters match, a qat.requantize when they differ. A Q -> DQ
// pair is never removed: it rounds and clamps.
//
//===----------------------------------------------------------------------===//

#include "QuantUtils.h"
#include "qatc/Quantization/Passes.h"
#include "qatc/Support/QuantMath.h"

#include "mlir/IR/Iterators.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>

namespace qatc::quantization {
#define GEN_PASS_DEF_QATQDQPROPAGATE
#include "qatc/Quantization/Passes.h.inc"
} // namespace qatc::quantization

using namespace mlir;
using namespace qatc;
using namespace qatc::quantization;

namespace {

/// Ops that only move or select values (first operand is the data).
bool isValueSelecting(Operation *op) {
  // A nearest Resize copies input values (qdq-rules §9 cases 35-36); linear
  // and cubic ones compute new values.
  if (auto r = dyn_cast<onnx::ResizeOp>(op))
    return r.getMode() == "nearest";
  // Pad selects values, or writes its constant (see padValueExact).
  if (isa<onnx::PadOp>(op))
    return true;
  return isa<onnx::MaxPoolOp, onnx::GlobalMaxPoolOp, onnx::ReshapeOp,
             onnx::FlattenOp, onnx::SqueezeOp, onnx::UnsqueezeOp,
             onnx::TransposeOp, onnx::SliceOp, onnx::GatherOp, onnx::IdentityOp,
             onnx::ConcatOp>(op);
}

/// Whether a constant Pad's value survives quantization with `type`
/// (DQ(Q(v)) == v): then pad(DQ(q), v) == DQ(pad(q, Q(v))). Q(pad(x, v))
/// == pad(Q(x), Q(v)) always holds.
bool padValueExact(onnx::PadOp pad, quant::UniformQuantizedType type) {
  if (pad.getMode() != "constant")
    return true;
  float v = static_cast<float>(pad.getValue().convertToDouble());
  float s = static_cast<float>(type.getScale());
  int64_t q =
      quantizeValue<float>(v, s, type.getZeroPoint(), type.getStorageTypeMin(),
                           type.getStorageTypeMax());
  return static_cast<float>(q - type.getZeroPoint()) * s == v;
}

/// The integer clamp equal to a Relu/Clip on values dequantized with
/// `type`, or nullopt when a bound is not on the quantization grid (the
/// clamp would produce a value int8 cannot hold).
std::optional<std::pair<int64_t, int64_t>>
integerClamp(Operation *op, quant::UniformQuantizedType type) {
  int64_t qmin = type.getStorageTypeMin(), qmax = type.getStorageTypeMax();
  int64_t z = type.getZeroPoint();
  float s = static_cast<float>(type.getScale());
  if (isa<onnx::ReluOp>(op))
    return std::make_pair(std::max(z, qmin), qmax);
  auto clip = cast<onnx::ClipOp>(op);
  // A bound below (above) every representable value is redundant; one
  // inside the range must be exactly representable.
  auto bound = [&](std::optional<APFloat> b,
                   bool lower) -> std::optional<int64_t> {
    int64_t edge = lower ? qmin : qmax;
    if (!b)
      return edge;
    float v = b->convertToFloat();
    float edgeValue = static_cast<float>(edge - z) * s;
    if (lower ? v <= edgeValue : v >= edgeValue)
      return edge;
    if (lower ? v > static_cast<float>(qmax - z) * s
              : v < static_cast<float>(qmin - z) * s)
      return std::nullopt;
    double steps = std::round(static_cast<double>(v) / s);
    int64_t q = static_cast<int64_t>(steps) + z;
    if (static_cast<float>(q - z) * s != v)
      return std::nullopt;
    return q;
  };
  auto lo = bound(clip.getMin(), true), hi = bound(clip.getMax(), false);
  if (!lo || !hi || *lo > *hi)
    return std::nullopt;
  return std::make_pair(*lo, *hi);
}

/// Builds the int8 twin of value-selecting `op` over `inputs` (quantized,
/// replacing its data operands) with result element type `elt`.
Operation *buildIntegerTwin(OpBuilder &b, Operation *op, ValueRange inputs,
                            Type elt) {
  auto shape = cast<RankedTensorType>(op->getResult(0).getType()).getShape();
  Type type = tensorOf(shape, elt);
  Location loc = op->getLoc();
  if (auto mp = dyn_cast<onnx::MaxPoolOp>(op))
    return b.create<qat::MaxPoolOp>(loc, type, inputs[0], mp.getKernelShape(),
                                    mp.getStrides(), mp.getPads(),
                                    mp.getDilations(), mp.getCeilMode());
  if (isa<onnx::GlobalMaxPoolOp>(op)) {
    auto in = cast<RankedTensorType>(inputs[0].getType()).getShape();
    size_t spatial = in.size() - 2;
    SmallVector<int64_t> kernel(in.drop_front(2)), ones(spatial, 1),
        pads(2 * spatial, 0);
    return b.create<qat::MaxPoolOp>(loc, type, inputs[0], kernel, ones, pads,
                                    ones, 0);
  }
  if (isa<onnx::ReshapeOp, onnx::FlattenOp, onnx::SqueezeOp, onnx::UnsqueezeOp,
          onnx::IdentityOp>(op))
    return b.create<qat::ReshapeOp>(loc, type, inputs[0]);
  if (auto t = dyn_cast<onnx::TransposeOp>(op))
    return b.create<qat::TransposeOp>(loc, type, inputs[0], t.getPerm());
  if (auto s = dyn_cast<onnx::SliceOp>(op))
    return b.create<qat::SliceOp>(loc, type, inputs[0], s.getStarts(),
                                  s.getEnds(), s.getSteps());
  if (auto g = dyn_cast<onnx::GatherOp>(op))
    return b.create<qat::GatherOp>(loc, type, inputs[0], g.getIndices(),
                                   g.getAxis());
  if (auto c = dyn_cast<onnx::ConcatOp>(op))
    return b.create<qat::ConcatOp>(loc, type, inputs, c.getAxis());
  if (auto r = dyn_cast<onnx::ResizeOp>(op))
    return b.create<qat::ResizeOp>(loc, type, inputs[0], r.getScalesAttr(),
                                   r.getCoordinateTransformationModeAttr(),
                                   r.getNearestModeAttr());
  if (auto p = dyn_cast<onnx::PadOp>(op))
    return b.create<qat::PadOp>(loc, type, inputs[0], p.getPadsAttr(),
                                p.getModeAttr(), p.getValueAttr());
  return nullptr;
}

struct QatQdqPropagatePass
    : public qatc::quantization::impl::QatQdqPropagateBase<
          QatQdqPropagatePass> {
  void runOnOperation() override {
    bool changed = true;
    for (int round = 0; changed && round < 1000; ++round) {
      changed = false;
      changed |= duplicateSharedDequantizes();
      changed |= mergeIdenticalQuantizes();
      changed |= moveDequantizesForward();
      changed |= moveQuantizesBackward();
      changed |= simplifyDequantizeQuantize();
    }
    eraseDeadOps();
  }

  /// Gives every consumer of a shared dequantize its own copy, so each
  /// consumer's Q/DQ can move or fuse independently (ORT's
  /// EnsureUniqueDQForNodeUnit).
  bool duplicateSharedDequantizes() {
    bool changed = false;
    SmallVector<qat::DequantizeOp> shared;
    getOperation().walk([&](qat::DequantizeOp dq) {
      if (!dq->hasOneUse() && !dq->use_empty())
        shared.push_back(dq);
    });
    for (qat::DequantizeOp dq : shared) {
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : dq->getUses())
        uses.push_back(&use);
      for (OpOperand *use : llvm::drop_begin(uses)) {
        OpBuilder b(dq);
        b.setInsertionPointAfter(dq);
        Operation *copy = b.clone(*dq);
        copy->removeAttr(kOutputNamesAttr);
        use->set(copy->getResult(0));
        changed = true;
      }
    }
    return changed;
  }

  /// Merges quantizes of one value to one type (they compute the same
  /// integers); the survivor's location names every merged node.
  bool mergeIdenticalQuantizes() {
    bool changed = false;
    SmallVector<qat::QuantizeOp> all;
    getOperation().walk([&](qat::QuantizeOp q) { all.push_back(q); });
    DenseSet<Operation *> erased;
    for (qat::QuantizeOp q : all) {
      if (erased.contains(q))
        continue;
      for (Operation *user :
           llvm::make_early_inc_range(q.getInput().getUsers())) {
        auto other = dyn_cast<qat::QuantizeOp>(user);
        if (!other || other == q || erased.contains(other) ||
            other.getType() != q.getType() ||
            other.getRounding() != q.getRounding())
          continue;
        // Keep the one that comes first so it dominates all uses.
        qat::QuantizeOp keep = q, drop = other;
        if (other->isBeforeInBlock(q))
          std::swap(keep, drop);
        keep->setLoc(fuseLocations({keep, drop}));
        drop.getOutput().replaceAllUsesWith(keep.getOutput());
        erased.insert(drop);
        drop.erase();
        changed = true;
        if (drop == q)
          break;
      }
    }
    return changed;
  }

  /// op(DQ(q)) -> DQ(op_q(q)) for value-selecting ops and clamps.
  bool moveDequantizesForward() {
    bool changed = false;
    SmallVector<Operation *> candidates;
    getOperation().walk([&](Operation *op) {
      if ((isValueSelecting(op) || isa<onnx::ReluOp, onnx::ClipOp>(op)) &&
          !isForcedFp32(op))
        candidates.push_back(op);
    });
    for (Operation *op : candidates)
      changed |= moveDequantizeForward(op);
    return changed;
  }

  bool moveDequantizeForward(Operation *op) {
    // Every data operand must be a dequantize of one per-tensor type.
    SmallVector<qat::DequantizeOp> dqs;
    unsigned dataOperands = isa<onnx::ConcatOp>(op) ? op->getNumOperands() : 1;
    for (unsigned i = 0; i < dataOperands; ++i) {
      auto dq = getDequantize(op->getOperand(i));
      if (!dq || !dq->hasOneUse() || !perTensorTypeOf(dq.getInput()))
        return false;
      if (!dqs.empty() && dq.getInput().getType().getElementType() !=
                              dqs.front().getInput().getType().getElementType())
        return false; // Concat inputs must share one quantization
      dqs.push_back(dq);
    }
    auto qtype = perTensorTypeOf(dqs.front().getInput());
    if (auto pad = dyn_cast<onnx::PadOp>(op); pad && !padValueExact(pad, qtype))
      return false;
    OpBuilder b(op);
    Value moved;
    if (isa<onnx::ReluOp, onnx::ClipOp>(op)) {
      auto bounds = integerClamp(op, qtype);
      if (!bounds)
        return false;
      moved = clampOrNothing(b, op, dqs.front().getInput(), *bounds);
    } else {
      SmallVector<Value> inputs;
      for (qat::DequantizeOp dq : dqs)
        inputs.push_back(dq.getInput());
      Operation *twin = buildIntegerTwin(b, op, inputs, qtype);
      if (!twin)
        return false;
      moved = twin->getResult(0);
    }
    SmallVector<Operation *> dqOps(dqs.begin(), dqs.end());
    auto newDq = b.create<qat::DequantizeOp>(fuseLocations(dqOps),
                                             op->getResult(0).getType(), moved);
    setTensorName(newDq, getTensorName(op->getResult(0)));
    op->getResult(0).replaceAllUsesWith(newDq.getOutput());
    op->erase();
    for (qat::DequantizeOp dq : dqs)
      dq.erase();
    return true;
  }

  /// A qat.clamp of `q` to `bounds`, or `q` itself when the bounds are the
  /// whole storage range (a Relu after a uint8 zero point of 0, a Clip wider
  /// than the quantized range): then `op` is redundant and recorded so.
  Value clampOrNothing(OpBuilder &b, Operation *op, Value q,
                       std::pair<int64_t, int64_t> bounds) {
    auto qtype = perTensorTypeOf(q);
    if (bounds.first <= qtype.getStorageTypeMin() &&
        bounds.second >= qtype.getStorageTypeMax()) {
      recordRemoved(op, (op->getName().stripDialect() +
                         " is redundant: the quantized range already "
                         "enforces it")
                            .str());
      return q;
    }
    auto shape = cast<RankedTensorType>(op->getResult(0).getType());
    return b.create<qat::ClampOp>(op->getLoc(),
                                  tensorOf(shape.getShape(), qtype), q,
                                  bounds.first, bounds.second);
  }

  /// Q(op(x)) -> op_q(Q(x)) for value-selecting ops and clamps whose only
  /// consumer is the quantize (another consumer would need the float
  /// result). Quantization is monotone, so Q(clamp(x, a, b)) is
  /// clamp(Q(x), Q(a), Q(b)) whatever a and b are.
  bool moveQuantizesBackward() {
    bool changed = false;
    SmallVector<qat::QuantizeOp> all;
    getOperation().walk([&](qat::QuantizeOp q) { all.push_back(q); });
    for (qat::QuantizeOp q : all)
      changed |= moveQuantizeBackward(q);
    return changed;
  }

  bool moveQuantizeBackward(qat::QuantizeOp q) {
    Operation *op = q.getInput().getDefiningOp();
    auto qtype = qat::getPerTensorType(q.getType());
    if (!op || !qtype || isForcedFp32(op) || !q.getInput().hasOneUse())
      return false;
    if (isa<onnx::ReluOp, onnx::ClipOp>(op))
      return moveQuantizeBackwardAcrossClamp(q, op, qtype);
    if (!isValueSelecting(op))
      return false;
    if (isa<onnx::MaxPoolOp, onnx::GlobalMaxPoolOp>(op) &&
        qtype.getScale() <= 0)
      return false;
    // A Slice or Gather that keeps part of an input others read too: the Q
    // would stop above it and quantize elements nobody reads (ShuffleNetV2's
    // channel split: the whole shuffled tensor quantized for its second
    // half, then the half copied out for the convolution). Exact either way;
    // where the input has no other reader the Q may go on into its producer.
    if (isa<onnx::SliceOp, onnx::GatherOp>(op) &&
        !op->getOperand(0).hasOneUse()) {
      auto in = cast<RankedTensorType>(op->getOperand(0).getType());
      auto out = cast<RankedTensorType>(op->getResult(0).getType());
      if (in.hasStaticShape() && out.hasStaticShape() &&
          out.getNumElements() < in.getNumElements())
        return false;
    }
    OpBuilder b(op);
    SmallVector<Value> inputs;
    unsigned dataOperands = isa<onnx::ConcatOp>(op) ? op->getNumOperands() : 1;
    for (unsigned i = 0; i < dataOperands; ++i) {
      Value x = op->getOperand(i);
      auto shape = cast<RankedTensorType>(x.getType()).getShape();
      auto newQ = b.create<qat::QuantizeOp>(q.getLoc(), tensorOf(shape, qtype),
                                            x, q.getRoundingAttr());
      inputs.push_back(newQ.getOutput());
    }
    Operation *twin = buildIntegerTwin(b, op, inputs, qtype);
    if (!twin)
      return false;
    setTensorName(twin, getTensorName(q.getOutput()));
    q.getOutput().replaceAllUsesWith(twin->getResult(0));
    q.erase();
    op->erase();
    return true;
  }

  bool moveQuantizeBackwardAcrossClamp(qat::QuantizeOp q, Operation *op,
                                       quant::UniformQuantizedType qtype) {
    // A clamp right after a weighted op stays float so that it becomes the
    // fused op's activation; elsewhere it moves onto the integers.
    Operation *producer = op->getOperand(0).getDefiningOp();
    if (producer &&
        isa<onnx::ConvOp, onnx::GemmOp, onnx::MatMulOp,
            onnx::BatchNormalizationOp, onnx::AddOp, onnx::MulOp>(producer))
      return false;
    int64_t qmin = qtype.getStorageTypeMin(), qmax = qtype.getStorageTypeMax();
    auto quantizeBound = [&](std::optional<APFloat> bound, int64_t edge) {
      if (!bound)
        return edge;
      return quantizeValue<float>(bound->convertToFloat(),
                                  static_cast<float>(qtype.getScale()),
                                  qtype.getZeroPoint(), qmin, qmax);
    };
    std::pair<int64_t, int64_t> bounds;
    if (isa<onnx::ReluOp>(op)) {
      bounds = {quantizeBound(APFloat(0.0f), qmin), qmax};
    } else {
      auto clip = cast<onnx::ClipOp>(op);
      bounds = {quantizeBound(clip.getMin(), qmin),
                quantizeBound(clip.getMax(), qmax)};
    }
    if (bounds.first > bounds.second)
      return false;
    OpBuilder b(op);
    Value x = op->getOperand(0);
    auto newQ = b.create<qat::QuantizeOp>(
        q.getLoc(),
        tensorOf(cast<RankedTensorType>(x.getType()).getShape(), qtype), x,
        q.getRoundingAttr());
    Value result = clampOrNothing(b, op, newQ.getOutput(), bounds);
    if (Operation *clamp = result.getDefiningOp<qat::ClampOp>())
      setTensorName(clamp, getTensorName(q.getOutput()));
    q.getOutput().replaceAllUsesWith(result);
    q.erase();
    op->erase();
    return true;
  }

  /// Q(DQ(q)): identity when the parameters match, requantize otherwise.
  bool simplifyDequantizeQuantize() {
    bool changed = false;
    SmallVector<qat::QuantizeOp> all;
    getOperation().walk([&](qat::QuantizeOp q) { all.push_back(q); });
    for (qat::QuantizeOp q : all) {
      auto dq = getDequantize(q.getInput());
      if (!dq)
        continue;
      Value in = dq.getInput();
      if (in.getType() == q.getType()) {
        recordRemoved(q, "DequantizeLinear -> QuantizeLinear with identical "
                         "parameters is an identity");
        if (dq->hasOneUse())
          recordRemoved(dq, "DequantizeLinear -> QuantizeLinear with "
                            "identical parameters is an identity");
        q.getOutput().replaceAllUsesWith(in);
        q.erase();
      } else if (perTensorTypeOf(in) && qat::getPerTensorType(q.getType())) {
        OpBuilder b(q);
        auto rq = b.create<qat::RequantizeOp>(
            fuseLocations({dq, q}), q.getType(), in, q.getRoundingAttr());
        setTensorName(rq, getTensorName(q.getOutput()));
        q.getOutput().replaceAllUsesWith(rq.getOutput());
        q.erase();
      } else {
        continue;
      }
      if (dq->use_empty())
        dq.erase();
      changed = true;
    }
    return changed;
  }

  void eraseDeadOps() {
    SmallVector<Operation *> dead;
    getOperation().walk<WalkOrder::PostOrder, mlir::ReverseIterator>(
        [&](Operation *op) {
          if (op->use_empty() && op->getNumResults() &&
              isa<qat::QatDialect>(op->getDialect()))
            dead.push_back(op);
        });
    for (Operation *op : dead)
      op->erase();
  }
};

} // namespace
