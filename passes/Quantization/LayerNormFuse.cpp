//===- LayerNormFuse.cpp - decomposed layer norms as LayerNormalization ---===//
//
// Exporters before ONNX opset 17 (torch.onnx for nn.LayerNorm, Keras, hand
// written encoders) spell a layer norm over the trailing axes as
//
//   m = ReduceMean(x)          d = Sub(x, m)        p = Pow(d, 2) | Mul(d, d)
//   v = ReduceMean(p)          s = Sqrt(Add(v, eps))
//   y = Div(d, s) [-> Mul(y, gamma)] [-> Add(y, beta)]
//
// nine nodes, each a full pass over the tensor (a transformer encoder of
// d = 128 spends 20 of its 55 layers on them). This pass replaces the group
// by one LayerNormalization over the same axes with the constant gamma
// (ones when absent) and beta, which the code generator runs as one row
// kernel. Only the group's own nodes may read its intermediate values; any
// other reader, a non-constant gamma or beta, an exponent other than 2 or a
// reduction over other axes than the trailing ones leaves it as it is.
//
// The result differs from the decomposed graph's by fp32 reassociation
// only: both compute (x - mean) / sqrt(var + eps) from the same data,
// LayerNormalization in the reference with double sums.
//
//===----------------------------------------------------------------------===//

#include "QuantUtils.h"
#include "qatc/Quantization/Passes.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallSet.h"

namespace qatc::quantization {
#define GEN_PASS_DEF_QATLAYERNORMFUSE
#include "qatc/Quantization/Passes.h.inc"
} // namespace qatc::quantization

using namespace mlir;
using namespace qatc;
using namespace qatc::quantization;

