//===- ScalarMathBuilder.h - terse arith/math for scalar math ops -*- C++
//-*-===//
//
// The vocabulary of the `emit` bodies of Onnx_MathOp definitions
// (OnnxOps.td): f32 arithmetic on scalars or vectors, in arith and math ops
// that code generation lowers to vectorizable code.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_DIALECT_ONNX_SCALARMATHBUILDER_H
#define QATC_DIALECT_ONNX_SCALARMATHBUILDER_H

#include "mlir/IR/Builders.h"

namespace qatc::onnx {

/// Builds f32 arithmetic shaped like one value (`like`: an f32 scalar or a
/// vector of f32). Every method creates one op at the builder's insertion
/// point; comparisons are ordered (false on NaN), as C++'s `<` and `>`.
class ScalarMathBuilder {
public:
  ScalarMathBuilder(mlir::OpBuilder &b, mlir::Location loc, mlir::Value like)
      : b(b), loc(loc), type(like.getType()) {}

  /// A constant shaped like `like`.
  mlir::Value c(double v);

  mlir::Value add(mlir::Value x, mlir::Value y);
  mlir::Value sub(mlir::Value x, mlir::Value y);
  mlir::Value mul(mlir::Value x, mlir::Value y);
  mlir::Value div(mlir::Value x, mlir::Value y);
  mlir::Value neg(mlir::Value x);
  /// NaN-propagating minimum and maximum.
  mlir::Value min(mlir::Value x, mlir::Value y);
  mlir::Value max(mlir::Value x, mlir::Value y);
  mlir::Value lt(mlir::Value x, mlir::Value y);
  mlir::Value gt(mlir::Value x, mlir::Value y);
  mlir::Value select(mlir::Value cond, mlir::Value x, mlir::Value y);

  mlir::Value abs(mlir::Value x);
  mlir::Value sqrt(mlir::Value x);
  mlir::Value exp(mlir::Value x);
  mlir::Value log(mlir::Value x);
  mlir::Value sin(mlir::Value x);
  mlir::Value cos(mlir::Value x);
  mlir::Value atan(mlir::Value x);

private:
  mlir::OpBuilder &b;
  mlir::Location loc;
  mlir::Type type;
};

} // namespace qatc::onnx

#endif // QATC_DIALECT_ONNX_SCALARMATHBUILDER_H
