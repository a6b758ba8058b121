//===- QdqPlan.h - Q/DQ insertions into an ONNX graph -----------*- C++ -*-===//
//
// What a quantization recipe decided, in ONNX terms: which tensors get a
// QuantizeLinear -> DequantizeLinear pair, for which consumers, with which
// scales. The recipe computes it on the imported graph; it is then applied
// either to the IR (qat-recipe-insert) or to the original ONNX model
// (`qatc quantize`), which keeps everything the import normalized away:
// dynamic dimensions, shape subgraphs, the opset, the node order.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_FRONTEND_QDQPLAN_H
#define QATC_FRONTEND_QDQPLAN_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace qatc {

/// One Q/DQ pair on a tensor.
struct QdqInsertion {
  /// The ONNX tensor (graph input, initializer or node output).
  std::string tensor;
  /// Consumers whose input is rewired to the dequantized tensor, as (node
  /// name, input index); empty means every consumer, graph outputs included.
  std::vector<std::pair<std::string, unsigned>> consumers;
  /// One scale (per tensor) or one per slice along `axis` (per channel).
  std::vector<float> scales;
  int64_t axis = 0;
  /// A constant weight: stored as int8 (symmetric, narrow range) followed by
  /// a DequantizeLinear, the form TensorRT and ONNX Runtime both read.
  bool isWeight = false;
};

/// Every insertion a recipe made, in graph order.
struct QdqPlan {
  std::vector<QdqInsertion> insertions;
};

/// The opset `qatc quantize` writes at least: the first with per-axis
/// QuantizeLinear/DequantizeLinear.
inline constexpr int64_t kQdqOpset = 13;

/// Applies `plan` to the ONNX model at `path` and writes the result as a
/// binary model to `os`. A model below opset 13 is converted to opset 13
/// first (`convertedFrom`, if given, receives its opset then, else 0).
/// Diagnostics go to `ctx`'s handler, located at the model's nodes.
mlir::LogicalResult applyQdqPlan(mlir::MLIRContext &ctx, llvm::StringRef path,
                                 const QdqPlan &plan, llvm::raw_ostream &os,
                                 int64_t *convertedFrom = nullptr);

/// Converts the ONNX model in `buffer` (ONNX text when `isText`) from its
/// opset (7 to 12) to `targetOpset` as `qatc quantize` does, and writes it to
/// `os` as ONNX text (`textOut`) or binary. `displayName` names the model in
/// diagnostics.
mlir::LogicalResult upgradeOnnxOpset(mlir::MLIRContext &ctx,
                                     llvm::StringRef buffer,
                                     llvm::StringRef displayName, bool isText,
                                     int64_t targetOpset, bool textOut,
                                     llvm::raw_ostream &os);

} // namespace qatc

#endif // QATC_FRONTEND_QDQPLAN_H
