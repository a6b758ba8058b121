//===- ModelLoading.cpp - load a model for a qatc command -----------------===//

#include "Commands.h"
#include "qatc/Dialect/Onnx/OnnxOps.h"
#include "qatc/Frontend/OnnxImporter.h"
#include "qatc/InitAll.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

using namespace mlir;

OwningOpRef<ModuleOp>
qatc::driver::loadModel(MLIRContext &ctx, StringRef path,
                        const ImportCLOptions &cl, StringRef command,
                        const std::function<void(ImportOptions &)> &adjust) {
  ImportOptions options;
  if (std::string err = cl.get(options); !err.empty()) {
    llvm::errs() << "qatc " << command << ": " << err << "\n";
    return nullptr;
  }
  if (adjust)
    adjust(options);
  if (path.ends_with(".mlir") || path.ends_with(".mlirbc")) {
    DialectRegistry registry;
    qatc::registerAllDialects(registry);
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
    return parseSourceFile<ModuleOp>(path, &ctx);
  }
  return importOnnxFile(ctx, path, options);
}
