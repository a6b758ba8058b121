//===- QuantizeCommand.cpp - `qatc quantize` ------------------------------===//
//
//   qatc quantize m_fp32.onnx -o m_qdq.onnx --recipe trt|tf
//        --calib FILE|DIR --calib-method max|percentile|entropy|mse
//        [--percentile 99.99] [--include-nodes RE] [--exclude-nodes RE]
//        [--include-op-types T,...] [--exclude-op-types T,...]
//        [--include-patterns A>B] [--exclude-patterns A>B]
//        [--residual-policy last|longest] [--calib-cache FILE]
//        [--write-calib-cache FILE] [--threads N]
//
// Post-training quantization of a float model: place Q/DQ by a recipe,
// calibrate activation scales on sample data with the reference evaluator
// (or read them from a TensorRT calibration cache), and write the original
// model with the Q/DQ nodes inserted, ready for ONNX Runtime or TensorRT.
// Given a model that already holds Q/DQ nodes and --write-calib-cache, it
// writes the model's own activation scales as a calibration cache instead.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "qatc/Quantization/CalibrationCache.h"
#include "qatc/Quantization/Calibrator.h"
#include "qatc/Quantization/Recipe.h"
#include "qatc/Reference/Evaluator.h"
#include "qatc/Reference/TensorIO.h"
#include "qatc/Support/Locations.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"

#include <set>

using namespace mlir;
using namespace qatc;
using namespace qatc::quantization;
namespace cl = llvm::cl;

cl::SubCommand qatc::driver::quantizeCommand(
    "quantize", "Insert Q/DQ into a float model (post-training quantization)");

