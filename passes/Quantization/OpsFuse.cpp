//===- OpsFuse.cpp - DQ -> op -> Q groups become int8 qat ops -------------===//
//
// The core of explicit quantization: an op whose inputs are dequantized
// int8 tensors computes in integers, and whatever follows it up to the next
// quantize (BatchNormalization, Relu/Clip, the Add of a dequantized
// residual, bias adds and constant scalings of matmuls) becomes its fp32
// epilogue. Each such group turns into one qat op whose operand and result
// types carry every scale a kernel needs (qdq-rules §5.3):
//
//   DQ(x), DQ(w), b -> Conv -> BN -> Relu -> Add(DQ(r)) -> Relu -> Q
//     => qat.conv %x, %w bias(...) scale(...) residual(%r)
//          {activation = #qat.clamp<relu>, residual_activation = ...}
//
// The chain follows single-consumer edges only; where it stops without a
// quantize the epilogue produces f32 (int8 in, fp32 out). BatchNorm folds
// into the epilogue's per-channel scale and bias, never into the int8
// weights. An op left in fp32 is tagged with the reason for the precision
// report.
//
//===----------------------------------------------------------------------===//

#include "QuantUtils.h"
#include "qatc/Quantization/Passes.h"
#include "qatc/Support/QuantMath.h"

#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace qatc::quantization {
#define GEN_PASS_DEF_QATOPSFUSE
#include "qatc/Quantization/Passes.h.inc"
} // namespace qatc::quantization

using namespace mlir;
using namespace qatc;
using namespace qatc::quantization;

