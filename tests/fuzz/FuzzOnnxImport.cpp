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

#include <memory>

using namespace qatc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // A context serves many inputs (creating one per input would dominate),
  // but not all: it keeps every type and attribute it ever uniqued, so it
  // is renewed every 500 inputs to keep the fuzzer's memory flat.
  static std::unique_ptr<mlir::MLIRContext> ctx;
  static int uses = 0;
  if (!ctx || ++uses % 500 == 0) {
    mlir::DialectRegistry registry;
    registerImportDialects(registry);
    ctx = std::make_unique<mlir::MLIRContext>(registry);
    ctx->loadAllAvailableDialects();
    ctx->getDiagEngine().registerHandler([](mlir::Diagnostic &) {});
  }
  llvm::StringRef buffer(reinterpret_cast<const char *>(data), size);
  ImportOptions options;
  options.quietDynamicDims = true;
  bool isText = buffer.starts_with("<");
  auto module =
      importOnnxBuffer(*ctx, buffer, "fuzz.onnx", isText, "", options);
  return 0;
}
