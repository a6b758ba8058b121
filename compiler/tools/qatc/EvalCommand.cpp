//===- EvalCommand.cpp - `qatc eval` --------------------------------------===//
//
// Runs the reference evaluator on a model:
//
//   qatc eval m.onnx --input x.npy [--input name=y.npy | --input in.npz]
//                    [-o out.npz] [--dump-tensors DIR] [--fp64]
//                    [--stage onnx|qat] [--layerwise REFDIR]
//                    [--batch-size N] [--labels y.npy]
//
// Dynamic dimensions take their sizes from the data. Data with more rows
// than one evaluation takes (a fixed batch, or --batch-size) is evaluated in
// chunks whose outputs are concatenated; with --labels the first output's
// top-1 accuracy is printed.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "qatc/Reference/Evaluator.h"
#include "qatc/Reference/TensorIO.h"
#include "qatc/Support/Locations.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

using namespace mlir;
using namespace qatc;
using namespace qatc::ref;
using namespace qatc::driver;
namespace cl = llvm::cl;

cl::SubCommand
    qatc::driver::evalCommand("eval",
                              "Evaluate a model with the reference evaluator");

namespace {
cl::SubCommand &sub = qatc::driver::evalCommand;
cl::opt<std::string> modelPath(cl::Positional, cl::desc("<model.onnx|.mlir>"),
                               cl::Required, cl::sub(sub));
cl::list<std::string> inputSpecs(
    "input",
    cl::desc("Input data: file.npy (graph inputs in order), name=file.npy, or "
             "an .npz holding arrays named after the inputs (repeatable)"),
    cl::value_desc("[name=]file"), cl::sub(sub));
cl::opt<std::string> outputPath(
    "o", cl::desc("Write the outputs to this .npz (or .npy for one output)"),
    cl::value_desc("file"), cl::sub(sub));
cl::opt<std::string> dumpDir(
    "dump-tensors",
    cl::desc("Write every intermediate tensor to DIR as <name>.npy, with "
             "DIR/index.txt mapping file names to ONNX tensor names"),
    cl::value_desc("DIR"), cl::sub(sub));
cl::opt<bool> fp64("fp64",
                   cl::desc("Compute in float64 (to measure the fp32 noise "
                            "floor of a Q/DQ model)"),
                   cl::sub(sub));
cl::opt<std::string> stage(
    "stage",
    cl::desc("Which form of an ONNX model to evaluate: onnx (the graph as "
             "written, the default) or qat (after the quantization passes, "
             "as `qatc compile --emit=qat` produces it)"),
    cl::value_desc("onnx|qat"), cl::init("onnx"), cl::sub(sub));
cl::opt<std::string> layerwiseDir(
    "layerwise",
    cl::desc("Evaluate one layer at a time: every op reads the tensors of "
             "this dump directory (another evaluation's --dump-tensors) "
             "instead of its own, so each layer's dumped output shows only "
             "its own error"),
    cl::value_desc("DIR"), cl::sub(sub));
cl::opt<int64_t> batchSize(
    "batch-size",
    cl::desc("Rows of the input data per evaluation when the model's batch "
             "dimension is dynamic (default: all rows; a fixed batch is "
             "always used as is)"),
    cl::init(0), cl::sub(sub));
cl::opt<std::string> labelsPath(
    "labels",
    cl::desc("Integer class labels (.npy, one per row): print the first "
             "output's top-1 accuracy"),
    cl::value_desc("file.npy"), cl::sub(sub));
cl::opt<unsigned> threads(
    "threads",
    cl::desc("Evaluate batches on this many threads (default: every core)"),
    cl::init(std::max(1u, std::thread::hardware_concurrency())), cl::sub(sub));
ImportCLOptions importOptions(sub);

int fail(const llvm::Twine &message) {
  llvm::errs() << "qatc eval: " << message << "\n";
  return 1;
}

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

/// Binds the --input arguments to the graph inputs `names`.
FailureOr<std::vector<Tensor>> bindInputs(func::FuncOp func,
                                          ArrayRef<std::string> names) {
  auto inputs = readInputSpecs(inputSpecs, names, "eval");
  if (failed(inputs))
    return failure();
  std::vector<Tensor> given;
  for (auto [i, t] : llvm::enumerate(*inputs)) {
    if (!t) {
      emitError(func.getArgument(i).getLoc())
          << "no data given; pass --input " << names[i] << "=file.npy";
      return failure();
    }
    given.push_back(*t);
  }
  return given;
}

/// Concatenates tensors along axis 0.
Tensor concatRows(ArrayRef<Tensor> parts) {
  SmallVector<int64_t> shape(parts.front().shape());
  shape[0] = 0;
  for (const Tensor &p : parts)
    shape[0] += p.dim(0);
  Tensor out(parts.front().dtype(), shape);
  size_t offset = 0;
  for (const Tensor &p : parts) {
    std::memcpy(out.mutableData<char>() + offset, p.bytes(), p.byteSize());
    offset += p.byteSize();
  }
  return out;
}

/// Evaluates the model on data whose rows may span several evaluations.
class ChunkedEvaluator {
public:
  ChunkedEvaluator(MLIRContext &ctx) : ctx(ctx) {}

