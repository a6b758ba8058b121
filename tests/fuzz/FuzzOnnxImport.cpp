//===- FuzzOnnxImport.cpp - libFuzzer target: ONNX import -----------------===//
//
// Binary ONNX (ONNX text when the input starts with '<') through the whole
// importer: protobuf parsing, opset normalization, shape inference and the
// import-time folding of shape subgraphs by the reference evaluator. Errors
// are diagnostics, swallowed here; crashes, sanitizer reports and hangs are
// findings. External data never resolves (no base directory).
//
//===----------------------------------------------------------------------===//

#include "qatc/Frontend/OnnxImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

using namespace qatc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // One context for the run: creating one per input would dominate.
  static mlir::MLIRContext *ctx = [] {
    mlir::DialectRegistry registry;
    registerImportDialects(registry);
    auto *c = new mlir::MLIRContext(registry);
    c->loadAllAvailableDialects();
    c->getDiagEngine().registerHandler([](mlir::Diagnostic &) {});
    return c;
  }();
  llvm::StringRef buffer(reinterpret_cast<const char *>(data), size);
  ImportOptions options;
  options.quietDynamicDims = true;
  bool isText = buffer.starts_with("<");
  auto module =
      importOnnxBuffer(*ctx, buffer, "fuzz.onnx", isText, "", options);
  return 0;
}
