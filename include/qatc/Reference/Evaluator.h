//===- Evaluator.h - the reference evaluator of the onnx dialect -*- C++
//-*-===//
//
// Evaluates an imported model exactly as its ONNX graph says, Q/DQ included
// (QuantizeLinear divides in the float type and rounds half to even, as in
// qdq-rules §2). It is the golden model of qatc's tests and of calibration:
// clarity first, but convolutions and matrix products use a blocked GEMM so a
// ResNet-50 image takes about a second.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_REFERENCE_EVALUATOR_H
#define QATC_REFERENCE_EVALUATOR_H

#include "qatc/Reference/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace qatc::ref {

struct EvalOptions {
  /// Compute every float tensor in float64 instead of float32 (inputs and
  /// constants are widened, outputs are float64). The difference between the
  /// two evaluations of one Q/DQ graph is its noise floor.
  bool fp64 = false;
  /// Called for every graph input and every op result that names an ONNX
  /// tensor, in evaluation order.
  std::function<void(llvm::StringRef name, const Tensor &value)> onTensor;
  /// Layer-wise evaluation: after an op computes a named tensor (and
  /// `onTensor` saw it), its consumers read this tensor instead when it
  /// returns one of the same type and shape, so each layer runs on another
  /// evaluation's inputs (e.g. the reference's, to check one layer at a
  /// time).
  std::function<const Tensor *(llvm::StringRef name)> substitute;
};

/// Evaluates the model's `@main_graph` on `inputs` (in the order of the graph
/// inputs). A wrong number, element type or shape of inputs, or a failing
/// op, is reported as a diagnostic at the graph input or the op.
mlir::FailureOr<std::vector<Tensor>> evaluate(mlir::ModuleOp module,
                                              llvm::ArrayRef<Tensor> inputs,
                                              const EvalOptions &options = {});

/// Evaluates one op of the onnx or qat dialect on `inputs` (its operands'
/// values, in order), in float32 unless `fp64`. The importer folds constant
/// subgraphs with it, so folding means exactly what evaluation means.
mlir::FailureOr<llvm::SmallVector<Tensor, 1>>
evaluateOp(mlir::Operation *op, llvm::ArrayRef<Tensor> inputs,
           bool fp64 = false);

/// The values of an elements attribute as a tensor of `elementType`'s own
/// dtype (float32, int8, ...; a quantized type as its stored integers): a
/// weight blob is wrapped without a copy, a dense literal copied with splats
/// expanded. nullopt for an element type the evaluator does not handle, or a
/// blob whose size does not match.
std::optional<Tensor> constantValues(mlir::ElementsAttr value,
                                     mlir::Type elementType);

/// `t` as a dense elements attribute of `type` (whose element type has
/// `t`'s dtype; float32 for a float tensor); null if they disagree.
mlir::DenseElementsAttr tensorAttr(const Tensor &t,
                                   mlir::RankedTensorType type);

/// The attributes of a Resize (onnx.Resize or qat.resize) that decide its
/// taps.
struct ResizeParams {
  std::string mode = "nearest", coordinateMode = "half_pixel",
              nearestMode = "round_prefer_floor";
  double cubicCoeffA = -0.75;
  bool excludeOutside = false;
  static ResizeParams of(mlir::Operation *op);
};

/// The input taps of each output position along one axis of a Resize:
/// `perOutput` (1 nearest, 2 linear, 4 cubic) clamped input indices and
/// weights per output index. The reference and the code generator both
/// interpolate with these.
struct ResizeTaps {
  int64_t perOutput = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
};
ResizeTaps resizeTaps(const ResizeParams &params, int64_t inLen, int64_t outLen,
                      double scale);

/// The model's function.
mlir::func::FuncOp getMainFunction(mlir::ModuleOp module);

/// The ONNX names of the graph inputs / outputs, in order.
std::vector<std::string> getInputNames(mlir::func::FuncOp func);
std::vector<std::string> getOutputNames(mlir::func::FuncOp func);

} // namespace qatc::ref

#endif // QATC_REFERENCE_EVALUATOR_H