  /// Imports (or re-imports) the model with `rows` rows for every input
  /// whose batch dimension is dynamic; runs the qat pipeline if asked.
  FailureOr<ModuleOp> moduleFor(ArrayRef<Tensor> inputs) {
    SmallVector<const Tensor *> data;
    for (const Tensor &t : inputs)
      data.push_back(&t);
    auto shapes = shapesFromData(firstFunc, data, /*keepBatch=*/false);
    std::string key;
    for (auto &[name, dims] : shapes)
      for (int64_t d : dims)
        key += name + ":" + std::to_string(d) + ",";
    auto it = modules.find(key);
    if (it != modules.end())
      return it->second.get();
    OwningOpRef<ModuleOp> module;
    if (shapes.empty() && first && !firstIsSignature) {
      module = std::move(first);
    } else {
      module = loadModel(ctx, modelPath, importOptions, "eval",
                         [&](ImportOptions &o) {
                           o.quietDynamicDims = true;
                           for (auto &[name, dims] : shapes)
                             o.inputShapes.emplace(name, dims);
                         });
      if (!module)
        return failure();
    }
    if (stage == "qat") {
      PassManager pm(&ctx, ModuleOp::getOperationName());
      buildCompilePipeline(pm, {});
      if (failed(pm.run(*module)))
        return failure();
    }
    ModuleOp result = *module;
    modules[key] = std::move(module);
    return result;
  }

  /// The model as first read: its signature only, when it is ONNX (the
  /// graph may not import until the data gives the dynamic sizes).
  OwningOpRef<ModuleOp> first;
  bool firstIsSignature = false;
  func::FuncOp firstFunc;
  std::vector<std::string> names;

private:
  MLIRContext &ctx;
  std::map<std::string, OwningOpRef<ModuleOp>> modules;
};

} // namespace

