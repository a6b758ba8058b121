//===- OnnxExporter.h - onnx dialect back to ONNX ---------------*- C++ -*-===//
//
// Writes a module in the `onnx` dialect (as produced by the importer, or
// after passes that keep to the dialect) as an ONNX model. Normalized
// attributes become the inputs the target opset expects again, so importing
// and exporting a model gives one that ONNX Runtime evaluates bit-identically.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_FRONTEND_ONNXEXPORTER_H
#define QATC_FRONTEND_ONNXEXPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace qatc {

/// Serializes `module` as a binary ONNX model to `os`. Emits diagnostics and
/// fails on ops that have no ONNX form.
mlir::LogicalResult exportOnnx(mlir::ModuleOp module, llvm::raw_ostream &os);

/// Same, as ONNX text (for tests and reading).
mlir::LogicalResult exportOnnxText(mlir::ModuleOp module,
                                   llvm::raw_ostream &os);

} // namespace qatc

#endif // QATC_FRONTEND_ONNXEXPORTER_H
