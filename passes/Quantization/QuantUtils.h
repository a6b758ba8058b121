//===- QuantUtils.h - helpers shared by the quantization passes -*- C++ -*-===//
//
// Tensor names, node-name locations, constant data access and the
// discardable attributes through which the passes tell the precision report
// what they decided.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_PASSES_QUANTIZATION_QUANTUTILS_H
#define QATC_PASSES_QUANTIZATION_QUANTUTILS_H

#include "qatc/Dialect/Onnx/OnnxOps.h"
#include "qatc/Dialect/Qat/QatOps.h"
#include "qatc/Support/Locations.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>
#include <vector>

namespace qatc::quantization {

/// Why an ONNX compute node stays fp32 (set by the fusion pass, read by the
/// precision report).
inline constexpr llvm::StringLiteral kFp32ReasonAttr = "qat.fp32_reason";
/// `fp32` or `int8`, set by qat-precision-override on the nodes it matched.
inline constexpr llvm::StringLiteral kPrecisionAttr = "qat.precision";
/// Module attribute: nodes that passes removed, name -> {reason, op_type,
/// index}.
inline constexpr llvm::StringLiteral kRemovedNodesAttr = "qat.removed_nodes";

/// The output-channel axis of the weight (operand 1) of a Conv (0),
/// ConvTranspose (1), Gemm (0 with transB, else 1) or MatMul (its last
/// axis): the only axis a per-channel scale can be factored out of the
/// integer sum along. nullopt for other ops and operands.
std::optional<int64_t> weightChannelAxis(mlir::Operation *op, unsigned operand);

/// True if qat-precision-override forced `op` to fp32.
bool isForcedFp32(mlir::Operation *op);

/// Erases the onnx.Constant ops nothing reads any more.
void eraseUnusedConstants(mlir::ModuleOp module);

/// The ONNX tensor name of `v` (graph input name or the defining op's
/// output name), or "" when it has none.
std::string getTensorName(mlir::Value v);

/// Names result `index` of `op` (keeps the other results' names).
void setTensorName(mlir::Operation *op, llvm::StringRef name,
                   unsigned index = 0);

/// The ONNX node name of `op`'s location (the first one of a fused
/// location), or "".
std::string getNodeName(mlir::Operation *op);

/// The node that names `op` best: for a fused op its compute node, not the
/// first dequantize it absorbed (empty when `op` has no node location).
OnnxLocInfo getPrimaryNode(mlir::Operation *op);

/// Where `v` comes from, for a reason string: "the graph input 'x'", "a
/// float constant", "the fp32 result of the int8 Conv \"c\" (no
/// QuantizeLinear after it)", "the output of Sigmoid \"s\" (fp32)".
std::string describeSource(mlir::Value v);

/// A location naming every ONNX node of `ops` (duplicates dropped), so a
/// fused op keeps all the node names it absorbed.
mlir::Location fuseLocations(llvm::ArrayRef<mlir::Operation *> ops);

/// Records in the module that the ONNX node(s) of `op` were removed, and why
/// (for the precision report); call before erasing an op that is absorbed
/// nowhere.
void recordRemoved(mlir::Operation *op, llvm::StringRef reason);

/// Float values of a constant f32 tensor (onnx.Constant); nullopt if `v` is
/// not one.
std::optional<std::vector<float>> getConstantFloats(mlir::Value v);

/// Values of an onnx.Constant of any integer or float element type, as
/// doubles (exact for the 8/16/32-bit integers and floats of Q/DQ
/// parameters); nullopt if `v` is not a constant.
std::optional<std::vector<double>> getConstantAsDoubles(mlir::Value v);

/// Raw integer values of a qat.constant (sign- or zero-extended to int64
/// per its quantized type).
std::optional<std::vector<int64_t>> getConstantInts(mlir::Value v);

/// Builds an elements attribute of `type` over `bytes` (little-endian,
/// row-major): a resource blob named after `keyHint` when large, a dense
/// literal when small.
mlir::ElementsAttr makeElements(mlir::RankedTensorType type,
                                llvm::ArrayRef<char> bytes,
                                llvm::StringRef keyHint);

/// An onnx.Constant holding `values` with `shape`.
mlir::Value createFloatConstant(mlir::OpBuilder &b, mlir::Location loc,
                                llvm::ArrayRef<int64_t> shape,
                                llvm::ArrayRef<float> values,
                                llvm::StringRef keyHint);

/// A qat.constant of `type` (a tensor of !quant.uniform) holding the stored
/// integers `values`.
qat::ConstantOp createQuantConstant(mlir::OpBuilder &b, mlir::Location loc,
                                    mlir::RankedTensorType type,
                                    llvm::ArrayRef<int64_t> values,
                                    llvm::StringRef keyHint);

/// Element type of a value's tensor type.
mlir::Type elementTypeOf(mlir::Value v);

/// The per-tensor quantized type of `v`'s elements, or null.
inline mlir::quant::UniformQuantizedType perTensorTypeOf(mlir::Value v) {
  return qat::getPerTensorType(v.getType());
}

/// `v`'s defining qat.dequantize, or null.
qat::DequantizeOp getDequantize(mlir::Value v);

/// The single user of `v`, or null when it has none or several.
mlir::Operation *getSingleUser(mlir::Value v);

/// The rounding-mode attribute ONNX uses.
qat::RoundingModeAttr halfToEven(mlir::MLIRContext *ctx);

/// A tensor type with `shape` and `elementType`.
inline mlir::RankedTensorType tensorOf(llvm::ArrayRef<int64_t> shape,
                                       mlir::Type elementType) {
  return mlir::RankedTensorType::get(shape, elementType);
}

} // namespace qatc::quantization

#endif // QATC_PASSES_QUANTIZATION_QUANTUTILS_H
