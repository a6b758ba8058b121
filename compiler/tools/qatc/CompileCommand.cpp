//===- CompileCommand.cpp - `qatc compile` --------------------------------===//
//
//   qatc compile m.onnx --emit=qat -o m.qat.mlir
//        [--precision-report r.{txt,csv,json}] [--precision-override FILE]
//        [--trt-compat] [--print-pipeline]
//
// Lowers a Q/DQ model to the qat dialect with the same pipeline as
// `qatc-opt --qat-lower` and prints the IR with each op's ONNX node names.
// Plan files (--emit=plan, the default once code generation exists) come
// with the code generator.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "qatc/Quantization/Passes.h"
#include "qatc/Support/Locations.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace qatc;
namespace cl = llvm::cl;

cl::SubCommand qatc::driver::compileCommand(
    "compile", "Compile a Q/DQ model (today: to the qat dialect, --emit=qat)");

namespace {
cl::opt<std::string> modelPath(cl::Positional, cl::desc("<model.onnx|.mlir>"),
                               cl::Required,
                               cl::sub(qatc::driver::compileCommand));
cl::opt<std::string> emit("emit",
                          cl::desc("What to write: qat (the quantized IR) or "
                                   "onnx (the imported IR, before the "
                                   "quantization passes)"),
                          cl::value_desc("qat|onnx"),
                          cl::sub(qatc::driver::compileCommand));
cl::opt<std::string> outputPath("o", cl::desc("Output file (default: stdout)"),
                                cl::value_desc("file"), cl::init("-"),
                                cl::sub(qatc::driver::compileCommand));
cl::opt<std::string> reportPath(
    "precision-report",
    cl::desc("Write the per-node precision report (.txt, .csv or .json)"),
    cl::value_desc("file"), cl::sub(qatc::driver::compileCommand));
cl::opt<std::string> overridePath(
    "precision-override",
    cl::desc("File of '<node-name regex> fp32|int8' lines: force nodes to "
             "fp32, or fail unless they run int8"),
    cl::value_desc("file"), cl::sub(qatc::driver::compileCommand));
cl::opt<bool> trtCompat("trt-compat",
                        cl::desc("Refuse what TensorRT refuses (non-zero "
                                 "zero points, uint8 quantization)"),
                        cl::sub(qatc::driver::compileCommand));
cl::opt<bool> printPipeline("print-pipeline",
                            cl::desc("Print the pass pipeline (as qatc-opt "
                                     "--pass-pipeline accepts it) and exit"),
                            cl::sub(qatc::driver::compileCommand));
cl::opt<bool> remarks("remarks",
                      cl::desc("Print a remark at every fp32 compute node"),
                      cl::sub(qatc::driver::compileCommand));
ImportCLOptions importOptions(qatc::driver::compileCommand);
} // namespace

void qatc::driver::buildCompilePipeline(PassManager &pm,
                                        const CompilePipelineFlags &flags) {
  quantization::LowerToQatOptions options;
  options.trtCompat = flags.trtCompat;
  options.precisionOverride = flags.precisionOverride;
  options.precisionReport = flags.precisionReport;
  options.remarks = flags.remarks;
  quantization::buildLowerToQatPipeline(pm, options);
}

int qatc::driver::runCompile() {
  MLIRContext ctx;
  ctx.printOpOnDiagnostic(false);
  CompilePipelineFlags flags{trtCompat, overridePath, reportPath, remarks};
  if (printPipeline) {
    PassManager pm(&ctx, ModuleOp::getOperationName());
    buildCompilePipeline(pm, flags);
    pm.printAsTextualPipeline(llvm::outs());
    llvm::outs() << "\n";
    return 0;
  }
  if (emit.empty() || emit == "plan") {
    llvm::errs() << "qatc compile: plan files come with the code generator; "
                    "use --emit=qat for the quantized IR\n";
    return 2;
  }
  if (emit != "qat" && emit != "onnx") {
    llvm::errs() << "qatc compile: --emit=" << emit
                 << " is not one of qat, onnx\n";
    return 2;
  }
  OnnxDiagnosticHandler handler(&ctx, llvm::errs());
  OwningOpRef<ModuleOp> module =
      loadModel(ctx, modelPath, importOptions, "compile");
  if (!module)
    return 1;
  if (emit == "qat") {
    PassManager pm(&ctx, ModuleOp::getOperationName());
    buildCompilePipeline(pm, flags);
    if (failed(pm.run(*module)))
      return 1;
    if (!reportPath.empty() && reportPath != "-")
      llvm::errs() << "wrote the precision report to " << reportPath << "\n";
  }
  std::string error;
  auto output = openOutputFile(outputPath, &error);
  if (!output) {
    llvm::errs() << "qatc compile: " << error << "\n";
    return 1;
  }
  // Node names as locations, in a form that parses back.
  OpPrintingFlags printing;
  printing.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  module->print(output->os(), printing);
  output->os() << "\n";
  output->keep();
  return 0;
}
