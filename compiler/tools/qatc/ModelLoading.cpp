//===- ModelLoading.cpp - load a model for a qatc command -----------------===//

#include "Commands.h"
#include "qatc/Dialect/Onnx/OnnxOps.h"
#include "qatc/Frontend/OnnxImporter.h"
#include "qatc/InitAll.h"
#include "qatc/Reference/Evaluator.h"

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

std::map<std::string, std::vector<int64_t>> qatc::driver::shapesFromData(
    func::FuncOp func, ArrayRef<const ref::Tensor *> data, bool keepBatch) {
  std::map<std::string, std::vector<int64_t>> shapes;
  auto dynamic = func->getAttrOfType<ArrayAttr>(kDynamicInputDimsAttr);
  if (!dynamic)
    return shapes;
  std::vector<std::string> names = ref::getInputNames(func);
  for (auto [i, attr] : llvm::enumerate(dynamic)) {
    const ref::Tensor *t = i < data.size() ? data[i] : nullptr;
    auto dims = cast<DenseI64ArrayAttr>(attr).asArrayRef();
    if (!t || dims.empty())
      continue;
    auto type = cast<RankedTensorType>(func.getArgument(i).getType());
    // Data may hold one sample without the batch axis.
    int64_t offset = t->rank() == type.getRank()       ? 0
                     : t->rank() + 1 == type.getRank() ? 1
                                                       : -1;
    if (offset < 0)
      continue;
    std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
    for (int64_t d : dims)
      if (d >= offset && !(keepBatch && d == 0))
        shape[d] = t->dim(d - offset);
    if (ArrayRef<int64_t>(shape) != type.getShape())
      shapes[names[i]] = shape;
  }
  return shapes;
}
