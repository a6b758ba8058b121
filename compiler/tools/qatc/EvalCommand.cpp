//===- EvalCommand.cpp - `qatc eval` --------------------------------------===//
//
// Runs the reference evaluator on a model:
//
//   qatc eval m.onnx --input x.npy [--input name=y.npy | --input in.npz]
//                    [-o out.npz] [--dump-tensors DIR] [--fp64]
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "qatc/Reference/Evaluator.h"
#include "qatc/Reference/TensorIO.h"
#include "qatc/Support/Locations.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"

#include <chrono>
#include <cmath>

using namespace mlir;
using namespace qatc;
using namespace qatc::ref;
namespace cl = llvm::cl;

cl::SubCommand
    qatc::driver::evalCommand("eval",
                              "Evaluate a model with the reference evaluator");

namespace {
cl::opt<std::string> modelPath(cl::Positional, cl::desc("<model.onnx|.mlir>"),
                               cl::Required,
                               cl::sub(qatc::driver::evalCommand));
cl::list<std::string> inputSpecs(
    "input",
    cl::desc("Input data: file.npy (graph inputs in order), name=file.npy, or "
             "an .npz holding arrays named after the inputs (repeatable)"),
    cl::value_desc("[name=]file"), cl::sub(qatc::driver::evalCommand));
cl::opt<std::string> outputPath(
    "o", cl::desc("Write the outputs to this .npz (or .npy for one output)"),
    cl::value_desc("file"), cl::sub(qatc::driver::evalCommand));
cl::opt<std::string> dumpDir(
    "dump-tensors",
    cl::desc("Write every intermediate tensor to DIR as <name>.npy, with "
             "DIR/index.txt mapping file names to ONNX tensor names"),
    cl::value_desc("DIR"), cl::sub(qatc::driver::evalCommand));
cl::opt<bool> fp64("fp64",
                   cl::desc("Compute in float64 (to measure the fp32 noise "
                            "floor of a Q/DQ model)"),
                   cl::sub(qatc::driver::evalCommand));
cl::opt<std::string> stage(
    "stage",
    cl::desc("Which form of an ONNX model to evaluate: onnx (the graph as "
             "written, the default) or qat (after the quantization passes, "
             "as `qatc compile --emit=qat` produces it)"),
    cl::value_desc("onnx|qat"), cl::init("onnx"),
    cl::sub(qatc::driver::evalCommand));
cl::opt<std::string> layerwiseDir(
    "layerwise",
    cl::desc("Evaluate one layer at a time: every op reads the tensors of "
             "this dump directory (another evaluation's --dump-tensors) "
             "instead of its own, so each layer's dumped output shows only "
             "its own error"),
    cl::value_desc("DIR"), cl::sub(qatc::driver::evalCommand));
ImportCLOptions importOptions(qatc::driver::evalCommand);

/// Prints a one-line summary of an output tensor.
void summarize(llvm::raw_ostream &os, StringRef name, const Tensor &t) {
  os << "  " << name << "  " << t.describe();
  if (t.numElements() == 0) {
    os << "\n";
    return;
  }
  Tensor d = castTensor(t, DType::F64);
  const double *p = d.data<double>();
  double lo = p[0], hi = p[0], sum = 0;
  int64_t arg = 0;
  for (int64_t i = 0; i < d.numElements(); ++i) {
    lo = std::min(lo, p[i]);
    if (p[i] > hi) {
      hi = p[i];
      arg = i;
    }
    sum += p[i];
  }
  os << "  min " << llvm::format("%.6g", lo) << "  max "
     << llvm::format("%.6g", hi) << "  mean "
     << llvm::format("%.6g", sum / d.numElements());
  bool classifier = t.rank() == 2 && t.dim(0) == 1 && isFloat(t.dtype());
  if (classifier)
    os << "  argmax " << arg;
  os << "\n";
}
} // namespace