int qatc::driver::runEval() {
  DialectRegistry registry;
  registerImportDialects(registry);
  MLIRContext ctx(registry);
  ctx.printOpOnDiagnostic(false);
  OnnxDiagnosticHandler handler(&ctx, llvm::errs());
  if (stage != "onnx" && stage != "qat")
    return fail("--stage=" + stage + " is not one of onnx, qat");
  if (batchSize < 0)
    return fail("--batch-size must be positive");
  // Dynamic dimensions take their sizes from the data, so no warning about
  // setting them to 1.
  ChunkedEvaluator chunks(ctx);
  chunks.firstIsSignature = !StringRef(modelPath).ends_with(".mlir") &&
                            !StringRef(modelPath).ends_with(".mlirbc");
  chunks.first =
      loadModel(ctx, modelPath, importOptions, "eval", [](ImportOptions &o) {
        o.quietDynamicDims = true;
        o.signatureOnly = true;
      });
  if (!chunks.first)
    return 1;
  chunks.firstFunc = getMainFunction(*chunks.first);
  if (!chunks.firstFunc)
    return fail(modelPath + ": no function to evaluate");
  func::FuncOp func = chunks.firstFunc;
  chunks.names = getInputNames(func);
  auto given = bindInputs(func, chunks.names);
  if (failed(given))
    return 1;

  // Rows per evaluation: the model's fixed batch, else --batch-size, else
  // all the data.
  bool dynamicBatch = false;
  if (auto dynamic = func->getAttrOfType<ArrayAttr>(kDynamicInputDimsAttr))
    dynamicBatch = llvm::all_of(dynamic, [](Attribute a) {
      return llvm::is_contained(cast<DenseI64ArrayAttr>(a).asArrayRef(), 0);
    });
  // (A model without graph inputs, or with empty data, runs once.)
  RankedTensorType argType =
      func.getNumArguments()
          ? cast<RankedTensorType>(func.getArgument(0).getType())
          : RankedTensorType::get({}, Float32Type::get(&ctx));
  int64_t rows =
      !given->empty() && given->front().rank() > 0 ? given->front().dim(0) : 1;
  int64_t chunk = argType.getRank() == 0 ? rows
                  : !dynamicBatch        ? argType.getDimSize(0)
                  : batchSize            ? batchSize
                                         : rows;
  // Only data that differs from the model's input in its batch dimension is
  // split; anything else reaches the evaluator, which names the mismatch.
  bool chunked =
      argType.getRank() > 0 && chunk > 0 &&
      given->front().rank() == argType.getRank() &&
      given->front().shape().drop_front() == argType.getShape().drop_front() &&
      chunk < rows;
  if (chunked) {
    if (!dynamicBatch && rows % chunk != 0)
      return fail(Twine(rows) + " rows of data do not split into batches of " +
                  Twine(chunk) + " (the model's fixed batch)");
    for (const Tensor &t : *given)
      if (t.rank() == 0 || t.dim(0) != rows)
        return fail("every input must have the same number of rows to be "
                    "evaluated in batches");
    if (!dumpDir.empty() || !layerwiseDir.empty())
      return fail("--dump-tensors and --layerwise need the data in one "
                  "evaluation (use --batch-size " +
                  Twine(rows) + ")");
  }

  std::optional<TensorDumper> dumper;
  if (!dumpDir.empty()) {
    auto d = TensorDumper::create(dumpDir);
    if (!d)
      return fail(llvm::toString(d.takeError()));
    dumper.emplace(std::move(*d));
  }
  EvalOptions options;
  options.fp64 = fp64;
  std::string dumpError;
  if (dumper)
    options.onTensor = [&](StringRef name, const Tensor &t) {
      if (!dumpError.empty())
        return;
      if (llvm::Error e = dumper->add(name, t))
        dumpError = llvm::toString(std::move(e));
    };
  llvm::StringMap<Tensor> reference;
  if (!layerwiseDir.empty()) {
    auto tensors = readTensors(layerwiseDir);
    if (!tensors)
      return fail("--layerwise: " + llvm::toString(tensors.takeError()));
    for (auto &[name, t] : *tensors)
      reference[name] = t;
    options.substitute = [&](StringRef name) -> const Tensor * {
      auto it = reference.find(name);
      return it == reference.end() ? nullptr : &it->second;
    };
  }

  auto start = std::chrono::steady_clock::now();
  // The chunks' inputs and modules (imported here: one per distinct shape),
  // then the evaluations, spread over threads (each evaluation only reads
  // its module).
  std::vector<std::vector<Tensor>> chunkInputs;
  std::vector<ModuleOp> chunkModules;
  int64_t step = chunked ? chunk : 1;
  for (int64_t first = 0; first < (chunked ? rows : 1); first += step) {
    std::vector<Tensor> inputs = *given;
    if (chunked)
      for (Tensor &t : inputs)
        t = sliceRows(t, first, std::min(chunk, rows - first));
    auto module = chunks.moduleFor(inputs);
    if (failed(module))
      return 1;
    chunkInputs.push_back(std::move(inputs));
    chunkModules.push_back(*module);
  }
  std::vector<std::string> outNames =
      getOutputNames(getMainFunction(chunkModules.front()));
  std::vector<std::vector<Tensor>> parts(chunkInputs.size());
  std::atomic<size_t> nextChunk{0};
  std::atomic<bool> failedAny{false};
  auto worker = [&] {
    for (size_t c = nextChunk++; c < parts.size() && !failedAny;
         c = nextChunk++) {
      auto outputs = evaluate(chunkModules[c], chunkInputs[c], options);
      if (failed(outputs)) {
        failedAny = true;
        return;
      }
      parts[c] = std::move(*outputs);
    }
  };
  unsigned workers =
      std::max(1u, std::min<unsigned>(threads, chunkInputs.size()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < workers; ++t)
    pool.emplace_back(worker);
  worker();
  for (std::thread &t : pool)
    t.join();
  if (failedAny)
    return 1;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::vector<Tensor> outputs;
  for (size_t o = 0; o < parts.front().size(); ++o) {
    std::vector<Tensor> pieces;
    for (auto &p : parts) {
      if (parts.size() > 1 && p[o].rank() == 0)
        return fail("output '" + outNames[o] +
                    "' has no batch axis; evaluate the data in one batch");
      pieces.push_back(p[o]);
    }
    outputs.push_back(pieces.size() == 1 ? pieces.front() : concatRows(pieces));
  }
  if (dumper) {
    if (dumpError.empty())
      if (llvm::Error e = dumper->finish())
        dumpError = llvm::toString(std::move(e));
    if (!dumpError.empty())
      return fail("--dump-tensors: " + dumpError);
  }
  llvm::outs() << "evaluated " << modelPath
               << (stage == "qat" ? " (qat stage)" : "")
               << (fp64 ? " in float64" : "");
  if (chunked)
    llvm::outs() << " in " << parts.size() << " batches of " << chunk;
  llvm::outs() << " in " << llvm::format("%.3f", seconds) << " s\n";
  NamedTensors named;
  for (auto [name, t] : llvm::zip(outNames, outputs)) {
    summarize(llvm::outs(), name, t);
    named.emplace_back(name, t);
  }
  if (dumper)
    llvm::outs() << "wrote " << dumper->count() << " tensors to " << dumpDir
                 << "\n";
  if (!outputPath.empty()) {
    if (llvm::Error e = writeTensors(outputPath, named))
      return fail(llvm::toString(std::move(e)));
    llvm::outs() << "wrote " << outputPath << "\n";
  }
  if (!labelsPath.empty())
    return printTop1Accuracy(outputs.front(), labelsPath, "eval");
  return 0;
}