namespace {

/// Marks `op` as staying fp32 because of `reason` (first reason wins).
void setReason(Operation *op, const Twine &reason) {
  if (!op->hasAttr(kFp32ReasonAttr))
    op->setAttr(kFp32ReasonAttr,
                StringAttr::get(op->getContext(), reason.str()));
}

/// A dequantized operand: the quantized value behind it.
struct Dequantized {
  qat::DequantizeOp op;
  Value quant;
};

std::optional<Dequantized> dequantizedOperand(Value v, bool perTensorOnly) {
  auto dq = getDequantize(v);
  if (!dq)
    return std::nullopt;
  if (perTensorOnly && !perTensorTypeOf(dq.getInput()))
    return std::nullopt;
  return Dequantized{dq, dq.getInput()};
}

/// A float bias vector from an operand: an f32 constant, or the dequantized
/// value of an int32 constant (computed as DequantizeLinear computes it).
std::optional<std::vector<float>> biasValues(Value v, int64_t channels) {
  if (!v)
    return std::vector<float>(channels, 0.0f);
  std::optional<std::vector<float>> values = getConstantFloats(v);
  if (!values)
    if (auto dq = getDequantize(v)) {
      auto ints = getConstantInts(dq.getInput());
      auto qtype = qat::getQuantType(dq.getInput().getType());
      if (ints && qtype) {
        SmallVector<double> scales =
            qat::getChannelScales(qtype, static_cast<int64_t>(ints->size()));
        SmallVector<int64_t> zps = qat::getChannelZeroPoints(
            qtype, static_cast<int64_t>(ints->size()));
        values = std::vector<float>(ints->size());
        for (size_t i = 0; i < ints->size(); ++i)
          (*values)[i] = dequantizeValue<float>(
              (*ints)[i], static_cast<float>(scales[i]), zps[i]);
      }
    }
  if (!values)
    return std::nullopt;
  if (values->size() == 1)
    return std::vector<float>(channels, values->front());
  if (static_cast<int64_t>(values->size()) != channels)
    return std::nullopt;
  return values;
}

/// A constant that broadcasts along the channel axis only: a scalar, or
/// (when `allowVector`) a vector of `channels` values along the last axis of
/// a result of rank `rank` (shape [C], [1,C], [1,1,C]...).
std::optional<std::vector<float>>
channelConstant(Value v, int64_t channels, int64_t rank, bool allowVector) {
  auto values = getConstantFloats(v);
  if (!values)
    return std::nullopt;
  auto shape = cast<RankedTensorType>(v.getType()).getShape();
  if (values->size() == 1 && static_cast<int64_t>(shape.size()) <= rank)
    return std::vector<float>(channels, values->front());
  if (!allowVector || static_cast<int64_t>(shape.size()) > rank ||
      shape.empty() || shape.back() != channels)
    return std::nullopt;
  for (int64_t d : shape.drop_back())
    if (d != 1)
      return std::nullopt;
  return values;
}

/// The fp32 epilogue a chain accumulates after the integer accumulation.
struct Epilogue {
  int64_t channels = 0;
  std::vector<float> bias;  // empty: none
  std::vector<float> scale; // empty: 1
  std::optional<std::pair<double, double>> activation, residualActivation;
  Value residual;
  SmallVector<Operation *> absorbed;
  Value end;       // the value the fused op replaces
  Type resultType; // quantized (from a trailing Q) or f32
};

/// The [lo, hi] clamp of a Relu or Clip.
std::pair<double, double> clampOf(Operation *op) {
  double inf = std::numeric_limits<double>::infinity();
  if (isa<onnx::ReluOp>(op))
    return {0.0, inf};
  auto clip = cast<onnx::ClipOp>(op);
  double lo = clip.getMin() ? clip.getMin()->convertToDouble() : -inf;
  double hi = clip.getMax() ? clip.getMax()->convertToDouble() : inf;
  return {lo, hi};
}

/// The shape of `v`'s tensor type.
ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

struct QatOpsFusePass
    : public qatc::quantization::impl::QatOpsFuseBase<QatOpsFusePass> {
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<onnx::ConvOp, onnx::GemmOp, onnx::MatMulOp, onnx::AddOp,
              onnx::MulOp, onnx::AveragePoolOp, onnx::GlobalAveragePoolOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      if (erased.contains(op))
        continue;
      if (isForcedFp32(op)) {
        setReason(op, "forced to fp32 by --precision-override");
        continue;
      }
      llvm::TypeSwitch<Operation *>(op)
          .Case([&](onnx::ConvOp conv) { fuseConv(conv); })
          .Case([&](onnx::GemmOp gemm) { fuseGemm(gemm); })
          .Case([&](onnx::MatMulOp mm) { fuseMatMul(mm); })
          .Case<onnx::AddOp, onnx::MulOp>(
              [&](Operation *o) { fuseElementwise(o); })
          .Case<onnx::AveragePoolOp, onnx::GlobalAveragePoolOp>(
              [&](Operation *o) { fusePool(o); });
    }
    foldClamps();
    tagRemainingOps();
    // Biases and BatchNorm parameters now live in the fused epilogues.
    eraseUnusedConstants(getOperation());
  }

  DenseSet<Operation *> erased;

  //===--------------------------------------------------------------------===//
  // Chains
  //===--------------------------------------------------------------------===//

  /// Extends `epi` from `root`'s result along single-consumer edges.
  /// `channelAxis` is the axis the per-channel vectors run along (1 for NCHW
  /// conv, the last axis for matmul); `allowMatMulTerms` admits bias adds and
  /// constant scalings (Linear exported as MatMul + Add, attention's scale).
  void extendChain(Operation *root, Epilogue &epi, bool allowBatchNorm,
                   bool allowMatMulTerms) {
    Value cur = root->getResult(0);
    int64_t rank = shapeOf(cur).size();
    bool sawBatchNorm = false;
    auto mulVector = [&](const std::vector<float> &m) {
      if (epi.scale.empty())
        epi.scale.assign(epi.channels, 1.0f);
      for (int64_t c = 0; c < epi.channels; ++c) {
        epi.scale[c] *= m[c];
        if (!epi.bias.empty())
          epi.bias[c] *= m[c];
      }
    };
    while (true) {
      Operation *next = getSingleUser(cur);
      if (!next || isForcedFp32(next) || next->getNumResults() != 1)
        break;
      bool beforeActivation = !epi.activation && !epi.residual;
      if (auto bn = dyn_cast<onnx::BatchNormalizationOp>(next)) {
        if (!allowBatchNorm || sawBatchNorm || !beforeActivation ||
            bn.getX() != cur)
          break;
        auto gamma = getConstantFloats(bn.getScale()),
             beta = getConstantFloats(bn.getB()),
             mean = getConstantFloats(bn.getInputMean()),
             var = getConstantFloats(bn.getInputVar());
        if (!gamma || !beta || !mean || !var)
          break;
        double eps = bn.getEpsilon().convertToDouble();
        // BN(y) = (y - mean) / sqrt(var + eps) * gamma + beta
        //       = m * y + (beta - m * mean),   m = gamma / sqrt(var + eps)
        std::vector<float> m(epi.channels);
        for (int64_t c = 0; c < epi.channels; ++c)
          m[c] = static_cast<float>((*gamma)[c] /
                                    std::sqrt(double((*var)[c]) + eps));
        if (epi.bias.empty())
          epi.bias.assign(epi.channels, 0.0f);
        mulVector(m);
        for (int64_t c = 0; c < epi.channels; ++c)
          epi.bias[c] = static_cast<float>(double(epi.bias[c]) + (*beta)[c] -
                                           double(m[c]) * (*mean)[c]);
        sawBatchNorm = true;
      } else if (isa<onnx::ReluOp, onnx::ClipOp>(next)) {
        if (!epi.residual && !epi.activation)
          epi.activation = clampOf(next);
        else if (epi.residual && !epi.residualActivation)
          epi.residualActivation = clampOf(next);
        else
          break;
      } else if (isa<onnx::AddOp>(next)) {
        Value other = next->getOperand(0) == cur ? next->getOperand(1)
                                                 : next->getOperand(0);
        if (next->getOperand(0) == next->getOperand(1))
          break;
        if (allowMatMulTerms && beforeActivation) {
          if (auto c = channelConstant(other, epi.channels, rank, true)) {
            if (epi.bias.empty())
              epi.bias.assign(epi.channels, 0.0f);
            for (int64_t i = 0; i < epi.channels; ++i)
              epi.bias[i] += (*c)[i];
            epi.absorbed.push_back(next);
            cur = next->getResult(0);
            continue;
          }
        }
        auto r = dequantizedOperand(other, /*perTensorOnly=*/true);
        if (!r || epi.residual || shapeOf(other) != shapeOf(cur) ||
            shapeOf(next->getResult(0)) != shapeOf(cur)) {
          if (!r && !getConstantFloats(other))
            setReason(next, "residual input is not quantized (no "
                            "DequantizeLinear), so the Add runs in fp32: it "
                            "is " +
                                describeSource(other));
          break;
        }
        epi.residual = r->quant;
        epi.absorbed.push_back(r->op);
      } else if (isa<onnx::MulOp, onnx::DivOp>(next) && allowMatMulTerms &&
                 beforeActivation &&
                 (next->getOperand(0) == cur || isa<onnx::MulOp>(next)) &&
                 next->getOperand(0) != next->getOperand(1)) {
        // A constant factor on either side of a Mul; only the divisor of a
        // Div (c / y is not a scaling of y).
        Value factor = next->getOperand(0) == cur ? next->getOperand(1)
                                                  : next->getOperand(0);
        auto c =
            channelConstant(factor, epi.channels, rank, isa<onnx::MulOp>(next));
        if (!c)
          break;
        if (isa<onnx::DivOp>(next))
          for (float &v : *c)
            v = 1.0f / v;
        mulVector(*c);
      } else if (auto q = dyn_cast<qat::QuantizeOp>(next)) {
        if (!qat::getPerTensorType(q.getType()))
          break;
        epi.absorbed.push_back(next);
        epi.end = q.getOutput();
        epi.resultType = q.getType();
        return;
      } else {
        break;
      }
      epi.absorbed.push_back(next);
      cur = next->getResult(0);
    }
    epi.end = cur;
    epi.resultType = RankedTensorType::get(
        shapeOf(cur), Float32Type::get(root->getContext()));
  }

  /// Replaces the chain's end with `fused` and erases what it absorbed.
  void commit(Operation *fused, Epilogue &epi) {
    setTensorName(fused, getTensorName(epi.end));
    epi.end.replaceAllUsesWith(fused->getResult(0));
    // Erase what is dead now; a dequantize that still feeds another
    // consumer stays. Repeat, since the chain's ops free their operands.
    SmallVector<Operation *> pending(epi.absorbed.begin(), epi.absorbed.end());
    bool progress = true;
    while (progress) {
      progress = false;
      for (Operation *&op : pending) {
        if (!op || !op->use_empty())
          continue;
        erased.insert(op);
        op->erase();
        op = nullptr;
        progress = true;
      }
    }
  }

  qat::ClampAttr toAttr(std::optional<std::pair<double, double>> clamp) {
    if (!clamp)
      return {};
    return qat::ClampAttr::get(&getContext(), clamp->first, clamp->second);
  }

  Value vectorConstant(OpBuilder &b, Location loc, const std::vector<float> &v,
                       StringRef hint) {
    if (v.empty())
      return {};
    return createFloatConstant(b, loc, {static_cast<int64_t>(v.size())}, v,
                               hint);
  }

  /// The insertion point for a fused op: right before the op that defines
  /// the chain's end, which every operand of the group dominates.
  OpBuilder builderAtEnd(Epilogue &epi) {
    return OpBuilder(epi.end.getDefiningOp());
  }

  //===--------------------------------------------------------------------===//
  // Conv
  //===--------------------------------------------------------------------===//

  void fuseConv(onnx::ConvOp conv) {
    auto x = dequantizedOperand(conv.getX(), true);
    if (!x)
      return setReason(conv, "input is not quantized (no DequantizeLinear "
                             "before the Conv): it is " +
                                 describeSource(conv.getX()));
    auto w = dequantizedOperand(conv.getW(), false);
    if (!w || !w->quant.getDefiningOp<qat::ConstantOp>())
      return setReason(conv, "weight is not a quantized constant (no "
                             "DequantizeLinear on the weight)");
    auto wtype = qat::getQuantType(w->quant.getType());
    if (auto axis = dyn_cast<quant::UniformQuantizedPerAxisType>(wtype))
      if (axis.getQuantizedDimension() != 0)
        return setReason(conv, "weight is quantized per channel along axis " +
                                   Twine(axis.getQuantizedDimension()) +
                                   ", a reduction axis");
    if (llvm::any_of(qat::getChannelZeroPoints(wtype, 1),
                     [](int64_t z) { return z != 0; }))
      return setReason(conv, "weight zero point is not 0");
    Epilogue epi;
    epi.channels = shapeOf(conv.getW())[0];
    auto bias = biasValues(conv.getB(), epi.channels);
    if (!bias)
      return setReason(conv, "bias is not a constant");
    if (conv.getB())
      epi.bias = *bias;
    epi.absorbed = {x->op, w->op, conv};
    if (conv.getB())
      if (auto dqb = getDequantize(conv.getB()))
        epi.absorbed.push_back(dqb);
    extendChain(conv, epi, /*allowBatchNorm=*/true,
                /*allowMatMulTerms=*/false);
    OpBuilder b = builderAtEnd(epi);
    Location loc = fuseLocations(epi.absorbed);
    std::string hint = getNodeName(conv);
    auto fused = b.create<qat::ConvOp>(
        loc, epi.resultType, x->quant, w->quant,
        vectorConstant(b, loc, epi.bias, hint + "_bias"),
        vectorConstant(b, loc, epi.scale, hint + "_scale"), epi.residual,
        conv.getStrides(), conv.getPads(), conv.getDilations(), conv.getGroup(),
        toAttr(epi.activation), toAttr(epi.residualActivation),
        qat::RoundingMode::HalfToEven);
    commit(fused, epi);
  }

  //===--------------------------------------------------------------------===//
  // Gemm and MatMul
  //===--------------------------------------------------------------------===//

  /// Checks a matmul rhs: a quantized constant per tensor or along the
  /// output axis `want`, or a per-tensor activation. Sets the reason.
  bool checkRhs(Operation *op, Dequantized &rhs, int64_t want) {
    auto type = qat::getQuantType(rhs.quant.getType());
    if (auto axis = dyn_cast<quant::UniformQuantizedPerAxisType>(type)) {
      if (axis.getQuantizedDimension() != want) {
        setReason(op, "weight is quantized per channel along axis " +
                          Twine(axis.getQuantizedDimension()) +
                          ", a reduction axis");
        return false;
      }
      if (shapeOf(rhs.quant).size() != 2) {
        setReason(op, "per-channel weight is not 2-D");
        return false;
      }
    }
    if (rhs.quant.getDefiningOp<qat::ConstantOp>() &&
        llvm::any_of(qat::getChannelZeroPoints(type, 1),
                     [](int64_t z) { return z != 0; })) {
      setReason(op, "weight zero point is not 0");
      return false;
    }
    return true;
  }

  void fuseGemm(onnx::GemmOp gemm) {
    if (gemm.getTransA())
      return setReason(gemm, "Gemm with transA=1 has no int8 kernel");
    auto a = dequantizedOperand(gemm.getA(), true);
    if (!a)
      return setReason(gemm, "input A is not quantized (no DequantizeLinear): "
                             "it is " +
                                 describeSource(gemm.getA()));
    auto bq = dequantizedOperand(gemm.getB(), false);
    if (!bq)
      return setReason(gemm, "input B is not quantized (no DequantizeLinear): "
                             "it is " +
                                 describeSource(gemm.getB()));
    bool transB = gemm.getTransB() != 0;
    if (!checkRhs(gemm, *bq, *weightChannelAxis(gemm, 1)))
      return;
    Epilogue epi;
    auto bShape = shapeOf(gemm.getB());
    epi.channels = transB ? bShape[0] : bShape[1];
    float alpha = gemm.getAlpha().convertToFloat();
    float beta = gemm.getBeta().convertToFloat();
    if (Value c = gemm.getC()) {
      std::optional<std::vector<float>> bias;
      if (auto dq = getDequantize(c))
        bias = biasValues(c, epi.channels);
      else
        bias = channelConstant(c, epi.channels, 2, true);
      if (!bias)
        return setReason(gemm, "bias C is not a constant broadcast along "
                               "the output columns");
      epi.bias = *bias;
      for (float &v : epi.bias)
        v *= beta;
    }
    if (alpha != 1.0f)
      epi.scale.assign(epi.channels, alpha);
    epi.absorbed = {a->op, bq->op, gemm};
    if (gemm.getC())
      if (auto dqc = getDequantize(gemm.getC()))
        epi.absorbed.push_back(dqc);
    extendChain(gemm, epi, false, true);
    buildMatMul(gemm, a->quant, bq->quant, transB, epi);
  }

  void fuseMatMul(onnx::MatMulOp mm) {
    if (shapeOf(mm.getA()).size() < 2 || shapeOf(mm.getB()).size() < 2)
      return setReason(mm, "MatMul with a 1-D operand has no int8 kernel");
    auto a = dequantizedOperand(mm.getA(), true);
    if (!a)
      return setReason(mm, "input A is not quantized (no DequantizeLinear): "
                           "it is " +
                               describeSource(mm.getA()));
    auto bq = dequantizedOperand(mm.getB(), false);
    if (!bq)
      return setReason(mm, "input B is not quantized (no DequantizeLinear): "
                           "it is " +
                               describeSource(mm.getB()));
    if (!checkRhs(mm, *bq, *weightChannelAxis(mm, 1)))
      return;
    Epilogue epi;
    epi.channels = shapeOf(mm.getB()).back();
    epi.absorbed = {a->op, bq->op, mm};
    extendChain(mm, epi, false, true);
    buildMatMul(mm, a->quant, bq->quant, false, epi);
  }

  void buildMatMul(Operation *root, Value lhs, Value rhs, bool transB,
                   Epilogue &epi) {
    OpBuilder b = builderAtEnd(epi);
    Location loc = fuseLocations(epi.absorbed);
    std::string hint = getNodeName(root);
    auto fused = b.create<qat::MatMulOp>(
        loc, epi.resultType, lhs, rhs,
        vectorConstant(b, loc, epi.bias, hint + "_bias"),
        vectorConstant(b, loc, epi.scale, hint + "_scale"), epi.residual,
        transB, toAttr(epi.activation), toAttr(epi.residualActivation),
        qat::RoundingMode::HalfToEven);
    commit(fused, epi);
  }

  //===--------------------------------------------------------------------===//
  // Elementwise and pooling
  //===--------------------------------------------------------------------===//

  /// Follows an optional Relu/Clip and an optional trailing quantize.
  void extendShortChain(Operation *root, Epilogue &epi) {
    Value cur = root->getResult(0);
    Operation *next = getSingleUser(cur);
    if (next && isa<onnx::ReluOp, onnx::ClipOp>(next) && !isForcedFp32(next)) {
      epi.activation = clampOf(next);
      epi.absorbed.push_back(next);
      cur = next->getResult(0);
      next = getSingleUser(cur);
    }
    if (auto q = dyn_cast_or_null<qat::QuantizeOp>(next)) {
      if (qat::getPerTensorType(q.getType())) {
        epi.absorbed.push_back(q);
        epi.end = q.getOutput();
        epi.resultType = q.getType();
        return;
      }
    }
    epi.end = cur;
    epi.resultType = RankedTensorType::get(
        shapeOf(cur), Float32Type::get(root->getContext()));
  }

  void fuseElementwise(Operation *op) {
    auto a = dequantizedOperand(op->getOperand(0), true);
    auto b = dequantizedOperand(op->getOperand(1), true);
    if (!a || !b) {
      bool constant = getConstantFloats(op->getOperand(a ? 1 : 0)).has_value();
      return setReason(
          op, Twine("input ") + (a ? "B" : "A") +
                  (constant ? " is a float constant"
                            : " is not quantized (no "
                              "DequantizeLinear): it is " +
                                  describeSource(op->getOperand(a ? 1 : 0))));
    }
    Epilogue epi;
    epi.absorbed = {a->op, op};
    if (b->op != a->op)
      epi.absorbed.insert(epi.absorbed.begin() + 1, b->op);
    extendShortChain(op, epi);
    OpBuilder builder = builderAtEnd(epi);
    Location loc = fuseLocations(epi.absorbed);
    Operation *fused;
    if (isa<onnx::AddOp>(op))
      fused = builder.create<qat::AddOp>(loc, epi.resultType, a->quant,
                                         b->quant, toAttr(epi.activation),
                                         qat::RoundingMode::HalfToEven);
    else
      fused = builder.create<qat::MulOp>(loc, epi.resultType, a->quant,
                                         b->quant, toAttr(epi.activation),
                                         qat::RoundingMode::HalfToEven);
    commit(fused, epi);
  }

  void fusePool(Operation *op) {
    auto x = dequantizedOperand(op->getOperand(0), true);
    if (!x)
      return setReason(op, "input is not quantized (no DequantizeLinear): it "
                           "is " +
                               describeSource(op->getOperand(0)));
    if (auto ap = dyn_cast<onnx::AveragePoolOp>(op))
      if (llvm::any_of(ap.getDilations(), [](int64_t d) { return d != 1; }))
        return setReason(op, "dilated average pooling has no int8 kernel");
    Epilogue epi;
    epi.absorbed = {x->op, op};
    // A clamp after an average has no int8 form in the pool kernel; only a
    // trailing quantize is absorbed.
    Value cur = op->getResult(0);
    auto q = dyn_cast_or_null<qat::QuantizeOp>(getSingleUser(cur));
    if (q && qat::getPerTensorType(q.getType())) {
      epi.absorbed.push_back(q);
      epi.end = q.getOutput();
      epi.resultType = q.getType();
    } else {
      epi.end = cur;
      epi.resultType =
          RankedTensorType::get(shapeOf(cur), Float32Type::get(&getContext()));
    }
    OpBuilder b = builderAtEnd(epi);
    Location loc = fuseLocations(epi.absorbed);
    Operation *fused;
    if (auto ap = dyn_cast<onnx::AveragePoolOp>(op)) {
      fused = b.create<qat::AvgPoolOp>(
          loc, epi.resultType, x->quant, ap.getKernelShape(), ap.getStrides(),
          ap.getPads(), ap.getCeilMode(), ap.getCountIncludePad(),
          qat::RoundingMode::HalfToEven);
    } else {
      fused = b.create<qat::GlobalAvgPoolOp>(loc, epi.resultType, x->quant,
                                             qat::RoundingMode::HalfToEven);
    }
    commit(fused, epi);
  }

  //===--------------------------------------------------------------------===//
  // Integer clamps after a fused op
  //===--------------------------------------------------------------------===//

  /// A qat.clamp of an int8 result becomes part of the producer's epilogue:
  /// clamping the stored integers to [lo, hi] equals clamping the real value
  /// to [(lo - z) s, (hi - z) s] before requantization (quantization is
  /// monotone and those bounds are on the grid).
  void foldClamps() {
    SmallVector<qat::ClampOp> clamps;
    getOperation().walk([&](qat::ClampOp c) { clamps.push_back(c); });
    for (qat::ClampOp clamp : clamps) {
      Value in = clamp.getInput();
      Operation *producer = in.getDefiningOp();
      if (!producer || !in.hasOneUse() ||
          !isa<qat::ConvOp, qat::MatMulOp, qat::AddOp, qat::MulOp>(producer))
        continue;
      auto type = qat::getPerTensorType(in.getType());
      double inf = std::numeric_limits<double>::infinity();
      auto real = [&](int64_t q, int64_t edge, double unbounded) {
        return q == edge ? unbounded
                         : static_cast<double>(
                               static_cast<float>(q - type.getZeroPoint()) *
                               static_cast<float>(type.getScale()));
      };
      double lo = real(static_cast<int64_t>(clamp.getMin()),
                       type.getStorageTypeMin(), -inf);
      double hi = real(static_cast<int64_t>(clamp.getMax()),
                       type.getStorageTypeMax(), inf);
      bool hasResidual = false;
      if (auto conv = dyn_cast<qat::ConvOp>(producer))
        hasResidual = bool(conv.getResidual());
      if (auto mm = dyn_cast<qat::MatMulOp>(producer))
        hasResidual = bool(mm.getResidual());
      StringRef attrName = hasResidual ? "residual_activation" : "activation";
      if (auto old = producer->getAttrOfType<qat::ClampAttr>(attrName)) {
        lo = std::max(lo, old.getMin());
        hi = std::min(hi, old.getMax());
        if (lo > hi)
          continue;
      }
      producer->setAttr(attrName, qat::ClampAttr::get(&getContext(), lo, hi));
      producer->setLoc(fuseLocations({producer, clamp}));
      setTensorName(producer, getTensorName(clamp.getOutput()));
      clamp.getOutput().replaceAllUsesWith(in);
      clamp.erase();
    }
  }

  //===--------------------------------------------------------------------===//
  // Reasons for what stays fp32
  //===--------------------------------------------------------------------===//

  void tagRemainingOps() {
    getOperation().walk([&](Operation *op) {
      if (!isa<onnx::OnnxDialect>(op->getDialect()) ||
          isa<onnx::ConstantOp>(op) || op->hasAttr(kFp32ReasonAttr))
        return;
      if (isForcedFp32(op))
        return setReason(op, "forced to fp32 by --precision-override");
      bool dequantizedInput = llvm::any_of(op->getOperands(), [](Value v) {
        return getDequantize(v) != nullptr;
      });
      if (dequantizedInput)
        setReason(op, "no int8 kernel for " + op->getName().stripDialect() +
                          "; it computes in fp32 on dequantized inputs");
      else if (op->getNumOperands() && !isa<onnx::ConstantOp>(op))
        setReason(op, "not quantized in the model (no Q/DQ around it): its "
                      "input is " +
                          describeSource(op->getOperand(0)));
      else
        setReason(op, "not quantized in the model (no Q/DQ around it)");
    });
  }
};

} // namespace
