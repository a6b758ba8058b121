//===- Passes.h - qatc's quantization passes --------------------*- C++ -*-===//
//
// Declarations of the quantization passes (generated from Passes.td), the
// named pipelines `qatc-opt` and the driver share, and their registration.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_QUANTIZATION_PASSES_H
#define QATC_QUANTIZATION_PASSES_H

#include "qatc/Dialect/Onnx/OnnxOps.h"
#include "qatc/Dialect/Qat/QatOps.h"
#include "qatc/Quantization/ScaleTable.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

#include <map>
#include <memory>
#include <string>

namespace qatc::quantization {

#define GEN_PASS_DECL
#include "qatc/Quantization/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "qatc/Quantization/Passes.h.inc"

/// The recipe pass with a calibration table given in memory (the driver
/// calibrates, then inserts) instead of a cache file.
std::unique_ptr<mlir::Pass>
createQatRecipeInsertPass(const QatRecipeInsertOptions &options,
                          ScaleTable scales);

/// Options of the `qat-lower` pipeline (Q/DQ ONNX graph to the qat
/// dialect).
struct LowerToQatOptions : public mlir::PassPipelineOptions<LowerToQatOptions> {
  Option<bool> trtCompat{*this, "trt-compat",
                         llvm::cl::desc("refuse what TensorRT refuses"),
                         llvm::cl::init(false)};
  Option<std::string> precisionOverride{
      *this, "precision-override",
      llvm::cl::desc("file of '<node regex> fp32|int8' lines")};
  Option<std::string> precisionReport{
      *this, "precision-report",
      llvm::cl::desc("write the precision report (.txt, .csv, .json, .html)")};
  Option<std::string> precisionReportProfile{
      *this, "precision-report-profile",
      llvm::cl::desc("a `qatc bench --json` file: each layer's time on the "
                     "HTML precision report")};
  Option<bool> remarks{*this, "remarks",
                       llvm::cl::desc("emit a remark per fp32 compute node"),
                       llvm::cl::init(false)};
};

/// Builds the pipeline from a Q/DQ graph in the onnx dialect to the qat
/// dialect: legality check, Q/DQ conversion, weight folding, propagation,
/// [precision overrides,] fusion[, precision report].
void buildLowerToQatPipeline(mlir::OpPassManager &pm,
                             const LowerToQatOptions &options);

/// Registers every quantization pass and pipeline with the global registry
/// (for qatc-opt and --pass-pipeline parsing in the driver).
void registerPassesAndPipelines();

} // namespace qatc::quantization

#endif // QATC_QUANTIZATION_PASSES_H
