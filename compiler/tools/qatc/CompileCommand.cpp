//===- CompileCommand.cpp - `qatc compile` --------------------------------===//
//
//   qatc compile m.onnx -o m.plan [--target-cpu host|amx|avx512vnni|
//        avxvnni|avx2|generic|x86-64-multi|<comma-separated list>]
//        [--emit=onnx|qat|kernels|llvm|asm|plan]
//        [--precision-report r.{txt,csv,json}] [--precision-override FILE]
//        [--trt-compat] [--print-pipeline]
//
// Lowers a Q/DQ (or float) model to the qat dialect with the same pipeline
// as `qatc-opt --qat-lower`, then to one function per layer, LLVM code and a
// plan file. Every stage can be printed with --emit.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "qatc/Codegen/Codegen.h"
#include "qatc/Quantization/Passes.h"
#include "qatc/Reference/Evaluator.h"
#include "qatc/Support/Locations.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <chrono>

using namespace mlir;
using namespace qatc;
namespace cl = llvm::cl;

cl::SubCommand qatc::driver::compileCommand(
    "compile", "Compile an ONNX model (Q/DQ or float) to a plan file");

namespace {
cl::opt<std::string> modelPath(cl::Positional, cl::desc("<model.onnx|.mlir>"),
                               cl::Required,
                               cl::sub(qatc::driver::compileCommand));
cl::opt<std::string> emit("emit",
                          cl::desc("What to write: plan (default), onnx "
                                   "(the imported IR), qat (after the "
                                   "quantization passes), kernels (the "
                                   "layer functions in MLIR), llvm (LLVM "
                                   "IR after -O3) or asm"),
                          cl::value_desc("plan|onnx|qat|kernels|llvm|asm"),
                          cl::sub(qatc::driver::compileCommand));
cl::opt<std::string> outputPath(
    "o",
    cl::desc("Output file (plan default: the model's name with .plan; "
             "IR default: stdout)"),
    cl::value_desc("file"), cl::sub(qatc::driver::compileCommand));
cl::opt<std::string> targetCpu(
    "target-cpu",
    cl::desc("Instruction set of the code: host (default), amx, "
             "avx512vnni, avxvnni, avx2 or generic; a comma-separated list "
             "or x86-64-multi (all five) writes a multi-path plan whose "
             "runtime runs the best path the CPU has"),
    cl::value_desc("name"), cl::init("host"),
    cl::sub(qatc::driver::compileCommand));
cl::opt<std::string> reportPath(
    "precision-report",
    cl::desc("Write the per-node precision report (.txt, .csv, .json, or "
             ".html: one page with the graph coloured by precision)"),
    cl::value_desc("file"), cl::sub(qatc::driver::compileCommand));
cl::opt<std::string> reportProfile(
    "precision-report-profile",
    cl::desc("A `qatc bench --json` file of this model's plan: the HTML "
             "precision report shows each layer's time"),
    cl::value_desc("bench.json"), cl::sub(qatc::driver::compileCommand));
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
  options.precisionReportProfile = flags.precisionReportProfile;
  quantization::buildLowerToQatPipeline(pm, options);
}

