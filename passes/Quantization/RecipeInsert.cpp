//===- RecipeInsert.cpp - insert Q/DQ into a float graph ------------------===//
//
// The IR form of post-training quantization: decide the placement with a
// recipe (Recipe.cpp), take activation scales from a calibration cache
// (TensorRT's text format) or from the driver's calibration, and insert the
// Q/DQ pairs. `qatc quantize` applies the same plan to the ONNX file instead.
//
//===----------------------------------------------------------------------===//

#include "QuantUtils.h"
#include "qatc/Quantization/CalibrationCache.h"
#include "qatc/Quantization/Passes.h"
#include "qatc/Quantization/Recipe.h"

namespace qatc::quantization {
#define GEN_PASS_DEF_QATRECIPEINSERT
#include "qatc/Quantization/Passes.h.inc"
} // namespace qatc::quantization

using namespace mlir;
using namespace qatc;
using namespace qatc::quantization;

namespace {

struct QatRecipeInsertPass
    : public qatc::quantization::impl::QatRecipeInsertBase<
          QatRecipeInsertPass> {
  using QatRecipeInsertBase::QatRecipeInsertBase;

  QatRecipeInsertPass(const QatRecipeInsertOptions &options, ScaleTable table)
      : QatRecipeInsertBase(options), table(std::move(table)), haveTable(true) {
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    RecipeOptions options;
    std::vector<std::string> in(includeNodes.begin(), includeNodes.end()),
        ex(excludeNodes.begin(), excludeNodes.end()),
        inTypes(includeOpTypes.begin(), includeOpTypes.end()),
        exTypes(excludeOpTypes.begin(), excludeOpTypes.end()),
        inPatterns(includePatterns.begin(), includePatterns.end()),
        exPatterns(excludePatterns.begin(), excludePatterns.end());
    std::string error =
        parseRecipeOptions(recipe, residualPolicy, in, ex, inTypes, exTypes,
                           inPatterns, exPatterns, options);
    if (!error.empty()) {
      emitError(module.getLoc()) << error;
      return signalPassFailure();
    }
    if (!haveTable && failed(readCache(module)))
      return signalPassFailure();
    auto decision = decideRecipe(module, options);
    if (failed(decision))
      return signalPassFailure();
    auto plan = buildPlan(module, *decision, table);
    if (failed(plan) || failed(applyPlan(module, *plan)))
      return signalPassFailure();
    // The float weights now stored as int8.
    eraseUnusedConstants(module);
  }

  LogicalResult readCache(ModuleOp module) {
    if (calibCache.empty())
      return emitError(module.getLoc(),
                       "qat-recipe-insert needs activation scales: "
                       "give calib-cache=FILE");
    std::string error;
    auto cache = calib::CalibrationCache::readFile(calibCache, error);
    if (!cache)
      return emitError(module.getLoc()) << error;
    for (const calib::CalibrationCache::Entry &e : cache->entries)
      table[e.name] = e.scale;
    return success();
  }

  ScaleTable table;
  bool haveTable = false;
};

} // namespace

std::unique_ptr<Pass> qatc::quantization::createQatRecipeInsertPass(
    const QatRecipeInsertOptions &options, ScaleTable scales) {
  return std::make_unique<QatRecipeInsertPass>(options, std::move(scales));
}
