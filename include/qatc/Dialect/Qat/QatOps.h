//===- QatOps.h - the qat dialect -------------------------------*- C++ -*-===//
//
// Declarations of the `qat` dialect, its attributes, its interface and its
// ops (generated from QatBase.td and QatOps.td), plus helpers for the
// `!quant.uniform` types the ops compute on.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_DIALECT_QAT_QATOPS_H
#define QATC_DIALECT_QAT_QATOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Quant/QuantOps.h"
#include "mlir/Dialect/Quant/QuantTypes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "qatc/Support/QuantMath.h"

namespace qatc::qat {

/// How the quantization of an int8 op's result relates to its operands.
enum class ScaleRelation {
  /// Quantized operands and result share one element type (data movement,
  /// max pooling, concat, clamp).
  SameScale,
  /// The op computes new values and requantizes them to its own result
  /// type (or stops at f32).
  Rescale,
};

/// Verifies the constraints an op declares through QuantizedOpInterface.
mlir::LogicalResult verifyQuantizedOp(mlir::Operation *op);

/// The per-tensor quantized element type of `type` (a tensor type), or null.
mlir::quant::UniformQuantizedType getPerTensorType(mlir::Type type);

/// The quantized element type (per tensor or per axis) of `type`, or null.
mlir::quant::QuantizedType getQuantType(mlir::Type type);

/// The scales of a quantized element type, one per channel along `channels`
/// (a per-tensor scale is repeated).
llvm::SmallVector<double> getChannelScales(mlir::quant::QuantizedType type,
                                           int64_t channels);

/// The zero points of a quantized element type, one per channel.
llvm::SmallVector<int64_t> getChannelZeroPoints(mlir::quant::QuantizedType type,
                                                int64_t channels);

/// The quantization parameters of every element of a quantized tensor type:
/// per channel along the quantized dimension (one channel per tensor).
struct QuantLayout {
  explicit QuantLayout(mlir::Type tensorType);
  mlir::quant::QuantizedType type;
  int64_t qmin, qmax;
  /// The channel of each flat element.
  AxisIndex channel;
  llvm::SmallVector<double> scales;
  llvm::SmallVector<int64_t> zeroPoints;
};

} // namespace qatc::qat

#include "qatc/Dialect/Qat/QatDialect.h.inc"
#include "qatc/Dialect/Qat/QatEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "qatc/Dialect/Qat/QatAttrs.h.inc"

#include "qatc/Dialect/Qat/QatInterfaces.h.inc"

#define GET_OP_CLASSES
#include "qatc/Dialect/Qat/QatOps.h.inc"

#endif // QATC_DIALECT_QAT_QATOPS_H
