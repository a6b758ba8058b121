//===- Recipe.h - where a quantization recipe puts Q/DQ ---------*- C++ -*-===//
//
// The placement half of post-training quantization: given a float graph in
// the onnx dialect, decide which tensors get QuantizeLinear/DequantizeLinear
// pairs (TensorRT recipe: inputs and weights of weighted ops; TF recipe:
// outputs and weights), honouring the user's include/exclude filters. The
// decision names the activation tensors that need calibrated scales; with
// the scales it becomes a QdqPlan that can be applied to the IR or to the
// ONNX file.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_QUANTIZATION_RECIPE_H
#define QATC_QUANTIZATION_RECIPE_H

#include "qatc/Frontend/QdqPlan.h"
#include "qatc/Quantization/ScaleTable.h"

#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <string>
#include <vector>

namespace qatc::quantization {

enum class RecipeKind {
  /// TensorRT: quantize the inputs (and weights) of weighted ops, residual
  /// Add inputs, pooling inputs; outputs stay float.
  TensorRT,
  /// TensorFlow/TFLite style: quantize the outputs of every quantizable
  /// group (and weights).
  TF,
};

/// Which input of an Add joining two conv branches stays float (fused into
/// the conv's epilogue), the other being quantized.
enum class ResidualPolicy {
  /// The branch whose conv comes last in the graph (TensorFlow
  /// quantization toolkit, ResNet case).
  Last,
  /// The branch with the longer path from the inputs' lowest common
  /// ancestor (ModelOpt).
  Longest,
};

struct RecipeOptions {
  RecipeKind kind = RecipeKind::TensorRT;
  ResidualPolicy residual = ResidualPolicy::Last;
  /// Regular expressions matched against whole node names.
  std::vector<std::string> includeNodes, excludeNodes;
  /// ONNX op types.
  std::vector<std::string> includeOpTypes, excludeOpTypes;
  /// Chains `A>B>...`: a node of type A whose only consumer is a B...; every
  /// node of a matching chain is selected.
  std::vector<std::string> includePatterns, excludePatterns;
};

/// Parses "trt"/"tf" and "last"/"longest"; returns an error message or "".
std::string parseRecipeKind(llvm::StringRef text, RecipeKind &kind);
std::string parseResidualPolicy(llvm::StringRef text, ResidualPolicy &policy);

/// Fills `options` from the textual forms qatc quantize and
/// qat-recipe-insert take; returns an error message or "".
std::string parseRecipeOptions(llvm::StringRef recipe, llvm::StringRef residual,
                               llvm::ArrayRef<std::string> includeNodes,
                               llvm::ArrayRef<std::string> excludeNodes,
                               llvm::ArrayRef<std::string> includeOpTypes,
                               llvm::ArrayRef<std::string> excludeOpTypes,
                               llvm::ArrayRef<std::string> includePatterns,
                               llvm::ArrayRef<std::string> excludePatterns,
                               RecipeOptions &options);

/// Where the recipe puts Q/DQ, before scales are known.
struct RecipeDecision {
  struct Activation {
    std::string tensor;
    /// (node, input index); empty: every consumer.
    std::vector<std::pair<std::string, unsigned>> consumers;
  };
  struct Weight {
    std::string tensor;
    std::string node;
    unsigned input = 0;
    /// The output-channel axis, or -1 for one scale for the whole weight.
    int64_t axis = -1;
    mlir::Value value;
  };
  std::vector<Activation> activations;
  std::vector<Weight> weights;
  /// Tensors that must share one scale (a Concat's inputs and output).
  std::vector<std::vector<std::string>> sharedScales;
  /// Per node: why it was left float by the user's filters (for messages).
  std::map<std::string, std::string> excluded;
};

/// Decides the placement for `module` (a float graph in the onnx dialect).
/// Fails with a diagnostic on an invalid filter or a graph that already
/// holds Q/DQ nodes.
mlir::FailureOr<RecipeDecision> decideRecipe(mlir::ModuleOp module,
                                             const RecipeOptions &options);

/// The activation tensors whose scales the decision needs, sorted.
std::vector<std::string> tensorsToCalibrate(const RecipeDecision &decision);

/// Combines the decision with activation scales (shared groups take their
/// largest scale) and per-channel weight scales computed from the weights
/// (symmetric int8, amax / 127). Fails, naming them, when tensors have no
/// scale.
mlir::FailureOr<QdqPlan> buildPlan(mlir::ModuleOp module,
                                   const RecipeDecision &decision,
                                   const ScaleTable &scales);

/// Inserts the plan's Q/DQ pairs into `module` as onnx.QuantizeLinear /
/// onnx.DequantizeLinear (weights: int8 constant + DequantizeLinear).
mlir::LogicalResult applyPlan(mlir::ModuleOp module, const QdqPlan &plan);

} // namespace qatc::quantization

#endif // QATC_QUANTIZATION_RECIPE_H
