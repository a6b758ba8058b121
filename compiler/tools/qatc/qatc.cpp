//===- qatc.cpp - the qatc driver -----------------------------------------===//
//
//   qatc import model.onnx [--input-shape x=1x3x224x224]
//   [--emit=summary|mlir|onnx] qatc ops            the ONNX operators qatc
//   supports
//
// Later subcommands (eval, quantize, compile, run, bench, inspect) register
// themselves the same way as `import`.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "qatc/Frontend/OnnxImporter.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace qatc::driver;

static llvm::cl::SubCommand
    opsCommand("ops", "List the ONNX operators (default domain) qatc supports");

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  // libLLVM registers dozens of internal flags at the top level; keep them
  // out of `qatc --help` (the subcommands list their own options). Done by
  // LLVM itself: calling into its cl::Option objects from here trips UBSan's
  // vptr check across the shared-library boundary.
  static llvm::cl::OptionCategory qatcCategory("qatc");
  llvm::cl::HideUnrelatedOptions(qatcCategory);
  llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "qatc: compiler for quantized (Q/DQ) ONNX models\n\n"
      "  Run 'qatc <command> --help' for a command's options.\n");
  if (importCommand)
    return runImport();
  if (evalCommand)
    return runEval();
  if (compareCommand)
    return runCompare();
  if (compileCommand)
    return runCompile();
  if (quantizeCommand)
    return runQuantize();
  if (runCommand)
    return runRun();
  if (benchCommand)
    return runBench();
  if (inspectCommand)
    return runInspect();
  if (opsCommand) {
    for (const std::string &op : qatc::getSupportedOnnxOps())
      llvm::outs() << op << "\n";
    return 0;
  }
  llvm::errs() << "qatc: no command given; try 'qatc --help'\n";
  return 2;
}
