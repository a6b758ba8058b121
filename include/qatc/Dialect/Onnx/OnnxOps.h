//===- OnnxOps.h - the qatc onnx dialect ------------------------*- C++ -*-===//
//
// Declarations of the `onnx` dialect and its ops (generated from OnnxOps.td)
// plus the shape-inference helpers the ops share.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_DIALECT_ONNX_ONNXOPS_H
#define QATC_DIALECT_ONNX_ONNXOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace qatc {

/// Name of the discardable attribute listing the ONNX tensor names of an
/// op's results (one string per result). Tensor names are what calibration,
/// tensor dumps and the precision report key on.
inline constexpr llvm::StringLiteral kOutputNamesAttr = "onnx.output_names";

} // namespace qatc

namespace qatc::onnx {

/// Infers the result type of an elementwise binary op under ONNX
/// multidirectional broadcasting; the element type is `lhs`'s. Unranked
/// inputs give an unranked result.
mlir::LogicalResult
inferBroadcastType(std::optional<mlir::Location> loc, mlir::Type lhs,
                   mlir::Type rhs, llvm::SmallVectorImpl<mlir::Type> &types);

/// Infers the result type of a reduction over `axes` (every axis when
/// empty), keeping reduced axes as 1 when `keepdims`.
mlir::LogicalResult inferReduceType(std::optional<mlir::Location> loc,
                                    mlir::Type input,
                                    llvm::ArrayRef<int64_t> axes,
                                    int64_t keepdims,
                                    llvm::SmallVectorImpl<mlir::Type> &types);

/// Computes the numpy-broadcast shape of `a` and `b`; fails when a dimension
/// pair is neither equal nor 1.
mlir::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// Output size of one spatial axis of a sliding window (Conv, pooling) as
/// ONNX defines it; fails (with an error at `loc`) when the window does not
/// fit or an attribute is out of range.
mlir::FailureOr<int64_t> getWindowOutputSize(std::optional<mlir::Location> loc,
                                             int64_t in, int64_t kernel,
                                             int64_t stride, int64_t padBegin,
                                             int64_t padEnd, int64_t dilation,
                                             bool ceilMode);

} // namespace qatc::onnx

#include "qatc/Dialect/Onnx/OnnxDialect.h.inc"
#include "qatc/Dialect/Onnx/OnnxInterfaces.h.inc"

#define GET_OP_CLASSES
#include "qatc/Dialect/Onnx/OnnxOps.h.inc"

#endif // QATC_DIALECT_ONNX_ONNXOPS_H
