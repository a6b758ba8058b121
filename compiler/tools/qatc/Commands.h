//===- Commands.h - qatc driver subcommands ---------------------*- C++ -*-===//
//
// Each subcommand owns an llvm::cl::SubCommand and a run function;
// dispatch() runs the one the user named.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_TOOLS_QATC_COMMANDS_H
#define QATC_TOOLS_QATC_COMMANDS_H

#include "qatc/Frontend/ImportCLOptions.h"

#include "qatc/Reference/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <map>

namespace qatc::rt {
class Session;
} // namespace qatc::rt

namespace qatc::driver {

/// Parses a qatc command line and runs its command; returns the exit code.
/// May be called again in the same process (every option back at its
/// default). With `parseErrors`, a bad command line is reported there and
/// returns 2 instead of exiting the process.
int dispatch(int argc, const char *const *argv, llvm::raw_ostream *parseErrors);

extern llvm::cl::SubCommand importCommand;
int runImport();

extern llvm::cl::SubCommand evalCommand;
int runEval();

extern llvm::cl::SubCommand compareCommand;
int runCompare();

extern llvm::cl::SubCommand quantizeCommand;
int runQuantize();

extern llvm::cl::SubCommand compileCommand;
int runCompile();

extern llvm::cl::SubCommand runCommand;
int runRun();

extern llvm::cl::SubCommand benchCommand;
int runBench();

extern llvm::cl::SubCommand inspectCommand;
int runInspect();

/// The command-line choices that shape the lowering pipeline.
struct CompilePipelineFlags {
  bool trtCompat = false;
  std::string precisionOverride;
  std::string precisionReport;
  bool remarks = false;
  std::string precisionReportProfile;
};

/// The pipeline `qatc compile` runs (and `qatc eval --stage=qat`): the
/// `qat-lower` pipeline of qatc-opt with the given flags.
void buildCompilePipeline(mlir::PassManager &pm,
                          const CompilePipelineFlags &flags);

/// Loads a model for a command: ONNX (binary or text) through the importer
/// with the command's import options, or an MLIR file. Diagnostics go to
/// stderr in the `model.onnx: node "..." (#i, Op): error: ...` form while the
/// returned handler lives in the context.
mlir::OwningOpRef<mlir::ModuleOp>
loadModel(mlir::MLIRContext &ctx, llvm::StringRef path,
          const ImportCLOptions &options, llvm::StringRef command,
          const std::function<void(ImportOptions &)> &adjust = {});

/// For each graph input whose model dimensions were dynamic: the input's
/// shape with those dimensions taken from `data` (one tensor, or null, per
/// input; a tensor may lack the leading batch axis), skipping dimension 0
/// when `keepBatch`. Only inputs whose shape changes are listed, ready for
/// ImportOptions::inputShapes.
std::map<std::string, std::vector<int64_t>>
shapesFromData(mlir::func::FuncOp func,
               llvm::ArrayRef<const ref::Tensor *> data, bool keepBatch);

/// Reads `--input` arguments for the inputs `names`: file.npy (the inputs
/// in order), name=file.npy, or an .npz of arrays named after the inputs.
/// Errors are printed as `qatc <command>: --input ...`; an input given no
/// data is nullopt.
mlir::FailureOr<std::vector<std::optional<ref::Tensor>>>
readInputSpecs(llvm::ArrayRef<std::string> specs,
               llvm::ArrayRef<std::string> names, llvm::StringRef command);

/// Prints the top-1 accuracy of `logits` [N, C] against the integer labels
/// in `labelsPath` (.npy); returns the command's exit code.
int printTop1Accuracy(const ref::Tensor &logits, llvm::StringRef labelsPath,
                      llvm::StringRef command);

/// `s`, or its last `width` characters behind "..." when longer (node names
/// in tables).
inline std::string lastChars(llvm::StringRef s, size_t width) {
  if (s.size() <= width)
    return s.str();
  return "..." + s.take_back(width - 3).str();
}

/// The worker-thread options of the commands that run a plan (run, bench),
/// registered on `sub`: --threads and --thread-shares, defined once.
class SessionCLOptions {
public:
  explicit SessionCLOptions(llvm::cl::SubCommand &sub);
  /// --threads, at least 1.
  int threads() const;
  /// Applies --thread-shares to `session`: "auto" makes its shares adaptive
  /// (rt::Session::setAdaptiveShares), a comma-separated list fixes them
  /// (rt::Session::setShares), none leaves them equal; false, with `error`
  /// set, for a list that is not numbers or does not fit its threads.
  bool applyShares(rt::Session &session, std::string &error) const;

private:
  llvm::cl::opt<int> threadCount;
  llvm::cl::opt<std::string> shares;
};

/// Prints what a user wants to know about an imported model: I/O, op counts,
/// quantization and weights.
void printModelSummary(mlir::ModuleOp module, llvm::StringRef path,
                       llvm::raw_ostream &os);

} // namespace qatc::driver

#endif // QATC_TOOLS_QATC_COMMANDS_H
