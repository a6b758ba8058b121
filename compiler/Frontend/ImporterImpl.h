//===- ImporterImpl.h - internals shared by the ONNX importer ---*- C++ -*-===//
//
// The graph-level importer (OnnxImporter.cpp) walks nodes in topological
// order and hands each one to a per-op handler (OnnxNodeImporters.cpp)
// through a NodeImporter, which gives typed access to inputs and attributes,
// folds constant shape computations as ops are built and reports errors at
// the node's location.
//
//===----------------------------------------------------------------------===//

#ifndef QATC_COMPILER_FRONTEND_IMPORTERIMPL_H
#define QATC_COMPILER_FRONTEND_IMPORTERIMPL_H

#include "qatc/Dialect/Onnx/OnnxOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringSet.h"

#include "onnx/onnx_pb.h"

/// The ONNX protobuf namespace, named apart from the dialect's qatc::onnx.
namespace onnxpb = ::onnx;

#include <optional>
#include <string>

namespace qatc::detail {

/// Maps an ONNX TensorProto data type to an MLIR element type; null when qatc
/// cannot represent it. `why` receives a reason for refused types.
mlir::Type convertElementType(mlir::MLIRContext *ctx, int32_t dataType,
                              std::string *why = nullptr);

/// The name qatc gives node number `index` of a graph: its own name, or for
/// an unnamed node `<OpType>_<index>` made unique against `usedNames` (the
/// names the graph's nodes carry).
std::string nodeName(const onnxpb::NodeProto &node, int index,
                     const llvm::StringSet<> &usedNames);

/// ONNX name of a TensorProto data type ("FLOAT", "INT8", ...).
std::string dataTypeName(int32_t dataType);

/// Turns a TensorProto into an elements attribute: small tensors inline,
/// larger ones as resource blobs named after `blobName` that take the raw
/// bytes out of `t` (so a large weight is never held twice). External data
/// is read relative to `baseDir`. Errors are emitted at `loc`.
mlir::FailureOr<mlir::ElementsAttr> convertTensor(mlir::MLIRContext *ctx,
                                                  onnxpb::TensorProto &t,
                                                  llvm::StringRef blobName,
                                                  llvm::StringRef baseDir,
                                                  mlir::Location loc);

/// Largest dimension and element count qatc accepts for any tensor; they keep
/// all size arithmetic far from int64 overflow.
inline constexpr int64_t kMaxDimension = int64_t(1) << 31;
inline constexpr int64_t kMaxElements = int64_t(1) << 40;

/// True when every dimension and the element count are within the limits.
bool isReasonableShape(llvm::ArrayRef<int64_t> shape);

/// Converts an ONNX attribute for `onnx.Unsupported`; never fails (subgraphs
/// and sparse tensors become descriptive strings).
mlir::Attribute convertGenericAttribute(mlir::MLIRContext *ctx,
                                        const onnxpb::AttributeProto &attr);

/// Everything a per-op handler needs to import one node.
class NodeImporter {
public:
  NodeImporter(mlir::OpBuilder &builder, const onnxpb::NodeProto &node,
               mlir::Location loc, int64_t opset, llvm::StringRef baseDir,
               llvm::SmallVector<mlir::Value> inputs)
      : builder(builder), node(node), loc(loc), opset(opset), baseDir(baseDir),
        inputs(std::move(inputs)) {}

  mlir::OpBuilder &builder;
  const onnxpb::NodeProto &node;
  mlir::Location loc;
  /// Default-domain opset of the model.
  int64_t opset;
  /// Directory of the model (external data of Constant nodes).
  llvm::StringRef baseDir;

  mlir::MLIRContext *getContext() { return builder.getContext(); }

  /// The i-th input; null when absent (beyond the list or named "").
  mlir::Value input(size_t i) const {
    return i < inputs.size() ? inputs[i] : mlir::Value();
  }
  size_t numInputs() const { return inputs.size(); }

  /// Emits an error at the node and returns failure.
  mlir::InFlightDiagnostic error() { return mlir::emitError(loc); }

