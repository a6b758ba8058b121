//===- ScalarMathBuilder.cpp - terse arith/math for scalar math ops -------===//

#include "qatc/Dialect/Onnx/ScalarMathBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace qatc::onnx;

Value ScalarMathBuilder::c(double v) {
  auto attr = b.getF32FloatAttr(static_cast<float>(v));
  if (auto vt = dyn_cast<VectorType>(type))
    return b.create<arith::ConstantOp>(loc, DenseElementsAttr::get(vt, attr));
  return b.create<arith::ConstantOp>(loc, attr);
}

Value ScalarMathBuilder::add(Value x, Value y) {
  return b.create<arith::AddFOp>(loc, x, y);
}
Value ScalarMathBuilder::sub(Value x, Value y) {
  return b.create<arith::SubFOp>(loc, x, y);
}
Value ScalarMathBuilder::mul(Value x, Value y) {
  return b.create<arith::MulFOp>(loc, x, y);
}
Value ScalarMathBuilder::div(Value x, Value y) {
  return b.create<arith::DivFOp>(loc, x, y);
}
Value ScalarMathBuilder::neg(Value x) {
  return b.create<arith::NegFOp>(loc, x);
}
Value ScalarMathBuilder::min(Value x, Value y) {
  return b.create<arith::MinimumFOp>(loc, x, y);
}
Value ScalarMathBuilder::max(Value x, Value y) {
  return b.create<arith::MaximumFOp>(loc, x, y);
}
Value ScalarMathBuilder::lt(Value x, Value y) {
  return b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT, x, y);
}
Value ScalarMathBuilder::gt(Value x, Value y) {
  return b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT, x, y);
}
Value ScalarMathBuilder::select(Value cond, Value x, Value y) {
  return b.create<arith::SelectOp>(loc, cond, x, y);
}
Value ScalarMathBuilder::abs(Value x) { return b.create<math::AbsFOp>(loc, x); }
Value ScalarMathBuilder::sqrt(Value x) {
  return b.create<math::SqrtOp>(loc, x);
}
Value ScalarMathBuilder::exp(Value x) { return b.create<math::ExpOp>(loc, x); }
Value ScalarMathBuilder::log(Value x) { return b.create<math::LogOp>(loc, x); }
Value ScalarMathBuilder::sin(Value x) { return b.create<math::SinOp>(loc, x); }
Value ScalarMathBuilder::cos(Value x) { return b.create<math::CosOp>(loc, x); }
Value ScalarMathBuilder::atan(Value x) {
  return b.create<math::AtanOp>(loc, x);
}
