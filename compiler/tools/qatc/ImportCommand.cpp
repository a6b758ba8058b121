//===- ImportCommand.cpp - `qatc import` ----------------------------------===//
//
// Imports an ONNX model and prints a summary (default) or the IR.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "qatc/Frontend/ImportCLOptions.h"
#include "qatc/Frontend/OnnxExporter.h"
#include "qatc/Frontend/OnnxImporter.h"
#include "qatc/Support/Locations.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
namespace cl = llvm::cl;

llvm::cl::SubCommand qatc::driver::importCommand(
    "import", "Import an ONNX model and print a summary or its IR");

namespace {
cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx>"),
                               cl::Required,
                               cl::sub(qatc::driver::importCommand));
cl::opt<std::string> outputPath("o", cl::desc("Output file (default: stdout)"),
                                cl::value_desc("file"), cl::init("-"),
                                cl::sub(qatc::driver::importCommand));
enum class Emit { Summary, Mlir, Onnx };
cl::opt<Emit> emit(
    "emit", cl::desc("What to write"), cl::init(Emit::Summary),
    cl::values(clEnumValN(Emit::Summary, "summary",
                          "a human-readable summary (default)"),
               clEnumValN(Emit::Mlir, "mlir", "the onnx dialect IR"),
               clEnumValN(Emit::Onnx, "onnx", "the model re-exported as ONNX")),
    cl::sub(qatc::driver::importCommand));
qatc::ImportCLOptions importOptions(qatc::driver::importCommand);
cl::opt<bool> printDebugInfo("mlir-print-debuginfo",
                             cl::desc("Print locations in the IR"),
                             cl::sub(qatc::driver::importCommand));
cl::opt<int64_t> elideLarger(
    "mlir-elide-elementsattrs-if-larger",
    cl::desc("Elide constants with more elements than this in the IR"),
    cl::init(-1), cl::sub(qatc::driver::importCommand));
} // namespace

int qatc::driver::runImport() {
  qatc::ImportOptions options;
  if (std::string err = importOptions.get(options); !err.empty()) {
    llvm::errs() << "qatc import: " << err << "\n";
    return 2;
  }
  DialectRegistry registry;
  registerImportDialects(registry);
  MLIRContext ctx(registry);
  ctx.printOpOnDiagnostic(false);
  OnnxDiagnosticHandler handler(&ctx, llvm::errs());
  OwningOpRef<ModuleOp> module = importOnnxFile(ctx, inputPath, options);
  if (!module)
    return 1;

  std::string error;
  auto out = openOutputFile(outputPath, &error);
  if (!out) {
    llvm::errs() << "qatc import: " << error << "\n";
    return 1;
  }
  switch (emit) {
  case Emit::Summary:
    printModelSummary(*module, inputPath, out->os());
    break;
  case Emit::Mlir: {
    OpPrintingFlags flags;
    if (printDebugInfo)
      flags.enableDebugInfo();
    if (elideLarger >= 0)
      flags.elideLargeElementsAttrs(elideLarger)
          .elideLargeResourceString(elideLarger);
    module->print(out->os(), flags);
    out->os() << "\n";
    break;
  }
  case Emit::Onnx:
    if (failed(exportOnnx(*module, out->os())))
      return 1;
    break;
  }
  out->keep();
  return 0;
}