int qatc::driver::runCompile() {
  MLIRContext ctx;
  ctx.printOpOnDiagnostic(false);
  CompilePipelineFlags flags{trtCompat, overridePath, reportPath, remarks,
                             reportProfile};
  if (!reportProfile.empty() &&
      !llvm::StringRef(reportPath).ends_with(".html")) {
    llvm::errs() << "qatc compile: --precision-report-profile shows layer "
                    "times on the HTML report: give --precision-report "
                    "FILE.html\n";
    return 2;
  }
  if (printPipeline) {
    PassManager pm(&ctx, ModuleOp::getOperationName());
    buildCompilePipeline(pm, flags);
    pm.printAsTextualPipeline(llvm::outs());
    llvm::outs() << "\n";
    return 0;
  }
  std::string what = emit.empty() ? "plan" : std::string(emit);
  static const char *kinds[] = {"plan",    "onnx", "qat",
                                "kernels", "llvm", "asm"};
  if (llvm::find(kinds, what) == std::end(kinds)) {
    llvm::errs() << "qatc compile: --emit=" << what
                 << " is not one of plan, onnx, qat, kernels, llvm, asm\n";
    return 2;
  }
  std::vector<codegen::Target> targets;
  std::string error;
  if (!codegen::resolveTargets(targetCpu, targets, error)) {
    llvm::errs() << "qatc compile: " << error << "\n";
    return 2;
  }
  if (targets.size() > 1 &&
      (what == "kernels" || what == "llvm" || what == "asm")) {
    llvm::errs() << "qatc compile: --emit=" << what
                 << " prints the code of one target; --target-cpu " << targetCpu
                 << " names " << targets.size() << "\n";
    return 2;
  }
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  // Progress lines, for plans only (the other outputs may go to stdout).
  auto stage = [&](const llvm::Twine &step) {
    if (what == "plan")
      llvm::errs()
          << llvm::format(
                 "[%6.2f s] ",
                 std::chrono::duration<double>(Clock::now() - t0).count())
          << step << "\n";
  };
  OnnxDiagnosticHandler handler(&ctx, llvm::errs());
  OwningOpRef<ModuleOp> module =
      loadModel(ctx, modelPath, importOptions, "compile");
  if (!module)
    return 1;
  if (what != "onnx") {
    stage("imported; running the quantization passes");
    PassManager pm(&ctx, ModuleOp::getOperationName());
    buildCompilePipeline(pm, flags);
    if (failed(pm.run(*module)))
      return 1;
    if (!reportPath.empty() && reportPath != "-")
      llvm::errs() << "wrote the precision report to " << reportPath << "\n";
  }
  auto writeText = [&](llvm::StringRef text) {
    auto output = openOutputFile(outputPath.empty() ? std::string("-")
                                                    : std::string(outputPath),
                                 &error);
    if (!output) {
      llvm::errs() << "qatc compile: " << error << "\n";
      return 1;
    }
    output->os() << text;
    output->keep();
    return 0;
  };
  if (what == "onnx" || what == "qat") {
    // Node names as locations, in a form that parses back.
    OpPrintingFlags printing;
    printing.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os, printing);
    os << "\n";
    return writeText(text);
  }
  if (codegen::computesF64(ref::getMainFunction(*module)))
    emitWarning(ref::getMainFunction(*module).getLoc())
        << "the model computes in float64; the plan computes in float32 "
           "(float64 inputs and outputs convert at the boundary)";
  // One plan per target, from the same qat graph; several become one
  // multi-path plan.
  std::vector<std::vector<uint8_t>> plans;
  size_t layers = 0, weightsBytes = 0, codeBytes = 0, arenaBytes = 0;
  for (const codegen::Target &target : targets) {
    std::string which =
        targets.size() > 1 ? " (code path " + std::to_string(plans.size() + 1) +
                                 " of " + std::to_string(targets.size()) + ")"
                           : "";
    stage("lowering to layer functions for " + target.name + which);
    codegen::LoweredGraph graph;
    if (failed(
            codegen::lowerGraph(ref::getMainFunction(*module), target, graph)))
      return 1;
    if (what == "kernels") {
      OpPrintingFlags printing;
      printing.enableDebugInfo(/*enable=*/true, /*prettyForm=*/true);
      std::string text;
      llvm::raw_string_ostream os(text);
      graph.kernels->print(os, printing);
      os << "\n";
      return writeText(text);
    }
    stage("compiling " + llvm::Twine(graph.manifest.layers.size()) +
          " layers with LLVM for " + target.name);
    std::vector<uint8_t> code;
    codegen::KernelOutput kind = what == "llvm" ? codegen::KernelOutput::LLVMIR
                                 : what == "asm"
                                     ? codegen::KernelOutput::Assembly
                                     : codegen::KernelOutput::SharedObject;
    if (failed(codegen::compileKernels(*graph.kernels, target, kind,
                                       graph.manifest, graph.weights.size(),
                                       code, error))) {
      llvm::errs() << modelPath << ": error: " << error << "\n";
      return 1;
    }
    if (kind != codegen::KernelOutput::SharedObject)
      return writeText(llvm::StringRef(
          reinterpret_cast<const char *>(code.data()), code.size()));
    plans.push_back(
        codegen::writePlan(graph.manifest, graph.weights, code, target));
    layers = graph.manifest.layers.size();
    weightsBytes += graph.weights.size();
    codeBytes += code.size();
    arenaBytes = std::max<size_t>(arenaBytes, graph.manifest.arenaBytes);
  }
  std::vector<uint8_t> bytes =
      plans.size() == 1
          ? std::move(plans[0])
          : plan::writeMultiPlan(plans, codegen::compilerVersion());
  std::string path = outputPath;
  if (path.empty() || path == "-") {
    llvm::SmallString<128> p(modelPath.getValue());
    llvm::sys::path::replace_extension(p, "plan");
    path = std::string(p.str());
  }
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec) {
      llvm::errs() << "qatc compile: cannot write " << path << ": "
                   << ec.message() << "\n";
      return 1;
    }
    os.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  }
  if (targets.size() == 1) {
    stage("wrote " + path + " (" + llvm::Twine(bytes.size() / 1024) +
          " KiB: " + llvm::Twine(layers) + " layers, weights " +
          llvm::Twine(weightsBytes / 1024) + " KiB, code " +
          llvm::Twine(codeBytes / 1024) + " KiB, arena " +
          llvm::Twine(arenaBytes / 1024) + " KiB)");
    return 0;
  }
  // What the paths share: the file against the sum of its plans.
  size_t separate = 0;
  for (const std::vector<uint8_t> &p : plans)
    separate += p.size();
  stage("wrote " + path + " (" + llvm::Twine(bytes.size() / 1024) +
        " KiB: " + llvm::Twine(targets.size()) + " code paths, " +
        llvm::Twine(separate / 1024) + " KiB as separate plans)");
  return 0;
}
