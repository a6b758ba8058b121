//===- OnnxImporter.h - ONNX model to the onnx dialect ----------*- C++ -*-===//
//
// The only code in qatc that sees protobuf. Reads binary `.onnx` models (with
// external-data weight files) and ONNX text (`.onnxtext`), normalizes opset
// differences and produces a module with one function, `@main_graph`, whose
// tensors all have static shapes. Errors are MLIR diagnostics located at the
// offending ONNX node (see qatc/Support/Locations.h); the caller installs the
// handler that prints them.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_FRONTEND_ONNXIMPORTER_H
#define QATC_FRONTEND_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "qatc/Dialect/Onnx/OnnxOps.h"
#include "qatc/Support/Npy.h"

#include <map>
#include <string>
#include <vector>

namespace qatc {

/// Lowest and highest default-domain opset the importer accepts.
inline constexpr int64_t kMinOpset = 7;
inline constexpr int64_t kMaxOpset = 21;

/// True for operators whose definitions in opsets 1 to 6 mean what they mean
/// at opset 7 (apart from the legacy `consumed_inputs` attribute, which the
/// importer ignores): models of those opsets made only of them import.
bool isUnchangedBeforeOpset7(llvm::StringRef opType);

/// Function attribute: for each graph input, the dimensions that were
/// dynamic in the model and set to 1 (absent when none was).
inline constexpr llvm::StringLiteral kDynamicInputDimsAttr =
    "onnx.dynamic_input_dims";

struct ImportOptions {
  /// Shapes that pin graph inputs with dynamic dimensions: name -> dims.
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// Graph inputs replaced by constants (shape, size or bound inputs that
  /// qatc needs at compile time): name -> value.
  std::map<std::string, NpyArray> frozenInputs;
  /// Do not warn about dynamic dimensions set to 1 (a command that takes
  /// the shapes from its input data re-imports with them).
  bool quietDynamicDims = false;
  /// Keep unsupported nodes as `onnx.Unsupported` ops and succeed (for
  /// inspection); by default they are reported, all at once, as errors.
  bool allowUnsupported = false;
  /// Import only the graph's signature: the function's arguments (with
  /// `onnx.input_names` and `onnx.dynamic_input_dims`) and no body. Commands
  /// that take the dynamic sizes from their data read the signature first:
  /// the full graph may not even import with every dynamic dimension at 1.
  bool signatureOnly = false;
};

/// Parses `name=1x3x224x224` into `options.inputShapes`; returns an error
/// message, or an empty string on success.
std::string parseInputShapeSpec(llvm::StringRef spec, ImportOptions &options);

/// Parses `name=file.npy` and reads the file into `options.frozenInputs`;
/// returns an error message, or an empty string on success.
std::string parseFreezeInputSpec(llvm::StringRef spec, ImportOptions &options);

/// Imports the model at `path` (binary ONNX unless the name ends in
/// `.onnxtext`). Returns null after emitting diagnostics on failure.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxFile(mlir::MLIRContext &ctx,
                                                 llvm::StringRef path,
                                                 const ImportOptions &options);

/// Imports a model held in memory. `displayName` names it in diagnostics;
/// `baseDir` resolves external data files (may be empty).
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxBuffer(mlir::MLIRContext &ctx, llvm::StringRef buffer,
                 llvm::StringRef displayName, bool isText,
                 llvm::StringRef baseDir, const ImportOptions &options);

/// The default-domain ONNX operators the importer supports, sorted.
std::vector<std::string> getSupportedOnnxOps();

/// Registers the dialects an imported module uses.
void registerImportDialects(mlir::DialectRegistry &registry);

} // namespace qatc

#endif // QATC_FRONTEND_ONNXIMPORTER_H