namespace {
cl::SubCommand &sub = qatc::driver::quantizeCommand;
cl::opt<std::string> modelPath(cl::Positional, cl::desc("<model.onnx>"),
                               cl::Required, cl::sub(sub));
cl::opt<std::string> outputPath("o", cl::desc("The quantized model"),
                                cl::value_desc("file.onnx"), cl::sub(sub));
cl::opt<std::string> recipe("recipe",
                            cl::desc("Q/DQ placement: trt (inputs and "
                                     "weights) or tf (outputs and weights)"),
                            cl::init("trt"), cl::sub(sub));
cl::opt<std::string> calibData(
    "calib",
    cl::desc("Calibration data: .npy (batch of inputs), .npz (one array per "
             "input) or a directory of them"),
    cl::value_desc("FILE|DIR"), cl::sub(sub));
cl::opt<std::string> calibMethod("calib-method",
                                 cl::desc("max, percentile, entropy or mse"),
                                 cl::init("max"), cl::sub(sub));
cl::opt<double> percentile("percentile",
                           cl::desc("Percentile for --calib-method=percentile"),
                           cl::init(99.99), cl::sub(sub));
cl::list<std::string> includeNodes(
    "include-nodes",
    cl::desc("Quantize only nodes whose name matches (regex, repeatable)"),
    cl::sub(sub));
cl::list<std::string> excludeNodes(
    "exclude-nodes",
    cl::desc("Leave nodes whose name matches float (regex, repeatable)"),
    cl::sub(sub));
cl::list<std::string> includeOpTypes("include-op-types",
                                     cl::desc("Quantize only these op types"),
                                     cl::CommaSeparated, cl::sub(sub));
cl::list<std::string> excludeOpTypes("exclude-op-types",
                                     cl::desc("Leave these op types float"),
                                     cl::CommaSeparated, cl::sub(sub));
cl::list<std::string> includePatterns(
    "include-patterns",
    cl::desc("Quantize only chains like Conv>Relu (repeatable)"), cl::sub(sub));
cl::list<std::string>
    excludePatterns("exclude-patterns",
                    cl::desc("Leave chains like Conv>Relu float (repeatable)"),
                    cl::sub(sub));
cl::opt<std::string> residualPolicy(
    "residual-policy",
    cl::desc("Add of two conv branches: which one stays float (last or "
             "longest)"),
    cl::init("last"), cl::sub(sub));
cl::opt<std::string> calibCache(
    "calib-cache",
    cl::desc("Read activation scales from a TensorRT calibration cache "
             "instead of calibrating"),
    cl::value_desc("file"), cl::sub(sub));
cl::opt<std::string> writeCalibCache(
    "write-calib-cache",
    cl::desc("Write the activation scales as a TensorRT calibration cache"),
    cl::value_desc("file"), cl::sub(sub));
cl::opt<std::string> cacheHeader(
    "calib-cache-header",
    cl::desc("Header line of the written cache (TensorRT ignores a cache "
             "whose version or algorithm differs from its own)"),
    cl::init("TRT-8601-EntropyCalibration2"), cl::sub(sub));
cl::opt<unsigned> threads("threads", cl::desc("Calibration threads"),
                          cl::init(2), cl::sub(sub));
ImportCLOptions importOptions(sub);

int usage(const llvm::Twine &message) {
  llvm::errs() << "qatc quantize: " << message << "\n";
  return 2;
}

/// Reads a calibration cache into `scales`; reports tensors the model does
/// not have by name.
LogicalResult readCache(ModuleOp module, ScaleTable &scales,
                        const std::set<std::string> &modelTensors) {
  std::string error;
  auto cache = calib::CalibrationCache::readFile(calibCache, error);
  if (!cache)
    return module.emitError() << error;
  std::vector<std::string> unknown;
  for (const calib::CalibrationCache::Entry &e : cache->entries) {
    scales[e.name] = e.scale;
    if (!modelTensors.count(e.name))
      unknown.push_back(e.name);
  }
  if (!unknown.empty()) {
    llvm::errs() << "qatc quantize: warning: " << calibCache << " names "
                 << unknown.size() << " tensor"
                 << (unknown.size() > 1 ? "s" : "")
                 << " the model does not have: ";
    for (size_t i = 0; i < unknown.size() && i < 10; ++i)
      llvm::errs() << (i ? ", " : "") << "'" << unknown[i] << "'";
    llvm::errs() << (unknown.size() > 10 ? ", ..." : "") << "\n";
  }
  return success();
}

int writeCache(const ScaleTable &scales) {
  calib::CalibrationCache cache;
  cache.header = cacheHeader;
  for (const auto &[name, scale] : scales)
    cache.entries.push_back({name, scale});
  std::string error;
  auto out = openOutputFile(writeCalibCache, &error);
  if (!out) {
    llvm::errs() << "qatc quantize: " << error << "\n";
    return 1;
  }
  out->os() << cache.write();
  out->keep();
  llvm::outs() << "wrote " << scales.size() << " scales to " << writeCalibCache
               << "\n";
  return 0;
}

/// A Q/DQ model's activation scales: every per-tensor QuantizeLinear of a
/// computed tensor, keyed by the tensor it quantizes.
ScaleTable scalesOfQdqModel(ModuleOp module) {
  ScaleTable scales;
  module.walk([&](onnx::QuantizeLinearOp q) {
    if (q.getX().getDefiningOp<onnx::ConstantOp>())
      return; // a weight
    auto cst = q.getYScale().getDefiningOp<onnx::ConstantOp>();
    auto dense =
        cst ? dyn_cast<DenseElementsAttr>(cst.getValue()) : DenseElementsAttr();
    if (!dense || dense.getNumElements() != 1 ||
        !dense.getElementType().isF32())
      return;
    std::string name;
    if (auto arg = dyn_cast<BlockArgument>(q.getX())) {
      auto names = ref::getInputNames(ref::getMainFunction(module));
      name = names[arg.getArgNumber()];
    } else if (auto attr = q.getX().getDefiningOp()->getAttrOfType<ArrayAttr>(
                   kOutputNamesAttr)) {
      name = cast<StringAttr>(attr[cast<OpResult>(q.getX()).getResultNumber()])
                 .str();
    }
    if (!name.empty())
      scales[name] = *dense.getValues<float>().begin();
  });
  return scales;
}

/// Sizes for the dynamic dimensions other than the batch, taken from the
/// first calibration file (the batch stays as imported: calibration
/// evaluates one sample at a time).
std::map<std::string, std::vector<int64_t>>
shapesFromCalibration(func::FuncOp func) {
  // Only read the data when a dimension other than the batch is dynamic.
  auto dynamic = func->getAttrOfType<ArrayAttr>(kDynamicInputDimsAttr);
  if (!dynamic || llvm::all_of(dynamic, [](Attribute a) {
        return llvm::all_of(cast<DenseI64ArrayAttr>(a).asArrayRef(),
                            [](int64_t d) { return d == 0; });
      }))
    return {};
  auto files = listCalibrationFiles(calibData);
  if (calibData.empty() || !files) {
    if (!files)
      llvm::consumeError(files.takeError()); // reported when loading
    return {};
  }
  auto tensors = ref::readTensors(files->front());
  if (!tensors) {
    llvm::consumeError(tensors.takeError()); // reported when loading
    return {};
  }
  std::vector<std::string> names = ref::getInputNames(func);
  std::vector<const ref::Tensor *> data(names.size(), nullptr);
  for (auto [i, name] : llvm::enumerate(names))
    for (auto &[arrayName, t] : *tensors)
      if (arrayName == name || (tensors->size() == 1 && names.size() == 1))
        data[i] = &t;
  return qatc::driver::shapesFromData(func, data, /*keepBatch=*/true);
}

} // namespace

