//===- Pipelines.cpp - named pipelines and pass registration --------------===//
//
// One definition of each pipeline, used by `qatc-opt --qat-lower` and by the
// driver, so the two always run the same passes; `qatc compile
// --print-pipeline` prints it as one textual pipeline.
//
//===----------------------------------------------------------------------===//

#include "qatc/Quantization/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace qatc::quantization;

void qatc::quantization::buildLowerToQatPipeline(
    OpPassManager &pm, const LowerToQatOptions &options) {
  QatLegalityCheckOptions legality;
  legality.trtCompat = options.trtCompat;
  pm.addPass(createQatLegalityCheck(legality));
  if (!options.precisionOverride.empty()) {
    QatPrecisionOverrideOptions override;
    override.file = options.precisionOverride;
    pm.addPass(createQatPrecisionOverride(override));
  }
  pm.addPass(createQatConvTransposeToConv());
  pm.addPass(createQatLayerNormFuse());
  pm.addPass(createQatQdqConvert());
  pm.addPass(createQatWeightsFold());
  pm.addPass(createQatQdqPropagate());
  // Propagation can move a quantize onto a float constant (a Concat's
  // constant input): fold those too.
  pm.addPass(createQatWeightsFold());
  pm.addPass(createQatOpsFuse());
  // The report also enforces the override file's int8 requirements.
  if (!options.precisionReport.empty() || options.remarks ||
      !options.precisionOverride.empty()) {
    QatPrecisionReportOptions report;
    report.file = options.precisionReport;
    report.profile = options.precisionReportProfile;
    report.remarks = options.remarks;
    pm.addPass(createQatPrecisionReport(report));
  }
}

void qatc::quantization::registerPassesAndPipelines() {
  registerQuantizationPasses();
  PassPipelineRegistration<LowerToQatOptions>(
      "qat-lower",
      "Lower a Q/DQ graph in the onnx dialect to the qat dialect (legality, "
      "Q/DQ conversion, weight folding, propagation, fusion, report)",
      buildLowerToQatPipeline);
}
