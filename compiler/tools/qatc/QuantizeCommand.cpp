//===- QuantizeCommand.cpp - `qatc quantize` ------------------------------===//
//
//   qatc quantize m_fp32.onnx -o m_qdq.onnx --recipe trt|tf
//        --calib FILE|DIR --calib-method max|percentile|entropy|mse
//        [--percentile 99.99] [--include-nodes RE] [--exclude-nodes RE]
//        [--include-op-types T,...] [--exclude-op-types T,...]
//        [--include-patterns A>B] [--exclude-patterns A>B]
//        [--residual-policy last|longest] [--calib-cache FILE]
//        [--write-calib-cache FILE] [--calib-report FILE.{txt,json}]
//        [--calib-warn-clip SHARE] [--threads N]
//
// Post-training quantization of a float model: place Q/DQ by a recipe,
// calibrate activation scales on sample data with the reference evaluator
// (or read them from a TensorRT calibration cache), and write the original
// model with the Q/DQ nodes inserted, ready for ONNX Runtime or TensorRT.
// Given a model that already holds Q/DQ nodes and --write-calib-cache, it
// writes the model's own activation scales as a calibration cache instead.
// Calibration reports, per tensor, the observed range and what the method
// kept, and warns where a method clips much of the data or cuts a network
// input's range in half.
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
#include "llvm/Support/FormatAdapters.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
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
cl::opt<std::string> calibReport(
    "calib-report",
    cl::desc("Write the calibration report: per tensor the observed range, "
             "the calibrated range and the share of values clipped (.txt or "
             ".json)"),
    cl::value_desc("file"), cl::sub(sub));
cl::opt<double>
    warnClip("calib-warn-clip",
             cl::desc("Warn when calibration clips more than this share of a "
                      "tensor's values (default 0.01: 1 %)"),
             cl::init(0.01), cl::sub(sub));
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

/// One calibrated tensor for the report.
struct ReportRow {
  std::string tensor;
  bool graphInput = false;
  std::vector<std::string> readers; ///< nodes reading it (for advice)
  TensorCalibration c;
  std::string warning; ///< empty when nothing to say
};

/// The report's rows, with a warning where the method clips more than
/// `warnClip` of the values, or keeps less than half the observed range of
/// a graph input (whose range the data defines and no layer before it
/// could absorb).
std::vector<ReportRow> calibrationRows(func::FuncOp func,
                                       const RecipeDecision &decision,
                                       const CalibrationResult &result,
                                       llvm::StringRef method) {
  std::set<std::string> inputs;
  for (const std::string &n : ref::getInputNames(func))
    inputs.insert(n);
  std::map<std::string, std::vector<std::string>> readers;
  for (const RecipeDecision::Activation &a : decision.activations)
    for (const auto &[node, index] : a.consumers)
      readers[a.tensor].push_back(node);
  std::vector<ReportRow> rows;
  for (const auto &[name, c] : result.tensors) {
    ReportRow r{name, inputs.count(name) > 0, readers[name], c, ""};
    double observed = std::max(std::abs(c.min), std::abs(c.max));
    bool clips = c.clipped > warnClip;
    bool halves = r.graphInput && observed > 0 && c.amax < 0.5 * observed;
    if (clips || halves) {
      std::string what =
          llvm::formatv("{0} calibration keeps [-{1:g}, {1:g}] of the "
                        "observed [{2:g}, {3:g}] and clips {4:f2} % of its "
                        "values",
                        method, c.amax, c.min, c.max, 100 * c.clipped)
              .str();
      std::string advice = method == "max" ? ""
                                           : "try --calib-method max or "
                                             "percentile";
      if (!r.readers.empty())
        advice += (advice.empty() ? "" : ", or ") +
                  ("leave the node float (--exclude-nodes '" +
                   r.readers.front() + "')");
      r.warning = what + (advice.empty() ? "" : "; " + advice);
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

/// Writes the report as a table (.txt) or JSON (.json).
int writeCalibrationReport(const std::vector<ReportRow> &rows,
                           llvm::StringRef method, size_t samples) {
  std::string error;
  auto out = openOutputFile(calibReport, &error);
  if (!out) {
    llvm::errs() << "qatc quantize: " << error << "\n";
    return 1;
  }
  if (llvm::StringRef(calibReport).ends_with(".json")) {
    llvm::json::Array tensors;
    for (const ReportRow &r : rows)
      tensors.push_back(
          llvm::json::Object{{"tensor", r.tensor},
                             {"graph_input", r.graphInput},
                             {"read_by", llvm::json::Array(r.readers)},
                             {"method", method},
                             {"range", r.c.amax},
                             {"observed_min", r.c.min},
                             {"observed_max", r.c.max},
                             {"values", static_cast<int64_t>(r.c.values)},
                             {"clipped_share", r.c.clipped},
                             {"warning", r.warning}});
    out->os() << llvm::formatv("{0:2}\n",
                               llvm::json::Value(llvm::json::Object{
                                   {"method", method},
                                   {"samples", static_cast<int64_t>(samples)},
                                   {"tensors", std::move(tensors)}}));
  } else {
    out->os() << llvm::formatv("calibration: {0}, {1} samples, {2} tensors\n",
                               method, samples, rows.size());
    size_t width = 6;
    for (const ReportRow &r : rows)
      width = std::max(width, r.tensor.size());
    out->os() << llvm::formatv(
        "{0} {1,12} {2,12} {3,12} {4,9}  {5}\n",
        llvm::fmt_align("tensor", llvm::AlignStyle::Left, width), "range",
        "min", "max", "clipped", "note");
    for (const ReportRow &r : rows)
      out->os() << llvm::formatv(
          "{0} {1,12:g} {2,12:g} {3,12:g} {4,8:f3}%  {5}\n",
          llvm::fmt_align(r.tensor, llvm::AlignStyle::Left, width), r.c.amax,
          r.c.min, r.c.max, 100 * r.c.clipped,
          r.warning.empty() ? (r.graphInput ? "graph input" : "")
                            : "WARNING: " + r.warning);
  }
  out->keep();
  llvm::outs() << "wrote the calibration report to " << calibReport << "\n";
  return 0;
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
  if (!(warnClip >= 0 && warnClip <= 1))
    return usage("--calib-warn-clip is a share of the values, in [0, 1]");
  if (!calibReport.empty() && (calibData.empty() || !calibCache.empty()))
    return usage("--calib-report reports calibration on data (--calib); a "
                 "calibration cache has no data to report on");

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
    llvm::outs().flush();
    std::vector<ReportRow> rows =
        calibrationRows(func, *decision, *result, calibMethod);
    for (const ReportRow &r : rows)
      if (!r.warning.empty())
        llvm::errs() << "qatc quantize: warning: tensor '" << r.tensor << "'"
                     << (r.graphInput ? " (graph input)" : "") << ": "
                     << r.warning << "\n";
    if (!calibReport.empty() &&
        writeCalibrationReport(rows, calibMethod, samples->size()) != 0)
      return 1;
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