namespace {

/// `v`'s only user, if it has exactly one use.
Operation *soleUser(Value v) {
  return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
}

/// The other operand of binary `op` when one of its two is `v`.
Value otherOperand(Operation *op, Value v) {
  if (op->getNumOperands() != 2)
    return nullptr;
  if (op->getOperand(0) == v)
    return op->getOperand(1);
  if (op->getOperand(1) == v)
    return op->getOperand(0);
  return nullptr;
}

/// The value of a one-element f32 constant.
std::optional<float> scalarConstant(Value v) {
  auto f = getConstantFloats(v);
  if (!f || f->size() != 1)
    return std::nullopt;
  return (*f)[0];
}

struct QatLayerNormFusePass
    : public qatc::quantization::impl::QatLayerNormFuseBase<
          QatLayerNormFusePass> {
  void runOnOperation() override {
    SmallVector<onnx::ReduceMeanOp> means;
    getOperation().walk([&](onnx::ReduceMeanOp m) { means.push_back(m); });
    // A matched group's second ReduceMean is erased with it: skip those.
    llvm::DenseSet<Operation *> erased;
    for (onnx::ReduceMeanOp m : means)
      if (!erased.contains(m))
        fuse(m, erased);
    eraseUnusedConstants(getOperation());
  }

  /// The first normalized axis when `m` averages exactly the trailing axes
  /// of an f32 tensor and keeps their dimensions; nullopt otherwise.
  static std::optional<int64_t> trailingAxis(onnx::ReduceMeanOp m) {
    auto t = dyn_cast<RankedTensorType>(m.getData().getType());
    if (!t || !t.getElementType().isF32() || !t.hasStaticShape() ||
        m.getKeepdims() != 1 || m.getAxes().empty())
      return std::nullopt;
    int64_t rank = t.getRank();
    llvm::SmallSet<int64_t, 4> axes;
    for (int64_t a : m.getAxes())
      axes.insert(a < 0 ? a + rank : a);
    int64_t first = rank - static_cast<int64_t>(axes.size());
    for (int64_t a = first; a < rank; ++a)
      if (!axes.contains(a))
        return std::nullopt;
    return first;
  }

  /// A gamma or beta constant that broadcasts over the normalized axes
  /// only: one element, or the normalized shape (leading 1s allowed).
  static bool perNormalized(Value c, ArrayRef<int64_t> normalized) {
    auto f = getConstantFloats(c);
    auto t = dyn_cast<RankedTensorType>(c.getType());
    if (!f || !t || !t.getElementType().isF32())
      return false;
    if (f->size() == 1)
      return t.getRank() <= static_cast<int64_t>(normalized.size());
    ArrayRef<int64_t> shape = t.getShape();
    while (!shape.empty() && shape.size() > normalized.size() &&
           shape.front() == 1)
      shape = shape.drop_front();
    return shape == normalized;
  }

  void fuse(onnx::ReduceMeanOp mean, llvm::DenseSet<Operation *> &erased) {
    std::optional<int64_t> axis = trailingAxis(mean);
    if (!axis)
      return;
    Value x = mean.getData();
    auto xType = cast<RankedTensorType>(x.getType());
    ArrayRef<int64_t> normalized = xType.getShape().drop_front(*axis);
    // d = x - mean.
    auto sub = dyn_cast_or_null<onnx::SubOp>(soleUser(mean.getResult()));
    if (!sub || sub.getA() != x || sub.getB() != mean.getResult() ||
        sub.getResult().getType() != xType)
      return;
    Value d = sub.getResult();
    // Its readers: the square (Pow(d, 2) or Mul(d, d)) and the Div.
    Operation *square = nullptr;
    onnx::DivOp div;
    for (Operation *user : d.getUsers()) {
      if (auto dv = dyn_cast<onnx::DivOp>(user); dv && dv.getA() == d && !div) {
        div = dv;
        continue;
      }
      auto pow = dyn_cast<onnx::PowOp>(user);
      auto mul = dyn_cast<onnx::MulOp>(user);
      bool isSquare =
          (pow && pow.getX() == d &&
           scalarConstant(pow.getY()) == std::optional<float>(2.f)) ||
          (mul && mul.getA() == d && mul.getB() == d);
      if (!isSquare || (square && square != user))
        return;
      square = user;
    }
    if (!square || !div)
      return;
    // v = ReduceMean(d^2) over the same axes, s = sqrt(v + eps), d / s.
    auto var =
        dyn_cast_or_null<onnx::ReduceMeanOp>(soleUser(square->getResult(0)));
    if (!var || trailingAxis(var) != axis)
      return;
    Operation *addEps = soleUser(var.getResult());
    if (!isa_and_nonnull<onnx::AddOp>(addEps))
      return;
    std::optional<float> eps =
        scalarConstant(otherOperand(addEps, var.getResult()));
    auto sqrt = dyn_cast_or_null<onnx::SqrtOp>(soleUser(addEps->getResult(0)));
    if (!eps || *eps < 0 || !sqrt || soleUser(sqrt.getResult()) != div ||
        div.getB() != sqrt.getResult() || div.getResult().getType() != xType)
      return;
    SmallVector<Operation *> group = {mean,   sub,  square, var,
                                      addEps, sqrt, div};
    // Optional gamma, then beta, each the only reader of what precedes it.
    Value y = div.getResult(), gamma, beta;
    auto affine = [&](auto opTag, Value &param) {
      using OpT = decltype(opTag);
      auto op = dyn_cast_or_null<OpT>(soleUser(y));
      if (!op || op.getResult().getType() != xType || isForcedFp32(op))
        return;
      Value c = otherOperand(op, y);
      if (!c || !perNormalized(c, normalized))
        return;
      param = c;
      group.push_back(op);
      y = op.getResult();
    };
    affine(onnx::MulOp(), gamma);
    affine(onnx::AddOp(), beta);
    if (llvm::any_of(group, [](Operation *op) { return isForcedFp32(op); }))
      return;

    OpBuilder b(group.back());
    Location loc = fuseLocations(group);
    auto paramType = RankedTensorType::get(normalized, b.getF32Type());
    if (!gamma)
      gamma = b.create<onnx::ConstantOp>(
          loc, paramType, DenseElementsAttr::get(paramType, 1.f));
    auto ln = b.create<onnx::LayerNormalizationOp>(loc, xType, x, gamma, beta,
                                                   b.getI64IntegerAttr(*axis),
                                                   b.getF32FloatAttr(*eps));
    setTensorName(ln, getTensorName(y));
    y.replaceAllUsesWith(ln.getResult());
    for (Operation *op : llvm::reverse(group)) {
      erased.insert(op);
      op->erase();
    }
  }
};

} // namespace
