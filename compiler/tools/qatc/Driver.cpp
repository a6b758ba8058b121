//===- Driver.cpp - parse a qatc command line and run the command ---------===//
//
// Shared by the `qatc` executable and the Python module (python/), which
// runs the same commands in-process: what the API does is what the CLI
// does, option for option.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"
#include "Commands.h"
#include "qatc/Frontend/OnnxImporter.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

using namespace qatc::driver;

static llvm::cl::SubCommand
    opsCommand("ops", "List the ONNX operators (default domain) qatc supports");

int qatc::driver::dispatch(int argc, const char *const *argv,
                           llvm::raw_ostream *parseErrors) {
  // Every command line starts from every default (a second one in the same
  // process too).
  llvm::cl::ResetAllOptionOccurrences();
  if (!llvm::cl::ParseCommandLineOptions(
          argc, argv,
          "qatc: compiler for quantized (Q/DQ) ONNX models\n\n"
          "  Run 'qatc <command> --help' for a command's options.\n",
          parseErrors))
    return 2;
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

int qatc::driver::runCommandLine(const std::vector<std::string> &args,
                                 std::string &usage) {
  std::vector<const char *> argv;
  for (const std::string &a : args)
    argv.push_back(a.c_str());
  argv.push_back(nullptr);
  llvm::raw_string_ostream errors(usage);
  int rc = dispatch(static_cast<int>(args.size()), argv.data(), &errors);
  errors.flush();
  llvm::outs().flush();
  llvm::errs().flush();
  return rc;
}