  // Attributes.
  const onnxpb::AttributeProto *attr(llvm::StringRef name) const;
  int64_t intAttr(llvm::StringRef name, int64_t dflt) const;
  float floatAttr(llvm::StringRef name, float dflt) const;
  std::string stringAttr(llvm::StringRef name, llvm::StringRef dflt) const;
  std::optional<llvm::SmallVector<int64_t>>
  intsAttr(llvm::StringRef name) const;
  std::optional<llvm::SmallVector<float>>
  floatsAttr(llvm::StringRef name) const;

  /// The values of a constant integer input (after folding), or nullopt.
  std::optional<llvm::SmallVector<int64_t>> constInts(mlir::Value v) const;
  /// The values of a constant float input, or nullopt.
  std::optional<llvm::SmallVector<double>> constFloats(mlir::Value v) const;

  /// Like constInts but emits "input N ('what') of <Op> must be a constant"
  /// when it is not.
  mlir::FailureOr<llvm::SmallVector<int64_t>>
  requireConstInts(size_t i, llvm::StringRef what);

  /// Static shape of `v`, or failure with an error when it is not static.
  mlir::FailureOr<llvm::ArrayRef<int64_t>> staticShape(mlir::Value v,
                                                       llvm::StringRef what);

  /// Builds op `opName` with `operands` and `attrs`, inferring result types
  /// through the op's shape inference (errors land on the node), then folds
  /// it when all its operands are constants. Returns the results.
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  build(llvm::StringRef opName, mlir::ValueRange operands,
        llvm::ArrayRef<mlir::NamedAttribute> attrs = {});

  /// Same, with explicit result types (ops without shape inference).
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  buildWithTypes(llvm::StringRef opName, mlir::ValueRange operands,
                 llvm::ArrayRef<mlir::NamedAttribute> attrs,
                 mlir::TypeRange resultTypes);

  /// Convenience for single-result ops.
  mlir::FailureOr<mlir::Value>
  build1(llvm::StringRef opName, mlir::ValueRange operands,
         llvm::ArrayRef<mlir::NamedAttribute> attrs = {});

  /// A constant tensor op.
  mlir::Value constant(mlir::TypedAttr value);

  /// Evaluates `op`, whose operands are all constants, with the reference
  /// evaluator and returns constants for its results; nullopt (and no
  /// diagnostic) when it cannot or should not (Q/DQ, large results).
  std::optional<llvm::SmallVector<mlir::Value>>
  evaluateConstantOp(mlir::Operation *op);

  mlir::NamedAttribute named(llvm::StringRef name, mlir::Attribute value) {
    return builder.getNamedAttr(name, value);
  }
  mlir::NamedAttribute i64(llvm::StringRef name, int64_t v) {
    return named(name, builder.getI64IntegerAttr(v));
  }
  mlir::NamedAttribute f32(llvm::StringRef name, float v) {
    return named(name, builder.getF32FloatAttr(v));
  }
  mlir::NamedAttribute ints(llvm::StringRef name, llvm::ArrayRef<int64_t> v) {
    return named(name, builder.getDenseI64ArrayAttr(v));
  }
  mlir::NamedAttribute str(llvm::StringRef name, llvm::StringRef v) {
    return named(name, builder.getStringAttr(v));
  }