int qatc::driver::runEval() {
  DialectRegistry registry;
  registerImportDialects(registry);
  MLIRContext ctx(registry);
  ctx.printOpOnDiagnostic(false);
  OnnxDiagnosticHandler handler(&ctx, llvm::errs());
  if (stage != "onnx" && stage != "qat") {
    llvm::errs() << "qatc eval: --stage=" << stage
                 << " is not one of onnx, qat\n";
    return 2;
  }
  // Dynamic dimensions take their sizes from the data, so no warning about
  // setting them to 1.
  auto quiet = [](ImportOptions &o) { o.quietDynamicDims = true; };
  OwningOpRef<ModuleOp> module =
      loadModel(ctx, modelPath, importOptions, "eval", quiet);
  if (!module)
    return 1;
  func::FuncOp func = getMainFunction(*module);
  if (!func) {
    llvm::errs() << modelPath << ": error: no function to evaluate\n";
    return 1;
  }
  std::vector<std::string> names = getInputNames(func);
  std::vector<std::optional<Tensor>> inputs(names.size());

  // Bind --input arguments: named, .npz by name, or positional .npy.
  auto indexOf = [&](StringRef name) -> int {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name)
        return static_cast<int>(i);
    return -1;
  };
  auto bind = [&](int i, Tensor t, StringRef spec) {
    if (inputs[i]) {
      llvm::errs() << "qatc eval: --input " << spec << ": graph input '"
                   << names[i] << "' is already given\n";
      return false;
    }
    inputs[i] = std::move(t);
    return true;
  };
  size_t nextPositional = 0;
  for (const std::string &spec : inputSpecs) {
    auto [lhs, rhs] = StringRef(spec).split('=');
    bool named = !rhs.empty() && !llvm::sys::fs::exists(spec);
    StringRef file = named ? rhs : StringRef(spec);
    // The graph input a positional .npy is for, to name it in errors.
    while (nextPositional < names.size() && inputs[nextPositional])
      ++nextPositional;
    std::string target =
        named ? lhs.str()
        : !file.ends_with(".npz") && nextPositional < names.size()
            ? names[nextPositional]
            : std::string();
    auto tensors = readTensors(file);
    if (!tensors) {
      llvm::errs() << "qatc eval: --input " << spec
                   << (target.empty() || named
                           ? ""
                           : " (for graph input '" + target + "')")
                   << ": " << llvm::toString(tensors.takeError()) << "\n";
      return 1;
    }
    if (named) {
      int i = indexOf(lhs);
      if (i < 0) {
        llvm::errs() << "qatc eval: --input " << spec << ": the model has no "
                     << "graph input '" << lhs
                     << "' (inputs: " << llvm::join(names, ", ") << ")\n";
        return 1;
      }
      if (tensors->size() != 1) {
        llvm::errs() << "qatc eval: --input " << spec << ": the file holds "
                     << tensors->size() << " arrays; give one .npy per input\n";
        return 1;
      }
      if (!bind(i, tensors->front().second, spec))
        return 1;
    } else if (file.ends_with(".npz")) {
      for (auto &[name, t] : *tensors) {
        int i = indexOf(name);
        if (i < 0) {
          llvm::errs() << "qatc eval: --input " << spec << ": array '" << name
                       << "' names no graph input (inputs: "
                       << llvm::join(names, ", ") << ")\n";
          return 1;
        }
        if (!bind(i, t, spec))
          return 1;
      }
    } else {
      if (nextPositional >= names.size()) {
        llvm::errs() << "qatc eval: --input " << spec
                     << ": more inputs than the model's " << names.size()
                     << "\n";
        return 1;
      }
      bind(nextPositional++, tensors->front().second, spec);
    }
  }
  SmallVector<Tensor> given;
  for (auto [i, t] : llvm::enumerate(inputs)) {
    if (!t) {
      emitError(func.getArgument(i).getLoc())
          << "no data given; pass --input " << names[i] << "=file.npy";
      return 1;
    }
    given.push_back(*t);
  }

  // Re-import with the data's sizes for the dimensions the model leaves
  // dynamic.
  if (auto dynamic = func->getAttrOfType<ArrayAttr>(kDynamicInputDimsAttr)) {
    std::map<std::string, std::vector<int64_t>> shapes;
    for (auto [i, attr] : llvm::enumerate(dynamic)) {
      auto dims = cast<DenseI64ArrayAttr>(attr).asArrayRef();
      auto argType = cast<RankedTensorType>(func.getArgument(i).getType());
      if (dims.empty() || given[i].rank() != argType.getRank() ||
          given[i].shape() == argType.getShape())
        continue;
      shapes[names[i]] = std::vector<int64_t>(given[i].shape().begin(),
                                              given[i].shape().end());
    }
    if (!shapes.empty()) {
      module = loadModel(ctx, modelPath, importOptions, "eval",
                         [&](ImportOptions &o) {
                           o.quietDynamicDims = true;
                           for (auto &[name, dims] : shapes)
                             o.inputShapes.emplace(name, dims);
                         });
      if (!module)
        return 1;
      func = getMainFunction(*module);
    }
  }
  if (stage == "qat") {
    PassManager pm(&ctx, ModuleOp::getOperationName());
    buildCompilePipeline(pm, {});
    if (failed(pm.run(*module)))
      return 1;
    func = getMainFunction(*module);
  }

  std::optional<TensorDumper> dumper;
  if (!dumpDir.empty()) {
    auto d = TensorDumper::create(dumpDir);
    if (!d) {
      llvm::errs() << "qatc eval: " << llvm::toString(d.takeError()) << "\n";
      return 1;
    }
    dumper.emplace(std::move(*d));
  }
  EvalOptions options;
  options.fp64 = fp64;
  llvm::StringMap<Tensor> reference;
  if (!layerwiseDir.empty()) {
    auto tensors = readTensors(layerwiseDir);
    if (!tensors) {
      llvm::errs() << "qatc eval: --layerwise: "
                   << llvm::toString(tensors.takeError()) << "\n";
      return 1;
    }
    for (auto &[name, t] : *tensors)
      reference[name] = t;
    options.substitute = [&](StringRef name) -> const Tensor * {
      auto it = reference.find(name);
      return it == reference.end() ? nullptr : &it->second;
    };
  }
  std::string dumpError;
  if (dumper)
    options.onTensor = [&](StringRef name, const Tensor &t) {
      if (!dumpError.empty())
        return;
      if (llvm::Error e = dumper->add(name, t))
        dumpError = llvm::toString(std::move(e));
    };
  auto start = std::chrono::steady_clock::now();
  auto outputs = evaluate(*module, given, options);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (failed(outputs))
    return 1;
  if (dumper) {
    if (dumpError.empty())
      if (llvm::Error e = dumper->finish())
        dumpError = llvm::toString(std::move(e));
    if (!dumpError.empty()) {
      llvm::errs() << "qatc eval: --dump-tensors: " << dumpError << "\n";
      return 1;
    }
  }
  std::vector<std::string> outNames = getOutputNames(func);
  llvm::outs() << "evaluated " << modelPath << (fp64 ? " in float64" : "")
               << " in " << llvm::format("%.3f", seconds) << " s\n";
  NamedTensors named;
  for (auto [name, t] : llvm::zip(outNames, *outputs)) {
    summarize(llvm::outs(), name, t);
    named.emplace_back(name, t);
  }
  if (dumper)
    llvm::outs() << "wrote " << dumper->count() << " tensors to " << dumpDir
                 << "\n";
  if (!outputPath.empty()) {
    if (llvm::Error e = writeTensors(outputPath, named)) {
      llvm::errs() << "qatc eval: " << llvm::toString(std::move(e)) << "\n";
      return 1;
    }
    llvm::outs() << "wrote " << outputPath << "\n";
  }
  return 0;
}