int qatc::driver::runQuantize() {
  RecipeOptions options;
  std::string error = parseRecipeOptions(
      recipe, residualPolicy, includeNodes, excludeNodes, includeOpTypes,
      excludeOpTypes, includePatterns, excludePatterns, options);
  if (!error.empty())
    return usage(error);
  calib::Method method;
  if (std::string e = calib::parseMethod(calibMethod, method); !e.empty())
    return usage("--calib-method: " + e);
  if (!(percentile > 0 && percentile <= 100))
    return usage("--percentile must be in (0, 100]");

  DialectRegistry registry;
  registerImportDialects(registry);
  MLIRContext ctx(registry);
  ctx.printOpOnDiagnostic(false);
  OnnxDiagnosticHandler handler(&ctx, llvm::errs());
  // Calibration evaluates one sample (batch 1) at a time; the written model
  // keeps its dynamic dimensions, so no warning about them.
  // Dynamic image sizes and the like come from the calibration data: read
  // the signature first (the graph may not import with those sizes at 1).
  OwningOpRef<ModuleOp> signature = loadModel(ctx, modelPath, importOptions,
                                              "quantize", [](ImportOptions &o) {
                                                o.quietDynamicDims = true;
                                                o.signatureOnly = true;
                                              });
  if (!signature)
    return 1;
  auto shapes = shapesFromCalibration(ref::getMainFunction(*signature));
  OwningOpRef<ModuleOp> module = loadModel(
      ctx, modelPath, importOptions, "quantize", [&](ImportOptions &o) {
        o.quietDynamicDims = true;
        for (auto &[name, dims] : shapes)
          o.inputShapes.emplace(name, dims);
      });
  if (!module)
    return 1;

  bool hasQdq = false;
  module->walk([&](onnx::QuantizeLinearOp) { hasQdq = true; });
  if (hasQdq && !writeCalibCache.empty() && outputPath.empty()) {
    ScaleTable scales = scalesOfQdqModel(*module);
    return writeCache(scales);
  }
  if (outputPath.empty())
    return usage("give the output model with -o FILE.onnx");

  auto decision = decideRecipe(*module, options);
  if (failed(decision))
    return 1;
  std::vector<std::string> tensors = tensorsToCalibrate(*decision);

  ScaleTable scales;
  if (!calibCache.empty()) {
    std::set<std::string> modelTensors;
    func::FuncOp func = ref::getMainFunction(*module);
    for (const std::string &n : ref::getInputNames(func))
      modelTensors.insert(n);
    module->walk([&](Operation *op) {
      if (auto names = op->getAttrOfType<ArrayAttr>(kOutputNamesAttr))
        for (Attribute n : names)
          modelTensors.insert(cast<StringAttr>(n).str());
    });
    if (failed(readCache(*module, scales, modelTensors)))
      return 1;
  } else if (!calibData.empty()) {
    func::FuncOp func = ref::getMainFunction(*module);
    std::vector<std::vector<int64_t>> shapes;
    for (Type t : func.getArgumentTypes()) {
      auto shape = cast<RankedTensorType>(t).getShape();
      shapes.emplace_back(shape.begin(), shape.end());
    }
    auto samples =
        loadCalibrationData(calibData, ref::getInputNames(func), shapes);
    if (!samples) {
      llvm::errs() << "qatc quantize: --calib "
                   << llvm::toString(samples.takeError()) << "\n";
      return 1;
    }
    llvm::outs() << "calibrating " << tensors.size() << " tensors on "
                 << samples->size() << " samples (" << calibMethod
                 << (method == calib::Method::Percentile
                         ? " " +
                               llvm::formatv("{0}", percentile.getValue()).str()
                         : std::string())
                 << ", " << threads << " threads)\n";
    llvm::outs().flush();
    CalibratorOptions calibOptions;
    calibOptions.method = method;
    calibOptions.percentile = percentile;
    calibOptions.threads = threads;
    auto result = calibrate(*module, *samples, tensors, calibOptions);
    if (failed(result))
      return 1;
    scales = result->scales;
    llvm::outs() << "calibrated in " << llvm::format("%.1f", result->seconds)
                 << " s\n";
  } else {
    return usage("give calibration data (--calib FILE|DIR) or a calibration "
                 "cache (--calib-cache FILE)");
  }

  auto plan = buildPlan(*module, *decision, scales);
  if (failed(plan))
    return 1;
  std::string out;
  int64_t convertedFrom = 0;
  {
    llvm::raw_string_ostream os(out);
    if (failed(applyQdqPlan(ctx, modelPath, *plan, os, &convertedFrom)))
      return 1;
  }
  auto file = openOutputFile(outputPath, &error);
  if (!file) {
    llvm::errs() << "qatc quantize: " << error << "\n";
    return 1;
  }
  file->os() << out;
  file->keep();

  // What was inserted, by the op type that consumes it.
  size_t weights = 0, activations = 0;
  for (const QdqInsertion &ins : plan->insertions)
    (ins.isWeight ? weights : activations)++;
  llvm::outs() << "wrote " << outputPath << ": " << activations
               << " activation Q/DQ pairs, " << weights
               << " quantized weights (recipe " << recipe << ")";
  if (!decision->excluded.empty())
    llvm::outs() << "; " << decision->excluded.size()
                 << " nodes left float by the filters";
  llvm::outs() << "\n";
  if (convertedFrom)
    llvm::outs() << "converted from opset " << convertedFrom << " to "
                 << kQdqOpset << " (per-axis Q/DQ needs opset " << kQdqOpset
                 << ")\n";
  if (!writeCalibCache.empty()) {
    ScaleTable written;
    for (const std::string &t : tensors)
      if (scales.count(t))
        written[t] = scales.at(t);
    return writeCache(written);
  }
  return 0;
}
