//===- qatc-translate.cpp - ONNX <-> MLIR translation ---------------------===//
//
//   qatc-translate --import-onnx model.onnx        ONNX (binary or text) to
//   MLIR qatc-translate --export-onnx in.mlir -o m.onnx  onnx dialect to binary
//   ONNX qatc-translate --export-onnx-text in.mlir       onnx dialect to ONNX
//   text
//
//===----------------------------------------------------------------------===//

#include "qatc/Dialect/Onnx/OnnxOps.h"
#include "qatc/Frontend/ImportCLOptions.h"
#include "qatc/Frontend/OnnxExporter.h"
#include "qatc/Frontend/OnnxImporter.h"
#include "qatc/Frontend/QdqPlan.h"
#include "qatc/Support/Locations.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

static qatc::ImportCLOptions importOptions;

/// ONNX text starts with '<' (model header) or an identifier; binary ONNX
/// starts with a protobuf tag byte.
static bool looksLikeText(llvm::StringRef buffer) {
  llvm::StringRef s = buffer.ltrim();
  while (s.starts_with("#")) {
    s = s.drop_until([](char c) { return c == '\n'; }).ltrim();
  }
  return !s.empty() && (s.front() == '<' || llvm::isAlpha(s.front()));
}

static OwningOpRef<Operation *> importOnnx(llvm::SourceMgr &sourceMgr,
                                           MLIRContext *ctx) {
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  llvm::StringRef name = buffer->getBufferIdentifier();
  qatc::ImportOptions options;
  if (std::string err = importOptions.get(options); !err.empty()) {
    emitError(UnknownLoc::get(ctx)) << err;
    return nullptr;
  }
  qatc::OnnxDiagnosticHandler handler(ctx, llvm::errs());
  bool isText =
      name.ends_with(".onnxtext") || name.ends_with(".onnxtxt") ||
      (!name.ends_with(".onnx") && looksLikeText(buffer->getBuffer()));
  auto module =
      qatc::importOnnxBuffer(*ctx, buffer->getBuffer(), name, isText,
                             llvm::sys::path::parent_path(name), options);
  return OwningOpRef<Operation *>(module.release());
}

/// `--upgrade-onnx-opset`: the opset conversion `qatc quantize` applies,
/// printed as ONNX text.
static LogicalResult upgradeOnnx(const std::shared_ptr<llvm::SourceMgr> &mgr,
                                 llvm::raw_ostream &os, MLIRContext *ctx) {
  const llvm::MemoryBuffer *buffer = mgr->getMemoryBuffer(mgr->getMainFileID());
  llvm::StringRef name = buffer->getBufferIdentifier();
  qatc::OnnxDiagnosticHandler handler(ctx, llvm::errs());
  bool isText =
      name.ends_with(".onnxtext") || name.ends_with(".onnxtxt") ||
      (!name.ends_with(".onnx") && looksLikeText(buffer->getBuffer()));
  return qatc::upgradeOnnxOpset(*ctx, buffer->getBuffer(), name, isText,
                                qatc::kQdqOpset, /*textOut=*/true, os);
}

int main(int argc, char **argv) {
  TranslateRegistration upgradeReg(
      "upgrade-onnx-opset",
      "convert an opset 7-12 ONNX model to opset 13 as qatc quantize does "
      "(prints ONNX text)",
      upgradeOnnx);
  TranslateToMLIRRegistration importReg(
      "import-onnx", "import an ONNX model (binary or text)", importOnnx);
  auto registerDialects = [](DialectRegistry &registry) {
    qatc::registerImportDialects(registry);
  };
  TranslateFromMLIRRegistration exportReg(
      "export-onnx", "export the onnx dialect as a binary ONNX model",
      [](Operation *op, llvm::raw_ostream &os) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return op->emitError("expected a module");
        return qatc::exportOnnx(module, os);
      },
      registerDialects);
  TranslateFromMLIRRegistration exportTextReg(
      "export-onnx-text", "export the onnx dialect as ONNX text",
      [](Operation *op, llvm::raw_ostream &os) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return op->emitError("expected a module");
        return qatc::exportOnnxText(module, os);
      },
      registerDialects);
  return failed(mlirTranslateMain(argc, argv, "qatc ONNX translation tool"));
}