  /// Results of the node, in ONNX output order (null for outputs qatc does
  /// not produce); filled by the handler.
  llvm::SmallVector<mlir::Value> results;

private:
  llvm::SmallVector<mlir::Value> inputs;
};

/// Parses a binary (or, when `isText`, textual) ONNX model; errors at
/// `fileLoc`. May throw (libonnx's parser): call inside a try block.
mlir::LogicalResult parseModel(llvm::StringRef buffer, bool isText,
                               onnxpb::ModelProto &model,
                               mlir::Location fileLoc);

/// `base`, or `base_1`, `base_2`, ... : the first that `used` does not
/// hold, which is then added to it (names of new tensors and nodes).
std::string uniqueName(llvm::StringSet<> &used, llvm::StringRef base);

/// The float32 data of a tensor stored in the model (raw or as
/// float_data), or nullopt for another type, external data or a size that
/// does not match the dims.
std::optional<std::vector<float>> floatData(const onnxpb::TensorProto &tensor);

/// Prints `model` as ONNX text (initializers included).
void printModelText(const onnxpb::ModelProto &model, llvm::raw_ostream &os);

/// Rewrites `model` (default-domain opset 7 to 12) to `targetOpset` (13):
/// attributes that became inputs (Slice, Clip, Pad, Squeeze, Unsqueeze,
/// Split, ReduceSum, TopK), Upsample and opset-10 Resize to Resize,
/// (Log)Softmax / Hardmax's old 2-D coercion, BatchNormalization's `spatial`,
/// Dropout's `ratio`, Scatter to ScatterElements; every other op must have a
/// definition that did not change in a way that matters, or the node is
/// refused. Diagnostics name the node. Does nothing when the model's opset
/// is already `targetOpset` or later. Sets `fromOpset` to the model's opset.
mlir::LogicalResult upgradeOpset(mlir::MLIRContext &ctx, llvm::StringRef path,
                                 onnxpb::ModelProto &model, int64_t targetOpset,
                                 int64_t &fromOpset);

/// Handler for one ONNX op type; returns failure after emitting an error.
using NodeHandler = mlir::LogicalResult (*)(NodeImporter &);

// Helpers shared by the handlers.

/// Records `v` as the node's only result (or passes a failure on).
mlir::LogicalResult single(NodeImporter &ni, mlir::FailureOr<mlir::Value> v);
/// Requires `count` leading inputs to be present.
mlir::LogicalResult requireInputs(NodeImporter &ni, size_t count);
/// Normalizes one axis against `rank`, reporting out-of-range values.
mlir::FailureOr<int64_t> normAxis(NodeImporter &ni, int64_t axis, int64_t rank);
/// Reads an `axes` list from an attribute (before `inputSinceOpset`) or an
/// optional constant input; nullopt when absent.
mlir::FailureOr<std::optional<llvm::SmallVector<int64_t>>>
readAxes(NodeImporter &ni, int64_t inputSinceOpset, size_t inputIndex);
/// The axes a Reduce* node reduces (from its `axes` attribute, or input 1
/// from `inputSinceOpset`), normalized; every axis when none are given, and
/// nullopt when the node is a no-op (noop_with_empty_axes).
mlir::FailureOr<std::optional<llvm::SmallVector<int64_t>>>
reduceAxes(NodeImporter &ni, int64_t inputSinceOpset);
/// Normalizes and sorts axes; rejects duplicates.
mlir::FailureOr<llvm::SmallVector<int64_t>>
normAxes(NodeImporter &ni, llvm::ArrayRef<int64_t> axes, int64_t rank);

// Handlers of OnnxMathImporters.cpp: comparisons, selection, min/max and
// variadic sums, reductions, arg-reductions, tiling and block moves, and the
// shape-only ops (Range, Size) that always fold to constants.
mlir::LogicalResult importVariadic(NodeImporter &ni);
mlir::LogicalResult importMod(NodeImporter &ni);
mlir::LogicalResult importElu(NodeImporter &ni);
mlir::LogicalResult importWhere(NodeImporter &ni);
mlir::LogicalResult importReduce(NodeImporter &ni);
mlir::LogicalResult importArgReduce(NodeImporter &ni);
mlir::LogicalResult importTopK(NodeImporter &ni);
mlir::LogicalResult importExpand(NodeImporter &ni);
mlir::LogicalResult importTile(NodeImporter &ni);
mlir::LogicalResult importDepthSpace(NodeImporter &ni);
mlir::LogicalResult importRange(NodeImporter &ni);
mlir::LogicalResult importSize(NodeImporter &ni);
mlir::LogicalResult importUpsample(NodeImporter &ni);

// OnnxComposedImporters.cpp: the operators imported as compositions of
// other ops, each with its handler and its line in that file's table.
/// The handler of composed operator `opType`, or null.
NodeHandler lookupComposedHandler(llvm::StringRef opType);
/// Appends the composed operators' names.
void appendComposedOps(std::vector<std::string> &ops);

/// The handler for `opType` in the default ONNX domain, or null when qatc
/// does not support it.
NodeHandler lookupNodeHandler(llvm::StringRef opType);

} // namespace qatc::detail

#endif // QATC_COMPILER_FRONTEND_IMPORTERIMPL_H
